"""A stored float tensor read exactly, lazily: the floats kept as they are.

A weight file's float tensor (float16, float32 or float64) holds finite binary fractions: each entry
``x`` is exactly ``M 2^E`` (``M`` an integer of at most 53 bits).  :class:`ExactFloats` keeps the
array as stored and forms exact values only where and when a consumer reads them, instead of one
``Fraction`` object per entry for the whole file (at 512x128, 20M entries: minutes of CPU and
several GiB before any work):

* residues modulo a prime, vectorised (:meth:`ExactFloats.residues`: the refutation's modular forward,
  ``verify/prover/modular.py``);
* floats of any width, each entry rounded once (:meth:`ExactFloats.to_float`; float64: the stored
  values themselves);
* the nonzero mask (:meth:`ExactFloats.nonzero`);
* ``Fraction``s of selected entries (``A[key]``), or the whole eager object array
  (:meth:`ExactFloats.materialise`, also ``numpy.asarray(A)``): what every consumer that does not
  know this class gets, so each of them reads exactly the values it read before.

Entries read as declared rationals (a weight file's ``exact`` metadata,
``constructions.weights_io.declared_stands_in``) keep their rational values: a sparse override
(``over_pos``, ``over_vals``), applied by every reading above.

``dtype`` is ``object``: the array *is* exact, so code that branches on ``dtype == object`` takes
the exact path (never a float computation on the stored floats).  Comparison with ``==``/``!=``
is entrywise and exact; arithmetic goes through ``numpy.asarray`` (exact, eager).
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

#: the float dtypes read exactly (widened to float64 without rounding)
FLOAT_DTYPES = (np.float16, np.float32, np.float64)


class ExactFloats:
    """The exact values of a finite float array ``floats``, with declared rationals ``over_vals`` at
    the flat positions ``over_pos`` (sorted, distinct, each stored entry nonzero there)."""

    __slots__ = ("floats", "over_pos", "over_vals")
    #: numpy's binary operators defer to Python's, which coerce through ``__array__`` (exact)
    __array_priority__ = 1000
    __hash__ = None

    def __init__(self, floats: np.ndarray, over_pos=None, over_vals=None):
        f = np.asarray(floats)
        if f.dtype not in FLOAT_DTYPES:
            raise TypeError(f"ExactFloats holds float16/32/64 arrays, not {f.dtype}")
        if not np.isfinite(f).all():
            raise ValueError("ExactFloats: a value is infinite or NaN (no rational)")
        if f.flags.writeable:  # the stored values are the exact values: nothing may change them
            f = f.view()
            f.flags.writeable = False
        pos = np.zeros(0, dtype=np.int64) if over_pos is None else np.asarray(over_pos, dtype=np.int64).ravel()
        vals = np.empty(0, dtype=object) if over_vals is None else np.asarray(over_vals, dtype=object).ravel()
        if len(pos) != len(vals):
            raise ValueError(f"ExactFloats: {len(pos)} override positions and {len(vals)} values")
        if len(pos):
            order = np.argsort(pos, kind="stable")
            pos, vals = pos[order], vals[order]
            if pos[0] < 0 or pos[-1] >= f.size or (np.diff(pos) == 0).any():
                raise ValueError("ExactFloats: override positions must be distinct and inside the array")
            vl = vals.tolist()
            if not set(map(type, vl)) <= {Fraction}:
                raise TypeError("ExactFloats: override values must be Fractions")
            if (f.ravel()[pos] == 0).any() or not all(vl):  # (a Fraction's truth: nonzero)
                raise ValueError("ExactFloats: an override must replace a nonzero entry by a nonzero rational")
        self.floats, self.over_pos, self.over_vals = f, pos, vals

    # ------------------------------------------------------------------ array protocol

    @property
    def shape(self) -> tuple:
        return self.floats.shape

    @property
    def ndim(self) -> int:
        return self.floats.ndim

    @property
    def size(self) -> int:
        return self.floats.size

    @property
    def dtype(self):
        return np.dtype(object)

    @property
    def nbytes(self) -> int:
        """Bytes held: the stored floats and the overrides' positions (their Fractions not counted)."""
        return self.floats.nbytes + self.over_pos.nbytes + 8 * len(self.over_vals)

    def __len__(self) -> int:
        return len(self.floats)

    def __repr__(self) -> str:
        return (f"ExactFloats(shape={self.shape}, stored {self.floats.dtype}, "
                f"{len(self.over_pos)} declared rationals)")

    def __array__(self, dtype=None, copy=None):
        if copy is False:
            raise ValueError("ExactFloats: the exact array is formed on request (a copy)")
        if dtype is not None and np.dtype(dtype).kind == "f":
            return self.to_float(dtype)  # each exact value rounded once, as ``materialise().astype``
        a = self.materialise()
        return a if dtype is None or np.dtype(dtype) == object else a.astype(dtype)

    def __bool__(self):
        raise ValueError("the truth value of an ExactFloats array is ambiguous (as numpy's)")

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    # ------------------------------------------------------------------ exact readings

    def _values(self, flat_positions: np.ndarray) -> list:
        """The exact values at ``flat_positions`` (a 1-D int array): the int 0 for a zero, the
        declared rational where one stands in, else the binary fraction the float is."""
        xs = self.floats.ravel()[flat_positions].astype(np.float64).tolist()
        out = [Fraction(x) if x else 0 for x in xs]
        if len(self.over_pos):
            at = np.searchsorted(self.over_pos, flat_positions)
            at = np.minimum(at, len(self.over_pos) - 1)
            hit = np.flatnonzero(self.over_pos[at] == flat_positions)
            vals = self.over_vals
            for i in hit.tolist():
                out[i] = vals[at[i]]
        return out

    def materialise(self, scalar: str = "fraction") -> np.ndarray:
        """The eager exact object array (what ``weights_io.exact_tensor`` gave, declared rationals
        put in): one ``Fraction`` per nonzero entry, the int 0 object for every zero.  ``scalar="mpq"``:
        gmpy2's ``mpq`` of the same values instead (``mpq(float)`` is the float's binary value; a
        declared rational ``mpq(numerator, denominator)``), for an exact evaluation in GMP."""
        if scalar == "fraction":
            make = Fraction
            over = self.over_vals
        elif scalar == "mpq":
            import gmpy2

            make = gmpy2.mpq
            over = np.empty(len(self.over_vals), dtype=object)
            over[:] = [gmpy2.mpq(q.numerator, q.denominator) for q in self.over_vals.tolist()]
        else:
            raise ValueError(f"scalar must be 'fraction' or 'mpq', not {scalar!r}")
        a = np.empty(self.size, dtype=object)
        a[:] = [make(x) if x else 0 for x in self.floats.astype(np.float64).ravel().tolist()]
        if len(self.over_pos):
            a[self.over_pos] = over
        return a.reshape(self.shape)

    exact = materialise

    def __getitem__(self, key):
        """Exact values of the selected entries (a scalar: ``Fraction`` or the int 0), formed for those
        entries only."""
        if isinstance(key, (int, np.integer)) and self.ndim == 1 or (
                isinstance(key, tuple) and len(key) == self.ndim and all(isinstance(k, (int, np.integer)) for k in key)):
            ix = (key,) if not isinstance(key, tuple) else key
            ix = tuple(int(k) + n if k < 0 else int(k) for k, n in zip(ix, self.shape))
            if not all(0 <= k < n for k, n in zip(ix, self.shape)):
                raise IndexError(f"index {key} is out of bounds for shape {self.shape}")
            return self._values(np.asarray([np.ravel_multi_index(ix, self.shape)]))[0]  # one entry, no index array
        if not len(self.over_pos):  # the stored floats' selection, converted: nothing else formed
            sub = np.asarray(self.floats[key])
            a = np.empty(sub.size, dtype=object)
            a[:] = [Fraction(x) if x else 0 for x in sub.astype(np.float64).ravel().tolist()]
            return a.reshape(sub.shape)
        where = np.arange(self.size, dtype=np.int64).reshape(self.shape)[key]
        if np.ndim(where) == 0:
            return self._values(np.asarray([where]))[0]
        a = np.empty(where.size, dtype=object)
        a[:] = self._values(where.ravel())
        return a.reshape(where.shape)

    def __setitem__(self, key, value):
        raise TypeError("ExactFloats is read-only (the values stored in the file)")

    @property
    def flat(self):
        """Every entry's exact value, row-major (the eager array's ``flat``)."""
        return self.materialise().flat

    @property
    def T(self) -> np.ndarray:
        return self.materialise().T

    #: numpy methods answered on the eager exact array (exact, formed for the call): what a layer's exact
    #: forward or a report may call on a weight
    _EAGER_METHODS = frozenset({"swapaxes", "transpose", "diagonal", "take", "flatten", "squeeze", "sum", "any",
                                "all", "max", "min", "dot", "item", "trace", "repeat", "conj", "conjugate"})

    def __getattr__(self, name):
        if name in ExactFloats._EAGER_METHODS:
            return getattr(self.materialise(), name)
        raise AttributeError(f"'ExactFloats' object has no attribute {name!r}")

    def tolist(self):
        return self.materialise().tolist()

    def ravel(self) -> "ExactFloats":
        return self.reshape(-1)

    def reshape(self, *shape) -> "ExactFloats":
        """The same entries in another shape (row-major, as numpy's): flat positions unchanged."""
        f = np.ascontiguousarray(self.floats).reshape(*shape)
        return ExactFloats(f, self.over_pos, self.over_vals)

    def copy(self) -> np.ndarray:
        """A writable copy: the eager exact object array (a caller that copies means to write)."""
        return self.materialise()

    def astype(self, dtype, copy=True):
        """``object``: the eager exact array; a float dtype: :meth:`to_float`."""
        if np.dtype(dtype) == object:
            return self.materialise()
        if np.dtype(dtype).kind == "f":
            return self.to_float(dtype)
        return self.materialise().astype(dtype)

    def nonzero(self) -> np.ndarray:
        """The mask of nonzero entries (a declared rational stands in only for a nonzero float and is
        nonzero itself)."""
        return self.floats != 0

    def count_nonzero(self) -> int:
        return int(np.count_nonzero(self.floats))

    def is_float_only(self) -> bool:
        """No declared rational: every entry is exactly its stored float."""
        return not len(self.over_pos)

    def to_float(self, dtype=np.float64) -> np.ndarray:
        """The entries as floats of ``dtype`` (numpy float16/32/64), each exact value rounded once, to
        nearest, ties to even: the stored floats cast (exact values as stored); a declared rational
        rounded from the rational itself (float64: it is the stored float by
        ``weights_io.declared_stands_in``)."""
        dt = np.dtype(dtype)
        if dt.kind != "f":
            raise TypeError(f"to_float takes a float dtype, not {dt}")
        with np.errstate(over="ignore"):
            out = self.floats.astype(dt)  # a widening cast is exact; a narrowing one rounds once
        if len(self.over_pos) and dt != self.floats.dtype:
            out = out.copy() if out is self.floats else out
            flat = out.reshape(-1)
            flat[self.over_pos] = [_round_once(q, dt) for q in self.over_vals.tolist()]
        return out

    def residues(self, p: int, float_residues, object_residues) -> np.ndarray:
        """The entries as int64 residues modulo the prime ``p``: the stored floats by
        ``float_residues(floats, p)`` (vectorised: mantissa times a power of two), the declared
        rationals by ``object_residues(list, p)`` (``verify/prover/modular.py``'s two functions,
        passed in: this module sits below the prover)."""
        out = np.asarray(float_residues(self.floats, p), dtype=np.int64).reshape(-1).copy()
        if len(self.over_pos):
            out[self.over_pos] = object_residues(self.over_vals.tolist(), p)
        return out.reshape(self.shape)

    # ------------------------------------------------------------------ comparison

    def _compare(self, other, equal: bool):
        if isinstance(other, ExactFloats) and other.shape == self.shape:
            same = equal_exact(self, other, entrywise=True)
            return same if equal else ~same
        if np.ndim(other) == 0 and not isinstance(other, np.ndarray) and other == 0:
            return (self.floats == 0) if equal else (self.floats != 0)
        a = self.materialise()
        return a == other if equal else a != other

    def __eq__(self, other):
        return self._compare(other, True)

    def __ne__(self, other):
        return self._compare(other, False)


def _round_once(q: Fraction, dt: np.dtype) -> float:
    """``q`` rounded once to ``dt`` (float64: Python's correctly rounded ``float``; narrower: through
    gmpy2's context of the format, ``constructions.base.to_float_array``)."""
    if dt == np.float64:
        return float(q)
    from .base import to_float_array

    a = np.empty(1, dtype=object)
    a[0] = q
    return float(to_float_array(a, dt)[0])


def is_lazy(x) -> bool:
    return isinstance(x, ExactFloats)


def equal_exact(X: ExactFloats, Y: ExactFloats, entrywise: bool = False):
    """Whether two lazy arrays hold the same exact values (``entrywise``: the boolean mask): the
    stored floats compared as the numbers they are (a float16 and a float64 holding the same value
    are equal; -0.0 == 0.0, both the rational 0), then the declared rationals' entries exactly."""
    if X.shape != Y.shape:
        raise ValueError(f"shapes {X.shape} and {Y.shape} differ")
    a, b = X.floats.astype(np.float64).reshape(-1), Y.floats.astype(np.float64).reshape(-1)
    same = a == b  # exact: both widened without rounding
    if len(X.over_pos) or len(Y.over_pos):
        pos = np.union1d(X.over_pos, Y.over_pos)
        same[pos] = [x == y for x, y in zip(X._values(pos), Y._values(pos))]
    if entrywise:
        return same.reshape(X.shape)
    return bool(same.all())


def differs(g: ExactFloats, w: np.ndarray) -> np.ndarray:
    """``g != w`` entry by entry (a boolean array of ``g``'s shape), exactly, for a lazy array ``g`` and an
    exact array ``w`` of the same shape (object: a construction's, few distinct objects; or floats).
    Where ``w``'s correctly rounded float64 differs from ``g``'s stored float the values differ (an
    equal value would round to that float); elsewhere they are equal where ``w``'s value is its own
    float64 and ``g``'s entry its stored float (no declared rational); every remaining entry is compared
    exactly, as rationals."""
    from .base import to_float_array
    from .ops import addresses

    w = np.asarray(w)
    if w.shape != g.shape:
        raise ValueError(f"shapes {g.shape} and {w.shape} differ")
    w = w.reshape(-1)
    if w.dtype.kind == "f":
        return (g.floats.astype(np.float64).reshape(-1) != w.astype(np.float64)).reshape(g.shape) if \
            g.is_float_only() else differs(g, w.astype(object).reshape(g.shape))
    if w.dtype != object:
        w = w.astype(object)
    try:
        wf = to_float_array(w, np.float64)
    except (TypeError, ValueError, ArithmeticError):  # an entry without a float (a symbol): all exactly
        gv = g.reshape(-1).materialise()
        return np.asarray([gx != wx for gx, wx in zip(gv.tolist(), w.tolist())], dtype=bool).reshape(g.shape)
    neq = ~(wf == g.floats.astype(np.float64).reshape(-1))
    inexact = np.zeros(w.shape, dtype=bool)  # w's value is not its own float64 (1/3, beyond float64's range)
    ptr = addresses(w)
    pos = np.flatnonzero(ptr != id(0))  # every entry other than the int 0 object, each object once
    if pos.size:
        _, first, inv = np.unique(ptr[pos], return_index=True, return_inverse=True)
        bad = np.asarray([not _float_holds(x) for x in w[pos[first]].tolist()], dtype=bool)
        inexact[pos] = bad[inv.reshape(-1)]
    check = ~neq & inexact
    check[g.over_pos] = True  # a declared rational: compared as the rational it is
    idx = np.flatnonzero(check)
    if idx.size:
        gv = g.reshape(-1)[idx]
        neq[idx] = [gx != wx for gx, wx in zip(gv.tolist(), w[idx].tolist())]
    return neq.reshape(g.shape)


def _float_holds(x) -> bool:
    """Whether the exact value ``x`` is its own correctly rounded float64 (an entry no float holds, or
    one without a float: no)."""
    try:
        f = float(x)
    except (OverflowError, TypeError, ValueError):
        return False
    if not np.isfinite(f):
        return False
    try:
        return bool(Fraction(f) == x)
    except TypeError:
        return False
