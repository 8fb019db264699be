"""constructions/plans.py run_stack: a stack of prepared torch float layers run channel-major gives
what the layers' own forwards give one after another.

On small integer weights and inputs every sum is exact in float64, so the channel-major run (carried
channels passed on, mixes summed term by term or as one product over the channel axis, the
convolution per channel class) must equal the per-layer forward exactly; on the GD constructions'
real float weights it must agree to a few units of roundoff, and the torch sparse-heads path of
LSA / ELSA must equal the numpy one.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from constructions.layers import BaseConv
from constructions.plans import channel_layer, run_stack
from constructions.sparse import SparseMatrix
from numerics.backends import Backend
from numerics.problems import sample_ls

from .test_plans import layers


def _torch_layer(L):
    return L.map(lambda A: torch.as_tensor(np.asarray(A, dtype=np.float64))).prepare()


@settings(max_examples=40, deadline=None)
@given(data=st.data(), seed=st.integers(0, 2**16), depth=st.integers(1, 3), sparse=st.booleans())
def test_run_stack_is_the_forwards_one_after_another(data, seed, depth, sparse):
    first = data.draw(layers())
    stack = [first]
    while len(stack) < depth:  # the same state shape, non-residual or residual as drawn
        L = data.draw(layers())
        if L.shape == first.shape:
            stack.append(L)
        else:
            break
    if sparse:
        stack = [BaseConv(**{k: SparseMatrix.from_dense(getattr(L, k)) if k in ("W_in", "W_gate", "W_out")
                             else getattr(L, k) for k in BaseConv.array_fields}, causal=L.causal,
                          residual=L.residual) for L in stack]
    F = [_torch_layer(L) for L in stack]
    T, C = first.shape
    u = torch.as_tensor(np.random.default_rng(seed).integers(-3, 4, (3, T, C)).astype(np.float64))
    want = u
    for L in F:
        want = L.forward(want)
    got = run_stack(F, u)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert all(channel_layer(L) is not None for L in F)


@pytest.mark.parametrize("causal", [False, True])
def test_run_stack_general_and_few_tap_channels(causal):
    """A 16-token layer with a dense filter (a Toeplitz product), a two-tap filter (shifted copies),
    an all-ones filter (a sum / prefix sum), a scaling and a zero filter, every bias matrix set."""
    rng = np.random.default_rng(0)
    T, C = 16, 5
    L = BaseConv.zeros(T, C, causal=causal, residual=True)
    for name in ("W_in", "W_gate", "W_out"):
        getattr(L, name)[...] = rng.integers(-2, 3, (C, C)).astype(object)
    for name in ("b_in", "b_conv", "b_gate", "b_out"):
        getattr(L, name)[...] = rng.integers(-1, 2, (T, C)).astype(object)
    L.h[:, 0] = rng.integers(-2, 3, T).astype(object)  # general
    L.h[3, 1] = 2  # two taps at lags 3 and 9: shifted copies (2 * 8 <= 16)
    L.h[9, 1] = -1
    L.h[:, 2] = 1  # all equal: a sum
    L.h[0, 3] = 3  # lag 0 only: a scaling
    F = _torch_layer(L)
    u = torch.as_tensor(rng.integers(-3, 4, (4, T, C)).astype(np.float64))
    np.testing.assert_array_equal(run_stack([F, F], u).numpy(), F.forward(F.forward(u)).numpy())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("arch", ["gd_baseconv", "gd_baseconv_causal", "gd_lsa"])
def test_run_stack_on_the_gd_constructions(dtype, arch):
    import constructions.gd_attention as ga
    import constructions.gd_baseconv as gb

    con = (getattr(gb, arch, None) or getattr(ga, arch))(8, 3)
    k = 4
    B = 16
    P = sample_ls(B, 8, 3, seed=3)
    v = {"A": P.A, "b": P.b, "x": P.x0}
    if "q" in con.variables:
        v["q"] = np.random.default_rng(1).standard_normal((B, 3))
    be = Backend("torch", dtype)
    stack = [be.cast_layer(L) for L in con.layers(k)]
    S0 = be.asarray(con.input_state(v))
    want = S0
    for L in stack:
        want = L.forward(want)
    got = run_stack(stack, S0)
    eps = float(torch.finfo(getattr(torch, dtype)).eps)
    scale = float(want.abs().max())
    assert float((got - want).abs().max()) <= 64 * eps * scale


def test_sparse_heads_torch_equals_numpy():
    import constructions.gd_attention as ga

    con = ga.gd_lsa(8, 3)
    B = 8
    P = sample_ls(B, 8, 3, seed=5)
    v = {"A": P.A, "b": P.b, "x": P.x0, "q": np.random.default_rng(2).standard_normal((B, 3))}
    S = con.input_state(v)
    bn, bt = Backend("numpy", "float64"), Backend("torch", "float64")
    for L in con.layers(2):
        a = bn.cast_layer(L).forward(np.asarray(S, dtype=np.float64))
        b = bt.cast_layer(L).forward(torch.as_tensor(np.asarray(S, dtype=np.float64)))
        np.testing.assert_allclose(b.numpy(), a, rtol=0, atol=1e-12 * max(1.0, float(np.abs(a).max())))
        S = a
