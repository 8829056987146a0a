"""Property-based tests of every solver on random small problems (m <= 30), with hypothesis.

Each solver runs through the estimator's own option mapping (``CoreSVC.solver_options``)
and ``solvers.driver.run_engine``; the returned point is checked against the dense
extended kernel ``Q`` and a certified lower bound of the exact optimum (weak duality).

What each family guarantees, and what is tested (docs/bad_input.md, "Solver guarantees"):

* full-search engine ('fw', 'mfw', 'swap', 'partan'): the reported gap *is* the
  Frank-Wolfe duality gap of the returned point, which bounds ``f - f*`` (weak duality);
  'converged' means ``gap <= tol * scale``.
* sampled search: the reported gap is that of a sample, a lower bound of the true gap.
* core-set solvers ('coreset', 'cvm'): they stop after two consecutive candidate samples
  without violators.  With ``m <= n_candidates`` every sample is all of the points, so
  'converged' certifies the true relative gap ``<= tol``; for larger m it is probabilistic
  (a fraction q of violators survives two samples of n with probability ``(1 - q)^(2n)``).
* gsvm family ('bvm', 'sphere', 'mnsvm'): a run stops when ``draws`` random points hold
  no violator of the stopping rule (mn / adjmn / meb).  With ``m <= 30`` and 590-600
  draws every point is checked (one point escapes with probability ``(1 - 1/30)^590 = 2e-9``),
  so 'converged' means no point violates the rule -- which for 'mn' bounds the relative
  gap by eps, for 'adjmn' by ``eps * sqrt(k~(x,x) / ||c||^2)``, and for 'meb' (the default of
  'bvm' and 'sphere') bounds only the distance to the *fixed* radius ``sqrt(k~(x, x))``,
  not the objective.  Their reported gap is the support vectors' gap, a lower bound of the true gap.
"""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coresvm import CoreSVC
from coresvm.kernels import KernelSpec
from coresvm.problem import SimplexProblem
from coresvm.solvers.driver import SolverOptions, run_engine
from coresvm.solvers.geometric import STOPPING_RULES, violation_threshold

PROPERTY_SETTINGS = settings(max_examples=35, deadline=None, derandomize=True,
                             suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
ENGINE_SOLVERS = ["fw", "mfw", "swap", "partan"]
CORE_SET_SOLVERS = ["coreset", "cvm"]
BALL_SOLVERS = ["bvm", "sphere", "mnsvm"]


@st.composite
def problems(draw, kernels=("rbf", "poly", "linear"), weighted=True, lams=(0.0, 1.0)):
    """A random binary problem with 4-30 points (both classes present)."""
    m = draw(st.integers(4, 30))
    d = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.RandomState(seed)
    X = rng.randn(m, d) * draw(st.sampled_from([0.1, 1.0, 3.0]))
    y = np.where(rng.rand(m) < 0.5, 1.0, -1.0)
    y[0], y[1] = 1.0, -1.0
    C = 10.0 ** draw(st.floats(-1, 3))
    C_rows = C * (rng.uniform(0.5, 2.0, size=m) if weighted and draw(st.booleans()) else np.ones(m))
    kernel = KernelSpec(draw(st.sampled_from(kernels)), gamma=10.0 ** draw(st.floats(-1, 0.5)), coef0=1.0, degree=2)
    problem = SimplexProblem(X, y, C_rows, kernel, bias=draw(st.booleans()), lam=draw(st.sampled_from(lams)))
    return problem, seed


def optimum_lower_bound(problem, Q):
    """A certified lower bound of the exact optimum ``f*``: ``f(b) - gap(b) <= f*`` for any feasible ``b``
    (weak duality, computed here with the dense ``Q``).  ``b`` is a tight pairwise-step solution, so the
    bound is within ~1e-13 of ``f*``; SLSQP (tests/test_solvers.py) would take 0.3-1 s per problem."""
    options = SolverOptions(step_rule="swap", second_vertex="imdm", tol=1e-13, max_iter=200_000)
    b = dense(run_engine(problem, options), problem.n_points)
    b = np.maximum(b, 0.0) / np.maximum(b, 0.0).sum()
    return problem.objective(b, Q) - problem.duality_gap(b, Q)


def solver_options(solver, m, seed, **params):
    return CoreSVC(solver=solver, search=params.pop("search", "full"), **params).solver_options(m, seed, np.inf)


def dense(result, m):
    alpha = np.zeros(m)
    alpha[result.support] = result.alpha
    return alpha


def scale_of(problem, alpha, Q):
    n2 = alpha @ Q @ alpha
    return 2.0 * n2 if problem.lam == 0.0 else alpha @ np.diag(Q) - n2


def assert_feasible(alpha):
    assert np.all(alpha >= 0)
    # the weights are rescaled in place every step, never renormalized: rounding drift only
    assert abs(alpha.sum() - 1.0) <= 1e-10


@PROPERTY_SETTINGS
@given(problems(), st.sampled_from([1.0, 1.5]), st.sampled_from([1e-2, 1e-6]))
def test_full_search_engine_reports_the_true_gap_and_is_within_it(case, eta, tol):
    problem, seed = case
    Q = problem.dense_Q()
    slack = 1e-9 * np.abs(Q).max()
    f_low = optimum_lower_bound(problem, Q)
    for solver in ENGINE_SOLVERS:
        result = run_engine(problem, solver_options(solver, problem.n_points, seed, tol=tol, eta=eta, max_iter=3000))
        alpha = dense(result, problem.n_points)
        assert_feasible(alpha)
        f = problem.objective(alpha, Q)
        true_gap = problem.duality_gap(alpha, Q)
        assert abs(result.gap - true_gap) <= slack, solver  # the reported gap is the duality gap ...
        assert f - f_low <= result.gap + slack, solver  # ... and bounds the suboptimality
        assert abs(result.squared_norm - alpha @ Q @ alpha) <= slack, solver
        if result.status == "converged":
            assert true_gap <= tol * scale_of(problem, alpha, Q) + slack, solver
        else:
            assert result.status == "max_iter" and result.n_iter == 3000


@PROPERTY_SETTINGS
@given(problems(), st.integers(2, 12))
def test_sampled_search_gap_is_a_lower_bound_of_the_true_gap(case, sample_size):
    problem, seed = case
    Q = problem.dense_Q()
    slack = 1e-9 * np.abs(Q).max()
    for solver in ENGINE_SOLVERS:
        options = solver_options(solver, problem.n_points, seed, search="random", sample_size=sample_size,
                                 tol=1e-4, max_iter=2000)
        result = run_engine(problem, options)
        alpha = dense(result, problem.n_points)
        assert_feasible(alpha)
        assert -slack <= result.gap <= problem.duality_gap(alpha, Q) + slack, solver


@PROPERTY_SETTINGS
@given(problems())
def test_core_set_solvers_certify_the_gap_when_the_sample_is_everything(case):
    problem, seed = case
    Q = problem.dense_Q()
    slack = 1e-9 * np.abs(Q).max()
    f_low = optimum_lower_bound(problem, Q)
    tol = 1e-4  # float64 core-set Gram (float32 only at tol >= 1e-3)
    for solver in CORE_SET_SOLVERS:
        result = run_engine(problem, solver_options(solver, problem.n_points, seed, tol=tol))
        alpha = dense(result, problem.n_points)
        assert_feasible(alpha)
        true_gap = problem.duality_gap(alpha, Q)
        assert result.status == "converged", solver
        assert result.gap <= true_gap + slack, solver  # a sample's gap: a lower bound
        assert true_gap <= tol * scale_of(problem, alpha, Q) + slack, solver  # all m points were candidates
        assert problem.objective(alpha, Q) - f_low <= true_gap + slack, solver


@PROPERTY_SETTINGS
@given(problems(kernels=("rbf",), weighted=False, lams=(0.0,)), st.sampled_from(sorted(STOPPING_RULES)),
       st.sampled_from([1e-2, 1e-4]), st.booleans())
def test_ball_solvers_leave_no_point_violating_their_stopping_rule(case, stopping, eps, multiscale):
    problem, seed = case
    Q = problem.dense_Q()
    slack = 1e-9 * np.abs(Q).max()
    diag = np.diag(Q)
    f_low = optimum_lower_bound(problem, Q)
    for solver in BALL_SOLVERS:
        options = solver_options(solver, problem.n_points, seed, stopping=stopping, eps=eps, multiscale=multiscale,
                                 max_iter=20_000)
        result = run_engine(problem, options)
        alpha = dense(result, problem.n_points)
        assert_feasible(alpha)
        g = Q @ alpha
        w2 = alpha @ g
        assert abs(result.squared_norm - w2) <= slack, solver
        assert -slack <= result.gap <= problem.duality_gap(alpha, Q) + slack, solver  # the SVs' gap: a lower bound
        if solver == "bvm" and result.status == "max_iter":
            continue  # BVM's toward steps never drop an SV: sublinear, like plain FW, at small eps
        assert result.status == "converged", solver
        code = STOPPING_RULES[stopping]
        thresholds = np.array([violation_threshold(code, w2, tau, eps) for tau in diag])
        assert np.all(g >= thresholds - slack), (solver, stopping)
        if stopping == "mn":  # no violator of the mn rule: relative duality gap <= eps
            assert problem.duality_gap(alpha, Q) <= 2 * eps * w2 + slack, solver
            assert problem.objective(alpha, Q) - f_low <= 2 * eps * w2 + slack, solver


MONOTONE = ENGINE_SOLVERS + CORE_SET_SOLVERS + ["mnsvm"]  # exact (clipped) line searches only decrease f


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(problems(kernels=("rbf",), weighted=False, lams=(0.0,)), st.sampled_from([1.0, 1.7]))
def test_invariants_after_every_step(case, eta):
    """Runs capped at k = 1..7 iterations replay the same run: every iterate is feasible, its
    bookkeeping ||c||^2 matches alpha'Q alpha, and (for the line-search steps, also over-relaxed)
    the objective never increases."""
    problem, seed = case
    Q = problem.dense_Q()
    slack = 1e-9 * np.abs(Q).max()
    for solver in ENGINE_SOLVERS + CORE_SET_SOLVERS + BALL_SOLVERS:
        previous = np.inf
        for k in range(1, 8):
            params = dict(eta=eta, max_iter=k, tol=1e-12)
            if solver in BALL_SOLVERS:
                params.update(stopping="mn", eps=1e-9)
            result = run_engine(problem, solver_options(solver, problem.n_points, seed, **params))
            alpha = dense(result, problem.n_points)
            assert_feasible(alpha)
            assert abs(result.squared_norm - alpha @ Q @ alpha) <= slack, (solver, k)
            f = problem.objective(alpha, Q)
            if solver in MONOTONE:
                assert f <= previous + slack, (solver, k)
            previous = f
