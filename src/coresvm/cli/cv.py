"""``coresvm cv``: k-fold cross-validation of one (C, gamma), or nested CV over a grid (gsvm's default mode)."""

from __future__ import annotations

import argparse
import sys
import time
import warnings

import numpy as np

from .data_files import read_data
from .errors import UsageError
from .fitting import check_folds, kfold, report_warnings, stratified_folds
from .grid import format_gamma, grid_size, parameter_grid, run_search
from .options import EPILOG_SHARED_LETTERS, add_cv_options, add_svm_options, fold_count
from .progress import Progress
from .settings import data_path, make_estimator, resolve, set_single_point

EPILOG = """\
examples
  coresvm cv -c 100 -g 1 -i 10 -S 5 iris.dat                              # gsvm: 10-fold CV
  coresvm cv -c 1 -C 10 -g 0.1 -G 10 -i 10 -o 10 --resolution 5 -m grid iris.dat
  coresvm cv --gsvm -c 1 -C 10 -g 0.1 -G 10 -i 10 -o 10 -r 5 -m grid iris.dat   # the same, gsvm's -r

  One (C, gamma): stratified k-fold CV.  A range (-C, -G, --log2c or --log2g) with -o K:
  nested CV, a grid search on each outer training part, its best model tested on the outer part.

""" + EPILOG_SHARED_LETTERS


def add_parser(commands) -> None:
    """Add the ``cv`` command to the ``commands`` subparsers."""
    parser = commands.add_parser("cv", help="k-fold or nested cross-validation (gsvm's default mode)",
                                 description="Cross-validate CoreSVC on DATA.", epilog=EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", nargs="?", metavar="DATA", help="data file")
    add_svm_options(parser, ranges=True)
    add_cv_options(parser, select=False)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print each fold's accuracy and the mean; with a range and ``-o K``, nested CV."""
    settings = resolve(args, "cv")
    path = data_path(args)
    folds = fold_count(args)
    has_range = any(v is not None for v in (args.c_high, args.gamma_high, args.log2c, args.log2g))
    if not has_range:
        if args.outer_folds > 1:
            raise UsageError("nested CV (-o > 1) needs a C or gamma range (-C, -G, --log2c or --log2g) to select from")
        set_single_point(args, settings)
        X, y = read_data(path, settings.matrix_type)
        start = time.perf_counter()
        scores = kfold(settings, X, y, folds, args.seed, args.quiet, args.jobs, "coresvm cv")
        if not args.quiet:
            for k, score in enumerate(scores, start=1):
                print(f"fold {k:>3}: accuracy {100 * score:.4f}%")
            print(f"{folds}-fold CV: mean {100 * scores.mean():.4f}%, std {100 * scores.std():.4f}%, "
                  f"{time.perf_counter() - start:.2f} s")
        print(f"Cross Validation Accuracy = {100 * scores.mean():g}%")
        return 0
    if args.outer_folds < 2:
        raise UsageError("a C or gamma range in 'coresvm cv' means nested CV: give -o K (K >= 2) outer folds, "
                         "or use 'coresvm select' for a plain grid search")
    grid = parameter_grid(args, settings)
    X, y = read_data(path, settings.matrix_type)
    check_folds(y, args.outer_folds, "outer CV")
    outer = stratified_folds(args.outer_folds, args.seed)
    per_search = grid_size(grid) * folds
    scores = []
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Progress("coresvm cv (nested)", total=args.outer_folds * (per_search + 1),
                      enabled=not args.quiet and args.jobs == 1) as progress:
            for k, (train, test) in enumerate(outer.split(np.zeros(len(y)), y), start=1):
                X_train, y_train = X[train], y[train]
                check_folds(y_train, folds, f"inner CV of outer fold {k}")
                search = run_search(settings, grid, X_train, y_train, folds, args.seed, args.jobs,
                                     progress if args.jobs == 1 else None)
                best = search.best_params_
                model = make_estimator(settings, y_train, **best).fit(X_train, y_train)
                score = float(np.mean(model.predict(X[test]) == y[test]))
                progress.step()
                scores.append(score)
                if not args.quiet:
                    sys.stderr.flush()
                    print(f"outer fold {k:>3}: C = {best['C']:g}, gamma = {format_gamma(best['gamma'])}, inner CV "
                          f"{100 * search.best_score_:.4f}%, test accuracy {100 * score:.4f}%")
    report_warnings(caught, "coresvm cv", args.quiet)
    scores = np.array(scores)
    if not args.quiet:
        print(f"nested CV ({args.outer_folds} outer x {folds} inner folds, {grid_size(grid)} grid points): mean "
              f"{100 * scores.mean():.4f}%, std {100 * scores.std():.4f}%, {time.perf_counter() - start:.2f} s")
    print(f"Nested Cross Validation Accuracy = {100 * scores.mean():g}%")
    return 0
