"""Compiled GD architectures: the placed (ridge) least-squares GD step, compiled, as the body.

Where ``gd_baseconv.py`` and ``gd_attention.py`` are written by hand from the papers, these
architectures come out of the circuit compiler (``constructions/compiler``, in the shape of
seed 000 Thm. D.30 and seed 003 Thm. H.21): the circuit of one step ``x <- x - eta (A^T (A x - b) + lam x)``
(seed 000 eq. (3); seed 001 eq. (35) for ridge) is built by ``circuits.gd_step`` /
``circuits.ridge_gd_step`` with ``placed=True``, compiled to the target, and repeated as the
body; the prediction ``q^T x`` is a second compiled circuit, the epilogue.

Layout (tokens are rows, ``T = n + 1`` tokens, channels ``0 .. 2d``, widened to what the
compiled layers need): token ``i < n`` holds ``A[i, :]`` in channels ``0..d-1`` and ``b_i`` in
channel ``d``; the query token ``n`` holds ``q`` in channels ``0..d-1``, the prediction in
channel ``d`` (after the epilogue) and ``x`` in channels ``d+1..2d``.  Every other entry is 0.

``baseconv-causal`` is assembled differently (:func:`compiled_gram_gd`): the causal target cannot
bring x back to the data tokens, so it takes the Gram form of seed 000 eq. (47), with the loop
invariants ``A^T A`` and ``A^T b`` computed once by a compiled prologue and held at the query
token; its body is one layer per step (depth ``3 + k``, as the hand ``gd-baseconv-causal``).

``eta`` and ``lam`` are constants of the circuit, so a proof of these stacks is a proof for
the given exact ``eta`` and ``lam`` (the hand architectures are proved for a symbolic eta).
"""
from __future__ import annotations

import functools

import numpy as np

import circuits as C

from . import ops
from .base import Construction, batch_ndim, exact, new_state
from .iterated import compile_sections
from .layout import Layout
from .lsq import LS_GROUPS, LS_VARIABLES, dot, gd_step

REFERENCE = ("seed 000 eq. (3) / seed 001 eq. (35) as a placed circuit, compiled by "
             "constructions/compiler (seed 000 Thm. D.30, seed 003 Thm. H.21)")


def _with_query(g, n: int, d: int):
    """``g`` plus the query ``q_j`` at (n, j), passed through in place."""
    g = g.copy()
    for j in range(d):
        g.add_node(f"q_{j}", op="input", name=f"q_{j}", token=n, channel=j, output=f"q_{j}",
                   output_token=n, output_channel=j)
    return C.validate(g)


def step_circuit(n: int, d: int, eta, lam=0, form: str = "residual"):
    """The placed GD (ridge, if ``lam``) step, with A, b, q passed through: a repeatable body;
    ``form`` is the builder's (``gram``: the gradient as ``(A^T A) x - A^T b``)."""
    g = C.gd_step(n, d, eta, placed=True, form=form) if lam == 0 else \
        C.ridge_gd_step(n, d, eta, lam, placed=True, form=form)
    return _with_query(g, n, d)


def prediction_circuit(n: int, d: int):
    """``y = q^T x`` at (n, d), with A, b, q, x passed through in place."""
    b = C.CircuitBuilder()
    for i in range(n):
        for j in range(d):
            b.output(b.input(f"A_{i}_{j}", token=i, channel=j), f"A_{i}_{j}", token=i, channel=j)
        b.output(b.input(f"b_{i}", token=i, channel=d), f"b_{i}", token=i, channel=d)
    q = [b.input(f"q_{j}", token=n, channel=j) for j in range(d)]
    x = [b.input(f"x_{j}", token=n, channel=d + 1 + j) for j in range(d)]
    for j in range(d):
        b.output(q[j], f"q_{j}", token=n, channel=j)
        b.output(x[j], f"x_{j}", token=n, channel=d + 1 + j)
    prods = [b.mul(q[j], x[j]) for j in range(d)]
    b.output(prods[0] if d == 1 else b.add(*prods), "y", token=n, channel=d)
    b.grid(n + 1, 2 * d + 1)
    return b.graph()


class CompiledGD(Construction):
    """State functions of the layout above; the layers come from the compiler."""

    constants: dict = None  # (token, channel) -> value: the compiled input map's constant block

    def step(self, v):
        return gd_step(v, self.params["eta"], self.params.get("lam", 0))

    def state(self, v):
        n, d = self.variables["A"]
        nb = batch_ndim(v, self.variables)
        S = new_state(self.layout, np.asarray(v["A"]), nb)
        S[(...,) + (slice(0, n), slice(0, d))] = v["A"]
        S[(...,) + (slice(0, n), d)] = v["b"]
        S[(...,) + (n, slice(0, d))] = v["q"]
        S[(...,) + (n, slice(d + 1, 2 * d + 1))] = v["x"]
        for (t, c), val in sorted(self.constants.items()):  # the lsa target's position block
            S[..., t, c] = val if S.dtype == object else float(val)
        return S

    def input_state(self, v):
        return self.state(v)

    def final_state(self, v):
        S = self.state(v)
        n, d = self.variables["A"]
        S[(...,) + (n, d)] = dot(v["q"], v["x"])
        return S

    def readout(self, state):
        n, d = self.variables["A"]
        return {"x": state[..., n, d + 1:2 * d + 1], "prediction": state[..., n, d]}


# ------------------------------------------------------------------ the Gram form, hoisted (causal)
#
# Seed 000 App. D.3.1 eq. (47): the causal step needs the token sums A^T A and A^T b, which do
# not change from step to step.  So they are loop invariants: a prologue circuit computes them
# once and puts them at the query token, and the body reads them there:
#
#   prologue  G_ij = sum_t A_ti A_tj (i <= j, the upper triangle of the symmetric A^T A) and
#             c_i = sum_t b_t A_ti, at the query token n
#   body      x' = x - eta (G x - c + lam x), G and c carried unchanged
#   epilogue  y = q^T x at (n, d)
#
# Layout: that of the residual form (A, b at the data tokens; q, y, x at token n) plus G in
# channels 2d+1 .. 2d+d(d+1)/2 and c in the next d channels, at token n only.
#
# The body is written with the symmetric matrix-vector product of d(d+1)/2 multiplications
# (where ``sum_j G_ij x_j`` has d^2): for i < j, ``m_ij = G_ij (x_i + x_j)``, and
#
#   x'_i = x_i (1 - eta lam - eta (G_ii - sum_{j != i} G_ij)) - eta sum_{j != i} m_ij + eta c_i,
#
# the same polynomial: sum_{j != i} m_ij = sum_{j != i} G_ij x_i + sum_{j != i} G_ij x_j.  The
# compiler (``baseconv-causal``) forms every product at the query token in one product layer and
# folds the output map into its W_out (``sequence._fold_outputs``): 1 layer per step, as the hand
# construction.


def gram_channels(d: int) -> tuple[dict, dict, int]:
    """``G`` (i <= j) -> channel, ``c`` i -> channel, and the grid's channels."""
    g = {}
    for i in range(d):
        for j in range(i, d):
            g[(i, j)] = 2 * d + 1 + len(g)
    c = {i: 2 * d + 1 + len(g) + i for i in range(d)}
    return g, c, 2 * d + 1 + len(g) + d


def _gram_data(b, n: int, d: int, *, x: bool = True, gram: bool = True):
    """Inputs A, b, q (and x, G, c) at their slots, each also a pass-through output in place."""
    gch, cch, width = gram_channels(d)

    def keep(name, t, c):
        node = b.input(name, token=t, channel=c)
        b.output(node, name, token=t, channel=c)
        return node

    A = [[keep(f"A_{i}_{j}", i, j) for j in range(d)] for i in range(n)]
    bb = [keep(f"b_{i}", i, d) for i in range(n)]
    q = [keep(f"q_{j}", n, j) for j in range(d)]
    xs = [keep(f"x_{j}", n, d + 1 + j) for j in range(d)] if x else None
    G = {ij: keep(f"G_{ij[0]}_{ij[1]}", n, ch) for ij, ch in gch.items()} if gram else None
    c = [keep(f"c_{i}", n, cch[i]) for i in range(d)] if gram else None
    b.grid(n + 1, width)
    return A, bb, q, xs, G, c


def gram_prologue_circuit(n: int, d: int):
    """``G = A^T A`` (upper triangle) and ``c = A^T b`` at the query token; A, b, q, x in place."""
    b = C.CircuitBuilder()
    gch, cch, width = gram_channels(d)
    A, bb, q, x, _, _ = _gram_data(b, n, d, gram=False)

    def tsum(terms):
        return terms[0] if len(terms) == 1 else b.add(*terms)

    for (i, j), ch in gch.items():
        b.output(tsum([b.mul(A[t][i], A[t][j]) for t in range(n)]), f"G_{i}_{j}", token=n, channel=ch)
    for i, ch in cch.items():
        b.output(tsum([b.mul(bb[t], A[t][i]) for t in range(n)]), f"c_{i}", token=n, channel=ch)
    b.grid(n + 1, width)
    return C.validate(b.graph())


def gram_step_circuit(n: int, d: int, eta, lam=0):
    """The body: ``x' = x - eta (G x - c + lam x)`` from the inputs G (upper triangle), c, x at the
    query token, by the symmetric product above; A, b, q, G, c pass through in place."""
    b = C.CircuitBuilder()
    eta, lam = exact(eta), exact(lam)
    A, bb, q, x, G, c = _gram_data(b, n, d, x=False)
    x = [b.input(f"x_{j}", token=n, channel=d + 1 + j) for j in range(d)]
    Gs = lambda i, j: G[(min(i, j), max(i, j))]  # noqa: E731
    m = {(i, j): b.mul(G[(i, j)], b.add(x[i], x[j])) for i in range(d) for j in range(i + 1, d)}
    for i in range(d):
        # the gate of x_i's own product: 1 - eta lam - eta G_ii + eta sum_{j != i} G_ij
        coef = [b.const(1 - eta * lam), b.mul(b.const(-eta), G[(i, i)])]
        coef += [b.mul(b.const(eta), Gs(i, j)) for j in range(d) if j != i]
        terms = [b.mul(b.add(*coef), x[i]), b.mul(b.const(eta), c[i])]
        terms += [b.mul(b.const(-eta), m[(min(i, j), max(i, j))]) for j in range(d) if j != i]
        b.output(b.add(*terms), f"x_{i}", token=n, channel=d + 1 + i)
    b.grid(n + 1, gram_channels(d)[2])
    return C.validate(b.graph())


def gram_prediction_circuit(n: int, d: int):
    """``y = q^T x`` at (n, d); A, b, q, x, G, c pass through in place."""
    b = C.CircuitBuilder()
    A, bb, q, x, G, c = _gram_data(b, n, d)
    prods = [b.mul(q[j], x[j]) for j in range(d)]
    b.output(prods[0] if d == 1 else b.add(*prods), "y", token=n, channel=d)
    b.grid(n + 1, gram_channels(d)[2])
    return C.validate(b.graph())


def gram(A, b):
    """``(A^T A, A^T b)`` of one exact problem or a float batch."""
    if np.asarray(A).dtype == object:
        At = ops.transpose(A)
        return ops.mm(At, A), ops.mm(At, np.asarray(b, dtype=object).reshape(-1, 1))[:, 0]
    return np.einsum("...ti,...tj->...ij", A, A), np.einsum("...ti,...t->...i", A, b)


class CompiledGramGD(CompiledGD):
    """The hoisted Gram form: ``state`` also holds ``A^T A`` (upper triangle) and ``A^T b`` at
    the query token; ``input_state`` is the residual form's state (0 there)."""

    def input_state(self, v):
        return super().state(v)

    def state(self, v):
        S = super().state(v)
        n, d = self.variables["A"]
        gch, cch, _ = gram_channels(d)
        G, c = gram(v["A"], v["b"])
        for (i, j), ch in gch.items():
            S[..., n, ch] = G[..., i, j]
        for i, ch in cch.items():
            S[..., n, ch] = c[..., i]
        return S

    def readout(self, state):
        n, d = self.variables["A"]
        gch, cch, _ = gram_channels(d)
        out = super().readout(state)
        out["ATb"] = state[..., n, min(cch.values()):max(cch.values()) + 1]
        return out


def _grid_layout(n: int, d: int, width: int) -> Layout:
    """The placed least-squares grid's regions (``circuits.builders``' ``placed=True`` places) on
    ``width`` channels."""
    lay = Layout((n + 1, width), row_axis="tokens", col_axis="channels")
    lay.add("a", (0, n), (0, d), "rows a_i of A; 0 at the query token")
    lay.add("q", (n, n + 1), (0, d), "query q at the query token")
    lay.add("b", (0, n), (d, d + 1), "b_i")
    lay.add("y", (n, n + 1), (d, d + 1), "prediction q^T x at the query token (after the epilogue)")
    lay.add("x", (n, n + 1), (d + 1, 2 * d + 1), "iterate x at the query token")
    return lay


def compiled_gram_gd(n: int, d: int, eta, lam) -> CompiledGramGD:
    """``compiled-baseconv-causal``: the hoisted Gram form above, each of its three circuits
    compiled to ``baseconv-causal`` on one common width."""
    circuits = {"prologue": gram_prologue_circuit(n, d), "body": gram_step_circuit(n, d, eta, lam),
                "epilogue": gram_prediction_circuit(n, d)}
    parts = compile_sections(circuits, {k: f"gd-gram-{k}" for k in circuits}, "baseconv-causal")
    gch, cch, _ = gram_channels(d)
    lay = _grid_layout(n, d, parts["body"].layout.shape[1])
    lay.add("ATA", (n, n + 1), (min(gch.values()), max(gch.values()) + 1),
            "A^T A, upper triangle row by row, at the query token (after the prologue)")
    lay.add("ATb", (n, n + 1), (min(cch.values()), max(cch.values()) + 1), "A^T b at the query token (after the prologue)")
    params = {"eta": eta} if lam == 0 else {"eta": eta, "lam": lam}
    plans = {k: p.info["compiled"]["plan"] for k, p in parts.items()}
    con = CompiledGramGD(
        name="gd-compiled-baseconv-causal", reference=REFERENCE_GRAM, layout=lay,
        prologue=list(parts["prologue"].epilogue), body=list(parts["body"].epilogue),
        epilogue=list(parts["epilogue"].epilogue), params=params, variables=LS_VARIABLES(n, d),
        token_groups=LS_GROUPS, carried=("x",),
        rebuild=functools.partial(compiled_gd, n, d, eta=eta, lam=lam, target="baseconv-causal"),
        notes=f"compiled (baseconv-causal), A^T A and A^T b hoisted into the prologue: prologue {plans['prologue']}, "
              f"body {plans['body']}, epilogue {plans['epilogue']}")
    con.compiled = {k: p.info["compiled"] for k, p in parts.items()}
    con.constants = {}
    return con


REFERENCE_GRAM = ("seed 000 App. D.3.1 eq. (47) (the causal Gram form: A^T A, A^T b once, then one layer per "
                  "step) as placed circuits, compiled by constructions/compiler (seed 000 Thm. D.30, seed 003 "
                  "Thm. H.21)")


def compiled_gd(n: int = 20, d: int = 5, *, eta=None, lam=0, target: str = "baseconv") -> CompiledGD:
    """The compiled GD architecture for ``target`` (``baseconv``, ``baseconv-causal``, ``lsa``, ``elsa``);
    ``baseconv-causal`` hoists A^T A and A^T b into the prologue (:func:`compiled_gram_gd`)."""
    if n < 1 or d < 1:
        raise ValueError(f"need n >= 1 and d >= 1, got n={n}, d={d}")
    eta = exact("1/16") if eta is None else exact(eta)
    lam = exact(lam)
    if target == "baseconv-causal":
        return compiled_gram_gd(n, d, eta, lam)
    parts = compile_sections({"body": step_circuit(n, d, eta, lam, "residual"), "epilogue": prediction_circuit(n, d)},
                             {"body": "gd-step", "epilogue": "prediction"}, target)
    body, epi = parts["body"], parts["epilogue"]
    lay = _grid_layout(n, d, body.layout.shape[1])
    if body.constants:
        lay.add("positions", (0, n + 1), (2 * d + 1, 2 * d + 2 + n),
                "one-hot token positions (the lsa target's constant block)")
    name = f"gd-compiled-{target}"
    params = {"eta": eta} if lam == 0 else {"eta": eta, "lam": lam}
    con = CompiledGD(
        name=name, reference=REFERENCE, layout=lay, prologue=[], body=list(body.epilogue),
        epilogue=list(epi.epilogue), params=params, variables=LS_VARIABLES(n, d), token_groups=LS_GROUPS, carried=("x",),
        rebuild=functools.partial(compiled_gd, n, d, eta=eta, lam=lam, target=target),
        notes=f"compiled ({target}): body {body.info['compiled']['plan']}, epilogue {epi.info['compiled']['plan']}")
    con.compiled = {"body": body.info["compiled"], "epilogue": epi.info["compiled"]}
    assert body.constants == epi.constants  # one input map for both stacks
    con.constants = dict(body.constants)
    return con
