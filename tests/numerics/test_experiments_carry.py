"""Carrying experiment records to this code version (numerics/experiments/carry.py, ``python -m
numerics.experiments NAME --carry REV --out DIR``): the code a cell runs, compared as syntax trees, sees a
changed definition it reaches and ignores docstrings, comments, moved modules and unreached code; the
carried records pass the sweep runner's own check; a refusal writes nothing; bad input is one line, exit 2."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from numerics.experiments import __main__ as cli
from numerics.experiments import carry as C
from numerics.experiments import seed003_mqar as mq
from polyverify.sweep import check_record, code_version, record_digest

ROOT = Path(__file__).resolve().parents[2]
CELL = "numerics.experiments.seed003_mqar:cell"
RECORDS = ROOT / "docs/experiments/seed003-mqar/results.jsonl"

CELL_SRC = '''"""A cell."""
from .models import helper, SCALE
from . import report


def cell(config):
    """Run it."""
    return {"y": helper(config["x"]) * SCALE}  # a comment


def markdown(s):
    from .report import words
    return words(s)
'''
MODELS_SRC = '''SCALE = 2


def helper(x):
    return x + 1


def unused(x):
    return x - 1
'''
REPORT_SRC = '''def words(s):
    return "text"
'''


def tree(root: Path, cell=CELL_SRC, models=MODELS_SRC, report=REPORT_SRC) -> dict:
    pkg = root / "numerics" / "fake"
    pkg.mkdir(parents=True, exist_ok=True)
    for name, src in (("__init__", ""), ("cellmod", cell), ("models", models), ("report", report)):
        (pkg / f"{name}.py").write_text(src)
    return C.cell_code("numerics.fake.cellmod:cell", C.tree_reader(root))


def test_cell_code_sees_what_the_cell_runs_and_nothing_else(tmp_path):
    base = tree(tmp_path / "a")
    assert sorted(k.split(" ")[0] for k in base) == ["SCALE", "cell", "helper"]
    # docstrings, comments, an unreached function and the report module: the same code
    same = [tree(tmp_path / "b", cell=CELL_SRC.replace("Run it.", "Run it again.").replace("# a comment", "")),
            tree(tmp_path / "c", models=MODELS_SRC.replace("x - 1", "x - 2")),
            tree(tmp_path / "d", report=REPORT_SRC.replace('"text"', '"other text"'))]
    assert all(x == base for x in same)
    # a changed statement the cell reaches: a different code, named
    for name, kw in (("helper", {"models": MODELS_SRC.replace("x + 1", "x + 2")}),
                     ("SCALE", {"models": MODELS_SRC.replace("SCALE = 2", "SCALE = 3")}),
                     ("cell", {"cell": CELL_SRC.replace("* SCALE", "* SCALE * 1")})):
        other = tree(tmp_path / name, **kw)
        assert other != base and C.code_difference(base, other) == name
    # the helper moved to another module, unchanged: the same code
    pkg = tmp_path / "moved" / "numerics" / "fake"
    moved = tree(tmp_path / "moved", cell=CELL_SRC.replace("from .models import helper, SCALE",
                                                           "from .models import SCALE\nfrom .util import helper"),
                 models=MODELS_SRC.replace("def helper(x):\n    return x + 1\n", ""))
    (pkg / "util.py").write_text("def helper(x):\n    return x + 1\n")
    assert C.cell_code("numerics.fake.cellmod:cell", C.tree_reader(tmp_path / "moved")) == base != moved


def _has_commit(rev: str) -> bool:
    out = subprocess.run(["git", "cat-file", "-e", f"{rev}^{{commit}}"], cwd=ROOT, capture_output=True)
    return out.returncode == 0


@pytest.mark.skipif(not _has_commit("5954a04"), reason="the repository's history is not here")
def test_version_at_a_commit_is_the_version_its_runner_recorded():
    # the committed records made by the run on 5954a04 (no made_by) carry the code version 7092ce3299ecebdd
    rows = [json.loads(x) for x in RECORDS.read_text().splitlines()]
    made_there = {r["code_version"]["sources"] for r in rows if not r.get("made_by") and r["config"] not in mq.widths_configs()}
    assert made_there == {"7092ce3299ecebdd"}
    assert C.version_at(C.resolve_commit("5954a04"), CELL)["sources"] == "7092ce3299ecebdd"


def _fake_commit(monkeypatch, sources: str, same_code: bool):
    """Commit HEAD stands for a commit whose code version is ``sources`` and whose cell code is this tree's
    (``same_code``) or this tree's with one definition changed."""
    real = C.cell_code
    here = real(CELL, C.tree_reader())
    there = here if same_code else {**here, "helper 0123456789abcdef": 1}
    at_commit = object()
    monkeypatch.setattr(C, "version_at", lambda commit, cell, root=C.ROOT: {"package": "0.1.0", "sources": sources,
                                                                            "modules": 35})
    monkeypatch.setattr(C, "git_reader", lambda commit, root=C.ROOT: at_commit)
    monkeypatch.setattr(C, "cell_code", lambda cell, read: there if read is at_commit else real(cell, read))


def test_carry_writes_records_the_runner_reuses(tmp_path, monkeypatch, capsys):
    out = tmp_path / "mqar"
    out.mkdir()
    shutil.copy(RECORDS, out / "results.jsonl")
    _fake_commit(monkeypatch, "7092ce3299ecebdd", same_code=True)
    assert cli.main(["seed003-mqar", "--carry", "HEAD", "--out", str(out)]) == 0
    said = capsys.readouterr().out
    now = code_version(CELL)
    # the committed records this code version made itself are written beside the carried ones (the runner reuses
    # both); how many there are depends on the records, so they are counted, not assumed
    current = sum(json.loads(line)["code_version"] == now for line in RECORDS.read_text().splitlines() if line.strip())
    assert "carried 8 record(s)" in said and f"{current} already this version's" in said, said
    files = sorted((out / "cells").glob("*.json"))
    assert len(files) == 8 + current
    files = [f for f in files if "carried" in json.loads(f.read_text())]
    assert len(files) == 8
    for f in files:
        rec = json.loads(f.read_text())
        assert rec["made_by"]["sources"] == "7092ce3299ecebdd" and rec["carried"]["commit"] == C.resolve_commit("HEAD")
        assert rec["code_version"] == now and rec["digest"] == record_digest(rec)
        got, why = check_record(f, CELL, rec["id"], rec["config"], now)
        assert got is not None and why is None
    # the summary tells them apart from the records carried by hand
    rows = [json.loads(f.read_text()) for f in files]
    c = mq.carried(rows)
    assert c["verified"]["cells"] == 8 and c["by_hand"] is None


def test_carry_refuses_where_the_cell_code_changed(tmp_path, monkeypatch, capsys):
    out = tmp_path / "mqar"
    out.mkdir()
    shutil.copy(RECORDS, out / "results.jsonl")
    _fake_commit(monkeypatch, "7092ce3299ecebdd", same_code=False)
    assert cli.main(["seed003-mqar", "--carry", "HEAD", "--out", str(out)]) == 1
    said = capsys.readouterr().out
    assert "refused" in said and "(helper)" in said and "nothing written" in said
    assert not (out / "cells").exists()


def test_carry_bad_input_is_one_line_exit_2(tmp_path, capsys):
    out = tmp_path / "mqar"
    out.mkdir()
    assert cli.main(["seed003-mqar", "--carry", "HEAD", "--out", str(out)]) == 2  # no results.jsonl
    assert "holds no results.jsonl" in capsys.readouterr().err
    shutil.copy(RECORDS, out / "results.jsonl")
    for argv, words in ((["--carry", "no-such-commit-xyz"], "not a commit"), (["--carry=-x"], "not a commit"),
                        (["--carry", "HEAD", "--quick"], "--quick does not apply"),
                        (["--carry", "HEAD", "--resummarise"], "--resummarise does not apply")):
        assert cli.main(["seed003-mqar", *argv, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert words in err and len(err.strip().splitlines()) == 1
    # a record edited after it was written is refused, nothing written
    rows = RECORDS.read_text().splitlines()
    rec = json.loads(rows[0])
    rec["result"]["best_test_acc"] = 1.0
    (out / "results.jsonl").write_text("\n".join([json.dumps(rec), *rows[1:]]) + "\n")
    assert cli.main(["seed003-mqar", "--carry", "HEAD", "--out", str(out)]) == 2
    assert "do not match their digest" in capsys.readouterr().err and not (out / "cells").exists()
