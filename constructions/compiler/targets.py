"""The compiler's targets: one :class:`Target` per name, in one table, :data:`TARGETS`.

A target says what a circuit compiles to (``description``, the ``paper`` it implements), the
function that compiles a validated circuit (``compile``), the options it takes (``options``, a
subset of :data:`OPTIONS`: :func:`~constructions.compiler.compile_circuit` and the CLI refuse
any other from this table, not from lists of names), whether its convolution is causal
(``causal``: a circuit whose outputs sit before a token they depend on is refused), the passes
its ``compile`` runs in order (``passes``, each a :class:`Pass` naming its function and what it
produces), and the guarantee every compile reports as ``compiled.bound`` (``bound_rule``; read it
back with :meth:`Target.bound`).

Every target's compile is the same pipeline, :func:`~constructions.compiler.compile_circuit`::

    validate (circuits.validate)  -> validated circuit (nx.DiGraph)
    resolve  (resolve, options)   -> Target + the options it takes
    reassociate (optional)        -> a circuit of least multiplicative depth (kept where it pays)
    Target.compile                -> CompiledCircuit, through the target's own ``passes``
                                     (linearise -> place -> plan -> emit -> assemble)

How to add a target: write ``compile(g, name, **options) -> CompiledCircuit`` for a validated
circuit ``g`` (reuse :func:`.linearise.linearise` for the atoms and levels, return
:func:`.circuit.compiled` so the proof, the float run, the export and the trace work unchanged,
and put a :class:`.info.CompileInfo` with its ``bound`` (``{"layers", "tokens", "rule"}``) in
``info["compiled"]``: ``compiled`` keeps it as ``con.compile_info`` and writes its dict), add one :class:`Target` to :data:`TARGETS` naming the options it takes
and its passes, and run ``tests/constructions/test_compiler_targets.py`` (every target compiles
and proves a placed circuit or refuses it with a one-line reason; the CLI's ``--target`` choices
are this table).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:  # the table is light: the passes are imported when a target compiles
    import networkx as nx

    from .circuit import CompiledCircuit

#: above this many gates (add/mul nodes) the default compiles the circuit as written: the rewrite's
#: cost grows faster than the circuit (one sum expression per product factor, each holding its terms:
#: random placed circuits, 100k gates 32 s CPU, 200k 66 s, 300k 147 s and 6 GB for the rewrite alone,
#: where compiling and proving 300k gates as written takes 40 s and 1.5 GB in all)
REASSOCIATE_MAX_GATES = 200_000


def _function(path: str):
    """The object ``module:qualname`` names under ``constructions.compiler`` (imported on first use)."""
    mod, _, qual = path.partition(":")
    obj = importlib.import_module(f"constructions.compiler.{mod}")
    for part in qual.split("."):
        obj = getattr(obj, part)
    return obj


class Compile:
    """A target's compile function, named ``module:function`` under ``constructions.compiler`` with
    fixed keyword arguments, imported on the first call (the table stays light: the CLI's --help
    and argument errors do not load the passes)."""

    def __init__(self, function: str, **fixed):
        self.function, self.fixed = function, fixed

    def __call__(self, g, name: str = "circuit", **options):
        return _function(self.function)(g, name, **self.fixed, **options)

    def __repr__(self):
        return f"Compile({self.function!r}{''.join(f', {k}={v!r}' for k, v in self.fixed.items())})"


#: option -> what it means (each a keyword of compile_circuit; a target takes a subset)
OPTIONS = {
    "min_width": "at least this many channels (to share a state with other stacks)",
    "heads": "at most this many heads per layer (per stage for elsa), spending layers",
    "channels": "a channel budget: every state and every layer's inner channels at most this many, spending layers",
}


@dataclass(frozen=True)
class Pass:
    """One pass of a target's compile: its name, the function (``module:qualname`` under
    ``constructions.compiler``) and what it produces."""

    name: str
    function: str
    produces: str

    def resolve(self):
        """The function itself (the tests check every listed pass exists)."""
        return _function(self.function)


@dataclass(frozen=True)
class Target:
    """One compile target (module docstring)."""

    name: str
    description: str
    paper: str
    family: str  # "sequence" (BaseConv over the token grid), "attention" (LSA/ELSA), "mlp" (one token)
    compile: Callable[..., CompiledCircuit]  # (validated g, name, **options) -> CompiledCircuit
    options: frozenset = frozenset()
    causal: bool = False
    passes: tuple = ()
    bound_rule: str = ""

    def accepts(self, option: str) -> bool:
        return option in self.options

    def bound(self, con: CompiledCircuit) -> dict:
        """The guarantee this target's compile reported (``compiled.bound``: layers, tokens, rule)."""
        return dict(con.compile_info.bound)


def compile_mlp_bounded(g: nx.DiGraph, name: str = "circuit") -> CompiledCircuit:
    """:func:`.mlp.compile_mlp`, with its stated bound (module docstring) in ``compiled.bound``."""
    from .bounds import formula
    from .linearise import needed
    from .mlp import compile_mlp

    con = compile_mlp(g, name)
    s = con.schedule
    md = max([0] + [s.level[a] for a in needed(s.atoms, s.outputs)])
    con.compile_info = replace(con.compile_info, bound={
        "layers": max(1, md), "tokens": 1, "formulas": {"layers": formula("max(1, md)", {"md": md}, max(1, md))},
        "rule": "max(1, md) layers on one token, md the multiplicative depth (one fused MULTIPLY + LINEAR layer "
                "per level; constructions/compiler/mlp.py)"})
    return con


_LINEARISE = Pass("linearise", "linearise:linearise", "atoms (inputs, binary products) and their levels; "
                                                       "every output an affine form over atoms")
_SEQ_PASSES = (
    _LINEARISE,
    Pass("place", "place:candidates", "input layouts: the canonical channel relabelling and the splits"),
    Pass("plan", "sequence:plan", "LayerSpec per layer (product / route), the narrowest layout"),
    Pass("search", "budget_search:compile_best", "without a budget: the default plan, or the packed plan on the "
                                                  "grid's own channels where it is no worse in layers, then "
                                                  "channels (every plan a budget tries on small circuits)"),
    Pass("plan under a budget", "budget_search:compile_within", "with channels=C: the unbounded plan where it fits, "
                                                                "else the fewest layers among the levelled plans "
                                                                "with fewer products per layer, the packed plans and "
                                                                "the budget machine (level-parallel or one product "
                                                                "at a time)"),
    Pass("emit", "sequence:_emit", "BaseConv weights per LayerSpec"),
    Pass("assemble", "circuit:compiled", "CompiledCircuit (slots, info, bound)"),
)
_ATT_PASSES = (
    _LINEARISE,
    Pass("plan", "attention:plan", "Plan: heads per layer (gather, products per level, outputs)"),
    Pass("limit heads", "attention:limit_heads", "with heads=H: each layer split to at most H heads"),
    Pass("emit", "attention:compile_attention", "LSA layers / ELSA modules (attention:modules) of the heads"),
    Pass("assemble", "circuit:compiled", "CompiledCircuit (slots, info, bound)"),
)
_SEQ_BOUND = ("2 md + 1 layers on the input grid's tokens (a product layer per level of multiplicative depth "
              "md, a route layer before it where a factor must move, one for the outputs); where the search keeps "
              "another compile, and with channels=C, the stated bound of the compile chosen "
              "(constructions/compiler/budget_search.py)")
_SEQ_PAPER = ("seed 000 Thm. D.30 / seed 003 Thm. H.21 (levelled; seed 000 App. D.2.1 LINEAR, MULTIPLY; "
              "seed 003 Lemmas H.7-H.8)")

#: the targets, by name (the order of the CLI's help and of the report's tables)
TARGETS: dict[str, Target] = {t.name: t for t in (
    Target("baseconv", "BaseConv over the placed circuit's tokens, circular convolution (seed 000 Thm. D.30)",
           _SEQ_PAPER, "sequence", Compile("sequence:compile_sequence", causal=False),
           frozenset({"min_width", "channels"}), causal=False, passes=_SEQ_PASSES, bound_rule=_SEQ_BOUND),
    Target("baseconv-causal", "BaseConv over the placed circuit's tokens, causal convolution",
           _SEQ_PAPER, "sequence", Compile("sequence:compile_sequence", causal=True),
           frozenset({"min_width", "channels"}), causal=True, passes=_SEQ_PASSES, bound_rule=_SEQ_BOUND),
    Target("baseconv-mlp", "BaseConv on one token, every live value its own channel (a gated MLP)",
           "seed 000 App. D.2.1 (LINEAR, MULTIPLY), seed 003 Thm. H.21 / seed 000 Thm. D.30", "mlp",
           Compile("targets:compile_mlp_bounded"),
           frozenset(), passes=(_LINEARISE, Pass("schedule", "mlp:_schedule", "Schedule: levels and live ranges"),
                                Pass("emit", "mlp:_emit", "one fused MULTIPLY + LINEAR BaseConv layer per level"),
                                Pass("assemble", "circuit:compiled", "CompiledCircuit")),
           bound_rule="max(1, md) layers on one token"),
    Target("lsa", "multi-head LSA (seed 001 eq. (8)) over the placed tokens, with a one-hot position block",
           "seed 001 eq. (8), (38)", "attention", Compile("attention:compile_attention", elsa=False),
           frozenset({"min_width", "heads"}), passes=_ATT_PASSES,
           bound_rule="md + 2 LSA layers (a gather, a product layer per level, the outputs); with heads=H each "
                      "layer of K heads at most ceil(K / H) + 1"),
    Target("elsa", "ELSA modules (seed 001 eq. (16), (57)-(59)) over the placed tokens, positions in the biases",
           "seed 001 eq. (16), modules of eq. (57)-(59)", "attention",
           Compile("attention:compile_attention", elsa=True),
           frozenset({"min_width", "heads"}), passes=_ATT_PASSES,
           bound_rule="ceil((md + 2) / 2) ELSA modules (the LSA plan's layers, two stages per module)"),
)}

#: the default targets: a placed circuit (inputs carrying token/channel) and an unplaced one
DEFAULT_PLACED, DEFAULT_UNPLACED = "baseconv", "baseconv-mlp"


def default_target(g: nx.DiGraph) -> str:
    import circuits as C

    return DEFAULT_PLACED if C.placement(g) is not None else DEFAULT_UNPLACED


def names_text(names) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    names = list(names)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def accepting(option: str) -> tuple[str, ...]:
    """The names of the targets that take ``option``, in table order."""
    return tuple(n for n, t in TARGETS.items() if option in t.options)


def causal_targets() -> tuple[str, ...]:
    return tuple(n for n, t in TARGETS.items() if t.causal)


def resolve(name: str) -> Target:
    """The target of that name; an unknown name is a one-line ValueError listing the table."""
    try:
        return TARGETS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown compile target {name!r} (one of {', '.join(TARGETS)})") from None


def option_error(target: Target, option: str) -> str | None:
    """None where ``target`` takes ``option``, else the one-line reason."""
    if target.accepts(option):
        return None
    return f"{option} applies to the {names_text(accepting(option))} targets, not {target.name!r}"


def target_options(target: Target, **given) -> dict:
    """The options given (None: not given) that ``target`` takes; a ValueError (one line, from
    :func:`option_error`) for one it does not take.  ``min_width`` of 1 is its default."""
    out = {}
    for option, v in given.items():
        if option not in OPTIONS:
            raise TypeError(f"unknown compile option {option!r} (one of {', '.join(OPTIONS)})")
        if v is None or (option == "min_width" and v == 1):
            continue
        err = option_error(target, option)
        if err is not None:
            raise ValueError(err)
        out[option] = v
    return out


__all__ = ["Compile", "OPTIONS", "Pass", "REASSOCIATE_MAX_GATES", "Target", "TARGETS", "DEFAULT_PLACED", "DEFAULT_UNPLACED", "accepting",
           "causal_targets", "default_target", "names_text", "option_error", "resolve", "target_options"]
