"""Seed 004 Theorem 4.1 / Lemma 4.3 (corrected): every linear transformer keeps an implicit w.

Statement proved (``s004-implicit-w``; seed 004 Theorem 4.1 and Lemma 4.3, with the
index fix E3 and the sign fix E1).  For raw inputs ``(x_i, y_i)``, ``(x_t, 0)``
and *any* weights ``(P_k^l, Q_k^l)`` of an L-layer, H-head linear transformer
(Full model, seed 004 eq. (3), keys = context tokens), for every ``l = 0..L``

    x_i^l = M^l x_i + y_i u^l,   y_i^l = a^l y_i - <w^l, x_i>,
    x_t^l = M^l x_t,             y_t^l = -<w^l, x_t>,

hence the prediction ``-y_t^L = <w^L, x_t>``, where ``M^0 = I, u^0 = 0, a^0 = 1,
w^0 = 0`` and, with ``[[A, b], [c^T, d]] = sum_k P_k (sum_{j<=n} e_j^l e_j^l^T) Q_k``,

    M^{l+1} = (I + A) M^l - b (w^l)^T        (E1: the paper prints "+ b (w^l)^T")
    u^{l+1} = (I + A) u^l + a^l b
    a^{l+1} = (1 + d) a^l + <c, u^l>
    w^{l+1} = (1 + d) w^l - (M^l)^T c.

The construction's state is the right-hand side above for *symbolic* M, u, a,
w and data; the body (one layer) is proved to map it to the same form with
(M, u, a, w) advanced by the recursion.  With the weights as free symbols too
(the CLI default), this one check is the induction step for every layer of
every L-layer transformer, whatever its per-layer weights, and the raw input
is the state at (I, 0, 1, 0): that is Theorem 4.1.  With random rational
weights (``implicit_w(..., symbolic=False, seed=s)``) the proof is the
induction step for that one layer (tests draw such layers per Hypothesis
example and also run L-layer stacks end to end).

Errata registered here (``python -m verify.errata``):

* ``S004-E3-thm4.1-index``: the statement of Theorem 4.1 puts ``l+1`` on the
  left and ``l`` on the right; with ``M^0 = I, u^0 = 0, a^0 = 1, w^0 = 0`` that
  claims layer 1 leaves the tokens unchanged (rejected, symbolic weights);
  the same index on both sides is proved.

* ``S004-E1-lemma4.3-sign``: the recursion as printed (``+ b (w^l)^T``) is
  rejected by ``prove_identity`` (``layer(state) == state(recursion step)``
  with every weight symbolic fails at a token x-coordinate, with a rational
  counterexample); the corrected ``- b (w^l)^T`` is proved
  (``lemma43_identity``; the construction ``implicit_w(..., sign=+1)`` fails
  the same way in its body section).
* ``S004-E2-lemmaA.1-alpha``: in the proof of Lemma A.1 the identity
  ``alpha^l = (M^l + a^l u^l w*^T) Sigma (a^l w* - w^l) + a^l rho u^l`` is
  rejected; ``alpha^l = (M^l + u^l w*^T) Sigma (a^l w* - w^l) + a^l rho u^l`` is
  proved.  Here ``w*`` is the OLS solution and ``r = y - X w*`` its residual with
  ``X^T r = 0``.  To make this a polynomial identity the data are
  parameterised exactly: ``y = X w* + r`` with ``r = det(Sigma) z - X adj(Sigma) X^T z``
  for free ``X, z, w*`` (then ``X^T r = 0`` identically, and every residual
  orthogonal to the columns of X arises this way when Sigma is invertible);
  ``rho = sum_i r_i^2``; M, u, a, w are free.
"""
from __future__ import annotations

import functools

import numpy as np

from constructions.claims import IdentityClaim
from constructions.base import Construction
from constructions.layers import TokenLSAHead

from . import CatalogueEntry, Erratum, register, register_erratum
from .seed004_common import (dot, eye, layer_matrix, mm, mv, obj, outer, random_full_heads, rmv, scal, T,
                             token_layer, token_layout, tokens, zeros)

REF = "seed 004 Theorem 4.1, Lemma 4.3 (corrected: errata S004-E1, S004-E3 in docs/errata.md)"


def _weight_names(d: int, heads: int):
    return [f"{m}{k}_{r}_{c}" for k in range(heads) for m in ("P", "Q") for r in range(d + 1) for c in range(d + 1)]


def heads_from_params(d: int, heads: int, p: dict):
    out = []
    for k in range(heads):
        P, Q = zeros(d + 1, d + 1), zeros(d + 1, d + 1)
        for r in range(d + 1):
            for c in range(d + 1):
                P[r, c], Q[r, c] = p[f"P{k}_{r}_{c}"], p[f"Q{k}_{r}_{c}"]
        out.append(TokenLSAHead(P, Q))
    return out


def params_from_heads(hs) -> dict:
    p = {}
    for k, h in enumerate(hs):
        for (r, c), val in np.ndenumerate(h.P):
            p[f"P{k}_{r}_{c}"] = val
        for (r, c), val in np.ndenumerate(h.Q):
            p[f"Q{k}_{r}_{c}"] = val
    return p


def implicit_state(X, y, xt, M, u, a, w) -> np.ndarray:
    """Theorem 4.1's tokens: ``(M x_i + y_i u, a y_i - <w, x_i>)``, ``(M x_t, -<w, x_t>)``."""
    X, y = obj(X), obj(y)
    return tokens(mm(X, T(M)) + mm(y.reshape(-1, 1), obj(u).reshape(1, -1)), scal(y, a) - mv(X, w),
                  mv(M, xt), -dot(xt, w))


def lemma43_step(S, M, u, a, w, d: int, sign: int = -1):
    """One step of Lemma 4.3 from ``S = [[A, b], [c^T, dd]]``; ``sign=-1`` corrected, ``+1`` as printed (E1)."""
    A, b, c, dd = S[:d, :d], S[:d, d], S[d, :d], S[d, d]
    M, u, w = obj(M), obj(u), obj(w)
    M1 = M + mm(A, M) + scal(outer(b, w), sign)
    u1 = u + mv(A, u) + scal(b, a)
    a1 = a + dd * a + dot(c, u)
    w1 = w + scal(w, dd) - rmv(M, c)
    return M1, u1, a1, w1


class ImplicitW(Construction):
    """Body: one token-LSA layer with the weights in ``params``; state: Theorem 4.1's tokens."""

    sign = -1  # Lemma 4.3 as corrected (E1); +1 is the paper as printed

    def _heads(self):
        n, d = self.variables["X"]
        return heads_from_params(d, self.params_heads, self.params)

    def input_state(self, v):
        return self.state(v)

    def state(self, v):
        return implicit_state(v["X"], v["y"], v["xt"], v["M"], v["u"], obj(v["a"])[0], v["w"])

    def final_state(self, v):
        return self.state(v)

    def step(self, v):
        n, d = self.variables["X"]
        S = layer_matrix(self._heads(), self.state(v), n)
        M1, u1, a1, w1 = lemma43_step(S, v["M"], v["u"], obj(v["a"])[0], v["w"], d, self.sign)
        out = dict(v)
        out.update(M=M1, u=u1, w=w1)
        out["a"] = np.array([a1], dtype=object)
        return out

    def readout(self, state):
        n, d = self.variables["X"]
        return {"prediction": -state[..., n, d]}


def implicit_w(n: int = 3, d: int = 2, heads: int = 2, *, symbolic: bool = True, seed: int = 0,
               weights=None, sign: int = -1, **wparams) -> ImplicitW:
    """Theorem 4.1 for one layer of weights (any weights when ``symbolic``); see the module docstring.

    ``weights``: a list of ``TokenLSAHead`` (default: random rationals from ``seed``).
    ``sign``: -1 the corrected Lemma 4.3, +1 the recursion as printed (E1).
    """
    if n < 1 or d < 1 or heads < 1:
        raise ValueError(f"need n, d, heads >= 1, got n={n}, d={d}, heads={heads}")
    if wparams:
        hs = heads_from_params(d, heads, wparams)
    else:
        hs = weights if weights is not None else random_full_heads(d, heads, seed)
    if len(hs) != heads:
        raise ValueError(f"{len(hs)} heads given, heads={heads}")
    params = params_from_heads(hs)
    con = ImplicitW(
        name="s004-implicit-w", reference=REF, layout=token_layout(n, d), prologue=[], body=[token_layer(hs)],
        epilogue=[], params=params,
        variables={"X": (n, d), "y": (n,), "xt": (d,), "M": (d, d), "u": (d,), "a": (1,), "w": (d,)},
        carried=("M", "u", "a", "w"),
        rebuild=functools.partial(implicit_w, n, d, heads, symbolic=symbolic, sign=sign),
        symbolic_params=tuple(params) if symbolic else (),
        notes=("weights symbolic (any weights)" if symbolic else "fixed rational weights")
        + ("" if sign == -1 else "; Lemma 4.3 AS PRINTED (+ b w^T)"))
    con.params_heads = heads
    con.sign = sign
    return con


def initial_variables(X, y, xt) -> dict:
    """Theorem 4.1 at l = 0: ``M = I, u = 0, a = 1, w = 0`` (the state is then the raw tokens)."""
    d = obj(X).shape[1]
    return {"X": obj(X), "y": obj(y), "xt": obj(xt), "M": eye(d), "u": zeros(d), "a": np.array([1], dtype=object),
            "w": zeros(d)}


def run_stack(layers_heads, X, y, xt, sign: int = -1):
    """Forward pass of an L-layer transformer on raw tokens, alongside the Lemma 4.3 recursion.

    Returns ``(E_l, v_l)`` for l = 0..L: the actual tokens and the recursion's
    variables (``implicit_state(v_l)`` should equal ``E_l``).
    """
    X = obj(X)
    n, d = X.shape
    v = initial_variables(X, y, xt)
    E = tokens(X, y, xt, 0)
    out = [(E, v)]
    for hs in layers_heads:
        S = layer_matrix(hs, E, n)  # from the actual layer-l tokens (Lemma 4.3's recursion reads the current layer's tokens)
        M1, u1, a1, w1 = lemma43_step(S, v["M"], v["u"], v["a"][0], v["w"], d, sign)
        v = dict(v, M=M1, u=u1, w=w1, a=np.array([a1], dtype=object))
        E = token_layer(hs).forward(E)
        out.append((E, v))
    return out


register(CatalogueEntry(
    name="s004-implicit-w", paper=REF,
    summary="any linear transformer: tokens = (M x + y u, a y - <w,x>), query (M x_t, -<w,x_t>); "
            "corrected Lemma 4.3 recursion; symbolic weights",
    build=implicit_w, sizes={"n": 3, "d": 2, "heads": 2},
    claim="Theorem 4.1: every layer l keeps (M^l, u^l, a^l, w^l); prediction = <w^L, x_t> (Full model, H heads)"))


# ====================================================================== errata E1, E2, E3

def _e3_check(as_printed: bool):
    """Theorem 4.1's statement at l = 0: the output of layer 1 is given by (M, u, a, w) with
    index 1 (corrected, same index on both sides) or index 0 (as printed: x^{l+1} = M^l x + y u^l)."""

    n, d, H = 2, 1, 1
    names = _weight_names(d, H)

    def lhs(v):
        return token_layer(heads_from_params(d, H, v)).forward(tokens(v["X"], v["y"], v["xt"], 0))

    def rhs(v):
        v0 = initial_variables(v["X"], v["y"], v["xt"])
        M, u, a, w = v0["M"], v0["u"], v0["a"][0], v0["w"]
        if not as_printed:
            S = layer_matrix(heads_from_params(d, H, v), tokens(v["X"], v["y"], v["xt"], 0), n)
            M, u, a, w = lemma43_step(S, M, u, a, w, d)
        return implicit_state(v["X"], v["y"], v["xt"], M, u, a, w)

    lay = token_layout(n, d)
    return IdentityClaim("seed 004 Thm 4.1 at l = 0", {"X": (n, d), "y": (n,), "xt": (d,)}, lhs, rhs,
                         params=tuple(names), locate=lambda e: "layer-1 output, " + lay.describe(*e))


register_erratum(Erratum(
    id="S004-E3-thm4.1-index", paper="seed 004", location="Theorem 4.1 statement (indices)",
    as_printed="x_i^{l+1} = M^l x_i + y_i u^l, y_i^{l+1} = a^l y_i - <w^l, x_i>, ... "
               "with M^0 = I, u^0 = 0, a^0 = 1, w^0 = 0",
    correction="x_i^l = M^l x_i + y_i u^l, y_i^l = a^l y_i - <w^l, x_i>, x_t^l = M^l x_t, y_t^l = -<w^l, x_t> "
               "(same index on both sides; l = 0 is the raw input)",
    as_printed_check=lambda: _e3_check(True), corrected_check=lambda: _e3_check(False)))


def lemma43_identity(n: int = 2, d: int = 1, heads: int = 1, *, sign: int = -1):
    """The induction step of Theorem 4.1 as one identity, all weights symbolic:
    ``layer(state(M, u, a, w)) == state(Lemma 4.3 step)``; ``sign=+1`` is the recursion as printed (E1)."""

    names = _weight_names(d, heads)
    shapes = {"X": (n, d), "y": (n,), "xt": (d,), "M": (d, d), "u": (d,), "a": (1,), "w": (d,)}

    def lhs(v):
        hs = heads_from_params(d, heads, v)
        return token_layer(hs).forward(implicit_state(v["X"], v["y"], v["xt"], v["M"], v["u"], v["a"][0], v["w"]))

    def rhs(v):
        hs = heads_from_params(d, heads, v)
        E = implicit_state(v["X"], v["y"], v["xt"], v["M"], v["u"], v["a"][0], v["w"])
        M1, u1, a1, w1 = lemma43_step(layer_matrix(hs, E, n), v["M"], v["u"], v["a"][0], v["w"], d, sign)
        return implicit_state(v["X"], v["y"], v["xt"], M1, u1, a1, w1)

    lay = token_layout(n, d)
    which = "as printed (+ b w^T)" if sign == 1 else "corrected (- b w^T)"
    return IdentityClaim(f"seed 004 Lemma 4.3, {which}", shapes, lhs, rhs, params=tuple(names),
                         locate=lambda e: "layer output vs recursion, " + lay.describe(*e))


def _e1_check(sign):
    # smallest case (n = 2, d = 1, one head), every weight symbolic
    return lambda: lemma43_identity(2, 1, 1, sign=sign)


register_erratum(Erratum(
    id="S004-E1-lemma4.3-sign", paper="seed 004", location="Lemma 4.3 and proof of Theorem 4.1 (A.1), M update",
    as_printed="M^{l+1} = (I + A^l) M^l + b^l (w^l)^T",
    correction="M^{l+1} = (I + A^l) M^l - b^l (w^l)^T  (x^{l+1} = (I+A) x^l + b y^l with y^l = a y - <w, x>)",
    as_printed_check=_e1_check(+1), corrected_check=_e1_check(-1)))


def adjugate(S) -> np.ndarray:
    """The adjugate of a small square matrix of ring elements (cofactors by Laplace expansion)."""
    S = obj(S)
    d = S.shape[0]

    def det(A):
        k = A.shape[0]
        if k == 0:
            return 1
        if k == 1:
            return A[0, 0]
        tot = 0
        for j in range(k):
            if A[0, j] == 0:
                continue
            minor = np.delete(np.delete(A, 0, axis=0), j, axis=1)
            term = A[0, j] * det(minor)
            tot = tot + term if j % 2 == 0 else tot - term
        return tot

    adj = zeros(d, d)
    for i in range(d):
        for j in range(d):
            minor = np.delete(np.delete(S, j, axis=0), i, axis=1)
            cof = det(minor)
            adj[i, j] = cof if (i + j) % 2 == 0 else -cof
    return adj, det(S)


def ols_data(X, z, ws):
    """``y = X w* + r`` with ``r = det(Sigma) z - X adj(Sigma) X^T z`` (so ``X^T r = 0``)."""
    X = obj(X)
    Sig = mm(T(X), X)
    adj, det = adjugate(Sig)
    r = scal(obj(z), det) - mv(X, mv(adj, rmv(X, z)))
    return mv(X, ws) + r, r, Sig


def alpha_identity(n: int = 2, d: int = 1, *, as_printed: bool = False):
    """Proof of Lemma A.1: ``alpha^l = sum_i y_i^l x_i^l`` in terms of w* (E2)."""

    def lhs(v):
        y, r, Sig = ols_data(v["X"], v["z"], v["ws"])
        a = v["a"][0]
        Xl = mm(obj(v["X"]), T(v["M"])) + outer(y, v["u"])       # x_i^l = M x_i + y_i u
        yl = scal(y, a) - mv(v["X"], v["w"])                     # y_i^l = a y_i - <w, x_i>
        return rmv(Xl, yl)

    def rhs(v):
        y, r, Sig = ols_data(v["X"], v["z"], v["ws"])
        a = v["a"][0]
        rho = dot(r, r)
        uw = outer(v["u"], v["ws"])
        G = obj(v["M"]) + (scal(uw, a) if as_printed else uw)
        return mv(G, mv(Sig, scal(v["ws"], a) - obj(v["w"]))) + scal(v["u"], a * rho)

    which = "as printed (M + a u w*^T)" if as_printed else "corrected (M + u w*^T)"
    return IdentityClaim(
        f"seed 004 Lemma A.1 alpha^l, {which}", {"X": (n, d), "z": (n,), "ws": (d,), "M": (d, d), "u": (d,),
                                       "a": (1,), "w": (d,)},
        lhs, rhs, locate=lambda e: f"alpha^l[{e[0]}]")


register_erratum(Erratum(
    id="S004-E2-lemmaA.1-alpha", paper="seed 004",
    location="proof of Lemma A.1 (alpha^l), Gamma^l and Pi^l of Lemma 4.4",
    as_printed="alpha^l = (M^l + a^l u^l (w*)^T) Sigma (a^l w* - w^l) + a^l rho u^l",
    correction="alpha^l = (M^l + u^l (w*)^T) Sigma (a^l w* - w^l) + a^l rho u^l  (agree only when a^l = 1)",
    as_printed_check=lambda: alpha_identity(as_printed=True), corrected_check=lambda: alpha_identity()))
