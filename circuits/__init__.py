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

Places (optional; "placed circuits", :mod:`circuits.placement`): a place is
``(token, channel)`` in a ``tokens x channels`` input matrix, rows are tokens
(seed 000 Thm. D.30 / seed 003 Thm. H.21 take the inputs as an N x D matrix).
Coordinates are ``int`` >= 0 (not bool); give both of a pair or neither.
``token``,          on an ``input`` node: the input's place.  On a
``channel``         non-input node that carries ``output``: where that
                    output's value must be in the final state.  Not allowed
                    on a non-input node without ``output``.
``output_token``,   only on an ``input`` node that also carries ``output`` (a
``output_channel``  pass-through output, e.g. the data kept in place across a
                    GD step): that output's place (typically = its input
                    place).
Either every input is placed or none is.  Outputs may be unplaced (the
compiler chooses) when the inputs are placed; with unplaced inputs no output
may be placed.  No two inputs share a place, nor do two outputs.  A circuit
without places keeps its plain meaning (``placement(g)`` is ``None``).

Graph attributes
----------------
``tokens``,         optional grid size of a placed circuit: ints >= 1, at
``channels``        least ``1 + max token`` / ``1 + max channel`` over all
                    places (inputs and outputs), which is the default.
                    Refused on a circuit without places.

Edge attributes
---------------
``mult``            optional int >= 1 (default 1): the operand is used that
                    many times (``x*x`` is one edge x -> mul with ``mult=2``;
                    a DiGraph has no parallel edges).

What each function needs / adds
-------------------------------
``graph.validate(g)``       any DiGraph -> checked copy: const values become
                            ``Fraction``; gates/consts feeding no output are
                            pruned (``PrunedNodesWarning``); unused inputs kept;
                            places and grid sizes checked (on the pruned copy)
                            and stored as ``int``.
                            Raises ``CircuitError`` (one line, names the node).
``placement.placement(g)``  ``Placement(tokens, channels, inputs={name: place},
                            outputs={name: place or None})`` of a validated
                            circuit, or ``None`` when it has no places.
``graph.inputs/outputs``    sorted input / output names (read-only).
``graph.CircuitBuilder``    builds graphs with int ids; ``graph()`` validates.
``metrics.metrics(g)``      validates (``validated=True``: the caller already
                            did), returns n_inputs, size (wires counting
                            mult), depth, width (level cuts), formal degree,
                            n_gates; adds nothing to ``g``.
``evaluate.evaluate``       validates, maps ``{input name: value}`` to
                            ``{output name: value}`` for any +,* scalar type;
                            ``polynomials`` / ``to_ring`` are exact sympy
                            views; ``evaluate_affine`` the same exact values
                            with sums kept as affine forms over the products
                            (the proof's specification side).  Adds nothing
                            to ``g``.
``keys``                    the node attribute names (``op``, ``token``, ...)
                            and op values, as constants.
``builders.*``              return validated circuits with named inputs and
                            outputs (``A_i_j``, ``x_j``, ``b_i``, ``y_i``, ...);
                            ``placed=True`` adds the documented places (and,
                            for the iterative steps, ``keep_data`` pass-through
                            outputs so the step is a repeatable body).
``io.dump/load``            node-link JSON (``"links"`` written; ``"links"`` or
                            ``"edges"`` read; const value int or ``"p/q"``;
                            places and ``tokens``/``channels`` kept);
                            ``load`` returns a validated graph.
``random.random_circuit``   random validated circuits; CLI
                            ``python -m circuits.random``.
``random.local_circuit``    a placed circuit whose outputs read 3 neighbouring
                            tokens (blocks of one shape or random shapes).
``frontend.from_function``  a numpy-style function traced on symbolic arrays
                            (``fn, A=(n, d), x=(d,)``: inputs ``A_i_j``,
                            ``x_j``) -> validated circuit (outputs ``y_i``,
                            a tuple's ``y0, y1``, a dict's names); refused
                            operations one line naming the user's line;
                            ``token_sum`` / ``prefix_sum`` / ``shift`` the
                            sequence helpers.
``frontend_sympy.from_sympy``  ``{output: polynomial sympy expression}`` ->
                            validated circuit (symbols are the inputs,
                            ``sympy.cse`` shared).
No function mutates its argument.
"""
import sys
import types

from polyverify.plumbing.startup import catch_startup_interrupts as _catch

_catch()  # python -m circuits.random: Ctrl-C while the command starts is one line, exit 130

#: every public name and the submodule that defines it: imported on first use (PEP 562), so that
#: ``import circuits`` and a light submodule (``circuits.limits``) load neither networkx nor numpy
#: until a name is used (the CLIs' --help and argument errors stay light)
_NAMES = {
    **dict.fromkeys(("dot", "gd_step", "horner", "matvec", "newton_schulz_step", "ridge_gd_step"), "builders"),
    **dict.fromkeys(("evaluate", "evaluate_affine", "infer_const", "polynomials", "to_ring"), "evaluate"),
    **dict.fromkeys(("CircuitBuilder", "CircuitError", "PrunedNodesWarning", "exact_constant", "input_nodes",
                     "inputs", "mult", "operands", "output_nodes", "outputs", "validate"), "graph"),
    **dict.fromkeys(("dump", "load"), "io"),
    **dict.fromkeys(("formal_degrees", "levels", "metrics"), "metrics"),
    **dict.fromkeys(("Placement", "placement", "place_inputs"), "placement"),
    **dict.fromkeys(("UnsupportedOperation", "from_function", "prefix_sum", "shift", "token_sum"), "frontend"),
    "from_sympy": "frontend_sympy",
    # not imported with the package: ``python -m circuits.random`` would find the module pre-imported
    # (runpy RuntimeWarning)
    "random_circuit": "random",
    "local_circuit": "random",
}

__all__ = [
    "CircuitBuilder", "CircuitError", "PrunedNodesWarning", "exact_constant", "input_nodes", "inputs",
    "mult", "operands", "output_nodes", "outputs", "validate",
    "metrics", "levels", "formal_degrees",
    "evaluate", "evaluate_affine", "infer_const", "polynomials", "to_ring",
    "dot", "matvec", "gd_step", "ridge_gd_step", "newton_schulz_step", "horner",
    "dump", "load", "random_circuit", "local_circuit",
    "Placement", "placement", "place_inputs",
    "from_function", "from_sympy", "UnsupportedOperation", "token_sum", "prefix_sum", "shift",
]


#: names that are both a submodule and the function it defines: the package attribute is the function
#: (as when the package imported them eagerly), also after the submodule's import sets it to the module
_SHADOWED = frozenset(n for n, m in _NAMES.items() if n == m)


class _Package(types.ModuleType):
    def __setattr__(self, name, value):
        if name in _SHADOWED and isinstance(value, types.ModuleType):
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name):
    mod = _NAMES.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{mod}", __name__), name)
    if mod != "random":
        globals()[name] = value  # found once
    return value


def __dir__():
    return sorted(set(globals()) | set(_NAMES))
