"""The helper thread that takes the second half of each pass of the core set's pairwise steps (helper_thread)."""

import threading
import time

import numpy as np
import pytest
from test_computed_rows import noisy_xor

import coresvm.solvers.core_set as core_set_module
from coresvm import CoreSVC
from coresvm.kernels import KernelSpec, limit_kernel_threads, parallel_loop_threads
from coresvm.problem import SimplexProblem
from coresvm.solvers.core_gram import CoreSetState, append_points
from coresvm.solvers.core_steps import (
    NO_HELPER,
    NO_LINEAR_TERM,
    ROWS_STORED,
    STOP_RELATIVE_GAP,
    inner_solve,
    partner_work_space,
    pass_helper_loop,
)
from coresvm.solvers.engine import SECOND_IMDM
from coresvm.solvers.helper_thread import (
    EXIT,
    HelperThread,
    claim_second_half,
    half_bounds,
    new_control,
    next_command,
    second_half_done,
    wait_for_second_half,
)


def core_set(m: int, C: float, tol: float) -> CoreSetState:
    """An L2-SVM core set of ``m`` noisy-XOR points, equal weights; ``tol`` sets its Gram's precision (float32 from
    1e-3).  At large C the float32 diagonal misses 1/C, which the steps add in float64."""
    X, y = noisy_xor(m, 0)
    problem = SimplexProblem(X, y, np.full(m, C), KernelSpec("rbf", 2.0))
    core = CoreSetState.growable(2**26, tol, max_points=m)
    append_points(problem, core, np.arange(m), np.full(m, 1.0 / m))
    return core


def solve(core: CoreSetState, n: int, helper, start_helper: bool = True) -> tuple:
    alpha, G = core.alpha[:n].copy(), core.G[:n].copy()

    def run():
        return inner_solve(core.gram, alpha, G, core.diag, n, 0.0, SECOND_IMDM, 0.0, 1.0, 1e-5, 20_000, np.inf,
                           core.inv_c[:n], STOP_RELATIVE_GAP, NO_LINEAR_TERM, 0.0, 0.0, ROWS_STORED, 1, helper)

    if helper is NO_HELPER or not start_helper:
        steps, gap = run()
    else:
        with HelperThread(pass_helper_loop, helper[0], core.gram, alpha, G, core.diag, n, helper):
            steps, gap = run()
    return steps, gap, alpha, G


@pytest.mark.parametrize(("C", "tol"), [(1e7, 1e-3), (10.0, 1e-4)])  # float32 missing 1/C; float64
@pytest.mark.parametrize("n", [1000, 1003])  # whole blocks; a partial last block
def test_helped_steps_are_the_steps_of_one_thread_bit_for_bit(C, tol, n):
    core = core_set(n, C, tol)
    alone = solve(core, n, NO_HELPER)
    helped = solve(core, n, (new_control(), np.empty(partner_work_space(n))))
    assert alone[0] > 500
    assert helped[0] == alone[0] and helped[1] == alone[1]
    np.testing.assert_array_equal(helped[2], alone[2])
    np.testing.assert_array_equal(helped[3], alone[3])


def test_a_helper_that_never_runs_holds_up_nothing():
    """The solving thread claims every second half that the helper has not: with no helper running, the same
    steps."""
    core = core_set(600, 100.0, 1e-3)
    alone = solve(core, 600, NO_HELPER)
    unhelped = solve(core, 600, (new_control(), np.empty(partner_work_space(600))), start_helper=False)
    assert unhelped[0] == alone[0] > 100
    np.testing.assert_array_equal(unhelped[2], alone[2])


def test_a_second_half_is_claimed_once_per_pass():
    control = new_control()
    assert claim_second_half(control, 1)
    assert not claim_second_half(control, 1)
    assert not claim_second_half(control, 2)  # pass 1's half is not done
    second_half_done(control, 1)
    assert claim_second_half(control, 2)


@pytest.mark.parametrize("n", [0, 1, 31, 32, 33, 64, 1000, 1003])
def test_halves_cover_the_points_once_and_split_at_whole_blocks(n):
    (start, split), (split_again, stop) = half_bounds(n, 0, 32), half_bounds(n, 1, 32)
    assert start == 0 and split == split_again and stop == n
    assert split == n or split % 32 == 0
    assert split >= n - split


def test_the_helper_ends_when_its_block_raises():
    core = core_set(100, 1.0, 1e-3)
    helper = (new_control(), np.empty(partner_work_space(100)))
    threads_before = threading.active_count()
    with pytest.raises(RuntimeError), HelperThread(pass_helper_loop, helper[0], core.gram, core.alpha, core.G,
                                                   core.diag, 100, helper):
        raise RuntimeError("the solve failed")
    assert helper[0][EXIT] == 1 and threading.active_count() == threads_before


@pytest.fixture
def helpers_started(monkeypatch):
    """Core sets get a helper from 256 points; returns the list of helpers started."""
    started = []

    class Recorded(core_set_module.HelperThread):
        def __enter__(self):
            started.append(self)
            return super().__enter__()

    monkeypatch.setattr(core_set_module, "HELPER_MIN_POINTS", 256)
    monkeypatch.setattr(core_set_module, "HelperThread", Recorded)
    return started


def test_a_fit_with_helpers_is_the_fit_without(helpers_started, monkeypatch):
    if parallel_loop_threads() < 2:
        pytest.skip("the helper needs a second thread (two cores and Numba's TBB threading layer)")
    X, y = noisy_xor(6000, 5)
    helped = CoreSVC(C=100.0, gamma=2.0, random_state=0).fit(X, y)
    assert helpers_started
    monkeypatch.setattr(core_set_module, "HELPER_MIN_POINTS", 10**9)
    alone = CoreSVC(C=100.0, gamma=2.0, random_state=0).fit(X, y)
    np.testing.assert_array_equal(helped.support_, alone.support_)
    np.testing.assert_array_equal(helped.dual_coef_, alone.dual_coef_)
    np.testing.assert_array_equal(helped.intercept_, alone.intercept_)


def test_no_helper_past_this_threads_limit(helpers_started):
    """A parallel one-vs-one worker, joblib or Dask limits a fit to one thread: its solves start no helper."""
    X, y = noisy_xor(6000, 5)
    with limit_kernel_threads(1):
        CoreSVC(C=100.0, gamma=2.0, random_state=0).fit(X, y)
    assert not helpers_started


def test_waits_outlast_their_spins_and_see_the_other_threads_writes():
    """Past YIELD_AFTER_PAUSES the waits give the core away (sched_yield) and go on waiting: a second half marked
    done, and an end signalled, 50 ms later are still seen."""
    control = new_control()
    assert claim_second_half(control, 1)

    def finish_later():
        time.sleep(0.05)
        second_half_done(control, 1)
        time.sleep(0.05)
        control[EXIT] = 1

    other = threading.Thread(target=finish_later)
    started = time.perf_counter()
    other.start()
    wait_for_second_half(control, 1)
    assert time.perf_counter() - started >= 0.04
    assert next_command(control, 0) == -1  # nothing published: the end signal
    other.join()
    assert time.perf_counter() - started >= 0.09
