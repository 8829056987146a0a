"""benchmarks/reproduce.py: one experiment at toy size writes its results file, and the report is
rendered from that file alone (every figure in it traceable to the JSON)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def reproduce():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import reproduce as module
    finally:
        sys.path.remove(str(BENCHMARKS))
    return module


def test_cvm_scaling_at_toy_size_writes_json_and_report(reproduce, tmp_path):
    cfg = {"sizes": [400, 800], "svc_max": 800, "cap": 5.0, "n_test": 1000}
    result = reproduce.run_experiment(reproduce.BY_NAME["cvm_scaling"], cfg, tmp_path, "toy")

    assert "crashed" not in result, result.get("crashed")
    stored = json.loads((tmp_path / "cvm_scaling.json").read_text())
    assert [(r["m"], r["method"]) for r in stored["rows"]] == [
        (400, "CVM"), (400, "SVC (LIBSVM)"), (800, "CVM"), (800, "SVC (LIBSVM)")]

    meta = {"command": "toy", "profile": "toy", "date": "today", "revision": "r", "machine": "m",
            "load_average": [0.0], "versions": {"numpy": "x"}}
    report = reproduce.render_report(tmp_path, meta, tmp_path / "REPORT.md")

    assert (tmp_path / "REPORT.md").read_text() == report
    largest = stored["rows"][2]
    claim = next(line for line in report.splitlines() if "largest checkerboard" in line)
    assert f"800 points: {largest['time']:.2f} s, {largest['status']}, {largest['n_sv']} SVs" in claim
    assert any(f"**{verdict}**" in claim for verdict in reproduce.VERDICTS)
    # experiments without a results file are marked as such, not filled in
    assert report.count("Not run in this invocation.") == len(reproduce.EXPERIMENTS) - 1


def test_a_failing_fit_becomes_an_error_row(reproduce):
    def refuse():
        raise ValueError("multiclass='joint' supports solver='coreset'")

    row = reproduce.guarded(refuse)
    assert row == {"error": "ValueError: multiclass='joint' supports solver='coreset'"}
    assert reproduce.fit_cells(row)[1].startswith("error: ValueError")
