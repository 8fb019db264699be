"""Parameters read from a file, proofs of a file's stack, and the nearby specifications.

* :func:`solve_param`: the value of a specification parameter (the step size) that the file's
  layers imply.  The file's sections are run exactly on projected start states whose variables
  are integers (:data:`SOLVE_POINTS` seeded points), against targets built with the parameter as
  the one symbol; every entry of the residual is then a polynomial in the parameter alone that
  must vanish.  A rational root of all of them is *the* value ("consistent": any other value
  leaves a nonzero residual at an integer point); when there is none (the stack is not the
  specification at any value), the nonzero root that most linear residuals share is reported as
  the value the file's weights carry, with how many agree, and where no two share one (a trained
  file) the file carries no value.  Either way the verdict is a proof at that exact value, never
  the solve.  The layers are never expanded in symbols: dense trained layers run in symbols fill
  gigabytes (issue 41 item 1), at integer points they are a few exact rationals per entry.
* :func:`describe_value`: an exact rational as the float the file stored, e.g.
  ``13421773/134217728 = 0.1 rounded to float32``.
* :func:`prove_stack`: the file's stack split into prologue / body copies / epilogue and
  proved, each distinct body copy once (as ``gd --weights``).
* :func:`variants`: the nearby readings of the same file: another convolution convention
  (causal / circular / "same", the same taps), the filter taps reversed (lag ``s`` read as lag
  ``T-1-s``), transposed weight matrices, the query token as a key.  (The other named
  specifications a failing file is tried against are ``cli.nearby_specifications``.)
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import replace
from fractions import Fraction

import numpy as np

from constructions.exact_floats import ExactFloats, is_lazy
from constructions.layers import BaseConv, TokenLSA, TokenLSAHead
from constructions.running_sums import RunningSum
from verify.prover.proof import ProofResult, SymbolicProblem, prove
from verify.prover.flint_backend import FlintRing
from verify.prover.refute import offer_points, shared

from .common import transpose

#: the parameter solve's start states: this many, each variable's entries integers drawn from
#: [-SOLVE_BOUND, SOLVE_BOUND] (seeded: the same file reads the same value)
SOLVE_POINTS = 2
SOLVE_BOUND = 64
#: a point after the first is run only while the solve has taken less than this (seconds): each point's
#: residuals alone determine a value that the proof then decides (the report says how many points ran;
#: a learned 256x64 file's layers take seconds per point, bench/bench_learned_targets.py)
SOLVE_SECONDS = 4.0
SOLVE_SEED = 20260041


def split(con, layers) -> dict:
    p, b, e = len(con.prologue), len(con.body), len(con.epilogue)
    k = (len(layers) - p - e) // b if b else 0
    return {"prologue": layers[:p], "bodies": [layers[p + j * b:p + (j + 1) * b] for j in range(k)],
            "epilogue": layers[len(layers) - e:] if e else [], "k": k}


def _same(a, b) -> bool:
    from constructions.weights_io import same_layer

    return len(a) == len(b) and all(x is y or same_layer(x, y) for x, y in zip(a, b))


def distinct_bodies(secs) -> list[tuple[int, list]]:
    out: list[tuple[int, list]] = []
    for j, body in enumerate(secs["bodies"]):
        if not any(_same(body, v) for _, v in out):
            out.append((j, body))
    return out


#: the nearby search's refutations make their counterexample sparse for at most this long (seconds;
#: refute.py's own default, SHRINK_SECONDS, is for the verdict): a nearby reading needs its FAILED and the
#: layer it blames, which the refutation locates before any shrinking (bench/bench_import_trained.py: the
#: shrinking was half the search's time on a trained 20x5 file)
NEARBY_SHRINK_SECONDS = 0.0


def prove_stack(con, layers, shrink_seconds: float | None = None) -> ProofResult:
    """Prove the file's stack against ``con`` (a projected specification): each distinct body
    copy once, with the file's prologue and epilogue; the first failure is returned, its layer
    numbered in the file's stack.  ``shrink_seconds`` (the nearby search): the refutation's time to
    make its counterexample sparse (``refute.refute``'s ``shrink_seconds``; None: its default); a
    stack the refutation does not reject is proved as ever (``prove``)."""
    from verify.prover.refute import refute

    secs = split(con, layers)
    result = None
    total = 0.0
    for j, body in distinct_bodies(secs) or [(0, [])]:
        # refuting first (verify/prover/refute.py): a wrong file is FAILED at an integer point, exactly
        sections = {"prologue": secs["prologue"], "body": body, "epilogue": secs["epilogue"]}
        r = None
        if shrink_seconds is not None:  # prove's own first step, with a shorter shrink; None: no difference found
            r = refute(con, sections, compare_own=True, shrink_seconds=shrink_seconds)
        if r is None:
            r = prove(con, sections=sections, refute=True)
        total += r.seconds
        if result is None or not r.ok:
            result = r
        if not r.ok:
            if r.failure.section == "body" and j:
                r.failure.layer += j * len(con.body)
                r.failure.note = (f"body copy {j}; " + r.failure.note).strip()
            if r.failure.section == "epilogue" and secs["k"] > 1:
                r.failure.layer += (secs["k"] - 1) * len(con.body)
            break
    result.seconds = total
    return result


def solve_param(build, name: str, layers) -> dict | None:
    """The value of parameter ``name`` the file's ``layers`` imply (module docstring), or None
    when no section's residual depends on it.  ``build(**{name: value})`` -> projected spec.

    The file's layers are run on :data:`SOLVE_POINTS` start states whose variables are integers
    (exact rationals through the layers, never polynomials in the problem's variables: a dense
    trained layer expanded symbolically fills gigabytes, issue 41 item 1), against targets built
    with the parameter as the one symbol; every entry of each residual is then a polynomial in the
    parameter alone (its degree the specification's), which must vanish.

    First (:data:`SOLVE_MODULAR`) the residuals are read with the layers' side modulo a 61-bit prime
    (:func:`_no_value_modulo_p`): where that shows that no two distinct residual entries can share a
    root (a learned file), the file carries no value, decided without the exact run of its layers;
    otherwise (a root shared modulo p, as a file that carries a value has) the exact residuals decide."""
    con0 = build()
    sp = SymbolicProblem({}, (name,))
    R = sp.R
    con = build(**{name: sp.params[name]})
    ar = FlintRing(R)
    secs = split(con0, layers)
    claims = [("prologue", con.input_state, con.state, secs["prologue"]),
              ("epilogue", con.state, con.final_state, secs["epilogue"])]
    claims += [("body", con.state, lambda v: con.state(con.step(v)), body) for _, body in distinct_bodies(secs)]
    claims = [c for c in claims if c[3]]
    rng = np.random.default_rng(SOLVE_SEED)
    starts = [{k: _integers(rng, shape) for k, shape in con0.variables.items()} for _ in range(SOLVE_POINTS)]
    offer_points(starts, SOLVE_BOUND)  # the refutation tries them first: the layers' forward below is its own
    if SOLVE_MODULAR:
        quick = _no_value_modulo_p(claims, starts, ar)
        if quick is not None:
            return quick
    groups_all: list[dict] = []
    seen: set = set()
    points = 0
    fast: dict = {"prepared": shared("prepared"), "fast": shared("fast")}
    t0 = time.perf_counter()
    for v in starts:
        if points and time.perf_counter() - t0 > SOLVE_SECONDS:
            break  # the points run so far decide (``points`` in the result says how many)
        points += 1
        for sec, start, target, Ls in claims:
            S = _run_rational(start(v), Ls, fast)
            if S is None:  # a start state in the parameter: the layers in FLINT's polynomials
                S = ar.array(start(v))
                for L in ar.layers(Ls):
                    S = L.forward(S)
            else:
                S = ar.array(S)
            want = ar.array(target(v))
            for idx in np.ndindex(want.shape):
                diff = S[idx] - want[idx]
                if diff == 0:
                    continue
                g = {e: Fraction(c) if type(c) is int else Fraction(int(c.p), int(c.q))
                     for e, c in _coefficients(diff).items()}
                key = tuple(sorted(g.items()))
                if key in seen:  # one residual counted once: equal entries agree on every root
                    continue
                seen.add(key)
                groups_all.append(g)
    if not groups_all:
        return None
    roots = Counter()
    for g in groups_all:
        if max(g) == 1 and g.get(1):
            r = -g.get(0, Fraction(0)) / g[1]
            if r != 0:
                roots[r] += 1

    def vanishes(g, r):
        return sum(c * r ** e for e, c in g.items()) == 0

    def fails_at(r) -> bool:
        """A residual entry that does not vanish at ``r``: the stack is not the specification
        there (a witness at an integer point; that it holds needs the proof)."""
        return not all(vanishes(g, Fraction(r)) for g in groups_all)

    base = {"of": len(groups_all), "points": points, "fails_at": fails_at, "modulo": None}
    for r, _ in roots.most_common():
        if all(vanishes(g, r) for g in groups_all):
            return {**base, "value": r, "consistent": True, "agree": len(groups_all)}
    if not roots or roots.most_common(1)[0][1] < 2:
        # no two distinct residuals share a root (a trained file: each entry is off by its own
        # amount): the file carries no value, the caller takes the entry's default
        return {**base, "value": None, "consistent": False, "agree": max(roots.values(), default=0)}
    r, _ = roots.most_common(1)[0]
    return {**base, "value": r, "consistent": False, "agree": sum(vanishes(g, r) for g in groups_all)}


#: the solve reads the residuals modulo a prime first (:func:`_no_value_modulo_p`); False: the exact run only
SOLVE_MODULAR = True


def _coefficients(x) -> dict:
    """The nonzero coefficients of an entry of a residual or target in the parameter alone, read from
    FLINT as they are: ``{degree: fmpq}`` (an int or ``fmpq`` is degree 0; 0 has none)."""
    import flint

    if type(x) is RunningSum:
        x = x.value()
    if type(x) is int:
        return {0: x} if x else {}
    if isinstance(x, flint.fmpq_mpoly):
        return {int(m[0]) if m else 0: c for m, c in x.to_dict().items() if c != 0}
    if x == 0:
        return {}
    return {0: x if isinstance(x, flint.fmpq) else flint.fmpq(Fraction(x).numerator, Fraction(x).denominator)}


def _no_value_modulo_p(claims, starts, ar) -> dict | None:
    """Whether the file carries no value, read modulo the refutation's first prime ``p``
    (``refute.first_prime``): the layers' side of every claim at every start point by their modular
    forward (``verify/prover/modular.py``; in a ``refute.shared_memo`` block the proof's refutation
    reuses the layers' residues), the target exactly in the parameter.  A residual entry is then
    ``g(x) = s - t(x)``: its constant term ``s - t_0`` known modulo p, the others ``-t_k`` exactly, so
    its degree is the target's and a linear entry's root is ``(s - t_0) / t_1`` modulo p.

    Returns the solve's "no value" result where at least two distinct entries are linear and their
    roots modulo p are pairwise distinct.  That is exact, not a sample: two entries sharing a rational
    root share it modulo p, and entries with equal exact coefficients above degree 0 and equal constant
    terms modulo p whose exact roots were equal would be the same entry; so no two linear residual
    entries share a root and none is consistent, as the exact count over every entry (the rest of
    :func:`solve_param`) finds.  None where it cannot say so (a root shared modulo p, fewer than two
    linear entries, a start state in the parameter, a denominator p divides, a layer without a
    modular forward): the exact residuals decide."""
    from verify.prover import modular
    from verify.prover.randomized_bounds import to_residues
    from verify.prover.refute import first_prime, forward_shared, prepared

    p = first_prime()
    memo, res = shared("prepared"), shared("residues")
    keys: set = set()
    roots: set = set()
    linear = 0
    known: dict = {}  # a target coefficient's residue, by its value (a state repeats a few values)

    def mod(c) -> int:
        r = known.get(c)
        if r is None:
            r = known[c] = _residue(c, p)
        return r

    try:
        for v in starts:
            for sec, start, target, Ls in claims:
                S0 = np.asarray(start(v), dtype=object)
                if not all(type(x) in (int, Fraction) for x in S0.ravel().tolist()):
                    return None  # a start state in the parameter
                S = to_residues(S0, p)[None]
                for L in Ls:
                    P = prepared(L, memo)
                    key = (id(P), p)
                    if key not in res:
                        res[key] = (P, modular.layer_residues(P, p))  # P kept alive: its id stays its own
                    S = forward_shared(res[key][1], S, p)  # kept for the refutation at the same point
                want = ar.array(target(v))
                S = S[0]
                if S.shape != want.shape:
                    return None
                for tx, s in zip(want.ravel().tolist(), S.ravel().tolist()):
                    if type(tx) is int:  # a target entry without the parameter (most of a state)
                        g0 = (s - tx) % p
                        if g0:
                            keys.add((g0, ()))
                        continue
                    t = _coefficients(tx)
                    c0 = t.pop(0, 0)
                    g0 = (s - mod(c0)) % p
                    if not t and not g0:
                        continue  # zero (modulo p)
                    high = tuple(sorted(t.items()))  # exact (fmpq hashes and compares by value)
                    k = (g0, high)
                    if k in keys:
                        continue
                    keys.add(k)
                    if max(t, default=0) == 1:
                        linear += 1
                        roots.add(g0 * pow(mod(t[1]), -1, p) % p)
                        if len(roots) < linear:
                            return None  # a root shared modulo p: the exact residuals decide
    except (modular.Unrepresentable, modular.ModularUnsupported, ValueError, ZeroDivisionError, TypeError):
        return None
    if linear < 2:
        return None
    return {"of": len(keys), "points": len(starts), "fails_at": None, "modulo": p, "value": None,
            "consistent": False, "agree": 1}


def _residue(c, p: int) -> int:
    """An exact rational (``fmpq``, int) modulo ``p`` (:class:`modular.Unrepresentable` where p divides its
    denominator)."""
    from verify.prover import modular

    if isinstance(c, int):
        return c % p
    return modular.residue(Fraction(int(c.p), int(c.q)), p)


def _run_rational(S0, Ls, memo: dict):
    """The file's layers ``Ls`` on a start state ``S0`` whose entries are all rationals (the parameter
    does not enter it), exactly, as the refutation evaluates them (``refute.prepared`` and
    ``refute.fast_layer``: gmpy2 rationals, dense products in FLINT's integer matrices); None where an
    entry of ``S0`` is no rational (a polynomial in the parameter).  The same values as the layers in
    FLINT's polynomial ring, several times faster on a learned file's dense float weights."""
    from constructions.base import run_layers
    from verify.prover.refute import fast_layer, prepared, to_mpq

    S0 = np.asarray(S0, dtype=object)
    if not all(type(x) in (int, Fraction) for x in S0.ravel().tolist()):
        return None
    layers = [fast_layer(prepared(L, memo.setdefault("prepared", {})), memo.setdefault("fast", {})) for L in Ls]
    return run_layers(layers, to_mpq(S0)) if layers else S0


def _integers(rng, shape) -> np.ndarray:
    """A variable's entries as Python integers drawn from [-SOLVE_BOUND, SOLVE_BOUND]."""
    a = np.empty(shape, dtype=object)
    for ix in np.ndindex(*shape):
        a[ix] = int(rng.integers(-SOLVE_BOUND, SOLVE_BOUND + 1))
    return a


def describe_value(q, dtype: str, declared: bool = False) -> str:
    """``p/q`` and, when it is a float of the file's dtype whose shortest decimal is another
    number, ``= 0.1 rounded to float32``.  ``declared``: some of the file's entries were read as
    the exact rationals its metadata declares (a polyverify file), so a value that is no float
    comes from those, not from products of stored floats."""
    q = Fraction(q)
    fmts = [dtype] if dtype in ("float16", "float32", "float64", "bfloat16") else []
    fmts += [f for f in ("float32", "float64") if f not in fmts]
    for fmt in fmts:
        if fmt == "bfloat16":
            continue
        f = np.dtype(fmt).type(float(q))
        if Fraction(float(f)) != q:
            continue
        dec = np.format_float_positional(f, unique=True, trim="-")
        if Fraction(dec) == q:
            return f"{q}"
        return f"{q} = {dec} rounded to {fmt}"
    if declared:
        return (f"{q} (not a float32 or float64 value: from entries read as the file's metadata's declared "
                f"rationals)")
    return f"{q} (not a float32 or float64 value: a product of stored values)"


def shortest_decimal(q, dtype: str) -> Fraction | None:
    """The decimal the file's float was rounded from, if it is not the value itself."""
    q = Fraction(q)
    for fmt in ([dtype] if dtype in ("float16", "float32", "float64") else []) + ["float32", "float64"]:
        f = np.dtype(fmt).type(float(q))
        if Fraction(float(f)) == q:
            dec = Fraction(np.format_float_positional(f, unique=True, trim="-"))
            return None if dec == q else dec
    return None


def _reversed_rows(h):
    """The filter's rows in reverse order; a lazily read one stays lazy (its floats reversed)."""
    if is_lazy(h) and h.is_float_only():
        return ExactFloats(np.ascontiguousarray(h.floats[::-1]))
    return np.ascontiguousarray(np.asarray(h)[::-1])


def variants(layers) -> list[tuple[str, list]]:
    """Nearby readings of the same stack (module docstring); repeated layer objects stay shared."""
    kinds = {L.kind for L in layers}
    out = []

    def each(f):
        cache: dict = {}
        return [cache.setdefault(id(L), f(L)) for L in layers]

    if kinds == {"baseconv"}:
        modes = {L.convolution for L in layers}
        for mode in ("causal", "circular", "same"):
            if modes != {mode}:
                out.append((f"convolution {mode} (the same taps)",
                            each(lambda L, m=mode: replace(L, causal=m == "causal", same=m == "same"))))
        out.append(("filter taps reversed (lag s read as lag T-1-s: the other orientation of a Conv1d's taps)",
                    each(lambda L: replace(L, h=_reversed_rows(L.h)))))
        out.append(("transposed weight matrices (W_in, W_gate, W_out)",
                    each(lambda L: replace(L, W_in=transpose(L.W_in), W_gate=transpose(L.W_gate),
                                           W_out=transpose(L.W_out)))))
    elif kinds == {"token_lsa"}:
        out.append(("transposed weight matrices (P, Q)",
                    each(lambda L: replace(L, heads=[TokenLSAHead(np.ascontiguousarray(h.P.T),
                                                                  np.ascontiguousarray(h.Q.T)) for h in L.heads]))))
        out.append(("query token " + ("as a key" if all(L.exclude_last for L in layers) else "excluded from the keys"),
                    each(lambda L: replace(L, exclude_last=not L.exclude_last))))
    return out


_ = (BaseConv, TokenLSA)
