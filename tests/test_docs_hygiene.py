"""The README and the documentation are written for users: no lab notes, and the README's code runs.

- No "session N", no commit hashes in prose and no "seed 00N" paper numbers in README.md or
  docs/ (benchmarks/results/ keeps the lab notes, with revisions, and is not checked).
- Every ```python block of the README runs, in order, in one namespace (on small synthetic data).
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
SKIP_DIRS = {"_build", "_generated", "auto_examples", "gen_modules"}

SESSION = re.compile(r"\bsessions?\s+\d+", re.IGNORECASE)
SEED = re.compile(r"\bseeds?\s+00\d", re.IGNORECASE)
# 7-40 hex digits with at least one digit and one letter a-f, as a word of its own: a commit hash.
HASH = re.compile(r"(?<![\w./#-])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w-])")


def _documents() -> list[Path]:
    files = [README]
    for path in sorted(DOCS.rglob("*")):
        if path.suffix in {".md", ".rst", ".txt", ".py"} and not SKIP_DIRS.intersection(path.relative_to(DOCS).parts):
            files.append(path)
    return files


def _prose(text: str) -> str:
    """The text without URLs (a DOI or a link may hold hex-looking words)."""
    return re.sub(r"(https?://|doi:)\S+", "", text)


@pytest.mark.parametrize("path", _documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_lab_notes_in_user_documentation(path):
    problems = []
    for number, line in enumerate(_prose(path.read_text(encoding="utf-8")).splitlines(), 1):
        for name, pattern in (("session", SESSION), ("paper seed number", SEED), ("commit hash", HASH)):
            for match in pattern.finditer(line):
                problems.append(f"{path.relative_to(ROOT)}:{number}: {name} {match.group(0)!r}")
    assert not problems, "\n".join(problems)


def test_the_hygiene_patterns_catch_what_they_should():
    assert SESSION.search("measured in session 15") and SEED.search("(seed 004, Alg. 2)")
    assert HASH.search("code of commit 07d2a8c, and") and HASH.search("ab87669 (final)")
    for fine in ("gamma 0.125", "C = 4096", "1e-3", "float64", "deadbeef-cafe", "2026-11-22", "0x7f3a9c2"):
        assert not HASH.search(fine), fine


def _readme_python_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", README.read_text(encoding="utf-8"), flags=re.DOTALL | re.MULTILINE)


def test_readme_has_python_examples():
    assert len(_readme_python_blocks()) >= 1


def test_readme_python_blocks_run(tmp_path, monkeypatch):
    """Every ```python block of the README runs as written (in a temporary directory)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    namespace: dict = {"__name__": "__readme__"}
    start = time.perf_counter()
    for number, block in enumerate(_readme_python_blocks(), 1):
        code = compile(block, f"README.md python block {number}", "exec")
        exec(code, namespace)  # noqa: S102 - the README's own examples
    elapsed = time.perf_counter() - start
    # Small synthetic data: seconds, not minutes (generous for a loaded CI machine and a cold Numba cache).
    assert elapsed < float(os.environ.get("CORESVM_README_MAX_SECONDS", "120")), elapsed
