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
  optional ``output``.
* edges under ``"links"`` (written by :func:`dump`, networkx < 3.6 default)
  or ``"edges"`` (networkx >= 3.6 default); optional integer ``mult``.

Every problem raises :class:`~circuits.graph.CircuitError` with a one-line
message.
"""
from __future__ import annotations

import json
import os
import re
from fractions import Fraction

import networkx as nx

from .graph import CircuitError, validate

_RATIONAL = re.compile(r"^\s*([+-]?\d+)\s*(?:/\s*(\d+)\s*)?$")


def parse_value(v, where: str = "const"):
    """JSON const value -> Fraction (int, ``"p/q"`` or ``"3"``)."""
    if isinstance(v, bool):
        raise CircuitError(f"{where}: const value {v!r} is a bool, not an exact number")
    if isinstance(v, int):
        return Fraction(v)
    if isinstance(v, str):
        m = _RATIONAL.match(v)
        if not m:
            raise CircuitError(f"{where}: const value {v!r} is not an integer or 'p/q' string")
        q = int(m.group(2)) if m.group(2) else 1
        if q == 0:
            raise CircuitError(f"{where}: const value {v!r} has zero denominator")
        return Fraction(int(m.group(1)), q)
    raise CircuitError(f"{where}: const value {v!r} is not exact ({type(v).__name__}); use an int or 'p/q' string")


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
        if d["op"] == "const":
            d["value"] = format_value(d["value"])
        h.add_node(n, **d)
    for u, v, d in g.edges(data=True):
        d = {k: x for k, x in d.items() if not (k == "mult" and x == 1)}
        h.add_edge(u, v, **d)
    data = nx.node_link_data(h, edges="links")
    if path is not None:
        try:
            with open(path, "w") as f:
                json.dump(data, f, indent=1)
                f.write("\n")
        except (OSError, TypeError, ValueError) as e:
            raise CircuitError(f"cannot write {os.fspath(path)}: {' '.join(str(e).split())}") from None
    return data


def _read(path) -> dict:
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        raise CircuitError(f"cannot read {os.fspath(path)}: {e.strerror or e}") from None
    except json.JSONDecodeError as e:
        raise CircuitError(f"{os.fspath(path)}: invalid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None


def load(src) -> nx.DiGraph:
    """Read a circuit from a JSON file path or an already parsed dict; returns ``validate(g)``."""
    data = src if isinstance(src, dict) else _read(src)
    if not isinstance(data, dict):
        raise CircuitError(f"node-link JSON must be an object, got {type(data).__name__}")
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
    ids = set()
    clean_nodes = []
    for i, nd in enumerate(nodes):
        if not isinstance(nd, dict) or "id" not in nd:
            raise CircuitError(f"node-link JSON: nodes[{i}] must be an object with an 'id'")
        n = nd["id"]
        if isinstance(n, bool) or not isinstance(n, (int, str)):
            raise CircuitError(f"node-link JSON: nodes[{i}] id {n!r} must be an int or str")
        if n in ids:
            raise CircuitError(f"node {n!r}: duplicate node id")
        ids.add(n)
        nd = dict(nd)
        if nd.get("op") == "const" and "value" in nd:
            nd["value"] = parse_value(nd["value"], f"node {n!r}")
        clean_nodes.append(nd)
    for i, e in enumerate(edges):
        if not isinstance(e, dict) or "source" not in e or "target" not in e:
            raise CircuitError(f"node-link JSON: {key}[{i}] must be an object with 'source' and 'target'")
        for end in ("source", "target"):
            if isinstance(e[end], (list, dict)) or e[end] not in ids:
                raise CircuitError(f"node-link JSON: {key}[{i}] {end} {e[end]!r} is not a node id")
    pairs = [(e["source"], e["target"]) for e in edges]
    if len(set(pairs)) != len(pairs):
        dup = next(p for p in pairs if pairs.count(p) > 1)
        raise CircuitError(f"node {dup[1]!r}: duplicate edge from {dup[0]!r} (use 'mult' for repeated operands)")
    doc = {"directed": True, "multigraph": False, "graph": data.get("graph", {}) or {},
           "nodes": clean_nodes, "links": edges}
    try:
        g = nx.node_link_graph(doc, directed=True, multigraph=False, edges="links")
    except Exception as e:  # pragma: no cover - all known problems are caught above
        raise CircuitError(f"node-link JSON: {' '.join(str(e).split())}") from None
    return validate(g)
