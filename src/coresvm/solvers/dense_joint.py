"""The joint multiclass problem on the small-problem solver's loop: cached kernel rows, exact gradient.

The joint ("all-at-once") machine (Strack 2013 sec. 5.4, :mod:`coresvm.joint`) is
one simplex problem on all ``m`` training points with the extended kernel

    Q_ij = L[c_i, c_j] (k(x_i, x_j) + bias) + delta_ij / C_i

(``L`` the label Gram matrix, :func:`~coresvm.problem.simplex_label_gram`).
:func:`coresvm.solvers.dense.solve_dense_loop` runs the core-set scheme (Tsang et al. 2005; Frandi et al. 2013
Alg. 1) in one compiled ``nogil`` loop; binary problems give it their signs as labels, this module the class
indices and ``L``'s two values (:class:`~coresvm.solvers.dense.RowScheme`).  The joint problem is much larger
(all 7,291-15,000 points of USPS or letter), but that loop only ever writes the rows of the *working set*, so
here the row buffer holds as many rows as the byte budget allows (``cache_size / (itemsize * m)``), not ``m``:

* rows are ``float32`` when ``tol >= 1e-3`` (the core-set solvers' rule,
  :func:`~coresvm.solvers.core_gram.gram_dtype`), halving memory and the
  bandwidth of the per-round gradient refresh;
* the inner products of a batch go through one reused buffer of :data:`DOT_CHUNK` rows;
* when the buffer is full, working-set points with zero weight give their
  rows back; if the support itself outgrows the buffer, the loop stops with
  ``core_set_full`` and :func:`run_dense_joint` continues from its solution
  with the core-set solver (:func:`~coresvm.solvers.driver.run_engine`);
* as when this loop was its own copy, a round's inner solve is not capped, points do not leave the working
  set before the buffer is full, and only the Frank-Wolfe gap ends the fit (:data:`JOINT_ROWS`).
"""

from __future__ import annotations

import time

import numpy as np

from ..kernels import single_threaded_blas
from ..problem import SimplexProblem
from .core_gram import gram_dtype
from .dense import BATCH, RowScheme, continue_with_core_set, dense_step_budget, solve_dense_loop, stopped_at_step_budget
from .driver import SolverOptions, SolverResult, run_engine, solver_result
from .engine import SECOND_VERTEX_RULES, STATUS_CORE_SET_FULL, STATUS_NAMES
from .sampling import balanced_initial_points

# The smallest row budget worth running: the initial points and two batches.
MIN_ROWS = 2 * BATCH + 64

# Rows per BLAS product of inner products (RowScheme.dot_chunk).
DOT_CHUNK = 64


def joint_rows(same: float, other: float, max_iter: int) -> RowScheme:
    """The loop's settings for the joint problem whose label Gram is ``same`` on its diagonal and ``other`` off it:
    uncapped rounds (``min_round_steps = max_iter``), no idle drops, the Frank-Wolfe gap alone."""
    return RowScheme(float(same), float(other), DOT_CHUNK, 0, int(max_iter), 0, False)


def row_capacity(n_points: int, cache_bytes: int, tol: float) -> int:
    """How many kernel rows of length ``n_points`` fit ``cache_bytes`` (at most ``n_points``)."""
    itemsize = np.dtype(gram_dtype(tol)).itemsize
    return int(min(n_points, cache_bytes // (itemsize * max(n_points, 1))))


def fits_dense_joint(n_points: int, cache_bytes: int, tol: float) -> bool:
    """Whether the byte budget holds enough rows for :func:`run_dense_joint` to be worth starting."""
    return row_capacity(n_points, cache_bytes, tol) >= min(n_points, MIN_ROWS)


def run_dense_joint(problem: SimplexProblem, options: SolverOptions, init_idx: np.ndarray | None = None,
                    init_alpha: np.ndarray | None = None) -> SolverResult:
    """Solve the joint ``problem`` with :func:`~coresvm.solvers.dense.solve_dense_loop`, like
    :func:`~coresvm.solvers.dense.run_dense`.

    The row buffer takes at most ``options.cache_bytes`` (:func:`row_capacity`).  If the support outgrows it, or
    the solve needs more pairwise steps than :func:`~coresvm.solvers.dense.dense_step_budget`, the core-set solver
    continues from the solution reached (:func:`~coresvm.solvers.dense.continue_with_core_set`), with the
    iterations and time left.
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
    rows = np.empty((capacity, m), dtype=gram_dtype(options.tol))  # lent to the loop as memory
    kernel = problem.kernel
    budget = dense_step_budget(m, options.max_iter)  # past it, the core-set loop's Newton steps take over
    start = time.perf_counter()
    # One thread: BLAS's own threads spin-wait between the loop's small products (chunks of DOT_CHUNK rows)
    # and doubled the CPU time for no gain in wall time.
    with single_threaded_blas():
        alpha, steps, gap, scale, status, n2, n_rows, rounds = solve_dense_loop(
            np.array(X, dtype=np.float64, order="C", copy=True), problem.norms.astype(np.float64),
            np.array(problem.y, dtype=np.float64), problem.inv_c.copy(), np.int64(kernel.code), float(kernel.gamma),
            float(kernel.coef0), float(kernel.degree), float(problem.bias_term), problem.diag.copy(),
            float(problem.lam), np.int64(SECOND_VERTEX_RULES[options.second_vertex]), float(options.gmdm_k),
            float(options.eta), float(options.tol), np.int64(budget), float(options.max_time), init_idx,
            np.ascontiguousarray(init_alpha), np.int64(BATCH), joint_rows(same, other, budget),
            *NO_OLD_DOTS, False, rows, *NO_KEPT_ORDER, False, False,
        )[:8]
    del rows
    elapsed = time.perf_counter() - start
    support = np.flatnonzero(alpha > 0)
    if status == STATUS_CORE_SET_FULL or stopped_at_step_budget(STATUS_NAMES[status], int(steps), options.max_iter):
        # the buffer is full of support vectors, or the pairwise steps are slow
        return continue_with_core_set(problem, options, support, alpha[support], int(steps), elapsed)
    return solver_result(support, alpha[support], steps, gap, scale, status, n2, elapsed, cache_misses=int(n_rows),
                         rounds=int(rounds), cache_bytes=int(capacity) * m * np.dtype(gram_dtype(options.tol)).itemsize)


# No inner products of an earlier fit (old_dots, old_points, old_slots, old_columns), no kept order or 1/C.
NO_OLD_DOTS = (np.empty((0, 0)), np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64))
NO_KEPT_ORDER = (np.empty(0, dtype=np.int64), np.empty(0))


def _two_label_products(label_gram: np.ndarray) -> tuple[float, float]:
    """The label Gram's diagonal and off-diagonal values (the simplex labels': 1 and ``-1/(K-1)``)."""
    same, other = float(label_gram[0, 0]), float(label_gram[0, 1])
    expected = np.full(label_gram.shape, other) + (same - other) * np.eye(label_gram.shape[0])
    if not np.array_equal(label_gram, expected):
        raise ValueError("the dense joint solver takes a label Gram with one diagonal and one off-diagonal value "
                         "(simplex_label_gram)")
    return same, other
