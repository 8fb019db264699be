"""constructions/compiler/budget.py: baseconv / baseconv-causal under a channel budget C.

Every budget claimed is proved exactly: every state and every layer's inner channels at most C,
layers at most the stated bound, the outputs at their places; a budget below the stated minimum
is refused naming it."""
from __future__ import annotations

import warnings
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import circuits as C
from constructions.compiler import CompileError, compile_circuit
from constructions.compiler.benes import apply_stages, benes_stages
from constructions.compiler.budget import (EXTRA, LEVEL_MIN, LEVEL_PARALLEL, compile_budget, layers_of,
                                           route_layers, grid_channels, minimum_channels)
from constructions.compiler.budget_search import minimum_width, pareto
from constructions.compiler.packed import compile_packed
from constructions.compiler.routing import LayerSpec
from verify.prover.proof import prove

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
def test_the_budget_machine_compiles_and_proves_every_builder_at_every_budget_from_its_minimum(builder, target):
    """The one-value-per-slot machine (constructions/compiler/budget.py) itself, one of the compiles a
    budget search tries."""
    g = C.validate(BUILDERS[builder]())
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
    for budget in sorted(set(range(least, least + 3)) | ({LEVEL_MIN, LEVEL_PARALLEL} if not causal else set())):
        if budget < least:
            continue
        con = compile_budget(g, builder, causal, budget)
        check(con, g, budget)
        bound = con.info["compiled"]["bound"]
        if causal or budget < LEVEL_MIN:
            assert bound["scheme"] == "one product at a time" and "why" in bound
        elif bound["scheme"] == "level-parallel":  # the stated rule, recomputed
            K = bound["K"]
            assert 2 ** K >= con.info["compiled"]["tokens"] > 2 ** (K - 1) or K == 0
            assert bound["per_level"] == (6 * K - 1 if budget >= LEVEL_PARALLEL else 12 * K - 3)
        else:  # the small-circuit choice: fewer layers one product at a time, saying so
            assert "fewer layers than the level-parallel scheme" in bound["why"]


def test_a_budget_below_the_minimum_is_refused_naming_it():
    g = BUILDERS["gd_step"]()
    least = minimum_width(C.validate(g), False)
    # the narrowest compile tried: here the packed levelled compile on the grid's own channels (x moves
    # into the carry of a channel holding A at other tokens), the least width any compile can have; it
    # has the default's layers, so it is the unbounded compile too (the least of the compiles tried)
    free = compile_circuit(g).info["compiled"]
    assert least == grid_channels(g) == free["state_width"] < grid_channels(g) + EXTRA
    assert "packed levelled compile" in free["bound"]["choice"] and "channel_budget" not in free
    with pytest.raises(ValueError, match=f"channel budget {least - 1} is below the minimum {least} for baseconv"):
        compile_circuit(g, channels=least - 1)
    assert compile_circuit(g, channels=least).info["compiled"]["state_width"] <= least
    with pytest.raises(ValueError, match="channels applies to the baseconv"):
        compile_circuit(g, target="lsa", channels=least)


def test_without_a_budget_the_compile_is_the_smallest_depth():
    g = BUILDERS["gd_step"]()
    free = compile_circuit(g).info["compiled"]
    tight = compile_circuit(g, channels=grid_channels(g) + EXTRA).info["compiled"]
    assert free["layers"] <= tight["layers"] and tight["state_width"] <= free["state_width"]
    assert "channel_budget" not in free


def test_a_budget_the_default_compile_meets_is_the_default_compile():
    """dot of 16 with the output on the last token compiles to 2 channels by default: every budget
    from 2 is accepted and gives that compile (not refused as below the grid's channels + 2)."""
    g = C.from_function(lambda a, b: {"y": (a * b).sum()}, a=(16,), b=(16,), placed=True)
    for target in TARGETS:
        free = compile_circuit(g, target=target).info["compiled"]
        for c in range(free["state_width"], free["state_width"] + 4):
            cm = compile_circuit(g, target=target, channels=c).info["compiled"]
            assert (cm["layers"], cm["state_width"], cm["channel_budget"]) == (free["layers"], free["state_width"], c)
        assert minimum_width(C.validate(g), target == "baseconv-causal") <= free["state_width"]


@pytest.mark.parametrize("target", TARGETS)
@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_random_placed_circuits_layers_never_increase_with_the_budget(target, data):
    """For a random placed circuit and budgets from the minimum to past the default's width: each
    compile proved and within its stated bound and the budget; layers non-increasing in the budget;
    at the default's width, the default compile; --pareto's points each a compile of that shape."""
    causal = target == "baseconv-causal"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", C.PrunedNodesWarning)
        g, T = data.draw(placed_circuits(causal))
    try:
        free = compile_circuit(g, target=target).info["compiled"]
    except CompileError:
        return  # the causal refusal (an output placed before a token it reads), as without a budget
    least = minimum_width(C.validate(g), causal)
    assert least <= free["state_width"]
    last = None
    budgets = sorted({least, free["state_width"], free["state_width"] + 1}
                     | {data.draw(st.integers(least, free["state_width"]), label="budget")})
    for budget in budgets:
        con = compile_circuit(g, target=target, channels=budget)
        check(con, g, budget)
        cm = con.info["compiled"]
        if last is not None:
            assert cm["layers"] <= last
        last = cm["layers"]
        if budget >= free["state_width"]:
            assert (cm["layers"], cm["state_width"]) == (free["layers"], free["state_width"])
    vals = {n: data.draw(rationals_st(), label=n) for n in C.inputs(g)}
    assert run_stack(con, vals) == {k: Fraction(v) for k, v in C.evaluate(g, vals).items()}
    front = pareto(g, target)
    # the front ends at the default's layers: the default compile itself, or a narrower compile with as few
    # layers (which dominates it; a causal token-sum compile can be one)
    assert front[-1]["layers"] == free["layers"] and front[-1]["channels"] <= free["state_width"]
    assert front[-1]["budget"] is None or front[-1]["channels"] < free["state_width"]
    assert all(a["channels"] < b["channels"] and a["layers"] > b["layers"] for a, b in zip(front, front[1:]))


def test_cli_channels_and_pareto(tmp_path, capsys):
    import json

    from verify.construct import main

    f, j = tmp_path / "gd.json", tmp_path / "r.json"
    C.dump(C.gd_step(3, 2, Fraction(1, 16), placed=True), f)
    assert main(["circuit", "--graph", str(f), "--channels", "8", "--pareto", "--trials", "2",
                 "--json", str(j)]) == 0
    rep = json.loads(j.read_text())
    assert rep["compiled"]["state_width"] <= 8 and rep["proof"]["ok"] is True
    # GD step 3 x 2 (grid 5 channels, default levelled compile 3 layers x 7): the shared-carry compile, 3
    # layers on the grid's 5 channels, is the unbounded compile and the whole frontier
    assert [(p["channels"], p["layers"], p["budget"]) for p in rep["pareto"]] == [(5, 3, None)]
    assert "layers/channels frontier" in capsys.readouterr().out
    least = minimum_width(C.load(f), False)
    assert main(["circuit", "--graph", str(f), "--channels", str(least - 1)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"below the minimum {least}" in err
    assert main(["circuit", "--graph", str(f), "--channels", "8", "--target", "lsa"]) == 2
    assert "--channels applies to --target baseconv" in capsys.readouterr().err


def _run_layers(specs, T, Cw, x):
    S = np.zeros((T, Cw), dtype=object)
    S[:] = Fraction(0)
    S[:, 0] = x
    for L in layers_of(specs, T, Cw, False):
        S = L.forward(S)
    return S


@settings(max_examples=40)
@given(data=st.data())
def test_benes_routes_every_permutation_as_exact_layers(data):
    """The looping algorithm's settings route any permutation of 2^k tokens in 2k - 1 stages; as
    BaseConv layers of masked shifts (3 inner channels) on rationals, the values arrive exactly,
    scaled by the last layer's masks, everything else zero."""
    k = data.draw(st.integers(0, 6), label="k")
    n = 1 << k
    perm = data.draw(st.permutations(range(n)), label="perm")
    stages = benes_stages(perm)
    assert len(stages) == max(0, 2 * k - 1) and [j for j, _ in stages] == \
        list(range(k)) + list(range(k - 2, -1, -1))
    assert all(sw[t] == sw[t ^ (1 << j)] for j, sw in stages for t in range(n))
    out = apply_stages(stages, list(range(n)))
    assert all(out[perm[t]] == t for t in range(n))
    # a partial map (some tokens routed, the rest must come out zero), as layers 0 -> 1
    keep = data.draw(st.lists(st.booleans(), min_size=n, max_size=n), label="routed")
    pairs = {t: perm[t] for t in range(n) if keep[t]} or {0: perm[0]}
    coef = {d: Fraction(data.draw(st.integers(-5, 5).filter(bool), label="c"), 3) for d in pairs.values()}
    moves = route_layers(pairs, coef, 0, 1)
    assert len(moves) <= max(1, 2 * k - 1)
    specs = []
    for mv in moves:
        sp = LayerSpec("route")
        for src, dst, lag, m in mv:
            i = sp.new_inner()
            sp.W_in[(src, i)] = sp.h[(lag % n, i)] = sp.W_out[(i, dst)] = Fraction(1)
            sp.b_gate.update({(t, i): v for t, v in m.items()})
        assert sp.inner <= 3
        specs.append(sp)
    x = [Fraction(data.draw(st.integers(-9, 9), label="x")) + Fraction(1, 7) for _ in range(n)]
    S = _run_layers(specs, n, 3, x)  # inner channels = state channels in BaseConv.zeros
    want = [Fraction(0)] * n
    for s, d in pairs.items():
        want[d] = coef[d] * x[s]
    assert list(S[:, 1]) == want
    assert all(v == 0 for v in S[:, 0]) or len(moves) == 0


def test_gd_step_20x5_budget_machine_at_its_minimum_is_tens_of_layers():
    """The budget machine on GD step gd_step(20, 5)'s 21 x 11 grid at its least budget 13 (one product
    at a time: 858 layers); level-parallel: 97 layers on 1024 tokens, within md (6K - 1) + 8K - 1 = 197."""
    g = C.validate(C.gd_step(20, 5, Fraction(1, 16), placed=True))
    least = minimum_channels(g, False)
    assert least == 13
    con = compile_budget(g, "gd", False, least)
    cm = con.info["compiled"]
    assert cm["bound"]["scheme"] == "level-parallel"
    assert cm["layers"] <= 100 and cm["layers"] <= cm["bound"]["layers"] == 2 * (6 * 10 - 1) + 8 * 10 - 1
    assert cm["state_width"] == 13 >= cm["inner_width"] and cm["tokens"] == 1024
    assert_proved(prove(con))


def test_gd_step_20x5_budgets_trade_channels_for_layers():
    """GD step 20 x 5 (grid 21 x 11, default 3 layers on 16 channels). The packed compile with carries
    shared at disjoint tokens: layer 1 moves each x_j (token 20) into the carry of A's channel j (tokens
    0..19) and forms every A_ij x_j (6 carries + 5 products = 11 inner channels); layer 2 forms every
    A_ij r_i into channel 6 + j, and the same inner channel (gate A's channel j, which holds x_j at
    token 20, conv B_conv alone there) moves x_j back to its place (20, 6 + j); layer 3 adds each sum
    over i into x_j's slot through channel 6 + j's carry: 3 layers, the default's, on the grid's own 11
    channels, the least width any compile has (the state holds the 11-channel grid). So every budget
    from 11 up to the default's width gives 3 layers on 11 channels, and that one point is the whole
    frontier (the default compile is dominated); the plain packed compile's 12 x 11, 13 x 7, 14 x 5
    are still made, and beaten."""
    g = C.gd_step(20, 5, Fraction(1, 16), placed=True)
    gv = C.validate(g)
    assert minimum_width(gv, False) == 11 == grid_channels(gv)
    for c in range(11, 16):
        con = compile_circuit(g, channels=c, reassociate=False)
        check(con, g, c)
        cm = con.info["compiled"]
        assert (cm["layers"], cm["state_width"], cm["plan"]) == (3, 11, ["product", "product", "merge"])
        assert cm["bound"]["layers"] == 4  # md + 2
    for c, layers in {12: 11, 13: 7, 14: 5}.items():  # the plain mode, still tried
        assert compile_packed(gv, "gd", False, c).info["compiled"]["layers"] == layers
    with pytest.raises(ValueError, match="below the minimum 11"):
        compile_circuit(g, channels=10)
    front = [(p["channels"], p["layers"]) for p in pareto(g, "baseconv", reassociate=False)]
    assert front == [(11, 3)]
