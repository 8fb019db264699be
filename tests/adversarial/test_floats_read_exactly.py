"""Every backend and both sides of a proof read a float as its exact binary value.

sympy's ring turned a Python float into a nearby "nice" rational (``QQ.convert(0.1)`` is 1/10):
``prove_identity`` proved ``x*(1+2**-52) == x`` and ``x*0.1 == x/10``; a GD stack with one weight
``1 + 2**-52`` where 1 is needed was PROVED by ``prove(con, backend="sympy")`` (FAILED by flint);
a specification with a float fell back from flint to sympy silently and was read the nice way.
Each case below was PROVED before the fix.
"""
from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np
import pytest
import sympy

from constructions.base import PartialState
from constructions.gd_baseconv import gd_baseconv
from verify.prover.proof import (FloatRefused, SymbolicProblem, proof_arithmetic, proof_specification, exact_float, prove,
                          prove_identity, prove_intermediate_states)

ULP = 1 + 2**-52
BACKENDS = ("flint", "sympy")


def ident(lhs, rhs):
    return prove_identity("t", {"x": (2,)}, lhs, rhs)


def test_identity_with_a_float_one_ulp_off_fails():
    r = ident(lambda v: v["x"] * ULP, lambda v: v["x"])
    assert not r.ok
    assert r.failure.counterexample is not None


def test_identity_with_decimal_float_is_its_binary_value():
    assert not ident(lambda v: v["x"] * 0.1, lambda v: v["x"] / 10).ok
    assert ident(lambda v: v["x"] * 0.1, lambda v: v["x"] * Fraction(0.1)).ok
    assert ident(lambda v: v["x"] * 0.5, lambda v: v["x"] / 2).ok  # a float that is exactly 1/2
    f32 = np.float32(0.1)
    assert ident(lambda v: v["x"] * f32, lambda v: v["x"] * Fraction(13421773, 134217728)).ok
    assert not ident(lambda v: v["x"] * f32, lambda v: v["x"] / 10).ok
    assert not ident(lambda v: v["x"] * sympy.Float(0.1), lambda v: v["x"] / 10).ok


def test_identity_with_float_constants_on_one_side():
    """A side that is a plain float constant (no ring element to convert it) is exact too."""
    assert not prove_identity("c", {"x": (1,)}, lambda v: np.array([0.1], dtype=object),
                              lambda v: np.array([Fraction(1, 10)], dtype=object)).ok
    assert prove_identity("c", {"x": (1,)}, lambda v: np.array([0.25]), lambda v: np.array([Fraction(1, 4)])).ok


def _bumped(con, value):
    """``con`` with its first body layer's first weight entry equal to 1 replaced by ``value``."""
    L = con.body[0]
    name, a = next((n, a) for n, a in L.arrays().items() if any(type(x) is int and x == 1 for x in a.flat))
    idx = next(i for i, x in np.ndenumerate(a) if type(x) is int and x == 1)

    def f(arr):
        if arr is a:
            arr = arr.copy()
            arr[idx] = value
        return arr

    return [L.map(f)] + list(con.body[1:])


@pytest.mark.parametrize("backend", BACKENDS)
def test_gd_stack_with_one_ulp_weight_fails_on_every_backend(backend):
    con = gd_baseconv(3, 2)
    secs = {"prologue": con.prologue, "body": _bumped(con, ULP), "epilogue": con.epilogue}
    assert not prove(con, sections=secs, backend=backend).ok
    secs["body"] = _bumped(con, 1.0)  # the float 1.0 is exactly 1
    assert prove(con, sections=secs, backend=backend).ok


@pytest.mark.parametrize("backend", BACKENDS)
def test_gd_stack_with_one_ulp_weight_fails_symbolically(backend):
    """The construction's own (edited) layers, no sections: proved as they are."""
    con = gd_baseconv(3, 2)
    bad = dataclasses.replace(con, body=_bumped(con, ULP))
    assert not prove(bad, backend=backend).ok


@pytest.mark.parametrize("backend", BACKENDS)
def test_specification_with_a_float_is_read_exactly(backend):
    """A specification that multiplies its final state by a float: before, flint fell back to
    sympy's ring for it and both read 1 + 2**-52 as 1."""
    con = gd_baseconv(3, 2)
    orig = con.final_state
    bad = dataclasses.replace(con)
    bad.final_state = lambda v: orig(v) * ULP
    r = prove(bad, symbolic=False, backend=backend)
    assert not r.ok and r.failure.section == "epilogue"
    ok = dataclasses.replace(con)
    ok.final_state = lambda v: orig(v) * 1.0
    assert prove(ok, symbolic=False, backend=backend).ok


def test_flint_computes_a_float_specification_in_flint():
    """No silent fallback to sympy for a float: the specification's variables are flint's."""
    from verify.prover.flint_backend import FPoly

    con = gd_baseconv(3, 2)
    orig = con.final_state
    c = dataclasses.replace(con)
    c.final_state = lambda v: orig(v) * 0.1
    sp = SymbolicProblem(c.variables)
    ar = proof_arithmetic("flint", sp.R)
    _, v, _ = proof_specification(c, sp, ar, ())
    assert all(isinstance(x, FPoly) for x in v["A"].flat)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), np.float32("inf")])
def test_non_finite_weight_is_refused(backend, bad):
    con = gd_baseconv(3, 2)
    secs = {"prologue": con.prologue, "body": _bumped(con, bad), "epilogue": con.epilogue}
    with pytest.raises(FloatRefused, match="non-finite"):
        prove(con, sections=secs, backend=backend)


def test_intermediate_states_read_floats_exactly():
    con = gd_baseconv(3, 2)
    assert prove_intermediate_states(con).ok
    # an own layer one ulp off
    assert not prove_intermediate_states(dataclasses.replace(con, body=_bumped(con, ULP))).ok
    # a declared state one ulp off
    c = dataclasses.replace(con)
    orig = con.intermediate_states

    def declared(v, sec):
        ds = orig(v, sec)
        if ds is None:
            return None
        return [None if d is None else PartialState(d.expected * ULP, d.mask) for d in ds]

    c.intermediate_states = declared
    r = prove_intermediate_states(c, symbolic=False)
    assert not r.ok


def test_exact_float_values():
    assert exact_float(0.1) == Fraction(3602879701896397, 36028797018963968)
    assert exact_float(np.float16(0.1)) == Fraction(np.float16(0.1).item())
    assert exact_float(np.longdouble(1) / 3) == Fraction(*(np.longdouble(1) / 3).as_integer_ratio())
    assert exact_float(sympy.Float(0.1)) == Fraction(0.1)
    assert exact_float(3) is None and exact_float(Fraction(1, 3)) is None and exact_float(True) is None
    with pytest.raises(FloatRefused):
        exact_float(1j)
