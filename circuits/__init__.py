"""Arithmetic-circuit IR (seed 000, "Arithmetic Circuit Notation", Def. D.15).

Contract
========
A circuit is a ``networkx.DiGraph``; edges point operand -> result.

Node attributes
---------------
``op`` (required)   ``"input"``, ``"const"``, ``"add"`` or ``"mul"``.
``name``            required on ``input`` nodes: str, unique among inputs.
``value``           required on ``const`` nodes: exact ``int`` / ``Fraction``
                    (sympy ``Rational`` accepted; floats rejected).
                    :func:`validate` returns copies where it is a ``Fraction``.
``output``          optional on any node: str, unique among outputs; at least
                    one node must carry it.
Node ids are ``int`` or ``str``.  ``input``/``const`` nodes have no operands;
``add``/``mul`` are n-ary with >= 2 operands counted with ``mult``.

Edge attributes
---------------
``mult``            optional int >= 1 (default 1): the operand is used that
                    many times (``x*x`` is one edge x -> mul with ``mult=2``;
                    a DiGraph has no parallel edges).

What each function needs / adds
-------------------------------
``graph.validate(g)``       any DiGraph -> checked copy: const values become
                            ``Fraction``; gates/consts feeding no output are
                            pruned (``PrunedNodesWarning``); unused inputs kept.
                            Raises ``CircuitError`` (one line, names the node).
``graph.inputs/outputs``    sorted input / output names (read-only).
``graph.CircuitBuilder``    builds graphs with int ids; ``graph()`` validates.
``metrics.metrics(g)``      validates, returns n_inputs, size (wires counting
                            mult), depth, width (level cuts), formal degree,
                            n_gates; adds nothing to ``g``.
``evaluate.evaluate``       validates, maps ``{input name: value}`` to
                            ``{output name: value}`` for any +,* scalar type;
                            ``polynomials`` / ``to_ring`` are exact sympy
                            views.  Adds nothing to ``g``.
``builders.*``              return validated circuits with named inputs and
                            outputs (``A_i_j``, ``x_j``, ``b_i``, ``y_i``, ...).
``io.dump/load``            node-link JSON (``"links"`` written; ``"links"`` or
                            ``"edges"`` read; const value int or ``"p/q"``);
                            ``load`` returns a validated graph.
``random.random_circuit``   random validated circuits; CLI
                            ``python -m circuits.random``.
No function mutates its argument.
"""
from .builders import dot, gd_step, horner, matvec, newton_schulz_step, ridge_gd_step
from .evaluate import evaluate, infer_const, polynomials, to_ring
from .graph import (
    CircuitBuilder,
    CircuitError,
    PrunedNodesWarning,
    exact_constant,
    input_nodes,
    inputs,
    mult,
    operands,
    output_nodes,
    outputs,
    validate,
)
from .io import dump, load
from .metrics import formal_degrees, levels, metrics

__all__ = [
    "CircuitBuilder", "CircuitError", "PrunedNodesWarning", "exact_constant", "input_nodes", "inputs",
    "mult", "operands", "output_nodes", "outputs", "validate",
    "metrics", "levels", "formal_degrees",
    "evaluate", "infer_const", "polynomials", "to_ring",
    "dot", "matvec", "gd_step", "ridge_gd_step", "newton_schulz_step", "horner",
    "dump", "load", "random_circuit",
]


def __getattr__(name):
    # Imported lazily so that ``python -m circuits.random`` does not find the
    # module pre-imported by the package (runpy RuntimeWarning).
    if name == "random_circuit":
        from .random import random_circuit

        return random_circuit
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
