"""What one CoreSVC fit hands to the next: the public warm-start protocol.

A fit of :class:`~coresvm.CoreSVC` ends with a dual solution per sub-problem (binary problem of the
one-vs-one or one-vs-rest decomposition): weights on the unit simplex over some training rows.  That
point is a feasible start for the same problem at any C, kernel parameter or set of rows, so the next
fit can start there instead of cold.  :class:`WarmStart` is that hand-over as one object:

* the solution: per sub-problem, the training rows and their weights (:attr:`WarmStart.rows`,
  :attr:`WarmStart.weights`, :attr:`WarmStart.offsets`);
* what the next fit checks before using it: the support vectors (indices, values and classes), the
  classes and the decomposition (:meth:`WarmStart.applies_to`);
* the point it was fitted at (:attr:`WarmStart.C`, :attr:`WarmStart.kernel`), which picks the start's
  shape (heavy support vectors only, or blended towards uniform weights: docs, warm starts);
* optionally memory kept for the next fit on the same data: kernel rows at the same kernel
  (:class:`KeptKernelRows`) and inner products ``<x_i, x_j>`` for any kernel (:class:`KeptInnerProducts`).

``CoreSVC.warm_start_state()`` returns it after a fit; ``CoreSVC.set_warm_start_state(state)`` makes the
next ``warm_start=True`` fit start from it.  :meth:`WarmStart.moved_to_rows` and
:meth:`WarmStart.averaged_with` derive starts for other training sets (``PatternSearchCV``: across
cross-validation folds, and the refit from the mean of the fold solutions).
:class:`SharedInnerProducts` are the inner products of all rows of a search, lent to one fit at a time
(``CoreSVC.lend_inner_products``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .data import is_memory_mapped, read_rows
from .kernels import KernelSpec, inner_products

__all__ = [
    "DOT_REUSE_MIN_FEATURES",
    "KeptInnerProducts",
    "KeptKernelRows",
    "SharedInnerProducts",
    "WarmStart",
    "all_inner_products",
    "same_matrix",
]

# A warm_start fit on the small-problem path keeps its working sets' inner products <x_i, x_j> for the next
# warm fit on the same X (solvers/dense.py) when X has at least this many features: reading a kept row costs
# about as much as computing 16 features' products (0.05-0.1 us vs 0.19 us per 77-point row of letter).
DOT_REUSE_MIN_FEATURES = 64


@dataclass(eq=False, repr=False)
class WarmStart:
    """The state one CoreSVC fit leaves for the next warm-started fit.

    Returned by ``CoreSVC.warm_start_state()`` after a fit and taken by
    ``CoreSVC.set_warm_start_state(state)``: the next fit with ``warm_start=True`` starts each
    sub-problem from its rows and weights here when :meth:`applies_to` holds for its data, and cold
    otherwise.  The arrays are the fitted model's own (no copy): treat them as read-only.

    Parameters
    ----------
    rows : ndarray of shape (n_kept,), int64
        Training rows with a weight, per sub-problem, concatenated: sub-problem ``k``'s are
        ``rows[offsets[k]:offsets[k + 1]]``, increasing.  Sub-problems are numbered as the fit
        decomposes the classes (one-vs-one pairs in LIBSVM's order, or one-vs-rest classes).
    weights : ndarray of shape (n_kept,), float64
        The dual weights of those rows; each sub-problem's sum to 1 (a point of the simplex).
    offsets : ndarray of shape (n_problems + 1,), int64
        Sub-problem boundaries in ``rows`` and ``weights``.
    support : ndarray of shape (n_SV,)
        The fitted ``support_``: indices of the support vectors in the training data.
    support_vectors : ndarray or CSR matrix of shape (n_SV, n_features)
        Their values: the next fit's ``X[support]`` must hold the same vectors.
    support_classes : ndarray of shape (n_SV,), int64
        Their class indices (positions in ``classes``): the next fit's labels must agree.
    classes : ndarray of shape (n_classes,)
        The fitted ``classes_``.
    multiclass : str
        The fitted decomposition (``'ovo'`` or ``'ovr'``).
    C : float or None
        The C the solution was fitted at (None: unknown, e.g. an old model file).
    kernel : KernelSpec or None
        The kernel it was fitted at (name, resolved gamma, coef0, degree).
    kernel_rows : KeptKernelRows or None, default=None
        Kernel rows of the last working sets, kept by a ``warm_start=True`` fit (at most ``cache_size``):
        a fit on the same ``X`` at the same kernel computes none of them; at another kernel their memory
        is reused.  One owner: the fit that starts from this state takes them.
    inner_products : KeptInnerProducts or None, default=None
        Inner products ``<x_i, x_j>`` of the last working sets (multiclass fits with at least
        ``DOT_REUSE_MIN_FEATURES`` features), for a fit on the same ``X`` at any C and kernel.

    Examples
    --------
    >>> from coresvm import CoreSVC
    >>> first = CoreSVC(C=1, warm_start=True).fit(X, y)                      # doctest: +SKIP
    >>> state = first.warm_start_state()                                     # doctest: +SKIP
    >>> nxt = CoreSVC(C=4, warm_start=True).set_warm_start_state(state)      # doctest: +SKIP
    >>> nxt.fit(X, y).warm_started_                                          # doctest: +SKIP
    True
    """

    rows: np.ndarray
    weights: np.ndarray
    offsets: np.ndarray
    support: np.ndarray
    support_vectors: np.ndarray | sp.csr_matrix
    support_classes: np.ndarray
    classes: np.ndarray
    multiclass: str
    C: float | None
    kernel: KernelSpec | None
    kernel_rows: KeptKernelRows | None = None
    inner_products: KeptInnerProducts | None = None

    def __repr__(self) -> str:
        kernel = "None" if self.kernel is None else f"{self.kernel.name}(gamma={self.kernel.gamma:g})"
        return (f"WarmStart(n_problems={self.n_problems}, n_weights={len(self.rows)}, n_support={len(self.support)}, "
                f"multiclass={self.multiclass!r}, C={self.C!r}, kernel={kernel}, kept_bytes={self.kept_bytes})")

    @property
    def n_problems(self) -> int:
        """The number of sub-problems."""
        return len(self.offsets) - 1

    def problem(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Sub-problem ``k``'s training rows and weights."""
        part = slice(self.offsets[k], self.offsets[k + 1])
        return self.rows[part], self.weights[part]

    @property
    def kept_bytes(self) -> int:
        """Bytes of the kept kernel rows (whole buffers), 0 without any."""
        return 0 if self.kernel_rows is None else self.kernel_rows.nbytes

    def applies_to(self, X, y_index: np.ndarray, classes: np.ndarray, multiclass: str) -> bool:
        """Whether a fit on ``X`` (class indices ``y_index`` into ``classes``) with ``multiclass`` can start here.

        Rule: the same classes and decomposition, and the support vectors are still rows ``support``
        of ``X`` (same values, same classes): change C, the weights or the kernel, or append rows.
        """
        if self.multiclass != multiclass or not _same_labels(self.classes, classes):
            return False
        rows, vectors = self.support, self.support_vectors
        if vectors.shape[1] != X.shape[1] or (len(rows) and rows.max() >= X.shape[0]):
            return False
        return bool(np.array_equal(y_index[rows], self.support_classes)) and _same_rows(read_rows(X, rows), vectors)

    def moved_to_rows(self, new_row_of: np.ndarray) -> WarmStart:
        """This solution on another training set's rows.

        ``new_row_of[i]`` is the row of the next ``X`` holding this fit's training row ``i``, or -1
        when it is gone (gsvm's support-vector reuse across cross-validation folds: fold k+1 starts
        from fold k's solution restricted to the rows both folds train on).  Dropping weights keeps
        the point on the simplex after rescaling to sum 1, which the solvers do (Strack 2013's
        problem has no box constraint, so that rescaling is the whole projection).  Kept kernel rows
        and inner products, of the old rows, are not carried over.

        Parameters
        ----------
        new_row_of : array-like of int, shape (n_old_rows,)
            New row of each old training row, -1 when gone.

        Returns
        -------
        WarmStart
        """
        new_row_of = np.asarray(new_row_of, dtype=np.int64)
        kept_sv = new_row_of[self.support] >= 0
        rows = new_row_of[self.rows]
        kept = rows >= 0
        return WarmStart(
            rows=rows[kept], weights=self.weights[kept],
            offsets=np.concatenate([[0], np.cumsum(kept)])[self.offsets].astype(np.int64),
            support=new_row_of[self.support][kept_sv],
            support_vectors=self.support_vectors[np.flatnonzero(kept_sv)],
            support_classes=self.support_classes[kept_sv],
            classes=self.classes, multiclass=self.multiclass, C=self.C, kernel=self.kernel,
        )

    def averaged_with(self, others: list[WarmStart | None]) -> WarmStart:
        """Per sub-problem, the mean of this solution's and ``others``'s weights, on the same training rows.

        E.g. cross-validation fold solutions at one point, each moved to all rows with
        :meth:`moved_to_rows`.  Each sums to 1 per sub-problem, so the mean does too: a point of the
        simplex, as any warm start.  Every row is in k - 1 of k folds, so the mean spreads the weight
        as the whole set's solution does; one fold's solution leaves a third of ijcnn1's rows without
        weight (the refit of a search at 5,000 rows, 3 folds, C 256, gamma 1: 23,440 pairwise steps
        from the mean, 49,266 from one fold, 39,276 cold).  The support vectors are the union, in row
        order; C and the kernel are this state's.

        Parameters
        ----------
        others : list of WarmStart or None
            The other solutions.

        Returns
        -------
        WarmStart
            ``self`` when any other is None or decomposes the classes differently.
        """
        states = [self, *others]
        if not all(state is not None and len(state.offsets) == len(self.offsets)
                   and _same_labels(state.classes, self.classes) for state in states):
            return self
        rows, weights, offsets = [], [], [0]
        for k in range(self.n_problems):
            parts = [(state, slice(state.offsets[k], state.offsets[k + 1])) for state in states]
            unique, where = np.unique(np.concatenate([state.rows[part] for state, part in parts]), return_inverse=True)
            values = np.concatenate([state.weights[part] for state, part in parts])
            rows.append(unique)
            weights.append(np.bincount(where, weights=values, minlength=len(unique)) / len(states))
            offsets.append(offsets[-1] + len(unique))
        support, first = np.unique(np.concatenate([state.support for state in states]), return_index=True)
        return WarmStart(
            rows=np.concatenate(rows).astype(np.int64), weights=np.concatenate(weights),
            offsets=np.asarray(offsets, dtype=np.int64), support=support,
            support_vectors=_stacked_rows([state.support_vectors for state in states])[first],
            support_classes=np.concatenate([state.support_classes for state in states])[first],
            classes=self.classes, multiclass=self.multiclass, C=self.C, kernel=self.kernel,
        )


class KeptInnerProducts:
    """Inner products ``<x_i, x_j>`` of the last fit's working sets, kept by a ``warm_start`` fit for the next one.

    ``rows[problem index] = (the sub-problem's rows of X, points, dots)`` with ``dots[k, j] = <x_points[k], x_j>``
    (positions in the sub-problem; solvers/dense.py).  Read-only once built: deep copies share it, and it is
    not pickled or saved in model files (the next warm fit on the same data rebuilds it); it holds a
    reference to the training matrix, to check that the next fit's ``X`` is the same (:meth:`holds`).
    """

    # model_io does not save it
    transient = True

    def __init__(self, X, rows: dict):
        self.X, self.rows = X, rows

    def holds(self, X) -> bool:
        """Whether these products are of ``X`` (the same matrix: shape, dtype and values)."""
        return same_matrix(self.X, X)

    @property
    def nbytes(self) -> int:
        """Bytes of the kept products."""
        return sum(dots.nbytes for _, _, dots in self.rows.values())

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):
        return KeptInnerProducts, (None, {})


class SharedInnerProducts:
    """Inner products ``<x_i, x_j>`` of all rows of a hyper-parameter search's data, computed once (one BLAS
    product, on first use) and read by the search's warm fits on every fold, at every C and gamma.

    A fold's sub-problems are sets of the search's rows, so their inner products are blocks of this one matrix,
    and the folds of k-fold cross-validation share ``(k - 2) / (k - 1)`` of their rows: kept per fold
    (:class:`KeptInnerProducts`), five folds of USPS's 5,000 rows need 5 x 230 MB, more than ``cache_size``,
    and kept none.  A search builds one only when its ``n x n`` float64 values fit ``cache_size``
    (:meth:`for_search`, ``CoreSVC.shared_inner_products``), and lends it to each fit with the rows of its
    fold (:meth:`on_rows`, ``CoreSVC.lend_inner_products``; the fit drops it when it ends).  Not pickled (a
    parallel job's process would compute its own for one fit), not saved.
    """

    transient = True  # model_io does not save it

    def __init__(self, X, rows=None, source=None):
        self.X, self.rows = X, rows
        # The products, computed once and shared by every view (on_rows) of this search's data.
        self.source = source if source is not None else {"dots": None, "lock": threading.Lock()}

    @classmethod
    def for_search(cls, X, cache_bytes: int) -> SharedInnerProducts | None:
        """One for a search on ``X``, when it is a dense array with enough features for inner products to be most
        of a kernel row's cost (``DOT_REUSE_MIN_FEATURES``) and its ``n x n`` products fit ``cache_bytes``."""
        if not (isinstance(X, np.ndarray) and X.ndim == 2 and X.shape[1] >= DOT_REUSE_MIN_FEATURES
                and X.shape[0] ** 2 * 8 <= cache_bytes and not is_memory_mapped(X)):
            return None
        return cls(X)

    def on_rows(self, rows: np.ndarray) -> SharedInnerProducts:
        """The same products, lent to a fit on the search's rows ``rows`` (in order)."""
        return SharedInnerProducts(self.X, np.asarray(rows, dtype=np.int64), self.source)

    def positions_of(self, X) -> np.ndarray | None:
        """The search rows of ``X``'s rows, if ``X`` is the search's rows :attr:`rows` (same shape and values)."""
        if self.X is None or self.rows is None or X.shape != (len(self.rows), self.X.shape[1]):
            return None
        return self.rows if np.array_equal(X, self.X[self.rows]) else None

    def dot_rows(self, positions: np.ndarray) -> tuple:
        """A sub-problem's inner products as :func:`~coresvm.solvers.dense.run_dense_rows` reads them
        (``points, dots, slots, columns``) for its points at search rows ``positions``."""
        return np.arange(len(positions)), self.dots(), positions, positions

    def dots(self) -> np.ndarray:
        """All the products, ``n x n`` (computed on first use)."""
        with self.source["lock"]:  # fits of one search in threads: computed once
            if self.source["dots"] is None:
                self.source["dots"] = all_inner_products(self.X, np.arange(len(self.X)))[1]
            return self.source["dots"]

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):
        return SharedInnerProducts, (None,)


class KeptKernelRows:
    """Kernel rows of the last fit's working sets, kept by a ``warm_start`` fit for the next fit at the same kernel.

    ``entries[problem index] = (the sub-problem's rows of X, its signs, buffer, order, 1/C, rows written)``, as
    :func:`~coresvm.solvers.dense.run_dense_rows` returns them with ``keep_rows``.  A fit of the same problem with
    another ``C`` (a search along C at one gamma) starts from that working set and computes no row of it; a fit
    of a problem of the same size at another kernel writes its rows into the buffer (memory only).  The
    buffers are written by the next fit, so they have one owner: :meth:`take` hands them over once, and copies
    (``copy.deepcopy``, pickling) get none.  Not saved in model files.  ``nbytes`` counts the whole buffers
    (``m x m``), although only the rows written are resident.
    """

    # model_io does not save it
    transient = True

    def __init__(self, X, kernel: KernelSpec | None, bias_rule: str | None, entries: dict):
        self.X, self.kernel, self.bias_rule, self.entries = X, kernel, bias_rule, entries

    @property
    def nbytes(self) -> int:
        """Bytes of the kept buffers."""
        return sum(entry[2].nbytes for entry in self.entries.values())

    def computed_for(self, X, kernel: KernelSpec, bias_rule: str) -> bool:
        """Whether the rows' values hold for ``X``, ``kernel`` and ``bias_rule``."""
        return kernel == self.kernel and bias_rule == self.bias_rule and same_matrix(self.X, X)

    def take(self) -> dict:
        """The entries, given up (the buffers are then the taker's)."""
        entries, self.entries = self.entries, {}
        return entries

    def __deepcopy__(self, memo):
        return KeptKernelRows(None, None, None, {})

    def __reduce__(self):
        return KeptKernelRows, (None, None, None, {})


def all_inner_products(X, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All inner products of a sub-problem's points, as solvers/dense.py reads kept ones: (points, dots), here
    every position and ``dots = X_rows X_rows'`` (one BLAS product: ~10 ns per entry of USPS's 256 features on
    one thread, against ~17 ns in the dense loop's row batches)."""
    X_rows = np.asarray(X[rows], dtype=np.float64)  # float64 products, as the dense loop's (float32 X too)
    return np.arange(len(rows)), inner_products(X_rows, X_rows)


def same_matrix(kept, X) -> bool:
    """Whether ``X`` is the training matrix ``kept`` was computed from (shape, dtype and values)."""
    if kept is None:
        return False
    return kept is X or (kept.shape == X.shape and kept.dtype == X.dtype and np.array_equal(kept, X))


def _same_labels(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.all(a == b))


def _stacked_rows(blocks: list):
    """Row blocks (dense or CSR, as ``support_vectors_``) stacked in order."""
    return sp.vstack(blocks, format="csr") if sp.issparse(blocks[0]) else np.concatenate(blocks)


def _same_rows(A, B) -> bool:
    """Whether two (dense or CSR) matrices hold the same values."""
    if A.shape != B.shape:
        return False
    if sp.issparse(A) or sp.issparse(B):
        return (sp.csr_matrix(A) != sp.csr_matrix(B)).nnz == 0
    return bool(np.array_equal(A, B))

