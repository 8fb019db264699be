"""A channel budget for ``baseconv`` / ``baseconv-causal`` as a search over this compiler's own
compiles (issue 43 item 1): ``compile_circuit(g, target, channels=C)`` is the compile with the fewest
layers (then the narrowest state) among the compiles it tries whose state and inner channels fit in
``C``; ``compile_circuit(g, target)`` (no budget) is the least of those it searches.

The compiles tried (:func:`candidates`: a fixed list for the circuit, each proved like any other):

* the **default** levelled compile (:func:`.sequence.compile_levelled`; seed 000 Thm. D.30 / seed 003
  Thm. H.21, levelled), of width ``W``;
* the levelled compile with at most ``q`` **products per token per product layer** (``q = 1, 2, 4,
  ...`` below the most products any level puts on one token; :func:`.sequence._chunks`): a level's
  products in several product layers, each holding fewer products side by side;
* the **packed levelled compile** (:mod:`.packed`), plain and with carries shared at disjoint tokens
  (:data:`PACKED_MODES`), at the budgets :func:`ladder` lists from the grid's channels up to ``W - 1``;
* the **one-value-per-slot budget machine** (:mod:`.budget`: level-parallel Benes routing on
  ``baseconv``, one product at a time on ``baseconv-causal``) at the budgets :func:`ladder` lists from
  the grid's channels + 2 up to ``W - 1``;

every one of them wider than ``W`` left out (at such budgets the default fits).  They are ordered by
(layers, width, then the list's order).  The **unbounded compile** (no budget; :func:`compile_best`) is
the least of the compiles it searches (:func:`searched`, on the default's tokens): every one on
circuits of at most :data:`FULL_SEARCH_MAX_GATES` gates; up to :data:`SEARCH_MAX_GATES` gates the
default and the packed compile on the grid's own channels (one packed budget, so the search's cost is
bounded by one packed compile); above, the default alone.  Call ``U`` its choice and ``S`` the searched
compiles and every other compile of the list that comes after ``U`` in the order.  A budget ``C`` gives
the least of ``{s in S : width(s) <= C}``.  So, by construction: the layers never increase with ``C``
(the set only grows), every ``C`` at or above ``U``'s width gives ``U``, and the stated minimum
(:func:`minimum_width`, the narrowest of ``S``, also over the re-associated circuit where
``compile_circuit`` compiles it) is the least budget accepted, never above ``U``'s width.  A compile
of the list that would come before ``U`` but is not searched is not used at any budget: no budget
gives fewer layers than the unbounded compile.

The least is found without building every compile: compiles are compared by their shapes, planned
without weights (:func:`.packed.packed_shape`, :func:`.budget.budget_shape`), and the packed compile
stops once it passes the layers of the best compile in hand (:class:`.packed.LayerLimit`: one that
passes them cannot be the least).
"""
from __future__ import annotations

from dataclasses import replace

import circuits as C

from .bounds import budget_width
from .circuit import CompiledCircuit, h21_d, theorem_h21
from .info import ABSENT
from .routing import CompileError
from .sequence import active_placements

#: the ladder of budgets (:func:`ladder`): this many from its start and this many below the default's width
EXHAUSTIVE = 8
#: at most this many products-per-token settings are tried (q = 1, 2, 4, ...)
MAX_Q = 4

#: the packed compile's modes tried at each budget: plain, and carries shared at disjoint tokens
PACKED_MODES = ({}, {"fuse": True, "relocate": True})

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
    k = (_key_of(g),) + key
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


#: the marker of a compile that passed the layers limit it was given (its own layers are more)
OVER = "over"


def _packed_choice(g, causal, c, limit):
    """The packed compile :func:`_packed` builds at ``c``: ``(shape, circuit, mode)`` with ``circuit``
    ``g`` or its token-sum form (causal); ``(OVER, None, None)`` where every packed compile that fits
    passes ``limit`` layers; ``(None, None, None)`` where none fits."""
    from .packed import LayerLimit, packed_shape

    def best(h):
        """Either mode's packed shape of ``h`` (plain; carries shared at disjoint tokens), the fewer
        layers, then the narrower (the plain one on a tie); a later mode stops once it passes the
        layers of the compile in hand."""
        out, over = None, False
        for mode in PACKED_MODES:
            lim = limit if out is None else (out[0][0] if limit is None else min(limit, out[0][0]))
            try:
                shp = packed_shape(h, causal, c, **mode, limit=lim)
            except LayerLimit:
                over = over or out is None
                continue
            except CompileError:
                continue
            if out is None or shp[:2] < out[0][:2]:
                out = (shp, h, mode)
        return out if out is not None else ((OVER, None, None) if over else (None, None, None))

    con = best(g)
    if causal:
        from .token_sums import token_sum_form

        h = _memo(g, ("token_sum_form",), lambda: token_sum_form(g))
        if h is not None:
            alt = best(h)
            if alt[0] not in (None, OVER) and (con[0] in (None, OVER) or alt[0][0] < con[0][0]):
                return alt
            if con[0] is None and alt[0] is OVER:
                return alt
    return con


def _packed(g, name, causal, c, min_width=1):
    """The packed levelled compile (:mod:`.packed`) at ``c``, in the mode and of the circuit
    :func:`_packed_choice` chooses; causal: of the circuit's token-sum form (:mod:`.token_sums`, per-token
    products summed to later tokens) where that has fewer layers, proved against the circuit as given."""
    from .packed import compile_packed

    shp, h, mode = _packed_choice(g, causal, c, None)
    if shp is None:
        raise CompileError(f"the packed compile does not fit {c} channels")
    con = compile_packed(h, name, causal, c, **mode, min_width=min_width)
    if h is not g:
        con.graph, con.compiled_graph = g, h
        con.info["circuit"] = C.metrics(g, validated=True)
        # Thm. H.21's entry, like the circuit's metrics, is of the circuit as given; the bound's measures are
        # the token-sum form's (the circuit compiled)
        con.info["theorem_H21_bound"] = theorem_h21(con.info["circuit"], h21_d(g))
        con.compile_info = replace(con.compile_info, bound={
            **con.compile_info.bound, "token_sum_form": "compiled from the circuit's token-sum form "
            "(constructions/compiler/token_sums.py); proved against the circuit as given"})
    return con


def _build(g, name, causal, kind, arg):
    return {"levelled": _levelled, "machine": _machine, "packed": _packed}[kind](g, name, causal, arg)


_DIGESTS: dict = {}


def _key_of(g) -> tuple[str, tuple]:
    """:func:`_digest` of ``g``, remembered for the last few graphs by identity (the entry keeps the
    graph, so its id is not reused while remembered; the search's circuits are validated copies that
    no pass changes), with the placement rules in force (:func:`.sequence.active_placements`: a compile
    under other rules is another compile)."""
    hit = _DIGESTS.get(id(g))
    if hit is not None and hit[0] is g:
        return hit[1], active_placements()
    if len(_DIGESTS) >= 8:
        _DIGESTS.pop(next(iter(_DIGESTS)))
    d = _digest(g)
    _DIGESTS[id(g)] = (g, d)
    return d, active_placements()


def _try(g, causal: bool, kind: str, arg, limit: int | None = None):
    """(layers, width, tokens) of one compile, None where it does not compile, :data:`OVER` where it
    passes ``limit`` layers (the packed compile stops there; the others are planned whole); memoised
    per circuit content, an :data:`OVER` with the limit it was found under."""
    k = (_key_of(g), causal, kind, arg)
    hit = _CACHE.get(k)
    if hit is not None:
        if hit[0] != OVER:
            return hit[1]
        if limit is not None and limit <= hit[1]:
            return OVER
    try:
        if kind == "levelled":
            r = _shape(_levelled(g, "circuit", causal, arg))
        elif kind == "packed":
            r = _packed_choice(g, causal, arg, limit)[0]
        else:
            from .budget import budget_shape

            r = budget_shape(g, causal, arg)
    except (CompileError, ValueError):
        r = None
    if len(_CACHE) > 4096:
        _CACHE.clear()
    _CACHE[k] = (OVER, limit) if r == OVER else ("shape", r)
    return r


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


def ladder(lo: int, top: int) -> list:
    """The budgets a compile is tried at, below ``top`` (the default compile's width): every one from
    ``lo`` for :data:`EXHAUSTIVE` budgets, every ``ceil(3/2)``-fold step after them, and the
    :data:`EXHAUSTIVE` budgets below ``top``; a fixed list for the circuit."""
    cs = set(range(lo, lo + EXHAUSTIVE))
    c = lo + EXHAUSTIVE - 1
    while c < top:
        c = -(-3 * c // 2)
        cs.add(c)
    cs |= set(range(max(lo, top - EXHAUSTIVE), top))
    return sorted(c for c in cs if c < top)


def candidates(g, causal: bool) -> list | None:
    """The compiles the search tries, ``(kind, arg)`` in the order that breaks ties (the default is
    ``("levelled", None)``, first); None where the default compile refuses the circuit (then every
    budget refuses it the same way)."""
    return _memo(g, ("candidates", causal), lambda: _candidates(g, causal))


def _candidates(g, causal: bool) -> list | None:
    from .place import grid_channels

    default = _try(g, causal, "levelled", None)
    if default is None:
        return None
    top = default[1]
    return ([("levelled", None)] + [("levelled", q) for q in _qs(g, causal)]
            + [("packed", c) for c in ladder(grid_channels(g), top)]
            + [("machine", c) for c in ladder(_machine_min(g), top)])


def searched(g, causal: bool) -> set:
    """The compiles the unbounded compile is the least of: every compile tried on circuits of at most
    :data:`FULL_SEARCH_MAX_GATES` gates; up to :data:`SEARCH_MAX_GATES`, the default levelled compile
    and the packed compile at the grid's own channels (the narrowest packed compile, in either mode,
    stopping once it passes the default's layers: one packed budget, so that compile costs at most one
    packed compile more than the default); above, the default alone."""
    from .place import grid_channels

    cands = candidates(g, causal) or []
    gates = _gates(g)
    if gates > SEARCH_MAX_GATES or not cands:
        return {("levelled", None)}
    if gates <= FULL_SEARCH_MAX_GATES:
        return set(cands)
    return {("levelled", None)} | ({("packed", grid_channels(g))} & set(cands))


def _scan(g, causal, cands, rank, top, cap=None, above=None, tokens=None):
    """The least of ``cands`` (``(kind, arg)``; width at most ``cap``, above ``above`` in the order, on
    ``tokens`` tokens, where given), each tried with the best layers in hand as its limit."""
    visit = [kv for kv in cands if kv[0] == "levelled"] + \
        sorted((kv for kv in cands if kv[0] != "levelled"), key=lambda kv: (kv[0] != "packed", -kv[1]))
    best = None
    for kind, arg in visit:
        r = _try(g, causal, kind, arg, None if best is None else best["layers"])
        if r is None or r == OVER or r[1] > top or (cap is not None and r[1] > cap) or \
                (tokens is not None and r[2] != tokens):
            continue
        t = {"kind": kind, "arg": arg, "layers": r[0], "width": r[1], "tokens": r[2], "rank": rank[(kind, arg)]}
        if above is not None and _order(t) <= _order(above):
            continue
        if best is None or _order(t) < _order(best):
            best = t
    return best


def _order(t: dict) -> tuple:
    return t["layers"], t["width"], t["rank"]


def _unbounded(g, causal: bool) -> dict | None:
    """The unbounded compile's choice: the least of :func:`searched` on the default's tokens (the
    placed grid's: a budget machine's appended tokens are for budgets only)."""
    cands = candidates(g, causal)
    if cands is None:
        return None
    rank = {kv: i for i, kv in enumerate(cands)}
    _, top, tokens = _try(g, causal, "levelled", None)
    chosen = searched(g, causal)
    return _scan(g, causal, [kv for kv in cands if kv in chosen], rank, top, tokens=tokens)


def _least(g, causal: bool, cap: int | None = None) -> dict | None:
    """The least compile of ``S`` (module docstring) whose width is at most ``cap`` (None: any), in the
    order (layers, width, the list's order); None where none fits."""
    u = _unbounded(g, causal)
    if u is None or cap is None or u["width"] <= cap:
        return u
    cands = candidates(g, causal)
    rank = {kv: i for i, kv in enumerate(cands)}
    top = _try(g, causal, "levelled", None)[1]
    return _scan(g, causal, cands, rank, top, cap, above=u)


def tries(g, causal: bool, upto: int | None = None) -> list:
    """Every compile of ``S`` (module docstring) of width at most ``upto`` (None: all):
    ``{"kind", "arg", "layers", "width", "tokens"}`` (the default is ``kind "levelled", arg None``)."""
    cands = candidates(g, causal) or []
    if not cands:
        return []
    top = _try(g, causal, "levelled", None)[1]
    u = _unbounded(g, causal)
    rank = {kv: i for i, kv in enumerate(cands)}
    out = []
    for kind, arg in cands:
        r = _try(g, causal, kind, arg)
        if r is None or r[1] > top or (upto is not None and r[1] > upto):
            continue
        t = {"kind": kind, "arg": arg, "layers": r[0], "width": r[1], "tokens": r[2], "rank": rank[(kind, arg)]}
        if _order(t) >= _order(u):
            out.append({k: v for k, v in t.items() if k != "rank"})
    return out


def _own_minimum(g, causal: bool) -> int | None:
    return min((t["width"] for t in tries(g, causal)), default=None)


def _rewritten(g, reassociate):
    """The re-associated circuit ``compile_circuit`` would also compile (:func:`.pipeline._reassociated`:
    only where the rewrite lowers the multiplicative depth), or None."""
    from .reassociate import multiplicative_depth, reassociate as rewrite
    from .targets import REASSOCIATE_MAX_GATES

    if reassociate is False:
        return None
    gates = sum(1 for _, op in g.nodes(data="op") if op in ("add", "mul"))
    if reassociate is None and gates > REASSOCIATE_MAX_GATES:
        return None
    h = rewrite(g)
    return h if multiplicative_depth(h) < multiplicative_depth(g) else None


def minimum_width(g, causal: bool, reassociate: bool | None = None) -> int | None:
    """The least budget ``compile_circuit(g, target, channels=C, reassociate=reassociate)`` accepts: the
    narrowest compile tried (:func:`tries`) of the validated circuit ``g`` and, where the compile also
    compiles its re-association (same rule as :func:`.pipeline.compile_circuit`), of that one."""
    ws = [w for w in (_own_minimum(g, causal),) if w is not None]
    h = _rewritten(g, reassociate)
    if h is not None:
        w = _own_minimum(h, causal)
        if w is not None:
            ws.append(w)
    return min(ws) if ws else None


def _describe(kind: str, arg) -> str:
    if kind == "machine":
        return f"the budget machine at {arg} channels (constructions/compiler/budget.py)"
    if kind == "packed":
        return f"the packed levelled compile at {arg} channels (constructions/compiler/packed.py)"
    return "the default levelled compile" if arg is None else f"the levelled compile, {arg} product(s) per token a layer"


class BudgetRefusal(ValueError):
    """A channel budget below the least this compiler accepts (``least``), one line naming it."""

    def __init__(self, channels: int, least: int | None, target: str):
        self.channels, self.least, self.target = channels, least, target
        super().__init__(f"channel budget {channels} is below the minimum {least} for {target} (the narrowest of "
                         f"the compiles tried: the default levelled compile, fewer products per layer, and the budget "
                         f"machine from the grid's channels + 2)")


#: the unbounded compile tries the packed compile at the grid's channels besides the default on circuits
#: of at most this many add/mul gates (:func:`searched`); above, it is the default levelled compile
SEARCH_MAX_GATES = 2_000
#: ... and every compile a budget tries on circuits of at most this many
FULL_SEARCH_MAX_GATES = 64


def _gates(g) -> int:
    return sum(1 for _, op in g.nodes(data="op") if op in ("add", "mul"))


def compile_best(g, name: str, causal: bool, min_width: int = 1) -> CompiledCircuit:
    """The unbounded compile: the least of :func:`candidates` (module docstring); the default levelled
    compile itself where it is the least, or above :data:`SEARCH_MAX_GATES` gates.  ``min_width``: the
    state padded to at least that many channels (a state shared with other stacks; a budget-machine
    choice, whose layout is its budget's, gives way to the default there)."""
    default = _levelled_floor(g, name, causal, min_width)
    if _gates(g) > SEARCH_MAX_GATES:
        return default
    if min_width <= 1:  # the search's default is this compile: not compiled twice
        _CACHE[(_key_of(g), causal, "levelled", None)] = ("shape", _shape(default))
    best = _least(g, causal)
    if best is None or (best["kind"], best["arg"]) == ("levelled", None) or \
            (best["kind"] == "machine" and min_width > best["width"]):
        return default
    if best["kind"] == "levelled":
        from .sequence import compile_levelled

        con = compile_levelled(g, name, causal, min_width, per_layer=best["arg"])
    elif best["kind"] == "packed":
        con = _packed(g, name, causal, best["arg"], min_width)
    else:
        con = _machine(g, name, causal, best["arg"])
    ci = con.compile_info
    d = default.compile_info
    bound = {k: v for k, v in ci.bound.items() if k != "channel_budget"}  # the budget it was tried at: in choice
    # the stated bound reads the circuit's measures only: the budget the choice was tried at is a ladder step
    # below the default's width, so its width bound is the default's (no compile tried is wider than the
    # default, nor has more layers); the choice's layer formula where it reads no budget
    df = d.bound["formulas"]
    lf = ci.bound.get("formulas", {}).get("layers")
    if lf is None or {"C", "M"} & set(lf["measures"]):
        lf = df["layers"]
    bound.update({"layers": lf["value"], "state_width": df["state_width"]["value"],
                  "formulas": {"layers": lf, "state_width": df["state_width"]}})
    bound.pop("inner_width", None)
    bound.update({"choice": _describe(best["kind"], best["arg"]),
                  "default": {"layers": d.layers, "state_width": d.state_width,
                              "layers_bound": d.bound["layers"]},
                  "search": "the fewest layers, then the narrowest state, among the default levelled compile and the "
                            "compiles tried at budgets below its width (constructions/compiler/budget_search.py)"})
    pl = C.placement(g)
    con.compile_info = replace(ci, form="budget", channel_budget=ABSENT, inner_width=_shape(con)[1],
                               grid_tokens=pl.tokens if pl else 1, bound=bound)
    return con


def _levelled_floor(g, name, causal, min_width):
    from .sequence import compile_levelled

    return compile_levelled(g, name, causal, min_width)


def compile_within(g, name: str, causal: bool, channels: int) -> CompiledCircuit:
    """The least compile within ``channels`` (module docstring); a :class:`BudgetRefusal` naming the
    least budget where none fits."""
    target = "baseconv-causal" if causal else "baseconv"
    if candidates(g, causal) is None:  # the default's own refusal (an output before a token it reads)
        _levelled(g, name, causal, None)
        raise CompileError("the default compile refuses this circuit")
    if _gates(g) > SEARCH_MAX_GATES and _try(g, causal, "levelled", None)[1] <= channels:
        best = {"kind": "levelled", "arg": None}  # the unbounded compile above the search's size
    else:
        best = _least(g, causal, channels)
    if best is None:
        raise BudgetRefusal(channels, _own_minimum(g, causal), target)
    kind, arg = best["kind"], best["arg"]
    con = _build(g, name, causal, kind, arg)
    ci = con.compile_info
    layers, width, tokens = _shape(con)
    bound = dict(ci.bound)
    if bound.get("state_width", channels) > channels:  # the budget is the tighter width guarantee
        bound.update({"state_width": channels,
                      "formulas": {**bound.get("formulas", {}), "state_width": budget_width(channels)}})
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
    compile tried below the unbounded compile's (where a budget's choice can change; at most
    ``max_points`` of them, evenly spread), and the unbounded compile; the points no other point beats
    in both (the lower envelope of the compiles tried).
    Points: ``{"channels", "layers", "tokens", "budget"}`` (``budget`` None: the unbounded compile)."""
    from . import compile_circuit

    causal = target == "baseconv-causal"
    free = compile_circuit(g, target=target, **kw).compile_info
    gv = C.validate(g)
    lo = minimum_width(gv, causal, kw.get("reassociate"))
    lo = free.state_width if lo is None else lo
    # a budget's compile changes only where a compile tried starts to fit: the widths of the compiles
    # tried (of the circuit and of its re-association, whichever compile_circuit keeps) are the budgets
    circuits = [gv]
    h = _rewritten(gv, kw.get("reassociate"))
    if h is not None:
        circuits.append(h)
    widths = sorted(w for w in {lo} | {t["width"] for c in circuits for t in tries(c, causal, free.state_width - 1)}
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
    for p in sorted(front, key=lambda p: (p["channels"], p["layers"], p["budget"] is not None)):
        if (p["channels"], p["layers"]) not in seen:
            seen.add((p["channels"], p["layers"]))
            out.append(p)
    return out
