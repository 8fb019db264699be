"""Target ``baseconv-mlp``: any arithmetic circuit -> a BaseConv stack on ONE token.

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

This is a gated MLP, not the shape of the theorems (the sequence targets are in
:mod:`constructions.compiler.sequence`); it is kept for comparison.

Passes: :func:`~constructions.compiler.linearise.linearise` maps every circuit
node to an affine form over *atoms* (inputs and binary products);
``_schedule`` gives each atom a level and a live range; ``_emit`` turns the
schedule into weights.  Nothing mutates the circuit.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx

import circuits as C

from ..layers import BaseConv
from .circuit import CompiledCircuit, compiled, h21_d, theorem_h21
from .info import CompileInfo
from .linearise import CONST, last_uses, linearise, needed


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


def _schedule(g: nx.DiGraph) -> Schedule:
    atoms, level, outputs = linearise(g)
    need = needed(atoms, outputs)
    depth = max([1] + [level[a] for a in need])
    last_use = last_uses(atoms, level, need, outputs, depth)
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
    """One BaseConv layer per level (one token): its entries gathered sparse, then
    ``BaseConv.from_entries`` (the channel mixes held as sparse matrices)."""
    Cw = s.width
    out_names = sorted(s.outputs)
    layers = []
    for j in range(1, s.depth + 1):
        e = {nm: {} for nm in BaseConv.array_fields}

        def add(nm, i, k, c):
            e[nm][(i, k)] = e[nm].get((i, k), 0) + c

        ch = {a: i for i, a in enumerate(s.live[j - 1])}
        for p, a in enumerate(s.products[j]):
            if s.level[a] == j:  # a new product of two affine forms
                _, fa, fb = s.atoms[a]
                for x, c in fa.items():
                    add("b_gate", 0, p, c) if x == CONST else add("W_gate", ch[x], p, c)
                for x, c in fb.items():
                    add("b_in", 0, p, c) if x == CONST else add("W_in", ch[x], p, c)
                e["h"][(0, p)] = 1
            else:  # carried: value * 1
                e["W_gate"][(ch[a], p)] = 1
                e["b_conv"][(0, p)] = 1
        pch = {a: p for p, a in enumerate(s.products[j])}
        if j < s.depth:
            for i, a in enumerate(s.live[j]):
                e["W_out"][(pch[a], i)] = 1
        else:
            for o, name in enumerate(out_names):
                for x, c in s.outputs[name].items():
                    add("b_out", 0, o, c) if x == CONST else add("W_out", pch[x], o, c)
        layers.append(BaseConv.from_entries(1, Cw, e, causal=True))
    return layers


def compile_mlp(g: nx.DiGraph, name: str = "circuit") -> CompiledCircuit:
    """Levelled one-token BaseConv compilation of a validated circuit (module docstring)."""
    s = _schedule(g)
    layers = _emit(s)
    m = C.metrics(g, validated=True)
    inputs = {n: (0, i) for i, n in enumerate(C.inputs(g))}
    outputs = {n: (0, o) for o, n in enumerate(sorted(s.outputs))}
    s.info = {
        "circuit": m,
        "compiled": CompileInfo("mlp", "baseconv-mlp", layers=s.depth, tokens=1, state_width=s.width,
                                product_atoms=sum(1 for a in s.atoms if a.startswith("p"))),
        "theorem_H21_bound": theorem_h21(m, h21_d(g)),
    }
    con = compiled(g, name, (1, s.width), layers, inputs, outputs, s.info,
                   reference="seed 000 App. D.2.1 (LINEAR, MULTIPLY), seed 003 Thm. H.21 / seed 000 Thm. D.30",
                   notes="levelled: one fused MULTIPLY+LINEAR layer per level, one token")
    con.schedule = s
    return con
