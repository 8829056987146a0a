"""Joint (all-at-once) vs one-vs-one multiclass CoreSVC on USPS, letter and pendigits.

For every dataset and each of ``multiclass='ovo'`` and ``'joint'``:

* model selection: fit on 80% of the training set for every C of ``--c-grid`` and keep
  the best accuracy on the other 20% (the "select time" column is the total time
  of these fits -- the part of model selection that the thesis' nested-CV time
  measures, Strack 2013 sec. 7.4).  ovo uses the dataset's reference gamma (tuned for
  pairwise SVC); joint also tries that gamma times each of ``--joint-gamma-factors``,
  because its best kernel width differs (letter: narrower);
* final fit on the whole training set with the selected parameters: training time,
  test accuracy, #SV, iterations;
* the joint model again at ovo's (C, gamma), so that a time ratio is not a parameter
  effect.

scikit-learn's ``SVC`` (LIBSVM, one-vs-one) with the reference C and gamma is the
last row of each table.

Data: ``zip.train.gz``/``zip.test.gz`` (USPS), ``letter.scale[.t].xz`` and
``pendigits[.t].xz`` from ``../shared/datasets`` (or ``$CORESVM_DATASETS``);
pendigits' features (0..100) are divided by 100.

Run from the repository root::

    python benchmarks/joint_benchmark.py                       # all three, writes benchmarks/results/joint.md
    python benchmarks/joint_benchmark.py --datasets usps --c-grid 10,100 --out -   # quick look
    python benchmarks/joint_benchmark.py --blobs    # training accuracy vs C on 3 blobs (joint_blobs.md)
"""

from __future__ import annotations

import argparse
import gzip
import lzma
import os
import platform
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import sklearn
from sklearn.datasets import load_svmlight_file
from sklearn.model_selection import train_test_split
from sklearn.svm import SVC

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "src"))

from multiclass_benchmark import timed_fit  # noqa: E402  (wall, CPU) seconds of one fit

from coresvm.svc import CoreSVC  # noqa: E402

DATASETS_DIR = Path(os.environ.get("CORESVM_DATASETS", REPO_ROOT.parent / "shared" / "datasets"))
# gamma for every method; svc_C for scikit-learn's SVC (issue 4's reference figures for USPS and letter)
PARAMS = {
    "usps": {"gamma": 2.0**-7, "svc_C": 4.0},
    "letter": {"gamma": 2.0, "svc_C": 16.0},
    "pendigits": {"gamma": 2.0, "svc_C": 16.0},
}


@dataclass
class Data:
    name: str
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray


def load(name: str) -> Data:
    if name == "usps":
        train = np.loadtxt(gzip.open(DATASETS_DIR / "zip.train.gz", "rt"))
        test = np.loadtxt(gzip.open(DATASETS_DIR / "zip.test.gz", "rt"))
        return Data(name, train[:, 1:], train[:, 0].astype(int), test[:, 1:], test[:, 0].astype(int))
    files, n_features, scale = {"letter": ("letter.scale", 16, 1.0), "pendigits": ("pendigits", 16, 0.01)}[name]
    parts = []
    for suffix in ("", ".t"):
        with lzma.open(DATASETS_DIR / f"{files}{suffix}.xz", "rb") as handle:
            X, y = load_svmlight_file(handle, n_features=n_features)
        parts += [X.toarray() * scale, y.astype(int)]
    return Data(name, *parts)


def core_svc(mode: str, C: float, gamma: float, opts) -> CoreSVC:
    return CoreSVC(C=C, gamma=gamma, multiclass=mode, tol=opts.tol, max_time=opts.max_time,
                   cache_size=opts.cache_size, random_state=opts.seed)


def select(data: Data, mode: str, gammas: list[float], opts) -> tuple[float, float, float, list[str]]:
    """The (C, gamma) of the best validation accuracy, the total time of the selection fits, notes."""
    X_fit, X_val, y_fit, y_val = train_test_split(data.X_train, data.y_train, test_size=0.2,
                                                  random_state=opts.seed, stratify=data.y_train)
    total, best, notes = 0.0, (-1.0, None, None), []
    for gamma in gammas:
        for C in opts.c_grid:
            model = core_svc(mode, C, gamma, opts)
            total += timed_fit(model, X_fit, y_fit)[0]
            score = model.score(X_val, y_val)
            notes.append(f"(C={C:g}, gamma={gamma:g}): {100 * score:.2f}" + (" cut" if model.fit_status_ else ""))
            if score > best[0]:
                best = (score, C, gamma)
    return best[1], best[2], total, notes


def row(method: str, C: float, gamma: float, select_time, model, fit_time: float, data: Data) -> dict:
    accuracy = 100.0 * model.score(data.X_test, data.y_test)
    iterations = int(np.sum(model.n_iter_)) if hasattr(model, "n_iter_") else 0
    status = getattr(model, "fit_status_", 0)
    return {"method": method, "C": C, "gamma": gamma, "select": select_time, "time": fit_time, "acc": accuracy,
            "sv": len(model.support_), "iter": iterations, "cut": status != 0}


def run(data: Data, opts) -> tuple[list[dict], list[str]]:
    gamma = PARAMS[data.name]["gamma"]
    rows, notes, chosen = [], [], {}
    for mode in ("ovo", "joint"):
        gammas = [gamma] if mode == "ovo" else [gamma * factor for factor in opts.joint_gamma_factors]
        C, mode_gamma, select_time, grid_notes = select(data, mode, gammas, opts)
        chosen[mode] = (C, mode_gamma)
        notes.append(f"{mode} validation accuracy (%): " + ", ".join(grid_notes))
        model = core_svc(mode, C, mode_gamma, opts)
        fit_time = timed_fit(model, data.X_train, data.y_train)[0]
        rows.append(row(f"CoreSVC {mode}", C, mode_gamma, select_time, model, fit_time, data))
        print(rows[-1], flush=True)
    if chosen["ovo"] != chosen["joint"]:
        model = core_svc("joint", *chosen["ovo"], opts)
        fit_time = timed_fit(model, data.X_train, data.y_train)[0]
        rows.append(row("CoreSVC joint (ovo's C, gamma)", *chosen["ovo"], None, model, fit_time, data))
        print(rows[-1], flush=True)
    if not opts.no_svc:
        svc = SVC(C=PARAMS[data.name]["svc_C"], gamma=gamma)
        fit_time = timed_fit(svc, data.X_train, data.y_train)[0]
        rows.append(row("sklearn SVC (ovo)", PARAMS[data.name]["svc_C"], gamma, None, svc, fit_time, data))
        print(rows[-1], flush=True)
    return rows, notes


def markdown(data: Data, rows: list[dict], notes: list[str]) -> list[str]:
    ovo = rows[0]
    lines = [
        f"## {data.name}",
        "",
        f"{data.X_train.shape[0]} training / {data.X_test.shape[0]} test rows, {data.X_train.shape[1]} features, "
        f"{len(np.unique(data.y_train))} classes, reference RBF gamma = {PARAMS[data.name]['gamma']:g}.",
        "",
        "| method | C | gamma | select time (s) | train time (s) | test acc (%) | #SV | iterations "
        "| train speed-up vs CoreSVC ovo | Δacc vs CoreSVC ovo (pp) |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in rows:
        select = "-" if r["select"] is None else f"{r['select']:.2f}"
        cut = " (cut)" if r["cut"] else ""
        lines.append(
            f"| {r['method']} | {r['C']:g} | {r['gamma']:g} | {select} | {r['time']:.2f}{cut} | {r['acc']:.2f} | "
            f"{r['sv']} | {r['iter']} | {ovo['time'] / r['time']:.2f} | {r['acc'] - ovo['acc']:+.2f} |"
        )
    lines += ["", *[f"- {note}" for note in notes], ""]
    return lines


def blobs_table(opts) -> str:
    """Training accuracy of joint and ovo against C on 150 points of 3 overlapping blobs.

    Solved tightly (tol 1e-6), so the joint column is the exact optimum's (tests/test_joint.py
    checks the solver against an exact QP): it shows that a larger C does not make the joint
    machine fit the training set, unlike one-vs-one.
    """
    from sklearn.datasets import make_blobs

    X, y = make_blobs(n_samples=150, centers=3, random_state=0)
    lines = ["# Joint vs ovo: training accuracy against C (3 blobs, 150 points, gamma='scale', tol=1e-6)", "",
             "- Command: `python benchmarks/joint_benchmark.py --blobs`", "",
             "| C | joint train acc (%) | joint #SV | ovo train acc (%) | ovo #SV |", "|--:|--:|--:|--:|--:|"]
    for C in (1.0, 10.0, 100.0, 1000.0):
        joint = CoreSVC(C=C, multiclass="joint", tol=1e-6, random_state=opts.seed).fit(X, y)
        ovo = CoreSVC(C=C, multiclass="ovo", tol=1e-6, random_state=opts.seed).fit(X, y)
        lines.append(f"| {C:g} | {100 * joint.score(X, y):.1f} | {len(joint.support_)} | "
                     f"{100 * ovo.score(X, y):.1f} | {len(ovo.support_)} |")
    return "\n".join(lines) + "\n"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", default="usps,letter,pendigits")
    parser.add_argument("--c-grid", default="4,16,64,256,1024",
                        type=lambda text: [float(v) for v in text.split(",")])
    parser.add_argument("--joint-gamma-factors", default="0.5,1,2,4",
                        type=lambda text: [float(v) for v in text.split(",")])
    parser.add_argument("--cache-size", type=float, default=400.0, help="CoreSVC cache_size (MB)")
    parser.add_argument("--tol", type=float, default=1e-2)
    parser.add_argument("--max-time", type=float, default=300.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-svc", action="store_true")
    parser.add_argument("--blobs", action="store_true", help="only the 3-blob training-accuracy table")
    parser.add_argument("--out", default=str(REPO_ROOT / "benchmarks" / "results" / "joint.md"),
                        help="markdown output file ('-': print only)")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    opts = parse_args(argv)
    if opts.blobs:
        text = blobs_table(opts)
        print(text)
        if opts.out != "-":
            Path(opts.out).with_name("joint_blobs.md").write_text(text)
        return 0
    # compile the solvers once, outside the timings
    X_warm, y_warm = np.random.RandomState(0).randn(200, 4), np.arange(200) % 3
    for mode in ("ovo", "joint"):
        CoreSVC(multiclass=mode, random_state=0).fit(X_warm, y_warm)
    command = "python benchmarks/joint_benchmark.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    lines = [
        "# Joint (all-at-once) vs one-vs-one multiclass CoreSVC",
        "",
        f"- Command: `{command.strip()}`",
        f"- Machine: {platform.platform()}, os.cpu_count() = {os.cpu_count()} (shared with other jobs: "
        "timings are noisy, compare ratios within a table)",
        f"- Versions: Python {platform.python_version()}, numpy {np.__version__}, scikit-learn {sklearn.__version__}",
        f"- CoreSVC: solver='coreset', tol = {opts.tol:g}, max_time = {opts.max_time:g} s, cache_size = "
        f"{opts.cache_size:g} MB, random_state = {opts.seed}; C selected per mode from "
        f"{{{', '.join(f'{c:g}' for c in opts.c_grid)}}} on a 20% validation split of the training set; "
        "ovo at the reference gamma, joint also at gamma x "
        f"{{{', '.join(f'{f:g}' for f in opts.joint_gamma_factors)}}}",
        "",
    ]
    for name in opts.datasets.split(","):
        data = load(name)
        rows, notes = run(data, opts)
        lines += markdown(data, rows, notes)
    text = "\n".join(lines)
    print(text)
    if opts.out != "-":
        Path(opts.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
