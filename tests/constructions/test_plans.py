"""constructions/plans.py: a prepared float layer computes what the layer's own forward computes.

``LivePlan`` forms only the live inner channels, copies the channels that carry an input channel,
and runs unit blocks as gathers; on small integer weights and inputs every sum is exact in float64,
so the planned forward must equal the unplanned one (``ops`` path) exactly, for numpy and torch,
on random layers with carried, copied, masked and biased channels.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from constructions import ops
from constructions.layers import BaseConv
from constructions.sparse import SparseMatrix


@st.composite
def layers(draw):
    T, C = draw(st.integers(1, 5)), draw(st.integers(1, 6))
    causal = draw(st.booleans())
    L = BaseConv.zeros(T, C, causal=causal, residual=draw(st.booleans()))
    small = st.integers(-2, 2)
    for k in range(C):
        kind = draw(st.sampled_from(["carry", "copy", "product", "gate-bias", "dead", "random"]))
        r = draw(st.integers(0, C - 1))
        if kind in ("carry", "copy"):  # 1 * (1 * u[:, r]): W_in = e_r, delta_0, gate bias 1
            L.W_in[r, k] = 1
            L.h[0, k] = 1
            for t in range(T):
                L.b_gate[t, k] = 1
            L.W_out[k, k if kind == "carry" else draw(st.integers(0, C - 1))] = 1
        elif kind == "product":
            L.W_gate[draw(st.integers(0, C - 1)), k] = draw(small)
            L.W_in[r, k] = draw(small)
            L.h[0, k] = 1
            L.W_out[k, draw(st.integers(0, C - 1))] = draw(small)
        elif kind == "gate-bias":  # a masked move through a filter tap
            L.W_in[r, k] = 1
            L.h[draw(st.integers(0, T - 1)), k] = draw(small)
            L.b_gate[draw(st.integers(0, T - 1)), k] = 1
            L.W_out[k, draw(st.integers(0, C - 1))] = draw(st.sampled_from([1, -1]))
        elif kind == "random":
            for name, shape in (("W_in", (C, 1)), ("W_gate", (C, 1)), ("h", (T, 1)), ("b_gate", (T, 1)),
                                ("b_conv", (T, 1)), ("b_in", (T, 1))):
                A = getattr(L, name)
                for i in range(shape[0]):
                    if draw(st.booleans()):
                        A[i, k] = draw(small)
            L.W_out[k, draw(st.integers(0, C - 1))] = draw(small)
    if draw(st.booleans()):
        L.b_out[draw(st.integers(0, T - 1)), draw(st.integers(0, C - 1))] = draw(small)
    return L


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@given(L=layers(), seed=st.integers(0, 2**16), sparse=st.booleans())
def test_planned_forward_is_the_layers_forward(lib, L, seed, sparse):
    if sparse:  # a compiled layer's form: the channel mixes as sparse matrices
        L = BaseConv(**{k: SparseMatrix.from_dense(getattr(L, k)) if k in ("W_in", "W_gate", "W_out")
                        else getattr(L, k) for k in BaseConv.array_fields}, causal=L.causal, residual=L.residual)
    T, C = L.shape
    u = np.random.default_rng(seed).integers(-3, 4, (3, T, C)).astype(np.float64)
    if lib == "numpy":
        F = L.map(lambda A: np.asarray(A, dtype=np.float64))
        x = u
    else:
        F = L.map(lambda A: torch.as_tensor(np.asarray(A, dtype=np.float64)))
        x = torch.as_tensor(u)
    want = F.forward(x)  # unprepared: the ops path, every channel, dense sums
    got = F.prepare().forward(x)
    assert F.__dict__.get("_plan") is not None
    to_np = (lambda a: a.numpy()) if lib == "torch" else np.asarray
    np.testing.assert_array_equal(to_np(got), to_np(want))
    assert ops.is_torch(got) == (lib == "torch")


@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_conv_plan_with_a_sum_channel_and_a_general_one_but_no_lag0_channel(lib):
    """A circular all-ones ("sum") channel yields one row; with no lag-0 channel beside it the plan
    must still lay it out on every token before the general channels are written in (a case a
    live-channel plan produces by dropping the lag-0 channels)."""
    from constructions.conv import ConvPlan

    h = np.array([[1.0, 2.0, 0.0], [1.0, 3.0, 0.0]])  # sum, general, zero
    v = np.arange(18.0).reshape(3, 2, 3)
    H, V = (h, v) if lib == "numpy" else (torch.as_tensor(h), torch.as_tensor(v))
    got = ConvPlan(H, causal=False)(V)
    want = ops.conv(V, H, causal=False)
    assert tuple(got.shape) == v.shape
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
