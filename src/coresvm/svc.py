"""CoreSVC: a scikit-learn classifier trained by the geometric simplex-QP solvers."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import scipy.sparse as sp
from joblib import effective_n_jobs
from sklearn.base import ClassifierMixin
from sklearn.metrics import accuracy_score
from sklearn.utils import check_random_state

from ._validation import (
    check_kernel_range,
    encode_labels,
    unfitted_on_failure,
)
from .data import is_memory_mapped, read_rows
from .duplicates import duplicate_representatives, merge_duplicates
from .estimator import CoreEstimatorBase, check_sample_weight
from .joint import fit_joint
from .kernels import (
    default_kernel_threads,
    resolve_gamma,
    squared_norms,
    within_process_thread_limit,
)
from .multiclass import (
    BinaryModel,
    OneVsOneLayout,
    OneVsRestLayout,
    SubProblem,
    kernel_decisions,
    n_problems,
    one_vs_one_problems,
    one_vs_rest_problems,
    one_vs_rest_scores,
    rows_where,
)
from .parallel import ProblemQueue, TimeBudget, contiguous_chunks, run_in_threads, work_through_queue
from .problem import SimplexProblem, kkt_bias, take_rows
from .solvers.clock import fit_clock
from .solvers.dense import (
    STAT_STATUS,
    STAT_STEPS,
    STAT_TIME,
    continue_with_core_set,
    dense_step_budget,
    fits_dense,
    run_dense_rows,
    run_many_dense_rows,
    stopped_at_step_budget,
)
from .solvers.driver import SolverOptions, run_engine
from .solvers.engine import STATUS_NAMES, print_progress
from .subproblems import empty_model, models_from_chunk, run_with_callback
from .svc_options import (  # noqa: F401 -- the constants stay readable as coresvm.svc.<NAME>
    AUTO_FULL_SEARCH_MAX_POINTS,
    BALL_SOLVERS,
    BIAS_RULES,
    CORE_SET_SOLVERS,
    FRANK_WOLFE_SOLVERS,
    MEB_SOLVERS,
    MULTICLASS_MODES,
    SVCParameters,
)
from .svc_probability import ProbabilityMixin
from .svc_warm import (  # noqa: F401 -- HEAVY_START_*: readable as coresvm.svc.<NAME>
    HEAVY_START_C_RATIO,
    HEAVY_START_MIN_POINTS,
    WarmStartMixin,
)
from .warm_start import (
    KeptInnerProducts,
    KeptKernelRows,
    SharedInnerProducts,
)

# Sub-problems of at most this many points run on one thread even with n_jobs=1: their kernel
# blocks are too small for BLAS or kernel_product threads to pay (pendigits one-vs-one: results/multiclass.md).
ONE_THREAD_MAX_POINTS = 5000
# With n_jobs=None, larger sub-problems also run side by side, one per thread, once there are at least this many per
# thread: a core-set solve's pairwise steps run on one thread (on a stored Gram; computed rows are split among the
# threads from 16,384 core points), so one sub-problem at a time left a core idle for much of its time (the pairwise
# steps alone were a quarter).  Five classes (make_classification, 15 features,
# 50,000 rows; ten pairs of 20,000 points, C = 4): 16.3-17.2 s one at a time, 12.1-12.9 s two at a time, the same
# model; three classes (three pairs of 32,000 points) 9.4-10.0 s either way: the last pair runs alone.
CONCURRENT_MIN_PROBLEMS_PER_THREAD = 2
# (Sub-)problems of solver='coreset' whose kernel fits cache_size run on solvers/dense.py
# (see CoreSVC._small_problem_fast_path); False forces the Python core-set loop (tests compare the two).
SMALL_PROBLEM_FAST_PATH = True
# With n_jobs workers, small sub-problems solved in compiled chunks (CoreSVC._solve_chunk) are cut into this many
# chunks per worker, so that a worker whose chunk ran long does not leave the others idle at the end.
CHUNKS_PER_WORKER = 4
# At most about this many squared points (the sub-problems' kernel sizes) per compiled chunk: letter's 325 pairs
# (about 2 million) stay one chunk, pairs of thousands of points get a chunk each.
CHUNK_COST = 2**22
NO_WARM_START = (np.empty(0, dtype=np.int64), np.empty(0))

class CoreSVC(SVCParameters, WarmStartMixin, ProbabilityMixin, ClassifierMixin, CoreEstimatorBase):
    """Kernel SVM trained as an L2-SVM on the unit simplex by Frank-Wolfe-type steps.

    The L2-SVM (Lee & Mangasarian; Frandi et al. 2013, eq. 7) is solved through its dual,
    a quadratic program over the unit simplex with the extended kernel
    ``Q_ij = y_i y_j (k(x_i, x_j) + 1) + delta_ij / C_i``.  Its solvers touch the
    data one kernel column (full search) or one small candidate sample
    (randomized search) at a time and never form the ``m x m`` kernel matrix.

    Parameters
    ----------
    C : float, default=1.0
        Penalty of the *squared* slacks in the L2-SVM primal
        ``1/2 (||w||^2 + b^2 + C sum_i xi_i^2) - rho``.  This is not
        scikit-learn ``SVC``'s C (which weighs ``sum_i xi_i`` with the margin
        fixed at 1): here the margin ``rho`` is free and ``C`` enters only as the
        ridge ``1/C`` on the kernel diagonal.  Larger C means fewer margin
        violations (harder margin).  Good values are usually larger than SVC's
        (on ijcnn1 about 100-1000 vs SVC's 256 on its own scale) -- tune it
        separately, e.g. with ``GridSearchCV`` over ``C in 2**arange(-2, 12)``.
    kernel : {'rbf', 'poly', 'linear', 'sigmoid'}, default='rbf'
    gamma : float or {'scale', 'auto', 'cvm'}, default='scale'
        Kernel width.  'scale' and 'auto' as in scikit-learn; 'cvm' is
        ``1 / mean squared pairwise distance`` on a subsample (the CVM paper).
    degree : int, default=3
        Degree of the 'poly' kernel ``(gamma <x, x'> + coef0)^degree``.
    coef0 : float, default=0.0
        Independent term of 'poly' and 'sigmoid'.
    solver : {'coreset', 'cvm', 'bvm', 'sphere', 'mnsvm', 'fw', 'mfw', 'swap', 'partan'}, default='coreset'
        'cvm' is the Core Vector Machine (Tsang et al. 2005): each round scores
        ``n_candidates`` random points (59), adds the ``batch_size`` (1) worst
        violators to the core set and re-solves the minimum enclosing ball of
        the core set with pairwise steps on its in-memory Gram matrix; it stops
        when no sampled point lies outside the ``(1 + eps)``-ball (``eps``
        given, or LibCVM's heuristic; ``tol`` is not used).  'coreset' is the
        same loop with large batches (10,000 candidates scored per round; the
        worst ``max(300, #SV)`` violators added, so the core set doubles while
        violators abound) and the statistical stop described under ``tol``.  A 'coreset' problem (the binary problem, a
        one-vs-one pair or a one-vs-rest class) whose extended
        kernel fits ``cache_size`` (``m^2 * 8`` bytes) and whose ``X`` is a
        dense in-memory array runs the same core-set scheme in one compiled,
        GIL-free function with cached kernel rows and the exact gradient
        (:mod:`coresvm.solvers.dense`; not with a ``callback``): it stops on
        the true relative gap ``tol``, like the full-search engine.  The Frank-Wolfe family works on the whole
        problem: 'fw' toward steps with exact line search; 'mfw' adds Wolfe's
        away steps (points can be dropped); 'swap' the pairwise step, taken
        when it beats the FW step; 'partan' FW plus a parallel-tangent step
        (Frandi et al. 2015).  'swap' and 'mfw' converge linearly near the solution;
        'fw' and 'partan' only sublinearly.  The gsvm family (Strack 2013) moves
        toward one sampled violator per iteration: 'bvm' the Ball Vector
        Machine (ball steps with the fixed radius ``sqrt(k(x,x) + 1 + 1/C)``,
        SVs never leave), 'sphere' SphereSVM (two-point ball steps; an SV can
        leave) and 'mnsvm' the minimal-norm SVM (MDM steps).  'cvm', 'bvm' and
        'sphere' solve a minimum enclosing ball and need a constant
        ``k(x, x)`` (the RBF kernel, one C for every sample); 'mnsvm' and the
        Frank-Wolfe family take any kernel and weights.
    search : {'auto', 'full', 'random'}, default='auto'
        Vertex search.  'full' scans the whole gradient (kept for all points,
        one kernel column per step, LRU-cached); 'random' takes the best of
        ``sample_size`` random points each iteration and touches only the
        sample and the active set, so the cost per iteration does not grow with
        the number of points.  'auto' uses 'full' up to 20,000 points.
    sample_size : int, default=194
        Candidates per iteration of the random search (194 gives probability
        0.98 that the chosen point is in the best 2%; 59 gives 0.95 of the best 5%).
    tol : float, default=1e-2
        Stop when the duality gap, relative to the margin, is below ``tol``:
        ``1 - min_i (Q a)_i / (a'Qa) <= tol`` -- no point violates the margin by
        more than the fraction ``tol``.  With random search and 'cvm' the gap
        is that of a random sample, confirmed on a fresh sample before stopping
        (Frandi et al. 2015, sec. 4.2; Tsang et al. 2005, sec. 4).  'coreset'
        stops by a statistical rule: with 95% confidence, fewer than 0.1% of the
        distinct training points outside its core set violate the margin by more than
        ``tol`` (a Clopper-Pearson bound on a fresh uniform sample of
        ``n_candidates`` points; exact when the sample is every point), and the
        core set is solved to a relative duality gap below ``tol`` (see the
        solver guide).  Not used by 'cvm', by the gsvm family, or by the
        Frank-Wolfe solvers with ``stopping='meb'``, which stop on ``eps``.
    max_iter : int or None, default=None
        Iteration cap (None: 10 million).
    max_time : float or None, default=None
        Wall-clock budget in seconds for the whole fit (one-vs-one pairs share
        it).  When reached, the model so far is kept and a
        ``ConvergenceWarning`` is issued.
    cache_size : float or 'auto', default='auto'
        Memory budget in MB for kernel values: the LRU kernel-column cache of
        the full-search solvers, or the core set's Gram matrix for 'coreset'
        and 'cvm' (float32 when ``tol >= 1e-3``: 200 MB hold a core set of 7240
        points; when it is full the fit stops with a ``ConvergenceWarning``), or
        the SVs' Gram matrix of 'sphere' and 'mnsvm'.  'bvm' keeps no Gram
        matrix (its SV set is limited to LibCVM's 50000 core vectors).  'auto':
        the core set's Gram may take up to half the memory available when the
        fit starts (its pages are touched only as the core set grows: a core
        set of ``n`` points holds ``4 n^2`` bytes; under ``ulimit -v``, half of
        what the limit leaves), every other cache 200 MB.
    class_weight : dict, 'balanced' or None, default=None
        Multiplies C per class.
    bias : {'theoretic', 'kkt', 'none'} or bool, default='theoretic'
        The bias rule (gsvm ``-b``, Strack 2013, sec. 5.5).  'theoretic':
        ``b = sum_i a_i y_i`` (eq. 5.20).  'kkt': the KKT average over the SVs,
        ``b = mean_i [y_i (||c||^2 - a_i / C_i) - sum_j a_j y_j k(x_i, x_j)]``
        (eq. 5.24), less sensitive to a rough solution.  'none': the no-bias
        machine (the kernel without its ``+1``), ``intercept_ == 0``.  True and
        False mean 'theoretic' and 'none'.
    eta : float, default=1.0
        Over-relaxation factor in [1, 2) applied to every line-search step
        (Strack 2013, sec. 5.3, eq. 5.6: ``min(eta beta, alpha_u)``); each step still
        lowers the objective, by ``eta (2 - eta)`` times the exact step's decrease.
        'sphere' and 'mnsvm' keep their SV Gram in float64 when ``eta > 1``.
    stopping : {'mn', 'adjmn', 'meb'} or None, default=None
        Stopping rule of 'bvm', 'sphere' and 'mnsvm' (gsvm ``-p``, Strack 2013
        sec. 2.10): a sampled point violates when ``(||c||^2 - g_i) / ||c||^2 >
        eps`` ('mn'), ``(||c||^2 - g_i) / (||c|| ||x~_i||) > eps`` ('adjmn') or
        ``||c - x~_i|| > (1 + eps) R^`` ('meb').  None: 'meb' for 'bvm' and
        'sphere', 'adjmn' for 'mnsvm' (gsvm's default).  'cvm' always uses
        'meb'.  The Frank-Wolfe solvers ('fw', 'mfw', 'swap', 'partan') stop on
        ``tol`` unless ``stopping='meb'``: then they stop by the test of Frandi
        et al. 2013 (Alg. 2 line 8, Alg. 3 line 11), as 'cvm' does (Tsang et
        al. 2005, sec. 4): no searched point outside the ball of the *current*
        radius ``r`` enlarged by ``1 + eps``, ``||c - x~_i||^2 <= (1 + eps)^2
        r^2`` with ``r^2 = k~(x, x) - ||c||^2`` -- eps relative to ``r^2``, not
        to the margin ``||c||^2`` (``r^2`` is often 100-1000 times larger).
        With ``search='full'`` every point is tested; with ``search='random'``
        and ``sample_size=59`` (the paper's) only the sampled and active points,
        so with probability 0.95 at most 5% of the points lie outside.  Needs
        the RBF kernel and one C; ``relative_gap`` is then ``max ||c -
        x~_i||^2 / r^2 - 1`` of the searched points.  The other solvers
        ignore ``stopping``.
    eps : float or None, default=None
        Final eps of that rule ('bvm', 'sphere', 'mnsvm', 'cvm', and the
        Frank-Wolfe solvers with ``stopping='meb'``); None is
        gsvm's default: 1e-3 for 'mn' and 'adjmn', LibCVM's heuristic (Strack 2013
        eq. 7.3, about 6e-7 for C=256) for 'meb'.  Frandi et al. 2013 ran
        ``eps=1e-6``.
    multiscale : bool, default=True
        Solve for eps = 1/2, 1/4, ... down to exactly ``eps``, warm-starting
        each stage from the last (Strack 2013, Alg. 5).
    draws : int or None, default=None
        Violator search of 'bvm', 'sphere' and 'mnsvm': at most this many random
        points are tried per iteration; 'sphere' and 'mnsvm' take the first that
        violates (gsvm ``-d``, default 600), 'bvm' the worst of each 59 (LibCVM's
        "59 x 10", default 590).  No violator among them ends the eps stage.
    sampling : {'uniform', 'stratified'}, default='uniform'
        How random candidates are drawn by the sampling solvers: uniformly, or
        gsvm's "fair" draw (a class first, then a point of it; gsvm ``-s``).
    selection : {'mdm', 'imdm', 'gmdm'} or None, default=None
        Second-vertex rule (gsvm ``-z``): how a pairwise step ('swap', the
        core-set inner solve, 'sphere', 'mnsvm') picks the point it takes weight from:
        'mdm' the active point with the largest gradient; 'imdm' the one whose
        (clipped) step decreases the objective most (Franc; Strack 2013,
        eq. 5.33); 'gmdm' the generalized rule with exponent ``gmdm_k``.
        None: 'mdm' for 'swap', the SWAP step of Frandi, Nanculef and Suykens
        (2015, sec. 2), whose pairwise direction ``u - v`` takes weight from
        the active vertex of largest gradient (the away vertex of MFW), and
        'imdm' for every other solver.  'mfw' always uses the MDM vertex (its
        away step).
    gmdm_k : float, default=0.5
        Exponent of the 'gmdm' rule in [0, 1] (0 is MDM, 1 is IMDM).
    n_candidates : int or None, default=None
        Core-set solvers: points scored per round (None: the solver's default;
        for 'coreset' 10,000, or ``n_samples / 25`` when that is more, so that a
        sweep of the points takes at most 25 rounds), and the size of the
        statistical stop's test sample (None: 10,000).
    batch_size : int or None, default=None
        Core-set solvers: most violators added to the core set per round.
    n_init : int, default=20
        Size of the class-balanced random subset the solver starts from.
    decision_function_shape : {'ovr', 'ovo'}, default='ovr'
        Shape of :meth:`decision_function` for more than two classes, as in
        scikit-learn's SVC: 'ovo' gives the pairwise values, 'ovr' turns them
        into per-class scores (votes plus a bounded confidence term).
    break_ties : bool, default=False
        With 'ovr' and more than two classes, predict the argmax of the 'ovr'
        scores, which breaks voting ties by confidence (slower).
    multiclass : {'ovo', 'ovr', 'joint'}, default='ovo'
        How more than two classes are handled.  'ovo':
        one problem per pair of classes on the two classes' rows, max-wins
        voting (LIBSVM's scheme; many small problems).  'ovr': one problem per
        class against all others on every row, prediction by the largest
        decision value (fewer, larger problems).  Binary data gives the same
        single problem either way.
        'joint': the all-at-once machine of Strack 2013, sec. 5.4 -- ONE simplex
        problem on all points with the label inner products 1 (same class) and
        ``-1/(K-1)`` (different classes) in place of ``y_i y_j``, and the class
        of the largest score ``sum_i a_i L[c_i, t] k(x_i, x) + y_t . b``
        predicted.  Faster and with fewer support vectors than 'ovo', usually
        less accurate (docs: multiclass).  Solved by ``solver='coreset'``,
        'cvm', or the thesis's own 'mnsvm' (its method, with gsvm's defaults)
        and 'sphere'; ``bias`` selects its bias rule (theoretic, the per-class
        KKT average of eq. 5.28, or none); ``decision_function_shape`` must be
        'ovr'.  With two classes it is the binary machine.
    n_jobs : int or None, default=None
        Sub-problems (pairs or classes) trained at the same time, in threads
        (-1: all cores; read by joblib's ``effective_n_jobs``).  None: sub-problems small enough for the
        compiled small-problem path (up to 5,000 points each: USPS's, letter's and pendigits' pairs) are
        trained on as many threads as a binary fit's kernel products use; so are larger ones when there are
        at least two per thread (and no ``callback``), else they run one at a time, each on all of those
        threads.  Sub-problems trained at the same time share the core sets' memory budget
        (``cache_size='auto'``).  Each sub-problem's random seed is
        drawn before any is dispatched, so the model is identical for every
        ``n_jobs``.  With ``n_jobs > 1`` every worker runs its kernel
        products, BLAS and Numba code on one thread, so the workers do not
        oversubscribe the cores.  Otherwise a large sub-problem's kernel
        products and Numba loops use every core, or the limit the process was
        started with (``OMP_NUM_THREADS``, ``NUMBA_NUM_THREADS``), as joblib's
        and Dask's worker processes are (docs: installation, Threads).
    probability : bool, default=False
        Fit Platt sigmoids ``P(y=+1|f) = 1/(1+exp(A f + B))`` to decision values
        of held-out points from an internal 5-fold stratified cross-validation
        on the training set (as LIBSVM's ``-b 1``; deterministic for a fixed
        ``random_state``; the fit costs about 5 more trainings on 4/5 of the
        data).  Enables :meth:`predict_proba` and :meth:`predict_log_proba`.
        'ovo' multiclass couples the pairwise probabilities (Wu, Lin & Weng
        2004, method 2); 'ovr' renormalizes the per-class ones.
        ``predict`` still uses the decision function, so ``argmax`` of
        :meth:`predict_proba` can differ from :meth:`predict` on points near
        a boundary (as in LIBSVM and scikit-learn's SVC); for two classes it
        equals ``f(x) > -B/A`` (the sigmoid's 0.5 point) instead of ``f(x) > 0``.
    warm_start : bool, default=False
        Refit from the previous solution: each sub-problem's solver starts
        from its old support vectors and weights instead of a random subset
        (the core-set solvers start from the old core set).  Used when C, the
        weights or the data changed, provided the rows of the old support
        vectors are still there: the previous ``support_`` indices must be
        rows of the new ``X`` holding the same vectors with the same classes
        (append new rows at the end), and the classes and ``multiclass``
        must be unchanged.  Otherwise the fit silently starts cold.
        ``warm_started_`` tells which happened.  The kernel (gamma) may
        change: the old weights are a feasible point of the new problem
        (PatternSearchCV starts fits at a new gamma from the nearest one).
        At a smaller C or RBF gamma (the support grows), a sub-problem on the
        small-problem path may instead start from every point: the old
        weights mixed with balanced uniform ones by exact line search, when
        the estimated step toward them is at least 0.5 (docs: warm starts).
        Multiclass fits on the compiled small-problem path (see ``solver``)
        with at least 64 features also keep their working sets' inner
        products ``<x_i, x_j>`` (at most ``cache_size`` MB, in memory only:
        not pickled or saved), which the next warm fit on the same ``X``
        reads instead of computing, for any C and gamma; a fit that reads
        them completes each pair's to all of its points once, when they
        all fit ``cache_size``, so the fits after it compute none.
    callback : callable or None, default=None
        ``callback(info) -> bool`` called during training with a dict:
        ``problem`` (index of the sub-problem), ``label`` (its pair ``(a, b)``
        or ``(k,)`` as class indices), ``iteration``, ``gap``, ``rel_gap``,
        ``n_active``, ``elapsed`` (seconds in this sub-problem).  Returning
        True stops training: the current sub-problem keeps its solution so
        far and every later one stops at its first call (status 'callback'),
        so a model is always fitted.  The core-set solvers ('coreset', 'cvm')
        call it once per outer round (no extra cost); with a callback,
        multiclass 'coreset' sub-problems use this Python loop rather than the
        compiled small-problem path (see ``solver``).  The Frank-Wolfe solvers
        run in compiled loops, so with a callback they run in chunks of
        ``callback_every`` iterations, each warm-started from the last (a
        chunked run takes different random draws than an unchunked one; the
        optimum is the same).  The gsvm family ('bvm', 'sphere', 'mnsvm') does
        not support callbacks.  With ``n_jobs > 1`` it is called from worker
        threads.
    callback_every : int, default=1000
        Iterations per chunk between callback calls of the Frank-Wolfe solvers.
    verbose : bool or float, default=False
        Print iteration, gap, #SV and elapsed time; a number sets the interval
        in seconds (True means one second).
    random_state : int, RandomState or None, default=None
        Seeds initialization and sampling; a fixed value reproduces the model
        exactly.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    support_ : ndarray of shape (n_SV,)
        Indices of the support vectors in the training data.  Rows repeated with
        the same label are merged before solving (one point whose C is their sum:
        the same optimum), so a repeated support vector is listed once, at its
        first row.
    support_vectors_ : ndarray or CSR matrix of shape (n_SV, n_features)
    n_support_ : ndarray of shape (n_classes,)
        Distinct support vectors per class.
    dual_coef_ : ndarray of shape (n_classes - 1, n_SV)
        ``a_i y_i / rho`` in LIBSVM's one-vs-one layout.  With
        ``multiclass='ovr'`` and more than two classes: shape (n_classes, n_SV),
        row k holding problem k's coefficients.  Dividing by the
        margin ``rho = a'Qa`` puts the decision function on SVC's scale
        (margin support vectors have ``|f(x)| = 1`` when their slack is 0).
    intercept_ : ndarray of shape (n_problems,)
        ``sum_i a_i y_i / rho`` (0 without bias), one per sub-problem:
        ``n_classes * (n_classes - 1) / 2`` pairs ('ovo') or ``n_classes``
        ('ovr'; 1 for binary data).
    n_iter_ : ndarray of shape (n_problems,)
    fit_status_ : int
        0 when every sub-problem converged, 1 otherwise.
    probA_, probB_ : ndarray of shape (n_problems,)
        Platt's sigmoid parameters per sub-problem (``probability=True``).
    warm_started_ : bool
        Whether the last fit started from the previous solution.
    solver_info_ : list of dict
        Per binary problem: iterations, final gap and relative gap, status,
        time, active-set size, cache hits and misses.  Fits by the core-set
        loop ('coreset' and 'cvm'; small problems run a dense loop instead)
        add where the time went: ``rounds``,
        ``seconds_inner_solve``, ``seconds_scoring`` (candidates),
        ``seconds_growth`` (new Gram rows, compaction), the Newton steps
        on the active face tried and kept (``newton_steps``,
        ``newton_kept``), and ``rows_computed``: whether the core set
        outgrew its stored Gram and computed its kernel rows per step
        instead.  ``relative_gap`` is
        ``1 - min_i (Q a)_i / a'Qa`` for every solver (with random search,
        that of the points it last scored).  The gsvm family ('bvm',
        'sphere', 'mnsvm') stops on its own rule instead, over random draws;
        for it ``relative_gap`` is measured after the run on every point (or,
        when #points x #SV exceeds 2^24 kernel values, on the SVs and a random
        sample, ``gap_points`` of them), and the rule's own quantity
        ``max_i V(x~_i)`` on the same points is ``stop_value``, to compare
        with ``eps`` (Strack 2013, sec. 2.10: ``(||c||^2 - g_i) / ||c||^2``
        for 'mn', ``(||c||^2 - g_i) / (||c|| ||x~_i||)`` for 'adjmn',
        ``||c - x~_i|| / R - 1`` for 'meb').
    gamma_ : float
        The resolved kernel width.
    """

    cache_size_auto = True  # the core set's Gram may take half the available memory
    least_n_init = 2  # a class-balanced start needs a point of each class

    def __init__(
        self,
        C: float = 1.0,
        kernel: str = "rbf",
        gamma: float | str = "scale",
        degree: int = 3,
        coef0: float = 0.0,
        solver: str = "coreset",
        search: str = "auto",
        sample_size: int = 194,
        tol: float = 1e-2,
        max_iter: int | None = None,
        max_time: float | None = None,
        cache_size: float | str = "auto",
        class_weight=None,
        bias: str | bool = "theoretic",
        eta: float = 1.0,
        stopping: str | None = None,
        eps: float | None = None,
        multiscale: bool = True,
        draws: int | None = None,
        sampling: str = "uniform",
        selection: str | None = None,
        gmdm_k: float = 0.5,
        n_candidates: int | None = None,
        batch_size: int | None = None,
        n_init: int = 20,
        decision_function_shape: str = "ovr",
        break_ties: bool = False,
        multiclass: str = "ovo",
        n_jobs: int | None = None,
        probability: bool = False,
        warm_start: bool = False,
        callback: Callable[[dict], bool] | None = None,
        callback_every: int = 1000,
        verbose: bool | float = False,
        random_state=None,
    ):
        self.C = C
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.solver = solver
        self.search = search
        self.sample_size = sample_size
        self.tol = tol
        self.max_iter = max_iter
        self.max_time = max_time
        self.cache_size = cache_size
        self.class_weight = class_weight
        self.bias = bias
        self.eta = eta
        self.stopping = stopping
        self.eps = eps
        self.multiscale = multiscale
        self.draws = draws
        self.sampling = sampling
        self.selection = selection
        self.gmdm_k = gmdm_k
        self.n_candidates = n_candidates
        self.batch_size = batch_size
        self.n_init = n_init
        self.decision_function_shape = decision_function_shape
        self.break_ties = break_ties
        self.multiclass = multiclass
        self.n_jobs = n_jobs
        self.probability = probability
        self.warm_start = warm_start
        self.callback = callback
        self.callback_every = callback_every
        self.verbose = verbose
        self.random_state = random_state

    def _validate_fit_input(self, X, y, sample_weight):
        X, y = self._validated_training_data(X, y)
        if sample_weight is None:  # every row counts once: no float64 weight per row (out-of-core fits)
            return X, y, None, np.ones(X.shape[0], dtype=bool)
        sample_weight = check_sample_weight(sample_weight, X)
        return X, y, sample_weight, sample_weight > 0  # some row kept: check_sample_weight rejects all-zero weights

    # --------------------------------------------------------------------- fit
    @unfitted_on_failure
    @within_process_thread_limit
    def fit(self, X, y, sample_weight=None):
        """Fit the SVM.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training vectors; CSR input is used without densifying and float32
            input is kept in float32.  A memory-mapped array (``np.load(path,
            mmap_mode='r')``) is read in row blocks and never copied; a Zarr array
            is first decompressed into a temporary ``.npy`` map (docs:
            out-of-core data and Dask).
        y : array-like of shape (n_samples,)
            Class labels (any hashable type numpy can sort).
        sample_weight : array-like of shape (n_samples,), default=None
            Per-sample multipliers of C; zero means "ignore this sample".

        Returns
        -------
        self
        """
        self.check_params()
        X, y, sample_weight, keep = self._validate_fit_input(X, y, sample_weight)
        classes, y_index = encode_labels(y)
        self._check_two_classes(classes, y_index[keep])
        # Read before the attributes are replaced: the state given by set_warm_start_state, else the last fit's.
        state = self.warm_start_state()
        self.__dict__.pop("_warm_start_in", None)  # given for this fit only
        previous = self._previous_solution(state, X, y_index, classes)
        self.classes_ = classes
        rng = check_random_state(self.random_state)
        self._set_kernel(resolve_gamma(self.gamma, X[keep] if not np.all(keep) else X, rng))
        check_kernel_range(X, self._kernel_spec, type(self).__name__, keep)  # before solving: no silent garbage
        C_per_sample = self._per_sample_C(sample_weight, classes, y)
        self._joint_model = None
        if self.multiclass == "joint":
            return self._fit_joint(X, y_index, keep, C_per_sample, rng)

        # Every sub-problem's seed is drawn here, before dispatch: the model does not depend on n_jobs.
        seeds = rng.randint(0, 2**31 - 1, size=n_problems(self.multiclass, len(classes)))
        decompose = one_vs_one_problems if self.multiclass == "ovo" else one_vs_rest_problems
        problems = decompose(y_index, keep, C_per_sample, len(classes), seeds)
        self.warm_started_ = previous is not None
        merged = self._merge_duplicates(X, y_index, keep, problems)
        self._start_reuse(X, merged, state, previous)
        try:
            models = self._solve_problems(X, merged)
        finally:
            dots_out, rows_out = self._end_reuse()
        self._keep_for_next_fit(X, dots_out, rows_out)
        self._warn_unconverged(models)
        self._set_fitted_attributes(X, y_index, models)
        if self.probability:
            self._fit_probability(X, y, y_index, sample_weight, keep, problems, rng)
        elif hasattr(self, "probA_"):
            del self.probA_, self.probB_
        return self

    def _merge_duplicates(self, X, y_index, keep, problems: list[SubProblem]) -> list[SubProblem]:
        """The sub-problems with each group of repeated rows (same features, same label) merged into its first
        row, whose C is the group's sum: the same solution, on fewer points (:mod:`coresvm.duplicates`).

        Not merged: a minimum enclosing ball's solve (it needs one C for all), a warm start (its state refers to
        every row), and a memory-mapped ``X`` (a sub-problem on fewer rows than ``X`` copies them into memory).
        """
        if self.warm_start or self._needs_one_C or is_memory_mapped(X):
            return problems
        rows = rows_where(keep)
        representatives = duplicate_representatives(X, y_index, rows)
        if representatives is None:
            return problems
        return [merge_duplicates(problem, representatives, rows) for problem in problems]

    def _solve_problems(self, X, problems: list[SubProblem]) -> list[BinaryModel]:
        """Train the sub-problems, in parallel threads when ``n_jobs > 1``.

        Each of the ``n_jobs`` workers (this thread and ``n_jobs - 1`` more) takes the next unsolved
        sub-problem from a shared queue until none is left (with several workers the largest first, so that
        no large pair runs alone at the end) and sets up its thread (Numba and kernel threads; BLAS is on one
        thread for the whole fit) once, not per pair.  Every sub-problem's result depends only on the
        sub-problem (its seed is drawn in ``fit``), so the model is the same for every ``n_jobs``.  Small
        problems that all take the compiled path go to it in chunks, one compiled call per chunk
        (:meth:`_solve_chunk`).
        """
        if any(len(problem.rows) == 0 for problem in problems):
            # A pair of two classes whose samples all have zero weight: nothing to solve, a zero decision.
            solved = iter(self._solve_problems(X, [problem for problem in problems if len(problem.rows)]))
            return [next(solved) if len(problem.rows) else empty_model(problem) for problem in problems]
        n_jobs = max(1, min(effective_n_jobs(self.n_jobs), len(problems)))
        if self._solves_in_chunks(X, problems, n_jobs):
            if self.n_jobs is None and n_jobs == 1:
                # Small sub-problems, one thread each: on the cores a binary fit's kernel products use (every core,
                # or the limit the process was started with), not on one.
                n_jobs = max(1, min(default_kernel_threads(), len(problems)))
            costs = [len(problem.rows) ** 2 for problem in problems]
            # Several chunks per worker balance the workers; chunks of bounded size keep KeyboardInterrupt (which
            # arrives between compiled calls) and max_time's sharing responsive on large pairs.
            n_chunks = max(1 if n_jobs == 1 else CHUNKS_PER_WORKER * n_jobs, -(-sum(costs) // CHUNK_COST))
            chunks = contiguous_chunks(costs, n_chunks)
            budget = TimeBudget(self.max_time, len(chunks), n_jobs)
            queue = ProblemQueue([problems[start:stop] for start, stop in chunks])
            run_in_threads(n_jobs, lambda: work_through_queue(
                queue, lambda chunk: self._solve_chunk(X, chunk, budget.share())))
            return [model for models in queue.results for model in models]
        threads = default_kernel_threads()
        if (self.n_jobs is None and n_jobs == 1 and self.callback is None
                and len(problems) >= CONCURRENT_MIN_PROBLEMS_PER_THREAD * threads):
            n_jobs = threads
        budget = TimeBudget(self.max_time, len(problems), n_jobs)
        stop = threading.Event()  # set when the callback asks to stop
        if n_jobs == 1 and max(len(problem.rows) for problem in problems) > ONE_THREAD_MAX_POINTS:
            return [self._fit_binary(X, problem, budget, stop) for problem in problems]
        # one worker: in order (callbacks see pair 0 first)
        queue = ProblemQueue(problems, [len(problem.rows) for problem in problems] if n_jobs > 1 else None)
        run_in_threads(n_jobs, lambda: work_through_queue(
            queue, lambda problem: self._fit_binary(X, problem, budget, stop)))
        return queue.results

    def _solves_in_chunks(self, X, problems: list[SubProblem], n_jobs: int) -> bool:
        """Whether every sub-problem takes the compiled small-problem path with nothing per problem to keep or
        read in Python: no kept inner products in or out (gathering every problem's into one call cost more
        memory and time than it saved), no KKT bias (it needs each problem's rows); and, with one worker,
        problems small enough to run on one thread (as pair by pair: ``ONE_THREAD_MAX_POINTS``)."""
        largest = max(len(problem.rows) for problem in problems)
        return (len(problems) > 1 and not self._dots_in and self._dots_out is None and self._search_rows is None
                and self.bias_rule != "kkt"
                and (n_jobs > 1 or largest <= ONE_THREAD_MAX_POINTS)
                and self._small_problem_fast_path(X, largest, self.solver_options(largest, 0, np.inf)))

    def _solve_chunk(self, X, problems: list[SubProblem], max_time: float) -> list[BinaryModel]:
        """Solve ``problems`` in one compiled call (:func:`~coresvm.solvers.dense.run_many_dense_rows`): the same
        solutions as :meth:`_fit_binary` one by one, without the Python around each."""
        sizes = [len(problem.rows) for problem in problems]
        offsets = np.cumsum([0] + sizes)
        rows = np.concatenate([problem.rows for problem in problems])
        signs = np.concatenate([problem.signs for problem in problems])
        C = np.concatenate([problem.C for problem in problems])
        starts = [problem.init if problem.init is not None else NO_WARM_START for problem in problems]
        init_offsets = np.cumsum([0] + [len(init_idx) for init_idx, _ in starts])
        options = self.solver_options(max(sizes), 0, max_time)
        dense_options = replace(options, max_iter=dense_step_budget(max(sizes), options.max_iter))
        start = fit_clock()
        alpha, stats = run_many_dense_rows(
            X, rows, offsets, signs, C, self._kernel_spec, self.bias_rule != "none", 0.0, dense_options,
            np.array([problem.seed for problem in problems]), np.concatenate([init_idx for init_idx, _ in starts]),
            np.concatenate([init_alpha for _, init_alpha in starts]), init_offsets, max_time, self._blend_start)
        models = models_from_chunk(problems, rows, offsets, signs, alpha, stats, self.bias_rule != "none")
        unfinished = [k for k in range(len(problems))
                      if stopped_at_step_budget(STATUS_NAMES[int(stats[k, STAT_STATUS])], int(stats[k, STAT_STEPS]),
                                                options.max_iter)]
        time_left = max_time - (fit_clock() - start)
        budget = TimeBudget(time_left, len(unfinished), 1)
        for k in unfinished:  # each goes on with the core-set loop, from its dense solution, in the time left
            if time_left > 0.0:
                alpha_k = alpha[offsets[k]:offsets[k + 1]]
                support = np.flatnonzero(alpha_k > 0)
                dense_start = (support, alpha_k[support], int(stats[k, STAT_STEPS]), float(stats[k, STAT_TIME]))
                models[k] = self._fit_binary(X, problems[k], budget, threading.Event(), dense_start)
            else:
                models[k].info["status"] = "max_time"
        return models

    def _fit_binary(self, X, problem: SubProblem, budget, stop, dense_start: tuple | None = None) -> BinaryModel:
        """Solve one sub-problem.  ``dense_start = (support, alpha, steps, seconds)``: a compiled small-problem
        solve of it that stopped at its step budget (:meth:`_solve_chunk`), from which the core-set loop goes on
        (:func:`~coresvm.solvers.dense.continue_with_core_set`) in ``budget``'s share of the time left after the
        chunk (those seconds are already spent)."""
        rows = problem.rows
        self._check_one_C(problem.C)
        bias_rule = self.bias_rule
        # CVM, and the Frank-Wolfe solvers with stopping='meb', solve the minimum enclosing ball (lam = 1) and
        # stop by its (1 + eps) radius test (driver.radius_test_options).
        lam = 1.0 if self._radius_test else 0.0
        options = self.solver_options(len(rows), problem.seed, budget.share(), budget.n_workers)
        init_idx, init_alpha = problem.init if problem.init is not None else (None, None)

        def simplex_problem() -> SimplexProblem:
            # The core-set solvers read only sampled rows and the core set: no float64 array of length m.
            X_rows = X if len(rows) == X.shape[0] else X[rows]
            return SimplexProblem(X_rows, problem.signs, problem.C, self._kernel_spec, bias=bias_rule != "none",
                                  lam=lam, compact=options.core_set)

        simplex = None
        if dense_start is not None:
            simplex = simplex_problem()
            result = continue_with_core_set(simplex, options, *dense_start, time_counted=True)
        elif self._small_problem_fast_path(X, len(rows), options):
            # The pair's rows are gathered inside the compiled (GIL-free) call: no X[rows] copy in Python,
            # so n_jobs worker threads hold the GIL only briefly per pair.
            kept_rows, dots_in, keep_dots = self._reused_rows(X, problem)
            dense_options = replace(options, max_iter=dense_step_budget(len(rows), options.max_iter))
            result = run_dense_rows(X, rows, problem.signs, problem.C, self._kernel_spec, bias_rule != "none", lam,
                                    dense_options, init_idx, init_alpha, dots_in, keep_dots, kept_rows,
                                    self._rows_out is not None, self._blend_start)
            self._keep_rows(problem, result, dots_in, keep_dots)
            if stopped_at_step_budget(result.status, result.n_iter, options.max_iter):
                simplex = simplex_problem()
                result = continue_with_core_set(simplex, options, result.support, result.alpha, result.n_iter,
                                                result.time)
            if options.verbose > 0:  # one compiled call: a single line when it ends
                print_progress(result.n_iter, result.gap, result.rel_gap, len(result.support), result.time)
        elif self.callback is None:
            simplex = simplex_problem()
            result = run_engine(simplex, options, init_idx, init_alpha)
        else:
            simplex = simplex_problem()
            result = self._run_with_callback(simplex, options, problem, init_idx, init_alpha, stop)
        intercept = None
        if bias_rule == "kkt":
            simplex = simplex if simplex is not None else simplex_problem()
            intercept = kkt_bias(simplex, result.support, result.alpha, result.squared_norm)
        model = BinaryModel.from_solution(rows[result.support], result, problem.signs[result.support],
                                          bias_rule != "none", intercept)
        model.info["problem"] = problem.label
        model.info["warm_start"] = problem.init is not None
        return model

    def _small_problem_fast_path(self, X, n_points: int, options: SolverOptions) -> bool:
        """Whether a (sub-)problem of ``solver='coreset'`` runs on :mod:`coresvm.solvers.dense`.

        Rule: dense in-memory ``X``, no callback, and the problem's extended kernel fits ``cache_size``
        (``n_points^2 * 8`` bytes) -- binary data, one-vs-one pairs or one-vs-rest problems alike.  The
        compiled loop stops on the exact duality gap of every point, where the Python loop tests a sample.
        """
        return (SMALL_PROBLEM_FAST_PATH and self.solver == "coreset" and self.callback is None
                and isinstance(X, np.ndarray) and not is_memory_mapped(X) and fits_dense(n_points, options.cache_bytes))

    def _run_with_callback(self, simplex, options, problem: SubProblem, init_idx, init_alpha, stop):
        """Run the solver so that ``self.callback`` sees its progress and may stop it (every later sub-problem
        stops at its first call once one asked to stop: ``stop``)."""

        def report(info: dict) -> bool:
            if stop.is_set():
                return True
            if self.callback({"problem": problem.index, "label": problem.label, **info}):
                stop.set()
                return True
            return False

        return run_with_callback(simplex, options, init_idx, init_alpha, report, self.callback_every)

    def set_fitted_solution(self, X, y_index: np.ndarray, models: list[BinaryModel], classes: np.ndarray,
                            gamma: float) -> CoreSVC:
        """Make this estimator the fitted model of binary solutions found outside :meth:`fit`.

        For solvers that run elsewhere (``distributed.fit_cascade`` solves the union of the partitions'
        core sets itself): sets every fitted attribute :meth:`fit` sets, probabilities aside.

        Parameters
        ----------
        X : array-like or CSR matrix of shape (n_samples, n_features)
            The rows the models' ``rows`` index.
        y_index : ndarray of shape (n_samples,)
            Class index of each row (positions in ``classes``).
        models : list of BinaryModel
            One per sub-problem, in the order of the decomposition (one model for two classes).
        classes : ndarray of shape (n_classes,)
            The class labels.
        gamma : float
            The resolved kernel width the models were solved at.

        Returns
        -------
        self : CoreSVC
        """
        self.classes_ = classes
        self._set_kernel(gamma)
        self.n_features_in_ = X.shape[1]
        self._set_fitted_attributes(X, y_index, models)
        return self

    def _set_model(self, X, support, n_support, dual_coef, intercept, infos: list[dict]) -> None:
        """The fitted attributes of every decomposition: the SVs (read from ``X``), their coefficients, and the
        sub-problems' solver records."""
        self.support_ = support
        self.support_vectors_ = read_rows(X, support)
        self.n_support_ = n_support
        self.dual_coef_ = dual_coef
        self.intercept_ = intercept
        self._sv_norms = squared_norms(self.support_vectors_)
        self.n_iter_ = np.array([info["iterations"] for info in infos], dtype=np.int64)
        self.solver_info_ = infos
        self.fit_status_ = int(any(info["status"] != "converged" for info in infos))

    def _set_fitted_attributes(self, X, y_index, models) -> None:
        self._decomposition = "ovr" if self.multiclass == "ovr" and len(self.classes_) > 2 else "ovo"
        layout_class = OneVsRestLayout if self._decomposition == "ovr" else OneVsOneLayout
        layout = layout_class.build(models, y_index, len(self.classes_))
        self._set_model(X, layout.support, layout.n_support, layout.dual_coef, layout.intercept,
                        [model.info for model in models])
        self._pair_coef = layout.pair_coef
        # What a warm start needs (warm_start_state), as flat arrays (model files store them like any attribute).
        self._fitted_multiclass = self.multiclass
        self._warm_rows = np.concatenate([model.rows for model in models])
        self._warm_alpha = np.concatenate([model.alpha for model in models])
        self._warm_offsets = np.cumsum([0] + [len(model.rows) for model in models]).astype(np.int64)
        self._warm_support_classes = y_index[self.support_].astype(np.int64)
        self._warm_C = float(self.C)

    def _fit_joint(self, X, y_index, keep, C_per_sample, rng):
        """``multiclass='joint'``: one simplex problem for all classes (see :mod:`coresvm.joint`)."""
        rows = np.flatnonzero(keep)
        X_rows = X if len(rows) == X.shape[0] else X[rows]
        C_rows = take_rows(C_per_sample, rows)
        self._check_one_C(C_rows)
        time_budget = self.max_time if self.max_time is not None else np.inf
        options = self.solver_options(len(rows), int(rng.randint(0, 2**31 - 1)), time_budget)
        model, result = fit_joint(X_rows, y_index[rows], len(self.classes_), C_rows, self._kernel_spec, options,
                                  self.bias_rule)
        self._warn_if_stopped_early(result.status, result.rel_gap, result.eps, "CoreSVC (multiclass='joint')",
                                    refused_at=result.memory_refused_at)
        model.support = rows[model.support]
        self._joint_model = model
        # A previous one-vs-one/one-vs-rest fit's state must not survive: no pairwise
        # coefficients, no warm start from it, no Platt sigmoids.
        for stale in ("_pair_coef", "_warm_rows", "_warm_C", "_dot_rows", "_kernel_rows", "probA_", "probB_"):
            if hasattr(self, stale):
                delattr(self, stale)
        self.warm_started_ = False
        self._fitted_multiclass = "joint"
        n_support = np.bincount(model.support_class, minlength=len(self.classes_)).astype(np.int32)
        self._set_model(X, model.support, n_support, model.coef.T.copy(), model.intercept, [model.info])
        return self

    def _joint_scores(self, X) -> np.ndarray:
        """``multiclass='joint'``: (n_samples, n_classes) class scores."""
        X = self._validated_prediction_data(X)

        def scores(rows):
            return self._joint_model.decision_function(rows, self.support_vectors_, self._kernel_spec, self._sv_norms)

        return self._in_row_blocks(scores, X, self.support_vectors_.shape[0])

    # ----------------------------------------------------------------- predict
    def _pair_decisions(self, X) -> np.ndarray:
        X = self._validated_prediction_data(X)  # a memmap is streamed in row blocks (data.py)
        decisions = self._in_row_blocks(self._kernel_decisions, X, self.support_vectors_.shape[0])
        decisions += self.intercept_
        return decisions

    def _kernel_decisions(self, X) -> np.ndarray:
        """``k(X, SVs) @ pair_coef``, without the intercepts (:func:`~coresvm.multiclass.kernel_decisions`)."""
        n_support = None if self._is_one_vs_rest else getattr(self, "n_support_", None)
        return kernel_decisions(X, self.support_vectors_, self._kernel_spec, self._pair_coef, self._sv_norms,
                                len(self.classes_), n_support)

    @property
    def _is_one_vs_rest(self) -> bool:
        return getattr(self, "_decomposition", "ovo") == "ovr"

    def decision_function(self, X) -> np.ndarray:
        """Signed distance-like scores: ``sum_i dual_coef_i k(x_i, x) + intercept_``.

        Binary: shape (n_samples,), positive means ``classes_[1]``.  Multiclass
        one-vs-one with ``decision_function_shape='ovo'``: the pairwise values
        (n_samples, n_pairs), pair (i, j) positive for class i (LIBSVM's
        order); with 'ovr': (n_samples, n_classes) scores as in scikit-learn.
        Multiclass one-vs-rest (``multiclass='ovr'``): the per-class decision
        values (n_samples, n_classes) whatever ``decision_function_shape``.
        ``multiclass='joint'``: the class scores (n_samples, n_classes); for two
        classes half their difference, shape (n_samples,), the binary machine's
        decision.
        """
        if getattr(self, "_joint_model", None) is not None:
            scores = self._joint_scores(X)
            return 0.5 * (scores[:, 1] - scores[:, 0]) if len(self.classes_) == 2 else scores
        decisions = self._pair_decisions(X)
        if len(self.classes_) == 2:
            return decisions[:, 0]
        if self._is_one_vs_rest:
            return decisions
        if self.decision_function_shape == "ovr":
            return one_vs_rest_scores(decisions, len(self.classes_))
        return decisions

    def predict(self, X) -> np.ndarray:
        """Class labels: the sign for two classes; for more, max-wins voting ('ovo'), the largest score ('ovr',
        'joint')."""
        if getattr(self, "_joint_model", None) is not None:
            return self.classes_[np.argmax(self._joint_scores(X), axis=1)]
        decisions = self._pair_decisions(X)
        if len(self.classes_) == 2:
            return self.classes_[(decisions[:, 0] > 0).astype(int)]
        if self._is_one_vs_rest:
            return self.classes_[np.argmax(decisions, axis=1)]
        if self.break_ties and self.decision_function_shape == "ovo":
            raise ValueError("break_ties must be False when decision_function_shape is 'ovo'")
        if self.break_ties and self.decision_function_shape == "ovr":
            scores = one_vs_rest_scores(decisions, len(self.classes_))
            return self.classes_[np.argmax(scores, axis=1)]
        return self.classes_[OneVsOneLayout.vote(decisions, len(self.classes_))]

    def score(self, X, y, sample_weight=None) -> float:
        """Mean accuracy of ``self.predict(X)`` on ``y``, as scikit-learn's ``ClassifierMixin.score``.

        When ``y`` is a 1-D array of this model's classes, as long as ``X``, and there are no weights, the mean is
        taken directly: ``accuracy_score``'s target checks, which can only pass then, cost about 1 ms -- as much as
        a small fit's prediction, once per fit of a hyper-parameter search.  Any other ``y`` or weights go through
        ``accuracy_score``, with its checks and errors.
        """
        predicted = self.predict(X)
        labels = None if sp.issparse(y) else np.asarray(y)
        if (sample_weight is None and labels is not None and labels.ndim == 1 and labels.dtype != object
                and len(labels) == len(predicted) and np.all(np.isin(labels, self.classes_))):
            return float(np.mean(labels == predicted))
        return float(accuracy_score(y, predicted, sample_weight=sample_weight))

    # ------------------------------------------------------------- model files
    def save(self, path, format: str = "native") -> None:
        """Write the fitted model to ``path`` (see :func:`coresvm.save_model`; never pickle).

        ``format='native'`` writes the declared fields of the model schema (format
        version 2: JSON + ``.npy`` in a ZIP archive; see the model-files guide);
        ``'libsvm'`` writes LIBSVM's text model format.
        """
        from .model_io import save_model  # model_io imports this module

        save_model(self, path, format=format)

    @classmethod
    def load(cls, path) -> CoreSVC:
        """Read a model written by :meth:`save`, :func:`coresvm.save_model` or LIBSVM itself."""
        from .model_io import load_model

        model = load_model(path)
        if not isinstance(model, cls):
            raise TypeError(f"{path} holds a {type(model).__name__}, not a {cls.__name__}")
        return model


# Pickles of models made before the holders of kept rows moved to warm_start.py name them here.
_DotRows, _KernelRows, _SharedInnerProducts = KeptInnerProducts, KeptKernelRows, SharedInnerProducts
