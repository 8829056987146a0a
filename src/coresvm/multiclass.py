"""Multiclass decompositions (one-vs-one, one-vs-rest) and LIBSVM's support-vector layout.

Each pair of classes ``(a, b)``, ``a < b``, gets its own binary simplex
problem.  The fitted model keeps the union of the pairs' support vectors,
grouped by class, with coefficients in LIBSVM's ``(n_classes - 1, n_SV)``
layout: for pair ``(a, b)`` the coefficients of class-``a`` SVs sit in row
``b - 1`` and those of class-``b`` SVs in row ``a``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from numba import njit

from .kernels import KernelSpec, kernel_map, kernel_product
from .problem import take_rows

ROW_BLOCK = 2**20  # rows per block when building index lists (bounds the int64 temporaries)


@dataclass
class BinaryModel:
    """One solved binary problem, mapped back to training-set row indices."""

    rows: np.ndarray  # training indices of the support vectors
    coef: np.ndarray  # a_i y_i / rho
    intercept: float  # sum a_i y_i / rho (0 without bias)
    info: dict
    alpha: np.ndarray | None = None  # the simplex weights of ``rows`` (kept for warm starts)

    @classmethod
    def from_solution(cls, rows, result, signs, bias: bool, bias_value: float | None = None) -> BinaryModel:
        """Scale the simplex solution by the margin ``rho = a'Qa``.

        The L2-SVM decision ``h(x) = sum a_i y_i (k(x_i, x) + 1)`` (Frandi et al. 2013
        eq. 13) has margin ``rho``; dividing by it gives SVC's scale, where
        margin points have ``y h(x) = 1 - xi_i / rho``.  ``bias_value`` replaces
        the theoretic ``b = sum a_i y_i`` (e.g. the KKT average).
        """
        rho = result.squared_norm if result.squared_norm > 0 else 1.0
        coef = result.alpha * signs / rho
        if not bias:
            intercept = 0.0
        elif bias_value is not None:
            intercept = float(bias_value) / rho
        else:
            intercept = float(coef.sum())
        info = result.as_record()
        info["rho"] = rho
        return cls(np.asarray(rows, dtype=np.int64), coef, intercept, info, np.asarray(result.alpha, dtype=float))


@dataclass
class SubProblem:
    """One binary problem of a decomposition: which training rows, their signs, their C_i.

    ``seed`` is drawn before any sub-problem is dispatched, so the result does
    not depend on the order (or the worker) in which the sub-problems run.
    """

    index: int
    label: tuple  # (a, b) for a one-vs-one pair (a positive), (k,) for class k against the rest
    rows: np.ndarray
    signs: np.ndarray
    C: np.ndarray
    seed: int
    init: tuple | None = field(default=None)  # warm start: (local positions, simplex weights)


def one_vs_one_problems(y_index, keep, C_per_sample, n_classes: int, seeds) -> list[SubProblem]:
    """LIBSVM's pairs ``(a, b)``, ``a < b``: class ``a`` is +1 ... except that for
    binary problems scikit-learn makes ``classes_[1]`` the positive class."""
    if n_classes == 2:
        rows = rows_where(keep)
        return [SubProblem(0, (0, 1), rows, pair_signs(y_index, rows, 1), take_rows(C_per_sample, rows),
                           int(seeds[0]))]
    rows = rows_where(keep)
    by_class = rows[np.argsort(y_index[rows], kind="stable")]
    bounds = np.concatenate(([0], np.cumsum(np.bincount(y_index[rows], minlength=n_classes))))
    all_rows, all_signs, offsets = _merged_pairs(by_class, bounds)
    all_C = take_rows(C_per_sample, all_rows)  # slices of a broadcast stay broadcasts
    return [SubProblem(index, pair, all_rows[offsets[index]:offsets[index + 1]],
                       all_signs[offsets[index]:offsets[index + 1]], all_C[offsets[index]:offsets[index + 1]],
                       int(seeds[index]))
            for index, pair in enumerate(OneVsOneLayout.pairs(n_classes))]


@njit(cache=True)
def _merged_pairs(by_class, bounds):
    """Every pair ``(a, b)``'s rows in training order (classes ``a`` and ``b`` merged; ``by_class`` holds each
    class's rows in training order, class ``c`` at ``bounds[c]:bounds[c + 1]``) and signs (+1 for ``a``),
    concatenated in :meth:`OneVsOneLayout.pairs` order, pair ``p`` at ``offsets[p]:offsets[p + 1]``.

    One compiled pass instead of a sort, a concatenation and a sign array per pair (letter: 325 pairs, ~10 ms
    per fit in Python).
    """
    n_classes = bounds.shape[0] - 1
    n_pairs = n_classes * (n_classes - 1) // 2
    rows = np.empty((n_classes - 1) * bounds[n_classes], dtype=by_class.dtype)  # each row is in n_classes - 1 pairs
    signs = np.empty(rows.shape[0], dtype=np.int8)
    offsets = np.zeros(n_pairs + 1, dtype=np.int64)
    n = 0
    p = 0
    for a in range(n_classes):
        for b in range(a + 1, n_classes):
            i, j = bounds[a], bounds[b]
            while i < bounds[a + 1] or j < bounds[b + 1]:
                if j == bounds[b + 1] or (i < bounds[a + 1] and by_class[i] < by_class[j]):
                    rows[n] = by_class[i]
                    signs[n] = 1
                    i += 1
                else:
                    rows[n] = by_class[j]
                    signs[n] = -1
                    j += 1
                n += 1
            p += 1
            offsets[p] = n
    return rows, signs, offsets


def one_vs_rest_problems(y_index, keep, C_per_sample, n_classes: int, seeds) -> list[SubProblem]:
    """Class ``k`` (+1) against all other classes (-1), on every kept row; one problem when binary."""
    if n_classes == 2:
        return one_vs_one_problems(y_index, keep, C_per_sample, n_classes, seeds)
    rows = rows_where(keep)
    return [
        SubProblem(k, (k,), rows, pair_signs(y_index, rows, k), take_rows(C_per_sample, rows), int(seeds[k]))
        for k in range(n_classes)
    ]


def rows_where(mask: np.ndarray) -> np.ndarray:
    """``np.flatnonzero(mask)`` as int32 when the indices fit (4 bytes per row, not 8), built in blocks."""
    n = mask.shape[0]
    index_type = np.int32 if n < 2**31 else np.int64
    if mask.all():
        return np.arange(n, dtype=index_type)
    return np.concatenate([np.flatnonzero(mask[start : start + ROW_BLOCK]).astype(index_type) + index_type(start)
                           for start in range(0, n, ROW_BLOCK)])


def pair_signs(y_index: np.ndarray, rows: np.ndarray, positive: int) -> np.ndarray:
    """+1 for the rows of class ``positive``, -1 for the others, as int8 (one byte per row)."""
    signs = np.full(len(rows), -1, dtype=np.int8)
    for start in range(0, len(rows), ROW_BLOCK):
        part = rows[start : start + ROW_BLOCK]
        signs[start : start + len(part)][y_index[part] == positive] = 1
    return signs


def n_problems(multiclass: str, n_classes: int) -> int:
    if n_classes == 2:
        return 1
    return n_classes * (n_classes - 1) // 2 if multiclass == "ovo" else n_classes


@dataclass
class OneVsRestLayout:
    """The union of the one-vs-rest problems' SVs (grouped by class) and one coefficient column per class."""

    support: np.ndarray
    n_support: np.ndarray
    dual_coef: np.ndarray  # (n_classes, n_SV): row k is problem k's coefficients
    intercept: np.ndarray  # (n_classes,)
    pair_coef: np.ndarray  # (n_SV, n_classes)

    @classmethod
    def build(cls, models: list[BinaryModel], y_index: np.ndarray, n_classes: int) -> OneVsRestLayout:
        all_rows = np.unique(np.concatenate([model.rows for model in models]))
        support = all_rows[np.lexsort((all_rows, y_index[all_rows]))]
        n_support = np.bincount(y_index[support], minlength=n_classes).astype(np.int32)
        coef = np.zeros((len(support), len(models)))
        for k, model in enumerate(models):
            order = np.argsort(support)
            places = order[np.searchsorted(support[order], model.rows)]
            coef[places, k] = model.coef
        intercept = np.array([model.intercept for model in models])
        return cls(support, n_support, coef.T.copy(), intercept, coef)


@dataclass
class OneVsOneLayout:
    """Support vectors and coefficients of all pairs in one LIBSVM-style layout."""

    support: np.ndarray
    n_support: np.ndarray
    dual_coef: np.ndarray
    intercept: np.ndarray
    pair_coef: np.ndarray  # (n_SV, n_pairs): column p is pair p's coefficient vector

    @classmethod
    def build(cls, models: list[BinaryModel], y_index: np.ndarray, n_classes: int) -> OneVsOneLayout:
        model_rows = np.concatenate([model.rows for model in models])
        model_coef = np.concatenate([model.coef for model in models])
        pair_of = np.repeat(np.arange(len(models)), [len(model.rows) for model in models])
        all_rows = np.unique(model_rows)  # sorted
        order = np.lexsort((all_rows, y_index[all_rows]))  # by class, then by row
        support = all_rows[order]
        position = np.empty(len(order), dtype=np.int64)  # position[k]: where all_rows[k] sits in support
        position[order] = np.arange(len(order))
        n_support = np.bincount(y_index[support], minlength=n_classes).astype(np.int32)
        pairs = np.array(cls.pairs(n_classes), dtype=np.int64).reshape(-1, 2)
        places = position[np.searchsorted(all_rows, model_rows)]
        pair_coef = np.zeros((len(support), len(pairs)))
        pair_coef[places, pair_of] = model_coef
        dual_coef = np.zeros((max(n_classes - 1, 1), len(support)))
        if n_classes == 2:
            dual_coef[0, places] = model_coef
        else:
            # LIBSVM: pair (a, b)'s coefficients of class-a SVs in row b - 1, of class-b SVs in row a
            a, b = pairs[pair_of, 0], pairs[pair_of, 1]
            dual_coef[np.where(y_index[model_rows] == a, b - 1, a), places] = model_coef
        intercept = np.array([model.intercept for model in models])
        return cls(support, n_support, dual_coef, intercept, pair_coef)

    @staticmethod
    def pairs(n_classes: int) -> list[tuple[int, int]]:
        return [(a, b) for a in range(n_classes) for b in range(a + 1, n_classes)]

    @staticmethod
    def vote(decisions: np.ndarray, n_classes: int) -> np.ndarray:
        """Max-wins voting over the pairwise decisions (ties: lowest class index)."""
        return _max_wins(np.ascontiguousarray(decisions, dtype=np.float64), n_classes)

    @staticmethod
    @lru_cache(maxsize=16)
    def class_pairs(n_classes: int) -> tuple[np.ndarray, ...]:
        """Per class ``c``, the indices (in :meth:`pairs` order) of the ``n_classes - 1`` pairs it belongs to:
        the only columns of ``pair_coef`` where class ``c``'s support vectors have nonzero coefficients."""
        pairs = np.array(OneVsOneLayout.pairs(n_classes)).reshape(-1, 2)
        return tuple(np.flatnonzero((pairs == c).any(axis=1)) for c in range(n_classes))

    @staticmethod
    @lru_cache(maxsize=16)
    def pair_share_slots(n_classes: int) -> tuple[np.ndarray, np.ndarray]:
        """Where each pair ``p = (a, b)``'s two shares sit when every class's shares of its ``n_classes - 1`` pairs
        (:meth:`class_pairs`) are laid out class after class: ``a * (n_classes - 1) + k`` with
        ``class_pairs(n_classes)[a][k] == p``, and the same for ``b``.  A pair's decision is the sum of the two."""
        pairs = OneVsOneLayout.pairs(n_classes)
        slots = np.empty((len(pairs), 2), dtype=np.int64)
        for c, columns in enumerate(OneVsOneLayout.class_pairs(n_classes)):
            for k, pair in enumerate(columns):
                slots[pair, 0 if c == pairs[pair][0] else 1] = c * (n_classes - 1) + k
        return slots[:, 0].copy(), slots[:, 1].copy()



def one_vs_rest_scores(decisions: np.ndarray, n_classes: int) -> np.ndarray:
    """Per-class scores from one-vs-one decisions: votes, with ties broken by the summed confidences.

    LIBSVM's and scikit-learn's ``decision_function_shape='ovr'`` convention.  Pair ``(a, b)`` (in
    :meth:`OneVsOneLayout.pairs` order) with decision ``d`` gives a vote to ``a`` unless ``d < 0`` (then
    to ``b``), and adds ``d`` to ``a``'s confidence and ``-d`` to ``b``'s.  A class's score is its votes
    plus its confidence ``s`` squashed to ``s / (3 (|s| + 1))``, inside (-1/3, 1/3): it orders classes
    with equal votes and never overturns a difference of one vote.

    Parameters
    ----------
    decisions : ndarray of shape (n_samples, n_classes * (n_classes - 1) / 2)
        The pairwise decision values, pair ``(a, b)`` positive for class ``a``.
    n_classes : int
        Number of classes.

    Returns
    -------
    ndarray of shape (n_samples, n_classes)
    """
    votes = np.zeros((decisions.shape[0], n_classes))
    confidence = np.zeros((decisions.shape[0], n_classes))
    # Pair by pair, in order: each class's confidence is summed in the same order as scikit-learn's.
    for p, (a, b) in enumerate(OneVsOneLayout.pairs(n_classes)):
        loses = decisions[:, p] < 0
        confidence[:, a] += decisions[:, p]
        confidence[:, b] -= decisions[:, p]
        votes[:, a] += ~loses
        votes[:, b] += loses
    return votes + confidence / (3 * (np.abs(confidence) + 1))


def kernel_decisions(X, support_vectors, kernel: KernelSpec, pair_coef: np.ndarray, sv_norms: np.ndarray,
                     n_classes: int, n_support: np.ndarray | None = None) -> np.ndarray:
    """``k(X, SVs) @ pair_coef``: every sub-problem's decision value, without the intercepts.

    With ``n_support`` (one-vs-one, more than two classes, the SVs grouped by class as LIBSVM's layout has
    them): class by class, only the ``n_classes - 1`` pairs a class belongs to (its SVs' coefficients elsewhere
    are zero; LIBSVM sums the same way), about ``n_classes / 2`` times fewer multiply-adds than the whole
    matrix (letter: 25 of 325 pairs per SV).  Otherwise the whole product.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features)
    support_vectors : ndarray or CSR matrix of shape (n_SV, n_features)
    kernel : KernelSpec
    pair_coef : ndarray of shape (n_SV, n_problems)
        Column p: sub-problem p's coefficients.
    sv_norms : ndarray of shape (n_SV,)
        Squared norms of the support vectors.
    n_classes : int
    n_support : ndarray of shape (n_classes,) or None
        SVs per class; None for a one-vs-rest layout.

    Returns
    -------
    ndarray of shape (n_samples, n_problems)
    """
    grouped = n_support is not None and int(np.sum(n_support)) == pair_coef.shape[0]
    if n_classes == 2 or not grouped:
        return kernel_product(X, support_vectors, kernel, pair_coef, norms_b=sv_norms)
    bounds = np.concatenate(([0], np.cumsum(n_support)))
    columns = OneVsOneLayout.class_pairs(n_classes)
    members = [slice(bounds[c], bounds[c + 1]) for c in range(n_classes)]
    class_coef = [pair_coef[members[c], columns[c]] for c in range(n_classes)]
    positive_slots, negative_slots = OneVsOneLayout.pair_share_slots(n_classes)

    def pair_decisions(kernel_values: np.ndarray) -> np.ndarray:
        # Each class's share of its pairs' decisions, side by side; each pair then adds its two classes'
        # shares (two gathers, instead of a scattered add per class: 30% of letter's predict time).
        shares = np.empty((kernel_values.shape[0], n_classes, n_classes - 1))
        for c in range(n_classes):
            np.matmul(kernel_values[:, members[c]], class_coef[c], out=shares[:, c, :])
        shares = shares.reshape(kernel_values.shape[0], -1)
        decisions = shares[:, positive_slots]
        decisions += shares[:, negative_slots]
        return decisions

    return kernel_map(X, support_vectors, kernel, pair_decisions, pair_coef.shape[1], norms_b=sv_norms)

@njit(cache=True)
def _max_wins(decisions, n_classes):
    """:meth:`OneVsOneLayout.vote`: a vote for ``a`` where pair ``(a, b)``'s decision is positive, else for ``b``;
    the first class with the most votes (a Python loop over the pairs cost ~7 ms per 500 rows of letter)."""
    winners = np.empty(decisions.shape[0], dtype=np.int64)
    votes = np.empty(n_classes, dtype=np.int64)
    for i in range(decisions.shape[0]):
        votes[:] = 0
        p = 0
        for a in range(n_classes):
            for b in range(a + 1, n_classes):
                if decisions[i, p] > 0:
                    votes[a] += 1
                else:
                    votes[b] += 1
                p += 1
        best = 0
        for c in range(1, n_classes):
            if votes[c] > votes[best]:
                best = c
        winners[i] = best
    return winners
