"""The front ends' circuits compile and prove: a least-squares GD step ``x - eta A^T (A x - b)``, a
Newton-Schulz step ``M (2I - A^T A M)`` and a polynomial, each written with
``circuits.from_function`` and with ``circuits.from_sympy``, compiled by
``constructions.compiler.compile_circuit`` to several targets and proved by the prover (the verdict
is the kernel's), as the builders' circuits are (tests/constructions/test_compiler.py)."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import sympy as sp

import circuits as C
from constructions.compiler import compile_circuit
from verify.prover.kernel import Verdict, verdict
from verify.prover.proof import prove

ETA = Fraction(1, 16)
N, D = 4, 2


def gd_function():
    return C.from_function(lambda A, b, x: {"x": x - ETA * A.T @ (A @ x - b), "A": A, "b": b},
                           A=(N, D), b=(N,), x=(D,), placed=True)


def gd_sympy():
    A = sp.Matrix(N, D, lambda i, j: sp.Symbol(f"A_{i}_{j}"))
    b = sp.Matrix(N, 1, lambda i, _: sp.Symbol(f"b_{i}"))
    x = sp.Matrix(D, 1, lambda i, _: sp.Symbol(f"x_{i}"))
    return C.from_sympy({"x": x - sp.Rational(ETA.numerator, ETA.denominator) * A.T * (A * x - b), "A": A, "b": b},
                        placed=True)


def ns_function():
    return C.from_function(lambda A, M: {"M": M @ (2 * np.eye(D, dtype=int) - A.T @ A @ M), "A": A},
                           A=(N, D), M=(D, D), placed=True)


def ns_sympy():
    A = sp.Matrix(N, D, lambda i, j: sp.Symbol(f"A_{i}_{j}"))
    M = sp.Matrix(D, D, lambda i, j: sp.Symbol(f"M_{i}_{j}"))
    return C.from_sympy({"M": M * (2 * sp.eye(D) - A.T * A * M), "A": A}, placed=True)


COEFFS = [Fraction(1), Fraction(-1, 2), Fraction(1, 3), Fraction(0), Fraction(-1, 5), Fraction(1, 6)]


def poly_function():
    return C.from_function(lambda t: {"p": sum(c * t ** k for k, c in enumerate(COEFFS))}, t=(), placed=True)


def poly_sympy():
    t = sp.Symbol("t")
    return C.from_sympy({"p": sum(sp.Rational(c.numerator, c.denominator) * t ** k for k, c in enumerate(COEFFS))},
                        placed=True)


#: each front end's circuit, the builder circuit it must equal as polynomials, the targets it is proved on
CASES = {
    "gd-function": (gd_function, lambda: C.gd_step(N, D, ETA, placed=True), ("baseconv", "lsa", "elsa")),
    "gd-sympy": (gd_sympy, lambda: C.gd_step(N, D, ETA, placed=True), ("baseconv", "lsa", "elsa")),
    "newton-schulz-function": (ns_function, lambda: C.newton_schulz_step(D, N, placed=True), ("baseconv", "elsa")),
    "newton-schulz-sympy": (ns_sympy, lambda: C.newton_schulz_step(D, N, placed=True), ("baseconv", "elsa")),
    "poly-function": (poly_function, lambda: C.horner(COEFFS, placed=True), ("baseconv", "baseconv-causal", "lsa")),
    "poly-sympy": (poly_sympy, lambda: C.horner(COEFFS, placed=True), ("baseconv", "baseconv-causal", "lsa")),
}


@pytest.mark.parametrize("case", CASES)
def test_front_end_circuits_compile_and_prove(case):
    build, builder, targets = CASES[case]
    g, h = build(), builder()
    pg, ph = C.polynomials(g), C.polynomials(h)
    assert set(pg) == set(ph)
    for k, want in ph.items():  # the same polynomials as the hand-written builder
        assert sp.expand(pg[k] - want) == 0, k
    for target in targets:
        con = compile_circuit(g, name=case, target=target)
        res = prove(con)
        assert verdict(res) is Verdict.PROVED, (target, res.failure and res.failure.describe())


def test_a_compiled_front_end_step_runs_exactly_as_the_circuit_evaluates():
    g = gd_function()
    con = compile_circuit(g, target="baseconv")
    vals = {n: Fraction((7 * k) % 5 - 2, 1 + k % 3) for k, n in enumerate(C.inputs(g))}
    S = con.input_state(vals)
    for L in con.layers(0):
        S = L.forward(S)
    got = {k: Fraction(np.asarray(v).item()) for k, v in con.readout(S).items()}
    assert got == {k: Fraction(v) for k, v in C.evaluate(g, vals).items()}
