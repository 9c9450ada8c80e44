"""The SA-beta kernel's two paths give the same exit times (issue 35).

The kernel steps a system with symmetric positive semi-definite B by its symmetric path (one
exponential per unordered pair, shift ``hb_i + hb_j``) while every ``hb_j = beta <B x_j, x_j> / 2`` lies
in [0, 600], skipping its pass for exponential arguments below -708 while every ``hb_j <= 176``;
otherwise by the per-row path (shift: the row maximum, n^2 exponentials). Here: the two paths give
the same T2 on chapter 7's 26 configurations over the quick preset's range of T2 (10 to 2000), and
each regime (no pass, the pass, the per-row path) gives the T2 of plain stepping where it is taken.
"""
import numpy as np

from attention_fw.experiments import exit_times
from attention_fw.experiments import sabeta_family as F
from attention_fw.experiments import sabeta_kernel as SK
from attention_fw.model import dynamics


def _family_systems(t_lo=10, t_hi=2000, num=5):
    """Chapter 7's 26 configurations, each at ``num`` betas over the quick preset's range of T2 (``t_lo``
    to ``t_hi``), the ends found by bisection on beta with the kernel itself (the chapter's grid
    bisects its leading-order time, which takes seconds per configuration)."""
    cfgs = [F.family_configuration(name) for name in F.FAMILY]
    args = ([c.x0 for c in cfgs], [c.sigma for c in cfgs], [c.gamma for c in cfgs])

    def beta_at(target):
        lo, hi = np.zeros(len(cfgs)), np.full(len(cfgs), 100.0)
        for _ in range(14):
            mid = (lo + hi) / 2
            T = SK.sabeta_exit_times(*args, mid, [c.eps for c in cfgs], B=[c.B for c in cfgs], cap=target).times
            lo, hi = np.where(T < target, mid, lo), np.where(T < target, hi, mid)
        return hi

    xs, sgs, Bs, gs, bs, es = [], [], [], [], [], []
    for c, lo, hi in zip(cfgs, beta_at(t_lo), beta_at(t_hi)):
        assert lo < hi < 100
        for b in np.linspace(lo, hi, num):
            xs.append(c.x0), sgs.append(c.sigma), Bs.append(c.B), gs.append(c.gamma), bs.append(float(b))
            es.append(c.eps)
    return xs, sgs, gs, bs, es, Bs


def test_symmetric_and_per_row_paths_give_the_same_T2_on_the_family(monkeypatch):
    xs, sgs, gs, bs, es, Bs = _family_systems()
    sym = SK.sabeta_exit_times(xs, sgs, gs, bs, es, B=Bs, cap=10**5)
    monkeypatch.setattr(SK, "_SYMMETRIC_PATH", False)
    row = SK.sabeta_exit_times(xs, sgs, gs, bs, es, B=Bs, cap=10**5)
    assert len(xs) == 130 and sym.exited.all()
    assert sym.times.tolist() == row.times.tolist()
    for a, b in zip(sym.final, row.final):                   # the same map, other rounding
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)


def _plain_T2(x0, sigma, gamma, beta, eps, cap):
    x = x0.copy()
    for t in range(1, cap + 1):
        x = dynamics.softmax_step(x, gamma, beta)
        if exit_times.exit_mask(x, x0, sigma, eps)[0]:
            return t, x
    return -1, x


def test_each_regime_of_the_kernel_gives_the_T2_of_plain_stepping():
    """Two groups of tokens near (10, 0) that merge (T2 of a few tens of steps) and one token at
    (-10, 0): ``hb = beta |x|^2 / 2`` about 50 beta, and the scores of the far token against the
    others ``-(beta / 2) |x_i - x_j|^2`` about -200 beta. beta = 3: hb <= 176 (no pass); beta = 8:
    176 < hb <= 600 with arguments near -1600 (the pass, math.exp); beta = 13: hb > 600 (the
    per-row path)."""
    x0 = np.array([[10.0, 0.0], [10.2, 0.1], [10.1, -0.15], [10.5, -0.1], [10.6, 0.05], [-10.0, 0.0]])
    sigma = np.array([0, 0, 0, 1, 1, 2])
    for beta, regime in ((3.0, "no pass"), (8.0, "pass"), (13.0, "per row")):
        hb = beta * (x0 ** 2).sum(1) / 2
        lowest = -beta * ((x0[:, None] - x0[None]) ** 2).sum(-1).max() / 2
        assert {"no pass": hb.max() <= 176, "pass": 176 < hb.max() <= 600 and lowest < -708,
                "per row": hb.max() > 600}[regime]
        want, x = _plain_T2(x0, sigma, 0.1, beta, 0.05, 2000)
        res = SK.sabeta_exit_times(x0, sigma, 0.1, beta, 0.05, cap=2000)
        assert 1 < want < 2000 and res.times.tolist() == [want], (regime, want, res.times)
        np.testing.assert_allclose(res.final[0], x, rtol=0, atol=1e-12)
