"""A second, independent evaluator of the four layer kinds (de Bruijn's criterion, issue 40 item 2).

The layer equations are written here again, from the papers, in plain Python loops over lists of
lists, on a polynomial type of this module (:class:`Poly`: a dict from monomials to
``fractions.Fraction``).  Nothing of the project computes here: no ``constructions/ops.py``, no
``forward`` of ``constructions/layers.py``, no ``running_sums``/``conv``/``sparse`` arithmetic, no
``verify/prover`` ring, no numpy arithmetic (numpy arrays are only *read*, entry by entry).

The equations (``u``, ``H``, ``E``: the state, a list of rows):

* BaseConv, seed 000 eq. (2)/(19), bias matrices as in Def. D.20::

      y = ((u W_gate + B_gate) . (h * (u W_in + B_in) + B_conv)) W_out + B_out   (. : Hadamard)

  the convolution per channel (column) ``c`` along tokens, ``T`` tokens:
  causal (seed 000 eq. (50)): ``z[t] = sum_{s=0}^{t} h[s] v[t-s]``; circular (non-causal):
  ``z[t] = sum_{s=0}^{T-1} h[s] v[(t-s) mod T]``; "same" (zero padded, centred, ``m = (T-1)//2``):
  ``z[t] = sum_j h[j] v[t+m-j]`` over ``0 <= t+m-j < T``.  ``residual``: ``u + y``.
* LSA, seed 001 eq. (8) with the heads summed (eq. (39)) and the skip of eq. (38)::

      H + sum_k (H W_k3) ((H W_k1)^T (H W_k2))

* ELSA, seed 001 eq. (16), the module of eq. (57)-(59): stages applied one after another, each the
  sum of its heads ``(P W3 + B3)(P W1 + B1)^T (P W2 + B2)`` on the previous stage's output ``P``
  (the first stage on ``H``), one skip ``H + P_last``.
* Token-form linear attention, seed 004 eq. (2)-(3), per token ``i`` (a row of ``E``)::

      e_i <- e_i + sum_k sum_{j in keys} (e_j^T Q_k e_i) P_k e_j

  keys: every token but the last (the query) when ``exclude_last``, else every token.

What is read from the project, as data only: a layer's ``kind``, ``config()`` (which convention,
residual or not, how many heads) and ``arrays()`` (the weights by name; a sparse channel mix is read
through its public ``shape``/``rows``/``cols``/``vals``).  The array names' meaning (``W_in``,
``b_gate``, ``head0.W1``, ``stage1.head0.B3``, ``head0.P``) is taken from the docstrings of
``constructions/layers.py``; the convolution conventions from seed 000 eq. (50) and the docstring of
``constructions/conv.py``.  Where a specification computed by the project (in sympy's ring) is to be
compared, :func:`from_sympy_ring` converts each of its polynomials term by term.
"""
from __future__ import annotations

from fractions import Fraction

# ----------------------------------------------------------------------------------------- polynomials


class Poly:
    """A polynomial over QQ: ``{monomial: Fraction}`` with no zero coefficient stored.  A monomial
    is the sorted tuple of its variables' indices, with repetition (``x0^2 x3`` is ``(0, 0, 3)``;
    the constant monomial is ``()``), so a product of monomials is the sorted concatenation."""

    __slots__ = ("terms",)

    def __init__(self, terms=None):
        self.terms = terms if terms is not None else {}

    @staticmethod
    def const(c) -> "Poly":
        c = Fraction(c)
        return Poly({(): c} if c else {})

    @staticmethod
    def var(i: int) -> "Poly":
        return Poly({(i,): Fraction(1)})

    def is_zero(self) -> bool:
        return not self.terms

    def __add__(self, other):
        if not isinstance(other, Poly):
            other = Poly.const(other)
        out = dict(self.terms)
        for m, c in other.terms.items():
            s = out.get(m, 0) + c
            if s:
                out[m] = s
            else:
                out.pop(m, None)
        return Poly(out)

    __radd__ = __add__

    def __neg__(self):
        return Poly({m: -c for m, c in self.terms.items()})

    def __sub__(self, other):
        return self + (-other if isinstance(other, Poly) else Poly.const(-Fraction(other)))

    def __rsub__(self, other):
        return (-self) + other

    def __mul__(self, other):
        if not isinstance(other, Poly):
            c = Fraction(other)
            return Poly({m: a * c for m, a in self.terms.items()} if c else {})
        out: dict = {}
        for m1, a in self.terms.items():
            for m2, b in other.terms.items():
                m = tuple(sorted(m1 + m2))
                s = out.get(m, 0) + a * b
                if s:
                    out[m] = s
                else:
                    out.pop(m, None)
        return Poly(out)

    __rmul__ = __mul__

    def __eq__(self, other):
        if not isinstance(other, Poly):
            other = Poly.const(other)
        return self.terms == other.terms

    def __ne__(self, other):
        return not self == other

    __hash__ = None

    def show(self, names=None, limit: int = 300) -> str:
        """A readable form (variable names where given), cut at ``limit`` characters."""
        if not self.terms:
            return "0"
        parts = []
        for m, c in sorted(self.terms.items()):
            mon = "*".join(names[i] if names else f"v{i}" for i in m)
            parts.append(f"{c}" if not m else (mon if c == 1 else f"{c}*{mon}"))
        s = " + ".join(parts)
        return s if len(s) <= limit else s[:limit] + f" ... ({len(self.terms)} terms)"

    __repr__ = show


def is_zero(x) -> bool:
    return x.is_zero() if isinstance(x, Poly) else x == 0


def from_sympy_ring(p, index: dict | None = None) -> Poly:
    """A sympy ``PolyElement`` (or an int/Fraction/sympy Rational, or a float read exactly) as a
    :class:`Poly`; generator ``i`` of the element's ring is variable ``index[i]`` (default ``i``)."""
    if isinstance(p, Poly):
        return p
    if isinstance(p, (bool, int, Fraction, float)):
        return Poly.const(Fraction(p))
    if hasattr(p, "terms") and hasattr(p, "ring"):  # sympy.polys.rings.PolyElement
        out = {}
        for exps, c in p.terms():
            mon = tuple(sorted((i if index is None else index[i]) for i, e in enumerate(exps) for _ in range(e)))
            out[mon] = Fraction(int(c.numerator), int(c.denominator))
        return Poly({m: c for m, c in out.items() if c})
    if hasattr(p, "is_Rational") and p.is_Rational:  # sympy Rational / Integer
        return Poly.const(Fraction(int(p.p), int(p.q)))
    if type(p).__module__ == "numpy" or hasattr(p, "item"):  # a numpy scalar
        return from_sympy_ring(p.item(), index)
    if hasattr(p, "numerator") and hasattr(p, "denominator"):  # flint fmpq, gmpy2 mpq
        return Poly.const(Fraction(int(p.numerator), int(p.denominator)))
    raise TypeError(f"cannot read {type(p).__name__} {p!r} as an exact polynomial")


# ----------------------------------------------------------------------------------------- weights as data


def scalar(x, read=from_sympy_ring):
    """One weight entry: a ``Fraction`` (ints, Fractions, sympy Rationals, numpy integers, floats at
    their exact binary value), or a :class:`Poly` where the weight is symbolic."""
    if isinstance(x, Poly):
        return x
    if isinstance(x, (bool, int, Fraction, float)):
        return Fraction(x)
    if type(x).__module__ == "numpy":
        return scalar(x.item(), read)
    if hasattr(x, "is_Rational") and x.is_Rational:
        return Fraction(int(x.p), int(x.q))
    p = read(x)
    if not p.terms:
        return Fraction(0)
    if list(p.terms) == [()]:
        return p.terms[()]
    return p


def matrix(a, read=from_sympy_ring) -> list[list]:
    """A 2-D weight (numpy array, or a sparse matrix read through its public ``shape``, ``rows``,
    ``cols``, ``vals``; repeated positions summed) as a list of rows of :func:`scalar` entries."""
    if hasattr(a, "rows") and hasattr(a, "cols") and hasattr(a, "vals") and not hasattr(a, "ravel"):
        m, n = (int(s) for s in a.shape)
        out = [[Fraction(0)] * n for _ in range(m)]
        for i, j, v in zip(a.rows.tolist(), a.cols.tolist(), list(a.vals)):
            out[int(i)][int(j)] = out[int(i)][int(j)] + scalar(v, read)
        return out
    shape = a.shape
    if len(shape) != 2:
        raise ValueError(f"a weight of shape {shape}, not a matrix")
    return [[scalar(a[i, j], read) for j in range(shape[1])] for i in range(shape[0])]


# ----------------------------------------------------------------------------------------- plain linear algebra


def _zero():
    return Poly()


def matmul(X: list[list], W: list[list]) -> list[list]:
    """``X W``: ``out[t][c] = sum_k X[t][k] W[k][c]`` (terms with a zero factor skipped)."""
    n_in, n_out = len(W), len(W[0]) if W else 0
    out = [[_zero() for _ in range(n_out)] for _ in X]
    for t, row in enumerate(X):
        assert len(row) == n_in, f"shapes: a row of {len(row)} times a {n_in} x {n_out} matrix"
        for k in range(n_in):
            x = row[k]
            if is_zero(x):
                continue
            Wk = W[k]
            for c in range(n_out):
                w = Wk[c]
                if not is_zero(w):
                    out[t][c] = out[t][c] + x * w
    return out


def add(X: list[list], Y: list[list]) -> list[list]:
    assert len(X) == len(Y) and all(len(a) == len(b) for a, b in zip(X, Y)), "shapes differ"
    return [[(a if isinstance(a, Poly) else Poly.const(a)) + b for a, b in zip(r, s)] for r, s in zip(X, Y)]


def transpose(X: list[list]) -> list[list]:
    return [list(col) for col in zip(*X)]


def convolve(v: list[list], h: list[list], convention: str) -> list[list]:
    """Per-channel convolution along tokens (module docstring)."""
    T = len(v)
    C = len(v[0]) if T else 0
    m = (T - 1) // 2
    out = [[_zero() for _ in range(C)] for _ in range(T)]
    for c in range(C):
        for t in range(T):
            acc = _zero()
            if convention == "causal":
                pairs = [(s, t - s) for s in range(t + 1)]
            elif convention == "circular":
                pairs = [(s, (t - s) % T) for s in range(T)]
            elif convention == "same":
                pairs = [(j, t + m - j) for j in range(T) if 0 <= t + m - j < T]
            else:
                raise ValueError(f"unknown convolution {convention!r}")
            for s, r in pairs:
                if not is_zero(h[s][c]) and not is_zero(v[r][c]):
                    acc = acc + v[r][c] * h[s][c]
            out[t][c] = acc
    return out


# ----------------------------------------------------------------------------------------- the layers


def baseconv(u, w: dict, *, causal: bool, residual: bool, same: bool = False):
    """Seed 000 eq. (2)/(19) (module docstring); ``w``: ``W_in, b_in, h, b_conv, W_gate, b_gate,
    W_out, b_out`` as lists of rows."""
    convention = "same" if same else ("causal" if causal else "circular")
    gate = add(matmul(u, w["W_gate"]), w["b_gate"])
    v = add(matmul(u, w["W_in"]), w["b_in"])
    z = add(convolve(v, w["h"], convention), w["b_conv"])
    prod = [[g * zz if not (is_zero(g) or is_zero(zz)) else _zero() for g, zz in zip(gr, zr)]
            for gr, zr in zip(gate, z)]
    y = add(matmul(prod, w["W_out"]), w["b_out"])
    return add(u, y) if residual else y


def _attention(Q: list[list], K: list[list], V: list[list]):
    """``Q (K^T V)``: ``out[i][c] = sum_a Q[i][a] sum_r K[r][a] V[r][c]`` (seed 001 eq. (8))."""
    return matmul(Q, matmul(transpose(K), V))


def lsa(H, heads: list[dict], *, residual: bool):
    """Seed 001 eq. (8), (38)-(39); each head ``{"W1", "W2", "W3"}``."""
    acc = [[_zero() for _ in row] for row in H]
    for hd in heads:
        acc = add(acc, _attention(matmul(H, hd["W3"]), matmul(H, hd["W1"]), matmul(H, hd["W2"])))
    return add(H, acc) if residual else acc


def elsa(H, stages: list[list[dict]], *, residual: bool):
    """Seed 001 eq. (16), (57)-(59); each head ``{"W1", "B1", "W2", "B2", "W3", "B3"}``."""
    P = H
    for stage in stages:
        acc = None
        for hd in stage:
            term = _attention(add(matmul(P, hd["W3"]), hd["B3"]), add(matmul(P, hd["W1"]), hd["B1"]),
                              add(matmul(P, hd["W2"]), hd["B2"]))
            acc = term if acc is None else add(acc, term)
        P = acc if acc is not None else [[_zero() for _ in row] for row in P]
    return add(H, P) if residual else P


def token_lsa(E, heads: list[dict], *, exclude_last: bool, residual: bool):
    """Seed 004 eq. (3) token by token: ``e_i + sum_k sum_j (e_j^T Q_k e_i) P_k e_j``; each head
    ``{"P", "Q"}``."""
    T = len(E)
    n = len(E[0]) if T else 0
    keys = range(T - 1) if exclude_last else range(T)
    delta = [[_zero() for _ in range(n)] for _ in range(T)]
    for hd in heads:
        P, Q = hd["P"], hd["Q"]
        for i in range(T):
            Qe_i = [sum((E[i][b] * Q[a][b] for b in range(n) if not is_zero(Q[a][b])), _zero()) for a in range(n)]
            for j in keys:
                s = sum((E[j][a] * Qe_i[a] for a in range(n)), _zero())  # e_j^T Q e_i
                if is_zero(s):
                    continue
                for c in range(n):
                    Pe_j_c = sum((E[j][a] * P[c][a] for a in range(n) if not is_zero(P[c][a])), _zero())
                    delta[i][c] = delta[i][c] + s * Pe_j_c
    return add(E, delta) if residual else delta


# ----------------------------------------------------------------------------------------- a layer object, read as data


def forward(layer, state, read=from_sympy_ring):
    """One layer of the project (its ``kind``, ``config()`` and ``arrays()`` read as data) applied
    to ``state`` (a list of rows of :class:`Poly`) by this module's equations."""
    kind, cfg, arrs = layer.kind, layer.config(), layer.arrays()

    def mat(name):
        return matrix(arrs[name], read)

    if kind == "baseconv":
        w = {name: mat(name) for name in ("W_in", "b_in", "h", "b_conv", "W_gate", "b_gate", "W_out", "b_out")}
        assert set(arrs) == set(w), f"BaseConv arrays {sorted(arrs)}"
        return baseconv(state, w, causal=cfg["causal"], residual=cfg["residual"], same=bool(cfg.get("same", False)))
    if kind == "lsa":
        heads = [{f: mat(f"head{k}.{f}") for f in ("W1", "W2", "W3")} for k in range(cfg["heads"])]
        assert len(arrs) == 3 * cfg["heads"]
        return lsa(state, heads, residual=cfg["residual"])
    if kind == "elsa":
        stages = [[{f: mat(f"stage{s}.head{k}.{f}") for f in ("W1", "B1", "W2", "B2", "W3", "B3")}
                   for k in range(nh)] for s, nh in enumerate(cfg["heads"])]
        assert len(arrs) == 6 * sum(cfg["heads"])
        return elsa(state, stages, residual=cfg["residual"])
    if kind == "token_lsa":
        heads = [{f: mat(f"head{k}.{f}") for f in ("P", "Q")} for k in range(cfg["heads"])]
        assert len(arrs) == 2 * cfg["heads"]
        return token_lsa(state, heads, exclude_last=cfg["exclude_last"], residual=cfg["residual"])
    raise ValueError(f"the independent evaluator has no equation for layer kind {kind!r}")


def as_state(S, read=from_sympy_ring) -> list[list]:
    """A 2-D state (numpy object array of the specification's polynomials or numbers) as rows of
    :class:`Poly`."""
    return [[read(S[i, j]) for j in range(S.shape[1])] for i in range(S.shape[0])]


def differences(got: list[list], want: list[list]) -> list[tuple[int, int]]:
    """The entries where two states differ (a shape mismatch is every entry)."""
    if len(got) != len(want) or any(len(a) != len(b) for a, b in zip(got, want)):
        return [(-1, -1)]
    return [(i, j) for i, (r, s) in enumerate(zip(got, want)) for j, (a, b) in enumerate(zip(r, s))
            if from_sympy_ring(a) != from_sympy_ring(b)]
