"""CoreOneClassSVM: novelty detection as the minimum enclosing ball of the data.

The one-class L2-SVM of the Core Vector Machine paper (Tsang et al. 2005, sec. 3.2.1)::

    minimize  ||w||^2 - 2 rho + sum_i C_i xi_i^2    s.t.  w' phi(x_i) >= rho - xi_i

has the simplex dual (Tsang et al. 2005 eq. 7)::

    minimize  a' (K + diag(1 / C_i)) a    s.t.  a >= 0,  sum(a) = 1

which is the coresvm :class:`~coresvm.problem.SimplexProblem` with all labels
+1, no bias and ``lam = 0``.  When ``k(x, x)`` is constant (the RBF kernel) and
every ``C_i`` is equal it is *exactly* the minimum enclosing ball of the points
``phi~(x_i)`` of the kernel ``k + delta_ij / C`` (Tsang et al. 2005 eq. 5: the MEB and the
minimal-norm problem share their optimum), i.e. the L2 soft-margin SVDD; with
other kernels it is the hyperplane form (the "minimal-norm point", Schoelkopf's
one-class SVM with squared slacks), which is still a valid novelty detector
but no longer a ball.  KKT at the optimum: ``w = sum_i a_i phi(x_i)``,
``xi_i = a_i / C_i`` and ``rho = a' Q a``; the support vectors (``a_i > 0``) are
exactly the training points with a positive slack.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
from sklearn.base import OutlierMixin
from sklearn.utils import check_random_state

from ._validation import caller_stacklevel, check_choice, check_kernel_range, check_positive
from .estimator import CoreEstimatorBase, check_sample_weight, warn_unconverged
from .kernels import kernel_product, resolve_gamma, squared_norms, within_process_thread_limit
from .problem import SimplexProblem
from .solvers.core_gram import budget_capacity
from .solvers.driver import run_engine
from .solvers.options import (
    CoreSetLoopOptions,
    MemoryOptions,
    ReportOptions,
    SearchOptions,
    SolverOptions,
    StepOptions,
    StopOptions,
)

# solver name -> (core-set outer loop?, candidates scored per round, violators added per round)
ONE_CLASS_SOLVERS = {"coreset": (True, 10_000, 300), "cvm": (True, 59, 1), "swap": (False, 0, 0)}

# C='auto': bisection on log(C * sum(weights)) within CALIBRATION_RANGE, until the bracket is
# narrower than CALIBRATION_PRECISION or the SV fraction is within CALIBRATION_MATCH * nu of nu,
# on a subsample of max(2000, 100 / nu) rows (at most 20,000): about 100 or more of its points
# should be SVs, more than the few of the hard ball.
CALIBRATION_RANGE = (1.0, 1e8)
CALIBRATION_ROWS = (2000, 100.0, 20_000)
CALIBRATION_PRECISION = 1.25
CALIBRATION_MATCH = 0.1


def weighted_lower_quantile(scores: np.ndarray, weights: np.ndarray, fraction: float) -> float:
    """A threshold with the largest weighted share of ``scores`` below it that is ``<= fraction``.

    The samples are taken from the lowest score up while their cumulative
    weight stays within ``fraction`` of the total; the threshold is the midpoint
    between the last one taken and the next (distinct) score.  Samples with
    equal scores are taken together or not at all.  With unit weights and
    ``fraction * n`` an integer this puts exactly ``fraction * n`` scores below it.
    """
    order = np.argsort(scores, kind="stable")
    sorted_scores = scores[order]
    # cumulative weight up to and including the last sample of each run of equal scores
    cumulative = np.cumsum(weights[order]) / weights.sum()
    run_ends = np.append(np.flatnonzero(np.diff(sorted_scores) > 0), len(scores) - 1)
    allowed = run_ends[cumulative[run_ends] <= fraction * (1.0 + 1e-12)]
    if len(allowed) == 0:  # not even the lowest group fits: nothing below
        return float(sorted_scores[0])
    last = allowed[-1]
    if last == len(scores) - 1:  # fraction == 1: everything below
        return float(np.nextafter(sorted_scores[-1], np.inf))
    return float(0.5 * (sorted_scores[last] + sorted_scores[last + 1]))


class CoreOneClassSVM(OutlierMixin, CoreEstimatorBase):
    """One-class L2-SVM (SVDD / minimum enclosing ball) trained by core sets.

    The model (Tsang et al. 2005 sec. 3.2.1; see the module docstring) is the ball of
    smallest radius, in the feature space of ``k(x, x') + delta / C``, that
    encloses the training data; points far from its centre ``w`` are
    novelties.  The score of a point is its similarity to the centre
    ``w' phi(x) = sum_i a_i k(x_i, x)`` (``a`` on the unit simplex, so for RBF the
    score lies in [0, 1]); with RBF, ``||phi(x) - w||^2 = 1 + ||w||^2 - 2 w' phi(x)``,
    so ranking by score is ranking by distance to the centre.

    Parameters
    ----------
    nu : float in (0, 1], default=0.1
        Expected fraction of outliers in the training data, as in
        scikit-learn's OneClassSVM.  It does two things:

        * **the threshold**: ``offset_`` is set so that the (sample-weighted)
          fraction of training points with ``decision_function < 0`` is the
          largest share ``<= nu`` -- exactly ``nu`` up to one sample's weight
          and ties of the score; ``predict`` on the training data therefore
          marks ``floor(nu * n_samples)`` points as -1 (unit weights, no ties).
        * **C** (with ``C='auto'``): C is chosen so that a fraction of about
          ``nu`` of the training points are support vectors.  In this L2 model
          the support vectors are exactly the points with a positive slack
          ``xi_i = a_i / C_i``, i.e. those below the model's own margin
          ``rho_``; so with 'auto' ``rho_`` and ``offset_`` nearly agree, and nu
          means the same for the margin and the threshold.  (scikit-learn's
          OneClassSVM guarantees SV fraction >= nu >= training outlier
          fraction; here the threshold gives the outlier fraction exactly and
          the SV fraction is only about nu, above or below.)  C is found
          by bisection on a random subsample (see ``calibration_``) and
          carried over as ``C * sum(sample_weight)``; on the full data the SV
          fraction is close to, not exactly, ``nu`` (KDD99: 0.0083 for
          nu=0.01, 0.042 for nu=0.05).
          When even the hard ball (largest C) has more than ``nu`` of the
          subsample as SVs, that largest C is used.
    C : float or 'auto', default='auto'
        Penalty of the squared slacks (Tsang et al. 2005 sec. 3.2.1), per sample
        ``C_i = C * sample_weight_i``.  Small C spreads the weights ``a`` over
        many points (C -> 0 gives a uniform ``a``: the score becomes a Parzen
        kernel density estimate, every point a support vector); large C gives
        the hard minimum enclosing ball, whose centre is fixed by a few extreme
        points (few support vectors, fast, but shaped by the outliers of the
        training data).  A number fixes C and skips the calibration; the
        threshold is still set by ``nu``.
    kernel : {'rbf', 'poly', 'linear', 'sigmoid'}, default='rbf'
        A ball needs a constant ``k(x, x)``: with 'rbf' the model is the MEB /
        SVDD.  The other kernels are accepted and give the hyperplane form of
        the same problem (the minimal-norm point of the data's hull in feature
        space, which equals the MEB only for constant ``k(x, x)``).
    gamma : float or {'scale', 'auto', 'cvm'}, default='scale'
        Kernel width, resolved as in :class:`~coresvm.CoreSVC` (``gamma_``).
    degree : int, default=3
    coef0 : float, default=0.0
    solver : {'coreset', 'cvm', 'swap'}, default='coreset'
        'cvm' is the Core Vector Machine (Tsang et al. 2005): each round scores 59 random
        points and adds the furthest one from the centre to the core set, which
        is re-solved in memory.  'coreset' is the same loop with large batches
        (10,000 candidates, up to 300 added per round), usually much faster.
        'swap' runs pairwise (SMO-like) steps on the whole problem with the full
        gradient (one kernel column per step; for small data and as a reference).
    tol : float, default=1e-3
        Relative duality gap: stop when no point's ``w' phi(x_i) + a_i / C_i``
        lies below ``rho`` by more than the fraction ``tol`` (checked on random
        samples by the core-set solvers).
    max_iter : int or None, default=None
        Cap on the pairwise steps (None: 10 million).
    max_time : float or None, default=None
        Wall-clock budget of the solver in seconds; when it runs out the model
        so far is kept and a ``ConvergenceWarning`` issued.
    cache_size : float, default=200
        MB for kernel values: the core set's Gram matrix ('coreset', 'cvm'; it
        bounds the number of support vectors) or the column cache ('swap').
    n_init : int, default=20
        Random points the solver starts from.
    verbose : bool or float, default=False
    random_state : int, RandomState or None, default=None
        Seeds the solver's sampling and gamma='cvm'; a fixed value reproduces
        the model exactly.

    Attributes
    ----------
    support_ : ndarray of shape (n_SV,)
        Indices of the support vectors (the training points with a positive
        slack ``xi_i = a_i / C_i``).
    support_vectors_ : ndarray or CSR matrix of shape (n_SV, n_features)
    dual_coef_ : ndarray of shape (1, n_SV)
        The simplex weights ``a_i`` (they sum to 1; scikit-learn's OneClassSVM
        scales its own to sum to ``nu * n_samples``).
    offset_ : float
        The threshold: ``decision_function = score_samples - offset_``.
    intercept_ : ndarray of shape (1,)
        ``-offset_`` (scikit-learn's convention).
    rho_ : float
        The model's own margin ``rho = a'Qa`` (Tsang et al. 2005): a training point has
        a positive slack exactly when ``score_samples(x_i) < rho_`` (up to the
        solver's tolerance).  Not used for prediction.
    C_ : float
        The C used (resolved from ``nu`` when ``C='auto'``).
    calibration_ : dict or None
        With ``C='auto'``: ``C_times_W`` (the product ``C * sum(weights)``
        found), ``rows`` (subsample size) and ``sv_fraction`` (the weighted SV
        fraction it gave on the subsample).
    gamma_ : float
    n_iter_ : int
    fit_status_ : int
        0 when the solver converged, 1 otherwise.
    solver_info_ : dict
        Iterations, gap and relative gap, status, time, active-set size.
    """

    warns_on_feature_scale = False  # the one-class model has never warned on feature scales

    def __init__(
        self,
        nu: float = 0.1,
        C: float | str = "auto",
        kernel: str = "rbf",
        gamma: float | str = "scale",
        degree: int = 3,
        coef0: float = 0.0,
        solver: str = "coreset",
        tol: float = 1e-3,
        max_iter: int | None = None,
        max_time: float | None = None,
        cache_size: float = 200,
        n_init: int = 20,
        verbose: bool | float = False,
        random_state=None,
    ):
        self.nu = nu
        self.C = C
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.max_time = max_time
        self.cache_size = cache_size
        self.n_init = n_init
        self.verbose = verbose
        self.random_state = random_state

    # ------------------------------------------------------------------ checks
    def _check_params(self) -> None:
        if isinstance(self.nu, bool) or not isinstance(self.nu, (int, float, np.integer, np.floating)) or not (
            0.0 < self.nu <= 1.0
        ):
            raise ValueError(f"nu (expected outlier fraction) must be in (0, 1]; got {self.nu!r}")
        if not (isinstance(self.C, str) and self.C == "auto"):
            if isinstance(self.C, str):
                raise ValueError(f"C must be 'auto' or a positive number; got {self.C!r}")
            check_positive("C", self.C)
        check_choice("solver", self.solver, ONE_CLASS_SOLVERS)
        self._check_shared_params()  # kernel, tol, max_iter, max_time, cache_size, n_init

    def _solver_options(self, seed: int) -> SolverOptions:
        core_set, candidates, batch = ONE_CLASS_SOLVERS[self.solver]
        return SolverOptions(
            memory=MemoryOptions(cache_bytes=int(self.cache_size * 2**20)),
            step=StepOptions(step_rule="mdm" if core_set else "swap", second_vertex="imdm"),
            search=SearchOptions(sample_size=0, seed=seed, n_init=int(self.n_init)),
            stop=StopOptions(tol=float(self.tol), max_iter=self.max_iterations,
                             max_time=float(self.max_time) if self.max_time is not None else np.inf),
            core_set_loop=CoreSetLoopOptions(core_set=core_set, n_candidates=max(candidates, 1),
                                             max_add=max(batch, 1)),
            report=ReportOptions(verbose=self.verbose_seconds),
        )

    # --------------------------------------------------------------------- fit
    @within_process_thread_limit
    def fit(self, X, y=None, sample_weight=None):
        """Fit the one-class model on (mostly) normal data.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training vectors; CSR input is used without densifying, float32 is
            kept in float32.  A memory-mapped array (``np.load(path,
            mmap_mode='r')``) is read in row blocks and never copied; a Zarr array
            is first decompressed into a temporary ``.npy`` map.
        y : ignored
        sample_weight : array-like of shape (n_samples,), default=None
            Per-sample multipliers of C (weight k acts like k copies of the
            sample); zero means "ignore this sample".  They also weigh the
            training outlier fraction that sets ``offset_``.

        Returns
        -------
        self
        """
        self._check_params()
        X, _ = self._validated_training_data(X, labelled=False)
        sample_weight = check_sample_weight(sample_weight, X)
        keep = np.flatnonzero(sample_weight > 0)  # not empty: check_sample_weight rejects all-zero weights
        X_kept = X if len(keep) == X.shape[0] else X[keep]
        weights = sample_weight[keep]

        rng = check_random_state(self.random_state)
        self._set_kernel(resolve_gamma(self.gamma, X_kept, rng))
        check_kernel_range(X_kept, self._kernel_spec, type(self).__name__)  # before solving: no silent garbage
        options = self._solver_options(int(rng.randint(0, 2**31 - 1)))
        start = time.perf_counter()
        if isinstance(self.C, str):
            self.C_, self.calibration_ = self._calibrate_C(X_kept, weights, options, rng)
        else:
            self.C_, self.calibration_ = float(self.C), None
        # max_time covers the calibration too
        options = replace(options, max_time=max(options.max_time - (time.perf_counter() - start), 1e-3))
        result = run_engine(self._problem(X_kept, weights, self.C_), options)
        self._warn_if_unconverged(result, options)

        self.support_ = keep[result.support]
        self.support_vectors_ = self._training_rows(X, self.support_)
        self.dual_coef_ = result.alpha.reshape(1, -1)
        self._sv_norms = squared_norms(self.support_vectors_)
        self.rho_ = float(result.squared_norm)
        self.n_iter_ = int(result.n_iter)
        self.solver_info_ = result.as_record()
        self.fit_status_ = int(result.status != "converged")
        train_scores = self._in_row_blocks(self._raw_scores, X_kept, len(self.support_))
        self.offset_ = weighted_lower_quantile(train_scores, weights, float(self.nu))
        self.intercept_ = np.array([-self.offset_])
        return self

    def _problem(self, X, weights, C: float) -> SimplexProblem:
        """Tsang et al. 2005 eq. 7 as a simplex problem: labels +1, no bias, ``C_i = C w_i``, minimal-norm form."""
        return SimplexProblem(X, np.ones(X.shape[0]), C * weights, self._kernel_spec, bias=False, lam=0.0)

    def _calibrate_C(self, X, weights, options: SolverOptions, rng):
        """C for which a fraction ``nu`` of the (weighted) training points are support vectors.

        In the L2 model every support vector has a positive slack
        (``xi_i = a_i / C_i``), so this makes the model's own threshold ``rho``
        mark about ``nu`` of the training data, as scikit-learn's nu does.  The
        SV fraction falls monotonically from 1 (C -> 0, uniform ``a``) to the
        few points of the hard ball (C -> inf).  It is found by bisection on
        ``log(C * W)`` (``W = sum(weights)``; each step warm-started from the
        last, stopping early once the fraction is within 10% of nu) on a random
        subsample of ``max(2000, 100 / nu)`` rows (at most 20,000); ``C * W`` is
        the quantity to transfer to the full data, because repeating every point k times is the same problem
        with C multiplied by k (so the weights ``a`` keep their shape).
        """
        n = X.shape[0]
        least, per_nu, most = CALIBRATION_ROWS
        n_rows = int(min(max(least, np.ceil(per_nu / self.nu)), most))
        rows = np.sort(rng.choice(n, size=n_rows, replace=False)) if n > n_rows else None
        X_sub, w_sub = (X, weights) if rows is None else (X[rows], weights[rows])
        # with max_time, the calibration may use half of it (then keeps the bracket it has)
        deadline = time.perf_counter() + 0.5 * options.max_time

        last = {}  # the previous bisection step's solution warm-starts the next (only C changed)

        def sv_fraction(log_cw: float) -> float:
            time_left = max(deadline - time.perf_counter(), 1e-3)
            sub_options = replace(options, max_time=time_left, verbose=0.0)
            problem = self._problem(X_sub, w_sub, np.exp(log_cw) / w_sub.sum())
            result = run_engine(problem, sub_options, last.get("support"), last.get("alpha"))
            last.update(support=result.support, alpha=result.alpha)
            return float(w_sub[result.support].sum() / w_sub.sum())

        low, high = np.log(CALIBRATION_RANGE[0]), np.log(CALIBRATION_RANGE[1])
        fraction_at_high = sv_fraction(high)
        if fraction_at_high >= self.nu:  # even the hard ball has nu of the subsample as SVs
            low = high
        while high - low > np.log(CALIBRATION_PRECISION) and time.perf_counter() < deadline:
            middle = 0.5 * (low + high)
            fraction = sv_fraction(middle)
            if abs(fraction - self.nu) <= CALIBRATION_MATCH * self.nu:
                high, fraction_at_high = middle, fraction
                break
            if fraction > self.nu:
                low = middle  # too many SVs: increase C
            else:
                high, fraction_at_high = middle, fraction
        C_times_W = float(np.exp(high))
        record = {"C_times_W": C_times_W, "rows": X_sub.shape[0], "sv_fraction": fraction_at_high}
        return C_times_W / weights.sum(), record

    def _warn_if_unconverged(self, result, options: SolverOptions) -> None:
        core_set_message = (
            f"CoreOneClassSVM: the core set filled its memory budget (cache_size={self.cache_size:g} MB holds "
            f"{budget_capacity(options.cache_bytes, options.tol)} points) before convergence; the model so "
            "far is kept. Increase cache_size, or C (fewer support vectors; C='auto' gives about "
            "nu * n_samples of them).") if result.status == "core_set_full" else None
        # at the first frame outside coresvm (fit is decorated)
        warn_unconverged("CoreOneClassSVM", result.status, result.rel_gap, self.tol, caller_stacklevel(),
                         core_set_message)

    # ----------------------------------------------------------------- predict
    def _raw_scores(self, X) -> np.ndarray:
        return kernel_product(X, self.support_vectors_, self._kernel_spec, self.dual_coef_[0],
                              norms_b=self._sv_norms)

    def score_samples(self, X) -> np.ndarray:
        """Similarity to the ball's centre, ``w' phi(x) = sum_i a_i k(x_i, x)``; higher is more normal."""
        return self._in_row_blocks(self._raw_scores, self._validated_prediction_data(X), len(self.support_))

    def decision_function(self, X) -> np.ndarray:
        """``score_samples(X) - offset_``: positive for inliers, negative for outliers."""
        return self.score_samples(X) - self.offset_

    def predict(self, X) -> np.ndarray:
        """+1 for inliers (``decision_function >= 0``), -1 for outliers."""
        return np.where(self.decision_function(X) >= 0, 1, -1)
