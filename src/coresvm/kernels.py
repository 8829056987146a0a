"""Kernel functions: specifications, gamma heuristics, and batched evaluation.

Two evaluation paths share one definition of each kernel:

* :func:`kernel_block` evaluates a rectangular block ``k(A, B)`` through BLAS
  (``A @ B.T`` on dense or CSR data; a sparse side is made dense only when small), and
  :func:`kernel_product` the product ``k(A, B) @ coef`` in cache-sized blocks on
  threads (prediction, scoring core-set candidates).
* The compiled primitives (:func:`kernel_from_dot`, :func:`row_to_dense`,
  :func:`dot_with_dense`) are called from the Numba solver loops: one row is
  made dense, then every other row is dotted with it in a compiled loop (no
  BLAS call, whose idle threads would fight Numba's for the cores).  Data are passed to
  them either as a dense 2-D array or as a CSR tuple
  ``(data, indices, indptr, n_features)``; :func:`as_solver_data` builds that.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass

import numba
import numpy as np
import scipy.sparse as sp
from numba import njit, types
from numba.extending import overload
from threadpoolctl import ThreadpoolController

from .data import MappedRows, blocked_squared_norms, blocked_variance, is_memory_mapped

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
      most 1000 rows -- the width heuristic of the CVM paper (Tsang et al. 2005, Sec. 5).
    """
    n_samples, n_features = X.shape
    if sp.issparse(X):
        X = X.tocsr()
    if isinstance(gamma, str):
        # Features near float64's limits give an infinite (or zero) variance here: the fit's
        # check_kernel_range then raises one clear error instead of NumPy's overflow warnings.
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            return _gamma_rule(gamma, X, n_samples, n_features, random_state)
    value = float(gamma)
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"gamma must be > 0; got {gamma!r}")
    return value


def _gamma_rule(gamma: str, X, n_samples: int, n_features: int, random_state) -> float:
    """The value of a gamma rule of :func:`resolve_gamma`."""
    if gamma == "auto":
        return 1.0 / n_features
    if gamma == "scale":
        if sp.issparse(X):
            mean = np.asarray(X.mean())
            var = float(X.multiply(X).mean() - mean**2)
        else:
            var = blocked_variance(X)  # no X-sized temporary (X may be a memmap)
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


def squared_norms(X) -> np.ndarray:
    """Row-wise squared Euclidean norms, in float64, for dense or CSR ``X``."""
    if sp.issparse(X):
        return np.asarray(X.multiply(X).sum(axis=1), dtype=np.float64).ravel()
    if isinstance(X, MappedRows) or is_memory_mapped(X):
        return blocked_squared_norms(X.array if isinstance(X, MappedRows) else X)
    X = np.asarray(X)
    return np.einsum("ij,ij->i", X, X, dtype=np.float64)


# exp in float32 by range reduction, exp(x) = 2^n exp(r) with |r| <= ln(2)/2, and the degree-7 Taylor polynomial of
# exp(r) (truncation r^8/8! < 6e-9): vectorized by Numba, 0.37 ns per value where NumPy's float32 exp took 2.6 on this
# machine (AVX2, no AVX-512), within 8e-8 relative of the float64 exp.  Arguments are clamped to [-87, 88], inside
# float32's normal range: an RBF value below exp(-87) = 1.6e-38 comes out as that.
EXP_LOG2E = np.float32(1.4426950408889634)
EXP_LN2_HIGH = np.float32(0.693359375)  # ln 2 = high + low, high with few mantissa bits so n * high is exact
EXP_LN2_LOW = np.float32(-2.12194440e-4)
EXP_MIN, EXP_MAX = np.float32(-87.0), np.float32(88.0)
TAYLOR = tuple(np.float32(1.0 / factorial) for factorial in (5040.0, 720.0, 120.0, 24.0, 6.0, 2.0, 1.0, 1.0))


@njit(cache=True, nogil=True, fastmath={"contract"})
def _exp_float32_in_place(flat):
    bits = flat.view(np.int32)
    for i in range(flat.shape[0]):
        x = min(max(flat[i], EXP_MIN), EXP_MAX)
        n = np.floor(x * EXP_LOG2E + np.float32(0.5))
        r = x - n * EXP_LN2_HIGH - n * EXP_LN2_LOW
        p = TAYLOR[0]
        for c in TAYLOR[1:]:
            p = p * r + c
        bits[i] = (np.int32(n) + np.int32(127)) << 23  # 2^n, written over x (already read)
        flat[i] = flat[i] * p


# Dense float32 RBF products with at most this many features: kernel_product computes each row's squared
# distances, exp and weighted sum in compiled passes over a work row that stays in L1, instead of a GEMM whose
# inner dimension is only d and eight NumPy passes over a block in memory.
FUSED_MAX_FEATURES = 8


@njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def widened_dot(a, b):
    """``a @ b`` for a float32 ``a`` and a float64 ``b``, summed in float64 lanes (reassociated: vectorized)."""
    total = 0.0
    for j in range(a.shape[0]):
        total += np.float64(a[j]) * b[j]
    return total


@njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def widened_matvec(block, coef, out):
    """``out = block @ coef`` for a float32 ``block`` and float64 ``coef``, summed in float64."""
    for i in range(block.shape[0]):
        out[i] = widened_dot(block[i], coef)


@njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def widened_matvec_transposed(block_t, coef, out):
    """``out = block_t.T @ coef`` for a float32 ``block_t`` and float64 ``coef``, summed in float64."""
    out[:] = 0.0
    for j in range(block_t.shape[0]):
        c = coef[j]
        row = block_t[j]
        for i in range(row.shape[0]):
            out[i] += np.float64(row[i]) * c


def weighted_sums(block, coef: np.ndarray, transposed: bool = False) -> np.ndarray:
    """``block @ coef`` (``block.T @ coef`` when ``transposed``) in float64.

    A float32 block is summed in float64 against float64 coefficients: the core-set solvers' sums ``(Q a)_t``
    cancel to far below the terms' total ``sum_j |a_j k_tj|`` (about 1e-8 against 1 on ijcnn1 at C = 65,536),
    and float32 sums (BLAS's sgemv) left errors of ~5e-8 in them, larger than the sums and the stopping
    tolerance's margin; the candidates' scores were mostly rounding.  Other operands are multiplied in their own
    dtype (several coefficient columns, the joint multiclass problem's, come float32 from :func:`kernel_product`).
    """
    if block.dtype == np.float32 and coef.ndim == 1:
        out = np.empty(block.shape[1] if transposed else block.shape[0])
        (widened_matvec_transposed if transposed else widened_matvec)(block, coef, out)
        return out
    return block.T @ coef if transposed else block @ coef


@njit(cache=True, nogil=True, inline="always")
def rbf_row_values(a, B_t, gamma, work, start=0):
    """``work[j] = exp(-gamma |a - B_{start + j}|^2)`` for the float32 point ``a`` (d) and ``len(work)`` columns of
    ``B_t`` (d x m: the points ``B`` transposed) from ``start``, in float32; the direct form: no exponent range to
    guard.  A pass per feature, the last one also scaling by ``-gamma`` (a pass of its own took 5% more time with two
    features), then the exponential's.  The columns are sliced here, not by the caller: Numba types a 2-D slice as
    non-contiguous, and its loops then do not vectorize."""
    minus_gamma = np.float32(-gamma)
    last = a.shape[0] - 1
    stop = start + work.shape[0]
    first, a0 = B_t[0, start:stop], a[0]
    for j in range(work.shape[0]):
        diff = a0 - first[j]
        work[j] = diff * diff if last else minus_gamma * (diff * diff)
    for k in range(1, last):
        a_k, row = a[k], B_t[k, start:stop]
        for j in range(work.shape[0]):
            diff = a_k - row[j]
            work[j] += diff * diff
    if last:
        a_k, row = a[last], B_t[last, start:stop]
        for j in range(work.shape[0]):
            diff = a_k - row[j]
            work[j] = minus_gamma * (work[j] + diff * diff)
    _exp_float32_in_place(work)


@njit(cache=True, nogil=True, inline="always")
def rbf_row_values_over_nonzeros(a, B_t, norms, norm_a, gamma, work, start=0):
    """:func:`rbf_row_values` for points whose features are mostly zero (one-hot columns, min-max scaled counts):
    ``|a - b|^2 = (|a|^2 + |b|^2) - 2 a'b`` from the points' squared norms (``norm_a``; ``norms``, one per column
    of ``B_t``) and the inner products summed over ``a``'s nonzero features only, a pass each instead of one per
    feature.  Rows of two points are still equal bit for bit where they cross: both sums are the products of the
    features the two share, added in feature order (the other terms are exact zeros).  Rounding can take a
    distance a little below zero; it is read as zero."""
    minus_gamma, two = np.float32(-gamma), np.float32(2.0)
    stop = start + work.shape[0]
    work[:] = 0.0
    for k in range(a.shape[0]):
        a_k = a[k]
        if a_k != 0.0:
            row = B_t[k, start:stop]
            for j in range(work.shape[0]):
                work[j] += a_k * row[j]
    part = norms[start:stop]
    for j in range(work.shape[0]):
        work[j] = minus_gamma * max((norm_a + part[j]) - two * work[j], np.float32(0.0))
    _exp_float32_in_place(work)


@njit(cache=True, nogil=True)
def fused_rbf_sums(A, B_t, coef, gamma, work, out):
    """``out[i] = sum_j coef[j] exp(-gamma |A_i - B_j|^2)`` for float32 ``A`` (n x d) and ``B_t`` (d x m, ``B``
    transposed), ``work`` a float32 row of ``m``, ``coef`` float64 (the sums in float64: see
    :func:`weighted_sums`)."""
    for i in range(A.shape[0]):
        rbf_row_values(A[i], B_t, gamma, work)
        out[i] = widened_dot(work, coef)


def exp_in_place(values: np.ndarray) -> np.ndarray:
    """``np.exp(values, out=values)``; C-contiguous float32 arrays by :func:`_exp_float32_in_place` (see above)."""
    if values.dtype == np.float32 and values.flags.c_contiguous and values.size:
        _exp_float32_in_place(values.reshape(-1))
        return values
    return np.exp(values, out=values)


def exp_weighted_sums(exponents: np.ndarray, coef: np.ndarray) -> np.ndarray:
    """``weighted_sums(exp_in_place(exponents), coef)``; for a C-contiguous float32 block and one coefficient column
    a row at a time (:func:`_exp_rows_widened_matvec`), the same numbers: the row is summed while it is in cache,
    not in a second pass over the block (blocks of 128 rows against 5,000-20,000 columns: 1.4-1.5x faster)."""
    if exponents.dtype == np.float32 and exponents.flags.c_contiguous and coef.ndim == 1 and exponents.size:
        out = np.empty(exponents.shape[0])
        _exp_rows_widened_matvec(exponents, coef, out)
        return out
    return weighted_sums(exp_in_place(exponents), coef)


@njit(cache=True, nogil=True)
def _exp_rows_widened_matvec(block, coef, out):
    for i in range(block.shape[0]):
        _exp_float32_in_place(block[i])
        out[i] = widened_dot(block[i], coef)


def apply_kernel_to_dots(dots: np.ndarray, spec: KernelSpec, norms_a, norms_b) -> np.ndarray:
    """Map a block of inner products to kernel values in place (float64)."""
    if spec.name == "linear":
        return dots
    if spec.name == "poly":
        return (spec.gamma * dots + spec.coef0) ** spec.degree
    if spec.name == "sigmoid":
        return np.tanh(spec.gamma * dots + spec.coef0, out=dots)
    dots *= -2.0
    # in the block's precision: float64 norms would make every pass convert (float32 Gram blocks)
    dots += np.asarray(norms_a, dtype=dots.dtype)[:, None]
    dots += np.asarray(norms_b, dtype=dots.dtype)[None, :]
    np.maximum(dots, 0.0, out=dots)
    dots *= -spec.gamma
    return exp_in_place(dots)


def kernel_block(A, B, spec: KernelSpec, norms_a=None, norms_b=None, precision: type = np.float64) -> np.ndarray:
    """Kernel values ``k(a_i, b_j)`` as a dense array of ``precision`` (float64 unless told), through BLAS.

    ``A`` and ``B`` may each be dense or CSR; of two sparse inputs only the smaller side's rows are made dense,
    when that takes at most 64 MiB (:func:`inner_products`).  ``precision=np.float32`` multiplies and
    exponentiates in float32 (the core-set solvers' float32 Gram matrices).
    """
    dots = inner_products(A, B, precision)
    if spec.name == "rbf":
        norms_a = squared_norms(A) if norms_a is None else norms_a
        norms_b = squared_norms(B) if norms_b is None else norms_b
    return apply_kernel_to_dots(dots, spec, norms_a, norms_b)


# Columns of the dense operand per pass of csr_rows_times_dense: 2,048 float32 values (8 KiB) of a feature's row, so
# that the rows a block of sparse rows touches stay in L2 while every sparse row of the block is multiplied.
SPARSE_PRODUCT_TILE = 2048


@njit(cache=True, nogil=True, fastmath={"contract"})
def _add_four_scaled(out, v1, b1, v2, b2, v3, b3, v4, b4):
    """``out += v1 b1 + v2 b2 + v3 b3 + v4 b4``: four nonzeros per pass over ``out`` (one load and one store of it
    per four multiply-adds, where one nonzero per pass was bound by the stores)."""
    for j in range(out.shape[0]):
        out[j] += v1 * b1[j] + v2 * b2[j] + v3 * b3[j] + v4 * b4[j]


@njit(cache=True, nogil=True, fastmath={"contract"})
def _add_scaled(out, v, b):
    """``out += v b``: a row's last one to three nonzeros."""
    for j in range(out.shape[0]):
        out[j] += v * b[j]


@njit(cache=True, nogil=True)
def _sparse_row_times_dense(indptr, indices, data, i, right, j0, j1, out):
    """``out = A[i] @ right[:, j0:j1]`` for the CSR row ``i``."""
    out[:] = 0
    p, end = indptr[i], indptr[i + 1]
    while p + 4 <= end:
        _add_four_scaled(out, data[p], right[indices[p], j0:j1], data[p + 1], right[indices[p + 1], j0:j1],
                         data[p + 2], right[indices[p + 2], j0:j1], data[p + 3], right[indices[p + 3], j0:j1])
        p += 4
    while p < end:
        _add_scaled(out, data[p], right[indices[p], j0:j1])
        p += 1


@njit(cache=True, nogil=True)
def csr_rows_times_dense(indptr, indices, data, right, out):
    """``out = A @ right`` for a CSR ``A`` and a C-contiguous ``right``, in column tiles of
    :data:`SPARSE_PRODUCT_TILE`."""
    for j0 in range(0, right.shape[1], SPARSE_PRODUCT_TILE):
        j1 = min(j0 + SPARSE_PRODUCT_TILE, right.shape[1])
        for i in range(indptr.shape[0] - 1):
            _sparse_row_times_dense(indptr, indices, data, i, right, j0, j1, out[i, j0:j1])


def sparse_times_dense(A, right: np.ndarray) -> np.ndarray:
    """``A @ right`` for a sparse ``A`` and a dense ``right`` (features x columns), as a C-ordered dense array.

    Float32 and float64 operands of one dtype, ``right`` C-contiguous, go through a compiled loop
    (:func:`csr_rows_times_dense`): 1.7-1.9x faster than SciPy's on a9a's and w8a's core-set blocks (128 rows against
    9,000-20,000 columns, one thread), by taking four nonzeros per pass over a row and a column tile at a time.
    Other operands use SciPy's product.
    """
    A = A.tocsr()
    if A.dtype != right.dtype or A.dtype not in (np.float32, np.float64) or not right.flags.c_contiguous:
        return np.asarray(A @ right)
    out = np.empty((A.shape[0], right.shape[1]), dtype=right.dtype)
    if out.size:
        csr_rows_times_dense(A.indptr, A.indices, A.data, right, out)
    return out


@njit(cache=True, nogil=True)
def csr_times_columns(indptr, indices, data, column_ptr, column_rows, column_values, out):
    """``out = A @ B.T`` for CSR rows ``A`` and ``B`` given by its columns (``B.T`` in CSR: the rows of ``B`` that
    hold each feature, and their values): each nonzero of ``A`` adds its feature's column of ``B``, scaled, into
    its row of ``out``, so a product costs the pairs of nonzeros that share a feature."""
    for i in range(indptr.shape[0] - 1):
        out[i, :] = 0
        _add_row_times_columns(indptr, indices, data, i, column_ptr, column_rows, column_values, out[i])


@njit(cache=True, nogil=True)
def add_csr_times_columns(indptr, indices, data, column_ptr, column_rows, column_values, out):
    """``out += A @ B.T`` as :func:`csr_times_columns`."""
    for i in range(indptr.shape[0] - 1):
        _add_row_times_columns(indptr, indices, data, i, column_ptr, column_rows, column_values, out[i])


@njit(inline="always")
def _add_row_times_columns(indptr, indices, data, i, column_ptr, column_rows, column_values, row):
    for p in range(indptr[i], indptr[i + 1]):
        value = data[p]
        feature = indices[p]
        for q in range(column_ptr[feature], column_ptr[feature + 1]):
            row[column_rows[q]] += value * column_values[q]


@njit(cache=True, nogil=True)
def split_by_columns(indptr, indices, data, slots, n_features, head_t):
    """A CSR ``B``'s entries by feature: ``head_t[slots[f], i] = B[i, f]`` for the features with ``slots[f] >= 0``
    (``head_t`` zeroed), and the others as ``B.T`` in CSR ``(pointers, rows, values)``, each feature's rows in
    order; duplicate entries are kept (the products sum them)."""
    counts = np.zeros(n_features + 1, dtype=indptr.dtype)
    for p in range(indptr[indptr.shape[0] - 1]):
        if slots[indices[p]] < 0:
            counts[indices[p] + 1] += 1
    column_ptr = np.cumsum(counts).astype(indptr.dtype)
    column_rows = np.empty(column_ptr[n_features], dtype=indptr.dtype)
    column_values = np.empty(column_ptr[n_features], dtype=data.dtype)
    position = column_ptr[:n_features].copy()
    for i in range(indptr.shape[0] - 1):
        for p in range(indptr[i], indptr[i + 1]):
            feature = indices[p]
            slot = slots[feature]
            if slot >= 0:
                head_t[slot, i] += data[p]
            else:
                column_rows[position[feature]] = i
                column_values[position[feature]] = data[p]
                position[feature] += 1
    return column_ptr, column_rows, column_values


@njit(cache=True, nogil=True)
def csr_selected_columns(indptr, indices, data, slots, out):
    """``out[i, slots[f]] = A[i, f]`` for the features ``f`` with ``slots[f] >= 0``, zeros elsewhere: a CSR
    ``A``'s columns of a few features as a dense block (duplicate entries summed, as SciPy reads them)."""
    out[:] = 0
    for i in range(indptr.shape[0] - 1):
        for p in range(indptr[i], indptr[i + 1]):
            slot = slots[indices[p]]
            if slot >= 0:
                out[i, slot] += data[p]


@njit(cache=True, nogil=True)
def csr_rows_exp_sums(indptr, indices, data, start, stop, right, coef, out):
    """``out[i - start] = sum_j coef[j] exp((A @ right)[i, j])`` for the rows ``start:stop`` of a CSR ``A`` and a
    float32 ``right``, a column tile at a time in a work row that stays in cache; the sums in float64
    (:func:`weighted_sums`)."""
    out[:] = 0.0
    work = np.empty(min(SPARSE_PRODUCT_TILE, right.shape[1]), dtype=right.dtype)
    for j0 in range(0, right.shape[1], SPARSE_PRODUCT_TILE):
        j1 = min(j0 + SPARSE_PRODUCT_TILE, right.shape[1])
        tile = work[: j1 - j0]
        for i in range(start, stop):
            _sparse_row_times_dense(indptr, indices, data, i, right, j0, j1, tile)
            _exp_float32_in_place(tile)
            out[i - start] += widened_dot(tile, coef[j0:j1])


def sparse_exp_sums(A, right: np.ndarray, coef: np.ndarray, start: int = 0, stop: int | None = None) -> np.ndarray:
    """``exp(A[start:stop] @ right) @ coef`` for a sparse ``A``, a C-contiguous float32 ``right`` and float64
    ``coef``, without the block in memory: the product, ``exp`` and sum of each column tile in one pass (the
    factorized RBF scores of :func:`kernel_product`).  The core-set scoring of a9a and w8a took 10-16% less time
    than with three passes over the block (1.16 -> 0.97 s and 0.71 -> 0.64 s in a fit).  The rows are read in
    place: slicing them out of a float32 CSR ``A`` first cost ~0.3 ms a block under the GIL, a third of w8a's
    scoring on two threads."""
    A = A.tocsr().astype(np.float32, copy=False)
    stop = A.shape[0] if stop is None else stop
    out = np.empty(stop - start)
    csr_rows_exp_sums(A.indptr, A.indices, A.data, start, stop, right, np.ascontiguousarray(coef, dtype=np.float64),
                      out)
    return out


@njit(cache=True, nogil=True)
def csr_scaled_transposed(indptr, indices, data, factor, out):
    """``out[f, j] = B[j, f] * factor`` for a CSR ``B`` without duplicate entries (``out`` zeroed, of ``data``'s
    dtype): what ``(B.toarray() * factor).T`` holds, bit for bit, in one pass over the nonzeros."""
    for j in range(indptr.shape[0] - 1):
        for p in range(indptr[j], indptr[j + 1]):
            out[indices[p], j] = data[p] * factor


def scaled_transposed(B, dtype: type, scale: float = 1.0) -> np.ndarray:
    """``(B * scale).T`` as a C-contiguous array of ``dtype``, the right operand of sparse x dense products.

    A sparse ``B`` is written straight from its nonzeros (duplicates summed first, as a dense copy sums them):
    made through a dense float64 copy, a cast, a scaled copy and a transposed one, the operand of a w8a scoring
    product (2,900 support vectors) took 2.0 ms and of an a9a one (15,000) 6.8 ms, in one pass 0.24 and 1.5 ms."""
    factor = np.dtype(dtype).type(scale)
    if not sp.issparse(B):
        if scale == 1.0:
            return transposed_operand(B, dtype)
        B = np.asarray(B, dtype=dtype)
        out = np.empty((B.shape[1], B.shape[0]), dtype=dtype)
        np.multiply(B.T, factor, out=out)
        return out
    B = canonical_csr(B).astype(dtype, copy=False)
    out = np.zeros((B.shape[1], B.shape[0]), dtype=dtype)
    csr_scaled_transposed(B.indptr, B.indices, B.data, factor, out)
    return out


def canonical_csr(B):
    """``B`` in CSR with its duplicate entries summed and indices sorted (a copy only when it is not already)."""
    B = B.tocsr()
    if not B.has_canonical_format:
        B = B.copy()
        B.sum_duplicates()
    return B


def inner_products(A, B, dtype: type = np.float64) -> np.ndarray:
    """``A @ B.T`` as a dense array of ``dtype`` (float64 unless told; one BLAS call for dense inputs).

    With a sparse operand, the other side is made dense and contiguous when that costs at most 64 MiB: SciPy's
    sparse x sparse product with a dense result, and its sparse x dense product with a transposed (strided)
    right operand, which it copies, were 4-5x slower than one sparse x contiguous-dense pass.  The operands are
    cast to ``dtype`` first (dense ones too), so float32 products run in float32.
    """
    A_sparse, B_sparse = sp.issparse(A), sp.issparse(B)
    A = A.astype(dtype, copy=False) if A_sparse else np.asarray(A, dtype=dtype)
    B = B.astype(dtype, copy=False) if B_sparse else np.asarray(B, dtype=dtype)
    if A_sparse and B_sparse:
        small, large, swapped = (A, B, True) if A.shape[0] <= B.shape[0] else (B, A, False)
        if small.shape[0] * small.shape[1] * np.dtype(dtype).itemsize <= DENSE_OPERAND_BYTES:
            dots = sparse_times_dense(large, np.ascontiguousarray(small.toarray().T))
            # C order either way: the kernel's passes and the callers' row copies are slow on a transposed view
            return np.ascontiguousarray(dots.T) if swapped else dots
        dots = (A @ B.T).toarray()
    elif A_sparse:
        dots = sparse_times_dense(A, transposed_operand(B, dtype))
    elif B_sparse:
        dots = np.ascontiguousarray(sparse_times_dense(B, transposed_operand(A, dtype)).T)
    else:
        dots = A @ B.T
    return np.asarray(dots, dtype=dtype)


def transposed_operand(B, dtype: type = np.float64) -> np.ndarray:
    """``B.T`` as a C-contiguous array of ``dtype``: the right operand of a sparse x dense product, made once
    for repeated products (SciPy copies a strided one on every call)."""
    return np.ascontiguousarray(np.asarray(B, dtype=dtype).T)


BLOCK_VALUES = 2**19  # kernel values per block of kernel_product (4 MiB: stays in cache)
# ... but at least this many rows while a block stays under GEMM_BLOCK_VALUES: a GEMM of a few rows against
# tens of thousands runs at half speed or less (123 features, float32, one thread: 8.8 ns per value at 17
# rows, 4.3 at 128; 300 features: 21 and 8.8).
GEMM_MIN_ROWS = 128
GEMM_BLOCK_VALUES = 2**23
DENSE_OPERAND_BYTES = 64 * 2**20  # a sparse right operand smaller than this is made dense
FEW_ROWS = 1024  # fewer rows of A than this (and than a sparse B's) are made dense instead of B
RBF_FACTOR_LIMIT = 600.0  # exp(+-600) is finite in float64 with room to spare
# exp(+-80) is finite and normal in float32 (overflow at 88.7, the smallest normal at exp(-87.3)).
RBF_FACTOR_LIMIT_FLOAT32 = 80.0


def product_block_rows(n_b: int) -> int:
    """Rows of ``A`` per block of :func:`kernel_product` against ``n_b`` rows of ``B``: a cache-sized block, or
    :data:`GEMM_MIN_ROWS` rows when that stays within :data:`GEMM_BLOCK_VALUES` values."""
    n_b = max(n_b, 1)
    return max(8, BLOCK_VALUES // n_b, min(GEMM_MIN_ROWS, GEMM_BLOCK_VALUES // n_b))


def kernel_product(A, B, spec: KernelSpec, coef: np.ndarray, norms_a=None, norms_b=None,
                   n_threads: int | None = None, precision: type = np.float64) -> np.ndarray:
    """``k(A, B) @ coef`` without materializing ``k(A, B)``.

    Rows of ``A`` are taken in cache-sized blocks, one BLAS call each, on
    ``n_threads`` threads (BLAS itself held to one thread, so they do not
    oversubscribe the cores).  For RBF the block is factorized as
    ``exp(-g|a|^2) * exp(2g <a, b>) * exp(-g|b|^2)``, so a block costs one GEMM,
    one vectorized ``exp`` and one GEMV; this is used only while every exponent
    stays far from overflow (``g * (max|a|^2 + max|b|^2) < 600``), else the
    direct ``exp(-g |a - b|^2)``.  ``B`` is small (support vectors, an active
    set): a sparse ``B`` is made dense when that costs at most 64 MiB, which
    keeps sparse ``A`` sparse and makes the product one sparse x dense call.
    When ``A`` has fewer rows than a sparse ``B``, ``A`` is made dense instead, and each block is computed as
    ``B @ A_block.T`` and used in that layout (:meth:`RightOperand.products_transposed`).

    ``precision=np.float32`` computes the blocks (GEMM, ``exp``) in float32, about twice as fast, with relative
    errors near 1e-7 per kernel value, and sums them against the coefficients in float64 (:func:`weighted_sums`);
    the output is float64 either way.  The core-set
    solvers score candidates this way when their Gram matrix is float32 as well (``tol >= 1e-3``).

    ``norms_a`` / ``norms_b``: the rows' squared norms.  When not given they are computed only if the kernel
    uses them (RBF outside the fused few-feature loop), from ``A`` / ``B`` before the float32 cast.
    """
    n_a, n_b = A.shape[0], B.shape[0]
    coef = np.asarray(coef, dtype=np.float64)
    out = np.empty((n_a,) + coef.shape[1:])
    if n_a == 0:
        return out
    if n_b == 0:
        out[:] = 0.0
        return out
    single = precision == np.float32
    A, B = _product_operands(A, B)
    given_a, given_b = A, B  # norms not given are computed from these, before the float32 cast
    if single:
        A, B = A.astype(np.float32, copy=False), B.astype(np.float32, copy=False)
    limit = rbf_factor_limit(precision)
    fused = (spec.name == "rbf" and single and coef.ndim == 1 and isinstance(A, np.ndarray)
             and isinstance(B, np.ndarray) and 0 < A.shape[1] <= FUSED_MAX_FEATURES)
    if fused:  # fused_rbf_sums takes the direct form: no norms, no factorized operands
        B_t, A = np.ascontiguousarray(B.T), np.ascontiguousarray(A)
    elif spec.name == "rbf":
        norms_a = squared_norms(given_a) if norms_a is None else norms_a
        norms_b = squared_norms(given_b) if norms_b is None else norms_b
    factorizable = not fused and spec.name == "rbf" and rbf_factorizable(spec, 0.0, norms_b, limit)
    coef_shape = (-1,) + (1,) * (coef.ndim - 1)
    if factorizable:
        coef_b = np.exp(-spec.gamma * norms_b).reshape(coef_shape) * coef
    if single and coef.ndim != 1:  # several columns: float32 products (weighted_sums), the cast made once here
        coef = coef.astype(np.float32)
        if factorizable:
            coef_b = coef_b.astype(np.float32)
    rows = product_block_rows(n_b)
    scaled_right = RightOperand(B, A, precision, scale=2.0 * spec.gamma) if factorizable else None
    # The unscaled operand only for blocks that cannot be factorized (its transposed copy took a fifth of a9a's
    # scoring when it was made for every product).
    every_block_factorizable = factorizable and rbf_factorizable(spec, norms_a, norms_b, limit)
    sparse_sums = factorizable and single and coef.ndim == 1 and scaled_right.transposed is not None
    if sparse_sums:  # CSR once for every block's sparse_exp_sums (A is float32 already, coef_b a fresh array)
        A = A.tocsr()
    right = None if every_block_factorizable else RightOperand(B, A, precision)

    def one_block(start: int) -> None:
        stop = min(start + rows, n_a)
        if fused:
            fused_rbf_sums(A[start:stop], B_t, coef, spec.gamma, np.empty(n_b, dtype=np.float32), out[start:stop])
        elif factorizable and rbf_factorizable(spec, norms_a[start:stop], norms_b, limit):
            if scaled_right.sparse_right:  # k(B, A_block) in B's row order, summed over its rows
                sums = weighted_sums(exp_in_place(scaled_right.products_transposed(A[start:stop])), coef_b, True)
            elif sparse_sums:  # sparse rows, float32
                sums = sparse_exp_sums(A, scaled_right.transposed, coef_b, start, stop)
            else:
                sums = exp_weighted_sums(scaled_right.products(A[start:stop]), coef_b)
            out[start:stop] = sums * np.exp(-spec.gamma * norms_a[start:stop]).reshape(coef_shape)
        elif right.sparse_right:
            block_t = right.products_transposed(A[start:stop])
            block_t = apply_kernel_to_dots(block_t, spec, norms_b, None if norms_a is None else norms_a[start:stop])
            out[start:stop] = weighted_sums(block_t, coef, True)
        else:
            block = right.products(A[start:stop])
            block = apply_kernel_to_dots(block, spec, None if norms_a is None else norms_a[start:stop], norms_b)
            out[start:stop] = weighted_sums(block, coef)

    run_row_blocks(n_a, rows, one_block, n_threads)
    return out


# Sparse x sparse products: by B's columns (csr_times_columns) when the pairs of nonzeros that share a feature are
# fewer than this share of the multiply-adds of a product against a dense block of A's rows (every nonzero of B
# times the block's rows).  A scattered add costs a few streamed ones; on a tf-idf set (5,000 features, 38 nonzeros a
# row) the pairs were ~1-2% of them.
BY_COLUMNS_MAX_SHARE = 0.25


class RightOperand:
    """The right side ``B`` (times ``scale``) of repeated products ``A_block @ B.T`` over row blocks of one ``A``.

    For sparse ``A`` and a dense ``B``, or a sparse one small enough to be made dense (:func:`densified_side`),
    ``B.T`` is made contiguous once (:func:`scaled_transposed`) instead of by SciPy on every block (w8a's core-set
    scoring: 1.2 -> 0.23 s of CPU per 10,000 candidates).  For sparse
    ``A`` and ``B`` whose rows share few features (text: many features, few nonzeros per row), ``B`` is kept by
    its columns and each product costs only the pairs of nonzeros that meet (:func:`csr_times_columns`).
    """

    def __init__(self, B, A, dtype: type, scale: float = 1.0) -> None:
        self.dtype = dtype
        # a sparse B that kernel products make dense (densified_side) is written dense from its nonzeros
        made_dense = sp.issparse(A) and sp.issparse(B) and densified_side(A, B) == "B"
        self.transposed = (scaled_transposed(B, dtype, scale) if sp.issparse(A) and (made_dense or not sp.issparse(B))
                           else None)
        self.B = B * np.dtype(dtype).type(scale) if scale != 1.0 and self.transposed is None else B
        self.columns = None if made_dense else columns_if_sparse_enough(A, self.B, dtype)
        # sparse B (its dense copy too large, or the candidates fewer than the support): products_transposed
        # serves the blocks, whose rows of A are made dense
        self.sparse_right = sp.issparse(B) and self.transposed is None and self.columns is None

    def products(self, A_block) -> np.ndarray:
        """``A_block @ B.T`` as a dense array of the operand's dtype."""
        if self.columns is not None:
            return self.columns.products(A_block)
        if self.transposed is None:
            return inner_products(A_block, self.B, self.dtype)
        return sparse_times_dense(A_block.astype(self.dtype, copy=False), self.transposed)

    def products_transposed(self, A_block) -> np.ndarray:
        """``B @ A_block.T`` (C order) for a sparse ``B``: what a sparse x dense product gives directly (a sparse
        ``A_block`` is made dense: a block of rows).  The kernel's elementwise passes and the reduction with the
        coefficients take it as it is; :meth:`products` would copy it transposed, which cost more than the
        product (w8a's scoring, 9,277 support vectors: 2.2 against 1.5 ns per value; a tf-idf set, 5,000 features,
        31,700 support vectors of 60,000 rows: 29 of an 85 s fit)."""
        A_block = A_block.toarray() if sp.issparse(A_block) else A_block
        return sparse_times_dense(self.B.astype(self.dtype, copy=False), transposed_operand(A_block, self.dtype))


def columns_if_sparse_enough(A, B, dtype: type) -> ColumnProducts | None:
    """``B`` by its columns for products ``A_block @ B.T`` (:class:`ColumnProducts`), when ``A`` and ``B`` are
    sparse and a row of ``A`` shares few nonzeros with ``B`` outside the frequent features of the dense block
    (:func:`dense_head_features`): on average (``A``'s features weighted by how often they occur) those pairs, and
    the dense block's multiply-adds counted at :data:`DENSE_HEAD_MIN_PAIRS` a pair, come to fewer than
    :data:`BY_COLUMNS_MAX_SHARE` of ``B``'s nonzeros.  Else None."""
    if not (sp.issparse(A) and sp.issparse(B)) or B.nnz == 0 or A.shape[0] == 0:
        return None
    A, B = A.tocsr(), B.tocsr()
    # per feature, its nonzeros in A times those in B: O(features) memory (A is often every training row)
    in_a = np.bincount(A.indices, minlength=A.shape[1]).astype(np.float64)
    in_b = np.bincount(B.indices, minlength=B.shape[1]).astype(np.float64)
    pairs_per_entry = in_a * in_b / (A.shape[0] * B.shape[0])
    head = dense_head_features(pairs_per_entry, B.shape[0], dtype)
    cost_per_entry = pairs_per_entry.sum() - pairs_per_entry[head].sum() + DENSE_HEAD_MIN_PAIRS * len(head)
    if cost_per_entry * B.shape[0] > BY_COLUMNS_MAX_SHARE * B.nnz:
        return None
    return ColumnProducts(B, head, dtype)


# Sparse x sparse products by columns: a feature whose nonzeros meet in more than this share of a product's
# entries (its frequency in A's rows times its frequency in B's) is multiplied in a dense block by BLAS instead.
# A scattered multiply-add cost ~1.1 ns and a BLAS one per entry and head feature ~0.015 ns (float32, one thread):
# a head feature costs about this many scattered pairs per entry (columns_if_sparse_enough counts it so).  On a
# tf-idf set (5,000 features) the 64 commonest words carried 69% of the pairs, and the products took 1.6-1.75x
# less time with them in the head (128-row blocks against 10,000-60,000 rows).
DENSE_HEAD_MIN_PAIRS = 0.01
DENSE_HEAD_MAX_FEATURES = 256


def dense_head_features(pairs_per_entry: np.ndarray, n_b: int, dtype: type) -> np.ndarray:
    """The features worth a dense product (:data:`DENSE_HEAD_MIN_PAIRS`), the most frequent first: at most
    :data:`DENSE_HEAD_MAX_FEATURES`, and as many as keep ``B``'s dense copy of them within
    :data:`DENSE_OPERAND_BYTES`."""
    frequent = np.flatnonzero(pairs_per_entry > DENSE_HEAD_MIN_PAIRS)
    room = DENSE_OPERAND_BYTES // max(n_b * np.dtype(dtype).itemsize, 1)
    keep = min(len(frequent), DENSE_HEAD_MAX_FEATURES, room)
    return frequent[np.argsort(-pairs_per_entry[frequent], kind="stable")[:keep]]


class ColumnProducts:
    """``A_block @ B.T`` for sparse rows that share few features: the features in ``head`` (frequent ones) by one
    dense product, the others by ``B``'s columns (``B.T`` in CSR: the rows of ``B`` that hold each feature, and
    their values; :func:`add_csr_times_columns`), so each of those costs only the pairs of nonzeros that meet."""

    def __init__(self, B, head: np.ndarray, dtype: type) -> None:
        B = B.tocsr().astype(dtype, copy=False)
        self.dtype, self.n_b = dtype, B.shape[0]
        self.slots = np.full(B.shape[1], -1, dtype=np.intp)
        self.slots[head] = np.arange(len(head))
        self.head_t = np.zeros((len(head), B.shape[0]), dtype=dtype)  # no rows without a head
        # one pass instead of SciPy's column selection, masking and transpose (25 of 30 ms for 31,000 tf-idf rows)
        self.tail = split_by_columns(B.indptr, B.indices, B.data, self.slots, B.shape[1], self.head_t)

    def products(self, A_block) -> np.ndarray:
        """``A_block @ B.T`` as a dense array of the operand's dtype."""
        A_block = sp.csr_matrix(A_block).astype(self.dtype, copy=False)
        out = np.empty((A_block.shape[0], self.n_b), dtype=self.dtype)
        if not len(self.head_t):
            csr_times_columns(A_block.indptr, A_block.indices, A_block.data, *self.tail, out)
            return out
        head = np.empty((A_block.shape[0], self.head_t.shape[0]), dtype=self.dtype)
        csr_selected_columns(A_block.indptr, A_block.indices, A_block.data, self.slots, head)
        np.matmul(head, self.head_t, out=out)
        add_csr_times_columns(A_block.indptr, A_block.indices, A_block.data, *self.tail, out)
        return out


def _product_operands(A, B):
    """Dense or sparse operands for a blocked product of ``A`` against a small ``B`` (support vectors, an active
    set): a sparse ``B`` is made dense when that costs at most 64 MiB, which keeps sparse ``A`` sparse and makes
    the product one sparse x dense call (against sparse ``A`` it stays sparse here, in CSR with duplicates summed:
    :class:`RightOperand` writes its dense transposed copy from the nonzeros); when ``A`` has fewer than
    :data:`FEW_ROWS` rows, and fewer than a sparse ``B``, or ``B`` is too large, ``A`` is made dense instead (if it
    has fewer rows than ``B``)."""
    side = densified_side(A, B)
    if side == "A":
        # Few rows against more sparse ones (CVM's candidates against a core set): densify the few and
        # keep B sparse, so a product reads B's nonzeros once instead of copying B dense (and
        # transposed) per call (CVM on w8a: ~12 -> ~3 ms per round of 59 candidates x 3,800 rows).
        # Thousands of rows (a core-set round's candidates) are better as sparse rows against B made dense
        # once: a9a's scoring (about 5,000 candidates a round against 20,000 support vectors) took 1.6-1.7 s of
        # a fit the first way, 1.1 s this way.
        A = A.toarray() if sp.issparse(A) else A
    elif side == "B":
        B = canonical_csr(B) if sp.issparse(A) else B.toarray()
    return A, B


def densified_side(A, B) -> str | None:
    """Which operand :func:`_product_operands` makes dense for a sparse ``B``: 'A' (few rows of ``A``, or ``B``
    too large), 'B', or None (neither; also for a dense ``B``)."""
    if not sp.issparse(B):
        return None
    few_rows = A.shape[0] < min(B.shape[0], FEW_ROWS)
    if (few_rows or not dense_copy_fits(B)) and A.shape[0] < B.shape[0] and dense_copy_fits(A):
        return "A"
    return "B" if dense_copy_fits(B) else None


def dense_copy_fits(X, itemsize: int = 8) -> bool:
    """Whether a dense copy of ``X`` with ``itemsize``-byte entries takes at most :data:`DENSE_OPERAND_BYTES`."""
    return X.shape[0] * X.shape[1] * itemsize <= DENSE_OPERAND_BYTES


def kernel_map(A, B, spec: KernelSpec, reduce: Callable[[np.ndarray], np.ndarray], n_out: int, norms_a=None,
               norms_b=None, n_threads: int | None = None) -> np.ndarray:
    """``reduce(k(A_block, B))`` for cache-sized row blocks of dense ``A``, stacked: an ``(n_A, n_out)`` array.

    For reductions that are not one product with a coefficient matrix (:func:`kernel_product`), e.g. the
    one-vs-one decisions, which multiply each class's columns of the block by that class's own coefficients.
    ``reduce`` must act on each row alone and be linear in it (``reduce(D K) = D reduce(K)`` for a diagonal
    ``D``), as products with coefficients are: for RBF the block may come scaled by ``exp(g |a|^2)`` per row, which
    is taken off its output (:func:`_rbf_exponent_operands`).  Blocks and threads as :func:`kernel_product`.
    """
    n_a = A.shape[0]
    out = np.empty((n_a, n_out))
    if n_a == 0:
        return out
    A, B = _product_operands(A, B)
    if spec.name == "rbf":
        norms_a = squared_norms(A) if norms_a is None else norms_a
        norms_b = squared_norms(B) if norms_b is None else norms_b
    factorizable = (spec.name == "rbf" and isinstance(A, np.ndarray) and isinstance(B, np.ndarray)
                    and rbf_factorizable(spec, 0.0, norms_b))
    if factorizable:
        B_extended = _rbf_exponent_operands(B, norms_b, spec.gamma)
    rows = product_block_rows(B.shape[0])
    right = RightOperand(B, A, np.float64)

    def one_block(start: int) -> None:
        stop = min(start + rows, n_a)
        if factorizable and rbf_factorizable(spec, norms_a[start:stop], norms_b):
            # The extra column costs a pass over A's block: less than the four passes over the kernel block it
            # saves while A has fewer features than B has rows (support vectors).  The GEMM is float64 even for
            # float32 input (more exact than the direct form, which multiplies in the input's precision).
            A_extended = np.empty((stop - start, A.shape[1] + 1))
            A_extended[:, :-1] = A[start:stop]
            A_extended[:, -1] = 1.0
            block = np.exp(A_extended @ B_extended.T)  # k(a, b) exp(g |a|^2): one GEMM and one exp
            np.multiply(reduce(block), np.exp(-spec.gamma * norms_a[start:stop])[:, None], out=out[start:stop])
            return
        block = apply_kernel_to_dots(right.products(A[start:stop]), spec,
                                     None if norms_a is None else norms_a[start:stop], norms_b)
        out[start:stop] = reduce(block)

    run_row_blocks(n_a, rows, one_block, n_threads)
    return out


def rbf_factor_limit(precision: type) -> float:
    """The exponent bound of :func:`rbf_factorizable` for blocks computed in ``precision``."""
    return RBF_FACTOR_LIMIT_FLOAT32 if precision == np.float32 else RBF_FACTOR_LIMIT


def rbf_factorizable(spec: KernelSpec, norms_a, norms_b, limit: float = RBF_FACTOR_LIMIT) -> bool:
    """Whether the RBF values of rows with squared norms ``norms_a`` against ``norms_b`` may be factorized as
    ``exp(-g|a|^2) exp(2g <a, b>) exp(-g|b|^2)``: every exponent then stays below ``limit`` (``2g <a, b>
    <= g (|a|^2 + |b|^2)``), far from overflow.  Decided per row block, so that a block's values do not depend on
    the other rows (a memory-mapped X, predicted block by block, gives the in-memory result bit for bit)."""
    return bool(spec.gamma * (np.max(norms_a, initial=0.0) + np.max(norms_b, initial=0.0)) < limit)


def _rbf_exponent_operands(B: np.ndarray, norms_b: np.ndarray, gamma: float) -> np.ndarray:
    """``[2 g B, -g |b|^2]``: against ``[a, 1]`` its products are ``2g <a, b> - g |b|^2 = -g |a - b|^2 + g |a|^2``,
    the RBF exponent up to a per-row term, so one GEMM and one ``exp`` give a block of kernel values scaled by
    ``exp(g |a|^2)`` per row, instead of four more passes over the block (:func:`kernel_product` folds
    ``exp(-g |b|^2)`` into its coefficients instead; a reduction of :func:`kernel_map` has none to fold into)."""
    extended = np.empty((B.shape[0], B.shape[1] + 1))
    extended[:, :-1] = B
    extended[:, :-1] *= 2.0 * gamma
    extended[:, -1] = -gamma * norms_b
    return extended


def run_row_blocks(n_rows: int, block_rows: int, one_block: Callable[[int], None], n_threads: int | None) -> None:
    """``one_block(start)`` for every block of ``block_rows`` rows, on ``n_threads`` threads (BLAS on one each):
    the calling thread and up to ``n_threads - 1`` helpers from a pool kept for the process.

    The blocks are handed out in order to whichever thread is free.  No block runs after the call returns: an
    error in a block stops the others from taking more, and helpers that have not started when the calling thread
    runs out of blocks are cancelled (so callers sharing the pool do not wait on each other's work).  In a pool
    thread (a block that itself runs blocks) they run in that thread: waiting there on the pool could wait for
    itself.
    """
    starts = range(0, n_rows, block_rows)
    n_threads = min(n_threads or default_kernel_threads(), len(starts))
    with single_threaded_blas():
        if n_threads <= 1 or getattr(_THREAD_SETTINGS, "in_kernel_pool", False):
            for start in starts:
                one_block(start)
        else:
            _run_blocks_with_helpers(starts, one_block, n_threads - 1)


def map_on_kernel_threads(function: Callable, items: Sequence, n_threads: int | None) -> list:
    """``[function(item) for item in items]``, in order, on up to ``n_threads`` threads as :func:`run_row_blocks`
    (the process's kernel pool, BLAS on one thread each)."""
    results: list = [None] * len(items)

    def one_item(k: int) -> None:
        results[k] = function(items[k])

    run_row_blocks(len(items), 1, one_item, n_threads)
    return results


def _run_blocks_with_helpers(starts: range, one_block: Callable[[int], None], n_helpers: int) -> None:
    pending = iter(starts)
    lock = threading.Lock()
    stop = threading.Event()  # an error (or the caller's interruption): no thread takes another block

    def take_blocks() -> None:
        while not stop.is_set():
            with lock:
                start = next(pending, None)
            if start is None:
                return
            try:
                one_block(start)
            except BaseException:
                stop.set()
                raise

    pool = _kernel_pool()
    helpers: list[Future] = []
    try:
        for _ in range(n_helpers):
            helpers.append(pool.submit(take_blocks))
        take_blocks()
    finally:
        stop.set()
        for helper in helpers:
            helper.cancel()
        wait(helpers)
    for helper in helpers:
        if not helper.cancelled() and helper.exception() is not None:
            raise helper.exception()


_KERNEL_POOL: ThreadPoolExecutor | None = None
_KERNEL_POOL_LOCK = threading.Lock()


def _mark_kernel_pool_thread() -> None:
    _THREAD_SETTINGS.in_kernel_pool = True


def _kernel_pool() -> ThreadPoolExecutor:
    """The process's helper threads for :func:`run_row_blocks`: one fewer than :func:`process_kernel_threads`
    (the calling thread works too), started as work arrives.

    Kept between calls: starting threads for every call cost 0.3 ms each time, and a core-set fit makes
    hundreds of calls (the 1M checkerboard about 500).  Callers that each hold a share of the cores
    (:func:`limit_kernel_threads`) submit at most that share, so together they stay within the cores.  Dropped
    in a forked child, which has none of its parent's threads.
    """
    global _KERNEL_POOL
    with _KERNEL_POOL_LOCK:
        if _KERNEL_POOL is None:
            _KERNEL_POOL = ThreadPoolExecutor(max(1, process_kernel_threads() - 1),
                                              thread_name_prefix="coresvm-kernel",
                                              initializer=_mark_kernel_pool_thread)
        return _KERNEL_POOL


def _forget_kernel_pool() -> None:
    global _KERNEL_POOL, _KERNEL_POOL_LOCK
    _KERNEL_POOL, _KERNEL_POOL_LOCK = None, threading.Lock()  # the lock too: a parent's thread may have held it


os.register_at_fork(after_in_child=_forget_kernel_pool)


_THREAD_SETTINGS = threading.local()
_CPU_COUNT = os.cpu_count() or 1
# The variable a parent pool sets in its worker processes: joblib's loky backend to ``cores // n_jobs`` (with
# NUMBA_NUM_THREADS and the BLAS variables), Dask's nanny to 1 (``distributed.nanny.pre-spawn-environ``, without
# NUMBA_NUM_THREADS).
THREAD_LIMIT_VARIABLE = "OMP_NUM_THREADS"


def thread_limit_from_environ(environ: Mapping[str, str]) -> int | None:
    """The thread limit ``environ`` sets for this process: ``OMP_NUM_THREADS`` when it is a positive integer
    (the first of a comma-separated list of nesting levels, as OpenMP reads it), else None."""
    first = environ.get(THREAD_LIMIT_VARIABLE, "").split(",")[0].strip()
    return int(first) if first.isdigit() and int(first) > 0 else None


@functools.cache
def process_kernel_threads() -> int:
    """Threads coresvm's kernel products and Numba loops use in this process when nothing else is set.

    All cores, or fewer when the process was started with a limit: ``OMP_NUM_THREADS`` (which joblib's
    process workers and Dask's worker processes get, see :data:`THREAD_LIMIT_VARIABLE`) or
    ``NUMBA_NUM_THREADS`` (Numba's own pool size).  Read from the environment once, at the first call:
    this is asked for every kernel product.  The environment and not threadpoolctl's view of the BLAS pools
    because those are what coresvm itself holds to one thread around its kernel blocks, and reading them
    scans the loaded libraries (about 10 ms).
    """
    inherited = thread_limit_from_environ(os.environ) or _CPU_COUNT
    return max(1, min(_CPU_COUNT, inherited, numba.config.NUMBA_NUM_THREADS))


def default_kernel_threads() -> int:
    """Threads ``kernel_product`` uses when not told: :func:`process_kernel_threads`, unless this thread set a
    limit.

    Parallel one-vs-one training runs one sub-problem per worker thread; each
    worker sets its limit to 1 (:func:`limit_kernel_threads`) so the workers do
    not each start a pool of ``cpu_count`` threads.
    """
    return getattr(_THREAD_SETTINGS, "n_threads", None) or process_kernel_threads()


def parallel_loop_threads() -> int:
    """Threads a solver's Numba parallel loop may use on this thread: Numba's count for it (which
    :func:`limit_kernel_threads` sets), or 1 unless Numba runs its parallel loops on TBB.

    Only TBB's threading layer runs parallel loops safely from several threads at once and in forked children:
    the workqueue layer aborts the process when two threads run one at once, and GNU OpenMP's aborts a child forked
    after one ran (Numba's threading-layer documentation).  ``tbb`` is a dependency where PyPI has it."""
    return numba.get_num_threads() if _tbb_threading_layer() else 1


# TBB's library as Numba loads it by name, and where the tbb wheel puts it in this environment: in a virtual
# environment that is not on the interpreter's library path, and Numba then fell back to OpenMP.
_TBB_LIBRARY = {"win32": "tbb12.dll", "darwin": "libtbb.12.dylib"}.get(sys.platform, "libtbb.so.12")
_TBB_PLACES = ("", os.path.join(sys.prefix, "lib"), os.path.join(sys.prefix, "Library", "bin"))


@functools.cache
def _tbb_threading_layer() -> bool:
    """Whether Numba's threading layer is TBB.  The library is loaded first (a library loaded by its path serves
    later loads by its name), and the layer only when it was found, so that no other layer starts in a process that
    may fork."""
    for place in _TBB_PLACES:
        try:
            ctypes.CDLL(os.path.join(place, _TBB_LIBRARY) if place else _TBB_LIBRARY)
            break
        except OSError:
            continue
    else:
        return False
    _one_parallel_step(np.zeros(1))
    return numba.threading_layer() == "tbb"


@njit(parallel=True, cache=True)
def _one_parallel_step(values):
    for i in numba.prange(values.shape[0]):
        values[i] += 1.0


@contextmanager
def limit_kernel_threads(n_threads: int):
    """Within the context, ``kernel_product`` calls and coresvm's parallel Numba loops of *this thread* use at
    most ``n_threads`` threads (Numba's count is per thread: other threads keep theirs)."""
    previous = getattr(_THREAD_SETTINGS, "n_threads", None)
    _THREAD_SETTINGS.n_threads = int(n_threads)
    try:
        with _numba_threads(n_threads):
            yield
    finally:
        _THREAD_SETTINGS.n_threads = previous


def within_process_thread_limit(fit: Callable) -> Callable:
    """Decorate an estimator's ``fit``: its Numba loops use at most :func:`process_kernel_threads` threads
    (kernel products follow that count already, through :func:`default_kernel_threads`), and BLAS one thread.

    A fit in a joblib or Dask worker process then uses the threads the parent pool gave the process, not
    every core.  A limit the calling thread set (:func:`limit_kernel_threads`: CoreSVC's ``n_jobs`` workers,
    PatternSearchCV's jobs) wins, and so does a lower Numba count the caller set.  A fit's parallel work runs on
    the kernel pool and Numba's threads, never in BLAS: after each multi-threaded call (any dot product past
    10,000 entries, e.g. over a large core set) OpenBLAS's idle threads spin for a while and take cores from
    those threads (make_moons at 120,000 rows, the same iterates: scoring 4.8 -> 3.3 s of a 17.3 -> 14.8 s fit).
    A plain function, not a context decorator: its frame is coresvm's, so warnings still point at the user's call.
    """

    @functools.wraps(fit)
    def limited(*args, **kwargs):
        n_threads = _inherited_numba_threads()
        with single_threaded_blas():
            if n_threads is None:
                return fit(*args, **kwargs)
            with _numba_threads(n_threads):
                return fit(*args, **kwargs)

    return limited


def _inherited_numba_threads() -> int | None:
    """Numba threads for a fit on this thread under the process's limit; None: leave Numba as it is (no limit
    below the cores, or this thread set its own; not asking Numba, which starts its pool)."""
    limit = process_kernel_threads()
    if getattr(_THREAD_SETTINGS, "n_threads", None) is not None or limit >= _CPU_COUNT:
        return None
    return min(limit, numba.get_num_threads())


@contextmanager
def _numba_threads(n_threads: int):
    """This thread's Numba parallel loops on ``n_threads`` threads (at most Numba's pool), restored after."""
    previous = numba.get_num_threads()
    numba.set_num_threads(max(1, min(int(n_threads), numba.config.NUMBA_NUM_THREADS)))
    try:
        yield
    finally:
        numba.set_num_threads(previous)


class ProcessWideLimit:
    """A thread limit on the process's BLAS/OpenMP pools, held while any holder is inside :meth:`held`.

    The pools' limits are process-wide, so fits in threads (joblib's threading backend, one-vs-one workers) share
    one: the first holder in sets it and the last one out restores what it found.  Each holder restoring what it
    found would race: one entering while another holds the limit finds the limit, and restoring it last left BLAS
    on one thread after the fits.  While held, the first holder's limit applies.  The controller (which scans the
    loaded libraries, 10-40 ms) is built once per process.
    """

    _controller: ThreadpoolController | None = None

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders = 0
        self._limiter = None

    @contextmanager
    def held(self, limits: int, user_api: str | None = None):
        """Hold the pools of ``user_api`` ("blas", "openmp"; None: both) to ``limits`` threads within the context."""
        with self._lock:
            if self._holders == 0:
                if ProcessWideLimit._controller is None:
                    ProcessWideLimit._controller = ThreadpoolController()
                self._limiter = ProcessWideLimit._controller.limit(limits=limits, user_api=user_api)
            self._holders += 1
        try:
            yield
        finally:
            with self._lock:
                self._holders -= 1
                if self._holders == 0:
                    self._limiter.restore_original_limits()
                    self._limiter = None


_ONE_BLAS_THREAD = ProcessWideLimit()


def single_threaded_blas():
    """A context that holds BLAS to one thread (:class:`ProcessWideLimit`: shared by the threads that enter it)."""
    return _ONE_BLAS_THREAD.held(1, "blas")


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
        X = canonical_csr(X)  # also sorted: the compiled loops assume one entry per (row, column)
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
