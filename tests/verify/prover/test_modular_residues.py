"""verify/prover/modular.py: the vectorised residues (floats by mantissa and exponent, Fractions by an
inverse cached per denominator) equal ``Fraction(x) mod p`` exactly, entry by entry."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from verify.prover import modular

#: a narrow prime (int64 products) and the randomized check's kind of 61-bit prime (the wide mulmod)
PRIMES = (modular.PRIMES[0], (1 << 61) - 1)


def reference(x, p: int) -> int:
    """The definition: the exact rational, its numerator times its denominator's inverse mod p."""
    q = Fraction(float(x)) if isinstance(x, (float, np.floating)) else Fraction(x)
    return q.numerator % p * pow(q.denominator % p, -1, p) % p


finite = st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=True)
special = st.sampled_from([0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308,
                           -1.7976931348623157e308, 0.5, -1.0, 2.0 ** 60, 2.0 ** -1074 * 3])
floats_st = st.one_of(finite, special)
exact_st = st.one_of(
    floats_st,
    st.integers(min_value=-(2 ** 80), max_value=2 ** 80),
    st.fractions().filter(lambda q: all(q.denominator % p for p in PRIMES)),
    st.builds(lambda n, k: Fraction(n, 3 ** k), st.integers(-10 ** 6, 10 ** 6), st.integers(0, 30)),
)


@pytest.mark.parametrize("p", PRIMES)
@given(xs=st.lists(floats_st, min_size=1, max_size=60))
def test_float_array_residues_are_the_fractions_residues(p, xs):
    for dtype in (np.float64, np.float32):
        with np.errstate(over="ignore"):
            a = np.asarray(xs, dtype=np.float64).astype(dtype)
        if not np.isfinite(a).all():  # a float64 outside float32's range overflows to inf: not this test
            continue
        got = modular.residues(a.reshape(-1, 1), p)
        assert got.dtype == np.int64 and got.shape == (len(xs), 1)
        assert got.ravel().tolist() == [reference(x, p) for x in a.tolist()]


@pytest.mark.parametrize("p", PRIMES)
@given(xs=st.lists(exact_st, min_size=1, max_size=60))
def test_mixed_object_array_residues_are_the_fractions_residues(p, xs):
    A = np.empty(len(xs), dtype=object)
    A[:] = xs
    got = modular.residues(A, p)
    assert got.tolist() == [reference(x, p) for x in xs]
    assert got.tolist() == [modular.residue(x, p) for x in xs]  # the one-entry path agrees too


def test_shared_denominators_use_one_inverse_and_stay_exact():
    p = PRIMES[1]
    rng = np.random.default_rng(0)
    w = rng.normal(0.0, 1e-3, 4000)
    A = np.array([Fraction(float(x)) for x in w] + [np.float32(w[0]), np.int64(-7), True], dtype=object)
    want = [reference(x, p) for x in A.tolist()]
    assert modular.residues(A, p).tolist() == want
    assert modular.residues(w, p).tolist() == want[:4000]


def test_a_denominator_divisible_by_p_and_a_non_finite_float_are_refused():
    p = PRIMES[0]
    with pytest.raises(modular.Unrepresentable):
        modular.residues(np.array([Fraction(1, 3), Fraction(5, p)], dtype=object), p)
    with pytest.raises(ValueError, match="infinite or NaN"):
        modular.residues(np.array([1.0, np.inf]), p)
    with pytest.raises(ValueError, match="infinite or NaN"):
        modular.residues(np.array([1.0, float("nan")], dtype=object), p)


def test_integer_dtypes_reduce_without_objects():
    p = PRIMES[0]
    a = np.array([-(2 ** 63), -1, 0, 2 ** 62, 2 ** 63 - 1], dtype=np.int64)
    assert modular.residues(a, p).tolist() == [x % p for x in a.tolist()]
    u = np.array([2 ** 64 - 1, 3], dtype=np.uint64)
    assert modular.residues(u, p).tolist() == [x % p for x in u.tolist()]
