"""What a compile reports about itself, typed: :class:`CompileInfo` (the stack's shape, the plan, the
target's stated bound) and :class:`Reassociation` (whether the circuit was re-associated, with a
:class:`ReassociationChoice` for why).  The passes build these records from numbers and enums only;
the English a person reads is rendered at the edge, by :meth:`Reassociation.describe` from the
templates of :data:`CHOICE_TEXT`, and :meth:`CompileInfo.to_json` writes the dict that the circuit
command's ``--json``, the compiler report and ``con.info["compiled"]`` carry (the same keys, order
and values as before these types: ``tests/constructions/test_compile_info.py`` compares them with a
recording of the old compiler's dicts).

The bound (``bound``: layers, tokens, ... and the ``rule`` that states it) stays the target's own
mapping: each target states its guarantee in its own terms (:attr:`.targets.Target.bound_rule`).
"""
from __future__ import annotations

import copy
import enum
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping


class ReassociationChoice(enum.Enum):
    """Which stack :func:`.pipeline.compile_circuit` kept, and the rule that decided
    (:func:`.pipeline._reassociated`'s docstring)."""

    #: the rewrite does not lower the multiplicative depth: the circuit as written, one compile
    NOT_LOWER = "not-lower"
    #: the rewritten circuit's compile was refused (``refused``): the circuit as written
    REWRITE_REFUSED = "rewrite-refused"
    #: both compiled; the rewrite's (layers, width) is no less than as written's (``rewritten_cost``)
    NOT_SMALLER = "not-smaller"
    #: both compiled; the rewrite has fewer layers, or as many on a narrower state
    REWRITTEN = "rewritten"
    #: only the rewrite compiled: the circuit has more than ``limit`` gates (``gates``)
    REWRITTEN_UNCOMPARED = "rewritten-uncompared"

    @property
    def as_written(self) -> bool:
        """The circuit as written was kept."""
        return self in (ReassociationChoice.NOT_LOWER, ReassociationChoice.REWRITE_REFUSED,
                        ReassociationChoice.NOT_SMALLER)


#: the English of each choice (the ``chosen`` value of the JSON), filled from the record's fields
CHOICE_TEXT = {
    ReassociationChoice.NOT_LOWER: "as written: re-association does not lower the multiplicative depth",
    ReassociationChoice.REWRITE_REFUSED: "as written: the re-associated circuit is refused ({refused})",
    ReassociationChoice.NOT_SMALLER: ("as written: the re-associated circuit compiles to {rewritten_layers} layers of "
                                      "width {rewritten_width}, no fewer layers or narrower than as written"),
    ReassociationChoice.REWRITTEN: "re-associated",
    ReassociationChoice.REWRITTEN_UNCOMPARED: ("re-associated: lower multiplicative depth; the circuit has {gates} "
                                               "gates, more than {limit}, so the as-written compile is not compared"),
}
#: the English of a re-association skipped by the circuit's size (the ``skipped`` value of the JSON)
SKIPPED_TEXT = ("the circuit has {gates} gates, more than {limit}: compiled as written by default above that size "
                "(re-association forced: reassociate=True, --reassociate)")


@dataclass(frozen=True)
class Reassociation:
    """The re-association pass's outcome.  ``ran`` False: skipped because the circuit has ``gates``
    gates, more than ``limit`` (a compile asked for as written has no record at all).  ``ran`` True:
    the multiplicative depths before and after, the ``choice``, and what the choice names: the
    rewrite's refusal (``refused``, its first line), its compiled ``(layers, width)``
    (``rewritten_cost``), and ``circuit_after`` (the rewritten circuit's metrics, where it was kept)."""

    ran: bool
    choice: ReassociationChoice | None = None
    mult_depth_before: int | None = None
    mult_depth_after: int | None = None
    refused: str | None = None
    rewritten_cost: tuple[int, int] | None = None
    gates: int | None = None
    limit: int | None = None
    circuit_after: Mapping | None = None

    def __post_init__(self):
        if self.ran and not isinstance(self.choice, ReassociationChoice):
            raise ValueError(f"a re-association that ran needs a ReassociationChoice, got {self.choice!r}")
        object.__setattr__(self, "circuit_after", _frozen(self.circuit_after))

    @classmethod
    def skipped(cls, gates: int, limit: int) -> "Reassociation":
        """Not run: ``gates`` gates, more than ``limit``."""
        return cls(ran=False, gates=gates, limit=limit)

    def describe(self) -> str:
        """The English of the outcome: the choice and its reason, or why it was skipped."""
        if not self.ran:
            return SKIPPED_TEXT.format(gates=self.gates, limit=self.limit)
        layers, width = self.rewritten_cost or (None, None)
        return CHOICE_TEXT[self.choice].format(refused=self.refused, rewritten_layers=layers,
                                               rewritten_width=width, gates=self.gates, limit=self.limit)

    def to_json(self) -> dict:
        """The ``reassociated`` dict of ``info["compiled"]``."""
        if not self.ran:
            return {"ran": False, "skipped": self.describe()}
        out = {"ran": True, "mult_depth_before": self.mult_depth_before, "mult_depth_after": self.mult_depth_after,
               "chosen": self.describe()}
        if self.circuit_after is not None:
            out["circuit_after"] = dict(self.circuit_after)
        return out


class _Absent:
    """The type of :data:`ABSENT`."""

    def __repr__(self) -> str:
        return "ABSENT"


#: a field a target's compile does not report (absent from the JSON; None is a value: ``heads_limit``)
ABSENT = _Absent()

#: the JSON's keys, in order, per layout of the report (each target family writes its own)
FIELDS = {
    "sequence": ("target", "layers", "tokens", "state_width", "params", "plan", "multiplicative_depth", "input_layout",
                 "outputs", "bound"),
    "budget": ("target", "layers", "tokens", "state_width", "grid_tokens", "channel_budget", "inner_width", "params",
               "plan", "outputs", "bound"),
    "attention": ("target", "layers", "tokens", "state_width", "params", "plan", "heads", "heads_limit",
                  "heads_per_layer", "multiplicative_depth", "work_row", "outputs", "constant_blocks", "bound",
                  "modules"),
    "mlp": ("target", "layers", "state_width", "tokens", "product_atoms", "bound"),
}
#: fields held as tuples and written as lists
_LISTS = ("plan", "heads", "heads_per_layer")


def _frozen(x):
    """A read-only view of a mapping (None and ABSENT as they are)."""
    return MappingProxyType(dict(x)) if isinstance(x, Mapping) else x


def _plain(x):
    """A fresh JSON-shaped copy: mappings as dicts (each level), the rest deep-copied."""
    if isinstance(x, Mapping):
        return {k: _plain(v) for k, v in x.items()}
    return copy.deepcopy(x)


@dataclass(frozen=True)
class CompileInfo:
    """One compile's report (``con.compile_info``; ``con.info["compiled"]`` is its :meth:`to_json`).

    ``form``: which target family's fields it has (a key of :data:`FIELDS`); ``layers``, ``tokens``,
    ``state_width``: the stack's shape; ``params``: nonzero and total weight entries; ``plan``: each
    layer's kind; ``outputs``: each output's ``(token, channel)``; ``bound``: the target's stated
    guarantee (None before a target states one); the family's own fields (``multiplicative_depth``,
    ``input_layout``, ``grid_tokens``, ``channel_budget``, ``inner_width``, ``heads``,
    ``heads_limit``, ``heads_per_layer``, ``work_row``, ``constant_blocks``, ``modules``,
    ``product_atoms``) are :data:`ABSENT` where the family does not report them;
    ``reassociation``: the re-association pass's outcome (None: the circuit compiled as written on
    request)."""

    form: str
    target: str
    layers: int
    tokens: int
    state_width: int
    params: Any = ABSENT
    plan: Any = ABSENT
    outputs: Any = ABSENT
    bound: Any = ABSENT
    multiplicative_depth: Any = ABSENT
    input_layout: Any = ABSENT
    grid_tokens: Any = ABSENT
    channel_budget: Any = ABSENT
    inner_width: Any = ABSENT
    heads: Any = ABSENT
    heads_limit: Any = ABSENT
    heads_per_layer: Any = ABSENT
    work_row: Any = ABSENT
    constant_blocks: Any = ABSENT
    modules: Any = ABSENT
    product_atoms: Any = ABSENT
    reassociation: Reassociation | None = field(default=None)

    def __post_init__(self):
        if self.form not in FIELDS:
            raise ValueError(f"unknown compile report form {self.form!r} (one of {', '.join(FIELDS)})")
        for name in _LISTS:
            v = getattr(self, name)
            if v is not ABSENT:
                object.__setattr__(self, name, tuple(v))
        if self.outputs is not ABSENT:
            object.__setattr__(self, "outputs", MappingProxyType({n: tuple(s) for n, s in self.outputs.items()}))
        for name in ("params", "bound", "input_layout", "constant_blocks", "modules"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))

    def to_json(self) -> dict:
        """``info["compiled"]``: the family's fields in :data:`FIELDS` order (absent ones left out),
        then ``reassociated`` where the pass ran or was skipped; a fresh dict each call."""
        out = {}
        for name in FIELDS[self.form]:
            v = getattr(self, name)
            if v is ABSENT:
                continue
            if name in _LISTS:
                v = list(v)
            elif name == "outputs":
                v = {n: list(s) for n, s in v.items()}
            out[name] = _plain(v)
        if self.reassociation is not None:
            out["reassociated"] = self.reassociation.to_json()
        return out
