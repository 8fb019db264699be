"""verify/prover/modp.py: every layer kind's own Layer.forward on residues modulo p (one trial or many)
agrees with verify.prover.modular's hand-vectorised forward and with the Fraction forward reduced mod p;
a kind verify.prover.modular does not know runs through it, and one whose forward is not a ring map is
refused in one line."""
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings

from constructions import ops
from constructions.layers import Layer
from verify.prover import modp, modular

from tests.constructions.test_layers import any_layer

WIDE_PRIME = 2_305_843_009_213_693_951  # 2^61 - 1


@settings(max_examples=40, deadline=None)
@given(case=any_layer())
def test_layer_forward_on_residues_is_the_fraction_forward_and_the_fast_path(case):
    L, x = case
    want_q = L.forward(x)
    for p in (modular.PRIMES[0], WIDE_PRIME):
        want = modular.residues(want_q, p)
        S = modular.residues(x, p)[None]
        fast = modular.forward(modular.layer_residues(L, p), S, p)[0]
        generic = modp.forward_trials(modp.layer_mod(L, p), S, p)[0]
        assert generic.tolist() == want.tolist() == fast.tolist()


def test_many_trials_at_once_equal_one_at_a_time():
    rng = np.random.default_rng(3)
    p = modular.PRIMES[1]
    layer = Square()
    S = rng.integers(0, p, size=(5, 3, 2), dtype=np.int64)
    S[:, 0, 0] = 0  # an entry zero in every trial: the structural zero
    got = modular.forward(modular.layer_residues(layer, p), S, p)
    for t in range(5):
        one = modp.forward_trials(modp.layer_mod(layer, p), S[t:t + 1], p)[0]
        assert one.tolist() == got[t].tolist() == [[int(v) * int(v) % p + 1 for v in row] for row in S[t]]


@dataclass
class Square(Layer):
    """A kind verify.prover.modular has no hand-written forward for: u -> u . u + 1 (entry-wise)."""

    kind = "square-test"

    def forward(self, u, *, conv_method="direct"):
        one = ops.zeros_like_object(np.shape(u)) if ops.is_object(u) else np.zeros_like(u)
        one[...] = 1
        return ops.add(ops.hadamard(u, u), one)

    def arrays(self):
        return {}

    def map(self, f):
        return self

    @classmethod
    def names_for(cls, config):
        return []

    @classmethod
    def from_arrays(cls, config, arrays):
        return cls()


class Halve(Square):
    """A forward that is not a ring map: division by a state entry."""

    kind = "halve-test"

    def forward(self, u, *, conv_method="direct"):
        return u / u


def test_a_kind_without_a_fast_path_runs_its_own_forward_and_a_non_ring_one_is_one_line():
    p = modular.PRIMES[0]
    u = np.array([[[3, 0], [p - 1, 2]]], dtype=np.int64)
    got = modular.forward(modular.layer_residues(Square(), p), u, p)
    assert got.tolist() == [[[10, 1], [2, 5]]]
    with pytest.raises(modular.ModularUnsupported) as e:
        modular.forward(modular.layer_residues(Halve(), p), u, p)
    assert "'halve-test' cannot run modulo p" in str(e.value) and "\n" not in str(e.value)
    assert modp.residue_array(np.array([Fraction(1, 3), 0], dtype=object), lambda q: modular.residue(q, p))[1] == 0


@pytest.mark.parametrize("target", ["baseconv", "baseconv-causal", "lsa", "elsa"])
def test_the_trials_agree_on_both_forwards_and_both_catch_a_wrong_weight(target, monkeypatch):
    """The circuit command's trials run Layer.forward on residues (TRIALS_FORWARD); the
    hand-written forward gives the same counts, on a correct stack and on a perturbed one."""
    import circuits as C
    from constructions.compiler import compile_circuit

    g = C.gd_step(3, 2, Fraction(1, 16), placed=True)
    con = compile_circuit(g, target=target)
    names = C.inputs(g)
    got = {}
    for path in ("layer", "hand"):
        monkeypatch.setattr(modular, "TRIALS_FORWARD", path)
        got[path] = modular.trials(g, con, names, 24, 5)
    assert got["layer"] == got["hand"] == {"prime": modular.PRIMES[0], "n": 24, "agree": 24}
    L = con.layers(0)[-1]
    name, A = next((k, a) for k, a in L.arrays().items() if any(x != 0 for x in np.asarray(a, dtype=object).flat))
    ix = next(ix for ix, x in np.ndenumerate(A) if x != 0)
    A[ix] = A[ix] + Fraction(1, 3)
    for path in ("layer", "hand"):
        monkeypatch.setattr(modular, "TRIALS_FORWARD", path)
        got[path] = modular.trials(g, con, names, 24, 5)
    assert got["layer"] == got["hand"] and got["layer"]["agree"] < 24
