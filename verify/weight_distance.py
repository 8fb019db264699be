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


def weight_distance(reference, layers) -> WeightDistance:
    """The distance of ``layers`` from ``reference`` (two stacks of the same layer kinds and shapes, as
    a weight file checked against its construction is), array by array."""
    out = WeightDistance()
    for i, (R, L) in enumerate(zip(reference, layers)):
        ra, la = R.arrays(), L.arrays()
        for name in ra:
            if name not in la:
                continue
            want, got = _exact(ra[name]), _exact(la[name])
            if want.shape != got.shape:
                continue
            diff = np.vectorize(lambda x, y: abs(x - y), otypes=[object])(got, want) if want.size else want
            if not want.size or not any(d != 0 for d in diff.flat):
                continue
            flat = int(np.argmax([d for d in diff.flat]))
            idx = tuple(int(t) for t in np.unravel_index(flat, want.shape))
            rel = max(d / max(abs(w), Fraction(1)) for d, w in zip(diff.flat, want.flat))
            spurious = sum(1 for w, g in zip(want.flat, got.flat) if w == 0 and g != 0)
            out.arrays.append(ArrayDistance(i, name, diff[idx], idx, rel, spurious))
    return out
