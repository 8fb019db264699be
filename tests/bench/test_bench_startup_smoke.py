"""Smoke test of bench/bench_startup.py: one round of every light command (help, --list, argument
errors) beside ``import sympy``; structural checks only (exit statuses, no heavy module loaded,
the JSON), never a timing; and its one-line errors (exit 2) for bad arguments."""
import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_startup", ROOT / "bench" / "bench_startup.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_one_round_of_the_light_commands(tmp_path, capsys):
    b = _bench()
    out = tmp_path / "s.json"
    assert b.main(["--repeat", "1", "--only-light", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "worst CPU/base" in text and "verify.construct --help" in text
    res = json.loads(out.read_text())
    rows = res["rows"]
    assert set(rows) == {n for n in b.COMMANDS if not n.startswith("gd --layers 100")}
    for name, r in rows.items():
        assert r["exit"] == [r["expected_exit"]], name
        if r["light"]:
            assert not [m for m in ("networkx", "mpmath", "flint", "torch", "sympy", "numpy") if m in r["heavy"]], name
            assert r["modules"] < rows[b.BASELINE]["modules"] / 2, name
    assert "sympy" in rows[b.BASELINE]["heavy"]


@pytest.mark.parametrize("args,msg", [(["--repeat", "0"], "--repeat"), (["--repeat", "x"], "invalid int"),
                                      (["--json", "/nonexistent/dir/x.json"], "--json"), (["--bogus"], "unrecognized")])
def test_bad_arguments_are_one_line_exit_2(args, msg, capsys):
    assert _bench().main(args) == 2
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err.count("\n") == 1 and cap.err.startswith("error: ") and msg in cap.err, cap.err
