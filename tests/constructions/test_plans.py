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


# ------------------------------------------------------------------ channel-major runs (torch and numpy)

@pytest.mark.parametrize("lib", ["numpy", "torch"])
@given(L=layers(), seed=st.integers(0, 2**16))
def test_channel_major_run_is_the_per_layer_loop(lib, L, seed):
    """Three copies of a random layer run channel-major (``run_checked``: carried channels passed on,
    token-constant terms mixed on one token, token sums channel by channel on the CPU) give the states
    of the layers' forward one after another, exactly (integer weights and inputs: every sum exact)."""
    from constructions import plans

    T, C = L.shape
    u = np.random.default_rng(seed).integers(-3, 4, (3, T, C)).astype(np.float64)
    if lib == "numpy":
        F, x = L.map(lambda A: np.asarray(A, dtype=np.float64)).prepare(), u
    else:
        F, x = L.map(lambda A: torch.as_tensor(np.asarray(A, dtype=np.float64))).prepare(), torch.as_tensor(u)
    assert plans.channel_layer(F) is not None
    want = x
    for _ in range(3):
        want = F.forward(want)
    seen = []
    got, ran, stopped = plans.run_checked([F] * 3, x, buffer=plans.ChannelBuffer(),
                                          on_nonfinite=lambda i, S: seen.append(i))
    to_np = (lambda a: a.numpy()) if lib == "torch" else np.asarray
    np.testing.assert_array_equal(to_np(got), to_np(want))
    assert ran == 3 and not stopped and seen == [] and ops.is_torch(got) == (lib == "torch")
    np.testing.assert_array_equal(to_np(x), u)  # the caller's state is not written


def test_numpy_run_from_a_non_finite_value_on_is_the_per_layer_loop():
    """numpy: the layer that writes the first non-finite value is reported, and that layer's state and
    every later one are the per-layer loop's bit for bit (its products' NaN where the channel-major
    run would skip a 0 * inf), whether the run stops there or goes on."""
    from constructions import plans
    from numerics.backends import Backend

    be = Backend("numpy", "float32")
    stack = [be.cast_layer(L) for L in _square_then_drop_exact()] * 3
    assert plans.channel_layer(stack[0]) is not None
    u = np.zeros((3, 4, 2), dtype=np.float32)
    u[1, 2, 0] = 1e30  # its square overflows float32
    seen = []
    with np.errstate(all="ignore"):
        S, ran, stopped = plans.run_checked(stack, u, buffer=plans.ChannelBuffer(),
                                            on_nonfinite=lambda i, Si: seen.append((i, Si.copy())))
        want = [u]
        for L in stack:
            want.append(L.forward(want[-1]))
    assert [i for i, _ in seen] == [0] and ran == 6 and not stopped
    same = lambda a, b: np.array_equal(np.asarray(a).view(np.int32), np.asarray(b).view(np.int32))  # noqa: E731
    assert same(seen[0][1], want[1]) and same(S, want[-1])
    with np.errstate(all="ignore"):
        S, ran, stopped = plans.run_checked(stack, u, on_nonfinite=lambda i, Si: True)
    assert stopped and ran == 1 and same(S, want[1])


def _square_then_drop_exact():
    """The exact layers of :func:`_square_then_drop` (for another backend's cast)."""
    A = BaseConv.zeros(4, 2, causal=True)
    A.W_in[0, 0] = A.h[0, 0] = A.W_out[0, 0] = 1
    for t in range(4):
        A.b_gate[t, 0] = 1
    A.W_gate[0, 1] = A.W_in[0, 1] = A.h[0, 1] = A.W_out[1, 1] = 1
    B = BaseConv.zeros(4, 2, causal=True)
    B.W_in[0, 0] = B.h[0, 0] = B.W_out[0, 0] = 1
    for t in range(4):
        B.b_gate[t, 0] = 1
    return A, B


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_lsa_layers_run_in_place_on_the_runs_own_state(dtype):
    """gd-lsa's residual layers on the CPU add their column into the run's state in place
    (``inplace_layer``): the caller's state is left as it was, the result is the per-layer loop's
    bit for bit, and a non-finite value the layers carry from the input is reported at layer 0."""
    from constructions import plans
    from constructions.gd_attention import gd_lsa
    from numerics.backends import Backend
    from numerics.problems import sample_ls

    be = Backend("torch", dtype)
    con = gd_lsa(6, 2)
    stack = [be.cast_layer(L) for L in con.layers(4)]
    assert all(plans.inplace_layer(L) is not None for L in stack[:-1])
    P = sample_ls(5, 6, 2, seed=1)
    v = {"A": P.A, "b": P.b, "x": P.x0, "q": np.random.default_rng(2).standard_normal((5, 2))}
    S0 = be.asarray(con.input_state(v))
    keep = S0.clone()
    want = S0
    for L in stack:
        want = L.forward(want)
    buf = plans.ChannelBuffer()
    got, ran, stopped = plans.run_checked(stack, S0, buffer=buf, on_nonfinite=lambda i, S: None)
    assert torch.equal(S0, keep) and torch.equal(got, want) and buf.owns(got) and ran == len(stack)
    # the run's own state is updated in place by the next section, not copied
    got2, _, _ = plans.run_checked(stack[:1], got, buffer=buf)
    assert got2 is got
    S0[2, 0, 0] = float("inf")
    seen = []
    with np.errstate(all="ignore"):
        plans.run_checked(stack, S0, input_checked=False, on_nonfinite=lambda i, S: seen.append(i))
    assert seen == [0]


def test_numpy_channel_buffer_lays_out_and_reads_back():
    """The numpy form of the run loop's state memory: rows carried untouched, a moved row copied, a
    zero channel zeroed, a token-constant channel laid on every token, a foreign state laid in once."""
    from constructions.plans import ChannelBuffer

    buf = ChannelBuffer()
    like = np.zeros((2, 3, 3))
    a, b = np.arange(6.0).reshape(2, 3), -np.arange(6.0).reshape(2, 3)
    S = buf.lay_out([a, b, None], like)
    np.testing.assert_array_equal(S, np.stack([a, b, np.zeros((2, 3))], axis=-1))
    x = buf.channels(S)
    assert all(u is v for u, v in zip(x, buf.views)) and S is buf.state
    S2 = buf.lay_out([x[1], x[0], np.broadcast_to(a[:, :1], (2, 3))], like)
    np.testing.assert_array_equal(S2, np.stack([b, a, np.broadcast_to(a[:, :1], (2, 3))], axis=-1))
    T = np.arange(18.0).reshape(2, 3, 3)
    y = buf.channels(T)
    np.testing.assert_array_equal(np.stack(y, axis=-1), T)
    assert y[0] is buf.views[0]
