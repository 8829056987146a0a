"""Peak memory a CoreSVC fit adds on top of its data, in a fresh process per case.

The bar (issue 2): peak memory below 2x the data size plus the cache budget.  What a
fit *adds* is measured as the growth of the process's peak RSS (``ru_maxrss``)
across the fit, after the data are loaded and the compiled code is warmed up on a
small slice, so interpreter, libraries and JIT caches are not charged to the fit.

Run from the repository root::

    python benchmarks/measure_memory.py --dataset checkerboard --n 1000000 --max-time 20
    python benchmarks/measure_memory.py --dataset ijcnn1 --max-time 10
"""

from __future__ import annotations

import argparse
import lzma
import resource
import time
import warnings


def peak_rss_mib() -> float:
    """Peak resident set size of this process so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def load(name: str, n: int):
    from sklearn.datasets import load_svmlight_file

    from coresvm.datasets import datasets_dir, make_checkerboard

    if name == "checkerboard":
        return make_checkerboard(n, random_state=0)
    n_features = {"ijcnn1": 22, "w8a": 300, "a9a": 123}[name]
    X, y = load_svmlight_file(lzma.open(datasets_dir() / f"{name}.xz", "rb"), n_features=n_features)
    return (X.toarray() if name == "ijcnn1" else X), y


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="checkerboard", choices=["checkerboard", "ijcnn1", "w8a", "a9a"])
    parser.add_argument("--n", type=int, default=1_000_000, help="checkerboard size")
    parser.add_argument("--C", type=float, default=10000.0)
    parser.add_argument("--gamma", type=float, default=2.0)
    parser.add_argument("--solver", default="coreset")
    parser.add_argument("--max-time", type=float, default=20.0)
    parser.add_argument("--cache-size", type=float, default=200.0)
    args = parser.parse_args()

    from coresvm import CoreSVC

    X, y = load(args.dataset, args.n)
    data_mib = (X.data.nbytes + X.indices.nbytes + X.indptr.nbytes if hasattr(X, "indptr") else X.nbytes) / 2**20
    warnings.simplefilter("ignore")
    model = CoreSVC(C=args.C, gamma=args.gamma, solver=args.solver, cache_size=args.cache_size, random_state=0)
    model.set_params(max_time=1.0).fit(X[:2000], y[:2000])  # compile and warm up
    before = peak_rss_mib()
    start = time.perf_counter()
    model.set_params(max_time=args.max_time).fit(X, y)
    elapsed = time.perf_counter() - start
    added = peak_rss_mib() - before
    bound = 2 * data_mib + args.cache_size
    print(
        f"{args.dataset}: data {data_mib:.1f} MiB, fit {elapsed:.1f} s, #SV {len(model.support_)}, "
        f"peak RSS before fit {before:.0f} MiB, added by the fit {added:.0f} MiB, "
        f"bound 2 x data + cache = {bound:.0f} MiB -> {'within' if added <= bound else 'OVER'}"
    )


if __name__ == "__main__":
    main()
