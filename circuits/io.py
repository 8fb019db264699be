"""Node-link JSON for circuits (networkx ``node_link_data`` / ``node_link_graph``).

File format (a networkx node-link document)::

    {"directed": true, "multigraph": false, "graph": {},
     "nodes": [{"id": 0, "op": "input", "name": "x"},
               {"id": 1, "op": "const", "value": "-3/4"},
               {"id": 2, "op": "mul", "output": "y"}],
     "links": [{"source": 0, "target": 2, "mult": 2},
               {"source": 1, "target": 2}]}

* node ``id``: int or str; ``op`` in input/const/add/mul; ``name`` for inputs;
  ``value`` for consts: a JSON integer, a ``"p/q"`` string or an integer
  string such as ``"3"`` (JSON floats are rejected, they are not exact);
  optional ``output``; optional places ``token``/``channel`` and
  ``output_token``/``output_channel`` (JSON integers >= 0; see
  :mod:`circuits.placement`).
* ``"graph"``: optional ``tokens``/``channels`` (JSON integers >= 1), the
  grid of a placed circuit; other graph attributes are kept as they are.
* edges under ``"links"`` (written by :func:`dump`, networkx < 3.6 default)
  or ``"edges"`` (networkx >= 3.6 default); optional integer ``mult``.
* every number anywhere in the document is finite: a bare ``NaN``, ``Infinity``
  or ``1e999`` (Python's JSON reader takes them) is refused naming where it is,
  in any attribute, known or not (and a dict from Python holding a float nan or
  inf likewise); :func:`dump` never writes one.

Every problem raises :class:`~circuits.graph.CircuitError` with a one-line
message.  :func:`load` takes optional ``limits`` (file bytes, nodes, wires,
constant digits; :class:`~circuits.graph.LimitError` beyond one), checked
while reading (the bytes read, not the size reported: a pipe, a FIFO or /dev/zero
is read to at most ``max_file_bytes + 1`` bytes), before the graph is built; an integer with more digits than
Python converts (``sys.get_int_max_str_digits``) is always refused, naming
the node.
"""
from __future__ import annotations

import json
import math
import os
import re
import select
import stat
import sys
from collections import Counter
from fractions import Fraction

import networkx as nx

from . import keys as K
from .graph import CircuitError, LimitError, one_line, validate

_RATIONAL = re.compile(r"^\s*([+-]?\d+)\s*(?:/\s*(\d+)\s*)?$")


class _LongInt:
    """A JSON integer literal with more digits than the limit (never converted)."""

    def __init__(self, digits: int):
        self.digits = digits

    def __repr__(self):
        return f"<integer of {self.digits} digits>"


class _NonFinite:
    """A JSON number that is not finite (``NaN``, ``Infinity``, ``1e999``): never kept, refused naming where."""

    def __init__(self, text: str):
        self.text = text


def _key_text(where: str, k) -> str:
    if isinstance(k, str) and k.isidentifier():
        return f"{where}.{k}" if where else k
    return f"{where}[{json.dumps(k) if isinstance(k, str) else repr(k)}]"


def _non_finite_at(doc) -> tuple[str, str, object] | None:
    """``(where, the number, node id or None)`` of the first non-finite number in a parsed document
    (a :class:`_NonFinite` or a float nan / inf), ``where`` as ``nodes[3].weight``; None if none."""
    stack = [(doc, "", None)]
    seen: set = set()
    while stack:
        x, where, node = stack.pop()
        if isinstance(x, _NonFinite):
            return where, x.text, node
        if isinstance(x, float) and not math.isfinite(x):
            return where, repr(x), node
        if isinstance(x, (dict, list, tuple)):
            if id(x) in seen:  # a cycle in a Python dict
                continue
            seen.add(id(x))
        if isinstance(x, dict):
            if where.startswith("nodes[") and where.endswith("]") and "." not in where and "id" in x:
                node = x["id"]
            stack.extend((v, _key_text(where, k), node) for k, v in reversed(list(x.items())))
        elif isinstance(x, (list, tuple)):
            stack.extend((v, f"{where}[{i}]", node) for i, v in reversed(list(enumerate(x))))
    return None


def _non_finite_message(doc) -> str | None:
    """One line naming the first non-finite number of ``doc`` and where it is, or None if none."""
    found = _non_finite_at(doc)
    if found is None:
        return None
    where, text, node = found
    return (f"non-finite number {text} at {where or 'the top level'}"
            + (f" (node {one_line(node)})" if node is not None and not isinstance(node, _NonFinite) else "")
            + ": a circuit file holds finite numbers only, in every attribute (JSON itself has no NaN or Infinity)")


def _python_digit_limit() -> float:
    n = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 0
    return n or math.inf


def _refuse_digits(where: str, v, digits: int, max_digits) -> None:
    py = _python_digit_limit()
    if max_digits is not None and max_digits < py:
        if digits > max_digits:
            raise LimitError(f"{where}: const value has {digits} digits, which exceeds the limit max_const_digits "
                             f"= {max_digits}", "max_const_digits", digits, max_digits)
    elif digits > py:
        raise LimitError(f"{where}: const value has {digits} digits, which exceeds Python's limit of {py} digits "
                         f"for integer conversion", "max_const_digits", digits, py)


def parse_value(v, where: str = "const", max_digits: int | None = None):
    """JSON const value -> Fraction (int, ``"p/q"`` or ``"3"``); ``max_digits``
    bounds the digits of the numerator and of the denominator."""
    if isinstance(v, bool):
        raise CircuitError(f"{where}: const value {one_line(v)} is a bool, not an exact number")
    if isinstance(v, _LongInt):
        _refuse_digits(where, v, v.digits, max_digits)
    if isinstance(v, int):
        if max_digits is not None and v.bit_length() > 3.33 * max_digits:  # cheap pre-check, then exact
            _refuse_digits(where, v, len(str(abs(v))), max_digits)
        return Fraction(v)
    if isinstance(v, str):
        m = _RATIONAL.match(v)
        if not m:
            raise CircuitError(f"{where}: const value {one_line(v)} is not an integer or 'p/q' string")
        digits = max(len(m.group(1).lstrip("+-")), len(m.group(2) or ""))
        _refuse_digits(where, v, digits, max_digits)
        q = int(m.group(2)) if m.group(2) else 1
        if q == 0:
            raise CircuitError(f"{where}: const value {one_line(v)} has zero denominator")
        return Fraction(int(m.group(1)), q)
    raise CircuitError(f"{where}: const value {one_line(v)} is not exact ({type(v).__name__}); use an int or 'p/q' string")


def format_value(c: Fraction):
    """Fraction -> JSON value: int when integral, else ``"p/q"``."""
    return c.numerator if c.denominator == 1 else f"{c.numerator}/{c.denominator}"


def dump(g: nx.DiGraph, path: str | os.PathLike | None = None) -> dict:
    """Validate ``g`` and return its node-link dict (edges under ``"links"``).

    With ``path`` the dict is also written there as JSON.  ``mult`` is only
    written when it is not 1.
    """
    g = validate(g)
    h = nx.DiGraph()
    h.graph.update(g.graph)
    for n, d in g.nodes(data=True):
        d = dict(d)
        if d[K.OP] == K.CONST:
            d[K.VALUE] = format_value(d[K.VALUE])
        h.add_node(n, **d)
    for u, v, d in g.edges(data=True):
        d = {k: x for k, x in d.items() if not (k == K.MULT and x == 1)}
        h.add_edge(u, v, **d)
    data = nx.node_link_data(h, edges="links")
    if path is not None:
        from polyverify.plumbing.cli import atomic_write_text

        try:
            text = json.dumps(data, indent=1, allow_nan=False) + "\n"  # no NaN a load would refuse
            atomic_write_text(path, text)  # a failure never leaves half a file
        except (OSError, TypeError, ValueError) as e:
            raise CircuitError(f"cannot write {os.fspath(path)}: {' '.join(str(e).split())}") from None
    return data


#: how long the first data of a FIFO given as a circuit file is awaited (seconds)
FIFO_WAIT_S = 30.0


def _read(path, limits) -> dict:
    max_bytes = limits.get("max_file_bytes")
    if max_bytes is not None:
        try:
            n = os.path.getsize(path)
        except OSError:
            n = 0  # open() below reports it
        if n > max_bytes:
            raise LimitError(f"{os.fspath(path)}: file has {n} bytes, which exceeds the limit max_file_bytes = {max_bytes}",
                             "max_file_bytes", n, max_bytes)
    lim = min(limits.get("max_const_digits", math.inf), _python_digit_limit())

    def parse_int(text: str):
        digits = len(text.lstrip("-"))
        return _LongInt(digits) if digits > lim else int(text)

    non_finite: list = []

    def parse_constant(text: str):  # NaN, Infinity, -Infinity: JSON has none; Python's reader takes them
        non_finite.append(text)
        return _NonFinite(text)

    def parse_float(text: str):
        x = float(text)
        if math.isfinite(x):
            return x
        non_finite.append(text)  # 1e999: read as inf
        return _NonFinite(text)

    try:
        # the read itself is bounded (not only the size the file system reports: /dev/zero, a pipe
        # or a FIFO report 0).  O_NONBLOCK: opening a FIFO (a named pipe, bash's <(...)) without a
        # writer does not wait; then its first data is awaited for at most FIFO_WAIT_S (a writer that
        # starts late is read, as cat reads it; none at all is refused in one line, not a hang)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        if stat.S_ISFIFO(os.fstat(fd).st_mode) and not select.select([fd], [], [], FIFO_WAIT_S)[0]:
            os.close(fd)
            raise CircuitError(f"{os.fspath(path)}: a FIFO that no writer wrote to within {FIFO_WAIT_S:g} s")
        with os.fdopen(fd, "rb") as f:
            os.set_blocking(fd, True)
            raw = f.read() if max_bytes is None else f.read(max_bytes + 1)
        if max_bytes is not None and len(raw) > max_bytes:
            raise LimitError(f"{os.fspath(path)}: more than {max_bytes} bytes read, which exceeds the limit "
                             f"max_file_bytes = {max_bytes}", "max_file_bytes", len(raw), max_bytes)
        data = json.loads(raw.decode("utf-8"), parse_int=parse_int, parse_constant=parse_constant,
                          parse_float=parse_float)
        if non_finite:
            raise CircuitError(f"{os.fspath(path)}: {_non_finite_message(data) or 'a non-finite number'}")
        return data
    except (LimitError, CircuitError):
        raise
    except OSError as e:
        raise CircuitError(f"cannot read {os.fspath(path)}: {e.strerror or e}") from None
    except json.JSONDecodeError as e:
        raise CircuitError(f"{os.fspath(path)}: invalid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except (UnicodeDecodeError, RecursionError, ValueError) as e:
        raise CircuitError(f"{os.fspath(path)}: not a JSON text file ({type(e).__name__})") from None


def load(src, limits=None) -> nx.DiGraph:
    """Read a circuit from a JSON file path or an already parsed dict; returns ``validate(g)``.

    ``limits`` (a mapping; a missing key or None: no limit): ``max_file_bytes``
    (checked before reading), ``max_const_digits`` (numerator or denominator
    digits of a const), ``max_nodes`` and ``max_size`` (number of edges),
    checked before the graph is built; a value beyond one raises
    :class:`~circuits.graph.LimitError`.  The other limits of
    :func:`circuits.metrics.check_limits` need the validated graph.
    """
    limits = {k: v for k, v in (limits or {}).items() if v is not None}
    data = src if isinstance(src, dict) else _read(src, limits)
    if not isinstance(data, dict):
        raise CircuitError(f"node-link JSON must be an object, got {type(data).__name__}")
    if data is src:  # a dict from Python: a float nan / inf anywhere is refused as in a file
        try:  # C speed where all is well; the walk only to say where
            json.dumps(data, allow_nan=False, default=lambda o: None)
            bad = None
        except (ValueError, TypeError, RecursionError):  # out of range, a cycle, a key json does not take
            bad = _non_finite_message(data)
        if bad:
            raise CircuitError(f"node-link JSON: {bad}")
    if data.get("directed", True) is not True:
        raise CircuitError("node-link JSON: circuits are directed ('directed' must be true)")
    if data.get("multigraph", False) is not False:
        raise CircuitError("node-link JSON: multigraphs are not supported (use the edge attribute 'mult')")
    if "links" in data and "edges" in data:
        raise CircuitError("node-link JSON: give edges under 'links' or 'edges', not both")
    key = "links" if "links" in data else "edges"
    nodes, edges = data.get("nodes"), data.get(key, [])
    if not isinstance(nodes, list):
        raise CircuitError("node-link JSON: 'nodes' must be a list")
    if not isinstance(edges, list):
        raise CircuitError(f"node-link JSON: '{key}' must be a list")
    if not isinstance(data.get("graph", {}), dict):
        raise CircuitError("node-link JSON: 'graph' must be an object")
    if len(nodes) > limits.get("max_nodes", math.inf):
        raise LimitError(f"circuit has {len(nodes)} nodes, which exceeds the limit max_nodes = {limits['max_nodes']}",
                         "max_nodes", len(nodes), limits["max_nodes"])
    if len(edges) > limits.get("max_size", math.inf):
        raise LimitError(f"circuit has {len(edges)} wires, which exceeds the limit max_size = {limits['max_size']}",
                         "max_size", len(edges), limits["max_size"])
    ids = set()
    clean_nodes = []
    for i, nd in enumerate(nodes):
        if not isinstance(nd, dict) or "id" not in nd:
            raise CircuitError(f"node-link JSON: nodes[{i}] must be an object with an 'id'")
        n = nd["id"]
        if isinstance(n, bool) or not isinstance(n, (int, str)):
            raise CircuitError(f"node-link JSON: nodes[{i}] id {one_line(n)} must be an int or str")
        if n in ids:
            raise CircuitError(f"node {one_line(n)}: duplicate node id")
        ids.add(n)
        nd = dict(nd)
        if nd.get(K.OP) == K.CONST and K.VALUE in nd:
            nd[K.VALUE] = parse_value(nd[K.VALUE], f"node {one_line(n)}", limits.get("max_const_digits"))
        clean_nodes.append(nd)
    for i, e in enumerate(edges):
        if not isinstance(e, dict) or "source" not in e or "target" not in e:
            raise CircuitError(f"node-link JSON: {key}[{i}] must be an object with 'source' and 'target'")
        for end in ("source", "target"):
            if isinstance(e[end], (list, dict)) or e[end] not in ids:
                raise CircuitError(f"node-link JSON: {key}[{i}] {end} {one_line(e[end])} is not a node id")
    pairs = [(e["source"], e["target"]) for e in edges]
    if len(set(pairs)) != len(pairs):
        counts = Counter(pairs)
        dup = next(p for p in pairs if counts[p] > 1)
        raise CircuitError(f"node {one_line(dup[1])}: duplicate edge from {one_line(dup[0])} (use 'mult' for repeated operands)")
    doc = {"directed": True, "multigraph": False, "graph": data.get("graph", {}) or {},
           "nodes": clean_nodes, "links": edges}
    del data, src, nodes, edges, clean_nodes, ids, pairs  # the parsed text is not held beside the graph
    try:
        g = nx.node_link_graph(doc, directed=True, multigraph=False, edges="links")
    except Exception as e:  # pragma: no cover - all known problems are caught above
        raise CircuitError(f"node-link JSON: {' '.join(str(e).split())}") from None
    del doc
    return validate(g, in_place=True)  # g is this function's own: checked and pruned in place
