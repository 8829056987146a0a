"""The one simplex-QP engine: a compiled loop with interchangeable parts.

Every iteration does (ARCHITECTURE.md section 1)::

    vertex search   -> toward vertex i (full scan of the gradient, or the best of
                       a fresh random sample of candidates)
    stopping test   -> duality gap relative to a scale of order one
    second vertex   -> away vertex j among the active points (MFW, SWAP, MDM)
    step rule       -> FW toward / away / pairwise / PARTAN, exact line search,
                       optional over-relaxation eta

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
    toward_direction,
    vertex_score,
)

STEP_RULES = {"fw": 0, "mfw": 1, "swap": 2, "partan": 3, "mdm": 4}
FW, MFW, SWAP, PARTAN, PAIRWISE = 0, 1, 2, 3, 4
SECOND_VERTEX_RULES = {"mdm": 0, "imdm": 1, "gmdm": 2}
SECOND_MDM, SECOND_IMDM, SECOND_GMDM = 0, 1, 2
STATUS_CONVERGED, STATUS_MAX_ITER, STATUS_MAX_TIME = 0, 1, 2
STATUS_CONVERGED, STATUS_MAX_ITER, STATUS_MAX_TIME, STATUS_CORE_SET_FULL = 0, 1, 2, 3
STATUS_CALLBACK = 4  # a user callback asked to stop (set by the Python-level loops)
STATUS_NAMES = {0: "converged", 1: "max_iter", 2: "max_time", 3: "core_set_full", 4: "callback"}
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


@njit(inline="always", cache=True)
def _max_score_slot(s, alpha, G, act_idx, diag, lam, full):
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
def _best_partner_slot(s, alpha, G, act_idx, diag, lam, full, p_i, G_i, Q_ii, col_i, rule, gmdm_k):
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
    n_init = init_idx.shape[0]
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
    n_cand = m if full else sample_size
    cand = np.zeros(max(n_cand, 1) if not full else 1, dtype=np.int64)
    cand_G = np.zeros(max(n_cand, 1) if not full else 1)
    s = 0
    kargs = (data, norms, kind, gamma, coef0, degree, y, inv_c, bias)

    # ---- initialization: the given points and weights ---------------------------
    for p in range(n_init):
        act_idx[s] = init_idx[p]
        alpha[s] = init_alpha[p]
        pos[init_idx[p]] = s
        s += 1
    if full:
        for p in range(s):
            slot, hit = cache_slot(slot_of, owner, stamp, counters, act_idx[p], -1)
            if not hit:
                extended_column(*kargs, act_idx[p], cache_store[slot])
            G += alpha[p] * cache_store[slot]
    else:
        for p in range(s):
            extended_row(*kargs, act_idx[p], act_idx, s, row_i)
            acc = 0.0
            for t in range(s):
                acc += row_i[t] * alpha[t]
            G[p] = acc
    if step_rule == PARTAN:
        Gp[:] = G[: Gp.shape[0]]
        alpha_prev[:s] = alpha[:s]

    t_start = now()
    elapsed = 0.0
    last_report = 0.0
    slot_i = -1
    n_iter = 0
    status = STATUS_MAX_ITER
    gap = np.inf
    scale = 1.0
    n2 = 0.0
    n_trace = trace_gap.shape[0]
    while True:
        # ---- bookkeeping scalars: n2 = a'Qa, D = a'diag(Q) --------------------
        n2 = 0.0
        D = 0.0
        for t in range(s):
            g_t = G[act_idx[t]] if full else G[t]
            n2 += alpha[t] * g_t
            D += alpha[t] * diag[act_idx[t]]
        mean_score = vertex_score(n2, lam, D)
        scale = 2.0 * n2 if lam == 0.0 else D - n2
        if scale <= 0.0:
            scale = 1e-300

        # ---- vertex search -------------------------------------------------------
        i = -1
        G_i = 0.0
        best = np.inf
        if not full:
            # the active points' gradients are kept: they are always candidates, which also
            # makes the sampled gap non-negative (mean_score is their weighted average)
            for t in range(s):
                sc = vertex_score(G[t], lam, diag[act_idx[t]])
                if sc < best:
                    best = sc
                    i = act_idx[t]
                    G_i = G[t]
        n_draws = 1 if full else 2  # the safeguard: one fresh re-sample before stopping
        for _attempt in range(n_draws):
            if full:
                for r in range(m):
                    sc = vertex_score(G[r], lam, diag[r])
                    if sc < best:
                        best = sc
                        i = r
                G_i = G[i]
            else:
                draw_candidates(m, sample_size, strata_ptr, strata_order, cand)
                weighted_rows(*kargs, cand, sample_size, act_idx, s, alpha, cand_G)
                for c in range(sample_size):
                    sc = vertex_score(cand_G[c], lam, diag[cand[c]])
                    if sc < best:
                        best = sc
                        i = cand[c]
                        G_i = cand_G[c]
            gap = 2.0 * (mean_score - best)
            if gap > tol * scale:
                break
        if n_iter < n_trace:
            trace_gap[n_iter] = gap / scale
            trace_time[n_iter] = now() - t_start
        if gap <= tol * scale:
            status = STATUS_CONVERGED
            break
        if n_iter >= max_iter:
            status = STATUS_MAX_ITER
            break
        if n_iter % TIME_CHECK_EVERY == 0:
            elapsed = now() - t_start
            if elapsed > max_time:
                status = STATUS_MAX_TIME
                break
            if verbose_seconds > 0.0 and (n_iter == 0 or elapsed - last_report >= verbose_seconds):
                report_progress(n_iter, gap, gap / scale, s, elapsed)
                last_report = elapsed

        Q_ii = diag[i]

        # ---- make i active (sampled mode needs its row against the slots) ---------
        if pos[i] < 0:
            if s == cap:
                cap *= 2
                act_idx = _grow(act_idx, cap)
                alpha = _grow(alpha, cap)
                alpha_prev = _grow(alpha_prev, cap)
                if not full:
                    G = _grow(G, cap)
                    if step_rule == PARTAN:
                        Gp = _grow(Gp, cap)
                    row_i = np.zeros(cap)
                    row_j = np.zeros(cap)
            act_idx[s] = i
            pos[i] = s
            alpha[s] = 0.0
            alpha_prev[s] = 0.0
            if not full:
                G[s] = G_i
            s += 1
            if not full and step_rule == PARTAN:
                extended_row(*kargs, i, act_idx, s, row_i)
                acc = 0.0
                for t in range(s):
                    acc += row_i[t] * alpha_prev[t]
                Gp[s - 1] = acc
        p_i = pos[i]

        # ---- the columns/rows the step needs ------------------------------------
        if full:
            slot_i, hit = cache_slot(slot_of, owner, stamp, counters, i, -1)
            if not hit:
                extended_column(*kargs, i, cache_store[slot_i])
            col_i = cache_store[slot_i]
        else:
            extended_row(*kargs, i, act_idx, s, row_i)
            col_i = row_i

        # ---- second (away) vertex among the active points -------------------------
        p_j = -1
        if step_rule == MFW or second_rule == SECOND_MDM:
            if step_rule == MFW or step_rule == SWAP or step_rule == PAIRWISE:
                p_j = _max_score_slot(s, alpha, G, act_idx, diag, lam, full)
        elif step_rule == SWAP or step_rule == PAIRWISE:
            p_j = _best_partner_slot(s, alpha, G, act_idx, diag, lam, full, p_i, G_i, Q_ii, col_i,
                                     second_rule, gmdm_k)

        # ---- choose the step ----------------------------------------------------
        # coefficients of the update  a <- ca*a + ci*e_i + cj*e_j + cp*a_prev
        ca, ci, cj, cp = 1.0, 0.0, 0.0, 0.0
        clipped_slot = -1
        use_j = False
        d_fw, c_fw = toward_direction(G_i, Q_ii, n2, D, lam)
        lam_fw = clipped_step(d_fw, c_fw, 1.0, eta)
        if step_rule == FW:
            ca, ci = 1.0 - lam_fw, lam_fw
        elif step_rule == PARTAN:
            ca, ci = 1.0 - lam_fw, lam_fw
            if n_iter > 0:
                W = 0.0
                Fp = 0.0
                Dp = 0.0
                for t in range(s):
                    gp_t = Gp[act_idx[t]] if full else Gp[t]
                    W += alpha[t] * gp_t
                    Fp += alpha_prev[t] * gp_t
                    Dp += alpha_prev[t] * diag[act_idx[t]]
                Gp_i = Gp[i] if full else Gp[p_i]
                d_pt, c_pt = partan_direction(lam_fw, G_i, Gp_i, Q_ii, n2, W, Fp, D, Dp, lam)
                mu = -d_pt / (2.0 * c_pt) if c_pt > CURVATURE_FLOOR else 0.0
                # feasibility clip (Frandi et al. 2015 notes sec. 2.5 f): a~ + mu (a~ - a_prev) >= 0
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
                    mu = hi
                    clipped_slot = hi_slot
                elif mu < lo:
                    mu = lo
                    clipped_slot = lo_slot
                ca = (1.0 + mu) * (1.0 - lam_fw)
                ci = (1.0 + mu) * lam_fw
                cp = -mu
        else:
            # MFW, SWAP, PAIRWISE: candidates beside the toward step
            if p_j >= 0 and p_j != p_i:
                j = act_idx[p_j]
                G_j = G[j] if full else G[p_j]
                Q_jj = diag[j]
                a_j = alpha[p_j]
                if step_rule == MFW:
                    gap_fw = mean_score - vertex_score(G_i, lam, Q_ii)
                    gap_away = vertex_score(G_j, lam, Q_jj) - mean_score
                    if gap_away > gap_fw and a_j < 1.0:
                        d_a, c_a = away_direction(G_j, Q_jj, n2, D, lam)
                        t_max = a_j / (1.0 - a_j)
                        t = clipped_step(d_a, c_a, t_max, eta)
                        ca, ci, cj = 1.0 + t, 0.0, -t
                        use_j = True
                        if t >= t_max:
                            clipped_slot = p_j
                    else:
                        ca, ci = 1.0 - lam_fw, lam_fw
                else:
                    Q_ij = col_i[j] if full else col_i[p_j]
                    d_p, c_p = pairwise_direction(G_i, G_j, Q_ii, Q_jj, Q_ij, lam)
                    t = clipped_step(d_p, c_p, a_j, eta)
                    take_pair = True
                    if step_rule == SWAP:
                        take_pair = objective_change(d_p, c_p, t) <= objective_change(d_fw, c_fw, lam_fw)
                    if take_pair:
                        ca, ci, cj = 1.0, t, -t
                        use_j = True
                        if t >= a_j:
                            clipped_slot = p_j
                    else:
                        ca, ci = 1.0 - lam_fw, lam_fw
            else:
                ca, ci = 1.0 - lam_fw, lam_fw

        # ---- fetch column j when the step uses it --------------------------------
        if use_j:
            j = act_idx[p_j]
            if full:
                slot_j, hit = cache_slot(slot_of, owner, stamp, counters, j, slot_i)
                if not hit:
                    extended_column(*kargs, j, cache_store[slot_j])
                col_j = cache_store[slot_j]
                col_i = cache_store[slot_i]
            else:
                extended_row(*kargs, j, act_idx, s, row_j)
                col_j = row_j
        else:
            col_j = col_i
            cj = 0.0

        # ---- apply:  a <- ca a + ci e_i + cj e_j + cp a_prev,  same for G --------
        if step_rule == PARTAN:
            # write the new iterate into the *_prev buffers, then swap, so that
            # the previous iterate is kept without a copy
            for t in range(s):
                value = ca * alpha[t] + cp * alpha_prev[t]
                if t == p_i:
                    value += ci
                # the clip keeps every weight >= 0 in exact arithmetic; clamp round-off only
                alpha_prev[t] = value if value > 0.0 else 0.0
            if clipped_slot >= 0:
                alpha_prev[clipped_slot] = 0.0
            n_g = m if full else s
            for r in range(n_g):
                Gp[r] = ca * G[r] + ci * col_i[r] + cp * Gp[r]
            alpha, alpha_prev = alpha_prev, alpha
            G, Gp = Gp, G
        else:
            if ca != 1.0:
                for t in range(s):
                    alpha[t] *= ca
            alpha[p_i] += ci
            if use_j:
                alpha[p_j] += cj
            if clipped_slot >= 0:
                alpha[clipped_slot] = 0.0
            n_g = m if full else s
            if use_j:
                for r in range(n_g):
                    G[r] = ca * G[r] + ci * col_i[r] + cj * col_j[r]
            else:
                for r in range(n_g):
                    G[r] = ca * G[r] + ci * col_i[r]

        # ---- drop points whose weight reached zero --------------------------------
        if clipped_slot >= 0 or ci == 1.0 or ca == 0.0:
            t = 0
            while t < s:
                if alpha[t] <= 0.0 and (step_rule != PARTAN or alpha_prev[t] <= 0.0):
                    last = s - 1
                    pos[act_idx[t]] = -1
                    if t != last:
                        act_idx[t] = act_idx[last]
                        alpha[t] = alpha[last]
                        alpha_prev[t] = alpha_prev[last]
                        if not full:
                            G[t] = G[last]
                            if step_rule == PARTAN:
                                Gp[t] = Gp[last]
                        pos[act_idx[t]] = t
                    s -= 1
                else:
                    t += 1
        n_iter += 1

    if verbose_seconds > 0.0:
        report_progress(n_iter, gap, gap / scale, s, now() - t_start)
    return act_idx[:s].copy(), alpha[:s].copy(), n_iter, gap, scale, status, n2
