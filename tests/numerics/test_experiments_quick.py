"""Every experiment's --quick variant end to end through the sweep runner (the CI check of the
pipeline, not of the paper's numbers), the report built from it, and docs/experiments.md current.

The four quick runs share the test run's Dask cluster (``shared_cluster``, tests/numerics/conftest.py),
passed to each command as ``--scheduler``: one worker thread in this process (no nanny or worker
process to start, torch imported once), one cluster start and one set of imports instead of four
local clusters of worker processes; one experiment (seed002-ntk, the cheapest) is run a second time to
check that a rerun resumes from the finished cells.  (The worker-process path runs in CI too: the
GPU script's smoke test, tests/numerics/experiments/test_gpu_script.py, starts its own clusters.)"""
import csv
import json
from pathlib import Path

import pytest

from numerics.experiments import EXPERIMENTS
from numerics.experiments.__main__ import main
from numerics.experiments.report import build_report

ROOT = Path(__file__).resolve().parents[2]
RESUMED = "seed002-ntk"


@pytest.fixture(scope="module")
def quick_runs(tmp_path_factory, shared_cluster):
    base = tmp_path_factory.mktemp("exp")
    addr = shared_cluster.scheduler_address
    codes = {name: main([name, "--quick", "--out", str(base / name), "--scheduler", addr, "--no-progress"])
             for name in EXPERIMENTS}
    first = json.loads((base / RESUMED / "summary.json").read_text())
    resumed = main([RESUMED, "--quick", "--out", str(base / RESUMED), "--scheduler", addr, "--no-progress"])
    return base, codes, (first, resumed)


@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_quick_run_writes_everything(quick_runs, name):
    base, codes, _ = quick_runs
    out = base / name
    assert codes[name] == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["quick"] is True and s["run"]["failed"] == 0 and s["run"]["cells"] >= 2
    assert s["run"]["cpu_s"] > 0 and s["run"]["wall_s"] > 0
    assert s["criteria"] and all({"id", "text", "met"} <= set(c) for c in s["criteria"])
    for f in ("results.jsonl", "results.csv", "sweep.json", "table.csv", "figure.png"):
        assert (out / f).stat().st_size > 0, f
    rows = list(csv.DictReader((out / "table.csv").open()))
    assert rows
    assert (out / "figure.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_rerun_resumes(quick_runs):
    """Rerunning a finished grid runs nothing: every cell is read back, the same summary numbers."""
    base, _, (first, code) = quick_runs
    assert code == 0
    s = json.loads((base / RESUMED / "summary.json").read_text())
    assert s["run"]["resumed"] == s["run"]["cells"] == first["run"]["cells"]
    assert s["criteria"] == first["criteria"]


def test_report_from_quick_runs(quick_runs, tmp_path):
    base, _, _ = quick_runs
    md = tmp_path / "experiments.md"
    assert main(["report", "--results", str(base), "--out", str(md)]) == 0
    text = md.read_text()
    for name in EXPERIMENTS:
        assert f"`{name}`" in text
    assert "quick run only" in text
    # no GPU results under this folder: every experiment says so
    assert text.count("not run on a GPU") >= len(EXPERIMENTS)
    # a number from a summary appears in the report: the seed 004 ConstRR at column 5
    s = json.loads((base / "seed004-table1" / "summary.json").read_text())
    from numerics.experiments.common import fmt

    assert fmt(s["baselines"]["5"]["constrr"]["adjusted"]) in text


def test_report_without_results_says_not_run(tmp_path):
    text = build_report(tmp_path)
    assert text.count("not run") >= len(EXPERIMENTS)


def test_docs_experiments_is_current():
    results = ROOT / "docs" / "experiments"
    doc = ROOT / "docs" / "experiments.md"
    assert doc.exists(), "docs/experiments.md is missing: run python -m numerics.experiments report"
    assert doc.read_text() == build_report(results, rel_to=doc.parent), \
        "docs/experiments.md is stale: run python -m numerics.experiments report"
