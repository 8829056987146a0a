"""run_row_blocks: every block once, on threads kept for the process, nested calls in place, errors raised."""

import multiprocessing
import os
import threading
import time

import numpy as np
import pytest

from coresvm.kernels import run_row_blocks

needs_two_cores = pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="the pool needs at least 2 threads")


def block_owners(n_blocks: int, n_threads: int) -> dict[int, str]:
    owners: dict[int, str] = {}

    def one_block(start: int) -> None:
        time.sleep(0.001)  # long enough for the pool's thread to take blocks too
        owners[start] = threading.current_thread().name

    run_row_blocks(n_blocks * 10, 10, one_block, n_threads)
    return owners


@needs_two_cores
def test_every_block_runs_once_and_the_threads_are_kept_between_calls():
    owners = block_owners(64, 2)
    assert sorted(owners) == list(range(0, 640, 10))
    threads_after_first = threading.active_count()
    named = {name for _ in range(50) for name in block_owners(8, 2).values()}
    assert threading.active_count() == threads_after_first  # no thread started per call
    assert threading.current_thread().name in named and any(name.startswith("coresvm-kernel") for name in named)


@needs_two_cores
def test_a_block_that_runs_blocks_runs_them_in_its_own_thread():
    totals = np.zeros(8)

    def outer(start: int) -> None:
        def inner(inner_start: int) -> None:
            totals[start // 10] += inner_start

        run_row_blocks(40, 10, inner, 2)

    run_row_blocks(80, 10, outer, 2)
    np.testing.assert_array_equal(totals, np.full(8, 0 + 10 + 20 + 30))


@needs_two_cores
def test_an_error_in_a_block_reaches_the_caller_after_the_other_blocks():
    done = []

    def one_block(start: int) -> None:
        if start == 30:
            raise ValueError("block 30 failed")
        done.append(start)

    with pytest.raises(ValueError, match="block 30"):
        run_row_blocks(200, 10, one_block, 2)
    assert block_owners(8, 2).keys() == set(range(0, 80, 10))  # the pool still works


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
    child.join(60)
    assert child.exitcode == 0
    assert queue.get(timeout=5) == list(range(0, 160, 10))
