"""The block violator search of the gsvm family (solvers/geometric.py) against the row-by-row one."""

import numpy as np
import pytest
import scipy.sparse as sp
from test_geometric import STOPPING_CODE, dense_alpha, rbf_problem

from coresvm.kernels import KernelSpec
from coresvm.problem import SimplexProblem
from coresvm.solvers.driver import SolverOptions, run_engine
from coresvm.solvers.geometric import (
    BLOCK_FEATURE_BYTES,
    STOP_ADJMN,
    STOP_MEB,
    STOP_MN,
    _BlockScorer,
    block_search_features,
    find_violator,
    tracks_every_point,
    violation_threshold,
)


def sparse_copy(X):
    """CSR with about a third of the entries zero (so rows differ in their nonzero features)."""
    X = X.copy()
    X[np.random.RandomState(7).random_sample(X.shape) < 0.35] = 0.0
    return sp.csr_matrix(X)


def state_on(problem, n_sv=15, seed=0):
    """A random weight vector on ``n_sv`` points, with the SV arrays the search reads."""
    rng = np.random.RandomState(seed)
    m = problem.n_points
    sv_idx = np.zeros(40, dtype=np.int64)
    sv_idx[:n_sv] = rng.choice(m, n_sv, replace=False)
    alpha = np.zeros(40)
    alpha[:n_sv] = rng.dirichlet(np.ones(n_sv))
    sv_pos = np.full(m, -1, dtype=np.int64)
    sv_pos[sv_idx[:n_sv]] = np.arange(n_sv)
    dense = np.zeros(m)
    dense[sv_idx[:n_sv]] = alpha[:n_sv]
    Q = problem.dense_Q()
    g_all = Q @ dense
    g = np.zeros(40)
    g[:n_sv] = g_all[sv_idx[:n_sv]]
    features = block_search_features(problem, 40)  # CSR: columns the scorer fills itself
    if not sp.issparse(problem.X):
        features[:n_sv] = problem.X[sv_idx[:n_sv]]
    return sv_idx, sv_pos, alpha, g, features, g_all, float(dense @ g_all), n_sv


@pytest.mark.parametrize("kernel", [KernelSpec("rbf", gamma=0.5), KernelSpec("poly", gamma=0.5, coef0=1.0, degree=3),
                                    KernelSpec("linear")])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("sparse", [False, True])
def test_block_scores_equal_the_extended_kernel_rows(kernel, bias, sparse):
    problem = rbf_problem(m=60, bias=bias)
    X = sparse_copy(problem.X) if sparse else problem.X
    problem = SimplexProblem(X, problem.y, 1 / problem.inv_c, kernel, bias=bias)
    sv_idx, sv_pos, alpha, g, features, g_all, _, n_sv = state_on(problem)
    scorer = _BlockScorer(problem, features)
    scorer.refresh(sv_idx, alpha, n_sv)
    outside = np.flatnonzero(sv_pos < 0)
    np.testing.assert_allclose(scorer(outside), g_all[outside], rtol=1e-12, atol=1e-14)


def test_rbf_factorization_is_skipped_when_the_exponent_could_overflow():
    problem = rbf_problem(m=40)
    far = SimplexProblem(problem.X * 100.0, problem.y, 1 / problem.inv_c, KernelSpec("rbf", gamma=0.5))
    sv_idx, sv_pos, alpha, g, features, g_all, _, n_sv = state_on(far)
    scorer = _BlockScorer(far, features)
    assert not scorer.factorized
    scorer.refresh(sv_idx, alpha, n_sv)
    outside = np.flatnonzero(sv_pos < 0)
    np.testing.assert_allclose(scorer(outside), g_all[outside], rtol=1e-12, atol=1e-300)


def test_threshold_of_an_array_is_the_scalar_rule_per_point():
    """The block search passes an array of tau, the compiled searches one value: the same numbers, bit for bit."""
    tau = np.array([1.5, 2.0, 3.0])
    for rule in (STOP_MN, STOP_ADJMN, STOP_MEB):
        expected = [violation_threshold(rule, 0.3, t, 1e-2) for t in tau]
        np.testing.assert_array_equal(violation_threshold(rule, 0.3, tau, 1e-2), expected)
    np.testing.assert_array_equal(violation_threshold(STOP_MN, 0.3, tau, 1e-2), np.full(3, (1 - 1e-2) * 0.3))


@pytest.mark.parametrize("probe", [1, 59])
def test_search_takes_the_first_violator_or_the_worst_of_the_first_violating_try(probe):
    """Replaying the same random draws: probe 1 returns the first violating draw (however the draws
    are blocked), probe 59 the worst violator of the first try that has one."""
    problem = rbf_problem(m=80)
    sv_idx, sv_pos, alpha, g, features, g_all, w2, n_sv = state_on(problem)
    scorer = _BlockScorer(problem, features)
    scorer.refresh(sv_idx, alpha, n_sv)
    eps = 0.5
    threshold = violation_threshold(STOP_MN, w2, problem.diag, eps)
    empty = np.zeros(1, dtype=np.int64)
    point, g_v, margin = find_violator(np.random.RandomState(3), problem.n_points, problem.diag, STOP_MN, w2, eps,
                                       600, probe, empty, empty, sv_pos, g, scorer)
    assert point >= 0
    assert g_v == pytest.approx(g_all[point], rel=1e-12)
    assert margin == pytest.approx(threshold[point] - g_all[point], rel=1e-12)
    replay = np.random.RandomState(3)
    if probe == 1:
        # blocks of 4, 8, ...: the draws come in that order from the same generator
        draws = np.concatenate([replay.randint(0, problem.n_points, size=n) for n in (4, 8, 16, 32, 64, 128)])
        first = next(p for p in draws if g_all[p] < threshold[p])
        assert point == first
    else:
        while True:
            draws = replay.randint(0, problem.n_points, size=59)
            margins = threshold[draws] - g_all[draws]
            if margins.max() > 0:
                assert point == draws[np.argmax(margins)]
                break


def test_no_violator_when_the_rule_holds_everywhere():
    problem = rbf_problem(m=50)
    sv_idx, sv_pos, alpha, g, features, g_all, w2, n_sv = state_on(problem)
    scorer = _BlockScorer(problem, features)
    scorer.refresh(sv_idx, alpha, n_sv)
    empty = np.zeros(1, dtype=np.int64)
    eps = 1.0 - (g_all.min() - 0.01 * w2) / w2  # (1 - eps) w2 is below every g_i
    assert find_violator(np.random.RandomState(0), 50, problem.diag, STOP_MN, w2, eps, 300, 1, empty, empty, sv_pos,
                         g, scorer)[0] == -1


def test_block_search_keeps_feature_rows_of_dense_and_columns_of_sparse_data_within_its_budget():
    problem = rbf_problem(m=30)
    assert block_search_features(problem, 64).shape == (64, 3)
    sparse = SimplexProblem(sp.csr_matrix(problem.X), problem.y, 1 / problem.inv_c, problem.kernel)
    assert block_search_features(sparse, 64).shape == (3, 64)
    assert block_search_features(problem, BLOCK_FEATURE_BYTES // 16) is None  # 3 x 8 bytes a row: over budget
    assert block_search_features(sparse, BLOCK_FEATURE_BYTES // 16) is None


def test_sparse_feature_columns_follow_the_sv_slots_when_the_svs_change():
    """New SVs, dropped SVs and compaction move points between slots: the scores stay exact."""
    problem = rbf_problem(m=60)
    problem = SimplexProblem(sparse_copy(problem.X), problem.y, 1 / problem.inv_c, problem.kernel)
    Q = problem.dense_Q()
    scorer = _BlockScorer(problem, block_search_features(problem, 40))
    for seed, n_sv in [(0, 15), (1, 22), (2, 9), (3, 30)]:
        sv_idx, sv_pos, alpha, _, _, g_all, _, n_sv = state_on(problem, n_sv=n_sv, seed=seed)
        scorer.refresh(sv_idx, alpha, n_sv)
        outside = np.flatnonzero(sv_pos < 0)
        np.testing.assert_allclose(scorer(outside), g_all[outside], rtol=1e-12, atol=1e-14)
        out = np.zeros(40)
        scorer.row(int(outside[0]), out)
        np.testing.assert_allclose(out[:n_sv], Q[outside[0], sv_idx[:n_sv]], rtol=1e-12)


@pytest.mark.parametrize("rule", ["sphere", "mnsvm", "bvm"])
@pytest.mark.parametrize("block", [True, False])
@pytest.mark.parametrize("sparse", [False, True])
def test_both_searches_meet_the_rule_on_every_point(rule, block, sparse):
    problem = rbf_problem(m=100)
    if sparse:
        problem = SimplexProblem(sparse_copy(problem.X), problem.y, 1 / problem.inv_c, problem.kernel)
    Q = problem.dense_Q()
    eps = 1e-2 if rule == "bvm" else 1e-4
    options = SolverOptions(ball_rule=rule, stopping="mn", eps=eps, draws=20 * problem.n_points,
                            probe=59 if rule == "bvm" else 1, seed=1, second_vertex="imdm", block_search=block)
    result = run_engine(problem, options)
    alpha = dense_alpha(result, problem.n_points)
    assert result.status == "converged"
    w2 = alpha @ Q @ alpha
    assert (Q @ alpha).min() >= violation_threshold(STOPPING_CODE["mn"], w2, Q[0, 0], eps) - 1e-9 * w2


@pytest.mark.parametrize("kernel", [KernelSpec("rbf", gamma=0.5), KernelSpec("poly", gamma=0.5, coef0=1.0, degree=2)])
def test_the_violator_row_comes_from_the_scored_block(kernel):
    base = rbf_problem(m=60)
    problem = SimplexProblem(base.X, base.y, 1 / base.inv_c, kernel)
    sv_idx, sv_pos, alpha, g, features, g_all, _, n_sv = state_on(problem)
    scorer = _BlockScorer(problem, features)
    scorer.refresh(sv_idx, alpha, n_sv)
    outside = np.flatnonzero(sv_pos < 0)[:7]
    scorer(outside)
    out = np.zeros(40)
    scorer.row(int(outside[3]), out)
    np.testing.assert_allclose(out[:n_sv], problem.dense_Q()[outside[3], sv_idx[:n_sv]], rtol=1e-12)


@pytest.mark.parametrize("rule", ["sphere", "mnsvm"])
@pytest.mark.parametrize("sparse", [False, True])
def test_tracking_every_point_takes_the_same_steps_as_the_search_over_the_svs(rule, sparse):
    """Small problems keep every point's g from the SVs' rows of Q (a lookup per drawn candidate).
    With the same draws the first steps are those of the run that computes each candidate's g over
    the SVs; later a rounding difference (~1e-17) can flip a near tie of the second-vertex rule, so
    the converged runs are compared by the rule on every point and by their objective."""
    problem = rbf_problem(m=120)
    if sparse:
        problem = SimplexProblem(sparse_copy(problem.X), problem.y, 1 / problem.inv_c, problem.kernel)
    Q = problem.dense_Q()

    def run(track, max_iter):
        # 20 m draws: every point is checked before a stage ends (P(a point is missed) ~ e^-20)
        options = SolverOptions(ball_rule=rule, stopping="mn", eps=1e-4, draws=20 * problem.n_points, probe=1,
                                seed=3, second_vertex="imdm", block_search=False, track_every_point=track,
                                max_iter=max_iter)
        return dense_alpha(run_engine(problem, options), problem.n_points)

    np.testing.assert_allclose(run(True, 20), run(False, 20), rtol=1e-12, atol=1e-15)
    objectives = []
    for track in (True, False):
        alpha = run(track, 100_000)
        w2 = alpha @ Q @ alpha
        assert (Q @ alpha).min() >= violation_threshold(STOPPING_CODE["mn"], w2, Q[0, 0], 1e-4) - 1e-9 * w2
        objectives.append(w2)
    assert objectives[0] == pytest.approx(objectives[1], rel=1e-3)


def test_tracking_applies_when_the_rows_of_q_and_the_gram_fit_the_budget():
    problem = rbf_problem(m=100)
    assert tracks_every_point(problem, 2 * 100 * 100 * 8)
    assert not tracks_every_point(problem, 2 * 100 * 100 * 8 - 1)
