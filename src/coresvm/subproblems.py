"""Binary sub-problems' solutions as models: empty problems, compiled chunks, runs that report to a callback."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from .multiclass import BinaryModel, SubProblem
from .problem import SimplexProblem
from .solvers.clock import fit_clock
from .solvers.dense import STAT_GAP, STAT_ROWS, STAT_SCALE, STAT_SQUARED_NORM, STAT_STATUS, STAT_STEPS, STAT_TIME
from .solvers.driver import SolverOptions, SolverResult, run_engine, run_record
from .solvers.engine import STATUS_NAMES


def empty_model(problem: SubProblem) -> BinaryModel:
    """The model of a sub-problem without rows: no support vectors, decision 0."""
    nothing = np.empty(0, dtype=np.int64)
    result = SolverResult(support=nothing, alpha=np.empty(0), n_iter=0, gap=0.0, rel_gap=0.0, status="converged",
                          time=0.0)
    model = BinaryModel.from_solution(nothing, result, np.empty(0), bias=True)
    model.info.update(problem=problem.label, warm_start=False)
    return model


def models_from_chunk(problems: list[SubProblem], rows, offsets, signs, alpha, stats, bias: bool) -> list[BinaryModel]:
    """The :class:`BinaryModel` of each problem of a chunk solved at once, as
    :meth:`BinaryModel.from_solution` builds it from one problem's result."""
    positive = alpha > 0
    sv_offsets = np.concatenate(([0], np.cumsum(positive)))[offsets]  # empty problems included
    counts = np.diff(sv_offsets)
    sv_rows = rows[positive].astype(np.int64)
    sv_alpha = alpha[positive]
    rho = np.where(stats[:, STAT_SQUARED_NORM] > 0, stats[:, STAT_SQUARED_NORM], 1.0)
    coef = sv_alpha * signs[positive] / np.repeat(rho, counts)
    columns = (STAT_STEPS, STAT_GAP, STAT_SCALE, STAT_STATUS, STAT_ROWS, STAT_TIME)
    records = zip(problems, sv_offsets[:-1].tolist(), sv_offsets[1:].tolist(), rho.tolist(),
                  *(stats[:, column].tolist() for column in columns), strict=True)
    models = []
    for problem, first, last, rho_k, steps, gap, scale, status, n_rows, elapsed in records:
        info = run_record(int(steps), gap, gap / scale, STATUS_NAMES[int(status)], elapsed, last - first,
                          cache_misses=int(n_rows))
        info.update(rho=rho_k, problem=problem.label, warm_start=problem.init is not None)
        intercept = float(coef[first:last].sum()) if bias else 0.0
        models.append(BinaryModel(sv_rows[first:last], coef[first:last], intercept, info, sv_alpha[first:last]))
    return models


def run_with_callback(simplex: SimplexProblem, options: SolverOptions, init_idx, init_alpha,
                      report: Callable[[dict], bool], every: int) -> SolverResult:
    """Run the solver so that ``report(info)`` sees its progress and may stop it (by returning True).

    The core-set solvers call it once per outer round.  The Frank-Wolfe engine is one compiled loop: it runs in
    chunks of ``every`` iterations, each warm-started from the last, with ``report`` called between them.
    """
    if options.core_set:  # the outer loop is Python: one call per round
        return run_engine(simplex, replace(options, callback=report), init_idx, init_alpha)
    start = fit_clock()
    done, chunk = 0, 0
    while True:
        elapsed = fit_clock() - start
        piece = replace(options, max_iter=int(min(every, options.max_iter - done)),
                        max_time=max(options.max_time - elapsed, 1e-3), seed=(options.seed + chunk) % (2**31 - 1))
        result = run_engine(simplex, piece, init_idx, init_alpha)
        done += result.n_iter
        chunk += 1
        init_idx, init_alpha = result.support, result.alpha
        elapsed = fit_clock() - start
        if result.status != "max_iter" or done >= options.max_iter:
            break
        if elapsed > options.max_time:
            result.status = "max_time"
            break
        if report({"iteration": done, "gap": result.gap, "rel_gap": result.rel_gap,
                   "n_active": int(result.support.shape[0]), "elapsed": elapsed}):
            result.status = "callback"
            break
    result.n_iter, result.time = done, elapsed
    return result
