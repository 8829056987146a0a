"""
Pattern search on a Dask cluster
================================

The same ``PatternSearchCV`` runs locally (``n_jobs``) or on a Dask cluster: only the joblib
backend changes. Here a ``LocalCluster`` with 2 worker processes (1 thread each) stands in for a
real cluster; with a remote scheduler use ``Client("tcp://scheduler:8786")`` instead.

Each fit inside the search runs with its Numba and BLAS threads limited to
``cores // parallel jobs`` (here 1), so 2 workers use 2 cores, not 2 x cores.

Run: ``python examples/model_selection_on_dask.py`` (needs ``pip install "dask[distributed]"``).
"""

import time

import joblib
import numpy as np
from distributed import Client, LocalCluster
from sklearn.model_selection import StratifiedKFold

from coresvm import CoreSVC
from coresvm.datasets import make_checkerboard
from coresvm.model_selection import PatternSearchCV


def main() -> None:
    X, y = make_checkerboard(2000, random_state=0)
    X_test, y_test = make_checkerboard(2000, random_state=1)
    folds = StratifiedKFold(3, shuffle=True, random_state=0)

    start = time.perf_counter()
    local = PatternSearchCV(CoreSVC(random_state=0), cv=folds, n_jobs=2, verbose=1).fit(X, y)
    print(f"local: {local.best_params_}, CV {local.best_score_:.4f}, {len(local.cv_results_['params'])} of 64 "
          f"grid points, {time.perf_counter() - start:.1f} s")

    with LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None) as cluster, \
            Client(cluster):
        start = time.perf_counter()
        with joblib.parallel_config(backend="dask"):
            remote = PatternSearchCV(CoreSVC(random_state=0), cv=folds, n_jobs=-1, verbose=1).fit(X, y)
        print(f"dask:  {remote.best_params_}, CV {remote.best_score_:.4f}, {time.perf_counter() - start:.1f} s")

    assert remote.best_params_ == local.best_params_
    print(f"test accuracy of the chosen model: {np.mean(remote.predict(X_test) == y_test):.4f}")


if __name__ == "__main__":
    main()
