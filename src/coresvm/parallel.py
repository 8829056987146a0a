"""Sub-problems solved by several threads at once: the threads, their shared queue and time budget.

Used by :class:`~coresvm.CoreSVC` for one-vs-one pairs and one-vs-rest classes: each worker takes the next
item from a :class:`ProblemQueue` until none is left, on one Numba, BLAS and kernel thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

from .kernels import limit_kernel_threads
from .solvers.clock import fit_clock


def run_in_threads(n_threads: int, work) -> None:
    """Call ``work()`` in ``n_threads`` threads at once, this one included; re-raise the first error.

    Plain threads, not joblib's threading backend: joblib builds its thread pool on every call and its
    result loop polls every 10 ms; an empty two-task ``Parallel`` call took 15-40 ms here, against 0.2 ms
    for a thread, on one-vs-one fits of 0.1-0.3 s.
    """
    errors = []

    def guarded():
        try:
            work()
        except BaseException as error:  # re-raised in the calling thread
            errors.append(error)

    helpers = [threading.Thread(target=guarded, name=f"coresvm-worker-{k}", daemon=True)
               for k in range(1, n_threads)]
    for helper in helpers:
        helper.start()
    try:
        work()
    finally:
        for helper in helpers:
            helper.join()
    if errors:
        raise errors[0]


class ProblemQueue:
    """Items to solve (sub-problems or chunks of them), in order or the largest ``sizes`` first, shared by the
    worker threads; ``results`` in the order of ``items``."""

    def __init__(self, items: list, sizes: list[int] | None = None):
        order = range(len(items))
        if sizes is not None:
            order = sorted(order, key=lambda p: (-sizes[p], p))
        self.pending = [(p, items[p]) for p in reversed(order)]  # pop() takes the first of `order`
        self.results: list = [None] * len(items)
        self.lock = threading.Lock()

    def next(self) -> tuple[int, object] | None:
        with self.lock:
            return self.pending.pop() if self.pending else None

    def abandon(self) -> None:
        with self.lock:
            self.pending.clear()


def contiguous_chunks(costs: list[int], n_chunks: int) -> list[tuple[int, int]]:
    """``(start, stop)`` of at most ``n_chunks`` consecutive runs of items with about equal total cost."""
    bounds = np.cumsum(costs, dtype=np.float64)
    cuts = np.searchsorted(bounds, bounds[-1] * np.arange(1, n_chunks) / n_chunks, side="right")
    edges = np.unique(np.concatenate(([0], cuts, [len(costs)])))
    return [(int(start), int(stop)) for start, stop in zip(edges[:-1], edges[1:], strict=True)]


class TimeBudget:
    """``max_time`` for the whole fit: each sub-problem gets an equal share of what is left.

    With ``n_workers`` sub-problems running at once, what is left is shared
    among the remaining *rounds* of ``n_workers`` problems.
    """

    def __init__(self, max_time: float | None, n_problems: int, n_workers: int):
        # fit_clock: compiling the solver loops (the first fit in a fresh environment) takes none of max_time
        self.deadline = fit_clock() + (max_time if max_time is not None else np.inf)
        self.left = n_problems
        self.n_workers = n_workers
        self.lock = threading.Lock()

    def share(self) -> float:
        with self.lock:
            rounds_left = max(1, -(-self.left // self.n_workers))
            self.left -= 1
        return max((self.deadline - fit_clock()) / rounds_left, 1e-3)


def work_through_queue(queue: ProblemQueue, solve: Callable) -> None:
    """``solve`` items of ``queue`` until it is empty, kernel products and Numba loops on this thread."""
    try:
        with limit_kernel_threads(1):  # kernel products and Numba loops
            while (next_item := queue.next()) is not None:
                position, item = next_item
                queue.results[position] = solve(item)
    except BaseException:
        queue.abandon()  # the other workers stop after their current item
        raise

