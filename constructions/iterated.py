"""Iterative algorithms compiled once and proved at every depth: a *step circuit* as the repeated body.

A step circuit maps the state of step t to the state of step t+1: an output named as an input (``x_j``
for the new iterate) feeds that input in the next step, and data kept across steps is a pass-through
output (an input node that is also the output of its own name: ``A_i_j``).  :func:`compile_iteration`
compiles it (``constructions/compiler``, any target that holds it: seed 000 Thm. D.30 / seed 003
Thm. H.21 for BaseConv, seed 001 eq. (8) / (16) for LSA / ELSA) and returns an :class:`IteratedCircuit`,
a :class:`~constructions.base.Construction` with an empty prologue, the compiled step as its body and
an empty epilogue: the stack of depth ``K * len(body)`` runs K steps.  The prover checks one body copy
in fresh symbols (``state(v)`` -> ``state(step(v))``, ``step`` the circuit evaluated exactly), which by
induction proves every K (``docs/design.md`` decision 4), as for the hand GD constructions.

Parameters (``params=``, or ``"param": true`` on an input node of a circuit file): inputs of the step that
the step does not change (a step size ``eta``).  They
need no output: they are held in the state, as pass-through outputs added here, and stay free symbols
of the proof, so one proof covers every value (where the hand GD constructions rebuild their weights on
a symbolic ``eta``, a compiled step reads ``eta`` from its state: a product gate instead of a weight).

What is refused, one line each (:class:`IterationError`, before any compile): an input that no output
feeds (neither a parameter nor passed through), an output that feeds no input, an output that feeds an
input of another shape (``x_0 .. x_3`` for an input ``x_0 .. x_4``), a parameter the step changes or that
is no input, an output placed elsewhere than the input it feeds, a repeat count outside
``1 .. MAX_REPEAT`` (:func:`check_repeat`).

:func:`compile_sections` compiles several circuits (prologue, body, epilogue) to one target on one common
state width; :mod:`constructions.compiled_gd` assembles the compiled GD architectures with it.
"""
from __future__ import annotations

import re

import networkx as nx
import numpy as np

import circuits as C
from circuits import keys as K

from .compiler import compile_circuit
from .compiler.circuit import CompiledCircuit

REFERENCE = ("a step circuit compiled by constructions/compiler (seed 000 Thm. D.30, seed 003 Thm. H.21; "
             "seed 001 eq. (8), (16) for lsa / elsa) and repeated as the body (seed 000 App. D.3: prologue + "
             "body x k + epilogue)")

#: the most steps a repeated stack may be asked for (``--repeat``; the proof's cost does not grow with it,
#: the float runs' and the stack's size do)
MAX_REPEAT = 100_000
#: with ``--allow-large``
MAX_REPEAT_LARGE = 10_000_000


class IterationError(ValueError):
    """A step circuit that cannot be a repeated body, or a bad repeat count (one line, naming it)."""


def check_repeat(k, limit: int = MAX_REPEAT, flag: str = "repeat") -> int:
    """``k`` as an int in ``1 .. limit``, else :class:`IterationError` naming the bound."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise IterationError(f"{flag} must be an int, got {type(k).__name__} {k!r:.40}")
    if not 1 <= k <= limit:
        raise IterationError(f"{flag} {k} is outside 1 .. {limit} (the steps of the repeated stack)")
    return int(k)


_ENTRY = re.compile(r"^(.*?)((?:_\d+)*)$")


def entry_shape(names) -> dict[str, tuple[int, ...]]:
    """The arrays ``names`` spell (``x_0 .. x_4`` -> ``{"x": (5,)}``, ``A_i_j`` -> 2-D, a plain name ->
    ``()``): each base name's shape, one more than its largest index per axis (entries of two ranks
    under one base name: the larger rank, the smaller ones counted as an axis of length 0)."""
    index: dict[str, list[tuple[int, ...]]] = {}
    for n in names:
        base, idx = _ENTRY.match(n).groups()
        if not base:  # a name of digits only
            base, idx = n, ""
        index.setdefault(base, []).append(tuple(int(i) for i in idx.split("_")[1:]) if idx else ())
    shapes = {}
    for base, idxs in index.items():
        rank = max(len(i) for i in idxs)
        shapes[base] = tuple(max((i[a] + 1 for i in idxs if len(i) == rank), default=0) for a in range(rank)) \
            if all(len(i) == rank for i in idxs) else tuple(0 for _ in range(rank)) + (len(idxs),)
    return shapes


def _place_of(g, node, name: str):
    d = g.nodes[node]
    if d.get(K.OP) == K.INPUT:
        t, c = d.get(K.OUTPUT_TOKEN), d.get(K.OUTPUT_CHANNEL)
    else:
        t, c = d.get(K.TOKEN), d.get(K.CHANNEL)
    return None if t is None else (t, c)


def _set_place(g, node, place) -> None:
    d = g.nodes[node]
    if d.get(K.OP) == K.INPUT:
        d[K.OUTPUT_TOKEN], d[K.OUTPUT_CHANNEL] = place
    else:
        d[K.TOKEN], d[K.CHANNEL] = place


#: the node attribute that declares an input a parameter in a circuit file (``"param": true``)
PARAM = "param"


def step_params(g: nx.DiGraph, params=()) -> tuple[str, ...]:
    """The inputs held fixed: ``params`` and, after them, every input node of ``g`` that carries
    ``"param": true`` (a circuit file's declaration); any other value of that attribute is refused."""
    params = tuple(params)
    declared = []
    for _, d in g.nodes(data=True):
        if PARAM in d:
            if d.get(K.OP) != K.INPUT or d[PARAM] not in (True, False):
                raise IterationError(f"{d.get(K.OP)} node {d.get(K.NAME, '')!r}: the attribute {PARAM!r} is for input "
                                     f"nodes, true or false (got {d[PARAM]!r:.40})")
            if d[PARAM] and d[K.NAME] not in params:
                declared.append(d[K.NAME])
    return params + tuple(sorted(declared))


def check_step(g: nx.DiGraph, params=()) -> nx.DiGraph:
    """A validated copy of the step circuit ``g`` that is a repeatable body: every input fed by the output
    of its name (``params`` held: a pass-through output added for each), each fed output at its input's
    place where the inputs are placed.  :class:`IterationError` (one line) where it cannot be."""
    g = C.validate(g)
    ins, outs = C.input_nodes(g), C.output_nodes(g)
    params = step_params(g, params)
    for p in params:
        if not isinstance(p, str):
            raise IterationError(f"params: {p!r:.40} is not an input name (a str)")
        if p not in ins:
            raise IterationError(f"params: {p!r} is not an input of the step (inputs: {', '.join(list(ins)[:8])}"
                                 + (", ..." if len(ins) > 8 else "") + ")")
        if p in outs and outs[p] != ins[p]:
            raise IterationError(f"params: parameter {p!r} is changed by the step (its output is computed); a "
                                 f"parameter is held: drop that output or pass the input through")
    if len(set(params)) != len(params):
        raise IterationError(f"params: {sorted(p for p in params if params.count(p) > 1)[0]!r} named twice")
    in_shape, out_shape = entry_shape(ins), entry_shape(outs)
    for base, s in sorted(out_shape.items()):
        if base in in_shape and in_shape[base] != s:
            raise IterationError(f"output {base} (shape {s}) feeds input {base} of another shape {in_shape[base]}: "
                                 f"a step's output must have its input's shape")
    extra = [o for o in outs if o not in ins]
    if extra:
        raise IterationError(f"output {extra[0]!r} feeds no input: every output of a step circuit is named as an "
                             f"input (the state of the next step)" + (f"; {len(extra)} such outputs" if len(extra) > 1
                                                                       else ""))
    unfed = [n for n in ins if n not in outs and n not in params]
    if unfed:
        raise IterationError(f"input {unfed[0]!r} is not fed: no output is named {unfed[0]!r} (data kept across "
                             f"steps is a pass-through output; a value held fixed is a parameter: params=, --params)"
                             + (f"; {len(unfed)} inputs unfed" if len(unfed) > 1 else ""))
    g = g.copy()
    placed = C.placement(g) is not None
    for p in params:
        if p in outs:
            continue
        d = g.nodes[ins[p]]
        d[K.OUTPUT] = p
        if placed:
            d[K.OUTPUT_TOKEN], d[K.OUTPUT_CHANNEL] = d[K.TOKEN], d[K.CHANNEL]
    if placed:
        for name, node in C.output_nodes(g).items():
            want = (g.nodes[ins[name]][K.TOKEN], g.nodes[ins[name]][K.CHANNEL])
            got = _place_of(g, node, name)
            if got is None:
                _set_place(g, node, want)
            elif tuple(got) != want:
                raise IterationError(f"output {name!r} is placed at {tuple(got)}, not at the place {want} of the "
                                     f"input it feeds: a repeated body keeps every value where the next step reads it")
    return C.validate(g)


def _on_one_token(g: nx.DiGraph) -> nx.DiGraph:
    """An unplaced step placed on one token, each input its own channel (sorted by name), each output at
    its input's place."""
    g = g.copy()
    ins = C.input_nodes(g)
    chan = {name: i for i, name in enumerate(ins)}
    for name, node in ins.items():
        g.nodes[node][K.TOKEN], g.nodes[node][K.CHANNEL] = 0, chan[name]
    for name, node in C.output_nodes(g).items():
        _set_place(g, node, (0, chan[name]))
    return C.validate(g)


def _slots_agree(con: CompiledCircuit) -> bool:
    return all(con.output_slots.get(n) == s for n, s in con.input_slots.items()) and \
        set(con.output_slots) == set(con.input_slots)


def compile_step(g: nx.DiGraph, name: str, target: str | None = None, **opts) -> CompiledCircuit:
    """The checked step (:func:`check_step`) compiled so that every output lands on its input's slot:
    an unplaced step whose compile puts them elsewhere is placed on one token and compiled again."""
    con = compile_circuit(g, name=name, target=target, **opts)
    if not _slots_agree(con) and C.placement(g) is None:
        con = compile_circuit(_on_one_token(g), name=name, target=target, **opts)
        con.graph = g
    if not _slots_agree(con):
        bad = sorted(n for n, s in con.input_slots.items() if con.output_slots.get(n) != s)
        raise IterationError(f"the {target or 'default'} compile puts output {bad[0]!r} at "
                             f"{con.output_slots.get(bad[0])}, not at its input's slot {con.input_slots[bad[0]]}")
    return con


class IteratedCircuit(CompiledCircuit):
    """Prologue (empty) + the compiled step x k + epilogue (empty).  The state holds each input of the
    step at its slot (and the lsa target's constant block); ``step(v)`` is the step circuit evaluated on
    ``v`` (exact: affine forms, the proof's specification; float: plain evaluation)."""

    params_held: tuple = ()
    repeat: int | None = None  # the K this stack was asked for (None: any)

    def state(self, v):
        return self.input_state(v)

    def final_state(self, v):
        return self.input_state(v)

    def step(self, v):
        names, first = self._first(v)
        ins = {n: v[n] for n in names}
        if first.dtype == object:
            out = C.evaluate_affine(self.graph, ins, validated=True)
        else:
            out = C.evaluate(self.graph, ins, validated=True)
        return {n: out[n] for n in names}

    def iterate(self, v, k: int) -> dict:
        """``k`` steps of the circuit from ``v`` (the specification's own iteration)."""
        for _ in range(k):
            v = self.step(v)
        return v

    def summary(self) -> dict:
        s = super().summary()
        s["repeat"] = self.repeat
        s["params_held"] = list(self.params_held)
        return s


def compile_iteration(step: nx.DiGraph, k: int | None = None, *, params=(), target: str | None = None,
                      name: str = "iteration", limit: int = MAX_REPEAT, **opts) -> IteratedCircuit:
    """The step circuit ``step`` as a repeated body: prologue + body x k + epilogue (both empty), proved
    at every depth by ``verify.prover.proof.prove`` (one body, by induction).  ``k``: the steps the stack
    is built for (``con.layers(con.repeat)``; None: any, give it to ``layers``/``run``), checked in
    ``1 .. limit``; ``params``: inputs held fixed (symbols of the proof, one proof for every value);
    ``target`` and ``opts`` (``heads``, ``channels``, ``reassociate``, ``min_width``): ``compile_circuit``'s.
    Refusals: :class:`IterationError` (the module docstring), one line, before any compile."""
    if k is not None:
        k = check_repeat(k, limit)
    params = step_params(step, params)
    g = check_step(step, params)
    body = compile_step(g, name, target, **opts)
    con = IteratedCircuit(name=name, reference=REFERENCE, layout=body.layout, prologue=[], body=list(body.epilogue),
                          epilogue=[], params={}, variables={n: () for n in C.inputs(g)},
                          carried=tuple(n for n, node in C.output_nodes(g).items()
                                        if node != C.input_nodes(g).get(n)),
                          notes=f"compiled step ({body.info['compiled'].get('target', target)}) repeated as the body")
    con.graph, con.compiled_graph = g, body.compiled_graph
    con.input_slots, con.output_slots = dict(body.input_slots), dict(body.output_slots)
    con.constants, con.params_held, con.repeat = dict(body.constants or {}), tuple(params), k
    con.info = dict(body.info)
    if body.compile_info is not None:  # the typed report too (its JSON, below, adds the iteration's keys)
        con.compile_info = body.compile_info
    con.info["compiled"] = dict(con.info["compiled"], repeat=k, params=list(params),
                                depth_formula=f"0 + {len(body.epilogue)}*k")
    return con


def compile_sections(circuits: dict, names: dict, target: str, **opts) -> dict:
    """Each circuit (prologue, body, epilogue, ...) compiled to ``target``; those narrower than the widest
    compiled again at that width, so that the stacks share one state."""
    parts = {k: compile_circuit(g, name=names[k], target=target, **opts) for k, g in circuits.items()}
    width = max(p.layout.shape[1] for p in parts.values())
    return {k: p if p.layout.shape[1] == width else
            compile_circuit(circuits[k], name=names[k], target=target, min_width=width, **opts)
            for k, p in parts.items()}


__all__ = ["IteratedCircuit", "IterationError", "MAX_REPEAT", "MAX_REPEAT_LARGE", "check_repeat", "check_step",
           "compile_iteration", "compile_sections", "compile_step", "entry_shape", "step_params"]
