"""Tests for numerics.error_measures: ulps, bits of error, correct rounding, error statistics."""
import math
from fractions import Fraction

import gmpy2
import numpy as np
import pytest

from numerics import error_measures as metrics  # noqa: the module under test
from numerics.error_measures import bits_of_error, round_to, ulp_distance


def _steps(x, k, dtype):
    """``x`` moved up by k representable values of ``dtype`` (as float64)."""
    v = np.array(x, dtype=dtype)
    for _ in range(k):
        v = np.nextafter(v, np.array(np.inf, dtype=dtype))
    return float(v)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("k,bits", [(0, 0.0), (1, 1.0), (3, 2.0), (7, 3.0), (1023, 10.0)])
def test_bits_for_known_ulp_distances(dtype, k, bits):
    x = _steps(1.0, k, dtype)
    assert ulp_distance(x, 1.0, dtype) == k
    assert bits_of_error(x, 1.0, dtype) == pytest.approx(bits)
    assert bits_of_error(1.0, x, dtype) == pytest.approx(bits)  # symmetric


def test_ulps_across_zero_and_signed_zero():
    tiny32 = float(np.nextafter(np.float32(0), np.float32(1)))
    assert ulp_distance(tiny32, -tiny32, "float32") == 2
    assert ulp_distance(0.0, -0.0, "float64") == 0
    assert ulp_distance(-1.0, 1.0, "float16") == 2 * ulp_distance(0.0, 1.0, "float16")
    # 1.0 is 0x3C00 in float16: 15360 values above +0
    assert ulp_distance(0.0, 1.0, "float16") == 0x3C00


def test_inf_is_one_past_the_largest_finite():
    assert ulp_distance(65504.0, np.inf, "float16") == 1
    assert ulp_distance(float(np.finfo(np.float32).max), np.inf, "float32") == 1


def test_bfloat16_ulps_and_representability():
    assert ulp_distance(1.0 + 2 ** -7, 1.0, "bfloat16") == 1
    assert ulp_distance(2.0, 1.0, "bfloat16") == 128  # 7 fraction bits
    assert metrics.representable([1.0, 1.0 + 2 ** -7], "bfloat16")
    assert not metrics.representable([1.0 + 2 ** -8], "bfloat16")
    with pytest.raises(ValueError, match="not representable in bfloat16"):
        ulp_distance(1.0 + 2 ** -8, 1.0, "bfloat16")


def test_nan_scores_the_format_width():
    assert bits_of_error(np.nan, 1.0, "float32") == 32
    assert bits_of_error(1.0, np.nan, "float64", rounded=True) == 64
    assert bits_of_error(np.nan, np.nan, "float16", rounded=True) == 0


def test_round_to_is_a_single_correct_rounding():
    # 1 + 2^-24 + 2^-60 lies just above a float32 tie: rounding through float64 first
    # lands on the tie and then rounds to even (1.0); the correct rounding is 1 + 2^-23.
    with gmpy2.context(precision=200):
        v = gmpy2.mpfr(1) + gmpy2.mpfr(2) ** -24 + gmpy2.mpfr(2) ** -60
    assert float(np.float32(float(v))) == 1.0
    assert round_to(np.array([v], dtype=object), "float32")[0] == 1.0 + 2 ** -23
    # the same for bfloat16 (8 significand bits)
    with gmpy2.context(precision=200):
        w = gmpy2.mpfr(1) + gmpy2.mpfr(2) ** -8 + gmpy2.mpfr(2) ** -70
    assert round_to(np.array([w], dtype=object), "bfloat16")[0] == 1.0 + 2 ** -7
    # float16 subnormals and overflow
    assert round_to(np.array([2 ** -25 * 1.0001]), "float16")[0] == 2 ** -24
    assert round_to(np.array([2 ** -25]), "float16")[0] == 0.0  # tie to even (zero)
    assert round_to(np.array([65520.0]), "float16")[0] == np.inf
    assert round_to(np.array([Fraction(1, 3)], dtype=object), "float64")[0] == 1 / 3


def test_bits_against_an_unrounded_reference():
    with gmpy2.context(precision=200):
        third = gmpy2.mpfr(1) / 3
    r32 = float(np.float32(1 / 3))
    assert bits_of_error(r32, np.array(third, dtype=object), "float32") == 0.0
    up = _steps(r32, 1, "float32")
    assert bits_of_error(up, np.array(third, dtype=object), "float32") == pytest.approx(1.0)


def test_mse_and_relative_errors_on_hand_made_arrays():
    x = np.array([1.0, 2.5, 0.0, -4.0])
    ref = np.array([1.0, 2.0, 0.0, -5.0])
    assert metrics.mse(x, ref) == pytest.approx((0.25 + 1.0) / 4)
    assert metrics.max_rel_err(x, ref) == pytest.approx(0.25)
    assert metrics.normwise_rel_err(x, ref) == pytest.approx(1.0 / 5.0)
    assert metrics.max_rel_err(np.array([1e-3]), np.array([0.0])) == np.inf
    assert metrics.max_rel_err(np.array([0.0]), np.array([0.0])) == 0.0
    # an accurately computed error replaces x - ref
    assert metrics.max_rel_err(x, ref, err=np.array([0, 1e-20, 0, 0])) == pytest.approx(5e-21)
    assert math.isnan(metrics.mse(np.array([np.nan]), np.array([1.0])))


def test_overhead_ratio():
    assert metrics.overhead(2e-30, 1e-30) == pytest.approx(2.0)
    assert metrics.overhead(0.0, 0.0) == 1.0
    assert metrics.overhead(1e-30, 0.0) == np.inf
    np.testing.assert_allclose(metrics.overhead(np.array([4.0, 1.0]), np.array([2.0, 4.0])), [2.0, 0.25])


def test_data_deviation_in_data_units():
    init = np.array([[0.25, -0.5], [1.0, 0.0]])  # e.g. sqrt(eta) X^T with sqrt(eta) = 1/4
    now = init.copy()
    now[0, 1] += 2 ** -20
    d = metrics.data_deviation(now, init, scale=0.25)
    assert d["max_abs"] == 2 ** -20 / 0.25
    assert d["max_rel"] == 2 ** -20 / 1.0
    assert metrics.data_deviation(init, init) == {"max_abs": 0.0, "max_rel": 0.0}


def test_unknown_format_is_refused():
    with pytest.raises(ValueError, match="unknown float format"):
        metrics.fmt("float8")
    assert metrics.fmt(np.float32).p == 24
    assert metrics.fmt("bfloat16").eps == 2.0 ** -7


def test_one_format_table_and_one_rounding_for_exact_and_float_values():
    """The metrics read the constructions' format table (one home), and rounding an exact
    rational for a weight (``round_exact``, ``to_float_array``) agrees with ``round_to`` on
    every format, ties to even and subnormals included."""
    from constructions.base import FLOAT_FORMATS, round_exact, to_float_array

    assert metrics.FORMATS is FLOAT_FORMATS
    # a float32 tie (1 + 2^-24, to even: 1), just above it, a float16 subnormal tie, a third
    qs = [Fraction(1) + Fraction(1, 2 ** 24), Fraction(1) + Fraction(1, 2 ** 24) + Fraction(1, 2 ** 60),
          Fraction(1, 2 ** 25), Fraction(3, 2 ** 26), Fraction(-1, 3)]
    for name in FLOAT_FORMATS:
        want = round_to(np.array(qs, dtype=object), name)
        assert [round_exact(q, name) for q in qs] == want.tolist()
        got = to_float_array(np.array(qs, dtype=object), "bfloat16" if name == "bfloat16" else np.dtype(name))
        assert np.asarray(got, dtype=np.float64).tolist() == want.tolist()
    assert round_exact(qs[0], "float32") == 1.0 and round_exact(qs[1], "float32") == 1.0 + 2 ** -23
    assert round_exact(qs[2], "float16") == 0.0 and round_exact(qs[3], "float16") == 2 ** -24
