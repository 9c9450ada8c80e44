"""``make bench`` keeps working: its reference implementations agree with the library and the report is complete.

No time is asserted here (speed is a report, not a test); what is checked is that every
section's references compute the same numbers as the library (the bench asserts that before
timing) and that the report carries a value, a unit and a verdict for every target.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _bench(out: Path, *args: str, timeout: int) -> dict:
    """Run ``tools/bench.py --quick --out out *args``; its report.json (the run must succeed)."""
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "bench.py"), "--quick", "--out", str(out), *args],
                         capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads((out / "report.json").read_text())


def test_bench_sections_run_and_report_every_target(tmp_path):
    out = tmp_path / "bench"
    report = _bench(out, "--only", "cells", "softmax", "loops", timeout=900)
    assert set(report["sections"]) == {"cells", "softmax", "loops"}
    targets = [e for es in report["sections"].values() for e in es if e["target"]]
    assert len(targets) == 5  # cells kappa 7 and 25, the softmax floor, two plain-loop comparisons
    for e in targets:
        assert isinstance(e["value"], float) and e["value"] > 0, e
        assert isinstance(e["met"], bool), e
    md = (out / "report.md").read_text()
    assert "## Machine" in md and "## Targets" in md and "BLAS" in md
    softmax = {e["name"]: e for e in report["sections"]["softmax"]}
    assert softmax["softmax step / floor (preallocated outputs)"]["kernels"] == "numba"


def test_bench_context_section_runs_and_reports_scaling(tmp_path):
    """The context section at a small size (n <= 2048): ratios against the machine's bound in both
    precisions, the peer entries (timed, or saying why not), memory, exponents, table and plot."""
    out = tmp_path / "bench"
    report = _bench(out, "--only", "context", "--context-max-n", "2048", timeout=1800)
    entries = {e["name"]: e for e in report["sections"]["context"]}
    for kind in ("softmax", "hardmax", "sap"):
        for precision in ("float64", "float32"):
            ratio = entries[f"{kind} step / machine bound at n=2048, d=64, R=1, {precision}"]
            assert ratio["value"] > 0 and isinstance(ratio["met"], bool)
            assert all(b > 0 for b in ratio["bound_s"]) and ratio["precision"] == precision
            # the value is the best of the interleaved repetitions, each against the bound measured beside it
            assert ratio["value"] == min(ratio["ratios"]) and len(ratio["ratios"]) == len(ratio["step_s"])
            assert all(r > 0 for r in ratio["cpu_ratios"]) and len(ratio["load"]) == 2 * len(ratio["step_s"])
        mem = entries[f"{kind} step peak memory growth at n=2048"]
        assert 0 < mem["value"] < 1024 and mem["met"] is True
        assert isinstance(entries[f"{kind}: fitted exponent of time against n"]["value"], float)
    plain = entries["hardmax step, float64 arithmetic (screen=False) / machine bound at n=2048, d=64, R=1, float64"]
    assert plain["value"] > 0 and "screen=False" in plain["how"]
    for name in ("jax.nn.dot_product_attention / tiled.softmax_step at n=2048, float64",
                 "jax.numpy attention (einsum, softmax, einsum) / tiled.softmax_step at n=2048, float64",
                 "jax.nn.dot_product_attention / tiled.softmax_step at n=2048, float32"):
        peer = entries[name]
        assert (peer["value"] or 0) > 0 or "peer not timed" in peer["how"]
        if peer["value"]:  # checked against the library's float64 step: float32 accuracy at worst
            assert peer["peer_error"] < 1e-5
    for precision in ("float64", "float32"):
        # --quick measures the machine's rates on 512 x 512 products (2048 x 2048 in the real bench)
        tiles = entries[f"the step's own tile products against the 512 x 512 GEMM, {precision}"]
        assert tiles["value"] > 0 and tiles["scores_cpu"] > 0 and tiles["values_cpu"] > 0
    md = (out / "report.md").read_text()
    assert "| n | softmax s |" in md and "context-scaling.png" in md
    assert (out / "context-scaling.png").stat().st_size > 0
