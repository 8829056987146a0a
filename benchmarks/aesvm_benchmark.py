"""Benchmark AESVC (AESVM, Nandan et al. 2014) against scikit-learn's SVC on the full data, over a (C, gamma) grid.

For every dataset and every grid point ``(gamma, C)`` one run trains

* ``AESVC(C, gamma, epsilon, P, V, segmentation)``: DeriveRS once per gamma (reused for every
  C through AESVC's representative-set cache, as in the paper), then SVC on the representative
  set with ``sample_weight = beta``;
* ``sklearn.svm.SVC(C, gamma)`` on the full training set (the paper's LIBSVM reference),

and reports the paper's metrics (Nandan et al. 2014 Sec. 5.1): representative-set fraction ``M/N`` and
DeriveRS time per gamma; RMSE of test accuracy against SVC over the grid (percentage points);
ETS (mean over the grid of ``T_SVC / T_AESVC``, the latter without DeriveRS); OTS (total SVC
time over the grid divided by total AESVC time *including* every DeriveRS); OCS (total #SV
ratio).  Results go to ``benchmarks/results/aesvm.md`` (also printed).

Data: ``ijcnn1``, ``a9a``, ``w8a`` (LIBSVM files with their test files), ``kdd99`` (KDD Cup
1999 10% file, duplicates removed as in the paper, normal vs attack; by default the paper's 41
columns with the 3 categorical ones as integer codes, every column min-max scaled to [0, 1] on
the training part -- ``--kdd-encoding onehot`` / ``--kdd-log`` for one-hot categories and
``log1p`` counts, which make the representative set larger, see ``aesvm_rs_study.py``; a seeded
75/25 train/test split), and ``checkerboard`` (``--checkerboard-size`` points, default 1,000,000; a
fresh 100,000-point test set).  Files are read from ``../shared/datasets`` or
``$CORESVM_DATASETS``.

Grids (``--grid``): ``small`` (default) is 3 gammas x 3 Cs around each dataset's usual
values; ``paper`` is the paper's 84 points, ``C = 2^-4..2^7`` x ``gamma = 2^-4..2^2`` (far too
long for SVC on the larger sets).  ``--gammas`` / ``--Cs`` override either.

The recorded runs (results/aesvm_*.md; about 10-15 min each on a loaded 2-core machine, about a
third of that on a quiet one; SVC on the whole 1M checkerboard would take hours per grid point, so
1M runs AESVC alone with ``--no-svc``)::

    NUMBA_CACHE_DIR=/tmp/numba_aesvm python benchmarks/aesvm_benchmark.py --datasets kdd99 \
        --gammas 4,1,0.25 --Cs 1,4,16,64 --output benchmarks/results/aesvm_kdd99.md
    python benchmarks/aesvm_benchmark.py --datasets checkerboard --checkerboard-size 100000 \
        --gammas 4,1 --Cs 4,16,64 --output benchmarks/results/aesvm_checkerboard.md
    python benchmarks/aesvm_benchmark.py --datasets checkerboard --checkerboard-size 200000 \
        --gammas 4 --Cs 4,16,64 --output benchmarks/results/aesvm_checkerboard_200k.md
    python benchmarks/aesvm_benchmark.py --datasets checkerboard --checkerboard-size 1000000 \
        --gammas 4,1 --Cs 4,16,64 --no-svc --output benchmarks/results/aesvm_checkerboard_1m.md

A quick sanity run (small slices)::

    python benchmarks/aesvm_benchmark.py --datasets ijcnn1,kdd99,checkerboard --max-train-rows 5000 \\
        --checkerboard-size 20000 --output /tmp/aesvm-sanity.md
"""

from __future__ import annotations

import argparse
import gzip
import lzma
import os
import platform
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import sklearn
from provenance import git_revision
from sklearn.datasets import load_svmlight_file
from sklearn.svm import SVC

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_RESULTS = Path(__file__).resolve().parent / "results" / "aesvm.md"
ALL_DATASETS = ("ijcnn1", "a9a", "w8a", "kdd99", "checkerboard")
# centre of the small grid: (gamma, C) as used by the other benchmarks / the LIBSVM guides
CENTRES: dict[str, tuple[float, float]] = {
    "ijcnn1": (0.125, 256.0),
    "a9a": (0.05, 4.0),
    "w8a": (0.03125, 16.0),
    "kdd99": (1.0, 16.0),
    "checkerboard": (2.0, 100.0),
}
LIBSVM_FILES = {"ijcnn1": ("ijcnn1.xz", "ijcnn1.t.xz", 22, False), "a9a": ("a9a.xz", "a9a.t.xz", 123, True),
                "w8a": ("w8a.xz", "w8a.t.xz", 300, True)}
CHECKERBOARD_TEST = 100_000
PAPER_CS = [2.0**k for k in range(-4, 8)]
PAPER_GAMMAS = [2.0**k for k in range(-4, 3)]


@dataclass
class Dataset:
    name: str
    X_train: object
    y_train: np.ndarray
    X_test: object
    y_test: np.ndarray
    note: str = ""


@dataclass
class GridPoint:
    gamma: float
    C: float
    ae_time: float  # SVC on the representative set (DeriveRS excluded)
    ae_acc: float
    ae_nsv: int
    svc_time: float = np.nan
    svc_acc: float = np.nan
    svc_nsv: int = 0


@dataclass
class GammaRecord:
    gamma: float
    derive_time: float
    fraction: float
    size_per_class: list
    max_residual: float
    counts: dict
    points: list = field(default_factory=list)


# --------------------------------------------------------------------------- data
def datasets_dir() -> Path:
    return Path(os.environ.get("CORESVM_DATASETS", REPO_ROOT.parent / "shared" / "datasets"))


def load_libsvm(path: Path, n_features: int, sparse: bool):
    with lzma.open(path, "rb") as handle:
        X, y = load_svmlight_file(handle, n_features=n_features)
    if not sparse:
        return X.toarray(), y
    # SVC's sparse libsvm takes int32 indices
    return sp.csr_matrix((X.data, X.indices.astype(np.int32), X.indptr.astype(np.int32)), shape=X.shape), y


KDD99_ENCODINGS = ("onehot", "codes")  # categorical columns: one-hot (118 features) or integer codes (41)


def load_kdd99(seed: int, encoding: str = "codes", log_counts: bool = False) -> Dataset:
    """KDD'99 10%: distinct records (as the paper's D1), normal (-1) vs attack (+1), 75/25 split.

    ``encoding='onehot'`` expands protocol/service/flag into indicator columns (118 features);
    ``'codes'`` keeps the paper's 41 columns with each category replaced by its (sorted) index.
    ``log_counts`` puts the heavy-tailed non-negative counts (bytes, durations) on a ``log1p``
    scale.  Then every column is min-max scaled to [0, 1] on the training part (test clipped).
    """
    with gzip.open(datasets_dir() / "kddcup.data_10_percent.gz", "rt") as handle:
        lines = list(dict.fromkeys(line.strip() for line in handle if line.strip()))
    fields = [line.split(",") for line in lines]
    y = np.array([1.0 if row[-1] != "normal." else -1.0 for row in fields])
    columns = list(zip(*(row[:-1] for row in fields), strict=True))
    categorical = {1, 2, 3}
    parts = []
    for j, column in enumerate(columns):
        if j in categorical:
            values, codes = np.unique(np.array(column), return_inverse=True)
            parts.append(np.eye(len(values))[codes] if encoding == "onehot" else codes[:, None].astype(np.float64))
        else:
            parts.append(np.asarray(column, dtype=np.float64)[:, None])
    X = np.hstack(parts)
    perm = np.random.RandomState(seed).permutation(len(y))
    n_train = int(0.75 * len(y))
    train, test = np.sort(perm[:n_train]), np.sort(perm[n_train:])
    if log_counts:
        heavy = (X.min(axis=0) >= 0) & (X.max(axis=0) > 1.0)
        if encoding == "codes":
            heavy[list(categorical)] = False
        X[:, heavy] = np.log1p(X[:, heavy])
    low, high = X[train].min(axis=0), X[train].max(axis=0)
    scale = np.where(high > low, high - low, 1.0)
    X = np.clip((X - low) / scale, 0.0, 1.0)
    note = (f"{len(y)} distinct records of 494,021; {X.shape[1]} features ({encoding} categories"
            f"{', log1p of counts' if log_counts else ''}, min-max to [0, 1])")
    return Dataset("kdd99", X[train], y[train], X[test], y[test], note)


def load_dataset(name: str, opts: argparse.Namespace) -> Dataset:
    if name == "checkerboard":
        from coresvm.datasets import make_checkerboard

        X, y = make_checkerboard(opts.checkerboard_size, random_state=opts.seed)
        X_test, y_test = make_checkerboard(CHECKERBOARD_TEST, random_state=opts.seed + 1)
        return Dataset(name, X, y, X_test, y_test, "4x4 board on [0, 4)^2")
    if name == "kdd99":
        return load_kdd99(opts.seed, opts.kdd_encoding, opts.kdd_log)
    train_file, test_file, n_features, sparse = LIBSVM_FILES[name]
    X, y = load_libsvm(datasets_dir() / train_file, n_features, sparse)
    X_test, y_test = load_libsvm(datasets_dir() / test_file, n_features, sparse)
    return Dataset(name, X, y, X_test, y_test, "CSR" if sparse else "dense")


def take_rows(data: Dataset, n_rows: int | None, seed: int) -> Dataset:
    n = data.X_train.shape[0]
    if n_rows is None or n_rows >= n:
        return data
    rows = np.sort(np.random.RandomState(seed).permutation(n)[:n_rows])
    note = f"{data.note}; random {n_rows} of {n} training rows"
    return Dataset(data.name, data.X_train[rows], data.y_train[rows], data.X_test, data.y_test, note)


def grid_for(name: str, opts: argparse.Namespace) -> tuple[list[float], list[float]]:
    if opts.grid == "paper":
        gammas, Cs = PAPER_GAMMAS, PAPER_CS
    else:
        gamma0, C0 = CENTRES[name]
        gammas, Cs = [gamma0 / 4, gamma0, gamma0 * 4], [C0 / 16, C0, C0 * 16]
    if opts.gammas:
        gammas = opts.gammas
    if opts.Cs:
        Cs = opts.Cs
    return list(gammas), list(Cs)


# --------------------------------------------------------------------------- runs
def kernel_params(opts: argparse.Namespace) -> dict:
    """The kernel of both AESVC and SVC: RBF, or the paper's polynomial ``(gamma x'z + coef0)^degree`` (sec. 5.4)."""
    return {"kernel": opts.kernel, "degree": opts.degree, "coef0": opts.coef0}


def accuracy(model, X, y) -> float:
    return float(np.mean(model.predict(X) == y))


def warm_up() -> None:
    """Compile (or load) the numba routines once, so no timing includes the JIT."""
    from coresvm import AESVC
    from coresvm.aesvc import clear_representative_set_cache
    from coresvm.datasets import make_checkerboard

    X, y = make_checkerboard(600, random_state=0)
    AESVC(gamma=1.0, V=200, P=400).fit(X, y)
    AESVC(gamma=1.0, V=200, P=400).fit(sp.csr_matrix(X), y)
    clear_representative_set_cache()


def run_dataset(data: Dataset, opts: argparse.Namespace, on_gamma=None) -> list[GammaRecord]:
    from coresvm import AESVC
    from coresvm.aesvc import clear_representative_set_cache

    gammas, Cs = grid_for(data.name, opts)
    svc_data = take_rows(data, opts.svc_max_rows, opts.seed + 7) if opts.svc_max_rows else data
    records = []
    for gamma in gammas:
        clear_representative_set_cache()
        record = None
        for C in Cs:
            model = AESVC(C=C, gamma=gamma, epsilon=opts.epsilon, P=opts.P, V=opts.V, segmentation=opts.segmentation,
                          cache_size=opts.cache_size, n_jobs=opts.n_jobs, **kernel_params(opts))
            start = time.perf_counter()
            model.fit(data.X_train, data.y_train)
            elapsed = time.perf_counter() - start
            if record is None:
                rs = model.representative_set_
                record = GammaRecord(gamma, rs.derive_time, rs.fraction, rs.size_per_class.tolist(), rs.max_residual,
                                     dict(rs.counts))
            ae_time = elapsed - (0.0 if model.rs_from_cache_ else model.derive_time_)
            point = GridPoint(gamma, C, ae_time, accuracy(model, data.X_test, data.y_test), int(model.n_support_.sum()))
            if not opts.no_svc:
                svc = SVC(C=C, gamma=gamma, cache_size=opts.cache_size, **kernel_params(opts))
                start = time.perf_counter()
                svc.fit(svc_data.X_train, svc_data.y_train)
                point.svc_time = time.perf_counter() - start
                point.svc_acc = accuracy(svc, data.X_test, data.y_test)
                point.svc_nsv = int(svc.n_support_.sum())
            record.points.append(point)
            log(f"{data.name} gamma={gamma:g} C={C:g}: DeriveRS {record.derive_time:.2f} s "
                f"(M/N {record.fraction:.3f}), AESVC-SVM {point.ae_time:.2f} s acc {point.ae_acc:.4f}; "
                f"SVC {point.svc_time:.2f} s acc {point.svc_acc:.4f}")
        records.append(record)
        if on_gamma is not None:
            on_gamma(records)  # a run cut short keeps the gammas it finished
    return records


# --------------------------------------------------------------------------- report
def summary(records: Sequence[GammaRecord]) -> dict:
    points = [p for r in records for p in r.points]
    derive = sum(r.derive_time for r in records)
    ae_total = derive + sum(p.ae_time for p in points)
    out = {"points": len(points), "derive": derive, "ae_total": ae_total,
           "max_ae": max(p.ae_acc for p in points), "mean_fraction": float(np.mean([r.fraction for r in records]))}
    if all(np.isfinite(p.svc_time) for p in points):
        svc_total = sum(p.svc_time for p in points)
        out.update(
            svc_total=svc_total,
            ots=svc_total / ae_total,
            ets=float(np.mean([p.svc_time / p.ae_time for p in points])),
            rmse=100 * float(np.sqrt(np.mean([(p.svc_acc - p.ae_acc) ** 2 for p in points]))),
            max_svc=max(p.svc_acc for p in points),
            ocs=sum(p.svc_nsv for p in points) / max(sum(p.ae_nsv for p in points), 1),
            ecs=float(np.mean([p.svc_nsv / max(p.ae_nsv, 1) for p in points])),
        )
    return out


def fmt(value, spec: str = ".2f") -> str:
    return "n/a" if value is None or (isinstance(value, float) and not np.isfinite(value)) else format(value, spec)


def report(results: dict, opts: argparse.Namespace) -> str:
    lines = [
        "# AESVM (AESVC) vs scikit-learn SVC on the full data",
        "",
        f"Command: `{' '.join([Path(sys.argv[0]).name] + sys.argv[1:])}`",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"scikit-learn {sklearn.__version__}; commit {opts.revision} (at the start of the run).",
        f"AESVC: epsilon={opts.epsilon:g}, P={opts.P}, V={opts.V}, segmentation={opts.segmentation}, "
        f"n_jobs={opts.n_jobs}; "
        f"SVC cache_size={opts.cache_size:g} MB for both.",
        "",
        "Times in seconds. OTS = (total SVC time) / (total AESVC time including every DeriveRS); "
        "ETS = mean over the grid of T_SVC / T_AESVC (DeriveRS excluded); RMSE = root mean square of the "
        "test-accuracy difference (percentage points); OCS = total #SV of SVC / total #SV of AESVC.",
        "",
        "| data (train rows) | grid | mean M/N | DeriveRS total | AESVC total | SVC total | OTS | ETS | RMSE pp | "
        "max acc AESVC / SVC | OCS |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, (data, records) in results.items():
        s = summary(records)
        lines.append(
            f"| {name} ({data.X_train.shape[0]}) | {s['points']} | {s['mean_fraction']:.3f} | {s['derive']:.2f} | "
            f"{s['ae_total']:.2f} | {fmt(s.get('svc_total'))} | {fmt(s.get('ots'))} | {fmt(s.get('ets'))} | "
            f"{fmt(s.get('rmse'), '.3f')} | {100 * s['max_ae']:.2f} / {fmt(100 * s.get('max_svc', np.nan))} | "
            f"{fmt(s.get('ocs'))} |"
        )
    for name, (data, records) in results.items():
        lines += ["", f"## {name}", "", f"{data.note}. Test rows: {data.X_test.shape[0]}."]
        if opts.svc_max_rows and opts.svc_max_rows < data.X_train.shape[0]:
            lines.append(f"**SVC trained on a random {opts.svc_max_rows} of the training rows, not the full data.**")
        lines += ["", "| gamma | DeriveRS s | M/N | M per class | max residual | promoted | C | AESVC-SVM s | "
                      "AESVC acc | AESVC #SV | SVC s | SVC acc | SVC #SV |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in records:
            for k, p in enumerate(r.points):
                head = (f"| {r.gamma:g} | {r.derive_time:.2f} | {r.fraction:.4f} | {r.size_per_class} | "
                        f"{r.max_residual:.2e} | {r.counts['promoted']} |") if k == 0 else "| | | | | | |"
                lines.append(f"{head} {p.C:g} | {p.ae_time:.2f} | {100 * p.ae_acc:.2f} | {p.ae_nsv} | "
                             f"{fmt(p.svc_time)} | {fmt(100 * p.svc_acc)} | {p.svc_nsv} |")
    return "\n".join(lines) + "\n"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def parse_floats(text: str) -> list[float]:
    return [float(part) for part in text.split(",") if part.strip()]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--datasets", default=",".join(ALL_DATASETS), help="comma-separated subset of %(default)s")
    add("--grid", choices=("small", "paper"), default="small")
    add("--gammas", type=parse_floats, default=None, help="override the grid's gammas (comma-separated)")
    add("--Cs", type=parse_floats, default=None, help="override the grid's Cs (comma-separated)")
    add("--kernel", choices=("rbf", "poly"), default="rbf")
    add("--degree", type=int, default=3, help="polynomial degree (--kernel poly)")
    add("--coef0", type=float, default=1.0, help="polynomial coef0 (--kernel poly; the paper's (1 + x'z)^d)")
    add("--epsilon", type=float, default=1e-3)
    add("--P", type=int, default=100_000)
    add("--V", type=int, default=1_000)
    add("--segmentation", choices=("fls2", "fls1"), default="fls2")
    add("--cache-size", type=float, default=500.0, help="SVC kernel cache in MB (both methods)")
    add("--checkerboard-size", type=int, default=1_000_000)
    add("--max-train-rows", type=int, default=None, help="random training subset (sanity runs)")
    add("--svc-max-rows", type=int, default=None, help="train the SVC reference on a random subset only")
    add("--no-svc", action="store_true", help="skip the SVC reference (no speedups/RMSE)")
    add("--n-jobs", type=int, default=1, help="DeriveRS threads (AESVC n_jobs)")
    add("--kdd-encoding", choices=KDD99_ENCODINGS, default="codes",
        help="kdd99 categorical columns: integer codes (41 features, as the paper's D1) or one-hot (118)")
    add("--kdd-log", action="store_true", help="kdd99: log1p of the count columns before min-max")
    add("--seed", type=int, default=0)
    add("--output", type=Path, default=DEFAULT_RESULTS)
    opts = parser.parse_args(argv)
    opts.datasets = [name.strip() for name in opts.datasets.split(",") if name.strip()]
    unknown = sorted(set(opts.datasets) - set(ALL_DATASETS))
    if unknown:
        parser.error(f"unknown datasets {unknown}; choose from {ALL_DATASETS}")
    return opts


def main(argv: Sequence[str] | None = None) -> int:
    opts = parse_args(argv)
    opts.revision = git_revision()
    sys.path.insert(0, str(REPO_ROOT / "src"))
    warm_up()
    results = {}
    for name in opts.datasets:
        log(f"loading {name}")
        data = take_rows(load_dataset(name, opts), opts.max_train_rows, opts.seed)

        def write(records, name=name, data=data):
            results[name] = (data, records)
            text = report(results, opts)  # rewritten after every gamma: a partial run keeps its tables
            opts.output.parent.mkdir(parents=True, exist_ok=True)
            opts.output.write_text(text)
            return text

        text = write(run_dataset(data, opts, on_gamma=lambda records: write(list(records))))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
