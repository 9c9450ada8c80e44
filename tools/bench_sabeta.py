"""Benchmark (not a test): the (SA-beta) exit-time kernel, cost per step and wall time to T2 = 10^7.

Usage:  .venv/bin/python tools/bench_sabeta.py [--quick]

Setting: the equilateral triangle with ``m`` tokens at distance 0.05 around each vertex
(n = 3 (1 + m) tokens, d = 2), gamma = 0.1, eps = 0.1, and beta = 40, where no token leaves
within the horizon, so every step is stepped and every exit test that can matter is made: the
cost of reaching T2 = horizon is the cost of ``horizon`` steps. B = I, so the kernel takes its
symmetric path (blocks of 4 rows on and right of the diagonal: 8 K (K + 1) exponentials per step,
K = ceil(n / 4); 1248 at n = 48, n (n + 1) / 2 = 1176 for the triangle). Reports, for n = 3 ... 48, the
cost per step of one system, and of two systems at once (one per core: the kernel runs one
system per thread), and the wall time of 10^7 steps (10^6 with --quick) at n = 48, each with the CPU
time per system (what an unloaded core takes; on a shared machine the wall time also counts the
waiting for a core).

At n = 48 the report also splits one step into its phases (pair scores, exponentials, weighted
sums, the rest), CPU time on one core.

The bound beside it, measured in the same run: a step of a symmetric method evaluates at least
n (n + 1) / 2 exponentials, so it cannot cost less than that many exponentials at the machine's exp
rate. Two
rates are measured on one core (CPU time): numpy's ``exp`` on float64 arrays (on CPUs without
AVX-512 a library call per entry) and the kernel's own vectorised exponential
(``sabeta._exp_into``, as the symmetric path calls it when every argument is at least -708) on arrays
of one step's length. The report gives the cost of a step in
units of each bound (a ratio, not a timed test).
"""
from __future__ import annotations

import sys
import time

import numpy as np

from attention_fw.experiments.exit_times import near_vertex_configuration
from attention_fw.experiments import sabeta as _sb
from attention_fw.experiments.sabeta import sabeta_exit_times
from attention_fw.geometry.polytope import regular_polygon


def _config(m):
    return near_vertex_configuration(regular_polygon(3), m, 0.05, rng=1)


def per_step(m: int, steps: int, systems: int) -> tuple[float, float]:
    """Wall and CPU seconds per step and system for ``systems`` copies of the n = 3 (1 + m) configuration
    (the CPU time is what an unloaded core would take; the wall time includes waiting for a core)."""
    x0, sigma = _config(m)
    sabeta_exit_times(x0, sigma, 0.1, 40.0, 0.1, cap=10)                 # compile / load the kernel
    t0, c0 = time.perf_counter(), time.process_time()
    res = sabeta_exit_times([x0] * systems, [sigma] * systems, 0.1, 40.0, 0.1, cap=steps)
    dt, dc = time.perf_counter() - t0, time.process_time() - c0
    assert not res.exited.any()
    return dt / steps / systems, dc / steps / systems


def exp_rates(n: int, reps: int) -> tuple[float, float]:
    """CPU seconds per exponential on one core: numpy's ``exp`` (float64, arrays of 2^16 entries) and the
    kernel's ``_exp_into`` (one step's n (n + 1) / 2 entries, in a compiled loop), arguments in [-40, 0]."""
    g = np.random.default_rng(0)
    big = g.uniform(-40.0, 0.0, 1 << 16)
    out = np.empty_like(big)
    np.exp(big, out=out)
    c0 = time.process_time()
    for _ in range(reps):
        np.exp(big, out=out)
    numpy_rate = (time.process_time() - c0) / reps / big.size
    P = n * (n + 1) // 2
    a = g.uniform(-40.0, 0.0, P)
    e = np.empty(P)
    loops = max(1, reps * big.size // P)
    _exp_loop(a, e, 1)
    c0 = time.process_time()
    _exp_loop(a, e, loops)
    own_rate = (time.process_time() - c0) / loops / P
    return numpy_rate, own_rate


def phases(m: int, loops: int) -> dict[str, float]:
    """CPU seconds of each phase of one symmetric-path step, on one core: the pair scores of the block
    layout (``_blk_scores``), their exponentials (``_exp_into``) and the weighted row and column sums
    (``_blk_sums3``), each repeated ``loops`` times on the n = 3 (1 + m) configuration at beta 40."""
    x0, _ = _config(m)
    n, D = x0.shape
    nb = (n + 3) // 4 * 4
    P = 8 * (nb // 4) * (nb // 4 + 1)
    xt = np.zeros((D, nb))
    xt[:, :n] = x0.T
    Bm, b = np.eye(D)[None], 40.0
    hb = 0.5 * b * (xt * xt).sum(0)
    V = np.zeros((D + 1, nb))
    V[0, :n] = np.exp(hb[:n])
    V[1:] = V[0] * xt
    a, e = np.empty(P), np.empty(P)
    R, C = [np.empty(nb) for _ in range(D + 1)], [np.empty(nb) for _ in range(D + 1)]
    out = {}
    for name, run in (("scores", lambda L: _scores_loop(xt, Bm, hb, a, b, nb, D, L)),
                      ("exponentials", lambda L: _exp_loop(a, e, L)),
                      ("sums", lambda L: _sums_loop(V[0], V[1], V[2], e, *R, *C, nb, L))):
        run(1)
        c0 = time.process_time()
        run(loops)
        out[name] = (time.process_time() - c0) / loops
    return out


def _scores_loop_py(xt, Bm, hb, a, b, nb, D, loops):
    for _ in range(loops):
        _sb._blk_scores(xt, Bm, 0, hb, a, b, nb, D)


def _sums_loop_py(V0, V1, V2, e, R0, R1, R2, C0, C1, C2, nb, loops):
    for _ in range(loops):
        _sb._blk_sums3(V0, V1, V2, e, R0, R1, R2, C0, C1, C2, nb)


def _exp_loop_py(a, e, loops):
    for _ in range(loops):
        _sb._exp_into(a, e, a.size, False)


try:                          # compiled at each run, not cached: numba's cache of a function does not notice a
    import numba as _numba    # change of the kernel functions it inlines (it would time the previous kernel)

    _scores_loop = _numba.njit(_scores_loop_py)
    _sums_loop = _numba.njit(_sums_loop_py)
    _exp_loop = _numba.njit(_exp_loop_py)
except ImportError:                                   # pragma: no cover - numba is pinned
    _scores_loop, _sums_loop, _exp_loop = _scores_loop_py, _sums_loop_py, _exp_loop_py


def main(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="20,000 steps instead of 200,000")
    quick = ap.parse_args(argv).quick
    steps = 20_000 if quick else 200_000
    horizon = 10**6 if quick else 10**7
    print("(SA-beta) exit-time kernel: microseconds per step and system (triangle, gamma 0.1, beta 40)")
    print(f"{'n':>4s} {'1 system: wall':>15s} {'cpu':>7s} {'2 systems: wall':>16s} {'cpu':>7s}"
          f" {'bound (numpy exp)':>18s} {'bound (own exp)':>16s} {'cpu / own bound':>16s}")
    for m in (0, 2, 7, 15):
        n = 3 * (1 + m)
        one = per_step(m, steps, 1)
        two = per_step(m, steps, 2)
        np_rate, own_rate = exp_rates(n, 20 if quick else 100)
        P = n * (n + 1) // 2
        print(f"{n:4d} {one[0] * 1e6:15.2f} {one[1] * 1e6:7.2f} {two[0] * 1e6:16.2f} {two[1] * 1e6:7.2f}"
              f" {P * np_rate * 1e6:18.2f} {P * own_rate * 1e6:16.2f} {one[1] / (P * own_rate):16.2f}")
        if n == 48:
            print(f"     (exp rates measured in this run, one core: numpy {np_rate * 1e9:.2f} ns, the kernel's own "
                  f"{own_rate * 1e9:.2f} ns per exponential; target of issue 35: 2 us per step at n = 48)")
            ph = phases(m, steps)
            print("     (one step's phases at n = 48, CPU: " + ", ".join(f"{k} {v * 1e6:.2f} us" for k, v in ph.items())
                  + f", the rest (self-scores, weights, update, exit test) {(one[1] - sum(ph.values())) * 1e6:.2f} us)")
    x0, sigma = _config(15)
    for systems in (1, 2):
        t0, c0 = time.perf_counter(), time.process_time()
        res = sabeta_exit_times([x0] * systems, [sigma] * systems, 0.1, 40.0, 0.1, cap=horizon)
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        print(f"n = 48: {horizon:.0e} steps (time to T2 = {horizon:.0e}) of {systems} system(s) at once: "
              f"{dt:.1f} s wall, {dc / systems:.1f} s CPU per system"
              + ("" if not res.exited.any() else " (exited early!)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
