"""Novelty detection on KDD Cup 99 (10%): CoreOneClassSVM vs scikit-learn OneClassSVM.

Train on normal traffic only; score a held-out test set of normal connections
and attacks; report ROC AUC (attacks are the positive "novel" class, scored by
``-decision_function``) and the training time.  scikit-learn's OneClassSVM
cannot train on all the normal traffic in comparable time, so it is trained on
the largest random subsample that fits in CoreOneClassSVM's training time,
measured in the same run: sizes double from ``--sk-start`` until a fit takes
longer than the budget; the last one within the budget is reported (and the
first one over it, for reference).

Features (41 columns; UCI format, last column the label ``normal.`` or an
attack name):

* the 3 categorical columns (protocol_type, service, flag) are one-hot encoded
  with the categories seen in the training (normal) data; unseen categories
  in the test data get all zeros;
* the 38 numeric columns are all non-negative and many are heavy-tailed
  (bytes, durations, counts): each becomes ``log1p(x)``, then is divided by its
  maximum over the training data (columns constant 0 on the training data are
  left at log1p(x)), so the training values are in [0, 1].

The kernel is RBF with gamma='scale' for both models and the same nu.

Usage::

    PYTHONPATH=src python benchmarks/oneclass_benchmark.py [--nu 0.05] [--test-normal 10000]
        [--test-attacks 10000] [--seed 0] [--out benchmarks/results/oneclass.md]
"""

from __future__ import annotations

import argparse
import gzip
import platform
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score
from sklearn.svm import OneClassSVM

from coresvm.oneclass import CoreOneClassSVM

DATA = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "kddcup.data_10_percent.gz"
CATEGORICAL = (1, 2, 3)  # protocol_type, service, flag
N_COLUMNS = 41


def load_kdd(path: Path):
    """Raw rows: numeric (m, 38) float array, categorical (m, 3) str array, is_normal (m,) bool."""
    with gzip.open(path, "rt") as handle:
        rows = [line.rstrip("\n").rstrip(".").split(",") for line in handle if line.strip()]
    table = np.array(rows, dtype=object)
    if table.shape[1] != N_COLUMNS + 1:
        raise ValueError(f"{path}: expected {N_COLUMNS + 1} columns, got {table.shape[1]}")
    numeric_cols = [c for c in range(N_COLUMNS) if c not in CATEGORICAL]
    numeric = table[:, numeric_cols].astype(np.float64)
    categorical = table[:, list(CATEGORICAL)].astype(str)
    is_normal = table[:, N_COLUMNS] == "normal"
    return numeric, categorical, is_normal


class KddFeatures:
    """One-hot categoricals + log1p/max-scaled numerics, fitted on the training rows only."""

    def fit(self, numeric, categorical):
        self.categories = [np.unique(categorical[:, c]) for c in range(categorical.shape[1])]
        logged = np.log1p(numeric)
        scale = logged.max(axis=0)
        self.scale = np.where(scale > 0, scale, 1.0)
        return self

    def transform(self, numeric, categorical) -> np.ndarray:
        parts = [np.log1p(numeric) / self.scale]
        for c, categories in enumerate(self.categories):
            position = np.searchsorted(categories, categorical[:, c])
            position = np.minimum(position, len(categories) - 1)
            seen = categories[position] == categorical[:, c]
            onehot = np.zeros((len(categorical), len(categories)))
            onehot[np.flatnonzero(seen), position[seen]] = 1.0
            parts.append(onehot)
        return np.hstack(parts)


def split(is_normal, n_test_normal: int, n_test_attacks: int, rng):
    normal = rng.permutation(np.flatnonzero(is_normal))
    attacks = rng.permutation(np.flatnonzero(~is_normal))
    test_normal, train = normal[:n_test_normal], normal[n_test_normal:]
    test = np.concatenate([test_normal, attacks[:n_test_attacks]])
    return train, test


def auc_of(model, X_test, is_attack) -> float:
    return float(roc_auc_score(is_attack, -model.decision_function(X_test)))


def timed_fit(model, X):
    start = time.perf_counter()
    model.fit(X)
    return model, time.perf_counter() - start


def sklearn_within_budget(X_train, X_test, is_attack, nu, budget, start_size, rng, log):
    """Doubling subsample sizes until a fit exceeds ``budget`` seconds."""
    order = rng.permutation(X_train.shape[0])
    rows = []
    size = start_size
    while True:
        size = min(size, X_train.shape[0])
        model, seconds = timed_fit(OneClassSVM(nu=nu, gamma="scale", cache_size=200), X_train[order[:size]])
        auc = auc_of(model, X_test, is_attack)
        rows.append({"size": size, "time": seconds, "auc": auc, "n_sv": int(model.support_.shape[0]),
                     "flags": flagged(model, X_train[order[:size]], X_test, is_attack)})
        log(f"  sklearn OneClassSVM m={size}: {seconds:.2f} s, AUC {auc:.4f}, #SV {rows[-1]['n_sv']}")
        if seconds > budget or size == X_train.shape[0]:
            return rows
        size *= 2


def flagged(model, X_train, X_test, is_attack) -> str:
    """Fractions predicted -1: training data, held-out normal, attacks."""
    shares = [np.mean(model.predict(X) == -1) for X in (X_train, X_test[~is_attack], X_test[is_attack])]
    return " / ".join(f"{share:.4f}" for share in shares)


def fit_core(X_train, X_test, is_attack, nu, C, solver, args, log):
    core, core_time = timed_fit(CoreOneClassSVM(nu=nu, C=C, solver=solver, tol=args.tol, random_state=args.seed),
                                X_train)
    core_auc = auc_of(core, X_test, is_attack)
    core_flags = flagged(core, X_train, X_test, is_attack)
    log(f"CoreOneClassSVM ({solver}, nu={nu}, C={core.C_:.3g}, gamma={core.gamma_:.3g}, tol={args.tol}): "
        f"{core_time:.2f} s (solver {core.solver_info_['time']:.2f} s), AUC {core_auc:.4f}, "
        f"#SV {len(core.support_)}, status {core.solver_info_['status']}, calibration {core.calibration_}, "
        f"flagged (train / held-out normal / attacks) {core_flags}")
    row = (f"| {nu} | CoreOneClassSVM ({solver}) | {X_train.shape[0]} | {core_time:.2f} | {core_auc:.4f} | "
           f"{len(core.support_)} | {core_flags} |")
    return row, core_time


def compare(X_train, X_test, is_attack, nu, C, args, rng, log) -> list[str]:
    rows, budget = [], None
    for solver in args.solver:
        row, seconds = fit_core(X_train, X_test, is_attack, nu, C, solver, args, log)
        rows.append(row)
        budget = seconds if budget is None else budget
    sk_rows = sklearn_within_budget(X_train, X_test, is_attack, nu, budget, args.sk_start, rng, log)
    within = [row for row in sk_rows if row["time"] <= budget]
    best = within[-1] if within else None
    for row in sk_rows:
        mark = " (largest within the time)" if row is best else ""
        rows.append(f"| {nu} | sklearn OneClassSVM{mark} | {row['size']} | {row['time']:.2f} | {row['auc']:.4f} | "
                    f"{row['n_sv']} | {row['flags']} |")
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nu", type=float, nargs="+", default=[0.01, 0.05])
    parser.add_argument("--C", default="auto", help="CoreOneClassSVM's C ('auto' or a number)")
    parser.add_argument("--solver", nargs="+", default=["coreset"],
                        help="CoreOneClassSVM solvers; scikit-learn gets the time of the first")
    parser.add_argument("--tol", type=float, default=1e-3)
    parser.add_argument("--test-normal", type=int, default=10_000)
    parser.add_argument("--test-attacks", type=int, default=10_000)
    parser.add_argument("--sk-start", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="markdown file to write the results to")
    args = parser.parse_args(argv)
    lines = []

    def log(text=""):
        print(text, flush=True)
        lines.append(text)

    rng = np.random.RandomState(args.seed)
    start = time.perf_counter()
    numeric, categorical, is_normal = load_kdd(DATA)
    train, test = split(is_normal, args.test_normal, args.test_attacks, rng)
    features = KddFeatures().fit(numeric[train], categorical[train])
    X_train = features.transform(numeric[train], categorical[train])
    X_test = features.transform(numeric[test], categorical[test])
    is_attack = ~is_normal[test]
    log(f"KDD99-10%: {len(is_normal)} rows ({is_normal.sum()} normal); train {X_train.shape} normal only; "
        f"test {len(test)} ({(~is_attack).sum()} normal, {is_attack.sum()} attacks); "
        f"{X_train.shape[1]} features; loaded in {time.perf_counter() - start:.1f} s")

    C = args.C if args.C == "auto" else float(args.C)
    # warm-up on a small subset so that Numba compilation (cached on disk) is not timed
    for solver in args.solver:
        CoreOneClassSVM(nu=0.1, C=C, solver=solver, random_state=0).fit(X_train[:500])
    table = [
        "| nu | model | training rows | time (s) | ROC AUC | #SV | flagged: train / held-out normal / attacks |",
        "|---|---|---|---|---|---|---|",
    ]
    for nu in args.nu:
        table += compare(X_train, X_test, is_attack, nu, C, args, rng, log)
    log()
    for row in table:
        log(row)
    if args.out:
        header = [
            "# One-class novelty detection: KDD Cup 99 (10%)",
            "",
            "Command: `PYTHONPATH=src python benchmarks/oneclass_benchmark.py "
            + " ".join(argv if argv is not None else sys.argv[1:]) + "`",
            "",
            f"Machine: {platform.machine()}, {platform.python_version()}; 2 cores shared with other jobs "
            "(times are noisy; both models were measured in the same run).",
            "",
        ]
        Path(args.out).write_text("\n".join(header + ["```"] + lines + ["```", ""]) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
