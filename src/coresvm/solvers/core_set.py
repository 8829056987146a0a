"""Core-set solver (CVM): grow a working set from sampled violators, solve it in memory.

The Core Vector Machine scheme (Tsang et al. 2005; Frandi et al. 2013, Alg. 1) on the same simplex
problem as the engine::

    repeat
        draw candidates at random; score them against the current solution
        add the worst violators to the core set (CVM: the furthest 1 of 59)
        re-solve the problem restricted to the core set, warm-started
    until a fresh sample (twice in a row) holds no violator

The restricted problem is solved with the engine's pairwise step (SMO/MDM on
the simplex) and IMDM/GMDM second-vertex rules from
:mod:`~coresvm.solvers.steps`, on a dense in-memory Gram matrix of the core set,
so an inner step costs O(core set) arithmetic and no kernel evaluations; past
:data:`COMPUTED_ROWS_FROM` points of few-feature data the two rows of each step
are computed instead (:meth:`CoreSetState.compute_rows_from`).  The
outer scan costs ``n_candidates x |active|`` kernel values per round (with
``sweep_rounds``, at least ``m / sweep_rounds`` candidates: a sweep of the points
in a bounded number of rounds, each a re-solve), and runs as BLAS blocks with
NumPy's vectorized ``exp`` (the rounds are few, so the outer loop lives in Python).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numba import njit, prange
from scipy.stats import beta as beta_distribution

from ..cache import address_space_is_lazy, lazy_zeros
from ..kernels import (
    RightOperand,
    apply_kernel_to_dots,
    default_kernel_threads,
    dense_copy_fits,
    exp_in_place,
    kernel_product,
    parallel_loop_threads,
    product_block_rows,
    rbf_factor_limit,
    rbf_factorizable,
    rbf_row_values,
    rbf_row_values_over_nonzeros,
    run_row_blocks,
    squared_norms,
    widened_dot,
)
from .active_face import NewtonRecord, diagonal_shortfall, gram_rows_product, solve_with_newton
from .clock import fit_clock, now
from .engine import (
    SECOND_IMDM,
    SECOND_MDM,
    SECOND_VERTEX_RULES,
    STATUS_CALLBACK,
    STATUS_CONVERGED,
    STATUS_CORE_SET_FULL,
    STATUS_MAX_ITER,
    STATUS_MAX_TIME,
    print_progress,
)
from .extremes import max_no_nan, min_no_nan
from .helper_thread import (
    ARGUMENTS,
    NO_CONTROL,
    RESULT,
    HelperThread,
    claim_second_half,
    half_bounds_compiled,
    new_control,
    next_command,
    publish,
    second_half_done,
    wait_for_second_half,
)
from .sampling import SWEEP_MAX_POINTS, NearMarginPoints, draw_distinct, next_candidates
from .steps import (
    CURVATURE_FLOOR,
    clipped_step,
    pairwise_direction,
    partner_value,
    smallest_score,
    toward_direction,
    vertex_score,
)


# Inlined into inner_solve, like _update_gradient: a call copies and reference-counts every array argument, which
# cost AESVM's CheckPoints (~35 points, ~15 steps per solve) a fifth of their time.
@njit(cache=True, inline="always")
def _core_set_sums(alpha, G, diag_w, n_w, lam, lin, with_lin, find_mdm_partner):
    """``n2 = a'Qa``, ``D = a'diag(Q)``, the toward vertex ``argmin_t G_t - lam/2 Q_tt`` and its score, ``lin'a``
    (0 unless ``with_lin``), and with ``find_mdm_partner`` MDM's partner (as :func:`_update_gradient`), else -2:
    one pass."""
    n2 = 0.0
    D = 0.0
    lin_a = 0.0
    p_i = 0
    best = np.inf
    p_w = -1
    worst = -np.inf  # the first largest score among the points with weight
    for t in range(n_w):
        n2 += alpha[t] * G[t]
        D += alpha[t] * diag_w[t]
        if with_lin:
            lin_a += alpha[t] * lin[t]
        score = vertex_score(G[t], lam, diag_w[t])
        if score < best:
            best = score
            p_i = t
        if find_mdm_partner and alpha[t] > 0.0 and score > worst:
            worst = score
            p_w = t
    if not find_mdm_partner:
        return n2, D, p_i, best, lin_a, -2
    return n2, D, p_i, best, lin_a, (p_w if worst > best else -1)


@njit(cache=True)
def select_second_vertex(row_i, alpha, G, diag_w, n_w, lam, p_i, best, second_rule, gmdm_k, values):
    """The active point that gives weight to ``p_i`` (whose row of ``Q`` is ``row_i``) in a pairwise step
    ``e_{p_i} - e_t``, or -1.

    Among active points scoring above ``best`` (the score ``G - lam/2 diag`` of
    ``p_i``): MDM the largest score; IMDM the largest decrease of the clipped
    step (Franc; Strack 2013, eq. 5.33); GMDM ``-f'(0) / curvature^(k/2)`` (eq. 5.35).
    ``values``: IMDM's work space, the values and after them their blocks' maxima: at least
    ``partner_work_space(n_w)`` entries (allocated when shorter).  Shared by the core-set inner solve and the gsvm
    family.
    """
    if second_rule == SECOND_IMDM:
        if values.shape[0] < partner_work_space(n_w):
            values = np.empty(partner_work_space(n_w))
        blocks = values[n_w:]
        n_blocks = imdm_values(row_i, alpha, G, diag_w, n_w, lam, diag_w[p_i], best, values, blocks)
        block, largest = _best_block(blocks, n_blocks, 0.0)
        return _first_equal(values, n_w, 1.0, block, largest)
    if second_rule == SECOND_MDM and n_w > PLAIN_SCAN_MAX:
        p_j = largest_active_score(alpha, G, diag_w, n_w, lam, best)
        if p_j != p_i:  # p_i scores best, which is not above best: never chosen, but the loop below is the rule
            return p_j
    G_i = G[p_i]
    Q_ii = diag_w[p_i]
    p_j = -1
    best_value = 0.0
    worst = -np.inf
    for t in range(n_w):
        if alpha[t] <= 0.0 or t == p_i:
            continue
        score = vertex_score(G[t], lam, diag_w[t])
        if score <= best:
            continue
        if second_rule == SECOND_MDM:
            if score > worst:
                worst = score
                p_j = t
            continue
        derivative, curvature = pairwise_direction(G_i, G[t], Q_ii, diag_w[t], row_i[t], lam)
        if curvature <= CURVATURE_FLOOR:
            continue
        value = partner_value(derivative, curvature, alpha[t], False, gmdm_k)
        if value > best_value:
            best_value = value
            p_j = t
    return p_j


@njit(inline="always", cache=True)
def partner_work_space(n):
    """The entries of :func:`select_second_vertex`'s work space for ``n`` points: the IMDM values and their blocks'
    maxima (allocated once per solve, not per step)."""
    return n + n // EXTREME_BLOCK + 1


# NumPy's error model: without the branch that raises Python's ZeroDivisionError, LLVM vectorizes the loop
# (AVX2: 2.3 -> 0.7-1.1 ns per point; the search is most of a pairwise step's time).
@njit(cache=True, error_model="numpy")
def imdm_values(row_i, alpha, G, diag_w, n_w, lam, Q_ii, best, values, blocks):
    """IMDM's value of every point as the partner of the toward vertex (score ``best``): the objective's
    decrease by the pairwise step clipped at the point's weight (Strack 2013, eq. 5.33); 0 where the point
    cannot be a partner (no weight, a score not above ``best``, or a flat direction).  Each block's largest
    value (0 when none is positive) goes to ``blocks`` in the same pass; returns the block count.

    In terms of the score's excess ``h = score_t - best`` (half the step's slope, ``-d / 2`` of
    :func:`~coresvm.solvers.steps.pairwise_direction`) and the curvature ``c``: ``h^2 / c`` when the step
    ``h / c`` stays below the weight ``a_t``, else ``a_t (2h - c a_t)``: the decreases ``d^2 / 4c`` and
    ``-(d a_t + c a_t^2)`` divided through by powers of two, so for ``lam = 0`` they are the same numbers bit for bit
    (the same partners), with half the arithmetic of evaluating those as written: the pass took 10-25% less time
    (ijcnn1's core set, an Intel Xeon).
    """
    full = n_w // EXTREME_BLOCK
    for b in range(full):
        blocks[b] = _imdm_block(row_i, alpha, G, diag_w, lam, Q_ii, best, values, b * EXTREME_BLOCK,
                                b * EXTREME_BLOCK + EXTREME_BLOCK)
    if full * EXTREME_BLOCK == n_w:
        return full
    blocks[full] = _imdm_block(row_i, alpha, G, diag_w, lam, Q_ii, best, values, full * EXTREME_BLOCK, n_w)
    return full + 1


@njit(inline="always", cache=True, error_model="numpy")
def _imdm_block(row_i, alpha, G, diag_w, lam, Q_ii, best, values, start, stop):
    """:func:`imdm_values` on ``[start, stop)``; returns the largest value there (0 when none is positive)."""
    largest = 0.0
    for t in range(start, stop):
        a_t = alpha[t]
        h = vertex_score(G[t], lam, diag_w[t]) - best
        c = Q_ii + diag_w[t] - 2.0 * row_i[t]
        ca = c * a_t
        value = h * h / c if h < ca else 2.0 * h * a_t - ca * a_t
        value = value if (a_t > 0.0) & (h > 0.0) & (c > CURVATURE_FLOOR) else 0.0
        values[t] = value
        largest = max_no_nan(largest, value)
    return largest


# Positions of extremes are found in two steps: the extreme of every block of EXTREME_BLOCK entries, then the first
# entry equal to the best block's extreme.  A single loop that carries the position runs a compare and a branch per
# entry.  The blocks' extremes are taken with max_no_nan / min_no_nan, which LLVM vectorizes (extremes.py), and where
# possible in the pass that writes the entries, while they are in registers (imdm_values, _update_with_block_minima).
EXTREME_BLOCK = 32
PLAIN_SCAN_MAX = 256


# Comparisons and sign flips only, so nothing is rounded.
@njit(inline="always", cache=True)
def _block_min(values, start, ceiling):
    """The minimum of ``ceiling`` and the EXTREME_BLOCK entries from ``start``."""
    smallest = ceiling
    for t in range(start, start + EXTREME_BLOCK):
        smallest = min_no_nan(smallest, values[t])
    return smallest


@njit(inline="always", cache=True)
def _tail_max(values, start, n, sign, floor):
    """The maximum of ``floor`` and ``sign * values[start:n]``: the last, partial block."""
    best = floor
    for t in range(start, n):
        best = max(sign * values[t], best)
    return best


@njit(inline="always", cache=True)
def _best_block(blocks, n_blocks, floor):
    """The first of ``blocks[:n_blocks]`` (the blocks' extremes) above ``floor`` and largest, and its value:
    ``(-1, floor)`` when none is above.  The position searches then scan that block for the first entry equal to
    it."""
    block, best = -1, floor
    for b in range(n_blocks):
        if blocks[b] > best:
            block, best = b, blocks[b]
    return block, best


@njit(inline="always", cache=True)
def _first_equal(values, n, sign, block, best):
    """The first position in ``block`` (of :func:`_best_block`) where ``sign * values`` equals ``best``; -1 when
    no block was chosen.  With the blocks' extremes this is the first position of the extreme, as one scan finds
    it."""
    if block >= 0:
        for t in range(block * EXTREME_BLOCK, min(block * EXTREME_BLOCK + EXTREME_BLOCK, n)):
            if sign * values[t] == best:
                return t
    return -1


@njit(inline="always", cache=True)
def _active_score(alpha, G, diag_w, lam, t):
    return vertex_score(G[t], lam, diag_w[t]) if alpha[t] > 0.0 else -np.inf


@njit(cache=True)
def active_block_maxima(alpha, G, diag_w, n, lam, out):
    """The largest :func:`vertex_score` of the points with weight in each block of EXTREME_BLOCK entries of ``[:n]``
    (-inf in a block without one) into ``out``; returns the block count."""
    full = n // EXTREME_BLOCK
    for b in range(full):
        largest = -np.inf
        for t in range(b * EXTREME_BLOCK, (b + 1) * EXTREME_BLOCK):
            largest = max_no_nan(largest, _active_score(alpha, G, diag_w, lam, t))
        out[b] = largest
    if full * EXTREME_BLOCK == n:
        return full
    largest = -np.inf
    for t in range(full * EXTREME_BLOCK, n):
        largest = max_no_nan(largest, _active_score(alpha, G, diag_w, lam, t))
    out[full] = largest
    return full + 1


@njit(cache=True)
def largest_active_score(alpha, G, diag_w, n, lam, floor):
    """MDM's partner on a long core set: the first of the points with weight whose :func:`vertex_score` is the
    largest and above ``floor``, or -1.  The scan of :func:`select_second_vertex`, which branches per point, took
    3.2 ns per point on 7,000 random points (Intel Xeon); these two passes 0.8-0.9 ns."""
    blocks = np.empty((n + EXTREME_BLOCK - 1) // EXTREME_BLOCK)
    block, best = _best_block(blocks, active_block_maxima(alpha, G, diag_w, n, lam, blocks), floor)
    if block >= 0:
        for t in range(block * EXTREME_BLOCK, min(block * EXTREME_BLOCK + EXTREME_BLOCK, n)):
            if alpha[t] > 0.0 and vertex_score(G[t], lam, diag_w[t]) == best:
                return t
    return -1


# The stopping rules of inner_solve (integer codes, like the second-vertex rules).
STOP_RELATIVE_GAP = 0  # the core set: the relative gap is below tol
STOP_COVERAGE = 1  # AESVM's CheckPoint: whether min f <= eps is decided (Nandan et al. 2014 sec. 4.2)
NO_LINEAR_TERM = np.zeros(0)  # inner_solve's lin under STOP_RELATIVE_GAP
# inner_solve's computed_rows when Q's rows are read from the Gram ``Kw`` (see kernel_row)
NO_NORMS = np.zeros(0, dtype=np.float32)  # computed_rows' last entry when the rows are taken directly (kernel_row)
ROWS_STORED = (np.zeros((0, 0), dtype=np.float32), np.zeros(0, dtype=np.float32), 0.0, 0.0, NO_NORMS)


@njit(cache=True, nogil=True)
def kernel_row(computed_rows, diag_w, i, n_w, out):
    """``Q``'s row ``i`` on the first ``n_w`` core points of a binary RBF problem, computed into ``out[:n_w]``:
    ``y_i y_t (exp(-gamma |x_i - x_t|^2) + bias)``, and ``diag_w[i]`` (with its ``1/C``) on the diagonal, as the
    stored Gram holds it.  ``computed_rows``: the core points' float32 features transposed (d x capacity), their
    labels (float32), gamma, the bias term, and their squared norms when most features are zero (else empty): the
    distances are then taken from the inner products over the nonzero features
    (:func:`~coresvm.kernels.rbf_row_values_over_nonzeros`), else directly.  Either way ``Q`` is symmetric bit for
    bit."""
    row = out[:n_w]
    _row_part(computed_rows, computed_rows[0][:, i].copy(), diag_w, i, 0, n_w, row)
    return row


# Computed rows are split among the Numba threads from this many core points per thread.  A step then runs two
# parallel regions of ~5 us each (TBB, 2 cores), while one thread's share of it takes more: a row of 20,000 points
# and two features took 10 us on one thread, the passes over the core set as much again.
PARALLEL_ROWS_MIN_POINTS = 8192


@njit(cache=True, nogil=True)
def _row_part(computed_rows, x_i, diag_w, i, start, stop, out):
    """``out[:] = Q[i, start:stop]`` (:func:`kernel_row`'s entries) for the point ``x_i``."""
    features_t, signs, gamma, bias, norms = computed_rows
    if norms.shape[0]:
        rbf_row_values_over_nonzeros(x_i, features_t, norms, norms[i], gamma, out, start)
    else:
        rbf_row_values(x_i, features_t, gamma, out, start)
    bias_32, sign_i, part_signs = np.float32(bias), signs[i], signs[start:stop]
    for t in range(stop - start):
        out[t] = (out[t] + bias_32) * sign_i * part_signs[t]
    if start <= i < stop:
        out[i - start] = diag_w[i]


@njit(cache=True, nogil=True)
def _toward_row_part(computed_rows, x_i, diag_w, alpha, G, i, best, start, stop, row, values, blocks):
    """:func:`parallel_toward_row` on the core points ``[start, stop)`` (``start`` a multiple of EXTREME_BLOCK).  Arrays
    are sliced here and indexed from zero: loops over ``range(start, stop)`` in a parallel region did not vectorize."""
    part = row[start:stop]
    _row_part(computed_rows, x_i, diag_w, i, start, stop, part)
    imdm_values(part, alpha[start:stop], G[start:stop], diag_w[start:stop], stop - start, 0.0, diag_w[i], best,
                values[start:stop], blocks[start // EXTREME_BLOCK:])


@njit(cache=True, nogil=True)
def _pair_update_part(computed_rows, x_j, diag_w, G, j, step, start, stop, rows, blocks):
    """:func:`parallel_pair_update` on the core points ``[start, stop)`` (as :func:`_toward_row_part`): row ``j``,
    ``G += step (row_i - row_j)`` and each block's largest ``-G``."""
    row_i, row_j = rows[0, start:stop], rows[1, start:stop]
    _row_part(computed_rows, x_j, diag_w, j, start, stop, row_j)
    _update_with_block_minima(G[start:stop], row_i, row_j, 1.0, step, -step, stop - start,
                              blocks[start // EXTREME_BLOCK:])


@njit(inline="always", cache=True)
def _part_size(n_w, n_parts):
    """Points per thread: an equal share, rounded up to whole blocks of EXTREME_BLOCK."""
    return ((n_w + n_parts - 1) // n_parts + EXTREME_BLOCK - 1) // EXTREME_BLOCK * EXTREME_BLOCK


@njit(parallel=True, cache=True, nogil=True)
def _toward_row_parts(computed_rows, x_i, diag_w, alpha, G, i, best, n_w, n_parts, row, values, blocks):
    size = _part_size(n_w, n_parts)
    for part in prange(n_parts):
        start, stop = part * size, min(n_w, part * size + size)
        if start < stop:
            _toward_row_part(computed_rows, x_i, diag_w, alpha, G, i, best, start, stop, row, values, blocks)


@njit(parallel=True, cache=True, nogil=True)
def _pair_update_parts(computed_rows, x_j, diag_w, G, j, step, n_w, n_parts, rows, blocks):
    size = _part_size(n_w, n_parts)
    for part in prange(n_parts):
        start, stop = part * size, min(n_w, part * size + size)
        if start < stop:
            _pair_update_part(computed_rows, x_j, diag_w, G, j, step, start, stop, rows, blocks)


@njit(cache=True, nogil=True)
def parallel_toward_row(computed_rows, diag_w, alpha, G, i, best, n_w, n_parts, row, values, blocks):
    """Row ``i`` of ``Q`` into ``row`` and the toward vertex ``i``'s IMDM partner (:func:`select_second_vertex`'s
    choice, -1: none; the L2-SVM, ``lam = 0``), on ``n_parts`` threads, each on its share of the core set.
    ``values``: work space of ``n_w``, ``blocks`` of ``n_w / EXTREME_BLOCK + 1``."""
    _toward_row_parts(computed_rows, computed_rows[0][:, i].copy(), diag_w, alpha, G, i, best, n_w, n_parts, row,
                      values, blocks)
    block, largest = _best_block(blocks, (n_w + EXTREME_BLOCK - 1) // EXTREME_BLOCK, 0.0)
    return _first_equal(values, n_w, 1.0, block, largest)


@njit(cache=True, nogil=True)
def parallel_pair_update(computed_rows, diag_w, G, i, j, step, n_w, n_parts, rows, blocks):
    """The pairwise step's ``G += step (Q_i - Q_j)``, with ``Q_i`` in ``rows[0]`` (:func:`parallel_toward_row`) and
    row ``j`` computed into ``rows[1]`` on ``n_parts`` threads; returns the next toward vertex and its score as
    :func:`_update_gradient` does (-2: no partner)."""
    _pair_update_parts(computed_rows, computed_rows[0][:, j].copy(), diag_w, G, j, step, n_w, n_parts, rows, blocks)
    if _diagonal_in_float64(G, rows[0], rows[1], diag_w, i, j, step, -step):
        for t in (i, j):  # their blocks' minima again, as _update_gradient_blocked
            blocks[t // EXTREME_BLOCK] = _negated_block_minimum(G, t // EXTREME_BLOCK, n_w)
    block, largest = _best_block(blocks, (n_w + EXTREME_BLOCK - 1) // EXTREME_BLOCK, -np.inf)
    return max(_first_equal(G, n_w, -1.0, block, largest), 0), -largest, -2


# A helper thread takes the second half of each pass of the L2-SVM's IMDM steps on a stored Gram
# (solvers.helper_thread).  A pass's arguments: the toward vertex, the partner (-1: the partner search), the toward
# vertex's score and the step (floats); each half gives the position and value of its extreme.
# From 2,048 points (the same fits, helper on and off): ijcnn1's inner solves 8-14% faster, the 1M checkerboard's 8-16%,
# a9a's (8,000-16,000 points) 15-30%; on 1,000 points a step took longer with the helper than without.
HELPER_MIN_POINTS = 2048
TOWARD, PARTNER, SCORE, STEP = ARGUMENTS, ARGUMENTS + 1, ARGUMENTS + 2, ARGUMENTS + 3
NO_HELPER = (NO_CONTROL, np.zeros(0))  # (control array, work space of partner_work_space(n) entries)


@njit(cache=True, nogil=True)
def _half_pass(Kw, alpha, G, diag_w, n_w, control, work, half):
    """Half ``half`` of the pass in ``control``: the IMDM values, or the gradient update with the diagonal in float64
    where this half holds it (:func:`_diagonal_in_float64`), each with its blocks' extremes in ``work`` after the
    values.  Returns the first position of the half's extreme (-1: no partner) and the extreme: the largest IMDM value
    (0 when none is positive), or the smallest ``G``.  The same numbers as the one-thread pass."""
    start, stop = half_bounds_compiled(n_w, half, EXTREME_BLOCK)
    i, j = control[TOWARD], control[PARTNER]
    first_block = start // EXTREME_BLOCK
    n_blocks = (stop - start + EXTREME_BLOCK - 1) // EXTREME_BLOCK
    blocks = work[n_w + first_block:]
    if j < 0:
        imdm_values(Kw[i, start:stop], alpha[start:stop], G[start:stop], diag_w[start:stop], stop - start, 0.0,
                    diag_w[i], control.view(np.float64)[SCORE], work[start:stop], blocks)
        block, largest = _best_block(blocks, n_blocks, 0.0)
        position = _first_equal(work[start:stop], stop - start, 1.0, block, largest)
        return (position + start if position >= 0 else -1), largest
    step = control.view(np.float64)[STEP]
    _update_with_block_minima(G[start:stop], Kw[i, start:stop], Kw[j, start:stop], 1.0, step, -step, stop - start,
                              blocks)
    for t, step_t in ((i, step), (j, -step)):
        if start <= t < stop:
            moved = _diagonal_move(diag_w, Kw[t, t], t, step_t)
            G[t] += moved
            if moved != 0.0:
                blocks[t // EXTREME_BLOCK - first_block] = _negated_block_minimum(G, t // EXTREME_BLOCK, n_w)
    block, largest = _best_block(blocks, n_blocks, -np.inf)
    position = _first_equal(G[start:stop], stop - start, -1.0, block, largest)
    return (position + start if position >= 0 else -1), -largest


@njit(cache=True, nogil=True)
def pass_helper_loop(Kw, alpha, G, diag_w, n_w, helper):
    """The helper thread of :func:`inner_solve` (``helper``: its control array and work space): run the second half
    of each pass it claims first, until told to end."""
    control, work = helper
    seen = 0
    while True:
        sequence = next_command(control, seen)
        if sequence < 0:
            return
        seen = sequence
        if claim_second_half(control, sequence):
            position, value = _half_pass(Kw, alpha, G, diag_w, n_w, control, work, 1)
            control[RESULT] = position
            control.view(np.float64)[RESULT + 1] = value
            second_half_done(control, sequence)


@njit(cache=True, nogil=True)
def _helped_pass(Kw, alpha, G, diag_w, n_w, helper, sequence):
    """Publish pass ``sequence`` (its arguments written), run its first half, and its second unless the helper
    claimed it first; returns both halves' (position, extreme)."""
    control, work = helper
    publish(control, sequence)
    first = _half_pass(Kw, alpha, G, diag_w, n_w, control, work, 0)
    if claim_second_half(control, sequence):
        second = _half_pass(Kw, alpha, G, diag_w, n_w, control, work, 1)
        second_half_done(control, sequence)
        return first, second
    wait_for_second_half(control, sequence)
    return first, (control[RESULT], control.view(np.float64)[RESULT + 1])


@njit(cache=True, nogil=True)
def helped_partner(Kw, alpha, G, diag_w, n_w, helper, sequence, i, best):
    """:func:`select_second_vertex`'s IMDM partner of ``i`` (score ``best``) for the L2-SVM, with the helper."""
    control = helper[0]
    control[TOWARD], control[PARTNER] = i, -1
    control.view(np.float64)[SCORE] = best
    (position, largest), (second_position, second_largest) = _helped_pass(Kw, alpha, G, diag_w, n_w, helper,
                                                                          sequence)
    return second_position if second_largest > largest else position


@njit(cache=True, nogil=True)
def helped_pair_update(Kw, alpha, G, diag_w, n_w, helper, sequence, i, j, step):
    """The pairwise step's ``G += step (Q_i - Q_j)`` with the helper; returns what :func:`_update_gradient` does."""
    control = helper[0]
    control[TOWARD], control[PARTNER] = i, j
    control.view(np.float64)[STEP] = step
    (position, smallest), (second_position, second_smallest) = _helped_pass(Kw, alpha, G, diag_w, n_w, helper,
                                                                            sequence)
    if second_smallest < smallest:
        return max(second_position, 0), second_smallest, -2
    return max(position, 0), smallest, -2


@njit(cache=True, nogil=True)  # releases the GIL: parallel one-vs-one pairs run in threads
def inner_solve(Kw, alpha, G, diag_w, n_w, lam, second_rule, gmdm_k, eta, tol, max_steps, time_left, inv_c,
                stop_rule, lin, const, eps, computed_rows, row_threads, helper):
    """Pairwise steps on the core set until its stopping rule holds (or ``max_steps`` steps, or ``time_left``
    seconds).  ``Q``'s rows are read from the Gram ``Kw``, or with ``computed_rows`` other than
    :data:`ROWS_STORED` computed per step (:func:`kernel_row`; ``Kw`` is then only a dtype).

    ``stop_rule`` :data:`STOP_RELATIVE_GAP` (the core set): the relative gap is below ``tol``.  The gap is
    the Frank-Wolfe gap, and for the L2-SVM (``lam = 0``, ``inv_c`` given: the ``1/C_i`` of the core set)
    also :func:`l2svm_duality_gap`, checked every 1024 steps: whichever is below ``tol`` first ends the
    solve.  Both bound ``f(a) - f*`` and are relative to the same scale ``2 a'Qa``.  ``lin``, ``const`` and
    ``eps`` are not used (``lin`` may be empty).

    :data:`STOP_COVERAGE` (``lam = 0``): the objective has the linear term ``lin``, ``f(a) = a'Qa + lin'a +
    const``, and ``G`` is its half gradient ``Q a + lin / 2`` (the caller's: the steps need nothing else,
    so the toward and partner vertices and the step lengths are those of ``Q`` with ``lin`` folded in).
    The solve stops when :func:`coverage_decided` says whether ``min f <= eps`` (``tol``: an absolute gap),
    or when no active point scores above the toward vertex (``a`` is optimal).

    Per step, the second-vertex search passes over the core set, then the gradient update, whose pass also
    finds the next toward vertex (except on core sets over :data:`PLAIN_SCAN_MAX` points with ``lam != 0``,
    where a scan follows it); up to that size with MDM the pass finds the next partner too, so a step is one
    pass.  ``n2 = a'G``, ``D`` (and ``lin'a``) are updated in closed form (exact recomputation every 1024 steps
    bounds the drift).  ``row_threads``: threads among which the L2-SVM's steps with IMDM split each computed row and
    its passes (:func:`parallel_toward_row`, :func:`parallel_pair_update`: the same steps; 1: this thread alone).
    ``helper``: :data:`NO_HELPER` (``None`` from compiled code), or for the L2-SVM's IMDM steps on a stored Gram
    the control array and work space (:func:`partner_work_space`) of a thread running :func:`pass_helper_loop` on
    the same arrays, which takes the second half of each pass (:func:`helped_partner`, :func:`helped_pair_update`:
    the same steps).
    Returns (steps taken, the gap the rule tested: relative, or absolute for :data:`STOP_COVERAGE`).
    """
    steps = 0
    gap = np.inf
    t_start = now() if time_left < np.inf else 0.0  # AESVM's many small solves skip the clock
    # the IMDM search's work space; an empty view otherwise (no allocation for AESVM's many small solves)
    helped = False  # None: compiled callers (AESVM, dense rounds), whose helper code is pruned at compile time
    if helper is not None:
        helped = helper[0].shape[0] > 0
    sequence = 0  # the helper's passes
    values = np.empty(partner_work_space(n_w)) if second_rule == SECOND_IMDM and not helped else G[:0]
    coverage = stop_rule == STOP_COVERAGE
    # Short core sets with MDM: the passes over the core set that find the toward vertex also find the partner
    # (a separate search pass cost AESVM's ~35-point CheckPoints 40% of their time); -2: not known, search.
    fused_mdm = second_rule == SECOND_MDM and n_w <= PLAIN_SCAN_MAX
    stored = computed_rows[0].shape[0] == 0
    buffers = Kw[:0] if stored else np.empty((2, n_w), dtype=Kw.dtype)
    # Computed rows of the L2-SVM with IMDM: each row and its pass on row_threads threads (parallel_toward_row)
    n_parts = row_threads if not stored and not coverage and lam == 0.0 and second_rule == SECOND_IMDM else 1
    # the blocks' extremes of the passes over core sets past PLAIN_SCAN_MAX points, sized once per solve
    blocks = np.empty(n_w // EXTREME_BLOCK + 1) if n_parts > 1 or n_w > PLAIN_SCAN_MAX else G[:0]
    n2, D, p_i, best, lin_a, partner = _core_set_sums(alpha, G, diag_w, n_w, lam, lin, coverage, fused_mdm)
    while True:
        if steps % 1024 == 1023:
            n2, D, p_i, best, lin_a, partner = _core_set_sums(alpha, G, diag_w, n_w, lam, lin, coverage, fused_mdm)
            if now() - t_start > time_left:
                break
            if lam == 0.0 and inv_c.shape[0] >= n_w:
                # The Frank-Wolfe gap below is set by the single worst point and lingers in the slow tail of
                # large C; the L2-SVM's duality gap bounds f(a) - f* too and is often ten times smaller.
                dual_gap = l2svm_duality_gap(alpha, G, inv_c, n_w) / max(2.0 * n2, 1e-300)
                if dual_gap <= tol:
                    gap = dual_gap
                    break
        if coverage:
            gap = 2.0 * (n2 - best)  # the Frank-Wolfe gap: f(a) - f* <= gap (Frandi et al. 2015 eq. 3)
            if coverage_decided(n2 + 0.5 * lin_a + const, gap, eps, tol) or steps >= max_steps:
                break
        else:
            scale = 2.0 * n2 if lam == 0.0 else D - n2
            gap = 2.0 * (vertex_score(n2, lam, D) - best) / max(scale, 1e-300)
            if gap <= tol or steps >= max_steps:
                break
        Q_ii = diag_w[p_i]
        if n_parts > 1:
            row_i = buffers[0]
            p_j = parallel_toward_row(computed_rows, diag_w, alpha, G, p_i, best, n_w, n_parts, row_i, values, blocks)
        elif helper is not None and helped:
            row_i = Kw[p_i]
            sequence += 1
            p_j = helped_partner(Kw, alpha, G, diag_w, n_w, helper, sequence, p_i, best)
        else:
            row_i = Kw[p_i] if stored else kernel_row(computed_rows, diag_w, p_i, n_w, buffers[0])
            if partner == -2:
                p_j = select_second_vertex(row_i, alpha, G, diag_w, n_w, lam, p_i, best, second_rule, gmdm_k, values)
            else:
                p_j = partner
        if p_j < 0 and coverage:
            break  # every active point has the least G: a is optimal (and the toward step knows no lin)
        if p_j < 0:
            # only one active point: a Frank-Wolfe toward step (Frandi et al. 2013, eq. 29)
            derivative, curvature = toward_direction(G[p_i], Q_ii, n2, D, lam)
            step = clipped_step(derivative, curvature, 1.0, eta)
            n2 = (1.0 - step) ** 2 * n2 + 2.0 * step * (1.0 - step) * G[p_i] + step * step * Q_ii
            D = (1.0 - step) * D + step * Q_ii
            for t in range(n_w):
                alpha[t] *= 1.0 - step
            alpha[p_i] += step
            next_i, best, partner = _update_gradient(G, row_i, row_i, p_i, p_i, 1.0 - step, step, 0.0, diag_w, n_w,
                                                     lam, alpha, fused_mdm, blocks)
        else:
            derivative, curvature = pairwise_direction(G[p_i], G[p_j], Q_ii, diag_w[p_j], row_i[p_j], lam)
            a_j = alpha[p_j]
            step = clipped_step(derivative, curvature, a_j, eta)
            n2 += step * (G[p_i] - G[p_j]) * 2.0 + step * step * curvature
            if coverage:  # a'G also changes by a'Q(e_i - e_j) = G_i - G_j - (lin_i - lin_j) / 2
                moved = step * (lin[p_i] - lin[p_j])
                n2 -= 0.5 * moved
                lin_a += moved
            D += step * (Q_ii - diag_w[p_j])
            alpha[p_i] += step
            alpha[p_j] = 0.0 if step >= a_j else a_j - step
            if n_parts > 1:
                next_i, best, partner = parallel_pair_update(computed_rows, diag_w, G, p_i, p_j, step, n_w, n_parts,
                                                             buffers, blocks)
            elif helper is not None and helped:
                sequence += 1
                next_i, best, partner = helped_pair_update(Kw, alpha, G, diag_w, n_w, helper, sequence, p_i, p_j,
                                                           step)
            else:
                row_j = Kw[p_j] if stored else kernel_row(computed_rows, diag_w, p_j, n_w, buffers[1])
                next_i, best, partner = _update_gradient(G, row_i, row_j, p_i, p_j, 1.0, step, -step, diag_w, n_w,
                                                         lam, alpha, fused_mdm, blocks)
        p_i = next_i
        steps += 1
    return steps, gap


@njit(inline="always", cache=True)
def coverage_decided(f, gap, eps, tol):
    """The stopping rule :data:`STOP_COVERAGE`: is ``min f <= eps`` decided, given ``f(a)`` and a gap
    ``f(a) - min f <= gap``?

    Stop when ``f(a) - gap > eps`` (no point reaches ``eps``: not covered), or when ``f(a) <= eps`` and
    ``gap <= tol`` (covered, and refined to ``tol``), or when the gap is zero to rounding.  ``tol = inf``
    stops as soon as the answer is known; ``eps = inf`` solves to the absolute gap ``tol``.  A point is
    never rejected because the tolerance was reached first: while ``f(a) > eps`` only the first test stops.
    """
    if f - gap > eps:
        return True
    if f <= eps and gap <= tol:
        return True
    return gap <= 1e-15 * (1.0 + abs(f))


@njit(cache=True)
def l2svm_duality_gap(alpha, G, inv_c, n_w):
    """A duality gap of ``min a'Qa`` over the simplex, ``Q = Z'Z + diag(inv_c)`` (the L2-SVM, ``lam = 0``).

    For any ``w`` and ``xi``, completing squares gives ``a'Qa >= 2 sum a_t (z_t'w + xi_t) - |w|^2 -
    sum xi_t^2 / c_t`` on the simplex, so ``L = 2 rho - |w|^2 - sum max(0, rho - g_t)^2 / c_t`` with
    ``g = Z'Z a`` bounds the optimum from below for every level ``rho``.  ``w = Za`` and the best ``rho``
    (water-filling: ``sum_{g_t < rho} (rho - g_t) / c_t = 1``) give ``a'Qa - L``: zero at the optimum, at most
    the Frank-Wolfe gap ``2 (a'Qa - min_t (Qa)_t)`` (the choice ``rho = min_t (Qa)_t``, ``xi = c a``), and much
    smaller when a few points hold the worst violation.  Falls back to that Frank-Wolfe gap when some
    ``c_t = 0`` (hard margin).
    """
    f = 0.0
    quad = 0.0
    g_min = np.inf
    hard_margin = False
    g = np.empty(n_w)
    for t in range(n_w):
        f += alpha[t] * G[t]
        quad += inv_c[t] * alpha[t] * alpha[t]
        g[t] = G[t] - inv_c[t] * alpha[t]
        g_min = min(g_min, G[t])
        hard_margin |= inv_c[t] <= 0.0
    if hard_margin:
        return 2.0 * (f - g_min)
    order = np.argsort(g)
    weight = 0.0  # sum 1/c over the points below rho
    weighted_g = 0.0  # sum g/c
    weighted_g2 = 0.0  # sum g^2/c
    rho = 0.0
    for k in range(n_w):
        t = order[k]
        weight += 1.0 / inv_c[t]
        weighted_g += g[t] / inv_c[t]
        weighted_g2 += g[t] * g[t] / inv_c[t]
        rho = (1.0 + weighted_g) / weight
        if k + 1 == n_w or rho <= g[order[k + 1]]:
            break
    lower = 2.0 * rho - (f - quad) - (rho * rho * weight - 2.0 * rho * weighted_g + weighted_g2)
    return max(f - lower, 0.0)


@njit(cache=True, inline="always")  # see _core_set_sums; only the short pass: inlined, the long one ran 8% slower
def _update_gradient(G, row_i, row_j, i, j, keep, step_i, step_j, diag_w, n_w, lam, alpha, find_mdm_partner, blocks):
    """``G = keep * G + step_i * row_i + step_j * row_j`` (``Q``'s rows ``i`` and ``j``); returns the new toward
    vertex, its score, and with ``find_mdm_partner`` (short core sets only) MDM's partner for it
    (:func:`select_second_vertex`'s choice, -1: none), else -2.  ``blocks``: past :data:`PLAIN_SCAN_MAX` points, a
    work space of at least ``n_w // EXTREME_BLOCK + 1`` entries for the blocks' minima (allocated once per solve)."""
    if n_w > PLAIN_SCAN_MAX:
        return _update_gradient_blocked(G, row_i, row_j, i, j, keep, step_i, step_j, diag_w, n_w, lam, blocks)
    # short (AESVM's CheckPoints): one pass costs less than a vectorized one and a search
    p_i = 0
    best = np.inf
    p_w = -1
    worst = -np.inf  # the first largest score among the points with weight
    for t in range(n_w):
        G[t] = keep * G[t] + step_i * row_i[t] + step_j * row_j[t]
        # lam = 0 (CheckPoint, the L2-SVM): the score is G itself; skipping diag_w's load and the product
        # (the same value) took 13% off AESVM's DeriveAE
        score = G[t] if lam == 0.0 else vertex_score(G[t], lam, diag_w[t])
        if score < best:
            best = score
            p_i = t
        if find_mdm_partner and alpha[t] > 0.0 and score > worst:
            worst = score
            p_w = t
    if _diagonal_in_float64(G, row_i, row_j, diag_w, i, j, step_i, step_j):  # G[i], G[j] moved after the search: again
        _, _, p_i, best, _, partner = _core_set_sums(alpha, G, diag_w, n_w, lam, G, False, find_mdm_partner)
        return p_i, best, partner
    if not find_mdm_partner:
        return p_i, best, -2
    return p_i, best, (p_w if worst > best else -1)


@njit(cache=True)
def _update_gradient_blocked(G, row_i, row_j, i, j, keep, step_i, step_j, diag_w, n_w, lam, blocks):
    """:func:`_update_gradient` on a long core set: the update's pass (vectorized), with the L2-SVM's toward vertex
    (its score is ``G`` itself: the first smallest ``G``) found from each block's minimum, taken in the update's
    pass (:func:`_update_with_block_minima`); for ``lam != 0`` a scan after the pass.  No partner (-2)."""
    if lam != 0.0:
        _update_block(G, row_i, row_j, keep, step_i, step_j, 0, n_w)  # its minimum unused: compiled away
        _diagonal_in_float64(G, row_i, row_j, diag_w, i, j, step_i, step_j)
        p_i, best = smallest_score(G, diag_w, n_w, lam)
        return max(p_i, 0), best, -2
    # blocks: the largest -G of each block (at least n_w // EXTREME_BLOCK + 1 entries)
    n_blocks = _update_with_block_minima(G, row_i, row_j, keep, step_i, step_j, n_w, blocks)
    if _diagonal_in_float64(G, row_i, row_j, diag_w, i, j, step_i, step_j):
        # G[i] and G[j] moved after their blocks' minima were taken: those two again (a test per block inside the
        # pass made ijcnn1's pairwise steps 15% slower)
        for t in (i, j):
            blocks[t // EXTREME_BLOCK] = _negated_block_minimum(G, t // EXTREME_BLOCK, n_w)
    block, largest = _best_block(blocks, n_blocks, -np.inf)
    return max(_first_equal(G, n_w, -1.0, block, largest), 0), -largest, -2


@njit(inline="always", cache=True)
def _update_with_block_minima(G, row_i, row_j, keep, step_i, step_j, n, blocks):
    """``G[:n] = keep * G + step_i * row_i + step_j * row_j`` with each block's largest ``-G`` put in ``blocks``,
    taken in the update's own loop (a second pass over ``G`` made the update and search 8-14% slower); returns the
    block count."""
    full = n // EXTREME_BLOCK
    for b in range(full):
        start = b * EXTREME_BLOCK
        blocks[b] = -_update_block(G, row_i, row_j, keep, step_i, step_j, start, start + EXTREME_BLOCK)
    if full * EXTREME_BLOCK == n:
        return full
    blocks[full] = -_update_block(G, row_i, row_j, keep, step_i, step_j, full * EXTREME_BLOCK, n)
    return full + 1


@njit(inline="always", cache=True)
def _update_block(G, row_i, row_j, keep, step_i, step_j, start, stop):
    """``G = keep * G + step_i * row_i + step_j * row_j`` on ``[start, stop)``; returns the smallest new ``G``
    there."""
    smallest = np.inf
    for t in range(start, stop):
        g = keep * G[t] + step_i * row_i[t] + step_j * row_j[t]
        G[t] = g
        smallest = min_no_nan(smallest, g)
    return smallest


@njit(inline="always", cache=True)
def _diagonal_in_float64(G, row_i, row_j, diag_w, i, j, step_i, step_j):
    """Add to ``G[i]`` and ``G[j]`` the steps times what the Gram's own diagonal entries miss of ``diag_w``, Q's
    diagonal in float64; returns whether that moved either.  A float32 entry ``k(x, x) + b + 1/C`` loses ``1/C``
    below its resolution (C above ~10^6, less once repeated rows are merged): then the two identical rows of a point
    labelled both ways are the same in the Gram, ``a'Qa`` of their pair is lost, and the solve ran to ``max_iter``
    with a meaningless gap, or stopped on a wrong model.  Zero for a float64 Gram (its diagonal is ``diag_w``)."""
    moved_i = _diagonal_move(diag_w, row_i[i], i, step_i + step_j if j == i else step_i)
    moved_j = 0.0 if j == i else _diagonal_move(diag_w, row_j[j], j, step_j)
    G[i] += moved_i
    G[j] += moved_j
    return moved_i != 0.0 or moved_j != 0.0


@njit(inline="always", cache=True)
def _diagonal_move(diag_w, gram_diagonal, t, step_t):
    """What a step of ``step_t`` along row ``t`` misses of ``G[t]`` when the Gram's diagonal entry is
    ``gram_diagonal`` and Q's (float64) is ``diag_w[t]`` (:func:`_diagonal_in_float64`)."""
    return step_t * (diag_w[t] - gram_diagonal)


@njit(inline="always", cache=True)
def _negated_block_minimum(G, b, n):
    """The largest ``-G`` of block ``b`` of ``G[:n]``, taken again after :func:`_diagonal_in_float64` moved one of
    its entries: a whole block's by the vectorized :func:`_block_min`, the last partial block's by a scan."""
    start = b * EXTREME_BLOCK
    if start + EXTREME_BLOCK <= n:
        return -_block_min(G, start, np.inf)
    return _tail_max(G, start, n, -1.0, -np.inf)


# float32 entries carry absolute errors ~1e-7, while g = Qa can be much smaller than the
# entries (||c||^2 ~ 1/(mC)): below this tolerance the rounding could decide the stop.
FLOAT32_GRAM_MIN_TOL = 1e-3


def gram_dtype(tol: float) -> type:
    """float32 halves the Gram's memory and bandwidth; tight tolerances need float64."""
    return np.float32 if tol >= FLOAT32_GRAM_MIN_TOL else np.float64


FLOAT64_GRAM_TOL = float(np.nextafter(FLOAT32_GRAM_MIN_TOL, 0.0))  # the largest tolerance given a float64 Gram


@njit(cache=True)
def duality_gap_weights(inv_c, tol, lam):
    """``inv_c`` where :func:`l2svm_duality_gap` may end a solve, else an empty array (the Frank-Wolfe gap alone).

    Only the L2-SVM (``lam = 0``) has that gap, and only at the float32 Gram's tolerances: it bounds the
    objective, which leaves the coefficients ~sqrt(tol) off, while tight tolerances ask for every point within
    ``tol`` of the margin.
    """
    if tol >= FLOAT32_GRAM_MIN_TOL and lam == 0.0:
        return inv_c
    return inv_c[:0]


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
        (:func:`kernel_row`, :func:`computable_rows` problems), and the core set may hold every point.  When at most
        :data:`NONZERO_SHARE_FOR_NORMS` of the core points' features are nonzero, the rows are computed over each
        point's nonzero features (:func:`~coresvm.kernels.rbf_row_values_over_nonzeros`)."""
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


# Rows computed per step instead of a stored Gram (CoreSetState.compute_rows_from): for dense binary RBF problems of
# at most COMPUTED_ROWS_MAX_FEATURES features, once the core set would pass COMPUTED_ROWS_FROM points.  Past that
# size a stored Gram's rows come from memory, not cache, and growing it (new rows, their mirror into the old rows'
# columns, compaction) took 36 of make_moons' 51 s (120,000 points, noise 0.25, C = 1: 55,000 core points, 12 GB).
# A computed row costs ~0.5 ns per entry with two features, ~0.15 ns more per feature: 120,000 noisy rows of 6 and 8
# features (make_classification, flip_y 0.15, C = 1) filled the 'auto' budget's 55,000-point Gram unconverged in 65
# and 69 s (11.8 GB), and converged computed in 44 and 49 s (1.0-1.6 GB).  With more features a computed step costs
# more than a stored one, but growing a stored Gram that large costs more still (its fresh pages alone ~0.6 s per
# GB): make_classification with 10 features (3% positives, C = 1; 47,000 SVs of 100,000 rows) 66 -> 21 s (growth
# 41 -> 1.7 s), at C = 64 117 -> 50 s; 20 features (C = 4, 22,000 SVs of 48,000) 12.6 -> 9.2 s; 50 features (C = 1,
# 48,000 SVs of 100,000) 83 -> 51 s.  Beyond 64 features untested: the Gram is kept.  Without the Gram there are no
# Newton steps, so once one has paid the Gram is kept up to NEWTON_GRAM_POINTS (large C: the 4M checkerboard at
# C = 2,560, 16,400-16,700 support vectors, took 19.1 s instead of 15.7 s without them); many-support-vector problems
# at small C take none.  Past that size the Gram's growth outweighs the Newton steps it allows: make_classification
# with 10 features and 3% positives (120,000 rows, C = 256, ~50,000 SVs; two or three Newton steps paid early) spent
# 53 of 227 s growing a Gram of 55,000 points (156 of 307 s with another seed), and took 86 s (81 s) with rows
# computed past this size.  make_moons at C = 1,024 (~60,000 SVs) filled the 'auto' budget's Gram unconverged after
# 318 s (growth 143 s), and converges in 48-80 s (three seeds) with rows computed past this size.  The size, not
# the time spent, decides, so a fit takes the same path on every run.
COMPUTED_ROWS_FROM = 20_000
NEWTON_GRAM_POINTS = 32_768  # a float32 Gram of 4 GiB
COMPUTED_ROWS_MAX_FEATURES = 64
# Computed rows sum over each point's nonzero features when at most this share of the core points' features are
# nonzero (CoreSetState.compute_rows_from).  Features are read from memory once per row and feature, so a row of
# 42,000 points with 54 features, 12 of them nonzero (ten continuous, two one-hot blocks, min-max scaled: the
# layout of forest cover types) took 125 instead of 390 us; dense rows stay direct, for which the two extra passes
# (the products' start and the norms') cost 15-50% more with 2-20 features.
NONZERO_SHARE_FOR_NORMS = 0.5
COMPUTED_GRADIENT_ROWS = 64  # rows of computed_gradient per task


def computable_rows(problem, dtype) -> bool:
    """Whether ``Q``'s rows can be computed per step (:func:`kernel_row`): a dense binary RBF problem of at most
    :data:`COMPUTED_ROWS_MAX_FEATURES` features with a float32 Gram."""
    return (not problem.is_joint and problem.kernel.name == "rbf" and type(problem.X) is np.ndarray
            and problem.X.shape[1] <= COMPUTED_ROWS_MAX_FEATURES and np.dtype(dtype) == np.float32)


@njit(cache=True, nogil=True)
def computed_gradient(computed_rows, diag_w, alpha, n_w, start, stop, out):
    """``out = (Q a)[start:stop]`` on the first ``n_w`` core points from computed rows (:func:`kernel_row`), with
    the diagonal in float64 as :func:`_diagonal_in_float64` takes it."""
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


def _score_candidates(problem, candidates, core: CoreSetState) -> np.ndarray:
    """``G_c = (Q a)_c`` for points outside the core set (no 1/C term: c is not in it)."""
    n = core.size
    positive = core.alpha[:n] > 0
    return label_weighted_sums(problem, candidates, core.points[:n][positive], core.alpha[:n][positive],
                               precision=core.gram.dtype.type)


def label_weighted_sums(problem, targets, support, alpha, precision: type = np.float64) -> np.ndarray:
    """``sum_j Q_tj a_j`` over ``support`` for every target ``t``, without the ``1/C`` diagonal.

    Binary: ``y_t (sum_j a_j y_j k_tj + bias sum_j a_j y_j)``, one kernel product.
    Joint (Strack 2013, sec. 5.4): with one coefficient column per class,
    ``S[t, c] = sum_{j in class c} a_j (k_tj + bias)``, and
    ``Q_tj = L[c_t, c_j] (k_tj + bias)`` gives ``g_t = sum_c L[c_t, c] S[t, c]``;
    for the simplex labels that is ``K/(K-1) S[t, c_t] - 1/(K-1) sum_c S[t, c]``.
    The kernel block is computed once either way; only the GEMV becomes a
    GEMM with K columns.  ``precision``: see :func:`~coresvm.kernels.kernel_product`.
    """
    if problem.is_joint:
        per_class = np.zeros((len(support), problem.label_gram.shape[0]))
        per_class[np.arange(len(support)), problem.class_index[support]] = alpha
        S = kernel_product(problem.rows_of(targets), problem.rows_of(support), problem.kernel, per_class,
                           problem.kept_norms_of(targets), problem.kept_norms_of(support), precision=precision)
        S += problem.bias_term * per_class.sum(axis=0)
        return np.einsum("tc,tc->t", S, problem.label_gram[problem.class_index[targets]])
    signed = alpha * problem.signs_of(support)
    sums = kernel_product(problem.rows_of(targets), problem.rows_of(support), problem.kernel, signed,
                          problem.kept_norms_of(targets), problem.kept_norms_of(support), precision=precision)
    return problem.signs_of(targets) * (sums + problem.bias_term * signed.sum())


# The statistical stopping rule ('sample'): stop when, with this confidence, fewer than the fraction
# ``violator_fraction`` of the training points violate the margin by more than ``tol``.
STOP_CONFIDENCE = 0.95


def violator_upper_bound(n_violators: int, n_drawn: int, confidence: float = STOP_CONFIDENCE) -> float:
    """One-sided Clopper-Pearson upper bound on a fraction seen as ``n_violators`` of ``n_drawn`` uniform draws.

    Exact for draws with replacement; conservative for draws without (the hypergeometric law is more
    concentrated than the binomial).
    """
    if n_drawn <= 0:
        return 1.0
    if n_violators >= n_drawn:
        return 1.0
    return float(beta_distribution.ppf(confidence, n_violators + 1, n_drawn - n_violators))


def draws_to_pass(fraction: float, confidence: float = STOP_CONFIDENCE) -> int:
    """The fewest uniform draws without a violator that bound the violator fraction below ``fraction``
    (``ln(1 - confidence) / ln(1 - fraction)``: 2,995 for 1e-3 at 95%, the "rule of three")."""
    return int(np.ceil(np.log1p(-confidence) / np.log1p(-min(fraction, 1.0 - 1e-12))))


def solve_core_set(problem, options, rng, init_idx, init_alpha):
    """Run the core-set loop.  Returns (support, alpha, steps, gap, scale, status, n2, rounds, refused_at, phases):
    ``refused_at`` is the core-set size at which the system refused more memory for its Gram (0: never);
    ``phases`` (:func:`phase_record`) says where the time went.

    Growth: each round adds the worst violators of its candidate sample, at most
    ``max(max_add, growth * |active|)`` (``growth = 0``: CVM's fixed batch; ``growth = 1`` doubles the core set
    while violators abound, so a few rounds reach thousands of support vectors).  Under the statistical rule the
    late rounds also score points that were near the margin when last scored
    (:class:`~coresvm.solvers.sampling.NearMarginPoints`); only the uniform draw counts for the rule.

    Stopping (``options.core_set_stop``): 'quiet' (CVM; Tsang et al. 2005, sec. 4): two consecutive candidate
    samples without a violator.  'sample': once the core set is solved to the final inner tolerance, a fresh
    uniform sample of the training points (at least twice :func:`draws_to_pass`, all of them on small
    problems, where the fraction is then exact) is scored, and the fit stops when the Clopper-Pearson bound
    (:func:`violator_upper_bound`) says that, with 95% confidence, fewer than ``violator_fraction`` of the
    points outside the core set violate the margin by more than ``tol``.  The core set itself is solved to a
    relative duality gap below ``tol`` (:func:`inner_solve`): the Frank-Wolfe gap, under which no core point
    violates by more than ``tol``, or, when ``tol >= 1e-3`` (a float32 Gram), also the tighter
    :func:`l2svm_duality_gap`, which bounds only the objective's distance to the optimum.  Either rule is exact
    when a round scores every point.  That duality gap can leave core points at zero weight violating by more than
    ``tol``: the test, which scores only points outside the core set, does not count them.
    """
    m = problem.n_points
    lam = float(problem.lam)
    gram_budget = options.cache_bytes if options.core_set_bytes is None else options.core_set_bytes
    core = CoreSetState.growable(gram_budget, options.tol, max_points=m, initial=max(1024, len(init_idx)))
    init_idx, init_alpha = init_idx[: core.capacity], init_alpha[: core.capacity] / init_alpha[: core.capacity].sum()
    append_points(problem, core, init_idx, init_alpha)
    in_core = np.zeros(m, dtype=bool)
    in_core[init_idx] = True
    second_rule = SECOND_VERTEX_RULES[options.second_vertex]
    sample_rule = options.core_set_stop == "sample"
    final_inner_tol = options.tol if sample_rule else 0.5 * options.tol
    test_draws = min(m, max(options.n_candidates, 2 * draws_to_pass(options.violator_fraction)))
    start = fit_clock()
    last_report = -np.inf
    total_steps, rounds, quiet_rounds, n_new = 0, 0, 0, len(init_idx)
    status, gap, scale, n2 = STATUS_MAX_ITER, np.inf, 1.0, 0.0
    n_candidates = min(max(options.n_candidates, -(-m // options.sweep_rounds) if options.sweep_rounds else 0), m)
    whole_sample = n_candidates == m and not options.stratified  # every round scores every point
    near_margin = NearMarginPoints(m) if sample_rule and not whole_sample else None  # for the late rounds
    near_margin_rounds = False
    sweep, sweep_pos = (rng.permutation(m) if m <= SWEEP_MAX_POINTS else None), 0
    outer_rel_gap = np.inf
    finishing = core_set_full = False
    settled = None  # (support, alpha) after the last inner solve that time did not cut: the anytime model
    newton_record = NewtonRecord()  # rejected Newton steps make later solves try less eagerly
    float64_refused = False  # the system refused a float64 Gram (CoreSetState.in_float64)
    seconds = {"inner_solve": 0.0, "scoring": 0.0, "growth": 0.0}
    while True:
        # Inexact inner solves: while the sample still finds violators, solve the
        # core set only to a fraction of the outer gap (and a step budget per added
        # point); once a sample is quiet, to the final inner tolerance.
        budget = options.max_iter - total_steps
        inner_tol = final_inner_tol
        if not finishing and rounds > 0:
            budget = min(budget, max(1000, options.inner_steps_per_point * n_new))
            inner_tol = max(inner_tol, options.inner_gap_ratio * outer_rel_gap)
        n = core.size
        phase_start = fit_clock()
        time_left = max(options.max_time - (phase_start - start), 0.0)
        float64_possible = core.fits_float64(gram_budget) and not float64_refused
        steps, inner_gap = _solve_core(core, n, lam, second_rule, options, inner_tol, budget, time_left,
                                       newton_record, float64_possible)
        seconds["inner_solve"] += fit_clock() - phase_start
        if newton_record.float32_gram_failed and float64_possible:
            newton_record.float32_gram_failed = False
            phase_start = fit_clock()
            try:
                core = core.in_float64(problem, gram_budget)
            except MemoryError:  # refused by the system below the budget: go on in float32
                float64_refused = True
            seconds["growth"] += fit_clock() - phase_start
            phase_start = fit_clock()
            more_steps, inner_gap = _solve_core(core, n, lam, second_rule, options, inner_tol, budget - steps,
                                                max(options.max_time - (phase_start - start), 0.0), newton_record)
            seconds["inner_solve"] += fit_clock() - phase_start
            steps += more_steps
        total_steps += steps
        rounds += 1
        alpha, G, diag = core.alpha[:n], core.G[:n], core.diag[:n]
        cut_by_time = fit_clock() - start > options.max_time
        if cut_by_time and settled is not None:
            # Time ran out while the core set that just grew was being re-solved: that
            # half-solved iterate can be far worse (ijcnn1: 51% vs 98%) than the last settled one.
            status = STATUS_MAX_TIME
            break
        if not cut_by_time:
            active = alpha > 0
            settled = (core.points[:n][active].copy(), alpha[active].copy())
        n2 = float(alpha @ G)
        D = float(alpha @ diag)
        mean_score = vertex_score(n2, lam, D)
        scale = max(2.0 * n2 if lam == 0.0 else D - n2, 1e-300)
        solved = inner_gap <= final_inner_tol

        testing = sample_rule and finishing and solved and not whole_sample
        if testing:  # an independent uniform sample of all points: the statistical test's draws
            drawn = draw_distinct(rng, m, test_draws)
            candidates = drawn[~in_core[drawn]]
        else:
            candidates, sweep_pos = next_candidates(rng, problem, n_candidates, options.stratified, sweep, sweep_pos)
            drawn = candidates
            candidates = candidates[~in_core[candidates]]
        n_sampled = len(candidates)  # the uniform draw's candidates come first
        if near_margin_rounds:
            candidates = np.concatenate([candidates, near_margin.nearest(in_core, candidates, n_candidates)])
        phase_start = fit_clock()
        cand_gradient = _score_candidates(problem, candidates, core)
        cand_scores = vertex_score(cand_gradient, lam, problem.diag_of(candidates))
        seconds["scoring"] += fit_clock() - phase_start
        core_best = float(np.min(vertex_score(G, lam, diag)))
        sample_best = float(cand_scores.min()) if len(candidates) else np.inf
        gap = 2.0 * (mean_score - min(core_best, sample_best))
        outer_rel_gap = gap / scale
        threshold = mean_score - 0.5 * options.tol * scale
        violating = np.flatnonzero(cand_scores < threshold)
        sampled_violators = int(np.count_nonzero(cand_scores[:n_sampled] < threshold))
        if near_margin is not None:
            near_margin.note(candidates, (cand_scores - mean_score) / scale, len(drawn))
            near_margin_rounds = near_margin.wanted(sampled_violators, len(drawn))
        if testing and len(drawn) == m:  # every point was scored: the fraction is known exactly
            few_violators = sampled_violators <= options.violator_fraction * m
        elif testing:
            few_violators = violator_upper_bound(sampled_violators, len(drawn)) <= options.violator_fraction
        else:  # a growth sample only decides when to solve strictly and test
            few_violators = sampled_violators <= options.violator_fraction * len(drawn)

        elapsed = fit_clock() - start
        if options.verbose > 0 and elapsed - last_report >= options.verbose:
            print_progress(total_steps, gap, gap / scale, int(np.sum(alpha > 0)), elapsed)
            last_report = elapsed
        if whole_sample or not sample_rule:
            # Stop after two consecutive quiet samples, each scored against a core set
            # solved to the final inner tolerance (an inexact solve proves nothing).  When
            # the sample is every point outside the core set (m <= n_candidates, uniform
            # sweep), one quiet round is the full optimality check: a second would score
            # the same points against the same solution.
            if len(violating) == 0:
                finishing = True
                if solved:
                    quiet_rounds += 1
                    if quiet_rounds >= (1 if whole_sample else 2):
                        status = STATUS_CONVERGED
                        break
            else:
                finishing, quiet_rounds = False, 0
        elif testing and few_violators:
            status = STATUS_CONVERGED
            break
        else:
            # Few violators in a growth sample: solve strictly and test on a fresh uniform sample next.
            finishing = few_violators or (finishing and sampled_violators <= options.max_add)
        if core_set_full:
            status = STATUS_CORE_SET_FULL
            break
        if options.callback is not None and options.callback(
            {"iteration": total_steps, "round": rounds, "gap": gap, "rel_gap": gap / scale,
             "n_active": int(np.sum(alpha > 0)), "elapsed": elapsed}
        ):
            status = STATUS_CALLBACK
            break
        if total_steps >= options.max_iter:
            status = STATUS_MAX_ITER
            break
        if elapsed > options.max_time:
            status = STATUS_MAX_TIME
            break
        if len(violating):
            n_add = max(options.max_add, int(options.growth * np.sum(alpha > 0)))
            worst = violating[np.argsort(cand_scores[violating])[:n_add]]
            phase_start = fit_clock()
            n_new = _grow(problem, core, in_core, candidates[worst], newton_record.kept > 0, cand_gradient[worst])
            seconds["growth"] += fit_clock() - phase_start
            if n_new == 0:
                # No room left in the budget: one last strict solve of the core set, then stop.
                core_set_full, finishing = True, True
    n = core.size
    keep = np.flatnonzero(core.alpha[:n] > 0)
    support, alpha = core.points[keep].copy(), core.alpha[keep].copy()
    if status == STATUS_MAX_TIME and settled is not None:
        support, alpha = settled  # an earlier iterate: its G is gone
        n2 = float(alpha @ exact_gradient(problem, support, alpha))
    else:
        # ||w||^2 sets the decision function's scale (not its sign).  G sums the Gram's entries in float64, so
        # it differs from a float64 kernel recomputation only by the float32 entries' rounding: 4e-5 to 4e-4
        # relative on a9a, w8a and ijcnn1, where that recomputation (#SV^2 kernel values) took up to 7 s.
        n2 = float(alpha @ core.G[keep])
    phases = {**phase_record(seconds, newton_record), "rows_computed": core.rows_computed,
              "gram_dtype": core.gram.dtype.name}
    return support, alpha, total_steps, gap, scale, status, n2, rounds, core.refused_at, phases


def phase_record(seconds: dict, newton: NewtonRecord) -> dict:
    """Where a core-set fit's time went, for its ``solver_info_``: the seconds of the inner solves (pairwise and
    Newton steps), of scoring candidates, and of growing the core set (new Gram rows, compaction); and the Newton
    steps tried and kept (:mod:`~coresvm.solvers.active_face`)."""
    return {**{f"seconds_{name}": float(value) for name, value in seconds.items()},
            "newton_steps": newton.tried, "newton_kept": newton.kept}


def _solve_core(core: CoreSetState, n: int, lam: float, second_rule: int, options, tol: float, max_steps: int,
                time_left: float, newton_record: NewtonRecord, float64_gram_possible: bool = False
                ) -> tuple[int, float]:
    """Solve the core set to ``tol``: pairwise steps (:func:`inner_solve`), and for the L2-SVM (``lam = 0``)
    Newton steps on the active face where their rate is slow
    (:func:`~coresvm.solvers.active_face.solve_with_newton`), a rate measured by the L2-SVM's duality gap.
    ``float64_gram_possible``: return once a face shows the float32 Gram's rounding indefinite
    (:meth:`CoreSetState.in_float64`)."""
    gap_weights = duality_gap_weights(core.inv_c, float(options.tol), lam)

    row_threads = max(1, min(parallel_loop_threads(), n // PARALLEL_ROWS_MIN_POINTS)) if core.rows_computed else 1
    helped = (not core.rows_computed and lam == 0.0 and second_rule == SECOND_IMDM and n >= HELPER_MIN_POINTS
              and parallel_loop_threads() > 1)

    def pairwise_solve(tol_: float, max_steps_: int, time_left_: float) -> tuple[int, float]:
        def solve(helper) -> tuple[int, float]:
            return inner_solve(core.gram, core.alpha, core.G, core.diag, n, lam, second_rule, float(options.gmdm_k),
                               float(options.eta), tol_, max_steps_, time_left_, gap_weights, STOP_RELATIVE_GAP,
                               NO_LINEAR_TERM, 0.0, 0.0, core.computed_rows, row_threads, helper)

        if not helped:
            return solve(NO_HELPER)
        helper = (new_control(), np.empty(partner_work_space(n)))
        with HelperThread(pass_helper_loop, helper[0], core.gram, core.alpha, core.G, core.diag, n, helper):
            return solve(helper)

    if lam != 0.0 or core.rows_computed:  # Newton steps need the Gram
        return pairwise_solve(tol, max_steps, time_left)
    inv_c = core.inv_c[:n]

    def relative_gap(alpha: np.ndarray, G: np.ndarray) -> float:
        # The duality gap averages a face minimum's residual out; measured by the Frank-Wolfe gap (a maximum over
        # the points, as far off as FACE_RESIDUAL), the solves on a noisy XOR alternated between faces and pairwise
        # steps for 10 million steps.
        return l2svm_duality_gap(alpha, G, inv_c, n) / (2.0 * max(float(alpha @ G), 1e-300))

    return solve_with_newton(pairwise_solve, core.gram, core.alpha, core.G, n, tol, max_steps, time_left,
                             relative_gap, inv_c, newton_record, diag=core.diag[:n],
                             float64_gram_possible=float64_gram_possible)


def exact_gradient(problem, support, alpha) -> np.ndarray:
    """``(Q a)`` on the support, from the kernel in float64."""
    return label_weighted_sums(problem, support, support, alpha) + problem.inv_c_of(support) * alpha


# Compaction: a core set is compacted past this many times its active points (plus 256).  Once its rows are computed
# (no Gram to grow or compact) idle points cost only their share of each step's passes, and dropped ones often come
# back: make_moons 14.7 -> 13.5 s (65 -> 53 rounds), the 1M checkerboard at C = 10 17.8 -> 17.0 s (2.0 against 1.25).
IDLE_SHARE = 1.25
IDLE_SHARE_COMPUTED = 2.0


def _grow(problem, core: CoreSetState, in_core, new_points, newton_paid: bool = False,
          new_gradient: np.ndarray | None = None) -> int:
    """Add violators (worst first) to the core set; returns how many fitted.  ``new_gradient``: their scores, ``G``
    for computed rows (:func:`append_points`).

    Zero-weight points are dropped first when the core set holds more than :data:`IDLE_SHARE` times its active points
    (and 256; :data:`IDLE_SHARE_COMPUTED` once its rows are computed), or when the new points would exceed the byte
    budget.  Every pairwise step passes over the whole core set and
    its Gram matrix takes ``n^2`` entries: a slack of the round's allowance, ``growth x |active|``, let the core set
    reach 2.25 times its active points (the 1M checkerboard at C=10: 55,000 points for 33,700 active, 12 GB).
    A core set of :func:`computable_rows` drops its Gram (:meth:`CoreSetState.compute_rows_from`) past
    :data:`COMPUTED_ROWS_FROM` points, or past :data:`NEWTON_GRAM_POINTS` once a Newton step has paid
    (``newton_paid``).
    """
    rows_from = NEWTON_GRAM_POINTS if newton_paid else COMPUTED_ROWS_FROM
    if (not core.rows_computed and core.size + len(new_points) > rows_from
            and computable_rows(problem, core.gram.dtype)):
        core.compute_rows_from(problem)
    n_active = int(np.sum(core.alpha[: core.size] > 0))
    idle_abound = core.size > (IDLE_SHARE_COMPUTED if core.rows_computed else IDLE_SHARE) * max(1, n_active) + 256
    if idle_abound or core.size + len(new_points) > core.max_capacity:
        in_core[core.points[: core.size][core.alpha[: core.size] <= 0]] = False
        core.compact()
    core.reserve(len(new_points))
    room = core.capacity - core.size
    new_points = new_points[:room]
    in_core[new_points] = True
    append_points(problem, core, new_points, np.zeros(len(new_points)),
                  None if new_gradient is None else new_gradient[:room])
    return len(new_points)


