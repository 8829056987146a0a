"""MNSVM, SphereSVM and BVM over a whole (C, gamma) grid: the thesis's comparison of search time.

Strack 2013 (sec. 7.1.3-7.1.4) compares the gsvm solvers by the time of a whole nested
cross-validation, i.e. summed over every (C, gamma) of gsvm's grid, not at one parameter pair:
MNSVM "about 2x more efficient than BVM", "almost always faster than SphereSVM, about 2x on web
and reuters" (both with the MEB stopping rule, sec. 7.1.4).  This script times one fit per grid
point and solver on a random subset of the training rows, with scikit-learn's SVC at the same
points in the same run, and reports per solver: the summed training time, its ratio to MNSVM's,
fits cut by ``--max-time``, and the mean and best test accuracy over the grid.

Solvers are named as in ``run_benchmarks.py`` (``mnsvm-meb`` is ``CoreSVC(solver='mnsvm',
stopping='meb')``); every CoreSVC uses its defaults otherwise.  Example (repository root; about
12 minutes on the benchmark machine)::

    python benchmarks/gsvm_grid_time.py --datasets w8a,ijcnn1 --n-train 5000
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.svm import SVC

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_benchmarks as rb  # noqa: E402
from provenance import git_revision  # noqa: E402

GSVM_C = [4.0**k for k in range(-2, 6)]  # gsvm's default grid (Strack 2013, gsvm options -c/-C/-r)
GSVM_GAMMA = [4.0**k for k in range(-5, 3)]


def fit_once(solver: str, C: float, gamma: float, X, y, X_test, y_test, max_time: float) -> tuple[float, float, bool]:
    """(seconds, test accuracy %, cut by max_time) of one fit."""
    if solver == "svc":
        model = SVC(C=C, gamma=gamma, cache_size=200)
    else:
        opts = argparse.Namespace(tol=1e-2, cache_size=200.0)
        model = rb.make_coresvc(solver, "auto", C, gamma, opts, max_time)
    seconds, cut = rb.fit_model(model, X, y)
    return seconds, 100.0 * rb.accuracy(model, X_test, y_test), cut


def run(name: str, args: argparse.Namespace) -> list[str]:
    data = rb.load_dataset(name, 0, 0)
    rows = np.sort(np.random.RandomState(args.seed).permutation(data.X_train.shape[0])[: args.n_train])
    X, y = data.X_train[rows], data.y_train[rows]
    solvers = args.solvers + (["svc"] if args.svc else [])
    for solver in solvers[:-1] if args.svc else solvers:  # compile before timing
        fit_once(solver, 1.0, 1.0, X[:300], y[:300], X[:10], y[:10], 5.0)
    times = {s: np.zeros((len(args.c), len(args.gamma))) for s in solvers}
    accuracy = {s: np.zeros_like(times[s]) for s in solvers}
    cut = {s: 0 for s in solvers}
    start = time.perf_counter()
    for i, C in enumerate(args.c):
        for j, gamma in enumerate(args.gamma):
            for solver in solvers:
                seconds, acc, was_cut = fit_once(solver, C, gamma, X, y, data.X_test, data.y_test, args.max_time)
                times[solver][i, j], accuracy[solver][i, j] = seconds, acc
                cut[solver] += was_cut
            line = ", ".join(f"{s} {times[s][i, j]:.2f}s {accuracy[s][i, j]:.2f}%" for s in solvers)
            rb.log(f"  {name} C={C:g} gamma={gamma:g}: {line}")
    reference = times[args.solvers[0]].sum()
    lines = [
        f"### {name}: {len(rows)} training rows, {data.X_test.shape[0]} test rows, "
        f"{len(args.c)} x {len(args.gamma)} grid ({time.perf_counter() - start:.0f} s)",
        "",
        f"| solver | total time (s) | vs {args.solvers[0]} | fits cut | mean test acc (%) | best test acc (%) |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    for s in solvers:
        lines.append(f"| {s} | {times[s].sum():.1f} | {times[s].sum() / reference:.2f}x | {cut[s]} | "
                     f"{accuracy[s].mean():.2f} | {accuracy[s].max():.2f} |")
    lines += ["", "Time per grid point (s), one column per solver (" + ", ".join(solvers) + "):", "",
              "| C | gamma | " + " | ".join(solvers) + " |", "|--:|--:|" + "--:|" * len(solvers)]
    for i, C in enumerate(args.c):
        for j, gamma in enumerate(args.gamma):
            lines.append(f"| {C:g} | {gamma:g} | " + " | ".join(f"{times[s][i, j]:.2f}" for s in solvers) + " |")
    return lines + [""]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", default="w8a,ijcnn1")
    parser.add_argument("--n-train", type=int, default=5000, help="random training rows (default %(default)s)")
    parser.add_argument("--solvers", default="mnsvm-meb,sphere,bvm", help="the first is the reference")
    parser.add_argument("--c", default=",".join(f"{c:g}" for c in GSVM_C), help="C grid (default: gsvm's)")
    parser.add_argument("--gamma", default=",".join(f"{g:g}" for g in GSVM_GAMMA), help="gamma grid (gsvm's)")
    parser.add_argument("--max-time", type=float, default=20.0, help="per CoreSVC fit (default %(default)s s)")
    parser.add_argument("--no-svc", dest="svc", action="store_false", help="skip scikit-learn's SVC")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default=str(rb.REPO_ROOT / "benchmarks" / "results" / "gsvm" / "grid_time.md"))
    args = parser.parse_args(argv)
    args.solvers = args.solvers.split(",")
    args.c, args.gamma = rb.parse_floats(args.c), rb.parse_floats(args.gamma)
    rb.import_coresvm()
    out = [f"## `{' '.join(['python', *sys.orig_argv[1:]])}`", "",
           f"git {git_revision()}; one fit per grid point and solver, CoreSVC max_time = {args.max_time:g} s; "
           "SVC has no time limit.", ""]
    for name in args.datasets.split(","):
        out += run(name, args)
    text = "\n".join(out)
    print(text)
    path = Path(args.output)
    previous = path.read_text() if path.exists() else ""
    title = "# gsvm solvers over a (C, gamma) grid (`benchmarks/gsvm_grid_time.py`)\n\n"
    path.write_text(title + text + "\n" + previous.removeprefix(title))


if __name__ == "__main__":
    main()
