"""The shared estimator base: every estimator takes dense, CSR, memory-mapped and Zarr input alike."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_classification

from coresvm import AESVC, CoreOneClassSVM, CoreSVC
from coresvm.estimator import CoreEstimatorBase, check_sample_weight

ESTIMATORS = [CoreSVC(C=10.0, random_state=0), CoreOneClassSVM(random_state=0),
              AESVC(C=10.0, cache_representative_set=False)]


@pytest.fixture(autouse=True)
def python_core_set_loop(monkeypatch):
    """CoreSVC's compiled small-problem path takes in-memory arrays only: compare like with like."""
    import coresvm.svc as svc_module

    monkeypatch.setattr(svc_module, "SMALL_PROBLEM_FAST_PATH", False)


@pytest.fixture(scope="module")
def data():
    X, y = make_classification(500, 4, n_informative=3, n_redundant=0, random_state=0)
    return X, y, X[:120] + 0.05


def _fit(model, X, y):
    return model.fit(X) if isinstance(model, CoreOneClassSVM) else model.fit(X, y)


def _assert_same_model(a, b, X_test_a, X_test_b):
    np.testing.assert_array_equal(a.support_, b.support_)
    np.testing.assert_array_equal(a.dual_coef_, b.dual_coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)
    np.testing.assert_array_equal(a.predict(X_test_a), b.predict(X_test_b))
    np.testing.assert_array_equal(a.decision_function(X_test_a), b.decision_function(X_test_b))


def test_every_estimator_derives_from_the_base():
    assert all(isinstance(model, CoreEstimatorBase) for model in ESTIMATORS)


@pytest.mark.parametrize("model", ESTIMATORS, ids=lambda m: type(m).__name__)
def test_memmap_input_trains_and_predicts_like_the_in_memory_array(model, data, tmp_path):
    X, y, X_test = data
    np.save(tmp_path / "train.npy", X)
    np.save(tmp_path / "test.npy", X_test)
    mapped, mapped_test = np.load(tmp_path / "train.npy", mmap_mode="r"), np.load(tmp_path / "test.npy", mmap_mode="r")
    in_memory = _fit(clone(model), X, y)
    from_map = _fit(clone(model), mapped, y)
    assert from_map.n_features_in_ == X.shape[1]
    _assert_same_model(from_map, in_memory, mapped_test, X_test)


@pytest.mark.parametrize("model", ESTIMATORS, ids=lambda m: type(m).__name__)
def test_zarr_input_trains_and_predicts_like_the_in_memory_array(model, data):
    zarr = pytest.importorskip("zarr")
    X, y, X_test = data
    in_memory = _fit(clone(model), X, y)
    from_zarr = _fit(clone(model), zarr.array(X, chunks=(100, 4)), y)
    _assert_same_model(from_zarr, in_memory, zarr.array(X_test, chunks=(50, 4)), X_test)


@pytest.mark.parametrize("model", ESTIMATORS, ids=lambda m: type(m).__name__)
def test_memmap_with_nan_and_wrong_width_are_rejected(model, data, tmp_path):
    X, y, _ = data
    bad = X.copy()
    bad[3, 1] = np.nan
    np.save(tmp_path / "bad.npy", bad)
    with pytest.raises(ValueError, match="NaN or infinity"):
        _fit(clone(model), np.load(tmp_path / "bad.npy", mmap_mode="r"), y)
    fitted = _fit(clone(model), X, y)
    np.save(tmp_path / "wide.npy", np.zeros((5, X.shape[1] + 1)))
    with pytest.raises(ValueError, match="features"):
        fitted.predict(np.load(tmp_path / "wide.npy", mmap_mode="r"))


@pytest.mark.parametrize("model", ESTIMATORS, ids=lambda m: type(m).__name__)
@pytest.mark.parametrize("name, value", [("tol", 0.0), ("gamma", -1.0), ("degree", 0), ("cache_size", -5)])
def test_shared_parameters_are_checked_alike(model, name, value, data):
    X, y, _ = data
    with pytest.raises(ValueError, match=name):
        _fit(clone(model).set_params(**{name: value}), X, y)


def test_check_sample_weight_gives_scikit_learns_messages():
    X = np.zeros((4, 2))
    np.testing.assert_array_equal(check_sample_weight(None, X), np.ones(4))
    np.testing.assert_array_equal(check_sample_weight(2, X), np.full(4, 2.0))
    with pytest.raises(ValueError, match=r"sample_weight.shape == \(3,\), expected \(4,\)"):
        check_sample_weight(np.ones(3), X)
    with pytest.raises(ValueError, match="Negative values"):
        check_sample_weight([1, -1, 1, 1], X)
    with pytest.raises(ValueError, match="at least one non-zero"):
        check_sample_weight(np.zeros(4), X)
    with pytest.raises(ValueError, match="1D array"):
        check_sample_weight(np.ones((4, 1)), X)
