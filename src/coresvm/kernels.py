"""Kernel functions: specifications, gamma heuristics, and batched evaluation.

Two evaluation paths share one definition of each kernel:

* :func:`kernel_block` evaluates a rectangular block ``k(A, B)`` through BLAS
  (``A @ B.T`` on dense or CSR data, never densifying sparse input).  It is used
  for prediction and for anything done in Python.
* The compiled primitives (:func:`kernel_from_dot`, :func:`row_to_dense`,
  :func:`dot_with_dense`) are called from the Numba solver loops: one row is
  made dense, then every other row is dotted with it in a compiled loop (no
  BLAS call, whose idle threads would fight Numba's for the cores).  Data are passed to
  them either as a dense 2-D array or as a CSR tuple
  ``(data, indices, indptr, n_features)``; :func:`as_solver_data` builds that.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numba import njit, prange, types
from numba.extending import overload

LINEAR, POLY, RBF, SIGMOID = 0, 1, 2, 3
KERNEL_CODES = {"linear": LINEAR, "poly": POLY, "rbf": RBF, "sigmoid": SIGMOID}
GAMMA_RULES = ("scale", "auto", "cvm")


@dataclass(frozen=True)
class KernelSpec:
    """A fully resolved kernel: its name and numeric parameters.

    ``gamma`` is always a positive float here; string rules are resolved by
    :func:`resolve_gamma` from the training data.
    """

    name: str = "rbf"
    gamma: float = 1.0
    coef0: float = 0.0
    degree: int = 3

    @property
    def code(self) -> int:
        return KERNEL_CODES[self.name]

    @property
    def has_constant_diagonal(self) -> bool:
        """True when ``k(x, x)`` is the same for every ``x`` (needed by MEB solvers)."""
        return self.name == "rbf"


def resolve_gamma(gamma: float | str, X, random_state: np.random.RandomState | None = None) -> float:
    """Turn a gamma rule into a number.

    * float: used as given (must be > 0).
    * ``'scale'``: ``1 / (n_features * X.var())`` as in scikit-learn.
    * ``'auto'``: ``1 / n_features``.
    * ``'cvm'``: ``1 / mean squared pairwise distance`` on a random subsample of at
      most 1000 rows -- the width heuristic of the CVM paper (seed 002, Sec. 5).
    """
    n_samples, n_features = X.shape
    if sp.issparse(X):
        X = X.tocsr()
    if isinstance(gamma, str):
        if gamma == "auto":
            return 1.0 / n_features
        if gamma == "scale":
            if sp.issparse(X):
                mean = np.asarray(X.mean())
                var = float(X.multiply(X).mean() - mean**2)
            else:
                var = float(np.asarray(X, dtype=np.float64).var())
            return 1.0 / (n_features * var) if var > 0 else 1.0
        if gamma == "cvm":
            rng = random_state if random_state is not None else np.random.RandomState(0)
            take = rng.choice(n_samples, size=min(n_samples, 1000), replace=False)
            sub = X[take]
            sq = squared_norms(sub)
            cross = sub @ sub.T
            cross = cross.toarray() if sp.issparse(cross) else np.asarray(cross)
            dist2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * cross, 0.0)
            mean = dist2.sum() / max(len(take) * (len(take) - 1), 1)
            return 1.0 / mean if mean > 0 else 1.0
        raise ValueError(f"gamma must be a positive float or one of {GAMMA_RULES}; got {gamma!r}")
    value = float(gamma)
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"gamma must be > 0; got {gamma!r}")
    return value


def squared_norms(X) -> np.ndarray:
    """Row-wise squared Euclidean norms, in float64, for dense or CSR ``X``."""
    if sp.issparse(X):
        return np.asarray(X.multiply(X).sum(axis=1), dtype=np.float64).ravel()
    X = np.asarray(X)
    return np.einsum("ij,ij->i", X, X, dtype=np.float64)


def apply_kernel_to_dots(dots: np.ndarray, spec: KernelSpec, norms_a, norms_b) -> np.ndarray:
    """Map a block of inner products to kernel values in place (float64)."""
    if spec.name == "linear":
        return dots
    if spec.name == "poly":
        return (spec.gamma * dots + spec.coef0) ** spec.degree
    if spec.name == "sigmoid":
        return np.tanh(spec.gamma * dots + spec.coef0, out=dots)
    dots *= -2.0
    dots += norms_a[:, None]
    dots += norms_b[None, :]
    np.maximum(dots, 0.0, out=dots)
    dots *= -spec.gamma
    return np.exp(dots, out=dots)


def kernel_block(A, B, spec: KernelSpec, norms_a=None, norms_b=None) -> np.ndarray:
    """Kernel values ``k(a_i, b_j)`` as a dense float64 array, through BLAS.

    ``A`` and ``B`` may each be dense or CSR; sparse inputs are never densified.
    """
    dots = inner_products(A, B)
    if spec.name == "rbf":
        norms_a = squared_norms(A) if norms_a is None else norms_a
        norms_b = squared_norms(B) if norms_b is None else norms_b
    return apply_kernel_to_dots(dots, spec, norms_a, norms_b)


def inner_products(A, B) -> np.ndarray:
    """``A @ B.T`` as a dense float64 array (one BLAS call for dense inputs).

    Sparse inputs stay sparse: only the (dense anyway) result is materialized.
    """
    dots = A @ B.T
    if sp.issparse(dots):
        dots = dots.toarray()
    return np.asarray(dots, dtype=np.float64)


def kernel_diagonal(X, spec: KernelSpec, norms=None) -> np.ndarray:
    """``k(x_i, x_i)`` for every row, without forming any block."""
    norms = squared_norms(X) if norms is None else norms
    if spec.name == "rbf":
        return np.ones(X.shape[0])
    if spec.name == "linear":
        return norms.copy()
    if spec.name == "poly":
        return (spec.gamma * norms + spec.coef0) ** spec.degree
    return np.tanh(spec.gamma * norms + spec.coef0)


def as_solver_data(X):
    """The representation the compiled solvers take: dense C array or CSR tuple."""
    if sp.issparse(X):
        X = X.tocsr()
        if not X.has_canonical_format:
            X = X.copy()
            X.sum_duplicates()  # also sorts; the compiled loops assume one entry per (row, column)
        return (
            np.ascontiguousarray(X.data, dtype=np.float64),
            np.ascontiguousarray(X.indices, dtype=np.int64),
            np.ascontiguousarray(X.indptr, dtype=np.int64),
            np.int64(X.shape[1]),
        )
    return np.ascontiguousarray(X)


# --------------------------------------------------------------------------
# Compiled primitives
# --------------------------------------------------------------------------


@njit(inline="always", cache=True)
def kernel_from_dot(kind, dot, norm_a, norm_b, gamma, coef0, degree):
    """One kernel value from the inner product and the two squared norms."""
    if kind == RBF:
        d2 = norm_a + norm_b - 2.0 * dot
        if d2 < 0.0:
            d2 = 0.0
        return np.exp(-gamma * d2)
    if kind == LINEAR:
        return dot
    if kind == POLY:
        return (gamma * dot + coef0) ** degree
    return np.tanh(gamma * dot + coef0)


def n_features(data):  # pragma: no cover - numba overload
    """Number of features of solver data (compiled only)."""


def row_to_dense(data, row, out):  # pragma: no cover - numba overload
    """``out[:] = x_row`` as a dense vector (compiled only)."""


def dot_with_dense(data, row, vector):  # pragma: no cover - numba overload
    """``<x_row, vector>`` for a dense ``vector`` (compiled only)."""


@overload(n_features)
def _n_features(data):
    if isinstance(data, types.Array):
        return lambda data: data.shape[1]
    return lambda data: data[3]


@overload(row_to_dense)
def _row_to_dense(data, row, out):
    if isinstance(data, types.Array):

        def dense_impl(data, row, out):
            for f in range(data.shape[1]):
                out[f] = data[row, f]

        return dense_impl

    def csr_impl(data, row, out):
        values, indices, indptr, _ = data
        out[:] = 0.0
        for p in range(indptr[row], indptr[row + 1]):
            out[indices[p]] = values[p]

    return csr_impl


@overload(dot_with_dense)
def _dot_with_dense(data, row, vector):
    if isinstance(data, types.Array):

        def dense_impl(data, row, vector):
            acc = 0.0
            for f in range(data.shape[1]):
                acc += data[row, f] * vector[f]
            return acc

        return dense_impl

    def csr_impl(data, row, vector):
        values, indices, indptr, _ = data
        acc = 0.0
        for p in range(indptr[row], indptr[row + 1]):
            acc += values[p] * vector[indices[p]]
        return acc

    return csr_impl


@njit(parallel=True, cache=True)
def weighted_kernel_sums(dots, norms_a, norms_b, kind, gamma, coef0, degree, weights, out):
    """``out[c] = sum_a k(x_c, x_a) * weights[a]`` from a block of inner products.

    One fused pass (kernel map, multiply, reduce) instead of materializing the
    kernel block: on this memory-bound work it is the cheaper way.
    """
    for c in prange(dots.shape[0]):
        acc = 0.0
        for a in range(dots.shape[1]):
            acc += kernel_from_dot(kind, dots[c, a], norms_a[c], norms_b[a], gamma, coef0, degree) * weights[a]
        out[c] = acc
