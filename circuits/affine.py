"""Exact affine forms over integer atom ids: the circuit passes' workhorse, sparse or dense as fits.

Every pass that walks a large circuit carries each node's value as an *affine form*, a rational
linear combination of *atoms* (inputs, products) plus a constant:
:func:`constructions.compiler.linearise.linearise`, :func:`constructions.compiler.reassociate.
reassociate` and :func:`circuits.evaluate_affine` (the proof's specification side).  An ``add``
sums its operands' forms, a product by a constant scales one.  A random circuit of 100k gates
over a few hundred products has forms of a hundred terms or more at almost every node, while a
circuit of many small independent blocks has forms of a few terms over a large set of atoms, so
one representation does not fit both.  A :class:`Form` is integer numerators over one common
positive denominator ``den``, held

* **sparse**: a dict ``id -> int`` (few terms, scattered ids), merged term by term; or
* **dense**: a ``flint.fmpz_poly`` whose coefficient ``i`` is atom ``lo + i`` (python-flint's
  integer polynomials used as exact integer *vectors*): a sum of forms is a scalar multiple
  and an add per operand in C on the coefficient arrays, whatever their length.

:func:`lincomb` chooses per result: dense where the ids it covers span at least
:data:`DENSE_MIN` and at most ``DENSE_SLACK * n + DENSE_MIN`` ids for ``n`` operand terms, sparse
otherwise (a dense coefficient costs a machine word where a dict entry costs about twenty, and C
arithmetic where a dict entry costs interpreted bytecode).  The constant term is id
:data:`CONST` = -1.  Every result is reduced (the gcd of ``den`` and the numerators is 1, no zero
term is stored), so which representation holds a form never changes its value,
:meth:`Form.items` or :meth:`Form.key`.

Forms are immutable: every operation returns a new one and never changes an operand, so forms
may be shared between nodes freely.
"""
from __future__ import annotations

from fractions import Fraction
from math import gcd

import flint

#: the constant term's id
CONST = -1
#: a result whose ids span fewer than this stays sparse
DENSE_MIN = 32
#: a result is dense where its span is at most this many times its operands' terms (+ DENSE_MIN)
DENSE_SLACK = 8

_poly_t = flint.fmpz_poly


class Form:
    """An exact affine form (module docstring); build with :func:`atom`, :func:`const`,
    :func:`from_items`, :func:`lincomb`, :func:`scale`.  ``lo <= id <= hi`` for every id with a
    nonzero coefficient (``hi`` exact; ``lo`` exact for a sparse form)."""

    __slots__ = ("d", "p", "den", "lo", "hi", "_level")

    def __init__(self, d, p, den: int, lo: int, hi: int):
        self.d, self.p, self.den, self.lo, self.hi = d, p, den, lo, hi
        self._level = None  # (the levels list, the level): see level()

    def __len__(self) -> int:
        """Terms held (a dense form: its coefficients, zeros inside the span included)."""
        return len(self.d) if self.p is None else self.p.length()

    @property
    def is_const(self) -> bool:
        """No atom term (zero, or a constant)."""
        return self.hi < 0

    def numerators(self) -> dict:
        """``{id: integer numerator}`` of the nonzero terms, over :attr:`den` (a new dict for a
        dense form; a sparse form's own dict, not to be changed)."""
        if self.p is None:
            return self.d
        lo = self.lo
        return {lo + i: int(c) for i, c in enumerate(self.p.coeffs()) if c}

    def ids(self):
        """The ids with a nonzero coefficient (the constant's included)."""
        if self.p is None:
            return self.d.keys()
        lo = self.lo
        return [lo + i for i, c in enumerate(self.p.coeffs()) if c]

    def const_value(self) -> Fraction:
        """The constant term (0 where there is none)."""
        if self.p is None:
            c = self.d.get(CONST, 0)
        else:
            c = int(self.p[0]) if self.lo == CONST else 0
        return Fraction(c, self.den)

    def atoms(self) -> list:
        """The atom ids with a nonzero coefficient (the constant's excluded)."""
        return [i for i in self.ids() if i != CONST]

    def items(self) -> list:
        """``(id, Fraction)`` pairs in increasing id, the constant's under :data:`CONST`."""
        den = self.den
        return [(i, Fraction(c, den)) for i, c in sorted(self.numerators().items())]

    def key(self) -> tuple:
        """Hashable and ordered; equal forms, equal keys (whether sparse or dense: both reduced)."""
        return (self.den, tuple(sorted(self.numerators().items())))

    def __eq__(self, other) -> bool:
        return isinstance(other, Form) and self.key() == other.key()

    __hash__ = None

    def __repr__(self) -> str:
        return f"Form({dict(self.items())})"


ZERO = Form({}, None, 1, 0, -2)


def _rat(m) -> tuple[int, int]:
    """``(numerator, denominator > 0)`` of an int, Fraction, gmpy2 or flint rational."""
    if m.__class__ is int:
        return m, 1
    if hasattr(m, "numerator"):
        return int(m.numerator), int(m.denominator)
    return int(m.p), int(m.q)  # flint.fmpq


def _sparse(d: dict, den: int) -> Form:
    """A sparse form from nonzero integer numerators, reduced."""
    if not d:
        return ZERO
    if den != 1:
        g = gcd(den, *d.values())
        if g > 1:
            d = {i: c // g for i, c in d.items()}
            den //= g
    return Form(d, None, den, min(d), max(d))


def atom(i: int) -> Form:
    """The form ``1 * atom i``."""
    return Form({i: 1}, None, 1, i, i)


def const(c) -> Form:
    """The constant form ``c`` (int, Fraction, gmpy2 or flint rational)."""
    n, d = _rat(c)
    return _sparse({CONST: n}, d) if n else ZERO


def from_items(items) -> Form:
    """A form from ``(id, rational)`` pairs (repeated ids summed)."""
    acc: dict = {}
    for i, c in items:
        acc[i] = acc.get(i, 0) + Fraction(*_rat(c))
    den = 1
    for c in acc.values():
        den = _lcm(den, c.denominator)
    return _sparse({i: c.numerator * (den // c.denominator) for i, c in acc.items() if c}, den)


def scale(f: Form, c) -> Form:
    """``c * f`` for a rational ``c``."""
    if c == 1:
        return f
    return lincomb([(f, c)])


def _lcm(a: int, b: int) -> int:
    return a if b == 1 or a % b == 0 else a * b // gcd(a, b)


def lincomb(terms) -> Form:
    """``sum m * f`` over ``terms = [(f, m), ...]`` (``m`` an int or a rational), exact and
    reduced; dense or sparse as the module docstring says."""
    parts = []
    lo = hi = None
    n = 0
    L = 1
    for f, m in terms:
        if f.hi < f.lo:  # ZERO (every other form has lo <= hi)
            continue
        qn, qd = _rat(m)
        if qn == 0:
            continue
        parts.append((f, qn, qd))
        L = _lcm(L, f.den * qd)
        if lo is None:
            lo, hi = f.lo, f.hi
        else:
            if f.lo < lo:
                lo = f.lo
            if f.hi > hi:
                hi = f.hi
        n += len(f.d) if f.p is None else f.p.length()
    if not parts:
        return ZERO
    if len(parts) == 1 and parts[0][1] == 1 and parts[0][2] == 1:
        return parts[0][0]
    # each operand's integer multiplier over the common denominator L
    mults = [(f, qn * (L // (f.den * qd))) for f, qn, qd in parts]
    span = hi - lo + 1
    if DENSE_MIN <= span <= DENSE_SLACK * n + DENSE_MIN:
        return _dense(mults, lo, L)
    # sparse: the largest operand's numerators copied (or scaled), the others merged term by term
    mults.sort(key=lambda t: -len(t[0]))
    f0, k0 = mults[0]
    t0 = f0.numerators()
    d = dict(t0) if k0 == 1 else {i: c * k0 for i, c in t0.items()}
    zeros = False
    for f, k in mults[1:]:
        get = d.get
        for i, c in f.numerators().items():
            x = get(i)
            if x is None:
                d[i] = c if k == 1 else c * k
            else:
                x = x + c if k == 1 else x + c * k
                d[i] = x
                if not x:
                    zeros = True
    if zeros:
        d = {i: c for i, c in d.items() if c}
    return _sparse(d, L)


def _dense(mults: list, lo: int, L: int) -> Form:
    """The dense-path :func:`lincomb` (``mults``: ``(form, integer multiplier over L)``): the dense
    operands' numerators scaled and added as integer polynomials in C, the sparse operands' terms
    added coefficient by coefficient (O(1) each), then reduced by the gcd of the content and L."""
    acc, sparse = None, []
    for f, k in mults:
        if f.p is None:
            sparse.append((f, k))
            continue
        p = f.p if f.lo == lo else f.p.left_shift(f.lo - lo)
        if k != 1:
            p = p * k
        acc = p if acc is None else acc + p
    if sparse:
        if acc is None:
            acc = _poly_t([])
        elif any(acc is f.p for f, _ in mults):
            acc = acc * 1  # an operand's own polynomial: copied before it is changed
        for f, k in sparse:
            for i, c in f.d.items():
                j = i - lo
                acc[j] = acc[j] + (c if k == 1 else c * k)
    if acc.is_zero():
        return ZERO
    if L != 1:
        g = gcd(L, int(acc.content()))
        if g > 1:
            acc, L = acc // g, L // g
    return Form(None, acc, L, lo, lo + acc.degree())


def level(f: Form, levels) -> int:
    """The largest ``levels[a]`` over the form's atoms (0 for a constant form); remembered on the
    form for the same ``levels`` list (atoms' levels are set once, when the atom is made)."""
    if f.hi < 0:
        return 0
    memo = f._level
    if memo is not None and memo[0] is levels:  # a form's atoms and their levels never change
        return memo[1]
    lv = max([levels[a] for a in f.ids() if a != CONST])
    f._level = (levels, lv)
    return lv


__all__ = ["CONST", "DENSE_MIN", "DENSE_SLACK", "Form", "ZERO", "atom", "const", "from_items", "scale",
           "lincomb", "level"]
