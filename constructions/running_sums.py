"""Exact prefix sums held as shared chains: :class:`RunningSum`, :func:`prefix_sums`.

Why.  A causal prefix-sum channel (the all-ones causal filter, seed 000 App. D.3.1 eq. (47):
``sum_{i <= t} b_i a_i`` and ``sum_{i <= t} a_i a_i^T`` at every token ``t``) holds, over ``N``
tokens, ``N^2 / 2`` terms per channel when each token's sum is formed as its own polynomial:
about 135 million polynomial terms for the causal GD construction at N = 256, D = 64, more than
the machine's memory.  Yet each token's sum is the previous token's plus one term.  A
:class:`RunningSum` is that node of the chain (``prev + term``), never formed as a polynomial
unless an operation needs its value, so the N sums of a channel hold N terms in all.

Exactness.  Every operation is exact and on the value ``prev + term``:

* a product with the exact integer 1 and a sum with the exact integer 0 return the node itself
  (as for every exact scalar here); any other arithmetic forms the value (:meth:`RunningSum.value`:
  the chain's terms added in a balanced tree, ``constructions.ops.tree_sum``) and goes on with it,
  without keeping it (a formed value is as large as the sum);
* ``a == b`` for two chains holds when, walking both back together, every pair of terms is equal
  and both chains end together (or at nodes already found equal, or at the same node): the sums
  of equal terms are equal.  Otherwise (different lengths, a pair of terms that differ) both
  values are formed and compared, so ``==`` is the exact equality of the values either way.  A
  pair found equal is remembered on the left node (``_same``, one direction: no reference
  cycle), so comparing two states token by token walks each chain once;
* the truth value is the value's (formed, compared with zero), except inside
  :func:`truth_as_candidate`, where ``constructions.ops.nonzero_pattern`` reads it: there a running
  sum is a nonzero candidate without its value formed, which only costs work (the exact
  operations never skip an entry their mask calls nonzero).

Which values.  :func:`prefix_sums` builds chains only for a column holding a scalar type registered with
:func:`lazy_sums_for` (the prover registers python-flint's polynomials and its wrapper); for any
other type (int, Fraction, the prover's abstract values, floats) it is ``numpy.add.accumulate``,
so nothing changes where the terms are small or where a caller reads entries' attributes.
"""
from __future__ import annotations

import contextlib
import threading

import numpy as np

__all__ = ["RunningSum", "prefix_sums", "lazy_sums_for", "truth_as_candidate"]

#: the scalar types whose prefix sums are held as chains (registered by the arithmetic that
#: has them, e.g. ``verify/prover/flint_backend.py``)
_LAZY_TYPES: set = set()
_CANDIDATES = threading.local()


@contextlib.contextmanager
def truth_as_candidate():
    """Within this block (in this thread), a running sum's truth value is True without its value
    being formed: ``constructions.ops.nonzero_pattern`` reads truth values to find the candidate
    nonzeros, and calling a zero sum nonzero there only costs work."""
    before = getattr(_CANDIDATES, "on", False)
    _CANDIDATES.on = True
    try:
        yield
    finally:
        _CANDIDATES.on = before


def lazy_sums_for(*types) -> None:
    """Hold the prefix sums of these scalar types as :class:`RunningSum` chains."""
    _LAZY_TYPES.update(types)


class RunningSum:
    """``prev + term`` of an exact prefix-sum chain, formed only when its value is needed (see the
    module docstring).  ``prev`` is the previous node or None (the chain's first term)."""

    __slots__ = ("prev", "term", "length", "_same")

    def __init__(self, prev: "RunningSum | None", term):
        self.prev, self.term = prev, term
        self.length = 1 if prev is None else prev.length + 1
        self._same = None

    def terms(self) -> list:
        """The chain's terms, first to last."""
        out, node = [], self
        while node is not None:
            out.append(node.term)
            node = node.prev
        out.reverse()
        return out

    def value(self):
        """``sum(self.terms())``, formed now (not kept)."""
        from .ops import tree_sum

        return tree_sum(self.terms())

    # ---------------------------------------------------------------- arithmetic on the value
    def __add__(self, o):
        if type(o) is int and o == 0:
            return self
        return _value(self) + _value(o)

    def __radd__(self, o):
        if type(o) is int and o == 0:
            return self
        return _value(o) + self.value()

    def __sub__(self, o):
        if type(o) is int and o == 0:
            return self
        return self.value() - _value(o)

    def __rsub__(self, o):
        return _value(o) - self.value()

    def _structural(self, o):
        """``self * o`` where ``o`` is the int 1 (the node) or 0 (zero); else None."""
        if type(o) is int and o in (0, 1):
            return self if o == 1 else 0
        return None

    def __mul__(self, o):
        hit = self._structural(o)
        return self.value() * _value(o) if hit is None else hit

    def __rmul__(self, o):
        hit = self._structural(o)
        return _value(o) * self.value() if hit is None else hit

    def __truediv__(self, o):
        return self.value() / _value(o)

    def __pow__(self, e):
        return self.value() ** e

    def __neg__(self):
        return -self.value()

    def __pos__(self):
        return self

    def __bool__(self):
        if getattr(_CANDIDATES, "on", False):  # nonzero_pattern's candidates (truth_as_candidate)
            return True
        return bool(self.value())

    # ---------------------------------------------------------------- exact comparison
    def __eq__(self, o):
        if o is self:
            return True
        if isinstance(o, RunningSum) and _chains_equal(self, o):
            return True
        return bool(self.value() == _value(o))

    def __ne__(self, o):
        return not self.__eq__(o)

    __hash__ = None

    def __repr__(self):
        return f"RunningSum(<{self.length} terms>)"


def _value(x):
    return x.value() if isinstance(x, RunningSum) else x


def _chains_equal(a: RunningSum, b: RunningSum) -> bool:
    """Both chains' terms equal pair by pair (a sufficient condition for equal sums); the pairs
    found equal are remembered (``_same`` on the left node)."""
    pairs = []
    while True:
        if a is b:
            break
        if a is None or b is None:  # one chain is longer: not decided here
            return False
        if a._same is b or b._same is a:
            break
        pairs.append((a, b))
        a, b = a.prev, b.prev
    for x, y in reversed(pairs):
        if not (x.term is y.term or x.term == y.term):
            return False
        x._same = y
    return True


def prefix_sums(col) -> np.ndarray:
    """The prefix sums of a 1-D array along its axis: ``out[t] = col[0] + ... + col[t]``.  For an
    exact (object) column of a registered type (:func:`lazy_sums_for`), a chain of
    :class:`RunningSum` nodes (``out[t] = RunningSum(out[t - 1], col[t])``: the same values, held
    in N terms); otherwise ``numpy.add.accumulate``."""
    col = np.asarray(col)
    if col.dtype != object or not col.size or _LAZY_TYPES.isdisjoint(map(type, col.tolist())):
        return np.add.accumulate(col, axis=0)
    out = np.empty(col.shape, dtype=object)
    node = None
    for t, x in enumerate(col):
        if isinstance(x, RunningSum):
            x = x.value()  # a chain of chains: its terms formed (rare: a prefix of prefix sums)
        node = RunningSum(node, x)
        out[t] = node
    return out
