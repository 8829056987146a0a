"""The native model file's schema (format version 2): declared fields, version 1 files, drift between the two.

Every fitted attribute of every estimator is either a field of the schema (``model_io.SCHEMAS``) or listed with
its reason in ``model_io.NOT_SAVED``: a new or renamed attribute fails here until the schema says what to do
with it.  Round trips are bit for bit; the files of tests/data were written by format version 1.
"""

import dataclasses
import io
import json
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.svm import SVC

from coresvm import AESVC, CoreOneClassSVM, CoreSVC, load_model, save_model
from coresvm.model_io import (
    FORMAT_VERSION,
    METADATA_MEMBER,
    NOT_SAVED,
    SCHEMAS,
    SHARED_PARTS,
    ModelFormatError,
    read_metadata,
    schema_attributes,
)

DATA = Path(__file__).parent / "data"
VERSION_1_MODELS = ["binary_dense", "ovo_csr", "ovr_float32", "joint"]
# Optional fields no fit of CONFIGS sets: the command line sets the index base of the LIBSVM file it trained on.
SET_OUTSIDE_FIT = {"coresvm.CoreSVC": {"libsvm_index_base_"}}


def _problem():
    rng = np.random.RandomState(0)
    X = rng.randn(48, 3)
    y3 = np.argmax(X @ rng.randn(3, 3), axis=1)
    y2 = np.where(X[:, 0] * X[:, 1] > 0, 1, -1)
    return X, y2, y3


def _csr(X):
    return sp.csr_matrix(np.where(np.abs(X) < 0.3, 0.0, X))


# name: (estimator, training matrix kind, labels: 2 or 3 classes or None)
CONFIGS = {
    "binary": (lambda: CoreSVC(C=10.0, gamma=0.5, random_state=0), "dense", 2),
    "binary_csr_probability": (lambda: CoreSVC(C=10.0, gamma=0.5, probability=True, random_state=0), "csr", 2),
    "binary_float32_linear": (lambda: CoreSVC(C=1.0, kernel="linear", random_state=0), "float32", 2),
    "ovo": (lambda: CoreSVC(C=5.0, gamma=0.3, decision_function_shape="ovo", random_state=0), "dense", 3),
    "ovo_csr_shape_ovr": (lambda: CoreSVC(C=5.0, gamma=0.3, random_state=0), "csr", 3),
    "ovr": (lambda: CoreSVC(C=5.0, kernel="poly", degree=2, coef0=1.0, multiclass="ovr", random_state=0),
            "dense", 3),
    "joint": (lambda: CoreSVC(C=5.0, gamma=0.3, multiclass="joint", random_state=0), "dense", 3),
    "joint_csr": (lambda: CoreSVC(C=5.0, gamma=0.3, multiclass="joint", random_state=0), "csr", 3),
    "warm_start": (lambda: CoreSVC(C=5.0, gamma=0.3, warm_start=True, random_state=0), "dense", 3),
    "oneclass_auto_C": (lambda: CoreOneClassSVM(nu=0.2, random_state=0), "dense", None),
    "oneclass_csr_fixed_C": (lambda: CoreOneClassSVM(nu=0.2, C=0.5, random_state=0), "csr", None),
    "aesvc_binary": (lambda: AESVC(C=10.0, gamma=0.5), "dense", 2),
    "aesvc_csr_multiclass": (lambda: AESVC(C=10.0, gamma=0.5, cache_representative_set=False), "csr", 3),
}


def _estimator_key(model) -> str:
    return f"coresvm.{type(model).__name__}"


@pytest.fixture(scope="module")
def fitted():
    """Each configuration's fitted model and the matrix it was trained on."""
    X, y2, y3 = _problem()
    models = {}
    for name, (make, kind, n_classes) in CONFIGS.items():
        X_fit = {"dense": X, "csr": _csr(X), "float32": X.astype(np.float32)}[kind]
        y = {2: y2, 3: y3, None: None}[n_classes]
        model = make()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a tiny problem may stop early; the model is still a model
            model.fit(X_fit, y)
            if name == "warm_start":  # a second fit: the kept kernel rows and inner products exist now
                model.set_params(C=6.0).fit(X_fit, y)
        models[name] = (model, X_fit)
    return models


def _outputs(model, X) -> dict:
    out = {"decision_function": model.decision_function(X), "predict": model.predict(X)}
    if isinstance(model, CoreSVC) and model.decision_function_shape == "ovr" and len(model.classes_) > 2:
        model.decision_function_shape = "ovo"  # the pairwise values too
        try:
            out["decision_function_ovo"] = model.decision_function(X)
        finally:
            model.decision_function_shape = "ovr"
    if isinstance(model, CoreOneClassSVM):
        out["score_samples"] = model.score_samples(X)
    if getattr(model, "probability", False):
        out["predict_proba"] = model.predict_proba(X)
    return out


def _assert_same_outputs(loaded, model, X):
    expected = _outputs(model, X)
    got = _outputs(loaded, X)
    assert set(got) == set(expected)
    for name, value in expected.items():
        assert got[name].dtype == value.dtype, name
        np.testing.assert_array_equal(got[name], value, err_msg=name)


# --------------------------------------------------------------------------- schema drift
def _fitted_attributes(model) -> set[str]:
    """Every attribute a fit set: ``vars()`` without the constructor parameters."""
    return set(vars(model)) - set(model.get_params(deep=False))


@pytest.mark.parametrize("name", CONFIGS)
def test_every_fitted_attribute_is_in_the_schema_or_declared_unsaved(fitted, name):
    model, _ = fitted[name]
    key = _estimator_key(model)
    declared = schema_attributes(key) | set(NOT_SAVED[key])
    undeclared = sorted(_fitted_attributes(model) - declared)
    assert not undeclared, (
        f"{type(model).__name__} attributes {undeclared} are neither fields of model_io.SCHEMAS[{key!r}] nor listed "
        "in model_io.NOT_SAVED with the reason they are not saved")


@pytest.mark.parametrize("name", CONFIGS)
def test_every_part_of_a_composite_attribute_is_in_the_schema(fitted, name):
    """The kernel and the joint model (dataclasses) and AESVC's SVC: each of their fields or fitted attributes is a
    field of the schema, shared with another attribute (SHARED_PARTS) or declared unsaved."""
    model, _ = fitted[name]
    key = _estimator_key(model)
    declared = schema_attributes(key) | set(NOT_SAVED[key])
    owners = {field.attribute.partition(".")[0] for field in SCHEMAS[key] if "." in field.attribute}
    for owner in owners:
        value = getattr(model, owner, None)
        if value is None:
            continue
        if dataclasses.is_dataclass(value):
            parts = {f.name for f in dataclasses.fields(value)}
        else:
            parts = set(vars(value)) - set(vars(type(value)()))  # what fit set (SVC's __init__ also sets nu, ...)
        undeclared = sorted(part for part in parts if f"{owner}.{part}" not in declared)
        assert not undeclared, f"parts {undeclared} of {owner} are not in model_io.SCHEMAS[{key!r}]"


def test_every_schema_field_names_an_attribute_that_fits_set(fitted):
    """A field whose attribute no fit sets any more (renamed on the estimator only) fails here."""
    present: dict[str, set[str]] = {key: set() for key in SCHEMAS}
    for model, _ in fitted.values():
        key = _estimator_key(model)
        present[key] |= _fitted_attributes(model)
        for field in SCHEMAS[key]:
            owner, dot, part = field.attribute.partition(".")
            if dot and getattr(model, owner, None) is not None and (
                    part == "get_params()" or hasattr(getattr(model, owner), part)):
                present[key].add(field.attribute)
    for key, fields in SCHEMAS.items():
        outside_fit = SET_OUTSIDE_FIT.get(key, set()) | {"feature_names_in_"}  # only after a fit on a DataFrame
        never_set = sorted(field.attribute for field in fields
                           if field.attribute not in present[key] and field.attribute not in outside_fit)
        assert not never_set, f"model_io.SCHEMAS[{key!r}] names attributes no fit sets: {never_set}"
        unsaved_never_set = sorted(set(NOT_SAVED[key]) - present[key])
        assert not unsaved_never_set, f"model_io.NOT_SAVED[{key!r}] names attributes no fit sets: {unsaved_never_set}"
    for owner, shared in SHARED_PARTS.items():
        assert all(isinstance(part, str) and isinstance(attribute, str) for part, attribute in shared.items()), owner


def test_field_names_are_unique_and_plain():
    for key, fields in SCHEMAS.items():
        names = [field.name for field in fields]
        assert len(names) == len(set(names)), key
        assert all(name.isidentifier() and not name.startswith("_") for name in names), key  # also member names


# --------------------------------------------------------------------------- version 2 round trips
@pytest.mark.parametrize("name", CONFIGS)
def test_round_trip_is_bit_for_bit(tmp_path, fitted, name):
    model, X = fitted[name]
    save_model(model, tmp_path / "m")
    loaded = load_model(tmp_path / "m")
    assert type(loaded) is type(model)
    assert loaded.get_params() == model.get_params()
    _assert_same_outputs(loaded, model, X)
    _assert_same_outputs(loaded, model, _problem()[0][:7])  # dense input to a CSR-trained model too
    for attribute in ("support_vectors_", "dual_coef_", "intercept_", "classes_", "support_"):
        if hasattr(model, attribute):
            value, other = getattr(model, attribute), getattr(loaded, attribute)
            assert type(other) is type(value) and other.dtype == value.dtype, attribute
    # saving the loaded model writes the same fields
    save_model(loaded, tmp_path / "again")
    first, second = read_metadata(tmp_path / "m"), read_metadata(tmp_path / "again")
    assert first["fields"] == second["fields"] and first["params"] == second["params"]


@pytest.mark.parametrize("name", CONFIGS)
def test_the_file_holds_the_declared_fields_only(tmp_path, fitted, name):
    model, _ = fitted[name]
    save_model(model, tmp_path / "m")
    with zipfile.ZipFile(tmp_path / "m") as archive:
        metadata = json.loads(archive.read(METADATA_MEMBER))
        members = set(archive.namelist()) - {METADATA_MEMBER}
    key = _estimator_key(model)
    assert metadata["format_version"] == FORMAT_VERSION == 2
    assert metadata["estimator"] == key
    assert "attributes" not in metadata
    declared = {field.name: field for field in SCHEMAS[key]}
    assert set(metadata["fields"]) <= set(declared)
    assert {name for name, field in declared.items() if field.required} <= set(metadata["fields"])
    # array members are named after fields, never after private attribute names
    assert all(member.split("/")[1].split(".")[0] in declared for member in members)
    assert "__dataclass__" not in json.dumps(metadata)


def test_a_loaded_model_warm_starts(tmp_path, fitted):
    """The solution a warm start reads is saved (the kept kernel rows are not: the fit recomputes them)."""
    model, X = fitted["warm_start"]
    save_model(model, tmp_path / "m")
    loaded = load_model(tmp_path / "m")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded.set_params(C=7.0).fit(X, _problem()[2])
    assert loaded.warm_started_


def test_missing_and_unknown_fields_are_format_errors(tmp_path, fitted):
    model, _ = fitted["binary"]
    save_model(model, tmp_path / "m")
    original = (tmp_path / "m").read_bytes()

    def rewrite(change):
        with zipfile.ZipFile(io.BytesIO(original)) as archive:
            members = {name: archive.read(name) for name in archive.namelist()}
        metadata = json.loads(members[METADATA_MEMBER])
        change(metadata["fields"])
        members[METADATA_MEMBER] = json.dumps(metadata).encode()
        with zipfile.ZipFile(tmp_path / "m", "w") as archive:
            for name, data in members.items():
                archive.writestr(name, data)

    rewrite(lambda fields: fields.pop("sv_norms"))
    with pytest.raises(ModelFormatError, match="missing sv_norms"):
        load_model(tmp_path / "m")
    rewrite(lambda fields: fields.update(_pair_coef=fields["pair_coef"]))
    with pytest.raises(ModelFormatError, match=r"fields this coresvm's CoreSVC does not know \(_pair_coef\)"):
        load_model(tmp_path / "m")


def test_only_coresvm_estimators_are_saved(tmp_path):
    X, y2, _ = _problem()
    with pytest.raises(ValueError, match="cannot save a SVC"):
        save_model(SVC().fit(X, y2), tmp_path / "m")

    class Derived(CoreSVC):
        pass

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = Derived(random_state=0).fit(X, y2)
    with pytest.raises(ValueError, match="cannot save a .*Derived"):
        save_model(model, tmp_path / "m")


# --------------------------------------------------------------------------- version 1 files
@pytest.mark.parametrize("name", VERSION_1_MODELS)
def test_version_1_files_load_and_predict_identically(tmp_path, name):
    """tests/data/v1_*.csvm were written by format version 1 (tests/data/make_v1_models.py), with the
    decision values and labels of the model that wrote them."""
    path = DATA / f"v1_{name}.csvm"
    assert read_metadata(path)["format_version"] == 1
    expected = np.load(DATA / "v1_expected.npz", allow_pickle=False)
    X = expected["X_eval"]
    model = load_model(path)
    decision, labels = model.decision_function(X), model.predict(X)
    assert decision.dtype == expected[f"{name}_decision"].dtype
    # the recorded values to the last few bits: BLAS sums in an order of its own per processor (an AMD EPYC
    # machine differed from the recording one by up to 7e-16)
    np.testing.assert_allclose(decision, expected[f"{name}_decision"], rtol=1e-13, atol=1e-14)
    np.testing.assert_array_equal(labels, expected[f"{name}_predict"])
    # written again, as version 2, it predicts bit for bit as the version 1 file on this machine
    save_model(model, tmp_path / "v2")
    assert read_metadata(tmp_path / "v2")["format_version"] == 2
    again = load_model(tmp_path / "v2")
    np.testing.assert_array_equal(again.decision_function(X), decision)
    np.testing.assert_array_equal(again.predict(X), expected[f"{name}_predict"])
    assert set(vars(again)) == set(vars(model)) - set(NOT_SAVED["coresvm.CoreSVC"])
