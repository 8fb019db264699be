"""Where a proof fails: the first differing entry of a state, a concrete rational counterexample
(:func:`find_counterexample`), and the layer to blame (:func:`_locate`: declared intermediate
states, the construction's own layers, or the section's last layer; ``Failure.located_by``)."""
from __future__ import annotations

import random
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from constructions.base import PartialState
from constructions.claims import LOCATED_LAST, LOCATED_ONLY, LOCATED_OWN, LOCATED_STATES, Counterexample, LayerMismatch
from constructions.weights_io import same_layer
from .rings import _as_poly, _declared_in, _declared_states, _differing, _is_zero, _run, _truncate


def _first_mismatch(got, expected):
    """The first entry (in row-major order) where the two states differ, and the difference;
    the comparison runs entry by entry in numpy's loop (each entry's own ``!=``; each distinct
    pair of objects once, :func:`_differing`)."""
    try:
        differ = _differing(got, expected)
    except (TypeError, ValueError):  # an entry whose != is not a bool: one by one below
        differ = None
    if differ is not None:
        # a flagged entry is a mismatch only if the difference is nonzero: ``!=`` between exact
        # types of different kinds (a sympy ring constant, whose coefficients are FLINT fmpq, and
        # a Fraction) says "differ" for equal values
        for h in np.flatnonzero(differ).tolist():
            idx = tuple(int(i) for i in np.unravel_index(h, expected.shape))
            diff = got[idx] - expected[idx]
            if not _is_zero(diff):
                return idx, diff
        return None, None
    for idx in np.ndindex(expected.shape):
        g, e = got[idx], expected[idx]
        if g is not e and not (g == e) and not _is_zero(g - e):
            return idx, g - e
    return None, None


def find_counterexample(R, diff, got, expected, names, tries: int = 64, seed: int = 0) -> Counterexample | None:
    """A rational point where the nonzero polynomial ``diff`` does not vanish
    (Schwartz-Zippel: random integers from a range larger than the degree)."""
    diff = _as_poly(R, diff)
    got, expected = _as_poly(R, got), _as_poly(R, expected)
    support = [i for i in range(R.ngens) if any(m[i] for m in diff.monoms())]
    rng = random.Random(seed)
    deg = max((sum(m) for m in diff.monoms()), default=0)
    for t in range(tries):
        span = max(3, 2 * deg + 1) * (1 + t // 16)
        vals = [0] * R.ngens
        for i in support:
            vals[i] = rng.randint(-span, span)
        if diff(*vals) != 0:
            return Counterexample({names[i]: str(Fraction(vals[i])) for i in support},
                                  str(Fraction(int(got(*vals).numerator), int(got(*vals).denominator))),
                                  str(Fraction(int(expected(*vals).numerator), int(expected(*vals).denominator))))
    return None  # pragma: no cover - unreachable for a nonzero polynomial


def _first_masked_mismatch(got, want: PartialState):
    for idx in zip(*np.nonzero(want.mask)):
        diff = got[idx] - want.expected[idx]
        if not (diff == 0):
            return tuple(int(i) for i in idx), diff
    return None, None


def _first_off_declared(states, declared, target):
    """The first layer whose output differs from the state declared after it (the
    last layer: from the target): ``(layer, index, diff, declared value, previous
    declared layer)``, or None."""
    prev = -1
    last = len(states) - 1
    for i, S in enumerate(states):
        if i == last:
            j, diff = _first_mismatch(S, target)
            want = target
        elif declared[i] is None:
            continue
        else:
            j, diff = _first_masked_mismatch(S, declared[i])
            want = declared[i].expected
        if j is not None:
            return i, j, diff, want[j], prev
        prev = i
    return None


@dataclass
class _Location:
    layer: int
    by: str
    note: str = ""
    culprit: LayerMismatch | None = None


def _locate(con, spec, sec, Ls, S0, states, target, v, R, names, ref_layers, pristine, ar) -> _Location:
    """Which layer of the failing section ``sec`` to blame (module docstring); ``states`` and
    ``S0`` are in the backend ``ar``'s arithmetic, reports are converted to sympy."""
    n, lay = len(Ls), con.layout
    own = getattr(spec, sec)
    declared = _declared_in(ar, _declared_states(spec, v, sec, n) if n > 1 and len(own) == n else None)
    why_not = "no intermediate states declared"
    if declared is not None:
        # guard: the construction's own layers (as built) must produce the declared states
        P = pristine()
        P = getattr(P, sec) if P is not None else None
        if P is not None and len(P) == n and not all(same_layer(a, b) for a, b in zip(P, Ls)):
            pst = _run(ar.layers(P[:-1]), S0)
            for i, S in enumerate(pst):
                j, _ = (None, None) if declared[i] is None else _first_masked_mismatch(S, declared[i])
                if j is not None:
                    why_not = (f"declared intermediate states not used: the construction's own {sec} layers "
                               f"do not produce the state declared after {sec} layer {i} (at {lay.describe(*j)})")
                    declared = None
                    break
    ref_li = ref_j = None
    if ref_layers is not None and ref_layers[sec] and len(ref_layers[sec]) == n:
        for li, (a, b) in enumerate(zip(states, _run(ar.layers(ref_layers[sec]), S0))):
            j, _ = _first_mismatch(a, b)
            if j is not None:
                ref_li, ref_j = li, j
                break
    if declared is not None:
        i, j, diff, want, prev = _first_off_declared(states, declared, target)
        region, entry = lay.locate(*j)
        sdiff = ar.to_sympy(diff)
        culprit = LayerMismatch(region, entry, tuple(int(t) for t in j), _truncate(str(_as_poly(R, sdiff).as_expr())),
                                find_counterexample(R, sdiff, ar.to_sympy(states[i][j]), ar.to_sympy(want), names))
        note = (f"located by the declared intermediate states: {sec} layer {i} is the first layer whose output "
                f"differs from the state declared after it, at {lay.describe(*j)}")
        if prev < i - 1:
            note += (f"; no state is declared after {sec} layers {prev + 1}..{i - 1}: the culprit is one of "
                     f"{sec} layers {prev + 1}..{i}")
        if ref_li is not None and (ref_li, ref_j) != (i, j):
            undeclared = ref_li < n - 1 and declared[ref_li] is not None and not declared[ref_li].mask[ref_j]
            note += (f" (the first layer differing from the construction's own layer is {sec} layer {ref_li}, at "
                     f"{lay.describe(*ref_j)}{', an undeclared entry' if undeclared else ''})")
        return _Location(i, LOCATED_STATES, note, culprit)
    if ref_li is not None:
        note = (f"first layer whose output differs from the construction's own layer: {sec} layer {ref_li}, "
                f"at {lay.describe(*ref_j)}")
        if n > 1:
            note += f"; {why_not}: this is where the first difference appears, not necessarily the culprit layer"
        return _Location(ref_li, LOCATED_OWN if n > 1 else LOCATED_ONLY, note)
    if n <= 1:
        return _Location(0, LOCATED_ONLY)
    return _Location(n - 1, LOCATED_LAST,
                     f"{why_not}: located where the residual appears ({sec} layer {n - 1}, the section's last "
                     f"layer), not necessarily the culprit layer")


def _entry_differs(what: str, a, b, sub) -> str | None:
    """The first entry where ``b`` at the concrete parameters differs from ``a``.  An entry equal
    as a polynomial before the substitution holds no parameter generator (``a`` holds none), so
    only the others are substituted (the substitution is most of the cost)."""
    if a.shape != b.shape:
        return f"{what}: shape {b.shape} against the construction's own {a.shape}"
    af, bf = a.reshape(-1), b.reshape(-1)
    try:
        differ = np.flatnonzero(_differing(af, bf)).tolist()
    except (TypeError, ValueError):
        differ = range(af.size)
    seen: set = set()  # (b's entry, a's entry) pairs found equal: the same objects, the same verdict
    subbed: dict = {}  # b's entries substituted, by object (a value replicated over tokens: once)
    for h in differ:
        bx, y = bf[h], af[h]  # both alive in bf, af: their ids are unique while the loop runs
        key = (id(bx), id(y))
        if key in seen:
            continue
        x = subbed.get(id(bx))
        if x is None:
            x = subbed[id(bx)] = sub(bx)
        if x is y or _is_zero(x - y):
            seen.add(key)
            continue
        ix = np.unravel_index(h, a.shape) if a.shape else ()
        entry = ",".join(str(int(i)) for i in ix)
        return (f"{what}[{entry}]: {_truncate(str(x), 120)} at the concrete parameters, the construction's "
                f"own {_truncate(str(y), 120)}")
    return None
