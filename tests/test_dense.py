"""The small-problem solver (solvers/dense.py) against an exact QP, and its use by CoreSVC's multiclass fits."""

import copy
import time

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_digits, make_blobs
from sklearn.exceptions import ConvergenceWarning
from test_solvers import assert_reaches_exact_optimum, dense_alpha, exact_solution, make_problem

from coresvm.kernels import KernelSpec
from coresvm.problem import SimplexProblem
from coresvm.solvers import clock, engine
from coresvm.solvers.core_steps import l2svm_duality_gap
from coresvm.solvers.dense import (
    _drop_idle,
    fits_dense,
    run_dense,
    run_dense_rows,
    solve_dense_loop,
    solve_rows_dense,
)
from coresvm.solvers.driver import SolverOptions
from coresvm.solvers.sampling import balanced_start
from coresvm.svc import CoreSVC


@pytest.mark.parametrize("second", ["mdm", "imdm", "gmdm"])
@pytest.mark.parametrize("lam,kernel,bias", [(0.0, "rbf", True), (1.0, "rbf", True), (0.0, "poly", True),
                                             (0.0, "linear", True), (0.0, "rbf", False)])
def test_dense_solver_reaches_exact_optimum(second, lam, kernel, bias):
    problem = make_problem(lam=lam, kernel=kernel, bias=bias)
    _, f_star, Q = exact_solution(problem)
    result = run_dense(problem, SolverOptions(second_vertex=second, tol=1e-9, seed=0))
    assert_reaches_exact_optimum(problem, result, f_star, Q)


@pytest.mark.parametrize("tol", [1e-1, 1e-2, 1e-3, 1e-4])
def test_tol_is_the_true_relative_gap_as_for_the_full_search_engine(tol):
    """Stopped at ``tol``: a true duality gap relative to 2 a'Qa is <= tol, and it is the gap reported.  Below
    1e-3 it is the Frank-Wolfe gap (no point violates the margin by more than the fraction tol); from 1e-3 it
    may be the L2-SVM's tighter Lagrangian gap, which bounds the objective's distance to the optimum alike."""
    problem = make_problem(m=200, seed=3, C=100.0)
    _, f_star, Q = exact_solution(problem)
    result = run_dense(problem, SolverOptions(second_vertex="imdm", tol=tol, seed=1))
    alpha = dense_alpha(result, problem.n_points)
    G = Q @ alpha
    f = alpha @ G
    frank_wolfe = problem.duality_gap(alpha, Q)
    lagrangian = l2svm_duality_gap(alpha, G, problem.inv_c, problem.n_points)
    assert result.status == "converged"
    assert lagrangian <= frank_wolfe * (1 + 1e-9)
    certified = frank_wolfe if tol < 1e-3 else min(frank_wolfe, lagrangian)
    assert result.gap == pytest.approx(certified, rel=1e-6, abs=1e-12)
    assert result.rel_gap <= tol
    assert f - f_star <= tol * 2 * f


def test_kernel_rows_are_computed_only_for_the_working_set():
    """More points than support vectors: most kernel rows are never computed (``cache_misses`` counts them)."""
    problem = make_problem(m=400, seed=2, C=10.0)
    result = run_dense(problem, SolverOptions(second_vertex="imdm", tol=1e-3, seed=0))
    assert result.status == "converged"
    assert len(result.support) <= result.cache_misses < problem.n_points
    assert result.rounds >= 2


def test_warm_start_from_the_optimum_stops_at_once():
    problem = make_problem()
    first = run_dense(problem, SolverOptions(second_vertex="imdm", tol=1e-9, seed=0))
    again = run_dense(problem, SolverOptions(second_vertex="imdm", tol=1e-6, seed=5), first.support, first.alpha)
    assert again.status == "converged"
    assert again.n_iter == 0
    np.testing.assert_allclose(again.alpha, first.alpha)


def test_max_iter_stops_with_a_feasible_point():
    problem = make_problem(m=200, seed=1)
    result = run_dense(problem, SolverOptions(second_vertex="imdm", tol=1e-12, max_iter=5, seed=0))
    assert result.status == "max_iter"
    assert result.alpha.sum() == pytest.approx(1.0) and np.all(result.alpha > 0)


def test_budget_and_input_checks():
    problem = make_problem(m=100)
    assert fits_dense(100, 100 * 100 * 8) and not fits_dense(101, 100 * 100 * 8)
    with pytest.raises(ValueError, match="cache_size"):
        run_dense(problem, SolverOptions(cache_bytes=100 * 99 * 8))
    sparse = make_problem(m=100)
    sparse.X = sp.csr_matrix(sparse.X)
    with pytest.raises(ValueError, match="dense NumPy X"):
        run_dense(sparse, SolverOptions())


def test_the_compiled_loop_releases_the_gil():
    """What lets n_jobs threads solve one-vs-one pairs in parallel: the pair's set-up and solve are one nogil
    call, and (on Linux) its clock readings do not take the GIL either."""
    assert solve_dense_loop.targetoptions.get("nogil") is True
    assert solve_rows_dense.targetoptions.get("nogil") is True
    assert engine.now is clock.now
    if clock.NATIVE_CLOCK:
        assert clock.now.targetoptions.get("nogil") is True


@pytest.mark.parametrize("joint", [False, True])
@pytest.mark.parametrize("kernel", ["rbf", "poly"])
@pytest.mark.parametrize("dot_chunk", [0, 7])
def test_one_row_fill_gives_the_binary_and_the_joint_rows_of_Q(joint, kernel, dot_chunk):
    """_fill_rows, shared by both problems: signs with label factors (1, -1) or class indices with the simplex label
    Gram's two values give the rows of the explicit Q, in float64 and float32, whether the inner products come in one
    BLAS product (dot_chunk 0) or through a buffer of 7 rows."""
    from coresvm.joint import joint_problem
    from coresvm.solvers.dense import _fill_rows

    spec = KernelSpec(kernel, gamma=0.5, coef0=1.0, degree=2)
    if joint:
        X, y = make_blobs(n_samples=50, centers=4, n_features=3, random_state=0)
        problem = joint_problem(X, y, 4, np.full(50, 3.0), spec)
        same, other = problem.label_gram[0, 0], problem.label_gram[0, 1]
    else:
        problem = make_problem(m=50, kernel=kernel)
        same, other = 1.0, -1.0
    Q = problem.dense_Q()
    labels = np.asarray(problem.y, dtype=np.float64)
    for dtype, rtol in ((np.float64, 1e-12), (np.float32, 1e-6)):
        rows = np.full((50, 50), np.nan, dtype=dtype)
        _fill_rows(problem.X.astype(np.float64), problem.norms, labels, same, other, problem.inv_c, spec.code,
                   spec.gamma, spec.coef0, float(spec.degree), problem.bias_term, 3, 41, rows,
                   np.empty((dot_chunk, 50)))
        np.testing.assert_allclose(rows[3:41], Q[3:41], rtol=rtol, atol=rtol)
        assert np.isnan(rows[:3]).all() and np.isnan(rows[41:]).all()  # only the rows asked for are written


def test_clock_reads_perf_counter_seconds():
    before = time.perf_counter()
    reading = clock.now()
    after = time.perf_counter()
    assert before - 1e-3 <= reading <= after + 1e-3
    assert clock.now() >= reading


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_rows_of_a_larger_X_give_the_same_solution_as_the_copied_problem(dtype):
    """run_dense_rows gathers the rows, signs (int8) and C (a broadcast) inside the compiled call: the same
    problem as SimplexProblem on X[rows] solved by run_dense."""
    rng = np.random.RandomState(4)
    X = rng.randn(500, 6).astype(dtype)
    rows = np.sort(rng.choice(500, 180, replace=False)).astype(np.int32)
    signs = np.where(X[rows, 0] + 0.3 * rng.randn(180) > 0, 1, -1).astype(np.int8)
    for C in (np.broadcast_to(np.float64(5.0), (180,)), rng.uniform(1.0, 9.0, 180)):
        for kernel in ("rbf", "poly"):
            spec = KernelSpec(kernel, gamma=0.3, coef0=1.0, degree=2)
            options = SolverOptions(second_vertex="imdm", tol=1e-6, seed=3)
            gathered = run_dense_rows(X, rows, signs, C, spec, True, 0.0, options)
            copied = run_dense(SimplexProblem(X[rows], signs.astype(float), C, spec), options)
            np.testing.assert_array_equal(gathered.support, copied.support)
            np.testing.assert_allclose(gathered.alpha, copied.alpha, rtol=1e-9, atol=1e-12)
            assert gathered.status == "converged"


def test_balanced_start_draws_distinct_points_per_sign_reproducibly():
    y = np.where(np.arange(200) % 7 == 0, 1.0, -1.0)  # 29 positive, 171 negative
    start = balanced_start(y, 20, np.uint32(5))
    assert np.all(np.diff(start) > 0)  # sorted, distinct
    assert np.sum(y[start] > 0) == 10 and np.sum(y[start] < 0) == 10
    np.testing.assert_array_equal(start, balanced_start(y, 20, np.uint32(5)))
    assert not np.array_equal(start, balanced_start(y, 20, np.uint32(6)))
    few = np.array([1.0, 1.0, -1.0, -1.0, -1.0, -1.0])  # fewer members than asked: all of them
    np.testing.assert_array_equal(balanced_start(few, 8, np.uint32(0)), np.arange(6))
    one_sign = np.ones(30)
    assert len(balanced_start(one_sign, 20, np.uint32(0))) == 20


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return X / 16.0, y


def test_multiclass_pairs_take_the_fast_path_within_the_budget_and_fall_back_outside(digits):
    X, y = digits
    params = dict(C=16, gamma=0.05, tol=1e-3, random_state=0)
    fast = CoreSVC(**params).fit(X, y)
    # 0.5 MB hold no pair's kernel (about 360 points: 1 MB): the Python core-set loop runs instead
    fallback = CoreSVC(cache_size=0.5, **params).fit(X, y)
    assert all(info["cache_misses"] > 0 for info in fast.solver_info_)  # kernel rows counted: dense path
    assert all(info["cache_misses"] == 0 for info in fallback.solver_info_)
    assert fast.fit_status_ == 0 and fallback.fit_status_ == 0
    # the same problems solved to the same tolerance: (almost) the same predictions
    assert np.mean(fast.predict(X) == fallback.predict(X)) >= 0.99
    assert fast.score(X, y) == pytest.approx(fallback.score(X, y), abs=0.01)
    # sparse input (CSR) keeps the core-set loop
    sparse = CoreSVC(**params).fit(sp.csr_matrix(X[:400]), y[:400])
    assert all(info["cache_misses"] == 0 for info in sparse.solver_info_)


def overlapping_classes(m: int, n_classes: int = 2, seed: int = 0):
    """Classes that overlap (about 15% of the points on the wrong side): at large C most points are support
    vectors and the pairwise steps converge slowly (the ill-conditioned tail that Newton steps settle)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((m, 2))
    y = np.minimum(np.floor((X[:, 0] + 0.5 * rng.standard_normal(m) + 1.5) * n_classes / 3.0), n_classes - 1)
    return X, np.maximum(y, 0).astype(int)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_a_dense_solve_past_its_step_budget_goes_on_with_the_core_set_loop(n_classes, monkeypatch):
    """A problem that needs more pairwise steps than the compiled loop's budget (dense_step_budget) goes on with the
    core-set loop from the dense solution, binary fits and one-vs-one pairs solved in compiled chunks alike: the
    same solution in a fraction of the steps.  The loop stops when its core set's duality gap (float32 Gram) is
    below tol and no point outside it violates by more than tol; the exact gap over every point also counts the
    outside points just short of that, and is within twice tol (0.25-1.1 tol over 40 seeds)."""
    import coresvm.solvers.dense as dense_module

    X, y = overlapping_classes(600, n_classes)
    params = dict(C=1e4, gamma=1.0, tol=1e-3, random_state=0)
    model = CoreSVC(**params).fit(X, y)
    budget = dense_module.dense_step_budget(len(X), 10**12)
    monkeypatch.setattr(dense_module, "DENSE_MIN_STEPS", 10**12)  # no budget: the compiled loop alone
    alone = CoreSVC(**params).fit(X, y)
    assert model.fit_status_ == 0 and alone.fit_status_ == 0
    continued = [info for info in model.solver_info_ if "rounds" in info]  # records of the core-set loop
    assert continued and all(info["iterations"] > budget for info in continued)
    assert sum(info["iterations"] for info in model.solver_info_) < 0.5 * sum(
        info["iterations"] for info in alone.solver_info_)
    # two solutions within tol of the optimum: points at the overlapping classes' boundaries may change sides
    assert np.mean(model.predict(X) == alone.predict(X)) >= 0.98
    if n_classes == 2:  # the certified gap of the solution, from its dual against the full extended kernel
        signs = np.where(y == model.classes_[1], 1.0, -1.0)
        problem = SimplexProblem(X, signs, np.full(len(X), 1e4), KernelSpec("rbf", 1.0, 0.0, 3), bias=True)
        Q = problem.dense_Q()
        alpha = np.zeros(len(X))
        alpha[model.support_] = model.dual_coef_[0] * signs[model.support_]
        alpha /= alpha.sum()
        G = Q @ alpha
        certified = min(problem.duality_gap(alpha, Q), l2svm_duality_gap(alpha, G, problem.inv_c, len(X)))
        assert certified / (2 * alpha @ G) <= 2 * params["tol"]


def test_a_handed_over_solve_stays_within_max_iter_and_is_no_warm_start():
    """max_iter bounds the compiled loop's steps and the core-set loop's together, in compiled chunks as for one
    binary problem; a pair handed over is still a cold fit (``warm_start`` False in its record)."""
    import coresvm.solvers.dense as dense_module

    for n_classes in (2, 3):
        X, y = overlapping_classes(600, n_classes)
        max_iter = dense_module.dense_step_budget(len(X), 10**12) + 3_000
        with pytest.warns(ConvergenceWarning):
            model = CoreSVC(C=1e4, gamma=1.0, tol=1e-6, max_iter=max_iter, random_state=0).fit(X, y)
        assert any("rounds" in info for info in model.solver_info_)  # handed over
        assert all(info["iterations"] <= max_iter and not info["warm_start"] for info in model.solver_info_)


def test_pairs_continued_after_a_compiled_chunk_keep_their_share_of_max_time(monkeypatch):
    """A pair of a compiled chunk continues in its share of the time left after the chunk: its dense seconds were
    spent inside the chunk and are not taken from that share a second time."""
    import coresvm.solvers.dense as dense_module
    import coresvm.svc as svc_module

    shares, limits = [], []
    original_continue, original_engine = svc_module.continue_with_core_set, dense_module.run_engine

    def continue_spy(problem, options, *args, **kwargs):
        shares.append(options.max_time)
        return original_continue(problem, options, *args, **kwargs)

    def engine_spy(problem, options, *args, **kwargs):
        limits.append(options.max_time)
        return original_engine(problem, options, *args, **kwargs)

    monkeypatch.setattr(svc_module, "continue_with_core_set", continue_spy)
    monkeypatch.setattr(dense_module, "run_engine", engine_spy)
    X, y = overlapping_classes(600, 3)
    model = CoreSVC(C=1e4, gamma=1.0, tol=1e-3, max_time=1000.0, random_state=0).fit(X, y)
    assert any("rounds" in info for info in model.solver_info_)  # handed over
    assert shares and limits == shares


def test_dense_solves_within_their_step_budget_are_unchanged(digits, monkeypatch):
    """The step budget only ends solves that need many more steps than usual: the digits' pairs (at most a few
    steps per point) give the same model with or without it."""
    import coresvm.solvers.dense as dense_module

    X, y = digits
    params = dict(C=16 * 1024, gamma=0.05, random_state=0)
    with_budget = CoreSVC(**params).fit(X, y)
    monkeypatch.setattr(dense_module, "DENSE_MIN_STEPS", 10**12)
    without = CoreSVC(**params).fit(X, y)
    assert all("rounds" not in info for info in with_budget.solver_info_)
    np.testing.assert_array_equal(with_budget.dual_coef_, without.dual_coef_)


def test_fast_path_is_identical_for_every_n_jobs(digits):
    X, y = digits
    params = dict(C=16, gamma=0.05, random_state=0)
    one = CoreSVC(n_jobs=1, **params).fit(X[:600], y[:600])
    two = CoreSVC(n_jobs=2, **params).fit(X[:600], y[:600])
    np.testing.assert_array_equal(one.support_, two.support_)
    np.testing.assert_array_equal(one.dual_coef_, two.dual_coef_)


def test_default_n_jobs_trains_small_pairs_on_the_kernel_threads(digits, monkeypatch):
    """n_jobs=None spreads small pairs (the compiled chunks) over as many threads as a binary fit's kernel
    products use; an explicit n_jobs=1 keeps one.  The model is the same either way."""
    import coresvm.svc as svc_module

    workers = []
    run_in_threads = svc_module.run_in_threads
    monkeypatch.setattr(svc_module, "default_kernel_threads", lambda: 2)
    monkeypatch.setattr(svc_module, "run_in_threads", lambda n, work: workers.append(n) or run_in_threads(n, work))
    X, y = digits
    params = dict(C=16, gamma=0.05, random_state=0)
    default = CoreSVC(**params).fit(X[:600], y[:600])
    one = CoreSVC(n_jobs=1, **params).fit(X[:600], y[:600])
    assert workers == [2, 1]
    np.testing.assert_array_equal(default.support_, one.support_)
    np.testing.assert_array_equal(default.dual_coef_, one.dual_coef_)


def test_default_n_jobs_trains_many_large_pairs_side_by_side(digits, monkeypatch):
    """n_jobs=None trains sub-problems too large for the compiled chunks side by side, one per kernel thread, once
    there are at least two per thread (not with a callback, which sees the pairs in order); n_jobs=1 one at a time.
    The model is the same either way."""
    import coresvm.svc as svc_module

    workers = []
    run_in_threads = svc_module.run_in_threads
    monkeypatch.setattr(svc_module, "default_kernel_threads", lambda: 2)
    monkeypatch.setattr(svc_module, "ONE_THREAD_MAX_POINTS", 50)  # digits' pairs of ~120 points count as large
    monkeypatch.setattr(svc_module, "run_in_threads", lambda n, work: workers.append(n) or run_in_threads(n, work))
    X, y = digits
    params = dict(C=16, gamma=0.05, random_state=0)
    default = CoreSVC(**params).fit(X[:600], y[:600])
    assert workers == [2]
    one = CoreSVC(n_jobs=1, **params).fit(X[:600], y[:600])
    CoreSVC(callback=lambda info: False, **params).fit(X[:600], y[:600])
    assert workers == [2]  # one at a time: no threads started
    np.testing.assert_array_equal(default.support_, one.support_)
    np.testing.assert_array_equal(default.dual_coef_, one.dual_coef_)
    three = y[:600] < 3  # three pairs: fewer than two per thread
    CoreSVC(**params).fit(X[:600][three], y[:600][three])
    assert workers == [2]


def test_concurrent_sub_problems_share_the_auto_core_set_budget(monkeypatch):
    import coresvm.cache as cache_module

    monkeypatch.setattr(cache_module, "available_memory_bytes", lambda: 16 * 2**30)
    alone = CoreSVC().solver_options(10_000, 0, np.inf)
    shared = CoreSVC().solver_options(10_000, 0, np.inf, concurrent=2)
    assert alone.memory.core_set_bytes == 8 * 2**30 and shared.memory.core_set_bytes == 4 * 2**30
    fixed = CoreSVC(cache_size=500).solver_options(10_000, 0, np.inf, concurrent=2)  # a budget given: kept
    assert fixed.memory.core_set_bytes == 500 * 2**20


def test_vectorized_exp_matches_numpy():
    from coresvm.solvers.dense import exp_nonpositive

    rng = np.random.RandomState(0)
    x = np.concatenate([-rng.exponential(3.0, 5000), -rng.uniform(0, 707.9, 5000), [0.0, -1e-300, -707.99]])
    out = np.empty_like(x)
    exp_nonpositive(x, np.empty(len(x), dtype=np.int64), out)
    np.testing.assert_allclose(out, np.exp(x), rtol=1e-15, atol=0)
    below = np.array([-708.5, -745.2, -1e6])
    out = np.ones(3)
    exp_nonpositive(below, np.empty(3, dtype=np.int64), out)
    np.testing.assert_array_equal(out, 0.0)  # underflow: exp < 2.3e-308


@pytest.mark.parametrize("path", ["pairs", "chunks"])
def test_a_failing_pair_stops_the_other_workers(digits, monkeypatch, path):
    """With n_jobs=2 the workers share one queue of pairs (or of chunks of pairs): an error in one ends the fit
    without the other worker solving all remaining items.  bias='kkt' needs each pair's rows in Python, so it
    solves pair by pair."""
    import coresvm.svc as svc_module

    X, y = digits
    calls = []
    name = "run_dense_rows" if path == "pairs" else "run_many_dense_rows"
    real = getattr(svc_module, name)

    def failing_third(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("pair failed")
        return real(*args, **kwargs)

    monkeypatch.setattr(svc_module, name, failing_third)
    with pytest.raises(RuntimeError, match="pair failed"):
        CoreSVC(C=16, gamma=0.05, n_jobs=2, random_state=0, bias="kkt" if path == "pairs" else True).fit(X[:600],
                                                                                                      y[:600])
    n_items = 45 if path == "pairs" else 2 * svc_module.CHUNKS_PER_WORKER
    assert len(calls) <= n_items // 2  # the queue was abandoned


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_pairs_solved_in_chunks_are_the_pairs_solved_one_by_one(digits, monkeypatch, n_jobs):
    """One compiled call per chunk of pairs (CoreSVC._solve_chunk) gives exactly the model of one call per pair,
    cold and warm-started, for any n_jobs; the per-pair path is what it is checked against."""

    X, y = digits
    X, y = X[:700], y[:700]
    # warm fits keeping inner products solve pair by pair: keep none, so that warm fits take the chunks too
    monkeypatch.setattr("coresvm.svc_warm.DOT_REUSE_MIN_FEATURES", 10**9)
    chunk_calls = []
    real_chunk = CoreSVC._solve_chunk
    monkeypatch.setattr(CoreSVC, "_solve_chunk", lambda self, *args: chunk_calls.append(1) or real_chunk(self, *args))

    def fit(chunks: bool, start=None, C=16.0):
        with monkeypatch.context() as patch:
            if not chunks:
                patch.setattr(CoreSVC, "_solves_in_chunks", lambda self, X, problems, n_jobs: False)
            model = copy.deepcopy(start) if start is not None else CoreSVC(gamma=0.02, warm_start=True,
                                                                           n_jobs=n_jobs, random_state=0)
            return model.set_params(C=C).fit(X, y)

    cold = [fit(False), fit(True)]
    warm = [fit(False, cold[0], C=256.0), fit(True, cold[0], C=256.0)]
    for one_by_one, chunked in (cold, warm):
        for name in ("support_", "dual_coef_", "intercept_", "n_iter_", "_warm_alpha", "_warm_offsets"):
            np.testing.assert_array_equal(getattr(one_by_one, name), getattr(chunked, name), err_msg=name)
        for a, b in zip(one_by_one.solver_info_, chunked.solver_info_, strict=True):
            assert {k: v for k, v in a.items() if k != "time"} == {k: v for k, v in b.items() if k != "time"}
    assert warm[1].warm_started_ and all(info["warm_start"] for info in warm[1].solver_info_)
    assert len(chunk_calls) >= 2  # the cold and the warm chunked fits took the chunks


def test_chunks_are_bounded_in_size_and_give_the_same_model(digits, monkeypatch):
    """Chunks hold at most about CHUNK_COST squared points (KeyboardInterrupt and max_time act between compiled
    calls); the cut changes nothing in the model."""
    import coresvm.svc as svc_module

    X, y = digits
    X, y = X[:500], y[:500]
    calls = []
    real_chunk = CoreSVC._solve_chunk
    monkeypatch.setattr(CoreSVC, "_solve_chunk", lambda self, X, chunk, t: calls.append(len(chunk)) or real_chunk(
        self, X, chunk, t))
    whole = CoreSVC(C=16, gamma=0.02, random_state=0, n_jobs=1).fit(X, y)
    assert calls == [45]
    calls.clear()
    monkeypatch.setattr(svc_module, "CHUNK_COST", 1)
    cut = CoreSVC(C=16, gamma=0.02, random_state=0, n_jobs=1).fit(X, y)
    assert calls == [1] * 45
    np.testing.assert_array_equal(whole.dual_coef_, cut.dual_coef_)
    np.testing.assert_array_equal(whole.intercept_, cut.intercept_)


def test_models_from_a_chunk_with_empty_problems():
    """A sub-problem without rows (its classes dropped by zero weights) gets an empty model, first, in the middle
    or last."""
    from coresvm.multiclass import SubProblem
    from coresvm.solvers.dense import STAT_SQUARED_NORM
    from coresvm.subproblems import models_from_chunk

    sizes = [0, 3, 0, 2, 0]
    offsets = np.cumsum([0] + sizes)
    rows = np.array([4, 7, 9, 1, 2])
    signs = np.array([1, -1, 1, 1, -1], dtype=np.int8)
    alpha = np.array([0.5, 0.0, 0.5, 0.25, 0.75])
    stats = np.ones((5, 8))
    stats[:, STAT_SQUARED_NORM] = 2.0
    problems = [SubProblem(k, (k,), rows[offsets[k]:offsets[k + 1]], signs[offsets[k]:offsets[k + 1]],
                           np.ones(sizes[k]), k) for k in range(5)]
    models = models_from_chunk(problems, rows, offsets, signs, alpha, stats, True)
    assert [len(model.rows) for model in models] == [0, 2, 0, 2, 0]
    np.testing.assert_array_equal(models[1].rows, [4, 9])
    np.testing.assert_allclose(models[3].coef, [0.125, -0.375])
    assert models[4].intercept == 0.0 and models[3].intercept == pytest.approx(-0.25)


def test_chunks_share_the_time_budget():
    """max_time bounds a chunked fit as it bounds a fit pair by pair (each pair gets a share of what is left)."""
    X, y = make_blobs(n_samples=2500, centers=5, cluster_std=3.0, random_state=0)
    CoreSVC(C=1e6, gamma=1.0, max_time=0.05, random_state=0).fit(X[:300], y[:300])  # compile
    start = time.perf_counter()
    with pytest.warns(ConvergenceWarning):
        model = CoreSVC(C=1e6, gamma=1.0, tol=1e-9, max_time=0.3, random_state=0).fit(X, y)
    assert time.perf_counter() - start < 2.0
    assert any(info["status"] == "max_time" for info in model.solver_info_)


@pytest.mark.parametrize("kernel", [KernelSpec("rbf", 2.0, 0.0, 3), KernelSpec("poly", 0.5, 1.0, 3)])
def test_inner_products_kept_by_one_fit_give_the_next_fit_the_same_solution(kernel):
    """A fit keeps its working set's <x_i, x_j> (all columns, original order); a fit at another kernel and C
    that reads them reaches the same solution as one computing every row, in the same steps."""
    rng = np.random.default_rng(0)
    X = rng.random((300, 40))
    signs = np.where(X[:, 0] + 0.3 * rng.standard_normal(300) > 0.5, 1, -1).astype(np.int8)
    rows = np.arange(20, 280)
    options = SolverOptions(second_vertex="imdm", tol=1e-6, seed=0)
    first = run_dense_rows(X, rows, signs[rows], np.full(len(rows), 10.0), KernelSpec("rbf", 0.5, 0.0, 3), True, 0.0,
                           options, keep_dots=True)
    points, dots = first.dot_rows
    assert len(points) == first.cache_misses and len(np.unique(points)) == len(points)
    np.testing.assert_allclose(dots, X[rows[points]] @ X[rows].T, rtol=1e-12)
    C = np.full(len(rows), 100.0)
    plain = run_dense_rows(X, rows, signs[rows], C, kernel, True, 0.0, options, first.support, first.alpha)
    reused = run_dense_rows(X, rows, signs[rows], C, kernel, True, 0.0, options, first.support, first.alpha,
                            first.dot_rows)
    assert reused.n_iter == plain.n_iter and reused.dot_rows[0].shape == (0,)
    np.testing.assert_array_equal(reused.support, plain.support)
    np.testing.assert_allclose(reused.alpha, plain.alpha, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kernel", [KernelSpec("rbf", 2.0, 0.0, 3), KernelSpec("poly", 0.5, 1.0, 3)])
def test_inner_products_of_all_rows_read_through_slots_and_columns_give_the_same_solution(kernel):
    """``dot_rows = (points, dots, slots, columns)``: a sub-problem reads its block of the products of a larger
    matrix's rows (a search's, shared by its folds) and takes the same steps to the same solution as computing
    them; kept products handed on from such a fit are in the sub-problem's own column order."""
    rng = np.random.default_rng(1)
    X_all = rng.random((400, 40))
    rows_of_fold = np.sort(rng.choice(400, 300, replace=False))  # a fold: some rows of the search, in order
    X = X_all[rows_of_fold]
    signs = np.where(X[:, 0] + 0.3 * rng.standard_normal(300) > 0.5, 1, -1).astype(np.int8)
    rows = np.arange(20, 280)
    C = np.full(len(rows), 30.0)
    options = SolverOptions(second_vertex="imdm", tol=1e-6, seed=0)
    plain = run_dense_rows(X, rows, signs[rows], C, kernel, True, 0.0, options)
    at = rows_of_fold[rows]
    shared = (np.arange(len(rows)), X_all @ X_all.T, at, at)
    read = run_dense_rows(X, rows, signs[rows], C, kernel, True, 0.0, options, dot_rows=shared, keep_dots=True)
    assert read.n_iter == plain.n_iter
    np.testing.assert_array_equal(read.support, plain.support)
    np.testing.assert_allclose(read.alpha, plain.alpha, rtol=1e-9, atol=1e-12)
    points, dots = read.dot_rows
    np.testing.assert_allclose(dots, X[rows[points]] @ X[rows].T, rtol=1e-12)


def test_binary_fits_take_the_fast_path_and_meet_the_exact_gap():
    """Two classes, dense X within the budget: the compiled loop (kernel rows counted), stopped on an exact gap over
    every point (at tol=1e-3 the Frank-Wolfe or the L2-SVM's Lagrangian gap) -- checked here from the fitted dual
    against the full extended kernel."""
    rng = np.random.default_rng(1)
    X = rng.random((300, 5))
    y = np.where(X[:, 0] + X[:, 1] + 0.2 * rng.standard_normal(300) > 1.0, "a", "b")
    tol = 1e-3
    model = CoreSVC(C=50.0, gamma=2.0, tol=tol, random_state=0).fit(X, y)
    info = model.solver_info_[0]
    assert info["cache_misses"] > 0 and info["status"] == "converged"  # rows counted: the dense path ran
    signs = np.where(y == model.classes_[1], 1.0, -1.0)
    problem = SimplexProblem(X, signs, np.full(300, 50.0), KernelSpec("rbf", 2.0, 0.0, 3), bias=True)
    Q = problem.dense_Q()
    alpha = np.zeros(300)
    # dual_coef_ = a_i y_i / rho with rho = a'Qa: recover a on the simplex
    alpha[model.support_] = model.dual_coef_[0] * signs[model.support_]
    alpha /= alpha.sum()
    G = Q @ alpha
    certified = min(problem.duality_gap(alpha, Q), l2svm_duality_gap(alpha, G, problem.inv_c, 300))
    assert certified / (2 * alpha @ G) <= tol * (1 + 1e-6)
    # the Python core-set loop (a callback forces it) solves the same problem: the same predictions
    loop = CoreSVC(C=50.0, gamma=2.0, tol=tol, random_state=0, callback=lambda info: False).fit(X, y)
    assert loop.solver_info_[0]["cache_misses"] == 0
    assert np.mean(loop.predict(X) == model.predict(X)) >= 0.99


def test_idle_points_leave_the_working_set_with_their_rows_and_columns():
    """_drop_idle keeps exactly the points with weight or a violation, in front, with their rows of Q (columns in
    the new position order), and the position <-> point maps, data and kept inner products following them."""
    rng = np.random.default_rng(3)
    m, n_w = 40, 30
    problem = make_problem(m=m, seed=4)
    Q = problem.dense_Q()
    X = problem.X.copy()
    norms, y = (X * X).sum(1), problem.y.copy()
    inv_c, diag = 1.0 / problem.C, np.diag(Q).copy()
    alpha = np.where(rng.random(m) < 0.4, rng.random(m), 0.0)
    alpha[n_w:] = 0.0
    G = rng.random(m)
    order, position = np.arange(m), np.arange(m)
    rows = Q.copy()
    new_dots = X @ X.T
    threshold = 0.5
    idle = (alpha[:n_w] <= 0) & (G[:n_w] >= threshold)
    before = dict(alpha=alpha.copy(), G=G.copy(), X=X.copy())
    kept = _drop_idle(n_w, threshold, 0.0, X, norms, y, inv_c, diag, alpha, G, order, position, rows, new_dots)
    assert kept == n_w - idle.sum() and 0 < kept < n_w
    assert sorted(order[:kept]) == sorted(np.flatnonzero(~idle)) and sorted(order) == list(range(m))
    np.testing.assert_array_equal(position[order], np.arange(m))
    for name, values in (("alpha", alpha), ("G", G)):
        np.testing.assert_array_equal(values, before[name][order])
    np.testing.assert_array_equal(X, before["X"][order])
    np.testing.assert_array_equal(diag, np.diag(Q)[order])
    np.testing.assert_array_equal(rows[:kept], Q[np.ix_(order[:kept], order)])
    np.testing.assert_array_equal(new_dots[:kept], (before["X"] @ before["X"].T)[order[:kept]])


def test_a_warm_start_whose_support_mostly_leaves_reaches_the_exact_optimum():
    """From the solution at a small C to a large C (most old support vectors leave, so idle points are dropped
    from the working set): the same exact optimum as a cold start."""
    small = make_problem(m=150, seed=5, C=0.05)
    large = make_problem(m=150, seed=5, C=500.0)
    options = SolverOptions(second_vertex="imdm", tol=1e-9, seed=0)
    start = run_dense(small, options)
    _, f_star, Q = exact_solution(large)
    warm = run_dense(large, options, start.support, start.alpha)
    assert len(start.support) > 2 * len(warm.support)
    assert_reaches_exact_optimum(large, warm, f_star, Q)


def test_kept_kernel_rows_give_the_same_solution_without_computing_a_row():
    """run_dense_rows with an earlier fit's kept rows (same problem, another C) reaches the same optimum as a warm
    start that computes its rows, computing none of the kept working set's; bad kept rows are refused."""
    from coresvm.kernels import KernelSpec
    from coresvm.solvers.dense import run_dense_rows
    from coresvm.solvers.driver import SolverOptions

    rng = np.random.RandomState(0)
    X = rng.rand(300, 5)
    y = np.where(X[:, 0] + 0.3 * rng.randn(300) > 0.5, 1, -1).astype(np.int8)
    rows, spec, options = np.arange(300), KernelSpec("rbf", 2.0, 0.0, 3), SolverOptions(tol=1e-5)

    def fit(C, start=None, **kwargs):
        return run_dense_rows(X, rows, y, np.full(300, C), spec, True, 0.0, options,
                              *(start or (None, None)), **kwargs)

    first = fit(1.0, keep_rows=True)
    buffer, order, inv_c, written = first.kernel_rows
    assert buffer.shape == (300, 300) and sorted(order) == list(range(300)) and written >= len(inv_c)
    for C in (4.0, 0.25):
        again = fit(1.0, keep_rows=True)
        kept = fit(C, (again.support, again.alpha), kernel_rows=again.kernel_rows[:3], keep_rows=True)
        computed = fit(C, (again.support, again.alpha))
        assert kept.cache_misses < computed.cache_misses and kept.kernel_rows[0] is again.kernel_rows[0]
        np.testing.assert_allclose(kept.squared_norm, computed.squared_norm, rtol=1e-4)
        assert kept.rel_gap <= 1e-5
    with pytest.raises(ValueError, match="do not fit"):
        fit(1.0, kernel_rows=(np.empty((5, 5)), np.arange(5), np.ones(2)))
    again = fit(1.0, keep_rows=True)
    with pytest.raises(ValueError, match="keep_dots"):
        fit(1.0, kernel_rows=again.kernel_rows[:3], keep_dots=True)


def test_a_lent_buffer_is_used_as_memory_only():
    """``kernel_rows = (buffer, [], [])``: the fit writes its rows into the lent buffer (no new memory) and reaches
    the same solution as with fresh memory, whatever the buffer held; a buffer of the wrong shape is refused."""
    from coresvm.kernels import KernelSpec
    from coresvm.solvers.dense import NO_KERNEL_ROWS, run_dense_rows
    from coresvm.solvers.driver import SolverOptions

    rng = np.random.RandomState(1)
    X = rng.rand(200, 4)
    y = np.where(X[:, 1] + 0.3 * rng.randn(200) > 0.5, 1, -1).astype(np.int8)
    rows, options = np.arange(200), SolverOptions(tol=1e-5)

    def fit(gamma, **kwargs):
        return run_dense_rows(X, rows, y, np.full(200, 2.0), KernelSpec("rbf", gamma, 0.0, 3), True, 0.0, options,
                              **kwargs)

    fresh = fit(1.0)
    garbage = np.full((200, 200), np.nan)  # e.g. another gamma's rows: never read
    lent = fit(1.0, kernel_rows=(garbage, *NO_KERNEL_ROWS[1:]), keep_rows=True)
    assert lent.kernel_rows[0] is garbage and lent.cache_misses == fresh.cache_misses
    np.testing.assert_array_equal(lent.support, fresh.support)
    np.testing.assert_allclose(lent.alpha, fresh.alpha, rtol=1e-12)
    with pytest.raises(ValueError, match="do not fit"):
        fit(1.0, kernel_rows=(np.empty((199, 199)), *NO_KERNEL_ROWS[1:]))


def _blend_problem(seed=0, m=400):
    """An imbalanced RBF problem (30% positive) whose solution at small C holds every point."""
    rng = np.random.RandomState(seed)
    X = rng.rand(m, 5)
    y = np.where(X[:, 0] + 0.2 * rng.randn(m) > 0.7, 1, -1).astype(np.int8)
    return X, y, np.arange(m), KernelSpec("rbf", 1.0, 0.0, 3)


def test_blended_warm_start_reaches_the_same_optimum_in_fewer_steps():
    """C 4 -> 1/16 (every point becomes a support vector): the warm start mixed with the balanced weights takes far
    fewer pairwise steps to the same optimum; C 4 -> 1024 (a sparser solution): the blend is not taken at all."""
    X, y, rows, spec = _blend_problem()
    options = SolverOptions(tol=1e-3)

    def fit(C, start=None, **kwargs):
        return run_dense_rows(X, rows, y, np.full(len(rows), C), spec, True, 0.0, options, *(start or (None, None)),
                              **kwargs)

    old = fit(4.0)
    start = (old.support, old.alpha)
    plain, blended = fit(1 / 16, start), fit(1 / 16, start, blend_start=True)
    assert len(blended.support) >= 0.9 * len(rows) and blended.rel_gap <= 1e-3
    np.testing.assert_allclose(blended.squared_norm, plain.squared_norm, rtol=1e-3)  # a'Qa: the margin
    assert blended.n_iter < 0.6 * plain.n_iter  # 463 against 909 (cold: 1,405)
    plain, gated = fit(1024.0, start), fit(1024.0, start, blend_start=True)
    assert gated.n_iter == plain.n_iter
    np.testing.assert_array_equal(gated.alpha, plain.alpha)
    cold, cold_flagged = fit(1 / 16), fit(1 / 16, blend_start=True)  # a cold start is never blended
    assert cold_flagged.n_iter == cold.n_iter


def test_blend_step_estimate_is_near_the_exact_line_search_step():
    """The sampled estimate of the step toward the balanced weights is close to the exact one (from the whole Q),
    and 0 when moving toward them does not decrease the objective."""
    from sklearn.metrics.pairwise import rbf_kernel

    from coresvm.solvers.dense import _balanced_weights, _blend_step_estimate

    X, y, rows, spec = _blend_problem(seed=1)
    signs = y.astype(np.float64)
    norms = np.einsum("ij,ij->i", X, X)
    for old_C, new_C in ((4.0, 1 / 16), (4.0, 1.0), (1.0, 64.0)):
        old = run_dense_rows(X, rows, y, np.full(len(rows), old_C), spec, True, 0.0, SolverOptions(tol=1e-8))
        alpha = np.zeros(len(rows))
        alpha[old.support] = old.alpha
        inv_c = np.full(len(rows), 1 / new_C)
        Q = np.outer(signs, signs) * (rbf_kernel(X, gamma=1.0) + 1.0) + np.diag(inv_c)
        G, diag, u = Q @ alpha, np.diag(Q).copy(), _balanced_weights(signs)
        n2, D = alpha @ G, alpha @ diag
        exact = np.clip((n2 - u @ G) / ((u - alpha) @ Q @ (u - alpha)), 0.0, 1.0)
        estimate = _blend_step_estimate(X, norms, signs, spec.code, 1.0, 0.0, 3.0, 1.0, diag, inv_c, 0.0, alpha, G,
                                        n2, D, rows)
        if exact >= 0.3:  # below, the cheap upper bound may answer 0 without sampling
            assert abs(estimate - exact) <= 0.05, (old_C, new_C, estimate, exact)
        else:
            assert estimate < 0.5


def test_blended_warm_start_reaches_the_exact_optimum():
    """From an optimum at C ~ 10 to per-sample C ~ 0.05 (a dense solution), blended: the SLSQP optimum, KKT, gap.
    (CoreSVC's small-problem path solves the minimal-norm problem, lam = 0.)"""
    lam = 0.0
    old_problem = make_problem(lam=lam, C=10.0)
    problem = make_problem(lam=lam, C=0.05)
    _, f_star, Q = exact_solution(problem)
    options = SolverOptions(tol=1e-9)
    rows = np.arange(problem.n_points)

    def fit(p, start=(None, None), **kwargs):
        return run_dense_rows(p.X, rows, p.y, p.C, p.kernel, True, lam, options, *start, **kwargs)

    old = fit(old_problem)
    blended = fit(problem, (old.support, old.alpha), blend_start=True)
    assert_reaches_exact_optimum(problem, blended, f_star, Q)
    assert blended.n_iter < fit(problem, (old.support, old.alpha)).n_iter  # the blend was taken (310 vs 366 steps)
