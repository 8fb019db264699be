"""Seed 002 catalogue entries (Prop. 2.1): linear RNN <-> causal convolution.

* ``s002-lrnn-conv`` is proved at its defaults and at random sizes (symbolic in x and in
  r = 1/sqrt(n)); one changed filter tap is rejected with a counterexample; run in floats
  at an n that is not a perfect square (irrational r) it matches a float RNN.
* ``s002-conv-lrnn`` / ``-shift``: the identity RNN(x) == conv_L(x) in symbolic x and L is
  proved at random sizes, a changed RNN weight is rejected; the hidden sizes are as stated.
* the CLI proves every entry and writes proof.ok; a non-square n is bad input (exit 2).
"""
import io
import math
from fractions import Fraction

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from constructions.catalogue import entries
from constructions.catalogue.seed002_lrnn import (ConvToRNN, conv_lrnn, conv_lrnn_shift, conv_outputs,
                                                  impulse_response, lrnn_conv, rnn_outputs)
from verify.construct import main
from verify.prover.proof import check, prove

from tests.support import FAST, assert_proved, assert_rejected

NAMES = ["s002-lrnn-conv", "s002-conv-lrnn", "s002-conv-lrnn-shift"]
_ok, _rejected = assert_proved, assert_rejected


def test_registered_with_docstrings():
    cat = entries()
    for name in NAMES:
        e = cat[name]
        assert e.paper.startswith("seed 002") and e.claim
        assert "Prop. 2.1" in (e.build.__doc__ or "") or "derived" in (e.build.__doc__ or "")


def test_defaults_prove():
    cat = entries()
    for name in NAMES:
        e = cat[name]
        _ok(check(e.build(**e.sizes)))


# ------------------------------------------------------------------ Prop. 2.1(a)

@FAST
@given(n=st.sampled_from([1, 4, 9]), n_x=st.integers(1, 2), n_y=st.integers(1, 2), T=st.integers(1, 5),
       seed=st.integers(1, 10_000))
def test_lrnn_conv_proves_at_random_sizes(n, n_x, n_y, T, seed):
    con = lrnn_conv(n, n_x, n_y, T, seed)
    res = prove(con)
    _ok(res)
    assert res.symbolic_params == ["r"]  # valid for every normalisation 1/sqrt(n)
    assert len(con.epilogue) == 1 and not con.prologue and not con.body
    assert con.layout.shape == (T, n_x + n_y + n_x * n_y)


@FAST
@given(T=st.integers(2, 5), seed=st.integers(1, 10_000), o=st.integers(0, 1), i=st.integers(0, 1))
def test_lrnn_conv_perturbed_tap_rejected(T, seed, o, i):
    con = lrnn_conv(4, 2, 2, T, seed)
    L = impulse_response(*con.rnn, con.params["r"], T)
    ch = con.layout["k"].cols[0] + i * 2 + o
    layer = con.epilogue[0]
    assert layer.h[1, ch] == L[1, o, i]  # the tap at lag 1 is L_1[o, i]
    layer.h[1, ch] += Fraction(1, 8)
    res = prove(con)
    _rejected(res)
    assert res.failure.region == "y"


def test_lrnn_taps_are_the_impulse_response_and_rnn_matches_definition():
    # eq. (9) with n = 4: L_j = 2^{-(j+1)} C W^j F; the RNN of eq. (1) unrolled by hand for T = 2
    W = np.array([[Fraction(1, 2), 0], [1, Fraction(-1, 4)]], dtype=object)
    F = np.array([[1], [2]], dtype=object)
    C = np.array([[3, -1]], dtype=object)
    r = Fraction(1, 2)
    L = impulse_response(W, F, C, r, 2)
    assert L[0, 0, 0] == r * (3 * 1 - 1 * 2)
    assert L[1, 0, 0] == r ** 2 * (C.dot(W.dot(F)))[0, 0]
    x = np.array([[Fraction(5)], [Fraction(-2)]], dtype=object)
    h0 = F[:, 0] * x[0, 0]
    h1 = r * W.dot(h0) + F[:, 0] * x[1, 0]
    y = rnn_outputs(W, F, C, x, r)
    assert y[0, 0] == r * C.dot(h0)[0] and y[1, 0] == r * C.dot(h1)[0]
    assert list(conv_outputs(L, x)[:, 0]) == list(y[:, 0])


def test_lrnn_float_run_at_irrational_normalisation():
    """n = 5: r = 1/sqrt(5) is irrational; the symbolic-r proof covers it, and the layer run in
    float64 matches the float RNN of eq. (1)."""
    n, n_x, n_y, T = 5, 2, 1, 7
    rng = np.random.default_rng(3)
    Wf, Ff, Cf = rng.uniform(-1, 1, (n, n)), rng.uniform(-1, 1, (n, n_x)), rng.uniform(-1, 1, (n_y, n))
    rnn = tuple(np.array([[Fraction(float(v)) for v in row] for row in M], dtype=object) for M in (Wf, Ff, Cf))
    con = lrnn_conv(n, n_x, n_y, T, 1, r=1 / math.sqrt(n), rnn=rnn)
    x = rng.uniform(-1, 1, (3, T, n_x))
    S = con.input_state({"x": x})
    S = con.epilogue[0].map(lambda a: np.array(a, dtype=np.float64)).forward(S)
    got = con.readout(S)["y"]
    for b in range(3):
        h = np.zeros(n)
        for t in range(T):
            h = Wf @ h / math.sqrt(n) + Ff @ x[b, t]
            assert np.allclose(got[b, t], Cf @ h / math.sqrt(n), atol=1e-12, rtol=1e-12)


def test_lrnn_non_square_n_is_bad_input():
    assert main(["s002-lrnn-conv", "--set", "n=5"], out=io.StringIO()) == 2


# ------------------------------------------------------------------ Prop. 2.1(b)

@FAST
@given(T=st.integers(1, 4), n_x=st.integers(1, 2), n_y=st.integers(1, 2), shift=st.booleans())
def test_conv_to_rnn_identity_at_random_sizes(T, n_x, n_y, shift):
    obj = (conv_lrnn_shift if shift else conv_lrnn)(T, n_x, n_y)
    _ok(check(obj))
    s = obj.summary()
    assert s["active_states"] == (T * n_x if shift else T * n_x * n_y) <= s["paper_bound_T_nx_ny"]
    assert math.isqrt(s["hidden_n"]) ** 2 == s["hidden_n"] >= s["active_states"]
    assert s["hidden_n"] < (math.isqrt(s["active_states"] - 1) + 2) ** 2 if s["active_states"] > 1 else True


@FAST
@given(T=st.integers(1, 4), n_x=st.integers(1, 2), n_y=st.integers(1, 2), shift=st.booleans())
def test_conv_to_rnn_perturbed_weight_rejected(T, n_x, n_y, shift):
    obj = ConvToRNN(T, n_x, n_y, "shift" if shift else "vandermonde")
    assert obj.F[0, 0] == 1
    obj.F[0, 0] = 2
    _rejected(check(obj))


def test_vandermonde_nodes_and_readout():
    obj = conv_lrnn(3, 1, 1)
    # W / sqrt(n) = diag(lambda) with distinct nonzero nodes; c V = [L_0, L_1, L_2]
    lam = [obj.W[k, k] / obj.sqrt_n for k in range(3)]
    assert len(set(lam)) == 3 and all(v != 0 for v in lam)
    L = np.array([[[Fraction(2)]], [[Fraction(-1)]], [[Fraction(1, 3)]]], dtype=object)
    c = obj.C_of(L)[0] / obj.sqrt_n
    for j in range(3):
        assert sum(c[k] * lam[k] ** j for k in range(3)) == L[j, 0, 0]


# ------------------------------------------------------------------ CLI

def test_cli_sizes():  # every entry at its defaults: tests/verify/test_registry_cli.py
    out = io.StringIO()
    assert main(["s002-lrnn-conv", "--set", "T=3", "--set", "n=9"], out=out) == 0
    assert "PROVED" in out.getvalue() and "symbolic in r" in out.getvalue()
