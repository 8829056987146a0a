"""CoreSVC's parameters: their checks, what a sub-problem's run gets from them (solver options, per-sample C),
and the convergence warnings that name them."""

from __future__ import annotations

import numpy as np

from ._validation import (
    caller_stacklevel,
    check_choice,
    check_integer,
    check_positive,
    class_weight_per_sample,
)
from .cache import cache_budgets
from .estimator import warn_unconverged
from .kernels import KernelSpec
from .multiclass import BinaryModel
from .solvers.core_gram import budget_capacity
from .solvers.driver import JOINT_BALL_RULES
from .solvers.engine import SECOND_VERTEX_RULES
from .solvers.geometric import STOPPING_RULES
from .solvers.methods import BALL, CORE_SET, ENGINE, METHODS, names_in
from .solvers.options import (
    BallOptions,
    CoreSetLoopOptions,
    MemoryOptions,
    ReportOptions,
    SearchOptions,
    SolverOptions,
    StepOptions,
    StopOptions,
)

# The solvers, their parts and their papers: one table (solvers/methods.py); solver_options reads it.
FRANK_WOLFE_SOLVERS = names_in(ENGINE)
CORE_SET_SOLVERS = names_in(CORE_SET)
BALL_SOLVERS = names_in(BALL)  # solvers/geometric.py
MEB_SOLVERS = tuple(name for name, entry in METHODS.items() if entry.needs_constant_diagonal)
# multiclass='joint': the core-set solvers, and the thesis's own SphereSVM / MNSVM (Strack 2013, sec. 5.4.2)
JOINT_SOLVERS = (*CORE_SET_SOLVERS, *JOINT_BALL_RULES)
BIAS_RULES = ("theoretic", "kkt", "none")
SAMPLING_MODES = ("uniform", "stratified")
SEARCH_MODES = ("auto", "full", "random")
# With at most this many points (per binary problem) 'auto' scans the full gradient.
AUTO_FULL_SEARCH_MAX_POINTS = 20_000
# Multiclass modes: one-vs-one, one-vs-rest, and the all-at-once machine (joint.py).
MULTICLASS_MODES = ("ovo", "ovr", "joint")


class SVCParameters:
    """The parameter checks, solver options, per-sample C and convergence warnings of :class:`~coresvm.CoreSVC`
    (it holds the parameters)."""

    def _solver_names(self):
        return METHODS

    def check_params(self) -> None:
        """Check the parameters as :meth:`fit` does, without data (e.g. before a long data load).

        Raises
        ------
        ValueError
            For the first invalid parameter or combination, with the message :meth:`fit` gives.
        """
        check_positive("C", self.C)
        self._check_shared_params()  # kernel, tol, max_iter, max_time, cache_size, n_init
        check_choice("solver", self.solver, self._solver_names())
        check_choice("search", self.search, SEARCH_MODES)
        check_integer("sample_size", self.sample_size)
        if not isinstance(self.eta, (int, float, np.floating)) or not (1.0 <= self.eta < 2.0):
            raise ValueError(f"eta (over-relaxation) must be in [1, 2); got {self.eta!r}")
        for name in ("n_candidates", "batch_size", "draws"):
            check_integer(name, getattr(self, name), allow_none=True)
        check_choice("decision_function_shape", self.decision_function_shape, ("ovr", "ovo"))
        self._check_joint_params()
        if self.n_jobs is not None and (isinstance(self.n_jobs, bool) or not isinstance(self.n_jobs, (int, np.integer))
                                        or self.n_jobs == 0):
            raise ValueError(f"n_jobs must be None or a non-zero integer (-1: all cores); got {self.n_jobs!r}")
        if self.callback is not None and not callable(self.callback):
            raise ValueError(f"callback must be None or a callable taking one dict; got {self.callback!r}")
        if self.callback is not None and self.solver in BALL_SOLVERS:
            raise ValueError(
                f"callback is not supported by solver={self.solver!r} (a compiled loop that cannot be resumed); "
                "use 'coreset', 'cvm' or a Frank-Wolfe solver"
            )
        check_integer("callback_every", self.callback_every)
        if self.selection is not None:
            check_choice("selection", self.selection, SECOND_VERTEX_RULES)
        if not isinstance(self.bias, bool):
            check_choice("bias", self.bias, BIAS_RULES)
        if self.stopping is not None:
            check_choice("stopping", self.stopping, STOPPING_RULES)
        if self.eps is not None:
            check_positive("eps", self.eps)
            if self.eps >= 1:
                raise ValueError(f"eps must be in (0, 1); got {self.eps!r}")
        check_choice("sampling", self.sampling, SAMPLING_MODES)
        if self.solver in MEB_SOLVERS and not KernelSpec(self.kernel).has_constant_diagonal:
            raise ValueError(
                f"solver={self.solver!r} solves a minimum enclosing ball, which needs a constant k(x, x); "
                f"kernel={self.kernel!r} does not have one. Use kernel='rbf', or solver='mnsvm', 'coreset' or a "
                "Frank-Wolfe solver, which take any kernel."
            )
        if self._frank_wolfe_radius_test and not KernelSpec(self.kernel).has_constant_diagonal:
            raise ValueError(
                f"stopping='meb' with solver={self.solver!r} is the (1 + eps)-ball test of a minimum enclosing "
                f"ball, which needs a constant k(x, x); kernel={self.kernel!r} does not have one. Use "
                "kernel='rbf', or stopping=None (the relative duality gap tol) with this kernel."
            )
        if not isinstance(self.gmdm_k, (int, float, np.floating)) or not (0.0 <= self.gmdm_k <= 1.0):
            raise ValueError(f"gmdm_k must be in [0, 1]; got {self.gmdm_k!r}")

    def _check_joint_params(self) -> None:
        check_choice("multiclass", self.multiclass, MULTICLASS_MODES)
        if self.multiclass != "joint":
            return
        if self.solver not in JOINT_SOLVERS:
            raise ValueError(
                f"multiclass='joint' supports solver='coreset', 'cvm', 'mnsvm' or 'sphere'; got {self.solver!r}: "
                "its loop evaluates binary labels y_i y_j, not the joint problem's label inner products "
                "(Strack 2013, sec. 5.4)"
            )
        if self.decision_function_shape != "ovr":
            raise ValueError(
                "multiclass='joint' gives one score per class: decision_function_shape must be 'ovr'; "
                f"got {self.decision_function_shape!r}"
            )
        for name in ("probability", "callback"):
            if getattr(self, name):
                raise ValueError(f"{name} is not available with multiclass='joint'; use 'ovo' or 'ovr'")

    def solver_options(self, n_points: int, seed: int, time_share: float, concurrent: int = 1) -> SolverOptions:
        """The solver settings a fit gives a sub-problem of ``n_points`` points (e.g. for a solve outside
        :meth:`fit`, as ``distributed.fit_cascade``'s global one).

        Parameters
        ----------
        n_points : int
            Points of the (sub-)problem: picks the full or sampled violator search (``search='auto'``).
        seed : int
            Seed of the solver's random draws.
        time_share : float
            Seconds the solve may take (``np.inf``: no limit).
        concurrent : int, default=1
            Sub-problems solved at the same time: with ``cache_size='auto'`` they share the core sets' budget.

        Returns
        -------
        SolverOptions
        """
        full = self.search == "full" or (self.search == "auto" and n_points <= AUTO_FULL_SEARCH_MAX_POINTS)
        method = METHODS[self.solver]
        core_set, ball = method.family == CORE_SET, method.family == BALL
        # 'auto' reads the available memory once, shared by the concurrent sub-problems
        cache_bytes, core_set_bytes = cache_budgets(self.cache_size, concurrent)
        return SolverOptions(
            memory=MemoryOptions(cache_bytes=cache_bytes, core_set_bytes=core_set_bytes),
            step=StepOptions(step_rule=method.step_rule if method.family == ENGINE else "mdm",
                             second_vertex=self._second_vertex_rule, gmdm_k=float(self.gmdm_k), eta=float(self.eta)),
            search=SearchOptions(
                sample_size=0 if full else int(min(self.sample_size, n_points)),
                stratified=self.sampling == "stratified", seed=seed, n_init=int(self.n_init),
                draws=int(self.draws or method.draws), probe=method.probe),
            stop=StopOptions(
                tol=float(self.tol), max_iter=self.max_iterations, max_time=float(time_share),
                radius_test=self._radius_test,
                stopping=self.stopping or method.ball_stopping,
                eps=None if self.eps is None else float(self.eps), multiscale=bool(self.multiscale)),
            core_set_loop=CoreSetLoopOptions(
                core_set=core_set, n_candidates=int(self.n_candidates or method.n_candidates),
                sweep_rounds=method.sweep_rounds if self.n_candidates is None else 0,
                max_add=int(self.batch_size or method.max_add), growth=method.growth,
                core_set_stop=method.core_set_stop),
            ball=BallOptions(ball_rule=method.step_rule if ball else ""),
            report=ReportOptions(verbose=self.verbose_seconds),
        )

    @property
    def _needs_one_C(self) -> bool:
        """Whether the solve is a minimum enclosing ball (CVM, BVM, SphereSVM; Frank-Wolfe with stopping='meb'),
        which needs one C for all samples."""
        return self.solver in MEB_SOLVERS or self._frank_wolfe_radius_test

    def _check_one_C(self, C_per_sample: np.ndarray) -> None:
        """A minimum enclosing ball needs one C for all (:attr:`_needs_one_C`)."""
        if self._needs_one_C and np.ptp(C_per_sample) > 0:
            what = f"solver={self.solver!r}" + (" with stopping='meb'" if self._frank_wolfe_radius_test else "")
            others = "'coreset'" if self.multiclass == "joint" else "'mnsvm' or 'coreset'"
            raise ValueError(
                f"{what} solves a minimum enclosing ball, which needs one C for every sample; "
                f"sample_weight or class_weight make C vary. Use solver={others} with weights."
            )

    def _per_sample_C(self, sample_weight, classes, y) -> np.ndarray:
        """``C_i = C w_i c_(y_i)``; one C for all (no weights) is a stride-0 broadcast: no memory per row."""
        if sample_weight is None and self.class_weight is None:
            return np.broadcast_to(np.float64(self.C), (len(y),))
        if sample_weight is None:
            sample_weight = np.ones(len(y))
        return self.C * sample_weight * class_weight_per_sample(self.class_weight, classes, y)

    def _warn_unconverged(self, models: list[BinaryModel]) -> None:
        """One ConvergenceWarning per sub-problem that stopped early (issued here, in the calling thread)."""
        for model in models:
            self._warn_if_stopped_early(model.info["status"], model.info["relative_gap"], model.info.get("eps"),
                                        refused_at=model.info.get("memory_refused_at", 0))

    def _warn_if_stopped_early(self, status: str, relative_gap: float, eps: float | None, what: str = "CoreSVC",
                               refused_at: int = 0):
        """The ConvergenceWarning for a solve that ended with ``status`` (none when it converged); ``refused_at``:
        the core-set size at which the system refused its Gram more memory (0: never)."""
        core_set_message = None
        if status == "core_set_full" and refused_at:
            core_set_message = (
                f"{what}: the system refused the core set's Gram more memory at {refused_at} points (an "
                f"address-space limit such as ulimit -v, or strict overcommit), below its budget "
                f"(cache_size={self.cache_size!r}), before convergence (relative gap {relative_gap:.2e}); the "
                f"model so far is kept. Raise the limit or lower cache_size.")
        elif status == "core_set_full":
            # CVM's core set runs at tol = (1 + eps)^2 - 1 (its radius test), which sets the Gram's dtype.
            solver_tol = (1.0 + eps) ** 2 - 1.0 if self.solver == "cvm" and eps is not None else self.tol
            budget = cache_budgets(self.cache_size)[1]
            core_set_message = (
                f"{what}: the core set filled its memory budget (cache_size={self.cache_size!r}: "
                f"{budget / 2**20:.4g} MB holds {budget_capacity(budget, float(solver_tol))} points) before "
                f"convergence (relative gap {relative_gap:.2e}); the model so far is kept. Increase cache_size.")
        # Called from fit's helpers, under fit's decorators: the warning points at the first frame outside coresvm.
        warn_unconverged(what, status, relative_gap, self.tol, caller_stacklevel(), core_set_message)

    @property
    def _frank_wolfe_radius_test(self) -> bool:
        """A Frank-Wolfe solver with ``stopping='meb'``: Frandi et al. 2013's (1 + eps)-ball stopping test."""
        return self.solver in FRANK_WOLFE_SOLVERS and self.stopping == "meb"

    @property
    def _radius_test(self) -> bool:
        """Whether the run stops by the (1 + eps)-ball test of the current ball (CVM, or FW with 'meb')."""
        return METHODS[self.solver].radius_test or self._frank_wolfe_radius_test

    @property
    def _second_vertex_rule(self) -> str:
        """``selection``, or its default: the paper's MDM vertex for 'swap' (Frandi, Nanculef and Suykens 2015,
        sec. 2), IMDM for the other solvers (the core-set inner solve, SphereSVM, MNSVM)."""
        if self.selection is not None:
            return self.selection
        return METHODS[self.solver].second_vertex

    @property
    def bias_rule(self) -> str:
        """``bias`` as a rule: ``'theoretic'``, ``'kkt'`` or ``'none'`` (``True`` and ``False`` mapped)."""
        if isinstance(self.bias, bool):
            return "theoretic" if self.bias else "none"
        return self.bias
