"""Data files: LIBSVM/svmlight text, CSV and ``.npy``, optionally ``.gz``/``.xz``/``.bz2``; read and written."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import sys
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np

from .errors import UsageError, one_line

COMPRESSION = {".gz": gzip.open, ".xz": lzma.open, ".bz2": bz2.open}
# A LIBSVM file is trained dense when at least this fraction of its entries is non-zero.
AUTO_DENSE_FRACTION = 0.5


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
                         f"{one_line(error)}") from None
    X = X.tocsr()
    has_zero = bool(np.any(X.indices == 0))  # an index 0 written, even with the value 0
    base = (0 if has_zero else 1) if index_base == "auto" else int(index_base)
    if base == 1:
        rest = X[:, 1:]
        if has_zero:  # index 0 into a column after the model's features (zero in every SV)
            width = max(rest.shape[1], n_features or 0)
            rest = sp.hstack([widen(rest, width), X[:, :1]], format="csr")
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
        raise UsageError(f"{path}: unreadable {where}: {one_line(error)}") from None
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
        raise UsageError(f"{path}: not a readable .npy array ({one_line(error)})") from None
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
                handle.write((",".join([format_label(label)] + [repr(float(v)) for v in row]) + "\n").encode())
        else:
            np.save(handle, np.column_stack([np.asarray(y, dtype=np.float64), dense]), allow_pickle=False)


def format_label(label) -> str:
    """A label as the data and prediction files write it (floats in full, numpy scalars as Python's)."""
    if isinstance(label, (float, np.floating)):
        return repr(float(label))
    return str(label.item() if isinstance(label, np.generic) else label)


def widen(X, n_features: int):
    """``X`` with zero columns appended up to ``n_features`` columns (CSR stays CSR)."""
    import scipy.sparse as sp

    if sp.issparse(X):
        X = X.tocsr()
        return sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], n_features))
    return np.hstack([X, np.zeros((X.shape[0], n_features - X.shape[1]), dtype=X.dtype)])

