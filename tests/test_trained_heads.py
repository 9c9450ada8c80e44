"""Statistics of attention heads (``attention_fw.trained_heads``) on cases with known answers, the
rank facts the chapter proves, the exact hull-vertex test, and invariants on the trained model."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from scipy.spatial import ConvexHull

from attention_fw.experiments import trained_heads as T

ROOT = Path(__file__).resolve().parents[1]
D, R = 384, 32


def _weights(rng, *, query=None, key=None, value=None, output=None, biases=True):
    """One layer's attention weights (d x d, y = W x + b) with chosen blocks for head 0."""
    W = {k: rng.standard_normal((D, D)) / math.sqrt(D) for k in ("query", "key", "value", "output")}
    for name, blk in (("query", query), ("key", key), ("value", value)):
        if blk is not None:
            W[name][:R] = blk
    if output is not None:
        W["output"][:, :R] = output
    for k in ("query", "key", "value", "output"):
        W[k + "_bias"] = rng.standard_normal(D) if biases else np.zeros(D)
    return W


# ------------------------------------------------------------------------------ the chapter's words
def _run(head, kind, diameters, clusters):
    return {"head_label": head, "kind": kind, "t": list(range(len(diameters))),
            "diameter": list(diameters), "clusters": list(clusters)}


@pytest.mark.parametrize("status", ["all", "none", "some"])
def test_the_collapse_summary_has_a_sentence_for_every_outcome(status):
    """Every outcome of the dynamics gets its sentence (the paper preset, where every run collapses,
    once crashed the chapter); collapsed runs are those whose diameter falls below the tolerance,
    and the sentence quotes the latest collapse and what every other run leaves."""
    fall = [1.0, 1e-3, 1e-7, 1e-12]                    # below 1e-6 from t = 2
    late = [1.0, 0.5, 1e-5, 5e-7]                      # from t = 3
    hold = [1.0, 0.8, 0.71, 0.7]
    runs = {"all": [_run("p", "trained", fall, [5, 2, 1, 1]), _run("p", "symmetric part", late, [5, 3, 1, 1]),
                    _run("n", "trained", fall, [5, 2, 1, 1])],
            "none": [_run("p", "trained", hold, [5, 4, 3, 3]), _run("n", "symmetric part", hold[::-1], [2, 2, 2, 2])],
            "some": [_run("p", "trained", late, [5, 3, 1, 1]), _run("n", "trained", hold, [5, 4, 4, 4]),
                     _run("n", "symmetric part", fall, [5, 2, 1, 1]), _run("q", "trained", hold, [6, 6, 6, 7])]}[status]
    got, sentence = T.collapse_summary(runs, steps=3)
    assert got == status
    if status == "all":
        assert "within 3 layers" in sentence and "whichever head" in sentence
    elif status == "none":
        assert sentence.startswith("under the p head (as trained) and the n head (symmetrised) the tokens have")
        assert sentence.endswith("after 3 layers, leaving 3 clusters (diameter 0.70 of the start) and 2 "
                                 "clusters (diameter 1.00 of the start)")
    else:
        done, left = sentence.split("; ")
        assert done == ("under the p head (as trained) and the n head (symmetrised) the tokens collapse to "
                        "one point within 3 layers")
        assert left == ("under the n head (as trained) and the q head (as trained) they have not collapsed "
                        "after 3 layers, leaving 4 clusters (diameter 0.70 of the start) and 7 clusters "
                        "(diameter 0.70 of the start)")


def test_a_run_in_one_cluster_that_has_not_collapsed_is_said_so():
    """One cluster (at 1e-3 of the start) is not a collapse (below 1e-6): the sentence says
    'one cluster' with its small diameter, not '1 clusters' with 'diameter 0.00'."""
    status, sentence = T.collapse_summary([_run("p", "trained", [1.0, 1e-2, 3e-6], [5, 1, 1])], steps=2)
    assert status == "none"
    assert sentence.endswith("have not collapsed after 2 layers, leaving one cluster (diameter 3e-06 of the start)")


def test_the_collapse_summary_refuses_no_runs():
    with pytest.raises(ValueError, match="runs"):
        T.collapse_summary([], steps=3)


# ------------------------------------------------------------------------------ the head statistics
def test_a_head_with_equal_query_and_key_blocks_is_symmetric_and_semidefinite():
    rng = np.random.default_rng(1)
    q = rng.standard_normal((R, D))
    m = T.head_matrices(_weights(rng, query=q, key=q), 0)
    assert T.antisym_ratio(m["M"]) == 0.0
    assert T.pos_mass(m["M"]) == pytest.approx(1.0, abs=1e-12)
    assert T.inertia(m["M"]) == (32, 0, 352)
    neg = T.head_matrices(_weights(rng, query=q, key=-q), 0)
    assert T.pos_mass(neg["M"]) == pytest.approx(0.0, abs=1e-12)
    assert T.inertia(neg["M"]) == (0, 32, 352)


def test_sylvester_generic_heads_have_exactly_32_positive_and_32_negative_eigenvalues():
    """S = C^T J C with J of inertia (32, 32): at most 32 of each sign, exactly 32 when the 64 rows are
    independent (random blocks, 20 draws), and head_spectrum gives the same 64 eigenvalues as a full
    eigendecomposition."""
    rng = np.random.default_rng(2)
    for _ in range(20):
        m = T.head_matrices(_weights(rng), int(rng.integers(12)))
        assert T.inertia(m["M"]) == (32, 32, 320)
        full = np.linalg.eigvalsh((m["M"] + m["M"].T) / 2)
        nonzero = np.concatenate([full[:32], full[-32:]])
        assert np.abs(np.sort(T.head_spectrum(m)) - nonzero).max() < 1e-12 * np.abs(full).max()
    # rank-deficient: the key block repeats half of the query rows -> fewer than 32 of a sign is possible,
    # but never more than 32
    q = rng.standard_normal((R, D))
    k = np.vstack([q[:16], rng.standard_normal((16, D))])
    pos, neg, _ = T.inertia(T.head_matrices(_weights(rng, query=q, key=k), 0)["M"])
    assert pos <= 32 and neg <= 32 and pos + neg <= 48


def test_antisym_ratio_of_symmetric_plus_antisymmetric_parts():
    rng = np.random.default_rng(3)
    A = rng.standard_normal((6, 6))
    S, K = A + A.T, A - A.T
    for t in (0.0, 0.3, 2.0):
        assert T.antisym_ratio(S + t * K) == pytest.approx(t * np.linalg.norm(K) / np.linalg.norm(S), rel=1e-12)
    assert T.antisym_ratio(K) == math.inf
    with pytest.raises(ValueError, match="M"):
        T.antisym_ratio(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="square"):
        T.pos_mass(np.ones((2, 3)))


def test_pos_mass_of_known_spectra():
    Q = np.linalg.qr(np.random.default_rng(4).standard_normal((5, 5)))[0]
    for ev, want in (([1, 2, 3, 0, 0], 1.0), ([-1, -2, 0, 0, 0], 0.0), ([3, -1, 0, 0, 0], 0.75),
                     ([1, -1, 2, -2, 0], 0.5)):
        S = Q @ np.diag(ev) @ Q.T
        K = np.triu(np.ones((5, 5)), 1)
        assert T.pos_mass(S + (K - K.T)) == pytest.approx(want, abs=1e-12)   # the antisymmetric part is ignored


def test_value_scalar_dist_is_zero_for_multiples_of_the_identity_and_matches_a_direct_minimisation():
    assert T.value_scalar_dist(3.0 * np.eye(7)) == 0.0
    assert T.value_scalar_dist(-0.5 * np.eye(7)) == 0.0
    rng = np.random.default_rng(5)
    for _ in range(5):
        U = rng.standard_normal((9, 9))
        best = minimize_scalar(lambda c: np.linalg.norm(U - c * np.eye(9)), bounds=(-10, 10), method="bounded",
                               options={"xatol": 1e-12})
        assert T.value_scalar_dist(U) == pytest.approx(best.fun / np.linalg.norm(U), rel=1e-9)


def test_rank_bound_sqrt_11_12_holds_and_is_attained():
    """value_scalar_dist >= sqrt(1 - r/d) for rank r (Cauchy-Schwarz on tr U = <P, U>), with equality
    for U = c P, P an orthogonal projector of rank r; random rank-32 heads stay above it."""
    rng = np.random.default_rng(6)
    bound = T.value_bound(32, 384)
    assert bound == pytest.approx(math.sqrt(11 / 12), rel=1e-15)
    Qb = np.linalg.qr(rng.standard_normal((D, R)))[0]
    assert T.value_scalar_dist(2.5 * Qb @ Qb.T) == pytest.approx(bound, rel=1e-12)
    for _ in range(20):
        m = T.head_matrices(_weights(rng), int(rng.integers(12)))
        assert np.linalg.matrix_rank(m["U"]) == 32
        assert T.value_scalar_dist(m["U"]) >= bound
    # the closest a head can get: W_O block = c W_V block^T pseudo-inverse-like, U = c P
    v = rng.standard_normal((R, D))
    P = v.T @ np.linalg.solve(v @ v.T, v)
    m = T.head_matrices(_weights(rng, value=v, output=1.7 * v.T @ np.linalg.inv(v @ v.T)), 0)
    assert np.abs(m["U"] - 1.7 * P).max() < 1e-10
    assert T.value_scalar_dist(m["U"]) == pytest.approx(bound, rel=1e-10)
    with pytest.raises(ValueError, match="rank"):
        T.value_bound(400, 384)


def test_head_row_agrees_with_the_direct_definitions():
    class Fake:
        head_dim = 32

        def __init__(self, W):
            self.W = W

        def attention_weights(self, layer):
            return self.W

    rng = np.random.default_rng(7)
    W = _weights(rng)
    row = T.head_row(Fake(W), 0, 5)
    m = T.head_matrices(W, 5)
    assert set(row) == {"layer", "head", "antisym_ratio", "pos_mass", "value_scalar_dist", "positive", "negative",
                        "rank_U"}
    assert row["pos_mass"] == pytest.approx(T.pos_mass(m["M"]), rel=1e-10)
    assert row["antisym_ratio"] == T.antisym_ratio(m["M"])
    assert (row["positive"], row["negative"], row["rank_U"]) == (32, 32, 32)


# ------------------------------------------------------------------------------ subspace and biases
def test_token_subspace_holds_the_asked_share_of_the_energy():
    rng = np.random.default_rng(8)
    X = rng.standard_normal((500, 3)) @ np.diag([10.0, 3.0, 1.0]) @ np.linalg.qr(rng.standard_normal((3, 3)))[0]
    X = np.hstack([X, np.zeros((500, 5))]) @ np.linalg.qr(rng.standard_normal((8, 8)))[0]
    for share in (0.5, 0.9, 0.99, 1.0):
        P = T.token_subspace(X, share)
        assert np.allclose(P.T @ P, np.eye(P.shape[1]), atol=1e-12)
        kept = np.sum((X @ P) ** 2) / np.sum(X ** 2)
        assert kept >= share - 1e-12
        if P.shape[1] > 1:                      # one direction fewer would not do
            assert np.sum((X @ P[:, :-1]) ** 2) / np.sum(X ** 2) < share
    assert T.token_subspace(X, 1.0).shape[1] == 3
    # restricted to the span of the tokens, a form that is indefinite on R^8 can be definite
    P = T.token_subspace(X, 1.0)
    M = P @ P.T - 5 * (np.eye(8) - P @ P.T)
    assert T.pos_mass(M) < 1 and T.pos_mass(T.restricted(M, P)) == pytest.approx(1.0)
    assert T.token_sign(M, X) == 1.0 and T.token_sign(-M, X) == 0.0


def test_bias_share_is_zero_without_biases_and_one_when_only_the_key_term_varies():
    rng = np.random.default_rng(9)
    X = rng.standard_normal((2, 7, D))
    mask = np.ones((2, 7))
    mask[1, 5:] = 0
    m0 = T.head_matrices(_weights(rng, biases=False), 0)
    assert T.bias_share(X, mask, m0) == 0.0
    m1 = T.head_matrices(_weights(rng, query=np.zeros((R, D))), 0)      # scores = b_Q . k_j / sqrt(32)
    assert T.bias_share(X, mask, m1) == pytest.approx(1.0, rel=1e-12)
    m2 = T.head_matrices(_weights(rng), 0)
    assert 0 < T.bias_share(X, mask, m2) < 1


def test_participation_ratio_counts_equal_directions():
    rng = np.random.default_rng(10)
    Y = rng.standard_normal((20000, 6)) * np.array([1, 1, 1, 0, 0, 0])
    assert T.participation_ratio(Y) == pytest.approx(3.0, rel=0.02)


# ------------------------------------------------------------------------------ the hull test
def test_simplex_with_interior_points_in_32_dimensions():
    rng = np.random.default_rng(11)
    V = rng.standard_normal((33, 32))                         # a simplex: 33 affinely independent points
    w = rng.dirichlet(np.ones(33), size=40)                   # strictly inside
    pts = np.vstack([V, w @ V])
    got = T.hull_vertices(pts)
    assert got[:33].all() and not got[33:].any()


def test_cube_corners_in_32_dimensions_are_vertices_and_their_midpoints_are_not():
    rng = np.random.default_rng(12)
    corners = np.unique(rng.integers(0, 2, size=(150, 32)).astype(float), axis=0)
    mids = (corners[:40] + corners[40:80]) / 2
    pts = np.vstack([corners, mids, corners.mean(0, keepdims=True)])
    got = T.hull_vertices(pts)
    assert got[:len(corners)].all() and not got[len(corners):].any()


def test_duplicates_a_copy_of_a_vertex_is_a_vertex_a_copy_of_an_interior_point_is_not():
    sq = np.array([[0.0, 0], [1, 0], [1, 1], [0, 1]])
    pts = np.vstack([sq, sq[:2], [[0.5, 0.5], [0.5, 0.5]]])
    assert T.hull_vertices(pts).tolist() == [True] * 6 + [False, False]
    assert T.hull_vertices(np.ones((5, 3))).tolist() == [True] * 5             # one point: its own hull


def test_the_lp_alone_agrees_with_qhull_in_three_dimensions(monkeypatch):
    """With no certificate directions beyond the two built-in ones, most points go to the LP."""
    monkeypatch.setattr(T, "CERTIFICATE_DIRECTIONS", 1)
    rng = np.random.default_rng(13)
    for trial in range(5):
        pts = rng.standard_normal((60, 3)) * np.array([1.0, 2.0, 0.5])
        want = np.zeros(60, bool)
        want[ConvexHull(pts).vertices] = True
        assert (T.hull_vertices(pts) == want).all(), trial


def test_collinear_and_coplanar_points():
    line = np.outer(np.linspace(0, 1, 7), [1.0, 2.0, 3.0])
    assert T.hull_vertices(line).tolist() == [True] + [False] * 5 + [True]
    with pytest.raises(ValueError, match="points"):
        T.hull_vertices(np.zeros((0, 3)))
    with pytest.raises(ValueError, match="finite"):
        T.hull_vertices(np.array([[0.0, np.nan], [1, 1], [2, 0]]))


# ------------------------------------------------------------------------------ attention rows
def test_effective_support_of_known_rows():
    a = np.array([[1.0, 0, 0, 0], [0.5, 0.5, 0, 0], [0.25] * 4, [0.7, 0.1, 0.1, 0.1]])
    got = T.effective_support(a)
    assert got[:3] == pytest.approx([1.0, 2.0, 4.0], rel=1e-14)
    assert 1 < got[3] < 4


def test_sentence_stats_on_a_constructed_head():
    """Four keys at the corners of a square and one at its centre; each query's scores make token 0
    the leader of rows 0-2 and token 2 the leader of rows 3-4."""
    keys = np.array([[0.0, 0], [1, 0], [1, 1], [0, 1], [0.5, 0.5]])
    s = np.zeros((5, 5))
    s[:3, 0] = 5.0
    s[3:, 2] = 5.0
    a = np.exp(s) / np.exp(s).sum(1, keepdims=True)
    st = T.sentence_stats(s, a, keys, ["[CLS]", "god", ",", "light", "[SEP]"])
    assert st.leaders == 2 and st.vertices == 4 and st.leaders_are_vertices
    assert st.vertex_mass == pytest.approx(1 - a[:, 4].mean())
    assert st.class_mass.sum() == pytest.approx(1.0) and st.class_share.tolist() == [0.2, 0.2, 0.2, 0.4]
    assert st.class_mass[0] == pytest.approx(a[:, 0].mean())


# ------------------------------------------------------------------------------ the trained model
@pytest.fixture(scope="module")
def study():
    from attention_fw import encoder

    enc = encoder.load()
    corpus = json.loads((ROOT / "book" / "data" / "trained-corpus.json").read_text())["sentences"]
    texts = [c["text"] for c in corpus[:6]]
    return enc, T.corpus_study(enc, texts, hull_for=[0, 3], token_sample=200, rng=0)


def test_hardmax_leaders_are_hull_vertices_of_the_keys(study):
    """A leader maximises the linear functional <q_i, .> over the keys: it is a vertex (every head
    of the trained model, two sentences)."""
    _, st = study
    assert len(st["hull"]) == 2 * 72
    assert all(e["leaders_are_vertices"] for e in st["hull"])
    assert all(1 <= e["leaders"] <= e["vertices"] <= e["n"] for e in st["hull"])


def test_study_quantities_are_within_their_ranges(study):
    enc, st = study
    n = st["n"][:, None, None]
    assert ((st["support"] >= 1 - 1e-9) & (st["support"] <= n + 1e-9)).all()
    assert ((st["leaders"] >= 1) & (st["leaders"] <= n)).all()
    assert np.allclose(st["class_mass"].sum(-1), 1.0, atol=1e-5)        # float32 weights
    assert np.allclose(st["class_share"].sum(-1), 1.0)
    assert ((st["bias_share"] >= 0) & (st["bias_share"] <= 1)).all()
    for share, sub in st["subspace"].items():
        assert ((sub["pos_mass"] >= 0) & (sub["pos_mass"] <= 1)).all() and (sub["dim"] <= 384).all()
    assert (st["subspace"][0.9]["dim"] <= st["subspace"][0.99]["dim"]).all()


def test_the_72_trained_heads_satisfy_the_rank_facts(study):
    enc, _ = study
    table = T.head_table(enc)
    assert len(table) == 72 and [(r["layer"], r["head"]) for r in table][:2] == [(0, 0), (0, 1)]
    assert {(r["positive"], r["negative"], r["rank_U"]) for r in table} == {(32, 32, 32)}
    assert min(r["value_scalar_dist"] for r in table) >= math.sqrt(11 / 12)
    assert all(0 < r["pos_mass"] < 1 for r in table)


def test_the_chapter_data_file_holds_the_72_heads_and_the_similarity_check(study, tmp_path):
    """figures/data/trained-heads-map.json: a list "heads" of 72 objects with exactly the five keys
    (floats written in full, at least 10 significant digits) and the 3 x 3 "similarity_check"."""
    from attention_fw import encoder
    from attention_fw.plot import trained as TP

    enc, st = study
    ref = json.loads((ROOT / "book" / "data" / "minilm-reference.json").read_text())
    sim = encoder.cosine_similarities(enc.encode(ref["sentences"]))
    table = T.head_table(enc)
    from afw_book.figures import save
    from attention_fw.plot import figure_data

    fig = TP.fig_heads_map(table, st["subspace"], st["token_sign"], sim, share=0.9)
    save(fig, "trained-heads-map", figure_data(fig), outdir=tmp_path, formats=())
    text = (tmp_path / "data" / "trained-heads-map.json").read_text()
    data = json.loads(text)
    assert len(data["heads"]) == 72
    assert all(set(h) == {"layer", "head", "antisym_ratio", "pos_mass", "value_scalar_dist"} for h in data["heads"])
    assert [(h["layer"], h["head"]) for h in data["heads"]] == [(L, h) for L in range(6) for h in range(12)]
    for h, r in zip(data["heads"], table):
        assert h["pos_mass"] == r["pos_mass"] and h["value_scalar_dist"] == r["value_scalar_dist"]   # no rounding
    import re

    for key in ("antisym_ratio", "pos_mass", "value_scalar_dist"):
        for m in re.finditer(rf'"{key}": ([0-9.e+-]+)', text):
            digits = m.group(1).split("e")[0].replace(".", "").lstrip("0")
            assert len(digits) >= 10, m.group(0)
    assert np.abs(np.array(data["similarity_check"]) - np.array(ref["similarity"])).max() < 5e-4
