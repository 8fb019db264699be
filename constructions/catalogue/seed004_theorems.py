"""Seed 004 Theorems 5.1 and 5.2: explicit constructions and the exact algebra behind them.

``s004-precond`` (Theorem 5.1, proof in App. A.4).
    GD++ as a second-order least-squares solver: k *preconditioning* layers
    (Diag ``(p_x, p_y, q_x, q_y) = (-gamma, 0, 1, 0)``: ``omega_xx = -gamma``, all
    other omegas 0), then one GD layer (``(0, -s, 1, 0)``: ``omega_yx = -s``).
    Proved exactly, for symbolic data, gamma and s: after l preconditioning
    layers the tokens are ``(M_l x_i, y_i)``, ``(M_l x_t, 0)`` with
    ``M_{l+1} = (I - gamma Sigma^l) M_l``, ``Sigma^l = M_l Sigma M_l^T`` (so
    ``Sigma^{l+1} = (I - gamma Sigma^l) Sigma^l (I - gamma Sigma^l)``, proved in
    ``s004-lemma-a3``); the final layer outputs ``y_t = -s <sum_i y_i x_i', x_t'>``, i.e. the
    prediction ``s <sum_i y_i x_i', x_t'>`` with ``x' = M x`` (the paper's
    ``(1/mu') <sum_i y_i x_i', x_t'>`` for ``s = 1/mu'``).  gamma is one symbol in
    the proof, so the induction step holds for any per-layer ``gamma_l`` (the
    paper takes ``gamma_l = 1/(3 nu_l)``, ``nu_l = lambda_max(Sigma^l)``: data
    dependent weights).  Depth 1 + k.
    Not proved exactly here: the eigenvalue argument (Lemma A.2's norm bound and
    the resulting count ``O(log kappa + log log 1/eps)``); the algebra it rests on
    is ``s004-lemma-a3``.

``s004-lemma-a3`` (Lemma A.3 and the Sigma update, exact).  With ``f(x) = x (1 - gamma x)^2``:
    f'(x) = (1 - gamma x)(1 - 3 gamma x)
        [so f is nondecreasing on [0, nu] when gamma nu = 1/3];
    f(nu)/f(mu) = kappa (4/9)/(1 - 1/(3 kappa))^2 = 4 kappa^3/(3 kappa - 1)^2
        at gamma = 1/(3 nu), kappa = nu/mu;
    = (1+eps)(1 + (1 - 1/(1+eps))/2)^{-2} at kappa = 1 + eps;
    4 kappa^3 - (3 kappa - 1)^2 (1 + 3eps^2/4 - 5eps^3/4) = eps^4 (33 + 45 eps)/4
        [the Taylor expansion, with its exact remainder];
    (1 + 2eps^2)(3 kappa - 1)^2 - 4 kappa^3 = eps^2 (5 + 20 eps + 18 eps^2)
        [so kappa' <= 1 + 2 eps^2 for every eps >= 0, not only eps <= 0.1];
    d/dkappa of 4 kappa^3/(3 kappa - 1)^2 has numerator 12 kappa^2 (kappa - 1)(3 kappa - 1)
        [kappa' is increasing for kappa >= 1, so kappa <= 1 + eps gives the bound above];
    484 (3 kappa - 1)^2 - 2116 kappa^2 = (10 kappa - 11)(224 kappa - 44)
        [so (4/9)/(1 - 1/(3 kappa))^2 <= c = 484/529 ~ 0.915 for kappa >= 1.1];
    c = (4/9)/(1 - 1/3.3)^2 = 484/529;
    M' Sigma M'^T = (I - gamma Sigma^l) Sigma^l (I - gamma Sigma^l)
        for M' = (I - gamma Sigma^l) M, Sigma^l = M Sigma M^T.

``s004-ridge2`` (Theorem 5.2).  Two layers: layer 1 only ``omega_yx != 0``
    (Diag ``(0, 1, omega_yx, 0)``), layer 2 only ``omega_yy != 0`` (``(0, 1, 0, omega_yy)``).
    Proved exactly for every finite n, all data, symbolic omegas: after layer 1 the
    tokens are ``(x_i, y_i - <w^1, x_i>)``, ``(x_q, -<w^1, x_q>)`` with ``w^1 = -omega_yx alpha``
    (``alpha = sum_i y_i x_i``); after layer 2 they are
    ``(x_i, a^2 y_i - <w^2, x_i>)``, ``(x_q, -<w^2, x_q>)`` with ``a^2 = 1 + omega_yy lambda^1``,
    ``lambda^1 = sum_i (y_i^1)^2`` and ``w^2 = a^2 w^1``; the prediction is
    ``<w^2, x_q> = (1 + omega_yy lambda^1)(-omega_yx) <alpha, x_q>``.
    Default omegas: the closed form of ``s004-ridge2-omega`` for sigma in {sigma1, sigma2}.
    Asymptotic, NOT proved here: for ``x_i ~ N(0, I/n)``, ``y_i = <w, x_i> + xi_i``,
    ``xi_i ~ N(0, sigma^2)``, as n -> infinity ``Sigma -> I`` and ``lambda^1 / n -> sigma^2``
    (law of large numbers), so ``w^2 -> alpha/(1 + sigma^2)``, the ridge solution
    ``(Sigma + sigma^2 I)^{-1} alpha`` in the limit (tests check the gap shrinking numerically).

``s004-ridge2-omega`` (Theorem 5.2, the weights).  With
    ``omega_yx = -(1 + s1 + s2)/((1 + s1)(1 + s2))``, ``omega_yy = -1/(n (1 + s1 + s2))``
    (``s_k = sigma_k^2``), exactly ``(1 + n s_k omega_yy)(-omega_yx) = 1/(1 + s_k)``, k = 1, 2,
    for symbolic s1, s2, n: with ``lambda^1 = n sigma_k^2`` and ``Sigma = I`` the two-layer
    output is exactly the ridge prediction.

Erratum ``S004-E5-thm5.2-sign``: the proof of Theorem 5.2 prints ``w^1 = omega_yx sum_i y_i x_i``;
    after layer 1 the query holds ``-<w^1, x_q>`` with ``w^1 = -omega_yx alpha`` (the
    condition on the omegas then reads ``(1 + n sigma^2 omega_yy)(-omega_yx) = 1/(1 + sigma^2)``).
"""
from __future__ import annotations

import functools

from fractions import Fraction

import numpy as np

from constructions.claims import IdentityClaim
from constructions.base import Construction, exact

from . import CatalogueEntry, Erratum, register, register_erratum
from .seed004_common import (Frac, cross, diag_head, dot, eye, mm, mv, obj, rmv, scal, T, token_layer, token_layout,
                             tokens)

REF_51 = "seed 004 Theorem 5.1, proof A.4 (GD++ preconditioning + one GD step), eq. (11)"
REF_A3 = "seed 004 Lemma A.3 and the Sigma update of A.4"
REF_52 = "seed 004 Theorem 5.2 (two layers: omega_yx, then omega_yy), Sec. 5.2"


def _q(x):
    return exact(x) if isinstance(x, (str, int, float)) else x


# ====================================================================== Theorem 5.1

class Precond(Construction):
    """State: ``(M x_i, y_i)``, ``(M x_t, 0)``; final: after one GD layer with step s."""

    def input_state(self, v):
        return self.state(v)

    def state(self, v):
        X, M = obj(v["X"]), obj(v["M"])
        return tokens(mm(X, T(M)), v["y"], mv(M, v["xt"]), 0)

    def step(self, v):
        X, M = obj(v["X"]), obj(v["M"])
        Sig_l = mm(mm(M, mm(T(X), X)), T(M))
        out = dict(v)
        out["M"] = M - scal(mm(Sig_l, M), self.params["gamma"])      # (I - gamma Sigma^l) M
        return out

    def final_state(self, v):
        X, M, y = obj(v["X"]), obj(v["M"]), obj(v["y"])
        s = self.params["s"]
        Xp, xtp = mm(X, T(M)), mv(M, v["xt"])
        alpha_p = rmv(Xp, y)                                            # sum_i y_i x_i'
        return tokens(Xp, y - scal(mv(Xp, alpha_p), s), xtp, -(dot(alpha_p, xtp) * s))

    def readout(self, state):
        n, d = self.variables["X"]
        return {"prediction": -state[..., n, d]}


def precond(n: int = 3, d: int = 2, *, gamma="1/16", s="1/4") -> Precond:
    """Theorem 5.1's GD++ construction: k preconditioning layers + one GD layer (module docstring)."""
    if n < 1 or d < 1:
        raise ValueError(f"need n >= 1 and d >= 1, got n={n}, d={d}")
    gamma, s = _q(gamma), _q(s)
    pre = token_layer([diag_head(d, -gamma, 0, 1, 0)])   # omega_xx = -gamma
    gd1 = token_layer([diag_head(d, 0, -s, 1, 0)])       # omega_yx = -s
    return Precond(name="s004-precond", reference=REF_51, layout=token_layout(n, d), prologue=[], body=[pre],
                   epilogue=[gd1], params={"gamma": gamma, "s": s},
                   variables={"X": (n, d), "y": (n,), "xt": (d,), "M": (d, d)}, carried=("M",),
                   rebuild=functools.partial(precond, n, d), symbolic_params=("gamma", "s"),
                   notes="body: x <- (I - gamma Sigma^l) x; epilogue: one GD step with step s (= 1/mu')")


register(CatalogueEntry(
    name="s004-precond", paper=REF_51,
    summary="GD++ second-order solver: k layers x <- (I - gamma Sigma^l) x, then one GD step (step s)",
    build=precond, sizes={"n": 3, "d": 2},
    claim="l = O(log kappa + log log 1/eps) GD++ layers reach |y - <x_t, w*>| <= eps |x_t||w*|; here depth 1 + k"))


def lemma_a3_identity(n: int = 2, d: int = 2):
    """Lemma A.3 and the Sigma update, as exact polynomial identities (module docstring)."""

    labels = ["f'(x) = (1 - gamma x)(1 - 3 gamma x)",
              "f(nu)/f(mu) = kappa (4/9)/(1 - 1/(3 kappa))^2 at gamma = 1/(3 nu) (cross-multiplied)",
              "kappa (4/9)/(1 - 1/(3 kappa))^2 = (1+eps)(1 + (1 - 1/(1+eps))/2)^-2 at kappa = 1+eps (cross-multiplied)",
              "4 kappa^3 - (3 kappa-1)^2 (1 + 3 eps^2/4 - 5 eps^3/4) = eps^4 (33 + 45 eps)/4 at kappa = 1+eps",
              "(1 + 2 eps^2)(3 kappa-1)^2 - 4 kappa^3 = eps^2 (5 + 20 eps + 18 eps^2) at kappa = 1+eps",
              "d/dkappa [4 kappa^3/(3 kappa-1)^2] numerator = 12 kappa^2 (kappa-1)(3 kappa-1)",
              "484 (3 kappa-1)^2 - 2116 kappa^2 = (10 kappa-11)(224 kappa-44)",
              "(4/9)/(1 - 1/3.3)^2 = 484/529"]

    def items(v):
        x, g, nu, mu, eps, ka = (v[k][0] for k in ("x", "gamma", "nu", "mu", "eps", "kappa"))
        L, R = [], []
        L.append((x * (1 - g * x) ** 2).diff(x))
        R.append((1 - g * x) * (1 - 3 * g * x))
        gam = Frac(1, 3 * nu)
        f = lambda z: Frac.of(z) * (1 - gam * z) ** 2  # noqa: E731
        kap = Frac(nu, mu)
        a, b = cross(f(nu) / f(mu), kap * Frac(4, 9) / (1 - 1 / (3 * kap)) ** 2)
        L.append(a), R.append(b)
        ke = Frac.of(1 + eps)
        a, b = cross(ke * Frac(4, 9) / (1 - 1 / (3 * ke)) ** 2, ke * (1 + Frac(1, 2) * (1 - 1 / ke)) ** -2)
        L.append(a), R.append(b)
        k1 = 1 + eps
        L.append(4 * k1 ** 3 - (3 * k1 - 1) ** 2 * (1 + Fraction(3, 4) * eps ** 2 - Fraction(5, 4) * eps ** 3))
        R.append(eps ** 4 * (Fraction(33, 4) + Fraction(45, 4) * eps))
        L.append((1 + 2 * eps ** 2) * (3 * k1 - 1) ** 2 - 4 * k1 ** 3)
        R.append(eps ** 2 * (5 + 20 * eps + 18 * eps ** 2))
        N, D = 4 * ka ** 3, (3 * ka - 1) ** 2
        L.append(N.diff(ka) * D - N * D.diff(ka))
        R.append(12 * ka ** 2 * (ka - 1) * (3 * ka - 1))
        L.append(484 * (3 * ka - 1) ** 2 - 2116 * ka ** 2)
        R.append((10 * ka - 11) * (224 * ka - 44))
        L.append(Fraction(4, 9) / (1 - 1 / (3 * Fraction(11, 10))) ** 2)
        R.append(Fraction(484, 529))
        # Sigma update: M' Sigma M'^T = (I - g Sigma^l) Sigma^l (I - g Sigma^l)
        X, M = obj(v["X"]), obj(v["M"])
        Sig = mm(T(X), X)
        Sl = mm(mm(M, Sig), T(M))
        Ig = eye(d) - scal(Sl, g)
        M1 = mm(Ig, M)
        L += list(mm(mm(M1, Sig), T(M1)).flat)
        R += list(mm(mm(Ig, Sl), Ig).flat)
        return np.array(L, dtype=object), np.array(R, dtype=object)

    def locate(e):
        i = e[0]
        if i < len(labels):
            return labels[i]
        r, c = divmod(i - len(labels), d)
        return f"Sigma^(l+1) = (I - gamma Sigma^l) Sigma^l (I - gamma Sigma^l), entry [{r}, {c}]"

    one = (1,)
    return IdentityClaim(
        "seed 004 Lemma A.3 + Sigma update", {"x": one, "gamma": one, "nu": one, "mu": one, "eps": one,
                                     "kappa": one, "X": (n, d), "M": (d, d)},
        lambda v: items(v)[0], lambda v: items(v)[1], locate=locate)


register(CatalogueEntry(
    name="s004-lemma-a3", paper=REF_A3,
    summary="Lemma A.3 exactly: f' factorisation, kappa' = 4 kappa^3/(3 kappa-1)^2, c = 484/529, "
            "kappa' <= 1 + 2 eps^2 (all eps >= 0), Sigma update",
    build=lemma_a3_identity, sizes={"n": 2, "d": 2},
    claim="kappa' <= c kappa (kappa >= 1.1, c < 1) and kappa' <= 1 + 2 eps^2 (kappa <= 1 + eps, eps <= 0.1)"))


# ====================================================================== Theorem 5.2

def ridge2_omegas(n, sigma1, sigma2):
    """The closed form solving (1 + n sigma_k^2 omega_yy)(-omega_yx) = 1/(1 + sigma_k^2), k = 1, 2."""
    s1, s2 = Fraction(sigma1) ** 2, Fraction(sigma2) ** 2
    return -(1 + s1 + s2) / ((1 + s1) * (1 + s2)), Fraction(-1) / (n * (1 + s1 + s2))


class Ridge2(Construction):
    """prologue: layer 1 (omega_yx); epilogue: layer 2 (omega_yy); state = tokens after layer 1."""

    def _w1(self, v):
        return scal(rmv(v["X"], v["y"]), -self.params["omega_yx"])          # w^1 = -omega_yx alpha

    def input_state(self, v):
        return tokens(v["X"], v["y"], v["xt"], 0)

    def state(self, v):
        w1 = self._w1(v)
        return tokens(v["X"], obj(v["y"]) - mv(v["X"], w1), v["xt"], -dot(v["xt"], w1))

    def final_state(self, v):
        w1 = self._w1(v)
        y1 = obj(v["y"]) - mv(v["X"], w1)
        a2 = 1 + self.params["omega_yy"] * dot(y1, y1)                     # 1 + omega_yy lambda^1
        w2 = scal(w1, a2)
        return tokens(v["X"], scal(v["y"], a2) - mv(v["X"], w2), v["xt"], -dot(v["xt"], w2))

    def step(self, v):
        return v

    def readout(self, state):
        n, d = self.variables["X"]
        return {"prediction": -state[..., n, d]}


def ridge2(n: int = 4, d: int = 2, sigma1: int = 1, sigma2: int = 3, *, omega_yx=None, omega_yy=None) -> Ridge2:
    """Theorem 5.2's two-layer construction (module docstring); omegas default to the closed form."""
    if n < 1 or d < 1:
        raise ValueError(f"need n >= 1 and d >= 1, got n={n}, d={d}")
    oyx, oyy = ridge2_omegas(n, sigma1, sigma2)
    oyx = oyx if omega_yx is None else _q(omega_yx)
    oyy = oyy if omega_yy is None else _q(omega_yy)
    L1 = token_layer([diag_head(d, 0, 1, oyx, 0)])   # only omega_yx
    L2 = token_layer([diag_head(d, 0, 1, 0, oyy)])   # only omega_yy
    return Ridge2(name="s004-ridge2", reference=REF_52, layout=token_layout(n, d), prologue=[L1], body=[],
                  epilogue=[L2], params={"omega_yx": oyx, "omega_yy": oyy},
                  variables={"X": (n, d), "y": (n,), "xt": (d,)},
                  rebuild=functools.partial(ridge2, n, d, sigma1, sigma2), symbolic_params=("omega_yx", "omega_yy"),
                  notes=f"sigma in {{{sigma1}, {sigma2}}}; exact for finite n, ridge only as n -> infinity")


register(CatalogueEntry(
    name="s004-ridge2", paper=REF_52,
    summary="2 layers (omega_yx, then omega_yy): prediction (1 + omega_yy lambda^1)(-omega_yx) <alpha, x_q>, "
            "exact for every n",
    build=ridge2, sizes={"n": 4, "d": 2, "sigma1": 1, "sigma2": 3},
    claim="a 2-layer LT whose w^2 -> ridge solution as n -> infinity for sigma in {sigma1, sigma2} (Thm 5.2)"))


def ridge2_omega_identity():
    """(1 + n s_k omega_yy)(-omega_yx) = 1/(1 + s_k), k = 1, 2, for the closed-form omegas (symbolic s1, s2, n)."""

    def items(v):
        s1, s2, nn = v["s1"][0], v["s2"][0], v["n"][0]
        oyx = Frac(-(1 + s1 + s2), (1 + s1) * (1 + s2))
        oyy = Frac(-1, nn * (1 + s1 + s2))
        L, R = [], []
        for sk in (s1, s2):
            a, b = cross((1 + nn * sk * oyy) * (-oyx), Frac(1, 1 + sk))
            L.append(a), R.append(b)
        return np.array(L, dtype=object), np.array(R, dtype=object)

    return IdentityClaim("seed 004 Thm 5.2 omegas", {"s1": (1,), "s2": (1,), "n": (1,)},
                         lambda v: items(v)[0], lambda v: items(v)[1],
                         locate=lambda e: f"condition for sigma_{e[0] + 1} (cross-multiplied)")


register(CatalogueEntry(
    name="s004-ridge2-omega", paper=REF_52 + ", closed-form omegas",
    summary="closed-form omega_yx, omega_yy meet (1 + n sigma_k^2 omega_yy)(-omega_yx) = 1/(1 + sigma_k^2), k=1,2",
    build=lambda: ridge2_omega_identity(), sizes={},
    claim="omegas exist for two noise levels (Thm 5.2); sign per erratum E5"))


def _e5_check(as_printed: bool):
    """After layer 1 (only omega_yx), -y_q^1 = <w^1, x_q> with w^1 = -omega_yx alpha (corrected)
    or omega_yx alpha (as printed); symbolic data and omega_yx, n = 3, d = 2."""

    n, d = 3, 2

    def lhs(v):
        E = token_layer([diag_head(d, 0, 1, v["omega_yx"], 0)]).forward(tokens(v["X"], v["y"], v["xt"], 0))
        return np.array([-E[n, d]], dtype=object)

    def rhs(v):
        w1 = scal(rmv(v["X"], v["y"]), v["omega_yx"] if as_printed else -v["omega_yx"])
        return np.array([dot(w1, v["xt"])], dtype=object)

    return IdentityClaim("seed 004 Thm 5.2 proof, w^1", {"X": (n, d), "y": (n,), "xt": (d,)}, lhs, rhs,
                         params=("omega_yx",), locate=lambda e: "prediction -y_q^1 after layer 1")


register_erratum(Erratum(
    id="S004-E5-thm5.2-sign", paper="seed 004", location="proof of Theorem 5.2, w^1 after layer 1",
    as_printed="w^1 = omega_yx sum_i y_i x_i;  condition (1 + n sigma^2 omega_yy) omega_yx = 1/(1 + sigma^2)",
    correction="w^1 = -omega_yx sum_i y_i x_i;  condition (1 + n sigma^2 omega_yy)(-omega_yx) = 1/(1 + sigma^2)",
    as_printed_check=lambda: _e5_check(True), corrected_check=lambda: _e5_check(False)))
