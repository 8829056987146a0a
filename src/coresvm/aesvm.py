"""AESVM: the representative set of approximate extreme points (DeriveRS, Nandan et al. 2014).

Nandan, Khargonekar & Talathi, "Fast SVM Training Using Approximate Extreme
Points" (Nandan et al. 2014, JMLR).  The training set is cut, per class, into small
segments; in each segment a few points (the *approximate extreme points*) are
kept whose kernel-space convex hull covers every other point of the segment to
within ``eps`` in squared distance (Sec. 3.1, eqs. 6-9).  Each kept point ``x_t``
gets the weight ``beta_t = sum_i gamma^i_t`` (eq. 10), the total convex weight
the segment's points put on it, and the SVM is then trained on the kept points
alone with per-sample bounds ``C' * beta_t`` (eq. 18, see :mod:`coresvm.aesvc`).

The steps, each a function named after the paper:

* :func:`fls1`, :func:`fls2` -- first-level segregation into blocks of at most
  ``P`` points (Sec. 4.1, Algs. FLS1 and FLS2);
* :func:`sls` -- second-level segregation into segments of at most ``V`` points
  (Sec. 4.1, Alg. SLS);
* :func:`sphere_set`, :func:`sphere_sort`, :func:`check_point` and
  :func:`derive_ae` -- the approximate extreme points of one segment (Sec. 4.2,
  Alg. DeriveAE);
* :func:`derive_representative_set` -- DeriveRS (Sec. 4, Alg. DeriveRS).

All kernel values come from :mod:`coresvm.kernels`; the only kernel matrices
formed are ``|segment| x |segment|`` blocks (at most ``V x V``) and one column of
a block (at most ``P`` values) at a time, never an ``N x N`` matrix.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from .kernels import KernelSpec, kernel_block, kernel_diagonal, map_on_kernel_threads, squared_norms
from .problem import SimplexProblem
from .solvers.core_steps import (
    NO_HELPER,
    NO_LINEAR_TERM,
    ROWS_STORED,
    STOP_COVERAGE,
    STOP_RELATIVE_GAP,
    inner_solve,
)
from .solvers.driver import SolverOptions, run_engine
from .solvers.engine import SECOND_MDM

DEFAULT_EPSILON = 1e-3  # Nandan et al. 2014 Sec. 6: eps = 1e-3, P = 1e5, V = 1e3, FLS2
DEFAULT_P = 100_000
DEFAULT_V = 1_000
SEGMENTATIONS = ("fls2", "fls1")

# CheckPoint (a simplex QP per point): iteration cap and the duality-gap target used when
# the mu of a covered point is refined (step 6).  A check that hits the cap undecided is
# treated as "not covered", which can only add representatives, never break the eps bound.
CHECK_MAX_ITER = 2_000
CHECK_GAP_FRACTION = 1.0  # refine a covered point's mu until it is within eps of the optimum
# SphereSet (the segment's minimum enclosing ball): relative duality gap and iteration cap.
MEB_TOL = 1e-4
MEB_MAX_ITER = 20_000
MEB_SOLVERS = ("dense", "engine")
BLOCK_ROWS = 65_536  # rows per kernel block when distances to one point are computed


# --------------------------------------------------------------------------
# Result record
# --------------------------------------------------------------------------


@dataclass
class RepresentativeSet:
    """The output of DeriveRS: the representative set ``X*`` and its weights.

    Attributes
    ----------
    indices : ndarray of shape (M,)
        Rows of the input ``X`` that are representatives, grouped by class, then
        by segment.
    beta : ndarray of shape (M,)
        ``beta_t = sum_i s_i gamma^i_t`` (Nandan et al. 2014 eq. 10, with sample weights
        ``s_i``; all ``s_i = 1`` gives the paper's beta, which sums to ``N`` per class).
    labels : ndarray of shape (M,)
        The label of each representative (as given in ``y``).
    segment_of : ndarray of shape (N,)
        The segment of every input row (segments never mix classes).
    residual : ndarray of shape (N,)
        ``||phi(x_i) - sum_t gamma^i_t phi(x_t)||^2`` for every input row: the
        squared kernel distance from the point to the representation actually
        used (0 for representatives).  Every entry is ``<= epsilon``.
    classes : ndarray
        The distinct labels, sorted.
    size_per_class, n_per_class : ndarray of shape (n_classes,)
        Representatives and input rows per class.
    derive_time : float
        Seconds spent in DeriveRS.
    counts : dict
        Totals over all segments: ``segments``, ``sphere_set`` (points on the
        minimum enclosing balls), ``psi`` (points left uncovered by the
        SphereSort pass), ``pruned`` (candidates dropped by the pruning pass),
        ``promoted`` (points made representatives because no eps-representation
        was found in the final pass -- the published algorithm would have kept
        them with a residual above eps), ``capped`` (SphereSort-pass CheckPoints
        that hit their iteration cap undecided and so joined ``Psi``).
    params : dict
        epsilon, P, V, segmentation, kernel, meb_solver, enforce_coverage.
    """

    indices: np.ndarray
    beta: np.ndarray
    labels: np.ndarray
    segment_of: np.ndarray
    residual: np.ndarray
    classes: np.ndarray
    size_per_class: np.ndarray
    n_per_class: np.ndarray
    derive_time: float
    counts: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)

    @property
    def max_residual(self) -> float:
        """Largest squared kernel distance of a point to its representation."""
        return float(self.residual.max()) if self.residual.size else 0.0

    @property
    def fraction(self) -> float:
        """``M / N``."""
        return len(self.indices) / max(len(self.segment_of), 1)

    @property
    def nbytes(self) -> int:
        return int(sum(a.nbytes for a in (self.indices, self.beta, self.labels, self.segment_of, self.residual)))


# --------------------------------------------------------------------------
# Kernel distances
# --------------------------------------------------------------------------


def kernel_distances_to_point(X, rows: np.ndarray, point: int, spec: KernelSpec, norms: np.ndarray,
                              diag: np.ndarray) -> np.ndarray:
    """``||phi(x_i) - phi(x_point)||^2 = k_ii + k_pp - 2 k_ip`` for ``i`` in ``rows``.

    Evaluated in blocks of rows, so only one column of at most ``BLOCK_ROWS``
    kernel values exists at a time (Nandan et al. 2014 FLS2 step 1, SLS step c).
    """
    out = np.empty(len(rows))
    anchor = X[point : point + 1]
    anchor_norm = norms[point : point + 1]
    for start in range(0, len(rows), BLOCK_ROWS):
        part = rows[start : start + BLOCK_ROWS]
        k = kernel_block(X[part], anchor, spec, norms[part], anchor_norm)[:, 0]
        out[start : start + len(part)] = diag[part] + diag[point] - 2.0 * k
    np.maximum(out, 0.0, out=out)
    return out


# --------------------------------------------------------------------------
# First- and second-level segregation (Nandan et al. 2014 Secs. 4.1-4.2)
# --------------------------------------------------------------------------


def fls1(rows: np.ndarray, P: int) -> list[np.ndarray]:
    """FLS1: consecutive blocks of ``P`` rows in the data's own order (Alg. FLS1).

    Parameters
    ----------
    rows : ndarray of int
        The rows of one class, in data order.
    P : int
        Block size.

    Returns
    -------
    list of ndarray
        ``ceil(len(rows) / P)`` blocks, all of size ``P`` except the last.
    """
    rows = np.asarray(rows, dtype=np.int64)
    return [rows[start : start + P] for start in range(0, len(rows), P)]


def fls2(X, rows: np.ndarray, P: int, spec: KernelSpec, norms: np.ndarray | None = None,
         diag: np.ndarray | None = None, min_half: int | None = None) -> list[np.ndarray]:
    """FLS2: recursive median split by kernel distance to the block's first point (Alg. FLS2).

    A block of more than ``P`` rows is split into the half nearer to its first
    row (squared kernel distance below the median, steps 1-3) and the rest,
    and each half is split again while it has more than ``P`` rows (steps 4-5):
    an incomplete binary tree of depth ``O(log2(N/P))`` with ``O(N)`` work per
    level.  The median is found by ``numpy.argpartition`` (introselect: linear
    time, falling back to median-of-medians, the paper's BFPRT, when
    quickselect makes poor progress).

    The paper's first call always halves (its test ``|X'|/2 <= P`` comes after
    the split), so a class of at most ``P`` rows still becomes two blocks; this
    is followed whenever each half keeps at least ``min_half`` rows (DeriveRS
    passes ``V``, so the split never shrinks the segments SLS can form; with
    ``min_half=None`` a class of at most ``P`` rows is left whole).  Halving
    also halves SLS's ``O(|block|^2 / V)`` work on such a class.

    Returns
    -------
    list of ndarray
        Blocks of at most ``P`` rows (and more than ``P / 2 - 1`` when the
        class has more than ``P``), in the tree's left-to-right order.
    """
    rows = np.asarray(rows, dtype=np.int64)
    norms = squared_norms(X) if norms is None else norms
    diag = kernel_diagonal(X, spec, norms) if diag is None else diag
    blocks: list[np.ndarray] = []
    stack = [rows]
    first = min_half is not None and len(rows) // 2 >= max(int(min_half), 1)
    while stack:
        block = stack.pop()
        if len(block) <= P and not first:
            if len(block):
                blocks.append(block)
            continue
        distance = kernel_distances_to_point(X, block, block[0], spec, norms, diag)
        first = False
        half = len(block) // 2
        order = np.argpartition(distance, half)
        stack.append(block[order[half:]])  # X^2: d_i >= d_k, processed after X^1
        stack.append(block[order[:half]])  # X^1: the |X'|/2 nearest
    return blocks


def sls(X, block: np.ndarray, V: int, spec: KernelSpec, norms: np.ndarray | None = None,
        diag: np.ndarray | None = None) -> list[np.ndarray]:
    """SLS: peel off the ``V`` nearest rows of a moving anchor (Alg. SLS).

    The first anchor is the row of largest input-space norm (step b: for the
    Gaussian kernel all points are equally far from the origin in kernel space).
    Its ``V`` nearest rows in kernel distance (selected in linear time, steps
    c-e) form a segment; the ``(V+1)``-th nearest becomes the next anchor (step h)
    and the process repeats on the rest until at most ``V`` rows remain, which
    form the last segment (step i).

    Returns
    -------
    list of ndarray
        Segments of exactly ``V`` rows, and a last one of at most ``V``.
    """
    block = np.asarray(block, dtype=np.int64)
    if len(block) <= V:
        return [block] if len(block) else []
    norms = squared_norms(X) if norms is None else norms
    diag = kernel_diagonal(X, spec, norms) if diag is None else diag
    anchor = block[int(np.argmax(norms[block]))]
    rest = block
    segments = []
    while len(rest) > V:
        distance = kernel_distances_to_point(X, rest, anchor, spec, norms, diag)
        order = np.argpartition(distance, V)
        segments.append(rest[order[:V]])
        anchor = rest[order[V]]
        rest = rest[order[V:]]
    segments.append(rest)
    return segments


# --------------------------------------------------------------------------
# The simplex QPs of CheckPoint and SphereSet, on a precomputed kernel block, by the core set's inner solve
# --------------------------------------------------------------------------

# The linear cost of a candidate left out of one CheckPoint (DeriveAE step 4): far above any squared kernel
# distance, so it is never the toward vertex and never gains weight; finite, so its ``alpha * G`` stays 0.
EXCLUDED = 1e300


# The QPs' Gram starts this many points wide and doubles when full.  Sized to the candidate sets (about 35 points
# on the checkerboard), not to the segment: a V x V work array per segment (8 MB at V = 1000) made glibc return
# its heap top to the system after every segment, so the next segment's kernel block was page-faulted in
# afresh (44,000 minor faults and 0.3 s of a 100k-point checkerboard fit).  Compact rows also keep the
# candidates' Gram within a few pages.
GRAM_START = 64


@njit(cache=True, nogil=True)
def _append_to_gram(K, rows, k, W, diag_w):
    """Extend ``W[:k, :k] = K[rows[:k], rows[:k]]`` by row and column ``k`` (the point ``rows[k]``).

    Both from row ``rows[k]`` of the symmetric ``K``: its column would cost a cache line per value.  Returns
    ``W``, or a copy twice as wide when row ``k`` does not fit.
    """
    if k >= W.shape[0]:
        width = max(k + 1, min(2 * k, K.shape[0]))
        wider = np.empty((width, width))
        for i in range(k):  # loops, not a slice assignment: that compiles several seconds longer
            for j in range(k):
                wider[i, j] = W[i, j]
        W = wider
    r = rows[k]
    for j in range(k + 1):
        value = K[r, rows[j]]
        W[k, j] = value
        W[j, k] = value
    diag_w[k] = K[r, r]
    return W


@njit(cache=True, nogil=True)
def _gather_gram(K, rows, n, W, diag_w):
    """``W[:n, :n] = K[rows[:n], rows[:n]]`` and ``diag_w[:n]`` its diagonal; returns ``W`` (widened if needed)."""
    for k in range(n):
        W = _append_to_gram(K, rows, k, W, diag_w)
    return W


@njit(cache=True, nogil=True)
def _coverage_qp(W, diag_w, n, lin, const, eps, tol, max_iter, alpha, G, active):
    """Minimize ``f(a) = a' H a + lin' a + const`` over the unit simplex, ``H = W[:n, :n]``, until it is decided.

    Pairwise Frank-Wolfe (Frandi et al. 2015 Sec. 2.4) by the core set's
    :func:`~coresvm.solvers.core_steps.inner_solve` (rule
    :data:`~coresvm.solvers.core_steps.STOP_COVERAGE`): from the vertex of least ``f``, toward vertex ``s =
    argmin G`` (the first), partner ``v = argmax G`` over the active points (MDM, the first), step along ``e_s
    - e_v`` with :func:`~coresvm.solvers.steps.pairwise_direction` and the exact line search
    :func:`~coresvm.solvers.steps.clipped_step`, clipped at ``a_v`` (so weights reach exactly 0).  ``G`` is the
    half gradient with the linear term folded in, ``G = H a + lin / 2``, kept up to date with one row of ``W``
    per vertex, ``O(n)`` per step.  The Frank-Wolfe gap ``2 (a'G - G_s)`` bounds ``f(a) - f*`` (Frandi et al.
    2015 eq. 3), so (:func:`~coresvm.solvers.core_steps.coverage_decided`):

    * ``f(a) - gap > eps``: no point of the simplex reaches ``eps``; stop, not covered;
    * ``f(a) <= eps`` and ``gap <= tol``: stop, covered (``tol = inf``: as soon as ``f(a) <= eps``);
    * ``eps = inf``: solve to the absolute gap ``tol``.

    A coverable point is never rejected because the tolerance was reached first (only ``max_iter`` can do
    that).  Returns ``(f, n_iter)`` with ``f`` recomputed exactly from the final weights (no drift of the
    incremental ``G``); ``alpha[:n]`` holds them.  ``active``: int work space of ``n`` entries.
    """
    best = 0
    best_value = np.inf
    for i in range(n):
        value = diag_w[i] + lin[i]
        if value < best_value:
            best_value = value
            best = i
    for i in range(n):
        alpha[i] = 0.0
        G[i] = W[best, i] + 0.5 * lin[i]
    alpha[best] = 1.0
    # int64 codes, not literals: Numba would compile inner_solve once more for Literal[int] arguments;
    # lin[:0], an empty inv_c: no L2-SVM duality gap
    n_iter, _ = inner_solve(W, alpha, G, diag_w, n, 0.0, np.int64(SECOND_MDM), 0.0, 1.0, tol, max_iter, np.inf,
                            lin[:0], np.int64(STOP_COVERAGE), lin, const, eps, ROWS_STORED, 1, None)
    # over the few points with weight (a list, not a test of every alpha_j for each of them: 5% of DeriveAE)
    n_active = 0
    for i in range(n):
        if alpha[i] > 0.0:
            active[n_active] = i
            n_active += 1
    f = const
    for p in range(n_active):
        i = active[p]
        acc = 0.0
        for q in range(n_active):
            acc += alpha[active[q]] * W[i, active[q]]
        f += alpha[i] * (acc + lin[i])
    return f, n_iter


@njit(cache=True, nogil=True)
def _check_point(K, point, rows, n, W, diag_w, eps, tol, max_iter, alpha, G, lin, active):
    """CheckPoint on a kernel block: squared distance from ``phi(x_point)`` to ``conv(phi(rows[:n]))``.

    ``min_mu mu' K_CC mu - 2 mu' k_Cx + k_xx`` over the simplex (Nandan et al. 2014
    Sec. 4.2, the CheckPoint QP; its first term is ``K(x_i, x_i)``); ``W[:n, :n]`` holds ``K_CC``.
    """
    for i in range(n):
        lin[i] = -2.0 * K[point, rows[i]]  # row point of the symmetric K: cache lines shared by the values
    return _coverage_qp(W, diag_w, n, lin, K[point, point], eps, tol, max_iter, alpha, G, active)


def check_point(K: np.ndarray, point: int, candidates: np.ndarray, eps: float = DEFAULT_EPSILON,
                decide: bool = True, gap_tol: float = 1e-12,
                max_iter: int = CHECK_MAX_ITER) -> tuple[bool, float, np.ndarray]:
    """CheckPoint(x, Psi): is ``phi(x)`` within ``eps`` of the convex hull of ``phi(Psi)``? (Nandan et al. 2014, 4.3)

    Solves ``min_mu ||phi(x) - sum_t mu_t phi(x_t)||^2`` over the unit simplex
    (eq. 6) by pairwise Frank-Wolfe on the kernel block ``K[Psi, Psi]``: the core set's inner solve
    (:func:`~coresvm.solvers.core_steps.inner_solve`) with the linear term ``-2 k_Cx`` and the stopping rule
    :data:`~coresvm.solvers.core_steps.STOP_COVERAGE`.

    Parameters
    ----------
    K : ndarray of shape (n, n)
        Kernel matrix of the segment.
    point : int
        Row of ``K`` of the point ``x``.
    candidates : ndarray of int
        Rows of ``K`` of the candidate set ``Psi``.
    eps : float
        The coverage threshold on the squared distance.
    decide : bool
        Stop as soon as the answer is certain (``f(mu) <= eps``, or the duality
        gap shows the minimum is above ``eps``).  With False the QP is solved
        until the duality gap is below ``gap_tol``.
    gap_tol : float
        Absolute duality-gap target.
    max_iter : int

    Returns
    -------
    covered : bool
        Whether the returned ``mu`` achieves squared distance ``<= eps``.
    distance : float
        The squared distance achieved by ``mu`` (an upper bound on the minimum).
    mu : ndarray of shape (len(candidates),)
    """
    K = np.ascontiguousarray(K, dtype=np.float64)
    cand = np.ascontiguousarray(candidates, dtype=np.int64)
    n = len(cand)
    if n == 0:
        raise ValueError("check_point needs at least one candidate")
    W, diag_w = np.empty((n, n)), np.empty(n)
    W = _gather_gram(K, cand, n, W, diag_w)
    alpha, G, lin, active = np.zeros(n), np.zeros(n), np.zeros(n), np.empty(n, dtype=np.int64)
    # deciding stops once the answer is known; otherwise eps = inf leaves the gap alone to stop the solve
    stop_eps, stop_gap = (float(eps), np.inf) if decide else (np.inf, float(gap_tol))
    f, _ = _check_point(K, int(point), cand, n, W, diag_w, stop_eps, stop_gap, int(max_iter), alpha, G, lin,
                        active)
    return bool(f <= eps), float(max(f, 0.0)), alpha


def sphere_set(K: np.ndarray, solver: str = "dense", X=None, spec: KernelSpec | None = None,
               tol: float = MEB_TOL, seed: int = 0) -> np.ndarray:
    """SphereSet: the weights of the segment's minimum enclosing ball in kernel space (Sec. 4.2).

    The MEB (hard-margin SVDD) is the simplex QP ``min_a a'Ka - a'diag(K)``
    (Frandi et al. 2013 eq. 18 with ``lam = 1``); its support ``{a_i > 0}`` are the points
    on the ball's surface, and its centre is ``sum_i a_i phi(x_i)``.

    Parameters
    ----------
    K : ndarray of shape (n, n)
        Kernel matrix of the segment.
    solver : {'dense', 'engine'}
        'dense' runs the core set's inner solve
        (:func:`~coresvm.solvers.core_steps.inner_solve`: pairwise MDM steps, ``lam = 1``) on ``K``,
        which the segment needs anyway.  'engine' builds a
        :class:`~coresvm.problem.SimplexProblem` (lam=1, no bias, C huge) and
        solves it with :func:`~coresvm.solvers.driver.run_engine` (swap steps,
        full search), which recomputes kernel columns from ``X``.  'dense' is the
        default because it is faster on segments of ``V <= 1000`` points: the
        engine's per-call set-up (column cache, problem arrays) and kernel
        re-evaluation cost more than the whole solve (measured on 1000-point
        segments of ijcnn1 and the checkerboard: 2-5 ms per segment dense,
        4-12 ms engine, same radius).
    X, spec : the segment's rows and kernel (engine only).
    tol : float
        Relative duality gap ``gap / R^2`` at which the solve stops.
    seed : int
        Random initial points of the engine.

    Returns
    -------
    ndarray of shape (n,)
        MEB weights ``a`` (on the simplex).
    """
    n = K.shape[0]
    if solver == "engine":
        problem = SimplexProblem(X, np.ones(n), np.full(n, 1e12), spec, bias=False, lam=1.0)
        options = SolverOptions(step_rule="swap", sample_size=0, tol=tol, seed=seed, max_iter=MEB_MAX_ITER,
                                cache_bytes=n * n * 8 + 16, n_init=min(20, n))
        result = run_engine(problem, options)
        alpha = np.zeros(n)
        alpha[result.support] = result.alpha
        return alpha
    if solver != "dense":
        raise ValueError(f"solver must be one of {MEB_SOLVERS}; got {solver!r}")
    K = np.ascontiguousarray(K, dtype=np.float64)
    alpha = np.zeros(n)
    alpha[0] = 1.0  # every vertex has f = K_ii - K_ii = 0: start at the first
    G = K[0].copy()  # Q a with Q = K (no bias, no 1/C term)
    inner_solve(K, alpha, G, np.diag(K).copy(), n, 1.0, SECOND_MDM, 0.0, 1.0, float(tol), MEB_MAX_ITER, np.inf,
                np.zeros(0), STOP_RELATIVE_GAP, NO_LINEAR_TERM, 0.0, 0.0, ROWS_STORED, 1, NO_HELPER)
    return alpha


def sphere_sort(K: np.ndarray, alpha: np.ndarray, points: np.ndarray) -> np.ndarray:
    """SphereSort: ``points`` in descending squared kernel distance from the MEB centre (Sec. 4.2).

    ``||phi(x_i) - c||^2 = K_ii - 2 (K a)_i + a'Ka`` with ``c = sum_j a_j phi(x_j)``.
    """
    support = np.flatnonzero(alpha)  # the MEB is sparse: only its support's columns are needed
    Ka = K[:, support] @ alpha[support]
    distance = np.diag(K) - 2.0 * Ka + alpha @ Ka
    return points[np.argsort(-distance[points], kind="stable")]


# --------------------------------------------------------------------------
# DeriveAE (Nandan et al. 2014 Sec. 4.3)
# --------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _derive_ae(K, on_sphere, order, eps, weights, max_iter, gap_fraction, store_gamma, gamma, enforce):
    """DeriveAE steps 1-7 on one segment's kernel block, with the eps-coverage enforced.

    ``on_sphere`` marks SphereSet (step 1), ``order`` is SphereSort of the rest
    (step 2).  ``enforce=False`` runs the published steps 4 and 6 instead (all of
    Psi tested against the original candidates; step-6 weights kept whatever
    their residual) -- only for measuring what the fixes cost.
    Returns ``(is_rep, beta, residual, n_psi, n_pruned, n_promoted, n_capped)``.
    """
    n = K.shape[0]
    cand = np.empty(n, dtype=np.int64)
    W = np.empty((min(n, GRAM_START), min(n, GRAM_START)))  # K[cand, cand] (steps 3-4), then K[reps, reps] (5-7)
    diag_w = np.empty(n)
    alpha = np.zeros(n)
    G = np.zeros(n)
    lin = np.zeros(n)
    active = np.empty(n, dtype=np.int64)  # the QPs' points with weight
    n_cand = np.int64(0)  # not a literal 0: the callees would be compiled for Literal[int](0) as well
    for i in range(n):
        if on_sphere[i]:
            cand[n_cand] = i
            W = _append_to_gram(K, cand, n_cand, W, diag_w)
            n_cand += 1
    n_sphere = n_cand
    # Step 3: a point not eps-covered by X* u Psi (farthest from the centre first) joins Psi.
    n_capped = 0
    for p in range(order.shape[0]):
        x = order[p]
        f, n_iter = _check_point(K, x, cand, n_cand, W, diag_w, eps, np.inf, max_iter, alpha, G, lin, active)
        if f > eps:
            cand[n_cand] = x
            W = _append_to_gram(K, cand, n_cand, W, diag_w)
            n_cand += 1
            if n_iter >= max_iter:
                n_capped += 1
    n_psi = n_cand - n_sphere
    # Step 4, pruned sequentially (fix of caveat (a)): a Psi point covered by the candidates
    # still kept leaves at once, so two points can never justify each other's removal.  The QP
    # runs on all the candidates in their order, the ones left out at the cost EXCLUDED: no Gram to
    # gather per point, and the same vertices (first min / first max) as on the others alone.
    keep = np.ones(n_cand, dtype=np.bool_)
    n_pruned = 0
    for p in range(n_sphere, n_cand):
        x = cand[p]
        n_others = 0
        for q in range(n_cand):
            if q != p and (keep[q] or not enforce):
                lin[q] = -2.0 * K[x, cand[q]]
                n_others += 1
            else:
                lin[q] = EXCLUDED
        if n_others == 0:
            continue
        f, _ = _coverage_qp(W, diag_w, n_cand, lin, K[x, x], eps, np.inf, max_iter, alpha, G, active)
        if f <= eps:
            keep[p] = False
            n_pruned += 1
    is_rep = np.zeros(n, dtype=np.bool_)
    reps = np.empty(n, dtype=np.int64)
    n_reps = np.int64(0)
    for q in range(n_cand):
        if keep[q]:
            reps[n_reps] = cand[q]
            n_reps += 1
            is_rep[cand[q]] = True
    W = _gather_gram(K, reps, n_reps, W, diag_w)
    # Steps 5-7: every other point gets its convex weights mu over X* (refined to a duality gap
    # of gap_fraction * eps); a point whose residual stays above eps is promoted into X*
    # (fix of caveat (b)), so every residual is <= eps.  Points are taken farthest-first.
    beta = np.zeros(n)
    residual = np.zeros(n)
    n_promoted = 0
    gap_target = gap_fraction * eps
    for p in range(order.shape[0]):  # SphereSet points are never pruned: they are all in X*
        x = order[p]
        if is_rep[x]:
            continue
        f, _ = _check_point(K, x, reps, n_reps, W, diag_w, eps, gap_target, max_iter, alpha, G, lin, active)
        if f <= eps or not enforce:
            residual[x] = max(f, 0.0)
            for q in range(n_reps):
                if alpha[q] > 0.0:
                    beta[reps[q]] += weights[x] * alpha[q]
                    if store_gamma:
                        gamma[x, reps[q]] = alpha[q]
        else:
            reps[n_reps] = x
            W = _append_to_gram(K, reps, n_reps, W, diag_w)
            n_reps += 1
            is_rep[x] = True
            n_promoted += 1
    for i in range(n):
        if is_rep[i]:
            beta[i] += weights[i]  # a representative represents itself with weight 1 (step 5)
            if store_gamma:
                gamma[i, i] = 1.0
    return is_rep, beta, residual, n_psi, n_pruned, n_promoted, n_capped


@dataclass
class SegmentResult:
    """DeriveAE on one segment: local indices of the representatives and their weights."""

    representatives: np.ndarray  # positions within the segment
    beta: np.ndarray  # (n_reps,)
    residual: np.ndarray  # (n,) per point of the segment
    n_sphere: int
    n_psi: int
    n_pruned: int
    n_promoted: int
    gamma: np.ndarray | None = None  # (n, n) convex weights, column = segment position (tests)
    n_capped: int = 0  # step-3 CheckPoints that hit max_iter undecided (counted as "not covered")


def derive_ae(K: np.ndarray, eps: float = DEFAULT_EPSILON, weights: np.ndarray | None = None,
              meb_solver: str = "dense", X=None, spec: KernelSpec | None = None, seed: int = 0,
              return_gamma: bool = False, max_iter: int = CHECK_MAX_ITER,
              enforce_coverage: bool = True) -> SegmentResult:
    """DeriveAE: the approximate extreme points of one segment and their weights (Nandan et al. 2014 Sec. 4.3).

    1. ``X* = SphereSet(S)``: the points on the segment's minimum enclosing ball.
    2. ``zeta = SphereSort(S minus X*)``: the rest, farthest from the centre first.
    3. Each point of ``zeta`` not eps-covered by ``X* u Psi`` (CheckPoint) joins ``Psi``.
    4. Pruning: a point of ``Psi`` covered by the other candidates is dropped.
    5-7. Every other point ``x_i`` gets its CheckPoint weights ``mu^i`` over ``X*``;
       ``beta_t = sum_i s_i mu^i_t`` (eq. 10; representatives count themselves).

    The published algorithm does not guarantee its own premise ``||tau_i||^2 <=
    eps`` (eq. 9): step 4 tests all of ``Psi`` against the *original*
    candidates, so two points that cover each other can both be dropped, and
    step 7 uses ``mu^i`` whatever its residual.  Here step 4 is sequential
    (a dropped point is no longer available to cover later ones) and, in step 7,
    a point whose residual stays above ``eps`` is promoted into ``X*``.  So on
    return **every point of the segment is within eps** (squared kernel distance)
    of the convex hull of ``X*``, through the very weights that define beta.

    Parameters
    ----------
    K : ndarray of shape (n, n)
        The segment's kernel matrix (symmetric, float64).
    eps : float
        Coverage threshold on the squared kernel distance (>= 0).
    weights : ndarray of shape (n,), optional
        Sample weights ``s_i`` (default 1).
    meb_solver : {'dense', 'engine'}
        See :func:`sphere_set`; 'engine' also needs the segment's ``X`` and ``spec``.
    seed : int
    return_gamma : bool
        Also return the ``n x n`` matrix of convex weights (tests).
    max_iter : int
        Iteration cap of each CheckPoint.
    enforce_coverage : bool, default=True
        False runs the published steps 4 and 6 unchanged (no guarantee); it
        exists only to measure what the two fixes cost.

    Returns
    -------
    SegmentResult
    """
    K = np.ascontiguousarray(K, dtype=np.float64)
    n = K.shape[0]
    weights = np.ones(n) if weights is None else np.ascontiguousarray(weights, dtype=np.float64)
    if n == 1:
        gamma = np.ones((1, 1)) if return_gamma else None
        return SegmentResult(np.zeros(1, dtype=np.int64), weights.copy(), np.zeros(1), 1, 0, 0, 0, gamma)
    alpha = sphere_set(K, meb_solver, X, spec, seed=seed)
    on_sphere = alpha > 0.0
    order = sphere_sort(K, alpha, np.flatnonzero(~on_sphere).astype(np.int64))
    gamma = np.zeros((n, n) if return_gamma else (1, 1))
    is_rep, beta, residual, n_psi, n_pruned, n_promoted, n_capped = _derive_ae(
        K, on_sphere, order, float(eps), weights, int(max_iter), float(CHECK_GAP_FRACTION), bool(return_gamma), gamma,
        bool(enforce_coverage),
    )
    reps = np.flatnonzero(is_rep)
    return SegmentResult(reps, beta[reps], residual, int(on_sphere.sum()), int(n_psi), int(n_pruned),
                         int(n_promoted), gamma if return_gamma else None, int(n_capped))


# --------------------------------------------------------------------------
# DeriveRS (Nandan et al. 2014 Sec. 4)
# --------------------------------------------------------------------------


def segment_class(X, rows: np.ndarray, spec: KernelSpec, P: int, V: int, segmentation: str,
                  norms: np.ndarray, diag: np.ndarray) -> list[np.ndarray]:
    """First-level (FLS1 or FLS2) then second-level (SLS) segregation of one class's rows."""
    if segmentation == "fls1":
        blocks = fls1(rows, P)
    elif segmentation == "fls2":
        blocks = fls2(X, rows, P, spec, norms, diag, min_half=V)
    else:
        raise ValueError(f"segmentation must be one of {SEGMENTATIONS}; got {segmentation!r}")
    return [segment for block in blocks for segment in sls(X, block, V, spec, norms, diag)]


def derive_representative_set(X, y, spec: KernelSpec, epsilon: float = DEFAULT_EPSILON, P: int = DEFAULT_P,
                              V: int = DEFAULT_V, segmentation: str = "fls2",
                              sample_weight: np.ndarray | None = None, meb_solver: str = "dense",
                              seed: int = 0, n_jobs: int | None = None,
                              enforce_coverage: bool = True) -> RepresentativeSet:
    """DeriveRS: the representative set of approximate extreme points and its weights (Nandan et al. 2014 Sec. 4).

    1. Split the rows by class (so every segment satisfies eq. 5: one label).
    2. First-level segregation of each class into blocks of at most ``P`` rows
       (:func:`fls2`, or :func:`fls1` in data order).
    3. Second-level segregation of each block into segments of at most ``V``
       rows (:func:`sls`).
    4-5. :func:`derive_ae` on every segment.
    6. Concatenate the representatives and their ``beta``.

    **Guarantee.** Every row ``x_i`` is represented as ``sum_t gamma^i_t
    phi(x_t)`` over representatives of its own segment with squared residual
    ``||tau_i||^2 <= epsilon`` (eq. 9), the premise of the paper's bounds
    (Corollaries 3 and 4).  The published DeriveAE does not enforce it; see
    :func:`derive_ae` for the two fixes.  ``residual`` records each value.

    Parameters
    ----------
    X : array or CSR matrix of shape (N, D)
    y : array of shape (N,)
        Labels (any number of classes; segments never mix them).
    spec : KernelSpec
        The resolved kernel.
    epsilon : float, default=1e-3
        Coverage threshold on the squared kernel distance.
    P : int, default=100000
        First-level block size.
    V : int, default=1000
        Segment size (the kernel blocks formed are at most ``V x V``).
    segmentation : {'fls2', 'fls1'}, default='fls2'
    sample_weight : array of shape (N,), optional
        ``s_i > 0``; ``beta_t = sum_i s_i gamma^i_t``.
    meb_solver : {'dense', 'engine'}, default='dense'
        How SphereSet solves the minimum enclosing ball (:func:`sphere_set`).
    seed : int
        Seed of the engine's initial points (meb_solver='engine' only; the
        rest of DeriveRS is deterministic).
    n_jobs : int or None, default=None
        Threads working on segments in parallel (None: 1), at most the process's
        kernel threads (the calling thread and the kernel pool's helpers: the
        cores, or a ``threadpoolctl`` / ``OMP_NUM_THREADS`` limit).  The result
        does not depend on it.
    enforce_coverage : bool, default=True
        False runs the published DeriveAE steps 4 and 6 unchanged, which voids
        the guarantee above (``residual`` then shows by how much); only for
        measuring what the fixes cost.

    Returns
    -------
    RepresentativeSet
    """
    start = time.perf_counter()
    y = np.asarray(y)
    n = X.shape[0]
    if len(y) != n:
        raise ValueError(f"X has {n} rows but y has {len(y)} labels")
    if not (np.isfinite(epsilon) and epsilon >= 0):
        raise ValueError(f"epsilon must be a finite number >= 0; got {epsilon!r}")
    if int(V) < 1 or int(P) < int(V):
        raise ValueError(f"need 1 <= V <= P; got P={P!r}, V={V!r}")
    weights = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    norms = squared_norms(X)
    diag = kernel_diagonal(X, spec, norms)
    classes, y_index = np.unique(y, return_inverse=True)
    segment_of = np.empty(n, dtype=np.int64)
    residual = np.zeros(n)
    rep_parts, beta_parts = [], []
    size_per_class = np.zeros(len(classes), dtype=np.int64)
    counts = {"segments": 0, "sphere_set": 0, "psi": 0, "pruned": 0, "promoted": 0, "capped": 0}
    def one_segment(segment: np.ndarray) -> SegmentResult:
        X_seg = X[segment]
        K = kernel_block(X_seg, X_seg, spec, norms[segment], norms[segment])
        K[np.diag_indices_from(K)] = diag[segment]
        return derive_ae(K, epsilon, weights[segment], meb_solver, X_seg, spec, seed,
                         enforce_coverage=enforce_coverage)

    n_jobs = max(1, int(n_jobs or 1))
    for c in range(len(classes)):
        segments = segment_class(X, np.flatnonzero(y_index == c), spec, int(P), int(V), segmentation, norms, diag)
        # Segments are independent and the compiled DeriveAE releases the GIL, so up to n_jobs of the process's
        # kernel threads work on them; BLAS is held to one thread there: the blocks (V x V
        # from V x D) are too small to gain from more, and its idle threads would compete with the segments.
        results = map_on_kernel_threads(one_segment, segments, n_jobs)
        for segment, result in zip(segments, results, strict=True):
            segment_of[segment] = counts["segments"]
            residual[segment] = result.residual
            rep_parts.append(segment[result.representatives])
            beta_parts.append(result.beta)
            size_per_class[c] += len(result.representatives)
            counts["segments"] += 1
            counts["sphere_set"] += result.n_sphere
            counts["psi"] += result.n_psi
            counts["pruned"] += result.n_pruned
            counts["promoted"] += result.n_promoted
            counts["capped"] += result.n_capped
    indices = np.concatenate(rep_parts) if rep_parts else np.zeros(0, dtype=np.int64)
    beta = np.concatenate(beta_parts) if beta_parts else np.zeros(0)
    return RepresentativeSet(
        indices=indices,
        beta=beta,
        labels=y[indices],
        segment_of=segment_of,
        residual=residual,
        classes=classes,
        size_per_class=size_per_class,
        n_per_class=np.bincount(y_index, minlength=len(classes)),
        derive_time=time.perf_counter() - start,
        counts=counts,
        params={"epsilon": float(epsilon), "P": int(P), "V": int(V), "segmentation": segmentation,
                "kernel": spec, "meb_solver": meb_solver, "enforce_coverage": bool(enforce_coverage)},
    )
