"""Compiled GD architectures: the placed (ridge) least-squares GD step, compiled, as the body.

Where ``gd_baseconv.py`` and ``gd_attention.py`` are written by hand from the papers, these
architectures come out of the circuit compiler (``constructions/compiler``, issue "the compiler
in the theorems' shape"): the circuit of one step ``x <- x - eta (A^T (A x - b) + lam x)``
(seed 000 eq. (3); seed 001 eq. (35) for ridge) is built by ``circuits.gd_step`` /
``circuits.ridge_gd_step`` with ``placed=True``, compiled to the target, and repeated as the
body; the prediction ``q^T x`` is a second compiled circuit, the epilogue.

Layout (tokens are rows, ``T = n + 1`` tokens, channels ``0 .. 2d``, widened to what the
compiled layers need): token ``i < n`` holds ``A[i, :]`` in channels ``0..d-1`` and ``b_i`` in
channel ``d``; the query token ``n`` holds ``q`` in channels ``0..d-1``, the prediction in
channel ``d`` (after the epilogue) and ``x`` in channels ``d+1..2d``.  Every other entry is 0.

``eta`` and ``lam`` are constants of the circuit, so a proof of these stacks is a proof for
the given exact ``eta`` and ``lam`` (the hand architectures are proved for a symbolic eta).
"""
from __future__ import annotations

import numpy as np

import circuits as C

from .base import Construction, batch_ndim, exact, new_state
from .compiler import compile_circuit
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


#: the gradient's form each target compiles best: the causal target cannot bring x back to the
#: data tokens, so it takes the Gram form (token sums of within-token products, seed 000 eq. (47))
FORM = {"baseconv-causal": "gram"}


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


def compiled_gd(n: int = 20, d: int = 5, *, eta=None, lam=0, target: str = "baseconv") -> CompiledGD:
    """The compiled GD architecture for ``target`` (``baseconv``, ``baseconv-causal``, ``lsa``, ``elsa``)."""
    if n < 1 or d < 1:
        raise ValueError(f"need n >= 1 and d >= 1, got n={n}, d={d}")
    eta = exact("1/16") if eta is None else exact(eta)
    lam = exact(lam)
    form = FORM.get(target, "residual")
    body = compile_circuit(step_circuit(n, d, eta, lam, form), name="gd-step", target=target)
    epi = compile_circuit(prediction_circuit(n, d), name="prediction", target=target)
    width = max(body.layout.shape[1], epi.layout.shape[1])
    if body.layout.shape[1] < width:
        body = compile_circuit(step_circuit(n, d, eta, lam, form), name="gd-step", target=target, min_width=width)
    if epi.layout.shape[1] < width:
        epi = compile_circuit(prediction_circuit(n, d), name="prediction", target=target, min_width=width)
    lay = Layout((n + 1, width), row_axis="tokens", col_axis="channels")
    lay.add("a", (0, n), (0, d), "rows a_i of A; 0 at the query token")
    lay.add("q", (n, n + 1), (0, d), "query q at the query token")
    lay.add("b", (0, n), (d, d + 1), "b_i")
    lay.add("y", (n, n + 1), (d, d + 1), "prediction q^T x at the query token (after the epilogue)")
    lay.add("x", (n, n + 1), (d + 1, 2 * d + 1), "iterate x at the query token")
    if body.constants:
        lay.add("positions", (0, n + 1), (2 * d + 1, 2 * d + 2 + n),
                "one-hot token positions (the lsa target's constant block)")
    name = f"gd-compiled-{target}"
    params = {"eta": eta} if lam == 0 else {"eta": eta, "lam": lam}
    con = CompiledGD(
        name=name, reference=REFERENCE, layout=lay, prologue=[], body=list(body.epilogue),
        epilogue=list(epi.epilogue), params=params, variables=LS_VARIABLES(n, d), token_groups=LS_GROUPS, carried=("x",),
        rebuild=lambda **p: compiled_gd(n, d, **{"eta": eta, "lam": lam, **p}, target=target),
        notes=f"compiled ({target}): body {body.info['compiled']['plan']}, epilogue {epi.info['compiled']['plan']}")
    con.compiled = {"body": body.info["compiled"], "epilogue": epi.info["compiled"]}
    assert body.constants == epi.constants  # one input map for both stacks
    con.constants = dict(body.constants)
    return con
