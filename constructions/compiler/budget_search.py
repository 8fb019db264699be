"""A channel budget for ``baseconv`` / ``baseconv-causal`` as a search over this compiler's own
compiles (issue 43 item 1): ``compile_circuit(g, target, channels=C)`` is the compile with the fewest
layers (then the narrowest state) among the compiles it tries whose state and inner channels fit in
``C``.

The compiles tried (:func:`tries`), each proved like any other:

* the **default** levelled compile (:func:`.sequence.compile_levelled`; seed 000 Thm. D.30 / seed 003
  Thm. H.21, levelled): where its width is at most ``C`` it is the answer, so a budget at or above the
  default's width gives the default compile;
* the levelled compile with at most ``q`` **products per token per product layer** (``q = 1, 2, 4,
  ...`` below the most products any level puts on one token; :func:`.sequence._chunks`): a level's
  products in several product layers, each holding fewer products side by side, so fewer channels and
  more layers;
* the **one-value-per-slot budget machine** (:mod:`.budget`: level-parallel Benes routing on
  ``baseconv``, one product at a time on ``baseconv-causal``) at every budget ``c`` from the grid's
  channels + 2 up to ``C`` (the first :data:`EXHAUSTIVE` of them, then ``C`` itself).

Since the compiles tried at ``C`` include those tried at any smaller budget (up to the
:data:`EXHAUSTIVE` cut of the machine's budgets), the layers never increase with ``C``; the stated
minimum (:func:`minimum_width`) is the narrowest of them all, so a budget the default compile meets is
never refused.  ``pareto`` is the lower envelope of every compile tried.
"""
from __future__ import annotations

from dataclasses import replace

import circuits as C

from .circuit import CompiledCircuit
from .routing import CompileError

#: the budget machine is tried at every budget from its minimum up to this many budgets above it, then at C
EXHAUSTIVE = 8
#: at most this many products-per-token settings are tried (q = 1, 2, 4, ...)
MAX_Q = 4

_CACHE: dict = {}


def _digest(g) -> str:
    """A digest of the circuit's content (nodes and edges with their attributes, the grid): equal
    circuits share their tries across ``compile_circuit`` calls, each of which validates a fresh copy."""
    import hashlib
    import json

    doc = (sorted((str(v), sorted((k, str(x)) for k, x in d.items())) for v, d in g.nodes(data=True)),
           sorted((str(u), str(v), sorted((k, str(x)) for k, x in d.items())) for u, v, d in g.edges(data=True)),
           sorted((k, str(x)) for k, x in g.graph.items()))
    return hashlib.sha256(json.dumps(doc).encode()).hexdigest()


def _memo(g, key, make):
    """``make()`` once per (circuit content, key): the searches of a pareto and of the budgets it
    compiles share their tries."""
    k = (_digest(g),) + key
    if k in _CACHE:
        return _CACHE[k]
    if len(_CACHE) > 4096:
        _CACHE.clear()
    v = make()
    _CACHE[k] = v
    return v


def _shape(con: CompiledCircuit) -> tuple[int, int, int]:
    ci = con.compile_info
    inner = ci.inner_width if isinstance(ci.inner_width, int) else ci.state_width
    return ci.layers, max(ci.state_width, inner), ci.tokens


def _levelled(g, name, causal, q):
    from .sequence import compile_levelled

    return compile_levelled(g, name, causal, per_layer=q)


def _machine(g, name, causal, c):
    from .budget import compile_budget

    return compile_budget(g, name, causal, c)


def _packed(g, name, causal, c):
    """The packed levelled compile (:mod:`.packed`); causal: also of the circuit's token-sum form
    (:mod:`.token_sums`, per-token products summed to later tokens), the one with fewer layers, proved
    against the circuit as given."""
    from .packed import compile_packed

    try:
        con = compile_packed(g, name, causal, c)
    except CompileError:
        con = None
    if causal:
        from .token_sums import token_sum_form

        h = token_sum_form(g)
        if h is not None:
            try:
                alt = compile_packed(h, name, causal, c)
            except CompileError:
                alt = None
            if alt is not None and (con is None or alt.compile_info.layers < con.compile_info.layers):
                alt.graph, alt.compiled_graph = g, h
                alt.info["circuit"] = C.metrics(g, validated=True)
                alt.compile_info = replace(alt.compile_info, bound={
                    **alt.compile_info.bound, "token_sum_form": "compiled from the circuit's token-sum form "
                    "(constructions/compiler/token_sums.py); proved against the circuit as given"})
                con = alt
    if con is None:
        raise CompileError(f"the packed compile does not fit {c} channels")
    return con


def _build(g, name, causal, kind, arg):
    return {"levelled": _levelled, "machine": _machine, "packed": _packed}[kind](g, name, causal, arg)


def _try(g, causal: bool, kind: str, arg):
    """(layers, width, tokens) of one compile, or None where it does not compile (memoised)."""
    def make():
        try:
            con = _build(g, "circuit", causal, kind, arg)
        except (CompileError, ValueError):
            return None
        return _shape(con)

    return _memo(g, (causal, kind, arg), make)


def _qs(g, causal: bool) -> list:
    """The products-per-token settings worth trying: 1, 2, 4, ... below the most products a level puts
    on one token of the default compile (an upper estimate: a level's products)."""
    from .linearise import linearise, needed

    atoms, level, outputs = linearise(g)
    per: dict = {}
    for a in needed(atoms, outputs):
        if atoms[a][0] == "mul":
            per[level[a]] = per.get(level[a], 0) + 1
    most = max(per.values(), default=0)
    qs, q = [], 1
    while q < most and len(qs) < MAX_Q:
        qs.append(q)
        q *= 2
    return qs


def _machine_min(g) -> int:
    from .budget import EXTRA
    from .place import grid_channels

    return grid_channels(g) + EXTRA


def _machine_budgets(g, upto: int) -> list:
    lo = _machine_min(g)
    cs = list(range(lo, min(upto, lo + EXHAUSTIVE - 1) + 1))
    if upto >= lo and upto not in cs:
        cs.append(upto)
    return cs


def _packed_budgets(g, causal: bool, upto: int) -> list:
    """The budgets the packed compile is tried at: every one from the grid's channels + 1 for
    :data:`EXHAUSTIVE` budgets, every ``ceil(3/2)``-fold step after them, and the :data:`EXHAUSTIVE`
    budgets below the default compile's width; a fixed list for the circuit, cut at ``upto`` (so the
    compiles tried at a budget include those tried at every smaller one)."""
    from .place import grid_channels

    lo = grid_channels(g) + 1
    cs = set(range(lo, lo + EXHAUSTIVE))
    c = lo + EXHAUSTIVE - 1
    default = _try(g, causal, "levelled", None)
    top = default[1] if default is not None else upto
    while c < top:
        c = -(-3 * c // 2)
        cs.add(c)
    cs |= set(range(max(lo, top - EXHAUSTIVE), top))
    return sorted(c for c in cs if c <= min(upto, top - 1))


def tries(g, causal: bool, upto: int) -> list:
    """Every compile tried for budgets up to ``upto``: ``{"kind", "arg", "layers", "width", "tokens"}``
    (the default is ``kind "levelled", arg None``)."""
    out = []
    for kind, args in (("levelled", [None] + _qs(g, causal)), ("packed", _packed_budgets(g, causal, upto)),
                       ("machine", _machine_budgets(g, upto))):
        for arg in args:
            r = _try(g, causal, kind, arg)
            if r is not None:
                out.append({"kind": kind, "arg": arg, "layers": r[0], "width": r[1], "tokens": r[2]})
    return out


def minimum_width(g, causal: bool) -> int | None:
    """The narrowest state (and inner channels) among the compiles tried: the least budget accepted."""
    default = _try(g, causal, "levelled", None)
    ws = [t["width"] for t in tries(g, causal, max(_machine_min(g), default[1] if default else 0))]
    if not ws:
        return None
    best = min(ws)
    if causal and best > _machine_min(g):  # the causal machine may need more than its nominal minimum
        for c in range(_machine_min(g), best):
            if _try(g, True, "machine", c) is not None:
                return c
    return best


def _describe(kind: str, arg) -> str:
    if kind == "machine":
        return f"the budget machine at {arg} channels (constructions/compiler/budget.py)"
    if kind == "packed":
        return f"the packed levelled compile at {arg} channels (constructions/compiler/packed.py)"
    return "the default levelled compile" if arg is None else f"the levelled compile, {arg} product(s) per token a layer"


def compile_within(g, name: str, causal: bool, channels: int) -> CompiledCircuit:
    """The compile with the fewest layers (then the narrowest state) within ``channels`` among
    :func:`tries` (module docstring); a ValueError naming the least budget where none fits."""
    target = "baseconv-causal" if causal else "baseconv"
    default = _try(g, causal, "levelled", None)
    if default is not None and default[1] <= channels:
        chosen = ("levelled", None)
    else:
        fits = [t for t in tries(g, causal, channels) if t["width"] <= channels]
        if not fits:
            if default is None and causal:  # the default's own refusal (an output before a token it reads)
                _levelled(g, name, causal, None)
            least = minimum_width(g, causal)
            raise ValueError(f"channel budget {channels} is below the minimum {least} for {target} (the narrowest "
                             f"of the compiles tried: the default levelled compile, fewer products per layer, and "
                             f"the budget machine from the grid's channels + 2)")
        best = min(fits, key=lambda t: (t["layers"], t["width"], ("levelled", "packed", "machine").index(t["kind"])))
        chosen = (best["kind"], best["arg"])
    kind, arg = chosen
    con = _build(g, name, causal, kind, arg)
    ci = con.compile_info
    layers, width, tokens = _shape(con)
    bound = dict(ci.bound)
    bound.update({"channel_budget": channels, "choice": _describe(kind, arg),
                  "search": "the fewest layers, then the narrowest state, among the compiles tried within the budget "
                            "(constructions/compiler/budget_search.py)"})
    pl = C.placement(g)
    con.compile_info = replace(ci, form="budget", channel_budget=channels, inner_width=width,
                               grid_tokens=pl.tokens if pl else 1, bound=bound)
    return con


def pareto(g, target: str, max_points: int = 48, **kw) -> list:
    """The layers/channels frontier of ``g`` on ``target``: ``compile_circuit(g, target, channels=c, **kw)``
    (as written or re-associated, as it chooses) at :func:`minimum_width` and at the width of every
    compile tried below the default's (where a budget's choice can change; at most ``max_points`` of
    them, evenly spread), and the default compile; the points no other point beats in both (the lower
    envelope of the compiles tried).
    Points: ``{"channels", "layers", "tokens", "budget"}`` (``budget`` None: the unbounded compile)."""
    from . import compile_circuit

    causal = target == "baseconv-causal"
    free = compile_circuit(g, target=target, **kw).compile_info
    gv = C.validate(g)
    lo = minimum_width(gv, causal)
    lo = free.state_width if lo is None else lo
    # a budget's compile changes only where a compile tried starts to fit: the widths of the compiles
    # tried (of the circuit and of its re-association, whichever compile_circuit keeps) are the budgets
    circuits = [gv]
    if kw.get("reassociate") is not False:
        from .reassociate import reassociate

        circuits.append(reassociate(gv))
    widths = sorted(w for w in {lo} | {t["width"] for h in circuits for t in tries(h, causal, free.state_width - 1)}
                    if lo <= w < free.state_width)
    if len(widths) > max_points:  # evenly spread, the minimum first
        step = len(widths) / max_points
        widths = sorted({widths[int(i * step)] for i in range(max_points)} | {widths[0]})
    pts = []
    for c in widths:
        try:
            cm = compile_circuit(g, target=target, channels=c, **kw).compile_info
        except (CompileError, ValueError):
            continue
        pts.append({"channels": cm.state_width, "layers": cm.layers, "tokens": cm.tokens, "budget": c})
    pts.append({"channels": free.state_width, "layers": free.layers, "tokens": free.tokens, "budget": None})
    front = [p for p in pts if not any((q["channels"] <= p["channels"] and q["layers"] <= p["layers"]
                                        and (q["channels"], q["layers"]) != (p["channels"], p["layers"])) for q in pts)]
    seen, out = set(), []
    for p in sorted(front, key=lambda p: (p["channels"], p["layers"])):
        if (p["channels"], p["layers"]) not in seen:
            seen.add((p["channels"], p["layers"]))
            out.append(p)
    return out
