"""Core-set solver (CVM): grow a working set from sampled violators, solve it in memory.

The Core Vector Machine scheme (Tsang et al. 2005; Frandi et al. 2013, Alg. 1) on the same simplex
problem as the engine::

    repeat
        draw candidates at random; score them against the current solution
        add the worst violators to the core set (CVM: the furthest 1 of 59)
        re-solve the problem restricted to the core set, warm-started
    until a fresh sample (twice in a row) holds no violator

The restricted problem is solved by pairwise steps with the IMDM/GMDM second vertex
(:func:`~coresvm.solvers.core_steps.inner_solve`), and by Newton steps on its active face
(:mod:`~coresvm.solvers.active_face`), on the core set's Gram matrix
(:class:`~coresvm.solvers.core_gram.CoreSetState`), so an inner step costs O(core set) arithmetic
and no kernel evaluations; past :data:`COMPUTED_ROWS_FROM` points of
few-feature data the two rows of each step are computed instead.  The
outer scan costs ``n_candidates x |active|`` kernel values per round (with
``sweep_rounds``, at least ``m / sweep_rounds`` candidates: a sweep of the points
in a bounded number of rounds, each a re-solve), and runs as BLAS blocks with
NumPy's vectorized ``exp`` (the rounds are few, so the outer loop lives in Python).
"""

from __future__ import annotations

import numpy as np
from scipy.stats import beta as beta_distribution

from ..kernels import kernel_product, parallel_loop_threads
from .active_face import NewtonRecord, solve_with_newton
from .clock import fit_clock
from .core_gram import CoreSetState, append_points, computable_rows
from .core_steps import (
    NO_HELPER,
    NO_LINEAR_TERM,
    PARALLEL_ROWS_MIN_POINTS,
    STOP_RELATIVE_GAP,
    duality_gap_weights,
    inner_solve,
    l2svm_duality_gap,
    partner_work_space,
    pass_helper_loop,
)
from .engine import (
    SECOND_IMDM,
    SECOND_VERTEX_RULES,
    STATUS_CALLBACK,
    STATUS_CONVERGED,
    STATUS_CORE_SET_FULL,
    STATUS_MAX_ITER,
    STATUS_MAX_TIME,
    print_progress,
)
from .helper_thread import HelperThread, new_control
from .sampling import SWEEP_MAX_POINTS, NearMarginPoints, draw_distinct, next_candidates
from .steps import vertex_score

# Inner solves of the L2-SVM with IMDM on a stored Gram take a helper thread (core_steps.pass_helper_loop) from
# 2,048 points.  The same fits, helper on and off: ijcnn1's inner solves 8-14% faster, the 1M checkerboard's 8-16%,
# a9a's (8,000-16,000 points) 15-30%; on 1,000 points a step took longer with the helper than without.
HELPER_MIN_POINTS = 2048


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
    relative duality gap below ``tol`` (:func:`~coresvm.solvers.core_steps.inner_solve`): the Frank-Wolfe gap,
    under which no core point violates by more than ``tol``, or, when ``tol >= 1e-3`` (a float32 Gram), also the
    tighter :func:`~coresvm.solvers.core_steps.l2svm_duality_gap`, which bounds only the objective's distance to
    the optimum.  Either rule is exact
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
    """Solve the core set to ``tol``: pairwise steps (:func:`~coresvm.solvers.core_steps.inner_solve`), and for
    the L2-SVM (``lam = 0``) Newton steps on the active face where their rate is slow
    (:func:`~coresvm.solvers.active_face.solve_with_newton`), a rate measured by the L2-SVM's duality gap.
    ``float64_gram_possible``: return once a face shows the float32 Gram's rounding indefinite
    (:meth:`~coresvm.solvers.core_gram.CoreSetState.in_float64`)."""
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


# Compaction: a core set is compacted past this many times its active points (plus 256).  Once its rows are computed
# (no Gram to grow or compact) idle points cost only their share of each step's passes, and dropped ones often come
# back: make_moons 14.7 -> 13.5 s (65 -> 53 rounds), the 1M checkerboard at C = 10 17.8 -> 17.0 s (2.0 against 1.25).
IDLE_SHARE = 1.25
IDLE_SHARE_COMPUTED = 2.0


def _grow(problem, core: CoreSetState, in_core, new_points, newton_paid: bool = False,
          new_gradient: np.ndarray | None = None) -> int:
    """Add violators (worst first) to the core set; returns how many fitted.  ``new_gradient``: their scores, ``G``
    for computed rows (:func:`~coresvm.solvers.core_gram.append_points`).

    Zero-weight points are dropped first when the core set holds more than :data:`IDLE_SHARE` times its active points
    (and 256; :data:`IDLE_SHARE_COMPUTED` once its rows are computed), or when the new points would exceed the byte
    budget.  Every pairwise step passes over the whole core set and its Gram matrix takes ``n^2`` entries: a slack
    of the round's allowance, ``growth x |active|``, let the core set reach 2.25 times its active points (the 1M
    checkerboard at C=10: 55,000 points for 33,700 active, 12 GB).  A core set of
    :func:`~coresvm.solvers.core_gram.computable_rows` drops its Gram
    (:meth:`~coresvm.solvers.core_gram.CoreSetState.compute_rows_from`) past :data:`COMPUTED_ROWS_FROM` points, or
    past :data:`NEWTON_GRAM_POINTS` once a Newton step has paid (``newton_paid``).
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


