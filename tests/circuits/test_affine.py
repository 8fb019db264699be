"""circuits.affine: exact affine forms, sparse or dense, against a dict-of-Fractions reference."""
from __future__ import annotations

from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from circuits import affine as A

rationals = st.fractions(max_denominator=50).filter(lambda q: abs(q) < 10**30) | st.integers(-3, 3).map(Fraction)
big = st.integers(-(10**40), 10**40).map(Fraction)


def ref_comb(terms):
    out: dict = {}
    for d, m in terms:
        for k, c in d.items():
            out[k] = out.get(k, 0) + m * c
    return {k: c for k, c in out.items() if c}


def form_of(d: dict) -> A.Form:
    return A.from_items(d.items())


# ids spread so that results fall on both sides of the dense rule (span vs terms)
ids = st.one_of(st.integers(-1, 40), st.integers(-1, 4000))
dicts = st.dictionaries(ids, rationals | big, max_size=60)


@given(st.lists(st.tuples(dicts, rationals | st.integers(-5, 5).map(Fraction)), min_size=1, max_size=5),
       st.integers(0, 3))
def test_lincomb_matches_reference(terms, depth):
    forms = [(form_of(d), m) for d, m in terms]
    want = ref_comb(terms)
    got = A.lincomb(forms)
    # feed the result back in (dense operands, mixed with sparse ones)
    for _ in range(depth):
        got = A.lincomb([(got, 2), (forms[0][0], -1)])
        want = ref_comb([(want, 2), (terms[0][0], -1)])
    assert dict(got.items()) == want
    assert got.key() == form_of(want).key()  # canonical whichever way it is held
    assert got == form_of(want)
    nonconst = [k for k in want if k != A.CONST]
    assert got.is_const == (not nonconst)
    assert got.const_value() == want.get(A.CONST, 0)
    assert sorted(got.atoms()) == sorted(nonconst)


def test_dense_and_sparse_are_both_used():
    dense = A.lincomb([(A.from_items((i, Fraction(i + 1)) for i in range(100)), 1), (A.atom(5), 3)])
    assert dense.p is not None and dense.d is None
    sparse = A.lincomb([(A.atom(0), 1), (A.atom(10**6), Fraction(1, 3))])
    assert sparse.p is None
    assert dict(dense.items())[5] == 9
    # cancellation to zero, and to a constant, in the dense form
    assert A.lincomb([(dense, 1), (dense, -1)]) is A.ZERO
    c = A.lincomb([(A.lincomb([(dense, 1), (A.const(7), 1)]), 1), (dense, -1)])
    assert c.is_const and c.const_value() == 7


def test_level_and_scale():
    lv = [0, 3, 1, 5]
    f = A.lincomb([(A.atom(1), 2), (A.atom(2), 1), (A.const(Fraction(1, 2)), 1)])
    assert A.level(f, lv) == 3
    assert A.level(A.const(4), lv) == 0
    assert A.scale(f, 1) is f
    assert A.scale(f, 0) is A.ZERO
    assert dict(A.scale(f, Fraction(2, 3)).items()) == {A.CONST: Fraction(1, 3), 1: Fraction(4, 3), 2: Fraction(2, 3)}
