"""Residues modulo a prime as scalars of ``Layer.forward``'s exact path: any layer kind on residues.

``constructions.layers`` writes each layer's math once, in ``constructions.ops``, whose exact path
takes numpy object arrays of any scalar with ``+``, ``-``, ``*`` and ``==``.  Residues modulo ``p``
are such scalars, so every layer kind runs modulo ``p`` through its own ``forward``, with nothing
re-implemented.

:class:`Residues` holds the residues of one entry over many trials (an int64 vector in ``[0, p)``),
so one forward evaluates every trial at once, for any prime ``p < 2^61`` (products through
``verify.prover.modular.mulmod``).  The circuit command's trials run every kind this way
(``verify.prover.modular.TRIALS_FORWARD``).

Weights map entry by entry (each distinct object once) to the residue of the rational it holds
(``verify.prover.modular.residue``, a Python int); a structural zero stays the int ``0`` object, so
``ops`` skips it as it skips it in a Fraction forward.  ``verify.prover.modular`` keeps a hand-vectorised
int64 forward of the kinds that register one in ``constructions.kinds``, which the randomized
check's single point runs (faster there: one point costs Residues a numpy call per scalar
operation, ``bench/results/modp/``); :func:`forward_trials` is that check's path for every other
kind, and the reference the hand-written forward is tested against.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from constructions import ops

from .modular import WIDE, distinct_entries, mulmod, residue


class Residues:
    """One entry's residues modulo ``p`` over the trials: ``a`` an int64 array in ``[0, p)``.

    ``==`` and truth are over all trials at once (``ops`` asks them to skip structural zeros
    and ones: an entry that is 0, or 1, in every trial may be skipped exactly)."""

    __slots__ = ("a", "p")

    def __init__(self, a, p: int):
        self.a, self.p = a, p

    def _val(self, o):
        t = type(o)
        if t is Residues:
            return o.a
        if t is int:
            return o % self.p
        if isinstance(o, (Fraction, np.integer)):
            return residue(o, self.p)
        return NotImplemented

    def _mul(self, x, y):
        return x * y % self.p if self.p < WIDE else mulmod(x, y, self.p)

    def __add__(self, o):
        v = self._val(o)
        return NotImplemented if v is NotImplemented else Residues((self.a + v) % self.p, self.p)

    __radd__ = __add__

    def __sub__(self, o):
        v = self._val(o)
        return NotImplemented if v is NotImplemented else Residues((self.a - v) % self.p, self.p)

    def __rsub__(self, o):
        v = self._val(o)
        return NotImplemented if v is NotImplemented else Residues((v - self.a) % self.p, self.p)

    def __mul__(self, o):
        v = self._val(o)
        return NotImplemented if v is NotImplemented else Residues(self._mul(self.a, v), self.p)

    __rmul__ = __mul__

    def __neg__(self):
        return Residues(-self.a % self.p, self.p)

    def __bool__(self):
        return bool(self.a.any())

    def __eq__(self, o):
        v = self._val(o)
        return False if v is NotImplemented else bool(np.all(self.a == v))

    __hash__ = None


def residue_array(A, convert) -> np.ndarray:
    """An exact weight array with each distinct nonzero entry object converted once by
    ``convert``; structural zeros stay the int 0 object."""
    A = np.asarray(A, dtype=object)
    out = ops.zeros_like_object(A.shape)
    objs, pos, inv = distinct_entries(A)
    if objs:
        conv = np.empty(len(objs), dtype=object)
        conv[:] = [convert(x) if x != 0 else 0 for x in objs]
        out.reshape(-1)[pos] = conv[inv]
    return out


def layer_mod(layer, p: int, convert=None):
    """``layer`` (any kind) with its weights as residues modulo ``p`` (``convert``: a rational to
    its scalar; default its residue as a Python int), ready for its own ``forward``."""
    convert = (lambda q: residue(q, p)) if convert is None else convert
    memo: dict[int, tuple] = {}

    def f(A):
        hit = memo.get(id(A))
        if hit is None or hit[0] is not A:
            hit = memo[id(A)] = (A, residue_array(A, convert))
        return hit[1]
    return layer.map(f)


def state_of_trials(S: np.ndarray, p: int) -> np.ndarray:
    """A batched int64 state (trials, T, C) of residues as one (T, C) object array of
    :class:`Residues` (an entry 0 in every trial: the structural zero)."""
    S = np.asarray(S, dtype=np.int64)
    out = ops.zeros_like_object(S.shape[1:])
    for ix in zip(*np.nonzero(S.any(axis=0))):
        out[ix] = Residues(np.ascontiguousarray(S[(slice(None),) + ix]), p)
    return out


def trials_of_state(S: np.ndarray, n: int, p: int) -> np.ndarray:
    """The inverse of :func:`state_of_trials`: (n, T, C) int64 residues (an entry that is a plain
    integer, a constant the weights alone produced, is the same in every trial)."""
    out = np.zeros((n,) + S.shape, dtype=np.int64)
    for ix, x in np.ndenumerate(S):
        if type(x) is Residues:
            out[(slice(None),) + ix] = x.a
        elif x != 0:
            out[(slice(None),) + ix] = residue(x, p)
    return out


def forward_stack(layers, u: np.ndarray, p: int) -> np.ndarray:
    """``layers`` (residue weights: :func:`layer_mod`) one after another on a batched int64 state
    ``(n, T, C)`` of residues: each layer's own ``forward`` on :class:`Residues`, every trial at
    once.  A forward that needs more than ``+ - *`` and ``==`` is refused in one line
    (:class:`verify.prover.modular.ModularUnsupported`)."""
    from .modular import ModularUnsupported

    u = np.asarray(u, dtype=np.int64)
    X = state_of_trials(u, p)
    for layer in layers:
        try:
            X = layer.forward(X)
        except (TypeError, AttributeError) as e:
            raise ModularUnsupported(f"layer kind {layer.kind!r} cannot run modulo p: its forward needs more than "
                                     f"ring arithmetic ({type(e).__name__}: {e})") from None
    return trials_of_state(np.asarray(X, dtype=object), u.shape[0], p)


def forward_trials(layer, u: np.ndarray, p: int) -> np.ndarray:
    """One layer: :func:`forward_stack` of ``[layer]``."""
    return forward_stack([layer], u, p)
