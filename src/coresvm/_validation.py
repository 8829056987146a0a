"""Parameter and input checks shared by the estimators (clear errors, one place)."""

from __future__ import annotations

import functools
import numbers
import os
import sys
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.utils.multiclass import check_classification_targets

from .data import all_finite
from .kernels import GAMMA_RULES, KERNEL_CODES


def check_positive(name: str, value, allow_none: bool = False, allow_inf: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a positive number; got {value!r}")
    if np.isnan(value) or value <= 0 or (np.isinf(value) and not allow_inf):
        raise ValueError(f"{name} must be > 0; got {value!r}")


def check_choice(name: str, value, choices) -> None:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {sorted(choices)}; got {value!r}")


def check_kernel_params(kernel, gamma, degree, coef0) -> None:
    check_choice("kernel", kernel, KERNEL_CODES)
    if isinstance(gamma, str):
        check_choice("gamma", gamma, GAMMA_RULES)
    else:
        check_positive("gamma", gamma)
    if isinstance(degree, bool) or not isinstance(degree, numbers.Integral) or degree < 1:
        raise ValueError(f"degree must be an integer >= 1; got {degree!r}")
    if isinstance(coef0, bool) or not isinstance(coef0, numbers.Real) or not np.isfinite(coef0):
        raise ValueError(f"coef0 must be a finite number; got {coef0!r}")


def check_finite_input(X) -> None:
    if not all_finite(X):  # in row blocks: no X-sized temporary, and a memmap's pages are released
        raise ValueError("Input X contains NaN or infinity; remove or impute those values before fitting")


def class_weight_per_sample(class_weight, classes: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per-sample multipliers from ``class_weight`` (None, dict or 'balanced')."""
    if class_weight is None:
        return np.ones(len(y))
    if isinstance(class_weight, str):
        if class_weight != "balanced":
            raise ValueError(f"class_weight must be None, a dict or 'balanced'; got {class_weight!r}")
        counts = np.array([np.sum(y == c) for c in classes], dtype=np.float64)
        per_class = len(y) / (len(classes) * counts)
    elif isinstance(class_weight, dict):
        per_class = np.ones(len(classes))
        for label, weight in class_weight.items():
            hits = np.flatnonzero(classes == label)
            if len(hits) == 0:
                raise ValueError(f"class_weight names class {label!r}, which is not in the training labels")
            check_positive(f"class_weight[{label!r}]", weight)
            per_class[hits[0]] = weight
    else:
        raise ValueError(f"class_weight must be None, a dict or 'balanced'; got {class_weight!r}")
    return per_class[np.searchsorted(classes, y)]


# ---------------------------------------------------------------------------------------------------- input data
# Features whose standard deviations differ by more than this factor are flagged for a
# kernel that measures distances/inner products (every kernel but 'linear'): the widest
# feature then decides k(x, x') alone.  The shared benchmark sets stay below 1e3
# (a9a 90, w8a 32, zip 19, the others < 3; docs/bad_input.md); unscaled UCI breast cancer has 2.2e5.
FEATURE_SCALE_WARN_RATIO = 1e4


class FeatureScaleWarning(UserWarning):
    """The features' scales differ so much that a non-linear kernel sees only the widest ones."""


def canonical_csr(X):
    """``X`` unchanged unless it is CSR with unsorted or duplicated indices or stored zeros;
    then a canonical copy (duplicates summed, indices sorted, zeros dropped).

    The compiled kernels and scikit-learn's SVC read the stored entries as they are, so a
    non-canonical matrix would otherwise give a (slightly or, with duplicates, badly)
    different model than the same matrix in canonical form.
    """
    if not sp.issparse(X):
        return X
    copied = False
    if not X.has_canonical_format:
        X = X.copy()
        X.sum_duplicates()  # also sorts the indices
        copied = True
    if np.any(X.data == 0):
        if not copied:
            X = X.copy()
        X.eliminate_zeros()
    return X


def feature_scale_ratio(X) -> float:
    """Largest over smallest standard deviation among the non-constant features (1.0 if < 2 vary)."""
    if sp.issparse(X):
        mean = np.asarray(X.mean(axis=0), dtype=np.float64).ravel()
        mean_square = np.asarray(X.multiply(X).mean(axis=0), dtype=np.float64).ravel()
        std = np.sqrt(np.maximum(mean_square - mean**2, 0.0))
    else:
        X = np.asarray(X, dtype=np.float64)
        mean, std = X.mean(axis=0), X.std(axis=0)
    # a feature whose spread is only the rounding of its mean is constant
    varying = std[std > 1e-12 * np.abs(mean)]
    varying = varying[varying > 0]
    if len(varying) < 2:
        return 1.0
    return float(varying.max() / varying.min())


def warn_if_badly_scaled(X, kernel: str, estimator: str) -> None:
    """A :class:`FeatureScaleWarning` when feature scales differ by more than ``FEATURE_SCALE_WARN_RATIO``."""
    if kernel == "linear":
        return
    ratio = feature_scale_ratio(X)
    if ratio > FEATURE_SCALE_WARN_RATIO:
        warnings.warn(
            f"{estimator}: the features' standard deviations differ by a factor of {ratio:.3g} (> "
            f"{FEATURE_SCALE_WARN_RATIO:g}); with kernel={kernel!r} the widest features dominate k(x, x'). "
            "Scale the features first, e.g. sklearn.preprocessing.StandardScaler in a Pipeline or "
            "'coresvm scale' for files.",
            FeatureScaleWarning,
            stacklevel=caller_stacklevel(),
        )


def caller_stacklevel() -> int:
    """The ``stacklevel`` that points a warning at the first frame outside coresvm (the user's call)."""
    package = os.path.dirname(os.path.abspath(__file__))
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package + os.sep):
        frame, level = frame.f_back, level + 1
    return level


def prepare_fit_matrix(X, kernel: str, estimator: str):
    """Training data after validate_data: finite, canonical CSR, a warning when badly scaled."""
    check_finite_input(X)
    X = canonical_csr(X)
    warn_if_badly_scaled(X, kernel, estimator)
    return X


def prepare_predict_matrix(X):
    """Prediction data after validate_data: finite and canonical CSR."""
    check_finite_input(X)
    return canonical_csr(X)


def check_class_labels(y) -> None:
    """scikit-learn's target check, with the two common mistakes named: mixed and continuous labels."""
    y = np.asarray(y)
    if y.dtype == object:
        kinds = sorted({"str" if isinstance(v, str) else "number" if isinstance(v, numbers.Number) else
                        type(v).__name__ for v in y.ravel()})
        if len(kinds) > 1:
            raise ValueError(f"Unknown label type: y mixes label types ({', '.join(kinds)}); use labels of one type, "
                             "e.g. all strings")
    if y.dtype.kind == "f" and y.size and np.all(np.isfinite(y)) and np.any(y != np.round(y)):
        example = float(y[y != np.round(y)][0])
        raise ValueError(
            f"Unknown label type: continuous (y holds non-integer float labels, e.g. {example!r}); a classifier needs "
            "discrete classes: "
            "use integer or string labels (a regression target is not a class)"
        )
    check_classification_targets(y)


def unfitted_on_failure(fit):
    """Decorate ``fit`` so that an exception (also KeyboardInterrupt) leaves the estimator unfitted.

    ``fit`` sets its attributes one by one; an interrupt between two of them would
    otherwise leave a mix of the old and the new model (or a half model that
    ``check_is_fitted`` accepts).  Every attribute that is not a constructor
    parameter is removed before the exception propagates.
    """

    @functools.wraps(fit)
    def guarded(self, *args, **kwargs):
        try:
            return fit(self, *args, **kwargs)
        except SystemError as error:
            clear_fitted_state(self)
            # Ctrl-C inside a compiled loop's object-mode block (the clock) surfaces as a SystemError
            if isinstance(error.__cause__ or error.__context__, KeyboardInterrupt):
                raise KeyboardInterrupt from error
            raise
        except BaseException:
            clear_fitted_state(self)
            raise

    return guarded


def clear_fitted_state(estimator) -> None:
    """Remove every fitted attribute (anything not a constructor parameter or scikit-learn configuration)."""
    params = set(estimator.get_params(deep=False))
    for name in list(vars(estimator)):
        if name not in params and not name.startswith(("_sklearn", "_metadata_request")):
            delattr(estimator, name)


LABEL_BLOCK = 2**20  # labels per block when encoding long label vectors


def encode_labels(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(y, return_inverse=True)`` with a small index type and no y-sized int64 arrays.

    Short ``y`` go through ``np.unique`` itself.  A long ``y`` (an out-of-core
    fit of millions of rows) is encoded in blocks: the classes are the union of
    the blocks' classes, and each label's index is found by binary search, stored
    in the smallest integer type that holds the number of classes (int8 for up to
    127 classes) instead of int64 -- one byte per row instead of the 8 of the
    inverse plus the 8 of np.unique's sort order.
    """
    y = np.asarray(y)
    if y.shape[0] <= LABEL_BLOCK:
        return np.unique(y, return_inverse=True)
    blocks = range(0, y.shape[0], LABEL_BLOCK)
    classes = np.unique(np.concatenate([np.unique(y[start : start + LABEL_BLOCK]) for start in blocks]))
    index_type = np.min_scalar_type(-len(classes)) if len(classes) < 2**31 else np.int64
    y_index = np.empty(y.shape[0], dtype=index_type)
    for start in blocks:
        y_index[start : start + LABEL_BLOCK] = np.searchsorted(classes, y[start : start + LABEL_BLOCK])
    return classes, y_index
