"""Seed 000 App. D.2.3: Newton(-Schulz) iterations ``M <- M (2I - A^T A M)`` (eq. (24)) with BaseConv.

The paper sketches one iterate as a composition of its primitives: READ and
LINEAR gather ``{a_i}`` and ``flt(M_0)`` at the last token, LINEAR makes copies,
MULTIPLY + LINEAR give ``flt(a^T a)``, MULTIPLY + LINEAR give
``flt((a^T a) M_0)``, and a last LINEAR combines.  A BaseConv layer *is*
``W_out(W_gate(u) * Conv(W_in(u)))``: the gate and conv sides are LINEAR maps
of the state (copies/rearrangements are free), the product is MULTIPLY and
``W_out`` is the LINEAR that follows, so every "MULTIPLY + LINEAR" of the
sketch is one fused product layer (as in App. D.2.1 / D.3.1).

Construction ``s000-newton`` (causal BaseConv; tokens are rows, T = N + 1):

* input: ``a_i`` at token i (i < N), ``flt(M)`` at the last token N.
* state(A, M): the same plus ``flt(Nm)`` with ``Nm = (A^T A) M`` at token N.
* prologue layer 1 (MULTIPLY): per-token outer products ``G_i = flt(a_i a_i^T)``.
* prologue layer 2 (READ + MULTIPLY + LINEAR): a causal all-ones filter sums
  ``G_i`` over the tokens (at token N: ``flt(A^T A)``; this is the READ that
  moves the ``a_i`` to the last token), the gate multiplies by ``M[r, q]``
  (nonzero at token N only) and ``W_out`` sums over r: ``Nm = (A^T A) M``.
* body, ONE layer per iteration: with ``M' = M (2I - (A^T A) M) = 2M - M Nm``
  and ``Nm' = (A^T A) M' = 2 Nm - Nm Nm``, both are degree 2 in the state:
  2 D^3 product channels ``M[p,r] Nm[r,q]`` and ``Nm[p,r] Nm[r,q]``, and
  ``W_out`` forms ``2M - sum_r ...`` and ``2Nm - sum_r ...``.

Depth ``2 + k`` for k iterations; state ``(N+1) x (D + 3D^2 + 2D^3)``.  The body
is proved once in fresh symbols (A, M), hence for every number of iterations.

With ``as_printed=True`` the body's update of M is the paper's last bullet as
printed, ``flt(M_1) := 2 flt(M_0) - flt((a^T a) M_0)`` (LINEAR only); the
verifier rejects it against eq. (24) (erratum ``S000-newton-last-linear``).
"""
from __future__ import annotations

import numpy as np

from constructions.base import Construction, batch_ndim, new_state
from constructions.layout import ChannelAllocator
from constructions.weights import BaseConvBuilder

from . import CatalogueEntry, register

REFERENCE = "seed 000 App. D.2.3, eq. (24)-(25)"


def newton_step(A, M):
    """Eq. (24): ``M (2I - A^T A M)`` on exact object arrays or batched floats."""
    G = np.swapaxes(A, -1, -2) @ A
    return 2 * M - M @ G @ M


class NewtonBaseConv(Construction):
    def _base(self, v, with_nm: bool):
        n, d = self.variables["A"]
        A, M = np.asarray(v["A"]), np.asarray(v["M"])
        nb = batch_ndim(v, self.variables)
        lay = self.layout
        S = new_state(lay, A, nb)
        S[(...,) + (slice(0, n), slice(*lay["a"].cols))] = A
        S[(...,) + (n, slice(*lay["M"].cols))] = M.reshape(M.shape[:-2] + (d * d,))
        if with_nm:
            Nm = (np.swapaxes(A, -1, -2) @ A) @ M
            S[(...,) + (n, slice(*lay["Nm"].cols))] = Nm.reshape(Nm.shape[:-2] + (d * d,))
        return S

    def input_state(self, v):
        return self._base(v, with_nm=False)

    def state(self, v):
        return self._base(v, with_nm=True)

    def final_state(self, v):
        return self.state(v)

    def step(self, v):
        out = dict(v)
        out["M"] = newton_step(np.asarray(v["A"]), np.asarray(v["M"]))
        return out

    def readout(self, state):
        n, d = self.variables["A"]
        M = state[..., n, slice(*self.layout["M"].cols)]
        return {"M": M.reshape(M.shape[:-1] + (d, d))}


def newton(n: int = 3, d: int = 2, *, as_printed: bool = False) -> NewtonBaseConv:
    """Newton iterations on ``A^T A`` (seed 000 App. D.2.3, eq. (24)), see the module docstring."""
    if n < 1 or d < 1:
        raise ValueError(f"need n >= 1 and d >= 1, got n={n}, d={d}")
    T = n + 1
    D2, D3 = d * d, d * d * d
    al = ChannelAllocator(T)
    al.block("a", d, "rows a_i of A at tokens 0..N-1 (0 at the last token)")
    al.block("M", D2, "flt(M), row-major, at the last token")
    al.block("Nm", D2, "flt((A^T A) M), row-major, at the last token")
    al.block("G", D2, "scratch (prologue): flt(a_i a_i^T) at token i")
    al.block("prod", 2 * D3, "scratch: product channels")
    lay = al.layout()
    fm = lambda p, q: p * d + q  # noqa: E731 - row-major flatten

    # prologue 1: G_i = flt(a_i a_i^T) at every token (MULTIPLY of two copies of a_i)
    P1 = BaseConvBuilder(lay, causal=True)
    P1.keep("a", "M")
    for p in range(d):
        for r in range(d):
            P1.product(("G", fm(p, r)), gate_src=("a", p), conv_src=("a", r))
            P1.w_out(("G", fm(p, r)), ("G", fm(p, r)))
    # prologue 2: Nm[p, q] = sum_r (sum_i G_i[p, r]) M[r, q]; the causal all-ones
    # filter sums over the tokens, M is nonzero at the last token only
    P2 = BaseConvBuilder(lay, causal=True)
    P2.keep("a", "M")
    for p in range(d):
        for r in range(d):
            for q in range(d):
                c = ("prod", (p * d + r) * d + q)
                P2.w_in(("G", fm(p, r)), c)
                P2.filter(c, {s: 1 for s in range(T)})
                P2.w_gate(("M", fm(r, q)), c)
                P2.w_out(c, ("Nm", fm(p, q)))
    # body: M <- 2M - M Nm ; Nm <- 2Nm - Nm Nm   (one layer per iteration)
    B = BaseConvBuilder(lay, causal=True)
    B.keep("a")
    for p in range(d):
        for q in range(d):
            for blk in ("M", "Nm"):
                B.product((blk, fm(p, q)), conv_src=(blk, fm(p, q)))  # 1 * blk
                B.w_out((blk, fm(p, q)), (blk, fm(p, q)), 2)
            if as_printed:  # "flt(M_1) := 2 flt(M_0) - flt((a^T a) M_0)"
                B.w_out(("Nm", fm(p, q)), ("M", fm(p, q)), -1)
            for r in range(d):
                cm = ("prod", (p * d + r) * d + q)
                B.product(cm, gate_src=("M", fm(p, r)), conv_src=("Nm", fm(r, q)))
                if not as_printed:
                    B.w_out(cm, ("M", fm(p, q)), -1)
                cn = ("prod", D3 + (p * d + r) * d + q)
                B.product(cn, gate_src=("Nm", fm(p, r)), conv_src=("Nm", fm(r, q)))
                B.w_out(cn, ("Nm", fm(p, q)), -1)

    return NewtonBaseConv(
        name="s000-newton" + ("-as-printed" if as_printed else ""), reference=REFERENCE, layout=lay,
        prologue=[P1.build(), P2.build()], body=[B.build()], epilogue=[],
        params={}, variables={"A": (n, d), "M": (d, d)}, carried=("M",),
        notes=f"state (N+1) x (D + 3D^2 + 2D^3) = {T} x {lay.shape[1]}; causal convolution")


register(CatalogueEntry(
    name="s000-newton", paper=REFERENCE,
    summary="Newton-Schulz iterate M <- M (2I - A^T A M): 2 prologue layers + 1 BaseConv layer per iteration",
    build=newton, sizes={"n": 3, "d": 2},
    claim="sketch only: per iterate, repeated READ/LINEAR to gather {a_i}, flt(M_0) at the last token, then "
          "LINEAR, MULTIPLY+LINEAR (a^T a), MULTIPLY+LINEAR ((a^T a) M_0), LINEAR; 'arbitrary amounts of "
          "memory' (no state size stated)"))


# =========================================================================== the a^T a step of the sketch

class GramLayer(Construction):
    """One token; state ``(flt(a^T), flt(a), 0)`` -> ``(flt(a^T), flt(a), flt(a^T a))``."""

    def _put(self, v, with_gram: bool):
        A = np.asarray(v["A"], dtype=object)
        lay = self.layout
        S = lay.new_state()
        S[0, slice(*lay["at"].cols)] = A.T.reshape(-1)
        S[0, slice(*lay["a"].cols)] = A.reshape(-1)
        if with_gram:
            S[0, slice(*lay["G"].cols)] = A.T.dot(A).reshape(-1)
        return S

    def input_state(self, v):
        return self._put(v, False)

    def state(self, v):
        return self._put(v, False)

    def final_state(self, v):
        return self._put(v, True)

    def step(self, v):
        return v


def flat_product_monomial(k: int, n: int, d: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """The two entries of ``a`` multiplied in entry k of ``flt(a^T) * flt(a)``
    (row-major flatten): ``flt(a^T)[k] = a[k mod N, k div N]``, ``flt(a)[k] = a[k div D, k mod D]``."""
    return (k % n, k // n), (k // d, k % d)


def gram_layer(n: int = 3, d: int = 2, *, as_printed: bool = False) -> GramLayer:
    """The bullet of App. D.2.3 that obtains ``flt(a^T a)`` "using a single application
    of MULTIPLY and LINEAR", as one fused BaseConv layer on one token.

    ``as_printed=True``: MULTIPLY of ``flt(a^T)`` and ``flt(a)`` as printed (N D
    products ``flt(a^T)[k] flt(a)[k]``), then the best LINEAR: every product that
    is a monomial ``a[i,p] a[i,q]`` of ``(a^T a)[p, q]`` is added once with its
    coefficient 1.  Each product is a single monomial and distinct monomials are
    linearly independent, so the monomials of ``(a^T a)[p, q]`` that no product
    provides (for N, D >= 2, e.g. ``a[1,0]^2`` in ``(a^T a)[0,0]``) cannot come from
    *any* LINEAR; the verifier rejects this (best) one.
    ``as_printed=False`` (corrected): the gate and conv sides copy ``a[i,p]`` and
    ``a[i,q]`` for all (i, p, q) (N D^2 products, copies made by ``W_gate``/``W_in``)
    and ``W_out`` sums over i."""
    if n < 1 or d < 1:
        raise ValueError(f"need n >= 1 and d >= 1, got n={n}, d={d}")
    al = ChannelAllocator(1)
    al.block("at", n * d, "flt(a^T), row-major")
    al.block("a", n * d, "flt(a), row-major")
    al.block("prod", n * d * d, "product channels")
    al.block("G", d * d, "flt(a^T a), row-major")
    lay = al.layout()
    B = BaseConvBuilder(lay, causal=True)
    B.keep("at", "a")
    if as_printed:
        used = set()
        for k in range(n * d):
            B.product(("prod", k), gate_src=("at", k), conv_src=("a", k))
            (i1, p), (i2, q) = flat_product_monomial(k, n, d)
            if i1 != i2:
                continue  # a[i1,p] a[i2,q] with i1 != i2 is in no entry of a^T a
            for tgt in {(p, q), (q, p)}:
                key = (tgt, i1)
                if key not in used:  # each monomial once per target entry
                    used.add(key)
                    B.w_out(("prod", k), ("G", tgt[0] * d + tgt[1]))
    else:
        for i in range(n):
            for p in range(d):
                for q in range(d):
                    c = ("prod", (i * d + p) * d + q)
                    B.product(c, gate_src=("a", i * d + p), conv_src=("a", i * d + q))
                    B.w_out(c, ("G", p * d + q))
    return GramLayer(name="s000-newton-gram" + ("-as-printed" if as_printed else ""), reference=REFERENCE,
                     layout=lay, prologue=[], body=[], epilogue=[B.build()], params={},
                     variables={"A": (n, d)})
