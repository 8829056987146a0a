"""CoreSVC multiclass decompositions ('ovo', 'ovr'), parallel training and weights in every mode."""

import numpy as np
import pytest
from sklearn.datasets import load_digits, load_iris, make_blobs

from coresvm.multiclass import OneVsOneLayout
from coresvm.svc import CoreSVC


@pytest.fixture(scope="module")
def iris():
    X, y = load_iris(return_X_y=True)
    order = np.random.RandomState(0).permutation(len(y))
    return X[order], y[order]


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return X[:600] / 16.0, y[:600]


def test_unknown_multiclass_mode_is_a_clear_error(iris):
    X, y = iris
    with pytest.raises(ValueError, match="multiclass must be one of.*'ovo'.*'ovr'.*got 'all'"):
        CoreSVC(multiclass="all").fit(X, y)


@pytest.mark.parametrize("n_jobs", [0, 1.5, True])
def test_bad_n_jobs(iris, n_jobs):
    X, y = iris
    with pytest.raises(ValueError, match="n_jobs"):
        CoreSVC(n_jobs=n_jobs).fit(X, y)


@pytest.mark.parametrize("multiclass", ["ovo", "ovr"])
def test_modes_learn_iris(iris, multiclass):
    X, y = iris
    model = CoreSVC(C=10, gamma=0.5, multiclass=multiclass, random_state=0).fit(X[:100], y[:100])
    assert model.score(X[100:], y[100:]) >= 0.9
    assert model.decision_function(X[100:]).shape == (50, 3)
    n_problems = 3  # 3 pairs or 3 classes
    assert model.intercept_.shape == (n_problems,) and len(model.solver_info_) == n_problems
    assert model.n_support_.sum() == len(model.support_)


def test_one_vs_rest_layout_and_decision(digits):
    X, y = digits
    model = CoreSVC(C=10, gamma=0.05, multiclass="ovr", random_state=0).fit(X[:400], y[:400])
    assert model.dual_coef_.shape == (10, len(model.support_))
    assert model.intercept_.shape == (10,)
    scores = model.decision_function(X[400:])
    assert scores.shape == (200, 10)
    # one problem per class: the prediction is the largest per-class decision value
    np.testing.assert_array_equal(model.predict(X[400:]), model.classes_[np.argmax(scores, axis=1)])
    assert model.score(X[400:], y[400:]) >= 0.84  # ovo: 0.88, scikit-learn OvR(SVC): 0.855
    # the decision is the explicit formula: sum_i dual_coef[k, i] k(x_i, x) + intercept[k]
    from sklearn.metrics.pairwise import rbf_kernel

    explicit = rbf_kernel(X[400:], model.support_vectors_, gamma=0.05) @ model.dual_coef_.T + model.intercept_
    np.testing.assert_allclose(scores, explicit, rtol=1e-8, atol=1e-8)


def test_ovr_and_ovo_agree_on_binary_data(iris):
    X, y = iris
    keep = y < 2
    ovo = CoreSVC(C=10, gamma=0.5, random_state=3).fit(X[keep], y[keep])
    ovr = CoreSVC(C=10, gamma=0.5, multiclass="ovr", random_state=3).fit(X[keep], y[keep])
    np.testing.assert_array_equal(ovo.decision_function(X), ovr.decision_function(X))


def test_ovo_and_ovr_accuracy_close_on_digits(digits):
    X, y = digits
    accuracy = {
        mode: CoreSVC(C=10, gamma=0.05, multiclass=mode, random_state=0).fit(X[:400], y[:400]).score(X[400:], y[400:])
        for mode in ("ovo", "ovr")
    }
    assert min(accuracy.values()) >= 0.84, accuracy  # measured: ovo 0.88, ovr 0.865


@pytest.mark.parametrize("multiclass", ["ovo", "ovr"])
@pytest.mark.parametrize("solver", ["coreset", "swap"])
def test_parallel_equals_sequential(digits, multiclass, solver):
    X, y = digits
    params = dict(C=10, gamma=0.05, multiclass=multiclass, solver=solver, random_state=7)
    sequential = CoreSVC(n_jobs=1, **params).fit(X[:300], y[:300])
    parallel = CoreSVC(n_jobs=2, **params).fit(X[:300], y[:300])
    np.testing.assert_array_equal(sequential.support_, parallel.support_)
    np.testing.assert_array_equal(sequential.dual_coef_, parallel.dual_coef_)
    np.testing.assert_array_equal(sequential.decision_function(X[300:]), parallel.decision_function(X[300:]))
    np.testing.assert_array_equal(sequential.n_iter_, parallel.n_iter_)


def _imbalanced_three_classes():
    X, y = make_blobs(n_samples=[300, 300, 30], centers=[[0, 0], [3, 0], [1.5, 1.0]], cluster_std=1.0,
                      random_state=0)
    return X, y


@pytest.mark.parametrize("multiclass", ["ovo", "ovr"])
def test_balanced_class_weight_raises_minority_recall(multiclass):
    X, y = _imbalanced_three_classes()
    params = dict(C=10, gamma=0.5, multiclass=multiclass, random_state=0)
    plain = CoreSVC(**params).fit(X, y)
    balanced = CoreSVC(class_weight="balanced", **params).fit(X, y)
    recall = {name: np.mean(model.predict(X[y == 2]) == 2) for name, model in (("plain", plain),
                                                                                 ("balanced", balanced))}
    assert recall["balanced"] > recall["plain"] + 0.1, recall


@pytest.mark.parametrize("multiclass", ["ovo", "ovr"])
def test_zero_sample_weight_equals_dropping_rows(iris, multiclass):
    X, y = iris
    weights = np.ones(len(y))
    weights[::4] = 0.0
    params = dict(C=10, gamma=0.5, multiclass=multiclass, tol=1e-8, random_state=0)
    weighted = CoreSVC(**params).fit(X, y, sample_weight=weights)
    dropped = CoreSVC(**params).fit(X[weights > 0], y[weights > 0])
    np.testing.assert_allclose(weighted.decision_function(X), dropped.decision_function(X), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("multiclass", ["ovo", "ovr"])
def test_sample_weight_of_a_class_acts_like_class_weight(multiclass):
    X, y = _imbalanced_three_classes()
    params = dict(C=10, gamma=0.5, multiclass=multiclass, tol=1e-6, random_state=0)
    by_class = CoreSVC(class_weight={2: 5.0}, **params).fit(X, y)
    by_sample = CoreSVC(**params).fit(X, y, sample_weight=np.where(y == 2, 5.0, 1.0))
    np.testing.assert_allclose(by_class.decision_function(X), by_sample.decision_function(X), rtol=1e-6, atol=1e-8)


def test_one_vs_rest_model_file_round_trip(tmp_path, iris):
    from coresvm.model_io import load_model, save_model

    X, y = iris
    y = np.where(np.arange(len(y)) % 4 == 0, 3, y)  # 4 classes: 4 problems, 6 pairs
    model = CoreSVC(C=10, gamma=0.5, multiclass="ovr", random_state=0).fit(X, y)
    save_model(model, tmp_path / "m")
    loaded = load_model(tmp_path / "m")
    np.testing.assert_array_equal(loaded.decision_function(X), model.decision_function(X))
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    with pytest.raises(ValueError, match="one-vs-one models only"):
        save_model(model, tmp_path / "m.libsvm", format="libsvm")


@pytest.fixture(scope="module")
def usps():
    import gzip

    from coresvm.datasets import datasets_dir

    root = datasets_dir()
    if not (root / "zip.train.gz").exists():
        pytest.skip("USPS (zip.train.gz) not in the shared datasets folder")

    def load(name):
        values = np.loadtxt(gzip.open(root / name, "rt"))
        return values[:, 1:], values[:, 0].astype(int)

    return load("zip.train.gz") + load("zip.test.gz")


def test_usps_one_vs_one_matches_svc_accuracy(usps):
    # scikit-learn SVC(C=4, gamma=2^-7): 95.47%; CoreSVC's C chosen on a validation split of the
    # training set (benchmarks/multiclass_benchmark.py): 16
    X_train, y_train, X_test, y_test = usps
    model = CoreSVC(C=16, gamma=2**-7, n_jobs=2, random_state=0).fit(X_train, y_train)
    assert model.score(X_test, y_test) >= 0.95
    assert model.fit_status_ == 0


def test_usps_one_vs_rest_on_a_subset(usps):
    X_train, y_train, X_test, y_test = usps
    model = CoreSVC(C=16, gamma=2**-7, multiclass="ovr", random_state=0).fit(X_train[:2000], y_train[:2000])
    assert model.decision_function(X_test).shape == (len(y_test), 10)
    assert model.score(X_test, y_test) >= 0.92


def test_one_vs_one_pairs_are_merged_class_rows():
    """The compiled merge gives each pair (a, b) its rows in training order and +1 for class a, the rows a
    sort of both classes' rows gives; rows of dropped samples (keep False) are in no pair."""
    from coresvm.multiclass import OneVsOneLayout, one_vs_one_problems

    rng = np.random.default_rng(0)
    y_index = rng.integers(0, 5, 300)
    keep = rng.random(300) > 0.2
    C = rng.random(300) + 0.5
    problems = one_vs_one_problems(y_index, keep, C, 5, np.arange(10))
    for problem, (a, b) in zip(problems, OneVsOneLayout.pairs(5), strict=True):
        expected = np.flatnonzero(keep & ((y_index == a) | (y_index == b)))
        assert problem.label == (a, b)
        np.testing.assert_array_equal(problem.rows, expected)
        np.testing.assert_array_equal(problem.signs, np.where(y_index[expected] == a, 1, -1))
        np.testing.assert_array_equal(problem.C, C[expected])


def test_max_wins_vote_counts_every_pair_and_breaks_ties_to_the_lowest_class():
    from coresvm.multiclass import OneVsOneLayout

    rng = np.random.default_rng(1)
    n_classes = 6
    pairs = OneVsOneLayout.pairs(n_classes)
    decisions = rng.choice([-1.0, 0.0, 1.0, np.nan], size=(500, len(pairs)))
    votes = np.zeros((500, n_classes), dtype=int)
    for p, (a, b) in enumerate(pairs):
        votes[:, a] += decisions[:, p] > 0
        votes[:, b] += ~(decisions[:, p] > 0)
    np.testing.assert_array_equal(OneVsOneLayout.vote(decisions, n_classes), np.argmax(votes, axis=1))


@pytest.mark.parametrize("kernel", ["rbf", "poly", "linear"])
def test_class_by_class_decisions_equal_the_whole_coefficient_matrix(digits, kernel):
    """One-vs-one decisions summed class by class over the pairs each class is in equal k(X, SVs) @ pair_coef."""
    from coresvm.kernels import kernel_product

    X, y = digits
    model = CoreSVC(kernel=kernel, C=10.0, gamma=0.05, random_state=0).fit(X[:400], y[:400])
    whole = kernel_product(X[400:], model.support_vectors_, model._kernel_spec, model._pair_coef,
                           norms_b=model._sv_norms) + model.intercept_
    np.testing.assert_allclose(model._pair_decisions(X[400:]), whole,
                               rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("solver", ["coreset", "mnsvm"])
@pytest.mark.parametrize("n_jobs", [1, 2])
def test_classes_whose_samples_all_have_zero_weight(solver, n_jobs):
    """Two of four classes weighted out entirely: their pair has no rows and gets an empty model (no crash);
    the other pairs train on what is left, and the dropped classes are never predicted."""
    rng = np.random.RandomState(0)
    y = np.repeat([0, 1, 2, 3], 20)
    X = rng.randn(80, 3) + y[:, None]
    weights = np.where(y >= 2, 0.0, 1.0)
    model = CoreSVC(solver=solver, n_jobs=n_jobs, random_state=0).fit(X, y, sample_weight=weights)
    np.testing.assert_array_equal(model.n_support_[2:], 0)
    empty = model.solver_info_[-1]
    assert empty["problem"] == (2, 3) and empty["n_active"] == 0 and empty["status"] == "converged"
    predicted = model.predict(X)
    assert set(predicted) <= {0, 1}
    assert np.mean(predicted[y < 2] == y[y < 2]) > 0.8


@pytest.mark.parametrize("n_classes", [3, 4, 26])
def test_pair_share_slots_point_at_each_pairs_column_in_both_classes_shares(n_classes):
    """pair_share_slots: pair p = (a, b) is class a's and class b's share of p, in the class-after-class layout of
    class_pairs, so the one-vs-one decisions add the right two products."""
    pairs = OneVsOneLayout.pairs(n_classes)
    columns = OneVsOneLayout.class_pairs(n_classes)
    layout = [(c, pair) for c in range(n_classes) for pair in columns[c]]
    positive, negative = OneVsOneLayout.pair_share_slots(n_classes)
    assert [layout[slot] for slot in positive] == [(a, p) for p, (a, _) in enumerate(pairs)]
    assert [layout[slot] for slot in negative] == [(b, p) for p, (_, b) in enumerate(pairs)]


def test_one_vs_one_decisions_equal_the_full_kernel_product():
    """The class-by-class decisions (each class's share of its pairs, added pair by pair) equal the plain
    ``k(X, SVs) @ pair_coef + intercept`` over all pairs."""
    from sklearn.metrics.pairwise import rbf_kernel

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    model = CoreSVC(C=10.0, gamma=0.05, decision_function_shape="ovo", random_state=0).fit(X[:800], y[:800])
    expected = rbf_kernel(X[800:], model.support_vectors_, gamma=0.05) @ model._pair_coef + model.intercept_
    np.testing.assert_allclose(model.decision_function(X[800:]), expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("n_classes", [3, 4, 7])
def test_one_vs_rest_scores_equal_scikit_learns(n_classes):
    """Our 'ovr' transform of one-vs-one decisions equals scikit-learn's, bit for bit: random values, exact
    zeros (a tie goes to the pair's first class), NaN, and votes tied so that only the confidences order them."""
    from sklearn.multiclass import _ovr_decision_function  # the reference only: src may not import it

    from coresvm.multiclass import one_vs_rest_scores

    rng = np.random.default_rng(n_classes)
    n_pairs = n_classes * (n_classes - 1) // 2
    decisions = rng.normal(scale=3.0, size=(400, n_pairs))
    decisions[rng.random(decisions.shape) < 0.1] = 0.0
    decisions[0, 0] = np.nan
    expected = _ovr_decision_function(decisions < 0, -decisions, n_classes)
    np.testing.assert_array_equal(one_vs_rest_scores(decisions, n_classes), expected)
    # A cycle of wins (0 beats 1, 1 beats 2, 2 beats 0): equal votes, the confidences decide.
    cycle = np.array([[1.0, -3.0, 0.5]])
    scores = one_vs_rest_scores(cycle, 3)
    np.testing.assert_array_equal(scores, _ovr_decision_function(cycle < 0, -cycle, 3))
    assert np.all(np.round(scores) == 1) and np.argmax(scores) == 2  # confidences: 0 -> -2, 1 -> -0.5, 2 -> +2.5


def test_ovr_decision_function_and_break_ties_use_the_one_vs_rest_scores(digits):
    from coresvm.multiclass import one_vs_rest_scores

    X, y = digits
    model = CoreSVC(C=10, gamma=0.05, decision_function_shape="ovo", random_state=0).fit(X[:300], y[:300])
    pairwise = model.decision_function(X[300:])
    model.set_params(decision_function_shape="ovr", break_ties=True)
    scores = model.decision_function(X[300:])
    np.testing.assert_array_equal(scores, one_vs_rest_scores(pairwise, 10))
    np.testing.assert_array_equal(model.predict(X[300:]), model.classes_[np.argmax(scores, axis=1)])
    assert np.all(np.abs(scores - np.round(scores)) < 1 / 3)  # whole votes, confidences inside (-1/3, 1/3)
    assert np.mean(model.predict(X[300:]) == y[300:]) >= 0.8  # measured: 0.843 (300 training rows)
