"""Numbers quoted in docs/bad_input.md: feature-scale ratios of the benchmark sets, and how far each
gsvm stopping rule leaves the model from the exact optimum on a small problem.

Run from the repository root (with ``PYTHONPATH=src``)::

    python benchmarks/reliability_checks.py scales      # std ratio per data set (FeatureScaleWarning at 1e4)
    python benchmarks/reliability_checks.py stopping    # bvm/sphere/mnsvm vs the exact QP on 30 points
    python benchmarks/reliability_checks.py hardmargin  # C = 1e8 on 80 points that are not separable
    python benchmarks/reliability_checks.py kernelrange # cost of the kernel-range check against a default fit
"""

from __future__ import annotations

import gzip
import lzma
import sys
import warnings

import numpy as np


def scales() -> None:
    from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_svmlight_file, load_wine

    from coresvm._validation import feature_scale_ratio
    from coresvm.datasets import datasets_dir

    root = datasets_dir()
    rows = []
    for name in ["a9a", "w8a", "ijcnn1", "letter.scale", "pendigits"]:
        with lzma.open(root / f"{name}.xz", "rb") as handle:
            X, _ = load_svmlight_file(handle)
        rows.append((name, X.shape, feature_scale_ratio(X)))
    with lzma.open(root / "twonorm.txt.xz", "rt") as handle:
        X = np.loadtxt(handle)[:, 1:]
    rows.append(("twonorm", X.shape, feature_scale_ratio(X)))
    with lzma.open(root / "banana.dat.xz", "rt") as handle:
        X = np.loadtxt([line for line in handle if not line.startswith("@")], delimiter=",")[:, :-1]
    rows.append(("banana", X.shape, feature_scale_ratio(X)))
    with gzip.open(root / "zip.train.gz", "rt") as handle:
        X = np.loadtxt(handle)[:, 1:]
    rows.append(("zip.train", X.shape, feature_scale_ratio(X)))
    for loader in (load_iris, load_wine, load_digits, load_breast_cancer):
        X = loader().data
        rows.append((f"sklearn {loader.__name__[5:]}", X.shape, feature_scale_ratio(X)))
    print("| data | shape | max/min feature std |\n|---|---|---|")
    for name, shape, ratio in rows:
        print(f"| {name} | {shape[0]} x {shape[1]} | {ratio:.3g} |")


def stopping() -> None:
    from scipy.optimize import minimize

    from coresvm import CoreSVC
    from coresvm.kernels import KernelSpec
    from coresvm.problem import SimplexProblem

    warnings.simplefilter("ignore")
    rng = np.random.RandomState(0)
    X = rng.randn(30, 2)
    y = np.where(X[:, 0] * X[:, 1] > 0, 1, -1)
    print("| C | solver | stopping | status | (f - f*) / f* | true relative gap | reported |")
    print("|---|---|---|---|---|---|---|")
    for C in (10.0, 1e8, 1e-8):
        problem = SimplexProblem(X, y.astype(float), np.full(30, C), KernelSpec("rbf", gamma=0.5))
        Q = problem.dense_Q()
        exact = minimize(lambda a, Q=Q: a @ Q @ a, np.full(30, 1 / 30), jac=lambda a, Q=Q: 2 * Q @ a,
                         bounds=[(0, None)] * 30,
                         constraints=({"type": "eq", "fun": lambda a: a.sum() - 1},), method="SLSQP",
                         options={"ftol": 1e-15, "maxiter": 2000})
        f_star = exact.fun
        for solver in ("bvm", "sphere", "mnsvm"):
            for rule in (None, "mn"):
                model = CoreSVC(C=C, gamma=0.5, solver=solver, stopping=rule, random_state=0, max_time=5).fit(X, y)
                alpha = np.zeros(30)
                alpha[model.support_] = np.abs(model.dual_coef_[0])
                alpha /= alpha.sum()
                f = problem.objective(alpha, Q)
                info = model.solver_info_[0]
                print(f"| {C:g} | {solver} | {rule or 'default'} | {info['status']} | {(f - f_star) / f_star:.2e} | "
                      f"{problem.duality_gap(alpha, Q) / (2 * f):.2e} | {info['relative_gap']:.2e} |")


def hardmargin() -> None:
    import time

    from sklearn.datasets import make_classification

    from coresvm import CoreSVC

    warnings.simplefilter("ignore")
    X, y = make_classification(n_samples=80, n_features=4, random_state=0)
    CoreSVC(max_iter=10).fit(X, y)  # compile
    print("| solver | seconds | status | iterations | relative gap | training accuracy |\n|---|---|---|---|---|---|")
    for solver in ("coreset", "cvm", "fw", "mfw", "swap", "partan", "bvm", "sphere", "mnsvm"):
        start = time.perf_counter()
        model = CoreSVC(C=1e8, solver=solver, random_state=0, max_time=60).fit(X, y)
        info = model.solver_info_[0]
        print(f"| {solver} | {time.perf_counter() - start:.1f} | {info['status']} | {info['iterations']} | "
              f"{info['relative_gap']:.2e} | {model.score(X, y):.3f} |")


def kernelrange() -> None:
    """Seconds of check_kernel_range (median of 7) against one default CoreSVC fit, which runs it once."""
    import time

    from sklearn.datasets import load_svmlight_file

    from coresvm import CoreSVC
    from coresvm._validation import check_kernel_range
    from coresvm.datasets import datasets_dir
    from coresvm.kernels import KernelSpec, resolve_gamma

    warnings.simplefilter("ignore")  # ConvergenceWarnings of the default fits: only their time is used
    root = datasets_dir()
    CoreSVC(max_iter=10).fit(np.random.RandomState(0).randn(50, 3), np.arange(50) % 2)  # compile
    print("| data | input | check (ms) | default fit (s) | share |\n|---|---|---|---|---|")
    for name, n_features in (("ijcnn1", 22), ("a9a", 123)):
        with lzma.open(root / f"{name}.xz", "rb") as handle:
            X_csr, y = load_svmlight_file(handle, n_features=n_features)
        for kind, X in (("CSR", X_csr), ("dense", X_csr.toarray())):
            spec = KernelSpec("rbf", resolve_gamma("scale", X))
            times = []
            for _ in range(7):
                start = time.perf_counter()
                check_kernel_range(X, spec, "CoreSVC")
                times.append(time.perf_counter() - start)
            start = time.perf_counter()
            CoreSVC(random_state=0).fit(X, y)
            fit = time.perf_counter() - start
            check = float(np.median(times))
            print(f"| {name} {X.shape[0]} x {X.shape[1]} | {kind} | {1e3 * check:.2f} | {fit:.2f} | "
                  f"{check / fit:.2%} |")


if __name__ == "__main__":
    modes = {"scales": scales, "stopping": stopping, "hardmargin": hardmargin, "kernelrange": kernelrange}
    modes[sys.argv[1] if len(sys.argv) > 1 else "scales"]()
