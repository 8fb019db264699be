"""Pass 1 of every target: a circuit -> affine forms over *atoms*.

An atom is an input or a binary product of two affine forms.  Every circuit node becomes an
affine form (a dict atom -> Fraction, the constant under :data:`CONST`); an n-ary product is
split into a balanced binary tree (the two shallowest factors first), and constants fold into
the forms, so a product atom's *level* (1 + the larger level of its factors' atoms) is the
multiplicative depth the targets pay for.  Nothing mutates the circuit.
"""
from __future__ import annotations

from fractions import Fraction

import gmpy2
import networkx as nx

import circuits as C

CONST = "__const__"


Q = gmpy2.mpq  # the coefficients while linearising (C arithmetic); Fractions in the result
ONE = Q(1)


def _scale(form: dict, c) -> dict:
    return {k: v * c for k, v in form.items() if v * c != 0}


def _as_fractions(form: dict) -> dict:
    return {k: Fraction(int(v.numerator), int(v.denominator)) for k, v in form.items()}


def form_key(form: dict):
    """A hashable key of an affine form (equal forms, equal keys)."""
    return tuple(sorted(((str(k), v) for k, v in form.items()), key=lambda t: t[0]))


def linearise(g: nx.DiGraph):
    atoms: dict = {}
    level: dict = {}
    by_key: dict = {}
    forms: dict = {}

    def flevel(f):
        return max((level[a] for a in f if a != CONST), default=0)

    def product_atom(fa, fb):
        ka, kb = form_key(fa), form_key(fb)
        key = (min(ka, kb), max(ka, kb))
        if key not in by_key:
            aid = f"p{len(atoms)}"
            atoms[aid] = ("mul", fa, fb)
            level[aid] = 1 + max(flevel(fa), flevel(fb))
            by_key[key] = aid
        return {by_key[key]: ONE}

    for name in C.inputs(g):
        aid = f"in:{name}"
        atoms[aid], level[aid] = ("input", name), 0
    for v in nx.topological_sort(g):
        d = g.nodes[v]
        op = d["op"]
        if op == "input":
            forms[v] = {f"in:{d['name']}": ONE}
        elif op == "const":
            c = Fraction(d["value"])
            forms[v] = {CONST: Q(c.numerator, c.denominator)} if c != 0 else {}
        elif op == "add":
            f: dict = {}
            for u, m in C.operands(g, v):
                for k, c in forms[u].items():
                    f[k] = f.get(k, 0) + m * c
            forms[v] = {k: c for k, c in f.items() if c != 0}
        else:
            scale, factors = ONE, []
            for u, m in C.operands(g, v):
                fu = forms[u]
                for _ in range(m):
                    if not fu:
                        scale = Q(0)
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
    outputs = {name: _as_fractions(forms[n]) for name, n in C.output_nodes(g).items()}
    atoms = {a: (t if t[0] == "input" else ("mul", _as_fractions(t[1]), _as_fractions(t[2])))
             for a, t in atoms.items()}
    return atoms, level, outputs




def needed(atoms: dict, outputs: dict) -> set:
    """The atoms the outputs depend on."""
    need, stack = set(), [a for f in outputs.values() for a in f if a != CONST]
    while stack:
        a = stack.pop()
        if a in need:
            continue
        need.add(a)
        if atoms[a][0] == "mul":
            stack += [x for f in atoms[a][1:] for x in f if x != CONST]
    return need


def last_uses(atoms: dict, level: dict, need: set, outputs: dict, output_level: int) -> dict:
    """atom -> the last level that reads it: the largest level of a product using it, or
    ``output_level`` for an atom an output reads."""
    last = {}
    for a in need:
        if atoms[a][0] == "mul":
            for f in atoms[a][1:]:
                for x in f:
                    if x != CONST:
                        last[x] = max(last.get(x, 0), level[a])
    for f in outputs.values():
        for x in f:
            if x != CONST:
                last[x] = max(last.get(x, 0), output_level)
    return last
