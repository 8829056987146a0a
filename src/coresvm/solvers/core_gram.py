"""The core set's storage: its points, weights, gradient ``G = Q a`` and Gram matrix (:class:`CoreSetState`).

The Gram matrix is reserved at the size its byte budget allows and written a block at a time as the core set
grows: the new points' rows by kernel products (:func:`store_gram_rows`), mirrored into the old rows' columns
(:func:`mirror_new_rows`); points without weight are compacted away in place (:func:`compact_gram_in_place`).
Large core sets of few-feature dense data drop the Gram and the inner solve computes its rows instead
(:meth:`CoreSetState.compute_rows_from`; when: :data:`~coresvm.solvers.core_set.COMPUTED_ROWS_FROM`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numba import njit

from ..cache import address_space_is_lazy, lazy_zeros
from ..kernels import (
    RightOperand,
    apply_kernel_to_dots,
    default_kernel_threads,
    dense_copy_fits,
    exp_in_place,
    product_block_rows,
    rbf_factor_limit,
    rbf_factorizable,
    run_row_blocks,
    squared_norms,
    widened_dot,
)
from .active_face import diagonal_shortfall, gram_rows_product
from .core_steps import FLOAT32_GRAM_MIN_TOL, NO_NORMS, ROWS_STORED, kernel_row


def gram_dtype(tol: float) -> type:
    """float32 halves the Gram's memory and bandwidth; tight tolerances need float64."""
    return np.float32 if tol >= FLOAT32_GRAM_MIN_TOL else np.float64


FLOAT64_GRAM_TOL = float(np.nextafter(FLOAT32_GRAM_MIN_TOL, 0.0))  # the largest tolerance given a float64 Gram


def core_set_capacity(budget_bytes: int, tol: float) -> int:
    """How many points a core set may hold when its Gram matrix gets ``budget_bytes``."""
    return max(64, int(np.sqrt(budget_bytes / np.dtype(gram_dtype(tol)).itemsize)))


# Gram rows of 8 (mod 16) values: a row length with a large power-of-two factor maps the rows of a tile to the same
# cache sets.  On an AMD EPYC the tiled transpose of a growth, when it wrote along the columns (4,000 new rows against
# 18,000), copied 0.05-0.09 billion values a second at 32,768 and 49,152 values per row, 0.3-0.5 at 32,512, 32,560
# and 40,000, and 0.9 at 32,776 and 33,000; ijcnn1's first 32,768 rows grew in 0.52 s, its first 32,760 in 0.21 s.
# The copy that writes rows (mirror_new_rows) ran at 0.42-0.58 at all of these lengths on an Intel Xeon.
ROW_LENGTH_MODULUS, ROW_LENGTH_RESIDUE = 16, 8
ROW_LENGTH_MIN = 2048  # shorter rows stay as they are: their tiles fit in cache whatever their alignment


def budget_capacity(budget_bytes: int, tol: float, max_points: int | None = None) -> int:
    """The points a core set of ``budget_bytes`` holds (:meth:`CoreSetState.within_budget`): the budget's
    :func:`core_set_capacity`, or ``max_points`` when fewer, moved by :func:`cache_friendly_capacity`."""
    ceiling = core_set_capacity(budget_bytes, tol)
    capacity = ceiling if max_points is None else max(1, min(ceiling, int(max_points)))
    return cache_friendly_capacity(capacity, ceiling)


def cache_friendly_capacity(capacity: int, ceiling: int) -> int:
    """``capacity`` moved to the nearest row length of :data:`ROW_LENGTH_RESIDUE` (mod
    :data:`ROW_LENGTH_MODULUS`): up, by at most 15 points, while that stays within ``ceiling`` (the budget's
    capacity), else down."""
    if capacity < ROW_LENGTH_MIN:
        return capacity
    up = capacity + (ROW_LENGTH_RESIDUE - capacity) % ROW_LENGTH_MODULUS
    return up if up <= ceiling else up - ROW_LENGTH_MODULUS


@dataclass
class CoreSetState:
    """The core set: its points, weights, gradient ``G = Q a`` on it, and its Gram matrix.

    The Gram matrix is reserved at the largest size the byte budget allows (and no larger than the
    problem, give or take the 15 points of :func:`cache_friendly_capacity`); the system provides its pages
    only when first written (:func:`~coresvm.cache.lazy_zeros`),
    so only the leading ``size x size`` block becomes resident.  A growable core set (:meth:`growable`:
    the core-set loop) falls back to starting small and doubling, copying its leading block, where
    reserving the address space is not free or is refused.  Entries are float32 unless the tolerance is below 1e-3;
    the gradient is accumulated in float64 either way, with Q's diagonal (``diag``) in float64.
    """

    points: np.ndarray
    alpha: np.ndarray
    G: np.ndarray
    diag: np.ndarray
    inv_c: np.ndarray  # the 1/C part of the diagonal (the duality gap needs it apart from the kernel)
    gram: np.ndarray  # capacity x capacity; the leading size x size block is Q restricted to the core set
    size: int = 0
    limit: int = 0  # growable core sets (solve_core_set): the most points the budget allows; 0: fixed capacity
    refused_at: int = 0  # the capacity at which the system refused more memory (0: never)
    # inner_solve's computed_rows: ROWS_STORED, or after compute_rows_from the core points' features (no Gram)
    computed_rows: tuple = ROWS_STORED

    @classmethod
    def within_budget(cls, budget_bytes: int, tol: float, max_points: int | None = None) -> CoreSetState:
        """A core set as large as ``budget_bytes`` allow, and no larger than the problem (``max_points``), give or
        take the 15 points of :func:`cache_friendly_capacity` (never past the budget).

        Capping at the problem size keeps the Gram of a small problem (a
        one-vs-one pair) small and contiguous instead of a few rows of a
        budget-sized matrix.
        """
        return cls.empty(budget_capacity(budget_bytes, tol, max_points), gram_dtype(tol))

    @classmethod
    def growable(cls, budget_bytes: int, tol: float, max_points: int, initial: int = 1024) -> CoreSetState:
        """A core set of up to what ``budget_bytes`` allow (and ``max_points``), its Gram matrix reserved at that
        size at once.  Only written pages become resident, so a generous budget (``cache_size='auto'``) costs
        address space, not memory; and growth copies nothing (a9a's core set of 28,000 points: doubling from
        1,024 copied and faulted in 1.4 GB more, 25% of the fit's page faults).  Where reserving is not free
        (:func:`~coresvm.cache.address_space_is_lazy`: strict overcommit, ``ulimit -v``, other systems) or
        is refused, the Gram starts at ``initial`` points and doubles as the core set grows
        (:meth:`reserve`)."""
        limit = budget_capacity(budget_bytes, tol, max_points)
        core = None
        if address_space_is_lazy():
            try:
                core = cls.within_budget(budget_bytes, tol, max_points=limit)
            except MemoryError:
                pass  # refused: grow by doubling below
        if core is None:
            core = cls.within_budget(budget_bytes, tol, max_points=min(limit, initial))
        core.limit = limit
        return core

    @classmethod
    def empty(cls, capacity: int, dtype) -> CoreSetState:
        """An empty core set with room for ``capacity`` points and a Gram matrix of ``dtype``."""
        return cls(np.zeros(capacity, dtype=np.int64), np.zeros(capacity), np.zeros(capacity), np.zeros(capacity),
                   np.zeros(capacity), lazy_zeros((capacity, capacity), dtype))

    @property
    def capacity(self) -> int:
        return self.points.shape[0]

    @property
    def max_capacity(self) -> int:
        return max(self.limit, self.capacity)

    @property
    def rows_computed(self) -> bool:
        """Whether ``Q``'s rows are computed per step (:meth:`compute_rows_from`) instead of read from ``gram``."""
        return self.computed_rows[0].shape[0] > 0

    def compute_rows_from(self, problem) -> None:
        """Drop the Gram matrix: from now on the inner solve computes ``Q``'s rows from the core points' features
        (:func:`~coresvm.solvers.core_steps.kernel_row`, :func:`computable_rows` problems), and the core set may hold
        every point.  When at most :data:`NONZERO_SHARE_FOR_NORMS` of the core points' features are nonzero, the rows
        are computed over each point's nonzero features (:func:`~coresvm.kernels.rbf_row_values_over_nonzeros`)."""
        n = self.size
        features_t = np.zeros((problem.X.shape[1], self.capacity), dtype=np.float32)
        self.computed_rows = (features_t, np.zeros(self.capacity, dtype=np.float32), float(problem.kernel.gamma),
                              float(problem.bias_term), NO_NORMS)
        self.store_features(problem, 0, self.points[:n])
        if np.count_nonzero(features_t[:, :n]) <= NONZERO_SHARE_FOR_NORMS * features_t[:, :n].size:
            norms = np.zeros(self.capacity, dtype=np.float32)
            norms[:n] = squared_norms(features_t[:, :n].T)  # of the float32 features the rows read
            self.computed_rows = (*self.computed_rows[:4], norms)
        self.gram = np.zeros((0, 0), dtype=self.gram.dtype)
        self.limit = problem.n_points
        # G again from the computed rows, which round differently from the stored ones (1e-4 of max |G| at C = 100)
        self.computed_gradient_of(0, n)

    def store_features(self, problem, first: int, points: np.ndarray) -> None:
        """The features and labels of ``points`` as the core points from ``first`` on, for computed rows."""
        features_t, signs, _, _, norms = self.computed_rows
        stop = first + len(points)
        features_t[:, first:stop] = problem.rows_of(points).T
        signs[first:stop] = problem.signs_of(points)
        if norms.shape[0]:
            norms[first:stop] = squared_norms(features_t[:, first:stop].T)

    def computed_gradient_of(self, start: int, stop: int) -> None:
        """``G[start:stop] = (Q a)[start:stop]`` on the core set from computed rows (:func:`computed_gradient`), in
        blocks on the kernel threads."""
        n = self.size

        def one_block(first: int) -> None:
            last = min(first + COMPUTED_GRADIENT_ROWS, stop)
            computed_gradient(self.computed_rows, self.diag, self.alpha, n, first, last, self.G[first:last])

        run_row_blocks(stop - start, COMPUTED_GRADIENT_ROWS, lambda offset: one_block(start + offset), None)

    def reserve(self, extra: int) -> None:
        """Room for ``extra`` more points, growing the arrays (at least doubling) while the limit allows."""
        needed = self.size + extra
        if needed <= self.capacity or self.capacity >= self.limit:
            return
        n = self.size
        if self.rows_computed:
            capacity = min(self.limit, max(2 * self.capacity, needed))
            features_t, signs, gamma, bias, norms = self.computed_rows
            self.computed_rows = (_widened(features_t, capacity, n), _widened(signs, capacity, n), gamma, bias,
                                  _widened(norms, capacity, n) if norms.shape[0] else norms)
            for name in ("points", "alpha", "G", "diag", "inv_c"):
                setattr(self, name, _widened(getattr(self, name), capacity, n))
            return
        try:
            grown = self.empty(cache_friendly_capacity(min(self.limit, max(2 * self.capacity, needed)), self.limit),
                               self.gram.dtype)
        except MemoryError:
            # Refused by the system (ulimit -v, strict overcommit) below the budget: stop growing here, so
            # the loop ends as with a full budget and keeps its model.
            self.refused_at, self.limit = self.capacity, self.capacity
            return
        grown.gram[:n, :n] = self.gram[:n, :n]
        for name in ("points", "alpha", "G", "diag", "inv_c"):
            getattr(grown, name)[:n] = getattr(self, name)[:n]
        for name in ("points", "alpha", "G", "diag", "inv_c", "gram"):
            setattr(self, name, getattr(grown, name))

    def fits_float64(self, budget_bytes: int) -> bool:
        """Whether the core set has a float32 Gram that ``budget_bytes`` would hold in float64 (:meth:`in_float64`)."""
        return (not self.rows_computed and self.gram.dtype == np.float32
                and self.size <= budget_capacity(budget_bytes, FLOAT64_GRAM_TOL, self.max_capacity))

    def in_float64(self, problem, budget_bytes: int) -> CoreSetState:
        """The same points and weights with a float64 Gram (its rows and ``G`` computed again), growable within
        ``budget_bytes`` (:meth:`fits_float64`).  Float32 rounds each entry by up to 6e-8 of the kernel's scale; at
        large C those errors, summed over a face of thousands of points, outweigh the diagonal's 1/C and the face
        is no longer positive definite: one-hot cover-type rows (10,000 points) at C = 1,048,576 hit max_iter after
        10 million steps in float32 (relative gap 2.6, 106 s); switched to float64 at the first such face, the fit
        converged in 1.1 million steps (28 s), and with a float64 Gram from the start in 465,000."""
        n = self.size
        fresh = CoreSetState.growable(budget_bytes, FLOAT64_GRAM_TOL, max_points=problem.n_points,
                                      initial=max(1024, n))
        fresh.reserve(n)
        append_points(problem, fresh, self.points[:n], self.alpha[:n])
        fresh.refused_at = self.refused_at
        return fresh

    def compact(self) -> None:
        """Drop points with zero weight (they re-enter if they violate again)."""
        keep = np.flatnonzero(self.alpha[: self.size] > 0)
        n = len(keep)
        if self.rows_computed:
            features_t, signs, _, _, norms = self.computed_rows
            features_t[:, :n] = features_t[:, keep]
            signs[:n] = signs[keep]
            if norms.shape[0]:
                norms[:n] = norms[keep]
        else:
            compact_gram_on_threads(self.gram, keep)
        for name in ("points", "alpha", "G", "diag", "inv_c"):
            values = getattr(self, name)
            values[:n] = values[keep]
        self.size = n


def _widened(values: np.ndarray, capacity: int, n: int) -> np.ndarray:
    """A zeroed array of ``capacity`` entries along the last axis holding the first ``n`` of ``values``."""
    grown = np.zeros(values.shape[:-1] + (capacity,), dtype=values.dtype)
    grown[..., :n] = values[..., :n]
    return grown


# Rows may be computed per step (computable_rows) for dense binary RBF problems of at most this many features;
# the core-set loop decides when (core_set.COMPUTED_ROWS_FROM).  Beyond 64 features untested: the Gram is kept.
COMPUTED_ROWS_MAX_FEATURES = 64
# Computed rows sum over each point's nonzero features when at most this share of the core points' features are
# nonzero (CoreSetState.compute_rows_from).  Features are read from memory once per row and feature, so a row of
# 42,000 points with 54 features, 12 of them nonzero (ten continuous, two one-hot blocks, min-max scaled: the
# layout of forest cover types) took 125 instead of 390 us; dense rows stay direct, for which the two extra passes
# (the products' start and the norms') cost 15-50% more with 2-20 features.
NONZERO_SHARE_FOR_NORMS = 0.5
COMPUTED_GRADIENT_ROWS = 64  # rows of computed_gradient per task


def computable_rows(problem, dtype) -> bool:
    """Whether ``Q``'s rows can be computed per step (:func:`~coresvm.solvers.core_steps.kernel_row`): a dense binary
    RBF problem of at most :data:`COMPUTED_ROWS_MAX_FEATURES` features with a float32 Gram."""
    return (not problem.is_joint and problem.kernel.name == "rbf" and type(problem.X) is np.ndarray
            and problem.X.shape[1] <= COMPUTED_ROWS_MAX_FEATURES and np.dtype(dtype) == np.float32)


@njit(cache=True, nogil=True)
def computed_gradient(computed_rows, diag_w, alpha, n_w, start, stop, out):
    """``out = (Q a)[start:stop]`` on the first ``n_w`` core points from computed rows
    (:func:`~coresvm.solvers.core_steps.kernel_row`), with the diagonal in float64 as the inner solve's steps take
    it."""
    row = np.empty(n_w, dtype=np.float32)
    for i in range(start, stop):
        kernel_row(computed_rows, diag_w, i, n_w, row)
        out[i - start] = widened_dot(row, alpha) + alpha[i] * (diag_w[i] - row[i])


@njit(cache=True, nogil=True)
def compact_gram_in_place(gram, keep):
    """``gram[:n, :n] = gram[keep][:, keep]`` without a temporary copy.

    Safe in row-major order because ``keep`` is increasing: entry (a, b) is read
    from (keep[a], keep[b]) >= (a, b), which no earlier write has touched.
    """
    compact_gram_rows(gram, keep, 0, keep.shape[0], gram[:0], keep.shape[0])


@njit(cache=True, nogil=True)
def compact_gram_rows(gram, keep, start, stop, saved, saved_from):
    """The rows ``start:stop`` of :func:`compact_gram_in_place`, in order: ``gram[a, :n] = gram[keep[a], keep]``;
    the rows ``a >= saved_from`` read ``saved[a - saved_from]`` instead, a copy of their source row made before
    another thread could overwrite it."""
    for a in range(start, stop):
        source = saved[a - saved_from] if a >= saved_from else gram[keep[a]]
        target = gram[a]
        for b in range(keep.shape[0]):
            target[b] = source[keep[b]]


COMPACTION_WAVE_ROWS = 256  # rows that are compacted in order (in a few parts) while the shift below is smaller
COMPACTION_TASK_ROWS = 64  # rows per task of a wave


def compaction_waves(keep: np.ndarray) -> list[tuple[int, int, bool]]:
    """``(start, stop, parallel)``: the row ranges of :func:`compact_gram_in_place` in order, and whether the rows of
    a range may be written in any order (on several threads).

    Row ``a`` is read from row ``keep[a] = a + d_a``, and the shift ``d_a`` (the dropped rows before it) does not
    decrease.  Rows with ``d_a = 0`` read only themselves; from a row with shift ``d``, the next ``d`` rows read rows
    past them, which no row of the range writes: such a range may run in any order.  While the shift is below
    :data:`COMPACTION_WAVE_ROWS`, the rows are compacted in order instead (short ranges on threads cost more than
    they gain), in parts on the threads by :func:`compact_in_parts`."""
    shift = keep - np.arange(len(keep))
    waves, start = [], 0
    while start < len(keep):
        d = int(shift[start])
        if d == 0:
            stop, parallel = int(np.searchsorted(shift, 1)), True
        elif d < COMPACTION_WAVE_ROWS:
            stop, parallel = int(np.searchsorted(shift, COMPACTION_WAVE_ROWS)), False
        else:
            stop, parallel = min(len(keep), start + d), True
        waves.append((start, stop, parallel))
        start = stop
    return waves


def compact_gram_on_threads(gram: np.ndarray, keep: np.ndarray) -> None:
    """:func:`compact_gram_in_place` on the kernel threads, a range of :func:`compaction_waves` at a time.  In one
    thread, a9a's compactions of 20,000-point core sets took 0.2-0.35 s, make_moons' of 45,000 points 0.7-2 s each
    (11-18 s of a 60-80 s fit)."""
    for start, stop, parallel in compaction_waves(keep):
        if not parallel:
            compact_in_parts(gram, keep, start, stop)
            continue

        def block(first: int, start: int = start, stop: int = stop) -> None:
            compact_gram_rows(gram, keep, start + first, min(start + first + COMPACTION_TASK_ROWS, stop), gram[:0],
                              stop)

        run_row_blocks(stop - start, COMPACTION_TASK_ROWS, block, None)


def compact_in_parts(gram: np.ndarray, keep: np.ndarray, start: int, stop: int) -> None:
    """The rows ``start:stop`` of :func:`compact_gram_in_place`, whose shift ``keep[a] - a`` is below
    :data:`COMPACTION_WAVE_ROWS`, in consecutive parts of at least that many rows, each in order and all at once on
    the kernel threads.  A part's last rows read rows of the next part (less than the shift past them): those rows
    are copied first, so that the next part may overwrite them (make_moons' compactions drop mostly recent points,
    and 80-95% of their rows have such a shift)."""
    parts = max(1, min(default_kernel_threads(), (stop - start) // COMPACTION_WAVE_ROWS))
    bounds = [start + (stop - start) * part // parts for part in range(parts + 1)]
    columns = int(keep[-1]) + 1
    plans = []
    for first, last in zip(bounds[:-1], bounds[1:], strict=True):
        readers = last if last == stop else max(first, int(np.searchsorted(keep, last)))  # rows reading past it
        saved = np.ascontiguousarray(gram[keep[readers:last], :columns]) if readers < last else gram[:0]
        plans.append((first, last, saved, readers))
    run_row_blocks(len(plans), 1, lambda index: compact_gram_rows(gram, keep, *plans[index]), None)


@dataclass
class GramColumns:
    """The columns of a core-set growth (the core set and the points joining it), prepared once for all row blocks.

    RBF kernels whose exponents stay far from overflow (:func:`~coresvm.kernels.rbf_factorizable`) are factorized
    as ``k(a, b) = exp(-g|a|^2) exp(2g <a, b>) exp(-g|b|^2)``: the columns' features are ``2g b`` and ``factors``
    ``exp(-g|b|^2)``, so a block is one GEMM, one ``exp`` and one fused pass (:func:`store_scaled_rows`) instead
    of nine passes over it.  CSR columns are made dense, in column order so that their transpose is contiguous
    without a second copy (:class:`~coresvm.kernels.RightOperand`), when that copy is small: each row block is then
    one sparse x dense product of its own rows, instead of a product of the sparse columns followed by a transposed
    copy of the block.
    """

    points: np.ndarray
    right: RightOperand  # the columns' features in the Gram's precision (times 2g when factorized)
    norms: np.ndarray
    signs: np.ndarray  # sign_factors of the columns
    factors: np.ndarray | None  # exp(-g |b|^2) when factorized, else None

    @classmethod
    def of(cls, problem, points: np.ndarray, rows_joining: np.ndarray, precision: type) -> GramColumns:
        X, norms = problem.rows_of(points).astype(precision), problem.norms_of(points)
        if sp.issparse(X) and dense_copy_fits(X, X.dtype.itemsize):
            X = X.toarray(order="F")  # X.T is C-contiguous: RightOperand takes it as it is
        signs = sign_factors(problem, points, precision)
        spec = problem.kernel
        factors = None
        if spec.name == "rbf" and rbf_factorizable(spec, problem.norms_of(rows_joining), norms,
                                                   rbf_factor_limit(precision)):
            X *= precision(2.0 * spec.gamma)
            factors = np.exp(-spec.gamma * norms).astype(precision)
        return cls(points, RightOperand(X, problem.X, precision), norms.astype(precision), signs, factors)


def sign_factors(problem, rows, precision: type) -> np.ndarray:
    """The per-row factors of ``Q``'s label part: ``y_i`` for a binary problem; ones for the joint one, whose label
    products (:meth:`~coresvm.problem.SimplexProblem.label_products`) do not factor per row."""
    if problem.is_joint:
        return np.ones(len(rows), dtype=precision)
    return problem.signs_of(rows).astype(precision)


@njit(cache=True, nogil=True)
def store_scaled_rows(block, row_factors, column_factors, bias, row_signs, column_signs, gram, first_row):
    """``gram[first_row + i, j] = (row_factors[i] block[i, j] column_factors[j] + bias) row_signs[i]
    column_signs[j]`` for every entry of ``block``: the scaling and the store into the Gram in one pass (the signs
    last, as the direct path applies them: multiplying by +-1 is exact, so a two-class joint problem, whose label
    products are the signs' products, gets the binary problem's Gram bit for bit)."""
    for i in range(block.shape[0]):
        row, target = block[i], gram[first_row + i]
        r, s = row_factors[i], row_signs[i]
        for j in range(row.shape[0]):
            target[j] = (r * row[j] * column_factors[j] + bias) * s * column_signs[j]


MIRROR_ROWS = 2048  # rows of the core set per task of mirror_new_rows
# The transposed copy writes each target row's run of new columns contiguously and reads the new rows with a stride,
# a band of MIRROR_BAND target rows against MIRROR_TILE new rows at a time.  Writing along the columns instead (a
# strided store per value) copied 0.19 billion values a second in 128 x 128 tiles on an Intel Xeon (0.43 at best,
# in 32 x 32 tiles); this order 0.53-0.58 there, at any band of 16-256 rows against 256-512 new rows.
MIRROR_BAND = 128
MIRROR_TILE = 256


@njit(cache=True, nogil=True)
def mirror_new_rows(gram, n, k, start, stop):
    """The new rows ``n:n + k`` copied into the columns of the rows ``start:stop``: ``gram[j, i] = gram[i, j]`` for
    every new row ``i`` and every old row ``j``, and for the new rows ``j > i`` (the new block's lower triangle), in
    tiles (a strided NumPy assignment per row block took twice as long).

    The new block's entries (i, j) and (j, i) come from different rows of the row blocks' products, which round
    differently (one float32 unit in 4.5% of ijcnn1's entries); the pairwise steps update ``G`` from rows, so an
    asymmetric Gram lets ``G`` drift from ``Q a`` (ijcnn1 at C = 262,144: 1e-3 of ``max |G|`` within one solve)."""
    for j0 in range(start, stop, MIRROR_BAND):
        j1 = min(j0 + MIRROR_BAND, stop)
        for i0 in range(n, n + k, MIRROR_TILE):
            i1 = min(i0 + MIRROR_TILE, n + k)
            for j in range(j0, j1):
                target = gram[j]
                end = i1 if j < n else min(i1, j)  # a new row j takes only the new columns i < j
                for i in range(i0, end):
                    target[i] = gram[i, j]


def store_extended_rows(problem, rows_a, columns: GramColumns, gram: np.ndarray, first_row: int) -> None:
    """``gram[first_row:first_row + len(rows_a), :len(columns.points)] = Q[rows_a][:, columns]`` without the ``1/C``
    diagonal (rows_a and the columns are disjoint), in the Gram's precision."""
    spec, precision = problem.kernel, gram.dtype.type
    if columns.factors is not None:
        K = columns.right.products(problem.rows_of(rows_a))  # 2g <a, b>
        exp_in_place(K)
        row_factors = np.exp(-spec.gamma * problem.norms_of(rows_a)).astype(precision)
        # Scaled straight into the Gram's rows, except for the joint problem's label products (scaled in place)
        target, target_row = (K, 0) if problem.is_joint else (gram, first_row)
        store_scaled_rows(K, row_factors, columns.factors, precision(problem.bias_term),
                          sign_factors(problem, rows_a, precision), columns.signs, target, target_row)
        if not problem.is_joint:
            return
    else:
        K = apply_kernel_to_dots(columns.right.products(problem.rows_of(rows_a)), spec, problem.norms_of(rows_a),
                                 columns.norms)
        K += problem.bias_term
        if not problem.is_joint:  # the joint problem's sign factors are ones
            K *= sign_factors(problem, rows_a, precision)[:, None]
            K *= columns.signs[None, :]
    if problem.is_joint:
        K *= problem.label_products(rows_a, columns.points)  # L[c_a, c_b] (Strack 2013, sec. 5.4)
    gram[first_row : first_row + K.shape[0], : K.shape[1]] = K


def append_points(problem, core: CoreSetState, new_points, new_alpha, new_gradient=None) -> None:
    """Append ``new_points`` to the core set: their Gram rows (and, by symmetry, columns) in row blocks, and their
    gradient ``G = Q a`` from those rows; once the rows are computed (:meth:`CoreSetState.compute_rows_from`), their
    features and labels, and ``G`` from computed rows or ``new_gradient``.

    With a stored Gram the gradient is summed from its (float32) rows and the float64 diagonal, not taken from the
    candidates' scores, so that ``G`` is exactly the gradient of the problem the Gram and ``diag`` define.  Computed
    rows cost as much as the scoring: ``new_gradient``, the new points' scores (``Q a`` with ``a`` as it is, zero
    weight for them), saves computing each row again (make_moons at C=1: growth 3.0 -> 0.9 s of a 12.9 -> 10.1 s
    fit).  The scores add the bias in float64 where the rows round ``k + bias`` in float32, so they are as close to
    the exact ``Q a`` as the rows' own sums (tested).  The old points' ``G`` is left as it is: new points join with
    zero weight, except the first ones (no old points then).
    """
    n, k = core.size, len(new_points)
    new_diag = problem.diag_of(new_points)
    if core.rows_computed:
        core.store_features(problem, n, new_points)
    else:
        store_gram_rows(problem, core, new_points, new_diag)
    core.points[n : n + k] = new_points
    core.alpha[n : n + k] = new_alpha
    core.diag[n : n + k] = new_diag
    core.inv_c[n : n + k] = problem.inv_c_of(new_points)
    core.size = n + k
    if core.rows_computed and new_gradient is not None:
        core.G[n : n + k] = new_gradient
    elif core.rows_computed:
        core.computed_gradient_of(n, n + k)
    else:
        rows = np.arange(n, n + k)
        core.G[n : n + k] = gram_rows_product(core.gram, rows, n + k, core.alpha[: n + k],
                                              diagonal_shortfall(core.gram, core.diag, rows))


def store_gram_rows(problem, core: CoreSetState, new_points, new_diag) -> None:
    """The Gram rows of ``new_points`` (diagonal ``new_diag``) after the core set's ``core.size`` points, and their
    columns by symmetry, in row blocks on the kernel threads."""
    n, k = core.size, len(new_points)
    precision = core.gram.dtype.type
    # The columns in the Gram's precision once, not per block (a float64 GEMM, then a cast, took twice as long).
    columns = GramColumns.of(problem, np.concatenate([core.points[:n], new_points]), new_points, precision)
    # Blocks of kernel_product's size: a whole k x n float64 block at once faulted in fresh pages on every growth.
    rows = product_block_rows(n + k)

    def one_block(start: int) -> None:
        stop = min(start + rows, k)
        store_extended_rows(problem, new_points[start:stop], columns, core.gram, n + start)
        diagonal = n + np.arange(start, stop)
        core.gram[diagonal, diagonal] = new_diag[start:stop]

    def mirror_block(start: int) -> None:
        mirror_new_rows(core.gram, n, k, start, min(start + MIRROR_ROWS, n + k))

    run_row_blocks(k, rows, one_block, None)
    run_row_blocks(n + k, MIRROR_ROWS, mirror_block, None)
