"""Evaluation on many scalar types (circuits.evaluate)."""
from fractions import Fraction

import gmpy2
import mpmath
import numpy as np
import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st
from sympy.polys.rings import ring

from circuits import (
    CircuitBuilder,
    CircuitError,
    evaluate,
    gd_step,
    horner,
    inputs,
    outputs,
    polynomials,
    random_circuit,
    to_ring,
)
from tests.strategies import circuits_st, rationals_st


def mult_circuit():
    """y = 3*x + (1/2) * x^2 * z, with x used 3 times in the add and twice in the mul."""
    b = CircuitBuilder()
    x, z = b.input("x"), b.input("z")
    s = b.add(x, x, x)
    p = b.mul(x, x, z, b.const(Fraction(1, 2)))
    b.output(b.add(s, p), "y")
    b.output(x, "x_out")  # an input node can be an output too
    return b.graph()


def test_evaluation_keeps_only_live_values():
    # a 60-gate chain with a side output: each value is dropped after its last consumer, so the
    # number of values alive at once stays small (the 100,000-gate proof's specification held
    # every node's polynomial: 9.7 GiB), and the outputs (one of them mid-chain) are kept
    import weakref

    alive = weakref.WeakSet()
    most = [0]

    class V:
        def __init__(self, x):
            self.x = x
            alive.add(self)
            most[0] = max(most[0], len(alive))

        def __add__(self, o):
            return V(self.x + (o.x if isinstance(o, V) else o))

        def __mul__(self, o):
            return V(self.x * (o.x if isinstance(o, V) else o))

    b = CircuitBuilder()
    y = x = b.input("x")
    for i in range(60):
        y = b.add(b.mul(y, x), y)
        if i == 10:
            b.output(y, "mid")
    b.output(y, "y")
    out = evaluate(b.graph(), {"x": V(Fraction(1, 2))}, const=lambda c: c)
    want = Fraction(1)
    for i in range(60):
        want = want * Fraction(3, 2) if i else Fraction(1, 2) * Fraction(3, 2)
        if i == 10:
            assert out["mid"].x == want
    assert out["y"].x == want
    assert most[0] <= 8, most[0]


def test_mult_means_repeated_operand():
    out = evaluate(mult_circuit(), {"x": Fraction(2), "z": Fraction(5)})
    assert out == {"x_out": 2, "y": 6 + 10}
    assert list(out) == ["x_out", "y"]
    x, z = sympy.symbols("x z")
    assert polynomials(mult_circuit()) == {"x_out": x, "y": 3 * x + x**2 * z / 2}


def test_missing_and_extra_inputs_rejected():
    g = mult_circuit()
    with pytest.raises(CircuitError, match=r"missing inputs \['z'\], unknown inputs \[\]"):
        evaluate(g, {"x": 1})
    with pytest.raises(CircuitError, match=r"unknown inputs \['w'\]"):
        evaluate(g, {"x": 1, "z": 2, "w": 3})


def test_const_callable_is_used():
    seen = []

    def conv(c):
        seen.append(c)
        return Fraction(0)

    out = evaluate(mult_circuit(), {"x": Fraction(2), "z": Fraction(5)}, const=conv)
    assert seen == [Fraction(1, 2)] and out["y"] == 6


def sample_circuit():
    g = random_circuit(7, n_inputs=3, n_gates=10, n_outputs=2, const_prob=0.4)
    # a non-dyadic constant makes float-vs-exact constant handling observable
    assert any(v.denominator == 3 for _, v in g.nodes(data="value") if v is not None)
    return g


POINT = {"x0": Fraction(1, 3), "x1": Fraction(-2, 5), "x2": Fraction(7, 4)}


def test_fraction_sympy_gmpy_agree_exactly():
    g = sample_circuit()
    exact = evaluate(g, POINT)
    assert all(type(v) is Fraction for v in exact.values())
    sym = evaluate(g, {k: sympy.Rational(v.numerator, v.denominator) for k, v in POINT.items()})
    assert {k: sympy.Rational(v.numerator, v.denominator) for k, v in exact.items()} == sym
    gm = evaluate(g, {k: gmpy2.mpq(v.numerator, v.denominator) for k, v in POINT.items()})
    assert {k: Fraction(int(v.numerator), int(v.denominator)) for k, v in gm.items()} == exact


def test_sympy_symbols_give_the_polynomials():
    g = sample_circuit()
    syms = {n: sympy.Symbol(n) for n in inputs(g)}
    out = evaluate(g, syms)
    polys = polynomials(g)
    assert all(sympy.expand(out[k] - polys[k]) == 0 for k in outputs(g))
    # constants become sympy Rationals (exact), visible when the output is a bare constant
    c = evaluate(horner([Fraction(1, 3)]), {"t": sympy.Symbol("t")})["p"]
    assert c == sympy.Rational(1, 3) and isinstance(c, sympy.Rational)


def test_mpmath_50_digits():
    g = sample_circuit()
    exact = evaluate(g, POINT)
    with mpmath.workdps(50):
        vals = evaluate(g, {k: mpmath.mpf(v.numerator) / v.denominator for k, v in POINT.items()})
        for k, v in vals.items():
            assert isinstance(v, mpmath.mpf)
            ref = mpmath.mpf(exact[k].numerator) / exact[k].denominator
            assert abs(v - ref) <= mpmath.mpf(10) ** -45 * max(1, abs(ref))


def test_numpy_float_batched_matches_exact_per_element():
    g = sample_circuit()
    rng = np.random.default_rng(0)
    batch = {k: rng.integers(-20, 21, size=(4, 5)) / 8.0 for k in inputs(g)}  # dyadic -> exact inputs
    out = evaluate(g, batch)
    for idx in np.ndindex(4, 5):
        exact = evaluate(g, {k: Fraction(float(v[idx])) for k, v in batch.items()})
        for k in outputs(g):
            assert out[k].shape == (4, 5) and out[k].dtype == np.float64
            # floats are the subject here: constants like 1/3 are rounded, so compare with a tolerance
            assert out[k][idx] == pytest.approx(float(exact[k]), rel=1e-12, abs=1e-12)


def test_numpy_float32_keeps_dtype():
    g = horner([Fraction(1, 3), 2, Fraction(-1, 2)])
    t = np.linspace(-1, 1, 7, dtype=np.float32)
    p = evaluate(g, {"t": t})["p"]
    assert p.dtype == np.float32
    np.testing.assert_allclose(p, 1 / 3 + 2 * t - t**2 / 2, rtol=1e-6)


def test_numpy_object_arrays_of_fractions_are_exact():
    g = sample_circuit()
    arr = {k: np.array([v, v + 1, -v], dtype=object) for k, v in POINT.items()}
    out = evaluate(g, arr)
    for i, shift in enumerate([lambda v: v, lambda v: v + 1, lambda v: -v]):
        exact = evaluate(g, {k: shift(v) for k, v in POINT.items()})
        for k in outputs(g):
            assert out[k][i] == exact[k] and type(out[k][i]) is Fraction


def test_polyelement_qq_and_to_ring():
    g = sample_circuit()
    R, *gens = ring(",".join(inputs(g)), sympy.QQ)
    direct = evaluate(g, dict(zip(inputs(g), gens)))
    assert direct == to_ring(g, R)
    for k, p in direct.items():
        assert p.ring == R
        assert p.as_expr() == polynomials(g)[k]
        pt = [sympy.Rational(POINT[n].numerator, POINT[n].denominator) for n in inputs(g)]
        assert p(*pt) == sympy.Rational(evaluate(g, POINT)[k].numerator, evaluate(g, POINT)[k].denominator)


def test_polyelement_over_zz_rejects_non_integer_constants():
    g = horner([Fraction(1, 2), 1])
    R, t = ring("t", sympy.ZZ)
    with pytest.raises(CircuitError, match="not in the ground domain"):
        evaluate(g, {"t": t})
    assert evaluate(horner([3, 1]), {"t": t})["p"] == t + 3


def test_to_ring_with_parameter_ring_and_explicit_gens():
    g = gd_step(1, 1, "eta")
    R, a, b, x, e = ring("a,b,x,e", sympy.QQ)
    out = to_ring(g, R, {"A_0_0": a, "b_0": b, "x_0": x, "eta": e})
    assert out["x_0"] == x - e * a * (a * x - b)
    with pytest.raises(CircuitError, match="no generators named"):
        to_ring(g, R)


def test_python_floats():
    out = evaluate(horner([Fraction(1, 10), 1]), {"t": 0.5})["p"]
    assert type(out) is float and out == 0.1 + 0.5


def test_circuit_without_inputs():
    g = random_circuit(3, n_inputs=0, n_gates=3)
    assert inputs(g) == []
    (v,) = evaluate(g, {}).values()
    assert type(v) is Fraction
    assert polynomials(g) == {"y0": sympy.Rational(v.numerator, v.denominator)}


@settings(deadline=None)
@given(circuits_st(), st.data())
def test_fractions_agree_with_polynomial_substitution(g, data):
    point = {n: data.draw(rationals_st(), label=n) for n in inputs(g)}
    vals = evaluate(g, point)
    polys = polynomials(g)
    subs = {sympy.Symbol(n): sympy.Rational(v.numerator, v.denominator) for n, v in point.items()}
    assert set(vals) == set(polys)
    for k, v in vals.items():
        assert polys[k].xreplace(subs) == sympy.Rational(v.numerator, v.denominator)


def test_evaluate_affine_matches_evaluate_exactly():
    """``evaluate_affine`` (the compiled circuits' specification) gives the same exact values as
    ``evaluate``: polynomials in QQ[x] and Fractions, on random circuits with constants, mults,
    zero constants and cancellations."""
    import sympy
    from sympy.polys.rings import ring

    from circuits import evaluate_affine
    from circuits.random import random_circuit
    from fractions import Fraction as F

    for seed in range(30):
        g = random_circuit(seed, 3, 25, max_arity=4, const_prob=0.3, n_outputs=3, max_degree=6)
        R, *gens = ring("x0,x1,x2", sympy.QQ)
        v = dict(zip(["x0", "x1", "x2"], gens))
        assert evaluate_affine(g, v) == evaluate(g, v)
        q = {"x0": F(2, 3), "x1": F(-5), "x2": F(7, 2)}
        assert evaluate_affine(g, q) == evaluate(g, q)
    b = CircuitBuilder()
    x = b.input("x")
    z = b.add(x, b.mul(b.const(-1), x))  # x - x: a zero form as a product's factor
    b.output(b.mul(z, x), "zero")
    b.output(b.mul(b.const(2), b.const(F(1, 2))), "one")
    b.output(b.mul(x, x, x), "cube")
    g = b.graph()
    assert evaluate_affine(g, {"x": F(3)}) == evaluate(g, {"x": F(3)}) == {"cube": 27, "one": 1, "zero": 0}
