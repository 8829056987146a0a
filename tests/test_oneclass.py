"""CoreOneClassSVM: the one-class L2-SVM / MEB of Tsang et al. 2005 sec. 3.2.1."""


import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import roc_auc_score
from test_solvers import exact_solution
from test_svc import check_estimator_with_gamma_scale

from coresvm.kernels import KernelSpec, kernel_block
from coresvm.oneclass import CALIBRATION_RANGE, CoreOneClassSVM, weighted_lower_quantile
from coresvm.problem import SimplexProblem


def blob_with_outliers(n_inliers=400, n_outliers=20, seed=0):
    """A Gaussian blob in 3-D and points on a sphere of radius 6 around it."""
    rng = np.random.RandomState(seed)
    inliers = rng.randn(n_inliers, 3)
    directions = rng.randn(n_outliers, 3)
    outliers = 6.0 * directions / np.linalg.norm(directions, axis=1, keepdims=True)
    return inliers, outliers


@pytest.fixture(scope="module")
def blob():
    return blob_with_outliers()


def dense_dual(model, m):
    alpha = np.zeros(m)
    alpha[model.support_] = model.dual_coef_[0]
    return alpha


@pytest.mark.parametrize("solver", ["coreset", "cvm", "swap"])
@pytest.mark.parametrize("kernel", ["rbf", "poly"])
def test_dual_matches_exact_qp(solver, kernel):
    rng = np.random.RandomState(1)
    X = rng.randn(60, 3)
    weights = rng.uniform(0.5, 2.0, size=60)
    model = CoreOneClassSVM(C=0.5, kernel=kernel, gamma=0.5, coef0=1.0, degree=2, solver=solver, tol=1e-8,
                            random_state=0).fit(X, sample_weight=weights)
    # Tsang et al. 2005 eq. 7: min a'(K + diag(1/C_i))a over the simplex, labels +1 and no bias
    problem = SimplexProblem(X, np.ones(60), 0.5 * weights, KernelSpec(kernel, 0.5, 1.0, 2), bias=False, lam=0.0)
    a_star, f_star, Q = exact_solution(problem)
    alpha = dense_dual(model, 60)
    assert alpha.sum() == pytest.approx(1.0) and np.all(alpha >= 0)
    assert problem.objective(alpha, Q) == pytest.approx(f_star, abs=1e-7)
    np.testing.assert_allclose(alpha, a_star, atol=1e-3)
    # KKT (Tsang et al. 2005): every SV sits on the margin, w'phi(x_i) + a_i / C_i = rho = a'Qa
    g = Q @ alpha
    assert model.rho_ == pytest.approx(alpha @ g, rel=1e-6)
    np.testing.assert_allclose(g[alpha > 1e-6], model.rho_, rtol=1e-5)
    # ... and the scores are w'phi(x) = sum_i a_i k(x_i, x)
    K = kernel_block(X, X, problem.kernel)
    np.testing.assert_allclose(model.score_samples(X), K @ alpha, rtol=1e-9, atol=1e-12)


def test_rbf_model_is_the_minimum_enclosing_ball():
    """With RBF the minimal-norm problem and the MEB (lam=1) have the same optimum (Tsang et al. 2005 eq. 5)."""
    rng = np.random.RandomState(2)
    X = rng.randn(50, 2)
    model = CoreOneClassSVM(C=3.0, gamma=0.7, tol=1e-8, random_state=0).fit(X)
    ball = SimplexProblem(X, np.ones(50), np.full(50, 3.0), KernelSpec("rbf", 0.7), bias=False, lam=1.0)
    a_ball, _, _ = exact_solution(ball)
    np.testing.assert_allclose(dense_dual(model, 50), a_ball, atol=1e-3)


@pytest.mark.parametrize("solver", ["coreset", "cvm"])
def test_flags_injected_outliers(blob, solver):
    inliers, outliers = blob
    model = CoreOneClassSVM(nu=0.05, solver=solver, random_state=0).fit(inliers)
    test = np.vstack([np.random.RandomState(5).randn(200, 3), outliers])
    is_outlier = np.r_[np.zeros(200), np.ones(len(outliers))]
    assert roc_auc_score(is_outlier, -model.decision_function(test)) > 0.99
    assert np.all(model.predict(outliers) == -1)
    assert np.mean(model.predict(test[:200]) == -1) < 0.15


@pytest.mark.parametrize("nu", [0.02, 0.1, 0.3])
def test_training_outlier_fraction_is_nu(blob, nu):
    inliers, _ = blob
    model = CoreOneClassSVM(nu=nu, random_state=0).fit(inliers)
    n_out = np.sum(model.predict(inliers) == -1)
    assert n_out == int(np.floor(nu * len(inliers) + 1e-9))
    # with C='auto' about nu of the points are SVs, i.e. below the model's own margin rho_ ...
    sv_fraction = len(model.support_) / len(inliers)
    below_rho = np.mean(model.score_samples(inliers) < model.rho_ * (1 - 1e-3))
    assert model.calibration_["rows"] == len(inliers)
    if nu >= 0.1:
        assert abs(sv_fraction - nu) <= 0.3 * nu
        assert abs(below_rho - nu) <= 0.3 * nu
    else:
        # ... unless even the hard ball has more SVs than that (here 8.5% of this small blob):
        # then C is the largest of the search range, the hard ball
        assert model.calibration_["C_times_W"] == pytest.approx(CALIBRATION_RANGE[1])
        assert sv_fraction > nu


@pytest.mark.parametrize("nu", [0.05, 0.1])
def test_new_normal_data_flagged_at_about_nu(nu):
    rng = np.random.RandomState(0)
    model = CoreOneClassSVM(nu=nu, random_state=0).fit(rng.randn(1000, 3))
    flagged = np.mean(model.predict(rng.randn(20000, 3)) == -1)
    assert 0.8 * nu < flagged < 1.3 * nu


def test_weighted_outlier_fraction():
    inliers, _ = blob_with_outliers(n_inliers=300)
    weights = np.random.RandomState(3).choice([1.0, 2.0, 3.0], size=300)
    model = CoreOneClassSVM(nu=0.1, random_state=0).fit(inliers, sample_weight=weights)
    out = model.decision_function(inliers) < 0
    share = weights[out].sum() / weights.sum()
    assert 0.1 - 3.0 / weights.sum() < share <= 0.1


def test_sample_weight_equals_repetition():
    X, _ = blob_with_outliers(n_inliers=120)
    counts = np.random.RandomState(4).randint(0, 3, size=len(X))
    kwargs = dict(nu=0.1, C=2.0, gamma=0.3, tol=1e-9, random_state=0)
    weighted = CoreOneClassSVM(**kwargs).fit(X, sample_weight=counts.astype(float))
    repeated = CoreOneClassSVM(**kwargs).fit(np.repeat(X, counts, axis=0))
    np.testing.assert_allclose(weighted.score_samples(X), repeated.score_samples(X), rtol=1e-5, atol=1e-7)
    assert weighted.offset_ == pytest.approx(repeated.offset_, rel=1e-5)
    assert weighted.C_ == 2.0 and weighted.calibration_ is None


def test_decision_function_is_score_minus_offset(blob):
    inliers, outliers = blob
    model = CoreOneClassSVM(random_state=0).fit(inliers)
    np.testing.assert_allclose(model.decision_function(outliers), model.score_samples(outliers) - model.offset_)
    np.testing.assert_allclose(model.intercept_, [-model.offset_])
    assert model.dual_coef_.shape == (1, len(model.support_))
    assert model.dual_coef_.sum() == pytest.approx(1.0)
    np.testing.assert_array_equal(model.support_vectors_, inliers[model.support_])
    assert model.fit_status_ == 0 and model.solver_info_["status"] == "converged"


@pytest.mark.parametrize("solver", ["coreset", "cvm"])
def test_sparse_and_float32_inputs(blob, solver):
    inliers, outliers = blob
    kwargs = dict(nu=0.1, C=50.0, tol=1e-8, solver=solver, random_state=0)
    dense = CoreOneClassSVM(**kwargs).fit(inliers)
    sparse = CoreOneClassSVM(**kwargs).fit(sp.csr_matrix(inliers))
    single = CoreOneClassSVM(**kwargs).fit(inliers.astype(np.float32))
    reference = dense.decision_function(outliers)
    # 'coreset' solves to tol exactly, so CSR and dense products agree to rounding.  'cvm' stops on a sampled
    # (1 + eps)-ball test (Tsang et al. 2005, sec. 4): last-bit differences between the CSR and the dense
    # products can change which sampled point is furthest, and so where it stops: over random_state 0-4 the
    # largest difference was 1.1e-4 (SciPy's CSR product) and 1.06e-4 (the compiled one), hence 2.5e-4.
    sparse_tolerance = 1e-8 if solver == "coreset" else 2.5e-4
    np.testing.assert_allclose(sparse.decision_function(sp.csr_matrix(outliers)), reference, atol=sparse_tolerance)
    np.testing.assert_array_equal(sparse.predict(sp.csr_matrix(outliers)), dense.predict(outliers))
    np.testing.assert_allclose(single.decision_function(outliers.astype(np.float32)), reference, atol=1e-4)
    assert sp.issparse(sparse.support_vectors_)
    assert single.support_vectors_.dtype == np.float32


def test_reproducible_with_random_state(blob):
    inliers, outliers = blob
    first = CoreOneClassSVM(nu=0.1, gamma="cvm", random_state=7).fit(inliers)
    second = CoreOneClassSVM(nu=0.1, gamma="cvm", random_state=7).fit(inliers)
    np.testing.assert_array_equal(first.support_, second.support_)
    np.testing.assert_array_equal(first.dual_coef_, second.dual_coef_)
    np.testing.assert_array_equal(first.decision_function(outliers), second.decision_function(outliers))


def test_max_time_keeps_the_model_so_far():
    X = np.random.RandomState(0).randn(3000, 5)
    model = CoreOneClassSVM(C=0.01, tol=1e-12, max_time=0.05, random_state=0)
    with pytest.warns(ConvergenceWarning) as caught:
        model.fit(X)
    assert all(w.filename == __file__ for w in caught if issubclass(w.category, ConvergenceWarning))  # our line
    assert model.fit_status_ == 1
    assert np.all(np.isfinite(model.decision_function(X[:10])))


@pytest.mark.parametrize(
    "params, message",
    [
        ({"nu": 0.0}, "nu"),
        ({"nu": 1.5}, "nu"),
        ({"nu": "0.1"}, "nu"),
        ({"C": -1.0}, "C"),
        ({"C": "big"}, "C"),
        ({"kernel": "cosine"}, "kernel"),
        ({"solver": "bvm"}, "solver"),
        ({"tol": 0}, "tol"),
        ({"gamma": -2.0}, "gamma"),
        ({"max_time": -1}, "max_time"),
    ],
)
def test_bad_parameters(params, message):
    with pytest.raises(ValueError, match=message):
        CoreOneClassSVM(**params).fit(np.random.RandomState(0).randn(20, 2))


def test_bad_input():
    X = np.random.RandomState(0).randn(20, 2)
    with pytest.raises(ValueError, match="NaN"):
        CoreOneClassSVM().fit(np.vstack([X, [[np.nan, 0.0]]]))
    with pytest.raises(ValueError, match="0 sample"):
        CoreOneClassSVM().fit(np.empty((0, 2)))
    with pytest.raises(ValueError, match="[Ss]ample.weight"):
        CoreOneClassSVM().fit(X, sample_weight=np.zeros(20))
    with pytest.raises(ValueError, match="[Ss]ample.weight"):
        CoreOneClassSVM().fit(X, sample_weight=-np.ones(20))
    model = CoreOneClassSVM(random_state=0).fit(X)
    with pytest.raises(ValueError, match="NaN"):
        model.predict(np.array([[np.inf, 0.0]]))
    with pytest.raises(ValueError, match="features"):
        model.predict(np.zeros((2, 3)))


def test_weighted_lower_quantile():
    scores = np.array([0.5, 0.1, 0.3, 0.3, 0.9])
    ones = np.ones(5)
    # 2 of 5 allowed below: 0.1 and one 0.3 -- but the 0.3s are tied, so only 0.1
    assert weighted_lower_quantile(scores, ones, 0.4) == pytest.approx(0.2)
    assert weighted_lower_quantile(scores, ones, 0.6) == pytest.approx(0.4)
    assert weighted_lower_quantile(scores, ones, 0.1) == 0.1  # nothing below the minimum
    assert weighted_lower_quantile(scores, ones, 1.0) > 0.9
    assert weighted_lower_quantile(scores, np.array([1.0, 3.0, 1.0, 1.0, 1.0]), 0.5) == pytest.approx(0.2)


def test_check_estimator():
    # C='auto' is also calibrated on X: test_sample_weight_equals_repetition fixes gamma and C.
    check_estimator_with_gamma_scale(CoreOneClassSVM(random_state=0))
