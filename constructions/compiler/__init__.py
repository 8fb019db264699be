"""Arithmetic circuits -> explicit BaseConv weight settings, one module per pass (as tracr's compiler).

================  ==========================================================================
module            pass
================  ==========================================================================
``linearise``     circuit -> affine forms over atoms (inputs, binary products), levels
``mlp``           target ``baseconv-mlp``: one token, every live value its own channel
``sequence``      targets ``baseconv`` / ``baseconv-causal``: the placed circuit's token grid;
                  product layers, route layers where a factor must move
``place``         the placed inputs -> the channels the sequence compile works in
``budget``        ``baseconv`` / ``baseconv-causal`` under a channel budget (layers for channels)
``routing``       a linear map between two sequence states -> one BaseConv layer
``attention``     targets ``lsa`` / ``elsa`` (seed 001): gather to a work row, product heads
                  per level, an output layer; ELSA groups the layers into two-stage modules
``circuit``       the :class:`CompiledCircuit` construction all targets return
================  ==========================================================================

:func:`compile_circuit` picks the target: ``baseconv`` for a placed circuit (inputs carrying
``token``/``channel``, :func:`circuits.placement`), ``baseconv-mlp`` otherwise, unless told.
"""
from __future__ import annotations

import networkx as nx

import circuits as C

from .attention import compile_attention
from .circuit import CompiledCircuit
from .mlp import compile_mlp
from .routing import CompileError
from .sequence import compile_sequence

#: target name -> what it compiles to
TARGETS = {
    "baseconv": "BaseConv over the placed circuit's tokens, circular convolution (seed 000 Thm. D.30)",
    "baseconv-causal": "BaseConv over the placed circuit's tokens, causal convolution",
    "baseconv-mlp": "BaseConv on one token, every live value its own channel (a gated MLP)",
    "lsa": "multi-head LSA (seed 001 eq. (8)) over the placed tokens, with a one-hot position block",
    "elsa": "ELSA modules (seed 001 eq. (16), (57)-(59)) over the placed tokens, positions in the biases",
}


def default_target(g: nx.DiGraph) -> str:
    return "baseconv" if C.placement(g) is not None else "baseconv-mlp"


def compile_circuit(g: nx.DiGraph, name: str = "circuit", target: str | None = None,
                    min_width: int = 1, heads: int | None = None, reassociate: bool = True,
                    channels: int | None = None) -> CompiledCircuit:
    """Compile a circuit (validated here) to ``target`` (default: :func:`default_target`); the
    sequence targets use at least ``min_width`` channels (to share a state with other stacks);
    ``heads``: at most that many heads per layer (``lsa``; per stage for ``elsa``), spending layers;
    ``reassociate``: first rewrite the circuit to the least multiplicative depth (:mod:`.reassociate`;
    False: compile it as written).  The stack is proved against the circuit as given either way.
    ``channels``: a channel budget for ``baseconv`` / ``baseconv-causal`` (:mod:`.budget`): every state
    and every layer's inner channels at most that many, spending layers; None: the smallest depth."""
    g = C.validate(g)
    target = target or default_target(g)
    if heads is not None and target not in ("lsa", "elsa"):
        raise ValueError(f"heads applies to the lsa and elsa targets, not {target!r}")
    if target not in TARGETS:
        raise ValueError(f"unknown compile target {target!r} (one of {', '.join(TARGETS)})")
    if channels is not None and target not in ("baseconv", "baseconv-causal"):
        raise ValueError(f"channels applies to the baseconv and baseconv-causal targets, not {target!r}")
    if reassociate:
        return _reassociated(g, name, target, min_width, heads, channels)
    if target == "baseconv-mlp":
        return compile_mlp(g, name)
    if target in ("baseconv", "baseconv-causal"):
        return compile_sequence(g, name, causal=target == "baseconv-causal", min_width=min_width,
                                channels=channels)
    if target in ("lsa", "elsa"):
        return compile_attention(g, name, elsa=target == "elsa", min_width=min_width, heads=heads)
    raise ValueError(f"unknown compile target {target!r} (one of {', '.join(TARGETS)})")


def _reassociated(g: nx.DiGraph, name: str, target: str, min_width: int, heads, channels=None) -> CompiledCircuit:
    """Compile :func:`.reassociate.reassociate` of ``g``; the construction keeps ``g`` itself (its
    proof is against the circuit as given) and reports both multiplicative depths.

    Re-association pays only where it lowers the multiplicative depth, and a lower depth does not
    always save a layer (a route layer may stay) while it can widen the state (the placed GD step
    with ``eta`` an input: depth 3 -> 2, 4 layers either way, 21 x 16 -> 21 x 22).  So: where the
    depth does not drop the circuit is compiled as written; where it drops both are compiled and
    the one with fewer layers, then the narrower state, is kept (``reassociated.chosen``)."""
    from .reassociate import multiplicative_depth, reassociate

    def build(c):
        return compile_circuit(c, name, target, min_width=min_width, heads=heads, reassociate=False,
                               channels=channels)

    h = reassociate(g)
    before, after = multiplicative_depth(g), multiplicative_depth(h)
    record = {"ran": True, "mult_depth_before": before, "mult_depth_after": after}
    con = build(h) if after < before else None
    keep = None
    if con is not None:
        plain = build(g)
        cost = lambda c: (c.info["compiled"]["layers"], c.info["compiled"].get("state_width", 0))  # noqa: E731
        if cost(plain) <= cost(con):
            keep = plain
            record["chosen"] = (f"as written: the re-associated circuit compiles to {cost(con)[0]} layers of width "
                                f"{cost(con)[1]}, no fewer layers or narrower than as written")
        else:
            record["chosen"] = "re-associated"
            record["circuit_after"] = con.info["circuit"]
            con.compiled_graph = h  # the trace labels with the rewritten circuit's nodes too
    else:
        record["chosen"] = "as written: re-association does not lower the multiplicative depth"
    if keep is not None or con is None:
        con = keep if keep is not None else build(g)
    con.graph = g
    con.info["compiled"]["reassociated"] = record
    con.info["circuit"] = C.metrics(g)
    return con


__all__ = ["CompiledCircuit", "CompileError", "TARGETS", "compile_circuit", "default_target"]
