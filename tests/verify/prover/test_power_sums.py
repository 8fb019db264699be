"""verify/prover/power_sums.py: the power-sum ring proves only what the full ring proves.

* the abstract degree bounds (:class:`Support`'s ``dg``, ``dx``) cover the true degrees of every
  monomial, on random polynomial expressions;
* the power-sum substitution is injective on the one-group monomials within the degree bounds,
  and is not one degree beyond (two slot multisets with equal first two power sums);
* a residual of degree 3 that the degree-2 ring maps to zero is refused: the degree bound the
  abstract evaluation finds is 3, the ring of degree 3 sees it, and the full proof reports it
  (with the bound forced down to 2, the proof would be blind to it);
* (tests/verify/prover/test_token_groups.py: the GD architectures take the power-sum ring and
  reach the full ring's verdict.)
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given

from constructions.gd_baseconv import gd_baseconv
from tests.verify.prover.expressions import evaluate, expressions, with_final_extra
from verify.prover.power_sums import PowerSumProblem, power_sums_fit
from verify.prover.proof import display_name, entry_name, prove
from verify.prover.token_groups import Support, abstract_variables

N, D = 3, 5
VARS = {"A": (N, D), "b": (N,), "x": (2,)}
GROUPS = ("A", "b")
NAMES = [entry_name(v, ix) for v, sh in VARS.items() for ix in np.ndindex(*sh)]


def _is_grouped(name: str) -> bool:
    return name.startswith(("A[", "b["))


def _group_of(name: str):
    return int(name[2:].split(",")[0].rstrip("]")) if _is_grouped(name) else None


@given(expressions(NAMES, max_leaves=10))
def test_the_degree_bounds_cover_every_monomial(expr):
    from sympy import QQ, Symbol
    from sympy.polys.rings import ring

    R, *gens = ring([Symbol(n) for n in NAMES], QQ)
    gen = dict(zip(NAMES, gens))
    av = abstract_variables(VARS, GROUPS)
    flat = {entry_name(v, ix): av[v][ix] for v, sh in VARS.items() for ix in np.ndindex(*sh)}
    p = R(evaluate(expr, lambda n: gen[n]))
    a = evaluate(expr, lambda n: flat[n])
    for mono in p.monoms():
        dg = sum(e for n, e in zip(NAMES, mono) if _is_grouped(n))
        dx = sum(e for n, e in zip(NAMES, mono) if not _is_grouped(n))
        if isinstance(a, Support):
            assert a.dg is not None and a.dx is not None
            assert dg <= a.dg and dx <= a.dx, (expr, mono, a)
        else:  # an exact constant
            assert dg == dx == 0


def _images(ps):
    return {entry_name(v, ix): ps.v[v][ix] for v, sh in VARS.items() for ix in np.ndindex(*sh)}


def _product(image, combo):
    out = 1
    for n in combo:
        out = out * image[n]
    return out


@pytest.mark.parametrize("hg,hx", [(1, 1), (2, 1), (3, 2)])
def test_injective_on_one_group_monomials_within_the_bounds(hg, hx):
    ps = PowerSumProblem(VARS, (), GROUPS, entry_name, display_name, (hg, hx))
    image = _images(ps)
    grouped = [n for n in NAMES if _is_grouped(n)]
    glob = [n for n in NAMES if not _is_grouped(n)]
    seen: dict = {}
    for eg in range(hg + 1):
        for part in itertools.combinations_with_replacement(grouped, eg):
            if len({_group_of(n) for n in part}) > 1:
                continue
            for ex in range(hx + 1):
                for rest in itertools.combinations_with_replacement(glob, ex):
                    key = str(_product(image, part + rest))
                    assert seen.setdefault(key, part + rest) == part + rest, (part + rest, seen[key])
    assert len(seen) > 10


def test_not_injective_one_degree_beyond():
    """Slot multisets {0, 3, 3} and {1, 1, 4} have equal first and second power sums (6, 18):
    degree-3 monomials the degree-2 ring cannot tell apart, and the degree-3 ring can."""
    lhs = ("A[0,0]", "A[0,3]", "A[0,3]")
    rhs = ("A[0,1]", "A[0,1]", "A[0,4]")
    two = _images(PowerSumProblem(VARS, (), GROUPS, entry_name, display_name, (2, 1)))
    three = _images(PowerSumProblem(VARS, (), GROUPS, entry_name, display_name, (3, 1)))
    assert _product(two, lhs) == _product(two, rhs)
    assert _product(three, lhs) != _product(three, rhs)


def test_bounds_that_do_not_fit_are_refused():
    assert power_sums_fit(129, 2) and not power_sums_fit(10**6, 4)
    with pytest.raises(ValueError, match="exceed"):
        PowerSumProblem({"A": (2, 10**5), "x": (1,)}, (), ("A",), entry_name, display_name, (4, 1))


def _with_cubic_epilogue(con):
    """``con`` whose final state demands y + a00 a03^2 - a01^2 a04 (one group, degree 3): the
    layers do not compute it, and the degree-2 power-sum ring maps it to zero."""
    return with_final_extra(con, lambda A: A[0, 0] * A[0, 3] * A[0, 3] - A[0, 1] * A[0, 1] * A[0, 4])


def test_a_residual_beyond_the_found_degree_is_not_proved(monkeypatch):
    con = _with_cubic_epilogue(gd_baseconv(3, 5))
    with monkeypatch.context() as m:  # degree bounds forced to GD's own (2, 1): the ring is blind to it
        import verify.prover.token_groups as tg
        m.setattr(tg, "max_degrees", lambda *arrays: (2, 1))
        blind = prove(con, refute=False)  # the exact proof alone (refuting first would catch it)
        assert blind.ok and "power sums" in blind.ring, blind.ring
    res = prove(con, refute=False)
    assert not res.ok and res.ring == "full"
    assert res.failure.section == "epilogue"
    assert "A[0,3]" in res.failure.residual and "A[0,4]" in res.failure.residual
