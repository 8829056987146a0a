"""CoreSVC's fit time over the C range users select: SVC's C x 4^k, k = 0..5 (C x 1 .. C x 1024).

For every data set of ``compare.py`` (same rows, same gamma, same test set), one ``CoreSVC`` fit with its
defaults per C, each in a fresh process after a warm-up fit (compiled code loaded).  Per fit: seconds,
test accuracy, #SV, peak RSS, the solver's status, and the time as a multiple of the fit at SVC's own C.
With ``--peer``, sklearnex ``SVC`` (or sklearn's when sklearnex is not installed) is fitted at the smallest
and the largest C too, so the growth of a peer's time over the same range is beside ours.

Two small sets are not in ``compare.py`` and run only when named: ``banana`` (the Ratsch / KEEL set,
standardized, a stratified 70/30 split; C and gamma from a 3-fold cross-validated grid of SVC on the training
rows, C = 2^-1, 2^1, .., 2^13 and gamma = 2^-5 .. 2^3) and ``checkerboard-5k`` (5,000 rows, the 1M checkerboard's
C and gamma and test set).  Their problems fit the compiled small-problem path (``solvers/dense.py``).
``onehot-10k`` is the C-selection split of ``many_support_vectors.py --data onehot`` (cover-type-like rows: the
10,000 fitting rows and 5,000 held-out rows of ``compare.select_core_C``, C = 1,024, gamma = 1/16): at its large C
the core set's float32 Gram stops sufficing.

Writes ``benchmarks/results/c_range.md`` (or ``--out``) with the command, date, revision, machine and
library versions.

    python benchmarks/c_range.py                        # every set (about 10 minutes on 2 cores)
    python benchmarks/c_range.py --sets ijcnn1,a9a --peer
    python benchmarks/c_range.py --sets banana,checkerboard-5k --peer --out benchmarks/results/c_range_small.md
"""

from __future__ import annotations

import argparse
import lzma
import shlex
import sys
import tempfile
import time
import traceback
import warnings
from functools import partial
from pathlib import Path

import numpy as np
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from coresvm.datasets import make_checkerboard

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare  # noqa: E402 - the data sets, their C and gamma, and the process helpers are compare.py's
from provenance import git_revision, library_versions, machine  # noqa: E402

STEPS = 6  # C x 4^k, k = 0..5
FIT_LIMIT_S = 600.0  # a fit's process (warm-up and timed fit) is stopped after this
# name -> (SVC's C, gamma): small sets, run only when named (module docstring)
SMALL_SETS = {"banana": (32.0, 1.0), "checkerboard-5k": (10.0, 2.0), "onehot-10k": (1024.0, 0.0625)}


def parameters(name: str) -> tuple[float, float]:
    """SVC's C and gamma for a data set."""
    return SMALL_SETS[name] if name in SMALL_SETS else compare.SETS[name][:2]


def load(name: str):
    """``[X_train, y_train, X_test, y_test]`` of a set of ``compare.py`` or of :data:`SMALL_SETS`."""
    if name == "checkerboard-5k":
        parts = compare.load("checkerboard", quick=True)  # its test set; the training rows are drawn here
        X, y = make_checkerboard(5_000, random_state=compare.SEED)
        return [X, y.astype(np.float64), parts[2], parts[3]]
    if name == "banana":
        with lzma.open(compare.datasets_dir() / "banana.dat.xz", "rt") as handle:
            rows = [line for line in handle if line.strip() and not line.startswith("@")]
        values = np.array([[float(value) for value in line.split(",")] for line in rows])
        X_train, X_test, y_train, y_test = train_test_split(values[:, :2], values[:, 2], test_size=0.3,
                                                            random_state=compare.SEED, stratify=values[:, 2])
        scaler = StandardScaler().fit(X_train)
        return [scaler.transform(X_train), y_train, scaler.transform(X_test), y_test]
    if name == "onehot-10k":
        import many_support_vectors

        X, y, _, _ = many_support_vectors.load("onehot")
        order = np.random.RandomState(compare.SEED + 3).permutation(X.shape[0])  # compare.select_core_C's split
        held, rest = order[: compare.HELD_OUT_ROWS], order[compare.HELD_OUT_ROWS :][: compare.SELECT_ROWS]
        return [X[rest], y[rest], X[held], y[held]]
    return compare.load(name, False)


def run_fit(folder: str, name: str, method: str, C: float, queue) -> None:
    """In a fresh process: load the saved data, warm up, time one fit at ``C``, score it."""
    try:
        X, y, X_test, y_test = compare.restore(Path(folder))
        make = partial(compare.make_model, method, C, parameters(name)[1])
        compare.warm_up(make, X, y)
        model = make()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            start = time.perf_counter()
            model.fit(X, y)
            seconds = time.perf_counter() - start
        status = ""
        if method == "coresvm":
            info = model.solver_info_ if isinstance(model.solver_info_, list) else [model.solver_info_]
            status = "/".join(sorted({record["status"] for record in info}))
        queue.put({"fit_s": seconds, "accuracy": float(np.mean(model.predict(X_test) == y_test)),
                   "n_sv": compare.n_support_vectors(model), "peak_rss_mb": compare.peak_rss_mb(), "note": status})
    except ImportError as error:
        queue.put({"note": f"not installed ({error.name})"})
    except Exception as error:  # noqa: BLE001 - a failed fit is a row, not a failed benchmark
        traceback.print_exc()
        queue.put({"note": f"failed: {error!r}"[:120]})


def fit_in_process(folder: Path, name: str, method: str, C: float) -> dict:
    return compare.call_in_fresh_process(run_fit, (str(folder), name, method, C), FIT_LIMIT_S)


def peer_method() -> str:
    try:
        import sklearnex  # noqa: F401
    except ImportError:
        return "sklearn"
    return "sklearnex"


def table(name: str, rows: list[tuple[str, float, dict]]) -> list[str]:
    svc_C, gamma = parameters(name)
    lines = [f"### {name} (SVC C={svc_C:g}, gamma={gamma:g})", "",
             "| method | C | C / SVC's C | fit s | x the fit at SVC's C | test acc % | #SV | peak RSS MB | note |",
             "|---|---|---|---|---|---|---|---|---|"]
    first = {}
    for method, C, result in rows:
        note = result.get("note", "")
        if "fit_s" not in result:  # stopped, died or failed: the note says which
            lines.append(f"| {method} | {C:g} | {C / svc_C:g} | - | - | - | - | - | {note} |")
            continue
        seconds = result["fit_s"]
        first.setdefault(method, seconds)
        lines.append(f"| {method} | {C:g} | {C / svc_C:g} | {seconds:.2f} | {seconds / first[method]:.2f} | "
                     f"{100 * result['accuracy']:.2f} | {result['n_sv']} | {result['peak_rss_mb']:.0f} | {note} |")
    return lines + [""]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default=",".join(compare.SETS), help="comma-separated data sets")
    parser.add_argument("--peer", action="store_true", help="also fit sklearnex SVC at the smallest and largest C")
    parser.add_argument("--out", default=str(compare.RESULTS / "c_range.md"))
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.sets.split(",") if name.strip()]
    known = [*compare.SETS, *SMALL_SETS]
    unknown = sorted(set(names) - set(known))
    if unknown:
        parser.error(f"unknown data sets: {', '.join(unknown)} (known: {', '.join(known)})")
    lines = ["# CoreSVC's fit time over the C range (SVC's C x 1 .. x 1024)", "",
             f"- command: `python benchmarks/c_range.py {shlex.join(argv)}`".rstrip(),
             f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
             f"- revision: {git_revision()}",
             f"- machine: {machine()}",
             f"- libraries: {library_versions()}", "",
             "Each fit ran in a fresh process after a warm-up fit of the same kind; fit s is the wall time of "
             "`fit` alone.  CoreSVC: defaults, the data set's gamma and the C given.  'x the fit at SVC's C' "
             "divides by the same method's fit at the smallest C.", ""]
    for name in names:
        svc_C = parameters(name)[0]
        with tempfile.TemporaryDirectory() as folder:
            compare.save(load(name), Path(folder))
            rows = []
            for k in range(STEPS):
                C = svc_C * 4.0**k
                rows.append(("CoreSVC", C, fit_in_process(Path(folder), name, "coresvm", C)))
                print(name, *rows[-1][:2], rows[-1][2], flush=True)
            if args.peer and name != "checkerboard":  # SVC on the 1M checkerboard: hours
                peer = peer_method()
                for C in (svc_C, svc_C * 4.0 ** (STEPS - 1)):
                    rows.append((f"{peer} SVC", C, fit_in_process(Path(folder), name, peer, C)))
                    print(name, *rows[-1][:2], rows[-1][2], flush=True)
        lines += table(name, rows)
    Path(args.out).write_text("\n".join(lines))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
