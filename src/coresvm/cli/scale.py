"""``coresvm scale``: scale features linearly to [-1, 1] or [0, 1] (like svm-scale), and its scaling file."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from .data_files import read_data_indexed, write_data
from .errors import UsageError


def add_parser(commands) -> None:
    """Add the ``scale`` command to the ``commands`` subparsers."""
    parser = commands.add_parser("scale", help="scale features to [-1, 1] or [0, 1] (like svm-scale)",
                                 description="Scale each feature of DATA linearly to [LOWER, UPPER] and write the "
                                 "result in LIBSVM format (to stdout or --output).  The scaling file is svm-scale's: "
                                 "'x', 'lower upper', then 'index min max' per feature.  Constant features, and with "
                                 "-r features the scaling file does not list, are dropped, as svm-scale does.",
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", metavar="DATA", help="data file")
    parser.add_argument("-l", "--lower", type=float, help="lower end of the range (default -1)")
    parser.add_argument("-u", "--upper", type=float, help="upper end of the range (default 1)")
    parser.add_argument("-s", "--save", metavar="FILE", help="save the scaling parameters")
    parser.add_argument("-r", "--restore", metavar="FILE", help="scale with saved parameters (e.g. the test data)")
    parser.add_argument("--output", metavar="FILE", help="output data file (default stdout; .csv/.npy by name)")
    parser.add_argument("--matrix-type", choices=["sparse", "dense"], help="data representation (default sparse)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Scale DATA (with the saved parameters of ``-r``, or its own range) and write it; ``-s`` saves the scaling."""
    import scipy.sparse as sp

    if args.save and args.restore:
        raise UsageError("give either -s (save the scaling) or -r (restore it), not both")
    # indices as given (column i is index i), as svm-scale keeps them: the output and the scaling
    # file use the input's own indices, zero- or one-based (a one-based file's empty column 0 is
    # constant, so it is neither scaled nor written)
    X, y, _ = read_data_indexed(args.data, "sparse" if args.matrix_type is None else args.matrix_type,
                                index_base=0)
    n_features = X.shape[1]
    if args.restore:
        lower, upper, minimum, maximum = _read_scaling(args.restore)
        if len(minimum) < n_features:  # features the scaling file never saw are dropped, as in svm-scale
            pad = n_features - len(minimum)
            minimum = np.concatenate([minimum, np.zeros(pad)])
            maximum = np.concatenate([maximum, np.zeros(pad)])
        minimum, maximum = minimum[:n_features], maximum[:n_features]
    else:
        lower = -1.0 if args.lower is None else args.lower
        upper = 1.0 if args.upper is None else args.upper
        if not lower < upper:
            raise UsageError(f"scale: need lower < upper; got -l {lower:g} -u {upper:g}")
        if sp.issparse(X):
            from sklearn.utils.sparsefuncs import min_max_axis

            # includes the implicit zeros of rows that lack a feature, as svm-scale does
            minimum, maximum = (np.asarray(v, dtype=np.float64) for v in min_max_axis(X, axis=0))
        else:
            minimum, maximum = X.min(axis=0), X.max(axis=0)
    kept = maximum > minimum
    span = np.where(kept, maximum - minimum, 1.0)
    # image of an absent (zero) entry; when it is 0 for every kept feature the data stay sparse
    zero_image = np.where(kept, lower + (upper - lower) * (0.0 - minimum) / span, 0.0)
    if sp.issparse(X) and not np.any(zero_image):
        X = X.tocsr().copy()
        columns = X.indices
        X.data = np.where(kept[columns], lower + (upper - lower) * (X.data - minimum[columns]) / span[columns], 0.0)
        X.eliminate_zeros()
    else:
        dense = X.toarray() if sp.issparse(X) else np.array(X, dtype=np.float64)
        dense = lower + (upper - lower) * (dense - minimum) / span
        dense[:, ~kept] = 0.0
        X = dense
    if args.save:
        with open(args.save, "w") as out:
            out.write(f"x\n{lower!r} {upper!r}\n")
            for index in np.flatnonzero(kept):
                out.write(f"{index} {float(minimum[index])!r} {float(maximum[index])!r}\n")
    write_data(args.output or "-", X, y, zero_based=True)
    return 0


def _read_scaling(path: str) -> tuple[float, float, np.ndarray, np.ndarray]:
    """Read an svm-scale scaling file: ``x``, ``lower upper``, then ``index min max`` lines."""
    if not Path(path).exists():
        raise UsageError(f"file not found: {path}")
    lines = [line.split() for line in Path(path).read_text().splitlines()]
    if lines and lines[0] == ["y"]:
        raise UsageError(f"{path}: label (y) scaling is not supported")
    if len(lines) < 2 or lines[0] != ["x"]:
        raise UsageError(f"{path}: not an svm-scale scaling file (expected 'x' on line 1)")
    try:
        lower, upper = (float(v) for v in lines[1])
    except ValueError:
        raise UsageError(f"{path}: unreadable line 2 (expected 'lower upper')") from None
    entries = {}
    for number, fields in enumerate(lines[2:], start=3):
        if not fields:
            continue
        try:
            index, low, high = int(fields[0]), float(fields[1]), float(fields[2])
            if len(fields) != 3 or index < 0:
                raise ValueError
        except (ValueError, IndexError):
            raise UsageError(f"{path}: unreadable line {number} (expected 'index min max')") from None
        entries[index] = (low, high)  # indices as given, as run reads the data
    size = max(entries, default=-1) + 1
    minimum, maximum = np.zeros(size), np.zeros(size)
    for index, (low, high) in entries.items():
        minimum[index], maximum[index] = low, high
    return lower, upper, minimum, maximum

