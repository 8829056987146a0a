"""Benchmark coresvm's CoreSVC solvers against scikit-learn's SVC on real data.

One run trains, for every selected dataset,

* ``CoreSVC(solver=s, search=m)`` for the ``--methods`` pairs (the core-set solvers
  coreset and cvm, and fw, mfw, swap, partan with full or random vertex search),
  each with its own L2-SVM ``C`` chosen on a validation split of the training data
  (hold out 20%, fit on at most ``--select-rows`` of the rest for every C of the grid,
  keep the best validation accuracy, then train on the whole training set);
* the ``--svc-c-methods`` pairs once more at SVC's ``C`` (no selection; how LibCVM's
  published CVM/BVM figures were run);
* the first method again with time budgets ``max_time`` from ``--budgets`` (the anytime
  model a user gets by setting ``max_time``);
* scikit-learn ``SVC`` with the literature / LIBSVM-grid ``C`` and ``gamma`` on the full
  training set and on random fractions of it (``--svc-fractions``),

and writes a markdown table to ``benchmarks/results/<dataset>.md`` (also printed).
Every method uses the same RBF ``gamma`` (see ``DATASET_PARAMS``).

Data (``ijcnn1``, ``w8a``, ``a9a``: LIBSVM files ``<name>.xz`` / ``<name>.t.xz``) is read
from ``../shared/datasets`` relative to the repository root, or from ``$CORESVM_DATASETS``.
``checkerboard`` is generated (4x4 board on [0, 4)^2, see :func:`make_checkerboard`).

Run from the repository root::

    python benchmarks/run_benchmarks.py --datasets ijcnn1,w8a,a9a,checkerboard
    python benchmarks/run_benchmarks.py --quick --datasets ijcnn1 --max-time 10   # smoke run

``--quick`` trains on a random 20% of each training set, uses a 100k-point checkerboard
and a 30 s time limit per fit (unless ``--checkerboard-size`` / ``--max-time`` are given).
scikit-learn's SVC has no time limit: control its cost with ``--svc-fractions``.
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import lzma
import os
import platform
import resource
import shlex
import shutil
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import ModuleType

import numpy as np
import scipy.sparse as sp
import sklearn
from provenance import git_revision
from sklearn.base import BaseEstimator
from sklearn.datasets import load_svmlight_file
from sklearn.exceptions import ConvergenceWarning
from sklearn.svm import SVC

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATASETS_DIR = REPO_ROOT.parent / "shared" / "datasets"
DEFAULT_RESULTS_DIR = Path(__file__).resolve().parent / "results"

# SVC's C and gamma from the literature / LIBSVM grid.  ``gamma`` is used by every method
# (CoreSVC included); ``svc_C`` only by SVC -- CoreSVC's L2-SVM C is selected on validation data.
DATASET_PARAMS: dict[str, dict[str, float]] = {
    "ijcnn1": {"gamma": 0.125, "svc_C": 256.0},
    "w8a": {"gamma": 0.03125, "svc_C": 16.0},
    "a9a": {"gamma": 0.05, "svc_C": 4.0},
    "checkerboard": {"gamma": 2.0, "svc_C": 100.0},  # points in [0, 4)^2, unit cells
}
# LIBSVM files: (train file, test file, n_features, keep CSR sparse?)
LIBSVM_FILES: dict[str, tuple[str, str, int, bool]] = {
    "ijcnn1": ("ijcnn1.xz", "ijcnn1.t.xz", 22, False),
    "w8a": ("w8a.xz", "w8a.t.xz", 300, True),
    "a9a": ("a9a.xz", "a9a.t.xz", 123, True),
}
ALL_DATASETS = (*LIBSVM_FILES, "checkerboard")
DEFAULT_METHODS = "coreset:auto,cvm:auto,swap:full,mfw:full,partan:full,fw:full,swap:random,mfw:random"
DEFAULT_SVC_FRACTIONS = "0.1,0.25,0.5,1.0"
CHECKERBOARD_SVC_FRACTIONS = "0.01,0.1,0.25"
CHECKERBOARD_TEST_SIZE = 100_000
QUICK_TRAIN_FRACTION = 0.2
QUICK_CHECKERBOARD_SIZE = 100_000
QUICK_MAX_TIME = 30.0
VALIDATION_FRACTION = 0.2
ERROR_CHARS = 100  # of an error message shown in the table

Matrix = np.ndarray | sp.csr_matrix


# ------------------------------------------------------------------------------ data
@dataclass
class Dataset:
    """A train/test split plus the kernel width and SVC's C for it."""

    name: str
    X_train: Matrix
    y_train: np.ndarray
    X_test: Matrix
    y_test: np.ndarray
    gamma: float
    svc_C: float


def make_checkerboard(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` uniform points on [0, 4)^2 labelled by a 4x4 checkerboard (+1 / -1)."""
    import_coresvm()
    return importlib.import_module("coresvm.datasets").make_checkerboard(n, random_state=seed)


def load_libsvm(path: Path, n_features: int, sparse: bool) -> tuple[Matrix, np.ndarray]:
    """Read an xz-compressed LIBSVM file as CSR (``sparse``) or a dense array."""
    with lzma.open(path, "rb") as handle:
        X, y = load_svmlight_file(handle, n_features=n_features)
    if not sparse:
        return X.toarray(), y
    # load_svmlight_file gives int64 indices, which sklearn's SVC rejects; row subsets get int32 anyway.
    X = sp.csr_matrix((X.data, X.indices.astype(np.int32), X.indptr.astype(np.int32)), shape=X.shape)
    return X, y


def datasets_dir() -> Path:
    """``$CORESVM_DATASETS`` if set, otherwise ``<repo>/../shared/datasets``."""
    return Path(os.environ.get("CORESVM_DATASETS", DEFAULT_DATASETS_DIR))


def load_dataset(name: str, checkerboard_size: int, seed: int) -> Dataset:
    """Load (or generate) one dataset with its parameters from ``DATASET_PARAMS``."""
    params = DATASET_PARAMS[name]
    if name == "checkerboard":
        X_train, y_train = make_checkerboard(checkerboard_size, seed)
        X_test, y_test = make_checkerboard(CHECKERBOARD_TEST_SIZE, seed + 1)
    else:
        train_file, test_file, n_features, sparse = LIBSVM_FILES[name]
        X_train, y_train = load_libsvm(datasets_dir() / train_file, n_features, sparse)
        X_test, y_test = load_libsvm(datasets_dir() / test_file, n_features, sparse)
    return Dataset(name, X_train, y_train, X_test, y_test, params["gamma"], params["svc_C"])


def subsample(data: Dataset, fraction: float, seed: int) -> Dataset:
    """Keep a random ``fraction`` of the training rows (the test set is unchanged)."""
    n = data.X_train.shape[0]
    rows = np.sort(np.random.RandomState(seed).permutation(n)[: max(2, int(round(fraction * n)))])
    return Dataset(data.name, data.X_train[rows], data.y_train[rows], data.X_test, data.y_test, data.gamma, data.svc_C)


# --------------------------------------------------------------------------- fitting
def import_coresvm() -> ModuleType:
    """The installed coresvm, or else the one in this checkout's ``src``.

    Unless ``NUMBA_CACHE_DIR`` is set, numba's on-disk cache goes to a fresh temporary
    directory (removed at exit): the benchmark never writes into the source tree and never
    loads a cache that another process (e.g. a concurrent test run) is writing to.
    """
    if "numba" not in sys.modules and "NUMBA_CACHE_DIR" not in os.environ:
        cache_dir = tempfile.mkdtemp(prefix="coresvm-bench-numba-")
        os.environ["NUMBA_CACHE_DIR"] = cache_dir
        atexit.register(shutil.rmtree, cache_dir, ignore_errors=True)
    try:
        return importlib.import_module("coresvm")
    except ImportError:  # a source checkout that was not pip-installed
        sys.path.insert(0, str(REPO_ROOT / "src"))
        return importlib.import_module("coresvm")


@dataclass
class FitResult:
    """One trained model, evaluated on the test set."""

    train_time: float
    accuracy: float
    n_sv: int
    n_iter: int
    cut: bool


@dataclass
class Row:
    """One line of the results table."""

    method: str
    search: str
    C: float
    select_time: float | None = None
    fit: FitResult | None = None
    select_note: str = ""
    svc_fraction: float | None = None
    error: str = ""


def fit_model(model: BaseEstimator, X: Matrix, y: np.ndarray) -> tuple[float, bool]:
    """Fit ``model``; return (seconds, whether it stopped before convergence)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        start = time.perf_counter()
        model.fit(X, y)
        elapsed = time.perf_counter() - start
    return elapsed, int(getattr(model, "fit_status_", 0)) != 0


def accuracy(model: BaseEstimator, X: Matrix, y: np.ndarray) -> float:
    """Fraction of correctly predicted labels."""
    return float(np.mean(model.predict(X) == y))


def evaluate(
    model: BaseEstimator, X_train: Matrix, y_train: np.ndarray, X_test: Matrix, y_test: np.ndarray
) -> FitResult:
    """Train on the training set, score on the test set."""
    seconds, cut = fit_model(model, X_train, y_train)
    n_iter = int(np.sum(model.n_iter_))
    return FitResult(seconds, 100.0 * accuracy(model, X_test, y_test), len(model.support_), n_iter, cut)


def make_coresvc(
    solver: str, search: str, C: float, gamma: float, opts: argparse.Namespace, max_time: float
) -> BaseEstimator:
    """A CoreSVC with the benchmark's common settings.

    ``solver`` may name a stopping rule for the gsvm family after a dash: ``mnsvm-meb`` is
    ``CoreSVC(solver='mnsvm', stopping='meb')`` (Strack 2013 sec. 7.1.4 compares MNSVM with
    SphereSVM and BVM under the MEB rule).
    """
    solver, _, stopping = solver.partition("-")
    return import_coresvm().CoreSVC(
        C=C,
        gamma=gamma,
        solver=solver,
        search=search,
        tol=opts.tol,
        max_time=max_time,
        cache_size=opts.cache_size,
        random_state=0,
        **({"stopping": stopping} if stopping else {}),
    )


@dataclass
class SelectionSplit:
    """Rows of the training set used to choose CoreSVC's C."""

    X_fit: Matrix
    y_fit: np.ndarray
    X_val: Matrix
    y_val: np.ndarray


def selection_split(data: Dataset, select_rows: int, val_rows: int, seed: int) -> SelectionSplit:
    """Hold out 20% of the training rows; fit on at most ``select_rows`` of the others."""
    n = data.X_train.shape[0]
    order = np.random.RandomState(seed).permutation(n)
    n_val = int(round(VALIDATION_FRACTION * n))
    val, rest = order[:n_val][:val_rows], order[n_val:][:select_rows]
    return SelectionSplit(data.X_train[rest], data.y_train[rest], data.X_train[val], data.y_train[val])


def select_C(
    solver: str, search: str, data: Dataset, split: SelectionSplit, opts: argparse.Namespace
) -> tuple[float, float, int]:
    """Best validation C over ``opts.c_grid``; returns (C, seconds spent, fits cut by the time limit)."""
    start, scores, n_cut = time.perf_counter(), [], 0
    for C in opts.c_grid:
        model = make_coresvc(solver, search, C, data.gamma, opts, opts.select_max_time)
        _, cut = fit_model(model, split.X_fit, split.y_fit)
        n_cut += cut
        scores.append(accuracy(model, split.X_val, split.y_val))
    best = int(np.argmax(scores))  # ties: the smallest C
    return float(opts.c_grid[best]), time.perf_counter() - start, n_cut


def run_coresvc(
    solver: str, search: str, data: Dataset, split: SelectionSplit, opts: argparse.Namespace, chosen: dict
) -> Row:
    """Select C on the validation split, then train on all training data."""
    C, select_seconds, n_cut = select_C(solver, search, data, split, opts)
    chosen[(solver, search)] = C
    model = make_coresvc(solver, search, C, data.gamma, opts, opts.max_time)
    result = evaluate(model, data.X_train, data.y_train, data.X_test, data.y_test)
    note = f" ({n_cut} cut)" if n_cut else ""
    return Row(f"CoreSVC {solver}", search, C, select_seconds, result, select_note=note)


def run_budget(solver: str, search: str, C: float, budget: float, data: Dataset, opts: argparse.Namespace) -> Row:
    """The anytime model: the same solver and C, stopped by ``max_time=budget``."""
    model = make_coresvc(solver, search, C, data.gamma, opts, budget)
    result = evaluate(model, data.X_train, data.y_train, data.X_test, data.y_test)
    return Row(f"CoreSVC {solver} (max_time={budget:g})", search, C, fit=result)


def run_svc(fraction: float, data: Dataset, opts: argparse.Namespace) -> Row:
    """scikit-learn SVC on a random fraction of the training data."""
    part = data if fraction >= 1.0 else subsample(data, fraction, opts.seed)
    model = SVC(C=data.svc_C, gamma=data.gamma, cache_size=opts.cache_size)
    result = evaluate(model, part.X_train, part.y_train, data.X_test, data.y_test)
    return Row(svc_name(fraction), "-", data.svc_C, fit=result, svc_fraction=fraction)


def run_svc_c(solver: str, search: str, data: Dataset, opts: argparse.Namespace) -> Row:
    """A CoreSVC at SVC's C (no selection): how LibCVM's published figures were run (issue 3)."""
    model = make_coresvc(solver, search, data.svc_C, data.gamma, opts, opts.max_time)
    result = evaluate(model, data.X_train, data.y_train, data.X_test, data.y_test)
    return Row(f"CoreSVC {solver} (SVC's C)", search, data.svc_C, fit=result)


def svc_name(fraction: float) -> str:
    """'SVC (10%)' etc."""
    return f"SVC ({fraction:.0%})"


def guarded(method: str, search: str, job: Callable[[], Row]) -> Row:
    """Run one benchmark job; a failure becomes an error row instead of ending the run."""
    log(f"  {method} / {search} ...")
    try:
        row = job()
    except Exception as exc:  # a benchmark keeps going after one broken method
        traceback.print_exc()
        message = f"{type(exc).__name__}: {exc}".replace("|", "/").replace("\n", " ")
        return Row(method, search, float("nan"), error=message[:ERROR_CHARS])
    fit = row.fit
    log(f"    C={row.C:g} train {fit.train_time:.2f}s acc {fit.accuracy:.2f}% SV {fit.n_sv} it {fit.n_iter}")
    return row


def warm_up(data: Dataset, opts: argparse.Namespace) -> None:
    """Compile numba code for this data type so that no timed fit pays for JIT compilation."""
    split = selection_split(data, 500, 100, opts.seed)
    for solver, search in opts.methods + opts.svc_c_methods:
        model = make_coresvc(solver, search, 1.0, data.gamma, opts, 2.0).set_params(max_iter=200)
        fit_model(model, split.X_fit, split.y_fit)
        model.predict(split.X_val)


def run_dataset(data: Dataset, opts: argparse.Namespace, svc_fractions: Sequence[float]) -> list[Row]:
    """All CoreSVC variants and SVC fractions on one dataset."""
    warm_up(data, opts)
    split = selection_split(data, opts.select_rows, opts.val_rows, opts.seed)
    rows, chosen = [], {}
    for solver, search in opts.methods:
        job = partial(run_coresvc, solver, search, data, split, opts, chosen)
        rows.append(guarded(f"CoreSVC {solver}", search, job))
    for solver, search in opts.svc_c_methods:
        rows.append(guarded(f"CoreSVC {solver} (SVC's C)", search, partial(run_svc_c, solver, search, data, opts)))
    first = opts.methods[0]
    for budget in opts.budgets:
        if first in chosen:
            job = partial(run_budget, *first, chosen[first], budget, data, opts)
            rows.append(guarded(f"CoreSVC {first[0]} (max_time={budget:g})", first[1], job))
    for fraction in sorted(svc_fractions):
        rows.append(guarded(svc_name(fraction), "-", partial(run_svc, fraction, data, opts)))
    return rows


# --------------------------------------------------------------------------- report
def header(data: Dataset, opts: argparse.Namespace, n_train_full: int) -> list[str]:
    """Markdown lines describing the machine, versions, command and settings."""
    X = data.X_train
    kind = f"CSR, {X.nnz / X.shape[0]:.1f} nonzeros/row" if sp.issparse(X) else "dense"
    coresvm, numba = import_coresvm(), importlib.import_module("numba")
    return [
        f"# Benchmark: {data.name}",
        "",
        f"- Command: `{shlex.join(sys.orig_argv)}`",
        f"- Machine: {platform.platform()}, {platform.machine()}, os.cpu_count() = {os.cpu_count()}, "
        f"Python {platform.python_version()}",
        f"- Versions: coresvm {coresvm.__version__} (git {git_revision()}, `{Path(coresvm.__file__).parent}`), "
        f"scikit-learn {sklearn.__version__}, numba {numba.__version__}, numpy {np.__version__}",
        f"- Data: {X.shape[0]} training rows (of {n_train_full}), {data.X_test.shape[0]} test rows, "
        f"{X.shape[1]} features ({kind})",
        f"- Kernel: RBF, gamma = {data.gamma:g} for every method; SVC C = {data.svc_C:g}",
        f"- CoreSVC: tol = {opts.tol:g}, max_time = {opts.max_time:g} s, cache = {opts.cache_size:g} MB; "
        f"C chosen from {{{', '.join(f'{c:g}' for c in opts.c_grid)}}} by accuracy on {VALIDATION_FRACTION:.0%} "
        f"held-out training rows (at most {opts.val_rows}), fitting on at most {opts.select_rows} of the other "
        f"rows with max_time = {opts.select_max_time:g} s",
    ]


def reference(rows: Sequence[Row]) -> Row | None:
    """Full-data SVC, or else the SVC run on the largest fraction."""
    svc = [row for row in rows if row.svc_fraction is not None and row.fit is not None]
    return max(svc, key=lambda row: row.svc_fraction) if svc else None


def table(rows: Sequence[Row]) -> list[str]:
    """The results as markdown table lines."""
    ref = reference(rows)
    ref_name = ref.method if ref else "none"
    lines = [
        f"Reference for the last two columns: {ref_name} (time ratio = reference time / method time).",
        "",
        "| method | search | C | select time (s) | train time (s) | test acc (%) | #SV | iterations "
        f"| time ratio vs {ref_name} | Δacc vs {ref_name} (pp) |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for row in rows:
        lines.append(table_line(row, ref))
    return lines


def table_line(row: Row, ref: Row | None) -> str:
    """One markdown row; cut fits are marked '(cut)', errors are shown in place of the numbers."""
    select = "-" if row.select_time is None else f"{row.select_time:.2f}{row.select_note}"
    if row.fit is None:
        return f"| {row.method} | {row.search} | - | - | error: {row.error} | - | - | - | - | - |"
    fit = row.fit
    train = f"{fit.train_time:.2f}" + (" (cut)" if fit.cut else "")
    ratio = f"{ref.fit.train_time / fit.train_time:.2f}" if ref else "-"
    diff = f"{fit.accuracy - ref.fit.accuracy:+.2f}" if ref else "-"
    return (
        f"| {row.method} | {row.search} | {row.C:g} | {select} | {train} | {fit.accuracy:.2f} | {fit.n_sv} "
        f"| {fit.n_iter} | {ratio} | {diff} |"
    )


def report(data: Dataset, rows: Sequence[Row], opts: argparse.Namespace, n_train_full: int) -> str:
    """The whole markdown file for one dataset."""
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    notes = [
        "",
        "'(cut)': the final fit hit max_time before converging (fit_status_ != 0); "
        "'(k cut)' after the select time: k of the C-selection fits were cut.",
        f"Peak memory (ru_maxrss of the benchmark process after this dataset): {peak_kib / 1024:.0f} MiB "
        f"({peak_kib} KiB).",
    ]
    return "\n".join([*header(data, opts, n_train_full), "", *table(rows), *notes]) + "\n"


# ------------------------------------------------------------------------------- CLI
def log(message: str) -> None:
    """Progress messages go to stderr."""
    print(message, file=sys.stderr, flush=True)


def parse_floats(text: str) -> list[float]:
    """'0.1,0.25' -> [0.1, 0.25]."""
    return [float(part) for part in text.split(",") if part.strip()]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options (see --help)."""
    parser = argparse.ArgumentParser(
        description="Compare CoreSVC solvers with scikit-learn SVC "
        "and write <out-dir>/<dataset>.md (also printed).",
        epilog="examples (from the repository root):" + __doc__.split("Run from the repository root::", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = parser.add_argument
    add("--datasets", default=",".join(ALL_DATASETS), help="comma-separated subset of %(default)s")
    add("--methods", default=DEFAULT_METHODS, help="comma-separated solver:search pairs (default %(default)s)")
    add("--svc-c-methods", default="", help="solver:search pairs trained once more at SVC's C, e.g. cvm:auto")
    add("--budgets", default="", help="extra fits of the first method with these max_time budgets, e.g. 2,3,5")
    add("--quick", action="store_true", help="smoke run: 20%% of each training set, 100k checkerboard, max-time 30 s")
    add("--max-time", type=float, help="seconds per final CoreSVC fit (default 120; 30 with --quick)")
    add("--select-max-time", type=float, help="seconds per C-selection fit (default: --max-time)")
    add(
        "--svc-fractions",
        help=f"training fractions for SVC (default {DEFAULT_SVC_FRACTIONS}; "
        f"{CHECKERBOARD_SVC_FRACTIONS} for checkerboard)",
    )
    add("--checkerboard-size", type=int, help="checkerboard training points (default 1000000; 100000 with --quick)")
    add("--select-rows", type=int, default=10_000, help="max training rows per C-selection fit (default %(default)s)")
    add("--val-rows", type=int, default=20_000, help="max held-out rows scored per C (default %(default)s)")
    add("--c-grid", help="comma-separated CoreSVC C values (default 2**arange(0, 15, 2) = 1,4,...,16384)")
    add("--tol", type=float, default=1e-3, help="CoreSVC relative duality-gap tolerance (default %(default)s)")
    add("--cache-size", type=float, default=200.0, help="kernel cache in MB, CoreSVC and SVC (default %(default)s)")
    add("--seed", type=int, default=0, help="seed of the checkerboard, splits and subsamples (default %(default)s)")
    add("--out-dir", type=Path, default=DEFAULT_RESULTS_DIR, help="output directory (default benchmarks/results)")
    opts = parser.parse_args(argv)
    return finish_args(parser, opts)


def finish_args(parser: argparse.ArgumentParser, opts: argparse.Namespace) -> argparse.Namespace:
    """Fill the defaults that depend on --quick and check the values."""
    opts.datasets = [name.strip() for name in opts.datasets.split(",") if name.strip()]
    opts.methods = [tuple(pair.strip().split(":")) for pair in opts.methods.split(",") if pair.strip()]
    opts.svc_c_methods = [tuple(pair.strip().split(":")) for pair in opts.svc_c_methods.split(",") if pair.strip()]
    if any(len(pair) != 2 for pair in opts.methods + opts.svc_c_methods):
        parser.error("--methods takes solver:search pairs, e.g. coreset:auto,swap:full")
    opts.budgets = parse_floats(opts.budgets) if opts.budgets else []
    unknown = sorted(set(opts.datasets) - set(ALL_DATASETS))
    if unknown:
        parser.error(f"unknown datasets {unknown}; choose from {ALL_DATASETS}")
    if opts.max_time is None:
        opts.max_time = QUICK_MAX_TIME if opts.quick else 120.0
    if opts.select_max_time is None:
        opts.select_max_time = opts.max_time
    if opts.checkerboard_size is None:
        opts.checkerboard_size = QUICK_CHECKERBOARD_SIZE if opts.quick else 1_000_000
    grid = parse_floats(opts.c_grid) if opts.c_grid else (2.0 ** np.arange(0, 15, 2)).tolist()
    opts.c_grid = [float(c) for c in grid]
    fractions = [] if opts.svc_fractions is None else parse_floats(opts.svc_fractions)
    if any(not 0.0 < f <= 1.0 for f in fractions):
        parser.error("--svc-fractions must lie in (0, 1]")
    if min(opts.c_grid) <= 0 or opts.max_time <= 0 or opts.select_max_time <= 0:
        parser.error("C values and time limits must be positive")
    return opts


def svc_fractions_for(name: str, opts: argparse.Namespace) -> list[float]:
    """--svc-fractions if given, else the per-dataset default."""
    if opts.svc_fractions is not None:
        return parse_floats(opts.svc_fractions)
    return parse_floats(CHECKERBOARD_SVC_FRACTIONS if name == "checkerboard" else DEFAULT_SVC_FRACTIONS)


def benchmark(name: str, opts: argparse.Namespace) -> str:
    """Load, run and report one dataset; returns the markdown."""
    log(f"== {name}: loading")
    data = load_dataset(name, opts.checkerboard_size, opts.seed)
    n_train_full = data.X_train.shape[0]
    if opts.quick and name != "checkerboard":
        data = subsample(data, QUICK_TRAIN_FRACTION, opts.seed)
    rows = run_dataset(data, opts, svc_fractions_for(name, opts))
    return report(data, rows, opts, n_train_full)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark for every requested dataset."""
    opts = parse_args(argv)
    opts.out_dir.mkdir(parents=True, exist_ok=True)
    for name in opts.datasets:
        markdown = benchmark(name, opts)
        path = opts.out_dir / f"{name}.md"
        path.write_text(markdown)
        print(markdown, flush=True)
        log(f"== {name}: wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
