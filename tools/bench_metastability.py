"""Benchmark (not a test): rejection-free engine vs plain (SAP) stepping, across beta.

Usage:  .venv/bin/python tools/bench_metastability.py [--quick]

Setting: equilateral triangle on S^1, 2 coincident tokens per vertex (n = 6), gamma = 0.1,
eps = 0.05 (single-jump regime). Reports exits per second of the engine (10^4 exits per
beta), chain-steps per second of plain stepping (attention_fw.model.dynamics.sap_step on 1000
chains for a few seconds), the exits per second plain stepping would deliver
(steps/s / E[T2], exact E[T2] = 1/(1 - q)), and their ratio. Plain stepping is called
feasible when 10^4 exits would take less than one hour.
"""
from __future__ import annotations

import math
import time

import numpy as np

from attention_fw.model.dynamics import sap_step
from attention_fw.experiments.exit_times import cluster_configuration, engine_exit_times, frozen_escape_rate
from attention_fw.geometry.polytope import points_on_circle


def bench(betas=(3.0, 4.0, 5.0, 6.0, 7.0, 16.0, 20.0, 25.0), *, exits: int = 10_000,
          step_runs: int = 1000, step_budget_s: float = 5.0, gamma: float = 0.1, eps: float = 0.05,
          counts=(2, 2, 2), seed: int = 0) -> list[dict]:
    """Exits per second of the engine and chain-steps per second of plain (SAP) stepping.

    Setting: equilateral triangle, ``counts`` coincident tokens per vertex, single-jump
    regime (``eps < gamma sqrt(3)``). For each beta: time ``exits`` engine exits; time plain
    stepping of ``step_runs`` chains for at most ``step_budget_s`` seconds (or until all
    exit) and convert to exits per second with the exact ``E[T2] = 1 / (1 - q)``. Plain
    stepping is reported as feasible when ``E[T2] * exits / steps_per_s`` is below one hour.
    """
    v = points_on_circle()
    x0, sigma = cluster_configuration(v, np.asarray(counts))
    out = []
    for beta in betas:
        lam = frozen_escape_rate(v, np.asarray(counts), beta)
        mean_T2 = 1.0 / -math.expm1(-lam)
        t0 = time.perf_counter()
        es = engine_exit_times(x0, sigma, gamma, beta, eps, exits, rng=seed)
        t_eng = time.perf_counter() - t0
        g = np.random.default_rng(seed)
        x = np.broadcast_to(x0, (step_runs,) + x0.shape).copy()
        steps = 0
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < step_budget_s and steps < 10 * mean_T2:
            x = sap_step(x, gamma, beta, rng=g)
            steps += 1
        t_step = time.perf_counter() - t0
        sps = steps * step_runs / t_step
        plain_exits_ps = sps / mean_T2
        out.append({"beta": float(beta), "E_T2": mean_T2, "engine_exits": exits,
                    "engine_seconds": t_eng, "engine_exits_per_s": exits / t_eng,
                    "engine_censored": es.n_censored,
                    "plain_chain_steps_per_s": sps, "plain_exits_per_s": plain_exits_ps,
                    "plain_feasible": bool(mean_T2 * exits / sps < 3600.0),
                    "speedup": (exits / t_eng) / plain_exits_ps})
    return out


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="three temperatures and shorter budgets")
    quick = ap.parse_args(argv).quick
    betas = (3.0, 5.0, 16.0) if quick else (3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 10.0, 16.0, 20.0, 25.0, 40.0)
    rows = bench(betas, step_budget_s=1.0 if quick else 4.0)
    hdr = f"{'beta':>6} {'E[T2]':>10} {'engine exits/s':>15} {'engine s/1e4':>12} {'plain steps/s':>14} " \
          f"{'plain exits/s':>14} {'feasible':>8} {'ratio':>10}"
    print(hdr)
    for r in rows:
        print(f"{r['beta']:6.1f} {r['E_T2']:10.3g} {r['engine_exits_per_s']:15.3g} "
              f"{r['engine_seconds'] * 1e4 / r['engine_exits']:12.3f} {r['plain_chain_steps_per_s']:14.3g} "
              f"{r['plain_exits_per_s']:14.3g} {str(r['plain_feasible']):>8} {r['speedup']:10.3g}")
    feas = [r for r in rows if r["plain_feasible"]]
    if feas:
        r = max(feas, key=lambda r: r["beta"])
        print(f"\nlargest beta where plain stepping is feasible (1e4 exits < 1 h): {r['beta']:g}; "
              f"engine / plain exits per second there: {r['speedup']:.3g}")
    big = [r for r in rows if r["E_T2"] > 1e9]
    if big:
        r = max(big, key=lambda r: r["beta"])
        print(f"largest beta measured with E[T2] > 1e9: {r['beta']:g} (E[T2] = {r['E_T2']:.3g}); "
              f"1e4 engine exits took {r['engine_seconds'] * 1e4 / r['engine_exits']:.3f} s")
    # theorem regime eps / gamma = 3.5 >= 2 d(K), one token per vertex: several events per exit
    x0, sigma = cluster_configuration(points_on_circle(), np.array([1, 1, 1]))
    print("\ntheorem regime (eps/gamma = 3.5, n = 3), engine:")
    print(f"{'beta':>6} {'mean T2':>10} {'events/exit':>12} {'exits/s':>10}")
    for beta in ((8.0, 32.0) if quick else (8.0, 16.0, 24.0, 32.0, 48.0)):
        t0 = time.perf_counter()
        es = engine_exit_times(x0, sigma, 0.1, beta, 0.35, 10_000, rng=0)
        dt = time.perf_counter() - t0
        print(f"{beta:6.1f} {es.times.mean():10.3g} {es.events.mean():12.2f} {1e4 / dt:10.3g}")
    return rows


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
