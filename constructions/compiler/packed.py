"""A levelled compile that packs under a channel budget (issue 43 item 1): ``baseconv`` /
``baseconv-causal`` on the placed grid's own tokens, every state and every layer's inner channels at
most ``C``, and every channel the budget leaves spent on products.

The default levelled compile (:mod:`.sequence`) gives each product of a level its own slot and keeps
it there until its readers run: its width is the carried channels plus the most products a level puts
on one token.  This compile trades those channels for layers, one layer at a time:

* **carries**: each channel holding a value still read later is one inner channel (``W_in = W_out =
  e_c``, filter ``delta_0``, ``B_gate`` the 0/1 mask of its live tokens: dead values and junk are
  zeroed for free);
* **products**: the other ``C - carries`` inner channels each form products (seed 000 App. D.2.1
  MULTIPLY: gate side a channel mix at the product's token, conv side a channel mix there or one
  channel read at other tokens through the filter's taps), one inner channel for products at
  different tokens with the same gate mix and conv channel, the ready products (factors in the state)
  in level order;
* **accumulation**: two values whose readers read them in the same ratio (every later product factor
  and output reads ``b`` as ``lam`` times ``a``) are one value ``a + lam b`` to every reader, so they
  share a slot: a product is added (``W_out = lam``) into the slot of such a value at its token, or of
  another product of the same layer; a value at another token (or in another channel) is added into
  such a value's slot through the filter's taps (seed 003 Lemma H.7), in the carry of the channel
  where both sit (no extra inner channel), else in an inner channel of its own where the budget
  leaves one.  A GD step's ``sum_j A_ij x_j`` builds up in one slot per token, and each
  ``-eta sum_i A_ij r_i`` is added into ``x_j``'s slot, the output's place;
* a **final route** (:func:`.routing.route`) where the outputs are not in place at the end, if its
  inner channels fit.

A product whose factors cannot be read in one layer (a gate form over several tokens, a conv form over
several channels at other tokens), a causal product that would sit before a token it reads, a layer in
which no ready product fits, or a final route wider than ``C`` is a :class:`.routing.CompileError`:
:mod:`.budget_search` then keeps the other compiles it tries.

Layers (plain mode): each layer before the last product forms at least one product, each layer after
it merges at least one pair of values, and the outputs take at most one route layer: ``layers <= P +
(I + P) + 1`` for ``P`` products and ``I`` inputs (:func:`packed_bound`; in practice far fewer: GD step
20 x 5 at 12 channels, 11 layers).

**Carries shared at disjoint tokens** (``fuse=True, relocate=True``; :mod:`.budget_search` tries both
modes at every budget).  A carry is ``B_gate`` times one channel read through the filter, and
``B_gate`` is per token, so one inner channel serves two uses at disjoint tokens:

* *relocation*: a channel ``c2`` whose kept values sit only at tokens where a carried channel ``c``
  holds nothing in the layer's input (and the other way round) moves into ``c``'s carry (``W_in = e_c +
  e_c2``, filter ``delta_0``): one carry less;
* *fusion*: a product group whose conv side reads channel ``d`` through the taps and writes into ``d``
  shares ``d``'s carry where its tokens are not the carry's, its gate form reads nothing at the carry's
  tokens (there ``B_gate = 1 / (lam h[0])`` alone is the gate) and the taps read nothing else there;
* *moves*: a product group whose gate reads channel ``g`` also moves a kept value of ``g`` into its own
  channel ``d`` at a token that is not a product's (the gate reads that one value there, the conv side
  reads nothing, ``B_conv = 1 / (lam v)``), where that value's readers read it in the products' ratio
  (it is merged with them later, in ``d``'s carry) and it is not an output already at its place;
* a merge takes the base slot whose group costs the fewest inner channels (one per other channel of the
  group, less the channels the group empties: their carries go).

The mode is level-synchronous: product layer ``k`` forms every product of level ``k`` (they are all
ready, their factors reading lower levels only; a level that does not fit one layer is a
:class:`.routing.CompileError`), then at most one merge layer and one route layer: ``layers <= md + 2``
(``md``: the multiplicative depth of the products the outputs need).  GD step 20 x 5: 3 layers on the
grid's own 11 channels (x_j moves into the carry of A's channel j in layer 1, and back to its place with
the products A_ij r_i in layer 2, whose sums over i layer 3 adds into it).
"""
from __future__ import annotations

from fractions import Fraction

import circuits as C

from .bounds import budget_width, formula
from .circuit import CompiledCircuit, compiled, h21_d, param_counts, theorem_h21
from .info import CompileInfo
from .linearise import CONST, linearise, needed
from .place import grid_channels
from .routing import CompileError, LayerSpec, route, shift
from .sequence import conv_side

JUNK = "junk"
#: a layer stops taking products after this many inner channels in a row did not fit
MISSES = 16


class LayerLimit(CompileError):
    """The packed compile passed the ``limit`` of layers it was given (:mod:`.budget_search` passes the
    layers of the best compile in hand: one that passes them cannot be chosen)."""


def _key(p: str):
    return (0, int(p[1:])) if p[:1] == "p" and p[1:].isdigit() else (1, str(p))


def _sig(prof: dict):
    """The readers' ratios of a value (equal for values every reader reads in the same ratio)."""
    if not prof:
        return None
    k0 = min(prof, key=str)
    return tuple(sorted((str(k), v / prof[k0]) for k, v in prof.items()))


class _Packer:
    def __init__(self, T, inputs, places, atoms, level, outputs, causal, channels, fuse=False, relocate=False,
                 limit=None):
        self.T, self.causal, self.C = T, causal, channels
        self.fuse, self.relocate, self.limit = fuse, relocate, limit
        self._full, self._sigs = None, {}  # the readers' index of the current state and its ratios (cache)
        self._by_channel = None  # conv_side's channel index of the current state (cache)
        self.occ: dict = {}
        self.slot: dict = {}
        for n, (t, c) in inputs.items():
            self.occ[(t, c)] = f"in:{n}"
            self.slot[f"in:{n}"] = (t, c)
        need = needed(atoms, outputs)
        self.pending = {p: [dict(atoms[p][1]), dict(atoms[p][2])] for p in need if atoms[p][0] == "mul"}
        self.level = level
        self.outputs = {n: dict(f) for n, f in outputs.items()}
        self.places = places
        self.specs: list = []
        self.kinds: list = []
        self.inner_max = 0
        self.width = 1 + max((c for _, c in inputs.values()), default=0)
        self.count = 0  # unread inputs stay in the state until a layer does not carry them

    # -- readers ------------------------------------------------------------------------------
    def _after(self, chosen) -> tuple[dict, set]:
        """``_index(skip=chosen)`` from the full index (kept until the state changes): only the atoms the
        chosen products read change; (index, those atoms)."""
        if self._full is None:
            self._full, self._sigs = self._index(), {}
        skip = set(chosen)
        touched = {a for p in skip for f in self.pending[p] for a in f if a != CONST}
        after = dict(self._full)
        for a in touched:
            if a in after:
                rest = {k: v for k, v in after[a].items() if k[0] not in skip}
                if rest:
                    after[a] = rest
                else:
                    del after[a]
        return after, touched

    def _sig_of(self, a, prof: dict, touched: set):
        if a in touched:
            return _sig(prof.get(a, {}))
        if a not in self._sigs:
            self._sigs[a] = _sig(self._full.get(a, {}))
        return self._sigs[a]

    def _index(self, skip=()):
        """atom -> {reader key: coefficient} over the pending products not in ``skip`` and the outputs."""
        idx: dict = {}
        for p, (fa, fb) in self.pending.items():
            if p in skip:
                continue
            for side, f in ((0, fa), (1, fb)):
                for a, v in f.items():
                    if a != CONST and v != 0:
                        idx.setdefault(a, {})[(p, side)] = v
        for n, f in self.outputs.items():
            for a, v in f.items():
                if a != CONST and v != 0:
                    idx.setdefault(a, {})[("out", n)] = v
        return idx

    @staticmethod
    def _ratio(pa: dict, pb: dict):
        """lam with pb == lam * pa (same readers), or None."""
        if not pa or pa.keys() != pb.keys():
            return None
        k0 = next(iter(pa))
        lam = pb[k0] / pa[k0]
        return lam if all(pb[k] == lam * pa[k] for k in pa) else None

    # -- reading a product's factors ---------------------------------------------------------
    def _token_of(self, form):
        toks = {self.slot[a][0] for a in form if a != CONST}
        return toks.pop() if len(toks) == 1 else None

    def _conv(self, form, t):
        if self._by_channel is None:  # channel -> its occupied tokens in the state's order, per state
            self._by_channel = {}
            for (t2, c) in self.occ:
                self._by_channel.setdefault(c, []).append(t2)
        return conv_side(form, t, self.slot, self.occ, self.T, self.causal, self._by_channel)

    def _read(self, p):
        """(token, gate, conv key, taps, gate const, conv const) of product ``p``, or None."""
        fa, fb = self.pending[p]
        for G, V in ((fa, fb), (fb, fa)):
            t = self._token_of(G)
            if t is None:
                continue
            conv = self._conv(V, t)
            if conv is None:
                continue
            gate = tuple(sorted((self.slot[a][1], v) for a, v in G.items() if a != CONST))
            return t, gate, conv[0], conv[1], G.get(CONST, Fraction(0)), V.get(CONST, Fraction(0))
        return None

    def _support(self, gate, conv, taps, t) -> bool:
        """Whether an inner channel (gate mix, conv side) may be nonzero at token ``t`` (junk)."""
        if not any((t, c) in self.occ for c, _ in gate):
            return False
        if conv[0] == "mix":
            return any((t, c) in self.occ for c, _ in conv[1])
        for s, v in taps.items():
            if v == 0:
                continue
            t2 = t - s if self.causal else (t - s) % self.T
            if t2 >= 0 and (t2, conv[1]) in self.occ:
                return True
        return False

    def _fusable(self, gate, conv, taps, members, d, live) -> bool:
        """Whether a product group writing into channel ``d`` can share the carry of ``d`` (whose live
        tokens after the layer are ``live``): its conv side reads channel ``d`` through the taps, its
        tokens are not the carry's, its gate form reads nothing at the carry's tokens (there ``B_gate``
        alone makes the gate, the carry's scale), and the taps read nothing but the carried value there."""
        if not self.fuse or conv[0] != "chan" or conv[1] != d or not live or set(members) & set(live):
            return False
        if taps.get(0, Fraction(1)) == 0:
            return False
        for t in live:
            if any((t, c) in self.occ for c, _ in gate):
                return False
            for s, v in taps.items():
                if s == 0 or v == 0:
                    continue
                t2 = t - s if self.causal else (t - s) % self.T
                if t2 >= 0 and (t2, d) in self.occ:
                    return False
        return True

    def _relocations(self, new_occ: dict) -> dict:
        """{channel c2: channel c}: the values kept in ``c2`` move into ``c``, whose kept values sit at other
        tokens, through ``c``'s carry (``W_in = e_c + e_c2``, filter ``delta_0``): at every token the carry
        keeps, the other channel holds nothing in the layer's input (so it reads one value)."""
        occ_t: dict = {}
        for (t, c) in self.occ:
            occ_t.setdefault(c, set()).add(t)
        live: dict = {}
        for (t, c) in new_occ:
            live.setdefault(c, set()).add(t)
        reloc: dict = {}
        for c2 in sorted(live):  # in channel order (a grid's columns keep their order)
            if c2 in reloc.values():
                continue
            for c in sorted(live):
                if c >= c2 or c in reloc or c in reloc.values():
                    continue
                if not (live[c2] & occ_t.get(c, set())) and not (live[c] & occ_t.get(c2, set())):
                    reloc[c2] = c
                    break
        return reloc

    def _moves(self, gate, conv, taps, members, d, lam, new_occ, merged, moved, prof, touched) -> dict:
        """{token t: (value, its channel g, gate coefficient v)}: kept values the product group's inner
        channel also moves into its channel ``d`` (``B_conv[t] = 1 / (lam v)``): at ``t`` (not a product's
        token) the gate reads that one value (its other channels empty there), the conv side reads nothing,
        ``(t, d)`` is free, and the value's readers read it in the products' ratio (so it is merged with them
        later, in ``d``), and it is not an output already at its place."""
        msig = {self._sig_of(p, prof, touched) for p, _, _ in members.values()}
        if len(msig) != 1 or lam == 0:
            return {}
        ms = msig.pop()
        if ms is None:
            return {}
        places = {tuple(p) for p in self.places.values() if p is not None}
        out = {}
        for g, v in gate:
            for a, (t, c) in self.slot.items():
                if c != g or t in members or t in out or new_occ.get((t, g)) != a or (t, g) in places:
                    continue
                if (t, d) in new_occ or (t, d) in merged or (t, d) in moved:
                    continue
                if any((t, c2) in self.occ for c2, _ in gate if c2 != g):
                    continue
                if conv[0] == "mix":
                    if any((t, c2) in self.occ for c2, _ in conv[1]):
                        continue
                elif any(w != 0 and (t - s if self.causal else (t - s) % self.T) >= 0
                         and ((t - s if self.causal else (t - s) % self.T), conv[1]) in self.occ
                         for s, w in taps.items()):
                    continue
                if self._sig_of(a, prof, touched) != ms:
                    continue
                out[t] = (a, g, v)
        return out

    # -- one layer ----------------------------------------------------------------------------
    def _groups(self, chosen: list, reads: dict) -> list:
        groups = []  # [gate, conv, taps, {t: (p, cg, cv)}]
        for p in chosen:
            t, gate, conv, taps, cg, cv = reads[p]
            for gr in groups:
                if gr[0] == gate and gr[1] == conv and t not in gr[3] and \
                        all(gr[2].get(s, v) == v for s, v in taps.items()):
                    gr[2].update(taps)
                    gr[3][t] = (p, cg, cv)
                    break
            else:
                groups.append([gate, conv, dict(taps), {t: (p, cg, cv)}])
        return groups

    def _layer(self, chosen: list, reads: dict, reduce: bool):
        """The layer forming ``chosen`` (and the merges that fit): (spec, new occ, new slot, renames)
        or None where it does not fit the budget."""
        T, causal = self.T, self.causal
        after, touched = self._after(chosen)
        kept = {a for a in self.slot if a in after}
        groups = self._groups(chosen, reads)
        new_occ = {s: a for s, a in self.occ.items() if a in kept}
        reloc = self._relocations(new_occ) if self.relocate else {}
        if reloc:  # a channel's values move into another channel's carry (disjoint tokens): one carry less
            new_occ = {((t, reloc.get(c, c))): a for (t, c), a in new_occ.items()}
        # slot -> [base atom or None, {member atom: lam}] (the value written there is base + sum lam m)
        merged: dict = {}
        prof = dict(after)
        sig_of = {a: self._sig_of(a, prof, touched) for a in set(new_occ.values()) if a != JUNK}
        chan_sigs: dict = {}
        busy_ch = set()
        for (_, c2), a in new_occ.items():
            if a == JUNK:
                continue
            chan_sigs.setdefault(c2, {}).setdefault(sig_of[a], 0)
            chan_sigs[c2][sig_of[a]] += 1
            if any(k[0] != "out" for k in prof.get(a, {})):
                busy_ch.add(c2)
        used_ch = {c2 for (_, c2) in new_occ}
        live_of: dict = {}
        for (t2, c2), a in new_occ.items():
            if a != JUNK:
                live_of.setdefault(c2, []).append(t2)
        fused: set = set()
        moved: set = set()  # slots a product's inner channel writes a moved value into (no carry there)
        dest = []
        for gate, conv, taps, members in groups:
            # the group's W_out coefficient lam and its channel d: each member merges into a value of the
            # same readers' ratio at its token, or takes a free slot
            junk = [t for t in range(T) if t not in members and self._support(gate, conv, taps, t)]
            taps0 = {**taps, 0: taps.get(0, Fraction(1))}
            junk0 = [t for t in range(T) if t not in members and self._support(gate, conv, taps0, t)]
            best = None
            cands = sorted({c for (_, c) in new_occ} | {c for (_, c) in merged} | set(range(self.C)))
            for d in cands:
                if d >= self.C:
                    continue
                fz = d not in fused and d not in reloc.values() and self._fusable(gate, conv, taps, members, d, live_of.get(d, []))
                if fz:
                    fz = not any((t, d) in new_occ or (t, d) in merged for t in junk0 if t not in live_of[d])
                if not fz and any((t, d) in new_occ or (t, d) in merged for t in junk):
                    continue
                lam, ok, score = None, True, 0
                for t, (p, _, _) in members.items():
                    s = (t, d)
                    if s in moved:
                        ok = False
                        break
                    base = new_occ.get(s)
                    if s in merged:
                        ref = merged[s][0] or next(iter(merged[s][1]))
                        r = self._ratio(prof.get(ref, {}), prof.get(p, {}))
                        r = None if r is None else r * (merged[s][1].get(ref, Fraction(1)) if merged[s][0] is None
                                                        else Fraction(1))
                    elif base is not None:
                        r = self._ratio(prof.get(base, {}), prof.get(p, {})) if base != JUNK else None
                    else:
                        r = Fraction(1)
                    if r is None or (lam is not None and r != lam):
                        ok = False
                        break
                    lam = r
                    if s in merged or base is not None:
                        score -= 2  # shares a slot
                if not ok:
                    continue
                # a channel where a value with the same readers' ratio lives at another token: the carry
                # can add the product into it later at no cost
                msigs = {self._sig_of(p, prof, touched) for p, _, _ in members.values()}
                mates = sum(n for sg, n in chan_sigs.get(d, {}).items() if sg is not None and sg in msigs)
                used = d in used_ch or any(c2 == d for (_, c2) in merged)
                # a channel whose values later products still read across tokens is kept clean for those
                # reads (a filter moves a whole channel)
                busy = d in busy_ch
                if fz and lam == 0:
                    if any((t, d) in new_occ or (t, d) in merged for t in junk):
                        continue
                    fz = False
                rank = (0 if fz else 1, score, busy, -mates, 0 if used else 1, -d if used else d)
                if best is None or rank < best[0]:
                    best = (rank, d, lam, fz)
            if best is None:
                return None
            _, d, lam, fz = best
            for t, (p, _, _) in members.items():  # the value at (t, d): its base (if any) + sum lam * product
                merged.setdefault((t, d), [new_occ.get((t, d)), {}])[1][p] = lam
            for t in (junk0 if fz else junk):
                new_occ[(t, d)] = JUNK
            if fz:
                fused.add(d)
            mv = self._moves(gate, conv, taps0 if fz else taps, members, d, lam, new_occ, merged, moved, prof,
                             touched) if self.fuse else {}
            for t, (a, g, _) in mv.items():  # the value rides the product's inner channel into (t, d)
                del new_occ[(t, g)]
                new_occ[(t, d)] = a
                moved.add((t, d))
            dest.append((d, lam, fz, mv))
        # merges of values already in the state (reductions): per destination slot the value base and the
        # values added into it through the taps of the channel they sit in
        red: dict = {}  # (src channel, dst channel) -> {dst token: {src token: coef}}
        gone = set()
        if reduce:
            held = [(s, a) for s, a in new_occ.items() if a != JUNK and s[1] not in reloc.values() and s not in moved]
            sig: dict = {}
            for s, a in held:
                pa = prof.get(a, {})
                if not pa:
                    continue
                k0 = min(pa, key=str)
                norm = tuple(sorted(((str(k), v / pa[k0]) for k, v in pa.items())))
                sig.setdefault(norm, []).append((s, a))
            places = {self.places[n] for n in self.outputs if self.places.get(n) is not None}
            held_in: dict = {}  # channel -> how many values it holds
            for (_, c2), a in new_occ.items():
                held_in[c2] = held_in.get(c2, 0) + 1
            for norm, mem in sig.items():
                if len(mem) < 2:
                    continue
                mem.sort(key=lambda x: (x[0] not in places, -x[0][0] if causal else 0, x[0]))
                if self.fuse:  # the base that costs the fewest inner channels: one per other channel of the
                    # group, less the channels the group empties (their carries go)
                    chans = {s[1] for s, _ in mem}
                    whole = {c for c in chans if held_in[c] == sum(1 for s, _ in mem if s[1] == c)}
                    mem.sort(key=lambda x: len(chans - {x[0][1]}) - len(whole - {x[0][1]}))
                (sb, base) = mem[0]
                for s, a in mem[1:]:
                    if s in merged or shift(sb[0], s[0], T, causal) is None or (s[1] == sb[1] and s[1] in fused):
                        continue
                    lam = self._ratio(prof[base], prof[a])
                    red.setdefault((s[1], sb[1]), {}).setdefault(sb[0], {})[s[0]] = lam
                    gone.add(a)
        spec = LayerSpec("product" if chosen else "merge")
        # carries (and the merges that ride in them)
        carry: dict = {}
        for (t, c), a in new_occ.items():
            if a != JUNK and a not in gone and (t, c) not in moved:
                carry.setdefault(c, []).append(t)
        inner = len(carry) + len(groups) - len(fused & set(carry))
        extra = []
        for (cs, cd), rows in sorted(red.items()):
            taps, ok = ({0: Fraction(1)} if cs == cd else {}), True
            mask = carry.get(cd, []) if cs == cd else sorted(rows)
            for td, srcs in rows.items():
                for ts, v in srcs.items():
                    sft = shift(td, ts, T, causal)
                    if taps.get(sft, v) != v:
                        ok = False
                    taps[sft] = v
            if ok:  # every masked row reads only what it should through every tap
                for td in mask:
                    for sft, v in taps.items():
                        t2 = td - sft if causal else (td - sft) % T
                        if t2 < 0 or (t2, cs) not in self.occ:
                            continue
                        want = Fraction(1) if (cs == cd and sft == 0) else rows.get(td, {}).get(t2)
                        if want != v:
                            ok = False
            if not ok or (cs != cd and inner + len(extra) + 1 > self.C):
                for td, srcs in rows.items():
                    for ts in srcs:
                        gone.discard(self.occ[(ts, cs)])
                continue
            extra.append((cs, cd, taps, mask))
        # a reduction dropped above keeps its source carried
        carry = {}
        for (t, c), a in new_occ.items():
            if a != JUNK and a not in gone and (t, c) not in moved:
                carry.setdefault(c, []).append(t)
        folded = {cd: (taps, mask) for cs, cd, taps, mask in extra if cs == cd}
        for cd, (taps, _) in folded.items():  # the carry's final mask reads only what it should
            for td in carry.get(cd, []):
                for sft, v in taps.items():
                    t2 = td - sft if causal else (td - sft) % T
                    if t2 >= 0 and (t2, cd) in self.occ and v != (Fraction(1) if sft == 0 else
                                                                  red.get((cd, cd), {}).get(td, {}).get(t2)):
                        return None
        for c, toks in sorted(carry.items()):
            if c in fused:  # rides in the product group's inner channel below
                continue
            k = spec.new_inner()
            spec.W_in[(c, k)] = spec.W_out[(k, c)] = Fraction(1)
            for c2 in (c2 for c2, c3 in reloc.items() if c3 == c):
                spec.W_in[(c2, k)] = Fraction(1)
            taps = folded.get(c, ({0: Fraction(1)}, None))[0]
            for s, v in taps.items():
                spec.h[(s, k)] = v
            for t in toks:
                spec.b_gate[(t, k)] = Fraction(1)
        for cs, cd, taps, mask in extra:
            if cs == cd:
                if cd not in carry:
                    return None
                continue
            k = spec.new_inner()
            spec.W_in[(cs, k)] = spec.W_out[(k, cd)] = Fraction(1)
            for s, v in taps.items():
                spec.h[(s, k)] = v
            for t in mask:
                spec.b_gate[(t, k)] = Fraction(1)
        for (gate, conv, taps, members), (d, lam, fz, mv) in zip(groups, dest):
            k = spec.new_inner()
            for c, v in gate:
                spec.W_gate[(c, k)] = v
            if conv[0] == "mix":
                for c, v in conv[1]:
                    spec.W_in[(c, k)] = v
            else:
                spec.W_in[(conv[1], k)] = Fraction(1)
            for s, v in taps.items():
                if v != 0:
                    spec.h[(s, k)] = v
            for t, (p, cg, cv) in members.items():
                if cg != 0:
                    spec.b_gate[(t, k)] = cg
                if cv != 0:
                    spec.b_conv[(t, k)] = cv
            spec.W_out[(k, d)] = lam
            for t, (_, _, v) in mv.items():  # gate v * value, conv B_conv alone: the value, moved into d
                spec.b_conv[(t, k)] = 1 / (lam * v)
            if fz:  # the carry of d at its live tokens: gate B_gate, conv the carried value through tap 0
                t0 = taps.get(0, Fraction(1))
                spec.h[(0, k)] = t0
                for t in carry.get(d, []):
                    spec.b_gate[(t, k)] = 1 / (lam * t0)
        if spec.inner > self.C:
            return None
        # the new state: each written slot holds one value named for what it sums
        renames = {}  # old atom -> (new atom, scale): old = scale-free part; readers' F[new] = F[base]/1
        occ2 = {s: a for s, a in new_occ.items() if a == JUNK or a not in gone}
        adds: dict = {}  # slot -> {atom: coefficient} of the value there in terms of old atoms and products
        for s, (base, ms) in merged.items():
            adds[s] = ({base: Fraction(1)} if base is not None else {}) | dict(ms)
        for (cs, cd), rows in red.items():
            for td, srcs in rows.items():
                for ts, v in srcs.items():
                    a = self.occ[(ts, cs)]
                    if a in gone:
                        s = (td, cd)
                        adds.setdefault(s, {occ2[s]: Fraction(1)})[a] = v
        for s, parts in adds.items():
            if len(parts) == 1 and next(iter(parts.values())) == 1:
                occ2[s] = next(iter(parts))
                continue
            self.count += 1
            m = f"m{self.count}"
            occ2[s] = m
            renames[m] = parts
        return spec, occ2, renames

    def _apply(self, spec, occ2, renames, chosen) -> None:
        self._full = None
        for p in chosen:
            del self.pending[p]
        # a merged value m = sum lam_a a: every reader reads it as F[a] / lam_a (the same for each a)
        for m, parts in renames.items():
            a0, l0 = next(iter(parts.items()))
            for fs in list(self.pending.values()) + [self.outputs]:
                forms = fs if isinstance(fs, list) else list(fs.values())
                for f in forms:
                    hit = [a for a in parts if a in f]
                    if not hit:
                        continue
                    v = f[hit[0]] / parts[hit[0]]
                    for a in hit:
                        assert f[a] == v * parts[a], (m, a)
                        del f[a]
                    assert len(hit) == len(parts), (m, hit, parts)
                    f[m] = v
        self.occ, self._by_channel = occ2, None
        self.slot = {a: s for s, a in occ2.items() if a != JUNK}
        self.specs.append(spec)
        self.kinds.append(spec.kind)
        if self.limit is not None and len(self.specs) > self.limit:
            raise LayerLimit(f"the packed compile passes {self.limit} layers")
        self.inner_max = max(self.inner_max, spec.inner)
        self.width = max([self.width] + [c + 1 for _, c in occ2])

    def run(self):
        while self.pending:
            if self.limit is not None and len(self.specs) >= self.limit:  # a product layer still to come
                raise LayerLimit(f"the packed compile passes {self.limit} layers")
            reads = {}
            ready = []
            for p in sorted(self.pending, key=lambda p: (self.level.get(p, 0), _key(p))):
                fs = self.pending[p]
                if all(a == CONST or a in self.slot for f in fs for a in f):
                    r = self._read(p)
                    if r is None:
                        raise CompileError(f"product {p}: its factors are not readable in one layer")
                    reads[p] = r
                    ready.append(p)
            if not ready:
                raise CompileError("no product is ready")
            # products whose value can later be added into a value of the same readers' ratio through the
            # carry of that value's channel (its slot at the product's token free) go first
            idx = self._index()
            sigs: dict = {}
            for a, (t, c) in self.slot.items():
                sigs.setdefault(_sig(idx.get(a, {})), []).append(c)

            def mate(p):
                t = reads[p][0]
                return 0 if any((t, c) not in self.occ for c in sigs.get(_sig(idx.get(p, {})), [])) else 1

            ready.sort(key=lambda p: (self.level.get(p, 0), mate(p), _key(p)))
            chosen, misses = [], 0
            grs = self._groups(ready, reads)
            if self.fuse:  # level-synchronous: every ready product (the lowest pending level) in this layer
                if self._layer(ready, reads, reduce=False) is None:
                    raise CompileError(f"level {self.level.get(ready[0], 0)}'s products do not fit one layer of "
                                       f"{self.C} channels")
                chosen, grs = list(ready), []
            for gr in grs:  # whole inner channels, in the ready order
                trial = chosen + [p for p, _, _ in gr[3].values()]
                if self._layer(trial, reads, reduce=False) is not None:
                    chosen, misses = trial, 0
                else:
                    misses += 1
                    if misses >= MISSES:
                        break
            if not chosen:
                raise CompileError(f"no ready product fits a layer of {self.C} channels")
            lay = self._layer(chosen, reads, reduce=True) or self._layer(chosen, reads, reduce=False)
            self._apply(*lay, chosen)
        # merges until nothing merges (level-synchronous: one merge layer at most), then the outputs at
        # their places
        while not (self.fuse and self.kinds[-1:] == ["merge"]):
            lay = self._layer([], {}, reduce=True)
            if lay is None or not lay[2]:
                break
            self._apply(*lay, [])
        slots, used = {}, {p for p in self.places.values() if p is not None}
        for n in sorted(self.outputs):
            if self.places.get(n) is not None:
                slots[n] = tuple(self.places[n])
                continue
            toks = [self.slot[a][0] for a in self.outputs[n] if a != CONST]
            t, c = (max(toks) if toks else 0), 0
            while (t, c) in used:
                c += 1
            used.add((t, c))
            slots[n] = (t, c)
        in_place = all(len(f) == 1 and next(iter(f.values())) == 1 and next(iter(f)) != CONST
                       and self.slot.get(next(iter(f))) == slots[n] for n, f in self.outputs.items()) \
            and len(self.occ) == len(self.outputs)
        if not (self.specs and in_place):
            if self.limit is not None and len(self.specs) >= self.limit:  # the outputs' route still to come
                raise LayerLimit(f"the packed compile passes {self.limit} layers")
            final = {slots[n]: f for n, f in self.outputs.items()}
            spec = route(self.occ, self.slot, final, self.T, self.causal)
            if spec.inner > self.C:
                raise CompileError(f"the outputs' route needs {spec.inner} inner channels, over the budget {self.C}")
            self.specs.append(spec)
            self.kinds.append("route (outputs)")
            self.inner_max = max(self.inner_max, spec.inner)
            self.width = max([self.width] + [c + 1 for _, c in slots.values()])
        return slots


def packed_bound(g, channels: int, fuse: bool = False) -> dict:
    """The stated layer guarantee of :func:`compile_packed` in its mode (module docstring)."""
    atoms, level, outputs = linearise(g)
    need = needed(atoms, outputs)
    P = sum(1 for a in need if atoms[a][0] == "mul")
    I = sum(1 for a in need if atoms[a][0] == "input")  # noqa: E741
    if fuse:
        md = max((level[a] for a in need if atoms[a][0] == "mul"), default=0)
        return {"layers": md + 2, "products": P, "multiplicative_depth": md, "formula": "md + 2",
                "formulas": {"layers": formula("md + 2", {"md": md}, md + 2), "state_width": budget_width(channels)},
                "mode": "level-synchronous, carries shared at disjoint tokens",
                "rule": "product layer k forms every product of level k (all ready: their factors read only "
                        "lower levels; a level that does not fit one layer is refused), so md product layers "
                        "(md: the multiplicative depth of the products the outputs need), then at most one merge "
                        "layer and one route layer for the outputs: layers <= md + 2"}
    return {"layers": 2 * P + I + 1, "products": P, "inputs": I, "formula": "2 P + I + 1", "mode": "plain",
            "formulas": {"layers": formula("2 P + I + 1", {"P": P, "I": I}, 2 * P + I + 1),
                         "state_width": budget_width(channels)},
            "rule": "each layer up to the last product forms at least one product (<= P layers), each later layer "
                    "merges at least two values into one (<= P + I layers), one route layer for the outputs: "
                    "layers <= 2 P + I + 1"}


def _pack(g, causal: bool, channels: int, fuse: bool, relocate: bool, limit: int | None):
    """The packed plan of ``g`` within ``channels``: (placement, packer, output slots, state width)."""
    pl = C.placement(g)
    if pl is None:
        raise CompileError("the packed compile needs a placed circuit")
    if channels < grid_channels(g):
        raise CompileError(f"channel budget {channels} is below the grid's {grid_channels(g)} channels")
    atoms, level, outputs = linearise(g)
    pk = _Packer(pl.tokens, dict(pl.inputs), dict(pl.outputs), atoms, level, outputs, causal, channels, fuse, relocate,
                 limit)
    slots = pk.run()
    Cw = max(pk.width, pk.inner_max, grid_channels(g))
    if Cw > channels:
        raise CompileError(f"the packed compile needs {Cw} channels, over the budget {channels}")
    return pl, pk, slots, Cw


def packed_shape(g, causal: bool = False, channels: int = 0, fuse: bool = False, relocate: bool = False,
                 limit: int | None = None) -> tuple[int, int, int]:
    """``(layers, width, tokens)`` of :func:`compile_packed` with the same arguments, planned only (no
    weights built): what :mod:`.budget_search` compares; the same errors."""
    pl, pk, _, Cw = _pack(g, causal, channels, fuse, relocate, limit)
    return len(pk.specs), Cw, pl.tokens


def compile_packed(g, name: str = "circuit", causal: bool = False, channels: int = 0,
                   fuse: bool = False, relocate: bool = False, limit: int | None = None,
                   min_width: int = 1) -> CompiledCircuit:
    """The packed levelled compile of a validated placed circuit within ``channels`` (module
    docstring); a :class:`.routing.CompileError` where it does not fit.  ``min_width``: the state
    padded with zero channels to at least that many (a state shared with other stacks)."""
    pl, pk, slots, Cw = _pack(g, causal, channels, fuse, relocate, limit)
    Cw = max(Cw, min_width)
    T = pl.tokens
    layers = [sp.layer(T, Cw, causal) for sp in pk.specs]
    m = C.metrics(g, validated=True)
    target = "baseconv-causal" if causal else "baseconv"
    bound = packed_bound(g, channels, fuse)
    bound.update({"scheme": "packed levelled", "tokens": T, "state_width": channels, "inner_width": channels,
                  "channel_budget": channels})
    info = {
        "circuit": m,
        "compiled": CompileInfo("budget", target, layers=len(layers), tokens=T, state_width=Cw, grid_tokens=T,
                                channel_budget=channels, inner_width=pk.inner_max, params=param_counts(layers),
                                plan=list(pk.kinds), outputs=dict(sorted(slots.items())), bound=bound),
        "theorem_H21_bound": theorem_h21(m, h21_d(g)),
    }
    conv = "causal (linear) convolution" if causal else "circular convolution"
    return compiled(g, name, (T, Cw), layers, dict(pl.inputs), slots, info,
                    reference="seed 000 Thm. D.30 / seed 003 Thm. H.21 under a channel budget (App. D.2.1 MULTIPLY; "
                              "seed 003 Lemma H.7 masked shifts; values read in the same ratio share a slot)",
                    notes=f"placed circuit on {T} tokens, {conv}, channel budget {channels}, packed levelled scheme")
