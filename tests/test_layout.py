"""The package's layout rules that a reader relies on."""

import ast
from pathlib import Path

import coresvm

PACKAGE = Path(coresvm.__file__).parent


def test_no_module_imports_another_modules_underscore_names():
    """A name shared across modules is public in the module that defines it (its interface), never reached
    into as ``from .other import _private``."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.level > 0 or (node.module or "").startswith("coresvm")):
                offenders += [f"{path.relative_to(PACKAGE)}:{node.lineno} {alias.name}" for alias in node.names
                              if alias.name.startswith("_") and not alias.name.startswith("__")]
    assert offenders == []


# PatternSearchCV is built on scikit-learn's search machinery, which has no public form: BaseSearchCV (its
# results format, refit and scoring), _fit_and_score and its error handling, and the parameter-constraint
# types.  These are the only private scikit-learn names the package may import; a new one fails the test.
SKLEARN_PRIVATE_ALLOWED = {
    "model_selection.py": {
        "sklearn.base._fit_context", "sklearn.model_selection._search.BaseSearchCV",
        "sklearn.model_selection._validation._fit_and_score",
        "sklearn.model_selection._validation._insert_error_scores",
        "sklearn.model_selection._validation._warn_or_raise_about_fit_failures",
        "sklearn.utils._param_validation.Interval", "sklearn.utils._param_validation.StrOptions",
        "sklearn.utils.validation._check_method_params", "sklearn.utils.validation._num_samples",
    },
}


def sklearn_private_imports(tree: ast.AST) -> set[str]:
    """``module.name`` of every import from scikit-learn where the module path or the name is private."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "sklearn":
            private_module = any(part.startswith("_") for part in node.module.split("."))
            found |= {f"{node.module}.{alias.name}" for alias in node.names
                      if private_module or alias.name.startswith("_")}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.split(".")[0] == "sklearn"
                      and any(part.startswith("_") for part in alias.name.split("."))}
    return found


def test_no_module_imports_private_scikit_learn_names_beyond_the_search_machinery():
    """scikit-learn's underscore names change without notice between releases; the package uses its public API
    (PatternSearchCV's base aside, listed above)."""
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = str(path.relative_to(PACKAGE))
        extra = sklearn_private_imports(ast.parse(path.read_text())) - SKLEARN_PRIVATE_ALLOWED.get(name, set())
        if extra:
            offenders[name] = sorted(extra)
    assert offenders == {}


def test_the_private_scikit_learn_import_check_finds_them():
    tree = ast.parse("from sklearn.multiclass import _ovr_decision_function\nfrom sklearn.svm import SVC\n"
                     "from sklearn.utils._param_validation import Interval\nimport sklearn.utils._testing\n")
    assert sklearn_private_imports(tree) == {"sklearn.multiclass._ovr_decision_function",
                                             "sklearn.utils._param_validation.Interval", "sklearn.utils._testing"}
