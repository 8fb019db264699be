"""Circuit graphs: validation, input/output names and a small builder.

A circuit is a :class:`networkx.DiGraph` read as an arithmetic circuit in the
sense of seed 000 ("Arithmetic Circuit Notation", Def. D.15): a DAG whose
source nodes are variables (``op="input"``) or field constants
(``op="const"``) and whose internal nodes are ``+`` / ``x`` gates of
unbounded arity (``op="add"`` / ``op="mul"``).  Edges point operand -> result.

Because a ``DiGraph`` has no parallel edges, an operand that is used several
times by one gate (``x*x``, ``x+x``) is written as ONE edge with the integer
edge attribute ``mult`` (>= 1, default 1): the operand is used ``mult`` times.
Every count in this package (arity, size, width, degree) counts ``mult``.

All validation failures raise :class:`CircuitError` (a ``ValueError``) whose
message is a single line naming the offending node id.
"""
from __future__ import annotations

import numbers
import warnings
from fractions import Fraction
from typing import Hashable, Iterable

import networkx as nx

from . import keys as K

OPS = K.OPS
GATES = K.GATES


class CircuitError(ValueError):
    """Raised for every malformed circuit (one-line message naming the node)."""


class LimitError(CircuitError):
    """A circuit (or a request) beyond a size limit: the message names the node
    (where there is one), the value and the limit; ``key`` is the name of the
    limit (e.g. ``"max_degree"``), so a command can say how to raise it."""

    def __init__(self, message: str, key: str | None = None, value=None, limit=None):
        super().__init__(message)
        self.key, self.value, self.limit = key, value, limit


class PrunedNodesWarning(UserWarning):
    """Emitted by :func:`validate` when nodes feeding no output are removed."""


# --------------------------------------------------------------------------- helpers


class _Bad(Exception):
    """What is wrong with a value or a node, without saying where (the caller prefixes it)."""


def exact_constant(value, where: str = "const") -> Fraction:
    """Convert an exact rational (int, Fraction, sympy Rational, numpy int) to Fraction.

    Floats (python, numpy, mpmath) are rejected: they are not exact.
    ``where`` prefixes the error message (e.g. ``"node 3"``).
    """
    try:
        return _exact(value)
    except _Bad as e:
        raise CircuitError(f"{where}: {e}") from None


def _exact(value) -> Fraction:
    if isinstance(value, bool):
        raise _Bad(f"const value {value!r} is a bool, not an exact number")
    if isinstance(value, Fraction):
        return value
    if isinstance(value, numbers.Integral):
        return Fraction(int(value))
    try:  # sympy Rational / Integer without importing sympy eagerly
        import sympy

        if isinstance(value, sympy.Rational):
            return Fraction(int(value.p), int(value.q))
    except ImportError:  # pragma: no cover - sympy is a hard dependency
        pass
    if isinstance(value, numbers.Rational):
        return Fraction(int(value.numerator), int(value.denominator))
    raise _Bad(f"const value {one_line(value)} is not exact ({type(value).__name__}); "
               "use an int or fractions.Fraction")


def mult(g: nx.DiGraph, u: Hashable, v: Hashable) -> int:
    """Multiplicity of the wire ``u -> v`` (edge attribute ``mult``, default 1)."""
    return g.edges[u, v].get(K.MULT, 1)


def operands(g: nx.DiGraph, v: Hashable) -> list[tuple[Hashable, int]]:
    """``[(operand, mult), ...]`` of node ``v`` in edge insertion order (the order of
    ``g.in_edges(v)``: both read the predecessor dict of ``v``)."""
    return [(u, d.get(K.MULT, 1)) for u, d in g._pred[v].items()]


def one_line(x, width: int = 60) -> str:
    s = " ".join(repr(x).split())
    return s if len(s) <= width else s[: width - 3] + "..."


# --------------------------------------------------------------------------- validation


def _check_node(g: nx.DiGraph, n, d: dict) -> None:
    try:
        _check_node_fields(g, n, d)
    except _Bad as e:  # the node's name is formatted only for the error
        raise CircuitError(f"node {one_line(n)}: {e}") from None


def _check_node_fields(g: nx.DiGraph, n, d: dict) -> None:
    if isinstance(n, bool) or not isinstance(n, (int, str)):
        raise _Bad(f"node ids must be int or str, got {type(n).__name__}")
    if K.OP not in d:
        raise _Bad("missing attribute 'op'")
    op = d[K.OP]
    if op not in OPS:
        raise _Bad(f"unknown op {one_line(op)} (expected one of {', '.join(OPS)})")
    arity = 0
    for u, m in operands(g, n):
        if (m.__class__ is not int and (isinstance(m, bool) or not isinstance(m, numbers.Integral))) or m < 1:
            raise _Bad(f"operand {one_line(u)} has invalid mult {one_line(m)} (need an int >= 1)")
        arity += int(m)
    if op in (K.INPUT, K.CONST) and arity:
        raise _Bad(f"{op} takes no operands, has {arity}")
    if op in GATES and arity < 2:
        raise _Bad(f"{op} needs at least 2 operands, has {arity}")
    if op == K.INPUT:
        if K.NAME not in d:
            raise _Bad("input missing attribute 'name'")
        if not isinstance(d[K.NAME], str) or not d[K.NAME]:
            raise _Bad(f"input name must be a non-empty str, got {one_line(d['name'])}")
    if op == K.CONST:
        if K.VALUE not in d:
            raise _Bad("const missing attribute 'value'")
        _exact(d[K.VALUE])
    if K.OUTPUT in d and (not isinstance(d[K.OUTPUT], str) or not d[K.OUTPUT]):
        raise _Bad(f"output name must be a non-empty str, got {one_line(d['output'])}")


def _check_unique(g: nx.DiGraph, key: str, nodes: Iterable) -> None:
    seen: dict[str, object] = {}
    for n in nodes:
        name = g.nodes[n][key]
        if name in seen:
            raise CircuitError(
                f"node {one_line(n)}: duplicate {key if key == 'output' else 'input'} name "
                f"{name!r} (also on node {one_line(seen[name])})"
            )
        seen[name] = n


def validate(g: nx.DiGraph, *, in_place: bool = False) -> nx.DiGraph:
    """Check ``g`` and return a pruned, normalised copy (``in_place=True``: ``g`` itself, pruned and
    normalised -- for a graph the caller has just built and gives up, such as a file's: a circuit of
    10^6 gates then needs one graph in memory, not two).

    Raises :class:`CircuitError` for: a graph that is not a simple directed
    graph, cycles, unknown ops, wrong arity (``input``/``const`` with
    operands, ``add``/``mul`` with fewer than 2 operands counting ``mult``),
    bad ``mult``, missing attributes (``op``, input ``name``, const
    ``value``), non-exact constants, duplicate input or output names, a
    circuit without outputs, and bad places (node attributes ``token``,
    ``channel``, ``output_token``, ``output_channel``; graph attributes
    ``tokens``, ``channels``; see :mod:`circuits.placement`), checked on the
    pruned copy.

    The returned copy stores every const ``value`` as a ``Fraction`` and
    every place and grid size as an ``int``.  Gates
    and constants that feed no output are removed (with a
    :class:`PrunedNodesWarning` naming them).  Unused *input* nodes are kept:
    they are part of the variable set X of seed 000 Def. D.15 (the circuit is
    still n-variate), and keeping them keeps the evaluation signature stable.
    """
    if not isinstance(g, nx.DiGraph) or g.is_multigraph():
        raise CircuitError(f"a circuit must be a networkx.DiGraph, got {type(g).__name__}")
    for n, d in g.nodes(data=True):
        _check_node(g, n, d)
    if not nx.is_directed_acyclic_graph(g):
        cyc = nx.find_cycle(g)
        path = " -> ".join(one_line(u) for u, _ in cyc) + f" -> {one_line(cyc[0][0])}"
        raise CircuitError(f"node {one_line(cyc[0][0])}: on a cycle {path}")
    ins = [n for n, op in g.nodes(data=K.OP) if op == K.INPUT]
    outs = [n for n, o in g.nodes(data=K.OUTPUT) if o is not None]
    _check_unique(g, K.NAME, ins)
    _check_unique(g, K.OUTPUT, outs)
    if not outs:
        raise CircuitError("circuit has no outputs (set output='<name>' on at least one node)")

    keep = set(outs).union(ins)
    stack = list(outs)  # one backward search from all outputs (not one per output)
    while stack:
        for u in g.predecessors(stack.pop()):
            if u not in keep:
                keep.add(u)
                stack.append(u)
    dead = [n for n in g.nodes if n not in keep]
    h = g if in_place else g.copy()
    if dead:
        warnings.warn(
            f"pruned {len(dead)} node(s) feeding no output: {', '.join(one_line(n) for n in dead)}",
            PrunedNodesWarning,
            stacklevel=2,
        )
        h.remove_nodes_from(dead)
    for _, d in h.nodes(data=True):
        if d[K.OP] == K.CONST:
            d[K.VALUE] = _exact(d[K.VALUE])  # checked by _check_node above: cannot fail
    from .placement import normalise_places, placement  # lazy: placement imports this module

    placement(h)  # places of the kept nodes only (pruned nodes' places do not matter)
    normalise_places(h)
    return h


def inputs(g: nx.DiGraph) -> list[str]:
    """Input names of ``g``, sorted (deterministic)."""
    return sorted(d[K.NAME] for _, d in g.nodes(data=True) if d.get(K.OP) == K.INPUT)


def outputs(g: nx.DiGraph) -> list[str]:
    """Output names of ``g``, sorted (deterministic)."""
    return sorted(o for _, o in g.nodes(data=K.OUTPUT) if o is not None)


def input_nodes(g: nx.DiGraph) -> dict[str, Hashable]:
    """``{input name: node id}``, sorted by name."""
    return dict(sorted((d[K.NAME], n) for n, d in g.nodes(data=True) if d.get(K.OP) == K.INPUT))


def output_nodes(g: nx.DiGraph) -> dict[str, Hashable]:
    """``{output name: node id}``, sorted by name."""
    return dict(sorted(((o, n) for n, o in g.nodes(data=K.OUTPUT) if o is not None), key=lambda t: t[0]))


# --------------------------------------------------------------------------- builder


def _place(k1: str, v1, k2: str, v2) -> dict:
    """``{k1: v1, k2: v2}`` without the ``None`` values."""
    return {k: v for k, v in ((k1, v1), (k2, v2)) if v is not None}


class CircuitBuilder:
    """Tiny imperative builder; node ids are consecutive ints.

    >>> b = CircuitBuilder()
    >>> x = b.input("x")
    >>> b.output(b.mul(x, x, b.const(3)), "y")   # y = 3 x^2 (x used twice -> mult=2)
    >>> g = b.graph()
    """

    def __init__(self) -> None:
        self._g = nx.DiGraph()

    def _new(self, **attrs) -> int:
        n = self._g.number_of_nodes()
        self._g.add_node(n, **attrs)
        return n

    def input(self, name: str, *, token: int | None = None, channel: int | None = None) -> int:
        """A new input; ``token``/``channel`` (give both or neither) place it."""
        return self._new(**{K.OP: K.INPUT, K.NAME: name}, **_place(K.TOKEN, token, K.CHANNEL, channel))

    def const(self, value) -> int:
        return self._new(**{K.OP: K.CONST, K.VALUE: exact_constant(value, "const")})

    def _gate(self, op: str, nodes) -> int:
        if len(nodes) < 2:  # refused at the call, naming the caller's line (not later at graph())
            from .callsite import call_site

            raise CircuitError(f"{op} needs at least 2 operands, got {len(nodes)}, at {call_site((__file__,))}")
        for u in nodes:
            if u not in self._g:
                raise CircuitError(f"node {one_line(u)}: unknown operand for {op}")
        v = self._new(**{K.OP: op})
        for u in nodes:  # repeated operands become one edge with mult > 1
            if self._g.has_edge(u, v):
                self._g.edges[u, v][K.MULT] += 1
            else:
                self._g.add_edge(u, v, mult=1)
        return v

    def add(self, *nodes) -> int:
        return self._gate(K.ADD, nodes)

    def mul(self, *nodes) -> int:
        return self._gate(K.MUL, nodes)

    def output(self, node, name: str, *, token: int | None = None, channel: int | None = None) -> None:
        """Mark ``node`` as output ``name``; ``token``/``channel`` place the output
        (stored as ``output_token``/``output_channel`` when ``node`` is an input)."""
        if node not in self._g:
            raise CircuitError(f"node {one_line(node)}: cannot mark unknown node as output")
        d = self._g.nodes[node]
        d[K.OUTPUT] = name
        if d[K.OP] == K.INPUT:
            d.update(_place(K.OUTPUT_TOKEN, token, K.OUTPUT_CHANNEL, channel))
        else:
            d.update(_place(K.TOKEN, token, K.CHANNEL, channel))

    def grid(self, tokens: int | None = None, channels: int | None = None) -> None:
        """Set the graph attributes ``tokens``/``channels`` (the placement grid)."""
        self._g.graph.update(_place(K.TOKENS, tokens, K.CHANNELS, channels))

    def graph(self) -> nx.DiGraph:
        """Validated copy of the circuit built so far."""
        return validate(self._g)
