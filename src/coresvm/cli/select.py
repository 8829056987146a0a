"""``coresvm select``: choose C and gamma by cross-validated grid or pattern search (like LIBSVM's grid.py)."""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from .data_files import read_data_indexed
from .fitting import check_folds, fit_with_progress, keep_index_base, report_warnings
from .grid import format_gamma, grid_size, parameter_grid, run_search, search_class
from .options import EPILOG_SHARED_LETTERS, add_cv_options, add_svm_options, fold_count
from .progress import Progress
from .settings import data_path, make_estimator, resolve

EPILOG = """\
examples
  coresvm select data.txt                                   # gsvm's default grid: 8 x 8 values
  coresvm select -c 1 -C 4096 -g 0.01 -G 1 --resolution 7 -i 5 data.txt best.model
  coresvm select --log2c -5,15,2 --log2g 3,-15,-2 -v 5 data.txt   # grid.py's ranges

  Each axis runs from its low to its high value in --resolution geometric steps (gsvm's
  defaults: C in [2^-4, 2^10], gamma in [2^-10, 2^4], 8 values), or over a grid.py range.  Give
  low = high to fix an axis.  With MODEL, the best (C, gamma) is retrained on all data and saved.

""" + EPILOG_SHARED_LETTERS


def add_parser(commands) -> None:
    """Add the ``select`` command to the ``commands`` subparsers."""
    parser = commands.add_parser("select", help="choose C and gamma by cross-validated grid search (like grid.py)",
                                 description="Search C and gamma by k-fold CV on DATA; optionally train the best "
                                 "model on all of DATA and write it to MODEL.", epilog=EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", nargs="?", metavar="DATA", help="data file")
    parser.add_argument("model", nargs="?", metavar="MODEL", help="write the best model, retrained on all data")
    parser.add_argument("--format", choices=["native", "libsvm"], default="native", help="model file format")
    add_svm_options(parser, ranges=True)
    add_cv_options(parser, select=True)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the CV accuracy of every grid point and the best; with MODEL, retrain the best and save it."""
    from .. import model_io

    settings = resolve(args, "select")
    path = data_path(args)
    folds = fold_count(args)
    grid = parameter_grid(args, settings)
    search_class(settings.search)  # a usage error before the data are read
    X, y, base = read_data_indexed(path, settings.matrix_type)
    check_folds(y, folds, "coresvm select")
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Progress("coresvm select", total=grid_size(grid) * folds,
                      enabled=not args.quiet and args.jobs == 1) as progress:
            search = run_search(settings, grid, X, y, folds, args.seed, args.jobs,
                                 progress if args.jobs == 1 else None)
    report_warnings(caught, "coresvm select", args.quiet)
    results = search.cv_results_
    best = search.best_params_
    if not args.quiet:
        print(f"{'C':>12} {'gamma':>12} {'CV accuracy (%)':>16}")
        for params, score in zip(results["params"], results["mean_test_score"], strict=True):
            if np.isfinite(score):
                print(f"{params['C']:>12g} {format_gamma(params['gamma']):>12} {100 * score:>16.4f}")
        print(f"{grid_size(grid)} grid points x {folds} folds in {time.perf_counter() - start:.2f} s")
    print(f"Best: C = {best['C']:g}, gamma = {format_gamma(best['gamma'])}, "
          f"CV accuracy = {100 * search.best_score_:g}%")
    if args.model:
        model = make_estimator(settings, y, **best)
        fit_with_progress(model, X, y, "coresvm select (final model)", args.quiet)
        keep_index_base(model, base)
        model_io.save_model(model, args.model, format=args.format)
        if not args.quiet:
            print(f"model trained on all data written to {args.model} ({args.format} format)")
    return 0

