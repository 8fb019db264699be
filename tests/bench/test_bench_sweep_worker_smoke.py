"""Smoke test of bench/bench_sweep_worker.py: one short round of both settings, each worker started
with the allocator environment it names, its JSON, and its one-line errors."""
import pytest

pytest.importorskip("distributed", reason="the sweep extra (dask.distributed) is not installed")

BENCH = "bench_sweep_worker.py"


def test_both_settings_run_in_their_workers(run_json):
    text, res = run_json(["--seconds", "0.5", "--rounds", "1"])
    assert "CPU per step" in text
    env = {r["settings"]: r["MALLOC_TRIM_THRESHOLD_"] for r in res["runs"]}
    assert env == {"dask default": "65536", "sweep runner": str(2 ** 30)}
    assert all(r["steps"] >= 1 for r in res["runs"]) and res["ratio"] > 0


@pytest.mark.parametrize("args", [["--seconds", "0"], ["--seconds", "x"], ["--rounds", "0"], ["--rounds", "21"]])
def test_bad_arguments_one_line_exit_2(args, refused):
    refused(args)
