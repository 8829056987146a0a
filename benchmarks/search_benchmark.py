"""Pattern search vs grid search, and warm vs cold fits, over gsvm's 8x8 grid (Strack 2013, Sec. 7.7).

For every dataset, on the same (optionally subsampled) training set and the same stratified,
shuffled folds, over gsvm's grid (C = 4^-2..4^5, gamma = 4^-5..4^2):

* ``GridSearchCV`` (scikit-learn, all 64 points);
* ``PatternSearchCV`` with cold fits (``warm_start=False``);
* ``PatternSearchCV`` with warm-started fits, when the estimator has a ``warm_start`` parameter
  (CoreSVC after the multiclass branch's ``warm_start=True``), else the row says "n/a";

each reporting the number of fits, the wall time of the whole search (with the final refit),
the chosen (C, gamma), the CV score and the chosen model's accuracy on the test file. Features are
scaled to [0, 1] on the training subsample (the thesis's preprocessing). The markdown table goes to
``--output`` (default ``benchmarks/results/search.md``, appended) and to stdout.

Run from the repository root, e.g.::

    python benchmarks/search_benchmark.py --datasets usps --n-train 1500 --folds 3
    python benchmarks/search_benchmark.py --datasets usps,letter,ijcnn1 --n-train 2000 --estimator svc

Data (``zip.train.gz``/``zip.test.gz`` for USPS, ``letter.scale(.t).xz``, ``ijcnn1(.t).xz``) are read
from ``$CORESVM_DATASETS`` or ``../shared/datasets``.
"""

from __future__ import annotations

import argparse
import gzip
import lzma
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.datasets import load_svmlight_file
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.preprocessing import MinMaxScaler

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # this checkout's coresvm, not an installed one
from provenance import git_revision  # noqa: E402

from coresvm import CoreSVC  # noqa: E402
from coresvm.datasets import datasets_dir  # noqa: E402
from coresvm.model_selection import GSVM_PARAM_GRID, PatternSearchCV  # noqa: E402

DATASETS = {
    # name: (train file, test file, number of features or None for dense text)
    "usps": ("zip.train.gz", "zip.test.gz", None),
    "letter": ("letter.scale.xz", "letter.scale.t.xz", 16),
    "ijcnn1": ("ijcnn1.xz", "ijcnn1.t.xz", 22),
}


def load(name: str, part: int) -> tuple[np.ndarray, np.ndarray]:
    path = datasets_dir() / DATASETS[name][part]
    n_features = DATASETS[name][2]
    if n_features is None:  # USPS: dense text, the digit in the first column
        data = np.loadtxt(gzip.open(path, "rt"))
        return data[:, 1:], data[:, 0].astype(np.int64)
    X, y = load_svmlight_file(lzma.open(path, "rb"), n_features=n_features)
    return X.toarray(), y.astype(np.int64)


def subsample(X, y, n: int | None, seed: int):
    """A stratified random subsample (LIBSVM files are ordered; never take the first rows)."""
    if n is None or n >= len(y):
        return X, y
    rng = np.random.default_rng(seed)
    keep = []
    for label in np.unique(y):
        rows = np.flatnonzero(y == label)
        share = max(1, round(n * len(rows) / len(y)))
        keep.append(rng.choice(rows, size=min(share, len(rows)), replace=False))
    keep = np.sort(np.concatenate(keep))
    return X[keep], y[keep]


class ConcaveSurface(BaseEstimator):
    """A fake estimator for ``--synthetic``: its score is a concave function of (log4 C, log4 gamma)."""

    def __init__(self, C=1.0, gamma=1.0, peak=(0.0, 0.0)):
        self.C, self.gamma, self.peak = C, gamma, peak

    def fit(self, X, y):
        return self

    def score(self, X, y):
        log_c, log_gamma = np.log(self.C) / np.log(4), np.log(self.gamma) / np.log(4)
        return -((log_c - self.peak[0]) ** 2 + ((log_gamma - self.peak[1]) / 1.5) ** 2)


def synthetic(n_surfaces: int, seed: int) -> str:
    """Points evaluated and grid optimum found, over random concave surfaces, per n_restarts."""
    rng = np.random.default_rng(seed)
    peaks = [(rng.uniform(-2.5, 5.5), rng.uniform(-5.5, 2.5)) for _ in range(n_surfaces)]
    X, y = np.zeros((8, 1)), np.arange(8) % 2
    grid = [(c, g) for c in GSVM_PARAM_GRID["C"] for g in GSVM_PARAM_GRID["gamma"]]
    lines = [f"### {n_surfaces} random concave surfaces over the 8x8 grid (seed {seed})", "",
             "| n_restarts | mean points | max points | grid optimum found |", "|---|---|---|---|"]
    for restarts in range(4):
        counts, found = [], 0
        for peak in peaks:
            search = PatternSearchCV(ConcaveSurface(peak=peak), cv=2, n_restarts=restarts, refit=False).fit(X, y)
            best = max(grid, key=lambda p, peak=peak: ConcaveSurface(*p, peak=peak).score(X, y))
            found += (search.best_params_["C"], search.best_params_["gamma"]) == best
            counts.append(len(search.cv_results_["params"]))
        lines.append(f"| {restarts} | {np.mean(counts):.1f} | {max(counts)} | {found}/{n_surfaces} |")
    return "\n".join(lines)


def replay_pattern(surface: dict, **settings) -> tuple[int, tuple]:
    """Run the pattern search's walk on a grid search's CV surface (no fits): (points, chosen point)."""
    search = PatternSearchCV(None, GSVM_PARAM_GRID, **settings)
    search._axes = list(GSVM_PARAM_GRID.items())
    evaluated = []

    def evaluate(candidates):
        evaluated.extend(candidates)
        return {"mean_test_score": np.array([surface[(p["C"], p["gamma"])] for p in evaluated])}

    search._run_search(evaluate)
    best = max(evaluated, key=lambda p: surface[(p["C"], p["gamma"])])  # first best: GridSearchCV's rule
    return len(evaluated), (best["C"], best["gamma"])


def replay_table(surface: dict) -> str:
    """Points and grid optimum found by each pattern variant, replayed on the grid's CV surface."""
    grid_best = max(surface, key=surface.get)
    lines = ["Pattern variants replayed on the grid search's CV surface (same folds, no fits): points "
             f"evaluated; * = a different point than the grid's ({grid_best[0]:g}, {grid_best[1]:g}).", "",
             "| out_of_grid | restart_probe | n_restarts=0 | 1 | 2 | 3 |", "|---|---|---|---|---|---|"]
    for edges in ("clip", "skip"):
        for probe in (True, False):
            cells = []
            for restarts in range(4):
                n, best = replay_pattern(surface, n_restarts=restarts, out_of_grid=edges, restart_probe=probe)
                cells.append(f"{n}{'' if best == grid_best else '*'}")
            lines.append(f"| {edges} | {'on' if probe else 'off'} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def fold_seed_table(args, X, y, X_test, y_test) -> str:
    """Grid vs default pattern on other fold assignments: how much of a difference is CV noise."""
    lines = [f"Other fold assignments (StratifiedKFold seeds 1..{args.replay_seeds}): grid search, and the default "
             "pattern search replayed on its CV surface; test accuracy of each choice refitted on all training rows.",
             "", "| fold seed | grid: C, gamma, CV, test | pattern: points, C, gamma, CV, test |", "|---|---|---|"]
    for seed in range(1, args.replay_seeds + 1):
        cv = StratifiedKFold(args.folds, shuffle=True, random_state=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            grid = GridSearchCV(make_estimator(args), GSVM_PARAM_GRID, cv=cv, refit=False).fit(X, y)
        surface = {(p["C"], p["gamma"]): float(v) for p, v in zip(grid.cv_results_["params"],
                                                                   grid.cv_results_["mean_test_score"], strict=True)}
        n_points, chosen = replay_pattern(surface, n_restarts=args.n_restarts, out_of_grid=args.out_of_grid,
                                          restart_probe=args.restart_probe == "on")
        cells = []
        for point in (max(surface, key=surface.get), chosen):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = make_estimator(args).set_params(C=point[0], gamma=point[1]).fit(X, y)
            test = float(np.mean(model.predict(X_test) == y_test))
            cells.append(f"{point[0]:g}, {point[1]:g}, {100 * surface[point]:.2f}%, {100 * test:.2f}%")
        lines.append(f"| {seed} | {cells[0]} | {n_points}, {cells[1]} |")
    return "\n".join(lines)


def make_estimator(args):
    if args.estimator == "svc":
        from sklearn.svm import SVC

        return SVC()
    return CoreSVC(solver=args.solver, random_state=0)


def run_search(kind: str, estimator, X, y, X_test, y_test, cv, args) -> dict:
    if kind == "grid":
        search = GridSearchCV(estimator, GSVM_PARAM_GRID, cv=cv, n_jobs=args.n_jobs)
    else:
        if kind == "pattern-warm" and "warm_start" not in estimator.get_params():
            return {"method": kind, "skipped": f"{type(estimator).__name__} has no warm_start parameter"}
        search = PatternSearchCV(estimator, GSVM_PARAM_GRID, cv=cv, n_jobs=args.n_jobs,
                                 n_restarts=args.n_restarts, warm_start=kind == "pattern-warm",
                                 out_of_grid=args.out_of_grid, restart_probe=args.restart_probe == "on",
                                 verbose=args.verbose)
    start, start_cpu = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning of extreme grid corners
        search.fit(X, y)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - start_cpu
    n_points = len(search.cv_results_["params"])
    return {
        "method": kind, "fits": n_points * search.n_splits_, "points": n_points, "time": elapsed, "cpu": cpu,
        "C": search.best_params_["C"], "gamma": search.best_params_["gamma"], "cv": search.best_score_,
        "test": float(np.mean(search.best_estimator_.predict(X_test) == y_test)),
        "fit_time": float(np.sum(search.cv_results_["mean_fit_time"]) * search.n_splits_),
        "warm_fits": int(getattr(search, "n_warm_fits_", 0)),
        "surface": {(p["C"], p["gamma"]): float(v) for p, v in zip(search.cv_results_["params"],
                                                                    search.cv_results_["mean_test_score"],
                                                                    strict=True)},
    }


def warm_up(args, X, y, X_test, y_test) -> None:
    """Untimed searches of each method on a few hundred of the rows first: the compiled solvers' first calls
    compile or load them (seconds), and that would be charged to whichever timed search came first."""
    few, labels = subsample(X, y, min(400, len(y) // 2), args.seed + 1)
    few_test, test_labels = subsample(X_test, y_test, min(200, len(y_test)), args.seed + 1)
    cv = StratifiedKFold(2, shuffle=True, random_state=args.seed)
    quiet = argparse.Namespace(**{**vars(args), "verbose": 0})
    for kind in dict.fromkeys(args.methods.split(",")):
        run_search(kind, make_estimator(args), few, labels, few_test, test_labels, cv, quiet)


def table(name: str, rows: list[dict], n_train: int, n_test: int, folds: int) -> str:
    grid = next((r for r in rows if r["method"] == "grid"), None)
    lines = [f"### {name}: {n_train} training rows (search + refit), {n_test} test rows, {folds}-fold CV", "",
             "| method | points | fits | warm fits | time (s) | CPU (s) | fits vs grid | time vs grid | CPU vs grid "
             "| C | gamma | CV acc | test acc |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "skipped" in r:
            lines.append(f"| {r['method']} | n/a ({r['skipped']}) | | | | | | | | | | | |")
            continue
        ratios = (f"{grid['fits'] / r['fits']:.2f}x | {grid['time'] / r['time']:.2f}x | {grid['cpu'] / r['cpu']:.2f}x"
                  if grid else " | | ")
        lines.append(
            f"| {r['method']} | {r['points']} | {r['fits']} | {r['warm_fits']} | {r['time']:.1f} | {r['cpu']:.1f} "
            f"| {ratios} | {r['C']:g} | {r['gamma']:g} | {100 * r['cv']:.2f}% | {100 * r['test']:.2f}% |")
    cold = [r for r in rows if r["method"] == "pattern-cold"]
    warm = [r for r in rows if r["method"] == "pattern-warm" and "skipped" not in r]
    for key, what in (("time", "wall time"), ("cpu", "CPU time of this process")):
        if cold and warm:
            w, c = np.mean([r[key] for r in warm]), np.mean([r[key] for r in cold])
            lines += ["", f"Warm vs cold pattern search, {what} (mean of {len(warm)} and {len(cold)} runs): "
                      f"{w:.1f} s vs {c:.1f} s, {100 * (1 - w / c):.0f}% less."]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", default="usps", help="comma-separated: " + ",".join(DATASETS))
    parser.add_argument("--n-train", type=int, default=1500, help="stratified training subsample (default 1500)")
    parser.add_argument("--n-test", type=int, default=None, help="test subsample (default: the whole test file)")
    parser.add_argument("--folds", type=int, default=3, help="inner CV folds (thesis: 5)")
    parser.add_argument("--estimator", choices=["coresvc", "svc"], default="coresvc")
    parser.add_argument("--solver", default="coreset", help="CoreSVC solver")
    parser.add_argument("--methods", default="grid,pattern-cold,pattern-warm")
    parser.add_argument("--n-restarts", type=int, default=1)
    parser.add_argument("--out-of-grid", choices=["clip", "skip"], default="clip")
    parser.add_argument("--restart-probe", choices=["on", "off"], default="on")
    parser.add_argument("--replay-seeds", type=int, default=0,
                        help="also N grid searches on other fold assignments, the pattern replayed on each")
    parser.add_argument("--n-jobs", type=int, default=1)
    parser.add_argument("--verbose", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--synthetic", type=int, default=0,
                        help="instead of data: N random concave score surfaces (points evaluated per n_restarts)")
    parser.add_argument("--output", default=str(Path(__file__).parent / "results" / "search.md"))
    args = parser.parse_args(argv)

    sections = [synthetic(args.synthetic, args.seed)] if args.synthetic else []
    for name in ([] if args.synthetic else args.datasets.split(",")):
        X, y = subsample(*load(name, 0), args.n_train, args.seed)
        X_test, y_test = subsample(*load(name, 1), args.n_test, args.seed)
        scaler = MinMaxScaler().fit(X)
        X, X_test = scaler.transform(X), np.clip(scaler.transform(X_test), 0.0, 1.0)
        cv = StratifiedKFold(args.folds, shuffle=True, random_state=args.seed)
        warm_up(args, X, y, X_test, y_test)
        rows = []
        for kind in args.methods.split(","):
            row = run_search(kind, make_estimator(args), X, y, X_test, y_test, cv, args)
            rows.append(row)
            print(name, {k: v for k, v in row.items() if k != "surface"}, flush=True)
        sections.append(table(name, rows, len(y), len(y_test), args.folds))
        grid = next((r for r in rows if r["method"] == "grid"), None)
        if grid is not None:
            sections.append(replay_table(grid["surface"]))
        if args.replay_seeds:
            sections.append(fold_seed_table(args, X, y, X_test, y_test))

    command = "python " + " ".join([Path(sys.argv[0]).as_posix(), *(argv if argv is not None else sys.argv[1:])])
    header = (f"## {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: `{command}`\n\n"
              + ("Estimator: a fake one whose score is the surface. " if args.synthetic else
                 f"Estimator: {args.estimator} (solver {args.solver}), gsvm's 8x8 grid, n_jobs={args.n_jobs}, "
                 f"n_restarts={args.n_restarts}, out_of_grid={args.out_of_grid}, restart_probe={args.restart_probe}; "
                 f"commit {git_revision()}; ")
              + f"{platform.node()}, Python {platform.python_version()}.\n")
    report = header + "\n" + "\n\n".join(sections) + "\n"
    print(report)
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    with output.open("a") as handle:
        handle.write(report + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
