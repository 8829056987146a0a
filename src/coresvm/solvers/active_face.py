"""Newton steps on the active face of the L2-SVM's simplex QP, for the slow tail of large C.

Pairwise (SMO/MDM) steps converge linearly at a rate set by the conditioning of ``Q = K + diag(1/C)``;
at large C on dense data (the checkerboard at C = 2,560) the core set's solve took a million steps.
With the core set's Gram matrix in memory, the minimum of ``a'Qa`` over the face ``{a : sum a = 1,
a_t = 0 off S}`` is one Cholesky solve: ``a_S = Q_SS^{-1} 1 / (1' Q_SS^{-1} 1)`` (the KKT system
``Q_SS a_S = rho 1``).  Starting from the support ``S`` of a loosely solved iterate, points whose
weight comes out negative leave the face and the solve is repeated; the face's minimum is kept when
its duality gap is smaller than the iterate's, and the pairwise steps resume from it.  This is the
active-set method for convex QPs (Nocedal and Wright 2006, sec. 16.5) with a batch of constraints
changed per factorization; the duality gap is :func:`~coresvm.solvers.core_set.l2svm_duality_gap`.

:func:`solve_with_newton` decides when a Newton step pays: after a chunk of pairwise steps it
extrapolates their observed linear rate to ``tol`` and compares that cost with a factorization's.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from scipy.linalg import LinAlgError, cho_factor, cho_solve

from ..kernels import single_threaded_blas
from .clock import fit_clock

# A face of 8,192 points takes 512 MiB in float64; larger faces are left to the pairwise steps.
NEWTON_MAX_FACE = 8192
# Faces re-solved after dropping the points whose weight came out negative; above FEW_DROPS_FACE points a
# factorization costs more than the pairwise steps that settle the few clipped weights.
NEWTON_MAX_DROPS = 4
FEW_DROPS_FACE = 1500
# float64 refinement steps of the float32 factorization's solution, and the relative residual it must reach.
REFINEMENTS = 3
FACE_RESIDUAL = 1e-3
# Rough costs in nanoseconds, to compare the two ways to the tolerance: one Gram entry touched by a
# pairwise step (two rows read, the gradient written), and one flop of a float32 Cholesky factorization on one
# thread.
PAIRWISE_NS_PER_ENTRY = 2.0
CHOLESKY_NS_PER_FLOP = 0.04
# Pairwise steps per chunk between the rate checks, per core-set point (and at least this many).
CHUNK_STEPS_PER_POINT = 4
MIN_CHUNK_STEPS = 8192


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


def solve_face_system(Q_face: np.ndarray) -> np.ndarray | None:
    """``Q_face^{-1} 1``; None when ``Q_face`` is not numerically positive definite.

    A float32 ``Q_face`` (the core set's float32 Gram) is factorized in float32 and the solution refined in
    float64 against the same matrix (Langou et al. 2006), which needs no float64 copy of it; a float64
    factorization is the fallback when that fails, and the only one for a float64 ``Q_face``.  On one thread:
    when the cores are busy (other processes, parallel fits), OpenBLAS's waiting threads made a 400-point
    factorization take 0.9 s instead of 13 ms, and a 2,160-point one 10 s.
    """
    ones = np.ones(Q_face.shape[0])
    with single_threaded_blas():
        if Q_face.dtype == np.float32:
            x = _refined_float32_solve(Q_face, ones)
            if x is not None:
                return x
        try:
            factor = cho_factor(Q_face.astype(np.float64), lower=True, overwrite_a=True, check_finite=False)
        except LinAlgError:
            return None
        return cho_solve(factor, ones, check_finite=False)


def _refined_float32_solve(Q_face: np.ndarray, ones: np.ndarray) -> np.ndarray | None:
    """``Q_face^{-1} 1`` from a float32 factorization: corrections solved in float32, residuals in float64."""
    try:
        factor = cho_factor(Q_face, lower=True, check_finite=False)
    except LinAlgError:
        return None
    x = np.zeros(len(ones))
    for _ in range(REFINEMENTS + 1):
        x += cho_solve(factor, residual_of_ones(Q_face, x).astype(np.float32), check_finite=False)
    # The face minimum is a start for the pairwise steps, judged by its duality gap: a relative residual of 1e-3
    # is plenty.  Beyond that, float32 cannot hold the system (condition number ~1 / float32 epsilon).
    if np.linalg.norm(residual_of_ones(Q_face, x)) <= FACE_RESIDUAL * np.sqrt(len(ones)):
        return x
    return None


def face_minimum(gram, alpha, n_w: int) -> tuple[np.ndarray, np.ndarray, bool] | None:
    """The minimizer of ``a'Qa`` on the simplex face of the positive weights in ``alpha[:n_w]``.

    Points whose weight comes out negative leave the face and it is solved again, up to
    :data:`NEWTON_MAX_DROPS` times (once for faces above :data:`FEW_DROPS_FACE`).  Returns ``(face, weights,
    exact)``: ``exact`` when no weight came out negative, else the last solution's weights clipped at zero
    and renormalized.  None when the face is too large or ``Q_SS`` is not numerically positive definite.
    """
    face = np.flatnonzero(alpha[:n_w] > 0)
    if len(face) < 2 or len(face) > NEWTON_MAX_FACE:
        return None
    drops = NEWTON_MAX_DROPS if len(face) <= FEW_DROPS_FACE else 1
    for attempt in range(drops + 1):
        x = solve_face_system(gram[np.ix_(face, face)])
        if x is None or not x.sum() > 0.0:
            return None
        weights = x / x.sum()
        positive = weights > 0.0
        if np.all(positive):
            return face, weights, True
        if attempt == drops:
            return face[positive], weights[positive] / weights[positive].sum(), False
        face = face[positive]
    return None


def newton_step(gram, alpha, G, n_w: int, gap_of, polish, gap_now: float) -> tuple[bool, int, float]:
    """Move ``alpha[:n_w]`` and ``G[:n_w]`` to the face minimum, followed by ``polish() -> steps`` pairwise steps
    (which bring back the points outside the face that violate), and keep the result when its duality gap
    ``gap_of(alpha, G)`` is below ``gap_now``, the iterate's; else restore the iterate.  Returns (kept, polish
    steps, the gap of the iterate kept).  The face may be too small (a support point dropped with the others, or
    not yet in it): then its minimum alone has a larger gap than the iterate, yet it is the better start."""
    found = face_minimum(gram, alpha, n_w)
    if found is None:
        return False, 0, gap_now
    face, weights, _ = found
    saved = alpha[:n_w].copy(), G[:n_w].copy()
    alpha[:n_w] = 0.0
    alpha[face] = weights
    G[:n_w] = gram_face_product(gram, n_w, face, weights)
    steps = polish()
    gap_new = gap_of(alpha[:n_w], G[:n_w])
    if gap_new < gap_now:
        return True, steps, gap_new
    alpha[:n_w], G[:n_w] = saved
    return False, steps, gap_now


def newton_pays(n_w: int, n_face: int, steps: int, gap_before: float, gap_after: float, tol: float) -> bool:
    """Whether a Newton step is expected to cost less than the pairwise steps still needed: their rate over the
    last ``steps`` steps (from ``gap_before`` to ``gap_after``) extrapolated to ``tol``, against two
    factorizations of the face (a drop usually follows the first)."""
    if n_face < 2 or n_face > NEWTON_MAX_FACE or steps <= 0 or gap_after <= tol:
        return False
    per_step = np.log(gap_before / gap_after) / steps if gap_after < gap_before else 0.0
    remaining = np.log(gap_after / tol) / per_step if per_step > 0.0 else np.inf
    pairwise_ns = remaining * n_w * PAIRWISE_NS_PER_ENTRY
    newton_ns = 2.0 * (n_face**3 / 3.0 * CHOLESKY_NS_PER_FLOP + 3.0 * n_face * n_face) + n_w * n_face
    return bool(pairwise_ns > newton_ns)


def solve_with_newton(pairwise_solve, gram, alpha, G, n_w: int, tol: float, max_steps: int,
                      time_left: float, gap_of) -> tuple[int, float]:
    """Run ``pairwise_solve(tol, max_steps, time_left) -> (steps, gap)`` in chunks, taking a Newton step on the
    active face when the chunks' rate says it pays (:func:`newton_pays`).  Returns (steps, gap) as the pairwise
    solve does.  ``gap_of(alpha, G)``: the relative duality gap of the L2-SVM, which measures the rate."""
    start = fit_clock()
    chunk = max(MIN_CHUNK_STEPS, CHUNK_STEPS_PER_POINT * n_w)
    steps_done = 0
    gap_before = gap_of(alpha[:n_w], G[:n_w])
    while True:
        quota = min(chunk, max_steps - steps_done)
        steps, gap = pairwise_solve(tol, quota, max(time_left - (fit_clock() - start), 0.0))
        steps_done += steps
        if gap <= tol or steps_done >= max_steps or steps < quota:
            return steps_done, gap
        gap_after = gap_of(alpha[:n_w], G[:n_w])
        if newton_pays(n_w, int(np.sum(alpha[:n_w] > 0)), steps, gap_before, gap_after, tol):
            def polish(quota: int = min(chunk, max_steps - steps_done)) -> int:
                return pairwise_solve(tol, quota, max(time_left - (fit_clock() - start), 0.0))[0]

            kept, polish_steps, gap_after = newton_step(gram, alpha, G, n_w, gap_of, polish, gap_after)
            steps_done += polish_steps
            if not kept:
                chunk *= 2  # the face did not help yet: try again after more pairwise steps
        gap_before = gap_after
