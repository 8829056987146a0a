"""Out-of-core and Dask benchmark (issue 8).

Part A: a checkerboard of ``--n-memmap`` points (20M: 320 MB float64) written
to a ``.npy`` file under ``--data-dir`` (not the repository) and trained from
``np.load(..., mmap_mode='r')`` in a child process whose peak resident memory
is measured (``ru_maxrss``/VmHWM, and RssAnon/RssFile sampled every 0.1 s).

Part B: the core-set cascade (``coresvm.distributed.fit_cascade``) on a Dask
LocalCluster with 2 worker processes vs one process, on ``--n-cascade`` points:
time and test accuracy.

Usage::

    python benchmarks/out_of_core_benchmark.py --out benchmarks/results/out_of_core.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
from provenance import git_revision

from coresvm.datasets import make_checkerboard

PARAMS = {"C": 1000.0, "gamma": 2.0, "tol": 1e-2, "random_state": 0}
WRITE_ROWS = 1_000_000


def write_checkerboard_npy(n: int, directory: Path, seed: int = 11) -> tuple[Path, Path]:
    """Write X (float64, n x 2) and y (int8) as .npy files, a million rows at a time."""
    directory.mkdir(parents=True, exist_ok=True)
    x_path, y_path = directory / f"checkerboard_{n}_X.npy", directory / f"checkerboard_{n}_y.npy"
    if x_path.exists() and y_path.exists():
        return x_path, y_path
    X = np.lib.format.open_memmap(x_path, mode="w+", dtype=np.float64, shape=(n, 2))
    y = np.lib.format.open_memmap(y_path, mode="w+", dtype=np.int8, shape=(n,))
    for part, start in enumerate(range(0, n, WRITE_ROWS)):
        stop = min(start + WRITE_ROWS, n)
        X_part, y_part = make_checkerboard(stop - start, random_state=seed * 1000 + part)
        X[start:stop] = X_part
        y[start:stop] = y_part
    X.flush()
    y.flush()
    del X, y
    return x_path, y_path


class MemoryWatch:
    """Peak RssAnon / RssFile of this process, sampled from /proc every 0.1 s."""

    def __init__(self):
        self.peak = {"RssAnon": 0, "RssFile": 0, "VmRSS": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self):
        with open("/proc/self/status") as status:
            for line in status:
                key = line.split(":")[0]
                if key in self.peak:
                    self.peak[key] = max(self.peak[key], int(line.split()[1]) * 1024)

    def _run(self):
        while not self._stop.is_set():
            self._sample()
            time.sleep(0.1)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._sample()


def child_fit_memmap(x_path: str, y_path: str, max_time: float, n_predict: int, cache_size: float) -> dict:
    """Run in a fresh process: fit from the memmap, predict a test set and a slice of the memmap."""
    from coresvm.svc import CoreSVC

    with MemoryWatch() as watch:
        X = np.load(x_path, mmap_mode="r")
        y = np.load(y_path)
        start = time.perf_counter()
        model = CoreSVC(**PARAMS, max_time=max_time, cache_size=cache_size).fit(X, y)
        fit_time = time.perf_counter() - start
        X_test, y_test = make_checkerboard(100_000, random_state=99)
        accuracy = model.score(X_test, y_test)
        start = time.perf_counter()
        predicted = model.predict(X[:n_predict])  # streamed in row blocks from the map
        predict_time = time.perf_counter() - start
        train_slice_accuracy = float(np.mean(predicted == y[:n_predict]))
    return {
        "n": int(X.shape[0]), "fit_time": fit_time, "accuracy": accuracy, "n_sv": int(len(model.support_)),
        "status": model.solver_info_[0]["status"], "predict_rows": n_predict, "predict_time": predict_time,
        "train_slice_accuracy": train_slice_accuracy,
        "ru_maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, **watch.peak,
    }


def run_child(*args: str) -> dict:
    env = dict(os.environ)
    out = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def cascade_vs_single(n: int, n_partitions: int, max_rounds: int) -> dict:
    import dask.array as da
    from dask.distributed import Client, LocalCluster

    from coresvm.distributed import fit_cascade, predict_dask
    from coresvm.svc import CoreSVC

    X, y = make_checkerboard(n, random_state=5)
    X_test, y_test = make_checkerboard(100_000, random_state=99)
    result = {"n": n, "n_partitions": n_partitions}

    start = time.perf_counter()
    single = CoreSVC(**PARAMS).fit(X, y)
    result["single_time"] = time.perf_counter() - start
    result["single_accuracy"] = single.score(X_test, y_test)
    result["single_sv"] = int(len(single.support_))
    result["single_status"] = single.solver_info_[0]["status"]

    start = time.perf_counter()
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        result["cluster_start_time"] = time.perf_counter() - start
        chunk = -(-n // n_partitions)
        X_dask = da.from_array(X, chunks=(chunk, -1))
        y_dask = da.from_array(y, chunks=(chunk,))
        start = time.perf_counter()
        model = fit_cascade(CoreSVC(**PARAMS), X_dask, y_dask, client=client, max_rounds=max_rounds)
        result["cascade_time"] = time.perf_counter() - start
        result["cascade_accuracy"] = model.score(X_test, y_test)
        result["cascade_sv"] = int(len(model.support_))
        result["cascade_converged"] = bool(model.cascade_converged_)
        result["history"] = model.cascade_history_
        start = time.perf_counter()
        dask_predictions = predict_dask(model, da.from_array(X_test, chunks=(25_000, -1))).compute()
        result["dask_predict_time"] = time.perf_counter() - start
        result["dask_predict_equal"] = bool(np.array_equal(dask_predictions, model.predict(X_test)))
    return result


def report(memmap_runs: list[dict], cascade: dict | None, command: str, cache_size: float) -> str:
    import coresvm

    mib = 2.0**20
    lines = [
        "# Out-of-core and Dask benchmark",
        "",
        f"- Command: `{command}`",
        f"- Machine: {platform.platform()}, os.cpu_count() = {os.cpu_count()} (shared with other jobs: "
        "timings are noisy)",
        f"- coresvm from `{Path(coresvm.__file__).parent}`",
        f"- git commit: {git_revision()}",
        f"- CoreSVC parameters: {PARAMS} (solver 'coreset', cache_size {cache_size:g} MB for part A, 200 MB for "
        "part B); test set: 100,000 fresh points",
        "",
        "## A. Training from a memory-mapped .npy file (child process, peak memory)",
        "",
        "| n | file (MiB) | fit (s) | status | #SV | test acc (%) | peak RSS (MiB) | peak RssAnon (MiB) | "
        "peak RssFile (MiB) | predict (rows, s) |",
        "|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|",
    ]
    for run in memmap_runs:
        lines.append(
            f"| {run['n']:,} | {run['n'] * 16 / mib:.0f} | {run['fit_time']:.1f} | {run['status']} | {run['n_sv']} | "
            f"{100 * run['accuracy']:.2f} | {run['ru_maxrss'] / mib:.0f} | {run['RssAnon'] / mib:.0f} | "
            f"{run['RssFile'] / mib:.0f} | {run['predict_rows']:,} rows, {run['predict_time']:.1f} |"
        )
    lines += [
        "",
        "Peak RSS is the child's `ru_maxrss` (everything resident: the Python/NumPy/Numba runtime, the O(m) "
        "per-row arrays of the fit, the core-set Gram, and pages of the map). RssAnon and RssFile are the "
        "peaks of the process's anonymous memory and mapped file pages, sampled every 0.1 s.",
    ]
    if cascade is not None:
        lines += [
            "",
            f"## B. Core-set cascade on 2 local Dask workers vs one process ({cascade['n']:,} points)",
            "",
            "| method | time (s) | test acc (%) | #SV | note |",
            "|---|--:|--:|--:|---|",
            f"| CoreSVC, one process | {cascade['single_time']:.1f} | {100 * cascade['single_accuracy']:.2f} | "
            f"{cascade['single_sv']} | status {cascade['single_status']} |",
            f"| fit_cascade, LocalCluster 2 workers x 1 thread, {cascade['n_partitions']} partitions | "
            f"{cascade['cascade_time']:.1f} | {100 * cascade['cascade_accuracy']:.2f} | {cascade['cascade_sv']} | "
            f"converged {cascade['cascade_converged']}; cluster start {cascade['cluster_start_time']:.1f} s "
            "not included |",
            "",
            "Cascade rounds (round 0: local core sets on the workers):",
            "",
            "| round | core set | #SV | violators | solve (s) | check (s) |",
            "|--:|--:|--:|--:|--:|--:|",
        ]
        for record in cascade["history"]:
            lines.append(
                f"| {record['round']} | {record['core_set_size']} | {record['n_support']} | "
                f"{record['violators'] if record['violators'] is not None else '-'} | "
                f"{record['solve_time']:.2f} | {record['check_time']:.2f} |"
            )
        lines += [
            "",
            f"Prediction of the test set through `predict_dask` (4 partitions): {cascade['dask_predict_time']:.2f} s, "
            f"equal to in-memory prediction: {cascade['dask_predict_equal']}.",
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-memmap", type=int, nargs="+", default=[20_000_000])
    parser.add_argument("--n-cascade", type=int, default=2_000_000)
    parser.add_argument("--n-partitions", type=int, default=4)
    parser.add_argument("--max-rounds", type=int, default=10)
    parser.add_argument("--max-time", type=float, default=600.0, help="max_time of the memmap fits (s)")
    parser.add_argument("--cache-size", type=float, default=200.0, help="cache_size (MB) of the memmap fits")
    parser.add_argument("--n-predict", type=int, default=1_000_000, help="rows of the memmap to predict")
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp/coresvm_out_of_core"))
    parser.add_argument("--skip-cascade", action="store_true")
    parser.add_argument("--skip-memmap", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--child", nargs=5, metavar=("X", "Y", "MAX_TIME", "N_PREDICT", "CACHE_SIZE"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        x_path, y_path, max_time, n_predict, cache_size = args.child
        print(json.dumps(child_fit_memmap(x_path, y_path, float(max_time), int(n_predict), float(cache_size))))
        return

    command = "python " + " ".join([os.path.relpath(__file__)] + sys.argv[1:])
    memmap_runs = []
    for n in [] if args.skip_memmap else args.n_memmap:
        x_path, y_path = write_checkerboard_npy(n, args.data_dir)
        run = run_child(str(x_path), str(y_path), str(args.max_time), str(min(args.n_predict, n)),
                        str(args.cache_size))
        print(json.dumps(run), flush=True)
        memmap_runs.append(run)
    cascade = None
    if not args.skip_cascade:
        cascade = cascade_vs_single(args.n_cascade, args.n_partitions, args.max_rounds)
        print(json.dumps({k: v for k, v in cascade.items() if k != "history"}), flush=True)
    text = report(memmap_runs, cascade, command, args.cache_size)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)


if __name__ == "__main__":
    main()
