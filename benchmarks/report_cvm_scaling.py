"""CVM scaling on the checkerboard (Tsang et al. 2005, Sec. 5.1 / Figure 2): train time, #SV and accuracy vs m.

For each training size ``m`` the script fits ``CoreSVC(solver='cvm')`` (and, optionally,
``solver='coreset'``) on ``m`` points of the 4x4 checkerboard and scikit-learn's ``SVC`` (LIBSVM)
up to ``--svc-max`` points, all with the same RBF kernel, and tests on a fresh 100,000-point
checkerboard.  The paper's claims: CVM's time and #SV stop growing once m is large enough
(with the 59-point sampling its cost does not depend on m), CVM reaches 1M points, and LIBSVM
is faster on small data (< 10K points).

Example (the run behind ``benchmarks/REPORT.md``)::

    NUMBA_CACHE_DIR=/tmp/numba_bench python benchmarks/report_cvm_scaling.py \\
        --sizes 1000,3000,10000,30000,100000,300000,1000000 --svc-max 30000 --max-time 60 \\
        --out benchmarks/results/cvm_scaling.md
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.svm import SVC

sys.path.insert(0, str(Path(__file__).resolve().parent))
from provenance import git_revision  # noqa: E402
from run_benchmarks import import_coresvm  # noqa: E402

GAMMA = 2.0  # unit cells on [0, 4)^2; run_benchmarks.py uses the same width
CORESVC_C = 1024.0  # selected on validation data by run_benchmarks.py (results/checkerboard.md)
SVC_C = 100.0


def timed(model, X, y, X_test, y_test) -> tuple[float, float, int, str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        model.fit(X, y)
        elapsed = time.perf_counter() - start
    status = "converged"
    if hasattr(model, "fit_status_") and model.fit_status_ != 0:
        status = getattr(model, "solver_info_", [{}])[0].get("status", "not converged")
    return elapsed, 100.0 * float(np.mean(model.predict(X_test) == y_test)), len(model.support_vectors_), status


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,3000,10000,30000,100000,300000,1000000")
    parser.add_argument("--solvers", default="cvm,coreset", help="CoreSVC solvers (default cvm,coreset)")
    parser.add_argument("--svc-max", type=int, default=30000, help="largest m for SVC (default 30000)")
    parser.add_argument("--max-time", type=float, default=60.0, help="seconds per CoreSVC fit (default 60)")
    parser.add_argument("--tol", type=float, default=1e-2)
    parser.add_argument("--C", type=float, default=CORESVC_C, help=f"CoreSVC's C (default {CORESVC_C:g})")
    parser.add_argument("--n-candidates", type=int, default=None,
                        help="CoreSVC's n_candidates: a fixed sample per round and the stopping test's sample "
                        "(default: CoreSVC's own, at least m / 25 per round and 10,000 for the test)")
    parser.add_argument("--out", default=None)
    opts = parser.parse_args(argv)
    coresvm = import_coresvm()
    from coresvm.datasets import make_checkerboard

    X_all, y_all = make_checkerboard(max(int(s) for s in opts.sizes.split(",")), random_state=0)
    X_test, y_test = make_checkerboard(100_000, random_state=1)
    for solver in opts.solvers.split(","):  # compile (or load) each solver's code before the timed fits
        coresvm.CoreSVC(C=opts.C, gamma=GAMMA, solver=solver, max_time=5).fit(X_all[:20_000], y_all[:20_000])

    command = "python benchmarks/report_cvm_scaling.py " + " ".join(sys.argv[1:] if argv is None else argv)
    lines = [
        "# CVM scaling on the 4x4 checkerboard (Tsang et al. 2005)",
        "",
        f"- Command: `{command}`",
        f"- Machine: {platform.platform()}, Python {platform.python_version()}; coresvm git {git_revision()}",
        f"- RBF gamma = {GAMMA:g}; CoreSVC C = {opts.C:g}, tol = {opts.tol:g}, max_time = {opts.max_time:g} s, "
        f"random_state = 0, n_candidates = {'default' if opts.n_candidates is None else opts.n_candidates}; "
        f"SVC C = {SVC_C:g}; test: 100,000 fresh points",
        "",
        "| m | method | train time (s) | test acc (%) | #SV | status |",
        "|--:|---|--:|--:|--:|---|",
    ]
    for m in (int(s) for s in opts.sizes.split(",")):
        X, y = X_all[:m], y_all[:m]
        runs = []
        for solver in opts.solvers.split(","):
            model = coresvm.CoreSVC(
                C=opts.C, gamma=GAMMA, solver=solver, tol=opts.tol, max_time=opts.max_time, random_state=0,
                n_candidates=opts.n_candidates,
            )
            runs.append((f"CoreSVC {solver}", model))
        if m <= opts.svc_max:
            runs.append(("SVC", SVC(C=SVC_C, gamma=GAMMA, cache_size=200)))
        for name, model in runs:
            seconds, accuracy, n_sv, status = timed(model, X, y, X_test, y_test)
            row = f"| {m} | {name} | {seconds:.2f} | {accuracy:.2f} | {n_sv} | {status} |"
            print(row, file=sys.stderr, flush=True)
            lines.append(row)
    text = "\n".join(lines)
    print(text)
    if opts.out:
        Path(opts.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
