"""Model files: a native archive (JSON + NumPy arrays, never pickle) and LIBSVM's text format.

Native format
-------------
A ZIP archive holding ``coresvm-model.json`` (format name and version, the
coresvm version, the estimator's class and ``get_params()``, a human-readable
summary and the model's *fields*) and one ``.npy`` member per array field,
written and read with ``allow_pickle=False``.

Version 2 writes a declared set of fields per estimator (:data:`SCHEMAS`):
stable names, each mapped to the attribute (or part of a composite attribute,
such as the kernel or AESVC's ``SVC``) it is written from and read back into, so
renaming a private attribute changes this table, not the files.  Attributes
that are deliberately not written are listed with the reason in
:data:`NOT_SAVED`; tests fail when a fitted attribute is in neither.  Version 1
(coresvm 0.1.0 before the schema) stored ``vars(model)`` under the attribute
names; :func:`load_model` still reads it.  Loading rebuilds the estimator from
the same arrays, so its ``decision_function`` equals the original's bit for bit.

LIBSVM format
-------------
The text format of LIBSVM's ``svm-train``/``svm_save_model`` for a C-SVC,
readable by LIBSVM's ``svm_load_model`` and ``svm-predict``.  It can express
every CoreSVC kernel and the one-vs-one model (decision
``sum_i coef_i k(x_i, x) - rho`` per pair), but not the estimator's metadata, and
its class labels must be integers.  :func:`load_model` reads such files too
(any C-SVC model with a linear, polynomial, RBF or sigmoid kernel).
"""

from __future__ import annotations

import dataclasses
import importlib
import io
import json
import math
import os
import warnings
import zipfile
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from .kernels import KERNEL_CODES, KernelSpec, squared_norms

__all__ = ["ModelFormatError", "ModelFileNotFoundError", "load_model", "save_model", "model_summary", "FORMAT_NAME",
           "FORMAT_VERSION", "Field", "SCHEMAS", "SHARED_PARTS", "NOT_SAVED", "schema_attributes"]

FORMAT_NAME = "coresvm-model"
FORMAT_VERSION = 2
METADATA_MEMBER = "coresvm-model.json"
ARRAY_DIR = "arrays/"
ZIP_MAGIC = b"PK\x03\x04"
LIBSVM_KERNELS = {"linear": "linear", "poly": "polynomial", "rbf": "rbf", "sigmoid": "sigmoid"}
KERNELS_FROM_LIBSVM = {value: key for key, value in LIBSVM_KERNELS.items()}
# Attributes without which a loaded model cannot predict; a file lacking one is corrupt.
REQUIRED_ATTRIBUTES = ("classes_", "support_vectors_", "intercept_", "_pair_coef", "_kernel_spec", "n_features_in_")


# --------------------------------------------------------------------------- the version-2 schema
@dataclasses.dataclass(frozen=True)
class Field:
    """One field of a version-2 model file.

    Parameters
    ----------
    name : str
        The field's name in the file (and of its ``.npy`` member): stable across coresvm versions.
    attribute : str
        The estimator attribute it is written from and read into; ``"attr.part"`` for a part of a
        composite attribute (a field of a dataclass such as the kernel, an attribute of a nested
        estimator, or ``get_params()`` of one), rebuilt on loading from all its parts.
    required : bool, default=True
        Whether every fitted model has it; an optional field is left out when the attribute is missing
        (or the composite attribute is None) and then not set on loading.
    """

    name: str
    attribute: str
    required: bool = True


def _fields(*specs) -> tuple[Field, ...]:
    """Fields from ``name`` (file name = attribute name), ``(name, attribute)`` or ``(name, attribute, required)``."""
    return tuple(Field(spec, spec) if isinstance(spec, str) else Field(*spec) for spec in specs)


OPTIONAL = False
_KERNEL_FIELDS = (("kernel", "_kernel_spec.name"), ("kernel_gamma", "_kernel_spec.gamma"),
                  ("kernel_coef0", "_kernel_spec.coef0"), ("kernel_degree", "_kernel_spec.degree"))
_COMMON_FIELDS = ("n_features_in_", ("feature_names_in_", "feature_names_in_", OPTIONAL), "gamma_", *_KERNEL_FIELDS)

# Per estimator (by the public name files record), every field a version-2 file holds, in file order.
SCHEMAS: dict[str, tuple[Field, ...]] = {
    "coresvm.CoreSVC": _fields(
        *_COMMON_FIELDS,
        "classes_", "support_", "support_vectors_", "n_support_", "dual_coef_", "intercept_",
        ("sv_norms", "_sv_norms"),
        # one-vs-one and one-vs-rest: one coefficient column per binary problem, and which of the two
        ("pair_coef", "_pair_coef", OPTIONAL),
        ("decomposition", "_decomposition", OPTIONAL),
        # multiclass='joint' (joint.JointModel; its support and intercept are support_ and intercept_)
        ("joint_support_class", "_joint_model.support_class", OPTIONAL),
        ("joint_alpha", "_joint_model.alpha", OPTIONAL),
        ("joint_coef", "_joint_model.coef", OPTIONAL),
        ("joint_rho", "_joint_model.rho", OPTIONAL),
        ("joint_info", "_joint_model.info", OPTIONAL),
        ("probA_", "probA_", OPTIONAL), ("probB_", "probB_", OPTIONAL),
        "n_iter_", "solver_info_", "fit_status_",
        # the solution a warm_start fit of the loaded model starts from (svc.CoreSVC.warm_start_state)
        ("warm_started_", "warm_started_", OPTIONAL),
        ("fitted_multiclass", "_fitted_multiclass", OPTIONAL),
        ("warm_rows", "_warm_rows", OPTIONAL), ("warm_alpha", "_warm_alpha", OPTIONAL),
        ("warm_offsets", "_warm_offsets", OPTIONAL), ("warm_support_classes", "_warm_support_classes", OPTIONAL),
        ("warm_C", "_warm_C", OPTIONAL),
        # the LIBSVM index base of the training file (command line), for predict and format='libsvm'
        ("libsvm_index_base_", "libsvm_index_base_", OPTIONAL),
    ),
    "coresvm.CoreOneClassSVM": _fields(
        *_COMMON_FIELDS,
        "C_", "calibration_", "support_", "support_vectors_", "dual_coef_", ("sv_norms", "_sv_norms"),
        "rho_", "offset_", "intercept_", "n_iter_", "solver_info_", "fit_status_",
    ),
    "coresvm.AESVC": _fields(
        *_COMMON_FIELDS,
        "classes_", "support_", "support_vectors_", "n_support_", "dual_coef_", "intercept_", "fit_status_",
        "n_iter_", "rs_size_per_class_", "rs_fraction_", "derive_time_", "max_residual_",
        ("sparse_fit", "_sparse_fit"),
        # the scikit-learn SVC trained on the representative set, which predicts; its arrays shared with
        # the AESVC's own attributes are written once (SHARED_PARTS)
        ("svc_params", "svm_.get_params()"),
        ("svc_support", "svm_.support_"),
        ("svc_dual_coef", "svm_._dual_coef_"),
        ("svc_intercept", "svm_._intercept_"),
        ("svc_prob_a", "svm_._probA"), ("svc_prob_b", "svm_._probB"),
        ("svc_gamma", "svm_._gamma"),
        ("svc_sparse", "svm_._sparse"),
        ("svc_shape_fit", "svm_.shape_fit_"),
        ("svc_class_weight", "svm_.class_weight_"),
        ("svc_num_iter", "svm_._num_iter"),
        ("svc_effective_probability", "svm_._effective_probability", OPTIONAL),
    ),
}

# Parts of a composite attribute that are another attribute of the estimator (the same object), written once:
# {composite attribute: {part: estimator attribute}}.
SHARED_PARTS: dict[str, dict[str, str]] = {
    "_joint_model": {"support": "support_", "intercept": "intercept_"},
    "svm_": {"classes_": "classes_", "support_vectors_": "support_vectors_", "_n_support": "n_support_",
             "dual_coef_": "dual_coef_", "intercept_": "intercept_", "fit_status_": "fit_status_",
             "n_iter_": "n_iter_", "n_features_in_": "n_features_in_"},
}

# Fitted attributes that are deliberately not written, with the reason ("attr.part" for a composite's part).
NOT_SAVED: dict[str, dict[str, str]] = {
    "coresvm.CoreSVC": {
        "_kernel_rows": "kernel rows a warm_start fit keeps for the next fit on the same X in this process "
                        "(up to cache_size of memory; a warm fit rebuilds them)",
        "_dot_rows": "inner products a warm_start fit keeps for the next fit on the same X in this process",
    },
    "coresvm.CoreOneClassSVM": {},
    "coresvm.AESVC": {
        "representative_set_": "DeriveRS's diagnostics, with arrays over every training row (segment_of, "
                               "residual); prediction reads svm_, and rs_*_ and max_residual_ are saved",
        "rs_from_cache_": "whether this process's representative-set cache answered the fit",
    },
}


def schema_attributes(estimator: str) -> set[str]:
    """The estimator attributes a version-2 file holds: top-level attributes of the fields and ``attr.part``
    names of composite parts, those shared with other attributes included (:data:`SHARED_PARTS`).

    Parameters
    ----------
    estimator : str
        A key of :data:`SCHEMAS`, e.g. ``"coresvm.CoreSVC"``.

    Returns
    -------
    set of str
    """
    names = set()
    for field in SCHEMAS[estimator]:
        names.add(field.attribute)
        owner, dot, _ = field.attribute.partition(".")
        if dot:
            names.add(owner)
            names.update(f"{owner}.{part}" for part in SHARED_PARTS.get(owner, {}))
    return names


class ModelFormatError(ValueError):
    """A model file is missing, corrupt, truncated, of a future format version, or not a model file."""


class ModelFileNotFoundError(ModelFormatError, FileNotFoundError):
    """The model path does not exist: a :class:`ModelFormatError` that is also the ``FileNotFoundError``
    :func:`load_model` raised before, so either ``except`` clause catches it."""


@contextmanager
def _model_path_errors(path: Path):
    """Turn an ``OSError`` of reading ``path`` (missing, a directory, unreadable, ...) into a one-line
    :class:`ModelFormatError` that names the path: every way a model path can be wrong ends in that error."""
    try:
        yield
    except ModelFormatError:
        raise
    except FileNotFoundError:
        raise ModelFileNotFoundError(f"{path}: no such model file") from None
    except IsADirectoryError:
        raise ModelFormatError(f"{path}: is a directory, not a model file") from None
    except NotADirectoryError:
        raise ModelFormatError(f"{path}: no such model file (a part of the path is not a directory)") from None
    except PermissionError:
        raise ModelFormatError(f"{path}: cannot read the model file (permission denied)") from None
    except OSError as error:
        raise ModelFormatError(f"{path}: cannot read the model file ({error.strerror or error})") from None


# --------------------------------------------------------------------------- public API
def save_model(model, path: str | os.PathLike, format: str = "native") -> None:
    """Write a fitted :class:`~coresvm.CoreSVC`, :class:`~coresvm.CoreOneClassSVM` or :class:`~coresvm.AESVC`
    to ``path``.

    Parameters
    ----------
    model : CoreSVC, CoreOneClassSVM or AESVC
        A fitted estimator (the LIBSVM format holds CoreSVC models only).
    path : str or path-like
        Output file; it is replaced if it exists (written to a temporary file
        first, so a failed save never leaves a half-written model behind).
    format : {'native', 'libsvm'}, default='native'
        'native': the model's fields (:data:`SCHEMAS`) with its metadata (JSON +
        ``.npy`` arrays in one ZIP archive, no pickle), format version 2.  'libsvm': LIBSVM's text model format, which
        LIBSVM's ``svm_load_model``/``svm-predict`` read; it keeps only what LIBSVM
        can express (kernel, support vectors, coefficients, ``rho``, labels).

    Raises
    ------
    ValueError
        If the model is not fitted or not one of these estimators, a parameter or
        field cannot be stored without pickle, or (LIBSVM) the labels are not
        integers.

    Warns
    -----
    UserWarning
        Naming attributes of ``model`` that are neither fields of the format nor
        declared unsaved (:data:`NOT_SAVED`), e.g. set by the caller: they are
        not written.
    """
    _check_fitted(model)
    if format == "native":
        payload = _native_bytes(model)
    elif format == "libsvm":
        payload = libsvm_model_text(model).encode("ascii")
    else:
        raise ValueError(f"model format must be 'native' or 'libsvm'; got {format!r}")
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_bytes(payload)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def load_model(path: str | os.PathLike):
    """Read a model written by :func:`save_model` (native or LIBSVM text).

    The format is recognized from the file's content, not its name; native files
    of format versions 1 and 2 are read.  A LIBSVM
    model (also one written by LIBSVM itself) becomes a CoreSVC that predicts
    like it; its training indices ``support_`` are unknown and set to -1.  Its
    classes are sorted, so a voting tie between three or more classes goes to the
    lowest label, where LIBSVM picks the label it saw first in training.

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    CoreSVC, CoreOneClassSVM or AESVC
        A fitted estimator.

    Raises
    ------
    ModelFormatError
        With a one-line message naming ``path``, if it does not exist (then a
        :class:`ModelFileNotFoundError`, also a ``FileNotFoundError``), is a
        directory or unreadable, or the file is not a model file, is corrupt or
        truncated, or was written by a newer coresvm in a format version this
        one does not know.  Loading never runs code from the file (no pickle).
    """
    path = Path(path)
    with _model_path_errors(path):
        with open(path, "rb") as handle:
            start = handle.read(64)
        if start.startswith(ZIP_MAGIC):
            return _load_native(path)
        if start.lstrip().startswith(b"svm_type"):
            return _load_libsvm(path)
    raise ModelFormatError(f"{path}: not a model file (neither a coresvm model archive nor a LIBSVM text model)")


def read_metadata(path: str | os.PathLike) -> dict:
    """The JSON metadata of a native model file (format, versions, parameters, summary).

    For a LIBSVM text model, the summary of the model it loads as.
    """
    path = Path(path)
    with _model_path_errors(path):
        with open(path, "rb") as handle:
            head = handle.read(len(ZIP_MAGIC))
        if head != ZIP_MAGIC:
            model = load_model(path)
            return {"format": "libsvm", "summary": model_summary(model)}
        with _open_archive(path) as archive:
            return _read_metadata(archive, path)


def model_summary(model) -> dict:
    """JSON-ready description of a fitted model: kernel, solver, classes, #SV, bias rule, status."""
    params = model.get_params(deep=False)
    spec = model._kernel_spec
    classes = getattr(model, "classes_", [-1, 1])  # one-class: the labels predict gives
    n_support = getattr(model, "n_support_", None)
    if n_support is None:  # one-class: all SVs are of the one class
        n_support = [len(model.support_)]
    info = getattr(model, "solver_info_", []) or []
    if isinstance(info, dict):  # one-class: one solver record
        info = [info]
    return {
        "estimator": type(model).__name__,
        "solver": params.get("solver", "libsvm" if hasattr(model, "svm_") else None),
        "kernel": spec.name,
        "gamma": float(spec.gamma),
        "degree": int(spec.degree),
        "coef0": float(spec.coef0),
        "C": params.get("C"),
        "tol": params.get("tol"),
        "classes": _jsonable_list(classes),
        "n_features": int(model.n_features_in_),
        "n_support": [int(v) for v in n_support],
        "support_vectors": "csr" if sp.issparse(model.support_vectors_) else f"dense {model.support_vectors_.dtype}",
        "bias_rule": _bias_summary(model, params),
        "multiclass": _multiclass_summary(model),
        "decision_function_shape": params.get("decision_function_shape"),
        "fit_status": int(getattr(model, "fit_status_", 0)),
        "iterations": [int(v) for v in np.atleast_1d(getattr(model, "n_iter_", []))],
        "statuses": [str(record.get("status")) for record in info if isinstance(record, dict)],
    }


def _bias_summary(model, params: dict) -> str:
    if not hasattr(model, "classes_"):
        return "none; offset_ is the nu-quantile of the training scores"
    if hasattr(model, "svm_"):
        return "LIBSVM's (scikit-learn SVC on the representative set)"
    bias = params.get("bias", "theoretic")  # CoreSVC's bias: a rule name, or a bool (True is 'theoretic')
    if bias is False or bias == "none":
        return "none (b = 0)"
    if bias == "kkt":
        return "kkt: average of the KKT conditions over the support vectors"
    return "theoretic: b = sum_i alpha_i y_i / rho"


def _multiclass_summary(model) -> str:
    if not hasattr(model, "classes_"):
        return "one-class"
    if getattr(model, "_joint_model", None) is not None:
        return "joint (all-at-once, Strack 2013 sec. 5.4): argmax of one score per class"
    if len(model.classes_) == 2:
        return "binary"
    if getattr(model, "_decomposition", "ovo") == "ovr":
        return "one-vs-rest, largest decision value"
    return "one-vs-one with max-wins voting"


# --------------------------------------------------------------------------- native: write
def _estimator_name(model) -> str:
    """The model's key in :data:`SCHEMAS` (its public import path)."""
    name = f"coresvm.{type(model).__name__}"
    if name not in SCHEMAS or _estimator_classes()[name] is not type(model):
        raise ValueError(f"cannot save a {type(model).__qualname__}: model files hold {', '.join(SCHEMAS)} models")
    return name


_MISSING = object()


def _attribute_value(model, attribute: str):
    """The value of ``attribute`` (``"attr.part"``: a part of a composite attribute), or ``_MISSING``."""
    owner, dot, part = attribute.partition(".")
    value = getattr(model, owner, _MISSING)
    if not dot or value is _MISSING:
        return value
    if value is None:
        return _MISSING  # an optional composite (a CoreSVC's _joint_model outside multiclass='joint')
    if part == "get_params()":
        return value.get_params(deep=False)
    return getattr(value, part, _MISSING)


def _native_bytes(model) -> bytes:
    from . import __version__

    estimator = _estimator_name(model)
    params = model.get_params(deep=False)
    arrays: dict[str, np.ndarray] = {}
    encoded_params = {}
    for name, value in params.items():
        encoded_params[name] = _encode_json_value(value, f"parameter {name!r}")
    fields = {}
    for field in SCHEMAS[estimator]:
        value = _attribute_value(model, field.attribute)
        if value is _MISSING:
            if field.required:
                raise ValueError(f"cannot save the model: it has no {field.attribute!r} (field {field.name!r})")
            continue
        fields[field.name] = _encode_attribute(field.name, value, arrays, f"attribute {field.attribute!r}")
    _warn_unsaved(model, estimator, params)
    metadata = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "coresvm_version": __version__,
        "estimator": estimator,
        "params": encoded_params,
        "summary": model_summary(model),
        "fields": fields,
    }
    # allow_nan: solver records may hold inf (a gap never computed); Python's json reads it back.
    text = json.dumps(metadata, indent=1, allow_nan=True)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(METADATA_MEMBER, text)
        for member, array in arrays.items():
            data = io.BytesIO()
            np.lib.format.write_array(data, np.asanyarray(array), allow_pickle=False)
            archive.writestr(member, data.getvalue())
    return buffer.getvalue()


def _warn_unsaved(model, estimator: str, params: dict) -> None:
    """Warn about attributes neither in the schema nor declared unsaved (e.g. set by the user): not written."""
    known = schema_attributes(estimator) | set(NOT_SAVED[estimator]) | set(params)
    unknown = sorted(name for name, value in vars(model).items()
                     if name not in known and getattr(type(value), "transient", False) is not True)
    if unknown:
        warnings.warn(
            f"{type(model).__name__} attributes {', '.join(unknown)} are not part of the model file format "
            "and are not saved",
            UserWarning,
            stacklevel=4,
        )


def _encode_attribute(name: str, value, arrays: dict, what: str) -> Any:
    """``value`` as JSON, its arrays added to ``arrays`` as members named after ``name``."""
    if sp.issparse(value):
        if value.format not in ("csr", "csc"):
            value = value.tocsr()
        members = {}
        for part in ("data", "indices", "indptr"):
            member = f"{ARRAY_DIR}{name}.{part}.npy"
            arrays[member] = getattr(value, part)
            members[part] = member
        return {
            "__sparse__": {
                "format": value.format,
                "array_api": isinstance(value, sp.sparray),
                "shape": list(value.shape),
                "sorted_indices": bool(value.has_sorted_indices),
                **members,
            }
        }
    if isinstance(value, np.ndarray) and value.dtype != object:
        member = f"{ARRAY_DIR}{name}.npy"
        arrays[member] = value
        return {"__npy__": member}
    return _encode_json_value(value, what)


def _encode_json_value(value, what: str) -> Any:
    """Encode ``value`` as JSON with tags for what plain JSON would change (tuples, non-str keys, numpy types)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value
    if isinstance(value, np.generic):
        if isinstance(value, (np.bool_, np.integer, np.floating)):
            return {"__numpy__": value.dtype.str, "value": value.item()}
        raise ValueError(f"cannot store {what}: numpy value of type {value.dtype} is not supported")
    if isinstance(value, list):
        return [_encode_json_value(item, what) for item in value]
    if isinstance(value, tuple):
        return {"__tuple__": [_encode_json_value(item, what) for item in value]}
    if isinstance(value, dict):
        if all(isinstance(key, str) and not key.startswith("__") for key in value):
            return {key: _encode_json_value(item, what) for key, item in value.items()}
        return {"__items__": [[_encode_json_value(k, what), _encode_json_value(v, what)] for k, v in value.items()]}
    if isinstance(value, np.ndarray):
        # object arrays (e.g. feature_names_in_) are kept only when they hold plain strings
        if value.dtype == object and all(isinstance(item, str) for item in value.ravel()):
            return {"__objarray__": value.ravel().tolist(), "shape": list(value.shape)}
        if value.dtype != object:
            return {"__array__": value.tolist(), "dtype": value.dtype.str, "shape": list(value.shape)}
    raise ValueError(
        f"cannot store {what}: a value of type {type(value).__name__} has no JSON form and model files never "
        "use pickle (use plain numbers, strings, lists or dicts, e.g. an int random_state)"
    )


# --------------------------------------------------------------------------- native: read
def _open_archive(path: Path) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(path)
    except zipfile.BadZipFile as error:
        raise ModelFormatError(f"{path}: truncated or corrupt model file ({error})") from None


def _read_metadata(archive: zipfile.ZipFile, path: Path) -> dict:
    try:
        text = archive.read(METADATA_MEMBER)
    except KeyError:
        raise ModelFormatError(f"{path}: not a coresvm model archive (no {METADATA_MEMBER})") from None
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError) as error:
        raise ModelFormatError(f"{path}: corrupt model file ({error})") from None
    try:
        metadata = json.loads(text)
    except (ValueError, UnicodeDecodeError, RecursionError) as error:  # RecursionError: absurdly nested JSON
        raise ModelFormatError(f"{path}: corrupt model metadata ({error})") from None
    if not isinstance(metadata, dict) or metadata.get("format") != FORMAT_NAME:
        raise ModelFormatError(f"{path}: not a coresvm model archive (format {metadata.get('format')!r})")
    version = metadata.get("format_version")
    if not isinstance(version, int) or version < 1:
        raise ModelFormatError(f"{path}: corrupt model metadata (format_version {version!r})")
    if version > FORMAT_VERSION:
        raise ModelFormatError(
            f"{path}: model file format version {version} (written by coresvm {metadata.get('coresvm_version')}) "
            f"is newer than this coresvm reads (version {FORMAT_VERSION}); upgrade coresvm"
        )
    return metadata


def _load_native(path: Path):
    with _open_archive(path) as archive:
        metadata = _read_metadata(archive, path)
        try:
            version = metadata["format_version"]
            estimator_cls = _estimator_class(metadata.get("estimator"), version)
            params = {name: _decode(value, archive, version) for name, value in metadata["params"].items()}
            known = estimator_cls().get_params(deep=False)
            unknown = sorted(set(params) - set(known))
            if unknown:
                raise ModelFormatError(
                    f"{path}: the model sets parameters this coresvm's {estimator_cls.__name__} does not have "
                    f"({', '.join(unknown)}); it was written by coresvm {metadata.get('coresvm_version')}"
                )
            model = estimator_cls(**params)
            if version == 1:
                for name, value in metadata["attributes"].items():
                    setattr(model, name, _decode(value, archive, version))
            else:
                _set_fields(model, metadata, archive, path)
        except ModelFormatError:
            raise
        except (KeyError, TypeError, AttributeError, IndexError, zipfile.BadZipFile, zlib.error, EOFError, OSError,
                ValueError, RecursionError, OverflowError, MemoryError) as error:
            raise ModelFormatError(f"{path}: corrupt model file ({type(error).__name__}: {error})") from None
    _check_consistent(model, path)
    return model


def _set_fields(model, metadata: dict, archive: zipfile.ZipFile, path: Path) -> None:
    """Set a version-2 file's fields on ``model``: plain attributes first, then the composites from their parts."""
    estimator = metadata["estimator"]
    stored = metadata["fields"]
    if not isinstance(stored, dict):
        raise ModelFormatError(f"{path}: corrupt model metadata (fields of type {type(stored).__name__})")
    schema = {field.name: field for field in SCHEMAS[estimator]}
    unknown = sorted(set(stored) - set(schema))
    if unknown:
        raise ModelFormatError(
            f"{path}: the model file has fields this coresvm's {type(model).__name__} does not know "
            f"({', '.join(unknown)}); it was written by coresvm {metadata.get('coresvm_version')}"
        )
    missing = [name for name, field in schema.items() if field.required and name not in stored]
    if missing:
        raise ModelFormatError(f"{path}: corrupt model file (missing {', '.join(missing)})")
    parts: dict[str, dict[str, Any]] = {}
    for name, field in schema.items():
        if name not in stored:
            continue
        value = _decode(stored[name], archive, 2)
        owner, dot, part = field.attribute.partition(".")
        if dot:
            parts.setdefault(owner, {})[part] = value
        else:
            setattr(model, owner, value)
    for owner, build in _COMPOSITES.items():
        if any(field.attribute.startswith(owner + ".") for field in schema.values()):
            setattr(model, owner, build(model, parts.get(owner, {})))


def _build_kernel(model, parts: dict) -> KernelSpec:
    name, gamma, coef0, degree = parts["name"], parts["gamma"], parts["coef0"], parts["degree"]
    numbers = (gamma, coef0, degree)
    if (not isinstance(name, str) or name not in KERNEL_CODES
            or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in numbers)
            or not np.all(np.isfinite(numbers)) or int(degree) != degree):
        raise ValueError(f"not a kernel: {name!r} with gamma {gamma!r}, coef0 {coef0!r}, degree {degree!r}")
    return KernelSpec(name, float(gamma), float(coef0), int(degree))


def _build_joint(model, parts: dict):
    if not parts:
        return None  # fitted one-vs-one or one-vs-rest, as CoreSVC.fit leaves it
    from .joint import JointModel

    shared = {part: getattr(model, attribute) for part, attribute in SHARED_PARTS["_joint_model"].items()}
    return JointModel(**shared, **parts)


def _build_svc(model, parts: dict):
    from sklearn.svm import SVC

    params = parts.pop("get_params()")
    if not isinstance(params, dict):
        raise ValueError("svc_params is not a dict of parameters")
    known = SVC().get_params(deep=False)
    svc = SVC(**{name: value for name, value in params.items() if name in known})
    for part, attribute in SHARED_PARTS["svm_"].items():
        setattr(svc, part, getattr(model, attribute))
    for part, value in parts.items():
        setattr(svc, part, value)
    return svc


# How each composite attribute is rebuilt from its parts (Field.attribute "attr.part").
_COMPOSITES = {"_kernel_spec": _build_kernel, "_joint_model": _build_joint, "svm_": _build_svc}


def _estimator_classes() -> dict:
    from .aesvc import AESVC
    from .oneclass import CoreOneClassSVM
    from .svc import CoreSVC

    return {"coresvm.CoreSVC": CoreSVC, "coresvm.CoreOneClassSVM": CoreOneClassSVM, "coresvm.AESVC": AESVC}


def _estimator_class(name, version: int):
    # Only coresvm's own estimators are instantiated: the file names a class, never code to run.
    if version == 1:  # version 1 recorded the defining module (coresvm.svc.CoreSVC) and held CoreSVC models only
        if isinstance(name, str) and name.startswith("coresvm.") and name.endswith(".CoreSVC"):
            return _estimator_classes()["coresvm.CoreSVC"]
    elif name in SCHEMAS:
        return _estimator_classes()[name]
    raise ModelFormatError(f"unsupported estimator {name!r} in model file (expected one of {', '.join(SCHEMAS)})")


def _decode(value, archive: zipfile.ZipFile, version: int):
    """A JSON value of a ``version`` file back to Python (the tags of :func:`_encode_json_value`); version 1 files
    also tag dataclasses of coresvm (version 2 writes their fields as fields of the schema)."""
    if isinstance(value, list):
        return [_decode(item, archive, version) for item in value]
    if not isinstance(value, dict):
        return value
    if "__npy__" in value:
        return _read_array(archive, value["__npy__"])
    if "__sparse__" in value:
        spec = value["__sparse__"]
        parts = [_read_array(archive, spec[part]) for part in ("data", "indices", "indptr")]
        if spec["format"] == "csr":
            cls = sp.csr_array if spec.get("array_api") else sp.csr_matrix
        elif spec["format"] == "csc":
            cls = sp.csc_array if spec.get("array_api") else sp.csc_matrix
        else:
            raise ValueError(f"unknown sparse format {spec['format']!r}")
        # copy=False keeps the stored index dtypes, so computations see exactly the saved arrays
        matrix = cls(tuple(parts), shape=tuple(spec["shape"]), copy=False)
        matrix.has_sorted_indices = bool(spec.get("sorted_indices", False))
        return matrix
    if "__numpy__" in value:
        return np.dtype(value["__numpy__"]).type(value["value"])
    if "__tuple__" in value:
        return tuple(_decode(item, archive, version) for item in value["__tuple__"])
    if "__items__" in value:
        return {_decode(k, archive, version): _decode(v, archive, version) for k, v in value["__items__"]}
    if "__objarray__" in value:
        array = np.empty(len(value["__objarray__"]), dtype=object)
        array[:] = value["__objarray__"]
        return array.reshape(value["shape"])
    if "__array__" in value:
        return np.array(value["__array__"], dtype=np.dtype(value["dtype"])).reshape(value["shape"])
    if "__dataclass__" in value and version == 1:
        module_name, _, qualname = value["__dataclass__"].partition(":")
        if not module_name.startswith("coresvm."):
            raise ValueError(f"dataclass {value['__dataclass__']!r} is not part of coresvm")
        cls = getattr(importlib.import_module(module_name), qualname)
        if not dataclasses.is_dataclass(cls):
            raise ValueError(f"{value['__dataclass__']!r} is not a dataclass")
        return cls(**{name: _decode(item, archive, version) for name, item in value["fields"].items()})
    return {key: _decode(item, archive, version) for key, item in value.items()}


def _read_array(archive: zipfile.ZipFile, member: str) -> np.ndarray:
    with archive.open(member) as handle:
        data = handle.read()  # reading all of it makes zipfile verify the member's CRC
    try:
        return np.lib.format.read_array(io.BytesIO(data), allow_pickle=False)
    except Exception as error:
        # numpy's header parser fails on damaged bytes with ValueError, SyntaxError (NUL bytes),
        # tokenize.TokenError, MemoryError (a huge claimed shape), ...: each is the same corrupt member
        raise ValueError(f"unreadable array {member} ({type(error).__name__}: {error})") from None


def _check_consistent(model, path) -> None:
    """Catch files that parse but cannot be a model (edited or mixed-up members)."""
    if not isinstance(model, _estimator_classes()["coresvm.CoreSVC"]):
        _check_consistent_other(model, path)
        return
    if getattr(model, "_joint_model", None) is not None:
        _check_consistent_joint(model, path)
        return
    missing = [name for name in REQUIRED_ATTRIBUTES if not hasattr(model, name)]
    if missing:
        raise ModelFormatError(f"{path}: corrupt model file (missing {', '.join(missing)})")
    # the types prediction relies on (a value of another type is an edited file, not a model)
    wrong = [name for name, ok in (
        ("_kernel_spec", isinstance(model._kernel_spec, KernelSpec)),
        ("classes_", isinstance(model.classes_, np.ndarray) and model.classes_.ndim == 1),
        ("support_vectors_", (sp.issparse(model.support_vectors_) or isinstance(model.support_vectors_, np.ndarray))
         and model.support_vectors_.ndim == 2 and model.support_vectors_.dtype.kind == "f"),
        ("_pair_coef", isinstance(model._pair_coef, np.ndarray) and model._pair_coef.dtype.kind == "f"),
        ("intercept_", isinstance(model.intercept_, np.ndarray) and model.intercept_.dtype.kind == "f"),
        ("n_features_in_", isinstance(model.n_features_in_, (int, np.integer))
         and not isinstance(model.n_features_in_, bool)),
    ) if not ok]
    if wrong:
        raise ModelFormatError(f"{path}: corrupt model file (wrong type of {', '.join(wrong)})")
    n_classes = len(model.classes_)
    n_pairs = n_classes * (n_classes - 1) // 2
    if getattr(model, "_decomposition", "ovo") == "ovr":  # one problem per class (CoreSVC multiclass='ovr')
        n_pairs = n_classes
    n_sv = model.support_vectors_.shape[0]
    problems = []
    if n_classes < 2:
        problems.append(f"{n_classes} classes")
    if model._pair_coef.shape != (n_sv, n_pairs):
        problems.append(f"pair coefficients of shape {model._pair_coef.shape} for {n_sv} SVs and {n_pairs} pairs")
    if np.shape(model.intercept_) != (n_pairs,):
        problems.append(f"intercept of shape {np.shape(model.intercept_)} for {n_pairs} pairs")
    if model.support_vectors_.shape[1] != model.n_features_in_:
        problems.append(f"{model.support_vectors_.shape[1]} SV columns for {model.n_features_in_} features")
    if hasattr(model, "_sv_norms") and np.shape(model._sv_norms) != (n_sv,):
        problems.append("SV norms of the wrong length")
    if problems:
        raise ModelFormatError(f"{path}: corrupt model file ({'; '.join(problems)})")


def _check_consistent_other(model, path) -> None:
    """CoreOneClassSVM and AESVC: the support vectors, their coefficients and the kernel fit together."""
    svs, coef = model.support_vectors_, model.dual_coef_
    ok = (isinstance(model._kernel_spec, KernelSpec)
          and (sp.issparse(svs) or isinstance(svs, np.ndarray)) and svs.ndim == 2 and svs.dtype.kind == "f"
          and (sp.issparse(coef) or isinstance(coef, np.ndarray)) and coef.ndim == 2 and coef.dtype.kind == "f"
          and isinstance(model.n_features_in_, (int, np.integer)) and not isinstance(model.n_features_in_, bool))
    if not ok:
        raise ModelFormatError(f"{path}: corrupt model file (wrong type of a kernel, SV or coefficient field)")
    problems = []
    if svs.shape[1] != model.n_features_in_:
        problems.append(f"{svs.shape[1]} SV columns for {model.n_features_in_} features")
    if coef.shape[1] != svs.shape[0]:
        problems.append(f"{coef.shape[1]} coefficients for {svs.shape[0]} SVs")
    if hasattr(model, "_sv_norms") and np.shape(model._sv_norms) != (svs.shape[0],):
        problems.append("SV norms of the wrong length")
    if problems:
        raise ModelFormatError(f"{path}: corrupt model file ({'; '.join(problems)})")


def _check_consistent_joint(model, path) -> None:
    """The joint model (multiclass='joint'): one coefficient column and one intercept per class."""
    n_classes = len(model.classes_)
    n_sv = model.support_vectors_.shape[0]
    joint = model._joint_model
    problems = []
    if np.shape(joint.coef) != (n_sv, n_classes) or np.shape(model.dual_coef_) != (n_classes, n_sv):
        problems.append(f"joint coefficients of shape {np.shape(joint.coef)} for {n_sv} SVs and {n_classes} classes")
    if np.shape(joint.intercept) != (n_classes,) or np.shape(model.intercept_) != (n_classes,):
        problems.append(f"joint intercept of shape {np.shape(joint.intercept)} for {n_classes} classes")
    if model.support_vectors_.shape[1] != model.n_features_in_:
        problems.append(f"{model.support_vectors_.shape[1]} SV columns for {model.n_features_in_} features")
    if problems:
        raise ModelFormatError(f"{path}: corrupt model file ({'; '.join(problems)})")


# --------------------------------------------------------------------------- LIBSVM: write
def libsvm_model_text(model) -> str:
    """The model in LIBSVM's text format (what ``svm_save_model`` writes for a C-SVC).

    Raises
    ------
    ValueError
        If a class label is not an integer (LIBSVM stores labels as ``int``).
    """
    _check_fitted(model)
    if getattr(model, "_joint_model", None) is not None:
        raise ValueError(
            "LIBSVM's model format holds one-vs-one models only; multiclass='joint' models can be saved with "
            "format='native'"
        )
    if getattr(model, "_decomposition", "ovo") == "ovr":
        raise ValueError("LIBSVM's model format holds one-vs-one models only; this model was fitted with "
                         "multiclass='ovr' (save it in the native format)")
    labels = _integer_labels(model.classes_)
    if getattr(model, "break_ties", False) and len(labels) > 2:
        warnings.warn(
            "break_ties=True is not expressible in LIBSVM's format: LIBSVM breaks voting ties by the lowest label",
            UserWarning,
            stacklevel=3,
        )
    n_classes = len(labels)
    spec: KernelSpec = model._kernel_spec
    sv_class = _sv_classes(model)
    coef, intercept = _normalized_pairs(model)
    # LIBSVM's first label is the positive side of a binary model; CoreSVC's positive
    # class is classes_[1], so it goes first and LIBSVM's decision value equals ours.
    order = [1, 0] if n_classes == 2 else list(range(n_classes))
    sv_coef, rho, sv_rows = _to_libsvm_layout(sv_class, coef, intercept, order)

    lines = ["svm_type c_svc", f"kernel_type {LIBSVM_KERNELS[spec.name]}"]
    if spec.name == "poly":
        lines.append(f"degree {int(spec.degree)}")
    if spec.name != "linear":
        lines.append(f"gamma {_fmt(spec.gamma)}")
    if spec.name in ("poly", "sigmoid"):
        lines.append(f"coef0 {_fmt(spec.coef0)}")
    lines += [
        f"nr_class {n_classes}",
        f"total_sv {len(sv_rows)}",
        "rho " + " ".join(_fmt(v) for v in rho),
        "label " + " ".join(str(labels[c]) for c in order),
        "nr_sv " + " ".join(str(int(np.sum(sv_class == c))) for c in order),
        "SV",
    ]
    svs = model.support_vectors_
    svs = svs.tocsr() if sp.issparse(svs) else np.asarray(svs)
    # column j is feature index j + base: the index base of the LIBSVM file the model was trained on (the
    # command line keeps it; 1 otherwise), so that the SVs carry the training file's own indices, as LIBSVM's do
    base = int(getattr(model, "libsvm_index_base_", 1))
    for position, row in enumerate(sv_rows):
        if sp.issparse(svs):
            start, end = svs.indptr[row], svs.indptr[row + 1]
            index, values = svs.indices[start:end], svs.data[start:end]
            keep = np.argsort(index, kind="stable")
            index, values = index[keep], values[keep]
        else:
            index = np.flatnonzero(svs[row])
            values = svs[row, index]
        features = " ".join(f"{i + base}:{_fmt(v)}" for i, v in zip(index, values, strict=True) if v != 0)
        coefs = " ".join(_fmt(v) for v in sv_coef[:, position])
        lines.append(f"{coefs} {features}".rstrip() + " ")
    return "\n".join(lines) + "\n"


def _fmt(value) -> str:
    # repr of a Python float is the shortest string that reads back to the same double
    return repr(float(value))


def _integer_labels(classes) -> list[int]:
    labels = []
    for label in np.asarray(classes).tolist():
        if isinstance(label, bool) or not isinstance(label, (int, float)) or not float(label).is_integer():
            raise ValueError(
                f"LIBSVM model files need integer class labels; this model has label {label!r} "
                "(save it in the native format instead)"
            )
        labels.append(int(label))
    return labels


def _sv_classes(model) -> np.ndarray:
    n_support = np.asarray(model.n_support_, dtype=np.int64)
    if n_support.sum() != model.support_vectors_.shape[0]:
        raise ValueError("n_support_ does not add up to the number of support vectors")
    return np.repeat(np.arange(len(n_support)), n_support)


def _normalized_pairs(model) -> tuple[np.ndarray, np.ndarray]:
    """Per-pair coefficients and intercepts with 'positive means the pair's first (lower) class'."""
    coef = np.asarray(model._pair_coef, dtype=np.float64)
    intercept = np.asarray(model.intercept_, dtype=np.float64)
    if len(model.classes_) == 2:  # CoreSVC's binary decision is positive for classes_[1]
        return -coef, -intercept
    return coef, intercept


def _pair_index(n_classes: int) -> dict[tuple[int, int], int]:
    return {pair: p for p, pair in enumerate((a, b) for a in range(n_classes) for b in range(a + 1, n_classes))}


def _to_libsvm_layout(sv_class, coef, intercept, order):
    """LIBSVM's ``sv_coef`` (n_classes - 1, n_SV), ``rho`` and SV row order for label order ``order``."""
    n_classes = len(order)
    index = _pair_index(n_classes)
    sv_rows = np.concatenate([np.flatnonzero(sv_class == c) for c in order])
    new_class = sv_class[sv_rows]
    sv_coef = np.zeros((max(n_classes - 1, 1), len(sv_rows)))
    rho = []
    for i in range(n_classes):
        for j in range(i + 1, n_classes):
            ci, cj = order[i], order[j]
            p = index[(min(ci, cj), max(ci, cj))]
            sign = 1.0 if ci < cj else -1.0
            vector = sign * coef[sv_rows, p]
            rho.append(-sign * intercept[p])
            in_i, in_j = new_class == ci, new_class == cj
            sv_coef[j - 1, in_i] = vector[in_i]
            sv_coef[i, in_j] = vector[in_j]
    return sv_coef, np.array(rho), sv_rows


# --------------------------------------------------------------------------- LIBSVM: read
def _load_libsvm(path: Path):
    from .svc import CoreSVC

    header: dict[str, list[str]] = {}
    sv_lines: list[tuple[int, str]] = []
    with open(path, encoding="ascii", errors="replace") as handle:
        in_header = True
        for number, line in enumerate(handle, start=1):
            if in_header:
                fields = line.split()
                if not fields:
                    continue
                if fields[0] == "SV":
                    in_header = False
                    continue
                header[fields[0]] = fields[1:]
            elif line.strip():
                sv_lines.append((number, line))
    if in_header:
        raise ModelFormatError(f"{path}: truncated LIBSVM model (no 'SV' line)")

    def field(name, convert, count=None, default=None):
        if name not in header:
            if default is not None:
                return default
            raise ModelFormatError(f"{path}: LIBSVM model has no '{name}' line")
        try:
            values = [convert(v) for v in header[name]]
        except ValueError:
            raise ModelFormatError(f"{path}: bad value in the '{name}' line: {' '.join(header[name])}") from None
        if count is not None and len(values) != count:
            raise ModelFormatError(f"{path}: the '{name}' line has {len(values)} values, expected {count}")
        return values

    svm_type = field("svm_type", str, 1)[0]
    if svm_type != "c_svc":
        raise ModelFormatError(f"{path}: LIBSVM model of type {svm_type}; only c_svc models can be loaded")
    kernel_name = field("kernel_type", str, 1)[0]
    if kernel_name not in KERNELS_FROM_LIBSVM:
        raise ModelFormatError(f"{path}: LIBSVM kernel_type {kernel_name} is not supported")
    kernel = KERNELS_FROM_LIBSVM[kernel_name]
    n_classes = field("nr_class", int, 1)[0]
    if n_classes < 2:
        raise ModelFormatError(f"{path}: nr_class {n_classes} (need at least 2)")
    n_pairs = n_classes * (n_classes - 1) // 2
    total_sv = field("total_sv", int, 1)[0]
    rho = np.array(field("rho", float, n_pairs))
    labels = field("label", int, n_classes)
    nr_sv = field("nr_sv", int, n_classes)
    gamma = field("gamma", float, 1, [1.0])[0]
    degree = field("degree", int, 1, [3])[0]
    coef0 = field("coef0", float, 1, [0.0])[0]
    if sum(nr_sv) != total_sv or len(sv_lines) != total_sv:
        raise ModelFormatError(
            f"{path}: truncated or inconsistent LIBSVM model: total_sv {total_sv}, nr_sv sums to {sum(nr_sv)}, "
            f"{len(sv_lines)} SV lines"
        )
    if len(set(labels)) != n_classes:
        raise ModelFormatError(f"{path}: repeated labels in the 'label' line")

    sv_coef = np.zeros((n_classes - 1, total_sv))
    data, indices, indptr = [], [], [0]
    for position, (number, line) in enumerate(sv_lines):
        fields = line.split()
        try:
            sv_coef[:, position] = [float(v) for v in fields[: n_classes - 1]]
            for item in fields[n_classes - 1:]:
                key, _, value = item.partition(":")
                indices.append(int(key))
                data.append(float(value))
        except ValueError:
            raise ModelFormatError(f"{path}: unreadable support vector on line {number}") from None
        if len(fields) < n_classes - 1 or (indices and min(indices[indptr[-1]:], default=0) < 0):
            raise ModelFormatError(f"{path}: unreadable support vector on line {number}")
        indptr.append(len(indices))
    # LIBSVM reads indices as given: an index 0 makes the model zero-based (column j is index j), as the
    # command line's readers decide for data files; else column j is index j + 1
    base = 0 if 0 in indices else 1
    indices = [index - base for index in indices]
    n_features = max(max(indices, default=-1) + 1, 1)
    svs = sp.csr_matrix(
        (np.array(data, dtype=np.float64), np.array(indices, dtype=np.int32), np.array(indptr, dtype=np.int64)),
        shape=(total_sv, n_features),
    )
    svs.sum_duplicates()
    svs.sort_indices()

    # Classes in sorted order, as scikit-learn and CoreSVC keep them.
    classes = np.array(sorted(labels), dtype=np.int64)
    rank = {label: int(np.searchsorted(classes, label)) for label in labels}
    libsvm_class = np.repeat(np.arange(n_classes), nr_sv)
    sv_class = np.array([rank[labels[c]] for c in libsvm_class], dtype=np.int64)
    index = _pair_index(n_classes)
    coef = np.zeros((total_sv, n_pairs))
    intercept = np.zeros(n_pairs)
    p_lib = 0
    for i in range(n_classes):
        for j in range(i + 1, n_classes):
            vector = np.zeros(total_sv)
            vector[libsvm_class == i] = sv_coef[j - 1, libsvm_class == i]
            vector[libsvm_class == j] = sv_coef[i, libsvm_class == j]
            ci, cj = rank[labels[i]], rank[labels[j]]
            sign = 1.0 if ci < cj else -1.0
            p = index[(min(ci, cj), max(ci, cj))]
            coef[:, p] = sign * vector
            intercept[p] = -sign * rho[p_lib]
            p_lib += 1
    if n_classes == 2:  # back to CoreSVC's binary convention (positive means classes_[1])
        coef, intercept = -coef, -intercept
    order = np.argsort(sv_class, kind="stable")
    coef, sv_class, svs = coef[order], sv_class[order], svs[order]

    model = CoreSVC(kernel=kernel, gamma=gamma if kernel != "linear" else "scale", degree=degree, coef0=coef0)
    model.classes_ = classes
    model.n_features_in_ = n_features
    model.support_ = np.full(total_sv, -1, dtype=np.int64)
    model.support_vectors_ = svs
    model.n_support_ = np.bincount(sv_class, minlength=n_classes).astype(np.int32)
    model.dual_coef_ = _dual_coef_from_pairs(coef, sv_class, n_classes)
    model.intercept_ = intercept
    model._pair_coef = coef
    model._sv_norms = squared_norms(svs)
    model.gamma_ = float(gamma)
    model._kernel_spec = KernelSpec(kernel, float(gamma), float(coef0), int(degree))
    model.n_iter_ = np.zeros(n_pairs, dtype=np.int64)
    model.fit_status_ = 0
    model.solver_info_ = []
    model.libsvm_index_base_ = base
    return model


def _dual_coef_from_pairs(coef: np.ndarray, sv_class: np.ndarray, n_classes: int) -> np.ndarray:
    """scikit-learn's / LIBSVM's ``dual_coef_`` layout from per-pair coefficient columns."""
    dual = np.zeros((n_classes - 1, coef.shape[0]))
    if n_classes == 2:
        dual[0] = coef[:, 0]
        return dual
    for (a, b), p in _pair_index(n_classes).items():
        in_a, in_b = sv_class == a, sv_class == b
        dual[b - 1, in_a] = coef[in_a, p]
        dual[a, in_b] = coef[in_b, p]
    return dual


# --------------------------------------------------------------------------- helpers
def _check_fitted(model) -> None:
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(model)


def _jsonable_list(values) -> list:
    out = []
    for value in np.asarray(values).tolist():
        if isinstance(value, float) and not math.isfinite(value):
            out.append(str(value))
        else:
            out.append(value)
    return out
