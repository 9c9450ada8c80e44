#!/usr/bin/env python
"""Property-based reruns of the chapters: parameter sets drawn from each chapter's declaration.

    python tools/fuzz.py [-n N] [--seed S] [--chapters 01-model,...] [--jobs J] [--out _build/fuzz]

For every chapter ``book/[0-9]*.py`` (a chapter added later is picked up by the glob), Hypothesis
draws ``N`` parameter sets from the chapter's ``PARAMETERS`` (:func:`run_strategy`): one to three
parameters changed from the ``quick`` preset, as a reader changes them, each value inside its
declared range (edges, seeds and list lengths included, sizes kept near the quick preset's so that
a run takes seconds) and, mostly, meeting what it requires of the others (the fourth element of
the declaration); the rest are the reader's slips that the runner must refuse. Each set is run
through the book's own runner (``tools/run_notebook.py``) and its outcome checked (:func:`verdict`):

* refused in one line (exit status 2) before a kernel started; or
* finished, every figure file it lists written, no NaN or Infinity in its data files, no glued
  number and no printed output reading "nan" or "inf", and every figure legible (the
  ``meta["legibility"]`` list that :func:`afw_book.figures.save` records is empty).

Anything else is a failure, reported with the ``make notebook ...`` command that reproduces it in
``<out>/report.md`` (and ``report.json``). Exit status 1 when a run failed.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))
sys.path.insert(0, str(ROOT / "tools"))

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from afw_book import presets as PR  # noqa: E402

RUNNER = ROOT / "tools" / "run_notebook.py"
PRESET = "quick"
NAN_WORD = re.compile(r"(?<![\w.])-?(nan|inf|infinity)(?![\w])", re.I)


def chapters() -> list[Path]:
    """Every chapter of the book (``book/[0-9]*.py``), in order."""
    return sorted((ROOT / "book").glob("[0-9]*.py"))


# ------------------------------------------------------------------------------ strategies
@dataclass
class Declared:
    """One parameter: its declaration, the quick preset's value (None when the source does not
    give it as a literal) and its range read as bounds."""
    name: str
    kind: str
    rng: str
    requires: str
    base: object
    lo: float | None = None
    lo_closed: bool = True
    hi: float | None = None
    hi_closed: bool = True
    one_of: list[str] | None = None


def _declared(name: str, decl: tuple, base) -> Declared:
    d = Declared(name, decl[0], (decl[1] or "").strip(), PR.requires_text(decl), base)
    if (m := PR._BOUND.match(d.rng)):
        op, b = m.group(1), float(m.group(2))
        if op in (">=", ">"):
            d.lo, d.lo_closed = b, op == ">="
        else:
            d.hi, d.hi_closed = b, op == "<="
    elif (m := PR._INTERVAL.match(d.rng)):
        d.lo, d.hi = float(m.group(2)), float(m.group(3))
        d.lo_closed, d.hi_closed = m.group(1) == "[", m.group(4) == "]"
    elif (m := PR._ONE_OF.match(d.rng)):
        d.one_of = [w.strip() for w in m.group(1).split(",") if w.strip()]
    return d


def _scalar(d: Declared, kind: str, base, top_base=None) -> st.SearchStrategy | None:
    """Values of one item: inside the declared range, near the quick preset's ``base`` (at most
    four times it, so that a run stays within seconds), its edges included."""
    if d.one_of is not None:
        if kind == "str":
            return st.sampled_from(d.one_of)
        return st.sampled_from([float(w) if kind == "float" else int(w) for w in d.one_of])
    if kind == "bool":
        return st.booleans()
    if kind == "str":
        return None                     # free text (an executor's address): the preset's
    if kind == "int":
        lo = -10**6 if d.lo is None else (math.ceil(d.lo) if d.lo_closed else math.floor(d.lo) + 1)
        hi = None if d.hi is None else (math.floor(d.hi) if d.hi_closed else math.ceil(d.hi) - 1)
        if "seed" in d.name:
            return st.integers(max(lo, 0), 2**32 - 1 if hi is None else hi)
        b = int(base) if isinstance(base, (int, float)) else lo + 4
        top = max(lo, 4 * int(top_base if isinstance(top_base, (int, float)) else b))
        top = min(top, hi) if hi is not None else top
        return st.one_of(st.integers(lo, max(lo, min(b, top))), st.integers(lo, top))
    # float: a reader's value (3 significant digits), edges included
    b = float(base) if isinstance(base, (int, float)) else 1.0
    if d.lo is not None and d.hi is not None:
        span = d.hi - d.lo
        inner = st.floats(d.lo + span / 100, d.hi - (0 if d.hi_closed else span / 100))
        edges = [e for e, closed in ((d.lo, d.lo_closed), (d.hi, d.hi_closed)) if closed]
    elif d.lo is not None:
        low = b / 4 if b / 4 > d.lo else d.lo + max(abs(b), 1e-3) / 100
        high = max(low, 4 * float(top_base if isinstance(top_base, (int, float)) else b))
        inner = (st.floats(math.log(low), math.log(high)).map(math.exp) if low > 0     # log-uniform
                 else st.floats(low, high))
        edges = [d.lo] if d.lo_closed else []
    elif d.hi is not None:
        inner = st.floats(min(d.hi - 1, b - 4 * abs(b)), d.hi - (0 if d.hi_closed else 1e-3))
        edges = [d.hi] if d.hi_closed else []
    else:
        inner = st.floats(b - 4 * abs(b) - 1, b + 4 * abs(b) + 1)
        edges = []
    inner = inner.map(lambda v: _reader(v, d))
    return st.one_of(inner, st.sampled_from(edges)) if edges else inner


def _reader(v: float, d: Declared) -> float:
    """``v`` with 3 significant digits, as a reader types it (unchanged if that leaves the range)."""
    r = float(f"{v:.3g}")
    try:
        PR.check_value(d.name, r, (d.kind if not d.kind.startswith("list[") else "float", d.rng, ""))
    except ValueError:
        return v
    return r


def _item_base(values):
    nums = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return (min(nums), max(nums)) if nums else (None, None)


def value_strategy(d: Declared, known: dict) -> st.SearchStrategy | None:
    """Values of one parameter given the values ``known`` of the others it refers to: its
    requirements (``each one of X``, ``as many items as X``, ``at least K items``, ``distinct``,
    ``< X`` ...) are built into the draw, so that most drawn runs are accepted."""
    phrases = [w.strip() for w in d.requires.split(";") if w.strip()]
    if not d.kind.startswith("list["):
        s = _scalar(d, d.kind, d.base)
        for ph in phrases:
            if (m := PR._REQ_COMPARE.match(ph)) and isinstance(known.get(m.group(2)), (int, float)) and s is not None:
                op, other = m.group(1), known[m.group(2)]
                ok = {">=": lambda v: v >= other, ">": lambda v: v > other,
                      "<=": lambda v: v <= other, "<": lambda v: v < other}[op]
                s = s.filter(ok) if any(ok(v) for v in _probe(d, other)) else s
        return s
    item_kind = d.kind[5:-1]
    base_list = d.base if isinstance(d.base, list) else []
    lo_len, hi_len, unique = 1, max(1, len(base_list) + 1), False
    pool, must = None, None
    for ph in phrases:
        if (m := PR._REQ_COUNT.match(ph)):
            k = int(m.group(2))
            if m.group(1) == "least":
                lo_len, hi_len = max(lo_len, k), max(hi_len, k)
            else:
                hi_len = min(hi_len, k)
        elif ph == "distinct":
            unique = True
        elif (m := PR._REQ_SAME_LEN.match(ph)) and isinstance(known.get(m.group(1)), list):
            lo_len = hi_len = len(known[m.group(1)])
        elif (m := PR._REQ_MEMBER.match(ph)) and isinstance(known.get(m.group(1)), list):
            pool = list(dict.fromkeys(known[m.group(1)]))
        elif (m := PR._REQ_NAMED.match(ph)):
            pool, unique = PR.named_values(m.group(1)), True
        elif (m := PR._REQ_CONTAINS.match(ph)):
            want = m.group(1)
            must = float(want) if item_kind == "float" else int(want) if item_kind == "int" else want
    if pool is not None:
        item = st.sampled_from(pool)
        hi_len = min(hi_len, len(pool)) if unique else hi_len
    else:
        item = _scalar(d, item_kind, *_item_base(base_list))
        if item is None:
            return None
        if d.one_of is not None:
            unique, hi_len = True, min(hi_len, len(d.one_of))
    if lo_len > hi_len:
        return None
    drawn = st.lists(item, min_size=lo_len, max_size=hi_len, unique=unique)
    if must is not None:           # the value the list must hold, put in where the draw lacks it
        drawn = drawn.map(lambda v: v if must in v else sorted([must, *v[:max(0, hi_len - 1)]]))
    return drawn


def _probe(d: Declared, other):
    return [other - 1, other, other + 1, other / 2, other * 2] if isinstance(other, (int, float)) else []


def _order(decls: dict[str, Declared]) -> list[str]:
    """Parameter names, each after those its requirements name."""
    deps = {n: {m.group(1) for ph in d.requires.split(";")
                for m in [PR._REQ_SAME_LEN.match(ph.strip()) or PR._REQ_MEMBER.match(ph.strip())
                          or PR._REQ_COMPARE.match(ph.strip())] if m}
            for n, d in decls.items()}
    out: list[str] = []
    while len(out) < len(decls):
        for n in decls:
            if n not in out and all(o in out or o not in decls for o in deps[n] - {n}):
                out.append(n)
                break
        else:
            out += [n for n in decls if n not in out]
    return out


def _other_names(d: Declared) -> set[str]:
    names = set()
    for ph in (w.strip() for w in d.requires.split(";")):
        m = PR._REQ_SAME_LEN.match(ph) or PR._REQ_MEMBER.match(ph)
        if m:
            names.add(m.group(1))
        elif (m := PR._REQ_COMPARE.match(ph)):
            names.add(m.group(2))
    return names


def run_strategy(source: Path) -> st.SearchStrategy:
    """Overrides of one rerun of the chapter ``source`` (name -> value), drawn from its declaration."""
    text = source.read_text()
    declared = PR.read_declaration(text)["parameters"]
    base = PR.preset_values(text, PRESET)
    decls = {n: _declared(n, decl, base.get(n)) for n, decl in declared.items()}
    drawable = [n for n in _order(decls) if _scalar(decls[n], decls[n].kind.removeprefix("list[").rstrip("]"),
                                                    None) is not None or decls[n].one_of is not None]

    @st.composite
    def draw(drw):
        k = drw(st.integers(1, min(3, len(drawable))))
        chosen = set(drw(st.permutations(drawable))[:k])
        respect = drw(st.integers(0, 4)) > 0          # a fifth of the runs: slips the runner must refuse
        values = dict(base)
        overrides: dict = {}
        for n in _order(decls):
            d = decls[n]
            redo = n in chosen
            if not redo and respect and _other_names(d) & set(overrides):
                try:                                   # a value the reader must change along with another
                    PR.check_requires({n: declared[n], **{o: declared[o] for o in _other_names(d)}},
                                      {n: values.get(n), **{o: values.get(o) for o in _other_names(d)}})
                except ValueError:
                    redo = True
            if not redo:
                continue
            s = value_strategy(d, values if respect else base)
            if s is None:
                continue
            overrides[n] = values[n] = drw(s)
        return overrides

    return draw()


def draws(source: Path, n: int, seed: int | None, derandomize: bool = False) -> list[dict]:
    """``n`` parameter sets for ``source`` (fewer if the declaration has fewer distinct ones)."""
    out: list[dict] = []
    strategy = run_strategy(source)

    # a draw may repeat an earlier one: ask for more than n, keep the first n distinct ones
    @settings(max_examples=4 * n, phases=[Phase.generate], database=None, deadline=None,
              derandomize=derandomize, suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(overrides):
        if overrides not in out and len(out) < n:
            out.append(overrides)

    if seed is not None and not derandomize:
        from hypothesis import seed as hseed

        collect = hseed(seed)(collect)
    collect()
    return out[:n]


# ------------------------------------------------------------------------------ one run
@dataclass
class Outcome:
    chapter: str
    overrides: dict
    status: str                 # "ran", "refused" or "FAILED"
    seconds: float
    problems: list[str] = field(default_factory=list)
    message: str = ""

    @property
    def command(self) -> str:
        from run_notebook import rerun_command

        return rerun_command(self.chapter, PRESET, self.overrides)


def _nonfinite(obj, where="") -> list[str]:
    """Paths of NaN or infinite numbers in a JSON value (read with NaN/Infinity allowed)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return [where or "(top)"]
    if isinstance(obj, dict):
        return [p for k, v in obj.items() for p in _nonfinite(v, f"{where}.{k}" if where else str(k))]
    if isinstance(obj, list):
        return [p for i, v in enumerate(obj) for p in _nonfinite(v, f"{where}[{i}]")]
    return []


def verdict(code: int, stderr: str, workdir: Path, name: str) -> tuple[str, list[str], str]:
    """(status, problems, message) of one finished runner process (see the module's text)."""
    if code == 2:
        lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
        started = (workdir / "out.ipynb").exists() or (workdir / "failed").exists()
        if len(lines) == 1 and not started:
            return "refused", [], lines[0]
        return "FAILED", ["refused, but not in one line before a kernel started"], stderr.strip()[-2000:]
    if code != 0:
        tail = stderr.strip().splitlines()
        last = next((ln for ln in reversed(tail) if re.match(r"^\w*(Error|Exception)\b", ln)), tail[-1] if tail else "")
        return "FAILED", [f"crashed: {last.strip()}"], stderr.strip()[-4000:]
    problems: list[str] = []
    record = json.loads((workdir / f"{name}.json").read_text())
    figdir = workdir / "figures" / "custom"
    for rel in record.get("figures", []):
        path = figdir / rel
        if not path.is_file() or path.stat().st_size == 0:
            problems.append(f"figure file {rel} listed but not written")
            continue
        if path.suffix == ".json":
            data = json.loads(path.read_text())
            bad = _nonfinite(data)
            if bad:
                problems.append(f"{rel}: NaN or Infinity at {', '.join(bad[:4])}" + (" ..." if len(bad) > 4 else ""))
            for issue in (data.get("meta") or {}).get("legibility") or []:
                problems.append(f"{rel}: {issue}")
    for key, text in (record.get("quoted") or {}).items():
        if NAN_WORD.search(str(text)):
            problems.append(f"glued {key} = {text!r}")
    nb = json.loads((workdir / "out.ipynb").read_text())
    for k, cell in enumerate(nb.get("cells", [])):
        for o in cell.get("outputs", []) or []:
            texts = [o.get("text", "")] if o.get("output_type") == "stream" else [(o.get("data") or {}).get("text/plain", "")]
            for t in texts:
                t = "".join(t) if isinstance(t, list) else t
                if NAN_WORD.search(t) and "Figure " not in t:
                    problems.append(f"cell {k} prints {NAN_WORD.search(t).group(0)!r}: "
                                    + t.strip().splitlines()[0][:120])
    return ("ran" if not problems else "FAILED"), problems, ""


def run_one(source: Path, overrides: dict, base_dir: Path, timeout: int = 600) -> Outcome:
    """Run ``source`` in the quick preset with ``overrides`` through the book's runner, in a
    private folder under ``base_dir``, and judge the outcome."""
    import yaml

    name = source.stem
    workdir = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=base_dir))
    args = [sys.executable, str(RUNNER), str(source), "--preset", PRESET, "-o", str(workdir / "out.ipynb"),
            "--times-dir", str(workdir), "--failed-dir", str(workdir / "failed")]
    for k, v in overrides.items():
        args += ["-p", k, yaml.safe_dump(v, default_flow_style=True).strip().removesuffix("...").strip()]
    env = {**os.environ, "ATTENTION_FW_FIGURES": str(workdir / "figures" / "custom"),
           "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1")}
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return Outcome(name, overrides, "FAILED", time.perf_counter() - t0, [f"no end within {timeout} s"])
    seconds = time.perf_counter() - t0
    status, problems, message = verdict(proc.returncode, proc.stderr, workdir, name)
    return Outcome(name, overrides, status, seconds, problems, message)


# ------------------------------------------------------------------------------ report
def report(outcomes: list[Outcome], n: int, seed, out: Path) -> str:
    by: dict[str, list[Outcome]] = {}
    for o in outcomes:
        by.setdefault(o.chapter, []).append(o)
    lines = [f"# Fuzzed reruns: {n} draws per chapter, preset {PRESET}, seed {seed}", "",
             "| chapter | runs | finished | refused (one line, no kernel) | failed | wall s |",
             "|---|---|---|---|---|---|"]
    for ch, outs in by.items():
        lines.append(f"| {ch} | {len(outs)} | {sum(o.status == 'ran' for o in outs)} | "
                     f"{sum(o.status == 'refused' for o in outs)} | {sum(o.status == 'FAILED' for o in outs)} | "
                     f"{sum(o.seconds for o in outs):.0f} |")
    failed = [o for o in outcomes if o.status == "FAILED"]
    lines += ["", f"## Failures: {len(failed)}", ""]
    for o in failed:
        lines += [f"### {o.chapter}", "", "```", o.command, "```", ""] + [f"- {p}" for p in o.problems] + [""]
        if o.message:
            lines += ["<details><summary>output</summary>", "", "```", o.message, "```", "", "</details>", ""]
    refused = [o for o in outcomes if o.status == "refused"]
    if refused:
        lines += ["## Refused before a kernel started", ""]
        lines += [f"- `{o.command}`: {o.message}" for o in refused]
    text = "\n".join(lines) + "\n"
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(text)
    (out / "report.json").write_text(json.dumps(
        [{"chapter": o.chapter, "overrides": o.overrides, "status": o.status, "seconds": round(o.seconds, 1),
          "problems": o.problems, "command": o.command} for o in outcomes], indent=1) + "\n")
    return text


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=20, help="draws per chapter")
    ap.add_argument("--seed", type=int, default=None, help="Hypothesis seed (default: a new one, printed)")
    ap.add_argument("--chapters", default="", help="comma-separated stems or prefixes (default: every chapter)")
    ap.add_argument("--jobs", type=int, default=1, help="runs at a time")
    ap.add_argument("--timeout", type=int, default=600, help="seconds allowed to one run")
    ap.add_argument("--out", type=Path, default=ROOT / "_build" / "fuzz")
    args = ap.parse_args(argv)
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    wanted = [w for w in args.chapters.split(",") if w]
    sources = [s for s in chapters() if not wanted or any(s.stem.startswith(w) for w in wanted)]
    drawn = {s: draws(s, args.n, seed) for s in sources}
    # round robin over the chapters: a fuzz stopped early has covered every chapter alike
    plan = [(s, drawn[s][k]) for k in range(args.n) for s in sources if k < len(drawn[s])]
    print(f"fuzz: {len(plan)} runs over {len(sources)} chapter(s), seed {seed}", flush=True)
    work = args.out / "runs"
    work.mkdir(parents=True, exist_ok=True)

    done: list[Outcome] = []
    lock = threading.Lock()

    def one(item):
        o = run_one(item[0], item[1], work, args.timeout)
        print(f"fuzz: {o.status:8s} {o.seconds:6.1f} s  {o.command}" + (f"\n      {o.problems[0]}" if o.problems else ""),
              flush=True)
        with lock:                  # the report so far: an interrupted fuzz still leaves one
            done.append(o)
            report(sorted(done, key=lambda x: (x.chapter, plan_order[id(x.overrides)])), args.n, seed, args.out)
        return o

    plan_order = {id(o): k for k, (_, o) in enumerate(plan)}

    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        outcomes = sorted(pool.map(one, plan), key=lambda x: x.chapter)
    text = report(outcomes, args.n, seed, args.out)
    print(text.split("\n## Failures")[0])
    print(f"fuzz: report in {args.out / 'report.md'}")
    return 1 if any(o.status == "FAILED" for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
