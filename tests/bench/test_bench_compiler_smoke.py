"""Smoke test of bench/bench_compiler.py --scale: two tiny sizes end to end in child processes
(a few seconds), the JSON it writes (every run proved, the fitted exponent), and its one-line
errors (exit 2) for bad arguments."""
import pytest

BENCH = "bench_compiler.py"


@pytest.mark.parametrize("family", ["random", "blocks"])
def test_scale_sweep_writes_consistent_json(run_json, family):
    text, d = run_json(["--scale", "--family", family, "--sizes", "60,250", "--baseline-up-to", "60"])
    assert "fitted exponent" in text and "CPU/mlp" in text
    assert [r["gates"] for r in d["runs"]] == [60, 250] and all(r["proved"] for r in d["runs"])
    assert [r["gates"] for r in d["baseline"]] == [60] and d["baseline"][0]["target"] == "baseconv-mlp"
    for r in d["runs"]:
        assert r["metrics"]["n_gates"] == r["gates"] and r["peak_rss_mib"] >= r["rss_generated_mib"] > 0
        assert r["total_cpu"] == pytest.approx(r["compile_cpu"] + r["prove_cpu"])
    assert d["fit"]["total_cpu"] is not None


def test_blocks_family_is_placed_one_block_per_token(bench):
    import circuits as C

    g = bench.blocks(0, 600)  # 250 + 250 + 100 gates
    pl = C.placement(g)
    assert (pl.tokens, pl.channels) == (3, bench.BLOCK_INPUTS)
    assert C.metrics(g)["n_gates"] == 600
    assert {t for t, _ in pl.inputs.values()} <= {0, 1, 2}
    assert C.placement(bench.unplaced(g)) is None


@pytest.mark.parametrize("args", [["--scale", "--sizes", "1000,100"], ["--scale", "--sizes", "0"],
                                  ["--scale", "--sizes", "x"], ["--scale", "--target", "baseconv-mlp"],
                                  ["--scale", "--timeout", "0"]])
def test_bad_arguments_exit_2(args, refused):
    refused(args)


def test_pareto_frontier_every_point_proved(run_json):
    text, d = run_json(["--pareto", "--pareto-size", "6x2", "--target", "baseconv-causal"])
    front = d["frontier"]
    assert front and all(p["proved"] for p in front) and front[-1]["budget"] is None
    # a frontier: channels strictly up, layers strictly down
    assert all(p["channels"] < q["channels"] and p["layers"] > q["layers"] for p, q in zip(front, front[1:]))
    assert "PROVED" in text


@pytest.mark.parametrize("args", [["--pareto", "--pareto-size", "0x2"], ["--pareto", "--pareto-size", "6by2"],
                                  ["--pareto", "--target", "lsa"]])
def test_pareto_bad_arguments_exit_2(args, refused):
    refused(args)
