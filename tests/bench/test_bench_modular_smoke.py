"""Smoke test of bench/bench_modular.py: the smallest gd-baseconv end to end (the current modular forward against
the baseline commit's, both layer sets, outputs equal), its JSON, and its one-line errors."""
import importlib.util
import subprocess
from pathlib import Path

import pytest

BENCH = "bench_modular.py"
ROOT = Path(__file__).resolve().parents[2]


def _has_baseline() -> bool:
    spec = importlib.util.spec_from_file_location("bench_modular_for_skip", ROOT / "bench" / BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    commit = mod.BASELINE
    return subprocess.run(["git", "cat-file", "-e", f"{commit}:verify/prover/modular.py"], cwd=ROOT,
                          capture_output=True).returncode == 0


@pytest.mark.skipif(not _has_baseline(), reason="the baseline commit's modular.py is not in this checkout's history")
def test_forward_against_the_baseline(run_json):
    text, res = run_json(["--sizes", "4x2", "--reps", "1", "--batch", "2"])
    assert "CPU ratio" in text
    rows = res["rows"]
    assert [r["layers"] for r in rows] == ["construction", "dense (learned-like)"]
    assert all(r["equal"] and r["batch"] == 2 and r["size"] == "4x2" for r in rows)
    assert res["meta"]["baseline_commit"] and res["meta"]["prime"].bit_length() == 61


@pytest.mark.parametrize("args", [["--sizes", "0x2"], ["--sizes", "ten"], ["--batch", "0"], ["--reps", "x"]])
def test_bad_arguments_one_line_exit_2(args, refused):
    refused(args)
