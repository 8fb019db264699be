"""Refute first (verify/prover/refute.py, issue 41 item 1): wrong weights are FAILED at an integer point
with an exact counterexample, before (and instead of) the exact proof's rings; weights the construction
does not read stay PROVED; a refutation never reads PROVED; the commands refute first.

* Hypothesis changes one entry of one weight of an exact construction (gd-baseconv, gd-lsa, a compiled
  circuit) by a nonzero rational: where the exact proof alone (``refute=False``) says FAILED (the entry
  is read), ``refute`` FAILS it too, with a counterexample that reproduces exactly (the section's layers
  rerun on its integer point in Fractions: the two values differ and are the reported ones); where the
  exact proof says PROVED (a don't-care entry), nothing is refuted and ``prove`` (refuting first) PROVES.
* ``gd --weights`` and ``import`` on a tampered file: FAILED by the refutation with the full ring never
  run (its proof function replaced by one that fails the test); the all-ones file of
  ``tests/adversarial/test_proof_limits.py`` is FAILED within a quarter GiB.
"""
from __future__ import annotations

import functools
import io
import json
import pickle
import re
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

import circuits as C
from constructions.base import run_layers
from constructions.compiler import compile_circuit
from constructions.gd_attention import gd_lsa
from constructions.gd_baseconv import gd_baseconv
from constructions.sparse import dense
from verify.construct import main as construct_main
from verify.prover import proof as P
from verify.prover import refute as R
from verify.prover.kernel import Verdict, is_proved, verdict
from verify.prover.proof import (LOCATED_STATES, problem_from_assignment, prove, replay_counterexample, replay_culprit,
                                 section_claims)
from verify.prover.rings import exact_layer
from tests.verify.prover.tampering import tampered


# ------------------------------------------------------------------ constructions and their changes

def _dot_circuit():
    """y = a0 b0 + a1 b1 on a 2-token x 2-channel grid (README's quick start)."""
    b = C.CircuitBuilder()
    a = [(b.input(f"a{i}", token=i, channel=0), b.input(f"b{i}", token=i, channel=1)) for i in range(2)]
    b.output(b.add(*(b.mul(ai, bi) for ai, bi in a)), "y", token=1, channel=1)
    return compile_circuit(b.graph(), name="dot", target="baseconv")


CONSTRUCTIONS = {"gd-baseconv": lambda: gd_baseconv(3, 2), "gd-lsa": lambda: gd_lsa(3, 2), "circuit": _dot_circuit}


@functools.lru_cache(maxsize=None)
def _built(name):
    con = CONSTRUCTIONS[name]()
    secs = {sec: [L.map(dense) for L in getattr(con, sec)] for sec in ("prologue", "body", "epilogue")}
    slots = []  # (section, layer, array number, size) of every weight array
    for sec, Ls in secs.items():
        for li, L in enumerate(Ls):
            sizes = []
            L.map(lambda A: sizes.append(np.size(A)) or A)
            slots += [(sec, li, j, n) for j, n in enumerate(sizes) if n]
    return con, secs, slots


def _changed(secs, sec, li, j, flat, delta):
    """``secs`` with entry ``flat`` of weight array ``j`` of ``secs[sec][li]`` changed by ``delta``."""
    count = [0]

    def f(A):
        if count[0] == j:
            A = np.asarray(A, dtype=object).copy()
            A.flat[flat] = A.flat[flat] + delta
        count[0] += 1
        return A

    out = {s: list(Ls) for s, Ls in secs.items()}
    out[sec][li] = secs[sec][li].map(f)
    return out


DELTAS = st.sampled_from([Fraction(1), Fraction(-1), Fraction(1, 2), Fraction(3), Fraction(-1, 16), Fraction(1, 3)])


def check_refutation(con, secs, res):
    """A refutation: FAILED (never PROVED, never sealed), an integer point, the counterexample and the
    culprit reproduced exactly by rerunning the layers on that point in Fractions."""
    assert res is not None and not res.ok and verdict(res) is Verdict.FAILED and res.seal == ""
    f = res.failure
    assert f.located_by.endswith(f"({R.REFUTED})") and res.ring.startswith("integer point")
    assert "refuted by a randomized identity test" in f.note and "not formed" in f.residual
    assert all(Fraction(x).denominator == 1 for x in f.counterexample.assignment.values())
    got, want = replay_counterexample(con, secs, f)
    assert got != want and got == Fraction(f.counterexample.got) and want == Fraction(f.counterexample.expected)
    assert con.layout.locate(*f.state_index) == (f.region, f.entry)
    if f.culprit is not None:
        assert f.located_by.startswith(LOCATED_STATES)
        got, want = replay_culprit(con, secs, f)
        assert got != want and (got, want) == (Fraction(f.culprit.counterexample.got),
                                                Fraction(f.culprit.counterexample.expected))


@pytest.mark.parametrize("name", list(CONSTRUCTIONS))
@given(data=st.data())
def test_a_changed_entry_is_refuted_exactly_and_a_dont_care_entry_still_proves(name, data):
    con, secs, slots = _built(name)
    sec, li, j, n = data.draw(st.sampled_from(slots), label="array")
    flat = data.draw(st.integers(0, n - 1), label="entry")
    delta = data.draw(DELTAS, label="delta")
    changed = _changed(secs, sec, li, j, flat, delta)
    exact = prove(con, sections=changed, refute=False)  # the exact proof alone: is the entry read?
    res = R.refute(con, changed)
    if is_proved(exact):
        event("a don't-care entry: still PROVED")
        assert res is None
        again = prove(con, sections=changed)  # refuting first
        assert is_proved(again) and again.ring == exact.ring
    else:
        event("a read entry: refuted")
        check_refutation(con, changed, res)
        assert prove(con, sections=changed).failure == res.failure  # prove refutes first, the same way


def test_junk_in_a_scratch_channel_is_not_refuted():
    """gd-baseconv body layer 0 writing 5 into the scratch channel s1 (layer 1 drops it): PROVED."""
    con, secs, _ = _built("gd-baseconv")
    L0 = secs["body"][0].map(lambda A: np.asarray(A, dtype=object).copy())
    L0.b_out[:, con.layout.cols("s1")[0]] = 5
    junk = {**secs, "body": [L0, *secs["body"][1:]]}
    assert R.refute(con, junk) is None and is_proved(prove(con, sections=junk))


# ------------------------------------------------------------------ the verdict



def test_a_refutation_never_reads_proved():
    con = gd_baseconv(4, 2)
    res = prove(con, sections=tampered(con))
    assert verdict(res) is Verdict.FAILED and not is_proved(res) and res.seal == ""
    assert verdict(pickle.loads(pickle.dumps(res))) is Verdict.FAILED
    res.ok, res.failure = True, None  # made to look proved: still FAILED (the kernel never sealed it)
    res.sections = {k: True for k in res.sections}
    assert verdict(res) is Verdict.FAILED


def test_the_refutation_module_cannot_seal():
    """refute.py neither calls nor imports the kernel's sealing function (the kernel test checks the
    callers of ``conclude`` by name; this checks the module's own imports)."""
    with open(R.__file__) as fh:
        text = fh.read()
    assert "conclude" not in text
    assert "kernel import differing, first_mismatch, is_zero" in text


def test_prove_refutes_first_and_the_full_ring_is_not_run(monkeypatch):
    con = gd_baseconv(6, 3)
    secs = tampered(con)

    def boom(*a, **k):
        raise AssertionError("the exact proof ran on weights the refutation should have failed")

    monkeypatch.setattr(P, "_prove", boom)
    res = prove(con, sections=secs)
    check_refutation(con, secs, res)
    assert (res.failure.section, res.failure.layer_in_section) == ("body", 0)
    assert res.failure.located_by == f"{LOCATED_STATES} ({R.REFUTED})"


def test_a_smaller_rings_difference_is_refuted_with_more_points(monkeypatch):
    """Where the first points miss (none tried here) and the grouped ring finds a difference, more points
    are tried before the full ring (whose specification is never built)."""
    con = gd_baseconv(4, 2)
    secs = tampered(con)
    monkeypatch.setattr(R, "POINT_BOUNDS", ())

    def boom(*a, **k):
        raise AssertionError("the full ring ran")

    monkeypatch.setattr(P, "proof_specification", boom)
    res = prove(con, sections=secs)
    check_refutation(con, secs, res)


def test_symbolic_parameters_are_refuted_at_the_constructions_values():
    """A builder wrong at every step size, proved symbolically in eta by the exact proof: refuted at the
    construction's own eta (1/8), no ``eta`` in the counterexample."""
    def wrong(n, d, *, eta=None):
        con = gd_baseconv(n, d, eta=eta)
        B = con.body[2].map(lambda A: np.asarray(A, dtype=object).copy())
        B.W_out[B.W_out != 0] = -B.W_out[B.W_out != 0]
        con.body[2] = B
        con.rebuild = lambda **p: wrong(n, d, **p)
        return con

    con = wrong(3, 2, eta="1/8")
    res = prove(con)
    assert not res.ok and res.symbolic_params == [] and "eta" not in res.failure.counterexample.assignment
    check_refutation(con, {sec: getattr(con, sec) for sec in ("prologue", "body", "epilogue")}, res)
    assert not prove(con, refute=False).ok  # the exact proof agrees (symbolically)


def test_dense_float_weights_are_refuted_exactly(monkeypatch):
    """gd-baseconv 20 x 5 with every weight entry moved by a small float (a few fine-tuning steps): the
    issue's file that made ``gd --weights`` stop at 4 GiB; refuted in rationals, the full ring never run."""
    con = gd_baseconv(20, 5)
    rng = np.random.default_rng(0)

    def moved(A):
        A = np.asarray(A, dtype=object)
        return np.vectorize(lambda x: float(x) + float(rng.standard_normal()) * 2.0**-20, otypes=[float])(A)

    secs = {sec: [L.map(moved) for L in getattr(con, sec)] for sec in ("prologue", "body", "epilogue")}
    monkeypatch.setattr(P, "_prove", lambda *a, **k: pytest.fail("the full ring ran"))
    res = prove(con, sections=secs)
    assert res.ring.startswith("integer point") and "exact in rationals" in res.ring
    check_refutation(con, secs, res)


def test_a_learned_file_is_refuted_exactly_through_flint_products(monkeypatch):
    """A module trained a few Adam steps (``tests/verify/trained_files.py``: every weight a dense float) is
    FAILED with the exact counterexample: the section evaluated in gmpy2 rationals with its dense products
    in FLINT (``ops.mm_rational`` taken, never declined), and the counterexample and the culprit
    reproduce in Fractions (``replay_counterexample``, the prover's own evaluation)."""
    from constructions import ops
    from tests.verify.trained_files import trained_module

    con = gd_baseconv(12, 4)
    m = trained_module(con, 1, "polyverify", steps=3)
    layers = m.layers()  # float64 arrays, every entry moved by the training
    p, b = len(con.prologue), len(con.body)
    secs = {"prologue": layers[:p], "body": layers[p:p + b], "epilogue": layers[p + b:]}
    taken = []
    real = ops.mm_rational
    monkeypatch.setattr(ops, "mm_rational", lambda X, Y: taken.append(real(X, Y) is not None) or real(X, Y))
    res = R.refute(con, secs, shrink_seconds=0)  # (prove's first step; the sparse point is not the subject)
    assert res.ring.startswith("integer point") and "exact in rationals" in res.ring
    assert taken and all(taken)
    check_refutation(con, secs, res)


def test_too_large_an_exact_evaluation_reports_residues_modulo_p(monkeypatch):
    con = gd_baseconv(4, 2)
    secs = tampered(con)
    monkeypatch.setattr(R, "EXACT_ENTRIES", 1)
    res = R.refute(con, secs)
    f = res.failure
    assert verdict(res) is Verdict.FAILED and f.located_by.endswith(f"({R.REFUTED})")
    assert "the values are residues modulo p" in f.note and f.counterexample.got.endswith("(mod p)")
    p = int(re.search(r"modulo p = (\d+)", res.ring).group(1))
    v = problem_from_assignment(con.variables, f.counterexample.assignment)
    _, start, target = next(c for c in section_claims(con, v) if c[0] == f.section)
    got = Fraction(run_layers([exact_layer(L) for L in secs[f.section]], start())[f.state_index])
    want = Fraction(target()[f.state_index])

    def mod(q):
        return q.numerator * pow(q.denominator, -1, p) % p

    assert got != want
    assert (mod(got), mod(want)) == (int(f.counterexample.got.split()[0]), int(f.counterexample.expected.split()[0]))


def test_an_exact_evaluation_that_fails_falls_back_to_residues(monkeypatch):
    """Whatever the exact evaluation at the point cannot do, the failure is still reported (modulo p)."""
    con = gd_baseconv(4, 2)

    def broken(self, *a, **k):
        raise RuntimeError("broken")

    monkeypatch.setattr(R._Exact, "at", broken)
    res = R.refute(con, tampered(con))
    assert verdict(res) is Verdict.FAILED and "it raised RuntimeError" in res.failure.note


def test_the_counterexample_is_sparse():
    """At 24 x 6 the point has 174 coordinates; the counterexample names a handful."""
    con = gd_baseconv(24, 6)
    res = R.refute(con, tampered(con))
    assert 0 < len(res.failure.counterexample.assignment) <= 6, res.failure.counterexample.assignment


# ------------------------------------------------------------------ the commands

@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A gd --export file (N=6, D=3, depth 4: no prologue), the same with one W_out entry of body layer 1
    doubled, and with every entry 1 (tests/adversarial/test_proof_limits.py's file)."""
    from safetensors import safe_open
    from safetensors.numpy import save_file

    d = tmp_path_factory.mktemp("refute")
    good = d / "good.safetensors"
    assert construct_main(["gd", "--layers", "4", "--n", "6", "--d", "3", "--batch", "2", "--quiet",
                           "--export", str(good)], out=io.StringIO()) == 0
    with safe_open(str(good), "np") as f:
        meta = f.metadata()
        t = {k: f.get_tensor(k) for k in f.keys()}
    w = t["layers.1.W_out"].copy()
    w[tuple(np.argwhere(w != 0)[0])] *= 2
    bad = d / "bad.safetensors"
    save_file({**t, "layers.1.W_out": w}, str(bad), metadata=meta)
    ones = d / "ones.safetensors"
    save_file({k: np.ones_like(a) for k, a in t.items()}, str(ones), metadata=meta)
    return good, bad, ones


@pytest.fixture
def no_full_ring(monkeypatch):
    """The exact proof replaced by a failure (the proof's child is forked: it sees the patch, and the
    exception crosses back)."""
    def boom(*a, **k):
        raise AssertionError("the exact proof ran on a file the refutation should have failed")

    monkeypatch.setattr(P, "_prove", boom)


def test_gd_weights_on_a_tampered_file_is_refuted_without_the_full_ring(files, tmp_path, no_full_ring):
    _, bad, _ = files
    out, rep = io.StringIO(), tmp_path / "r.json"
    assert construct_main(["gd", "--weights", str(bad), "--batch", "2", "--quiet", "--json", str(rep)], out=out) == 1
    text = out.getvalue()
    assert "proof: FAILED" in text and "refuted by a randomized identity test" in text, text
    assert "body fails at stack layer 1 (body layer 1)" in text and "counterexample: A[" in text
    proof = json.loads(rep.read_text())["proof"]
    assert proof["ring"].startswith("integer point") and proof["failure"]["located_by"].endswith(f"({R.REFUTED})")


def test_the_all_ones_file_is_refuted_within_a_quarter_gib(files):
    """The file that made FLINT abort at 4.9 GB (now FAILED, exit 1, within --proof-memory-gib 0.25)."""
    _, _, ones = files
    out = io.StringIO()
    rc = construct_main(["gd", "--weights", str(ones), "--batch", "2", "--quiet", "--proof-memory-gib", "0.25"],
                        out=out)
    assert rc == 1 and "proof: FAILED" in out.getvalue() and "refuted by a randomized" in out.getvalue()


def test_import_refutes_first(files, no_full_ring):
    _, bad, _ = files
    out = io.StringIO()
    rc = construct_main(["import", str(bad), "--from", "polyverify", "--spec", "gd-baseconv", "--no-search"],
                        out=out)
    assert rc == 1 and "refuted by a randomized identity test" in out.getvalue(), out.getvalue()


def test_a_good_file_still_proves(files):
    good, _, _ = files
    out = io.StringIO()
    assert construct_main(["gd", "--weights", str(good), "--batch", "2", "--quiet"], out=out) == 0
    assert "proof: PROVED" in out.getvalue()


def test_compare_weights_reports_the_refutation():
    from verify.compare import compare
    from verify.comparison import constructed_stack, stack_of

    con = gd_baseconv(4, 2)
    built = constructed_stack(con, 1)
    layers = list(built.layers)
    L = layers[1].map(lambda A: np.asarray(A, dtype=object).copy())
    L.W_out[tuple(np.argwhere(L.W_out != 0)[0])] *= 2
    layers[1] = L
    rep = compare(con, stack_of(con, layers), built, weights=True, problems=4, iter_sigmas=(),
                  skip=("functional", "sensitivities", "polynomial", "invariants", "implicit_w", "iterate"))
    w = rep["weights"]
    assert not w["exact"] and w["refutation"]["section"] == "body"
    assert "refuted by a randomized identity test" in w["first_failure"]
