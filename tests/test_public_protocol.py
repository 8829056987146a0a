"""The search, the cascade and the command line use CoreSVC through public names only (issue 28, item 3).

``model_selection.py``, ``distributed.py`` and ``cli/*.py`` read no ``_name`` attribute of an object another
module defines (a warm start is handed over as a :class:`coresvm.WarmStart`), and no module of the package
imports another coresvm module's underscore names.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[1] / "src" / "coresvm"
CHECKED = [SOURCE / "model_selection.py", SOURCE / "distributed.py", SOURCE / "warm_start.py",
           *sorted((SOURCE / "cli").glob("*.py"))]
# scikit-learn's contract with subclasses of BaseSearchCV, read as BaseSearchCV.fit reads them: its parameter
# constraints, extended by a subclass, and the dict of a multimetric scorer.
SKLEARN_SUBCLASS_CONTRACT = {("BaseSearchCV", "_parameter_constraints"), ("scorers", "_scorers")}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _defined_names(tree: ast.Module) -> set[str]:
    """Underscore names the module defines itself: functions, classes, variables, class attributes and the
    attributes its methods set on ``self`` (setting one on another object is an access like reading it)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
              and _base_name(node.value) in ("self", "cls")):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return {name for name in names if _private(name)}


def _base_name(node: ast.expr) -> str:
    return node.id if isinstance(node, ast.Name) else ast.unparse(node)


def _foreign_private_accesses(path: Path) -> list[str]:
    """``obj._name`` (also ``getattr(obj, "_name")`` and friends) where the module does not define ``_name``
    and ``obj`` is not ``self`` or ``cls`` (an object of the module's own classes, inherited members too)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    own = _defined_names(tree)
    found = []

    def check(base: ast.expr, attr: str, line: int) -> None:
        name = _base_name(base)
        if (_private(attr) and attr not in own and name not in ("self", "cls")
                and (name, attr) not in SKLEARN_SUBCLASS_CONTRACT):
            found.append(f"{path.name}:{line}: {name}.{attr}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            check(node.value, node.attr, node.lineno)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "setattr", "hasattr", "delattr") and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
            check(node.args[0], node.args[1].value, node.lineno)
    return found


@pytest.mark.parametrize("path", CHECKED, ids=lambda path: str(path.relative_to(SOURCE)))
def test_no_private_member_of_another_modules_objects_is_used(path):
    assert _foreign_private_accesses(path) == []


def test_the_check_finds_private_accesses(tmp_path):
    """The check itself: private members of an estimator, read, set or by getattr, are found; an attribute the
    module sets on its own objects is its own."""
    probe = tmp_path / "probe.py"
    probe.write_text("def f(model):\n    model._kernel_rows = None\n    return getattr(model, '_moved_to_rows')\n"
                     "class A:\n    def g(self, other):\n        self._rows = 1\n        return other._rows\n")
    assert _foreign_private_accesses(probe) == ["probe.py:2: model._kernel_rows", "probe.py:3: model._moved_to_rows"]
    probe.write_text("def f(model):\n    return model._warm_C, hasattr(model, '_warm_rows'), model.__dict__\n")
    assert _foreign_private_accesses(probe) == ["probe.py:2: model._warm_C", "probe.py:2: model._warm_rows"]


def test_no_module_imports_another_modules_private_names_in_the_checked_files():
    for path in [*CHECKED, SOURCE / "svc.py", SOURCE / "__init__.py"]:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.level > 0 or (node.module or "").startswith("coresvm")):
                private = [alias.name for alias in node.names if _private(alias.name)]
                assert not private, f"{path.relative_to(SOURCE)} imports {private} from {node.module}"
