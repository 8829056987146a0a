"""Numbers quoted in docs/bad_input.md: feature-scale ratios of the benchmark sets, and how far each
gsvm stopping rule leaves the model from the exact optimum on a small problem.

Run from the repository root (with ``PYTHONPATH=src``)::

    python benchmarks/reliability_checks.py scales      # std ratio per data set (FeatureScaleWarning at 1e4)
    python benchmarks/reliability_checks.py stopping    # bvm/sphere/mnsvm vs the exact QP on 30 points
    python benchmarks/reliability_checks.py hardmargin  # C = 1e8 on 80 points that are not separable
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


if __name__ == "__main__":
    {"scales": scales, "stopping": stopping, "hardmargin": hardmargin}[sys.argv[1] if len(sys.argv) > 1 else "scales"]()
