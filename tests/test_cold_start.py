"""The first fit in a fresh environment: compiling the solver loops takes none of ``max_time``."""

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
from numba import njit

import coresvm
from coresvm.solvers.clock import compile_seconds, fit_clock


def test_fit_clock_leaves_out_compilation():
    @njit  # new in every run: compiled here, not loaded from a cache
    def triangle(n):
        total = 0
        for i in range(n):
            total += i
        return total

    wall, clock, compiled = time.perf_counter(), fit_clock(), compile_seconds()
    assert triangle(np.int64(10)) == 45
    wall, clock, compiled = time.perf_counter() - wall, fit_clock() - clock, compile_seconds() - compiled
    assert compiled > 0.0
    assert 0.0 <= clock <= wall - 0.9 * compiled


# A CSR fit takes the core-set solver, whose Python rounds call compiled loops: in a fresh Numba cache the first
# round compiles them (seconds).  Warm, this fit converges in about 0.05 s; before the fit's clock left compilation
# out, the cold fit stopped at max_time after 25 of its 978 steps.
COLD_FIT = """
import warnings
import scipy.sparse as sp
from sklearn.datasets import make_classification
from coresvm import CoreSVC

X, y = make_classification(1000, 20, n_informative=5, random_state=0)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    model = CoreSVC(max_time=1.0, random_state=0).fit(sp.csr_matrix(X), y)
print(model.solver_info_[0]["status"], model.solver_info_[0]["iterations"])
"""


def test_compilation_in_a_fresh_cache_takes_none_of_max_time(tmp_path):
    source = str(Path(coresvm.__file__).parents[1])
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [source, os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(COLD_FIT)], env=env, capture_output=True, text=True,
                          timeout=300, check=True)
    assert any(tmp_path.rglob("*.nbi")), "the subprocess did not use the fresh cache"
    status, steps = done.stdout.split()
    assert status == "converged", done.stdout
    assert int(steps) > 100
