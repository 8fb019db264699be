"""How far a weight file is from a construction, entry by entry (issue 41, the weight distance).

For a file whose proof FAILED, the distance to the construction *at the parameters the command used*
(``--eta``, ``--lam``, or the file's metadata): per layer and weight array the largest absolute
difference ``max |w - w*|`` and where it is, the largest relative difference ``|w - w*| / max(|w*|, 1)``,
and the *spurious* entries (nonzero in the file where the construction has a structural zero).  Both
stacks are read exactly (a float entry as the binary fraction it is), so the numbers are exact
rationals, printed as floats.  This is the distance to one construction, not to the nearest one of its
family: a file that computes the same function with rescaled channels (a symmetry of the model) can be
far from it in this measure.  Diagnosis: it reads layers and never decides a verdict.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from constructions.exact_floats import differs, is_lazy
from constructions.sparse import dense, is_sparse


@dataclass(frozen=True)
class ArrayDistance:
    """One weight array of one layer: ``max_abs`` at ``index``, ``max_rel``, ``spurious`` entries."""

    layer: int
    array: str
    max_abs: Fraction
    index: tuple[int, ...]
    max_rel: Fraction
    spurious: int

    def to_json(self) -> dict:
        return {"layer": self.layer, "array": self.array, "max_abs": float(self.max_abs),
                "max_abs_exact": str(self.max_abs), "index": list(self.index), "max_rel": float(self.max_rel),
                "spurious": self.spurious}


@dataclass
class WeightDistance:
    """Every array's distance (those that differ), and the largest over all of them."""

    arrays: list[ArrayDistance] = field(default_factory=list)

    @property
    def worst(self) -> ArrayDistance | None:
        return max(self.arrays, key=lambda x: x.max_abs, default=None)

    @property
    def spurious(self) -> int:
        return sum(x.spurious for x in self.arrays)

    def line_at(self, name: str, params: dict) -> str:
        """:meth:`line` with the reference named by the parameters the proof used: ``NAME at p = v, ... (the
        parameters used)``, or ``NAME`` alone where it has none."""
        at = ", ".join(f"{p} = {v}" for p, v in params.items())
        return self.line(f"{name} at {at} (the parameters used)" if at else name)

    def line(self, reference: str) -> str:
        """One line: the largest difference, where, its relative size, the spurious entries."""
        w = self.worst
        if w is None:
            return f"weight distance to {reference}: 0 (every entry equal)"
        idx = ",".join(str(i) for i in w.index)
        return (f"weight distance to {reference}: max |w - w*| = {float(w.max_abs):.3g} at layer {w.layer} "
                f"{w.array}[{idx}] (relative {float(w.max_rel):.3g}); {len(self.arrays)} array(s) differ, "
                f"{self.spurious} spurious entr{'y' if self.spurious == 1 else 'ies'} (nonzero where the "
                f"construction has a zero)")

    def to_json(self) -> dict:
        w = self.worst
        return {"max_abs": float(w.max_abs) if w else 0.0, "spurious": self.spurious,
                "arrays": [x.to_json() for x in self.arrays]}


def _exact(a) -> np.ndarray:
    """An array's entries as Fractions (a float as its exact binary value; a sparse matrix densified)."""
    a = dense(a) if is_sparse(a) else np.asarray(a, dtype=object)
    out = np.empty(a.shape, dtype=object)
    for idx, v in np.ndenumerate(a):
        out[idx] = Fraction(v) if not isinstance(v, Fraction) else v
    return out


_PLAIN = frozenset((Fraction, int, float))


def _array(a) -> np.ndarray:
    """A weight array as numpy (floats kept as floats, exact scalars as objects, any other rational
    scalar (sympy's, gmpy2's) as a Fraction; sparse densified)."""
    if is_lazy(a):  # a weight file's floats, read lazily: entries formed where they are compared
        return a
    a = dense(a) if is_sparse(a) else np.asarray(a)
    if a.dtype == object and not set(map(type, a.ravel().tolist())) <= _PLAIN:  # (the types, in C loops)
        a = _exact(a)
    return a


def _as_fraction(v) -> Fraction:
    return v if isinstance(v, Fraction) else Fraction(v)


def _exact_max(approx: np.ndarray, err: np.ndarray, exact) -> tuple[Fraction, int]:
    """The largest of the exact values ``exact(i)`` over the flat indices of ``approx`` (floats within
    ``err`` of them): only the candidates the floats cannot rule out are evaluated exactly."""
    floor = np.max(approx - err)
    cand = np.flatnonzero(approx + err >= floor)
    best, at = None, -1
    for i in cand:
        v = exact(int(i))
        if best is None or v > best:
            best, at = v, int(i)
    return best, at


def _array_distance(i: int, name: str, want, got) -> ArrayDistance | None:
    """One array's distance, or None where every entry is equal.  Exact: equality, zeros and the two
    maxima are decided in exact arithmetic (a float against a Fraction compares exactly); floats only
    pick the candidates for each maximum, with a bound on their rounding, and every candidate that bound
    cannot rule out is evaluated exactly."""
    flat_w, flat_g = want.reshape(-1), got.reshape(-1)
    both_float = flat_w.dtype.kind == "f" and flat_g.dtype.kind == "f"
    ow = flat_w if both_float else flat_w.astype(object)
    if is_lazy(flat_g):  # a weight file's floats read lazily: compared exactly without a Fraction each
        neq = differs(flat_g, ow)
    else:
        og = flat_g if both_float else flat_g.astype(object)
        neq = np.asarray(og != ow, dtype=bool)
    if not neq.any():
        return None
    try:
        wf, gf = np.asarray(flat_w, dtype=np.float64), np.asarray(flat_g, dtype=np.float64)
    except (OverflowError, TypeError, ValueError):  # entries no float holds: every entry exactly
        wf = gf = None
    if wf is None or not (np.isfinite(wf).all() and np.isfinite(gf).all()):
        W, G = _exact(flat_w), _exact(flat_g)
        diff = [abs(g - w) for g, w in zip(G, W)]
        at = max(range(len(diff)), key=lambda j: diff[j])
        rel = max(d / max(abs(w), Fraction(1)) for d, w in zip(diff, W))
        spurious = int(sum(1 for w, g in zip(W, G) if w == 0 and g != 0))
        return ArrayDistance(i, name, diff[at], tuple(int(t) for t in np.unravel_index(at, want.shape)), rel,
                             spurious)
    eps, tiny = np.finfo(np.float64).eps, np.finfo(np.float64).tiny
    # each float is within eps/2 relative of its entry (converted), the difference rounds once more
    d = np.where(neq, np.abs(gf - wf), 0.0)
    err = 4 * eps * np.maximum(np.abs(gf), np.abs(wf)) + 4 * tiny
    err = np.where(neq, err, 0.0)
    scale = np.maximum(np.abs(wf), 1.0)
    rel_f, rel_err = d / scale, err / scale + 4 * eps * (d / scale)

    def diff_at(j):
        return abs(_as_fraction(flat_g[j]) - _as_fraction(flat_w[j]))

    max_abs, at = _exact_max(d, err, diff_at)
    max_rel, _ = _exact_max(rel_f, rel_err, lambda j: diff_at(j) / max(abs(_as_fraction(flat_w[j])), Fraction(1)))
    zero = np.asarray(ow == 0, dtype=bool)
    spurious = int(np.count_nonzero(zero & neq))
    return ArrayDistance(i, name, max_abs, tuple(int(t) for t in np.unravel_index(at, want.shape)), max_rel,
                         spurious)


def weight_distance(reference, layers) -> WeightDistance:
    """The distance of ``layers`` from ``reference`` (two stacks of the same layer kinds and shapes, as
    a weight file checked against its construction is), array by array."""
    out = WeightDistance()
    for i, (R, L) in enumerate(zip(reference, layers)):
        ra, la = R.arrays(), L.arrays()
        for name in ra:
            if name not in la:
                continue
            want, got = _array(ra[name]), _array(la[name])
            if want.shape != got.shape or not want.size:
                continue
            a = _array_distance(i, name, want, got)
            if a is not None:
                out.arrays.append(a)
    return out
