"""The bridge between the independent evaluator (:mod:`tests.independent.evaluator`) and the project.

What crosses the bridge, and nothing else:

* the **weights**, as data: ``con.prologue/body/epilogue`` (a layer's ``kind``, ``config()``,
  ``arrays()``), read by :func:`evaluator.forward`;
* the **specification**, as the kernel states it (``constructions/base.py``): ``input_state(v)``,
  ``state(v)``, ``step(v)``, ``final_state(v)`` of a construction, evaluated here on generators of
  sympy's polynomial ring ``QQ[...]`` (one per entry of every variable, as the kernel's sympy backend
  does) and converted term by term to :class:`evaluator.Poly`.  The input state is thus the
  construction's own embedding of the variables; it is checked independently *end to end* where the
  algorithm is stated independently (:func:`gd_iterates`, :func:`circuit_values`: a wrong embedding
  gives a wrong prediction or output);
* the **kernel's verdict** (``verify.prover.proof.check``/``prove``), compared with this checker's.

The unrolled check (:func:`reprove`): the stack of depth ``k`` (prologue, ``k`` body copies,
epilogue) is evaluated on the generic input, and the state after the prologue must be ``state(v)``,
after body copy ``j`` ``state(step^j(v))``, after the epilogue ``final_state(step^k(v))``, every
entry equal as polynomials.  The kernel proves one body copy in fresh symbols (and so every depth);
this checker unrolls a small ``k`` instead.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from tests.independent.evaluator import Poly, as_state, differences, forward, from_sympy_ring


@dataclass
class Symbols:
    """Generic symbolic values of a problem's variables (and scalar parameters): sympy ring
    generators in numpy object arrays for the project's specification, and the same generators as
    :class:`Poly` variables (generator ``i`` is variable ``i``) for this checker."""

    names: list[str]
    v: dict  # name -> object array of ring generators (the specification's input)
    p: dict  # name -> nested lists (or a scalar) of Poly variables, the same entries


def symbols(variables: dict[str, tuple[int, ...]], params: tuple[str, ...] = ()) -> Symbols:
    from sympy import QQ, Symbol
    from sympy.polys.rings import ring

    names, shapes = [], []
    for var, shape in variables.items():
        shapes.append((var, tuple(shape)))
        names += [f"{var}[{','.join(map(str, ix))}]" if len(shape) else var for ix in np.ndindex(*shape)]
    names += list(params)
    R, *gens = ring([Symbol(nm) for nm in names], QQ)
    v, p, pos = {}, {}, 0
    for var, shape in shapes:
        arr = np.empty(shape, dtype=object)
        for ix in np.ndindex(*shape):
            arr[ix] = gens[pos]
            pos += 1
        v[var] = arr
        p[var] = _nested(arr)
    for nm in params:
        v[nm], p[nm] = gens[pos], Poly.var(pos)
        pos += 1
    return Symbols(names, v, p)


def _nested(arr):
    if arr.ndim == 0:
        return from_sympy_ring(arr.item())
    return [_nested(a) if isinstance(a, np.ndarray) else from_sympy_ring(a) for a in arr]


@dataclass
class Verdict:
    """This checker's verdict on one stack: ``ok`` when no entry differs; ``mismatches`` describes
    each difference found (where, which entry, what the stack computes, what is specified)."""

    mismatches: list[str] = field(default_factory=list)
    final: list | None = None  # the state after the whole stack, as this checker computed it
    steps: list = field(default_factory=list)  # v, step(v), ... as the specification states them
    symbols: Symbols | None = None  # the generic input

    @property
    def ok(self) -> bool:
        return not self.mismatches


def _compare(where: str, got, want_spec, layout, names, out: list[str]) -> None:
    want = as_state(np.asarray(want_spec, dtype=object))
    for i, j in differences(got, want)[:3]:
        if (i, j) == (-1, -1):
            out.append(f"{where}: state shape {len(got)}x{len(got[0]) if got else 0}, "
                       f"specified {len(want)}x{len(want[0]) if want else 0}")
            return
        region = layout.locate(i, j) if layout is not None else ("", (i, j))
        out.append(f"{where}: entry [{i},{j}] (region {region[0]} {region[1]}): stack gives "
                   f"{got[i][j].show(names)}, specified {want[i][j].show(names)}")


def reprove(con, k: int) -> Verdict:
    """Evaluate ``con``'s stack of depth ``k`` with this checker's equations on a generic symbolic
    input and compare every state between sections with the construction's specification."""
    sy = symbols(con.variables)
    verdict = Verdict()
    vs = [sy.v]
    S = as_state(np.asarray(con.input_state(sy.v), dtype=object))
    for L in con.prologue:
        S = forward(L, S)
    _compare("after the prologue", S, con.state(sy.v), con.layout, sy.names, verdict.mismatches)
    for j in range(k if con.body else 0):
        for L in con.body:
            S = forward(L, S)
        vs.append(con.step(vs[-1]))
        _compare(f"after body copy {j + 1}", S, con.state(vs[-1]), con.layout, sy.names, verdict.mismatches)
    for L in con.epilogue:
        S = forward(L, S)
    _compare("after the epilogue", S, con.final_state(vs[-1]), con.layout, sy.names, verdict.mismatches)
    verdict.final, verdict.steps, verdict.symbols = S, vs, sy
    return verdict


# ------------------------------------------------------------------------------- independent algorithms


def gd_iterates(A, b, x, eta, lam, k: int) -> list[list[Poly]]:
    """``x <- x - eta (A^T (A x - b) + lam x)`` (seed 000 eq. (3); ridge: seed 001 eq. (35)-(36)),
    ``k`` times, on nested lists of :class:`Poly`; returns ``[x_0, ..., x_k]``."""
    n, d = len(A), len(x)
    xs = [list(x)]
    for _ in range(k):
        x = xs[-1]
        r = [sum((A[i][j] * x[j] for j in range(d)), Poly()) - b[i] for i in range(n)]
        g = [sum((A[i][j] * r[i] for i in range(n)), Poly()) + x[j] * lam for j in range(d)]
        xs.append([x[j] - g[j] * eta for j in range(d)])
    return xs


def circuit_values(g, inputs: dict) -> dict:
    """The outputs of a circuit (``networkx`` DAG: ``op`` ``input``/``const``/``add``/``mul``, edge
    ``mult``), evaluated node by node in a topological order on :class:`Poly` inputs."""
    import networkx as nx

    val = {}
    for node in nx.topological_sort(g):
        d = g.nodes[node]
        op = d["op"]
        if op == "input":
            val[node] = inputs[d["name"]]
        elif op == "const":
            c = d["value"]
            val[node] = Poly.const(Fraction(int(c.p), int(c.q)) if hasattr(c, "p") else Fraction(c))
        else:
            operands = [val[u] for u, e in g.pred[node].items() for _ in range(e.get("mult", 1))]
            acc = operands[0]
            for o in operands[1:]:
                acc = acc + o if op == "add" else acc * o
            val[node] = acc
    return {d["output"]: val[n] for n, d in g.nodes(data=True) if d.get("output") is not None}
