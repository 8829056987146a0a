"""Multiclass benchmark: CoreSVC's decompositions vs scikit-learn's SVC on USPS, letter and pendigits.

For every dataset one run trains, on the official training file and scored on the test file,

* scikit-learn ``SVC`` with the literature parameters (USPS: C=4, gamma=2^-7; letter: C=16,
  gamma=2; pendigits, features scaled to [0, 1]: C=16, gamma=2, our choice);
* ``CoreSVC(multiclass=mode, n_jobs=j)`` for every ``--modes`` and ``--n-jobs`` value, with
  the same RBF gamma.  CoreSVC's C is the L2-SVM's C (README, "What C means here"), not
  SVC's: it is chosen per dataset on a validation split *of the training set* (hold out 20%,
  stratified; fit one-vs-one for every C of ``--C-grid``; keep the best validation accuracy,
  the smaller C on ties).  ``tol`` is ``--tol`` for every fit.

A mode CoreSVC does not know (it raises ValueError naming ``multiclass``, e.g. 'joint'
before that branch is merged) is skipped and reported as such.  Results go to
``benchmarks/results/multiclass.md`` (also printed).  Timings on a shared machine are noisy:
compare the ratios measured in one run.

Run from the repository root::

    python benchmarks/multiclass_benchmark.py
    python benchmarks/multiclass_benchmark.py --datasets usps --modes ovo --n-jobs 1,2 --C-grid 16
    python benchmarks/multiclass_benchmark.py --modes ovo --n-jobs 1,2 --repeats 3 --ceiling

``--ceiling`` also measures what two threads can gain on the machine at that moment (a pure GIL-free
loop, and the pairs' compiled solves alone, each on 1 vs 2 threads) and adds it to the results.
"""

from __future__ import annotations

import argparse
import gzip
import lzma
import os
import platform
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from numba import njit
from sklearn.datasets import load_svmlight_file
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from sklearn.svm import SVC

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from coresvm.datasets import datasets_dir  # noqa: E402
from coresvm.kernels import KernelSpec, single_threaded_blas  # noqa: E402
from coresvm.multiclass import n_problems, one_vs_one_problems  # noqa: E402
from coresvm.solvers.dense import run_dense_rows  # noqa: E402
from coresvm.svc import CoreSVC  # noqa: E402


def _dense_text(path: Path):
    values = np.loadtxt(gzip.open(path, "rt"))
    return values[:, 1:], values[:, 0].astype(np.int64)


def _libsvm(path: Path, n_features: int, scale: float = 1.0):
    X, y = load_svmlight_file(lzma.open(path, "rb"), n_features=n_features)
    return X.toarray() * scale, y.astype(np.int64)


def load_usps(root: Path):
    """USPS (zip.train / zip.test): 256 grey values in [-1, 1], used as they are."""
    return _dense_text(root / "zip.train.gz") + _dense_text(root / "zip.test.gz")


def load_letter(root: Path):
    """letter.scale: LIBSVM's scaling to [-1, 1]."""
    return _libsvm(root / "letter.scale.xz", 16) + _libsvm(root / "letter.scale.t.xz", 16)


def load_pendigits(root: Path):
    """pendigits: integer values 0-100, divided by 100."""
    return _libsvm(root / "pendigits.xz", 16, 0.01) + _libsvm(root / "pendigits.t.xz", 16, 0.01)


DATASETS = {
    "usps": (load_usps, 4.0, 2.0**-7),
    "letter": (load_letter, 16.0, 2.0),
    "pendigits": (load_pendigits, 16.0, 2.0),
}


def timed_fit(model, X, y, repeats: int = 1):
    """Wall and CPU seconds (all threads of this process), each the least of ``repeats`` fits.

    The model is the same each time (fixed random_state).  On a machine shared with other
    jobs the wall time mostly measures waiting for a core; the CPU time of a one-thread run
    is what it would take on an idle machine.
    """
    best_wall = best_cpu = np.inf
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(X, y)
        model.last_fit_wall_ = time.perf_counter() - start  # (benchmark only) for compiled_share
        best_wall = min(best_wall, model.last_fit_wall_)
        best_cpu = min(best_cpu, time.process_time() - start_cpu)
    return best_wall, best_cpu


def interleaved_fits(models: dict, X, y, repeats: int) -> dict:
    """``{key: (wall, CPU)}``, each the least of ``repeats`` fits; the models take turns in every repeat, so
    that a change of the machine's load between repeats hits all of them alike (ratios stay comparable)."""
    best = {key: (np.inf, np.inf) for key in models}
    for _ in range(repeats):
        for key, model in models.items():
            wall, cpu = timed_fit(model, X, y)
            best[key] = (min(best[key][0], wall), min(best[key][1], cpu))
    return best


def compiled_share(model) -> float:
    """Of the last fit's wall time, the share spent in the sub-problems' solver calls (``solver_info_`` times).

    With ``n_jobs=1`` on the one-vs-one fast path those calls are the GIL-free compiled solves, so the rest is
    the work that two threads cannot share (Amdahl: at most ``1 / (1 - share / 2)`` faster on 2 cores).
    """
    return sum(info["time"] for info in model.solver_info_) / model.last_fit_wall_


@njit(nogil=True, cache=True)
def _arithmetic(n):
    """A GIL-free loop that touches no memory: what two threads can gain at best on this machine now."""
    total = 0.0
    for i in range(n):
        total += np.sqrt(i + total * 1e-9)
    return total


def _on_threads(function, tasks, n_threads: int) -> float:
    """Wall seconds to run ``function`` on every task with ``n_threads`` threads."""
    start = time.perf_counter()
    if n_threads == 1:
        for task in tasks:
            function(task)
    else:
        with ThreadPoolExecutor(n_threads) as pool:
            list(pool.map(function, tasks))
    return time.perf_counter() - start


def thread_ceiling(X, y, C, gamma, tol, seed, repeats: int):
    """Speed-ups of 2 threads over 1 measured now (the best of ``repeats`` each): a pure arithmetic nogil loop,
    and the one-vs-one pairs' compiled solves alone (run_dense_rows on prepared sub-problems, no fit around)."""
    _arithmetic(10)
    loops = [2_000_000] * 20
    classes, y_index = np.unique(y, return_inverse=True)
    problems = one_vs_one_problems(y_index, np.ones(len(y), dtype=bool), np.broadcast_to(np.float64(C), (len(y),)),
                                   len(classes), np.arange(n_problems("ovo", len(classes))))
    model = CoreSVC(C=C, gamma=gamma, tol=tol, random_state=seed)
    spec = KernelSpec("rbf", gamma, 0.0, 3)

    def solve(problem):
        options = model.solver_options(len(problem.rows), problem.seed, np.inf)
        run_dense_rows(X, problem.rows, problem.signs, problem.C, spec, True, 0.0, options)

    with single_threaded_blas():
        solve(problems[0])  # compiled (or loaded) before timing
        times = {(kind, n): np.inf for kind in ("loop", "pairs") for n in (1, 2)}
        for _ in range(repeats):
            for n in (1, 2):
                times["loop", n] = min(times["loop", n], _on_threads(_arithmetic, loops, n))
                times["pairs", n] = min(times["pairs", n], _on_threads(solve, problems, n))
    return times["loop", 1] / times["loop", 2], times["pairs", 1] / times["pairs", 2]


def select_C(X, y, gamma, grid, tol, seed, n_jobs):
    """The CoreSVC C with the best accuracy on a stratified 20% of the training set."""
    X_fit, X_val, y_fit, y_val = train_test_split(X, y, test_size=0.2, random_state=seed, stratify=y)
    scores = {}
    for C in grid:
        model = CoreSVC(C=C, gamma=gamma, tol=tol, random_state=seed, n_jobs=n_jobs)
        timed_fit(model, X_fit, y_fit)
        scores[C] = model.score(X_val, y_val)
    best = max(grid, key=lambda C: (scores[C], -C))
    return best, scores


def run_dataset(name, args, rows, ceilings):
    loader, svc_C, gamma = DATASETS[name]
    X_train, y_train, X_test, y_test = loader(Path(args.data) if args.data else datasets_dir())
    print(f"== {name}: train {X_train.shape}, test {X_test.shape}, gamma {gamma:g}", flush=True)
    # warm-up: the first fit of a process loads (or compiles) the Numba functions
    for n_jobs in args.n_jobs:
        timed_fit(CoreSVC(gamma=gamma, n_jobs=n_jobs, random_state=0), X_train[:300], y_train[:300])
    if len(args.C_grid) == 1:
        C, scores = args.C_grid[0], {}
    else:
        C, scores = select_C(X_train, y_train, gamma, args.C_grid, args.tol, args.seed, max(args.n_jobs))
    print(f"   CoreSVC C = {C:g} (validation accuracy per C: "
          + ", ".join(f"{c:g}: {s:.4f}" for c, s in scores.items()) + ")", flush=True)

    if args.ceiling:  # before the fits, and again after them (the load of a shared machine changes)
        ceilings.append([name, *thread_ceiling(X_train, y_train, C, gamma, args.tol, args.seed, args.repeats)])
    svc = SVC(C=svc_C, gamma=gamma)
    svc_time, svc_cpu = timed_fit(svc, X_train, y_train, args.repeats)
    svc_accuracy = svc.score(X_test, y_test)
    rows.append((name, f"sklearn SVC (C={svc_C:g})", 1, svc_time, svc_cpu, 1.0, 1.0, svc_accuracy, 0.0,
                 int(svc.n_support_.sum()), ""))
    print(f"   SVC {svc_time:.2f} s (CPU {svc_cpu:.2f} s), accuracy {svc_accuracy:.4f}, #SV {svc.n_support_.sum()}",
          flush=True)
    for mode in args.modes:
        models = {n_jobs: CoreSVC(C=C, gamma=gamma, tol=args.tol, multiclass=mode, n_jobs=n_jobs,
                                  random_state=args.seed) for n_jobs in args.n_jobs}
        try:
            times = interleaved_fits(models, X_train, y_train, args.repeats)
        except ValueError as error:
            if "multiclass" not in str(error):
                raise
            rows.append((name, f"CoreSVC {mode}", args.n_jobs[0], np.nan, np.nan, np.nan, np.nan, np.nan, np.nan, 0,
                         "skipped: this build does not know the mode"))
            print(f"   {mode}: skipped ({error})", flush=True)
            continue
        for n_jobs, model in models.items():
            fit_time, cpu_time = times[n_jobs]
            accuracy = model.score(X_test, y_test)
            note = "" if model.fit_status_ == 0 else "not converged"
            if mode == "ovo" and n_jobs == 1:
                share = compiled_share(model)
                note = (note + "; " if note else "") + (f"solver calls {100 * share:.0f}% of the fit (2-thread bound "
                                                        f"{1 / (1 - share / 2):.2f}x)")
            rows.append((name, f"CoreSVC {mode} (C={C:g})", n_jobs, fit_time, cpu_time, svc_time / fit_time,
                         svc_cpu / cpu_time, accuracy, 100 * (accuracy - svc_accuracy), len(model.support_), note))
            print(f"   {mode} n_jobs={n_jobs}: {fit_time:.2f} s, CPU {cpu_time:.2f} s (SVC/this: wall "
                  f"{svc_time / fit_time:.2f}, CPU {svc_cpu / cpu_time:.2f}), accuracy {accuracy:.4f}, "
                  f"#SV {len(model.support_)} {note}", flush=True)
    if args.ceiling:
        ceilings[-1] += thread_ceiling(X_train, y_train, C, gamma, args.tol, args.seed, args.repeats)
        print("   2 threads / 1 thread (before / after the fits): pure nogil loop {1:.2f}x / {3:.2f}x, the pairs' "
              "compiled solves alone {2:.2f}x / {4:.2f}x".format(*ceilings[-1]), flush=True)


def markdown(rows, args, ceilings=()) -> str:
    lines = [
        "# Multiclass: CoreSVC decompositions vs scikit-learn SVC",
        "",
        f"Command: `python benchmarks/multiclass_benchmark.py {' '.join(sys.argv[1:])}`".rstrip(),
        "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average at the end "
        f"{os.getloadavg()[0]:.1f} (shared machine: compare ratios within this run). RBF gamma as SVC's; CoreSVC's "
        f"C (L2-SVM C, not SVC's) chosen on a stratified 20% validation split of the training set from "
        f"{[float(c) for c in args.C_grid]}; tol={args.tol:g}; random_state={args.seed}. Accuracy on the test file; "
        f"times: the least of {args.repeats} fits (the n_jobs values of a mode take turns in each repeat). "
        "CPU = process CPU time over all threads (with n_jobs=2 it adds both threads' time; on a saturated machine "
        "the wall time mostly measures waiting for a core).",
        "",
        "| dataset | method | n_jobs | wall (s) | CPU (s) | SVC wall / wall | SVC CPU / CPU | accuracy | vs SVC (pp) "
        "| #SV | note |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name, method, n_jobs, wall, cpu, wall_ratio, cpu_ratio, accuracy, delta, n_sv, note in rows:
        if np.isnan(wall):
            lines.append(f"| {name} | {method} | {n_jobs} | - | - | - | - | - | - | - | {note} |")
            continue
        lines.append(f"| {name} | {method} | {n_jobs} | {wall:.2f} | {cpu:.2f} | {wall_ratio:.2f} | {cpu_ratio:.2f} | "
                     f"{100 * accuracy:.2f}% | {delta:+.2f} | {n_sv} | {note} |")
    if ceilings:
        lines += ["", "Thread ceiling measured in the same run, before and after each dataset's fits: speed of 2 "
                  f"threads over 1 (the best of {args.repeats} each; `--ceiling`) for a pure arithmetic GIL-free "
                  "Numba loop and for the one-vs-one pairs' compiled solves alone (`run_dense_rows` in a thread "
                  "pool, no fit around them).", "",
                  "| dataset | pure nogil loop, before / after | pairs' compiled solves, before / after |",
                  "|---|---:|---:|"]
        lines += [f"| {name} | {loop:.2f}x / {loop_after:.2f}x | {pairs:.2f}x / {pairs_after:.2f}x |"
                  for name, loop, pairs, loop_after, pairs_after in ceilings]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", default="usps,letter,pendigits")
    parser.add_argument("--modes", default="ovo,ovr,joint")
    parser.add_argument("--n-jobs", default="1,2")
    parser.add_argument("--C-grid", default="4,16,64,256,1024", help="CoreSVC C values to validate (one: no search)")
    parser.add_argument("--tol", type=float, default=1e-2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=2, help="fits per method; the fastest is reported")
    parser.add_argument("--data", default=None, help="datasets folder (default: ../shared/datasets)")
    parser.add_argument("--ceiling", action="store_true",
                        help="also time a pure nogil loop and the pairs' compiled solves on 1 vs 2 threads")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "multiclass.md"))
    args = parser.parse_args(argv)
    args.modes = [m for m in args.modes.split(",") if m]
    args.n_jobs = [int(j) for j in args.n_jobs.split(",")]
    args.C_grid = [float(c) for c in args.C_grid.split(",")]
    rows, ceilings = [], []
    for name in args.datasets.split(","):
        run_dataset(name, args, rows, ceilings)
    text = markdown(rows, args, ceilings)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
