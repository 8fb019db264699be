"""The construction every target returns: a compiled circuit with its inputs and outputs on slots.

A slot is a ``(token, channel)`` cell of the state.  The input state holds each circuit input
at its slot and zeros elsewhere; the final state holds each output at its slot and zeros
elsewhere (so the proof compares the whole final state, not only the outputs).
"""
from __future__ import annotations

import networkx as nx
import numpy as np

import circuits as C

from ..base import Construction
from ..sparse import nnz as count_nonzero
from ..layout import Layout


class CompiledCircuit(Construction):
    """A circuit compiled by :func:`constructions.compiler.compile_circuit` (no repeated body,
    unless the circuit's outputs sit on its inputs' slots and :func:`as_body` made it one)."""

    graph: nx.DiGraph = None
    #: the circuit the layers compute where a pass rewrote ``graph`` (same polynomials; None: ``graph``
    #: itself); read only by ``verify.compiler_trace`` to name the rewritten intermediate values
    compiled_graph: nx.DiGraph = None
    input_slots: dict = None  # input name -> (token, channel)
    output_slots: dict = None  # output name -> (token, channel)
    constants: dict = None  # (token, channel) -> value: a constant block the input map adds (lsa)
    info: dict = None  # the compile report (circuit metrics, compiled sizes, bound)

    @property
    def compile_info(self):
        """The compile's own report, typed (:class:`.info.CompileInfo`); setting it rewrites
        ``info["compiled"]`` (its :meth:`~.info.CompileInfo.to_json`), the form every reader of the
        dict, and the JSON the commands write, sees."""
        return self.__dict__.get("_compile_info")

    @compile_info.setter
    def compile_info(self, ci) -> None:
        self.__dict__["_compile_info"] = ci
        self.info["compiled"] = ci.to_json()

    def _first(self, v):
        names = C.inputs(self.graph)
        return names, (np.asarray(v[names[0]]) if names else np.zeros(()))

    def _empty(self, names, first):
        if first.dtype == object or not names:
            return self.layout.new_state()
        return np.zeros(first.shape + tuple(self.layout.shape), dtype=first.dtype)

    def input_state(self, v):
        names, first = self._first(v)
        S = self._constant_block(self._empty(names, first))
        for nme in names:
            t, c = self.input_slots[nme]
            val = v[nme]
            S[..., t, c] = val.item() if isinstance(val, np.ndarray) and val.ndim == 0 else val
        return S

    def _constant_block(self, S):
        for (t, c), val in sorted((self.constants or {}).items()):
            S[..., t, c] = val if S.dtype == object else (float(val) if S.dtype.kind == "f" else int(val))
        return S

    def state(self, v):
        return self.input_state(v)

    def final_state(self, v):
        names, first = self._first(v)
        ins = {n: v[n] for n in names}
        if first.dtype == object:  # exact values (the proof's polynomials, Fractions): affine forms,
            # a ring add per product factor rather than per gate; the graph is the compile's validated one
            vals = C.evaluate_affine(self.graph, ins, validated=True)
        else:
            vals = C.evaluate(self.graph, ins, validated=True)
        S = self._constant_block(self._empty(names, first))
        for name, val in vals.items():
            t, c = self.output_slots[name]
            S[..., t, c] = val
        return S

    def step(self, v):
        return v

    def readout(self, state):
        return {name: state[..., t, c] for name, (t, c) in sorted(self.output_slots.items())}


def param_counts(layers) -> dict:
    """Nonzero and total entries of the layers' weight arrays."""
    nnz = total = 0
    for L in layers:
        for a in L.arrays().values():
            total += a.size
            nnz += count_nonzero(a)
    return {"nonzero": nnz, "total": total}


def compiled(g, name: str, shape: tuple[int, int], layers: list, inputs: dict, outputs: dict, info: dict, *,
             reference: str, notes: str, constants: dict | None = None) -> CompiledCircuit:
    """A :class:`CompiledCircuit` whose epilogue is ``layers``; the layout names each output slot;
    ``info["compiled"]``: the :class:`.info.CompileInfo` (kept as ``compile_info``, written as its dict)."""
    lay = Layout(tuple(shape), row_axis="tokens", col_axis="channels")
    for out, (t, c) in sorted(outputs.items()):
        lay.add(f"out:{out}", (t, t + 1), (c, c + 1), f"output {out!r} after the last layer")
    if constants:
        cols = sorted({c for _, c in constants})
        lay.add("positions", (0, shape[0]), (cols[0], cols[-1] + 1),
                "constant block of the input map: one-hot token positions")
    con = CompiledCircuit(name=name, reference=reference, layout=lay, prologue=[], body=[], epilogue=layers,
                          params={}, variables={n: () for n in C.inputs(g)}, notes=notes)
    con.graph, con.input_slots, con.output_slots, con.info = g, dict(inputs), dict(outputs), info
    con.compile_info = info["compiled"]
    con.constants = dict(constants or {})
    return con


def theorem_h21(m: dict, d: int) -> dict:
    """What seed 003 Thm. H.21 states for a circuit of metrics ``m`` (depth Delta, width w) whose inputs
    are an ``N x d`` grid: an equivalent (N, Delta', d, N', d')-BaseConv with Delta' = O(Delta log w)
    layers, inner sequence length N' = O(w) and inner dimension d' = d.  The theorem states no constants,
    so the entry gives the orders with the circuit's measures and their values at constant 1
    (``Delta_log2_w``, ``w``) to compare a compile's layers and tokens with, not a guarantee."""
    import math

    delta, w = int(m["depth"]), int(m["width"])
    return {"statement": "seed 003 Thm. H.21: Delta' = O(Delta log w) layers, N' = O(w) inner tokens, d' = d "
                         "inner channels; no constants stated",
            "layers": f"O(Delta log w) = O({delta} * log2({w}))", "Delta": delta, "w": w, "d": int(d),
            "Delta_log2_w": delta * max(1, math.ceil(math.log2(max(w, 2)))),
            "inner_tokens": f"N' = O(w) = O({w})", "inner_dimension": f"d' = d = {int(d)}",
            "source": "the paper's (seed 003 App. H.5, Thm. H.21), not this compiler's guarantee",
            "constants": "none stated: the statement and its proof give orders only (O(Delta) circuit layers, each "
                         "O(log w) BaseConv layers by Cor. H.20 / Prop. H.10)",
            "formulas": {"layers": {"formula": "c1 Delta ceil(log2 w), c1 not stated", "measures": {"Delta": delta,
                                    "w": w}, "value_at_c1": delta * max(1, math.ceil(math.log2(max(w, 2))))},
                         "inner_tokens": {"formula": "c2 w, c2 not stated", "measures": {"w": w}, "value_at_c2": w},
                         "inner_dimension": {"formula": "d", "measures": {"d": int(d)}, "value": int(d)}}}


def h21_d(g) -> int:
    """The d of seed 003 Thm. H.21 for ``g``: its placed grid's channels (one token holding every input
    where the circuit is not placed)."""
    pl = C.placement(g)
    return pl.channels if pl is not None else max(1, len(C.inputs(g)))
