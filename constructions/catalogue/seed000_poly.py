"""Seed 000 App. D.4.1, Theorem D.38 / Algorithm 2: a degree-d univariate polynomial
applied entry-wise, ``P(u)[i, j] = P(u[i, j])``, with O(d) BaseConv layers.

``s000-poly`` follows Algorithm 2 (``m_j = m_{j-1} x``, ``t_j = c_j m_j``,
``s_j = s_{j-1} + t_j``) with the paper's state ``u_j = (u; m_j; t_j; s_j)``.
The paper stacks the four blocks along the *sequence* (a 4N x D state) and
moves between them with shift filters (Prop. D.24) inside the ``remember``
primitive (Prop. D.26, 8 layers each).  Here the four blocks are *channel*
blocks ``u, m, t, s`` of width D on the N tokens (an N x 4D state: the same
4ND numbers), so no shift and no ``remember`` is needed:

* prologue (the paper's first layer, ``BASECONV(u', I, (0;1;1;C_0), 0, 1)``):
  gate ``u W_gate + b_gate`` with ``b_gate = (0, 1, 1, c_0)``, conv side the
  constant 1: ``u -> u_0 = (u, 1, 1, C_0)``.
* one layer per j = 1..d (``fused=True``, default): the channel ``m`` computes
  ``m_{j-1} * u`` (gate m, identity filter on u) and ``W_out`` writes it to
  ``m`` (x 1), ``t`` and ``s`` (x c_j); ``u`` and ``s`` pass through:
  lines 4-6 of Algorithm 2 in one layer.
* ``fused=False``: one layer per line, as the paper's proof (line 4:
  ``m <- m * u``; line 5: ``t <- m * C_j`` with ``C_j`` as the conv-side bias,
  as in the paper's third line-5 layer ``BASECONV((m;m), I, 0, 0, (1;C_j))``;
  line 6: ``s <- s + t`` (conv side ``s + t``, gate 1)).

The coefficients ``c_0..c_d`` are exact rationals in the weights (drawn from
``seed``) and are *symbolic parameters* of the proof: ``prove`` checks the
stack for every coefficient vector at once.  Depth ``1 + d`` (fused) or
``1 + 3d``; state N x 4D.

``s000-poly-horner`` is the repeated-body form: Horner's rule
``s <- s * u + c`` with the coefficients in the *input* (a register of
channels shifted by one per layer), one identical layer per degree, proved
by induction for every number of steps.
"""
from __future__ import annotations

import numpy as np

from constructions.base import Construction
from constructions.layout import ChannelAllocator
from constructions.weights import BaseConvBuilder

from . import CatalogueEntry, register
from .seed000_primitives import random_rational_matrix

REFERENCE = "seed 000 App. D.4.1, Theorem D.38, Algorithm 2 (Lemma D.36)"


def _power(x, k):
    out = 1
    for _ in range(k):
        out = out * x
    return out


def poly_eval(coefs, x):
    """``sum_j coefs[j] x^j`` for one exact scalar (independent of the layers)."""
    return sum((c * _power(x, j) for j, c in enumerate(coefs)), 0)


class PolyAlg2(Construction):
    """States ``u_0 = (u, 1, 1, C_0)`` and ``u_d = (u, u^d, C_d u^d, P(u))`` (Theorem D.38)."""

    @property
    def degree(self) -> int:
        return len(self.params) - 1

    def coefs(self):
        return [self.params[f"c_{j}"] for j in range(self.degree + 1)]

    def _put(self, u, m=None, t=None, s=None):
        lay = self.layout
        S = lay.new_state()
        lay.put(S, "u", u)
        for name, val in (("m", m), ("t", t), ("s", s)):
            if val is None:
                continue
            if not isinstance(val, np.ndarray):  # a scalar (maybe a ring element): fill, do not broadcast
                block = np.empty(lay[name].shape, dtype=object)
                block.fill(val)
                val = block
            lay.put(S, name, val)
        return S

    def input_state(self, v):
        return self._put(np.asarray(v["u"], dtype=object))

    def state(self, v):
        u = np.asarray(v["u"], dtype=object)
        return self._put(u, 1, 1, self.coefs()[0])

    def final_state(self, v):
        u = np.asarray(v["u"], dtype=object)
        c = self.coefs()
        d = self.degree
        ud = np.vectorize(lambda x: _power(x, d), otypes=[object])(u)
        P = np.vectorize(lambda x: poly_eval(c, x), otypes=[object])(u)
        t = np.vectorize(lambda x: c[d] * x, otypes=[object])(ud)
        return self._put(u, ud, t, P)

    def step(self, v):
        return v


def _poly_from(n: int, dm: int, coefs: list, fused: bool) -> PolyAlg2:
    d = len(coefs) - 1
    al = ChannelAllocator(n)
    al.block("u", dm, "the input u")
    al.block("m", dm, "m_j = u^j (Algorithm 2 line 4)")
    al.block("t", dm, "t_j = c_j m_j (line 5)")
    al.block("s", dm, "s_j = c_0 + ... + c_j u^j (line 6)")
    lay = al.layout()
    # prologue: u -> (u, 1, 1, C_0)
    P0 = BaseConvBuilder(lay, causal=True)
    for c in range(dm):
        P0.w_gate(("u", c), ("u", c))
        for blk, val in (("m", 1), ("t", 1), ("s", coefs[0])):
            P0.gate_bias((blk, c), val)
        for blk in ("u", "m", "t", "s"):
            P0.conv_bias((blk, c), 1)
            P0.w_out((blk, c), (blk, c))
    layers = []
    for j in range(1, d + 1):
        cj = coefs[j]
        if fused:
            L = BaseConvBuilder(lay, causal=True)
            L.keep("u", "s")
            for c in range(dm):
                L.product(("m", c), gate_src=("m", c), conv_src=("u", c))
                L.w_out(("m", c), ("m", c))
                L.w_out(("m", c), ("t", c), cj)
                L.w_out(("m", c), ("s", c), cj)
            layers.append(L.build())
            continue
        L4 = BaseConvBuilder(lay, causal=True)  # line 4: m <- m * u
        L4.keep("u", "t", "s")
        L5 = BaseConvBuilder(lay, causal=True)  # line 5: t <- m * C_j
        L5.keep("u", "m", "s")
        L6 = BaseConvBuilder(lay, causal=True)  # line 6: s <- s + t
        L6.keep("u", "m", "t")
        for c in range(dm):
            L4.product(("m", c), gate_src=("m", c), conv_src=("u", c))
            L4.w_out(("m", c), ("m", c))
            L5.w_gate(("m", c), ("t", c))
            L5.conv_bias(("t", c), cj)
            L5.w_out(("t", c), ("t", c))
            L6.gate_bias(("s", c), 1)
            L6.w_in(("s", c), ("s", c))
            L6.w_in(("t", c), ("s", c))
            L6.identity_filter(("s", c))
            L6.w_out(("s", c), ("s", c))
        layers += [L4.build(), L5.build(), L6.build()]
    params = {f"c_{j}": c for j, c in enumerate(coefs)}
    con = PolyAlg2(name="s000-poly", reference=REFERENCE, layout=lay, prologue=[P0.build()], body=[],
                   epilogue=layers, params=params, variables={"u": (n, dm)},
                   rebuild=lambda **p: _poly_from(n, dm, [p[f"c_{j}"] for j in range(d + 1)], fused),
                   symbolic_params=tuple(params),
                   notes=f"{'1 layer' if fused else '3 layers'} per degree; coefficients symbolic in the proof")
    return con


def poly(n: int = 3, d_model: int = 2, degree: int = 4, seed: int = 1, *, coefs=None, fused: bool = True) -> PolyAlg2:
    """Theorem D.38 / Algorithm 2, see the module docstring.  ``coefs`` = ``[c_0, ..., c_d]``
    (exact), or drawn from ``seed``."""
    if n < 1 or d_model < 1 or degree < 1:
        # degree 0 has no loop iteration: the paper's u_0 = (u, 1, 1, C_0) holds t_0 = 1, not C_0 P_0(u)
        raise ValueError(f"need n, d_model, degree >= 1, got n={n}, d_model={d_model}, degree={degree}")
    if coefs is None:
        coefs = list(random_rational_matrix(1, degree + 1, seed).flat)
    coefs = list(coefs)
    if len(coefs) != degree + 1:
        raise ValueError(f"a degree-{degree} polynomial has {degree + 1} coefficients, got {len(coefs)}")
    return _poly_from(n, d_model, coefs, fused)


register(CatalogueEntry(
    name="s000-poly", paper=REFERENCE,
    summary="entry-wise polynomial P(u) of degree d (Algorithm 2): 1 + d BaseConv layers, coefficients symbolic",
    build=poly, sizes={"n": 3, "d_model": 2, "degree": 4, "seed": 1},
    claim="(4N, O(d), D, 4N, D)-BaseConv: inner state 4N x D; per degree: line 4 by remember (8 layers, "
          "Prop. D.26), line 5 three layers inside remember (O(1)), line 6 one layer, plus 1 init layer"))


# =========================================================================== Horner, repeated body

class Horner(Construction):
    """state(u, s, reg) = (u, s, reg broadcast to every token); step: ``s <- s*u + reg[0]``, ``reg <- (reg[1:], 0)``."""

    def input_state(self, v):
        return self.state(v)

    def state(self, v):
        lay = self.layout
        S = lay.new_state()
        lay.put(S, "u", np.asarray(v["u"], dtype=object))
        lay.put(S, "s", np.asarray(v["s"], dtype=object))
        lay.put(S, "reg", np.asarray(v["reg"], dtype=object)[None, :])
        return S

    def final_state(self, v):
        return self.state(v)

    def step(self, v):
        u, s, reg = (np.asarray(v[k], dtype=object) for k in ("u", "s", "reg"))
        out = dict(v)
        out["s"] = s * u + reg[0]
        r = np.empty(reg.shape, dtype=object)
        r.fill(0)
        r[:-1] = reg[1:]
        out["reg"] = r
        return out


def poly_horner(n: int = 3, d_model: int = 2, degree: int = 4) -> Horner:
    """Horner's rule, one identical BaseConv layer per degree (seed 000 Theorem D.38's
    O(d) bound with a repeated body).  Channels: ``u`` (D), ``s`` (D, the running
    value) and a register ``reg`` of ``degree`` channels holding the remaining
    coefficients (same at every token).  Layer: channel ``s`` computes ``s * u``
    (gate s, identity filter on u), ``reg[0]`` passes through (gate 1) and
    ``W_out`` adds it to every ``s`` channel; ``reg[k] -> reg[k-1]``.  With
    ``s = c_d`` and ``reg = (c_{d-1}, ..., c_0)``, ``degree`` layers give ``P(u)``.
    The weights are 0/1; the proof is by induction in fresh symbols (u, s, reg)."""
    if n < 1 or d_model < 1 or degree < 1:
        raise ValueError(f"need n, d_model, degree >= 1, got {n}, {d_model}, {degree}")
    al = ChannelAllocator(n)
    al.block("u", d_model, "the input u")
    al.block("s", d_model, "Horner accumulator")
    al.block("reg", degree, "coefficients still to add, next first (same at every token)")
    lay = al.layout()
    B = BaseConvBuilder(lay, causal=True)
    B.keep("u")
    for c in range(d_model):
        B.product(("s", c), gate_src=("s", c), conv_src=("u", c))
        B.w_out(("s", c), ("s", c))
    for k in range(degree):
        B.product(("reg", k), conv_src=("reg", k))
        if k == 0:
            for c in range(d_model):
                B.w_out(("reg", 0), ("s", c))
        else:
            B.w_out(("reg", k), ("reg", k - 1))
    return Horner(name="s000-poly-horner", reference=REFERENCE + " (Horner form)", layout=lay, prologue=[],
                  body=[B.build()], epilogue=[],
                  params={}, variables={"u": (n, d_model), "s": (n, d_model), "reg": (degree,)},
                  carried=("s", "reg"), notes="coefficients in the input; 1 layer per degree")


register(CatalogueEntry(
    name="s000-poly-horner", paper=REFERENCE + " (Horner form)",
    summary="entry-wise polynomial by Horner's rule: one repeated BaseConv layer per degree, coefficients as input",
    build=poly_horner, sizes={"n": 3, "d_model": 2, "degree": 4},
    claim="O(d) layers, inner state 4N x D (Theorem D.38)"))
