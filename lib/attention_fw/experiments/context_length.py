"""Who stays put at real context lengths: cells of n Gaussian tokens under the hardmax (chapter 6).

Setting: ``n`` tokens ``x_1, ..., x_n`` i.i.d. ``N(0, I_d)``, key-query ``B = I_d``, the dynamics
(SA-inf) with a constant step ``gamma``. Token ``i`` *owns its cell* when it is its own unique
leader, ``<x_i, x_i> > <x_i, x_j>`` for every ``j != i`` (the genericity condition of Theorem 4.2
and the event of Remark 4.6, here for every token rather than for ``kappa`` fixed vertices).

* **Exact probability.** Given ``x_i`` with ``|x_i| = r``, the ``<x_i, x_j>`` (``j != i``) are
  i.i.d. ``N(0, r^2)``, so ``P(i owns its cell | r) = Phi(r)^(n-1)`` and
  ``P(i owns its cell) = E[Phi(R)^(n-1)]``, ``R ~ chi_d`` (:func:`own_cell_probability`): the
  expected fraction of owners. It is 1/2 near ``d ~ 2 log n`` (:func:`half_dimension`).
* **Owners stay put.** A token that owns its cell is its own leader, so a step leaves it in place;
  the others move inside the hull, whose maximum of ``<x_i, .>`` is still ``|x_i|^2`` (attained at
  ``x_i`` only), so it owns its cell at every later layer too: exactly the owners at ``t = 0``
  never move.
* **Theorem 4.2's closed form.** A token led by an owner ``v`` moves on the segment towards ``v``
  and stays in ``v``'s cell (convexity), so ``x_i^t = v + (1 - gamma)^t (x_i^0 - v)`` exactly.

:func:`tiled_check` compares the tiled steps with the untiled ones on one draw, :func:`step_memory`
says what a step needs in memory with and without tiles (:func:`size_text` writes it in KiB, MiB
or GiB). :func:`ownership_task` and :func:`hardmax_run_task` are the sweep tasks of the chapter (module level,
deterministic in their parameters, ``rng`` included); both find leaders with :mod:`attention_fw.model.tiled`
and step through :func:`attention_fw.model.dynamics.simulate`, so ``n = 65,536`` tokens need
``O(n (d + tile))`` memory.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special, stats

from .. import _validate as chk
from ..model import dynamics, tiled
from ..results import Result

__all__ = ["own_cell_probability", "half_dimension", "ownership_task", "variance_ratio", "hardmax_run_task",
           "TiledCheck", "tiled_check", "StepMemory", "step_memory", "size_text"]


def _gaussian_tokens(shape, rng):
    """Tokens of ``shape`` (..., n, d) for one sweep point: a stream keyed by one draw of ``rng``
    and by ``(n, d)``.

    ``rng`` is an int, a SeedSequence or a Generator (the same seed gives the same tokens however
    it is passed); mixing ``(n, d)`` into the stream makes the points of a sweep that share one
    seed independent draws, rather than the same numbers cut into other shapes.
    """
    word = int(chk.rng("rng", rng).integers(2 ** 63))
    return np.random.default_rng(np.random.SeedSequence([word, *shape[-2:]])).standard_normal(shape)


def own_cell_probability(n, d) -> np.ndarray:
    """``P(token i owns its cell) = E[Phi(R)^(n-1)]``, ``R ~ chi_d``, for ``n`` i.i.d. ``N(0, I_d)`` tokens, ``B = I``.

    Composite Simpson rule on ``r in [0, sqrt(d) + 12]`` (the chi_d density is negligible beyond),
    ``Phi^(n-1)`` as ``exp((n - 1) log Phi)``; broadcasts over ``n`` and ``d`` (real ``d >= 1``
    allowed; below 1 the chi density is singular at 0). Agrees with adaptive quadrature to about
    1e-12, and with the closed form ``(2/n)(1 - 2^-n)`` at ``d = 1`` (tested).

    Examples
    --------
    >>> # d = 1: Phi(|Z|) is uniform on (1/2, 1)
    >>> p = own_cell_probability([2, 4, 10], 1)
    >>> bool(np.allclose(p, [2 / n * (1 - 2.0 ** -n) for n in (2, 4, 10)], rtol=1e-10))
    True
    >>> # one head's d = 64: all own their cells
    >>> own_cell_probability(65536, [20, 64]).round(3)
    array([0.56, 1.  ])
    """
    n = np.asarray(n, dtype=float)
    d = np.asarray(d, dtype=float)
    if not (np.isfinite(n).all() and (n >= 1).all()):
        raise ValueError("n must be >= 1 (finite)")
    if not (np.isfinite(d).all() and (d >= 1).all()):
        raise ValueError("d must be >= 1 (finite)")
    n, d = np.broadcast_arrays(n, d)
    u = np.linspace(0.0, 1.0, 4001)
    w = np.ones_like(u)
    w[1:-1:2], w[2:-1:2] = 4.0, 2.0
    hi = np.sqrt(d) + 12.0
    r = hi[..., None] * u
    log_f = (n[..., None] - 1.0) * special.log_ndtr(r) + stats.chi.logpdf(np.maximum(r, 1e-300), d[..., None])
    out = (np.exp(log_f) * w).sum(axis=-1) * hi * (u[1] - u[0]) / 3.0
    return np.clip(out, 0.0, 1.0)


def half_dimension(n) -> float:
    """The (real) dimension ``d >= 1`` at which a token of ``n >= 4`` owns its cell with probability 1/2.

    (At ``d = 1`` the probability is ``(2/n)(1 - 2^-n)``, above 1/2 for ``n <= 3``.)

    Examples
    --------
    >>> d = half_dimension(1024)
    >>> # below 2 ln n
    >>> (
    ...     round(d, 1),
    ...     round(float(own_cell_probability(1024, d)), 6),
    ...     d < 2 * math.log(1024),
    ... )
    (11.1, 0.5, True)
    """
    n = chk.positive_int("n", n, minimum=4)
    return float(optimize.brentq(lambda d: float(own_cell_probability(n, d)) - 0.5, 1.0, 400.0, xtol=1e-6))


def ownership_task(*, n: int, d: int, systems: int, rng) -> Result:
    """Owners among ``systems`` independent draws of ``n`` Gaussian tokens in ``R^d`` (tiled leaders).

    ``rng`` (int, SeedSequence or Generator) seeds the tokens, together with ``(n, d)``.

    Returns
    -------
    Result
        Entries ``n``, ``d``, ``systems``, ``seed`` (``rng`` if it is an int, else None),
        ``owners`` (tokens that are their own unique leader), ``owners_per_system`` (list),
        ``tokens`` (= systems * n), ``fraction``, the exact ``probability`` of
        :func:`own_cell_probability`, ``pvalue`` (two-sided exact binomial test of
        ``owners`` against ``probability``; it treats the tokens as independent, which the
        tokens of one sequence are not, see :func:`variance_ratio`), and the memory of the
        leader search, ``tile_bytes`` against ``untiled_bytes`` (:func:`step_memory`).

    Examples
    --------
    >>> # d >> 2 log n: all own their cells
    >>> r = ownership_task(n=64, d=40, systems=2, rng=0)
    >>> r.owners == r.tokens == 128, r.owners_per_system, r.probability > 1 - 1e-5
    (True, [64, 64], True)
    """
    n, d = chk.positive_int("n", n, minimum=2), chk.positive_int("d", d)
    systems = chk.positive_int("systems", systems)
    x = _gaussian_tokens((systems, n, d), rng)
    first, count = tiled.leaders(x, return_counts=True)
    per_system = ((first == np.arange(n)) & (count == 1)).sum(axis=-1)
    owners = int(per_system.sum())
    prob = float(own_cell_probability(n, d))
    mem = step_memory(n, d, systems=systems)
    return Result(n=n, d=d, systems=systems, seed=chk.seed_record(rng), owners=owners,
                  owners_per_system=[int(k) for k in per_system], tokens=systems * n,
                  fraction=owners / (systems * n), probability=prob,
                  pvalue=float(stats.binomtest(owners, systems * n, prob).pvalue),
                  tile_bytes=mem.tile_bytes, untiled_bytes=mem.untiled_bytes)


def variance_ratio(results) -> float:
    """How much more the owner count of one sequence varies than a binomial count would.

    ``results``: :func:`ownership_task` results with at least 2 systems each. For each, the
    sample variance of the per-system owner counts over ``n p (1 - p)``; returned is their
    mean, weighted by the degrees of freedom (``systems - 1``). The tokens of one sequence
    compete for the same hull, so their ownership events are dependent: a ratio above 1 means
    positively correlated owners (binomial standard errors and p-values, which treat the tokens
    as independent, are then too small by about the square root of the ratio), below 1
    negatively correlated ones.

    Examples
    --------
    >>> low = variance_ratio([ownership_task(n=128, d=4, systems=400, rng=0)])
    >>> high = variance_ratio([ownership_task(n=512, d=8, systems=400, rng=0)])
    >>> low < 1 < high          # both signs occur (each over 3.5 standard errors from 1)
    True
    """
    num = den = 0.0
    for r in results:
        counts = np.asarray(r["owners_per_system"], dtype=float)
        if counts.size < 2:
            raise ValueError("results must each hold at least 2 systems (owners_per_system)")
        p = r["probability"]
        var = r["n"] * p * (1.0 - p)
        if var <= 0:
            continue
        num += (counts.size - 1) * counts.var(ddof=1) / var
        den += counts.size - 1
    if den == 0:
        raise ValueError("results must hold a point with 0 < probability < 1")
    return float(num / den)


def hardmax_run_task(*, n: int, d: int, gamma: float, steps: int, rng) -> Result:
    """``steps`` layers of (SA-inf), ``B = I``, constant ``gamma``, from ``n`` Gaussian tokens in ``R^d``.

    The layers run through :func:`attention_fw.model.dynamics.simulate` (which switches to the tiled
    steps when the ``n x n`` scores would not fit); ``rng`` (int, SeedSequence or Generator)
    seeds the tokens, together with ``(n, d)``, exactly as :func:`ownership_task` does, so the two
    tasks see the same tokens for the same seed (the first system of the sweep).

    Returns
    -------
    Result with ``n``, ``d``, ``gamma``, ``steps``, ``seed`` (as in :func:`ownership_task`); the counts ``owners`` (at ``t = 0``),
    ``led_by_owner`` (tokens whose unique leader owns its cell) and ``others``; ``moved`` (tokens
    that moved at each layer), ``never_moved`` and ``never_moved_are_owners``; for the tokens
    led by an owner ``v``, at each layer, ``closed_form_error`` (largest deviation from Theorem
    4.2's closed form ``v + (1 - gamma)^t (x^0 - v)``, relative to ``|x^0 - v|``) and
    ``ratio_median`` / ``ratio_max`` of ``|x^t - v| / |x^0 - v|``; ``probability``,
    ``tile_bytes`` and ``untiled_bytes`` as in :func:`ownership_task`.

    Examples
    --------
    >>> r = hardmax_run_task(n=200, d=6, gamma=0.5, steps=3, rng=1)
    >>> (
    ...     r.never_moved_are_owners,
    ...     r.moved == [r.n - r.owners] * 3,
    ...     max(r.closed_form_error) < 1e-14,
    ... )
    (True, True, True)
    """
    n, d = chk.positive_int("n", n, minimum=2), chk.positive_int("d", d)
    steps = chk.positive_int("steps", steps)
    gamma = chk.step_size("gamma", gamma)
    x0 = _gaussian_tokens((n, d), rng)
    first, count = tiled.leaders(x0, return_counts=True)
    owner = (first == np.arange(n)) & (count == 1)
    led = ~owner & (count == 1) & owner[first]  # led by one owner
    v, start = x0[first[led]], x0[led]
    gap0 = np.linalg.norm(start - v, axis=1)
    some = bool(led.any())
    state = {"x": x0, "never_moved": np.ones(n, dtype=bool)}

    def layer(x, t):
        """What layer ``t`` did: tokens moved since ``t - 1``; distances to the leading owners."""
        moved = (x != state["x"]).any(axis=1)
        state["x"] = x.copy()
        state["never_moved"] &= ~moved
        closed = v + (1.0 - gamma) ** t * (start - v)
        ratio = np.linalg.norm(x[led] - v, axis=1) / gap0
        return {"moved": int(moved.sum()),
                "closed_form_error": float((np.linalg.norm(x[led] - closed, axis=1) / gap0).max()) if some else 0.0,
                "ratio_median": float(np.median(ratio)) if some else math.nan,
                "ratio_max": float(ratio.max()) if some else math.nan}

    rec = dynamics.FunctionRecorder("layer", layer, times=range(1, steps + 1))
    per_layer = dynamics.simulate(x0, dynamics.Hardmax(gamma), steps, [rec]).records["layer"]
    never_moved = state["never_moved"]
    mem = step_memory(n, d)
    return Result(n=n, d=d, gamma=gamma, steps=steps, seed=chk.seed_record(rng),
                  owners=int(owner.sum()), led_by_owner=int(led.sum()), others=int(n - owner.sum() - led.sum()),
                  moved=[int(m) for m in per_layer["moved"]], never_moved=int(never_moved.sum()),
                  never_moved_are_owners=bool(np.array_equal(never_moved, owner)),
                  **{key: [float(e) for e in per_layer[key]]
                     for key in ("closed_form_error", "ratio_median", "ratio_max")},
                  probability=float(own_cell_probability(n, d)),
                  tile_bytes=mem.tile_bytes, untiled_bytes=mem.untiled_bytes)


@dataclass(frozen=True)
class TiledCheck:
    """One draw of ``n`` tokens in ``R^d`` through the tiled and the untiled steps.

    ``softmax_error``: largest difference of one softmax step (``gamma``, ``beta``), relative to
    the largest coordinate of the tokens; ``same_leaders``: identical hardmax leader sets.

    Examples
    --------
    >>> # four tiles, the last one short
    >>> c = tiled_check(100, 4, key_tile=32, rng=2)
    >>> c.key_tile, c.softmax_error < 1e-12, c.same_leaders
    (32, True, True)
    """

    n: int
    d: int
    key_tile: int
    softmax_error: float
    same_leaders: bool


def tiled_check(n: int, d: int = 64, *, key_tile: int = 256, gamma: float = 0.1, beta: float = 4.0,
                rng) -> TiledCheck:
    """Tiled (``key_tile`` keys per tile) against untiled steps on ``n`` tokens ``N(0, I_d / d)``.

    The tests hold the tiled steps to the untiled ones (softmax to 1e-12 relative, identical
    leaders, the chain's law); this is the same comparison on one draw, for a page to show.

    Examples
    --------
    >>> c = tiled_check(300, 8, key_tile=64, rng=0)
    >>> c.softmax_error < 1e-12, c.same_leaders
    (True, True)
    """
    n, d = chk.positive_int("n", n, minimum=2), chk.positive_int("d", d)
    key_tile = chk.positive_int("key_tile", key_tile)
    x = chk.rng("rng", rng).standard_normal((n, d)) / math.sqrt(d)
    err = np.abs(tiled.softmax_step(x, gamma, beta, key_tile=key_tile)
                 - dynamics.softmax_step(x, gamma, beta)).max() / np.abs(x).max()
    same = bool(np.array_equal(tiled.leaders(x, key_tile=key_tile), dynamics.leaders(x)))
    return TiledCheck(n=n, d=d, key_tile=min(key_tile, n), softmax_error=float(err), same_leaders=same)


@dataclass(frozen=True)
class StepMemory:
    """Memory of one step on ``n`` tokens (per system): the untiled ``n x n`` scores (float64) against the
    tiles of :func:`attention_fw.model.tiled.plan` (``tile_queries`` queries x ``tile_keys`` keys per tile,
    ``tiles`` key tiles per block of queries, ``workers`` tiles at once).

    Examples
    --------
    >>> # 1 MiB instead of the 8 MB of scores
    >>> m = step_memory(1000, 8, budget=2 ** 20)
    >>> (
    ...     m.untiled_bytes == 8 * 1000**2,
    ...     (m.tiles - 1) * m.tile_keys < 1000 <= m.tiles * m.tile_keys,
    ... )
    (True, True)
    >>> m.tile_bytes <= 2 ** 20
    True
    """

    n: int
    untiled_bytes: int
    tile_keys: int
    tiles: int
    tile_bytes: int
    tile_queries: int = 0
    workers: int = 1


def step_memory(n: int, d: int, *, systems: int = 1, budget=None) -> StepMemory:
    """What one step on ``systems`` systems of ``n`` tokens in ``R^d`` holds in memory, untiled
    (``8 systems n^2`` bytes of float64 scores) and tiled (``budget`` in bytes, default
    :func:`attention_fw.model.tiled.memory_budget`).

    Examples
    --------
    >>> # tiles sized from the machine's cache
    >>> m = step_memory(65536, 64, budget=256 * 2**20)
    >>> (
    ...     size_text(m.untiled_bytes),
    ...     m.tile_keys * m.tiles == 65536,
    ...     m.workers * m.tile_bytes <= 2**27,
    ... )
    ('32 GiB', True, True)
    """
    n, d = chk.positive_int("n", n), chk.positive_int("d", d)
    systems = chk.positive_int("systems", systems)
    plan = tiled.plan((systems, n, d), budget=budget)
    return StepMemory(n=n, untiled_bytes=8 * systems * n * n, tile_keys=plan.keys, tiles=-(-n // plan.keys),
                      tile_bytes=plan.tile_bytes, tile_queries=plan.queries, workers=plan.workers)


def size_text(nbytes: int) -> str:
    """A number of bytes in the largest binary unit that keeps it at least 1: ``'8 MiB'``, ``'1.5 GiB'``.

    Examples
    --------
    >>> size_text(8 * 1024**2), size_text(3 * 2**29), size_text(512)
    ('8 MiB', '1.5 GiB', '512 bytes')
    """
    nbytes = chk.positive_int("nbytes", nbytes, minimum=0)
    for unit, power in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 2 ** power:
            return f"{nbytes / 2 ** power:.3g} {unit}"
    return f"{nbytes} bytes"
