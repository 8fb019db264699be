"""circuits.frontend_sympy.from_sympy: polynomial sympy expressions written as circuits.

Random polynomials (Hypothesis) evaluate (``circuits.evaluate``) to sympy's own value at random
rational points; sharing, names, places and every refusal (one line naming the offending
subexpression) are checked on small cases."""
from __future__ import annotations

import warnings
from fractions import Fraction

import pytest
import sympy as sp
from hypothesis import given
from hypothesis import strategies as st

import circuits as C
from circuits.frontend_sympy import arrays_from_names, from_sympy

from tests.strategies import rationals_st

X, Y, Z = sp.symbols("x y z")
RATIONALS = st.fractions(min_value=-3, max_value=3, max_denominator=5).map(
    lambda f: sp.Rational(f.numerator, f.denominator))


def polys(max_leaves: int = 12):
    leaves = st.one_of(st.sampled_from([X, Y, Z]), RATIONALS)
    return st.recursive(leaves, lambda e: st.one_of(
        st.tuples(e, e).map(lambda t: t[0] + t[1]),
        st.tuples(e, e).map(lambda t: t[0] - t[1]),
        st.tuples(e, e).map(lambda t: t[0] * t[1]),
        st.tuples(e, st.integers(0, 3)).map(lambda t: t[0] ** t[1]),
        st.tuples(RATIONALS, e).map(lambda t: t[0] * t[1])), max_leaves=max_leaves)


def value(expr, point: dict) -> Fraction:
    v = expr.xreplace({s: sp.Rational(f.numerator, f.denominator) for s, f in point.items()})
    assert v.is_Rational, v
    return Fraction(int(v.p), int(v.q))


@given(p=polys(), q=polys(), data=st.data())
def test_random_polynomials_evaluate_to_sympys_value(p, q, data):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g = from_sympy({"p": p, "q": q})
    assert C.inputs(g) == sorted(s.name for s in (p.free_symbols | q.free_symbols))
    for _ in range(2):
        point = {s: data.draw(rationals_st(), label=s.name) for s in (X, Y, Z)}
        got = C.evaluate(g, {s.name: v for s, v in point.items() if s.name in C.inputs(g)})
        assert Fraction(got["p"]) == value(p, point) and Fraction(got["q"]) == value(q, point)


@given(p=polys(8))
def test_random_polynomials_are_the_same_polynomials(p):
    g = from_sympy({"p": p})
    assert sp.expand(C.polynomials(g)["p"] - p) == 0


def test_matrices_name_their_entries():
    M = sp.Matrix([[X, Y], [Y * Z, 1]])
    v = sp.Matrix([X, X * Y])
    g = from_sympy({"M": M * M, "v": v, "c": sp.Rational(2, 3), "n": 5})
    assert C.outputs(g) == ["M_0_0", "M_0_1", "M_1_0", "M_1_1", "c", "n", "v_0", "v_1"]
    got = C.evaluate(g, {"x": Fraction(2), "y": Fraction(3), "z": Fraction(5)})
    want = (M * M).subs({X: 2, Y: 3, Z: 5})
    assert [got[f"M_{i}_{j}"] for i in range(2) for j in range(2)] == list(want)
    assert (got["v_0"], got["v_1"], got["c"], got["n"]) == (2, 6, Fraction(2, 3), 5)


def test_common_subexpressions_are_shared():
    s = (X + Y) ** 2
    g = from_sympy({"p": s * Z + s, "q": s - 1, "r": (X + Y) * Z})
    sums_of_x_and_y = [v for v, d in g.nodes(data=True) if d["op"] == "add"
                       and sorted(g.nodes[u].get("name", "") for u in g.predecessors(v)) == ["x", "y"]]
    assert len(sums_of_x_and_y) == 1


def test_horner_form_nested_unevaluated():
    t = sp.Symbol("t")
    e = sp.Integer(1)
    for k in range(100):
        e = sp.Add(sp.Rational(1, k + 2), sp.Mul(t, e, evaluate=False), evaluate=False)
    g = from_sympy({"p": e})
    assert C.evaluate(g, {"t": Fraction(0)})["p"] == Fraction(1, 101)
    assert C.evaluate(g, {"t": Fraction(1, 2)})["p"] == value(e, {t: Fraction(1, 2)})


def test_placed_reads_arrays_from_names_like_the_builders():
    n, d, eta = 4, 2, sp.Rational(1, 16)
    A = sp.Matrix(n, d, lambda i, j: sp.Symbol(f"A_{i}_{j}"))
    b = sp.Matrix(n, 1, lambda i, _: sp.Symbol(f"b_{i}"))
    x = sp.Matrix(d, 1, lambda i, _: sp.Symbol(f"x_{i}"))
    g = from_sympy({"x": x - eta * A.T * (A * x - b), "A": A, "b": b}, placed=True)
    assert C.placement(g) == C.placement(C.gd_step(n, d, Fraction(1, 16), placed=True))
    M = sp.Matrix(d, d, lambda i, j: sp.Symbol(f"M_{i}_{j}"))
    g = from_sympy({"M": M * (2 * sp.eye(d) - A.T * A * M), "A": A}, placed=True)
    h = C.newton_schulz_step(d, n, placed=True)
    assert C.placement(g) == C.placement(h)
    assert all(sp.expand(C.polynomials(g)[k] - C.polynomials(h)[k]) == 0 for k in C.outputs(h))


def test_arrays_from_names():
    shapes, entries = arrays_from_names(["eta", "x_1", "x_0", "A_1_0", "A_0_0"])
    assert shapes == {"A": (2, 1), "eta": (), "x": (2,)}
    assert entries["A"] == [((0, 0), "A_0_0"), ((1, 0), "A_1_0")]


@pytest.mark.parametrize("names, words", [
    (["x_0", "x_2"], "x_0, x_2 do not fill an array x"),
    (["x", "x_0"], "x, x_0 do not fill an array x"),
    (["x_01"], "x_01 do not fill an array x"),
])
def test_placed_refuses_names_that_do_not_fill_arrays(names, words):
    with pytest.raises(C.CircuitError, match="placed=True reads the inputs as arrays name_i_j, and " + words):
        arrays_from_names(names)


def test_explicit_places():
    g = from_sympy({"x": X * Y, "z": X + Y}, placed={"x": (0, 0), "y": (1, 0)})
    assert C.placement(g).inputs == {"x": (0, 0), "y": (1, 0)}
    assert C.placement(g).outputs == {"x": (0, 0), "z": None}
    with pytest.raises(C.CircuitError, match="placed: no places for an input y"):
        from_sympy({"z": X + Y}, placed={"x": (0, 0)})


@pytest.mark.parametrize("outputs, words", [
    ({"y": sp.sin(X) + 1}, "output 'y': sin(x) (sin) is not a polynomial with rational coefficients"),
    ({"y": sp.exp(X) * Y}, "output 'y': exp(x) (exp) is not a polynomial"),
    ({"y": sp.Abs(X)}, "output 'y': Abs(x) (Abs) is not a polynomial"),
    ({"y": sp.Piecewise((X, X > 0), (0, True))}, "output 'y': Piecewise((x, x > 0), (0, True)) (Piecewise)"),
    ({"y": X / Y}, "output 'y': 1/y divides by a variable (a negative power)"),
    ({"y": (X + 1) ** -2}, "output 'y': (x + 1)**(-2) divides by a variable"),
    ({"y": sp.sqrt(X) + 1}, "output 'y': sqrt(x) is a power by 1/2, not by an integer"),
    ({"y": X ** sp.Rational(1, 3)}, "output 'y': x**(1/3) is a power by 1/3, not by an integer"),
    ({"y": X ** Y}, "output 'y': x**y is a power by y, not by an integer"),
    ({"y": X ** 65}, "output 'y': x**65 is a power by 65, above the limit circuits.frontend.MAX_POWER = 64"),
    ({"y": sp.sqrt(2) * X}, "output 'y': sqrt(2) is a power by 1/2"),
    ({"y": sp.pi * X}, "output 'y': pi (Pi) is not a polynomial"),
    ({"y": sp.I * X}, "output 'y': I (ImaginaryUnit) is not a polynomial"),
    ({"y": sp.oo * X}, "output 'y': oo (Infinity) is not a polynomial"),
    ({"y": sp.Eq(X, 1)}, "output 'y': Eq(x, 1) (Equality) is not a polynomial"),
    ({"y": sp.Float(0.5) * X + 1}, "output 'y': the float coefficient 0.5 in 0.5*x is refused (floats are not exact)"),
    ({"y": sp.Float(0.1) * X}, "output 'y': the float coefficient 0.1 in 0.1*x is refused"),
    ({"M": sp.Matrix([X, 1 / X])}, "output 'M_1': 1/x divides by a variable"),
    ({"y": 0.5}, "output 'y' is the float 0.5; floats are refused (not exact)"),
    ({"y": "x + 1"}, "output 'y' is a str, not a sympy expression (sympy parses strings with eval"),
    ({"y": None}, "output 'y' is a NoneType, not a sympy expression"),
    ({"y": True}, "output 'y' is a bool, not a sympy expression"),
    ({1: X}, "the output name 1 is not a non-empty str"),
    ({"v": sp.Matrix([X, Y]), "v_1": X}, "outputs 'v' and 'v_1' both name the output 'v_1'"),
    ({"y": X + sp.Symbol("x", positive=True)}, "two different symbols are named 'x'"),
    ({}, "give a non-empty dict {output name: expression}, got dict (empty)"),
    ([X], "give a non-empty dict {output name: expression}, got list"),
    ({"m": sp.zeros(0, 2)}, "no output values (empty matrices)"),
    ({"y": sp.MatrixSymbol("A", 2, 2) * sp.MatrixSymbol("x", 2, 1)},
     "output 'y' is a matrix expression (MatMul); its entries are not symbols: build explicit matrices"),
])
def test_refusals_name_the_offending_subexpression_in_one_line(outputs, words):
    with pytest.raises(C.CircuitError) as e:
        from_sympy(outputs)
    msg = str(e.value)
    assert msg.startswith("from_sympy: ") and words in msg and "\n" not in msg, msg


def test_placed_must_be_a_known_form():
    with pytest.raises(C.CircuitError, match="placed must be True, False or a dict of places, got 'rows'"):
        from_sympy({"y": X}, placed="rows")
