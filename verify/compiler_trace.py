"""Which circuit node sits where: residual-stream labels of a compiled circuit, as tracr's.

tracr (Lindner et al. 2023) labels every dimension of its residual stream with the variable and
value it carries.  This module gives a compiled circuit the same reading, computed *after the
fact* from the compiled stack and the circuit alone (so it knows nothing of the passes that
built the stack, and also reads a stack from a weight file): for every layer it says which
circuit node's value sits at each ``(token, channel)`` of the state, and for a BaseConv layer
(seed 000 eq. (2)/(19)) which product each *inner* channel forms, its gate side
``u W_gate + B_gate`` times its convolution side ``h * (u W_in + B_in) + B_conv``, and for an
LSA layer / ELSA module (seed 001 eq. (8), (16)) which product each head forms: the labels of its
query, key and value sides and of the cells it writes (:class:`HeadTrace`).

How the labels are found: by random evaluation modulo a prime.  ``draws`` independent points
are drawn uniformly from ``F_p^n`` (one residue per circuit input, ``p = 2^31 - 1`` unless a
weight's denominator is divisible by it: then the next prime of ``verify.prover.modular.PRIMES``); the
stack runs on them layer by layer (``Construction.run`` with a per-layer hook; the layer
equations on residues are ``verify.prover.modular``'s, those of ``constructions.layers``), and every
node of the circuit is evaluated on the same points.  A cell is labelled

* *empty* where its value is 0 at every point (left out of the labels),
* with the nodes whose values equal it at every point (``cells``),
* with ``c`` times the nodes where it equals ``c`` times them at every point (``scaled``;
  ``c`` a rational recovered from its residue by rational reconstruction, ``None`` where no
  rational with numerator and denominator below ``sqrt(p/2)`` has that residue),
* as the constant ``c`` where its value is the same at every point (``constants``: e.g. the
  one-hot position block of the ``lsa`` target),
* as *other* (a partial sum, a routed linear combination: a value that is no node's multiple).

The nodes are those of ``con.graph`` (the circuit as given, which the proof compares with) and,
where a pass rewrote the circuit before placing it (re-association: ``con.compiled_graph``), the
rewritten circuit's nodes whose values no node of ``con.graph`` has: keys ``("compiled", id)``,
shown as ``c:p12``.  Names: an input by its name, an output gate by its output name (with a
prime, ``x_0'``, where an input has that name: the GD step's next ``x_0``), another gate as
``p<id>`` (a product) or ``s<id>`` (a sum); :meth:`Trace.legend` says what each computes.

The error bound.  Every value here is a polynomial in the inputs; a label compares a cell's
polynomial ``w`` with a node's ``v`` (or with the constant 1, or 0).  If ``w`` is not a
multiple ``c v`` of ``v`` but ``(w, v)`` agree up to one common factor at all ``draws`` points,
then ``w(x) v(y) - w(y) v(x)`` vanished at the pairs of points; by Schwartz-Zippel (each of
``w``, ``v`` of degree at most ``d`` over ``F_p``) that happens with probability at most
``(draws + 1) (d / p)^(draws - 1)`` (the first point where not both vanish fixes ``c``, each later
point then passes with probability at most ``d / p``).  A union bound over every labelled cell
and every distinct node value gives :attr:`Trace.error_bound`, the probability that *any*
label is wrong (a head's sides and writes included); ``d`` is bounded per layer from the
weights' nonzero patterns (a BaseConv inner channel's degree is its gate side's plus its
convolution side's, per channel; an LSA/ELSA stage at most triples it) and the circuit's node
degrees.  :func:`trace` takes the fewest draws (at least 3) that make this bound at most
``error_target`` (1e-9 by default).  Caveat of any evaluation modulo ``p``: a difference
polynomial whose rational coefficients all have numerators divisible by ``p`` vanishes modulo
``p``; the bound is for differences that do not.

These labels are for reading, like tracr's; they are not the proof.  The proof
(``verify.prover.proof.prove``) stays exact, symbolic in every input and separate: it shows that the
final state *is* the circuit's outputs, for every input, whatever the labels say.
"""
from __future__ import annotations

import networkx as nx
import numpy as np

import circuits as C
from circuits import keys as K

# the labels, the arithmetic modulo p, the degree bounds and the figure are their own modules
# (verify/compiler_trace_labels.py, compiler_trace_modp.py, compiler_trace_degrees.py,
# compiler_trace_plot.py); verify.compiler_trace re-exports their names
from .compiler_trace_degrees import (NEG, attention_degrees, baseconv_degrees, error_bound,  # noqa: F401
                                     choose_draws, layer_degrees, lin_deg, max_deg)
from .compiler_trace_labels import (KINDS, OTHER, HeadTrace, Label, LayerTrace, Trace, display,  # noqa: F401
                                    is_product, jid, jids, node_kind)
from .compiler_trace_modp import Index, inv, node_values, rational  # noqa: F401


# --------------------------------------------------------------------------- the trace

class _ModLayer:
    """A layer on residues for ``Construction.run``: ``verify.prover.modular.forward``; a BaseConv layer
    also keeps its gate side, convolution side and their product (the terms of seed 000 eq. (19)),
    checked against that forward."""

    def __init__(self, L: dict, p: int, ran: list):
        self.L, self.p, self.inner, self.heads, self.ran = L, p, None, None, ran

    def forward(self, u, *, conv_method: str = "direct"):
        from .prover import modular as M

        L, p = self.L, self.p
        y = M.forward(L, u, p)
        if L["kind"] == "baseconv":
            g = (M.mm(u, L["W_gate"], p) + L["b_gate"]) % p
            v = (M.mm(u, L["W_in"], p) + L["b_in"]) % p
            z = (M.conv(v, L["h"], L["causal"], p, L["same"]) + L["b_conv"]) % p
            prod = g * z % p
            y2 = (M.mm(prod, L["W_out"], p) + L["b_out"]) % p
            if L["residual"]:
                y2 = (u + y2) % p
            if not np.array_equal(y, y2):  # the layer's equations changed under this module
                raise RuntimeError("trace: a BaseConv layer's gate x convolution sides do not give its forward")
            self.inner = (g, z, prod)
        elif L["kind"] in ("lsa", "elsa"):
            self.heads = _head_sides(L, u, y, p)
        self.ran.append(self)
        return y


def _head_sides(L: dict, u, y, p: int) -> list:
    """Every head of an LSA layer / ELSA module on residues: ``(stage, head, Q, K, V, out)``, its
    query side ``P W3 + B3``, key side ``P W1 + B1`` (Gram columns), value side ``P W2 + B2`` (value
    columns) of its stage's input ``P`` and the cells it writes, ``Q K^T V`` (seed 001 eq. (8), (16));
    checked against the layer's forward (the heads of a stage sum to the next stage's input)."""
    from .prover import modular as M

    out, P = [], u
    for s, stage in enumerate(L["stages"]):
        acc = np.zeros_like(u)
        for h, hd in enumerate(stage):
            sides = []
            for key in ("q", "k", "v"):
                rows, W, B = hd[key]
                X = M.mm(P[..., rows], W, p) if rows else np.zeros(P.shape[:-1] + (W.shape[1],), dtype=np.int64)
                sides.append(X if B is None else (X + B) % p)
            Qm, Km, Vm = sides
            o = np.zeros_like(u)
            o[..., hd["vcols"]] = M.mm(Qm, M.mm(np.swapaxes(Km, -1, -2), Vm, p), p)
            acc = (acc + o) % p
            out.append((s, h, Qm, Km, Vm, o))
        P = acc
    if not np.array_equal((u + P) % p if L["residual"] else P, y):  # the layer's equations changed
        raise RuntimeError("trace: an attention layer's heads do not give its forward")
    return out


def _graphs(con) -> tuple:
    """``(g, h)``: the circuit as given (``con.graph``, which the proof compares with) and, where a pass
    rewrote it (re-association) over the same inputs, the circuit the layers compute (its nodes label
    what no node of the circuit as given holds); ``h`` None where there is none."""
    g = con.graph
    h = getattr(con, "compiled_graph", None)
    return g, (h if h is not None and h is not g and set(C.inputs(h)) <= set(C.inputs(g)) else None)


def _residues(con, graphs: list, layers_all: list) -> tuple:
    """``(p, layer residues by id, constant slots' residues, constant values' residues)`` at the first
    prime of ``verify.prover.modular.PRIMES`` that divides no denominator of the layers, of
    ``con.constants`` and of the circuits' constants."""
    from .prover import modular as M

    last = None
    for p in M.PRIMES:
        try:
            res = {id(L): M.layer_residues(L, p) for L in layers_all}
            consts = {slot: M.residue(v, p) for slot, v in (con.constants or {}).items()}
            cres_of = {d[K.VALUE]: M.residue(d[K.VALUE], p) for gr in graphs for _, d in gr.nodes(data=True)
                       if d[K.OP] == K.CONST}
            return p, res, consts, cres_of
        except M.Unrepresentable as e:
            last = e
    raise M.Unrepresentable(f"every prime of PRIMES divides a denominator ({last})")


def _index_and_names(g, h, xs: dict, p: int, cres_of: dict, draws: int, names) -> tuple:
    """``(index, names, kinds, aliases)``: the index of every node's values at the points ``xs``
    (``g``'s, then those of ``h``'s that no node of ``g`` has), the display names and kinds of the
    nodes, and ``h``'s nodes' keys (:attr:`Trace.compiled`)."""
    index = Index(p)
    index.add(node_values(g, xs, p, lambda c: cres_of[c], draws)[0])
    ins = frozenset(names)
    names_, kinds_ = {v: display(g, v, ins) for v in nx.topological_sort(g)}, {v: node_kind(g, v) for v in g}
    aliases: dict = {}
    if h is not None:
        hv = node_values(h, xs, p, lambda c: cres_of[c], draws)[0]
        aliases = index.add({("compiled", v): x for v, x in hv.items()}, new_only=True)
        aliases = {k[1]: a for k, a in aliases.items()}
        for v in nx.topological_sort(h):
            key = ("compiled", v)
            if v not in aliases:
                aliases[v] = key
                names_[key], kinds_[key] = "c:" + display(h, v, ins), node_kind(h, v)
    return index, names_, kinds_, aliases


def _input_state(con, xs: dict, names, consts: dict, p: int, draws: int) -> np.ndarray:
    """The input state at the points ``xs``, on residues, with the constant slots set."""
    T, Cn = con.layout.shape
    S0 = con.input_state(xs) if names else np.zeros((draws, T, Cn), dtype=np.int64)
    S0 = np.asarray(S0, dtype=np.int64) % p
    for (t, c), r in consts.items():
        S0[:, t, c] = r
    return S0


def _label_layers(con, xs: dict, S0: np.ndarray, index, degs: list, res: dict, p: int, draws: int,
                  on_layer) -> list:
    """Run the stack on residues from ``S0`` (``Construction.run`` with a per-layer hook) and label
    the input state, every layer's state and a BaseConv layer's inner channels with ``index``: the
    :class:`LayerTrace` of each state."""
    T, Cn = con.layout.shape

    def cells_of(S) -> dict:
        lab = index.label(S.reshape(draws, -1))
        return {divmod(col, S.shape[-1]): lb for col, lb in lab.items()}

    out = [LayerTrace(0, "input", (T, Cn), cells_of(S0), None, int(degs[0][1]))]
    ran: list = []  # the residue layer of each stack layer, in order (the run loop casts each distinct layer once)

    def hook(i, S):
        m = ran[i]
        lt = LayerTrace(i + 1, m.L["kind"], tuple(S.shape[-2:]), cells_of(S), None, int(degs[i + 1][1]))
        if m.inner is not None:
            gz, zz, pz = m.inner
            W = pz.shape[-1]
            lg, lz, lp = (index.label(a.reshape(draws, -1)) for a in (gz, zz, pz))
            lt.inner = {divmod(col, W): (lg.get(col, OTHER), lz.get(col, OTHER), lab) for col, lab in lp.items()}
        if m.heads is not None:
            lt.heads = [HeadTrace(s, h, *(cells_of(a) for a in (qm, km, vm, o))) for s, h, qm, km, vm, o in m.heads]
        out.append(lt)
        if on_layer is not None:
            on_layer(i)

    con.run(xs, 0, state=S0, cast=lambda L: _ModLayer(res[id(L)], p, ran), on_layer=hook)
    return out


def trace(con, *, seed: int = 0, draws: int | None = None, error_target: float = 1e-9,
          max_draws: int = 24, on_layer=None) -> Trace:
    """Label every layer's state of the compiled circuit ``con`` (a
    :class:`~constructions.compiler.circuit.CompiledCircuit`: its ``graph``, input map and layers)
    with the circuit's nodes, by random evaluation modulo a prime (module docstring).
    ``draws``: the number of random points (default: the fewest, at least 3 and at most
    ``max_draws``, that bring :attr:`Trace.error_bound` to ``error_target``); ``on_layer(i)``
    is called after each stack layer (progress)."""
    g, h = _graphs(con)
    names = C.inputs(g)
    graphs = [g] if h is None else [g, h]
    layers_all = con.layers(0)
    p, res, consts, cres_of = _residues(con, graphs, layers_all)
    # degree bounds per layer (from the weights' nonzero patterns) and the circuit's node degrees
    degs = layer_degrees(graphs, names, [res[id(L)] for L in layers_all], p, con.layout.shape)
    draws, bound = choose_draws(degs, graphs, p, draws, error_target, max_draws)

    rng = np.random.default_rng(seed)
    xs = {nm: rng.integers(0, p, size=draws, dtype=np.int64) for nm in names}
    index, names_, kinds_, aliases = _index_and_names(g, h, xs, p, cres_of, draws, names)
    S0 = _input_state(con, xs, names, consts, p, draws)
    out = _label_layers(con, xs, S0, index, degs, res, p, draws, on_layer)
    return Trace(out, p, draws, seed, bound, names_, kinds_, g, aliases)
