"""Ridge GD with LSA (seed 001 Sec. 3.4, eq. (37)-(55)) and ELSA (Sec. 3.5, eq. (56)-(86)).

Both compute ``w <- w - eta (X^T X w - X^T y + lam w)`` (seed 001 eq. (35)-(36)).  The
exact runs feed Fraction problems through body^k + output module and compare with k exact
(ridge) GD steps.
"""
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from constructions.base import DepthError
from constructions.gd_attention import gd_elsa, gd_lsa
from constructions.catalogue import entries, gd_architectures
from verify.prover.proof import prove, run_checked

from tests.constructions.gd_runs import assert_runs_k_gd_steps, draw_run_sizes
from tests.strategies import ls_problem_st
from tests.support import F

BUILDERS = [gd_lsa, gd_elsa]
SQUARES = [Fraction(1, 16), Fraction(1, 4), Fraction(1, 9), Fraction(4, 25), Fraction(1)]


# ----------------------------------------------------------------------------- proofs

@pytest.mark.parametrize("n,d", [(1, 1), (3, 2), (4, 4)])
def test_ridge_proofs(n, d):
    for con in (gd_lsa(n, d, eta="1/16", lam="1/4"), gd_elsa(n, d, eta="1/4", lam="1/3"),
                gd_lsa(n, d, eta="4/9", lam="9/4")):
        assert prove(con).ok
        assert prove(con, symbolic=False).ok


# ----------------------------------------------------------------------------- exact runs

@pytest.mark.parametrize("build", BUILDERS)
@given(data=st.data())
def test_exact_stack_equals_exact_ridge_gd(build, data):
    n, d, k = draw_run_sizes(data)
    eta = data.draw(st.sampled_from(SQUARES), label="eta")
    if build is gd_lsa:
        lam = data.draw(st.sampled_from([Fraction(0)] + SQUARES[:3]), label="lam")
    else:
        lam = data.draw(st.fractions(min_value=0, max_value=2, max_denominator=7), label="lam")
    assert_runs_k_gd_steps(build(n, d, eta=eta, lam=lam), data.draw(ls_problem_st(n, d)), k, eta, lam)


def test_lsa_lam_zero_is_plain_least_squares():
    con = gd_lsa(3, 2)
    v = {"A": np.array([[1, 2], [0, 1], [3, -1]], dtype=object), "b": np.array([1, 2, 3], dtype=object),
         "x": np.array([0, 0], dtype=object), "q": np.array([1, -1], dtype=object)}
    S, vk = run_checked(con, v, 1)
    # x1 = eta A^T b with eta = 1/16: A^T b = (1 + 0 + 9, 2 + 2 - 3) = (10, 1)
    assert F(vk["x"]) == [Fraction(10, 16), Fraction(1, 16)]
    assert Fraction(np.asarray(con.readout(S)["prediction"]).item()) == Fraction(9, 16)


#: one problem (N = D = 2) for the state layouts below
V22 = {"A": np.array([[1, 2], [3, 4]], dtype=object), "b": np.array([5, 6], dtype=object),
       "x": np.array([7, 8], dtype=object), "q": np.array([9, 10], dtype=object)}
HALF, SIXTH, THIRD = Fraction(1, 2), Fraction(1, 6), Fraction(1, 3)


@pytest.mark.parametrize("build,lam,shape,want", [
    # eq. (37): (D + 1) x (2N + D + 3), with sqrt(eta) = 1/2 and sqrt(eta lam) = 1/6
    pytest.param(gd_lsa, "1/9", (3, 9), [[HALF * 1, HALF * 3, 0, 0, 0, SIXTH, 0, 9, 7],
                                         [HALF * 2, HALF * 4, 0, 0, 0, 0, SIXTH, 10, 8],
                                         [0, 0, HALF * 5, HALF * 6, 1, 0, 0, 0, 0]], id="lsa-eq37"),
    # eq. (56): D x (2N + 2D + 3)
    pytest.param(gd_elsa, "1/3", (2, 11), [[1, 3, 0, 0, THIRD, 0, HALF, 0, 9, 0, 7],
                                           [2, 4, 5, 6, 0, THIRD, 0, HALF, 10, 0, 8]], id="elsa-eq56"),
])
def test_state_is_the_papers_layout(build, lam, shape, want):
    H = build(2, 2, eta="1/4", lam=lam).state(V22)
    assert H.shape == shape
    assert [[Fraction(z) for z in row] for row in H] == want


# ----------------------------------------------------------------------------- depth, registry

@pytest.mark.parametrize("build", BUILDERS)
def test_depth(build):
    con = build(4, 2)
    assert [con.depth(k) for k in range(4)] == [1, 2, 3, 4]
    assert con.steps_for_depth(100) == 99 and con.steps_for_depth(1) == 0
    with pytest.raises(DepthError, match="nearest valid: 1"):
        con.steps_for_depth(0)
    assert (len(con.prologue), len(con.body), len(con.epilogue)) == (0, 1, 1)


@pytest.mark.parametrize("arch", ["lsa", "elsa"])
def test_registry_entry_matches_construction(arch):
    e = gd_architectures()[arch]
    assert entries()[e.name] is e and "gd" in e.roles
    n, d = 5, 3
    con = e.build(n, d)
    assert con.name == e.name and con.reference == e.paper
    assert e.depth == "1 + k"
    shape = (d + 1, 2 * n + d + 3) if arch == "lsa" else (d, 2 * n + 2 * d + 3)
    assert con.layout.shape == shape


def test_heads_as_documented():
    lsa, elsa = gd_lsa(3, 2), gd_elsa(3, 2)
    assert len(lsa.body[0].heads) == 3 and lsa.body[0].residual
    assert [len(s) for s in elsa.body[0].stages] == [4, 1] and elsa.body[0].residual


# ----------------------------------------------------------------------------- parameters

@pytest.mark.parametrize("build", BUILDERS)
def test_non_square_eta_is_rejected(build):
    with pytest.raises(ValueError, match="no rational square root") as e:
        build(3, 2, eta="1/10")
    assert "eta" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ValueError, match=">= 0"):
        build(3, 2, eta="-1/16")


def test_lsa_non_square_lam_is_rejected_elsa_accepts_it():
    with pytest.raises(ValueError, match="lam = 1/2 has no rational square root"):
        gd_lsa(3, 2, lam="1/2")
    assert gd_elsa(3, 2, lam="1/2").params["lam"] == Fraction(1, 2)


@pytest.mark.parametrize("build", BUILDERS)
def test_parameters_and_bad_dimensions(build):
    con = build(2, 1, eta="1/9")
    assert con.params["sqrt_eta"] == Fraction(1, 3)
    assert build(2, 1).params["sqrt_eta"] == Fraction(1, 4)  # default eta 1/16
    with pytest.raises(ValueError, match="n >= 1 and d >= 1"):
        build(0, 1)
    with pytest.raises(ValueError, match="n >= 1 and d >= 1"):
        build(1, 0)
