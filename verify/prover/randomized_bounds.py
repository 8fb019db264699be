"""The randomized check's arithmetic (``verify/prover/randomized.py`` states the method): the
specification's own code run on two scalar types, and the bounds of the layers' output entries.

* :class:`ModP`: one residue modulo ``p`` (the specification's states at the random point);
* :class:`Bound`: upper bounds ``(d, n, l)`` on one polynomial (degree, 1-norm, common
  denominator), so that the specification's code bounds what it computes, whatever cancels;
* :func:`layer_bound`: the bounds of a layer's output from its input's, by each kind's rule
  (registered in ``constructions.kinds`` as ``entry_bounds``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from constructions import kinds

from . import modular


class RandomizedUnsupported(ValueError):
    """What the randomized check cannot evaluate (a layer type it does not know, a specification
    that is not polynomial, a witness claim): the command refuses it (exit 2)."""


# ------------------------------------------------------------------ scalars for the specification

def _rat(x) -> Fraction:
    """An exact rational from a constant of the specification's code (a float is its exact
    binary value); anything else is not a constant: TypeError."""
    if isinstance(x, Fraction):
        return x
    if isinstance(x, (bool, int, np.integer)):
        return Fraction(int(x))
    if isinstance(x, (float, np.floating)):
        if not math.isfinite(float(x)):
            raise RandomizedUnsupported(f"a non-finite number {x!r} (a weight or a constant of the specification)")
        return Fraction(float(x))
    num, den = getattr(x, "numerator", None), getattr(x, "denominator", None)
    if isinstance(num, int) and isinstance(den, int) and den:
        return Fraction(num, den)
    raise TypeError(f"not a constant: {type(x).__name__}")


class SpecValue:
    """What a polynomial of the specification's code may meet, for :class:`Bound` and :class:`ModP`
    alike: division by a constant only, powers by a non-negative integer only."""

    __slots__ = ()

    def __truediv__(self, o):
        if isinstance(o, SpecValue):
            raise RandomizedUnsupported("the specification divides by a polynomial (not a polynomial identity)")
        return self * (1 / _rat(o))


def _check_power(k) -> None:
    if not isinstance(k, (int, np.integer)) or k < 0:
        raise RandomizedUnsupported(f"a power {k!r} of a polynomial in the specification")


class Bound(SpecValue):
    """Upper bounds on one polynomial (the module docstring): degree ``d``, 1-norm ``n``, common
    denominator ``l``; ``acc[0]`` collects the lcm of every constant's denominator met."""

    __slots__ = ("d", "n", "l", "acc")

    def __init__(self, d: int, n: int, l: int, acc: list):  # noqa: E741
        self.d, self.n, self.l, self.acc = d, n, l, acc

    def _const(self, o):
        if type(o) is Bound:
            return o
        if type(o) is int:
            return Bound(0, abs(o), 1, self.acc) if o else 0
        try:
            q = _rat(o)
        except TypeError:
            return NotImplemented
        if not q:
            return 0
        self.acc[0] = math.lcm(self.acc[0], q.denominator)
        return Bound(0, math.ceil(abs(q)), q.denominator, self.acc)

    def __add__(self, o):
        if type(o) is not Bound:  # (two bounds, the common case, go straight to the rule below)
            o = self._const(o)
            if o is NotImplemented or o == 0:
                return self if o == 0 else NotImplemented
        d, e = self.d, o.d
        return Bound(d if d >= e else e, self.n + o.n, math.lcm(self.l, o.l), self.acc)

    __radd__ = __sub__ = __rsub__ = __add__

    def __mul__(self, o):
        if type(o) is Bound:
            return Bound(self.d + o.d, self.n * o.n, self.l * o.l, self.acc)
        o = self._const(o)
        if o is NotImplemented or o == 0:
            return 0 if o == 0 else NotImplemented
        return Bound(self.d + o.d, self.n * o.n, self.l * o.l, self.acc)

    __rmul__ = __mul__

    def __neg__(self):
        return self

    __pos__ = __neg__

    def __pow__(self, k):
        _check_power(k)
        out = 1
        for _ in range(int(k)):
            out = self * out
        return out

    def __bool__(self):  # possibly nonzero: ops computes with it
        return True

    def __eq__(self, o):  # never known to equal a constant (ops' structural ones and zeros)
        return o is self

    __hash__ = object.__hash__


class ModP(SpecValue):
    """One residue modulo ``p`` in the specification's code; a constant meets it as its residue
    (``verify.prover.modular.residue``: a denominator ``p`` divides is :class:`modular.Unrepresentable`)."""

    __slots__ = ("v", "p")

    def __init__(self, v: int, p: int):
        self.v, self.p = v, p

    def _c(self, o):
        t = type(o)
        if t is ModP:
            return o.v
        if t is int:  # the common constants (ops' structural ones, integer weights): no Fraction
            return o % self.p
        try:
            return modular.residue(_rat(o), self.p)
        except TypeError:
            return NotImplemented

    def __add__(self, o):
        if type(o) is ModP:  # (two residues, the common case, without the constant's conversion)
            return ModP((self.v + o.v) % self.p, self.p)
        c = self._c(o)
        return NotImplemented if c is NotImplemented else ModP((self.v + c) % self.p, self.p)

    __radd__ = __add__

    def __sub__(self, o):
        c = self._c(o)
        return NotImplemented if c is NotImplemented else ModP((self.v - c) % self.p, self.p)

    def __rsub__(self, o):
        c = self._c(o)
        return NotImplemented if c is NotImplemented else ModP((c - self.v) % self.p, self.p)

    def __mul__(self, o):
        if type(o) is ModP:
            return ModP(self.v * o.v % self.p, self.p)
        c = self._c(o)
        return NotImplemented if c is NotImplemented else ModP(self.v * c % self.p, self.p)

    __rmul__ = __mul__

    def __neg__(self):
        return ModP(-self.v % self.p, self.p)

    def __pos__(self):
        return self

    def __pow__(self, k):
        _check_power(k)
        return ModP(pow(self.v, int(k), self.p), self.p)

    def __bool__(self):
        return self.v != 0

    def __eq__(self, o):
        c = self._c(o)
        return False if c is NotImplemented else self.v == c

    def __hash__(self):
        return hash(self.v)


def evaluated(fn, what: str):
    """``fn()``: a specification's (claim's) own code on this module's scalars; code that needs
    more than a ring's ``+ - *`` and constants (a polynomial ring's own methods, a comparison)
    cannot run on them: :class:`RandomizedUnsupported`."""
    try:
        return fn()
    except (AttributeError, TypeError) as e:
        raise RandomizedUnsupported(f"{what} needs more than ring arithmetic ({type(e).__name__}: {e}): --check "
                                    f"random cannot evaluate it; --check exact can") from None


# ------------------------------------------------------------------ bounds (d, n, l)

ZERO = (-1, 0, 1)  # the zero polynomial: no degree, norm 0


def _b_add(x, y):
    if x[0] < 0:
        return y
    if y[0] < 0:
        return x
    return (max(x[0], y[0]), x[1] + y[1], math.lcm(x[2], y[2]))


def _b_max(x, y):
    """Bounds of two polynomials at once (the maxima over a state's entries)."""
    if x[0] < 0:
        return y
    if y[0] < 0:
        return x
    return (max(x[0], y[0]), max(x[1], y[1]), math.lcm(x[2], y[2]))


def _b_mul(x, y, terms: int = 1):
    """A product of two factors, summed over ``terms`` index values (a Gram product)."""
    if x[0] < 0 or y[0] < 0 or terms == 0:
        return ZERO
    return (x[0] + y[0], terms * x[1] * y[1], x[2] * y[2])


@dataclass(frozen=True)
class WeightStats:
    """A constant array: nonzero at all, its largest column sum of absolute values and largest
    absolute value (both rounded up to integers), the lcm of its denominators."""

    nonzero: bool
    colsum: int
    maxabs: int
    den: int


def weight_stats(A) -> WeightStats:
    """:class:`WeightStats` of a constant array (each distinct entry object converted once; a column
    sum adds each distinct object's absolute value times its count in the column).  A
    ``constructions.sparse.SparseMatrix`` is read off its nonzeros, never made dense (the causal
    GD construction's channel maps are (2D^2 + 5D + 2)^2 entries, almost all zero)."""
    from constructions.sparse import is_sparse

    if is_sparse(A):
        objs, pos, inv = modular.distinct_entries(np.asarray(A.vals, dtype=object))
        cols = A.cols[pos]
    else:
        A = np.asarray(A, dtype=object)
        if A.ndim == 1:
            A = A.reshape(-1, 1)
        objs, pos, inv = modular.distinct_entries(A)
        cols = pos % A.shape[-1]
    vals = [abs(_rat(x)) for x in objs]
    live = [i for i, q in enumerate(vals) if q]
    if not live:
        return WeightStats(False, 0, 0, 1)
    k = len(objs)  # each (column, distinct object) pair as one integer key: a 1-D unique, not axis=1's
    keys, counts = np.unique(np.asarray(cols, dtype=np.int64) * k + np.asarray(inv, dtype=np.int64),
                             return_counts=True)
    col: dict[int, Fraction] = {}
    for c, i, m in zip((keys // k).tolist(), (keys % k).tolist(), counts.tolist()):
        if vals[i]:
            col[c] = col.get(c, 0) + m * vals[i]
    return WeightStats(True, math.ceil(max(col.values())), math.ceil(max(vals[i] for i in live)),
                  math.lcm(*(vals[i].denominator for i in live)))


def _b_lin(x, s: WeightStats):
    """``x W`` (or a convolution with taps ``W``): each output a sum of inputs times constants."""
    if x[0] < 0 or not s.nonzero:
        return ZERO
    return (x[0], s.colsum * x[1], x[2] * s.den)


def _b_const(s: WeightStats):
    return (0, s.maxabs, s.den) if s.nonzero else ZERO


def layer_bound(L, x, shape: tuple[int, int], stats) -> tuple:
    """The bound of every entry of ``L``'s output from the bound ``x`` of every entry of its
    input (the module docstring); ``shape`` the state's (rows, columns); ``stats(A)`` the
    :class:`WeightStats` of a weight array.  Each kind's rule is registered in ``constructions.kinds``
    (``entry_bounds``); a kind without one is refused (:class:`RandomizedUnsupported`)."""
    try:
        rule = kinds.get(L.kind, "entry_bounds")
    except kinds.KindUnsupported as e:
        raise RandomizedUnsupported(f"the randomized check cannot bound this stack: {e}") from None
    return rule(L, x, shape, stats)


def _baseconv_bound(L, x, shape, stats) -> tuple:
    """Seed 000 eq. (19): gate and convolution sides affine in ``u``, their product, ``W_out``."""
    g = _b_add(_b_lin(x, stats(L.W_gate)), _b_const(stats(L.b_gate)))
    v = _b_add(_b_lin(x, stats(L.W_in)), _b_const(stats(L.b_in)))
    z = _b_add(_b_lin(v, stats(L.h)), _b_const(stats(L.b_conv)))
    y = _b_add(_b_lin(_b_mul(g, z), stats(L.W_out)), _b_const(stats(L.b_out)))
    return _b_add(y, x) if L.residual else y


def _attention_bound(L, x, shape, stats) -> tuple:
    """LSA (seed 001 eq. (8), one stage of bias-free heads) and ELSA (eq. (16), (57)-(59))."""
    T, C = shape
    stages = [[(h.W1, None, h.W2, None, h.W3, None) for h in L.heads]] if L.kind == "lsa" else \
        [[(h.W1, h.B1, h.W2, h.B2, h.W3, h.B3) for h in st] for st in L.stages]
    P = x
    for stage in stages:
        acc = ZERO
        for W1, B1, W2, B2, W3, B3 in stage:
            K, V, Q = (_b_add(_b_lin(P, stats(W)), _b_const(stats(B)) if B is not None else ZERO)
                       for W, B in ((W1, B1), (W2, B2), (W3, B3)))
            acc = _b_add(acc, _b_mul(Q, _b_mul(K, V, T), C))  # (Q (K^T V)): sums over T rows, C columns
        P = acc
    return _b_add(P, x) if L.residual else P


def _token_lsa_bound(L, x, shape, stats) -> tuple:
    """Seed 004 eq. (2)-(3): ``E Q^T G P^T`` per head, ``G`` the keys' Gram matrix."""
    T, C = shape
    G = _b_mul(x, x, T - 1 if L.exclude_last else T)  # sum_j e_j e_j^T
    out = ZERO
    for hd in L.heads:
        q, pt = stats(hd.Q), stats(np.asarray(hd.P, dtype=object).T)
        if G[0] < 0 or not (q.nonzero and pt.nonzero):
            continue
        S = (G[0], q.colsum * pt.colsum * G[1], G[2] * q.den * pt.den)  # Q^T G P^T
        out = _b_add(out, _b_mul(x, S, C))  # E S
    return _b_add(out, x) if L.residual else out


# each kind's bound rule (constructions/kinds.py)
kinds.provide("baseconv", "entry_bounds", _baseconv_bound)
kinds.provide("lsa", "entry_bounds", _attention_bound)
kinds.provide("elsa", "entry_bounds", _attention_bound)
kinds.provide("token_lsa", "entry_bounds", _token_lsa_bound)


def state_bound(S, acc: list) -> tuple:
    """The maxima over the entries of a specification state computed on :class:`Bound`."""
    objs, _, _ = modular.distinct_entries(np.asarray(S, dtype=object))
    bs = [x for x in objs if type(x) is Bound]
    out = (max(x.d for x in bs), max(x.n for x in bs), math.lcm(*{x.l for x in bs})) if bs else ZERO
    for x in objs:
        if type(x) is not Bound:
            q = _rat(x)
            if q:
                acc[0] = math.lcm(acc[0], q.denominator)
                out = _b_max(out, (0, math.ceil(abs(q)), q.denominator))
    return out


def to_residues(S, p: int) -> np.ndarray:
    """A specification state computed on :class:`ModP` (and constants) as int64 residues."""
    S = np.asarray(S, dtype=object)
    out = np.zeros(S.size, dtype=np.int64)
    objs, pos, inv = modular.distinct_entries(S)
    if objs:
        vals = [x.v if isinstance(x, ModP) else modular.residue(_rat(x), p) for x in objs]
        out[pos] = np.asarray(vals, dtype=np.int64)[inv]
    return out.reshape(S.shape)
