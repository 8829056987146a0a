"""The ``coresvm`` command line: gsvm- and LIBSVM-compatible training, prediction, CV and model selection.

Subcommands: ``train``, ``predict``, ``cv``, ``select``, ``scale``, ``info`` and
``demo`` (the README's first command).  Exit codes: 0 on success, 2 on a usage or
input error (one line on stderr, never a traceback), 130 when interrupted.

Short options follow both gsvm (Strack 2013, Appendix A) and LIBSVM's ``svm-train``.
Where the two use a letter differently, the value decides when it can (``-t
sparse`` is gsvm's matrix type, ``-t 2`` LIBSVM's kernel type; likewise ``-b``,
``-s``, ``-m`` and ``-p``).  Only ``-d`` and ``-r`` are numbers in both: they
mean LIBSVM's degree and coef0, and gsvm's draw number and grid resolution with
``--gsvm``.  Every meaning also has an unambiguous long option.
"""

from __future__ import annotations

import argparse
import bz2
import gzip
import io
import json
import lzma
import math
import re
import sys
import threading
import time
import warnings
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np

COMPRESSION = {".gz": gzip.open, ".xz": lzma.open, ".bz2": bz2.open}
KERNEL_TYPES = {"0": "linear", "1": "poly", "2": "rbf", "3": "sigmoid", "linear": "linear", "poly": "poly",
                "polynomial": "poly", "rbf": "rbf", "sigmoid": "sigmoid"}
# gsvm's model-selection ranges (Appendix A): C in [2^-4, 2^10], gamma in [2^-10, 2^4], 8 values each.
GSVM_C_RANGE = (0.0625, 1024.0)
GSVM_GAMMA_RANGE = (0.0009765625, 16.0)
GSVM_RESOLUTION = 8
DEFAULT_FOLDS = 10
# A LIBSVM file is trained dense when at least this fraction of its entries is non-zero.
AUTO_DENSE_FRACTION = 0.5
# The fitted attribute that keeps the index base of the LIBSVM file a model was trained on (0 or 1;
# model_io writes a LIBSVM model's indices with it): predict reads the test file with the same base.
INDEX_BASE_ATTRIBUTE = "libsvm_index_base_"


class UsageError(Exception):
    """A bad command line or input file: reported as one line on stderr, exit code 2."""


class _Parser(argparse.ArgumentParser):
    """argparse, but errors raise :class:`UsageError` (one line) instead of printing usage and exiting."""

    def error(self, message: str):
        raise UsageError(message)


# =========================================================================== progress
class Progress:
    """A one-line progress bar on stderr, shown only on a terminal and without ``-q``.

    ``total=None`` shows elapsed time only (or a bar against ``budget`` seconds):
    the solvers do not report how far they are, but a time budget is a bound.
    """

    WIDTH = 28

    def __init__(self, label: str, total: int | None = None, enabled: bool = True, budget: float | None = None):
        self.label = label
        self.total = total
        self.budget = budget
        self.done = 0
        self.enabled = enabled and sys.stderr.isatty()
        self.start = time.perf_counter()
        self._last = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def step(self, n: int = 1) -> None:
        self.done += n
        self.render()

    def render(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if not force and now - self._last < 0.1:
            return
        self._last = now
        elapsed = now - self.start
        if self.total:
            fraction, tail = self.done / self.total, f"{self.done}/{self.total}"
        elif self.budget:
            fraction, tail = min(elapsed / self.budget, 1.0), f"budget {self.budget:g} s"
        else:
            fraction, tail = None, ""
        if fraction is None:
            bar = "".join("=" if (i - int(elapsed * 8)) % 8 == 0 else " " for i in range(self.WIDTH))
        else:
            filled = int(round(fraction * self.WIDTH))
            bar = "#" * filled + "." * (self.WIDTH - filled)
        with self._lock:
            sys.stderr.write(f"\r{self.label} [{bar}] {tail} {elapsed:7.1f} s ")
            sys.stderr.flush()

    def __enter__(self) -> Progress:
        if self.enabled and self.total is None:
            # training reports nothing while it runs, so a thread keeps the clock moving
            self._thread = threading.Thread(target=self._tick, daemon=True)
            self._thread.start()
        self.render(force=True)
        return self

    def _tick(self) -> None:
        while not self._stop.wait(0.25):
            self.render(force=True)

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.enabled:
            with self._lock:
                sys.stderr.write("\r" + " " * (len(self.label) + self.WIDTH + 40) + "\r")
                sys.stderr.flush()


# =========================================================================== data files
def _data_kind(path: str) -> tuple[str, Callable | None]:
    """('libsvm' | 'csv' | 'npy', decompressing opener or None) from the file name."""
    name = path.lower()
    opener = None
    for suffix, open_fn in COMPRESSION.items():
        if name.endswith(suffix):
            name, opener = name[: -len(suffix)], open_fn
            break
    if name.endswith(".csv"):
        return "csv", opener
    if name.endswith(".npy"):
        return "npy", opener
    return "libsvm", opener


def _read_bytes(path: str) -> bytes:
    if not Path(path).exists():
        raise UsageError(f"file not found: {path}")
    if Path(path).is_dir():
        raise UsageError(f"{path} is a directory, not a data file")
    _, opener = _data_kind(path)
    try:
        if opener is None:
            return Path(path).read_bytes()
        with opener(path, "rb") as handle:
            return handle.read()
    except (OSError, EOFError, lzma.LZMAError, zlib.error) as error:  # zlib.error: a damaged .gz stream
        raise UsageError(f"cannot read {path}: {error}") from None


def _first_failing_line(lines: list[bytes], parse: Callable[[list[bytes]], object]) -> int | None:
    """1-based number of the first line whose inclusion makes ``parse`` fail (bisection on prefixes).

    The readers report what is wrong but not where; parsing O(log n) prefixes with
    the same reader finds the line without a second parser.
    """
    def fails(k: int) -> bool:
        try:
            parse(lines[:k])
        except ValueError:
            return True
        return False

    if not lines or not fails(len(lines)):
        return None
    lo, hi = 1, len(lines)
    while lo < hi:
        mid = (lo + hi) // 2
        if fails(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _labels(values: np.ndarray) -> np.ndarray:
    """Integral numeric labels become int64 (LIBSVM writes labels as integers); others stay as they are."""
    if values.dtype.kind == "f" and values.size and np.all(np.isfinite(values)) and np.all(values == np.round(values)) \
            and np.all(np.abs(values) < 2**53):
        return values.astype(np.int64)
    return values


def read_data(path: str, matrix_type: str = "auto", labels: bool = True):
    """Read a data file: LIBSVM/svmlight text, CSV or ``.npy``, optionally ``.gz``/``.xz``/``.bz2``.

    :func:`read_data_indexed` without the index base (LIBSVM indices read as scikit-learn's
    ``load_svmlight_file`` reads them with ``zero_based='auto'``).

    Returns
    -------
    X : ndarray or CSR matrix of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,) or None
    """
    X, y, _ = read_data_indexed(path, matrix_type, labels)
    return X, y


def read_data_indexed(path: str, matrix_type: str = "auto", labels: bool = True, index_base="auto",
                      n_features: int | None = None):
    """Read a data file and say which feature index its first column is (LIBSVM files).

    Parameters
    ----------
    path : str
        LIBSVM/svmlight text (any name not ending in .csv/.npy), CSV (first
        column the label, an optional header line) or ``.npy`` (a 2-D array,
        first column the label).
    matrix_type : {'auto', 'sparse', 'dense'}, default='auto'
        'auto' keeps LIBSVM files sparse (CSR) unless at least half the entries
        are non-zero; CSV and ``.npy`` data are dense.
    labels : bool, default=True
        Whether the first column of a CSV/``.npy`` file holds labels.
    index_base : {'auto', 0, 1}, default='auto'
        LIBSVM/svmlight files only: the feature index of column 0.  'auto' is
        scikit-learn's ``zero_based='auto'``: 0 when the file has an index 0
        (``dump_svmlight_file`` writes zero-based indices by default), else 1
        (LIBSVM's own files).  0 reads every index as its column (as LIBSVM's
        ``svm-train`` reads indices: as given).  1 reads index ``i`` into column
        ``i - 1``; an index 0 then is a feature column 0 does not hold, and is
        read into a column of its own after the first ``n_features`` columns (a
        model trained on one-based data never saw it: zero in every support
        vector, as LIBSVM takes it).
    n_features : int or None, default=None
        With ``index_base=1``: the model's number of features (where index 0 goes).

    Returns
    -------
    X : ndarray or CSR matrix of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,) or None
    base : {0, 1} or None
        The index base used (None for CSV and ``.npy`` files).
    """
    import scipy.sparse as sp

    kind, _ = _data_kind(path)
    raw = _read_bytes(path)
    base = None
    if kind == "libsvm":
        X, y, base = _read_svmlight(raw, path, index_base, n_features)
    elif kind == "csv":
        X, y = _read_csv(raw, path, labels)
    else:
        X, y = _read_npy(raw, path, labels)
    if X.shape[0] == 0:
        raise UsageError(f"{path}: no data (the file has no samples)")
    if matrix_type == "dense" or (
        matrix_type == "auto" and sp.issparse(X) and X.nnz >= AUTO_DENSE_FRACTION * X.shape[0] * X.shape[1]
    ):
        X = X.toarray() if sp.issparse(X) else X
    elif matrix_type == "sparse" and not sp.issparse(X):
        X = sp.csr_matrix(X)
    return X, y, base


def _read_svmlight(raw: bytes, path: str, index_base="auto", n_features: int | None = None):
    """(X, y, base) of LIBSVM/svmlight text; see :func:`read_data_indexed` for ``index_base``."""
    import scipy.sparse as sp
    from sklearn.datasets import load_svmlight_file

    def parse(chunk: list[bytes]):
        return load_svmlight_file(io.BytesIO(b"".join(chunk)), zero_based=True, dtype=np.float64)

    try:
        # every index read as its column; the base is decided after (one parse)
        X, y = load_svmlight_file(io.BytesIO(raw), zero_based=True, dtype=np.float64)
    except ValueError as error:
        line = _first_failing_line(raw.splitlines(keepends=True), parse)
        where = f"line {line}" if line else "a line"
        raise UsageError(f"{path}: unreadable {where} (LIBSVM/svmlight format 'label index:value ...'): "
                         f"{_one_line(error)}") from None
    X = X.tocsr()
    has_zero = bool(np.any(X.indices == 0))  # an index 0 written, even with the value 0
    base = (0 if has_zero else 1) if index_base == "auto" else int(index_base)
    if base == 1:
        rest = X[:, 1:]
        if has_zero:  # index 0 into a column after the model's features (zero in every SV)
            width = max(rest.shape[1], n_features or 0)
            rest = sp.hstack([_widen(rest, width), X[:, :1]], format="csr")
        X = rest
    return X, _labels(y), base


def _read_csv(raw: bytes, path: str, labels: bool):
    try:
        lines = raw.decode("utf-8").splitlines()
    except UnicodeDecodeError as error:
        raise UsageError(f"{path}: not a text file ({error})") from None
    lines = [line for line in lines if line.strip()]
    if not lines:
        raise UsageError(f"{path}: no data (the file is empty)")
    first = lines[0].split(",")
    try:
        [float(v) for v in first[1 if labels else 0:]]
        header = 0
    except ValueError:
        header = 1  # a first line whose features are not numbers is a header
    body = lines[header:]
    n_columns = len(first)
    feature_columns = range(1, n_columns) if labels else range(n_columns)

    def parse(chunk):
        return np.loadtxt([line.encode() if isinstance(line, str) else line for line in chunk], delimiter=",",
                          usecols=feature_columns, ndmin=2, dtype=np.float64)

    try:
        X = np.loadtxt(body, delimiter=",", usecols=feature_columns, ndmin=2, dtype=np.float64)
        y = np.loadtxt(body, delimiter=",", usecols=0, dtype=str, ndmin=1) if labels else None
    except ValueError as error:
        line = _first_failing_line([line.encode() for line in body], parse)
        where = f"line {line + header}" if line else "a line"
        raise UsageError(f"{path}: unreadable {where}: {_one_line(error)}") from None
    if y is not None:
        try:
            y = _labels(y.astype(np.float64))
        except ValueError:
            y = np.char.strip(y)  # non-numeric class names stay strings
    return X, y


def _read_npy(raw: bytes, path: str, labels: bool):
    try:
        array = np.load(io.BytesIO(raw), allow_pickle=False)
    # numpy's header parser fails on damaged bytes with ValueError, EOFError (empty file), SyntaxError (NUL
    # bytes), tokenize.TokenError, MemoryError (a huge claimed shape), ...: each is the same bad file
    except Exception as error:
        raise UsageError(f"{path}: not a readable .npy array ({_one_line(error)})") from None
    if array.ndim != 2 or array.shape[1] < (2 if labels else 1):
        raise UsageError(f"{path}: a .npy data file must be 2-D with the label in the first column; "
                         f"got shape {array.shape}")
    if array.dtype.kind not in "biuf":
        raise UsageError(f"{path}: a .npy data file must be numeric; got dtype {array.dtype}")
    if labels:
        return np.ascontiguousarray(array[:, 1:], dtype=np.float64), _labels(array[:, 0].astype(np.float64))
    return np.ascontiguousarray(array, dtype=np.float64), None


def write_data(path: str, X, y, zero_based: bool = False) -> None:
    """Write data as LIBSVM text ('-' is stdout), CSV or ``.npy`` (by the file name).

    LIBSVM text is one-based (column ``j`` is index ``j + 1``) unless ``zero_based``.
    """
    import scipy.sparse as sp
    from sklearn.datasets import dump_svmlight_file

    if path == "-":
        dump_svmlight_file(X, y, sys.stdout.buffer, zero_based=zero_based)
        sys.stdout.buffer.flush()
        return
    kind, opener = _data_kind(path)
    open_fn = opener or open
    dense = X.toarray() if sp.issparse(X) else np.asarray(X)
    with open_fn(path, "wb") as handle:
        if kind == "libsvm":
            dump_svmlight_file(X, y, handle, zero_based=zero_based)
        elif kind == "csv":
            for label, row in zip(y, dense, strict=True):
                handle.write((",".join([_format_label(label)] + [repr(float(v)) for v in row]) + "\n").encode())
        else:
            np.save(handle, np.column_stack([np.asarray(y, dtype=np.float64), dense]), allow_pickle=False)


def _format_label(label) -> str:
    if isinstance(label, (float, np.floating)):
        return repr(float(label))
    return str(label.item() if isinstance(label, np.generic) else label)


def _one_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]


# =========================================================================== options
EPILOG_SHARED_LETTERS = """\
gsvm and LIBSVM letters
  Where gsvm and LIBSVM use one letter for two things, the value decides:
    -t sparse|dense            gsvm's matrix type      -t 0-3|linear|poly|rbf|sigmoid  LIBSVM's kernel type
    -b theoretic|nobias        gsvm's bias rule        -b 0                             LIBSVM: no probabilities
    -s simple|fair             gsvm's randomizer       -s 0                             LIBSVM: C-SVC
    -m grid|pattern            gsvm's model selection  -m MB                            LIBSVM's cache size
    -p mn                      gsvm's stop criterion   (LIBSVM's -p is epsilon-SVR: not supported)
  -d and -r are numbers in both: they are LIBSVM's degree and coef0, or with --gsvm gsvm's
  draw number and grid resolution.  The long options (--degree, --coef0, --draw-number,
  --resolution, ...) never depend on --gsvm.  LIBSVM's -wLABEL WEIGHT sets a class weight;
  its -h 0|1 (shrinking) is accepted and has no effect (these solvers do not shrink).
"""


def _add_svm_options(parser: argparse.ArgumentParser, ranges: bool) -> None:
    model = parser.add_argument_group("SVM model")
    c_help = "penalty C of the squared slacks (L2-SVM; not SVC's C, see the README's 'What C means here'); default 1"
    g_help = "RBF/poly/sigmoid gamma: a number or scale, auto, cvm (default scale)"
    if ranges:
        c_help += "; with a range, its lower end (default 0.0625 = 2^-4, as gsvm)"
        g_help += "; with a range, its lower end (default 2^-10, as gsvm)"
    model.add_argument("-c", "--C", "--c-low", dest="c_low", type=float, metavar="C", help=c_help)
    model.add_argument("-g", "--gamma", "--gamma-low", dest="gamma_low", metavar="GAMMA", help=g_help)
    if ranges:
        model.add_argument("-C", "--c-high", dest="c_high", type=float, metavar="C",
                           help="upper end of the C range (default 1024 = 2^10, as gsvm)")
        model.add_argument("-G", "--gamma-high", dest="gamma_high", type=float, metavar="GAMMA",
                           help="upper end of the gamma range (default 16 = 2^4, as gsvm)")
    model.add_argument("-t", dest="t_letter", metavar="TYPE",
                       help="kernel type 0-3 or linear|poly|rbf|sigmoid (LIBSVM), or matrix type sparse|dense (gsvm)")
    model.add_argument("--kernel", choices=["linear", "poly", "rbf", "sigmoid"], help="kernel (default rbf)")
    model.add_argument("-d", dest="d_letter", type=int, metavar="N",
                       help="polynomial degree (LIBSVM); with --gsvm the draw number (gsvm)")
    model.add_argument("--degree", type=int, help="degree of the poly kernel (default 3)")
    model.add_argument("-r", dest="r_letter", metavar="X",
                       help="coef0 (LIBSVM); with --gsvm the grid resolution (gsvm)")
    model.add_argument("--coef0", type=float, help="independent term of poly and sigmoid (default 0)")
    model.add_argument("-b", dest="b_letter", metavar="RULE",
                       help="bias rule theoretic|average|nobias (gsvm) or 0 (LIBSVM)")
    model.add_argument("--bias", choices=["theoretic", "nobias", "average"],
                       help="theoretic: b = sum_i alpha_i y_i (default); average: the KKT average over the SVs; "
                       "nobias: b = 0")
    model.add_argument("--class-weight", action="append", default=[], metavar="LABEL=W",
                       help="multiply C for one class (repeatable; LIBSVM: -wLABEL W), or 'balanced'")
    model.add_argument("-u", "--multiclass", choices=["pairwise", "allatonce", "onevsrest"],
                       help="multiclass: pairwise (one-vs-one, default), allatonce (gsvm's all-at-once machine, "
                            "multiclass='joint'; --solver coreset or cvm) or onevsrest")
    model.add_argument("-s", dest="s_letter", metavar="X",
                       help="violator randomizer simple|fair (gsvm) or SVM type 0 = C-SVC (LIBSVM)")

    solver = parser.add_argument_group("solver")
    solver.add_argument("--solver", choices=["coreset", "cvm", "bvm", "sphere", "mnsvm", "fw", "mfw", "swap", "partan"],
                        help="solver (default coreset; see the README's 'Which solver when')")
    solver.add_argument("--vertex-search", choices=["auto", "full", "random"],
                        help="FW family: scan all points or a random sample per step (CoreSVC's search=)")
    solver.add_argument("-e", "--epsilon", "--tol", dest="tol", metavar="TOL",
                        help="relative duality-gap tolerance, or 'default' (CoreSVC's 0.01)")
    solver.add_argument("-E", "--eta", type=float, help="over-relaxation factor in [1, 2) (default 1)")
    solver.add_argument("-z", "--optimization", "--second-vertex", dest="selection",
                        choices=["mdm", "imdm", "gmdm"],
                        help="pairwise-step rule (default: mdm for swap, the paper's SWAP; imdm otherwise)")
    solver.add_argument("-k", "--gmdm-k", type=float, help="exponent of the gmdm rule in [0, 1] (default 0.5)")
    solver.add_argument("--draw-number", type=int, metavar="N",
                        help="candidates per violator search: sample_size (FW random search) and n_candidates "
                        "(core-set solvers); default: the solver's own")
    solver.add_argument("--sample-size", type=int, help="FW random search: candidates per iteration (194)")
    solver.add_argument("--n-candidates", type=int, help="core-set solvers: points scored per round")
    solver.add_argument("--batch-size", type=int, help="core-set solvers: most points added per round")
    solver.add_argument("--n-init", type=int, help="size of the random starting subset (20)")
    solver.add_argument("--max-iter", type=int, help="iteration cap per binary problem")
    solver.add_argument("--max-time", type=float, metavar="S", help="time budget in seconds per fit")
    solver.add_argument("-S", "--cache-size", type=float, metavar="MB", help="kernel cache / core-set memory (200)")
    solver.add_argument("-m", dest="m_letter", metavar="X",
                        help="model selection grid|pattern (gsvm) or cache size in MB (LIBSVM)")
    solver.add_argument("-p", "--stop-criterion", dest="p_letter", metavar="RULE",
                        help="stopping rule of bvm/sphere/mnsvm: mn|adjmn|meb (default: meb for bvm and sphere, "
                        "adjmn for mnsvm); meb also for fw/mfw/swap/partan (Frandi et al. 2013's (1+eps)-ball "
                        "test); -e sets its eps")
    solver.add_argument("--seed", type=int, default=0, help="random seed (default 0: runs are reproducible)")
    solver.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                        help="set any CoreSVC parameter (repeatable), e.g. --param n_init=40")
    solver.add_argument("--verbose", action="store_true", help="print the solver's progress lines")
    solver.add_argument("--gsvm", action="store_true", help="-d and -r take gsvm's meanings (draw number, resolution)")

    data = parser.add_argument_group("data")
    data.add_argument("--matrix-type", choices=["auto", "sparse", "dense"],
                      help="keep the data sparse (CSR) or dense; auto: LIBSVM files dense if half full (default)")
    data.add_argument("-I", "--input", metavar="FILE", help="the data file (gsvm's spelling; or give it as DATA)")
    data.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors (and no progress bar)")


def _add_cv_options(parser: argparse.ArgumentParser, select: bool) -> None:
    cv = parser.add_argument_group("cross-validation and model selection")
    cv.add_argument("-i", "--inner-folds", "--folds", dest="inner_folds", type=int, metavar="K",
                    help=f"folds of the (inner) k-fold CV (default {DEFAULT_FOLDS})")
    cv.add_argument("-v", dest="v_folds", type=int, metavar="K", help="k-fold CV (LIBSVM's spelling of -i)")
    if not select:
        cv.add_argument("-o", "--outer-folds", type=int, default=1, metavar="K",
                        help="outer folds of nested CV (default 1: none); needs a C or gamma range")
    cv.add_argument("--resolution", type=int, metavar="N",
                    help=f"values per axis of the grid, spaced geometrically (default {GSVM_RESOLUTION})")
    cv.add_argument("--log2c", metavar="BEGIN,END,STEP", help="grid.py style C grid: 2^BEGIN ... 2^END")
    cv.add_argument("--log2g", metavar="BEGIN,END,STEP", help="grid.py style gamma grid")
    cv.add_argument("--search", "--model-selection", dest="search", choices=["grid", "pattern"],
                    help="grid search (default) or gsvm's pattern search (PatternSearchCV)")
    cv.add_argument("-j", "--jobs", type=int, default=1, help="parallel fits (default 1; no progress bar if > 1)")


def _parse_number(text: str, what: str, kind=float):
    try:
        value = kind(text)
    except (TypeError, ValueError):
        raise UsageError(f"{what}: expected {'an integer' if kind is int else 'a number'}, got {text!r}") from None
    if kind is float and not math.isfinite(value):
        raise UsageError(f"{what}: expected a finite number, got {text!r}")
    return value


def _parse_param_value(text: str):
    """A --param value: JSON when it parses (numbers, true/false/null, lists, dicts), else the string."""
    try:
        return json.loads(text)
    except ValueError:
        return {"None": None, "True": True, "False": False}.get(text, text)


class Settings:
    """The resolved meaning of the command line: estimator parameters, data and CV settings."""

    def __init__(self) -> None:
        self.params: dict = {}
        self.matrix_type = "auto"
        self.resolution: int | None = None
        self.search: str | None = None
        self.class_weight: list[str] = []


def _resolve(args: argparse.Namespace, command: str) -> Settings:
    """Turn parsed options into CoreSVC parameters, applying the gsvm/LIBSVM letter rules."""
    from . import CoreSVC

    s = Settings()
    p = s.params
    gsvm = getattr(args, "gsvm", False)
    if args.t_letter is not None:
        value = args.t_letter.lower()
        if value in ("sparse", "dense"):
            s.matrix_type = value
        elif value in KERNEL_TYPES:
            p["kernel"] = KERNEL_TYPES[value]
        elif value in ("4", "precomputed"):
            raise UsageError("-t 4: precomputed kernels are not supported")
        else:
            raise UsageError(f"-t takes a kernel type (0-3 or linear|poly|rbf|sigmoid) or a matrix type "
                             f"(sparse|dense); got {args.t_letter!r}")
    if args.matrix_type:
        s.matrix_type = args.matrix_type
    if args.kernel:
        p["kernel"] = args.kernel
    if args.d_letter is not None:
        if gsvm:  # gsvm's -d: the draws of the violator search, and the other solvers' candidate counts
            p["sample_size"] = p["n_candidates"] = p["draws"] = args.d_letter
        else:
            p["degree"] = args.d_letter
    if args.degree is not None:
        p["degree"] = args.degree
    if args.draw_number is not None:
        p["sample_size"] = p["n_candidates"] = p["draws"] = args.draw_number
    if args.r_letter is not None:
        if gsvm:
            s.resolution = _parse_number(args.r_letter, "-r (resolution, --gsvm)", int)
        else:
            p["coef0"] = _parse_number(args.r_letter, "-r (coef0)")
    if args.coef0 is not None:
        p["coef0"] = args.coef0
    for rule in filter(None, [args.b_letter, args.bias]):
        if rule == "theoretic":
            p["bias"] = True
        elif rule == "nobias":
            p["bias"] = False
        elif rule == "average":
            p["bias"] = "kkt"
        elif rule == "0":
            pass  # LIBSVM: no probability estimates, which is all there is
        elif rule == "1":
            p["probability"] = True  # LIBSVM's -b 1: Platt scaling
        else:
            raise UsageError(f"-b takes theoretic|nobias (gsvm) or 0 (LIBSVM); got {rule!r}")
    if args.multiclass is not None:
        p["multiclass"] = {"pairwise": "ovo", "allatonce": "joint", "onevsrest": "ovr"}[args.multiclass]
    known = CoreSVC().get_params(deep=False)
    if args.s_letter is not None:
        if args.s_letter == "simple" or args.s_letter == "0":
            pass  # uniform candidate draws / C-SVC: what coresvm does
        elif args.s_letter == "fair":
            p["sampling"] = "stratified"
        elif args.s_letter in ("1", "2", "3", "4"):
            raise UsageError(f"-s {args.s_letter}: only C-SVC (-s 0) is supported (no nu-SVC, one-class or SVR)")
        else:
            raise UsageError(f"-s takes simple|fair (gsvm) or 0 (LIBSVM); got {args.s_letter!r}")
    if args.m_letter is not None:
        if args.m_letter in ("grid", "pattern"):
            s.search = args.m_letter
        else:
            p["cache_size"] = _parse_number(args.m_letter, "-m (cache size in MB, or grid|pattern)")
    if args.p_letter is not None:
        if args.p_letter not in ("mn", "adjmn", "meb"):
            raise UsageError(f"-p takes the stopping criterion mn|adjmn|meb (LIBSVM's -p, epsilon-SVR, is not "
                             f"supported); got {args.p_letter!r}")
        p["stopping"] = args.p_letter
    if args.cache_size is not None:
        p["cache_size"] = args.cache_size
    if args.tol is not None and args.tol != "default":
        p["tol"] = _parse_number(args.tol, "-e (tolerance)")
        if p["tol"] < 1:
            p["eps"] = p["tol"]  # the eps of the stopping rule (bvm, sphere, mnsvm)
    for name in ("eta", "selection", "gmdm_k", "sample_size", "n_candidates", "batch_size", "n_init",
                 "max_iter", "max_time", "solver"):
        value = getattr(args, name)
        if value is not None:
            p[name] = value
    if args.vertex_search is not None:
        p["search"] = args.vertex_search
    p["random_state"] = args.seed
    if args.verbose:
        p["verbose"] = True
    s.class_weight = args.class_weight
    for item in args.param:
        name, sep, text = item.partition("=")
        if not sep:
            raise UsageError(f"--param takes NAME=VALUE; got {item!r}")
        p[name.strip()] = _parse_param_value(text.strip())
    unknown = sorted(set(p) - set(known))
    if unknown:
        raise UsageError(f"CoreSVC has no parameter {', '.join(unknown)}")
    if getattr(args, "resolution", None) is not None:
        s.resolution = args.resolution
    if getattr(args, "search", None) is not None:
        s.search = args.search
    if not gsvm and p.get("kernel", "rbf") in ("rbf", "linear") and (args.r_letter is not None) \
            and command in ("select", "cv") and not args.quiet:
        print(f"coresvm {command}: note: -r sets coef0 (LIBSVM), which the {p.get('kernel', 'rbf')} kernel ignores; "
              "for gsvm's grid resolution use --resolution or --gsvm", file=sys.stderr)
    if p.get("multiclass") == "joint" and p.get("solver", "coreset") not in ("coreset", "cvm"):
        raise UsageError(
            f"-u allatonce: the all-at-once machine (Strack 2013, sec. 5.4) is solved by --solver coreset or cvm "
            f"(the same problem and optimum); --solver {p['solver']} cannot solve it: the other solvers' compiled "
            "loops (the gsvm family bvm, sphere, mnsvm and the Frank-Wolfe family) evaluate the extended kernel "
            "with binary labels y_i y_j, not the "
            f"all-at-once problem's label inner products. Use -u pairwise with --solver {p['solver']}"
        )
    # Check the parameters now, before a long data load, with the estimator's own messages.
    try:
        CoreSVC(**p)._check_params()
    except AttributeError:  # an estimator without _check_params checks at fit time
        pass
    return s


def _gamma_value(text: str | None):
    if text is None:
        return None
    if text in ("scale", "auto", "cvm"):
        return text
    value = _parse_number(text, "-g (gamma, a number or scale|auto|cvm)")
    if value <= 0:
        raise UsageError(f"-g: gamma must be > 0; got {text}")
    return value


def _class_weight(items: list[str], y: np.ndarray):
    """--class-weight LABEL=W items as CoreSVC's class_weight, with labels matched to the data's."""
    if not items:
        return None
    if items == ["balanced"]:
        return "balanced"
    classes = np.unique(y)
    weights = {}
    for item in items:
        label_text, sep, weight_text = item.partition("=")
        if not sep:
            raise UsageError(f"class weight {item!r}: expected LABEL=WEIGHT (or 'balanced')")
        weight = _parse_number(weight_text, f"class weight for {label_text}")
        match = [c for c in classes.tolist() if str(c) == label_text or _same_number(c, label_text)]
        if not match:
            raise UsageError(f"class weight for label {label_text}, which is not in the data "
                             f"(labels: {', '.join(map(str, classes.tolist()))})")
        weights[match[0]] = weight
    return weights


def _same_number(label, text: str) -> bool:
    try:
        return isinstance(label, (int, float)) and float(text) == float(label)
    except ValueError:
        return False


def _preprocess_argv(argv: list[str]) -> list[str]:
    """Spellings argparse cannot take directly: LIBSVM's ``-wLABEL W`` and ``-h 0|1``, negative log2 ranges."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        match = re.fullmatch(r"-w(\S+)", token)
        if match and i + 1 < len(argv):
            out += ["--class-weight", f"{match.group(1)}={argv[i + 1]}"]
            i += 2
            continue
        if token in ("--log2c", "--log2g") and i + 1 < len(argv):
            out.append(f"{token}={argv[i + 1]}")  # a range like -5,15,2 would look like an option to argparse
            i += 2
            continue
        if token == "-h" and i + 1 < len(argv) and argv[i + 1] in ("0", "1"):
            i += 2  # LIBSVM's shrinking switch: nothing to shrink in these solvers
            continue
        out.append(token)
        i += 1
    return out


def _data_path(args: argparse.Namespace) -> str:
    """The data file: the first positional argument, or gsvm's ``-I FILE`` (then a lone positional is the model)."""
    if args.input is not None and args.data is not None:
        if getattr(args, "model", "absent") is None:
            args.model, args.data = args.data, None
        elif args.data != args.input:
            raise UsageError(f"two data files given: {args.data} and -I {args.input}")
    path = args.data or args.input
    if path is None:
        raise UsageError("no data file given")
    return path


def _make_estimator(settings: Settings, y, **overrides):
    from . import CoreSVC

    params = dict(settings.params)
    weights = _class_weight(settings.class_weight, y)
    if weights is not None:
        params["class_weight"] = weights
    params.update(overrides)
    return CoreSVC(**params)


def _fit(model, X, y, label: str, quiet: bool):
    """Fit with a progress bar; warnings become one stderr line each (no tracebacks, no source lines)."""
    budget = model.get_params().get("max_time")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Progress(label, enabled=not quiet, budget=budget):
            model.fit(X, y)
    if not quiet:
        for message in {str(w.message) for w in caught if issubclass(w.category, UserWarning)}:
            print(f"{label}: warning: {message}", file=sys.stderr)
    return model


# =========================================================================== train
def _train(args: argparse.Namespace) -> int:
    from . import model_io

    settings = _resolve(args, "train")
    if args.c_low is not None:
        settings.params["C"] = args.c_low
    gamma = _gamma_value(args.gamma_low)
    if gamma is not None:
        settings.params["gamma"] = gamma
    path = _data_path(args)
    model_path = args.model or f"{Path(path).name}.model"
    X, y, base = read_data_indexed(path, settings.matrix_type)
    if args.v_folds is not None or args.inner_folds is not None:
        # svm-train -v: cross-validate instead of training (no model file is written)
        folds = args.v_folds if args.v_folds is not None else args.inner_folds
        accuracy = _kfold(settings, X, y, folds, args.seed, args.quiet, jobs=1, label="coresvm train -v")
        print(f"Cross Validation Accuracy = {100 * np.mean(accuracy):g}%")
        return 0
    model = _make_estimator(settings, y)
    start = time.perf_counter()
    _fit(model, X, y, "coresvm train", args.quiet)
    seconds = time.perf_counter() - start
    _keep_index_base(model, base)
    model_io.save_model(model, model_path, format=args.format)
    if not args.quiet:
        status = "converged" if model.fit_status_ == 0 else "stopped early (see warning)"
        print(f"trained on {X.shape[0]:,} samples x {X.shape[1]:,} features, {len(model.classes_)} classes, "
              f"in {seconds:.2f} s: #SV = {len(model.support_):,}, iterations = {int(np.sum(model.n_iter_)):,}, "
              f"{status}")
        print(f"model written to {model_path} ({args.format} format)")
    return 0


def _keep_index_base(model, base) -> None:
    """Keep the training file's LIBSVM index base in the model (``libsvm_index_base_``; saved with it)."""
    if base is not None:
        setattr(model, INDEX_BASE_ATTRIBUTE, int(base))


# =========================================================================== predict
def _predict(args: argparse.Namespace) -> int:
    import scipy.sparse as sp

    from . import model_io

    if args.b_letter not in (None, "0"):
        if args.b_letter == "1":
            raise UsageError("-b 1: probability estimates are not supported")
        raise UsageError(f"-b takes 0 (no probability estimates); got {args.b_letter!r}")
    for path in (args.data, args.model):
        if not Path(path).exists():
            raise UsageError(f"file not found: {path}")
    model = model_io.load_model(args.model)
    n = model.n_features_in_
    # the test file is read with the training file's index base (kept in the model), so that a model
    # trained on a zero-based file reads a zero-based test file column for column, whatever 'auto'
    # would decide for the test file alone (one without an index 0 would look one-based)
    X, y, _ = read_data_indexed(args.data, args.matrix_type or "auto", labels=not args.no_labels,
                                index_base=getattr(model, INDEX_BASE_ATTRIBUTE, "auto"), n_features=n)
    if X.shape[1] < n:
        X = _widen(X, n)
    elif X.shape[1] > n:
        # Features the training data never had are zero in every SV: widening the SVs keeps
        # every dot product and only adds the new features to ||x||^2, as LIBSVM computes it.
        if not args.quiet:
            print(f"coresvm predict: note: {args.data} has {X.shape[1]} features, the model {n}; the extra "
                  "features are taken as zero in the support vectors (as LIBSVM does)", file=sys.stderr)
        model = _widen_model(model, X.shape[1])
    if sp.issparse(X) and not sp.issparse(model.support_vectors_) and args.matrix_type is None \
            and X.nnz >= AUTO_DENSE_FRACTION * X.shape[0] * X.shape[1]:
        X = X.toarray()
    with Progress("coresvm predict", enabled=not args.quiet):
        predictions = model.predict(X)
        decisions = model.decision_function(X) if args.decision_values else None
    with open(args.output, "w") as out:
        for row, label in enumerate(predictions):
            line = _format_label(label)
            if decisions is not None:
                values = np.atleast_1d(decisions[row])
                line += " " + " ".join(repr(float(v)) for v in values)
            out.write(line + "\n")
    if y is not None and not args.quiet:
        correct = int(np.sum(predictions == y))
        print(f"Accuracy = {100 * correct / len(y):g}% ({correct}/{len(y)}) (classification)")
    return 0


def _widen(X, n_features: int):
    import scipy.sparse as sp

    if sp.issparse(X):
        X = X.tocsr()
        return sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], n_features))
    return np.hstack([X, np.zeros((X.shape[0], n_features - X.shape[1]), dtype=X.dtype)])


def _widen_model(model, n_features: int):
    import copy

    wide = copy.copy(model)
    wide.support_vectors_ = _widen(model.support_vectors_, n_features)
    wide.n_features_in_ = n_features
    return wide


# =========================================================================== cv and select
class _Scorer:
    """Accuracy scorer that also advances the progress bar (one step per fold fit)."""

    def __init__(self, progress: Progress | None):
        self.progress = progress

    def __call__(self, estimator, X, y) -> float:
        score = float(np.mean(estimator.predict(X) == y))
        if self.progress is not None:
            self.progress.step()
        return score


def _folds(k: int, seed: int):
    from sklearn.model_selection import StratifiedKFold

    if k < 2:
        raise UsageError(f"cross-validation needs at least 2 folds; got {k}")
    return StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)


def _check_folds(y, k: int, what: str) -> None:
    counts = np.unique(y, return_counts=True)[1]
    if k > len(y):
        raise UsageError(f"{what}: {k} folds for {len(y)} samples")
    if counts.max() < k:
        raise UsageError(f"{what}: {k} folds but no class has {k} samples")


def _kfold(settings: Settings, X, y, folds: int, seed: int, quiet: bool, jobs: int, label: str) -> np.ndarray:
    from sklearn.model_selection import cross_val_score

    _check_folds(y, folds, label)
    model = _make_estimator(settings, y)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Progress(label, total=folds, enabled=not quiet and jobs == 1) as progress:
            scores = cross_val_score(model, X, y, cv=_folds(folds, seed), scoring=_Scorer(progress if jobs == 1
                                     else None), n_jobs=jobs, error_score="raise")
    _report_warnings(caught, label, quiet)
    return scores


def _report_warnings(caught, label: str, quiet: bool) -> None:
    from sklearn.exceptions import ConvergenceWarning

    if quiet:
        return
    stopped = sum(1 for w in caught if issubclass(w.category, ConvergenceWarning))
    if stopped:
        print(f"{label}: note: {stopped} fit(s) stopped before convergence (max_iter, max_time or cache_size)",
              file=sys.stderr)
    for message in {str(w.message) for w in caught if issubclass(w.category, UserWarning)
                    and not issubclass(w.category, ConvergenceWarning)}:
        print(f"{label}: warning: {_one_line(Warning(message))}", file=sys.stderr)


def _log2_range(text: str, what: str) -> np.ndarray:
    parts = text.split(",")
    if len(parts) != 3:
        raise UsageError(f"{what} takes BEGIN,END,STEP; got {text!r}")
    begin, end, step = (_parse_number(v, what) for v in parts)
    if step == 0 or (end - begin) * step < 0:
        raise UsageError(f"{what}: STEP {step:g} does not lead from {begin:g} to {end:g}")
    count = int(math.floor((end - begin) / step + 1e-9)) + 1
    return 2.0 ** (begin + step * np.arange(count))


def _axis(low, high, default: tuple[float, float], resolution: int, log2: str | None, what: str):
    """Values of one grid axis: a log2 range, a geometric range [low, high], or one fixed value."""
    if log2 is not None:
        return list(_log2_range(log2, f"--log2{what[0].lower()}"))
    if isinstance(low, str):
        if high is not None:
            raise UsageError(f"a {what} range needs numbers; got the rule {low!r} as its lower end")
        return [low]
    low = default[0] if low is None else low
    high = default[1] if high is None else high
    if low <= 0 or high <= 0:
        raise UsageError(f"{what} range must be positive; got [{low:g}, {high:g}]")
    if low > high:
        raise UsageError(f"{what} range: lower end {low:g} is above the upper end {high:g}")
    if low == high:
        return [low]
    return [float(v) for v in np.geomspace(low, high, resolution)]


def _grid(args: argparse.Namespace, settings: Settings) -> dict[str, list]:
    resolution = settings.resolution if settings.resolution is not None else GSVM_RESOLUTION
    if resolution < 1:
        raise UsageError(f"resolution must be >= 1; got {resolution}")
    gamma_low = _gamma_value(args.gamma_low)
    return {
        "C": _axis(args.c_low, args.c_high, GSVM_C_RANGE, resolution, args.log2c, "C"),
        "gamma": _axis(gamma_low, args.gamma_high, GSVM_GAMMA_RANGE, resolution, args.log2g, "gamma"),
    }


def _search_class(search: str | None):
    from sklearn.model_selection import GridSearchCV

    import coresvm

    if search == "pattern":
        cls = getattr(coresvm, "PatternSearchCV", None)
        if cls is None:
            raise UsageError("pattern search is not available yet in this coresvm; use --search grid (-m grid)")
        return cls
    return GridSearchCV


def _run_search(settings: Settings, grid: dict, X, y, folds: int, seed: int, jobs: int, progress: Progress | None):
    model = _make_estimator(settings, y)
    search_cls = _search_class(settings.search)
    search = search_cls(model, grid, cv=_folds(folds, seed), scoring=_Scorer(progress), n_jobs=jobs,
                        refit=False, error_score="raise")
    search.fit(X, y)
    return search


def _grid_size(grid: dict) -> int:
    return int(np.prod([len(v) for v in grid.values()]))


def _cv(args: argparse.Namespace) -> int:
    settings = _resolve(args, "cv")
    path = _data_path(args)
    folds = args.v_folds or args.inner_folds or DEFAULT_FOLDS
    has_range = any(v is not None for v in (args.c_high, args.gamma_high, args.log2c, args.log2g))
    if not has_range:
        if args.outer_folds > 1:
            raise UsageError("nested CV (-o > 1) needs a C or gamma range (-C, -G, --log2c or --log2g) to select from")
        if args.c_low is not None:
            settings.params["C"] = args.c_low
        gamma = _gamma_value(args.gamma_low)
        if gamma is not None:
            settings.params["gamma"] = gamma
        X, y = read_data(path, settings.matrix_type)
        start = time.perf_counter()
        scores = _kfold(settings, X, y, folds, args.seed, args.quiet, args.jobs, "coresvm cv")
        if not args.quiet:
            for k, score in enumerate(scores, start=1):
                print(f"fold {k:>3}: accuracy {100 * score:.4f}%")
            print(f"{folds}-fold CV: mean {100 * scores.mean():.4f}%, std {100 * scores.std():.4f}%, "
                  f"{time.perf_counter() - start:.2f} s")
        print(f"Cross Validation Accuracy = {100 * scores.mean():g}%")
        return 0
    if args.outer_folds < 2:
        raise UsageError("a C or gamma range in 'coresvm cv' means nested CV: give -o K (K >= 2) outer folds, "
                         "or use 'coresvm select' for a plain grid search")
    grid = _grid(args, settings)
    X, y = read_data(path, settings.matrix_type)
    _check_folds(y, args.outer_folds, "outer CV")
    outer = _folds(args.outer_folds, args.seed)
    per_search = _grid_size(grid) * folds
    scores = []
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Progress("coresvm cv (nested)", total=args.outer_folds * (per_search + 1),
                      enabled=not args.quiet and args.jobs == 1) as progress:
            for k, (train, test) in enumerate(outer.split(np.zeros(len(y)), y), start=1):
                X_train, y_train = X[train], y[train]
                _check_folds(y_train, folds, f"inner CV of outer fold {k}")
                search = _run_search(settings, grid, X_train, y_train, folds, args.seed, args.jobs,
                                     progress if args.jobs == 1 else None)
                best = search.best_params_
                model = _make_estimator(settings, y_train, **best).fit(X_train, y_train)
                score = float(np.mean(model.predict(X[test]) == y[test]))
                progress.step()
                scores.append(score)
                if not args.quiet:
                    sys.stderr.flush()
                    print(f"outer fold {k:>3}: C = {best['C']:g}, gamma = {_fmt_gamma(best['gamma'])}, inner CV "
                          f"{100 * search.best_score_:.4f}%, test accuracy {100 * score:.4f}%")
    _report_warnings(caught, "coresvm cv", args.quiet)
    scores = np.array(scores)
    if not args.quiet:
        print(f"nested CV ({args.outer_folds} outer x {folds} inner folds, {_grid_size(grid)} grid points): mean "
              f"{100 * scores.mean():.4f}%, std {100 * scores.std():.4f}%, {time.perf_counter() - start:.2f} s")
    print(f"Nested Cross Validation Accuracy = {100 * scores.mean():g}%")
    return 0


def _fmt_gamma(gamma) -> str:
    return gamma if isinstance(gamma, str) else f"{gamma:g}"


def _select(args: argparse.Namespace) -> int:
    from . import model_io

    settings = _resolve(args, "select")
    path = _data_path(args)
    folds = args.v_folds or args.inner_folds or DEFAULT_FOLDS
    grid = _grid(args, settings)
    _search_class(settings.search)  # a usage error before the data are read
    X, y, base = read_data_indexed(path, settings.matrix_type)
    _check_folds(y, folds, "coresvm select")
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Progress("coresvm select", total=_grid_size(grid) * folds,
                      enabled=not args.quiet and args.jobs == 1) as progress:
            search = _run_search(settings, grid, X, y, folds, args.seed, args.jobs,
                                 progress if args.jobs == 1 else None)
    _report_warnings(caught, "coresvm select", args.quiet)
    results = search.cv_results_
    best = search.best_params_
    if not args.quiet:
        print(f"{'C':>12} {'gamma':>12} {'CV accuracy (%)':>16}")
        for params, score in zip(results["params"], results["mean_test_score"], strict=True):
            if np.isfinite(score):
                print(f"{params['C']:>12g} {_fmt_gamma(params['gamma']):>12} {100 * score:>16.4f}")
        print(f"{_grid_size(grid)} grid points x {folds} folds in {time.perf_counter() - start:.2f} s")
    print(f"Best: C = {best['C']:g}, gamma = {_fmt_gamma(best['gamma'])}, "
          f"CV accuracy = {100 * search.best_score_:g}%")
    if args.model:
        model = _make_estimator(settings, y, **best)
        _fit(model, X, y, "coresvm select (final model)", args.quiet)
        _keep_index_base(model, base)
        model_io.save_model(model, args.model, format=args.format)
        if not args.quiet:
            print(f"model trained on all data written to {args.model} ({args.format} format)")
    return 0


# =========================================================================== scale
def _scale(args: argparse.Namespace) -> int:
    import scipy.sparse as sp

    if args.save and args.restore:
        raise UsageError("give either -s (save the scaling) or -r (restore it), not both")
    # indices as given (column i is index i), as svm-scale keeps them: the output and the scaling
    # file use the input's own indices, zero- or one-based (a one-based file's empty column 0 is
    # constant, so it is neither scaled nor written)
    X, y, _ = read_data_indexed(args.data, "sparse" if args.matrix_type is None else args.matrix_type,
                                index_base=0)
    n_features = X.shape[1]
    if args.restore:
        lower, upper, minimum, maximum = _read_scaling(args.restore)
        if len(minimum) < n_features:  # features the scaling file never saw are dropped, as in svm-scale
            pad = n_features - len(minimum)
            minimum = np.concatenate([minimum, np.zeros(pad)])
            maximum = np.concatenate([maximum, np.zeros(pad)])
        minimum, maximum = minimum[:n_features], maximum[:n_features]
    else:
        lower = -1.0 if args.lower is None else args.lower
        upper = 1.0 if args.upper is None else args.upper
        if not lower < upper:
            raise UsageError(f"scale: need lower < upper; got -l {lower:g} -u {upper:g}")
        if sp.issparse(X):
            from sklearn.utils.sparsefuncs import min_max_axis

            # includes the implicit zeros of rows that lack a feature, as svm-scale does
            minimum, maximum = (np.asarray(v, dtype=np.float64) for v in min_max_axis(X, axis=0))
        else:
            minimum, maximum = X.min(axis=0), X.max(axis=0)
    kept = maximum > minimum
    span = np.where(kept, maximum - minimum, 1.0)
    # image of an absent (zero) entry; when it is 0 for every kept feature the data stay sparse
    zero_image = np.where(kept, lower + (upper - lower) * (0.0 - minimum) / span, 0.0)
    if sp.issparse(X) and not np.any(zero_image):
        X = X.tocsr().copy()
        columns = X.indices
        X.data = np.where(kept[columns], lower + (upper - lower) * (X.data - minimum[columns]) / span[columns], 0.0)
        X.eliminate_zeros()
    else:
        dense = X.toarray() if sp.issparse(X) else np.array(X, dtype=np.float64)
        dense = lower + (upper - lower) * (dense - minimum) / span
        dense[:, ~kept] = 0.0
        X = dense
    if args.save:
        with open(args.save, "w") as out:
            out.write(f"x\n{lower!r} {upper!r}\n")
            for index in np.flatnonzero(kept):
                out.write(f"{index} {float(minimum[index])!r} {float(maximum[index])!r}\n")
    write_data(args.output or "-", X, y, zero_based=True)
    return 0


def _read_scaling(path: str) -> tuple[float, float, np.ndarray, np.ndarray]:
    """Read an svm-scale scaling file: ``x``, ``lower upper``, then ``index min max`` lines."""
    if not Path(path).exists():
        raise UsageError(f"file not found: {path}")
    lines = [line.split() for line in Path(path).read_text().splitlines()]
    if lines and lines[0] == ["y"]:
        raise UsageError(f"{path}: label (y) scaling is not supported")
    if len(lines) < 2 or lines[0] != ["x"]:
        raise UsageError(f"{path}: not an svm-scale scaling file (expected 'x' on line 1)")
    try:
        lower, upper = (float(v) for v in lines[1])
    except ValueError:
        raise UsageError(f"{path}: unreadable line 2 (expected 'lower upper')") from None
    entries = {}
    for number, fields in enumerate(lines[2:], start=3):
        if not fields:
            continue
        try:
            index, low, high = int(fields[0]), float(fields[1]), float(fields[2])
            if len(fields) != 3 or index < 0:
                raise ValueError
        except (ValueError, IndexError):
            raise UsageError(f"{path}: unreadable line {number} (expected 'index min max')") from None
        entries[index] = (low, high)  # indices as given, as _scale reads the data
    size = max(entries, default=-1) + 1
    minimum, maximum = np.zeros(size), np.zeros(size)
    for index, (low, high) in entries.items():
        minimum[index], maximum[index] = low, high
    return lower, upper, minimum, maximum


# =========================================================================== info
def _info(args: argparse.Namespace) -> int:
    from . import model_io

    if not Path(args.model).exists():
        raise UsageError(f"file not found: {args.model}")
    metadata = model_io.read_metadata(args.model)
    model = model_io.load_model(args.model)
    summary = model_io.model_summary(model)
    if args.json:
        out = {key: metadata[key] for key in ("format", "format_version", "coresvm_version", "params")
               if key in metadata}
        out["summary"] = summary
        print(json.dumps(out, indent=1, default=str))
        return 0
    if metadata.get("format") == "libsvm":
        print(f"{args.model}: LIBSVM text model (C-SVC)")
    else:
        print(f"{args.model}: coresvm native model, format version {metadata['format_version']}, "
              f"written by coresvm {metadata.get('coresvm_version')}")
    kernel = summary["kernel"]
    kernel_text = {"linear": "linear <x, x'>", "rbf": f"rbf exp(-{summary['gamma']:g} ||x - x'||^2)",
                   "poly": f"poly ({summary['gamma']:g} <x, x'> + {summary['coef0']:g})^{summary['degree']}",
                   "sigmoid": f"sigmoid tanh({summary['gamma']:g} <x, x'> + {summary['coef0']:g})"}[kernel]
    rows = [
        ("kernel", kernel_text),
        ("classes", " ".join(map(str, summary["classes"]))),
        ("support vectors", f"{sum(summary['n_support']):,} ({' + '.join(map(str, summary['n_support']))}), "
                            f"{summary['support_vectors']}"),
        ("features", f"{summary['n_features']:,}"),
        ("bias", summary["bias_rule"]),
        ("multiclass", summary["multiclass"]),
    ]
    if metadata.get("format") != "libsvm":
        params = metadata.get("params", {})
        rows[1:1] = [("solver", f"{summary['solver']}, C = {summary['C']}, tol = {summary['tol']}")]
        other = {k: v for k, v in params.items() if k not in ("C", "tol", "solver", "kernel", "gamma", "degree",
                                                             "coef0")}
        rows.append(("fit status", "converged" if summary["fit_status"] == 0 else
                     f"stopped early ({', '.join(sorted(set(summary['statuses'])))})"))
        rows.append(("iterations", " ".join(map(str, summary["iterations"]))))
        rows.append(("other parameters", json.dumps(other, default=str)))
    for name, value in rows:
        print(f"  {name + ':':<18}{value}")
    return 0


# =========================================================================== demo
def _fractions(text: str) -> list[float]:
    """``--fractions 0.01,0.02,0.05``: subsample fractions in (0, 1], ascending."""
    try:
        values = sorted({float(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected fractions such as 0.01,0.05; got {text!r}") from None
    if not values or not all(0.0 < v <= 1.0 for v in values):
        raise argparse.ArgumentTypeError(f"fractions must be in (0, 1]; got {text!r}")
    return values


def _demo(args: argparse.Namespace) -> int:
    from sklearn.base import clone
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.svm import SVC

    from . import CoreSVC
    from .datasets import make_checkerboard

    def timed_fit(model, X_fit, y_fit):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            start = time.perf_counter()
            model.fit(X_fit, y_fit)
            return time.perf_counter() - start

    def cells(seconds, model, note=""):
        accuracy = 100 * model.score(X_test, y_test)
        return f"{seconds:>10.2f}{accuracy:>10.2f}%{len(model.support_):>8,}{note}"

    X, y = make_checkerboard(args.n, random_state=args.seed)
    X_test, y_test = make_checkerboard(args.n_test, random_state=args.seed + 1)
    core = CoreSVC(C=args.C, gamma=args.gamma, solver=args.solver, tol=args.tol, max_time=args.max_time,
                   random_state=args.seed)
    svc = SVC(C=args.svc_C, gamma=args.gamma)
    budget = "" if args.max_time is None else f", max_time={args.max_time:g}"
    print(f"4x4 checkerboard (the CVM paper's benchmark): {args.n:,} training points, {args.n_test:,} test points, "
          f"RBF gamma = {args.gamma:g}.")
    print(f"Each row trains both on the same random subsample: coresvm CoreSVC(solver='{args.solver}', C={args.C:g}, "
          f"tol={args.tol:g}{budget}) and scikit-learn SVC(C={args.svc_C:g}).")
    print("CoreSVC's C weighs squared slacks (an L2-SVM), so it is not SVC's C; each is a good value for its model.")

    # Numba compiles coresvm's solver loops on first use (cached on disk afterwards). Compile them
    # here, on another draw, for both size classes: problems whose kernel fits cache_size run the
    # compiled small-problem path, larger ones the core-set loop.
    rng = np.random.default_rng(args.seed)
    sizes = [max(2, int(round(f * args.n))) for f in args.fractions]
    warm_sizes = sorted({min(size, 2_000) for size in sizes} | {min(size, 8_000) for size in sizes})
    start = time.perf_counter()
    for size in warm_sizes:
        X_warm, y_warm = make_checkerboard(size, random_state=args.seed + 2)
        timed_fit(clone(core).set_params(max_time=None if args.max_time is None else max(args.max_time, 5.0)),
                  X_warm, y_warm)
    print(f"(coresvm's solver loops compiled or loaded from the cache first: {time.perf_counter() - start:.1f} s, "
          "not included below)")
    print()
    print(f"{'':>20}{f'coresvm CoreSVC({args.solver})':^29}  {'scikit-learn SVC':^29}")
    print(f"{'subsample':>9}{'rows':>11}{'time (s)':>10}{'test acc':>11}{'#SV':>8}  "
          f"{'time (s)':>10}{'test acc':>11}{'#SV':>8}")
    svc_seconds = 0.0
    for fraction, size in zip(args.fractions, sizes, strict=True):
        rows = rng.choice(args.n, size=size, replace=False)
        rows.sort()
        line = f"{100 * fraction:>8g}%{size:>11,}"
        model = clone(core)
        line += cells(timed_fit(model, X[rows], y[rows]), model, " (cut)" if model.fit_status_ else "")
        baseline = clone(svc)
        svc_seconds = timed_fit(baseline, X[rows], y[rows])
        print(line + "  " + cells(svc_seconds, baseline), flush=True)
    if args.fractions[-1] < 1.0 and not args.no_full:
        model = clone(core).set_params(max_time=svc_seconds)
        seconds = timed_fit(model, X, y)
        print(f"{'all':>9}{args.n:>11,}" + cells(seconds, model)
              + f"  coresvm on all rows in the time SVC took on {100 * args.fractions[-1]:g}%")
    print()
    print("Times are wall-clock seconds on this machine; '(cut)' marks a fit stopped by --max-time.")
    print("'coresvm demo --help' lists the options (data size, subsamples, C, gamma, solver).")
    return 0


# =========================================================================== parser
DESCRIPTION = """\
Kernel SVMs for large data by core-set and Frank-Wolfe methods on the unit simplex.

Data files are LIBSVM/svmlight text (1-based 'label index:value ...'), CSV (label in the
first column) or .npy (label in the first column), optionally compressed (.gz, .xz, .bz2).
Model files are coresvm's native format (JSON + arrays, no pickle) or LIBSVM's text format,
which LIBSVM's svm-predict reads.  Run 'coresvm COMMAND --help' for a command's options."""

TRAIN_EPILOG = """\
examples
  coresvm train -c 4096 -g 0.125 ijcnn1 ijcnn1.model        # like svm-train
  coresvm train -t 1 -d 2 -r 1 --format libsvm data.txt     # poly kernel, a LIBSVM model file
  coresvm train -v 5 -c 16 data.txt                         # 5-fold CV, as svm-train -v
  coresvm train --solver swap --vertex-search full --max-time 60 a9a

defaults
  Without options CoreSVC's defaults apply: C = 1, gamma = scale, rbf kernel, solver coreset,
  tolerance 0.01 (relative duality gap), seed 0.  C weighs squared slacks (L2-SVM): good values
  are usually larger than LIBSVM's.  The model file defaults to DATA.model in the current
  directory, as in svm-train.

""" + EPILOG_SHARED_LETTERS

CV_EPILOG = """\
examples
  coresvm cv -c 100 -g 1 -i 10 -S 5 iris.dat                              # gsvm: 10-fold CV
  coresvm cv -c 1 -C 10 -g 0.1 -G 10 -i 10 -o 10 --resolution 5 -m grid iris.dat
  coresvm cv --gsvm -c 1 -C 10 -g 0.1 -G 10 -i 10 -o 10 -r 5 -m grid iris.dat   # the same, gsvm's -r

  One (C, gamma): stratified k-fold CV.  A range (-C, -G, --log2c or --log2g) with -o K:
  nested CV, a grid search on each outer training part, its best model tested on the outer part.

""" + EPILOG_SHARED_LETTERS

SELECT_EPILOG = """\
examples
  coresvm select data.txt                                   # gsvm's default grid: 8 x 8 values
  coresvm select -c 1 -C 4096 -g 0.01 -G 1 --resolution 7 -i 5 data.txt best.model
  coresvm select --log2c -5,15,2 --log2g 3,-15,-2 -v 5 data.txt   # grid.py's ranges

  Each axis runs from its low to its high value in --resolution geometric steps (gsvm's
  defaults: C in [2^-4, 2^10], gamma in [2^-10, 2^4], 8 values), or over a grid.py range.  Give
  low = high to fix an axis.  With MODEL, the best (C, gamma) is retrained on all data and saved.

""" + EPILOG_SHARED_LETTERS


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="coresvm", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    raw = argparse.RawDescriptionHelpFormatter

    train = sub.add_parser("train", help="train on a data file and write a model file (like svm-train)",
                           description="Train a CoreSVC on DATA and write MODEL.", epilog=TRAIN_EPILOG,
                           formatter_class=raw)
    train.add_argument("data", nargs="?", metavar="DATA", help="training data file")
    train.add_argument("model", nargs="?", metavar="MODEL", help="model file to write (default DATA.model)")
    train.add_argument("--format", choices=["native", "libsvm"], default="native",
                       help="model file format: native (all metadata; default) or libsvm (svm-predict reads it)")
    train.add_argument("-v", dest="v_folds", type=int, metavar="K",
                       help="k-fold cross-validation instead of training (svm-train -v)")
    train.add_argument("-i", "--folds", dest="inner_folds", type=int, metavar="K", help="the same as -v")
    _add_svm_options(train, ranges=False)
    train.set_defaults(handler=_train)

    predict = sub.add_parser("predict", help="predict with a model file (like svm-predict)",
                             description="Predict the labels of DATA with MODEL, write them to OUTPUT (one per line) "
                             "and print the accuracy when DATA has labels.  MODEL may be a coresvm model or "
                             "any LIBSVM C-SVC model file.", formatter_class=raw)
    predict.add_argument("data", metavar="DATA", help="data file")
    predict.add_argument("model", metavar="MODEL", help="model file (native or LIBSVM)")
    predict.add_argument("output", metavar="OUTPUT", help="predictions file to write")
    predict.add_argument("-b", dest="b_letter", metavar="0", help="probability estimates: only 0 (svm-predict)")
    predict.add_argument("--decision-values", action="store_true",
                         help="write the decision values after each label (the 'ovr' scores for >2 classes)")
    predict.add_argument("-t", "--matrix-type", dest="matrix_type", choices=["auto", "sparse", "dense"],
                         help="data representation (default auto)")
    predict.add_argument("--no-labels", action="store_true", help="CSV/.npy data without a label column")
    predict.add_argument("-q", "--quiet", action="store_true", help="print nothing (svm-predict -q)")
    predict.set_defaults(handler=_predict)

    cv = sub.add_parser("cv", help="k-fold or nested cross-validation (gsvm's default mode)",
                        description="Cross-validate CoreSVC on DATA.", epilog=CV_EPILOG, formatter_class=raw)
    cv.add_argument("data", nargs="?", metavar="DATA", help="data file")
    _add_svm_options(cv, ranges=True)
    _add_cv_options(cv, select=False)
    cv.set_defaults(handler=_cv)

    select = sub.add_parser("select", help="choose C and gamma by cross-validated grid search (like grid.py)",
                            description="Search C and gamma by k-fold CV on DATA; optionally train the best "
                            "model on all of DATA and write it to MODEL.", epilog=SELECT_EPILOG, formatter_class=raw)
    select.add_argument("data", nargs="?", metavar="DATA", help="data file")
    select.add_argument("model", nargs="?", metavar="MODEL", help="write the best model, retrained on all data")
    select.add_argument("--format", choices=["native", "libsvm"], default="native", help="model file format")
    _add_svm_options(select, ranges=True)
    _add_cv_options(select, select=True)
    select.set_defaults(handler=_select)

    scale = sub.add_parser("scale", help="scale features to [-1, 1] or [0, 1] (like svm-scale)",
                           description="Scale each feature of DATA linearly to [LOWER, UPPER] and write the result "
                           "in LIBSVM format (to stdout or --output).  The scaling file is svm-scale's: "
                           "'x', 'lower upper', then 'index min max' per feature.  Constant features, and with "
                           "-r features the scaling file does not list, are dropped, as svm-scale does.",
                           formatter_class=raw)
    scale.add_argument("data", metavar="DATA", help="data file")
    scale.add_argument("-l", "--lower", type=float, help="lower end of the range (default -1)")
    scale.add_argument("-u", "--upper", type=float, help="upper end of the range (default 1)")
    scale.add_argument("-s", "--save", metavar="FILE", help="save the scaling parameters")
    scale.add_argument("-r", "--restore", metavar="FILE", help="scale with saved parameters (e.g. the test data)")
    scale.add_argument("--output", metavar="FILE", help="output data file (default stdout; .csv/.npy by name)")
    scale.add_argument("--matrix-type", choices=["sparse", "dense"], help="data representation (default sparse)")
    scale.set_defaults(handler=_scale)

    info = sub.add_parser("info", help="describe a model file", description="Describe a model file (native or "
                          "LIBSVM): kernel, solver, classes, support vectors, bias rule, fit status.")
    info.add_argument("model", metavar="MODEL", help="model file")
    info.add_argument("--json", action="store_true", help="print the metadata as JSON")
    info.set_defaults(handler=_info)

    demo = sub.add_parser(
        "demo",
        help="compare coresvm and scikit-learn SVC on subsamples of a generated checkerboard",
        description="Train coresvm's CoreSVC and scikit-learn's SVC side by side on random subsamples of growing "
        "size of the 4x4 checkerboard of the CVM paper, and print the training time, test accuracy and number of "
        "support vectors of each; then coresvm on all rows in the time SVC took on the largest subsample.",
    )
    demo.add_argument("--n", type=int, default=1_000_000, help="points of the generated data set (default 1,000,000)")
    demo.add_argument("--n-test", type=int, default=100_000, help="test points (default 100,000)")
    demo.add_argument("--fractions", "--svc-fraction", dest="fractions", type=_fractions,
                      default=[0.005, 0.01, 0.02, 0.05], metavar="F[,F...]",
                      help="subsample fractions of --n, one row each (default 0.005,0.01,0.02,0.05)")
    demo.add_argument("-c", "--C", type=float, default=1024.0, help="CoreSVC's L2-SVM C (default 1024)")
    demo.add_argument("-g", "--gamma", type=float, default=2.0, help="RBF gamma for both methods (default 2)")
    demo.add_argument(
        "--solver", default="coreset", choices=["coreset", "cvm", "fw", "mfw", "swap", "partan"], help="solver"
    )
    demo.add_argument("-e", "--tol", type=float, default=1e-2, help="relative duality-gap tolerance")
    demo.add_argument("--max-time", type=float, default=None,
                      help="time budget of each CoreSVC fit in seconds (default: none, fits run to the tolerance)")
    demo.add_argument("--no-full", action="store_true",
                      help="skip the last row (coresvm on all rows in the time SVC took on the largest subsample)")
    demo.add_argument("--svc-C", type=float, default=100.0, help="SVC's C (default 100)")
    demo.add_argument("--seed", type=int, default=0, help="random seed")
    demo.set_defaults(handler=_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code (0 success, 2 usage or input error)."""
    from .model_io import ModelFormatError

    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    command = next((token for token in argv if not token.startswith("-")), None)
    if command in ("train", "cv", "select"):
        at = argv.index(command) + 1
        argv = argv[:at] + _preprocess_argv(argv[at:])
    try:
        args = parser.parse_args(argv)
    except UsageError as error:
        print(f"{_prog(command)}: error: {error} (see '{_prog(command)} --help')", file=sys.stderr)
        return 2
    except SystemExit as exit_:  # --help
        return int(exit_.code or 0)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return args.handler(args)
    except BrokenPipeError:
        _silence_stdout()
        return 0
    except (UsageError, ModelFormatError, ValueError, OSError) as error:
        print(f"coresvm {args.command}: error: {_describe(error)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"coresvm {args.command}: interrupted", file=sys.stderr)
        return 130


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush cannot fail again."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _prog(command: str | None) -> str:
    return "coresvm" if command not in ("train", "predict", "cv", "select", "scale", "info", "demo") \
        else f"coresvm {command}"


def _describe(error: BaseException) -> str:
    if isinstance(error, FileNotFoundError) and error.filename:
        return f"file not found: {error.filename}"
    if isinstance(error, OSError) and error.filename:
        return f"cannot access {error.filename}: {error.strerror or error}"
    return _one_line(error)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
