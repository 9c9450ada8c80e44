"""Benchmark (not a test): the (SA-beta) exit-time kernel, cost per step and wall time to T2 = 10^7.

Usage:  .venv/bin/python tools/bench_sabeta.py [--quick]

Setting: the equilateral triangle with ``m`` tokens at distance 0.05 around each vertex
(n = 3 (1 + m) tokens, d = 2), gamma = 0.1, eps = 0.1, and beta = 40, where no token leaves
within the horizon, so every step is stepped and every exit test that can matter is made: the
cost of reaching T2 = horizon is the cost of ``horizon`` steps. B = I, so the kernel takes its
symmetric path (n (n + 1) / 2 exponentials per step). Reports, for n = 3 ... 48, the
cost per step of one system, and of two systems at once (one per core: the kernel runs one
system per thread), and the wall time of 10^7 steps (10^6 with --quick) at n = 48, each with the CPU
time per system (what an unloaded core takes; on a shared machine the wall time also counts the
waiting for a core).
"""
from __future__ import annotations

import sys
import time

from attention_fw.experiments.exit_times import near_vertex_configuration
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


def main(argv=None) -> int:
    quick = "--quick" in (argv if argv is not None else sys.argv[1:])
    steps = 20_000 if quick else 200_000
    horizon = 10**6 if quick else 10**7
    print("(SA-beta) exit-time kernel: microseconds per step and system (triangle, gamma 0.1, beta 40)")
    print(f"{'n':>4s} {'1 system: wall':>15s} {'cpu':>7s} {'2 systems: wall':>16s} {'cpu':>7s}")
    for m in (0, 2, 7, 15):
        one = per_step(m, steps, 1)
        two = per_step(m, steps, 2)
        print(f"{3 * (1 + m):4d} {one[0] * 1e6:15.2f} {one[1] * 1e6:7.2f} {two[0] * 1e6:16.2f} {two[1] * 1e6:7.2f}")
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
