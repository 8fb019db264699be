"""Arithmetic modulo a prime for ``verify.compiler_trace``: inverses, rational reconstruction, the
circuit's node values at the random points, and the index that labels a state's cells by them."""
from __future__ import annotations

import math
from fractions import Fraction

import networkx as nx
import numpy as np

import circuits as C
from circuits import keys as K

from .compiler_trace_labels import OTHER, Label


def inv(a: np.ndarray, p: int) -> np.ndarray:
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


def rational(x: int, p: int) -> Fraction | None:
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


def node_values(g: nx.DiGraph, xs: dict, p: int, const, n: int) -> tuple[dict, dict]:
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


class Index:
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
            key = (k, (x * inv(x[k:k + 1], p) % p).tobytes())
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
        N = W * inv(piv, p)[:, None] % p
        const = (W == W[:, :1]).all(axis=1)
        out = {}
        for j, col in enumerate(nz.tolist()):
            w = W[j]
            hit = self.exact.get(w.tobytes())
            if hit is not None:
                out[col] = Label("node", tuple(hit))
                continue
            if const[j]:
                out[col] = Label("const", (), rational(int(w[0]), p))
                continue
            s = self.scaled.get((int(k[j]), N[j].tobytes()))
            if s is not None:
                pv, nodes = s
                out[col] = Label("scaled", tuple(nodes), rational(int(piv[j]) * pow(pv, -1, p) % p, p))
                continue
            out[col] = OTHER
        return out
