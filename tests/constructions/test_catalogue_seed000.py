"""Seed 000 catalogue: App. D.2.1 READ / LINEAR / MULTIPLY, D.2.3 Newton, Theorem D.38 (Algorithm 2,
and Horner), Theorem D.31 (softmax attention != SQUARE), and the seed 000 errata.

Every construction is proved exactly at its default sizes and at random sizes (Hypothesis), run
exactly on random rational inputs against a by-hand computation, broken by perturbing one weight
(the proof must fail with a counterexample that really breaks the layers), and built through the
CLI.  Every seed 000 erratum: the as-printed form is rejected with a counterexample, the corrected
form is proved.
"""
import io
import json
import re
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from constructions.base import Construction, run_layers
from constructions.catalogue import entries, errata
from constructions.catalogue.seed000_errata import causal_gd_layer
from constructions.catalogue.seed000_newton import flat_product_monomial, gram_layer, newton
from constructions.catalogue.seed000_poly import poly, poly_horner
from constructions.catalogue.seed000_primitives import linear, multiply, read
from constructions.catalogue.seed000_softmax import (attention_enclosure, attention_mp, certify_witness,
                                                     check_softmax_square, derive_witness,
                                                     softmax_vs_square_witness)
from verify.construct import main
from verify.prover.proof import ProofResult, check, prove, replay_counterexample

NAMES = {"s000-read", "s000-linear", "s000-multiply", "s000-newton", "s000-poly", "s000-poly-horner",
         "s000-softmax-square"}
CONSTRUCTION_NAMES = sorted(NAMES - {"s000-softmax-square"})
ERRATA_IDS = {"S000-read-shift-up", "S000-newton-last-linear", "S000-newton-gram-flat-product",
              "S000-causal-gd-layer1", "S000-causal-gd-layer2-sums"}
q_st = st.fractions(min_value=-3, max_value=3, max_denominator=4)


def F(a):
    return [Fraction(z) for z in np.asarray(a, dtype=object).flat]


def mat(draw, r, c, elem=q_st):
    a = np.empty((r, c), dtype=object)
    for idx in np.ndindex(r, c):
        a[idx] = draw(elem)
    return a


def run(layers, S):
    return run_layers(layers, S)


def own_sections(con):
    return {"prologue": list(con.prologue), "body": list(con.body), "epilogue": list(con.epilogue)}


def first_nonzero(a):
    for idx, z in np.ndenumerate(a):
        if z != 0:
            return idx
    raise AssertionError("array has no nonzero entry")


def perturbed(layer, name, delta=Fraction(1, 1024)):
    L = layer.map(lambda a: a.copy())
    arr = L.arrays()[name]
    idx = first_nonzero(arr)
    arr[idx] = arr[idx] + delta
    return L


def check_counterexample(con, sections, failure):
    """Run the failing section exactly on the counterexample: the layers really miss the spec there."""
    ce = failure.counterexample
    assert ce is not None  # an empty assignment is the all-zero input
    got, want = replay_counterexample(con, sections, failure)
    assert got != want
    assert got == Fraction(ce.got) and want == Fraction(ce.expected)


# ----------------------------------------------------------------------------- registry / defaults

def test_entries_registered_with_paper_and_docstring():
    cat = entries()
    assert NAMES <= set(cat)
    for name in NAMES:
        e = cat[name]
        assert e.paper.startswith("seed 000") and e.claim and e.summary
        doc = e.build.__doc__ or ""
        assert re.search(r"eq\. \(\d+\)|Theorem D\.\d+|Algorithm 2|App\. D\.\d", doc), name
        assert all(isinstance(v, int) and v >= 1 for v in e.sizes.values())


@pytest.mark.parametrize("name", sorted(NAMES))
def test_default_sizes_proved(name):
    e = entries()[name]
    res = check(e.build(**e.sizes))
    assert isinstance(res, ProofResult)
    assert res.ok, res.failure and res.failure.describe()


@pytest.mark.parametrize("name", sorted(NAMES))
def test_cli_json(tmp_path, name):
    path = tmp_path / "r.json"
    out = io.StringIO()
    assert main([name, "--json", str(path)], out=out) == 0
    rep = json.loads(path.read_text())
    assert rep["command"] == name and rep["proof"]["ok"] is True and rep["proof"]["failure"] is None
    # a certified witness (seed 000 Thm. D.31) is WITNESSED, never PROVED; everything else is PROVED
    witness = rep["proof"].get("witness") is not None
    assert ("check: WITNESSED" if witness else "proof: PROVED") in out.getvalue()
    assert rep["verdict"] == ("witnessed" if witness else "proved")
    if name in CONSTRUCTION_NAMES:
        assert rep["built"]["kind"] == "construction" and rep["built"]["state_size"] > 0
    else:
        assert rep["built"]["kind"] == "identity" and rep["proof"]["witness"]["entry"]


def test_cli_sizes_and_bad_sizes(tmp_path):
    path = tmp_path / "r.json"
    # i > j: READ up the sequence, circular convolution
    assert main(["s000-read", "--set", "i=5", "--set", "j=2", "--json", str(path)], out=io.StringIO()) == 0
    assert json.loads(path.read_text())["sizes"]["i"] == 5
    assert main(["s000-newton", "--set", "d=3", "--set", "n=2"], out=io.StringIO()) == 0
    assert main(["s000-read", "--set", "i=6"], out=io.StringIO()) == 2  # row outside the state
    assert main(["s000-poly", "--set", "colour=1"], out=io.StringIO()) == 2


# ----------------------------------------------------------------------------- READ (eq. (20))

@given(data=st.data())
def test_read_random_sizes_proved_and_exact(data):
    n = data.draw(st.integers(1, 6), label="n")
    d = data.draw(st.integers(1, 4), label="d")
    i = data.draw(st.integers(0, n - 1), label="i")
    j = data.draw(st.integers(0, n - 1), label="j")
    a = data.draw(st.integers(0, d - 1), label="a")
    b = data.draw(st.integers(a + 1, d), label="b")
    positional = data.draw(st.sampled_from(["bias", "onehot"]), label="positional")
    con = read(n, d, i, j, a, b, positional=positional)
    assert con.epilogue[0].causal == (i <= j) and con.epilogue[0].residual
    res = prove(con)
    assert res.ok, res.failure and res.failure.describe()
    u = mat(data.draw, n, d)
    want = [[Fraction(u[k, c]) for c in range(d)] for k in range(n)]
    for c in range(a, b):
        want[j][c] = Fraction(u[i, c])
    S = run(con.epilogue, con.input_state({"u": u}))
    assert F(con.layout.get(S, "u")) == [z for row in want for z in row]


def test_read_causal_filter_is_the_papers_shift_for_i_below_j():
    """The paper's own (linear) convolution is enough for i <= j; the erratum is about i > j."""
    for i, j in [(0, 3), (1, 2), (2, 2)]:
        assert prove(read(4, 2, i, j, 0, 2, conv="causal")).ok
    assert not prove(read(4, 2, 3, 0, 0, 2, conv="causal")).ok


# ----------------------------------------------------------------------------- LINEAR (eq. (21))

@given(data=st.data())
def test_linear_random_H_proved_and_exact(data):
    n = data.draw(st.integers(1, 4), label="n")
    d_in = data.draw(st.integers(1, 4), label="d_in")
    d_out = data.draw(st.integers(1, 4), label="d_out")
    H = mat(data.draw, d_in, d_out)
    con = linear(n, d_in, d_out, H=H)
    res = prove(con)  # symbolic in H; and the concrete H below
    assert res.ok and len(res.symbolic_params) == d_in * d_out
    assert prove(con, symbolic=False).ok
    u = mat(data.draw, n, d_in)
    S = run(con.epilogue, con.input_state({"u": u}))
    for k in range(n):
        for q in range(max(d_in, d_out)):
            want = sum((Fraction(u[k, p]) * Fraction(H[p, q]) for p in range(d_in)), Fraction(0)) if q < d_out else 0
            assert Fraction(S[k, q]) == want


def test_linear_seeded_H_is_exact_and_reproducible():
    a, b = linear(4, 3, 2, 7), linear(4, 3, 2, 7)
    assert a.params == b.params and all(isinstance(x, Fraction) for x in a.params.values())
    assert a.params != linear(4, 3, 2, 8).params


# ----------------------------------------------------------------------------- MULTIPLY (eq. (22))

@given(data=st.data())
def test_multiply_random_sizes_proved_and_exact(data):
    n = data.draw(st.integers(1, 6), label="n")
    d_out = data.draw(st.integers(1, 4), label="d_out")
    con = multiply(n, d_out)
    assert prove(con).ok
    u = mat(data.draw, n, 2 * d_out)
    S = run(con.epilogue, con.input_state({"u": u}))
    want = [Fraction(u[k, c]) * Fraction(u[k, d_out + c]) if c < d_out else Fraction(0)
            for k in range(n) for c in range(2 * d_out)]
    assert F(S) == want


# ----------------------------------------------------------------------------- Newton (eq. (24))

def newton_by_hand(A, M):
    n, d = A.shape
    G = [[sum(Fraction(A[i, p]) * Fraction(A[i, q]) for i in range(n)) for q in range(d)] for p in range(d)]
    GM = [[sum(G[p][r] * Fraction(M[r, q]) for r in range(d)) for q in range(d)] for p in range(d)]
    out = np.empty((d, d), dtype=object)
    for p in range(d):
        for q in range(d):
            out[p, q] = 2 * Fraction(M[p, q]) - sum(Fraction(M[p, r]) * GM[r][q] for r in range(d))
    return out


@given(data=st.data())
def test_newton_random_sizes_proved_and_k_iterations_exact(data):
    n = data.draw(st.integers(1, 3), label="n")
    d = data.draw(st.integers(1, 2), label="d")
    k = data.draw(st.integers(0, 3), label="k")
    con = newton(n, d)
    assert prove(con).ok
    small = st.fractions(min_value=-1, max_value=1, max_denominator=2)
    A, M = mat(data.draw, n, d, small), mat(data.draw, d, d, small)
    S = run(con.layers(k), con.input_state({"A": A, "M": M}))
    Mk = M
    for _ in range(k):
        Mk = newton_by_hand(A, Mk)
    assert F(con.readout(S)["M"]) == F(Mk)
    assert F(S) == F(con.final_state({"A": A, "M": Mk}))
    assert con.depth(k) == 2 + k


def test_newton_state_size_and_float_batch():
    con = newton(5, 3)
    assert con.layout.shape == (6, 3 + 3 * 9 + 2 * 27)
    rng = np.random.default_rng(0)
    A, M = rng.standard_normal((4, 5, 3)) / 3, rng.standard_normal((4, 3, 3)) / 3
    S = con.input_state({"A": A, "M": M})  # batched float states from the same state functions
    assert S.shape == (4, 6, con.layout.shape[1]) and S.dtype == np.float64
    for L in con.layers(2):
        S = np.stack([L.forward(s).astype(float) for s in S])  # one problem at a time
    M2 = con.step(con.step({"A": A, "M": M}))["M"]
    assert np.allclose(con.readout(S)["M"], M2, rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------------------- Theorem D.38 / Algorithm 2

def poly_by_hand(coefs, x):
    acc, p = Fraction(0), Fraction(1)
    for c in coefs:
        acc += Fraction(c) * p
        p *= Fraction(x)
    return acc


@given(data=st.data())
def test_poly_random_sizes_and_coefficients(data):
    n = data.draw(st.integers(1, 3), label="n")
    dm = data.draw(st.integers(1, 2), label="d_model")
    deg = data.draw(st.integers(1, 5), label="degree")
    fused = data.draw(st.booleans(), label="fused")
    coefs = [data.draw(q_st) for _ in range(deg + 1)]
    con = poly(n, dm, deg, coefs=coefs, fused=fused)
    assert len(con.epilogue) == (deg if fused else 3 * deg) and len(con.prologue) == 1
    res = prove(con)
    assert res.ok and res.symbolic_params == [f"c_{j}" for j in range(deg + 1)]
    u = mat(data.draw, n, dm)
    S = run(con.layers(0), con.input_state({"u": u}))
    assert F(con.layout.get(S, "s")) == [poly_by_hand(coefs, x) for x in u.flat]
    assert F(con.layout.get(S, "m")) == [Fraction(x) ** deg for x in u.flat]


@given(data=st.data())
def test_poly_horner_one_layer_per_degree(data):
    n = data.draw(st.integers(1, 3), label="n")
    dm = data.draw(st.integers(1, 2), label="d_model")
    deg = data.draw(st.integers(1, 5), label="degree")
    con = poly_horner(n, dm, deg)
    assert prove(con).ok
    coefs = [data.draw(q_st) for _ in range(deg + 1)]  # c_0 .. c_d
    u = mat(data.draw, n, dm)
    s0 = np.empty((n, dm), dtype=object)
    s0.fill(coefs[deg])
    reg = np.array([coefs[deg - 1 - k] for k in range(deg)], dtype=object)
    S = run(con.layers(deg), con.input_state({"u": u, "s": s0, "reg": reg}))
    assert con.depth(deg) == deg
    assert F(con.layout.get(S, "s")) == [poly_by_hand(coefs, x) for x in u.flat]
    assert F(con.layout.get(S, "reg")) == [0] * (n * deg)


# ----------------------------------------------------------------------------- perturbations

PERTURB = [  # (entry, section, layer in section, array)
    ("s000-read", "epilogue", 0, "W_out"), ("s000-read", "epilogue", 0, "h"), ("s000-read", "epilogue", 0, "b_gate"),
    ("s000-linear", "epilogue", 0, "W_out"), ("s000-linear", "epilogue", 0, "b_conv"),
    ("s000-multiply", "epilogue", 0, "W_gate"),
    ("s000-newton", "prologue", 0, "W_out"), ("s000-newton", "prologue", 1, "W_in"), ("s000-newton", "prologue", 1, "W_gate"),
    ("s000-newton", "body", 0, "W_out"),
    ("s000-poly", "prologue", 0, "b_gate"), ("s000-poly", "epilogue", 0, "W_out"), ("s000-poly", "epilogue", 3, "W_out"),
    ("s000-poly-horner", "body", 0, "W_out"),
]


@pytest.mark.parametrize("name,section,li,array", PERTURB, ids=[f"{a}-{b}{c}-{d}" for a, b, c, d in PERTURB])
def test_perturbed_weight_fails_with_counterexample(name, section, li, array):
    e = entries()[name]
    con = e.build(**e.sizes)
    assert isinstance(con, Construction)
    secs = own_sections(con)
    secs[section][li] = perturbed(secs[section][li], array)
    res = prove(con, sections=secs)
    assert not res.ok and res.sections[section] is False
    f = res.failure
    assert f.section == section and f.layer_in_section == li
    assert f.region in con.layout.regions
    check_counterexample(con, secs, f)
    # the same edit inside the construction (symbolic path): still rejected
    edited = e.build(**e.sizes)
    getattr(edited, section)[li] = secs[section][li]
    assert not prove(edited).ok


@pytest.mark.parametrize("name", CONSTRUCTION_NAMES)
def test_every_layer_matters(name):
    """Perturbing the first nonzero W_out entry of every layer breaks the proof."""
    e = entries()[name]
    con = e.build(**e.sizes)
    for section in ("prologue", "body", "epilogue"):
        for li in range(len(getattr(con, section))):
            secs = own_sections(con)
            secs[section][li] = perturbed(secs[section][li], "W_out")
            res = prove(con, sections=secs)
            assert not res.ok and res.failure.section == section and res.failure.counterexample is not None


# ----------------------------------------------------------------------------- Theorem D.31

@st.composite
def attention_weights(draw):
    n = draw(st.integers(1, 4), label="n")
    d = draw(st.integers(1, 3), label="d")
    big = st.fractions(min_value=-40, max_value=40, max_denominator=7)
    return n, d, {"W_Q": mat(draw, d, d, big), "W_K": mat(draw, d, d, big), "W_V": mat(draw, d, d, big),
                  "B": mat(draw, n, d, big)}


@given(case=attention_weights())
@example(case=(2, 1, {"W_Q": np.array([[Fraction(2)]], dtype=object), "W_K": np.array([[Fraction(-3)]], dtype=object),
                      "W_V": np.array([[Fraction(11)]], dtype=object),
                      "B": np.array([[Fraction(0)], [Fraction(0)]], dtype=object)}))  # underflowed math.log10
def test_softmax_witness_always_found_and_certified(case):
    n, d, w = case
    res = check_softmax_square(w, n, d)
    assert res.ok and res.failure is None, res.failure and res.failure.describe()
    u, out, sq = softmax_vs_square_witness(w, n, d)
    a, b = res.witness["entry"]
    t = Fraction(res.witness["t"])
    assert u[a, b] == t and sum(1 for z in u.flat if z != 0) == 1  # the paper's input, eq. (29)
    assert sq[a, b] == t * t and Fraction(res.witness["convexity_bound"]) < t * t
    assert abs(out[a, b] - mpmath.mpf(t.numerator) ** 2 / t.denominator ** 2) > 0
    enc = attention_enclosure(w, u)[a, b]
    assert out[a, b] in enc  # the 50-digit value lies in the certified enclosure
    assert float(Fraction(res.witness["certified_gap_lower_bound"])) > 0


def test_softmax_layer_matches_a_float_reference():
    rng = np.random.default_rng(3)
    n, d = 5, 3
    w = {k: np.vectorize(Fraction, otypes=[object])(np.round(rng.standard_normal(s) * 8) / 8)
         for k, s in (("W_Q", (d, d)), ("W_K", (d, d)), ("W_V", (d, d)), ("B", (n, d)))}
    u = np.vectorize(Fraction, otypes=[object])(np.round(rng.standard_normal((n, d)) * 4) / 4)
    f = {k: v.astype(float) for k, v in w.items()}
    uf = u.astype(float)
    scores = (uf @ f["W_Q"]) @ (uf @ f["W_K"]).T
    scores[np.triu_indices(n, 1)] = -np.inf  # eq. (27): M_ij = -inf for i < j
    A = np.exp(scores - scores.max(axis=1, keepdims=True))
    A /= A.sum(axis=1, keepdims=True)
    ref = A @ (uf @ f["W_V"] + f["B"])
    got = np.vectorize(float)(attention_mp(w, u))
    assert np.allclose(got, ref, rtol=1e-12, atol=1e-12)


def test_softmax_certificate_rejects_non_witnesses():
    one = lambda x: np.array([[Fraction(x)]], dtype=object)  # noqa: E731
    w = {"W_Q": one(1), "W_K": one(1), "W_V": one(1), "B": one(0)}  # N = D = 1: Attn(u) = u
    assert not certify_witness(w, one(1)).ok  # Attn(1) = 1 = 1^2: not a witness
    assert not certify_witness(w, one(0)).ok
    assert certify_witness(w, one(2)).ok
    u, (a, b), t, bound = derive_witness(w, 1, 1)
    assert t == 2 and bound == 2
    # a gap of 10^-40 is certified at 50 digits and not at 20: the check reports failure there
    w2 = {"W_Q": one(0), "W_K": one(0), "W_V": one(0), "B": one(1 - Fraction(1, 10 ** 40))}
    assert check_softmax_square(w2, 1, 1).ok
    bad = check_softmax_square(w2, 1, 1, digits=20)
    assert not bad.ok and bad.failure is not None and bad.sections == {"derivation": True, "certificate": False}
    assert "enclosure" in bad.failure.describe()


# ----------------------------------------------------------------------------- errata

def seed000_errata():
    return {k: e for k, e in errata().items()
            if e.as_printed_check.__module__.startswith("constructions.catalogue.seed000")}


def test_errata_registered():
    mine = seed000_errata()
    assert set(mine) == ERRATA_IDS
    for e in mine.values():
        assert e.paper == "seed 000" and e.as_printed and e.correction and e.location


@pytest.mark.parametrize("eid", sorted(ERRATA_IDS))
def test_erratum_rejected_as_printed_and_corrected_proved(eid):
    e = errata()[eid]
    bad_obj = e.as_printed_check()
    bad = check(bad_obj)
    assert not bad.ok and bad.failure is not None and bad.failure.counterexample is not None
    if isinstance(bad_obj, Construction):
        check_counterexample(bad_obj, own_sections(bad_obj), bad.failure)
    good = check(e.corrected_check())
    assert good.ok, good.failure and good.failure.describe()


@given(n=st.integers(1, 4), d=st.integers(1, 3))
def test_gram_flat_product_claim_holds_exactly_when_D_is_1(n, d):
    """flt(a^T) ⊙ flt(a) holds the monomials a[k mod N, k div N] a[k div D, k mod D]; a^T a needs
    a[i,p] a[i,q] for every i, p <= q: N D (D+1)/2 of them, more than the N D products when D >= 2."""
    have = {tuple(sorted(flat_product_monomial(k, n, d))) for k in range(n * d)}
    need = {((i, p), (i, q)) for i in range(n) for p in range(d) for q in range(p, d)}
    assert (need <= have) == (d == 1)
    assert prove(gram_layer(n, d, as_printed=True)).ok == (d == 1)
    assert prove(gram_layer(n, d)).ok


def test_causal_gd_errata_vanish_for_one_row():
    """With N = 1 the printed b_1 a_1 and the full sums are right: the checks are not rigged."""
    for layer in (1, 2):
        assert prove(causal_gd_layer(layer, True, n=1, d=2)).ok
        assert not prove(causal_gd_layer(layer, True, n=2, d=1)).ok


@pytest.mark.parametrize("q", [Fraction(1, 10**400), Fraction(-7, 3 * 10**500), Fraction(10**400, 3),
                               Fraction(3**9000, 7**9000 + 1), Fraction(1, 2**20000),
                               Fraction(1, 10), Fraction(999, 1000)])
def test_decimal_bounds_numbers_outside_the_float_range(q):
    """A certificate's decimal end points bracket the exact value, even far below the float range
    (Hypothesis found softmax weights whose enclosure end point underflowed math.log10)."""
    from constructions.catalogue.seed000_softmax import decimal_bound

    lo, hi = Fraction(decimal_bound(q, down=True)), Fraction(decimal_bound(q, down=False))
    assert lo <= q <= hi
    assert hi - lo <= abs(q) * Fraction(1, 10**28)
