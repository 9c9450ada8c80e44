"""The tiles' loops and the online softmax of the tiled steps, in float64 or float32.

Part of :mod:`attention_fw.model.tiled` (which re-exports its public names; the module docstring there
describes the tiled steps and their precision): the loops over blocks of queries and tiles of keys
shared out between worker threads (``_Tiles``), the running-maximum softmax sums, and the rules of
``precision='float32'`` (:func:`float32_score_error`, :func:`float32_step_error`, refused or warned
about with :class:`Float32PrecisionWarning`).
"""
from __future__ import annotations

import contextlib
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import _scaling, _tile_kernels
from .tiled_plan import Plan, _one_blas_thread

__all__ = ["PRECISIONS", "Float32PrecisionWarning", "float32_score_error", "float32_step_error"]


# ----------------------------------------------------------------------------- checks
def _batch(x):
    return x.reshape((-1,) + x.shape[-2:])


def _bx(x3, B):
    """``B x_i`` for every token of the systems ``x3`` (R, n, d)."""
    if B is None:
        return x3
    if B.ndim == 2:
        return x3 @ B.T
    return np.matmul(x3, np.swapaxes(B, -1, -2))


def _norm(B):
    """An upper bound of every system's operator norm of B (1 for the identity)."""
    return 1.0 if B is None else _scaling.norm(B)


def _rescale(x3, B, beta):
    """:func:`._scaling.fit_scores` for the batch: scores that neither overflow nor all underflow."""
    return _scaling.fit_scores(x3, B, beta)


# ----------------------------------------------------------------------------- the cores
class _Tiles:
    """The loops over the blocks (system chunk x query block) and key tiles of one step.

    ``Q`` (R, n, d) are the (scaled) queries and ``KT`` (R, d, n) the keys transposed, both of the
    step's precision; a tile of scores is ``Q[rs, qs] @ KT[rs, :, ks]``. :meth:`run` shares the
    blocks out between ``plan.workers`` threads, each with its own tile buffer.
    """

    def __init__(self, Q, KT, p: Plan):
        self.Q, self.KT, self.p = Q, KT, p
        self.R, self.n = Q.shape[0], Q.shape[1]

    def blocks(self):
        p = self.p
        return [(slice(r0, min(self.R, r0 + p.systems)), slice(q0, min(self.n, q0 + p.queries)))
                for r0 in range(0, self.R, p.systems) for q0 in range(0, self.n, p.queries)]

    def buffer(self):
        return np.empty(self.p.systems * self.p.queries * self.p.keys, dtype=self.Q.dtype)

    def run(self, work, blocks=None):
        """``work(i, rs, qs, buf)`` for every block ``i``; rows of different blocks never overlap,
        so the workers write their results without locks."""
        blocks = self.blocks() if blocks is None else blocks
        with contextlib.ExitStack() as stack:
            parallel = self.p.workers > 1 and len(blocks) > 1 and stack.enter_context(_one_blas_thread())
            if not parallel:
                buf = self.buffer()
                for i, (rs, qs) in enumerate(blocks):
                    work(i, rs, qs, buf)
                return
            local = threading.local()

            def one(i):
                buf = getattr(local, "buf", None)
                if buf is None:
                    buf = local.buf = self.buffer()
                work(i, *blocks[i], buf)

            with ThreadPoolExecutor(self.p.workers, thread_name_prefix="attention_fw-tiles") as ex:
                for _ in ex.map(one, range(len(blocks))):
                    pass

    def scores(self, rs, qs, buf):
        """The scores of the block ``(rs, qs)`` key tile by key tile: ``(k0, ks, S)``, ``S`` a
        C-contiguous (Rb, q, k) view of ``buf``, overwritten by the next tile."""
        for k0 in range(0, self.n, self.p.keys):
            ks = slice(k0, min(self.n, k0 + self.p.keys))
            shape = (rs.stop - rs.start, qs.stop - qs.start, ks.stop - ks.start)
            S = buf[: shape[0] * shape[1] * shape[2]].reshape(shape)
            np.matmul(self.Q[rs, qs], self.KT[rs, :, ks], out=S)
            yield k0, ks, S

    def weights(self, rs, qs, shift, c, acc, buf):
        """The tiles of ``exp`` of the scores of the block, as :meth:`scores`. ``shift``: each tile
        relative to the running row maximum ``c`` (R_b, q), rescaling the running sums ``acc``
        (``_tile_kernels`` ``online_shift``); else the scores are known to lie where ``exp``
        neither overflows nor underflows (``NO_SHIFT`` of the precision)."""
        TK = _tile_kernels.impl()
        for k0, ks, Z in self.scores(rs, qs, buf):
            if shift:
                TK.online_shift(Z, c, acc)
            np.exp(Z, out=Z)
            yield k0, ks, Z


def _softmax_core(Q, KT, Va, p: Plan, shift: bool):
    """``sum_j e^{<Q_i, K_j>} Va_j`` and ``sum_j e^{<Q_i, K_j>}`` in the last column of the result.

    ``Q`` (R, n, d) the scaled queries, ``KT`` (R, d, n) the keys transposed, ``Va`` (R, n, m + 1)
    the values with a column of ones, all three of the step's precision. ``shift``: keep a running
    maximum (else the scores are known to lie within ``NO_SHIFT``). Returns ``(acc, c)``: the sums
    relative to ``e^{c_i}``, accumulated tile by tile in float64 whatever the precision.
    """
    R, n = Q.shape[0], Q.shape[1]
    tiles = _Tiles(Q, KT, p)
    acc = np.zeros(Va.shape[:1] + (n, Va.shape[-1]))
    c = np.full((R, n), -np.inf) if shift else np.zeros((R, n))

    def work(_, rs, qs, buf):
        a, cq = acc[rs, qs], c[rs, qs]  # views: the kernels write through them
        tmp = np.empty(a.shape, dtype=Q.dtype)
        for _, ks, Z in tiles.weights(rs, qs, shift, cq, a, buf):
            np.matmul(Z, Va[rs, ks], out=tmp)
            a += tmp

    tiles.run(work)
    return acc, c


# ----------------------------------------------------------------------------- precision
PRECISIONS = ("float64", "float32")
"""The precisions of the tiled steps' scores and exponentials (the sums are accumulated in float64 in both)."""

NO_SHIFT = {"float64": 200.0, "float32": 40.0}
"""Largest ``beta |B| max|x|^2`` at which the scores are exponentiated without a running maximum:
``e^{+-200}`` is a normal double, ``e^{+-40}`` a normal float (and sums of ``e^40`` over any tile stay finite)."""

FLOAT32_UNIT = 2.0 ** -24
"""Unit roundoff of float32."""

FLOAT32_SCORE_LIMIT = 1.0
"""The float32 path is refused when a float32 score may be off by more than this (in the exponent)."""

FLOAT32_SCORE_WARN = 0.01
"""... and warns (``Float32PrecisionWarning``) when it may be off by more than this."""


class Float32PrecisionWarning(UserWarning):
    """``precision='float32'`` at a ``beta |B| max|x|^2`` where the weights may be off by more than 1%.

    Examples
    --------
    At ``beta max|x|^2 = 10^5`` in ``d = 2`` a float32 score may be off by ``4 u 10^5 = 0.024``:

    >>> import warnings
    >>> from attention_fw.model.tiled import softmax_step
    >>> x = np.array([[0.0, 0.0], [1.0, 0.0]])
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     _ = softmax_step(x, 0.5, 1e5, precision="float32")
    >>> [type(m.message).__name__ for m in caught]
    ['Float32PrecisionWarning']
    """


def float32_score_error(beta_sq, d) -> float:
    """Worst-case absolute error of one float32 score ``beta <B x_i, x_j>``: ``(d + 2) u beta |B| max|x|^2``.

    ``u = 2^-24``; ``beta_sq = beta |B| max_k |x_k|^2``. Rounding the two factors to float32 costs
    ``2 u`` relative and a dot product of length ``d`` at most ``d u`` (to first order), each relative
    to ``|B x_i| |x_j| <= |B| max|x|^2``.

    Examples
    --------
    >>> round(float32_score_error(1.0, 64) / FLOAT32_UNIT)
    66
    """
    return (d + 2) * FLOAT32_UNIT * float(beta_sq)


def float32_step_error(beta_sq, d, key_tile) -> float:
    """Bound on the error of one float32 softmax step against float64, relative to ``gamma max|x|``.

    ``|y32_i - y64_i| <= gamma max_k|x_k| u (2 (d + 2) beta |B| max|x|^2 + 2 k + 3)`` (first order,
    ``u = 2^-24``, ``k`` the key tile), from: weights with relative errors at most
    ``e = float32_score_error`` plus ``u`` (the float32 ``exp``) move an average of the ``x_j`` by at
    most ``2 (e + u) max|x|``; the tile's float32 product ``E [x, 1]`` sums ``k`` positive weights
    (times values rounded to float32, ``u``), at most ``k u`` relative in the sum and in the
    normaliser; the tiles' sums are accumulated in float64 (no error growth with ``n``). Rounding
    errors of random sign make the typical error smaller: ``sqrt(d)`` and ``sqrt(k)`` in place of
    ``d`` and ``k``.

    Examples
    --------
    >>> # d = 64, tiles of 512 keys
    >>> round(float32_step_error(1.0, 64, 512) / FLOAT32_UNIT)
    1159
    """
    return FLOAT32_UNIT * (2.0 * (d + 2) * float(beta_sq) + 2.0 * key_tile + 3.0)


def _precision(precision) -> str:
    """``'float64'`` or ``'float32'`` from that name, ``np.float64`` / ``np.float32`` or their dtypes."""
    if isinstance(precision, str) and precision in PRECISIONS:
        return precision
    if isinstance(precision, np.dtype) or precision in (np.float64, np.float32):
        name = np.dtype(precision).name
        if name in PRECISIONS:
            return name
    raise ValueError(f"precision must be 'float64' or 'float32', got {precision!r}")


def _check_float32(beta_sq, d):
    """Refuse (``precision`` named) or warn where float32 scores are meaningless or coarse."""
    e = float32_score_error(beta_sq, d)
    if not e <= FLOAT32_SCORE_LIMIT:
        raise ValueError(
            f"precision='float32' cannot resolve these scores: beta |B| max|x|^2 = {beta_sq:.3g} in d = {d}, "
            f"so a float32 score may be off by {e:.3g} in the exponent (weights off by a factor up to "
            f"e^{e:.3g}); use precision='float64'")
    if e > FLOAT32_SCORE_WARN:
        warnings.warn(f"precision='float32': beta |B| max|x|^2 = {beta_sq:.3g} in d = {d}, the weights may be "
                      f"off by {100 * e:.2g}% (float32_score_error); precision='float64' is exact to rounding",
                      Float32PrecisionWarning, stacklevel=4)


def _operands(xs, values3, B, b, precision):
    """``(Q, KT, Va, scale, shift)`` of a softmax-type step in the given precision: the scaled
    queries, the keys transposed, the values with a column of ones (in float32 multiplied by a
    power of two ``scale`` that brings them below 1), and whether a running maximum is needed."""
    beta_sq = b * _norm(B) * _scaling.max_sq_norm(xs)
    Q = b * _bx(xs, B)
    KT = np.swapaxes(xs, -1, -2)
    scale = 1.0
    if precision == "float32":
        _check_float32(beta_sq, xs.shape[-1])
        if values3 is not None:
            scale = _scaling.rescaled(values3) or 1.0
            values3 = values3 * scale
        c = _scaling.rescaled(KT) or 1.0  # a power of two: the keys near 1, the queries carry the rest (exact)
        Q, KT = (Q / c).astype(np.float32), (KT * c).astype(np.float32)
    Va = None
    if values3 is not None:
        Va = np.concatenate([values3, np.ones(values3.shape[:-1] + (1,))], axis=-1).astype(Q.dtype)
    return Q, np.ascontiguousarray(KT), Va, scale, not beta_sq <= NO_SHIFT[precision]


def _softmax_apply(x3, values3, B, beta, p: Plan, precision="float64"):
    """``sum_j A_ij values_j`` for the softmax weights of the tokens ``x3`` (R, n, d)."""
    xs, b, _ = _rescale(x3, B, beta)
    if b == 0.0:
        return np.repeat(values3.mean(axis=-2, keepdims=True), x3.shape[-2], axis=-2)
    Q, KT, Va, scale, shift = _operands(xs, values3, B, b, precision)
    acc, _ = _softmax_core(Q, KT, Va, p, shift)
    out = acc[..., :-1] / acc[..., -1:]
    if scale != 1.0:
        out /= scale
    return out

