"""``coresvm train``: train on a data file and write a model file (like svm-train; ``-v K`` cross-validates)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from .data_files import read_data_indexed
from .fitting import fit_with_progress, keep_index_base, kfold
from .options import EPILOG_SHARED_LETTERS, add_svm_options
from .settings import data_path, make_estimator, resolve, set_single_point

EPILOG = """\
examples
  coresvm train -c 4096 -g 0.125 ijcnn1 ijcnn1.model        # like svm-train
  coresvm train -t 1 -d 2 -r 1 --format libsvm data.txt     # poly kernel, a LIBSVM model file
  coresvm train -v 5 -c 16 data.txt                         # 5-fold CV, as svm-train -v
  coresvm train --solver swap --vertex-search full --max-time 60 a9a

defaults
  Without options CoreSVC's defaults apply: C = 1, gamma = scale, rbf kernel, solver coreset,
  tolerance 0.01 (relative duality gap), seed 0.  C weighs squared slacks (L2-SVM): good values
  are usually larger than LIBSVM's.  The model file defaults to DATA.model in the current
  directory, as in svm-train.

""" + EPILOG_SHARED_LETTERS


def add_parser(commands) -> None:
    """Add the ``train`` command to the ``commands`` subparsers."""
    parser = commands.add_parser("train", help="train on a data file and write a model file (like svm-train)",
                                 description="Train a CoreSVC on DATA and write MODEL.", epilog=EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", nargs="?", metavar="DATA", help="training data file")
    parser.add_argument("model", nargs="?", metavar="MODEL", help="model file to write (default DATA.model)")
    parser.add_argument("--format", choices=["native", "libsvm"], default="native",
                        help="model file format: native (all metadata; default) or libsvm (svm-predict reads it)")
    parser.add_argument("-v", dest="v_folds", type=int, metavar="K",
                        help="k-fold cross-validation instead of training (svm-train -v)")
    parser.add_argument("-i", "--folds", dest="inner_folds", type=int, metavar="K", help="the same as -v")
    add_svm_options(parser, ranges=False)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Train and save the model, or with ``-v K`` print the k-fold CV accuracy instead."""
    from .. import model_io

    settings = resolve(args, "train")
    set_single_point(args, settings)
    path = data_path(args)
    model_path = args.model or f"{Path(path).name}.model"
    X, y, base = read_data_indexed(path, settings.matrix_type)
    if args.v_folds is not None or args.inner_folds is not None:
        # svm-train -v: cross-validate instead of training (no model file is written)
        folds = args.v_folds if args.v_folds is not None else args.inner_folds
        accuracy = kfold(settings, X, y, folds, args.seed, args.quiet, jobs=1, label="coresvm train -v")
        print(f"Cross Validation Accuracy = {100 * np.mean(accuracy):g}%")
        return 0
    model = make_estimator(settings, y)
    start = time.perf_counter()
    fit_with_progress(model, X, y, "coresvm train", args.quiet)
    seconds = time.perf_counter() - start
    keep_index_base(model, base)
    model_io.save_model(model, model_path, format=args.format)
    if not args.quiet:
        status = "converged" if model.fit_status_ == 0 else "stopped early (see warning)"
        print(f"trained on {X.shape[0]:,} samples x {X.shape[1]:,} features, {len(model.classes_)} classes, "
              f"in {seconds:.2f} s: #SV = {len(model.support_):,}, iterations = {int(np.sum(model.n_iter_)):,}, "
              f"{status}")
        print(f"model written to {model_path} ({args.format} format)")
    return 0
