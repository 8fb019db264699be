"""Seed 004 Sec. 2 and 5.1: GD and GD++ as linear transformers in the token form.

Model (seed 004 eq. (2)-(3)): tokens ``e_i = (x_i, y_i)``,
query ``(x_t, 0)`` last; one layer is ``e_i <- e_i + sum_k sum_{j<=n} (e_j^T Q_k e_i) P_k e_j``
(keys = context only, every token updated); prediction ``-y_t^L``.

Registered entries
------------------
``s004-diag-update``  eq. (3) with the Diag weights of eq. (8) is exactly the
    4-parameter update eq. (10) with the omegas of eq. (9), for any number of
    heads: identity in symbolic tokens and symbolic (p_x, p_y, q_x, q_y) per head.

``s004-gd``  plain GD on ``L(w) = 1/2 sum_i (y_i - <w, x_i>)^2`` (raw sums, no 1/n),
    ``w <- w + eta sum_i (y_i - <w, x_i>) x_i``, one layer per step.  Diag
    weights ``(p_x, p_y, q_x, q_y) = (0, -eta, 1, 0)``: ``omega_yx = -eta``, the
    other three omegas 0, i.e. ``P = diag(0, .., 0, -eta)``, ``Q = diag(1, .., 1, 0)``
    (von Oswald et al.'s construction).  Invariant at every layer (seed 004 Theorem 4.1
    with M = I, u = 0, a = 1): context ``(x_i, y_i - <w_l, x_i>)``, query
    ``(x_t, -<w_l, x_t>)``; the raw input is this state at ``w_0 = 0``, so
    ``-y_t`` after k layers is ``<w_k, x_t>``, the prediction of k GD steps from 0.
    Why the layer must be this: eq. (10) with ``y_i^l = y_i - <w_l, x_i>`` gives
    ``y_i^{l+1} = y_i - <w_l - omega_yx (alpha - Sigma w_l), x_i>`` (if omega_xx =
    omega_xy = omega_yy = 0), i.e. ``w_{l+1} = w_l - omega_yx * (-grad L(w_l))``;
    GD needs ``omega_yx = -eta``.  In the Full model this layer is unique up to
    ``(P, Q) -> (cP, Q/c)``: ``--set full=1`` builds the Full pair
    ``P = e_{d+1} e_{d+1}^T``, ``Q = -eta [[I_d, 0], [0, 0]]`` (c = -1/eta), written
    as full matrices, and proves it against the same specification.

``s004-gdpp``  GD++ (eq. (11)): Diag weights ``(-gamma, -eta, 1, 0)``, so
    ``omega_xx = -gamma``, ``omega_yx = -eta``, ``q_y = 0``.  Invariant (Theorem 4.1
    with u = 0, a = 1): context ``(M_l x_i, y_i - <w_l, x_i>)``, query
    ``(M_l x_t, -<w_l, x_t>)`` with
    ``M_{l+1} = (I - gamma Sigma^l) M_l``, ``Sigma^l = M_l Sigma M_l^T`` and
    ``w_{l+1} = w_l + eta M_l^T M_l (alpha - Sigma w_l)``: preconditioned GD on the
    raw data with preconditioner ``M_l^T M_l``.  Proved for symbolic M, w, data,
    gamma and eta.  ``--set full=1``: the Full pair ``(-P, -Q)``.

``s004-full-vs-diag``  the Diag-built GD and GD++ layers and their Full-matrix
    variants are the same map on every token matrix (symbolic tokens, eta, gamma).

``gd-token-lsa`` (``gd --arch token-lsa``)  the GD layer above on the least-squares variables
    ``A, b, x, q`` of the other gd architectures (:class:`TokenLSAGD`), so weights in von Oswald
    et al.'s token form go through ``gd``'s proof, run and report.
"""
from __future__ import annotations

import functools

import numpy as np

from constructions.claims import IdentityClaim
from constructions.base import Construction, batch_ndim, exact, new_state
from constructions.layers import TokenLSAHead

from . import CatalogueEntry, register
from .seed004_common import (context_stats, diag_head, dot, eye, mm, mv, obj, omegas, rmv, scal, T,
                             token_layer, token_layout, tokens, zeros)

REF_GD = "seed 004 Sec. 2 eq. (2)-(3), Diag eq. (8)-(10) (omega_yx = -eta); von Oswald et al. 2023a GD"
REF_GDPP = "seed 004 Sec. 5.1 eq. (11) (GD++), eq. (8)-(10); invariant of Theorem 4.1 with u = 0, a = 1"


def _check_nd(n, d):
    if n < 1 or d < 1:
        raise ValueError(f"need n >= 1 and d >= 1, got n={n}, d={d}")


# ====================================================================== eq. (3)+(8) => eq. (10)

def diag_update_identity(n: int = 3, d: int = 2, heads: int = 2):
    """Eq. (3) with eq. (8) weights equals eq. (10) with the omegas of eq. (9) (seed 004 eq. (8)-(10)).

    For every token (query included): ``x <- x + omega_xx Sigma^l x + omega_xy y alpha^l``,
    ``y <- y + omega_yx <alpha^l, x> + omega_yy y lambda^l``; sums over the n context tokens.
    """

    _check_nd(n, d)
    names = [f"{nm}{k}" for k in range(heads) for nm in ("px", "py", "qx", "qy")]

    def lhs(v):
        hs = [diag_head(d, *(v[f"{nm}{k}"] for nm in ("px", "py", "qx", "qy"))) for k in range(heads)]
        return token_layer(hs).forward(v["E"])

    def rhs(v):
        E = v["E"]
        om = omegas([tuple(v[f"{nm}{k}"] for nm in ("px", "py", "qx", "qy")) for k in range(heads)])
        Sig, al, lam = context_stats(E, n, d)
        out = zeros(n + 1, d + 1)
        for i in range(n + 1):
            x, y = E[i, :d], E[i, d]
            out[i, :d] = x + scal(mv(Sig, x), om["xx"]) + scal(al, om["xy"] * y)
            out[i, d] = y + om["yx"] * dot(al, x) + om["yy"] * y * lam
        return out

    lay = token_layout(n, d)
    return IdentityClaim(f"s004-diag-update (n={n}, d={d}, heads={heads})", {"E": (n + 1, d + 1)},
                         lhs, rhs, params=tuple(names), locate=lambda e: lay.describe(*e))


register(CatalogueEntry(
    name="s004-diag-update", paper="seed 004 eq. (3), (8)-(10)",
    summary="token LSA with Diag weights (eq. 8) = the 4-omega update eq. (10), any number of heads",
    build=diag_update_identity, sizes={"n": 3, "d": 2, "heads": 2},
    claim="the Diag model is captured by 4 numbers per layer (eq. (9)-(10))"))


# ====================================================================== GD

def gd_heads(d: int, eta, full: bool = False):
    """The GD layer's heads: Diag ``(0, -eta, 1, 0)`` via eq. (8), or the Full pair
    ``P = e_{d+1} e_{d+1}^T``, ``Q = -eta [[I, 0], [0, 0]]`` written as matrices."""
    if not full:
        return [diag_head(d, 0, -eta, 1, 0)]
    P, Q = zeros(d + 1, d + 1), zeros(d + 1, d + 1)
    P[d, d] = 1
    Q[:d, :d] = scal(eye(d), -eta)
    return [TokenLSAHead(P, Q)]


class TokenGD(Construction):
    """State: context ``(x_i, y_i - <w, x_i>)``, query ``(x_t, -<w, x_t>)``; step: one GD step."""

    def input_state(self, v):
        return self.state(v)

    def state(self, v):
        X, w = obj(v["X"]), obj(v["w"])
        return tokens(X, obj(v["y"]) - mv(X, w), v["xt"], -dot(v["xt"], w))

    def final_state(self, v):
        return self.state(v)

    def step(self, v):
        X, w = obj(v["X"]), obj(v["w"])
        out = dict(v)
        out["w"] = w + scal(rmv(X, obj(v["y"]) - mv(X, w)), self.params["eta"])
        return out

    def readout(self, state):
        n, d = self.variables["X"]
        return {"prediction": -state[..., n, d]}


def gd(n: int = 4, d: int = 2, full: int = 0, *, eta="1/8") -> TokenGD:
    """k GD steps from w = 0 as k token-LSA layers (one head each); see the module docstring."""
    _check_nd(n, d)
    if full not in (0, 1):
        raise ValueError(f"full must be 0 (Diag weights, default) or 1 (Full matrices), got {full}")
    eta = exact(eta) if isinstance(eta, (str, int, float)) else eta
    layer = token_layer(gd_heads(d, eta, bool(full)))
    return TokenGD(name="s004-gd", reference=REF_GD, layout=token_layout(n, d), prologue=[], body=[layer],
                   epilogue=[], params={"eta": eta}, variables={"X": (n, d), "y": (n,), "xt": (d,), "w": (d,)},
                   carried=("w",), rebuild=functools.partial(gd, n, d, full), symbolic_params=("eta",),
                   notes="Full weights" if full else "Diag weights (p_x, p_y, q_x, q_y) = (0, -eta, 1, 0)")


register(CatalogueEntry(
    name="s004-gd", paper=REF_GD,
    summary="k GD steps from w=0 = k token-LSA layers (1 head, omega_yx = -eta); full=1: Full matrices",
    build=gd, sizes={"n": 4, "d": 2, "full": 0},
    claim="one layer per GD step, tokens (n+1) x (d+1), prediction -y_t (von Oswald et al. / seed 004 Sec. 2)"))


# ====================================================================== GD++

def gdpp_heads(d: int, gamma, eta, full: bool = False):
    """GD++ heads: Diag ``(-gamma, -eta, 1, 0)`` (omega_xx = -gamma, omega_yx = -eta), or the Full
    pair ``(-P, -Q) = ([[gamma I, 0], [0, eta]], [[-I, 0], [0, 0]])`` written as matrices."""
    if not full:
        return [diag_head(d, -gamma, -eta, 1, 0)]
    P, Q = zeros(d + 1, d + 1), zeros(d + 1, d + 1)
    P[:d, :d] = scal(eye(d), gamma)
    P[d, d] = eta
    Q[:d, :d] = scal(eye(d), -1)
    return [TokenLSAHead(P, Q)]


class TokenGDpp(Construction):
    """State: context ``(M x_i, y_i - <w, x_i>)``, query ``(M x_t, -<w, x_t>)``."""

    def input_state(self, v):
        return self.state(v)

    def state(self, v):
        X, M, w = obj(v["X"]), obj(v["M"]), obj(v["w"])
        return tokens(mm(X, T(M)), obj(v["y"]) - mv(X, w), mv(M, v["xt"]), -dot(v["xt"], w))

    def final_state(self, v):
        return self.state(v)

    def step(self, v):
        X, M, w, y = obj(v["X"]), obj(v["M"]), obj(v["w"]), obj(v["y"])
        g, e = self.params["gamma"], self.params["eta"]
        Sig = mm(T(X), X)
        Sig_l = mm(mm(M, Sig), T(M))                                   # Sigma^l = M Sigma M^T
        out = dict(v)
        out["M"] = M - scal(mm(Sig_l, M), g)                           # (I - gamma Sigma^l) M
        out["w"] = w + scal(mv(mm(T(M), M), rmv(X, y) - mv(Sig, w)), e)  # w + eta M^T M (alpha - Sigma w)
        return out

    def readout(self, state):
        n, d = self.variables["X"]
        return {"prediction": -state[..., n, d]}


def gdpp(n: int = 3, d: int = 2, full: int = 0, *, gamma="1/16", eta="1/8") -> TokenGDpp:
    """GD++ (eq. (11)) as one token-LSA layer per step; see the module docstring."""
    _check_nd(n, d)
    if full not in (0, 1):
        raise ValueError(f"full must be 0 (Diag weights, default) or 1 (Full matrices), got {full}")
    gamma = exact(gamma) if isinstance(gamma, (str, int, float)) else gamma
    eta = exact(eta) if isinstance(eta, (str, int, float)) else eta
    layer = token_layer(gdpp_heads(d, gamma, eta, bool(full)))
    return TokenGDpp(name="s004-gdpp", reference=REF_GDPP, layout=token_layout(n, d), prologue=[], body=[layer],
                     epilogue=[], params={"gamma": gamma, "eta": eta},
                     variables={"X": (n, d), "y": (n,), "xt": (d,), "M": (d, d), "w": (d,)},
                     carried=("M", "w"), rebuild=functools.partial(gdpp, n, d, full),
                     symbolic_params=("gamma", "eta"),
                     notes="Full weights" if full else "Diag weights (-gamma, -eta, 1, 0)")


register(CatalogueEntry(
    name="s004-gdpp", paper=REF_GDPP,
    summary="GD++: x <- (I - gamma Sigma^l) x, y-GD step; = preconditioned GD with M_l^T M_l (1 layer/step)",
    build=gdpp, sizes={"n": 3, "d": 2, "full": 0},
    claim="one layer per GD++ step, q_y = 0, tokens (n+1) x (d+1) (seed 004 eq. (11))"))


# ====================================================================== Full vs Diag

def full_vs_diag_identity(n: int = 3, d: int = 2):
    """The Diag-built GD and GD++ layers equal their Full-matrix variants as maps of the tokens."""

    _check_nd(n, d)

    def lhs(v):
        return np.stack([token_layer(gd_heads(d, v["eta"])).forward(v["E"]),
                         token_layer(gdpp_heads(d, v["gamma"], v["eta"])).forward(v["E"])])

    def rhs(v):
        return np.stack([token_layer(gd_heads(d, v["eta"], True)).forward(v["E"]),
                         token_layer(gdpp_heads(d, v["gamma"], v["eta"], True)).forward(v["E"])])

    lay = token_layout(n, d)
    return IdentityClaim(f"s004-full-vs-diag (n={n}, d={d})", {"E": (n + 1, d + 1)}, lhs, rhs,
                         params=("gamma", "eta"),
                         locate=lambda e: f"{['GD', 'GD++'][e[0]]} layer output, " + lay.describe(*e[1:]))


register(CatalogueEntry(
    name="s004-full-vs-diag", paper="seed 004 eq. (2)-(3), (8)",
    summary="GD / GD++ layers: Diag weights (eq. 8) and the Full-matrix variants are the same map",
    build=full_vs_diag_identity, sizes={"n": 3, "d": 2},
    claim="Full model contains Diag; the GD layer is unique in Full up to (P, Q) -> (cP, Q/c)"))


# ====================================================================== GD in the token form, as a gd architecture

REF_TOKEN_LSA = ("seed 004 Sec. 2 eq. (2)-(3), GD head (p_x, p_y, q_x, q_y) = (0, -eta, 1, 0) of eq. (8)-(10) "
                 "(von Oswald et al. 2023a); least squares of seed 000 eq. (3)")


class TokenLSAGD(Construction):
    """Seed 004's GD transformer on this toolkit's least-squares variables (``A``, ``b``, ``x``, ``q``):
    the ``gd --arch token-lsa`` architecture.

    Tokens (rows), ``n + 2`` of them, each of ``2d + 2`` coordinates ``(x-part, y, one, w)``:

    * context token ``i < n``: ``(a_i, b_i - a_i^T x, 0, 0)``;
    * carrier token ``n``: ``(0, 0, 1, x)``: the iterate, so that it can be read out (the token
      form otherwise holds ``x`` only implicitly, seed 004 Lemma 4.3);
    * query token ``n + 1`` (last, never a key): ``(q, -q^T x, 0, 0)``.

    Restricted to the context and query tokens and the first ``d + 1`` coordinates this is seed
    004's token ``(x_i, y_i)`` with von Oswald et al.'s invariant (label slot = residual, query
    slot = negated prediction).  One layer per step (eq. (2)-(3), keys = all tokens but the
    last), two heads:

    * head 0, seed 004's GD head (Diag (0, -eta, 1, 0) of eq. (8)): ``P = -eta e_y e_y^T``,
      ``Q = diag(I_d, 0, ...)``: ``y_i <- y_i - eta a_i^T sum_j a_j y_j`` for every token with
      an x-part (context and query);
    * head 1, the carrier's update: ``Q = e_y e_one^T``, ``P = eta sum_k e_{w_k} e_{x_k}^T``:
      ``w <- w + eta sum_j y_j a_j`` on the one token whose ``one`` is 1.

    Both read the layer's input, so ``x <- x + eta A^T (b - A x)`` (seed 000 eq. (3)) at the
    carrier and in every residual.  The carrier is a key, but its x-part and y are 0, so it
    adds nothing to either head.  ``verify.construct import --from icl-gd --spec token-lsa``
    maps von Oswald et al.'s one-head (d+1)-coordinate weights onto head 0's tokens.
    """

    def input_state(self, v):
        return self.state(v)

    def state(self, v):
        from constructions.lsq import dot, matvec

        n, d = self.variables["A"]
        nb = batch_ndim(v, self.variables)
        S = new_state(self.layout, np.asarray(v["A"]), nb)
        A = np.asarray(v["A"])
        S[(...,) + (slice(0, n), slice(0, d))] = A
        S[(...,) + (slice(0, n), d)] = np.asarray(v["b"]) - matvec(A, v["x"])
        S[(...,) + (n, d + 1)] = 1
        S[(...,) + (n, slice(d + 2, 2 * d + 2))] = v["x"]
        S[(...,) + (n + 1, slice(0, d))] = v["q"]
        S[(...,) + (n + 1, d)] = -dot(v["q"], v["x"])
        return S

    def final_state(self, v):
        return self.state(v)

    def step(self, v):
        from constructions.lsq import gd_step

        return gd_step(v, self.params["eta"])

    def readout(self, state):
        n, d = self.variables["A"]
        return {"x": state[..., n, d + 2:2 * d + 2], "prediction": -state[..., n + 1, d]}


def token_lsa_layout(n: int, d: int):
    from constructions.layout import Layout

    lay = Layout((n + 2, 2 * d + 2), row_axis="tokens (n context, the carrier, then the query)",
                 col_axis="token coordinates (x-part, y, one, w)")
    lay.add("a", (0, n), (0, d), "context x-part: a_i (rows of A)")
    lay.add("r", (0, n), (d, d + 1), "context y_i = b_i - a_i^T x (the residual)")
    lay.add("one", (n, n + 1), (d + 1, d + 2), "1 at the carrier token")
    lay.add("x", (n, n + 1), (d + 2, 2 * d + 2), "the iterate x at the carrier token")
    lay.add("q", (n + 1, n + 2), (0, d), "query x-part: q")
    lay.add("pred", (n + 1, n + 2), (d, d + 1), "query y_t = -q^T x (prediction = -y_t)")
    return lay


def token_lsa_gd_heads(d: int, eta) -> list[TokenLSAHead]:
    """Head 0: ``P = -eta e_y e_y^T``, ``Q = diag(I_d, 0, ...)``; head 1: ``Q = e_y e_one^T``,
    ``P = eta sum_k e_{w_k} e_{x_k}^T`` (see :class:`TokenLSAGD`)."""
    m = 2 * d + 2
    P0, Q0, P1, Q1 = zeros(m, m), zeros(m, m), zeros(m, m), zeros(m, m)
    P0[d, d] = -eta
    for k in range(d):
        Q0[k, k] = 1
        P1[d + 2 + k, k] = eta
    Q1[d, d + 1] = 1
    return [TokenLSAHead(P0, Q0), TokenLSAHead(P1, Q1)]


def gd_token_lsa(n: int = 20, d: int = 5, *, eta=None) -> TokenLSAGD:
    """``gd --arch token-lsa``: k GD steps as k token-form LSA layers (see :class:`TokenLSAGD`)."""
    _check_nd(n, d)
    eta = exact("1/16") if eta is None else (exact(eta) if isinstance(eta, (str, int, float)) else eta)
    from constructions.lsq import LS_GROUPS, LS_VARIABLES

    layer = token_layer(token_lsa_gd_heads(d, eta))
    return TokenLSAGD(name="gd-token-lsa", reference=REF_TOKEN_LSA, layout=token_lsa_layout(n, d), prologue=[],
                      body=[layer], epilogue=[], params={"eta": eta}, variables=LS_VARIABLES(n, d), token_groups=LS_GROUPS, carried=("x",),
                      rebuild=functools.partial(gd_token_lsa, n, d), symbolic_params=("eta",),
                      notes="(N+2) x (2D+2) tokens; two heads per step (GD, carrier of x)")


register(CatalogueEntry(
    name="gd-token-lsa", paper=REF_TOKEN_LSA, build=gd_token_lsa, sizes={"n": 20, "d": 5},
    summary="least-squares GD, token-form LSA (seed 004 / von Oswald et al.), 1 layer per step",
    roles=frozenset({"gd"}), arch="token-lsa", depth="k", state="(N+2) x (2D+2)",
    claim="one layer per GD step; von Oswald et al.'s weights import onto it (verify.construct import --from icl-gd)"))
