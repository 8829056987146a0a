"""Kernel rows computed per step instead of a stored Gram (few-feature binary RBF problems, large core sets)."""

import threading

import numba
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics.pairwise import rbf_kernel

import coresvm.kernels as kernels_module
import coresvm.solvers.core_gram as core_gram
import coresvm.solvers.core_set as core_set_module
from coresvm.kernels import FUSED_MAX_FEATURES, KernelSpec, limit_kernel_threads, parallel_loop_threads
from coresvm.problem import SimplexProblem
from coresvm.solvers.core_gram import CoreSetState, append_points, computable_rows, computed_gradient
from coresvm.solvers.core_steps import (
    NO_HELPER,
    NO_LINEAR_TERM,
    ROWS_STORED,
    STOP_RELATIVE_GAP,
    inner_solve,
    kernel_row,
)
from coresvm.solvers.driver import SolverOptions, run_engine
from coresvm.solvers.engine import SECOND_IMDM


def noisy_xor(m: int, seed: int, d: int = 2):
    rng = np.random.RandomState(seed)
    X = rng.randn(m, d)
    y = np.where(X[:, 0] * X[:, 1] + 0.4 * rng.randn(m) > 0, 1.0, -1.0)
    return X, y


def one_hot_rows(m: int, seed: int, n_continuous: int = 6, n_categories: int = 30):
    """Rows of ``n_continuous`` features in [0, 1] and one of ``n_categories`` one-hot columns (the layout of forest
    cover types, min-max scaled): most features are zero.  The label depends on both parts."""
    rng = np.random.RandomState(seed)
    continuous = rng.rand(m, n_continuous)
    category = rng.randint(0, n_categories, m)
    X = np.hstack([continuous, np.eye(n_categories)[category]])
    y = np.where(np.sin(6 * continuous[:, 0]) + (category % 3 - 1) + 0.3 * rng.randn(m) > 0, 1.0, -1.0)
    return X, y


def computed_core(problem, points, alpha):
    """A core set on ``points`` (weights ``alpha``) switched to computed rows."""
    core = CoreSetState.growable(2**26, 1e-2, max_points=problem.n_points)
    append_points(problem, core, points, alpha)
    core.compute_rows_from(problem)
    return core


def computed_q(core, n: int) -> np.ndarray:
    """The core set's ``Q`` as its steps take it: computed float32 rows, the diagonal in float64."""
    rows = np.empty((n, n), dtype=np.float32)
    for i in range(n):
        kernel_row(core.computed_rows, core.diag, i, n, rows[i])
    return rows.astype(np.float64) + np.diag(core.diag[:n] - np.diagonal(rows))


def exact_q(X, y, C, points, gamma):
    """Q = (K + 1) y y' + diag(1/C) on ``points``, in float64."""
    return ((rbf_kernel(X[points], gamma=gamma) + 1.0) * np.outer(y[points], y[points])
            + np.diag(1.0 / C[points]))


@pytest.mark.parametrize("d", [2, 20, core_gram.COMPUTED_ROWS_MAX_FEATURES, "one-hot"])
def test_computed_rows_are_the_extended_kernel_and_exactly_symmetric(d):
    """Dense rows by their differences, mostly-zero ones over their nonzero features and the norms: either way the
    extended kernel, symmetric bit for bit."""
    X, y = one_hot_rows(300, 0) if d == "one-hot" else noisy_xor(300, 0, d)
    C = np.full(300, 10.0)
    gamma = 1.4 / (8.0 if d == "one-hot" else d)  # exponents of about -2.8 on average, as gamma = 1 / d on
    problem = SimplexProblem(X, y, C, KernelSpec("rbf", gamma))  # standardized data
    points = np.random.default_rng(0).permutation(300)[:200]
    core = computed_core(problem, points, np.full(200, 1 / 200))
    assert core.rows_computed and core.gram.size == 0
    norms = core.computed_rows[4]
    assert len(norms) == (core.capacity if d == "one-hot" else 0)
    if d == "one-hot":
        features = problem.rows_of(points)
        assert np.count_nonzero(features) <= core_gram.NONZERO_SHARE_FOR_NORMS * features.size
        np.testing.assert_allclose(norms[:200], np.einsum("ij,ij->i", features, features), rtol=1e-6)
    rows = np.empty((200, 200), dtype=np.float32)
    for i in range(200):
        kernel_row(core.computed_rows, core.diag, i, 200, rows[i])
    np.testing.assert_allclose(rows, exact_q(X, y, C, points, gamma), atol=2e-6)
    np.testing.assert_array_equal(rows, rows.T)


def test_computed_gradient_is_q_times_the_weights():
    X, y = noisy_xor(300, 1)
    C = np.full(300, 3.0)
    problem = SimplexProblem(X, y, C, KernelSpec("rbf", 1.3))
    alpha = np.random.default_rng(1).random(300)
    alpha /= alpha.sum()
    core = computed_core(problem, np.arange(300), alpha)
    G = np.empty(50)
    computed_gradient(core.computed_rows, core.diag, core.alpha, 300, 100, 150, G)
    # float32 entries: errors up to ~1e-7 of the terms' sum
    np.testing.assert_allclose(G, (exact_q(X, y, C, np.arange(300), 1.3) @ alpha)[100:150], rtol=0, atol=5e-7)


def test_pairwise_steps_on_computed_rows_take_the_stored_grams_steps():
    """The same entries stored or computed, on one thread or shared among two or three: the same steps, bit for
    bit."""
    X, y = noisy_xor(500, 2)
    problem = SimplexProblem(X, y, np.full(500, 100.0), KernelSpec("rbf", 2.0))
    core = computed_core(problem, np.arange(500), np.full(500, 1 / 500))
    stored = np.empty((500, 500), dtype=np.float32)
    for i in range(500):
        kernel_row(core.computed_rows, core.diag, i, 500, stored[i])
    results = []
    for gram, rows, row_threads in ((stored, ROWS_STORED, 1), (stored[:0], core.computed_rows, 1),
                                    (stored[:0], core.computed_rows, 2), (stored[:0], core.computed_rows, 3)):
        alpha = np.full(500, 1 / 500)
        G = stored.astype(np.float64) @ alpha + alpha * (core.diag[:500] - np.diagonal(stored))
        steps, gap = inner_solve(gram, alpha, G, core.diag, 500, 0.0, SECOND_IMDM, 0.0, 1.0, 1e-4, 20_000, np.inf,
                                 np.zeros(0), STOP_RELATIVE_GAP, NO_LINEAR_TERM, 0.0, 0.0, rows, row_threads, NO_HELPER)
        results.append((steps, gap, alpha, G))
    assert results[0][0] > 100
    for other in results[1:]:
        assert other[0] == results[0][0]
        for stored_value, computed_value in zip(results[0][1:], other[1:], strict=True):
            np.testing.assert_array_equal(stored_value, computed_value)


def test_parallel_rows_take_this_threads_limit_and_need_tbb(monkeypatch):
    assert 1 <= parallel_loop_threads() <= numba.get_num_threads()
    with limit_kernel_threads(1):  # a parallel one-vs-one worker's
        assert parallel_loop_threads() == 1
    monkeypatch.setattr(kernels_module, "_tbb_threading_layer", lambda: False)
    assert parallel_loop_threads() == 1


def test_two_solves_with_rows_shared_among_threads_run_at_once():
    """Parallel one-vs-one fits and user threads may run parallel steps at the same time (TBB's layer allows it):
    each takes the steps it takes alone."""
    if parallel_loop_threads() < 2:
        pytest.skip("parallel steps need two threads and Numba's TBB threading layer")
    X, y = noisy_xor(3000, 4)
    problem = SimplexProblem(X, y, np.full(3000, 10.0), KernelSpec("rbf", 1.0))
    core = computed_core(problem, np.arange(3000), np.full(3000, 1 / 3000))
    start_G = core.G[:3000].copy()

    def solve(row_threads: int, out: list) -> None:
        alpha, G = np.full(3000, 1 / 3000), start_G.copy()
        steps, _ = inner_solve(np.zeros((0, 0), dtype=np.float32), alpha, G, core.diag, 3000, 0.0, SECOND_IMDM, 0.0,
                               1.0, 1e-5, 30_000, np.inf, np.zeros(0), STOP_RELATIVE_GAP, NO_LINEAR_TERM, 0.0, 0.0,
                               core.computed_rows, row_threads, NO_HELPER)
        out.append((steps, alpha))

    alone: list = []
    solve(1, alone)
    together: list = []
    threads = [threading.Thread(target=solve, args=(2, together)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(together) == 2 and alone[0][0] > 1000
    for steps, alpha in together:
        assert steps == alone[0][0]
        np.testing.assert_array_equal(alpha, alone[0][1])


@pytest.mark.parametrize("one_hot", [False, True])
def test_compaction_and_growth_carry_the_computed_rows_features(one_hot):
    X, y = one_hot_rows(400, 3) if one_hot else noisy_xor(400, 3)
    problem = SimplexProblem(X, y, np.full(400, 10.0), KernelSpec("rbf", 1.0))
    core = CoreSetState.empty(64, np.float32)
    core.limit = 64  # a full core set: it must grow by doubling once its rows are computed
    append_points(problem, core, np.arange(64), np.r_[np.full(32, 1 / 32), np.zeros(32)])
    core.compute_rows_from(problem)
    assert core.capacity == 64 and core.limit == 400
    core.compact()
    core.reserve(200)
    append_points(problem, core, np.arange(100, 300), np.zeros(200))
    points = core.points[: core.size]
    assert core.size == 232 and core.capacity >= 232
    features_t, signs, _, _, norms = core.computed_rows
    np.testing.assert_array_equal(features_t[:, :232], problem.rows_of(points).T.astype(np.float32))
    np.testing.assert_array_equal(signs[:232], y[points])
    if one_hot:  # the squared norms move with the points and grow with the arrays
        assert len(norms) == core.capacity
        np.testing.assert_allclose(norms[:232], np.einsum("ij,ij->j", features_t[:, :232], features_t[:, :232]),
                                   rtol=1e-6)
    else:
        assert len(norms) == 0
    Q = exact_q(X, y, np.full(400, 10.0), points, 1.0)
    np.testing.assert_allclose(core.G[:232], Q @ core.alpha[:232], rtol=0, atol=5e-7)


def test_only_dense_binary_rbf_problems_of_few_features_compute_their_rows():
    X, y = noisy_xor(100, 4)
    rbf = KernelSpec("rbf", 1.0)
    C = np.full(100, 1.0)
    assert computable_rows(SimplexProblem(X, y, C, rbf), np.float32)
    assert not computable_rows(SimplexProblem(X, y, C, rbf), np.float64)  # tol < 1e-3: a float64 Gram
    assert not computable_rows(SimplexProblem(sp.csr_matrix(X), y, C, rbf), np.float32)
    assert not computable_rows(SimplexProblem(X, y, C, KernelSpec("poly", 1.0, degree=2)), np.float32)
    several, _ = noisy_xor(100, 4, d=20)
    assert computable_rows(SimplexProblem(several, y, C, rbf), np.float32)
    wide, _ = noisy_xor(100, 4, d=core_gram.COMPUTED_ROWS_MAX_FEATURES + 1)
    assert not computable_rows(SimplexProblem(wide, y, C, rbf), np.float32)


@pytest.mark.parametrize("C, d", [(1.0, 2), (100.0, 2), (1.0, 20), (1.0, "one-hot")])
def test_core_set_past_the_threshold_computes_its_rows_and_reaches_the_optimum(monkeypatch, C, d):
    """With rows computed from 150 core points on (Newton steps need the stored Gram, so only pairwise steps
    follow), the core-set loop still ends within ``tol`` of the optimum, its gradient still ``Q a``.  New points'
    ``G`` is their candidate score, which adds the bias in float64 where the float32 rows round ``k + bias``: so ``G``
    is compared with the exact ``Q a`` and must be as close to it as the rows' own product (2e-6 of max |G| at
    C = 1, 6e-5 at C = 100).  With 20 features the same holds for candidates scored by BLAS products."""
    from scipy.optimize import minimize

    m = 600
    # 20 features, or 36 mostly zero: the candidates are scored by BLAS products, not the fused loop
    X, y = one_hot_rows(m, 5) if d == "one-hot" else noisy_xor(m, 5, d)
    gamma = 1.0 if d == "one-hot" else 4.0 / d
    problem = SimplexProblem(X, y, np.full(m, C), KernelSpec("rbf", gamma=gamma), bias=True, lam=0.0)
    Q = problem.dense_Q()
    star = minimize(lambda a: a @ Q @ a, np.full(m, 1 / m), jac=lambda a: 2 * Q @ a,
                    bounds=[(0, None)] * m, constraints=({"type": "eq", "fun": lambda a: a.sum() - 1},),
                    method="SLSQP", options={"ftol": 1e-16, "maxiter": 3000})
    monkeypatch.setattr(core_set_module, "COMPUTED_ROWS_FROM", 150)
    monkeypatch.setattr(core_set_module, "NEWTON_GRAM_POINTS", 150)  # past 150 points whether or not a Newton step paid
    solve, drift = core_set_module._solve_core, []

    checked_norms = []

    def checked(core, n, *args):
        result = solve(core, n, *args)
        if core.rows_computed and not checked_norms:
            checked_norms.append(len(core.computed_rows[4]) > 0)
        if core.rows_computed:
            points, a = core.points[:n], core.alpha[:n]
            exact, rows = Q[np.ix_(points, points)] @ a, computed_q(core, n) @ a
            scale = np.abs(exact).max()
            drift.append((np.abs(core.G[:n] - exact).max() / scale, np.abs(rows - exact).max() / scale))
        return result

    monkeypatch.setattr(core_set_module, "_solve_core", checked)
    tol = 1e-2
    result = run_engine(problem, SolverOptions(core_set=True, n_candidates=100, max_add=20, tol=tol, seed=0))
    a = np.zeros(m)
    a[result.support] = result.alpha
    f = a @ Q @ a
    assert result.status == "converged" and result.phases["rows_computed"]
    assert checked_norms == [d == "one-hot"]
    # Scores by BLAS products (more than FUSED_MAX_FEATURES features) expand |a - b|^2 in float32 and round more
    # than the rows' direct form: 1.9 times the rows' error (2.4e-6 of max |G|) with 20 features.
    factor = 1.5 if X.shape[1] <= FUSED_MAX_FEATURES else 3.0
    assert len(drift) >= 2 and all(of_g <= factor * of_rows + 1e-9 for of_g, of_rows in drift)
    assert f - star.fun <= tol * 2.0 * f


@pytest.mark.parametrize("newton_paid", [False, True])
def test_growth_past_the_threshold_drops_the_gram_later_once_newton_steps_paid(monkeypatch, newton_paid):
    from coresvm.solvers.core_set import _grow

    X, y = noisy_xor(400, 6)
    problem = SimplexProblem(X, y, np.full(400, 10.0), KernelSpec("rbf", 1.0))
    core = CoreSetState.growable(2**26, 1e-2, max_points=400)
    append_points(problem, core, np.arange(100), np.full(100, 0.01))
    in_core = np.zeros(400, dtype=bool)
    in_core[:100] = True
    monkeypatch.setattr(core_set_module, "COMPUTED_ROWS_FROM", 150)
    monkeypatch.setattr(core_set_module, "NEWTON_GRAM_POINTS", 250)
    assert _grow(problem, core, in_core, np.arange(100, 140), newton_paid) == 40
    assert not core.rows_computed  # 140 points: below the threshold
    assert _grow(problem, core, in_core, np.arange(140, 200), newton_paid) == 60
    assert core.rows_computed != newton_paid and (core.gram.size == 0) != newton_paid  # 200 points
    assert _grow(problem, core, in_core, np.arange(200, 260), newton_paid) == 60
    assert core.rows_computed and core.gram.size == 0  # 260 points: past NEWTON_GRAM_POINTS either way
    np.testing.assert_allclose(core.G[:260], exact_q(X, y, np.full(400, 10.0), np.arange(260), 1.0)
                               @ core.alpha[:260], rtol=0, atol=5e-7)


@pytest.mark.parametrize("n_idle, compacted", [(1000, False), (1400, True)])
def test_computed_core_sets_keep_idle_points_up_to_twice_the_active_ones(n_idle, compacted):
    """No Gram to grow or compact: idle points stay up to IDLE_SHARE_COMPUTED (2) x the active ones (+256)."""
    from coresvm.solvers.core_set import _grow

    X, y = noisy_xor(4000, 7)
    problem = SimplexProblem(X, y, np.full(4000, 10.0), KernelSpec("rbf", 1.0))
    core = computed_core(problem, np.arange(1000 + n_idle), np.r_[np.full(1000, 1e-3), np.zeros(n_idle)])
    in_core = np.zeros(4000, dtype=bool)
    in_core[: 1000 + n_idle] = True
    assert _grow(problem, core, in_core, np.arange(3000, 3010)) == 10
    assert core.size == (1010 if compacted else 1010 + n_idle) and in_core.sum() == core.size
