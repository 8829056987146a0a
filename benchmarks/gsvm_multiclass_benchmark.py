"""The gsvm family and CVM on multiclass data (one-vs-one) against scikit-learn's SVC, in one run.

For USPS and letter (loaders and SVC's literature C and gamma from ``multiclass_benchmark.py``)
one run trains

* scikit-learn ``SVC`` (one-vs-one) with the literature parameters;
* ``CoreSVC(solver=s, multiclass='ovo')`` for every ``--solvers`` value, with the same RBF gamma.
  CoreSVC's C is the L2-SVM's C, not SVC's (README, "What C means here"): it is chosen per
  solver on a stratified 20% validation split of the training set from ``--C-grid`` (the
  smaller C on ties), each selection fit limited to ``--select-max-time`` seconds.  The
  solvers run with their defaults (CVM's and the MEB solvers' eps from LibCVM's heuristic,
  MNSVM's adjmn rule with eps 1e-3).

Results go to ``benchmarks/results/gsvm/multiclass.md`` (also printed).  The machine may be
shared: compare ratios measured in one run.

Run from the repository root (about 5 minutes on 2 cores)::

    python benchmarks/gsvm_multiclass_benchmark.py
    python benchmarks/gsvm_multiclass_benchmark.py --datasets usps --solvers mnsvm,sphere --C-grid 256
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

from sklearn.model_selection import train_test_split
from sklearn.svm import SVC

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from multiclass_benchmark import DATASETS, timed_fit  # noqa: E402
from provenance import git_revision  # noqa: E402

from coresvm.datasets import datasets_dir  # noqa: E402
from coresvm.svc import CoreSVC  # noqa: E402

DEFAULT_SOLVERS = "cvm,bvm,sphere,mnsvm"


def core_svc(solver: str, C: float, gamma: float, args, max_time: float) -> CoreSVC:
    return CoreSVC(C=C, gamma=gamma, solver=solver, multiclass="ovo", tol=args.tol, max_time=max_time,
                   random_state=args.seed)


def select_C(solver, X, y, gamma, args):
    """(best C, seconds spent, validation accuracy per C) on a stratified 20% of the training set."""
    X_fit, X_val, y_fit, y_val = train_test_split(X, y, test_size=0.2, random_state=args.seed, stratify=y)
    start, scores = time.perf_counter(), {}
    for C in args.C_grid:
        model = core_svc(solver, C, gamma, args, args.select_max_time)
        timed_fit(model, X_fit, y_fit)
        scores[C] = model.score(X_val, y_val)
    return max(args.C_grid, key=lambda C: (scores[C], -C)), time.perf_counter() - start, scores


def run_dataset(name, args, rows):
    loader, svc_C, gamma = DATASETS[name]
    X_train, y_train, X_test, y_test = loader(Path(args.data) if args.data else datasets_dir())
    print(f"== {name}: train {X_train.shape}, test {X_test.shape}, gamma {gamma:g}", flush=True)
    for solver in args.solvers:  # warm-up: the first fit of a process loads (or compiles) the Numba functions
        timed_fit(core_svc(solver, 16.0, gamma, args, 5.0), X_train[:400], y_train[:400])
    svc = SVC(C=svc_C, gamma=gamma)
    svc_time = timed_fit(svc, X_train, y_train)[0]
    svc_acc = 100 * svc.score(X_test, y_test)
    rows.append((name, f"SVC (C={svc_C:g})", "-", svc_time, svc_acc, int(svc.n_support_.sum()), 1.0, 0.0, ""))
    print(f"   SVC {svc_time:.2f} s, {svc_acc:.2f}%", flush=True)
    for solver in args.solvers:
        if len(args.C_grid) == 1:
            C, select_time, scores = args.C_grid[0], 0.0, {}
        else:
            C, select_time, scores = select_C(solver, X_train, y_train, gamma, args)
        model = core_svc(solver, C, gamma, args, args.max_time)
        seconds = timed_fit(model, X_train, y_train)[0]
        acc = 100 * model.score(X_test, y_test)
        note = "" if model.fit_status_ == 0 else "some pairs cut by max_time"
        rows.append((name, f"CoreSVC {solver} (C={C:g})", f"{select_time:.1f}", seconds, acc, len(model.support_),
                     svc_time / seconds, acc - svc_acc, note))
        print(f"   {solver} C={C:g} (validation {', '.join(f'{c:g}: {s:.4f}' for c, s in scores.items())}): "
              f"{seconds:.2f} s, {acc:.2f}%, #SV {len(model.support_)} {note}", flush=True)


def c_choice(args) -> str:
    if len(args.C_grid) == 1:
        return f"CoreSVC's C (L2-SVM C) fixed at {args.C_grid[0]:g} for every solver (no selection)"
    return (f"CoreSVC's C (L2-SVM C) per solver from {[float(c) for c in args.C_grid]} on a stratified 20% "
            f"validation split of the training set (select fits cut at {args.select_max_time:g} s)")


def markdown(rows, args, total: float) -> str:
    lines = [
        "# Multiclass (one-vs-one): CVM and the gsvm family vs scikit-learn SVC",
        "",
        f"- Command: `python benchmarks/gsvm_multiclass_benchmark.py {' '.join(sys.argv[1:])}`".rstrip() + "",
        f"- Commit: {git_revision()}; machine: {platform.machine()}, {os.cpu_count()} cores, load average at the end "
        f"{os.getloadavg()[0]:.1f} (compare ratios within this run); whole run {total:.0f} s",
        f"- RBF gamma as SVC's; {c_choice(args)}; tol={args.tol:g}, max_time={args.max_time:g} s per fit (shared "
        f"by its one-vs-one pairs), random_state={args.seed}; accuracy on the test file.",
        "",
        "| dataset | method | select (s) | train (s) | test acc (%) | #SV | SVC time / time | vs SVC (pp) | note |",
        "|---|---|--:|--:|--:|--:|--:|--:|---|",
    ]
    for name, method, select, seconds, acc, n_sv, ratio, delta, note in rows:
        lines.append(f"| {name} | {method} | {select} | {seconds:.2f} | {acc:.2f} | {n_sv} | {ratio:.2f} | "
                     f"{delta:+.2f} | {note} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", default="usps,letter")
    parser.add_argument("--solvers", default=DEFAULT_SOLVERS)
    parser.add_argument("--C-grid", default="16,256,4096", help="CoreSVC C values to validate (one: no search)")
    parser.add_argument("--tol", type=float, default=1e-2)
    parser.add_argument("--max-time", type=float, default=60.0, help="seconds per final fit")
    parser.add_argument("--select-max-time", type=float, default=10.0, help="seconds per C-selection fit")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", default=None, help="datasets folder (default: ../shared/datasets)")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "gsvm" / "multiclass.md"))
    args = parser.parse_args(argv)
    args.solvers = [s for s in args.solvers.split(",") if s]
    args.C_grid = [float(c) for c in args.C_grid.split(",")]
    start, rows = time.perf_counter(), []
    for name in args.datasets.split(","):
        run_dataset(name, args, rows)
    text = markdown(rows, args, time.perf_counter() - start)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
