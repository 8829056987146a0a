"""AESVC: an SVM trained on the representative set of approximate extreme points (Nandan et al. 2014)."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

import numpy as np
import scipy.sparse as sp
from sklearn.base import ClassifierMixin
from sklearn.svm import SVC

from . import aesvm
from ._validation import (
    check_choice,
    check_integer,
    check_kernel_range,
    check_positive,
    class_weight_per_sample,
    unfitted_on_failure,
)
from .data import is_memory_mapped, read_rows
from .estimator import CoreEstimatorBase, check_sample_weight
from .kernels import resolve_gamma, within_process_thread_limit

# Representative sets kept for reuse across C (Nandan et al. 2014 Sec. 4.3: "computed once per g").
# GridSearchCV visits (candidate, fold) pairs candidate-major, so the cache must hold one
# set per fold plus the refit: 16 entries, and at most 1 GiB of index/weight arrays.
RS_CACHE_ENTRIES = 16
RS_CACHE_BYTES = 2**30
_RS_CACHE: OrderedDict[str, aesvm.RepresentativeSet] = OrderedDict()
_RS_CACHE_LOCK = threading.Lock()
PREDICT_BLOCK_ROWS = 8192  # sparse input on a dense-trained model is densified in blocks


def clear_representative_set_cache() -> None:
    """Forget every cached representative set."""
    with _RS_CACHE_LOCK:
        _RS_CACHE.clear()


def _cache_get(key: str) -> aesvm.RepresentativeSet | None:
    with _RS_CACHE_LOCK:
        found = _RS_CACHE.get(key)
        if found is not None:
            _RS_CACHE.move_to_end(key)
        return found


def _cache_put(key: str, value: aesvm.RepresentativeSet) -> None:
    with _RS_CACHE_LOCK:
        _RS_CACHE[key] = value
        _RS_CACHE.move_to_end(key)
        while len(_RS_CACHE) > RS_CACHE_ENTRIES or (
            len(_RS_CACHE) > 1 and sum(v.nbytes for v in _RS_CACHE.values()) > RS_CACHE_BYTES
        ):
            _RS_CACHE.popitem(last=False)


def data_fingerprint(X, y: np.ndarray, sample_weight: np.ndarray) -> str:
    """A digest of the training data, labels and weights (the representative set depends on all three)."""
    digest = hashlib.blake2b(digest_size=20)
    if sp.issparse(X):
        X = X.tocsr()
        parts = [X.data, X.indices, X.indptr]
        digest.update(b"csr")
    else:
        parts = [np.asarray(X)]
    digest.update(repr((X.shape, str(X.dtype))).encode())
    for part in parts:
        digest.update(np.ascontiguousarray(part).view(np.uint8).reshape(-1))
    digest.update(np.ascontiguousarray(y).view(np.uint8).reshape(-1))
    digest.update(np.ascontiguousarray(sample_weight, dtype=np.float64).view(np.uint8).reshape(-1))
    return digest.hexdigest()


def _int32_csr(X):
    """SVC's libsvm takes CSR with 32-bit indices only; convert when the indices fit (they always do in practice)."""
    if not sp.issparse(X) or (X.indices.dtype == np.int32 and X.indptr.dtype == np.int32):
        return X
    if X.nnz >= 2**31 or X.shape[1] >= 2**31:
        raise ValueError("sparse input with 2^31 or more stored values is not supported by SVC")
    return sp.csr_matrix((X.data, X.indices.astype(np.int32), X.indptr.astype(np.int32)), shape=X.shape)


class AESVC(ClassifierMixin, CoreEstimatorBase):
    """C-SVC trained on approximate extreme points (AESVM; Nandan et al. 2014, JMLR).

    ``fit`` first derives the *representative set* ``X*`` (DeriveRS,
    :func:`coresvm.aesvm.derive_representative_set`): per class, the data are
    cut into segments of at most ``V`` points (first-level blocks of at most
    ``P`` by FLS2 or FLS1, then SLS), and in each segment the points whose
    kernel-space convex hull covers every other point of the segment within
    ``epsilon`` (squared distance) are kept, each with the weight ``beta_t``
    (eq. 10), the total convex weight the segment puts on it.  Then the
    standard C-SVC is trained on ``X*`` alone with per-sample bound
    ``C * beta_t`` (the AESVM dual, eq. 18) -- scikit-learn's ``SVC`` with
    ``sample_weight=beta`` solves exactly that problem.

    **eps-coverage is enforced.** Every training point is within ``epsilon``
    (squared kernel distance) of the convex combination of its segment's
    representatives that defines beta, the premise of the paper's bounds
    (Corollaries 3-4).  The published DeriveAE does not guarantee it; two fixes
    do (sequential pruning, and promoting any point left with residual >
    epsilon into the representative set), see :func:`coresvm.aesvm.derive_ae`.
    ``max_residual_`` reports the largest residual.

    **Reuse across C.** The representative set depends on the data, the kernel
    and (epsilon, P, V, segmentation), not on ``C`` or ``class_weight``.  It is
    kept in a small in-process cache keyed on a digest of the training data
    (and sample weights) and those parameters, so a grid search over ``C``
    (e.g. ``GridSearchCV`` with ``n_jobs=1``) derives it once per fold and
    kernel parameter.  ``cache_representative_set=False`` turns this off;
    :func:`coresvm.aesvc.clear_representative_set_cache` empties the cache.

    Parameters
    ----------
    C : float, default=1.0
        The C-SVC penalty on ``sum_i xi_i`` (scikit-learn ``SVC``'s and LIBSVM's
        C; the paper's ``C' = C/N``).  Representative ``t`` gets the bound ``C * beta_t``.
    kernel : {'rbf', 'poly', 'linear', 'sigmoid'}, default='rbf'
    gamma : float or {'scale', 'auto', 'cvm'}, default='scale'
        Kernel width, resolved from the training data as in :class:`~coresvm.CoreSVC`.
    degree : int, default=3
    coef0 : float, default=0.0
    epsilon : float, default=1e-3
        Coverage threshold (squared kernel distance) of the approximate extreme
        points.  ``epsilon -> 0`` keeps every (distinct) point with weight 1, i.e. SVC.
    P : int, default=100000
        First-level block size.
    V : int, default=1000
        Segment size; kernel blocks of at most ``V x V`` are formed.
    segmentation : {'fls2', 'fls1'}, default='fls2'
        First-level segregation: FLS2 (recursive median split of kernel distances)
        or FLS1 (blocks in data order; for ordered/homogeneous data).
    class_weight : dict, 'balanced' or None, default=None
        Multiplies C per class (on top of beta).
    cache_representative_set : bool, default=True
        Reuse a representative set derived earlier in this process for the same
        data and parameters.
    tol, cache_size, shrinking, max_iter :
        Passed to the final ``SVC`` (defaults 1e-3, 200 MB, True, -1).
    decision_function_shape : {'ovr', 'ovo'}, default='ovr'
    break_ties : bool, default=False
        As in ``SVC``: more than two classes are handled one-vs-one (each class's
        representatives are the same in every pair, so one set serves all pairs).
    n_jobs : int or None, default=None
        Threads for DeriveRS (segments in parallel; None means 1), at most the
        process's kernel threads (its cores, or a thread limit).  The final SVC
        is single-threaded.
    random_state : int, RandomState or None, default=None
        Unused by the deterministic DeriveRS; kept for API compatibility.

    Attributes
    ----------
    classes_, support_, support_vectors_, n_support_, dual_coef_, intercept_, fit_status_, n_iter_ :
        As in ``SVC``; ``support_`` indexes the training data.
    svm_ : SVC
        The fitted SVC on the representative set.
    representative_set_ : coresvm.aesvm.RepresentativeSet
        Indices, beta, residuals, segments and counts of DeriveRS.
    rs_size_per_class_ : ndarray of shape (n_classes,)
        Number of representatives per class.
    rs_fraction_ : float
        ``M / N``.
    derive_time_ : float
        Seconds DeriveRS took (when the set was computed; see ``rs_from_cache_``).
    rs_from_cache_ : bool
        Whether the representative set came from the cache.
    max_residual_ : float
        Largest squared kernel distance from a training point to its
        representation (``<= epsilon``).
    gamma_ : float
        The resolved kernel width.
    """

    checks_iteration_cap = False  # max_iter is SVC's (-1: no limit), passed on to it

    def __init__(
        self,
        C: float = 1.0,
        kernel: str = "rbf",
        gamma: float | str = "scale",
        degree: int = 3,
        coef0: float = 0.0,
        epsilon: float = aesvm.DEFAULT_EPSILON,
        P: int = aesvm.DEFAULT_P,
        V: int = aesvm.DEFAULT_V,
        segmentation: str = "fls2",
        class_weight=None,
        cache_representative_set: bool = True,
        tol: float = 1e-3,
        cache_size: float = 200,
        shrinking: bool = True,
        max_iter: int = -1,
        decision_function_shape: str = "ovr",
        break_ties: bool = False,
        n_jobs: int | None = None,
        random_state=None,
    ):
        self.C = C
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.epsilon = epsilon
        self.P = P
        self.V = V
        self.segmentation = segmentation
        self.class_weight = class_weight
        self.cache_representative_set = cache_representative_set
        self.tol = tol
        self.cache_size = cache_size
        self.shrinking = shrinking
        self.max_iter = max_iter
        self.decision_function_shape = decision_function_shape
        self.break_ties = break_ties
        self.n_jobs = n_jobs
        self.random_state = random_state

    # ------------------------------------------------------------------ checks
    def _check_params(self) -> None:
        check_positive("C", self.C)
        self._check_shared_params()  # kernel, tol, cache_size
        if isinstance(self.epsilon, bool) or not isinstance(self.epsilon, (int, float, np.floating)) or not (
            np.isfinite(self.epsilon) and self.epsilon >= 0
        ):
            raise ValueError(f"epsilon must be a finite number >= 0; got {self.epsilon!r}")
        check_integer("P", self.P)
        check_integer("V", self.V)
        if self.V > self.P:
            raise ValueError(f"V must be <= P; got P={self.P!r}, V={self.V!r}")
        check_choice("segmentation", self.segmentation, aesvm.SEGMENTATIONS)
        check_choice("decision_function_shape", self.decision_function_shape, ("ovr", "ovo"))

    # --------------------------------------------------------------------- fit
    @unfitted_on_failure
    @within_process_thread_limit
    def fit(self, X, y, sample_weight=None):
        """Derive the representative set (or reuse it) and train the weighted SVM on it.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training vectors (dense, CSR, a memory-mapped ``.npy`` array or a Zarr array, which is first
            decompressed into a temporary ``.npy`` map).
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), default=None
            Per-sample multipliers of C.  They enter beta (``beta_t = sum_i
            s_i gamma^i_t``); zero means "ignore this sample".

        Returns
        -------
        self
        """
        self._check_params()
        X, y = self._validated_training_data(X, y)
        sample_weight = check_sample_weight(sample_weight, X)
        rows = np.flatnonzero(sample_weight > 0)  # not empty: check_sample_weight rejects all-zero weights
        classes, y_index = np.unique(y, return_inverse=True)
        self._check_two_classes(classes, y_index[rows])
        # DeriveRS and SVC read the data at random: a memory-mapped X is read into memory once
        X_kept = read_rows(X, rows) if is_memory_mapped(X) or len(rows) < X.shape[0] else X
        self._set_kernel(resolve_gamma(self.gamma, X_kept))
        check_kernel_range(X_kept, self._kernel_spec, type(self).__name__)  # before solving: no silent garbage

        rs = self._representative_set(X_kept, y_index[rows], sample_weight[rows])
        order = np.argsort(rs.indices)  # train SVC on the rows in data order, as SVC would see them
        rep_rows = rows[rs.indices[order]]
        weights = rs.beta[order] * class_weight_per_sample(self.class_weight, classes, y[rep_rows])
        self.svm_ = SVC(
            C=float(self.C), kernel=self.kernel, gamma=self.gamma_, degree=int(self.degree), coef0=float(self.coef0),
            tol=float(self.tol), cache_size=float(self.cache_size), shrinking=bool(self.shrinking),
            max_iter=int(self.max_iter), decision_function_shape=self.decision_function_shape,
            break_ties=bool(self.break_ties),
        )
        self.svm_.fit(_int32_csr(X_kept[rs.indices[order]]), y[rep_rows], sample_weight=weights)
        self._sparse_fit = sp.issparse(X)

        self.classes_ = self.svm_.classes_
        self.support_ = rep_rows[self.svm_.support_]
        self.support_vectors_ = self.svm_.support_vectors_
        self.n_support_ = self.svm_.n_support_
        self.dual_coef_ = self.svm_.dual_coef_
        self.intercept_ = self.svm_.intercept_
        self.fit_status_ = self.svm_.fit_status_
        self.n_iter_ = self.svm_.n_iter_
        self.representative_set_ = rs
        self.rs_size_per_class_ = rs.size_per_class.copy()
        self.rs_fraction_ = rs.fraction
        self.derive_time_ = rs.derive_time
        self.max_residual_ = rs.max_residual
        return self

    def _representative_set(self, X, y_index: np.ndarray, sample_weight: np.ndarray) -> aesvm.RepresentativeSet:
        """DeriveRS on the kept rows, or the cached result for identical inputs."""
        key = None
        if self.cache_representative_set:
            params = (self._kernel_spec, float(self.epsilon), int(self.P), int(self.V), self.segmentation)
            key = data_fingerprint(X, y_index, sample_weight) + repr(params)
            found = _cache_get(key)
            if found is not None:
                self.rs_from_cache_ = True
                return found
        # called through the module so that tests can count the calls
        rs = aesvm.derive_representative_set(
            X, y_index, self._kernel_spec, epsilon=float(self.epsilon), P=int(self.P), V=int(self.V),
            segmentation=self.segmentation, sample_weight=sample_weight, n_jobs=self.n_jobs,
        )
        self.rs_from_cache_ = False
        if key is not None:
            _cache_put(key, rs)
        return rs

    # ----------------------------------------------------------------- predict
    def _apply(self, method: str, X):
        """Call ``svm_.<method>``; SVC rejects sparse input on a dense fit, so densify in blocks."""
        X = self._validated_prediction_data(X)
        call = getattr(self.svm_, method)
        if is_memory_mapped(X):
            return self._in_row_blocks(call, X, len(self.support_))
        if sp.issparse(X) and not self._sparse_fit:
            parts = [call(X[start : start + PREDICT_BLOCK_ROWS].toarray())
                     for start in range(0, X.shape[0], PREDICT_BLOCK_ROWS)]
            return np.concatenate(parts, axis=0)
        return call(_int32_csr(X))

    def decision_function(self, X) -> np.ndarray:
        """``SVC.decision_function`` of the model trained on the representative set."""
        return self._apply("decision_function", X)

    def predict(self, X) -> np.ndarray:
        """Class labels, as ``SVC.predict``."""
        return self._apply("predict", X)
