"""The counts of ``attention_fw.experiments.hull_counts`` on point sets with known answers (regular
simplices, points on a circle with interior points, ties), against independent computations
(Qhull, the linear programme of ``trained_heads.hull_vertices``, closed forms), and the probes of
chapter 8's data file recomputed from their arrays alone."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial import ConvexHull

from attention_fw.experiments import hull_counts as HC
from attention_fw.experiments import trained_heads as T

ROOT = Path(__file__).resolve().parents[1]


def _simplex(k, edge=1.0, dim=None, rng=None):
    """k + 1 vertices of a regular simplex of the given edge, rotated at random into R^dim."""
    P = np.eye(k + 1) * edge / math.sqrt(2)                       # in R^(k+1), edge `edge`
    dim = dim or k + 1
    rng = rng or np.random.default_rng(0)
    Qm, _ = np.linalg.qr(rng.standard_normal((dim, dim)))
    X = np.zeros((k + 1, dim))
    X[:, : k + 1] = P
    return X @ Qm.T + rng.standard_normal(dim)


def _circle(m, inner, radius=0.5, dim=2, rng=None):
    """m points on the unit circle, `inner` points at radius <= `radius`, in a random plane of R^dim."""
    rng = rng or np.random.default_rng(1)
    t = 2 * np.pi * np.arange(m) / m
    r = radius * np.sqrt(rng.uniform(0, 1, inner))
    s = rng.uniform(0, 2 * np.pi, inner)
    P = np.vstack([np.c_[np.cos(t), np.sin(t)], np.c_[r * np.cos(s), r * np.sin(s)]])
    if dim == 2:
        return P
    Qm, _ = np.linalg.qr(rng.standard_normal((dim, 2)))
    return P @ Qm.T


# ------------------------------------------------------------------------------ distances to the others' hull
@pytest.mark.parametrize("k", [2, 3, 5, 8])
def test_each_corner_of_a_regular_simplex_is_its_height_from_the_opposite_face(k):
    """Edge a: the height is a sqrt((k+1)/(2k)), and diam = a, so the corners are robust exactly
    for eps below sqrt((k+1)/(2k))."""
    X = _simplex(k, edge=2.0, dim=32)
    h = 2.0 * math.sqrt((k + 1) / (2 * k))
    assert np.allclose(HC.hull_distances(X), h, rtol=1e-9, atol=1e-9)
    ratio = h / 2.0
    assert HC.robust_vertices(X, (ratio - 1e-6, ratio + 1e-6)).tolist() == [k + 1, 0]
    assert HC.robust_vertices(X).tolist() == [k + 1] * 3       # ratio >= 0.707 > 0.1


@pytest.mark.parametrize("m", [8, 12, 30])
def test_circle_points_are_1_minus_cos_from_the_chord_and_interior_points_are_inside(m):
    """A point of a regular m-gon inscribed in the unit circle is 1 - cos(2 pi / m) from the chord
    of its neighbours; interior points (radius <= 0.5 < cos(2 pi / m)) are at distance 0."""
    X = _circle(m, 25, dim=6)
    d = HC.hull_distances(X)
    gap = 1 - math.cos(2 * math.pi / m)
    assert np.allclose(d[:m], gap, atol=1e-9)
    assert np.allclose(d[m:], 0.0, atol=1e-9)
    rel = gap / 2.0                                             # diam = 2 (m even)
    counts = HC.robust_vertices(X, (0.0, rel * 0.99, rel * 1.01))
    assert counts.tolist() == [m, m, 0]


def test_frank_wolfe_decisions_agree_with_the_exact_distances_on_random_clouds():
    rng = np.random.default_rng(3)
    for n, k in ((40, 3), (60, 8), (30, 32)):
        X = rng.standard_normal((n, k)) * rng.uniform(0.2, 2, k)
        d = HC.hull_distances(X)
        diam = max(np.linalg.norm(a - b) for a in X for b in X)
        eps = np.array([0.0, 0.01, 0.03, 0.1])
        far = d[d > 1e-9]                                               # the others are inside
        assert np.abs(far[None] - eps[:, None] * diam).min() > 1e-7     # no distance on a threshold
        expected = ((d[None] > eps[:, None] * diam) & (d[None] > 1e-9)).sum(axis=1)
        assert HC.robust_vertices(X, eps).tolist() == expected.tolist()


def test_vertices_agree_with_qhull_and_with_the_linear_programme():
    rng = np.random.default_rng(4)
    for n, k in ((50, 2), (50, 3), (60, 4), (40, 5), (70, 8)):
        X = rng.standard_normal((n, k))
        v = HC.vertex_mask(X)
        assert v.tolist() == T.hull_vertices(X).tolist()
        if k <= 5:
            ref = np.zeros(n, bool)
            ref[ConvexHull(X).vertices] = True
            assert v.tolist() == ref.tolist()
        # the exact route (Frank-Wolfe bounds, then NNLS) agrees with Qhull in low dimension too
        assert HC._decide(X[None], [[0.0]])[0, 0].tolist() == T.hull_vertices(X).tolist()


def test_ties_duplicates_and_points_on_edges_are_not_vertices():
    square = np.array([[0.0, 0], [2, 0], [2, 2], [0, 2]])
    pts = np.vstack([square, [[1, 0], [2, 1], [1, 1], [2, 2]]])   # two mid-edges, the centre, a copy
    assert HC.vertex_mask(pts).tolist() == [True, True, False, True, False, False, False, False]
    assert np.allclose(HC.hull_distances(pts)[[2, 7]], 0.0, atol=1e-12)
    lifted = np.c_[pts, np.zeros((len(pts), 4))]                  # the same in R^6, by the exact route
    assert HC.vertex_mask(lifted).tolist() == [True, True, False, True, False, False, False, False]


# ------------------------------------------------------------------------------ projections and depth
def test_projected_vertices_see_the_circle_in_its_principal_plane():
    """A circle of 16 points with 20 interior points, in a plane of R^32 plus small noise: the
    principal plane is the circle's, with 16 vertices."""
    rng = np.random.default_rng(5)
    X = _circle(16, 20, dim=32, rng=rng) * 10 + 1e-3 * rng.standard_normal((36, 32))
    assert HC.projected_vertices(X, (2,)).tolist() == [16]
    p3 = HC.projected_vertices(X, (2, 3, 4, 8))
    assert (np.diff(p3) >= 0).all() and p3[-1] <= 36              # more directions, more vertices


def test_the_query_span_is_where_the_logits_see_the_keys():
    rng = np.random.default_rng(6)
    K = _circle(10, 15, dim=2, rng=rng)
    K = np.c_[K, rng.standard_normal((25, 3))]                    # keys in R^5
    Q = np.c_[rng.standard_normal((7, 2)), np.zeros((7, 3))]      # queries in the first plane
    v, dim = HC.query_span_vertices(Q, K, share=1.0)
    assert (v, dim) == (10, 2)
    v_all, dim_all = HC.query_span_vertices(rng.standard_normal((9, 5)), K, share=1.0)
    assert dim_all == 5 and v_all == int(T.hull_vertices(K).sum())


def test_onion_depth_of_nested_polygons():
    """Regular hexagons of radii 1, 0.6, 0.3 (rotated) and the centre: depths 1, 2, 3, 4."""
    t = np.arange(6) * np.pi / 3
    rings = [r * np.c_[np.cos(t + r), np.sin(t + r)] for r in (1.0, 0.6, 0.3)]
    P = np.vstack(rings + [np.zeros((1, 2))])
    assert HC.onion_depth(P).tolist() == [1] * 6 + [2] * 6 + [3] * 6 + [4]
    assert HC.onion_depth(np.c_[P, np.zeros(len(P))]).tolist() == [1] * 6 + [2] * 6 + [3] * 6 + [4]


# ------------------------------------------------------------------------------ the logits and the attention
def test_near_top_counts_keys_within_delta_of_some_row_top_with_ties():
    """Row 0 has logits 0, 0 (a tie), -0.7, -3, -9; row 1 makes key 3 its leader."""
    L = np.array([[0.0, 0.0, -0.7, -3.0, -9.0], [-5.0, -5.0, -5.0, 1.0, -0.6]])
    Q = np.eye(2)
    K = L.T                                                       # Q @ K.T = L (scale 1)
    assert HC.near_top(Q, K, (0.0, 0.5, 1.0, 2.0, 4.0), scale=1.0).tolist() == [3, 3, 4, 5, 5]
    assert HC.near_top(Q, K, (0.0,), scale=0.5).tolist() == [3]   # leaders do not depend on the scale
    assert HC.attention_counts(L)["leaders"] == 3.0               # the tie counts both keys


def test_attention_counts_of_rows_with_closed_forms():
    n = 10
    uniform = np.zeros((1, n))
    c = HC.attention_counts(uniform)
    assert c["support"] == pytest.approx(n) and c["participation"] == pytest.approx(n)
    assert c["mass90"] == 9 and c["leaders"] == n                 # 9 keys hold exactly 90%: the tie
    # one key with weight p, the rest (1 - p)/(n - 1): closed forms
    p = 0.6
    row = np.log(np.r_[p, np.full(n - 1, (1 - p) / (n - 1))])[None]
    c = HC.attention_counts(row)
    H = -(p * math.log(p) + (1 - p) * math.log((1 - p) / (n - 1)))
    assert c["support"] == pytest.approx(math.exp(H), rel=1e-12)
    assert c["participation"] == pytest.approx(1 / (p ** 2 + (1 - p) ** 2 / (n - 1)), rel=1e-12)
    assert c["mass90"] == 1 + math.ceil((0.9 - p) / ((1 - p) / (n - 1)) - 1e-9)
    assert c["leaders"] == 1


def test_head_counts_are_consistent_with_the_separate_functions():
    rng = np.random.default_rng(8)
    Q, K = rng.standard_normal((30, 6)), rng.standard_normal((30, 6))
    c = HC.head_counts(Q, K)
    assert [c[f"near_top_{d:g}"] for d in HC.DELTAS] == HC.near_top(Q, K).tolist()
    assert [c[f"robust_{e:g}"] for e in HC.EPSILONS] == HC.robust_vertices(K).tolist()
    assert [c[f"projected_{k}"] for k in HC.DIMENSIONS] == HC.projected_vertices(K).tolist()
    assert c["leaders"] == HC.near_top(Q, K, (0.0,))[0]
    assert 1 <= c["support"] <= 30 and 1 <= c["participation"] <= c["support"] + 1e-9


# ------------------------------------------------------------------------------ exponents
def test_scaling_exponents_recover_a_power_law_and_refuse_too_few_inputs():
    n = np.array([8, 11, 16, 23, 32, 45, 64, 90, 128])
    rng = np.random.default_rng(9)
    Y = np.c_[2 * n ** 0.3, n * np.exp(0.02 * rng.standard_normal(len(n)))]
    fit = HC.scaling_exponents(n, Y, boot=500, rng=0)
    assert fit["exponent"][0] == pytest.approx(0.3, abs=1e-12)
    assert fit["ci"][1][0] <= 1.0 <= fit["ci"][1][1]
    few = HC.scaling_exponents(n[:3], Y[:3], rng=0)
    assert few["exponent"] == [None, None] and "too few" in few["reason"]
    zero = HC.scaling_exponents(n, np.c_[Y[:, 0], np.r_[0.0, Y[1:, 1]]], boot=50, rng=0)
    assert zero["exponent"][1] is None and zero["exponent"][0] is not None and zero["reason"]


def test_the_clause_ladder_counts_tokens_exactly_as_the_tokenizer():
    """length_ladder adds the clauses' counts (less [CLS] and [SEP]); WordPiece splits on spaces
    first, so this is the count of the joined text."""
    from attention_fw import encoder

    enc = encoder.load()
    corpus = json.loads((ROOT / "book" / "data" / "prose-corpus.json").read_text())["paragraphs"]
    units = HC.clauses(c["text"] for c in corpus[:6])
    ladder = HC.length_ladder(units, lambda ts: enc.tokenize(ts).lengths, [8, 20, 50, 120])
    texts = [" ".join(units[a:b]) for a, b, _ in ladder]
    assert enc.tokenize(texts).lengths.tolist() == [n for _, _, n in ladder]
    spans = sorted((a, b) for a, b, _ in ladder)
    assert all(b1 <= a2 for (_, b1), (a2, _) in zip(spans, spans[1:]))   # disjoint


# ------------------------------------------------------------------------------ the data file
def test_the_probes_of_the_data_file_are_recomputed_from_their_arrays(tmp_path):
    """The chapter's "probes": each count recomputed from "queries" and "keys" alone, by
    independent routes (brute-force logits, the exact NNLS distances, Qhull / the LP)."""
    from afw_book.figures import save
    from attention_fw import encoder
    from attention_fw.plot import figure_data
    from attention_fw.plot import trained as TP

    enc = encoder.load()
    texts = ["And God saw the light, that it was good: and God divided the light from the darkness.",
             "Python is simple to use, but it is a real programming language."]
    counts = HC.encoder_counts(enc, texts)
    arrays = [layers for _, layers in HC.head_arrays(enc, texts, special=False)]
    probes = [dict(input=i, layer=layer, head=h, **HC.probe(arrays[i][layer][0][h], arrays[i][layer][1][h]))
              for i in range(2) for layer, h in ((0, 2), (5, 11))]
    n = counts["n"].astype(float)
    tables = {v: HC.scaling_table(n, counts[v], boot=50, rng=0) for v in ("excluded", "included")}
    rows = [dict(statistic=e["statistic"], variant=v, layer=e["layer"], exponent=e["exponent"], ci=e["ci"],
                 reason=e["reason"]) for v in tables for e in tables[v]["entries"]]
    assert all(r["exponent"] is None and "too few" in r["reason"] for r in rows)     # 2 inputs: no fit, said so
    pooled = {v: {s: np.nanmean(counts[v][s].reshape(2, -1), axis=1) for s in HC.STATISTICS} for v in tables}
    fig = TP.fig_hull_test({"inputs": [], "scaling": rows, "probes": probes, "statistics": list(HC.STATISTICS),
                            "layers": 6, "n": n, "pooled": pooled})
    save(fig, "trained-hull-test", figure_data(fig), outdir=tmp_path, formats=())
    data = json.loads((tmp_path / "data" / "trained-hull-test.json").read_text())
    assert len(data["probes"]) == 4
    for pr in data["probes"]:
        assert len(pr["keys"]) == counts["n"][pr["input"]] - 2
        assert counts["excluded"]["near_top_1"][pr["input"], pr["layer"], pr["head"]] == pr["near_top"]["1"]
        _recompute(pr)


def _recompute(pr):
    """Each count of one probe from its "queries" and "keys" alone, by routes independent of the
    library's (brute-force logits, the exact NNLS distances, Qhull or the LP of trained_heads)."""
    Q, K = np.array(pr["queries"]), np.array(pr["keys"])
    assert K.shape[1] == 32 and Q.shape == K.shape
    L = Q @ K.T / math.sqrt(32)
    gap = (L.max(axis=1, keepdims=True) - L).min(axis=0)
    assert {d: int((gap <= float(d)).sum()) for d in pr["near_top"]} == pr["near_top"]
    dist = HC.hull_distances(K)
    diam = max(np.linalg.norm(a - b) for a in K for b in K)
    assert {e: int((dist > float(e) * diam).sum()) for e in pr["robust_vertices"]} == pr["robust_vertices"]
    C = K - K.mean(axis=0)
    _, _, vt = np.linalg.svd(C, full_matrices=False)
    for k, count in pr["projected_vertices"].items():
        P = C @ vt[: int(k)].T
        ref = len(ConvexHull(P).vertices) if int(k) <= 4 and len(P) > int(k) + 1 else int(T.hull_vertices(P).sum())
        assert ref == count, (pr["input"], pr["layer"], pr["head"], k)


def test_the_quick_books_probes_are_recomputed_from_the_arrays_of_its_data_file(quick_figures):
    """figures/presets/quick/data/trained-hull-test.json as chapter 8 writes it: 3 inputs x 4 heads,
    every count recomputed from the arrays; the inputs and the exponents with the keys the issue asks."""
    assert quick_figures.returncode == 0, f"the quick book did not build:\n{quick_figures.log[-4000:]}"
    path = quick_figures.repo / "figures" / "presets" / "quick" / "data" / "trained-hull-test.json"
    data = json.loads(path.read_text())
    assert len(data["probes"]) == 12 and len({p["input"] for p in data["probes"]}) == 3
    for pr in data["probes"]:
        _recompute(pr)
    ids = {e["id"] for e in data["inputs"]}
    assert {p["input"] for p in data["probes"]} <= ids
    assert all({"id", "source", "text", "token_ids", "n"} <= set(e) and len(e["token_ids"]) == e["n"]
               for e in data["inputs"])
    assert {e["layer"] for e in data["scaling"]} == {0, 1, 2, 3, 4, 5, "all"}
    for e in data["scaling"]:
        assert (e["exponent"] is None) == (e["ci"] is None) == (e["reason"] is not None)
        if e["exponent"] is not None:
            assert e["ci"][0] <= e["exponent"] <= e["ci"][1]
