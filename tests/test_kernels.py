"""Kernel evaluation (BLAS path and compiled primitives) against scikit-learn references."""

import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp
from reference_kernels import sklearn_kernel
from scipy.spatial.distance import pdist
from sklearn.metrics.pairwise import linear_kernel, rbf_kernel

from coresvm.kernels import (
    KERNEL_CODES,
    RBF_FACTOR_LIMIT_FLOAT32,
    KernelSpec,
    as_solver_data,
    exp_in_place,
    exp_weighted_sums,
    fused_rbf_sums,
    kernel_block,
    kernel_diagonal,
    kernel_product,
    rbf_factorizable,
    resolve_gamma,
    scaled_transposed,
    sparse_exp_sums,
    sparse_times_dense,
    squared_norms,
    weighted_sums,
)
from coresvm.problem import SimplexProblem, extended_column, extended_row

# coef0 < 0 for poly makes gamma*dot + coef0 negative for some pairs (odd power of a negative base)
SPECS = {
    "rbf": KernelSpec("rbf", gamma=0.15),
    "poly": KernelSpec("poly", gamma=0.3, coef0=-0.5, degree=3),
    "poly2": KernelSpec("poly", gamma=0.2, coef0=1.5, degree=2),
    "linear": KernelSpec("linear"),
    "sigmoid": KernelSpec("sigmoid", gamma=0.1, coef0=-0.3),
}



def sparse_data(n, d, density, seed):
    """A CSR matrix with a few empty rows, plus its dense float64 copy."""
    rng = np.random.RandomState(seed)
    dense = rng.randn(n, d) * (rng.rand(n, d) < density)
    dense[[1, n // 2]] = 0.0  # empty rows
    return sp.csr_matrix(dense), dense


def make_inputs(kind, seed=0, n=23, m=17, d=6):
    """(A, B, A_ref, B_ref, rtol, atol): inputs of the given storage and float64 references."""
    rng = np.random.RandomState(seed)
    if kind == "csr":
        A, A_ref = sparse_data(n, d, 0.5, seed)
        B, B_ref = sparse_data(m, d, 0.5, seed + 100)
        return A, B, A_ref, B_ref, 1e-12, 1e-12
    A_ref, B_ref = rng.randn(n, d), rng.randn(m, d)
    if kind == "float32":
        A, B = A_ref.astype(np.float32), B_ref.astype(np.float32)
        # the reference sees the same (rounded) numbers, but the block is computed in float32 BLAS
        return A, B, A.astype(np.float64), B.astype(np.float64), 1e-4, 1e-4
    return A_ref, B_ref, A_ref, B_ref, 1e-12, 1e-12


# ---------------------------------------------------------------------------
# kernel_block
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["float64", "float32", "csr"])
@pytest.mark.parametrize("spec_name", list(SPECS))
def test_kernel_block_matches_sklearn(kind, spec_name):
    spec = SPECS[spec_name]
    A, B, A_ref, B_ref, rtol, atol = make_inputs(kind, seed=3)
    K = kernel_block(A, B, spec)
    expected = sklearn_kernel(A_ref, B_ref, spec)
    assert isinstance(K, np.ndarray) and not sp.issparse(K)
    assert K.dtype == np.float64
    assert K.shape == (A.shape[0], B.shape[0])
    np.testing.assert_allclose(K, expected, rtol=rtol, atol=atol)
    if kind == "csr":  # the inputs are left sparse (and unmodified)
        assert sp.issparse(A) and sp.issparse(B)
        np.testing.assert_array_equal(A.toarray(), A_ref)


def test_kernel_block_poly_has_negative_bases():
    """Guard on the test data: the odd-degree poly spec really exercises negative bases."""
    A, B, *_ = make_inputs("float64", seed=3)
    spec = SPECS["poly"]
    assert (spec.gamma * (A @ B.T) + spec.coef0 < 0).any()


@pytest.mark.parametrize("spec_name", ["rbf", "poly", "linear", "sigmoid"])
def test_kernel_block_mixed_dense_and_sparse(spec_name):
    spec = SPECS[spec_name]
    A, A_ref = sparse_data(15, 5, 0.6, 1)
    B = np.random.RandomState(2).randn(9, 5)
    expected = sklearn_kernel(A_ref, B, spec)
    np.testing.assert_allclose(kernel_block(A, B, spec), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(kernel_block(B, A, spec), expected.T, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("spec_name", sorted(SPECS))
@pytest.mark.parametrize("sparse_a", [False, True])
@pytest.mark.parametrize("sparse_b", [False, True])
@pytest.mark.parametrize("coef_shape", [(37,), (37, 3)])
@pytest.mark.parametrize("n_a", [300, 11])  # more rows than B (B made dense if sparse), fewer (A made dense)
def test_kernel_product_equals_block_times_coef(spec_name, sparse_a, sparse_b, coef_shape, n_a):
    A_sparse, A = sparse_data(n_a, 8, 0.5, seed=1)
    B_sparse, B = sparse_data(37, 8, 0.5, seed=2)
    coef = np.random.RandomState(3).randn(*coef_shape)
    expected = sklearn_kernel(A, B, SPECS[spec_name]) @ coef
    got = kernel_product(A_sparse if sparse_a else A, B_sparse if sparse_b else B, SPECS[spec_name], coef)
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("n_threads", [1, 2])
def test_kernel_product_blocks_and_threads(monkeypatch, n_threads):
    import coresvm.kernels as kernels

    monkeypatch.setattr(kernels, "BLOCK_VALUES", 64)  # 8-row blocks: many of them
    monkeypatch.setattr(kernels, "GEMM_MIN_ROWS", 8)
    A, B = np.random.RandomState(0).randn(203, 5), np.random.RandomState(1).randn(11, 5)
    coef = np.random.RandomState(2).randn(11)
    got = kernel_product(A, B, SPECS["rbf"], coef, n_threads=n_threads)
    np.testing.assert_allclose(got, rbf_kernel(A, B, gamma=0.15) @ coef, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("n_features", [1, 2, 8, 9])  # the fused float32 loop up to FUSED_MAX_FEATURES, then BLAS
@pytest.mark.parametrize("n_threads", [1, 2])
def test_float32_rbf_product_of_few_features_is_within_float32_rounding(monkeypatch, n_features, n_threads):
    """Dense float32 RBF products of few features run fused_rbf_sums (squared distances, exp and weighted sum per
    row); the result is the float64 product to float32 rounding, also far from the origin, where the factorized
    form is not allowed."""
    import coresvm.kernels as kernels

    monkeypatch.setattr(kernels, "BLOCK_VALUES", 64)  # many row blocks
    monkeypatch.setattr(kernels, "GEMM_MIN_ROWS", 8)
    calls = []
    monkeypatch.setattr(kernels, "fused_rbf_sums", lambda *args: calls.append(1) or fused_rbf_sums(*args))
    rng = np.random.RandomState(0)
    A, B = 3.0 * rng.randn(301, n_features) + 5.0, 3.0 * rng.randn(57, n_features) + 5.0
    coef = rng.randn(57)
    gamma = 2.0 / n_features
    expected = rbf_kernel(A, B, gamma=gamma) @ coef
    got = kernel_product(A, B, KernelSpec("rbf", gamma), coef, n_threads=n_threads, precision=np.float32)
    assert bool(calls) == (n_features <= kernels.FUSED_MAX_FEATURES)
    np.testing.assert_allclose(got, expected, rtol=0, atol=2e-6 * np.abs(coef).sum())


@pytest.mark.parametrize("sparse", [False, True])
def test_norms_not_given_are_computed_only_when_needed_and_from_the_rows_before_the_float32_cast(monkeypatch, sparse):
    """The core set scores candidates without their squared norms unless the problem keeps them: the fused loop
    (few features) must not compute any (at 4M checkerboard rows that took 0.8 s of a fit); the factorized form
    computes them from the rows as given, so a product without norms equals, bit for bit, one given the float64
    norms of its rows."""
    import coresvm.kernels as kernels

    rng = np.random.RandomState(3)
    A, B = rng.rand(200, 2), rng.rand(40, 2)
    coef = rng.randn(40)
    spec = KernelSpec("rbf", 0.7)

    def no_norms(X):
        raise AssertionError("the fused loop needs no norms")

    with monkeypatch.context() as patch:
        patch.setattr(kernels, "squared_norms", no_norms)
        kernel_product(A, B, spec, coef, precision=np.float32)
    A, B = rng.rand(200, 12), rng.rand(40, 12)  # beyond FUSED_MAX_FEATURES: the factorized form
    A[A < 0.5] = 0.0
    A = sp.csr_matrix(A) if sparse else A
    given = kernel_product(A, B, spec, coef, squared_norms(A), squared_norms(B), precision=np.float32)
    np.testing.assert_array_equal(kernel_product(A, B, spec, coef, precision=np.float32), given)


@pytest.mark.parametrize("layout", ["few features", "dense", "sparse candidates", "sparse support"])
def test_float32_products_sum_in_float64(layout):
    """The core-set solvers' sums ``(Q a)_t`` cancel far below the total of their terms ``sum_j |c_j k_tj|``
    (ijcnn1 at C = 65,536: ~1e-8 of it).  float32 products must add their terms in float64: float32 sums (sgemv)
    were off by 8e-9 to 2e-8 of that total here, float64 ones by under 1e-9 (the float32 kernel values' own
    rounding)."""
    rng = np.random.RandomState(3)
    n_features = 3 if layout == "few features" else 20  # the fused loop, then BLAS
    A, B = 0.3 * rng.rand(200, n_features), 0.3 * rng.rand(20000, n_features)
    if layout == "sparse candidates":
        A = sp.csr_matrix(A * (rng.rand(*A.shape) < 0.5))
    if layout == "sparse support":  # fewer candidates than a sparse support: the transposed product
        A, B = A[:50], sp.csr_matrix(B * (rng.rand(*B.shape) < 0.5))
    K = rbf_kernel(A.toarray() if sp.issparse(A) else A, B.toarray() if sp.issparse(B) else B, gamma=0.5)
    coef = rng.choice([-1.0, 1.0], size=20000) / 20000
    coef -= coef.mean()
    expected, total = K @ coef, K @ np.abs(coef)
    assert np.max(np.abs(expected) / total) < 2e-3  # the cancellation this test is about
    got = kernel_product(A, B, KernelSpec("rbf", gamma=0.5), coef, precision=np.float32)
    assert np.max(np.abs(got - expected) / total) < 2e-9


def rows_of_every_length(n_columns: int, dtype, index_dtype) -> sp.csr_matrix:
    """CSR rows with 0..9 nonzeros (the compiled loop takes four at a time, then one), unsorted indices."""
    rng = np.random.RandomState(5)
    rows = [rng.permutation(n_columns)[: k % 10] for k in range(40)]
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(index_dtype)
    indices = np.concatenate(rows).astype(index_dtype)
    return sp.csr_matrix((rng.randn(len(indices)).astype(dtype), indices, indptr), shape=(40, n_columns))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("n_columns", [1, 7, 5000])  # 5,000: three column tiles, the last one partial
def test_sparse_times_dense_equals_scipy(dtype, index_dtype, n_columns):
    A = rows_of_every_length(23, dtype, index_dtype)
    right = np.random.RandomState(6).randn(23, n_columns).astype(dtype)
    got = sparse_times_dense(A, right)
    assert got.dtype == dtype and got.flags.c_contiguous
    expected = A.astype(np.float64) @ right.astype(np.float64)
    np.testing.assert_allclose(got, expected, rtol=0, atol=(1e-5 if dtype == np.float32 else 1e-12))


def test_sparse_times_dense_other_operands_use_scipy():
    A = rows_of_every_length(23, np.float64, np.int32)
    right = np.random.RandomState(6).randn(40, 23).T  # not C-contiguous
    np.testing.assert_allclose(sparse_times_dense(A, right), A @ right, atol=1e-12)
    np.testing.assert_allclose(sparse_times_dense(A.tocsc(), np.ascontiguousarray(right)), A @ right, atol=1e-12)
    assert sparse_times_dense(A[:0], np.ascontiguousarray(right)).shape == (0, 40)


def test_sparse_exp_sums_equals_three_passes():
    A = rows_of_every_length(23, np.float32, np.int32)
    A.data *= np.float32(0.1)
    right = (0.1 * np.random.RandomState(6).randn(23, 5000)).astype(np.float32)
    coef = np.random.RandomState(7).randn(5000)
    expected = np.exp(A.astype(np.float64) @ right.astype(np.float64)) @ coef
    np.testing.assert_allclose(sparse_exp_sums(A, right, coef), expected, rtol=0, atol=2e-6 * np.abs(coef).sum())
    # a row range is read in place and gives the sliced rows' sums bit for bit
    np.testing.assert_array_equal(sparse_exp_sums(A, right, coef, 5, 17), sparse_exp_sums(A[5:17], right, coef))
    assert sparse_exp_sums(A, right, coef, 9, 9).shape == (0,)


def test_a_sparse_support_made_dense_gives_the_dense_support_scores_bit_for_bit():
    # sparse candidates against a sparse support that kernel_product makes dense: its operands are written from the
    # nonzeros (scaled_transposed), and the scores are those of the support given dense, bit for bit (norms given)
    rng = np.random.RandomState(9)
    X = sp.random(3000, 40, density=0.2, format="csr", random_state=rng)
    A, B = X[:2000], X[2000:]
    coef = rng.randn(1000)
    spec = KernelSpec("rbf", gamma=0.5)
    norms_a, norms_b = squared_norms(A), squared_norms(B)
    for precision in (np.float32, np.float64):
        scores = kernel_product(A, B, spec, coef, norms_a, norms_b, precision=precision)
        np.testing.assert_array_equal(scores, kernel_product(A, B.toarray(), spec, coef, norms_a, norms_b,
                                                             precision=precision))
        np.testing.assert_allclose(scores, rbf_kernel(A, B, gamma=0.5) @ coef, rtol=0,
                                   atol=1e-5 * np.abs(coef).sum())
    # duplicate entries are summed first, as a dense copy sums them
    doubled = sp.csr_matrix((np.repeat(B.data / 2, 2), np.repeat(B.indices, 2), 2 * B.indptr), shape=B.shape)
    assert not doubled.has_canonical_format
    single = kernel_product(A, B, spec, coef, norms_a, norms_b, precision=np.float32)
    np.testing.assert_allclose(kernel_product(A, doubled, spec, coef, precision=np.float32), single, rtol=1e-6)
    # several columns, and blocks past float32's exponent range (summed unfactorized, the unscaled operand)
    columns = rng.randn(1000, 3)
    np.testing.assert_array_equal(kernel_product(A, B, spec, columns, norms_a, norms_b, precision=np.float32),
                                  kernel_product(A, B.toarray(), spec, columns, norms_a, norms_b,
                                                 precision=np.float32))
    far = A.copy()
    far.data[far.indptr[1500]:] *= 30.0  # the last blocks' norms put exp(2g <a, b>) past float32's range
    norms_far = squared_norms(far)
    assert not rbf_factorizable(spec, norms_far, norms_b, RBF_FACTOR_LIMIT_FLOAT32)
    np.testing.assert_array_equal(kernel_product(far, B, spec, coef, norms_far, norms_b, precision=np.float32),
                                  kernel_product(far, B.toarray(), spec, coef, norms_far, norms_b,
                                                 precision=np.float32))
    np.testing.assert_allclose(kernel_product(far, B, spec, coef, precision=np.float32),
                               rbf_kernel(far, B, gamma=0.5) @ coef, rtol=0, atol=1e-5 * np.abs(coef).sum())


def test_scaled_transposed_matches_the_dense_copy():
    rng = np.random.RandomState(3)
    B = sp.random(50, 30, density=0.3, format="csr", random_state=rng)
    for dtype, scale in ((np.float32, 0.7), (np.float64, 0.7), (np.float32, 1.0)):
        expected = np.ascontiguousarray((B.toarray().astype(dtype) * np.dtype(dtype).type(scale)).T)
        for operand in (B, B.toarray()):
            out = scaled_transposed(operand, dtype, scale)
            assert out.dtype == dtype and out.flags.c_contiguous
            np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("spec_name", ["rbf", "poly", "linear"])
def test_kernel_map_applies_the_reduction_to_every_row_block(monkeypatch, n_threads, spec_name):
    """kernel_map hands each row block's kernel values to the (row-linear) reduction and stacks the results in row
    order."""
    import coresvm.kernels as kernels

    monkeypatch.setattr(kernels, "BLOCK_VALUES", 64)  # 8-row blocks: many of them
    monkeypatch.setattr(kernels, "GEMM_MIN_ROWS", 8)
    A, B = np.random.RandomState(0).randn(203, 5), np.random.RandomState(1).randn(11, 5)
    weights = np.random.RandomState(2).randn(11)
    blocks = []

    def reduce(values):
        blocks.append(values.shape[0])
        return np.column_stack((values[:, :4].sum(axis=1), values @ weights))

    got = kernels.kernel_map(A, B, SPECS[spec_name], reduce, 2, n_threads=n_threads)
    K = sklearn_kernel(A, B, SPECS[spec_name])
    expected = np.column_stack((K[:, :4].sum(axis=1), K @ weights))
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)
    assert sum(blocks) == 203 and max(blocks) == 8
    sparse = kernels.kernel_map(sp.csr_matrix(A), sp.csr_matrix(B), SPECS[spec_name], reduce, 2, n_threads=n_threads)
    np.testing.assert_allclose(sparse, expected, rtol=1e-10, atol=1e-10)


def test_kernel_map_rbf_factorized_near_the_overflow_limit():
    """Rows with gamma |a|^2 near 300 (exp(300) ~ 1e130 inside the factorized block) still give the RBF values."""
    import coresvm.kernels as kernels

    rng = np.random.RandomState(0)
    A = rng.randn(30, 3)
    A *= np.sqrt(290.0) / np.linalg.norm(A, axis=1, keepdims=True)  # gamma |a|^2 = 290
    B = np.vstack([A[:6] + 0.1 * rng.randn(6, 3), rng.randn(4, 3)])
    assert kernels.rbf_factorizable(KernelSpec("rbf", gamma=1.0), kernels.squared_norms(A), kernels.squared_norms(B))
    weights = rng.randn(10)
    got = kernels.kernel_map(A, B, KernelSpec("rbf", gamma=1.0), lambda values: (values @ weights)[:, None], 1)
    np.testing.assert_allclose(got[:, 0], rbf_kernel(A, B, gamma=1.0) @ weights, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("function", ["kernel_product", "kernel_map"])
def test_rbf_far_points_use_the_direct_formula(function):
    """Norms so large that the factorized RBF (exp(2 g <a, b>), or its per-row scale) would overflow: the direct
    form is used, finite and exact."""
    import coresvm.kernels as kernels

    rng = np.random.RandomState(0)
    A = rng.randn(40, 3) + 1e3
    B = np.vstack([A[:5] + 1e-3, rng.randn(5, 3) - 1e3])
    coef = rng.randn(10)
    spec = KernelSpec("rbf", gamma=1.0)
    if function == "kernel_product":
        got = kernel_product(A, B, spec, coef)
    else:
        got = kernels.kernel_map(A, B, spec, lambda values: (values @ coef)[:, None], 1)[:, 0]
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, rbf_kernel(A, B, gamma=1.0) @ coef, rtol=1e-9, atol=1e-12)


def test_kernel_product_empty_operands():
    A, B = np.ones((4, 2)), np.ones((0, 2))
    np.testing.assert_array_equal(kernel_product(A, B, SPECS["rbf"], np.zeros(0)), np.zeros(4))
    assert kernel_product(B, A, SPECS["rbf"], np.ones(4)).shape == (0,)


def test_kernel_block_uses_given_norms():
    rng = np.random.RandomState(0)
    A, B = rng.randn(7, 3), rng.randn(5, 3)
    spec = KernelSpec("rbf", gamma=0.3)
    np.testing.assert_allclose(
        kernel_block(A, B, spec, squared_norms(A), squared_norms(B)), rbf_kernel(A, B, gamma=0.3), rtol=1e-12
    )
    # wrong norms must change the result (i.e. they are really used, not recomputed)
    wrong = kernel_block(A, B, spec, squared_norms(A) + 1.0, squared_norms(B))
    np.testing.assert_allclose(wrong, rbf_kernel(A, B, gamma=0.3) * np.exp(-0.3), rtol=1e-12)


def wide_csr(n, d, per_row, seed):
    rng = np.random.RandomState(seed)
    cols = np.sort(rng.randint(0, d, size=(n, per_row)), axis=1)
    assert (np.diff(cols, axis=1) > 0).all()  # distinct columns within each row
    indptr = np.arange(0, n * per_row + 1, per_row)
    return sp.csr_matrix((rng.randn(n * per_row), cols.ravel(), indptr), shape=(n, d))


def peak_bytes(fn):
    """(fn(), peak bytes traced while it ran); NumPy reports its buffers to tracemalloc."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        out = fn()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("spec_name", ["rbf", "poly", "linear", "sigmoid"])
def test_sparse_paths_do_not_densify(spec_name):
    """A 40 x 2*10^6 CSR matrix takes 640 MB dense: kernel_block & co. must stay far below that.

    (Only the index arrays of a sparse transpose scale with n_features: a few MB here.)
    """
    spec = SPECS[spec_name]
    n, d = 40, 2 * 10**6
    X = wide_csr(n, d, 6, seed=0)
    A = X[:7]  # a different (smaller) left operand, as in prediction
    limit = 0.05 * n * d * 8
    K, peak = peak_bytes(lambda: kernel_block(X, X, spec))
    assert peak < limit, f"kernel_block(CSR, CSR) allocated {peak / 1e6:.0f} MB: the sparse input was densified"
    K_a, peak = peak_bytes(lambda: kernel_block(A, X, spec))
    assert peak < limit, f"kernel_block(CSR, CSR) allocated {peak / 1e6:.0f} MB: the sparse input was densified"
    diag, peak = peak_bytes(lambda: kernel_diagonal(X, spec))
    assert peak < limit, f"kernel_diagonal allocated {peak / 1e6:.0f} MB"
    g_scale, peak = peak_bytes(lambda: resolve_gamma("scale", X))
    assert peak < limit, f"resolve_gamma('scale') allocated {peak / 1e6:.0f} MB"
    g_cvm, peak = peak_bytes(lambda: resolve_gamma("cvm", X))
    assert peak < limit, f"resolve_gamma('cvm') allocated {peak / 1e6:.0f} MB"
    assert sp.issparse(X) and sp.issparse(A)
    # same numbers as on the column-compacted dense matrix (kernels only see dots and norms)
    used = np.unique(X.indices)
    compact = X[:, used].toarray()
    K_ref = sklearn_kernel(compact, compact, spec)
    np.testing.assert_allclose(K, K_ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(K_a, K_ref[:7], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(diag, np.diag(K_ref), rtol=1e-12, atol=1e-12)
    dense_var = (compact**2).sum() / (n * d) - (compact.sum() / (n * d)) ** 2
    assert g_scale == pytest.approx(1.0 / (d * dense_var), rel=1e-9)
    assert g_cvm == pytest.approx(1.0 / np.mean(pdist(compact, "sqeuclidean")), rel=1e-9)


# ---------------------------------------------------------------------------
# kernel_diagonal
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["float64", "float32", "csr"])
@pytest.mark.parametrize("spec_name", list(SPECS))
def test_kernel_diagonal_matches_block(kind, spec_name):
    spec = SPECS[spec_name]
    A, _, A_ref, _, rtol, atol = make_inputs(kind, seed=5)
    diag = kernel_diagonal(A, spec)
    assert diag.shape == (A.shape[0],)
    np.testing.assert_allclose(diag, np.diag(kernel_block(A, A, spec)), rtol=rtol, atol=atol)
    np.testing.assert_allclose(diag, np.diag(sklearn_kernel(A_ref, A_ref, spec)), rtol=rtol, atol=atol)


def test_kernel_diagonal_does_not_alias_norms():
    X = np.random.RandomState(0).randn(6, 3)
    norms = squared_norms(X)
    before = norms.copy()
    diag = kernel_diagonal(X, KernelSpec("linear"), norms)
    diag += 1.0
    np.testing.assert_array_equal(norms, before)


def test_kernel_spec_codes():
    assert {name: KernelSpec(name).code for name in KERNEL_CODES} == KERNEL_CODES
    assert len(set(KERNEL_CODES.values())) == 4
    assert KernelSpec("rbf").has_constant_diagonal
    assert not any(KernelSpec(name).has_constant_diagonal for name in ("linear", "poly", "sigmoid"))


# ---------------------------------------------------------------------------
# resolve_gamma
# ---------------------------------------------------------------------------


def test_gamma_scale_dense_matches_sklearn_formula():
    X = np.random.RandomState(0).randn(30, 7) * 3.0 + 1.0
    assert resolve_gamma("scale", X) == pytest.approx(1.0 / (7 * X.var()), rel=1e-12)
    X32 = X.astype(np.float32)
    assert resolve_gamma("scale", X32) == pytest.approx(1.0 / (7 * X32.astype(np.float64).var()), rel=1e-6)


def test_gamma_scale_sparse_equals_dense():
    X, dense = sparse_data(40, 9, 0.3, seed=4)
    expected = 1.0 / (9 * dense.var())
    assert resolve_gamma("scale", X) == pytest.approx(expected, rel=1e-10)
    assert resolve_gamma("scale", dense) == pytest.approx(expected, rel=1e-12)


def test_gamma_scale_constant_data_falls_back_to_one():
    assert resolve_gamma("scale", np.full((5, 3), 2.0)) == 1.0
    assert resolve_gamma("scale", sp.csr_matrix((5, 3))) == 1.0


@pytest.mark.parametrize("d", [1, 4, 13])
def test_gamma_auto(d):
    X = np.random.RandomState(d).randn(10, d)
    assert resolve_gamma("auto", X) == pytest.approx(1.0 / d)
    assert resolve_gamma("auto", sp.csr_matrix(X)) == pytest.approx(1.0 / d)


@pytest.mark.parametrize("n", [2, 37, 1000])
def test_gamma_cvm_small_n_uses_all_pairs(n):
    X = np.random.RandomState(n).randn(n, 5) * 2.0
    expected = 1.0 / np.mean(pdist(X, "sqeuclidean"))
    assert resolve_gamma("cvm", X) == pytest.approx(expected, rel=1e-9)
    # with n <= 1000 every row is used, so the random state cannot matter
    assert resolve_gamma("cvm", X, np.random.RandomState(123)) == pytest.approx(expected, rel=1e-9)


def test_gamma_cvm_sparse():
    X, dense = sparse_data(50, 8, 0.4, seed=7)
    expected = 1.0 / np.mean(pdist(dense, "sqeuclidean"))
    assert resolve_gamma("cvm", X) == pytest.approx(expected, rel=1e-9)


def test_gamma_cvm_large_n_uses_subsample_of_1000():
    X = np.random.RandomState(0).randn(1500, 3)
    X[:750] *= 4.0  # heterogeneous, so different subsamples give different answers
    take = np.random.RandomState(5).choice(1500, size=1000, replace=False)
    expected = 1.0 / np.mean(pdist(X[take], "sqeuclidean"))
    assert resolve_gamma("cvm", X, np.random.RandomState(5)) == pytest.approx(expected, rel=1e-9)
    # default seed is deterministic and close to the full-data value
    g0 = resolve_gamma("cvm", X)
    assert g0 == resolve_gamma("cvm", X)
    assert g0 == pytest.approx(1.0 / np.mean(pdist(X, "sqeuclidean")), rel=0.1)


def test_gamma_cvm_identical_points_falls_back_to_one():
    assert resolve_gamma("cvm", np.ones((4, 2))) == 1.0


@pytest.mark.parametrize("value", [0.5, 3, np.float32(0.25), 1e-8])
def test_gamma_float(value):
    X = np.zeros((3, 2))
    out = resolve_gamma(value, X)
    assert isinstance(out, float)
    assert out == float(value)


@pytest.mark.parametrize("bad", [0.0, -1.0, -1e-12, float("nan"), float("inf"), "nope", "Scale", ""])
def test_gamma_invalid_raises(bad):
    with pytest.raises(ValueError, match="gamma"):
        resolve_gamma(bad, np.ones((3, 2)))


# ---------------------------------------------------------------------------
# compiled primitives (kernel_from_dot, row_to_dense, dot_with_dense) through
# extended_column / extended_row with y = 1, no bias and C = inf: Q == K exactly
# ---------------------------------------------------------------------------


def kernel_problem(X, spec):
    m = X.shape[0]
    return SimplexProblem(X, np.ones(m), np.full(m, np.inf), spec, bias=False, lam=0.0)


@pytest.mark.parametrize("kind", ["float64", "float32", "csr"])
@pytest.mark.parametrize("spec_name", list(SPECS))
def test_compiled_column_and_row_equal_sklearn(kind, spec_name):
    spec = SPECS[spec_name]
    X, _, X_ref, _, _, _ = make_inputs(kind, seed=11, n=21)
    problem = kernel_problem(X, spec)
    assert problem.inv_c.max() == 0.0
    K = sklearn_kernel(X_ref, X_ref, spec)
    m = X.shape[0]
    targets = np.array([0, 20, 3, 3, 7, 1], dtype=np.int64)
    for point in (0, 1, 10, m - 1):
        col = np.full(m, np.nan)
        extended_column(*problem.kernel_args(), point, col)
        # the compiled path computes in float64 even for float32 storage: tight tolerance everywhere
        np.testing.assert_allclose(col, K[:, point], rtol=1e-12, atol=1e-12)
        row = np.full(len(targets), np.nan)
        extended_row(*problem.kernel_args(), point, targets, len(targets), row)
        np.testing.assert_allclose(row, K[point, targets], rtol=1e-12, atol=1e-12)


def test_compiled_csr_with_unsorted_indices():
    X, dense = sparse_data(12, 6, 0.6, seed=2)
    shuffled = X.copy()
    rng = np.random.RandomState(0)
    for r in range(shuffled.shape[0]):  # reverse/shuffle the column order within each row
        lo, hi = shuffled.indptr[r], shuffled.indptr[r + 1]
        perm = lo + rng.permutation(hi - lo)
        shuffled.indices[lo:hi] = shuffled.indices[perm].copy()
        shuffled.data[lo:hi] = shuffled.data[perm].copy()
    shuffled.has_sorted_indices = False
    np.testing.assert_array_equal(shuffled.toarray(), dense)
    spec = SPECS["rbf"]
    problem = kernel_problem(shuffled, spec)
    K = rbf_kernel(dense, gamma=spec.gamma)
    for point in range(12):
        col = np.empty(12)
        extended_column(*problem.kernel_args(), point, col)
        np.testing.assert_allclose(col, K[:, point], rtol=1e-12, atol=1e-12)


def test_compiled_csr_with_duplicate_entries():
    # row 0 stores column 0 twice (1.0 + 2.0 = 3.0): a valid, non-canonical CSR matrix
    X = sp.csr_matrix((np.array([1.0, 2.0, 3.0, 1.0]), np.array([0, 0, 1, 0]), np.array([0, 2, 4])), shape=(2, 3))
    dense = X.toarray()
    assert not X.has_canonical_format
    problem = kernel_problem(X, KernelSpec("linear"))
    col = np.empty(2)
    extended_column(*problem.kernel_args(), 0, col)
    np.testing.assert_allclose(col, linear_kernel(dense)[:, 0])


def test_as_solver_data_representations():
    X, dense = sparse_data(8, 5, 0.5, seed=0)
    values, indices, indptr, n_feat = as_solver_data(X)
    assert values.dtype == np.float64 and indices.dtype == np.int64 and indptr.dtype == np.int64
    assert n_feat == 5
    np.testing.assert_array_equal(sp.csr_matrix((values, indices, indptr), shape=(8, 5)).toarray(), dense)
    F = np.asfortranarray(np.random.RandomState(0).randn(4, 3).astype(np.float32))
    out = as_solver_data(F)
    assert out.flags.c_contiguous and out.dtype == np.float32
    np.testing.assert_array_equal(out, F)


def test_product_blocks_have_enough_rows_for_an_efficient_gemm():
    """Against many columns a cache-sized block would be a few rows (2^19 / 30,000 = 17), where a GEMM runs at half
    speed: blocks take at least GEMM_MIN_ROWS rows while they stay under GEMM_BLOCK_VALUES values."""
    from coresvm.kernels import GEMM_BLOCK_VALUES, GEMM_MIN_ROWS, product_block_rows

    assert product_block_rows(30_000) == GEMM_MIN_ROWS
    assert product_block_rows(100) == 2**19 // 100  # few columns: the cache-sized block is larger
    assert product_block_rows(10**7) == max(8, GEMM_BLOCK_VALUES // 10**7)  # bounded memory per block


def test_float32_exp_is_within_float32_rounding_of_exp():
    """exp_in_place's float32 path (range reduction and a Taylor polynomial): within 1e-7 relative of the float64
    exp over float32's normal range, exact powers of two at integer multiples of ln 2, the clamp below it."""
    from coresvm.kernels import exp_in_place

    x = np.linspace(-87.0, 88.0, 1_000_003).astype(np.float32)
    np.testing.assert_allclose(exp_in_place(x.copy()), np.exp(x.astype(np.float64)), rtol=1e-7)
    assert exp_in_place(np.array([0.0], dtype=np.float32))[0] == 1.0
    assert exp_in_place(np.array([-1000.0], dtype=np.float32))[0] == pytest.approx(np.exp(-87.0), rel=1e-6)
    strided = np.arange(6, dtype=np.float32).reshape(2, 3).T  # not C-contiguous: NumPy's exp
    np.testing.assert_allclose(exp_in_place(strided), np.exp(np.arange(6.0).reshape(2, 3).T), rtol=1e-6)


def test_rbf_factor_limit_keeps_float32_exponents_finite():
    from coresvm.kernels import RBF_FACTOR_LIMIT, rbf_factor_limit

    assert rbf_factor_limit(np.float64) == RBF_FACTOR_LIMIT
    assert np.isfinite(np.exp(np.float32(rbf_factor_limit(np.float32))))  # float32 overflows at 88.7
    assert np.exp(np.float32(-rbf_factor_limit(np.float32))) > np.finfo(np.float32).tiny


def test_frequent_features_of_products_by_columns_go_to_a_dense_block(monkeypatch):
    """Sparse rows sharing few features, except a few frequent ones (text's common words): those features are
    multiplied as a dense block, the rest by columns; the products are those of dense rows either way."""
    import coresvm.kernels as kernels_module
    from coresvm.kernels import DENSE_HEAD_MIN_PAIRS, columns_if_sparse_enough

    rng = np.random.RandomState(0)
    A = sp.random(300, 2000, density=0.005, format="lil", random_state=rng)
    B = sp.random(700, 2000, density=0.005, format="lil", random_state=rng)
    frequent = [3, 1500, 77]  # in about 60%, 40% and 25% of the rows
    for M in (A, B):
        for feature, share in zip(frequent, (0.6, 0.4, 0.25), strict=True):
            rows = np.flatnonzero(rng.rand(M.shape[0]) < share)
            M[rows, feature] = rng.rand(len(rows))
    A, B = A.tocsr(), B.tocsr()
    in_a, in_b = np.bincount(A.indices, minlength=2000), np.bincount(B.indices, minlength=2000)
    expected_head = np.flatnonzero(in_a * in_b / (A.shape[0] * B.shape[0]) > DENSE_HEAD_MIN_PAIRS)
    assert set(expected_head) == set(frequent)
    for dtype in (np.float32, np.float64):
        columns = columns_if_sparse_enough(A, B, dtype)
        assert columns is not None and columns.head_t.shape == (3, 700)
        np.testing.assert_array_equal(columns.slots[frequent], [0, 1, 2])  # the most frequent first
        np.testing.assert_allclose(columns.products(A[20:150]), (A[20:150] @ B.T).toarray(), rtol=1e-5, atol=1e-7)
        # duplicate entries (not summed: a CSR matrix built from its arrays) count as their sum
        doubled = sp.csr_matrix((np.repeat(A.data, 2) / 2, np.repeat(A.indices, 2), 2 * A.indptr), shape=A.shape)
        assert not doubled.has_canonical_format
        np.testing.assert_allclose(columns.products(doubled), (A @ B.T).toarray(), rtol=1e-5, atol=1e-7)
    # twenty features in 90% of the rows (stop words): pairs of nonzeros abound, but all in the dense block
    common = A.tolil(), B.tolil()
    for M in common:
        M[:, 1000:1020] = (rng.rand(M.shape[0], 20) < 0.9) * rng.rand(M.shape[0], 20)
    common = [M.tocsr() for M in common]
    columns = columns_if_sparse_enough(*common, np.float64)
    assert columns is not None and columns.head_t.shape == (23, 700)
    np.testing.assert_allclose(columns.products(common[0]), (common[0] @ common[1].T).toarray(), rtol=1e-12)
    # room for the head's dense copy (700 x 3 values), not for a dense copy of A or B: kernel sums by columns
    monkeypatch.setattr(kernels_module, "DENSE_OPERAND_BYTES", 700 * 8 * 8)
    calls = []
    head_columns = kernels_module.csr_selected_columns
    monkeypatch.setattr(kernels_module, "csr_selected_columns", lambda *args: calls.append(1) or head_columns(*args))
    spec = KernelSpec("rbf", gamma=0.5)
    coef = rng.randn(700)
    expected = rbf_kernel(A.toarray(), B.toarray(), gamma=0.5) @ coef
    np.testing.assert_allclose(kernel_product(A, B, spec, coef, precision=np.float32), expected, atol=1e-4)
    assert calls


def test_sparse_products_by_columns_where_rows_share_few_features(monkeypatch):
    """Sparse rows that share few features (text: many features, few nonzeros a row) are multiplied by the right
    operand's columns: the same products and kernel sums as dense ones; rows that share most features are not."""
    import coresvm.kernels as kernels_module
    from coresvm.kernels import RightOperand, columns_if_sparse_enough

    calls = []
    by_columns = kernels_module.csr_times_columns
    monkeypatch.setattr(kernels_module, "csr_times_columns", lambda *args: calls.append(1) or by_columns(*args))
    monkeypatch.setattr(kernels_module, "DENSE_OPERAND_BYTES", 0)  # neither side is made dense

    rng = np.random.RandomState(0)
    A = sp.random(300, 2000, density=0.01, format="csr", random_state=rng)
    B = sp.random(500, 2000, density=0.01, format="csr", random_state=rng)
    for dtype in (np.float32, np.float64):
        right = RightOperand(B, A, dtype)
        assert right.columns is not None and not right.sparse_right
        np.testing.assert_allclose(right.products(A[40:90]), (A[40:90] @ B.T).toarray(), rtol=1e-5, atol=1e-7)
    spec = KernelSpec("rbf", gamma=0.5)
    coef = rng.randn(500)
    expected = rbf_kernel(A.toarray(), B.toarray(), gamma=0.5) @ coef
    np.testing.assert_allclose(kernel_product(A, B, spec, coef), expected, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(kernel_product(A, B, spec, coef, precision=np.float32), expected, atol=1e-4)
    assert len(calls) >= 4  # two products, and the blocks of both kernel sums
    dense_ish = sp.random(300, 20, density=0.5, format="csr", random_state=rng)
    support = sp.random(500, 20, density=0.5, format="csr", random_state=rng)
    assert columns_if_sparse_enough(dense_ish, support, np.float32) is None
    assert columns_if_sparse_enough(A, B.toarray(), np.float32) is None  # a dense B: rows against it
    # rows sharing most features: each block of sparse rows made dense, the products in the support's row order
    calls.clear()
    expected = rbf_kernel(dense_ish.toarray(), support.toarray(), gamma=0.5) @ coef
    np.testing.assert_allclose(kernel_product(dense_ish, support, spec, coef), expected, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(kernel_product(dense_ish, support, spec, coef, precision=np.float32), expected,
                               atol=1e-4)
    assert not calls


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("columns", [1, 3])
def test_exp_weighted_sums_are_the_two_passes_numbers(dtype, columns):
    """Row by row (float32, one coefficient column) or in two passes: the same sums, bit for bit."""
    rng = np.random.default_rng(5)
    exponents = (-3.0 * rng.random((70, 333))).astype(dtype)
    coef = rng.standard_normal(333) if columns == 1 else rng.standard_normal((333, columns))
    expected = weighted_sums(exp_in_place(exponents.copy()), coef)
    got = exp_weighted_sums(exponents.copy(), coef)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_allclose(got, np.exp(exponents.astype(np.float64)) @ coef, rtol=1e-5)
