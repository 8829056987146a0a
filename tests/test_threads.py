"""A fit uses the threads its process was given: all cores, or the limit a parent pool (joblib's loky backend,
Dask's nanny) set in ``OMP_NUM_THREADS``; an explicit limit still wins.

The thread counts are read inside the fit, from its callback (once per core-set round), in a fresh Python:
coresvm reads the environment once per process.  The binary problem has more points than
``svc.ONE_THREAD_MAX_POINTS``, so CoreSVC itself does not hold it to one thread.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import coresvm
from coresvm.kernels import THREAD_LIMIT_VARIABLE, thread_limit_from_environ
from coresvm.svc import ONE_THREAD_MAX_POINTS

CORES = os.cpu_count() or 1
needs_two_cores = pytest.mark.skipif(CORES < 2, reason="a limit below the cores needs at least 2 cores")

PROBE = textwrap.dedent(f"""
    import json, os, sys
    import joblib, numba
    from coresvm import CoreSVC
    from coresvm.datasets import make_checkerboard
    from coresvm.kernels import default_kernel_threads, limit_kernel_threads

    def fit_threads(explicit=None):
        seen = []

        def callback(info):
            seen.append((default_kernel_threads(), numba.get_num_threads()))
            return len(seen) >= 3

        X, y = make_checkerboard({ONE_THREAD_MAX_POINTS + 1000}, random_state=0)
        model = CoreSVC(gamma=2.0, C=10.0, solver="coreset", callback=callback, random_state=0)
        if explicit is None:
            model.fit(X, y)
        else:
            with limit_kernel_threads(explicit):
                model.fit(X, y)
        assert len(set(seen)) == 1, seen
        kernel, numba_threads = seen[0]
        return dict(kernel=kernel, numba=numba_threads, omp=os.environ.get("OMP_NUM_THREADS"), pid=os.getpid())

    mode = sys.argv[1]
    if mode == "loky":
        results = joblib.Parallel(n_jobs=2, backend="loky")(joblib.delayed(fit_threads)() for _ in range(2))
    else:
        results = [fit_threads(None if mode == "default" else int(mode))]
    print(json.dumps(results))
""")


def fit_threads(mode: str, **environ: str) -> list[dict]:
    """Run PROBE in a fresh Python whose environment has no thread variables but ``environ``."""
    source = str(Path(coresvm.__file__).parents[1])
    env = {name: value for name, value in os.environ.items()
           if name not in (THREAD_LIMIT_VARIABLE, "NUMBA_NUM_THREADS")}
    env.update(environ, PYTHONPATH=os.pathsep.join(filter(None, [source, os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, "-c", PROBE, mode], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(("value", "limit"), [("1", 1), ("3", 3), (" 2 ", 2), ("4,2", 4), ("0", None), ("-1", None),
                                              ("", None), ("many", None), ("2.5", None)])
def test_the_limit_is_a_positive_omp_num_threads(value, limit):
    assert thread_limit_from_environ({THREAD_LIMIT_VARIABLE: value}) == limit
    assert thread_limit_from_environ({}) is None


@needs_two_cores
def test_omp_num_threads_holds_kernel_products_and_numba_to_it():
    # Dask's nanny sets OMP_NUM_THREADS=1 in its workers and leaves NUMBA_NUM_THREADS alone.
    [seen] = fit_threads("default", OMP_NUM_THREADS="1")
    assert (seen["kernel"], seen["numba"]) == (1, 1)


@needs_two_cores
def test_a_fit_in_a_loky_worker_uses_its_share_of_the_cores():
    results = fit_threads("loky")
    assert {seen["omp"] for seen in results} == {str(CORES // 2)}  # what loky gives each of 2 workers
    assert {(seen["kernel"], seen["numba"]) for seen in results} == {(CORES // 2, CORES // 2)}


def test_without_a_limit_a_fit_uses_every_core():
    [seen] = fit_threads("default")
    assert (seen["kernel"], seen["numba"]) == (CORES, CORES)


@needs_two_cores
def test_an_explicit_limit_wins_over_the_inherited_one():
    [seen] = fit_threads("2", OMP_NUM_THREADS="1")
    assert (seen["kernel"], seen["numba"]) == (2, 2)


def blas_threads() -> list[int]:
    from threadpoolctl import threadpool_info

    return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]


@needs_two_cores
def test_a_fit_holds_blas_to_one_thread_and_restores_it_after():
    """A fit's parallel work runs on the kernel pool and Numba; OpenBLAS's idle threads would spin beside them."""
    from coresvm import CoreSVC
    from coresvm.datasets import make_checkerboard

    before = blas_threads()
    assert before and max(before) > 1, "this test needs a multi-threaded BLAS to limit"
    seen = []

    def callback(info):
        seen.extend(blas_threads())
        return False

    X, y = make_checkerboard(ONE_THREAD_MAX_POINTS + 1000, random_state=0)  # one problem, not held by CoreSVC before
    CoreSVC(gamma=2.0, C=10.0, solver="coreset", callback=callback, random_state=0).fit(X, y)
    assert seen and set(seen) == {1}
    assert blas_threads() == before


@needs_two_cores
def test_the_limit_is_shared_by_holders_that_leave_in_any_order():
    from coresvm.kernels import ProcessWideLimit

    before = blas_threads()
    limit = ProcessWideLimit()
    first, second = limit.held(1, "blas"), limit.held(1, "blas")
    first.__enter__()
    second.__enter__()  # finds the limit in place
    first.__exit__(None, None, None)
    assert set(blas_threads()) == {1}  # the second holder still runs
    second.__exit__(None, None, None)
    assert blas_threads() == before  # not the limit the second one found


def test_fits_in_threads_leave_blas_as_they_found_it():
    from concurrent.futures import ThreadPoolExecutor

    from coresvm import CoreSVC
    from coresvm.datasets import make_checkerboard

    before = blas_threads()
    X, y = make_checkerboard(2000, random_state=0)
    with ThreadPoolExecutor(2) as pool:
        models = list(pool.map(lambda seed: CoreSVC(gamma=2.0, C=10.0, random_state=seed).fit(X, y), range(6)))
    assert all(model.score(X, y) > 0.9 for model in models)
    assert blas_threads() == before
