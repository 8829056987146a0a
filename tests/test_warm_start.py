"""CoreSVC warm starts and the training callback."""

import copy
import pickle

import numpy as np
import pytest
from sklearn.datasets import load_digits

import coresvm.svc as svc_module
import coresvm.svc_warm as svc_warm
from coresvm import WarmStart
from coresvm.cache import cache_budgets
from coresvm.svc import CoreSVC


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(n_class=4, return_X_y=True)
    return X[:500] / 16.0, y[:500]


def _margins(model):
    return np.array([info["rho"] for info in model.solver_info_])


@pytest.mark.parametrize("solver", ["coreset", "swap", "mfw"])
@pytest.mark.parametrize("multiclass", ["ovo", "ovr"])
def test_warm_start_after_changing_C_reaches_the_cold_optimum_in_fewer_iterations(digits, solver, multiclass):
    X, y = digits
    params = dict(gamma=0.05, solver=solver, multiclass=multiclass, tol=1e-4, max_iter=10**6, random_state=0)
    cold = CoreSVC(C=15, **params).fit(X, y)
    warm = CoreSVC(C=10, warm_start=True, **params).fit(X, y)
    assert not warm.warm_started_
    warm.set_params(C=15).fit(X, y)
    assert warm.warm_started_ and all(info["warm_start"] for info in warm.solver_info_)
    assert warm.fit_status_ == 0 and cold.fit_status_ == 0
    # the same optimum: the margin rho = a'Qa (the minimal norm) to well within tol
    np.testing.assert_allclose(_margins(warm), _margins(cold), rtol=1e-4)
    np.testing.assert_array_equal(warm.predict(X), cold.predict(X))
    assert warm.n_iter_.sum() < 0.9 * cold.n_iter_.sum(), (warm.n_iter_.sum(), cold.n_iter_.sum())


@pytest.mark.parametrize("features", [slice(None), slice(None, None, 2)])  # pair by pair; in compiled chunks
def test_warm_start_to_a_much_smaller_C_reaches_the_cold_optimum_in_fewer_iterations(digits, features, monkeypatch):
    """C 10 -> 0.05: nearly every point becomes a support vector; the warm starts blended with the balanced weights
    (solvers/dense.py) reach the cold optimum in far fewer steps than from the old weights alone.  32 features:
    the one-vs-one pairs are solved in compiled chunks."""
    X, y = digits
    X = X[:, features]
    params = dict(gamma=0.05, tol=1e-4, max_iter=10**6, random_state=0)
    cold = CoreSVC(C=0.05, **params).fit(X, y)

    def warm_fit():
        return CoreSVC(C=10, warm_start=True, **params).fit(X, y).set_params(C=0.05).fit(X, y)

    warm = warm_fit()
    assert warm.warm_started_ and warm.fit_status_ == 0
    np.testing.assert_allclose(_margins(warm), _margins(cold), rtol=1e-4)
    np.testing.assert_array_equal(warm.predict(X), cold.predict(X))
    monkeypatch.setattr(CoreSVC, "_expects_more_support", lambda self, previous: False)
    unblended = warm_fit()
    assert warm.n_iter_.sum() < 0.6 * unblended.n_iter_.sum(), (warm.n_iter_.sum(), unblended.n_iter_.sum())


def test_warm_start_when_rows_are_appended(digits):
    X, y = digits
    params = dict(C=10, gamma=0.05, tol=1e-4, random_state=0)
    model = CoreSVC(warm_start=True, **params).fit(X[:400], y[:400])
    model.fit(X, y)
    assert model.warm_started_
    cold = CoreSVC(**params).fit(X, y)
    np.testing.assert_allclose(_margins(model), _margins(cold), rtol=1e-4)
    assert model.n_iter_.sum() < cold.n_iter_.sum()


def test_warm_start_falls_back_to_cold_when_the_old_rows_are_gone(digits):
    X, y = digits
    params = dict(C=10, gamma=0.05, random_state=0, warm_start=True)
    model = CoreSVC(**params).fit(X, y)
    reversed_rows = np.arange(len(y))[::-1]
    model.fit(X[reversed_rows], y[reversed_rows])  # the stored support rows now hold other vectors
    assert not model.warm_started_
    model.fit(X[:100], y[:100])  # fewer rows than the old support indices
    assert not model.warm_started_
    keep = y < 3
    model.fit(X[keep], y[keep])  # other classes
    assert not model.warm_started_
    model.set_params(multiclass="ovr").fit(X[keep], y[keep])  # other decomposition
    assert not model.warm_started_
    assert model.score(X[keep], y[keep]) > 0.95


def test_warm_start_off_ignores_the_previous_fit(digits):
    X, y = digits
    model = CoreSVC(C=10, gamma=0.05, random_state=0).fit(X, y)
    first = model.decision_function(X)
    model.fit(X, y)
    assert not model.warm_started_
    np.testing.assert_array_equal(model.decision_function(X), first)


# ------------------------------------------------------------------ callback
def test_callback_sees_progress_and_does_not_change_the_core_set_result(digits, monkeypatch):
    X, y = digits
    calls = []
    params = dict(C=10, gamma=0.05, random_state=0)
    with_callback = CoreSVC(callback=lambda info: calls.append(info) and False, **params).fit(X, y)
    # A callback needs the Python core-set loop; without one, these small pairs would take the
    # compiled fast path (solvers/dense.py), a different route to the same optimum within tol.
    fast_path = CoreSVC(**params).fit(X, y)
    assert np.mean(fast_path.predict(X) == with_callback.predict(X)) >= 0.99
    monkeypatch.setattr(svc_module, "SMALL_PROBLEM_FAST_PATH", False)
    plain = CoreSVC(**params).fit(X, y)
    np.testing.assert_array_equal(with_callback.decision_function(X), plain.decision_function(X))
    assert {info["problem"] for info in calls} == set(range(6))
    assert set(calls[0]) >= {"problem", "label", "iteration", "gap", "rel_gap", "n_active", "elapsed", "round"}
    assert calls[0]["label"] == (0, 1)


@pytest.mark.parametrize("solver", ["coreset", "swap"])
def test_callback_returning_true_stops_training(digits, solver):
    X, y = digits
    calls = []

    def stop_at_once(info):
        calls.append(info["problem"])
        return True

    model = CoreSVC(C=1e4, gamma=0.05, solver=solver, tol=1e-6, callback=stop_at_once, callback_every=50,
                    random_state=0).fit(X, y)
    assert calls == [0]  # later sub-problems stop at their first check without calling again
    assert [info["status"] for info in model.solver_info_] == ["callback"] * 6
    assert model.fit_status_ == 1
    assert model.predict(X).shape == y.shape  # the model so far is usable


def test_chunked_frank_wolfe_run_reaches_the_optimum(digits):
    X, y = digits
    counts = []
    params = dict(C=10, gamma=0.05, solver="swap", tol=1e-5, random_state=0)
    chunked = CoreSVC(callback=lambda info: counts.append(info["iteration"]) and False, callback_every=100,
                      **params).fit(X, y)
    plain = CoreSVC(**params).fit(X, y)
    assert chunked.fit_status_ == 0 and len(counts) > 6
    np.testing.assert_allclose(_margins(chunked), _margins(plain), rtol=1e-4)


def test_callback_rejected_by_ball_solvers(digits):
    X, y = digits
    with pytest.raises(ValueError, match="callback is not supported by solver='bvm'"):
        CoreSVC(solver="bvm", callback=lambda info: False).fit(X, y)
    with pytest.raises(ValueError, match="callback must be None or a callable"):
        CoreSVC(callback=3).fit(X, y)


def _spy_on_dot_rows(monkeypatch):
    """Record, per call of the small-problem solver, how many kept inner-product rows it was given."""
    given = []
    real = svc_module.run_dense_rows

    def spy(*args, **kwargs):
        given.append(len(args[10][0]))
        return real(*args, **kwargs)

    monkeypatch.setattr(svc_module, "run_dense_rows", spy)
    return given


def test_warm_fit_on_the_same_X_reuses_inner_products_and_reaches_the_cold_optimum(digits, monkeypatch):
    X, y = digits
    params = dict(tol=1e-4, max_iter=10**6, random_state=0)
    warm = CoreSVC(C=10, gamma=0.05, warm_start=True, **params).fit(X, y)
    kept = warm._dot_rows
    assert kept is not None and kept.holds(X.copy())
    for rows, points, dots in kept.rows.values():  # <x_i, x_j> of each pair's working set, all its columns
        np.testing.assert_allclose(dots, X[rows[points]] @ X[rows].T, rtol=1e-12, atol=1e-12)
    given = _spy_on_dot_rows(monkeypatch)
    warm.set_params(C=100, gamma=0.2).fit(X.copy(), y)  # an equal copy: the search's folds are new arrays
    assert warm.warm_started_ and len(given) == 6 and all(n > 0 for n in given)
    cold = CoreSVC(C=100, gamma=0.2, **params).fit(X, y)
    np.testing.assert_allclose(_margins(warm), _margins(cold), rtol=1e-4)
    np.testing.assert_array_equal(warm.predict(X), cold.predict(X))


def test_a_warm_fit_reading_inner_products_completes_them_for_the_fits_after_it(digits, monkeypatch):
    """The first warm fit keeps its working sets' inner products; the next one (a sequence: a search) computes
    each pair's missing ones once, so the one after it is given every point's and computes none."""
    X, y = digits
    params = dict(tol=1e-4, max_iter=10**6, random_state=0)
    warm = CoreSVC(C=10, gamma=0.05, warm_start=True, **params).fit(X, y)
    sizes = {index: len(rows) for index, (rows, _, _) in warm._dot_rows.rows.items()}
    assert any(len(points) < sizes[index] for index, (_, points, _) in warm._dot_rows.rows.items())
    warm.set_params(C=100).fit(X.copy(), y)
    for rows, points, dots in warm._dot_rows.rows.values():
        np.testing.assert_array_equal(points, np.arange(len(rows)))
        np.testing.assert_allclose(dots, X[rows] @ X[rows].T, rtol=1e-12, atol=1e-12)
    given = _spy_on_dot_rows(monkeypatch)
    warm.set_params(C=3, gamma=0.2).fit(X.copy(), y)
    assert sorted(given) == sorted(sizes.values())  # every pair: all its points
    cold = CoreSVC(C=3, gamma=0.2, **params).fit(X, y)
    np.testing.assert_allclose(_margins(warm), _margins(cold), rtol=1e-4)
    small_budget = CoreSVC(C=10, gamma=0.05, warm_start=True, cache_size=1, **params).fit(X, y)
    small_budget.set_params(C=100).fit(X, y)  # each pair fits 1 MB, all pairs' products (2.9 MB) do not
    assert small_budget._dot_rows is not None
    assert all(len(points) < len(rows) for rows, points, _ in small_budget._dot_rows.rows.values())


def test_inner_products_are_not_reused_when_X_changed(digits, monkeypatch):
    """Rows that are no support vectors changed: the old solution is still a valid start, the old inner
    products are not (a model built from them would be wrong)."""
    X, y = digits
    params = dict(C=10, gamma=0.05, tol=1e-4, max_iter=10**6, random_state=0)
    warm = CoreSVC(warm_start=True, **params).fit(X, y)
    changed = X.copy()
    others = np.setdiff1d(np.arange(len(y)), warm.support_)
    assert len(others) > 50
    for label in np.unique(y):  # other images of the same class: the same rows in each pair
        rows = others[y[others] == label]
        changed[rows] = changed[rows][::-1]
    given = _spy_on_dot_rows(monkeypatch)
    warm.fit(changed, y)
    assert warm.warm_started_ and given and all(n == 0 for n in given)
    cold = CoreSVC(**params).fit(changed, y)
    np.testing.assert_allclose(_margins(warm), _margins(cold), rtol=1e-4)


def test_kept_inner_products_are_neither_pickled_nor_saved(digits, tmp_path):
    X, y = digits
    model = CoreSVC(C=10, gamma=0.05, warm_start=True, random_state=0).fit(X, y)
    assert model._dot_rows is not None
    restored = pickle.loads(pickle.dumps(model))
    assert not restored._dot_rows.holds(X)
    np.testing.assert_array_equal(restored.predict(X), model.predict(X))
    model.save(tmp_path / "model.csvm")
    loaded = CoreSVC.load(tmp_path / "model.csvm")
    assert getattr(loaded, "_dot_rows", None) is None
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    assert len(pickle.dumps(model)) < len(pickle.dumps(model._dot_rows.rows)) / 2  # the rows are the big part


def test_no_inner_products_kept_for_few_features_or_cold_fits():
    X, y = load_digits(n_class=4, return_X_y=True)
    few = X[:300, :16] / 16.0
    assert CoreSVC(C=10, gamma=0.05, warm_start=True, random_state=0).fit(few, y[:300])._dot_rows is None
    assert CoreSVC(C=10, gamma=0.05, random_state=0).fit(X[:300] / 16.0, y[:300])._dot_rows is None


@pytest.mark.parametrize("solver", ["coreset", "swap"])
def test_fitting_a_shallow_copy_leaves_the_original_model_intact(digits, solver):
    """A fit rebinds its fitted attributes and never writes into the arrays of the previous fit, so a shallow copy
    of a model (or a WarmStart referring to its arrays, as PatternSearchCV keeps) still predicts and warm-starts
    as before."""
    import copy

    X, y = digits
    kept = CoreSVC(C=10, gamma=0.05, solver=solver, warm_start=True, random_state=0).fit(X, y)
    arrays = {name: value.copy() for name, value in vars(kept).items() if isinstance(value, np.ndarray)}
    decisions = kept.decision_function(X)
    copy.copy(kept).set_params(C=100, gamma=0.2).fit(X, y)
    for name, value in arrays.items():
        np.testing.assert_array_equal(getattr(kept, name), value, err_msg=name)
    np.testing.assert_array_equal(kept.decision_function(X), decisions)


def test_warm_fit_at_the_same_kernel_takes_over_the_kept_kernel_rows(digits):
    """A binary warm fit keeps its working set's kernel rows; the next fit at the same gamma (another C) starts
    from them -- no kernel row of its start computed -- takes them over (the old model keeps none), and reaches
    the cold optimum.  At another gamma they are not used."""
    X, y = digits
    X, y = X[y < 2], y[y < 2]
    params = dict(tol=1e-4, max_iter=10**6, random_state=0)
    warm = CoreSVC(C=1, gamma=0.05, warm_start=True, **params).fit(X, y)
    holder = warm._kernel_rows
    (rows, signs, buffer, order, inv_c, written), = holder.entries.values()
    assert buffer.shape == (len(y), len(y)) and len(inv_c) <= written <= len(y)
    assert holder.nbytes == buffer.nbytes <= cache_budgets(warm.cache_size)[0]  # 'auto': 200 MB for kernel rows
    warm.set_params(C=30).fit(X.copy(), y)  # an equal copy: the search's folds are new arrays
    assert warm.warm_started_ and warm.solver_info_[0]["cache_misses"] < len(inv_c) // 4
    assert holder.entries == {}  # handed over once
    (_, _, new_buffer, *_), = warm._kernel_rows.entries.values()
    assert new_buffer is buffer  # the same buffer, written by the new fit
    cold = CoreSVC(C=30, gamma=0.05, **params).fit(X, y)
    np.testing.assert_allclose(_margins(warm), _margins(cold), rtol=1e-4)
    np.testing.assert_array_equal(warm.predict(X), cold.predict(X))
    warm.set_params(gamma=0.2).fit(X, y)  # another kernel: rows computed afresh, in the same memory
    assert warm.solver_info_[0]["cache_misses"] > 0
    (_, _, gamma_buffer, *_), = warm._kernel_rows.entries.values()
    assert gamma_buffer is buffer
    cold = CoreSVC(C=30, gamma=0.2, **params).fit(X, y)
    np.testing.assert_allclose(_margins(warm), _margins(cold), rtol=1e-4)


def test_kept_kernel_rows_are_not_used_after_X_changed_and_not_copied(digits, tmp_path):
    import copy
    import pickle

    X, y = digits
    X, y = X[y < 2], y[y < 2]
    model = CoreSVC(C=1, gamma=0.05, warm_start=True, tol=1e-4, random_state=0).fit(X, y)
    assert model._kernel_rows.nbytes > 0
    for other in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        assert other._kernel_rows.entries == {} and model._kernel_rows.entries
    model.save(tmp_path / "model.csvm")
    assert getattr(CoreSVC.load(tmp_path / "model.csvm"), "_kernel_rows", None) is None
    changed = X.copy()
    others = np.setdiff1d(np.arange(len(y)), model.support_)
    changed[others] = changed[others][::-1]  # not the support vectors: the warm start is still valid
    model.set_params(C=30).fit(changed, y)
    assert model.warm_started_ and model.solver_info_[0]["cache_misses"] > 0
    cold = CoreSVC(C=30, gamma=0.05, tol=1e-4, random_state=0).fit(changed, y)
    np.testing.assert_allclose(_margins(model), _margins(cold), rtol=1e-4)
    assert CoreSVC(C=1, gamma=0.05, random_state=0).fit(X, y)._kernel_rows is None  # cold fits keep none


def _large_binary_problem():
    """One sub-problem of at least ``HEAVY_START_MIN_POINTS`` points."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(1100, 2))
    y = (X[:, 0] ** 2 + X[:, 1] ** 2 > 1.3).astype(int)
    assert len(y) >= svc_module.HEAVY_START_MIN_POINTS
    return X, y


def _heavy_flags_given(monkeypatch) -> list:
    """The ``heavy_only`` flags of every later ``attach_warm_starts`` call, recorded as they pass."""
    given = []
    attach = svc_warm.attach_warm_starts

    def spy(problems, previous, heavy_only):
        given.append(heavy_only)
        attach(problems, previous, heavy_only)

    monkeypatch.setattr(svc_warm, "attach_warm_starts", spy)
    return given


@pytest.mark.parametrize("change, rows_kept, heavy", [
    ({"C": 16.0}, False, True),  # a larger C, the old support's rows not kept: heavy support vectors only
    ({"C": 16.0}, True, False),  # ... their rows kept: the whole support (its rows are free)
    ({"C": 0.25}, False, False),  # a smaller C: the support grows, all of it
    ({"gamma": 2.0}, True, True),  # another kernel: heavy only (its kept rows are only lent as memory)
    ({"C": 1.5}, False, False),  # less than a grid step (x4) up: the whole support
    ({"gamma": 0.125}, True, False),  # a smaller gamma: the support is expected to grow, all of it
])
def test_which_warm_starts_of_a_large_problem_take_only_the_heavy_support_vectors(monkeypatch, change, rows_kept,
                                                                                 heavy):
    X, y = _large_binary_problem()
    model = CoreSVC(C=1.0, gamma=0.5, tol=1e-4, warm_start=True, random_state=0).fit(X, y)
    assert model._kernel_rows is not None and model._warm_C == 1.0
    if not rows_kept:
        model._kernel_rows = None
    given = _heavy_flags_given(monkeypatch)
    model.set_params(**change).fit(X, y)
    assert model.warm_started_ and given == [[heavy]]
    cold = CoreSVC(**{"C": 1.0, "gamma": 0.5, **change}, tol=1e-4, random_state=0).fit(X, y)
    np.testing.assert_allclose(_margins(model), _margins(cold), rtol=1e-3)


@pytest.mark.parametrize("change, blend", [
    ({"C": 0.25}, True), ({"gamma": 0.125}, True), ({"C": 0.25, "gamma": 0.125}, True),
    ({"C": 4.0}, False), ({"gamma": 2.0}, False), ({"C": 0.25, "gamma": 2.0}, False),
    ({"C": 4.0, "gamma": 0.125}, False), ({"C": 0.25, "kernel": "poly"}, False),
])
def test_warm_fits_expecting_more_support_vectors_ask_for_the_blended_start(monkeypatch, change, blend):
    """A smaller C (gamma not larger) or a smaller RBF gamma (C not larger): the small-problem solver is asked to
    mix the warm start with the balanced weights (solvers/dense.py decides whether it pays); not for a cold fit."""
    import inspect

    from coresvm.solvers.dense import run_dense_rows

    X, y = _large_binary_problem()
    flags = []
    signature = inspect.signature(run_dense_rows)

    def spy(*args, **kwargs):
        flags.append(signature.bind(*args, **kwargs).arguments.get("blend_start", False))
        return run_dense_rows(*args, **kwargs)

    monkeypatch.setattr(svc_module, "run_dense_rows", spy)
    model = CoreSVC(C=1.0, gamma=0.5, warm_start=True, random_state=0).fit(X, y)
    model.set_params(**change).fit(X, y)
    assert flags == [False, blend]


def test_a_model_without_its_previous_c_warm_starts_from_its_whole_support(monkeypatch):
    """A fitted model that does not know its previous C (``_warm_C``: a file or object of an earlier version)
    keeps the rule of before: heavy-only at another kernel only."""
    X, y = _large_binary_problem()
    model = CoreSVC(C=1.0, gamma=0.5, warm_start=True, random_state=0).fit(X, y)
    del model._warm_C
    model._kernel_rows = None
    given = _heavy_flags_given(monkeypatch)
    model.set_params(C=16.0).fit(X, y)
    assert model.warm_started_ and given == [[False]]


def test_a_warm_start_at_another_kernel_starts_large_problems_from_their_heavy_support_vectors():
    rows = np.arange(10, dtype=np.int64)
    old_rows = np.array([1, 3, 5, 7, 2, 4], dtype=np.int64)
    old_alpha = np.array([0.1, 0.5, 0.3, 0.1, 0.9, 0.1])
    offsets = np.array([0, 4, 6], dtype=np.int64)
    problem_rows, problem_offsets = np.concatenate([rows, rows]), np.array([0, 10, 20], dtype=np.int64)
    positions, alpha, out = svc_warm.warm_start_positions(problem_rows, problem_offsets, old_rows, old_alpha,
                                                             offsets, np.array([True, False]))
    # problem 0: mean weight 0.25 keeps rows 3 and 5; problem 1 keeps all
    np.testing.assert_array_equal(positions, [3, 5, 2, 4])
    np.testing.assert_array_equal(alpha, [0.5, 0.3, 0.9, 0.1])
    np.testing.assert_array_equal(out, [0, 2, 4])


def test_shared_inner_products_are_read_only_for_the_rows_they_were_lent_for(digits, monkeypatch):
    """A search's products of all its rows (SharedInnerProducts) lent to a fit on some of its rows: the fit
    reads each sub-problem's block and reaches the cold optimum; a fit whose X is not those rows, a pickled copy
    (no values) or data too large for ``cache_size`` or with few features get none, and the lent products do
    not outlive the fit (nor are they saved)."""
    from coresvm.warm_start import SharedInnerProducts

    X, y = digits
    params = dict(C=10, gamma=0.05, tol=1e-4, max_iter=10**6, random_state=0)
    shared = CoreSVC(**params).shared_inner_products(X)
    assert isinstance(shared, SharedInnerProducts)
    assert CoreSVC(cache_size=len(X) ** 2 * 8 / 2**20 * 0.99).shared_inner_products(X) is None
    assert CoreSVC().shared_inner_products(X[:, :16]) is None
    rows = np.flatnonzero(np.arange(len(y)) % 3 != 0)
    lent = shared.on_rows(rows)
    np.testing.assert_array_equal(lent.positions_of(X[rows].copy()), rows)  # an equal copy: a fold's X
    assert lent.positions_of(X[rows][::-1]) is None and lent.positions_of(X[rows[:-1]]) is None
    assert pickle.loads(pickle.dumps(lent)).positions_of(X[rows]) is None

    given = _spy_on_dot_rows(monkeypatch)
    warm = CoreSVC(warm_start=True, **params).lend_inner_products(lent)
    warm.fit(X[rows], y[rows])
    assert len(given) == 6 and all(n > 0 for n in given)  # every pair: all its points' products
    assert getattr(warm, "_search_dots", None) is None and warm.warm_start_state().inner_products is None
    cold = CoreSVC(**params).fit(X[rows], y[rows])
    np.testing.assert_allclose(_margins(warm), _margins(cold), rtol=1e-4)

    given.clear()
    other = CoreSVC(warm_start=True, **params).lend_inner_products(lent)
    other.fit(X[rows][::-1], y[rows][::-1])  # not the rows they were lent for: computed, as without
    assert len(given) == 6 and all(n == 0 for n in given)


def test_averaged_solution_merges_rows_and_refuses_other_decompositions(digits):
    """``WarmStart.averaged_with``: the mean of a state with itself is itself (shared rows merged, not repeated);
    states of other classes (or none) give back the first state unchanged."""
    X, y = digits
    model = CoreSVC(C=10, gamma=0.05, warm_start=True, random_state=0).fit(X, y)
    state = model.warm_start_state()
    same = state.averaged_with([copy.copy(state)])

    def weights_by_row(m, k):  # sub-problem k's weights (the mean lists its rows in increasing order)
        rows, weights = m.problem(k)
        return dict(zip(rows.tolist(), weights.tolist(), strict=True))

    np.testing.assert_array_equal(same.offsets, state.offsets)
    for k in range(state.n_problems):
        assert weights_by_row(same, k) == pytest.approx(weights_by_row(state, k))
    in_row_order = np.argsort(model.support_)  # the mean lists the support vectors by row
    np.testing.assert_array_equal(same.support, model.support_[in_row_order])
    np.testing.assert_array_equal(same.support_vectors, model.support_vectors_[in_row_order])
    np.testing.assert_array_equal(same.support_classes, state.support_classes[in_row_order])
    assert same.kernel_rows is None and same.inner_products is None and (same.C, same.kernel) == (10.0, state.kernel)
    fewer_classes = CoreSVC(C=10, gamma=0.05, warm_start=True, random_state=0).fit(X[y < 3], y[y < 3])
    assert state.averaged_with([fewer_classes.warm_start_state()]) is state
    assert state.averaged_with([None]) is state


@pytest.mark.parametrize("change", [{"C": 100.0}, {"gamma": 0.2}, {"C": 0.5, "gamma": 0.01}])
def test_a_fits_warm_start_state_given_to_a_new_estimator_gives_the_refitted_model_bit_for_bit(digits, change):
    """The public hand-over (issue 28): a fit's WarmStart given to a fresh estimator (set_warm_start_state) gives
    exactly the model the fitted estimator gives when refitted with warm_start=True from its own state, kept
    kernel rows and inner products included; the state is used once, and the rows it kept go to that fit."""
    X, y = digits
    params = dict(C=10.0, gamma=0.05, tol=1e-3, random_state=0)
    own = CoreSVC(warm_start=True, **params).fit(X, y)
    own.set_params(**change).fit(X, y)

    first = CoreSVC(warm_start=True, **params).fit(X, y)
    state = first.warm_start_state()
    assert isinstance(state, WarmStart) and state.n_problems == 6 and (state.C, state.kernel.gamma) == (10.0, 0.05)
    assert state.kernel_rows is not None and state.inner_products is not None  # 64 features: both kept
    for k in range(state.n_problems):
        assert state.problem(k)[1].sum() == pytest.approx(1.0)
    assert state.applies_to(X, np.searchsorted(first.classes_, y), first.classes_, "ovo")
    assert not state.applies_to(X, np.searchsorted(first.classes_, y), first.classes_, "ovr")
    given = CoreSVC(warm_start=True, **{**params, **change}).set_warm_start_state(state)
    assert given.warm_start_state() is state
    given.fit(X, y)
    assert own.warm_started_ and given.warm_started_
    for name in ("support_", "support_vectors_", "dual_coef_", "intercept_", "n_iter_"):
        np.testing.assert_array_equal(getattr(given, name), getattr(own, name), err_msg=name)
    assert [info["rho"] for info in given.solver_info_] == [info["rho"] for info in own.solver_info_]
    mine, theirs = given.warm_start_state(), own.warm_start_state()
    assert mine is not state and mine.C == change.get("C", 10.0)
    for name in ("rows", "weights", "offsets"):
        np.testing.assert_array_equal(getattr(mine, name), getattr(theirs, name), err_msg=name)
    assert state.kernel_rows.entries == {}  # taken by the fit that started from the state


def test_set_warm_start_state_none_starts_cold_and_a_pickled_state_still_starts_warm(digits):
    X, y = digits
    params = dict(C=10.0, gamma=0.05, tol=1e-4, random_state=0)
    fitted = CoreSVC(warm_start=True, **params).fit(X, y)
    state = pickle.loads(pickle.dumps(fitted.warm_start_state()))  # the solution, not the kept rows
    assert state.kernel_rows.entries == {} and not state.inner_products.holds(X)
    fitted.set_warm_start_state(None).set_params(C=100.0).fit(X, y)
    fresh = CoreSVC(warm_start=True, **{**params, "C": 100.0}).fit(X, y)
    assert not fitted.warm_started_
    np.testing.assert_array_equal(fitted.dual_coef_, fresh.dual_coef_)
    warm = CoreSVC(warm_start=True, **{**params, "C": 100.0}).set_warm_start_state(state).fit(X, y)
    assert warm.warm_started_
    np.testing.assert_allclose(_margins(warm), _margins(fresh), rtol=1e-4)
    with pytest.raises(TypeError, match="WarmStart"):
        CoreSVC().set_warm_start_state(fitted)
    assert CoreSVC().warm_start_state() is None


def test_a_loaded_model_file_hands_over_its_saved_solution(digits, tmp_path):
    """Model files store the solution (not the kept rows): a loaded model's warm_start_state starts a fit warm,
    the same fit as from the original's state once its kept rows are dropped."""
    X, y = digits
    params = dict(C=10.0, gamma=0.05, tol=1e-3, random_state=0)
    model = CoreSVC(warm_start=True, **params).fit(X, y)
    model.save(tmp_path / "model.csvm")
    loaded = CoreSVC.load(tmp_path / "model.csvm").warm_start_state()
    assert loaded.kernel_rows is None and loaded.inner_products is None
    np.testing.assert_array_equal(loaded.weights, model.warm_start_state().weights)
    assert (loaded.C, loaded.kernel, loaded.multiclass) == (10.0, model.warm_start_state().kernel, "ovo")
    original = model.warm_start_state()
    original.kernel_rows = original.inner_products = None  # a view: the model keeps its own
    fits = [CoreSVC(warm_start=True, **{**params, "C": 30.0}).set_warm_start_state(state).fit(X, y)
            for state in (loaded, original)]
    assert all(fit.warm_started_ for fit in fits)
    np.testing.assert_array_equal(fits[0].dual_coef_, fits[1].dual_coef_)
