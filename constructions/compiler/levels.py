"""The level-parallel scheme of the budgeted compile (``baseconv``, ``C >= LEVEL_MIN``): the theorems'
``O(Delta log w)`` with explicit constants (seed 000 Thm. D.30 / seed 003 Thm. H.21; the scheme and
its bound are stated in :mod:`.budget`'s docstring).  Benes routes of masked shifts (:mod:`.benes`,
seed 003 Lemmas H.7-H.8), copy and sum trees, one product layer per level (seed 000 App. D.2.1
MULTIPLY); :func:`plan_levels` returns the layers as :class:`.routing.LayerSpec`."""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from .bounds import formula
from .linearise import CONST, last_uses, linearise, needed
from .place import grid, grid_channels
from .routing import LayerSpec

#: the least budget of the level-parallel scheme: the value channel carried (1 inner channel), one
#: work channel routed through a Benes stage (3) and the other work channel carried (1)
LEVEL_MIN = 5
#: from this budget both work channels are routed in the same layers (1 + 3 + 3 inner channels)
LEVEL_PARALLEL = 7
ONE = Fraction(1)
#: circuits of at most this many products are also compiled one product at a time (cheap), and the
#: fewer layers kept
SMALL = 64


def _pow2(n: int) -> int:
    return 1 << max(0, (max(1, n) - 1).bit_length())


def _log2c(n: int) -> int:
    return max(0, (max(1, n) - 1).bit_length())


def route_layers(pairs: dict, final: dict, src: int, X: int) -> list:
    """Move-lists (one per layer) routing the values at tokens ``pairs`` keys (channel ``src``) to
    tokens ``pairs`` values (channel ``X``) through a Benes network on the least ``2^k`` tokens
    holding both, each arriving value scaled by ``final[dest]`` in the last layer.  Only the
    routed values are kept by the masks (everything else is zeroed); a stage in which no routed
    value moves is skipped (at most ``2k - 1`` layers, at least one)."""
    from .benes import benes_stages, complete

    n = _pow2(max(max(pairs), max(pairs.values())) + 1)
    stages = benes_stages(complete(pairs, n))
    pos = np.array(sorted(pairs), dtype=np.int64)
    out = []
    for j, sw in stages:
        moved = sw[pos]
        if not moved.any():
            continue
        new = pos ^ (moved.astype(np.int64) << j)
        groups = {0: {}, -(1 << j): {}, 1 << j: {}}
        for q, m in zip(new.tolist(), moved.tolist()):
            lag = 0 if not m else (-(1 << j) if not (q >> j) & 1 else 1 << j)  # reads q + 2^j / q - 2^j
            groups[lag][q] = ONE
        out.append([(src if not out else X, X, lag, g) for lag, g in groups.items() if g])
        pos = new
    assert sorted(pos.tolist()) == sorted(pairs.values())
    if not out:
        out.append([(src, X, 0, {q: ONE for q in pos.tolist()})])
    last = []
    for ch, x, lag, g in out[-1]:
        g = {q: final[q] for q in g if final.get(q)}
        if g:
            last.append((ch, x, lag, g))
    out[-1] = last
    return out


def _sum_tree(forms: list, X: int) -> list:
    """The halving tree summing each form's block ``[e - |f| + 1, e]`` of channel ``X`` into ``e``:
    layer ``j`` adds offset ``q + 2^j`` into ``q`` for ``q`` a multiple of ``2^(j+1)`` and zeroes the
    rest; ``ceil(log2 max |f|)`` layers."""
    out = []
    for j in range(_log2c(max(len(f) for _, f in forms))):
        keep, add = {}, {}
        for e, f in forms:
            for q in range(0, len(f), 1 << (j + 1)):
                keep[e - q] = ONE
                if q + (1 << j) < len(f):
                    add[e - q] = ONE
        out.append([(X, X, 0, keep)] + ([(X, X, 1 << j, add)] if add else []))
    return out


def _gather_sum(forms: list, tok: dict, src: int, X: int):
    """Move-lists writing ``sum coef * atom`` of each form ``(e, {atom: coef})`` (no constants) at
    token ``e`` of channel ``X``, the atoms read from channel ``src`` at tokens ``tok``; every other
    token of ``X`` zero.  Four phases (seed 003 Lemmas H.7-H.8): a Benes route of each distinct
    atom to the first token of its copy run; a doubling tree of copies (``ceil(log2 copies)``
    layers: run offsets ``[2^j, 2^(j+1))`` read offset ``- 2^j``); a Benes route of the copies to
    the forms' blocks (``[e - |f| + 1, e]``), scaled by the coefficients; a halving tree of sums
    towards ``e`` (``ceil(log2 |f|)`` layers).  Returns (move-lists, the largest token used)."""
    by_src: dict = {}
    for e, f in forms:
        for q, (a, c) in enumerate(f.items()):
            by_src.setdefault(a, []).append((e - q, c))
    srcs = sorted(by_src, key=lambda a: tok[a])
    start, order, pos = {}, [], 0
    for a in srcs:
        start[a] = pos
        order += by_src[a]
        pos += len(by_src[a])
    if max(len(v) for v in by_src.values()) == 1:  # no copies: the two routes compose into one
        layers = route_layers({tok[a]: by_src[a][0][0] for a in srcs}, {d: c for d, c in order}, src, X)
        return layers + _sum_tree(forms, X), max(
            _pow2(max(max(tok[a] for a in srcs), max(d for d, _ in order)) + 1) - 1, 0)
    layers = route_layers({tok[a]: start[a] for a in srcs}, {start[a]: ONE for a in srcs}, src, X)
    for j in range(_log2c(max(len(v) for v in by_src.values()))):
        keep, copy = {}, {}
        for a in srcs:
            m, s0 = len(by_src[a]), start[a]
            keep.update({s0 + o: ONE for o in range(min(1 << j, m))})
            copy.update({s0 + o: ONE for o in range(1 << j, min(1 << (j + 1), m))})
        layers.append([(X, X, 0, keep)] + ([(X, X, 1 << j, copy)] if copy else []))
    layers += route_layers({i: d for i, (d, _) in enumerate(order)}, {d: c for d, c in order}, X, X)
    layers += _sum_tree(forms, X)
    top = max([_pow2(max(max(tok[a] for a in srcs), len(order) - 1) + 1) - 1,
               _pow2(max(len(order) - 1, max(d for d, _ in order)) + 1) - 1])
    return layers, top


def level_bound(md: int, K: int, parallel: bool) -> dict:
    """The stated layer bound of the level-parallel scheme on ``2^K >= N'`` tokens."""
    per = 6 * K - 1 if parallel else 12 * K - 3
    return {"layers": md * per + 8 * K - 1, "per_level": per, "K": K,
            "formulas": {"layers": formula(f"md ({'6K - 1' if parallel else '12K - 3'}) + 8K - 1", {"md": md, "K": K},
                                           md * per + 8 * K - 1)},
            "rule": (f"level-parallel (seed 003 Lemmas H.7-H.8 Benes routing, seed 000 App. D.2.1 MULTIPLY): "
                     f"1 flatten layer; per level of multiplicative depth, each work channel "
                     f"({'both in the same layers' if parallel else 'one after the other: budget < 7'}) gets its "
                     f"factors by a Benes route (<= 2K-1), a copy tree (<= K), a Benes route with the coefficients "
                     f"(<= 2K-1), a sum tree (<= K), then 1 product layer: <= {per} = "
                     f"{'6K - 1' if parallel else '12K - 3'}; outputs: the same into one channel, a Benes route to "
                     f"the grid (<= 2K-1) and 1 unflatten layer: <= 8K - 2; layers <= md ({per}) + 8K - 1 with "
                     f"K = max(1, ceil(log2 N')) = {K}, md = {md}")}


class _LevelPlan:
    """The state of :func:`plan_levels` while it lays out its layers: where each live atom sits in
    ``V`` (``tok``), the largest token used (``top``) and the layers so far, each
    ``(kind, moves, b_out, product)``."""

    def __init__(self, g, channels: int):
        self.Tg, self.inputs, self.places = grid(g)
        self.D = grid_channels(g)
        self.V, self.A, self.B = 0, channels - 2, channels - 1
        self.parallel = channels >= LEVEL_PARALLEL
        self.atoms, self.level, self.outputs = linearise(g)
        self.need = needed(self.atoms, self.outputs)
        self.md = max([self.level[a] for a in self.need if self.atoms[a][0] == "mul"], default=0)
        self.last = last_uses(self.atoms, self.level, self.need, self.outputs, self.md + 1)
        self.top = [self.D * self.Tg - 1, self.Tg - 1]
        self.layers: list = []
        self.tok: dict = {}

    def carry_v(self, alive):
        return [(self.V, self.V, 0, {self.tok[a]: ONE for a in alive})] if alive else []

    def flatten(self) -> None:
        """One layer: every input into ``V``, token-major (grid ``(t, c)`` -> token ``c T_g + t``)."""
        flat: dict = {}
        for name, (t, c) in self.inputs.items():
            a = f"in:{name}"
            if a in self.last:
                self.tok[a] = c * self.Tg + t
                flat.setdefault(c, {})[c * self.Tg + t] = ONE
        self.layers.append(("flatten", [(c, self.V, c * self.Tg, m) for c, m in sorted(flat.items())], {}, None))

    def _ends(self, prods, occ) -> dict:
        """Each product's token: the end of its factor block, past the tokens still occupied."""
        cursor, ends = 0, {}
        for p in prods:
            b = max(sum(1 for a in f if a != CONST) for f in self.atoms[p][1:])
            e = cursor + b - 1
            while e in occ:
                e += 1
            ends[p], cursor = e, e + 1
        return ends

    def _route(self, lv: int, sides, consts, dests, alive) -> None:
        """The route layers of level ``lv``: both work channels in the same layers (``parallel``) or
        ``A`` then ``B``, the factors' constants added in each side's last layer."""
        A, B = self.A, self.B
        if self.parallel:
            for i in range(max(len(s) for s in sides)):
                mv, bo = self.carry_v(alive), {}
                for s, (X, cs, ds) in enumerate(zip((A, B), consts, dests)):
                    ls = sides[s]
                    if i < len(ls):
                        mv += ls[i]
                        if i == len(ls) - 1:
                            bo.update(cs)
                    else:
                        mv.append((X, X, 0, ds))
                self.layers.append((f"route (level {lv})", mv, bo, None))
            return
        for i, mvs in enumerate(sides[0]):
            self.layers.append((f"route A (level {lv})", self.carry_v(alive) + mvs,
                                consts[0] if i == len(sides[0]) - 1 else {}, None))
        for i, mvs in enumerate(sides[1]):
            self.layers.append((f"route B (level {lv})", self.carry_v(alive) + [(A, A, 0, dests[0])] + mvs,
                                consts[1] if i == len(sides[1]) - 1 else {}, None))

    def add_level(self, lv: int) -> None:
        """Level ``lv``: each work channel gets its factor forms (:func:`_gather_sum`), then one
        product layer writes every product of the level into ``V``."""
        atoms, tok = self.atoms, self.tok
        prods = sorted((a for a in self.need if atoms[a][0] == "mul" and self.level[a] == lv), key=lambda a: int(a[1:]))
        after = {a for a in tok if self.last[a] > lv}
        ends = self._ends(prods, {tok[a] for a in after})
        sides, consts = [], []
        for X, i in ((self.A, 1), (self.B, 2)):
            forms = [(ends[p], {a: v for a, v in atoms[p][i].items() if a != CONST}) for p in prods]
            ls, t_top = _gather_sum(forms, tok, self.V, X)
            self.top.append(t_top)
            sides.append(ls)
            consts.append({(ends[p], X): atoms[p][i][CONST] for p in prods if atoms[p][i].get(CONST)})
        self._route(lv, sides, consts, [{ends[p]: ONE for p in prods}] * 2, set(tok))
        for a in [a for a in tok if a not in after]:
            del tok[a]
        self.layers.append((f"product (level {lv}: {len(prods)})", self.carry_v(after), {}, (self.A, self.B, self.V)))
        for p in prods:
            tok[p] = ends[p]
            self.top.append(ends[p])

    def add_outputs(self) -> dict:
        """The outputs summed into ``A`` at tokens ``z`` (``c T_g + t`` for a grid place), a route to
        ``z`` where their blocks do not end there, and one unflatten layer: their slots."""
        A, Tg, outputs, places = self.A, self.Tg, self.outputs, self.places
        slots, z, bo = {}, {}, {}
        extra = self.D * Tg
        for name in sorted(outputs):
            place = places.get(name)
            if place is None:
                z[name], slots[name] = extra, (extra, A)
                extra += 1
            else:
                z[name], slots[name] = place[1] * Tg + place[0], tuple(place)
            if outputs[name].get(CONST):
                bo[slots[name]] = outputs[name][CONST]
        routed = {n: {a: v for a, v in f.items() if a != CONST} for n, f in outputs.items()}
        routed = {n: f for n, f in routed.items() if f}
        final_moves = self._route_outputs(routed, z, slots) if routed else []
        self.top.append(extra - 1)
        self.layers.append(("unflatten (outputs)", final_moves, bo, None))
        return slots

    def _route_outputs(self, routed, z, slots) -> list:
        A, Tg = self.A, self.Tg
        spans = sorted((z[n] - len(f) + 1, z[n]) for n, f in routed.items())
        fits = spans[0][0] >= 0 and all(spans[i][1] < spans[i + 1][0] for i in range(len(spans) - 1))
        if fits:
            ends = {n: z[n] for n in routed}
        else:
            ends, cursor = {}, 0
            for n in sorted(routed):
                ends[n] = cursor + len(routed[n]) - 1
                cursor = ends[n] + 1
        ls, t_top = _gather_sum([(ends[n], routed[n]) for n in sorted(routed)], self.tok, self.V, A)
        self.top.append(t_top)
        if not fits:
            ls += route_layers({ends[n]: z[n] for n in routed}, {z[n]: ONE for n in routed}, A, A)
            self.top.append(_pow2(max(max(ends.values()), max(z.values())) + 1) - 1)
        for mvs in ls:
            self.layers.append(("route (outputs)", mvs, {}, None))
        by_c: dict = {}
        for n in routed:
            t, c = slots[n]
            if self.places.get(n) is None:  # kept where it is: channel A, one inner channel for them all
                by_c.setdefault("keep", {})[t] = ONE
            else:
                by_c.setdefault(c, {})[t] = ONE
        keep = by_c.pop("keep", None)
        return [(A, c, -c * Tg, m) for c, m in sorted(by_c.items())] + ([(A, A, 0, keep)] if keep else [])


def _specs(layers: list, T: int, channels: int) -> list:
    """The :class:`.routing.LayerSpec` of each planned layer: a move ``(src, dst, lag, mask)`` is one
    inner channel (``W_in = e_src``, tap ``lag``, ``B_gate`` the mask, ``W_out = e_dst``), a product
    one more (``W_gate = e_A``, ``W_in = e_B``)."""
    specs = []
    for kind, moves, b_out, prod in layers:
        sp = LayerSpec(kind)
        for src, dst, lag, m in moves:
            k = sp.new_inner()
            sp.W_in[(src, k)] = sp.h[(lag % T, k)] = sp.W_out[(k, dst)] = ONE
            for t, v in m.items():
                assert 0 <= t < T and 0 <= t - lag < T, (kind, t, lag, T)
                sp.b_gate[(t, k)] = v
        if prod is not None:
            k = sp.new_inner()
            sp.W_gate[(prod[0], k)] = sp.W_in[(prod[1], k)] = sp.h[(0, k)] = sp.W_out[(k, prod[2])] = ONE
        sp.b_out.update(b_out)
        assert sp.inner <= channels, (kind, sp.inner, channels)
        specs.append(sp)
    return specs


def plan_levels(g, channels: int):
    """The level-parallel plan of ``g`` (baseconv, ``channels >= LEVEL_MIN``): (LayerSpecs, tokens,
    inputs, output slots, bound).  Channels: ``V = 0`` holds every value (token-major), the work
    channels ``A = channels - 2`` and ``B = channels - 1`` the factors; the grid's channels only at
    the first (flatten) and last (unflatten) layer."""
    pl = _LevelPlan(g, channels)
    pl.flatten()
    for lv in range(1, pl.md + 1):
        pl.add_level(lv)
    slots = pl.add_outputs()
    T = max(pl.top) + 1
    specs = _specs(pl.layers, T, channels)
    K = max(1, _log2c(T))  # one token (K = 0) still spends its flatten, product and unflatten layers
    bound = level_bound(pl.md, K, pl.parallel)
    assert len(specs) <= bound["layers"], (len(specs), bound)
    return specs, T, pl.inputs, slots, bound
