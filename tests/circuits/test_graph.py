"""Validation, pruning, names and the builder (circuits.graph)."""
import warnings
from fractions import Fraction

import mpmath
import networkx as nx
import numpy as np
import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from circuits import CircuitBuilder, CircuitError, PrunedNodesWarning, inputs, outputs, validate

from tests.strategies import KINDS, circuits_st, malformed_circuits_st


def square_circuit():
    """x(0) -> mul(1) with mult 2, plus const 3 (2) -> add(3): y = x^2 + 3."""
    g = nx.DiGraph()
    g.add_node(0, op="input", name="x")
    g.add_node(1, op="mul")
    g.add_edge(0, 1, mult=2)
    g.add_node(2, op="const", value=3)
    g.add_node(3, op="add", output="y")
    g.add_edges_from([(1, 3), (2, 3)])
    return g


def raises(g, *fragments):
    with pytest.raises(CircuitError) as ei:
        validate(g)
    msg = str(ei.value)
    assert "\n" not in msg
    for f in fragments:
        assert f in msg, (f, msg)
    return msg


def test_valid_circuit_roundtrips_and_normalises_constants():
    g = square_circuit()
    g.nodes[2]["value"] = sympy.Rational(3, 2)
    h = validate(g)
    assert h is not g
    assert h.nodes[2]["value"] == Fraction(3, 2) and type(h.nodes[2]["value"]) is Fraction
    assert type(g.nodes[2]["value"]) is not Fraction  # input not mutated
    assert set(h.edges) == set(g.edges) and h.edges[0, 1]["mult"] == 2


@pytest.mark.parametrize("value", [3, Fraction(-1, 7), sympy.Rational(5, 3), sympy.Integer(-2), np.int64(4)])
def test_exact_constants_accepted(value):
    g = square_circuit()
    g.nodes[2]["value"] = value
    assert validate(g).nodes[2]["value"] == Fraction(int(sympy.Rational(value).p), int(sympy.Rational(value).q))


@pytest.mark.parametrize("value", [0.5, 3.0, np.float64(1.0), mpmath.mpf(2), True, "3", None, sympy.Symbol("a")])
def test_inexact_constants_rejected(value):
    g = square_circuit()
    g.nodes[2]["value"] = value
    raises(g, "node 2: const value", "not exact" if not isinstance(value, bool) else "bool")


def test_cycle():
    g = square_circuit()
    g.add_edge(3, 1)
    msg = raises(g, "on a cycle")
    assert "1 -> 3" in msg or "3 -> 1" in msg


def test_self_loop_is_a_cycle():
    g = square_circuit()
    g.add_edge(3, 3)
    raises(g, "node 3: on a cycle 3 -> 3")


def test_unknown_op():
    g = square_circuit()
    g.nodes[1]["op"] = "sub"
    raises(g, "node 1: unknown op 'sub'")


def test_missing_op():
    g = square_circuit()
    del g.nodes[3]["op"]
    raises(g, "node 3: missing attribute 'op'")


def test_missing_input_name_and_const_value():
    g = square_circuit()
    del g.nodes[0]["name"]
    raises(g, "node 0: input missing attribute 'name'")
    g = square_circuit()
    del g.nodes[2]["value"]
    raises(g, "node 2: const missing attribute 'value'")


def test_bad_input_and_output_names():
    g = square_circuit()
    g.nodes[0]["name"] = 5
    raises(g, "node 0: input name must be a non-empty str")
    g = square_circuit()
    g.nodes[3]["output"] = ""
    raises(g, "node 3: output name must be a non-empty str")


def test_arity_counts_mult():
    g = square_circuit()
    g.edges[0, 1]["mult"] = 1
    raises(g, "node 1: mul needs at least 2 operands, has 1")
    g = square_circuit()
    g.remove_edge(2, 3)
    raises(g, "node 3: add needs at least 2 operands, has 1")


def test_gate_without_operands():
    g = square_circuit()
    g.add_node("lonely", op="add", output="z")
    raises(g, "node 'lonely': add needs at least 2 operands, has 0")


def test_sources_take_no_operands():
    g = square_circuit()
    g.add_edge(0, 2)
    raises(g, "node 2: const takes no operands, has 1")
    g = square_circuit()
    g.add_edge(2, 0, mult=3)
    raises(g, "node 0: input takes no operands, has 3")


@pytest.mark.parametrize("m", [0, -2, 1.0, True, "2"])
def test_bad_mult(m):
    g = square_circuit()
    g.edges[0, 1]["mult"] = m
    raises(g, f"node 1: operand 0 has invalid mult {m!r}")


def test_duplicate_names():
    g = square_circuit()
    g.add_node(9, op="input", name="x", output="w")
    raises(g, "node 9: duplicate input name 'x' (also on node 0)")
    g = square_circuit()
    g.nodes[1]["output"] = "y"
    msg = raises(g, "duplicate output name 'y'")
    assert "node 1" in msg and "node 3" in msg


def test_no_outputs():
    g = square_circuit()
    del g.nodes[3]["output"]
    raises(g, "no outputs")


def test_not_a_simple_digraph():
    with pytest.raises(CircuitError, match="networkx.DiGraph"):
        validate(nx.MultiDiGraph(square_circuit()))
    with pytest.raises(CircuitError, match="networkx.DiGraph"):
        validate(nx.Graph())


def test_bad_node_id_type():
    g = square_circuit()
    g.add_node((1, 2), op="input", name="t")
    raises(g, "node (1, 2): node ids must be int or str")


def test_pruning_warns_and_names_dead_nodes():
    g = square_circuit()
    g.add_node(10, op="const", value=1)
    g.add_node(11, op="mul")
    g.add_edges_from([(0, 11), (10, 11)])
    g.add_node(12, op="input", name="unused")
    with pytest.warns(PrunedNodesWarning, match=r"pruned 2 node\(s\) feeding no output: 10, 11"):
        h = validate(g)
    assert set(h.nodes) == {0, 1, 2, 3, 12}  # unused inputs are kept
    assert set(g.nodes) == {0, 1, 2, 3, 10, 11, 12}  # original untouched
    assert inputs(h) == ["unused", "x"]


def test_no_warning_when_nothing_pruned():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        validate(square_circuit())


def test_inputs_outputs_sorted_and_string_ids():
    g = nx.DiGraph()
    for n, name in [("b", "zeta"), ("a", "alpha"), ("c", "mid")]:
        g.add_node(n, op="input", name=name)
    g.add_node("s", op="add", output="z_out")
    g.add_node("p", op="mul", output="a_out")
    g.add_edges_from([("a", "s"), ("b", "s"), ("c", "p"), ("s", "p")])
    h = validate(g)
    assert inputs(h) == ["alpha", "mid", "zeta"]
    assert outputs(h) == ["a_out", "z_out"]


def test_builder_merges_repeated_operands():
    b = CircuitBuilder()
    x = b.input("x")
    y = b.mul(x, x, b.const(Fraction(1, 2)))
    b.output(y, "y")
    g = b.graph()
    assert g.edges[x, y]["mult"] == 2
    assert g.nodes[y]["op"] == "mul" and outputs(g) == ["y"]
    with pytest.raises(CircuitError, match="not exact"):
        b.const(0.5)
    with pytest.raises(CircuitError, match="node 99: unknown operand"):
        b.add(x, 99)
    with pytest.raises(CircuitError, match="node 42"):
        b.output(42, "z")


def test_builder_mul_of_single_operand_is_refused_at_the_call():
    b = CircuitBuilder()
    x = b.input("x")
    with pytest.raises(CircuitError, match="mul needs at least 2 operands, got 1, at .*test_graph.py:"):
        b.mul(x)


@given(circuits_st())
def test_strategy_circuits_are_valid_without_pruning(g):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        h = validate(g)
    assert set(h.nodes) == set(g.nodes)
    assert outputs(h)


@given(malformed_circuits_st())
def test_malformed_strategy_always_raises_expected_message(case):
    g, expected = case
    with pytest.raises(CircuitError) as ei:
        validate(g)
    assert expected in str(ei.value)
    assert "\n" not in str(ei.value)


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=10)  # per kind; the mixed test above runs the profile's full budget
@given(data=st.data())
def test_each_malformation_kind(kind, data):
    g, expected = data.draw(malformed_circuits_st(kinds=(kind,)))
    with pytest.raises(CircuitError) as ei:
        validate(g)
    assert expected in str(ei.value)


def test_validate_in_place_checks_and_prunes_the_graph_itself():
    """``in_place=True`` (a graph its caller built and gives up, e.g. a file's) returns ``g`` itself,
    pruned and normalised, and refuses what the copying form refuses."""
    import warnings

    import networkx as nx
    import pytest

    from circuits.graph import CircuitError, PrunedNodesWarning, validate

    g = nx.DiGraph()
    g.add_node("x", op="input", name="x")
    g.add_node("c", op="const", value=__import__("fractions").Fraction(1, 2))
    g.add_node("y", op="mul", output="y")
    g.add_edges_from([("x", "y"), ("c", "y")])
    g.add_node("dead", op="add")
    g.add_edges_from([("x", "dead"), ("c", "dead")])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always", PrunedNodesWarning)
        h = validate(g, in_place=True)
    assert h is g and "dead" not in g and any(issubclass(x.category, PrunedNodesWarning) for x in w)
    assert g.nodes["c"]["value"] == __import__("fractions").Fraction(1, 2)
    bad = nx.DiGraph()
    bad.add_node("y", op="mul", output="y")
    with pytest.raises(CircuitError, match="at least 2 operands"):
        validate(bad, in_place=True)
