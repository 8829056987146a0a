"""The joint multiclass problem on the cached-rows loop (solvers/dense_joint.py): exact optimum, row budget."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_digits, make_blobs
from test_joint import small_joint_problem
from test_solvers import assert_reaches_exact_optimum, dense_alpha, exact_solution, make_problem

import coresvm.joint as joint_module
from coresvm.joint import joint_problem, uses_dense_joint
from coresvm.kernels import KernelSpec
from coresvm.solvers import dense
from coresvm.solvers.dense_joint import MIN_ROWS, row_capacity, run_dense_joint
from coresvm.solvers.driver import SolverOptions
from coresvm.svc import CoreSVC

SPEC = KernelSpec("rbf", gamma=0.5)


@pytest.mark.parametrize("second", ["mdm", "imdm"])
@pytest.mark.parametrize("n_classes,bias,kernel", [(3, True, SPEC), (5, True, SPEC), (4, False, SPEC),
                                                   (3, True, KernelSpec("linear"))])
def test_dense_joint_reaches_the_exact_joint_optimum(second, n_classes, bias, kernel):
    problem = small_joint_problem(n_classes=n_classes, bias=bias, kernel=kernel)
    _, f_star, Q = exact_solution(problem)
    result = run_dense_joint(problem, SolverOptions(core_set=True, second_vertex=second, tol=1e-9, seed=0))
    alpha = assert_reaches_exact_optimum(problem, result, f_star, Q)
    g = Q @ alpha  # KKT: (Q a)_i >= a'Qa, with equality on the support
    assert g.min() >= alpha @ g * (1 - 1e-6)


def larger_joint_problem(C=100.0, m=400):
    """Well separated: 89 support vectors at C=100, 145 at C=3."""
    X, y = make_blobs(n_samples=m, centers=4, n_features=3, cluster_std=0.8, random_state=3)
    return joint_problem(X, y, 4, np.full(m, C), SPEC)


def assert_optimal(problem, result):
    """Converged, feasible, and the exact Frank-Wolfe gap of the explicit Q (400 x 400) is negligible."""
    alpha = dense_alpha(result, problem.n_points)
    Q = problem.dense_Q()
    assert result.status == "converged"
    assert np.all(alpha >= 0) and alpha.sum() == pytest.approx(1.0, abs=1e-12)
    assert problem.duality_gap(alpha, Q) <= 1e-9 * problem.objective(alpha, Q)


def test_a_buffer_smaller_than_m_reuses_the_rows_of_dropped_points():
    problem = larger_joint_problem()
    m = problem.n_points
    capacity = MIN_ROWS + 2
    options = SolverOptions(core_set=True, second_vertex="imdm", tol=1e-9, seed=0, cache_bytes=capacity * m * 8)
    assert row_capacity(m, options.cache_bytes, options.tol) == capacity
    result = run_dense_joint(problem, options)
    assert_optimal(problem, result)
    assert len(result.support) < capacity < result.cache_misses  # more rows computed than the buffer holds


def test_a_support_larger_than_the_buffer_continues_on_the_core_set_solver(monkeypatch):
    problem = larger_joint_problem(C=3.0)  # 145 support vectors
    m = problem.n_points
    continued = []
    original = dense.run_engine  # the continuation is dense.continue_with_core_set's
    monkeypatch.setattr(dense, "run_engine", lambda *args: continued.append(1) or original(*args))
    # 128 rows for the dense loop; the core-set solver's Gram then holds sqrt(budget / 8) = 226 points, and
    # scoring every point each round (n_candidates = m) makes its stop the exact optimality check
    options = SolverOptions(core_set=True, second_vertex="imdm", tol=1e-9, seed=0, cache_bytes=MIN_ROWS * m * 8,
                            n_candidates=m)
    result = run_dense_joint(problem, options)
    assert continued == [1]
    assert_optimal(problem, result)
    assert len(result.support) > MIN_ROWS


def test_a_joint_solve_past_its_step_budget_goes_on_with_the_core_set_solver(monkeypatch):
    """Three overlapping classes at large C: the pairwise steps alone are slow (more than 10 million at C=1,000 on
    3,000 points), so past dense_step_budget the core-set solver, with its Newton steps, continues from the
    solution reached; the result is the same optimum as the dense loop's alone, in fewer steps."""
    from test_dense import overlapping_classes

    X, y = overlapping_classes(400, 3)
    problem = joint_problem(X, y, 3, np.full(400, 1e4), SPEC)
    continued = []
    original = dense.run_engine
    monkeypatch.setattr(dense, "run_engine", lambda *args: continued.append(1) or original(*args))
    options = SolverOptions(core_set=True, second_vertex="imdm", tol=1e-6, seed=0, n_candidates=400)
    result = run_dense_joint(problem, options)
    assert continued == [1] and result.n_iter > dense.dense_step_budget(400, options.max_iter)
    monkeypatch.setattr(dense, "DENSE_MIN_STEPS", 10**12)  # no budget: the dense loop alone
    alone = run_dense_joint(problem, options)
    assert continued == [1] and result.n_iter < 0.75 * alone.n_iter  # 376,292 against 650,494 steps
    Q = problem.dense_Q()
    for fit in (result, alone):
        alpha = dense_alpha(fit, 400)
        assert fit.status == "converged"
        assert problem.duality_gap(alpha, Q) <= 1e-6 * 2.0 * problem.objective(alpha, Q)
    assert problem.objective(dense_alpha(result, 400), Q) == pytest.approx(
        problem.objective(dense_alpha(alone, 400), Q), rel=1e-5)


@pytest.mark.parametrize("tol", [1e-1, 1e-2, 1e-3])
def test_float32_rows_stop_at_the_true_relative_gap(tol):
    """tol >= 1e-3 keeps float32 rows: the reported gap is still the exact one (up to rounding)."""
    problem = larger_joint_problem(C=100.0)
    Q = problem.dense_Q()
    result = run_dense_joint(problem, SolverOptions(core_set=True, second_vertex="imdm", tol=tol, seed=1))
    alpha = dense_alpha(result, problem.n_points)
    true_gap = problem.duality_gap(alpha, Q)
    assert result.status == "converged"
    assert true_gap / (2 * alpha @ Q @ alpha) <= tol * (1 + 1e-3)
    assert result.gap == pytest.approx(true_gap, rel=1e-3)


def test_input_checks():
    problem = small_joint_problem()
    options = SolverOptions(core_set=True, tol=1e-6)
    with pytest.raises(ValueError, match="binary: run_dense"):
        run_dense_joint(make_problem(), options)
    sparse = joint_problem(sp.csr_matrix(problem.X), problem.class_index, 3, np.ones(problem.n_points), SPEC)
    with pytest.raises(ValueError, match="dense NumPy X"):
        run_dense_joint(sparse, options)
    with pytest.raises(ValueError, match="cache_size holds"):
        run_dense_joint(problem, SolverOptions(core_set=True, tol=1e-6, cache_bytes=1000))
    odd = small_joint_problem()
    odd.label_gram = odd.label_gram.copy()
    odd.label_gram[0, 1] = odd.label_gram[1, 0] = 0.0
    with pytest.raises(ValueError, match="one diagonal and one off-diagonal value"):
        run_dense_joint(odd, options)


def test_when_fit_joint_takes_the_dense_loop():
    X = np.zeros((100, 3))
    plain = SolverOptions(core_set=True, tol=1e-3)
    assert uses_dense_joint(X, plain)
    assert not uses_dense_joint(sp.csr_matrix(X), plain)
    assert not uses_dense_joint(X, SolverOptions(core_set=True, radius_test=True))  # CVM's radius test
    assert not uses_dense_joint(X, SolverOptions(core_set=True, callback=lambda info: False))
    assert not uses_dense_joint(np.zeros((10_000, 3)), SolverOptions(core_set=True, cache_bytes=2**20))


def test_coresvc_joint_is_the_same_model_on_either_solver(monkeypatch):
    """The dense loop and the core-set solver give the same joint model at a tight tol on digits."""
    X, y = load_digits(return_X_y=True)
    X, y = X[:600] / 16.0, y[:600]
    fast = CoreSVC(C=10.0, gamma=0.05, multiclass="joint", tol=1e-6, random_state=0).fit(X, y)
    monkeypatch.setattr(joint_module, "DENSE_JOINT", False)
    slow = CoreSVC(C=10.0, gamma=0.05, multiclass="joint", tol=1e-6, random_state=0).fit(X, y)
    assert fast.fit_status_ == slow.fit_status_ == 0
    assert fast.solver_info_[0]["cache_misses"] > 0 and slow.solver_info_[0]["cache_misses"] == 0
    assert fast.solver_info_[0]["rho"] == pytest.approx(slow.solver_info_[0]["rho"], rel=1e-5)
    np.testing.assert_allclose(fast.decision_function(X), slow.decision_function(X), atol=1e-3)
    assert np.mean(fast.predict(X) == slow.predict(X)) > 0.995
