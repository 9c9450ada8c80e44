"""How are parameter grids run? Sweeps over an executor, cached on disk.

A sweep is a module-level function ``fn(**params) -> result`` evaluated on a list of
parameter dicts (a grid over beta, seed, n, kappa, ...). Three ingredients, all standard:

* **executor**: anything implementing :class:`concurrent.futures.Executor`. By default a
  local :class:`~concurrent.futures.ProcessPoolExecutor`; ``"serial"`` runs in-process;
  ``"local-dask"`` starts a :class:`distributed.LocalCluster`; a string such as
  ``"tcp://10.0.0.5:8786"`` connects a :class:`distributed.Client` to that scheduler and uses
  ``client.get_executor()``; an Executor instance (including a Dask ``ClientExecutor``) is
  used as given and left open.
* **cache**: :class:`joblib.Memory` under :data:`afw_book.paths.CACHE` (``.cache/`` at the
  repository root, git-ignored), keyed by the function's code and its parameters, in a
  folder named after a hash of the source of the task's module and of every library module
  it imports, directly or not (:func:`code_version`, read from the import statements), so
  re-rendering a chapter recomputes nothing and editing the engine never serves stale results.
  Cache hits are loaded in the calling process; only misses are sent to the executor, whose
  workers write the results into the cache (for a remote Dask cluster ``cache_dir`` must be on a filesystem the workers share).
* **progress**: a :mod:`tqdm.auto` bar over the cache misses; switch it off with
  ``progress=False`` or the environment variable ``ATTENTION_FW_PROGRESS=0`` (the book's
  notebooks do, so the static pages stay clean).
* **streams**: ``run(fn, params, seed=s)`` gives every task its own random stream: its ``rng``
  is :func:`task_seed` ``(s, p)``, drawn from a :class:`numpy.random.SeedSequence` over the run's
  seed and a SHA-256 of the task's other parameters (:func:`encode`, a canonical encoding, not
  Python's ``hash``, so it is the same in every process and on every machine). Two tasks of a
  sweep therefore never share draws; the seed each task ran with is the ``rng`` it received, so
  its result can record it and the cache is keyed by it. Common random numbers across tasks
  (the same draws on purpose) are asked for by putting one ``rng`` value in the grid itself
  and saying so where the results are used.
"""
from __future__ import annotations

import ast
import concurrent.futures as cf
import contextlib
import hashlib
import itertools
import json
import math
import numbers
import os
from pathlib import Path

import joblib
import numpy as np
from tqdm.auto import tqdm

import attention_fw
from attention_fw import _validate as V
from . import paths

__all__ = ["grid", "memory", "code_version", "library_imports", "run", "encode", "task_seed", "seeded"]


def grid(**axes) -> list[dict]:
    """Cartesian product of parameter axes, in the order given: ``grid(beta=[1, 2], rng=[0, 1])``.

    An axis is a list, tuple, range or 1-d array; anything else (a scalar, a string) is a
    one-element axis.

    Raises
    ------
    ValueError
        An empty axis (``grid(beta=[])``): the product would be silently empty, and a sweep
        over it would compute nothing.

    Examples
    --------
    >>> len(grid(beta=[1.0, 2.0], seed=[0, 1, 2], n=6))   # 2 x 3 x 1 points
    6
    >>> grid(beta=[1.0, 2.0], seed=[0, 1, 2])[:4]         # the last axis varies fastest
    [{'beta': 1.0, 'seed': 0}, {'beta': 1.0, 'seed': 1}, {'beta': 1.0, 'seed': 2}, {'beta': 2.0, 'seed': 0}]
    """
    keys = list(axes)
    vals = [list(v) if isinstance(v, (list, tuple, range, np.ndarray)) and np.ndim(v) > 0 else [v]
            for v in axes.values()]
    for key, v in zip(keys, vals):
        if len(v) == 0:
            raise ValueError(f"{key} must hold at least one value, got an empty {type(v).__name__}")
    return [dict(zip(keys, (x.item() if isinstance(x, np.generic) else x for x in combo)))
            for combo in itertools.product(*vals)]


def _canonical(value, where: str):
    """``value`` as plain JSON types, the same for equal parameters however they are spelled."""
    if isinstance(value, np.ndarray):
        return [_canonical(v, where) for v in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        x = float(value)
        if not math.isfinite(x):
            return repr(x)                                # "inf", "nan": JSON has no such numbers
        return int(x) if x.is_integer() else x            # 12 and 12.0 are the same parameter
    if isinstance(value, (list, tuple)):
        return [_canonical(v, where) for v in value]
    if isinstance(value, dict):
        return {str(k): _canonical(v, f"{where}[{k!r}]") for k, v in value.items()}
    raise TypeError(f"{where}: cannot encode a {type(value).__name__} into a task's seed "
                    "(use numbers, strings, booleans, None, lists, tuples, dicts or arrays)")


def encode(params: dict, *, skip: tuple[str, ...] = ("rng",)) -> bytes:
    """A canonical byte encoding of a task's parameters (all but ``skip``): the input of :func:`task_seed`.

    JSON with sorted keys, tuples and arrays as lists, numpy scalars as Python numbers and an
    integral float as the integer (``beta=12`` and ``beta=12.0`` are one parameter). Unlike
    Python's ``hash()``, it does not change between processes or machines.

    Examples
    --------
    >>> encode({"n": np.int64(6), "beta": 12.0, "rng": 3})
    b'{"beta":12,"n":6}'
    >>> encode({"beta": 12, "n": 6}) == encode({"n": 6, "beta": 12.0})
    True
    """
    if not isinstance(params, dict):
        raise TypeError(f"params must be a dict of keyword arguments, got {type(params).__name__}")
    plain = {str(k): _canonical(v, f"params[{k!r}]") for k, v in params.items() if k not in skip}
    return json.dumps(plain, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def task_seed(seed: int, params: dict) -> int:
    """The seed of the task ``params`` in a run seeded with ``seed``: a 63-bit integer.

    Drawn from ``SeedSequence([seed, *words])``, ``words`` the eight 32-bit words of the SHA-256
    of :func:`encode` ``(params)`` (its ``rng`` excluded), so a task's stream depends on the
    run's seed and on the task's parameters, on nothing else (not on its place in the grid nor
    on the other tasks). Two tasks with different parameters get different seeds (equal ones
    would need a SHA-256 collision, or two 63-bit draws to coincide: about ``N^2 / 2^64`` for
    ``N`` tasks).

    Examples
    --------
    >>> a = task_seed(0, {"beta": 4.0, "n": 6})
    >>> a == task_seed(0, {"n": 6, "beta": 4}), a == task_seed(1, {"beta": 4.0, "n": 6})
    (True, False)
    >>> 0 <= a < 2**63
    True
    """
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    words = np.frombuffer(hashlib.sha256(encode(params)).digest(), dtype="<u4")
    state = np.random.SeedSequence([int(seed), *map(int, words)]).generate_state(2, np.uint32)
    return (int(state[0]) << 31) | (int(state[1]) >> 1)


def seeded(params: list[dict] | tuple[dict, ...], seed: int) -> list[dict]:
    """``params`` with each task's ``rng`` set to its :func:`task_seed`: the tasks that :func:`run` computes
    when given ``seed``.

    Raises
    ------
    ValueError
        A task already has an ``rng`` (the grid would hold two seeds for it), or two tasks have
        the same parameters (they would draw the same numbers; a repeated experiment is a task
        with more runs, or an axis such as ``replicate=[0, 1]`` of a task that accepts one).

    Examples
    --------
    >>> tasks = seeded(grid(beta=[4.0, 8.0], n=6), seed=0)
    >>> [sorted(t) for t in tasks], len({t["rng"] for t in tasks})
    ([['beta', 'n', 'rng'], ['beta', 'n', 'rng']], 2)
    """
    if not isinstance(params, (list, tuple)) or not all(isinstance(p, dict) for p in params):
        raise TypeError("params must be a list of dicts of keyword arguments")
    first: dict[bytes, int] = {}
    out = []
    for k, p in enumerate(params):
        if "rng" in p:
            raise ValueError(f"params[{k}] already has rng={p['rng']!r}: pass either seed= to run (one stream "
                             "per task, derived) or an rng in every task (chosen by hand), not both")
        key = encode(p)
        if key in first:
            raise ValueError(f"params[{first[key]}] and params[{k}] are the same task ({key.decode()}): "
                             "they would draw the same numbers")
        first[key] = k
        out.append({**p, "rng": task_seed(seed, p)})
    return out


_PACKAGE = Path(attention_fw.__file__).resolve().parent
"""The installed library's source folder (read for :func:`code_version`; not a repository path)."""


def _source(name: str) -> Path | None:
    """The source file of library module ``name`` (dotted, relative to the package), if it is one."""
    rel = Path(*name.split(".")) if name else Path()
    for path in (_PACKAGE / rel.with_suffix(".py") if name else None, _PACKAGE / rel / "__init__.py"):
        if path is not None and path.is_file():
            return path
    return None


def _imported(name: str, tree: ast.AST) -> list[str]:
    """Library modules (dotted, relative to the package) named by the imports of module ``name``."""
    src = _source(name)
    is_pkg = src is not None and src.name == "__init__.py"
    here = name.split(".") if name else []
    pkg = here if is_pkg else here[:-1]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg[:len(pkg) - (node.level - 1)] + (node.module.split(".") if node.module else [])
            elif node.module is not None and node.module.split(".")[0] == "attention_fw":
                base = node.module.split(".")[1:]
            else:
                continue
            for alias in node.names:                      # ``from pkg import module`` or ``from module import name``
                sub = ".".join(base + [alias.name])
                found.append(sub if _source(sub) is not None and alias.name != "*" else ".".join(base))
        elif isinstance(node, ast.Import):
            found += [a.name.split(".", 1)[1] for a in node.names if a.name.startswith("attention_fw.")]
    return [f for f in found if f and (s := _source(f)) is not None and s.name != "__init__.py"]


def library_imports(module: str) -> list[str]:
    """The library modules ``module`` imports, directly or through others, itself included, sorted.

    Modules are named by their dotted path inside ``attention_fw`` (``"model.schedules"``). Read
    from the ``import`` statements of the sources (relative ``from .. import x`` and
    ``from ..x import y``, and absolute ``attention_fw.x``), so nothing is kept by hand; the
    sub-packages' ``__init__`` files, which only re-export, are not followed.

    Examples
    --------
    >>> library_imports("model.schedules")
    ['_validate', 'model.schedules']
    """
    seen, todo = set(), [module]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        src = _source(name)
        if src is None:
            raise ValueError(f"{name!r} is not a module of attention_fw")
        todo.extend(_imported(name, ast.parse(src.read_text())))
    return sorted(seen)


def _all_modules() -> list[str]:
    return sorted(".".join(p.relative_to(_PACKAGE).with_suffix("").parts) for p in _PACKAGE.rglob("*.py")
                  if "__pycache__" not in p.parts)


def code_version(fn=None) -> str:
    """Short hash of the source of the library modules a task depends on.

    For a library function ``fn`` these are its module and everything it imports
    (:func:`library_imports`); for anything else (``None``, a function defined outside the
    library) every module of the library. Editing the engine or the dynamics moves the
    cache to a fresh folder, so stale results are never loaded.

    Examples
    --------
    >>> from attention_fw.model import schedules
    >>> h = code_version(schedules.get_schedule)
    >>> len(h), h == code_version(schedules.Constant), h == code_version(None)
    (12, True, False)

    Two tasks of one module share its import closure, hence the hash; ``None`` hashes every module.
    """
    mod = getattr(fn, "__module__", "") or ""
    if mod.startswith("attention_fw.") and _source(mod.split(".", 1)[1]) is not None:
        names = library_imports(mod.split(".", 1)[1])
    else:
        names = _all_modules()
    h = hashlib.sha256()
    for name in names:
        h.update(name.encode())
        h.update(_source(name).read_bytes())  # type: ignore[union-attr]  # every name is a module
    return h.hexdigest()[:12]


def memory(cache_dir: str | Path | None = None, fn=None):
    """The :class:`joblib.Memory` used for sweeps of ``fn``: ``<cache_dir>/<code_version(fn)>``, with
    ``cache_dir`` defaulting to ``<repo>/.cache/joblib``.

    Examples
    --------
    >>> import tempfile
    >>> from attention_fw.geometry.polytope import c0
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     sub = Path(memory(tmp, c0).location).relative_to(tmp).as_posix()
    >>> sub == code_version(c0)                          # one folder per version of the code
    True
    """
    base = Path(cache_dir) if cache_dir is not None else paths.CACHE / "joblib"
    return joblib.Memory(location=str(base / code_version(fn)), verbose=0)


@contextlib.contextmanager
def _executor(executor, max_workers):
    if isinstance(executor, cf.Executor):
        yield executor                                    # owned by the caller
        return
    if executor is None or executor == "processes":
        with cf.ProcessPoolExecutor(max_workers=max_workers) as ex:
            yield ex
        return
    if executor == "serial":
        yield None
        return
    if not isinstance(executor, str):
        raise TypeError("executor must be None, 'serial', 'processes', 'local-dask', a Dask scheduler "
                        f"address or a concurrent.futures.Executor, got {type(executor).__name__}")
    from distributed import Client, LocalCluster     # here: importing Dask costs 0.3 s, and most runs never need it

    if executor == "local-dask":
        n = max_workers or min(2, os.cpu_count() or 1)
        # The scheduler's HTTP server listens even without a dashboard: on the loopback and a free
        # port, not on 8787 (where a reader's own cluster may be, with a warning to them)
        with LocalCluster(n_workers=n, threads_per_worker=1, processes=False,
                          dashboard_address="127.0.0.1:0") as cluster, Client(cluster) as client:
            yield client.get_executor()
        return
    if "://" not in executor and ":" not in executor:
        raise ValueError(f"executor must be 'serial', 'processes', 'local-dask' or a scheduler address "
                         f"such as 'tcp://host:8786', got {executor!r}")
    with Client(executor) as client:
        yield client.get_executor()


def _progress_enabled(progress):
    if progress is None:
        return os.environ.get("ATTENTION_FW_PROGRESS", "1") != "0"
    return bool(progress)


def run(fn, params, *, seed: int | None = None, executor=None, max_workers: int | None = None,
        cache: bool = True, cache_dir: str | Path | None = None, progress: bool | None = None,
        desc: str | None = None) -> list:
    """Evaluate ``fn(**p)`` for every ``p`` in ``params`` and return the results in order.

    Parameters
    ----------
    fn : module-level callable (picklable), deterministic in its parameters (seeds included)
    params : list of dicts (see :func:`grid`)
    seed : the run's seed: every task gets its own ``rng``, :func:`task_seed` ``(seed, p)``
        (:func:`seeded`); None: the tasks' ``rng``, if any, are those of ``params``
    executor : None | "processes" | "serial" | "local-dask" | scheduler address | Executor
    max_workers : workers of the process pool or of the local Dask cluster
    cache : read and write the joblib cache (False: always recompute, nothing stored)
    cache_dir : cache location (default ``.cache/joblib`` at the repository root)
    progress : tqdm bar over the tasks to compute (None: on unless ATTENTION_FW_PROGRESS=0)

    Raises
    ------
    TypeError
        ``fn`` not callable, ``params`` not a list of dicts, unknown executor kind.
    ValueError
        Malformed executor string; with ``seed``, a task that already has an ``rng`` or two
        equal tasks (:func:`seeded`).

    Examples
    --------
    >>> from attention_fw.geometry.polytope import c0, regular_polygon
    >>> params = [{"vertices": regular_polygon(k)} for k in (3, 4, 6)]
    >>> out = run(c0, params, cache=False, executor="serial", progress=False)
    >>> [round(c, 12) for c in out]                      # in order: c0 of the regular k-gon is 1 - cos(2 pi / k)
    [1.5, 1.0, 0.5]

    With ``seed``, each task draws from its own stream (here two exit-time samples at different
    ``beta``, which share no draw):

    >>> from attention_fw.experiments.exit_times import exit_time_task
    >>> a, b = run(exit_time_task, grid(beta=[1.0, 2.0], runs=5), seed=0, cache=False, executor="serial",
    ...            progress=False)
    >>> a.rng != b.rng, a.rng == task_seed(0, {"beta": 1.0, "runs": 5})
    (True, True)
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    if not isinstance(params, (list, tuple)) or not all(isinstance(p, dict) for p in params):
        raise TypeError("params must be a list of dicts of keyword arguments")
    if max_workers is not None:
        max_workers = V.positive_int("max_workers", max_workers)
    if seed is not None:
        params = seeded(params, seed)
    target = memory(cache_dir, fn).cache(fn) if cache else fn
    results: list = [None] * len(params)
    todo = []
    for k, p in enumerate(params):
        if cache and target.check_call_in_cache(**p):
            results[k] = target(**p)                       # a load, not a computation
        else:
            todo.append(k)
    if not todo:
        return results
    bar = tqdm(total=len(todo), desc=desc or getattr(fn, "__name__", "sweep"),
               disable=not _progress_enabled(progress), leave=False)
    try:
        with _executor(executor, max_workers) as ex:
            if ex is None:
                for k in todo:
                    results[k] = target(**params[k])
                    bar.update()
            else:
                futs = {ex.submit(target, **params[k]): k for k in todo}
                for f in cf.as_completed(futs):
                    results[futs[f]] = f.result()
                    bar.update()
    finally:
        bar.close()
    return results
