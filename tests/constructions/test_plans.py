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


# ------------------------------------------------------------------ the run loop's finiteness watch

def _square_then_drop(dtype):
    """Two float layers on 4 tokens x 2 channels: the first carries channel 0 and writes its square
    into channel 1, the second carries channel 0 and drops channel 1 (a scratch channel)."""
    from numerics.backends import Backend

    A = BaseConv.zeros(4, 2, causal=True)
    A.W_in[0, 0] = A.h[0, 0] = A.W_out[0, 0] = 1  # inner 0: 1 * u0, carried into channel 0
    for t in range(4):
        A.b_gate[t, 0] = 1
    A.W_gate[0, 1] = A.W_in[0, 1] = A.h[0, 1] = A.W_out[1, 1] = 1  # inner 1: u0 * u0 into channel 1
    B = BaseConv.zeros(4, 2, causal=True)
    B.W_in[0, 0] = B.h[0, 0] = B.W_out[0, 0] = 1
    for t in range(4):
        B.b_gate[t, 0] = 1
    be = Backend("torch", dtype)
    return [be.cast_layer(L) for L in (A, B)], be


@pytest.mark.parametrize("pending", [1, 8])
def test_run_checked_reports_the_layer_that_wrote_a_non_finite_value(monkeypatch, pending):
    """An overflow in a scratch channel the next layer drops is reported at the layer that wrote it,
    with that layer's state, whether the device flags are read after every layer or at the end."""
    from constructions import plans

    monkeypatch.setattr(plans, "PENDING_CHECKS", pending)
    stack, be = _square_then_drop("float32")
    u = torch.zeros(3, 4, 2)
    u[1, 2, 0] = 1e30  # its square overflows float32
    seen = []
    S, ran, stopped = plans.run_checked(stack * 3, u, on_nonfinite=lambda i, Si: seen.append((i, Si.clone())))
    assert [i for i, _ in seen] == [0] and not stopped and ran == 6
    assert torch.isinf(seen[0][1][1, 2, 1]) and torch.isfinite(S).all()  # dropped by layer 1
    S, ran, stopped = plans.run_checked(stack * 3, u, on_nonfinite=lambda i, Si: True)
    assert stopped and ran == 1 and torch.isinf(S[1, 2, 1])
    want = u
    for L in stack:
        want = L.forward(want)
    np.testing.assert_array_equal(plans.run_checked(stack, u)[0].numpy(), want.numpy())


def test_run_checked_confirms_a_flag_before_reporting():
    """A state of large finite values whose sum overflows (the device flag's false alarm) is not
    reported; a NaN input is (its square in channel 1 holds it)."""
    from constructions import plans

    stack, _ = _square_then_drop("float32")
    u = torch.full((4, 4, 2), 1e19)  # squares 1e38: finite, their float32 sum is not
    seen = []
    S, _, _ = plans.run_checked(stack, u, on_nonfinite=lambda i, Si: seen.append(i))
    assert seen == [] and torch.isfinite(S).all()
    u[0, 0, 0] = float("nan")
    plans.run_checked(stack, u, on_nonfinite=lambda i, Si: seen.append(i))
    assert seen == [0]


def test_channel_buffer_copies_only_what_moved_and_reads_its_own_state_back():
    """The run loop's state memory: a channel carried in its own row is not copied again, a row's view
    moved to another channel lands there intact (copied before its row is overwritten), a zero channel
    is zeroed, and the state laid out reads back as the same views."""
    from constructions.plans import ChannelBuffer

    buf = ChannelBuffer()
    like = torch.zeros(2, 3, 3)
    a, b = torch.arange(6.0).reshape(2, 3), -torch.arange(6.0).reshape(2, 3)
    S = buf.lay_out([a, b, None], like)
    np.testing.assert_array_equal(S.numpy(), torch.stack([a, b, torch.zeros(2, 3)], dim=-1).numpy())
    x = buf.channels(S)
    assert all(u is v for u, v in zip(x, buf.views)) and S is buf.state
    S2 = buf.lay_out([x[1], x[0], x[0] + 1], like)  # the two rows swapped, a new third channel
    np.testing.assert_array_equal(S2.numpy(), torch.stack([b, a, a + 1], dim=-1).numpy())
    S3 = buf.lay_out([None, buf.views[1], None], like)  # row 1 carried untouched
    np.testing.assert_array_equal(S3.numpy(), torch.stack([0 * a, a, 0 * a], dim=-1).numpy())
