"""Pass 1 of every target: a circuit -> affine forms over *atoms*.

An atom is an input or a binary product of two affine forms.  Every circuit node becomes an
affine form (a dict atom -> Fraction, the constant under :data:`CONST`); an n-ary product is
split into a balanced binary tree (the two shallowest factors first), and constants fold into
the forms, so a product atom's *level* (1 + the larger level of its factors' atoms) is the
multiplicative depth the targets pay for.  Nothing mutates the circuit.
"""
from __future__ import annotations

import contextlib
import hashlib
import heapq
from collections import OrderedDict

import networkx as nx

import circuits as C
from circuits import affine as A

CONST = "__const__"


def form_key(form: dict):
    """A hashable key of an affine form (equal forms, equal keys)."""
    return tuple(sorted(((str(k), v) for k, v in form.items()), key=lambda t: t[0]))


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


#: id(graph) -> [graph, its linearisation or None]: graphs a caller has declared unchanged
#: (:func:`unchanged`), linearised at most once each and found by identity, without a digest
_PINNED: dict = {}


@contextlib.contextmanager
def unchanged(*graphs: nx.DiGraph):
    """Within the block the caller guarantees ``graphs`` are not changed: :func:`linearise` of
    each is computed at most once and found by identity (the compile pipeline linearises the
    same circuit in several passes; a 100k-gate circuit's digest costs about a second)."""
    mine = [id(x) for x in graphs if id(x) not in _PINNED]
    for x in graphs:
        _PINNED.setdefault(id(x), [x, None])
    try:
        yield
    finally:
        for k in mine:
            _PINNED.pop(k, None)


def linearise(g: nx.DiGraph):
    """``(atoms, level, outputs)`` of a validated circuit (module docstring); remembered for
    the last few circuits by content, and within :func:`unchanged` by identity (fresh dicts every
    call)."""
    pin = _PINNED.get(id(g))
    if pin is not None and pin[0] is g:
        if pin[1] is None:
            pin[1] = _linearise(g)
        return _copy(pin[1])
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

    One pass in topological order over :class:`circuits.affine.Form` values (exact vectors over
    integer atom ids, sparse or dense: an add is one :func:`~circuits.affine.lincomb` of its
    operands, one python-flint call per operand for the large forms); a node's form is dropped after its
    last consumer (memory holds the live forms, not the whole circuit's).  Linear in the
    circuit's wires times the forms' sizes, in vector operations.  The result is in the
    dict-of-Fractions form the targets read (atom names ``in:NAME`` and ``pK``)."""
    names: list = []  # atom id -> name
    kinds: list = []  # atom id -> ("input", name) | ("mul", Form, Form)
    lv: list = []  # atom id -> level
    by_key: dict = {}
    forms: dict = {}
    keep = set(C.output_nodes(g).values())
    uses = {v: g.out_degree(v) for v in g}
    pred = g.pred

    def flevel(f):
        return A.level(f, lv)

    def product_atom(fa, fb):
        ka, kb = fa.key(), fb.key()
        key = (ka, kb) if ka <= kb else (kb, ka)
        i = by_key.get(key)
        if i is None:
            i = len(names)
            names.append(f"p{i}")
            kinds.append(("mul", fa, fb))
            lv.append(1 + max(flevel(fa), flevel(fb)))
            by_key[key] = i
        return A.atom(i)

    in_id = {}
    for name in C.inputs(g):
        in_id[name] = len(names)
        names.append(f"in:{name}")
        kinds.append(("input", name))
        lv.append(0)
    for v in nx.topological_sort(g):
        d = g.nodes[v]
        op = d["op"]
        ops = [(u, e.get("mult", 1)) for u, e in pred[v].items()]  # C.operands: edge insertion order
        if op == "input":
            forms[v] = A.atom(in_id[d["name"]])
        elif op == "const":
            forms[v] = A.const(d["value"])
        elif op == "add":
            forms[v] = A.lincomb([(forms[u], m) for u, m in ops])
        else:
            scale, factors = 1, []
            for u, m in ops:
                fu = forms[u]
                for _ in range(m):
                    if fu.is_const:  # zero or a constant: folds into the scale
                        scale = scale * fu.const_value()
                    else:
                        factors.append(fu)
            if scale == 0:
                forms[v] = A.ZERO
            elif not factors:
                forms[v] = A.const(scale)
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
                forms[v] = A.scale(f, scale)
        for u, _ in ops:
            uses[u] -= 1
            if not uses[u] and u not in keep:
                del forms[u]

    def as_dict(f):
        return {(CONST if i == A.CONST else names[i]): c for i, c in f.items()}

    outputs = {name: as_dict(forms[n]) for name, n in C.output_nodes(g).items()}
    atoms = {names[i]: (k if k[0] == "input" else ("mul", as_dict(k[1]), as_dict(k[2])))
             for i, k in enumerate(kinds)}
    level = dict(zip(names, lv))
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
