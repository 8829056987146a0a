"""run_row_blocks (and map_on_kernel_threads over it): every block once, on threads kept for the process,
nested and concurrent calls, errors raised with no block left running."""

import multiprocessing
import os
import threading
import time

import numpy as np
import pytest

from coresvm.kernels import map_on_kernel_threads, run_row_blocks

needs_two_cores = pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="the pool needs at least 2 threads")


def block_owners(n_blocks: int, n_threads: int) -> dict[int, str]:
    owners: dict[int, str] = {}

    def one_block(start: int) -> None:
        time.sleep(0.001)  # long enough for the pool's thread to take blocks too
        owners[start] = threading.current_thread().name

    run_row_blocks(n_blocks * 10, 10, one_block, n_threads)
    return owners


def finishes_within(seconds: float, function) -> None:
    """Run ``function`` in a thread and fail (instead of hanging the test run) when it does not return."""
    errors = []

    def target() -> None:
        try:
            function()
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"did not return within {seconds} s"
    if errors:
        raise errors[0]


@needs_two_cores
def test_every_block_runs_once_and_the_threads_are_kept_between_calls():
    owners = block_owners(64, 2)
    assert sorted(owners) == list(range(0, 640, 10))
    threads_after_first = threading.active_count()
    named = {name for _ in range(50) for name in block_owners(8, 2).values()}
    assert threading.active_count() == threads_after_first  # no thread started per call
    assert threading.current_thread().name in named and any(name.startswith("coresvm-kernel") for name in named)


@needs_two_cores
def test_map_on_kernel_threads_keeps_the_order_and_the_thread_limit():
    def slow_square(k: int) -> tuple[int, str]:
        time.sleep(0.002 * (k % 3))  # uneven items: later ones finish first on another thread
        return k * k, threading.current_thread().name

    results = map_on_kernel_threads(slow_square, list(range(40)), 2)
    assert [value for value, _ in results] == [k * k for k in range(40)]
    assert len({name for _, name in results}) == 2
    alone = map_on_kernel_threads(slow_square, list(range(10)), 1)
    assert {name for _, name in alone} == {threading.current_thread().name}


@needs_two_cores
def test_a_block_that_runs_blocks_runs_them_in_its_own_thread():
    totals = np.zeros(8)

    def outer(start: int) -> None:
        def inner(inner_start: int) -> None:
            totals[start // 10] += inner_start

        run_row_blocks(40, 10, inner, 2)

    finishes_within(30, lambda: run_row_blocks(80, 10, outer, 2))
    np.testing.assert_array_equal(totals, np.full(8, 0 + 10 + 20 + 30))


@needs_two_cores
@pytest.mark.parametrize("failing_start", [0, 30])  # the first block (the calling thread's) or a later one
def test_an_error_stops_the_blocks_and_none_runs_after_the_call_returns(failing_start):
    done = []

    def one_block(start: int) -> None:
        time.sleep(0.005)
        if start == failing_start:
            raise ValueError(f"block {start} failed")
        done.append(start)

    with pytest.raises(ValueError, match=f"block {failing_start} failed"):
        run_row_blocks(2000, 10, one_block, 3)
    finished = len(done)
    time.sleep(0.05)
    assert len(done) == finished  # nothing still running
    assert finished < 20  # the other threads stopped taking blocks (200 in all)
    assert sorted(block_owners(8, 2)) == list(range(0, 80, 10))  # the pool still works


@needs_two_cores
def test_concurrent_callers_each_get_all_their_blocks():
    results = {}

    def caller(index: int) -> None:
        for _ in range(20):
            seen = block_owners(16, 2)
            assert sorted(seen) == list(range(0, 160, 10))
        results[index] = True

    callers = [threading.Thread(target=caller, args=(index,)) for index in range(4)]

    def run_callers() -> None:
        for thread in callers:
            thread.start()
        for thread in callers:
            thread.join()

    finishes_within(60, run_callers)
    assert sorted(results) == [0, 1, 2, 3]


def _blocks_in_child(queue) -> None:
    queue.put(sorted(block_owners(16, 2)))


@needs_two_cores
@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_a_forked_child_runs_blocks_without_its_parents_threads():
    block_owners(16, 2)  # the parent's pool exists
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_blocks_in_child, args=(queue,))
    child.start()
    try:
        child.join(60)
        assert child.exitcode == 0
        assert queue.get(timeout=5) == list(range(0, 160, 10))
    finally:
        child.kill()
