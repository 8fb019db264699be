"""numerics/runner.py: streaming numeric runs of a construction, and the plain-GD baseline."""
from fractions import Fraction

import numpy as np
import pytest

from constructions.gd_attention import gd_elsa, gd_lsa
from constructions.gd_baseconv import gd_baseconv, gd_baseconv_causal
from numerics.backends import Backend
from numerics.problems import sample_ls
from numerics.runner import RunResult, plain_gd, run_construction

BUILDERS = [gd_baseconv, gd_baseconv_causal, gd_lsa, gd_elsa]


def batch(B=6, n=7, d=3, seed=0, be=None):
    P = sample_ls(B, n, d, seed=seed)
    q = np.random.default_rng(seed + 1).standard_normal((B, d))
    v = {"A": P.A, "b": P.b, "x": P.x0, "q": q}
    if be is not None:
        v = {k: be.round_input(a) for k, a in v.items()}
    return v


@pytest.mark.parametrize("build", BUILDERS, ids=lambda b: b.__name__)
def test_float64_run_matches_plain_gd(build):
    be = Backend("numpy", "float64")
    v = batch()
    k = 6
    con = build(7, 3)
    res = run_construction(con, v, k, be)
    assert isinstance(res, RunResult)
    assert res.x.shape == (k + 1, 6, 3) and res.x.dtype == np.float64
    assert res.first_nonfinite_layer is None and res.layers_run == con.depth(k)
    plain = plain_gd(v["A"], v["b"], v["x"], 1 / 16, k, be)
    assert plain.shape == (k + 1, 6, 3)
    np.testing.assert_allclose(res.x, plain, rtol=0, atol=1e-10)
    np.testing.assert_array_equal(res.x[0], v["x"])
    # the epilogue's read-out is q^T x_k
    np.testing.assert_allclose(res.prediction, np.einsum("bd,bd->b", v["q"], res.x[-1]), atol=1e-10)


@pytest.mark.parametrize("build", [gd_lsa, gd_elsa], ids=lambda b: b.__name__)
def test_ridge_run_matches_plain_ridge_gd(build):
    be = Backend("numpy", "float64")
    v = batch(seed=3)
    con = build(7, 3, eta="1/16", lam="1/4")
    res = run_construction(con, v, 5, be)
    plain = plain_gd(v["A"], v["b"], v["x"], 1 / 16, 5, be, lam=0.25)
    np.testing.assert_allclose(res.x, plain, rtol=0, atol=1e-10)
    # and differs from plain least squares
    assert np.abs(plain_gd(v["A"], v["b"], v["x"], 1 / 16, 5, be)[-1] - plain[-1]).max() > 1e-3


def test_plain_gd_is_gd():
    be = Backend("numpy", "float64")
    v = batch(B=2, n=4, d=2)
    out = plain_gd(v["A"], v["b"], v["x"], 0.125, 3, be)
    x = v["x"].copy()
    for j in range(3):
        np.testing.assert_allclose(out[j], x, rtol=1e-14, atol=1e-15)
        x = x - 0.125 * np.einsum("bij,bi->bj", v["A"], np.einsum("bij,bj->bi", v["A"], x) - v["b"])
    np.testing.assert_allclose(out[3], x, rtol=1e-14, atol=1e-15)


def test_exact_weights_exact_run_on_dyadic_inputs():
    # dyadic inputs with few bits: float64 arithmetic is exact, so the run equals exact GD
    be = Backend("numpy", "float64")
    rng = np.random.default_rng(5)
    A = rng.integers(-3, 4, (2, 4, 2)).astype(float)
    b = rng.integers(-3, 4, (2, 4)).astype(float)
    x = rng.integers(-3, 4, (2, 2)).astype(float) / 4
    q = np.ones((2, 2))
    con = gd_baseconv(4, 2)
    res = run_construction(con, {"A": A, "b": b, "x": x, "q": q}, 2, be)
    for i in range(2):
        xi = [Fraction(z) for z in x[i]]
        for _ in range(2):
            r = [sum(Fraction(A[i, t, j]) * xi[j] for j in range(2)) - Fraction(b[i, t]) for t in range(4)]
            g = [sum(Fraction(A[i, t, j]) * r[t] for t in range(4)) for j in range(2)]
            xi = [xi[j] - Fraction(1, 16) * g[j] for j in range(2)]
        assert [Fraction(z) for z in res.x[-1, i]] == xi


def test_fft_conv_close_to_direct():
    be = Backend("numpy", "float64")
    v = batch()
    for build in (gd_baseconv, gd_baseconv_causal):
        con = build(7, 3)
        a = run_construction(con, v, 4, be, conv_method="direct")
        b = run_construction(con, v, 4, be, conv_method="fft")
        np.testing.assert_allclose(b.x, a.x, rtol=0, atol=1e-12)


def test_sections_and_progress():
    be = Backend("numpy", "float64")
    v = batch()
    con = gd_baseconv(7, 3)

    class Counter:
        n = 0

        def update(self, k):
            self.n += k

    c = Counter()
    base = run_construction(con, v, 3, be, progress=c)
    assert c.n == 3
    secs = {"prologue": [], "bodies": [con.body] * 3, "epilogue": con.epilogue}
    same = run_construction(con, v, 3, be, sections=secs)
    np.testing.assert_array_equal(same.x, base.x)
    # a different second body (eta doubled) shows up from step 2 on
    other = gd_baseconv(7, 3, eta="1/8")
    mixed = run_construction(con, v, 3, be, sections={"prologue": [], "bodies": [con.body, other.body, con.body],
                                                      "epilogue": con.epilogue})
    np.testing.assert_array_equal(mixed.x[:2], base.x[:2])
    assert np.abs(mixed.x[2] - base.x[2]).max() > 1e-6


def test_nonfinite_is_reported_and_padded():
    be = Backend("numpy", "float16")
    v = batch(be=be)
    con = gd_baseconv(7, 3, eta=64)
    with np.errstate(all="ignore"):
        res = run_construction(con, v, 10, be)
    assert isinstance(res.first_nonfinite_layer, int)
    assert 0 <= res.first_nonfinite_layer < con.depth(10)
    assert res.prediction is None
    assert res.x.shape == (11, 6, 3)
    steps_run = (res.first_nonfinite_layer - len(con.prologue)) // len(con.body) + 1
    assert np.isnan(res.x[steps_run + 1:]).all()
    assert res.layers_run < con.depth(10)


def test_float32_run_is_float32_accurate():
    be = Backend("numpy", "float32")
    v = batch(be=be)
    con = gd_baseconv_causal(7, 3)
    res = run_construction(con, v, 10, be)
    plain = plain_gd(v["A"], v["b"], v["x"], 1 / 16, 10, Backend("numpy", "float64"))
    err = np.abs(res.x - plain).max()
    assert 1e-9 < err < 1e-4
    # every intermediate value was a float32
    assert np.array_equal(res.x, res.x.astype(np.float32).astype(np.float64))


def test_gd_accuracy_and_rounded_inputs():
    from fractions import Fraction

    from constructions.gd_baseconv import gd_baseconv
    from numerics.backends import Backend
    from numerics.problems import sample_ls
    from numerics.runner import gd_accuracy, rounded_inputs

    con = gd_baseconv(6, 3)
    P = sample_ls(8, 6, 3, kappa=5.0, seed=0)
    q = np.ones((8, 3))
    [(be, v)] = rounded_inputs(P.A, P.b, P.x0, q, [Backend("numpy", "float64")])
    summary, rows = gd_accuracy(con, 4, v, be, Fraction(1, 16))
    assert [r["step"] for r in rows] == [1, 2, 3, 4] and summary["first_nonfinite_layer"] is None
    assert all(r["mse_vs_exact_gd"] < 1e-28 for r in rows) and summary["prediction_mse_vs_exact"] < 1e-28
    with pytest.raises(ValueError, match="float16: the sampled problems overflow"):
        rounded_inputs(P.A * 1e6, P.b, P.x0, q, [Backend("numpy", "float16")])
