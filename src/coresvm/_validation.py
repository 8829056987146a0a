"""Parameter and input checks shared by the estimators (clear errors, one place)."""

from __future__ import annotations

import numbers

import numpy as np

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
