"""What a construction claims, and the plain-data verdicts a proof returns.

The catalogue (``constructions/catalogue``) *describes* its claims as data,
and ``verify.prover.proof`` proves them; neither imports the other's internals:

* a :class:`~constructions.base.Construction` claims its three section
  identities (``verify.prover.proof.prove``);
* an :class:`IdentityClaim` claims ``lhs(v) == rhs(v)`` entry by entry, as
  polynomials in fresh variables (``verify.prover.proof.prove_identity``);
* a :class:`WitnessClaim` is a claim checked by a certified computation that
  is not a polynomial identity (seed 000 Theorem D.31's softmax witness): it
  computes its own :class:`ProofResult`.

:class:`ProofResult`, :class:`Failure`, :class:`Counterexample` and
:class:`LayerMismatch` are the verdicts (plain dataclasses, JSON-ready).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Callable, ClassVar

RESIDUAL_CHARS = 300


@dataclass(frozen=True)
class IdentityClaim:
    """``lhs(v) == rhs(v)`` entry by entry: ``v`` maps each variable (shape in
    ``variables``) and each name in ``params`` to fresh ring variables;
    ``locate(entry)`` names an entry in the paper's terms."""

    name: str
    variables: dict
    lhs: Callable
    rhs: Callable
    params: tuple = ()
    locate: Callable | None = None


@dataclass(frozen=True)
class WitnessClaim:
    """A claim checked by a self-contained certified computation: ``run()`` returns its ProofResult."""

    name: str
    run: Callable[[], "ProofResult"]


@dataclass
class Counterexample:
    assignment: dict[str, str]  # variable -> rational "p/q"; every other variable is 0
    got: str
    expected: str


#: values of ``Failure.located_by`` (see the module docstring)
LOCATED_STATES = "intermediate states"
LOCATED_OWN = "own layers"
LOCATED_LAST = "last layer"
LOCATED_ONLY = "only layer"  # a section of one layer: nothing to locate


def _describe_ce(ce: Counterexample | None, got: str = "layers give", want: str = "specification") -> str:
    if not ce:
        return ""
    a = ", ".join(f"{k}={v}" for k, v in ce.assignment.items())
    a = f"{a} (others 0)" if a else "every variable 0"
    return f"{a}: {got} {ce.got}, {want} {ce.expected}"


@dataclass
class LayerMismatch:
    """Where the blamed layer's exact output first differs from the state declared after it."""

    region: str
    entry: tuple[int, int]
    state_index: tuple[int, int]
    residual: str  # layer output - declared value, from the section's start state
    counterexample: Counterexample | None  # got: the layer's output there, expected: the declared value


@dataclass
class Failure:
    section: str
    layer: int  # index in the whole stack (0-based) of the blamed layer
    layer_in_section: int
    # region .. counterexample: the first entry where the *section's final state* differs
    # from the specification (replay_counterexample replays it)
    region: str
    entry: tuple[int, int]
    state_index: tuple[int, int]
    residual: str
    counterexample: Counterexample | None
    note: str = ""
    located_by: str = ""  # how ``layer`` was found: LOCATED_* ("" for an identity)
    culprit: LayerMismatch | None = None  # the blamed layer's own mismatch (LOCATED_STATES)

    def describe(self) -> str:
        if self.layer < 0:
            where = f"identity fails: {self.region} entry {list(self.entry)}"
            ce = _describe_ce(self.counterexample)
            return (f"{where}\n  residual (layers - spec): {self.residual}"
                    + (f"\n  counterexample: {ce}" if ce else "") + (f"\n  {self.note}" if self.note else ""))
        head = f"{self.section} fails at stack layer {self.layer} ({self.section} layer {self.layer_in_section}): "
        final = f"region {self.region!r} entry {list(self.entry)} (state {list(self.state_index)})"
        c = self.culprit
        lines = []
        if c is not None and (c.state_index, c.residual) != (tuple(self.state_index), self.residual):
            lines += [head + f"region {c.region!r} entry {list(c.entry)} (state {list(c.state_index)}) of its "
                      f"output differs from the declared intermediate state",
                      f"  residual (layer output - declared): {c.residual}"]
            ce = _describe_ce(c.counterexample, "the layer gives", "declared")
            if ce:
                lines.append(f"  counterexample: {ce}")
            lines.append(f"  the {self.section}'s output differs from the specification at {final}")
        else:
            lines.append(head + final)
        lines.append(f"  residual (layers - spec): {self.residual}")
        ce = _describe_ce(self.counterexample)
        if ce:
            lines.append(f"  counterexample: {ce}")
        if self.note:
            lines.append(f"  {self.note}")
        return "\n".join(lines)


@dataclass
class ProofResult:
    construction: str
    ok: bool
    seconds: float
    sections: dict[str, bool] = field(default_factory=dict)
    symbolic_params: list[str] = field(default_factory=list)
    entries_checked: int = 0
    failure: Failure | None = None
    #: sections whose declared intermediate states were proved (prove_intermediate_states)
    intermediate_states: dict[str, bool] = field(default_factory=dict)
    #: the exact arithmetic of the layers' symbolic forward: "flint" (fmpq_mpoly) or "sympy"
    backend: str = "sympy"
    #: the ring the identities were checked in: every variable its own generator ("full"), or
    #: the grouped substitution of ``verify/prover/token_groups.py`` (injective on what it was used for)
    ring: str = "full"
    #: a proof with symbolic parameters (``symbolic_params``) covers the construction only where
    #: its layers AND its specification (input_state, state, step, state(step), final_state,
    #: intermediate states), rebuilt on the symbols and evaluated at the concrete parameters, are
    #: exactly the construction's own (``verify.prover.proof.symbolic_cover``,
    #: ``verify.prover.proof.specification_cover``): what that check found ("" when nothing was
    #: symbolic).  Where either differs the construction was proved at the concrete values
    #: instead (``symbolic_params`` empty) and this says why (``verify.prover.proof.prove``)
    symbolic_cover: str = ""
    #: set by the prover's kernel only (``verify.prover.kernel.conclude``): a digest of what was proved;
    #: a result whose seal is missing or no longer matches its fields is not PROVED (``kernel.verdict``)
    seal: str = field(default="", repr=False, compare=False)
    #: what kind of result this is: ``"proof"`` (an identity proved exactly), ``"witness"`` (a claim
    #: certified on a witness: its verdict word is WITNESSED, never PROVED)
    kind: ClassVar[str] = "proof"

    def to_json(self) -> dict:
        d = asdict(self)
        d.pop("seal", None)  # the kernel's token, not a finding
        return d


