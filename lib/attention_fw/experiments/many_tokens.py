"""Chapter 9: many tokens. The hardmax limit of a density, clusters on the circle, propagation of chaos,
low temperature; with the engines of :mod:`attention_fw.model.fast` and :mod:`attention_fw.model.sphere`.

Distances between measures are exact where they can be: in one dimension by sorting (:func:`w1_line`,
:func:`w1_circle`), between two measures of ``n`` equal atoms by an optimal assignment (:func:`w1_equal`);
in the plane otherwise the sliced distance (:func:`sliced_w1`, exact on each direction, a lower bound
of ``W1``: its bias is stated where it is used).
"""
from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from scipy.optimize import linear_sum_assignment

from .. import _validate as chk
from ..geometry import planar
from ..model import dynamics, fast, sphere
from ..results import Result

__all__ = ["cell_masses", "sample_polygon", "hardmax_limit", "w1_line", "w1_circle", "w1_equal", "sliced_w1",
           "circle_clusters", "sample_disk", "sabeta_measure", "chaos", "low_temperature"]


def cell_masses(vertices: npt.ArrayLike, B: npt.ArrayLike | None = None) -> np.ndarray:
    """``mu0(C_i)`` for ``mu0`` uniform on ``K = conv(vertices)``: the areas of the exact cells over the area of ``K``.

    Examples
    --------
    >>> square = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])
    >>> cell_masses(square).round(6).tolist()
    [0.25, 0.25, 0.25, 0.25]
    """
    v = chk.as_float_array("vertices", vertices, min_ndim=2, max_ndim=2)
    cells = planar.cells(v, B)
    areas = np.array([planar.polygon_area(c) if len(c) else 0.0 for c in cells])
    return areas / planar.polygon_area(v[planar.convex_hull(v)])


def sample_polygon(vertices: npt.ArrayLike, n: int, *, rng: chk.SeedLike) -> np.ndarray:
    """``n`` points uniform on the convex polygon ``conv(vertices)`` (fan triangulation, exact sampling)."""
    v = chk.as_float_array("vertices", vertices, min_ndim=2, max_ndim=2)
    P = v[planar.convex_hull(v)]
    g = chk.rng("rng", rng)
    a, b, c = P[0], P[1:-1], P[2:]
    e, f = b - a, c - a
    areas = np.abs(e[:, 0] * f[:, 1] - e[:, 1] * f[:, 0]) / 2
    t = g.choice(len(areas), size=n, p=areas / areas.sum())
    u, w = g.random(n), g.random(n)
    flip = u + w > 1
    u[flip], w[flip] = 1 - u[flip], 1 - w[flip]
    return a + u[:, None] * (b[t] - a) + w[:, None] * (c[t] - a)


def hardmax_limit(vertices: npt.ArrayLike, n: int, steps: int, gamma: float = 0.5, *, rng: chk.SeedLike) -> Result:
    """(SA-inf), ``B = I``, from the vertices of ``K`` and ``n`` tokens uniform on ``K``, through the hull engine.

    Returns the fraction of tokens nearest each vertex at the end, the fraction whose initial cell is
    that vertex's, the largest distance of a token to its nearest vertex at the end, and whether every
    token ended at the vertex of its initial cell (straight lines to ``v_i`` for every ``x in C_i``).
    """
    v = chk.as_float_array("vertices", vertices, min_ndim=2, max_ndim=2)
    x0 = np.vstack([v, sample_polygon(v, n, rng=rng)])
    start = planar.cell_labels(x0[len(v):], v)
    run = dynamics.simulate(x0, dynamics.Hardmax(gamma, method="hull"), steps)
    dist = np.linalg.norm(run.x[len(v):, None] - v[None], axis=-1)
    end = dist.argmin(axis=1)
    k = len(v)
    return Result(n=n, fractions=np.bincount(end, minlength=k) / n, start_fractions=np.bincount(start, minlength=k) / n,
                  max_distance=float(dist.min(axis=1).max()), straight=bool(np.array_equal(start, end)))


# ----------------------------------------------------------------------------- distances
def w1_line(a: npt.ArrayLike, b: npt.ArrayLike) -> float:
    """``W1`` between the empirical measures of two samples on the line (any sizes): ``int |F_a - F_b|``, exact."""
    a, b = np.sort(np.ravel(a)), np.sort(np.ravel(b))
    z = np.sort(np.r_[a, b])
    Fa = np.searchsorted(a, z[:-1], side="right") / a.size
    Fb = np.searchsorted(b, z[:-1], side="right") / b.size
    return float(np.sum(np.abs(Fa - Fb) * np.diff(z)))


def w1_circle(a: npt.ArrayLike, b: npt.ArrayLike) -> float:
    """``W1`` (arc length) between two empirical measures of angles on the circle, exact:
    ``min_c int_0^{2 pi} |F_a - F_b - c|``, attained at a weighted median of ``F_a - F_b`` (Rabin et al.)."""
    two_pi = 2 * np.pi
    a, b = np.sort(np.mod(np.ravel(a), two_pi)), np.sort(np.mod(np.ravel(b), two_pi))
    z = np.r_[0.0, np.sort(np.r_[a, b]), two_pi]
    D = np.searchsorted(a, z[:-1], side="right") / a.size - np.searchsorted(b, z[:-1], side="right") / b.size
    w = np.diff(z)
    order = np.argsort(D)
    cw = np.cumsum(w[order])
    c = D[order][np.searchsorted(cw, cw[-1] / 2)]
    return float(np.sum(np.abs(D - c) * w))


def w1_equal(x: npt.ArrayLike, y: npt.ArrayLike) -> float:
    """``W1`` between two measures of ``n`` equal atoms in ``R^d``: an optimal assignment (exact; ``O(n^3)``)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    C = np.linalg.norm(x[:, None] - y[None], axis=-1)
    i, j = linear_sum_assignment(C)
    return float(C[i, j].mean())


def sliced_w1(x: npt.ArrayLike, y: npt.ArrayLike, directions: int = 64) -> float:
    """The sliced distance ``mean_u W1(<u, x>, <u, y>)`` over ``directions`` equally spaced directions of the plane,
    exact on each direction; a lower bound of ``W1(x, y)`` (a projection is 1-Lipschitz), not equal to it."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    a = np.pi * np.arange(directions) / directions
    U = np.stack([np.cos(a), np.sin(a)], 1)
    return float(np.mean([w1_line(x @ u, y @ u) for u in U]))


# ----------------------------------------------------------------------------- the circle
def circle_clusters(beta: float, N: int, steps: int, *, rng: chk.SeedLike, rate_steps: float = 0.01) -> Result:
    """From ``N`` i.i.d. uniform angles, ``steps`` Euler steps of the circle model with
    ``dt = rate_steps / lambda*`` (``lambda* = max_k k^2 I_k(beta) / beta``, the fastest linear growth rate);
    the number of clusters at the end beside the mode ``k`` maximising ``k^2 I_k(beta)``."""
    g = chk.rng("rng", rng)
    t0 = g.uniform(0, 2 * np.pi, N)
    lam = float(sphere.growth_rates(beta).max())
    dt = rate_steps / lam
    th = sphere.simulate(t0, beta, dt, steps)
    return Result(beta=float(beta), N=int(N), dt=dt, steps=int(steps), k_observed=sphere.count_clusters(th),
                  k_predicted=sphere.predicted_clusters(beta), theta=th)


# ----------------------------------------------------------------------------- (SA-beta) in the plane
def sample_disk(n: int, *, rng: chk.SeedLike) -> np.ndarray:
    """``n`` points uniform on the unit disc."""
    g = chk.rng("rng", rng)
    a, r = g.uniform(0, 2 * np.pi, n), np.sqrt(g.random(n))
    return np.stack([r * np.cos(a), r * np.sin(a)], 1)


def sabeta_measure(n: int, gamma: float, beta: float, steps: int, *, rng: chk.SeedLike) -> np.ndarray:
    """``n`` tokens uniform on the unit disc after ``steps`` (SA-beta) steps (the fast engine: within 1e-8 of the
    radius of the dense step at each step)."""
    x = sample_disk(n, rng=rng)
    for _ in range(steps):
        x = fast.softmax_step(x, gamma, beta)
    return x


def chaos(ns: list[int], reference: int, gamma: float, beta: float, steps: int, replicates: int, *,
          rng: chk.SeedLike, directions: int = 64) -> Result:
    """Sliced ``W1`` between the ``n``-token measure and an independent ``reference``-token measure after ``steps``
    steps, ``replicates`` independent runs per ``n`` (each run its own stream, spawned from one drawn from ``rng``)."""
    ss = np.random.SeedSequence(int(chk.rng("rng", rng).integers(2**63)))
    ref_seq, *run_seqs = ss.spawn(1 + len(ns))
    ref = sabeta_measure(reference, gamma, beta, steps, rng=np.random.default_rng(ref_seq))
    d = np.empty((len(ns), replicates))
    for a, (n, sq) in enumerate(zip(ns, run_seqs)):
        for r, s in enumerate(sq.spawn(replicates)):
            d[a, r] = sliced_w1(sabeta_measure(n, gamma, beta, steps, rng=np.random.default_rng(s)), ref, directions)
    return Result(ns=np.asarray(ns), reference=reference, distances=d)


def low_temperature(n: int, betas: list[float], steps: list[int], gamma: float, *, rng: chk.SeedLike) -> Result:
    """``W1`` (exact assignment) between the (SA-beta) and the (SA-inf) measures from the same ``n`` tokens
    uniform on the disc, at each depth of ``steps`` (ascending) and each ``beta``."""
    x0 = sample_disk(n, rng=rng)
    depth = sorted(set(int(s) for s in steps))
    hard, x = {}, x0.copy()
    for t in range(depth[-1] + 1):
        if t in depth:
            hard[t] = x.copy()
        x = dynamics.hardmax_step(x, gamma)
    W = np.empty((len(betas), len(depth)))
    for a, b in enumerate(betas):
        x = x0.copy()
        for t in range(depth[-1] + 1):
            if t in depth:
                W[a, depth.index(t)] = w1_equal(x, hard[t])
            x = dynamics.softmax_step(x, gamma, b)
    return Result(n=n, betas=np.asarray(betas, float), steps=np.asarray(depth), distances=W)


def slope(x: npt.ArrayLike, y: npt.ArrayLike) -> tuple[float, float]:
    """Least-squares slope of ``log y`` against ``log x`` and its standard error."""
    lx, ly = np.log(np.asarray(x, float)), np.log(np.asarray(y, float))
    A = np.vstack([lx, np.ones_like(lx)]).T
    coef, res, *_ = np.linalg.lstsq(A, ly, rcond=None)
    dof = max(len(lx) - 2, 1)
    s2 = float(np.sum((ly - A @ coef) ** 2)) / dof
    cov = s2 * np.linalg.inv(A.T @ A)
    return float(coef[0]), float(math.sqrt(cov[0, 0]))
