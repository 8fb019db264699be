"""Pass: a linear map between two sequence states -> one BaseConv layer (a *route* layer).

A BaseConv layer with the gate side set to a bias only (``W_gate = 0``) is linear in its input
(seed 003 Lemma H.7; seed 000 App. D.2.1 LINEAR): each inner channel ``k`` computes

    y[t, :] += mask_k[t] * sum_s h_k[s] * (u W_in[:, k])[t - s] * W_out[k, :]

a channel mix, a per-channel filter (token moves; circular, or causal: only to later tokens),
a per-token mask (``B_gate``) and a channel mix out, plus the position-dependent constant
``B_out``.  So one layer realises *any* linear map of the state, if it has enough inner
channels; this pass finds few.

Request: each destination slot ``(t, c')`` gets an affine form over the atoms held in source
slots.  For one (source channel ``c``, destination channel ``c'``) pair, destination row ``t``
needs the filter taps ``h[t - t2] = coefficient of the atom at (t2, c)`` for *every* occupied
slot ``(t2, c)``, zero for the atoms (and junk) it must not read.  Rows whose tap requirements
agree up to a scale share one inner channel (the mask carries the scale): greedy first fit, in
row order; where a pair's rows read fewer distinct shifts than that gives groups, one inner
channel per shift instead (one tap, the rows' coefficients in its mask: rows of any forms share
it).  Groups with equal normalised taps and masks are then merged, first over sources
(into ``W_in``), then over destinations (into ``W_out``).  The result is exact (Fractions); the
prover checks it like every other layer.

Cost (research scale): a row's request is held sparse, its nonzero taps only (GMP rationals,
``gmpy2.mpq``), and the zeros it needs as a bit set: the shifts through which row ``t`` reads
an occupied slot of channel ``c`` are the channel's occupancy pattern rotated by ``t`` (one
big-integer shift, not ``T`` Fraction entries).  A group keeps its nonzero taps, their bit set
and the bit set of every shift it has pinned, so admitting a row costs a few bit operations
and one ratio per common nonzero tap; and the first fit only tries the groups that can admit
the row (those with a nonzero tap at one of the row's shifts, or that have not pinned it),
found through a shift -> groups index.  Same groups, same order, same weights as the scan over
every group with dense per-row requests (``tests/constructions/test_compiler.py`` checks it
against that reference on random maps); the work is about linear in the requests' nonzeros
where the old pass was (rows x groups x T) Fraction operations.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import gmpy2

from ..layers import BaseConv
from .linearise import CONST

Q = gmpy2.mpq  # exact rationals in C (GMP) inside the pass; Fractions in the LayerSpec
ONE = Q(1)


class CompileError(ValueError):
    """A circuit the target cannot realise (one line; names the node or output)."""


@dataclass
class LayerSpec:
    """One BaseConv layer as sparse exact entries; inner channels ``0..inner-1``."""

    kind: str  # "route" | "product"
    inner: int = 0
    W_in: dict = field(default_factory=dict)  # (channel, k) -> coef
    h: dict = field(default_factory=dict)  # (shift, k)
    b_conv: dict = field(default_factory=dict)  # (token, k)
    W_gate: dict = field(default_factory=dict)  # (channel, k)
    b_gate: dict = field(default_factory=dict)  # (token, k)
    W_out: dict = field(default_factory=dict)  # (k, channel)
    b_out: dict = field(default_factory=dict)  # (token, channel)

    def new_inner(self) -> int:
        self.inner += 1
        return self.inner - 1

    def layer(self, T: int, C: int, causal: bool) -> BaseConv:
        """The BaseConv layer (``T`` tokens, ``C`` channels) these entries describe: its channel
        mixes sparse (``BaseConv.from_entries``), never a dense ``C x C`` array."""
        return BaseConv.from_entries(T, C, {nm: getattr(self, nm) for nm in BaseConv.array_fields if nm != "b_in"},
                                     causal=causal)


def shift(t: int, t2: int, T: int, causal: bool):
    """The filter tap that moves token ``t2`` to token ``t``, or None (causal: backwards)."""
    if causal:
        return t - t2 if t >= t2 else None
    return (t - t2) % T


def _frac(q) -> Fraction:
    return Fraction(int(q.numerator), int(q.denominator))


class _Group:
    """Rows sharing one inner channel of a (source, destination) channel pair: the filter's
    nonzero taps (``taps``, their shifts as the bit set ``bits``), every shift some member reads
    an occupied slot through (``pinned``: a pinned shift not in ``bits`` is a zero tap), and the
    per-row scale (``mask``)."""

    __slots__ = ("taps", "bits", "pinned", "mask")

    def __init__(self):
        self.taps, self.bits, self.pinned, self.mask = {}, 0, 0, {}

    def admits(self, nz: dict, row_bits: int, reads: int):
        """The scale lam with ``row == lam * taps`` on every shift both pin (a row's zero
        requirements are the shifts in ``reads`` outside ``row_bits``), or None."""
        if reads & self.bits & ~row_bits or row_bits & self.pinned & ~self.bits:
            return None  # a nonzero tap the row needs zero, or a zero tap the row needs nonzero
        if not row_bits & self.bits:
            return ONE
        lam, taps = None, self.taps
        for s, r in nz.items():
            v = taps.get(s)
            if v is None:
                continue
            if lam is None:
                lam = r / v
            elif v * lam != r:
                return None
        return lam

    def add(self, t: int, nz: dict, row_bits: int, reads: int, lam, i: int, index: dict) -> None:
        for s, r in nz.items():
            if s not in self.taps:
                self.taps[s] = r / lam
                index.setdefault(s, []).append(i)
        self.bits |= row_bits
        self.pinned |= reads
        self.mask[t] = lam


def route(occupied: dict, slot_of: dict, targets: dict, T: int, causal: bool) -> LayerSpec:
    """One route layer: ``targets`` maps destination slots ``(t, c')`` to affine forms over the
    atoms of the source state (``slot_of[atom] = (t, c)``; ``occupied[(t, c)]`` is the atom or
    junk held there).  Destination slots not in ``targets`` come out zero."""
    spec = LayerSpec("route")
    occ: dict[int, int] = {}  # channel -> the shift pattern of its occupied rows (module docstring)
    for (t2, c) in occupied:
        occ[c] = occ.get(c, 0) | (1 << ((T - 1 - t2) if causal else (-t2) % T))
    # (source channel, destination channel) -> {destination row: {shift: nonzero coefficient}}
    needs: dict[tuple[int, int], dict[int, dict]] = {}
    for (t, cd), form in sorted(targets.items()):
        per_src: dict[int, dict] = {}
        for a, coef in form.items():
            if a == CONST:
                spec.b_out[(t, cd)] = spec.b_out.get((t, cd), 0) + coef
                continue
            t2, c = slot_of[a]
            per_src.setdefault(c, {})[t2] = coef
        for c, want in per_src.items():
            nz, late = {}, []
            for t2, coef in want.items():
                if coef == 0 or (t2, c) not in occupied:
                    continue
                s = shift(t, t2, T, causal)
                if s is None:
                    late.append(t2)
                    continue
                nz[s] = Q(coef)
            if late:
                order = {t2: i for i, (t2, c2) in enumerate(occupied) if c2 == c}
                t2 = min(late, key=order.__getitem__)
                raise CompileError(f"the causal target cannot move {occupied[(t2, c)]} from token {t2} "
                                   f"back to token {t}")
            needs.setdefault((c, cd), {})[t] = nz
    full = (1 << T) - 1
    groups = []  # (src, dst, taps {shift: nonzero}, mask {row: scale})
    for (c, cd), rows in sorted(needs.items()):
        pat = occ[c]
        mine: list[_Group] = []
        index: dict[int, list[int]] = {}  # shift -> the groups with a nonzero tap there
        partial: dict[int, None] = {}  # the groups whose filter does not yet pin every shift
        for t, nz in sorted(rows.items()):
            if not nz:
                continue
            row_bits = 0
            for s in nz:
                row_bits |= 1 << s
            reads = (pat >> (T - 1 - t)) if causal else (((pat << t) | (pat >> (T - t))) & full)
            # first fit, as a scan over every group would find it: a group that admits the row
            # either has a nonzero tap at the row's shift s0 or has not pinned s0 at all
            s0 = next(iter(nz))
            cand = index.get(s0, []) + [i for i in partial if not (mine[i].pinned >> s0) & 1]
            for i in sorted(cand):
                gr = mine[i]
                lam = gr.admits(nz, row_bits, reads)
                if lam is not None:
                    gr.add(t, nz, row_bits, reads, lam, i, index)
                    if gr.pinned == full:
                        partial.pop(i, None)
                    break
            else:
                i = len(mine)
                gr = _Group()
                mine.append(gr)
                gr.add(t, nz, row_bits, reads, ONE, i, index)
                if gr.pinned != full:
                    partial[i] = None
        shifts = sorted({sh for nz in rows.values() for sh in nz})
        if len(shifts) < len(mine):
            # fewer inner channels as one tap each: shift s's channel reads slot (t - s, c) only, its mask the
            # row's coefficient there (zero where a row does not read it), so any rows share it whatever their
            # ratios (rows of many different forms: a local circuit's blocks of random shapes)
            groups += [(c, cd, {sh: ONE}, {t: nz[sh] for t, nz in sorted(rows.items()) if sh in nz})
                       for sh in shifts]
        else:
            groups += [(c, cd, gr.taps, gr.mask) for gr in mine]
    # normalise the taps (first nonzero tap = 1, its value moves into W_in) and merge
    by_dst: dict = {}
    for c, cd, taps, mask in groups:
        first = taps[min(taps)]
        norm = tuple(sorted((s, v / first) for s, v in taps.items()))
        key = (cd, norm, tuple(sorted(mask.items())))
        win = by_dst.setdefault(key, {})
        win[c] = win.get(c, 0) + first
    by_src: dict = {}
    for (cd, norm, mask), win in by_dst.items():
        key = (tuple(sorted(win.items())), norm, mask)
        by_src.setdefault(key, []).append(cd)
    for (win, norm, mask), dsts in by_src.items():
        k = spec.new_inner()
        for c, w in win:
            spec.W_in[(c, k)] = _frac(w)
        for s, v in norm:
            spec.h[(s, k)] = _frac(v)
        for t, lam in mask:
            spec.b_gate[(t, k)] = _frac(lam)
        for cd in dsts:
            spec.W_out[(k, cd)] = Fraction(1)
    return spec
