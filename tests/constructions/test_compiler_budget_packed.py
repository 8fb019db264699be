"""constructions/compiler/packed.py and the budget search over it (issue 43 item 1): random placed
circuits at every budget from the stated minimum to past the default's width."""
from __future__ import annotations

import warnings
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import circuits as C
from constructions.compiler import CompileError, compile_circuit
from constructions.compiler.budget_search import minimum_width
from constructions.compiler.packed import compile_packed, packed_bound
from verify.prover.proof import prove

from tests.constructions.test_compiler_budget import check
from tests.constructions.test_compiler_sequence import placed_circuits, run_stack
from tests.strategies import rationals_st
from tests.support import assert_proved


@pytest.mark.parametrize("target", ("baseconv", "baseconv-causal"))
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_every_budget_from_the_minimum_proved_within_its_bound_and_layers_never_increase(target, data):
    causal = target == "baseconv-causal"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", C.PrunedNodesWarning)
        g, _ = data.draw(placed_circuits(causal))
    try:
        free = compile_circuit(g, target=target).info["compiled"]
    except CompileError:
        return  # the causal refusal (an output placed before a token it reads), as without a budget
    least = minimum_width(C.validate(g), causal)
    assert least <= free["state_width"]
    with pytest.raises(ValueError, match=f"below the minimum {least}"):
        compile_circuit(g, target=target, channels=least - 1)
    last = None
    for budget in range(least, free["state_width"] + 2):
        con = compile_circuit(g, target=target, channels=budget)
        check(con, g, budget)  # proved, within the budget and the stated bound, outputs in place
        cm = con.info["compiled"]
        assert last is None or cm["layers"] <= last
        last = cm["layers"]
        if budget >= free["state_width"]:
            assert (cm["layers"], cm["state_width"]) == (free["layers"], free["state_width"])
    vals = {n: data.draw(rationals_st(), label=n) for n in C.inputs(g)}
    assert run_stack(con, vals) == {k: Fraction(v) for k, v in C.evaluate(g, vals).items()}


@pytest.mark.parametrize("target", ("baseconv", "baseconv-causal"))
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_the_packed_compile_itself_is_proved_wherever_it_compiles(target, data):
    causal = target == "baseconv-causal"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", C.PrunedNodesWarning)
        g, _ = data.draw(placed_circuits(causal))
    g = C.validate(g)
    lo = C.placement(g).channels
    for budget in range(lo, lo + 6):
        try:
            con = compile_packed(g, "g", causal, budget)
        except CompileError:
            continue
        cm = con.info["compiled"]
        assert cm["state_width"] <= budget and cm["inner_width"] <= budget
        assert cm["layers"] == len(con.epilogue) <= packed_bound(g, budget)["layers"]
        assert_proved(prove(con))


def test_the_packed_gd_step_sums_in_place():
    """GD step 6 x 2 at one channel past its grid: 2 x 2 product layers (one product per token each),
    then one layer whose carries add each -eta sum_i A_ij r_i into x_j's slot: the outputs in place,
    no output route."""
    g = C.validate(C.gd_step(6, 2, Fraction(1, 16), placed=True))
    con = compile_packed(g, "gd", False, C.placement(g).channels + 1)
    cm = con.info["compiled"]
    assert cm["plan"] == ["product"] * 4 + ["merge"]
    assert cm["state_width"] == C.placement(g).channels + 1
    assert_proved(prove(con))
