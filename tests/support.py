"""Helpers shared by the tests (imported as ``tests.support``; ``pythonpath`` in pyproject.toml)."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import settings

#: a few examples for the slower exact property tests, whatever the profile
FAST = settings(max_examples=8, deadline=None)


def F(a) -> list[Fraction]:
    """Every entry of an (object or float) array as a Fraction, flat."""
    return [Fraction(z) for z in np.asarray(a, dtype=object).flat]


def assert_proved(res) -> None:
    assert res.ok, res.failure and res.failure.describe()


def assert_rejected(res) -> None:
    """A failed proof with a counterexample whose two sides differ."""
    assert not res.ok
    assert res.failure is not None and res.failure.counterexample is not None
    ce = res.failure.counterexample
    assert ce.got != ce.expected


def gd_by_hand(v: dict, eta, lam=Fraction(0)) -> dict:
    """One (ridge) GD step x <- x - eta (A^T (A x - b) + lam x) on Fractions, written out
    independently of ``constructions.lsq``."""
    A, b, x = v["A"], v["b"], v["x"]
    n, d = A.shape
    r = [sum(Fraction(A[i, j]) * Fraction(x[j]) for j in range(d)) - Fraction(b[i]) for i in range(n)]
    g = [sum(Fraction(A[i, j]) * r[i] for i in range(n)) + lam * Fraction(x[j]) for j in range(d)]
    out = dict(v)
    out["x"] = np.array([Fraction(x[j]) - eta * g[j] for j in range(d)], dtype=object)
    return out


def perturbed_copies(con):
    """Copies of ``con`` with +1 on the first nonzero entry of each weight array of each layer."""
    for sec in ("prologue", "body", "epilogue"):
        for li, layer in enumerate(getattr(con, sec)):
            for name, arr in layer.arrays().items():
                nz = [ix for ix, z in np.ndenumerate(arr) if z != 0]
                if not nz:
                    continue
                new = layer.map(lambda a: a.copy())
                new.arrays()[name][nz[0]] += 1
                bad = type(con)(**{f: getattr(con, f) for f in con.__dataclass_fields__})
                bad.__dict__.update({k: v for k, v in con.__dict__.items() if k not in con.__dataclass_fields__})
                layers = list(getattr(con, sec))
                layers[li] = new
                setattr(bad, sec, layers)
                yield f"{sec}[{li}].{name}", bad



def tripwire(*a, **kw):
    """Stands in for a step of the work (monkeypatched): bad input must be refused before it runs."""
    raise AssertionError("validation let a bad command line through to the work")


class NoTrainer:
    """A stand-in for ``numerics.training.Trainer`` that trips (:func:`tripwire`) if the command gets as
    far as building or resuming one."""

    def __init__(self, *a, **kw):
        tripwire()

    @classmethod
    def resume(cls, *a, **kw):
        tripwire()
