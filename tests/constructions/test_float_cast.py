"""``constructions.base.to_float_array``'s vectorised path (ints and Fractions through numpy's
float64 cast, then numpy's cast to float32/float16 for the entries float64 holds exactly) gives the
same floats as rounding each entry once in the format's gmpy2 context, edge cases included."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from constructions import ops
from constructions.base import FLOAT_FORMATS, to_float_array


def per_entry(a: np.ndarray, name: str) -> np.ndarray:
    """The reference: every nonzero entry rounded once by gmpy2 (float64: int / int division)."""
    vals = np.zeros(a.shape)
    nz = np.nonzero(ops.nonzero_pattern(a))
    entries = [Fraction(z) for z in a[nz]]
    vals[nz] = [float(q) for q in entries] if name == "float64" else FLOAT_FORMATS[name].round(entries)
    return vals.astype(name)


EDGES = [0, 1, -1, 2**53 + 1, 2**24 + 1, -(2**60) - 3, Fraction(1, 3), Fraction(-7, 16), Fraction(1, 2**1074),
         Fraction(3, 2**1076), Fraction(1, 2**149), Fraction(3, 2**150), Fraction(1, 2**150), Fraction(65519),
         Fraction(65520), Fraction(2**128), Fraction(2**128 - 2**103), Fraction(1, 2**24) + Fraction(1, 2**80),
         Fraction(2**-25), Fraction(3, 2**26)]


def as_array(vals) -> np.ndarray:
    a = np.empty(len(vals), dtype=object)
    a[:] = vals
    return a


@pytest.mark.parametrize("name", ["float64", "float32", "float16"])
def test_edges_round_as_gmpy2(name):
    a = as_array(EDGES)
    with np.errstate(over="ignore"):
        want = per_entry(a, name)
    got = to_float_array(a, np.dtype(name))
    assert got.dtype == np.dtype(name)
    assert np.array_equal(got, want)
    assert np.signbit(got[a == 0]).sum() == 0  # zeros stay +0


def test_beyond_float64_range_falls_back():
    """An int beyond float64's range: float32 rounds it to inf (the format's overflow), as before."""
    a = as_array([1, 2**1100, Fraction(-(2**1100), 3)])
    got = to_float_array(a, np.float32)
    assert got.tolist() == [1.0, float("inf"), float("-inf")]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.integers(-2**70, 2**70), st.fractions(max_denominator=10**9),
                          st.builds(lambda n, e: Fraction(n, 2**e), st.integers(-2**60, 2**60),
                                    st.integers(0, 1100))), min_size=1, max_size=40),
       st.sampled_from(["float64", "float32", "float16"]))
def test_random_entries_round_as_gmpy2(vals, name):
    a = as_array(vals).reshape(len(vals), 1)
    with np.errstate(over="ignore"):
        want = per_entry(a, name)
    assert np.array_equal(to_float_array(a, np.dtype(name)), want)
