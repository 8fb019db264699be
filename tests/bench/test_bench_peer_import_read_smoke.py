"""Smoke test of bench/bench_peer_import_read.py: the smallest zoology and icl-gd files read in this tree (twice,
values hashed and equal), its JSON, and its one-line errors."""
import pytest

BENCH = "bench_peer_import_read.py"


def test_reads_both_formats(run_json):
    text, res = run_json(["--sizes", "zoology:4x2x1,icl-gd:3x1x2", "--runs", "2"])
    assert res["values_agree"] and len(res["rows"]) == 4 and "values" in text
    assert {(r["format"], r["size"], r["entries"]) for r in res["rows"]} == {("zoology", "4x2x1", 14),
                                                                              ("icl-gd", "3x1x2", 72)}
    assert all(r["cpu_s"] >= 0 and r["peak_rss_mib"] > 0 for r in res["rows"])


@pytest.mark.parametrize("args", [["--sizes", "zoology:0x2x1"], ["--sizes", "torch:2x2x2"], ["--sizes", "icl-gd:3x1"],
                                  ["--runs", "0"], ["--runs", "x"], ["--tree", "/nonexistent"]])
def test_bad_arguments_one_line_exit_2(args, refused):
    refused(args)
