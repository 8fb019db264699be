"""Circuits for the linear-algebra primitives of seed 000.

Every builder returns a validated circuit with named inputs and outputs.
Naming: matrix entries ``A_i_j`` (row i, column j), vector entries ``x_j``,
``b_i``, ``y_i``; :func:`dot` uses ``u0.., v0..`` and output ``y``.
Subtraction ``a - b`` is ``add(a, mul(const(-1), b))``; scalar parameters
(``eta``, ``lam``) are either exact rationals (int / Fraction / sympy
Rational -> a ``const`` node) or a string, which makes them an extra input of
that name (e.g. ``gd_step(n, d, "eta")`` has an input ``eta``).
"""
from __future__ import annotations

from fractions import Fraction

import networkx as nx

from .graph import CircuitBuilder, CircuitError, exact_constant


class _B(CircuitBuilder):
    """Builder with shared constants and sum/linear-combination helpers."""

    def __init__(self) -> None:
        super().__init__()
        self._consts: dict[Fraction, int] = {}

    def c(self, value) -> int:
        v = exact_constant(value, "const")
        if v not in self._consts:
            self._consts[v] = self.const(v)
        return self._consts[v]

    def sum(self, terms: list[int]) -> int:
        if not terms:
            return self.c(0)
        return terms[0] if len(terms) == 1 else self.add(*terms)

    def sub(self, a: int, b: int) -> int:
        return self.add(a, self.mul(self.c(-1), b))

    def dot(self, us, vs) -> int:
        return self.sum([self.mul(u, v) for u, v in zip(us, vs)])

    def param(self, p, what: str):
        """``("input", node)`` for a string parameter, ``("const", Fraction)`` otherwise."""
        if isinstance(p, str):
            return "input", self.input(p)
        return "const", exact_constant(p, what)

    def scale(self, p, x: int, sign: int = 1) -> int:
        """``sign * p * x`` for a parameter from :meth:`param`."""
        kind, v = p
        if kind == "const":
            return self.mul(self.c(sign * v), x)
        return self.mul(v, x) if sign == 1 else self.mul(self.c(sign), v, x)


def _positive(**dims) -> None:
    for k, v in dims.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise CircuitError(f"builder: {k} must be a positive int, got {v!r}")


def _matrix(b: _B, name: str, rows: int, cols: int) -> list[list[int]]:
    return [[b.input(f"{name}_{i}_{j}") for j in range(cols)] for i in range(rows)]


def _vector(b: _B, name: str, n: int) -> list[int]:
    return [b.input(f"{name}_{i}") for i in range(n)]


def dot(n: int) -> nx.DiGraph:
    """``y = sum_i u_i v_i``; inputs ``u0..u{n-1}``, ``v0..v{n-1}``."""
    _positive(n=n)
    b = _B()
    us = [b.input(f"u{i}") for i in range(n)]
    vs = [b.input(f"v{i}") for i in range(n)]
    b.output(b.dot(us, vs), "y")
    return b.graph()


def matvec(m: int, n: int) -> nx.DiGraph:
    """``y = A x`` with A m x n; inputs ``A_i_j``, ``x_j``; outputs ``y_i``."""
    _positive(m=m, n=n)
    b = _B()
    A = _matrix(b, "A", m, n)
    x = _vector(b, "x", n)
    for i in range(m):
        b.output(b.dot(A[i], x), f"y_{i}")
    return b.graph()


def _lsq_gradient(b: _B, A, bb, x, n: int, d: int) -> list[int]:
    """Nodes of ``A^T (A x - b)`` (seed 000 eq. (3))."""
    r = [b.sub(b.dot(A[i], x), bb[i]) for i in range(n)]
    return [b.dot([A[i][j] for i in range(n)], r) for j in range(d)]


def gd_step(n: int, d: int, eta) -> nx.DiGraph:
    """One least-squares GD step ``x - eta A^T (A x - b)`` (seed 000 eq. (3)).

    A is n x d. Inputs ``A_i_j``, ``b_i``, ``x_j`` (+ ``eta`` if ``eta`` is a
    string); outputs ``x_j`` (the new iterate).
    """
    _positive(n=n, d=d)
    b = _B()
    A = _matrix(b, "A", n, d)
    bb = _vector(b, "b", n)
    x = _vector(b, "x", d)
    e = b.param(eta, "eta")
    grad = _lsq_gradient(b, A, bb, x, n, d)
    for j in range(d):
        b.output(b.add(x[j], b.scale(e, grad[j], -1)), f"x_{j}")
    return b.graph()


def ridge_gd_step(n: int, d: int, eta, lam) -> nx.DiGraph:
    """One ridge-regression GD step ``x - eta (A^T (A x - b) + lam x)``.

    Same conventions as :func:`gd_step`; ``lam`` may also be a string input.
    """
    _positive(n=n, d=d)
    b = _B()
    A = _matrix(b, "A", n, d)
    bb = _vector(b, "b", n)
    x = _vector(b, "x", d)
    e = b.param(eta, "eta")
    la = b.param(lam, "lam")
    grad = _lsq_gradient(b, A, bb, x, n, d)
    for j in range(d):
        gj = b.add(grad[j], b.scale(la, x[j]))
        b.output(b.add(x[j], b.scale(e, gj, -1)), f"x_{j}")
    return b.graph()


def newton_schulz_step(d: int, n: int) -> nx.DiGraph:
    """One Newton-Schulz step ``M (2 I - A^T A M)`` for A n x d, M d x d.

    Inputs ``A_i_j`` (i < n, j < d) and ``M_i_j`` (i, j < d); outputs
    ``M_i_j`` (the new iterate).  Computed as G = A^T A, P = G M,
    Q = 2I - P, M' = M Q.
    """
    _positive(d=d, n=n)
    b = _B()
    A = _matrix(b, "A", n, d)
    M = _matrix(b, "M", d, d)
    G = [[b.dot([A[r][i] for r in range(n)], [A[r][k] for r in range(n)]) for k in range(d)] for i in range(d)]
    P = [[b.dot(G[i], [M[k][j] for k in range(d)]) for j in range(d)] for i in range(d)]
    Q = [
        [b.add(b.c(2), b.mul(b.c(-1), P[i][j])) if i == j else b.mul(b.c(-1), P[i][j]) for j in range(d)]
        for i in range(d)
    ]
    for i in range(d):
        for j in range(d):
            b.output(b.dot(M[i], [Q[k][j] for k in range(d)]), f"M_{i}_{j}")
    return b.graph()


def horner(coeffs) -> nx.DiGraph:
    """``p(t) = c0 + c1 t + ... + c_k t^k`` by Horner's rule; input ``t``, output ``p``.

    ``p = c0 + t (c1 + t (c2 + ... + t c_k))``: k adds and k muls, each with
    its own const node.  Coefficients must be exact; at least one is needed.
    With a single coefficient the output is that const and ``t`` is unused.
    """
    cs = [exact_constant(c, f"coefficient {i}") for i, c in enumerate(coeffs)]
    if not cs:
        raise CircuitError("horner: need at least one coefficient")
    b = CircuitBuilder()
    t = b.input("t")
    acc = b.const(cs[-1])
    for c in reversed(cs[:-1]):
        acc = b.add(b.const(c), b.mul(t, acc))
    b.output(acc, "p")
    return b.graph()
