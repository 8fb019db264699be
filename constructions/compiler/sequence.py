"""Targets ``baseconv`` and ``baseconv-causal``: a placed circuit -> BaseConv over a sequence.

Seed 000 Thm. D.30 / seed 003 Thm. H.21 compile a circuit whose inputs are an N x D matrix
into BaseConv layers on an N' x D' state, moving values between tokens by convolution.  This
pass keeps the circuit's own grid (N' = the placed tokens, no extra tokens) and, level by
level of multiplicative depth (:mod:`.linearise`), emits:

* a **product layer** (seed 000 App. D.2.1 MULTIPLY, Def. D.20): inner channel ``k`` forms
  ``(u W_gate + B_gate)[:, k] * (h * (u W_in) + B_conv)[:, k]``.  A product atom ``p = f * g``
  sits at a token ``t``: one factor (the *gate* form) must be a channel mix of atoms at ``t``
  (``W_gate`` is shared by all tokens); the other (the *conv* form) a channel mix at ``t``
  (filter = identity) or one channel read at any tokens through the filter's taps.  Products
  with the same gate mix and conv channel/mix and consistent taps share an inner channel, at
  different tokens.  Atoms still needed later are copied with a masked gate (``B_gate`` = 1 on
  their tokens only).  Where a factor cannot be read that way, the level first gets
* a **route layer** (:mod:`.routing`): any linear map, here putting both factors of each
  product side by side at a token chosen by one of two rules (:func:`_place_products`): *balanced*
  (at most ``ceil(m / N')`` per token for a level of ``m`` products, when the target allows it) or
  *latest* (the latest token a factor sits at: blocks of one shape at different tokens are placed
  alike, so they share inner channels and the width does not grow with the tokens); the plan
  compiles with each and keeps the narrower, and
* one final route layer that writes every output at its place and zeros everywhere else,
  folded into the last product layer where it is a channel map per token (every output form
  at token ``t`` reads atoms at ``t`` only) and every inner channel's row through it is the same
  at all the tokens where the channel may be nonzero (junk included), or the channel is
  bias-gated (a carry: split per row, each part masked by ``B_gate``); constants go to
  ``B_out`` (:func:`_fold_outputs`, plan entry ``product + outputs``).  So a level whose
  products and outputs stay on their tokens is one layer (the hoisted Gram-form GD step of
  ``constructions/compiled_gd.py``; Horner as written: 7 layers for 7 products).

The inputs keep their tokens; their channels are chosen by :mod:`.place` (a free relabelling,
or a split of a channel whose inputs are read across tokens, one route layer fused into the
first level's route where it has one), so the width does not depend on which channels the
inputs occupy (GD step 20 x 5 with ``x_j`` in column ``j``'s channel: 21 x 16, was 21 x 106).

So the stack has at most ``2 md + 1`` layers for multiplicative depth ``md`` (the compiler's
guarantee, reported as ``compiled.bound``), on the input grid's tokens.  Causal convolution
only moves values to later tokens: a product sits at a token no earlier than its factors, and
an output placed before a token it depends on is a :class:`CompileError` naming it.

A slot ``(t, c)`` of a state holds an atom, *junk* (a product an inner channel formed at a
token where nothing was asked of it: never read, and zeroed by the final route), or zero.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from fractions import Fraction

import circuits as C

from ..layers import BaseConv
from .bounds import formula, sequence_width
from .circuit import CompiledCircuit, compiled, h21_d, param_counts, theorem_h21
from .info import CompileInfo
from .linearise import CONST, last_uses, linearise, needed
from .place import candidates, is_relabelling
from .routing import CompileError, LayerSpec, route, shift

JUNK = "junk"


@dataclass
class SeqState:
    T: int
    slot_of: dict = field(default_factory=dict)  # atom -> (t, c)
    occupied: dict = field(default_factory=dict)  # (t, c) -> atom | JUNK
    by_channel: dict = field(default_factory=dict)  # c -> its occupied tokens, in the order they were put

    def put(self, a, t: int, c: int) -> None:
        assert (t, c) not in self.occupied, (a, t, c)
        self.occupied[(t, c)] = a
        self.by_channel.setdefault(c, []).append(t)
        if a != JUNK:
            self.slot_of[a] = (t, c)

    def free(self, t: int, c: int) -> bool:
        return (t, c) not in self.occupied

    def width(self) -> int:
        return 1 + max((c for _, c in self.occupied), default=-1)

    def lowest_free_channel(self, tokens, exclude=()) -> int:
        c = 0
        while c in exclude or not all(self.free(t, c) for t in tokens):
            c += 1
        return c


def _token_of(form: dict, st: SeqState):
    toks = {st.slot_of[a][0] for a in form if a != CONST}
    return toks.pop() if len(toks) == 1 else None


def _conv_side(form: dict, t: int, st: SeqState, causal: bool):
    """How the conv side reads ``form`` at token ``t`` in ``st``: :func:`conv_side`."""
    return conv_side(form, t, st.slot_of, st.occupied, st.T, causal, st.by_channel)


def conv_side(form: dict, t: int, slot_of: dict, occupied, T: int, causal: bool, by_channel: dict | None = None):
    """How the conv side reads ``form`` at token ``t``: ``(key, taps)`` or None (``slot_of``: atom ->
    (t, c); ``occupied``: the occupied slots (t, c), iterated in order; ``T`` tokens; ``by_channel``: where
    given, channel -> its occupied tokens in that order, so only the form's channel is visited).
    key ``("mix", channels)``: every atom at ``t`` (filter = identity);
    key ``("chan", c)``: every atom in channel ``c``, moved by the taps (all occupied slots of
    ``c`` get a tap, zero where the form does not read them); None where two slots would need
    different coefficients on one tap."""
    atoms = {a: v for a, v in form.items() if a != CONST}
    slots = {a: slot_of[a] for a in atoms}
    if all(s[0] == t for s in slots.values()):
        return ("mix", tuple(sorted((slots[a][1], v) for a, v in atoms.items()))), {0: Fraction(1)}
    chans = {s[1] for s in slots.values()}
    if len(chans) != 1:
        return None
    c = chans.pop()
    want = {slots[a][0]: v for a, v in atoms.items()}
    taps = {}
    tokens = by_channel.get(c, ()) if by_channel is not None else (t2 for (t2, c2) in occupied if c2 == c)
    for t2 in tokens:
        s = shift(t, t2, T, causal)
        coef = want.get(t2, 0)  # an int zero: compared with ints in C, equal to Fraction(0)
        if s is None:
            if coef != 0:
                return None
            continue
        if taps.get(s, coef) != coef:
            return None
        taps[s] = coef
    return ("chan", c), taps


@dataclass
class _Group:
    gate: tuple  # ((channel, coef), ...)
    conv: tuple  # ("mix", channels) | ("chan", c)
    taps: dict
    members: dict = field(default_factory=dict)  # token -> (atom, gate const, conv const)


def _product_layer(st: SeqState, prods: list, forms: dict, keep: set, causal: bool):
    """A product layer from state ``st``, or None where some product's factors cannot be read
    directly.  ``forms[p] = (f, g)``; ``keep``: the atoms to carry.  Returns (spec, new state)."""
    groups: list[_Group] = []
    for p in prods:
        fa, fb = forms[p]
        for G, V in ((fa, fb), (fb, fa)):
            t = _token_of(G, st)
            if t is None:
                continue
            conv = _conv_side(V, t, st, causal)
            if conv is None:
                continue
            gate = tuple(sorted((st.slot_of[a][1], v) for a, v in G.items() if a != CONST))
            key, taps = conv
            member = (p, G.get(CONST, Fraction(0)), V.get(CONST, Fraction(0)))
            for gr in groups:
                if gr.gate == gate and gr.conv == key and t not in gr.members and \
                        all(gr.taps.get(s, v) == v for s, v in taps.items()):
                    gr.taps.update(taps)
                    gr.members[t] = member
                    break
            else:
                groups.append(_Group(gate, key, dict(taps), {t: member}))
            break
        else:
            return None
    spec = LayerSpec("product")
    new = SeqState(st.T)
    # carry: conv side reads the channel (identity filter), the gate is a 0/1 mask
    carry: dict[int, list[int]] = {}
    for a in sorted(keep, key=str):
        t, c = st.slot_of[a]
        carry.setdefault(c, []).append(t)
        new.put(a, t, c)
    for c, toks in sorted(carry.items()):
        k = spec.new_inner()
        spec.W_in[(c, k)] = spec.h[(0, k)] = spec.W_out[(k, c)] = Fraction(1)
        for t in toks:
            spec.b_gate[(t, k)] = Fraction(1)
    for gr in groups:
        k = spec.new_inner()
        for c, v in gr.gate:
            spec.W_gate[(c, k)] = v
        if gr.conv[0] == "mix":
            for c, v in gr.conv[1]:
                spec.W_in[(c, k)] = v
        else:
            spec.W_in[(gr.conv[1], k)] = Fraction(1)
        for s, v in gr.taps.items():
            if v != 0:
                spec.h[(s, k)] = v
        for t, (p, cg, cv) in gr.members.items():
            if cg != 0:
                spec.b_gate[(t, k)] = cg
            if cv != 0:
                spec.b_conv[(t, k)] = cv
        junk = [t for t in range(st.T) if t not in gr.members and _gate_reads(gr, t, st)
                and _conv_reads(gr, t, st, causal)]
        d = new.lowest_free_channel(list(gr.members) + junk)
        spec.W_out[(k, d)] = Fraction(1)
        for t, (p, _, _) in gr.members.items():
            new.put(p, t, d)
        for t in junk:
            new.put(JUNK, t, d)
    return spec, new


def _gate_reads(gr: _Group, t: int, st: SeqState) -> bool:
    return any(not st.free(t, c) for c, _ in gr.gate)


def _conv_reads(gr: _Group, t: int, st: SeqState, causal: bool) -> bool:
    if gr.conv[0] == "mix":
        return any(not st.free(t, c) for c, _ in gr.conv[1])
    c = gr.conv[1]
    for s, v in gr.taps.items():
        if v == 0:
            continue
        t2 = t - s if causal else (t - s) % st.T
        if t2 >= 0 and not st.free(t2, c):
            return True
    return False


#: how a routed level chooses each product's token (:func:`_place_products`); :func:`plan` compiles
#: with each and keeps the narrowest
PLACEMENTS = ("balanced", "latest")

#: the rules :func:`plan` tries in this context (:func:`placements`); unset: all of :data:`PLACEMENTS`
_RULES: ContextVar[tuple] = ContextVar("placement_rules", default=PLACEMENTS)


def active_placements() -> tuple:
    """The placement rules :func:`plan` tries here and now (:func:`placements`; unset: :data:`PLACEMENTS`): part of
    the key of every memoised compile (:mod:`.budget_search`), since a compile under other rules differs."""
    return _RULES.get()


@contextmanager
def placements(*rules: str):
    """Compile with only ``rules`` (a non-empty subset of :data:`PLACEMENTS`, tried in that order) inside the
    ``with`` block, e.g. ``with placements("balanced"):`` for the compiler before the ``latest`` rule (the
    compiler report's comparison column).  Scoped to the block and to this thread or task; any other name is
    a one-line ValueError."""
    bad = [r for r in rules if r not in PLACEMENTS]
    if not rules or bad:
        raise ValueError(f"placement rules must be a non-empty subset of {PLACEMENTS}, got {rules}")
    token = _RULES.set(tuple(rules))
    try:
        yield
    finally:
        _RULES.reset(token)


def _place_products(st: SeqState, prods: list, forms: dict, causal: bool, placement: str = "balanced") -> dict:
    """A token for each product of a level.

    ``balanced``: one of its factors' tokens, unless that token already holds ceil(m / T) of the
    level's products; then the least loaded allowed token (the products spread over the tokens).
    ``latest``: the latest token its factors sit at, whatever the load.  This rule commutes with
    moving the whole circuit along the tokens, so blocks of one shape at different tokens get
    their products at the same relative token, share their inner channels and the width does not
    grow with the number of tokens (the balanced rule's choice depends on the load earlier blocks
    left, so equal blocks can be placed differently)."""
    T, m = st.T, len(prods)
    if placement == "latest":
        return {p: max([st.slot_of[a][0] for f in forms[p] for a in f if a != CONST], default=T - 1)
                for p in prods}
    cap = math.ceil(m / T)
    load = [0] * T
    where = {}
    for p in prods:
        toks = [st.slot_of[a][0] for f in forms[p] for a in f if a != CONST]
        lo = max(toks) if causal else 0
        cands = sorted({t for t in toks if t >= lo}, key=lambda t: (load[t], t))
        t = cands[0] if cands and load[cands[0]] < cap else min(range(lo, T), key=lambda t: (load[t], t))
        where[p] = t
        load[t] += 1
    return where


def _routed_level(st: SeqState, prods: list, forms: dict, keep: set, causal: bool, placement: str = "balanced"):
    """A route layer putting each product's two factors side by side (channels L_g, R_g of the
    g-th product at its token, chosen by :func:`_place_products`), then the product layer on that state."""
    where = _place_products(st, prods, forms, causal, placement)
    new = SeqState(st.T)
    targets = {}
    for a in sorted(keep, key=str):
        t, c = st.slot_of[a]
        new.put(a, t, c)
        targets[(t, c)] = {a: Fraction(1)}
    rank: dict[int, int] = {}
    order = {}
    for p in prods:
        order[p] = rank.get(where[p], 0)
        rank[where[p]] = order[p] + 1
    pairs = []
    for g in range(max(rank.values(), default=0)):
        toks = [t for t, n in rank.items() if n > g]
        cl = new.lowest_free_channel(toks, exclude={c for pr in pairs for c in pr})
        cr = new.lowest_free_channel(toks, exclude={cl} | {c for pr in pairs for c in pr})
        pairs.append((cl, cr))
    next_forms = {}
    for p in prods:
        t, (cl, cr) = where[p], pairs[order[p]]
        fa, fb = forms[p]
        la, rb = ("L", p), ("R", p)
        new.put(la, t, cl)
        new.put(rb, t, cr)
        targets[(t, cl)], targets[(t, cr)] = fa, fb
        next_forms[p] = ({la: Fraction(1)}, {rb: Fraction(1)})
    spec = route(st.occupied, st.slot_of, targets, st.T, causal)
    spec.targets = targets  # kept: a first route layer is rebuilt on the placed inputs (.place)
    out = _product_layer(new, prods, next_forms, keep, causal)
    assert out is not None  # both factors sit at the product's token
    return [spec, out[0]], out[1], new.width()


def _output_slots(st: SeqState, outputs: dict, places: dict, causal: bool) -> dict:
    slots, used = {}, set(p for p in places.values() if p is not None)
    for name in sorted(outputs):
        if places.get(name) is not None:
            t, c = places[name]
            toks = [st.slot_of[a][0] for a in outputs[name] if a != CONST]
            if causal and toks and max(toks) > t:
                raise CompileError(f"output {name!r} is placed at token {t} but depends on token {max(toks)}: "
                                   "the causal target only moves values to later tokens")
            slots[name] = (t, c)
            continue
        toks = [st.slot_of[a][0] for a in outputs[name] if a != CONST]
        t = max(toks) if toks else 0
        c = 0
        while (t, c) in used:
            c += 1
        used.add((t, c))
        slots[name] = (t, c)
    return slots


def _in_place(st: SeqState, outputs: dict, slots: dict) -> bool:
    """Whether the state is already the final state: each output an atom at its slot, nothing else."""
    for name, f in outputs.items():
        (a, v), = f.items() if len(f) == 1 else ((None, None),)
        if a in (None, CONST) or v != 1 or st.slot_of.get(a) != slots[name]:
            return False
    return len(st.occupied) == len(outputs)


def plan(g, causal: bool, min_width: int = 1, per_layer: int | None = None):
    """The layer specs, the input and output slots and the grid of a validated circuit.

    The compile works on the input layouts of :func:`.place.candidates` (the canonical channel
    relabelling, and the layouts with the inputs read across tokens split off to free channels)
    and keeps the narrowest, then the shallowest: its width does not depend on which channels
    the inputs occupy.  A layout with a routed level is compiled again with each later rule of
    :data:`PLACEMENTS` (or of :func:`placements` inside its block), kept only where narrower (or as wide and
    shallower)."""
    pl = C.placement(g)
    if pl is None:
        T, inputs, places = 1, {n: (0, i) for i, n in enumerate(C.inputs(g))}, {}
    else:
        T, inputs, places = pl.tokens, dict(pl.inputs), dict(pl.outputs)
    grid_channels = pl.channels if pl is not None else 1
    atoms, level, outputs = linearise(g)
    need = needed(atoms, outputs)
    md = max([0] + [level[a] for a in need])
    last_use = last_uses(atoms, level, need, outputs, md + 1)
    best, routed, layouts = None, set(), candidates(inputs, atoms, need)
    rules = _RULES.get()
    for placement in rules:  # a later rule is kept only where it is narrower (or as wide, shallower)
        for label, layout in layouts:
            if placement != rules[0] and label not in routed:
                continue  # no level of this layout was routed: the placement rule chooses nothing
            r = _plan_layout(T, inputs, layout, places, atoms, level, outputs, need, md, last_use, causal,
                             per_layer, placement)
            r["layout"] = label
            r["width"] = max([min_width, grid_channels, r["width"]] + [c + 1 for _, c in inputs.values()])
            if r["routed"]:
                routed.add(label)
            if best is None or (r["width"], len(r["specs"])) < (best["width"], len(best["specs"])):
                best = r
    return (best["specs"], best["kinds"], inputs, best["slots"], T, best["width"], md,
            {"layout": best["layout"], "moved": best["moved"]})


def _chunks(need, atoms, level, md: int, per_layer: int | None, state):
    """``(level, products, atoms that later chunks of the level read)`` in plan order: each level's
    products in one layer (``per_layer`` None), or at most ``per_layer`` products *per token* in each
    product layer: a product's token is the first token its factors read in the state ``state()``
    at the level's start, the level's products are ranked within their token, and chunk ``j`` takes
    ranks ``j per_layer .. (j + 1) per_layer - 1``, each chunk its own product layer (and route layer
    where it needs one): fewer channels, more layers (the channel budget's knob,
    :mod:`.budget_search`)."""
    for lv in range(1, md + 1):
        prods = sorted((a for a in need if level[a] == lv), key=lambda a: int(a[1:]))
        if not per_layer or not prods:
            yield lv, prods, set()
            continue
        st = state()
        rank, count = {}, {}
        for p in prods:
            toks = [st.slot_of[x][0] for f in atoms[p][1:] for x in f if x != CONST and x in st.slot_of]
            t = min(toks) if toks else -1
            rank[p] = count.get(t, 0) // per_layer
            count[t] = count.get(t, 0) + 1
        parts = [[p for p in prods if rank[p] == j] for j in range(max(rank.values()) + 1)]
        for i, part in enumerate(parts):
            later = {x for q in parts[i + 1:] for p in q for f in atoms[p][1:] for x in f if x != CONST}
            yield lv, part, later


def _plan_layout(T, inputs, layout, places, atoms, level, outputs, need, md, last_use, causal,
                 per_layer: int | None = None, placement: str = "balanced") -> dict:
    """The plan with the inputs at their internal slots ``layout`` (same tokens as ``inputs``);
    the first layer reads the placed inputs: a relabelling permutes its channel rows, any other
    layout is a route layer (the first level's route where it has one, else one more layer).
    ``per_layer``: at most that many products per product layer (:func:`_chunks`); ``placement``: how a
    routed level chooses its products' tokens (:func:`_place_products`)."""
    st = SeqState(T)
    for name, (t, c) in layout.items():
        st.put(f"in:{name}", t, c)
    entry = SeqState(T)
    for name, (t, c) in inputs.items():
        entry.put(f"in:{name}", t, c)
    specs, kinds, widths = [], [], [st.width()]
    routed = False
    before = st  # the state the last product layer read (for :func:`_fold_outputs`)
    for lv, prods, later in _chunks(need, atoms, level, md, per_layer, lambda: st):
        before = st
        forms = {p: (atoms[p][1], atoms[p][2]) for p in prods}
        keep = {a for a in st.slot_of if last_use.get(a, 0) > lv or a in later}
        direct = _product_layer(st, prods, forms, keep, causal)
        if direct is not None:
            specs.append(direct[0])
            kinds.append("product")
            st = direct[1]
        else:
            # the level's product layer reads the state its route writes, not ``st``: the fold's
            # supports would be computed on the wrong state (a product channel read as empty and
            # dropped), so a routed level's product layer is not folded
            before = None
            pair, st, mid = _routed_level(st, prods, forms, keep, causal, placement)
            routed = True
            specs += pair
            kinds += ["route", "product"]
            widths.append(mid)
        widths.append(st.width())
    slots = _output_slots(st, outputs, places, causal)
    if not (specs and _in_place(st, outputs, slots)):
        final = {slots[n]: f for n, f in outputs.items()}
        folded = (_fold_outputs(before, specs[-1], st, final, causal)
                  if kinds and kinds[-1] == "product" and before is not None else None)
        if folded is not None:
            specs[-1] = folded
            kinds[-1] = "product + outputs"
        else:
            spec = route(st.occupied, st.slot_of, final, T, causal)
            spec.targets = final
            specs.append(spec)
            kinds.append("route (outputs)")
    relabel = is_relabelling(inputs, layout)
    moved = 0
    if relabel is not None:
        back = {c2: c for c, c2 in relabel.items()}
        for name in ("W_in", "W_gate"):
            setattr(specs[0], name, {(back[c], k): v for (c, k), v in getattr(specs[0], name).items()})
    elif kinds[0].startswith("route"):
        # the first layer is a route: the same targets, read from the placed inputs
        targets = specs[0].targets
        specs[0] = route(entry.occupied, entry.slot_of, targets, T, causal)
        moved = sum(layout[n] != inputs[n] for n in inputs)
    else:
        move = route(entry.occupied, entry.slot_of, {layout[n]: {f"in:{n}": Fraction(1)} for n in layout}, T, causal)
        specs.insert(0, move)
        kinds.insert(0, "route (inputs)")
        widths.append(max(c for _, c in layout.values()) + 1)
        moved = sum(layout[n] != inputs[n] for n in inputs)
    width = max(widths + [sp.inner for sp in specs] + [c + 1 for _, c in slots.values()])
    return {"specs": specs, "kinds": kinds, "slots": slots, "width": width,
            "internal": layout, "moved": moved, "routed": routed}


def _support(spec: LayerSpec, k: int, st: SeqState, causal: bool) -> set:
    """The tokens at which inner channel ``k`` of ``spec`` (a layer reading state ``st``) may be
    nonzero: its gate may be (an occupied slot of a gate channel, or a ``B_gate`` entry) and its
    conv side may be (a tap reading an occupied slot of an input channel, or a ``B_conv`` entry)."""
    gch = [c for (c, k2), v in spec.W_gate.items() if k2 == k and v != 0]
    ich = [c for (c, k2), v in spec.W_in.items() if k2 == k and v != 0]
    taps = [s for (s, k2), v in spec.h.items() if k2 == k and v != 0]
    out = set()
    for t in range(st.T):
        if spec.b_gate.get((t, k), 0) == 0 and all(st.free(t, c) for c in gch):
            continue
        if spec.b_conv.get((t, k), 0) != 0:
            out.add(t)
            continue
        for s in taps:
            t2 = t - s if causal else (t - s) % st.T
            if 0 <= t2 and any(not st.free(t2, c) for c in ich):
                out.add(t)
                break
    return out


def _fold_outputs(before: SeqState, spec: LayerSpec, after: SeqState, final: dict, causal: bool):
    """The product layer ``spec`` (state ``before`` -> ``after``) with the output route ``final``
    (slot -> affine form over the atoms of ``after``) folded into its ``W_out`` and ``B_out``: one
    layer instead of two, or None where the route is not a per-token channel map that the layer
    can absorb.

    A BaseConv layer's output at token ``t`` is ``sum_k p_k[t] W_out[k, :] + B_out[t, :]``.  Where
    every output form at token ``t`` reads only atoms at ``t``, the route is a channel map ``M_t``
    per token (plus constants), so inner channel ``k`` contributes ``p_k[t] W_out[k, :] M_t``:
    a fixed ``W_out`` row where ``W_out[k, :] M_t`` is the same at every token ``k`` may be nonzero
    at (its *support*; junk maps to 0, so a channel of only junk is dropped), and where it is not,
    a bias-gated channel (``W_gate[:, k] = 0``: a carry) is split into one channel per distinct row,
    each with ``B_gate`` kept on its own tokens.  The constants go to ``B_out``.  Exact: the same
    layer the prover checks (seed 000 Def. D.20: ``B_gate`` and ``B_out`` are position dependent)."""
    if spec.b_out:
        return None
    by_token: dict[int, dict] = {}  # t -> atom -> [(dest channel, coef)]
    consts = {}
    for (t, c2), form in final.items():
        for a, v in form.items():
            if a == CONST:
                if v != 0:
                    consts[(t, c2)] = Fraction(v)
                continue
            if after.slot_of[a][0] != t:
                return None  # the route moves a value between tokens
            by_token.setdefault(t, {}).setdefault(a, []).append((c2, Fraction(v)))
    rows: dict[int, dict] = {}
    for (k, d), w in spec.W_out.items():
        if w != 0:
            rows.setdefault(k, {})[d] = Fraction(w)
    claimed = set()
    new = LayerSpec("product")
    for k in range(spec.inner):
        classes: dict[tuple, list] = {}
        for t in sorted(_support(spec, k, before, causal)):
            r: dict = {}
            for d, w in rows.get(k, {}).items():
                if (t, d) in claimed or after.free(t, d):
                    return None  # two channels into one slot, or a slot the plan thinks is 0
                claimed.add((t, d))
                a = after.occupied[(t, d)]
                if a == JUNK:
                    continue
                for c2, v in by_token.get(t, {}).get(a, ()):
                    r[c2] = r.get(c2, Fraction(0)) + w * v
            classes.setdefault(tuple(sorted((c2, v) for c2, v in r.items() if v != 0)), []).append(t)
        live = {r: ts for r, ts in classes.items() if r}
        if not live:
            continue  # only junk, or values no output reads
        if len(classes) > 1 and any(j == k and v != 0 for (_, j), v in spec.W_gate.items()):
            return None  # a token-dependent row needs a mask the shared gate cannot give
        for r, ts in live.items():
            k2 = new.new_inner()
            for name in ("W_in", "W_gate", "h"):
                src, dst = getattr(spec, name), getattr(new, name)
                for (i, j), v in src.items():
                    if j == k:
                        dst[(i, k2)] = v
            for (t, j), v in spec.b_conv.items():
                if j == k:
                    new.b_conv[(t, k2)] = v
            for (t, j), v in spec.b_gate.items():
                if j == k and (len(classes) == 1 or t in ts):
                    new.b_gate[(t, k2)] = v
            for c2, v in r:
                new.W_out[(k2, c2)] = v
    new.b_out = consts
    return new


def _emit(spec: LayerSpec, T: int, Cw: int, causal: bool) -> BaseConv:
    return spec.layer(T, Cw, causal)


def compile_sequence(g, name: str = "circuit", causal: bool = False, min_width: int = 1,
                     channels: int | None = None) -> CompiledCircuit:
    """Compile a validated (placed or unplaced) circuit to BaseConv over its token grid, on at
    least ``min_width`` channels; with ``channels``, on at most that many (:mod:`.budget`: states
    and inner channels; a budget below :func:`.budget.minimum_channels` is a ValueError naming it)."""
    if channels is not None:
        if min_width > 1:  # the budgeted compile chooses its own layout: a wider floor cannot be honoured
            raise ValueError(f"min_width {min_width} and a channel budget ({channels}) cannot be combined: "
                             f"the budgeted compile lays out its own channels")
        from .budget_search import compile_within

        return compile_within(g, name, causal, channels)
    from .budget_search import compile_best

    return compile_best(g, name, causal, min_width)


def _levelled_bound(g, md: int, T: int, per_layer: int | None, min_width: int = 1) -> dict:
    """The levelled compile's guarantee: ``2 md + 1`` layers; with ``per_layer = q`` products per
    token per layer, ``2 sum_l ceil(m_l / q) + 1`` for ``m_l`` products at level ``l``."""
    wb = sequence_width(g, min_width)
    wm = wb["measures"]
    width_bound = wb["value"]
    rule_w = (f"channels <= max(min_width, S, A + max(F, O)) = {width_bound}: states S = D + I + K + n_out = "
              f"{wm['D']} + {wm['I']} + {wm['K']} + {wm['n_out']} (grid channels, inputs split to fresh channels, "
              f"max over levels of carried atoms + 2 products, outputs); a product layer's inner channels <= A = "
              f"{wm['A']} atoms (inputs and products), a route layer's <= the atoms it carries + the terms of the "
              f"forms it writes, F = {wm['F']} (every product's two factor forms) or O = {wm['O']} (the outputs' "
              f"forms)")
    if not per_layer:
        return {"layers": 2 * md + 1, "tokens": T, "state_width": width_bound,
                "formulas": {"layers": formula("2 md + 1", {"md": md}, 2 * md + 1), "state_width": wb},
                "rule": "one product layer per level of multiplicative depth md, preceded by a route layer where a "
                        "factor must move; one route layer for the outputs: layers <= 2 md + 1, on the input grid's "
                        "tokens; " + rule_w}
    atoms, level, outputs = linearise(g)
    per = {}
    for a in needed(atoms, outputs):
        if atoms[a][0] == "mul":
            per[level[a]] = per.get(level[a], 0) + 1
    chunks = sum(-(-m // per_layer) for m in per.values())
    return {"layers": 2 * chunks + 1, "tokens": T, "state_width": width_bound, "products_per_token": per_layer,
            "formulas": {"layers": formula("2 sum_l ceil(m_l / q) + 1", {"q": per_layer, "sum_l ceil(m_l / q)": chunks},
                                           2 * chunks + 1), "state_width": wb},
            "rule": f"at most q = {per_layer} products per token in a product layer: level l's m_l products in at "
                    f"most ceil(m_l / q) product layers, each preceded by a route layer where a factor must move; one "
                    f"route layer for the outputs: layers <= 2 sum_l ceil(m_l / q) + 1 = {2 * chunks + 1}; " + rule_w}


def compile_levelled(g, name: str = "circuit", causal: bool = False, min_width: int = 1,
                     per_layer: int | None = None) -> CompiledCircuit:
    """The levelled compile (module docstring); ``per_layer``: at most that many products per product
    layer (:func:`_chunks`; None: each level's products in one layer, the default compile).  Causal:
    also the circuit's token-sum form (:mod:`.token_sums`: products formed on every token and summed
    to a later one by a causal filter), kept where it compiles to fewer layers, or as many on fewer
    channels; the stack is proved against ``g`` either way."""
    con = _compile_levelled(g, name, causal, min_width, per_layer)
    if causal:
        from .token_sums import token_sum_form

        h = token_sum_form(g)
        if h is not None:
            try:
                alt = _compile_levelled(h, name, causal, min_width, per_layer)
            except CompileError:
                alt = None
            cost = lambda c: (c.compile_info.layers, c.compile_info.state_width)  # noqa: E731
            if alt is not None and cost(alt) < cost(con):
                alt.graph, alt.compiled_graph = g, h
                alt.info["circuit"] = con.info["circuit"]
                alt.info["theorem_H21_bound"] = con.info["theorem_H21_bound"]  # of the circuit as given, as its metrics
                alt.compile_info = replace(alt.compile_info, bound={
                    **alt.compile_info.bound, "token_sum_form": "compiled from the circuit's token-sum form "
                    "(constructions/compiler/token_sums.py): per-token products summed to later tokens by causal "
                    "filters; proved against the circuit as given"})
                return alt
    return con


def _compile_levelled(g, name: str, causal: bool, min_width: int, per_layer: int | None) -> CompiledCircuit:
    specs, kinds, inputs, outputs, T, Cw, md, placed = plan(g, causal, min_width, per_layer)
    layers = [_emit(sp, T, Cw, causal) for sp in specs]
    m = C.metrics(g, validated=True)
    target = "baseconv-causal" if causal else "baseconv"
    info = {
        "circuit": m,
        "compiled": CompileInfo(
            "sequence", target, layers=len(layers), tokens=T, state_width=Cw, params=param_counts(layers), plan=kinds,
            multiplicative_depth=md, input_layout=placed, outputs=dict(sorted(outputs.items())),
            bound=_levelled_bound(g, md, T, per_layer, min_width)),
        "theorem_H21_bound": theorem_h21(m, h21_d(g)),
    }
    conv = "causal (linear) convolution" if causal else "circular convolution"
    return compiled(g, name, (T, Cw), layers, inputs, outputs, info,
                    reference="seed 000 Thm. D.30 / seed 003 Thm. H.21 (levelled; App. D.2.1 LINEAR, MULTIPLY; "
                              "seed 003 Lemma H.7)",
                    notes=f"placed circuit on {T} tokens, {conv}: product and route layers ({', '.join(kinds)})")
