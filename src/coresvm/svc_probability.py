"""CoreSVC's class probabilities: Platt sigmoids fitted by internal cross-validation (as LIBSVM's ``-b 1``)."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.model_selection import StratifiedKFold
from sklearn.utils.metaestimators import available_if

from .calibration import couple_pairwise, fit_sigmoid, normalize_one_vs_rest, sigmoid_probability

PROBABILITY_FOLDS = 5  # internal cross-validation for Platt scaling (LIBSVM's -b 1 uses 5 as well)


class ProbabilityMixin:
    """``probability=True`` of :class:`~coresvm.CoreSVC`: the sigmoids' fit and :meth:`predict_proba`."""

    def _fit_probability(self, X, y, y_index, sample_weight, keep, problems, rng) -> None:
        """Platt sigmoids on held-out decision values of an internal stratified cross-validation."""
        kept = np.flatnonzero(keep)
        smallest_class = int(np.bincount(y_index[kept], minlength=len(self.classes_)).min())
        n_folds = min(PROBABILITY_FOLDS, smallest_class)
        if n_folds < 2:
            raise ValueError(
                "probability=True needs at least 2 samples (with non-zero weight) of every class: Platt scaling "
                f"is fitted by internal cross-validation; the smallest class has {smallest_class}"
            )
        folds = StratifiedKFold(n_folds, shuffle=True, random_state=int(rng.randint(0, 2**31 - 1)))
        fold_seeds = rng.randint(0, 2**31 - 1, size=n_folds)
        held_out = np.zeros((X.shape[0], len(problems)))
        for (train, test), seed in zip(folds.split(kept, y_index[kept]), fold_seeds, strict=True):
            train, test = kept[train], kept[test]
            fold_model = clone(self).set_params(
                probability=False, warm_start=False, callback=None, verbose=False, gamma=self.gamma_,
                random_state=int(seed),
            )
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                fold_weight = None if sample_weight is None else sample_weight[train]
                fold_model.fit(X[train], y[train], sample_weight=fold_weight)
            held_out[test] = fold_model._pair_decisions(X[test])
        sigmoids = [fit_sigmoid(held_out[problem.rows, problem.index], problem.signs) for problem in problems]
        self.probA_ = np.array([a for a, _ in sigmoids])
        self.probB_ = np.array([b for _, b in sigmoids])

    def _check_probability(self) -> bool:
        if not self.probability:
            raise AttributeError("predict_proba is not available when probability=False")
        return True

    @available_if(_check_probability)
    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities, columns in the order of ``classes_`` (needs ``probability=True``).

        Two classes: Platt's sigmoid of the decision value.  More classes: the
        pairwise sigmoids coupled by Wu, Lin & Weng's method 2 ('ovo'), or the
        per-class sigmoids renormalized ('ovr').  ``argmax`` of the result can
        differ from :meth:`predict` near the decision boundary.
        """
        decisions = self._pair_decisions(X)
        if not hasattr(self, "probA_"):
            raise NotFittedError("predict_proba needs a model fitted with probability=True; refit it")
        per_problem = sigmoid_probability(decisions, self.probA_, self.probB_)
        n_classes = len(self.classes_)
        if n_classes == 2:
            return np.column_stack([1.0 - per_problem[:, 0], per_problem[:, 0]])
        if self._is_one_vs_rest:
            return normalize_one_vs_rest(per_problem)
        return couple_pairwise(per_problem, n_classes)

    @available_if(_check_probability)
    def predict_log_proba(self, X) -> np.ndarray:
        """Logarithm of :meth:`predict_proba`."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))
