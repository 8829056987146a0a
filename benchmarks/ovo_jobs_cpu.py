"""Wall and CPU seconds of one-vs-one CoreSVC fits with n_jobs=1 and 2, interleaved, as one JSON line.

Meant for comparing two commits on a shared machine, where wall times mostly measure waiting for a core:
run it alternately against each source tree (``git archive <commit> src benchmarks | tar -x -C /tmp/old``)
and compare the CPU seconds, which the other users' load disturbs much less.  Each value is the least of
``repeats`` fits; C as chosen by ``multiclass_benchmark.py`` (USPS 16, letter 64, pendigits 4), tol 1e-2.

    python benchmarks/ovo_jobs_cpu.py --datasets usps,letter,pendigits --repeats 3
    python benchmarks/ovo_jobs_cpu.py --benchmarks /tmp/old/benchmarks   # the other tree's loaders and src
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

CHOSEN_C = {"usps": 16.0, "letter": 64.0, "pendigits": 4.0}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", default="usps,letter,pendigits")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--benchmarks", default=str(Path(__file__).resolve().parent),
                        help="benchmarks folder whose multiclass_benchmark.py (and so whose src) to use")
    args = parser.parse_args(argv)
    sys.path.insert(0, args.benchmarks)
    from multiclass_benchmark import DATASETS  # puts that tree's src first on sys.path

    import coresvm
    from coresvm.datasets import datasets_dir
    from coresvm.svc import CoreSVC

    report = {"coresvm": coresvm.__file__}
    for name in args.datasets.split(","):
        loader, _, gamma = DATASETS[name]
        X_train, y_train, X_test, y_test = loader(datasets_dir())
        for n_jobs in (1, 2):  # load (or compile) the Numba functions first
            CoreSVC(gamma=gamma, n_jobs=n_jobs, random_state=0).fit(X_train[:300], y_train[:300])
        times = {1: [], 2: []}
        for _ in range(args.repeats):
            for n_jobs in (1, 2):
                model = CoreSVC(C=CHOSEN_C[name], gamma=gamma, tol=1e-2, n_jobs=n_jobs, random_state=0)
                start, start_cpu = time.perf_counter(), time.process_time()
                model.fit(X_train, y_train)
                times[n_jobs].append((time.perf_counter() - start, time.process_time() - start_cpu))
        report[name] = {f"n_jobs={n_jobs}": {"wall": min(w for w, _ in t), "cpu": min(c for _, c in t)}
                        for n_jobs, t in times.items()}
        report[name]["accuracy"] = model.score(X_test, y_test)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
