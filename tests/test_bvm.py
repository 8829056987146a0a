"""BVM (Strack 2013 Alg. 2) without a Gram matrix: the step, the two ways of getting g, the SV limit."""

import math

import numpy as np
import pytest
import scipy.sparse as sp
from test_geometric import rbf_problem

from coresvm.problem import SimplexProblem
from coresvm.solvers.driver import SolverOptions, run_engine
from coresvm.solvers.geometric import _bvm_beta, bvm_track_after, pending_steps


def bvm_options(**extra):
    defaults = dict(ball_rule="bvm", stopping="meb", eps=1e-4, draws=590, probe=59, seed=3)
    return SolverOptions(**{**defaults, **extra})


def test_the_step_puts_the_violator_on_the_sphere_of_the_fixed_radius():
    """c' = (1 - beta) c + beta x~_v with beta = 1 - R / ||c - x~_v|| gives ||c' - x~_v|| = R."""
    tau, w2, g_v = 2.1, 0.3, -0.4  # ||c - x~_v||^2 = w2 - 2 g_v + tau = 3.2 > R^2 = tau
    beta = _bvm_beta(g_v, w2, tau, tau, 1.0)
    assert beta == pytest.approx(1.0 - math.sqrt(tau / 3.2))
    w2_new = (1 - beta) ** 2 * w2 + 2 * beta * (1 - beta) * g_v + beta**2 * tau
    g_v_new = (1 - beta) * g_v + beta * tau
    assert w2_new - 2 * g_v_new + tau == pytest.approx(tau, rel=1e-12)


def test_a_violator_inside_the_ball_gets_the_exact_line_search_step():
    """Possible with the mn/adjmn rules only: the ball step would be <= 0."""
    tau, w2, g_v = 2.0, 0.5, 0.2  # ||c - x~_v||^2 = 2.1 ... inside R^2 = 2.2
    beta = _bvm_beta(g_v, w2, tau, 2.2, 1.0)
    assert beta == pytest.approx((w2 - g_v) / (w2 - 2 * g_v + tau))


@pytest.mark.parametrize("sparse", [False, True])
def test_tracking_every_points_g_gives_the_on_demand_trajectory(sparse):
    """Same draws, same g up to rounding: the same steps, whether g of every point is kept
    (dense: steps queued by pending_steps and caught up for drawn candidates) or computed on demand."""
    problem = rbf_problem(m=400, C=100.0)
    if sparse:
        problem = SimplexProblem(sp.csr_matrix(problem.X), problem.y, 1 / problem.inv_c, problem.kernel)
    tracked = run_engine(problem, bvm_options(track_after=0))
    on_demand = run_engine(problem, bvm_options(track_after=10**9))
    assert tracked.status == on_demand.status == "converged"
    assert tracked.n_iter == on_demand.n_iter > 3 * pending_steps(problem.n_points, 59)
    np.testing.assert_array_equal(tracked.support, on_demand.support)
    np.testing.assert_allclose(tracked.alpha, on_demand.alpha, rtol=1e-9, atol=1e-13)
    Q = problem.dense_Q()
    alpha = np.zeros(problem.n_points)
    alpha[tracked.support] = tracked.alpha
    assert tracked.squared_norm == pytest.approx(alpha @ Q @ alpha, rel=1e-10)


def test_the_sv_set_grows_past_the_cache_budget_and_stops_at_max_core_vectors():
    """BVM keeps no Gram matrix: a 1 kB budget does not stop it; LibCVM's -f (max_core_vectors) does."""
    problem = rbf_problem(m=600, C=1000.0)
    result = run_engine(problem, bvm_options(cache_bytes=1024, eps=1e-5))
    assert result.status == "converged" and result.support.size > 64
    capped = run_engine(problem, bvm_options(cache_bytes=1024, eps=1e-5, max_core_vectors=40))
    assert capped.status == "core_set_full" and capped.support.size <= 40


def test_the_stage_log_follows_the_multiscale_schedule_to_eps():
    problem = rbf_problem(m=300, C=100.0)
    result = run_engine(problem, bvm_options(eps=1e-4))
    eps, iterations, n_sv = result.stage_log[:, 0], result.stage_log[:, 1], result.stage_log[:, 2]
    assert eps[0] == 0.5 and eps[-1] == 1e-4 and np.all(np.diff(eps) < 0)
    assert np.all(np.diff(iterations) >= 0) and iterations[-1] == result.n_iter
    assert np.all(np.diff(n_sv) >= 0)  # BVM never removes an SV (every weight shrinks)


def test_tracking_starts_when_a_try_on_demand_costs_more_than_a_column():
    assert bvm_track_after(50_000, 59) == 85  # ceil(50000 / (59 * 10))
    assert bvm_track_after(10, 59) == 1
    assert pending_steps(50_000, 59) == 29 and pending_steps(1_500, 59) == 5
    assert pending_steps(10, 59) == 1 and pending_steps(10**8, 59) == 64



def test_a_run_cut_inside_a_stage_returns_the_model_of_the_last_completed_stage():
    """The multiscale stages 1/2, ..., 2^-10 are a prefix of those to 1e-5: same seed, same steps, so a
    run to 1e-5 cut inside the stage after 2^-10 returns exactly the run to 2^-10."""
    problem = rbf_problem(m=600, C=1000.0)
    to_stage = run_engine(problem, bvm_options(eps=2.0**-10))
    cut = run_engine(problem, bvm_options(eps=1e-5, max_iter=to_stage.n_iter + 5))
    assert to_stage.status == "converged" and cut.status == "max_iter"
    assert cut.stage_log[-1, 0] == 2.0**-10
    np.testing.assert_array_equal(cut.support, to_stage.support)
    np.testing.assert_allclose(cut.alpha, to_stage.alpha, rtol=1e-12)


def test_float32_data_gives_the_float64_trajectory():
    """The tracked g is computed in float64 whatever the data's dtype (float32 BLAS: ~1e-7 off)."""
    problem = rbf_problem(m=300, C=100.0)
    single = SimplexProblem(problem.X.astype(np.float32), problem.y, 1 / problem.inv_c, problem.kernel)
    double = SimplexProblem(single.X.astype(np.float64), problem.y, 1 / problem.inv_c, problem.kernel)
    a = run_engine(single, bvm_options(track_after=0))
    b = run_engine(double, bvm_options(track_after=0))
    assert a.n_iter == b.n_iter
    np.testing.assert_array_equal(a.support, b.support)
    np.testing.assert_allclose(a.alpha, b.alpha, rtol=1e-10, atol=1e-14)
