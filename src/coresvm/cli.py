"""The ``coresvm`` command line.

Subcommands so far: ``demo`` (the README's first command).  Exit codes: 0 on
success, 2 on a usage or input error with one line on stderr.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

import numpy as np


def _demo(args: argparse.Namespace) -> int:
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.svm import SVC

    from . import CoreSVC
    from .datasets import make_checkerboard

    X, y = make_checkerboard(args.n, random_state=args.seed)
    X_test, y_test = make_checkerboard(args.n_test, random_state=args.seed + 1)
    print(f"4x4 checkerboard: {args.n:,} training points, {args.n_test:,} test points (the CVM paper's benchmark)")
    print(f"{'method':<34}{'train time (s)':>15}{'test acc (%)':>14}{'#SV':>8}")

    model = CoreSVC(
        C=args.C, gamma=args.gamma, solver=args.solver, search="random", tol=args.tol,
        max_time=args.max_time, random_state=args.seed,
    )
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    fit_time = time.perf_counter() - start
    accuracy = 100 * model.score(X_test, y_test)
    note = "" if model.fit_status_ == 0 else " (time budget reached)"
    label = f"coresvm CoreSVC({args.solver})"
    print(f"{label:<34}{fit_time:>15.2f}{accuracy:>14.2f}{len(model.support_):>8d}{note}")

    rng = np.random.default_rng(args.seed)
    n_sub = max(2, int(args.svc_fraction * args.n))
    rows = rng.choice(args.n, size=n_sub, replace=False)
    svc = SVC(C=args.svc_C, gamma=args.gamma)
    start = time.perf_counter()
    svc.fit(X[rows], y[rows])
    svc_time = time.perf_counter() - start
    svc_label = f"scikit-learn SVC on {100 * args.svc_fraction:g}% ({n_sub:,})"
    print(f"{svc_label:<34}{svc_time:>15.2f}{100 * svc.score(X_test, y_test):>14.2f}{len(svc.support_):>8d}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="coresvm",
        description="Kernel SVMs for large data by core-set and Frank-Wolfe methods on the unit simplex.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = sub.add_parser(
        "demo",
        help="train on a generated checkerboard and compare with scikit-learn SVC on a subsample",
        description="Train CoreSVC on the 4x4 checkerboard of the CVM paper and print time, test accuracy "
        "and #SV, with scikit-learn SVC on a random subsample beside it.",
    )
    demo.add_argument("--n", type=int, default=1_000_000, help="training points (default 1,000,000)")
    demo.add_argument("--n-test", type=int, default=100_000, help="test points (default 100,000)")
    demo.add_argument("-c", "--C", type=float, default=10000.0, help="CoreSVC's L2-SVM C (default 10000)")
    demo.add_argument("-g", "--gamma", type=float, default=2.0, help="RBF gamma for both methods (default 2)")
    demo.add_argument(
        "--solver", default="coreset", choices=["coreset", "cvm", "fw", "mfw", "swap", "partan"], help="solver"
    )
    demo.add_argument("-e", "--tol", type=float, default=1e-2, help="relative duality-gap tolerance")
    demo.add_argument("--max-time", type=float, default=20.0, help="CoreSVC time budget in seconds (default 20)")
    demo.add_argument("--svc-fraction", type=float, default=0.02, help="SVC subsample fraction (default 0.02)")
    demo.add_argument("--svc-C", type=float, default=100.0, help="SVC's C (default 100)")
    demo.add_argument("--seed", type=int, default=0, help="random seed")
    demo.set_defaults(handler=_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return args.handler(args)
    except (ValueError, OSError) as error:
        print(f"coresvm {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
