"""Hypothesis strategies for arithmetic circuits (see :mod:`circuits`).

* :func:`rationals_st` -- small exact ``Fraction`` values.
* :func:`ls_problem_st` -- one exact least-squares problem ``{A, b, x, q}``.
* :func:`circuits_st` -- random *valid* circuits, drawn choice by choice with
  ``st.composite`` so that Hypothesis can shrink them.
* :func:`malformed_circuits_st` -- ``(graph, expected_substring)`` pairs: a
  valid circuit with exactly one injected defect; ``circuits.validate`` must
  raise ``CircuitError`` whose message contains ``expected_substring``.
"""
from __future__ import annotations

from fractions import Fraction

import networkx as nx
from hypothesis import strategies as st


def rationals_st(max_abs: int = 4, max_denominator: int = 4) -> st.SearchStrategy[Fraction]:
    """Fractions in ``[-max_abs, max_abs]`` with denominator <= ``max_denominator``."""
    return st.fractions(min_value=-max_abs, max_value=max_abs, max_denominator=max_denominator)


@st.composite
def ls_problem_st(draw, n: int, d: int, elem=None):
    """An exact least-squares problem: object arrays ``A`` (n x d), ``b`` (n), ``x``, ``q`` (d)."""
    import numpy as np

    elem = elem or st.fractions(min_value=-3, max_value=3, max_denominator=5)

    def vec(m):
        a = np.empty(m, dtype=object)
        for i in range(m):
            a[i] = draw(elem)
        return a

    return {"A": vec(n * d).reshape(n, d), "b": vec(n), "x": vec(d), "q": vec(d)}


@st.composite
def circuits_st(draw, max_inputs: int = 4, max_gates: int = 10, max_arity: int = 3, max_degree: int = 6):
    """A valid circuit: 1..max_inputs inputs ``x0..``, 1..max_gates add/mul gates.

    Each gate draws its operands among earlier nodes (repeats -> ``mult``)
    or fresh constants.  Every gate that no other gate uses is an output
    (``y0, y1, ...``), plus optionally some inner nodes, so nothing is
    pruned.  Node ids are ints or, in some draws, strings ``"n<i>"``.  A
    ``mul`` whose formal degree would exceed ``max_degree`` becomes an
    ``add`` (keeps the expanded polynomials small).
    """
    n_in = draw(st.integers(1, max_inputs), label="n_inputs")
    n_gates = draw(st.integers(1, max_gates), label="n_gates")
    str_ids = draw(st.booleans(), label="string ids")
    nid = (lambda i: f"n{i}") if str_ids else (lambda i: i)
    g = nx.DiGraph()
    deg = {}
    for i in range(n_in):
        g.add_node(nid(i), op="input", name=f"x{i}")
        deg[nid(i)] = 1
    gates = []
    for _ in range(n_gates):
        pool = list(g.nodes)
        arity = draw(st.integers(2, max_arity))
        ops: dict = {}
        for _ in range(arity):
            if draw(st.integers(0, 4)) == 0:  # a fresh constant
                c = nid(g.number_of_nodes())
                g.add_node(c, op="const", value=draw(rationals_st()))
                deg[c] = 0
                u = c
            else:
                u = pool[draw(st.integers(0, len(pool) - 1))]
            ops[u] = ops.get(u, 0) + 1
        op = draw(st.sampled_from(["add", "mul"]))
        d = sum(m * deg[u] for u, m in ops.items())
        if op == "mul" and d > max_degree:
            op = "add"
        v = nid(g.number_of_nodes())
        g.add_node(v, op=op)
        deg[v] = d if op == "mul" else max(deg[u] for u in ops)
        for u, m in ops.items():
            g.add_edge(u, v, mult=m)
        gates.append(v)
    outs = [v for v in gates if g.out_degree(v) == 0]
    outs += [v for v in g.nodes if v not in outs and g.nodes[v]["op"] != "const" and draw(st.integers(0, 5)) == 0]
    for j, v in enumerate(outs):
        g.nodes[v]["output"] = f"y{j}"
    return g


KINDS = ("cycle", "unknown op", "arity", "operand into source", "missing attr", "float const",
         "no output", "duplicate input", "duplicate output", "bad mult")


@st.composite
def malformed_circuits_st(draw, kinds=KINDS):
    """``(graph, expected_substring)`` for one injected defect of a drawn kind."""
    g = draw(circuits_st(max_inputs=3, max_gates=5))
    kind = draw(st.sampled_from(kinds), label="kind")
    gates = [v for v, op in g.nodes(data="op") if op in ("add", "mul")]
    nodes = list(g.nodes)
    fresh = f"new{g.number_of_nodes()}" if isinstance(nodes[0], str) else g.number_of_nodes()
    if kind == "cycle":
        v = draw(st.sampled_from(gates))
        back = [a for a in nx.ancestors(g, v) | {v} if g.nodes[a]["op"] in ("add", "mul")]
        g.add_edge(v, draw(st.sampled_from(sorted(back, key=str))))
        return g, "cycle"
    if kind == "unknown op":
        v = draw(st.sampled_from(nodes))
        bad = draw(st.sampled_from(["sub", "div", "pow", "", "ADD"]))
        g.nodes[v]["op"] = bad
        return g, f"node {v!r}: unknown op {bad!r}"
    if kind == "arity":
        v = draw(st.sampled_from(gates))
        keep = next(iter(g.predecessors(v)))
        g.remove_edges_from([(u, v) for u in list(g.predecessors(v)) if u != keep])
        g.edges[keep, v]["mult"] = 1
        return g, f"node {v!r}: {g.nodes[v]['op']} needs at least 2 operands, has 1"
    if kind == "operand into source":
        v = draw(st.sampled_from([n for n in nodes if g.nodes[n]["op"] in ("input", "const")]))
        g.add_node(fresh, op="const", value=1)
        g.add_edge(fresh, v)
        return g, f"node {v!r}: {g.nodes[v]['op']} takes no operands, has 1"
    if kind == "missing attr":
        v = draw(st.sampled_from(nodes))
        attr = {"input": "name", "const": "value"}.get(g.nodes[v]["op"], "op")
        attr = draw(st.sampled_from(sorted({"op", attr})))
        del g.nodes[v][attr]
        return g, f"node {v!r}: " + ("missing attribute 'op'" if attr == "op" else f"{g.nodes[v]['op']} missing attribute {attr!r}")
    if kind == "float const":
        v = draw(st.sampled_from(gates))
        x = draw(st.floats(-4, 4, allow_nan=False))
        g.add_node(fresh, op="const", value=x)
        g.add_edge(fresh, v)
        return g, f"node {fresh!r}: const value {x!r} is not exact (float)"
    if kind == "no output":
        for n in nodes:
            g.nodes[n].pop("output", None)
        return g, "no outputs"
    if kind == "duplicate input":
        g.add_node(fresh, op="input", name="x0", output="extra_out")
        return g, f"node {fresh!r}: duplicate input name 'x0'"
    if kind == "duplicate output":
        v = draw(st.sampled_from([n for n in nodes if "output" not in g.nodes[n]] or [fresh]))
        if v == fresh:
            g.add_node(fresh, op="input", name="fresh_input")
        g.nodes[v]["output"] = "y0"
        return g, "duplicate output name 'y0'"
    # bad mult
    u, v = draw(st.sampled_from(sorted(g.edges, key=str)))
    m = draw(st.sampled_from([0, -1, 1.5, True, "2"]))
    g.edges[u, v]["mult"] = m
    return g, f"node {v!r}: operand {u!r} has invalid mult {m!r}"
