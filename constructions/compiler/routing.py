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
agree up to a scale share one inner channel (the mask carries the scale): greedy, in row
order.  Groups with equal normalised taps and masks are then merged, first over sources (into
``W_in``), then over destinations (into ``W_out``).  The result is exact (Fractions); the
prover checks it like every other layer.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from .linearise import CONST


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


def shift(t: int, t2: int, T: int, causal: bool):
    """The filter tap that moves token ``t2`` to token ``t``, or None (causal: backwards)."""
    if causal:
        return t - t2 if t >= t2 else None
    return (t - t2) % T


def _compatible(taps: dict, req: dict):
    """The scale lam with ``req == lam * taps`` on their common shifts, or None."""
    lam = None
    for s, r in req.items():
        if s in taps and taps[s] != 0 and r != 0:
            lam = r / taps[s]
            break
    if lam is None:
        lam = Fraction(1)
    for s, r in req.items():
        if s in taps and taps[s] * lam != r:
            return None
    return lam


def route(occupied: dict, slot_of: dict, targets: dict, T: int, causal: bool) -> LayerSpec:
    """One route layer: ``targets`` maps destination slots ``(t, c')`` to affine forms over the
    atoms of the source state (``slot_of[atom] = (t, c)``; ``occupied[(t, c)]`` is the atom or
    junk held there).  Destination slots not in ``targets`` come out zero."""
    spec = LayerSpec("route")
    by_channel: dict[int, list[int]] = {}
    for (t2, c) in occupied:
        by_channel.setdefault(c, []).append(t2)
    # (source channel, destination channel) -> {destination row: {shift: coef}}
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
            req = {}
            for t2 in by_channel.get(c, []):
                s = shift(t, t2, T, causal)
                coef = want.get(t2, Fraction(0))
                if s is None:
                    if coef != 0:
                        raise CompileError(f"the causal target cannot move {occupied[(t2, c)]} from token {t2} "
                                           f"back to token {t}")
                    continue
                req[s] = coef
            needs.setdefault((c, cd), {})[t] = req
    groups = []  # (src, dst, taps, mask)
    for (c, cd), rows in sorted(needs.items()):
        mine = []
        for t, req in sorted(rows.items()):
            if all(v == 0 for v in req.values()):
                continue
            for taps, mask in mine:
                lam = _compatible(taps, req)
                if lam is not None and lam != 0:
                    for s, r in req.items():
                        taps.setdefault(s, r / lam)
                    mask[t] = lam
                    break
            else:
                mine.append(({s: r for s, r in req.items()}, {t: Fraction(1)}))
        groups += [(c, cd, taps, mask) for taps, mask in mine]
    # normalise the taps (first nonzero tap = 1, its value moves into W_in) and merge
    by_dst: dict = {}
    for c, cd, taps, mask in groups:
        first = next(taps[s] for s in sorted(taps) if taps[s] != 0)
        norm = tuple(sorted((s, v / first) for s, v in taps.items() if v != 0))
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
            spec.W_in[(c, k)] = w
        for s, v in norm:
            spec.h[(s, k)] = v
        for t, lam in mask:
            spec.b_gate[(t, k)] = lam
        for cd in dsts:
            spec.W_out[(k, cd)] = Fraction(1)
    return spec
