"""numerics/backends.py: backends and dtypes by name; exact weights rounded once per entry."""
from fractions import Fraction

import numpy as np
import pytest
import torch

from constructions.gd_baseconv import gd_baseconv
from numerics import backends as B
from numerics.backends import Backend, BackendError, cuda_available, cupy_available, exact_float
from numerics.problems import sample_ls
from numerics.runner import plain_gd, run_construction


@pytest.mark.parametrize("name,dtype,needle", [
    ("jax", "float32", "unknown backend 'jax'"),
    ("", "float32", "unknown backend"),
    ("numpy", "float8", "unknown dtype 'float8'"),
    ("torch", "int32", "unknown dtype 'int32'"),
    ("numpy", "Float32", "unknown dtype"),
    ("numpy", "bfloat16", "bfloat16 needs the torch backend"),
])
def test_bad_names_and_dtypes(name, dtype, needle):
    with pytest.raises(BackendError, match=needle) as e:
        Backend(name, dtype)
    assert isinstance(e.value, ValueError) and "\n" not in str(e.value)


def test_cuda_and_cupy_requests_without_a_gpu_are_rejected(monkeypatch):
    monkeypatch.setattr(B, "cuda_available", lambda: False)
    monkeypatch.setattr(B, "cupy_available", lambda: False)
    with pytest.raises(BackendError, match="torch sees no CUDA GPU"):
        Backend("torch", "float32", "cuda")
    with pytest.raises(BackendError, match="backend cupy needs cupy and a CUDA GPU"):
        Backend("cupy", "float32")
    with pytest.raises(BackendError, match="bfloat16 needs the torch backend"):
        Backend("cupy", "bfloat16")
    assert Backend("torch", "float32", "cpu").device == "cpu"


@pytest.mark.parametrize("name,dtype", [("numpy", "float16"), ("numpy", "float32"), ("numpy", "float64"),
                                        ("torch", "float16"), ("torch", "bfloat16"), ("torch", "float32"),
                                        ("torch", "float64")])
def test_asarray_rounds_once_to_the_dtype(name, dtype):
    be = Backend(name, dtype)
    exact = np.array([[Fraction(1, 3), Fraction(-2, 7)], [Fraction(1, 16), 0]], dtype=object)
    a = be.asarray(exact)
    if name == "torch":
        assert isinstance(a, torch.Tensor) and a.dtype == getattr(torch, dtype)
        want = torch.tensor([[1 / 3, -2 / 7], [1 / 16, 0.0]], dtype=torch.float64).to(getattr(torch, dtype))
        assert torch.equal(a, want)
    else:
        assert a.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(a, np.array([[1 / 3, -2 / 7], [1 / 16, 0.0]]).astype(dtype))
    back = be.to_numpy64(a)
    assert back.dtype == np.float64 and back[1, 0] == 1 / 16  # dyadic: exact in every dtype
    np.testing.assert_array_equal(be.round_input(np.array([0.1, 1 / 3])), be.to_numpy64(be.asarray([0.1, 1 / 3])))


def test_round_input_values():
    x = np.array([0.1, 1 / 3, 1e-8, 70000.0])
    np.testing.assert_array_equal(Backend("numpy", "float32").round_input(x), x.astype(np.float32).astype(np.float64))
    r16 = Backend("numpy", "float16").round_input(x)
    assert r16[3] == np.inf and r16[2] == 0.0
    bf = Backend("torch", "bfloat16").round_input(x)
    assert bf[3] == 70144.0 and bf[0] == 0.10009765625  # 8 significant bits
    np.testing.assert_array_equal(Backend("numpy", "float64").round_input(x), x)


def test_isfinite_all_and_cast_layer():
    for be in (Backend("numpy", "float32"), Backend("torch", "float32")):
        assert be.isfinite_all(be.asarray(np.ones(3)))
        assert not be.isfinite_all(be.asarray(np.array([1.0, np.nan])))
        assert not be.isfinite_all(be.asarray(np.array([1.0, np.inf])))
    L = gd_baseconv(3, 2, eta="1/10").body[2]
    for be, typ in ((Backend("numpy", "float32"), np.ndarray), (Backend("torch", "float64"), torch.Tensor)):
        Lc = be.cast_layer(L)
        assert Lc.config() == L.config()
        for name, arr in Lc.arrays().items():
            assert isinstance(arr, typ)
            np.testing.assert_array_equal(be.to_numpy64(arr), be.round_input(np.array(L.arrays()[name], float)))
    assert exact_float(Fraction(1, 10)) == 0.1 and exact_float("3/4") == 0.75


def _problem(be, B_=4, n=6, d=3):
    P = sample_ls(B_, n, d, seed=2)
    q = np.random.default_rng(3).standard_normal((B_, d))
    return {k: be.round_input(a) for k, a in {"A": P.A, "b": P.b, "x": P.x0, "q": q}.items()}


def test_torch_bfloat16_run_is_finite_and_close():
    be = Backend("torch", "bfloat16")
    v = _problem(be)
    con = gd_baseconv(6, 3)
    res = run_construction(con, v, 5, be)
    assert res.first_nonfinite_layer is None and np.isfinite(res.x).all() and np.isfinite(res.prediction).all()
    ref = plain_gd(v["A"], v["b"], v["x"], 1 / 16, 5, Backend("numpy", "float64"))
    err = np.abs(res.x - ref).max()
    assert 0 < err < 0.25  # bfloat16 keeps 8 bits: visibly inexact, still GD
    # the values really are bfloat16 numbers
    np.testing.assert_array_equal(res.x, torch.from_numpy(res.x).to(torch.bfloat16).double().numpy())
    plain = plain_gd(v["A"], v["b"], v["x"], 1 / 16, 5, be)
    assert np.isfinite(plain).all()


def test_torch_float64_equals_numpy_float64():
    con = gd_baseconv(6, 3)
    a = run_construction(con, _problem(Backend("numpy", "float64")), 4, Backend("numpy", "float64"))
    b = run_construction(con, _problem(Backend("torch", "float64")), 4, Backend("torch", "float64"))
    np.testing.assert_allclose(b.x, a.x, rtol=0, atol=1e-13)


def test_torch_cuda_run_matches_cpu():
    if not cuda_available():
        pytest.skip("no CUDA GPU: torch.cuda.is_available() is False")
    con = gd_baseconv(6, 3)
    cpu = Backend("torch", "float64")
    gpu = Backend("torch", "float64", "cuda")
    v = _problem(cpu)
    a = run_construction(con, v, 4, cpu)
    b = run_construction(con, v, 4, gpu, conv_method="fft")
    np.testing.assert_allclose(b.x, a.x, rtol=0, atol=1e-12)
    assert gpu.asarray(np.ones(2)).device.type == "cuda"
    bf = run_construction(con, _problem(Backend("torch", "bfloat16", "cuda")), 4, Backend("torch", "bfloat16", "cuda"))
    assert np.isfinite(bf.x).all()


def test_cupy_run_matches_numpy():
    if not cupy_available():
        pytest.skip("no CUDA GPU: cupy is missing or sees no device")
    con = gd_baseconv(6, 3)
    v = _problem(Backend("numpy", "float64"))
    a = run_construction(con, v, 4, Backend("numpy", "float64"))
    for method in ("direct", "fft"):
        b = run_construction(con, v, 4, Backend("cupy", "float64"), conv_method=method)
        np.testing.assert_allclose(b.x, a.x, rtol=0, atol=1e-12)
    c = run_construction(con, v, 4, Backend("cupy", "float32"))
    assert np.abs(c.x - a.x).max() < 1e-4


@pytest.mark.parametrize("name,dtype,bits", [("numpy", "float32", 23), ("numpy", "float16", 10),
                                             ("torch", "bfloat16", 7)])
def test_exact_weights_are_correctly_rounded_once(name, dtype, bits):
    """The module promises each exact entry correctly rounded (once) to the dtype.

    q = 1 + 2^-(bits+1) + 2^-60 lies just above the midpoint between 1 and 1 + 2^-bits, so the
    nearest value of the dtype is 1 + 2^-bits.  Rounding q to float64 first lands exactly on the
    midpoint, and the second rounding (ties to even) then gives 1: a double-rounding error.
    """
    q = 1 + Fraction(1, 2 ** (bits + 1)) + Fraction(1, 2 ** 60)
    be = Backend(name, dtype)
    got = be.to_numpy64(be.asarray(np.array([[q]], dtype=object)))[0, 0]
    up = 1 + 2.0 ** -bits
    assert abs(Fraction(up) - q) < abs(Fraction(1) - q)  # the correctly rounded value is `up`
    assert got == up
