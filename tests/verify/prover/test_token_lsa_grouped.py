"""token-lsa in the grouped ring: the pair encoding of verify/prover/token_groups.py.

The token form of seed 004 eq. (2)-(3) updates every token by its own row times sums over the
other tokens, so a context token's residual holds monomials from two groups: its own (the
*pivot*) and one other.  The pair encoding is injective on exactly those; these tests check

* the pivot rules of :class:`Support` bound the true groups of every monomial (random
  expressions), and :func:`pivoted` refuses an entry without a common pivot;
* the pair encoding is injective on the monomials with a pivot, and not on three groups;
* ``gd --arch token-lsa`` is proved in the grouped ring with the full ring's verdict;
* a wrong token-lsa weight, any one entry changed, fails in the grouped ring itself (not only
  in the full proof that makes the report), and the report is in the construction's variables;
* a residual beyond the encoding (three groups; two groups without a common pivot) is not
  proved in the grouped ring, and the full ring finds it.
"""
from __future__ import annotations

import copy
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from constructions.catalogue import gd_architectures
from verify.prover.proof import ProofKeep, display_name, grouped_proof, entry_name, prove
from tests.verify.prover.expressions import assert_injective_on_pivoted, evaluate, expressions, with_final_extra
from verify.prover.token_groups import CONST, GroupedProblem, Support, abstract_variables, pivoted

N, D = 4, 2
VARS = {"A": (N, D), "b": (N,), "x": (D,)}
GROUPS = ("A", "b")
BUILD = gd_architectures()["token-lsa"].build


def _group_of(name: str):
    if name.startswith("A[") or name.startswith("b["):
        return int(name[2:].split(",")[0].rstrip("]"))
    return None


def _names():
    return [entry_name(v, ix) for v, sh in VARS.items() for ix in np.ndindex(*sh)]


def _full_ring():
    from sympy import QQ, Symbol
    from sympy.polys.rings import ring

    names = _names()
    R, *gens = ring([Symbol(n) for n in names], QQ)
    return R, names, dict(zip(names, gens))


EXPR = expressions(_names(), max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(EXPR)
def test_the_pivot_rules_cover_every_monomial(expr):
    R, names, gen = _full_ring()
    av = abstract_variables(VARS, GROUPS)
    flat = {entry_name(v, ix): av[v][ix] for v, sh in VARS.items() for ix in np.ndindex(*sh)}
    p = R(evaluate(expr, lambda n: gen[n]))
    a = evaluate(expr, lambda n: flat[n])
    for mono in p.monoms():
        groups = {_group_of(names[i]) for i, e in enumerate(mono) if e} - {None}
        if not isinstance(a, Support):  # an exact constant: no grouped variable left
            assert not groups
            continue
        assert len(groups) <= a.k
        if a.k == 1 and a.g >= 0:
            assert groups <= {a.g}
        if a.k == 2:
            for q in a.p:  # every monomial: the pivot and at most one other group
                assert len(groups - {q}) <= 1, (expr, a, groups)


def test_pivot_rules_by_hand():
    g0, g1, g2, anyg = Support.of(1, 0), Support.of(1, 1), Support.of(1, 2), Support.of(1)
    assert (g0 * anyg).p == {0} and (g0 * g1).p == {0, 1} and (anyg * anyg).p == frozenset()
    assert (g0 * anyg + g0 * g1).p == {0}                 # a common pivot survives a sum
    assert (g0 * anyg + g1 * anyg).p == frozenset()       # two rows' pivots: none in common
    assert (g0 * anyg + g2).p == {0}                      # a one-group operand allows any pivot
    assert (g0 * anyg * g0).p == {0} and (g0 * anyg * g1).k == 3
    assert pivoted(np.array([g0 * anyg, g1 * anyg, anyg, 3], dtype=object))
    assert not pivoted(np.array([g0 * anyg], dtype=object), np.array([g1 * anyg], dtype=object))
    assert not pivoted(np.array([anyg * anyg], dtype=object)) and not pivoted(np.array([CONST, g0 * g1 * g2]))


def _images(gp):
    return {entry_name(v, ix): gp.v[v][ix] for v, sh in VARS.items() for ix in np.ndindex(*sh)}


def test_the_pair_encoding_is_injective_on_pivoted_monomials_and_not_on_three_groups():
    names = _names()
    gp = GroupedProblem(VARS, (), GROUPS, entry_name, display_name, encoding=2)
    assert len(gp.names) == 2 * (D + 1) + 1 + D  # alpha, beta per slot, sigma, the globals
    image = _images(gp)
    assert_injective_on_pivoted(names, image, _group_of, N, 4)
    # three groups of one slot: {1, 5, 6} and {2, 3, 7} have equal sums and sums of squares
    big = GroupedProblem({"A": (8, 1), "b": (8,)}, (), GROUPS, entry_name, display_name, encoding=2)
    A = big.v["A"]
    assert A[1, 0] * A[5, 0] * A[6, 0] - A[2, 0] * A[3, 0] * A[7, 0] == 0


def test_the_digit_codes_are_injective_on_pivoted_monomials():
    """12 groups in base 4, two digits (two betas per slot, two sigmas): still one image per
    pivoted monomial, for every pivot, up to degree 3; and the digits keep the tags small."""
    from verify.prover.token_groups import pair_digits

    assert pair_digits(12) == (4, 2) and pair_digits(64) == (8, 2) and pair_digits(128) == (6, 3)
    for n in (1, 2, 10, 11, 100, 101, 1000, 1001):
        base, digits = pair_digits(n)
        assert base ** digits >= n and 3 * (base - 1) * (base - 2) // 2 <= 127
    variables = {"A": (12, 1), "b": (12,), "x": (1,)}
    gp = GroupedProblem(variables, (), GROUPS, entry_name, display_name, encoding=2)
    assert (gp.base, gp.digits) == (4, 2) and len(gp.names) == 3 * 2 + 2 + 1
    names = [entry_name(v, ix) for v, sh in variables.items() for ix in np.ndindex(*sh)]
    image = {entry_name(v, ix): gp.v[v][ix] for v, sh in variables.items() for ix in np.ndindex(*sh)}
    assert_injective_on_pivoted(names, image, _group_of, 12, 3)


@pytest.mark.parametrize("n,d", [(3, 2), (5, 3), (12, 2)])
def test_token_lsa_is_proved_in_the_grouped_ring_with_the_full_rings_verdict(n, d):
    con = BUILD(n, d)
    grouped = prove(con)
    plain = copy.copy(con)
    plain.token_groups = ()
    full = prove(plain)
    assert grouped.ok and full.ok and full.ring == "full"
    assert "encoding 2" in grouped.ring and grouped.ring.startswith("grouped substitution"), grouped.ring
    assert grouped.sections == full.sections and grouped.entries_checked == full.entries_checked
    assert grouped.symbolic_cover.startswith("the layers rebuilt on symbolic eta")


def _weights(con):
    """Every (head, matrix, entry) of the body layer."""
    L = con.body[0]
    return [(h, w, ix) for h in range(len(L.heads)) for w in ("P", "Q")
            for ix in np.ndindex(*np.shape(getattr(L.heads[h], w)))]


def _changed(con, h, w, ix, delta):
    L = con.body[0].map(lambda A: np.array(A, dtype=object))
    M = getattr(L.heads[h], w)
    M[ix] = M[ix] + delta
    return {"prologue": con.prologue, "body": [L], "epilogue": con.epilogue}


def test_a_wrong_weight_fails_in_the_grouped_ring():
    """Every entry of every weight of the token-lsa layer at 3x2, changed by 1/3: where the full
    ring (every variable its own generator) finds a difference, the grouped ring itself sees it
    (it does not prove, and says the body differs rather than that it could not run); where the
    full ring proves the changed layer (an entry no input reaches, e.g. head 0 reading the
    carrier's ``one``), so does the grouped ring.  The GD weights themselves: ``gd --arch
    token-lsa``'s two heads, seed 004 eq. (8) with (0, -eta, 1, 0) and the carrier's head."""
    from fractions import Fraction

    con = BUILD(3, 2)
    plain = copy.copy(con)
    plain.token_groups = ()
    wrong = 0
    for h, w, ix in _weights(con):
        secs = _changed(con, h, w, ix, Fraction(1, 3))
        keep = ProofKeep()
        grouped = grouped_proof(con, (), secs, time.perf_counter(), keep)
        full = prove(plain, sections=secs, refute=False)  # the full ring's verdict itself
        assert full.ring == "full"
        if full.ok:
            assert grouped is not None and grouped.ok, (h, w, ix, keep)
            continue
        wrong += 1
        assert grouped is None, (h, w, ix)
        assert keep.grouped == "differs: body (encoding 2)", (h, w, ix, keep)
    assert wrong >= 40, wrong  # most single-entry changes do change the map
    # one of them through prove(): the report, from the full ring, in A, b, x, q and eta
    res = prove(con, sections=_changed(con, 0, "P", (2, 2), Fraction(1, 3)), refute=False)
    assert not res.ok and res.ring == "full" and res.failure.section == "body"
    names = {entry_name(v, ix) for v, sh in con.variables.items() for ix in np.ndindex(*sh)} | {"eta"}
    assert res.failure.counterexample is not None
    assert set(res.failure.counterexample.assignment) <= names


def test_a_wrong_weight_at_20x5_fails_in_the_grouped_ring():
    """The size of the slow baseline (64x16, once 4 GB in the full ring): the pair encoding (not a
    refusal) rejects it."""
    con = BUILD(20, 5)
    from fractions import Fraction

    keep = ProofKeep()
    secs = _changed(con, 1, "P", (5 + 2 + 4, 4), Fraction(-1, 7))  # the carrier's last w coordinate
    assert grouped_proof(con, (), secs, time.perf_counter(), keep) is None
    assert keep.grouped == "differs: body (encoding 2)"


def _tampered(con, extra):
    """``con`` whose final state demands ``extra(A)`` more at context token 0's residual."""
    return with_final_extra(con, extra, at=lambda c: (0, c.variables["A"][1]))


@pytest.mark.parametrize("extra,why", [
    (lambda A: A[1, 0] * A[5, 0] * A[6, 0] - A[2, 0] * A[3, 0] * A[7, 0], "three groups"),
    (lambda A: A[1, 0] * A[2, 0] - A[1, 0] * A[2, 0] + A[3, 0] * A[4, 0], "two groups, pivot 3 or 4, not 0"),
])
def test_a_residual_beyond_the_pair_encoding_is_not_proved_there(extra, why):
    con = _tampered(BUILD(8, 1), extra)
    keep = ProofKeep()
    assert grouped_proof(con, ("eta",), None, time.perf_counter(), keep) is None, why
    assert keep.grouped.startswith("not used: the epilogue"), keep
    res = prove(con, refute=False)  # the full ring's verdict itself (refuting first would not reach it)
    assert not res.ok and res.ring == "full" and res.failure.section == "epilogue"


# ---------------------------------------------------------------- the flint backend's deferred sums

OPS = st.lists(st.tuples(st.sampled_from(["+", "-", "r-", "*", "+pending", "-pending"]),
                         st.integers(0, 5), st.integers(-3, 3)), min_size=1, max_size=25)


@settings(max_examples=200, deadline=None)
@given(OPS)
def test_deferred_sums_are_the_polynomials_of_direct_arithmetic(ops):
    """FPoly's pending sums (terms joined, pending operands merged, formed smallest first) give
    exactly flint's left-to-right arithmetic, whatever the order of reads."""
    import flint

    from verify.prover.flint_backend import FPoly

    ctx = flint.fmpq_mpoly_ctx.get(("u", "v", "w"), "lex")
    u, v, w = ctx.gens()
    pool = [u, v, w, u * v - 1, v ** 3 + 2 * w, flint.fmpq(1, 3) * u * w]
    lazy, exact = FPoly(u), u
    side, side_exact = FPoly(w), w
    for op, k, c in ops:
        x = pool[k] * c if c else pool[k]
        if op == "+":
            lazy, exact = lazy + x, exact + x
        elif op == "-":
            lazy, exact = lazy - x, exact - x
        elif op == "r-":
            lazy, exact = x - lazy, x - exact
        elif op == "*":
            lazy, exact = lazy * x, exact * x
        else:  # a second pending sum joins this one
            side, side_exact = side + x, side_exact + x
            lazy, exact = (lazy + side, exact + side_exact) if op == "+pending" else (lazy - side, exact - side_exact)
        if c == 0:  # read it on the way (its truth value forms the pending sum)
            assert bool(lazy) == bool(exact)
    assert lazy.p == exact and side.p == side_exact


def test_keep_heap_is_set_once_on_glibc():
    import platform

    from verify.prover.flint_backend import keep_heap

    if platform.libc_ver()[0] != "glibc":
        pytest.skip(reason="keep_heap tunes glibc's allocator only; elsewhere it changes nothing")
    assert keep_heap() is True and keep_heap() is True
