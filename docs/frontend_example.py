"""From Python and sympy (docs/compiler.md, section "From Python and sympy"; run by
tests/circuits/test_frontend_docs.py).

A least-squares GD step written as numpy and a polynomial written in sympy, each turned into a
circuit by a front end, compiled to several targets and proved; then one refused operation.
"""
from fractions import Fraction

import numpy as np
import sympy as sp

import circuits as C
from constructions.compiler import compile_circuit
from verify.prover.kernel import verdict
from verify.prover.proof import prove

eta = Fraction(1, 16)  # exact constants: int or Fraction (a float is refused)


def gd_step(A, b, x):  # x - eta A^T (A x - b) in numpy; A and b pass through, so it is a repeatable body
    return {"x": x - eta * A.T @ (A @ x - b), "A": A, "b": b}


g = C.from_function(gd_step, A=(20, 5), b=(20,), x=(5,), placed=True)  # inputs A_i_j, b_i, x_j; rows are tokens
t = sp.Symbol("t")
p = C.from_sympy({"p": 1 - t / 2 + t**2 / 3 - t**5 / 7}, placed=True)  # the symbols are the inputs
for name, circuit, targets in (("gd", g, ("baseconv", "lsa", "elsa")), ("poly", p, ("baseconv", "baseconv-causal"))):
    for target in targets:
        con = compile_circuit(circuit, name=name, target=target)
        print(f"{name} on {target}: {len(con.layers(0))} layers, {verdict(prove(con)).value}")
try:
    C.from_function(lambda A: np.sqrt(A @ A.T), A=(2, 2))
except C.UnsupportedOperation as e:
    print(e)  # one line: the operation and the source line that asked for it
