"""The labels of ``verify.compiler_trace``: what one cell of a compiled circuit's state holds
(:class:`Label`), one state's labels (:class:`LayerTrace`) and every layer's (:class:`Trace`), read as
names, tables, markdown and JSON, and the nodes' display names (the module docstring of
``verify.compiler_trace`` says how the labels are found and how far to trust them).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import networkx as nx

import circuits as C
from circuits import keys as K

#: the kinds a node (and so a cell) is drawn as, in priority order where a cell holds several
KINDS = ("output", "input", "product", "sum", "constant", "other")


@dataclass(frozen=True)
class Label:
    """What one cell holds: ``kind`` ``"node"`` (``nodes``' common value), ``"scaled"`` (``coef``
    times it; ``coef`` None where not recovered), ``"const"`` (the constant ``coef``) or ``"other"``."""

    kind: str
    nodes: tuple = ()
    coef: Fraction | None = None

    def to_json(self):
        """``[ids]`` for a node, ``{"times": c, "of": [ids]}``, ``{"const": c}``, or None (other)."""
        if self.kind == "node":
            return jids(self.nodes)
        if self.kind == "scaled":
            return {"times": None if self.coef is None else str(self.coef), "of": jids(self.nodes)}
        if self.kind == "const":
            return {"const": str(self.coef)}
        return None


OTHER = Label("other")


def jid(n):
    """A node key in JSON: the node id, or ``["compiled", id]`` for a node of ``compiled_graph``."""
    return list(n) if isinstance(n, tuple) else n


def jids(nodes) -> list:
    """Each node key of ``nodes`` in JSON (:func:`jid`)."""
    return [jid(n) for n in nodes]


def is_product(gate: Label, conv: Label) -> bool:
    """An inner channel whose gate and convolution sides are both non-constant (a product, not
    a copy or a multiple by a constant)."""
    return gate.kind != "const" and conv.kind != "const"


@dataclass
class HeadTrace:
    """One attention head of an LSA layer / ELSA module (seed 001 eq. (8), (16)): head ``head`` of
    stage ``stage`` (both from 0), the labels of its query side ``P W3 + B3``, key side ``P W1 + B1``
    ((token, Gram column) -> Label) and value side ``P W2 + B2`` ((token, value column) -> Label) of
    its stage's input ``P``, and of the cells it writes, ``Q K^T V`` ((token, channel) -> Label: the
    product it forms, summed over the key tokens; in a stage before an ELSA module's last, the cells
    of the next stage's input)."""

    stage: int
    head: int
    q: dict = field(default_factory=dict)
    k: dict = field(default_factory=dict)
    v: dict = field(default_factory=dict)
    writes: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        side = lambda d: [[t, c, lab.to_json()] for (t, c), lab in sorted(d.items())]  # noqa: E731
        return {"stage": self.stage, "head": self.head, "q": side(self.q), "k": side(self.k), "v": side(self.v),
                "writes": side(self.writes)}


@dataclass
class LayerTrace:
    """The state after stack layer ``layer`` (``layer`` 0: the input state), its nonzero cells'
    labels, and for a BaseConv layer its inner channels (token, inner channel) -> (gate, conv,
    product) labels where the product is not zero."""

    layer: int
    kind: str  # "input", "baseconv", "lsa", "elsa"
    shape: tuple[int, int]
    cells: dict = field(default_factory=dict)  # (t, c) -> Label
    inner: dict | None = None  # (t, c) -> (Label, Label, Label)
    degree: int = 1  # the degree bound used for this layer's labels
    heads: list | None = None  # HeadTrace per head of an LSA layer / ELSA module, stage by stage

    def counts(self) -> dict:
        out = {k: 0 for k in ("node", "scaled", "const", "other")}
        for lab in self.cells.values():
            out[lab.kind] += 1
        return out


@dataclass
class Trace:
    """Every layer's labels (:class:`LayerTrace`, ``layers[0]`` the input state) and how they were
    found: the prime, the number of random points, the seed and the bound on a wrong label."""

    layers: list  # LayerTrace per state; a node key is a node of con.graph, or ("compiled", v) (compiled)
    prime: int
    draws: int
    seed: int
    error_bound: float
    names: dict  # node key -> display name
    kinds: dict  # node key -> one of KINDS
    graph: nx.DiGraph = field(repr=False, default=None)
    #: node of ``con.compiled_graph`` -> its key here: the node of ``graph`` with the same value,
    #: or ``("compiled", node)`` (shown as ``c:<name>``) where ``graph`` has no such node
    compiled: dict = field(default_factory=dict)

    # ------------------------------------------------------------- reading
    def name(self, lab: Label | None) -> str:
        """A short text for a label: node names joined by ``=``, ``c name`` for a multiple,
        the constant, ``~`` for other."""
        if lab is None:
            return "."
        if lab.kind == "const":
            return str(lab.coef)
        if lab.kind == "other":
            return "~"
        nm = "=".join(self.names[n] for n in lab.nodes)
        if lab.kind == "scaled":
            return f"{'?' if lab.coef is None else lab.coef} {nm}"
        return nm

    def kind_of(self, lab: Label) -> str:
        if lab.kind == "const":
            return "constant"
        if lab.kind == "other":
            return "other"
        ks = {self.kinds[n] for n in lab.nodes}
        return next(k for k in KINDS if k in ks)

    def find(self, node) -> list[tuple[int, int, int]]:
        """Every ``(layer, token, channel)`` whose cell holds ``node``'s value exactly."""
        return [(lt.layer, t, c) for lt in self.layers for (t, c), lab in sorted(lt.cells.items())
                if lab.kind == "node" and node in lab.nodes]

    def products(self) -> set:
        """The nodes some BaseConv inner channel forms (exactly or as a multiple) as the product of
        two non-constant sides (not a copy through a constant gate)."""
        out = set()
        for lt in self.layers:
            for gate, conv, prod in (lt.inner or {}).values():
                if prod.kind in ("node", "scaled") and is_product(gate, conv):
                    out.update(prod.nodes)
        return out

    def head_products(self) -> set:
        """The nodes some attention head writes (exactly or as a multiple): the products, summed
        over the key tokens, that LSA/ELSA heads form."""
        out = set()
        for lt in self.layers:
            for hd in lt.heads or ():
                for lab in hd.writes.values():
                    if lab.kind in ("node", "scaled"):
                        out.update(lab.nodes)
        return out

    def changed(self, i: int) -> set:
        """The cells ``(t, c)`` of layer ``i``'s state whose label differs from the previous state's
        (none for the input state)."""
        if i == 0:
            return set()
        a, b = self.layers[i - 1].cells, self.layers[i].cells
        return {tc for tc in set(a) | set(b) if a.get(tc) != b.get(tc)}

    def side(self, cells: dict, limit: int = 4) -> str:
        """A head side's labels: the distinct names of its nonzero cells in (token, column) order, at
        most ``limit`` of them."""
        names = list(dict.fromkeys(self.name(lab) for _, lab in sorted(cells.items())))
        if not names:
            return "[0]"
        more = f", +{len(names) - limit} more" if len(names) > limit else ""
        return "[" + ", ".join(names[:limit]) + more + "]"

    def head_line(self, hd: HeadTrace, limit: int = 4) -> str:
        """One head: the product it forms (its query, key and value sides' labels) and the cells it
        writes with their labels."""
        w = sorted(hd.writes.items())
        cells = "; ".join(f"({t}, {c}) {self.name(lab)}" for (t, c), lab in w[:limit])
        more = f"; +{len(w) - limit} more" if len(w) > limit else ""
        return (f"  head {hd.stage}.{hd.head}: q {self.side(hd.q)} x k {self.side(hd.k)} x v {self.side(hd.v)} "
                f"-> {cells or 'nothing'}{more}")

    def legend(self, keys=None) -> list[str]:
        """``name = operands`` for the gate nodes among ``keys`` (default: every gate some cell or
        inner channel holds) and the gates they are made of, in topological order: what ``p11``,
        ``s16`` compute."""
        if keys is None:
            keys = set()
            for lt in self.layers:
                for lab in list(lt.cells.values()) + [x for tri in (lt.inner or {}).values() for x in tri]:
                    keys.update(lab.nodes)
        keys = set(keys)
        for k in list(keys):  # and the gates they are made of
            if not isinstance(k, tuple) and k in self.graph:
                keys.update(nx.ancestors(self.graph, k))
        out = []
        for k in self.names:
            if k not in keys or self.kinds[k] not in ("product", "sum", "output") or isinstance(k, tuple):
                continue
            d = self.graph.nodes[k]
            if d[K.OP] not in (K.ADD, K.MUL):
                continue
            sym = " * " if d[K.OP] == K.MUL else " + "
            ops = []
            for u, m in C.operands(self.graph, k):
                nm = self.names.get(u, display(self.graph, u))
                ops += [f"({nm})" if nm.startswith("-") else nm] * m
            out.append(f"{self.names[k]} = {sym.join(ops)}")
        return out

    # ------------------------------------------------------------- JSON
    def to_json(self, max_cells: int | None = 200_000) -> dict:
        """The trace as JSON: per layer ``{"layer", "kind", "shape", "cells": [[t, c, [ids]]],
        "scaled": [[t, c, coef, [ids]]], "constants": [[t, c, value]], "other": [[t, c]],
        "inner": [[t, c, gate, conv, product]] | None}`` (inner labels as :meth:`Label.to_json`) and for an
        LSA layer / ELSA module ``"heads"`` (:meth:`HeadTrace.to_json`),
        ``nodes`` ``[[id, name, kind]]``; at most ``max_cells`` cells, inner channels and head cells in all:
        the layers past it keep only their counts (``"truncated": true``)."""
        used = 0
        layers = []
        truncated = False
        for lt in self.layers:
            n_here = len(lt.cells) + len(lt.inner or {}) + sum(
                len(hd.q) + len(hd.k) + len(hd.v) + len(hd.writes) for hd in lt.heads or ())
            entry = {"layer": lt.layer, "kind": lt.kind, "shape": list(lt.shape), "degree_bound": lt.degree,
                     "counts": lt.counts()}
            if max_cells is not None and used + n_here > max_cells:
                truncated = True
                entry["truncated"] = True
                layers.append(entry)
                continue
            used += n_here
            cells, scaled, consts, other = [], [], [], []
            for (t, c), lab in sorted(lt.cells.items()):
                if lab.kind == "node":
                    cells.append([t, c, jids(lab.nodes)])
                elif lab.kind == "scaled":
                    scaled.append([t, c, None if lab.coef is None else str(lab.coef), jids(lab.nodes)])
                elif lab.kind == "const":
                    consts.append([t, c, str(lab.coef)])
                else:
                    other.append([t, c])
            entry.update(cells=cells, scaled=scaled, constants=consts, other=other)
            if lt.heads is not None:
                entry["heads"] = [hd.to_json() for hd in lt.heads]
            entry["inner"] = None if lt.inner is None else [
                [t, c, gl.to_json(), zl.to_json(), pl.to_json()] for (t, c), (gl, zl, pl) in sorted(lt.inner.items())]
            layers.append(entry)
        return {"method": f"random evaluation modulo the prime {self.prime} at {self.draws} points "
                          "(Schwartz-Zippel); labels for reading, the proof is exact and separate",
                "prime": self.prime, "draws": self.draws, "seed": self.seed, "error_bound": self.error_bound,
                "truncated": truncated, "max_cells": max_cells,
                "nodes": [[jid(n), self.names[n], self.kinds[n]] for n in self.names],
                "layers": layers}

    # ------------------------------------------------------------- text
    def table(self, i: int, *, max_tokens: int = 12, max_channels: int = 12, width: int = 12,
              max_inner: int = 8, max_heads: int = 8) -> list[str]:
        """Layer ``i``'s state as a text table (occupied tokens x occupied channels, at most
        ``max_tokens`` x ``max_channels`` of them: the tokens and channels with a cell that changed
        in this layer first, marked ``*``, then the others in order; labels cut to ``width``), then up
        to ``max_inner`` of its inner channels and up to ``max_heads`` of its attention heads; a note
        says what was left out."""
        lt = self.layers[i]
        T, Cn = lt.shape
        cnt = lt.counts()
        changed = self.changed(i)
        what = "input state" if lt.layer == 0 else f"after layer {lt.layer} ({lt.kind})"
        L = [f"layer {lt.layer}: {what}, {T} x {Cn}, {len(lt.cells)} nonzero cells: {cnt['node']} node, "
             f"{cnt['scaled']} multiple, {cnt['const']} constant, {cnt['other']} other"
             + (f"; {len(changed)} changed by this layer (channels marked *)" if lt.layer else "")]
        occupied = set(lt.cells) | changed  # a changed cell may now be empty
        ct, cc = {t for t, _ in changed}, {c for _, c in changed}
        first = lambda xs, keep, n: sorted(sorted(xs, key=lambda x: (x not in keep, x))[:n])  # noqa: E731
        toks = sorted({t for t, _ in occupied})
        chans = sorted({c for _, c in occupied})
        st, sc = first(toks, ct, max_tokens), first(chans, cc, max_channels)
        cut = lambda s: s if len(s) <= width else s[:width - 1] + "+"  # noqa: E731
        if st:
            head = ["t\\c"] + [f"{c}*" if c in cc else str(c) for c in sc]
            rows = [[str(t)] + [cut(self.name(lt.cells.get((t, c)))) for c in sc] for t in st]
            ws = [max(len(r[j]) for r in [head] + rows) for j in range(len(head))]
            L += ["  " + " ".join(s.rjust(w) for s, w in zip(r, ws)) for r in [head] + rows]
        if len(toks) > len(st) or len(chans) > len(sc):
            L.append(f"  (showing {len(st)} of {len(toks)} occupied tokens, {len(sc)} of {len(chans)} occupied "
                     "channels; the JSON report (--json with --trace) holds every cell)")
        if lt.inner:
            items = self.inner_items(i)
            prods = sum(1 for _, (gl, zl, _p) in items if is_product(gl, zl))
            L.append(f"  inner channels: {len(items)} nonzero (token, channel) products, {prods} of two "
                     "non-constant sides, the others a copy or a multiple by a constant")
            for (t, c), (gl, zl, pl) in items[:max_inner]:
                L.append(f"  inner ({t}, {c}): {self.name(gl)} x {self.name(zl)} = {self.name(pl)}")
            if len(items) > max_inner:
                L.append(f"  ({max_inner} of {len(items)} shown, products first)")
        if lt.heads:
            L.append(f"  heads: {len(lt.heads)} in {1 + max(hd.stage for hd in lt.heads)} stage(s); head s.h: "
                     "query x key x value sides (labels) -> the cells it writes (token, channel) and their labels")
            L += [self.head_line(hd) for hd in lt.heads[:max_heads]]
            if len(lt.heads) > max_heads:
                L.append(f"  ({max_heads} of {len(lt.heads)} heads shown; the JSON report holds every head)")
        return L

    def inner_items(self, i: int) -> list:
        """Layer ``i``'s nonzero inner channels, the products of two non-constant sides first."""
        return sorted((self.layers[i].inner or {}).items(), key=lambda kv: (not is_product(*kv[1][:2]), kv[0]))

    def markdown(self, i: int) -> list[str]:
        """Layer ``i``'s state as a markdown table (every token and channel) and its inner channels."""
        lt = self.layers[i]
        T, Cn = lt.shape
        esc = lambda s: s.replace("|", "\\|").replace("_", "\\_")  # noqa: E731
        L = ["| t \\ c | " + " | ".join(str(c) for c in range(Cn)) + " |", "|---" * (Cn + 1) + "|"]
        for t in range(T):
            L.append(f"| {t} | " + " | ".join(esc(self.name(lt.cells[(t, c)])) if (t, c) in lt.cells else ""
                                             for c in range(Cn)) + " |")
        if lt.inner:
            items = self.inner_items(i)
            prods = [it for it in items if is_product(*it[1][:2])]
            rest = len(items) - len(prods)
            L += ["", "Inner channels (token, channel): gate x convolution = product: "
                  + ("; ".join(f"({t}, {c}) {esc(self.name(gl))} x {esc(self.name(zl))} = {esc(self.name(pl))}"
                               for (t, c), (gl, zl, pl) in prods) if prods else "no product of two non-constant sides")
                  + (f"; and {rest} cop{'y' if rest == 1 else 'ies'} (a constant gate times a value)" if rest else "")
                  + "."]
        return L

    # ------------------------------------------------------------- figure
    def plot(self, path, *, annotate_below: int = 160, dpi: int = 90):
        """One panel per state (the input state, then after each layer), cells coloured by what
        they hold (:data:`KINDS`), annotated with node names where a panel has at most
        ``annotate_below`` cells; written atomically (``polyverify.plumbing.cli.save_figure``;
        ``verify/compiler_trace_plot.py``)."""
        from .compiler_trace_plot import plot_trace

        return plot_trace(self, path, annotate_below=annotate_below, dpi=dpi)


# --------------------------------------------------------------------------- names

def node_kind(g: nx.DiGraph, v) -> str:
    """What node ``v`` of ``g`` is: ``input``, ``output``, ``product``, ``sum`` or ``constant``."""
    d = g.nodes[v]
    if d[K.OP] == K.INPUT:
        return "input"
    if d.get(K.OUTPUT) is not None:
        return "output"
    return {K.MUL: "product", K.ADD: "sum"}.get(d[K.OP], "constant")


def display(g: nx.DiGraph, v, inputs=frozenset()) -> str:
    """A node's short name (the module docstring of ``verify.compiler_trace``); ``inputs``: the
    circuit's input names."""
    d = g.nodes[v]
    if d[K.OP] == K.INPUT:
        return d[K.NAME]
    if d.get(K.OUTPUT) is not None:
        return d[K.OUTPUT] + ("'" if d[K.OUTPUT] in inputs else "")
    if d[K.OP] == K.CONST:
        return str(d[K.VALUE])
    return f"{'p' if d['op'] == 'mul' else 's'}{v}"
