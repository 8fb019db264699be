"""Weight builders that address the state by region name (``constructions/layout.py``).

``BaseConvBuilder`` fills one :class:`~constructions.layers.BaseConv` layer:
every BaseConv channel ``c`` computes the product

    P_c = (u W_gate + b_gate)[:, c] * (h * (u W_in + b_in) + b_conv)[:, c]

and ``W_out`` mixes the products into the next state.  Channels are named
``(region, j)``; ``keep`` is the idiom "this channel passes through".

``mask_move`` builds the (W1, W2) pair of seed 001 Property 1 / eq. (5):
``W1^T G W2`` moves a block of ``G`` to another place and zeros the rest.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from . import ops
from .layers import BaseConv
from .layout import Layout
from .sparse import SparseMatrix


#: from this many channels on, a built layer holds its three C x C channel mixes sparse
#: (``constructions/sparse.py``): the causal GD construction at N=256, D=64 has 8,514 channels, whose
#: dense C x C object arrays (72M entries each) do not fit; below it the mixes stay dense arrays
SPARSE_CHANNELS = 512


class BaseConvBuilder:
    def __init__(self, layout: Layout, *, causal: bool, residual: bool = False):
        self.layout = layout
        self.T, self.C = layout.shape
        self.causal, self.residual = causal, residual
        # the T x C filter and biases are state-sized: dense; the C x C mixes as entries until build()
        self.layer = BaseConv(*(ops.zeros_like_object((1, 1)) for _ in range(8)), causal=causal, residual=residual)
        for nm in ("b_in", "h", "b_conv", "b_gate", "b_out"):
            setattr(self.layer, nm, ops.zeros_like_object((self.T, self.C)))
        self._mix = {"W_in": {}, "W_gate": {}, "W_out": {}}

    def ch(self, region: str, j: int = 0) -> int:
        cols = self.layout.cols(region)
        if not 0 <= j < len(cols):
            raise IndexError(f"channel {j} outside region {region!r} of width {len(cols)}")
        return cols[j]

    def width(self, region: str) -> int:
        return len(self.layout.cols(region))

    # ---- the four pieces of a channel
    def _add(self, name, src, dst, coef):
        key = (self.ch(*src), self.ch(*dst))
        mix = self._mix[name]
        mix[key] = mix[key] + coef if key in mix else 0 + coef

    def w_in(self, src, dst, coef=1):
        self._add("W_in", src, dst, coef)

    def w_gate(self, src, dst, coef=1):
        self._add("W_gate", src, dst, coef)

    def w_out(self, src, dst, coef=1):
        self._add("W_out", src, dst, coef)

    def gate_bias(self, dst, value=1, rows: Iterable[int] | None = None):
        c = self.ch(*dst)
        for t in (range(self.T) if rows is None else rows):
            self.layer.b_gate[t, c] = value

    def conv_bias(self, dst, value=1, rows: Iterable[int] | None = None):
        c = self.ch(*dst)
        for t in (range(self.T) if rows is None else rows):
            self.layer.b_conv[t, c] = value

    def out_bias(self, dst, value, rows: Iterable[int] | None = None):
        c = self.ch(*dst)
        for t in (range(self.T) if rows is None else rows):
            self.layer.b_out[t, c] = value

    def filter(self, dst, taps: dict[int, object]):
        c = self.ch(*dst)
        for s, w in taps.items():
            self.layer.h[s, c] = w

    def identity_filter(self, dst):
        self.filter(dst, {0: 1})

    # ---- idioms
    def keep(self, *regions: str):
        """Channels that pass through unchanged: conv side copies the channel
        with the identity filter, gate side is the constant 1, W_out copies."""
        for r in regions:
            for j in range(self.width(r)):
                self.w_in((r, j), (r, j))
                self.identity_filter((r, j))
                self.gate_bias((r, j), 1)
                self.w_out((r, j), (r, j))

    def product(self, dst, gate_src=None, conv_src=None, *, gate_coef=1, conv_coef=1):
        """Channel ``dst`` computes ``gate_src * conv_src`` (identity filter).
        A ``None`` source means the constant 1 on that side."""
        if gate_src is None:
            self.gate_bias(dst, 1)
        else:
            self.w_gate(gate_src, dst, gate_coef)
        if conv_src is None:
            self.conv_bias(dst, 1)
        else:
            self.w_in(conv_src, dst, conv_coef)
            self.identity_filter(dst)

    def build(self) -> BaseConv:
        """The layer: its channel mixes dense object arrays, or sparse from ``SPARSE_CHANNELS`` on."""
        for name, entries in self._mix.items():
            if self.C >= SPARSE_CHANNELS:
                W = SparseMatrix.from_entries((self.C, self.C), entries, convert=lambda v: v)
            else:
                W = ops.zeros_like_object((self.C, self.C))
                for (i, j), v in entries.items():
                    W[i, j] = v
            setattr(self.layer, name, W)
        return self.layer


def mask_move(n: int, src_rows, dst_rows, src_cols, dst_cols):
    """Seed 001 Property 1: (W1, W2) with ``W1^T G W2`` equal to ``G`` moved.

    The result has ``G[src_rows[i], src_cols[j]]`` at ``(dst_rows[i],
    dst_cols[j])`` and zeros elsewhere; ``G`` is (n, n).  ``W1^T = W_K`` with
    ``K = {(dst, src)}`` (eq. 2) and ``W2 = V_J`` with ``J = {(src, dst)}`` (eq. 4).
    """
    src_rows, dst_rows, src_cols, dst_cols = map(list, (src_rows, dst_rows, src_cols, dst_cols))
    if len(src_rows) != len(dst_rows) or len(src_cols) != len(dst_cols):
        raise ValueError("mask_move needs as many destination as source rows/columns")
    if len(set(dst_rows)) != len(dst_rows) or len(set(dst_cols)) != len(dst_cols):
        raise ValueError("mask_move destinations must be distinct (Property 1: i_1 != ... != i_k)")
    W1 = ops.zeros_like_object((n, n))
    W2 = ops.zeros_like_object((n, n))
    for s, t in zip(src_rows, dst_rows):
        W1[s, t] = 1  # W1^T[t, s] = 1
    for s, t in zip(src_cols, dst_cols):
        W2[s, t] = 1
    return W1, W2


def selector(n: int, src_cols, dst_cols, coef=1) -> np.ndarray:
    """An (n, n) matrix ``W`` with ``(H W)[:, dst] = coef * H[:, src]``."""
    W = ops.zeros_like_object((n, n))
    for s, t in zip(src_cols, dst_cols):
        W[s, t] = coef
    return W
