"""The joint multiclass problem on the small-problem solver's scheme: cached kernel rows, exact gradient.

The joint ("all-at-once") machine (Strack 2013 sec. 5.4, :mod:`coresvm.joint`) is
one simplex problem on all ``m`` training points with the extended kernel

    Q_ij = L[c_i, c_j] (k(x_i, x_j) + bias) + delta_ij / C_i

(``L`` the label Gram matrix, :func:`~coresvm.problem.simplex_label_gram`).
:mod:`coresvm.solvers.dense` runs the core-set scheme (Tsang et al. 2005; Frandi et al. 2013
Alg. 1) in one compiled ``nogil`` loop for binary problems whose whole
``m x m`` kernel fits ``cache_size``.  The joint problem is much larger (all
7,291-15,000 points of USPS or letter), but that loop only ever writes the
rows of the *working set*, so here the row buffer holds as many rows as the
byte budget allows (``cache_size / (itemsize * m)``), not ``m``:

* rows are ``float32`` when ``tol >= 1e-3`` (the core-set solvers' rule,
  :func:`~coresvm.solvers.core_set.gram_dtype`), halving memory and the
  bandwidth of the per-round gradient refresh;
* the batch of violators added per round grows with the working set
  (:data:`GROWTH_DIVISOR`): every round refreshes the exact gradient of all
  ``m`` points from the ``n_w`` rows (``n_w * m`` multiply-adds), so a fixed
  batch of 32 would make that refresh quadratic in the number of rounds;
* when the buffer is full, working-set points with zero weight give their
  rows back; if the support itself outgrows the buffer, the loop stops with
  ``core_set_full`` and :func:`run_dense_joint` continues from its solution
  with the core-set solver (:func:`~coresvm.solvers.driver.run_engine`).
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
from numba import njit

from ..kernels import RBF, kernel_from_dot, single_threaded_blas
from ..problem import SimplexProblem
from .clock import now
from .core_set import gram_dtype
from .dense import (
    BATCH,
    GROWTH_DIVISOR,
    ROUND_GOES_ON,
    exp_nonpositive,
    gap_and_scale,
    move_batch_to_front,
    refresh_gradient,
    solve_round,
    swap_positions,
    worst_outside,
)
from .driver import SolverOptions, SolverResult, run_engine, solver_result
from .engine import (
    SECOND_VERTEX_RULES,
    STATUS_CORE_SET_FULL,
    STATUS_MAX_ITER,
)
from .sampling import balanced_initial_points
from .steps import vertex_score

# A round adds up to max(BATCH, n_w / GROWTH_DIVISOR) violators (dense.py's divisor): the working set grows
# geometrically, so the gradient refreshes cost a constant factor times the final n_w * m instead of
# n_w^2 * m / BATCH.

# The smallest row budget worth running: the initial points and two batches.
MIN_ROWS = 2 * BATCH + 64

# Rows per BLAS product in _fill_joint_rows.
DOT_CHUNK = 64


def row_capacity(n_points: int, cache_bytes: int, tol: float) -> int:
    """How many kernel rows of length ``n_points`` fit ``cache_bytes`` (at most ``n_points``)."""
    itemsize = np.dtype(gram_dtype(tol)).itemsize
    return int(min(n_points, cache_bytes // (itemsize * max(n_points, 1))))


def fits_dense_joint(n_points: int, cache_bytes: int, tol: float) -> bool:
    """Whether the byte budget holds enough rows for :func:`run_dense_joint` to be worth starting."""
    return row_capacity(n_points, cache_bytes, tol) >= min(n_points, MIN_ROWS)


@njit(cache=True, nogil=True)
def _fill_joint_rows(X, norms, labels, same, other, inv_c, kind, gamma, coef0, degree, bias, first, last, rows,
                     dots):
    """``rows[p, :] = Q[p, :]`` for ``first <= p < last``.

    The inner products come from BLAS in chunks of ``dots.shape[0]`` rows into the reused buffer ``dots``
    (a new ``batch x m`` array per round would be fresh memory each time).  ``labels`` holds the class
    indices (as float64); the label Gram is ``same`` on its diagonal and ``other`` off it (the simplex
    labels: 1 and ``-1/(K-1)``), so its factor is a select, which vectorizes.
    """
    m = X.shape[0]
    chunk = dots.shape[0]
    argument = np.empty(m)
    kernel = np.empty(m)
    work = np.empty(m, dtype=np.int64)
    for start in range(first, last, chunk):
        stop = min(start + chunk, last)
        block = dots[: stop - start]
        np.dot(X[start:stop], X.T, block)
        for k in range(stop - start):
            p = start + k
            norm_p = norms[p]
            label_p = labels[p]
            if kind == RBF:
                for r in range(m):
                    argument[r] = -gamma * max(norm_p + norms[r] - 2.0 * block[k, r], 0.0)
                exp_nonpositive(argument, work, kernel)
            else:
                for r in range(m):
                    kernel[r] = kernel_from_dot(kind, block[k, r], norm_p, norms[r], gamma, coef0, degree)
            out = rows[p]
            for r in range(m):
                factor = same if labels[r] == label_p else other
                out[r] = factor * (kernel[r] + bias)
            out[p] += inv_c[p]


@njit(cache=True, nogil=True)
def _swap_with_rows(p, q, n_w, X, norms, labels, inv_c, diag, alpha, G, order, position, rows):
    """Exchange working-set positions ``p`` and ``q`` (both ``< n_w``): data, rows and the rows' columns."""
    swap_positions(p, q, X, norms, labels, inv_c, diag, alpha, G, order, position)
    for r in range(rows.shape[1]):
        rows[p, r], rows[q, r] = rows[q, r], rows[p, r]
    for t in range(n_w):
        rows[t, p], rows[t, q] = rows[t, q], rows[t, p]


@njit(cache=True, nogil=True)
def _drop_inactive(n_w, X, norms, labels, inv_c, diag, alpha, G, order, position, rows):
    """Move the working-set points with zero weight behind the active ones; returns the new ``n_w``.

    Their rows are no longer needed: the gradient ``G = Q a`` only reads rows with ``a_t > 0``.
    """
    front = 0
    back = n_w - 1
    while True:
        while front <= back and alpha[front] > 0.0:
            front += 1
        while back >= front and alpha[back] <= 0.0:
            back -= 1
        if front >= back:
            break
        _swap_with_rows(front, back, n_w, X, norms, labels, inv_c, diag, alpha, G, order, position, rows)
    return front


@njit(cache=True, nogil=True)  # releases the GIL like the binary loop
def solve_dense_joint_loop(X, norms, labels, same, other, inv_c, kind, gamma, coef0, degree, bias, diag, lam,
                           second_rule, gmdm_k, eta, tol, max_iter, max_time, init_idx, init_alpha, rows,
                           growth_divisor):
    """:func:`coresvm.solvers.dense.solve_dense_loop` for the label-Gram kernel, in the row buffer ``rows``.

    ``rows`` has shape ``(capacity, m)`` (uninitialised; float32 or float64).  A round adds at most
    ``max(BATCH, n_w // growth_divisor)`` violators.
    ``X, norms, labels, inv_c, diag`` are the problem's own copies, permuted in
    place.  Returns (alpha over all m points in the original order, steps, gap,
    scale, status, a'Qa, rows computed, rounds); status ``STATUS_CORE_SET_FULL``
    when the support outgrew the buffer (the solution so far is feasible).
    """
    m = X.shape[0]
    capacity = rows.shape[0]
    dots = np.empty((DOT_CHUNK, m))
    order = np.arange(m)
    position = np.arange(m)
    alpha = np.zeros(m)
    G = np.zeros(m)
    n_w = move_batch_to_front(init_idx, 0, X, norms, labels, inv_c, diag, alpha, G, order, position, rows)
    alpha[:n_w] = init_alpha
    _fill_joint_rows(X, norms, labels, same, other, inv_c, kind, gamma, coef0, degree, bias, 0, n_w, rows, dots)
    rows_computed = n_w
    n2, D = refresh_gradient(rows, alpha, n_w, diag, G)
    t_start = now()
    steps = 0
    rounds = 0
    status = STATUS_MAX_ITER
    gap, scale = gap_and_scale(G, diag, lam, n2, D)
    outer_rel_gap = gap / scale
    while True:
        taken, inner_tol, n2, D, gap, scale, stop = solve_round(rows, alpha, G, diag, n_w, lam, second_rule,
                                                                gmdm_k, eta, tol, outer_rel_gap, max_iter, steps,
                                                                max_time, t_start, inv_c[:0])
        steps += taken
        rounds += 1
        outer_rel_gap = gap / scale
        if stop != ROUND_GOES_ON:
            status = stop
            break
        batch = max(BATCH, n_w // growth_divisor)
        new = worst_outside(G, diag, lam, n_w, vertex_score(n2, lam, D) - 0.5 * tol * scale, batch)
        if new.shape[0] == 0:
            if taken == 0 and inner_tol <= 0.5 * tol:
                break  # numerically stuck (not expected): stop rather than loop
            continue
        new_points = order[new]
        if n_w + new_points.shape[0] > capacity:
            n_w = _drop_inactive(n_w, X, norms, labels, inv_c, diag, alpha, G, order, position, rows)
            room = capacity - n_w
            if room <= 0:
                status = STATUS_CORE_SET_FULL
                break
            new_points = new_points[:room]  # the worst violators first
        first = n_w
        n_w = move_batch_to_front(new_points, n_w, X, norms, labels, inv_c, diag, alpha, G, order, position, rows)
        _fill_joint_rows(X, norms, labels, same, other, inv_c, kind, gamma, coef0, degree, bias, first, n_w, rows,
                         dots)
        rows_computed += n_w - first
    alpha_original = np.zeros(m)
    for t in range(n_w):
        alpha_original[order[t]] = alpha[t]
    return alpha_original, steps, gap, scale, status, n2, rows_computed, rounds


def run_dense_joint(problem: SimplexProblem, options: SolverOptions, init_idx: np.ndarray | None = None,
                    init_alpha: np.ndarray | None = None) -> SolverResult:
    """Solve the joint ``problem`` with :func:`solve_dense_joint_loop`, like :func:`~coresvm.solvers.dense.run_dense`.

    The row buffer takes at most ``options.cache_bytes`` (:func:`row_capacity`).  If the support outgrows it,
    the core-set solver (``run_engine``) continues from the solution reached, with the iterations and time
    left.
    """
    X = problem.X
    if not isinstance(X, np.ndarray):
        raise ValueError("the dense joint solver needs a dense NumPy X (CSR and memory maps: use 'coreset')")
    if not problem.is_joint:
        raise ValueError("run_dense_joint takes the joint multiclass problem (a label Gram); binary: run_dense")
    m = problem.n_points
    capacity = row_capacity(m, options.cache_bytes, options.tol)
    if not fits_dense_joint(m, options.cache_bytes, options.tol):
        raise ValueError(
            f"cache_size holds {capacity} kernel rows of {m} points; the dense joint solver needs "
            f"{min(m, MIN_ROWS)} ({min(m, MIN_ROWS) * m * 4 / 2**20:.0f} MB or more)"
        )
    if init_idx is None:
        init_idx = balanced_initial_points(problem.y, options.n_init, np.random.RandomState(options.seed))
        init_alpha = np.full(len(init_idx), 1.0 / len(init_idx))
    init_idx = np.ascontiguousarray(init_idx, dtype=np.int64)
    init_alpha = np.asarray(init_alpha, dtype=np.float64)
    init_alpha = init_alpha / init_alpha.sum()
    if len(init_idx) > capacity:  # a warm start larger than the buffer: the core-set solver takes it
        return run_engine(problem, options, init_idx, init_alpha)
    same, other = _two_label_products(problem.label_gram)
    rows = np.empty((capacity, m), dtype=gram_dtype(options.tol))
    kernel = problem.kernel
    start = time.perf_counter()
    # One thread: BLAS's own threads spin-wait between the loop's small products (chunks of DOT_CHUNK rows)
    # and doubled the CPU time for no gain in wall time.
    with single_threaded_blas():
        alpha, steps, gap, scale, status, n2, n_rows, rounds = solve_dense_joint_loop(
            np.array(X, dtype=np.float64, order="C", copy=True), problem.norms.astype(np.float64),
            np.array(problem.y, dtype=np.float64), same, other, problem.inv_c.copy(),
            np.int64(kernel.code), float(kernel.gamma), float(kernel.coef0), float(kernel.degree), problem.bias_term,
            problem.diag.copy(), float(problem.lam), np.int64(SECOND_VERTEX_RULES[options.second_vertex]),
            float(options.gmdm_k), float(options.eta), float(options.tol), np.int64(options.max_iter),
            float(options.max_time), init_idx, np.ascontiguousarray(init_alpha), rows,
                np.int64(GROWTH_DIVISOR),
        )
    del rows
    elapsed = time.perf_counter() - start
    support = np.flatnonzero(alpha > 0)
    if status == STATUS_CORE_SET_FULL:
        return _continue_with_core_set(problem, options, support, alpha[support], int(steps), elapsed)
    return solver_result(support, alpha[support], steps, gap, scale, status, n2, elapsed, cache_misses=int(n_rows),
                         rounds=int(rounds), cache_bytes=int(capacity) * m * np.dtype(gram_dtype(options.tol)).itemsize)


def _two_label_products(label_gram: np.ndarray) -> tuple[float, float]:
    """The label Gram's diagonal and off-diagonal values (the simplex labels': 1 and ``-1/(K-1)``)."""
    same, other = float(label_gram[0, 0]), float(label_gram[0, 1])
    expected = np.full(label_gram.shape, other) + (same - other) * np.eye(label_gram.shape[0])
    if not np.array_equal(label_gram, expected):
        raise ValueError("the dense joint solver takes a label Gram with one diagonal and one off-diagonal value "
                         "(simplex_label_gram)")
    return same, other


def _continue_with_core_set(problem, options, support, alpha, steps: int, elapsed: float) -> SolverResult:
    """The buffer is full of support vectors: the core-set solver goes on from ``(support, alpha)``."""
    rest = replace(options, max_iter=max(options.max_iter - steps, 1), max_time=max(options.max_time - elapsed, 0.0))
    result = run_engine(problem, rest, support, alpha)
    result.n_iter += steps
    result.time += elapsed
    return result
