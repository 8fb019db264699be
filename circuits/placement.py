"""Placed circuits: inputs and outputs on a ``tokens x channels`` grid.

A compiler that lays a circuit on a sequence (seed 000 Thm. D.30, seed 003
Thm. H.21 take the circuit's inputs as an ``N x D`` matrix) needs to know
where each input sits in the input matrix (rows are tokens, columns are
channels) and where each output must be in the final state.  These places
are node attributes of the circuit (see the contract in :mod:`circuits`):

``token``, ``channel``
    on an ``input`` node: the input's place; on a non-input node that carries
    ``output``: the place of that output in the final state.
``output_token``, ``output_channel``
    on an ``input`` node that also carries ``output`` (a pass-through output,
    e.g. a data matrix kept in place across a GD step): its output place.
graph attributes ``tokens``, ``channels``
    optional grid size (ints >= 1, at least what the places need); by default
    ``tokens = 1 + max token`` and ``channels = 1 + max channel`` over all
    places, inputs and outputs.

Places are ints >= 0 (not bool).  Either every input is placed or none is;
outputs may be left unplaced (``None`` in :attr:`Placement.outputs`: the
compiler chooses) when the inputs are placed, but an output may not be placed
when the inputs are not.  No two inputs share a place, nor do two outputs (an
output may sit where an input was: the state is overwritten).  A circuit
without any place keeps its plain meaning: :func:`placement` returns ``None``.

:func:`circuits.graph.validate` runs these checks (on the pruned copy: places
on nodes that feed no output do not matter), so :func:`circuits.io.load`
refuses a badly placed circuit; every failure is a
:class:`~circuits.graph.CircuitError` with a one-line message naming the node.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass

import networkx as nx

from . import keys as K
from .graph import CircuitError, one_line

#: node attributes holding a place, and graph attributes holding the grid size
PLACE_ATTRS = K.PLACE_ATTRS
GRID_ATTRS = K.GRID_ATTRS


@dataclass(frozen=True)
class Placement:
    """Where a circuit's inputs and outputs sit on a ``tokens x channels`` grid.

    ``inputs``: input name -> ``(token, channel)``; ``outputs``: output name
    -> ``(token, channel)`` or ``None`` (unplaced: the compiler chooses).
    Both are sorted by name.
    """

    tokens: int
    channels: int
    inputs: dict[str, tuple[int, int]]
    outputs: dict[str, tuple[int, int] | None]


def _who(n, d: dict) -> str:
    """``node 3 (input 'x', output 'y')`` -- the node id and its names."""
    tags = []
    if d.get(K.OP) == K.INPUT and K.NAME in d:
        tags.append(f"input {one_line(d['name'])}")
    if d.get(K.OUTPUT) is not None:
        tags.append(f"output {one_line(d['output'])}")
    if not tags:
        op = d.get(K.OP)
        tags.append(f"{op} gate" if op in (K.ADD, K.MUL) else op if isinstance(op, str) else one_line(op))
    return f"node {one_line(n)} ({', '.join(tags)})"


def _coord(n, d: dict, key: str, v) -> int:
    if type(v) is int and v >= 0:  # the common case, without building a message
        return v
    who = _who(n, d)
    if isinstance(v, bool):
        raise CircuitError(f"{who}: {key} {v!r} is a bool, not an int")
    if not isinstance(v, numbers.Integral):
        raise CircuitError(f"{who}: {key} {one_line(v)} is not an int ({type(v).__name__})")
    if v < 0:
        raise CircuitError(f"{who}: {key} {int(v)} is negative (places are ints >= 0)")
    return int(v)


def _pair(n, d: dict, tk: str, ck: str) -> tuple[int, int] | None:
    has_t, has_c = tk in d, ck in d
    if has_t != has_c:
        given, missing = (tk, ck) if has_t else (ck, tk)
        raise CircuitError(f"{_who(n, d)}: has {given} but no {missing} (a place needs both)")
    if not has_t:
        return None
    return _coord(n, d, tk, d[tk]), _coord(n, d, ck, d[ck])


def _grid_attr(g: nx.DiGraph, key: str) -> int | None:
    if key not in g.graph:
        return None
    v = g.graph[key]
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
        raise CircuitError(f"graph attribute {key} = {one_line(v)} must be a positive int")
    return int(v)


def placement(g: nx.DiGraph) -> Placement | None:
    """The :class:`Placement` of a validated circuit ``g``, or ``None`` if unplaced.

    Runs every place check (see the module docstring) and raises
    :class:`~circuits.graph.CircuitError` naming the node; it does not
    re-run the structural checks of :func:`~circuits.graph.validate`, which
    calls this function.  Does not modify ``g``.
    """
    grid = {k: _grid_attr(g, k) for k in GRID_ATTRS}
    ins, outs, node_of = _node_places(g)

    def where(key: str) -> str:  # built only for a message
        n = node_of[key]
        return _who(n, g.nodes[n])

    placed_in = sorted(k for k, p in ins.items() if p is not None)
    unplaced_in = sorted(k for k, p in ins.items() if p is None)
    placed_out = sorted(k for k, p in outs.items() if p is not None)
    if placed_in and unplaced_in:
        raise CircuitError(f"{where('in:' + unplaced_in[0])}: input has no place (token/channel) but "
                           f"{where('in:' + placed_in[0])} has one; place every input or none")
    if not placed_in and unplaced_in and placed_out:
        raise CircuitError(f"{where('out:' + placed_out[0])}: output has a place but the inputs do not "
                           f"(e.g. {where('in:' + unplaced_in[0])}); place the inputs too or no output")
    if not placed_in and not placed_out:
        for k in GRID_ATTRS:
            if grid[k] is not None:
                raise CircuitError(f"graph attribute {k} = {grid[k]} is set but no input or output has a place")
        return None

    size = {}
    for k, axis in zip(GRID_ATTRS, (0, 1)):
        far = max([(p[axis], "in:" + nm) for nm, p in ins.items()]
                  + [(p[axis], "out:" + nm) for nm, p in outs.items() if p is not None],
                  key=lambda t: t[0])
        need = far[0] + 1
        if grid[k] is not None and grid[k] < need:
            raise CircuitError(f"{where(far[1])}: {k[:-1]} {far[0]} lies outside the grid (graph attribute "
                               f"{k} = {grid[k]}, needs >= {need})")
        size[k] = grid[k] if grid[k] is not None else need
    return Placement(
        tokens=size[K.TOKENS],
        channels=size[K.CHANNELS],
        inputs=dict(sorted(ins.items())),
        outputs=dict(sorted(outs.items())),
    )


def _node_places(g: nx.DiGraph) -> tuple[dict, dict, dict]:
    """Each input's and output's place (None: unplaced) by name, and each ``"in:name"`` /
    ``"out:name"``'s node; raises on a place attribute where it does not belong and on two inputs
    (or two outputs) at one place."""
    ins: dict[str, tuple[int, int] | None] = {}
    outs: dict[str, tuple[int, int] | None] = {}
    node_of: dict[str, object] = {}  # "in:name" / "out:name" -> its node id
    in_at: dict[tuple[int, int], object] = {}  # place -> node id
    out_at: dict[tuple[int, int], object] = {}

    def who(n) -> str:  # built only for a message
        return _who(n, g.nodes[n])

    for n, d in g.nodes(data=True):
        is_in = d.get(K.OP) == K.INPUT
        out = d.get(K.OUTPUT)
        here = _pair(n, d, K.TOKEN, K.CHANNEL)
        if is_in:
            there = _pair(n, d, K.OUTPUT_TOKEN, K.OUTPUT_CHANNEL)
            if there is not None and out is None:
                raise CircuitError(f"{who(n)}: has output_token/output_channel but is not an output")
            ins[d[K.NAME]] = here
            node_of["in:" + d[K.NAME]] = n
            if here is not None:
                if here in in_at:
                    raise CircuitError(f"{who(n)}: input place {here} is taken by {who(in_at[here])}")
                in_at[here] = n
        else:
            for k in (K.OUTPUT_TOKEN, K.OUTPUT_CHANNEL):
                if k in d:
                    raise CircuitError(f"{who(n)}: {k} is only for input nodes that are outputs "
                                       "(a gate's output place is token/channel)")
            if here is not None and out is None:
                raise CircuitError(f"{who(n)}: has a place (token/channel) but is neither an input nor an output")
            there = here
        if out is not None:
            outs[out] = there
            node_of["out:" + out] = n
            if there is not None:
                if there in out_at:
                    raise CircuitError(f"{who(n)}: output place {there} is taken by {who(out_at[there])}")
                out_at[there] = n
    return ins, outs, node_of


def normalise_places(g: nx.DiGraph) -> None:
    """In place: store every place and grid attribute of ``g`` as a plain ``int``
    (e.g. numpy integers); call only after :func:`placement` accepted ``g``."""
    for _, d in g.nodes(data=True):
        for k in PLACE_ATTRS:
            if k in d:
                d[k] = int(d[k])
    for k in GRID_ATTRS:
        if k in g.graph:
            g.graph[k] = int(g.graph[k])


def place_inputs(g: nx.DiGraph, tokens: int) -> nx.DiGraph:
    """A validated copy of ``g`` with its inputs placed column by column on a ``tokens``-token grid:
    the k-th input in sorted name order at token ``k mod tokens``, channel ``k div tokens`` (outputs
    left for the compiler to place).  A ValueError for ``tokens < 1``."""
    from .graph import inputs, validate

    if isinstance(tokens, bool) or not isinstance(tokens, numbers.Integral) or tokens < 1:
        raise ValueError(f"tokens must be an integer >= 1, got {tokens!r}")
    names = inputs(g)
    h = g.copy()
    for _, d in h.nodes(data=True):
        if d[K.OP] == K.INPUT:
            k = names.index(d[K.NAME])
            d[K.TOKEN], d[K.CHANNEL] = k % tokens, k // tokens
    h.graph[K.TOKENS], h.graph[K.CHANNELS] = tokens, max(1, -(-len(names) // tokens))
    return validate(h)

