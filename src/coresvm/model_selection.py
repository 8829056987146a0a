"""Model selection for kernel SVMs: gsvm's pattern search and nested cross-validation.

``PatternSearchCV`` is the "sparse grid search" of Strack's thesis (Strack 2013, Algorithm 6,
after Momma & Bennett 2002): a cross pattern walks over the index grid of the hyper-parameters,
moving to the best neighbour or halving its step, and restarts deterministically at the grid
point farthest (in index distance) from every point evaluated so far. Evaluated points are
cached, so no (point, fold) pair is fitted twice. It has scikit-learn's search API
(``BaseSearchCV``: ``best_params_``, ``cv_results_``, refit, scoring, ...) and works with any
estimator. ``nested_cross_validate`` is the thesis's double cross-validation (Section 7.1.1).

Warm starts: when the estimator has a ``warm_start`` parameter and the grid has a ``C`` axis,
the fits that share a fold and every other parameter (gamma) run in order of increasing C on
one estimator with ``warm_start=True``, and the last fitted model of each (fold, gamma) is
kept to start the next batch of that group. coresvm's estimators also start across gamma and
across folds (gsvm's support-vector reuse: fold k+1 starts from fold k's solution restricted
to the rows both train on), so only the search's first fit is cold.

Parallelism goes through joblib (``n_jobs``), so ``joblib.parallel_config(backend="dask")``
runs the same search on a Dask cluster. When fits run in parallel, each fit's Numba and BLAS
threads are limited to ``cores // parallel jobs`` so that the machine is not oversubscribed.
"""

from __future__ import annotations

import copy
import math
import numbers
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs
from sklearn.base import _fit_context, clone, is_classifier
from sklearn.metrics import check_scoring
from sklearn.model_selection import KFold, StratifiedKFold, check_cv
from sklearn.model_selection._search import BaseSearchCV
from sklearn.model_selection._validation import (
    _fit_and_score,
    _insert_error_scores,
    _warn_or_raise_about_fit_failures,
)
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import _check_method_params, _num_samples, indexable

from ._validation import quiet_degenerate_kernel
from .cache import cache_budgets
from .kernels import ProcessWideLimit, limit_kernel_threads, process_kernel_threads
from .warm_start import WarmStart

__all__ = ["GSVM_PARAM_GRID", "PatternSearchCV", "nested_cross_validate"]

# gsvm's default grid (Strack 2013, sec. 3.1 and Appendix A): C = 4^-2..4^5, gamma = 4^-5..4^2,
# resolution 8, geometric spacing.
GSVM_PARAM_GRID: dict[str, list[float]] = {
    "C": [float(v) for v in 4.0 ** np.arange(-2, 6)],
    "gamma": [float(v) for v in 4.0 ** np.arange(-5, 3)],
}


class PatternSearchCV(BaseSearchCV):
    """Pattern ("sparse grid") search over a hyper-parameter grid with cross-validation.

    The search of Strack's thesis (Strack 2013, Algorithm 6): start at the grid centre with
    step ``ceil(n/2)``; evaluate the cross pattern (the centre and one step up and down each
    axis); move to the best point of the pattern, or halve the step when the centre is best;
    stop when the step reaches 0. Then restart, up to ``n_restarts`` times, at the point of
    largest uncertainty ``U`` = Manhattan index distance to the nearest evaluated point (ties:
    the first such point in grid order), with step ``min(U, initial step)``, so that its first
    pattern reaches back to the explored region (those points cost nothing: cached). With
    ``restart_probe`` (our rule, not the thesis's) the restart point is evaluated alone first, and
    the restart ends there when it scores no better than the nearest point evaluated before:
    the surface does not rise towards the unexplored region (one fit per fold instead of a
    pattern of up to five points). A restart also
    ends when a point an earlier walk evaluated, within the current step of the restart's best
    point, scores at least as well: the restart is climbing ground already searched (our rule,
    not the thesis's). Every evaluated
    point is cached, so a point is cross-validated once however often the walk meets it. The
    best point is the best of all evaluated points, as in ``GridSearchCV``.

    Choices the thesis leaves open (marked [UNSURE] in the notes): a pattern point outside the
    grid is clipped to the grid's edge (``out_of_grid``); the centre wins ties (a move needs a strictly better
    score); restarts stop early once every grid point is within index distance 1 of an
    evaluated one.

    Parameters
    ----------
    estimator : estimator object
        Any scikit-learn estimator (a classifier, a regressor or a pipeline).
    param_grid : dict of str to sequence, default=None
        The axes of the grid, each a sequence of values in their natural order (the pattern
        steps between neighbours on each axis). ``None`` means gsvm's grid
        ``{"C": 4.0**arange(-2, 6), "gamma": 4.0**arange(-5, 3)}``. Any number of axes works.
    scoring : str, callable, list, tuple or dict, default=None
        As in ``GridSearchCV``. With several metrics, ``refit`` must name the metric that the
        search climbs.
    n_jobs : int, default=None
        Parallel fits through joblib (all fits of one pattern step run at once). Works with any
        joblib backend, e.g. ``joblib.parallel_config(backend="dask")``.
    refit : bool, str or callable, default=True
        Refit the best model on the whole data (``best_estimator_``), as in ``GridSearchCV``.
    cv : int, cross-validation generator or iterable, default=None
        As in ``GridSearchCV`` (an int means stratified k-fold for classifiers). The splits are
        drawn once, so every point is scored on the same folds.
    verbose : int, default=0
        ``>= 1``: one progress line per pattern step (fits done / most fits possible, best score
        so far, elapsed time); ``>= 2``: one line per finished job as well, plus scikit-learn's
        per-fit messages.
    pre_dispatch : int or str, default="2*n_jobs"
        As in ``GridSearchCV``.
    error_score : "raise" or float, default=np.nan
        Score of a failed fit; such a point ranks last and is never moved to.
    return_train_score : bool, default=False
        As in ``GridSearchCV``.
    n_restarts : int, default=1
        Deterministic restarts after the first walk (the thesis does not say how many).
    warm_start : "auto" or bool, default="auto"
        ``"auto"``: warm-started fits when the estimator has a ``warm_start`` parameter and the
        grid has a ``C`` axis (``"C"`` or ``"<step>__C"`` with ``"<step>__warm_start"`` in a
        pipeline); ``True`` requires that; ``False`` fits every point from scratch. Fits of
        one fold that share every parameter but C run in increasing C on one estimator. For
        coresvm's estimators (``CoreSVC``) every other fit starts warm too: from the nearest
        fitted model of the same fold (another gamma), or from another fold's model restricted
        to the rows both folds train on (gsvm's support-vector reuse), and the refit starts
        from the mean of the fold models at the best point; only the search's first fit is
        cold. Their dual is a point of the
        simplex, so any such start is feasible and the fit reaches the same optimum (within
        ``tol``). CoreSVC's warm fits also keep their inner products ``<x_i, x_j>`` (multiclass,
        at least 64 features); the search keeps the latest set once per fold and gives it to the
        fold's next start, whatever its C and gamma.
    out_of_grid : {"clip", "skip"}, default="clip"
        A pattern point off the grid is moved to the grid's edge, or left out. Over the score
        surfaces of ``benchmarks/search_benchmark.py`` "skip" saves 2-3 points per walk but
        makes restarts costlier and missed the bimodal test surface's second peak.
    restart_probe : bool, default=True
        Evaluate a restart point alone first and end the restart there when it scores no
        better than the nearest point evaluated before (see above).

    Attributes
    ----------
    cv_results_ : dict of numpy arrays
        Exactly ``GridSearchCV``'s keys, one row per evaluated point, in evaluation order.
    best_estimator_, best_score_, best_params_, best_index_, scorer_, n_splits_, refit_time_,
    multimetric_ :
        As in ``GridSearchCV``.
    search_path_ : list of dict
        One entry per pattern step: ``run`` (0 = first walk, then restarts), ``center`` (params),
        ``step`` (index step), ``new`` (params evaluated in this step), ``action``
        (``"move"``, ``"shrink"``, ``"joined"`` when a restart reaches an earlier walk's ground
        and ends, or ``"probed"`` when a restart ends at its probe).
    restarts_ : list of dict
        Per restart: ``start`` (params), ``uncertainty`` (index distance to the nearest point
        evaluated before) and ``step``.
    n_fits_ : int
        Fits done by the search (points evaluated x folds), without the refit.
    n_warm_fits_ : int
        How many of them the estimator reports as warm-started (its ``warm_started_``).
    warm_start_ : bool
        Whether the search used warm-started fits.

    Examples
    --------
    >>> from coresvm import CoreSVC
    >>> from coresvm.model_selection import PatternSearchCV
    >>> search = PatternSearchCV(CoreSVC(), cv=5, n_jobs=2).fit(X, y)   # doctest: +SKIP
    >>> search.best_params_, search.best_score_, len(search.cv_results_["params"])  # doctest: +SKIP
    """

    _parameter_constraints: dict = {
        **BaseSearchCV._parameter_constraints,
        "param_grid": [dict, None],
        "n_restarts": [Interval(numbers.Integral, 0, None, closed="left")],
        "warm_start": [StrOptions({"auto"}), "boolean"],
        "out_of_grid": [StrOptions({"clip", "skip"})],
        "restart_probe": ["boolean"],
    }

    def __init__(
        self,
        estimator,
        param_grid: Mapping[str, Sequence] | None = None,
        *,
        scoring=None,
        n_jobs: int | None = None,
        refit=True,
        cv=None,
        verbose: int = 0,
        pre_dispatch="2*n_jobs",
        error_score=np.nan,
        return_train_score: bool = False,
        n_restarts: int = 1,
        warm_start: str | bool = "auto",
        out_of_grid: str = "clip",
        restart_probe: bool = True,
    ):
        super().__init__(
            estimator=estimator,
            scoring=scoring,
            n_jobs=n_jobs,
            refit=refit,
            cv=cv,
            verbose=verbose,
            pre_dispatch=pre_dispatch,
            error_score=error_score,
            return_train_score=return_train_score,
        )
        self.param_grid = param_grid
        self.n_restarts = n_restarts
        self.warm_start = warm_start
        self.out_of_grid = out_of_grid
        self.restart_probe = restart_probe

    # ------------------------------------------------------------------ grid
    def _grid_axes(self) -> list[tuple[str, list]]:
        grid = GSVM_PARAM_GRID if self.param_grid is None else self.param_grid
        if not grid:
            raise ValueError("param_grid must name at least one parameter; got an empty dict")
        axes = []
        for name, values in grid.items():
            if not isinstance(name, str):
                raise ValueError(f"param_grid keys must be parameter names (str); got {name!r}")
            if isinstance(values, str | bytes) or not isinstance(values, Iterable):
                raise ValueError(f"param_grid[{name!r}] must be a sequence of values; got {values!r}")
            values = list(values)
            if not values:
                raise ValueError(f"param_grid[{name!r}] is empty; give at least one value")
            axes.append((name, values))
        return axes

    def _warm_start_keys(self, axes) -> tuple[str, str] | None:
        """(grid axis of C, estimator's warm_start parameter), or None for cold fits."""
        if self.warm_start is False:
            return None
        params = self.estimator.get_params()
        for name, _ in axes:
            if name == "C" or name.endswith("__C"):
                flag = name[:-1] + "warm_start"
                if flag in params:
                    return name, flag
        if self.warm_start is True:
            raise ValueError(
                "warm_start=True needs an estimator with a warm_start parameter and a 'C' axis in param_grid "
                f"(or '<step>__C' with '<step>__warm_start'); got axes {[n for n, _ in axes]} for "
                f"{type(self.estimator).__name__}"
            )
        return None

    # ------------------------------------------------------------------ fit
    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y=None, **params):
        """Run the pattern search and (unless ``refit=False``) refit the best model.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            Training data.
        y : array-like of shape (n_samples,), default=None
            Targets.
        **params : dict
            Passed to the estimator's ``fit``, the scorer and the CV splitter, as in
            ``GridSearchCV.fit``.

        Returns
        -------
        self : PatternSearchCV
        """
        axes = self._grid_axes()
        scorers, refit_metric = self._get_scorers()
        X, y = indexable(X, y)
        params = _check_method_params(X, params=params)
        routed_params = self._get_routed_params_for_fit(params)
        cv = check_cv(self.cv, y, classifier=is_classifier(self.estimator))
        splits = list(cv.split(X, y, **routed_params.splitter.split))
        if not splits:
            raise ValueError(f"cv={self.cv!r} produced no train/test splits")
        self.n_splits_ = len(splits)
        base_estimator = clone(self.estimator)
        warm_keys = self._warm_start_keys(axes)
        self.warm_start_ = warm_keys is not None
        fit_and_score_kwargs = dict(
            scorer=scorers,
            fit_params=routed_params.estimator.fit,
            score_params=routed_params.scorer.score,
            return_train_score=self.return_train_score,
            return_n_test_samples=True,
            return_times=True,
            return_parameters=False,
            error_score=self.error_score,
            verbose=self.verbose,
        )
        max_fits = math.prod(len(v) for _, v in axes) * self.n_splits_
        with Parallel(n_jobs=self.n_jobs, pre_dispatch=self.pre_dispatch, return_as="generator") as parallel:
            evaluator = _CandidateEvaluator(
                search=self, X=X, y=y, splits=splits, base_estimator=base_estimator, warm_keys=warm_keys,
                parallel=parallel, thread_limit=_inner_thread_limit(self.n_jobs),
                fit_and_score_kwargs=fit_and_score_kwargs,
                progress=_Progress(type(self).__name__, max_fits, self.verbose), axes=axes,
            )
            self._axes = axes
            try:
                self._run_search(evaluator)
            finally:
                del self._axes
        results = evaluator.results
        self.n_fits_ = evaluator.n_fits
        self.n_warm_fits_ = evaluator.n_warm_fits
        first_test_score = evaluator.all_out[0]["test_scores"]
        self.multimetric_ = isinstance(first_test_score, dict)
        if callable(self.scoring) and self.multimetric_:
            self._check_refit_for_multimetric(first_test_score)
            refit_metric = self.refit

        if self.refit or not self.multimetric_:
            self.best_index_ = self._select_best_index(self.refit, refit_metric, results)
            if not callable(self.refit):
                self.best_score_ = results[f"mean_test_{refit_metric}"][self.best_index_]
            self.best_params_ = results["params"][self.best_index_]

        if self.refit:
            refit_start = time.time()
            self.best_estimator_ = evaluator.refit_estimator(clone(self.best_params_, safe=False))
            if y is not None:
                self.best_estimator_.fit(X, y, **routed_params.estimator.fit)
            else:
                self.best_estimator_.fit(X, **routed_params.estimator.fit)
            if warm_keys is not None:  # the refitted model keeps the user's setting
                user_warm_start = base_estimator.get_params()[warm_keys[1]]
                self.best_estimator_.set_params(**{warm_keys[1]: user_warm_start})
                release = getattr(self.best_estimator_, "release_kept_rows", None)
                if not user_warm_start and release is not None:
                    release()  # what the refit kept for a next warm fit (coresvm: up to 2 x cache_size)
            self.refit_time_ = time.time() - refit_start
            if hasattr(self.best_estimator_, "feature_names_in_"):
                self.feature_names_in_ = self.best_estimator_.feature_names_in_

        self.scorer_ = getattr(scorers, "_scorers", scorers)
        self.cv_results_ = results
        return self

    # ------------------------------------------------------------------ the pattern search
    def _run_search(self, evaluate_candidates, **_ignored):
        """Algorithm 6 of Strack 2013 plus deterministic restarts; see the class docstring."""
        axes = self._axes
        shape = tuple(len(values) for _, values in axes)
        scores: dict[tuple[int, ...], float] = {}
        self.search_path_, self.restarts_ = [], []

        def params_at(index):
            return {name: values[i] for (name, values), i in zip(axes, index, strict=True)}

        def evaluate(indices):
            new = [i for i in dict.fromkeys(indices) if i not in scores]
            if new:
                results = evaluate_candidates([params_at(i) for i in new])
                means = results[self._climb_key(results)][-len(new):]
                for i, score in zip(new, means, strict=True):
                    scores[i] = float(score) if np.isfinite(score) else -np.inf
            return new

        def walk(run, center, step):
            explored = set(scores)  # points of earlier walks
            probed = []  # the restart point, when evaluated alone: reported with the walk's first step
            if run > 0 and self.restart_probe:
                probed = evaluate([center])
                nearest = min(_distance(q, center) for q in explored)
                if any(scores[q] >= scores[center] for q in explored if _distance(q, center) == nearest):
                    # The restart point scores no better than the explored ground nearest to it:
                    # the surface does not rise towards the unexplored region; no walk (our rule).
                    self.search_path_.append({"run": run, "center": params_at(center), "step": step,
                                              "new": [params_at(center)], "action": "probed"})
                    return
            while step > 0:
                pattern = _cross_pattern(center, step, shape, self.out_of_grid)
                new = evaluate(pattern)
                best = center
                for point in pattern:  # the centre wins ties: a move needs a strictly better score
                    if scores[point] > scores[best]:
                        best = point
                action = "shrink" if best == center else "move"
                if run > 0 and any(scores[q] >= scores[best] for q in explored if _distance(q, best) <= step):
                    action = "joined"  # a restart reached ground an earlier walk already climbed: stop
                self.search_path_.append({"run": run, "center": params_at(center), "step": step,
                                          "new": [params_at(i) for i in probed + new], "action": action})
                probed = []
                if action == "joined":
                    return
                if best == center:
                    step //= 2
                else:
                    center = best

        initial_step = max(1, min((math.ceil(n / 2) for n in shape if n > 1), default=1))
        walk(0, tuple((n - 1) // 2 for n in shape), initial_step)  # thesis: ceil(n/2), 1-based
        for run in range(1, self.n_restarts + 1):
            start, uncertainty = _most_uncertain_point(shape, scores)
            if uncertainty < 2:  # every point is next to an evaluated one: nothing left to explore
                break
            step = min(initial_step, uncertainty)
            self.restarts_.append({"start": params_at(start), "uncertainty": uncertainty, "step": step})
            walk(run, start, step)

    def _cv_results(self, candidate_params: list[dict], n_splits: int, out: list[dict]) -> dict:
        """``cv_results_`` of the points evaluated so far, formatted as ``GridSearchCV``'s (BaseSearchCV's own)."""
        return self._format_results(candidate_params, n_splits, out)

    def _climb_key(self, results) -> str:
        """The cv_results_ column the pattern climbs: the single score, or the refit metric."""
        if "mean_test_score" in results:
            return "mean_test_score"
        if isinstance(self.refit, str) and f"mean_test_{self.refit}" in results:
            return f"mean_test_{self.refit}"
        raise ValueError(
            "PatternSearchCV with several metrics needs refit=<metric name> to know which score to climb; "
            f"got refit={self.refit!r}"
        )


def _distance(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    return sum(abs(i - j) for i, j in zip(a, b, strict=True))


def _cross_pattern(center: tuple[int, ...], step: int, shape: tuple[int, ...],
                   out_of_grid: str = "clip") -> list[tuple[int, ...]]:
    """The centre, then one step down and up along each axis (deduplicated); a point off the grid
    is moved to the grid's edge (``"clip"``) or left out (``"skip"``)."""
    points = [center]
    for axis, n in enumerate(shape):
        for direction in (-1, 1):
            point = list(center)
            point[axis] = center[axis] + direction * step
            if not 0 <= point[axis] < n:
                if out_of_grid == "skip":
                    continue
                point[axis] = min(max(point[axis], 0), n - 1)
            points.append(tuple(point))
    return list(dict.fromkeys(points))


def _most_uncertain_point(shape: tuple[int, ...], evaluated) -> tuple[tuple[int, ...], int]:
    """Grid point maximising U = Manhattan index distance to the nearest evaluated point (Strack 2013,
    sec. 3.3); ties go to the first point in C order of the grid."""
    grid = np.indices(shape).reshape(len(shape), -1).T
    done = np.array(list(evaluated), dtype=np.int64).reshape(-1, len(shape))
    if len(done) == 0:
        return tuple(int(v) for v in grid[0]), int(sum(shape))
    distance = np.abs(grid[:, None, :] - done[None, :, :]).sum(axis=2).min(axis=1)
    best = int(np.argmax(distance))
    return tuple(int(v) for v in grid[best]), int(distance[best])


# ---------------------------------------------------------------------- evaluation of candidates
def _inner_thread_limit(n_jobs) -> int | None:
    """Threads per fit when fits run in parallel: the process's threads (its cores, or fewer when it runs in a
    joblib or Dask worker: :func:`~coresvm.kernels.process_kernel_threads`) // parallel jobs (None: no limit)."""
    workers = effective_n_jobs(n_jobs)
    if workers <= 1:
        return None
    return max(1, process_kernel_threads() // workers)


@contextmanager
def _limited_threads(n_threads: int | None):
    """Hold the kernel products, Numba and the BLAS/OpenMP pools to n_threads inside one job (in the worker)."""
    if n_threads is None:
        yield
        return
    with limit_kernel_threads(n_threads), _limited_blas(n_threads):
        yield


_JOB_LIMIT = ProcessWideLimit()


def _limited_blas(n_threads: int):
    """Hold the BLAS/OpenMP pools to ``n_threads`` while any job runs in this process (the first job's limit; the
    last one out restores the original)."""
    return _JOB_LIMIT.held(n_threads)


def _fit_candidates(estimator, X, y, train, test, parameter_list, split_progress, thread_limit, kwargs):
    """Fit and score one estimator on one split for each parameter set, in order.

    With ``estimator.warm_start=True`` each fit starts from the previous one. A failed fit is
    not used as a start: the next fit starts from a fresh clone. Returns (outputs, estimator,
    number of fits that the estimator reports as warm-started).
    """
    outputs, n_warm = [], 0
    with _limited_threads(thread_limit), quiet_degenerate_kernel():  # the refit warns for the chosen parameters
        for parameters in parameter_list:
            out = _fit_and_score(estimator, X, y, train=train, test=test, parameters=parameters,
                                 split_progress=split_progress, **kwargs)
            outputs.append(out)
            if out["fit_error"] is not None:
                estimator = clone(estimator)
            else:
                n_warm += bool(getattr(estimator, "warm_started_", False))
    return outputs, estimator, n_warm


def _support_size(state: WarmStart | None) -> float:
    """The number of support vectors a warm start from ``state`` begins with (all its sub-problems', before a move
    to other rows drops some); infinite without a state (the fit starts cold)."""
    return math.inf if state is None else len(state.rows)


def _movable(estimator) -> bool:
    """Whether a fit of ``estimator`` can start another on other rows and other kernel parameters.

    coresvm's estimators can: they hand their solution over as a :class:`~coresvm.warm_start.WarmStart`
    (``warm_start_state`` / ``set_warm_start_state``), whose dual is a point of the simplex, a feasible start
    for any C, gamma and training rows (:meth:`~coresvm.warm_start.WarmStart.moved_to_rows`).  Other
    estimators' warm starts are only trusted along C on the same rows.
    """
    return all(callable(getattr(estimator, name, None)) for name in ("warm_start_state", "set_warm_start_state"))


class _CandidateEvaluator:
    """``evaluate_candidates`` of ``PatternSearchCV``: cross-validates a batch of parameter sets
    on the fixed splits and returns all results so far, formatted as ``cv_results_``.

    Cold: one job per (point, split), on a fresh clone.

    Warm, coresvm's estimators (their dual is a feasible start at any C, gamma and rows): one job per
    (point, split) too, each continuing from the fit nearest to it when the batch starts
    (``self.warm_models`` keeps every fit's :class:`~coresvm.warm_start.WarmStart`, handed to a shallow copy of
    one unfitted estimator, ``self.warm_template``), in this order of preference:

    1. a model of the same split, nearest in grid index distance (ties: fewer steps off the C axis, then
       fewer support vectors: letter's fits at gamma 4 started from gamma 1 in 0.09 s, from gamma 16 in 0.17 s).
       At the same gamma the fit also takes over kept kernel rows of that gamma on the split (only C
       changes; :meth:`_take_kernel_rows`); at another gamma the old dual is still a feasible start and
       its support set is close, and the fit borrows kept rows no later fit is expected to read, for
       their memory (:meth:`_spare_kernel_rows`);
    2. the nearest model of another split, restricted to the rows both splits train on (gsvm's
       support-vector reuse across folds). To make this possible the very first fit of a search
       (the first candidate, a pattern's centre, on split 0) runs alone, before the others.

    A pattern's cross around C0 fits C0 / 4^s and C0 * 4^s: each starts from the centre, s steps away
    (one chain through both in increasing C would move 2s from the first to the second).  With one
    job at a time (``n_jobs=1``) the jobs run here, one after the other, each start chosen when the
    jobs before it are kept; otherwise every start of a batch is chosen before it runs.

    Warm, other estimators with ``warm_start``: one job per (split, all parameters but C), fitting its
    C values in increasing order on one estimator, continuing from the model this (split, group)
    fitted last (``self.warm_models[(split, group key)]``); otherwise cold.
    """

    def __init__(self, search, X, y, splits, base_estimator, warm_keys, parallel, thread_limit,
                 fit_and_score_kwargs, progress, axes=None):
        self.search, self.X, self.y, self.splits = search, X, y, splits
        self.base_estimator, self.warm_keys = base_estimator, warm_keys
        self.parallel, self.thread_limit, self.kwargs = parallel, thread_limit, fit_and_score_kwargs
        self.progress = progress
        self.axes = axes or []
        self.transfer = warm_keys is not None and _movable(base_estimator)
        self.all_params: list[dict] = []
        self.all_out: list[dict] = []
        # transfer: (split, point key) -> (params, its fit's WarmStart or None); else (split, group key) -> (params of
        # its last fit, model)
        self.warm_models: dict = {}
        self.dot_rows: dict = {}  # split -> the latest kept inner products of coresvm's estimators (see _keep)
        cache_size = getattr(base_estimator, "cache_size", 0)  # MB, or 'auto' (coresvm's estimators)
        self.cache_bytes = cache_budgets(cache_size)[0] if isinstance(cache_size, (str, int, float)) else 0
        # coresvm's fits one after the other in this process when they would run one at a time anyway: each starts
        # from the models and kernel rows of the jobs before it, in the same batch too (no joblib dispatch either).
        self.one_at_a_time = self.transfer and effective_n_jobs(getattr(parallel, "n_jobs", 1)) == 1
        # ... and then read the inner products of all the search's rows, computed once here (each fold's are a
        # block); parallel jobs' processes would each compute them for one fit: they keep theirs per fold instead.
        share = getattr(base_estimator, "shared_inner_products", None) if self.one_at_a_time else None
        self.shared_dots = share(X) if share is not None else None
        # transfer: every fit (and the refit) runs on a shallow copy of this one, given its start
        # (set_warm_start_state): the copies share its parameters' objects, as the fitted models they once
        # were copies of did (a RandomState's draws run on through the search).
        self.warm_template = clone(base_estimator).set_params(**{warm_keys[1]: True}) if self.transfer else None
        self.results: dict = {}
        self.n_fits = 0
        self.n_warm_fits = 0
        self._row_positions: dict[int, np.ndarray] = {}
        self._pending: list = []  # the jobs of the running _run call not started yet (their kernels' rows are kept)
        self._best_params: dict | None = None  # the best point of the batches before (likely the next centre)

    def _jobs(self, candidates, done=frozenset()):
        """(output positions, split index, group or point key, parameter list) per job, leaving out the output
        positions in ``done``."""
        n_splits = len(self.splits)
        if self.warm_keys is None or self.transfer:
            return [([c * n_splits + s], s, self._point_key(params) if self.transfer else None, [params])
                    for c, params in enumerate(candidates) for s in range(n_splits) if c * n_splits + s not in done]
        c_axis, _ = self.warm_keys
        groups: dict[str, list[int]] = {}
        for c, params in enumerate(candidates):
            groups.setdefault(self._group_key(params), []).append(c)
        jobs = []
        for s in range(n_splits):
            for key, members in groups.items():
                members = sorted(members, key=lambda c: candidates[c][c_axis])
                jobs.append(([c * n_splits + s for c in members], s, key, [candidates[c] for c in members]))
        return jobs

    @staticmethod
    def _point_key(params) -> str:
        return repr(sorted(params.items()))

    def _preference(self, split, first_params):
        """Sort key of the kept states as starts of a fit at ``first_params`` on ``split``: same split first, then
        the nearest in grid index distance, then the fewest steps off the C axis, then the fewest support vectors
        (:func:`_support_size`)."""
        def preference(item):
            (other_split, _), (params, state) = item
            other, along_c = self._grid_distance(params, first_params)
            return (other_split != split, other + along_c, other, _support_size(state))

        return preference

    def _group_key(self, params) -> str:
        return repr(sorted((k, v) for k, v in params.items() if k != self.warm_keys[0]))

    def _same_kernel(self, a: dict, b: dict) -> bool:
        """Whether two points of the grid differ in C at most (the same gamma and other kernel parameters; those
        missing from either point are not compared: a fit re-checks kept rows' kernel before reading them,
        :meth:`~coresvm.warm_start.KeptKernelRows.computed_for`, else uses them as memory only)."""
        return self._grid_distance(a, b)[0] == 0

    def _grid_distance(self, a: dict, b: dict) -> tuple[int, int]:
        """(index distance on the non-C axes, on the C axis) between two points of the grid."""
        other, along_c = 0, 0
        for name, values in self.axes:
            if name in a and name in b and a[name] != b[name]:
                step = abs(_index_of(values, a[name]) - _index_of(values, b[name]))
                if name == self.warm_keys[0]:
                    along_c += step
                else:
                    other += step
        return other, along_c

    def _rows_of_split(self, split: int) -> np.ndarray:
        """positions[i] = row of split's training set holding data row i, or -1."""
        if split not in self._row_positions:
            train = self.splits[split][0]
            positions = np.full(_num_samples(self.X), -1, dtype=np.int64)
            positions[train] = np.arange(len(train))
            self._row_positions[split] = positions
        return self._row_positions[split]

    def _start_estimator(self, split, key, first_params):
        if not self.transfer:
            return self._nearest_start(split, key, first_params)
        start = copy.copy(self.warm_template)
        state = self._start_state(split, first_params) if self.warm_models else None
        if self.shared_dots is not None:
            start.lend_inner_products(self.shared_dots.on_rows(self.splits[split][0]))
        elif split in self.dot_rows and state is not None:
            state.inner_products = self.dot_rows[split]  # the fold's inner products: any gamma, any C
        if state is not None and state.kernel_rows is None:
            state.kernel_rows = self._take_kernel_rows(split, first_params) or self._spare_kernel_rows(split)
        return start.set_warm_start_state(state)

    def _take_kernel_rows(self, split, params):
        """The kernel rows kept latest on ``split`` at the kernel of ``params`` (any C), taken from their state: a
        fit at the same gamma computes none of their rows, whichever state it starts from."""
        same_kernel = [state for other, kept_params, state in self._row_holders()
                       if other == split and self._same_kernel(kept_params, params)]
        if not same_kernel:
            return None
        rows, same_kernel[-1].kernel_rows = same_kernel[-1].kernel_rows, None
        return rows

    def _spare_kernel_rows(self, split):
        """Kernel rows for a fit that finds none at its kernel: the rows kept longest on ``split`` that no later
        fit will read (:meth:`_lendable`), taken from their state for their memory (the fit overwrites them).
        The first touch of fresh memory is slow (~1.5 ms per MB on the benchmark VM: as much as computing a USPS
        kernel row), and glibc gives large arrays fresh pages each time.  None when every holder's rows may be
        read later."""
        holders = self._row_holders()
        for (other, _, state), lendable in zip(holders, self._lendable(holders), strict=True):
            if other == split and lendable:
                spare, state.kernel_rows = state.kernel_rows, None
                return spare
        return None

    def _lendable(self, holders: list[tuple[int, dict, object]]) -> list[bool]:
        """Per holder (:meth:`_row_holders`), whether no later fit will read its rows: a later holder on its
        split has rows at its kernel (:meth:`_take_kernel_rows` takes the latest), or no fit is expected there
        (:meth:`_expected`)."""
        return [any(other == split and self._same_kernel(later, params)
                    for other, later, _ in holders[k + 1:]) or not self._expected(split, params)
                for k, (split, params, _) in enumerate(holders)]

    def _expected(self, split, params) -> bool:
        """Whether a later fit on ``split`` is expected at the kernel of ``params`` (any C): a job of the running
        step not started yet (known with one job at a time; with parallel jobs every start is chosen before any
        job runs), or the best point of the steps before (the pattern's next centre, as a rule)."""
        expected = [parameter_list[0] for _, other, _, parameter_list in self._pending if other == split]
        if self._best_params is not None:
            expected.append(self._best_params)
        return any(self._same_kernel(params, point) for point in expected)

    def _keep(self, split, key, params, model) -> None:
        """Keep a job's last fit as a start for later fits: for coresvm's estimators its
        :class:`~coresvm.warm_start.WarmStart` only (the model itself, its prediction arrays included, is
        dropped: a search never gives it out; kept, they made each new fit's arrays fresh memory, whose first
        touch costs page faults: letter at 5,000 rows, 25-40 thousand faults over a warm search against ~0.3-13
        thousand cold).  Its inner products (the same for every gamma and C of a fold) are kept once per fold,
        the latest per sub-problem (a fit carries forward the rows it used): one copy per fold, not one per
        state.  Its kernel rows stay with it, for the first later fit at the same kernel on the split (or one
        that borrows them as memory, :meth:`_spare_kernel_rows`); all states' together stay within
        :meth:`_rows_budget`, dropped oldest first: those no later fit will read (:meth:`_lendable`), then the
        others."""
        state = model.warm_start_state() if self.transfer else model
        self.warm_models.pop((split, key), None)  # re-inserted last: dicts keep insertion order
        self.warm_models[(split, key)] = (params, state)
        if not self.transfer:
            return
        rows = None if state is None else state.inner_products
        if rows is not None:
            older = self.dot_rows.get(split)
            if older is not None and older.holds(rows.X):  # the latest per sub-problem (a fit that took kept
                rows.rows = {**older.rows, **rows.rows}  # kernel rows computed no inner products for it)
            self.dot_rows[split] = rows
            state.inner_products = None
        holders = self._row_holders()
        budget = self._rows_budget(holders)
        total = sum(kept.kept_bytes for _, _, kept in holders)
        lendable = self._lendable(holders)
        older = sorted(range(len(holders) - 1), key=lambda k: not lendable[k])  # stable: the oldest first
        for old in [holders[k][2] for k in older]:
            if total <= budget:
                break
            total -= old.kept_bytes
            old.kernel_rows = None
        if total > budget and state is not None:
            state.kernel_rows = None

    def _row_holders(self) -> list[tuple[int, dict, WarmStart]]:
        """(split, parameters, state) of the kept states that hold kernel rows, the least recently kept first."""
        return [(split, params, state) for (split, _), (params, state) in self.warm_models.items()
                if self.transfer and state is not None and state.kept_bytes > 0]

    def _rows_budget(self, holders: list[tuple[int, dict, WarmStart]]) -> int:
        """Bytes of kernel rows kept over all states (``holders``: :meth:`_row_holders`): ``2 * n_splits`` times
        the largest fit's rows (on average, per split, those of the best point's kernel and a spare to write the
        next kernel's rows into), each fit's within ``cache_size``, so at most ``2 * n_splits * cache_size``;
        at least ``cache_size``."""
        largest = max((state.kept_bytes for _, _, state in holders), default=0)
        return max(self.cache_bytes, 2 * len(self.splits) * largest)

    def _nearest_start(self, split, key, first_params):
        """The estimator of a job of an estimator that cannot start across kernels and rows (not ``transfer``): a
        fresh clone, or the model the job's (split, group) fitted last."""
        if key is None:
            return clone(self.base_estimator)
        if (split, key) in self.warm_models:
            return self.warm_models.pop((split, key))[1]  # refitted by the job, kept again after it
        return clone(self.base_estimator).set_params(**{self.warm_keys[1]: True})

    def _start_state(self, split, first_params) -> WarmStart | None:
        """The start of a fit at ``first_params`` on ``split`` (``transfer``): the kept state first in
        :meth:`_preference`, moved to ``split``'s rows when it is another split's."""
        (other_split, _), (params, state) = min(self.warm_models.items(), key=self._preference(split, first_params))
        if state is None:
            return None
        if other_split != split:
            return state.moved_to_rows(self._rows_of_split(split)[self.splits[other_split][0]])
        # A shallow copy: a fit reads the state's arrays and never writes into them, so the kept state is unchanged.
        # Kept kernel rows are written by the next fit: they go to the first fit at the same kernel, the copy keeps
        # none.
        start = replace(state, kernel_rows=None)
        if self._same_kernel(params, first_params):
            start.kernel_rows, state.kernel_rows = state.kernel_rows, None
        return start

    def refit_estimator(self, best_params: dict):
        """The estimator to refit on all rows: for coresvm's estimators, warm-started from the mean of the
        fold solutions at ``best_params`` (:meth:`~coresvm.warm_start.WarmStart.averaged_with`), or from the fold
        solution nearest to it when fewer than two folds have one there (every row a fold trained on is a row of
        the whole set)."""
        if not (self.transfer and self.warm_models):
            return clone(self.base_estimator).set_params(**best_params)
        self.dot_rows.clear()  # the refit reads none of the folds' kept rows: free them before it runs
        for _, _, kept in self._row_holders():
            kept.kernel_rows = None
        by_distance = sorted(((sum(self._grid_distance(params, best_params)), split, state)
                              for (split, _), (params, state) in self.warm_models.items()), key=lambda entry: entry[:2])
        nearest = [(split, state) for distance, split, state in by_distance if distance == 0] or [by_distance[0][1:]]
        moved = [None if state is None else state.moved_to_rows(np.asarray(self.splits[split][0]))
                 for split, state in nearest]
        state = moved[0].averaged_with(moved[1:]) if len(moved) >= 2 and moved[0] is not None else moved[0]
        start = copy.copy(self.warm_template).set_params(**best_params).set_warm_start_state(state)
        if self.shared_dots is not None:
            start.lend_inner_products(self.shared_dots.on_rows(np.arange(_num_samples(self.X))))
        return start

    def _run(self, jobs, out):
        kwargs = {**self.kwargs, "return_estimator": False}
        n_splits = len(self.splits)

        def arguments(job):
            _, split, key, parameter_list = job
            return (self._start_estimator(split, key, parameter_list[0]), self.X, self.y, *self.splits[split],
                    parameter_list, (split, n_splits), self.thread_limit, kwargs)

        def each_job():
            try:
                for k, job in enumerate(jobs):
                    self._pending = jobs[k + 1:]
                    yield job
            finally:
                self._pending = []

        if self.one_at_a_time:  # here, each job's start chosen when the jobs before it are kept (lazily, by zip)
            results = (_fit_candidates(*arguments(job)) for job in each_job())
        else:  # every start chosen before the batch runs
            results = self.parallel([delayed(_fit_candidates)(*arguments(job)) for job in each_job()])
        results = iter(results)
        # Not zip: its reused result tuple would hold each job's model while the next job runs (one at a time).
        for positions, split, key, parameter_list in jobs:
            outputs, model, n_warm = next(results)
            for position, output in zip(positions, outputs, strict=True):
                out[position] = output
            if key is not None and outputs[-1]["fit_error"] is None:
                self._keep(split, key, parameter_list[-1], model)
            del model  # coresvm's: only its state is kept, the model is freed before the next job runs
            self.n_fits += len(outputs)
            self.n_warm_fits += n_warm
            self.progress.job_done(self.n_fits, len(self.all_params) + len(out) // n_splits)
        for _ in results:  # as zip(strict=True): joblib's generator ends, no task left behind
            raise RuntimeError("more results than jobs")

    def __call__(self, candidate_params) -> dict:
        candidates = list(candidate_params)
        n_splits = len(self.splits)
        out: list[dict | None] = [None] * (len(candidates) * n_splits)
        done: set[int] = set()
        if self.transfer and candidates:
            # The search's first fit (the first candidate: a pattern's centre, nearest to the others) runs alone,
            # on the first split, so that every other job can start from it; then its fits on the other splits, so
            # that each split's other jobs start from a model of their own split (with its kept rows).
            key = self._point_key(candidates[0])
            if not self.warm_models:
                self._run([([0], 0, key, [candidates[0]])], out)
                done.add(0)
            fitted_splits = {split for split, _ in self.warm_models}
            first_fits = [([s], s, key, [candidates[0]]) for s in range(n_splits) if s not in fitted_splits | done]
            self._run(first_fits, out)
            done.update(positions[0] for positions, *_ in first_fits)
        self._run(self._jobs(candidates, frozenset(done)), out)

        _warn_or_raise_about_fit_failures(out, self.search.error_score)
        if callable(self.search.scoring):
            _insert_error_scores(out, self.search.error_score)
        self.all_params.extend(candidates)
        self.all_out.extend(out)
        self.results = self.search._cv_results(self.all_params, n_splits, self.all_out)
        climb_key = self.search._climb_key(self.results)
        best = _best_index(self.results[climb_key])
        if best is not None:
            self._best_params = self.all_params[best]
        self.progress.batch_done(self.n_fits, self.results, climb_key)
        return self.results


def _best_index(scores) -> int | None:
    """Position of the highest finite score, or None when there is none."""
    scores = np.asarray(scores, dtype=float)
    if not np.isfinite(scores).any():
        return None
    return int(np.argmax(np.where(np.isfinite(scores), scores, -np.inf)))


def _index_of(values: list, value) -> int:
    for i, v in enumerate(values):
        if v is value or v == value:
            return i
    raise ValueError(f"{value!r} is not on the grid axis {values!r}")


class _Progress:
    """Progress lines for verbose searches: fits done / most fits possible, best so far, elapsed."""

    def __init__(self, label: str, max_fits: int, verbose: int):
        self.label, self.max_fits, self.verbose = label, max_fits, verbose
        self.start = time.perf_counter()
        self.best = ""

    def _line(self, text: str) -> None:
        elapsed = time.perf_counter() - self.start
        print(f"[{self.label}] {text}{self.best}, {elapsed:.1f} s", file=sys.stdout, flush=True)

    def job_done(self, n_fits: int, n_points: int) -> None:
        if self.verbose >= 2:
            self._line(f"fits {n_fits}/{self.max_fits} max, {n_points} points")

    def batch_done(self, n_fits: int, results: dict, climb_key: str) -> None:
        scores = np.asarray(results[climb_key], dtype=float)
        best = _best_index(scores)
        if best is not None:
            shown = ", ".join(f"{k}={v:g}" if isinstance(v, numbers.Real) else f"{k}={v!r}"
                              for k, v in results["params"][best].items())
            self.best = f", best {scores[best]:.4f} at {shown}"
        if self.verbose >= 1:
            self._line(f"fits {n_fits}/{self.max_fits} max, {len(scores)} points")


# ---------------------------------------------------------------------- nested cross-validation
def _folds(cv, estimator, random_state):
    """An int means stratified (classifiers) shuffled k-fold: gsvm's "fair" fold assignment;
    shuffled because LIBSVM files are often ordered by class or source."""
    if isinstance(cv, numbers.Integral) and not isinstance(cv, bool):
        if cv < 2:
            raise ValueError(f"the number of folds must be >= 2; got {cv}")
        splitter = StratifiedKFold if is_classifier(estimator) else KFold
        return splitter(n_splits=int(cv), shuffle=True, random_state=random_state)
    return cv


def _make_search(search, estimator, param_grid, inner_cv, scoring, n_jobs, verbose):
    if isinstance(search, str):
        if search == "pattern":
            return PatternSearchCV(estimator, param_grid, cv=inner_cv, scoring=scoring, n_jobs=n_jobs,
                                   verbose=verbose)
        if search == "grid":
            from sklearn.model_selection import GridSearchCV

            return GridSearchCV(estimator, param_grid or GSVM_PARAM_GRID, cv=inner_cv, scoring=scoring,
                                n_jobs=n_jobs, verbose=verbose)
        raise ValueError(f"search must be 'pattern', 'grid' or a search object such as GridSearchCV(...); "
                         f"got {search!r}")
    if not hasattr(search, "fit") or "cv" not in search.get_params(deep=False):
        raise ValueError(f"search must be 'pattern', 'grid' or a search object with a cv parameter; got {search!r}")
    if param_grid is not None:
        raise ValueError("param_grid is only used with search='pattern' or 'grid'; set it on the search object")
    settings = {"cv": inner_cv, "refit": True}
    if estimator is not None:
        settings["estimator"] = estimator
    return clone(search).set_params(**settings)


def nested_cross_validate(
    estimator,
    X,
    y,
    *,
    search="pattern",
    param_grid: Mapping[str, Sequence] | None = None,
    outer_cv=5,
    inner_cv=5,
    scoring=None,
    n_jobs: int | None = None,
    random_state: int | None = 0,
    return_estimator: bool = False,
    verbose: int = 0,
) -> dict:
    """Nested (double) cross-validation: the thesis's protocol for an unbiased accuracy estimate.

    For each outer fold (Strack 2013, Section 7.1.1): a hyper-parameter search with ``inner_cv``
    folds on the outer training part only, a refit of the best parameters on that whole part,
    and a test on the held-out part, which the search never sees.

    Parameters
    ----------
    estimator : estimator object
        The model to tune (e.g. ``CoreSVC()``); may be None when ``search`` is an object that
        already holds it.
    X : array-like or sparse matrix of shape (n_samples, n_features)
    y : array-like of shape (n_samples,)
    search : "pattern", "grid" or a search object, default="pattern"
        ``"pattern"``: ``PatternSearchCV``; ``"grid"``: scikit-learn's ``GridSearchCV``, both over
        ``param_grid`` (default gsvm's 8x8 grid of C and gamma). A search object (e.g.
        ``PatternSearchCV(..., n_restarts=0)``) is cloned, and its ``cv`` is set to the inner
        folds, ``refit`` to True and its estimator to ``estimator`` (if not None).
    param_grid : dict, default=None
        The grid for ``search="pattern"`` or ``"grid"``.
    outer_cv, inner_cv : int or cross-validation generator, default=5
        An int k means stratified k-fold (plain k-fold for regressors), shuffled with
        ``random_state``, as gsvm's "fair" folds.
    scoring : str or callable, default=None
        One metric, for the inner search and the outer test (None: the estimator's ``score``).
    n_jobs : int, default=None
        Parallel fits inside each search.
    random_state : int or None, default=0
        Shuffling of the folds made from ints.
    return_estimator : bool, default=False
        Also return each outer fold's refitted best model.
    verbose : int, default=0
        Passed to the searches; ``>= 1`` also prints one line per outer fold.

    Returns
    -------
    dict
        Per outer fold (arrays or lists of length ``n_outer``): ``test_score``, ``best_params``,
        ``inner_score`` (the search's best mean CV score), ``n_fits`` (fits of the search, where
        known, else -1), ``search_time`` (seconds of the search without the refit), ``fit_time``
        (the refit on the outer training part), ``score_time``, ``train_indices``,
        ``test_indices``; and ``estimator`` if asked.
    """
    if isinstance(scoring, list | tuple | set | dict):
        raise ValueError("nested_cross_validate takes one scoring metric (a str or a callable); "
                         f"got {scoring!r}")
    template_estimator = estimator if estimator is not None else getattr(search, "estimator", None)
    if template_estimator is None:
        raise ValueError("estimator is None and search holds no estimator")
    X, y = indexable(X, y)
    classifier = is_classifier(template_estimator)
    outer = check_cv(_folds(outer_cv, template_estimator, random_state), y, classifier=classifier)
    inner = _folds(inner_cv, template_estimator, random_state)
    template = _make_search(search, estimator, param_grid, inner, scoring, n_jobs, verbose)
    scorer = check_scoring(template_estimator, scoring)
    keys = ("test_score", "inner_score", "n_fits", "search_time", "fit_time", "score_time")
    results: dict[str, list] = {k: [] for k in (*keys, "best_params", "train_indices", "test_indices")}
    if return_estimator:
        results["estimator"] = []
    for fold, (train, test) in enumerate(outer.split(X, y)):
        X_train, y_train = _subset(X, train), _subset(y, train)
        search_obj = clone(template)
        start = time.perf_counter()
        search_obj.fit(X_train, y_train)
        total = time.perf_counter() - start
        fit_time = float(getattr(search_obj, "refit_time_", 0.0))
        start = time.perf_counter()
        score = float(scorer(search_obj.best_estimator_, _subset(X, test), _subset(y, test)))
        results["score_time"].append(time.perf_counter() - start)
        results["test_score"].append(score)
        results["inner_score"].append(float(search_obj.best_score_))
        results["n_fits"].append(_fits_done(search_obj))
        results["search_time"].append(total - fit_time)
        results["fit_time"].append(fit_time)
        results["best_params"].append(search_obj.best_params_)
        results["train_indices"].append(train)
        results["test_indices"].append(test)
        if return_estimator:
            results["estimator"].append(search_obj.best_estimator_)
        if verbose:
            print(f"[nested_cross_validate] outer fold {fold + 1}: {search_obj.best_params_}, inner "
                  f"{search_obj.best_score_:.4f}, test {score:.4f}, search {total - fit_time:.1f} s, "
                  f"refit {fit_time:.1f} s", flush=True)
    for key in keys:
        results[key] = np.asarray(results[key])
    return results


def _fits_done(search) -> int:
    """Fits a fitted search ran (without the refit), or -1 if it does not say."""
    if hasattr(search, "n_fits_"):
        return int(search.n_fits_)
    if hasattr(search, "cv_results_") and hasattr(search, "n_splits_"):
        return len(search.cv_results_["params"]) * int(search.n_splits_)
    return -1


def _subset(data, indices):
    if hasattr(data, "iloc"):
        return data.iloc[indices]
    return data[indices]
