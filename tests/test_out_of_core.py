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
    # Centered: in-memory rows far from the origin are centered before solving (problem.centering_shift), which
    # changes the float32 rounding; memory-mapped rows are read as they are.
    X -= 2.0  # the board's center
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


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_blocked_column_statistics_equal_numpy(monkeypatch, dtype):
    """Column means and standard deviations merged over many small blocks (of unequal size: 1,000 rows in blocks
    of 48) equal NumPy's one-pass values, also for a column far from the origin with a tiny spread."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1000, 4)) * np.array([1.0, 1e-3, 1e4, 0.0])
    X[:, 1] += 1e6
    X = X.astype(dtype)
    monkeypatch.setattr(data_module, "STATISTICS_BLOCK_BYTES", 48 * 4 * X.itemsize)
    mean, std = data_module.blocked_column_mean_std(X)
    reference = X.astype(np.float64)
    np.testing.assert_allclose(mean, reference.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(std, reference.std(axis=0), rtol=1e-7, atol=0)


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


def test_zarr_input_trains_like_the_in_memory_array(tmp_path, monkeypatch):
    zarr = pytest.importorskip("zarr")
    monkeypatch.setenv("CORESVM_TMPDIR", str(tmp_path))
    X, y = make_checkerboard(3000, random_state=0)
    X_test, _ = make_checkerboard(500, random_state=1)
    X, X_test = X - 2.0, X_test - 2.0  # centered, as in checkerboard_on_disk
    z, z_test = zarr.array(X, chunks=(700, 2)), zarr.array(X_test, chunks=(300, 2))
    # A Zarr array is read through a memory map, which the core-set loop trains on; 3,000 in-memory rows would
    # take the compiled small-problem path (another route to the same optimum within tol): compare like with like
    import coresvm.svc as svc_module

    monkeypatch.setattr(svc_module, "SMALL_PROBLEM_FAST_PATH", False)
    in_memory = CoreSVC(C=100.0, gamma=2.0, random_state=0).fit(X, y)
    from_zarr = CoreSVC(C=100.0, gamma=2.0, random_state=0).fit(z, y)
    np.testing.assert_array_equal(from_zarr.support_, in_memory.support_)
    np.testing.assert_array_equal(from_zarr.dual_coef_, in_memory.dual_coef_)
    np.testing.assert_array_equal(from_zarr.predict(z_test), in_memory.predict(X_test))
    np.testing.assert_array_equal(from_zarr.decision_function(z_test), in_memory.decision_function(X_test))
    assert list(tmp_path.iterdir()) == []  # the temporary copies are unlinked


def test_zarr_input_checks_shape_and_dtype():
    zarr = pytest.importorskip("zarr")
    with pytest.raises(ValueError, match="2-D Zarr"):
        CoreSVC().fit(zarr.array(np.zeros(10)), np.arange(10) % 2)
    with pytest.raises(ValueError, match="must hold numbers"):
        CoreSVC().fit(zarr.array(np.zeros((4, 2), dtype=complex)), [0, 1, 0, 1])


def test_zarr_with_nan_is_rejected(tmp_path, monkeypatch):
    zarr = pytest.importorskip("zarr")
    monkeypatch.setenv("CORESVM_TMPDIR", str(tmp_path))
    X, y = make_checkerboard(200, random_state=0)
    X[17, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        CoreSVC().fit(zarr.array(X), y)


# ---- per-row memory of the sampling solvers (compact problems) -------------------------------


@pytest.mark.parametrize("kernel", [KernelSpec("rbf", 0.7), KernelSpec("poly", 0.5, 1.0, 3)])
@pytest.mark.parametrize("weighted", [False, True])
def test_compact_problem_rows_equal_full_arrays(kernel, weighted):
    from coresvm.problem import is_constant_array

    X, y = make_checkerboard(500, random_state=4)
    signs = np.where(y == 1, 1, -1).astype(np.int8)
    C = np.linspace(1.0, 3.0, 500) if weighted else np.broadcast_to(np.float64(2.5), (500,))
    assert is_constant_array(C) != weighted
    full = SimplexProblem(X, signs, np.array(C), kernel)
    compact = SimplexProblem(X, signs, C, kernel, compact=True)
    assert compact._norms is None and compact._diag is None and (compact._inv_c is None) != weighted
    rows = np.array([3, 17, 499, 0, 250])
    np.testing.assert_array_equal(compact.norms_of(rows), full.norms[rows])
    np.testing.assert_array_equal(compact.inv_c_of(rows), full.inv_c[rows])
    np.testing.assert_array_equal(compact.diag_of(rows), full.diag[rows])
    np.testing.assert_array_equal(compact.signs_of(rows), full.y[rows])
    assert compact._norms is None and compact._diag is None  # the accessors did not materialize anything
    assert compact.median_C() == float(np.median(1.0 / full.inv_c))
    assert compact.median_diag() == float(np.median(full.diag))
    np.testing.assert_array_equal(compact.diag, full.diag)  # ... but the full arrays are still there on demand


def test_encode_labels_in_blocks_equals_np_unique(monkeypatch):
    from coresvm import _validation

    rng = np.random.RandomState(0)
    for y in (rng.choice(np.array([-1, 1], dtype=np.int8), 5000), rng.choice(np.array(["b", "a", "c"]), 5000)):
        expected_classes, expected_index = np.unique(y, return_inverse=True)
        monkeypatch.setattr(_validation, "LABEL_BLOCK", 700)
        classes, index = _validation.encode_labels(y)
        monkeypatch.undo()
        np.testing.assert_array_equal(classes, expected_classes)
        np.testing.assert_array_equal(index, expected_index)
        assert index.dtype == np.int8


def test_labels_with_one_or_two_values_encode_as_np_unique():
    from coresvm import _validation

    rng = np.random.RandomState(0)
    cases = (rng.choice([-1, 1], 900), rng.choice([0.0, 2.5], 900), rng.rand(900) > 0.5, np.full(900, 7.0),
             rng.choice(np.array([3, 200], dtype=np.uint8), 900), rng.choice([1.0, 2.0, 3.0], 900),
             np.array([1.0, np.nan, 1.0]))
    for y in cases:
        expected_classes, expected_index = np.unique(y, return_inverse=True)
        classes, index = _validation.encode_labels(y)
        np.testing.assert_array_equal(classes, expected_classes)
        assert classes.dtype == expected_classes.dtype
        np.testing.assert_array_equal(index, expected_index)
        assert index.dtype == expected_index.dtype
        np.testing.assert_array_equal(_validation.distinct_labels(y), np.unique(y))
    assert _validation.two_numeric_labels(cases[0]) is not None  # the fast path ran
    assert _validation.two_numeric_labels(cases[5]) is None


def test_draw_distinct_is_distinct_in_range_and_deterministic():
    from coresvm.solvers.sampling import draw_distinct

    a = draw_distinct(np.random.RandomState(5), 100, 60)  # many repeats to reject
    b = draw_distinct(np.random.RandomState(5), 100, 60)
    np.testing.assert_array_equal(a, b)
    assert len(np.unique(a)) == 60 and a.min() >= 0 and a.max() < 100
    assert len(draw_distinct(np.random.RandomState(0), 10, 59)) == 10


def test_fit_past_the_sweep_limit_is_deterministic_and_accurate(monkeypatch, checkerboard_on_disk):
    """Past SWEEP_MAX_POINTS the candidates and initial points are drawn without any O(m) index list."""
    from coresvm.solvers import core_set, sampling

    X, y, X_map = checkerboard_on_disk
    monkeypatch.setattr(core_set, "SWEEP_MAX_POINTS", 1000)
    monkeypatch.setattr(sampling, "SWEEP_MAX_POINTS", 1000)
    params = {"C": 100.0, "gamma": 2.0, "tol": 1e-2, "random_state": 0, "n_candidates": 1000}  # 2k < m: rejection
    in_memory = CoreSVC(**params).fit(X, y)
    mapped = CoreSVC(**params).fit(X_map, y)
    assert_same_model(in_memory, mapped)
    X_test, y_test = make_checkerboard(4000, random_state=8)
    assert in_memory.score(X_test - 2.0, y_test) > 0.95
    assert in_memory.solver_info_[0]["status"] == "converged"


def test_balanced_draws_cover_a_rare_class():
    from coresvm.solvers.sampling import _balanced_draws

    y = np.zeros(100_000, dtype=np.int8)
    y[[5, 70_000]] = 1  # two members: found from the member list after the random draws miss them
    chosen = _balanced_draws(y, np.array([0, 1]), 10, np.random.RandomState(0))
    assert len(chosen) == 12 and len(np.unique(chosen)) == 12
    assert set(chosen[y[chosen] == 1]) == {5, 70_000}


def test_large_random_reads_release_pages_in_pieces(checkerboard_on_disk, monkeypatch):
    X, _, X_map = checkerboard_on_disk
    rows = data_module.MappedRows(X_map)
    released = []
    monkeypatch.setattr(data_module, "release_pages", lambda array: released.append(1))
    monkeypatch.setattr(data_module, "RANDOM_READ_BUDGET", 100 * data_module.FAULT_AROUND_BYTES)
    picks = np.random.RandomState(0).permutation(len(X))[:1050]
    np.testing.assert_array_equal(rows[picks], X[picks])
    assert len(released) == 10  # one release per 100 rows read, not one after all 1050


@pytest.mark.parametrize("n_classes", [2, 4])
def test_memmap_prediction_with_a_far_row_equals_in_memory_bit_for_bit(tmp_path, monkeypatch, n_classes):
    """A row so far out that its block cannot use the factorized RBF (kernels.rbf_factorizable) is decided per
    row block: the blocks of a memory map without it give the in-memory values bit for bit (two classes:
    kernel_product; one-vs-one: kernel_map)."""
    monkeypatch.setattr(data_module, "BLOCK_BYTES", 4096)  # many blocks of the map
    rng = np.random.RandomState(0)
    X = rng.rand(600, 4)
    y = np.arange(600) % n_classes
    model = CoreSVC(C=10.0, gamma=2.0, random_state=0).fit(X, y)
    X_test = rng.rand(3000, 4)
    X_test[2900] = 50.0  # gamma * |x|^2 = 20,000: the direct formula for its block only
    np.save(tmp_path / "test.npy", X_test)
    mapped = np.load(tmp_path / "test.npy", mmap_mode="r")
    np.testing.assert_array_equal(model.decision_function(mapped), model.decision_function(X_test))
