"""BaseConv gradient descent, seed 000 App. D.3.1: gd-baseconv (non-causal, 3 layers per step)
and gd-baseconv-causal (eq. (47), prologue 2 + 1 layer per step + epilogue 1).

The exact runs below feed Fraction problems through prologue + body^k + epilogue with
``Layer.forward`` on object arrays and compare with k exact GD steps
``x <- x - eta A^T (A x - b)`` (seed 000 eq. (3)).
"""
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from constructions.base import DepthError
from constructions.gd_baseconv import gd_baseconv, gd_baseconv_causal
from constructions.lsq import gd_step
from constructions.catalogue import entries, gd_architectures
from verify.prover.proof import prove

from tests.constructions.gd_runs import assert_runs_k_gd_steps, draw_run_sizes
from tests.strategies import ls_problem_st

BUILDERS = [gd_baseconv, gd_baseconv_causal]


# ----------------------------------------------------------------------------- proofs

@pytest.mark.parametrize("build", BUILDERS)
@pytest.mark.parametrize("eta", ["1/10", "3/7", "2"])
def test_proof_ok_for_non_dyadic_eta_without_symbols(build, eta):
    res = prove(build(3, 2, eta=eta), symbolic=False)
    assert res.ok and res.symbolic_params == []


# ----------------------------------------------------------------------------- exact runs

@pytest.mark.parametrize("build", BUILDERS)
@given(data=st.data())
def test_exact_stack_equals_exact_gd(build, data):
    n, d, k = draw_run_sizes(data)
    eta = data.draw(st.fractions(min_value=Fraction(1, 12), max_value=1, max_denominator=12), label="eta")
    con = build(n, d, eta=eta)
    assert_runs_k_gd_steps(con, data.draw(ls_problem_st(n, d)), k, eta)  # the library's exact GD, and by hand
    assert len(con.layers(k)) == con.depth(k)


def test_causal_x_lives_at_the_last_token_only():
    con = gd_baseconv_causal(3, 2)
    v = {"A": np.array([[1, 2], [3, 4], [5, 6]], dtype=object), "b": np.array([1, 0, -1], dtype=object),
         "x": np.array([Fraction(1, 2), 2], dtype=object), "q": np.array([1, 1], dtype=object)}
    S = con.state(v)
    xs = con.layout.cols("x")
    assert all(S[t, c] == 0 for t in range(3) for c in xs)
    assert [S[3, c] for c in xs] == [Fraction(1, 2), 2]
    # the full sums sit at the last token: sum_i b_i a_i and flt(sum_i a_i a_i^T)
    assert [S[3, c] for c in con.layout.cols("Sba")] == [1 - 5, 2 - 6]
    assert [S[3, c] for c in con.layout.cols("Saa")] == [35, 44, 44, 56]


# ----------------------------------------------------------------------------- depth

def test_causal_prefix_sums_memo_follows_the_entries_of_A_and_b():
    # state(v), state(step(v)) and final_state(v) share A and b: the O(N^2 D^2) prefix sums are
    # formed once (the same objects come back); a problem with one entry changed gets its own
    con = gd_baseconv_causal(3, 2)
    lay = con.layout
    Q = lambda *xs: np.array([Fraction(x) for x in xs], dtype=object)  # noqa: E731
    A = np.array([Q(1, 2), Q(3, 4), Q(5, 6)], dtype=object)
    v = {"A": A, "b": Q(1, 0, 2), "x": Q(1, 1), "q": Q(0, 1)}
    S1 = con.state(v)
    S2 = con.state(gd_step(v, con.params["eta"]))
    saa = (slice(0, 4), slice(*lay["Saa"].cols))
    assert all(a is b for a, b in zip(S1[saa].ravel(), S2[saa].ravel()))
    A2 = A.copy()
    A2[2, 1] = Fraction(7)
    S3 = con.state(dict(v, A=A2))
    assert S3[3, lay["Saa"].cols[0] + 3] == 2 * 2 + 4 * 4 + 7 * 7  # (sum_i a_i a_i^T)[1, 1]
    assert S1[3, lay["Saa"].cols[0] + 3] == 2 * 2 + 4 * 4 + 6 * 6
    assert con.state(v)[3, lay["Saa"].cols[0] + 3] == 2 * 2 + 4 * 4 + 6 * 6  # not the last problem's


def test_depth_formulas():
    a, c = gd_baseconv(4, 2), gd_baseconv_causal(4, 2)
    assert [a.depth(k) for k in range(4)] == [1, 4, 7, 10]
    assert [c.depth(k) for k in range(4)] == [3, 4, 5, 6]
    assert a.summary()["depth_formula"] == "1 + 3*k" and c.summary()["depth_formula"] == "3 + 1*k"
    assert (len(a.prologue), len(a.body), len(a.epilogue)) == (0, 3, 1)
    assert (len(c.prologue), len(c.body), len(c.epilogue)) == (2, 1, 1)


def test_steps_for_depth_baseconv():
    con = gd_baseconv()
    assert con.steps_for_depth(100) == 33
    assert con.steps_for_depth(1) == 0
    with pytest.raises(DepthError) as e:
        con.steps_for_depth(99)
    msg = str(e.value)
    assert "97" in msg and "100" in msg and "99" in msg and "\n" not in msg
    with pytest.raises(DepthError, match="nearest valid: 97 or 100"):
        con.steps_for_depth(98)
    with pytest.raises(DepthError, match="nearest valid: 1 or 4"):
        con.steps_for_depth(2)
    assert isinstance(DepthError("x"), ValueError)


def test_steps_for_depth_causal():
    con = gd_baseconv_causal()
    assert con.steps_for_depth(3) == 0 and con.steps_for_depth(100) == 97
    with pytest.raises(DepthError, match="nearest valid: 3$"):
        con.steps_for_depth(2)


@pytest.mark.parametrize("arch", ["baseconv", "baseconv-causal"])
def test_registry_entry_matches_construction(arch):
    e = gd_architectures()[arch]
    assert entries()[e.name] is e and e.build in BUILDERS and "gd" in e.roles
    n, d = 5, 3
    con = e.build(n, d)
    assert con.name == e.name and con.reference == e.paper
    b_s, p_s = e.depth.split(" + ")
    base, per = int(b_s), int(p_s[:-1] or 1)
    assert all(con.depth(k) == base + per * k for k in range(5))
    channels = {"baseconv": 5 * d + 2, "baseconv-causal": 2 * d * d + 5 * d + 2}[arch]
    assert con.layout.shape == (n + 1, channels) and con.state_size == (n + 1) * channels


# ----------------------------------------------------------------------------- parameters

@pytest.mark.parametrize("build", BUILDERS)
def test_bad_dimensions(build):
    with pytest.raises(ValueError, match="n >= 1 and d >= 1"):
        build(0, 2)
    with pytest.raises(ValueError, match="n >= 1 and d >= 1"):
        build(2, 0)


@pytest.mark.parametrize("build", BUILDERS)
def test_eta_is_exact(build):
    assert build(2, 1).params["eta"] == Fraction(1, 16)
    assert build(2, 1, eta="1/10").params["eta"] == Fraction(1, 10)
    assert build(2, 1, eta=0.25).params["eta"] == Fraction(1, 4)
    assert build(2, 1, eta=Fraction(2, 3)).params["eta"] == Fraction(2, 3)
    with pytest.raises(ValueError, match="not an exact rational"):
        build(2, 1, eta="abc")


@pytest.mark.parametrize("build", BUILDERS)
def test_default_weights_are_dyadic(build):
    # the default step 1/16 (dyadic) gives weights that float32 holds exactly
    con = build(4, 2)
    for L in con.layers(1):
        for a in L.arrays().values():
            for z in a.flat:
                den = Fraction(z).denominator
                assert den & (den - 1) == 0
