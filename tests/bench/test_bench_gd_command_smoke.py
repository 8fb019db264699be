"""Smoke test of bench/bench_gd_command.py: one tiny size end to end (the whole gd command, its
proof alone and the start-up, each in its own interpreter), the JSON and markdown it writes and
their ratios, and its one-line errors (exit 2) for bad arguments."""
import json

import pytest

BENCH = "bench_gd_command.py"


def test_one_size_end_to_end(bench, tmp_path, capsys):
    out = tmp_path / "res"
    rc = bench.main(["--sizes", "8x2", "--layers", "4", "--out", str(out)])
    res = json.loads((out / "results.json").read_text())
    md = (out / "results.md").read_text()
    assert rc == (0 if res["all_meet_target"] else 1)
    (row,) = res["rows"]
    assert row["size"] == "8x2" and len(row["rounds"]) == 1
    for key in ("proof_cpu", "command_cpu", "startup_cpu", "proof_wall", "command_wall"):
        assert row[key] > 0, key
    assert row["cpu_ratio"] == pytest.approx(row["command_cpu"] / row["proof_cpu"])
    assert row["cpu_ratio_after_startup"] == pytest.approx((row["command_cpu"] - row["startup_cpu"]) / row["proof_cpu"])
    assert row["meets_target"] == (row["command_cpu"] <= bench.TARGET * row["proof_cpu"] + row["startup_cpu"])
    # the command ran its proof (PROVED) and its float run: the reported proof time is the command's own
    assert row["command_proof_seconds_reported"] > 0 and row["command_run_seconds"] > 0
    line = next(x for x in md.splitlines() if x.startswith("| 8x2 |"))
    assert f"| {row['cpu_ratio']:.2f} |" in line and ("met" if row["meets_target"] else "MISSED") in line
    assert "8x2" in capsys.readouterr().out


@pytest.mark.parametrize("args,msg", [(["--sizes", "3x"], "is not NxD"), (["--sizes", "2x3"], "1 <= D <= N"),
                                      (["--sizes", "4x2,4x2"], "repeated"), (["--arch", "nope"], "--arch 'nope'"),
                                      (["--layers", "5"], "not realisable"), (["--dtype", "float8"], "float8"),
                                      (["--repeat", "0"], "--repeat"), (["--batch", "0"], "--batch"),
                                      (["--bogus"], "unrecognized")])
def test_bad_arguments_are_one_line_exit_2(args, msg, refused):
    refused(args, msg)


def test_out_that_is_a_file_is_refused(tmp_path, refused):
    f = tmp_path / "file"
    f.write_text("x")
    refused(["--sizes", "4x2", "--out", str(f)], "--out")
