"""AESVM (Nandan et al. 2014): segmentation, CheckPoint, DeriveAE/DeriveRS guarantees, and the AESVC estimator."""


import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize
from sklearn.datasets import make_blobs, make_classification
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.model_selection import GridSearchCV
from sklearn.svm import SVC
from test_svc import check_estimator_with_gamma_scale

from coresvm import AESVC, aesvc
from coresvm import aesvm as A
from coresvm.datasets import make_checkerboard
from coresvm.kernels import KernelSpec, kernel_block
from coresvm.solvers.core_steps import NO_HELPER, ROWS_STORED, STOP_COVERAGE, inner_solve
from coresvm.solvers.engine import SECOND_MDM

RBF = KernelSpec("rbf", 2.0)


@pytest.fixture(scope="module")
def board():
    return make_checkerboard(3000, random_state=1)


@pytest.fixture(autouse=True)
def fresh_cache():
    aesvc.clear_representative_set_cache()
    yield
    aesvc.clear_representative_set_cache()


def is_partition(parts, rows):
    joined = np.concatenate(parts)
    return len(joined) == len(rows) and np.array_equal(np.sort(joined), np.sort(rows))


# ---------------------------------------------------------------- segmentation
def test_fls1_blocks_in_data_order():
    rows = np.arange(10, 2510)
    blocks = A.fls1(rows, 1000)
    assert [len(b) for b in blocks] == [1000, 1000, 500]
    np.testing.assert_array_equal(np.concatenate(blocks), rows)


@pytest.mark.parametrize("n, P", [(3000, 1000), (2049, 512), (700, 1000)])
def test_fls2_partition_sizes(board, n, P):
    X, _ = board
    rows = np.arange(n)
    blocks = A.fls2(X, rows, P, RBF)
    assert is_partition(blocks, rows)
    assert all(len(b) <= P for b in blocks)
    if n > P:
        # a block is halved only while it has more than P rows: every block keeps at least P // 2
        assert all(len(b) >= P // 2 for b in blocks)
        assert len(blocks) >= 2 ** int(np.ceil(np.log2(n / P)) - 1)
    else:
        assert len(blocks) == 1


@pytest.mark.parametrize("n, min_half, n_blocks", [(700, 200, 2), (700, 400, 1), (700, None, 1), (3000, 200, 4)])
def test_fls2_first_call_halves_like_the_paper(board, n, min_half, n_blocks):
    # the paper's first FLS2 call splits before testing |X'|/2 <= P, so a class of <= P rows gives two
    # blocks -- unless a half would hold fewer than min_half (= V in DeriveRS) rows
    X, _ = board
    rows = np.arange(n)
    blocks = A.fls2(X, rows, 1000, RBF, min_half=min_half)
    assert is_partition(blocks, rows)
    assert len(blocks) == n_blocks
    assert all(len(b) <= 1000 for b in blocks)


def test_derive_rs_halves_a_small_class_into_blocks_of_at_least_V(board):
    X, y = board
    rs = A.derive_representative_set(X, y, RBF, P=5000, V=300)
    sizes = np.bincount(rs.segment_of)
    # each class (about 1500 rows) is halved into blocks of about 750, each cut by SLS into 300 + 300 + ~150
    assert sizes.max() == 300
    assert len(sizes) == 2 * 2 * 3


def test_fls2_splits_at_the_median_kernel_distance(board):
    X, _ = board
    rows = np.arange(1000)
    left, right = A.fls2(X, rows, 500, RBF)
    d = 2.0 - 2.0 * rbf_kernel(X[rows], X[:1], gamma=RBF.gamma)[:, 0]
    assert len(left) == len(right) == 500
    assert d[left].max() <= d[right].min() + 1e-12


def test_sls_segments_of_size_V_nearest_to_the_anchor(board):
    X, _ = board
    block = np.arange(2500)
    segments = A.sls(X, block, 600, RBF)
    assert is_partition(segments, block)
    assert [len(s) for s in segments] == [600, 600, 600, 600, 100]
    anchor = int(np.argmax((X[block] ** 2).sum(axis=1)))
    assert anchor in segments[0]
    d = 2.0 - 2.0 * rbf_kernel(X[block], X[anchor : anchor + 1], gamma=RBF.gamma)[:, 0]
    outside = np.setdiff1d(block, segments[0])
    assert d[segments[0]].max() <= d[outside].min() + 1e-12


def test_sls_small_block_is_one_segment(board):
    X, _ = board
    assert [len(s) for s in A.sls(X, np.arange(50), 100, RBF)] == [50]


# ------------------------------------------------------------------ CheckPoint
def slsqp_distance(K, point, cand):
    H, k = K[np.ix_(cand, cand)], K[cand, point]

    def f(mu):
        return mu @ H @ mu - 2 * mu @ k + K[point, point]

    res = minimize(f, np.full(len(cand), 1 / len(cand)), jac=lambda mu: 2 * H @ mu - 2 * k, method="SLSQP",
                   bounds=[(0, 1)] * len(cand), constraints=[{"type": "eq", "fun": lambda mu: mu.sum() - 1}],
                   options={"ftol": 1e-14, "maxiter": 500})
    return res.fun


@pytest.mark.parametrize("seed", range(4))
def test_check_point_matches_slsqp(seed):
    rng = np.random.RandomState(seed)
    X = rng.randn(40, 3)
    K = rbf_kernel(X, gamma=0.3)
    cand = rng.choice(np.arange(1, 40), size=15, replace=False)
    covered, distance, mu = A.check_point(K, 0, cand, eps=1e-3, decide=False, gap_tol=1e-12, max_iter=100_000)
    assert mu.min() >= 0 and abs(mu.sum() - 1) < 1e-12
    assert distance == pytest.approx(mu @ K[np.ix_(cand, cand)] @ mu - 2 * mu @ K[cand, 0] + 1, abs=1e-12)
    assert distance == pytest.approx(slsqp_distance(K, 0, cand), abs=1e-7)
    assert covered == (distance <= 1e-3)


def test_check_point_decides_like_the_exact_solution():
    rng = np.random.RandomState(7)
    X = rng.rand(60, 2)
    K = rbf_kernel(X, gamma=1.0)
    cand = np.arange(10, 60)
    for point in range(10):
        exact = A.check_point(K, point, cand, decide=False, max_iter=100_000)[1]
        for eps in (exact * 0.5, exact * 2.0):
            covered, distance, _ = A.check_point(K, point, cand, eps=eps, decide=True)
            assert covered == (exact <= eps)
            if covered:
                assert distance <= eps


def coverage_solve(K, point, cand, left_out, eps, tol):
    """DeriveAE's pruning QP: the coverage rule of the core set's inner solve on ``K[cand, cand]``, from the
    vertex of least f, with the candidates in ``left_out`` at the linear cost EXCLUDED.  Returns (weights, f)."""
    W = np.ascontiguousarray(K[np.ix_(cand, cand)])
    diag = np.diag(W).copy()
    lin = np.where(left_out, A.EXCLUDED, -2.0 * K[cand, point])
    start = int(np.argmin(diag + lin))
    alpha = np.zeros(len(cand))
    alpha[start] = 1.0
    G = W[start] + 0.5 * lin
    inner_solve(W, alpha, G, diag, len(cand), 0.0, SECOND_MDM, 0.0, 1.0, tol, 100_000, np.inf, np.zeros(0),
                STOP_COVERAGE, lin, K[point, point], eps, ROWS_STORED, 1, NO_HELPER)
    kept = ~left_out
    mu = alpha[kept]
    return alpha, mu @ W[np.ix_(kept, kept)] @ mu + lin[kept] @ mu + K[point, point]


@pytest.mark.parametrize("seed", range(3))
def test_left_out_candidates_take_no_part_in_the_coverage_qp(seed):
    """The pruning step's QP over all candidates, some at the cost EXCLUDED, is CheckPoint on the others alone:
    the same weights to the last bit (same order, same vertices), and SLSQP's minimum on them."""
    rng = np.random.RandomState(seed)
    K = rbf_kernel(rng.randn(40, 3), gamma=0.3)
    K = 0.5 * (K + K.T)  # symmetric to the last bit, as DeriveAE reads it (rows for columns)
    cand = rng.choice(np.arange(1, 40), size=20, replace=False)
    left_out = rng.rand(20) < 0.3
    alpha, f = coverage_solve(K, 0, cand, left_out, np.inf, 1e-12)
    assert np.all(alpha[left_out] == 0.0)
    _, distance, mu = A.check_point(K, 0, cand[~left_out], decide=False, gap_tol=1e-12, max_iter=100_000)
    assert np.array_equal(alpha[~left_out], mu)
    assert f == pytest.approx(slsqp_distance(K, 0, cand[~left_out]), abs=1e-7)
    for eps in (0.5 * f, 2.0 * f):  # deciding (tol = inf) gives the exact solution's answer
        _, decided_f = coverage_solve(K, 0, cand, left_out, eps, np.inf)
        assert (decided_f <= eps) == (f <= eps)


def test_sphere_set_matches_slsqp():
    """SphereSet's dense solve (the core set's inner solve, lam = 1) reaches SLSQP's minimum enclosing ball."""
    K = rbf_kernel(np.random.RandomState(3).randn(60, 2), gamma=0.5)
    diag = np.diag(K)
    res = minimize(lambda a: a @ K @ a - a @ diag, np.full(60, 1 / 60), jac=lambda a: 2 * K @ a - diag,
                   method="SLSQP", bounds=[(0, 1)] * 60, constraints=[{"type": "eq", "fun": lambda a: a.sum() - 1}],
                   options={"ftol": 1e-15, "maxiter": 1000})
    alpha = A.sphere_set(K, "dense", tol=1e-10)
    assert alpha.min() >= 0 and alpha.sum() == pytest.approx(1.0, abs=1e-12)
    assert alpha @ diag - alpha @ K @ alpha == pytest.approx(-res.fun, rel=1e-7)


def test_sphere_set_solvers_agree(board):
    X, _ = board
    Xs = X[:300]
    K = kernel_block(Xs, Xs, RBF)
    dense = A.sphere_set(K, "dense", tol=1e-8)
    engine = A.sphere_set(K, "engine", Xs, RBF, tol=1e-8)

    def radius2(a):
        return a @ np.diag(K) - a @ K @ a

    assert radius2(dense) == pytest.approx(radius2(engine), rel=1e-6)
    # the support lies on the sphere: its distance to the centre is the radius
    Ka = K @ dense
    distance = np.diag(K) - 2 * Ka + dense @ Ka
    assert np.allclose(distance[dense > 1e-6], radius2(dense), rtol=1e-4)
    assert distance.max() <= radius2(dense) * (1 + 1e-4)


# ----------------------------------------------------------- DeriveAE / DeriveRS
def test_derive_ae_covers_every_point_within_eps(board):
    X, _ = board
    Xs = X[:500] / 4.0  # one unit cell: a segment-like patch
    K = kernel_block(Xs, Xs, RBF)
    eps = 1e-3
    result = A.derive_ae(K, eps, return_gamma=True)
    gamma = result.gamma
    # rows of Gamma are convex weights over the representatives only
    assert np.allclose(gamma.sum(axis=1), 1.0)
    others = np.setdiff1d(np.arange(500), result.representatives)
    assert np.all(gamma[:, others] == 0)
    # independent residual ||phi(x_i) - sum_t gamma_it phi(x_t)||^2 from the kernel
    residual = np.diag(K) - 2 * np.einsum("ij,ij->i", gamma, K) + np.einsum("ij,jk,ik->i", gamma, K, gamma)
    assert residual.max() <= eps + 1e-12
    np.testing.assert_allclose(residual, result.residual, atol=1e-10)
    np.testing.assert_allclose(result.beta, gamma.sum(axis=0)[result.representatives])
    assert len(result.representatives) < 100


def test_every_point_within_eps_of_its_segments_hull(board):
    """The minimum distance to the hull of the segment's representatives, solved by SLSQP."""
    X, y = board
    eps = 1e-3
    rs = A.derive_representative_set(X, y, RBF, epsilon=eps, P=1000, V=150)
    assert rs.max_residual <= eps
    rng = np.random.RandomState(0)
    is_rep = np.zeros(len(y), dtype=bool)
    is_rep[rs.indices] = True
    for i in rng.choice(np.flatnonzero(~is_rep), size=15, replace=False):
        reps = rs.indices[rs.segment_of[rs.indices] == rs.segment_of[i]]
        assert np.all(y[reps] == y[i])
        rows = np.concatenate([[i], reps])
        K = rbf_kernel(X[rows], gamma=RBF.gamma)
        assert slsqp_distance(K, 0, np.arange(1, len(rows))) <= eps + 1e-9


def test_no_distinct_point_is_covered_below_the_cauchy_schwarz_bound():
    """``||phi(v) - u|| >= 1 - max_z k(v, z)`` for ``u`` in the hull of the others: no eps-cover can go lower.

    On binary rows (like a9a / w8a) at ``(1 - exp(-g))^2 > eps`` every distinct value needs a
    representative and every duplicate is covered exactly, so ``M`` is the number of distinct
    ``(x, y)`` values -- the bound Nandan et al. (2014) Table 3 falls below (benchmarks/results/
    aesvm_paper_gap.md).
    """
    rng = np.random.RandomState(0)
    values = (rng.rand(60, 10) < 0.3).astype(float)
    X = values[rng.randint(0, 60, size=400)]  # 400 rows, many duplicates
    y = np.where(X[:, 0] + X[:, 1] > 0, 1.0, -1.0)
    gamma, eps = 2.0**-4, 1e-3
    assert (1 - np.exp(-gamma)) ** 2 > eps  # squared input distances between distinct rows are >= 1
    rs = A.derive_representative_set(X, y, KernelSpec("rbf", gamma), epsilon=eps, P=1000, V=1000)
    n_values = sum(len(np.unique(X[y == c], axis=0)) for c in (-1.0, 1.0))
    assert len(rs.indices) >= n_values  # more when FLS2 / SLS put copies of a value in two segments
    for segment in range(rs.counts["segments"]):
        rows = np.flatnonzero(rs.segment_of == segment)
        reps = rs.indices[rs.segment_of[rs.indices] == segment]
        assert len(reps) == len(np.unique(X[rows], axis=0))  # one per distinct value, duplicates exact
    assert rs.max_residual <= 1e-12


@pytest.mark.parametrize("segmentation", ["fls1", "fls2"])
def test_beta_sums_to_class_size(board, segmentation):
    X, y = board
    rs = A.derive_representative_set(X, y, RBF, P=1000, V=200, segmentation=segmentation)
    for label, n_class in zip(rs.classes, rs.n_per_class, strict=True):
        assert rs.beta[rs.labels == label].sum() == pytest.approx(n_class, rel=1e-12)
        assert n_class == np.sum(y == label)
    assert np.all(rs.beta >= 1.0 - 1e-12)  # each representative at least represents itself
    assert np.array_equal(rs.size_per_class, [np.sum(rs.labels == c) for c in rs.classes])
    assert len(np.unique(rs.indices)) == len(rs.indices)
    assert rs.counts["segments"] == len(np.unique(rs.segment_of))
    assert rs.max_residual <= 1e-3
    assert rs.fraction < 0.7


def test_published_steps_leave_residuals_above_eps_and_the_fix_removes_them():
    # the published DeriveAE (pruning against the original candidates, step-6 weights kept whatever their
    # residual) can leave points farther than eps from their representation; the library's DeriveAE cannot
    X, y = make_checkerboard(4000, random_state=3)
    spec = KernelSpec("rbf", 4.0)
    published = A.derive_representative_set(X, y, spec, epsilon=1e-3, P=4000, V=1000, enforce_coverage=False)
    enforced = A.derive_representative_set(X, y, spec, epsilon=1e-3, P=4000, V=1000)
    assert published.counts["promoted"] == 0
    assert published.max_residual > 1e-3  # the caveat is real on this data
    assert enforced.max_residual <= 1e-3 + 1e-12
    assert enforced.counts["promoted"] > 0
    assert len(enforced.indices) > len(published.indices)
    for rs in (published, enforced):
        for c in range(2):
            assert np.isclose(rs.beta[rs.labels == rs.classes[c]].sum(), np.sum(y == rs.classes[c]))


def test_beta_composes_sample_weights(board):
    X, y = board
    w = np.random.RandomState(0).uniform(0.5, 2.0, size=len(y))
    plain = A.derive_representative_set(X, y, RBF, P=1000, V=200)
    weighted = A.derive_representative_set(X, y, RBF, P=1000, V=200, sample_weight=w)
    np.testing.assert_array_equal(plain.indices, weighted.indices)
    for label in plain.classes:
        assert weighted.beta[weighted.labels == label].sum() == pytest.approx(w[y == label].sum())


def test_derive_rs_sparse_equals_dense(board):
    X, y = board
    dense = A.derive_representative_set(X[:800], y[:800], RBF, P=400, V=100)
    sparse = A.derive_representative_set(sp.csr_matrix(X[:800]), y[:800], RBF, P=400, V=100)
    # the kernel values differ in the last bits (CSR products), which can move a CheckPoint's stopping
    # point; the sets agree and the weights stay close
    assert len(np.intersect1d(dense.indices, sparse.indices)) >= 0.98 * len(dense.indices)
    assert sparse.max_residual <= 1e-3
    for label in dense.classes:
        assert sparse.beta[sparse.labels == label].sum() == pytest.approx(np.sum(y[:800] == label))


# ------------------------------------------------------------------- estimator
def test_epsilon_zero_equals_svc():
    X, y = make_classification(n_samples=200, n_features=5, random_state=0)
    model = AESVC(C=3.0, gamma=0.3, epsilon=0.0, V=50, P=100).fit(X, y)
    assert model.rs_fraction_ == 1.0
    assert np.all(model.representative_set_.beta == 1.0)
    reference = SVC(C=3.0, gamma=0.3).fit(X, y)
    np.testing.assert_allclose(model.decision_function(X), reference.decision_function(X), atol=1e-6)
    assert np.array_equal(np.sort(model.support_), np.sort(reference.support_))
    np.testing.assert_allclose(model.intercept_, reference.intercept_, atol=1e-6)


def test_small_epsilon_approximates_svc(board):
    X, y = board
    reference = SVC(C=10.0, gamma=2.0).fit(X, y)
    model = AESVC(C=10.0, gamma=2.0, epsilon=1e-4, V=300, P=1000).fit(X, y)
    assert model.rs_fraction_ < 0.8
    agreement = np.mean(model.predict(X) == reference.predict(X))
    assert agreement > 0.98
    assert model.max_residual_ <= 1e-4


def test_fitted_attributes_and_diagnostics(board):
    X, y = board
    model = AESVC(C=10.0, gamma=2.0, V=300, P=1000).fit(X, y)
    rs = model.representative_set_
    assert model.rs_size_per_class_.sum() == len(rs.indices)
    assert model.derive_time_ > 0 and model.max_residual_ <= 1e-3
    assert set(model.support_) <= set(rs.indices)
    np.testing.assert_array_equal(model.support_vectors_, X[model.support_])
    # decision function is the SVC formula over the support vectors
    K = rbf_kernel(X[:50], model.support_vectors_, gamma=2.0)
    np.testing.assert_allclose(model.decision_function(X[:50]), K @ model.dual_coef_[0] + model.intercept_[0],
                               atol=1e-8)
    assert model.score(X, y) > 0.9


def test_multiclass_one_vs_one_and_class_weight():
    X, y = make_blobs(n_samples=600, centers=4, cluster_std=1.5, random_state=0)
    model = AESVC(C=1.0, gamma=0.5, V=100, P=300, decision_function_shape="ovo").fit(X, y)
    assert model.decision_function(X).shape == (600, 6)
    assert len(model.rs_size_per_class_) == 4
    assert model.score(X, y) >= SVC(C=1.0, gamma=0.5).fit(X, y).score(X, y) - 0.02
    weighted = AESVC(C=1.0, gamma=0.5, V=100, P=300, class_weight={0: 5.0}).fit(X, y)
    # the same representative set (from the cache), with class 0's bounds scaled
    assert weighted.rs_from_cache_
    assert np.mean(weighted.predict(X) == 0) >= np.mean(model.predict(X) == 0)


def test_sample_weight_zero_ignores_rows(board):
    X, y = board
    w = np.ones(len(y))
    w[:1000] = 0.0
    weighted = AESVC(gamma=2.0, C=5.0, V=300, P=1000).fit(X, y, sample_weight=w)
    dropped = AESVC(gamma=2.0, C=5.0, V=300, P=1000).fit(X[1000:], y[1000:])
    np.testing.assert_allclose(weighted.decision_function(X), dropped.decision_function(X), atol=1e-8)
    assert weighted.support_.min() >= 1000


def test_sparse_input(board):
    X, y = board
    dense = AESVC(gamma=2.0, C=5.0, V=300, P=1000).fit(X, y)
    sparse = AESVC(gamma=2.0, C=5.0, V=300, P=1000).fit(sp.csr_matrix(X), y)
    assert np.mean(dense.predict(X) == sparse.predict(sp.csr_matrix(X))) > 0.99
    np.testing.assert_allclose(dense.decision_function(sp.csr_matrix(X)), dense.decision_function(X), atol=1e-12)


def test_sparse_int64_indices(board):
    X, y = board
    X64 = sp.csr_matrix(X[:500])
    X64.indices, X64.indptr = X64.indices.astype(np.int64), X64.indptr.astype(np.int64)
    model = AESVC(gamma=2.0, C=5.0, V=100, P=300).fit(X64, y[:500])
    assert model.score(X64, y[:500]) > 0.8


def test_threads_give_the_same_set(board):
    X, y = board
    one = A.derive_representative_set(X, y, RBF, P=1000, V=200)
    two = A.derive_representative_set(X, y, RBF, P=1000, V=200, n_jobs=2)
    np.testing.assert_array_equal(one.indices, two.indices)
    np.testing.assert_array_equal(one.beta, two.beta)


def test_grid_search_reuses_the_representative_set(board, monkeypatch):
    X, y = board
    calls = []
    original = A.derive_representative_set

    def counted(*args, **kwargs):
        calls.append(args[0].shape[0])
        return original(*args, **kwargs)

    monkeypatch.setattr(A, "derive_representative_set", counted)
    grid = GridSearchCV(AESVC(gamma=2.0, V=300, P=1000), {"C": [0.5, 2.0, 8.0, 32.0]}, cv=3, n_jobs=1)
    grid.fit(X, y)
    assert len(calls) == 3 + 1  # one per fold and one for the refit, not one per C
    assert grid.best_score_ > 0.9
    # a new kernel parameter needs a new set
    AESVC(gamma=1.0, V=300, P=1000).fit(X, y)
    assert len(calls) == 5
    AESVC(gamma=1.0, V=300, P=1000, C=100.0).fit(X, y)
    assert len(calls) == 5
    AESVC(gamma=1.0, V=300, P=1000, cache_representative_set=False).fit(X, y)
    assert len(calls) == 6


@pytest.mark.parametrize("params", [{"epsilon": -1.0}, {"V": 0}, {"P": 10, "V": 20}, {"segmentation": "x"},
                                    {"C": 0.0}, {"gamma": -1.0}])
def test_bad_parameters(board, params):
    X, y = board
    with pytest.raises(ValueError):
        AESVC(**params).fit(X[:100], y[:100])


def test_one_class_rejected(board):
    X, _ = board
    with pytest.raises(ValueError, match="at least 2 classes"):
        AESVC().fit(X[:50], np.ones(50))


def test_check_estimator():
    check_estimator_with_gamma_scale(AESVC())
