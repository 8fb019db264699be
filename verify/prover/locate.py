"""Where a proof fails: the first differing entry of a state, a concrete rational counterexample
(:func:`find_counterexample`), and the layer to blame (:func:`locate_layer`: declared intermediate
states, the construction's own layers, or the section's last layer; ``Failure.located_by``)."""
from __future__ import annotations

import random
from dataclasses import dataclass
from fractions import Fraction

from constructions.claims import LOCATED_LAST, LOCATED_ONLY, LOCATED_OWN, LOCATED_STATES, Counterexample, LayerMismatch
from constructions.weights_io import same_layer
from .kernel import first_masked_mismatch as _first_masked_mismatch, first_mismatch as _first_mismatch
from .rings import as_poly, declared_in, declared_states, run, truncate


def find_counterexample(R, diff, got, expected, names, tries: int = 64, seed: int = 0) -> Counterexample | None:
    """A rational point where the nonzero polynomial ``diff`` does not vanish
    (Schwartz-Zippel: random integers from a range larger than the degree)."""
    diff = as_poly(R, diff)
    got, expected = as_poly(R, got), as_poly(R, expected)
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


def first_off_declared(states, declared, target, masked=_first_masked_mismatch):
    """The first layer whose output differs from the state declared after it (the
    last layer: from the target): ``(layer, index, diff, declared value, previous
    declared layer)``, or None.  ``masked`` compares a state with a declared one on its
    declared entries (``verify/prover/refute.py`` passes its own, on exact rationals)."""
    prev = -1
    last = len(states) - 1
    for i, S in enumerate(states):
        if i == last:
            j, diff = _first_mismatch(S, target)
            want = target
        elif declared[i] is None:
            continue
        else:
            j, diff = masked(S, declared[i])
            want = declared[i].expected
        if j is not None:
            return i, j, diff, want[j], prev
        prev = i
    return None


@dataclass
class Location:
    """The layer a failed section is blamed on, how it was found (``by``), and the culprit's mismatch."""
    layer: int
    by: str
    note: str = ""
    culprit: LayerMismatch | None = None


def locate_layer(con, spec, sec, Ls, S0, states, target, v, R, names, ref_layers, pristine, ar) -> Location:
    """Which layer of the failing section ``sec`` to blame (module docstring); ``states`` and
    ``S0`` are in the backend ``ar``'s arithmetic, reports are converted to sympy."""
    n, lay = len(Ls), con.layout
    own = getattr(spec, sec)
    declared = declared_in(ar, declared_states(spec, v, sec, n) if n > 1 and len(own) == n else None)
    why_not = "no intermediate states declared"
    if declared is not None:
        # guard: the construction's own layers (as built) must produce the declared states
        P = pristine()
        P = getattr(P, sec) if P is not None else None
        if P is not None and len(P) == n and not all(same_layer(a, b) for a, b in zip(P, Ls)):
            pst = run(ar.layers(P[:-1]), S0)
            for i, S in enumerate(pst):
                j, _ = (None, None) if declared[i] is None else _first_masked_mismatch(S, declared[i])
                if j is not None:
                    why_not = (f"declared intermediate states not used: the construction's own {sec} layers "
                               f"do not produce the state declared after {sec} layer {i} (at {lay.describe(*j)})")
                    declared = None
                    break
    ref_li = ref_j = None
    if ref_layers is not None and ref_layers[sec] and len(ref_layers[sec]) == n:
        for li, (a, b) in enumerate(zip(states, run(ar.layers(ref_layers[sec]), S0))):
            j, _ = _first_mismatch(a, b)
            if j is not None:
                ref_li, ref_j = li, j
                break
    if declared is not None:
        i, j, diff, want, prev = first_off_declared(states, declared, target)
        region, entry = lay.locate(*j)
        sdiff = ar.to_sympy(diff)
        culprit = LayerMismatch(region, entry, tuple(int(t) for t in j), truncate(str(as_poly(R, sdiff).as_expr())),
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
        return Location(i, LOCATED_STATES, note, culprit)
    if ref_li is not None:
        note = (f"first layer whose output differs from the construction's own layer: {sec} layer {ref_li}, "
                f"at {lay.describe(*ref_j)}")
        if n > 1:
            note += f"; {why_not}: this is where the first difference appears, not necessarily the culprit layer"
        return Location(ref_li, LOCATED_OWN if n > 1 else LOCATED_ONLY, note)
    if n <= 1:
        return Location(0, LOCATED_ONLY)
    return Location(n - 1, LOCATED_LAST,
                     f"{why_not}: located where the residual appears ({sec} layer {n - 1}, the section's last "
                     f"layer), not necessarily the culprit layer")
