"""scikit-learn's kernels as the independent reference for a KernelSpec (shared by the tests)."""

from sklearn.metrics.pairwise import linear_kernel, polynomial_kernel, rbf_kernel, sigmoid_kernel


def sklearn_kernel(A, B, spec):
    if spec.name == "rbf":
        return rbf_kernel(A, B, gamma=spec.gamma)
    if spec.name == "poly":
        return polynomial_kernel(A, B, degree=spec.degree, gamma=spec.gamma, coef0=spec.coef0)
    if spec.name == "linear":
        return linear_kernel(A, B)
    return sigmoid_kernel(A, B, gamma=spec.gamma, coef0=spec.coef0)
