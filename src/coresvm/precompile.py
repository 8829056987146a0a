"""Compile coresvm's solver loops ahead of the first fit: ``python -m coresvm.precompile``.

The solvers are Numba functions compiled on first use and cached on disk (``cache=True``: in
``__pycache__`` next to the sources, or under ``NUMBA_CACHE_DIR``).  In a fresh environment the
first fits therefore compile them -- about 2 minutes for a first multiclass, binary and CSR fit on a
2-core machine -- and every later process loads them from the cache in well under a second.
Numba compiles for the machine it runs on, so the cache cannot ship inside a wheel; run this once
after installing (a Docker image's build step, a CI job's set-up) so that no user-facing fit pays
for it.  It fits small synthetic problems on each default path: dense binary and one-vs-one
pairs (the compiled small-problem path), CSR input and dense problems too large for the kernel
cache (the core-set solver), and predicts with each; then it takes Newton steps on a small and a large active
face (:mod:`coresvm.solvers.active_face`), which only large fits reach, scores candidates in the layouts
of large core sets, grows a core set whose kernel rows are computed per step (large core sets of few-feature
data), and compiles the helper thread of large core sets' pairwise steps.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import scipy.sparse as sp

from .kernels import (
    FUSED_MAX_FEATURES,
    ColumnProducts,
    KernelSpec,
    kernel_product,
    parallel_loop_threads,
    sparse_times_dense,
)
from .problem import SPARSE_MIN_FEATURES, SimplexProblem, sparse_layout
from .solvers.active_face import CHOLESKY_MAX_FACE, newton_step
from .solvers.core_gram import CoreSetState, append_points
from .solvers.core_steps import partner_work_space, pass_helper_loop
from .solvers.helper_thread import EXIT, new_control
from .svc import CoreSVC

# A kernel cache of 0.05 MB holds no 200-point problem (200^2 * 8 bytes = 0.3 MB): the dense core-set path.
CORE_SET_CACHE_MB = 0.05


def _problems() -> list[tuple[str, dict, np.ndarray, np.ndarray]]:
    """(name, CoreSVC parameters, X, y) for each default path, small enough to solve in milliseconds."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 5))
    X[180:] = X[:20]  # repeated rows: their merge (coresvm.duplicates) compares rows
    y_binary = (X[:, 0] + 0.3 * rng.standard_normal(200) > 0).astype(np.int64)
    y_three = np.digitize(X[:, 0], [-0.5, 0.5])
    return [
        ("dense binary", {}, X, y_binary),
        ("dense multiclass", {}, X, y_three),
        ("CSR binary", {}, sp.csr_matrix(X), y_binary),
        ("CSR multiclass", {}, sp.csr_matrix(X), y_three),
        ("dense core set", {"cache_size": CORE_SET_CACHE_MB}, X, y_binary),
        # a float64 Gram: tight tolerances, and large C once float32's rounding broke a face (CoreSetState.in_float64)
        ("float64 core set", {"cache_size": CORE_SET_CACHE_MB, "tol": 1e-4}, X, y_binary),
    ]


# Newton steps on the core set's active face (solvers.active_face) run only in large fits: one face small enough to
# factorize and one solved by conjugate gradients, in the core set's float32 Gram and in a float64 one.
NEWTON_FACES = (200, CHOLESKY_MAX_FACE + 1)


def _newton_steps() -> None:
    """Take a Newton step on a face of each size in :data:`NEWTON_FACES` (an RBF Gram with 1/C = 0.01)."""
    rng = np.random.default_rng(0)
    for n in NEWTON_FACES:
        X = rng.standard_normal((n, 3))
        squared = (X * X).sum(axis=1)
        for dtype in (np.float32, np.float64):
            gram = np.exp(-(squared[:, None] + squared[None, :] - 2.0 * X @ X.T)).astype(dtype)
            inv_c = np.full(n, 0.01)
            gram[np.diag_indices(n)] += dtype(0.01)
            alpha = np.full(n, 1.0 / n)
            G = gram.astype(np.float64) @ alpha
            newton_step(gram, alpha, G, n, lambda a, g: 0.0, lambda: 0, 1.0, inv_c)


def _float32_products() -> None:
    """Score candidates as the core-set loop does (float32 kernel values summed in float64) in each layout the
    small fits above miss: more features than the fused loop takes (with a gamma too large for the factorized
    product, too), a sparse support against fewer dense candidates, and sparse candidates against a dense or sparse
    support;
    the sparse products of a CSR core set's growth (float32) and of predictions (float64), against dense rows and
    by a sparse support's columns (with and without a dense block of frequent features); and the CSR copy of sparse
    dense rows."""
    rng = np.random.default_rng(0)
    spec = KernelSpec("rbf", gamma=0.1)
    support = rng.random((300, FUSED_MAX_FEATURES + 1))
    for candidates, right in ((support[:200], support), (support[:20], sp.csr_matrix(support)),
                              (sp.csr_matrix(support[:200]), support)):
        kernel_product(candidates, right, spec, np.ones(300), precision=np.float32)
    # sparse candidates against a sparse support made dense from its nonzeros (scaled_transposed)
    kernel_product(sp.csr_matrix(support), sp.csr_matrix(support[:200]), spec, np.ones(200), precision=np.float32)
    # a gamma whose exponents exceed float32's range for the factorized product: kernel values summed as they are
    kernel_product(support[:200], support, KernelSpec("rbf", gamma=100.0), np.ones(300), precision=np.float32)
    for dtype in (np.float32, np.float64):
        sparse_times_dense(sp.csr_matrix(support[:20], dtype=dtype), support.T.astype(dtype))
        for head in (np.arange(0), np.arange(3)):  # by the support's columns, without and with a dense head
            ColumnProducts(sp.csr_matrix(support), head, dtype).products(sp.csr_matrix(support[:20], dtype=dtype))
        sparse_layout(np.eye(SPARSE_MIN_FEATURES, dtype=dtype))  # dense one-hot rows read as CSR


def _computed_rows() -> None:
    """Grow a core set past its stored Gram (:meth:`~coresvm.solvers.core_gram.CoreSetState.compute_rows_from`):
    the loops of computed kernel rows and of the gradient from them."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 2))
    problem = SimplexProblem(X, np.where(X[:, 0] > 0, 1.0, -1.0), np.ones(200), KernelSpec("rbf", gamma=1.0))
    core = CoreSetState.growable(2**24, 1e-2, max_points=200)
    append_points(problem, core, np.arange(100), np.full(100, 0.01))
    core.compute_rows_from(problem)
    append_points(problem, core, np.arange(100, 200), np.zeros(100))
    parallel_loop_threads()  # loads the threading layer the parallel steps of large computed-row core sets run on


def _pass_helper() -> None:
    """The helper thread's loop of large core sets' pairwise steps
    (:func:`~coresvm.solvers.core_steps.pass_helper_loop`), for a float32 and a float64 Gram; told to end before it
    starts.  The solving thread's side is in the inner solve
    that every fit above compiled."""
    X = np.random.default_rng(0).standard_normal((64, 2))
    problem = SimplexProblem(X, np.where(X[:, 0] > 0, 1.0, -1.0), np.ones(64), KernelSpec("rbf", gamma=1.0))
    for tol in (1e-2, 1e-4):  # a float32 and a float64 Gram (core_gram.gram_dtype)
        core = CoreSetState.growable(2**20, tol, max_points=64)
        append_points(problem, core, np.arange(64), np.full(64, 1.0 / 64))
        control = new_control()
        control[EXIT] = 1
        pass_helper_loop(core.gram, core.alpha, core.G, core.diag, 64, (control, np.empty(partner_work_space(64))))


def precompile(verbose: bool = False) -> float:
    """Compile (or load from Numba's cache) the solver loops that default ``CoreSVC`` fits use.

    Parameters
    ----------
    verbose : bool, default=False
        Print each path's time as it is done.

    Returns
    -------
    float
        Seconds taken: about 3 minutes in a fresh environment on 2 cores, well under a second once cached.
    """
    start = time.perf_counter()
    for name, params, X, y in _problems():
        begun = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a tiny problem's convergence is not the point
            model = CoreSVC(random_state=0, **params).fit(X, y)
            model.predict(X)
        if verbose:
            print(f"{name:>17}: {time.perf_counter() - begun:6.1f} s", flush=True)
    for name, step in (("Newton steps", _newton_steps), ("float32 products", _float32_products),
                       ("computed rows", _computed_rows), ("pass helper", _pass_helper)):
        begun = time.perf_counter()
        step()
        if verbose:
            print(f"{name:>17}: {time.perf_counter() - begun:6.1f} s", flush=True)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    """``python -m coresvm.precompile``: compile the solver loops into Numba's on-disk cache."""
    parser = argparse.ArgumentParser(prog="python -m coresvm.precompile", description=__doc__.splitlines()[0])
    parser.add_argument("-q", "--quiet", action="store_true", help="print nothing")
    args = parser.parse_args(argv)
    seconds = precompile(verbose=not args.quiet)
    if not args.quiet:
        print(f"coresvm's solver loops compiled and cached in {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
