"""Seed 003 (Zoology) App. H.4-H.5: arithmetic circuits -> BaseConv (Cor. H.20, Thm. H.21).

* ``s003-linear-circuit`` -- Corollary H.20: an ``(nd, s, Δ, w)``-*linear* circuit (Def.
  H.13: every gate ``a x + b y``) computing ``M x`` for ``x`` the row-major ``u in
  R^{n x d}``.  Built by :func:`random_linear_circuit` (``levels`` layers of ``nd`` gates
  ``a x + b y``, random dyadic ``a, b`` from ``seed``), compiled with the toolkit's
  ``constructions.compiler.compile_circuit`` and proved against the circuit's
  polynomials.  With a dense ``W`` every linear circuit is ONE affine BaseConv layer
  (state 1 token x ``nd`` channels); the paper's ``O(Δ log w)`` layers come from
  restricting ``W`` to K-matrices with ``Õ(w)`` parameters (Kaleidoscope, Thm. H.19),
  which this compiler does not do (dense ``W``: ``(nd)^2`` parameters).
* ``s003-circuit-h21`` -- Theorem H.21: a general ``(n, s, Δ, w)``-circuit
  (``circuits.random_circuit`` from ``seed``), compiled by ``compile_circuit`` (levelled,
  one fused MULTIPLY+LINEAR layer per multiplicative level) and proved.  Layers = the
  multiplicative depth, n-ary products split into balanced trees, so ``<= Δ ceil(log2 w)``
  (a gate's arity is at most w): the theorem's ``O(Δ log w)``; state ``1 x width`` with width
  the largest number of values live between two layers (bound: inner dimension ``O(w)``);
  :func:`h21_report` gives the numbers.
* ``s003-h21-mult-step`` -- the corrected multiplication step of the Thm. H.21 proof
  (step 3) in the paper's own *sequence* layout (wires on rows, ``d' = d``): wires laid
  out as ``(0, v1_j, v2_j)`` triples and ``(0, v3_k)`` pairs; ONE paper-form layer with
  ``W = I``, ``h = X`` (causal shift by one row), ``b_1 = 0``, ``b_2 = 1`` on the
  pass-through rows leaves ``v1_j ⊙ v2_j`` on row ``3j+2`` and ``v3_k`` on row ``3a+2k+1``.
  Both factors are data: one arrives through ``W`` (the gate), the other through ``h``.
  Inner dimension ``N' = 3a + 2b <= 3w`` rows, ``d' = d``.

Erratum ``S003-H21-mult-bias`` (seed 003 App. H.5, proof of Thm. H.21; docs/errata.md): step 3 as printed computes
``remember(y : v2, v3, e_0, v1)`` on ``y = (v2; v3; 0)``, i.e. ``v1`` is remember's
fixed gating bias ``p = b_1``; a weight cannot depend on the data, so the step is
built with ``b_1 = v1^0 = 1`` (reference wire values) and rejected for general wires.
"""
from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np

import circuits as C
from circuits.graph import CircuitBuilder
from constructions.compiler import CompiledCircuit, compile_circuit
from constructions.layout import Layout
from constructions.ops import nonzero_pattern

from . import CatalogueEntry, Erratum, register, register_erratum
from .seed003_primitives import Z, identity, paper_layer, remember_stack, rows_mask, stack, taps

REF_H20 = "seed 003 App. H.4, Corollary H.20 (Def. H.13 linear circuits; Thm. H.19)"
REF_H21 = "seed 003 App. H.5, Theorem H.21 (= seed 000 Thm. D.30); main text Thm. 4.2"


# ====================================================================== circuits

def random_linear_circuit(seed: int = 1, n: int = 2, d: int = 2, levels: int = 3):
    """A random ``(nd, s, Δ, w)``-linear circuit (Def. H.13): inputs ``u_i_j`` (row-major
    ``u in R^{n x d}``), ``levels`` layers of ``nd`` gates ``a x + b y`` (x != y from the
    previous layer when it has two wires; ``a, b`` nonzero dyadic), outputs ``y_i_j``.
    Each gate is ``add(mul(a, x), mul(b, y))``, so the circuit depth is ``Δ = 2 levels``."""
    if min(n, d, levels) < 1:
        raise ValueError(f"need n, d, levels >= 1 (got n={n}, d={d}, levels={levels})")
    rng = np.random.default_rng(seed)
    b = CircuitBuilder()
    prev = [b.input(f"u_{i}_{j}") for i in range(n) for j in range(d)]
    w = n * d
    for _ in range(levels):
        cur = []
        for _g in range(w):
            if len(prev) >= 2:
                x, y = (prev[int(k)] for k in rng.choice(len(prev), size=2, replace=False))
            else:
                x = y = prev[0]
            a, c = (Fraction(int(k), 4) for k in rng.choice([-4, -3, -2, -1, 1, 2, 3, 4], size=2))
            if x == y and a + c == 0:  # a single wire: keep a x + b x = (a + b) x nonzero
                c = -2 * c
            cur.append(b.add(b.mul(b.const(a), x), b.mul(b.const(c), y)))
        prev = cur
    for k, node in enumerate(prev):
        b.output(node, f"y_{k // d}_{k % d}")
    with warnings.catch_warnings():  # gates no later gate picked are dead: pruned by design
        warnings.simplefilter("ignore", C.PrunedNodesWarning)
        return b.graph()


def _compile(g, name) -> CompiledCircuit:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", C.PrunedNodesWarning)
        return compile_circuit(g, name=name)


def h21_report(con: CompiledCircuit) -> dict:
    """Depth and state of a compiled circuit against Thm. H.21 / Cor. H.20."""
    m = con.info["circuit"]
    delta, w = m["depth"], m["width"]
    layers, width = len(con.epilogue), con.layout.shape[1]
    bound = delta * max(1.0, math.log2(max(w, 1)))
    params = sum(int(nonzero_pattern(M).sum()) for L in con.epilogue for M in (L.W_gate, L.W_in, L.W_out))
    return {"circuit": {"inputs": m["n_inputs"], "size": m["size"], "depth_Delta": delta, "width_w": w,
                        "degree": m["degree"], "gates": m["n_gates"]},
            "compiled": {"layers": layers, "tokens": con.layout.shape[0], "channels": width,
                         "state_size": con.state_size, "nonzero_matrix_weights": params},
            "bounds": {"Delta_log2_w": round(bound, 3), "layers_over_Delta_log2_w": round(layers / bound, 3) if bound
                       else None, "channels_over_w": round(width / w, 3) if w else None}}


def linear_circuit(n: int = 2, d: int = 2, levels: int = 3, seed: int = 1) -> CompiledCircuit:
    """Cor. H.20: compile and prove a random linear circuit computing ``M vec(u)`` (module docstring)."""
    g = random_linear_circuit(seed, n, d, levels)
    return _compile(g, "s003-linear-circuit")


def circuit_h21(inputs: int = 4, gates: int = 12, outputs: int = 2, seed: int = 1) -> CompiledCircuit:
    """Thm. H.21: compile and prove ``circuits.random_circuit(seed, inputs, gates, n_outputs=outputs)``."""
    if inputs < 1 or gates < 1 or not 1 <= outputs <= gates:
        raise ValueError(f"need inputs >= 1, gates >= 1, 1 <= outputs <= gates (got {inputs}, {gates}, {outputs})")
    g = C.random_circuit(seed, inputs, gates, n_outputs=outputs)
    return _compile(g, "s003-circuit-h21")


# ====================================================================== step 3 (multiplication)

def mult_step(a: int = 2, b: int = 2, d: int = 1):
    """Thm. H.21 step 3, corrected, sequence layout (module docstring): ``(v1 ⊙ v2, v3)``
    from ``v1, v2`` (a rows each) and ``v3`` (b rows), one layer, ``N' = 3a + 2b``."""
    if min(a, d) < 1 or b < 0:
        raise ValueError(f"need a, d >= 1 and b >= 0 (got a={a}, b={b}, d={d})")
    N = 3 * a + 2 * b
    lay = Layout((N, d))
    for j in range(a):
        lay.add(f"pair{j}", (3 * j, 3 * j + 3), (0, d), f"(0, v1_{j}, v2_{j}); after: (0, 0, v1_{j} v2_{j})")
    for k in range(b):
        lay.add(f"pass{k}", (3 * a + 2 * k, 3 * a + 2 * k + 2), (0, d), f"(0, v3_{k})")
    pass_rows = [3 * a + 2 * k + 1 for k in range(b)]
    L = paper_layer(N, d, W=identity(d), h=taps(N, d, {1: 1}), b2=rows_mask(N, d, pass_rows))

    def mk(v):
        S = Z(N, d)
        for j in range(a):
            S[3 * j + 1], S[3 * j + 2] = v["v1"][j], v["v2"][j]
        for k in range(b):
            S[3 * a + 2 * k + 1] = v["v3"][k]
        return S

    def spec(v):
        S = Z(N, d)
        v1, v2 = np.asarray(v["v1"], dtype=object), np.asarray(v["v2"], dtype=object)
        for j in range(a):
            S[3 * j + 2] = v1[j] * v2[j]
        for k in range(b):
            S[3 * a + 2 * k + 1] = v["v3"][k]
        return S
    variables = {"v1": (a, d), "v2": (a, d)}
    if b:
        variables["v3"] = (b, d)
    return stack("s003-h21-mult-step", REF_H21 + ", proof step 3 (corrected)", lay, [L], variables, mk, spec,
                 notes="one layer, N' = 3a + 2b rows, d' = d")


def mult_step_as_printed(a: int = 2, b: int = 2, d: int = 1):
    """Step 3 as printed: ``remember(y : v2, v3, e_0, v1)`` on ``y = (v2; v3; 0)`` (s = t = 0,
    filter ``e_0``), ``p = v1`` as the bias, fixed at the reference wires ``v1^0 = 1``;
    specification ``(v1 ⊙ v2; v3; 0)``.  The remember layers are the corrected ones."""
    N = 2 * a + 2 * b
    con = remember_stack(N, d, a, b, 0, 0, [[1] * d], [[1] * d for _ in range(a)],
                         name="s003-h21-mult-step (as printed)", reference=REF_H21 + ", proof step 3 as printed",
                         p_spec=lambda vv: vv["v1"], names=("v2", "gap", "v3"))
    mk, spec = con.make_input, con.make_final
    con.variables = {"v1": (a, d), "v2": (a, d), "v3": (b, d)}
    con.make_input = lambda v: mk({"x": v["v2"], "v": v["v3"]})
    con.make_final = lambda v: spec({"x": v["v2"], "v": v["v3"], "v1": v["v1"]})
    return con


# ====================================================================== registration

register(CatalogueEntry(
    name="s003-linear-circuit", paper=REF_H20,
    summary="random (nd, s, Δ, w)-linear circuit (gates a x + b y) -> BaseConv via compile_circuit, proved",
    build=linear_circuit, sizes={"n": 2, "d": 2, "levels": 3, "seed": 1},
    claim="(n, O(Δ log w), d, w, d)-BaseConv (Cor. H.20, K-matrix W); dense W: 1 layer, state 1 x nd"))
register(CatalogueEntry(
    name="s003-circuit-h21", paper=REF_H21,
    summary="random (n, s, Δ, w)-circuit -> levelled BaseConv (compile_circuit), proved against its polynomials",
    build=circuit_h21, sizes={"inputs": 4, "gates": 12, "outputs": 2, "seed": 1},
    claim="(N, O(Δ log w), d, O(w), d)-BaseConv (Thm. H.21); compiled: multiplicative depth <= Δ ceil(log2 w) "
          "layers, 1 token x width"))
register(CatalogueEntry(
    name="s003-h21-mult-step", paper=REF_H21 + ", proof step 3 (corrected)",
    summary="Thm. H.21 step 3 in sequence layout: (0,v1,v2)/(0,v3) rows -> v1 ⊙ v2 and v3, one layer, d' = d",
    build=mult_step, sizes={"a": 2, "b": 2, "d": 1},
    claim="step 3 = permutation (O(log w) layers) + remember (5 layers); here 1 layer, N' = 3a + 2b"))
register_erratum(Erratum(
    id="S003-H21-mult-bias", paper="seed 003", location="Thm. H.21 proof, step 3 (multiplication layer)",
    as_printed="remember(y : v2, v3, e0, v1) on y = (v2; v3; 0): the wire vector v1 is remember's bias p = b1",
    correction="one layer with both factors as data: rows (0, v1_j, v2_j), (0, v3_k); W = I, h = X, b1 = 0, "
               "b2 = 1 on the v3 rows (s003-h21-mult-step)",
    as_printed_check=lambda: mult_step_as_printed(2, 2, 1), corrected_check=lambda: mult_step(2, 2, 1)))
