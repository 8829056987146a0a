"""The simplex quadratic program every solver in coresvm works on.

All five source papers reduce the L2-SVM to (ARCHITECTURE.md section 1)::

    minimize  f(a) = a' Q a - lam * a' diag(Q)    s.t.  a >= 0,  sum(a) = 1

with the *extended kernel* ``Q_ij = y_i y_j (k(x_i, x_j) + bias) + delta_ij / C_i``
(Frandi et al. 2013 eq. 18).  The joint ("all-at-once") multiclass machine (Strack 2013
sec. 5.4) replaces ``y_i y_j`` by the label inner product ``L[c_i, c_j]`` of
simplex label vectors (1 for the same class, ``-1/(K-1)`` otherwise).
``bias`` is 1 when the model has a bias term (``b = sum a_i y_i``
is folded into the kernel) and 0 for the no-bias machine.  ``C_i = C * w_i``
carries sample and class weights.  ``lam = 0`` is the minimal-norm problem
(FW family, MNSVM); ``lam = 1`` the minimum enclosing ball (CVM, BVM,
SphereSVM).  For RBF, ``diag(Q)`` is constant and both have the same solution.

The L2-SVM primal behind it (Frandi et al. 2013 eq. 7) is::

    minimize  1/2 (||w||^2 + b^2 + C sum_i xi_i^2) - rho
    s.t.      y_i (w' phi(x_i) + b) >= rho - xi_i

and at the optimum ``w = sum a_i y_i phi(x_i)``, ``b = sum a_i y_i``,
``xi_i = a_i / C_i`` and ``rho = a' Q a``.

This module holds the compiled evaluation of ``Q`` (columns and rows, never
the matrix) and NumPy reference functions (objective, gradient, duality gap,
the dense ``Q`` of a *small* problem) used by tests and diagnostics.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numba import njit, prange, types
from numba.extending import overload

from .data import MappedRows, is_memory_mapped
from .kernels import (
    KernelSpec,
    as_solver_data,
    dot_with_dense,
    kernel_block,
    kernel_diagonal,
    kernel_from_dot,
    kernel_product,
    n_features,
    row_to_dense,
    squared_norms,
)

PARALLEL_MIN_WORK = 200_000  # kernel values below which threads cost more than they save
# The core-set solvers read CSR data as a dense array, and dense data as CSR, whichever makes their row-block
# products faster (a row block against the columns, made dense and transposed once: kernels.RightOperand); a dense
# copy must fit DENSE_DATA_BYTES.  A sparse product (kernels.sparse_times_dense) costs about one pass over a tile
# of the right operand's rows per nonzero; a dense one (BLAS) costs d multiply-adds at full speed.  Products of
# 128 rows against 20,000, one thread (benchmarks/results/sparse_products.md): sparse stayed faster up to density
# 0.5 at d = 30 (float32) and broke even between 0.3 and 0.5 at d = 123 and 300, near 0.3 at d = 1,000 (float64:
# about 0.05 lower).  The rule DENSE_BREAK_EVEN / (1 + d / DENSE_FEATURES_SCALE) gives 0.39, 0.38, 0.35 and 0.27.
# Dense data of few features stays dense whatever its density: the fused loop (kernels.fused_rbf_sums) takes it.
DENSE_BREAK_EVEN = 0.4
DENSE_FEATURES_SCALE = 2000.0
SPARSE_MIN_FEATURES = 16
DENSE_DATA_BYTES = 256 * 2**20
ZERO_COLUMN_SAMPLE = 10_000  # rows read to find the mostly-zero columns (centering_shift)


def dense_break_even(n_features: int) -> float:
    """The density above which dense row-block products beat sparse ones (see :data:`DENSE_BREAK_EVEN`)."""
    return DENSE_BREAK_EVEN / (1.0 + n_features / DENSE_FEATURES_SCALE)


def worth_densifying(X) -> bool:
    """Whether the core-set solvers should read CSR ``X`` as a dense array: dense enough
    (:func:`dense_break_even`) and a dense copy of at most :data:`DENSE_DATA_BYTES`."""
    size = X.shape[0] * X.shape[1]
    return size * 8 <= DENSE_DATA_BYTES and X.nnz >= dense_break_even(X.shape[1]) * size


def sparse_layout(X) -> sp.csr_matrix | None:
    """A CSR copy of ``X`` when the core-set solvers should read a dense in-memory ``X`` that way, else None: at
    least :data:`SPARSE_MIN_FEATURES` features and fewer nonzeros than :func:`dense_break_even` (KDD99-10%: 118
    features, 11% nonzero, one-hot columns; its scoring took 1.27 ns per kernel value dense and 0.43 as CSR).
    Counted and copied by compiled row passes (SciPy's conversion, through coordinates, took 0.22 s on KDD99)."""
    if type(X) is not np.ndarray or X.ndim != 2 or X.dtype not in (np.float32, np.float64):
        return None
    if X.shape[1] < SPARSE_MIN_FEATURES or X.size == 0 or not X.flags.c_contiguous:
        return None
    counts = np.empty(X.shape[0], dtype=np.int64)
    _count_row_nonzeros(X, counts)
    nnz = int(counts.sum())
    if nnz >= dense_break_even(X.shape[1]) * X.size:
        return None
    index_dtype = np.int32 if max(nnz, X.shape[1]) < 2**31 else np.int64
    indptr = np.zeros(X.shape[0] + 1, dtype=index_dtype)
    np.cumsum(counts, out=indptr[1:])
    indices, data = np.empty(nnz, dtype=index_dtype), np.empty(nnz, dtype=X.dtype)
    _fill_csr(X, indptr, indices, data)
    return sp.csr_matrix((data, indices, indptr), shape=X.shape)


@njit(cache=True, nogil=True)
def _count_row_nonzeros(X, counts):
    """``counts[i]`` = the nonzeros of row ``i`` (the CSR copy's row lengths)."""
    for i in range(X.shape[0]):
        row = X[i]
        c = 0
        for j in range(row.shape[0]):
            c += row[j] != 0
        counts[i] = c


@njit(cache=True, nogil=True)
def _fill_csr(X, indptr, indices, data):
    """The nonzeros of each row of ``X`` and their columns, in column order, at ``indptr[i]`` on."""
    for i in range(X.shape[0]):
        row = X[i]
        p = indptr[i]
        for j in range(row.shape[0]):
            if row[j] != 0:
                indices[p] = j
                data[p] = row[j]
                p += 1


def centering_shift(X, kernel: KernelSpec) -> np.ndarray | None:
    """The mean of ``X`` when the solvers should work on ``X`` minus it, else None.

    An RBF kernel depends only on ``a - b``, so every kernel value is the same in exact arithmetic, but kernel
    blocks compute ``|a - b|^2`` as ``|a|^2 + |b|^2 - 2 <a, b>``, whose rounding grows with the norms; in float32
    (the core set's Gram, the dense solver's cached rows) that costs digits.  On the checkerboard (``[0, 4]^2``;
    4,000,000 points at C = 10,240) a face of 3,000 support vectors had a Gram error of norm 5.9e-4, six times its
    smallest eigenvalue ``1/C``; their Newton steps failed and fits took 76-118 s or hit ``max_iter``.  Centered,
    the error was 9e-5 and the fits took 6-8 s.  Done for in-memory dense rows whose mean is farther from the
    origin than their spread (the rounding then at least halves) and whose centered copy fits
    :data:`DENSE_DATA_BYTES`, for every solver: the copy is one per problem (one per one-vs-one pair, of its rows).

    Columns that are mostly zero (one-hot blocks; judged on about :data:`ZERO_COLUMN_SAMPLE` rows) keep their
    zeros: centered, they would be dense, and computed kernel rows skip zero features
    (:func:`~coresvm.kernels.rbf_row_values_over_nonzeros`).  Centering such a column would at most halve its
    mean square (nonzero in a share ``p <= 1/2`` of the rows, its squared mean is ``p^2 E[v]^2 <= p E[v^2]``);
    the condition above is then met by the other columns' shift alone.
    """
    if kernel.name != "rbf" or type(X) is not np.ndarray or X.dtype not in (np.float32, np.float64):
        return None
    if X.nbytes > DENSE_DATA_BYTES or X.ndim != 2 or X.shape[0] < 2:
        return None
    mean = X.mean(axis=0)
    total = float(np.mean(np.einsum("ij,ij->i", X, X)))  # the mean squared norm: the spread plus |mean|^2
    if 2.0 * float(mean @ mean) <= total:
        return None
    sample = X[:: max(1, X.shape[0] // ZERO_COLUMN_SAMPLE)]
    shift = np.where(2 * np.count_nonzero(sample, axis=0) > sample.shape[0], mean, 0.0)
    return shift if 2.0 * float(shift @ shift) > total else None  # centering by shift leaves total - |shift|^2


@dataclass
class SimplexProblem:
    """A binary (or one-class) extended-kernel problem, ready for a solver.

    Parameters
    ----------
    X : array or CSR matrix, shape (m, d)
        Held as given, except dense in-memory rows far from the origin under the RBF kernel, which are
        replaced by a centered copy (:func:`centering_shift`), and, for the core-set solvers (``compact``), CSR
        data dense enough and dense data sparse enough, which are read in the other layout
        (:func:`worth_densifying`, :func:`sparse_layout`).
    y : array of +1/-1 (all +1 for one-class), shape (m,)
    C : array, shape (m,)
        Per-sample penalty ``C_i`` (> 0).
    kernel : KernelSpec
    bias : bool
        Whether the model has the implicit bias ``b = sum a_i y_i``.
    lam : float
        0 for the minimal-norm problem, 1 for the MEB problem.
    label_gram : array of shape (K, K) or None
        The joint multiclass problem: ``y`` then holds class indices ``0..K-1``
        and ``Q_ij = label_gram[y_i, y_j] (k_ij + bias) + delta_ij / C_i``
        (see :func:`simplex_label_gram`).  The core-set solvers, SphereSVM and
        MNSVM take it (:func:`~coresvm.solvers.driver.check_joint_support`).
    compact : bool
        Keep no float64 array of length m (the core-set solvers, which read
        only sampled rows and the core set): ``C`` may be a stride-0 broadcast
        of one value, ``y`` stays in its given dtype (e.g. int8 signs), and
        norms, ``1/C`` and ``diag(Q)`` are computed for the rows asked for
        (``norms_of``, ``inv_c_of``, ``diag_of``, ``signs_of``).  The full
        arrays are still available, materialized on first use.
    """

    X: object
    y: np.ndarray
    C: np.ndarray
    kernel: KernelSpec
    bias: bool = True
    lam: float = 0.0
    label_gram: np.ndarray | None = None
    compact: bool = False

    def __post_init__(self):
        if is_memory_mapped(self.X) and not isinstance(self.X, MappedRows):
            self.X = MappedRows(self.X)  # row reads that keep the map's resident pages bounded
        if self.compact and sp.issparse(self.X) and worth_densifying(self.X):
            self.X = self.X.toarray()
        shift = centering_shift(self.X, self.kernel)
        if shift is not None:
            self.X = self.X - shift  # before the CSR copy: centered rows are dense, and need the centering
        elif self.compact and (sparse_copy := sparse_layout(self.X)) is not None:
            self.X = sparse_copy
        if not self.compact or self.label_gram is not None:
            self.y = np.ascontiguousarray(self.y, dtype=np.float64)
        if self.label_gram is not None:
            self.label_gram = np.ascontiguousarray(self.label_gram, dtype=np.float64)
            self.class_index = self.y.astype(np.int64)
            n_classes = self.label_gram.shape[0]
            if self.label_gram.shape != (n_classes, n_classes) or not np.array_equal(self.class_index, self.y):
                raise ValueError("label_gram must be square and y must hold class indices for the joint problem")
            if self.class_index.min() < 0 or self.class_index.max() >= n_classes:
                raise ValueError(f"class indices must lie in [0, {n_classes}) for a {n_classes}x{n_classes} label_gram")
        C = np.asarray(self.C, dtype=np.float64)
        # One C for every sample (no sample or class weights) is stored as a stride-0
        # broadcast: 1/C and, for RBF, the diagonal of Q are then single numbers.
        self._inv_c_value = 1.0 / C.flat[0] if is_constant_array(C) else None
        self._inv_c = None if self._inv_c_value is not None else np.ascontiguousarray(1.0 / C)
        self._norms = self._diag = self._data = None
        if not self.compact or sp.issparse(self.X):
            self._norms = squared_norms(self.X)
        if not self.compact:
            self._materialize()

    def _materialize(self) -> None:
        """The O(m) arrays the compiled engine and the gsvm family index directly."""
        self.y = np.ascontiguousarray(self.y, dtype=np.float64)
        for name in ("norms", "inv_c", "diag"):  # each property builds its array on first use
            getattr(self, name)

    # ---- per-point quantities ---------------------------------------------------
    # A compact problem (the core-set solvers: they read only sampled rows and the
    # core set) keeps no float64 array of length m: signs stay as given (int8), 1/C
    # and the RBF diagonal are scalars when constant, squared norms are computed
    # for the rows read.  The values equal the full arrays' entries bit for bit
    # (row-wise einsum; the same elementwise formulas).
    @property
    def data(self):
        """``X`` for the compiled loops (:func:`~coresvm.kernels.as_solver_data`), made on first use: the core-set
        solvers never read it, and for CSR it is a float64 / int64 copy."""
        if self._data is None:
            self._data = as_solver_data(self.X.array if isinstance(self.X, MappedRows) else self.X)
        return self._data

    @property
    def norms(self) -> np.ndarray:
        """Squared norms of every row (materialized on first use in a compact problem)."""
        if self._norms is None:
            self._norms = squared_norms(self.X)
        return self._norms

    @property
    def inv_c(self) -> np.ndarray:
        """``1 / C_i`` of every row (materialized on first use in a compact problem)."""
        if self._inv_c is None:
            self._inv_c = np.full(self.n_points, self._inv_c_value)
        return self._inv_c

    @property
    def diag(self) -> np.ndarray:
        """``Q_ii`` of every row (materialized on first use in a compact problem)."""
        if self._diag is None:
            self._diag = kernel_diagonal(self.X, self.kernel, self.norms) + self.bias_term + self.inv_c
        return self._diag

    def rows_of(self, rows):
        """``X[rows]``: for an integer index array and an in-memory array by ``np.take`` (60,000 random rows of the
        1M checkerboard: 0.2 ms against 1.0 ms by fancy indexing), else by the rows' own indexing (masks, CSR,
        memory maps)."""
        if type(self.X) is np.ndarray and isinstance(rows, np.ndarray) and rows.dtype.kind in "iu":
            return np.take(self.X, rows, axis=0)
        return self.X[rows]

    def signs_of(self, rows) -> np.ndarray:
        """``y_i`` (float64) of the rows ``rows``."""
        return np.asarray(self.y[rows], dtype=np.float64)

    def norms_of(self, rows) -> np.ndarray:
        """Squared norms of the rows ``rows``."""
        if self._norms is not None:
            return self._norms[rows]
        return squared_norms(self.rows_of(rows))

    def kept_norms_of(self, rows) -> np.ndarray | None:
        """Squared norms of the rows ``rows`` when the problem keeps every row's, else None: a kernel product
        given None computes them from the rows it reads, and only when its kernel needs them."""
        return self._norms[rows] if self._norms is not None else None

    def inv_c_of(self, rows) -> np.ndarray:
        """``1 / C_i`` of the rows ``rows``."""
        if self._inv_c is not None:
            return self._inv_c[rows]
        return np.full(len(rows), self._inv_c_value)

    def _constant_diag(self) -> float | None:
        """``Q_ii`` when it is one number for every row (RBF, ``k(x, x) = 1``, and one C), else None."""
        if self.kernel.name == "rbf" and self._inv_c is None:
            return (1.0 + self.bias_term) + self._inv_c_value
        return None

    def diag_of(self, rows) -> np.ndarray:
        """``Q_ii`` of the rows ``rows``."""
        if self._diag is not None:
            return self._diag[rows]
        if self.kernel.name == "rbf":  # k(x, x) = 1: the rows need not be read (a CSR row copy cost ~1 ms a call)
            return (1.0 + self.bias_term) + self.inv_c_of(rows)
        return (kernel_diagonal(self.rows_of(rows), self.kernel, self.norms_of(rows)) + self.bias_term
                + self.inv_c_of(rows))

    def median_C(self) -> float:
        """The median of ``C_i`` (as ``median(1 / inv_c)``), without an O(m) array when C is constant."""
        if self._inv_c is None:
            return float(1.0 / self._inv_c_value)
        return float(np.median(1.0 / self._inv_c))

    def median_diag(self) -> float:
        """The median of ``Q_ii``, without an O(m) array when it is constant (RBF, one C)."""
        if self._diag is None and (constant := self._constant_diag()) is not None:
            return float(constant)
        return float(np.median(self.diag))

    @property
    def bias_term(self) -> float:
        return 1.0 if self.bias else 0.0

    @property
    def n_points(self) -> int:
        return self.X.shape[0]

    @property
    def is_joint(self) -> bool:
        """Whether this is the joint multiclass problem (label Gram instead of ``y_i y_j``)."""
        return self.label_gram is not None

    def label_products(self, rows_a, rows_b) -> np.ndarray:
        """The label factor of ``Q[rows_a][:, rows_b]``: ``y_a y_b'`` or ``L[c_a][:, c_b]``."""
        if self.is_joint:
            return self.label_gram[np.ix_(self.class_index[rows_a], self.class_index[rows_b])]
        return np.outer(self.y[rows_a], self.y[rows_b])

    @property
    def labels(self) -> np.ndarray:
        """The labels the compiled evaluators multiply (:func:`label_product`).

        Binary and one-class problems: the signs ``y_i``, shape (m,).  The joint problem: the label
        vectors ``y_{c_i}``, shape (m, K), rows of a factor ``V`` of the label Gram (``V V' = L``,
        :func:`label_vectors`), so that ``y_{c_i} . y_{c_j} = L[c_i, c_j]`` (Strack 2013, eq. 5.16).
        """
        if not self.is_joint:
            return self.y
        if getattr(self, "_label_rows", None) is None:
            self._label_rows = np.ascontiguousarray(label_vectors(self.label_gram)[self.class_index])
        return self._label_rows

    def kernel_args(self):
        """The positional arguments the compiled evaluators take.

        The seventh, ``y``, is :attr:`labels`: the signs, or the joint problem's label vectors.  Which
        solvers take the joint problem is decided by the driver
        (:func:`~coresvm.solvers.driver.run_engine`).
        """
        self._materialize()
        k = self.kernel
        return (
            self.data,
            self.norms,
            np.int64(k.code),
            float(k.gamma),
            float(k.coef0),
            float(k.degree),
            self.labels,
            self.inv_c,
            self.bias_term,
        )

    # ---- NumPy references (small problems only) -------------------------------
    def dense_Q(self) -> np.ndarray:
        """The full extended kernel matrix.  O(m^2) memory: tests/diagnostics only."""
        if self.n_points > 5000:
            raise ValueError("dense_Q is for small problems (m <= 5000) only")
        K = kernel_block(self.X, self.X, self.kernel, self.norms, self.norms)
        every = np.arange(self.n_points)
        return self.label_products(every, every) * (K + self.bias_term) + np.diag(self.inv_c)

    def objective(self, alpha: np.ndarray, Q: np.ndarray | None = None) -> float:
        Q = self.dense_Q() if Q is None else Q
        return float(alpha @ Q @ alpha - self.lam * alpha @ np.diag(Q))

    def duality_gap(self, alpha: np.ndarray, Q: np.ndarray | None = None) -> float:
        """Frank-Wolfe duality gap ``max_u (a - u)' grad f(a)`` over the simplex.

        It bounds ``f(a) - f*`` from above (Frandi et al. 2015 eq. 3).
        """
        Q = self.dense_Q() if Q is None else Q
        grad = 2.0 * Q @ alpha - self.lam * np.diag(Q)
        return float(alpha @ grad - grad.min())


def is_constant_array(values: np.ndarray) -> bool:
    """Whether ``values`` is a stride-0 broadcast of one number (``np.broadcast_to``): one value, no memory."""
    return values.ndim == 1 and values.shape[0] > 0 and values.strides[0] == 0


def take_rows(values: np.ndarray, rows) -> np.ndarray:
    """``values[rows]``, keeping a stride-0 broadcast a broadcast (indexing one would copy it)."""
    if is_constant_array(values):
        return np.broadcast_to(values[:1], (len(rows),))
    return values[rows]


def simplex_label_gram(n_classes: int) -> np.ndarray:
    """Inner products of the ``n_classes`` label vectors at the vertices of a regular simplex.

    Strack 2013 sec. 5.4 (after Asharaf et al.): unit vectors in R^(K-1) with
    ``y_s . y_t = 1`` for ``s == t`` and ``-1/(K-1)`` otherwise.  For K = 2 they
    are the labels +1 / -1, so the joint problem is the binary one.
    """
    if n_classes < 2:
        raise ValueError(f"the joint problem needs at least 2 classes; got {n_classes}")
    off_diagonal = -1.0 / (n_classes - 1)
    return np.full((n_classes, n_classes), off_diagonal) + (1.0 - off_diagonal) * np.eye(n_classes)


def label_vectors(label_gram: np.ndarray) -> np.ndarray:
    """Vectors ``V`` (one row per class) with ``V V' = label_gram``, from its eigendecomposition.

    For :func:`simplex_label_gram` these are the vertices of a regular simplex (Strack 2013 sec. 5.4.3),
    written in K coordinates (they span K - 1 dimensions).
    """
    values, vectors = np.linalg.eigh(np.asarray(label_gram, dtype=np.float64))
    if values.min() < -1e-12 * max(abs(values).max(), 1.0):
        raise ValueError("label_gram must be positive semidefinite (the Gram matrix of label vectors)")
    return vectors * np.sqrt(np.clip(values, 0.0, None))


# --------------------------------------------------------------------------
# Compiled evaluation of Q
# --------------------------------------------------------------------------


def label_product(labels, a, b):  # pragma: no cover - numba overload
    """``y_a . y_b``: the product of two signs, or the inner product of two label vectors (compiled only)."""


@overload(label_product, inline="always")
def _label_product(labels, a, b):
    if isinstance(labels, types.Array) and labels.ndim == 2:  # the joint problem's label vectors (m, K)

        def vectors_impl(labels, a, b):
            acc = 0.0
            for t in range(labels.shape[1]):
                acc += labels[a, t] * labels[b, t]
            return acc

        return vectors_impl
    return lambda labels, a, b: labels[a] * labels[b]


@njit(inline="always", cache=True)
def extended_value(kind, dot, norm_a, norm_b, gamma, coef0, degree, label, bias, same, inv_c_a):
    """``Q_ab`` from the inner product of ``x_a`` and ``x_b`` and the label product ``label = y_a . y_b``
    (Frandi et al. 2013 eq. 18; Strack 2013 eq. 5.16 for label vectors)."""
    value = label * (kernel_from_dot(kind, dot, norm_a, norm_b, gamma, coef0, degree) + bias)
    if same:
        value += inv_c_a
    return value


@njit(parallel=True, cache=True)
def _extended_column_parallel(data, norms, kind, gamma, coef0, degree, y, inv_c, bias, point, x_point, out):
    norm_p = norms[point]
    for r in prange(out.shape[0]):
        dot = dot_with_dense(data, r, x_point)
        out[r] = label_product(y, point, r) * (kernel_from_dot(kind, dot, norm_p, norms[r], gamma, coef0, degree)
                                               + bias)


@njit(cache=True)
def extended_column(data, norms, kind, gamma, coef0, degree, y, inv_c, bias, point, out):
    """``out[:] = Q[:, point]`` over all m points (parallel over rows when m is large)."""
    x_point = np.empty(n_features(data))
    row_to_dense(data, point, x_point)
    if out.shape[0] >= PARALLEL_MIN_WORK // 20:
        _extended_column_parallel(data, norms, kind, gamma, coef0, degree, y, inv_c, bias, point, x_point, out)
    else:
        norm_p = norms[point]
        for r in range(out.shape[0]):
            dot = dot_with_dense(data, r, x_point)
            out[r] = label_product(y, point, r) * (kernel_from_dot(kind, dot, norm_p, norms[r], gamma, coef0,
                                                                   degree) + bias)
    out[point] += inv_c[point]


@njit(cache=True)
def extended_row(data, norms, kind, gamma, coef0, degree, y, inv_c, bias, point, targets, n_targets, out):
    """``out[t] = Q[point, targets[t]]`` for ``t < n_targets``."""
    x_point = np.empty(n_features(data))
    row_to_dense(data, point, x_point)
    norm_p = norms[point]
    for t in range(n_targets):
        j = targets[t]
        dot = dot_with_dense(data, j, x_point)
        out[t] = extended_value(
            kind, dot, norm_p, norms[j], gamma, coef0, degree, label_product(y, point, j), bias, j == point,
            inv_c[point]
        )


@njit(cache=True)
def weighted_rows(data, norms, kind, gamma, coef0, degree, y, inv_c, bias, points, n_points, targets,
                  n_targets, weights, out):
    """``out[p] = sum_t Q[points[p], targets[t]] * weights[t]`` -- candidate gradients.

    This is the block "candidates x active set" of the randomized solvers;
    large blocks are processed in parallel over candidates.
    """
    if n_points * n_targets >= PARALLEL_MIN_WORK:
        _weighted_rows_parallel(data, norms, kind, gamma, coef0, degree, y, inv_c, bias, points, n_points,
                                targets, n_targets, weights, out)
        return
    row = np.empty(n_targets)
    for p in range(n_points):
        extended_row(data, norms, kind, gamma, coef0, degree, y, inv_c, bias, points[p], targets, n_targets, row)
        acc = 0.0
        for t in range(n_targets):
            acc += row[t] * weights[t]
        out[p] = acc


@njit(parallel=True, cache=True)
def _weighted_rows_parallel(data, norms, kind, gamma, coef0, degree, y, inv_c, bias, points, n_points, targets,
                            n_targets, weights, out):
    for p in prange(n_points):
        row = np.empty(n_targets)
        extended_row(data, norms, kind, gamma, coef0, degree, y, inv_c, bias, points[p], targets, n_targets, row)
        acc = 0.0
        for t in range(n_targets):
            acc += row[t] * weights[t]
        out[p] = acc


def kkt_bias(problem: SimplexProblem, support: np.ndarray, alpha: np.ndarray, w2: float) -> float:
    """The bias averaged from the KKT conditions over the SVs (Strack 2013 eq. 5.24).

    Every SV has ``g_i = ||c||^2``, i.e. ``y_i (f_i + b) + a_i / C_i = ||c||^2`` with
    ``f_i = sum_j a_j y_j k(x_i, x_j)``; so ``b = y_i (||c||^2 - a_i / C_i) - f_i``,
    averaged over the SVs.  At the optimum it equals ``sum_i a_i y_i``.
    """
    signs = problem.signs_of(support)
    signed = alpha * signs
    X_support = problem.rows_of(support)
    norms = problem.norms_of(support)
    f = kernel_product(X_support, X_support, problem.kernel, signed, norms, norms)
    return float(np.mean(signs * (w2 - alpha * problem.inv_c_of(support)) - f))
