"""CoreSVC(probability=True): Platt scaling, pairwise coupling, calibration against scikit-learn."""

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_digits, load_iris
from sklearn.metrics import brier_score_loss
from sklearn.model_selection import train_test_split
from sklearn.svm import SVC

from coresvm.calibration import couple_pairwise, fit_sigmoid, sigmoid_probability
from coresvm.svc import CoreSVC


@pytest.fixture(scope="module")
def iris():
    X, y = load_iris(return_X_y=True)
    return train_test_split(X, y, test_size=0.4, random_state=0, stratify=y)


@pytest.fixture(scope="module")
def three_vs_eight():
    X, y = load_digits(return_X_y=True)
    keep = (y == 3) | (y == 8)
    return train_test_split(X[keep] / 16.0, y[keep], test_size=0.5, random_state=0, stratify=y[keep])


def test_fit_sigmoid_recovers_a_known_sigmoid():
    rng = np.random.RandomState(0)
    f = rng.uniform(-4, 4, size=20000)
    p = sigmoid_probability(f, -1.5, 0.3)
    labels = np.where(rng.uniform(size=f.size) < p, 1, -1)
    A, B = fit_sigmoid(f, labels)
    assert abs(A + 1.5) < 0.1 and abs(B - 0.3) < 0.1


def test_fit_sigmoid_on_separable_values_stays_finite():
    A, B = fit_sigmoid(np.array([-3.0, -2.0, -1.0, 1.0, 2.0, 3.0]), np.array([-1, -1, -1, 1, 1, 1]))
    assert np.isfinite(A) and np.isfinite(B) and A < 0


def test_coupling_is_exact_for_consistent_pairwise_estimates():
    p = np.array([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]])
    pairs = [(0, 1), (0, 2), (1, 2)]
    r = np.column_stack([p[:, a] / (p[:, a] + p[:, b]) for a, b in pairs])
    np.testing.assert_allclose(couple_pairwise(r, 3), p, atol=1e-10)


def test_no_predict_proba_without_probability(iris):
    X_train, _, y_train, _ = iris
    model = CoreSVC(random_state=0).fit(X_train, y_train)
    assert not hasattr(model, "predict_proba") and not hasattr(model, "predict_log_proba")


@pytest.mark.parametrize("multiclass", ["ovo", "ovr"])
def test_probabilities_sum_to_one(iris, multiclass):
    X_train, X_test, y_train, y_test = iris
    model = CoreSVC(C=10, gamma=0.5, multiclass=multiclass, probability=True, random_state=0).fit(X_train, y_train)
    proba = model.predict_proba(X_test)
    assert proba.shape == (len(X_test), 3)
    assert np.all(proba >= 0) and np.all(proba <= 1)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(model.predict_log_proba(X_test), np.log(proba))
    assert model.probA_.shape == (3,) and np.all(model.probA_ < 0)  # larger decision -> more likely
    # most argmaxes match predict (not all need to, see the next tests); accuracy stays high
    assert np.mean(model.classes_[proba.argmax(axis=1)] == model.predict(X_test)) >= 0.9
    assert np.mean(model.classes_[proba.argmax(axis=1)] == y_test) >= 0.9


def test_probabilities_are_deterministic(iris):
    X_train, X_test, y_train, _ = iris
    first = CoreSVC(C=10, gamma=0.5, probability=True, random_state=4).fit(X_train, y_train)
    second = CoreSVC(C=10, gamma=0.5, probability=True, random_state=4, n_jobs=2).fit(X_train, y_train)
    np.testing.assert_array_equal(first.predict_proba(X_test), second.predict_proba(X_test))


def test_binary_probability_threshold_is_the_sigmoid_midpoint(three_vs_eight):
    # documented: for two classes argmax(predict_proba) is f(x) > -B/A, predict is f(x) > 0
    X_train, X_test, y_train, _ = three_vs_eight
    model = CoreSVC(C=10, gamma=0.05, probability=True, random_state=0).fit(X_train, y_train)
    f = model.decision_function(X_test)
    proba = model.predict_proba(X_test)
    A, B = model.probA_[0], model.probB_[0]
    midpoint = -B / A
    clear = np.abs(f - midpoint) > 1e-9
    np.testing.assert_array_equal((proba[:, 1] > 0.5)[clear], (f > midpoint)[clear])
    np.testing.assert_array_equal(model.predict(X_test), model.classes_[(f > 0).astype(int)])


def test_brier_score_close_to_scikit_learn(three_vs_eight):
    X_train, X_test, y_train, y_test = three_vs_eight
    ours = CoreSVC(C=10, gamma=0.05, probability=True, random_state=0).fit(X_train, y_train)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn >= 1.9 deprecates SVC(probability=True)
        theirs = SVC(C=10, gamma=0.05, probability=True, random_state=0).fit(X_train, y_train)
    positive = y_test == 8
    brier_ours = brier_score_loss(positive, ours.predict_proba(X_test)[:, 1])
    brier_theirs = brier_score_loss(positive, theirs.predict_proba(X_test)[:, 1])
    assert brier_ours <= brier_theirs + 0.01, (brier_ours, brier_theirs)


def test_multiclass_brier_close_to_scikit_learn():
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X[:900] / 16.0, y[:900], test_size=0.5, random_state=0)
    ours = CoreSVC(C=10, gamma=0.05, probability=True, random_state=0).fit(X_train, y_train)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = SVC(C=10, gamma=0.05, probability=True, random_state=0).fit(X_train, y_train)
    onehot = np.eye(10)[y_test]
    brier_ours = np.mean(np.sum((ours.predict_proba(X_test) - onehot) ** 2, axis=1))
    brier_theirs = np.mean(np.sum((theirs.predict_proba(X_test) - onehot) ** 2, axis=1))
    assert brier_ours <= brier_theirs + 0.01, (brier_ours, brier_theirs)


def test_probability_needs_two_samples_per_class(iris):
    X_train, _, y_train, _ = iris
    X = np.vstack([X_train, [[10.0, 10.0, 10.0, 10.0]]])
    y = np.append(y_train, 7)
    with pytest.raises(ValueError, match="at least 2 samples"):
        CoreSVC(probability=True, random_state=0).fit(X, y)
