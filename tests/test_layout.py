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
