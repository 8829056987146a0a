"""The joint (all-at-once) multiclass machine of Strack 2013 sec. 5.4."""


import numpy as np
import pytest
from sklearn.datasets import load_digits, load_iris, make_blobs, make_classification
from sklearn.model_selection import train_test_split
from test_solvers import assert_reaches_exact_optimum, exact_solution
from test_svc import check_estimator_with_gamma_scale

from coresvm.joint import fit_joint, joint_problem
from coresvm.kernels import KernelSpec, kernel_block
from coresvm.problem import simplex_label_gram
from coresvm.solvers.core_set import label_weighted_sums
from coresvm.solvers.driver import SolverOptions, run_engine
from coresvm.svc import CoreSVC

SPEC = KernelSpec("rbf", gamma=0.5)


def simplex_vertices(n_classes):
    """Explicit label vectors: centred one-hot vectors, normalized (a regular simplex)."""
    vertices = np.eye(n_classes) - 1.0 / n_classes
    return vertices / np.linalg.norm(vertices, axis=1, keepdims=True)


def small_joint_problem(m=60, n_classes=3, seed=0, bias=True, kernel=SPEC):
    X, y = make_blobs(n_samples=m, centers=n_classes, n_features=3, cluster_std=2.0, random_state=seed)
    C = 10.0 * np.random.RandomState(seed).uniform(0.5, 2.0, size=m)  # per-sample C: the weighted diagonal
    return joint_problem(X, y, n_classes, C, kernel, bias=bias)


@pytest.mark.parametrize("n_classes", [2, 3, 5, 10])
def test_label_gram_is_the_gram_of_simplex_vertices(n_classes):
    vertices = simplex_vertices(n_classes)
    L = simplex_label_gram(n_classes)
    np.testing.assert_allclose(L, vertices @ vertices.T, atol=1e-12)
    assert np.allclose(np.diag(L), 1.0) and np.allclose(L[0, 1], -1.0 / (n_classes - 1))
    assert np.linalg.eigvalsh(L).min() > -1e-12  # positive semidefinite: Q stays a Mercer kernel


def test_dense_joint_Q_is_the_extended_kernel_of_the_label_vectors():
    problem = small_joint_problem(n_classes=4)
    Yv = simplex_vertices(4)[problem.class_index]
    K = kernel_block(problem.X, problem.X, SPEC)
    expected = (Yv @ Yv.T) * (K + 1.0) + np.diag(problem.inv_c)
    np.testing.assert_allclose(problem.dense_Q(), expected, atol=1e-12)
    np.testing.assert_allclose(np.diag(expected), problem.diag, atol=1e-12)


@pytest.mark.parametrize("bias", [True, False])
def test_per_class_scoring_equals_dense_Q_times_alpha(bias):
    """g_t = K/(K-1) S[t, c_t] - 1/(K-1) sum_c S[t, c] (core_set.label_weighted_sums) against Q a."""
    problem = small_joint_problem(n_classes=4, bias=bias)
    rng = np.random.RandomState(1)
    support = np.sort(rng.choice(problem.n_points, 25, replace=False))
    alpha = rng.uniform(size=25)
    alpha /= alpha.sum()
    dense = np.zeros(problem.n_points)
    dense[support] = alpha
    expected = problem.dense_Q() @ dense - problem.inv_c * dense
    targets = np.arange(problem.n_points)
    np.testing.assert_allclose(label_weighted_sums(problem, targets, support, alpha), expected, atol=1e-12)


@pytest.mark.parametrize("n_candidates,max_add", [(59, 1), (30, 10), (400, 400)])
@pytest.mark.parametrize("n_classes", [3, 5])
def test_core_set_solver_reaches_the_exact_joint_optimum(n_candidates, max_add, n_classes):
    problem = small_joint_problem(n_classes=n_classes)
    _, f_star, Q = exact_solution(problem)
    options = SolverOptions(core_set=True, n_candidates=n_candidates, max_add=max_add, second_vertex="imdm",
                            tol=1e-9, seed=0)
    result = run_engine(problem, options)
    alpha = assert_reaches_exact_optimum(problem, result, f_star, Q)
    # KKT of the simplex problem: (Q a)_i >= a'Qa for every point, with equality on the support
    g = Q @ alpha
    rho = alpha @ g
    assert g.min() >= rho * (1 - 1e-6)
    np.testing.assert_allclose(g[alpha > 0], rho, rtol=1e-6)


def test_other_solvers_reject_the_joint_problem():
    problem = small_joint_problem()
    with pytest.raises(ValueError, match="not by 'swap': its loop evaluates binary labels"):
        run_engine(problem, SolverOptions(step_rule="swap"))
    with pytest.raises(ValueError, match="not by 'bvm': its loop evaluates binary labels"):
        run_engine(problem, SolverOptions(ball_rule="bvm"))
    X, y = make_blobs(n_samples=60, centers=3, random_state=0)
    with pytest.raises(ValueError, match="core-set solvers"):
        fit_joint(X, y, 3, np.ones(60), SPEC, SolverOptions(step_rule="swap"))


# ---- all-at-once MNSVM and SphereSVM (Strack 2013 sec. 5.4.2: the binary solvers on the label-vector kernel)
def joint_ball_options(rule, n_points, **extra):
    return SolverOptions(ball_rule=rule, stopping="mn", eps=1e-9, draws=20 * n_points, seed=0, **extra)


JOINT_BALL_SEARCHES = {  # the three violator searches of solve_ball (geometric.py)
    "tracked": dict(track_every_point=True),  # every point's g kept from rows of Q (small problems)
    "compiled": dict(track_every_point=False, block_search=False),  # g of each draw from the compiled rows
    "block": dict(track_every_point=False, block_search=True),  # draws scored in BLAS blocks
}


@pytest.mark.parametrize("search", sorted(JOINT_BALL_SEARCHES))
@pytest.mark.parametrize("selection", ["mdm", "imdm"])
@pytest.mark.parametrize("rule,n_classes", [("mnsvm", 3), ("mnsvm", 5), ("sphere", 3)])
def test_mnsvm_and_sphere_reach_the_exact_joint_optimum(rule, n_classes, selection, search):
    """The same problem as the core-set solvers (eq. 5.16): objective, KKT and gap against SLSQP's optimum."""
    problem = small_joint_problem(m=90, n_classes=n_classes)
    if rule == "sphere":  # an MEB solver: one C for every sample (a constant k~(x, x))
        problem = joint_problem(problem.X, problem.class_index, n_classes, np.full(90, 10.0), SPEC)
    _, f_star, Q = exact_solution(problem)
    result = run_engine(problem, joint_ball_options(rule, 90, second_vertex=selection,
                                                    **JOINT_BALL_SEARCHES[search]))
    alpha = assert_reaches_exact_optimum(problem, result, f_star, Q)
    g = Q @ alpha  # KKT: (Q a)_i >= a'Qa everywhere, = on the support
    rho = alpha @ g
    assert g.min() >= rho * (1 - 1e-8)
    np.testing.assert_allclose(g[alpha > 0], rho, rtol=1e-8)
    assert result.rel_gap <= 1e-8 and result.stop_value <= 1e-8  # the reported gap is the real one


def test_joint_mnsvm_on_csr_data_and_a_non_normalized_kernel():
    import scipy.sparse as sp

    poly = KernelSpec("poly", gamma=0.5, coef0=1.0, degree=2)
    dense = small_joint_problem(m=80, n_classes=4, kernel=poly, bias=False)
    X = sp.csr_matrix(dense.X / 5.0)  # blobs spread over [-10, 10]: keep (0.5 x.y + 1)^2 well conditioned
    problem = joint_problem(X, dense.class_index, 4, 1 / dense.inv_c, poly, bias=False)
    _, f_star, Q = exact_solution(problem)
    for search in ("compiled", "block"):
        result = run_engine(problem, joint_ball_options("mnsvm", 80, **JOINT_BALL_SEARCHES[search]))
        assert_reaches_exact_optimum(problem, result, f_star, Q)


def test_joint_labels_are_label_vectors_whose_products_are_the_label_gram():
    problem = small_joint_problem(n_classes=4)
    V = problem.labels
    assert V.shape == (problem.n_points, 4)
    np.testing.assert_allclose(V @ V.T, simplex_label_gram(4)[np.ix_(problem.class_index, problem.class_index)],
                               atol=1e-12)
    binary = joint_problem(problem.X, (problem.class_index > 1).astype(int), 2, np.ones(60), SPEC)
    np.testing.assert_allclose(np.abs(binary.labels @ binary.labels.T), 1.0, atol=1e-12)


@pytest.mark.parametrize("bias", ["theoretic", "kkt"])
def test_coresvc_joint_mnsvm_is_the_joint_optimum_and_predicts_by_its_scores(bias):
    X, y = make_blobs(n_samples=120, centers=3, n_features=3, cluster_std=2.0, random_state=0)
    model = CoreSVC(C=10.0, gamma=0.5, solver="mnsvm", multiclass="joint", bias=bias, stopping="mn", eps=1e-9,
                    draws=2400, random_state=0).fit(X, y)
    assert model.fit_status_ == 0 and model.solver_info_[0]["status"] == "converged"
    problem = joint_problem(X, y, 3, np.full(120, 10.0), SPEC)
    _, f_star, Q = exact_solution(problem)
    alpha = np.zeros(120)
    alpha[model.support_] = model._joint_model.alpha
    assert problem.objective(alpha, Q) == pytest.approx(f_star, abs=1e-8)
    reference = CoreSVC(C=10.0, gamma=0.5, multiclass="joint", bias=bias, tol=1e-9, random_state=0).fit(X, y)
    np.testing.assert_allclose(model.decision_function(X), reference.decision_function(X), atol=1e-5)
    assert model.decision_function(X).shape == (120, 3)
    np.testing.assert_array_equal(model.predict(X), model.classes_[np.argmax(model.decision_function(X), axis=1)])


def test_coresvc_joint_mnsvm_with_gsvm_defaults_fair_draws_and_weights():
    """gsvm's own settings (adjmn, eps 1e-3, 600 draws, MDM, fair sampling) on per-sample C: a converged,
    accurate model whose real relative gap is of the order of eps."""
    X, y = make_blobs(n_samples=600, centers=4, n_features=4, cluster_std=2.5, random_state=3)
    weights = np.random.RandomState(0).uniform(0.5, 2.0, 600)
    model = CoreSVC(C=10.0, gamma=0.2, solver="mnsvm", multiclass="joint", selection="mdm", sampling="stratified",
                    random_state=0).fit(X, y, sample_weight=weights)
    info = model.solver_info_[0]
    assert model.fit_status_ == 0 and info["stop_value"] <= 1e-3 * 1.01
    assert info["relative_gap"] < 2e-2
    coreset = CoreSVC(C=10.0, gamma=0.2, multiclass="joint", random_state=0).fit(X, y, sample_weight=weights)
    assert np.mean(model.predict(X) == coreset.predict(X)) >= 0.99
    assert model.score(X, y) > 0.9


@pytest.fixture(scope="module")
def pendigits():
    import lzma

    from sklearn.datasets import load_svmlight_file

    from coresvm.datasets import datasets_dir

    if not (datasets_dir() / "pendigits.xz").exists() or not (datasets_dir() / "pendigits.t.xz").exists():
        pytest.skip("pendigits not in the shared datasets folder")

    def load(name):
        with lzma.open(datasets_dir() / name, "rb") as handle:
            X, y = load_svmlight_file(handle, n_features=16)
        return X.toarray() / 100.0, y  # features 0..100

    (X, y), (X_test, y_test) = load("pendigits.xz"), load("pendigits.t.xz")
    rng = np.random.RandomState(0)
    train, test = rng.choice(len(y), 1500, replace=False), rng.choice(len(y_test), 1000, replace=False)
    return X[train], y[train], X_test[test], y_test[test]


def test_pendigits_all_at_once_mnsvm_against_pairwise(pendigits):
    """Measured (1,500 training, 1,000 test points, C=10, gamma=2): pairwise MNSVM 97.6%, all-at-once MNSVM
    93.6% with 382 SVs against 625, all-at-once by the core-set solver (the same problem) 93.6%.  Strack 2013
    (sec. 7.4) reports pairwise as always more accurate, with smaller all-at-once models."""
    X, y, X_test, y_test = pendigits
    pairwise = CoreSVC(C=10.0, gamma=2.0, solver="mnsvm", random_state=0).fit(X, y)
    joint = CoreSVC(C=10.0, gamma=2.0, solver="mnsvm", multiclass="joint", random_state=0).fit(X, y)
    same_problem = CoreSVC(C=10.0, gamma=2.0, multiclass="joint", random_state=0).fit(X, y)
    accuracy = joint.score(X_test, y_test)
    assert joint.fit_status_ == 0 and joint.decision_function(X_test).shape == (1000, 10)
    assert accuracy > 0.92
    assert accuracy >= pairwise.score(X_test, y_test) - 0.06
    assert abs(accuracy - same_problem.score(X_test, y_test)) <= 0.01
    assert len(joint.support_) < len(pairwise.support_)


@pytest.mark.parametrize("bias", ["theoretic", "kkt", "none"])
def test_decision_function_is_the_papers_score(bias):
    """d_t(x) = (sum_i a_i L[c_i, t] k(x_i, x) + y_t.b) / rho with y_t.b by the bias rule (eqs. 5.17, 5.28)."""
    X, y = make_blobs(n_samples=90, centers=3, n_features=3, cluster_std=2.0, random_state=0)
    model = CoreSVC(C=10.0, gamma=0.5, multiclass="joint", bias=bias, tol=1e-9, random_state=0).fit(X, y)
    problem = joint_problem(X, y, 3, np.full(90, 10.0), SPEC, bias=bias != "none")
    _, f_star, Q = exact_solution(problem)
    alpha = np.zeros(90)
    alpha[model.support_] = model._joint_model.alpha
    assert problem.objective(alpha, Q) == pytest.approx(f_star, abs=1e-8)
    rho = alpha @ Q @ alpha
    L = simplex_label_gram(3)
    X_test = np.random.RandomState(1).randn(7, 3) * 3
    K = kernel_block(X_test, X, SPEC)
    weights = alpha[:, None] * L[y]  # (m, K): a_i L[c_i, t]
    theoretic = weights.sum(axis=0)
    if bias == "none":
        b = np.zeros(3)
    elif bias == "theoretic":
        b = theoretic
    else:
        Kx = kernel_block(X, X, SPEC)
        g_kernel = (L[y][:, y] * Kx) @ alpha
        per_sv = rho - alpha / 10.0 - g_kernel
        b = np.array([per_sv[(alpha > 0) & (y == t)].mean() for t in range(3)])
        np.testing.assert_allclose(b, theoretic, atol=1e-6 * rho)  # at the optimum both rules agree
    expected = (K @ weights + b) / rho
    np.testing.assert_allclose(model.decision_function(X_test), expected, rtol=1e-7, atol=1e-9)
    # dual_coef_ / intercept_ reproduce the scores as documented
    K_sv = kernel_block(X_test, model.support_vectors_, SPEC)
    np.testing.assert_allclose(K_sv @ model.dual_coef_.T + model.intercept_, expected, rtol=1e-7, atol=1e-9)


def test_two_classes_joint_is_the_binary_machine(monkeypatch):
    import coresvm.svc as svc_module

    X, y = make_classification(n_samples=400, n_features=6, n_informative=4, random_state=0)
    joint = CoreSVC(C=10.0, multiclass="joint", random_state=0).fit(X, y)
    # The default binary fit runs the compiled small-problem loop: the same optimum within tol
    fast = CoreSVC(C=10.0, random_state=0).fit(X, y)
    assert np.mean(joint.predict(X) == fast.predict(X)) >= 0.99
    # and with the core-set loop that two-class joint fits run, the very same machine
    # (at tol < 1e-3 both score candidates in float64: a float32 GEMM with one column per class rounds
    # differently from the binary machine's GEMV)
    monkeypatch.setattr(svc_module, "SMALL_PROBLEM_FAST_PATH", False)
    joint = CoreSVC(C=10.0, multiclass="joint", tol=1e-4, random_state=0).fit(X, y)
    binary = CoreSVC(C=10.0, tol=1e-4, random_state=0).fit(X, y)
    np.testing.assert_array_equal(joint.support_, binary.support_)  # both by class, then row
    assert joint.decision_function(X).shape == (400,)
    np.testing.assert_allclose(joint.decision_function(X), binary.decision_function(X), rtol=1e-6, atol=1e-9)
    np.testing.assert_array_equal(joint.predict(X), binary.predict(X))
    # the two class scores are opposite (theoretic bias), so the argmax is the sign
    scores = joint._joint_scores(X)
    np.testing.assert_allclose(scores[:, 0], -scores[:, 1], atol=1e-12)


def test_decision_shape_and_predict_is_the_argmax():
    X, y = make_blobs(n_samples=300, centers=4, n_features=5, random_state=2)
    labels = np.array(["ant", "bee", "cat", "dog"])[y]
    model = CoreSVC(C=10.0, multiclass="joint", random_state=0).fit(X, labels)
    scores = model.decision_function(X)
    assert scores.shape == (300, 4)
    np.testing.assert_array_equal(model.predict(X), model.classes_[np.argmax(scores, axis=1)])
    assert model.dual_coef_.shape == (4, len(model.support_))
    assert model.intercept_.shape == (4,) and model.n_iter_.shape == (1,)
    assert model.n_support_.sum() == len(model.support_)
    np.testing.assert_array_equal(model.support_vectors_, X[model.support_])
    # support vectors are grouped by class, as in LIBSVM's layout
    assert np.all(np.diff(y[model.support_]) >= 0)
    assert model.score(X, labels) > 0.95


@pytest.mark.parametrize("loader,C,max_gap", [(load_iris, 100.0, 0.05), (load_digits, 100.0, 0.04)])
def test_accuracy_close_to_one_vs_one(loader, C, max_gap):
    X, y = loader(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    ovo = CoreSVC(C=C, random_state=0).fit(X_train, y_train).score(X_test, y_test)
    joint = CoreSVC(C=C, multiclass="joint", random_state=0).fit(X_train, y_train)
    assert joint.fit_status_ == 0
    accuracy = joint.score(X_test, y_test)
    assert accuracy >= ovo - max_gap
    assert accuracy > 0.94


def test_sample_weight_and_class_weight_enter_as_C():
    X, y = make_blobs(n_samples=240, centers=3, n_features=4, cluster_std=3.0, random_state=1)
    weights = np.ones(240)
    weights[:40] = 0.0  # zero weight: the sample is left out
    model = CoreSVC(C=10.0, multiclass="joint", random_state=0).fit(X, y, sample_weight=weights)
    reference = CoreSVC(C=10.0, multiclass="joint", random_state=0, gamma=model.gamma_).fit(X[40:], y[40:])
    assert np.all(model.support_ >= 40)
    np.testing.assert_allclose(model.decision_function(X), reference.decision_function(X), rtol=1e-6, atol=1e-9)
    by_class = CoreSVC(C=10.0, multiclass="joint", class_weight={2: 5.0}, random_state=0).fit(X, y)
    by_sample = CoreSVC(C=10.0, multiclass="joint", random_state=0).fit(X, y, sample_weight=np.where(y == 2, 5.0, 1.0))
    np.testing.assert_allclose(by_class.decision_function(X), by_sample.decision_function(X), rtol=1e-9, atol=1e-12)


def test_balanced_class_weight_raises_minority_recall():
    X, y = make_classification(n_samples=1500, n_classes=3, n_informative=4, weights=[0.8, 0.15, 0.05],
                               class_sep=0.7, random_state=0)
    plain = CoreSVC(C=10.0, multiclass="joint", random_state=0).fit(X, y).predict(X)
    balanced = CoreSVC(C=10.0, multiclass="joint", class_weight="balanced", random_state=0).fit(X, y).predict(X)
    assert np.mean(balanced[y == 2] == 2) > np.mean(plain[y == 2] == 2) + 0.05


def test_cvm_solves_the_same_joint_problem_and_invalid_combinations():
    X, y = make_blobs(n_samples=150, centers=3, random_state=0)
    coreset = CoreSVC(multiclass="joint", tol=1e-6, random_state=0).fit(X, y)
    cvm = CoreSVC(solver="cvm", multiclass="joint", tol=1e-6, random_state=0).fit(X, y)
    assert cvm.fit_status_ == 0
    assert cvm.solver_info_[0]["rho"] == pytest.approx(coreset.solver_info_[0]["rho"], rel=1e-5)
    np.testing.assert_allclose(cvm.decision_function(X), coreset.decision_function(X), atol=1e-3)
    for solver in ("swap", "bvm"):
        with pytest.raises(ValueError, match="'joint' supports solver='coreset', 'cvm', 'mnsvm' or 'sphere'"):
            CoreSVC(solver=solver, multiclass="joint").fit(X, y)
    with pytest.raises(ValueError, match="decision_function_shape must be 'ovr'"):
        CoreSVC(multiclass="joint", decision_function_shape="ovo").fit(X, y)
    with pytest.raises(ValueError, match="multiclass must be one of"):
        CoreSVC(multiclass="all").fit(X, y)


def test_refit_switches_between_ovo_and_joint():
    X, y = make_blobs(n_samples=150, centers=3, random_state=0)
    model = CoreSVC(multiclass="joint", random_state=0).fit(X, y)
    assert model.intercept_.shape == (3,) and model.dual_coef_.shape[0] == 3
    model.set_params(multiclass="ovo").fit(X, y)
    assert model.dual_coef_.shape[0] == 2
    np.testing.assert_array_equal(model.predict(X), CoreSVC(random_state=0).fit(X, y).predict(X))


def test_check_estimator_joint():
    check_estimator_with_gamma_scale(CoreSVC(multiclass="joint", random_state=0))


def test_native_model_file_round_trip_and_libsvm_refusal(tmp_path):
    from coresvm.model_io import load_model, save_model

    X, y = make_blobs(n_samples=150, centers=3, random_state=0)
    model = CoreSVC(multiclass="ovo", random_state=0).fit(X, y)
    model.set_params(multiclass="joint").fit(X, y)  # no stale one-vs-one state in the file
    save_model(model, tmp_path / "joint.model")
    loaded = load_model(tmp_path / "joint.model")
    np.testing.assert_array_equal(loaded.decision_function(X), model.decision_function(X))
    with pytest.raises(ValueError, match="one-vs-one models only"):
        save_model(model, tmp_path / "joint.libsvm", format="libsvm")


def test_usps_subset_one_model_with_per_class_scores():
    """Issue 4: 'joint gives one model with the right decision shape' on USPS (skipped without the data)."""
    import gzip

    from coresvm.datasets import datasets_dir

    train_file, test_file = datasets_dir() / "zip.train.gz", datasets_dir() / "zip.test.gz"
    if not (train_file.exists() and test_file.exists()):
        pytest.skip("USPS files not available")
    train = np.loadtxt(gzip.open(train_file, "rt"), max_rows=2000)
    test = np.loadtxt(gzip.open(test_file, "rt"))
    model = CoreSVC(C=10.0, gamma=2.0**-7, multiclass="joint", random_state=0).fit(train[:, 1:], train[:, 0])
    scores = model.decision_function(test[:, 1:])
    assert scores.shape == (len(test), 10) and model.dual_coef_.shape == (10, len(model.support_))
    assert len(model.solver_info_) == 1 and model.fit_status_ == 0
    np.testing.assert_array_equal(model.predict(test[:, 1:]), model.classes_[np.argmax(scores, axis=1)])
    assert model.score(test[:, 1:], test[:, 0]) > 0.87


@pytest.mark.parametrize("multiclass, others", [("joint", "solver='coreset' with weights"),
                                                ("ovo", "solver='mnsvm' or 'coreset' with weights")])
def test_a_minimum_enclosing_ball_solver_rejects_varying_C_naming_the_solvers_that_take_it(multiclass, others):
    X, y = make_blobs(n_samples=60, centers=3, random_state=0)
    with pytest.raises(ValueError, match=f"solver='sphere' solves a minimum enclosing ball.*Use {others}"):
        CoreSVC(solver="sphere", multiclass=multiclass).fit(X, y, sample_weight=np.linspace(1, 2, 60))
    CoreSVC(solver="sphere", multiclass=multiclass).fit(X, y)  # one C: fine
