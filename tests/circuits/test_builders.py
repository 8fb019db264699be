"""Builders vs. the same formulas written independently with sympy Matrices."""
from fractions import Fraction

import pytest
import sympy
from sympy import Matrix, Rational, Symbol, eye

from circuits import (
    CircuitError,
    dot,
    evaluate,
    gd_step,
    horner,
    inputs,
    matvec,
    metrics,
    newton_schulz_step,
    outputs,
    placement,
    polynomials,
    ridge_gd_step,
)


def sym_mat(name, rows, cols):
    return Matrix(rows, cols, lambda i, j: Symbol(f"{name}_{i}_{j}"))


def sym_vec(name, n):
    return Matrix(n, 1, lambda i, _: Symbol(f"{name}_{i}"))


def run_symbolic(g):
    """Evaluate the circuit on sympy symbols named after its inputs."""
    return evaluate(g, {n: Symbol(n) for n in inputs(g)})


def assert_same(got: dict, want: dict):
    assert set(got) == set(want)
    for k in want:
        assert sympy.expand(got[k] - want[k]) == 0, k


@pytest.mark.parametrize("n", [1, 2, 4])
def test_dot(n):
    g = dot(n)
    u = Matrix([Symbol(f"u{i}") for i in range(n)])
    v = Matrix([Symbol(f"v{i}") for i in range(n)])
    assert inputs(g) == sorted([f"u{i}" for i in range(n)] + [f"v{i}" for i in range(n)])
    assert_same(run_symbolic(g), {"y": (u.T * v)[0, 0]})


@pytest.mark.parametrize("m,n", [(1, 1), (2, 3), (3, 2)])
def test_matvec(m, n):
    A, x = sym_mat("A", m, n), sym_vec("x", n)
    y = A * x
    assert_same(run_symbolic(matvec(m, n)), {f"y_{i}": y[i] for i in range(m)})


def gd_reference(n, d, eta, lam=0):
    A, b, x = sym_mat("A", n, d), sym_vec("b", n), sym_vec("x", d)
    x1 = x - eta * (A.T * (A * x - b) + lam * x)
    return {f"x_{j}": x1[j] for j in range(d)}


@pytest.mark.parametrize("n,d", [(1, 1), (3, 2), (2, 3)])
def test_gd_step_rational_eta(n, d):
    g = gd_step(n, d, Fraction(1, 3))
    assert "eta" not in inputs(g)
    assert outputs(g) == [f"x_{j}" for j in range(d)]
    assert_same(run_symbolic(g), gd_reference(n, d, Rational(1, 3)))


@pytest.mark.parametrize("n,d", [(2, 2), (3, 1)])
def test_gd_step_symbolic_eta(n, d):
    g = gd_step(n, d, "eta")
    assert "eta" in inputs(g)
    got = run_symbolic(g)
    assert_same(got, gd_reference(n, d, Symbol("eta")))
    # and as exact polynomials: eta appears linearly
    assert all(sympy.degree(p, Symbol("eta")) == 1 for p in polynomials(g).values())


@pytest.mark.parametrize("n,d", [(1, 1), (3, 2), (2, 3)])
@pytest.mark.parametrize("lam", [None, Fraction(1, 10), "lam"])
def test_gram_form_is_the_same_step_as_another_circuit(n, d, lam):
    """form="gram" builds (A^T A) x - A^T b: the same polynomials, a different circuit (products
    within a data row first), in the same places."""
    mk = (lambda f: gd_step(n, d, "eta", placed=True, form=f)) if lam is None else \
        (lambda f: ridge_gd_step(n, d, "eta", lam, placed=True, form=f))
    g0, g1 = mk("residual"), mk("gram")
    assert_same(run_symbolic(g1), run_symbolic(g0))
    assert placement(g1) == placement(g0)
    assert g1.number_of_nodes() != g0.number_of_nodes()
    with pytest.raises(ValueError, match="form must be one of residual, gram"):
        gd_step(n, d, "eta", form="normal")


def test_gd_step_integer_and_sympy_eta():
    assert_same(run_symbolic(gd_step(2, 2, 2)), gd_reference(2, 2, 2))
    assert_same(run_symbolic(gd_step(2, 2, Rational(-3, 7))), gd_reference(2, 2, Rational(-3, 7)))


@pytest.mark.parametrize("eta,lam", [(Fraction(1, 4), Fraction(1, 10)), ("eta", Fraction(2)),
                                     (Fraction(1, 2), "lam"), ("eta", "lam")])
def test_ridge_gd_step(eta, lam):
    g = ridge_gd_step(2, 3, eta, lam)
    e = Symbol(eta) if isinstance(eta, str) else Rational(eta.numerator, eta.denominator)
    la = Symbol(lam) if isinstance(lam, str) else Rational(lam.numerator, lam.denominator)
    assert_same(run_symbolic(g), gd_reference(2, 3, e, la))
    assert ("lam" in inputs(g)) == isinstance(lam, str)


@pytest.mark.parametrize("d,n", [(1, 1), (2, 3), (3, 2)])
def test_newton_schulz_step(d, n):
    A, M = sym_mat("A", n, d), sym_mat("M", d, d)
    M1 = M * (2 * eye(d) - A.T * A * M)
    g = newton_schulz_step(d, n)
    assert outputs(g) == sorted(f"M_{i}_{j}" for i in range(d) for j in range(d))
    assert_same(run_symbolic(g), {f"M_{i}_{j}": M1[i, j] for i in range(d) for j in range(d)})
    assert metrics(g)["degree"] == 4  # M * A^T * A * M


@pytest.mark.parametrize("coeffs", [[5], [1, 2], [Fraction(1, 2), 0, -3, Fraction(7, 3)], [0, 0, 1]])
def test_horner(coeffs):
    t = Symbol("t")
    want = sum(Rational(Fraction(c).numerator, Fraction(c).denominator) * t**i for i, c in enumerate(coeffs))
    g = horner(coeffs)
    assert inputs(g) == ["t"] and outputs(g) == ["p"]
    assert_same(run_symbolic(g), {"p": want})
    assert metrics(g)["depth"] == 2 * (len(coeffs) - 1)


def test_builder_argument_errors():
    with pytest.raises(CircuitError, match="not exact"):
        gd_step(2, 2, 0.1)
    with pytest.raises(CircuitError, match="not exact"):
        ridge_gd_step(2, 2, Fraction(1, 2), 0.5)
    with pytest.raises(CircuitError, match="not exact"):
        horner([1, 0.5])
    with pytest.raises(CircuitError, match="at least one coefficient"):
        horner([])
    with pytest.raises(CircuitError, match="n must be a positive int"):
        dot(0)
    with pytest.raises(CircuitError, match="d must be a positive int"):
        newton_schulz_step(0, 2)
    with pytest.raises(CircuitError, match="duplicate input name 'x_0'"):
        gd_step(1, 1, "x_0")
