"""Which circuit node sits where: residual-stream labels of a compiled circuit, as tracr's.

tracr (Lindner et al. 2023) labels every dimension of its residual stream with the variable and
value it carries.  This module gives a compiled circuit the same reading, computed *after the
fact* from the compiled stack and the circuit alone (so it knows nothing of the passes that
built the stack, and also reads a stack from a weight file): for every layer it says which
circuit node's value sits at each ``(token, channel)`` of the state, and for a BaseConv layer
(seed 000 eq. (2)/(19)) which product each *inner* channel forms, its gate side
``u W_gate + B_gate`` times its convolution side ``h * (u W_in + B_in) + B_conv``.

How the labels are found: by random evaluation modulo a prime.  ``draws`` independent points
are drawn uniformly from ``F_p^n`` (one residue per circuit input, ``p = 2^31 - 1`` unless a
weight's denominator is divisible by it: then the next prime of ``verify.prover.modular.PRIMES``); the
stack runs on them layer by layer (``Construction.run`` with a per-layer hook; the layer
equations on residues are ``verify.prover.modular``'s, those of ``constructions.layers``), and every
node of the circuit is evaluated on the same points.  A cell is labelled

* *empty* where its value is 0 at every point (left out of the labels),
* with the nodes whose values equal it at every point (``cells``),
* with ``c`` times the nodes where it equals ``c`` times them at every point (``scaled``;
  ``c`` a rational recovered from its residue by rational reconstruction, ``None`` where no
  rational with numerator and denominator below ``sqrt(p/2)`` has that residue),
* as the constant ``c`` where its value is the same at every point (``constants``: e.g. the
  one-hot position block of the ``lsa`` target),
* as *other* (a partial sum, a routed linear combination: a value that is no node's multiple).

The nodes are those of ``con.graph`` (the circuit as given, which the proof compares with) and,
where a pass rewrote the circuit before placing it (re-association: ``con.compiled_graph``), the
rewritten circuit's nodes whose values no node of ``con.graph`` has: keys ``("compiled", id)``,
shown as ``c:p12``.  Names: an input by its name, an output gate by its output name (with a
prime, ``x_0'``, where an input has that name: the GD step's next ``x_0``), another gate as
``p<id>`` (a product) or ``s<id>`` (a sum); :meth:`Trace.legend` says what each computes.

The error bound.  Every value here is a polynomial in the inputs; a label compares a cell's
polynomial ``w`` with a node's ``v`` (or with the constant 1, or 0).  If ``w`` is not a
multiple ``c v`` of ``v`` but ``(w, v)`` agree up to one common factor at all ``draws`` points,
then ``w(x) v(y) - w(y) v(x)`` vanished at the pairs of points; by Schwartz-Zippel (each of
``w``, ``v`` of degree at most ``d`` over ``F_p``) that happens with probability at most
``(draws + 1) (d / p)^(draws - 1)`` (the first point where not both vanish fixes ``c``, each later
point then passes with probability at most ``d / p``).  A union bound over every labelled cell
and every distinct node value gives :attr:`Trace.error_bound`, the probability that *any*
label is wrong; ``d`` is bounded per layer from the weights' nonzero patterns (a BaseConv
inner channel's degree is its gate side's plus its convolution side's, per channel; an LSA/ELSA
stage at most triples it) and the circuit's node degrees.  :func:`trace` takes the fewest draws
(at least 3) that make this bound at most ``error_target`` (1e-9 by default).  Caveat of any
evaluation modulo ``p``: a difference polynomial whose rational coefficients all have
numerators divisible by ``p`` vanishes modulo ``p``; the bound is for differences that do not.

These labels are for reading, like tracr's; they are not the proof.  The proof
(``verify.prover.proof.prove``) stays exact, symbolic in every input and separate: it shows that the
final state *is* the circuit's outputs, for every input, whatever the labels say.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import networkx as nx
import numpy as np

import circuits as C
from circuits import keys as K

#: the kinds a node (and so a cell) is drawn as, in priority order where a cell holds several
KINDS = ("output", "input", "product", "sum", "constant", "other")
_NEG = -np.inf  # degree of an identically zero value


# --------------------------------------------------------------------------- labels

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
            return _jids(self.nodes)
        if self.kind == "scaled":
            return {"times": None if self.coef is None else str(self.coef), "of": _jids(self.nodes)}
        if self.kind == "const":
            return {"const": str(self.coef)}
        return None


OTHER = Label("other")


def _jid(n):
    """A node key in JSON: the node id, or ``["compiled", id]`` for a node of ``compiled_graph``."""
    return list(n) if isinstance(n, tuple) else n


def _jids(nodes) -> list:
    return [_jid(n) for n in nodes]


def _is_product(gate: Label, conv: Label) -> bool:
    """An inner channel whose gate and convolution sides are both non-constant (a product, not
    a copy or a multiple by a constant)."""
    return gate.kind != "const" and conv.kind != "const"


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
                if prod.kind in ("node", "scaled") and _is_product(gate, conv):
                    out.update(prod.nodes)
        return out

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
                nm = self.names.get(u, _display(self.graph, u))
                ops += [f"({nm})" if nm.startswith("-") else nm] * m
            out.append(f"{self.names[k]} = {sym.join(ops)}")
        return out

    # ------------------------------------------------------------- JSON
    def to_json(self, max_cells: int | None = 200_000) -> dict:
        """The trace as JSON: per layer ``{"layer", "kind", "shape", "cells": [[t, c, [ids]]],
        "scaled": [[t, c, coef, [ids]]], "constants": [[t, c, value]], "other": [[t, c]],
        "inner": [[t, c, gate, conv, product]] | None}`` (inner labels as :meth:`Label.to_json`),
        ``nodes`` ``[[id, name, kind]]``; at most ``max_cells`` cells and inner channels in all:
        the layers past it keep only their counts (``"truncated": true``)."""
        used = 0
        layers = []
        truncated = False
        for lt in self.layers:
            n_here = len(lt.cells) + len(lt.inner or {})
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
                    cells.append([t, c, _jids(lab.nodes)])
                elif lab.kind == "scaled":
                    scaled.append([t, c, None if lab.coef is None else str(lab.coef), _jids(lab.nodes)])
                elif lab.kind == "const":
                    consts.append([t, c, str(lab.coef)])
                else:
                    other.append([t, c])
            entry.update(cells=cells, scaled=scaled, constants=consts, other=other)
            entry["inner"] = None if lt.inner is None else [
                [t, c, gl.to_json(), zl.to_json(), pl.to_json()] for (t, c), (gl, zl, pl) in sorted(lt.inner.items())]
            layers.append(entry)
        return {"method": f"random evaluation modulo the prime {self.prime} at {self.draws} points "
                          "(Schwartz-Zippel); labels for reading, the proof is exact and separate",
                "prime": self.prime, "draws": self.draws, "seed": self.seed, "error_bound": self.error_bound,
                "truncated": truncated, "max_cells": max_cells,
                "nodes": [[_jid(n), self.names[n], self.kinds[n]] for n in self.names],
                "layers": layers}

    # ------------------------------------------------------------- text
    def table(self, i: int, *, max_tokens: int = 12, max_channels: int = 12, width: int = 12,
              max_inner: int = 8) -> list[str]:
        """Layer ``i``'s state as a text table (occupied tokens x occupied channels, at most
        ``max_tokens`` x ``max_channels`` of them, labels cut to ``width``), then up to
        ``max_inner`` of its inner channels; a note says what was left out."""
        lt = self.layers[i]
        T, Cn = lt.shape
        cnt = lt.counts()
        what = "input state" if lt.layer == 0 else f"after layer {lt.layer} ({lt.kind})"
        L = [f"layer {lt.layer}: {what}, {T} x {Cn}, {len(lt.cells)} nonzero cells: {cnt['node']} node, "
             f"{cnt['scaled']} multiple, {cnt['const']} constant, {cnt['other']} other"]
        toks = sorted({t for t, _ in lt.cells})
        chans = sorted({c for _, c in lt.cells})
        st, sc = toks[:max_tokens], chans[:max_channels]
        cut = lambda s: s if len(s) <= width else s[:width - 1] + "+"  # noqa: E731
        if st:
            head = ["t\\c"] + [str(c) for c in sc]
            rows = [[str(t)] + [cut(self.name(lt.cells.get((t, c)))) for c in sc] for t in st]
            ws = [max(len(r[j]) for r in [head] + rows) for j in range(len(head))]
            L += ["  " + " ".join(s.rjust(w) for s, w in zip(r, ws)) for r in [head] + rows]
        if len(toks) > len(st) or len(chans) > len(sc):
            L.append(f"  (showing {len(st)} of {len(toks)} occupied tokens, {len(sc)} of {len(chans)} occupied "
                     "channels; the JSON report (--json with --trace) holds every cell)")
        if lt.inner:
            items = self.inner_items(i)
            prods = sum(1 for _, (gl, zl, _p) in items if _is_product(gl, zl))
            L.append(f"  inner channels: {len(items)} nonzero (token, channel) products, {prods} of two "
                     "non-constant sides, the others a copy or a multiple by a constant")
            for (t, c), (gl, zl, pl) in items[:max_inner]:
                L.append(f"  inner ({t}, {c}): {self.name(gl)} x {self.name(zl)} = {self.name(pl)}")
            if len(items) > max_inner:
                L.append(f"  ({max_inner} of {len(items)} shown, products first)")
        return L

    def inner_items(self, i: int) -> list:
        """Layer ``i``'s nonzero inner channels, the products of two non-constant sides first."""
        return sorted((self.layers[i].inner or {}).items(), key=lambda kv: (not _is_product(*kv[1][:2]), kv[0]))

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
            prods = [it for it in items if _is_product(*it[1][:2])]
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
        ``annotate_below`` cells; written atomically (``polyverify.cli.save_figure``)."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.colors import ListedColormap
        from matplotlib.patches import Patch
        from matplotlib.ticker import MaxNLocator

        from polyverify.cli import save_figure

        colours = {"empty": "#ffffff", "input": "#4c78a8", "sum": "#54a24b", "product": "#f58518",
                   "output": "#e45756", "constant": "#bab0ac", "other": "#79706e"}
        order = list(colours)
        cmap = ListedColormap([colours[k] for k in order])
        n = len(self.layers)
        ncol = min(n, 4)
        nrow = math.ceil(n / ncol)
        T, Cn = self.layers[-1].shape
        pw = min(6.0, max(2.2, 0.45 * Cn))
        ph = min(6.0, max(1.6, 0.35 * T))
        fig, axes = plt.subplots(nrow, ncol, figsize=(pw * ncol, ph * nrow + 0.8), squeeze=False)
        for ax in axes.flat[n:]:
            ax.axis("off")
        for ax, lt in zip(axes.flat, self.layers):
            t_, c_ = lt.shape
            grid = np.zeros(lt.shape, dtype=int)
            for (t, c), lab in lt.cells.items():
                grid[t, c] = order.index(self.kind_of(lab))
            ax.imshow(grid, cmap=cmap, vmin=0, vmax=len(order) - 1, aspect="auto", interpolation="nearest")
            ax.set_xticks(np.arange(-0.5, c_, 1), minor=True)
            ax.set_yticks(np.arange(-0.5, t_, 1), minor=True)
            if t_ * c_ <= 4000:
                ax.grid(which="minor", color="#dddddd", linewidth=0.4)
            ax.tick_params(which="minor", length=0)
            ax.set_xlabel("channel", fontsize=7)
            ax.set_ylabel("token", fontsize=7)
            ax.tick_params(labelsize=6)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=8))
            ax.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=8))
            title = "input state" if lt.layer == 0 else f"after layer {lt.layer} ({lt.kind})"
            ax.set_title(f"{title}: {len(lt.cells)} of {t_ * c_} cells", fontsize=8)
            if t_ * c_ <= annotate_below:
                for (t, c), lab in lt.cells.items():
                    s = self.name(lab)
                    ax.text(c, t, s if len(s) <= 9 else s[:8] + "+", ha="center", va="center",
                            fontsize=6 if t_ * c_ <= 60 else 5, color="white" if self.kind_of(lab) in
                            ("input", "output", "other") else "black")
        fig.legend(handles=[Patch(facecolor=colours[k], edgecolor="#999999", label=k) for k in order],
                   loc="lower center", ncol=len(order), fontsize=7, frameon=False)
        fig.tight_layout(rect=(0, 0.06, 1, 1))
        save_figure(fig, path, dpi=dpi)
        plt.close(fig)
        return path


# --------------------------------------------------------------------------- arithmetic mod p

def _inv(a: np.ndarray, p: int) -> np.ndarray:
    """Elementwise inverse of nonzero residues (Fermat), exactly in int64 (``p < 2^31``)."""
    r = np.ones_like(a)
    b = a % p
    e = p - 2
    while e:
        if e & 1:
            r = r * b % p
        b = b * b % p
        e >>= 1
    return r


def _rational(x: int, p: int) -> Fraction | None:
    """The rational ``a / b`` with ``|a|, b <= sqrt(p / 2)`` congruent to ``x`` mod ``p``, or None
    (rational reconstruction: the extended Euclidean algorithm stopped half way)."""
    bound = math.isqrt(p // 2)
    r0, r1, s0, s1 = p, int(x) % p, 0, 1
    while r1 > bound:
        q = r0 // r1
        r0, r1, s0, s1 = r1, r0 - q * r1, s1, s0 - q * s1
    if s1 == 0 or abs(s1) > bound:
        return None
    return Fraction(r1, s1)


def _node_values(g: nx.DiGraph, xs: dict, p: int, const, n: int) -> tuple[dict, dict]:
    """Every node's residues at the points (``xs``: input name -> (draws,) int64) and its formal
    degree, in topological order."""
    val, deg = {}, {}
    for v in nx.topological_sort(g):
        d = g.nodes[v]
        op = d[K.OP]
        if op == K.INPUT:
            val[v], deg[v] = xs[d[K.NAME]] % p, 1
        elif op == K.CONST:
            val[v], deg[v] = np.full(n, const(d[K.VALUE]), dtype=np.int64), 0
        else:
            acc = None
            dg = 0
            for u, m in C.operands(g, v):
                x = val[u]
                if op == K.ADD:
                    term = x * m % p
                    acc = term if acc is None else (acc + term) % p
                    dg = max(dg, deg[u])
                else:
                    for _ in range(m):
                        acc = x.copy() if acc is None else acc * x % p
                    dg += m * deg[u]
            val[v], deg[v] = acc, dg
    return val, deg


class _Index:
    """Node values by their residues (exact) and by their residues scaled to 1 at the first
    nonzero point (multiples); constant-valued nodes are left out (a constant cell is labelled
    as its value)."""

    def __init__(self, p: int):
        self.p = p
        self.exact: dict = {}
        self.scaled: dict = {}

    def add(self, vals: dict, *, new_only: bool = False) -> dict:
        """Index ``vals`` (key -> residues); ``new_only``: only values no key indexed so far has
        (the others are returned, key -> the first key already holding that value)."""
        p, same = self.p, {}
        for v, x in vals.items():
            if not x.any() or (x == x[0]).all():
                continue
            b = x.tobytes()
            if new_only and b in self.exact:
                same[v] = self.exact[b][0]
                continue
            self.exact.setdefault(b, []).append(v)
            k = int(np.argmax(x != 0))
            key = (k, (x * _inv(x[k:k + 1], p) % p).tobytes())
            self.scaled.setdefault(key, (int(x[k]), []))[1].append(v)
        return same

    def label(self, V: np.ndarray) -> dict:
        """Labels of the columns of ``V`` ((draws, M) residues): ``{column: Label}`` for the
        nonzero columns."""
        p = self.p
        nz = np.flatnonzero(V.any(axis=0))
        if not len(nz):
            return {}
        W = np.ascontiguousarray(V[:, nz].T)  # (m, draws)
        k = np.argmax(W != 0, axis=1)
        piv = W[np.arange(len(nz)), k]
        N = W * _inv(piv, p)[:, None] % p
        const = (W == W[:, :1]).all(axis=1)
        out = {}
        for j, col in enumerate(nz.tolist()):
            w = W[j]
            hit = self.exact.get(w.tobytes())
            if hit is not None:
                out[col] = Label("node", tuple(hit))
                continue
            if const[j]:
                out[col] = Label("const", (), _rational(int(w[0]), p))
                continue
            s = self.scaled.get((int(k[j]), N[j].tobytes()))
            if s is not None:
                pv, nodes = s
                out[col] = Label("scaled", tuple(nodes), _rational(int(piv[j]) * pow(pv, -1, p) % p, p))
                continue
            out[col] = OTHER
        return out


# --------------------------------------------------------------------------- degrees

def _max_deg(a) -> float:
    a = np.asarray(a, dtype=float)
    return float(a.max()) if a.size else _NEG


def _lin_deg(du: np.ndarray, W: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per output column: the degree bound of ``u W + B`` (``du`` per input channel)."""
    d = np.where(W != 0, du[:, None], _NEG).max(axis=0) if W.size else np.full(W.shape[1], _NEG)
    return np.maximum(d, np.where((b != 0).any(axis=0), 0.0, _NEG))


def _baseconv_degrees(L: dict, du: np.ndarray):
    """Per channel degree bounds of a BaseConv layer's gate, convolution and product sides and
    of its output (seed 000 eq. (19): each side is affine in ``u``, the product adds them)."""
    dg = _lin_deg(du, L["W_gate"], L["b_gate"])
    dz = np.where((L["h"] != 0).any(axis=0), _lin_deg(du, L["W_in"], L["b_in"]), _NEG)
    dz = np.maximum(dz, np.where((L["b_conv"] != 0).any(axis=0), 0.0, _NEG))
    dp = dg + dz
    dy = _lin_deg(dp, L["W_out"], L["b_out"])
    if L["residual"]:
        dy = np.maximum(dy, du)
    return dg, dz, dp, dy


def _attention_degrees(L: dict, du: np.ndarray) -> np.ndarray:
    """An LSA layer / ELSA module: each stage's heads are cubic in its input (seed 001 eq. (8),
    (16)), the skip connection adds the input."""
    d = max(_max_deg(du), 0.0)
    for _stage in L["stages"]:
        d = 3 * d
    if L["residual"]:
        d = max(d, _max_deg(du))
    return np.full(du.shape, d)


# --------------------------------------------------------------------------- the trace

class _ModLayer:
    """A layer on residues for ``Construction.run``: ``verify.prover.modular.forward``; a BaseConv layer
    also keeps its gate side, convolution side and their product (the terms of seed 000 eq. (19)),
    checked against that forward."""

    def __init__(self, L: dict, p: int, ran: list):
        self.L, self.p, self.inner, self.ran = L, p, None, ran

    def forward(self, u, *, conv_method: str = "direct"):
        from .prover import modular as M

        L, p = self.L, self.p
        y = M.forward(L, u, p)
        if L["kind"] == "baseconv":
            g = (M.mm(u, L["W_gate"], p) + L["b_gate"]) % p
            v = (M.mm(u, L["W_in"], p) + L["b_in"]) % p
            z = (M.conv(v, L["h"], L["causal"], p, L["same"]) + L["b_conv"]) % p
            prod = g * z % p
            y2 = (M.mm(prod, L["W_out"], p) + L["b_out"]) % p
            if L["residual"]:
                y2 = (u + y2) % p
            if not np.array_equal(y, y2):  # the layer's equations changed under this module
                raise RuntimeError("trace: a BaseConv layer's gate x convolution sides do not give its forward")
            self.inner = (g, z, prod)
        self.ran.append(self)
        return y


def _kind(g: nx.DiGraph, v) -> str:
    d = g.nodes[v]
    if d[K.OP] == K.INPUT:
        return "input"
    if d.get(K.OUTPUT) is not None:
        return "output"
    return {K.MUL: "product", K.ADD: "sum"}.get(d[K.OP], "constant")


def _display(g: nx.DiGraph, v, inputs=frozenset()) -> str:
    """A node's short name (module docstring); ``inputs``: the circuit's input names."""
    d = g.nodes[v]
    if d[K.OP] == K.INPUT:
        return d[K.NAME]
    if d.get(K.OUTPUT) is not None:
        return d[K.OUTPUT] + ("'" if d[K.OUTPUT] in inputs else "")
    if d[K.OP] == K.CONST:
        return str(d[K.VALUE])
    return f"{'p' if d['op'] == 'mul' else 's'}{v}"


def _bound(pairs_deg: list[tuple[int, float]], draws: int, p: int) -> float:
    return float(sum(pairs * (draws + 1) * (d / p) ** (draws - 1) for pairs, d in pairs_deg))


def trace(con, *, seed: int = 0, draws: int | None = None, error_target: float = 1e-9,
          max_draws: int = 24, on_layer=None) -> Trace:
    """Label every layer's state of the compiled circuit ``con`` (a
    :class:`~constructions.compiler.circuit.CompiledCircuit`: its ``graph``, input map and layers)
    with the circuit's nodes, by random evaluation modulo a prime (module docstring).
    ``draws``: the number of random points (default: the fewest, at least 3 and at most
    ``max_draws``, that bring :attr:`Trace.error_bound` to ``error_target``); ``on_layer(i)``
    is called after each stack layer (progress)."""
    from .prover import modular as M

    g = con.graph
    names = C.inputs(g)
    # the circuit the layers compute, where a pass rewrote it (re-association): its nodes label
    # what no node of the circuit as given holds
    h = getattr(con, "compiled_graph", None)
    h = h if h is not None and h is not g and set(C.inputs(h)) <= set(names) else None
    graphs = [g] if h is None else [g, h]
    layers_all = con.layers(0)
    last = None
    for p in M.PRIMES:
        try:
            res = {id(L): M.layer_residues(L, p) for L in layers_all}
            consts = {slot: M.residue(v, p) for slot, v in (con.constants or {}).items()}
            cres_of = {d[K.VALUE]: M.residue(d[K.VALUE], p) for gr in graphs for _, d in gr.nodes(data=True)
                       if d[K.OP] == K.CONST}
            break
        except M.Unrepresentable as e:
            last = e
    else:
        raise M.Unrepresentable(f"every prime of PRIMES divides a denominator ({last})")
    T, Cn = con.layout.shape

    # degree bounds per layer (from the weights' nonzero patterns) and the circuit's node degrees
    dmax_nodes = 1
    for gr in graphs:
        _, node_deg = _node_values(gr, {n: np.ones(1, np.int64) for n in names}, p, lambda c: 1, 1)
        dmax_nodes = max([dmax_nodes] + list(node_deg.values()))
    du = np.ones(Cn)
    degs = [(T * Cn, max(1.0, dmax_nodes))]
    for L in layers_all:
        Lr = res[id(L)]
        if Lr["kind"] == "baseconv":
            dg, dz, dp, dy = _baseconv_degrees(Lr, du)
            d = max(1.0, dmax_nodes, _max_deg(dg), _max_deg(dz), _max_deg(dp), _max_deg(dy))
            cells = T * Cn + 3 * T * len(dp)
        else:
            dy = _attention_degrees(Lr, du)
            d = max(1.0, dmax_nodes, _max_deg(dy))
            cells = T * Cn
        degs.append((cells, d))
        du = dy
    classes = sum(gr.number_of_nodes() for gr in graphs) + 2  # every node value, the constants, zero
    pairs = [(cells * classes, d) for cells, d in degs]
    if draws is None:
        draws = 3
        while draws < max_draws and _bound(pairs, draws, p) > error_target:
            draws += 1
    if draws < 2:
        raise ValueError(f"draws {draws}: labels need at least 2 random points")
    bound = min(1.0, _bound(pairs, draws, p))

    rng = np.random.default_rng(seed)
    xs = {nm: rng.integers(0, p, size=draws, dtype=np.int64) for nm in names}
    index = _Index(p)
    index.add(_node_values(g, xs, p, lambda c: cres_of[c], draws)[0])
    ins = frozenset(names)
    names_, kinds_ = {v: _display(g, v, ins) for v in nx.topological_sort(g)}, {v: _kind(g, v) for v in g}
    aliases: dict = {}
    if h is not None:
        hv = _node_values(h, xs, p, lambda c: cres_of[c], draws)[0]
        aliases = index.add({("compiled", v): x for v, x in hv.items()}, new_only=True)
        aliases = {k[1]: a for k, a in aliases.items()}
        for v in nx.topological_sort(h):
            key = ("compiled", v)
            if v not in aliases:
                aliases[v] = key
                names_[key], kinds_[key] = "c:" + _display(h, v, ins), _kind(h, v)

    S0 = con.input_state(xs) if names else np.zeros((draws, T, Cn), dtype=np.int64)
    S0 = np.asarray(S0, dtype=np.int64) % p
    for (t, c), r in consts.items():
        S0[:, t, c] = r

    def cells_of(S) -> dict:
        lab = index.label(S.reshape(draws, -1))
        return {divmod(col, S.shape[-1]): lb for col, lb in lab.items()}

    out = [LayerTrace(0, "input", (T, Cn), cells_of(S0), None, int(degs[0][1]))]
    ran: list = []  # the residue layer of each stack layer, in order (the run loop casts each distinct layer once)

    def hook(i, S):
        m = ran[i]
        lt = LayerTrace(i + 1, m.L["kind"], tuple(S.shape[-2:]), cells_of(S), None, int(degs[i + 1][1]))
        if m.inner is not None:
            gz, zz, pz = m.inner
            W = pz.shape[-1]
            lg, lz, lp = (index.label(a.reshape(draws, -1)) for a in (gz, zz, pz))
            lt.inner = {divmod(col, W): (lg.get(col, OTHER), lz.get(col, OTHER), lab) for col, lab in lp.items()}
        out.append(lt)
        if on_layer is not None:
            on_layer(i)

    con.run(xs, 0, state=S0, cast=lambda L: _ModLayer(res[id(L)], p, ran), on_layer=hook)
    return Trace(out, p, draws, seed, bound, names_, kinds_, g, aliases)
