"""Fitting with a progress bar and one-line warnings: single fits, k-fold CV, and the model's index base."""

from __future__ import annotations

import sys
import warnings

import numpy as np

from .errors import UsageError, one_line
from .progress import Progress
from .settings import Settings, make_estimator

# The fitted attribute that keeps the index base of the LIBSVM file a model was trained on (0 or 1;
# model_io writes a LIBSVM model's indices with it): predict reads the test file with the same base.
INDEX_BASE_ATTRIBUTE = "libsvm_index_base_"


def fit_with_progress(model, X, y, label: str, quiet: bool):
    """Fit with a progress bar; warnings become one stderr line each (no tracebacks, no source lines)."""
    budget = model.get_params().get("max_time")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Progress(label, enabled=not quiet, budget=budget):
            model.fit(X, y)
    if not quiet:
        for message in {str(w.message) for w in caught if issubclass(w.category, UserWarning)}:
            print(f"{label}: warning: {message}", file=sys.stderr)
    return model


def keep_index_base(model, base) -> None:
    """Keep the training file's LIBSVM index base in the model (``libsvm_index_base_``; saved with it)."""
    if base is not None:
        setattr(model, INDEX_BASE_ATTRIBUTE, int(base))


class Scorer:
    """Accuracy scorer that also advances the progress bar (one step per fold fit)."""

    def __init__(self, progress: Progress | None):
        self.progress = progress

    def __call__(self, estimator, X, y) -> float:
        score = float(np.mean(estimator.predict(X) == y))
        if self.progress is not None:
            self.progress.step()
        return score


def stratified_folds(k: int, seed: int):
    """Shuffled stratified k-fold splits (at least 2 folds)."""
    from sklearn.model_selection import StratifiedKFold

    if k < 2:
        raise UsageError(f"cross-validation needs at least 2 folds; got {k}")
    return StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)


def check_folds(y, k: int, what: str) -> None:
    """A usage error when ``k`` folds cannot be drawn from the labels ``y``."""
    counts = np.unique(y, return_counts=True)[1]
    if k > len(y):
        raise UsageError(f"{what}: {k} folds for {len(y)} samples")
    if counts.max() < k:
        raise UsageError(f"{what}: {k} folds but no class has {k} samples")


def kfold(settings: Settings, X, y, folds: int, seed: int, quiet: bool, jobs: int, label: str) -> np.ndarray:
    """The accuracy of each of ``folds`` stratified CV folds, with a progress bar."""
    from sklearn.model_selection import cross_val_score

    check_folds(y, folds, label)
    model = make_estimator(settings, y)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Progress(label, total=folds, enabled=not quiet and jobs == 1) as progress:
            scores = cross_val_score(model, X, y, cv=stratified_folds(folds, seed),
                                     scoring=Scorer(progress if jobs == 1 else None), n_jobs=jobs,
                                     error_score="raise")
    report_warnings(caught, label, quiet)
    return scores


def report_warnings(caught, label: str, quiet: bool) -> None:
    """Caught warnings as stderr lines: one count of unconverged fits, one line per other warning."""
    from sklearn.exceptions import ConvergenceWarning

    if quiet:
        return
    stopped = sum(1 for w in caught if issubclass(w.category, ConvergenceWarning))
    if stopped:
        print(f"{label}: note: {stopped} fit(s) stopped before convergence (max_iter, max_time or cache_size)",
              file=sys.stderr)
    for message in {str(w.message) for w in caught if issubclass(w.category, UserWarning)
                    and not issubclass(w.category, ConvergenceWarning)}:
        print(f"{label}: warning: {one_line(Warning(message))}", file=sys.stderr)
