"""``--check random`` (verify/prover/randomized.py): the Schwartz-Zippel identity test modulo a random
61-bit prime.  Its wide modular arithmetic against Python's integers and the exact forward, its
bounds against the exact polynomials, its verdicts (passes every GD architecture and every
corrected erratum, fails every erratum as printed and a perturbed weight, never says PROVED), the
error-bound text, and the CLI (exit statuses, JSON verdict, bad input)."""
from __future__ import annotations

import json
import math
import random
from fractions import Fraction

import numpy as np
import pytest

from constructions import ops
from constructions.base import run_layers
from constructions.catalogue import entries, errata, gd_architectures
from verify.prover import modular
from verify.prover import randomized as R
from verify.construct import main

P = 2305843009213693951  # 2^61 - 1, prime
PRIMES = [P, 1152921504606846883, 2305843009213693921]  # 61-bit primes (checked below)


def _rand_res(rng, shape, p):
    return rng.integers(0, p, size=shape, dtype=np.int64)


# ------------------------------------------------------------------ primes

def test_is_prime_agrees_with_trial_division_and_sympy():
    import sympy

    for n in range(2000):
        assert R.is_prime(n) == sympy.isprime(n), n
    rng = random.Random(0)
    for _ in range(300):
        n = rng.randrange(R.P_LOW, R.P_HIGH)
        assert R.is_prime(n) == sympy.isprime(n), n
    # strong pseudoprimes to several small bases, Carmichael numbers
    for n in (3215031751, 2152302898747, 3474749660383, 341550071728321, 3825123056546413051, 561, 41041):
        assert R.is_prime(n) == sympy.isprime(n) is False
    assert all(R.is_prime(p) for p in PRIMES)


def test_draw_prime_is_a_61_bit_prime_avoiding_the_given_divisors():
    rng = np.random.default_rng(1)
    seen = set()
    for _ in range(20):
        p = R.draw_prime(rng)
        assert R.P_LOW <= p < R.P_HIGH and R.is_prime(p)
        seen.add(p)
    assert len(seen) == 20
    first = R.draw_prime(np.random.default_rng(7))
    assert R.draw_prime(np.random.default_rng(7), avoid=first * 3) != first


def test_the_prime_count_lower_bound_is_the_stated_formula_rounded_down():
    """2^61 / ln 2^61 - 1.25506 * 2^60 / ln 2^60 (Rosser and Schoenfeld's bounds), at 50 digits."""
    import mpmath

    with mpmath.workdps(50):
        exact = mpmath.mpf(2) ** 61 / mpmath.log(mpmath.mpf(2) ** 61) \
            - mpmath.mpf("1.25506") * mpmath.mpf(2) ** 60 / mpmath.log(mpmath.mpf(2) ** 60)
        assert R.PRIME_COUNT_LOWER <= exact and R.PRIME_COUNT_LOWER >= exact * (1 - mpmath.mpf(10) ** -8)
    # below the prime number theorem's first-order count x / ln x of the range
    assert R.PRIME_COUNT_LOWER < 2**61 / math.log(2**61) - 2**60 / math.log(2**60)


# ------------------------------------------------------------------ wide arithmetic

@pytest.mark.parametrize("longdouble", [True, False])
def test_mulmod_is_exact(longdouble, monkeypatch):
    monkeypatch.setattr(modular, "_LONGDOUBLE", longdouble and modular._LONGDOUBLE)
    rng = np.random.default_rng(2)
    for p in PRIMES:
        a = np.concatenate([_rand_res(rng, 500, p), [0, 1, p - 1, p - 2, p // 2]])
        b = np.concatenate([_rand_res(rng, 500, p), [p - 1, p - 1, p - 1, 2, p // 2 + 1]])
        got = modular.mulmod(a, b, p)
        assert [int(x) for x in got] == [int(x) * int(y) % p for x, y in zip(a, b)]
        assert got.dtype == np.int64 and (got >= 0).all() and (got < p).all()


def _obj_mm(X, Y, p):
    return (np.asarray(X, dtype=object) @ np.asarray(Y, dtype=object)) % p


@pytest.mark.parametrize("K", [1, 7, 300, 3000])
def test_wide_matrix_products_are_exact(K):
    rng = np.random.default_rng(K)
    p = PRIMES[K % len(PRIMES)]
    X, Y = _rand_res(rng, (2, 5, K), p), _rand_res(rng, (K, 4), p)
    assert (modular.mm(X, Y, p).astype(object) == _obj_mm(X, Y, p)).all()
    Y[rng.random(Y.shape) < 0.9] = 0
    S = modular.Sparse(Y)
    assert (modular.mm(X, S, p).astype(object) == _obj_mm(X, Y, p)).all()
    assert (modular.mm(X[0, 0], S, p).astype(object) == _obj_mm(X[0, 0], Y, p)).all()


def test_wide_sums_are_exact():
    rng = np.random.default_rng(3)
    a = np.full((3, 70, 2), P - 1, dtype=np.int64)
    a[1] = _rand_res(rng, (70, 2), P)
    got = modular.summod(a, -2, P)
    assert (got[:, 0].astype(object) == a.astype(object).sum(axis=1) % P).all()
    run = modular.summod(a, -2, P, cumulative=True)
    assert (run.astype(object) == np.cumsum(a.astype(object), axis=1) % P).all()


@pytest.mark.parametrize("causal,same", [(False, False), (True, False), (False, True)])
def test_wide_convolution_matches_the_exact_one(causal, same):
    """Every filter class (zero, lag 0, equal taps, general, and channels sharing a filter) in
    the three conventions, against ``ops.conv`` on exact integers reduced afterwards."""
    rng = np.random.default_rng(4)
    T, C = 7, 6
    h = np.zeros((T, C), dtype=object)
    h[0, 1] = 5  # lag 0
    h[:, 2] = 3  # equal taps
    h[:, 3] = [int(x) for x in rng.integers(-9, 10, T)]  # general
    h[:, 4] = h[:, 3]  # shares channel 3's filter
    h[2, 5] = Fraction(1, 3)  # one tap, not lag 0
    v = np.array([[int(x) for x in row] for row in rng.integers(0, 2**62, (T, C))], dtype=object)
    want = modular.residues(ops.conv(v, h, causal=causal, same=same), P)
    got = modular.conv(modular.residues(v, P)[None], modular.residues(h, P), causal, P, same)[0]
    assert (got == want).all()


@pytest.mark.parametrize("arch", list(gd_architectures()))
def test_wide_forward_matches_the_exact_forward_on_every_layer(arch):
    """The modular layers at a wide prime against ``constructions.layers``' exact forward on a
    random integer state (large entries: every reduction is exercised), reduced afterwards."""
    con = gd_architectures()[arch].build(6, 3)
    rng = np.random.default_rng(5)
    for L in [*con.prologue, *con.body, *con.epilogue]:
        S = np.array([[int(x) for x in row] for row in rng.integers(-2**40, 2**40, con.layout.shape)], dtype=object)
        want = modular.residues(L.forward(S), P)
        got = modular.forward(modular.layer_residues(L, P), modular.residues(S, P)[None], P)[0]
        assert (got == want).all(), (arch, type(L).__name__)


# ------------------------------------------------------------------ bounds

def _exact_sides(con, sec):
    """The layers' output and the target of one section as exact polynomials (the proof's own
    sympy ring and specification)."""
    from verify.prover.proof import SymbolicProblem, proof_arithmetic, section_claims

    sp = SymbolicProblem(con.variables)
    ar = proof_arithmetic("sympy", sp.R)
    start, target = next((s, t) for c, s, t in section_claims(con, sp.v) if c == sec)
    S = ar.array(start())
    Ls = getattr(con, sec)
    return (run_layers(ar.layers(Ls), S) if Ls else S), ar.array(target()), sp.R


def _poly_stats(A, R_):
    d, n, dens = -1, 0, 1
    for x in np.asarray(A, dtype=object).ravel():
        if isinstance(x, (int, Fraction)):
            x = R_(x)
        for m, c in x.terms():
            d = max(d, sum(m))
            dens = math.lcm(dens, int(c.denominator))
        n = max(n, sum(Fraction(int(c.numerator), int(c.denominator)).__abs__() for c in x.coeffs()) if x else 0)
    return d, n, dens


def _perturbed(con):
    """``con`` with one weight of its last body layer changed (the first nonzero of W_out, or of
    an attention head's value weights): x's update changes, so the body identity is false."""
    arrays = con.body[-1].arrays()
    order = [k for k in ("W_out", "head0.W2", "stage0.head0.W2", "head0.P") if k in arrays] + list(arrays)
    A = next(arrays[k] for k in order if ops.nonzero_pattern(arrays[k]).any())
    ix = tuple(np.argwhere(ops.nonzero_pattern(A))[0])
    A[ix] = A[ix] * 3 + Fraction(7, 5)
    return con


@pytest.mark.parametrize("arch", list(gd_architectures()))
@pytest.mark.parametrize("perturb", [False, True])
def test_bounds_hold_for_the_exact_polynomials(arch, perturb):
    """Degree, 1-norm and common denominator of every entry, both sides of every section, are at
    most (divide) what :func:`verify.prover.randomized.section_bounds` states."""
    con = gd_architectures()[arch].build(3, 2)
    if perturb:
        con = _perturbed(con)
    plan = R._sections_of(con, None)
    sides, L_all = R.section_bounds(con, plan)
    for name, claim, Ls, _ in plan:
        got, want, R_ = _exact_sides(con, claim)
        for exact_side, bound in zip((got, want), sides[name]):
            d, n, dens = _poly_stats(exact_side, R_)
            assert d <= bound[0] and n <= bound[1] and bound[2] % dens == 0, (name, (d, n, dens), bound)
            assert L_all % dens == 0 or bound[2] % dens == 0


def test_format_up_rounds_up_to_two_digits():
    for x in (Fraction(1, 3), Fraction(6, 10**18), Fraction(99, 10), Fraction(1), Fraction(123456789, 10**25),
              Fraction(1, 2**60)):
        s = R.format_up(x)
        m, e = s.split("e")
        assert len(m) == 3 and m[1] == "." and Fraction(m) * Fraction(10) ** int(e) >= x
        assert Fraction(m) * Fraction(10) ** int(e) - x <= Fraction(1, 10) * Fraction(10) ** int(e)
    assert R.format_up(Fraction(1, 3)) == "3.4e-01" and R.format_up(Fraction(99, 10)) == "9.9e+00"
    assert R.format_up(Fraction(991, 100)) == "1.0e+01"


# ------------------------------------------------------------------ verdicts

@pytest.mark.parametrize("arch", list(gd_architectures()))
def test_passes_on_every_gd_architecture_with_the_stated_bound(arch):
    r = R.check(gd_architectures()[arch].build(20, 5), seed=11)
    assert r.ok and r.verdict == "passed-randomized" and r.failure is None
    assert set(r.sections) == {"prologue", "body", "epilogue"} and all(r.sections.values())
    assert r.verdict_line() == f"PASSED randomized identity test (error probability <= {r.error_bound_text})"
    # the bound is the stated formula of the degrees and coefficient bits, and it is small
    bad = 0  # GD's denominators are powers of two: no 61-bit prime divides them
    want = sum(Fraction(D, 2**60) + Fraction(r.coefficient_bits[s] // 60, R.PRIME_COUNT_LOWER - bad)
               for s, D in r.degree_bounds.items())
    assert Fraction(r.error_bound) == want and 0 < want < Fraction(1, 10**15)
    assert R.P_LOW <= r.prime < R.P_HIGH and R.is_prime(r.prime)


def test_each_section_is_tested_at_its_own_point(monkeypatch):
    points = []
    orig = R._point

    def spy(variables, rng, p):
        v = orig(variables, rng, p)
        points.append(tuple(x.v for x in v["A"].ravel()))
        return v
    monkeypatch.setattr(R, "_point", spy)
    R.check(gd_architectures()["baseconv-causal"].build(4, 2), seed=3)
    assert len(points) == 3 and len(set(points)) == 3


@pytest.mark.parametrize("arch", list(gd_architectures()))
def test_the_perturbation_is_wrong_for_the_exact_proof_too(arch):
    from verify.prover.proof import prove

    r = prove(_perturbed(gd_architectures()[arch].build(3, 2)))
    assert not r.ok and r.failure.section == "body"


def test_fails_on_a_perturbed_weight_with_a_definite_counterexample():
    con = _perturbed(gd_architectures()["baseconv"].build(20, 5))
    r = R.check(con, seed=12)
    assert not r.ok and r.verdict == "failed" and r.failure.section == "body"
    f = r.failure
    assert int(f.got) != int(f.expected) and 0 <= int(f.got) < r.prime
    assert "definite failure" in f.describe(r.prime, r.seed) and "PROVED" not in r.verdict_line()


def test_a_weight_off_by_a_multiple_of_the_mersenne_prime_is_caught():
    """A fixed prime p misses a weight off by exactly p; a random prime does not."""
    con = gd_architectures()["baseconv"].build(6, 3)
    L = con.body[-1]
    ix = tuple(np.argwhere(ops.nonzero_pattern(L.W_out))[0])
    L.W_out[ix] = L.W_out[ix] + P
    assert not R.check(con, seed=13).ok


@pytest.mark.parametrize("eid", list(errata()))
def test_every_erratum_as_printed_fails_and_corrected_passes(eid):
    e = errata()[eid]
    assert not R.check_item(e.as_printed_check(), seed=14).ok
    assert R.check_item(e.corrected_check(), seed=14).ok


def test_a_witness_claim_and_a_non_ring_specification_are_refused():
    with pytest.raises(R.RandomizedUnsupported, match="witness claim"):
        R.check_item(entries()["s000-softmax-square"].build(**entries()["s000-softmax-square"].sizes))
    e = entries()["s004-lemma-a3"]
    with pytest.raises(R.RandomizedUnsupported, match="more than ring arithmetic"):
        R.check_item(e.build(**e.sizes))


def test_weight_file_sections_each_distinct_body_and_stack_layer_numbers():
    con = gd_architectures()["baseconv"].build(6, 3)
    good = list(con.body)
    bad = [L for L in _perturbed(gd_architectures()["baseconv"].build(6, 3)).body]
    secs = {"prologue": [], "bodies": [(0, good), (2, bad)], "epilogue": con.epilogue, "k": 3}
    r = R.check(con, sections=secs, seed=15)
    assert not r.ok and r.failure.section == "body copy 2" and r.failure.layer == 2 * 3 + 2
    assert r.sections == {"prologue": True, "body copy 0": True, "body copy 2": False}


# ------------------------------------------------------------------ the CLI

def _cli(argv, capsys):
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def test_gd_check_random_passes_and_never_says_proved(tmp_path, capsys):
    rep = tmp_path / "r.json"
    rc, out, err = _cli(["gd", "--layers", "4", "--batch", "4", "--quiet", "--check", "random", "--random-seed", "5",
                         "--json", str(rep)], capsys)
    assert rc == 0 and "PASSED randomized identity test (error probability <= " in out
    assert "PROVED" not in out
    assert not any(line.startswith("proof:") for line in out.splitlines())  # no exact proof's line
    j = json.loads(rep.read_text())
    assert j["check"] == "random" and j["verdict"] == "passed-randomized" and "proof" not in j
    assert j["randomized"]["seed"] == "5" and j["randomized"]["ok"] is True
    assert j["verdict_line"].startswith("PASSED randomized identity test")


def test_gd_check_exact_is_the_default_and_says_proved(tmp_path, capsys):
    rep = tmp_path / "r.json"
    rc, out, _ = _cli(["gd", "--layers", "4", "--batch", "4", "--quiet", "--json", str(rep)], capsys)
    j = json.loads(rep.read_text())
    assert rc == 0 and "proof: PROVED" in out and j["check"] == "exact" and j["verdict"] == "proved"


def test_gd_check_random_on_a_wrong_weight_file_exits_1(tmp_path, capsys):
    from constructions.weights_io import save

    con = _perturbed(gd_architectures()["baseconv"].build(20, 5))
    w = tmp_path / "w.safetensors"
    save(w, con, 1)
    rep = tmp_path / "r.json"
    rc, out, _ = _cli(["gd", "--layers", "4", "--batch", "4", "--quiet", "--check", "random", "--weights", str(w),
                       "--allow-metadata-mismatch", "--json", str(rep)], capsys)
    j = json.loads(rep.read_text())
    assert rc == 1 and "FAILED randomized identity test" in out and "definite failure" in out
    assert j["verdict"] == "failed" and j["randomized"]["failure"]["section"] == "body"


@pytest.mark.parametrize("argv,msg", [
    (["gd", "--layers", "4", "--check", "maybe"], "invalid choice: 'maybe'"),
    (["gd", "--layers", "4", "--random-seed", "3"], "--random-seed applies to --check random"),
    (["gd", "--layers", "4", "--check", "random", "--random-seed", "-1"], "--random-seed must be in"),
    (["s000-read", "--check", "sure"], "invalid choice: 'sure'"),
    (["s000-softmax-square", "--check", "random"], "witness claim"),
])
def test_bad_check_input_is_one_line_exit_2(argv, msg, capsys):
    rc, out, err = _cli(argv, capsys)
    assert rc == 2 and out == "" and err.count("\n") == 1 and msg in err, (out, err)


def test_catalogue_entry_check_random(tmp_path, capsys):
    rep = tmp_path / "e.json"
    rc, out, _ = _cli(["s004-gd", "--check", "random", "--json", str(rep)], capsys)
    j = json.loads(rep.read_text())
    assert rc == 0 and "PASSED randomized identity test" in out and j["verdict"] == "passed-randomized"
    assert "PROVED" not in out
