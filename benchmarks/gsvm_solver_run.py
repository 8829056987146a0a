"""One run of a gsvm-family solver or CVM on a benchmark dataset, straight through the engine driver.

Prints the training time, test accuracy (theoretic and KKT bias), #SV, iterations, status and eps.
It exposes engine options that CoreSVC does not (``block_search``), so that the block and the
compiled violator searches can be timed in the same conditions.  Examples (repository root)::

    python benchmarks/gsvm_solver_run.py ijcnn1 bvm 256 --options "block_search=False, max_iter=3000"
    python benchmarks/gsvm_solver_run.py ijcnn1 mnsvm 256 --options "stopping='meb'"
    python benchmarks/gsvm_solver_run.py ijcnn1 cvm 1024 --options "eps=1e-7"
"""

from __future__ import annotations

import argparse
import ast
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_benchmarks  # noqa: E402

from coresvm.kernels import KernelSpec, kernel_product  # noqa: E402
from coresvm.problem import SimplexProblem, kkt_bias  # noqa: E402
from coresvm.solvers.driver import SolverOptions, run_engine  # noqa: E402


def parse_options(text: str) -> dict:
    """``"a=1, b='x'"`` -> ``{'a': 1, 'b': 'x'}`` (literals only)."""
    call = ast.parse(f"f({text})", mode="eval").body
    return {keyword.arg: ast.literal_eval(keyword.value) for keyword in call.keywords}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset", choices=sorted(run_benchmarks.LIBSVM_FILES))
    parser.add_argument("solver", choices=["cvm", "bvm", "sphere", "mnsvm"])
    parser.add_argument("C", type=float)
    parser.add_argument("--options", default="", help="SolverOptions overrides, e.g. \"seed=1, max_time=30\"")
    args = parser.parse_args(argv)
    data = run_benchmarks.load_dataset(args.dataset, 0, 0)
    spec = KernelSpec("rbf", gamma=data.gamma)
    y = data.y_train.astype(np.float64)
    cvm = args.solver == "cvm"
    problem = SimplexProblem(data.X_train, y, np.full(len(y), args.C), spec, bias=True, lam=1.0 if cvm else 0.0)
    if cvm:  # CoreSVC(solver='cvm')'s settings
        options = dict(core_set=True, radius_test=True, n_candidates=59, max_add=1, step_rule="mdm", tol=1e-2)
    else:  # CoreSVC's defaults for the gsvm family
        options = dict(ball_rule=args.solver, stopping="adjmn" if args.solver == "mnsvm" else "meb",
                       probe=59 if args.solver == "bvm" else 1, draws=590 if args.solver == "bvm" else 600)
    options.update(second_vertex="imdm", seed=0, max_time=60.0)
    options.update(parse_options(args.options))
    start = time.perf_counter()
    result = run_engine(problem, SolverOptions(**options))
    seconds = time.perf_counter() - start
    coef = result.alpha * y[result.support]
    scores = kernel_product(data.X_test, data.X_train[result.support], spec, coef)
    accuracy = 100 * np.mean(np.where(scores + coef.sum() >= 0, 1, -1) == data.y_test)
    kkt = kkt_bias(problem, result.support, result.alpha, result.squared_norm)
    accuracy_kkt = 100 * np.mean(np.where(scores + kkt >= 0, 1, -1) == data.y_test)
    print(f"{args.dataset} {args.solver} C={args.C:g} {options}: {seconds:.2f} s, accuracy {accuracy:.2f}% "
          f"(KKT bias {accuracy_kkt:.2f}%), #SV {len(result.support)}, iterations {result.n_iter}, "
          f"{result.status}, eps {result.eps}, rho {result.squared_norm:.4g}")


if __name__ == "__main__":
    main()
