"""constructions/layers.py: each layer against its paper's formula, written out independently.

* BaseConv: seed 000 eq. (19) with bias matrices (Def. D.20), explicit loops.
* LSA: seed 001 eq. (8)/(39), sum over heads of (H W3)(H W1)^T (H W2).
* TokenLSA: seed 004 eq. (2)-(3), e_i + sum_k sum_j (e_j^T Q_k e_i) P_k e_j.
* ELSA: seed 001 eq. (16), stages applied one after another, one skip (eq. 57-59);
  "reduces to LSA if the bias matrices are set to zero".
"""
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from constructions import ops
from constructions.layers import (
    ELSA,
    LAYER_TYPES,
    LSA,
    BaseConv,
    ELSAHead,
    LSAHead,
    TokenLSA,
    TokenLSAHead,
    layer_from_arrays,
)

small_q = st.one_of(st.sampled_from([Fraction(0), Fraction(1)]),
                    st.fractions(min_value=-3, max_value=3, max_denominator=4))
small_int = st.integers(-3, 3).map(Fraction)


@st.composite
def mat(draw, r, c, elem=small_q):
    a = np.empty((r, c), dtype=object)
    for idx in np.ndindex(r, c):
        a[idx] = draw(elem)
    return a


def F(a):
    """Object array -> nested lists of Fractions (ints from structural zeros included)."""
    return [[Fraction(x) for x in row] for row in np.asarray(a, dtype=object)]


def lmm(X, Y):
    """Plain-loop matrix product of nested Fraction lists / object arrays."""
    X, Y = F(X), F(Y)
    return [[sum((X[i][k] * Y[k][j] for k in range(len(Y))), Fraction(0)) for j in range(len(Y[0]))]
            for i in range(len(X))]


def ladd(X, Y):
    X, Y = F(X), F(Y)
    return [[a + b for a, b in zip(r, s)] for r, s in zip(X, Y)]


def ltr(X):
    X = F(X)
    return [list(r) for r in zip(*X)]


# ----------------------------------------------------------------------------- BaseConv

@st.composite
def baseconv_case(draw):
    T, C = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    arrays = {"W_in": draw(mat(C, C)), "b_in": draw(mat(T, C)), "h": draw(mat(T, C)),
              "b_conv": draw(mat(T, C)), "W_gate": draw(mat(C, C)), "b_gate": draw(mat(T, C)),
              "W_out": draw(mat(C, C)), "b_out": draw(mat(T, C))}
    causal, residual = draw(st.booleans()), draw(st.booleans())
    return BaseConv(**arrays, causal=causal, residual=residual), draw(mat(T, C))


def baseconv_eq19(L, u):
    """y = ((u W_gate + b_gate) . (h * (u W_in + b_in) + b_conv)) W_out + b_out, loop by loop."""
    u = F(u)
    T, C = len(u), len(u[0])
    W_in, b_in, h, b_conv = F(L.W_in), F(L.b_in), F(L.h), F(L.b_conv)
    W_gate, b_gate, W_out, b_out = F(L.W_gate), F(L.b_gate), F(L.W_out), F(L.b_out)
    v = [[sum(u[t][a] * W_in[a][c] for a in range(C)) + b_in[t][c] for c in range(C)] for t in range(T)]
    z = [[Fraction(0)] * C for _ in range(T)]
    for t in range(T):
        for c in range(C):
            acc = Fraction(0)
            for s in range(T):
                if L.causal:
                    if s <= t:
                        acc += h[s][c] * v[t - s][c]
                else:
                    acc += h[s][c] * v[(t - s) % T][c]
            z[t][c] = acc + b_conv[t][c]
    g = [[sum(u[t][a] * W_gate[a][c] for a in range(C)) + b_gate[t][c] for c in range(C)] for t in range(T)]
    p = [[g[t][c] * z[t][c] for c in range(C)] for t in range(T)]
    y = [[sum(p[t][a] * W_out[a][c] for a in range(C)) + b_out[t][c] for c in range(C)] for t in range(T)]
    if L.residual:
        y = [[y[t][c] + u[t][c] for c in range(C)] for t in range(T)]
    return y


@given(case=baseconv_case())
def test_baseconv_float_and_torch_forward_match_exact_on_dyadics(case):
    L, u = case
    # round everything to multiples of 1/4 so float64 is exact on these sizes
    q = lambda a: np.vectorize(lambda z: Fraction(round(4 * Fraction(z)), 4), otypes=[object])(a)  # noqa: E731
    L = L.map(q)
    u = q(u)
    want = np.array(L.forward(u), dtype=float)
    Lf = L.map(lambda a: np.array(a, dtype=np.float64))
    uf = np.array(u, dtype=np.float64)
    np.testing.assert_array_equal(Lf.forward(uf), want)
    np.testing.assert_array_equal(Lf.forward(np.stack([uf, uf]))[1], want)  # batched
    Lt = L.map(lambda a: torch.tensor(np.array(a, dtype=np.float64)))
    np.testing.assert_array_equal(Lt.forward(torch.from_numpy(uf)).numpy(), want)


def test_baseconv_zeros_shape_flops_config():
    L = BaseConv.zeros(4, 3, causal=True, residual=True)
    assert L.shape == (4, 3)
    assert L.config() == {"causal": True, "residual": True}
    assert L.W_in.shape == (3, 3) and L.h.shape == (4, 3) and L.W_in.dtype == object
    u = np.empty((4, 3), dtype=object)
    u.fill(Fraction(2))
    assert F(L.forward(u)) == F(u)  # all-zero weights + residual: identity
    assert L.flops() == 3 * 2 * 4 * 9 + 4 * 5 * 3 + 6 * 12
    assert BaseConv.zeros(4, 3).flops() == 3 * 2 * 4 * 9 + 2 * 16 * 3 + 6 * 12


# ----------------------------------------------------------------------------- LSA

@st.composite
def lsa_case(draw, elem=small_q):
    m, n = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    heads = [LSAHead(draw(mat(n, n, elem)), draw(mat(n, n, elem)), draw(mat(n, n, elem)))
             for _ in range(draw(st.integers(1, 3)))]
    return LSA(heads, residual=draw(st.booleans())), draw(mat(m, n, elem))


def lsa_formula(L, H):
    out = None
    for hd in L.heads:
        term = lmm(lmm(lmm(H, hd.W3), ltr(lmm(H, hd.W1))), lmm(H, hd.W2))
        out = term if out is None else ladd(out, term)
    return ladd(H, out) if L.residual else out


# ----------------------------------------------------------------------------- token LSA

def token_lsa_formula(L, E):
    """seed 004 eq. (2)-(3), one token at a time: e_i + sum_k sum_{j in keys} (e_j^T Q_k e_i) P_k e_j."""
    E = F(E)
    T, m = len(E), len(E[0])
    keys = range(T - 1) if L.exclude_last else range(T)
    out = []
    for i in range(T):
        ei = E[i]
        delta = [Fraction(0)] * m
        for hd in L.heads:
            P, Q = F(hd.P), F(hd.Q)
            Qei = [sum(Q[a][b] * ei[b] for b in range(m)) for a in range(m)]
            for j in keys:
                ej = E[j]
                coef = sum(ej[a] * Qei[a] for a in range(m))
                Pej = [sum(P[a][b] * ej[b] for b in range(m)) for a in range(m)]
                delta = [delta[a] + coef * Pej[a] for a in range(m)]
        out.append([ei[a] + delta[a] for a in range(m)] if L.residual else delta)
    return out


@st.composite
def token_case(draw, exclude_last=None):
    T, m = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    if exclude_last and T == 1:
        T = 2
    heads = [TokenLSAHead(draw(mat(m, m, small_int)), draw(mat(m, m, small_int)))
             for _ in range(draw(st.integers(1, 2)))]
    ex = draw(st.booleans()) if exclude_last is None else exclude_last
    return TokenLSA(heads, exclude_last=ex, residual=draw(st.booleans())), draw(mat(T, m, small_int))


@given(case=token_case(exclude_last=False))
def test_token_lsa_all_keys_equals_hagiwara_lsa(case):
    # W1 = I, W2 = P^T, W3 = Q^T (so W3 W1^T = Q^T), head by head, same residual
    L, E = case
    m = E.shape[1]
    eye = np.array([[Fraction(int(i == j)) for j in range(m)] for i in range(m)], dtype=object)
    hag = LSA([LSAHead(eye.copy(), hd.P.T.copy(), hd.Q.T.copy()) for hd in L.heads], residual=L.residual)
    assert F(L.forward(E)) == F(hag.forward(E))


@given(case=token_case(exclude_last=True), data=st.data())
def test_token_lsa_query_token_is_not_a_key(case, data):
    L, E = case
    T, m = E.shape
    E2 = E.copy()
    for a in range(m):
        E2[T - 1, a] = data.draw(small_int)
    out1, out2 = F(L.forward(E)), F(L.forward(E2))
    # the other tokens' updates do not see the query token ...
    assert out1[:-1] == out2[:-1]
    # ... but the query token's own update is e + e Q^T G_ctx P^T with the context Gram matrix
    ctx = E[:-1]
    G = lmm(ltr(ctx), ctx)
    for Ex, out in ((E, out1), (E2, out2)):
        e = [F(Ex)[-1]]
        delta = None
        for hd in L.heads:
            t = lmm(lmm(lmm(e, ltr(hd.Q)), G), ltr(hd.P))
            delta = t if delta is None else ladd(delta, t)
        assert out[-1] == (ladd(e, delta)[0] if L.residual else delta[0])


def test_token_lsa_exclude_last_differs_from_all_keys():
    one = np.array([[Fraction(1), 0], [0, Fraction(1)]], dtype=object)
    E = np.array([[Fraction(1), Fraction(2)], [Fraction(3), Fraction(-1)]], dtype=object)
    a = TokenLSA([TokenLSAHead(one, one)], exclude_last=True).forward(E)
    b = TokenLSA([TokenLSAHead(one, one)], exclude_last=False).forward(E)
    assert F(a) != F(b)
    # with only token 0 as key: G = e0 e0^T, e_i + e_i G
    assert F(a) == [[1 + 5 * 1, 2 + 5 * 2], [3 + 1 * 1, -1 + 1 * 2]]


# ----------------------------------------------------------------------------- ELSA

@st.composite
def elsa_case(draw, zero_bias=False):
    m, n = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    zb = lambda: ops.zeros_like_object((m, n))  # noqa: E731
    stages = []
    for _ in range(draw(st.integers(1, 2))):
        heads = []
        for _ in range(draw(st.integers(1, 2))):
            ws = [draw(mat(n, n)) for _ in range(3)]
            bs = [zb() if zero_bias else draw(mat(m, n)) for _ in range(3)]
            heads.append(ELSAHead(ws[0], bs[0], ws[1], bs[1], ws[2], bs[2]))
        stages.append(heads)
    return ELSA(stages, residual=draw(st.booleans())), draw(mat(m, n))


def elsa_formula(L, H):
    P = F(H)
    for stage in L.stages:
        acc = None
        for hd in stage:
            K = ladd(lmm(P, hd.W1), hd.B1)
            V = ladd(lmm(P, hd.W2), hd.B2)
            Q = ladd(lmm(P, hd.W3), hd.B3)
            t = lmm(lmm(Q, ltr(K)), V)
            acc = t if acc is None else ladd(acc, t)
        P = acc
    return ladd(H, P) if L.residual else P


@given(case=elsa_case(zero_bias=True))
def test_elsa_with_zero_biases_reduces_to_lsa(case):
    L, H = case
    stage = L.stages[0]
    one_stage = ELSA([stage], residual=L.residual)
    lsa = LSA([LSAHead(hd.W1, hd.W2, hd.W3) for hd in stage], residual=L.residual)
    assert F(one_stage.forward(H)) == F(lsa.forward(H))


def test_elsa_bias_alone_outputs_a_constant():
    # seed 001: ELSA can output any constant matrix (W = 0, B1 = B2 = [1], B3 = C)
    z = ops.zeros_like_object((1, 1))
    one = np.array([[Fraction(1)]], dtype=object)
    C = np.array([[Fraction(7, 3)]], dtype=object)
    L = ELSA([[ELSAHead(z, one, z, one, z, C)]], residual=False)
    for h in (Fraction(0), Fraction(5)):
        assert F(L.forward(np.array([[h]], dtype=object))) == [[Fraction(7, 3)]]


# ----------------------------------------------------------------------------- every kind against its formula

@pytest.mark.parametrize("cases,formula", [
    pytest.param(baseconv_case(), baseconv_eq19, id="baseconv-eq19"),
    pytest.param(lsa_case(), lsa_formula, id="lsa-sum-over-heads"),
    pytest.param(token_case(), token_lsa_formula, id="token-lsa-seed004"),
    pytest.param(elsa_case(), elsa_formula, id="elsa-eq16-stagewise"),
])
@given(data=st.data())
def test_forward_equals_the_papers_formula(cases, formula, data):
    L, X = data.draw(cases, label="layer, input")
    assert F(L.forward(X)) == formula(L, X)


# ----------------------------------------------------------------------------- arrays / map / layer_from_arrays

@st.composite
def any_layer(draw):
    which = draw(st.sampled_from(["baseconv", "lsa", "token_lsa", "elsa"]))
    if which == "baseconv":
        return draw(baseconv_case())
    if which == "lsa":
        return draw(lsa_case())
    if which == "token_lsa":
        return draw(token_case())
    return draw(elsa_case())


def same_arrays(a, b):
    A, B = a.arrays(), b.arrays()
    return list(A) == list(B) and all(F(A[k]) == F(B[k]) for k in A)


@given(case=any_layer())
def test_layer_from_arrays_round_trip(case):
    L, x = case
    back = layer_from_arrays(L.kind, L.config(), {k: v.copy() for k, v in L.arrays().items()})
    assert type(back) is type(L) and back.config() == L.config()
    assert same_arrays(back, L)
    assert F(back.forward(x)) == F(L.forward(x))


@given(case=any_layer())
def test_map_applies_to_every_array_and_keeps_config(case):
    L, x = case
    doubled = L.map(lambda a: a * 2)
    assert doubled.config() == L.config() and type(doubled) is type(L)
    for k, a in L.arrays().items():
        assert F(doubled.arrays()[k]) == F(a * 2)
    # map to float and back to exact (dyadic values survive) is the identity
    q = L.map(lambda a: np.vectorize(lambda z: Fraction(round(8 * Fraction(z)), 8), otypes=[object])(a))
    back = q.map(lambda a: np.array(a, dtype=np.float64)).map(
        lambda a: np.vectorize(Fraction, otypes=[object])(a))
    assert same_arrays(back, q)
    assert L.arrays() is not doubled.arrays()
    assert all(L.arrays()[k] is not doubled.arrays()[k] for k in L.arrays())


def test_layer_types_and_unknown_kind():
    assert set(LAYER_TYPES) == {"baseconv", "lsa", "token_lsa", "elsa"}
    assert all(LAYER_TYPES[k].kind == k for k in LAYER_TYPES)
    with pytest.raises(ValueError, match="unknown layer kind"):
        layer_from_arrays("rnn", {}, {})


@given(case=any_layer(), data=st.data())
def test_forward_rows_equals_rows_of_forward(case, data):
    """``forward_rows`` (BaseConv: gate and product on the asked rows only) gives exactly the
    asked rows and columns of ``forward``, for every layer kind."""
    L, x = case
    T, C = np.asarray(L.forward(x)).shape
    rows = data.draw(st.lists(st.integers(0, T - 1), min_size=1, max_size=T, unique=True))
    cols = data.draw(st.one_of(st.none(), st.lists(st.integers(0, C - 1), min_size=1, max_size=C, unique=True)))
    want = np.asarray(L.forward(x), dtype=object)[rows]
    if cols is not None:
        want = want[:, cols]
    assert F(L.forward_rows(x, rows, cols)) == F(want)
