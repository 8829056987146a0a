"""CoreSVC's warm starts: what a fit leaves for the next one and how the next one starts from it.

:class:`WarmStartMixin` gives :class:`~coresvm.CoreSVC` the warm-start protocol
(:meth:`~WarmStartMixin.warm_start_state`, :meth:`~WarmStartMixin.set_warm_start_state`, the kept kernel rows
and inner products a hyper-parameter search lends or reuses) and the rules that decide, per sub-problem, what
a warm fit starts from.
"""

from __future__ import annotations

import numba
import numpy as np

from .cache import cache_budgets
from .multiclass import SubProblem
from .solvers.dense import NO_DOT_ROWS, NO_KERNEL_ROWS
from .warm_start import (
    DOT_REUSE_MIN_FEATURES,
    KeptInnerProducts,
    KeptKernelRows,
    SharedInnerProducts,
    WarmStart,
    all_inner_products,
)

# A warm start at another kernel, or at a C at least HEAVY_START_C_RATIO times larger without kept kernel rows,
# starts sub-problems of at least HEAVY_START_MIN_POINTS points from their heavy old support vectors only
# (CoreSVC._heavy_starts).
HEAVY_START_MIN_POINTS = 1000
HEAVY_START_C_RATIO = 4.0
# The fitted attributes a warm start reads (CoreSVC.warm_start_state); model files store them.
WARM_START_ATTRIBUTES = ("_warm_rows", "_warm_alpha", "_warm_offsets", "_warm_support_classes", "_fitted_multiclass",
                          "support_", "support_vectors_", "classes_")




class WarmStartMixin:
    """The warm-start methods of :class:`~coresvm.CoreSVC` (it sets ``_kernel_spec``, ``C``, ``warm_start``,
    ``cache_size`` and the fitted attributes these read)."""

    def _start_reuse(self, X, problems: list[SubProblem], state: WarmStart | None, previous: tuple | None) -> None:
        """Set up what this fit's sub-problems read from the last fit (or a search) and keep for the next: warm
        starts (``problem.init``), kept kernel rows and inner products in, and where to keep them out.  The
        per-fit attributes set here are removed by :meth:`_end_reuse`."""
        self._rows_in = self._previous_kernel_rows(X, problems, state, reuse_values=previous is not None)
        self._blend_start = previous is not None and self._expects_more_support(state)
        if previous is not None:
            attach_warm_starts(problems, previous, self._heavy_starts(X, problems, state, self._rows_in))
        # A search's inner products of all its rows, when it lends them (model_selection): every sub-problem reads
        # its own from there, so this fit keeps none of its own.
        self._search_rows = self._shared_dot_positions(X)
        self._dots_in = (self._previous_dot_rows(X, problems, state)
                         if previous is not None and self._search_rows is None else {})
        self._dots_out = ({} if self.warm_start and self._search_rows is None
                          and X.shape[1] >= DOT_REUSE_MIN_FEATURES else None)
        # A fit that reads kept inner products is one of a sequence (a search): it completes each sub-problem's
        # to all of them once, when they all fit the memory budget, so the fits after it compute none.
        self._complete_dots = bool(self._dots_in) and self._dots_out is not None and (
            sum(len(problem.rows) ** 2 for problem in problems) * 8 <= cache_budgets(self.cache_size)[0])
        self._rows_out = {} if self.warm_start else None
        self._kernel_rows = None  # taken over by this fit (or stale)

    def _end_reuse(self) -> tuple[dict | None, dict | None]:
        """Remove :meth:`_start_reuse`'s per-fit attributes (also when the fit failed); return the inner products
        and kernel rows the sub-problems kept (``None``: none were to be kept)."""
        dots_out, rows_out = self._dots_out, self._rows_out
        del (self._dots_in, self._dots_out, self._rows_in, self._rows_out, self._complete_dots, self._search_rows,
             self._blend_start)
        self.__dict__.pop("_search_dots", None)  # lent for this fit only (the search lends it to each fit)
        return dots_out, rows_out

    def _reused_rows(self, X, problem: SubProblem) -> tuple[tuple, tuple, bool]:
        """What a sub-problem on the compiled small-problem path reads from earlier fits: kept kernel rows, and
        inner products (kept, lent by a search, or all of them when this fit completes them); and whether the
        solve is to keep its own inner products for the next fit (:meth:`_keep_rows`)."""
        kept_rows = self._rows_in.pop(problem.index, NO_KERNEL_ROWS)
        dots_in = self._dots_in.get(problem.index, NO_DOT_ROWS)
        if self._search_rows is not None:
            dots_in = self._search_dots.dot_rows(self._search_rows[problem.rows])
        elif self._complete_dots and len(dots_in[0]) < len(problem.rows):
            dots_in = all_inner_products(X, problem.rows)
        # Kept kernel rows need no inner products, nor do complete ones; the old ones stay valid for the next
        # fit (same X).
        keep_dots = (self._dots_out is not None and not holds_kernel_values(kept_rows)
                     and len(dots_in[0]) < len(problem.rows))
        return kept_rows, dots_in, keep_dots

    def _keep_rows(self, problem: SubProblem, result, dots_in: tuple, keep_dots: bool) -> None:
        """Record a sub-problem's inner products and kernel rows for the next fit (:meth:`_keep_for_next_fit`)."""
        if keep_dots:
            self._dots_out[problem.index] = (problem.rows, *result.dot_rows)
        elif self._dots_out is not None and len(dots_in[0]):
            self._dots_out[problem.index] = (problem.rows, *dots_in)
        if self._rows_out is not None:
            self._rows_out[problem.index] = (problem.rows, problem.signs, *result.kernel_rows)

    def _keep_for_next_fit(self, X, dots_out: dict | None, rows_out: dict | None) -> None:
        """Keep the sub-problems' inner products and kernel rows for the next warm fit, within ``cache_size``."""
        budget = cache_budgets(self.cache_size)[0]
        kept_bytes = sum(dots.nbytes for _, _, dots in dots_out.values()) if dots_out else 0
        self._dot_rows = KeptInnerProducts(X, dots_out) if dots_out and kept_bytes <= budget else None
        kernel_rows = KeptKernelRows(X, self._kernel_spec, self.bias_rule, rows_out or {})
        self._kernel_rows = kernel_rows if rows_out and kernel_rows.nbytes <= budget else None

    def warm_start_state(self) -> WarmStart | None:
        """What the next ``warm_start=True`` fit starts from: the state given by :meth:`set_warm_start_state`, else
        the one the last fit left (also that of a loaded model file), or None (none, or a ``multiclass='joint'``
        fit).

        The state refers to this model's arrays (no copy) and to the kernel rows and inner products it keeps
        for the next fit, which go to the first fit that starts from it.

        Returns
        -------
        WarmStart or None
        """
        if "_warm_start_in" in self.__dict__:
            return self._warm_start_in
        if not all(hasattr(self, name) for name in WARM_START_ATTRIBUTES):
            return None
        return WarmStart(
            rows=self._warm_rows, weights=self._warm_alpha, offsets=self._warm_offsets, support=self.support_,
            support_vectors=self.support_vectors_, support_classes=self._warm_support_classes, classes=self.classes_,
            multiclass=self._fitted_multiclass, C=getattr(self, "_warm_C", None),
            kernel=getattr(self, "_kernel_spec", None), kernel_rows=getattr(self, "_kernel_rows", None),
            inner_products=getattr(self, "_dot_rows", None),
        )

    def set_warm_start_state(self, state: WarmStart | None) -> WarmStartMixin:
        """Make the next fit with ``warm_start=True`` start from ``state`` (None: cold), not from this estimator's
        last fit.

        The state is used once, by the next fit (then the fit's own state replaces it), and only when it
        applies to that fit's data (:meth:`WarmStart.applies_to`); otherwise the fit starts cold, as with
        this estimator's own state.  ``clone`` does not copy it.

        Parameters
        ----------
        state : WarmStart or None
            E.g. another fit's :meth:`warm_start_state`, or one derived from it
            (:meth:`WarmStart.moved_to_rows`, :meth:`WarmStart.averaged_with`).

        Returns
        -------
        self : estimator
        """
        if state is not None and not isinstance(state, WarmStart):
            raise TypeError(f"state must be a WarmStart or None; got {type(state).__name__}")
        self._warm_start_in = state
        return self

    def _previous_solution(self, state: WarmStart | None, X, y_index, classes) -> tuple | None:
        """``state``'s solution if ``warm_start`` is on and it still fits the data (:meth:`WarmStart.applies_to`),
        else None: (rows, weights, offsets), sub-problem ``k``'s rows and weights at ``offsets[k]:offsets[k + 1]``.
        """
        if not self.warm_start or state is None or not state.applies_to(X, y_index, classes, self.multiclass):
            return None
        return state.rows, state.weights, state.offsets

    def _heavy_starts(self, X, problems: list[SubProblem], previous: WarmStart, rows_in: dict) -> list[bool]:
        """Per sub-problem, whether its warm start takes only the heavy old support vectors (weight at least the
        mean), not all of them.

        Only sub-problems of at least ``HEAVY_START_MIN_POINTS`` points, when most of the light ones are expected
        to leave the support, each costing a kernel row up front and pairwise steps to empty it:

        * at another kernel (ijcnn1, 3,333 points, gamma x4: 40-70 ms against 80-170 ms from the whole support
          and 77-363 ms cold);
        * at a C at least ``HEAVY_START_C_RATIO`` times the previous one (a step of gsvm's grid), with no kept
          kernel rows of the old support (``rows_in``, :meth:`_previous_kernel_rows`; kept rows would be free):
          the margin narrows and the support shrinks (ijcnn1, C 4 -> 64: 2,095 -> 1,269 support vectors).  Over
          ijcnn1's pattern searches (5,000 rows, 3 folds, interleaved) the warm search's median time went from
          30.5% to 33.9% below the cold one's; a 3,000-point problem, C x16: 118-151 ms against 147-159 ms.  At
          C x1.5 most light points stay and the heavy-only start took ~30% longer.  Only ``C`` is compared:
          changed sample or class weights do not count (a speed rule; any start reaches the same optimum).

        Small problems' rows are cheap and their light points mostly stay (letter's ~80-point pairs: 5% more
        steps over a search when started from the heavy ones).  Nor when the fit expects more support vectors
        (``_blend_start``) on the small-problem path, where a blended start may follow: from the heavy ones the
        step test passed where the support stayed sparse (ijcnn1, 4,000 points, (1024, 1/16) -> (1024, 1/1024):
        0.72-0.94 s blended against 0.26-0.63 s from the whole support and 0.19 s cold).
        """
        kernel_changed = previous.kernel != self._kernel_spec
        c_grew = float(self.C) >= HEAVY_START_C_RATIO * (np.inf if previous.C is None else previous.C)
        options = self.solver_options(len(X), 0, np.inf)

        def heavy(problem: SubProblem) -> bool:
            if len(problem.rows) < HEAVY_START_MIN_POINTS or (
                    self._blend_start and self._small_problem_fast_path(X, len(problem.rows), options)):
                return False
            return kernel_changed or (c_grew and not holds_kernel_values(rows_in.get(problem.index, NO_KERNEL_ROWS)))

        return [heavy(problem) for problem in problems]

    def _expects_more_support(self, previous: WarmStart) -> bool:
        """Whether this warm fit's solution likely has more support vectors than the last one's: a smaller ``C``
        (at most the same gamma) or, for RBF, a smaller gamma (at most the same ``C``).  Its warm starts on the
        small-problem path then begin with every point, mixed with the balanced uniform weights
        (:func:`~coresvm.solvers.dense._blend_toward_balanced`, by exact line search: never a worse start).
        """
        new, old = self._kernel_spec, previous.kernel
        if old is None or (new.name, new.coef0, new.degree) != (old.name, old.coef0, old.degree):
            return False
        old_C = np.nan if previous.C is None else previous.C
        same_gamma = new.gamma == old.gamma
        if float(self.C) < old_C:
            return same_gamma or (new.name == "rbf" and new.gamma < old.gamma)
        return float(self.C) == old_C and new.name == "rbf" and new.gamma < old.gamma

    def shared_inner_products(self, X) -> SharedInnerProducts | None:
        """Inner products of all rows of ``X`` for a hyper-parameter search to lend its warm fits on subsets of
        them (:meth:`lend_inner_products`), or None when they would not pay or not fit ``cache_size``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The search's data.

        Returns
        -------
        SharedInnerProducts or None
            Computed on first use (:meth:`SharedInnerProducts.for_search`).
        """
        return SharedInnerProducts.for_search(X, cache_budgets(self.cache_size)[0])

    def lend_inner_products(self, products: SharedInnerProducts | None) -> WarmStartMixin:
        """Lend the next fit a search's shared inner products (:meth:`shared_inner_products`), already restricted
        to the fit's rows (:meth:`SharedInnerProducts.on_rows`): the fit reads them instead of computing any and
        keeps none of its own.  Used when the fit's ``X`` is those rows; dropped when the fit ends.

        Parameters
        ----------
        products : SharedInnerProducts or None
            None withdraws a loan.

        Returns
        -------
        self : estimator
        """
        if products is None:
            self.__dict__.pop("_search_dots", None)
        else:
            self._search_dots = products
        return self

    def _shared_dot_positions(self, X) -> np.ndarray | None:
        """The rows of the search's shared inner products (:class:`SharedInnerProducts`) that hold ``X``'s rows,
        when a search lent them to this fit (:meth:`lend_inner_products`) and ``X`` is those rows; else None."""
        lent = getattr(self, "_search_dots", None)
        if lent is None or not isinstance(X, np.ndarray):
            return None
        return lent.positions_of(X)

    def _previous_dot_rows(self, X, problems: list[SubProblem], state: WarmStart) -> dict:
        """Per sub-problem index, the inner products ``(points, dots)`` the last fit kept, if ``X`` is the same.

        Rule: the same training matrix (shape, dtype and values: the rows are all of the problem's points, not
        only the support vectors) and the same rows in the sub-problem.  Inner products do not depend on C,
        the kernel's parameters or the signs, so a warm fit at another gamma reuses them too.
        """
        cache = state.inner_products
        if cache is None or not cache.holds(X):
            return {}
        return {problem.index: cache.rows[problem.index][1:] for problem in problems
                if problem.index in cache.rows and np.array_equal(cache.rows[problem.index][0], problem.rows)}

    def _previous_kernel_rows(self, X, problems: list[SubProblem], state: WarmStart | None, reuse_values: bool) -> dict:
        """Per sub-problem index, the kernel rows ``(buffer, order, 1/C)`` the last fit kept, if ``reuse_values``,
        ``X``, the kernel and the bias are the same and the sub-problem has the same rows and signs (only ``C`` may
        differ: a warm fit of a search at the same gamma).  Otherwise a kept buffer of the sub-problem's size is
        lent as memory only (``(buffer, [], [])``: the fit overwrites it; fresh memory costs page faults).  They
        are taken: the last fit's model no longer holds them."""
        holder = None if state is None else state.kernel_rows
        if holder is None:
            return {}
        same_kernel = reuse_values and holder.computed_for(X, self._kernel_spec, self.bias_rule)
        entries = holder.take()
        kept = {}
        for problem in problems:
            entry = entries.get(problem.index)
            if entry is None:
                continue
            if same_kernel and np.array_equal(entry[0], problem.rows) and np.array_equal(entry[1], problem.signs):
                kept[problem.index] = entry[2:5]
            elif entry[2].shape[0] == len(problem.rows):
                kept[problem.index] = (entry[2], *NO_KERNEL_ROWS[1:])
        return kept

    def release_kept_rows(self) -> None:
        """Free the kernel rows and inner products a ``warm_start=True`` fit keeps for the next fit (up to
        ``cache_size`` each), e.g. for a model that will not be fitted again (``PatternSearchCV``'s refitted
        model, given out with the user's ``warm_start=False``).  The solution stays (:meth:`warm_start_state`)."""
        self._kernel_rows = None
        self._dot_rows = None


def holds_kernel_values(kept_rows: tuple) -> bool:
    """Whether kept kernel rows ``(buffer, order, 1/C)`` (:meth:`CoreSVC._previous_kernel_rows`) hold an earlier
    fit's values, which the fit starts from; with an empty order the buffer is lent as memory only."""
    return len(kept_rows[1]) > 0


def attach_warm_starts(problems: list[SubProblem], previous: tuple, heavy_only: list[bool]) -> None:
    """Give each sub-problem its previous support (as positions in its new rows) and weights; where
    ``heavy_only[k]``, only the support vectors whose weight is at least their sub-problem's mean weight.

    One compiled call for all sub-problems (letter's 325 one-vs-one pairs: about 8 ms per fit as a Python loop).
    """
    old_rows, old_alpha, old_offsets = previous
    problem_rows = np.concatenate([problem.rows for problem in problems]).astype(np.int64, copy=False)
    problem_offsets = np.cumsum([0] + [len(problem.rows) for problem in problems]).astype(np.int64)
    positions, alpha, offsets = warm_start_positions(problem_rows, problem_offsets, np.asarray(old_rows, np.int64),
                                                      np.asarray(old_alpha, np.float64),
                                                      np.asarray(old_offsets, np.int64),
                                                      np.asarray(heavy_only, dtype=np.bool_))
    for k, problem in enumerate(problems):
        if offsets[k + 1] > offsets[k]:
            problem.init = (positions[offsets[k]:offsets[k + 1]], alpha[offsets[k]:offsets[k + 1]])


@numba.njit(cache=True)
def warm_start_positions(problem_rows, problem_offsets, old_rows, old_alpha, old_offsets, heavy_only):
    """Per sub-problem ``k``: the positions in its (sorted) rows ``problem_rows[problem_offsets[k]:...]`` of its
    old rows ``old_rows[old_offsets[k]:...]`` that are still there with a positive weight (with ``heavy_only[k]``,
    at least the mean of the sub-problem's positive old weights), and those weights; returned concatenated,
    sub-problem ``k``'s at ``offsets[k]:offsets[k + 1]``."""
    n_problems = problem_offsets.shape[0] - 1
    positions = np.empty(old_rows.shape[0], dtype=np.int64)
    alpha = np.empty(old_rows.shape[0])
    offsets = np.zeros(n_problems + 1, dtype=np.int64)
    n = 0
    for k in range(min(n_problems, old_offsets.shape[0] - 1)):
        rows = problem_rows[problem_offsets[k]:problem_offsets[k + 1]]
        floor = 0.0
        if heavy_only[k]:
            total, count = 0.0, 0
            for j in range(old_offsets[k], old_offsets[k + 1]):
                if old_alpha[j] > 0.0:
                    total += old_alpha[j]
                    count += 1
            floor = total / max(count, 1)
        for j in range(old_offsets[k], old_offsets[k + 1]):
            if old_alpha[j] <= 0.0 or old_alpha[j] < floor:
                continue
            position = np.searchsorted(rows, old_rows[j])
            if position < rows.shape[0] and rows[position] == old_rows[j]:
                positions[n] = position
                alpha[n] = old_alpha[j]
                n += 1
        offsets[k + 1] = n
    for k in range(min(n_problems, old_offsets.shape[0] - 1), n_problems):
        offsets[k + 1] = n
    return positions[:n], alpha[:n], offsets
