"""A repeated stack (:func:`constructions.iterated.compile_iteration`) run in floating point for K steps
against the exact iteration, step by step.

Floats are the subject here.  The reference is the step circuit iterated in mpmath at ``dps`` decimal
digits, started from the *same* float inputs read exactly (``mpmath.mpf(float)`` is exact; the circuit's
constants are rounded once to the working precision), as ``numerics/reference.py`` does for GD
(``docs/design.md`` decision 7).  The float run is the stack itself (:meth:`Construction.run`, each layer's
own forward, weights rounded once to the dtype), read after every body copy.  The error at step t is
``max |float - reference| / max(|reference|, 1)`` over every state value and trial (the circuit
command's measure), non-finite float values counted apart.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import mpmath
import numpy as np

import circuits as C
from constructions.base import to_float_array

#: digits of the mpmath reference (its own error is about 10**-DPS times the values' size per step)
DPS = 60


@dataclass
class IterationErrors:
    """Per step t = 1 .. k: the largest error (relative to max(|reference|, 1)) over all values and trials,
    and how many float values were not finite."""

    dtype: str
    k: int
    trials: int
    errors: list = field(default_factory=list)
    non_finite: list = field(default_factory=list)

    @property
    def final(self) -> float:
        return self.errors[-1] if self.errors else 0.0

    def to_json(self) -> dict:
        return {"dtype": self.dtype, "k": self.k, "trials": self.trials,
                "max_relative_error": [None if math.isnan(e) else e for e in self.errors],
                "non_finite": list(self.non_finite)}


def reference_iterates(g, v0: dict, k: int, dps: int = DPS) -> list[dict]:
    """The step circuit ``g`` iterated ``k`` times in mpmath from the float inputs ``v0`` (name -> 1-D array
    over trials, read exactly): per step 1 .. k, name -> list of mpf over the trials.  An input that no
    output feeds (a parameter of ``compile_iteration``) keeps its value."""
    names = C.inputs(g)
    trials = len(np.asarray(v0[names[0]]).reshape(-1)) if names else 1
    out = []
    with mpmath.workdps(dps):
        const = lambda c: mpmath.mpf(c.numerator) / c.denominator  # noqa: E731
        cur = [{n: mpmath.mpf(float(np.asarray(v0[n]).reshape(-1)[t])) for n in names} for t in range(trials)]
        for _ in range(k):
            cur = [{**v, **{n: val for n, val in C.evaluate(g, v, const=const, validated=True).items() if n in v}}
                   for v in cur]  # an input no output feeds (a parameter) is held
            out.append({n: [v[n] for v in cur] for n in names})
    return out


def run_against_reference(con, v0: dict, k: int, dtype=np.float64, reference: list[dict] | None = None,
                          dps: int = DPS) -> IterationErrors:
    """``con`` (a repeated stack) run ``k`` body copies in ``dtype`` from ``v0`` (name -> float64 array over
    trials; cast to ``dtype``, and the reference starts from the cast values) against
    :func:`reference_iterates` (computed here unless given, for the same cast inputs)."""
    dt = np.dtype(dtype)
    fv = {n: np.asarray(x, dtype=np.float64).astype(dt) for n, x in v0.items()}
    ref = reference if reference is not None else reference_iterates(con.graph, fv, k, dps)
    trials = len(next(iter(fv.values()))) if fv else 1
    res = IterationErrors(dt.name, k, trials)

    def on_step(j, S):
        if j == 0:
            return None
        got = con.readout(S)
        worst, bad = 0.0, 0
        for n, vals in ref[j - 1].items():
            f = np.asarray(got[n], dtype=np.float64).reshape(-1)
            for t, r in enumerate(vals):
                if not math.isfinite(f[t]):
                    bad += 1
                    continue
                scale = max(abs(r), 1)
                worst = max(worst, float(abs(mpmath.mpf(float(f[t])) - r) / scale))
        res.errors.append(worst if bad < len(ref[j - 1]) * trials else math.nan)
        res.non_finite.append(bad)
        return None

    with np.errstate(over="ignore", invalid="ignore"):
        con.run(fv, k, cast=lambda L: L.map(lambda A: to_float_array(np.asarray(A), dt)), on_step=on_step)
    return res


__all__ = ["DPS", "IterationErrors", "reference_iterates", "run_against_reference"]
