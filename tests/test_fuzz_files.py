"""Fuzzing the file readers with truncated and mutated files (hypothesis).

* ``model_io.load_model`` (native ZIP+JSON+NPY archives and LIBSVM text models): every
  damaged file either loads into a model that predicts, or raises ``ModelFormatError``
  (documented); never another exception, a crash or a hang.  A mutation that only
  touches bytes the loader never reads may leave a valid model: that is allowed.
* the CLI's data path (``cli.read_data`` for LIBSVM/svmlight, CSV, ``.npy``, ``.gz``):
  every damaged file gives arrays or a ``UsageError`` (exit code 2 and one line in
  ``coresvm train``).
* Loading never runs code from the file: pickle is never called.
"""

import gzip
import io
import json
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.datasets import dump_svmlight_file, make_classification

from coresvm import CoreSVC, load_model, save_model
from coresvm.cli import UsageError, main, read_data
from coresvm.model_io import ModelFormatError

FUZZ = settings(max_examples=60, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def small():
    X, y = make_classification(n_samples=40, n_features=4, random_state=0)
    return X, 2 * y - 1


@pytest.fixture(scope="module")
def model_files(small, tmp_path_factory):
    X, y = small
    model = CoreSVC(C=10, gamma=0.5, random_state=0).fit(X, y)
    root = tmp_path_factory.mktemp("models")
    save_model(model, root / "native")
    save_model(model, root / "libsvm", format="libsvm")
    return {"native": (root / "native").read_bytes(), "libsvm": (root / "libsvm").read_bytes()}


@st.composite
def damaged(draw, original: bytes):
    """Truncation, byte flips, inserted or deleted runs, or a mix."""
    data = bytearray(original)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["truncate", "flip", "insert", "delete", "set"]))
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        if kind == "truncate":
            del data[at:]
        elif kind == "flip":
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "delete":
            del data[at : at + draw(st.integers(1, 64))]
        else:
            data[at] = draw(st.integers(0, 255))
    return bytes(data)


def _load_or_documented_error(path, X):
    try:
        model = load_model(path)
    except ModelFormatError:
        return "error"
    # a file that still loads must be a working model (or fail in predict with a ValueError naming the problem)
    try:
        assert model.predict(X).shape == (len(X),)
    except ValueError:
        return "predict-error"
    return "loaded"


@pytest.fixture
def no_pickle(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("pickle was called while loading a file")

    for name in ("load", "loads", "Unpickler"):
        monkeypatch.setattr(pickle, name, refuse)


@pytest.mark.parametrize("kind", ["native", "libsvm"])
@FUZZ
@given(data=st.data())
def test_damaged_model_files(tmp_path, small, model_files, no_pickle, kind, data):
    blob = data.draw(damaged(model_files[kind]))
    path = tmp_path / "m"
    path.write_bytes(blob)
    _load_or_documented_error(path, small[0])


def _rewrite_metadata(original: bytes, edit) -> bytes:
    """A well-formed archive whose JSON metadata was edited (what byte flips under the CRC cannot reach)."""
    source = zipfile.ZipFile(io.BytesIO(original))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as target:
        for item in source.infolist():
            payload = source.read(item.filename)
            if item.filename.endswith(".json"):
                metadata = json.loads(payload)
                edit(metadata)
                payload = json.dumps(metadata).encode()
            target.writestr(item.filename, payload)
    return out.getvalue()


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=True) | st.text(max_size=12),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=12,
)
TAGS = ["__npy__", "__sparse__", "__numpy__", "__tuple__", "__items__", "__objarray__", "__array__",
        "__dataclass__"]


@FUZZ
@given(data=st.data())
def test_edited_native_metadata(tmp_path, small, model_files, no_pickle, data):
    """Replace one attribute or parameter by a random JSON value or a random tagged value."""
    original = json.loads(zipfile.ZipFile(io.BytesIO(model_files["native"])).read("coresvm-model.json"))
    section = data.draw(st.sampled_from(["fields", "params"]))
    name = data.draw(st.sampled_from(sorted(original[section])))
    tag = data.draw(st.sampled_from([None, *TAGS]))
    value = data.draw(JSON_VALUES)
    if tag is not None:
        value = {tag: value, **data.draw(st.dictionaries(st.sampled_from(
            ["value", "dtype", "shape", "fields", "format", "data", "indices", "indptr"]), JSON_VALUES, max_size=3))}

    def edit(metadata):
        metadata[section][name] = value

    path = tmp_path / "m"
    path.write_bytes(_rewrite_metadata(model_files["native"], edit))
    _load_or_documented_error(path, small[0])


@pytest.mark.parametrize("estimator", ["os.system", "coresvm.svc.os.system", "builtins.eval", "coresvm.svc.CoreSVC.x"])
def test_model_file_cannot_name_code_to_run(tmp_path, model_files, no_pickle, estimator):
    def edit(metadata):
        metadata["estimator"] = estimator

    path = tmp_path / "m"
    path.write_bytes(_rewrite_metadata(model_files["native"], edit))
    with pytest.raises(ModelFormatError, match="unsupported estimator"):
        load_model(path)


def test_model_file_dataclass_tag_only_builds_coresvm_dataclasses(tmp_path, no_pickle):
    """Format version 1 tagged dataclasses (the kernel, the joint model); version 2 has no such tag."""
    version_1 = (Path(__file__).parent / "data" / "v1_binary_dense.csvm").read_bytes()
    for target, match in [("os:system", "not part of coresvm"), ("coresvm.svc:np", "not a dataclass"),
                          ("coresvm.kernels:resolve_gamma", "not a dataclass")]:
        def edit(metadata, target=target):
            metadata["attributes"]["_kernel_spec"] = {"__dataclass__": target, "fields": {}}

        path = tmp_path / "m"
        path.write_bytes(_rewrite_metadata(version_1, edit))
        with pytest.raises(ModelFormatError, match=match):
            load_model(path)


def test_version_2_kernel_fields_are_checked(tmp_path, model_files, no_pickle):
    for field, value in [("kernel", {"__dataclass__": "os:system", "fields": {}}), ("kernel", "exec"),
                         ("kernel_gamma", "1"), ("kernel_degree", 2.5), ("kernel_coef0", None)]:
        def edit(metadata, field=field, value=value):
            metadata["fields"][field] = value

        path = tmp_path / "m"
        path.write_bytes(_rewrite_metadata(model_files["native"], edit))
        with pytest.raises(ModelFormatError, match="not a kernel"):
            load_model(path)


def test_deeply_nested_metadata_is_a_format_error(tmp_path, model_files):
    def edit(metadata):
        metadata["fields"]["solver_info_"] = "NEST"

    blob = _rewrite_metadata(model_files["native"], edit)
    archive = zipfile.ZipFile(io.BytesIO(blob))
    text = archive.read("coresvm-model.json").decode().replace('"NEST"', "[" * 100_000 + "]" * 100_000)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as target:
        for item in archive.infolist():
            target.writestr(item.filename, text if item.filename.endswith(".json") else archive.read(item.filename))
    (tmp_path / "m").write_bytes(out.getvalue())
    with pytest.raises(ModelFormatError):
        load_model(tmp_path / "m")


# ----------------------------------------------------------------------------------------- data files
@pytest.fixture(scope="module")
def data_files(small):
    X, y = small
    X = np.where(np.abs(X) < 0.3, 0.0, np.round(X, 3))
    svmlight = io.BytesIO()
    dump_svmlight_file(X[:12], y[:12], svmlight, zero_based=False)
    csv = "\n".join(",".join(str(v) for v in (label, *row)) for label, row in zip(y[:12], X[:12], strict=True))
    npy = io.BytesIO()
    np.save(npy, np.c_[y[:12], X[:12]], allow_pickle=False)
    return {"data.txt": svmlight.getvalue(), "data.csv": ("label,a,b,c,d\n" + csv + "\n").encode(),
            "data.npy": npy.getvalue(), "data.txt.gz": gzip.compress(svmlight.getvalue(), mtime=0)}


@FUZZ
@given(name=st.sampled_from(["data.txt", "data.csv", "data.npy", "data.txt.gz"]), data=st.data())
def test_damaged_data_files_read_or_give_a_usage_error(tmp_path, data_files, no_pickle, name, data):
    path = tmp_path / name
    path.write_bytes(data.draw(damaged(data_files[name])))
    try:
        X, y = read_data(str(path))
    except UsageError as error:
        assert "\n" not in str(error)
        return
    assert X.shape[0] == len(y) >= 1


@settings(max_examples=15, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_damaged_training_file_through_the_command_line(tmp_path, data_files, capsys, data):
    """End to end: 'coresvm train' on a damaged file exits 0 (it was still data) or 2 with one line."""
    path = tmp_path / "train.txt"
    path.write_bytes(data.draw(damaged(data_files["data.txt"])))
    code = main(["train", "-q", "-m", "1", "--param", "max_iter=200", str(path), str(tmp_path / "m")])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if code != 0:
        assert code == 2 and len(err.strip().splitlines()) == 1, err
