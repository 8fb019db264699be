"""verify/prover/flint_backend.py: the flint backend reaches the sympy backend's verdict, failure
location, residual and counterexample, on every GD architecture and on perturbed weights."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from constructions.catalogue import gd_architectures
from verify.prover.flint_backend import FPoly, FlintRing
from verify.prover.proof import SymbolicProblem, prove


def verdict(res):
    f = res.failure
    return (res.ok, res.sections, None if f is None else (f.section, f.layer, f.state_index, f.residual,
                                                          f.counterexample, f.located_by))


@pytest.mark.parametrize("arch", list(gd_architectures()))
def test_both_backends_prove_every_architecture(arch):
    con = gd_architectures()[arch].build(3, 2)
    a, b = prove(con, backend="flint"), prove(con, backend="sympy")
    assert a.backend == "flint" and b.backend == "sympy"
    assert verdict(a) == verdict(b) and a.ok


@pytest.mark.parametrize("arch", list(gd_architectures()))
@given(data=st.data())
def test_a_perturbed_weight_gets_the_same_verdict_from_both_backends(arch, data):
    con = gd_architectures()[arch].build(2, 2)
    sec = data.draw(st.sampled_from([s for s in ("prologue", "body", "epilogue") if getattr(con, s)]))
    layers = [L.map(lambda A: np.array(A, dtype=object)) for L in getattr(con, sec)]
    i = data.draw(st.integers(0, len(layers) - 1))
    arrays = layers[i].arrays()
    name = data.draw(st.sampled_from(sorted(arrays)))
    A = arrays[name]
    ix = tuple(data.draw(st.integers(0, n - 1)) for n in A.shape)
    A[ix] = A[ix] + Fraction(data.draw(st.sampled_from([1, -1, 3])), data.draw(st.sampled_from([1, 4, 1024])))
    sections = {s: list(getattr(con, s)) for s in ("prologue", "body", "epilogue")}
    sections[sec] = layers
    a, b = prove(con, sections=sections, backend="flint"), prove(con, sections=sections, backend="sympy")
    assert verdict(a) == verdict(b)


def test_fpoly_mixes_with_ints_and_fractions_and_is_not_a_sequence():
    sp = SymbolicProblem({"x": (2,)})
    ring = FlintRing(sp.R)
    x0, x1 = ring.gens
    e = Fraction(1, 3) * x0 + 2 * x1 - x0 * x1 + Fraction(1, 2)
    assert isinstance(e, FPoly)
    arr = np.zeros(3, dtype=object)
    arr[:] = e  # broadcast as one scalar, never as a sequence of terms
    assert all(v is e for v in arr)
    assert ring.to_sympy(ring.scalar(e)) == sp.R(Fraction(1, 3)) * sp.gens[0] + 2 * sp.gens[1] \
        - sp.gens[0] * sp.gens[1] + sp.R(Fraction(1, 2))
    assert (e - e) == 0 and e != 0
