"""Training and prediction on Dask arrays: the core-set cascade.

``fit_cascade`` is the core-set analogue of Cascade SVM (Graf et al. 2005;
anchors.md sec. 4.2).  Core sets compose: the union of the core sets of the
shards is a core set of the union up to the tolerance, and the simplex QP on a
subset that holds every support vector, with no other point violating the
margin, is solved for the whole data.  So::

    1. each row partition trains a local model on its worker (the estimator's
       own solver, at ``tol = max(tol, LOCAL_TOL_FLOOR)``: it only seeds step 2);
       its support vectors are the partition's core set
    2. the union of the local core sets is solved on the client, warm-started
       from the local weights (run_engine's init_idx / init_alpha)
    3. every partition is scored against that global model on its worker; the
       points violating the margin by more than ``tol`` are added to the union
    4. repeat 2-3 until no partition has a violator (or ``max_rounds``)

The violation test is the core-set solver's own: a point ``c`` outside the
core set violates when ``(Q a)_c < (1 - tol) a'Qa`` (Tsang et al. 2005), which on
SVC's scale (coefficients ``a y / rho``, ``rho = a'Qa``, theoretic bias) is
``y_c f(x_c) < 1 - tol``.  When none is left, the relative duality gap on the
whole data is at most ``tol`` (up to the accuracy of the last union solve).

Dask is imported only inside these functions; ``import coresvm`` never loads it.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import replace

import numpy as np
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state

from .kernels import KernelSpec, kernel_product, resolve_gamma, squared_norms, within_process_thread_limit
from .multiclass import BinaryModel
from .problem import SimplexProblem, kkt_bias
from .solvers.core_gram import core_set_capacity
from .solvers.driver import run_engine
from .svc import CoreSVC

LOCAL_TOL_FLOOR = 0.1  # the local fits' tolerance is at least this (they only seed the global solve)


# ---------------------------------------------------------------- worker tasks
def _train_partition(local_model: CoreSVC, X_block: np.ndarray, y_block: np.ndarray, offset: int):
    """Fit ``local_model`` on one partition; return its core set (global rows, X, labels, weights)."""
    X_block = np.asarray(X_block)
    y_block = np.asarray(y_block)
    empty = (np.zeros(0, dtype=np.int64), np.zeros((0, X_block.shape[1]), dtype=X_block.dtype),
             y_block[:0], np.zeros(0))
    if len(np.unique(y_block)) < 2:
        return empty  # a one-class partition has no margin of its own; its points are checked later
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # a rough local core set is only a seed
        local_model.fit(X_block, y_block)
    # dual_coef_ = a y / rho  ->  the simplex weights a (summing to 1)
    weights = np.abs(local_model.dual_coef_[0]) * local_model.solver_info_[0]["rho"]
    support = local_model.support_
    return support.astype(np.int64) + offset, X_block[support], y_block[support], weights / weights.sum()


def _find_violators(X_block, y_block, offset: int, support_vectors, coef, intercept: float, spec: KernelSpec,
                    positive, threshold: float, exclude: np.ndarray, max_points: int | None):
    """The points of one partition with ``y f(x) < threshold`` that are not in the union yet.

    Returns their global rows, X rows, labels and margins (worst first, at most ``max_points``).
    """
    X_block = np.asarray(X_block)
    y_block = np.asarray(y_block)
    signs = np.where(y_block == positive, 1.0, -1.0)
    margins = signs * (kernel_product(X_block, support_vectors, spec, coef, norms_b=squared_norms(support_vectors))
                       + intercept)
    margins[exclude - offset] = np.inf
    rows = np.flatnonzero(margins < threshold)
    rows = rows[np.argsort(margins[rows], kind="stable")]
    if max_points is not None:
        rows = rows[:max_points]
    rows.sort()
    return rows.astype(np.int64) + offset, X_block[rows], y_block[rows], margins[rows]


def _block_decisions(X_block, model: CoreSVC):
    return model.decision_function(np.asarray(X_block))


def _block_predictions(X_block, model: CoreSVC):
    return model.predict(np.asarray(X_block))


# ------------------------------------------------------------------- helpers
def _resolve_client(client):
    """(client or None, whether we opened it).  None: the default client if any, else dask's scheduler."""
    from distributed import Client, get_client

    if client is None:
        try:
            return get_client(), False
        except ValueError:
            return None, False
    if isinstance(client, str):
        return Client(client), True
    return client, False


def _compute(client, tasks: list) -> list:
    if client is None:
        import dask

        return list(dask.compute(*tasks))
    return client.gather(client.compute(tasks))


def _as_row_partitioned(X, y):
    import dask.array as da

    if not isinstance(X, da.Array) or not isinstance(y, da.Array):
        raise TypeError(
            "fit_cascade expects X and y as Dask arrays partitioned by rows, e.g. "
            f"dask.array.from_array(X, chunks=(100_000, -1)); got X: {type(X).__name__}, y: {type(y).__name__}"
        )
    if X.ndim != 2 or y.ndim != 1:
        raise ValueError(f"X must be 2-D and y 1-D; got X.ndim={X.ndim}, y.ndim={y.ndim}")
    if any(np.isnan(X.shape)) or any(np.isnan(y.shape)):
        raise ValueError("X and y need known chunk sizes; call X.compute_chunk_sizes() first")
    if X.shape[0] != y.shape[0]:
        raise ValueError(f"X and y have different numbers of rows: {X.shape[0]} and {y.shape[0]}")
    if X.dtype not in (np.float32, np.float64):
        X = X.astype(np.float64)
    if len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})  # a partition holds whole rows
    if y.chunks[0] != X.chunks[0]:
        y = y.rechunk((X.chunks[0],))
    return X, y


def _resolve_gamma(estimator: CoreSVC, X, client, rng) -> float:
    """The kernel width on the whole data (every partition must use the same one)."""
    gamma = estimator.gamma
    if not isinstance(gamma, str):
        return float(gamma)
    if gamma == "scale":
        (variance,) = _compute(client, [X.astype(np.float64).var()])
        return 1.0 / (X.shape[1] * float(variance)) if variance > 0 else 1.0
    if gamma == "auto":
        return 1.0 / X.shape[1]
    rows = np.sort(rng.choice(X.shape[0], size=min(X.shape[0], 1000), replace=False))
    (sample,) = _compute(client, [X[rows]])
    return resolve_gamma(gamma, sample, rng)


def _class_multipliers(estimator: CoreSVC, classes, counts) -> np.ndarray:
    """C multiplier per class, from ``class_weight`` on the whole data."""
    class_weight = estimator.class_weight
    if class_weight is None:
        return np.ones(len(classes))
    if isinstance(class_weight, str):
        if class_weight != "balanced":
            raise ValueError(f"class_weight must be None, a dict or 'balanced'; got {class_weight!r}")
        return counts.sum() / (len(classes) * counts.astype(np.float64))
    return np.array([float(class_weight.get(label, 1.0)) for label in classes])


# ------------------------------------------------------------------- public
@within_process_thread_limit  # its global solves are fits: the same threads (and one BLAS thread) as CoreSVC.fit
def fit_cascade(
    estimator: CoreSVC,
    X,
    y,
    client=None,
    *,
    max_rounds: int = 10,
    tol: float | None = None,
    max_violators_per_partition: int | None = None,
    verbose: bool = False,
) -> CoreSVC:
    """Fit ``estimator`` on row-partitioned Dask arrays by the core-set cascade.

    Parameters
    ----------
    estimator : CoreSVC
        Its parameters (C, kernel, gamma, solver, tol, class_weight, ...) are
        used for the local fits and the global solves; it is fitted in place
        and returned.  ``support_`` holds global row indices.
    X : dask.array.Array of shape (n_samples, n_features)
        Partitioned by rows (column chunks are merged).
    y : dask.array.Array of shape (n_samples,)
        Two classes.
    client : distributed.Client, str or None
        A client, a scheduler address (``'tcp://host:8786'``: a client is
        opened for the fit and closed after), or None for the current default
        client (or, without one, dask's local scheduler).
    max_rounds : int, default=10
        Most global solve / violator-check rounds.
    tol : float or None
        A point violates the global model when ``y f(x) < 1 - tol``; None:
        the estimator's ``tol``.
    max_violators_per_partition : int or None
        Most violators (the worst) one partition adds per round; None: all.
    verbose : bool
        Print one line per round.

    Returns
    -------
    estimator
        Fitted; ``cascade_history_`` lists per round (round 0 is the local
        step) the core-set size, the support size, violators found and added,
        and the times; ``cascade_core_set_`` holds the global rows of the last
        union, ``cascade_converged_`` whether no violator was left.
    """
    if not isinstance(estimator, CoreSVC):
        raise TypeError(f"fit_cascade trains a CoreSVC; got {type(estimator).__name__}")
    if isinstance(max_rounds, bool) or not isinstance(max_rounds, (int, np.integer)) or max_rounds < 1:
        raise ValueError(f"max_rounds must be an integer >= 1; got {max_rounds!r}")
    estimator.check_params()
    tol = float(estimator.tol if tol is None else tol)
    if not 0 < tol < 1:
        raise ValueError(f"tol must be in (0, 1); got {tol!r}")
    client, opened = _resolve_client(client)
    try:
        return _cascade(estimator, X, y, client, int(max_rounds), tol, max_violators_per_partition, verbose)
    finally:
        if opened:
            client.close()


def _cascade(estimator: CoreSVC, X, y, client, max_rounds, tol, max_violators, verbose) -> CoreSVC:
    import dask.array as da
    from dask import delayed

    start = time.perf_counter()
    X, y = _as_row_partitioned(X, y)
    if client is not None:
        X, y = client.persist([X, y])  # read once; every round scores the data held by the workers
    rng = check_random_state(estimator.random_state)
    classes, counts = _compute(client, list(da.unique(y, return_counts=True)))
    if len(classes) != 2:
        raise ValueError(
            f"fit_cascade trains binary problems; y has {len(classes)} classes. For more classes, train one "
            "cascade per pair of classes (one-vs-one) or fit CoreSVC on one machine."
        )
    positive = classes[1]  # scikit-learn's convention for binary problems
    gamma = _resolve_gamma(estimator, X, client, rng)
    spec = KernelSpec(estimator.kernel, gamma, float(estimator.coef0), int(estimator.degree))
    multipliers = _class_multipliers(estimator, classes, counts)
    bias_rule = estimator.bias_rule

    offsets = np.concatenate([[0], np.cumsum(X.chunks[0])[:-1]]).astype(np.int64)
    X_blocks, y_blocks = X.to_delayed().ravel(), y.to_delayed().ravel()
    history = []

    # 1. local core sets, in parallel on the workers
    t0 = time.perf_counter()
    # Unit multipliers are passed as no class_weight: one C for all rows keeps the local fits' per-row
    # arrays compact (scalar 1/C, see problem.SimplexProblem); C_i is the same number either way.
    class_weight = None if np.all(multipliers == 1.0) else {
        label: float(w) for label, w in zip(classes, multipliers, strict=True)}
    # The local core sets only seed the global solve, which enforces tol on the union and the
    # violator checks on every point: the local fits may stop at a looser tolerance.
    local_params = {"gamma": gamma, "verbose": False, "class_weight": class_weight,
                    "tol": max(float(estimator.tol), LOCAL_TOL_FLOOR)}
    tasks = [
        delayed(_train_partition)(
            clone(estimator).set_params(**local_params, random_state=int(rng.randint(0, 2**31 - 1))),
            xb, yb, int(offset))
        for xb, yb, offset in zip(X_blocks, y_blocks, offsets, strict=True)
    ]
    parts = _compute(client, tasks)
    rows = np.concatenate([p[0] for p in parts])
    union_X = np.concatenate([p[1] for p in parts])
    union_y = np.concatenate([p[2] for p in parts])
    sizes = np.array(X.chunks[0], dtype=np.float64) / X.shape[0]
    alpha = np.concatenate([p[3] * share for p, share in zip(parts, sizes, strict=True)])
    history.append({"round": 0, "stage": "local", "core_set_size": len(rows), "n_support": len(rows),
                    "violators": None, "added": len(rows), "solve_time": time.perf_counter() - t0,
                    "check_time": 0.0, "time": time.perf_counter() - t0})
    _report(verbose, history[-1])

    converged = False
    for round_number in range(1, max_rounds + 1):
        # 2. warm-started global solve on the union
        t0 = time.perf_counter()
        signs = np.where(union_y == positive, 1.0, -1.0)
        C_rows = estimator.C * multipliers[(union_y == positive).astype(int)]
        problem = SimplexProblem(union_X, signs, C_rows, spec, bias=bias_rule != "none", lam=0.0)
        max_time = estimator.max_time if estimator.max_time is not None else np.inf
        options = estimator.solver_options(len(rows), int(rng.randint(0, 2**31 - 1)), max_time)
        # The cascade's own test (no violator left anywhere) needs the union solved exactly, not to the
        # statistical rule's share of violators.
        options = replace(options, core_set_stop="quiet")
        if not np.any(alpha > 0):
            alpha = np.full(len(rows), 1.0 / len(rows))
        start_points = np.flatnonzero(alpha > 0)
        if options.core_set:
            # The core set holds core_set_capacity points: start from the heaviest half of that
            # (not the first rows, which would favour the first partitions), leaving room to grow.
            room = core_set_capacity(options.cache_bytes, options.tol) // 2
            if len(start_points) > room:
                start_points = np.sort(start_points[np.argsort(-alpha[start_points], kind="stable")[:room]])
        result = run_engine(problem, options, init_idx=start_points, init_alpha=alpha[start_points])
        solve_time = time.perf_counter() - t0
        alpha = np.zeros(len(rows))
        alpha[result.support] = result.alpha
        rho = result.squared_norm if result.squared_norm > 0 else 1.0
        coef = result.alpha * signs[result.support] / rho
        intercept = float(coef.sum()) if bias_rule != "none" else 0.0  # the theoretic b: the solver's own test

        # 3. violators of the global model, scored on the workers
        t0 = time.perf_counter()
        support_vectors = union_X[result.support]
        union_rows_sorted = np.sort(rows)
        tasks = []
        for xb, yb, offset, n_block in zip(X_blocks, y_blocks, offsets, X.chunks[0], strict=True):
            lo, hi = np.searchsorted(union_rows_sorted, [offset, offset + n_block])
            tasks.append(delayed(_find_violators)(
                xb, yb, int(offset), support_vectors, coef, intercept, spec, positive, 1.0 - tol,
                union_rows_sorted[lo:hi], max_violators))
        found = _compute(client, tasks)
        n_violators = int(sum(len(f[0]) for f in found))
        history.append({"round": round_number, "stage": "global", "core_set_size": len(rows),
                        "n_support": int(len(result.support)), "violators": n_violators, "added": n_violators,
                        "solve_time": solve_time, "check_time": time.perf_counter() - t0,
                        "time": solve_time + time.perf_counter() - t0, "solver_status": result.status})
        _report(verbose, history[-1])
        last = (problem, result, signs)
        if n_violators == 0:
            converged = True
            break
        if round_number == max_rounds:
            break
        # 4. add them (weight 0: the warm start keeps the current solution)
        rows = np.concatenate([rows] + [f[0] for f in found])
        union_X = np.concatenate([union_X] + [f[1] for f in found])
        union_y = np.concatenate([union_y] + [f[2] for f in found])
        alpha = np.concatenate([alpha, np.zeros(n_violators)])

    problem, result, signs = last
    if not converged:
        warnings.warn(
            f"fit_cascade: {history[-1]['violators']} points still violate the margin by more than tol={tol:g} "
            f"after max_rounds={max_rounds}; the model so far is kept. Increase max_rounds.",
            ConvergenceWarning, stacklevel=2,
        )
    elif result.status != "converged":
        warnings.warn(f"fit_cascade: the last global solve stopped early ({result.status}).",
                      ConvergenceWarning, stacklevel=2)
    _set_fitted(estimator, problem, result, signs, rows, union_X, union_y, classes, gamma)
    estimator.cascade_history_ = history
    estimator.cascade_core_set_ = np.sort(rows)  # global rows of the last union (the global problem's points)
    estimator.cascade_converged_ = converged
    estimator.cascade_time_ = time.perf_counter() - start
    return estimator


def _set_fitted(estimator, problem, result, signs, rows, union_X, union_y, classes, gamma):
    bias_rule = estimator.bias_rule
    intercept = None
    if bias_rule == "kkt":
        intercept = kkt_bias(problem, result.support, result.alpha, result.squared_norm)
    model = BinaryModel.from_solution(result.support, result, signs[result.support], bias_rule != "none",
                                      intercept)
    y_index = (union_y == classes[1]).astype(np.int64)
    estimator.set_fitted_solution(union_X, y_index, [model], classes, gamma)
    estimator.support_ = rows[estimator.support_]  # union positions -> global row indices


def _report(verbose: bool, record: dict) -> None:
    if verbose:
        print(f"cascade round {record['round']:>2d} ({record['stage']}): core set {record['core_set_size']:>7d}  "
              f"#SV {record['n_support']:>7d}  violators {record['violators']}  {record['time']:7.2f} s",
              flush=True)


def decision_function_dask(model: CoreSVC, X):
    """``model.decision_function`` over a Dask array, one row partition per task (``map_blocks``)."""
    import dask.array as da

    if not isinstance(X, da.Array):
        raise TypeError(f"X must be a Dask array; got {type(X).__name__}")
    if len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})
    n_classes = len(model.classes_)
    if n_classes == 2:
        return X.map_blocks(_block_decisions, model, dtype=np.float64, drop_axis=1)
    width = n_classes if model.decision_function_shape == "ovr" else n_classes * (n_classes - 1) // 2
    return X.map_blocks(_block_decisions, model, dtype=np.float64, chunks=(X.chunks[0], (width,)))


def predict_dask(model: CoreSVC, X):
    """``model.predict`` over a Dask array, one row partition per task (``map_blocks``)."""
    import dask.array as da

    if not isinstance(X, da.Array):
        raise TypeError(f"X must be a Dask array; got {type(X).__name__}")
    if len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})
    return X.map_blocks(_block_predictions, model, dtype=model.classes_.dtype, drop_axis=1)
