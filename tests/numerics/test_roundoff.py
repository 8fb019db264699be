"""Tests for the roundoff sweep (numerics.roundoff), the layer-level reference and the plots."""
import json
from fractions import Fraction

import numpy as np
import pytest

from constructions.catalogue import gd_architectures
from numerics import roundoff
from numerics.backends import Backend, cuda_available, cupy_available
from numerics.layer_reference import exact_forward, layer_level, mp_layer, stack_labels
from numerics.problems import sample_ls
from numerics.reference import from_mpfr_array, gd_reference
from numerics.runner import run_construction

N, D = 6, 3
TINY = ["--n", str(N), "--d", str(D), "--batch", "4", "--quiet"]


def _vars(be: Backend, batch=4, sigma=1.0, seed=0):
    P = sample_ls(batch, N, D, sigma=sigma, seed=seed)
    q = np.random.default_rng(seed + 1).standard_normal((batch, D))
    return {"A": be.round_input(P.A), "b": be.round_input(P.b), "x": be.round_input(P.x0), "q": be.round_input(q)}


def _is_png(path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(8) == b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------ the CLI

def test_cli_tiny_sweep_writes_json_and_png(tmp_path, capsys):
    rc = roundoff.main(["baseconv", "--layers", "4,7", "--dtypes", "float64,float32", "--backend", "numpy",
                        "--layer-ref", "1", "--layer-ref-layers", "7", "--out", str(tmp_path)] + TINY)
    assert rc == 0
    rep = json.loads((tmp_path / "roundoff.json").read_text())
    assert [r["dtype"] for r in rep["runs"]] == ["float64", "float32"]
    for r in rep["runs"]:
        assert r["first_nonfinite_layer"] is None
        per = r["per_step"]
        assert per["depth"] == [1, 4, 7]  # depth 1 + 3k for k = 0, 1, 2
        assert [c["layers"] for c in r["checkpoints"]] == [4, 7]
        assert all(c["prediction_mse"] is not None for c in r["checkpoints"])
        assert per["data_deviation"] == {"A": [0.0, 0.0, 0.0], "b": [0.0, 0.0, 0.0]}
    f64, f32 = (r["per_step"] for r in rep["runs"])
    assert max(f64["mse"][1:]) < 1e-28
    assert 1e-20 < max(f32["mse"][1:]) < 1e-10
    assert 0 < f32["bits_mean"][2] < 8
    assert f32["overhead"][2] == pytest.approx(f32["mse"][2] / f32["plain_mse"][2])
    assert len(rep["layer_level"]) == 2 and len(rep["layer_level"][0]["layers"]) == 7
    pngs = sorted(p.name for p in tmp_path.glob("*.png"))
    assert pngs == ["layers_numpy_direct_kappa5_sigma1.png", "mse_numpy_direct_kappa5_sigma1.png"]
    assert all(_is_png(tmp_path / p) for p in pngs)
    assert "report written" in capsys.readouterr().out


def test_cli_reports_the_first_nonfinite_layer(tmp_path, capsys):
    """float16 with targets of scale sigma = 3000: the inputs are finite (|b| < 65504),
    but s2 * a overflows in BaseConv layer 2 (stack layer index 1) for one problem."""
    argv = ["baseconv", "--layers", "7", "--dtypes", "float16", "--backend", "numpy", "--sigma", "3000",
            "--layer-ref", "0", "--out", str(tmp_path)] + TINY
    assert roundoff.main(argv) == 0
    out = capsys.readouterr().out
    assert "first non-finite value in the output of layer index 1 (layer 2 of 7" in out
    rec = json.loads((tmp_path / "roundoff.json").read_text())["runs"][0]
    assert rec["first_nonfinite_layer"] == 1
    assert rec["first_nonfinite"]["region"] == "s2" and rec["first_nonfinite"]["value"] in ("-inf", "inf")
    assert rec["per_step"]["mse"][1] is None  # no MSE for a run that overflowed
    # independently: the inputs are finite, layer 0's output is, layer 1's is not
    con = gd_architectures()["baseconv"].build(N, D)
    be = Backend("numpy", "float16")
    v = _vars(be, sigma=3000.0)
    assert all(np.all(np.isfinite(t)) for t in v.values())
    L0, L1 = (be.cast_layer(L) for L in con.body[:2])
    with np.errstate(over="ignore", invalid="ignore"):
        S1 = L0.forward(be.asarray(con.input_state(v)))
        assert np.all(np.isfinite(S1)) and not np.all(np.isfinite(L1.forward(S1)))
    assert run_construction(con, v, 2, be).first_nonfinite_layer == 1


@pytest.mark.parametrize("argv,msg", [
    (["transformer", "--layers", "4"], "unknown construction 'transformer'"),
    (["baseconv", "--layers", "5"], "not realisable"),
    (["baseconv", "--layers", "four"], "--layers"),
    (["baseconv"], "--layers"),
    (["lsa", "--layers", "4", "--dtypes", "float8"], "unknown dtype 'float8'"),
    (["lsa", "--layers", "4", "--backend", "jax"], "unknown backend 'jax'"),
    (["lsa", "--layers", "4", "--backend", "numpy", "--dtypes", "bfloat16"], "bfloat16 needs the torch backend"),
    (["elsa", "--layers", "4", "--conv", "winograd"], "unknown convolution method"),
    (["elsa", "--layers", "4", "--kappa", "0.5"], "--kappa must be >= 1"),
    (["elsa", "--layers", "4", "--sigma", "-1"], "--sigma must be > 0"),
    (["elsa", "--layers", "4", "--sigma", "nan"], "must be finite"),
    (["baseconv", "--layers", "4", "--lam", "1/4"], "--lam needs a ridge architecture (lsa or elsa or compiled-baseconv"),
    (["lsa", "--layers", "4", "--eta", "1/8"], "no rational square root"),
    (["lsa", "--layers", "4", "--eta", "0"], "--eta must be > 0"),
    (["gd-lsa", "--layers", "4", "--n", "2", "--d", "3"], "must be >= --d"),
    (["baseconv-causal", "--layers", "4", "--batch", "0"], "--batch must be >= 1"),
    (["baseconv", "--layers", "4", "--device", "gpu"], "--device must be cpu or cuda"),
])
def test_bad_input_exits_2_with_one_line(argv, msg, capsys, tmp_path):
    assert roundoff.main(argv + ["--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert msg in err
    assert not (tmp_path / "o").exists()


def test_cupy_backend_without_a_gpu_exits_2(capsys, tmp_path):
    if cupy_available():
        pytest.skip("cupy and a GPU are present: the cupy backend is exercised in test_cupy_agrees_with_numpy")
    assert roundoff.main(["baseconv", "--layers", "4", "--backend", "cupy", "--dtypes", "float32",
                          "--out", str(tmp_path)]) == 2
    assert "cupy" in capsys.readouterr().err


def test_auto_eta_converges_and_is_a_square():
    for kappa, want in ((1, Fraction(1, 16)), (5, Fraction(1, 16)), (6, Fraction(1, 64)), (10, Fraction(1, 64)),
                        (20, Fraction(1, 256))):
        eta = roundoff.auto_eta(kappa)
        assert eta == want and eta * kappa ** 2 < 2
        assert int(eta.denominator ** 0.5) ** 2 == eta.denominator


# ------------------------------------------------------------------ streaming run

@pytest.mark.parametrize("arch", list(gd_architectures()))
def test_stream_matches_the_runner_bit_for_bit(arch):
    con = gd_architectures()[arch].build(N, D)
    be = Backend("numpy", "float32")
    v = _vars(be)
    res = roundoff.stream(con, v, 3, be)
    ref = run_construction(con, v, 3, be)
    assert np.array_equal(res["x"], ref.x)
    assert res["first_nonfinite"] is None and res["layers_run"] == ref.layers_run == con.depth(3)


@pytest.mark.parametrize("arch", list(gd_architectures()))
def test_torch_and_numpy_agree_in_float64(arch):
    con = gd_architectures()[arch].build(N, D)
    xs = {}
    for name in ("numpy", "torch"):
        be = Backend(name, "float64")
        xs[name] = roundoff.stream(con, _vars(be), 4, be, checkpoints={4})
    np.testing.assert_allclose(xs["torch"]["x"], xs["numpy"]["x"], rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(xs["torch"]["predictions"][4], xs["numpy"]["predictions"][4], rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("arch", list(gd_architectures()))
def test_carried_data_is_exact_with_direct_conv(arch):
    """0/1 weights move A and b without rounding; only the FFT spreads roundoff into them."""
    con = gd_architectures()[arch].build(N, D)
    be = Backend("numpy", "float32")
    res = roundoff.stream(con, _vars(be), 3, be)
    assert res["data"] and all(np.all(d == 0) for d in res["data"].values())
    if arch.startswith("baseconv"):
        fft = roundoff.stream(con, _vars(be), 3, be, conv_method="fft")
        assert max(float(np.max(d)) for d in fft["data"].values()) > 0


# ------------------------------------------------------------------ layer-level reference

def test_mpfr_states_go_through_the_exact_object_path():
    """ops' object path with mpfr scalars gives the exact rational result."""
    con = gd_architectures()["baseconv"].build(N, D)
    rng = np.random.default_rng(3)
    S = rng.integers(-9, 10, size=con.layout.shape).astype(float) / 8  # dyadic: exact in mpfr
    for L in con.body:
        got = from_mpfr_array(exact_forward(mp_layer(L, 200), S, 200))
        want = L.forward(np.vectorize(Fraction, otypes=[object])(S))
        assert np.array_equal(got, np.vectorize(float, otypes=[float])(want))
        S = got


@pytest.mark.parametrize("arch", list(gd_architectures()))
def test_layer_reference_agrees_with_the_float64_run(arch):
    con = gd_architectures()[arch].build(N, D)
    be = Backend("numpy", "float64")
    v = {k: t[:2] for k, t in _vars(be).items()}
    k = 2
    res = layer_level(con, v, k, be)
    assert len(res.layers) == con.depth(k) and res.first_nonfinite_layer is None
    assert [r["section"] for r in res.layers] == [lab["section"] for lab in stack_labels(con, k)]
    assert max(r["local_rel"] for r in res.layers) < 1e-13
    assert max(r["cumulative_rel"] for r in res.layers) < 1e-13
    assert any(r["local_mse"] > 0 for r in res.layers)  # float64 does round somewhere
    # at the last body layer the exact chain is exact GD: same error as the algorithm-level reference
    last_body = con.depth(k) - len(con.epilogue) - 1
    x = roundoff.stream(con, v, k, be)["x"][k]
    eta = con.params["eta"] if "eta" in con.params else con.params["sqrt_eta"] ** 2
    ref = gd_reference(v["A"], v["b"], v["x"], eta, k)[k]
    want = float(np.mean((x - ref) ** 2))
    assert res.layers[last_body]["cumulative_x_mse"] == pytest.approx(want, rel=1e-3, abs=1e-36)


def test_layer_reference_in_float32_attributes_error_to_layers():
    con = gd_architectures()["baseconv-causal"].build(N, D)
    be = Backend("numpy", "float32")
    res = layer_level(con, _vars(be), 2, be, max_layers=3)
    assert len(res.layers) == 3 and res.notes
    assert res.weights_exact_in_dtype
    pro = res.layers[1]  # prologue 2: prefix sums of the products
    assert pro["section"] == "prologue" and pro["local_worst_region"] in ("Sba", "Saa")
    assert 0 < pro["local_rel"] < 1e-6 and pro["local_bits_max"] >= 1


# ------------------------------------------------------------------ plots

def test_compare_constructions_figure(tmp_path):
    from numerics import roundoff_plots as plots

    paths = []
    for arch in ("baseconv", "lsa"):
        out = tmp_path / arch
        assert roundoff.main([arch, "--layers", "4", "--dtypes", "float32", "--backend", "numpy",
                              "--layer-ref", "0", "--out", str(out)] + TINY) == 0
        paths.append(str(out / "roundoff.json"))
    assert plots.main(paths + ["--out", str(tmp_path / "cmp.png")]) == 0
    assert _is_png(tmp_path / "cmp.png")


# ------------------------------------------------------------------ GPU paths

@pytest.mark.parametrize("arch", list(gd_architectures()))
def test_cuda_agrees_with_cpu(arch):
    if not cuda_available():
        pytest.skip("no CUDA GPU: torch.cuda.is_available() is False")
    con = gd_architectures()[arch].build(N, D)
    cpu, gpu = Backend("torch", "float64"), Backend("torch", "float64", "cuda")
    for conv in ("direct", "fft"):
        a = roundoff.stream(con, _vars(cpu), 3, cpu, conv_method=conv)["x"]
        b = roundoff.stream(con, _vars(gpu), 3, gpu, conv_method=conv)["x"]
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("arch", list(gd_architectures()))
def test_cupy_agrees_with_numpy(arch):
    if not cupy_available():
        pytest.skip("no CUDA GPU: cupy or a device is missing")
    con = gd_architectures()[arch].build(N, D)
    npb, cpb = Backend("numpy", "float64"), Backend("cupy", "float64")
    for conv in ("direct", "fft"):
        a = roundoff.stream(con, _vars(npb), 3, npb, conv_method=conv)["x"]
        b = roundoff.stream(con, _vars(cpb), 3, cpb, conv_method=conv)["x"]
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-14)


def test_cli_on_cuda(tmp_path):
    if not cuda_available():
        pytest.skip("no CUDA GPU: torch.cuda.is_available() is False")
    assert roundoff.main(["baseconv", "--layers", "7", "--backend", "torch", "--device", "cuda",
                          "--conv", "direct,fft", "--out", str(tmp_path)] + TINY) == 0
    rep = json.loads((tmp_path / "roundoff.json").read_text())
    assert {r["device"] for r in rep["runs"]} == {"cuda"}


@pytest.mark.parametrize("arch", sorted(gd_architectures()))
def test_every_architecture_runs_in_bfloat16_and_float16(arch, tmp_path, capsys):
    """Every GD architecture streams in torch's half formats (LSA/ELSA's sparse plan once read
    bfloat16 tensors through numpy, which has no bfloat16, and crashed)."""
    out = tmp_path / arch
    depth = roundoff.build(roundoff.resolve(arch), N, D, Fraction(1, 16), Fraction(0)).depth(2)
    rc = roundoff.main([arch, "--layers", str(depth), "--dtypes", "bfloat16,float16", "--layer-ref", "0",
                        "--out", str(out), *TINY])
    assert rc == 0, capsys.readouterr()
    runs = json.loads((out / "roundoff.json").read_text())["runs"]
    assert {r["dtype"] for r in runs} == {"bfloat16", "float16"}
    assert all(r["per_step"] is not None and r["per_step"]["mse"][-1] is not None for r in runs)
