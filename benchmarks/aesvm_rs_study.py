"""Why is the representative set on KDD99-10% larger than the paper's D1?  A DeriveRS-only study.

Measures ``M/N`` (and DeriveRS time) of the representative set on the KDD99-10% training part
for every combination of

* preprocessing: categorical columns one-hot (118 features) or integer codes (41, as D1),
  with or without ``log1p`` of the count columns (always min-max to [0, 1]);
* DeriveAE: the eps-coverage enforced (library default) or the published steps 4/6 unchanged;
* the number of training rows (random fractions of the training part), to see how ``M/N``
  falls as the data get denser (the paper's D1 is the *full* KDD99, 1.07M distinct rows);
* gamma (the paper's Table 2 row for D1: 1.5 .. 8.1 % over 2^-4 .. 2^2);
* P, V.

No SVM is trained.  Results go to ``benchmarks/results/aesvm_rs_study.md``.  Run (about 5 min)::

    NUMBA_CACHE_DIR=/tmp/numba_aesvm python benchmarks/aesvm_rs_study.py
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from aesvm_benchmark import load_kdd99, log  # noqa: E402
from provenance import git_revision  # noqa: E402

from coresvm.aesvm import derive_representative_set  # noqa: E402
from coresvm.kernels import KernelSpec  # noqa: E402

OUTPUT = Path(__file__).resolve().parent / "results" / "aesvm_rs_study.md"
HEADER = "| study | encoding | log1p | coverage | rows N | gamma | P | V | M/N % | M per class | DeriveRS s | " \
         "sphere set | psi | pruned | promoted | capped | max residual |"


def run(X, y, *, gamma, enforce, P=100_000, V=1_000, epsilon=1e-3):
    rs = derive_representative_set(X, y, KernelSpec("rbf", gamma), epsilon=epsilon, P=P, V=V,
                                   enforce_coverage=enforce)
    return rs


def row(study, encoding, log_counts, enforce, X, gamma, P, V, rs) -> str:
    c = rs.counts
    return (f"| {study} | {encoding} | {'yes' if log_counts else 'no'} | {'enforced' if enforce else 'published'} | "
            f"{X.shape[0]} | {gamma:g} | {P} | {V} | {100 * rs.fraction:.2f} | {rs.size_per_class.tolist()} | "
            f"{rs.derive_time:.2f} | {c['sphere_set']} | {c['psi']} | {c['pruned']} | {c['promoted']} | "
            f"{c['capped']} | {rs.max_residual:.2e} |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--studies", default="prep,coverage,rows,gamma,pv")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    opts = parser.parse_args(argv)
    studies = opts.studies.split(",")
    lines = ["# DeriveRS on KDD99-10%: what sets M/N", "",
             f"Command: `{' '.join([Path(sys.argv[0]).name] + sys.argv[1:])}`; commit {git_revision()}.",
             "eps = 1e-3; FLS2; training part of the 75/25 split (109,189 distinct rows) unless 'rows N' is smaller "
             "(a random subset).", "", HEADER, "|" + "---|" * (HEADER.count("|") - 1)]
    data = {}

    def get(encoding, log_counts):
        if (encoding, log_counts) not in data:
            data[encoding, log_counts] = load_kdd99(0, encoding, log_counts)
        return data[encoding, log_counts]

    def record(study, encoding, log_counts, enforce, gamma=1.0, P=100_000, V=1_000, rows=None):
        d = get(encoding, log_counts)
        X, y = d.X_train, d.y_train
        if rows is not None and rows < X.shape[0]:
            keep = np.sort(np.random.RandomState(1).permutation(X.shape[0])[:rows])
            X, y = X[keep], y[keep]
        rs = run(X, y, gamma=gamma, enforce=enforce, P=P, V=V)
        lines.append(row(study, encoding, log_counts, enforce, X, gamma, P, V, rs))
        log(lines[-1])
        opts.output.write_text("\n".join(lines) + "\n")

    # warm the JIT on a small slice so no row includes compilation
    d = get("codes", False)
    run(d.X_train[:3000], d.y_train[:3000], gamma=1.0, enforce=True, P=2000, V=500)
    start = time.perf_counter()
    if "prep" in studies:
        for encoding in ("onehot", "codes"):
            for log_counts in (True, False):
                record("preprocessing", encoding, log_counts, True)
    if "coverage" in studies:
        for encoding, log_counts in (("onehot", True), ("codes", False)):
            record("coverage", encoding, log_counts, False)
    if "rows" in studies:
        for encoding, log_counts in (("onehot", True), ("codes", False)):
            for rows in (13_650, 27_300, 54_600):
                record("rows", encoding, log_counts, True, rows=rows)
    if "gamma" in studies:
        for gamma in (2.0**-4, 2.0**-2, 4.0):
            record("gamma", "codes", False, True, gamma=gamma)
    if "pv" in studies:
        for P, V in ((10_000, 1_000), (100_000, 2_000), (100_000, 500)):
            record("P, V", "codes", False, True, P=P, V=V)
    lines += ["", f"Total {time.perf_counter() - start:.0f} s."]
    opts.output.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
