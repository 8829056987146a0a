"""coresvm against the tools people already use, side by side in one run.

For every data set, on the same training rows and the same test set:

* scikit-learn ``SVC`` on all training rows (not on the 1M-point checkerboard: hours);
* sklearnex ``SVC`` (Intel's drop-in, ``pip install scikit-learn-intelex``; the ``bench`` extra), or a
  "not installed" row;
* ``SVC`` on random 5 / 10 / 25 / 50% subsamples of the training rows (1 / 2 / 5 / 10% of the checkerboard);
* Nystroem features (1,000 components) + a linear SVM (``LinearSVC``);
* ``CoreSVC`` with its defaults, given only ``gamma`` and a ``C`` chosen here: 20% of the training rows
  (at most 5,000) are held out, ``CoreSVC`` is fitted on at most 10,000 of the others for every C in
  SVC's C x 4^k, k = 0..5, and the C with the best held-out accuracy wins, the smaller C on ties (what
  scikit-learn's ``GridSearchCV`` picks).  The selection's time is its own column; the reported fit is on
  all training rows.

SVC's C and gamma are the cross-validated values of the LIBSVM grid (``SETS``).  Each method runs in
a fresh process (its peak RSS is its own), after a warm-up fit of the same kind in that process, so
no method pays for compiling code.  The timed fit is repeated (``--repeats``, 3) while the row's fits have taken
under a minute, and the row reports the median time and the range: this machine's timings move 10-35% from run
to run, as much as some of the margins measured.  Per row: fit seconds, test accuracy, #SV, peak RSS.

Writes ``benchmarks/results/compare.md`` (or ``--out``) with the command, date, revision, machine
and library versions, and one accuracy-vs-time plot per set (``compare_<set>.png``; with ``--out NAME.md``,
``NAME_<set>.png``).

    python benchmarks/compare.py                       # every set (about 20 minutes on 2 cores)
    python benchmarks/compare.py --sets ijcnn1,usps    # some
    python benchmarks/compare.py --quick               # CI-sized: small subsets, under 2 minutes
"""

from __future__ import annotations

import argparse
import gzip
import json
import lzma
import multiprocessing
import os
import resource
import shlex
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from queue import Empty

import numpy as np
import scipy.sparse as sp
from provenance import first_touch_seconds_per_gib, git_revision, library_versions, machine

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
SEED = 0

# name -> (SVC's C, gamma, subsample fractions for SVC, whether SVC runs on all rows)
SETS: dict[str, tuple[float, float, tuple[float, ...], bool]] = {
    "ijcnn1": (256.0, 2.0**-3, (0.05, 0.1, 0.25, 0.5), True),
    "w8a": (16.0, 2.0**-5, (0.05, 0.1, 0.25, 0.5), True),
    "a9a": (4.0, 2.0**-7, (0.05, 0.1, 0.25, 0.5), True),
    "kdd99": (64.0, 0.5, (0.05, 0.1, 0.25, 0.5), True),
    "checkerboard": (10.0, 2.0, (0.01, 0.02, 0.05, 0.1), False),
    "usps": (4.0, 2.0**-7, (0.05, 0.1, 0.25, 0.5), True),
    "letter": (16.0, 2.0, (0.05, 0.1, 0.25, 0.5), True),
    "pendigits": (16.0, 2.0, (0.05, 0.1, 0.25, 0.5), True),  # features / 100; 3-fold CV grid of SVC
}
LIBSVM_FILES = {  # name -> (train, test, n_features, keep CSR)
    "ijcnn1": ("ijcnn1.xz", "ijcnn1.t.xz", 22, False),
    "w8a": ("w8a.xz", "w8a.t.xz", 300, True),
    "a9a": ("a9a.xz", "a9a.t.xz", 123, True),
    "letter": ("letter.scale.xz", "letter.scale.t.xz", 16, False),
    "pendigits": ("pendigits.xz", "pendigits.t.xz", 16, False),
}
CHECKERBOARD_ROWS, CHECKERBOARD_TEST_ROWS = 1_000_000, 100_000
C_STEPS = 6  # SVC's C x 4^k, k = 0..5
SELECT_ROWS, HELD_OUT_ROWS = 10_000, 5_000
METHOD_LIMIT_S = 900.0  # a method's process (C selection, warm-up and timed fits) is stopped after this
REPEAT_BUDGET_S = 60.0  # a row's timed fit is repeated only while its fits so far took less than this
NYSTROEM_COMPONENTS = 1000
NYSTROEM_MAX_BYTES = 4 * 2**30  # 1M checkerboard rows x 1000 components took 24 GB in LinearSVC: not run there
QUICK_SETS = ("ijcnn1", "usps", "checkerboard")
QUICK_ROWS = 5_000  # --quick: training rows per set (the checkerboard: 50,000)


def datasets_dir() -> Path:
    env = os.environ.get("CORESVM_DATASETS")
    return Path(env) if env else REPO.parent / "shared" / "datasets"


# ----------------------------------------------------------------------------------------- data
def _libsvm(name: str):
    from sklearn.datasets import load_svmlight_file

    train, test, n_features, sparse = LIBSVM_FILES[name]
    parts = []
    for file in (train, test):
        with lzma.open(datasets_dir() / file, "rb") as handle:
            X, y = load_svmlight_file(handle, n_features=n_features)
        X = sp.csr_matrix((X.data, X.indices.astype(np.int32), X.indptr.astype(np.int32)), shape=X.shape)
        parts += [X if sparse else X.toarray(), y]
    if name == "pendigits":  # values 0-100
        parts[0], parts[2] = parts[0] / 100.0, parts[2] / 100.0
    return parts


def _usps():
    parts = []
    for file in ("zip.train.gz", "zip.test.gz"):
        with gzip.open(datasets_dir() / file, "rt") as handle:
            table = np.loadtxt(handle)
        parts += [np.ascontiguousarray(table[:, 1:]), table[:, 0]]
    return parts


def _kdd99():
    """KDD'99 10%: all 494,021 records, normal (-1) vs attack (+1); protocol, service and flag one-hot;
    every column min-max scaled to [0, 1] on the training rows; a random 80/20 split."""
    with gzip.open(datasets_dir() / "kddcup.data_10_percent.gz", "rt") as handle:
        fields = [line.strip().split(",") for line in handle if line.strip()]
    y = np.array([-1.0 if row[-1] == "normal." else 1.0 for row in fields])
    columns = list(zip(*(row[:-1] for row in fields), strict=True))
    blocks = []
    for j, column in enumerate(columns):
        if j in (1, 2, 3):
            _, codes = np.unique(np.array(column), return_inverse=True)
            blocks.append(np.eye(codes.max() + 1)[codes])
        else:
            blocks.append(np.asarray(column, dtype=np.float64)[:, None])
    X = np.hstack(blocks)
    order = np.random.RandomState(SEED).permutation(len(y))
    n_train = int(0.8 * len(y))
    train, test = np.sort(order[:n_train]), np.sort(order[n_train:])
    low, high = X[train].min(axis=0), X[train].max(axis=0)
    X = np.clip((X - low) / np.where(high > low, high - low, 1.0), 0.0, 1.0)
    return [X[train], y[train], X[test], y[test]]


def _checkerboard(rows: int):
    from coresvm.datasets import make_checkerboard

    X, y = make_checkerboard(rows, random_state=SEED)
    X_test, y_test = make_checkerboard(CHECKERBOARD_TEST_ROWS, random_state=SEED + 1)
    return [X, y.astype(np.float64), X_test, y_test.astype(np.float64)]


def load(name: str, quick: bool):
    """``[X_train, y_train, X_test, y_test]``; ``quick``: a random subset of the training rows."""
    if name == "checkerboard":
        return _checkerboard(50_000 if quick else CHECKERBOARD_ROWS)
    parts = _usps() if name == "usps" else _kdd99() if name == "kdd99" else _libsvm(name)
    if quick and parts[0].shape[0] > QUICK_ROWS:
        rows = np.sort(np.random.RandomState(SEED).permutation(parts[0].shape[0])[:QUICK_ROWS])
        parts[0], parts[1] = parts[0][rows], parts[1][rows]
    return parts


def save(parts, folder: Path) -> None:
    for key, value in zip(("X_train", "y_train", "X_test", "y_test"), parts, strict=True):
        if sp.issparse(value):
            sp.save_npz(folder / f"{key}.npz", value.tocsr())
        else:
            np.save(folder / f"{key}.npy", value)


def restore(folder: Path):
    parts = []
    for key in ("X_train", "y_train", "X_test", "y_test"):
        npz = folder / f"{key}.npz"
        parts.append(sp.load_npz(npz).tocsr() if npz.exists() else np.load(folder / f"{key}.npy"))
    return parts


def data_bytes(X) -> int:
    return int(X.data.nbytes + X.indices.nbytes + X.indptr.nbytes) if sp.issparse(X) else int(X.nbytes)


# ---------------------------------------------------------------------------------- methods
@dataclass
class Row:
    method: str
    fit_s: float = float("nan")  # the median of the timed fits
    fits_s: list = field(default_factory=list)  # every timed fit
    accuracy: float = float("nan")
    n_sv: int = 0
    peak_rss_mb: float = float("nan")
    select_s: float = float("nan")
    note: str = ""
    fraction: float = 1.0  # of the training rows (SVC subsamples)
    extra: dict = field(default_factory=dict)


def subsample(X, y, fraction: float, seed: int):
    rows = np.sort(np.random.RandomState(seed).permutation(X.shape[0])[: max(10, int(round(fraction * X.shape[0])))])
    return X[rows], y[rows]


def make_svc(kind: str, C: float, gamma: float):
    if kind == "sklearnex":
        from sklearnex.svm import SVC as FastSVC

        return FastSVC(C=C, gamma=gamma, cache_size=1000)
    from sklearn.svm import SVC

    return SVC(C=C, gamma=gamma, cache_size=1000)


def make_model(method: str, C: float, gamma: float):
    """A fresh ``CoreSVC`` with its defaults (``method`` 'coresvm') or ``SVC`` ('sklearn', 'sklearnex')."""
    if method == "coresvm":
        from coresvm import CoreSVC

        return CoreSVC(C=C, gamma=gamma, random_state=SEED)
    return make_svc(method, C, gamma)


def _nystroem(C: float, gamma: float):
    from sklearn.kernel_approximation import Nystroem
    from sklearn.pipeline import make_pipeline
    from sklearn.svm import LinearSVC

    return make_pipeline(Nystroem(gamma=gamma, n_components=NYSTROEM_COMPONENTS, random_state=SEED),
                         LinearSVC(C=C, max_iter=5000))


def n_support_vectors(model) -> int:
    if hasattr(model, "support_"):
        return int(len(model.support_))
    return 0


def warm_up(make, X, y) -> None:
    """One fit of the same kind on a few rows, so compiled code is loaded before the timed fit."""
    rows = min(X.shape[0], 6_000)
    X_small, y_small = subsample(X, y, rows / X.shape[0], SEED + 7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        make().fit(X_small, y_small)


def select_core_C(X, y, svc_C: float, gamma: float) -> tuple[float, float, list]:
    """CoreSVC's C on a held-out split (module docstring); returns (C, seconds, [(C, accuracy)])."""
    start = time.perf_counter()
    n = X.shape[0]
    order = np.random.RandomState(SEED + 3).permutation(n)
    n_held = min(HELD_OUT_ROWS, int(0.2 * n))
    held, rest = order[:n_held], order[n_held:][:SELECT_ROWS]
    scores = []
    for k in range(C_STEPS):
        C = svc_C * 4.0**k
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = make_model("coresvm", C, gamma).fit(X[rest], y[rest])
        scores.append((C, float(model.score(X[held], y[held]))))
    return best_held_out_choice(scores), time.perf_counter() - start, scores


def best_held_out_choice(scores: list[tuple[float, float]]) -> float:
    """The C of the best held-out accuracy, the smaller C on ties: the choice of scikit-learn's ``GridSearchCV``
    (``best_index_``: the first of the best-ranked candidates, listed here by increasing C)."""
    best = max(accuracy for _, accuracy in scores)
    return min(C for C, accuracy in scores if accuracy == best)


def peak_rss_mb() -> float:
    """This process's peak resident memory: ``VmHWM``, which starts afresh at ``exec`` (``ru_maxrss`` keeps
    the high-water mark of the parent's pages shared at ``fork``: the data the parent holds)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def timed_fits(make, X, y, repeats: int) -> tuple[object, list[float], list]:
    """Up to ``repeats`` fits of fresh models, each timed alone, while their total stays under
    :data:`REPEAT_BUDGET_S`; returns the last model, the times and the convergence warnings of every fit."""
    times, caught = [], []
    while len(times) < max(repeats, 1) and (not times or sum(times) < REPEAT_BUDGET_S):
        model = make()
        with warnings.catch_warnings(record=True) as fit_warnings:
            warnings.simplefilter("always")
            start = time.perf_counter()
            model.fit(X, y)
            times.append(time.perf_counter() - start)
        caught += fit_warnings
    return model, times, caught


def run_method(folder: str, name: str, method: str, fraction: float, repeats: int, queue) -> None:
    """In a fresh process: load the saved data, warm up, time the fits (:func:`timed_fits`), score the last."""
    try:
        X, y, X_test, y_test = restore(Path(folder))
        svc_C, gamma, _, _ = SETS[name]
        row = Row(method=method, fraction=fraction)
        if method == "coresvm":
            # Compiled code loaded first: else the first selection fit pays Numba's compilation (USPS, the first
            # multiclass set with a fresh cache, showed 47 s of selection for about 2.5 s of fits).
            warm_up(partial(make_model, method, svc_C, gamma), X, y)
            C, row.select_s, scores = select_core_C(X, y, svc_C, gamma)
            row.extra = {"C": C, "selection": scores}
            make = partial(make_model, method, C, gamma)
        elif method == "nystroem":
            if X.shape[0] * NYSTROEM_COMPONENTS * 8 > NYSTROEM_MAX_BYTES:
                queue.put(asdict(Row(method=method, note=f"skipped: {X.shape[0]:,} x {NYSTROEM_COMPONENTS} features "
                                     f"exceed {NYSTROEM_MAX_BYTES / 2**30:.0f} GB (LinearSVC copies them)")))
                return
            def make():
                return _nystroem(svc_C, gamma)
        else:
            make = partial(make_model, method, svc_C, gamma)
            if fraction < 1.0:
                X, y = subsample(X, y, fraction, SEED + 11)
        warm_up(make, X, y)
        model, row.fits_s, caught = timed_fits(make, X, y, repeats)
        row.fit_s = float(np.median(row.fits_s))
        row.accuracy = float(np.mean(model.predict(X_test) == y_test))
        row.n_sv = n_support_vectors(model)
        row.peak_rss_mb = peak_rss_mb()
        notes = sorted({str(w.message).split(".")[0][:90] for w in caught if "onvergence" in type(w.message).__name__})
        if method == "coresvm":
            info = model.solver_info_
            info = info if isinstance(info, list) else [info]
            statuses = sorted({record["status"] for record in info})
            notes.append("status " + "/".join(statuses))
            row.extra["status"] = statuses
        row.note = "; ".join(notes)
        queue.put(asdict(row))
    except ImportError as error:
        queue.put(asdict(Row(method=method, fraction=fraction, note=f"not installed ({error.name})")))
    except Exception as error:  # noqa: BLE001 - a failed method is a row, not a failed benchmark
        traceback.print_exc()
        queue.put(asdict(Row(method=method, fraction=fraction, note=f"failed: {error!r}"[:120])))


def call_in_fresh_process(target, args: tuple, limit_s: float, stop_note: str = "") -> dict:
    """``target(*args, queue)`` in a spawned process; returns the dict it puts on ``queue``, or ``{"note": ...}``
    when the process dies or is still running after ``limit_s`` seconds (``stop_note`` ends that note)."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=target, args=(*args, queue))
    process.start()
    started = time.perf_counter()
    while True:  # a child that dies (out of memory, killed) is a failed row, not a hung benchmark
        try:
            result = queue.get(timeout=5)
            break
        except Empty:
            if not process.is_alive():
                result = {"note": f"died (exit code {process.exitcode})"}
                break
            if time.perf_counter() - started > limit_s:
                process.terminate()
                result = {"note": f"stopped: not done in {limit_s:.0f} s{stop_note}"}
                break
    process.join()
    return result


def run_in_process(folder: Path, name: str, method: str, fraction: float = 1.0, repeats: int = 1) -> Row:
    result = call_in_fresh_process(run_method, (str(folder), name, method, fraction, repeats), METHOD_LIMIT_S,
                                   " (selection, warm-up, fits)")
    return Row(**{"method": method, "fraction": fraction, **result})


def methods_for(name: str, quick: bool) -> list[tuple[str, float]]:
    _, _, fractions, full = SETS[name]
    plan = []
    if full:
        plan += [("sklearn", 1.0), ("sklearnex", 1.0)]
    plan += [("sklearn", fraction) for fraction in fractions]
    if not quick:
        plan.append(("nystroem", 1.0))  # skipped in the child when its features would not fit NYSTROEM_MAX_BYTES
    plan.append(("coresvm", 1.0))
    return plan


# ---------------------------------------------------------------------------------- report
def label(row: Row) -> str:
    if row.method == "sklearn":
        return "sklearn SVC" if row.fraction == 1.0 else f"sklearn SVC on {100 * row.fraction:g}%"
    return {"sklearnex": "sklearnex SVC", "nystroem": f"Nystroem ({NYSTROEM_COMPONENTS}) + LinearSVC",
            "coresvm": "**CoreSVC (defaults)**"}[row.method]


def speed_ratio(reference_s: float, seconds: float) -> str:
    """``'7.27x faster'`` or ``'4.40x slower'`` than the reference time."""
    if not (np.isfinite(seconds) and np.isfinite(reference_s) and seconds > 0):
        return ""
    ratio = reference_s / seconds
    return f"{ratio:.2f}x faster" if ratio >= 1.0 else f"{1.0 / ratio:.2f}x slower"


def fastest_svc(rows: list[Row]) -> Row | None:
    full = [row for row in rows if row.method in ("sklearn", "sklearnex") and row.fraction == 1.0
            and np.isfinite(row.fit_s)]
    return min(full, key=lambda row: row.fit_s) if full else None


def table(name: str, rows: list[Row], n_train: int, n_test: int, size_mb: float) -> list[str]:
    svc_C, gamma, _, _ = SETS[name]
    reference = fastest_svc(rows)
    lines = [f"### {name} ({n_train:,} training rows, {n_test:,} test rows, data {size_mb:.0f} MB; "
             f"SVC C={svc_C:g}, gamma={gamma:g})", "",
             "| method | fit s (median) | fits: range | than the fastest full SVC | test acc % | #SV | peak RSS MB | "
             "C selection s | note |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        ratio = speed_ratio(reference.fit_s, row.fit_s) if reference else ""
        core = row.method == "coresvm"
        select = f"{row.select_s:.2f}" if core else ""
        note = row.note + (f"; C={row.extra.get('C'):g}" if core and row.extra.get("C") else "")
        lines.append(f"| {label(row)} | {row.fit_s:.2f} | {fit_range(row)} | {ratio} | {100 * row.accuracy:.2f} | "
                     f"{row.n_sv} | {row.peak_rss_mb:.0f} | {select} | {note} |")
    lines.append("")
    core = next((row for row in rows if row.method == "coresvm" and row.extra.get("selection")), None)
    if core is not None:  # the held-out accuracies behind the choice: near-ties make it move between runs
        scores = ", ".join(f"{C:g}: {100 * accuracy:.2f}%" for C, accuracy in core.extra["selection"])
        lines += [f"CoreSVC's held-out accuracy by C: {scores}; chosen C={core.extra['C']:g}.", ""]
    return lines


def fit_range(row: Row) -> str:
    """``'3: 2.31-2.60'``: how many timed fits the median is of, and their spread."""
    if not row.fits_s:
        return ""
    return f"{len(row.fits_s)}: {min(row.fits_s):.2f}-{max(row.fits_s):.2f}"


def plot(name: str, rows: list[Row], out: Path) -> Path | None:
    """The set's accuracy-vs-time plot beside ``out``, named after it (``compare_ijcnn1.png`` for compare.md)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    figure, axes = plt.subplots(figsize=(5.5, 3.8))
    subs = sorted((row for row in rows if row.method == "sklearn" and np.isfinite(row.fit_s)),
                  key=lambda row: row.fraction)
    if subs:
        axes.plot([row.fit_s for row in subs], [100 * row.accuracy for row in subs], "o-", color="0.4",
                  label="sklearn SVC on a random subsample")
        for row in subs:
            axes.annotate(f"{100 * row.fraction:g}%", (row.fit_s, 100 * row.accuracy), fontsize=7,
                          xytext=(3, -9), textcoords="offset points")
    markers = {"sklearnex": ("s", "tab:blue", "sklearnex SVC"),
               "nystroem": ("^", "tab:green", "Nystroem + LinearSVC"),
               "coresvm": ("*", "tab:red", "CoreSVC (defaults)")}
    for row in rows:
        if row.method in markers and np.isfinite(row.fit_s):
            marker, color, text = markers[row.method]
            axes.plot(row.fit_s, 100 * row.accuracy, marker, color=color, markersize=11 if marker == "*" else 7,
                      label=text, linestyle="none")
    axes.set_xscale("log")
    axes.set_xlabel("fit time (s, log scale)")
    axes.set_ylabel("test accuracy (%)")
    axes.set_title(name)
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=7, loc="lower right")
    figure.tight_layout()
    path = out.parent / f"{out.stem}_{name}.png"
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def header(argv: list[str]) -> list[str]:
    return ["# coresvm against SVC, sklearnex SVC, SVC on subsamples and Nystroem", "",
            f"- command: `{shlex.join(['python', 'benchmarks/compare.py', *argv])}`",
            f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
            f"- revision: {git_revision()}",
            f"- machine: {machine()}",
            f"- libraries: {library_versions()}", "",
            "Each method ran in a fresh process after a warm-up fit of the same kind (compiled code loaded); "
            "fit s is the median wall time of `fit` alone over the timed fits (up to `--repeats`, while they took "
            "under a minute together), their range beside it.  CoreSVC: defaults, the data set's gamma, and C "
            "chosen on held-out training rows: the best held-out accuracy, the smaller C on ties (its time in the "
            "column 'C selection s').  Ratios compare with the faster of sklearn and sklearnex SVC on all rows in "
            "this run.", ""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default=",".join(SETS), help="comma-separated: " + ",".join(SETS))
    parser.add_argument("--quick", action="store_true", help="CI-sized: " + ",".join(QUICK_SETS) +
                        f" on {QUICK_ROWS} rows (the checkerboard 50,000), no Nystroem")
    parser.add_argument("--out", type=Path, default=None, help="markdown file (default results/compare.md)")
    parser.add_argument("--repeats", type=int, default=3,
                        help=f"timed fits per row, while they take under {REPEAT_BUDGET_S:.0f} s together (median)")
    opts = parser.parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv
    names = list(QUICK_SETS) if opts.quick and opts.sets == ",".join(SETS) else opts.sets.split(",")
    unknown = [name for name in names if name not in SETS]
    if unknown:
        parser.error(f"unknown sets {unknown}; known: {', '.join(SETS)}")
    out = opts.out or RESULTS / ("compare_quick.md" if opts.quick else "compare.md")
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = header(argv)
    summary = []
    for name in names:
        print(f"== {name}", flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            parts = load(name, opts.quick)
            save(parts, Path(tmp))
            n_train, n_test, size_mb = parts[0].shape[0], parts[2].shape[0], data_bytes(parts[0]) / 2**20
            del parts
            rows = []
            first_touch = first_touch_seconds_per_gib()
            for method, fraction in methods_for(name, opts.quick):
                row = run_in_process(Path(tmp), name, method, fraction, opts.repeats)
                print(f"   {label(row):40s} {row.fit_s:8.2f} s ({fit_range(row)})  {100 * row.accuracy:6.2f}%  "
                      f"{row.n_sv:6d} SV  {row.peak_rss_mb:6.0f} MB  {row.note}", flush=True)
                rows.append(row)
        lines += table(name, rows, n_train, n_test, size_mb)
        lines += [f"Writing fresh memory cost {first_touch:.2f} s per GiB when this set's runs began (it moves "
                  "between ~0.2 and ~4.6 s on these VMs, and a large Gram pays it: provenance.py).", ""]
        picture = plot(name, rows, out)
        if picture is not None:
            lines += [f"![{name}]({picture.name})", ""]
        summary.append(summary_line(name, rows))
        (out.parent / f"{out.stem}.json").write_text(json.dumps({"sets": summary}, indent=1))
        out.write_text("\n".join(lines + summary_table(summary)) + "\n")
    print(f"wrote {out}")
    return 0


def summary_line(name: str, rows: list[Row]) -> dict:
    core = next((row for row in rows if row.method == "coresvm"), None)
    reference = fastest_svc(rows)
    subs = [row for row in rows if row.method == "sklearn" and row.fraction < 1.0 and np.isfinite(row.fit_s)]
    within = [row for row in subs if core is not None and row.fit_s <= core.fit_s]
    best_sub = max(within, key=lambda row: row.fraction) if within else None
    return {"set": name, "core_s": core.fit_s if core else None, "core_acc": core.accuracy if core else None,
            "core_select_s": core.select_s if core else None,
            "svc": label(reference) if reference else None, "svc_s": reference.fit_s if reference else None,
            "svc_acc": reference.accuracy if reference else None,
            "sub": label(best_sub) if best_sub else None, "sub_acc": best_sub.accuracy if best_sub else None}


def summary_table(summary: list[dict]) -> list[str]:
    lines = ["## Summary", "",
             "| set | CoreSVC s | CoreSVC acc % | fastest full SVC | its s | its acc % | CoreSVC is | "
             "largest SVC subsample within CoreSVC's time | its acc % |", "|---|---|---|---|---|---|---|---|---|"]
    for item in summary:
        def number(key, scale=1.0, item=item):
            value = item.get(key)
            return f"{scale * value:.2f}" if value is not None and np.isfinite(value) else "-"
        speed = speed_ratio(item["svc_s"], item["core_s"]) if item.get("svc_s") and item.get("core_s") else "-"
        lines.append(f"| {item['set']} | {number('core_s')} | {number('core_acc', 100)} | {item['svc'] or '-'} | "
                     f"{number('svc_s')} | {number('svc_acc', 100)} | {speed} | {item['sub'] or 'none'} | "
                     f"{number('sub_acc', 100)} |")
    return lines + [""]


if __name__ == "__main__":
    sys.exit(main())
