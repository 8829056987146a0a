"""Newton steps on the active face of the L2-SVM's simplex QP, for the slow tail of large C.

Pairwise (SMO/MDM) steps converge linearly at a rate set by the conditioning of ``Q = K + diag(1/C)``;
at large C on dense data (the checkerboard at C = 2,560) the core set's solve took a million steps.
With the core set's Gram matrix in memory, the minimum of ``a'Qa`` over the face ``{a : sum a = 1,
a_t = 0 off S}`` is one linear solve: ``a_S = Q_SS^{-1} 1 / (1' Q_SS^{-1} 1)`` (the KKT system
``Q_SS a_S = rho 1``).  Starting from the support ``S`` of a loosely solved iterate, points whose
weight comes out negative leave the face and the solve is repeated; the face's minimum is kept when
its objective (after pairwise steps from it) is below the iterate's, and the pairwise steps resume
from it.  This is the active-set method for convex QPs (Nocedal and Wright 2006, sec. 16.5) with a batch of
constraints changed per solve; the duality gap is :func:`~coresvm.solvers.core_steps.l2svm_duality_gap`.
Faces of up to :data:`CHOLESKY_MAX_FACE` points are factorized; larger ones (the checkerboard's 9,600 support
vectors, ijcnn1's 5,200) are solved by Nystrom-preconditioned conjugate gradients (:func:`face_system_by_cg`),
in time proportional to ``|S| x core-set size`` per step, unless the fit's conjugate gradients have been slow
(:func:`factorizes`).

:func:`solve_with_newton` decides when a Newton step pays: after a chunk of pairwise steps it
extrapolates their observed linear rate to ``tol`` and compares that cost with the solve's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit
from scipy.linalg import LinAlgError, cho_factor, cho_solve

from ..kernels import run_row_blocks, single_threaded_blas
from .clock import fit_clock

# Faces up to this size are factorized (Cholesky, exact); larger ones are solved by conjugate gradients
# (face_system_by_cg), which read the Gram's rows in place and need no copy of the face's matrix.  A factorization
# costs |S|^3 / 3 flops, the conjugate gradients 10-40 products of |S| x core-set size: on the checkerboard at
# C = 10,240, faces of 1,450 and 1,800 points took 0.14 and 0.21 s factorized (with the re-solve after drops) and
# 0.045 and 0.050 s by conjugate gradients.  Below ~500 points the preconditioner's landmarks are the whole face.
CHOLESKY_MAX_FACE = 512
# ... and up to this size after a Newton step on a face solved by conjugate gradients was rejected, or they needed
# more than CG_EXPECTED_ITERATIONS products (ill-conditioned faces: ijcnn1 at C = 65,536 took 40-99 products on
# faces of 570-2,700 points; at C = 16,384 a 1,608-point face took 35 and its minimum, with the negative weights
# clipped instead of dropped and re-solved, was rejected; either made the fit up to twice as slow).
CHOLESKY_MAX_FACE_SLOW_CG = 2048
# ... and up to this size once conjugate gradients used all CG_MAX_ITERATIONS products without reaching their
# residual: the Nystrom preconditioner does not hold the face (one-hot rows at C = 262,144 on 8,000 points: faces of
# 2,600-4,800 points, 100 products of 0.2-0.7 s, the minimum rejected or raising the gap, then 5 million pairwise
# steps: 54 s; factorized, 22 s).  A float64 copy of such a face takes up to 300 MB.
CHOLESKY_MAX_FACE_FAILED_CG = 6144
# Conjugate gradients: a Nystrom preconditioner on this many of the face's points (Williams and Seeger 2001;
# preconditioning kernel systems with it is the idea of Falkon, Rudi et al. 2017), at most this many iterations,
# and their cost per Gram entry read (two threads) to compare with the pairwise steps' PAIRWISE_NS_PER_ENTRY.
NYSTROM_POINTS = 500
CG_MAX_ITERATIONS = 100
CG_EXPECTED_ITERATIONS = 40
CG_NS_PER_ENTRY = 0.3
# A face is solved again once after dropping the points whose weight came out negative; the pairwise steps that
# follow settle the weights still clipped after that for less than another factorization.  Up to four re-solves
# of faces below 1,500 points made ijcnn1 at C = 65,536 take 11.6-12.2 s (709,000 steps, 28 Newton steps) against
# 7.3-8.0 s (535,000 steps, 20) with one; at C = 16,384 5.8-8.1 s against 5.1-5.8 s; w8a at C = 4,096 5.7 s against
# 5.1 s; ijcnn1 at C = 1,024 and the checkerboard at C = 640 and 10,240 the same within the noise.
NEWTON_MAX_DROPS = 1
# float64 refinement steps of the float32 factorization's solution, and the relative residual it and the conjugate
# gradients must reach.  The face minimum is only a start for the pairwise steps, which settle its last digits, and
# it is kept only when it lowers the objective: 1e-2 instead of 1e-3 cut a9a at C = 1,024 from 38 s to 26 s,
# 1e-1 instead of 1e-2 made 22 of 25 fits faster (median 0.86x; the checkerboard at C = 2,560 and 10,240, ijcnn1
# at C = 16,384 and 65,536, a9a at C = 256, 1,024 and 4,096 -- there 68 s -> 28 s; paired Wilcoxon p = 0.0002), and
# at the default tol = 1e-2, 0.3 instead of 0.1 made 23 of 36 paired fits faster and 8 slower (geometric mean 0.92x,
# total 290 -> 258 s; a9a at C = 4,096 faster on all four seeds, 18-25 s -> 12-19 s, ijcnn1 at C = 65,536 on all four,
# w8a at C = 4,096 on three; slower: the 1M checkerboard at C = 2,560 by 2-6%); 0.5 was too loose (4 of 18 faster,
# 13 slower).  A tighter solve needs a better start: on 2,000 checkerboard points at C = 10^4 solved to 1e-3, faces
# solved to 0.3 saved 19% of the pairwise steps, to 0.1 over half.  So the residual is FACE_RESIDUAL_PER_TOL times
# the solve's tolerance, within [FACE_RESIDUAL, LOOSEST_FACE_RESIDUAL] (face_residual_for).
REFINEMENTS = 3
FACE_RESIDUAL = 1e-1
LOOSEST_FACE_RESIDUAL = 0.3
FACE_RESIDUAL_PER_TOL = 30.0


def face_residual_for(tol: float) -> float:
    """The relative residual to which a Newton step solves its face system when the solve's tolerance is ``tol``:
    ``30 tol`` within [0.1, 0.3] (0.3 at the default tol = 1e-2; see FACE_RESIDUAL)."""
    return float(min(max(FACE_RESIDUAL_PER_TOL * tol, FACE_RESIDUAL), LOOSEST_FACE_RESIDUAL))


# Rough costs in nanoseconds, to compare the two ways to the tolerance: one Gram entry touched by a
# pairwise step (two rows read, the gradient written), and one flop of a float32 Cholesky factorization on one
# thread.
PAIRWISE_NS_PER_ENTRY = 2.0
CHOLESKY_NS_PER_FLOP = 0.04
# Pairwise steps per chunk between the rate checks, per core-set point (and at least this many).
CHUNK_STEPS_PER_POINT = 1
MIN_CHUNK_STEPS = 8192
# A solve that starts with zero-weight violators (the points a growth just added) gives them weight in a first chunk
# of one pairwise step per violator (at least FIRST_CHUNK_MIN_STEPS), not a whole chunk: the face the Newton step
# solves holds only points with weight, and a whole chunk after a growth mostly raised the gap (ijcnn1 at C = 4,096:
# 0.2 -> 2.3 in 8,192 steps) before the Newton step brought it down.  Only while the fit's conjugate gradients take
# at most FAST_CG_ITERATIONS (the Newton step is cheap): paired over seeds, the 1M checkerboard at C = 10,240 7 of 7
# fits faster (2.77 -> 2.48 s), ijcnn1 at C = 256 3 of 3 (2.23 -> 1.76 s) and at C = 65,536 3.89 -> 3.54 s (6 seeds),
# a9a at C = 1,024 3 of 3 (-5%), ijcnn1 at C = 4,096, w8a at C = 16, a9a at C = 16 and 4,096 the same within the
# noise.  Without that condition a9a at C = 4,096 took 24.3 s instead of 21.6 s and ijcnn1 at C = 65,536 3.79 s
# instead of 3.57 s (conjugate gradients of 12-30 iterations, and a Newton step after every growth).
FIRST_CHUNK_MIN_STEPS = 1024
FAST_CG_ITERATIONS = 10


@njit(cache=True, nogil=True)
def gram_face_product(gram, n_w, face, weights):
    """``gram[:n_w, face] @ weights``, accumulated in float64 from a float32 or float64 Gram."""
    out = np.zeros(n_w)
    for t in range(n_w):
        row = gram[t]
        total = 0.0
        for k in range(face.shape[0]):
            total += row[face[k]] * weights[k]
        out[t] = total
    return out


@njit(cache=True, nogil=True)
def residual_of_ones(Q_face, x):
    """``1 - Q_face x``, accumulated in float64 from a float32 or float64 matrix (no float64 copy of it)."""
    out = np.empty(x.shape[0])
    for t in range(x.shape[0]):
        row = Q_face[t]
        total = 0.0
        for k in range(x.shape[0]):
            total += row[k] * x[k]
        out[t] = 1.0 - total
    return out


def diagonal_shortfall(gram, diag, rows: np.ndarray) -> np.ndarray:
    """``diag[rows] - gram[rows, rows]``: what the Gram's own diagonal misses of Q's, ``diag`` (float64).

    A float32 entry ``k(x, x) + b + 1/C`` cannot hold ``1/C`` below its resolution (C above ~10^6, or less once
    repeated rows are merged), and a point labelled both ways then has two identical rows in the Gram; the core
    set's solves take the diagonal from ``diag`` (as its pairwise steps do).  Zero for a float64 Gram."""
    return diag[rows] - gram[rows, rows]


@dataclass
class FactorizedFace:
    """A face's float64 Cholesky factor and solution, kept by :func:`solve_face_system` so that the face less the
    points whose weight came out negative is solved without another factorization (:func:`dropped_face_solve`)."""

    matrix: np.ndarray | None = None  # the face's matrix as given (float32 or float64)
    shortfall: np.ndarray | None = None  # what its diagonal misses (diagonal_shortfall)
    factor: tuple = ()
    solution: np.ndarray | None = None  # matrix^{-1} 1


def solve_face_system(Q_face: np.ndarray, face_residual: float = FACE_RESIDUAL,
                      diag_face: np.ndarray | None = None, record: NewtonRecord | None = None,
                      factorized: FactorizedFace | None = None) -> np.ndarray | None:
    """``Q_face^{-1} 1``; None when ``Q_face`` is not numerically positive definite.

    A float32 ``Q_face`` (the core set's float32 Gram) is factorized in float32 and the solution refined in
    float64 against the same matrix (Langou et al. 2006), which needs no float64 copy of it; a float64
    factorization is the fallback when that fails, and the only one for a float64 ``Q_face``.  On one thread:
    when the cores are busy (other processes, parallel fits), OpenBLAS's waiting threads made a 400-point
    factorization take 0.9 s instead of 13 ms, and a 2,160-point one 10 s.  ``diag_face``: the matrix's diagonal in
    float64 (:func:`diagonal_shortfall`), which the residuals and the float64 factorization take instead of its own.
    ``record`` (the fit's :class:`NewtonRecord`): once the float32 solve failed in the fit, the later faces, larger
    and no better conditioned, go straight to float64 (one-hot rows at C = 262,144: 24 failed float32 solves of
    faces of 2,400-4,500 points took 4.3 of the fit's 23 s).  ``factorized``: filled with the float64 factorization
    when there is one.
    """
    ones = np.ones(Q_face.shape[0])
    shortfall = np.zeros(len(ones)) if diag_face is None else diag_face - np.diagonal(Q_face)
    with single_threaded_blas():
        if Q_face.dtype == np.float32 and not (record is not None and record.float32_failed):
            x = _refined_float32_solve(Q_face, ones, face_residual, shortfall)
            if x is not None:
                return x
            if record is not None:
                record.float32_failed = True
        matrix = Q_face
        Q_face = Q_face.astype(np.float64)
        Q_face[np.diag_indices_from(Q_face)] += shortfall
        try:
            factor = cho_factor(Q_face, lower=True, overwrite_a=True, check_finite=False)
        except LinAlgError:
            if matrix.dtype == np.float32 and record is not None:
                record.float32_gram_failed = True
            return None
        x = cho_solve(factor, ones, check_finite=False)
    if factorized is not None:
        factorized.matrix, factorized.shortfall, factorized.factor, factorized.solution = matrix, shortfall, factor, x
    return x


# A face less k of its n points is solved from the face's factorization (dropped_face_solve: 2 k n^2 flops) when
# k <= n / BORDERED_MAX_SHARE, instead of a new factorization (n^3 / 3): one-hot rows at C = 65,536 (10,000 points)
# factorized faces of 3,000-5,600 points twice per Newton step in float64 (1.3-2.4 s, then 0.8-1.7 s again for the
# face less its 5-370 negative weights).
BORDERED_MAX_SHARE = 8


def dropped_face_solve(factorized: FactorizedFace, kept: np.ndarray, face_residual: float) -> np.ndarray | None:
    """The solution of the system of a factorized face's points ``kept`` (increasing positions in the face), from its
    factorization: with ``Q x = 1`` and ``D`` the dropped points, ``x - Q^{-1} E_D (E_D' Q^{-1} E_D)^{-1} x_D`` is zero
    on ``D`` and solves the kept points' system (a bordered solve).  None when too many points were dropped for that
    to pay (:data:`BORDERED_MAX_SHARE`) or its relative residual misses ``face_residual``."""
    x = factorized.solution
    if x is None:
        return None
    n = len(x)
    dropped = np.setdiff1d(np.arange(n), kept, assume_unique=True)
    if len(dropped) * BORDERED_MAX_SHARE > n:
        return None
    unit = np.zeros((n, len(dropped)))
    unit[dropped, np.arange(len(dropped))] = 1.0
    with single_threaded_blas():
        columns = cho_solve(factorized.factor, unit, check_finite=False)
        try:
            multipliers = np.linalg.solve(columns[dropped], x[dropped])
        except np.linalg.LinAlgError:
            return None
        z = x - columns @ multipliers
    z[dropped] = 0.0
    matrix = factorized.matrix
    residual = (residual_of_ones(matrix, z) if matrix.dtype == np.float32 else 1.0 - matrix @ z)[kept]
    residual -= factorized.shortfall[kept] * z[kept]
    if np.linalg.norm(residual) <= face_residual * np.sqrt(len(kept)):
        return z[kept]
    return None


def _refined_float32_solve(Q_face: np.ndarray, ones: np.ndarray, face_residual: float,
                           shortfall: np.ndarray) -> np.ndarray | None:
    """``Q_face^{-1} 1`` from a float32 factorization: corrections solved in float32, residuals in float64 (with the
    diagonal's ``shortfall`` added); None unless the relative residual reaches ``face_residual``."""
    try:
        factor = cho_factor(Q_face, lower=True, check_finite=False)
    except LinAlgError:
        return None

    def residual(x: np.ndarray) -> np.ndarray:
        return residual_of_ones(Q_face, x) - shortfall * x

    x = np.zeros(len(ones))
    for _ in range(REFINEMENTS + 1):
        x += cho_solve(factor, residual(x).astype(np.float32), check_finite=False)
    # The face minimum is a start for the pairwise steps, judged by its objective after them: a relative residual of
    # 0.1-0.3 (face_residual_for) is plenty.  Much below it, float32 cannot hold the system (condition number ~1 /
    # float32 epsilon).
    if np.linalg.norm(residual(x)) <= face_residual * np.sqrt(len(ones)):
        return x
    return None


def face_minimum(gram, alpha, n_w: int, inv_c=None, G=None, record: NewtonRecord | None = None,
                 diag: np.ndarray | None = None, face_residual: float = FACE_RESIDUAL
                 ) -> tuple[np.ndarray, np.ndarray, bool] | None:
    """The minimizer of ``a'Qa`` on the simplex face of the positive weights in ``alpha[:n_w]``.

    Faces that :func:`factorizes` picks (up to :data:`CHOLESKY_MAX_FACE` points, or
    :data:`CHOLESKY_MAX_FACE_SLOW_CG` when ``record`` says the fit's conjugate gradients have been slow) are
    factorized, and points whose weight comes out negative leave the face and it is solved again, up to
    :data:`NEWTON_MAX_DROPS` times.  Larger faces are solved by :func:`face_system_by_cg` (which needs ``inv_c``, the
    1/C part of Q's diagonal, and ``G = Qa``, its start), once: a drop would cost another solve, and the
    pairwise steps that follow settle the few clipped weights for less.  Returns ``(face, weights, exact)``:
    ``exact`` when no weight came out negative, else the last solution's weights clipped at zero and
    renormalized.  None when the face is large and ``inv_c`` or ``G`` is missing, or the system has no
    positive solution (``Q_SS`` not numerically positive definite).  The face's system is solved to the relative
    residual ``face_residual`` (:func:`face_residual_for`).  ``diag``: Q's diagonal in float64 where the Gram's
    cannot hold it (:func:`diagonal_shortfall`; None: the Gram's own).
    """
    face = np.flatnonzero(alpha[:n_w] > 0)
    if len(face) < 2:
        return None
    if not factorizes(len(face), record):
        if inv_c is None or G is None:
            return None
        x = face_system_by_cg(gram, face, inv_c, n_w, alpha[face] / max(float(alpha[:n_w] @ G[:n_w]), 1e-300),
                              record, face_residual, diag)
        if x is None or not x.sum() > 0.0:
            return None
        positive = x > 0.0
        return face[positive], x[positive] / x[positive].sum(), bool(positive.all())
    factorized = FactorizedFace()
    in_factorized = np.arange(len(face))  # the face's positions in the factorized one
    for attempt in range(NEWTON_MAX_DROPS + 1):
        x = dropped_face_solve(factorized, in_factorized, face_residual) if attempt else None
        if x is None:
            factorized = FactorizedFace()
            in_factorized = np.arange(len(face))
            x = solve_face_system(gram[np.ix_(face, face)], face_residual, None if diag is None else diag[face],
                                  record, factorized)
        if x is None or not x.sum() > 0.0:
            return None
        weights = x / x.sum()
        positive = weights > 0.0
        if np.all(positive):
            return face, weights, True
        if attempt == NEWTON_MAX_DROPS:
            return face[positive], weights[positive] / weights[positive].sum(), False
        face, in_factorized = face[positive], in_factorized[positive]
    return None


PRODUCT_ROWS = 512  # rows of the Gram per task of gram_rows_product


@njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})  # reassociation lets the sums vectorize
def rows_times_vector(gram, rows, n_w, x, start, stop, out):
    """``out[r] = gram[rows[r], :n_w] @ x`` for ``r`` in ``[start, stop)``, accumulated in float64.

    Four rows per pass over ``x``: each entry of ``x`` loaded once serves four rows, which made the products of
    a9a's faces (14,000 rows of 17,000) 1.45x faster than one row per pass.  The grouping is fixed by the block,
    not by the threads, so a fit's rounding does not depend on the thread count."""
    r = start
    while r + 4 <= stop:
        row_a, row_b, row_c, row_d = gram[rows[r]], gram[rows[r + 1]], gram[rows[r + 2]], gram[rows[r + 3]]
        total_a = total_b = total_c = total_d = 0.0
        for k in range(n_w):
            value = x[k]
            total_a += row_a[k] * value
            total_b += row_b[k] * value
            total_c += row_c[k] * value
            total_d += row_d[k] * value
        out[r], out[r + 1], out[r + 2], out[r + 3] = total_a, total_b, total_c, total_d
        r += 4
    for rest in range(r, stop):
        row = gram[rows[rest]]
        total = 0.0
        for k in range(n_w):
            total += row[k] * x[k]
        out[rest] = total


def gram_rows_product(gram, rows: np.ndarray, n_w: int, x: np.ndarray,
                      shortfall: np.ndarray | None = None) -> np.ndarray:
    """``gram[rows, :n_w] @ x`` on the kernel threads, reading whole rows in place (``x`` is 0 off the face); with
    ``shortfall`` (:func:`diagonal_shortfall` of ``rows``), the rows of Q whose diagonal the Gram's cannot hold."""
    out = np.empty(len(rows))

    def block(start: int) -> None:
        rows_times_vector(gram, rows, n_w, x, start, min(start + PRODUCT_ROWS, len(rows)), out)

    run_row_blocks(len(rows), PRODUCT_ROWS, block, None)
    if shortfall is not None:
        out += x[rows] * shortfall
    return out


LANDMARKS_PER_TASK = 16  # landmark rows per task of landmark_rows


@njit(cache=True, nogil=True)
def gather_landmark_rows(gram, landmarks, face, start, stop, out):
    """``out[l] = gram[landmarks[l], face]`` for ``l`` in ``[start, stop)``, in float64."""
    for l in range(start, stop):
        row = gram[landmarks[l]]
        for r in range(len(face)):
            out[l, r] = row[face[r]]


def landmark_rows(gram, landmarks: np.ndarray, face: np.ndarray) -> np.ndarray:
    """``gram[landmarks][:, face]`` on the kernel threads: each landmark's row read along the face (the Gram is
    symmetric), where gathering the face's rows at the landmarks' columns misses the cache once per entry."""
    out = np.empty((len(landmarks), len(face)))

    def block(start: int) -> None:
        gather_landmark_rows(gram, landmarks, face, start, min(start + LANDMARKS_PER_TASK, len(landmarks)), out)

    run_row_blocks(len(landmarks), LANDMARKS_PER_TASK, block, None)
    return out


OUTER_PRODUCT_COLUMNS = 1024  # columns per task of scaled_outer_product


def scaled_outer_product(rows: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """``(rows * scale) @ (rows * scale).T``: a symmetric product per block of :data:`OUTER_PRODUCT_COLUMNS`
    columns on the kernel threads (one BLAS thread each), summed in the blocks' order.  The blocks do not depend
    on the number of threads, so neither does the rounding: a fit gives the same model on any machine and under
    any thread limit."""
    scaled = rows * scale
    parts = {}

    def block(start: int) -> None:
        part = scaled[:, start:start + OUTER_PRODUCT_COLUMNS]
        parts[start] = part @ part.T

    run_row_blocks(scaled.shape[1], OUTER_PRODUCT_COLUMNS, block, None)
    return sum((parts[start] for start in sorted(parts)), np.zeros((len(rows), len(rows))))


def face_system_by_cg(gram, face: np.ndarray, inv_c: np.ndarray, n_w: int, start: np.ndarray,
                      record: NewtonRecord | None = None, face_residual: float = FACE_RESIDUAL,
                      diag: np.ndarray | None = None) -> np.ndarray | None:
    """``Q_SS^{-1} 1`` by preconditioned conjugate gradients, from ``start``; None without a positive 1/C part.

    ``Q_SS = K_SS + diag(1/C)``.  The preconditioner is ``diag(1/C) + K_SL K_LL^{-1} K_LS``, the Nystrom
    approximation of the kernel part on :data:`NYSTROM_POINTS` landmarks ``L`` spread over the face, applied
    by the Woodbury identity (``O(|S| |L|)`` per step; the setup, ``O(|S| |L|^2)``, runs on the kernel
    threads).  RBF Gram matrices' spectra decay fast, so the preconditioned system is well conditioned even
    when ``1/C`` is tiny: the checkerboard's face of 9,625 points at C=640 took 25 steps to a relative residual
    of 1e-4, where the pairwise steps took 206,000.
    The products read the face's rows of the Gram in place.  Stops at the relative residual
    ``face_residual`` or after :data:`CG_MAX_ITERATIONS` steps: the result is a start for pairwise steps.
    ``record`` (a fit's :class:`NewtonRecord`) notes whether the residual was reached within
    :data:`CG_EXPECTED_ITERATIONS` steps.  ``diag``: as :func:`face_minimum`'s.
    """
    k = len(face)
    shortfall = None if diag is None else diagonal_shortfall(gram, diag, face)  # once, not per product
    diagonal = inv_c[face].astype(np.float64)
    if not np.all(diagonal > 0.0):
        return None
    positions = np.unique(np.linspace(0, k - 1, min(NYSTROM_POINTS, k)).astype(np.int64))
    landmarks = face[positions]
    kernel_rows = landmark_rows(gram, landmarks, face)
    kernel_rows[np.arange(len(landmarks)), positions] -= diagonal[positions]  # K_LS: Q_LS without the 1/C part
    inverse_diagonal = 1.0 / diagonal
    # K_LL + K_LS D^-1 K_SL
    inner = kernel_rows[:, positions] + scaled_outer_product(kernel_rows, np.sqrt(inverse_diagonal))
    inner[np.diag_indices_from(inner)] += 1e-10 * np.trace(inner) / len(landmarks)
    with single_threaded_blas():  # as solve_face_system: parallel one-vs-one fits run this in threads
        try:
            factor = cho_factor(inner, lower=True, check_finite=False)
        except LinAlgError:
            return None

    def precondition(v: np.ndarray) -> np.ndarray:
        u = inverse_diagonal * v
        with single_threaded_blas():
            return u - inverse_diagonal * (kernel_rows.T @ cho_solve(factor, kernel_rows @ u, check_finite=False))

    spread = np.zeros(n_w)

    def face_product(v: np.ndarray) -> np.ndarray:
        spread[face] = v
        return gram_rows_product(gram, face, n_w, spread, shortfall)

    x = start.astype(np.float64)
    residual = 1.0 - face_product(x)
    target = face_residual * np.sqrt(k)
    z = precondition(residual)
    direction = z.copy()
    rz = float(residual @ z)
    steps = 0
    while steps < CG_MAX_ITERATIONS and np.linalg.norm(residual) > target and rz > 0.0:
        product = face_product(direction)
        curvature = float(direction @ product)
        if not curvature > 0.0:
            break
        steps += 1
        step = rz / curvature
        x += step * direction
        residual -= step * product
        z = precondition(residual)
        rz_next = float(residual @ z)
        direction = z + (rz_next / rz) * direction
        rz = rz_next
    if record is not None:
        record.cg_converged = bool(steps <= CG_EXPECTED_ITERATIONS and np.linalg.norm(residual) <= target)
        record.cg_iterations = steps
    return x


def newton_step(gram, alpha, G, n_w: int, gap_of, polish, gap_now: float, inv_c=None,
                record: NewtonRecord | None = None, diag: np.ndarray | None = None,
                face_residual: float = FACE_RESIDUAL) -> tuple[bool, int, float]:
    """Move ``alpha[:n_w]`` and ``G[:n_w]`` to the face minimum, followed by ``polish() -> steps`` pairwise steps
    (which bring back the points outside the face that violate), and keep the result when its objective ``a'Qa``
    is below the iterate's; else restore the iterate.  Returns (kept, polish steps, the duality gap
    ``gap_of(alpha, G)`` of the iterate kept; ``gap_now``: the iterate's).  The objective, not the gap, judges
    the step: the pairwise steps descend the objective while their gap is not monotone, and a few points off the
    face that still violate after the polish can hold the gap above the iterate's at a lower objective (rejecting
    such steps by their gap left a9a at C = 4,096 to ~1.7 million pairwise steps: 55-68 s instead of 25-41 s).
    The face may be too small (a support point dropped with the others, or not yet in it): then its minimum alone
    is worse than the iterate, yet after the polish the better start.  ``diag``: as :func:`face_minimum`'s."""
    found = face_minimum(gram, alpha, n_w, inv_c, G, record, diag=diag, face_residual=face_residual)
    if found is None:
        return False, 0, gap_now
    face, weights, _ = found
    saved = alpha[:n_w].copy(), G[:n_w].copy()
    objective_now = float(saved[0] @ saved[1])
    alpha[:n_w] = 0.0
    alpha[face] = weights
    if len(face) > CHOLESKY_MAX_FACE:  # whole rows on the kernel threads (Q is symmetric: rows = columns)
        G[:n_w] = gram_rows_product(gram, np.arange(n_w), n_w, alpha[:n_w])
    else:
        G[:n_w] = gram_face_product(gram, n_w, face, weights)
    if diag is not None:  # the weights are zero off the face: only its diagonal entries fall short
        G[face] += weights * diagonal_shortfall(gram, diag, face)
    steps = polish()
    if float(alpha[:n_w] @ G[:n_w]) < objective_now:
        return True, steps, gap_of(alpha[:n_w], G[:n_w])
    alpha[:n_w], G[:n_w] = saved
    return False, steps, gap_now


# A rejected Newton step makes the next one's estimated cost this many times dearer (a kept one undoes it).
REJECTION_PENALTY = 4.0


@dataclass
class NewtonRecord:
    """A fit's record of its Newton steps, across the core set's solves: rejected steps make the next look dearer.

    At very large C the face systems are too ill-conditioned for the conjugate gradients' 100 steps, and their
    minimum is rejected again and again: ijcnn1 at C = 65,536 tried 180 Newton steps, none kept, which took 124 of
    the fit's 167 s (62 s with no Newton steps).
    """

    penalty: float = 1.0
    tried: int = 0
    kept: int = 0
    cg_converged: bool = True  # the last conjugate gradients reached their residual in CG_EXPECTED_ITERATIONS
    cg_serves: bool = True  # ... and the Newton step from their solution was kept
    cg_iterations: int = 0  # the last conjugate gradients' iterations (0: none yet)
    float32_failed: bool = False  # a float32 factorization missed its residual (solve_face_system)
    # A face of a float32 Gram was not positive definite in float64 either: Q's own faces are (their eigenvalues are
    # at least the smallest 1/C), so float32's rounding is at fault (solve_with_newton: ``float64_gram_possible``).
    float32_gram_failed: bool = False

    def note(self, kept: bool, by_cg: bool = False, n_face: int = 0) -> None:
        """Note a Newton step, ``kept`` or rejected; ``by_cg``: its face of ``n_face`` points was solved by conjugate
        gradients.  A rejection makes the next step look dearer, unless a face of that size is factorized from now
        on (:func:`factorizes`): then the conjugate gradients, not the Newton step, failed."""
        self.tried += 1
        self.kept += int(kept)
        if by_cg:
            self.cg_serves = kept and self.cg_converged
        if by_cg and not kept and factorizes(n_face, self):
            return
        self.penalty = max(1.0, self.penalty / REJECTION_PENALTY) if kept else self.penalty * REJECTION_PENALTY


def factorizes(n_face: int, record: NewtonRecord | None = None) -> bool:
    """Whether a face of ``n_face`` points is factorized rather than solved by conjugate gradients: up to
    :data:`CHOLESKY_MAX_FACE` points, up to :data:`CHOLESKY_MAX_FACE_SLOW_CG` when the fit's last Newton step
    by conjugate gradients (``record``) was slow or rejected, and up to :data:`CHOLESKY_MAX_FACE_FAILED_CG` when
    those conjugate gradients used all their iterations."""
    if record is None:
        return n_face <= CHOLESKY_MAX_FACE
    if record.cg_iterations >= CG_MAX_ITERATIONS:
        return n_face <= CHOLESKY_MAX_FACE_FAILED_CG
    return n_face <= (CHOLESKY_MAX_FACE if record.cg_serves else CHOLESKY_MAX_FACE_SLOW_CG)


def newton_pays(n_w: int, n_face: int, steps: int, gap_before: float, gap_after: float, tol: float,
                penalty: float = 1.0, factorize: bool | None = None, window: tuple[int, float, float] | None = None
                ) -> bool:
    """Whether a Newton step is expected to cost less than the pairwise steps still needed: their rate over the
    last ``steps`` steps (from ``gap_before`` to ``gap_after``) extrapolated to ``tol``, against two
    factorizations of the face (a drop usually follows the first), or for the faces solved by conjugate gradients
    their expected products and the new gradient; that cost times ``penalty`` (:class:`NewtonRecord`).
    ``factorize``: how the face is solved (None: :func:`factorizes` by its size alone).  ``window = (steps, gap at
    its start, smallest gap since)``: the pairwise steps since the solve's last Newton step (or its start), whose
    rate decides when the last chunk made no progress."""
    if n_face < 2 or steps <= 0 or gap_after <= tol:
        return False
    factorize = factorizes(n_face) if factorize is None else factorize
    if gap_after < gap_before:
        return newton_cheaper(np.log(gap_before / gap_after) / steps, gap_after, tol, n_w, n_face, penalty, factorize)
    # No progress in the chunk (the gap of pairwise steps is not monotone): a Newton step, unless the fit's record
    # says they have been rejected (an estimate of infinite pairwise cost outweighed any penalty: ijcnn1 at
    # C = 65,536 tried 40 after its penalty had passed 10^6).  Then the window's rate decides: on banana at
    # C = 32,768 the gap swung between 0.47 and 3.7 for 260,000 steps after a rejection, each chunk either without
    # progress or, from a peak, with a rate that made the pairwise steps look fast.
    if penalty <= 1.0:
        return True
    if window is None:
        return False
    window_steps, window_start, smallest = window
    if not smallest < window_start or smallest <= tol:  # no progress over the window either, or already there
        return False
    return newton_cheaper(np.log(window_start / smallest) / window_steps, smallest, tol, n_w, n_face, penalty,
                          factorize)


def newton_cheaper(per_step: float, gap: float, tol: float, n_w: int, n_face: int, penalty: float,
                   factorize: bool) -> bool:
    """Whether pairwise steps at the rate ``per_step`` (log of the gap per step) from ``gap`` to ``tol`` cost more
    than ``penalty`` times a Newton step on a face of ``n_face`` points (:func:`newton_pays`)."""
    remaining = np.log(gap / tol) / per_step
    pairwise_ns = remaining * n_w * PAIRWISE_NS_PER_ENTRY
    if not factorize:
        newton_ns = (CG_EXPECTED_ITERATIONS * n_face + n_w) * n_w * CG_NS_PER_ENTRY
    else:
        newton_ns = 2.0 * (n_face**3 / 3.0 * CHOLESKY_NS_PER_FLOP + 3.0 * n_face * n_face) + n_w * n_face
    return bool(pairwise_ns > penalty * newton_ns)


def solve_with_newton(pairwise_solve, gram, alpha, G, n_w: int, tol: float, max_steps: int, time_left: float,
                      gap_of, inv_c=None, record: NewtonRecord | None = None,
                      diag: np.ndarray | None = None, float64_gram_possible: bool = False) -> tuple[int, float]:
    """Run ``pairwise_solve(tol, max_steps, time_left) -> (steps, gap)`` in chunks, taking a Newton step on the
    active face when the chunks' rate says it pays (:func:`newton_pays`).  Returns (steps, gap) as the pairwise
    solve does.  ``gap_of(alpha, G)``: the relative duality gap of the L2-SVM, which measures the rate.
    ``record``: the fit's :class:`NewtonRecord`, shared by its solves (a fresh one when not given).  ``diag``: Q's
    diagonal where the Gram's cannot hold it (:func:`face_minimum`).  The points without weight that violate (what a
    growth just added) size the first chunk (:func:`first_chunk_steps`).  ``float64_gram_possible``: the caller can
    recompute a float32 ``gram`` in float64, so the solve returns as soon as a face proves float32's rounding
    indefinite (``record.float32_gram_failed``), for the caller to do so and solve again."""
    record = NewtonRecord() if record is None else record
    start = fit_clock()
    chunk = max(MIN_CHUNK_STEPS, CHUNK_STEPS_PER_POINT * n_w)
    next_chunk = first_chunk_steps(chunk, zero_weight_violators(alpha[:n_w], G[:n_w]), record)
    steps_done = 0
    gap_before = gap_of(alpha[:n_w], G[:n_w])
    window_steps, window_start, smallest = 0, gap_before, gap_before  # since the last Newton step (newton_pays)
    while True:
        quota = min(next_chunk, max_steps - steps_done)
        next_chunk = chunk
        steps, gap = pairwise_solve(tol, quota, max(time_left - (fit_clock() - start), 0.0))
        steps_done += steps
        if gap <= tol or steps_done >= max_steps or steps < quota:
            return steps_done, gap
        gap_after = gap_of(alpha[:n_w], G[:n_w])
        window_steps, smallest = window_steps + steps, min(smallest, gap_after)
        n_face = int(np.sum(alpha[:n_w] > 0))
        factorize = factorizes(n_face, record)
        if newton_pays(n_w, n_face, steps, gap_before, gap_after, tol, record.penalty, factorize,
                       (window_steps, window_start, smallest)):
            def polish(quota: int = min(chunk, max_steps - steps_done)) -> int:
                return pairwise_solve(tol, quota, max(time_left - (fit_clock() - start), 0.0))[0]

            kept, polish_steps, gap_after = newton_step(gram, alpha, G, n_w, gap_of, polish, gap_after, inv_c,
                                                        record, diag, face_residual_for(tol))
            steps_done += polish_steps
            record.note(kept, by_cg=not factorize, n_face=n_face)
            if record.float32_gram_failed and float64_gram_possible:
                return steps_done, gap
            if not kept:
                chunk *= 2  # the face did not help yet: try again after more pairwise steps
            window_steps, window_start, smallest = 0, gap_after, gap_after
        gap_before = gap_after


def zero_weight_violators(alpha: np.ndarray, G: np.ndarray) -> int:
    """The points without weight whose ``G = (Qa)`` lies below ``a'Qa`` (the L2-SVM's margin violators)."""
    return int(np.count_nonzero((alpha <= 0) & (G < float(alpha @ G))))


def first_chunk_steps(chunk: int, new_violators: int, record: NewtonRecord) -> int:
    """The pairwise steps before a solve's first rate check: ``chunk``, or when the solve starts with
    ``new_violators`` zero-weight violators and the fit's conjugate gradients are fast, one step per violator (at
    least :data:`FIRST_CHUNK_MIN_STEPS`, at most ``chunk``; see FAST_CG_ITERATIONS)."""
    if new_violators <= 0 or record.cg_iterations > FAST_CG_ITERATIONS:
        return chunk
    return min(chunk, max(FIRST_CHUNK_MIN_STEPS, new_violators))
