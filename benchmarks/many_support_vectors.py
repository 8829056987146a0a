"""Many support vectors: noisy, overlapping classes, where a large share of the rows lie near the margin.

150,000 points, standardized, 120,000 training rows and 30,000 test rows (a random split; ``text``: 75,000
documents, 60,000 and 15,000), from one of:

- ``--data moons`` (the default): scikit-learn's ``make_moons`` with noise 0.25, two features.  The Bayes rate is
  near 94.4% and about a third of the rows are support vectors.  SVC's gamma is 0.5 and C = 1 or 4 (a 3-fold
  cross-validated grid of sklearnex SVC on 20,000 training rows, C = 2^-2 .. 2^6, gamma = 2^-3 .. 2^3: the best
  scores were within 0.05 pp of each other, C = 4 the best, C = 1 the third).
- ``--data classification``: ``make_classification`` with six informative features, 15% of the labels flipped
  and ``class_sep=0.8``: most rows are support vectors.  SVC's defaults: C = 1 and gamma = 'scale' (1/6 for
  standardized features).
- ``--data imbalanced``: ``make_classification`` with ten features (eight informative), 3% positives and 2% of
  the labels flipped: L1-SVC keeps a few thousand support vectors, the L2-SVM about 40% of the rows.  SVC's
  defaults: C = 1, gamma 1/10.
- ``--data text``: 75,000 synthetic documents of 40 words from a 5,000-word vocabulary (a shared Dirichlet
  word distribution mixed 4:1 with one of two class topics; 40% positives, 3% of the labels flipped), tf-idf rows
  in CSR (38 nonzeros a row): half the rows are support vectors of the L2-SVM.  C = 1, gamma 1 (unit rows).
  ``--words 150``: documents of 150 words (125 nonzeros a row, common words in most rows).
- ``--data onehot``: 60,000 rows laid out as forest cover types (Tsang et al. 2005's data): ten continuous
  features and one-hot blocks of 4 and 40 categories, min-max scaled (12 of 54 features nonzero); the label a
  nonlinear function of three continuous features and both categories, with noise.  SVC's C = 1,024 and gamma =
  1/16: 3-fold grids of sklearnex SVC on 10,000 training rows (C = 1 .. 16,384, gamma = 1/64 .. 4) found the best
  scores on a ridge from there (76.2%) to C = 16,384, gamma = 1/64 (76.5%).

Per C, each in a fresh process after a warm-up fit (compiled code loaded), as in ``compare.py``: ``CoreSVC`` with
its defaults at SVC's C (no selection: the point is this C), sklearnex ``SVC``, scikit-learn ``SVC`` on all rows
(``--no-sklearn`` skips it) and on 10% and 25% subsamples.  Per row: fit seconds (median of up to ``--repeats``
fits while they take under a minute together), test accuracy, #SV, peak RSS.

Writes ``benchmarks/results/many_support_vectors.md`` (or ``--out``) with the command, date, revision, machine and
library versions.

    python benchmarks/many_support_vectors.py            # about 10 minutes on 2 cores
    python benchmarks/many_support_vectors.py --C 1 --no-sklearn
    python benchmarks/many_support_vectors.py --data classification --C 1 --no-sklearn
    python benchmarks/many_support_vectors.py --data imbalanced --no-sklearn
    python benchmarks/many_support_vectors.py --data text --no-sklearn
    python benchmarks/many_support_vectors.py --data text --words 150 --no-sklearn
    python benchmarks/many_support_vectors.py --data onehot --no-sklearn
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
import time
import traceback
from dataclasses import asdict
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare  # noqa: E402 - the comparison's process, timing and report helpers
from provenance import git_revision, library_versions, machine  # noqa: E402

N_POINTS, TEST_SHARE = 150_000, 0.2
FRACTIONS = (0.1, 0.25)
# per --data: its title, gamma and default C values
DATA = {"moons": ("make_moons (noise 0.25)", 0.5, "1,4"),
        "classification": ("make_classification (6 features, 15% of labels flipped)", 1.0 / 6.0, "1"),
        "imbalanced": ("make_classification (10 features, 3% positives, 2% of labels flipped)", 0.1, "1"),
        "text": ("synthetic tf-idf documents (5,000 words, CSR)", 1.0, "1"),
        "onehot": ("cover-type-like rows (10 continuous features, one-hot blocks of 4 and 40)", 0.0625, "1024")}
ONEHOT_POINTS = 60_000
TEXT_DOCUMENTS, TEXT_WORDS, TEXT_VOCABULARY = 75_000, 40, 5_000


def synthetic_documents(seed: int, n_words: int = TEXT_WORDS):
    """``(X, y)``: :data:`TEXT_DOCUMENTS` bags of ``n_words`` words, each drawn from a shared Dirichlet word
    distribution mixed 4:1 with its class's topic (40% positives, 3% of the labels then flipped), as L2-normalized
    tf-idf rows in CSR."""
    from scipy import sparse
    from sklearn.feature_extraction.text import TfidfTransformer

    rng = np.random.RandomState(seed)
    shared = rng.dirichlet(np.full(TEXT_VOCABULARY, 0.05))
    topics = [0.8 * shared + 0.2 * rng.dirichlet(np.full(TEXT_VOCABULARY, 0.05)) for _ in range(2)]
    y = (rng.rand(TEXT_DOCUMENTS) < 0.4).astype(int)
    words = np.empty((TEXT_DOCUMENTS, n_words), dtype=np.int64)
    for label in (0, 1):
        members = np.flatnonzero(y == label)
        words[members] = rng.choice(TEXT_VOCABULARY, size=(len(members), n_words), p=topics[label])
    rows = np.repeat(np.arange(TEXT_DOCUMENTS), n_words)
    counts = sparse.csr_matrix((np.ones(rows.size), (rows, words.ravel())), shape=(TEXT_DOCUMENTS, TEXT_VOCABULARY))
    y = np.where(rng.rand(TEXT_DOCUMENTS) < 0.03, 1 - y, y)
    return TfidfTransformer().fit_transform(counts).tocsr(), y


def cover_type_like(n_points: int, seed: int):
    """``(X, y)``: ten standard normal features and two categories (4 and 40 values, one-hot), min-max scaled to
    [0, 1] (the one-hot columns keep their zeros); ``y`` is 1 where ``sin(2 x_0) + x_1 x_2``, a category term and
    Gaussian noise (sd 0.3) exceed 0.3."""
    rng = np.random.RandomState(seed)
    continuous = rng.randn(n_points, 10)
    area, soil = rng.randint(0, 4, n_points), rng.randint(0, 40, n_points)
    score = np.sin(2 * continuous[:, 0]) + continuous[:, 1] * continuous[:, 2] + 0.5 * (soil % 3) - 0.7 * (area == 1)
    y = (score + 0.3 * rng.randn(n_points) > 0.3).astype(int)
    low, high = continuous.min(axis=0), continuous.max(axis=0)
    return np.hstack([(continuous - low) / (high - low), np.eye(4)[area], np.eye(40)[soil]]), y


def load(data: str, n_words: int = TEXT_WORDS) -> list[np.ndarray]:
    """``[X_train, y_train, X_test, y_test]``: the rows of ``data`` (:data:`DATA`; ``text``: documents of
    ``n_words`` words), standardized, a random 80/20 split."""
    from sklearn.datasets import make_classification, make_moons
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    if data in ("text", "onehot"):  # already scaled (unit rows; min-max)
        X, y = synthetic_documents(compare.SEED, n_words) if data == "text" else cover_type_like(ONEHOT_POINTS,
                                                                                                 compare.SEED)
        X_train, X_test, y_train, y_test = train_test_split(X, y.astype(np.float64), test_size=TEST_SHARE,
                                                            random_state=compare.SEED)
        return [X_train, y_train, X_test, y_test]
    if data == "moons":
        X, y = make_moons(N_POINTS, noise=0.25, random_state=compare.SEED)
    elif data == "classification":
        X, y = make_classification(N_POINTS, n_features=6, n_informative=6, n_redundant=0, flip_y=0.15,
                                   class_sep=0.8, random_state=compare.SEED)
    else:
        X, y = make_classification(N_POINTS, n_features=10, n_informative=8, weights=[0.97, 0.03], flip_y=0.02,
                                   class_sep=1.0, random_state=compare.SEED)
    X = StandardScaler().fit_transform(X)
    X_train, X_test, y_train, y_test = train_test_split(X, y.astype(np.float64), test_size=TEST_SHARE,
                                                        random_state=compare.SEED)
    return [X_train, y_train, X_test, y_test]


def run_method(folder: str, method: str, C: float, gamma: float, fraction: float, repeats: int, queue) -> None:
    """In a fresh process: load the saved rows, warm up, time the fits, score the last model."""
    try:
        X, y, X_test, y_test = compare.restore(Path(folder))
        make = partial(compare.make_model, method, C, gamma)
        if fraction < 1.0:
            X, y = compare.subsample(X, y, fraction, compare.SEED + 11)
        row = compare.Row(method=method, fraction=fraction)
        compare.warm_up(make, X, y)
        model, row.fits_s, _ = compare.timed_fits(make, X, y, repeats)
        row.fit_s = float(np.median(row.fits_s))
        row.accuracy = float(np.mean(model.predict(X_test) == y_test))
        row.n_sv = compare.n_support_vectors(model)
        row.peak_rss_mb = compare.peak_rss_mb()
        if method == "coresvm":
            info = model.solver_info_[0]
            row.note = f"status {info['status']}; rows computed: {info.get('rows_computed', False)}"
        queue.put(asdict(row))
    except ImportError as error:
        queue.put(asdict(compare.Row(method=method, fraction=fraction, note=f"not installed ({error.name})")))
    except Exception as error:  # noqa: BLE001 - a failed method is a row, not a failed benchmark
        traceback.print_exc()
        queue.put(asdict(compare.Row(method=method, fraction=fraction, note=f"failed: {error!r}"[:120])))


def table(C: float, gamma: float, rows: list[compare.Row], n_train: int, n_test: int) -> list[str]:
    reference = compare.fastest_svc(rows)
    lines = [f"### C={C:g}, gamma={gamma:.4g} ({n_train:,} training rows, {n_test:,} test rows)", "",
             "| method | fit s (median) | fits: range | than the fastest full SVC | test acc % | #SV | peak RSS MB | "
             "note |", "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        ratio = compare.speed_ratio(reference.fit_s, row.fit_s) if reference else ""
        name = "**CoreSVC (defaults)**" if row.method == "coresvm" else compare.label(row)
        lines.append(f"| {name} | {row.fit_s:.2f} | {compare.fit_range(row)} | {ratio} | {100 * row.accuracy:.2f} | "
                     f"{row.n_sv} | {row.peak_rss_mb:.0f} | {row.note} |")
    return [*lines, ""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", choices=sorted(DATA), default="moons", help="the rows (see above)")
    parser.add_argument("--words", type=int, default=TEXT_WORDS, help="words per document of --data text")
    parser.add_argument("--C", help="comma-separated values of SVC's C (default: the data's, see above)")
    parser.add_argument("--no-sklearn", action="store_true", help="skip scikit-learn SVC on all rows (the slowest)")
    parser.add_argument("--repeats", type=int, default=3, help="timed fits per row (median)")
    parser.add_argument("--out", type=Path, help="the report (default: results/many_support_vectors[_DATA].md)")
    opts = parser.parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv
    title, gamma, default_C = DATA[opts.data]
    suffix = "" if opts.data == "moons" else f"_{opts.data}"
    if opts.data == "text" and opts.words != TEXT_WORDS:
        suffix, title = f"{suffix}{opts.words}", title.replace("documents", f"documents of {opts.words} words")
    out = opts.out or compare.RESULTS / f"many_support_vectors{suffix}.md"
    parts = load(opts.data, opts.words)
    plan = [("coresvm", 1.0), ("sklearnex", 1.0)] + ([] if opts.no_sklearn else [("sklearn", 1.0)])
    plan += [("sklearn", fraction) for fraction in FRACTIONS]
    lines = [f"# Many support vectors: {title} against SVC, sklearnex SVC and SVC on subsamples", "",
             f"- command: `{shlex.join(['python', 'benchmarks/many_support_vectors.py', *argv])}`",
             f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
             f"- revision: {git_revision()}",
             f"- machine: {machine()}",
             f"- libraries: {library_versions()}", "",
             "Each method ran in a fresh process after a warm-up fit of the same kind; fit s is the median wall time "
             "of `fit` alone.  CoreSVC ran at SVC's C with its defaults.", ""]
    with tempfile.TemporaryDirectory() as folder:
        compare.save(parts, Path(folder))
        for C in (float(value) for value in (opts.C or default_C).split(",")):
            rows = []
            for method, fraction in plan:
                result = compare.call_in_fresh_process(run_method, (folder, method, C, gamma, fraction, opts.repeats),
                                                       compare.METHOD_LIMIT_S)
                rows.append(compare.Row(**{"method": method, "fraction": fraction, **result}))
                print(f"C={C:g} {method} {fraction:g}: {rows[-1].fit_s:.2f} s, {100 * rows[-1].accuracy:.2f}%, "
                      f"{rows[-1].n_sv} SV, {rows[-1].peak_rss_mb:.0f} MB {rows[-1].note}", flush=True)
            lines += table(C, gamma, rows, len(parts[1]), len(parts[3]))
    out.write_text("\n".join(lines))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
