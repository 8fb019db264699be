"""Smoke test of bench/bench_construction.py: a tiny configuration end to end (a few seconds),
the JSON it writes, the FLOP counts, and its one-line errors (exit 2) for bad arguments."""
import pytest

BENCH = "bench_construction.py"


def test_tiny_run_writes_consistent_json(bench, run_json):
    text, d = run_json(["--batches", "8", "--layers", "4", "--repeats", "1", "--gemm-n", "64",
                        "--dtypes", "float32,float64", "--threads", "0"])
    assert "wall/sample" in text and "CPU/sample" in text and "GEMM peak 64^3" in text
    assert d["layers"] == 4 and d["baseline"] == bench.BASE
    assert [(r["dtype"], r["batch"]) for r in d["results"]] == [("float32", 8), ("float64", 8)]
    for r in d["results"]:
        tol = 1e-4 if r["dtype"] == "float32" else 1e-10
        assert all(v <= tol * max(1.0, r["output_max_abs"]) for v in r["max_abs_diff_vs_construction"].values())
        impl = r["impl"]
        assert set(impl) == {bench.CONSTR, bench.CONSTR_ALL, bench.CONSTR_FFT, bench.BASE, bench.BASE_PERCALL,
                             bench.BASE_SPARSE, bench.GEMM_SAME}
        # the sparse baseline does the projections' nonzero work only
        assert impl[bench.BASE_SPARSE]["useful_flops_per_sample"] < impl[bench.BASE]["useful_flops_per_sample"]
        nominal = r["nominal_flops_per_sample"]
        # the planned path does less than the dense formula; the per-call filter FFT costs a little more
        assert impl[bench.CONSTR]["useful_flops_per_sample"] < nominal
        assert impl[bench.BASE_PERCALL]["useful_flops_per_sample"] > impl[bench.BASE]["useful_flops_per_sample"]
        assert impl[bench.BASE]["speedup_vs_baseline"] == pytest.approx(1.0)
        for v in impl.values():
            assert v["wall_per_sample_s"] > 0 and v["cpu_per_sample_s"] >= 0
            assert len(v["wall_rounds_s"]) == 1 and v["useful_gflops"] > 0
        assert r["gemm_peak_gflops_median"] > 0


def test_plan_flops_counts_channel_classes(bench):
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
        before = bench.AllChannels(P).flops()  # the plan before LivePlan: every channel, dense projections
        assert total <= before <= L.flops()


@pytest.mark.parametrize("args,msg", [
    (["--batches", "0"], "--batches"),
    (["--batches", "x"], "--batches"),
    (["--dtypes", "float8"], "unknown dtype"),
    (["--repeats", "0"], "--repeats"),
    (["--layers", "5"], "error:"),
    (["--device", "tpu"], "--device"),
])
def test_bad_arguments_one_line_exit_2(args, msg, refused):
    refused(args, msg)
