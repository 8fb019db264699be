"""Seed 001 catalogue entries: Property 1 (mask and move), the LSA product eq. (10)-(15),
ELSA Properties 2-4 (constructions/catalogue/seed001_lsa_elsa.py)."""
import io
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from constructions.catalogue import entries
from constructions.catalogue.seed001_lsa_elsa import (V_J, W_K, elsa_constant, elsa_identity, elsa_product,
                                                      lsa_product, mask_move_identity, mskmov, mskmov_weights)
from constructions.weights import mask_move
from verify import construct
from verify.prover.proof import check, prove

from tests.support import perturbed_copies

NAMES = ["s001-mask-move", "s001-elsa-constant", "s001-elsa-identity", "s001-elsa-product", "s001-lsa-product"]
q_st = st.fractions(min_value=-5, max_value=5, max_denominator=6)
FEW = settings(max_examples=8, deadline=None)


def rational_matrix(draw, m, n):
    return np.array([[draw(q_st) for _ in range(n)] for _ in range(m)], dtype=object)


def F(a):
    return [Fraction(z) for z in np.asarray(a, dtype=object).flat]


# ----------------------------------------------------------------------------- registry + CLI

def test_registered():
    assert set(NAMES) <= set(entries())


def test_cli_bad_indices_is_usage_error():
    # destination block would leave the matrix: bad input (exit 2), not a failed proof
    assert construct.main(["s001-mask-move", "--set", "dst_row=4"], out=io.StringIO()) == 2


# ----------------------------------------------------------------------------- Property 1

@st.composite
def mskmov_indices(draw):
    m, n = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    i = draw(st.integers(1, m))
    j = draw(st.integers(i, m))
    k = draw(st.integers(1, n))
    l = draw(st.integers(k, n))
    a = draw(st.integers(1 - i, m - j))
    b = draw(st.integers(1 - k, n - l))
    return m, n, i, j, k, l, a, b


@FEW
@given(mskmov_indices())
def test_mask_move_proved_for_random_indices(idx):
    res = check(mask_move_identity(*idx))
    assert res.ok, res.failure and res.failure.describe()


@FEW
@given(st.data())
def test_mask_move_exact_rational(data):
    m, n, i, j, k, l, a, b = data.draw(mskmov_indices())
    A = rational_matrix(data.draw, m, n)
    W, V = mskmov_weights(m, n, i, j, k, l, a, b)
    P = W.dot(A).dot(V)
    assert F(P) == F(mskmov(A, i, j, k, l, a, b))
    # the moved block, read off the definition directly (1-based inclusive ranges)
    assert F(P[i - 1 + a:j + a, k - 1 + b:l + b]) == F(A[i - 1:j, k - 1:l])
    assert sum(1 for z in F(P) if z != 0) <= (j - i + 1) * (l - k + 1)


@FEW
@given(mskmov_indices())
def test_toolkit_mask_move_is_property_1(idx):
    """weights.mask_move(n, ...) returns (W_K^T, V_J) of the paper (square case)."""
    m, n, i, j, k, l, a, b = idx
    N = max(m, n)
    W1, W2 = mask_move(N, range(i - 1, j), range(i - 1 + a, j + a), range(k - 1, l), range(k - 1 + b, l + b))
    K = [(ip + a, ip) for ip in range(i, j + 1)]
    J = [(kp, kp + b) for kp in range(k, l + 1)]
    assert F(W1.T) == F(W_K(N, K)) and F(W2) == F(V_J(N, J))


def test_mask_move_eq7_example():
    """Eq. (7): K = {(1, i), ..., (kbar, j)}, J = {(k, n-jbar+1), ..., (l, n)}: a = -(i-1), b = n-l."""
    m, n, i, j, k, l = 5, 6, 3, 4, 2, 3
    W, V = mskmov_weights(m, n, i, j, k, l, -(i - 1), n - l)
    kbar, jbar = j - i + 1, l - k + 1
    assert F(W) == F(W_K(m, [(t + 1, i + t) for t in range(kbar)]))
    assert F(V) == F(V_J(n, [(k + t, n - jbar + 1 + t) for t in range(jbar)]))
    assert check(mask_move_identity(m, n, i, j, k, l, -(i - 1), n - l)).ok


@FEW
@given(mskmov_indices(), st.data())
def test_mask_move_perturbed_weight_rejected(idx, data):
    m, n, i, j, k, l, a, b = idx
    W, V = mskmov_weights(*idx)
    which = data.draw(st.sampled_from(["W", "V"]))
    M = (W if which == "W" else V).copy()
    r, c = data.draw(st.integers(0, M.shape[0] - 1)), data.draw(st.integers(0, M.shape[1] - 1))
    M[r, c] = M[r, c] + 1
    res = check(mask_move_identity(*idx, **{which: M}))
    assert not res.ok
    ce = res.failure.counterexample
    assert ce is not None and Fraction(ce.got) != Fraction(ce.expected)


# ----------------------------------------------------------------------------- one-layer constructions

def assert_all_perturbations_fail(con):
    count = 0
    for name, bad in perturbed_copies(con):
        res = prove(bad)
        assert not res.ok, f"perturbing {name} was not detected"
        assert res.failure.section == "epilogue" and res.failure.counterexample is not None, name
        count += 1
    assert count > 0


CASES = [(4, 2), (2, 4), (3, 3), (1, 1)]  # m > n, m < n, m = n


@pytest.mark.parametrize("m,n", CASES)
def test_elsa_constant_cases(m, n):
    con = elsa_constant(m, n)
    res = prove(con)
    assert res.ok and len(res.symbolic_params) == m * n  # proved for every constant C
    assert_all_perturbations_fail(con)


@pytest.mark.parametrize("m,n", CASES)
def test_elsa_identity_cases(m, n):
    con = elsa_identity(m, n)
    assert prove(con).ok
    assert_all_perturbations_fail(con)


@FEW
@given(st.integers(1, 5), st.integers(1, 5), st.data())
def test_elsa_constant_and_identity_exact(m, n, data):
    H = rational_matrix(data.draw, m, n)
    C = rational_matrix(data.draw, m, n)
    assert F(elsa_constant(m, n, C=C).epilogue[0].forward(H)) == F(C)
    assert F(elsa_identity(m, n).epilogue[0].forward(H)) == F(H)
    assert prove(elsa_identity(m, n)).ok and prove(elsa_constant(m, n, C=C)).ok


sizes3 = st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3))


@FEW
@given(sizes3, st.sampled_from([1, 2]), st.data())
def test_elsa_product_random(rst, form, data):
    r, s, t = rst
    con = elsa_product(r, s, t, form)
    assert prove(con).ok
    A, B = rational_matrix(data.draw, r, s), rational_matrix(data.draw, s, t)
    out = con.epilogue[0].forward(con.input_state({"A": A, "B": B}))
    c0 = r if form == 1 else s
    assert F(out[:r, c0:]) == F(A.dot(B))
    assert all(z == 0 for z in F(out[r:])) and all(z == 0 for z in F(out[:, :c0]))


@pytest.mark.parametrize("form", [1, 2])
def test_elsa_product_perturbed(form):
    con = elsa_product(2, 3, 2, form)
    assert con.layout.shape == ((5, 4) if form == 1 else (5, 5))  # (s+r) x (r+t) / (r+s) x (s+t)
    assert_all_perturbations_fail(con)


@FEW
@given(sizes3, st.data())
def test_lsa_product_random(rst, data):
    r, s, t = rst
    con = lsa_product(r, s, t)
    assert prove(con).ok
    A, B = rational_matrix(data.draw, r, s), rational_matrix(data.draw, s, t)
    H = con.input_state({"A": A, "B": B})
    assert H.shape == (r + s, 2 * s + t)
    assert F(H[r:, s + t:]) == F(np.eye(s, dtype=int).astype(object))  # the extra identity block
    out = con.epilogue[0].forward(H)
    assert F(out[:r, 2 * s:]) == F(A.dot(B)) and all(z == 0 for z in F(out[:, :2 * s]))


def test_lsa_product_perturbed_and_needs_identity_block():
    con = lsa_product(2, 2, 3)
    assert_all_perturbations_fail(con)
    # without the extra identity block (eq. (10)) the same weights do not give AB
    bad = lsa_product(2, 2, 3)
    bad.make_input = lambda v, e=con.make_input: _drop_identity(e(v), 2, 2, 3)
    res = prove(bad)
    assert not res.ok and res.failure.region == "AB"


def _drop_identity(H, r, s, t):
    H = H.copy()
    H[r:, s + t:] = 0
    return H


def test_catalogue_check_uses_prove():
    for name in NAMES:
        e = entries()[name]
        assert check(e.build(**e.sizes)).ok
