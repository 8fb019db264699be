"""Benes networks of masked shifts: route any permutation of ``n = 2^k`` tokens in ``2k - 1`` layers.

A *stage* on bit ``j`` is a column of 2 x 2 switches on the token pairs ``(t, t XOR 2^j)``: the
value at output token ``t`` is the input at ``t`` (keep) or at its partner ``t XOR 2^j`` (swap).
The Benes network on ``n = 2^k`` tokens is the stages on bits ``0, 1, ..., k-1, ..., 1, 0``
(a butterfly followed by an inverse butterfly sharing the middle column; seed 003 Lemmas H.7-H.8,
the butterfly factors of seed 000 Assumption D.22).  One stage is one BaseConv layer (seed 000
eq. (19)) with the gate side a 0/1 bias (``W_gate = 0``, ``B_gate`` = the mask) and three inner
channels per routed channel: filter ``delta_0`` masked to the kept tokens, filter ``delta`` at lag
``-2^j`` (reads ``t + 2^j``) masked to the swapped tokens with bit ``j`` clear, and lag ``+2^j``
(reads ``t - 2^j``) masked to the swapped tokens with bit ``j`` set, summed by ``W_out``.  The
circular convolution's shifts never wrap: a partner is inside ``[0, n)``.  The causal target cannot
read later tokens, so these networks are for ``baseconv`` only.

Switch settings by the looping algorithm (Waksman; Benes 1965): the first column sends the two
inputs of each pair to different sub-networks (bit 0 of the position after the column), the last
column takes the two outputs of each pair from different sub-networks; following the chain
input pair -> output pair -> input pair two-colours every loop, and each sub-network routes the
induced permutation of ``n / 2`` tokens (positions ``p -> 2p + b``) recursively.  Integers only.
"""
from __future__ import annotations

import numpy as np


def benes_stages(perm) -> list[tuple[int, np.ndarray]]:
    """Switch settings routing ``perm`` (input token ``t`` -> output token ``perm[t]``, a
    permutation of ``range(n)``, ``n = 2^k``): ``2k - 1`` stages ``(bit, swap)``, ``swap[t]`` True
    where output token ``t`` of the stage reads its partner ``t XOR 2^bit`` (``swap`` is constant
    on each pair)."""
    perm = np.asarray(perm, dtype=np.int64)
    n = len(perm)
    k = n.bit_length() - 1
    if n < 1 or (1 << k) != n:
        raise ValueError(f"a Benes network routes 2^k tokens, not {n}")
    if sorted(perm.tolist()) != list(range(n)):
        raise ValueError("not a permutation")
    return _route(perm, k)


def _route(perm: np.ndarray, k: int) -> list:
    n = 1 << k
    if k == 0:
        return []
    if k == 1:
        sw = np.zeros(2, dtype=bool)
        sw[:] = perm[0] != 0
        return [(0, sw)]
    inv = np.empty(n, dtype=np.int64)
    inv[perm] = np.arange(n)
    p, iv = perm.tolist(), inv.tolist()
    color = [-1] * n
    for start in range(0, n, 2):
        if color[start] != -1:
            continue
        t, c = start, 0
        while color[t] == -1:
            color[t], color[t ^ 1] = c, 1 - c
            t = iv[p[t ^ 1] ^ 1]  # the output partner of t^1's output must come from sub-network c
    col = np.array(color, dtype=np.int64)
    ts = np.arange(n)
    first = np.zeros(n, dtype=bool)
    first[(ts & ~1) | col] = col != (ts & 1)
    last = np.zeros(n, dtype=bool)
    last[perm] = (perm & 1) != col
    subs = []
    for b in (0, 1):
        sel = ts[col == b]
        sub = np.empty(n // 2, dtype=np.int64)
        sub[sel >> 1] = perm[sel] >> 1
        subs.append(_route(sub, k - 1))
    middle = []
    for (j, s0), (_, s1) in zip(*subs):
        sw = np.empty(n, dtype=bool)
        sw[0::2], sw[1::2] = s0, s1
        middle.append((j + 1, sw))
    return [(0, first)] + middle + [(0, last)]


def apply_stages(stages, x):
    """The stages applied to the sequence ``x`` (a list or array of length ``n``): for tests and
    the plan's own check."""
    x = list(x)
    idx = np.arange(len(x))
    for j, sw in stages:
        src = np.where(sw, idx ^ (1 << j), idx)
        x = [x[s] for s in src.tolist()]
    return x


def complete(pairs: dict, n: int) -> np.ndarray:
    """A permutation of ``range(n)`` extending the partial injective map ``pairs`` (source ->
    destination): the unused sources go to the unused destinations in order."""
    perm = np.full(n, -1, dtype=np.int64)
    used = np.zeros(n, dtype=bool)
    for s, d in pairs.items():
        perm[s] = d
        used[d] = True
    free_d = np.flatnonzero(~used)
    free_s = np.flatnonzero(perm < 0)
    perm[free_s] = free_d
    return perm
