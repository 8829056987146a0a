"""BVM's multiscale stages on one data set: iterations, #SV and time per stage, then test accuracy.

Run from the repository root (the numbers in benchmarks/results/gsvm/bvm.md)::

    PYTHONPATH=src python benchmarks/bvm_stages.py w8a
    PYTHONPATH=src python benchmarks/bvm_stages.py ijcnn1 --max-time 400
    PYTHONPATH=src python benchmarks/bvm_stages.py w8a --eps 3.0517578125e-05   # stop at the 2^-15 stage

C and gamma are scikit-learn SVC's (``DATASET_PARAMS`` of run_benchmarks.py) unless given.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_benchmarks as rb  # noqa: E402


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", choices=[name for name in rb.ALL_DATASETS if name != "checkerboard"])
    parser.add_argument("--C", type=float, help="default: SVC's C for the data set")
    parser.add_argument("--eps", type=float, help="final eps (default: LibCVM's heuristic)")
    parser.add_argument("--max-time", type=float, default=300.0)
    parser.add_argument("--seed", type=int, default=0)
    opts = parser.parse_args(argv)
    coresvm = rb.import_coresvm()
    from coresvm.solvers import driver

    results = []
    run_bvm = driver._run_bvm

    def recording(*args, **kwargs):
        results.append(run_bvm(*args, **kwargs))
        return results[-1]

    driver._run_bvm = recording
    data = rb.load_dataset(opts.dataset, 0, 0)
    C = opts.C or data.svc_C
    model = coresvm.CoreSVC(solver="bvm", C=C, gamma=data.gamma, eps=opts.eps, max_time=opts.max_time,
                            random_state=opts.seed)
    start = time.perf_counter()
    model.fit(data.X_train, data.y_train)
    elapsed = time.perf_counter() - start
    result = results[-1]
    print(f"{opts.dataset}: C={C}, gamma={data.gamma}, final eps {result.eps:.3e}, status {result.status}")
    print("| stage eps | iterations (cumulative) | #SV | seconds |")
    print("|---|--:|--:|--:|")
    for eps, iterations, n_sv, seconds in result.stage_log:
        print(f"| {eps:.3e} | {int(iterations)} | {int(n_sv)} | {seconds:.2f} |")
    accuracy = 100 * np.mean(model.predict(data.X_test) == data.y_test)
    print(f"fit {elapsed:.2f} s, test accuracy {accuracy:.2f}%, {model.support_.size} SV, "
          f"{result.n_iter} iterations")


if __name__ == "__main__":
    main()
