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

import math
from collections.abc import Mapping

from . import keys as K
from .graph import LimitError, one_line, operands, validate
from .placement import placement


def levels(g: nx.DiGraph) -> dict:
    """``level(v)``: longest path (in edges) from any source to ``v``."""
    return levels_and_degrees(g)[0]


def formal_degrees(g: nx.DiGraph) -> dict:
    """Formal degree of every node (see module docstring)."""
    return levels_and_degrees(g)[1]


def levels_and_degrees(g: nx.DiGraph) -> tuple[dict, dict]:
    """:func:`levels` and :func:`formal_degrees` in one topological pass."""
    lev: dict = {}
    deg: dict = {}
    pred, nodes = g._pred, g.nodes
    for v in nx.topological_sort(g):
        ops = pred[v]
        lev[v] = max((lev[u] for u in ops), default=-1) + 1
        op = nodes[v][K.OP]
        if op == K.ADD:
            deg[v] = max(deg[u] for u in ops)
        elif op == K.MUL:
            deg[v] = sum(e.get(K.MULT, 1) * deg[u] for u, e in ops.items())
        else:
            deg[v] = 1 if op == K.INPUT else 0
    return lev, deg


def metrics(g: nx.DiGraph, *, validated: bool = False) -> dict:
    """``dict(n_inputs, size, depth, width, degree, n_gates)`` of the validated circuit.

    ``g`` is validated first (so dead nodes are pruned before counting), unless the caller says
    it is already the result of :func:`~circuits.graph.validate` (``validated=True``: the
    compiler's passes, which validate once; no copy).
    """
    if not validated:
        g = validate(g)
    lev, deg = levels_and_degrees(g)
    depth = max(lev.values(), default=0)
    diff = [0] * (depth + 1)  # wire u -> v crosses the cuts lev[u] .. lev[v]-1: a difference array
    size = 0
    for u, v, m in g.edges(data=K.MULT, default=1):
        size += m
        diff[lev[u]] += m
        diff[lev[v]] -= m
    cuts, run = [], 0
    for k in range(depth):
        run += diff[k]
        cuts.append(run)
    return dict(
        n_inputs=sum(1 for _, op in g.nodes(data=K.OP) if op == K.INPUT),
        size=size,
        depth=depth,
        width=max(cuts, default=0),
        degree=max(deg[n] for n, o in g.nodes(data=K.OUTPUT) if o is not None),
        n_gates=sum(1 for _, op in g.nodes(data=K.OP) if op in (K.ADD, K.MUL)),
    )



#: what each key of a limits mapping bounds (see :func:`check_limits`)


def check_limits(g: nx.DiGraph, limits: Mapping[str, int | None]) -> None:
    """Refuse a validated circuit beyond ``limits`` before any work on it.

    Keys (a missing key or None: no limit) are those of :data:`circuits.limits.LIMIT_DOC`.
    One pass over the nodes in topological order; each node's degree is
    checked as it is computed, so no integer grows far past a limit.  The
    first node beyond one raises :class:`~circuits.graph.LimitError` naming it
    (``key`` = the limit's name).  The degree is the formal degree (module
    docstring).

    Not bounded here: the number of monomials of the expanded polynomials
    (what the exact proof costs beyond the degree).  Its cheap upper bounds
    (sum / product of the operands' counts, ``C(variables + degree, degree)``)
    are off by orders of magnitude on ordinary circuits (a random 9,000-gate
    circuit in 20 variables of degree 12: bound 2e8 monomials, true 5,002),
    so they would refuse circuits that prove in seconds.
    """
    lim = {k: v for k, v in limits.items() if v is not None}

    def refuse(key, value, text):
        raise LimitError(f"{text} exceeds the limit {key} = {lim[key]}", key, value, lim[key])

    n = g.number_of_nodes()
    if n > lim.get("max_nodes", math.inf):
        refuse("max_nodes", n, f"circuit has {n} nodes, which")
    pl = placement(g)
    if pl is not None and pl.tokens * pl.channels > lim.get("max_grid", math.inf):
        refuse("max_grid", pl.tokens * pl.channels,
               f"the placed grid {pl.tokens} tokens x {pl.channels} channels = {pl.tokens * pl.channels} cells")
    size = 0
    for u, v, m in g.edges(data=K.MULT, default=1):
        if m > lim.get("max_mult", math.inf):
            refuse("max_mult", m, f"node {one_line(v)}: operand {one_line(u)} has mult {m}, which")
        size += m
    if size > lim.get("max_size", math.inf):
        refuse("max_size", size, f"circuit has size {size} (wires counted with mult), which")
    max_deg = lim.get("max_degree", math.inf)
    deg: dict = {}
    for v in nx.topological_sort(g):
        op = g.nodes[v][K.OP]
        if op in (K.INPUT, K.CONST):
            deg[v] = 1 if op == K.INPUT else 0
            continue
        ops = operands(g, v)
        fan_in = sum(m for _, m in ops)
        if fan_in > lim.get("max_fan_in", math.inf):
            refuse("max_fan_in", fan_in, f"node {one_line(v)}: {op} gate has {fan_in} operands (with mult), which")
        if op == K.ADD:
            deg[v] = max(deg[u] for u, _ in ops)
        else:
            deg[v] = sum(m * deg[u] for u, m in ops)
        if deg[v] > max_deg:
            refuse("max_degree", deg[v], f"node {one_line(v)}: formal degree {deg[v]}")

