"""The compile pipeline every target shares: :func:`compile_circuit` (validate -> resolve the
target -> re-associate -> the target's own passes), re-exported by :mod:`constructions.compiler`."""
from __future__ import annotations

from dataclasses import replace

import networkx as nx

import circuits as C

from .circuit import CompiledCircuit
from .info import Reassociation, ReassociationChoice as Choice
from .linearise import unchanged
from .routing import CompileError
from .targets import REASSOCIATE_MAX_GATES, Target, default_target, resolve, target_options


def compile_circuit(g: nx.DiGraph, name: str = "circuit", target: str | None = None,
                    min_width: int = 1, heads: int | None = None, reassociate: bool | None = None,
                    channels: int | None = None) -> CompiledCircuit:
    """Compile a circuit (validated here) to ``target`` (default: :func:`default_target`); the
    sequence targets use at least ``min_width`` channels (to share a state with other stacks);
    ``heads``: at most that many heads per layer (``lsa``; per stage for ``elsa``), spending layers;
    ``reassociate``: first rewrite the circuit to the least multiplicative depth (:mod:`.reassociate`;
    True: always; False: compile it as written; None, the default: up to :data:`REASSOCIATE_MAX_GATES`
    gates, as written above, where the rewrite's cost outgrows the circuit's).  The stack is proved
    against the circuit as given either way.
    ``channels``: a channel budget for ``baseconv`` / ``baseconv-causal`` (:mod:`.budget`): every state
    and every layer's inner channels at most that many, spending layers; None: the smallest depth.

    The passes (each target's own, after ``reassociate``, are its :attr:`.targets.Target.passes`):
    validate -> resolve the :class:`.targets.Target` and the options it takes (:data:`TARGETS`
    decides which; any other is a one-line ValueError) -> reassociate -> ``Target.compile``.
    A circuit beyond :data:`circuits.limits.COMPILE_LIMITS` (a wire's mult, a gate's operands, the
    size, each counted with mult) is refused first, a one-line :class:`circuits.graph.LimitError`."""
    g = C.validate(g)  # validate: nx.DiGraph -> a checked copy
    _check_compile_limits(g)
    tgt = resolve(target or default_target(g))  # resolve: name -> Target
    opts = target_options(tgt, min_width=min_width, heads=heads, channels=channels)
    gates = sum(1 for _, op in g.nodes(data="op") if op in ("add", "mul"))
    # the copy is this compile's own and no pass changes it: every pass's linearisation of it is one,
    # found by identity (.linearise.unchanged)
    with unchanged(g):
        if reassociate or (reassociate is None and gates <= REASSOCIATE_MAX_GATES):
            return _reassociated(g, name, tgt, opts, gates)
        con = tgt.compile(g, name, **opts)
    if reassociate is None:  # skipped by size: say so (False: the caller asked for the circuit as written)
        con.compile_info = replace(con.compile_info, reassociation=Reassociation.skipped(gates, REASSOCIATE_MAX_GATES))
    return con




def _check_compile_limits(g: nx.DiGraph) -> None:
    """A wire's multiplicity, a gate's operands and the circuit's size (each counted with mult) within
    :data:`circuits.limits.COMPILE_LIMITS`, refused up front with a one-line :class:`circuits.graph.LimitError`
    naming the node: the compile writes a wire of mult m as m operand slots, so its time grows with
    them (``mult = 10**6`` took 30 s before this check).  One pass over the wires, no degrees."""
    from circuits.graph import LimitError, one_line
    from circuits.limits import COMPILE_LIMITS

    why = "compile_circuit's ceiling (circuits.limits.COMPILE_LIMITS; a high power is written as repeated squaring)"
    size = 0
    for v, ops in g._pred.items():
        fan_in = 0
        for u, e in ops.items():
            m = e.get("mult", 1)
            if m > COMPILE_LIMITS["max_mult"]:
                raise LimitError(f"node {one_line(v)}: operand {one_line(u)} has mult {m}, which exceeds the limit "
                                 f"max_mult = {COMPILE_LIMITS['max_mult']}, {why}", "max_mult", m,
                                 COMPILE_LIMITS["max_mult"])
            fan_in += m
        if fan_in > COMPILE_LIMITS["max_fan_in"]:
            raise LimitError(f"node {one_line(v)}: {fan_in} operands (with mult), which exceeds the limit max_fan_in "
                             f"= {COMPILE_LIMITS['max_fan_in']}, {why}", "max_fan_in", fan_in,
                             COMPILE_LIMITS["max_fan_in"])
        size += fan_in
    if size > COMPILE_LIMITS["max_size"]:
        raise LimitError(f"circuit has size {size} (wires counted with mult), which exceeds the limit max_size = "
                         f"{COMPILE_LIMITS['max_size']}, {why}", "max_size", size, COMPILE_LIMITS["max_size"])


#: above this many gates (add/mul nodes of the circuit as given) a re-associated circuit of lower
#: multiplicative depth is kept without also compiling the circuit as written (see :func:`_reassociated`)
COMPARE_MAX_GATES = 5_000


def _reassociated(g: nx.DiGraph, name: str, target: Target, opts: dict, gates: int) -> CompiledCircuit:
    """Compile :func:`.reassociate.reassociate` of ``g``; the construction keeps ``g`` itself (its
    proof is against the circuit as given) and reports both multiplicative depths.

    Re-association pays only where it lowers the multiplicative depth, and a lower depth does not
    always save a layer (a route layer may stay) while it can widen the state (the placed GD step
    with ``eta`` an input: depth 3 -> 2, 4 layers either way, 21 x 16 -> 21 x 22).  So: where the
    depth does not drop the circuit is compiled as written (one compile); where it drops and the
    circuit has at most :data:`COMPARE_MAX_GATES` gates both are compiled and the one with fewer
    layers, then the narrower state, is kept; above that size only the re-associated circuit is
    compiled and kept (the second compile doubles the cost of a large circuit, and on the bench's
    random and block circuits, 1k to 10k gates, the lower depth won every comparison: 11 layers
    against more as written).  ``compile_info.reassociation.choice`` says which rule decided.

    ``g`` is the validated circuit (:func:`compile_circuit` validated it; not copied again), and
    :func:`.reassociate.reassociate` returns a validated circuit; neither changes while they are
    compiled, so each is linearised once (:func:`.linearise.unchanged`: found by identity, no content
    digest), and the as-written metrics are computed once; ``gates``: the add/mul nodes of ``g``."""
    from .reassociate import reassociate

    h = reassociate(g)
    with unchanged(h):  # the rewrite is this compile's own too (g is pinned by compile_circuit)
        return _choose(g, h, name, target, opts, gates)


def _choose(g: nx.DiGraph, h: nx.DiGraph, name: str, target: Target, opts: dict, gates: int) -> CompiledCircuit:
    """:func:`_reassociated`'s choice between ``g`` as written and its rewrite ``h``."""
    from .reassociate import multiplicative_depth

    def build(c):
        return target.compile(c, name, **opts)

    before, after = multiplicative_depth(g), multiplicative_depth(h)
    metrics_g = None  # why: the Reassociation's choice and what it names
    refusal = None
    if after >= before:
        con = build(g)
        metrics_g = con.info.get("circuit")
        why = {"choice": Choice.NOT_LOWER}
    else:
        try:
            rewritten = build(h)
        except (ValueError, CompileError) as e:
            refusal = e
            # the rewritten circuit can need more than the circuit as given (a causal channel budget
            # whose minimum was stated for the circuit as given, a causal dependency the rewriting
            # introduced): the circuit as written is compiled, and its own refusal, if any, stands
            rewritten, refused = None, str(e).splitlines()[0]
        plain = None
        if rewritten is None or gates <= COMPARE_MAX_GATES:
            from .budget_search import BudgetRefusal

            try:
                plain = build(g)
            except BudgetRefusal as e:
                # under a channel budget each circuit has its own least budget: the refusal names the
                # lesser, and a budget only the rewrite meets gives the rewrite
                if rewritten is None:
                    least = e.least if not isinstance(refusal, BudgetRefusal) else min(
                        x for x in (e.least, refusal.least) if x is not None)
                    raise BudgetRefusal(e.channels, least, e.target) from None
        cost = lambda c: (c.compile_info.layers, c.compile_info.state_width)  # noqa: E731
        if rewritten is None:
            con, metrics_g = plain, plain.info.get("circuit")
            why = {"choice": Choice.REWRITE_REFUSED, "refused": refused}
        elif plain is not None and cost(plain) <= cost(rewritten):
            why = {"choice": Choice.NOT_SMALLER, "rewritten_cost": cost(rewritten)}
            con, metrics_g = plain, plain.info.get("circuit")
        else:
            con = rewritten
            if plain is None and gates > COMPARE_MAX_GATES:
                why = {"choice": Choice.REWRITTEN_UNCOMPARED, "gates": gates, "limit": COMPARE_MAX_GATES}
            else:  # both compiled, or the circuit as written refused under the budget
                why = {"choice": Choice.REWRITTEN}
                metrics_g = plain.info.get("circuit") if plain is not None else None
            why["circuit_after"] = con.info["circuit"]
            con.compiled_graph = h  # the trace labels with the rewritten circuit's nodes too
    con.graph = g
    record = Reassociation(ran=True, mult_depth_before=before, mult_depth_after=after, **why)
    con.compile_info = replace(con.compile_info, reassociation=record)
    con.info["circuit"] = metrics_g if metrics_g is not None else C.metrics(g, validated=True)
    return con


__all__ = ["COMPARE_MAX_GATES", "compile_circuit"]
