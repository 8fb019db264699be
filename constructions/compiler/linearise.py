"""Pass 1 of every target: a circuit -> affine forms over *atoms*.

An atom is an input or a binary product of two affine forms.  Every circuit node becomes an
affine form (a dict atom -> Fraction, the constant under :data:`CONST`); an n-ary product is
split into a balanced binary tree (the two shallowest factors first), and constants fold into
the forms, so a product atom's *level* (1 + the larger level of its factors' atoms) is the
multiplicative depth the targets pay for.  Nothing mutates the circuit.
"""
from __future__ import annotations

import hashlib
import heapq
from collections import OrderedDict
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


def _sum(terms, into: dict | None = None) -> dict:
    """``sum m * form`` over ``terms = [(form, m), ...]``, zeros dropped; keys in order of first
    appearance (the first form is copied in C, the others merged entry by entry).  ``into``: a
    form the caller owns and gives up (its node's last use), summed into in place instead of
    copied: ``terms[0]`` must then be ``(into, 1)``."""
    (f0, m0), rest = terms[0], terms[1:]
    if into is not None:
        assert f0 is into and m0 == 1
        f = into
    else:
        f = dict(f0) if m0 == 1 else {k: m0 * c for k, c in f0.items()}
    zeros = []
    for fu, m in rest:
        get = f.get
        for k, c in fu.items():
            x = get(k)
            if x is None:
                f[k] = c if m == 1 else m * c
            else:
                x = x + c if m == 1 else x + m * c
                f[k] = x
                if not x:
                    zeros.append(k)
    for k in zeros:
        if k in f and not f[k]:
            del f[k]
    return f


#: content digest of a circuit -> its linearisation; the passes linearise equal copies of the
#: same circuit (the reassociation's depth checks, then the plan), so each is done once
_MEMO: "OrderedDict[bytes, tuple]" = OrderedDict()
_MEMO_SIZE = 2


def _digest(g: nx.DiGraph) -> bytes:
    """SHA-256 of everything :func:`linearise` reads: the nodes in order with their op, value,
    name and output, and each node's operands in order with their mult."""
    h = hashlib.sha256()
    pred = g.pred
    for v, d in g.nodes(data=True):
        h.update(repr((v, d.get("op"), d.get("value"), d.get("name"), d.get("output"),
                       [(u, e.get("mult", 1)) for u, e in pred[v].items()])).encode())
        h.update(b"\n")
    return h.digest()


def _copy(result):
    atoms, level, outputs = result
    return ({a: (t if t[0] == "input" else ("mul", dict(t[1]), dict(t[2]))) for a, t in atoms.items()},
            dict(level), {n: dict(f) for n, f in outputs.items()})


def linearise(g: nx.DiGraph):
    """``(atoms, level, outputs)`` of a validated circuit (module docstring); remembered for
    the last few circuits by content (fresh dicts every call)."""
    key = _digest(g)
    if key in _MEMO:
        _MEMO.move_to_end(key)
        return _copy(_MEMO[key])
    result = _linearise(g)
    _MEMO[key] = result
    while len(_MEMO) > _MEMO_SIZE:
        _MEMO.popitem(last=False)
    return _copy(result)


def _linearise(g: nx.DiGraph):
    """``(atoms, level, outputs)`` of a validated circuit (module docstring).

    One pass in topological order; a node's form is dropped after its last consumer (memory
    holds the live forms, not the whole circuit's), and an add copies its largest operand's form
    and merges the others into it -- or, where that form is an add's own (``owned``: made by
    :func:`_sum`, held by no atom and no other node) and this add is its last consumer, merges
    into it in place (a chain of adds then costs the small operands, not the growing sum's copies).
    Linear in the circuit's wires times the forms' sizes."""
    atoms: dict = {}
    level: dict = {}
    by_key: dict = {}
    forms: dict = {}
    keep = set(C.output_nodes(g).values())
    uses = {v: g.out_degree(v) for v in g}
    pred = g.pred
    owner: dict = {}  # id of a form dict made by _sum and held nowhere else -> its node (``owned``)

    def flevel(f):
        return max((level[a] for a in f if a != CONST), default=0)

    def product_atom(fa, fb):
        ka, kb = form_key(fa), form_key(fb)
        key = (min(ka, kb), max(ka, kb))
        owner.pop(id(fa), None)  # held by an atom now
        owner.pop(id(fb), None)
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
        ops = [(u, e.get("mult", 1)) for u, e in pred[v].items()]  # C.operands: edge insertion order
        if op == "input":
            forms[v] = {f"in:{d['name']}": ONE}
        elif op == "const":
            c = Fraction(d["value"])
            forms[v] = {CONST: Q(c.numerator, c.denominator)} if c != 0 else {}
        elif op == "add":
            terms = [(forms[u], m) for u, m in ops]
            big = max(range(len(ops)), key=lambda i: len(terms[i][0]))
            u, m = ops[big]
            terms.insert(0, terms.pop(big))
            # this add is u's last consumer, u's form is u's alone and appears once: sum into it
            # (a DiGraph has one edge u -> v: u appears once among the operands)
            mine = m == 1 and owner.get(id(forms[u])) == u and uses[u] == 1 and u not in keep
            forms[v] = _sum(terms, into=terms[0][0] if mine else None)
            owner[id(forms[v])] = v
        else:
            scale, factors = ONE, []
            for u, m in ops:
                fu = forms[u]
                for _ in range(m):
                    if not fu:
                        scale = Q(0)
                    elif len(fu) == 1 and CONST in fu:
                        scale *= fu[CONST]
                    else:
                        factors.append(fu)
            if scale == 0:
                forms[v] = {}
            elif not factors:
                forms[v] = {CONST: scale}
            else:
                # combine the two shallowest factors first (Huffman on levels): a balanced tree;
                # ties in order (a stable sort's order: level, then age)
                pool = [(flevel(f), i, f) for i, f in enumerate(sorted(factors, key=flevel))]
                heapq.heapify(pool)
                n = len(pool)
                while len(pool) > 1:
                    fa, fb = heapq.heappop(pool)[2], heapq.heappop(pool)[2]
                    p = product_atom(fa, fb)
                    heapq.heappush(pool, (flevel(p), n, p))
                    n += 1
                f = pool[0][2]
                if scale == 1:  # f may be an operand's own form: shared now, no longer owned
                    owner.pop(id(f), None)
                forms[v] = f if scale == 1 else _scale(f, scale)
        for u, _ in ops:
            uses[u] -= 1
            if not uses[u] and u not in keep:
                if owner.get(id(forms[u])) == u:
                    del owner[id(forms[u])]
                del forms[u]
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
