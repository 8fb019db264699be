"""Targets ``lsa`` and ``elsa``: a (placed) circuit -> linear self-attention layers (seed 001).

An LSA layer (seed 001 eq. (8), multi-head, with the skip of eq. (38)) maps ``H`` (tokens x
channels) to ``H + sum_k (H W3)(H W1)^T (H W2)``: head ``k`` adds to cell ``(t, c)``

    sum_b  l_b(H[t]) * G[b, c],     G[b, c] = sum_s m_b(H[s]) n_c(H[s])

with ``l_b``, ``m_b``, ``n_c`` the columns of ``W3``, ``W1``, ``W2``: linear forms of ONE row.
The token sum sits inside the Gram factor ``G``, so one layer cannot form the token-wise
product ``x[t] y[t]`` of two data values for every ``t`` at once (a polynomial-degree argument:
``docs/compiler.md``).  This pass therefore works on a **work row** ``w``:

* the input map adds a constant block, the **one-hot token positions** (channel ``D + r`` is 1
  at token ``r``; seed 001's LSA is homogeneous, so constants must come from the input, as the
  hand constructions' ``sqrt(eta)``).  A position column as ``m_b`` (``W1``) selects one token
  in the Gram factor; as ``l_b`` (``W3``) it masks the output to one token; at ``w`` it is the
  constant 1.
* a **gather layer** copies every input that the products or the outputs read into its own
  *work channel* at the work row (one head per source token: ``l = pos_w``, ``m = pos_t``,
  ``n`` the copies); inputs already at ``w`` in a channel that is 0 on every other token stay.
* one **product layer** per level of multiplicative depth (:mod:`.linearise`): a head
  ``l = f``, ``m = pos_w``, ``n_d = g_d`` adds ``f * g_d`` to fresh channels ``d`` of the work
  row (and nothing elsewhere: every work channel is 0 off the work row); the products of a
  level are covered greedily by common factors ``f``, one head per factor.
* a **final layer**: heads with ``l = m = pos_r`` add ``-H[r, c]`` (one head per set of tokens
  with the same channels to clear), heads with ``l = pos_r``, ``m = pos_w`` write each output
  (an affine form over work channels) at its place on token ``r``.  Inputs passed through in
  place (an output equal to an input at the input's own place) are left alone.

So ``lsa`` has at most ``md + 2`` layers (``md + 1`` when nothing must be gathered) on the
input grid's tokens, ``D + T + (inputs gathered) + (product atoms)`` channels.

``elsa`` (seed 001 eq. (16)) takes the same heads with the position block moved into the
bias matrices (``B_l[t, b]`` = the coefficient of ``pos_t`` in column ``b``), so its input is
the placed data alone, and groups the layers two by two into modules of two stages (seed 001
eq. (57)-(59): ``H + P2(P1(H))``): stage 1 = the first layer's heads plus a skip head
(Property 3), stage 2 = the second layer's heads plus a head that hands on the channels the
first layer wrote (those are 0 in the module's input, so ``P1`` restricted to them is the
first layer's update).  Hence at most ``ceil((md + 2) / 2)`` modules.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

import circuits as C

from .. import ops
from ..layers import ELSA, LSA, ELSAHead, LSAHead
from .circuit import CompiledCircuit, compiled, param_counts
from .linearise import CONST, linearise, needed


@dataclass
class Head:
    """One head as sparse columns: ``l[b]``, ``m[b]`` (forms feeding Gram row ``b``), ``n[c]``
    (the form read into output channel ``c``).  A form maps a column to a Fraction; a column is
    a data channel (int) or ``("pos", r)``, the position of token ``r``."""

    l: dict = field(default_factory=dict)
    m: dict = field(default_factory=dict)
    n: dict = field(default_factory=dict)


@dataclass
class Plan:
    layers: list  # list[list[Head]]
    kinds: list  # "gather" | "product" | "outputs"
    fresh: list  # per layer: the channels it writes, all 0 in its input (None: not fresh)
    inputs: dict  # input name -> (token, channel)
    outputs: dict  # output name -> (token, channel)
    T: int
    D: int  # the placed grid's channels (positions follow them in the lsa state)
    work: int  # work channels (after the grid channels)
    md: int
    work_row: int
    gathered: int
    product_atoms: int


def _pos(r: int):
    return ("pos", r)


def _form_cols(form: dict, slot: dict, w: int) -> dict:
    """An affine form over atoms -> columns (atom -> its work channel, constant -> pos_w)."""
    out: dict = {}
    for a, v in form.items():
        col = _pos(w) if a == CONST else slot[a]
        out[col] = out.get(col, Fraction(0)) + v
    return {k: v for k, v in out.items() if v != 0}


def _cover(prods: list, forms: dict) -> list:
    """Products grouped by a common factor (greedy set cover): [(factor form, [(p, other)])]."""
    by_key: dict = {}
    for p in prods:
        for f, g in (forms[p], forms[p][::-1]):
            key = tuple(sorted((str(a), v) for a, v in f.items()))
            by_key.setdefault(key, (f, []))[1].append((p, g))
    left, groups = set(prods), []
    while left:
        key = max(by_key, key=lambda k: (sum(1 for p, _ in by_key[k][1] if p in left), k))
        f, members = by_key[key]
        take, seen = [], set()
        for p, g in members:
            if p in left and p not in seen:
                take.append((p, g))
                seen.add(p)
        left -= seen
        groups.append((f, take))
    return groups


def plan(g) -> Plan:
    """The heads of every layer for a validated circuit (module docstring)."""
    pl = C.placement(g)
    if pl is None:
        T, inputs, places = 1, {n: (0, i) for i, n in enumerate(C.inputs(g))}, {}
        D = max(1, len(inputs))
    else:
        T, inputs, places = pl.tokens, dict(pl.inputs), dict(pl.outputs)
        D = pl.channels
    atoms, level, outputs = linearise(g)
    need = needed(atoms, outputs)
    md = max([0] + [level[a] for a in need])

    # inputs an output passes through in place need nothing; every other use reads a work slot
    kept = {n for n, f in outputs.items() if len(f) == 1 and places.get(n) is not None
            and next(iter(f)).startswith("in:") and next(iter(f.values())) == 1
            and inputs[next(iter(f))[3:]] == tuple(places[n])}
    used = {a for a in need if a.startswith("in:")}
    used |= {a for n, f in outputs.items() if n not in kept for a in f if a != CONST}
    used = {a for a in used if a.startswith("in:")}
    # the work row: where the most used inputs can stay (in a channel no other token uses)
    rows_of: dict = {}
    for t, c in inputs.values():
        rows_of.setdefault(c, set()).add(t)

    def stays(t):
        return sum(1 for a in used if inputs[a[3:]][0] == t and rows_of[inputs[a[3:]][1]] == {t})
    w = max(range(T), key=lambda t: (stays(t), -t))
    exclusive = {c for c in range(D) if rows_of.get(c, {w}) <= {w}}

    slot: dict = {}
    nxt = [D]

    def fresh_channel() -> int:
        nxt[0] += 1
        return nxt[0] - 1

    layers, kinds, fresh = [], [], []
    gather: dict = {}
    for a in sorted(used, key=lambda a: inputs[a[3:]]):
        t, c = inputs[a[3:]]
        if t == w and c in exclusive:
            slot[a] = c
        else:
            slot[a] = fresh_channel()
            gather.setdefault(t, []).append((slot[a], c))
    if gather:
        heads = [Head(l={0: {_pos(w): Fraction(1)}}, m={0: {_pos(t): Fraction(1)}},
                      n={d: {c: Fraction(1)} for d, c in pairs}) for t, pairs in sorted(gather.items())]
        layers.append(heads)
        kinds.append("gather")
        fresh.append({d for pairs in gather.values() for d, _ in pairs})
    n_prod = 0
    for lv in range(1, md + 1):
        prods = sorted((a for a in need if level[a] == lv), key=lambda a: int(a[1:]))
        forms = {p: (atoms[p][1], atoms[p][2]) for p in prods}
        for p in prods:
            slot[p] = fresh_channel()
        heads = []
        for f, members in _cover(prods, forms):
            heads.append(Head(l={0: _form_cols(f, slot, w)}, m={0: {_pos(w): Fraction(1)}},
                              n={slot[p]: _form_cols(gf, slot, w) for p, gf in members}))
        n_prod += len(prods)
        layers.append(heads)
        kinds.append("product")
        fresh.append({slot[p] for p in prods})

    # output slots: placed ones, then the rest on the work row in the lowest free channels
    out_slots = {n: tuple(places[n]) for n in outputs if places.get(n) is not None}
    taken = set(out_slots.values())
    c = 0
    for n in sorted(outputs):
        if n not in out_slots:
            while (w, c) in taken:
                c += 1
            out_slots[n] = (w, c)
            taken.add((w, c))
    kept_cells = {out_slots[n] for n in kept}
    nonzero = {(t, c) for t, c in inputs.values()} | {(w, d) for d in range(D, nxt[0])}
    clear: dict = {}
    for t, c in sorted(nonzero - kept_cells):
        clear.setdefault(t, set()).add(c)
    by_set: dict = {}
    for t, cs in clear.items():
        by_set.setdefault(tuple(sorted(cs)), []).append(t)
    heads = []
    for cs, toks in sorted(by_set.items()):
        heads.append(Head(l={i: {_pos(t): Fraction(1)} for i, t in enumerate(toks)},
                          m={i: {_pos(t): Fraction(1)} for i, t in enumerate(toks)},
                          n={c: {c: Fraction(-1)} for c in cs}))
    writes: dict = {}
    for n, f in outputs.items():
        if n not in kept:
            t, c = out_slots[n]
            writes.setdefault(t, {})[c] = _form_cols(f, slot, w)
    for t, cols in sorted(writes.items()):
        heads.append(Head(l={0: {_pos(t): Fraction(1)}}, m={0: {_pos(w): Fraction(1)}},
                          n={c: f for c, f in cols.items() if f}))
    if heads or not layers:
        layers.append(heads or [Head()])
        kinds.append("outputs")
        fresh.append(None)
    return Plan(layers, kinds, fresh, inputs, out_slots, T, D, nxt[0] - D, md, w,
                sum(len(v) for v in gather.values()), n_prod)


# ------------------------------------------------------------------ emission

def _matrix(cols: dict, index, n: int, rows: int | None = None, pos_index=None) -> np.ndarray:
    """A weight matrix (n, n) whose column ``b`` holds form ``cols[b]`` (``index`` maps a data
    column to its row); with ``pos_index`` the position columns go to their own rows too."""
    W = ops.zeros_like_object((n, n))
    for b, form in cols.items():
        for col, v in form.items():
            if isinstance(col, tuple):
                if pos_index is None:
                    continue
                W[pos_index(col[1]), b] += v
            else:
                W[index(col), b] += v
    return W


def _bias(cols: dict, T: int, n: int) -> np.ndarray:
    """The bias matrix (T, n) of the position columns: ``B[t, b]`` = coefficient of pos_t."""
    B = ops.zeros_like_object((T, n))
    for b, form in cols.items():
        for col, v in form.items():
            if isinstance(col, tuple):
                B[col[1], b] += v
    return B


def _lsa_channel(pl: Plan):
    """Data channel -> LSA state channel: the grid's channels, then the T positions, then work."""
    return lambda c: c if c < pl.D else c + pl.T


def _lsa_head(h: Head, pl: Plan, n: int) -> LSAHead:
    pos = lambda r: pl.D + r  # noqa: E731
    ix = _lsa_channel(pl)
    W2 = ops.zeros_like_object((n, n))
    data = n - pl.T
    W2[:, [ix(c) for c in range(data)]] = _matrix(h.n, ix, n, pos_index=pos)[:, :data]
    return LSAHead(W1=_matrix(h.m, ix, n, pos_index=pos), W2=W2, W3=_matrix(h.l, ix, n, pos_index=pos))


def _elsa_head(h: Head, pl: Plan, n: int) -> ELSAHead:
    ident = lambda c: c  # noqa: E731
    return ELSAHead(W1=_matrix(h.m, ident, n), B1=_bias(h.m, pl.T, n),
                    W2=_matrix(h.n, ident, n), B2=_bias(h.n, pl.T, n),
                    W3=_matrix(h.l, ident, n), B3=_bias(h.l, pl.T, n))


def _identity(T: int, channels) -> Head:
    """Property 3's skip as a head: ``l = m = pos_r`` for every token, ``n_c = c``."""
    return Head(l={r: {_pos(r): Fraction(1)} for r in range(T)}, m={r: {_pos(r): Fraction(1)} for r in range(T)},
                n={c: {c: Fraction(1)} for c in channels})


def modules(pl: Plan, width: int) -> list:
    """The layers grouped into ELSA modules: a list of lists of stages (lists of heads)."""
    out, i = [], 0
    while i < len(pl.layers):
        a = pl.layers[i]
        if i + 1 < len(pl.layers) and pl.fresh[i] is not None:
            b = pl.layers[i + 1]
            out.append([a + [_identity(pl.T, range(width))],
                        b + [_identity(pl.T, sorted(pl.fresh[i]))]])
            i += 2
        else:
            out.append([a])
            i += 1
    return out


def compile_attention(g, name: str = "circuit", *, elsa: bool = False, min_width: int = 1) -> CompiledCircuit:
    """Compile a validated (placed or unplaced) circuit to LSA (``elsa=False``) or ELSA layers."""
    pl = plan(g)
    target = "elsa" if elsa else "lsa"
    data = max([pl.D + pl.work] + [c + 1 for _, c in pl.outputs.values()])
    if elsa:
        width = max(min_width, data, pl.T)  # Property 3's skip needs as many channels as tokens
        mods = modules(pl, width)
        layers = [ELSA([[_elsa_head(h, pl, width) for h in st] for st in mod], residual=True) for mod in mods]
        constants = {}
        stages = [len(m) for m in mods]
        bound_layers = math.ceil((pl.md + 2) / 2)
    else:
        width = max(min_width, data + pl.T)
        layers = [LSA([_lsa_head(h, pl, width) for h in heads], residual=True) for heads in pl.layers]
        constants = {(r, pl.D + r): Fraction(1) for r in range(pl.T)}
        ix = _lsa_channel(pl)
        pl.outputs = {n: (t, ix(c)) for n, (t, c) in pl.outputs.items()}
        stages = None
        bound_layers = pl.md + 2
    m = C.metrics(g)
    heads = [len(hs) for hs in pl.layers]
    cm = {"target": target, "layers": len(layers), "tokens": pl.T, "state_width": width,
          "params": param_counts(layers), "plan": list(pl.kinds), "heads": heads,
          "multiplicative_depth": pl.md, "work_row": pl.work_row,
          "outputs": {n: list(s) for n, s in sorted(pl.outputs.items())},
          "constant_blocks": ({"positions": {"channels": [pl.D, pl.D + pl.T], "value": "one-hot: 1 at (r, D + r)"}}
                              if not elsa else {}),
          "bound": {"layers": bound_layers, "tokens": pl.T,
                    "state_width": max(pl.D + pl.gathered + pl.product_atoms, len(pl.outputs),
                                       pl.T if elsa else 0) + (0 if elsa else pl.T),
                    "rule": ("a gather layer (if an input must move to the work row), one product layer per "
                             "level of multiplicative depth md, one output layer: at most md + 2 layers"
                             + (", two per module: at most ceil((md + 2) / 2) modules" if elsa else "")
                             + "; channels: the grid's, " + ("" if elsa else "one per token (positions), ")
                             + "one per gathered input and per product atom (at least one per output"
                             + (", and one per token for the skip of Property 3" if elsa else "") + ")")}}
    if elsa:
        cm["modules"] = {"count": len(layers), "stages": stages,
                         "heads": [[len(st) for st in mod] for mod in mods]}
    info = {"circuit": m, "compiled": cm,
            "theorem_H21_bound": {"layers": f"O(Delta log w) = O({m['depth']} * log2({m['width']}))",
                                  "inner_dimension": f"O(w) = O({m['width']})"}}
    eq = "eq. (16), modules of eq. (57)-(59)" if elsa else "eq. (8), (38)"
    con = compiled(g, name, (pl.T, width), layers, pl.inputs, pl.outputs, info,
                   reference=f"seed 001 {eq}: gather, one product layer per level, outputs",
                   notes=f"{target} on {pl.T} tokens, work row {pl.work_row}: {', '.join(pl.kinds)}",
                   constants=constants)
    return con
