"""Seed 004 token form: shared helpers (registers nothing).

Tokens are the rows of ``E`` ((n+1) x (d+1)): context ``e_i = (x_i, y_i)``,
``i = 1..n``, then the query ``e_{n+1} = (x_t, 0)`` (seed 004 Sec. 2).  Keys and values are the n context tokens only
(``TokenLSA(exclude_last=True)``); every token is updated; the prediction is
the *negated* last coordinate of the last token, ``-y_t^L``.

Exact arithmetic only (numpy object arrays of ints / Fractions / ring
elements, one problem).  Scalars multiply arrays from the right (``arr * s``):
a sympy ring element on the left would not broadcast.
"""
from __future__ import annotations

import random
from fractions import Fraction

import numpy as np

from constructions import ops
from constructions.layers import TokenLSA, TokenLSAHead
from constructions.layout import Layout


def obj(a) -> np.ndarray:
    return np.asarray(a, dtype=object)


def col(v) -> np.ndarray:
    return obj(v).reshape(-1, 1)


def zeros(*shape) -> np.ndarray:
    return ops.zeros_like_object(shape)


def eye(d: int) -> np.ndarray:
    return ops.eye_object(d)


def mm(A, B) -> np.ndarray:
    return ops.mm(obj(A), obj(B))


def mv(M, x) -> np.ndarray:
    """``M x``."""
    return ops.mm(obj(M), col(x))[:, 0]


def rmv(M, y) -> np.ndarray:
    """``M^T y``."""
    return ops.mm(ops.transpose(obj(M)), col(y))[:, 0]


def dot(u, w):
    return ops.mm(obj(u).reshape(1, -1), col(w))[0, 0]


def outer(u, w) -> np.ndarray:
    return ops.mm(col(u), col(w).T)


def T(M) -> np.ndarray:
    return ops.transpose(obj(M))


def scal(a, s) -> np.ndarray:
    """``s * a`` for an array ``a`` and any exact scalar ``s``."""
    return obj(a) * s


def token_layout(n: int, d: int) -> Layout:
    lay = Layout((n + 1, d + 1), row_axis="tokens (n context, then the query)",
                 col_axis="token coordinates (x, then y last)")
    lay.add("x", (0, n), (0, d), "context x_i^l")
    lay.add("y", (0, n), (d, d + 1), "context y_i^l")
    lay.add("x_t", (n, n + 1), (0, d), "query x_t^l")
    lay.add("y_t", (n, n + 1), (d, d + 1), "query label slot y_t^l; prediction = -y_t^L")
    return lay


def tokens(X, y, xt, yt) -> np.ndarray:
    """``E`` with rows ``(x_i, y_i)`` then ``(x_t, y_t)``."""
    X = obj(X)
    n, d = X.shape
    E = zeros(n + 1, d + 1)
    E[:n, :d] = X
    E[:n, d] = obj(y)
    E[n, :d] = obj(xt)
    E[n, d] = yt
    return E


def context_stats(E, n: int, d: int):
    """``Sigma^l, alpha^l, lambda^l`` of the context tokens (seed 004's sufficient statistics): raw sums over i <= n."""
    Xc, yc = E[:n, :d], E[:n, d]
    return mm(T(Xc), Xc), rmv(Xc, yc), dot(yc, yc)


def gram(E, n: int) -> np.ndarray:
    """``sum_{j <= n} e_j e_j^T`` over the context tokens."""
    ctx = obj(E)[:n]
    return mm(T(ctx), ctx)


def layer_matrix(heads, E, n: int) -> np.ndarray:
    """``S = sum_k P_k (sum_j e_j e_j^T) Q_k`` (Lemma 4.3); the layer is ``e_i <- e_i + S e_i``."""
    G = gram(E, n)
    S = None
    for h in heads:
        term = mm(mm(h.P, G), h.Q)
        S = term if S is None else ops.add(S, term)
    return S


def diag_head(d: int, px, py, qx, qy) -> TokenLSAHead:
    """Eq. (8): ``P = diag(p_x I_d, p_y)``, ``Q = diag(q_x I_d, q_y)`` as full (d+1) x (d+1) matrices."""
    P, Q = zeros(d + 1, d + 1), zeros(d + 1, d + 1)
    for i in range(d):
        P[i, i], Q[i, i] = px, qx
    P[d, d], Q[d, d] = py, qy
    return TokenLSAHead(P, Q)


def omegas(diag_params) -> dict:
    """Eq. (9): ``omega_xx = sum_k p_x q_x``, ``omega_xy = sum p_x q_y``, ``omega_yx = sum p_y q_x``,
    ``omega_yy = sum p_y q_y`` from ``[(p_x, p_y, q_x, q_y), ...]``."""
    w = {"xx": 0, "xy": 0, "yx": 0, "yy": 0}
    for px, py, qx, qy in diag_params:
        w["xx"] = w["xx"] + px * qx
        w["xy"] = w["xy"] + px * qy
        w["yx"] = w["yx"] + py * qx
        w["yy"] = w["yy"] + py * qy
    return w


def token_layer(heads) -> TokenLSA:
    """Seed 004 eq. (2)-(3): residual, keys = the n context tokens."""
    return TokenLSA(list(heads), exclude_last=True, residual=True)


def rand_q(rng: random.Random, num: int = 3, den: int = 4, nonzero: bool = False) -> Fraction:
    if nonzero:
        return Fraction(rng.choice([-1, 1]) * rng.randint(1, num), rng.randint(1, den))
    return Fraction(rng.randint(-num, num), rng.randint(1, den))


def random_full_heads(d: int, heads: int, seed: int, num: int = 2, den: int = 3):
    """Random exact rational Full weights ``[(P_k, Q_k)]``, every entry nonzero (no degenerate head)."""
    rng = random.Random(seed)
    out = []
    for _ in range(heads):
        P, Q = zeros(d + 1, d + 1), zeros(d + 1, d + 1)
        for idx in np.ndindex(d + 1, d + 1):
            P[idx] = rand_q(rng, num, den, nonzero=True)
            Q[idx] = rand_q(rng, num, den, nonzero=True)
        out.append(TokenLSAHead(P, Q))
    return out


class Frac:
    """A rational function as ``num / den`` of ring elements (for cross-multiplied identities)."""

    def __init__(self, num, den=1):
        self.num, self.den = num, den

    @staticmethod
    def of(x):
        return x if isinstance(x, Frac) else Frac(x, 1)

    def __add__(self, o):
        o = Frac.of(o)
        return Frac(self.num * o.den + o.num * self.den, self.den * o.den)

    __radd__ = __add__

    def __neg__(self):
        return Frac(-self.num, self.den)

    def __sub__(self, o):
        return self + (-Frac.of(o))

    def __rsub__(self, o):
        return Frac.of(o) - self

    def __mul__(self, o):
        o = Frac.of(o)
        return Frac(self.num * o.num, self.den * o.den)

    __rmul__ = __mul__

    def __truediv__(self, o):
        o = Frac.of(o)
        return Frac(self.num * o.den, self.den * o.num)

    def __rtruediv__(self, o):
        return Frac.of(o) / self

    def __pow__(self, k: int):
        if k < 0:
            return Frac(self.den ** (-k), self.num ** (-k))
        return Frac(self.num ** k, self.den ** k)


def cross(lhs: Frac, rhs: Frac):
    """``(lhs.num * rhs.den, rhs.num * lhs.den)``: equal iff the rational functions are equal
    (denominators nonzero)."""
    lhs, rhs = Frac.of(lhs), Frac.of(rhs)
    return lhs.num * rhs.den, rhs.num * lhs.den
