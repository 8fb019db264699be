"""Smoke test of bench/bench_sparse.py: one small circuit end to end (sparse and dense forms of the
same compiled layers, both proved, their float outputs agreeing), its JSON, and its one-line errors."""
import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    sys.path.insert(0, str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location("bench_sparse", ROOT / "bench" / "bench_sparse.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_sparse_against_dense(tmp_path, capsys):
    b = _bench()
    out = tmp_path / "s.json"
    assert b.main(["--sizes", "60", "--targets", "baseconv,lsa", "--batch", "8", "--json", str(out)]) == 0
    assert "dense / sparse" in capsys.readouterr().out
    rows = json.loads(out.read_text())["rows"]
    assert [r["target"] for r in rows] == ["baseconv", "lsa"]
    for r in rows:
        assert r["proof"]["sparse_ok"] and r["proof"]["dense_ok"]
        assert r["entries_sparse"] < r["entries_dense"] and r["float64"]["rel_diff"] <= 1e-6


@pytest.mark.parametrize("args", [["--sizes", "0"], ["--sizes", "ten"], ["--targets", "mlp"], ["--batch", "0"]])
def test_bad_arguments_one_line_exit_2(args, capsys):
    assert _bench().main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
