"""Seed 003 (Zoology) App. H.3, Lemma H.11 / Prop. H.12: BaseConv and Hyena simulate each other.

Hyena (seed 003 Alg. 2 ``Projection`` and Alg. 3 ``Hyena``, recursion depth L)::

    ẑ = u W_proj  (W_proj in R^{d x (L+1)d}),   z[:, c] = h_s * ẑ[:, c]   (one short filter h_s)
    split z = (p^1 | ... | p^L | v),   z^0 = v,   z^l = p^l ⊙ (h^l * z^{l-1}),   output z^L

(the paper's ``p^l[t, :]`` is read as ``[:, t]``: the token index is the row).  BaseConv layers are the
paper's ``(u W + b_1) ⊙ (h * u + b_2)`` (``paper_layer``).  What is proved:

* ``s003-hyena-equiv`` -- Hyena -> BaseConv (the direction of Prop. H.12), a
  construction proved exactly: for fixed exact ``W_proj, h_s, h^1..h^L`` and every
  input ``u`` (symbolic), ``L + 2`` BaseConv layers on an ``N x (L+1)d`` state map
  ``(u | 0)`` to ``(z^L | p^1 | ... | p^L)``, so the top-left ``N x d`` block is the
  Hyena output.  Layer 1: ``W = W_proj`` (columns reordered v, p^1..p^L), ``b_2 = 1``
  (linear); layer 2: ``h = h_s`` on every channel, ``b_1 = 1`` (short convolution);
  layer 2+l: ``W`` routes ``p^l`` onto the z channels and keeps every ``p`` channel on
  its own, ``h = h^l`` on the z channels, ``b_2 = 1`` on the p channels, giving
  ``z <- p^l ⊙ (h^l * z)`` and ``p <- p``.  The data-dependent ``p^l`` arrives through
  ``W`` (the gate), never through a bias.  Paper: an ``(N, 5L, d, N'+N, d)``-BaseConv.
  Here: ``(N, L+2, d, N, (L+1)d)``, the Hyena's own inner dimension.
* ``s003-baseconv-as-hyena`` -- BaseConv -> Hyena (second half of Prop. H.12), an
  identity in fully symbolic weights: for every ``u, W^l, h^l`` an L-layer BaseConv
  with ``b_1 = b_2 = 0`` equals L stacked Hyena layers of recursion depth 1 with
  ``W_proj = [W^l | I_d]``, ``h_s = e_0``, filter ``h^l`` (biases: ignored by the
  paper, excluded here).

Erratum ``S003-H12-bias`` (docs/errata.md): the paper runs each Hyena step
as ``remember(u_BC : u, u, h^l, p^l)``, whose multiplier ``p`` is the fixed gating
bias ``b_1`` (Lemma H.7), but ``p^l = u W_p`` depends on the input; weights are fixed,
so the printed step is built with ``b_1 = p^l(u^0)`` at the reference input
``u^0 = 1`` (the best a fixed weight can do) and rejected for general ``u``.
"""
from __future__ import annotations

import numpy as np

from constructions.claims import IdentityClaim
from constructions.layers import BaseConv
from constructions.layout import Layout

from . import CatalogueEntry, Erratum, register, register_erratum
from .seed003_primitives import (Z, conv_spec, identity, paper_layer, rand_rat, remember_min_rows, remember_stack,
                                 rows_mask, stack)

REF_H12 = "seed 003 App. H.3, Prop. H.12 (Hyena Alg. 2-3, BaseConv eq. (4)), Lemma H.11"


def hyena_reference(u, W_proj, h_s, filters, N: int, d: int, L: int):
    """Alg. 2 + Alg. 3, written from the paper (independent of the layer code).
    Returns ``(z^L, [p^1, ..., p^L])`` as exact (N, d) object arrays."""
    u = np.asarray(u, dtype=object)
    zhat = np.dot(u, np.asarray(W_proj, dtype=object))  # (N, (L+1)d)
    z = Z(N, (L + 1) * d)
    for c in range((L + 1) * d):
        z[:, c] = conv_spec(list(zhat[:, c]), list(h_s), N)
    ps = [z[:, l * d:(l + 1) * d] for l in range(L)]
    cur = z[:, L * d:(L + 1) * d]
    for l in range(L):
        nxt = Z(N, d)
        hl = np.asarray(filters[l], dtype=object)
        for c in range(d):
            conv = conv_spec(list(cur[:, c]), list(hl[:, c]), N)
            for r in range(N):
                nxt[r, c] = ps[l][r, c] * conv[r]
        cur = nxt
    return cur, ps


def _hyena_weights(N, d, L, seed):
    rng = np.random.default_rng(seed)
    W_proj = rand_rat(rng, (d, (L + 1) * d), nonzero=True)
    h_s = list(rand_rat(rng, (min(3, N),), nonzero=True))  # a short filter
    filters = [rand_rat(rng, (N, d), nonzero=True) for _ in range(L)]
    return W_proj, h_s, filters


def hyena_to_baseconv(N: int = 4, d: int = 2, L: int = 2, seed: int = 1, *, weights=None):
    """Prop. H.12 (Hyena -> BaseConv), corrected: ``L + 2`` paper-form BaseConv layers on an
    ``N x (L+1)d`` state compute an ``(N, L, d, N, (L+1)d)``-Hyena (module docstring).
    ``W_proj, h_s, h^l`` are random dyadic from ``seed`` (or ``weights``)."""
    if min(N, d, L) < 1:
        raise ValueError(f"need N, d, L >= 1 (got N={N}, d={d}, L={L})")
    W_proj, h_s, filters = weights or _hyena_weights(N, d, L, seed)
    C = (L + 1) * d
    lay = Layout((N, C))
    lay.add("z", (0, N), (0, d), "u on input; z^l after layer 2+l (the Hyena output)")
    for l in range(1, L + 1):
        lay.add(f"p{l}", (0, N), (l * d, (l + 1) * d), f"p^{l} = h_s * (u W_proj)[:, p^{l}]")
    zc = list(range(d))
    pc = [list(range(l * d, (l + 1) * d)) for l in range(1, L + 1)]
    # layer 1: linear u -> u W_proj, our column order (v | p^1 | ... | p^L)
    W1 = Z(C, C)
    for i in range(d):
        for c in range(d):
            W1[i, zc[c]] = W_proj[i, L * d + c]
            for l in range(L):
                W1[i, pc[l][c]] = W_proj[i, l * d + c]
    layers = [paper_layer(N, C, W=W1, b2=rows_mask(N, C, range(N)))]
    # layer 2: the short convolution h_s on every channel
    h2 = Z(N, C)
    for lag, w in enumerate(h_s):
        h2[lag, :] = w
    layers.append(paper_layer(N, C, b1=rows_mask(N, C, range(N)), h=h2))
    # layers 2 + l: z <- p^l ⊙ (h^l * z); p^k <- p^k
    for l in range(L):
        W = Z(C, C)
        h = Z(N, C)
        b2 = Z(N, C)
        for c in range(d):
            W[pc[l][c], zc[c]] = 1
            h[:, zc[c]] = filters[l][:, c]
            for k in range(L):
                W[pc[k][c], pc[k][c]] = 1
                b2[:, pc[k][c]] = 1
        layers.append(paper_layer(N, C, W=W, h=h, b2=b2))

    def mk(v):
        S = Z(N, C)
        S[:, :d] = v["u"]
        return S

    def spec(v):
        zL, ps = hyena_reference(v["u"], W_proj, h_s, filters, N, d, L)
        S = Z(N, C)
        S[:, :d] = zL
        for l in range(L):
            S[:, pc[l][0]:pc[l][-1] + 1] = ps[l]
        return S
    return stack("s003-hyena-equiv", REF_H12 + " (Hyena -> BaseConv, corrected)", lay, layers, {"u": (N, d)}, mk, spec,
                 params={"L": L}, notes="(N, L+2, d, N, (L+1)d)-BaseConv; paper: (N, 5L, d, N'+N, d)")


class BaseConvAsHyena:
    """An identity (``claim()``): L paper-form BaseConv layers (toolkit layer with
    ``W_in = W_out = I``; these two fixed matrices are the attributes ``W_in``/``W_out``, which a
    test may perturb) == L Hyena layers of depth 1, in symbolic ``u, W^l, h^l``."""

    def __init__(self, N: int = 3, d: int = 2, L: int = 2):
        if min(N, d, L) < 1:
            raise ValueError(f"need N, d, L >= 1 (got N={N}, d={d}, L={L})")
        self.N, self.d, self.L = N, d, L
        self.W_in, self.W_out = identity(d), identity(d)

    def variables(self):
        v = {"u": (self.N, self.d)}
        for l in range(self.L):
            v[f"W{l}"] = (self.d, self.d)
            v[f"h{l}"] = (self.N, self.d)
        return v

    def lhs(self, v):
        S = np.array(v["u"], dtype=object)
        for l in range(self.L):
            layer = BaseConv.zeros(self.N, self.d, causal=True)
            layer.W_in[...], layer.W_out[...] = self.W_in, self.W_out
            layer.W_gate[...], layer.h[...] = v[f"W{l}"], v[f"h{l}"]
            S = layer.forward(S)
        return S

    def rhs(self, v):
        S = np.asarray(v["u"], dtype=object)
        for l in range(self.L):
            W_proj = Z(self.d, 2 * self.d)
            W_proj[:, :self.d] = v[f"W{l}"]
            W_proj[:, self.d:] = identity(self.d)
            S, _ = hyena_reference(S, W_proj, [1], [v[f"h{l}"]], self.N, self.d, 1)
        return S

    def claim(self) -> IdentityClaim:
        return IdentityClaim("s003-baseconv-as-hyena", self.variables(), self.lhs, self.rhs,
                             locate=lambda ix: f"output row {ix[0]} channel {ix[1]}" if ix else "output")


def baseconv_as_hyena(N: int = 3, d: int = 2, L: int = 2) -> BaseConvAsHyena:
    """Prop. H.12, BaseConv -> Hyena: identity in symbolic ``u, W^l, h^l`` (class docstring)."""
    return BaseConvAsHyena(N, d, L)


def h12_as_printed(N: int = 3, d: int = 1, seed: int = 1):
    """The paper's Hyena step via ``remember_{N,N,N'-N,N'-N}(u_BC : u, u, h^1, p^1)`` with
    ``N' = 2N`` and ``p = p^1`` passed as the bias ``b_1`` (fixed at ``u^0 = 1``).  Hyena with
    ``h_s = e_0``, ``W_proj = [W_p | I]`` so that ``v = u`` and ``p^1 = u W_p``.  The
    remember construction is the corrected one (S003-remember-*), so only the bias is at fault."""
    rng = np.random.default_rng(seed)
    W_p = rand_rat(rng, (d, d), nonzero=True)
    h1 = rand_rat(rng, (N, d), nonzero=True)
    n = m = s = t = N
    NB = remember_min_rows(n, m, s, t)
    p0 = np.dot(np.ones((N, d), dtype=object), W_p)  # p^1 at the reference input u^0 = 1
    p_fixed = [list(r) for r in p0] + [[0] * d for _ in range(s)]

    def p_data(vv):
        return [list(r) for r in np.dot(np.asarray(vv["x"], dtype=object), W_p)] + [[0] * d for _ in range(s)]
    con = remember_stack(NB, d, n, m, s, t, [list(r) for r in h1], p_fixed, name="s003-hyena-equiv (as printed)",
                         reference=REF_H12 + " as printed (remember with p^l as the bias b_1)", p_spec=p_data,
                         names=("u", "gap", "u_copy"))
    mk, spec = con.make_input, con.make_final
    con.variables = {"u": (N, d)}
    con.make_input = lambda v: mk({"x": v["u"], "v": v["u"]})
    con.make_final = lambda v: spec({"x": v["u"], "v": v["u"]})
    return con


def _h12_spec_is_hyena(N=3, d=1, seed=1) -> bool:
    """The as-printed check's specification, rows [0, N), is the Hyena output (used by the tests)."""
    con = h12_as_printed(N, d, seed)
    rng = np.random.default_rng(seed)
    W_p = rand_rat(rng, (d, d), nonzero=True)
    h1 = rand_rat(rng, (N, d), nonzero=True)
    u = rand_rat(7, (N, d))
    W_proj = Z(d, 2 * d)
    W_proj[:, :d], W_proj[:, d:] = W_p, identity(d)
    zH, _ = hyena_reference(u, W_proj, [1], [h1], N, d, 1)
    return bool(np.all(con.final_state({"u": u})[:N] == zH))


register(CatalogueEntry(
    name="s003-hyena-equiv", paper=REF_H12 + " (Hyena -> BaseConv)",
    summary="Hyena (depth L) -> BaseConv: L+2 paper-form layers compute (z^L | p^1..p^L) from (u | 0)",
    build=hyena_to_baseconv, sizes={"N": 4, "d": 2, "L": 2, "seed": 1},
    claim="(N, L, d, N', d)-Hyena by an (N, 5L, d, N'+N, d)-BaseConv (Prop. H.12); here (N, L+2, d, N, (L+1)d)"))
register(CatalogueEntry(
    name="s003-baseconv-as-hyena", paper=REF_H12 + " (BaseConv -> Hyena)",
    summary="identity: L BaseConv layers (b1 = b2 = 0) == L Hyena layers of depth 1, symbolic u, W, h",
    build=baseconv_as_hyena, sizes={"N": 3, "d": 2, "L": 2},
    claim="an L-layer BaseConv is L stacked Hyena layers (Prop. H.12, second half; biases ignored)"))
register_erratum(Erratum(
    id="S003-H12-bias", paper="seed 003", location="Prop. H.12 (Hyena -> BaseConv via remember)",
    as_printed="z^l = remember(u_BC : u, u, h^l, p^l): p^l = (u W_p) enters as remember's fixed bias b_1",
    correction="route p^l through the gate weights W (data-dependent factor), h^l on the conv side: "
               "s003-hyena-equiv, L+2 layers",
    as_printed_check=lambda: h12_as_printed(3, 1, 1),
    corrected_check=lambda: hyena_to_baseconv(3, 1, 1, 1)))
