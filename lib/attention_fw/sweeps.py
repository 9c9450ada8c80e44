"""Parameter sweeps over an executor, cached on disk.

A sweep is a module-level function ``fn(**params) -> result`` evaluated on a list of
parameter dicts (a grid over beta, seed, n, kappa, ...). Three ingredients, all standard:

* **executor**: anything implementing :class:`concurrent.futures.Executor`. By default a
  local :class:`~concurrent.futures.ProcessPoolExecutor`; ``"serial"`` runs in-process;
  ``"local-dask"`` starts a :class:`distributed.LocalCluster`; a string such as
  ``"tcp://10.0.0.5:8786"`` connects a :class:`distributed.Client` to that scheduler and uses
  ``client.get_executor()``; an Executor instance (including a Dask ``ClientExecutor``) is
  used as given and left open.
* **cache**: :class:`joblib.Memory` under :data:`attention_fw.paths.CACHE` (``.cache/`` at the
  repository root, git-ignored), keyed by the function's code and its parameters, in a
  folder named after a hash of the library modules the tasks use (:func:`code_version`), so
  re-rendering a chapter recomputes nothing and editing the engine never serves stale results. Cache hits are loaded in the calling process;
  only misses are sent to the executor, whose workers write the results into the cache
  (for a remote Dask cluster ``cache_dir`` must be on a filesystem the workers share).
* **progress**: a :mod:`tqdm.auto` bar over the cache misses; switch it off with
  ``progress=False`` or the environment variable ``ATTENTION_FW_PROGRESS=0`` (the book's
  notebooks do, so the static pages stay clean).
"""
from __future__ import annotations

import concurrent.futures as cf
import contextlib
import itertools
import math
import os
from pathlib import Path

import numpy as np

from . import _validate as V
from . import paths

__all__ = ["grid", "memory", "code_version", "run", "exit_time_task", "phase1_task", "collapse_task", "regular_polygon",
           "tokens_per_vertex", "e6_task"]


def grid(**axes) -> list[dict]:
    """Cartesian product of parameter axes, in the order given: ``grid(beta=[1, 2], seed=[0, 1])``.

    Scalars are treated as one-element axes.

    Raises
    ------
    ValueError
        An empty axis (``grid(beta=[])``): the product would be silently empty, and a sweep
        over it would compute nothing.
    """
    keys = list(axes)
    vals = [v if isinstance(v, (list, tuple, np.ndarray)) and np.ndim(v) > 0 else [v] for v in axes.values()]
    for key, v in zip(keys, vals):
        if len(v) == 0:
            raise ValueError(f"{key} must hold at least one value, got an empty {type(v).__name__}")
    return [dict(zip(keys, (x.item() if isinstance(x, np.generic) else x for x in combo)))
            for combo in itertools.product(*vals)]


CODE_MODULES = ("_validate", "schedules", "dynamics", "metastability", "sweeps", "tiled", "_tile_kernels",
                "context_length")
"""Library modules whose source is part of the cache key (joblib only hashes the task's own code)."""


def code_version() -> str:
    """Short hash of the source of :data:`CODE_MODULES`: editing the engine or the dynamics
    moves the cache to a fresh folder, so stale results are never loaded."""
    import hashlib
    h = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for name in CODE_MODULES:
        h.update((here / f"{name}.py").read_bytes())
    return h.hexdigest()[:12]


def memory(cache_dir: str | Path | None = None):
    """The :class:`joblib.Memory` used for sweeps: ``<cache_dir>/<code_version()>``, with
    ``cache_dir`` defaulting to ``<repo>/.cache/joblib``."""
    import joblib
    base = Path(cache_dir) if cache_dir is not None else paths.CACHE / "joblib"
    return joblib.Memory(location=str(base / code_version()), verbose=0)


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
    from distributed import Client, LocalCluster
    if executor == "local-dask":
        n = max_workers or min(2, os.cpu_count() or 1)
        with LocalCluster(n_workers=n, threads_per_worker=1, processes=False,
                          dashboard_address=None) as cluster, Client(cluster) as client:
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


def run(fn, params, *, executor=None, max_workers: int | None = None, cache: bool = True,
        cache_dir: str | Path | None = None, progress: bool | None = None, desc: str | None = None) -> list:
    """Evaluate ``fn(**p)`` for every ``p`` in ``params`` and return the results in order.

    Parameters
    ----------
    fn : module-level callable (picklable), deterministic in its parameters (seeds included)
    params : list of dicts (see :func:`grid`)
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
        Malformed executor string.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    if not isinstance(params, (list, tuple)) or not all(isinstance(p, dict) for p in params):
        raise TypeError("params must be a list of dicts of keyword arguments")
    if max_workers is not None:
        max_workers = V.positive_int("max_workers", max_workers)
    target = memory(cache_dir).cache(fn) if cache else fn
    results: list = [None] * len(params)
    todo = []
    for k, p in enumerate(params):
        if cache and target.check_call_in_cache(**p):
            results[k] = target(**p)                       # a load, not a computation
        else:
            todo.append(k)
    if not todo:
        return results
    from tqdm.auto import tqdm
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


# ----------------------------------------------------------------------------------------
# tasks of the section 5 chapter (module level, so that they pickle and cache)
# ----------------------------------------------------------------------------------------

def regular_polygon(kappa: int) -> np.ndarray:
    """Regular kappa-gon on S^1 with a vertex at angle pi/2, shape (kappa, 2) (kappa = 3:
    the equilateral triangle of :func:`attention_fw.metastability.triangle_on_circle`)."""
    kappa = V.positive_int("kappa", kappa, minimum=3)
    th = np.pi / 2 + 2 * np.pi * np.arange(kappa) / kappa
    return np.stack([np.cos(th), np.sin(th)], axis=1)


def tokens_per_vertex(n: int, kappa: int) -> np.ndarray:
    """Split ``n >= kappa`` tokens over kappa vertices as evenly as possible (first ones get more)."""
    n = V.positive_int("n", n)
    kappa = V.positive_int("kappa", kappa)
    if n < kappa:
        raise ValueError(f"n must be >= kappa = {kappa}, got {n}")
    return np.array([n // kappa + (i < n % kappa) for i in range(kappa)])


def exit_time_task(*, beta: float, seed: int, n: int = 6, kappa: int = 3, gamma: float = 0.1,
                   eps: float = 0.05, runs: int = 10_000, cap: float = 1e300, method: str = "engine",
                   max_events: int = 10_000) -> dict:
    """Exit times ``T2`` (Theorem 5.4) of ``runs`` (SAP) chains from clusters at the vertices of
    the regular kappa-gon (n tokens, split evenly), by the engine or by plain stepping.

    Returns a dict of arrays ``times``, ``censored`` and scalars (parameters, ``c0``,
    the exact single-jump mean ``E_T2_frozen = 1/(1 - q)``).
    """
    from . import metastability as M
    v = regular_polygon(kappa)
    counts = tokens_per_vertex(n, kappa)
    x0, sigma = M.cluster_configuration(v, counts)
    if method == "engine":
        es = M.engine_exit_times(x0, sigma, gamma, beta, eps, runs, seed, cap=cap, max_events=max_events)
    elif method == "stepping":
        es = M.stepping_exit_times(x0, sigma, gamma, beta, eps, runs, seed, cap=int(min(cap, 10**9)))
    else:
        raise ValueError(f"method must be 'engine' or 'stepping', got {method!r}")
    lam = M.frozen_escape_rate(v, counts, beta)
    return {"beta": float(beta), "seed": seed, "n": n, "kappa": kappa, "gamma": gamma, "eps": eps,
            "method": method, "times": es.times, "censored": es.censored, "cap": es.cap,
            "c0": M.c0(v), "E_T2_frozen": (1.0 / -math.expm1(-lam)) if lam > 0 else math.inf}


def phase1_task(*, beta: float, seed: int, gamma: float, runs: int, config_beta: float,
                per_vertex: int, min_dist: float, config_seed: int, horizon: int | None = None,
                d: int = 2) -> dict:
    """Theorem 5.2 Monte Carlo at ``beta`` from a configuration built for ``config_beta`` (regular
    simplex in R^d; d = 2 is the equilateral triangle). See :func:`metastability.run_phase1`."""
    from . import metastability as M
    v = M.regular_simplex(d) if d != 2 else M.triangle_on_circle()
    x0, sigma = M.phase1_configuration(v, per_vertex, config_beta, config_seed, min_dist=min_dist)
    return M.run_phase1(x0, v, sigma, gamma, beta, runs, seed, horizon=horizon)


def collapse_task(*, x0: tuple, gamma: float, beta: float, tol: float, max_steps: int,
                  record_every: int = 1) -> dict:
    """Prop 5.1: :func:`metastability.collapse_sabeta` with hashable inputs (``x0`` as nested tuples)."""
    from . import metastability as M
    return M.collapse_sabeta(np.asarray(x0, float), gamma, beta, tol=tol, max_steps=max_steps,
                             record_every=record_every)


def e6_task(*, beta: float, seed: int, per_vertex: int = 2, radius: float = 0.05, config_seed: int = 7,
            gamma: float = 0.1, eps: float = 0.1, runs: int = 300, cap: int = 10_000,
            sabeta_cap: int = 10**6) -> dict:
    """Erratum E6: from one configuration "after phase 1" (equilateral triangle, ``per_vertex``
    tokens at distance ``radius`` from each vertex), the exit time ``T2`` of ``runs`` (SAP)
    chains (plain stepping, censored at ``cap``) and of the deterministic (SA-beta)."""
    from . import metastability as M
    v = M.triangle_on_circle()
    x0, sigma = M.near_vertex_configuration(v, per_vertex, radius, config_seed)
    es = M.stepping_exit_times(x0, sigma, gamma, beta, eps, runs, seed, cap=cap)
    det = M.sabeta_exit_time(x0, sigma, gamma, beta, eps, cap=sabeta_cap)
    return {"beta": float(beta), "times": es.times, "censored": es.censored, "cap": cap,
            "sabeta_T": det["T"], "sabeta_cap": sabeta_cap, "x0": x0, "sigma": sigma}
