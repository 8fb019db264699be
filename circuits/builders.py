"""Circuits for the linear-algebra primitives of seed 000.

Every builder returns a validated circuit with named inputs and outputs.
Naming: matrix entries ``A_i_j`` (row i, column j), vector entries ``x_j``,
``b_i``, ``y_i``; :func:`dot` uses ``u0.., v0..`` and output ``y``.
Subtraction ``a - b`` is ``add(a, mul(const(-1), b))``; scalar parameters
(``eta``, ``lam``) are either exact rationals (int / Fraction / sympy
Rational -> a ``const`` node) or a string, which makes them an extra input of
that name (e.g. ``gd_step(n, d, "eta")`` has an input ``eta``).

Placed forms (``placed=True``, see :mod:`circuits.placement`): the same
circuit (same nodes, ids, names and values) whose inputs and outputs carry a
place ``(token, channel)`` in a ``tokens x channels`` input matrix, rows are
tokens; the grid size is stored in the graph attributes ``tokens`` /
``channels``.  Each builder's docstring gives its layout.  The iterative
steps (:func:`gd_step`, :func:`ridge_gd_step`, :func:`newton_schulz_step`)
put the new iterate where the old one was and, with ``keep_data`` (default:
on when placed), also mark their data inputs as pass-through outputs of the
same name in place, so the whole state is reproduced and the compiled step
can be repeated as a body.  ``placed=False, keep_data=False`` (the default)
gives the plain circuits.
"""
from __future__ import annotations

from fractions import Fraction

import networkx as nx

from . import keys as K
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

    def param(self, p, what: str, place=None):
        """``("input", node)`` for a string parameter (at ``place`` if given),
        ``("const", Fraction)`` otherwise."""
        if isinstance(p, str):
            return "input", self.input(p, **_at(place))
        return "const", exact_constant(p, what)

    def keep(self, node: int, place=None) -> None:
        """Make input ``node`` a pass-through output of the same name (in place)."""
        self.output(node, self._g.nodes[node][K.NAME], **_at(place))

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


def _flag(k: str, v) -> bool:
    if not isinstance(v, bool):
        raise CircuitError(f"builder: {k} must be True or False, got {v!r}")
    return v


def _at(place) -> dict:
    """Builder keywords for a place ``(token, channel)``; none for ``None`` / ``False``."""
    return {"token": place[0], "channel": place[1]} if place else {}


def _matrix(b: _B, name: str, rows: int, cols: int, place=None) -> list[list[int]]:
    """Inputs ``name_i_j``; ``place(i, j)`` gives their places (or None)."""
    return [[b.input(f"{name}_{i}_{j}", **_at(place and place(i, j))) for j in range(cols)] for i in range(rows)]


def _vector(b: _B, name: str, n: int, place=None) -> list[int]:
    return [b.input(f"{name}_{i}", **_at(place and place(i))) for i in range(n)]


def dot(n: int, *, placed: bool = False) -> nx.DiGraph:
    """``y = sum_i u_i v_i``; inputs ``u0..u{n-1}``, ``v0..v{n-1}``.

    ``placed=True`` layout (grid ``n x 3``): ``u_i`` at ``(i, 0)``, ``v_i`` at
    ``(i, 1)``, output ``y`` at ``(0, 2)``.
    """
    _positive(n=n)
    placed = _flag("placed", placed)
    b = _B()
    us = [b.input(f"u{i}", **_at(placed and (i, 0))) for i in range(n)]
    vs = [b.input(f"v{i}", **_at(placed and (i, 1))) for i in range(n)]
    b.output(b.dot(us, vs), "y", **_at(placed and (0, 2)))
    if placed:
        b.grid(n, 3)
    return b.graph()


def matvec(m: int, n: int, *, placed: bool = False) -> nx.DiGraph:
    """``y = A x`` with A m x n; inputs ``A_i_j``, ``x_j``; outputs ``y_i``.

    ``placed=True`` layout (grid ``(m+1) x (n+1)``): ``A_i_j`` at ``(i, j)``
    (row i of A on token i); ``x_j`` at ``(m, j)`` (an extra token, like the
    query token of the hand constructions); output ``y_i`` at ``(i, n)``.
    """
    _positive(m=m, n=n)
    placed = _flag("placed", placed)
    b = _B()
    A = _matrix(b, "A", m, n, placed and (lambda i, j: (i, j)))
    x = _vector(b, "x", n, placed and (lambda j: (m, j)))
    for i in range(m):
        b.output(b.dot(A[i], x), f"y_{i}", **_at(placed and (i, n)))
    if placed:
        b.grid(m + 1, n + 1)
    return b.graph()


FORMS = ("residual", "gram")


def _lsq_gradient(b: _B, A, bb, x, n: int, d: int, form: str = "residual") -> list[int]:
    """Nodes of the gradient ``A^T (A x - b)`` (seed 000 eq. (3)), as written (``residual``), or
    re-associated as ``(A^T A) x - A^T b`` (``gram``: the D x D Gram matrix and A^T b are sums
    over the rows of products within one row, the form of seed 000 eq. (47)'s causal construction)."""
    if form == "gram":
        G = [[b.dot([A[i][j] for i in range(n)], [A[i][k] for i in range(n)]) for k in range(d)] for j in range(d)]
        c = [b.dot([A[i][j] for i in range(n)], bb) for j in range(d)]
        return [b.sub(b.dot(G[j], x), c[j]) for j in range(d)]
    if form != "residual":
        raise ValueError(f"form must be one of {', '.join(FORMS)}, got {form!r}")
    r = [b.sub(b.dot(A[i], x), bb[i]) for i in range(n)]
    return [b.dot([A[i][j] for i in range(n)], r) for j in range(d)]


def _keep_data(keep_data, placed: bool) -> bool:
    return placed if keep_data is None else _flag("keep_data", keep_data)


def _gd_inputs(b: _B, n: int, d: int, placed: bool):
    """Inputs ``A_i_j`` at (i, j), ``b_i`` at (i, d), ``x_j`` at (n, d+1+j) when placed."""
    A = _matrix(b, "A", n, d, placed and (lambda i, j: (i, j)))
    bb = _vector(b, "b", n, placed and (lambda i: (i, d)))
    x = _vector(b, "x", d, placed and (lambda j: (n, d + 1 + j)))
    return A, bb, x


def _gd_outputs(b: _B, new_x: list[int], A, bb, params, n: int, d: int, placed: bool, keep: bool) -> nx.DiGraph:
    """Outputs ``x_j`` (in place of the input ``x_j``); with ``keep`` the inputs
    ``A_i_j``, ``b_i`` and the string parameters pass through in place."""
    for j, v in enumerate(new_x):
        b.output(v, f"x_{j}", **_at(placed and (n, d + 1 + j)))
    if keep:
        for i in range(n):
            for j in range(d):
                b.keep(A[i][j], placed and (i, j))
            b.keep(bb[i], placed and (i, d))
        for (kind, node), place in params:
            if kind == "input":
                b.keep(node, place)
    if placed:
        b.grid(n + 1, 2 * d + 1)
    return b.graph()


def gd_step(n: int, d: int, eta, *, placed: bool = False, keep_data: bool | None = None,
            form: str = "residual") -> nx.DiGraph:
    """One least-squares GD step ``x - eta A^T (A x - b)`` (seed 000 eq. (3)).

    A is n x d. Inputs ``A_i_j``, ``b_i``, ``x_j`` (+ ``eta`` if ``eta`` is a
    string); outputs ``x_j`` (the new iterate).

    ``keep_data`` (default: ``placed``): the input nodes ``A_i_j``, ``b_i``
    (and ``eta`` if it is an input) are also pass-through outputs of the same
    name, so the outputs are the whole state.

    ``placed=True`` layout (grid ``(n+1) x (2d+1)``, rows are tokens): token
    ``i < n`` holds the data row, ``A_i_j`` at ``(i, j)`` and ``b_i`` at
    ``(i, d)``; token ``n`` is the extra "query" token with ``x_j`` at
    ``(n, d+1+j)`` (x in its own channels) and a string ``eta`` at ``(n, d)``
    (the query token's b channel).  The output ``x_j`` is at the place of the
    input ``x_j`` and the pass-through outputs at their input places, so the
    compiled step maps the state to the next state (a repeatable body).

    ``form``: the gradient as written, ``A^T (A x - b)`` (``"residual"``), or ``(A^T A) x - A^T b``
    (``"gram"``): the same polynomial, another circuit.
    """
    return _gd(n, d, eta, None, placed, keep_data, form)


def ridge_gd_step(n: int, d: int, eta, lam, *, placed: bool = False, keep_data: bool | None = None,
                  form: str = "residual") -> nx.DiGraph:
    """One ridge-regression GD step ``x - eta (A^T (A x - b) + lam x)``.

    Same conventions as :func:`gd_step`; ``lam`` may also be a string input.

    ``placed=True`` layout: that of :func:`gd_step`; a string ``lam`` is at
    ``(n, d)`` too when ``eta`` is a constant, and at ``(n, 0)`` (a query
    token channel of A, otherwise empty) when ``eta`` is also a string (then
    at ``(n, d)``).  With ``keep_data`` both pass through in place.
    """
    return _gd(n, d, eta, lam, placed, keep_data, form)


def _gd(n: int, d: int, eta, lam, placed, keep_data, form: str = "residual") -> nx.DiGraph:
    """:func:`gd_step` (``lam`` None) and :func:`ridge_gd_step`."""
    _positive(n=n, d=d)
    placed = _flag("placed", placed)
    keep = _keep_data(keep_data, placed)
    b = _B()
    A, bb, x = _gd_inputs(b, n, d, placed)
    e_at = placed and (n, d) or None
    e = b.param(eta, "eta", e_at)
    params = [(e, e_at)]
    if lam is not None:
        la_at = placed and ((n, 0) if isinstance(eta, str) else (n, d)) or None
        la = b.param(lam, "lam", la_at)
        params.append((la, la_at))
    grad = _lsq_gradient(b, A, bb, x, n, d, form)
    if lam is not None:
        grad = [b.add(grad[j], b.scale(la, x[j])) for j in range(d)]
    new_x = [b.add(x[j], b.scale(e, grad[j], -1)) for j in range(d)]
    return _gd_outputs(b, new_x, A, bb, params, n, d, placed, keep)


def newton_schulz_step(d: int, n: int, *, placed: bool = False, keep_data: bool | None = None) -> nx.DiGraph:
    """One Newton-Schulz step ``M (2 I - A^T A M)`` for A n x d, M d x d.

    Inputs ``A_i_j`` (i < n, j < d) and ``M_i_j`` (i, j < d); outputs
    ``M_i_j`` (the new iterate).  Computed as G = A^T A, P = G M,
    Q = 2I - P, M' = M Q.

    ``keep_data`` (default: ``placed``): the inputs ``A_i_j`` are also
    pass-through outputs ``A_i_j``, so the outputs are the whole state.

    ``placed=True`` layout (grid ``max(n, d) x 2d``, rows are tokens): token
    ``i`` holds row i of A, ``A_i_j`` at ``(i, j)``, and row i of M,
    ``M_i_j`` at ``(i, d+j)``; the output ``M_i_j`` is at the place of the
    input ``M_i_j`` and the pass-through ``A_i_j`` at its input place (a
    repeatable body).
    """
    _positive(d=d, n=n)
    placed = _flag("placed", placed)
    keep = _keep_data(keep_data, placed)
    b = _B()
    A = _matrix(b, "A", n, d, placed and (lambda i, j: (i, j)))
    M = _matrix(b, "M", d, d, placed and (lambda i, j: (i, d + j)))
    G = [[b.dot([A[r][i] for r in range(n)], [A[r][k] for r in range(n)]) for k in range(d)] for i in range(d)]
    P = [[b.dot(G[i], [M[k][j] for k in range(d)]) for j in range(d)] for i in range(d)]
    Q = [
        [b.add(b.c(2), b.mul(b.c(-1), P[i][j])) if i == j else b.mul(b.c(-1), P[i][j]) for j in range(d)]
        for i in range(d)
    ]
    for i in range(d):
        for j in range(d):
            b.output(b.dot(M[i], [Q[k][j] for k in range(d)]), f"M_{i}_{j}", **_at(placed and (i, d + j)))
    if keep:
        for i in range(n):
            for j in range(d):
                b.keep(A[i][j], placed and (i, j))
    if placed:
        b.grid(max(n, d), 2 * d)
    return b.graph()


def horner(coeffs, *, placed: bool = False) -> nx.DiGraph:
    """``p(t) = c0 + c1 t + ... + c_k t^k`` by Horner's rule; input ``t``, output ``p``.

    ``p = c0 + t (c1 + t (c2 + ... + t c_k))``: k adds and k muls, each with
    its own const node.  Coefficients must be exact; at least one is needed.
    With a single coefficient the output is that const and ``t`` is unused.

    ``placed=True`` layout (grid ``1 x 2``): the coefficients are constants of
    the circuit (weights, not inputs), so the input matrix is one token:
    ``t`` at ``(0, 0)``, output ``p`` at ``(0, 1)`` (next to ``t``, which it
    does not overwrite: ``p`` is not a new ``t``).
    """
    cs = [exact_constant(c, f"coefficient {i}") for i, c in enumerate(coeffs)]
    if not cs:
        raise CircuitError("horner: need at least one coefficient")
    placed = _flag("placed", placed)
    b = CircuitBuilder()
    t = b.input("t", **_at(placed and (0, 0)))
    acc = b.const(cs[-1])
    for c in reversed(cs[:-1]):
        acc = b.add(b.const(c), b.mul(t, acc))
    b.output(acc, "p", **_at(placed and (0, 1)))
    if placed:
        b.grid(1, 2)
    return b.graph()
