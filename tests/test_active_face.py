"""Newton steps on the active face (solvers/active_face.py) against exact solutions of the L2-SVM's simplex QP."""

import numpy as np
import pytest
from scipy.optimize import minimize

from coresvm.datasets import make_checkerboard
from coresvm.kernels import KernelSpec, limit_kernel_threads
from coresvm.problem import SimplexProblem
from coresvm.solvers import active_face
from coresvm.solvers.active_face import (
    diagonal_shortfall,
    face_minimum,
    face_system_by_cg,
    gram_rows_product,
    landmark_rows,
    newton_step,
    scaled_outer_product,
    solve_face_system,
    solve_with_newton,
)
from coresvm.solvers.core_steps import (
    NO_HELPER,
    NO_LINEAR_TERM,
    ROWS_STORED,
    STOP_RELATIVE_GAP,
    inner_solve,
    l2svm_duality_gap,
)
from coresvm.solvers.engine import SECOND_VERTEX_RULES


def noisy_xor(m: int, seed: int):
    rng = np.random.RandomState(seed)
    X = rng.uniform(-1, 1, size=(m, 2))
    y = np.where(X[:, 0] * X[:, 1] > 0, 1, -1)
    flip = rng.rand(m) < 0.05
    return X, np.where(flip, -y, y)


def simplex_optimum(Q: np.ndarray) -> np.ndarray:
    m = Q.shape[0]
    star = minimize(lambda a: a @ Q @ a, np.full(m, 1 / m), jac=lambda a: 2 * Q @ a, bounds=[(0, None)] * m,
                    constraints=({"type": "eq", "fun": lambda a: a.sum() - 1},), method="SLSQP",
                    options={"ftol": 1e-16, "maxiter": 3000})
    a = np.maximum(star.x, 0.0)
    return a / a.sum()


def relative_gap_of(inv_c):
    def relative_gap(alpha, G):
        return l2svm_duality_gap(alpha, G, inv_c[: len(alpha)], len(alpha)) / (2.0 * float(alpha @ G))
    return relative_gap


def test_face_minimum_on_the_optimal_support_is_the_optimum_and_on_a_superset_a_face_minimum(monkeypatch):
    """On the optimum's support the face minimum is the exact optimum.  Started on that support plus 30 other
    points, repeated drops end on a face whose minimum has positive weights and satisfies the face's KKT system
    ``Q_SS w = rho 1`` (it may have dropped a support point with the others: the pairwise steps restore it); with
    the default single re-solve, the weights are the re-solved face's, clipped at zero and renormalized."""
    X, y = noisy_xor(150, 0)
    problem = SimplexProblem(X, y, np.full(150, 1e4), KernelSpec("rbf", gamma=2.0), bias=True, lam=0.0)
    Q = problem.dense_Q()
    star = simplex_optimum(Q)
    support = star > 1e-7 * star.max()
    face, weights, exact = face_minimum(Q, support / support.sum(), 150)
    found = np.zeros(150)
    found[face] = weights
    assert exact
    np.testing.assert_allclose(found, star, atol=1e-4 * star.max())
    assert found @ Q @ found <= star @ Q @ star * (1 + 1e-9)

    start = support | (np.random.RandomState(1).rand(150) < 0.2)
    face, weights, exact = face_minimum(Q, start / start.sum(), 150)
    assert not exact and set(face) < set(np.flatnonzero(start))  # this start needs more than one re-solve
    assert weights.min() > 0 and weights.sum() == pytest.approx(1.0)
    def face_solution(points):
        return np.linalg.solve(Q[np.ix_(points, points)], np.ones(len(points)))

    started = np.flatnonzero(start)
    re_solved = started[face_solution(started) > 0]  # the face after the first drop, solved once more
    x = face_solution(re_solved)
    np.testing.assert_array_equal(face, re_solved[x > 0])
    np.testing.assert_allclose(weights, x[x > 0] / x[x > 0].sum(), rtol=1e-8)

    monkeypatch.setattr(active_face, "NEWTON_MAX_DROPS", 4)
    face, weights, exact = face_minimum(Q, start / start.sum(), 150)
    assert exact and weights.min() > 0 and weights.sum() == pytest.approx(1.0)
    g = Q[np.ix_(face, face)] @ weights
    np.testing.assert_allclose(g, np.full(len(face), weights @ g), rtol=1e-8)


@pytest.mark.parametrize("seed", range(3))
def test_newton_step_never_raises_the_objective_and_restores_a_rejected_iterate(seed):
    X, y = noisy_xor(120, seed)
    problem = SimplexProblem(X, y, np.full(120, 1e3), KernelSpec("rbf", gamma=1.0), bias=True, lam=0.0)
    Q = problem.dense_Q().astype(np.float32)
    gap_of = relative_gap_of(np.full(120, 1e-3))
    rng = np.random.RandomState(seed)
    for _ in range(10):
        alpha = rng.dirichlet(np.full(120, 0.3)) * (rng.rand(120) < 0.6)
        alpha /= alpha.sum()
        G = Q.astype(np.float64) @ alpha
        before, saved = gap_of(alpha, G), (alpha.copy(), G.copy())
        kept, _, gap_kept = newton_step(Q, alpha, G, 120, gap_of, lambda: 0, before)
        assert gap_kept == gap_of(alpha, G)
        if kept:
            assert alpha @ G < saved[0] @ saved[1]
            assert alpha.min() >= 0.0 and alpha.sum() == pytest.approx(1.0)
            np.testing.assert_allclose(G, Q.astype(np.float64) @ alpha, rtol=1e-6, atol=1e-9)
        else:
            np.testing.assert_array_equal(alpha, saved[0])
            np.testing.assert_array_equal(G, saved[1])


def test_newton_step_is_judged_by_the_objective_not_the_duality_gap():
    # A face of 60% of the points: its minimum lowers a'Qa while the 40% left off it violate, so its duality gap is
    # far above the iterate's (the pairwise steps that follow bring them back); a polish that raises a'Qa is undone.
    X, y = noisy_xor(120, 0)
    problem = SimplexProblem(X, y, np.full(120, 1e3), KernelSpec("rbf", gamma=1.0), bias=True, lam=0.0)
    Q = problem.dense_Q().astype(np.float32)
    gap_of = relative_gap_of(np.full(120, 1e-3))
    rng = np.random.RandomState(0)
    alpha = rng.dirichlet(np.full(120, 0.3)) * (rng.rand(120) < 0.6)
    alpha /= alpha.sum()
    G = Q.astype(np.float64) @ alpha
    before, saved = gap_of(alpha, G), (alpha.copy(), G.copy())
    kept, _, gap_kept = newton_step(Q, alpha, G, 120, gap_of, lambda: 0, before)
    assert kept and alpha @ G < saved[0] @ saved[1] and gap_kept > 2 * before

    def polish_to_a_vertex() -> int:  # a'Qa = Q_00, above any spread iterate's
        alpha[:] = 0.0
        alpha[0] = 1.0
        G[:] = Q[:, 0]
        return 1

    alpha[:], G[:] = saved
    kept, steps, gap_kept = newton_step(Q, alpha, G, 120, gap_of, polish_to_a_vertex, before)
    assert not kept and steps == 1 and gap_kept == before
    np.testing.assert_array_equal(alpha, saved[0])
    np.testing.assert_array_equal(G, saved[1])


@pytest.mark.parametrize("face_solver", ["cholesky", "conjugate gradients"])
def test_newton_steps_cut_the_pairwise_steps_of_an_ill_conditioned_solve(face_solver, monkeypatch):
    """2,000 checkerboard points at C = 10^4: the same relative duality gap in a fraction of the pairwise steps,
    and the objective within that gap of the pairwise-only solution -- with the face factorized, and solved by
    conjugate gradients (as faces above CHOLESKY_MAX_FACE points are)."""
    if face_solver == "conjugate gradients":
        monkeypatch.setattr(active_face, "CHOLESKY_MAX_FACE", 64)
    X, y = make_checkerboard(2000, random_state=0)
    problem = SimplexProblem(X, y, np.full(2000, 1e4), KernelSpec("rbf", gamma=2.0), bias=True, lam=0.0)
    Q = problem.dense_Q()
    inv_c = np.full(2000, 1e-4)
    gap_of = relative_gap_of(inv_c)
    diag = np.diag(Q).copy()
    tol = 1e-3
    results = {}
    for newton in (False, True):
        alpha = np.full(2000, 1 / 2000)
        G = Q @ alpha

        def pairwise(tol_, max_steps, time_left, alpha=alpha, G=G):
            return inner_solve(Q, alpha, G, diag, 2000, 0.0, SECOND_VERTEX_RULES["imdm"], 0.0, 1.0, tol_, max_steps,
                               time_left, inv_c, STOP_RELATIVE_GAP, NO_LINEAR_TERM, 0.0, 0.0, ROWS_STORED, 1, NO_HELPER)

        if newton:
            steps, gap = solve_with_newton(pairwise, Q, alpha, G, 2000, tol, 10**8, 1e9, gap_of, inv_c)
        else:
            steps, gap = pairwise(tol, 10**8, 1e9)
        assert gap <= tol
        results[newton] = steps, alpha @ Q @ alpha
    assert results[True][0] < 0.5 * results[False][0], results
    f_plain, f_newton = results[False][1], results[True][1]
    assert abs(f_newton - f_plain) <= 2 * tol * 2 * max(f_plain, f_newton)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_conjugate_gradients_solve_the_face_system_read_in_place(dtype, monkeypatch):
    """``Q_SS^{-1} 1`` on a face scattered through a larger Gram, against a dense solve: with a preconditioner
    on fewer landmarks than the face (its approximation matters) and at C = 10^4 (an ill-conditioned system)."""
    monkeypatch.setattr(active_face, "NYSTROM_POINTS", 200)
    X, y = make_checkerboard(900, random_state=1)
    inv_c = np.full(900, 1e-4)
    problem = SimplexProblem(X, y, 1.0 / inv_c, KernelSpec("rbf", gamma=2.0), bias=True, lam=0.0)
    Q = problem.dense_Q().astype(dtype)
    face = np.sort(np.random.RandomState(0).choice(900, 600, replace=False))
    exact = np.linalg.solve(Q[np.ix_(face, face)].astype(np.float64), np.ones(600))
    x = face_system_by_cg(Q, face, inv_c, 900, np.full(600, 1.0 / 600), face_residual=1e-2)
    residual = np.linalg.norm(1.0 - Q[np.ix_(face, face)].astype(np.float64) @ x)
    assert residual <= 1e-2 * np.sqrt(600)
    np.testing.assert_allclose(x / x.sum(), exact / exact.sum(), atol=2e-3 * np.abs(exact / exact.sum()).max())
    assert face_system_by_cg(Q, face, np.zeros(900), 900, np.ones(600)) is None  # no 1/C part: hard margin


def test_the_preconditioners_parts_equal_their_dense_definitions_under_any_thread_limit():
    """The landmarks' rows along the face and ``(K D^-1/2)(K D^-1/2)'`` summed over column blocks on threads,
    against NumPy on the whole arrays; bit for bit the same under thread limits 1, 2 and 3 (the blocks, and so
    the rounding, do not depend on the threads) and on every run."""
    rng = np.random.RandomState(0)
    n_face = 3 * active_face.OUTER_PRODUCT_COLUMNS + 100  # four blocks
    gram = rng.rand(n_face + 200, n_face + 200).astype(np.float32)
    face = np.sort(rng.choice(n_face + 200, n_face, replace=False))
    landmarks = face[::41]
    scale = rng.rand(n_face)
    products = []
    for n_threads in (1, 2, 3):
        with limit_kernel_threads(n_threads):
            rows = landmark_rows(gram, landmarks, face)
            np.testing.assert_array_equal(rows, gram[np.ix_(landmarks, face)].astype(np.float64))
            products += [scaled_outer_product(rows, scale) for _ in range(3)]
    np.testing.assert_allclose(products[0], (rows * scale) @ (rows * scale).T, rtol=1e-12)
    assert all(np.array_equal(product, products[0]) for product in products)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gram_rows_products_equal_numpy_for_any_number_of_rows(dtype):
    """Rows taken four at a time and the remainder one at a time: every count of rows from 0 to 9, scattered rows
    and a prefix of the columns, in float64, against NumPy; a row in a group of four and alone agree to rounding
    (reassociated sums vectorize each loop its own way, which differs between CPUs, so not bit for bit)."""
    rng = np.random.RandomState(1)
    gram = rng.rand(40, 48).astype(dtype)  # a Gram with spare capacity: the products read n_w of its columns
    x = rng.randn(30)
    for k in range(10):
        rows = np.sort(rng.choice(40, k, replace=False))
        expected = gram[rows, :30].astype(np.float64) @ x
        np.testing.assert_allclose(gram_rows_product(gram, rows, 30, x), expected, rtol=1e-12, atol=1e-12)
    rows = np.arange(9)
    together = gram_rows_product(gram, rows, 30, x)
    alone = np.array([gram_rows_product(gram, rows[i : i + 1], 30, x)[0] for i in range(9)])
    np.testing.assert_allclose(together, alone, rtol=1e-12, atol=1e-12)


def test_rejected_newton_steps_make_later_ones_dearer():
    """A fit's NewtonRecord: each rejection multiplies the estimated cost, a kept step divides it (never below 1),
    and newton_pays weighs that cost (ijcnn1 at C = 65,536 spent 124 of 167 s in rejected steps)."""
    record = active_face.NewtonRecord()
    record.note(False)
    record.note(False)
    assert record.penalty == active_face.REJECTION_PENALTY**2
    record.note(True)
    assert record.penalty == active_face.REJECTION_PENALTY
    record.note(True)
    record.note(True)
    assert record.penalty == 1.0
    # a slow pairwise rate on a 3,000-point face: worth a Newton step, unless earlier ones were rejected
    args = (6000, 3000, 6000, 0.2, 0.19, 1e-2)
    assert active_face.newton_pays(*args)
    assert not active_face.newton_pays(*args, penalty=active_face.REJECTION_PENALTY**3)
    # a chunk without progress: a Newton step while none has been rejected, and no longer once one was (at
    # C = 65,536 an infinite estimate of the pairwise cost had taken 40 more after the penalty passed 10^6)
    stalled = (6000, 3000, 6000, 0.2, 0.21, 1e-2)
    assert active_face.newton_pays(*stalled)
    assert not active_face.newton_pays(*stalled, penalty=active_face.REJECTION_PENALTY)
    # ... unless the steps since the last Newton step were slow as a whole: a gap that swings without net progress
    penalty = active_face.REJECTION_PENALTY
    assert active_face.newton_pays(*stalled, penalty=penalty, window=(300_000, 0.5, 0.4))
    assert not active_face.newton_pays(*stalled, penalty=penalty, window=(300_000, 0.5, 0.6))  # no progress at all
    assert not active_face.newton_pays(*stalled, penalty=penalty, window=(6000, 0.5, 0.05))  # fast over the window


def test_the_first_chunk_gives_the_new_violators_weight_while_the_conjugate_gradients_are_fast():
    """After a growth the first chunk is one pairwise step per zero-weight violator (within its bounds), then whole
    chunks; a fit whose last conjugate gradients were slow keeps whole chunks from the start."""
    record = active_face.NewtonRecord()
    chunk = 20_000
    assert active_face.first_chunk_steps(chunk, 0, record) == chunk
    assert active_face.first_chunk_steps(chunk, 3000, record) == 3000
    assert active_face.first_chunk_steps(chunk, 10, record) == active_face.FIRST_CHUNK_MIN_STEPS
    assert active_face.first_chunk_steps(chunk, 10**6, record) == chunk
    record.cg_iterations = active_face.FAST_CG_ITERATIONS + 1
    assert active_face.first_chunk_steps(chunk, 3000, record) == chunk


def test_a_solve_that_starts_with_new_violators_takes_a_short_first_chunk_and_reaches_the_optimum():
    """solve_with_newton's first pairwise call gets the violators' quota, the next ones whole chunks; the solve from
    a core set whose last 300 points were just added (zero weight) reaches the same optimum as from every point
    weighted (no zero-weight violators: a whole first chunk)."""
    X, y = make_checkerboard(1500, random_state=1)
    problem = SimplexProblem(X, y, np.full(1500, 1e3), KernelSpec("rbf", gamma=2.0), bias=True, lam=0.0)
    Q = problem.dense_Q()
    inv_c, diag, tol = np.full(1500, 1e-3), np.diag(Q).copy(), 1e-3
    grown = np.zeros(1500)
    grown[:1200] = 1 / 1200
    assert 0 < active_face.zero_weight_violators(grown, Q @ grown) <= 300
    results = {}
    for violators, start in ((0, np.full(1500, 1 / 1500)), (300, grown)):
        alpha, G = start.copy(), Q @ start
        quotas = []

        def pairwise(tol_, max_steps, time_left, alpha=alpha, G=G, quotas=quotas):
            quotas.append(max_steps)
            return inner_solve(Q, alpha, G, diag, 1500, 0.0, SECOND_VERTEX_RULES["imdm"], 0.0, 1.0, tol_, max_steps,
                               time_left, inv_c, STOP_RELATIVE_GAP, NO_LINEAR_TERM, 0.0, 0.0, ROWS_STORED, 1, NO_HELPER)

        steps, gap = solve_with_newton(pairwise, Q, alpha, G, 1500, tol, 10**8, 1e9, relative_gap_of(inv_c), inv_c)
        assert gap <= tol
        results[violators] = alpha @ Q @ alpha
        if violators:
            assert quotas[0] == active_face.FIRST_CHUNK_MIN_STEPS
            assert len(quotas) == 1 or quotas[1] > quotas[0]
        else:
            assert quotas[0] == active_face.MIN_CHUNK_STEPS
    assert abs(results[300] - results[0]) <= 2 * tol * 2 * max(results.values())


def test_faces_are_factorized_up_to_a_larger_size_once_the_conjugate_gradients_are_slow(monkeypatch):
    """Conjugate gradients solve faces above CHOLESKY_MAX_FACE points while they reach their residual within
    CG_EXPECTED_ITERATIONS products and their Newton steps are kept; a slow solve (an ill-conditioned face) or a
    rejected step sends faces up to CHOLESKY_MAX_FACE_SLOW_CG back to the exact factorization, and a fast, kept
    one ends that.  (Its slow solve uses all its iterations, which raises the size further: the next test.)"""
    limit, slow_limit = active_face.CHOLESKY_MAX_FACE, active_face.CHOLESKY_MAX_FACE_SLOW_CG
    monkeypatch.setattr(active_face, "CHOLESKY_MAX_FACE_FAILED_CG", slow_limit)
    record = active_face.NewtonRecord()
    assert active_face.factorizes(limit, record) and not active_face.factorizes(limit + 1, record)
    X, y = make_checkerboard(900, random_state=1)
    face = np.sort(np.random.RandomState(0).choice(900, 600, replace=False))
    for inv_c, landmarks, converges in ((1.0, 200, True), (1e-7, 2, False), (1.0, 200, True)):
        monkeypatch.setattr(active_face, "NYSTROM_POINTS", landmarks)
        inv_cs = np.full(900, inv_c)
        problem = SimplexProblem(X, y, 1.0 / inv_cs, KernelSpec("rbf", gamma=2.0), bias=True, lam=0.0)
        face_system_by_cg(problem.dense_Q(), face, inv_cs, 900, np.full(600, 1.0 / 600), record)
        assert record.cg_converged is converges
        record.note(True, by_cg=True)
        assert active_face.factorizes(slow_limit, record) is not converges
        assert not active_face.factorizes(slow_limit + 1, record)
    penalty = record.penalty
    record.note(False, by_cg=True, n_face=slow_limit)  # converged, but the step from the solution was rejected
    assert active_face.factorizes(slow_limit, record) and record.penalty == penalty  # factorizations take over
    record.note(False, n_face=slow_limit)  # a factorized face's rejection: the next Newton step looks dearer
    assert active_face.factorizes(slow_limit, record) and record.penalty == penalty * active_face.REJECTION_PENALTY
    record.note(False, by_cg=True, n_face=slow_limit + 1)  # a face only conjugate gradients solve
    assert record.penalty == penalty * active_face.REJECTION_PENALTY**2
    record.note(True, by_cg=True, n_face=slow_limit + 1)
    assert not active_face.factorizes(limit + 1, record)


def test_faces_are_factorized_up_to_the_largest_size_after_conjugate_gradients_used_all_their_iterations(
        monkeypatch):
    """Conjugate gradients that use all CG_MAX_ITERATIONS products without reaching their residual (a
    preconditioner that does not hold the face) send faces up to CHOLESKY_MAX_FACE_FAILED_CG to the factorization;
    a converged solve whose Newton step was rejected only those up to CHOLESKY_MAX_FACE_SLOW_CG."""
    slow_limit, failed_limit = active_face.CHOLESKY_MAX_FACE_SLOW_CG, active_face.CHOLESKY_MAX_FACE_FAILED_CG
    assert slow_limit < failed_limit
    X, y = make_checkerboard(900, random_state=1)
    face = np.sort(np.random.RandomState(0).choice(900, 600, replace=False))
    monkeypatch.setattr(active_face, "CG_MAX_ITERATIONS", 3)
    for inv_c, landmarks, used_all in ((1e-7, 2, True), (1.0, 600, False)):
        monkeypatch.setattr(active_face, "NYSTROM_POINTS", landmarks)
        inv_cs = np.full(900, inv_c)
        problem = SimplexProblem(X, y, 1.0 / inv_cs, KernelSpec("rbf", gamma=2.0), bias=True, lam=0.0)
        record = active_face.NewtonRecord()
        face_system_by_cg(problem.dense_Q(), face, inv_cs, 900, np.full(600, 1.0 / 600), record)
        assert (record.cg_iterations == 3) is used_all and record.cg_converged is not used_all
        record.note(False, by_cg=True, n_face=600)
        assert active_face.factorizes(slow_limit, record)
        assert active_face.factorizes(failed_limit, record) is used_all
        assert not active_face.factorizes(failed_limit + 1, record)


def test_the_float64_diagonal_stands_in_for_a_float32_gram_that_cannot_hold_one_over_c():
    """Two identical rows labelled both ways at 1/C = 1e-7: the float32 entry 2 + 1e-7 rounds to 2, the pair's
    2 x 2 block is singular in the Gram, and only the float64 diagonal keeps Q (``diagonal_shortfall``)."""
    Q = np.array([[2.0 + 1e-7, -2.0, 0.5], [-2.0, 2.0 + 1e-7, -0.5], [0.5, -0.5, 2.5]])
    gram = Q.astype(np.float32)
    assert gram[0, 0] == np.float32(2.0)
    rows = np.arange(3)
    shortfall = diagonal_shortfall(gram, np.diag(Q), rows)
    np.testing.assert_allclose(shortfall[:2], 1e-7, rtol=1e-6)
    x = np.array([0.3, 0.5, 0.2])
    np.testing.assert_allclose(gram_rows_product(gram, rows, 3, x, shortfall), Q @ x, rtol=1e-7)
    expected = np.linalg.solve(Q, np.ones(3))
    np.testing.assert_allclose(solve_face_system(gram, diag_face=np.diag(Q)), expected, rtol=1e-6)
    assert solve_face_system(gram) is None or not np.allclose(solve_face_system(gram), expected, rtol=1e-2)


def test_once_a_float32_factorization_failed_the_fit_solves_its_faces_in_float64(monkeypatch):
    """The face of the previous test defeats the float32 solve: the record notes it, the float64 solve answers, and
    the fit's later faces skip the float32 attempt (a well-conditioned one is solved all the same)."""
    Q = np.array([[2.0 + 1e-7, -2.0, 0.5], [-2.0, 2.0 + 1e-7, -0.5], [0.5, -0.5, 2.5]])
    record = active_face.NewtonRecord()
    x = solve_face_system(Q.astype(np.float32), diag_face=np.diag(Q), record=record)
    np.testing.assert_allclose(x, np.linalg.solve(Q, np.ones(3)), rtol=1e-6)
    assert record.float32_failed

    def no_float32_solve(*args):
        raise AssertionError("the float32 solve was tried again")

    monkeypatch.setattr(active_face, "_refined_float32_solve", no_float32_solve)
    well_conditioned = np.array([[2.0, 0.5], [0.5, 1.0]])
    np.testing.assert_allclose(solve_face_system(well_conditioned.astype(np.float32), record=record),
                               np.linalg.solve(well_conditioned, np.ones(2)), rtol=1e-6)
    with pytest.raises(AssertionError, match="tried again"):
        solve_face_system(well_conditioned.astype(np.float32))


def test_the_face_residual_follows_the_solve_tolerance_within_its_bounds():
    """30 tol, within [0.1, 0.3]: the default tol = 1e-2 gets 0.3, a solve to 1e-3 the former 0.1."""
    assert active_face.face_residual_for(1e-2) == pytest.approx(0.3)
    assert active_face.face_residual_for(0.2) == pytest.approx(0.3)
    assert active_face.face_residual_for(5e-3) == pytest.approx(0.15)
    assert active_face.face_residual_for(1e-3) == pytest.approx(0.1)
    assert active_face.face_residual_for(1e-6) == pytest.approx(0.1)


def test_a_face_that_float32_rounding_made_indefinite_is_recorded():
    """300 points of the unit square (RBF, gamma 1) at 1/C = 1e-7: Q's eigenvalues are at least 1e-7, but the
    float32 Gram's rounding (6e-8 per entry) leaves an eigenvalue below zero, so even its float64 factorization
    fails.  The record says so (the core set then recomputes its Gram in float64); Q itself solves."""
    X = np.random.RandomState(0).rand(300, 2)
    squared = (X * X).sum(axis=1)
    Q = np.exp(-(squared[:, None] + squared[None, :] - 2.0 * X @ X.T)) + 1e-7 * np.eye(300)
    assert np.linalg.eigvalsh(Q)[0] > 0.9e-7
    assert np.linalg.eigvalsh(Q.astype(np.float32).astype(np.float64))[0] < 0.0
    record = active_face.NewtonRecord()
    assert solve_face_system(Q.astype(np.float32), diag_face=np.diag(Q), record=record) is None
    assert record.float32_gram_failed
    exact = active_face.NewtonRecord()
    x = solve_face_system(Q, record=exact)
    np.testing.assert_allclose(Q @ x, 1.0, rtol=1e-6)
    assert not exact.float32_gram_failed


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_face_less_a_few_points_is_solved_from_the_face_factorization(dtype):
    """``dropped_face_solve``: the kept points' system solved from the whole face's float64 factor equals a new
    factorization of theirs (to float64's precision; a float32 face's own rounded matrix); too many dropped points
    for the bordered solve to pay, or no factor kept, give None."""
    rng = np.random.RandomState(0)
    X = rng.randn(400, 3)
    squared = (X * X).sum(axis=1)
    Q = np.exp(-(squared[:, None] + squared[None, :] - 2.0 * X @ X.T) / 4.0) + 0.01 * np.eye(400)
    matrix = Q.astype(dtype)
    record = active_face.NewtonRecord(float32_failed=True)  # a float32 face goes to the float64 factorization
    factorized = active_face.FactorizedFace()
    solve_face_system(matrix, diag_face=np.diag(Q), record=record, factorized=factorized)
    kept = np.sort(rng.choice(400, 400 - 400 // active_face.BORDERED_MAX_SHARE, replace=False))
    reduced = matrix.astype(np.float64)[np.ix_(kept, kept)]
    reduced[np.diag_indices_from(reduced)] = np.diag(Q)[kept]
    np.testing.assert_allclose(active_face.dropped_face_solve(factorized, kept, 0.1),
                               np.linalg.solve(reduced, np.ones(len(kept))), rtol=1e-9)
    assert active_face.dropped_face_solve(factorized, kept[:-1], 0.1) is None
    assert active_face.dropped_face_solve(active_face.FactorizedFace(), kept, 0.1) is None
