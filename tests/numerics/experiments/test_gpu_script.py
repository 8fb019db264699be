"""numerics/experiments/gpu.sh: the CI smoke test (``--device cpu --quick``: tiny sizes through the GPU
grids' code path, the global budget and the per-cell step planning), its refusals, and the budget
share that the cells take (``common.cell_budget``)."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from numerics.experiments import common, load

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "numerics" / "experiments" / "gpu.sh"


def run(*args, env=None, timeout=240):
    e = {**os.environ, "PYTHON": sys.executable, **(env or {})}
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, env=e,
                          cwd=ROOT)


def test_smoke_on_cpu_writes_both_grids_marked_with_the_device(tmp_path):
    out = tmp_path / "gpu"
    r = run("--device", "cpu", "--quick", "--out", str(out), "--budget", "90")
    assert r.returncode == 0, r.stdout + r.stderr
    for name in ("seed003-mqar", "seed000-table7"):
        s = json.loads((out / name / "summary.json").read_text())
        assert s["grid"] == "gpu" and s["quick"] is True and s["run"]["failed"] == 0
        assert s["device"] == {"device": "cpu"} == s["run"]["device"] and s["run"]["budget_s"] == 90
        assert (out / name / "figure.png").stat().st_size > 0 and (out / f"{name}.log").is_file()
        rows = [json.loads(line) for line in (out / name / "results.jsonl").read_text().splitlines()]
        assert len(rows) == len(load(name).gpu_configs(True)) and all(x["status"] == "ok" for x in rows)
        for x in rows:
            plan = x["result"]["plan"]
            # each cell planned its steps within its share of the budget, at most its configured steps
            assert 0 < plan["budget_s"] <= 90 and 1 <= plan["steps_planned"] <= plan["steps_max"]
            assert plan["step_s"] > 0
    assert "gpu.sh: done in" in r.stdout and "best acc" in r.stdout and "final test MSE" in r.stdout


@pytest.mark.parametrize("args,msg", [
    (["--device", "cpu"], "only the --quick smoke test"),
    (["--device", "tpu", "--quick"], "--device must be"),
    (["--budget", "5x"], "whole number"),
    (["--budget", "10"], r"\[30, 3600\]"),
    (["--frobnicate"], "unknown argument"),
])
def test_bad_arguments_one_error_line_exit_2(tmp_path, args, msg):
    import re

    r = run(*args, "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and re.search(msg, lines[0])
    assert not (tmp_path / "o").exists()


def test_cuda_without_a_card_is_refused_before_anything_runs(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA card: the refusal is for machines without one")
    r = run("--device", "cuda", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "sees no CUDA device" in r.stderr and not (tmp_path / "o").exists()


def test_cell_budget_is_a_fair_share_of_the_time_left(monkeypatch):
    monkeypatch.delenv(common.DEADLINE_ENV, raising=False)
    assert common.cell_budget({"order": 0, "cells": 10}) is None
    now = time.time()
    monkeypatch.setattr(common.time, "time", lambda: now)
    monkeypatch.setenv(common.DEADLINE_ENV, repr(now + 100 + common.MARGIN_S))
    monkeypatch.setenv(common.WORKERS_ENV, "4")
    # 10 cells on 4 workers: the first start in a round of 3 (ceil(10 / 4)), the last ones alone
    assert common.cell_budget({"order": 0, "cells": 10}) == pytest.approx(100 / 3)
    assert common.cell_budget({"order": 8, "cells": 10}) == pytest.approx(100)
    monkeypatch.setenv(common.DEADLINE_ENV, repr(now + common.MARGIN_S + 1))
    with pytest.raises(RuntimeError, match="deadline"):
        common.cell_budget({"order": 0, "cells": 10})


def test_grids_name_their_device():
    mq = load("seed003-mqar")
    cpu = common.grid_configs(mq, True)
    assert cpu == mq.configs(True) and all("device" not in c for c in cpu)  # the committed CPU cells' ids kept
    assert all(c["device"] == "cuda" for c in common.grid_configs(mq, False, "gpu", "cuda"))
    g = mq.gpu_configs(False)
    # the paper's widths and N = 64..256, both mixers, vocabulary 8,192, alpha 0.1 (Zoology App. F.1)
    assert {c["d"] for c in g} == {64, 128, 256, 512} and {c["N"] for c in g} == {64, 128}
    assert {c["mixer"] for c in g} == {"attention", "baseconv"} and {c["vocab"] for c in g} == {8192}
    assert {c["power_a"] for c in g} == {0.1} and [c["order"] for c in g] == list(range(len(g)))
    t7 = load("seed000-table7").gpu_configs(False)
    assert {c["batch"] for c in t7} == {1024} and {c["k"] for c in t7 if c["recipe"] == "paper"} == {1, 2, 3, 4}
    with pytest.raises(ValueError, match="no GPU grid"):
        common.grid_configs(load("seed002-ntk"), True, "gpu")
