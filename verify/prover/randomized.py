"""The randomized check (``--check random``): a Schwartz-Zippel identity test modulo a random
61-bit prime.  Not a proof: its verdict is "PASSED randomized identity test (error probability
<= ...)", never PROVED (only :func:`verify.prover.proof.prove` says that).

The claims are the exact proof's (``verify/prover/proof.py``): for each section (prologue, body, or each
distinct body of a weight file, epilogue) the identity ``layers(start(v)) == target(v)`` between
polynomials in the construction's variables ``v`` with rational coefficients, at the
construction's own parameter values (the exact proof may also prove them for every step size:
here the step size is the construction's).  For an :class:`~constructions.claims.IdentityClaim`,
``lhs(v) == rhs(v)`` (its parameters are variables like the others).

The test:

1. a prime ``p`` drawn uniformly from the primes in ``[2^60, 2^61)`` that divide no denominator of
   the weights or of the specification's constants (uniform odd integers, Miller-Rabin with the
   first twelve primes as bases, deterministic below 3.2e23, until one is such a prime);
2. for each section its own point ``r``, uniform in ``F_p^n`` and independent of the others; the
   section's start state and target evaluated at ``r`` modulo ``p`` (the specification's own
   code on residues), the layers run on the start state modulo ``p`` (``verify.prover.modular``'s
   layers, the same equations as ``constructions.layers``);
3. the section passes when every entry agrees modulo ``p``.

**A disagreement is a definite failure.**  Reduction modulo ``p`` is a ring homomorphism on the
rationals whose denominators ``p`` does not divide: if the identity held over the rationals, both
sides would agree modulo ``p`` at every point.  So a counterexample modulo ``p`` proves the
identity false (exit status 1), with no probability involved.

**The error bound** (the probability, over the prime and the points, that a construction whose
identity is false passes).  Let ``f = layers(start(v)) - target(v)`` in one entry of a failing
section, a nonzero polynomial.  The section passes only if (a) ``f`` vanishes modulo ``p`` (every
coefficient's numerator, over a common denominator, is divisible by ``p``), or (b) it does not and
the nonzero polynomial ``f mod p`` vanishes at the random point.  (b) has probability at most
``deg f / p <= D / 2^60`` (Schwartz-Zippel; ``D`` the degree bound below).  For (a): ``L f`` has
integer coefficients for the common-denominator bound ``L`` below, and one nonzero coefficient
``c`` of it has ``|c| <= L ||f||_1 < 2^H``; at most ``floor(H / 60)`` primes ``>= 2^60`` divide
``c``, out of at least ``PRIME_COUNT_LOWER - floor(bits(L_all) / 60)`` primes the draw chooses
from (``PRIME_COUNT_LOWER``: a lower bound on the number of primes in ``[2^60, 2^61)`` from
Rosser and Schoenfeld's bounds ``x / ln x < pi(x) < 1.25506 x / ln x``, "Approximate formulas
for some functions of prime numbers", Illinois J. Math. 6 (1962), Corollary 1; ``L_all`` the
least common multiple of every constant's denominator, whose prime factors are excluded).  A
failing construction fails in at least one section, so summing both terms over every section
checked (a union bound) bounds the error.  The specification's code is read as a polynomial
expression in its inputs (ring operations and constants, as the exact proof reads it; the
structural zeros ``constructions.ops`` skips are skipped exactly): code that needs more is refused.

**Where the bounds come from** (true upper bounds, never estimates).  Per entry three numbers:
``d`` the total degree, ``n`` an integer bound on the 1-norm (the sum of the coefficients'
absolute values), ``l`` an integer with ``l * coefficient`` an integer for every coefficient.
The specification's states (start and target) get them from its own code run on
:class:`Bound` objects (a variable ``(1, 1, 1)``, a constant ``q`` ``(0, ceil |q|,
denominator)``, a sum ``(max, n1 + n2, lcm)``, a product ``(d1 + d2, n1 n2, l1 l2)``): what the
code computes is a sum of products, so each rule bounds its result whatever cancels.  The
layers' output gets them from the start state's maxima over entries, layer by layer
(:func:`layer_bound`): a matrix product with a constant ``W`` keeps ``d``, multiplies ``n`` by
``W``'s largest column sum of absolute values and ``l`` by the lcm of ``W``'s denominators; a
product of two state-dependent factors adds the degrees and multiplies the rest (times the
number of terms summed, in a Gram product); a bias is a constant.  ``D`` is the larger degree of
the two sides, ``H`` the bit length of ``lcm(l) * (n_layers + n_target)``.

Exit status of the commands: 0 passed, 1 a counterexample (definite), 2 bad input.
"""
from __future__ import annotations

import math
import secrets
import time
from dataclasses import asdict, dataclass, field
from fractions import Fraction

import numpy as np

from constructions.base import Construction
from constructions.claims import IdentityClaim

from . import modular
from .randomized_bounds import (Bound, ModP, RandomizedUnsupported, evaluated, layer_bound, state_bound, to_residues,
                                weight_stats)

#: the primes drawn lie in [P_LOW, P_HIGH): 61-bit primes
P_LOW, P_HIGH = 1 << 60, 1 << 61
#: Miller-Rabin with these twelve bases is deterministic below 318665857834031151167461 ~ 3.2e23
#: (Sorenson and Webster, "Strong pseudoprimes to twelve prime bases", Math. Comp. 86 (2017))
_MR_BASES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)


def _prime_count_lower() -> int:
    """A lower bound on the number of primes in [2^60, 2^61): ``x / ln x < pi(x)`` (x >= 17) at
    2^61 minus ``pi(x) < 1.25506 x / ln x`` (x > 1) at 2^60 (Rosser and Schoenfeld 1962), rounded
    down with a margin far above float64's rounding."""
    lo = P_HIGH / (61 * math.log(2)) - 1.25506 * P_LOW / (60 * math.log(2))
    return int(lo * (1 - 1e-9))


PRIME_COUNT_LOWER = _prime_count_lower()

VERDICT_PASSED = "PASSED randomized identity test"
VERDICT_FAILED = "FAILED randomized identity test"


# ------------------------------------------------------------------ primes

def is_prime(n: int) -> bool:
    """Miller-Rabin with :data:`_MR_BASES` (deterministic for n < 3.2e23, far above 2^61)."""
    if n < 2:
        return False
    for q in _MR_BASES:
        if n % q == 0:
            return n == q
    d, s = n - 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1
    for a in _MR_BASES:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def draw_prime(rng: np.random.Generator, avoid: int = 1) -> int:
    """A prime uniform among those in [2^60, 2^61) that do not divide ``avoid``: uniform odd
    integers of the range until one is such a prime."""
    while True:
        n = int(rng.integers(P_LOW, P_HIGH)) | 1
        if is_prime(n) and avoid % n:
            return n


# ------------------------------------------------------------------ the result

def format_up(x: Fraction) -> str:
    """``x`` > 0 rounded *up* to two significant digits, as ``1.7e-16``."""
    x = Fraction(x)
    if x <= 0:
        return "0"
    e = len(str(x.numerator)) - len(str(x.denominator))
    while Fraction(10) ** e > x:
        e -= 1
    while Fraction(10) ** (e + 1) <= x:
        e += 1
    m = x / Fraction(10) ** e  # in [1, 10)
    tenths = math.ceil(m * 10)
    if tenths >= 100:
        tenths, e = 10, e + 1
    return f"{tenths // 10}.{tenths % 10}e{e:+03d}"


@dataclass
class RandomizedFailure:
    """Where the two sides differ modulo ``p`` (a definite failure: the module docstring)."""

    section: str
    layer: int  # the section's last layer in the stack (where the difference shows); -1: an identity claim
    region: str
    entry: list
    state_index: list
    got: str  # the layers' (lhs's) value there, mod p
    expected: str  # the specification's (rhs's) value there, mod p
    note: str = ""

    def describe(self, prime: int, seed: int) -> str:
        where = (f"{self.section}: region {self.region!r} entry {self.entry} (state {self.state_index})"
                 if self.layer >= 0 else f"identity: {self.region} entry {self.entry}")
        return (f"{where} differs modulo p = {prime} at the point drawn from --random-seed {seed}: "
                f"{'layers' if self.layer >= 0 else 'lhs'} {self.got}, "
                f"{'specification' if self.layer >= 0 else 'rhs'} {self.expected}; a counterexample modulo p is a "
                f"definite failure (the identity is false over the rationals)"
                + (f"\n  {self.note}" if self.note else ""))


@dataclass
class RandomizedResult:
    """The verdict of :func:`check` (JSON-ready through :meth:`to_json`)."""

    construction: str
    ok: bool
    seconds: float
    prime: int
    seed: int
    sections: dict[str, bool] = field(default_factory=dict)
    #: per section: D (degree bound of both sides) and H (bits of the coefficient bound)
    degree_bounds: dict[str, int] = field(default_factory=dict)
    coefficient_bits: dict[str, int] = field(default_factory=dict)
    #: the error bound, exact (a fraction) and rounded up (:func:`format_up`)
    error_bound: str = "0"
    error_bound_text: str = "0"
    entries_checked: int = 0
    parameters: dict[str, str] = field(default_factory=dict)
    failure: RandomizedFailure | None = None
    method: str = "random"

    @property
    def verdict(self) -> str:
        """"passed-randomized" or "failed" (a counterexample modulo p is a definite failure)."""
        return "passed-randomized" if self.ok else "failed"

    def verdict_line(self) -> str:
        if self.ok:
            return f"{VERDICT_PASSED} (error probability <= {self.error_bound_text})"
        return f"{VERDICT_FAILED}: a counterexample modulo p (a definite failure: the identity is false)"

    def to_json(self) -> dict:
        d = asdict(self)
        d["prime"], d["seed"] = str(self.prime), str(self.seed)  # exact, whatever reads the JSON
        d["verdict"], d["verdict_line"] = self.verdict, self.verdict_line()
        return d


def _error_bound(D: dict[str, int], H: dict[str, int], L_all: int) -> Fraction:
    bad = L_all.bit_length() // 60  # primes >= 2^60 dividing L_all (excluded from the draw)
    return sum((Fraction(D[s], P_LOW) + Fraction(H[s] // 60, PRIME_COUNT_LOWER - bad) for s in D), Fraction(0))


def _point(variables: dict, rng: np.random.Generator, p: int) -> dict:
    """A uniform point of F_p^n as object arrays of :class:`ModP`."""
    v = {}
    for name, shape in variables.items():
        vals = rng.integers(0, p, size=shape, dtype=np.int64)
        arr = np.empty(shape, dtype=object)
        for ix in np.ndindex(*shape):
            arr[ix] = ModP(int(vals[ix]), p)
        v[name] = arr if shape else arr[()]
    return v


# ------------------------------------------------------------------ the check

def _sections_of(con: Construction, sections) -> list[tuple[str, str, list, int]]:
    """(name, claim, layers, stack index of the section's first layer) of every section checked.
    ``sections``: the construction's own layers when None; else ``prologue``, ``epilogue`` and
    either ``body`` or ``bodies``, a weight file's distinct bodies as (index of the first copy
    that has it, layers), each its own ``body`` claim, with ``k`` the number of copies.  An empty
    body is not checked (there is nothing to repeat), as in the exact proof."""
    src = sections if sections is not None else {"prologue": con.prologue, "body": con.body,
                                                  "epilogue": con.epilogue}
    pro, epi = list(src["prologue"]), list(src["epilogue"])
    bodies = [(j, list(b)) for j, b in src["bodies"]] if "bodies" in src else [(0, list(src["body"]))]
    per = len(bodies[0][1]) if bodies else 0
    k = src.get("k", 1)
    out = [("prologue", "prologue", pro, 0)]
    out += [(f"body copy {j}" if len(bodies) > 1 else "body", "body", b, len(pro) + j * per)
            for j, b in bodies if b]
    return out + [("epilogue", "epilogue", epi, len(pro) + k * per)]


def section_bounds(con: Construction, plan) -> tuple[dict[str, tuple], int]:
    """Per section of ``plan`` (:func:`_sections_of`), the bounds ``(d, n, l)`` of every entry of
    the layers' output and of the target state (the module docstring), and the lcm of every
    constant's denominator (weights and the specification's constants)."""
    from .proof import section_claims

    shape = tuple(con.layout.shape)
    acc = [1]
    stats_memo: dict[int, tuple] = {}

    def stats(A):
        hit = stats_memo.get(id(A))
        if hit is None or hit[0] is not A:
            hit = stats_memo[id(A)] = (A, weight_stats(A))  # A kept alive: its id stays its own
            acc[0] = math.lcm(acc[0], hit[1].den)
        return hit[1]

    var = Bound(1, 1, 1, acc)  # every variable: one object (all have the same bounds)
    vb = {name: np.full(shp, var, dtype=object) if shp else var for name, shp in con.variables.items()}
    claims = {sec: (start, target) for sec, start, target in section_claims(con, vb)}
    out = {}
    for name, claim, Ls, _ in plan:
        start, target = claims[claim]
        x = state_bound(evaluated(start, f"{con.name}'s specification"), acc)
        for L in Ls:
            x = layer_bound(L, x, shape, stats)
        out[name] = (x, state_bound(evaluated(target, f"{con.name}'s specification"), acc))
    return out, acc[0]


def check(con: Construction, *, sections: dict | None = None, seed: int | None = None) -> RandomizedResult:
    """The randomized identity test of ``con``'s section identities (the module docstring).
    ``sections``: layers to check instead of the construction's own (:func:`_sections_of`).
    ``seed``: the random source (default: 128 bits from the operating system), reported so that
    a run can be replayed."""
    t0 = time.perf_counter()
    seed = secrets.randbits(128) if seed is None else int(seed)
    rng = np.random.default_rng(seed)
    plan = _sections_of(con, sections)
    sides, L_all = section_bounds(con, plan)  # 1. the bounds (weights' floats: their exact values)
    D = {name: max(x[0], t[0], 0) for name, (x, t) in sides.items()}
    H = {name: (math.lcm(x[2], t[2]) * (x[1] + t[1])).bit_length() for name, (x, t) in sides.items()}
    acc = [L_all]

    # 2. the prime, 3. each section at its own point
    result = None
    for _ in range(8):
        p = draw_prime(rng, acc[0])
        try:
            result = _evaluate(con, plan, p, rng, seed)
            break
        except modular.Unrepresentable:  # a denominator the bounds did not see: p joins the excluded
            acc[0] = math.lcm(acc[0], p)
    if result is None:
        raise RandomizedUnsupported("every prime drawn divides a denominator of the construction")
    err = _error_bound(D, H, acc[0])
    result.degree_bounds, result.coefficient_bits = D, H
    result.error_bound, result.error_bound_text = str(err), format_up(err)
    result.parameters = {k: str(v) for k, v in con.params.items()}
    result.seconds = time.perf_counter() - t0
    return result


def _evaluate(con, plan, p: int, rng, seed: int) -> RandomizedResult:
    from .proof import section_claims

    res = RandomizedResult(con.name, True, 0.0, p, seed)
    lr: dict[int, dict] = {}
    for name, claim, Ls, first in plan:
        v = _point(con.variables, rng, p)
        start, target = next((s, t) for sec, s, t in section_claims(con, v) if sec == claim)
        S = to_residues(evaluated(start, f"{con.name}'s specification"), p)[None]
        for L in Ls:
            if id(L) not in lr:
                lr[id(L)] = modular.layer_residues(L, p)  # the plan keeps L alive: ids stay unique
            S = modular.forward(lr[id(L)], S, p)
        want = to_residues(evaluated(target, f"{con.name}'s specification"), p)
        if S[0].shape != want.shape:
            raise ValueError(f"{name}: layers produce a state of shape {S[0].shape}, the specification {want.shape}")
        res.entries_checked += want.size
        bad = np.argwhere(S[0] != want)
        res.sections[name] = not len(bad)
        if len(bad):
            ix = tuple(int(i) for i in bad[0])
            region, entry = con.layout.locate(*ix)
            res.ok = False
            res.failure = RandomizedFailure(
                name, first + max(len(Ls) - 1, 0), region, list(entry), list(ix), str(int(S[0][ix])),
                str(int(want[ix])), note="the layer named is the section's last (where the difference shows), not "
                                         "necessarily the culprit: --check exact locates it")
            return res
    return res


def check_identity(claim: IdentityClaim, *, seed: int | None = None) -> RandomizedResult:
    """The randomized test of ``lhs(v) == rhs(v)`` (its parameters drawn like the variables)."""
    t0 = time.perf_counter()
    seed = secrets.randbits(128) if seed is None else int(seed)
    rng = np.random.default_rng(seed)
    variables = dict(claim.variables)
    variables.update({nm: () for nm in claim.params})
    acc = [1]
    var = Bound(1, 1, 1, acc)
    vb = {name: np.full(shp, var, dtype=object) if shp else var for name, shp in variables.items()}
    what = f"the claim {claim.name}"
    lb = state_bound(evaluated(lambda: claim.lhs(vb), what), acc)
    rb = state_bound(evaluated(lambda: claim.rhs(vb), what), acc)
    D = {"identity": max(lb[0], rb[0], 0)}
    H = {"identity": (math.lcm(lb[2], rb[2]) * (lb[1] + rb[1])).bit_length()}
    for _ in range(8):
        p = draw_prime(rng, acc[0])
        try:
            v = _point(variables, rng, p)
            got = to_residues(evaluated(lambda: claim.lhs(v), what), p)
            want = to_residues(evaluated(lambda: claim.rhs(v), what), p)
            break
        except modular.Unrepresentable:
            acc[0] = math.lcm(acc[0], p)
    else:
        raise RandomizedUnsupported("every prime drawn divides a denominator of the claim")
    if got.shape != want.shape:
        raise ValueError(f"{claim.name}: the two sides have shapes {got.shape} and {want.shape}")
    res = RandomizedResult(claim.name, True, 0.0, p, seed, entries_checked=int(want.size) or 1)
    bad = np.argwhere(np.atleast_1d(got != want))
    res.sections["identity"] = not len(bad)
    if len(bad):
        ix = tuple(int(i) for i in bad[0]) if got.shape else ()
        res.ok = False
        res.failure = RandomizedFailure("identity", -1, claim.locate(ix) if claim.locate else claim.name, list(ix),
                                        list(ix), str(int(got[ix])), str(int(want[ix])))
    err = _error_bound(D, H, acc[0])
    res.degree_bounds, res.coefficient_bits = D, H
    res.error_bound, res.error_bound_text = str(err), format_up(err)
    res.seconds = time.perf_counter() - t0
    return res


def claim_of(obj):
    """The claim ``check_item`` tests: the Construction or IdentityClaim itself (or what an
    object's ``claim()`` returns); a witness claim is refused (:class:`RandomizedUnsupported`),
    before any work."""
    from constructions.claims import WitnessClaim

    if not isinstance(obj, (Construction, IdentityClaim, WitnessClaim)) and callable(getattr(obj, "claim", None)):
        obj = obj.claim()
    if isinstance(obj, (Construction, IdentityClaim)):
        return obj
    raise RandomizedUnsupported("a witness claim (a certified computation, not a polynomial identity): --check "
                                "random does not apply; --check exact runs it")


def check_item(obj, *, seed: int | None = None) -> RandomizedResult:
    """The randomized test of a catalogue item (:func:`claim_of`)."""
    obj = claim_of(obj)
    if isinstance(obj, Construction):
        return check(obj, seed=seed)
    return check_identity(obj, seed=seed)
