"""CoreSVC: a scikit-learn classifier trained by the geometric simplex-QP solvers."""

from __future__ import annotations

import time
import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.multiclass import _ovr_decision_function
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    _check_sample_weight,
    check_consistent_length,
    check_is_fitted,
    column_or_1d,
    validate_data,
)

from ._validation import (
    check_choice,
    check_finite_input,
    check_kernel_params,
    check_positive,
    class_weight_per_sample,
)
from .data import is_memory_mapped, map_row_blocks, reject_zarr, validate_mapped_input
from .kernels import KernelSpec, kernel_product, product_block_rows, resolve_gamma, squared_norms
from .multiclass import BinaryModel, OneVsOneLayout
from .problem import SimplexProblem, kkt_bias
from .solvers.core_set import core_set_capacity
from .solvers.driver import SolverOptions, run_engine
from .solvers.engine import SECOND_VERTEX_RULES
from .solvers.geometric import STOPPING_RULES

FRANK_WOLFE_SOLVERS = {"fw": "fw", "mfw": "mfw", "swap": "swap", "partan": "partan"}
# core-set solvers: (candidates scored per round, violators added per round)
CORE_SET_SOLVERS = {"cvm": (59, 1), "coreset": (10_000, 300)}
BALL_SOLVERS = ("bvm", "sphere", "mnsvm")  # solvers/geometric.py
MEB_SOLVERS = ("cvm", "bvm", "sphere")  # need a constant k~(x, x)
BVM_PROBE, BVM_TRIES = 59, 10  # LibCVM's violator search: the worst of 59 draws, up to 10 times
BIAS_RULES = ("theoretic", "kkt", "none")
SAMPLING_MODES = ("uniform", "stratified")
SEARCH_MODES = ("auto", "full", "random")
# With at most this many points (per binary problem) 'auto' scans the full gradient.
AUTO_FULL_SEARCH_MAX_POINTS = 20_000


class CoreSVC(ClassifierMixin, BaseEstimator):
    """Kernel SVM trained as an L2-SVM on the unit simplex by Frank-Wolfe-type steps.

    The L2-SVM (Lee & Mangasarian; seed 000 eq. 7) is solved through its dual,
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
        'cvm' is the Core Vector Machine (seed 002): each round scores
        ``n_candidates`` random points (59), adds the ``batch_size`` (1) worst
        violators to the core set and re-solves the problem on the core set
        with pairwise steps on its in-memory Gram matrix.  'coreset' is the
        same loop with large batches (10,000 candidates, 300 added per round),
        the fastest solver here.  The Frank-Wolfe family works on the whole
        problem: 'fw' toward steps with exact line search; 'mfw' adds Wolfe's
        away steps (points can be dropped); 'swap' the pairwise step, taken
        when it beats the FW step; 'partan' FW plus a parallel-tangent step
        (seed 001).  'swap' and 'mfw' converge linearly near the solution;
        'fw' and 'partan' only sublinearly.  The gsvm family (seed 004) moves
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
        more than the fraction ``tol``.  With random search and the core-set
        solvers the gap is that of a random sample, confirmed on a fresh sample
        before stopping (seed 001 Sec. 4.2; seed 002).
    max_iter : int or None, default=None
        Iteration cap (None: 10 million).
    max_time : float or None, default=None
        Wall-clock budget in seconds for the whole fit (one-vs-one pairs share
        it).  When reached, the model so far is kept and a
        ``ConvergenceWarning`` is issued.
    cache_size : float, default=200
        Memory budget in MB for kernel values: the LRU kernel-column cache of
        the full-search solvers, or the core set's Gram matrix for 'coreset'
        and 'cvm' (float32 when ``tol >= 1e-3``: 200 MB hold a core set of 7240
        points; when it is full the fit stops with a ``ConvergenceWarning``).
    class_weight : dict, 'balanced' or None, default=None
        Multiplies C per class.
    bias : {'theoretic', 'kkt', 'none'} or bool, default='theoretic'
        The bias rule (gsvm ``-b``, seed 004 sec. 5.5).  'theoretic':
        ``b = sum_i a_i y_i`` (eq. 5.20).  'kkt': the KKT average over the SVs,
        ``b = mean_i [y_i (||c||^2 - a_i / C_i) - sum_j a_j y_j k(x_i, x_j)]``
        (eq. 5.24), less sensitive to a rough solution.  'none': the no-bias
        machine (the kernel without its ``+1``), ``intercept_ == 0``.  True and
        False mean 'theoretic' and 'none'.
    eta : float, default=1.0
        Over-relaxation factor in [1, 2) applied to every line-search step.
    stopping : {'mn', 'adjmn', 'meb'} or None, default=None
        Stopping rule of 'bvm', 'sphere' and 'mnsvm' (gsvm ``-p``, seed 004
        sec. 2.10): a sampled point violates when ``(||c||^2 - g_i) / ||c||^2 >
        eps`` ('mn'), ``(||c||^2 - g_i) / (||c|| ||x~_i||) > eps`` ('adjmn') or
        ``||c - x~_i|| > (1 + eps) R^`` ('meb').  None: 'meb' for 'bvm' and
        'sphere', 'adjmn' for 'mnsvm' (gsvm's default).  The other solvers
        stop on ``tol``.
    eps : float or None, default=None
        Final eps of that rule; None is gsvm's default: 1e-3 for 'mn' and
        'adjmn', LibCVM's heuristic (seed 004 eq. 7.3) for 'meb'.
    multiscale : bool, default=True
        Solve for eps = 1/2, 1/4, ... down to exactly ``eps``, warm-starting
        each stage from the last (seed 004 Alg. 5).
    draws : int or None, default=None
        Violator search of 'bvm', 'sphere' and 'mnsvm': at most this many random
        points are tried per iteration; 'sphere' and 'mnsvm' take the first that
        violates (gsvm ``-d``, default 600), 'bvm' the worst of each 59 (LibCVM's
        "59 x 10", default 590).  No violator among them ends the eps stage.
    sampling : {'uniform', 'stratified'}, default='uniform'
        How random candidates are drawn by the sampling solvers: uniformly, or
        gsvm's "fair" draw (a class first, then a point of it; gsvm ``-s``).
    second_vertex : {'mdm', 'imdm', 'gmdm'}, default='imdm'
        How a pairwise step ('swap') picks the point it takes weight from:
        'mdm' the active point with the largest gradient; 'imdm' the one whose
        (clipped) step decreases the objective most (Franc; seed 004 eq. 5.33);
        'gmdm' the generalized rule with exponent ``gmdm_k``.
    gmdm_k : float, default=0.5
        Exponent of the 'gmdm' rule in [0, 1] (0 is MDM, 1 is IMDM).
    n_candidates : int or None, default=None
        Core-set solvers: points scored per round (None: the solver's default).
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
        Indices of the support vectors in the training data.
    support_vectors_ : ndarray or CSR matrix of shape (n_SV, n_features)
    n_support_ : ndarray of shape (n_classes,)
    dual_coef_ : ndarray of shape (n_classes - 1, n_SV)
        ``a_i y_i / rho`` in LIBSVM's one-vs-one layout.  Dividing by the
        margin ``rho = a'Qa`` puts the decision function on SVC's scale
        (margin support vectors have ``|f(x)| = 1`` when their slack is 0).
    intercept_ : ndarray of shape (n_classes * (n_classes - 1) / 2,)
        ``sum_i a_i y_i / rho`` (0 without bias).
    n_iter_ : ndarray of shape (n_classes * (n_classes - 1) / 2,)
    fit_status_ : int
        0 when every sub-problem converged, 1 otherwise.
    solver_info_ : list of dict
        Per binary problem: iterations, final gap and relative gap, status,
        time, active-set size, cache hits and misses.
    gamma_ : float
        The resolved kernel width.
    """

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
        cache_size: float = 200,
        class_weight=None,
        bias: str | bool = "theoretic",
        eta: float = 1.0,
        stopping: str | None = None,
        eps: float | None = None,
        multiscale: bool = True,
        draws: int | None = None,
        sampling: str = "uniform",
        second_vertex: str = "imdm",
        gmdm_k: float = 0.5,
        n_candidates: int | None = None,
        batch_size: int | None = None,
        n_init: int = 20,
        decision_function_shape: str = "ovr",
        break_ties: bool = False,
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
        self.second_vertex = second_vertex
        self.gmdm_k = gmdm_k
        self.n_candidates = n_candidates
        self.batch_size = batch_size
        self.n_init = n_init
        self.decision_function_shape = decision_function_shape
        self.break_ties = break_ties
        self.verbose = verbose
        self.random_state = random_state

    # ------------------------------------------------------------------ checks
    def _solver_names(self):
        return {**FRANK_WOLFE_SOLVERS, **{name: name for name in (*CORE_SET_SOLVERS, *BALL_SOLVERS)}}

    def _check_params(self) -> None:
        check_positive("C", self.C)
        check_kernel_params(self.kernel, self.gamma, self.degree, self.coef0)
        check_choice("solver", self.solver, self._solver_names())
        check_choice("search", self.search, SEARCH_MODES)
        if isinstance(self.sample_size, bool) or not isinstance(self.sample_size, (int, np.integer)):
            raise ValueError(f"sample_size must be an integer >= 1; got {self.sample_size!r}")
        if self.sample_size < 1:
            raise ValueError(f"sample_size must be >= 1; got {self.sample_size!r}")
        check_positive("tol", self.tol)
        if self.max_iter is not None and (
            isinstance(self.max_iter, bool) or not isinstance(self.max_iter, (int, np.integer)) or self.max_iter < 1
        ):
            raise ValueError(f"max_iter must be None or an integer >= 1; got {self.max_iter!r}")
        check_positive("max_time", self.max_time, allow_none=True, allow_inf=True)
        check_positive("cache_size", self.cache_size)
        if not isinstance(self.eta, (int, float, np.floating)) or not (1.0 <= self.eta < 2.0):
            raise ValueError(f"eta (over-relaxation) must be in [1, 2); got {self.eta!r}")
        for name in ("n_candidates", "batch_size"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1):
                raise ValueError(f"{name} must be None or an integer >= 1; got {value!r}")
        check_choice("decision_function_shape", self.decision_function_shape, ("ovr", "ovo"))
        check_choice("second_vertex", self.second_vertex, SECOND_VERTEX_RULES)
        if not isinstance(self.bias, bool):
            check_choice("bias", self.bias, BIAS_RULES)
        if self.stopping is not None:
            check_choice("stopping", self.stopping, STOPPING_RULES)
        if self.eps is not None:
            check_positive("eps", self.eps)
            if self.eps >= 1:
                raise ValueError(f"eps must be in (0, 1); got {self.eps!r}")
        if self.draws is not None and (isinstance(self.draws, bool) or not isinstance(self.draws, (int, np.integer))
                                       or self.draws < 1):
            raise ValueError(f"draws must be None or an integer >= 1; got {self.draws!r}")
        check_choice("sampling", self.sampling, SAMPLING_MODES)
        if self.solver in MEB_SOLVERS and not KernelSpec(self.kernel).has_constant_diagonal:
            raise ValueError(
                f"solver={self.solver!r} solves a minimum enclosing ball, which needs a constant k(x, x); "
                f"kernel={self.kernel!r} does not have one. Use kernel='rbf', or solver='mnsvm', 'coreset' or a "
                "Frank-Wolfe solver, which take any kernel."
            )
        if not isinstance(self.gmdm_k, (int, float, np.floating)) or not (0.0 <= self.gmdm_k <= 1.0):
            raise ValueError(f"gmdm_k must be in [0, 1]; got {self.gmdm_k!r}")
        if isinstance(self.n_init, bool) or not isinstance(self.n_init, (int, np.integer)) or self.n_init < 2:
            raise ValueError(f"n_init must be an integer >= 2; got {self.n_init!r}")

    def _solver_options(self, n_points: int, seed: int, time_share: float) -> SolverOptions:
        full = self.search == "full" or (self.search == "auto" and n_points <= AUTO_FULL_SEARCH_MAX_POINTS)
        verbose = float(self.verbose) if not isinstance(self.verbose, bool) else (1.0 if self.verbose else 0.0)
        core_set = self.solver in CORE_SET_SOLVERS
        candidates, batch = CORE_SET_SOLVERS.get(self.solver, (59, 1))
        ball = self.solver in BALL_SOLVERS
        default_stopping = "adjmn" if self.solver == "mnsvm" else "meb"
        probe = BVM_PROBE if self.solver == "bvm" else 1
        return SolverOptions(
            core_set=core_set,
            n_candidates=int(self.n_candidates or candidates),
            max_add=int(self.batch_size or batch),
            step_rule="mdm" if core_set or ball else self._solver_names()[self.solver],
            second_vertex=self.second_vertex,
            gmdm_k=float(self.gmdm_k),
            sample_size=0 if full else int(min(self.sample_size, n_points)),
            stratified=self.sampling == "stratified",
            tol=float(self.tol),
            max_iter=int(self.max_iter) if self.max_iter is not None else 10_000_000,
            max_time=float(time_share),
            eta=float(self.eta),
            seed=seed,
            cache_bytes=int(self.cache_size * 2**20),
            n_init=int(self.n_init),
            verbose=verbose,
            ball_rule=self.solver if ball else "",
            stopping=self.stopping or default_stopping,
            eps=None if self.eps is None else float(self.eps),
            draws=int(self.draws or (BVM_PROBE * BVM_TRIES if self.solver == "bvm" else 600)),
            probe=probe,
            multiscale=bool(self.multiscale),
        )

    @property
    def _bias_rule(self) -> str:
        if isinstance(self.bias, bool):
            return "theoretic" if self.bias else "none"
        return self.bias

    def _validate_fit_input(self, X, y, sample_weight):
        reject_zarr(X)
        if is_memory_mapped(X):  # out of core: checked in row blocks, never copied (data.py)
            X = validate_mapped_input(self, X, reset=True)
            y = column_or_1d(y, warn=True)
            check_consistent_length(X, y)
        else:
            X, y = validate_data(
                self, X, y, accept_sparse="csr", dtype=[np.float64, np.float32], order="C", ensure_all_finite=False
            )
            check_finite_input(X)
        check_classification_targets(y)
        sample_weight = _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
        if not np.all(np.isfinite(sample_weight)):
            raise ValueError("sample_weight contains NaN or infinity")
        keep = sample_weight > 0
        if not np.any(keep):
            raise ValueError("sample_weight is zero for every sample; nothing to train on")
        return X, y, sample_weight, keep

    # --------------------------------------------------------------------- fit
    def fit(self, X, y, sample_weight=None):
        """Fit the SVM.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training vectors; CSR input is used without densifying and float32
            input is kept in float32.
        y : array-like of shape (n_samples,)
            Class labels (any hashable type numpy can sort).
        sample_weight : array-like of shape (n_samples,), default=None
            Per-sample multipliers of C; zero means "ignore this sample".

        Returns
        -------
        self
        """
        self._check_params()
        X, y, sample_weight, keep = self._validate_fit_input(X, y, sample_weight)
        classes, y_index = np.unique(y, return_inverse=True)
        if len(np.unique(y_index[keep])) < 2:
            raise ValueError(
                "The training data must contain samples of at least 2 classes; got only one class "
                f"({classes[y_index[keep]][0]!r})"
            )
        self.classes_ = classes
        rng = check_random_state(self.random_state)
        self.gamma_ = resolve_gamma(self.gamma, X[keep] if not np.all(keep) else X, rng)
        self._kernel_spec = KernelSpec(self.kernel, self.gamma_, float(self.coef0), int(self.degree))
        C_per_sample = self.C * sample_weight * class_weight_per_sample(self.class_weight, classes, y)
        del sample_weight  # O(m) floats: with 20M rows every such array is 160 MB

        models = []
        pairs = OneVsOneLayout.pairs(len(classes))
        # max_time is a budget for the whole fit: each pair gets an equal share of what is left
        deadline = time.perf_counter() + (self.max_time if self.max_time is not None else np.inf)
        for done, (first, second) in enumerate(pairs):
            time_share = max((deadline - time.perf_counter()) / (len(pairs) - done), 1e-3)
            rows = np.flatnonzero(keep & ((y_index == first) | (y_index == second)))
            # LIBSVM's convention: the first class of a pair is +1 ... except that for
            # binary problems scikit-learn makes classes_[1] the positive class.
            positive = second if len(classes) == 2 else first
            signs = np.where(y_index[rows] == positive, 1.0, -1.0)
            C_rows = C_per_sample if len(rows) == len(C_per_sample) else C_per_sample[rows]  # no copy when binary
            models.append(self._fit_binary(X, rows, signs, C_rows, rng, time_share))
        self._set_fitted_attributes(X, y_index, models)
        return self

    def _fit_binary(self, X, rows, signs, C_rows, rng, time_share: float) -> BinaryModel:
        X_rows = X if len(rows) == X.shape[0] else X[rows]
        if self.solver in MEB_SOLVERS and np.ptp(C_rows) > 0:
            raise ValueError(
                f"solver={self.solver!r} solves a minimum enclosing ball, which needs one C for every sample; "
                "sample_weight or class_weight make C vary. Use solver='mnsvm' or 'coreset' with weights."
            )
        bias_rule = self._bias_rule
        problem = SimplexProblem(X_rows, signs, C_rows, self._kernel_spec, bias=bias_rule != "none", lam=0.0)
        options = self._solver_options(len(rows), int(rng.randint(0, 2**31 - 1)), time_share)
        result = run_engine(problem, options)
        if result.status == "core_set_full":
            warnings.warn(
                f"CoreSVC: the core set filled its memory budget (cache_size={self.cache_size:g} MB holds "
                f"{core_set_capacity(options.cache_bytes, options.tol)} points) before convergence (relative gap "
                f"{result.rel_gap:.2e}); the model so far is kept. Increase cache_size.",
                ConvergenceWarning,
                stacklevel=3,
            )
        elif result.status != "converged":
            warnings.warn(
                f"CoreSVC stopped before convergence ({result.status}, relative gap {result.rel_gap:.2e} > "
                f"tol {self.tol:g}); the model so far is kept. Increase max_iter/max_time or loosen tol.",
                ConvergenceWarning,
                stacklevel=3,
            )
        intercept = None
        if bias_rule == "kkt":
            intercept = kkt_bias(problem, result.support, result.alpha, result.squared_norm)
        return BinaryModel.from_solution(rows[result.support], result, signs[result.support], bias_rule != "none",
                                         intercept)

    def _set_fitted_attributes(self, X, y_index, models) -> None:
        layout = OneVsOneLayout.build(models, y_index, len(self.classes_))
        self.support_ = layout.support
        self.support_vectors_ = X[layout.support]
        self.n_support_ = layout.n_support
        self.dual_coef_ = layout.dual_coef
        self.intercept_ = layout.intercept
        self._pair_coef = layout.pair_coef
        self._sv_norms = squared_norms(self.support_vectors_)
        self.n_iter_ = np.array([model.info["iterations"] for model in models], dtype=np.int64)
        self.solver_info_ = [model.info for model in models]
        self.fit_status_ = int(any(info["status"] != "converged" for info in self.solver_info_))

    # ----------------------------------------------------------------- predict
    def _pair_decisions(self, X) -> np.ndarray:
        check_is_fitted(self)
        reject_zarr(X)
        if is_memory_mapped(X):  # streamed in row blocks (data.py)
            X = validate_mapped_input(self, X, reset=False)
            decisions = map_row_blocks(lambda block: kernel_product(
                block, self.support_vectors_, self._kernel_spec, self._pair_coef, norms_b=self._sv_norms), X,
                multiple=product_block_rows(self.support_vectors_.shape[0]))
            decisions += self.intercept_
            return decisions
        X = validate_data(self, X, accept_sparse="csr", dtype=[np.float64, np.float32], order="C", reset=False)
        check_finite_input(X)
        decisions = kernel_product(X, self.support_vectors_, self._kernel_spec, self._pair_coef,
                                   norms_b=self._sv_norms)
        decisions += self.intercept_
        return decisions

    def decision_function(self, X) -> np.ndarray:
        """Signed distance-like scores: ``sum_i dual_coef_i k(x_i, x) + intercept_``.

        Binary: shape (n_samples,), positive means ``classes_[1]``.  Multiclass
        with ``decision_function_shape='ovo'``: the pairwise values
        (n_samples, n_pairs), pair (i, j) positive for class i (LIBSVM's
        order); with 'ovr': (n_samples, n_classes) scores as in scikit-learn.
        """
        decisions = self._pair_decisions(X)
        if len(self.classes_) == 2:
            return decisions[:, 0]
        if self.decision_function_shape == "ovr":
            return _ovr_decision_function(decisions < 0, -decisions, len(self.classes_))
        return decisions

    def predict(self, X) -> np.ndarray:
        """Class labels: the sign for two classes, max-wins voting for more."""
        decisions = self._pair_decisions(X)
        if len(self.classes_) == 2:
            return self.classes_[(decisions[:, 0] > 0).astype(int)]
        if self.break_ties and self.decision_function_shape == "ovo":
            raise ValueError("break_ties must be False when decision_function_shape is 'ovo'")
        if self.break_ties and self.decision_function_shape == "ovr":
            scores = _ovr_decision_function(decisions < 0, -decisions, len(self.classes_))
            return self.classes_[np.argmax(scores, axis=1)]
        return self.classes_[OneVsOneLayout.vote(decisions, len(self.classes_))]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags
