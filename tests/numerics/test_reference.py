"""Tests for numerics.reference (high-precision GD / ridge-GD references)."""

from fractions import Fraction

import gmpy2
import mpmath
import numpy as np
import pytest

from numerics.problems import optimal_step, sample_ls
from numerics.reference import (
    GUARD_BITS,
    from_mpfr_array,
    gd_reference,
    gd_reference_direct,
    lstsq_solution,
    stable_reference,
    to_mpfr_array,
    working_precision,
)

ETA = optimal_step(5.0)  # 1/13 rounded to float64


# ---------------------------------------------------------------- helpers


def mpf_to_fraction(x) -> Fraction:
    sign, man, exp, _ = x._mpf_
    v = Fraction(int(man)) * Fraction(2) ** int(exp)
    return -v if sign else v


def mpfr_to_fraction(x) -> Fraction:
    return Fraction(*x.as_integer_ratio())


def mpmath_gd(A, b, x0, eta, steps, lam=0, dps=60):
    """Literal mpmath GD/ridge loop on one problem; returns list of lists of Fractions."""
    with mpmath.workdps(dps):
        if isinstance(eta, Fraction):
            eta = mpmath.mpf(eta.numerator) / eta.denominator
        Am = mpmath.matrix(A.tolist())
        bm = mpmath.matrix(b.tolist())
        x = mpmath.matrix(x0.tolist())
        eta = mpmath.mpf(eta)
        lam = mpmath.mpf(lam)
        out = [[mpf_to_fraction(v) for v in x]]
        for _ in range(steps):
            x = x - eta * (Am.T * (Am * x - bm) + lam * x)
            out.append([mpf_to_fraction(v) for v in x])
    return out


def fraction_gd(A, b, x0, eta, steps, lam=Fraction(0)):
    """Exact rational GD; A, b, x0 nested lists of Fractions; returns list of iterates."""
    N, D = len(A), len(A[0])
    x = list(x0)
    out = [list(x)]
    for _ in range(steps):
        r = [sum(A[i][j] * x[j] for j in range(D)) - b[i] for i in range(N)]
        g = [sum(A[i][j] * r[i] for i in range(N)) + lam * x[j] for j in range(D)]
        x = [x[j] - eta * g[j] for j in range(D)]
        out.append(list(x))
    return out


def frac_to_float(q: Fraction) -> float:
    return q.numerator / q.denominator  # correctly rounded


def max_rel_diff(mp1, mp2):
    """max |mp1 - mp2| / max |mp2| per problem, evaluated exactly with Fractions."""
    worst = Fraction(0)
    steps, B, D = mp1.shape
    for p in range(B):
        scale = max(abs(mpfr_to_fraction(v)) for v in mp2[:, p].ravel())
        diff = max(abs(mpfr_to_fraction(a) - mpfr_to_fraction(c)) for a, c in zip(mp1[:, p].ravel(), mp2[:, p].ravel()))
        worst = max(worst, diff / scale)
    return worst


def dyadic_problem(seed, N=5, D=3):
    rng = np.random.default_rng(seed)
    A = rng.integers(-8, 9, size=(N, D)) / 8.0
    b = rng.integers(-16, 17, size=N) / 4.0
    x0 = rng.integers(-4, 5, size=D) / 2.0
    return A, b, x0


# ---------------------------------------------------------------- conversions


def test_working_precision():
    assert working_precision(50) == 167 + GUARD_BITS
    assert working_precision(1) == 53 + GUARD_BITS  # never below float64 + guard
    assert working_precision(60) >= 60 * 3.32
    with pytest.raises(ValueError, match="digits"):
        working_precision(0)


def test_to_mpfr_array_is_exact():
    rng = np.random.default_rng(0)
    vals = np.concatenate([
        rng.standard_normal(50),
        [0.1, 1 / 3, 5e-324, -5e-324, 2.0**-1060, 1.7976931348623157e308, -0.0, 0.0, 1e-300],
    ])
    m = to_mpfr_array(vals.reshape(-1, 1), 53)
    assert m.shape == (vals.size, 1) and m.dtype == object
    for v, y in zip(vals, m[:, 0]):
        assert isinstance(y, gmpy2.mpfr) and y.precision == 53
        assert y.as_integer_ratio() == float(v).as_integer_ratio()
        assert gmpy2.is_signed(y) == bool(np.signbit(v))
    # no decimal-string detour: mpfr of the float 0.1 is not mpfr("0.1")
    m200 = to_mpfr_array(np.array([0.1]), 200)
    with gmpy2.context(precision=200):
        assert m200[0] != gmpy2.mpfr("0.1")
        assert mpfr_to_fraction(m200[0]) == Fraction(0.1)
    # float32 inputs are exact too
    f32 = rng.standard_normal(20).astype(np.float32)
    m32 = to_mpfr_array(f32, 60)
    assert [mpfr_to_fraction(y) for y in m32] == [Fraction(float(v)) for v in f32]
    # object arrays with exact numbers
    mo = to_mpfr_array(np.array([Fraction(3, 8), 7, gmpy2.mpq(1, 4)], dtype=object), 80)
    assert [mpfr_to_fraction(y) for y in mo] == [Fraction(3, 8), Fraction(7), Fraction(1, 4)]


def test_from_mpfr_array_round_trip_and_correct_rounding():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 4))
    assert np.array_equal(from_mpfr_array(to_mpfr_array(x, 200)), x)
    with gmpy2.context(precision=300):
        one = gmpy2.mpfr(1)
        tie = one + gmpy2.mpfr(2) ** -53  # exact float64 tie -> even (1.0)
        above = tie + gmpy2.mpfr(2) ** -200  # just above the tie -> next float
        third = one / 3
        # float32: 1 + 2^-24 + 2^-60 rounds up in one step, but via float64 it would
        # first become the tie 1 + 2^-24 and then round to even (1.0)
        f32case = one + gmpy2.mpfr(2) ** -24 + gmpy2.mpfr(2) ** -60
    arr = np.array([tie, above, third, gmpy2.mpq(1, 3)], dtype=object)
    out = from_mpfr_array(arr)
    assert out.dtype == np.float64
    assert out[0] == 1.0
    assert out[1] == np.nextafter(1.0, 2.0)
    assert out[2] == 1 / 3 and out[3] == 1 / 3
    o32 = from_mpfr_array(np.array([f32case], dtype=object), np.float32)
    assert o32.dtype == np.float32 and o32[0] == np.nextafter(np.float32(1), np.float32(2))
    with pytest.raises(ValueError, match="dtype"):
        from_mpfr_array(arr, np.int64)


# ---------------------------------------------------------------- GD references


@pytest.mark.parametrize("lam", [0, 0.25])
def test_matches_mpmath_loop(lam):
    P = sample_ls(3, 6, 3, seed=7, x0="gaussian")
    steps = 25
    X, mp = gd_reference(P.A, P.b, P.x0, ETA, steps, lam=lam, return_mp=True)
    assert X.shape == (steps + 1, 3, 3) and X.dtype == np.float64
    assert mp.shape == X.shape and mp.dtype == object
    for p in range(3):
        ref = mpmath_gd(P.A[p], P.b[p], P.x0[p], ETA, steps, lam=lam)
        scale = max(abs(v) for it in ref for v in it)
        for k in range(steps + 1):
            for j in range(3):
                assert X[k, p, j] == frac_to_float(ref[k][j])
                assert abs(mpfr_to_fraction(mp[k, p, j]) - ref[k][j]) <= Fraction(1, 10**45) * scale


def test_direct_matches_mpmath_loop():
    P = sample_ls(2, 6, 3, seed=8, sigma=10.0)
    steps = 15
    X = gd_reference_direct(P.A, P.b, P.x0, ETA, steps)
    for p in range(2):
        ref = mpmath_gd(P.A[p], P.b[p], P.x0[p], ETA, steps)
        assert np.array_equal(X[:, p], np.array([[frac_to_float(v) for v in it] for it in ref]))


@pytest.mark.parametrize(
    "kw",
    [
        dict(sigma=1.0, x0="zeros", lam=0),
        dict(sigma=10.0, x0="gaussian", lam=0),
        dict(sigma=1.0, x0="gaussian", lam=0.5),
    ],
)
def test_fast_vs_direct_high_precision(kw):
    lam = kw.pop("lam")
    P = sample_ls(6, 20, 5, seed=21, **kw)
    steps = 40
    Xf, mf = gd_reference(P.A, P.b, P.x0, ETA, steps, digits=60, lam=lam, return_mp=True)
    Xd, md = gd_reference_direct(P.A, P.b, P.x0, ETA, steps, digits=60, lam=lam, return_mp=True)
    assert np.array_equal(Xf, Xd)
    rel = max_rel_diff(mf, md)
    assert rel < Fraction(1, 10**40)
    assert mf[1, 0, 0].precision == working_precision(60)


def test_dyadic_inputs_match_exact_fraction_gd():
    eta = 1.0 / 32.0
    for seed in range(3):
        A, b, x0 = dyadic_problem(seed)
        Af = [[Fraction(v) for v in row] for row in A]
        bf = [Fraction(v) for v in b]
        exact = fraction_gd(Af, bf, [Fraction(v) for v in x0], Fraction(eta), 30)
        expect = np.array([[frac_to_float(v) for v in it] for it in exact])
        assert np.array_equal(gd_reference(A, b, x0, eta, 30), expect)
        assert np.array_equal(gd_reference_direct(A, b, x0, eta, 30), expect)
        # with enough bits every operation is exact: the mpfr values ARE the rationals
        for fn in (gd_reference, gd_reference_direct):
            _, mp = fn(A, b, x0, eta, 6, digits=300, return_mp=True)
            assert [[mpfr_to_fraction(v) for v in it] for it in mp] == exact[:7]


def test_fraction_eta_is_exact_rational_step():
    A, b, x0 = dyadic_problem(5)
    Af = [[Fraction(v) for v in row] for row in A]
    bf = [Fraction(v) for v in b]
    eta = Fraction(1, 10)
    exact = fraction_gd(Af, bf, [Fraction(v) for v in x0], eta, 20, lam=Fraction(1, 3))
    X, mp = gd_reference(A, b, x0, eta, 20, lam=Fraction(1, 3), return_mp=True)
    assert np.array_equal(X, np.array([[frac_to_float(v) for v in it] for it in exact]))
    scale = max(abs(v) for it in exact for v in it)
    err = max(abs(mpfr_to_fraction(m) - e) for it_m, it_e in zip(mp, exact) for m, e in zip(it_m, it_e))
    assert err < Fraction(1, 10**48) * scale
    # the float 0.1 is a different step size: the mpfr iterates differ
    _, mp_float = gd_reference(A, b, x0, 0.1, 20, lam=Fraction(1, 3), return_mp=True)
    assert mpfr_to_fraction(mp_float[5, 0]) != mpfr_to_fraction(mp[5, 0])


def test_per_problem_eta_and_int_eta():
    P = sample_ls(3, 6, 3, seed=4, x0="gaussian")
    etas = [0.05, Fraction(1, 13), 0.01]
    X = gd_reference(P.A, P.b, P.x0, etas, 10)
    for p, e in enumerate(etas):
        assert np.array_equal(X[:, p], gd_reference(P.A[p], P.b[p], P.x0[p], e, 10))
    X0 = gd_reference(P.A, P.b, P.x0, 0, 4)  # eta = 0: iterates stay at x0
    assert np.array_equal(X0, np.broadcast_to(P.x0, X0.shape))


def test_unbatched_float32_and_defaults():
    P = sample_ls(2, 6, 3, seed=12)
    X = gd_reference(P.A, P.b, None, ETA, 5)
    assert np.array_equal(X[0], np.zeros((2, 3)))
    X1 = gd_reference(P.A[1], P.b[1], None, ETA, 5)
    assert X1.shape == (6, 3) and np.array_equal(X1, X[:, 1])
    Q = P.astype(np.float32)
    assert np.array_equal(
        gd_reference(Q.A, Q.b, Q.x0, ETA, 5), gd_reference(Q.A.astype(np.float64), Q.b.astype(np.float64), Q.x0, ETA, 5)
    )
    assert gd_reference(P.A, P.b, P.x0, ETA, 0).shape == (1, 2, 3)


def test_caller_context_is_restored():
    P = sample_ls(1, 4, 2, seed=0)
    with gmpy2.context(precision=70, round=gmpy2.RoundUp):
        gd_reference(P.A, P.b, P.x0, ETA, 3, digits=80)
        assert gmpy2.get_context().precision == 70
        assert gmpy2.get_context().round == gmpy2.RoundUp
        X = gd_reference(P.A, P.b, P.x0, ETA, 3)
    assert np.array_equal(X, gd_reference(P.A, P.b, P.x0, ETA, 3))


@pytest.mark.parametrize(
    "mutate,name",
    [
        (lambda A, b, x0: (A[..., :-1], b, x0), "x0"),
        (lambda A, b, x0: (A, b[:, :-1], x0), "b"),
        (lambda A, b, x0: (A[0, 0], b, x0), "A"),
        (lambda A, b, x0: (np.where(A == A[0, 0, 0], np.nan, A), b, x0), "A"),
        (lambda A, b, x0: (A, b, x0[:, :-1]), "x0"),
    ],
)
def test_bad_inputs_raise(mutate, name):
    P = sample_ls(2, 5, 3)
    A, b, x0 = mutate(P.A, P.b, P.x0)
    with pytest.raises(ValueError, match=name):
        gd_reference(A, b, x0, ETA, 3)


@pytest.mark.parametrize(
    "kw,name",
    [
        (dict(eta=float("nan")), "eta"),
        (dict(eta=True), "eta"),
        (dict(eta=[0.1, 0.2, 0.3]), "eta"),
        (dict(eta="0.1"), "eta"),
        (dict(lam=float("inf")), "lam"),
        (dict(steps=-1), "steps"),
        (dict(steps=2.0), "steps"),
        (dict(digits=0), "digits"),
    ],
)
def test_bad_parameters_raise(kw, name):
    P = sample_ls(2, 5, 3)
    args = dict(eta=ETA, steps=3)
    args.update(kw)
    eta, steps = args.pop("eta"), args.pop("steps")
    with pytest.raises(ValueError, match=name):
        gd_reference(P.A, P.b, P.x0, eta, steps, **args)
    with pytest.raises(ValueError, match=name):
        gd_reference_direct(P.A, P.b, P.x0, eta, steps, **args)


# ---------------------------------------------------------------- stable_reference


def test_stable_reference_real_function():
    P = sample_ls(4, 8, 3, seed=2)
    res, used = stable_reference(gd_reference, P.A, P.b, P.x0, ETA, 20, digits=30, lam=0.1)
    assert used >= 30 and used == 60
    assert np.array_equal(res, gd_reference(P.A, P.b, P.x0, ETA, 20, digits=used, lam=0.1))
    (res2, mp), used2 = stable_reference(gd_reference, P.A, P.b, P.x0, ETA, 20, digits=30, lam=0.1, return_mp=True)
    assert used2 == used and np.array_equal(res2, res) and mp[0, 0, 0].precision == working_precision(used)


def test_stable_reference_escalates_and_gives_up():
    calls = []

    def changes_until_200(digits):
        calls.append(digits)
        return np.array([float(digits) if digits < 200 else 7.0])

    res, used = stable_reference(changes_until_200, digits=50, max_digits=1000)
    assert calls == [50, 100, 200, 400] and used == 400 and res[0] == 7.0

    calls.clear()
    res, used = stable_reference(changes_until_200, digits=50, max_digits=300)
    assert calls == [50, 100, 200, 300] and used == 300  # last step capped at max_digits

    with pytest.raises(RuntimeError, match="max_digits"):
        stable_reference(lambda digits: np.array([float(digits)]), digits=10, max_digits=100)
    with pytest.raises(ValueError, match="max_digits"):
        stable_reference(changes_until_200, digits=50, max_digits=50)


# ---------------------------------------------------------------- lstsq_solution


def test_lstsq_solution_exact_vs_mpfr_and_numpy():
    P = sample_ls(16, seed=13, sigma=5.0)
    xs = lstsq_solution(P.A, P.b)
    assert xs.shape == (16, 5) and xs.dtype == np.float64
    assert np.array_equal(xs, lstsq_solution(P.A, P.b, 60))
    np.testing.assert_allclose(xs, P.x_true, rtol=0, atol=1e-13)
    for p in range(3):
        np.testing.assert_allclose(xs[p], np.linalg.lstsq(P.A[p], P.b[p], rcond=None)[0], rtol=0, atol=1e-13)
    assert np.array_equal(lstsq_solution(P.A[3], P.b[3]), xs[3])


def test_lstsq_solution_exact_on_dyadic_data():
    # A = [[1, 0], [0, 2], [1, 1]], b = [1, 1, 0]: normal equations [[2,1],[1,5]] x = [1, 2]
    A = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    b = np.array([1.0, 1.0, 0.0])
    assert lstsq_solution(A, b).tolist() == [3 / 9, 3 / 9]
    # ridge with lam = 1: [[3,1],[1,6]] x = [1, 2] -> x = [4/17, 5/17]
    assert lstsq_solution(A, b, lam=1).tolist() == [4 / 17, 5 / 17]
    assert lstsq_solution(A, b, lam=Fraction(1, 3)).tolist() == [30 / 103, 33 / 103]


@pytest.mark.parametrize("lam", [0, 0.5])
def test_gd_converges_to_lstsq_solution(lam):
    P = sample_ls(4, 10, 3, kappa=2.0, seed=17, x0="gaussian", sigma=3.0)
    # spectrum of A^T A + lam I is [1 + lam, 4 + lam]; optimal step contracts by
    # 3 / (5 + 2 lam) <= 3/5 per step, so 120 steps reach ~1e-26 relative
    eta = 2.0 / (5.0 + 2.0 * lam)
    X = gd_reference(P.A, P.b, P.x0, eta, 120, lam=lam)
    assert np.array_equal(X[-1], lstsq_solution(P.A, P.b, lam=lam))


def test_lstsq_singular_raises():
    A = np.array([[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]])
    b = np.array([1.0, 0.0, 1.0])
    with pytest.raises(np.linalg.LinAlgError):
        lstsq_solution(A, b)
    with pytest.raises(np.linalg.LinAlgError):
        lstsq_solution(A, b, 50)
    assert np.all(np.isfinite(lstsq_solution(A, b, lam=1.0)))
