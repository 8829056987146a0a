"""The method table (solvers/methods.py) is the one list of solvers: CoreSVC accepts exactly its names and
reads each method's settings from it."""

import re
from pathlib import Path

import numpy as np
import pytest

from coresvm import CoreOneClassSVM, CoreSVC
from coresvm.solvers.engine import SECOND_VERTEX_RULES, STEP_RULES
from coresvm.solvers.geometric import BALL_RULES, STOPPING_RULES
from coresvm.solvers.methods import (
    BALL,
    CORE_SET,
    ENGINE,
    METHODS,
    OTHER_SOLVES,
    SECOND_VERTEX_METHODS,
    method_table_markdown,
    selection_table_markdown,
)

PAPERS = ("Tsang et al. 2005", "Tsang et al. 2007", "Frandi et al. 2013", "Frandi, Nanculef and Suykens 2015",
          "Strack 2013", "Nandan et al. 2014")


def documented_solvers(estimator) -> set[str]:
    """The ``solver : {...}`` choices of an estimator's docstring."""
    match = re.search(r"solver : \{([^}]*)\}", estimator.__doc__)
    return set(re.findall(r"'(\w+)'", match.group(1)))


def accepted(name: str) -> bool:
    try:
        CoreSVC(solver=name).check_params()
    except ValueError as error:
        assert "solver must be one of" in str(error)
        return False
    return True


def test_coresvc_accepts_exactly_the_table():
    assert documented_solvers(CoreSVC) == set(METHODS)
    for name in METHODS:
        assert accepted(name), name
    for name in ("smo", "CVM", "aesvm-checkpoint", "mdm", "dense", ""):
        assert not accepted(name), name


def test_one_class_solvers_are_in_the_table():
    names = documented_solvers(CoreOneClassSVM)
    assert names and names <= set(METHODS)
    for name in names:
        CoreOneClassSVM(solver=name)._check_params()


def test_every_part_is_a_code_the_loops_know():
    for name, entry in METHODS.items():
        assert entry.name == name
        assert entry.family in (ENGINE, CORE_SET, BALL)
        if entry.family == ENGINE:
            assert entry.step_rule in STEP_RULES
        elif entry.family == BALL:
            assert entry.step_rule in BALL_RULES
            assert entry.ball_stopping in STOPPING_RULES
        else:
            assert entry.step_rule in STEP_RULES
        assert entry.second_vertex in SECOND_VERTEX_RULES
    assert set(SECOND_VERTEX_METHODS) == set(SECOND_VERTEX_RULES)


def test_every_method_names_its_paper():
    for entry in (*METHODS.values(), *OTHER_SOLVES.values()):
        assert any(paper in entry.paper for paper in PAPERS), entry.name
        assert re.search(r"(sec\.|Alg\.|eq\.)", entry.paper), entry.name


@pytest.mark.parametrize("name", sorted(METHODS))
def test_solver_options_follow_the_table(name):
    entry = METHODS[name]
    options = CoreSVC(solver=name).solver_options(1000, 0, np.inf)
    assert options.core_set == (entry.family == CORE_SET)
    assert options.ball_rule == (entry.step_rule if entry.family == BALL else "")
    assert options.second_vertex == entry.second_vertex
    assert options.radius_test == entry.radius_test
    if entry.family == CORE_SET:
        assert (options.n_candidates, options.max_add, options.growth) == (entry.n_candidates, entry.max_add,
                                                                           entry.growth)
    if entry.family == BALL:
        assert (options.draws, options.probe, options.stopping) == (entry.draws, entry.probe, entry.ball_stopping)
    if entry.family == ENGINE:
        assert options.step_rule == name


def test_markdown_has_one_row_per_method():
    header, _, *rows = method_table_markdown().splitlines()
    cells = [re.split(r"(?<!\\)\|", row)[1:-1] for row in rows]  # a '|' inside a cell must be escaped
    assert all(len(row) == len(header.split("|")[1:-1]) for row in cells)
    assert [row[0].strip().strip("`") for row in cells] == [*METHODS, *OTHER_SOLVES]


def marked_section(text: str, name: str) -> str:
    match = re.search(rf"<!-- {name}:start -->\n(.*?)\n<!-- {name}:end -->", text, flags=re.DOTALL)
    assert match, name
    return match.group(1)


def test_architecture_page_shows_the_generated_tables():
    """docs/architecture.md carries the tables the module generates (regenerate it when this fails)."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert marked_section(page, "method-table") == method_table_markdown()
    assert marked_section(page, "selection-table") == selection_table_markdown()
    index = (Path(__file__).resolve().parents[1] / "docs" / "index.rst").read_text(encoding="utf-8")
    assert re.search(r"^   architecture$", index, flags=re.MULTILINE)
