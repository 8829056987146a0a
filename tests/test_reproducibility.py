"""Same data + random_state -> the bit-identical model: across runs, processes and n_jobs values."""

import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_classification
from sklearn.exceptions import ConvergenceWarning

from coresvm import AESVC, CoreSVC, load_model, save_model

ALL_SOLVERS = ["coreset", "cvm", "bvm", "sphere", "mnsvm", "fw", "mfw", "swap", "partan"]
FITTED = ("support_", "support_vectors_", "dual_coef_", "intercept_", "n_support_", "n_iter_")


@pytest.fixture(scope="module")
def data():
    X, y = make_classification(n_samples=200, n_features=5, n_informative=3, n_classes=3, n_clusters_per_class=1,
                               random_state=3)
    return X, y


def _fit(X, y, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return CoreSVC(C=10, random_state=11, max_iter=1500, **params).fit(X, y)


def assert_bit_identical(a, b):
    for name in FITTED:
        left, right = getattr(a, name), getattr(b, name)
        if sp.issparse(left):
            left, right = left.toarray(), right.toarray()
        np.testing.assert_array_equal(left, right, err_msg=name)
        assert np.asarray(left).dtype == np.asarray(right).dtype, name


@pytest.mark.parametrize("solver", ALL_SOLVERS)
@pytest.mark.parametrize("search", ["full", "random"])
def test_same_random_state_same_model_for_every_solver(data, solver, search):
    X, y = data
    if solver in ("bvm", "sphere", "mnsvm", "coreset", "cvm") and search == "random":
        pytest.skip("search applies to the Frank-Wolfe family only")
    params = dict(solver=solver, search=search, sample_size=40, gamma="cvm", sampling="stratified")
    assert_bit_identical(_fit(X, y, **params), _fit(X, y, **params))


def test_sparse_input_is_reproducible_too(data):
    X, y = data
    X = sp.csr_matrix(np.where(np.abs(X) < 0.5, 0, X))
    assert_bit_identical(_fit(X, y), _fit(X, y))


def test_aesvc_is_reproducible(data):
    X, y = data
    a = AESVC(C=10, cache_representative_set=False).fit(X, y)
    b = AESVC(C=10, cache_representative_set=False).fit(X, y)
    assert_bit_identical(a, b)
    np.testing.assert_array_equal(a.representative_set_.beta, b.representative_set_.beta)


CHILD = textwrap.dedent("""
    import sys, warnings
    import numpy as np
    from sklearn.datasets import make_classification
    from coresvm import CoreSVC, save_model
    X, y = make_classification(n_samples=200, n_features=5, n_informative=3, n_classes=3, n_clusters_per_class=1,
                               random_state=3)
    warnings.simplefilter("ignore")
    for solver in ("coreset", "swap", "mnsvm"):
        model = CoreSVC(C=10, random_state=11, max_iter=1500, solver=solver, gamma="cvm").fit(X, y)
        save_model(model, sys.argv[1] + "." + solver)
""")


def test_another_process_with_other_thread_settings_gives_the_same_model(tmp_path, data):
    """A fresh interpreter (another hash seed, 1 Numba/BLAS thread) writes the same model bit for bit."""
    X, y = data
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "PYTHONHASHSEED": "123",
           "NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, str(script), str(tmp_path / "m")], capture_output=True, text=True,
                         timeout=300, env=env)
    assert run.returncode == 0, run.stderr
    for solver in ("coreset", "swap", "mnsvm"):
        here = _fit(X, y, solver=solver, gamma="cvm")
        there = load_model(tmp_path / f"m.{solver}")
        assert_bit_identical(here, there)
        save_model(here, tmp_path / "here")
        np.testing.assert_array_equal(load_model(tmp_path / "here").decision_function(X), there.decision_function(X))


@pytest.mark.skipif("n_jobs" not in CoreSVC().get_params(), reason="CoreSVC has no n_jobs parameter yet")
@pytest.mark.parametrize("solver", ["coreset", "swap", "mnsvm"])
def test_n_jobs_does_not_change_the_model(data, solver):
    X, y = data
    models = [_fit(X, y, solver=solver, n_jobs=n_jobs) for n_jobs in (1, 2, -1)]
    for other in models[1:]:
        assert_bit_identical(models[0], other)
