"""Exact evaluation modulo a prime, vectorised over trials: the circuit command's cross-check.

The proof is the verdict; the trials only cross-check it on concrete inputs.  Run in
``Fraction`` arithmetic, one trial at a time, they cost more than compiling and proving a large
circuit (a 10,000-gate circuit: about a second per trial).  Here every trial runs at once, in
``int64`` numpy arrays, modulo a prime ``p < 2^31``: the circuit (``circuits.evaluate`` on a
vector type) and the compiled stack (this module's forward, the same equations as
``constructions.layers``: BaseConv, LSA, ELSA) on the same random residues.  Agreement
modulo ``p`` at a random point is exact arithmetic, and a nonzero difference polynomial of
degree ``d`` vanishes at a uniformly random point with probability at most ``d / p``
(Schwartz-Zippel), which the report states.

Every weight and constant is a rational ``a / b``; it maps to ``a * b^-1 mod p``.  A denominator
divisible by ``p`` makes the next prime of :data:`PRIMES` be used.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from constructions.layers import ELSA, LSA, BaseConv, sparse_head
from constructions.ops import lag_index, nonzero_pattern

#: primes below 2^31 (products of two residues fit in int64)
PRIMES = (2_147_483_647, 2_147_483_629, 2_147_483_587, 2_147_483_579)
_LIMB = 16  # matrix products split one factor into 16-bit limbs: sums of up to 2^16 terms fit


class Unrepresentable(ZeroDivisionError):
    """A rational whose denominator the prime divides."""


def residue(q, p: int) -> int:
    q = Fraction(q)
    den = q.denominator % p
    if den == 0:
        raise Unrepresentable(f"{q} has a denominator divisible by {p}")
    return q.numerator % p * pow(den, -1, p) % p


def residues(A, p: int) -> np.ndarray:
    """An exact array (object or int) as int64 residues modulo ``p``."""
    A = np.asarray(A, dtype=object)
    out = np.zeros(A.shape, dtype=np.int64)
    for ix in zip(*np.nonzero(nonzero_pattern(A))):
        out[ix] = residue(A[ix], p)
    return out


def mm(X: np.ndarray, Y: np.ndarray, p: int) -> np.ndarray:
    """``X @ Y mod p`` for residues, exactly in int64 (``Y`` split into 16-bit limbs)."""
    if Y.shape[-2] > 2 ** _LIMB:
        raise ValueError(f"contraction of length {Y.shape[-2]} exceeds {2 ** _LIMB}")
    hi, lo = Y >> _LIMB, Y & ((1 << _LIMB) - 1)
    return ((X @ hi) % p * (1 << _LIMB) + X @ lo) % p


def conv(v: np.ndarray, h: np.ndarray, causal: bool, p: int, same: bool = False) -> np.ndarray:
    """Per-channel convolution mod ``p`` in any of ``constructions.ops.conv``'s three
    conventions (causal, circular, "same"), through the same lag index; ``v`` (B, T, C)."""
    T = v.shape[-2]
    idx, mask = lag_index(T, causal, same)
    out = np.zeros_like(v)
    for t in range(T):
        for r in np.nonzero(mask[t])[0]:
            hs = h[idx[t, r]]
            if hs.any():
                out[..., t, :] = (out[..., t, :] + v[..., r, :] * hs % p) % p
    return out


def _attention(H: np.ndarray, hd: dict, p: int) -> np.ndarray:
    """One head ``(H W3 + B3)(H W1 + B1)^T (H W2 + B2)`` (seed 001 eq. (8), (16)) on residues, on
    the rows and columns where its weights are nonzero (``hd``: ``constructions.layers.sparse_head``
    of the residues)."""
    sides = []
    for key in ("q", "k", "v"):
        rows, W, B = hd[key]
        X = mm(H[..., rows], W, p) if rows else np.zeros(H.shape[:-1] + (W.shape[1],), dtype=np.int64)
        sides.append(X if B is None else (X + B) % p)
    Qm, K, V = sides
    out = np.zeros_like(H)
    out[..., hd["vcols"]] = mm(Qm, mm(np.swapaxes(K, -1, -2), V, p), p)
    return out


def _head_residues(hd, p: int) -> dict:
    r = lambda name: None if getattr(hd, name, None) is None else residues(getattr(hd, name), p)  # noqa: E731
    return sparse_head(*(r(k) for k in ("W1", "B1", "W2", "B2", "W3", "B3")))


def forward(L: dict, u: np.ndarray, p: int) -> np.ndarray:
    """One layer on residues (``L`` from :func:`layer_residues`): BaseConv (seed 000 eq. (19)),
    LSA (seed 001 eq. (8)) or an ELSA module (eq. (16), (57)-(59)), as ``constructions.layers``."""
    if L["kind"] in ("lsa", "elsa"):
        P = u
        for stage in L["stages"]:
            acc = np.zeros_like(u)
            for hd in stage:
                acc = (acc + _attention(P, hd, p)) % p
            P = acc
        return (u + P) % p if L["residual"] else P
    v = (mm(u, L["W_in"], p) + L["b_in"]) % p
    z = (conv(v, L["h"], L["causal"], p, L["same"]) + L["b_conv"]) % p
    g = (mm(u, L["W_gate"], p) + L["b_gate"]) % p
    y = (mm(g * z % p, L["W_out"], p) + L["b_out"]) % p
    return (u + y) % p if L["residual"] else y


def layer_residues(layer, p: int) -> dict:
    if isinstance(layer, LSA):
        heads = [_head_residues(h, p) for h in layer.heads]
        return {"kind": "lsa", "stages": [heads], "residual": layer.residual}
    if isinstance(layer, ELSA):
        stages = [[_head_residues(h, p) for h in st] for st in layer.stages]
        return {"kind": "elsa", "stages": stages, "residual": layer.residual}
    if not isinstance(layer, BaseConv):
        raise TypeError(f"modular evaluation runs BaseConv, LSA and ELSA layers, not {type(layer).__name__}")
    out = {name: residues(a, p) for name, a in layer.arrays().items()}
    out["causal"], out["residual"], out["kind"] = layer.causal, layer.residual, "baseconv"
    out["same"] = layer.same
    return out


class ModVec:
    """A vector of residues modulo ``p`` with ``+`` and ``*`` (for ``circuits.evaluate``)."""

    __slots__ = ("a", "p")

    def __init__(self, a, p: int):
        self.a, self.p = a, p

    def _val(self, o):
        if isinstance(o, ModVec):
            return o.a
        if isinstance(o, (int, Fraction, np.integer)):
            return residue(o, self.p)
        return NotImplemented

    def __add__(self, o):
        v = self._val(o)
        return NotImplemented if v is NotImplemented else ModVec((self.a + v) % self.p, self.p)

    __radd__ = __add__

    def __mul__(self, o):
        v = self._val(o)
        return NotImplemented if v is NotImplemented else ModVec(self.a * v % self.p, self.p)

    __rmul__ = __mul__


def trials(g, con, names, n: int, seed: int, *, validated: bool = False) -> dict:
    """``n`` random inputs modulo a prime: the circuit and the stack evaluated on each;
    returns ``{"prime", "n", "agree"}``.  ``validated``: ``g`` is ``circuits.validate``'s result."""
    import circuits as C

    rng = np.random.default_rng(seed)
    last = None
    for p in PRIMES:
        try:
            layers = [layer_residues(L, p) for L in con.layers(0)]
            xs = {nm: rng.integers(0, p, size=n, dtype=np.int64) for nm in names}
            want = C.evaluate(g, {nm: ModVec(x, p) for nm, x in xs.items()}, const=lambda c, p=p: residue(c, p),
                              validated=validated)
        except Unrepresentable as e:
            last = e
            continue
        # the construction's own input map (int64 residues give an int64 batched state)
        S = con.input_state(xs) if names else np.zeros((n,) + tuple(con.layout.shape), dtype=np.int64)
        for L in layers:
            S = forward(L, S, p)
        ok = np.ones(n, dtype=bool)
        for nm, got in con.readout(S).items():
            w = want[nm]
            ok &= got == (w.a if isinstance(w, ModVec) else residue(w, p))
        return {"prime": p, "n": n, "agree": int(ok.sum())}
    raise Unrepresentable(f"every prime of PRIMES divides a denominator ({last})")
