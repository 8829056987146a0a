"""The default core-set solver's parts: growth, the statistical stopping rule, float32 scoring, cache_size='auto'."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

import coresvm.solvers.sampling as sampling_module
import coresvm.svc as svc_module
from coresvm import CoreSVC
from coresvm.kernels import KernelSpec, kernel_product
from coresvm.problem import SimplexProblem
from coresvm.solvers.core_set import draws_to_pass, violator_upper_bound
from coresvm.solvers.core_steps import (
    EXTREME_BLOCK,
    PLAIN_SCAN_MAX,
    duality_gap_weights,
    imdm_values,
    l2svm_duality_gap,
    select_second_vertex,
)
from coresvm.solvers.driver import SolverOptions, run_engine
from coresvm.solvers.engine import SECOND_VERTEX_RULES
from coresvm.solvers.sampling import NEAR_MARGIN_SHARE, NEAR_MARGIN_VIOLATORS, NearMarginPoints


def noisy_xor(m: int, seed: int):
    rng = np.random.RandomState(seed)
    X = rng.randn(m, 2)
    y = np.where(X[:, 0] * X[:, 1] + 0.4 * rng.randn(m) > 0, 1.0, -1.0)
    return X, y


def violator_fraction(problem: SimplexProblem, support, alpha, tol: float) -> float:
    """The exact share of all points that violate the margin by more than ``tol`` (the rule's own measure)."""
    a = np.zeros(problem.n_points)
    a[support] = alpha
    Q = problem.dense_Q()
    G = Q @ a
    diag = np.diag(Q)
    lam = problem.lam
    n2, D = a @ G, a @ diag
    scale = 2.0 * n2 if lam == 0.0 else D - n2
    threshold = n2 - 0.5 * lam * D - 0.5 * tol * scale
    return float(np.mean(G - 0.5 * lam * diag < threshold))


def test_violator_upper_bound_is_the_clopper_pearson_bound():
    assert draws_to_pass(1e-3) == 2995  # ln(0.05) / ln(1 - 1e-3): the rule of three
    assert violator_upper_bound(0, 2995) == pytest.approx(1e-3, rel=1e-3)
    bounds = [violator_upper_bound(k, 10_000) for k in range(6)]
    assert all(a < b for a, b in zip(bounds, bounds[1:], strict=False))
    assert violator_upper_bound(4, 10_000) < 1e-3 < violator_upper_bound(5, 10_000)
    assert violator_upper_bound(7, 7) == 1.0


@pytest.mark.parametrize("seed", range(4))
def test_statistical_stop_leaves_fewer_violators_than_it_promises(seed):
    """With 95% confidence fewer than ``violator_fraction`` of all points violate by more than ``tol``: on a
    problem whose every point's gradient is computed exactly afterwards, the promise holds (4 seeds)."""
    X, y = noisy_xor(3000, seed)
    problem = SimplexProblem(X, y, np.full(3000, 100.0), KernelSpec("rbf", gamma=2.0), bias=True, lam=1.0)
    tol, promised = 1e-3, 0.01
    options = SolverOptions(core_set=True, n_candidates=400, max_add=20, growth=1.0, core_set_stop="sample",
                            violator_fraction=promised, tol=tol, second_vertex="imdm", seed=seed)
    result = run_engine(problem, options)
    assert result.status == "converged"
    assert violator_fraction(problem, result.support, result.alpha, tol) <= promised
    # ... and the rule is not idle: the solution of the first core set alone leaves many more violators.
    first = run_engine(problem, SolverOptions(core_set=True, n_candidates=400, max_add=20, tol=tol, max_iter=50,
                                              seed=seed))
    assert violator_fraction(problem, first.support, first.alpha, tol) > 5 * promised


def test_growth_reaches_many_support_vectors_in_few_rounds():
    X, y = noisy_xor(3000, 0)
    problem = SimplexProblem(X, y, np.full(3000, 100.0), KernelSpec("rbf", gamma=2.0), bias=True, lam=1.0)
    common = dict(core_set=True, n_candidates=1000, max_add=5, core_set_stop="sample", violator_fraction=0.01,
                  tol=1e-3, second_vertex="imdm", seed=0)
    fixed = run_engine(problem, SolverOptions(**common))
    doubling = run_engine(problem, SolverOptions(growth=1.0, **common))
    assert fixed.status == doubling.status == "converged"
    assert len(doubling.support) > 100
    assert doubling.rounds < 0.7 * fixed.rounds


@pytest.mark.parametrize("sparse", [False, True])
def test_float32_kernel_product_matches_float64(sparse):
    import scipy.sparse as sp

    rng = np.random.RandomState(0)
    A, B = rng.rand(700, 9), rng.rand(300, 9)
    if sparse:
        A[A < 0.5] = 0.0
        A = sp.csr_matrix(A)
    coef = rng.randn(300)
    for spec in (KernelSpec("rbf", gamma=0.7), KernelSpec("rbf", gamma=20.0), KernelSpec("poly", gamma=0.5,
                                                                                         coef0=1.0, degree=2)):
        exact = kernel_product(A, B, spec, coef)
        fast = kernel_product(A, B, spec, coef, precision=np.float32)
        assert fast.dtype == np.float64
        np.testing.assert_allclose(fast, exact, rtol=1e-4, atol=1e-5 * np.abs(coef).sum())


def test_float32_kernel_product_takes_the_direct_form_far_from_the_origin():
    # g |b|^2 = 0.5 * 400 > 80: exp(-g |b|^2) underflows float32, so the factorized form must not be used.
    rng = np.random.RandomState(1)
    A, B = 20.0 + rng.rand(50, 2), 20.0 + rng.rand(40, 2)
    coef = rng.rand(40)
    spec = KernelSpec("rbf", gamma=0.5)
    np.testing.assert_allclose(kernel_product(A, B, spec, coef, precision=np.float32),
                               kernel_product(A, B, spec, coef), rtol=1e-4)


def test_auto_cache_size_converges_where_a_fixed_budget_fills(monkeypatch):
    monkeypatch.setattr(svc_module, "SMALL_PROBLEM_FAST_PATH", False)  # the core-set loop, not the dense path
    X, y = noisy_xor(2000, 3)
    tiny = 64 * 64 * 4 / 2**20  # a 64-point core set; the problem has hundreds of support vectors
    with pytest.warns(ConvergenceWarning, match="Increase cache_size"):
        full = CoreSVC(C=100.0, gamma=2.0, cache_size=tiny, random_state=0).fit(X, y)
    assert full.solver_info_[0]["status"] == "core_set_full"
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        auto = CoreSVC(C=100.0, gamma=2.0, random_state=0).fit(X, y)
    assert auto.cache_size == "auto"
    assert auto.solver_info_[0]["status"] == "converged" and len(auto.support_) > 64
    assert auto.score(X, y) > full.score(X, y)


def test_float32_kernel_product_never_overflows_between_two_moderate_norms():
    # g |a|^2 = g |b|^2 = 60 each stay below the float32 limit, but exp(2g <a, b>) = exp(120) would overflow.
    rng = np.random.RandomState(2)
    A = np.full((30, 2), np.sqrt(30.0)) + 0.01 * rng.rand(30, 2)
    B = np.full((20, 2), np.sqrt(30.0)) + 0.01 * rng.rand(20, 2)
    coef = rng.rand(20)
    spec = KernelSpec("rbf", gamma=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        fast = kernel_product(A, B, spec, coef, precision=np.float32)
    np.testing.assert_allclose(fast, kernel_product(A, B, spec, coef), rtol=1e-4)


def test_cache_budgets_fixed_and_auto(monkeypatch):
    import coresvm.cache as cache_module

    assert cache_module.cache_budgets(50) == (50 * 2**20, 50 * 2**20)
    assert cache_module.available_memory_bytes() > 0
    monkeypatch.setattr(cache_module, "available_memory_bytes", lambda: 8 * 2**30)
    assert cache_module.cache_budgets("auto") == (200 * 2**20, 4 * 2**30)  # half of the available memory
    assert cache_module.cache_budgets("auto", 4) == (200 * 2**20, 2**30)  # ... shared by four core sets
    assert cache_module.cache_budgets(50, 4) == (50 * 2**20, 50 * 2**20)  # a given size is each one's
    monkeypatch.setattr(cache_module, "available_memory_bytes", lambda: 2**20)
    assert cache_module.cache_budgets("auto") == (200 * 2**20, 200 * 2**20)  # never below the kernel budget


@pytest.mark.parametrize("seed", range(3))
def test_l2svm_duality_gap_bounds_the_distance_to_the_optimum(seed):
    """``f(a) - f* <= l2svm_duality_gap(a) <= the Frank-Wolfe gap`` at random points of the simplex, and the gap
    vanishes at the optimum (per-sample C: the water-filling weights differ)."""
    from scipy.optimize import minimize

    X, y = noisy_xor(80, seed)
    rng = np.random.RandomState(seed)
    C = 50.0 * rng.uniform(0.5, 2.0, size=80)
    problem = SimplexProblem(X, y, C, KernelSpec("rbf", gamma=1.0), bias=True, lam=0.0)
    Q = problem.dense_Q()
    inv_c = 1.0 / C
    star = minimize(lambda a: a @ Q @ a, np.full(80, 1 / 80), jac=lambda a: 2 * Q @ a, bounds=[(0, None)] * 80,
                    constraints=({"type": "eq", "fun": lambda a: a.sum() - 1},), method="SLSQP",
                    options={"ftol": 1e-15, "maxiter": 1000})
    f_star = star.fun
    for _ in range(20):
        a = rng.dirichlet(np.full(80, 0.3)) * (rng.rand(80) < 0.5)
        a /= a.sum()
        G = Q @ a
        f = a @ G
        gap = l2svm_duality_gap(a, G, inv_c, 80)
        assert f - f_star <= gap * (1 + 1e-9) + 1e-15
        assert gap <= 2.0 * (f - G.min()) * (1 + 1e-9) + 1e-15
    a = np.maximum(star.x, 0.0)
    a /= a.sum()
    assert l2svm_duality_gap(a, Q @ a, inv_c, 80) <= 1e-6 * f_star


def test_core_set_at_large_c_stops_by_the_duality_gap_within_tol_of_the_optimum():
    """At large C the duality gap ends the inner solves long before the Frank-Wolfe gap would; the objective
    is still within the relative gap ``tol`` of the optimum (both gaps are relative to ``2 a'Qa``)."""
    from scipy.optimize import minimize

    X, y = noisy_xor(400, 3)
    problem = SimplexProblem(X, y, np.full(400, 1e3), KernelSpec("rbf", gamma=2.0), bias=True, lam=0.0)
    Q = problem.dense_Q()
    star = minimize(lambda a: a @ Q @ a, np.full(400, 1 / 400), jac=lambda a: 2 * Q @ a,
                    bounds=[(0, None)] * 400, constraints=({"type": "eq", "fun": lambda a: a.sum() - 1},),
                    method="SLSQP", options={"ftol": 1e-16, "maxiter": 3000})
    tol = 1e-2
    options = SolverOptions(core_set=True, n_candidates=100, max_add=20, tol=tol, seed=0)
    result = run_engine(problem, options)
    a = np.zeros(400)
    a[result.support] = result.alpha
    f = a @ Q @ a
    assert result.status == "converged"
    assert f - star.fun <= tol * 2.0 * f


def test_fit_time_stays_nearly_flat_from_c_to_1024_c():
    """The default solver's fit at C x 1024 costs at most 3x its fit at C (CPU seconds; 12,000-point checkerboard,
    the core-set path: measured 1.1-1.6x).  Far more pairwise steps at large C (76x here), but fewer support
    vectors, and the duality gap ends the inner solves before the slowest point's margin is exact."""
    import time

    from coresvm.datasets import make_checkerboard

    X, y = make_checkerboard(12_000, random_state=0)
    CoreSVC(C=10.0, gamma=2.0, random_state=0).fit(X[:6000], y[:6000])  # compile (or load) first
    seconds = {}
    for C in (10.0, 10240.0):
        start = time.process_time()
        model = CoreSVC(C=C, gamma=2.0, random_state=0).fit(X, y)
        seconds[C] = time.process_time() - start
        assert model.solver_info_[0]["status"] == "converged"
        assert model.score(X, y) > 0.97
    assert seconds[10240.0] <= 3.0 * seconds[10.0], seconds


def test_duality_gap_weights_only_for_the_l2svm_at_float32_tolerances():
    inv_c = np.full(5, 0.01)
    np.testing.assert_array_equal(duality_gap_weights(inv_c, 1e-2, 0.0), inv_c)
    assert duality_gap_weights(inv_c, 1e-3, 0.0).shape == (5,)
    assert duality_gap_weights(inv_c, 1e-4, 0.0).shape == (0,)  # tight: the Frank-Wolfe gap alone
    assert duality_gap_weights(inv_c, 1e-2, 1.0).shape == (0,)  # the MEB form has no such gap


def test_l2svm_duality_gap_falls_back_to_the_whole_frank_wolfe_gap_at_a_hard_margin_point():
    """A point with 1/C = 0 anywhere (here the first): the Frank-Wolfe gap over every point, not a partial one."""
    alpha = np.array([0.2, 0.3, 0.5])
    G = np.array([1.0, 0.4, 0.9])
    inv_c = np.array([0.0, 0.1, 0.1])
    assert l2svm_duality_gap(alpha, G, inv_c, 3) == pytest.approx(2.0 * (alpha @ G - G.min()))


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("gamma", [0.5, 200.0])  # 200: exponents too large for the factorized RBF form
@pytest.mark.parametrize("tol", [1e-2, 1e-4])  # float32 and float64 Gram
def test_core_set_gram_equals_the_extended_kernel(sparse, gamma, tol):
    """Two growths of a core set: its Gram is Q = (K + 1) y y' + diag(1/C) on its points, within the precision."""
    import scipy.sparse as sp
    from sklearn.metrics.pairwise import rbf_kernel

    from coresvm.kernels import KernelSpec
    from coresvm.problem import SimplexProblem
    from coresvm.solvers.core_gram import CoreSetState, append_points

    rng = np.random.default_rng(0)
    X = rng.random((300, 6))
    X[X < 0.4] = 0.0
    y = np.where(rng.random(300) < 0.5, 1.0, -1.0)
    C = np.full(300, 10.0)
    problem = SimplexProblem(sp.csr_matrix(X) if sparse else X, y, C, KernelSpec("rbf", gamma))
    core = CoreSetState.growable(2**30, tol, max_points=300, initial=64)
    order = rng.permutation(300)
    append_points(problem, core, order[:50], np.full(50, 0.02))
    core.reserve(150)
    append_points(problem, core, order[50:200], np.zeros(150))
    points = core.points[: core.size]
    Q = (rbf_kernel(X[points], gamma=gamma) + 1.0) * np.outer(y[points], y[points]) + np.diag(1.0 / C[points])
    atol = 2e-5 if core.gram.dtype == np.float32 else 1e-12
    gram = core.gram[: core.size, : core.size]
    np.testing.assert_allclose(gram, Q, atol=atol)
    # Exactly symmetric: the pairwise steps update G = Qa from rows, the exact products from columns.
    np.testing.assert_array_equal(gram, gram.T)


def test_rows_far_from_the_origin_get_the_same_float32_gram_accuracy():
    """The float32 Gram computes |a - b|^2 from the norms: rows offset by 1,000 would lose every digit of a
    kernel value to rounding unless the problem centers them (translation leaves the RBF kernel unchanged)."""
    from sklearn.metrics.pairwise import rbf_kernel

    from coresvm.kernels import KernelSpec
    from coresvm.problem import SimplexProblem
    from coresvm.solvers.core_gram import CoreSetState, append_points

    rng = np.random.default_rng(1)
    X = rng.random((200, 3)) + 1000.0
    y = np.where(rng.random(200) < 0.5, 1.0, -1.0)
    problem = SimplexProblem(X, y, np.full(200, 10.0), KernelSpec("rbf", 2.0), compact=True)
    assert np.abs(problem.X.mean(axis=0)).max() < 1e-9
    core = CoreSetState.growable(2**26, 1e-2, max_points=200, initial=64)
    append_points(problem, core, np.arange(200), np.full(200, 1 / 200))
    Q = (rbf_kernel(X, gamma=2.0) + 1.0) * np.outer(y, y) + np.eye(200) / 10.0
    np.testing.assert_allclose(core.gram[:200, :200], Q, atol=2e-5)


def test_only_dense_rbf_rows_off_the_origin_are_centered():
    import scipy.sparse as sp

    from coresvm.kernels import KernelSpec
    from coresvm.problem import centering_shift

    X = np.random.default_rng(0).random((50, 4))
    np.testing.assert_allclose(centering_shift(X + 5.0, KernelSpec("rbf", 1.0)), (X + 5.0).mean(axis=0))
    assert centering_shift(X - X.mean(axis=0), KernelSpec("rbf", 1.0)) is None  # already near the origin
    assert centering_shift(X + 5.0, KernelSpec("poly", 1.0, degree=2)) is None  # not translation-invariant
    assert centering_shift(sp.csr_matrix(X + 5.0), KernelSpec("rbf", 1.0)) is None  # centering would densify


def test_centering_keeps_the_zeros_of_mostly_zero_columns():
    """One-hot columns are not shifted (they stay zero where they were: computed rows skip zero features); the
    other columns are, when that alone at least halves the rows' mean squared norm."""
    from coresvm.kernels import KernelSpec
    from coresvm.problem import centering_shift

    rng = np.random.default_rng(1)
    continuous, one_hot = rng.random((400, 3)) + 5.0, np.eye(8)[rng.integers(0, 8, 400)]
    X = np.hstack([continuous, one_hot])
    shift = centering_shift(X, KernelSpec("rbf", 1.0))
    np.testing.assert_allclose(shift[:3], continuous.mean(axis=0))
    np.testing.assert_array_equal(shift[3:], 0.0)
    assert np.count_nonzero((X - shift)[:, 3:]) == 400
    # The whole mean would halve the mean squared norm here, the shift of the dense column alone does not: none.
    few = np.hstack([0.6 + 0.2 * rng.random((400, 1)), np.eye(3)[rng.integers(0, 3, 400)]])
    mean = few.mean(axis=0)
    assert 2 * mean @ mean > np.mean(np.sum(few * few, axis=1))
    assert centering_shift(few, KernelSpec("rbf", 1.0)) is None


def test_gradient_stays_the_gram_times_the_weights_through_a_large_c_fit(monkeypatch):
    """G = Qa is updated step by step from Gram rows (and Q's diagonal in float64): it must not drift from the product
    (an asymmetric Gram made it drift by 1e-3 of max|G| within one solve at C = 262,144 on ijcnn1)."""
    import coresvm.solvers.core_set as core_set_module
    from coresvm import CoreSVC
    from coresvm.datasets import make_checkerboard

    X, y = make_checkerboard(6000, random_state=0)
    solve = core_set_module._solve_core
    drift = []

    def checked(core, n, *args):
        result = solve(core, n, *args)
        exact = core.gram[:n, :n].astype(np.float64) @ core.alpha[:n]
        exact += core.alpha[:n] * (core.diag[:n] - np.diagonal(core.gram)[:n])  # the diagonal is taken in float64
        drift.append(np.abs(exact - core.G[:n]).max() / np.abs(exact).max())
        return result

    monkeypatch.setattr(core_set_module, "_solve_core", checked)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        CoreSVC(C=1e6, gamma=2.0, random_state=0, max_iter=300_000).fit(X, y)
    assert len(drift) > 3 and max(drift) < 1e-7  # 5e-10 with the symmetric Gram; 4e-4 without it


@pytest.mark.parametrize(("n", "k", "task"), [(150, 200, 70), (300, 600, 170), (700, 300, 2048)])
def test_mirror_new_rows_over_tasks_that_straddle_the_old_and_new_rows(n, k, task):
    """append_points' tasks cover old and new rows alike: every column of a new point becomes its row (sizes
    below, across and beyond several bands and tiles of the copy)."""
    from coresvm.solvers.core_gram import mirror_new_rows

    gram = np.random.default_rng(1).random((n + k, n + k)).astype(np.float32)
    before = gram.copy()
    for start in range(0, n + k, task):
        mirror_new_rows(gram, n, k, start, min(start + task, n + k))
    np.testing.assert_array_equal(gram[:, n:], gram[n:, :].T)
    np.testing.assert_array_equal(gram[:, :n], before[:, :n])
    np.testing.assert_array_equal(np.triu(gram[n:, n:]), np.triu(before[n:, n:]))  # the upper triangle is the source


def test_mirror_new_rows_makes_the_new_rows_block_symmetric():
    """Tiles that do not divide the sizes, and ranges of new rows as the threads' tasks; nothing else moves."""
    from coresvm.solvers.core_gram import mirror_new_rows

    n, k = 150, 200
    gram = np.random.default_rng(0).random((n + k, n + k)).astype(np.float32)
    before = gram.copy()
    for start in range(n, n + k, 70):
        mirror_new_rows(gram, n, k, start, min(start + 70, n + k))
    new = gram[n:, n:]
    np.testing.assert_array_equal(new, new.T)
    np.testing.assert_array_equal(np.triu(new), np.triu(before[n:, n:]))  # the upper triangle is the source
    np.testing.assert_array_equal(gram[:n], before[:n])
    np.testing.assert_array_equal(gram[n:, :n], before[n:, :n])


def test_growable_core_set_reserves_its_limit_and_falls_back_to_doubling_when_refused(monkeypatch):
    """The Gram is reserved at the budget's (or the problem's) size at once, so growth copies nothing; where the
    address space is refused it starts at ``initial`` points and doubles, never past the limit."""
    import coresvm.solvers.core_gram as core_gram_module
    from coresvm.solvers.core_gram import CoreSetState

    monkeypatch.setattr(core_gram_module, "address_space_is_lazy", lambda: True)
    core = CoreSetState.growable(2**30, 1e-2, max_points=3000, initial=64)
    assert core.capacity == core.limit == 3000
    budget = 2000 * 2000 * 4
    assert CoreSetState.growable(budget, 1e-2, max_points=10**6, initial=64).capacity == 2000

    original = core_gram_module.lazy_zeros

    def refuse_large(shape, dtype):
        if shape[0] > 64:
            raise MemoryError("address space refused")
        return original(shape, dtype)

    monkeypatch.setattr(core_gram_module, "lazy_zeros", refuse_large)
    core = CoreSetState.growable(2**30, 1e-2, max_points=100, initial=64)
    assert (core.capacity, core.limit) == (64, 100)
    monkeypatch.setattr(core_gram_module, "lazy_zeros", original)
    monkeypatch.setattr(core_gram_module, "address_space_is_lazy", lambda: False)  # strict overcommit: no reserving
    assert CoreSetState.growable(2**30, 1e-2, max_points=3000, initial=64).capacity == 64
    core.reserve(10)
    assert core.capacity == 64
    core.size = 60
    core.gram[:60, :60] = 1.0
    core.reserve(10)
    assert core.capacity == 100 and core.gram[:60, :60].min() == 1.0 and core.gram[60:].max() == 0.0


def test_gram_rows_avoid_lengths_with_a_large_power_of_two_factor(monkeypatch):
    """Core sets of 2,048 points or more get Gram rows of 8 (mod 16) values: 32,768 values per row slowed a growth's
    transposed copy 5-10x.  The capacity moves up by at most 15 points, never past the budget's, else down."""
    import coresvm.solvers.core_gram as core_gram_module
    from coresvm.solvers.core_gram import CoreSetState, budget_capacity, cache_friendly_capacity

    assert cache_friendly_capacity(32768, 10**6) == 32776
    assert cache_friendly_capacity(32768, 32768) == 32760
    assert cache_friendly_capacity(2000, 10**6) == 2000  # short rows stay as they are
    for capacity in range(2048, 2200):
        friendly = cache_friendly_capacity(capacity, capacity + 3)
        assert friendly % 16 == 8 and capacity - 16 < friendly <= capacity + 3
        assert cache_friendly_capacity(friendly, friendly) == friendly
    monkeypatch.setattr(core_gram_module, "address_space_is_lazy", lambda: True)
    core = CoreSetState.growable(2**33, 1e-2, max_points=32768)
    assert core.capacity == core.limit == 32776 and core.gram.shape == (32776, 32776)
    budget = 32768 * 32768 * 4
    core = CoreSetState.growable(budget, 1e-2, max_points=10**6)
    assert core.capacity == 32760 and core.gram.nbytes <= budget
    assert budget_capacity(budget, 1e-2) == 32760 and budget_capacity(2**33, 1e-2, 32768) == 32776


def test_mirror_new_rows_copies_the_new_rows_into_the_old_rows_columns():
    """Tiles that do not divide the sizes, and a start/stop range of old rows as one thread's task."""
    from coresvm.solvers.core_gram import mirror_new_rows

    n, k = 150, 70
    gram = np.zeros((n + k, n + k), dtype=np.float32)
    gram[n:, :] = np.random.default_rng(0).random((k, n + k))
    mirror_new_rows(gram, n, k, 0, 100)
    mirror_new_rows(gram, n, k, 100, n)
    np.testing.assert_array_equal(gram[:n, n:], gram[n:, :n].T)


BLOCKED_SIZES = [PLAIN_SCAN_MAX + 1, PLAIN_SCAN_MAX + EXTREME_BLOCK - 1, PLAIN_SCAN_MAX + EXTREME_BLOCK, 1000]


@pytest.mark.parametrize("n", [1, EXTREME_BLOCK + 1, PLAIN_SCAN_MAX, *BLOCKED_SIZES])
def test_imdm_partner_search_finds_the_first_largest_value_like_a_plain_scan(n):
    # IMDM's blocked search (each block's largest value taken in the values pass, then the first entry equal to the
    # best block's) must pick exactly what one scan of the values picks: the first position of the largest positive
    # value, ties included (a different pick would change the solver's path).  Entries past n must be ignored.
    from coresvm.solvers.engine import SECOND_IMDM

    rng = np.random.default_rng(n)
    for trial in range(30):
        size = n + 3
        # small integers and few weights: many equal values; trial 5: no point scores above the toward vertex
        G = rng.integers(0, 4, size=size).astype(float) if trial != 5 else np.zeros(size)
        row = rng.integers(-1, 2, size=size).astype(np.float32)
        alpha = rng.choice([0.0, 0.25, 0.5], size=size) if trial < 20 else rng.random(size) * (rng.random(size) > 0.3)
        diag = np.full(size, 3.0)
        G[n:], alpha[n:] = 10.0, 1.0  # past n: would win
        p_i = int(np.argmin(G[:n]))
        best = float(G[p_i])
        values, blocks = np.empty(n), np.empty(n // EXTREME_BLOCK + 1)
        imdm_values(row, alpha, G, diag, n, 0.0, diag[p_i], best, values, blocks)
        expected = int(np.argmax(values)) if values.max() > 0 else -1
        for work in (np.empty(n), np.empty(0)):  # a work space too short is replaced
            assert select_second_vertex(row, alpha, G, diag, n, 0.0, p_i, best, SECOND_IMDM, 0.5, work) == expected


@pytest.mark.parametrize("n", [0, 1, EXTREME_BLOCK + 1, *BLOCKED_SIZES])
@pytest.mark.parametrize("lam", [0.0, 0.5])
def test_update_pass_finds_the_toward_vertex_of_the_updated_gradient(n, lam):
    # Long core sets take each block's minimum during the update's pass: the new gradient and the toward vertex
    # (the first smallest score, ties included) must be those of the update followed by a scan.
    from coresvm.solvers.core_steps import _update_gradient_blocked

    rng = np.random.default_rng(n + int(10 * lam))
    for trial in range(20):
        m = max(n, 1)
        gram = rng.integers(-2, 3, size=(m, n + 3)).astype(np.float32)  # small integers: ties survive the update
        G = rng.integers(-3, 4, size=n + 3).astype(float) if trial < 15 else rng.permutation(n + 3) - n / 2.0
        diag = rng.integers(1, 3, size=n + 3).astype(float)
        i, j = int(rng.integers(m)), int(rng.integers(m))
        keep, step = (1.0, 0.5) if trial % 2 else (0.5, 1.0)
        expected = keep * G[:n] + step * gram[i, :n].astype(float) - step * gram[j, :n].astype(float)
        for t, step_t in ((i, step), (j, -step)):  # Q's diagonal is diag, not the Gram's (_diagonal_in_float64)
            if t < n:
                expected[t] += step_t * (diag[t] - float(gram[t, t]))
        scores = expected - 0.5 * lam * diag[:n]
        blocks = np.full(n // EXTREME_BLOCK + 1, np.nan)  # the work space's old contents must not count
        position, best, partner = _update_gradient_blocked(G, gram[i], gram[j], i, j, keep, step, -step, diag, n, lam,
                                                           blocks)
        np.testing.assert_array_equal(G[:n], expected)
        assert (position, best, partner) == ((int(np.argmin(scores)), scores.min(), -2) if n else (0, np.inf, -2))


@pytest.mark.parametrize("lam", [0.0, 0.5])
def test_imdm_values_are_the_clipped_decreases_of_the_pairwise_step(lam):
    # The values pass writes the decrease of the step clipped at the partner's weight (d^2 / 4c unclipped,
    # -(d a + c a^2) clipped) in terms of the score's excess h = -d / 2.  For the L2-SVM (lam = 0) the numbers must
    # be those formulas' bit for bit (the same partners, so the same path as before the rewrite); for lam != 0 close.
    from coresvm.solvers.steps import pairwise_direction, partner_value

    rng = np.random.default_rng(int(10 * lam))
    n = 600
    n_clipped = n_unclipped = 0
    for trial in range(20):
        A = rng.standard_normal((n, 3))
        K = np.exp(-0.5 * ((A[:, None, :] - A[None, :, :]) ** 2).sum(-1))
        gram = (K + np.eye(n) * rng.uniform(0.01, 1.0)).astype(np.float32)
        alpha = rng.dirichlet(np.ones(n)) * (rng.random(n) > 0.4)
        alpha /= alpha.sum()
        diag = np.diag(gram).astype(float)
        # near the optimum (scores close together) steps stop short of the partner's weight; far from it, clipped
        G = gram.astype(float) @ alpha if trial % 2 else 1.0 + 1e-5 * rng.random(n)
        scores = G - 0.5 * lam * diag
        p_i = int(np.argmin(scores))
        best = float(scores[p_i])
        values, blocks = np.empty(n), np.empty(n // EXTREME_BLOCK + 1)
        n_blocks = imdm_values(gram[p_i], alpha, G, diag, n, lam, diag[p_i], best, values, blocks)
        # each block's largest value (0 when none is positive), taken in the same pass
        starts = range(0, n, EXTREME_BLOCK)
        assert n_blocks == len(starts)
        np.testing.assert_array_equal(blocks[:n_blocks], [max(0.0, values[s:s + EXTREME_BLOCK].max()) for s in starts])
        expected = np.zeros(n)
        for t in range(n):
            d, c = pairwise_direction(G[p_i], G[t], diag[p_i], diag[t], float(gram[p_i, t]), lam)
            if alpha[t] > 0 and scores[t] > best and c > 0 and d < 0:
                a = alpha[t]
                unclipped = -d < 2.0 * c * a
                expected[t] = d * d / (4.0 * c) if unclipped else -(d * a + c * a * a)
                assert expected[t] == pytest.approx(partner_value(d, c, a, True, 0.5), rel=1e-12)
                n_unclipped += unclipped
                n_clipped += not unclipped
        if lam == 0.0:
            np.testing.assert_array_equal(values, expected)
        else:
            np.testing.assert_allclose(values, expected, rtol=1e-9, atol=1e-15 * expected.max())
    assert n_clipped > 100 and n_unclipped > 100


@pytest.mark.parametrize("n", [PLAIN_SCAN_MAX, *BLOCKED_SIZES])
@pytest.mark.parametrize("lam", [0.0, 0.5])
def test_mdm_partner_is_the_first_largest_active_score_above_the_toward_vertex(n, lam):
    # Long core sets search MDM's partner in blocks; short ones scan: both must pick the first active point of
    # the largest score above the toward vertex's (ties, no weight, the toward vertex itself, nothing above,
    # distinct values in every lane of a block, the winner in the last partial block).
    rng = np.random.default_rng(n + int(10 * lam))
    mdm = SECOND_VERTEX_RULES["mdm"]
    gram = np.zeros((1, 1), dtype=np.float32)  # MDM reads no Gram row
    for trial in range(40):
        distinct = trial >= 30
        G = (rng.permutation(n + 3) if distinct else rng.integers(-3, 4, size=n + 3)).astype(float)
        G[n:] = 10.0 * n  # past n: ignored
        alpha = np.where(rng.random(n + 3) < (0.02 if trial == 7 else 0.6), rng.random(n + 3), 0.0)
        diag = np.ones(n + 3) if distinct else rng.integers(1, 3, size=n + 3).astype(float)
        scores = G - 0.5 * lam * diag
        p_i = int(np.argmin(scores[:n]))
        best = float(scores[p_i])
        if trial == 3:
            alpha[:n] = np.where(scores[:n] == best, alpha[:n], 0.0)  # no active point above the toward vertex
        if trial == 5:  # the only active point above the toward vertex is the last one
            G[n - 1] = G[:n].max() + 1.0 + lam * diag[n - 1]
            scores = G - 0.5 * lam * diag
            p_i = int(np.argmin(scores[:n]))
            best = float(scores[p_i])
            alpha[: n - 1] = np.where(scores[: n - 1] == best, alpha[: n - 1], 0.0)
            alpha[n - 1] = 0.5
        if trial == 6:  # p_i itself holds the largest active score (a caller's best below its own score)
            alpha[:n] = np.where(alpha[:n] > 0, alpha[:n], 0.1)
            p_i = int(np.argmax(scores[:n]))
            best = float(scores[:n].min()) - 1.0
        above = [t for t in range(n) if alpha[t] > 0 and t != p_i and scores[t] > best]
        expected = max(above, key=lambda t: (scores[t], -t)) if above else -1
        assert select_second_vertex(gram[0], alpha, G, diag, n, lam, p_i, best, mdm, 1.0, G[:0]) == expected


def test_core_set_stops_growing_with_a_clear_warning_when_the_system_refuses_memory(monkeypatch):
    """A refused doubling (ulimit -v, strict overcommit) below the budget ends the fit as a full core set: the
    model so far is kept, the record says where, and the warning names the refusal, not the budget."""
    import coresvm.solvers.core_gram as core_gram_module
    from coresvm import CoreSVC

    original = core_gram_module.lazy_zeros

    def refuse_past_1024(shape, dtype):
        if shape[0] > 1024:
            raise MemoryError("address space refused")
        return original(shape, dtype)

    monkeypatch.setattr(core_gram_module, "address_space_is_lazy", lambda: False)
    monkeypatch.setattr(core_gram_module, "lazy_zeros", refuse_past_1024)
    monkeypatch.setattr(svc_module, "SMALL_PROBLEM_FAST_PATH", False)  # the core-set loop, not the dense path
    rng = np.random.default_rng(0)
    X = rng.normal(size=(4000, 2))
    y = np.where(X[:, 0] * X[:, 1] + 0.8 * rng.normal(size=4000) > 0, 1, -1)  # noisy XOR: most points are SVs
    with pytest.warns(ConvergenceWarning, match="refused the core set's Gram more memory at 1024 points"):
        model = CoreSVC(C=1.0, gamma=1.0, solver="coreset", cache_size=1000, random_state=0).fit(X, y)
    record = model.solver_info_[0]
    assert record["status"] == "core_set_full" and record["memory_refused_at"] == 1024
    assert len(model.support_) <= 1024 and model.score(X, y) > 0.6


def test_ball_gram_is_capped_at_the_problem_and_names_a_refusal(monkeypatch):
    import coresvm.solvers.core_gram as core_gram_module
    from coresvm.solvers.driver import ball_gram

    assert ball_gram(2**30, 1e-2, 300).shape == (300, 300)  # a 1 GiB budget, 300 points
    monkeypatch.setattr(core_gram_module, "lazy_zeros", lambda shape, dtype: (_ for _ in ()).throw(MemoryError()))
    with pytest.raises(MemoryError, match="could not be reserved: the system refused it"):
        ball_gram(2**30, 1e-2, 100_000)


def test_growth_drops_zero_weight_points_once_they_outnumber_a_quarter_of_the_active_ones():
    """The core set is compacted when it holds more than 1.25 x its active points (+256): not 2.25 x, as a slack of
    the round's allowance (growth x |active|) let it."""
    from coresvm.solvers.core_gram import CoreSetState, append_points
    from coresvm.solvers.core_set import _grow

    X, y = noisy_xor(4000, 5)
    problem = SimplexProblem(X, y, np.full(4000, 10.0), KernelSpec("rbf", gamma=1.0), bias=True, lam=0.0)

    def core_with(n_active: int, n_idle: int):
        core = CoreSetState.growable(2**28, 1e-2, max_points=4000)
        weights = np.r_[np.full(n_active, 1.0 / n_active), np.zeros(n_idle)]
        append_points(problem, core, np.arange(n_active + n_idle), weights)
        in_core = np.zeros(4000, dtype=bool)
        in_core[: n_active + n_idle] = True
        return core, in_core

    core, in_core = core_with(1000, 1000)
    assert _grow(problem, core, in_core, np.arange(3000, 3010)) == 10
    assert core.size == 1010 and in_core.sum() == 1010 and not in_core[1000:2000].any()
    assert np.array_equal(core.points[:1010], np.r_[np.arange(1000), np.arange(3000, 3010)])
    G = core.gram[:1010, :1010].astype(np.float64) @ core.alpha[:1010]
    np.testing.assert_allclose(core.G[:1000], G[:1000], rtol=1e-6)  # the kept points' rows and gradient moved along

    core, in_core = core_with(1000, 200)  # few idle points: kept
    assert _grow(problem, core, in_core, np.arange(3000, 3010)) == 10
    assert core.size == 1210 and in_core.sum() == 1210


def test_solver_info_says_where_a_core_set_fit_spent_its_time(monkeypatch):
    """The core-set loop's record: rounds, seconds per phase (within the fit's time), and Newton steps tried and
    kept -- none when they never pay."""
    from coresvm import CoreSVC
    from coresvm.datasets import make_checkerboard
    from coresvm.solvers import active_face

    X, y = make_checkerboard(20000, random_state=0)  # large enough for the core-set loop (small ones: dense.py)
    record = CoreSVC(C=1e4, gamma=2.0, random_state=0).fit(X, y).solver_info_[0]
    phases = [record[f"seconds_{name}"] for name in ("inner_solve", "scoring", "growth")]
    assert all(seconds > 0.0 for seconds in phases) and sum(phases) <= record["time"]
    assert record["rounds"] >= 2
    assert 0 < record["newton_kept"] <= record["newton_steps"]  # C = 10^4: the pairwise rate is slow
    monkeypatch.setattr(active_face, "newton_pays", lambda *args, **kwargs: False)
    record = CoreSVC(C=1e4, gamma=2.0, random_state=0).fit(X, y).solver_info_[0]
    assert record["newton_steps"] == record["newton_kept"] == 0


def test_near_margin_points_are_the_nearest_outside_the_core_set_and_the_sample():
    near = NearMarginPoints(8)
    near.note(np.arange(6), np.array([0.05, -0.2, 0.5, 0.0, 0.09, -0.01]), n_drawn=6)
    in_core = np.zeros(8, dtype=bool)
    in_core[3] = True
    # below NEAR_MARGIN_SLACK: 0, 1, 3 (in the core), 4, 5 (a candidate already); never scored: 6, 7
    share = NEAR_MARGIN_SHARE
    assert sorted(near.nearest(in_core, np.array([5]), sample_size=int(10 / share))) == [0, 1, 4]
    assert sorted(near.nearest(in_core, np.array([5]), sample_size=int(2 / share))) == [0, 1]  # the smallest slack
    assert len(near.nearest(in_core, np.array([5]), sample_size=0)) == 0
    assert not near.wanted(0, 6)  # 6 of 8 points drawn: the slacks are not all from this fit's later rounds
    near.note(np.arange(6, 8), np.array([1.0, 2.0]), n_drawn=2)
    assert near.wanted(0, 100) and not near.wanted(int(NEAR_MARGIN_VIOLATORS * 100), 100)


def noisy_board(m: int, seed: int):
    """A 4 x 4 checkerboard with 1% of the labels flipped."""
    rng = np.random.RandomState(seed)
    X = rng.uniform(0, 4, size=(m, 2))
    y = np.where((np.floor(X[:, 0]) + np.floor(X[:, 1])) % 2 == 0, 1.0, -1.0)
    y[rng.rand(m) < 0.01] *= -1
    return X, y


def test_near_margin_points_take_the_late_rounds_fewer(monkeypatch):
    """Re-scoring the points near the margin finds the late rounds' violators sooner: fewer rounds over four
    L2-SVM fits (156 -> 137 when written).  The statistical stop keeps its promise with them (its test sample is
    uniform): test_statistical_stop_leaves_fewer_violators_than_it_promises runs with them."""
    rounds = {True: 0, False: 0}
    for seed in range(4):
        X, y = noisy_board(4000, seed)
        problem = SimplexProblem(X, y, np.full(4000, 100.0), KernelSpec("rbf", gamma=2.0), bias=True, lam=0.0)
        options = SolverOptions(core_set=True, n_candidates=400, max_add=20, growth=1.0, core_set_stop="sample",
                                violator_fraction=1e-3, tol=1e-2, second_vertex="imdm", seed=seed)
        for near in (True, False):
            monkeypatch.setattr(sampling_module, "NEAR_MARGIN_SHARE", 0.5 if near else 0.0)
            result = run_engine(problem, options)
            assert result.status == "converged"
            rounds[near] += result.rounds
    assert rounds[True] < 0.95 * rounds[False]


def test_rows_repeated_with_both_labels_at_large_c_keep_their_one_over_c():
    """Repeated rows merge into one point per label whose C is the group's sum: here two points with the same
    features, opposite labels and C near 10^7, whose ``1/C`` a float32 Gram entry ``2 + 1/C`` cannot hold.  The
    pairwise and Newton steps take Q's diagonal in float64: before, the fit at C=1e6 ran to ``max_iter`` (10^7
    steps) with a relative gap printed as 1e292, and the fit at C=1e5 said converged on a model 15 points worse."""
    import scipy.sparse as sp

    rng = np.random.RandomState(0)
    X = rng.randn(300, 5)
    y = (X[:, 0] + 0.3 * rng.randn(300) > 0).astype(int)
    X = sp.csr_matrix(np.where(rng.rand(300, 5) < 0.1, X, 0.0))  # 177 empty rows, labelled both ways
    assert (X.getnnz(axis=1) == 0).sum() > 150
    for C in (1e5, 1e6):
        with warnings.catch_warnings():
            warnings.simplefilter("error", ConvergenceWarning)
            model = CoreSVC(C=C, random_state=0, max_iter=2_000_000).fit(X, y)
        assert model.solver_info_[0]["status"] == "converged"
        assert model.solver_info_[0]["iterations"] < 1_000_000
        assert model.score(X, y) > 0.6, C  # the float64 Gram's model: 0.663 and 0.673


def square_boundary(m: int):
    """``m`` points of the unit square, labelled by a noisy sine: at gamma 1 the RBF Gram's spectrum decays to far
    below float32's rounding."""
    rng = np.random.RandomState(0)
    X = rng.rand(m, 2)
    return X, (np.sin(6 * X[:, 0]) + 0.2 * rng.randn(m) > 2 * X[:, 1] - 1).astype(int)


def test_core_set_in_float64_recomputes_the_gram_and_gradient():
    """``CoreSetState.in_float64``: the same points and weights, Q in float64 (not the float32 entries widened), and
    G = Q a from it."""
    from sklearn.metrics.pairwise import rbf_kernel

    from coresvm.solvers.core_gram import CoreSetState, append_points

    X, y = square_boundary(300)
    signs = np.where(y == 1, 1.0, -1.0)
    problem = SimplexProblem(X, signs, np.full(300, 1e6), KernelSpec("rbf", 1.0))
    core = CoreSetState.growable(2**24, 1e-2, max_points=300)
    alpha = np.random.RandomState(1).rand(200)
    append_points(problem, core, np.arange(200), alpha / alpha.sum())
    assert core.gram.dtype == np.float32 and core.fits_float64(2**24)
    wide = core.in_float64(problem, 2**24)
    Q = (rbf_kernel(X[:200], gamma=1.0) + 1.0) * np.outer(signs[:200], signs[:200]) + 1e-6 * np.eye(200)
    assert wide.gram.dtype == np.float64 and wide.size == 200
    np.testing.assert_array_equal(wide.points[:200], np.arange(200))
    np.testing.assert_allclose(wide.gram[:200, :200], Q, rtol=0, atol=1e-13)
    np.testing.assert_allclose(wide.G[:200], Q @ wide.alpha[:200], rtol=1e-12)
    assert not core.fits_float64(200 * 200 * 8 - 1)  # the budget must hold the points in float64


def test_a_fit_whose_float32_gram_rounding_breaks_a_face_goes_on_in_float64(monkeypatch):
    """3,000 points of :func:`square_boundary` at C = 1e6: a face of the float32 Gram proves indefinite, and the
    core set goes on with a float64 Gram to convergence.  Kept in float32 (the system refuses the float64 Gram's
    memory) the same fit goes on and runs to max_iter."""
    from coresvm.solvers.core_gram import CoreSetState

    X, y = square_boundary(3000)
    params = {"C": 1e6, "gamma": 1.0, "cache_size": 40, "random_state": 0, "max_iter": 1_500_000}
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = CoreSVC(**params).fit(X, y)
    info = model.solver_info_[0]
    assert (info["status"], info["gram_dtype"]) == ("converged", "float64")
    assert model.score(X, y) > 0.9

    def refused(self, problem, budget_bytes):
        raise MemoryError

    monkeypatch.setattr(CoreSetState, "in_float64", refused)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        kept = CoreSVC(**params).fit(X, y)
    assert (kept.solver_info_[0]["status"], kept.solver_info_[0]["gram_dtype"]) == ("max_iter", "float32")


def test_vectorizable_extremes_are_max_and_min():
    # max_no_nan / min_no_nan (LLVM's maxnum / minnum) replace max / min in the searches' reductions: the same values,
    # infinities and ties included, so the blocked searches pick the same positions.
    from numba import njit

    from coresvm.solvers.extremes import max_no_nan, min_no_nan

    @njit
    def extremes(values):
        largest, smallest = -np.inf, np.inf
        for value in values:
            largest, smallest = max_no_nan(largest, value), min_no_nan(smallest, value)
        return largest, smallest

    rng = np.random.default_rng(0)
    for values in (rng.standard_normal(1000), np.array([np.inf, 1.0, -np.inf]), np.array([2.0, 2.0]), np.ones(0)):
        expected = (values.max(), values.min()) if len(values) else (-np.inf, np.inf)
        assert extremes(values) == expected
