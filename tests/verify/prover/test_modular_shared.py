"""One modular forward for the import's parameter solve and the refutation (verify/prover/refute.py's
``forward_shared`` and ``offer_points``): inside ``shared_memo`` a layer evaluated twice on an equal state is
evaluated once (the same values as a fresh evaluation), and the refutation tries the offered points first, so a
tampered stack is refuted at the offered point with an exact counterexample; outside a block nothing is kept."""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from constructions.gd_baseconv import gd_baseconv
from verify.prover import modular
from verify.prover import refute as R
from verify.prover.kernel import Verdict, verdict
from verify.prover.proof import replay_counterexample
from tests.verify.prover.tampering import tampered




def _point(con, seed: int, bound: int) -> dict:
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in con.variables.items():
        a = np.empty(shape, dtype=object)
        a[...] = rng.integers(-bound, bound + 1, size=shape).tolist() if shape else int(rng.integers(-bound, bound))
        out[name] = a
    return out


def test_forward_shared_evaluates_an_equal_state_once_with_the_same_values(monkeypatch):
    con = gd_baseconv(4, 2)
    p = R.first_prime()
    Lr = modular.layer_residues(con.body[0], p)
    S = np.random.default_rng(0).integers(0, p, size=(1,) + tuple(con.layout.shape), dtype=np.int64)
    calls = []
    real = modular.forward
    monkeypatch.setattr(modular, "forward", lambda L, u, q: calls.append(1) or real(L, u, q))
    fresh = real(Lr, S, p)
    assert np.array_equal(R.forward_shared(Lr, S, p), fresh) and len(calls) == 1  # outside a block: computed
    with R.shared_memo():
        a = R.forward_shared(Lr, S, p)
        b = R.forward_shared(Lr, S.copy(), p)  # an equal state, another array: the first output
        assert a is b and np.array_equal(a, fresh) and not a.flags.writeable
        S2 = S.copy()
        S2[0, 0, 0] = (S2[0, 0, 0] + 1) % p
        c = R.forward_shared(Lr, S2, p)  # another state: evaluated
        assert np.array_equal(c, real(Lr, S2, p))
        assert len(calls) == 3
    R.forward_shared(Lr, S, p)  # the block's memo is gone
    assert len(calls) == 4


def test_offered_points_are_tried_first_and_the_counterexample_reproduces(monkeypatch):
    con = gd_baseconv(4, 2)
    secs = tampered(con)
    offered = _point(con, 7, 64)
    with R.shared_memo():
        R.offer_points([{"nope": np.zeros(2, dtype=object)}, offered], 64)  # the first fits no variable: skipped
        seen = []
        real = R._modular_mismatch
        monkeypatch.setattr(R, "_modular_mismatch", lambda c, pl, pt, p, ca: seen.append(pt) or real(c, pl, pt, p, ca))
        res = R.refute(con, secs)
    assert res is not None and verdict(res) is Verdict.FAILED and res.seal == ""
    assert seen[0] is offered  # the offered point first
    assert "[-64, 64]" in res.ring  # found there: its bound reported
    got, want = replay_counterexample(con, secs, res.failure)
    assert got != want and got == Fraction(res.failure.counterexample.got)


def test_outside_a_block_offered_points_are_not_kept():
    con = gd_baseconv(4, 2)
    R.offer_points([_point(con, 7, 64)], 64)
    res = R.refute(con, tampered(con))
    assert res is not None and "[-8, 8]" in res.ring  # its own first point (POINT_BOUNDS)


def test_lazily_read_weights_are_refuted_as_their_eager_values():
    """A stack whose weights are lazily read floats (constructions/exact_floats.py) is refuted with the same
    failure as the same values in eager object arrays: residues, cost estimate and exact evaluation read them."""
    from constructions.exact_floats import ExactFloats, is_lazy

    con = gd_baseconv(4, 2)
    eager = tampered(con)
    lazy = {sec: [L.map(lambda A: ExactFloats(np.asarray(A, dtype=np.float64))) for L in Ls]
            for sec, Ls in eager.items()}
    assert all(is_lazy(A) for A in lazy["body"][0].arrays().values())
    a, b = R.refute(con, eager), R.refute(con, lazy)
    assert a is not None and b is not None and a.failure == b.failure
    assert is_lazy(R.prepared(lazy["body"][0]).W_out)  # kept lazy: no Fraction per entry


def test_a_bias_repeated_on_every_token_keeps_its_objects_and_its_zeros_become_structural():
    """refute._structural_zeros on a (T, C) bias whose C values repeat on every token (more distinct objects
    than _FEW, each at least _REPEATS times): the same values, zeros the int 0, the rest the same objects."""
    rng = np.random.default_rng(0)
    T, C = 40, R._FEW + 10
    row = [Fraction(int(x), 2**20) for x in rng.integers(1, 2**20, C)]
    row[3] = Fraction(0)
    b = np.empty((T, C), dtype=object)
    for t in range(T):
        b[t] = row
    B = R._structural_zeros(b)
    assert B is not b and (B == b).all()
    assert all(type(x) is int and x == 0 for x in B[:, 3])
    assert all(B[t, 5] is row[5] for t in range(T))
