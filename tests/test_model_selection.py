"""PatternSearchCV and nested_cross_validate (Strack 2013, sec. 3: pattern search, nested CV)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.datasets import load_iris
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.svm import SVC

from coresvm.model_selection import (
    GSVM_PARAM_GRID,
    PatternSearchCV,
    _cross_pattern,
    _most_uncertain_point,
    nested_cross_validate,
)

LOG4_C = np.log(GSVM_PARAM_GRID["C"]) / np.log(4)          # -2..5
LOG4_GAMMA = np.log(GSVM_PARAM_GRID["gamma"]) / np.log(4)  # -5..2

FIT_LOG: list[dict] = []  # every fit of the fake estimators (n_jobs=1 runs in this process)


def unimodal(log_c, log_gamma, peak=(2.0, -1.0), scale=(1.0, 1.5)):
    """A concave, axis-aligned score surface over (log4 C, log4 gamma) with its maximum at peak."""
    return -(((log_c - peak[0]) / scale[0]) ** 2 + ((log_gamma - peak[1]) / scale[1]) ** 2)


class SurfaceEstimator(ClassifierMixin, BaseEstimator):
    """A fake classifier whose score is a fixed function of (C, gamma), whatever the data.

    Column 0 of X holds the row id; every fit and score is logged with the ids it saw. With
    warm_start=True a refit records the C it continued from.
    """

    def __init__(self, C=1.0, gamma=1.0, surface="unimodal", peak=(2.0, -1.0), warm_start=False):
        self.C = C
        self.gamma = gamma
        self.surface = surface
        self.peak = peak
        self.warm_start = warm_start

    def fit(self, X, y):
        previous = getattr(self, "fitted_C_", None) if self.warm_start else None
        FIT_LOG.append({"event": "fit", "C": self.C, "gamma": self.gamma, "ids": X[:, 0].astype(int).copy(),
                        "warm_from": previous, "object": id(self)})
        self.fitted_C_ = self.C
        self.classes_ = np.unique(y)
        return self

    def predict(self, X):
        return np.full(len(X), self.classes_[0])

    def score(self, X, y=None):
        FIT_LOG.append({"event": "score", "ids": X[:, 0].astype(int).copy()})
        log_c, log_gamma = math.log(self.C, 4), math.log(self.gamma, 4)
        if self.surface == "unimodal":
            return unimodal(log_c, log_gamma, self.peak)
        # "bimodal": a broad hill near the grid centre and a higher narrow one in the (C, gamma) high corner
        broad = 1.0 - 0.05 * ((log_c - 1.5) ** 2 + (log_gamma + 1.5) ** 2)
        narrow = 2.0 - 0.5 * ((log_c - 5) ** 2 + (log_gamma - 2) ** 2)
        return max(broad, narrow)


def toy_data(n=60, seed=0):
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.arange(n), rng.normal(size=(n, 2))])
    y = np.arange(n) % 2
    return X, y


def grid_optimum(surface_fn):
    values = {(c, g): surface_fn(lc, lg) for c, lc in zip(GSVM_PARAM_GRID["C"], LOG4_C, strict=True)
              for g, lg in zip(GSVM_PARAM_GRID["gamma"], LOG4_GAMMA, strict=True)}
    return max(values, key=values.get)


# ---------------------------------------------------------------------- the pattern itself
def test_cross_pattern_clips_to_the_grid_and_dedupes():
    assert _cross_pattern((3, 3), 4, (8, 8)) == [(3, 3), (0, 3), (7, 3), (3, 0), (3, 7)]
    assert _cross_pattern((0, 7), 1, (8, 8)) == [(0, 7), (1, 7), (0, 6)]
    assert _cross_pattern((0,), 2, (1,)) == [(0,)]


def test_most_uncertain_point_is_the_farthest_from_all_evaluated():
    evaluated = {(0, 0), (7, 7)}
    point, distance = _most_uncertain_point((8, 8), evaluated)
    assert distance == 7 and point == (0, 7)  # ties: first in grid order
    grid = [(i, j) for i in range(8) for j in range(8)]
    brute = max(min(abs(i - a) + abs(j - b) for a, b in evaluated) for i, j in grid)
    assert distance == brute


# ---------------------------------------------------------------------- finds the optimum
@pytest.mark.parametrize("peak", [(c, g) for c in LOG4_C for g in LOG4_GAMMA])
def test_finds_the_grid_optimum_of_a_unimodal_surface(peak):
    X, y = toy_data()
    search = PatternSearchCV(SurfaceEstimator(peak=tuple(peak), warm_start=False), cv=3, n_restarts=0,
                             refit=False).fit(X, y)
    best = grid_optimum(lambda lc, lg: unimodal(lc, lg, peak))
    assert (search.best_params_["C"], search.best_params_["gamma"]) == best
    assert len(search.cv_results_["params"]) < 64  # fewer evaluations than the full grid


def test_off_grid_peak_and_fewer_than_a_third_of_the_grid_on_average():
    X, y = toy_data()
    counts = []
    for peak in [(0.4, -2.3), (3.7, 1.2), (-1.6, -4.4), (4.6, 0.3)]:
        search = PatternSearchCV(SurfaceEstimator(peak=peak), cv=2, n_restarts=0, refit=False).fit(X, y)
        best = grid_optimum(lambda lc, lg, p=peak: unimodal(lc, lg, p))
        assert (search.best_params_["C"], search.best_params_["gamma"]) == best
        counts.append(len(search.cv_results_["params"]))
    assert np.mean(counts) <= 64 / 3


def test_matches_grid_search_on_a_small_real_set():
    X, y = load_iris(return_X_y=True)
    grid = {"C": [4.0**k for k in range(-2, 6)], "gamma": [4.0**k for k in range(-5, 3)]}
    cv = KFold(5, shuffle=True, random_state=0)
    full = GridSearchCV(SVC(), grid, cv=cv).fit(X, y)
    pattern = PatternSearchCV(SVC(), grid, cv=cv).fit(X, y)
    assert pattern.best_score_ == pytest.approx(full.best_score_)
    assert len(pattern.cv_results_["params"]) < 64
    # the same point gets the same CV score from both tools
    scores = {tuple(p.values()): s for p, s in zip(full.cv_results_["params"], full.cv_results_["mean_test_score"],
                                                   strict=True)}
    for p, s in zip(pattern.cv_results_["params"], pattern.cv_results_["mean_test_score"], strict=True):
        assert s == pytest.approx(scores[tuple(p.values())])
    assert pattern.best_estimator_.get_params()["C"] == pattern.best_params_["C"]
    assert pattern.score(X, y) == pytest.approx(full.best_estimator_.__class__(**pattern.best_params_)
                                                .fit(X, y).score(X, y))


def test_cv_results_has_grid_search_keys():
    X, y = load_iris(return_X_y=True)
    grid = {"C": [0.5, 4.0], "gamma": [0.1, 1.0]}
    for extra in ({}, {"return_train_score": True}, {"scoring": ["accuracy", "f1_macro"], "refit": "accuracy"}):
        full = GridSearchCV(SVC(), grid, cv=3, **extra).fit(X, y)
        pattern = PatternSearchCV(SVC(), grid, cv=3, **extra).fit(X, y)
        assert set(pattern.cv_results_) == set(full.cv_results_)
        for key, value in pattern.cv_results_.items():
            assert len(value) == len(pattern.cv_results_["params"]), key


def test_multimetric_needs_a_refit_metric_to_climb():
    X, y = load_iris(return_X_y=True)
    search = PatternSearchCV(SVC(), {"C": [0.5, 4.0]}, cv=3, scoring=["accuracy", "f1_macro"], refit=False)
    with pytest.raises(ValueError, match="refit=<metric name>"):
        search.fit(X, y)


def test_bad_grid_is_named():
    X, y = toy_data()
    with pytest.raises(ValueError, match=r"param_grid\['C'\] is empty"):
        PatternSearchCV(SurfaceEstimator(), {"C": []}).fit(X, y)
    with pytest.raises(ValueError, match="warm_start=True"):
        PatternSearchCV(SVC(), {"C": [1.0]}, warm_start=True).fit(X, y)


# ---------------------------------------------------------------------- restarts and the cache
def test_restarts_visit_unvisited_regions_and_find_the_corner_peak():
    X, y = toy_data()
    single = PatternSearchCV(SurfaceEstimator(surface="bimodal"), cv=2, n_restarts=0, refit=False).fit(X, y)
    assert single.best_params_ == {"C": 4.0, "gamma": 4.0**-2}  # the first walk climbs the broad hill
    restarted = PatternSearchCV(SurfaceEstimator(surface="bimodal"), cv=2, n_restarts=3, refit=False).fit(X, y)
    assert restarted.restarts_, "no restart happened"
    axes = list(GSVM_PARAM_GRID.values())
    evaluated_before = set()
    for step in restarted.search_path_:
        if step["run"] == 0:
            evaluated_before |= {(axes[0].index(p["C"]), axes[1].index(p["gamma"])) for p in step["new"]}
    first = restarted.restarts_[0]
    start = (axes[0].index(first["start"]["C"]), axes[1].index(first["start"]["gamma"]))
    assert start not in evaluated_before
    distances = [abs(start[0] - a) + abs(start[1] - b) for a, b in evaluated_before]
    assert min(distances) == first["uncertainty"] >= 2
    assert _most_uncertain_point((8, 8), evaluated_before) == (start, first["uncertainty"])
    assert restarted.best_params_ == {"C": 4.0**5, "gamma": 4.0**2}
    assert len(restarted.cv_results_["params"]) < 64


def test_restart_probe_costs_one_point_when_the_surface_falls_towards_the_restart():
    X, y = toy_data()
    surface = SurfaceEstimator(peak=(1.0, -2.0))
    plain = PatternSearchCV(surface, cv=2, n_restarts=0, refit=False).fit(X, y)
    probed = PatternSearchCV(surface, cv=2, n_restarts=1, refit=False).fit(X, y)  # probe on
    walked = PatternSearchCV(surface, cv=2, n_restarts=1, restart_probe=False, refit=False).fit(X, y)
    assert probed.search_path_[-1]["action"] == "probed" and probed.search_path_[-1]["run"] == 1
    assert len(probed.cv_results_["params"]) == len(plain.cv_results_["params"]) + 1
    assert len(walked.cv_results_["params"]) > len(probed.cv_results_["params"])
    assert probed.best_params_ == walked.best_params_ == plain.best_params_


def test_restart_probe_still_finds_the_corner_peak_with_one_restart():
    X, y = toy_data()
    search = PatternSearchCV(SurfaceEstimator(surface="bimodal"), cv=2, n_restarts=1, refit=False).fit(X, y)
    assert search.best_params_ == {"C": 4.0**5, "gamma": 4.0**2}
    assert not any(step["action"] == "probed" for step in search.search_path_)


@pytest.mark.parametrize("surface", ["unimodal", "bimodal"])
@pytest.mark.parametrize("n_restarts", [1, 3])
def test_search_path_reports_every_evaluated_point_once(surface, n_restarts):
    # Including a restart's probe point when the walk goes on from it (the gallery colours points by it).
    X, y = toy_data()
    search = PatternSearchCV(SurfaceEstimator(surface=surface), cv=2, n_restarts=n_restarts, refit=False).fit(X, y)
    reported = [(p["C"], p["gamma"]) for step in search.search_path_ for p in step["new"]]
    evaluated = [(p["C"], p["gamma"]) for p in search.cv_results_["params"]]
    assert sorted(reported) == sorted(evaluated)


def test_out_of_grid_points_are_clipped_or_skipped():
    assert _cross_pattern((1, 6), 4, (8, 8), "skip") == [(1, 6), (5, 6), (1, 2)]
    assert _cross_pattern((1, 6), 4, (8, 8), "clip") == [(1, 6), (0, 6), (5, 6), (1, 2), (1, 7)]
    X, y = toy_data()
    for edges in ("clip", "skip"):
        search = PatternSearchCV(SurfaceEstimator(), cv=2, out_of_grid=edges, refit=False).fit(X, y)
        assert search.best_params_ == {"C": 16.0, "gamma": 0.25}  # the peak (2, -1) in log4
    with pytest.raises(ValueError, match="out_of_grid"):
        PatternSearchCV(SurfaceEstimator(), out_of_grid="wrap").fit(X, y)


def test_cache_prevents_re_evaluation():
    X, y = toy_data()
    FIT_LOG.clear()
    search = PatternSearchCV(SurfaceEstimator(surface="bimodal"), cv=3, n_restarts=3, refit=False,
                             warm_start=False).fit(X, y)
    fits = [(e["C"], e["gamma"]) for e in FIT_LOG if e["event"] == "fit"]
    points = [(p["C"], p["gamma"]) for p in search.cv_results_["params"]]
    assert len(points) == len(set(points))
    assert len(fits) == 3 * len(points) == search.n_fits_
    assert sorted(set(fits)) == sorted(points)
    axes = list(GSVM_PARAM_GRID.values())
    asked = sum(len(_cross_pattern((axes[0].index(s["center"]["C"]), axes[1].index(s["center"]["gamma"])),
                                   s["step"], (8, 8))) for s in search.search_path_)
    assert asked > len(points)  # the walk asked for evaluated points again; the cache answered


# ---------------------------------------------------------------------- warm starts
def test_warm_fits_share_fold_and_gamma_in_increasing_c():
    X, y = toy_data()
    FIT_LOG.clear()
    cold = PatternSearchCV(SurfaceEstimator(), cv=3, warm_start=False, refit=False).fit(X, y)
    cold_fits = [e for e in FIT_LOG if e["event"] == "fit"]
    assert not cold.warm_start_ and all(e["warm_from"] is None for e in cold_fits)
    FIT_LOG.clear()
    warm = PatternSearchCV(SurfaceEstimator(), cv=3, refit=False).fit(X, y)  # "auto": has warm_start
    fits = [e for e in FIT_LOG if e["event"] == "fit"]
    assert warm.warm_start_
    assert warm.best_params_ == cold.best_params_ and len(fits) == len(cold_fits)
    assert any(e["warm_from"] is not None for e in fits)
    by_object: dict[int, list] = {}
    for e in fits:
        by_object.setdefault(e["object"], []).append(e)
    for chain in by_object.values():  # one estimator per (fold, gamma): same rows, same gamma
        assert len({e["gamma"] for e in chain}) == 1
        assert len({tuple(e["ids"]) for e in chain}) == 1
        for before, after in zip(chain, chain[1:], strict=False):
            assert after["warm_from"] == before["C"]
    # inside one batch (consecutive fits of one object), C increases
    for before, after in zip(fits, fits[1:], strict=False):
        if before["object"] == after["object"]:
            assert after["C"] > before["C"] or after["warm_from"] == before["C"]
    n_groups = len({(e["gamma"], tuple(e["ids"])) for e in fits})
    assert len(by_object) == n_groups  # the last model of a group starts its next batch


def test_warm_start_batches_are_ordered_by_increasing_c():
    X, y = toy_data()
    grid = {"C": [8.0, 1.0, 4.0, 2.0], "gamma": [1.0]}  # one pattern step evaluates several C at once
    FIT_LOG.clear()
    PatternSearchCV(SurfaceEstimator(), grid, cv=2, refit=False, n_restarts=0).fit(X, y)
    fits = [e for e in FIT_LOG if e["event"] == "fit"]
    first_batch = [e for e in fits if e["object"] == fits[0]["object"]]
    first_cs = [e["C"] for e in first_batch[:3]]
    assert first_cs == sorted(first_cs)


def test_warm_start_in_a_pipeline_with_a_real_estimator():
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = load_iris(return_X_y=True)
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=500))
    grid = {"logisticregression__C": [4.0**k for k in range(-2, 4)], "logisticregression__tol": [1e-4, 1e-3]}
    cold = PatternSearchCV(model, grid, cv=3, warm_start=False).fit(X, y)
    warm = PatternSearchCV(model, grid, cv=3, warm_start=True).fit(X, y)
    assert warm.warm_start_ and not cold.warm_start_
    assert warm.best_score_ == pytest.approx(cold.best_score_, abs=0.02)
    cold_scores = {tuple(p.values()): s for p, s in zip(cold.cv_results_["params"],
                                                        cold.cv_results_["mean_test_score"], strict=True)}
    common = [(s, cold_scores[tuple(p.values())]) for p, s in zip(warm.cv_results_["params"],
                                                                  warm.cv_results_["mean_test_score"], strict=True)
              if tuple(p.values()) in cold_scores]
    assert common
    np.testing.assert_allclose(*zip(*common, strict=True), atol=0.02)


def test_warm_start_with_coresvc():
    from coresvm import CoreSVC

    if "warm_start" not in CoreSVC().get_params():
        pytest.skip("CoreSVC has no warm_start parameter in this branch")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 2))
    y = (X[:, 0] * X[:, 1] > 0).astype(int)
    grid = {"C": [4.0, 64.0, 1024.0], "gamma": [0.25, 1.0]}
    warm_flags = []

    def accuracy_noting_warm_starts(estimator, X_test, y_test):
        warm_flags.append(bool(getattr(estimator, "warm_started_", False)))
        return float(np.mean(estimator.predict(X_test) == y_test))

    cold = PatternSearchCV(CoreSVC(random_state=0), grid, cv=3, warm_start=False).fit(X, y)
    warm = PatternSearchCV(CoreSVC(random_state=0), grid, cv=3, warm_start=True,
                           scoring=accuracy_noting_warm_starts).fit(X, y)
    assert warm.warm_start_
    # across gamma and across folds too: only the search's very first fit is cold
    assert warm_flags.count(False) == 1 and len(warm_flags) == warm.n_fits_ == cold.n_fits_
    assert warm.n_warm_fits_ == warm.n_fits_ - 1 and cold.n_warm_fits_ == 0
    np.testing.assert_allclose(warm.cv_results_["mean_test_score"], cold.cv_results_["mean_test_score"], atol=0.03)
    assert warm.best_estimator_.warm_started_  # the refit started from a fold's model ...
    assert warm.best_estimator_.warm_start is False  # ... and keeps the user's setting
    # ... and none of the memory a next warm fit would read, but its solution
    assert warm.best_estimator_.warm_start_state().kernel_rows is None
    assert warm.best_estimator_.warm_start_state().rows.size > 0
    user_warm = PatternSearchCV(CoreSVC(random_state=0, warm_start=True), grid, cv=3).fit(X, y)
    assert user_warm.best_estimator_.warm_start_state().kernel_rows is not None  # the user's own next fit reads them


def test_warm_search_keeps_only_the_warm_start_states_of_the_models_it_fits():
    """A warm search keeps the WarmStart of every CoreSVC it fits as a start, not the model: once scored, a model
    is freed before the next fit runs (its prediction arrays, n_SV x n_pairs, would make each new fit's arrays
    fresh memory); the refitted best estimator predicts."""
    import gc
    import weakref

    from coresvm import CoreSVC

    rng = np.random.default_rng(2)
    X = rng.normal(size=(240, 2))
    y = np.digitize(X[:, 0] + 0.5 * X[:, 1], [-0.6, 0.0, 0.6])  # four classes: six one-vs-one pairs
    scored, alive_before = [], []

    def accuracy(estimator, X_test, y_test):
        gc.collect()
        alive_before.append(sum(ref() is not None for ref in scored))  # earlier models still referenced
        scored.append(weakref.ref(estimator))
        return float(np.mean(estimator.predict(X_test) == y_test))

    grid = {"C": [1.0, 16.0, 256.0], "gamma": [0.25, 1.0, 4.0]}
    warm = PatternSearchCV(CoreSVC(random_state=0), grid, cv=3, warm_start=True, scoring=accuracy).fit(X, y)
    assert len(scored) == warm.n_fits_ and warm.n_warm_fits_ == warm.n_fits_ - 1
    assert alive_before == [0] * warm.n_fits_
    cold = PatternSearchCV(CoreSVC(random_state=0), grid, cv=3, warm_start=False).fit(X, y)
    assert warm.best_estimator_.dual_coef_.shape[0] == 3
    assert np.mean(warm.best_estimator_.predict(X) == cold.best_estimator_.predict(X)) > 0.95


def _dual_objective(model, X, y):
    """rho = a'Qa of the fitted binary CoreSVC (its solver's squared norm)."""
    return model.solver_info_[0]["rho"]


@pytest.mark.parametrize("start", ["other fold", "other gamma", "other fold and gamma"])
def test_coresvc_warm_start_from_another_fold_or_gamma_reaches_the_cold_optimum(start):
    from coresvm import CoreSVC

    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 2))
    y = (X[:, 0] ** 2 + X[:, 1] ** 2 > 1.4).astype(int)
    fold_a, fold_b = np.arange(0, 300), np.arange(100, 400)  # share rows 100..299
    C, gamma = 16.0, 1.0
    other_gamma = gamma * 4 if "gamma" in start else gamma
    first_rows = fold_a if "fold" in start else fold_b
    previous = CoreSVC(C=C, gamma=other_gamma, tol=1e-4, warm_start=True, random_state=0)
    previous.fit(X[first_rows], y[first_rows])
    if "fold" in start:
        new_row_of = np.full(len(y), -1)
        new_row_of[fold_b] = np.arange(len(fold_b))
        state = previous.warm_start_state().moved_to_rows(new_row_of[fold_a])
        assert np.all(np.isin(state.support, np.arange(200)))  # only the shared rows are kept
        previous = CoreSVC(C=C, tol=1e-4, warm_start=True, random_state=0).set_warm_start_state(state)
    warm = previous.set_params(gamma=gamma).fit(X[fold_b], y[fold_b])
    cold = CoreSVC(C=C, gamma=gamma, tol=1e-4, random_state=0).fit(X[fold_b], y[fold_b])
    assert warm.warm_started_ and not cold.warm_started_
    # the same optimum: the objective within the tolerance, the same decisions on the data
    assert _dual_objective(warm, X, y) == pytest.approx(_dual_objective(cold, X, y), rel=1e-3)
    grid = rng.uniform(-2, 2, size=(500, 2))
    np.testing.assert_allclose(warm.decision_function(grid), cold.decision_function(grid), atol=0.05)
    assert np.mean(warm.predict(grid) == cold.predict(grid)) > 0.99


def test_moved_to_rows_drops_rows_that_are_gone():
    from coresvm import CoreSVC

    X, y = load_iris(return_X_y=True)
    model = CoreSVC(C=4.0, warm_start=True, random_state=0).fit(X, y)
    keep = np.arange(0, len(y), 2)
    new_row_of = np.full(len(y), -1)
    new_row_of[keep] = np.arange(len(keep))
    state = model.warm_start_state()
    moved = state.moved_to_rows(new_row_of)
    assert moved is not state and model.support_.max() >= len(keep)  # the original is untouched
    assert state.support is model.support_ and moved.kernel_rows is None and moved.inner_products is None
    np.testing.assert_array_equal(moved.support_vectors, X[keep][moved.support])
    assert len(moved.rows) == moved.offsets[-1] and np.all(moved.rows < len(keep))
    refit = CoreSVC(C=4.0, warm_start=True, random_state=0).set_warm_start_state(moved).fit(X[keep], y[keep])
    assert refit.warm_started_


# ---------------------------------------------------------------------- parallel, progress
def test_parallel_search_gives_the_same_results():
    X, y = load_iris(return_X_y=True)
    grid = {"C": [4.0**k for k in range(-2, 6)], "gamma": [4.0**k for k in range(-5, 3)]}
    serial = PatternSearchCV(SVC(), grid, cv=3).fit(X, y)
    parallel = PatternSearchCV(SVC(), grid, cv=3, n_jobs=2).fit(X, y)
    assert parallel.cv_results_["params"] == serial.cv_results_["params"]
    np.testing.assert_array_equal(parallel.cv_results_["mean_test_score"], serial.cv_results_["mean_test_score"])


def test_verbose_prints_progress(capsys):
    X, y = toy_data()
    PatternSearchCV(SurfaceEstimator(), cv=2, verbose=1, n_restarts=0, refit=False).fit(X, y)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[PatternSearchCV]")]
    assert lines
    assert "fits 10/128 max, 5 points, best" in lines[0]
    assert lines[-1].endswith(" s") and "best 0.0000 at C=16, gamma=0.25" in lines[-1]


def test_dask_local_cluster_gives_the_same_best_params():
    pytest.importorskip("dask")
    distributed = pytest.importorskip("distributed")
    import joblib

    X, y = load_iris(return_X_y=True)
    grid = {"C": [4.0**k for k in range(-2, 6)], "gamma": [4.0**k for k in range(-5, 3)]}
    local = PatternSearchCV(SVC(), grid, cv=3).fit(X, y)
    cluster_options = dict(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None)
    with distributed.LocalCluster(**cluster_options) as cluster, distributed.Client(cluster) as client:
        with joblib.parallel_config(backend="dask"):
            remote = PatternSearchCV(SVC(), grid, cv=3, n_jobs=-1).fit(X, y)
        assert len(client.scheduler_info()["workers"]) == 2
    assert remote.best_params_ == local.best_params_
    assert remote.cv_results_["params"] == local.cv_results_["params"]


def test_parallel_fits_run_with_limited_threads():
    import numba
    from threadpoolctl import threadpool_info

    from coresvm.kernels import default_kernel_threads
    from coresvm.model_selection import _inner_thread_limit, _limited_threads

    assert _inner_thread_limit(1) is None
    assert _inner_thread_limit(2) == max(1, (__import__("os").cpu_count() or 1) // 2)
    before = numba.get_num_threads(), default_kernel_threads()
    with _limited_threads(1):
        assert numba.get_num_threads() == 1
        assert default_kernel_threads() == 1  # the kernel products' own threads too
        assert all(pool["num_threads"] == 1 for pool in threadpool_info())
    assert (numba.get_num_threads(), default_kernel_threads()) == before


# ---------------------------------------------------------------------- nested cross-validation
def test_nested_cv_never_shows_the_outer_test_fold_to_the_search():
    X, y = toy_data(n=100)
    FIT_LOG.clear()
    result = nested_cross_validate(SurfaceEstimator(), X, y, outer_cv=4, inner_cv=3,
                                   search=PatternSearchCV(None, n_restarts=1))
    assert len(result["test_score"]) == 4
    events = list(FIT_LOG)
    position = 0
    for fold in range(4):
        test_ids = set(result["test_indices"][fold].tolist())
        train_ids = set(result["train_indices"][fold].tolist())
        assert not test_ids & train_ids and len(test_ids | train_ids) == 100
        n_search_events = result["n_fits"][fold] * 2  # each inner fit is scored once
        search_events = events[position: position + n_search_events]
        assert [e["event"] for e in search_events] == ["fit", "score"] * result["n_fits"][fold]
        for event in search_events:
            assert not set(event["ids"].tolist()) & test_ids
            assert set(event["ids"].tolist()) <= train_ids
        refit, final = events[position + n_search_events: position + n_search_events + 2]
        assert refit["event"] == "fit" and set(refit["ids"].tolist()) == train_ids
        assert final["event"] == "score" and set(final["ids"].tolist()) == test_ids
        position += n_search_events + 2
    assert position == len(events)
    for key in ("search_time", "fit_time", "score_time", "inner_score"):
        assert len(result[key]) == 4
    assert all(p == {"C": 16.0, "gamma": 0.25} for p in result["best_params"])  # the surface's grid optimum


def test_nested_cv_folds_are_stratified_and_grid_search_works():
    X, y = load_iris(return_X_y=True)
    result = nested_cross_validate(SVC(), X, y, search="grid", param_grid={"C": [1.0, 16.0], "gamma": [0.1, 1.0]},
                                   outer_cv=3, inner_cv=3)
    for test in result["test_indices"]:
        counts = np.bincount(y[test])
        assert counts.max() - counts.min() <= 1  # stratified: each class split evenly
    assert np.all(result["test_score"] > 0.85)
    assert all(n == 12 for n in result["n_fits"])
    with pytest.raises(ValueError, match="search must be"):
        nested_cross_validate(SVC(), X, y, search="random")
    with pytest.raises(ValueError, match="one scoring metric"):
        nested_cross_validate(SVC(), X, y, scoring=["accuracy"])


# ---------------------------------------------------------------------- the command line
def test_cli_select_and_nested_cv_with_pattern_search(monkeypatch, tmp_path, capsys):
    import coresvm
    from coresvm.cli import main, write_data

    monkeypatch.setattr(coresvm, "PatternSearchCV", PatternSearchCV, raising=False)  # the export the lead adds
    X, y = load_iris(return_X_y=True)
    data = tmp_path / "iris.txt"
    X, y = X[::3], y[::3]  # 50 rows keep it fast
    write_data(str(data), X, y)
    assert main(["select", "-m", "pattern", "-c", "1", "-C", "1024", "-g", "0.01", "-G", "10", "--resolution", "3",
                 "-i", "2", "-q", str(data)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Best: C = ")
    assert main(["cv", "-m", "pattern", "-c", "1", "-C", "1024", "-g", "0.01", "-G", "10", "--resolution", "3",
                 "-i", "2", "-o", "2", "-q", str(data)]) == 0
    assert "Nested Cross Validation Accuracy" in capsys.readouterr().out


def _spy_on_search_and_solver(monkeypatch, record):
    """Record the searches' candidate evaluators, and pass each small-problem solver call's arguments to ``record``;
    returns (the evaluators, the real solver)."""
    import coresvm.svc as svc_module
    from coresvm.model_selection import _CandidateEvaluator

    evaluators = []
    real_call, real_solver = _CandidateEvaluator.__call__, svc_module.run_dense_rows

    def recording_call(self, candidates):
        evaluators.append(self)
        return real_call(self, candidates)

    def spy(*args, **kwargs):
        record(args)
        return real_solver(*args, **kwargs)

    monkeypatch.setattr(_CandidateEvaluator, "__call__", recording_call)
    monkeypatch.setattr(svc_module, "run_dense_rows", spy)
    return evaluators, real_solver


def test_warm_search_keeps_one_set_of_inner_products_per_fold_and_fits_reuse_it(monkeypatch):
    """CoreSVC's kept inner products <x_i, x_j> hold for every gamma and C of a fold: the search keeps the
    latest per fold (not one per fold and gamma), hands it to the fold's next start, and the scores are
    those of a cold search (within the solver's tolerance).  This is the path of searches whose rows' products
    do not fit ``cache_size`` (no shared products, as if the data were larger)."""
    from sklearn.datasets import load_digits

    import coresvm.svc as svc_module
    from coresvm import CoreSVC

    monkeypatch.setattr(CoreSVC, "shared_inner_products", lambda self, X: None)
    X, y = load_digits(n_class=4, return_X_y=True)
    X, y = X[:360] / 16.0, y[:360]
    given = []
    evaluators, real_solver = _spy_on_search_and_solver(monkeypatch, lambda args: given.append(len(args[10][0])))
    grid = {"C": [1.0, 16.0, 256.0], "gamma": [0.01, 0.04, 0.16]}
    warm = PatternSearchCV(CoreSVC(tol=1e-4, random_state=0), grid, cv=3, n_restarts=0, refit=False).fit(X, y)
    evaluator = evaluators[-1]
    assert sorted(evaluator.dot_rows) == [0, 1, 2]
    assert all(state.inner_products is None for _, state in evaluator.warm_models.values())
    assert sum(n > 0 for n in given) > len(given) // 2  # most pairs of most fits read kept rows
    monkeypatch.setattr(svc_module, "run_dense_rows", real_solver)
    cold = PatternSearchCV(CoreSVC(tol=1e-4, random_state=0), grid, cv=3, n_restarts=0, refit=False,
                           warm_start=False).fit(X, y)
    assert warm.cv_results_["params"] == cold.cv_results_["params"]
    np.testing.assert_allclose(warm.cv_results_["mean_test_score"], cold.cv_results_["mean_test_score"], atol=0.01)


def test_warm_search_lends_every_fit_the_inner_products_of_all_its_rows(monkeypatch):
    """When all the search's rows' inner products fit ``cache_size``, they are computed once and every warm fit, on
    any fold and at any C and gamma, reads each sub-problem's from there (none kept per fold, none computed in
    the fits); the fitted models keep no reference to them, and the scores and refit are the cold search's."""
    from sklearn.datasets import load_digits

    import coresvm.svc as svc_module
    from coresvm import CoreSVC

    X, y = load_digits(n_class=4, return_X_y=True)
    X, y = X[:360] / 16.0, y[:360]
    given = []

    def record(args):
        rows, dot_rows = args[1], args[10]
        given.append((len(rows), len(dot_rows), len(dot_rows[0])))
        if len(dot_rows) == 4:  # the block of the search's products of this sub-problem's rows
            points, dots, slots, columns = dot_rows
            np.testing.assert_array_equal(slots, columns)
            np.testing.assert_allclose(dots[np.ix_(slots, columns)], X[slots] @ X[slots].T, rtol=1e-12)

    evaluators, real_solver = _spy_on_search_and_solver(monkeypatch, record)
    grid = {"C": [1.0, 16.0, 256.0], "gamma": [0.01, 0.04, 0.16]}
    warm = PatternSearchCV(CoreSVC(tol=1e-4, random_state=0), grid, cv=3, n_restarts=0).fit(X, y)
    evaluator = evaluators[-1]
    assert evaluator.shared_dots is not None and evaluator.dot_rows == {}
    n_fits = len(warm.cv_results_["params"]) * 3 + 1  # and the refit
    # every small-problem call (6 pairs) of every fit, the search's first (cold start) included, read all its
    # points' products there
    assert [entry for entry in given if entry[1] == 4] == [entry for entry in given if entry[0] == entry[2]]
    assert sum(entry[1] == 4 for entry in given) == 6 * n_fits == len(given)
    kept = [state for _, state in evaluator.warm_models.values()] + [warm.best_estimator_.warm_start_state()]
    assert all(state.inner_products is None for state in kept)
    assert warm.best_estimator_.shared_inner_products(X) is not None  # a search's to lend, not the model's
    monkeypatch.setattr(svc_module, "run_dense_rows", real_solver)
    cold = PatternSearchCV(CoreSVC(tol=1e-4, random_state=0), grid, cv=3, n_restarts=0, warm_start=False).fit(X, y)
    assert warm.cv_results_["params"] == cold.cv_results_["params"]
    np.testing.assert_allclose(warm.cv_results_["mean_test_score"], cold.cv_results_["mean_test_score"], atol=0.01)
    assert (warm.predict(X) == cold.predict(X)).mean() > 0.99
    import joblib
    from threadpoolctl import threadpool_info

    blas_threads = [pool["num_threads"] for pool in threadpool_info()]
    with joblib.parallel_config(backend="threading"):  # parallel jobs: each keeps its fold's products instead
        PatternSearchCV(CoreSVC(tol=1e-4, random_state=0), grid, cv=3, n_restarts=0, n_jobs=2).fit(X, y)
    assert evaluators[-1].shared_dots is None
    # jobs in threads limited the process-wide BLAS pools while they ran, and the last one restored them
    assert [pool["num_threads"] for pool in threadpool_info()] == blas_threads


def test_warm_search_starts_each_fit_from_the_nearest_model_and_passes_kept_kernel_rows(monkeypatch):
    """Per (point, split), a coresvm fit starts from the nearest fitted model of its split: a cross around C0
    fits C0 / 4 and C0 * 4 both from C0 (not one from the other), and one fit at the centre's gamma takes over
    its kept kernel rows.  Scores are the cold search's (within the solver's tolerance)."""
    from sklearn.datasets import load_digits

    import coresvm.svc as svc_module
    from coresvm import CoreSVC

    X, y = load_digits(n_class=2, return_X_y=True)
    X = X / 16.0
    starts, kept_rows = [], []
    real_fit, real_solver = CoreSVC.fit, svc_module.run_dense_rows

    def recording_fit(self, X, y, sample_weight=None):
        state = self.warm_start_state()  # where the fit starts: (C, gamma) of the fit that left it
        starts.append((None if state is None else (state.C, state.kernel.gamma), (self.C, self.gamma)))
        return real_fit(self, X, y, sample_weight)

    def spy(*args, **kwargs):
        kept_rows.append(len(args[12][1]) if len(args) > 12 else 0)
        return real_solver(*args, **kwargs)

    monkeypatch.setattr(CoreSVC, "fit", recording_fit)
    monkeypatch.setattr(svc_module, "run_dense_rows", spy)
    grid = {"C": [0.25, 1.0, 4.0], "gamma": [0.01, 0.04, 0.16]}
    warm = PatternSearchCV(CoreSVC(tol=1e-4, random_state=0), grid, cv=3, n_restarts=0, refit=False).fit(X, y)
    monkeypatch.setattr(CoreSVC, "fit", real_fit)
    monkeypatch.setattr(svc_module, "run_dense_rows", real_solver)
    assert warm.n_warm_fits_ == warm.n_fits_ - 1
    centre = (1.0, 0.04)
    along_c = [start for start, (C, gamma) in starts if gamma == centre[1] and C != centre[0]]
    assert len(along_c) == 6 and all(start == centre for start in along_c)  # C = 0.25 and 4 on three splits
    assert sum(n > 0 for n in kept_rows) >= 3  # one fit per split took over the centre's rows
    cold = PatternSearchCV(CoreSVC(tol=1e-4, random_state=0), grid, cv=3, n_restarts=0, refit=False,
                           warm_start=False).fit(X, y)
    assert warm.cv_results_["params"] == cold.cv_results_["params"]
    np.testing.assert_allclose(warm.cv_results_["mean_test_score"], cold.cv_results_["mean_test_score"], atol=0.01)


def _rows_evaluator(cache_size=1, n_splits=3):
    from coresvm import CoreSVC
    from coresvm.model_selection import _CandidateEvaluator

    splits = [(np.arange(3), np.arange(3, 6))] * n_splits
    axes = [("C", [0.25, 1.0, 4.0, 16.0]), ("gamma", [0.01, 0.1, 1.0])]
    return _CandidateEvaluator(None, None, None, splits, CoreSVC(cache_size=cache_size), ("C", "warm_start"),
                               None, None, {}, None, axes)


def _fitted(n_support=0, kernel_rows=None):
    """A stand-in for a fitted CoreSVC: its warm_start_state (n_support rows) is all a search keeps."""
    from types import SimpleNamespace

    from coresvm import WarmStart

    rows = np.arange(n_support)
    state = WarmStart(rows=rows, weights=np.full(n_support, 1.0 / max(n_support, 1)),
                      offsets=np.array([0, n_support]), support=rows, support_vectors=np.zeros((n_support, 2)),
                      support_classes=np.zeros(n_support, dtype=np.int64), classes=np.array([0, 1]),
                      multiclass="ovo", C=1.0, kernel=None, kernel_rows=kernel_rows)
    return SimpleNamespace(warm_start_state=lambda: state, state=state)


def _holding(nbytes):
    from types import SimpleNamespace

    return _fitted(kernel_rows=SimpleNamespace(nbytes=nbytes))


def test_warm_start_between_equally_near_models_takes_the_one_with_fewer_support_vectors():
    """Two kept states one gamma step either side of a fit's point: it starts from the sparser one (fewer kernel
    rows up front, fewer weights to drain), whichever was kept first; a nearer one still wins over both."""
    for dense_first in (True, False):
        evaluator = _rows_evaluator()
        models = [("dense", {"C": 1.0, "gamma": 1.0}, 900), ("sparse", {"C": 1.0, "gamma": 0.01}, 100)]
        for name, params, n_support in models if dense_first else models[::-1]:
            evaluator._keep(0, name, params, _fitted(n_support))
        assert len(evaluator._start_state(0, {"C": 1.0, "gamma": 0.1}).rows) == 100
    evaluator._keep(0, "same gamma", {"C": 4.0, "gamma": 0.1}, _fitted(5000))
    assert len(evaluator._start_state(0, {"C": 1.0, "gamma": 0.1}).rows) == 5000


def test_kept_kernel_rows_budget_is_two_fits_per_split_dropping_unexpected_rows_first():
    """All kept states' rows stay within two fits' rows per split (at least cache_size); over it, the oldest rows
    that no later fit is expected to read go first, then the others."""
    evaluator = _rows_evaluator(cache_size=1, n_splits=2)
    evaluator._best_params = {"C": 1.0, "gamma": 0.1}
    models = [_holding(2**19) for _ in range(6)]
    gammas = [0.1, 0.01, 1.0, 0.01, 1.0, 0.01]
    for k, (model, gamma) in enumerate(zip(models, gammas, strict=True)):
        evaluator._keep(k % 2, f"point {k}", {"C": 4.0, "gamma": gamma}, model)
    assert evaluator._rows_budget(evaluator._row_holders()) == 2 * 2 * 2**19  # above cache_size (1 MiB)
    # the oldest (gamma 0.1) is the best point's kernel: the two oldest of the others went instead
    assert [model.state.kernel_rows is not None for model in models] == [True, False, False, True, True, True]
    big = _holding(2**21)  # a fit's rows as large as cache_size: two per split of those fit
    evaluator._keep(0, "big", {"C": 1.0, "gamma": 1.0}, big)
    holders = evaluator._row_holders()
    assert big.state.kernel_rows is not None and len(holders) == 5
    assert sum(m.kernel_rows.nbytes for *_, m in holders) <= evaluator._rows_budget(holders) == 2 * 2 * 2**21


def test_kept_kernel_rows_go_to_a_fit_at_their_kernel_and_unexpected_ones_are_lent_as_memory():
    evaluator = _rows_evaluator(cache_size=100)
    old, same, other = _holding(10), _holding(10), _holding(10)
    evaluator._keep(1, "old", {"C": 1.0, "gamma": 0.01}, old)
    evaluator._keep(1, "same", {"C": 4.0, "gamma": 0.1}, same)
    evaluator._keep(2, "other split", {"C": 16.0, "gamma": 0.1}, other)
    rows = same.state.kernel_rows
    assert evaluator._take_kernel_rows(1, {"C": 16.0, "gamma": 0.1}) is rows and same.state.kernel_rows is None
    assert evaluator._take_kernel_rows(1, {"C": 16.0, "gamma": 0.1}) is None  # taken once; split 2's stay
    # a job of the batch still to run at gamma 0.01 on split 1 expects the old rows: not lent
    evaluator._pending = [([7], 1, "next", [{"C": 4.0, "gamma": 0.01}])]
    assert evaluator._spare_kernel_rows(1) is None and old.state.kernel_rows is not None
    evaluator._pending = [([8], 2, "next", [{"C": 4.0, "gamma": 0.01}])]  # another split's job
    rows = old.state.kernel_rows
    assert evaluator._spare_kernel_rows(1) is rows and old.state.kernel_rows is None
    evaluator._best_params = {"C": 1.0, "gamma": 0.1}  # split 2's rows are at the best point's kernel
    assert evaluator._spare_kernel_rows(2) is None and other.state.kernel_rows is not None
    newer = _holding(10)  # the latest rows at that kernel on split 2: a fit there takes these, the older ones are
    evaluator._keep(2, "newer", {"C": 4.0, "gamma": 0.1}, newer)  # spare
    rows = other.state.kernel_rows
    assert evaluator._spare_kernel_rows(2) is rows and newer.state.kernel_rows is not None


def test_warm_search_one_job_at_a_time_reuses_the_kernel_rows_memory(monkeypatch):
    """With one job at a time, each fit can borrow the rows of the fits before it, in the same batch too: a search
    whose folds' rows are large (2,100 points: 35 MB) writes its kernel rows into a handful of buffers, and scores
    as the cold one."""
    from sklearn.datasets import make_classification

    import coresvm.svc as svc_module
    from coresvm import CoreSVC

    X, y = make_classification(3150, n_features=5, n_informative=3, n_redundant=0, flip_y=0.02, random_state=0)
    buffers, lent = set(), []
    real_solver = svc_module.run_dense_rows

    def spy(*args, **kwargs):
        result = real_solver(*args, **kwargs)
        if result.kernel_rows:
            buffers.add(id(result.kernel_rows[0]))
        lent.append(len(args[12][0]) > 0 and len(args[12][1]) == 0 if len(args) > 12 else False)
        return result

    monkeypatch.setattr(svc_module, "run_dense_rows", spy)
    from coresvm.model_selection import _CandidateEvaluator

    real_take, taken = _CandidateEvaluator._take_kernel_rows, []

    def take(self, split, params):
        rows = real_take(self, split, params)
        taken.append(rows is not None)
        return rows

    monkeypatch.setattr(_CandidateEvaluator, "_take_kernel_rows", take)
    grid = {"C": [0.25, 1.0, 4.0], "gamma": [0.01, 0.04, 0.16]}
    search = PatternSearchCV(CoreSVC(cache_size=40, random_state=0), grid, cv=3, n_restarts=0,
                             refit=False).fit(X, y)
    monkeypatch.setattr(svc_module, "run_dense_rows", real_solver)
    assert search.n_fits_ > 12 and sum(lent) >= 3  # buffers lent as memory at another gamma
    assert any(taken)  # rows at a fit's gamma taken from a model other than its start
    assert len(buffers) < search.n_fits_ // 2
    cold = PatternSearchCV(CoreSVC(cache_size=40, random_state=0), grid, cv=3, n_restarts=0, refit=False,
                           warm_start=False).fit(X, y)
    np.testing.assert_allclose(search.cv_results_["mean_test_score"], cold.cv_results_["mean_test_score"],
                               atol=0.01)


def test_a_warm_refit_starts_from_the_mean_of_the_fold_models_at_the_best_point(monkeypatch):
    """The refit continues from the mean of the k fold models at best_params (moved to all rows): per sub-problem
    a point of the simplex on the union of their support; it reaches the cold fit's optimum."""
    from coresvm import CoreSVC

    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 2))
    y = np.digitize(X[:, 0] + 0.5 * X[:, 1], [-0.5, 0.5])  # three classes: three one-vs-one pairs
    from coresvm import WarmStart

    averaged = []
    average = WarmStart.averaged_with

    def spy(self, others):
        start = average(self, others)
        averaged.append((len(others), start))
        return start

    monkeypatch.setattr(WarmStart, "averaged_with", spy)
    search = PatternSearchCV(CoreSVC(tol=1e-5, random_state=0), {"C": [1.0, 16.0], "gamma": [0.5, 2.0]}, cv=3,
                             warm_start=True).fit(X, y)
    [(n_others, start)] = averaged
    assert n_others == 2 and start.n_problems == 3
    assert np.all(np.diff(start.problem(0)[0]) > 0)
    for k in range(3):
        assert start.problem(k)[1].sum() == pytest.approx(1.0)
    assert set(start.rows) == set(start.support)
    np.testing.assert_array_equal(start.support_vectors, X[start.support])
    refit = search.best_estimator_
    cold = CoreSVC(tol=1e-5, random_state=0, **search.best_params_).fit(X, y)
    assert refit.warm_started_
    np.testing.assert_allclose([i["rho"] for i in refit.solver_info_], [i["rho"] for i in cold.solver_info_],
                               rtol=1e-4)


def test_a_search_does_not_warn_for_each_degenerate_candidate_but_its_refit_warns():
    """Candidates with a gamma far off the data's scale score badly; their DegenerateKernelWarnings would bury the
    search's result (the README's quickstart printed three).  The refit of the chosen parameters warns as any fit."""
    from sklearn.datasets import make_classification

    from coresvm import CoreSVC
    from coresvm._validation import DegenerateKernelWarning

    X, y = make_classification(n_samples=300, n_features=8, n_informative=6, random_state=0)
    with pytest.warns(DegenerateKernelWarning):
        CoreSVC(gamma=64.0, random_state=0).fit(X, y)
    grid = {"C": [1.0, 4.0], "gamma": [0.05, 64.0]}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        search = PatternSearchCV(CoreSVC(random_state=0), param_grid=grid, cv=2).fit(X, y)
    assert search.best_params_["gamma"] == 0.05
    assert 64.0 in [params["gamma"] for params in search.cv_results_["params"]]  # degenerate candidates were fitted
    assert not [w for w in caught if issubclass(w.category, DegenerateKernelWarning)]
    with pytest.warns(DegenerateKernelWarning):  # chosen parameters that are degenerate: the refit warns
        PatternSearchCV(CoreSVC(random_state=0), param_grid={"C": [1.0], "gamma": [64.0]}, cv=2).fit(X, y)
