"""The reference's exact parts (issue 46 item 1): ``lstsq_solution`` by python-flint's ``fmpq_mat``
equals Gaussian elimination on Fractions, and ``_normal_equations`` (A^T A, A^T b formed exactly
and rounded once) equals the exact products rounded once, for both of its paths (numpy's loop
over Python ints below D = 16, flint from there) and, for float32/float64 data at 50 digits, the
mpfr sums of products the reference used before (exact there)."""
from __future__ import annotations

from fractions import Fraction

import gmpy2
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from numerics import reference as R
from numerics.problems import sample_ls


def fraction_solve(A: np.ndarray, b: np.ndarray, lam=Fraction(0)) -> list[float]:
    """(A^T A + lam I) x = A^T b on Fractions, by Gauss-Jordan elimination: the exact solution."""
    N, D = A.shape
    Aq = [[Fraction(float(v)) for v in row] for row in A]
    bq = [Fraction(float(v)) for v in b]
    M = [[sum(Aq[k][i] * Aq[k][j] for k in range(N)) + (lam if i == j else 0) for j in range(D)]
         + [sum(Aq[k][i] * bq[k] for k in range(N))] for i in range(D)]
    for c in range(D):
        p = next(r for r in range(c, D) if M[r][c] != 0)
        M[c], M[p] = M[p], M[c]
        M[c] = [v / M[c][c] for v in M[c]]
        for r in range(D):
            if r != c and M[r][c] != 0:
                f = M[r][c]
                M[r] = [x - f * y for x, y in zip(M[r], M[c])]
    return [float(M[i][D]) for i in range(D)]  # float(Fraction): correctly rounded


@pytest.mark.parametrize("n,d,lam", [(12, 3, 0), (9, 4, Fraction(1, 3)), (20, 5, 0.25), (24, 16, 0), (20, 17, Fraction(1, 7))])
def test_lstsq_solution_is_the_exact_solution(n, d, lam):
    P = sample_ls(3, n, d, kappa=5.0, seed=7)
    A, b = P.A.astype(np.float32).astype(np.float64), P.b
    got = R.lstsq_solution(A, b, lam=lam)
    for p in range(3):
        assert got[p].tolist() == fraction_solve(A[p], b[p], Fraction(lam))


def test_lstsq_solution_singular_is_refused():
    A = np.ones((4, 2))
    with pytest.raises(np.linalg.LinAlgError, match="singular"):
        R.lstsq_solution(A, np.ones(4))


def exact_rounded(A: np.ndarray, b: np.ndarray, prec: int):
    """A^T A and A^T b from the Fractions of the inputs, each rounded once to ``prec`` bits."""
    B, N, D = A.shape
    with gmpy2.context(precision=prec):
        r = lambda q: gmpy2.mpfr(gmpy2.mpq(q.numerator, q.denominator))  # noqa: E731
        G = [[[r(sum(Fraction(float(A[p, k, i])) * Fraction(float(A[p, k, j])) for k in range(N)))
               for j in range(D)] for i in range(D)] for p in range(B)]
        h = [[r(sum(Fraction(float(A[p, k, i])) * Fraction(float(b[p, k])) for k in range(N))) for i in range(D)]
             for p in range(B)]
    return G, h


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 3), st.integers(1, 4), st.sampled_from([3, 17]), st.integers(0, 2**31),
       st.sampled_from([np.float16, np.float32, np.float64]), st.sampled_from([20, 50]))
def test_normal_equations_are_the_exact_products_rounded_once(B, extra, d, seed, dtype, digits):
    n = d + extra
    rng = np.random.default_rng(seed)
    # entries over a wide range of exponents (the products then need more than the working precision)
    e = 6 if dtype is np.float16 else 40
    A = (rng.standard_normal((B, n, d)) * 2.0 ** rng.integers(-e, e, (B, n, d))).astype(dtype).astype(np.float64)
    b = (rng.standard_normal((B, n)) * 2.0 ** rng.integers(-e, e, (B, n))).astype(dtype).astype(np.float64)
    A[0, 0, 0] = 0.0
    prec = R.working_precision(digits)
    with gmpy2.context(precision=prec):
        G, h = R._normal_equations(A, b, R._to_mpfr_current(A), R._to_mpfr_current(b)[:, :, None])
    Ge, he = exact_rounded(A, b, prec)
    assert G.shape == (B, d, d) and h.shape == (B, d, 1)
    assert [[[v for v in row] for row in Gp] for Gp in G.tolist()] == Ge
    assert [[row[0] for row in hp] for hp in h.tolist()] == he


@pytest.mark.parametrize("n,d,dtype", [(20, 5, np.float32), (40, 16, np.float64), (64, 17, np.float32)])
def test_normal_equations_equal_the_mpfr_sums_of_float_data(n, d, dtype):
    """The runs' data (float32/float64, 50 digits): the mpfr sums of products were exact, so the
    reference's M and c are the same mpfr numbers as before."""
    P = sample_ls(4, n, d, kappa=5.0, seed=1)
    A, b = P.A.astype(dtype).astype(np.float64), P.b.astype(dtype).astype(np.float64)
    with gmpy2.context(precision=R.working_precision(50)):
        Am, bm = R._to_mpfr_current(A), R._to_mpfr_current(b)[:, :, None]
        At = Am.transpose(0, 2, 1)
        G, h = R._normal_equations(A, b, Am, bm)
        assert np.array_equal(G, np.matmul(At, Am)) and np.array_equal(h, np.matmul(At, bm))
