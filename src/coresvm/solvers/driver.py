"""Python-side set-up of the compiled engine: options, initialization, result."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np

from ..cache import ColumnCache
from ..problem import SimplexProblem
from .core_gram import FLOAT64_GRAM_TOL, CoreSetState, budget_capacity
from .core_set import exact_gradient, solve_core_set
from .engine import SECOND_VERTEX_RULES, STATUS_NAMES, STEP_RULES, solve_simplex
from .geometric import (
    BALL_RULES,
    STOPPING_RULES,
    BlockBallRun,
    BvmRun,
    DrawnBallRun,
    block_search_features,
    bvm_track_after,
    default_eps,
    multiscale_schedule,
    run_gap_check,
    solve_in_stages,
    tracks_every_point,
)
from .options import SolverOptions
from .sampling import balanced_initial_points, strata


@dataclass
class SolverResult:
    """What a run returns: the solution on its support plus a record of the run."""

    support: np.ndarray
    alpha: np.ndarray
    n_iter: int
    gap: float
    rel_gap: float
    status: str
    time: float
    squared_norm: float = 0.0
    cache_hits: int = 0
    cache_misses: int = 0
    cache_bytes: int = 0
    rounds: int = 0  # core-set solvers: outer rounds
    eps: float | None = None  # the (1 + eps) radius test's eps (CVM and the gsvm family)
    stop_value: float | None = None  # gsvm family: max_i V(x~_i) of its stopping rule (geometric.stop_values)
    gap_points: int = 0  # gsvm family: the points the gap and stop_value were measured on
    memory_refused_at: int = 0  # core-set loop: its size when the system refused its Gram more memory (0: never)
    phases: dict = field(default_factory=dict)  # core-set loop only: seconds per phase, Newton steps (and rounds)
    trace_rel_gap: np.ndarray = field(default_factory=lambda: np.zeros(0))
    trace_time: np.ndarray = field(default_factory=lambda: np.zeros(0))
    stage_log: np.ndarray = field(default_factory=lambda: np.zeros((0, 4)))  # BVM: (eps, iters, #SV, s) per stage
    dot_rows: tuple = ()  # solvers/dense.py with keep_dots: (points, their inner products) for the next warm fit
    kernel_rows: tuple = ()  # solvers/dense.py with keep_rows: (buffer, order, 1/C, rows written) for the next fit

    def as_record(self) -> dict:
        record = run_record(self.n_iter, self.gap, self.rel_gap, self.status, self.time,
                            int(self.support.shape[0]), self.cache_hits, self.cache_misses, self.eps)
        if self.stop_value is not None:  # the gsvm family's own stopping quantity, beside the gap
            record["stop_value"] = self.stop_value
            record["gap_points"] = self.gap_points
        if self.memory_refused_at:
            record["memory_refused_at"] = self.memory_refused_at
        if self.phases:  # the core-set loop: its rounds and where their time went
            record["rounds"] = self.rounds
            record.update(self.phases)
        return record


def run_record(n_iter: int, gap: float, rel_gap: float, status: str, time: float, n_active: int,
               cache_hits: int = 0, cache_misses: int = 0, eps: float | None = None) -> dict:
    """The record of a run that fitted models keep (``solver_info_``): :meth:`SolverResult.as_record`, also
    built directly from arrays when many sub-problems are solved in one call."""
    return {
        "iterations": n_iter,
        "gap": gap,
        "relative_gap": rel_gap,
        "status": status,
        "time": time,
        "n_active": n_active,
        "cache_hits": cache_hits,
        "cache_misses": cache_misses,
        **({"eps": eps} if eps is not None else {}),
    }


def run_engine(
    problem: SimplexProblem,
    options: SolverOptions,
    init_idx: np.ndarray | None = None,
    init_alpha: np.ndarray | None = None,
) -> SolverResult:
    """Solve ``problem`` with the compiled engine under ``options``.

    ``init_idx``/``init_alpha`` warm-start the run; otherwise it starts from a
    class-balanced random subset with uniform weights.
    """
    check_joint_support(problem, options)
    rng = np.random.RandomState(options.seed)
    m = problem.n_points
    if init_idx is None:
        init_idx = balanced_initial_points(problem.y, options.n_init, rng)
        init_alpha = np.full(len(init_idx), 1.0 / len(init_idx))
    init_idx = np.ascontiguousarray(init_idx, dtype=np.int64)
    init_alpha = np.ascontiguousarray(init_alpha, dtype=np.float64)
    init_alpha = init_alpha / init_alpha.sum()

    if options.ball_rule:
        return _run_ball(problem, options, rng, int(init_idx[0]))
    if options.core_set:
        return _run_core_set(problem, options, rng, init_idx, init_alpha)
    options, extra = radius_test_options(problem, options)
    full = options.sample_size <= 0
    if full:
        cache = ColumnCache(m, options.cache_bytes)
    else:
        cache = ColumnCache(1, 16)
    strata_ptr, strata_order = strata(problem.y, options.stratified)
    trace_gap = np.zeros(options.trace_length)
    trace_time = np.zeros(options.trace_length)

    start = time.perf_counter()
    support, alpha, n_iter, gap, scale, status, n2 = solve_simplex(
        *problem.kernel_args(),
        problem.diag,
        float(problem.lam),
        np.int64(STEP_RULES[options.step_rule]),
        np.int64(SECOND_VERTEX_RULES[options.second_vertex]),
        float(options.gmdm_k),
        np.int64(options.sample_size),
        float(options.tol),
        np.int64(options.max_iter),
        float(options.max_time),
        float(options.eta),
        np.int64(rng.randint(0, 2**31 - 1)),
        init_idx,
        init_alpha,
        strata_ptr,
        strata_order,
        *cache.arrays(),
        float(options.verbose),
        trace_gap,
        trace_time,
    )
    elapsed = time.perf_counter() - start
    n_trace = min(int(n_iter) + 1, options.trace_length)
    return solver_result(
        support, alpha, n_iter, gap, scale, status, n2, elapsed,
        cache_hits=cache.hits if full else 0,
        cache_misses=cache.misses if full else 0,
        cache_bytes=cache.nbytes if full else 0,
        trace_rel_gap=trace_gap[:n_trace],
        trace_time=trace_time[:n_trace],
        **extra,
    )


# The gsvm-family solvers that take the joint multiclass problem (Strack 2013, sec. 5.4.2: "generalization of
# binary SphereSVM and MNSVM into multi-class solvers"): their steps read Q only through the compiled evaluators,
# which take label vectors.  BVM's loop keeps signed kernel columns of its own.
JOINT_BALL_RULES = ("sphere", "mnsvm")


def check_joint_support(problem: SimplexProblem, options: SolverOptions) -> None:
    """Refuse a joint multiclass ``problem`` for a solver that cannot solve it, saying which can."""
    if not problem.is_joint or options.core_set or options.ball_rule in JOINT_BALL_RULES:
        return
    chosen = options.ball_rule or options.step_rule
    raise ValueError(
        f"the joint multiclass problem is solved by the core-set solvers ('coreset', 'cvm') and by 'sphere' and "
        f"'mnsvm' (Strack 2013, sec. 5.4), not by {chosen!r}: its loop evaluates binary labels y_i y_j"
    )


def solver_result(support, alpha, n_iter, gap, scale, status, n2, elapsed, **extra) -> SolverResult:
    """A SolverResult with the support sorted by training index."""
    order = np.argsort(support)
    return SolverResult(
        support=support[order],
        alpha=alpha[order],
        n_iter=int(n_iter),
        gap=float(gap),
        rel_gap=float(gap / scale),
        status=STATUS_NAMES[int(status)],
        time=elapsed,
        squared_norm=float(n2),
        **extra,
    )


def radius_test_options(problem: SimplexProblem, options: SolverOptions) -> tuple[SolverOptions, dict]:
    """``options`` with ``tol`` set for the (1 + eps)-ball stopping test, and the result's extra fields.

    CVM (Tsang et al. 2005, sec. 4, step 2) and Frank-Wolfe (Frandi et al. 2013, Alg. 2 line 8, Alg. 3
    line 11) stop when no searched point lies outside the ball of the current radius enlarged by
    ``1 + eps``: ``||c - x~_i||^2 <= (1 + eps)^2 r^2`` with ``r^2 = Delta^2 - ||c||^2`` (eq. 20).
    On the MEB form (``lam = 1``, constant ``Delta^2 = k~(x, x)``) the solvers' gap of the searched
    vertex is ``||c - x~_i||^2 - r^2`` and their scale is ``r^2 = a'diag(Q) - a'Qa``, so the test is
    theirs with ``tol = (1 + eps)^2 - 1`` -- eps relative to ``r^2``, not to the margin ``a'Qa``.
    ``eps`` is given, or LibCVM's heuristic (Strack 2013, eq. 7.3).  Other runs pass unchanged.
    """
    if not (options.radius_test and problem.lam == 1.0):
        return options, {}
    eps = ball_eps(problem, replace(options, stopping="meb"))
    return replace(options, tol=(1.0 + eps) ** 2 - 1.0), {"eps": eps}


def _run_core_set(problem, options, rng, init_idx, init_alpha) -> SolverResult:
    options, extra = radius_test_options(problem, options)
    start = time.perf_counter()
    support, alpha, n_iter, gap, scale, status, n2, rounds, refused_at, phases = solve_core_set(
        problem, options, rng, init_idx, init_alpha
    )
    return solver_result(support, alpha, n_iter, gap, scale, status, n2, time.perf_counter() - start,
                         rounds=int(rounds), memory_refused_at=int(refused_at), phases=phases, **extra)


def ball_eps(problem: SimplexProblem, options: SolverOptions) -> float:
    """The final eps of a gsvm-family run: given, or gsvm's default for the stopping rule."""
    if options.eps is not None:
        return float(options.eps)
    return default_eps(options.stopping, problem.median_diag(), problem.median_C())


def _run_bvm(problem, options, rng, init_point: int, eps: float, stages: np.ndarray) -> SolverResult:
    """BVM (:class:`~coresvm.solvers.geometric.BvmRun`): no Gram matrix, so no cache budget."""
    start = time.perf_counter()
    m = problem.n_points
    track_after = bvm_track_after(m, options.probe) if options.track_after is None else options.track_after
    run = BvmRun(problem, np.int64(STOPPING_RULES[options.stopping]), len(stages), np.int64(options.draws),
                 np.int64(options.probe), float(options.eta), rng.randint(0, 2**31 - 1), int(init_point),
                 *strata(problem.y, options.stratified), min(options.max_core_vectors, m), track_after)
    support, alpha, g_support, n_iter, _, status, stage_log = solve_in_stages(
        run, stages, int(options.max_iter), float(options.max_time), float(options.verbose))
    return _ball_result(problem, options, rng, support, alpha, n_iter, status, start, len(stages), eps,
                        g_support=g_support, stage_log=stage_log)


def _ball_result(problem, options, rng, support, alpha, n_iter, status, start, rounds, eps, g_support=None,
                 **extra) -> SolverResult:
    elapsed = time.perf_counter() - start
    keep = alpha > 0
    support, alpha = support[keep], alpha[keep]
    if g_support is None:
        # The Gram may be float32: ||c||^2 (the model's scale) is recomputed in float64.
        g_support = exact_gradient(problem, support, alpha)
    else:  # BVM tracked every point's g in float64 (no Gram): no #SV^2 kernel values at the end
        g_support = g_support[keep]
    w2 = float(alpha @ g_support)
    # The search stops on the rule's own quantity over random draws, not on the duality gap: the gap
    # (the other solvers' measure) and that quantity are measured on every point (or a large sample)
    # after the run, each under its own name (run_gap_check).
    relative_gap, stop_value, n_checked = run_gap_check(problem, support, alpha, g_support, w2,
                                                        STOPPING_RULES[options.stopping], rng)
    return solver_result(support, alpha, n_iter, 2.0 * relative_gap * w2, 2.0 * w2, status, w2, elapsed,
                         rounds=rounds, eps=eps, stop_value=stop_value, gap_points=n_checked, **extra)


def ball_gram_tol(eps: float, eta: float) -> float:
    """The tolerance that sizes the SVs' Gram of 'sphere' and 'mnsvm' (``core_gram.gram_dtype``: float32 from 1e-3).

    Over-relaxed runs (``eta > 1``) always get a float64 Gram.  The tracked ``||c||^2`` is updated
    with the step's curvature from the float64 diagonal, the gradients with float32 Gram rows; each
    step leaves an error of order ``beta^2 * 1e-7``.  Over-relaxation takes many more long steps
    (it overshoots, and drops and re-adds SVs), and on 600 points at C=10-1000 the error reached
    2e-3 of ``||c||^2`` at eta=1.9 (3.8e-6 at eta=1): more than ``eps = 1e-3``.  The mn/adjmn
    thresholds ``(1 - eps) ||c||^2`` then stay above the SVs' gradients for ever, and the run never
    stops (issue 29; with float64 it converged in 2.4k-8.4k iterations).  Strack 2013, sec. 5.3,
    eq. 5.6 has no other safeguard: the step ``min(eta beta^, alpha_u)`` with eta in [1, 2) still
    lowers ``||c||^2`` by ``eta (2 - eta)`` times the exact step's decrease, so eta near 2 is slow
    but not divergent.
    """
    if eta == 1.0:
        return eps
    return min(eps, FLOAT64_GRAM_TOL)


def ball_gram(budget_bytes: int, tol: float, m: int) -> np.ndarray:
    """The SVs' Gram of 'sphere' and 'mnsvm': as many points as ``budget_bytes`` allow, at most ``m`` (give or
    take the 15 points of :func:`~coresvm.solvers.core_gram.cache_friendly_capacity`).

    It cannot grow inside the compiled loop, so it is reserved at once; where the system refuses that (an
    address-space limit such as ``ulimit -v``, or strict overcommit), the error says so instead of a bare
    MemoryError."""
    try:
        return CoreSetState.within_budget(budget_bytes, tol, max_points=m).gram
    except MemoryError as error:
        points = budget_capacity(budget_bytes, tol, m)
        raise MemoryError(
            f"the support vectors' Gram matrix ({points} points, {budget_bytes / 2**20:.4g} MB of cache_size) could "
            f"not be reserved: the system refused it (an address-space limit such as ulimit -v, or strict "
            f"overcommit). Lower cache_size.") from error


def _run_ball(problem, options, rng, init_point: int) -> SolverResult:
    eps = ball_eps(problem, options)
    stages = np.array(multiscale_schedule(eps) if options.multiscale else [eps])
    if options.ball_rule == "bvm":
        return _run_bvm(problem, options, rng, init_point, eps, stages)
    m = problem.n_points
    tracking = options.track_every_point and tracks_every_point(problem, options.cache_bytes)
    # a small problem keeps the rows of Q beside the SV Gram, each at most m x m, half the budget
    gram = ball_gram(options.cache_bytes // 2 if tracking else options.cache_bytes, ball_gram_tol(eps, options.eta),
                     m)
    strata_ptr, strata_order = strata(problem.y, options.stratified)
    features = block_search_features(problem, gram.shape[0]) if options.block_search and not tracking else None
    start = time.perf_counter()
    rule = np.int64(BALL_RULES[options.ball_rule])
    selection = np.int64(SECOND_VERTEX_RULES[options.second_vertex])
    stopping = np.int64(STOPPING_RULES[options.stopping])
    parts = (problem, rule, selection, float(options.gmdm_k), stopping, int(options.draws), int(options.probe),
             float(options.eta), int(init_point), strata_ptr, strata_order, gram)
    if features is not None:
        run = BlockBallRun(*parts, features, rng)
    else:
        run = DrawnBallRun(*parts, np.empty((m, m)) if tracking else np.zeros((1, 1)), rng.randint(0, 2**31 - 1))
    support, alpha, n_iter, w2, _, status = solve_in_stages(run, stages, int(options.max_iter),
                                                             float(options.max_time), float(options.verbose))
    return _ball_result(problem, options, rng, support, alpha, n_iter, status, start, len(stages), eps)
