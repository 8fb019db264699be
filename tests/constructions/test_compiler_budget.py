"""constructions/compiler/budget.py: baseconv / baseconv-causal under a channel budget C.

Every budget claimed is proved exactly: every state and every layer's inner channels at most C,
layers at most the stated bound, the outputs at their places; a budget below the stated minimum
is refused naming it."""
from __future__ import annotations

import warnings
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import circuits as C
from constructions.compiler import CompileError, compile_circuit
from constructions.compiler.budget import EXTRA, grid_channels, minimum_channels
from verify.proof import prove

from tests.constructions.test_compiler_sequence import placed_circuits, run_stack
from tests.strategies import rationals_st
from tests.support import assert_proved

TARGETS = ("baseconv", "baseconv-causal")


def _unplace_outputs(g):
    g = g.copy()
    for v in C.output_nodes(g).values():
        d = g.nodes[v]
        for k in ("token", "channel") if d["op"] != "input" else ("output_token", "output_channel"):
            d.pop(k, None)
    return C.validate(g)


BUILDERS = {
    "dot": lambda: C.dot(3, placed=True),
    "matvec": lambda: C.matvec(2, 2, placed=True),
    "gd_step": lambda: C.gd_step(2, 2, Fraction(1, 16), placed=True),
    "ridge_gd_step": lambda: C.ridge_gd_step(2, 1, Fraction(1, 16), Fraction(1, 10), placed=True),
    "gd_step_gram": lambda: C.gd_step(2, 1, Fraction(1, 16), placed=True, form="gram"),
    "newton_schulz_step": lambda: C.newton_schulz_step(2, 2, placed=True),
    "horner": lambda: C.horner([1, -2, 3, Fraction(1, 2)], placed=True),
}


def check(con, g, budget):
    cm = con.info["compiled"]
    assert con.layout.shape[1] == cm["state_width"] <= budget
    assert all(L.W_in.shape[0] == L.W_in.shape[1] == cm["state_width"] for L in con.epilogue)
    assert cm["channel_budget"] == budget
    assert cm["inner_width"] <= budget
    assert cm["layers"] == len(con.epilogue) <= cm["bound"]["layers"]
    assert cm["tokens"] >= C.placement(g).tokens
    assert_proved(prove(con))
    for name, place in C.placement(g).outputs.items():
        if place is not None:
            assert tuple(cm["outputs"][name]) == place


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("builder", sorted(BUILDERS))
def test_every_builder_compiles_and_proves_at_every_budget_from_the_minimum(builder, target):
    g = BUILDERS[builder]()
    causal = target == "baseconv-causal"
    try:
        least = minimum_channels(g, causal)
    except CompileError:  # outputs placed before the tokens they read: the causal refusal
        assert causal
        g = _unplace_outputs(g)
        least = minimum_channels(g, causal)
    assert least >= grid_channels(g) + EXTRA
    if not causal:
        assert least == grid_channels(g) + EXTRA
    for budget in range(least, least + 3):
        check(compile_circuit(g, target=target, channels=budget), g, budget)


def test_a_budget_below_the_minimum_is_refused_naming_it():
    g = BUILDERS["gd_step"]()
    least = grid_channels(g) + EXTRA
    with pytest.raises(ValueError, match=f"channel budget {least - 1} is below the minimum {least} for baseconv"):
        compile_circuit(g, channels=least - 1)
    with pytest.raises(ValueError, match="channels applies to the baseconv"):
        compile_circuit(g, target="lsa", channels=least)


def test_without_a_budget_the_compile_is_the_smallest_depth():
    g = BUILDERS["gd_step"]()
    free = compile_circuit(g).info["compiled"]
    tight = compile_circuit(g, channels=grid_channels(g) + EXTRA).info["compiled"]
    assert free["layers"] < tight["layers"] and tight["state_width"] < free["state_width"] or \
        tight["state_width"] <= free["state_width"]
    assert "channel_budget" not in free


@pytest.mark.parametrize("target", TARGETS)
@settings(max_examples=25)
@given(data=st.data())
def test_random_placed_circuits_at_random_budgets_prove_within_the_bound(target, data):
    causal = target == "baseconv-causal"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", C.PrunedNodesWarning)
        g, T = data.draw(placed_circuits(causal))
    try:
        least = minimum_channels(g, causal)
    except CompileError:
        return  # the causal refusal (an output placed before a token it reads), as without a budget
    budget = least + data.draw(st.integers(0, 3), label="budget above the minimum")
    con = compile_circuit(g, target=target, channels=budget)
    check(con, g, budget)
    vals = {n: data.draw(rationals_st(), label=n) for n in C.inputs(g)}
    assert run_stack(con, vals) == {k: Fraction(v) for k, v in C.evaluate(g, vals).items()}


def test_cli_channels_and_pareto(tmp_path, capsys):
    import json

    from verify.construct import main

    f, j = tmp_path / "gd.json", tmp_path / "r.json"
    C.dump(C.gd_step(3, 2, Fraction(1, 16), placed=True), f)
    assert main(["circuit", "--graph", str(f), "--channels", "8", "--pareto", "--trials", "2",
                 "--json", str(j)]) == 0
    rep = json.loads(j.read_text())
    assert rep["compiled"]["state_width"] <= 8 and rep["proof"]["ok"] is True
    assert rep["pareto"][-1]["budget"] is None and all(p["channels"] >= 7 for p in rep["pareto"])
    assert "layers/channels frontier" in capsys.readouterr().out
    assert main(["circuit", "--graph", str(f), "--channels", "6"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "below the minimum 7" in err
    assert main(["circuit", "--graph", str(f), "--channels", "8", "--target", "lsa"]) == 2
    assert "--channels applies to --target baseconv" in capsys.readouterr().err
