"""Repeated training rows merged into one point whose C is their sum (coresvm.duplicates)."""

import numpy as np
import pytest
import scipy.sparse as sp

import coresvm.svc as svc_module
from coresvm import CoreSVC
from coresvm import duplicates as dup
from coresvm.multiclass import SubProblem


def _with_repeats(seed=0, n=240, d=3):
    """Integer-valued features: many rows repeat, some with the other label."""
    rng = np.random.default_rng(seed)
    X = rng.integers(-1, 2, size=(n, d)).astype(np.float64)
    y = (X[:, 0] + X[:, 1] * X[:, 2] + 0.7 * rng.normal(size=n) > 0).astype(int)
    return X, y


def _first_equal(X, y):
    """The reference: for each row, the first row with the same values and label."""
    rows = [X[i].tobytes() + bytes([y[i]]) for i in range(len(y))]
    return np.array([rows.index(row) for row in rows])


@pytest.mark.parametrize("layout", ["C", "F", "csr"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_representatives_are_the_first_equal_rows(layout, dtype, monkeypatch):
    monkeypatch.setattr(dup, "HASH_BLOCK_VALUES", 64)  # many blocks, hashed and compared on the kernel threads
    X, y = _with_repeats()
    data = sp.csr_matrix(X.astype(dtype)) if layout == "csr" else np.asarray(X, dtype=dtype, order=layout)
    rows = np.arange(len(y), dtype=np.int32)
    found = dup.duplicate_representatives(data, y, rows)
    np.testing.assert_array_equal(found, _first_equal(X, y))


def test_representatives_among_a_subset_of_rows():
    X, y = _with_repeats()
    rows = np.flatnonzero(np.arange(len(y)) % 3 != 0).astype(np.int32)  # rows with zero weight left out
    found = dup.duplicate_representatives(X, y, rows)
    expected = _first_equal(X[rows], y[rows])
    np.testing.assert_array_equal(found, rows[expected])


def test_row_hashes_depend_only_on_the_values(monkeypatch):
    """Equal rows hash alike wherever they are (also in another block, and with a CSR row's entries stored in
    another order); rows that differ in one value, or by a swap of two columns, hash apart."""
    X = np.zeros((300, 4))
    X[:, 0] = np.arange(300) % 7
    X[:, 2] = 1.0
    X[5] = X[290] = [3.0, 0.0, 1.0, 2.0]
    X[6] = [0.0, 3.0, 1.0, 2.0]  # row 5 with columns 0 and 1 swapped
    X[7] = [3.0, 0.0, 1.0, 2.5]
    monkeypatch.setattr(dup, "HASH_BLOCK_VALUES", 256)  # blocks of 64 rows: rows 5 and 290 in different ones
    all_rows = np.arange(300)
    dense = dup.row_hashes(X, all_rows)
    assert dense[5] == dense[290]
    assert len({dense[5], dense[6], dense[7]}) == 3
    shuffled = sp.csr_matrix(X)
    for row in range(300):  # reverse each row's stored entries
        start, stop = shuffled.indptr[row], shuffled.indptr[row + 1]
        shuffled.indices[start:stop] = shuffled.indices[start:stop][::-1].copy()
        shuffled.data[start:stop] = shuffled.data[start:stop][::-1].copy()
    np.testing.assert_array_equal(dup.row_hashes(shuffled, all_rows),
                                  dup.row_hashes(sp.csr_matrix(X), all_rows))
    subset = np.array([5, 290])
    np.testing.assert_array_equal(dup.row_hashes(X, subset), dense[subset])


def test_no_repeats_gives_none():
    X = np.random.default_rng(1).normal(size=(500, 4))
    y = np.arange(500) % 2
    assert dup.duplicate_representatives(X, y, np.arange(500)) is None
    assert dup.duplicate_representatives(sp.csr_matrix(X), y, np.arange(500)) is None


def test_a_hash_collision_never_merges_different_rows(monkeypatch):
    """Every row hashed alike: only rows equal to their group's first row (row 0) may merge."""
    X, y = _with_repeats()
    monkeypatch.setattr(dup, "row_hashes", lambda X, rows: np.zeros(len(rows), dtype=np.uint64))
    for data in (X, sp.csr_matrix(X)):
        found = dup.duplicate_representatives(data, np.zeros_like(y), np.arange(len(y)))
        merged = found != np.arange(len(y))
        assert merged.any()
        np.testing.assert_array_equal(found[merged], 0)
        np.testing.assert_array_equal(X[merged], np.broadcast_to(X[0], X[merged].shape))


def test_sparse_rows_stored_differently_are_not_merged_wrongly():
    """A row with an explicit zero hashes apart from the same row without it; rows that differ in one entry
    never merge."""
    X = sp.csr_matrix(np.array([[1.0, 0.0, 2.0], [1.0, 0.0, 2.0], [1.0, 0.0, 2.5], [0.0, 1.0, 2.0]]))
    found = dup.duplicate_representatives(X, np.zeros(4, dtype=int), np.arange(4))
    np.testing.assert_array_equal(found, [0, 0, 2, 3])


def test_merged_problem_sums_C_over_each_group():
    rows = np.array([0, 2, 3, 5, 7])
    representatives = np.array([0, 2, 0, 5, 2])  # rows 3 -> 0 and 7 -> 2
    problem = SubProblem(0, (0, 1), rows, np.array([1, -1, 1, 1, -1], dtype=np.int8),
                         np.array([1.0, 2.0, 3.0, 4.0, 5.0]), seed=0)
    merged = dup.merge_duplicates(problem, representatives, rows)
    np.testing.assert_array_equal(merged.rows, [0, 2, 5])
    np.testing.assert_array_equal(merged.signs, [1, -1, 1])
    np.testing.assert_allclose(merged.C, [4.0, 7.0, 4.0])


@pytest.mark.parametrize("sparse", [False, True])
def test_merged_fit_has_the_unmerged_decision_function(monkeypatch, sparse):
    """The same optimum with and without merging, also with sample weights (C_i differ within a group)."""
    X, y = _with_repeats(seed=3)
    weights = np.random.default_rng(3).uniform(0.2, 3.0, size=len(y))
    data = sp.csr_matrix(X) if sparse else X
    params = dict(C=10.0, gamma=0.5, tol=1e-9, random_state=0)
    merged = CoreSVC(**params).fit(data, y, sample_weight=weights)
    with monkeypatch.context() as patch:
        patch.setattr(svc_module, "duplicate_representatives", lambda *args: None)
        unmerged = CoreSVC(**params).fit(data, y, sample_weight=weights)
    assert merged.solver_info_[0]["status"] == "converged"
    assert merged.n_support_.sum() < unmerged.n_support_.sum()
    np.testing.assert_allclose(merged.decision_function(X), unmerged.decision_function(X), atol=1e-6)
    # each support vector is a training row (the first of its group)
    assert np.all(merged.support_ == _first_equal(X, y)[merged.support_])


def test_multiclass_fit_merges_within_each_pair(monkeypatch):
    rng = np.random.default_rng(5)
    X = rng.integers(0, 3, size=(300, 2)).astype(np.float64)
    y = (X.sum(axis=1) + rng.integers(0, 2, size=300)) % 3
    params = dict(C=5.0, gamma=1.0, tol=1e-9, random_state=0)
    merged = CoreSVC(**params).fit(X, y)
    with monkeypatch.context() as patch:
        patch.setattr(svc_module, "duplicate_representatives", lambda *args: None)
        unmerged = CoreSVC(**params).fit(X, y)
    assert merged.n_support_.sum() <= 18  # at most 9 distinct points of each label
    np.testing.assert_allclose(merged.decision_function(X), unmerged.decision_function(X), atol=1e-6)


@pytest.mark.parametrize("params", [dict(solver="cvm"), dict(warm_start=True)], ids=["cvm", "warm_start"])
def test_not_merged_where_the_solve_needs_every_row(params):
    """A minimum enclosing ball needs one C for all; a warm start refers to every row: both solve unmerged."""
    X, y = _with_repeats()
    model = CoreSVC(C=10.0, gamma=0.5, random_state=0, **params).fit(X, y)
    support = X[model.support_]
    assert len(np.unique(np.column_stack([support, y[model.support_]]), axis=0)) < len(support)


def test_not_merged_on_memory_mapped_rows(tmp_path):
    """Merged rows would be gathered into memory: a memory-mapped X is solved as it is."""
    X, y = _with_repeats()
    np.save(tmp_path / "X.npy", X)
    mapped = np.load(tmp_path / "X.npy", mmap_mode="r")
    model = CoreSVC(C=10.0, gamma=0.5, tol=1e-9, random_state=0).fit(mapped, y)
    support = X[model.support_]
    assert len(np.unique(np.column_stack([support, y[model.support_]]), axis=0)) < len(support)
    in_memory = CoreSVC(C=10.0, gamma=0.5, tol=1e-9, random_state=0).fit(X, y)
    np.testing.assert_allclose(model.decision_function(X), in_memory.decision_function(X), atol=1e-6)
