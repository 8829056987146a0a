"""Small-problem solver: the core-set loop in one compiled, GIL-free function with cached kernel rows.

For a sub-problem whose extended kernel fits the ``cache_size`` byte budget
(``m^2 * 8`` bytes; a one-vs-one pair of USPS, letter or pendigits is 1-2
thousand points, 8-40 MB) the core-set solver's Python rounds cost more than
its arithmetic -- each round re-scores every point against the whole active
set -- and they hold the GIL, so ``n_jobs`` threads wait for each other.  Here
the same scheme (Tsang et al. 2005; Frandi et al. 2013 Alg. 1) runs in one Numba function
declared ``nogil=True``:

* The *working set* (the core set) is the leading positions of the problem,
  whose points are permuted in place.  Each working-set point has its row
  ``Q[t, :]`` over all ``m`` points, computed once, in batches (one BLAS
  product ``X[new] X'`` -- Numba calls BLAS for ``np.dot`` -- then the
  kernel) and kept: the leading ``n_w`` columns of those rows are the core
  set's Gram matrix, solved by the core-set solver's own pairwise-step loop
  (:func:`coresvm.solvers.core_steps.inner_solve`: IMDM/GMDM second vertex,
  exact line search, Strack 2013 eqs. 5.33/5.35).
* After each inner solve the gradient ``G = Q a`` of *every* point is
  recomputed exactly from the active rows (``|active| x m`` multiply-adds, no
  kernel evaluation), so the stopping test is the true duality gap relative to
  the margin -- the same ``tol`` as the engine's full search (Frandi et al. 2015 eq. 3;
  ``1 - min_i (Qa)_i / a'Qa <= tol`` for ``lam = 0``) -- and the next batch is
  the ``max(BATCH, n_w / GROWTH_DIVISOR)`` worst violators outside the working set.
* Each inner solve is capped at ``2 n_w`` steps (at least 128), and points of
  zero weight that do not violate leave the working set when they are a
  quarter of it: a warm start's old support shrinks to the new one instead of
  making every step pass over all of it.

Only the rows of the working set are ever written into the (uninitialised)
``m x m`` buffer, so the resident memory is ``n_w * m * 8`` bytes for the
largest working set.

The same loop solves the joint multiclass problem (:mod:`~coresvm.solvers.dense_joint`): its labels are class
indices and its label factor the label Gram's (:class:`RowScheme`), and its row buffer holds the rows the byte
budget allows rather than ``m``.

:func:`run_dense_rows` takes a sub-problem as row indices of the full training
matrix: the rows, norms, signs, ``1/C_i``, the diagonal and the random start are
built inside the same compiled call (:func:`solve_rows_dense`), so one-vs-one
pairs in ``n_jobs`` threads hold the GIL for a few Python steps per pair only.
It can also keep the inner products ``<x_i, x_j>`` of the working set's rows and read those of an earlier
fit on the same rows (``dot_rows``, ``keep_dots``): they do not depend on C or the kernel's parameters, so a
warm fit of a hyper-parameter search computes only the new points' products.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import NamedTuple

import numpy as np
from numba import njit

from ..kernels import RBF, KernelSpec, kernel_from_dot
from ..problem import SimplexProblem
from .clock import now
from .core_steps import (
    ROWS_STORED,
    STOP_RELATIVE_GAP,
    duality_gap_weights,
    inner_solve,
    l2svm_duality_gap,
)
from .driver import SolverOptions, SolverResult, run_engine, solver_result
from .engine import SECOND_VERTEX_RULES, STATUS_CONVERGED, STATUS_CORE_SET_FULL, STATUS_MAX_ITER, STATUS_MAX_TIME
from .sampling import balanced_start
from .steps import vertex_score

# Violators added per round (the worst first): at least BATCH, and n_w / GROWTH_DIVISOR once the working set is
# larger, so that it grows geometrically (binary and joint problems alike).  Larger batches mean fewer
# rounds but more kernel rows of points that never become support vectors; 32 was the fastest of 16-128 on the
# USPS, letter and pendigits one-vs-one pairs (benchmarks/results/multiclass.md), whose working sets stay below
# 8 * 32 points.  An ijcnn1 fold of 1,000 points at small C has every point in its support: from the 20-point
# start it took 33 rounds of 32, 22 with the growth.
BATCH = 32
GROWTH_DIVISOR = 8
# Each round's inner solve takes at most max(ROUND_STEPS_PER_POINT * n_w, MIN_ROUND_STEPS) pairwise steps, then
# the exact gradient is refreshed; working-set points that are idle then (zero weight, no violation) leave it when
# they are at least 1/IDLE_SHARE of it (:func:`_drop_idle`).  A warm start begins with the old support: at a
# larger C most of it leaves (ijcnn1, C 4 -> 1024: 770 points, 261 with weight after 1,000 steps, 204 at the end),
# and every step costs passes over the whole working set.  Over the pattern searches of
# benchmarks/search_benchmark.py on ijcnn1 (1,500 rows, 3 folds) these cut the steps times working-set size by
# about 28% for cold and warm fits alike (129M -> 93M cold, 105M -> 75M warm); letter's small pairs barely change.
ROUND_STEPS_PER_POINT = 2
MIN_ROUND_STEPS = 4 * BATCH
IDLE_SHARE = 4


class RowScheme(NamedTuple):
    """What differs between the problems :func:`solve_dense_loop` solves: the binary ones (a binary fit, one-vs-one,
    one-vs-rest; :data:`BINARY_ROWS`) and the joint multiclass one (:mod:`~coresvm.solvers.dense_joint`).

    The extended kernel is ``Q_ij = L_ij (k(x_i, x_j) + bias) + delta_ij / C_i``, with the label factor ``L_ij``
    ``same_label`` when the points' labels are equal and ``other_label`` otherwise: the signs' product
    (``1, -1``) for binary problems, the simplex label Gram (``1, -1/(K-1)``, Strack 2013 sec. 5.4) for the joint
    one.  The other fields are the loop's settings for each: see :func:`solve_dense_loop`.
    """

    same_label: float
    other_label: float
    dot_chunk: int  # rows of inner products per BLAS product, into one reused buffer; 0: all new rows at once
    round_steps_per_point: int  # a round's inner solve takes at most max(this * n_w, min_round_steps) steps
    min_round_steps: int
    idle_share: int  # idle working-set points leave when they are at least 1/idle_share of it; 0: never
    l2svm_gap: bool  # the L2-SVM's duality gap may end the fit (solve_capped_round)


# Binary problems: labels are the signs; one BLAS product per batch; rounds capped and idle points dropped.
BINARY_ROWS = RowScheme(1.0, -1.0, 0, ROUND_STEPS_PER_POINT, MIN_ROUND_STEPS, IDLE_SHARE, True)


def fits_dense(n_points: int, cache_bytes: int) -> bool:
    """Whether a problem's extended kernel (float64) fits the byte budget, so :func:`solve_dense` applies."""
    return n_points * n_points * 8 <= cache_bytes


# The compiled loop takes pairwise steps only.  A problem that needs more than this many per point (most need 1-5:
# the one-vs-one pairs of USPS, letter and pendigits at C x 1..1024 took at most 3) goes on with the core-set loop,
# whose Newton steps on the active face settle the slow, ill-conditioned solves of large C
# (:mod:`~coresvm.solvers.active_face`): banana (3,710 points, 45% support vectors) at C = 6,400 took 2.87 million
# pairwise steps and 17.6-28 s here, 0.8 s with the hand-over.  5 steps per point gave the flattest times over C:
# 10 and 20 made the large-C fits slower (banana at C = 1,600: 0.51 and 0.75 s against 0.47 s), while 20 saved
# 0.1 s at C = 100, where banana needs 11 per point.
DENSE_STEPS_PER_POINT = 5
DENSE_MIN_STEPS = 10_000


def dense_step_budget(n_points: int, max_iter: int) -> int:
    """The pairwise steps the compiled loop takes on a problem of ``n_points`` before the core-set loop goes on
    (:func:`continue_with_core_set`), within the fit's ``max_iter``."""
    return int(min(max_iter, max(DENSE_MIN_STEPS, DENSE_STEPS_PER_POINT * n_points)))


def stopped_at_step_budget(status: str, steps: int, max_iter: int) -> bool:
    """Whether a dense solve stopped at :func:`dense_step_budget`, short of the fit's own ``max_iter``."""
    return status == "max_iter" and steps < max_iter


def continue_with_core_set(problem: SimplexProblem, options: SolverOptions, support: np.ndarray, alpha: np.ndarray,
                           steps: int, elapsed: float, time_counted: bool = False) -> SolverResult:
    """The core-set solver goes on from a dense solve's ``(support, alpha)``, after its ``steps`` in ``elapsed``
    seconds, within what is left of ``options.max_iter`` and ``max_time``; the result counts both.
    ``time_counted``: ``options.max_time`` is already what is left after those seconds (a share of the time left
    after a compiled chunk of problems), so they are not subtracted again."""
    time_left = options.max_time if time_counted else options.max_time - elapsed
    rest = replace(options, max_iter=max(options.max_iter - steps, 1), max_time=max(time_left, 0.0))
    result = run_engine(problem, rest, support, alpha)
    result.n_iter += steps
    result.time += elapsed
    return result


# exp(x) = 2^k exp(r), k = round(x / ln 2), r = x - k ln 2 in [-ln2/2, ln2/2] (Cody-Waite: ln 2 split in a
# part exact in k * LN2_HI and the rest); exp(r) by its Taylor polynomial to degree 13 (truncation < 2e-17).
LOG2E = 1.4426950408889634
LN2_HI = 6.93145751953125e-1
LN2_LO = 1.42860682030941723212e-6
EXP_UNDERFLOW = -708.0  # below this exp(x) < 2.3e-308: returned as 0


# Fused multiply-adds allowed (LLVM's "contract" only: no reassociation, no other fast-math assumption): Horner's
# rule is a chain of them.  An RBF row fill of a 256-point pair (letter's) took 2.0-2.5 instead of 2.7-2.9 ns per
# entry, the results within the same few ulp of np.exp (tests/test_dense.py).  The last bits now depend on whether
# the CPU has FMA (a model is reproduced bit for bit on the same kind of machine, as Numba compiles for the host).
FMA = {"contract"}


@njit(cache=True, nogil=True, fastmath=FMA)
def exp_nonpositive(x, work, out):
    """``out = exp(x)`` for ``x <= 0``, in loops LLVM vectorizes (libm's scalar ``exp`` does not).

    The RBF rows are most of the kernel work on low-dimensional data (letter, pendigits: 16 features);
    this is about 4x faster than a loop calling ``np.exp`` and within a few ulp of it
    (tests/test_dense.py).  ``work`` is an int64 array of the same length.
    """
    for i in range(x.shape[0]):
        x_i = max(x[i], EXP_UNDERFLOW)
        k = np.floor(x_i * LOG2E + 0.5)
        r = (x_i - k * LN2_HI) - k * LN2_LO
        p = 1.0 / 6227020800.0
        p = p * r + 1.0 / 479001600.0
        p = p * r + 1.0 / 39916800.0
        p = p * r + 1.0 / 3628800.0
        p = p * r + 1.0 / 362880.0
        p = p * r + 1.0 / 40320.0
        p = p * r + 1.0 / 5040.0
        p = p * r + 1.0 / 720.0
        p = p * r + 1.0 / 120.0
        p = p * r + 1.0 / 24.0
        p = p * r + 1.0 / 6.0
        p = p * r + 0.5
        p = p * r + 1.0
        out[i] = p * r + 1.0
        work[i] = (np.int64(k) + 1023) << 52  # the bits of the float64 2^k
    powers = work.view(np.float64)
    for i in range(x.shape[0]):
        out[i] = out[i] * powers[i] if x[i] > EXP_UNDERFLOW else 0.0


@njit(cache=True, nogil=True)
def _kernel_rows_from_dots(dots, norms, labels, same, other, inv_c, kind, gamma, coef0, degree, bias, first, last,
                           rows):
    """``rows[p, :] = Q[p, :]`` for ``first <= p < last`` from the inner products ``dots[p - first, :]``.

    ``Q_pr = L_pr (k(x_p, x_r) + bias) + [p = r] / C_p`` with the label factor ``L_pr = same`` when ``labels[p] ==
    labels[r]``, else ``other`` (:class:`RowScheme`): the product of the signs for ``same, other = 1, -1``, the
    label Gram of the joint problem for its class indices.  A select, which vectorizes.  ``rows`` may be float32.
    """
    m = dots.shape[1]
    argument = np.empty(m)
    kernel = np.empty(m)
    work = np.empty(m, dtype=np.int64)
    for k in range(last - first):
        p = first + k
        label_p = labels[p]
        norm_p = norms[p]
        if kind == RBF:
            for r in range(m):
                argument[r] = -gamma * max(norm_p + norms[r] - 2.0 * dots[k, r], 0.0)
            exp_nonpositive(argument, work, kernel)
        else:
            for r in range(m):
                kernel[r] = kernel_from_dot(kind, dots[k, r], norm_p, norms[r], gamma, coef0, degree)
        out = rows[p]
        for r in range(m):
            factor = same if labels[r] == label_p else other
            out[r] = factor * (kernel[r] + bias)
        out[p] += inv_c[p]


@njit(cache=True, nogil=True)
def _fill_rows(X, norms, labels, same, other, inv_c, kind, gamma, coef0, degree, bias, first, last, rows, dots):
    """``rows[p, :] = Q[p, :]`` for ``first <= p < last``: the inner products by BLAS, then the kernel.

    Without rows in ``dots``, one product for all the new rows; with ``k`` rows, ``k`` rows at a time into that
    reused buffer (the joint problem adds batches of thousands of rows of ``m`` values: a new array per round
    would be fresh memory, page faults, each time).
    """
    if dots.shape[0] == 0:
        _kernel_rows_from_dots(np.dot(X[first:last], X.T), norms, labels, same, other, inv_c, kind, gamma, coef0,
                               degree, bias, first, last, rows)
        return
    for start in range(first, last, dots.shape[0]):
        stop = min(start + dots.shape[0], last)
        block = dots[: stop - start]
        np.dot(X[start:stop], X.T, block)
        _kernel_rows_from_dots(block, norms, labels, same, other, inv_c, kind, gamma, coef0, degree, bias, start,
                               stop, rows)


@njit(cache=True, nogil=True)
def _fill_rows_reusing_dots(X, norms, labels, same, other, inv_c, kind, gamma, coef0, degree, bias, first, last, rows,
                            order, old_dots, old_slot, old_columns, new_dots):
    """:func:`_fill_rows`, taking the inner products of points that ``old_dots`` holds from there.

    ``old_dots[old_slot[i], old_columns[j]]`` is ``<x_i, x_j>`` for the problem's original indices ``i, j``
    (``old_slot[i] < 0``: not kept; ``old_columns`` empty: column ``j`` itself, as a fit's own kept rows are
    stored, else the row of a search's shared inner products, :class:`~coresvm.warm_start.SharedInnerProducts`); only
    the other points' products are computed (one BLAS product).  When ``new_dots`` has rows, row ``p`` of it
    receives point ``p``'s products in original column order, for the next fit to reuse.
    """
    m = X.shape[0]
    n = last - first
    missing = np.empty(n, dtype=np.int64)
    n_missing = 0
    for k in range(n):
        if old_slot[order[first + k]] < 0:
            missing[n_missing] = first + k
            n_missing += 1
    computed = np.dot(X[missing[:n_missing]], X.T) if n_missing > 0 else np.empty((0, m))
    dots = np.empty((n, m))
    keep = new_dots.shape[0] > 0
    own_columns = old_columns.shape[0] == 0
    gathered = np.empty(0 if own_columns else m)
    j = 0
    for k in range(n):
        p = first + k
        slot = old_slot[order[p]]
        if slot >= 0:
            source = old_dots[slot]
            if not own_columns:
                # In original order first: the columns ascend (a fold's rows of the search), so the pass over a
                # long row of the shared products runs forward, which the memory prefetcher follows.
                for r in range(m):
                    gathered[r] = source[old_columns[r]]
                source = gathered
            for r in range(m):
                dots[k, r] = source[order[r]]
            if keep:
                new_dots[p, :] = source
        else:
            dots[k, :] = computed[j]
            j += 1
            if keep:
                target = new_dots[p]
                for r in range(m):
                    target[order[r]] = dots[k, r]
    _kernel_rows_from_dots(dots, norms, labels, same, other, inv_c, kind, gamma, coef0, degree, bias, first, last,
                           rows)


@njit(cache=True, nogil=True)
def _fill_new_rows(X, norms, labels, scheme, inv_c, kind, gamma, coef0, degree, bias, first, last, rows, dots, reuse,
                   order, old_dots, old_slot, old_columns, new_dots):
    """The working set's new rows ``first <= p < last``: :func:`_fill_rows_reusing_dots` when inner products are
    kept or read (``reuse``), else :func:`_fill_rows` (through the buffer ``dots``)."""
    same, other = scheme.same_label, scheme.other_label
    if reuse:
        _fill_rows_reusing_dots(X, norms, labels, same, other, inv_c, kind, gamma, coef0, degree, bias, first, last,
                                rows, order, old_dots, old_slot, old_columns, new_dots)
    else:
        _fill_rows(X, norms, labels, same, other, inv_c, kind, gamma, coef0, degree, bias, first, last, rows, dots)


@njit(cache=True, nogil=True)
def move_batch_to_front(points, n_w, X, norms, labels, inv_c, diag, alpha, G, order, position, rows):
    """Swap ``points`` (original indices) into working-order positions ``n_w, n_w + 1, ...``, everywhere;
    returns the new ``n_w``.

    Positions ``0 .. n_w - 1`` are the working set; their rows already exist, so the swapped columns are
    swapped in each of them too (:func:`_swap_columns`).  ``labels`` are the signs (binary) or class indices
    (joint).
    """
    first = n_w
    swapped_p = np.empty(points.shape[0], dtype=np.int64)
    swapped_q = np.empty(points.shape[0], dtype=np.int64)
    n_swaps = np.int64(0)  # not a literal 0: the callee would be compiled for Literal[int](0) as well
    for point in points:
        p = position[point]
        if p != n_w:
            swap_positions(p, n_w, X, norms, labels, inv_c, diag, alpha, G, order, position)
            swapped_p[n_swaps] = p
            swapped_q[n_swaps] = n_w
            n_swaps += 1
        n_w += 1
    _swap_columns(rows, first, swapped_p, swapped_q, n_swaps)
    return n_w


@njit(cache=True, nogil=True)
def swap_positions(p, q, X, norms, labels, inv_c, diag, alpha, G, order, position):
    """Exchange the points at working-order positions ``p`` and ``q`` in every per-point array."""
    for a in range(X.shape[1]):
        X[p, a], X[q, a] = X[q, a], X[p, a]
    for values in (norms, labels, inv_c, diag, alpha, G):
        values[p], values[q] = values[q], values[p]
    point_p, point_q = order[p], order[q]
    order[p], order[q] = point_q, point_p
    position[point_p], position[point_q] = q, p


@njit(cache=True, nogil=True)
def _swap_columns(rows, n_rows, swapped_p, swapped_q, n_swaps):
    """Apply the position swaps ``(swapped_p[s], swapped_q[s])`` to the columns of ``rows[:n_rows]``, row by row,
    all swaps of one row together (one column of every row per swap would be a cache and TLB miss per entry:
    the rows are tens of kB apart)."""
    for t in range(n_rows):
        row = rows[t]
        for s in range(n_swaps):
            p, q = swapped_p[s], swapped_q[s]
            row[p], row[q] = row[q], row[p]


@njit(cache=True, nogil=True)
def _is_idle(t, alpha, G, diag, lam, threshold):
    """Whether working-set position ``t`` is idle: zero weight and no violation (score ``G - lam/2 diag`` at least
    ``threshold``)."""
    return alpha[t] <= 0.0 and vertex_score(G[t], lam, diag[t]) >= threshold


@njit(cache=True, nogil=True)
def _drop_idle(n_w, threshold, lam, X, norms, labels, inv_c, diag, alpha, G, order, position, rows, new_dots):
    """Move the working-set points that are idle -- zero weight and no violation (score ``G - lam/2 diag`` at
    least ``threshold``) -- behind the others; returns the new ``n_w``.

    Their rows are not needed: ``G = Q a`` reads only rows with ``a_t > 0``, and a point outside the working set
    that comes to violate is added back (its row computed again) by the round's exact gradient.  A warm start
    begins with the old support, much of which can leave at a new C or gamma; each pairwise step costs passes
    over the whole working set, so shedding them makes the steps cheaper.  An idle point at ``p`` swaps places
    with the last non-idle one at ``q > p``; a dropped row is not needed, so ``rows[q]`` is only copied to ``p``,
    and the columns of the rows that stay are swapped row by row, all swaps of one row together (as
    :func:`move_batch_to_front`).  ``new_dots`` (kept inner products, by position) follow their points.
    """
    swapped_p = np.empty(n_w, dtype=np.int64)
    swapped_q = np.empty(n_w, dtype=np.int64)
    n_swaps = np.int64(0)  # int64, not literal 0: no extra Literal[int](0) compilation of the callees
    front = np.int64(0)
    back = n_w - 1
    keep_dots = new_dots.shape[0] > 0
    while True:
        while front <= back and not _is_idle(front, alpha, G, diag, lam, threshold):
            front += 1
        while back >= front and _is_idle(back, alpha, G, diag, lam, threshold):
            back -= 1
        if front >= back:
            break
        p, q = front, back
        swap_positions(p, q, X, norms, labels, inv_c, diag, alpha, G, order, position)
        rows[p, :] = rows[q, :]
        if keep_dots:
            new_dots[p, :] = new_dots[q, :]
        swapped_p[n_swaps] = p
        swapped_q[n_swaps] = q
        n_swaps += 1
    _swap_columns(rows, front, swapped_p, swapped_q, n_swaps)
    return front


@njit(cache=True, nogil=True)
def refresh_gradient(rows, alpha, n_w, diag, G):
    """``G = Q a`` over all points from the working set's rows (exact, resets drift; one gemv in the rows'
    dtype, float64 or float32); returns ``a'Qa``, ``a'diag``."""
    weights = alpha[:n_w].astype(rows.dtype)
    G[:] = np.dot(weights, rows[:n_w])  # BLAS gemv
    D = 0.0
    n2 = 0.0
    for t in range(n_w):
        G[t] += alpha[t] * (diag[t] - rows[t, t])  # Q's diagonal in float64, as inner_solve's steps take it
        D += alpha[t] * diag[t]
        n2 += alpha[t] * G[t]
    return n2, D


# A warm start expected to need more support vectors (``blend_start``) is mixed with the balanced uniform weights
# only when the line search's step toward them, estimated before any new kernel row is computed, is at least this.
# Exact steps of transitions of the pattern searches (ijcnn1 at 3,333 points; three USPS and three letter pairs):
# the 14 at 0.5 or more (0.58-0.95) had 83-100% of the points in the new solution, and the blend cut the pairwise
# steps by 57-79%.  Below 0.5 were some dense solutions too (ijcnn1, 0.22-0.49: 91-93% of the points, 25-46% fewer
# steps) but also the sparse ones where the blend cost steps: letter, C 1,024, gamma 1/16 -> 1/1024, 0.32-0.42,
# 40-47% of the points, up to 2.5x the steps; a USPS pair, gamma 1/16 -> 1/1024, 0.30, 17%, 923 steps against 284.
BLEND_MIN_STEP = 0.5
BLEND_SAMPLES = 256  # kernel values sampled per pair of signs to estimate u'Qu (_blend_step_estimate)


@njit(cache=True, nogil=True)
def _balanced_weights(y):
    """Half the weight uniformly on each sign's points (all of it on one sign).  The bias term
    ``(sum_i u_i y_i)^2`` of ``u'Qu`` is 0 and the ``1/C_i`` diagonal's share is small, which is how solutions of
    small ``C`` spread their weight (ijcnn1, 3,333 points, C 1/16: ``f(u)`` is 1.014 times the optimum).  Class
    and sample weights (``C_i``) are not taken into account: any point of the simplex is a valid target of the
    exact line search."""
    m = y.shape[0]
    n_positive = 0
    for i in range(m):
        n_positive += y[i] > 0
    u = np.empty(m)
    for i in range(m):
        if n_positive == 0 or n_positive == m:
            u[i] = 1.0 / m
        else:
            u[i] = 0.5 / n_positive if y[i] > 0 else 0.5 / (m - n_positive)
    return u


@njit(cache=True, nogil=True)
def _step_toward(uG, uQu, u_diag, n2, D, lam):
    """The exact line search's step in [0, 1] from ``a`` toward ``u`` (0 when it does not decrease ``f``), from
    ``u'Qa``, ``u'Qu``, ``u'diag``, ``a'Qa`` and ``a'diag``: ``f(a + t (u - a)) - f(a) = t * derivative + t^2 *
    curvature`` for ``f(a) = a'Qa - lam a'diag`` (Frandi et al. 2013 eq. 18's objective)."""
    derivative = 2.0 * (uG - n2) - lam * (u_diag - D)
    curvature = uQu - 2.0 * uG + n2
    if derivative >= 0.0 or curvature <= 0.0:
        return 0.0
    return min(1.0, -derivative / (2.0 * curvature))


@njit(cache=True, nogil=True)
def _blend_step_estimate(X, norms, y, kind, gamma, coef0, degree, bias, diag, inv_c, lam, alpha, G, n2, D, position):
    """The line search's step from ``a`` toward the balanced weights ``u`` (:func:`_blend_toward_balanced`), before
    any new kernel row is computed: ``G = Q a`` must be exact for every point (the warm start's rows).

    The derivative along ``u - a`` is exact.  For a positive semi-definite kernel the curvature ``(u - a)'Q(u - a)``
    is at least ``sum_i (u_i - a_i)^2 / C_i`` (``Q`` is a kernel matrix plus ``diag(1/C_i)``, Frandi et al. 2013 (18)),
    which bounds the step from above; only when that bound reaches ``BLEND_MIN_STEP`` is ``u'Qu`` estimated, from
    ``BLEND_SAMPLES`` kernel values per pair of signs.  The samples follow a fixed pseudo-random sequence over the
    points in their original order (``position[i]``: the position of original point ``i``), so the decision does
    not depend on how an earlier fit's kept rows ordered them.
    """
    u = _balanced_weights(y)
    m = y.shape[0]
    uG = 0.0
    u_diag = 0.0
    uQu = 0.0
    diagonal_curvature = 0.0
    for i in range(m):
        uG += u[i] * G[i]
        u_diag += u[i] * diag[i]
        uQu += u[i] * u[i] * diag[i]
        diagonal_curvature += inv_c[i] * (u[i] - alpha[i]) ** 2
    derivative = 2.0 * (uG - n2) - lam * (u_diag - D)
    if derivative >= 0.0 or -derivative < 2.0 * BLEND_MIN_STEP * diagonal_curvature:
        return 0.0
    n_positive = 0
    for i in range(m):
        n_positive += y[i] > 0
    positives = np.empty(n_positive, dtype=np.int64)  # positions, in the points' original order
    negatives = np.empty(m - n_positive, dtype=np.int64)
    n_p = 0
    n_n = 0
    for i in range(m):
        p = position[i]
        if y[p] > 0:
            positives[n_p] = p
            n_p += 1
        else:
            negatives[n_n] = p
            n_n += 1
    state = np.uint64(0x9E3779B97F4A7C15)
    for group in range(3):  # (+, +), (-, -), (+, -) twice (Q is symmetric)
        first = positives if group != 1 else negatives
        second = positives if group == 0 else negatives
        n_first, n_second = first.shape[0], second.shape[0]
        same = group < 2
        n_pairs = n_first * (n_first - 1) if same else 2 * n_first * n_second
        if n_pairs == 0:
            continue
        total = 0.0
        for _ in range(BLEND_SAMPLES):
            state ^= state << np.uint64(13)
            state ^= state >> np.uint64(7)
            state ^= state << np.uint64(17)
            k = np.int64(state % np.uint64(n_first))
            i = first[k]
            if same:  # a uniform pair of distinct points
                j = first[(k + 1 + np.int64((state >> np.uint64(32)) % np.uint64(n_first - 1))) % n_first]
            else:
                j = second[np.int64((state >> np.uint64(32)) % np.uint64(n_second))]
            dot = 0.0
            for f in range(X.shape[1]):
                dot += X[i, f] * X[j, f]
            value = kernel_from_dot(kind, dot, norms[i], norms[j], gamma, coef0, degree) + bias
            total += u[i] * u[j] * y[i] * y[j] * value
        uQu += n_pairs * total / BLEND_SAMPLES
    return _step_toward(uG, uQu, u_diag, n2, D, lam)


@njit(cache=True, nogil=True)
def _blend_toward_balanced(rows, alpha, G, y, diag, lam, n2, D):
    """Move a warm start ``a`` (every point in the working set, ``G = Q a``) to ``a + t (u - a)`` with the exact
    line search's ``t`` in [0, 1] (no move when that does not decrease ``f(a) = a'Qa - lam a'diag``), where ``u``
    holds the balanced weights (:func:`_balanced_weights`).  Returns ``a'Qa``, ``a'diag``.

    A start mixed with ``u`` suits fits whose solution has (almost) every point as a support vector: ijcnn1, 3,333
    points, C 4 -> 1/16 at gamma 1/16: the old solution is 1.16x the optimum, the blend (t = 0.88) 1.01x;
    11,996 pairwise steps cold, 5,443 from the old solution, 1,713 from the blend.
    """
    m = alpha.shape[0]
    u = _balanced_weights(y)
    Qu = np.dot(u.astype(rows.dtype), rows[:m]).astype(np.float64)  # rows are symmetric in position order: (Q u)_j
    uG = 0.0
    uQu = 0.0
    u_diag = 0.0
    for i in range(m):
        Qu[i] += u[i] * (diag[i] - rows[i, i])  # Q's diagonal in float64, as refresh_gradient
        uG += u[i] * G[i]
        uQu += u[i] * Qu[i]
        u_diag += u[i] * diag[i]
    t = _step_toward(uG, uQu, u_diag, n2, D, lam)
    if t == 0.0:
        return n2, D
    n2 = 0.0
    D = 0.0
    for i in range(m):
        alpha[i] = (1.0 - t) * alpha[i] + t * u[i]
        G[i] = (1.0 - t) * G[i] + t * Qu[i]
        n2 += alpha[i] * G[i]
        D += alpha[i] * diag[i]
    return n2, D


@njit(cache=True, nogil=True)
def gap_and_scale(G, diag, lam, n2, D):
    """The Frank-Wolfe duality gap ``2 (a'g - min_i g_i)`` of ``g = G - lam/2 diag`` and its scale (``2 a'Qa`` for
    the minimal-norm problem, ``R^2`` for the MEB), as the core-set solver reports them."""
    best = np.inf
    for r in range(G.shape[0]):
        best = min(best, vertex_score(G[r], lam, diag[r]))
    return 2.0 * (vertex_score(n2, lam, D) - best), max(2.0 * n2 if lam == 0.0 else D - n2, 1e-300)


@njit(cache=True, nogil=True)
def worst_outside(G, diag, lam, n_w, threshold, n_max):
    """Positions ``>= n_w`` scoring below ``threshold``, worst first, at most ``n_max``."""
    m = G.shape[0]
    scores = np.empty(m - n_w)
    for r in range(n_w, m):
        scores[r - n_w] = vertex_score(G[r], lam, diag[r])
    order = np.argsort(scores)
    n = 0
    while n < min(n_max, m - n_w) and scores[order[n]] < threshold:
        n += 1
    return order[:n] + n_w


ROUND_GOES_ON = -1  # solve_capped_round: no stopping rule met


@njit(cache=True, nogil=True)
def solve_capped_round(rows, alpha, G, diag, n_w, lam, second_rule, gmdm_k, eta, tol, outer_rel_gap, max_iter,
                       steps, round_steps, max_time, t_start, inv_c):
    """One round of the cached-rows loop: solve the working set, then the exact gap of every point.

    The working set is solved inexactly while points outside still violate (to a tenth of the last exact
    gap), with the core-set solver's own pairwise-step loop, at most ``round_steps``
    steps; then the exact gradient of every point, from the working set's rows, gives the true duality gap.
    Returns (steps taken, the inner tolerance, ``a'Qa``, ``a'diag``, gap, scale, status): the status is
    :data:`ROUND_GOES_ON` or the reason to stop (converged at relative gap ``tol``, ``max_iter``, ``max_time``).
    ``inv_c`` (``1/C`` by position, or empty): at ``tol >= 1e-3`` the L2-SVM's duality gap over every point
    (:func:`~coresvm.solvers.core_steps.l2svm_duality_gap`) also ends the fit, as in the core-set solver.
    """
    dual = duality_gap_weights(inv_c, tol, lam)
    inner_tol = max(0.5 * tol, 0.1 * outer_rel_gap)
    time_left = max(max_time - (now() - t_start), 0.0)
    taken, _ = inner_solve(rows, alpha, G, diag, n_w, lam, second_rule, gmdm_k, eta, inner_tol,
                           min(max_iter - steps, round_steps), time_left, dual[:n_w], np.int64(STOP_RELATIVE_GAP),
                           np.empty(0), 0.0, 0.0, ROWS_STORED, 1, None)
    n2, D = refresh_gradient(rows, alpha, n_w, diag, G)
    gap, scale = gap_and_scale(G, diag, lam, n2, D)
    status = ROUND_GOES_ON
    if gap / scale > tol and dual.shape[0] > 0:
        gap = min(gap, l2svm_duality_gap(alpha, G, dual, G.shape[0]))  # the gap that certifies the stop is reported
    if gap / scale <= tol:
        status = STATUS_CONVERGED
    elif steps + taken >= max_iter:
        status = STATUS_MAX_ITER
    elif now() - t_start > max_time:
        status = STATUS_MAX_TIME
    return taken, inner_tol, n2, D, gap, scale, status


@njit(cache=True, nogil=True)  # releases the GIL: one-vs-one pairs in joblib threads run truly in parallel
def solve_dense_loop(X, norms, labels, inv_c, kind, gamma, coef0, degree, bias, diag, lam, second_rule, gmdm_k, eta,
                     tol, max_iter, max_time, init_idx, init_alpha, batch_size, scheme, old_dots, old_points,
                     old_slots, old_columns, keep_dots, kept_rows, kept_order, kept_inv_c, keep_rows, blend_start):
    """Core-set rounds with cached kernel rows and the exact gradient, until the relative gap is <= ``tol``.

    ``X, norms, labels, inv_c, diag`` are the problem's own copies: they are permuted
    in place so that the working set is always the leading positions.  ``labels`` and ``scheme``
    (:class:`RowScheme`) make the problem binary (the signs, :data:`BINARY_ROWS`) or the joint multiclass one
    (class indices and the label Gram's two values, :func:`~coresvm.solvers.dense_joint.run_dense_joint`).
    Returns (alpha over all m points in the original order, steps, gap, scale, status,
    a'Qa, kernel rows computed, rounds, inner-product rows, their points, the kept rows (three values), the
    rows written).

    Each round's inner solve takes at most ``max(scheme.round_steps_per_point * n_w, scheme.min_round_steps)``
    pairwise steps; then the working-set points that are idle (zero weight, no violation) leave it when they are
    at least ``1 / scheme.idle_share`` of it (:func:`_drop_idle`), and the ``max(batch_size, n_w /
    GROWTH_DIVISOR)`` worst violators outside join.

    The rows live in ``kept_rows`` when it has rows (below), else in a new ``m x m`` buffer.  A buffer of fewer
    than ``m`` rows (the joint problem's byte budget) holds at most that many working-set points: when a batch
    does not fit, the points with zero weight leave first, then the batch is cut to the room left; when there is
    none, the loop stops with ``STATUS_CORE_SET_FULL`` (the solution so far is feasible).

    Inner products kept by an earlier fit on the same points (``old_dots[old_slots[k], :]`` for the original index
    ``old_points[k]``, all columns in original order, or in the order ``old_columns`` when it is not empty: row
    and column of each point in a search's shared inner products) are read instead of computed: the kernel, ``C``
    and the signs may differ, only ``X`` must be the same.  With ``keep_dots`` the working set's inner products are
    returned the same way (the last two values; empty otherwise) for the next fit.  Without either (no rows in
    ``old_points``, ``keep_dots`` False) the rows are computed as always (:func:`_fill_rows`).

    Kernel rows kept by an earlier fit of the same problem with the same kernel (:func:`_start_from_kept_rows`:
    ``kept_rows``, ``kept_order``, ``kept_inv_c``; only ``C`` may differ) are the start's working set, rows
    and all; the warm start's weights go on its points.  A kept buffer with an empty ``kept_order``
    is used as memory only: its values are overwritten.  With ``keep_rows`` the buffer is returned the same
    way after the other values (else empty arrays), and the number of rows ever written (its resident size).

    With ``blend_start`` (a binary warm start expected to need more support vectors than it has) every point joins
    the working set at once and the start moves toward the balanced uniform weights (:func:`_blend_toward_balanced`).
    """
    m = X.shape[0]
    order = np.arange(m)  # position -> original index
    position = np.arange(m)  # original index -> position
    alpha = np.zeros(m)
    G = np.zeros(m)
    n_w = 0
    if kept_order.shape[0] == m:  # the buffer is taken over: the earlier fit does not keep it
        rows = kept_rows
        n_w = _start_from_kept_rows(rows, kept_order, kept_inv_c, X, norms, labels, inv_c, diag, order, position)
    elif kept_rows.shape[0] > 0:  # a buffer lent as memory only (another kernel's rows, or the joint budget's)
        rows = kept_rows
    else:  # row t: Q[t, :] for working-set position t; only rows < n_w are ever written
        rows = np.empty((m, m), dtype=kept_rows.dtype)
    capacity = rows.shape[0]
    dots = np.empty((scheme.dot_chunk, m))  # the reused buffer of _fill_rows (none: one product per batch)
    reuse = old_points.shape[0] > 0 or keep_dots
    old_slot = np.full(m, -1, dtype=np.int64)  # original index -> row of old_dots
    if reuse:
        for k in range(old_points.shape[0]):
            old_slot[old_points[k]] = old_slots[k]
    new_dots = np.empty((m if keep_dots else 0, m))  # row t: <x_order[t], x_j> for all j, original order
    dual_inv_c = inv_c[:m] if scheme.l2svm_gap else inv_c[:0]  # the same type either way: one compilation
    first = n_w
    outside = init_idx[position[init_idx] >= n_w]  # a warm start's points without a kept row
    n_w = move_batch_to_front(outside, n_w, X, norms, labels, inv_c, diag, alpha, G, order, position, rows)
    for k in range(init_idx.shape[0]):
        alpha[position[init_idx[k]]] = init_alpha[k]
    _fill_new_rows(X, norms, labels, scheme, inv_c, kind, gamma, coef0, degree, bias, first, n_w, rows, dots, reuse,
                   order, old_dots, old_slot, old_columns, new_dots)
    n2, D = refresh_gradient(rows, alpha, n_w, diag, G)
    if blend_start and _blend_step_estimate(X, norms, labels, kind, gamma, coef0, degree, bias, diag, inv_c, lam,
                                            alpha, G, n2, D, position) >= BLEND_MIN_STEP:
        # The points outside are positions n_w..m-1 already: all join, with their rows, filled in batches of at most
        # m / GROWTH_DIVISOR rows (each batch's inner products are a temporary array of that many rows).
        chunk = max(batch_size, m // GROWTH_DIVISOR)
        for start in range(n_w, m, chunk):
            _fill_new_rows(X, norms, labels, scheme, inv_c, kind, gamma, coef0, degree, bias, start,
                           min(start + chunk, m), rows, dots, reuse, order, old_dots, old_slot, old_columns, new_dots)
        n_w = m
        n2, D = _blend_toward_balanced(rows, alpha, G, labels, diag, lam, n2, D)
    n_rows = n_w - first  # kernel rows computed
    rows_written = n_w
    t_start = now()
    steps = np.int64(0)  # not a literal 0: solve_capped_round would also be compiled for Literal[int](0)
    rounds = 0
    status = STATUS_MAX_ITER
    gap, scale = gap_and_scale(G, diag, lam, n2, D)
    outer_rel_gap = gap / scale
    while True:
        taken, inner_tol, n2, D, gap, scale, stop = solve_capped_round(
            rows, alpha, G, diag, n_w, lam, second_rule, gmdm_k, eta, tol, outer_rel_gap, max_iter, steps,
            max(scheme.round_steps_per_point * n_w, scheme.min_round_steps), max_time, t_start, dual_inv_c)
        steps += taken
        rounds += 1
        outer_rel_gap = gap / scale
        if stop != ROUND_GOES_ON:
            status = stop
            break
        threshold = vertex_score(n2, lam, D) - 0.5 * tol * scale
        if scheme.idle_share > 0:
            n_idle = 0
            for t in range(n_w):
                n_idle += _is_idle(t, alpha, G, diag, lam, threshold)
            if n_idle >= max(batch_size, n_w // scheme.idle_share):
                n_w = _drop_idle(n_w, threshold, lam, X, norms, labels, inv_c, diag, alpha, G, order, position, rows,
                                 new_dots)
        new = worst_outside(G, diag, lam, n_w, threshold, max(batch_size, n_w // GROWTH_DIVISOR))
        if new.shape[0] == 0:
            if taken == 0 and inner_tol <= 0.5 * tol:
                break  # numerically stuck (not expected): stop rather than loop
            continue  # every violator is in the working set: solve it tighter
        new_points = order[new]
        if n_w + new_points.shape[0] > capacity:  # only a buffer of fewer than m rows fills up
            # points of zero weight give their rows back (-inf: whether they violate or not)
            n_w = _drop_idle(n_w, -np.inf, lam, X, norms, labels, inv_c, diag, alpha, G, order, position, rows,
                             new_dots)
            if n_w >= capacity:
                status = STATUS_CORE_SET_FULL
                break
            new_points = new_points[:capacity - n_w]  # the worst violators first
        first = n_w
        n_w = move_batch_to_front(new_points, n_w, X, norms, labels, inv_c, diag, alpha, G, order, position, rows)
        _fill_new_rows(X, norms, labels, scheme, inv_c, kind, gamma, coef0, degree, bias, first, n_w, rows, dots,
                       reuse, order, old_dots, old_slot, old_columns, new_dots)
        n_rows += n_w - first
        rows_written = max(rows_written, n_w)
    alpha_original = np.zeros(m)
    for t in range(n_w):
        alpha_original[order[t]] = alpha[t]
    dots, dot_points = new_dots, order[:0].copy()
    if keep_dots:  # a compact copy: the m x m buffer would keep its untouched rows' memory too
        dots, dot_points = new_dots[:n_w].copy(), order[:n_w].copy()
    if keep_rows:
        kept = (rows, order.copy(), inv_c[:n_w].copy())
    else:
        kept = (rows[:0, :0].copy(), order[:0].copy(), inv_c[:0].copy())
    return (alpha_original, steps, gap, scale, status, n2, n_rows, rounds, dots, dot_points, *kept,
            np.int64(rows_written))


@njit(cache=True, nogil=True)
def _start_from_kept_rows(rows, kept_order, kept_inv_c, X, norms, labels, inv_c, diag, order, position):
    """Put the points in the kept fit's order; its working set (the first ``len(kept_inv_c)`` positions) and their
    rows are this fit's starting working set.  Returns its size.

    The rows ``Q[t, :] = y_t y_j (k(x_t, x_j) + bias) + [t = j] / C_t`` hold the same kernel values for the same
    points and kernel, so only the diagonal term changes with ``C`` (Frandi et al. 2013 eq. 13's extended kernel):
    ``Q_tt += 1/C_t(new) - 1/C_t(old)``.  The columns are already in this order.
    """
    for values in (norms, labels, inv_c, diag):
        values[:] = values[kept_order]
    X[:, :] = X[kept_order]
    order[:] = kept_order
    for t in range(order.shape[0]):
        position[order[t]] = t
    n_w = kept_inv_c.shape[0]
    for t in range(n_w):
        rows[t, t] += inv_c[t] - kept_inv_c[t]
    return n_w


@njit(cache=True, nogil=True)
def _gather_problem(X_all, rows, signs, C, kind, gamma, coef0, degree, bias):
    """The sub-problem of the training rows ``rows``: its own float64 copy of their features, squared norms,
    signs, ``1 / C_i`` and ``Q_ii``, built without the GIL (the arrays :func:`solve_dense_loop` permutes)."""
    m = rows.shape[0]
    d = X_all.shape[1]
    X = np.empty((m, d))
    norms = np.empty(m)
    y = np.empty(m)
    inv_c = np.empty(m)
    diag = np.empty(m)
    for i in range(m):
        source = X_all[rows[i]]
        norm = 0.0
        for a in range(d):
            value = np.float64(source[a])
            X[i, a] = value
            norm += value * value
        norms[i] = norm
        y[i] = np.float64(signs[i])
        inv_c[i] = 1.0 / C[i]
        # Q_ii = y_i^2 (k(x_i, x_i) + bias) + 1 / C_i (the problem's extended kernel, problem.py)
        diag[i] = kernel_from_dot(kind, norm, norm, norm, gamma, coef0, degree) + bias + inv_c[i]
    return X, norms, y, inv_c, diag


@njit(cache=True, nogil=True)  # the whole sub-problem, set-up included, runs without the GIL
def solve_rows_dense(X_all, rows, signs, C, kind, gamma, coef0, degree, bias, lam, second_rule, gmdm_k, eta, tol,
                     max_iter, max_time, init_idx, init_alpha, batch_size, n_init, seed, old_dots, old_points,
                     old_slots, old_columns, keep_dots, kept_rows, kept_order, kept_inv_c, keep_rows, blend_start):
    """:func:`solve_dense_loop` on the rows ``rows`` of ``X_all`` with signs ``signs`` and penalties ``C``
    (one per row of the sub-problem); ``init_idx`` are positions in ``rows``; without them (empty) the
    start is :func:`balanced_start` with ``n_init`` and ``seed``, uniform weights; given ones are rescaled to
    sum 1.  ``old_dots``,
    ``old_points`` and ``keep_dots``: inner products of an earlier fit on the same rows, as in
    :func:`solve_dense_loop` (positions in ``rows``); so are ``kept_rows``, ``kept_order``, ``kept_inv_c`` and
    ``keep_rows``, an earlier fit's kernel rows; ``blend_start`` applies to a warm start only."""
    X, norms, y, inv_c, diag = _gather_problem(X_all, rows, signs, C, kind, gamma, coef0, degree, bias)
    blend_start = blend_start and init_idx.shape[0] > 0
    if init_idx.shape[0] == 0:
        init_idx = balanced_start(y, n_init, seed)
        init_alpha = np.full(init_idx.shape[0], 1.0 / init_idx.shape[0])
    else:  # a warm start's weights, rescaled onto the simplex (rows that are gone were dropped)
        init_alpha = init_alpha / np.sum(init_alpha)
    return solve_dense_loop(X, norms, y, inv_c, kind, gamma, coef0, degree, bias, diag, lam, second_rule, gmdm_k,
                            eta, tol, max_iter, max_time, init_idx, init_alpha, batch_size, BINARY_ROWS, old_dots,
                            old_points, old_slots, old_columns, keep_dots, kept_rows, kept_order, kept_inv_c,
                            keep_rows, blend_start)


def run_dense(problem: SimplexProblem, options: SolverOptions, init_idx: np.ndarray | None = None,
              init_alpha: np.ndarray | None = None) -> SolverResult:
    """Solve a dense binary ``problem`` with :func:`solve_dense_loop`, like :func:`~coresvm.solvers.driver.run_engine`.

    Uses ``options.tol``, ``max_iter``, ``max_time``, ``eta``, ``second_vertex``, ``gmdm_k``, ``seed``,
    ``n_init`` and ``cache_bytes``; the problem must fit the budget (:func:`fits_dense`).  Without
    ``init_idx`` it starts, as the engine, from a class-balanced random subset with uniform weights.
    ``cache_misses`` in the result counts the kernel rows computed.
    """
    if problem.is_joint:
        raise ValueError("the dense small-problem solver takes binary problems, not the joint multiclass one")
    return run_dense_rows(problem.X, np.arange(problem.n_points), problem.y, problem.C, problem.kernel,
                          problem.bias, problem.lam, options, init_idx, init_alpha)


NO_DOT_ROWS = (np.empty(0, dtype=np.int64), np.empty((0, 0)))
NO_COLUMNS = np.empty(0, dtype=np.int64)  # kept inner products in their problem's own column order
NO_KERNEL_ROWS = (np.empty((0, 0)), np.empty(0, dtype=np.int64), np.empty(0))


def run_dense_rows(X, rows: np.ndarray, signs: np.ndarray, C: np.ndarray, kernel: KernelSpec, bias: bool, lam: float,
                   options: SolverOptions, init_idx: np.ndarray | None = None, init_alpha: np.ndarray | None = None,
                   dot_rows: tuple = NO_DOT_ROWS, keep_dots: bool = False, kernel_rows: tuple = NO_KERNEL_ROWS,
                   keep_rows: bool = False, blend_start: bool = False) -> SolverResult:
    """Solve the binary problem on the rows ``rows`` of a dense ``X`` (signs and ``C_i`` per row of the
    sub-problem) with :func:`solve_rows_dense`; as :func:`run_dense`, with ``support`` in positions of ``rows``.

    The sub-problem's arrays are gathered inside the compiled call, so a one-vs-one pair in a worker
    thread holds the GIL only for the few small Python steps around it (argument conversion, the result);
    the class-balanced start is drawn in the compiled call too (:func:`balanced_start`).

    ``dot_rows = (points, dots)``: ``dots[k, j] = <x_points[k], x_j>`` for positions ``points[k]`` and ``j`` in
    ``rows``, kept by an earlier fit on the same rows of the same ``X`` (any kernel, ``C`` or signs); those
    rows' inner products are read instead of computed.  ``dot_rows = (points, dots, slots, columns)`` reads them
    at ``dots[slots[k], columns[j]]`` instead (a search's inner products of all its rows, shared by its folds).
    With ``keep_dots`` the result's ``dot_rows`` holds the working set's inner products the same way (own column
    order), for the next fit.  On the warm path of a hyper-parameter search
    most kernel rows belong to points that an earlier fit on the same fold had in its working set, and the
    inner products are most of a kernel row's cost when there are many features (a 220-point USPS pair, 256
    features: 2.3 of 2.7 us per row; reading a kept row: 0.13 us).

    ``kernel_rows = (buffer, order, inv_c)``: the kernel rows an earlier fit of the same problem (same rows, signs,
    kernel and bias; any ``C``) kept with ``keep_rows`` -- the result's ``kernel_rows`` (buffer, order, inv_c,
    rows written).  The new fit starts from that fit's working set with its rows (:func:`_start_from_kept_rows`),
    in the same buffer, which it takes over: the earlier result's buffer must not be used again.  A warm fit at
    the same gamma then computes no row for the points it starts from.  ``kernel_rows = (buffer, empty, empty)``
    lends an ``m x m`` buffer as memory only (an earlier fit's at another kernel): the fit writes its rows there
    instead of into new memory, whose first touch costs page faults (about 1.5 ms per MB on the benchmark VM).

    ``blend_start``: a warm start (``init_idx``) expected to need more support vectors than it has (a smaller C or
    gamma) starts with every point, mixed with the balanced uniform weights (:func:`_blend_toward_balanced`).
    """
    if not isinstance(X, np.ndarray):
        raise ValueError("the dense small-problem solver needs a dense NumPy X (CSR and memory maps: use 'coreset')")
    n_points = len(rows)
    if not fits_dense(n_points, options.cache_bytes):
        raise ValueError(
            f"a problem of {n_points} points needs {n_points ** 2 * 8 / 2**20:.0f} MB for its "
            f"kernel rows; the budget (cache_size) is {options.cache_bytes / 2**20:.0f} MB"
        )
    if init_idx is None:  # drawn in the compiled call (balanced_start)
        init_idx, init_alpha = np.empty(0, dtype=np.int64), np.empty(0)
    start = time.perf_counter()
    old_points, old_dots, old_slots, old_columns = (dot_rows if len(dot_rows) == 4
                                                    else (*dot_rows, np.arange(len(dot_rows[0])), NO_COLUMNS))
    kept_rows, kept_order, kept_inv_c = kernel_rows
    if (kept_rows.size or len(kept_order)) and (kept_rows.shape != (n_points, n_points)
                                                or len(kept_order) not in (0, n_points)):
        raise ValueError(f"kept kernel rows of shape {kept_rows.shape} do not fit a problem of {n_points} points")
    if len(kept_order) and keep_dots:
        raise ValueError("keep_dots needs every working-set row's inner products: not with kept kernel rows")
    (alpha, steps, gap, scale, status, n2, n_rows, rounds, new_dots, new_points, *new_kernel_rows,
     rows_written) = solve_rows_dense(
        # int64 rows and contiguous C (not int32 rows_where indices, a broadcast C): the signature that
        # solve_many_rows_dense compiles too, so a fresh environment compiles this loop once, not twice
        _compiled_X(X), np.ascontiguousarray(rows, dtype=np.int64), np.ascontiguousarray(signs),
        np.ascontiguousarray(C, dtype=np.float64), *_compiled_settings(kernel, bias, lam, options),
        float(options.max_time), np.ascontiguousarray(init_idx, dtype=np.int64),
        np.ascontiguousarray(init_alpha, dtype=np.float64),
        np.int64(BATCH), np.int64(options.n_init), np.uint32(options.seed % 2**32),
        np.ascontiguousarray(old_dots, dtype=np.float64), np.ascontiguousarray(old_points, dtype=np.int64),
        np.ascontiguousarray(old_slots, dtype=np.int64), np.ascontiguousarray(old_columns, dtype=np.int64),
        bool(keep_dots), kept_rows, np.ascontiguousarray(kept_order, dtype=np.int64),
        np.ascontiguousarray(kept_inv_c, dtype=np.float64), bool(keep_rows), bool(blend_start),
    )
    elapsed = time.perf_counter() - start
    support = np.flatnonzero(alpha > 0)
    return solver_result(support, alpha[support], steps, gap, scale, status, n2, elapsed, cache_misses=int(n_rows),
                         rounds=int(rounds), cache_bytes=int(n_rows) * n_points * 8, dot_rows=(new_points, new_dots),
                         kernel_rows=(*new_kernel_rows, int(rows_written)) if keep_rows else ())


def _compiled_X(X) -> np.ndarray:
    """``X`` as the compiled solvers read it: C-contiguous float32 or float64."""
    return np.ascontiguousarray(X if X.dtype in (np.float32, np.float64) else X.astype(np.float64))


def _compiled_settings(kernel: KernelSpec, bias: bool, lam: float, options: SolverOptions) -> tuple:
    """The kernel, bias, ``lam`` and solver settings as :func:`solve_rows_dense` and :func:`solve_many_rows_dense`
    take them, in their order: kind, gamma, coef0, degree, bias, lam, second rule, gmdm_k, eta, tol, max_iter."""
    return (np.int64(kernel.code), float(kernel.gamma), float(kernel.coef0), float(kernel.degree),
            1.0 if bias else 0.0, float(lam), np.int64(SECOND_VERTEX_RULES[options.second_vertex]),
            float(options.gmdm_k), float(options.eta), float(options.tol), np.int64(options.max_iter))


# Columns of the per-problem statistics returned by solve_many_rows_dense.
(STAT_STEPS, STAT_GAP, STAT_SCALE, STAT_STATUS, STAT_SQUARED_NORM, STAT_ROWS, STAT_ROUNDS,
 STAT_TIME) = range(8)


@njit(cache=True, nogil=True)  # a whole decomposition (or a worker's share of it) without the GIL
def solve_many_rows_dense(X_all, rows, offsets, signs, C, kind, gamma, coef0, degree, bias, lam, second_rule, gmdm_k,
                          eta, tol, max_iter, max_time, init_idx, init_alpha, init_offsets, batch_size, n_init, seeds,
                          blend_start):
    """:func:`solve_rows_dense` on many sub-problems, one after the other, in one compiled call.

    Sub-problem ``k`` is ``rows[offsets[k]:offsets[k + 1]]`` (with those entries of ``signs`` and ``C``), its warm
    start ``init_idx/init_alpha[init_offsets[k]:init_offsets[k + 1]]`` (empty: the balanced random start of
    ``seeds[k]``; ``blend_start`` as :func:`solve_rows_dense`'s).  Each gets an equal share of the time still left
    (``max_time`` for all).  Returns the weights of every row (concatenated as ``rows``) and one row of statistics
    per sub-problem (columns ``STAT_*``).

    Letter's 325 one-vs-one pairs of about 80 points take 20-40 ms to solve; the Python around one
    :func:`run_dense_rows` call per pair (arguments, the result record) cost about as much again.
    """
    n_problems = offsets.shape[0] - 1
    alpha_all = np.zeros(rows.shape[0])
    stats = np.zeros((n_problems, 8))
    no_points = np.empty(0, dtype=np.int64)
    no_dots = np.empty((0, 0))
    no_inv_c = np.empty(0)
    no = np.bool_(False)  # a bool, not Literal[bool](False): the same solve_rows_dense as run_dense_rows compiles
    t_start = now()
    for k in range(n_problems):
        first, last = offsets[k], offsets[k + 1]
        share = max((max_time - (now() - t_start)) / (n_problems - k), 1e-3)
        started = now()
        alpha, steps, gap, scale, status, n2, n_rows, rounds = solve_rows_dense(
            X_all, rows[first:last], signs[first:last], C[first:last], kind, gamma, coef0, degree, bias, lam,
            second_rule, gmdm_k, eta, tol, max_iter, share, init_idx[init_offsets[k]:init_offsets[k + 1]],
            init_alpha[init_offsets[k]:init_offsets[k + 1]], batch_size, n_init, seeds[k], no_dots, no_points,
            no_points, no_points, no, no_dots, no_points, no_inv_c, no, blend_start)[:8]
        alpha_all[first:last] = alpha
        stats[k, STAT_STEPS] = steps
        stats[k, STAT_GAP] = gap
        stats[k, STAT_SCALE] = scale
        stats[k, STAT_STATUS] = status
        stats[k, STAT_SQUARED_NORM] = n2
        stats[k, STAT_ROWS] = n_rows
        stats[k, STAT_ROUNDS] = rounds
        stats[k, STAT_TIME] = now() - started
    return alpha_all, stats


def run_many_dense_rows(X, rows: np.ndarray, offsets: np.ndarray, signs: np.ndarray, C: np.ndarray,
                        kernel: KernelSpec, bias: bool, lam: float, options: SolverOptions, seeds: np.ndarray,
                        init_idx: np.ndarray, init_alpha: np.ndarray, init_offsets: np.ndarray,
                        max_time: float, blend_start: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """:func:`run_dense_rows` for many sub-problems at once (:func:`solve_many_rows_dense`); ``options.seed`` and
    ``options.max_time`` are replaced by ``seeds`` (one per sub-problem) and ``max_time`` (for all).

    Returns (the weights of every row, the per-problem statistics).  Every sub-problem must fit the budget.
    """
    sizes = np.diff(offsets)
    if len(sizes) and not fits_dense(int(sizes.max()), options.cache_bytes):
        raise ValueError(f"a sub-problem of {int(sizes.max())} points does not fit the budget (cache_size)")
    return solve_many_rows_dense(
        _compiled_X(X), np.ascontiguousarray(rows, dtype=np.int64), np.ascontiguousarray(offsets, np.int64),
        np.ascontiguousarray(signs), np.ascontiguousarray(C, dtype=np.float64),
        *_compiled_settings(kernel, bias, lam, options), float(max_time),
        np.ascontiguousarray(init_idx, dtype=np.int64), np.ascontiguousarray(init_alpha, dtype=np.float64),
        np.ascontiguousarray(init_offsets, dtype=np.int64), np.int64(BATCH), np.int64(options.n_init),
        np.ascontiguousarray(seeds, dtype=np.uint32), bool(blend_start))
