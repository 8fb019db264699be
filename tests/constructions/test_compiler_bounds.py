"""constructions/compiler/bounds.py: every compile's stated bound is a formula in the circuit's measures
(issue 43 item 4): each compile within it, the value read from the circuit's measures alone (never from the
compile's own width or layers), and seed 003 Thm. H.21's entry the paper's orders, kept apart."""
from __future__ import annotations

import math
import warnings
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import circuits as C
from constructions.compiler import CompileError, compile_circuit
from constructions.compiler.bounds import attention_width, measures, sequence_width
from constructions.compiler.sequence import compile_levelled

from tests.constructions.test_compiler_sequence import placed_circuits

TARGETS = ("baseconv", "baseconv-causal", "lsa", "elsa")


def _within(con) -> dict:
    cm = con.info["compiled"]
    b = cm["bound"]
    f = b["formulas"]
    assert f["layers"]["value"] == b["layers"]
    assert cm["layers"] == len(con.epilogue) <= b["layers"]
    assert f["state_width"]["value"] == b["state_width"]
    assert cm["state_width"] <= b["state_width"]
    if "inner_width" in cm:
        assert cm["inner_width"] <= b["state_width"]
    for entry in f.values():
        assert set(entry) == {"formula", "measures", "value"} and entry["formula"]
        assert all(isinstance(v, int) for v in entry["measures"].values())
    return b


def _draw(data, causal):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", C.PrunedNodesWarning)
        return data.draw(placed_circuits(causal))[0]


@pytest.mark.parametrize("target", TARGETS)
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_random_placed_circuits_compile_within_their_stated_bounds(target, data):
    g = _draw(data, target == "baseconv-causal")
    try:
        con = compile_circuit(g, target=target)
    except CompileError:
        return  # a causal output placed before a token it reads: refused, nothing to bound
    b = _within(con)
    # the unbounded compile states no budget: its bounds read the circuit's measures, whichever compile it chose
    assert not {"C", "M"} & (set(b["formulas"]["layers"]["measures"]) | set(b["formulas"]["state_width"]["measures"]))
    ms = measures(con.compiled_graph if getattr(con, "compiled_graph", None) is not None else con.graph)
    if target in ("lsa", "elsa"):
        assert con.info["compiled"]["bound"]["formulas"]["layers"]["measures"]["md"] == ms["md"]


@pytest.mark.parametrize("causal", [False, True])
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_the_levelled_compile_is_within_its_width_formula(causal, data):
    """The sequence compile itself (the default's own scheme, also where the search picks another), with and
    without a products-per-layer limit and a width floor."""
    g = _draw(data, causal)
    q = data.draw(st.sampled_from([None, 1, 2]), label="per_layer")
    mw = data.draw(st.sampled_from([1, 7]), label="min_width")
    try:
        con = compile_levelled(g, causal=causal, per_layer=q, min_width=mw)
    except CompileError:
        return
    b = _within(con)
    h = getattr(con, "compiled_graph", None)
    assert b["formulas"]["state_width"] == sequence_width(h if h is not None else g, mw)


def _value_from_measures(entry) -> int:
    """The sequence / attention width formulas recomputed from their measures alone."""
    m, text = entry["measures"], entry["formula"]
    if text.startswith("max(min_width, D + I + K + n_out"):
        return max(m["min_width"], m["D"] + m["I"] + m["K"] + m["n_out"], m["A"] + max(m["F"], m["O"]))
    data = m["D"] + m["I"] + m["F"] + m["O"]
    data *= 2 if text.startswith("max(min_width, 2 (") else 1
    if text.endswith("T)"):
        return max(m["min_width"], data, m["n_out"], m["T"])
    return max(m["min_width"], data, m["n_out"]) + m["T"]


@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_a_width_bound_reads_only_the_circuits_measures(data):
    """The value is its formula at its measures; the measures are the circuit's (computed without compiling);
    the same circuit with its input channels renumbered (same measures) gets the same bound."""
    g = _draw(data, False)
    for entry in (sequence_width(g), attention_width(g, False, False), attention_width(g, True, True, 5)):
        assert entry["value"] == _value_from_measures(entry)
        ms = measures(g)
        assert all(entry["measures"][k] == ms[k] for k in entry["measures"] if k in ms)
    pl = C.placement(g)
    chans = sorted({c for _, c in pl.inputs.values()})
    perm = dict(zip(chans, reversed(chans)))
    h = g.copy()
    for _, d in h.nodes(data=True):
        if d["op"] == "input":
            d["channel"] = perm[d["channel"]]
    h = C.validate(h)
    assert measures(h) == measures(g)
    assert sequence_width(h) == sequence_width(g)


def test_gd_step_bounds_are_formulas_with_their_values():
    g = C.gd_step(20, 5, Fraction(1, 16), placed=True)
    ms = measures(g)
    seq = compile_levelled(g).info["compiled"]["bound"]
    assert seq["formulas"]["layers"] == {"formula": "2 md + 1", "measures": {"md": ms["md"]}, "value": 2 * ms["md"] + 1}
    lsa = compile_circuit(g, target="lsa").info["compiled"]["bound"]["formulas"]["state_width"]
    assert lsa["value"] == ms["D"] + ms["I"] + ms["F"] + ms["O"] + ms["T"]


def test_the_theorem_h21_entry_is_the_papers_without_constants():
    g = C.gd_step(3, 2, Fraction(1, 16), placed=True)
    con = compile_circuit(g, target="baseconv")
    h21, bound = con.info["theorem_H21_bound"], con.info["compiled"]["bound"]
    assert "paper" in h21["source"] and "not this compiler's guarantee" in h21["source"]
    assert h21["constants"].startswith("none stated")
    lay = h21["formulas"]["layers"]
    m = con.info["circuit"]
    assert lay["measures"] == {"Delta": m["depth"], "w": m["width"]}
    assert lay["value_at_c1"] == m["depth"] * max(1, math.ceil(math.log2(max(m["width"], 2))))
    assert "value" not in lay and "c1 not stated" in lay["formula"]  # an order, not a guarantee
    assert "theorem" not in str(bound.get("formulas"))  # the compiler's own bounds stand apart
