"""Seed 000 App. D.2.4, Theorem D.31: one layer of causal softmax attention is not SQUARE.

The layer is eq. (26)-(27):

    Attn(u) = softmax((u W_Q)(u W_K)^T + M)(u W_V + B),   M[i, j] = -inf for i < j, else 0,

``u`` (N x D), ``W_Q, W_K, W_V`` (D x D), ``B`` (N x D), softmax over each row.
Theorem D.31: no weights give ``Attn(u) = SQUARE(u)`` (``u_ij^2``) for all u.

For *given* weights, :func:`softmax_vs_square_witness` derives an input on
which the layer differs from SQUARE, by the paper's choice of inputs (eq.
(29): one nonzero entry ``u[a, b] = t``) and the convexity of softmax: row
``a`` of the output is a convex combination of the rows ``k <= a`` of
``V + B``, and ``V = u W_V`` has the single nonzero row ``t W_V[b, :]``, so

    |Attn(u)[a, b]| <= max(|t W_V[b, b] + B[a, b]|, max_{k<a} |B[k, b]|) =: bound(t)

(an exact rational, whatever W_Q, W_K are), while ``SQUARE(u)[a, b] = t^2``.
The smallest integer ``t >= 1`` with ``t^2 > bound(t)`` exists (any
``t > |W_V[b,b]| + max_k |B[k,b]|`` works) and gives the witness.

Verification (:func:`certify_witness`) is independent of that derivation:
the layer is evaluated in interval arithmetic (``mpmath.iv``, 50 digits by
default; scores are exact rationals, shifted by their row maximum before
``exp``), and the witness is accepted only if the enclosure of
``SQUARE(u)[a, b] - Attn(u)[a, b]`` excludes 0: its lower end is a certified
lower bound on the difference.  No float tolerance is involved.

The catalogue entry ``s000-softmax-square`` draws exact rational weights from
``seed`` and returns a check whose ``ProofResult.ok`` is True when a witness
was derived and certified (the claim of Theorem D.31 for those weights); the
result also carries the witness (``WitnessResult.witness``).
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from typing import ClassVar

import mpmath
import numpy as np
from mpmath import iv

from constructions.base import exact
from constructions.claims import Failure, ProofResult, WitnessClaim

from . import CatalogueEntry, register
from .seed000_primitives import random_rational_matrix

REFERENCE = "seed 000 App. D.2.4, Theorem D.31, eq. (26)-(29)"


def random_attention_weights(n: int, d: int, seed: int) -> dict:
    """Exact rational W_Q, W_K, W_V (d x d) and B (n x d) drawn from ``seed``."""
    return {"W_Q": random_rational_matrix(d, d, 4 * seed), "W_K": random_rational_matrix(d, d, 4 * seed + 1),
            "W_V": random_rational_matrix(d, d, 4 * seed + 2), "B": random_rational_matrix(n, d, 4 * seed + 3)}


def _exact_array(a, shape, what):
    a = np.asarray(a, dtype=object)
    if a.shape != tuple(shape):
        raise ValueError(f"{what} has shape {a.shape}, expected {tuple(shape)}")
    return np.vectorize(exact, otypes=[object])(a) if a.size else a


def check_weights(weights: dict, n: int, d: int) -> dict:
    return {"W_Q": _exact_array(weights["W_Q"], (d, d), "W_Q"), "W_K": _exact_array(weights["W_K"], (d, d), "W_K"),
            "W_V": _exact_array(weights["W_V"], (d, d), "W_V"), "B": _exact_array(weights["B"], (n, d), "B")}


def _exact_parts(w: dict, u: np.ndarray):
    """Exact rational scores (QK^T) and values (u W_V + B)."""
    Q, K = u.dot(w["W_Q"]), u.dot(w["W_K"])
    S = Q.dot(K.T)
    V = u.dot(w["W_V"]) + w["B"]
    return S, V


@contextmanager
def _iv_digits(digits: int):
    old = iv.prec
    iv.dps = digits
    try:
        yield
    finally:
        iv.prec = old


def _end_fraction(x, lower: bool = True) -> Fraction:
    """The exact rational value of an interval's lower (or upper) end point."""
    sign, man, e, _ = x._mpi_[0 if lower else 1]
    q = Fraction(int(man)) * (Fraction(2) ** int(e))
    return -q if sign else q


def decimal_bound(q: Fraction, down: bool, sig: int = 30) -> str:
    """``q`` to ``sig`` significant digits, rounded toward -inf (``down``) or +inf."""
    if q == 0:
        return "0"
    import math

    # a first guess from the bit lengths (a Fraction far below the float range makes math.log10
    # fail, and str() of an integer beyond 4300 digits is refused), then corrected exactly
    e = math.floor((abs(q.numerator).bit_length() - q.denominator.bit_length()) * math.log10(2))
    while Fraction(10) ** e > abs(q):
        e -= 1
    while Fraction(10) ** (e + 1) <= abs(q):
        e += 1
    scaled = q * Fraction(10) ** (sig - 1 - e)
    r = math.floor(scaled) if down else math.ceil(scaled)
    digits = str(abs(r))
    e += len(digits) - sig  # a carry of the rounding may add a digit
    return f"{'-' if r < 0 else ''}{digits[0]}.{digits[1:]}e{e:+d}"


def _mp(q: Fraction):
    q = Fraction(q)
    return mpmath.mpf(q.numerator) / q.denominator


def _iv(q: Fraction):
    q = Fraction(q)
    return iv.mpf(q.numerator) / iv.mpf(q.denominator)


def _eq26(weights: dict, u, context, num, exp, total) -> np.ndarray:
    """Eq. (26) at the exact input ``u``, entry by entry in one number system: ``num`` takes a
    Fraction into it, ``exp`` is its exponential and ``total`` the sum of a non-empty list, all
    evaluated under ``context`` (its precision)."""
    u = np.asarray(u, dtype=object)
    n, d = u.shape
    w = check_weights(weights, n, d)
    S, V = _exact_parts(w, np.vectorize(exact, otypes=[object])(u))
    out = np.empty((n, d), dtype=object)
    with context:
        for i in range(n):
            m = max(S[i, j] for j in range(i + 1))  # causal mask: keys j <= i
            e = [exp(num(S[i, j] - m)) for j in range(i + 1)]
            Z = total(e)
            for c in range(d):
                out[i, c] = total([e[j] * num(V[j, c]) for j in range(i + 1)]) / Z
    return out


def attention_enclosure(weights: dict, u, digits: int = 50) -> np.ndarray:
    """Interval enclosures (``mpmath.iv``) of every entry of eq. (26) at the exact input ``u``."""
    return _eq26(weights, u, _iv_digits(digits), _iv, iv.exp, lambda xs: sum(xs[1:], xs[0]))


def attention_mp(weights: dict, u, digits: int = 50) -> np.ndarray:
    """Eq. (26) at the exact input ``u`` in ``mpmath.mpf`` with ``digits`` digits (for display)."""
    return _eq26(weights, u, mpmath.workdps(digits), _mp, mpmath.exp, mpmath.fsum)


def square(u) -> np.ndarray:
    u = np.asarray(u, dtype=object)
    return np.vectorize(lambda x: exact(x) * exact(x), otypes=[object])(u)


def convexity_bound(weights: dict, n: int, d: int, a: int, b: int, t: Fraction) -> Fraction:
    """The exact bound on ``|Attn(t E_ab)[a, b]|`` from the convexity of softmax (module docstring)."""
    w = check_weights(weights, n, d)
    vals = [abs(t * w["W_V"][b, b] + w["B"][a, b])] + [abs(w["B"][k, b]) for k in range(a)]
    return max(vals)


def derive_witness(weights: dict, n: int, d: int, entry: tuple[int, int] | None = None):
    """``(u, (a, b), t, bound)``: the paper's single-entry input ``u = t E_ab`` with the
    smallest integer ``t >= 1`` such that ``t^2 > bound(t)``."""
    a, b = entry if entry is not None else (n - 1, d - 1)
    if not (0 <= a < n and 0 <= b < d):
        raise ValueError(f"entry {(a, b)} outside the {n} x {d} output")
    t = Fraction(1)
    while not (t * t > convexity_bound(weights, n, d, a, b, t)):
        t += 1
    u = np.empty((n, d), dtype=object)
    u.fill(Fraction(0))
    u[a, b] = t
    return u, (a, b), t, convexity_bound(weights, n, d, a, b, t)


def softmax_vs_square_witness(weights: dict, n: int, d: int, *, entry=None, digits: int = 50):
    """``(input, layer_output, square)``: an exact rational input on which the causal
    softmax attention layer with ``weights`` (eq. (26)-(27)) differs from SQUARE.
    ``layer_output`` holds ``mpmath.mpf`` values with ``digits`` digits, ``square`` is
    exact.  The difference is certified by :func:`certify_witness`."""
    u, _, _, _ = derive_witness(weights, n, d, entry)
    return u, attention_mp(weights, u, digits), square(u)


@dataclass
class Certificate:
    ok: bool
    entry: tuple[int, int] | None
    square: Fraction | None  # SQUARE(u)[entry], exact
    enclosure: tuple[str, str] | None  # Attn(u)[entry] lies in [lo, hi]
    gap_lower_bound: str | None  # |SQUARE - Attn| >= this (> 0), from interval arithmetic, rounded down
    digits: int = 50


def certify_witness(weights: dict, u, digits: int = 50, entry=None) -> Certificate:
    """Certify ``Attn(u) != SQUARE(u)``: some entry (``entry`` if given) whose interval
    enclosure of ``SQUARE(u) - Attn(u)`` excludes 0.  Among all entries the one with
    the largest certified gap is reported."""
    enc = attention_enclosure(weights, u, digits)
    sq = square(u)
    best = None
    cands = [tuple(entry)] if entry is not None else list(np.ndindex(*sq.shape))
    with _iv_digits(digits):
        for idx in cands:
            diff = _iv(sq[idx]) - enc[idx]
            lo, hi = _end_fraction(diff, True), _end_fraction(diff, False)
            if lo > 0:
                gap = lo
            elif hi < 0:
                gap = -hi
            else:
                continue
            if best is None or gap > best[1]:
                best = (idx, gap)
        if best is None:
            idx = cands[0]
            return Certificate(False, tuple(int(i) for i in idx), sq[idx], _ends(enc[idx]), None, digits)
        idx, gap = best
        return Certificate(True, tuple(int(i) for i in idx), sq[idx], _ends(enc[idx]), decimal_bound(gap, down=True),
                           digits)


def _ends(x) -> tuple[str, str]:
    """An interval's end points as decimals rounded outward (so the printed interval still encloses)."""
    return decimal_bound(_end_fraction(x, True), down=True), decimal_bound(_end_fraction(x, False), down=False)


@dataclass
class WitnessResult(ProofResult):
    """A ``ProofResult`` for a claim checked on a witness: ``ok`` is True when the
    witness was found and certified; ``witness`` says which input and entry.  Its verdict word is
    WITNESSED (``verify.prover.kernel.verdict``): an inequality certified at one input, not an
    identity proved."""

    witness: dict = field(default_factory=dict)
    kind: ClassVar[str] = "witness"


def check_softmax_square(weights: dict, n: int, d: int, *, digits: int = 50,
                         name: str = "s000-softmax-square") -> WitnessResult:
    """Derive a witness for ``weights`` and certify it (see the module docstring).

    ``ok``: the analytic bound ``t^2 > bound(t)`` holds exactly *and* the interval
    enclosure at ``digits`` digits separates the layer's output from ``t^2``.
    ``sections``: ``{"derivation": ..., "certificate": ...}``; on failure a
    :class:`constructions.claims.Failure` names the entry (no counterexample: the claim is
    an inequality at one input, not a polynomial identity)."""
    t0 = time.perf_counter()
    w = check_weights(weights, n, d)
    u, (a, b), t, bound = derive_witness(w, n, d)
    derivation_ok = t * t > bound
    cert = certify_witness(w, u, digits, entry=(a, b))
    res = WitnessResult(name, derivation_ok and cert.ok, 0.0,
                        sections={"derivation": derivation_ok, "certificate": cert.ok}, entries_checked=1)
    res.witness = {"input": f"u = {t} at entry {[a, b]}, 0 elsewhere (eq. (29))", "entry": [a, b], "t": str(t),
                   "square": str(cert.square), "layer_output_enclosure": list(cert.enclosure),
                   "convexity_bound": str(bound), "exact_gap_lower_bound": str(t * t - bound),
                   "certified_gap_lower_bound": cert.gap_lower_bound, "digits": digits}
    if not res.ok:
        res.failure = Failure(
            section="certificate" if derivation_ok else "derivation", layer=-1, layer_in_section=-1,
            region="softmax attention output (eq. (26))", entry=(a, b), state_index=(a, b),
            residual=f"SQUARE - Attn at {[a, b]}: enclosure of Attn {cert.enclosure}, SQUARE {cert.square}",
            counterexample=None,
            note=("the interval enclosure does not exclude equality" if derivation_ok
                  else f"t^2 = {t * t} <= bound {bound}"))
    res.seconds = time.perf_counter() - t0
    return res


def softmax_square(n: int = 4, d: int = 3, seed: int = 1):
    """Theorem D.31 (seed 000 App. D.2.4) for one layer of eq. (26)-(27) with exact rational
    weights drawn from ``seed``: returns a WitnessClaim running :func:`check_softmax_square`
    (derive the eq. (29) witness, certify it in interval arithmetic)."""
    if n < 1 or d < 1:
        raise ValueError(f"need n, d >= 1, got n={n}, d={d}")
    weights = random_attention_weights(n, d, seed)
    return WitnessClaim("s000-softmax-square", lambda: check_softmax_square(weights, n, d))


register(CatalogueEntry(
    name="s000-softmax-square", paper=REFERENCE,
    summary="causal softmax attention != entry-wise SQUARE: certified witness for weights drawn from seed",
    build=softmax_square, sizes={"n": 4, "d": 3, "seed": 1},
    claim="Theorem D.31: one-layer single-head causal softmax attention cannot represent SQUARE "
          "(proof via the single-entry inputs of eq. (29))"))
