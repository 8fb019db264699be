"""``compiled-baseconv-causal``: A^T A and A^T b hoisted into a compiled prologue, one layer per
step (seed 000 App. D.3.1 eq. (47)); and the sequence compiler's output-route fold that gives it."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import circuits as C
from constructions.catalogue import entries, gd_architectures
from constructions.compiled_gd import (REFERENCE_GRAM, compiled_gd, gram_prediction_circuit,
                                       gram_prologue_circuit, gram_step_circuit)
from constructions.compiler import compile_circuit
from constructions.gd_baseconv import gd_baseconv_causal
from constructions.layout import Layout
from numerics.backends import Backend
from verify.prover.proof import prove

from tests.support import assert_proved


def _width(d: int) -> int:
    return d * d + 3 * d + 1 + (d <= 2)


@pytest.mark.parametrize("n,d", [(1, 1), (2, 2), (3, 3), (5, 4), (20, 5)])
@pytest.mark.parametrize("lam", [0, Fraction(1, 10)])
def test_one_layer_per_step_proved_and_narrower_than_the_hand_construction(n, d, lam):
    con = compiled_gd(n, d, target="baseconv-causal", lam=lam)
    assert (len(con.prologue), len(con.body), len(con.epilogue)) == (2, 1, 1)  # depth 3 + k, as the hand one
    assert con.compiled["body"]["plan"] == ["product + outputs"]
    assert con.compiled["prologue"]["plan"] == ["product", "route (outputs)"]
    hand = gd_baseconv_causal(n, d)
    assert con.layout.shape == (n + 1, _width(d)) and con.layout.shape[1] < hand.layout.shape[1]
    res = prove(con)
    assert_proved(res)
    assert res.sections == {"prologue": True, "body": True, "epilogue": True}


def test_registry_entry_matches_construction():
    e = gd_architectures()["compiled-baseconv-causal"]
    assert entries()[e.name] is e and e.depth == "3 + k" and e.paper == REFERENCE_GRAM
    con = e.build(5, 3)
    assert con.name == e.name and con.reference == e.paper
    assert con.steps_for_depth(10) == 7
    for arch in ("compiled-baseconv", "compiled-baseconv-causal"):  # the prediction epilogue: 1 layer (folded)
        e = gd_architectures()[arch]
        con = e.build(5, 3)
        base, per = e.depth.split(" + ")
        assert all(con.depth(k) == int(base) + int(per[:-1] or 1) * k for k in range(5)), arch


def test_tracks_ridge_gd_in_float64_and_carries_the_gram_sums():
    con = compiled_gd(6, 3, target="baseconv-causal", lam=Fraction(1, 10))
    rng = np.random.default_rng(5)
    A, b, q = rng.standard_normal((8, 6, 3)), rng.standard_normal((8, 6)), rng.standard_normal((8, 3))
    v = {"A": A, "b": b, "q": q, "x": rng.standard_normal((8, 3))}
    be = Backend("numpy", "float64")
    S, done = con.run(v, 5, cast=be.cast_layer)
    assert done == con.depth(5) == 8
    x = v["x"]
    for _ in range(5):
        x = x - (A.transpose(0, 2, 1) @ (A @ x[..., None] - b[..., None]))[..., 0] / 16 - x / 160
    got = con.readout(S)
    assert np.abs(got["x"] - x).max() < 1e-12
    assert np.abs(got["prediction"] - (q * x).sum(-1)).max() < 1e-12
    assert np.abs(got["ATb"] - np.einsum("...ti,...t->...i", A, b)).max() < 1e-12


def test_the_three_circuits_compute_the_gram_form():
    n, d = 3, 2
    vals = {f"A_{i}_{j}": Fraction(i + 2 * j + 1, 3) for i in range(n) for j in range(d)}
    vals |= {f"b_{i}": Fraction(i - 1) for i in range(n)} | {"q_0": Fraction(2), "q_1": Fraction(-1)}
    vals |= {"x_0": Fraction(1, 2), "x_1": Fraction(3)}
    A = np.array([[vals[f"A_{i}_{j}"] for j in range(d)] for i in range(n)], dtype=object)
    bb = np.array([vals[f"b_{i}"] for i in range(n)], dtype=object)
    G, c = A.T.dot(A), A.T.dot(bb)
    pro = C.evaluate(gram_prologue_circuit(n, d), vals)
    assert pro["G_0_1"] == G[0, 1] and pro["G_1_1"] == G[1, 1] and pro["c_0"] == c[0]
    step = C.evaluate(gram_step_circuit(n, d, Fraction(1, 16), Fraction(1, 10)), vals | pro)
    x = np.array([vals["x_0"], vals["x_1"]], dtype=object)
    want = x - (G.dot(x) - c + x / 10) / 16
    assert [step["x_0"], step["x_1"]] == list(want)
    assert C.evaluate(gram_prediction_circuit(n, d), vals | pro)["y"] == 2 * vals["x_0"] - vals["x_1"]


# ------------------------------------------------------------------ the fold (sequence._fold_outputs)

def _local_products(junk: bool = False):
    """Products within a token, outputs at that token: the output map folds into W_out (the carry
    of channel 0 keeps u and doubles z: split in two masked channels).  With ``junk`` the product
    w w reads channel 0, which holds u at token 0 too: u u is formed there, a gated channel whose
    row would differ by token, so not folded."""
    b = C.CircuitBuilder()
    u, v = b.input("u", token=0, channel=0), b.input("v", token=0, channel=1)
    w = b.input("w", token=1, channel=0 if junk else 2)
    b.output(u, "u", token=0, channel=0)
    b.output(b.add(b.mul(u, v), b.const(3)), "y", token=0, channel=2)
    if not junk:
        b.output(b.mul(b.const(2), b.input("z", token=1, channel=0)), "z", token=1, channel=0)
    b.output(b.mul(w, w), "q", token=1, channel=1)
    return b.graph()


def _moved_sum():
    """Products summed over tokens by the output route: not a per-token map, not folded."""
    b = C.CircuitBuilder()
    us = [b.input(f"u{i}", token=i, channel=0) for i in range(3)]
    vs = [b.input(f"v{i}", token=i, channel=1) for i in range(3)]
    b.output(b.add(*[b.mul(u, v) for u, v in zip(us, vs)]), "s", token=2, channel=2)
    return b.graph()


@pytest.mark.parametrize("target", ["baseconv", "baseconv-causal"])
def test_a_per_token_output_map_is_folded_and_a_token_sum_is_not(target):
    con = compile_circuit(_local_products(), target=target, reassociate=False)
    assert con.info["compiled"]["plan"] == ["product + outputs"]
    assert_proved(prove(con))
    for g in (_moved_sum(), _local_products(junk=True)):
        con = compile_circuit(g, target=target, reassociate=False)
        assert con.info["compiled"]["plan"] == ["product", "route (outputs)"]
        assert_proved(prove(con))


def test_a_wrong_folded_weight_is_refuted():
    con = compile_circuit(_local_products(), target="baseconv-causal", reassociate=False)
    L = con.epilogue[0]
    W = L.W_out.copy()
    i, j = next(zip(*np.nonzero(W != 0)))
    W[i, j] = W[i, j] + 1
    L.W_out = W
    assert not prove(con).ok


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from(["baseconv", "baseconv-causal"]))
def test_random_single_token_output_maps_fold_and_prove(seed, target):
    """Random products of inputs within each token (each token's inputs in channels of their own, so
    no product is formed where nothing was asked), outputs random combinations at that token."""
    rng = np.random.default_rng(seed)
    T, Cn = int(rng.integers(1, 4)), int(rng.integers(2, 4))
    b = C.CircuitBuilder()
    ins = {(t, c): b.input(f"i{t}_{c}", token=t, channel=t * Cn + c) for t in range(T) for c in range(Cn)}
    for t in range(T):
        prods = [b.mul(ins[(t, int(rng.integers(Cn)))], ins[(t, int(rng.integers(Cn)))]) for _ in range(2)]
        terms = prods + [ins[(t, int(rng.integers(Cn)))]]
        coefs = [int(rng.integers(1, 3)), int(rng.integers(1, 3)), int(rng.integers(-2, 3))]  # no cancelling
        b.output(b.add(*[b.mul(b.const(k), x) for k, x in zip(coefs, terms)]), f"o{t}", token=t, channel=T * Cn)
    con = compile_circuit(b.graph(), target=target, reassociate=False)
    assert con.info["compiled"]["plan"][-1] == "product + outputs"
    assert_proved(prove(con))
    vals = {f"i{t}_{c}": Fraction(int(rng.integers(-5, 6)), 3) for t in range(T) for c in range(Cn)}
    S = con.input_state(vals)
    for L in con.epilogue:
        S = L.forward(S)
    want = C.evaluate(con.graph, vals)
    assert all(S[con.output_slots[k]] == v for k, v in want.items())


def test_layout_regions_name_the_hoisted_sums():
    con = compiled_gd(4, 3, target="baseconv-causal")
    assert isinstance(con.layout, Layout) and {"ATA", "ATb", "x", "q"} <= set(con.layout.regions)
    assert con.layout["ATA"].cols == (7, 13) and con.layout["ATb"].cols == (13, 16)
