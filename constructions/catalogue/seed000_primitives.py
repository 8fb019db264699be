"""Seed 000 App. D.2.1: the primitives READ, LINEAR and MULTIPLY as single BaseConv layers.

Each primitive is a one-layer construction (epilogue only) on a state of N
tokens x d channels; its specification is the paper's definition of the
primitive (eq. (20)-(22)).
"""
from __future__ import annotations

import numpy as np

from constructions.base import Construction
from constructions.layout import ChannelAllocator
from constructions.weights import BaseConvBuilder

from . import CatalogueEntry, register


class Primitive(Construction):
    """One layer mapping ``state(v) = u`` to ``final_state(v) = f(u)``."""

    spec = None  # f(u) on exact object arrays

    def input_state(self, v):
        return self.state(v)

    def state(self, v):
        return np.array(v["u"], dtype=object, copy=True)

    def final_state(self, v):
        return self.spec(np.asarray(v["u"], dtype=object))

    def step(self, v):
        return v


def multiply(n: int = 6, d_out: int = 2) -> Primitive:
    """MULTIPLY(a=0, b=d_out, d_out), eq. (22): channels [0, d_out) times channels
    [d_out, 2 d_out) into channels [0, d_out); the other channels are zeroed.
    Weights as in the paper: Conv = identity, W_in = proj(a), W_gate = proj(b), W_out = I."""
    al = ChannelAllocator(n)
    al.block("x", d_out, "first factor; the product after the layer")
    al.block("y", d_out, "second factor")
    lay = al.layout()
    B = BaseConvBuilder(lay, causal=True)
    for j in range(d_out):
        B.product(("x", j), gate_src=("y", j), conv_src=("x", j))
        B.w_out(("x", j), ("x", j))

    def spec(u):
        out = np.empty(u.shape, dtype=object)
        out.fill(0)
        out[:, :d_out] = u[:, :d_out] * u[:, d_out:2 * d_out]
        return out

    con = Primitive(name="s000-multiply", reference="seed 000 App. D.2.1, eq. (22)", layout=lay, prologue=[], body=[],
                    epilogue=[B.build()], params={}, variables={"u": (n, 2 * d_out)})
    con.spec = spec
    return con


register(CatalogueEntry(
    name="s000-multiply", paper="seed 000 App. D.2.1, eq. (22)",
    summary="MULTIPLY primitive: entry-wise product of two channel blocks, one BaseConv layer",
    build=multiply, sizes={"n": 6, "d_out": 2}, claim="1 layer, state N x d (Sec. D.2.1)"))
