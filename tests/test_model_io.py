"""Model files: native round trip (bit for bit, no pickle), LIBSVM text format, and libsvm-official agreement."""

import json
import pickle
import warnings
import zipfile

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_iris, make_classification
from sklearn.exceptions import NotFittedError

from coresvm import CoreSVC, load_model, save_model
from coresvm.model_io import FORMAT_VERSION, METADATA_MEMBER, NOT_SAVED, ModelFormatError, read_metadata

svmutil = pytest.importorskip("libsvm.svmutil")


def _fit(X, y, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a few kernels do not converge in max_iter; the model is still a model
        return CoreSVC(random_state=0, max_iter=3000, **params).fit(X, y)


@pytest.fixture(scope="module")
def binary():
    X, y = make_classification(n_samples=160, n_features=6, n_informative=4, random_state=1)
    return X, 2 * y - 1  # LIBSVM-style labels -1/+1


@pytest.fixture(scope="module")
def iris():
    X, y = load_iris(return_X_y=True)
    return X, y + 1  # labels 1, 2, 3


def _all_decisions(model, X):
    shape = model.decision_function_shape
    try:
        model.decision_function_shape = "ovo"
        return model.decision_function(X)
    finally:
        model.decision_function_shape = shape


def _libsvm_rows(X):
    """Data in libsvm-official's list-of-dicts form (1-based indices, zeros left out)."""
    if sp.issparse(X):
        X = X.toarray()
    return [{j + 1: float(v) for j, v in enumerate(row) if v != 0} for row in X]


# --------------------------------------------------------------------------- native format
@pytest.mark.parametrize("representation", ["dense64", "dense32", "csr_matrix", "csr_array"])
def test_native_round_trip_is_bit_for_bit(tmp_path, binary, representation):
    X, y = binary
    X = {"dense64": X, "dense32": X.astype(np.float32), "csr_matrix": sp.csr_matrix(X),
         "csr_array": sp.csr_array(X)}[representation]
    model = _fit(X, y, C=10.0, gamma=0.2, class_weight={1: 2.0})
    save_model(model, tmp_path / "m.csvm")
    loaded = load_model(tmp_path / "m.csvm")
    assert type(loaded.support_vectors_) is type(model.support_vectors_)
    assert loaded.support_vectors_.dtype == model.support_vectors_.dtype
    np.testing.assert_array_equal(loaded.decision_function(X), model.decision_function(X))
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    assert loaded.get_params() == model.get_params()  # int keys of class_weight survive JSON
    assert loaded.solver_info_ == model.solver_info_


def test_native_round_trip_keeps_every_attribute(tmp_path, iris):
    X, y = iris
    model = _fit(X, y, C=100.0, gamma=0.5, decision_function_shape="ovo")
    save_model(model, tmp_path / "m")
    loaded = load_model(tmp_path / "m")
    assert set(vars(loaded)) == set(vars(model)) - set(NOT_SAVED["coresvm.CoreSVC"])
    for name, value in vars(loaded).items():
        other, value = value, getattr(model, name)
        if isinstance(value, np.ndarray):
            assert other.dtype == value.dtype, name
            np.testing.assert_array_equal(other, value, err_msg=name)
        else:
            assert other == value, name
    np.testing.assert_array_equal(loaded.decision_function(X), model.decision_function(X))


@pytest.mark.parametrize("kernel", ["linear", "poly", "sigmoid"])
def test_native_round_trip_other_kernels(tmp_path, binary, kernel):
    X, y = binary
    model = _fit(X, y, C=1.0, kernel=kernel, gamma=0.1, degree=2, coef0=0.5)
    save_model(model, tmp_path / "m")
    np.testing.assert_array_equal(load_model(tmp_path / "m").decision_function(X), model.decision_function(X))


def test_attributes_outside_the_schema_are_not_saved(tmp_path, binary):
    """Version 2 writes the declared fields only (version 1 wrote every attribute); others are named in a warning."""
    X, y = binary
    model = _fit(X, y, gamma=0.2)
    model.extra_record_ = {"pairs": (1, 2), 3: [np.float32(0.5), None], "name": "x"}
    model._extra_array = np.arange(5, dtype=np.int16)
    with pytest.warns(UserWarning, match="_extra_array, extra_record_ are not part of the model file format"):
        save_model(model, tmp_path / "m")
    loaded = load_model(tmp_path / "m")
    assert not hasattr(loaded, "extra_record_") and not hasattr(loaded, "_extra_array")
    np.testing.assert_array_equal(loaded.decision_function(X), model.decision_function(X))


def test_json_values_keep_their_types(tmp_path, binary):
    """Tuples, non-string keys and numpy scalars in a field survive JSON (the solver records are such values)."""
    X, y = binary
    model = _fit(X, y, gamma=0.2)
    model.solver_info_ = [{"pairs": (1, 2), 3: [np.float32(0.5), None], "name": "x"}]
    save_model(model, tmp_path / "m")
    loaded = load_model(tmp_path / "m")
    assert loaded.solver_info_ == model.solver_info_
    assert isinstance(loaded.solver_info_[0][3][0], np.float32)


def test_native_file_holds_json_and_npy_only(tmp_path, binary, monkeypatch):
    X, y = binary
    model = _fit(X, y, gamma=0.2)
    save_model(model, tmp_path / "m")
    with zipfile.ZipFile(tmp_path / "m") as archive:
        names = archive.namelist()
        metadata = json.loads(archive.read(METADATA_MEMBER))
        for name in names:
            if name != METADATA_MEMBER:
                assert name.endswith(".npy")
                with archive.open(name) as handle:
                    np.load(handle, allow_pickle=False)  # fails if any member needed pickle
    assert metadata["format_version"] == FORMAT_VERSION
    assert metadata["params"]["gamma"] == 0.2
    summary = metadata["summary"]
    assert summary["solver"] == "coreset" and summary["bias_rule"].startswith("theoretic")
    assert summary["classes"] == [-1, 1] and summary["multiclass"] == "binary"
    assert read_metadata(tmp_path / "m")["coresvm_version"]

    def no_pickle(*args, **kwargs):
        raise AssertionError("pickle used")

    monkeypatch.setattr(pickle, "load", no_pickle)
    monkeypatch.setattr(pickle, "loads", no_pickle)
    load_model(tmp_path / "m")


def test_native_refuses_values_without_json_form(tmp_path, binary):
    X, y = binary
    model = _fit(X, y, gamma=0.2)
    model.set_params(random_state=np.random.RandomState(0))
    with pytest.raises(ValueError, match="parameter 'random_state'"):
        save_model(model, tmp_path / "m")
    model.set_params(random_state=0)
    model.solver_info_[0]["weird"] = object()
    with pytest.raises(ValueError, match="attribute 'solver_info_'"):
        save_model(model, tmp_path / "m")
    assert not (tmp_path / "m").exists()


def test_unfitted_model_cannot_be_saved(tmp_path):
    with pytest.raises(NotFittedError):
        save_model(CoreSVC(), tmp_path / "m")


def test_bad_format_name(tmp_path, binary):
    model = _fit(*binary, gamma=0.2)
    with pytest.raises(ValueError, match="native' or 'libsvm"):
        save_model(model, tmp_path / "m", format="pickle")


# --------------------------------------------------------------------------- corrupt files
@pytest.fixture()
def saved(tmp_path, binary):
    model = _fit(*binary, gamma=0.2)
    save_model(model, tmp_path / "m")
    return tmp_path / "m"


def _rewrite(path, change):
    """Rewrite a native model archive with its metadata changed by ``change``."""
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    metadata = json.loads(members[METADATA_MEMBER])
    change(metadata, members)
    members[METADATA_MEMBER] = json.dumps(metadata).encode()
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def test_truncated_file(saved):
    data = saved.read_bytes()
    saved.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelFormatError, match="truncated or corrupt"):
        load_model(saved)


def test_corrupted_bytes(saved):
    data = bytearray(saved.read_bytes())
    with zipfile.ZipFile(saved) as archive:
        info = archive.getinfo("arrays/pair_coef.npy")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    for k in range(start + 5, start + 15):
        data[k] ^= 0xFF
    saved.write_bytes(bytes(data))
    with pytest.raises(ModelFormatError, match="corrupt"):
        load_model(saved)


def test_future_format_version(saved):
    _rewrite(saved, lambda metadata, members: metadata.update(format_version=FORMAT_VERSION + 1))
    with pytest.raises(ModelFormatError, match="newer than this coresvm reads"):
        load_model(saved)


def test_unknown_parameter_in_file(saved):
    _rewrite(saved, lambda metadata, members: metadata["params"].update(warp_drive=True))
    with pytest.raises(ModelFormatError, match="warp_drive"):
        load_model(saved)


def test_missing_array_member(saved):
    _rewrite(saved, lambda metadata, members: members.pop("arrays/intercept_.npy"))
    with pytest.raises(ModelFormatError, match="corrupt"):
        load_model(saved)


def test_inconsistent_shapes(saved):
    def swap(metadata, members):
        members["arrays/intercept_.npy"] = members["arrays/n_iter_.npy"].replace(b"<i8", b"<f8") + b""
        metadata["fields"]["intercept_"] = {"__npy__": "arrays/support_.npy"}

    _rewrite(saved, swap)
    with pytest.raises(ModelFormatError, match="corrupt model file"):
        load_model(saved)


def test_not_a_model_file(tmp_path):
    (tmp_path / "x").write_text("1 1:0.5\n")
    with pytest.raises(ModelFormatError, match="not a model file"):
        load_model(tmp_path / "x")
    with zipfile.ZipFile(tmp_path / "z.zip", "w") as archive:
        archive.writestr("hello.txt", "hi")
    with pytest.raises(ModelFormatError, match="not a coresvm model archive"):
        load_model(tmp_path / "z.zip")
    with pytest.raises(FileNotFoundError):
        load_model(tmp_path / "missing")


# --------------------------------------------------------------------------- LIBSVM text format
@pytest.mark.parametrize("data", ["binary", "iris"])
@pytest.mark.parametrize("kernel", ["rbf", "linear", "poly"])
def test_libsvm_official_predicts_identically(tmp_path, request, data, kernel):
    X, y = request.getfixturevalue(data)
    model = _fit(X, y, C=10.0, kernel=kernel, gamma=0.2, degree=2, coef0=1.0)
    save_model(model, tmp_path / "m.model", format="libsvm")
    libsvm_model = svmutil.svm_load_model(str(tmp_path / "m.model"))
    labels, _, values = svmutil.svm_predict(y.tolist(), _libsvm_rows(X), libsvm_model, "-q")
    np.testing.assert_array_equal(np.array(labels), model.predict(X))
    # binary: LIBSVM's first label is classes_[1], so its decision value is ours; multiclass: ours as 'ovo'
    ours = _all_decisions(model, X).reshape(len(X), -1)
    np.testing.assert_allclose(np.array(values), ours, rtol=1e-9, atol=1e-9)


def test_libsvm_official_reads_sparse_model(tmp_path, binary):
    X, y = binary
    X = sp.csr_matrix(np.where(np.abs(X) < 0.5, 0.0, X))
    model = _fit(X, y, C=10.0, gamma=0.2)
    save_model(model, tmp_path / "m.model", format="libsvm")
    labels, _, _ = svmutil.svm_predict(y.tolist(), _libsvm_rows(X),
                                       svmutil.svm_load_model(str(tmp_path / "m.model")), "-q")
    np.testing.assert_array_equal(np.array(labels), model.predict(X))


def test_libsvm_text_round_trip(tmp_path, iris):
    X, y = iris
    model = _fit(X, y, C=10.0, gamma=0.3)
    save_model(model, tmp_path / "m.model", format="libsvm")
    loaded = load_model(tmp_path / "m.model")
    np.testing.assert_array_equal(loaded.classes_, model.classes_)
    np.testing.assert_array_equal(loaded.n_support_, model.n_support_)
    np.testing.assert_array_equal(loaded.dual_coef_, model.dual_coef_)  # written as shortest round-trip repr
    np.testing.assert_array_equal(loaded.intercept_, model.intercept_)
    np.testing.assert_allclose(_all_decisions(loaded, X), _all_decisions(model, X), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


def test_models_trained_by_libsvm_load_and_predict_like_libsvm(tmp_path):
    # LIBSVM orders labels by first appearance: 3, 1, 2 here, which load_model must sort
    X, y = make_classification(n_samples=150, n_features=5, n_informative=4, n_redundant=0, n_classes=3,
                               random_state=3)
    y = np.array([3, 1, 2])[y]
    order = np.argsort(y != 3, kind="stable")
    X, y = X[order], y[order]
    for options in ("-t 2 -g 0.3 -c 5", "-t 1 -d 2 -r 1 -g 0.2 -c 1", "-t 0 -c 1"):
        libsvm_model = svmutil.svm_train(y.tolist(), _libsvm_rows(X), options + " -q")
        svmutil.svm_save_model(str(tmp_path / "libsvm.model"), libsvm_model)
        # LIBSVM writes SV values to 8 digits: compare with the model as the file holds it
        libsvm_model = svmutil.svm_load_model(str(tmp_path / "libsvm.model"))
        labels, _, _ = svmutil.svm_predict(y.tolist(), _libsvm_rows(X), libsvm_model, "-q")
        model = load_model(tmp_path / "libsvm.model")
        np.testing.assert_array_equal(model.classes_, [1, 2, 3])
        # A three-way voting tie goes to the lowest label here and to LIBSVM's first label (3) there.
        wins = (_all_decisions(model, X) > 0).astype(int)  # pairs (1, 2), (1, 3), (2, 3)
        votes = np.stack([wins[:, 0] + wins[:, 1], 1 - wins[:, 0] + wins[:, 2], 2 - wins[:, 1] - wins[:, 2]], axis=1)
        untied = votes.max(axis=1) > 1
        assert untied.mean() > 0.95
        np.testing.assert_array_equal(model.predict(X)[untied], np.array(labels)[untied])
    # binary with labels in file order 1, -1 and -1, 1
    for first in (1, -1):
        yb = np.where(np.arange(len(y)) % 2 == 0, first, -first)
        libsvm_model = svmutil.svm_train(yb.tolist(), _libsvm_rows(X), "-t 2 -g 0.5 -c 2 -q")
        svmutil.svm_save_model(str(tmp_path / "b.model"), libsvm_model)
        libsvm_model = svmutil.svm_load_model(str(tmp_path / "b.model"))
        labels, _, values = svmutil.svm_predict(yb.tolist(), _libsvm_rows(X), libsvm_model, "-q")
        model = load_model(tmp_path / "b.model")
        np.testing.assert_array_equal(model.predict(X), np.array(labels))
        sign = 1.0 if libsvm_model.get_labels()[0] == model.classes_[1] else -1.0
        np.testing.assert_allclose(model.decision_function(X), sign * np.array(values)[:, 0], atol=1e-9)


def test_libsvm_format_needs_integer_labels(tmp_path, binary):
    X, y = binary
    model = _fit(X, np.where(y > 0, "yes", "no"), gamma=0.2)
    with pytest.raises(ValueError, match="integer class labels"):
        save_model(model, tmp_path / "m.model", format="libsvm")
    save_model(model, tmp_path / "m.csvm")  # the native format keeps any labels
    np.testing.assert_array_equal(load_model(tmp_path / "m.csvm").predict(X), model.predict(X))


def test_truncated_libsvm_model(tmp_path, binary):
    model = _fit(*binary, gamma=0.2)
    save_model(model, tmp_path / "m.model", format="libsvm")
    lines = (tmp_path / "m.model").read_text().splitlines()
    (tmp_path / "m.model").write_text("\n".join(lines[:-3]) + "\n")
    with pytest.raises(ModelFormatError, match="truncated or inconsistent"):
        load_model(tmp_path / "m.model")
    (tmp_path / "m.model").write_text("\n".join(lines[:5]) + "\n")
    with pytest.raises(ModelFormatError, match="no 'SV' line"):
        load_model(tmp_path / "m.model")
    bad = lines[:]
    bad[-1] = "0.5 1:x"
    (tmp_path / "m.model").write_text("\n".join(bad) + "\n")
    with pytest.raises(ModelFormatError, match=f"line {len(bad)}"):
        load_model(tmp_path / "m.model")


def test_estimator_save_and_load_methods(tmp_path):
    from coresvm import CoreSVC

    rng = np.random.RandomState(0)
    X = rng.randn(120, 3)
    y = np.where(X[:, 0] * X[:, 1] > 0, 1, -1)
    model = CoreSVC(C=10.0, gamma=1.0, random_state=0).fit(X, y)
    for fmt in ("native", "libsvm"):
        path = tmp_path / f"m.{fmt}"
        model.save(path, format=fmt)
        loaded = CoreSVC.load(path)
        assert isinstance(loaded, CoreSVC)
        np.testing.assert_allclose(loaded.decision_function(X), model.decision_function(X), rtol=1e-7, atol=1e-9)
        np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
