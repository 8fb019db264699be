"""Size, depth, width and degree of a circuit (seed 000, Def. D.15).

Seed 000 ("Arithmetic Circuit Notation") defines, for a circuit C:

* size  = number of wires (edges) of C.  Here a wire of multiplicity
  ``mult`` (see :mod:`circuits.graph`) counts ``mult`` times, i.e.
  ``size = sum of mult over all edges``; this equals the total number of
  operand slots of all gates and is the number of edges of the equivalent
  multigraph.
* depth = length of the longest path from an input node to an output node,
  counted in edges.  Constants are input nodes in the paper's sense
  ("input nodes are labelled by either the variables ... or constants").
* width = number of wires intersected by a horizontal cut.  Precise reading
  used here: every node gets ``level(v)`` = length of the longest path from
  any source (input or const) to ``v``; the cut between level k and k+1 meets
  the wire ``u -> v`` iff ``level(u) <= k < level(v)`` (long wires cross
  several cuts).  ``width = max_k`` of the wires (counted with ``mult``)
  crossing cut k, for ``0 <= k < depth``; 0 for a circuit without wires.
* degree = degree of the output polynomial.  We report the *formal*
  (combinatorial) degree: deg(input)=1, deg(const)=0 (also for the zero
  constant), deg(add)=max over operands, deg(mul)=sum over operands counting
  ``mult``, and the circuit degree is the max over outputs.  It is an upper
  bound on the true degree, strict when cancellation occurs (e.g. x + (-1)*x);
  :func:`circuits.evaluate.polynomials` gives the exact polynomials.
"""
from __future__ import annotations

import networkx as nx

from .graph import operands, validate


def levels(g: nx.DiGraph) -> dict:
    """``level(v)``: longest path (in edges) from any source to ``v``."""
    lev: dict = {}
    for v in nx.topological_sort(g):
        lev[v] = max((lev[u] + 1 for u in g.predecessors(v)), default=0)
    return lev


def formal_degrees(g: nx.DiGraph) -> dict:
    """Formal degree of every node (see module docstring)."""
    deg: dict = {}
    for v in nx.topological_sort(g):
        op = g.nodes[v]["op"]
        if op == "input":
            deg[v] = 1
        elif op == "const":
            deg[v] = 0
        elif op == "add":
            deg[v] = max(deg[u] for u, _ in operands(g, v))
        else:  # mul
            deg[v] = sum(m * deg[u] for u, m in operands(g, v))
    return deg


def metrics(g: nx.DiGraph) -> dict:
    """``dict(n_inputs, size, depth, width, degree, n_gates)`` of the validated circuit.

    ``g`` is validated first (so dead nodes are pruned before counting).
    """
    g = validate(g)
    lev = levels(g)
    deg = formal_degrees(g)
    depth = max(lev.values(), default=0)
    cuts = [0] * depth
    size = 0
    for u, v, m in g.edges(data="mult", default=1):
        size += m
        for k in range(lev[u], lev[v]):
            cuts[k] += m
    return dict(
        n_inputs=sum(1 for _, op in g.nodes(data="op") if op == "input"),
        size=size,
        depth=depth,
        width=max(cuts, default=0),
        degree=max(deg[n] for n, o in g.nodes(data="output") if o is not None),
        n_gates=sum(1 for _, op in g.nodes(data="op") if op in ("add", "mul")),
    )
