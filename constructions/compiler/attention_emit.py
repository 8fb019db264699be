"""Targets ``lsa`` and ``elsa``, the emission: a :class:`.attention.Plan` -> LSA layers (seed 001
eq. (8), (38)) or ELSA modules (seed 001 eq. (16), (57)-(59)), and :func:`compile_attention`, the
targets' compile (plan, limit the heads, emit, assemble).  The plan and its rules: :mod:`.attention`,
which re-exports every name defined here."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

import circuits as C

from .. import ops
from ..layers import ELSA, LSA, ELSAHead, LSAHead
from ..sparse import SparseMatrix
from .attention import Head, Plan, pos_cell, limit_heads, plan
from .bounds import attention_width, formula
from .circuit import CompiledCircuit, compiled, h21_d, param_counts, theorem_h21
from .info import ABSENT, CompileInfo
from .routing import CompileError

#: the most weight entries (dense (n, n) matrices of every head) a compiled attention stack may
#: have: 5e7 object entries are about 400 MB of pointers before any proof
MAX_WEIGHT_ENTRIES = 50_000_000


def _matrix(cols: dict, n: int, index=lambda c: c, out_index=lambda b: b, pos_index=None) -> SparseMatrix:
    """A weight matrix (n, n) whose column ``out_index(b)`` holds form ``cols[b]`` (``index`` maps a
    data column to its row; with ``pos_index`` the position columns go to their own rows too), held
    sparse (``constructions/sparse.py``): a head reads a few cells of a wide state."""
    entries: dict = {}
    for b, form in cols.items():
        for col, v in form.items():
            if isinstance(col, tuple):
                if pos_index is None:
                    continue
                key = (pos_index(col[1]), out_index(b))
            else:
                key = (index(col), out_index(b))
            entries[key] = entries.get(key, 0) + v
    return SparseMatrix.from_entries((n, n), entries)


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
    """W1, W3 columns are Gram rows; W2's columns are output channels, placed like the state's."""
    pos = lambda r: pl.D + r  # noqa: E731
    ix = _lsa_channel(pl)
    return LSAHead(W1=_matrix(h.m, n, ix, pos_index=pos), W2=_matrix(h.n, n, ix, ix, pos_index=pos),
                   W3=_matrix(h.l, n, ix, pos_index=pos))


def _elsa_head(h: Head, pl: Plan, n: int) -> ELSAHead:
    return ELSAHead(W1=_matrix(h.m, n), B1=_bias(h.m, pl.T, n), W2=_matrix(h.n, n), B2=_bias(h.n, pl.T, n),
                    W3=_matrix(h.l, n), B3=_bias(h.l, pl.T, n))


def _identity(T: int, channels) -> Head:
    """Property 3's skip as a head: ``l = m = pos_r`` for every token, ``n_c = c``."""
    return Head(l={r: {pos_cell(r): Fraction(1)} for r in range(T)}, m={r: {pos_cell(r): Fraction(1)} for r in range(T)},
                n={c: {c: Fraction(1)} for c in channels})


def modules(pl: Plan, width: int, limit: int | None = None) -> list:
    """The layers grouped into ELSA modules: a list of lists of stages (lists of heads); with
    ``limit``, two layers share a module only where each stage, with its skip or hand-on head,
    keeps at most ``limit`` heads."""
    out, i = [], 0
    while i < len(pl.layers):
        a = pl.layers[i]
        fits = limit is None or (i + 1 < len(pl.layers) and len(a) < limit and len(pl.layers[i + 1]) < limit)
        if i + 1 < len(pl.layers) and pl.fresh[i] is not None and fits:
            b = pl.layers[i + 1]
            out.append([a + [_identity(pl.T, range(width))],
                        b + [_identity(pl.T, sorted(pl.fresh[i]))]])
            i += 2
        else:
            out.append([a])
            i += 1
    return out


def _limited(pl0: Plan, elsa: bool, heads: int | None):
    """``(plan, heads per layer)``: ``pl0`` split to ``heads`` per layer; ELSA: a layer that becomes a
    stage of a two-stage module shares it with a skip / hand-on head, so its layers are split to
    ``heads - 1`` where that makes fewer modules than ``heads``."""
    per_layer = heads
    pl = limit_heads(pl0, per_layer)
    if elsa and heads is not None and heads > 1:
        alt = limit_heads(pl0, heads - 1)
        if len(modules(alt, 0, heads)) < len(modules(pl, 0, heads)):
            per_layer, pl = heads - 1, alt
    return pl, per_layer


def _width(pl: Plan, elsa: bool, min_width: int) -> int:
    """The state's channels (LSA: the data channels, then the positions; ELSA: at least the tokens);
    a CompileError past :data:`MAX_WEIGHT_ENTRIES`."""
    data = max([pl.D + pl.work] + [c + 1 for _, c in pl.outputs.values()])
    slots = max([1] + [1 + max(list(h.l) + list(h.m) + [0]) for hs in pl.layers for h in hs])  # Gram rows b
    n = max(min_width, data, pl.T, slots) if elsa else max(min_width, data + pl.T, slots)
    n_heads = sum(len(hs) for hs in pl.layers) + (len(pl.layers) if elsa else 0)  # + the skips
    entries = n_heads * 3 * n * (n + (pl.T if elsa else 0))
    if entries > MAX_WEIGHT_ENTRIES:
        raise CompileError(f"the {'elsa' if elsa else 'lsa'} target needs {n_heads} heads of {n} x {n} weights = "
                           f"{entries:,} entries, over the limit {MAX_WEIGHT_ENTRIES:,} (every gathered input and "
                           "product atom takes a channel of the work row; a circuit this wide needs the "
                           "matrix-level lowering that is not done, docs/compiler.md)")
    return n


def _bound(pl0: Plan, pl: Plan, elsa: bool, limit: int | None, per_layer: int | None, g,
           min_width: int = 1) -> dict:
    """The stated guarantee (``compiled.bound``): layers, tokens, state width and the rule.  The width is
    a formula in the linearised circuit's measures: the grid's ``D`` channels, ``I`` inputs (each gathered
    at most once), ``F + O`` terms of the products' factor forms and the outputs' forms (a consumer form
    takes one work channel per level its atoms come from, at most one per term), the ``T`` positions
    (``lsa``), and as many temporaries again where a head limit splits a layer whose heads read what
    others write."""
    from .linearise import CONST, linearise, needed
    if limit is None:
        layers = math.ceil((pl.md + 2) / 2) if elsa else pl.md + 2
    else:
        layers = sum(1 if len(hs) <= per_layer else math.ceil(len(hs) / per_layer) + 1 for hs in pl0.layers)
    atoms, _, outputs = linearise(g)
    need = needed(atoms, outputs)
    n_in = sum(1 for a in need if atoms[a][0] == "input")
    terms = sum(len([x for x in f if x != CONST]) for a in need if atoms[a][0] == "mul" for f in atoms[a][1:]) \
        + sum(len([x for x in f if x != CONST]) for f in outputs.values())
    wb = attention_width(g, elsa, limit is not None, min_width)
    width, D, temps = wb["value"], wb["measures"]["D"], limit is not None
    rule = ("a gather layer (if an input must move to the work row), one product layer per "
            "level of multiplicative depth md, one output layer: at most md + 2 layers"
            + (", two per module: at most ceil((md + 2) / 2) modules" if elsa else "")
            + ("" if limit is None else
               f"; at most {limit} heads per {'stage' if elsa else 'layer'}: a layer of K "
               f"heads becomes ceil(K / {per_layer}) layers, + 1 where its heads read what "
               "others write (temporaries added back)"
               + (" (each a module at worst)" if elsa else ""))
            + f"; channels <= max(min_width, D + I + (F + O){' + temporaries (as many again)' if temps else ''}, "
            f"outputs{', T' if elsa else ''}){'' if elsa else ' + T (positions)'} = {width} with D = {D} grid "
            f"channels, I = {n_in} inputs (each gathered at most once), F + O = {terms} terms of the products' "
            "factor forms and the outputs' forms (one work channel per consumer form and level it reads)"
            + (", T for the skip of Property 3" if elsa else ""))
    lf = (formula("ceil((md + 2) / 2)" if elsa else "md + 2", {"md": pl0.md}, layers) if limit is None else
          formula("sum over layers (1 if K_j <= h else ceil(K_j / h) + 1)", {"h": per_layer, "md": pl0.md}, layers))
    return {"layers": layers, "tokens": pl.T, "state_width": width, "rule": rule,
            "formulas": {"layers": lf, "state_width": wb}}


def _compiled_info(pl: Plan, layers: list, width: int, mods, limit: int | None, bound: dict) -> CompileInfo:
    """The :class:`.info.CompileInfo` of an LSA (``mods`` None) or ELSA stack."""
    elsa = mods is not None
    heads = [len(hs) for hs in pl.layers]
    return CompileInfo(
        "attention", "elsa" if elsa else "lsa", layers=len(layers), tokens=pl.T, state_width=width,
        params=param_counts(layers), plan=pl.kinds, heads=heads, heads_limit=limit,
        heads_per_layer=[max(len(st) for st in mod) for mod in mods] if elsa else heads,
        multiplicative_depth=pl.md, work_row=pl.work_row, outputs=dict(sorted(pl.outputs.items())),
        constant_blocks=({"positions": {"channels": [pl.D, pl.D + pl.T], "value": "one-hot: 1 at (r, D + r)"}}
                         if not elsa else {}),
        bound=bound,
        modules=({"count": len(layers), "stages": [len(m) for m in mods],
                  "heads": [[len(st) for st in mod] for mod in mods]} if elsa else ABSENT))


def compile_attention(g, name: str = "circuit", *, elsa: bool = False, min_width: int = 1,
                      heads: int | None = None) -> CompiledCircuit:
    """Compile a validated (placed or unplaced) circuit to LSA (``elsa=False``) or ELSA layers;
    ``heads``: at most that many heads per LSA layer / per ELSA stage (:func:`limit_heads`)."""
    if heads is not None and (not isinstance(heads, int) or isinstance(heads, bool) or heads < 1):
        raise ValueError(f"heads must be a positive int or None, got {heads!r}")
    pl0 = plan(g)
    pl, per_layer = _limited(pl0, elsa, heads)
    target = "elsa" if elsa else "lsa"
    width = _width(pl, elsa, min_width)  # ELSA: at least as many channels as tokens (Property 3's skip)
    if elsa:
        mods = modules(pl, width, heads)
        layers = [ELSA([[_elsa_head(h, pl, width) for h in st] for st in mod], residual=True) for mod in mods]
        constants = {}
    else:
        mods = None
        layers = [LSA([_lsa_head(h, pl, width) for h in hs], residual=True) for hs in pl.layers]
        constants = {(r, pl.D + r): Fraction(1) for r in range(pl.T)}
        ix = _lsa_channel(pl)
        pl.outputs = {n: (t, ix(c)) for n, (t, c) in pl.outputs.items()}
    bound = _bound(pl0, pl, elsa, heads, per_layer, g, min_width)
    m = C.metrics(g, validated=True)
    info = {"circuit": m, "compiled": _compiled_info(pl, layers, width, mods, heads, bound),
            "theorem_H21_bound": theorem_h21(m, h21_d(g))}
    eq = "eq. (16), modules of eq. (57)-(59)" if elsa else "eq. (8), (38)"
    return compiled(g, name, (pl.T, width), layers, pl.inputs, pl.outputs, info,
                    reference=f"seed 001 {eq}: gather, one product layer per level, outputs",
                    notes=f"{target} on {pl.T} tokens, work row {pl.work_row}: {', '.join(pl.kinds)}",
                    constants=constants)
