"""Smoke test of bench/bench_construction.py: a tiny configuration end to end (a few seconds),
the JSON it writes, the FLOP counts, and its one-line errors (exit 2) for bad arguments."""
import pytest

BENCH = "bench_construction.py"


def test_tiny_run_writes_consistent_json(bench, run_json, tmp_path):
    md = tmp_path / "b.md"
    text, d = run_json(["--batches", "8", "--layers", "4", "--repeats", "2", "--gemm-n", "64",
                        "--dtypes", "float32,float64", "--threads", "0", "--error-problems", "4", "--md", str(md)])
    assert "CPU/sample" in text and "matmul peak 64^3" in text and "target 6x" in text
    assert d["anchor"] == bench.GD and d["archs"] == ["baseconv", "lsa"]
    assert [(r["arch"], r["dtype"], r["batch"]) for r in d["results"]] == [
        ("gd-baseconv", "float32", 8), ("gd-baseconv", "float64", 8), ("gd-lsa", "float32", 8), ("gd-lsa", "float64", 8)]
    table = md.read_text()
    for r in d["results"]:
        impl = r["impl"]
        assert set(impl) == set(bench.IMPLS)  # the gd command's run (the entry point) for both constructions
        # the algorithm's count is the GD steps' (k (4ND + N + 2D)), the same for every implementation
        k = r["steps"]
        assert r["algorithm_flops_per_sample"] == k * (4 * 20 * 5 + 20 + 2 * 5)
        assert impl[bench.GD]["performed_flops_per_sample"] == r["algorithm_flops_per_sample"]
        # the construction performs less than the equal-work plain torch layer, which performs less than the dense one
        mine = impl[bench.FORWARD]["performed_flops_per_sample"]
        assert mine < impl[bench.LIVE]["performed_flops_per_sample"] < impl[bench.DENSE]["performed_flops_per_sample"]
        assert impl[bench.GD]["cpu_vs_plain_gd"] in (None, pytest.approx(1.0))
        # every implementation computes the same GD iterate: errors at roundoff of the dtype
        tol = 1e-3 if r["dtype"] == "float32" else 1e-11
        for name, v in impl.items():
            assert v["max_abs_error_vs_exact_gd"] <= tol, name
            assert v["wall_per_sample_s"] > 0 and v["cpu_per_sample_s"] >= 0 and len(v["wall_rounds_s"]) == 2
            assert 0 < v["fraction_of_peak_algorithm"] and 0 < v["fraction_of_peak_performed"]
            assert f"| {name} |" in table
        assert r["matmul_peak_gflops_median"] > 0


def test_plan_flops_counts_channel_classes(bench):
    import torch

    from constructions.gd_baseconv import gd_baseconv
    from numerics.backends import Backend

    con = gd_baseconv(6, 3)
    be = Backend("torch", "float64")
    for L in con.layers(1):
        T, C = L.shape
        P = be.cast_layer(L)
        total, cl = bench.plan_flops(L, P)
        assert cl["scaling"] + cl["sum"] + cl["dense"] + cl["zero"] == C and cl["live"] <= C
        conv = T * cl["scaling"] + T * cl["sum"] + 2 * T * T * cl["dense"]  # non-causal
        plan = P.__dict__["_plan"]
        k, proj = cl["live"], plan.flops()["projections"]
        assert proj <= 2 * T * k * (len(plan.Rg) + len(plan.Ri) + C)  # selections are gathers, no products
        assert total == proj + conv + T * k + T * k * (cl["bias_matrices_added"] - (plan.bo is not None)) \
            + T * C * (plan.bo is not None)
        live = bench.LiveTorchBaseConv(L, plan, torch.float64, "cpu").flops()  # equal work, dense blocks
        assert total <= live <= L.flops() + 2 * T * C * C


@pytest.mark.parametrize("args,msg", [
    (["--batches", "0"], "--batches"),
    (["--batches", "x"], "--batches"),
    (["--dtypes", "float8"], "unknown dtype"),
    (["--repeats", "0"], "--repeats"),
    (["--layers", "5"], "error:"),
    (["--archs", "mamba"], "--archs"),
    (["--error-problems", "0"], "--error-problems"),
    (["--json", "/"], "--json"),
    (["--device", "tpu"], "--device"),
])
def test_bad_arguments_one_line_exit_2(args, msg, refused):
    refused(args, msg)
