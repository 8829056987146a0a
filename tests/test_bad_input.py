"""The bad-input table (docs/bad_input.md): every row is a test here.

Each bad input ends in a clear error that names the parameter or value, or in a
correct model -- checked against the exact QP (tests/test_solvers.exact_solution)
on small data.  tests/test_svc.py and tests/test_cli.py cover some rows already
(C <= 0, gamma <= 0, eta = 2, tol = 0, sample_size = 0, unknown solver/kernel,
NaN/inf in dense X, one class, mismatched lengths, negative weights, fewer
features at predict, zero weights meaning "ignore"); this file adds the rest and
runs the shared rows on AESVC too.
"""

import gzip
import lzma
import os
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_svmlight_file, load_wine
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC
from sklearn.utils.validation import check_is_fitted
from test_solvers import exact_solution

from coresvm import AESVC, CoreOneClassSVM, CoreSVC, load_model, save_model
from coresvm._validation import (
    FEATURE_SCALE_WARN_RATIO,
    DegenerateKernelWarning,
    FeatureScaleWarning,
    KernelRangeError,
    check_kernel_range,
    feature_scale_ratio,
)
from coresvm.cli import main
from coresvm.datasets import datasets_dir
from coresvm.kernels import KernelSpec, resolve_gamma
from coresvm.model_io import ModelFormatError, read_metadata
from coresvm.problem import SimplexProblem

ESTIMATORS = [CoreSVC, AESVC]


@pytest.fixture(scope="module")
def data():
    rng = np.random.RandomState(0)
    X = rng.randn(60, 4)
    y = np.where(X[:, 0] + 0.5 * X[:, 1] + 0.3 * rng.randn(60) > 0, 1, 0)
    return X, y


def quiet_fit(model, X, y, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(X, y, **kwargs)


# ----------------------------------------------------------------------------------------- parameters
CORESVC_BAD_PARAMS = [
    ({"C": np.nan}, "C must be > 0; got nan"),
    ({"C": np.inf}, "C must be > 0; got inf"),
    ({"C": "1"}, "C must be a positive number; got '1'"),
    ({"C": True}, "C must be a positive number; got True"),
    ({"gamma": np.nan}, "gamma must be > 0; got nan"),
    ({"gamma": np.inf}, "gamma must be > 0; got inf"),
    ({"eta": 0.5}, r"eta \(over-relaxation\) must be in \[1, 2\); got 0.5"),
    ({"eta": 2.5}, r"eta \(over-relaxation\) must be in \[1, 2\); got 2.5"),
    ({"eta": np.nan}, r"eta \(over-relaxation\) must be in \[1, 2\); got nan"),
    ({"tol": -1e-3}, "tol must be > 0; got -0.001"),
    ({"tol": np.nan}, "tol must be > 0; got nan"),
    ({"sample_size": -3}, "sample_size must be an integer >= 1; got -3"),
    ({"sample_size": 2.5}, "sample_size must be an integer >= 1; got 2.5"),
    ({"sample_size": True}, "sample_size must be an integer >= 1; got True"),
    ({"kernel": None}, "kernel must be one of .*; got None"),
    ({"kernel": "RBF"}, "kernel must be one of .*; got 'RBF'"),
    ({"solver": "smo"}, "solver must be one of .*; got 'smo'"),
    ({"decision_function_shape": "ova"}, "decision_function_shape must be one of .*; got 'ova'"),
    ({"selection": "best"}, "selection must be one of .*; got 'best'"),
    ({"stopping": "gap"}, "stopping must be one of .*; got 'gap'"),
    ({"sampling": "fair"}, "sampling must be one of .*; got 'fair'"),
    ({"bias": "average"}, "bias must be one of .*; got 'average'"),
    ({"degree": 0}, "degree must be an integer >= 1; got 0"),
    ({"solver": "bvm", "kernel": "poly"}, "solver='bvm' solves a minimum enclosing ball"),
]


@pytest.mark.parametrize("params, match", CORESVC_BAD_PARAMS)
def test_coresvc_bad_parameter_names_it(data, params, match):
    with pytest.raises(ValueError, match=match):
        CoreSVC(**params).fit(*data)


AESVC_BAD_PARAMS = [
    ({"C": 0}, "C must be > 0; got 0"),
    ({"C": -1.0}, "C must be > 0; got -1.0"),
    ({"gamma": 0.0}, "gamma must be > 0; got 0.0"),
    ({"gamma": "wide"}, "gamma must be one of .*; got 'wide'"),
    ({"tol": 0}, "tol must be > 0; got 0"),
    ({"kernel": "laplace"}, "kernel must be one of .*; got 'laplace'"),
    ({"segmentation": "kmeans"}, "segmentation must be one of .*; got 'kmeans'"),
    ({"epsilon": -1e-3}, "epsilon must be a finite number >= 0; got -0.001"),
    ({"P": 0}, "P must be an integer >= 1; got 0"),
    ({"V": 500, "P": 100}, "V must be <= P"),
    ({"decision_function_shape": "ova"}, "decision_function_shape must be one of .*; got 'ova'"),
]


@pytest.mark.parametrize("params, match", AESVC_BAD_PARAMS)
def test_aesvc_bad_parameter_names_it(data, params, match):
    with pytest.raises(ValueError, match=match):
        AESVC(**params).fit(*data)


def test_cli_unknown_multiclass_and_kernel_names(capsys, tmp_path, data):
    from sklearn.datasets import dump_svmlight_file

    X, y = data
    path = tmp_path / "train.txt"
    dump_svmlight_file(X, 2 * y - 1, str(path), zero_based=False)
    for argv, match in [(["-u", "ovr"], "argument -u/--multiclass: invalid choice: 'ovr'"),
                        (["-t", "laplace"], "-t takes a kernel type"),
                        (["--solver", "smo"], "invalid choice: 'smo'")]:
        assert main(["train", *argv, str(path), str(tmp_path / "m")]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and match in err, err


# ----------------------------------------------------------------------------------------- data
@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_nan_and_inf_in_sparse_x(data, Estimator):
    X, y = data
    for bad in (np.nan, np.inf, -np.inf):
        X_bad = sp.csr_matrix(X)
        X_bad.data[5] = bad
        with pytest.raises(ValueError, match="NaN or infinity"):
            Estimator().fit(X_bad, y)


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_nan_in_dense_x_for_aesvc_and_at_predict(data, Estimator):
    X, y = data
    X_bad = X.copy()
    X_bad[7, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        Estimator().fit(X_bad, y)
    model = Estimator(random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="NaN"):
        model.predict(X_bad)


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_empty_x(Estimator):
    with pytest.raises(ValueError, match=r"0 sample\(s\)"):
        Estimator().fit(np.zeros((0, 3)), np.zeros(0))
    with pytest.raises(ValueError, match=r"0 feature\(s\)"):
        Estimator().fit(np.zeros((6, 0)), np.arange(6) % 2)
    with pytest.raises(ValueError, match=r"0 sample\(s\)"):
        Estimator().fit(sp.csr_matrix((0, 3)), np.zeros(0))


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_one_class(data, Estimator):
    X, y = data
    with pytest.raises(ValueError, match="at least 2 classes; got only one class"):
        Estimator().fit(X, np.full(len(y), "spam"))
    # one class left after zero weights remove the other
    with pytest.raises(ValueError, match="at least 2 classes; got only one class"):
        Estimator().fit(X, y, sample_weight=(y == 1).astype(float))


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_label_types(data, Estimator):
    X, y = data
    with pytest.raises(ValueError, match=r"non-integer float labels, e.g. 1.5"):
        Estimator().fit(X, y + 0.5)
    with pytest.raises(ValueError, match=r"mixes label types \(number, str\)"):
        Estimator().fit(X, np.array([1, "a"] * (len(y) // 2), dtype=object))
    # integral floats and strings are classes; predict returns the given labels
    floats = quiet_fit(Estimator(random_state=0), X, y.astype(float) * 2 - 1)
    assert floats.classes_.dtype.kind == "f" and set(floats.predict(X)) <= {-1.0, 1.0}
    strings = quiet_fit(Estimator(random_state=0), X, np.array(["no", "yes"])[y])
    assert set(strings.predict(X)) <= {"no", "yes"}
    np.testing.assert_array_equal(strings.predict(X) == "yes", floats.predict(X) == 1.0)


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_mismatched_lengths(data, Estimator):
    X, y = data
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        Estimator().fit(X[:-1], y)
    with pytest.raises(ValueError, match=r"sample_weight.shape == \(59,\), expected \(60,\)"):
        Estimator().fit(X, y, sample_weight=np.ones(59))


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_bad_sample_weights(data, Estimator):
    X, y = data
    negative = np.ones(len(y))
    negative[3] = -0.5
    with pytest.raises(ValueError, match="(?i)negative"):
        Estimator().fit(X, y, sample_weight=negative)
    with pytest.raises(ValueError, match="NaN"):
        Estimator().fit(X, y, sample_weight=np.full(len(y), np.nan))
    with pytest.raises(ValueError, match="non-zero"):
        Estimator().fit(X, y, sample_weight=np.zeros(len(y)))


def test_aesvc_zero_weight_means_ignore(data):
    X, y = data
    weights = np.ones(len(y))
    weights[:15] = 0
    weighted = AESVC(gamma=0.3, epsilon=1e-9).fit(X, y, sample_weight=weights)
    dropped = AESVC(gamma=0.3, epsilon=1e-9).fit(X[15:], y[15:])
    assert np.all(weighted.support_ >= 15)
    np.testing.assert_allclose(weighted.decision_function(X), dropped.decision_function(X), atol=1e-8)


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_predict_with_another_number_of_features(tmp_path, data, Estimator):
    X, y = data
    model = Estimator(random_state=0).fit(X, y)
    for X_other in (np.hstack([X, X]), sp.csr_matrix(X[:, :2]), sp.csr_matrix(np.hstack([X, X]))):
        with pytest.raises(ValueError, match=rf"X has {X_other.shape[1]} features, but \w+ is expecting 4"):
            model.predict(X_other)
        with pytest.raises(ValueError, match="expecting 4 features"):
            model.decision_function(X_other)
    if Estimator is CoreSVC:  # a model read back from a file keeps the check
        save_model(model, tmp_path / "m")
        with pytest.raises(ValueError, match="expecting 4 features"):
            load_model(tmp_path / "m").predict(np.hstack([X, X]))


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_a_failed_fit_leaves_the_estimator_unfitted(data, Estimator):
    """A refit that fails (here: one class) must not leave the old model mixed with new attributes."""
    X, y = data
    model = Estimator(random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="2 classes"):
        model.fit(X[:, :2], np.zeros(len(y)))
    with pytest.raises(NotFittedError):
        check_is_fitted(model)
    with pytest.raises(NotFittedError):
        model.predict(X)
    assert model.fit(X, y).score(X, y) > 0.8  # and it can be fitted again


# ----------------------------------------------------------------------------------------- sparse layout
def _non_canonical_variants(X):
    """The same matrix as CSR with reversed (unsorted) indices, with stored zeros, and with split duplicates."""
    A = sp.csr_matrix(X)
    unsorted = A.copy()
    for r in range(A.shape[0]):
        lo, hi = A.indptr[r], A.indptr[r + 1]
        unsorted.indices[lo:hi] = A.indices[lo:hi][::-1]
        unsorted.data[lo:hi] = A.data[lo:hi][::-1]
    unsorted.has_sorted_indices = False
    coo = A.tocoo()
    dense = A.toarray()
    extra_rows = np.flatnonzero((dense == 0).any(axis=1))[::2]
    zero_cols = np.argmax(dense[extra_rows] == 0, axis=1)
    rows, cols = np.r_[coo.row, extra_rows], np.r_[coo.col, zero_cols]
    order = np.lexsort((cols, rows))
    zeros = sp.csr_matrix((np.r_[coo.data, np.zeros(len(extra_rows))][order], cols[order],
                           np.r_[0, np.cumsum(np.bincount(rows, minlength=A.shape[0]))]), shape=A.shape)
    rows, cols = np.r_[coo.row, coo.row], np.r_[coo.col, coo.col]
    order = np.argsort(rows, kind="stable")
    duplicates = sp.csr_matrix((np.r_[coo.data * 0.25, coo.data * 0.75][order], cols[order],
                                np.r_[0, np.cumsum(np.bincount(rows, minlength=A.shape[0]))]), shape=A.shape)
    assert not unsorted.has_sorted_indices and np.sum(zeros.data == 0) == len(extra_rows)
    assert not duplicates.has_canonical_format
    return A, {"unsorted indices": unsorted, "explicit zeros": zeros, "duplicated indices": duplicates}


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_non_canonical_csr_gives_the_canonical_model(data, Estimator):
    """Regression: AESVC (scikit-learn's SVC underneath) read duplicated CSR entries as they were stored,
    a wrong model (decision values off by 1.7); now every layout gives the canonical model bit for bit."""
    X, y = data
    X = np.where(np.abs(X) < 0.4, 0.0, X)
    canonical, variants = _non_canonical_variants(X)
    reference = Estimator(C=10, gamma=0.3, random_state=0).fit(canonical, y)
    expected = reference.decision_function(canonical)
    for name, variant in variants.items():
        np.testing.assert_allclose(variant.toarray(), X, rtol=1e-15, err_msg=name)
        model = Estimator(C=10, gamma=0.3, random_state=0).fit(variant, y)
        np.testing.assert_array_equal(model.decision_function(canonical), expected, err_msg=name)
        np.testing.assert_array_equal(reference.decision_function(variant), expected, err_msg=name)
        assert variant.has_canonical_format == (name == "explicit zeros")  # the caller's matrix is not changed


# ----------------------------------------------------------------------------------------- correct models
def _exact(X, signs, C, gamma):
    problem = SimplexProblem(X, signs.astype(float), np.full(len(signs), float(C)), KernelSpec("rbf", gamma=gamma))
    _, f_star, Q = exact_solution(problem)
    return problem, f_star, Q


def _model_alpha(model, X, y):
    """The model's simplex weights per training row.  A support vector that stands for repeated rows (same
    features and label: the fit merges them) shares its weight equally among them, as the unmerged problem's
    optimum does with one C for all."""
    alpha = np.zeros(len(y))
    for row, weight in zip(model.support_, np.abs(model.dual_coef_[0]), strict=True):
        same = np.flatnonzero(np.all(X == X[row], axis=1) & (y == y[row]))
        alpha[same] += weight / len(same)
    return alpha / alpha.sum()


def assert_exact_optimum(model, X, y, C, gamma, rel=1e-5):
    """The fitted CoreSVC is the exact QP's optimum: objective within ``rel`` and feasible."""
    signs = np.where(y == model.classes_[1], 1, -1)
    problem, f_star, Q = _exact(X, signs, C, gamma)
    alpha = _model_alpha(model, X, y)
    f = problem.objective(alpha, Q)
    assert f - f_star <= rel * f_star + 1e-15, (f, f_star)
    assert f >= f_star * (1 - 1e-9)


# the solvers whose stopping rule bounds the duality gap (see test_properties.py for the others)
EXACT_SOLVERS = [dict(solver="coreset"), dict(solver="swap"), dict(solver="mnsvm", stopping="mn", eps=1e-7)]


@pytest.mark.parametrize("solver", EXACT_SOLVERS, ids=lambda p: p["solver"])
def test_all_identical_points(solver):
    X = np.ones((20, 3))
    y = np.r_[np.ones(12), np.zeros(8)].astype(int)
    model = CoreSVC(C=10, gamma=0.5, tol=1e-8, random_state=0, **solver).fit(X, y)
    assert_exact_optimum(model, X, y, 10, 0.5)
    assert np.all(model.predict(X) == 1)  # the majority, as the exact QP's decision sum_i a_i y_i (k + 1) > 0
    balanced = CoreSVC(C=10, gamma=0.5, tol=1e-8, random_state=0, **solver).fit(X[4:], y[4:])
    assert np.all(np.abs(balanced.decision_function(X)) < 1e-6)  # a tie: the exact decision is 0


def test_all_identical_points_aesvc_agrees_with_svc():
    X = np.ones((20, 3))
    y = np.r_[np.ones(12), np.zeros(8)].astype(int)
    np.testing.assert_array_equal(AESVC(C=10).fit(X, y).predict(X), SVC(C=10).fit(X, y).predict(X))


@pytest.mark.parametrize("solver", EXACT_SOLVERS, ids=lambda p: p["solver"])
def test_duplicated_points_with_opposite_labels(data, solver):
    X, y = data
    X = np.vstack([X[:30], X[:10]])
    y = np.r_[y[:30], 1 - y[:10]]
    model = CoreSVC(C=10, gamma=0.3, tol=1e-8, random_state=0, **solver).fit(X, y)
    assert_exact_optimum(model, X, y, 10, 0.3)


def test_duplicated_points_with_opposite_labels_aesvc(data):
    X, y = data
    X = np.vstack([X[:30], X[:10]])
    y = np.r_[y[:30], 1 - y[:10]]
    aesvc = AESVC(C=10, gamma=0.3, epsilon=1e-9).fit(X, y)
    svc = SVC(C=10, gamma=0.3).fit(X, y)
    np.testing.assert_allclose(aesvc.decision_function(X), svc.decision_function(X), atol=1e-3)


def _xor(m=30):
    rng = np.random.RandomState(0)
    X = rng.randn(m, 2)
    return X, np.where(X[:, 0] * X[:, 1] > 0, 1, 0)


@pytest.mark.parametrize("C", [1e8, 1e-8])
@pytest.mark.parametrize("solver", EXACT_SOLVERS, ids=lambda p: p["solver"])
def test_extreme_c_gives_the_exact_qp_optimum(C, solver):
    """C = 1e8 makes 1/C a 1e-8 ridge (hard margin, ill-conditioned Q); C = 1e-8 a 1e8 diagonal
    (alpha ~ uniform, rho ~ 1/(mC)).  Both are solved to the exact optimum."""
    X, y = _xor()
    model = CoreSVC(C=C, gamma=0.5, tol=1e-7, random_state=0, **solver).fit(X, y)
    assert model.fit_status_ == 0
    assert_exact_optimum(model, X, y, C, 0.5)
    if C == 1e8:
        assert model.score(X, y) == 1.0  # hard margin separates the training data


@pytest.mark.parametrize("C", [1e8, 1e-8])
def test_extreme_c_aesvc_agrees_with_svc(C):
    X, y = _xor()
    aesvc = AESVC(C=C, gamma=0.5, epsilon=1e-9).fit(X, y)
    svc = SVC(C=C, gamma=0.5).fit(X, y)
    np.testing.assert_array_equal(aesvc.predict(X), svc.predict(X))


# ----------------------------------------------------------------------------------------- feature scales
def _scaled(X):
    return X * np.logspace(0, 5, X.shape[1])  # std ratio ~1e5


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_wildly_different_scales_warn_and_suggest_scaling(data, Estimator):
    X, y = data
    with pytest.warns(FeatureScaleWarning, match=r"differ by a factor of .*StandardScaler"):
        Estimator(random_state=0).fit(_scaled(X), y)
    with pytest.warns(FeatureScaleWarning):
        Estimator(random_state=0).fit(sp.csr_matrix(_scaled(X)), y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FeatureScaleWarning)
        quiet_fit(Estimator(random_state=0), X, y)
        # no warning for the linear kernel (scales only change the effective C); max_iter because
        # the unscaled linear problem is badly conditioned (SVC took 311 s on these 60 points)
        quiet_fit(Estimator(kernel="linear", max_iter=200), _scaled(X), y)


def test_scale_warning_fires_where_scaling_matters():
    """Unscaled breast cancer (std ratio 2.2e5): the RBF model is poor until the features are scaled."""
    X, y = load_breast_cancer(return_X_y=True)
    with pytest.warns(FeatureScaleWarning):
        raw = quiet_fit(CoreSVC(C=10, random_state=0), X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FeatureScaleWarning)
        scaled = quiet_fit(CoreSVC(C=10, random_state=0), StandardScaler().fit_transform(X), y)
    Xs = StandardScaler().fit_transform(X)
    assert scaled.score(Xs, y) > raw.score(X, y) + 0.05


def test_scale_warning_is_quiet_on_normal_data():
    for loader in (load_iris, load_wine, load_digits):
        assert feature_scale_ratio(loader().data) < FEATURE_SCALE_WARN_RATIO / 3, loader.__name__
    assert feature_scale_ratio(np.c_[np.ones(50), np.arange(50.0)]) == 1.0  # a constant column is not a scale


BENCHMARK_FILES = ["a9a.xz", "w8a.xz", "ijcnn1.xz", "letter.scale.xz", "pendigits.xz", "zip.train.gz"]


@pytest.mark.parametrize("name", BENCHMARK_FILES)
def test_scale_warning_is_quiet_on_the_benchmark_sets(name):
    path = datasets_dir() / name
    if not path.exists():
        pytest.skip(f"{path} not available")
    if name.startswith("zip"):
        with gzip.open(path, "rt") as handle:
            X = np.loadtxt(handle)[:, 1:]
    else:
        with lzma.open(path, "rb") as handle:
            X, _ = load_svmlight_file(handle)
    ratio = feature_scale_ratio(X)
    assert ratio < FEATURE_SCALE_WARN_RATIO / 10, ratio  # measured: a9a 90, w8a 32, zip 19, others < 3
    with warnings.catch_warnings():
        warnings.simplefilter("error", DegenerateKernelWarning)  # and the kernel-range check is silent too
        check_kernel_range(X, KernelSpec("rbf", resolve_gamma("scale", X)), "CoreSVC")


# ----------------------------------------------------------------------------------------- kernel range (issue 31)
RANGE_ESTIMATORS = [CoreSVC, AESVC, CoreOneClassSVM]


def _fit_any(Estimator, X, y, **params):
    """Fit a classifier on (X, y), the one-class model on X alone (ConvergenceWarnings silenced)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return Estimator(**params).fit(X) if Estimator is CoreOneClassSVM else Estimator(**params).fit(X, y)


EXTREME_SCALES = {  # case: (make the training X from well-scaled X, message)
    "1e300": (lambda X: X * 1e300, "squared row norms overflow float64"),
    "1e300 CSR": (lambda X: sp.csr_matrix(X * 1e300), "squared row norms overflow float64"),
    "float32 1e19": (lambda X: (X * 1e19).astype(np.float32), "beyond float32's range"),
    "1e-160": (lambda X: X * 1e-160, "gamma resolved to inf"),
}


@pytest.mark.parametrize("Estimator", RANGE_ESTIMATORS)
@pytest.mark.parametrize("case", EXTREME_SCALES)
def test_features_of_extreme_scale_raise_a_clear_error(data, Estimator, case):
    """Before: CoreSVC 'fitted' X * 1e300 to a chance-level model with only NumPy warnings (1e-160: gamma = inf,
    the same), float32 at 1e19 overflowed in float32 products, AESVC crashed (segfault) on X * 1e155."""
    X, y = data
    make, match = EXTREME_SCALES[case]
    with pytest.raises(KernelRangeError, match=f"{match}.*StandardScaler") as info:
        _fit_any(Estimator, make(X), y)
    assert isinstance(info.value, ValueError) and "\n" not in str(info.value)


@pytest.mark.parametrize("params, scale", [
    (dict(kernel="poly", gamma=1.0, degree=3), 1e110),  # (gamma <x, x'>)^3 ~ 1e660
    (dict(kernel="linear"), 1e155),  # <x, x'> ~ 1e310
])
def test_polynomial_and_linear_kernel_overflow_raise_a_clear_error(data, params, scale):
    X, y = data
    with pytest.raises(KernelRangeError, match="StandardScaler"):
        CoreSVC(**params).fit(X * scale, y)
    with pytest.raises(KernelRangeError, match="StandardScaler"):
        AESVC(**params).fit(X * scale, y)


@pytest.mark.parametrize("Estimator", RANGE_ESTIMATORS)
@pytest.mark.parametrize("gamma, match", [(1e6, "below 1e-12.*memorises"), (1e-15, "above 1 - 1e-12.*chance")])
def test_degenerate_rbf_kernel_warns(data, Estimator, gamma, match):
    """gamma * ||x - x'||^2 far above 27.6 (every off-diagonal value < 1e-12) or below 1e-12 (every value ~ 1)."""
    X, y = data
    with pytest.warns(DegenerateKernelWarning, match=match):
        _fit_any(Estimator, X, y, gamma=gamma)


def test_degenerate_warning_is_quiet_on_normal_and_constant_data(data):
    """No warning for gamma='scale' on ordinary data, nor for identical points (k = 1 whatever gamma is)."""
    X, y = data
    with warnings.catch_warnings():
        warnings.simplefilter("error", DegenerateKernelWarning)
        for loader in (load_iris, load_wine, load_digits, load_breast_cancer):
            X_real = loader().data
            check_kernel_range(X_real, KernelSpec("rbf", resolve_gamma("scale", X_real)), "CoreSVC")
        check_kernel_range(np.ones((20, 3)), KernelSpec("rbf", 1e6), "CoreSVC")  # constant: k = 1 for all pairs
        quiet_fit(CoreSVC(random_state=0), X, y)
        quiet_fit(CoreSVC(gamma=0.01, random_state=0), X, y)  # ||x - x'||^2 ~ 8: k ~ 0.92, informative


def test_kernel_range_check_is_deterministic_and_leaves_the_model_unchanged(data, monkeypatch):
    X, y = data
    spec = KernelSpec("rbf", 1e6)
    messages = []
    for _ in range(2):
        with pytest.warns(DegenerateKernelWarning) as record:
            check_kernel_range(X, spec, "CoreSVC")
        messages.append(str(record[0].message))
    assert messages[0] == messages[1]
    checked = CoreSVC(random_state=0).fit(X, y)
    monkeypatch.setattr("coresvm.svc.check_kernel_range", lambda *args, **kwargs: None)
    unchecked = CoreSVC(random_state=0).fit(X, y)
    np.testing.assert_array_equal(checked.decision_function(X), unchecked.decision_function(X))


def test_kernel_range_check_never_densifies_sparse_input(data, monkeypatch):
    X, y = data

    def refuse(*args, **kwargs):
        raise AssertionError("a CSR matrix was made dense")

    for cls in (sp.csr_matrix, sp.csr_array):
        monkeypatch.setattr(cls, "toarray", refuse)
        monkeypatch.setattr(cls, "todense", refuse)
    with pytest.raises(KernelRangeError, match="overflow float64"):
        check_kernel_range(sp.csr_matrix(X * 1e300), KernelSpec("rbf", 1.0), "CoreSVC")
    with pytest.raises(KernelRangeError, match="float32"):
        check_kernel_range(sp.csr_matrix((X * 1e19).astype(np.float32)), KernelSpec("rbf", 1.0), "CoreSVC")
    with pytest.warns(DegenerateKernelWarning, match="below 1e-12"):
        check_kernel_range(sp.csr_matrix(X), KernelSpec("rbf", 1e6), "CoreSVC")
    rows = np.arange(len(y)) % 2 == 0  # only the rows a weighted fit uses are checked
    X_half = X.copy()
    X_half[~rows] *= 1e300
    check_kernel_range(sp.csr_matrix(X_half), KernelSpec("rbf", 1.0), "CoreSVC", rows)


# ----------------------------------------------------------------------------------------- model paths (issue 31)
def _unreadable(monkeypatch, path):
    """A file that cannot be read (chmod 000 does not stop root, who runs CI): open() raises PermissionError."""
    path.write_bytes(b"PK\x03\x04")
    real_open = open

    def refusing(file, *args, **kwargs):
        if str(file) == str(path):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr("builtins.open", refusing)
    return path


def _written(path, content: bytes):
    path.write_bytes(content)
    return path


MODEL_PATH_CASES = {  # case: (message, make(tmp_path, model file bytes, monkeypatch) -> the path)
    "missing": ("no such model file", lambda tmp, model, patch: tmp / "missing.model"),
    "directory": ("is a directory", lambda tmp, model, patch: tmp),
    "under a file": ("not a directory", lambda tmp, model, patch: _written(tmp / "f", b"x") / "m"),
    "unreadable": ("permission denied", lambda tmp, model, patch: _unreadable(patch, tmp / "u")),
    "not a model": ("not a model file", lambda tmp, model, patch: _written(tmp / "t", b"1 1:0.5\n")),
    "empty": ("not a model file", lambda tmp, model, patch: _written(tmp / "e", b"")),
    "truncated": ("truncated or corrupt", lambda tmp, model, patch: _written(tmp / "c", model[: len(model) // 2])),
}


@pytest.fixture(scope="module")
def model_bytes(data, tmp_path_factory):
    path = tmp_path_factory.mktemp("model") / "m"
    save_model(CoreSVC(random_state=0).fit(*data), path)
    return path.read_bytes()


@pytest.mark.parametrize("case", MODEL_PATH_CASES)
def test_every_wrong_model_path_is_a_model_format_error(tmp_path, monkeypatch, model_bytes, case):
    """Before: a directory raised a bare IsADirectoryError, a missing file FileNotFoundError, a path under a file
    NotADirectoryError, an unreadable file PermissionError."""
    match, make = MODEL_PATH_CASES[case]
    path = make(tmp_path, model_bytes, monkeypatch)
    for read in (load_model, read_metadata):
        with pytest.raises(ModelFormatError, match=match) as info:
            read(path)
        assert str(path) in str(info.value) and "\n" not in str(info.value)
    if case == "missing":  # still the FileNotFoundError it was
        with pytest.raises(FileNotFoundError):
            load_model(path)


@pytest.mark.parametrize("case", MODEL_PATH_CASES)
def test_cli_wrong_model_path_exits_2_with_one_line(tmp_path, monkeypatch, capsys, model_bytes, data, case):
    """Before: exit 2 already, but with the OS's words ("cannot access ...: Is a directory"), not the model file's."""
    from sklearn.datasets import dump_svmlight_file

    data_path = tmp_path / "test.txt"
    dump_svmlight_file(data[0][:5], data[1][:5], str(data_path), zero_based=False)
    model_dir = tmp_path / "models"
    model_dir.mkdir()
    match, make = MODEL_PATH_CASES[case]
    path = make(model_dir, model_bytes, monkeypatch)
    match = "file not found" if case in ("missing", "under a file") else match  # the command line checks that first
    for argv in (["predict", str(data_path), str(path), str(tmp_path / "out")], ["info", str(path)]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and str(path) in err and match in err, err


def test_unreadable_device_is_a_model_format_error():
    """A real read error (EIO), not a simulated one: /proc/self/mem cannot be read from offset 0."""
    if not os.path.exists("/proc/self/mem"):
        pytest.skip("no /proc")
    with pytest.raises(ModelFormatError, match="cannot read the model file"):
        load_model("/proc/self/mem")
