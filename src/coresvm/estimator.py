"""What coresvm's estimators share: parameter checks, input conversion, warnings and fitted state.

:class:`CoreEstimatorBase` is the base of :class:`~coresvm.CoreSVC`,
:class:`~coresvm.CoreOneClassSVM` and :class:`~coresvm.AESVC`.  It holds what the
three did each in its own way: the checks of the parameters they share, the
conversion of training and prediction data (dense, CSR, memory-mapped ``.npy``,
Zarr), sample weights, the convergence warnings and the fitted-state checks.  It
uses scikit-learn's public base class and validation utilities only.
"""

from __future__ import annotations

import numbers
import warnings
from typing import ClassVar

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import (
    check_array,
    check_consistent_length,
    check_is_fitted,
    check_non_negative,
    column_or_1d,
    validate_data,
)

from ._validation import (
    canonical_csr,
    check_class_labels,
    check_finite_input,
    check_integer,
    check_kernel_params,
    check_positive,
    prepare_fit_matrix,
    prepare_predict_matrix,
)
from .data import is_memory_mapped, map_row_blocks, read_rows, validate_mapped_input, zarr_as_memmap
from .kernels import KernelSpec, product_block_rows

DEFAULT_MAX_ITER = 10_000_000  # max_iter=None


def check_cache_size(cache_size, allow_auto: bool) -> None:
    """``cache_size`` is a positive number of MB (or 'auto' where ``allow_auto``)."""
    if not (allow_auto and isinstance(cache_size, str) and cache_size == "auto"):
        check_positive("cache_size", cache_size)


def check_sample_weight(sample_weight, X) -> np.ndarray:
    """Per-sample weights as float64, C-ordered, one per row of ``X``, non-negative, not all zero and finite.

    The checks (and messages) of scikit-learn's own, from its public ``check_array`` and
    ``check_non_negative``: None gives ones, a number gives that number for every row.
    """
    n_samples = X.shape[0]
    if sample_weight is None:
        return np.ones(n_samples, dtype=np.float64)
    if isinstance(sample_weight, numbers.Number):
        sample_weight = np.full(n_samples, sample_weight, dtype=np.float64)
    else:
        sample_weight = check_array(sample_weight, accept_sparse=False, ensure_2d=False, dtype=np.float64, order="C",
                                    input_name="sample_weight")
        if sample_weight.ndim != 1:
            raise ValueError(f"Sample weights must be 1D array or scalar, got {sample_weight.ndim}D array. Expected "
                             f"either a scalar value or a 1D array of length {n_samples}.")
        if sample_weight.shape != (n_samples,):
            raise ValueError(f"sample_weight.shape == {sample_weight.shape}, expected {(n_samples,)}!")
    if np.all(sample_weight == 0):
        raise ValueError("Sample weights must contain at least one non-zero number.")
    check_non_negative(sample_weight, "`sample_weight`")
    if not np.all(np.isfinite(sample_weight)):
        raise ValueError("sample_weight contains NaN or infinity")
    return sample_weight


def verbose_interval(verbose) -> float:
    """``verbose`` as seconds between progress lines (0: silent; True: one second)."""
    return float(verbose) if not isinstance(verbose, bool) else (1.0 if verbose else 0.0)


def warn_unconverged(what: str, status: str, relative_gap: float, tol: float, stacklevel: int,
                     core_set_message: str | None = None) -> None:
    """The ConvergenceWarning of a solve that ended with ``status`` (none when it converged or a callback stopped
    it); ``core_set_message`` is the advice when the core set filled its memory budget."""
    if status == "core_set_full" and core_set_message is not None:
        warnings.warn(core_set_message, ConvergenceWarning, stacklevel=stacklevel + 1)
    elif status not in ("converged", "callback"):
        warnings.warn(
            f"{what} stopped before convergence ({status}, relative gap {relative_gap:.2e}"
            f" > tol {tol:g}); the model so far is kept. Increase max_iter/max_time or loosen tol.",
            ConvergenceWarning,
            stacklevel=stacklevel + 1,
        )


class CoreEstimatorBase(BaseEstimator):
    """Base of coresvm's kernel estimators (the parameters ``kernel``, ``gamma``, ``degree``, ``coef0``,
    ``tol`` and ``cache_size``; ``max_iter``, ``max_time`` and ``n_init`` where the estimator has them).

    Subclasses set the class attributes below to their own rules and call the ``_validated_*`` methods in
    ``fit`` and prediction.  Every input form the solvers read is accepted: dense arrays (float64 or
    float32, kept as they are), CSR matrices (made canonical; the core-set solvers read dense-enough ones as
    a dense copy), memory-mapped ``.npy``
    arrays (checked in row blocks, never copied) and Zarr arrays (decompressed once into a temporary
    ``.npy`` map, :func:`coresvm.data.zarr_as_memmap`).
    """

    # 'auto' is a valid cache_size (CoreSVC: half the memory available for the core set's Gram)
    cache_size_auto: ClassVar[bool] = False
    # smallest n_init accepted, where the estimator has the parameter
    least_n_init: ClassVar[int] = 1
    # max_iter is None or >= 1 (False: the estimator passes it on with another convention, as AESVC to SVC)
    checks_iteration_cap: ClassVar[bool] = True
    # training data whose features' scales differ widely draw a FeatureScaleWarning
    warns_on_feature_scale: ClassVar[bool] = True

    # ------------------------------------------------------------------ checks
    def _check_shared_params(self) -> None:
        """The checks of the parameters the estimators share (each present one; messages as ``fit`` gives)."""
        params = self.get_params(deep=False)
        check_kernel_params(self.kernel, self.gamma, self.degree, self.coef0)
        check_positive("tol", self.tol)
        if self.checks_iteration_cap and "max_iter" in params:
            check_integer("max_iter", self.max_iter, allow_none=True)
        if "max_time" in params:
            check_positive("max_time", self.max_time, allow_none=True, allow_inf=True)
        check_cache_size(self.cache_size, self.cache_size_auto)
        if "n_init" in params:
            check_integer("n_init", self.n_init, self.least_n_init)

    @property
    def max_iterations(self) -> int:
        """``max_iter`` as a number (None: ``DEFAULT_MAX_ITER``)."""
        return int(self.max_iter) if self.max_iter is not None else DEFAULT_MAX_ITER

    @property
    def verbose_seconds(self) -> float:
        """``verbose`` as the interval between progress lines in seconds (0: silent)."""
        return verbose_interval(self.verbose)

    # ------------------------------------------------------------- input data
    def _validated_training_data(self, X, y=None, labelled: bool = True):
        """``X`` (and ``y`` when ``labelled``) checked and converted for fitting; sets ``n_features_in_``
        (and ``feature_names_in_``).  Class labels are checked (mixed or continuous labels are named)."""
        X = zarr_as_memmap(X)  # decompressed once into a temporary .npy map (data.py)
        if is_memory_mapped(X):  # out of core: checked in row blocks, never copied (data.py)
            X = validate_mapped_input(self, X, reset=True)
            if labelled:
                y = column_or_1d(y, warn=True)
                check_consistent_length(X, y)
        else:
            checks = dict(accept_sparse="csr", dtype=[np.float64, np.float32], order="C", ensure_all_finite=False)
            if labelled:
                X, y = validate_data(self, X, y, **checks)
            else:
                X = validate_data(self, X, **checks)
            if self.warns_on_feature_scale:
                X = prepare_fit_matrix(X, self.kernel, type(self).__name__)
            else:
                check_finite_input(X)
                X = canonical_csr(X)
        if labelled:
            check_class_labels(y)
        return X, y

    @staticmethod
    def _check_two_classes(classes: np.ndarray, kept_classes: np.ndarray) -> None:
        """A classifier needs two classes among the rows it trains on (``kept_classes``: their class indices)."""
        if np.count_nonzero(np.bincount(kept_classes, minlength=len(classes))) < 2:
            raise ValueError("The training data must contain samples of at least 2 classes; got only one class "
                             f"({classes[kept_classes][0]!r})")

    def _validated_prediction_data(self, X):
        """A fitted model's prediction data, checked against the training data's features: dense or CSR
        (canonical), or a memory-mapped array (Zarr: mapped first) left as it is for blocked reading."""
        check_is_fitted(self)
        X = zarr_as_memmap(X)
        if is_memory_mapped(X):
            return validate_mapped_input(self, X, reset=False)
        X = validate_data(self, X, accept_sparse="csr", dtype=[np.float64, np.float32], order="C", reset=False,
                          ensure_all_finite=False)
        return prepare_predict_matrix(X)

    @staticmethod
    def _in_row_blocks(function, X, n_support: int) -> np.ndarray:
        """``function(X)``, on a memory-mapped ``X`` block by block (pages released after each), else at once."""
        if is_memory_mapped(X):
            return map_row_blocks(function, X, multiple=product_block_rows(n_support))
        return function(X)

    @staticmethod
    def _training_rows(X, rows):
        """Rows of the training data as an in-memory array or CSR matrix (blocked reads from a map)."""
        return read_rows(X, rows)

    def _set_kernel(self, gamma: float) -> KernelSpec:
        """Record the resolved kernel width ``gamma_`` and the kernel the model predicts with."""
        self.gamma_ = gamma
        self._kernel_spec = KernelSpec(self.kernel, gamma, float(self.coef0), int(self.degree))
        return self._kernel_spec

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags
