"""Where a pattern search's warm starts pay: one fit's time by where its start comes from.

``PatternSearchCV(warm_start=True)`` starts each fit from an earlier model (see
``coresvm.model_selection._CandidateEvaluator``): of the same split one grid step away along C
or gamma, from far away (the first, large pattern steps), or of another split at the same point
(gsvm's support-vector reuse across folds). This script times single fits of ``CoreSVC`` on one
split of the search benchmark's data (same subsample, [0, 1] scaling and stratified folds) from
each kind of start, against a cold fit, and writes a markdown table: the best of ``--repeats``
CPU times per fit, the saving against cold, and the solver's steps.

    python benchmarks/warm_start_study.py --datasets ijcnn1,usps --n-train 1500 --folds 3
"""

from __future__ import annotations

import argparse
import copy
import time
import warnings
from pathlib import Path

import numpy as np
from search_benchmark import load, subsample  # puts this checkout's src first on sys.path
from sklearn.model_selection import StratifiedKFold
from sklearn.preprocessing import MinMaxScaler

from coresvm import CoreSVC

# (C, gamma) points where the pattern search on these data spends its fits (benchmarks/results/search.md)
POINTS = [(4.0, 4.0**-2), (64.0, 1.0), (1024.0, 4.0), (1.0, 4.0**-1)]
GRID_STEP = 4.0  # gsvm's grid: neighbouring C or gamma values differ by a factor 4


def starts(C: float, gamma: float) -> dict[str, tuple[str, float, float]]:
    """Kind of start -> (split it comes from, its C, its gamma)."""
    return {
        "C one step below": ("same", C / GRID_STEP, gamma),
        "C one step above": ("same", C * GRID_STEP, gamma),
        "gamma one step below": ("same", C, gamma / GRID_STEP),
        "gamma four steps below": ("same", C, gamma / GRID_STEP**4),
        "other split, same point": ("other", C, gamma),
    }


def best_cpu_time(fit, repeats: int) -> tuple[float, CoreSVC]:
    best, model = np.inf, None
    for _ in range(repeats):
        start = time.process_time()
        model = fit()
        best = min(best, time.process_time() - start)
    return best, model


def study(name: str, args) -> list[str]:
    X, y = subsample(*load(name, 0), args.n_train, args.seed)
    X = MinMaxScaler().fit_transform(X)
    splits = list(StratifiedKFold(args.folds, shuffle=True, random_state=args.seed).split(X, y))
    (train, _), (other_train, _) = splits[0], splits[1]
    row_in_train = np.full(len(y), -1)
    row_in_train[train] = np.arange(len(train))
    X_train, y_train = X[train], y[train]
    CoreSVC().fit(X_train, y_train)  # compile outside the timings
    lines = [f"### {name}: {len(train)} training rows of split 0 ({args.n_train} rows, {args.folds}-fold)", "",
             "| point (C, gamma) | start | CPU time (ms) | vs cold | solver steps |", "|---|---|--:|--:|--:|"]
    for C, gamma in POINTS:
        cold_time, cold = best_cpu_time(lambda C=C, gamma=gamma: CoreSVC(C=C, gamma=gamma).fit(X_train, y_train),
                                        args.repeats)
        lines.append(f"| ({C:g}, {gamma:g}) | cold | {1000 * cold_time:.1f} | | {int(np.sum(cold.n_iter_))} |")
        for kind, (split, C0, gamma0) in starts(C, gamma).items():
            if split == "same":
                start = CoreSVC(C=C0, gamma=gamma0, warm_start=True).fit(X_train, y_train)
            else:
                other = CoreSVC(C=C0, gamma=gamma0, warm_start=True).fit(X[other_train], y[other_train])
                state = other.warm_start_state().moved_to_rows(row_in_train[other_train])
                start = CoreSVC(C=C0, gamma=gamma0, warm_start=True).set_warm_start_state(state)

            def warm_fit(start=start, C=C, gamma=gamma):
                return copy.deepcopy(start).set_params(C=C, gamma=gamma).fit(X_train, y_train)

            warm_time, warm = best_cpu_time(warm_fit, args.repeats)
            lines.append(f"| ({C:g}, {gamma:g}) | {kind} (C={C0:g}, gamma={gamma0:g}) | {1000 * warm_time:.1f} "
                         f"| {100 * (1 - warm_time / cold_time):+.0f}% | {int(np.sum(warm.n_iter_))} |")
    return lines + [""]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="ijcnn1", help="comma-separated: usps, letter, ijcnn1")
    parser.add_argument("--n-train", type=int, default=1500)
    parser.add_argument("--folds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5, help="fits per timing (the best CPU time is kept)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default=str(Path(__file__).parent / "results" / "warm_start_study.md"))
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # ConvergenceWarning at extreme grid points
    text = [f"## `python benchmarks/warm_start_study.py --datasets {args.datasets} --n-train {args.n_train} "
            f"--folds {args.folds} --repeats {args.repeats}`", ""]
    for name in args.datasets.split(","):
        text += study(name, args)
    output = "\n".join(text)
    print(output)
    Path(args.output).write_text(output + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
