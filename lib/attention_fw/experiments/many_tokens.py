"""Chapter 9: many tokens. The hardmax limit of a density, clusters on the circle, propagation of chaos,
low temperature; with the engines of :mod:`attention_fw.model.fast` and :mod:`attention_fw.model.sphere`.

Distances between measures are exact where they can be: in one dimension by sorting (:func:`w1_line`,
:func:`w1_circle`), between two measures of ``n`` equal atoms by an optimal assignment (:func:`w1_equal`),
between any two point measures of moderate size (``n m <= W1_MAX_ENTRIES``, unequal sizes and weights) by the
network simplex of POT (:func:`w1_exact`; POT is the extra ``transport`` of the library, imported only there);
in the plane otherwise the sliced distance (:func:`sliced_w1`, exact on each direction, a lower bound
of ``W1``: its bias is stated where it is used, and measured against :func:`w1_exact` where both fit).
"""
from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from scipy import integrate
from scipy.optimize import linear_sum_assignment
from scipy.spatial.distance import cdist

from .. import _validate as chk
from ..geometry import planar
from ..geometry import polytope
from ..model import dynamics, fast, sphere
from ..results import Result

__all__ = ["cell_masses", "sample_polygon", "gaussian_polygon_mass", "gaussian_cell_masses", "sample_gaussian_polygon",
           "hardmax_limit", "w1_line", "w1_circle", "w1_equal", "w1_exact", "sliced_w1",
           "circle_clusters", "sample_disk", "sabeta_measure", "chaos", "low_temperature",
           "sector_configuration", "polygon_distance", "sabeta_exit_at_scale", "exit_at_scale_task",
           "chain_exit_mean", "sample_sphere", "sphere_clusters"]


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


# ----------------------------------------------------------------------------- a Gaussian density on K
EPS = float(np.finfo(float).eps)
GAUSS_TOL = 1e-12
"""Absolute tolerance asked of each edge's quadrature in :func:`gaussian_polygon_mass`."""


def _gaussian(mean, cov):
    m = chk.as_float_array("mean", mean, ndim=1)
    if m.shape != (2,):
        raise ValueError(f"mean must have shape (2,), got {m.shape}")
    S = chk.square_matrix("cov", cov, 2, symmetric=True)
    if np.linalg.eigvalsh(S).min() <= 0:
        raise ValueError("cov must be positive definite")
    return m, np.linalg.cholesky(S)


def _whiten(P, m, L):
    """``L^{-1} (P - m)``: the standard normal's coordinates."""
    return np.linalg.solve(L, (P - m).T).T


def _edge_terms(W):
    """Per edge ``a -> b`` of the closed polygon ``W`` (whitened): distance ``h`` of its line to the origin and the
    signed angles ``alpha_a, alpha_b`` of its ends from the foot of the perpendicular (both in ``(-pi/2, pi/2)``)."""
    a, b = W, np.roll(W, -1, axis=0)
    e = b - a
    cross = a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0]
    le = np.linalg.norm(e, axis=1)
    h = np.abs(cross) / np.where(le > 0, le, 1.0)
    t = -np.einsum("ij,ij->i", a, e) / np.where(le > 0, le**2, 1.0)
    f = a + t[:, None] * e                                       # the foot of the perpendicular
    fn = f / np.where(h > 0, np.linalg.norm(f, axis=1), 1.0)[:, None]

    def ang(p):
        return np.arctan2(fn[:, 0] * p[:, 1] - fn[:, 1] * p[:, 0], np.einsum("ij,ij->i", fn, p))
    return h, ang(a), ang(b), np.arctan2(cross, np.einsum("ij,ij->i", a, b)), le


def gaussian_polygon_mass(polygon: npt.ArrayLike, mean: npt.ArrayLike, cov: npt.ArrayLike) -> Result:
    """``P(X in polygon)`` for ``X ~ N(mean, cov)`` in the plane, by an exact reduction to one-dimensional integrals.

    After whitening (``y = L^{-1}(x - mean)``, ``cov = L L^T``) the polygon stays a polygon and the law is the
    standard normal. Its mass is the signed sum over the edges ``a -> b`` of the mass of the triangle
    ``(0, a, b)``; in polar coordinates the radial integral is closed,
    ``int_0^{r(theta)} e^{-r^2/2} r dr / (2 pi) = (1 - e^{-r(theta)^2/2}) / (2 pi)``, with
    ``r(theta) = h / cos(alpha)`` on the edge's line (``h`` its distance to the origin, ``alpha`` the angle from the
    foot of the perpendicular). So each edge gives ``Delta/(2 pi) - int_{alpha_a}^{alpha_b} e^{-h^2/(2 cos^2
    alpha)} d alpha / (2 pi)`` (``Delta`` the signed angle it subtends), the last integral by adaptive quadrature
    (``scipy.integrate.quad``, absolute tolerance ``GAUSS_TOL``). That integral is Owen's ``T(h, tan alpha)``
    difference; the tests check against ``scipy.special.owens_t``, independent code.

    Returns ``mass`` and ``error``: the sum of quad's error estimates, of the rounding of the angle sum (a few
    ulps per edge) and of the masses of the triangles dropped as degenerate (edges on a line within about
    ``1e-16`` of the mean, where the angles are not defined; each mass at most ``1e-17``). Vertices in either
    orientation; an empty polygon (shape ``(0, 2)``) has mass 0.

    Examples
    --------
    >>> sq = np.array([[-1.0, -1.0], [1.0, -1.0], [1.0, 1.0], [-1.0, 1.0]])
    >>> from scipy.special import erf
    >>> r = gaussian_polygon_mass(sq, [0.0, 0.0], np.eye(2))
    >>> bool(abs(r.mass - erf(1 / np.sqrt(2)) ** 2) < 1e-12)
    True
    """
    P = chk.as_float_array("polygon", polygon, ndim=2, last_dim=2, allow_empty=True)
    m, L = _gaussian(mean, cov)
    if len(P) < 3:
        return Result(mass=0.0, error=0.0)
    W = _whiten(P, m, L)
    with np.errstate(invalid="ignore", divide="ignore"):
        h, aa, ab, delta, le = _edge_terms(W)
    total, err = 0.0, 8 * len(W) * EPS
    for k in range(len(W)):               # one quadrature per edge (a polygon has few edges; no loop over tokens)
        tri = h[k] * le[k] / (4 * np.pi)  # the triangle (0, a, b) has area h |b - a| / 2 and density <= 1 / (2 pi)
        if not tri > 1e-17:               # a degenerate triangle (an edge on a line through the mean): mass <= tri
            err += tri
            continue
        total += float(delta[k]) / (2 * np.pi)
        if h[k] > 40:                     # the integrand is below e^{-800}
            continue
        hk = float(h[k])
        val, e = integrate.quad(lambda t: math.exp(-hk * hk / (2 * math.cos(t) ** 2)), float(aa[k]), float(ab[k]),
                                epsabs=GAUSS_TOL, epsrel=1e-13, limit=200)
        total -= val / (2 * np.pi)
        err += e / (2 * np.pi)
    mass = total if _signed(P) >= 0 else -total     # det L > 0: whitening keeps the orientation
    return Result(mass=float(min(max(mass, 0.0), 1.0)), error=float(err))


def _signed(P):
    return 0.5 * float(np.sum(P[:, 0] * np.roll(P[:, 1], -1) - np.roll(P[:, 0], -1) * P[:, 1]))



def gaussian_cell_masses(vertices: npt.ArrayLike, mean: npt.ArrayLike, cov: npt.ArrayLike,
                         B: npt.ArrayLike | None = None) -> Result:
    """``mu0(C_i)`` for ``mu0`` the Gaussian ``N(mean, cov)`` conditioned on ``K = conv(vertices)``: the Gaussian
    masses of the exact cells (:func:`attention_fw.geometry.planar.cells`) over that of ``K``
    (:func:`gaussian_polygon_mass`). Returns ``masses``, ``mass_K`` (``P(X in K)``, the acceptance of
    :func:`sample_gaussian_polygon`) and ``error``, a bound on each mass's error from the quadratures."""
    v = chk.as_float_array("vertices", vertices, min_ndim=2, max_ndim=2)
    cells = planar.cells(v, B)
    parts = [gaussian_polygon_mass(c, mean, cov) for c in cells]
    K = gaussian_polygon_mass(v[planar.convex_hull(v)], mean, cov)
    if not K.mass > 0:
        raise ValueError("the Gaussian gives conv(vertices) no mass in floating point: mu0 conditioned on K is undefined")
    g = np.array([r.mass for r in parts])
    e_cells = np.array([r.error for r in parts])
    err = (e_cells + g / K.mass * K.error) / K.mass
    return Result(masses=g / K.mass, mass_K=K.mass, cell_mass_sum=float(g.sum()), error=float(err.max()))


def sample_gaussian_polygon(vertices: npt.ArrayLike, n: int, mean: npt.ArrayLike, cov: npt.ArrayLike, *,
                            rng: chk.SeedLike) -> np.ndarray:
    """``n`` points of ``N(mean, cov)`` conditioned on ``conv(vertices)``: exact, by rejection in vectorised batches
    (expected cost ``n / P(X in K)`` draws). ``P(X in K)`` below ``1e-3`` is refused (the draws would not end)."""
    v = chk.as_float_array("vertices", vertices, min_ndim=2, max_ndim=2)
    n = chk.positive_int("n", n)
    m, L = _gaussian(mean, cov)
    P = v[planar.convex_hull(v)]
    acc = gaussian_polygon_mass(P, m, L @ L.T).mass
    if not acc >= 1e-3:
        raise ValueError(f"the Gaussian puts mass {acc:.3g} < 1e-3 on conv(vertices): rejection sampling refused")
    g = chk.rng("rng", rng)
    out, got = np.empty((n, 2)), 0
    while got < n:
        want = min(int(1.2 * (n - got) / acc) + 64, 1 << 20)   # memory O(batch), not O(n / acc)
        y = m + g.standard_normal((want, 2)) @ L.T
        y = y[planar.point_in_polygon(y, P)][: n - got]
        out[got:got + len(y)] = y
        got += len(y)
    return out


def hardmax_limit(vertices: npt.ArrayLike, n: int, steps: int, gamma: float = 0.5, *, rng: chk.SeedLike,
                  mean: npt.ArrayLike | None = None, cov: npt.ArrayLike | None = None) -> Result:
    """(SA-inf), ``B = I``, from the vertices of ``K`` and ``n`` tokens drawn from ``mu0``, through the hull engine;
    ``mu0`` is uniform on ``K``, or with ``mean`` and ``cov`` the Gaussian ``N(mean, cov)`` conditioned on ``K``
    (:func:`sample_gaussian_polygon`).

    Returns the fraction of tokens nearest each vertex at the end, the fraction whose initial cell is
    that vertex's, the largest distance of a token to its nearest vertex at the end, and whether every
    token ended at the vertex of its initial cell (straight lines to ``v_i`` for every ``x in C_i``).
    """
    v = chk.as_float_array("vertices", vertices, min_ndim=2, max_ndim=2)
    if (mean is None) != (cov is None):
        raise ValueError("mean and cov go together (a Gaussian density) or not at all (uniform)")
    if mean is None or cov is None:
        sample = sample_polygon(v, n, rng=rng)
    else:
        sample = sample_gaussian_polygon(v, n, mean, cov, rng=rng)
    x0 = np.vstack([v, sample])
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


W1_MAX_ENTRIES = 10_000_000
"""Largest ``n * m`` that :func:`w1_exact` accepts: its cost matrix and POT's transport plan (float64) and the
solver's own arrays took about 40 bytes per entry here (0.35 GB beyond the interpreter at 2,000 x 4,000, 1.1 s of
CPU; 4,000 x 4,000: 0.67 GB, 2.5 s)."""


def _weights(name: str, w: npt.ArrayLike | None, size: int) -> np.ndarray:
    if w is None:
        return np.full(size, 1.0 / size)
    v = chk.as_float_array(name, w, ndim=1)
    if v.shape != (size,):
        raise ValueError(f"{name} must have shape ({size},) (one weight per point), got {v.shape}")
    if v.min() < 0:
        raise ValueError(f"{name} must be nonnegative, got a minimum of {v.min():.3g}")
    if not abs(v.sum() - 1.0) <= 1e-9:
        raise ValueError(f"{name} must sum to 1 (a probability measure), got {v.sum():.12g}")
    return v / v.sum()


def w1_exact(x: npt.ArrayLike, y: npt.ArrayLike, a: npt.ArrayLike | None = None, b: npt.ArrayLike | None = None,
             *, max_entries: int = W1_MAX_ENTRIES) -> float:
    """``W1`` (Euclidean cost) between ``sum_i a_i delta_{x_i}`` and ``sum_j b_j delta_{y_j}`` in ``R^d``, exact:
    the optimal transport plan by the network simplex of POT (``ot.emd2``), any sizes ``n`` and ``m``.

    ``a`` and ``b`` are probability weights (uniform when omitted); ``x`` is ``(n, d)``, ``y`` is ``(m, d)``.
    The value is exact up to the rounding of the float64 costs (the simplex ends at an optimal vertex of the
    transport polytope; it is checked to have ended so). The cost matrix is dense, ``n * m`` entries: above
    ``max_entries`` (``W1_MAX_ENTRIES`` by default, about 0.4 GB) the call is refused. POT is imported here
    only (``pip install attention-fw[transport]``); the rest of the library does not need it.

    Examples
    --------
    >>> x = np.array([[0.0, 0.0], [1.0, 0.0]])
    >>> round(w1_exact(x, x + [0.0, 2.0]), 12)          # a translate: W1 = |shift|
    2.0
    >>> round(w1_exact(x, [[0.0, 0.0]], a=[0.25, 0.75]), 12)   # sizes 2 and 1
    0.75
    """
    X = chk.as_float_array("x", x, ndim=2)
    Y = chk.as_float_array("y", y, ndim=2)
    if X.shape[1] != Y.shape[1]:
        raise ValueError(f"x and y must have the same dimension d, got x {X.shape} and y {Y.shape}")
    n, m = len(X), len(Y)
    A, Bw = _weights("a", a, n), _weights("b", b, m)
    max_entries = chk.positive_int("max_entries", max_entries)
    if n * m > max_entries:
        raise ValueError(f"w1_exact: the cost matrix would have n * m = {n:,} * {m:,} = {n * m:,} entries, above "
                         f"max_entries = {max_entries:,} (about 40 bytes each: {40 * n * m / 1e9:.2g} GB); use "
                         "sliced_w1 (a lower bound) or smaller samples, or raise max_entries knowingly")
    import ot   # POT: the library's extra "transport"

    C = cdist(X, Y)     # each entry from the differences (no cancellation: 0 between equal points)
    value, log = ot.emd2(A, Bw, C, numItermax=max(100_000, 50 * (n + m) ** 2), log=True)
    if log.get("warning") is not None:
        raise RuntimeError(f"w1_exact: the network simplex did not end at an optimum ({log['warning']})")
    return float(value)


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
          rng: chk.SeedLike, directions: int = 64, exact_ns: list[int] | tuple[int, ...] = (),
          exact_reference: int = 0, exact_replicates: int | None = None) -> Result:
    """Sliced ``W1`` between the ``n``-token measure and an independent ``reference``-token measure after ``steps``
    steps, ``replicates`` independent runs per ``n`` (each run its own stream, spawned from one drawn from ``rng``).

    With ``exact_ns``, also for each of those ``n`` and each of ``exact_replicates`` runs (``replicates`` when
    ``None``; new runs, streams spawned after the others so that ``distances`` do not change): the exact ``W1``
    (:func:`w1_exact`) and the sliced ``W1`` between
    the ``n``-token measure and the first ``exact_reference`` tokens of the reference run (``exact``,
    ``sliced_exact``), and ``baseline``: the exact ``W1`` between that block and ``n`` other tokens of the reference
    run, drawn at random from the rest of it (the sampling error of ``n`` tokens of the large system, measured the
    same way; without replacement when the rest holds ``n`` tokens, else with). ``reference`` must exceed
    ``exact_reference``."""
    ss = np.random.SeedSequence(int(chk.rng("rng", rng).integers(2**63)))
    ref_seq, *run_seqs = ss.spawn(1 + len(ns))
    ex_ns = [chk.positive_int("exact_ns", k) for k in exact_ns]
    if ex_ns:
        exact_reference = chk.positive_int("exact_reference", exact_reference)
        ex_reps = chk.positive_int("exact_replicates", replicates if exact_replicates is None else exact_replicates)
        if not reference > exact_reference:
            raise ValueError(f"reference must exceed exact_reference (a block of the reference run and other "
                             f"tokens of it), got reference {reference:,} and exact_reference {exact_reference:,}")
    ref = sabeta_measure(reference, gamma, beta, steps, rng=np.random.default_rng(ref_seq))
    d = np.empty((len(ns), replicates))
    for a, (n, sq) in enumerate(zip(ns, run_seqs)):
        for r, s in enumerate(sq.spawn(replicates)):
            d[a, r] = sliced_w1(sabeta_measure(n, gamma, beta, steps, rng=np.random.default_rng(s)), ref, directions)
    out = dict(ns=np.asarray(ns), reference=reference, distances=d)
    if ex_ns:
        block, rest = ref[:exact_reference], ref[exact_reference:]
        W, S, base = (np.empty((len(ex_ns), ex_reps)) for _ in range(3))
        for a, (n, sq) in enumerate(zip(ex_ns, ss.spawn(len(ex_ns)))):
            for r, (s, sb) in enumerate(s.spawn(2) for s in sq.spawn(ex_reps)):
                x = sabeta_measure(n, gamma, beta, steps, rng=np.random.default_rng(s))
                W[a, r], S[a, r] = w1_exact(x, block), sliced_w1(x, block, directions)
                pick = np.random.default_rng(sb).choice(len(rest), n, replace=n > len(rest))
                base[a, r] = w1_exact(rest[pick], block)
        out.update(exact_ns=np.asarray(ex_ns), exact_reference=exact_reference, exact=W, sliced_exact=S,
                   baseline=base)
    return Result(**out)


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


# ----------------------------------------------------------------------------- metastability at scale
def sector_configuration(vertices: npt.ArrayLike, per_vertex: int, radius: float, *,
                         rng: chk.SeedLike) -> tuple[np.ndarray, np.ndarray]:
    """Vertex tokens, then ``per_vertex`` tokens i.i.d. uniform in the sector ``B(v_i, radius) cap (v_i + T_i)``
    around each vertex (``T_i`` the tangent cone of ``K = conv(vertices)`` at ``v_i``; inside ``K`` for a radius
    below the shortest edge): the configuration "after phase 1" of chapter 7 with a density, so that the empirical
    measure has a limit as ``per_vertex`` grows (uniform on the sectors). Returns ``x0`` and the labels ``sigma``
    as :func:`attention_fw.experiments.exit_times.near_vertex_configuration` (planar vertices in convex position)."""
    radius = chk.real_scalar("radius", radius, low=0, low_open=True)

    def draw(v, i, g):
        k = len(v)
        a, b = v[(i + 1) % k] - v[i], v[(i - 1) % k] - v[i]
        ta, tb = math.atan2(a[1], a[0]), math.atan2(b[1], b[0])
        span = (tb - ta) % (2 * np.pi)
        if span > np.pi:                       # the cone is the other way round
            ta, span = tb, 2 * np.pi - span
        th = ta + span * g.random(per_vertex)
        r = radius * np.sqrt(g.random(per_vertex))
        return v[i] + r[:, None] * np.stack([np.cos(th), np.sin(th)], 1)

    v = chk.as_float_array("vertices", vertices, ndim=2, last_dim=2)
    return polytope._around_vertices(v[planar.convex_hull(v)], per_vertex, rng, draw)


def polygon_distance(x: npt.ArrayLike, points: npt.ArrayLike) -> np.ndarray:
    """Euclidean distance from each row of ``x`` (n, 2) to ``conv(points)``: 0 inside, else the distance to the
    nearest edge (segment) of the hull. Exact, ``O(n h)`` for ``h`` hull vertices (the library's
    :class:`~attention_fw.geometry.polytope.HullDistance` enumerates all triples of points, meant for small groups).
    A hull of one point or a segment is handled (the distance to it)."""
    X = chk.as_float_array("x", x, ndim=2, last_dim=2)
    P = np.unique(chk.as_float_array("points", points, ndim=2, last_dim=2), axis=0)
    if len(P) >= 3:
        try:
            P = P[planar.convex_hull(P)]
        except ValueError:                     # collinear: the segment between the extreme points
            c = P - P.mean(axis=0)
            u = np.linalg.svd(c, full_matrices=False)[2][0]
            P = P[[np.argmin(c @ u), np.argmax(c @ u)]]
    if len(P) == 1:
        return np.linalg.norm(X - P[0], axis=1)
    a, b = (P, np.roll(P, -1, axis=0)) if len(P) > 2 else (P[:1], P[1:])
    e = b - a
    rel = X[:, None, :] - a[None]
    t = np.clip(np.einsum("nkd,kd->nk", rel, e) / np.einsum("kd,kd->k", e, e), 0.0, 1.0)
    d = np.linalg.norm(rel - t[..., None] * e[None], axis=-1).min(axis=1)
    if len(P) > 2:
        cross = e[None, :, 0] * rel[..., 1] - e[None, :, 1] * rel[..., 0]    # CCW hull: >= 0 inside
        d = np.where(np.all(cross >= 0, axis=1), 0.0, d)
    return d


def sabeta_exit_at_scale(x0: npt.ArrayLike, sigma: npt.ArrayLike, gamma: float, beta: float, eps: float, *,
                         cap: int, method: str = "fast") -> Result:
    """``T2`` of (SA-beta) (:func:`attention_fw.experiments.sabeta.sabeta_exit_times`' definition: the first
    ``t >= 1`` at which some token is farther than ``eps`` from ``conv{x_k^0 : sigma_k = sigma_i}``), ``B = I``,
    planar, for many tokens: steps of :func:`attention_fw.model.fast.softmax_step` (each within ``1e-8`` of the
    cloud's radius of the dense step; ``method="dense"``: :func:`attention_fw.model.dynamics.softmax_step`) and the
    exit test of :func:`polygon_distance`. Returns ``T2`` (``None`` when no exit within ``cap`` steps),
    ``censored`` and the largest distance at the end (or the exit)."""
    x = chk.as_float_array("x0", x0, ndim=2, last_dim=2)
    sg = np.asarray(sigma)
    if sg.shape != (len(x),):
        raise ValueError(f"sigma must have shape ({len(x)},), got {sg.shape}")
    cap = chk.positive_int("cap", cap)
    eps = chk.real_scalar("eps", eps, low=0, low_open=True)
    step = {"fast": fast.softmax_step, "dense": dynamics.softmax_step}[method]
    groups = [np.flatnonzero(sg == g) for g in np.unique(sg)]
    hulls = [x[i] for i in groups]

    def far(y):
        return max(float(polygon_distance(y[i], h).max()) for i, h in zip(groups, hulls))

    x0c = x.copy()
    for t in range(1, cap + 1):
        x0c = step(x0c, gamma, beta)
        d = far(x0c)
        if d > eps:
            return Result(T2=t, censored=False, distance=d)
    return Result(T2=None, censored=True, distance=far(x0c))


def exit_at_scale_task(*, per_vertex: int, rep: int, rng: int, beta: float, gamma: float = 0.1, eps: float = 0.1,
                       radius: float = 0.05, cap: int = 10_000) -> Result:
    """One task of chapter 9's sweep: a :func:`sector_configuration` around the equilateral triangle on the unit
    circle (``per_vertex`` tokens per vertex, drawn from ``rng``; ``rep`` numbers the independent draws) and its
    (SA-beta) ``T2`` (:func:`sabeta_exit_at_scale`)."""
    v = polytope.points_on_circle()
    x0, sigma = sector_configuration(v, per_vertex, radius, rng=rng)
    r = sabeta_exit_at_scale(x0, sigma, gamma, beta, eps, cap=cap)
    return Result(n=len(x0), per_vertex=per_vertex, rep=rep, rng=chk.seed_record(rng), beta=float(beta), gamma=gamma, eps=eps,
                  radius=radius, cap=cap, T2=r.T2, censored=r.censored)


def chain_exit_mean(per_vertex: npt.ArrayLike, beta: float, kappa: int = 3) -> np.ndarray:
    """Exact ``E[T2] = 1 / (1 - q)`` of the chain (SAP) from chapter 5's clusters (``per_vertex`` coincident tokens at
    each vertex of the regular kappa-gon) in the single-jump regime, for each entry of ``per_vertex``
    (:func:`attention_fw.experiments.exit_times.frozen_escape_rate`: ``-log q`` is ``n`` times the escape rate of one
    token, so ``E[T2]`` falls to 1 as ``n`` grows)."""
    from .exit_times import frozen_escape_rate
    v = polytope.regular_polygon(kappa)
    m = np.atleast_1d(np.asarray(per_vertex))
    lam = np.array([frozen_escape_rate(v, np.full(kappa, int(k)), beta) for k in m])
    with np.errstate(divide="ignore"):
        return np.where(lam > 0, 1.0 / -np.expm1(-lam), np.inf)


# ----------------------------------------------------------------------------- the sphere S^2
def sample_sphere(n: int, *, rng: chk.SeedLike) -> np.ndarray:
    """``n`` points uniform on the unit sphere of R^3 (normalised Gaussian vectors)."""
    g = chk.rng("rng", rng)
    x = g.standard_normal((chk.positive_int("n", n), 3))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def sphere_clusters(beta: float, N: int, steps: int, dt: float, *, rng: chk.SeedLike) -> Result:
    """From ``N`` i.i.d. uniform points of ``S^2``, ``steps`` steps of :func:`attention_fw.model.sphere.step_s2`
    (interaction ``e^{beta <x, y>}``); the number of clusters at the end
    (:func:`attention_fw.model.sphere.count_clusters_s2`) and the largest error of the force used at the start
    against the dense sum, relative to ``e^beta``, beside its proved bound."""
    x = sample_sphere(N, rng=rng)
    K = sphere.s2_order(beta)
    F = sphere.force_s2(x, beta, K, method="taylor")
    err = float(np.abs(F - sphere.force_s2_dense(x, beta)).max() / math.exp(beta))
    for _ in range(chk.positive_int("steps", steps, minimum=0)):
        x = sphere.step_s2(x, beta, dt)
    return Result(beta=float(beta), N=int(N), steps=int(steps), dt=float(dt), K=K, force_error=err,
                  bound=sphere.s2_tail_bound(beta, K) / math.exp(beta), k_observed=sphere.count_clusters_s2(x), x=x)


def slope(x: npt.ArrayLike, y: npt.ArrayLike) -> tuple[float, float]:
    """Least-squares slope of ``log y`` against ``log x`` and its standard error."""
    lx, ly = np.log(np.asarray(x, float)), np.log(np.asarray(y, float))
    A = np.vstack([lx, np.ones_like(lx)]).T
    coef, res, *_ = np.linalg.lstsq(A, ly, rcond=None)
    dof = max(len(lx) - 2, 1)
    s2 = float(np.sum((ly - A @ coef) ** 2)) / dof
    cov = s2 * np.linalg.inv(A.T @ A)
    return float(coef[0]), float(math.sqrt(cov[0, 0]))
