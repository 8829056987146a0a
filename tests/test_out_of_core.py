"""Out-of-core fitting and prediction on memory-mapped arrays (coresvm.data)."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from coresvm import data as data_module
from coresvm.datasets import make_checkerboard
from coresvm.kernels import KernelSpec
from coresvm.problem import SimplexProblem
from coresvm.svc import CoreSVC


@pytest.fixture
def checkerboard_on_disk(tmp_path):
    X, y = make_checkerboard(6000, random_state=3)
    path = tmp_path / "X.npy"
    np.save(path, X)
    return X, y, np.load(path, mmap_mode="r")


def assert_same_model(a: CoreSVC, b: CoreSVC) -> None:
    assert a.gamma_ == b.gamma_
    np.testing.assert_array_equal(a.support_, b.support_)
    np.testing.assert_array_equal(a.support_vectors_, b.support_vectors_)
    np.testing.assert_array_equal(a.dual_coef_, b.dual_coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)


@pytest.mark.parametrize(
    "params",
    [
        {"solver": "coreset"},
        {"solver": "cvm", "gamma": "cvm"},
        {"solver": "swap", "search": "random", "max_iter": 2000},
    ],
)
def test_memmap_fit_equals_in_memory_fit(checkerboard_on_disk, params):
    X, y, X_mapped = checkerboard_on_disk
    common = {"C": 1000.0, "random_state": 7, "max_iter": 200_000, **params}
    warnings.simplefilter("ignore", ConvergenceWarning)  # the iteration caps keep the test short
    in_memory = CoreSVC(**common).fit(X, y)
    mapped = CoreSVC(**common).fit(X_mapped, y)
    assert_same_model(in_memory, mapped)
    assert type(mapped.support_vectors_) is np.ndarray  # rows were read, not a view of the map
    np.testing.assert_array_equal(mapped.predict(X_mapped), in_memory.predict(X))
    np.testing.assert_array_equal(mapped.decision_function(X_mapped), in_memory.decision_function(X))


def test_blocked_passes_equal_one_pass(checkerboard_on_disk, monkeypatch):
    # Tiny blocks: the finiteness check, norms, variance and prediction all run over many blocks.
    X, y, X_mapped = checkerboard_on_disk
    monkeypatch.setattr(data_module, "BLOCK_BYTES", 1024)
    assert data_module.rows_per_block(X_mapped) == 64
    np.testing.assert_array_equal(data_module.blocked_squared_norms(X_mapped), np.einsum("ij,ij->i", X, X))
    assert data_module.blocked_variance(X_mapped) == pytest.approx(X.var(), rel=1e-12)
    assert data_module.blocked_variance(X_mapped) == data_module.blocked_variance(X.copy())
    in_memory = CoreSVC(C=100.0, random_state=0).fit(X, y)
    mapped = CoreSVC(C=100.0, random_state=0).fit(X_mapped, y)
    assert_same_model(in_memory, mapped)
    np.testing.assert_array_equal(mapped.decision_function(X_mapped), in_memory.decision_function(X))


def test_problem_reads_rows_of_the_map_without_copying_it(checkerboard_on_disk):
    X, y, X_mapped = checkerboard_on_disk
    problem = SimplexProblem(X_mapped, np.where(y > 0, 1.0, -1.0), np.ones(len(y)), KernelSpec("rbf", 1.0))
    assert isinstance(problem.X, data_module.MappedRows)
    assert np.shares_memory(problem.data, X_mapped)  # the compiled solvers read the map itself
    np.testing.assert_array_equal(problem.X[[5, 1, 3]], X[[5, 1, 3]])
    np.testing.assert_array_equal(problem.norms, np.einsum("ij,ij->i", X, X))


def test_memmap_with_nan_is_rejected(tmp_path):
    X, y = make_checkerboard(500, random_state=0)
    X[123, 1] = np.nan
    np.save(tmp_path / "bad.npy", X)
    with pytest.raises(ValueError, match="NaN or infinity"):
        CoreSVC().fit(np.load(tmp_path / "bad.npy", mmap_mode="r"), y)


def test_memmap_of_integers_is_rejected_without_copy(tmp_path):
    X, y = make_checkerboard(500, random_state=0)
    np.save(tmp_path / "ints.npy", (X * 100).astype(np.int32))
    with pytest.raises(ValueError, match="float32 or float64"):
        CoreSVC().fit(np.load(tmp_path / "ints.npy", mmap_mode="r"), y)


def test_memmap_prediction_checks_feature_count(checkerboard_on_disk, tmp_path):
    X, y, X_mapped = checkerboard_on_disk
    model = CoreSVC(C=100.0, random_state=0).fit(X_mapped, y)
    np.save(tmp_path / "wide.npy", np.zeros((10, 3)))
    with pytest.raises(ValueError, match="features"):
        model.predict(np.load(tmp_path / "wide.npy", mmap_mode="r"))


def test_zarr_input_gets_a_clear_error():
    zarr = pytest.importorskip("zarr")
    X, y = make_checkerboard(100, random_state=0)
    z = zarr.array(X)
    with pytest.raises(TypeError, match="mmap_mode='r'"):
        CoreSVC().fit(z, y)
