"""Sparse x dense against dense x dense inner products: where the core-set solvers should densify CSR data.

A core-set growth or a round of candidate scoring computes ``A_block @ B.T`` for row blocks of the training
rows ``A`` against the core set's rows ``B`` (made dense and transposed once).  With CSR ``A`` that is the
compiled sparse x dense product (``coresvm.kernels.sparse_times_dense``); with ``A`` made dense it is one BLAS
GEMM.  This script times both on random CSR data
for several numbers of features and densities (float32 and float64, one thread, blocks of 128 rows against
20,000), the measurements behind ``coresvm.problem.worth_densifying``.  Writes
``benchmarks/results/sparse_products.md`` (or ``--out``).

    OMP_NUM_THREADS=1 python benchmarks/sparse_products.py
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare  # noqa: E402  (the results folder)
from provenance import git_revision, library_versions, machine  # noqa: E402

from coresvm.kernels import sparse_times_dense  # noqa: E402
from coresvm.problem import worth_densifying  # noqa: E402

FEATURES = (30, 123, 300, 1000)
DENSITIES = (0.05, 0.1, 0.15, 0.2, 0.3, 0.5)
BLOCK_ROWS, ROWS, COLUMNS = 128, 512, 20_000


def best_seconds(product: Callable[[], object], repeats: int = 3) -> float:
    """The fastest of ``repeats`` runs of ``product`` (after one warm-up run)."""
    product()
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        product()
        best = min(best, time.perf_counter() - start)
    return best


def time_products(n_features: int, density: float, dtype: type, rng: np.random.RandomState) -> tuple[float, float]:
    """Nanoseconds per inner product: (sparse x dense, dense x dense), both in row blocks of ``BLOCK_ROWS``."""
    columns_t = np.ascontiguousarray(
        sp.random(COLUMNS, n_features, density=density, random_state=rng, dtype=dtype).toarray().T)
    rows = sp.random(ROWS, n_features, density=density, format="csr", random_state=rng, dtype=dtype)
    rows_dense = rows.toarray()
    starts = range(0, ROWS, BLOCK_ROWS)
    sparse_s = best_seconds(lambda: [sparse_times_dense(rows[s : s + BLOCK_ROWS], columns_t) for s in starts])
    dense_s = best_seconds(lambda: [rows_dense[s : s + BLOCK_ROWS] @ columns_t for s in starts])
    per_value = 1e9 / (ROWS * COLUMNS)
    return sparse_s * per_value, dense_s * per_value


def command(argv: list[str]) -> str:
    """The command line that reproduces this run, with its thread limit."""
    threads = os.environ.get("OMP_NUM_THREADS")
    words = ([f"OMP_NUM_THREADS={threads}"] if threads else []) + ["python", "benchmarks/sparse_products.py", *argv]
    return shlex.join(words)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(compare.RESULTS / "sparse_products.md"))
    args = parser.parse_args(argv)
    rng = np.random.RandomState(0)
    lines = ["# Sparse x dense against dense x dense inner products", "",
             f"- command: `{command(argv)}`",
             f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
             f"- revision: {git_revision()}",
             f"- machine: {machine()}",
             f"- libraries: {library_versions()}", "",
             f"Random CSR rows, {ROWS} rows in blocks of {BLOCK_ROWS} against {COLUMNS:,} dense columns (transposed "
             "once), the fastest of 3 runs.  'dense / sparse' above 1: the sparse product is faster.  'densified': "
             "what `coresvm.problem.worth_densifying` decides for such data.", ""]
    for dtype in (np.float32, np.float64):
        lines += [f"## {np.dtype(dtype).name}", "",
                  "| features | density | sparse ns per value | dense ns per value | dense / sparse | densified |",
                  "|---|---|---|---|---|---|"]
        for n_features in FEATURES:
            for density in DENSITIES:
                sparse_ns, dense_ns = time_products(n_features, density, dtype, rng)
                decided = worth_densifying(sp.random(1000, n_features, density=density, format="csr",
                                                     random_state=np.random.RandomState(1)))
                lines.append(f"| {n_features} | {density:g} | {sparse_ns:.2f} | {dense_ns:.2f} | "
                             f"{dense_ns / sparse_ns:.2f} | {'yes' if decided else 'no'} |")
                print(lines[-1], flush=True)
        lines.append("")
    Path(args.out).write_text("\n".join(lines))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
