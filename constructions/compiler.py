"""Compile any arithmetic circuit into a BaseConv stack.

Seed 000 App. D.2.1 shows that single BaseConv layers implement LINEAR and
MULTIPLY; seed 003 Thm. H.21 (seed 000 Thm. D.30) compiles an (n, s, Delta,
w)-circuit into O(Delta log w) layers with inner dimension O(w).  This
compiler is levelled and fuses the two primitives: one BaseConv layer computes,
in each channel, the product of two *affine* forms of the previous state
(gate side x conv side, identity filter), and ``W_out`` re-mixes the products.
Additions and multiplications by constants are free (they live in the affine
forms), so the depth is the *multiplicative* depth of the circuit after every
n-ary product is split into a balanced binary tree:

    layers = max(1, max over outputs of mult_depth),  mult_depth(x*y) = 1 + max(...)

and the state width is the largest number of values live between two layers.

The stack works on one token (T = 1): a state is a row vector of channels.
Inputs enter at channels ``0..n_inputs-1`` in sorted name order; the last
layer leaves the outputs at channels ``0..n_outputs-1`` in sorted name order.

Pass contract (in the spirit of tracr's passes): ``_linearise`` maps every
circuit node to an affine form over *atoms* (inputs and binary products);
``_schedule`` gives each atom a level and a live range; ``_emit`` turns the
schedule into weights.  Nothing mutates the circuit.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import networkx as nx
import numpy as np

import circuits as C

from .base import Construction
from .layers import BaseConv
from .layout import Layout

CONST = "__const__"


@dataclass
class Schedule:
    atoms: dict  # atom id -> ("input", name) | ("mul", formA, formB)
    level: dict  # atom id -> level (inputs 0)
    outputs: dict  # output name -> affine form
    depth: int
    live: list  # live[j] = sorted atom ids held in the state after layer j (j = 0: input state)
    products: list  # products[j] = atom ids whose product channels layer j (1-based) forms
    width: int = 0
    info: dict = field(default_factory=dict)


def _scale(form: dict, c: Fraction) -> dict:
    return {k: v * c for k, v in form.items() if v * c != 0}


def _addf(a: dict, b: dict, m: int = 1) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + m * v
        if out[k] == 0:
            del out[k]
    return out


def _key(form: dict):
    return tuple(sorted(((str(k), v) for k, v in form.items()), key=lambda t: t[0]))


def _linearise(g: nx.DiGraph):
    atoms: dict = {}
    level: dict = {}
    by_key: dict = {}
    forms: dict = {}

    def flevel(f):
        return max((level[a] for a in f if a != CONST), default=0)

    def product_atom(fa, fb):
        ka, kb = _key(fa), _key(fb)
        key = (min(ka, kb), max(ka, kb))
        if key not in by_key:
            aid = f"p{len(atoms)}"
            atoms[aid] = ("mul", fa, fb)
            level[aid] = 1 + max(flevel(fa), flevel(fb))
            by_key[key] = aid
        return {by_key[key]: Fraction(1)}

    for name in C.inputs(g):
        aid = f"in:{name}"
        atoms[aid], level[aid] = ("input", name), 0
    for v in nx.topological_sort(g):
        d = g.nodes[v]
        op = d["op"]
        if op == "input":
            forms[v] = {f"in:{d['name']}": Fraction(1)}
        elif op == "const":
            forms[v] = {CONST: Fraction(d["value"])} if d["value"] != 0 else {}
        elif op == "add":
            f = {}
            for u, m in C.operands(g, v):
                f = _addf(f, forms[u], m)
            forms[v] = f
        else:
            scale, factors = Fraction(1), []
            for u, m in C.operands(g, v):
                fu = forms[u]
                for _ in range(m):
                    if not fu:
                        scale = Fraction(0)
                    elif set(fu) == {CONST}:
                        scale *= fu[CONST]
                    else:
                        factors.append(fu)
            if scale == 0:
                forms[v] = {}
            elif not factors:
                forms[v] = {CONST: scale}
            else:
                # combine the two shallowest factors first (Huffman on levels): balanced tree
                pool = sorted(factors, key=flevel)
                while len(pool) > 1:
                    fa, fb = pool.pop(0), pool.pop(0)
                    p = product_atom(fa, fb)
                    pool.append(p)
                    pool.sort(key=flevel)
                forms[v] = _scale(pool[0], scale)
    outputs = {name: forms[n] for name, n in C.output_nodes(g).items()}
    return atoms, level, outputs


def _schedule(g: nx.DiGraph) -> Schedule:
    atoms, level, outputs = _linearise(g)
    # keep only atoms reachable from the outputs
    need, stack = set(), [a for f in outputs.values() for a in f if a != CONST]
    while stack:
        a = stack.pop()
        if a in need:
            continue
        need.add(a)
        if atoms[a][0] == "mul":
            stack += [x for f in atoms[a][1:] for x in f if x != CONST]
    depth = max([1] + [level[a] for a in need])
    last_use = {}
    for a in need:
        if atoms[a][0] == "mul":
            for f in atoms[a][1:]:
                for x in f:
                    if x != CONST:
                        last_use[x] = max(last_use.get(x, 0), level[a])
    for f in outputs.values():
        for x in f:
            if x != CONST:
                last_use[x] = max(last_use.get(x, 0), depth)
    inputs = [f"in:{n}" for n in C.inputs(g)]
    live = [inputs]  # the input state holds every input
    products = [None]
    for j in range(1, depth + 1):
        new = sorted((a for a in need if level[a] == j), key=lambda a: int(a[1:]))
        if j < depth:
            carried = [a for a in live[j - 1] if a in last_use and last_use[a] > j]
            prods = carried + new
            live.append(carried + [a for a in new if last_use.get(a, 0) > j])
        else:
            out_atoms = {x for f in outputs.values() for x in f}
            prods = [a for a in live[j - 1] if a in out_atoms] + new
            live.append([])
        products.append(prods)
    n_out = len(outputs)
    width = max([len(s) for s in live] + [len(p) for p in products[1:]] + [n_out, 1])
    return Schedule(atoms, level, outputs, depth, live, products, width)


def _emit(s: Schedule) -> list[BaseConv]:
    Cw = s.width
    out_names = sorted(s.outputs)
    layers = []
    for j in range(1, s.depth + 1):
        L = BaseConv.zeros(1, Cw, causal=True)
        ch = {a: i for i, a in enumerate(s.live[j - 1])}
        for p, a in enumerate(s.products[j]):
            if s.level[a] == j:  # a new product of two affine forms
                _, fa, fb = s.atoms[a]
                for x, c in fa.items():
                    if x == CONST:
                        L.b_gate[0, p] += c
                    else:
                        L.W_gate[ch[x], p] += c
                for x, c in fb.items():
                    if x == CONST:
                        L.b_in[0, p] += c
                    else:
                        L.W_in[ch[x], p] += c
                L.h[0, p] = 1
            else:  # carried: value * 1
                L.W_gate[ch[a], p] = 1
                L.b_conv[0, p] = 1
        pch = {a: p for p, a in enumerate(s.products[j])}
        if j < s.depth:
            for i, a in enumerate(s.live[j]):
                L.W_out[pch[a], i] = 1
        else:
            for o, name in enumerate(out_names):
                for x, c in s.outputs[name].items():
                    if x == CONST:
                        L.b_out[0, o] += c
                    else:
                        L.W_out[pch[x], o] += c
        layers.append(L)
    return layers


class CompiledCircuit(Construction):
    """A circuit compiled by :func:`compile_circuit` (no repeated body)."""

    graph: nx.DiGraph = None
    schedule: Schedule = None

    def _vec(self, v):
        names = C.inputs(self.graph)
        first = np.asarray(v[names[0]]) if names else np.zeros(())
        return names, first

    def input_state(self, v):
        names, first = self._vec(v)
        if first.dtype == object or not names:
            S = self.layout.new_state()
            for i, nme in enumerate(names):
                val = v[nme]
                S[0, i] = val.item() if isinstance(val, np.ndarray) else val  # a scalar, never a 0-d array
            return S
        S = np.zeros(first.shape + tuple(self.layout.shape), dtype=first.dtype)
        for i, nme in enumerate(names):
            S[..., 0, i] = v[nme]
        return S

    def state(self, v):
        return self.input_state(v)

    def final_state(self, v):
        names, first = self._vec(v)
        vals = C.evaluate(self.graph, {n: v[n] for n in names})
        if first.dtype == object or not names:
            S = self.layout.new_state()
        else:
            S = np.zeros(first.shape + tuple(self.layout.shape), dtype=first.dtype)
        for o, name in enumerate(sorted(vals)):
            S[..., 0, o] = vals[name]
        return S

    def step(self, v):
        return v

    def readout(self, state):
        return {name: state[..., 0, o] for o, name in enumerate(sorted(self.schedule.outputs))}


def compile_circuit(g: nx.DiGraph, name: str = "circuit") -> CompiledCircuit:
    """Levelled BaseConv compilation of a validated circuit (module docstring)."""
    g = C.validate(g)
    s = _schedule(g)
    layers = _emit(s)
    m = C.metrics(g)
    lay = Layout((1, s.width), row_axis="tokens", col_axis="channels")
    for o, out in enumerate(sorted(s.outputs)):
        lay.add(f"out:{out}", (0, 1), (o, o + 1), f"output {out!r} after the last layer")
    s.info = {
        "circuit": m,
        "compiled": {"layers": s.depth, "state_width": s.width, "tokens": 1,
                     "product_atoms": sum(1 for a in s.atoms if a.startswith("p"))},
        "theorem_H21_bound": {"layers": f"O(Delta log w) = O({m['depth']} * log2({m['width']}))",
                              "inner_dimension": f"O(w) = O({m['width']})"},
    }
    con = CompiledCircuit(
        name=name, reference="seed 000 App. D.2.1 (LINEAR, MULTIPLY), seed 003 Thm. H.21 / seed 000 Thm. D.30",
        layout=lay, prologue=[], body=[], epilogue=layers, params={},
        variables={n: () for n in C.inputs(g)}, notes="levelled: one fused MULTIPLY+LINEAR layer per level")
    con.graph, con.schedule = g, s
    return con
