"""verify/prover/modular.py: exact trials modulo a prime, all at once, agree with the Fraction trials,
catch a perturbed weight, and move to the next prime when one divides a denominator."""
from __future__ import annotations

import random
import warnings
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import circuits as C
from constructions.compiler import compile_circuit
from verify.prover import modular

from tests.strategies import circuits_st


def rational_trials(g, con, names, trials: int, seed: int, show: bool) -> int:
    """How many of ``trials`` random rational inputs give exactly the circuit's outputs, one at a
    time in Fractions: the slow, independent reference for ``verify.prover.modular.trials``."""
    rng = random.Random(seed)
    exact_ok = 0
    for _ in range(trials):
        vals = {n: Fraction(rng.randint(-9, 9), rng.randint(1, 9)) for n in names}
        want = C.evaluate(g, vals)
        S, _ = con.run(dict(vals), 0)
        got = con.readout(S)
        exact_ok += all(Fraction(np.asarray(got[o]).item()) == Fraction(want[o]) for o in want)
    return exact_ok


@pytest.mark.parametrize("target", ["baseconv-mlp", "baseconv", "baseconv-causal"])
@given(g=circuits_st())
def test_modular_and_fraction_trials_agree_on_compiled_circuits(target, g):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", C.PrunedNodesWarning)
        con = compile_circuit(g, target=target)
    names = C.inputs(con.graph)
    r = modular.trials(con.graph, con, names, 16, 0)
    assert r == {"prime": modular.PRIMES[0], "n": 16, "agree": 16}
    assert rational_trials(con.graph, con, names, 4, 0, False) == 4


def test_a_perturbed_weight_fails_every_trial():
    g = C.gd_step(3, 2, Fraction(1, 16), placed=True)
    con = compile_circuit(g)
    L = con.epilogue[-1]
    ix = next(ix for ix, x in np.ndenumerate(L.W_out) if x != 0)
    L.W_out[ix] = L.W_out[ix] + Fraction(1, 3)
    r = modular.trials(g, con, C.inputs(g), 32, 1)
    assert r["agree"] < 32


def test_a_prime_dividing_a_denominator_is_skipped():
    b = C.CircuitBuilder()
    x = b.input("x")
    b.output(b.mul(x, b.const(Fraction(1, modular.PRIMES[0]))), "y")
    g = b.graph()
    con = compile_circuit(g)
    r = modular.trials(g, con, ["x"], 8, 0)
    assert r["prime"] == modular.PRIMES[1] and r["agree"] == 8
    with pytest.raises(modular.Unrepresentable):
        modular.residue(Fraction(1, modular.PRIMES[0]), modular.PRIMES[0])


@given(a=st.integers(0, 2**31 - 2), b=st.integers(0, 2**31 - 2))
def test_mm_is_exact_modulo_p(a, b):
    p = modular.PRIMES[0]
    rng = np.random.default_rng(a)
    X = rng.integers(0, p, size=(3, 40), dtype=np.int64)
    Y = rng.integers(0, p, size=(40, 5), dtype=np.int64)
    X[0, 0], Y[0, 0] = a, b
    want = [[sum(int(X[i, k]) * int(Y[k, j]) for k in range(40)) % p for j in range(5)] for i in range(3)]
    assert modular.mm(X, Y, p).tolist() == want


@pytest.mark.parametrize("causal,same", [(True, False), (False, False), (False, True)])
def test_modular_convolution_follows_each_convention(causal, same):
    """verify.prover.modular.conv equals constructions.ops.conv (exact) in all three conventions."""
    from constructions import ops
    rng = np.random.default_rng(7)
    T, Cn, p = 5, 3, modular.PRIMES[0]
    v = rng.integers(-9, 9, size=(T, Cn))
    h = rng.integers(-9, 9, size=(T, Cn))
    want = ops.conv(v.astype(object), h.astype(object), causal=causal, same=same)
    got = modular.conv(v[None] % p, h % p, causal, p, same)[0]
    assert (got == np.vectorize(lambda x: modular.residue(x, p))(want).astype(np.int64)).all()
