"""``coresvm demo``: coresvm and scikit-learn's SVC side by side on subsamples of the CVM paper's checkerboard."""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np


def add_parser(commands) -> None:
    """Add the ``demo`` command to the ``commands`` subparsers."""
    parser = commands.add_parser(
        "demo",
        help="compare coresvm and scikit-learn SVC on subsamples of a generated checkerboard",
        description="Train coresvm's CoreSVC and scikit-learn's SVC side by side on random subsamples of growing "
        "size of the 4x4 checkerboard of the CVM paper, and print the training time, test accuracy and number of "
        "support vectors of each; then coresvm on all rows in the time SVC took on the largest subsample.",
    )
    parser.add_argument("--n", type=int, default=1_000_000,
                        help="points of the generated data set (default 1,000,000)")
    parser.add_argument("--n-test", type=int, default=100_000, help="test points (default 100,000)")
    parser.add_argument("--fractions", "--svc-fraction", dest="fractions", type=_fractions,
                        default=[0.005, 0.01, 0.02, 0.05], metavar="F[,F...]",
                        help="subsample fractions of --n, one row each (default 0.005,0.01,0.02,0.05)")
    parser.add_argument("-c", "--C", type=float, default=1024.0, help="CoreSVC's L2-SVM C (default 1024)")
    parser.add_argument("-g", "--gamma", type=float, default=2.0, help="RBF gamma for both methods (default 2)")
    parser.add_argument(
        "--solver", default="coreset", choices=["coreset", "cvm", "fw", "mfw", "swap", "partan"], help="solver"
    )
    parser.add_argument("-e", "--tol", type=float, default=1e-2, help="relative duality-gap tolerance")
    parser.add_argument("--max-time", type=float, default=None,
                        help="time budget of each CoreSVC fit in seconds (default: none, fits run to the tolerance)")
    parser.add_argument("--no-full", action="store_true",
                        help="skip the last row (coresvm on all rows in the time SVC took on the largest subsample)")
    parser.add_argument("--svc-C", type=float, default=100.0, help="SVC's C (default 100)")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    parser.set_defaults(handler=run)


def _fractions(text: str) -> list[float]:
    """``--fractions 0.01,0.02,0.05``: subsample fractions in (0, 1], ascending."""
    try:
        values = sorted({float(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected fractions such as 0.01,0.05; got {text!r}") from None
    if not values or not all(0.0 < v <= 1.0 for v in values):
        raise argparse.ArgumentTypeError(f"fractions must be in (0, 1]; got {text!r}")
    return values


def run(args: argparse.Namespace) -> int:
    """Print one row of times, test accuracies and support vectors per subsample, then coresvm on all rows."""
    from sklearn.base import clone
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.svm import SVC

    from .. import CoreSVC
    from ..datasets import make_checkerboard

    def timed_fit(model, X_fit, y_fit):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            start = time.perf_counter()
            model.fit(X_fit, y_fit)
            return time.perf_counter() - start

    def cells(seconds, model, note=""):
        accuracy = 100 * model.score(X_test, y_test)
        return f"{seconds:>10.2f}{accuracy:>10.2f}%{len(model.support_):>8,}{note}"

    X, y = make_checkerboard(args.n, random_state=args.seed)
    X_test, y_test = make_checkerboard(args.n_test, random_state=args.seed + 1)
    core = CoreSVC(C=args.C, gamma=args.gamma, solver=args.solver, tol=args.tol, max_time=args.max_time,
                   random_state=args.seed)
    svc = SVC(C=args.svc_C, gamma=args.gamma)
    budget = "" if args.max_time is None else f", max_time={args.max_time:g}"
    print(f"4x4 checkerboard (the CVM paper's benchmark): {args.n:,} training points, {args.n_test:,} test points, "
          f"RBF gamma = {args.gamma:g}.")
    print(f"Each row trains both on the same random subsample: coresvm CoreSVC(solver='{args.solver}', C={args.C:g}, "
          f"tol={args.tol:g}{budget}) and scikit-learn SVC(C={args.svc_C:g}).")
    print("CoreSVC's C weighs squared slacks (an L2-SVM), so it is not SVC's C; each is a good value for its model.")

    # Numba compiles coresvm's solver loops on first use (cached on disk afterwards). Compile them
    # here, on another draw, for both size classes: problems whose kernel fits cache_size run the
    # compiled small-problem path, larger ones the core-set loop.
    rng = np.random.default_rng(args.seed)
    sizes = [max(2, int(round(f * args.n))) for f in args.fractions]
    warm_sizes = sorted({min(size, 2_000) for size in sizes} | {min(size, 8_000) for size in sizes})
    start = time.perf_counter()
    for size in warm_sizes:
        X_warm, y_warm = make_checkerboard(size, random_state=args.seed + 2)
        timed_fit(clone(core).set_params(max_time=None if args.max_time is None else max(args.max_time, 5.0)),
                  X_warm, y_warm)
    print(f"(coresvm's solver loops compiled or loaded from the cache first: {time.perf_counter() - start:.1f} s, "
          "not included below)")
    print()
    print(f"{'':>20}{f'coresvm CoreSVC({args.solver})':^29}  {'scikit-learn SVC':^29}")
    print(f"{'subsample':>9}{'rows':>11}{'time (s)':>10}{'test acc':>11}{'#SV':>8}  "
          f"{'time (s)':>10}{'test acc':>11}{'#SV':>8}")
    svc_seconds = 0.0
    for fraction, size in zip(args.fractions, sizes, strict=True):
        rows = rng.choice(args.n, size=size, replace=False)
        rows.sort()
        line = f"{100 * fraction:>8g}%{size:>11,}"
        model = clone(core)
        line += cells(timed_fit(model, X[rows], y[rows]), model, " (cut)" if model.fit_status_ else "")
        baseline = clone(svc)
        svc_seconds = timed_fit(baseline, X[rows], y[rows])
        print(line + "  " + cells(svc_seconds, baseline), flush=True)
    if args.fractions[-1] < 1.0 and not args.no_full:
        model = clone(core).set_params(max_time=svc_seconds)
        seconds = timed_fit(model, X, y)
        print(f"{'all':>9}{args.n:>11,}" + cells(seconds, model)
              + f"  coresvm on all rows in the time SVC took on {100 * args.fractions[-1]:g}%")
    print()
    print("Times are wall-clock seconds on this machine; '(cut)' marks a fit stopped by --max-time.")
    print("'coresvm demo --help' lists the options (data size, subsamples, C, gamma, solver).")
    return 0

