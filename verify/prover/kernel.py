"""The prover's trusted kernel: exact equality of states, the one loop over a claim's sections, and
the only place where a proved verdict is made.

A proof (``verify/prover/proof.py``) is: choose the ring (``rings.py``, ``grouped.py``) -> check every
section here (:func:`check_sections`) -> cover (``cover.py``: the symbolic proof stands for the
construction's own layers) -> verdict (:func:`conclude`).  Failure diagnosis (``locate.py``: the
layer to blame, the counterexample, the intermediate states, the replay) runs after this, on what
:func:`check_sections` found, and imports from here only; the randomized check (``randomized.py``)
never calls :func:`conclude`, so it cannot make a proved verdict.

What this module decides:

* **Equality** (:func:`first_mismatch`): two states are equal when every entry's difference is the
  exact zero (each entry's own ``==``: a polynomial of sympy's or FLINT's ring, a Fraction, an int).
  Entries that are the same Python object are equal without a comparison (every exact scalar a
  proof holds equals itself; floats were read as Fractions before), and each distinct pair of
  objects is compared once (:func:`differing`): that is the only speed device on this path.
* **The section loop** (:func:`check_sections`): for each claim ``(section, start, target)`` the
  section's layers run on ``start()`` and the output must equal ``target()`` everywhere.
* **The verdict** (:func:`conclude`, :func:`verdict`): a result is PROVED only if this module sealed
  it, and only while it still says what was sealed (construction, sections, entries checked, ring,
  backend, parameters, cover): a :class:`~constructions.claims.ProofResult` built or edited anywhere
  else reads FAILED.  A result certified on a witness (``kind == "witness"``, seed 000 Thm. D.31)
  reads WITNESSED, never PROVED.

Imports: numpy, ``constructions.ops`` (object addresses) and ``constructions.claims`` (the plain-data
result) only; ``tests/verify/prover/test_kernel.py`` checks that nothing of diagnosis, reports or
the command line is imported, here or by the trusted files.
"""
from __future__ import annotations

import enum
import hashlib
import json
from dataclasses import dataclass, field
from typing import Callable, Iterable

import numpy as np

from constructions import ops
from constructions.claims import ProofResult


class Verdict(str, enum.Enum):
    """The word a result earns: PROVED (sealed by :func:`conclude`), WITNESSED (a certified witness of
    an inequality, not a proof of an identity) or FAILED."""

    PROVED = "PROVED"
    WITNESSED = "WITNESSED"
    FAILED = "FAILED"

    @property
    def word(self) -> str:
        """The JSON reports' word: ``proved``, ``witnessed``, ``failed``."""
        return self.value.lower()

    @property
    def holds(self) -> bool:
        """The claim holds (exit status 0): proved, or witnessed."""
        return self is not Verdict.FAILED


# ------------------------------------------------------------------ equality

def differing(got, expected) -> np.ndarray:
    """``got != expected`` entry by entry (each entry's own ``!=``, in numpy's loop), with each
    distinct pair of objects compared once: a state holds a polynomial replicated over tokens as
    the same object (the exact operations reuse a result for operands seen before), and the
    comparison of two polynomials costs their sizes.  Two entries that are the same object are
    equal (every exact scalar a proof holds, int, Fraction, fmpq, a FLINT or sympy polynomial,
    equals itself; floats are read as Fractions before).  Arrays that are not two object arrays
    of one shape are compared by numpy as they are."""
    if not (isinstance(got, np.ndarray) and isinstance(expected, np.ndarray) and got.dtype == object
            and expected.dtype == object and got.shape == expected.shape):
        return np.not_equal(got, expected, dtype=bool)
    g, e = got.reshape(-1), expected.reshape(-1)
    pg, pe = ops.addresses(g), ops.addresses(e)  # both arrays hold their entries alive: ids unique
    out = np.zeros(g.shape, dtype=bool)
    cand = np.flatnonzero(pg != pe)
    if cand.size:
        pairs = np.empty(cand.size, dtype=[("g", np.uintp), ("e", np.uintp)])
        pairs["g"], pairs["e"] = pg[cand], pe[cand]
        _, first, inv = np.unique(pairs, return_index=True, return_inverse=True)
        rep = cand[first]
        out[cand] = np.not_equal(g[rep], e[rep], dtype=bool)[np.asarray(inv).reshape(-1)]
    return out.reshape(got.shape)


def is_zero(x) -> bool:
    """An exact difference is zero (polynomial, fmpq, Fraction, int: each one's own ``== 0``)."""
    r = x == 0
    return r is True or (isinstance(r, (bool, np.bool_)) and bool(r))


def first_mismatch(got, expected):
    """The first entry (in row-major order) where the two states differ, and the difference
    (``(None, None)`` when they are equal everywhere); the comparison runs entry by entry in
    numpy's loop (each entry's own ``!=``; each distinct pair of objects once, :func:`differing`)."""
    try:
        differ = differing(got, expected)
    except (TypeError, ValueError):  # an entry whose != is not a bool: one by one below
        differ = None
    if differ is not None:
        # a flagged entry is a mismatch only if the difference is nonzero: ``!=`` between exact
        # types of different kinds (a sympy ring constant, whose coefficients are FLINT fmpq, and
        # a Fraction) says "differ" for equal values
        for h in np.flatnonzero(differ).tolist():
            idx = tuple(int(i) for i in np.unravel_index(h, expected.shape))
            diff = got[idx] - expected[idx]
            if not is_zero(diff):
                return idx, diff
        return None, None
    for idx in np.ndindex(expected.shape):
        g, e = got[idx], expected[idx]
        if g is not e and not (g == e) and not is_zero(g - e):
            return idx, g - e
    return None, None


def first_masked_mismatch(got, want):
    """The first declared entry (``want.mask``, a ``constructions.base.PartialState``) where ``got``
    differs from ``want.expected``, and the difference; ``(None, None)`` when none does."""
    for idx in zip(*np.nonzero(want.mask)):
        diff = got[idx] - want.expected[idx]
        if not is_zero(diff):
            return tuple(int(i) for i in idx), diff
    return None, None


# ------------------------------------------------------------------ the section loop

class ShapeMismatch(ValueError):
    """A section's layers produce a state of another shape than its target."""


@dataclass
class SectionMismatch:
    """The first section whose output differs from its target: the start state it ran on, its
    output, the target, the first differing entry and the difference there (what diagnosis reads)."""

    section: str
    start: np.ndarray
    got: np.ndarray
    expected: np.ndarray
    index: tuple[int, ...]
    difference: object


@dataclass
class SectionChecks:
    """What :func:`check_sections` found: each section's verdict, the state entries compared, and the
    first mismatch (None when every section holds)."""

    sections: dict[str, bool] = field(default_factory=dict)
    entries_checked: int = 0
    mismatch: SectionMismatch | None = None

    @property
    def ok(self) -> bool:
        return self.mismatch is None and all(self.sections.values())


def check_sections(claims: Iterable[tuple[str, Callable, Callable]], layers: dict[str, list],
                   run: Callable, convert: Callable | None = None) -> SectionChecks:
    """The one loop over a claim's sections, in every ring: for each ``(section, start, target)``
    (``rings.section_claims``), ``run(layers[section], start())`` must equal ``target()`` entry for
    entry (:func:`first_mismatch`); stops at the first section that differs.  An empty body holds
    (the identity); an empty prologue or epilogue must have ``start() == target()``.  ``convert``
    (optional) maps a start or target state into the ring the layers run in.  Only the current
    section's states are alive at a time."""
    out = SectionChecks()
    conv = convert or (lambda a: a)
    for sec, start, target in claims:
        Ls = layers[sec]
        if sec == "body" and not Ls:
            out.sections[sec] = True
            continue
        S0 = conv(start())
        got = run(Ls, S0) if Ls else S0
        expected = conv(target())
        if got.shape != expected.shape:
            raise ShapeMismatch(f"{sec}: layers produce a state of shape {got.shape}, "
                                f"the specification {expected.shape}")
        out.entries_checked += int(np.prod(expected.shape))
        idx, diff = first_mismatch(got, expected)
        out.sections[sec] = idx is None
        if idx is not None:
            out.mismatch = SectionMismatch(sec, S0, got, expected, idx, diff)
            return out
        S0 = got = expected = None  # the next section's states are built without these
    return out


# ------------------------------------------------------------------ the verdict

#: the fields of a result that a seal covers: what was proved, about what, how, in which ring
_SEALED_FIELDS = ("construction", "ok", "sections", "symbolic_params", "entries_checked", "failure", "backend",
                  "ring", "symbolic_cover", "intermediate_states")


def _digest(res: ProofResult) -> str:
    blob = json.dumps([type(res).__name__, getattr(res, "kind", "proof")]
                      + [repr(getattr(res, f, None)) for f in _SEALED_FIELDS], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def conclude(res: ProofResult) -> ProofResult:
    """The only constructor of a proved verdict: seal ``res`` when every section it checked holds
    and no failure is recorded (a plain :class:`ProofResult` of this kernel's making: a subclass,
    such as a witness result, is never sealed); any other result is left unsealed (FAILED)."""
    holds = (type(res) is ProofResult and res.ok and res.failure is None and all(res.sections.values())
             and all(res.intermediate_states.values()))
    res.seal = _digest(res) if holds else ""
    return res


def verdict(res) -> Verdict:
    """PROVED for a result :func:`conclude` sealed that still reads as sealed; WITNESSED for a
    certified witness (``kind == "witness"`` and ``ok``); FAILED for anything else (a result built
    or edited outside the kernel, any object with an ``.ok`` that is not a ProofResult)."""
    if not isinstance(res, ProofResult):
        return Verdict.FAILED
    if getattr(res, "kind", "proof") == "witness":
        return Verdict.WITNESSED if res.ok and res.failure is None and all(res.sections.values()) else Verdict.FAILED
    if type(res) is ProofResult and res.ok and res.seal and res.seal == _digest(res):
        return Verdict.PROVED
    return Verdict.FAILED


def is_proved(res) -> bool:
    """``verdict(res) is Verdict.PROVED``."""
    return verdict(res) is Verdict.PROVED
