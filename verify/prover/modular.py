"""Exact evaluation modulo a prime, vectorised over trials: the circuit command's cross-check.

The proof is the verdict; the trials only cross-check it on concrete inputs.  Run in
``Fraction`` arithmetic, one trial at a time, they cost more than compiling and proving a large
circuit (a 10,000-gate circuit: about a second per trial).  Here every trial runs at once, in
``int64`` numpy arrays, modulo a prime ``p < 2^31``: the circuit (``circuits.evaluate`` on a
vector type) and the compiled stack (each layer's own ``Layer.forward`` on residues,
``verify/prover/modp.py``, :data:`TRIALS_FORWARD`) on the same random residues.  Agreement modulo ``p``
at a random point is exact arithmetic, and a nonzero difference polynomial of degree ``d``
vanishes at a uniformly random point with probability at most ``d / p`` (Schwartz-Zippel), which
the report states.

This module's own :func:`forward` writes the same equations as ``constructions.layers`` (BaseConv,
LSA, ELSA, token-form LSA; each kind's ``modular_forward`` in ``constructions.kinds``) by hand in
int64 arrays: the randomized check's single point runs it (``verify/prover/randomized.py``; faster there
than a numpy call per scalar operation) and so does the compiler trace, which reads a BaseConv
layer's inner sides off it; a kind without one runs its own ``Layer.forward`` there too.

Every weight and constant is a rational ``a / b``; it maps to ``a * b^-1 mod p``.  A denominator
divisible by ``p`` makes the next prime of :data:`PRIMES` be used.

Wide primes (``2^31 <= p < 2^61``: the randomized check of ``verify/prover/randomized.py`` draws a 61-bit
one).  A product of two residues no longer fits in int64, so the same layers run on exact
multi-limb arithmetic: :func:`mulmod` (the quotient from an 80-bit ``longdouble`` where numpy has
one, the remainder in wrapping 64-bit integers; Python's integers otherwise), matrix products as
float64 BLAS products of ``b``-bit limbs (``2 b + bitlen(K) <= 53``: every partial sum is an integer
below ``2^53``, exact in any order) put together modulo ``p`` (:func:`_mm_wide`; Python's integers
past the limbs' reach, :func:`_mm_integer`), weight matrices as their nonzero entries
(:class:`Sparse`), and convolutions by channel class (lag 0, equal taps: sums; other filters: BLAS
products of the input's windows with the taps in blocks of lags, :func:`_conv_blocks`).
:func:`forward` picks the arithmetic from ``p``.  ``tests/verify/prover/test_modular_blas.py`` holds
them to Python's integers; ``bench/bench_modular.py`` times them against the loops they replaced.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from constructions import kinds
from constructions.exact_floats import is_lazy
from constructions.layers import sparse_head
from constructions.ops import addresses, lag_index
from polyverify.plumbing.cli import UsageError

#: primes below 2^31 (products of two residues fit in int64)
PRIMES = (2_147_483_647, 2_147_483_629, 2_147_483_587, 2_147_483_579)
_LIMB = 16  # matrix products split one factor into 16-bit limbs: sums of up to 2^16 terms fit
#: primes from here up take the wide arithmetic (module docstring)
WIDE = 1 << 31
#: the wide arithmetic's primes are below this (a sum of two residues stays below 2^62)
WIDE_LIMIT = 1 << 61
#: numpy's longdouble holds a 64-bit significand (x86's 80-bit format): the quotient of
#: :func:`mulmod` is then within one of the truth
_LONGDOUBLE = np.finfo(np.longdouble).nmant >= 63
_SPLIT = 31  # a wide residue as hi * 2^31 + lo: sums of up to 2^32 halves fit in int64


class Unrepresentable(ZeroDivisionError):
    """A rational whose denominator the prime divides."""


def _fraction(q) -> Fraction:
    """An exact rational: a float (numpy's too) is its exact binary value."""
    if type(q) is Fraction:
        return q
    if isinstance(q, (Fraction, int)):
        return Fraction(q)
    if isinstance(q, (float, np.floating)):
        return Fraction(float(q))
    if isinstance(q, np.integer):
        return Fraction(int(q))
    return Fraction(q)


def _inverse(den: int, p: int, q) -> int:
    den %= p
    if den == 0:
        raise Unrepresentable(f"{q} has a denominator divisible by {p}")
    return pow(den, -1, p)


def residue(q, p: int) -> int:
    q = _fraction(q)
    return q.numerator % p * _inverse(q.denominator, p, q) % p


def float_residues(x, p: int) -> np.ndarray:
    """Finite floats (any numpy float dtype) as int64 residues modulo an odd prime ``p`` < 2^61,
    each exactly ``Fraction(x) mod p``, without a ``Fraction`` per entry: a float is ``M 2^E``
    with ``M`` an integer of at most 53 bits (``np.frexp``'s mantissa times 2^53, exact for normal
    and subnormal doubles alike) and ``E`` an integer exponent; its residue is ``M mod p`` times
    ``2^E mod p`` (``2^-1 mod p`` raised to ``-E`` for a negative one), one power per distinct
    exponent (at most 2,100).  An infinity or NaN is a ``ValueError`` (no rational)."""
    x = np.asarray(x)
    if x.dtype.kind != "f":
        raise TypeError(f"float_residues takes a float array, not {x.dtype}")
    x = x.astype(np.float64)  # float16/32 widen exactly
    if not np.isfinite(x).all():
        raise ValueError("a weight is infinite or NaN: no rational to reduce modulo p")
    m, e = np.frexp(x)
    M = np.ldexp(m, 53).astype(np.int64)  # |M| < 2^53, exact (m carries at most 53 bits)
    E = e.astype(np.int64) - 53
    ks, at = np.unique(E, return_inverse=True)
    half = pow(2, -1, p)
    pw = np.array([pow(2, k, p) if k >= 0 else pow(half, -k, p) for k in ks.tolist()], dtype=np.int64)
    return mulmod(M % p, pw[at.reshape(E.shape)], p)


def object_residues(objs, p: int) -> np.ndarray:
    """A list of exact values (ints, ``Fraction``s, floats; anything :func:`residue` takes) as int64
    residues modulo ``p``: integers by one ``%``, ``Fraction``s by their numerator times an inverse
    cached per denominator (learned weights share a few dozen power-of-two denominators), floats
    through :func:`float_residues`; no ``Fraction`` is built for an int, a ``Fraction`` or a float."""
    vals = [0] * len(objs)
    inv: dict[int, int] = {}
    floats, at = [], []
    for i, x in enumerate(objs):
        t = type(x)
        if t is Fraction:
            d = x.denominator
            r = inv.get(d)
            if r is None:
                r = inv[d] = _inverse(d, p, x)
            vals[i] = x.numerator % p * r % p
        elif t is int or t is bool:
            vals[i] = x % p
        elif t is float or isinstance(x, np.floating):
            floats.append(x)
            at.append(i)
        else:
            vals[i] = residue(x, p)
    out = np.array(vals, dtype=np.int64)
    if floats:
        out[np.asarray(at, dtype=np.intp)] = float_residues(np.asarray(floats, dtype=np.float64), p)
    return out


def distinct_entries(A: np.ndarray):
    """The entries of an object array other than the int 0 object, by identity: ``(objects,
    positions, index)`` with ``A.flat[positions[i]] is objects[index[i]]`` (read off the
    array's pointers in numpy's loops: a weight matrix holds few distinct objects many times)."""
    flat = np.asarray(A, dtype=object).ravel()
    ptr = addresses(flat)
    pos = np.flatnonzero(ptr != id(0))
    if not pos.size:
        return [], pos, pos
    _, first, inv = np.unique(ptr[pos], return_index=True, return_inverse=True)
    return flat[pos[first]].tolist(), pos, inv.reshape(-1)


def residues(A, p: int) -> np.ndarray:
    """An exact array (object or int) or a float array as int64 residues modulo ``p``: a float or
    integer dtype vectorised (:func:`float_residues`; integers by ``%`` where they fit in int64), an
    object array by each distinct entry object once (:func:`object_residues`); a lazily read weight
    (``constructions.exact_floats.ExactFloats``) from its stored floats, without a ``Fraction`` per entry."""
    if is_lazy(A):
        return A.residues(p, float_residues, object_residues)
    A = np.asarray(A)
    if A.dtype.kind == "f":
        return float_residues(A, p)
    if A.dtype.kind in "iub":
        return (A.astype(object) % p).astype(np.int64) if A.dtype == np.uint64 else A.astype(np.int64) % p
    A = np.asarray(A, dtype=object)
    out = np.zeros(A.size, dtype=np.int64)
    objs, pos, inv = distinct_entries(A)
    if objs:
        out[pos] = object_residues(objs, p)[inv]
    return out.reshape(A.shape)


def mm(X: np.ndarray, Y, p: int) -> np.ndarray:
    """``X @ Y mod p`` for residues, exactly in int64 (``Y`` split into 16-bit limbs); ``Y`` a
    :class:`Sparse` weight matrix, or a wide prime: :func:`_mm_sparse`, :func:`_mm_wide`."""
    if isinstance(Y, Sparse):
        return _mm_sparse(X, Y, p)
    if p >= WIDE:
        return _mm_wide(X, Y, p)
    if Y.shape[-2] > 2 ** _LIMB:
        raise ValueError(f"contraction of length {Y.shape[-2]} exceeds {2 ** _LIMB}")
    hi, lo = Y >> _LIMB, Y & ((1 << _LIMB) - 1)
    return ((X @ hi) % p * (1 << _LIMB) + X @ lo) % p


def conv(v: np.ndarray, h: np.ndarray, causal: bool, p: int, same: bool = False) -> np.ndarray:
    """Per-channel convolution mod ``p`` in any of ``constructions.ops.conv``'s three
    conventions (causal, circular, "same"), through the same lag index; ``v`` (B, T, C)."""
    if p >= WIDE:
        return _conv_wide(v, h, causal, p, same)
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
    LSA (seed 001 eq. (8)), an ELSA module (eq. (16), (57)-(59)) or token-form LSA (seed 004
    eq. (2)-(3)), as ``constructions.layers``; any other kind through its own ``Layer.forward``
    (:func:`verify.prover.modp.forward_trials`)."""
    if L["kind"] == "generic":
        from . import modp

        return modp.forward_trials(L["layer"], u, p)
    if L["kind"] == "token_lsa":
        ctx = u[..., :-1, :] if L["exclude_last"] else u
        G = mm(np.swapaxes(ctx, -1, -2), ctx, p)  # sum_j e_j e_j^T over the keys
        out = np.zeros_like(u)
        for P, Q in L["heads"]:
            S = mm(mm(np.ascontiguousarray(Q.T), G, p), np.ascontiguousarray(P.T), p)  # Q^T G P^T
            out = (out + mm(u, S, p)) % p
        return (u + out) % p if L["residual"] else out
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
    y = (mm(mulmod(g, z, p), L["W_out"], p) + L["b_out"]) % p
    return (u + y) % p if L["residual"] else y


def _token_lsa_residues(layer, p: int) -> dict:
    heads = [(residues(h.P, p), residues(h.Q, p)) for h in layer.heads]
    return {"kind": "token_lsa", "heads": heads, "exclude_last": layer.exclude_last, "residual": layer.residual}


def _lsa_residues(layer, p: int) -> dict:
    return {"kind": "lsa", "stages": [[_head_residues(h, p) for h in layer.heads]], "residual": layer.residual}


def _elsa_residues(layer, p: int) -> dict:
    stages = [[_head_residues(h, p) for h in st] for st in layer.stages]
    return {"kind": "elsa", "stages": stages, "residual": layer.residual}


def _weight_residues(a, p: int, wide_matrix: bool):
    """One BaseConv weight as residues: a ``constructions.sparse.SparseMatrix`` from its nonzeros
    (never made dense as objects), a wide prime's weight matrix as :class:`Sparse` where sparse."""
    from constructions.sparse import is_sparse

    if not is_sparse(a):
        r = residues(a, p)
        return Sparse.maybe(r) if wide_matrix else r
    vals = residues(np.asarray(a.vals, dtype=object), p)
    if wide_matrix and Sparse.few(len(vals), a.size):
        return Sparse.from_entries(a.shape, a.rows, a.cols, vals)
    out = np.zeros(a.shape, dtype=np.int64)
    out[a.rows, a.cols] = vals
    return Sparse.maybe(out) if wide_matrix else out


def _baseconv_residues(layer, p: int) -> dict:
    out = {name: _weight_residues(a, p, p >= WIDE and name in ("W_in", "W_gate", "W_out"))
           for name, a in layer.arrays().items()}
    out["causal"], out["residual"], out["kind"] = layer.causal, layer.residual, "baseconv"
    out["same"] = layer.same
    return out


# the kinds :func:`forward` runs by hand, vectorised over trials (constructions/kinds.py); every
# other kind runs its own Layer.forward on residues (verify/prover/modp.py)
kinds.provide("baseconv", "modular_forward", _baseconv_residues)
kinds.provide("lsa", "modular_forward", _lsa_residues)
kinds.provide("elsa", "modular_forward", _elsa_residues)
kinds.provide("token_lsa", "modular_forward", _token_lsa_residues)


class ModularUnsupported(UsageError):
    """A layer whose own forward cannot run on residues (it needs more than ``+ - *``)."""


def layer_residues(layer, p: int) -> dict:
    """A layer's weights as residues modulo ``p``, for :func:`forward` (a wide prime: weight
    matrices with few nonzeros as :class:`Sparse`).  A kind without a hand-vectorised forward
    (``constructions.kinds``) keeps its ``Layer`` with residue weights (``verify.prover.modp``)."""
    if kinds.has(layer.kind, "modular_forward"):
        return kinds.get(layer.kind, "modular_forward")(layer, p)
    from . import modp

    return {"kind": "generic", "layer": modp.layer_mod(layer, p, lambda q: residue(q, p))}


# ------------------------------------------------------------------ wide primes (2^31 <= p < 2^61)

def mulmod(a, b, p: int) -> np.ndarray:
    """``a * b mod p`` entry by entry for residues (int64 arrays in ``[0, p)``, broadcast).

    Below :data:`WIDE` the product fits in int64.  Above, with a 64-bit-significand
    ``longdouble``: the quotient ``q`` is ``floor(a b / p)`` within one (``a``, ``b`` < 2^61 are
    exact in it, the product and the quotient each carry a relative error below 2^-63, so the
    computed value is within 1/4 of ``a b / p`` < 2^61), and ``a b - q p``, which then lies in
    ``(-p, 2p)``, is exact in unsigned 64-bit arithmetic (wrapping modulo 2^64, then read as
    signed), moved into ``[0, p)``.  Without such a ``longdouble``: Python's integers."""
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    if p < WIDE:
        return a * b % p
    if not p < WIDE_LIMIT:
        raise ValueError(f"the wide arithmetic takes primes below 2^61, not {p}")
    if not _LONGDOUBLE:
        return (a.astype(object) * b.astype(object) % p).astype(np.int64)
    q = np.floor(a.astype(np.longdouble) * b.astype(np.longdouble) / np.longdouble(p)).astype(np.int64)
    a, b = np.broadcast_arrays(a, b)
    with np.errstate(over="ignore"):
        r = (a.astype(np.uint64) * b.astype(np.uint64) - q.astype(np.uint64) * np.uint64(p))
    r = np.ascontiguousarray(r).view(np.int64)
    r = np.where(r < 0, r + p, r)
    return np.where(r >= p, r - p, r)


def _join(hi: np.ndarray, lo: np.ndarray, p: int) -> np.ndarray:
    """``hi * 2^31 + lo mod p`` for int64 ``hi``, ``lo`` >= 0 (sums of residues' halves)."""
    return (mulmod(hi % p, (1 << _SPLIT) % p, p) + lo % p) % p


def _halves(a: np.ndarray):
    return a >> _SPLIT, a & ((1 << _SPLIT) - 1)


def summod(a: np.ndarray, axis: int, p: int, *, cumulative: bool = False) -> np.ndarray:
    """The sum (``cumulative``: the running sums) of residues along ``axis``, mod ``p``, exact for
    any ``p`` < 2^61 and up to 2^32 terms (each residue split into 31-bit halves first)."""
    hi, lo = _halves(a)
    if cumulative:
        return _join(np.cumsum(hi, axis=axis), np.cumsum(lo, axis=axis), p)
    return _join(hi.sum(axis=axis, keepdims=True), lo.sum(axis=axis, keepdims=True), p)


#: float64 holds every integer of magnitude at most 2^53 exactly: a limb product's partial sums stay below it
FLOAT_EXACT_BITS = 53
#: limbs narrower than this are not used: a contraction too long for them (``K > 2^(53 - 2 * MIN_LIMB_BITS)``)
#: takes the pure-integer product (:func:`_mm_integer`)
MIN_LIMB_BITS = 12


def limb_bits(K: int) -> int:
    """The limb width ``b`` for a contraction of length ``K``: the largest with ``2 b + bitlen(K) <= 53``,
    so that a sum of ``K`` products of two ``b``-bit limbs (each below ``2^(2b)``) is an integer below
    ``K 2^(2b) < 2^(bitlen(K) + 2b) <= 2^53``: exact in float64 in any summation order."""
    return (FLOAT_EXACT_BITS - max(int(K), 1).bit_length()) // 2


def _limbs(X: np.ndarray, bits: int, n: int) -> list[np.ndarray]:
    """``X`` (int64 in ``[0, 2^(bits n))``) as ``n`` float64 arrays of ``bits``-bit limbs, lowest first."""
    mask = (1 << bits) - 1
    return [((X >> (bits * i)) & mask).astype(np.float64) for i in range(n)]


def mulmod_pow2(a: np.ndarray, bits: int, p: int) -> np.ndarray:
    """``a * 2^bits mod p`` for residues ``a`` (int64 in ``[0, p)``, ``p < 2^62``) and ``0 <= bits <= 40``,
    without ``longdouble``: the quotient ``a 2^bits / p`` is below ``2^bits``, and its float64 estimate
    (three roundings, each a relative error at most ``2^-53``) is within ``2^(bits - 51) < 1`` of it, so its
    floor ``q`` is the true quotient's floor or one off; ``a 2^bits - q p`` then lies in ``[-p, 2p)``, within
    int64, and is computed exactly in wrapping 64-bit arithmetic (modulo 2^64), then moved into ``[0, p)``."""
    if not 0 <= bits <= 40:
        raise ValueError(f"mulmod_pow2 takes shifts of 0..40 bits, not {bits}")
    a = np.asarray(a, dtype=np.int64)
    if not bits:
        return a
    q = np.floor(a.astype(np.float64) * ((1 << bits) / p)).astype(np.int64)
    with np.errstate(over="ignore"):
        r = (a.astype(np.uint64) << np.uint64(bits)) - q.astype(np.uint64) * np.uint64(p)
    r = r.view(np.int64)
    r += np.where(r < 0, p, 0)
    r -= np.where(r >= p, p, 0)
    return r


def _horner(parts: list, bits: int, p: int) -> np.ndarray:
    """``sum_j parts[j] 2^(bits j) mod p`` for nonnegative int64 arrays ``parts`` (broadcast): Horner's rule
    from the top, each step one :func:`mulmod_pow2`."""
    acc = parts[-1] % p
    for P in parts[-2::-1]:
        acc = mulmod_pow2(acc, bits, p) + P % p
        acc -= np.where(acc >= p, p, 0)
    return acc


def _scaled_limbs(Y: np.ndarray, bits: int, n: int, p: int) -> list[list[np.ndarray]]:
    """``[[limb j of (Y 2^(bits i) mod p) for j < n] for i < n]``: the weight side of :func:`_mm_wide`
    and :func:`_conv_blocks` (each row's power of two moved into the constant factor, so the products need
    only the ``n`` powers ``2^(bits j)`` to be put together)."""
    out, Yi = [], np.asarray(Y, dtype=np.int64)
    for i in range(n):
        if i:
            Yi = mulmod_pow2(Yi, bits, p)
        out.append(_limbs(Yi, bits, n))
    return out


def limb_plan(K: int, p: int) -> tuple[int, int] | None:
    """``(b, n)``: ``n`` limbs of ``b`` bits that hold a residue below ``p`` (``n b >= bitlen(p - 1)``) with
    ``b = limb_bits(n K)``, the fewest limbs that do; None where that needs limbs narrower than
    :data:`MIN_LIMB_BITS` (:func:`_mm_wide` then takes the integer product)."""
    nb = max(p - 1, 1).bit_length()
    n = 1
    while True:
        b = limb_bits(n * K)
        if b < MIN_LIMB_BITS:
            return None
        if n * b >= nb:
            return b, n
        n += 1


def _mm_wide(X: np.ndarray, Y: np.ndarray, p: int, bits: int | None = None) -> np.ndarray:
    """``X @ Y mod p`` (broadcast over leading axes) for residues below ``p < 2^61``, in one float64 BLAS
    product.

    ``X = sum_i x_i 2^(b i)`` in ``n`` limbs of ``b`` bits, ``Y_i = Y 2^(b i) mod p = sum_j y_ij 2^(b j)``;
    then ``X Y = sum_j 2^(b j) P_j (mod p)`` with ``P_j = sum_i x_i @ y_ij``: all ``n`` of them one product
    ``[x_0 | ... | x_n-1] @ [[y_ij]]`` (the limbs of ``X`` side by side, a contraction of length ``n K``;
    the blocks ``y_ij`` in row ``i``, column ``j``).  With :func:`limb_plan`'s ``b = limb_bits(n K)`` its
    every partial sum is an integer below ``2^53``, hence exact in any order BLAS sums it; :func:`_horner`
    puts the ``P_j`` together.  A contraction too long for limbs of :data:`MIN_LIMB_BITS` takes
    :func:`_mm_integer`.  ``bits``: another limb width (the tests show a wider one is not exact)."""
    K = X.shape[-1]
    if bits is None:
        plan = limb_plan(K, p)
        if plan is None:
            return _mm_integer(X, Y, p)
        bits, n = plan
    else:
        n = -(-max(p - 1, 1).bit_length() // bits)
    N = Y.shape[-1]
    Xc = np.concatenate(_limbs(X, bits, n), axis=-1)
    Yc = np.concatenate([np.concatenate(yl, axis=-1) for yl in _scaled_limbs(Y, bits, n, p)], axis=-2)
    P = (Xc @ Yc).astype(np.int64)  # exact integers below 2^53
    return _horner([P[..., j * N:(j + 1) * N] for j in range(n)], bits, p)


def _mm_integer(X: np.ndarray, Y: np.ndarray, p: int) -> np.ndarray:
    """``X @ Y mod p`` in Python's integers (object arrays): the fallback of :func:`_mm_wide` for a
    contraction too long for float64 limbs, and the reference the tests hold the limb products to."""
    out = (np.asarray(X, dtype=np.int64).astype(object) @ np.asarray(Y, dtype=np.int64).astype(object)) % p
    return np.asarray(out, dtype=object).astype(np.int64)


class Sparse:
    """A constant matrix of residues as its nonzero entries, column by column (the wide
    arithmetic's weight matrices, most of whose entries are zero): ``X @ S`` costs the
    nonzeros times the rows of ``X``, not the dense product."""

    __slots__ = ("shape", "rows", "vals", "cols", "starts")

    #: a matrix with more nonzeros than this fraction of its entries stays dense: a nonzero costs a
    #: ``longdouble`` :func:`mulmod` per row of ``X`` here, the dense product ``n^2`` (9) float64
    #: multiply-adds per entry in BLAS (:func:`_mm_wide`); they cost the same at about 1/400 of the entries
    #: nonzero (257 x 322 and 513 x 642 states, one BLAS thread, random residues) ...
    DENSITY = 1 / 256
    #: ... but a matrix of at most this many entries is sparse up to a quarter of them nonzero: either
    #: product is then a few milliseconds, and the sparse one starts no BLAS threads (which wait for each
    #: other on a loaded machine: bench/results/modular/)
    SMALL = 1 << 16
    SMALL_DENSITY = 0.25

    def __init__(self, A: np.ndarray):
        c, r = np.nonzero(A.T)  # column-major: sorted by column
        self.shape = A.shape
        self.rows, self.vals = r, A[r, c]
        self.cols, self.starts = np.unique(c, return_index=True)

    @classmethod
    def from_entries(cls, shape, rows, cols, vals) -> "Sparse":
        """The same object as ``Sparse(A)`` for the matrix ``A`` of ``shape`` whose entries at
        (``rows``, ``cols``) (distinct positions) are the residues ``vals``, without forming ``A``."""
        rows, cols, vals = np.asarray(rows), np.asarray(cols), np.asarray(vals, dtype=np.int64)
        keep = vals != 0
        rows, cols, vals = rows[keep], cols[keep], vals[keep]
        order = np.lexsort((rows, cols))  # column-major, as np.nonzero(A.T)
        S = cls.__new__(cls)
        S.shape = tuple(shape)
        S.rows, S.vals = rows[order], vals[order]
        S.cols, S.starts = np.unique(cols[order], return_index=True)
        return S

    @classmethod
    def maybe(cls, A: np.ndarray):
        """``A`` as a :class:`Sparse` where it has few nonzeros, else ``A``."""
        return cls(A) if cls.few(np.count_nonzero(A), A.size) else A

    @classmethod
    def few(cls, nnz: int, size: int) -> bool:
        """Whether a matrix of ``size`` entries with ``nnz`` nonzeros is kept as a :class:`Sparse`."""
        return nnz <= (cls.SMALL_DENSITY if size <= cls.SMALL else cls.DENSITY) * size


#: elements of the gathered products (rows of ``X`` times nonzeros) held at once by _mm_sparse
_CHUNK = 1 << 22


def _mm_sparse(X: np.ndarray, S: Sparse, p: int) -> np.ndarray:
    """``X @ S mod p``: each nonzero's product with its row of ``X`` (:func:`mulmod`), summed per
    column (31-bit halves, :func:`summod`'s rule), in chunks of whole columns."""
    if X.shape[-1] != S.shape[0]:
        raise ValueError(f"shape mismatch in matrix product: {X.shape} @ {S.shape}")
    out = np.zeros(X.shape[:-1] + (S.shape[1],), dtype=np.int64)
    nnz = S.rows.size
    if not nnz:
        return out
    per = max(1, int(np.prod(X.shape[:-1])))
    bounds = list(S.starts) + [nnz]
    c0 = 0
    while c0 < len(S.cols):
        c1 = c0 + 1
        while c1 < len(S.cols) and (bounds[c1 + 1] - bounds[c0]) * per <= _CHUNK:
            c1 += 1
        lo_e, hi_e = bounds[c0], bounds[c1]
        prod = mulmod(X[..., S.rows[lo_e:hi_e]], S.vals[lo_e:hi_e], p)
        hi, lo = _halves(prod)
        at = np.asarray(bounds[c0:c1]) - lo_e
        out[..., S.cols[c0:c1]] = _join(np.add.reduceat(hi, at, axis=-1), np.add.reduceat(lo, at, axis=-1), p)
        c0 = c1
    return out


def _conv_wide(v: np.ndarray, h: np.ndarray, causal: bool, p: int, same: bool) -> np.ndarray:
    """:func:`conv` for a wide prime, by channel class: lag-0 filters a product, filters with
    one value at every tap a sum (circular) or running sum (causal) times it, every other
    filter (and every "same" filter) its (T, T) lag matrix times the channels that share it."""
    T, C = h.shape
    out = np.zeros(np.broadcast_shapes(v.shape[:-2], ()) + (T, C), dtype=np.int64)
    nz = h != 0
    lag0 = np.zeros(C, dtype=bool) if same else nz[0] & ~nz[1:].any(axis=0)
    equal = np.zeros(C, dtype=bool) if same else (h == h[:1]).all(axis=0) & nz[0] & ~lag0
    general = nz.any(axis=0) & ~lag0 & ~equal
    if lag0.any():
        c = np.flatnonzero(lag0)
        out[..., c] = mulmod(v[..., c], h[0, c], p)
    if equal.any():
        c = np.flatnonzero(equal)
        s = summod(v[..., c], -2, p, cumulative=causal)
        out[..., c] = mulmod(np.broadcast_to(s, v[..., c].shape), h[0, c], p)
    if general.any():
        c = np.flatnonzero(general)
        out[..., c] = _conv_blocks(np.broadcast_to(v, out.shape)[..., c], h[:, c], causal, same, p)
    return out


#: the block length of :func:`_conv_blocks` (lags ``s = a L + r``, ``r < L``): at most this many
CONV_BLOCK = 64
#: :func:`_conv_blocks` holds at most about this many float64 entries of its windowed inputs at once
#: (channels in chunks)
_CONV_CHUNK = 1 << 21


#: :func:`_stacked_products` cuts each product into row blocks of at most this many multiply-adds: below
#: OpenBLAS's threshold for threads (4 x 65536 by default), so the thousands of per-channel products start no
#: threads (which wait for each other on a loaded machine; bench/results/modular/)
_GEMM_MACS = 1 << 17


def _stacked_products(W: np.ndarray, H: np.ndarray) -> np.ndarray:
    """``W @ H`` for stacks (C, M, K) @ (C, K, N), in row blocks of at most :data:`_GEMM_MACS`
    multiply-adds (the same products: only the calls differ)."""
    C, M, K = W.shape
    rows = max(1, _GEMM_MACS // max(1, K * H.shape[-1]))
    k = M // rows
    if k <= 1:
        return np.matmul(W, H)
    out = np.empty((C, M, H.shape[-1]), dtype=np.result_type(W, H))
    out[:, :k * rows] = np.matmul(W[:, :k * rows].reshape(C, k, rows, K), H[:, None]).reshape(C, k * rows, -1)
    if k * rows < M:
        out[:, k * rows:] = np.matmul(W[:, k * rows:], H)
    return out


def _reduce_every() -> int:
    """How many blocks' sums (each below ``2^53``) :func:`_conv_blocks` adds to a residue (below ``2^61``)
    before reducing modulo ``p``: the total stays below ``2^63``."""
    return ((1 << 63) - (1 << 61)) >> FLOAT_EXACT_BITS


def _conv_blocks(v: np.ndarray, h: np.ndarray, causal: bool, same: bool, p: int) -> np.ndarray:
    """Per-channel convolution ``y[t] = sum_r h[j(t - r)] v[r] mod p`` (``constructions.conv.lag_index``'s
    taps ``j``) of residues ``v`` (B, T, C) with residue filters ``h`` (T, C), exactly, in float64 BLAS
    products.

    In all three conventions ``y[t] = sum_{s < T} h[s] w[t - s + o]`` with ``w`` the input read periodically
    (circular, ``o = 0``) or zero outside ``[0, T)`` (causal: ``o = 0``; "same": ``o = (T - 1) // 2``).  The lags
    are cut into blocks, ``s = a L + r`` (``r < L``, :data:`CONV_BLOCK`), so that
    ``y[t] = sum_a W[t - a L, a]`` with ``W[u, a] = sum_r w[u - r + o] h[a L + r]``: per channel, the
    product of the (rows x ``L``) window matrix of ``w`` with the (``L`` x blocks) matrix of the taps.  Both
    sides are split into limbs as in :func:`_mm_wide` (``limb_plan(L, p)``; the taps' side scaled by
    ``2^(b i)`` first, the limbs' windows side by side), so each float64 product sums ``n L`` integers below
    ``2^(2b)``, exactly; the block sums run in int64 (each block's below ``2^53``), and :func:`_horner` puts the
    limbs together (a sum of more blocks than the int64 range allows is reduced modulo ``p`` on the way).
    ``T^2`` products per channel, as the dense lag matrix, but as BLAS products of windows
    of ``w``: no (T, T) matrix is formed."""
    lead = v.shape[:-2]
    T, C = h.shape
    v = np.asarray(v, dtype=np.int64).reshape((-1, T, C))
    B = v.shape[0]
    L = min(CONV_BLOCK, T)
    A = -(-T // L)
    bits, n = limb_plan(L, p)  # L <= CONV_BLOCK: limbs of about 20 bits (the products' contraction is n L)
    every = _reduce_every()
    off = 0 if not same else (T - 1) // 2
    periodic = not causal and not same
    # rows u of W: 0..T-1, and for "same" (whose taps reach forward) also the A - 1 blocks before 0
    lo = 0 if not same else -(A - 1) * L
    R = T - lo
    # w at positions m = u - r + o for u in [lo, T), r in [0, L): m in [lo + o - L + 1, T - 1 + o]
    m0 = lo + off - L + 1
    m = np.arange(m0, T + off)
    if periodic:
        take = m % T
        valid = np.ones(m.shape, dtype=bool)
    else:
        take = np.clip(m, 0, T - 1)
        valid = (m >= 0) & (m < T)
    # taps: Hp[c, q, a] = h[a L + (L - 1 - q), c] (q = L - 1 - r: the window runs forward in m), 0 past T
    hp = np.zeros((A * L, C), dtype=np.int64)
    hp[:T] = h
    hp = hp.reshape(A, L, C)[:, ::-1, :].transpose(2, 1, 0)  # (C, L(q), A)
    out = np.zeros((B, T, C), dtype=np.int64)
    per = max(1, _CONV_CHUNK // max(1, n * B * R * L))
    t = np.arange(T)
    for c0 in range(0, C, per):
        cs = slice(c0, min(C, c0 + per))
        Cc = cs.stop - cs.start
        w = np.where(valid[None, :, None], v[:, take, cs], 0).transpose(2, 0, 1)  # (Cc, B, M)
        wl = _limbs(np.ascontiguousarray(w), bits, n)
        hl = _scaled_limbs(np.ascontiguousarray(hp[cs]), bits, n, p)  # [i][j]: (Cc, L, A)
        # window row u - lo, column q: w at m = u + off - (L - 1) + q, i.e. index u - lo + q of m; the n limbs'
        # windows side by side (Cc, B, R, n L), against the taps' blocks (Cc, n L, n A): one product per channel
        win = np.concatenate([np.lib.stride_tricks.sliding_window_view(x, L, axis=-1)[:, :, :R, :] for x in wl],
                             axis=-1)
        Hc = np.concatenate([np.concatenate(row, axis=-1) for row in hl], axis=-2)
        P = _stacked_products(win.reshape(Cc, B * R, n * L), Hc).astype(np.int64)  # exact integers below 2^53
        P = P.reshape(Cc, B, R, n, A)
        parts = []
        for j in range(n):
            acc = np.zeros((Cc, B, T), dtype=np.int64)
            for a in range(A):
                if a and a % every == 0:
                    acc %= p
                u = t - a * L
                if periodic:
                    acc += P[:, :, u % T, j, a]
                else:
                    ok = u >= lo
                    acc[:, :, ok] += P[:, :, u[ok] - lo, j, a]
            parts.append(acc)
        out[:, :, cs] = _horner(parts, bits, p).transpose(1, 2, 0)
    return out.reshape(lead + (T, C))


#: the forward the circuit command's trials run: ``"layer"``, each layer's own ``Layer.forward`` on
#: residues (``verify/prover/modp.py``: the one definition of the math, no slower at 64 trials and faster
#: at many, ``bench/results/modp/``), or ``"hand"``, this module's :func:`forward`
TRIALS_FORWARD = "layer"


def trials(g, con, names, n: int, seed: int, *, validated: bool = False) -> dict:
    """``n`` random inputs modulo a prime: the circuit and the stack evaluated on each;
    returns ``{"prime", "n", "agree"}``.  ``validated``: ``g`` is ``circuits.validate``'s result."""
    import circuits as C

    from . import modp

    rng = np.random.default_rng(seed)
    last = None
    for p in PRIMES:
        try:
            layers = [modp.layer_mod(L, p) if TRIALS_FORWARD == "layer" else layer_residues(L, p)
                      for L in con.layers(0)]
            xs = {nm: rng.integers(0, p, size=n, dtype=np.int64) for nm in names}
            want = C.evaluate(g, {nm: modp.Residues(x, p) for nm, x in xs.items()}, const=lambda c, p=p: residue(c, p),
                              validated=validated)
        except Unrepresentable as e:
            last = e
            continue
        # the construction's own input map (int64 residues give an int64 batched state)
        S = con.input_state(xs) if names else np.zeros((n,) + tuple(con.layout.shape), dtype=np.int64)
        if TRIALS_FORWARD == "layer":
            S = modp.forward_stack(layers, S, p)
        else:
            for L in layers:
                S = forward(L, S, p)
        ok = np.ones(n, dtype=bool)
        for nm, got in con.readout(S).items():
            w = want[nm]
            ok &= got == (w.a if isinstance(w, modp.Residues) else residue(w, p))
        return {"prime": p, "n": n, "agree": int(ok.sum())}
    raise Unrepresentable(f"every prime of PRIMES divides a denominator ({last})")
