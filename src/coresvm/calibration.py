"""Probability estimates from SVM decision values: Platt scaling and pairwise coupling.

* Platt (1999) fits ``P(y = +1 | f) = 1 / (1 + exp(A f + B))`` to decision values
  ``f`` of held-out points, with the smoothed targets ``(N+ + 1) / (N+ + 2)`` and
  ``1 / (N- + 2)``.  The fit minimizes the cross-entropy by Newton's method with a
  backtracking line search and a stable evaluation of ``log(1 + exp(.))``, as
  recommended by Lin, Lin & Weng, "A note on Platt's probabilistic outputs for
  support vector machines" (Machine Learning 68, 2007).
* Multiclass one-vs-one: the pairwise estimates ``r_ij = P(y = i | y in {i, j})``
  are coupled into one distribution by method 2 of Wu, Lin & Weng, "Probability
  estimates for multi-class classification by pairwise coupling" (JMLR 5, 2004,
  eq. 21): ``min_p 1/2 sum_i sum_{j != i} (r_ji p_i - r_ij p_j)^2`` over
  ``sum_i p_i = 1``, which is a linear system per sample.
"""

from __future__ import annotations

import numpy as np

# Pairwise estimates are kept inside [MIN_PROBABILITY, 1 - MIN_PROBABILITY] (LIBSVM does the same)
# so that the coupling system stays well conditioned.
MIN_PROBABILITY = 1e-7


def _cross_entropy(z: np.ndarray, targets: np.ndarray) -> float:
    """``sum_i -t_i log p_i - (1 - t_i) log(1 - p_i)`` with ``p = 1 / (1 + exp(z))``, overflow-free."""
    return float(np.sum(np.logaddexp(0.0, z) - (1.0 - targets) * z))


def fit_sigmoid(decisions: np.ndarray, labels: np.ndarray, max_iter: int = 100) -> tuple[float, float]:
    """Platt's sigmoid ``(A, B)`` for decision values and labels (+1 / -1).

    ``P(y = +1 | f) = 1 / (1 + exp(A f + B))``; a good classifier gets ``A < 0``.
    """
    decisions = np.asarray(decisions, dtype=np.float64)
    positive = np.asarray(labels) > 0
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    targets = np.where(positive, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))
    params = np.array([0.0, np.log((n_neg + 1.0) / (n_pos + 1.0))])
    design = np.column_stack([decisions, np.ones_like(decisions)])
    value = _cross_entropy(design @ params, targets)
    for _ in range(max_iter):
        z = design @ params
        p = 0.5 * (1.0 - np.tanh(0.5 * z))  # 1 / (1 + exp(z)) without overflow
        gradient = design.T @ (targets - p)  # d/dz of the cross-entropy is t - p
        if np.max(np.abs(gradient)) < 1e-5:
            break
        curvature = p * (1.0 - p)
        hessian = (design * curvature[:, None]).T @ design + 1e-12 * np.eye(2)
        direction = -np.linalg.solve(hessian, gradient)
        slope = float(gradient @ direction)
        step = 1.0
        while step >= 1e-10:
            candidate = params + step * direction
            new_value = _cross_entropy(design @ candidate, targets)
            if new_value < value + 1e-4 * step * slope:
                params, value = candidate, new_value
                break
            step *= 0.5
        else:
            break  # no decrease along the Newton direction: at the optimum up to rounding
    return float(params[0]), float(params[1])


def sigmoid_probability(decisions: np.ndarray, A: float, B: float) -> np.ndarray:
    """``1 / (1 + exp(A f + B))`` elementwise (no overflow)."""
    z = A * np.asarray(decisions, dtype=np.float64) + B
    return 0.5 * (1.0 - np.tanh(0.5 * z))


def couple_pairwise(pairwise: np.ndarray, n_classes: int) -> np.ndarray:
    """Class probabilities from one-vs-one estimates (Wu, Lin & Weng 2004, method 2).

    Parameters
    ----------
    pairwise : ndarray of shape (n_samples, n_pairs)
        ``r_ab = P(y = a | y in {a, b})`` for the pairs ``(a, b)``, ``a < b``, in
        LIBSVM's order (0,1), (0,2), ..., (1,2), ...
    n_classes : int

    Returns
    -------
    ndarray of shape (n_samples, n_classes), rows summing to 1.
    """
    r = np.clip(pairwise, MIN_PROBABILITY, 1.0 - MIN_PROBABILITY)
    n = r.shape[0]
    R = np.zeros((n, n_classes, n_classes))  # R[:, i, j] = r_ij
    p = 0
    for a in range(n_classes):
        for b in range(a + 1, n_classes):
            R[:, a, b] = r[:, p]
            R[:, b, a] = 1.0 - r[:, p]
            p += 1
    # Q_ii = sum_{s != i} r_si^2, Q_ij = -r_ji r_ij  (eq. 21 of the paper)
    Q = -np.transpose(R, (0, 2, 1)) * R
    diagonal = np.einsum("nsi,nsi->ni", R, R)
    Q[:, np.arange(n_classes), np.arange(n_classes)] = diagonal
    system = np.zeros((n, n_classes + 1, n_classes + 1))
    system[:, :n_classes, :n_classes] = Q
    system[:, :n_classes, n_classes] = 1.0
    system[:, n_classes, :n_classes] = 1.0
    rhs = np.zeros((n, n_classes + 1, 1))
    rhs[:, n_classes, 0] = 1.0
    probabilities = np.linalg.solve(system, rhs)[:, :n_classes, 0]
    # The solution is non-negative in exact arithmetic (the paper's Theorem 2); clip rounding.
    np.maximum(probabilities, 0.0, out=probabilities)
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    return probabilities


def normalize_one_vs_rest(per_class: np.ndarray) -> np.ndarray:
    """One-vs-rest: each class's Platt probability, renormalized to sum to 1."""
    per_class = np.clip(per_class, MIN_PROBABILITY, None)
    return per_class / per_class.sum(axis=1, keepdims=True)
