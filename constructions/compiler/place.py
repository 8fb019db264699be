"""Pass: the placed inputs -> the channels the sequence compile works in (placement-independent width).

The placed grid's rows are the data (seed 000 Thm. D.30 / seed 003 Thm. H.21 take the inputs
as an ``N x D`` matrix), so this pass keeps every input's **token**; its **channel** is the
compiler's to choose, at two costs:

* a *channel relabelling* (a bijection of the input channels) is free: the first layer's
  ``W_in`` and ``W_gate`` mix channels the same way at every token (seed 000 eq. (19)), so
  their rows are permuted and nothing else changes.  :func:`canonical_channels` orders the
  input channels by their contents (the sorted ``(token, input name)`` pairs), not by their
  index, so a compile does not depend on which channel numbers the inputs happen to carry:
  permuting the input channels leaves the compile (and its width) unchanged.
* *splitting a channel* (moving some of its inputs to a free channel at the same token) is
  one route layer (seed 003 Lemma H.7: a masked channel mix), fused into the first level's
  route layer where the level needs one anyway.  It pays where a product reads an input at
  another token (the conv side of a product layer, through the filter): the filter of a
  channel moves every token of that channel alike, so an input read across tokens that
  shares its channel with inputs at other tokens needs one inner channel per destination
  token (GD step with ``x_j`` in the channel of column ``j`` of ``A``: 106 channels at
  ``N = 20, D = 5``), alone in its channel one per channel (16).

:func:`candidates` gives the layouts :func:`.sequence.plan` compiles and compares: the
canonical relabelling, and (where some channel mixes inputs read across tokens, *movers*,
with others) the layouts with the movers split off, one fresh channel per split channel or
one per mover.  The plan keeps the narrowest (then the shallowest).
"""
from __future__ import annotations

import circuits as C

from .linearise import CONST


def canonical_channels(inputs: dict) -> dict:
    """Original channel -> internal channel: the used channels ordered by their contents
    (sorted ``(token, name)`` pairs), independent of the channel numbers."""
    contents: dict[int, list] = {}
    for name, (t, c) in inputs.items():
        contents.setdefault(c, []).append((t, name))
    order = sorted(contents, key=lambda c: sorted(contents[c]))
    return {c: i for i, c in enumerate(order)}


def movers(inputs: dict, atoms: dict, need: set) -> set:
    """The inputs a product reads across tokens: for every product whose two factors hold
    inputs at different tokens, the input of the pair with more distinct partner tokens (the
    broadcaster: it is read at its partners' tokens); a tie moves both."""
    tok = {f"in:{n}": t for n, (t, _) in inputs.items()}
    partners: dict[str, set] = {}
    pairs = []
    for p in need:
        if atoms[p][0] != "mul":
            continue
        fa, fb = atoms[p][1], atoms[p][2]
        ia = [a for a in fa if a != CONST and a in tok]
        ib = [b for b in fb if b != CONST and b in tok]
        for a in ia:
            for b in ib:
                if tok[a] != tok[b]:
                    partners.setdefault(a, set()).add(tok[b])
                    partners.setdefault(b, set()).add(tok[a])
                    pairs.append((a, b))
    out = set()
    for a, b in pairs:
        na, nb = len(partners[a]), len(partners[b])
        if na >= nb:
            out.add(a)
        if nb >= na:
            out.add(b)
    return out


def candidates(inputs: dict, atoms: dict, need: set) -> list:
    """``[(label, layout)]``: input name -> internal ``(token, channel)``; the first is the
    canonical relabelling (free), the others split mixed channels (a route layer)."""
    relabel = canonical_channels(inputs)
    base = {n: (t, relabel[c]) for n, (t, c) in inputs.items()}
    out = [("relabelled", base)]
    mv = {a[3:] for a in movers(base, atoms, need)}
    by_chan: dict[int, list] = {}
    for n, (t, c) in base.items():
        if f"in:{n}" in need:
            by_chan.setdefault(c, []).append(n)
    mixed = [c for c, ns in sorted(by_chan.items()) if any(n in mv for n in ns) and any(n not in mv for n in ns)]
    if not mixed:
        return out
    width = 1 + max(c for _, c in base.values())
    per_channel, per_mover = dict(base), dict(base)
    nxt = width
    for i, c in enumerate(mixed):
        for n in sorted(by_chan[c], key=lambda n: (base[n][0], n)):
            if n in mv:
                per_channel[n] = (base[n][0], width + i)
                per_mover[n] = (base[n][0], nxt)
                nxt += 1
    out.append(("movers split per channel", per_channel))
    if per_mover != per_channel:
        out.append(("movers split per input", per_mover))
    return out


def is_relabelling(inputs: dict, layout: dict):
    """The map original channel -> internal channel if ``layout`` only relabels the channels of
    ``inputs`` (same tokens, a bijection of channels), else None."""
    m: dict[int, int] = {}
    for n, (t, c) in inputs.items():
        t2, c2 = layout[n]
        if t2 != t or m.setdefault(c, c2) != c2:
            return None
    return m if len(set(m.values())) == len(m) else None


def grid_channels(g) -> int:
    pl = C.placement(g)
    return pl.channels if pl is not None else max(1, len(C.inputs(g)))


def grid(g):
    """(tokens, input places, output places) of ``g``: its placement, or one token with the
    inputs in channels 0, 1, ... and no output places for an unplaced circuit."""
    pl = C.placement(g)
    if pl is None:
        return 1, {n: (0, i) for i, n in enumerate(C.inputs(g))}, {}
    return pl.tokens, dict(pl.inputs), dict(pl.outputs)
