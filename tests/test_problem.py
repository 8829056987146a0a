"""SimplexProblem: the extended kernel Q, its compiled evaluators, objective and duality gap."""

import numpy as np
import pytest
import scipy.sparse as sp
from reference_kernels import sklearn_kernel
from scipy.optimize import minimize

from coresvm.kernels import KernelSpec, squared_norms
from coresvm.problem import (
    PARALLEL_MIN_WORK,
    SimplexProblem,
    extended_column,
    extended_row,
    weighted_rows,
)

SPECS = {
    "rbf": KernelSpec("rbf", gamma=0.2),
    "poly": KernelSpec("poly", gamma=0.3, coef0=-0.4, degree=3),
    "linear": KernelSpec("linear"),
    "sigmoid": KernelSpec("sigmoid", gamma=0.1, coef0=0.2),
}
STORAGES = ["float64", "float32", "csr"]



def make_data(m, d, storage, seed):
    """(X in the requested storage, the same numbers as dense float64, y, per-sample C)."""
    rng = np.random.RandomState(seed)
    ref = rng.randn(m, d)
    if storage == "csr":
        ref *= rng.rand(m, d) < 0.5
        ref[m // 3] = 0.0  # an empty row
        X = sp.csr_matrix(ref)
    elif storage == "float32":
        X = ref.astype(np.float32)
        ref = X.astype(np.float64)
    else:
        X = ref
    y = np.where(rng.rand(m) < 0.5, -1.0, 1.0)
    C = rng.uniform(0.2, 5.0, m)  # per-sample C
    return X, ref, y, C


def reference_Q(ref, y, C, spec, bias):
    K = sklearn_kernel(ref, ref, spec)
    return np.outer(y, y) * (K + (1.0 if bias else 0.0)) + np.diag(1.0 / C)


def make_problem(m=30, d=5, storage="float64", spec="rbf", bias=True, lam=0.0, seed=0):
    X, ref, y, C = make_data(m, d, storage, seed)
    problem = SimplexProblem(X, y, C, SPECS[spec], bias=bias, lam=lam)
    return problem, reference_Q(ref, y, C, SPECS[spec], bias)


def random_simplex(rng, m, p_zero=0.4):
    a = rng.rand(m) * (rng.rand(m) > p_zero)
    a[rng.randint(m)] += 0.1
    return a / a.sum()


# ---------------------------------------------------------------------------
# dense_Q and diag
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("spec", list(SPECS))
def test_dense_Q_and_diag(spec, storage, bias):
    problem, Q_ref = make_problem(storage=storage, spec=spec, bias=bias, seed=1)
    tol = 1e-4 if storage == "float32" else 1e-12  # dense_Q uses float32 BLAS on float32 data
    Q = problem.dense_Q()
    assert Q.shape == (30, 30)
    np.testing.assert_allclose(Q, Q_ref, rtol=tol, atol=tol)
    np.testing.assert_allclose(Q, Q.T, rtol=0, atol=tol)
    np.testing.assert_allclose(problem.diag, np.diag(Q_ref), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(problem.diag, np.diag(Q), rtol=tol, atol=tol)


def test_dense_Q_per_sample_C_and_labels_matter():
    problem, Q_ref = make_problem(spec="linear", bias=True, seed=2)
    # changing one C_i changes exactly Q_ii
    C2 = problem.C.copy()
    C2[4] *= 3.0
    other = SimplexProblem(problem.X, problem.y, C2, problem.kernel, bias=True)
    diff = other.dense_Q() - problem.dense_Q()
    expected = np.zeros_like(diff)
    expected[4, 4] = 1.0 / C2[4] - 1.0 / problem.C[4]
    np.testing.assert_allclose(diff, expected, atol=1e-12)
    # flipping y_0 flips row and column 0 off the diagonal
    y2 = problem.y.copy()
    y2[0] = -y2[0]
    flipped = SimplexProblem(problem.X, y2, problem.C, problem.kernel, bias=True).dense_Q()
    np.testing.assert_allclose(flipped[0, 1:], -Q_ref[0, 1:], atol=1e-12)
    np.testing.assert_allclose(flipped[1:, 1:], Q_ref[1:, 1:], atol=1e-12)
    np.testing.assert_allclose(flipped[0, 0], Q_ref[0, 0], atol=1e-12)


def test_dense_Q_refuses_large_problems():
    X = np.zeros((5001, 1))
    problem = SimplexProblem(X, np.ones(5001), np.ones(5001), KernelSpec("linear"))
    with pytest.raises(ValueError):
        problem.dense_Q()


# ---------------------------------------------------------------------------
# compiled evaluators
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("spec", ["rbf", "poly", "linear"])
def test_extended_column(spec, storage, bias):
    problem, Q_ref = make_problem(storage=storage, spec=spec, bias=bias, seed=3)
    Q = problem.dense_Q()
    loose = 1e-4 if storage == "float32" else 1e-12
    m = problem.n_points
    for point in (0, 1, 10, m // 3, m - 1):
        out = np.full(m, np.nan)
        extended_column(*problem.kernel_args(), point, out)
        np.testing.assert_allclose(out, Q[:, point], rtol=loose, atol=loose)
        # the compiled path works in float64 even on float32 storage
        np.testing.assert_allclose(out, Q_ref[:, point], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("storage", STORAGES)
def test_extended_column_parallel_path(storage):
    """m >= PARALLEL_MIN_WORK // 20 rows takes the prange branch; compare with a kernel column."""
    m = PARALLEL_MIN_WORK // 20 + 7
    X, ref, y, C = make_data(m, 3, storage, seed=4)
    spec = SPECS["rbf"]
    problem = SimplexProblem(X, y, C, spec, bias=True)
    for point in (0, 5, m - 1):
        out = np.full(m, np.nan)
        extended_column(*problem.kernel_args(), point, out)
        expected = y * y[point] * (sklearn_kernel(ref, ref[point : point + 1], spec)[:, 0] + 1.0)
        expected[point] += 1.0 / C[point]
        np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("spec", ["rbf", "poly", "linear", "sigmoid"])
def test_extended_row(spec, storage, bias):
    problem, Q_ref = make_problem(storage=storage, spec=spec, bias=bias, seed=5)
    Q = problem.dense_Q()
    loose = 1e-4 if storage == "float32" else 1e-12
    rng = np.random.RandomState(0)
    m = problem.n_points
    for point in (0, 7, m - 1):
        targets = rng.choice(m, 12, replace=False).astype(np.int64)
        targets[3] = point  # include the diagonal entry
        n_targets = 9  # only a prefix of the buffer is used
        out = np.full(len(targets), np.nan)
        extended_row(*problem.kernel_args(), point, targets, n_targets, out)
        np.testing.assert_allclose(out[:n_targets], Q[point, targets[:n_targets]], rtol=loose, atol=loose)
        np.testing.assert_allclose(out[:n_targets], Q_ref[point, targets[:n_targets]], rtol=1e-12, atol=1e-12)
        assert np.isnan(out[n_targets:]).all()  # nothing written past n_targets


@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("spec", ["rbf", "poly", "linear"])
def test_weighted_rows_small(spec, storage):
    problem, Q_ref = make_problem(storage=storage, spec=spec, bias=True, seed=6)
    Q = problem.dense_Q()
    loose = 1e-4 if storage == "float32" else 1e-11
    rng = np.random.RandomState(1)
    m = problem.n_points
    points = rng.randint(0, m, 15).astype(np.int64)
    targets = rng.choice(m, 11, replace=False).astype(np.int64)
    targets[0] = points[2]  # a diagonal entry in the block
    weights = rng.rand(11)
    n_points, n_targets = 12, 8
    assert n_points * n_targets < PARALLEL_MIN_WORK
    out = np.full(len(points), np.nan)
    weighted_rows(*problem.kernel_args(), points, n_points, targets, n_targets, weights, out)
    block = Q[np.ix_(points[:n_points], targets[:n_targets])]
    np.testing.assert_allclose(out[:n_points], block @ weights[:n_targets], rtol=loose, atol=loose)
    block_ref = Q_ref[np.ix_(points[:n_points], targets[:n_targets])]
    np.testing.assert_allclose(out[:n_points], block_ref @ weights[:n_targets], rtol=1e-11, atol=1e-11)
    assert np.isnan(out[n_points:]).all()


@pytest.mark.parametrize("storage", STORAGES)
def test_weighted_rows_parallel_path(storage):
    m = 520
    problem, Q_ref = make_problem(m=m, d=4, storage=storage, spec="rbf", bias=True, seed=7)
    rng = np.random.RandomState(2)
    points = rng.permutation(m)[:500].astype(np.int64)
    targets = rng.permutation(m)[:500].astype(np.int64)
    weights = rng.rand(500) - 0.3
    assert 500 * 500 >= PARALLEL_MIN_WORK
    out = np.full(500, np.nan)
    weighted_rows(*problem.kernel_args(), points, 500, targets, 500, weights, out)
    expected = Q_ref[np.ix_(points, targets)] @ weights
    np.testing.assert_allclose(out, expected, rtol=1e-10, atol=1e-10)
    if storage != "float32":
        np.testing.assert_allclose(out, problem.dense_Q()[np.ix_(points, targets)] @ weights, rtol=1e-10, atol=1e-10)


def test_kernel_args_layout():
    problem, _ = make_problem(spec="poly", bias=False)
    data, norms, kind, gamma, coef0, degree, y, inv_c, bias = problem.kernel_args()
    assert kind == problem.kernel.code and gamma == 0.3 and coef0 == -0.4 and degree == 3.0
    assert bias == 0.0
    np.testing.assert_allclose(inv_c, 1.0 / problem.C)
    np.testing.assert_allclose(norms, (np.asarray(problem.X) ** 2).sum(axis=1))


# ---------------------------------------------------------------------------
# objective and duality gap
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("lam", [0.0, 1.0])
@pytest.mark.parametrize("spec", ["rbf", "poly"])
def test_objective_and_gap_formulas(spec, lam):
    problem, Q_ref = make_problem(spec=spec, lam=lam, seed=8)
    rng = np.random.RandomState(3)
    q = np.diag(Q_ref)
    for _ in range(5):
        a = random_simplex(rng, problem.n_points)
        f = a @ Q_ref @ a - lam * a @ q
        assert problem.objective(a) == pytest.approx(f, rel=1e-12)
        assert problem.objective(a, Q_ref) == pytest.approx(f, rel=1e-12)
        grad = 2 * Q_ref @ a - lam * q
        # max over simplex vertices u of (a - u)' grad
        gap = max((a - np.eye(len(a))[k]) @ grad for k in range(len(a)))
        assert problem.duality_gap(a) == pytest.approx(gap, rel=1e-10, abs=1e-12)
        assert problem.duality_gap(a) >= 0


def _polished_on_support(Q, lin, a):
    """SLSQP's point made exact: the KKT system of min a'Qa - lin'a on its support (``2 Q_SS a_S - lin_S = mu``,
    ``sum a_S = 1``), the support grown by the most violating point or shrunk by the most negative weight until
    the solution is feasible and no point outside has a gradient below ``mu``.  SLSQP alone stops on a line
    search in some cases, depending on rounding (e.g. one BLAS thread or two)."""
    support = a > 1e-9 * a.max()
    for _ in range(2 * len(a)):
        idx = np.flatnonzero(support)
        k = len(idx)
        kkt = np.zeros((k + 1, k + 1))
        kkt[:k, :k], kkt[:k, k], kkt[k, :k] = 2 * Q[np.ix_(idx, idx)], -1.0, 1.0
        solution = np.linalg.solve(kkt, np.append(lin[idx], 1.0))
        if solution[:k].min() < 0:
            support[idx[np.argmin(solution[:k])]] = False
            continue
        exact = np.zeros(len(a))
        exact[idx] = solution[:k]
        grad = 2 * Q @ exact - lin
        worst = int(np.argmin(grad))
        if grad[worst] >= solution[k] - 1e-12 * max(1.0, abs(solution[k])):
            return exact
        support[worst] = True
    return a


def exact_minimum(Q, lam):
    """Reference minimizer by SLSQP on the explicit matrix, made exact on its support (``_polished_on_support``).

    SLSQP may stop with status 8 (line search) at this precision; the returned point is
    feasible, so f(a_star) >= f*, and its (independently computed) FW gap certifies it is near f*.
    """
    m = Q.shape[0]
    lin = lam * np.diag(Q)
    result = minimize(
        lambda a: a @ Q @ a - lin @ a,
        np.full(m, 1.0 / m),
        jac=lambda a: 2 * Q @ a - lin,
        bounds=[(0, None)] * m,
        constraints=({"type": "eq", "fun": lambda a: a.sum() - 1, "jac": lambda a: np.ones(m)},),
        method="SLSQP",
        options={"ftol": 1e-13, "maxiter": 2000},
    )
    a = _polished_on_support(Q, lin, np.clip(result.x, 0.0, None))
    a /= a.sum()
    grad = 2 * Q @ a - lin
    assert a @ grad - grad.min() < 1e-5
    return a, float(a @ Q @ a - lin @ a)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("lam", [0.0, 1.0])
@pytest.mark.parametrize("spec", ["rbf", "poly", "linear"])
def test_gap_bounds_suboptimality(spec, lam, bias):
    X, ref, y, C = make_data(40, 3, "float64", seed=9)
    kernel = KernelSpec("poly", gamma=0.3, coef0=1.0, degree=3) if spec == "poly" else SPECS[spec]
    problem = SimplexProblem(X, y, C, kernel, bias=bias, lam=lam)
    Q = problem.dense_Q()
    assert np.linalg.eigvalsh(Q).min() > 0  # convex problem: the FW gap bounds f(a) - f*
    a_star, f_star = exact_minimum(Q, lam)
    assert problem.objective(a_star, Q) == pytest.approx(f_star, rel=1e-12)
    assert 0 <= problem.duality_gap(a_star, Q) < 1e-5
    rng = np.random.RandomState(4)
    m = problem.n_points
    candidates = [np.full(m, 1.0 / m), np.eye(m)[0], np.eye(m)[m - 1]]
    candidates += [random_simplex(rng, m) for _ in range(10)]
    candidates += [0.9 * a_star + 0.1 * random_simplex(rng, m) for _ in range(5)]  # close to optimal
    for a in candidates:
        gap = problem.duality_gap(a, Q)
        subopt = problem.objective(a, Q) - f_star  # f_star >= f*, so this never overstates f(a) - f*
        assert gap >= 0
        assert subopt >= -1e-5
        assert subopt <= gap + 1e-12


def rows_with_nonzeros(n_rows: int, n_features: int, per_row: int) -> sp.csr_matrix:
    """A CSR matrix of ones in the first ``per_row`` columns of every row."""
    indices = np.tile(np.arange(per_row), n_rows)
    indptr = np.arange(0, n_rows * per_row + 1, per_row)
    return sp.csr_matrix((np.ones(n_rows * per_row), indices, indptr), shape=(n_rows, n_features))


def test_core_set_problems_read_dense_enough_csr_data_as_dense_arrays():
    """CSR dense enough that BLAS's dense products beat sparse ones (a density threshold that falls with the
    number of features), whose dense copy fits 256 MB: the core-set solvers (compact) get a dense array with the
    same values; sparser data, and the other solvers, keep CSR."""
    from coresvm.problem import worth_densifying

    rng = np.random.RandomState(0)
    dense_enough = sp.random(200, 20, density=0.5, format="csr", random_state=rng)
    too_sparse = sp.random(200, 200, density=0.01, format="csr", random_state=rng)
    assert worth_densifying(dense_enough) and not worth_densifying(too_sparse)
    # a9a's shape (123 binary features, 14 nonzero per row) stays sparse; 1,000 features at 30% are made dense
    assert not worth_densifying(rows_with_nonzeros(1000, 123, 14))
    assert not worth_densifying(rows_with_nonzeros(1000, 1000, 100))
    assert worth_densifying(rows_with_nonzeros(1000, 1000, 300))
    large = rows_with_nonzeros(400_000, 100, 50)
    assert not worth_densifying(large)  # dense enough, but its dense copy would take 320 MB
    y = np.where(rng.rand(200) > 0.5, 1.0, -1.0)
    spec = KernelSpec("rbf", gamma=0.5)
    compact = SimplexProblem(dense_enough, y, np.full(200, 1.0), spec, compact=True)
    assert isinstance(compact.X, np.ndarray)
    np.testing.assert_array_equal(compact.X, dense_enough.toarray())
    assert sp.issparse(SimplexProblem(too_sparse, y, np.full(200, 1.0), spec, compact=True).X)
    assert sp.issparse(SimplexProblem(dense_enough, y, np.full(200, 1.0), spec).X)


def test_core_set_problems_read_sparse_enough_dense_data_as_csr():
    """Dense arrays of one-hot-like data (KDD99-10%: 118 features, 11% nonzero) are read as CSR by the core-set
    solvers, with the same values; denser data, few features, and the other solvers keep the dense array."""
    from coresvm.problem import sparse_layout

    rng = np.random.RandomState(0)
    one_hot = sp.random(300, 118, density=0.11, random_state=rng).toarray()
    half_full = sp.random(300, 118, density=0.5, random_state=rng).toarray()
    few_features = sp.random(300, 8, density=0.1, random_state=rng).toarray()
    for dtype in (np.float64, np.float32):
        copy = sparse_layout(one_hot.astype(dtype))
        assert copy.dtype == dtype and copy.has_canonical_format
        np.testing.assert_array_equal(copy.toarray(), one_hot.astype(dtype))
    assert sparse_layout(half_full) is None and sparse_layout(few_features) is None
    assert sparse_layout(sp.csr_matrix(one_hot)) is None and sparse_layout(one_hot.astype(np.int64)) is None
    assert sparse_layout(np.zeros((0, 118))) is None
    empty_rows = one_hot.copy()
    empty_rows[::3] = 0.0
    np.testing.assert_array_equal(sparse_layout(empty_rows).toarray(), empty_rows)
    y = np.where(rng.rand(300) > 0.5, 1.0, -1.0)
    spec = KernelSpec("rbf", gamma=0.5)
    compact = SimplexProblem(one_hot, y, np.full(300, 1.0), spec, compact=True)
    assert sp.issparse(compact.X)
    np.testing.assert_array_equal(compact.X.toarray(), one_hot)
    assert isinstance(SimplexProblem(one_hot, y, np.full(300, 1.0), spec).X, np.ndarray)
    assert isinstance(SimplexProblem(half_full, y, np.full(300, 1.0), spec, compact=True).X, np.ndarray)


def test_kept_norms_are_the_stored_norms_or_none():
    """``kept_norms_of`` gathers the squared norms a problem stores (every non-compact problem, and compact CSR
    ones) and is None for a compact dense problem, which keeps none; ``norms_of`` gives the same values in every
    case."""
    rng = np.random.RandomState(0)
    dense = rng.randn(120, 3)
    csr = sp.random(120, 40, density=0.1, random_state=rng, format="csr")
    y = np.where(rng.rand(120) > 0.5, 1.0, -1.0)
    rows = np.array([5, 0, 77, 119])
    spec = KernelSpec("rbf", gamma=0.5)
    for X, compact, kept in [(dense, False, True), (dense, True, False), (csr, True, True)]:
        problem = SimplexProblem(X, y, np.full(120, 1.0), spec, compact=compact)
        expected = squared_norms(X[rows])
        np.testing.assert_array_equal(problem.norms_of(rows), expected)
        if kept:
            np.testing.assert_array_equal(problem.kept_norms_of(rows), expected)
        else:
            assert problem.kept_norms_of(rows) is None


def test_rows_far_from_the_origin_are_centered_rather_than_read_as_csr():
    """One-hot columns beside a column near 1,000 (5% nonzero): that column is centered, and the rows stay dense
    (the one-hot columns keep their zeros).  Read as CSR instead (uncentered), the float32 Gram lost the digits the
    fit needs: 51% accuracy against 93% in a review's check."""
    rng = np.random.RandomState(0)
    X = np.zeros((400, 40))
    X[:, 0] = 1000.0 + rng.rand(400)
    X[np.arange(400), 1 + rng.randint(0, 39, 400)] = 1.0
    y = np.where(rng.rand(400) > 0.5, 1.0, -1.0)
    problem = SimplexProblem(X, y, np.full(400, 1.0), KernelSpec("rbf", gamma=0.5), compact=True)
    assert isinstance(problem.X, np.ndarray)
    expected = X.copy()
    expected[:, 0] -= X[:, 0].mean()
    np.testing.assert_allclose(problem.X, expected)


def test_rows_of_gathers_as_indexing_does_for_indices_masks_csr_and_memory_maps(tmp_path):
    """SimplexProblem.rows_of is X[rows]: np.take for an integer index on an in-memory array, the rows' own indexing
    otherwise (a boolean mask must not be read as the indices 0 and 1)."""
    from coresvm.problem import SimplexProblem

    rng = np.random.RandomState(0)
    X = rng.randn(50, 3)
    mapped_path = tmp_path / "X.npy"
    np.save(mapped_path, X)
    index = rng.permutation(50)[:20]
    mask = rng.rand(50) > 0.5
    for data in (X, sp.csr_matrix(np.where(np.abs(X) > 0.5, X, 0.0)), np.load(mapped_path, mmap_mode="r")):
        problem = SimplexProblem(data, np.where(rng.rand(50) > 0.5, 1.0, -1.0), np.ones(50), KernelSpec("rbf", 0.5))
        dense = data.toarray() if sp.issparse(data) else np.asarray(data)
        for rows in (index, index.astype(np.int32), mask):
            gathered = problem.rows_of(rows)
            np.testing.assert_array_equal(gathered.toarray() if sp.issparse(gathered) else np.asarray(gathered),
                                          dense[rows])
