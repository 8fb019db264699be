"""Prefix sums held as shared chains (constructions/running_sums.py): the same exact values as
``numpy.add.accumulate``, exact comparison whichever way the chains were built, and a proof that
still fails where a prefix sum is wrong."""
from __future__ import annotations

import flint
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import verify.prover.flint_backend as fb  # registers flint polynomials for lazy prefix sums
from constructions import ops
from constructions.gd_baseconv import gd_baseconv_causal
from constructions.running_sums import RunningSum, prefix_sums
from verify.prover.proof import prove

CTX = flint.fmpq_mpoly_ctx.get(("x", "y", "z"), "lex")
X, Y, Z = CTX.gens()


def polys(draw_ints):
    return [a * X + b * Y * Z + c for a, b, c in draw_ints]


def arr(xs) -> np.ndarray:
    """An object vector of ``xs`` (filled, not ``np.array``: a zero flint polynomial has length 0,
    which numpy would read as an empty sequence)."""
    out = np.empty(len(xs), dtype=object)
    for i, x in enumerate(xs):
        out[i] = x
    return out


triples = st.lists(st.tuples(*(st.integers(-3, 3),) * 3), min_size=1, max_size=12)


@given(triples)
def test_chain_values_equal_accumulate(ts):
    col = arr(polys(ts))
    chain = prefix_sums(col)
    plain = np.add.accumulate(col)
    assert all(isinstance(c, RunningSum) for c in chain)
    for c, p in zip(chain, plain):
        assert c.value() == p
        assert c == p and p == c and not (c != p)
    assert chain[-1].length == len(col)


@given(triples, triples)
def test_chain_equality_is_exact(ts1, ts2):
    """Two chains compare as their sums do, equal terms or not (other orders, other lengths)."""
    a, b = prefix_sums(arr(polys(ts1))), prefix_sums(arr(polys(ts2)))
    assert (a[-1] == b[-1]) == (a[-1].value() == b[-1].value())
    assert (a[-1] != b[-1]) == (a[-1].value() != b[-1].value())


def test_reordered_terms_and_cancellation():
    a = prefix_sums(arr([X, Y, -X]))
    b = prefix_sums(arr([Y, X, -X]))
    assert a[-1] == b[-1]  # other terms, equal sums: the values are compared
    assert a[1] == b[1] and a[0] != b[0]
    zero = prefix_sums(arr([X, -X]))[-1]
    assert zero == 0 and not bool(zero)
    assert bool(a[0])


def test_arithmetic_is_on_the_value_and_structural_ones_keep_the_node():
    c = prefix_sums(arr([X, Y, Z]))[-1]
    assert 1 * c is c and c * 1 is c and c + 0 is c and 0 + c is c and c - 0 is c
    assert c * 0 == 0 and 0 * c == 0
    assert c * X == (X + Y + Z) * X and X * c == X * (X + Y + Z)
    assert c + X == 2 * X + Y + Z and X - c == -Y - Z and c - X == Y + Z and -c == -(X + Y + Z)
    assert c ** 2 == (X + Y + Z) ** 2


def test_nonzero_pattern_does_not_form_the_value(monkeypatch):
    c = prefix_sums(arr([X, Y]))
    monkeypatch.setattr(RunningSum, "value", lambda self: pytest.fail("value formed"))
    S = np.array([[c[0], 0], [c[1], X]], dtype=object)
    assert ops.nonzero_pattern(S).tolist() == [[True, False], [True, True]]


def test_other_types_accumulate_as_before():
    out = prefix_sums(np.array([1, 2, 3], dtype=object))
    assert out.tolist() == [1, 3, 6] and not any(isinstance(x, RunningSum) for x in out)
    assert prefix_sums(np.array([1.5, 2.0])).tolist() == [1.5, 3.5]


def test_flint_ring_keeps_chains_shared():
    ring = fb.FlintRing(None, CTX)
    col = prefix_sums(arr([fb.FPoly(X), fb.FPoly(Y), fb.FPoly(Z)]))
    conv = ring.array(col)
    assert all(isinstance(c, RunningSum) for c in conv)
    assert conv[2].prev is conv[1] and conv[1].prev is conv[0]
    assert conv[2].value() == X + Y + Z and ring.array(col)[2] is conv[2]


def test_causal_gd_proof_holds_and_a_wrong_prefix_sum_fails():
    con = gd_baseconv_causal(6, 2)
    assert prove(con).ok
    bad = gd_baseconv_causal(6, 2)
    P2 = bad.prologue[1]
    lay = bad.layout
    c = lay["Saa"].cols[0] + 1
    h = P2.h.copy()
    h[3, c] = 0  # one lag dropped: the prefix sum at tokens >= 3 of one channel misses a term
    P2.h = h
    r = prove(bad)
    assert not r.ok and r.failure.section == "prologue"
