"""The (C, gamma) grid of cv and select, and the search over it (grid or gsvm's pattern search)."""

from __future__ import annotations

import argparse
import math

import numpy as np

from .errors import UsageError
from .fitting import Scorer, stratified_folds
from .options import GSVM_C_RANGE, GSVM_GAMMA_RANGE, GSVM_RESOLUTION
from .progress import Progress
from .settings import Settings, gamma_value, make_estimator, parse_number


def _log2_range(text: str, what: str) -> np.ndarray:
    parts = text.split(",")
    if len(parts) != 3:
        raise UsageError(f"{what} takes BEGIN,END,STEP; got {text!r}")
    begin, end, step = (parse_number(v, what) for v in parts)
    if step == 0 or (end - begin) * step < 0:
        raise UsageError(f"{what}: STEP {step:g} does not lead from {begin:g} to {end:g}")
    count = int(math.floor((end - begin) / step + 1e-9)) + 1
    return 2.0 ** (begin + step * np.arange(count))


def _axis(low, high, default: tuple[float, float], resolution: int, log2: str | None, what: str):
    """Values of one grid axis: a log2 range, a geometric range [low, high], or one fixed value."""
    if log2 is not None:
        return list(_log2_range(log2, f"--log2{what[0].lower()}"))
    if isinstance(low, str):
        if high is not None:
            raise UsageError(f"a {what} range needs numbers; got the rule {low!r} as its lower end")
        return [low]
    low = default[0] if low is None else low
    high = default[1] if high is None else high
    if low <= 0 or high <= 0:
        raise UsageError(f"{what} range must be positive; got [{low:g}, {high:g}]")
    if low > high:
        raise UsageError(f"{what} range: lower end {low:g} is above the upper end {high:g}")
    if low == high:
        return [low]
    return [float(v) for v in np.geomspace(low, high, resolution)]


def parameter_grid(args: argparse.Namespace, settings: Settings) -> dict[str, list]:
    """The C and gamma axes from -c/-C, -g/-G, --log2c/--log2g and the resolution (gsvm's ranges by default)."""
    resolution = settings.resolution if settings.resolution is not None else GSVM_RESOLUTION
    if resolution < 1:
        raise UsageError(f"resolution must be >= 1; got {resolution}")
    gamma_low = gamma_value(args.gamma_low)
    return {
        "C": _axis(args.c_low, args.c_high, GSVM_C_RANGE, resolution, args.log2c, "C"),
        "gamma": _axis(gamma_low, args.gamma_high, GSVM_GAMMA_RANGE, resolution, args.log2g, "gamma"),
    }


def search_class(search: str | None):
    """GridSearchCV, or PatternSearchCV for gsvm's pattern search (``-m pattern``)."""
    from sklearn.model_selection import GridSearchCV

    import coresvm

    if search == "pattern":
        cls = getattr(coresvm, "PatternSearchCV", None)
        if cls is None:
            raise UsageError("pattern search is not available yet in this coresvm; use --search grid (-m grid)")
        return cls
    return GridSearchCV


def run_search(settings: Settings, grid: dict, X, y, folds: int, seed: int, jobs: int, progress: Progress | None):
    """Cross-validate every grid point (no refit); the fitted search object."""
    model = make_estimator(settings, y)
    search_cls = search_class(settings.search)
    search = search_cls(model, grid, cv=stratified_folds(folds, seed), scoring=Scorer(progress), n_jobs=jobs,
                        refit=False, error_score="raise")
    search.fit(X, y)
    return search


def grid_size(grid: dict) -> int:
    """The number of grid points."""
    return int(np.prod([len(v) for v in grid.values()]))


def format_gamma(gamma) -> str:
    """A gamma as the reports print it: a number, or its rule (scale, auto, cvm)."""
    return gamma if isinstance(gamma, str) else f"{gamma:g}"
