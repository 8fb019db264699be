"""constructions/compiler/token_sums.py: causal compiles where users place values (issue 43 item 2).
A GD step with x and the new x on the last token compiles on baseconv-causal no wider than the hand
causal construction (constructions/gd_baseconv.py, seed 000 App. D.3.1 causal BaseConv), proved
against the circuit as given, also under channel budgets; terms that read two earlier tokens at once
are left as written."""
from __future__ import annotations

from fractions import Fraction

import pytest

import circuits as C
from constructions.compiler import compile_circuit
from constructions.compiler.budget_search import minimum_width
from constructions.compiler.token_sums import token_sum_form
from constructions.gd_baseconv import gd_baseconv_causal
from verify.prover.proof import prove

from tests.constructions.test_compiler_sequence import run_stack
from tests.support import assert_proved


@pytest.mark.parametrize("n,d", [(3, 2), (12, 4), (20, 5)])
def test_causal_gd_step_on_the_last_token_is_no_wider_than_the_hand_construction(n, d):
    g = C.gd_step(n, d, Fraction(1, 16), placed=True)
    pl = C.placement(g)
    # x and the new x on the last token (A and b pass through in place)
    assert {pl.outputs[o][0] for o in pl.outputs if o.startswith("x_")} == {pl.inputs["x_0"][0]} == {n}
    con = compile_circuit(g, target="baseconv-causal")
    cm = con.info["compiled"]
    hand = gd_baseconv_causal(n, d)
    assert cm["state_width"] <= hand.layout.shape[1] and cm["tokens"] == hand.layout.shape[0] == n + 1
    assert cm["layers"] <= cm["bound"]["layers"] and "token_sum_form" in cm["bound"]
    assert con.compiled_graph is not None and con.graph is not con.compiled_graph
    assert_proved(prove(con))  # against the circuit as given (con.graph)
    vals = {x: Fraction((7 * i) % 11 - 5, 3) for i, x in enumerate(C.inputs(g))}
    assert run_stack(con, vals) == {k: Fraction(v) for k, v in C.evaluate(g, vals).items()}


def test_causal_gd_step_under_budgets():
    g = C.gd_step(6, 2, Fraction(1, 16), placed=True)
    free = compile_circuit(g, target="baseconv-causal").info["compiled"]
    least = minimum_width(C.validate(g), True)
    last = None
    for c in range(least, free["state_width"] + 2):
        con = compile_circuit(g, target="baseconv-causal", channels=c)
        cm = con.info["compiled"]
        assert cm["state_width"] <= c and (last is None or cm["layers"] <= last)
        last = cm["layers"]
        assert_proved(prove(con))
    assert last == free["layers"]


def test_a_term_reading_two_earlier_tokens_is_left_as_written():
    b = C.CircuitBuilder()
    u = b.input("u", token=0, channel=0)
    v = b.input("v", token=1, channel=0)
    w = b.input("w", token=2, channel=0)
    b.output(b.mul(u, v, w), "y", token=2, channel=1)
    b.grid(3, 2)
    g = b.graph()
    assert token_sum_form(g) is None
    con = compile_circuit(g, target="baseconv-causal")
    assert con.compiled_graph is None or "token_sum_form" not in con.info["compiled"]["bound"]
    assert_proved(prove(con))


def test_token_sum_form_has_the_same_polynomials():
    g = C.gd_step(4, 3, Fraction(1, 16), placed=True)
    h = token_sum_form(g)
    assert h is not None and C.polynomials(h) == C.polynomials(g)
    assert C.placement(h).outputs == C.placement(g).outputs and C.placement(h).inputs == C.placement(g).inputs
