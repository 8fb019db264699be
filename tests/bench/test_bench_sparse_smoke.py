"""Smoke test of bench/bench_sparse.py: one small circuit end to end (sparse and dense forms of the
same compiled layers, both proved, their float outputs agreeing), its JSON, and its one-line errors."""
import pytest

BENCH = "bench_sparse.py"


def test_sparse_against_dense(run_json):
    text, res = run_json(["--sizes", "60", "--targets", "baseconv,lsa", "--batch", "8"])
    assert "dense / sparse" in text
    rows = res["rows"]
    assert [r["target"] for r in rows] == ["baseconv", "lsa"]
    for r in rows:
        assert r["proof"]["sparse_ok"] and r["proof"]["dense_ok"]
        assert r["entries_sparse"] < r["entries_dense"] and r["float64"]["rel_diff"] <= 1e-6


@pytest.mark.parametrize("args", [["--sizes", "0"], ["--sizes", "ten"], ["--targets", "mlp"], ["--batch", "0"]])
def test_bad_arguments_one_line_exit_2(args, refused):
    refused(args)
