"""The core-set cascade on a Dask LocalCluster (coresvm.distributed)."""

import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("dask.distributed")
import dask.array as da  # noqa: E402
from dask.distributed import Client, LocalCluster  # noqa: E402

from coresvm.datasets import make_checkerboard  # noqa: E402
from coresvm.distributed import decision_function_dask, fit_cascade, predict_dask  # noqa: E402
from coresvm.svc import CoreSVC  # noqa: E402

N_TRAIN = 200_000  # issue 8: 200k checkerboard points
# tol 0.3 (not the benchmark's 0.01) keeps the single fit and the cascade CI-sized; the
# accuracy is still ~99.9% (benchmarks/out_of_core_benchmark.py runs the tighter setting).
PARAMS = {"C": 1000.0, "gamma": 2.0, "tol": 0.3, "random_state": 0}


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as local:
        yield local


@pytest.fixture(scope="module")
def client(cluster):
    with Client(cluster) as c:
        yield c


@pytest.fixture(scope="module")
def checkerboard():
    X, y = make_checkerboard(N_TRAIN, random_state=1)
    X_test, y_test = make_checkerboard(20_000, random_state=2)
    return X, y, X_test, y_test


@pytest.fixture(scope="module")
def cascade_model(client, checkerboard):
    X, y, _, _ = checkerboard
    X_dask = da.from_array(X, chunks=(N_TRAIN // 4, -1))
    y_dask = da.from_array(y, chunks=(N_TRAIN // 4,))
    return fit_cascade(CoreSVC(**PARAMS), X_dask, y_dask, client=client)


def test_cascade_reaches_single_machine_accuracy(cascade_model, checkerboard):
    X, y, X_test, y_test = checkerboard
    single = CoreSVC(**PARAMS).fit(X, y)
    single_accuracy = single.score(X_test, y_test)
    cascade_accuracy = cascade_model.score(X_test, y_test)
    assert cascade_accuracy >= single_accuracy - 0.003, (cascade_accuracy, single_accuracy)
    history = cascade_model.cascade_history_
    assert history[0]["stage"] == "local" and history[0]["core_set_size"] > 0
    assert cascade_model.cascade_converged_ and history[-1]["violators"] == 0
    # support_ indexes the training rows
    np.testing.assert_array_equal(X[cascade_model.support_], cascade_model.support_vectors_)


def test_global_model_has_no_margin_violator(cascade_model, checkerboard):
    X, y, _, _ = checkerboard
    # the test the cascade stops on, redone on one machine with the theoretic bias
    signs = np.where(y == cascade_model.classes_[1], 1.0, -1.0)
    margins = signs * cascade_model.decision_function(X)
    outside = np.setdiff1d(np.arange(len(y)), cascade_model.cascade_core_set_)
    assert margins[outside].min() >= 1.0 - PARAMS["tol"] - 1e-9


def test_dask_prediction_equals_in_memory(cascade_model, checkerboard, client):
    _, _, X_test, _ = checkerboard
    X_dask = da.from_array(X_test, chunks=(7_000, -1))
    np.testing.assert_array_equal(predict_dask(cascade_model, X_dask).compute(), cascade_model.predict(X_test))
    # equal up to BLAS rounding: kernel_product's row blocks differ from the partitions' (labels are exact)
    np.testing.assert_allclose(decision_function_dask(cascade_model, X_dask).compute(),
                               cascade_model.decision_function(X_test), rtol=1e-10, atol=1e-10)


def test_cascade_by_scheduler_address(cluster):
    X, y = make_checkerboard(4000, random_state=4)
    model = fit_cascade(CoreSVC(C=10.0, random_state=0), da.from_array(X, chunks=(2000, -1)),
                        da.from_array(y, chunks=(2000,)), client=cluster.scheduler_address)
    assert model.cascade_converged_
    assert model.score(X, y) > 0.9


def test_multiclass_gets_a_clear_error(client):
    X, y = make_checkerboard(3000, random_state=0)
    y3 = np.where(X[:, 0] < 1, 2, y)
    with pytest.raises(ValueError, match="binary"):
        fit_cascade(CoreSVC(), da.from_array(X, chunks=(1000, -1)), da.from_array(y3, chunks=(1000,)), client=client)


def test_numpy_input_gets_a_clear_error(client):
    X, y = make_checkerboard(100, random_state=0)
    with pytest.raises(TypeError, match="Dask arrays"):
        fit_cascade(CoreSVC(), X, y, client=client)


def test_importing_coresvm_does_not_import_dask():
    code = "import sys, coresvm, coresvm.svc; print('dask' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_cascade_global_solve_runs_blas_on_one_thread(client, monkeypatch):
    """fit_cascade is a fit: its global solves hold BLAS to one thread as CoreSVC.fit does (kernels'
    within_process_thread_limit), and the limits are restored after."""
    from threadpoolctl import threadpool_info

    import coresvm.distributed as distributed

    def blas_threads():
        return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]

    before, seen = blas_threads(), []
    solve = distributed.run_engine

    def recorded(*args, **kwargs):
        seen.extend(blas_threads())
        return solve(*args, **kwargs)

    monkeypatch.setattr(distributed, "run_engine", recorded)
    X, y = make_checkerboard(8_000, random_state=3)
    fit_cascade(CoreSVC(**PARAMS), da.from_array(X, chunks=(2_000, -1)), da.from_array(y, chunks=(2_000,)),
                client=client)
    assert seen and set(seen) == {1}
    assert blas_threads() == before
