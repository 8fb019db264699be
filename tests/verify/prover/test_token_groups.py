"""verify/prover/token_groups.py: the grouped substitution proves only what the full ring proves.

* the abstract rules (:class:`Support`) bound the true number of groups of every monomial, on
  random polynomial expressions;
* the substitution is injective on monomials with at most one group, and is not on two;
* a claim whose residual has monomials in two groups, which the substitution maps to zero, is
  refused (the full proof runs and finds it);
* the GD architectures take the grouped route where it applies, reach the full ring's verdict,
  and a tampered weight still fails with a report in the construction's own variables.
"""
from __future__ import annotations

import copy
import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given

from constructions.catalogue import gd_architectures
from constructions.gd_baseconv import gd_baseconv_causal
from verify.prover.proof import display_name, entry_name, prove
from tests.verify.prover.expressions import evaluate, expressions, with_final_extra
from verify.prover.token_groups import CONST, GroupedProblem, Support, abstract_variables, max_arity

N, D = 3, 2
VARS = {"A": (N, D), "b": (N,), "x": (D,)}
GROUPS = ("A", "b")


def _group_of(name: str):
    """The group of a full-ring generator name (None: a global)."""
    if name.startswith("A[") or name.startswith("b["):
        return int(name[2:].split(",")[0].rstrip("]"))
    return None


def _full_ring():
    from sympy import QQ, Symbol
    from sympy.polys.rings import ring

    names = [entry_name(v, ix) for v, sh in VARS.items() for ix in np.ndindex(*sh)]
    R, *gens = ring([Symbol(n) for n in names], QQ)
    return R, names, dict(zip(names, gens))


# an expression: a leaf name, a constant, or (op, left, right)
EXPR = expressions([entry_name(v, ix) for v, sh in VARS.items() for ix in np.ndindex(*sh)], max_leaves=10)


@given(EXPR)
def test_the_abstract_bound_covers_every_monomial(expr):
    R, names, gen = _full_ring()
    av = abstract_variables(VARS, GROUPS)
    flat = {entry_name(v, ix): av[v][ix] for v, sh in VARS.items() for ix in np.ndindex(*sh)}
    p = evaluate(expr, lambda n: gen[n])
    a = evaluate(expr, lambda n: flat[n])
    p = R(p)
    for mono in p.monoms():
        groups = {_group_of(names[i]) for i, e in enumerate(mono) if e} - {None}
        if isinstance(a, Support):
            assert len(groups) <= a.k
            if a.k == 1 and a.g >= 0:
                assert groups <= {a.g}
        else:  # an exact constant: the expression has no grouped variable left
            assert not groups and (a == 0) == (not p)


def test_a_product_with_an_exact_zero_is_zero_and_division_by_a_variable_is_refused():
    s = Support(1, 0)
    assert s * 0 == 0 and 0 * s == 0 and s * Fraction(0) == 0
    assert (s * Support(1, 0)).k == 1 and (s * Support(1, 1)).k == 2 and (s + Support(1, 1)).g == -1
    with pytest.raises(TypeError):
        s / Support(1, 0)
    assert max_arity(np.array([s, 3, CONST, Support(2)], dtype=object)) == 2


def _phi(names_full, gp):
    """The substitution on full-ring monomials (exponent tuples) as flint monomials."""
    image = {}
    for v, sh in VARS.items():
        for ix in np.ndindex(*sh):
            image[entry_name(v, ix)] = gp.v[v][ix]
    return image


def test_the_substitution_is_injective_on_one_group_monomials_and_not_on_two():
    R, names, gen = _full_ring()
    gp = GroupedProblem(VARS, (), GROUPS, entry_name, display_name)
    image = _phi(names, gp)
    one_group, two_groups = {}, []
    grouped = [n for n in names if _group_of(n) is not None]
    glob = [n for n in names if _group_of(n) is None]
    for deg in (1, 2, 3):
        for combo in itertools.combinations_with_replacement(grouped + glob, deg):
            groups = {_group_of(n) for n in combo} - {None}
            img = 1
            for n in combo:
                img = img * image[n]
            key = str(img)
            if len(groups) <= 1:
                assert one_group.setdefault(key, combo) == combo, (combo, one_group[key])
            else:
                two_groups.append(key)
    # the determinant a_00 a_11 - a_01 a_10 (two groups) is mapped to zero: why arity is checked
    det = image["A[0,0]"] * image["A[1,1]"] - image["A[0,1]"] * image["A[1,0]"]
    assert det == 0


def _with_det_epilogue(con):
    """``con`` whose final state demands y + det(A[:2, :2]) (monomials in two groups): the
    layers do not compute it, and the substituted ring could not see the difference."""
    return with_final_extra(con, lambda A: A[0, 0] * A[1, 1] - A[0, 1] * A[1, 0])


def test_a_residual_in_two_groups_is_not_proved(monkeypatch):
    con = _with_det_epilogue(gd_baseconv_causal(3, 2))
    with monkeypatch.context() as m:  # without the arity check the substituted ring is blind to it
        import verify.prover.token_groups as tg
        m.setattr(tg, "max_arity", lambda A: 0)
        blind = prove(con, refute=False)  # the exact proof alone (refuting first would catch it)
        assert blind.ok and blind.ring.startswith("grouped substitution")
    res = prove(con, refute=False)
    assert not res.ok and res.ring == "full"
    assert res.failure.section == "epilogue"
    assert "A[0,0]" in res.failure.residual and "A[1,1]" in res.failure.residual


@pytest.mark.parametrize("arch", list(gd_architectures()))
def test_every_gd_architecture_gets_the_full_rings_verdict(arch):
    con = gd_architectures()[arch].build(4, 3)
    grouped = prove(con)
    plain = copy.copy(con)
    plain.token_groups = ()
    full = prove(plain)
    assert grouped.ok and full.ok and full.ring == "full"
    assert grouped.sections == full.sections and grouped.entries_checked == full.entries_checked
    if arch in ("baseconv", "baseconv-causal", "lsa", "elsa"):  # in the power-sum ring of power_sums.py
        assert grouped.ring.startswith("grouped substitution"), grouped.ring
        assert "power sums" in grouped.ring and "degree <= 2" in grouped.ring, grouped.ring
        assert grouped.symbolic_cover.startswith("the layers rebuilt"), grouped.symbolic_cover


def test_a_tampered_weight_fails_with_a_report_in_the_constructions_variables():
    con = gd_baseconv_causal(3, 2)
    B = con.body[0].map(lambda A: np.array(A, dtype=object))
    B.W_out[B.W_out != 0] = B.W_out[B.W_out != 0][0]  # every nonzero output weight the same
    res = prove(con, sections={"prologue": con.prologue, "body": [B], "epilogue": con.epilogue}, refute=False)
    assert not res.ok and res.ring == "full" and res.failure.section == "body"
    assert res.failure.counterexample is not None
    names = {entry_name(v, ix) for v, sh in con.variables.items() for ix in np.ndindex(*sh)} | {"eta"}
    assert res.failure.counterexample.assignment and set(res.failure.counterexample.assignment) <= names
