"""Seed 004 catalogue entries: token-form GD / GD++, Theorem 4.1 with the corrected Lemma 4.3,
Theorems 5.1 / 5.2, and the errata E1, E2, E5 (constructions/catalogue/seed004_*.py)."""
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from constructions.catalogue import entries, errata
from constructions.catalogue.seed004_common import (diag_head, eye, omegas, random_full_heads, token_layer, tokens,
                                                    zeros)
from constructions.catalogue.seed004_implicit import (alpha_identity, implicit_state, implicit_w, initial_variables,
                                                      run_stack)
from constructions.catalogue.seed004_theorems import lemma_a3_identity, precond, ridge2, ridge2_omegas
from constructions.catalogue.seed004_token_gd import (diag_update_identity, full_vs_diag_identity, gd, gd_heads, gdpp,
                                                      gdpp_heads)
from constructions.layers import TokenLSA, TokenLSAHead
from verify.prover.proof import check, prove

from tests.support import perturbed_copies

NAMES = ["s004-diag-update", "s004-gd", "s004-gdpp", "s004-full-vs-diag", "s004-implicit-w", "s004-precond",
         "s004-lemma-a3", "s004-ridge2", "s004-ridge2-omega"]
ERRATA = ["S004-E1-lemma4.3-sign", "S004-E2-lemmaA.1-alpha", "S004-E3-thm4.1-index", "S004-E5-thm5.2-sign"]
q_st = st.fractions(min_value=-3, max_value=3, max_denominator=4)
FEW = settings(max_examples=5, deadline=None)


def F(a):
    return [Fraction(z) for z in np.asarray(a, dtype=object).flat]


def rvec(draw, *shape):
    a = np.empty(shape, dtype=object)
    for ix in np.ndindex(*shape):
        a[ix] = draw(q_st)
    return a


def exact_gd(X, y, w, eta, k):
    for _ in range(k):
        w = w + X.T.dot(y - X.dot(w)) * eta
    return w


# ----------------------------------------------------------------------------- registry, CLI, errata

def test_registered():
    assert set(NAMES) <= set(entries())
    assert set(ERRATA) <= set(errata())


@pytest.mark.parametrize("eid", ERRATA)
def test_errata_as_printed_rejected_corrected_proved(eid):
    e = errata()[eid]
    bad, good = check(e.as_printed_check()), check(e.corrected_check())
    assert good.ok, good.failure and good.failure.describe()
    assert not bad.ok
    ce = bad.failure.counterexample
    assert ce is not None and Fraction(ce.got) != Fraction(ce.expected)


def test_e1_as_printed_fails_on_an_x_coordinate_and_needs_w():
    bad = check(errata()["S004-E1-lemma4.3-sign"].as_printed_check())
    assert "region 'x'" in bad.failure.region
    assert Fraction(bad.failure.counterexample.assignment["w[0]"]) != 0  # invisible while w^l = 0
    # the construction with the as-printed recursion fails its body (induction step) the same way
    res = prove(implicit_w(2, 1, 1, symbolic=False, seed=1, sign=+1))
    assert not res.ok and res.failure.section == "body" and res.failure.region == "x"
    assert prove(implicit_w(2, 1, 1, symbolic=False, seed=1)).ok


def test_e2_as_printed_and_corrected_agree_when_a_is_1():
    """E2: the two forms of alpha^l differ only through the factor a^l (seed 004 Lemma 4.4 / Lemma A.1)."""
    from verify.prover.proof import prove_identity
    from constructions.catalogue.seed004_implicit import ols_data
    from constructions.catalogue.seed004_common import mm, mv, obj, outer, rmv, scal, T, dot

    def side(as_printed):
        def f(v):
            y, r, Sig = ols_data(v["X"], v["z"], v["ws"])
            uw = outer(v["u"], v["ws"])
            G = obj(v["M"]) + uw  # a = 1: a u w*^T = u w*^T
            return mv(G, mv(Sig, obj(v["ws"]) - obj(v["w"]))) + scal(v["u"], dot(r, r))
        return f

    def actual(v):
        y, r, Sig = ols_data(v["X"], v["z"], v["ws"])
        Xl = mm(obj(v["X"]), T(v["M"])) + outer(y, v["u"])
        return rmv(Xl, y - mv(v["X"], v["w"]))

    assert prove_identity("a=1", {"X": (3, 2), "z": (3,), "ws": (2,), "M": (2, 2), "u": (2,), "w": (2,)},
                          actual, side(True)).ok
    assert not check(alpha_identity(3, 2, as_printed=True)).ok and check(alpha_identity(4, 2)).ok


# ----------------------------------------------------------------------------- helpers for perturbations

def assert_perturbations_rejected(con):
    n = 0
    for what, bad in perturbed_copies(con):
        res = prove(bad)
        assert not res.ok, f"perturbing {what} was not detected"
        assert res.failure.counterexample is not None, what
        n += 1
    assert n > 0


@pytest.mark.parametrize("build", [lambda: gd(3, 2), lambda: gd(3, 2, 1), lambda: gdpp(3, 2), lambda: gdpp(2, 2, 1),
                                   lambda: implicit_w(2, 1, 2), lambda: implicit_w(3, 2, 1, symbolic=False, seed=3),
                                   lambda: precond(3, 2), lambda: ridge2(3, 2)])
def test_perturbing_one_weight_is_rejected(build):
    con = build()
    assert prove(con).ok
    assert_perturbations_rejected(con)


# ----------------------------------------------------------------------------- Diag form, Full vs Diag

@FEW
@given(st.integers(1, 3), st.integers(1, 2), st.integers(1, 2))
def test_diag_update_random_sizes(n, d, heads):
    assert check(diag_update_identity(n, d, heads)).ok


def test_single_head_omega_constraint():
    """H = 1: omega_xx omega_yy = omega_xy omega_yx; not for H = 2 (seed 004 eq. (8)-(10))."""
    one = omegas([(2, 3, 5, 7)])
    assert one["xx"] * one["yy"] == one["xy"] * one["yx"]
    two = omegas([(2, 3, 5, 7), (1, 0, 0, 1)])
    assert two["xx"] * two["yy"] != two["xy"] * two["yx"]


@FEW
@given(st.integers(1, 3), st.integers(1, 2))
def test_full_vs_diag_random_sizes(n, d):
    assert check(full_vs_diag_identity(n, d)).ok


def test_diag_construction_as_full_matrices():
    """Eq. (8) turns the Diag scalars into the Full (d+1) x (d+1) matrices of the construction."""
    d, eta, gam = 3, Fraction(1, 8), Fraction(1, 16)
    (h,) = gd_heads(d, eta)
    P = zeros(d + 1, d + 1)
    P[d, d] = -eta
    Q = zeros(d + 1, d + 1)
    Q[:d, :d] = eye(d)
    assert F(h.P) == F(P) and F(h.Q) == F(Q)
    (hf,) = gd_heads(d, eta, True)  # the Full variant: (c P, Q / c), c = -1/eta
    assert F(hf.P) == F(P * (-1 / eta)) and F(hf.Q) == F(Q * (-eta))
    (g,), (gf,) = gdpp_heads(d, gam, eta), gdpp_heads(d, gam, eta, True)
    assert F(gf.P) == F(-g.P) and F(gf.Q) == F(-g.Q)
    # a Full layer that is NOT the GD layer (Q with a y-column) is rejected against the GD specification
    con = gd(3, 2)
    Q2 = con.body[0].heads[0].Q.copy()
    Q2[0, 2] = 1
    bad = prove(con, sections={"prologue": [], "body": [token_layer([TokenLSAHead(con.body[0].heads[0].P, Q2)])],
                               "epilogue": []})
    assert not bad.ok and bad.failure.section == "body"


# ----------------------------------------------------------------------------- GD

@FEW
@given(st.integers(1, 4), st.integers(1, 3), st.sampled_from([0, 1]))
def test_gd_proved_random_sizes(n, d, full):
    res = prove(gd(n, d, full))
    assert res.ok and res.symbolic_params == ["eta"]


@FEW
@given(st.integers(1, 4), st.integers(1, 3), st.integers(1, 4), st.sampled_from([0, 1]), st.data())
def test_gd_exact_rational_end_to_end(n, d, k, full, data):
    eta = data.draw(st.fractions(min_value=Fraction(1, 16), max_value=Fraction(1, 2), max_denominator=16))
    X, y, xt = rvec(data.draw, n, d), rvec(data.draw, n), rvec(data.draw, d)
    con = gd(n, d, full, eta=eta)
    E = tokens(X, y, xt, 0)
    v = {"X": X, "y": y, "xt": xt, "w": zeros(d)}
    assert F(E) == F(con.state(v))  # the raw input is the invariant at w = 0
    for _ in range(k):
        E = con.body[0].forward(E)
        v = con.step(v)
        assert F(E) == F(con.state(v))
    w = exact_gd(X, y, zeros(d), eta, k)
    assert F(v["w"]) == F(w)
    assert Fraction(con.readout(E)["prediction"]) == Fraction(xt.dot(w))


def test_gd_float64_matches_plain_gd():
    rng = np.random.default_rng(0)
    B, n, d, k = 64, 20, 5, 25
    X = rng.standard_normal((B, n, d)) / np.sqrt(n)
    y = np.einsum("bnd,bd->bn", X, rng.standard_normal((B, d))) + 0.1 * rng.standard_normal((B, n))
    xt = rng.standard_normal((B, d))
    eta = 0.25
    layer = gd(n, d).rebuild(eta=Fraction(1, 4)).body[0].map(lambda a: a.astype(np.float64))
    E = np.zeros((B, n + 1, d + 1))
    E[:, :n, :d], E[:, :n, d], E[:, n, :d] = X, y, xt
    w = np.zeros((B, d))
    for j in range(1, k + 1):
        E = layer.forward(E)
        w = w + eta * np.einsum("bnd,bn->bd", X, y - np.einsum("bnd,bd->bn", X, w))
        pred_layers, pred_gd = -E[:, n, d], np.einsum("bd,bd->b", xt, w)
        assert np.allclose(pred_layers, pred_gd, rtol=1e-11, atol=1e-12), j
        assert np.allclose(E[:, :n, d], y - np.einsum("bnd,bd->bn", X, w), atol=1e-12)
    assert np.array_equal(E[:, :, :d], np.concatenate([X, xt[:, None]], axis=1))  # x never changes


def test_gd_query_must_be_excluded_from_keys():
    """With the query among the keys (exclude_last=False) the GD invariant fails from layer 1 on."""
    con = gd(3, 2)
    layer = TokenLSA(con.body[0].heads, exclude_last=False)
    res = prove(con, sections={"prologue": [], "body": [layer], "epilogue": []})
    assert not res.ok and res.failure.section == "body"


# ----------------------------------------------------------------------------- GD++

@FEW
@given(st.integers(1, 3), st.integers(1, 2), st.sampled_from([0, 1]))
def test_gdpp_proved_random_sizes(n, d, full):
    res = prove(gdpp(n, d, full))
    assert res.ok and res.symbolic_params == ["gamma", "eta"]


@FEW
@given(st.integers(1, 4), st.integers(1, 3), st.integers(1, 3), st.data())
def test_gdpp_exact_rational_eq11_and_preconditioned_gd(n, d, k, data):
    gam = data.draw(st.fractions(min_value=0, max_value=Fraction(1, 4), max_denominator=16))
    eta = data.draw(st.fractions(min_value=0, max_value=Fraction(1, 4), max_denominator=16))
    X, y, xt = rvec(data.draw, n, d), rvec(data.draw, n), rvec(data.draw, d)
    con = gdpp(n, d, gamma=gam, eta=eta)
    E = tokens(X, y, xt, 0)
    v = {"X": X, "y": y, "xt": xt, "M": eye(d), "w": zeros(d)}
    for _ in range(k):
        # eq. (11) directly on the current tokens
        Xl, yl = E[:n, :d], E[:n, d]
        Sig_l, alpha_l = Xl.T.dot(Xl), Xl.T.dot(yl)
        expect = E.copy()
        for i in range(n + 1):
            expect[i, :d] = E[i, :d] - Sig_l.dot(E[i, :d]) * gam
            expect[i, d] = E[i, d] - alpha_l.dot(E[i, :d]) * eta
        E = con.body[0].forward(E)
        assert F(E) == F(expect)
        v = con.step(v)
        assert F(E) == F(con.state(v))
    assert Fraction(con.readout(E)["prediction"]) == Fraction(xt.dot(v["w"]))


# ----------------------------------------------------------------------------- Theorem 4.1 / Lemma 4.3

@FEW
@given(st.integers(1, 3), st.integers(1, 2), st.integers(1, 2), st.integers(0, 10 ** 6))
def test_implicit_w_random_rational_weights(n, d, heads, seed):
    res = prove(implicit_w(n, d, heads, symbolic=False, seed=seed))
    assert res.ok and res.symbolic_params == []


def test_implicit_w_symbolic_weights_d2():
    res = prove(implicit_w(2, 2, 1))
    assert res.ok and len(res.symbolic_params) == 2 * 3 * 3


@FEW
@given(st.integers(1, 4), st.integers(1, 3), st.integers(1, 2), st.integers(1, 4), st.integers(0, 10 ** 6),
       st.data())
def test_theorem_4_1_end_to_end(n, d, heads, L, seed, data):
    """An L-layer transformer with different random weights per layer: the corrected Lemma 4.3
    recursion reproduces every layer's tokens exactly, and the prediction is <w^L, x_t>."""
    X, y, xt = rvec(data.draw, n, d), rvec(data.draw, n), rvec(data.draw, d)
    stack = [random_full_heads(d, heads, seed + 7919 * l) for l in range(L)]
    for E, v in run_stack(stack, X, y, xt):
        assert F(E) == F(implicit_state(X, y, xt, v["M"], v["u"], v["a"][0], v["w"]))
    assert Fraction(-E[n, d]) == Fraction(xt.dot(v["w"]))


def test_lemma_4_3_as_printed_breaks_at_layer_2_not_before():
    """E1 is invisible while w^l = 0 (layer 1) and shows from the layer-2 output on."""
    X = np.array([[1, 2], [0, -1], [3, 1]], dtype=object)
    y, xt = np.array([1, -2, 1], dtype=object), np.array([2, 1], dtype=object)
    stack = [random_full_heads(2, 2, s) for s in (11, 12, 13)]
    ok = [F(E) == F(implicit_state(X, y, xt, v["M"], v["u"], v["a"][0], v["w"]))
          for E, v in run_stack(stack, X, y, xt, sign=+1)]
    assert ok[:2] == [True, True] and not all(ok[2:])
    assert all(F(E) == F(implicit_state(X, y, xt, v["M"], v["u"], v["a"][0], v["w"]))
               for E, v in run_stack(stack, X, y, xt))


def test_initial_state_is_the_raw_input():
    X = np.array([[1, 2]], dtype=object)
    v = initial_variables(X, np.array([3], dtype=object), np.array([5, 7], dtype=object))
    assert F(implicit_state(v["X"], v["y"], v["xt"], v["M"], v["u"], v["a"][0], v["w"])) == [1, 2, 3, 5, 7, 0]


# ----------------------------------------------------------------------------- Theorem 5.1

@FEW
@given(st.integers(1, 3), st.integers(1, 2))
def test_precond_random_sizes(n, d):
    assert prove(precond(n, d)).ok


@FEW
@given(st.integers(1, 3), st.integers(1, 2))  # d = 3 with n >= 2: seconds to minutes (degree-12 Sigma update)
def test_lemma_a3_identities(n, d):
    assert check(lemma_a3_identity(n, d)).ok


def test_theorem_5_1_schedule_float64():
    """gamma_l = 1/(3 nu_l), then one GD step with s = 1/mu': kappa follows the exact map
    kappa -> 4 kappa^3/(3 kappa - 1)^2 of Lemma A.3 and the prediction reaches <w*, x_t>."""
    rng = np.random.default_rng(1)
    n, d = 20, 6
    X = rng.standard_normal((n, d)) * np.linspace(0.3, 3.0, d)
    y = X @ rng.standard_normal(d) + 0.3 * rng.standard_normal(n)
    xt = rng.standard_normal(d)
    wstar = np.linalg.lstsq(X, y, rcond=None)[0]
    E = np.zeros((n + 1, d + 1))
    E[:n, :d], E[:n, d], E[n, :d] = X, y, xt
    errs = []
    for _ in range(12):
        ev = np.linalg.eigvalsh(E[:n, :d].T @ E[:n, :d])
        kappa = ev[-1] / ev[0]
        last = token_layer([diag_head(d, 0, -1 / ev[0], 1, 0)]).map(lambda a: a.astype(float))
        errs.append(abs(-last.forward(E)[n, d] - xt @ wstar))
        pre = token_layer([diag_head(d, -1 / (3 * ev[-1]), 0, 1, 0)]).map(lambda a: a.astype(float))
        E = pre.forward(E)
        ev2 = np.linalg.eigvalsh(E[:n, :d].T @ E[:n, :d])
        assert np.isclose(ev2[-1] / ev2[0], 4 * kappa ** 3 / (3 * kappa - 1) ** 2, rtol=1e-6)
    assert errs[-1] < 1e-12 * errs[0] and all(b < a for a, b in zip(errs[:9], errs[1:10]))


# ----------------------------------------------------------------------------- Theorem 5.2

@FEW
@given(st.integers(1, 4), st.integers(1, 2))
def test_ridge2_random_sizes(n, d):
    assert prove(ridge2(n, d)).ok


@FEW
@given(st.integers(1, 4), st.integers(1, 3), st.data())
def test_ridge2_exact_rational(n, d, data):
    X, y, xt = rvec(data.draw, n, d), rvec(data.draw, n), rvec(data.draw, d)
    oyx, oyy = data.draw(q_st), data.draw(q_st)
    con = ridge2(n, d, omega_yx=oyx, omega_yy=oyy)
    E = con.epilogue[0].forward(con.prologue[0].forward(tokens(X, y, xt, 0)))
    alpha = X.T.dot(y)
    lam1 = sum((y[i] + oyx * alpha.dot(X[i])) ** 2 for i in range(n))
    assert Fraction(-E[n, d]) == Fraction((1 + oyy * lam1) * (-oyx) * alpha.dot(xt))


def test_ridge2_closed_form_omegas():
    for s1, s2, n in [(1, 3, 20), (2, 5, 7)]:
        oyx, oyy = ridge2_omegas(n, s1, s2)
        for s in (s1, s2):
            assert (1 + n * s * s * oyy) * (-oyx) == Fraction(1, 1 + s * s)


def test_ridge2_gap_to_ridge_shrinks_with_n():
    """The asymptotic part of Thm 5.2 (not proved exactly): relative gap to ridge -> 0 as n grows."""
    rng = np.random.default_rng(2)
    d, sig = 5, (1.0, 3.0)

    def gap(n, reps=20):
        oyx, oyy = (float(z) for z in ridge2_omegas(n, 1, 3))
        out = []
        for r in range(reps):
            s = sig[r % 2]
            X = rng.standard_normal((n, d)) / np.sqrt(n)
            w = rng.standard_normal(d)
            y = X @ w + s * rng.standard_normal(n)
            alpha = X.T @ y
            y1 = y + oyx * X @ alpha
            w2 = (1 + oyy * y1 @ y1) * (-oyx) * alpha
            ridge = np.linalg.solve(X.T @ X + s * s * np.eye(d), alpha)
            out.append(np.linalg.norm(w2 - ridge) / np.linalg.norm(ridge))
        return float(np.median(out))

    g_small, g_large = gap(100), gap(30000)
    assert g_large < 0.03 and g_large < g_small / 5
