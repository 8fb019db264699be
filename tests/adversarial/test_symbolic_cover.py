"""A symbolic proof must cover the construction's own (concrete) layers.

``prove`` proves ``con.rebuild(eta=<symbol>)``.  A builder that branches on the value (``if eta
== 1/16``) builds other layers at the value than on a symbol, and ``_same_stack(con,
con.rebuild(**con.params))`` cannot see it (the rebuild at the value branches the same way): the
construction was PROVED while ``prove(con, symbolic=False)`` FAILED.  Now the symbolic layers
are evaluated at the concrete parameters and compared with the construction's own, exactly;
where they differ the own layers are proved at the concrete values.
"""
from __future__ import annotations

import dataclasses
from fractions import Fraction

import pytest

from constructions.gd_baseconv import gd_baseconv
from constructions.gd_attention import gd_elsa, gd_lsa
from verify.prover.proof import prove, prove_intermediate_states, symbolic_cover


def sneaky(n=3, d=2, *, eta=None, wrong=Fraction(1, 8)):
    """gd-baseconv whose builder, at eta == 1/16 exactly, builds the layers of eta = ``wrong``."""
    con = gd_baseconv(n, d, eta=eta)
    if isinstance(eta, (Fraction, int)) and eta == Fraction(1, 16):
        con = dataclasses.replace(gd_baseconv(n, d, eta=wrong), params=con.params)
    return dataclasses.replace(con, rebuild=lambda **kw: sneaky(n, d, wrong=wrong, **kw))


@pytest.mark.parametrize("backend", ["flint", "sympy"])
def test_branching_builder_is_not_proved(backend):
    con = sneaky(eta=Fraction(1, 16))
    assert con.symbolic_params == ("eta",)
    assert not prove(con, symbolic=False, backend=backend).ok
    assert not prove(con, backend=backend).ok  # refuted first, at the concrete value
    r = prove(con, backend=backend, refute=False)  # the exact proof alone: what its cover says
    assert not r.ok  # PROVED before the fix
    assert r.symbolic_params == []  # proved at the concrete value
    assert "differ from the construction's own" in r.symbolic_cover and "body layer 2" in r.symbolic_cover


def test_branching_builder_intermediate_states_cover():
    con = sneaky(eta=Fraction(1, 16))
    r = prove_intermediate_states(con)
    assert r.symbolic_params == [] and "differ" in r.symbolic_cover


def test_branch_to_equal_layers_is_still_symbolic():
    """A branch that builds the same layers (here: eta = 1/16 again) is covered: the proof stays
    symbolic and says so."""
    con = sneaky(eta=Fraction(1, 16), wrong=Fraction(1, 16))
    r = prove(con)
    assert r.ok and r.symbolic_params == ["eta"]
    assert r.symbolic_cover.startswith("the layers rebuilt on symbolic eta equal the construction's own")


@pytest.mark.parametrize("build", [lambda: gd_baseconv(3, 2), lambda: gd_lsa(3, 2), lambda: gd_elsa(3, 2)])
@pytest.mark.parametrize("backend", ["flint", "sympy"])
def test_honest_constructions_are_covered(build, backend):
    con = build()
    r = prove(con, backend=backend)
    assert r.ok and r.symbolic_params and "equal the construction's own" in r.symbolic_cover


def test_cover_reports_the_first_differing_entry():
    con = gd_baseconv(3, 2, eta=Fraction(1, 16))
    other = gd_baseconv(3, 2, eta=Fraction(1, 8))
    layers = {s: getattr(other, s) for s in ("prologue", "body", "epilogue")}
    assert symbolic_cover(con, layers, (), 0) is not None
    same = {s: getattr(con, s) for s in ("prologue", "body", "epilogue")}
    assert symbolic_cover(con, same, (), 0) is None
    # a concrete parameter that is not a number cannot be covered
    bad = dataclasses.replace(con, params={"eta": "x"})
    assert "not an exact number" in symbolic_cover(bad, same, ("eta",), 1)
