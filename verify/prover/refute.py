"""Refute first: a randomized identity test of each section at a point with small integer
coordinates, before any exact proof, so that wrong weights (a learned or tampered file) are FAILED
in seconds with an exact counterexample instead of filling the memory with the full ring's
residual (issue 41 item 1).

:func:`refute` runs, for each section (prologue, one body, epilogue) of a construction or of the
layers given for it (``sections``, as :func:`verify.prover.proof.prove` takes them), the claim
``layers(start(v)) == target(v)`` at the construction's own parameter values (a step size the exact
proof takes as a symbol is the construction's here: a mismatch there refutes the layers as stored):

1. **the test** (the randomized check's arithmetic, ``verify/prover/randomized.py``): a random 61-bit
   prime ``p`` (redrawn where it divides a denominator of the weights or of the specification) and a
   point ``r`` whose coordinates are integers drawn uniformly from ``[-B, B]`` (:data:`POINT_BOUNDS`:
   first small ones, then one wider point; first of all the points a caller offered, :func:`offer_points`: the
   import's parameter solve, whose layer evaluations modulo the same prime are then reused,
   :func:`forward_shared`), reduced modulo ``p``; the start state and the target by
   the specification's own code on residues, the layers by their modular forward.  **A mismatch
   modulo p at an integer point is a definite mismatch at that point**: reduction modulo ``p`` is a
   ring homomorphism on the rationals whose denominators ``p`` does not divide, so equal rational
   values have equal residues;
2. **the exact counterexample**: both sides are then evaluated exactly at that integer point, in
   rationals (object arrays of gmpy2's ``mpq`` through the layers' own ``forward``, :func:`to_mpq`;
   a dense product is one FLINT integer-matrix product, ``constructions.ops.mm_rational``;
   ``constructions.base.run_layers``, and the specification's own ``input_state`` / ``state`` /
   ``step`` / ``final_state`` at the same point in ``Fraction``, ``rings.section_claims``); the first differing entry
   of the section's output is found by the kernel's equality (``kernel.first_mismatch``).  The point
   is then made sparse (coordinates set to 0 in halves and quarters, ... while the two sides still
   differ at the same first entry and the same layer and entry are blamed; :data:`SHRINK_SECONDS`,
   :data:`SHRINK_EVALS`), so the counterexample names few variables ("every other variable is 0",
   ``Counterexample``) and names the entries the exact proof would (at the first, random, point every
   entry whose polynomials differ differs, but for a negligible chance);
3. **the layer to blame**, as the exact proof's diagnosis (``locate.py``) but at that point: the
   first layer whose output differs from the construction's declared intermediate state on a declared
   entry (used only where the construction's own layers produce the declared states at the point),
   else the first layer differing from the construction's own layer (``sections`` given), else the
   section's last layer.  ``Failure.located_by`` says which, followed by :data:`REFUTED`;
   ``Failure.culprit`` holds the blamed layer's entry and both exact values there.

Where the exact evaluation would be too large (a state of more than :data:`EXACT_ENTRIES` entries,
or a layer whose matrix products are estimated past :data:`EXACT_SECONDS`: large dense float
weights), or the specification computes in floats (inexact in ``Fraction`` arithmetic), or it
cannot run, the failure reports the integer point (made sparse modulo ``p``), the entry and the two
values modulo ``p``, and says so.

The layers are read once (:func:`prepared`): floats as their exact binary values, zeros as the
structural int 0 and equal values as one object (a weight file's entries are one object each),
which changes no value.

What it returns: None where every section agrees at every point (nothing refuted: the exact proof
decides), or a :class:`~constructions.claims.ProofResult` with ``ok=False`` and a
:class:`~constructions.claims.Failure`.  Such a result is never sealed by the kernel (this module
does not call the kernel's sealing function, ``tests/verify/prover/test_kernel.py`` checks it), so
``kernel.verdict`` reads it FAILED: a refutation cannot make a PROVED.  Anything this test cannot
evaluate (a specification that needs more than ring arithmetic, a layer kind without a modular
forward, non-finite weights) is not refuted here: None, and the exact proof runs as before.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction

import gmpy2
import numpy as np

from constructions import ops
from constructions.base import Construction, run_layers
from constructions.claims import (LOCATED_LAST, LOCATED_ONLY, LOCATED_OWN, LOCATED_STATES, Counterexample, Failure,
                                  LayerMismatch, ProofResult)
from constructions.exact_floats import is_lazy
from constructions.sparse import SparseMatrix
from constructions.weights_io import same_layer

from . import modular
from .kernel import differing, first_mismatch, is_zero
from .locate import Location, first_off_declared
from .randomized import draw_prime
from .randomized_bounds import ModP, evaluated, to_residues
from .rings import declared_states, entry_name, exact_floats, exact_layer, section_claims

#: the points tried, in order: coordinates uniform in [-B, B] for each B (a nonzero difference of
#: degree d vanishes at such a point with probability at most d / (2B + 1), Schwartz-Zippel; every
#: entry of the section must vanish for a miss)
POINT_BOUNDS = (8, 1 << 16)
#: the points tried after a smaller (injective) ring found a difference: the failure is certain
MORE_BOUNDS = (8, 8, 1 << 10, 1 << 16, 1 << 32)
#: the exact evaluation at the point runs where a state has at most this many entries ...
EXACT_ENTRIES = 1_000_000
#: ... and its estimated time (each layer's, before it runs: :func:`_run_bounded`) is at most this (s)
EXACT_SECONDS = 20.0
#: the sparsification of the counterexample stops after this many evaluations, or seconds (at least
#: SHRINK_SECONDS; up to twice the first exact evaluation's time, at most 3 x SHRINK_SECONDS)
SHRINK_SECONDS = 4.0
SHRINK_EVALS = 400
#: ``Failure.located_by`` of a refutation ends with this
REFUTED = "randomized refutation at an integer point"
#: the prime tries (a prime dividing a denominator is redrawn)
_PRIME_TRIES = 8

_SECTIONS = ("prologue", "body", "epilogue")


class _Inexact(ValueError):
    """The specification computed a float at the point (not exact in Fraction arithmetic)."""


class _TooLarge(ValueError):
    """The exact evaluation at the point would take too long."""


@dataclass
class _Found:
    """What the modular test found: the section, the prime, the integer point, the first entry that
    differs modulo p and both residues there."""

    section: str
    prime: int
    bound: int
    point: dict  # variable -> object array of Python ints
    index: tuple
    got: int
    expected: int
    entries: int = 0


@dataclass
class _At:
    """The exact evaluation of the failing section at one point."""

    point: dict
    index: tuple
    got: Fraction
    expected: Fraction
    loc: Location
    ref: tuple | None = None  # (layer, index) of the first difference from the own layers
    signature: tuple = field(default=())


# ------------------------------------------------------------------ points

def _integer_point(variables: dict, rng: np.random.Generator, bound: int) -> dict:
    """Each variable's entries uniform in [-bound, bound], as object arrays of Python ints."""
    out = {}
    for name, shape in variables.items():
        vals = rng.integers(-bound, bound + 1, size=shape, dtype=np.int64)
        a = np.empty(shape, dtype=object)
        a[...] = np.asarray(vals).tolist() if shape else int(vals)
        out[name] = a
    return out


def _residue_point(point: dict, p: int) -> dict:
    """The point modulo ``p`` as :class:`ModP` scalars (a scalar variable as the scalar itself, as
    the randomized check passes it)."""
    out = {}
    for name, a in point.items():
        r = np.empty(a.shape, dtype=object)
        for ix in np.ndindex(*a.shape):
            r[ix] = ModP(int(a[ix]) % p, p)
        out[name] = r if a.shape else r[()]
    return out


def _exact_point(point: dict) -> dict:
    """The point as exact object arrays (a 0 is the int 0 the exact operations skip; a scalar variable
    a 0-d array, as ``proof.problem_from_assignment`` builds it)."""
    return {name: a.copy() for name, a in point.items()}


def _coordinates(point: dict) -> list[tuple[str, tuple]]:
    return [(name, ix) for name, a in point.items() for ix in np.ndindex(*a.shape) if a[ix] != 0]


def _restricted(point: dict, keep: list[tuple[str, tuple]], values: dict | None = None) -> dict:
    """The point with every coordinate outside ``keep`` set to 0 (``values``: coordinates replaced)."""
    out = {name: np.zeros(a.shape, dtype=object) for name, a in point.items()}
    for name, ix in keep:
        out[name][ix] = point[name][ix] if values is None or (name, ix) not in values else values[(name, ix)]
    return out


def assignment(point: dict) -> dict[str, str]:
    """The nonzero coordinates of a point, by entry name (``Counterexample.assignment``: every other
    variable is 0)."""
    return {entry_name(name, ix): str(Fraction(int(a[ix]))) for name, a in point.items()
            for ix in np.ndindex(*a.shape) if a[ix] != 0}


# ------------------------------------------------------------------ the modular test

# ------------------------------------------------------------------ what refutations of the same layers share

_SHARED: list[dict] = []


@contextmanager
def shared_memo():
    """Within the block, the refutations (and ``verify.importers.search.solve_param``, which reads the same
    layers at integer points before the proof) share what they derive from a layer object: its exact form
    (:func:`prepared`), its residues modulo p, its gmpy2 form (:func:`fast_layer`) and its weights'
    statistics (the exact evaluation's cost estimate), each keyed by the layer's id with the layer kept alive,
    so every value is the one each would compute alone (a learned file's dense weights are converted once,
    not once per step).  All of it is freed when the block ends."""
    _SHARED.append({})
    try:
        yield
    finally:
        _SHARED.pop()


def shared(kind: str) -> dict:
    """The memo of ``kind`` of the innermost :func:`shared_memo` block, or a fresh dict outside one."""
    return _SHARED[-1].setdefault(kind, {}) if _SHARED else {}


def offer_points(points: list[dict], bound: int) -> None:
    """Within a :func:`shared_memo` block: integer points (each variable an object array of Python ints with
    entries in ``[-bound, bound]``) at which the layers were already run modulo :func:`first_prime` through
    :func:`forward_shared` (the import's parameter solve, ``verify.importers.search``).  :func:`refute` tries
    them first (those whose variables are the construction's), so its modular test at them is the solve's
    evaluation, not a second one; any point is as good a test point as its own (a difference modulo p at an
    integer point is a definite one), and the report gives its bound.  Outside a block: nothing."""
    if _SHARED:
        shared("points").setdefault("offered", []).extend((pt, int(bound)) for pt in points)


def _fits(point: dict, variables: dict) -> bool:
    return (isinstance(point, dict) and set(point) == set(variables)
            and all(np.shape(point[k]) == tuple(shape) for k, shape in variables.items()))


def forward_shared(L: dict, S: np.ndarray, p: int) -> np.ndarray:
    """``modular.forward(L, S, p)``; within a :func:`shared_memo` block kept by the layer's residues (``L``,
    kept alive with it) and the input state: a second call with the same ``L`` and an equal state (compared in
    full, not only by its digest) returns the first call's output (read-only: shared)."""
    if not _SHARED:
        return modular.forward(L, S, p)
    import hashlib

    S = np.asarray(S)
    memo = shared("forward")
    digest = hashlib.blake2b(np.ascontiguousarray(S).tobytes(), digest_size=16).digest()
    key = (id(L), p, S.shape, S.dtype.str, digest)
    hit = memo.get(key)
    if hit is not None and hit[0] is L and np.array_equal(hit[1], S):
        return hit[2]
    out = modular.forward(L, S, p)
    kept = np.array(S, copy=True)
    kept.flags.writeable = False
    out.flags.writeable = False
    memo[key] = (L, kept, out)
    return out


def first_prime(seed: int = 0) -> int:
    """The first prime :func:`refute` with ``seed`` tests modulo: in a :func:`shared_memo` block, the layers'
    residues ``search.solve_param`` computed modulo it are the test's."""
    return draw_prime(np.random.default_rng(seed))


def _plan(con: Construction, sections) -> list[tuple[str, list]]:
    """(section, its layers as :func:`prepared`) of every section tested; an empty body is not (as the proof)."""
    src = sections if sections is not None else {sec: getattr(con, sec) for sec in _SECTIONS}
    memo = shared("prepared")
    return [(sec, [prepared(L, memo) for L in src[sec]]) for sec in _SECTIONS if not (sec == "body" and not src[sec])]


def _structural_zeros(A):
    """An exact weight array with every zero entry the int 0 object the exact operations skip, and equal
    values one shared object (a weight file's entries are read one object each: the modular forward reduces
    each distinct object once, the exact one computes a row once per distinct operand objects); the same
    array where neither changes anything (a builder's arrays: zeros the int 0, values shared)."""
    if not (isinstance(A, np.ndarray) and A.dtype == object and A.size):
        return A
    flat = A.reshape(-1)
    addr = ops.addresses(flat)
    cand = np.flatnonzero(addr != id(0))
    if not cand.size:
        return A
    objs, first = np.unique(addr[cand], return_index=True)
    if objs.size <= max(_FEW, flat.size // _REPEATS):  # few objects (a builder's array, a bias repeated on every
        #                                               token): only a zero among them to replace
        zeros = [a for a, x in zip(objs.tolist(), flat[cand[first]].tolist()) if x == 0]
        if not zeros:
            return A
        B = flat.copy()
        B[cand[np.isin(addr[cand], np.asarray(zeros, dtype=addr.dtype))]] = 0
        return B.reshape(A.shape)
    pos = cand[ops.nonzero_pattern(flat[cand])]  # many objects (a weight file's): zeros structural, values shared
    vals = flat[pos].tolist()
    try:  # keyed by (numerator, denominator): ints' hashes, not Fractions'
        table: dict = {}
        shared = [table.setdefault((v._numerator, v._denominator) if type(v) is Fraction else
                                   (v.numerator, v.denominator), v) for v in vals]  # (Fraction's slots: its
        #                                                                   properties cost a call per entry)
    except (AttributeError, TypeError):  # an entry that is not a rational: zeros only
        shared = vals
    B = np.zeros(flat.shape, dtype=object)
    if len(pos):
        B[pos] = np.asarray(shared + [None], dtype=object)[:-1]  # (the None: never a 2-D array of objects)
    return B.reshape(A.shape)


#: an array with at most this many distinct entry objects, or with each object at least _REPEATS times on
#: average, is left as it is unless one of them is a zero
_FEW = 256
_REPEATS = 16


def prepared(L, memo: dict | None = None):
    """``L`` with its floats read as their exact binary values (``rings.exact_layer``) and its zeros
    structural (:func:`_structural_zeros`): the same values, the same layer where nothing changes.  A lazily
    read weight (``constructions/exact_floats.py``) is kept as it is: this module reads it exactly itself
    (residues from its stored floats, its mask and a sample for the cost estimate, gmpy2 rationals for the exact
    evaluation: :func:`to_mpq`)."""
    if memo is not None and id(L) in memo and memo[id(L)][0] is L:
        return memo[id(L)][1]
    E = exact_layer(L, lazy=True)
    changed = [False]

    def f(A):
        B = _structural_zeros(A)
        changed[0] = changed[0] or B is not A
        return B

    M = E.map(f)
    out = M if changed[0] else E
    if memo is not None:
        memo[id(L)] = (L, out)  # L kept alive: its id stays its own
    return out


def to_mpq(A, shared: dict | None = None):
    """An exact object array with each ``Fraction`` entry as gmpy2's ``mpq`` of the same value (equal
    objects stay one object: ``shared``, by the entry's id); anything else as it is.  The exact evaluation
    runs the layers' own ``forward`` on these: GMP's rationals multiply and add the long numerators and
    denominators of dense float weights' products about ten times faster than ``Fraction`` (whose gcds
    run in Python), they mix with ``Fraction`` and ``int`` (the specification's values) to the exact
    rational, and a dense product of them is one FLINT matrix product (``constructions.ops.mm_rational``).
    Values, and so every comparison and the counterexample (read back with ``Fraction``), are unchanged."""
    if is_lazy(A):  # a lazily read weight (constructions/exact_floats.py): its values formed once, in mpq
        return A.materialise(scalar="mpq")
    if not (isinstance(A, np.ndarray) and A.dtype == object and A.size):
        return A
    flat = A.reshape(-1)
    vals = flat.tolist()
    hits = [h for h, x in enumerate(vals) if type(x) is Fraction]
    if not hits:
        return A
    memo = {} if shared is None else shared
    conv = np.empty(len(hits), dtype=object)
    for i, h in enumerate(hits):
        x = vals[h]
        hit = memo.get(id(x))
        if hit is None or hit[0] is not x:
            hit = memo[id(x)] = (x, gmpy2.mpq(x.numerator, x.denominator))  # x kept alive: its id stays its own
        conv[i] = hit[1]
    out = flat.copy()
    out[hits] = conv
    return out.reshape(A.shape)


def fast_layer(L, memo: dict | None = None):
    """``L`` (as :func:`prepared`) with its ``Fraction`` weights as gmpy2 rationals (:func:`to_mpq`): the
    same layer, the same values."""
    if memo is not None and id(L) in memo and memo[id(L)][0] is L:
        return memo[id(L)][1]
    shared = memo.setdefault("__values__", {}) if memo is not None else {}
    out = L.map(lambda A: to_mpq(A, shared))
    if memo is not None:
        memo[id(L)] = (L, out)
    return out


def _modular_mismatch(con, plan, point, p, cache) -> _Found | None:
    """Every section of ``plan`` at the integer ``point`` modulo ``p``; the first mismatch (None: all
    agree).  :class:`modular.Unrepresentable` where ``p`` divides a denominator."""
    v = _residue_point(point, p)
    claims = {sec: (s, t) for sec, s, t in section_claims(con, v)}
    what = f"{con.name}'s specification"
    entries = 0
    for sec, Ls in plan:
        start, target = claims[sec]
        S = to_residues(evaluated(start, what), p)[None]
        for L in Ls:
            key = (id(L), p)
            if key not in cache:
                cache[key] = (L, modular.layer_residues(L, p))  # L kept alive: its id stays its own
            S = forward_shared(cache[key][1], S, p)
        want = to_residues(evaluated(target, what), p)
        if S[0].shape != want.shape:
            raise ValueError(f"{sec}: the layers produce a state of shape {S[0].shape}, the specification "
                             f"{want.shape}")
        entries += want.size
        bad = np.argwhere(S[0] != want)
        if len(bad):
            ix = tuple(int(i) for i in bad[0])
            return _Found(sec, p, 0, point, ix, int(S[0][ix]), int(want[ix]), entries)
    return None


def _test(con, plan, seed: int, bounds, cache: dict) -> _Found | None:
    """The points :func:`offer_points` offered (those that fit ``con``'s variables), then those of ``bounds`` in
    turn (one prime), until a section differs modulo p (``cache``: the layers' residues, by layer and prime; the
    failure's report reuses them)."""
    rng = np.random.default_rng(seed)
    p = draw_prime(rng)
    tries = [(pt, b) for pt, b in shared("points").get("offered", []) if _fits(pt, con.variables)]
    for point, bound in tries + [(None, b) for b in bounds]:
        if point is None:
            point = _integer_point(con.variables, rng, bound)
        for _ in range(_PRIME_TRIES):
            try:
                found = _modular_mismatch(con, plan, point, p, cache)
                break
            except modular.Unrepresentable:
                p = draw_prime(rng)
        else:
            return None
        if found is not None:
            found.bound = bound
            return found
    return None


# ------------------------------------------------------------------ the exact evaluation

def _matrices(L, cache: dict) -> list[tuple[int, int, int]]:
    """``(rows, nonzeros, mean bits of a nonzero entry)`` of every 2-D weight array of ``L`` (a sample of
    at most 256 entries for the bits: numerator's plus denominator's)."""
    hit = cache.get(id(L))
    if hit is not None and hit[0] is L:
        return hit[1]
    out = []

    def bits_of(vals) -> float:
        vals = list(vals)[:256]
        bits = [Fraction(x).numerator.bit_length() + Fraction(x).denominator.bit_length()
                for x in exact_floats(np.asarray(vals, dtype=object)).tolist()] if vals else [0]
        return sum(bits) / len(bits)

    def stats(A):
        if isinstance(A, SparseMatrix):  # a sparse weight: its entries
            vals = [x for x in np.asarray(A.vals, dtype=object).reshape(-1).tolist() if x != 0]
            out.append((A.shape[0], len(vals), bits_of(vals)))
            return A
        if is_lazy(A):  # a lazily read weight: the mask and a sample from its stored floats, no Fraction per entry
            if A.ndim == 2 and A.size:
                nz = A.nonzero()
                out.append((A.shape[0], int(nz.sum()), bits_of(A.ravel()[np.flatnonzero(nz)[:256]].tolist())))
            return A
        A = np.asarray(A)
        if A.ndim == 2 and A.size:
            nz = ops.nonzero_pattern(A) if A.dtype == object else A != 0
            out.append((A.shape[0], int(nz.sum()), bits_of(A[nz].ravel()[:256].tolist())))
        return A

    stats.whole_weight = True  # a SparseMatrix as itself (constructions.sparse.map_weight)
    L.map(stats)
    cache[id(L)] = (L, out)
    return out


#: seconds per product of a state entry and a weight, per bit of the weight (numerator and denominator):
#: measured in ``Fraction`` on gd-baseconv (small weights, about 300 ns) and on dense float weights (about
#: 10 us) as 1e-7; in gmpy2's rationals with FLINT's matrix products (:func:`to_mpq`) the first exact
#: evaluation of a trained gd-baseconv 64x16 file (7 layers, estimated 56 s at 1e-7) took 3.4 s
_SECONDS_PER_BIT = 1e-8


def _run_bounded(Ls, S, limit: list, cache: dict, convert=lambda L: L):
    """``run_layers(Ls, S, keep=True)`` (each layer as ``convert`` makes it), with the cost of each layer's
    matrix products estimated before it is converted and runs (the state's nonzero entries times each weight matrix's nonzeros per row, times the weights'
    bits, :data:`_SECONDS_PER_BIT`) and taken from ``limit[0]`` (seconds): past it, :class:`_TooLarge`."""
    states = []
    for L in Ls:
        cols = S.shape[-1]
        nzs = int(ops.nonzero_pattern(S).sum()) if S.dtype == object else int(np.count_nonzero(S))
        cost = sum(nzs * nnz / rows * _SECONDS_PER_BIT * (1 + bits) for rows, nnz, bits in _matrices(L, cache)
                   if rows == cols)
        limit[0] -= cost
        if limit[0] < 0:
            raise _TooLarge(f"an exact evaluation of about {cost:.0f} s for one layer (estimated from the weights' "
                            f"nonzeros and sizes; more than {EXACT_SECONDS:g} s in all)")
        S = convert(L).forward(S)
        states.append(S)
    return states


def exact_feasible(con: Construction) -> str:
    """Why the exact evaluation at a point is too large for ``con``'s states ("" where it is not); the
    work is bounded as the layers run (:func:`_run_bounded`)."""
    rows, cols = con.layout.shape
    if rows * cols > EXACT_ENTRIES:
        return f"a state of {rows * cols} entries (more than {EXACT_ENTRIES})"
    return ""


def _has_float(A) -> bool:
    """``A`` holds a float (a specification computing in floats: not exact in Fraction arithmetic)."""
    A = np.asarray(A) if not isinstance(A, np.ndarray) else A
    return exact_floats(A) is not A


class _Exact:
    """The failing section's layers, exactly, at points: the first differing entry and the layer to
    blame (:meth:`at`)."""

    def __init__(self, con, sec: str, Ls, compare_own: bool):
        self.con, self.sec = con, sec
        memo = shared("prepared")
        self._memo, self._fast = memo, shared("fast")
        self.Ls = list(Ls)  # the plan's layers (:func:`prepared` already); each converted as it first runs
        self.n = len(Ls)
        own = list(getattr(con, sec))
        self.own = own
        self.ref = [prepared(L, memo) for L in own] if compare_own and own and len(own) == self.n else None
        if self.ref is not None and all(a is b or same_layer(a, b) for a, b in zip(self.ref, self.Ls)):
            self.ref = None  # the layers given are the construction's own (an import's projected specification
            #                  holds the file's first copy): their states are the same, no layer differs from them
        try:
            pristine = con.rebuild(**con.params) if con.rebuild else None
        except Exception:  # noqa: BLE001 - only a guard; without it the location falls back
            pristine = None
        P = getattr(pristine, sec) if pristine is not None else None
        self.pristine = ([prepared(L, memo) for L in P] if P is not None and len(P) == self.n
                         and not all(same_layer(a, b) for a, b in zip(P, Ls)) else None)
        self.use_declared: bool | None = None  # decided at the first point (:meth:`at` with decide)
        self.why_not = "no intermediate states declared"
        self.limit = [EXACT_SECONDS]  # the estimated seconds of the first evaluation (:func:`_run_bounded`)
        self.stats: dict = shared("stats")

    def fast(self, L):
        """``L`` (prepared) in gmpy2's rationals (:func:`fast_layer`), converted once, when it first runs."""
        return fast_layer(L, self._fast)

    def run(self, Ls, S0):
        """The states after each layer: the first evaluation bounded (:func:`_run_bounded`: each layer's cost
        estimated before it is converted and run), the others not."""
        if self.limit is None:
            return run_layers([self.fast(L) for L in Ls], S0, keep=True)
        return _run_bounded(Ls, S0, self.limit, self.stats, self.fast)

    def _states(self, v, decide: bool):
        start, target = next((s, t) for sec, s, t in section_claims(self.con, v) if sec == self.sec)
        S0 = start()
        want = target()
        if decide and (_has_float(S0) or _has_float(want)):
            raise _Inexact("the specification computes in floats at the point")
        return S0, want

    def at(self, point: dict, decide: bool = False) -> _At | None:
        """The section at ``point``: None where its output equals the target there."""
        v = _exact_point(point)
        S0, want = self._states(v, decide)
        S0 = to_mpq(S0)  # the same values, in gmpy2's rationals (:func:`to_mpq`)
        states = self.run(self.Ls, S0) if self.Ls else []
        got = states[-1] if states else S0
        if got.shape != want.shape:
            raise ValueError(f"{self.sec}: the layers produce a state of shape {got.shape}, the specification "
                             f"{want.shape}")
        idx, _ = first_mismatch(got, want)
        if idx is None:
            return None
        idx = tuple(int(i) for i in idx)
        loc, ref = self._locate(v, S0, states, want, decide)
        # what the report names: the blamed layer and how, its entry, the first difference from the own
        # layers, the output's first differing entry (at a random point, the exact proof's, w.h.p.)
        sig = (loc.layer, loc.by, None if loc.culprit is None else loc.culprit.index, ref, idx)
        return _At(point, idx, Fraction(got[idx]), Fraction(want[idx]), loc, ref, sig)

    def _declared(self, v, S0, decide: bool):
        n, lay = self.n, self.con.layout
        declared = declared_states(self.con, v, self.sec, n) if n > 1 and len(self.own) == n else None
        if declared is None:
            return None
        if decide:
            self.use_declared = True
            if self.pristine is not None:  # the construction's own layers must produce them (at this point)
                for i, S in enumerate(self.run(self.pristine[:-1], S0)):
                    j, _ = (None, None) if declared[i] is None else _first_masked(S, declared[i])
                    if j is not None:
                        self.why_not = (f"declared intermediate states not used: the construction's own {self.sec} "
                                        f"layers do not produce the state declared after {self.sec} layer {i} (at "
                                        f"{lay.describe(*j)})")
                        self.use_declared = False
                        break
        if not self.use_declared:
            return None
        if decide and any(d is not None and _has_float(d.expected) for d in declared):
            raise _Inexact("the declared intermediate states compute in floats at the point")
        return declared

    def _locate(self, v, S0, states, want, decide: bool):
        n, lay, sec = self.n, self.con.layout, self.sec
        if not n:
            return Location(0, LOCATED_ONLY), None
        declared = self._declared(v, S0, decide)
        ref = None
        if self.ref is not None:  # the own layers run one at a time, up to the first whose output differs
            b = S0
            for li, (a, L) in enumerate(zip(states, self.ref)):
                b = self.run([L], b)[-1]
                j, _ = first_mismatch(a, b)
                if j is not None:
                    ref = (li, tuple(int(t) for t in j))
                    break
        if declared is not None:
            i, j, diff, wval, prev = first_off_declared(states, declared, want, masked=_first_masked)
            j = tuple(int(t) for t in j)
            region, entry = lay.locate(*j)
            culprit = _Culprit(region, entry, j, Fraction(states[i][j]), Fraction(wval))
            note = (f"located by the declared intermediate states: {sec} layer {i} is the first layer whose output "
                    f"differs from the state declared after it, at {lay.describe(*j)}")
            if prev < i - 1:
                note += (f"; no state is declared after {sec} layers {prev + 1}..{i - 1}: the culprit is one of "
                         f"{sec} layers {prev + 1}..{i}")
            if ref is not None and ref != (i, j):
                ref_li, ref_j = ref
                undeclared = ref_li < n - 1 and declared[ref_li] is not None and not declared[ref_li].mask[ref_j]
                note += (f" (the first layer differing from the construction's own layer is {sec} layer {ref_li}, at "
                         f"{lay.describe(*ref_j)}{', an undeclared entry' if undeclared else ''})")
            return Location(i, LOCATED_STATES, note, culprit), ref
        if ref is not None:
            ref_li, ref_j = ref
            note = (f"first layer whose output differs from the construction's own layer: {sec} layer {ref_li}, "
                    f"at {lay.describe(*ref_j)}")
            if n > 1:
                note += (f"; {self.why_not}: this is where the first difference appears, not necessarily the "
                         f"culprit layer")
            return Location(ref_li, LOCATED_OWN if n > 1 else LOCATED_ONLY, note), ref
        if n <= 1:
            return Location(0, LOCATED_ONLY), None
        return Location(n - 1, LOCATED_LAST,
                         f"{self.why_not}: located where the difference appears ({sec} layer {n - 1}, the section's "
                         f"last layer), not necessarily the culprit layer"), None


@dataclass
class _Culprit:
    """The blamed layer's entry and both exact values there (a ``LayerMismatch`` once the point is final)."""

    region: str
    entry: tuple
    index: tuple
    got: Fraction
    declared: Fraction

    def mismatch(self, asg: dict) -> LayerMismatch:
        return LayerMismatch(self.region, self.entry, self.index,
                             _residual_text(self.got - self.declared, "layer output - declared"),
                             Counterexample(asg, str(self.got), str(self.declared)))


def _first_masked(S, want):
    """The first declared entry (``want.mask``) where ``S`` differs from ``want.expected``: the kernel's
    equality (:func:`kernel.differing`, each distinct pair once) on the declared entries, in numpy's loops."""
    cand = differing(S, want.expected) & np.asarray(want.mask, dtype=bool)
    for h in np.flatnonzero(cand).tolist():
        idx = tuple(int(i) for i in np.unravel_index(h, S.shape))
        diff = S[idx] - want.expected[idx]
        if not is_zero(diff):
            return idx, diff
    return None, None


def _residual_text(diff: Fraction, what: str = "layers - spec") -> str:
    return f"not formed (refuted at an integer point): {what} = {diff} at the counterexample"


# ------------------------------------------------------------------ the sparse counterexample

def _shrink(point: dict, holds, deadline: float, max_evals: int):
    """``point`` with as many coordinates set to 0 as ``holds`` (the failure persists) allows, by
    halves, quarters, ... of the nonzero coordinates (delta debugging); then each remaining value
    replaced by 1 where that still fails.  Returns ``(point, the last evaluation that held or None)``."""
    coords = _coordinates(point)
    best = None
    evals = 0

    def budget() -> bool:
        return evals < max_evals and time.perf_counter() < deadline

    def attempt(keep, values=None):
        nonlocal evals
        evals += 1
        cand = _restricted(point, keep, values)
        r = holds(cand)
        return (cand, r) if r is not None else None

    if coords and budget():
        hit = attempt([])
        if hit is not None:
            return hit
    n = 2
    while len(coords) >= 2 and budget():
        size = -(-len(coords) // n)
        chunks = [coords[i:i + size] for i in range(0, len(coords), size)]
        for ch in chunks:
            if not budget():
                break
            drop = set(ch)
            keep = [c for c in coords if c not in drop]
            hit = attempt(keep)
            if hit is not None:
                point, best = hit
                coords = keep
                n = max(n - 1, 2)
                break
        else:
            if n >= len(coords):
                break
            n = min(2 * n, len(coords))
    if len(coords) == 1 and budget():  # the last coordinate may go too
        hit = attempt([])
        if hit is not None:
            return hit
    for c in list(coords):
        if not budget():
            break
        if abs(int(point[c[0]][c[1]])) != 1:
            hit = attempt(coords, {c: 1})
            if hit is not None:
                point, best = hit
    return point, best


# ------------------------------------------------------------------ the result

def _offsets(sections, con) -> dict[str, int]:
    src = sections if sections is not None else {sec: getattr(con, sec) for sec in _SECTIONS}
    return {"prologue": 0, "body": len(src["prologue"]), "epilogue": len(src["prologue"]) + len(src["body"])}


def refute(con: Construction, sections: dict | None = None, *, seed: int = 0, bounds=POINT_BOUNDS,
           compare_own: bool | None = None, shrink_seconds: float = SHRINK_SECONDS) -> ProofResult | None:
    """Refute ``con`` (or the layers ``sections`` against its specification) at integer points (the
    module docstring): a FAILED :class:`ProofResult` with an exact counterexample, or None when no
    section differs at the points tried (or the test cannot evaluate the claim).  ``seed``: the points
    and the prime (reported); ``bounds``: the points' coordinate ranges, in order; ``compare_own``:
    blame the first layer differing from the construction's own (default: where ``sections`` is
    given, as ``prove``)."""
    t0 = time.perf_counter()
    plan = _plan(con, sections)
    cache = shared("residues")  # the layers' residues modulo p: the test's, reused by a report modulo p
    try:
        found = _test(con, plan, seed, bounds, cache)
    except Exception:  # noqa: BLE001 - whatever the test cannot evaluate, the exact proof decides
        return None
    if found is None:
        return None
    Ls = dict(plan)[found.section]
    own = sections is not None if compare_own is None else compare_own
    offsets = _offsets(sections, con)
    try:
        return _exact_failure(con, found, Ls, offsets, own, seed, t0, shrink_seconds, cache)
    except Exception as e:  # noqa: BLE001 - floats in the specification (_Inexact), or anything else the exact
        why = str(e) if isinstance(e, _Inexact) else f"it raised {type(e).__name__}"  # evaluation cannot do
    try:
        return _modular_failure(con, found, Ls, offsets, seed, t0, shrink_seconds, why, cache)
    except Exception:  # noqa: BLE001 - the refutation is a shortcut: where it cannot report, the exact proof does
        return None


def _result(con, found: _Found, failure: Failure, t0: float, backend: str, exact: bool) -> ProofResult:
    res = ProofResult(con.name, False, 0.0, sections={found.section: False}, entries_checked=found.entries,
                      failure=failure, backend=backend)
    exactly = ", both sides then exact in rationals" if exact else ""
    res.ring = (f"integer point (refuted modulo p = {found.prime} at a point with coordinates in "
                f"[-{found.bound}, {found.bound}]; a definite failure{exactly}; the exact proof was not run)")
    res.seconds = time.perf_counter() - t0
    return res


def _refutation_note(found: _Found, seed: int, exact: bool) -> str:
    head = (f"refuted by a randomized identity test (verify/prover/refute.py, seed {seed}): the {found.section} "
            f"differs modulo p = {found.prime} at a point with integer coordinates in [-{found.bound}, "
            f"{found.bound}], a definite failure; ")
    if exact:
        return head + ("both sides evaluated exactly in rationals at the counterexample (made sparse: every variable "
                       "not named is 0); the residual polynomial was not formed")
    return head


def _exact_failure(con, found: _Found, Ls, offsets, compare_own, seed, t0, shrink_seconds, cache) -> ProofResult:
    why = exact_feasible(con)
    if why:
        return _modular_failure(con, found, Ls, offsets, seed, t0, shrink_seconds, why, cache)
    ev = _Exact(con, found.section, Ls, compare_own)
    t1 = time.perf_counter()
    try:
        first = ev.at(found.point, decide=True)
    except _TooLarge as e:
        return _modular_failure(con, found, Ls, offsets, seed, t0, shrink_seconds, str(e), cache)
    ev.limit = None  # the first evaluation is the largest: the rest run under the sparsification's deadline
    if first is None:  # cannot happen (a mismatch modulo p is one over the rationals): the exact proof decides
        raise _Inexact("the exact evaluation at the point agrees")
    one = time.perf_counter() - t1

    def holds(cand):
        r = ev.at(cand)
        return r if r is not None and r.signature == first.signature else None

    deadline = time.perf_counter() + max(shrink_seconds, min(2 * one, 3 * shrink_seconds))
    point, best = _shrink(found.point, holds, deadline, SHRINK_EVALS)
    at = best or first
    sec, idx = found.section, at.index
    region, entry = con.layout.locate(*idx)
    loc = at.loc
    note = (loc.note + "; " if loc.note else "") + _refutation_note(found, seed, True)
    asg = assignment(at.point)
    failure = Failure(section=sec, layer=offsets[sec] + loc.layer, layer_in_section=loc.layer, region=region,
                      entry=entry, state_index=idx, residual=_residual_text(at.got - at.expected),
                      counterexample=Counterexample(asg, str(at.got), str(at.expected)),
                      note=note, located_by=f"{loc.by} ({REFUTED})",
                      culprit=None if loc.culprit is None else loc.culprit.mismatch(asg))
    return _result(con, found, failure, t0, "fractions", True)


def _modular_failure(con, found: _Found, Ls, offsets, seed, t0, shrink_seconds, why: str,
                     cache: dict | None = None) -> ProofResult:
    """The failure reported modulo p (the exact evaluation is too large, or inexact): the integer point
    (made sparse modulo p), the entry, both residues, the section's last layer."""
    p, sec = found.prime, found.section
    plan1 = [(sec, Ls)]
    cache = {} if cache is None else cache  # the test's residues of these layers (the same objects)
    latest = {"found": found}

    def holds(cand):
        try:
            r = _modular_mismatch(con, plan1, cand, p, cache)
        except modular.Unrepresentable:
            return None
        if r is not None:
            latest["found"] = r
        return r

    _shrink(found.point, holds, time.perf_counter() + shrink_seconds, SHRINK_EVALS)
    f = latest["found"]
    n = len(Ls)
    li = max(n - 1, 0)
    region, entry = con.layout.locate(*f.index)
    note = (_refutation_note(found, seed, False)
            + f"the values are residues modulo p (the exact evaluation was not run: {why}); located where the "
              f"difference appears ({sec} layer {li}, the section's last layer), not necessarily the culprit layer")
    failure = Failure(section=sec, layer=offsets[sec] + li, layer_in_section=li, region=region, entry=entry,
                      state_index=f.index, residual=f"not formed (refuted modulo p = {p} at an integer point)",
                      counterexample=Counterexample(assignment(f.point), f"{f.got} (mod p)", f"{f.expected} (mod p)"),
                      note=note, located_by=f"{LOCATED_LAST if n > 1 else LOCATED_ONLY} ({REFUTED})")
    found.entries = max(found.entries, f.entries)
    return _result(con, found, failure, t0, "modular", False)


__all__ = ["refute", "shared_memo", "first_prime", "offer_points", "forward_shared", "exact_feasible", "assignment",
           "REFUTED", "POINT_BOUNDS", "MORE_BOUNDS"]
