"""The benchmark data helpers."""

import numpy as np

from coresvm.datasets import datasets_dir, make_checkerboard


def test_checkerboard_labels_follow_cell_parity():
    X, y = make_checkerboard(5000, random_state=3)
    assert X.shape == (5000, 2) and np.all((X >= 0) & (X < 4))
    parity = (np.floor(X[:, 0]) + np.floor(X[:, 1])) % 2
    np.testing.assert_array_equal(y, np.where(parity == 1, 1, -1))
    assert 0.45 < np.mean(y == 1) < 0.55
    np.testing.assert_array_equal(make_checkerboard(100, random_state=3)[0], make_checkerboard(100, random_state=3)[0])


def test_datasets_dir_honours_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("CORESVM_DATASETS", str(tmp_path))
    assert datasets_dir() == tmp_path
    monkeypatch.delenv("CORESVM_DATASETS")
    assert datasets_dir().parts[-2:] == ("shared", "datasets")
