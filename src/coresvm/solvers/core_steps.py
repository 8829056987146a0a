"""The core set's inner solve: pairwise steps on the core set's Gram matrix.

:func:`inner_solve` runs the engine's pairwise step (SMO/MDM on the simplex, :mod:`~coresvm.solvers.steps`) with
the IMDM or GMDM second vertex (Strack 2013, sec. 5.6, eq. 5.33) on the Gram matrix that
:mod:`~coresvm.solvers.core_gram` keeps, so a step costs O(core set) arithmetic and no kernel evaluations.  On
rows computed per step instead (:func:`kernel_row`) the passes of large core sets run on the kernel threads; on a
large stored Gram a helper thread takes the second half of each pass (:mod:`~coresvm.solvers.helper_thread`).
Its callers: the core-set loop (:mod:`~coresvm.solvers.core_set`), AESVM's CheckPoints and the dense solver's
rounds.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ..kernels import rbf_row_values, rbf_row_values_over_nonzeros
from .clock import now
from .engine import SECOND_IMDM, SECOND_MDM
from .extremes import max_no_nan, min_no_nan
from .helper_thread import (
    ARGUMENTS,
    NO_CONTROL,
    RESULT,
    claim_second_half,
    half_bounds_compiled,
    next_command,
    publish,
    second_half_done,
    wait_for_second_half,
)
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
