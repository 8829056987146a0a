"""Closed-form line searches of steps.py against brute force on random small simplex QPs."""

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from coresvm.solvers.steps import (
    away_direction,
    clipped_step,
    objective_change,
    pairwise_direction,
    partan_direction,
    smallest_score,
    toward_direction,
)

M = 8
SEEDS = range(6)
LAMS = [0.0, 1.0]


def random_problem(seed, lam, zeros=3):
    rng = np.random.RandomState(seed)
    A = rng.randn(M, M)
    Q = A @ A.T + 0.1 * np.eye(M)
    Q[np.diag_indices(M)] += rng.uniform(0, 3, M)  # non-constant diagonal so lam matters
    alpha = rng.rand(M)
    alpha[rng.choice(M, zeros, replace=False)] = 0.0
    alpha /= alpha.sum()
    return Q, alpha, rng


def objective(Q, lam):
    q = np.diag(Q).copy()

    def f(a):  # one point, or one point per row
        a = np.asarray(a)
        return np.einsum("...i,ij,...j->...", a, Q, a) - lam * a @ q

    return f


def summaries(Q, alpha):
    G = Q @ alpha
    return G, float(alpha @ G), float(alpha @ np.diag(Q))


def check_quadratic_model(f, a, d, derivative, curvature, ts):
    f0 = f(a)
    scale = 1.0 + np.abs(np.diag(np.outer(d, d))).sum() + abs(f0)
    for t in ts:
        real = f(a + t * d) - f0
        assert derivative * t + curvature * t * t == pytest.approx(real, abs=1e-11 * scale)
        assert objective_change(derivative, curvature, t) == pytest.approx(real, abs=1e-11 * scale)


def check_exact_line_search(f, a, d, derivative, curvature, t_max):
    """clipped_step(., ., t_max, 1) is the minimizer of f(a + t d) on [0, t_max]."""
    t = clipped_step(derivative, curvature, t_max, 1.0)
    assert 0.0 <= t <= t_max

    def phi(s):
        return f(a + np.multiply.outer(s, d))

    grid = np.linspace(0.0, t_max, 4001)
    values = phi(grid)
    tol = 1e-10 * (1.0 + abs(values).max())
    assert phi(t) <= values.min() + tol
    assert abs(t - grid[values.argmin()]) <= t_max / 4000 + 1e-12
    ref = minimize_scalar(lambda s: f(a + s * d), bounds=(0.0, t_max), method="bounded", options={"xatol": 1e-12})
    # bounded Brent never evaluates the exact endpoints: allow its small boundary offset
    assert t == pytest.approx(ref.x, abs=1e-6 * (1.0 + t_max))
    assert phi(t) <= ref.fun + tol
    return t


def feasible(a, tol=1e-12):
    return (a >= -tol).all() and abs(a.sum() - 1.0) < tol


# ---------------------------------------------------------------------------
# toward
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("lam", LAMS)
@pytest.mark.parametrize("seed", SEEDS)
def test_toward_direction(seed, lam):
    Q, alpha, _ = random_problem(seed, lam)
    f = objective(Q, lam)
    G, n2, D = summaries(Q, alpha)
    n_descent = 0
    for i in range(M):
        d = -alpha.copy()
        d[i] += 1.0
        derivative, curvature = toward_direction(G[i], Q[i, i], n2, D, lam)
        grad = 2 * Q @ alpha - lam * np.diag(Q)
        assert derivative == pytest.approx(grad @ d, rel=1e-10, abs=1e-12)
        assert curvature == pytest.approx(d @ Q @ d, rel=1e-10, abs=1e-12)
        check_quadratic_model(f, alpha, d, derivative, curvature, [0.0, 0.1, 0.37, 0.8, 1.0])
        t = check_exact_line_search(f, alpha, d, derivative, curvature, 1.0)
        assert feasible(alpha + t * d)
        n_descent += derivative < 0
    assert n_descent > 0  # the FW vertex (min gradient) gives descent on a non-optimal point


# ---------------------------------------------------------------------------
# away
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("lam", LAMS)
@pytest.mark.parametrize("seed", SEEDS)
def test_away_direction(seed, lam):
    Q, alpha, _ = random_problem(seed, lam)
    f = objective(Q, lam)
    G, n2, D = summaries(Q, alpha)
    for j in np.flatnonzero(alpha > 0):
        d = alpha.copy()
        d[j] -= 1.0
        t_max = alpha[j] / (1.0 - alpha[j])
        # t_max is the drop step: j leaves the support exactly there and the point stays feasible
        end = alpha + t_max * d
        assert feasible(end) and abs(end[j]) < 1e-12
        derivative, curvature = away_direction(G[j], Q[j, j], n2, D, lam)
        check_quadratic_model(f, alpha, d, derivative, curvature, [0.0, 0.5 * t_max, t_max, 0.05, 2.0])
        t = check_exact_line_search(f, alpha, d, derivative, curvature, t_max)
        assert feasible(alpha + t * d)
        # away along j is exactly toward j reversed
        tw_der, tw_curv = toward_direction(G[j], Q[j, j], n2, D, lam)
        assert derivative == pytest.approx(-tw_der, rel=1e-12, abs=1e-14)
        assert curvature == pytest.approx(tw_curv, rel=1e-12)


# ---------------------------------------------------------------------------
# pairwise
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("lam", LAMS)
@pytest.mark.parametrize("seed", SEEDS)
def test_pairwise_direction(seed, lam):
    Q, alpha, _ = random_problem(seed, lam)
    f = objective(Q, lam)
    G, _, _ = summaries(Q, alpha)
    for j in np.flatnonzero(alpha > 0):
        for i in range(M):
            if i == j:
                continue
            d = np.zeros(M)
            d[i], d[j] = 1.0, -1.0
            derivative, curvature = pairwise_direction(G[i], G[j], Q[i, i], Q[j, j], Q[i, j], lam)
            t_max = alpha[j]
            check_quadratic_model(f, alpha, d, derivative, curvature, [0.0, 0.3 * t_max, t_max, -0.4, 1.5])
            t = check_exact_line_search(f, alpha, d, derivative, curvature, t_max)
            assert feasible(alpha + t * d)
            # swapping the roles reverses the derivative
            rev = pairwise_direction(G[j], G[i], Q[j, j], Q[i, i], Q[i, j], lam)
            assert rev[0] == pytest.approx(-derivative, rel=1e-12, abs=1e-14)
            assert rev[1] == pytest.approx(curvature, rel=1e-12)


# ---------------------------------------------------------------------------
# PARTAN
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("lam", LAMS)
@pytest.mark.parametrize("seed", SEEDS)
def test_partan_direction(seed, lam):
    Q, alpha, rng = random_problem(seed, lam)
    f = objective(Q, lam)
    G, n2, D = summaries(Q, alpha)
    qd = np.diag(Q)
    a_prev = rng.rand(M) * (rng.rand(M) < 0.7)
    a_prev[0] += 0.1
    a_prev /= a_prev.sum()
    Gp = Q @ a_prev
    W, Fp, Dp = float(alpha @ Gp), float(a_prev @ Gp), float(a_prev @ qd)
    for i in range(M):
        for lam_fw in (0.0, 0.23, 0.5, 1.0, rng.rand()):
            a_fw = (1.0 - lam_fw) * alpha
            a_fw[i] += lam_fw
            d = a_fw - a_prev
            derivative, curvature = partan_direction(lam_fw, G[i], Gp[i], Q[i, i], n2, W, Fp, D, Dp, lam)
            assert curvature == pytest.approx(d @ Q @ d, rel=1e-9, abs=1e-12)
            check_quadratic_model(f, a_fw, d, derivative, curvature, [-1.3, -0.6, -0.1, 0.0, 0.2, 0.75, 1.0, 2.5])


def test_partan_reduces_to_toward_when_previous_is_current():
    """With a_prev = a the PARTAN direction is lam_fw (e_i - a) seen from a~."""
    Q, alpha, _ = random_problem(1, 1.0)
    G, n2, D = summaries(Q, alpha)
    for i in range(M):
        lam_fw = 0.4
        der, curv = partan_direction(lam_fw, G[i], G[i], Q[i, i], n2, n2, n2, D, D, 1.0)
        tw_der, tw_curv = toward_direction(G[i], Q[i, i], n2, D, 1.0)
        # d = lam_fw (e_i - a); derivative at a~ = a + lam_fw (e_i - a)
        assert curv == pytest.approx(lam_fw**2 * tw_curv, rel=1e-10, abs=1e-13)
        assert der == pytest.approx(lam_fw * tw_der + 2 * lam_fw**2 * tw_curv, rel=1e-10, abs=1e-13)


# ---------------------------------------------------------------------------
# clipped_step: special cases and over-relaxation
# ---------------------------------------------------------------------------


def test_clipped_step_special_cases():
    assert clipped_step(1.0, 2.0, 1.0, 1.0) == 0.0  # ascent direction: no step
    assert clipped_step(0.0, 2.0, 1.0, 1.0) == 0.0  # stationary
    assert clipped_step(-1.0, 2.0, 1.0, 1.0) == pytest.approx(0.25)
    assert clipped_step(-10.0, 2.0, 1.0, 1.0) == 1.0  # clipped to t_max
    assert clipped_step(-1.0, 0.0, 0.7, 1.0) == 0.7  # flat curvature: go to the end
    assert clipped_step(-1.0, -3.0, 0.7, 1.0) == 0.7  # concave: the end is the minimum
    assert clipped_step(-1.0, 2.0, 0.0, 1.0) == 0.0  # zero-length feasible segment
    assert clipped_step(-1.0, 2.0, np.inf, 1.5) == pytest.approx(0.375)


@pytest.mark.parametrize("eta", [1.0, 1.2, 1.5, 1.9, 1.99])
@pytest.mark.parametrize("seed", SEEDS)
def test_over_relaxation(seed, eta):
    lam = float(seed % 2)
    Q, alpha, _ = random_problem(seed, lam)
    f = objective(Q, lam)
    G, n2, D = summaries(Q, alpha)
    f0 = f(alpha)
    n_unclipped = 0
    for j in np.flatnonzero(alpha > 0):
        for i in range(M):
            if i == j:
                continue
            d = np.zeros(M)
            d[i], d[j] = 1.0, -1.0
            derivative, curvature = pairwise_direction(G[i], G[j], Q[i, i], Q[j, j], Q[i, j], lam)
            for t_max in (alpha[j], np.inf):
                plain = clipped_step(derivative, curvature, np.inf, 1.0)
                t = clipped_step(derivative, curvature, t_max, eta)
                if eta * plain < t_max:
                    assert t == pytest.approx(eta * plain, rel=1e-14)
                    n_unclipped += derivative < 0
                else:
                    assert t == t_max
                if derivative < 0:
                    assert t > 0
                    assert f(alpha + t * d) < f0
                    assert objective_change(derivative, curvature, t) < 0
                else:
                    assert t == 0
    assert n_unclipped > 0


# ---------------------------------------------------------------------------
# smallest_score: the toward vertex of a full scan
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("lam", LAMS)
def test_smallest_score_is_the_first_argmin_of_the_vertex_score(lam):
    rng = np.random.RandomState(0)
    G, diag = rng.randn(50), rng.uniform(1.0, 3.0, 50)
    G[[7, 31]] = -5.0 + 0.5 * lam * diag[[7, 31]]  # a tie for the smallest score: the first one wins
    i, score = smallest_score(G, diag, 50, lam)
    assert i == 7 == np.argmin(G - 0.5 * lam * diag)
    assert score == -5.0
    assert smallest_score(G, diag, 7, lam)[0] == np.argmin((G - 0.5 * lam * diag)[:7])  # only the first n


def test_smallest_score_without_a_finite_score():
    assert smallest_score(np.full(3, np.inf), np.ones(3), 3, 0.0) == (-1, np.inf)
    assert smallest_score(np.zeros(0), np.zeros(0), 0, 1.0) == (-1, np.inf)
