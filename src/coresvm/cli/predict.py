"""``coresvm predict``: predict with a model file (like svm-predict)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from .data_files import AUTO_DENSE_FRACTION, format_label, read_data_indexed, widen
from .errors import UsageError
from .fitting import INDEX_BASE_ATTRIBUTE
from .progress import Progress


def add_parser(commands) -> None:
    """Add the ``predict`` command to the ``commands`` subparsers."""
    parser = commands.add_parser("predict", help="predict with a model file (like svm-predict)",
                                 description="Predict the labels of DATA with MODEL, write them to OUTPUT (one per "
                                 "line) and print the accuracy when DATA has labels.  MODEL may be a coresvm model or "
                                 "any LIBSVM C-SVC model file.", formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", metavar="DATA", help="data file")
    parser.add_argument("model", metavar="MODEL", help="model file (native or LIBSVM)")
    parser.add_argument("output", metavar="OUTPUT", help="predictions file to write")
    parser.add_argument("-b", dest="b_letter", metavar="0", help="probability estimates: only 0 (svm-predict)")
    parser.add_argument("--decision-values", action="store_true",
                        help="write the decision values after each label (the 'ovr' scores for >2 classes)")
    parser.add_argument("-t", "--matrix-type", dest="matrix_type", choices=["auto", "sparse", "dense"],
                        help="data representation (default auto)")
    parser.add_argument("--no-labels", action="store_true", help="CSV/.npy data without a label column")
    parser.add_argument("-q", "--quiet", action="store_true", help="print nothing (svm-predict -q)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Write one predicted label per line (and the decision values); print the accuracy when DATA has labels."""
    import scipy.sparse as sp

    from .. import model_io

    if args.b_letter not in (None, "0"):
        if args.b_letter == "1":
            raise UsageError("-b 1: probability estimates are not supported")
        raise UsageError(f"-b takes 0 (no probability estimates); got {args.b_letter!r}")
    for path in (args.data, args.model):
        if not Path(path).exists():
            raise UsageError(f"file not found: {path}")
    model = model_io.load_model(args.model)
    n = model.n_features_in_
    # the test file is read with the training file's index base (kept in the model), so that a model
    # trained on a zero-based file reads a zero-based test file column for column, whatever 'auto'
    # would decide for the test file alone (one without an index 0 would look one-based)
    X, y, _ = read_data_indexed(args.data, args.matrix_type or "auto", labels=not args.no_labels,
                                index_base=getattr(model, INDEX_BASE_ATTRIBUTE, "auto"), n_features=n)
    if X.shape[1] < n:
        X = widen(X, n)
    elif X.shape[1] > n:
        # Features the training data never had are zero in every SV: widening the SVs keeps
        # every dot product and only adds the new features to ||x||^2, as LIBSVM computes it.
        if not args.quiet:
            print(f"coresvm predict: note: {args.data} has {X.shape[1]} features, the model {n}; the extra "
                  "features are taken as zero in the support vectors (as LIBSVM does)", file=sys.stderr)
        model = widen_model(model, X.shape[1])
    if sp.issparse(X) and not sp.issparse(model.support_vectors_) and args.matrix_type is None \
            and X.nnz >= AUTO_DENSE_FRACTION * X.shape[0] * X.shape[1]:
        X = X.toarray()
    with Progress("coresvm predict", enabled=not args.quiet):
        predictions = model.predict(X)
        decisions = model.decision_function(X) if args.decision_values else None
    with open(args.output, "w") as out:
        for row, label in enumerate(predictions):
            line = format_label(label)
            if decisions is not None:
                values = np.atleast_1d(decisions[row])
                line += " " + " ".join(repr(float(v)) for v in values)
            out.write(line + "\n")
    if y is not None and not args.quiet:
        correct = int(np.sum(predictions == y))
        print(f"Accuracy = {100 * correct / len(y):g}% ({correct}/{len(y)}) (classification)")
    return 0


def widen_model(model, n_features: int):
    """A shallow copy of ``model`` whose support vectors have zero columns up to ``n_features``."""
    import copy

    wide = copy.copy(model)
    wide.support_vectors_ = widen(model.support_vectors_, n_features)
    wide.n_features_in_ = n_features
    return wide

