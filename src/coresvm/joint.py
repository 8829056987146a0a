"""The joint ("all-at-once") multiclass L2-SVM: one simplex problem for all K classes.

Strack 2013 sec. 5.4 (after Asharaf et al.'s multiclass CVM).  Every class ``t``
gets a unit label vector ``y_t`` at a vertex of a regular simplex in R^(K-1),
so that ``y_s . y_t = L[s, t]`` is 1 for ``s == t`` and ``-1/(K-1)`` otherwise
(:func:`~coresvm.problem.simplex_label_gram`).  The primal

    minimize  1/2 trace(W'W) + 1/2 ||b||^2 - rho + C/2 sum_i xi_i^2
    s.t.      y_{c_i}' (W phi(x_i) + b) >= rho - xi_i

has the dual of the binary machine with ``y_i y_j`` replaced by ``L[c_i, c_j]``:
minimize ``a'Qa`` over the unit simplex with
``Q_ij = L[c_i, c_j] (k(x_i, x_j) + 1) + delta_ij / C_i`` (eq. 5.10; the
printed ``sum a_i = 0`` is a misprint for 1).  At the optimum
``W = sum_i a_i y_{c_i} phi(x_i)'``, ``b = sum_i a_i y_{c_i}`` and the
decision is the class with the largest score (eq. 5.17)::

    d_t(x) = sum_i a_i L[t, c_i] k(x_i, x) + y_t . b

Only the scalars ``y_t . b`` are needed.  'theoretic': ``sum_i a_i L[t, c_i]``;
'kkt': the average of the KKT conditions over the SVs of class ``t`` (eq. 5.28,
summed over ``S_t``, not ``1..m`` as printed)::

    y_t . b = mean_{i in S_t} (rho - a_i / C_i - sum_j a_j L[c_i, c_j] k(x_i, x_j))

with ``rho = ||c||^2 = a'Qa``.  Scores are divided by ``rho`` as in the binary
model (:class:`~coresvm.multiclass.BinaryModel`), which does not change the argmax.

One problem on all ``m`` points replaces ``K(K-1)/2`` pairwise problems; the
thesis reports it at least 3x faster in nested CV but always less accurate
than pairwise (Strack 2013 sec. 7.4).  It is solved by the core-set solvers
(:mod:`~coresvm.solvers.core_set`), whose candidate scoring keeps one
coefficient column per class; with more than two classes and a dense ``X``,
``solver='coreset'`` runs it on :mod:`~coresvm.solvers.dense_joint` (cached
kernel rows of the working set, exact gradient; :func:`uses_dense_joint`).

It is also the thesis's own method, MNSVM (or SphereSVM) on this kernel (sec. 5.4.2: the binary
solvers generalized to multiclass): ``solver='mnsvm'`` / ``'sphere'`` run the same loop as for a
binary problem (:func:`~coresvm.solvers.geometric.solve_in_stages`: first violator of the draws, the
pairwise MDM / IMDM step of Alg. 4 / eq. 5.31 between it and an SV, multiscale eps), with the
compiled kernel evaluation given the label vectors ``y_{c_i}`` (:attr:`SimplexProblem.labels
<coresvm.problem.SimplexProblem.labels>`) in place of the signs: every step, threshold and update
reads ``Q`` only through ``g_i = (Q a)_i`` and ``Q_uv``, which the label product
``y_{c_u} . y_{c_v} = L[c_u, c_v]`` gives.  ``sampling='stratified'`` (gsvm's fair draw) picks a
class, then a point of it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .data import is_memory_mapped
from .kernels import KernelSpec, kernel_product
from .problem import SimplexProblem, simplex_label_gram
from .solvers.core_set import label_weighted_sums
from .solvers.dense_joint import fits_dense_joint, run_dense_joint
from .solvers.driver import SolverOptions, SolverResult, check_joint_support, run_engine

# Whether fit_joint may use the cached-rows loop (solvers/dense_joint.py); tests switch it off to compare.
DENSE_JOINT = True

JOINT_BIAS_RULES = ("theoretic", "kkt", "none")


@dataclass
class JointModel:
    """A fitted joint multiclass machine.

    Attributes
    ----------
    support : ndarray of shape (n_SV,)
        Training-row indices of the support vectors, grouped by class, then by row.
    support_class : ndarray of shape (n_SV,)
        Class index of each support vector.
    alpha : ndarray of shape (n_SV,)
        The simplex weights (they sum to 1 over all SVs).
    coef : ndarray of shape (n_SV, n_classes)
        ``coef[i, t] = a_i L[c_i, t] / rho``: SV ``i``'s weight in class ``t``'s score.
    intercept : ndarray of shape (n_classes,)
        ``y_t . b / rho`` by the bias rule (0 for 'none').
    rho : float
        ``a'Qa``, the margin of the simplex problem.
    info : dict
        The solver's record (iterations, gap, status, time, ...).
    """

    support: np.ndarray
    support_class: np.ndarray
    alpha: np.ndarray
    coef: np.ndarray
    intercept: np.ndarray
    rho: float
    info: dict

    def decision_function(self, X, support_vectors, kernel: KernelSpec, sv_norms=None) -> np.ndarray:
        """Scores of shape (n_samples, n_classes): ``k(X, SV) @ coef + intercept``."""
        scores = kernel_product(X, support_vectors, kernel, self.coef, norms_b=sv_norms)
        scores += self.intercept
        return scores

    def predict_index(self, X, support_vectors, kernel: KernelSpec, sv_norms=None) -> np.ndarray:
        """Class indices by the argmax of the scores (Strack 2013 eq. 5.17)."""
        return np.argmax(self.decision_function(X, support_vectors, kernel, sv_norms), axis=1)


def joint_problem(X, y_index: np.ndarray, n_classes: int, C: np.ndarray, kernel: KernelSpec,
                  bias: bool = True) -> SimplexProblem:
    """The simplex problem of the joint machine on rows ``X`` with class indices ``y_index``."""
    return SimplexProblem(X, np.asarray(y_index, dtype=np.float64), C, kernel, bias=bias, lam=0.0,
                          label_gram=simplex_label_gram(n_classes))


def fit_joint(X, y_index: np.ndarray, n_classes: int, C: np.ndarray, kernel: KernelSpec,
              options: SolverOptions, bias_rule: str = "theoretic") -> tuple[JointModel, SolverResult]:
    """Solve the joint problem and build the model.

    Parameters
    ----------
    X : array or CSR matrix of shape (m, d)
    y_index : int array of shape (m,)
        Class indices in ``0..n_classes-1``.
    n_classes : int
    C : array of shape (m,)
        Per-sample penalties ``C_i`` (class and sample weights included).
    kernel : KernelSpec
    options : SolverOptions
        A core-set solver (``options.core_set``), or SphereSVM / MNSVM (``options.ball_rule``).
    bias_rule : {'theoretic', 'kkt', 'none'}

    Returns
    -------
    model : JointModel
    result : SolverResult
        The raw solver result (indices relative to ``X``).
    """
    if bias_rule not in JOINT_BIAS_RULES:
        raise ValueError(f"bias must be one of {JOINT_BIAS_RULES} for the joint machine; got {bias_rule!r}")
    problem = joint_problem(X, y_index, n_classes, C, kernel, bias=bias_rule != "none")
    check_joint_support(problem, options)
    if n_classes > 2 and uses_dense_joint(X, options):
        result = run_dense_joint(problem, options)
    else:
        result = run_engine(problem, options)
    return model_from_solution(problem, result, bias_rule), result


def uses_dense_joint(X, options: SolverOptions) -> bool:
    """Whether :func:`fit_joint` solves on :mod:`coresvm.solvers.dense_joint` (cached kernel rows, exact gradient).

    Rule (with more than two classes; two classes are the binary machine, solved as the binary fit): a
    dense in-memory NumPy ``X``, the minimal-norm core-set solver (``solver='coreset'``: not CVM's radius
    test), no per-round callback, and a ``cache_size`` that holds a useful number of kernel rows.
    """
    return (DENSE_JOINT and options.core_set and isinstance(X, np.ndarray) and not is_memory_mapped(X)
            and not options.radius_test and options.callback is None
            and fits_dense_joint(X.shape[0], options.cache_bytes, options.tol))


def model_from_solution(problem: SimplexProblem, result: SolverResult, bias_rule: str) -> JointModel:
    """Scale the simplex solution by ``rho`` and lay it out per class (see the module docstring)."""
    L = problem.label_gram
    n_classes = L.shape[0]
    sv_class = problem.class_index[result.support]
    order = np.lexsort((result.support, sv_class))  # by class, then by row (LIBSVM's order)
    support, sv_class, alpha = result.support[order], sv_class[order], result.alpha[order]
    rho = result.squared_norm if result.squared_norm > 0 else 1.0
    coef = alpha[:, None] * L[sv_class] / rho
    if bias_rule == "none":
        intercept = np.zeros(n_classes)
    else:
        intercept = coef.sum(axis=0)  # theoretic: y_t . b = sum_i a_i L[c_i, t]
        if bias_rule == "kkt":
            intercept = _kkt_intercepts(problem, support, sv_class, alpha, rho, intercept)
    info = result.as_record()
    info["rho"] = rho
    return JointModel(support.astype(np.int64), sv_class, alpha, coef, intercept, float(rho), info)


def _kkt_intercepts(problem, support, sv_class, alpha, rho, theoretic) -> np.ndarray:
    """``y_t . b / rho`` averaged over the SVs of each class (Strack 2013 eq. 5.28).

    ``sum_j a_j L[c_i, c_j] k_ij`` is ``g_i`` of the no-bias kernel; classes
    without an SV keep the theoretic value.
    """
    kernel_only = SimplexProblem(problem.rows_of(support), sv_class, 1.0 / problem.inv_c[support], problem.kernel,
                                 bias=False, label_gram=problem.label_gram)
    every = np.arange(len(support))
    weighted = label_weighted_sums(kernel_only, every, every, alpha)
    per_sv = rho - alpha * problem.inv_c[support] - weighted
    intercept = theoretic.copy()
    for t in range(problem.label_gram.shape[0]):
        members = sv_class == t
        if np.any(members):
            intercept[t] = per_sv[members].mean() / rho
    return intercept
