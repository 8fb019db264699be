"""Smoke test of bench/bench_startup.py: one round of every light command (help, --list, argument
errors) beside ``import sympy``; structural checks only (exit statuses, no heavy module loaded,
the JSON), never a timing; and its one-line errors (exit 2) for bad arguments."""
import pytest

BENCH = "bench_startup.py"


def test_one_round_of_the_light_commands(bench, run_json):
    text, res = run_json(["--repeat", "1", "--only-light"])
    assert "worst CPU/base" in text and "verify.construct --help" in text
    rows = res["rows"]
    assert set(rows) == {n for n in bench.COMMANDS if not n.startswith("gd --layers 100")}
    for name, r in rows.items():
        assert r["exit"] == [r["expected_exit"]], name
        if r["light"]:
            assert not [m for m in ("networkx", "mpmath", "flint", "torch", "sympy", "numpy") if m in r["heavy"]], name
            assert r["modules"] < rows[bench.BASELINE]["modules"] / 2, name
    assert "sympy" in rows[bench.BASELINE]["heavy"]


@pytest.mark.parametrize("args,msg", [(["--repeat", "0"], "--repeat"), (["--repeat", "x"], "invalid int"),
                                      (["--json", "/nonexistent/dir/x.json"], "--json"), (["--bogus"], "unrecognized")])
def test_bad_arguments_are_one_line_exit_2(args, msg, refused):
    refused(args, msg)
