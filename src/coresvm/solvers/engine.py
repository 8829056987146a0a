"""The one simplex-QP engine: a compiled loop with interchangeable parts.

Every iteration of :func:`solve_simplex` does (ARCHITECTURE.md section 1), each part one function::

    vertex search   -> toward_vertex: toward vertex i (full scan of the gradient,
                       or the best of a fresh random sample of candidates)
    stopping test   -> stop_status: duality gap relative to a scale of order one
                       (gap_scale), iteration and time limits
    second vertex   -> away_vertex: vertex j among the active points (MFW, SWAP, MDM)
    step rule       -> choose_step: FW toward / away / pairwise / PARTAN, exact
                       line search, optional over-relaxation eta
    update          -> apply_step / apply_partan_step, then drop_zero_weights

State kept ("slots"): the active points ``act_idx[:s]`` with weights ``alpha``
and the gradient half ``G = Q a``.  Two ways to hold ``G``:

* full search (``sample_size <= 0``): ``G`` over all ``m`` points, updated with
  whole columns ``Q[:, i]`` from the LRU :mod:`~coresvm.cache`; exact vertex.
* sampled search: ``G`` over the active slots only; candidates' gradients are
  computed from the active set each iteration (``|S| x s`` kernel values), so
  nothing of size ``m`` beyond the position map is ever touched -- the cost is
  independent of ``m`` (Frandi et al. 2015, sec. 4.2, the "59 trick" of CVM).
"""

from __future__ import annotations

import numpy as np
from numba import njit, objmode

from ..cache import cache_slot
from ..problem import extended_column, extended_row, weighted_rows
from .clock import now  # GIL-free on Linux: parallel workers do not wait for each other's clock readings
from .sampling import draw_candidates
from .steps import (
    CURVATURE_FLOOR,
    away_direction,
    clipped_step,
    objective_change,
    pairwise_direction,
    partan_direction,
    partner_value,
    smallest_score,
    toward_direction,
    vertex_score,
)

STEP_RULES = {"fw": 0, "mfw": 1, "swap": 2, "partan": 3, "mdm": 4}
FW, MFW, SWAP, PARTAN, PAIRWISE = 0, 1, 2, 3, 4
SECOND_VERTEX_RULES = {"mdm": 0, "imdm": 1, "gmdm": 2}
SECOND_MDM, SECOND_IMDM, SECOND_GMDM = 0, 1, 2
STATUS_CONVERGED, STATUS_MAX_ITER, STATUS_MAX_TIME, STATUS_CORE_SET_FULL = 0, 1, 2, 3
STATUS_CALLBACK = 4  # a user callback asked to stop (set by the Python-level loops)
STATUS_NAMES = {0: "converged", 1: "max_iter", 2: "max_time", 3: "core_set_full", 4: "callback"}
STATUS_RUNNING = -1  # stop_status's answer while the run goes on
TIME_CHECK_EVERY = 16


def print_progress(n_iter, gap, rel_gap, n_active, elapsed):
    """One progress line of a verbose run (called from compiled code)."""
    print(
        f"iter {n_iter:>9d}  gap {gap:.3e}  rel.gap {rel_gap:.3e}  #SV {n_active:>7d}  {elapsed:8.2f} s",
        flush=True,
    )


@njit(cache=True)
def report_progress(n_iter, gap, rel_gap, n_active, elapsed):
    with objmode():
        print_progress(n_iter, gap, rel_gap, n_active, elapsed)


@njit(cache=True)
def _grow(arr, new_cap):
    out = np.zeros(new_cap, dtype=arr.dtype)
    out[: arr.shape[0]] = arr
    return out


# LLVM does not inline across separately compiled Numba functions, so the short parts a step runs are
# inlined into solve_simplex (inline="always", Numba IR inlining): as calls they cost about 1 us a step, a
# quarter of a step at m = 300 (measured under load).  The loops over all m points stay calls (apply_step,
# apply_partan_step, steps.smallest_score): inlined they ran 1.2-1.5x slower at m = 3000 (fw 26 -> 40 us a
# step), and a call is nothing beside m points.  So do set-up and rare events (new_slots, load_start,
# grow_slots, drop_zero_weights, report_progress).

# ---- state: the slots and their gradients ----------------------------------------------


@njit(cache=True)
def new_slots(m, n_init, full, step_rule, sample_size):
    """The loop's buffers for ``max(64, 2 n_init)`` active slots (:func:`grow_slots` doubles them).

    Returns
    -------
    tuple
        ``(act_idx, alpha, alpha_prev, pos, G, Gp, row_i, row_j, cand, cand_G)``: the slots' points,
        weights and previous weights (PARTAN), each point's slot or -1, the gradient half ``Q a`` (over all
        points in full search, over the slots in sampled search), ``Q a_prev`` (PARTAN only), the two
        kernel rows of a sampled step, and the sampled search's candidates with their gradients.
    """
    cap = max(64, 2 * n_init)
    act_idx = np.zeros(cap, dtype=np.int64)
    alpha = np.zeros(cap)
    alpha_prev = np.zeros(cap)
    pos = np.full(m, -1, dtype=np.int64)
    g_len = m if full else cap
    G = np.zeros(g_len)
    Gp = np.zeros(g_len if step_rule == PARTAN else 1)
    row_i = np.zeros(1 if full else cap)
    row_j = np.zeros(1 if full else cap)
    n_cand = 1 if full else max(sample_size, 1)
    cand = np.zeros(n_cand, dtype=np.int64)
    cand_G = np.zeros(n_cand)
    return act_idx, alpha, alpha_prev, pos, G, Gp, row_i, row_j, cand, cand_G


@njit(inline="always", cache=True)
def kernel_column(kargs, cache, point, protected_slot):
    """``(slot, Q[:, point])``: the column from the LRU cache, computed into its slot on a miss.

    ``protected_slot`` is not evicted (the other column of a two-vertex step).
    """
    store, slot_of, owner, stamp, counters = cache
    slot, hit = cache_slot(slot_of, owner, stamp, counters, point, protected_slot)
    if not hit:
        extended_column(*kargs, point, store[slot])
    return slot, store[slot]


@njit(inline="always", cache=True)
def step_column(kargs, cache, full, point, protected_slot, act_idx, s, row):
    """``(slot, column)``: what a step reads of ``Q[:, point]`` -- the whole column (full search, from
    the cache) or its entries at the ``s`` active slots, written into ``row`` (sampled search, slot -1)."""
    if full:
        return kernel_column(kargs, cache, point, protected_slot)
    extended_row(*kargs, point, act_idx, s, row)
    return -1, row


@njit(inline="always", cache=True)
def slot_gradient(kargs, point, act_idx, s, weights, row):
    """``(Q w)_point`` for weights ``w`` on the ``s`` active slots (``row`` is work space)."""
    extended_row(*kargs, point, act_idx, s, row)
    acc = 0.0
    for t in range(s):
        acc += row[t] * weights[t]
    return acc


@njit(cache=True)
def load_start(kargs, cache, full, init_idx, init_alpha, act_idx, alpha, pos, G, row):
    """Put the starting points and weights into the slots and compute their gradient ``G = Q a``.

    Returns the number of active slots.
    """
    s = init_idx.shape[0]
    for p in range(s):
        act_idx[p] = init_idx[p]
        alpha[p] = init_alpha[p]
        pos[init_idx[p]] = p
    for p in range(s):
        if full:
            _, column = kernel_column(kargs, cache, act_idx[p], -1)
            G += alpha[p] * column
        else:
            G[p] = slot_gradient(kargs, act_idx[p], act_idx, s, alpha, row)
    return s


@njit(cache=True)
def grow_slots(act_idx, alpha, alpha_prev, G, Gp, row_i, row_j, full, partan):
    """The slot buffers at twice their capacity (the per-slot gradients too in sampled search)."""
    cap = 2 * act_idx.shape[0]
    act_idx = _grow(act_idx, cap)
    alpha = _grow(alpha, cap)
    alpha_prev = _grow(alpha_prev, cap)
    if not full:
        G = _grow(G, cap)
        if partan:
            Gp = _grow(Gp, cap)
        row_i = np.zeros(cap)
        row_j = np.zeros(cap)
    return act_idx, alpha, alpha_prev, G, Gp, row_i, row_j


@njit(inline="always", cache=True)
def activate(kargs, i, G_i, s, act_idx, alpha, alpha_prev, pos, G, Gp, row_i, row_j, full, partan):
    """Give point ``i`` a slot with weight 0, growing the buffers when they are full.

    Returns ``(s, act_idx, alpha, alpha_prev, G, Gp, row_i, row_j)``: the new count and the (possibly
    reallocated) buffers.  Sampled search keeps per-slot gradients, so the new slot gets ``G_i`` and, for
    PARTAN, ``(Q a_prev)_i`` from its row.
    """
    if s == act_idx.shape[0]:
        act_idx, alpha, alpha_prev, G, Gp, row_i, row_j = grow_slots(act_idx, alpha, alpha_prev, G, Gp,
                                                                     row_i, row_j, full, partan)
    act_idx[s] = i
    pos[i] = s
    alpha[s] = 0.0
    alpha_prev[s] = 0.0
    if not full:
        G[s] = G_i
    s += 1
    if not full and partan:
        Gp[s - 1] = slot_gradient(kargs, i, act_idx, s, alpha_prev, row_i)
    return s, act_idx, alpha, alpha_prev, G, Gp, row_i, row_j


@njit(inline="always", cache=True)
def active_sums(s, alpha, G, act_idx, diag, full):
    """``(n2, D)``: ``a'Qa`` and ``a'diag(Q)`` over the active slots."""
    n2 = 0.0
    D = 0.0
    for t in range(s):
        g_t = G[act_idx[t]] if full else G[t]
        n2 += alpha[t] * g_t
        D += alpha[t] * diag[act_idx[t]]
    return n2, D


@njit(inline="always", cache=True)
def gap_scale(n2, D, lam):
    """The quantity of order one the gap is measured against: ``2 a'Qa`` (``lam = 0``, twice the margin) or
    the squared MEB radius ``a'diag(Q) - a'Qa`` (``lam = 1``); kept positive so that ``gap / scale`` is defined."""
    scale = 2.0 * n2 if lam == 0.0 else D - n2
    return scale if scale > 0.0 else 1e-300


# ---- vertex search ------------------------------------------------------------------------


@njit(inline="always", cache=True)
def best_candidate(points, gradients, n, diag, lam, best, i, G_i):
    """``(score, point, G_point)``: the first of ``points[:n]`` (gradients ``gradients[:n]``) that scores below
    every other and below the incumbent ``(best, i, G_i)``, or the incumbent."""
    for k in range(n):
        sc = vertex_score(gradients[k], lam, diag[points[k]])
        if sc < best:
            best = sc
            i = points[k]
            G_i = gradients[k]
    return best, i, G_i


@njit(inline="always", cache=True)
def toward_vertex(kargs, full, m, sample_size, strata_ptr, strata_order, cand, cand_G, G, act_idx, s, alpha, diag,
                  lam, mean_score, stop_gap):
    """The FW (toward) vertex: ``(i, G_i, gap)`` with the Frank-Wolfe duality gap it gives.

    Full search scans every point's gradient: the exact vertex and gap.  Sampled search takes the best of
    the active points and a fresh random sample (Frandi et al. 2015, sec. 4.2); when that gap is at most
    ``stop_gap`` it draws a second sample before letting the run stop (the safeguard of a sampled gap).
    """
    if full:
        i, best = smallest_score(G, diag, m, lam)
        return i, G[i], 2.0 * (mean_score - best)
    # the active points' gradients are kept: they are always candidates, which also makes the sampled
    # gap non-negative (mean_score is their weighted average)
    best, i, G_i = best_candidate(act_idx, G, s, diag, lam, np.inf, -1, 0.0)
    gap = np.inf
    for _attempt in range(2):
        draw_candidates(m, sample_size, strata_ptr, strata_order, cand)
        weighted_rows(*kargs, cand, sample_size, act_idx, s, alpha, cand_G)  # |S| x s kernel values
        best, i, G_i = best_candidate(cand, cand_G, sample_size, diag, lam, best, i, G_i)
        gap = 2.0 * (mean_score - best)
        if gap > stop_gap:
            break
    return i, G_i, gap


@njit(inline="always", cache=True)
def stop_status(n_iter, gap, scale, tol, max_iter, max_time, t_start, verbose_seconds, last_report, s,
                trace_gap, trace_time):
    """Record the trace, test the stopping rules, print progress: ``(status, last_report)``.

    ``status`` is :data:`STATUS_RUNNING` or why the run stops.  The clock is read every
    :data:`TIME_CHECK_EVERY` iterations only (and for the trace's first entries).
    """
    if n_iter < trace_gap.shape[0]:
        trace_gap[n_iter] = gap / scale
        trace_time[n_iter] = now() - t_start
    if gap <= tol * scale:
        return STATUS_CONVERGED, last_report
    if n_iter >= max_iter:
        return STATUS_MAX_ITER, last_report
    if n_iter % TIME_CHECK_EVERY == 0:
        elapsed = now() - t_start
        if elapsed > max_time:
            return STATUS_MAX_TIME, last_report
        if verbose_seconds > 0.0 and (n_iter == 0 or elapsed - last_report >= verbose_seconds):
            report_progress(n_iter, gap, gap / scale, s, elapsed)
            last_report = elapsed
    return STATUS_RUNNING, last_report


# ---- second vertex --------------------------------------------------------------------------


@njit(inline="always", cache=True)
def largest_score_slot(s, alpha, G, act_idx, diag, lam, full):
    """MDM's second vertex: the active point with the largest gradient (Strack 2013, eq. 5.34)."""
    best = -1
    worst = -np.inf
    for t in range(s):
        if alpha[t] <= 0.0:
            continue
        g_t = G[act_idx[t]] if full else G[t]
        sc = vertex_score(g_t, lam, diag[act_idx[t]])
        if sc > worst:
            worst = sc
            best = t
    return best


@njit(inline="always", cache=True)
def best_partner_slot(s, alpha, G, act_idx, diag, lam, full, p_i, G_i, Q_ii, col_i, rule, gmdm_k):
    """IMDM / GMDM second vertex for a pairwise step from ``j`` to ``i``.

    IMDM (Franc; Strack 2013, eq. 5.33) takes the ``j`` whose *clipped* pairwise
    step decreases the objective most; GMDM(k) maximizes
    ``(score_j - score_i) / curvature^(k/2)`` (eq. 5.35; k=0 is MDM, k=1 IMDM
    without clipping).
    """
    best = -1
    best_value = 0.0
    score_i = vertex_score(G_i, lam, Q_ii)
    for t in range(s):
        if alpha[t] <= 0.0 or t == p_i:
            continue
        j = act_idx[t]
        g_t = G[j] if full else G[t]
        if vertex_score(g_t, lam, diag[j]) <= score_i:
            continue
        Q_ij = col_i[j] if full else col_i[t]
        derivative, curvature = pairwise_direction(G_i, g_t, Q_ii, diag[j], Q_ij, lam)
        if curvature <= CURVATURE_FLOOR:
            continue
        value = partner_value(derivative, curvature, alpha[t], rule == SECOND_IMDM, gmdm_k)
        if value > best_value:
            best_value = value
            best = t
    return best


@njit(inline="always", cache=True)
def away_vertex(step_rule, second_rule, gmdm_k, s, alpha, G, act_idx, diag, lam, full, p_i, G_i, Q_ii, col_i):
    """The slot of the second vertex among the active points, or -1 (FW and PARTAN have none).

    MFW's away vertex is always MDM's (Frandi et al. 2013, Alg. 3); SWAP and the MDM step take
    ``second_rule``'s partner.
    """
    if step_rule == MFW or second_rule == SECOND_MDM:
        if step_rule == MFW or step_rule == SWAP or step_rule == PAIRWISE:
            return largest_score_slot(s, alpha, G, act_idx, diag, lam, full)
        return -1
    if step_rule == SWAP or step_rule == PAIRWISE:
        return best_partner_slot(s, alpha, G, act_idx, diag, lam, full, p_i, G_i, Q_ii, col_i, second_rule, gmdm_k)
    return -1


# ---- step rules: the coefficients of  a <- ca a + ci e_i + cj e_j + cp a_prev ------------------
# Each returns (ca, ci, cj, cp, clipped_slot, use_j): clipped_slot is the slot whose weight the step
# sets to zero (a drop step), or -1; use_j says whether the step reads the second vertex's column.


@njit(inline="always", cache=True)
def toward_step(lam_fw):
    """The FW step ``a <- (1 - lam_fw) a + lam_fw e_i``."""
    return 1.0 - lam_fw, lam_fw, 0.0, 0.0, -1, False


@njit(inline="always", cache=True)
def away_or_toward_step(eta, lam, mean_score, n2, D, G_i, Q_ii, G_j, Q_jj, a_j, p_j, lam_fw):
    """MFW: the away step from ``j`` when its gap is the larger (Frandi et al. 2013, Alg. 3), else toward.

    The away step ``a <- (1 + t) a - t e_j`` is feasible up to ``t = a_j / (1 - a_j)``, where ``j`` drops.
    """
    gap_fw = mean_score - vertex_score(G_i, lam, Q_ii)
    gap_away = vertex_score(G_j, lam, Q_jj) - mean_score
    if gap_away > gap_fw and a_j < 1.0:
        d_a, c_a = away_direction(G_j, Q_jj, n2, D, lam)
        t_max = a_j / (1.0 - a_j)
        t = clipped_step(d_a, c_a, t_max, eta)
        return 1.0 + t, 0.0, -t, 0.0, p_j if t >= t_max else -1, True
    return toward_step(lam_fw)


@njit(inline="always", cache=True)
def pairwise_or_toward_step(swap, eta, lam, G_i, G_j, Q_ii, Q_jj, Q_ij, a_j, p_j, d_fw, c_fw, lam_fw):
    """The pairwise step ``a <- a + t (e_i - e_j)``, clipped at ``t = a_j``; SWAP takes it only when it
    decreases ``f`` at least as much as the toward step (Frandi, Nanculef and Suykens 2015, sec. 2)."""
    d_p, c_p = pairwise_direction(G_i, G_j, Q_ii, Q_jj, Q_ij, lam)
    t = clipped_step(d_p, c_p, a_j, eta)
    take_pair = True
    if swap:
        take_pair = objective_change(d_p, c_p, t) <= objective_change(d_fw, c_fw, lam_fw)
    if take_pair:
        return 1.0, t, -t, 0.0, p_j if t >= a_j else -1, True
    return toward_step(lam_fw)


@njit(inline="always", cache=True)
def previous_iterate_sums(s, alpha, alpha_prev, Gp, act_idx, diag, full):
    """``(W, Fp, Dp)``: ``a'Q a_prev``, ``a_prev'Q a_prev`` and ``a_prev'diag(Q)`` over the active slots."""
    W = 0.0
    Fp = 0.0
    Dp = 0.0
    for t in range(s):
        gp_t = Gp[act_idx[t]] if full else Gp[t]
        W += alpha[t] * gp_t
        Fp += alpha_prev[t] * gp_t
        Dp += alpha_prev[t] * diag[act_idx[t]]
    return W, Fp, Dp


@njit(inline="always", cache=True)
def clip_partan_step(mu, lam_fw, p_i, s, alpha, alpha_prev):
    """``(mu, clipped_slot)``: ``mu`` clipped so that ``a~ + mu (a~ - a_prev) >= 0`` with the FW point
    ``a~ = (1 - lam_fw) a + lam_fw e_i`` (Frandi et al. 2015 notes sec. 2.5 f); the slot that limits it, or -1."""
    lo, hi = -np.inf, np.inf
    lo_slot, hi_slot = -1, -1
    for t in range(s):
        a_t = (1.0 - lam_fw) * alpha[t] + (lam_fw if t == p_i else 0.0)
        d_t = a_t - alpha_prev[t]
        if d_t < 0.0 and -a_t / d_t < hi:
            hi = -a_t / d_t
            hi_slot = t
        elif d_t > 0.0 and -a_t / d_t > lo:
            lo = -a_t / d_t
            lo_slot = t
    if mu > hi:
        return hi, hi_slot
    if mu < lo:
        return lo, lo_slot
    return mu, -1


@njit(inline="always", cache=True)
def partan_step(lam, lam_fw, i, p_i, G_i, Q_ii, n2, D, s, alpha, alpha_prev, Gp, act_idx, diag, full):
    """PARTAN (Frandi et al. 2015, Alg. 2): after the FW point ``a~``, an exact line search along
    ``a~ - a_prev``: ``a <- (1 + mu) a~ - mu a_prev``."""
    W, Fp, Dp = previous_iterate_sums(s, alpha, alpha_prev, Gp, act_idx, diag, full)
    Gp_i = Gp[i] if full else Gp[p_i]
    d_pt, c_pt = partan_direction(lam_fw, G_i, Gp_i, Q_ii, n2, W, Fp, D, Dp, lam)
    mu = -d_pt / (2.0 * c_pt) if c_pt > CURVATURE_FLOOR else 0.0
    mu, clipped_slot = clip_partan_step(mu, lam_fw, p_i, s, alpha, alpha_prev)
    return (1.0 + mu) * (1.0 - lam_fw), (1.0 + mu) * lam_fw, 0.0, -mu, clipped_slot, False


@njit(inline="always", cache=True)
def choose_step(step_rule, eta, lam, n_iter, mean_score, n2, D, i, p_i, G_i, Q_ii, p_j, col_i, s, alpha,
                alpha_prev, G, Gp, act_idx, diag, full):
    """The step of ``step_rule`` from the toward vertex ``i`` (slot ``p_i``) and the second vertex ``p_j``.

    Returns ``(ca, ci, cj, cp, clipped_slot, use_j)`` (see the section comment above).
    """
    d_fw, c_fw = toward_direction(G_i, Q_ii, n2, D, lam)
    lam_fw = clipped_step(d_fw, c_fw, 1.0, eta)
    if step_rule == PARTAN and n_iter > 0:  # the first step has no previous iterate
        return partan_step(lam, lam_fw, i, p_i, G_i, Q_ii, n2, D, s, alpha, alpha_prev, Gp, act_idx, diag, full)
    if step_rule == FW or step_rule == PARTAN or p_j < 0 or p_j == p_i:
        return toward_step(lam_fw)
    j = act_idx[p_j]
    G_j = G[j] if full else G[p_j]
    if step_rule == MFW:
        return away_or_toward_step(eta, lam, mean_score, n2, D, G_i, Q_ii, G_j, diag[j], alpha[p_j], p_j, lam_fw)
    Q_ij = col_i[j] if full else col_i[p_j]
    return pairwise_or_toward_step(step_rule == SWAP, eta, lam, G_i, G_j, Q_ii, diag[j], Q_ij, alpha[p_j], p_j,
                                   d_fw, c_fw, lam_fw)


# ---- applying a step --------------------------------------------------------------------------


@njit(cache=True)
def apply_step(ca, ci, cj, p_i, p_j, use_j, clipped_slot, s, n_g, alpha, G, col_i, col_j):
    """``a <- ca a + ci e_i + cj e_j`` and ``G <- ca G + ci Q e_i + cj Q e_j`` in place (FW, MFW, pairwise)."""
    if ca != 1.0:
        for t in range(s):
            alpha[t] *= ca
    alpha[p_i] += ci
    if use_j:
        alpha[p_j] += cj
    if clipped_slot >= 0:
        alpha[clipped_slot] = 0.0  # exactly zero, not round-off: the slot is dropped
    if use_j:
        for r in range(n_g):
            G[r] = ca * G[r] + ci * col_i[r] + cj * col_j[r]
    else:
        for r in range(n_g):
            G[r] = ca * G[r] + ci * col_i[r]


@njit(cache=True)
def apply_partan_step(ca, ci, cp, p_i, clipped_slot, s, n_g, alpha, alpha_prev, G, Gp, col_i):
    """``a <- ca a + ci e_i + cp a_prev`` (and ``G`` alike), written into ``alpha_prev`` and ``Gp``.

    The caller swaps the buffers afterwards, so the previous iterate is kept without a copy.
    """
    for t in range(s):
        value = ca * alpha[t] + cp * alpha_prev[t]
        if t == p_i:
            value += ci
        # the clip keeps every weight >= 0 in exact arithmetic; clamp round-off only
        alpha_prev[t] = value if value > 0.0 else 0.0
    if clipped_slot >= 0:
        alpha_prev[clipped_slot] = 0.0
    for r in range(n_g):
        Gp[r] = ca * G[r] + ci * col_i[r] + cp * Gp[r]


@njit(cache=True)
def drop_zero_weights(s, act_idx, alpha, alpha_prev, pos, G, Gp, full, partan):
    """Free the slots whose weight is zero (for PARTAN: in both iterates), moving the last slot into each gap.

    Returns the new number of active slots.
    """
    t = 0
    while t < s:
        if alpha[t] <= 0.0 and (not partan or alpha_prev[t] <= 0.0):
            last = s - 1
            pos[act_idx[t]] = -1
            if t != last:
                act_idx[t] = act_idx[last]
                alpha[t] = alpha[last]
                alpha_prev[t] = alpha_prev[last]
                if not full:
                    G[t] = G[last]
                    if partan:
                        Gp[t] = Gp[last]
                pos[act_idx[t]] = t
            s -= 1
        else:
            t += 1
    return s


# ---- the loop ------------------------------------------------------------------------------


@njit(cache=True, nogil=True)  # releases the GIL: parallel one-vs-one pairs run in threads
def solve_simplex(
    data, norms, kind, gamma, coef0, degree, y, inv_c, bias, diag, lam,
    step_rule, second_rule, gmdm_k, sample_size, tol, max_iter, max_time, eta, seed,
    init_idx, init_alpha, strata_ptr, strata_order,
    cache_store, slot_of, owner, stamp, counters,
    verbose_seconds, trace_gap, trace_time,
):
    """Minimize ``a'Qa - lam a'diag(Q)`` over the unit simplex.

    Returns ``(active_indices, alpha, n_iter, gap, scale, status, n2)`` where
    ``gap`` is the last (possibly sampled) Frank-Wolfe duality gap and the run
    stopped on ``gap <= tol * scale``; ``scale`` is ``2 a'Qa`` (= 2 rho, the
    margin) for ``lam = 0`` and the squared MEB radius ``a'diag(Q) - a'Qa`` for
    ``lam = 1`` (Frandi et al. 2013, Alg. 2's ``(1+eps)^2 - 1`` test), and ``n2 = a'Qa``
    (= rho, the L2-SVM margin, at the optimum).
    """
    np.random.seed(seed)
    m = y.shape[0]
    full = sample_size <= 0
    partan = step_rule == PARTAN
    kargs = (data, norms, kind, gamma, coef0, degree, y, inv_c, bias)
    cache = (cache_store, slot_of, owner, stamp, counters)
    act_idx, alpha, alpha_prev, pos, G, Gp, row_i, row_j, cand, cand_G = new_slots(
        m, init_idx.shape[0], full, step_rule, sample_size)
    s = load_start(kargs, cache, full, init_idx, init_alpha, act_idx, alpha, pos, G, row_i)
    if partan:
        Gp[:] = G[: Gp.shape[0]]
        alpha_prev[:s] = alpha[:s]

    t_start = now()
    last_report = 0.0
    n_iter = 0
    while True:
        n2, D = active_sums(s, alpha, G, act_idx, diag, full)
        mean_score = vertex_score(n2, lam, D)
        scale = gap_scale(n2, D, lam)
        i, G_i, gap = toward_vertex(kargs, full, m, sample_size, strata_ptr, strata_order, cand, cand_G, G, act_idx,
                                    s, alpha, diag, lam, mean_score, tol * scale)
        status, last_report = stop_status(n_iter, gap, scale, tol, max_iter, max_time, t_start, verbose_seconds,
                                          last_report, s, trace_gap, trace_time)
        if status != STATUS_RUNNING:
            break

        if pos[i] < 0:
            s, act_idx, alpha, alpha_prev, G, Gp, row_i, row_j = activate(
                kargs, i, G_i, s, act_idx, alpha, alpha_prev, pos, G, Gp, row_i, row_j, full, partan)
        p_i = pos[i]
        Q_ii = diag[i]
        slot_i, col_i = step_column(kargs, cache, full, i, -1, act_idx, s, row_i)
        p_j = away_vertex(step_rule, second_rule, gmdm_k, s, alpha, G, act_idx, diag, lam, full, p_i, G_i, Q_ii,
                          col_i)
        ca, ci, cj, cp, clipped_slot, use_j = choose_step(step_rule, eta, lam, n_iter, mean_score, n2, D, i, p_i,
                                                          G_i, Q_ii, p_j, col_i, s, alpha, alpha_prev, G, Gp,
                                                          act_idx, diag, full)
        col_j = col_i
        if use_j:  # slot_i is protected: col_i stays valid
            _, col_j = step_column(kargs, cache, full, act_idx[p_j], slot_i, act_idx, s, row_j)

        n_g = m if full else s
        if partan:
            apply_partan_step(ca, ci, cp, p_i, clipped_slot, s, n_g, alpha, alpha_prev, G, Gp, col_i)
            alpha, alpha_prev = alpha_prev, alpha
            G, Gp = Gp, G
        else:
            apply_step(ca, ci, cj, p_i, p_j, use_j, clipped_slot, s, n_g, alpha, G, col_i, col_j)
        if clipped_slot >= 0 or ci == 1.0 or ca == 0.0:
            s = drop_zero_weights(s, act_idx, alpha, alpha_prev, pos, G, Gp, full, partan)
        n_iter += 1

    if verbose_seconds > 0.0:
        report_progress(n_iter, gap, gap / scale, s, now() - t_start)
    return act_idx[:s].copy(), alpha[:s].copy(), n_iter, gap, scale, status, n2
