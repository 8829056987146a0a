"""Write the format-version-1 model files that tests/test_model_io.py loads (run once, kept for reference).

Run with the coresvm of commit 9b45d3b (the last one that wrote version 1), from the repository root:
``python tests/data/make_v1_models.py``.  It writes ``v1_*.csvm`` and ``v1_expected.npz`` (the evaluation
rows and each model's ``decision_function`` and ``predict`` on them) next to itself.
"""

import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from coresvm import CoreSVC, save_model
from coresvm.model_io import FORMAT_VERSION

HERE = Path(__file__).parent


def main() -> None:
    assert FORMAT_VERSION == 1, "run with the coresvm that writes format version 1"
    rng = np.random.RandomState(0)
    X = rng.randn(36, 3)
    y3 = np.argmax(X @ rng.randn(3, 3), axis=1)
    y2 = np.where(X[:, 0] * X[:, 1] > 0, 1, -1)
    X_eval = rng.randn(12, 3)
    models = {
        "binary_dense": (CoreSVC(C=10.0, gamma=0.5, class_weight={1: 2.0}, probability=True, random_state=0),
                         X, y2),
        "ovo_csr": (CoreSVC(C=5.0, gamma=0.3, decision_function_shape="ovo", random_state=0),
                    sp.csr_matrix(np.where(np.abs(X) < 0.3, 0.0, X)), np.array(["a", "b", "c"])[y3]),
        "ovr_float32": (CoreSVC(C=5.0, kernel="poly", degree=2, gamma=0.5, coef0=1.0, multiclass="ovr",
                                random_state=0), X.astype(np.float32), y3),
        "joint": (CoreSVC(C=5.0, gamma=0.3, multiclass="joint", random_state=0), X, y3),
    }
    expected = {"X_eval": X_eval}
    for name, (model, X_fit, y) in models.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(X_fit, y)
        save_model(model, HERE / f"v1_{name}.csvm")
        expected[f"{name}_decision"] = model.decision_function(X_eval)
        expected[f"{name}_predict"] = model.predict(X_eval)
    np.savez(HERE / "v1_expected.npz", **expected)


if __name__ == "__main__":
    main()
