"""Closed-form exact line searches of the Frank-Wolfe family on the simplex QP.

Objective ``f(a) = a'Qa - lam a'diag(Q)``.  Every step moves along a direction
``d`` and needs only the *derivative* ``f'(0) = grad f(a)' d`` and the
*curvature* ``d'Qd`` of ``phi(t) = f(a + t d) = f(a) + f'(0) t + d'Qd t^2``;
the exact minimizer on ``[0, t_max]`` is ``clip(-f'(0) / (2 d'Qd), 0, t_max)``.

The quantities below are written with ``G = Q a`` (the maintained gradient
half), ``n2 = a'Qa`` and ``D = a'diag(Q)``.  The papers print several of these
with wrong signs (Frandi et al. 2013 Alg. 3 line 21, Frandi et al. 2015 appendix (11)-(15) in the
maximization convention); these are derived afresh for minimization and each
is checked against a brute-force line search in ``tests/test_steps.py``.

Over-relaxation (Strack 2013, gsvm ``-o``): the unclipped step is multiplied by
``eta`` in [1, 2) before clipping; on a quadratic this still decreases ``f``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

CURVATURE_FLOOR = 1e-300


@njit(inline="always", cache=True)
def vertex_score(G_i, lam, Q_ii):
    """The score every vertex search ranks points by: ``G_i - lam Q_ii / 2``, half the gradient of ``f``.

    The toward vertex has the smallest score, the away / MDM vertex the largest among the active points,
    and at the optimum every active point's score equals ``a'Qa - lam a'diag(Q) / 2`` (the same formula with
    ``G = n2``, ``Q_ii = D``).  Scalars or arrays.
    """
    return G_i - 0.5 * lam * Q_ii


@njit(cache=True)
def smallest_score(G, diag, n, lam):
    """``(i, score)``: the first of the points ``0..n-1`` with the smallest :func:`vertex_score` (the toward
    vertex of a full scan), and its score; ``(-1, inf)`` when no score is below ``inf``."""
    i = -1
    best = np.inf
    for r in range(n):
        score = vertex_score(G[r], lam, diag[r])
        if score < best:
            best = score
            i = r
    return i, best


@njit(inline="always", cache=True)
def clipped_step(derivative, curvature, t_max, eta):
    """Exact (optionally over-relaxed) minimizer of ``f'(0) t + curv t^2`` on [0, t_max]."""
    if derivative >= 0.0:
        return 0.0
    if curvature <= CURVATURE_FLOOR:
        return t_max
    t = -eta * derivative / (2.0 * curvature)
    return t if t < t_max else t_max


@njit(inline="always", cache=True)
def toward_direction(G_i, Q_ii, n2, D, lam):
    """Derivative and curvature along ``e_i - a`` (the FW toward direction).

    Frandi et al. 2013 eq. 29 / Frandi et al. 2015 eq. 11 in minimization form.
    """
    derivative = 2.0 * (G_i - n2) - lam * (Q_ii - D)
    curvature = Q_ii - 2.0 * G_i + n2
    return derivative, curvature


@njit(inline="always", cache=True)
def away_direction(G_j, Q_jj, n2, D, lam):
    """Derivative and curvature along ``a - e_j`` (Wolfe's away direction).

    Feasible up to ``t_max = a_j / (1 - a_j)`` (a drop step removes ``j``).
    """
    derivative = 2.0 * (n2 - G_j) - lam * (D - Q_jj)
    curvature = n2 - 2.0 * G_j + Q_jj
    return derivative, curvature


@njit(inline="always", cache=True)
def pairwise_direction(G_i, G_j, Q_ii, Q_jj, Q_ij, lam):
    """Derivative and curvature along ``e_i - e_j`` (SWAP / MDM / SMO on the simplex).

    Feasible up to ``t_max = a_j``.
    """
    derivative = 2.0 * (G_i - G_j) - lam * (Q_ii - Q_jj)
    curvature = Q_ii + Q_jj - 2.0 * Q_ij
    return derivative, curvature


@njit(inline="always", cache=True)
def objective_change(derivative, curvature, t):
    """``f(a + t d) - f(a)`` for a step of length ``t``."""
    return derivative * t + curvature * t * t


@njit(inline="always", cache=True)
def partner_value(derivative, curvature, t_max, imdm, gmdm_k):
    """How good a second vertex is for a pairwise step (larger is better).

    IMDM (Franc; Strack 2013 eq. 5.33): the decrease of the objective by the
    clipped step (at most ``t_max``, the partner's weight).  GMDM(k) (eq. 5.35):
    ``-f'(0) / curvature^(k/2)``.  Shared by the engine and the core-set solver.
    """
    if imdm:
        return -objective_change(derivative, curvature, clipped_step(derivative, curvature, t_max, 1.0))
    return -derivative / curvature ** (0.5 * gmdm_k)


@njit(inline="always", cache=True)
def partan_direction(lam_fw, G_i, Gp_i, Q_ii, n2, W, Fp, D, Dp, lam):
    """Derivative and curvature of the PARTAN step (Frandi et al. 2015 eqs. 7-8).

    After the FW point ``a~ = (1 - lam_fw) a + lam_fw e_i`` the PARTAN step moves
    along ``d = a~ - a_prev``.  With ``W = a'Q a_prev``, ``Fp = a_prev'Q a_prev``,
    ``Gp_i = (Q a_prev)_i``, ``Dp = a_prev'diag(Q)``:

    ``F~ = a~'Q a~``, ``B = a~'Q a_prev = (1 - lam_fw) W + lam_fw Gp_i``,
    derivative ``2 (F~ - B) - lam (D~ - Dp)``, curvature ``F~ - 2B + Fp``.
    (Frandi et al. 2015's (13)-(15) are the same in the maximization convention.)
    """
    F_t = (1.0 - lam_fw) ** 2 * n2 + 2.0 * lam_fw * (1.0 - lam_fw) * G_i + lam_fw * lam_fw * Q_ii
    B = (1.0 - lam_fw) * W + lam_fw * Gp_i
    D_t = (1.0 - lam_fw) * D + lam_fw * Q_ii
    derivative = 2.0 * (F_t - B) - lam * (D_t - Dp)
    curvature = F_t - 2.0 * B + Fp
    return derivative, curvature
