"""CoreSVC: scikit-learn compatibility, model formula, input handling, real data."""

import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_iris, make_blobs, make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.utils.estimator_checks import check_estimator

from coresvm import CoreSVC

SOLVERS = ["fw", "mfw", "swap", "partan", "cvm", "coreset"]


@pytest.fixture(scope="module")
def binary_data():
    X, y = make_classification(n_samples=300, n_features=6, n_informative=4, random_state=0)
    return X, y


def check_estimator_with_gamma_scale(estimator) -> None:
    """scikit-learn's estimator checks, with the two that gamma='scale' fails by design.

    gamma='scale' depends on the spread of X, which repeating rows changes while weighting them
    does not (scikit-learn's SVC is marked the same way); each estimator's tests show the
    equivalence with a fixed gamma (test_sample_weight_equals_repetition)."""
    expected = {
        "check_sample_weight_equivalence_on_dense_data": "gamma='scale' is computed from X",
        "check_sample_weight_equivalence_on_sparse_data": "gamma='scale' is computed from X",
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_estimator(estimator, expected_failed_checks=expected)


def test_check_estimator():
    check_estimator_with_gamma_scale(CoreSVC(random_state=0))


def test_sample_weight_equals_repetition(binary_data):
    X, y = binary_data
    weights = np.random.RandomState(0).randint(0, 3, size=len(y)).astype(float)
    weighted = CoreSVC(gamma=0.2, C=10, tol=1e-9, random_state=0).fit(X, y, sample_weight=weights)
    repeated = CoreSVC(gamma=0.2, C=10, tol=1e-9, random_state=0).fit(
        np.repeat(X, weights.astype(int), axis=0), np.repeat(y, weights.astype(int))
    )
    np.testing.assert_allclose(weighted.decision_function(X), repeated.decision_function(X), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("search", ["full", "random"])
def test_every_solver_learns(binary_data, solver, search):
    X, y = binary_data
    model = CoreSVC(C=10, gamma=0.2, solver=solver, search=search, tol=1e-2, max_iter=20000, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X[:200], y[:200])
    assert model.score(X[200:], y[200:]) > 0.85


def test_decision_function_is_the_explicit_formula(binary_data):
    X, y = binary_data
    model = CoreSVC(C=10, gamma=0.2, tol=1e-6, random_state=0).fit(X, y)
    K = rbf_kernel(X[:7], model.support_vectors_, gamma=0.2)
    explicit = K @ model.dual_coef_[0] + model.intercept_[0]
    np.testing.assert_allclose(model.decision_function(X[:7]), explicit, rtol=1e-10)
    # bias b = sum_i a_i y_i (Frandi et al. 2013 eq. 9), in the same rho-scaled units as dual_coef_
    assert model.intercept_[0] == pytest.approx(model.dual_coef_.sum())
    # margin support vectors sit at |f| <= 1 (y f(x_i) = 1 - xi_i / rho, xi_i = a_i / C)
    f_sv = model.decision_function(model.support_vectors_) * np.where(y[model.support_] == model.classes_[1], 1, -1)
    assert np.all(f_sv <= 1 + 1e-3)


def test_no_bias_model_has_zero_intercept(binary_data):
    X, y = binary_data
    model = CoreSVC(C=10, gamma=0.2, bias=False, random_state=0).fit(X, y)
    assert np.all(model.intercept_ == 0)
    assert model.score(X, y) > 0.85


def test_csr_and_dense_give_the_same_model(binary_data):
    X, y = binary_data
    # Sparse and dense inner products round differently, so the two runs take different
    # (equally valid) paths; at tol=1e-9 both end at the same optimum to ~1e-7.
    dense = CoreSVC(C=10, gamma=0.2, tol=1e-9, random_state=0).fit(X, y)
    sparse = CoreSVC(C=10, gamma=0.2, tol=1e-9, random_state=0).fit(sp.csr_matrix(X), y)
    assert sp.issparse(sparse.support_vectors_)
    np.testing.assert_array_equal(dense.support_, sparse.support_)
    np.testing.assert_allclose(dense.dual_coef_, sparse.dual_coef_, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(dense.decision_function(X), sparse.decision_function(sp.csr_matrix(X)), rtol=1e-6)


def test_float32_close_to_float64(binary_data):
    X, y = binary_data
    m64 = CoreSVC(C=10, gamma=0.2, tol=1e-6, random_state=0).fit(X, y)
    m32 = CoreSVC(C=10, gamma=0.2, tol=1e-6, random_state=0).fit(X.astype(np.float32), y)
    assert m32.support_vectors_.dtype == np.float32
    np.testing.assert_allclose(m64.decision_function(X), m32.decision_function(X), atol=1e-3)
    assert np.mean(m64.predict(X) == m32.predict(X)) > 0.99


@pytest.mark.parametrize("search", ["full", "random"])
def test_random_state_reproduces_the_model_exactly(binary_data, search):
    X, y = binary_data
    a = CoreSVC(C=10, gamma=0.2, search=search, random_state=7).fit(X, y)
    b = CoreSVC(C=10, gamma=0.2, search=search, random_state=7).fit(X, y)
    np.testing.assert_array_equal(a.support_, b.support_)
    np.testing.assert_array_equal(a.dual_coef_, b.dual_coef_)


def test_pickle_round_trip(binary_data):
    X, y = binary_data
    model = CoreSVC(C=10, gamma=0.2, random_state=0).fit(X, y)
    clone = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(model.decision_function(X), clone.decision_function(X))


def test_multiclass_one_vs_one():
    X, y = load_iris(return_X_y=True)
    model = CoreSVC(C=100, gamma=0.5, random_state=0).fit(X, y)
    assert model.score(X, y) > 0.95
    assert model.dual_coef_.shape == (2, len(model.support_))
    assert model.intercept_.shape == (3,)
    assert model.decision_function(X).shape == (150, 3)
    model.set_params(decision_function_shape="ovo")
    assert model.decision_function(X).shape == (150, 3)
    assert model.n_support_.sum() == len(model.support_)


def test_string_labels():
    X, y = make_blobs(n_samples=90, centers=3, random_state=0)
    labels = np.array(["ant", "bee", "cat"])[y]
    model = CoreSVC(C=10, random_state=0).fit(X, labels)
    assert set(model.predict(X)) <= set(labels)
    assert model.score(X, labels) > 0.9


def test_max_time_returns_anytime_model_with_warning(binary_data):
    X, y = binary_data
    with pytest.warns(ConvergenceWarning, match="max_iter"):
        model = CoreSVC(C=10, gamma=0.2, solver="fw", tol=1e-12, max_iter=30, random_state=0).fit(X, y)
    assert model.fit_status_ == 1
    assert model.solver_info_[0]["status"] == "max_iter"
    assert model.score(X, y) > 0.6


def test_verbose_prints_progress(binary_data, capsys):
    X, y = binary_data
    CoreSVC(C=10, gamma=0.2, verbose=True, random_state=0).fit(X, y)
    out = capsys.readouterr().out
    assert "iter" in out and "gap" in out and "#SV" in out


BAD_PARAMS = [
    ({"C": 0}, "C must be > 0"),
    ({"C": -1}, "C must be > 0"),
    ({"gamma": 0}, "gamma must be > 0"),
    ({"gamma": -0.5}, "gamma must be > 0"),
    ({"gamma": "wide"}, "gamma must be one of"),
    ({"solver": "newton"}, "solver must be one of"),
    ({"kernel": "laplace"}, "kernel must be one of"),
    ({"tol": 0}, "tol must be > 0"),
    ({"eta": 2.0}, "eta"),
    ({"sample_size": 0}, "sample_size must be an integer >= 1; got 0"),
    ({"search": "greedy"}, "search must be one of"),
    ({"max_time": -1}, "max_time must be > 0"),
]


@pytest.mark.parametrize("params,message", BAD_PARAMS)
def test_bad_parameters_raise_clear_errors(binary_data, params, message):
    X, y = binary_data
    with pytest.raises(ValueError, match=message):
        CoreSVC(**params).fit(X, y)


def test_bad_inputs_raise_clear_errors(binary_data):
    X, y = binary_data
    X_nan = X.copy()
    X_nan[3, 2] = np.nan
    with pytest.raises(ValueError, match="NaN or infinity"):
        CoreSVC().fit(X_nan, y)
    X_inf = X.copy()
    X_inf[0, 0] = np.inf
    with pytest.raises(ValueError, match="NaN or infinity"):
        CoreSVC().fit(X_inf, y)
    with pytest.raises(ValueError, match="2 classes"):
        CoreSVC().fit(X, np.ones(len(y)))
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        CoreSVC().fit(X, y[:-1])
    with pytest.raises(ValueError, match="(?i)negative"):
        CoreSVC().fit(X, y, sample_weight=-np.ones(len(y)))
    model = CoreSVC(random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        model.predict(X[:, :3])


def test_class_weight_is_a_per_class_multiplier_of_C(binary_data):
    X, y = binary_data
    by_class = CoreSVC(C=10, gamma=0.2, tol=1e-9, class_weight={0: 3.0, 1: 0.5}, random_state=0).fit(X, y)
    by_sample = CoreSVC(C=10, gamma=0.2, tol=1e-9, random_state=0).fit(X, y, sample_weight=np.where(y == 0, 3.0, 0.5))
    np.testing.assert_allclose(by_class.decision_function(X), by_sample.decision_function(X), rtol=1e-6, atol=1e-8)


def test_balanced_class_weight_raises_minority_recall():
    X, y = make_classification(n_samples=600, weights=[0.9, 0.1], flip_y=0.05, random_state=1)
    plain = CoreSVC(C=1, gamma=0.1, random_state=0).fit(X, y)
    balanced = CoreSVC(C=1, gamma=0.1, class_weight="balanced", random_state=0).fit(X, y)
    recall = lambda model: np.mean(model.predict(X[y == 1]) == 1)  # noqa: E731
    assert recall(balanced) > recall(plain)


def test_zero_sample_weight_means_ignore(binary_data):
    X, y = binary_data
    weights = np.ones(len(y))
    weights[:50] = 0
    weighted = CoreSVC(C=10, gamma=0.2, tol=1e-9, random_state=0).fit(X, y, sample_weight=weights)
    dropped = CoreSVC(C=10, gamma=0.2, tol=1e-9, random_state=0).fit(X[50:], y[50:])
    assert np.all(weighted.support_ >= 50)
    np.testing.assert_allclose(weighted.decision_function(X), dropped.decision_function(X), rtol=1e-6, atol=1e-8)


def test_max_time_is_a_budget_for_the_whole_multiclass_fit():
    X, y = make_blobs(n_samples=20000, centers=5, cluster_std=3.0, random_state=0)
    CoreSVC(C=1e6, gamma=1.0, max_time=0.05, random_state=0).fit(X[:500], y[:500])  # warm up
    start = __import__("time").perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        CoreSVC(C=1e6, gamma=1.0, tol=1e-9, max_time=1.0, random_state=0).fit(X, y)
    assert __import__("time").perf_counter() - start < 1.0 * 1.1 + 1.5


def test_break_ties_with_ovo_is_rejected():
    X, y = load_iris(return_X_y=True)
    model = CoreSVC(decision_function_shape="ovo", break_ties=True, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="break_ties"):
        model.predict(X)


def test_full_core_set_warns_to_raise_cache_size(binary_data):
    X, y = binary_data
    tiny = 64 * 64 * 4 / 2**20  # room for a 64-point core set; this problem has more support vectors
    with pytest.warns(ConvergenceWarning, match="Increase cache_size"):
        model = CoreSVC(C=1e4, gamma=2.0, cache_size=tiny, random_state=0).fit(X, y)
    assert model.solver_info_[0]["status"] == "core_set_full" and len(model.support_) <= 64


def test_full_core_set_warning_counts_cvm_capacity_at_its_radius_tolerance(binary_data):
    # CVM runs its core set at tol = (1 + eps)^2 - 1 (tiny), so its Gram is float64: a budget of
    # 100 x 100 float64 entries holds 100 points, not the 141 a float32 Gram at the user's tol would.
    X, y = binary_data
    budget_mb = 100 * 100 * 8 / 2**20
    with pytest.warns(ConvergenceWarning, match=r"holds 100 points"):
        model = CoreSVC(solver="cvm", C=1e4, gamma=2.0, cache_size=budget_mb, random_state=0).fit(X, y)
    assert model.solver_info_[0]["status"] == "core_set_full"


@pytest.mark.parametrize("multiclass", ["ovo", "joint"])
def test_convergence_warnings_point_at_the_callers_line(multiclass):
    X, y = load_iris(return_X_y=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        CoreSVC(multiclass=multiclass, max_iter=3, random_state=0).fit(X, y)
    stopped = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert stopped and all(w.filename == __file__ for w in stopped), [(w.filename, str(w.message)) for w in stopped]


def test_score_is_scikit_learns_accuracy_for_every_kind_of_target():
    """CoreSVC.score takes the mean directly for plain label arrays; it must equal ClassifierMixin.score (that is,
    accuracy_score) there, and hand anything else (weights, unseen labels, bad shapes) to accuracy_score."""
    from sklearn.base import ClassifierMixin
    from sklearn.metrics import accuracy_score

    rng = np.random.default_rng(0)
    X = rng.random((120, 3))
    for labels in (np.where(X[:, 0] > 0.5, 1, -1), np.where(X[:, 0] > 0.5, "yes", "no"),
                   np.digitize(X[:, 0], [0.33, 0.66]).astype(float)):
        model = CoreSVC(C=10.0, gamma=1.0, random_state=0).fit(X[:80], labels[:80])
        X_test, y_test = X[80:], labels[80:]
        expected = accuracy_score(y_test, model.predict(X_test))
        assert model.score(X_test, y_test) == ClassifierMixin.score(model, X_test, y_test) == expected
        assert model.score(X_test, list(y_test)) == expected
        weights = rng.random(40)
        assert model.score(X_test, y_test, sample_weight=weights) == pytest.approx(
            accuracy_score(y_test, model.predict(X_test), sample_weight=weights))
        unseen = y_test.copy()
        unseen[:5] = labels[0] * 3 if labels.dtype.kind != "U" else "maybe"  # labels the model never saw
        assert model.score(X_test, unseen) == ClassifierMixin.score(model, X_test, unseen)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        model.score(X_test, y_test[:-1])
    with pytest.raises(ValueError):
        model.score(X_test, y_test.reshape(-1, 1).repeat(2, axis=1))


def test_swap_defaults_to_the_papers_mdm_partner_and_coreset_to_imdm(binary_data):
    """solver='swap' is the SWAP of Frandi, Nanculef and Suykens (2015, sec. 2): by default its pairwise step takes
    weight from the active vertex of largest gradient (MDM), not the IMDM partner; IMDM stays available by name,
    and the core-set solver's inner solve keeps IMDM."""
    X, y = binary_data
    params = dict(C=10, gamma=0.2, solver="swap", search="full", tol=1e-6, random_state=0)

    def run(**extra):
        model = CoreSVC(**params, **extra).fit(X, y)
        return model.solver_info_[0]["iterations"], model.dual_coef_

    default_iter, default_coef = run()
    mdm_iter, mdm_coef = run(selection="mdm")
    imdm_iter, _ = run(selection="imdm")
    assert default_iter == mdm_iter
    np.testing.assert_array_equal(default_coef, mdm_coef)
    assert imdm_iter != mdm_iter  # the two rules take different paths on this problem
    assert CoreSVC(solver="swap")._second_vertex_rule == "mdm"
    assert CoreSVC(solver="coreset")._second_vertex_rule == "imdm"
    assert CoreSVC(solver="mnsvm")._second_vertex_rule == "imdm"
    assert CoreSVC(solver="swap", selection="gmdm")._second_vertex_rule == "gmdm"
