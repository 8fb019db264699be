"""Parameters read from a file, proofs of a file's stack, and the nearby specifications.

* :func:`solve_param`: the value of a specification parameter (the step size) that the file's
  layers imply.  The file's sections are run exactly on the projected start states, in fresh
  symbols, against targets built with the parameter as one more symbol; every coefficient of
  the residual (a polynomial in the problem's variables) is a polynomial in the parameter that
  must vanish.  A rational root of all of them is *the* value ("consistent"); when there is
  none (the stack is not the specification at any value), the nonzero root that most linear
  coefficients share is reported as the value the file's weights carry, with how many agree.
  Either way the verdict is a proof at that exact value, never the solve.
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

from collections import Counter, defaultdict
from dataclasses import replace
from fractions import Fraction

import numpy as np

from constructions.layers import BaseConv, TokenLSA, TokenLSAHead
from verify.prover.proof import ProofResult, SymbolicProblem, prove
from verify.prover.flint_backend import FlintRing

#: at most this many residual entries are read when solving for a parameter
SOLVE_ENTRIES = 40


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


def prove_stack(con, layers) -> ProofResult:
    """Prove the file's stack against ``con`` (a projected specification): each distinct body
    copy once, with the file's prologue and epilogue; the first failure is returned, its layer
    numbered in the file's stack."""
    secs = split(con, layers)
    result = None
    total = 0.0
    for j, body in distinct_bodies(secs) or [(0, [])]:
        # refuting first (verify/prover/refute.py): a wrong file is FAILED at an integer point, exactly
        r = prove(con, sections={"prologue": secs["prologue"], "body": body, "epilogue": secs["epilogue"]},
                  refute=True)
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
    when no section's residual depends on it.  ``build(**{name: value})`` -> projected spec."""
    con0 = build()
    sp = SymbolicProblem(con0.variables, (name,))
    R = sp.R
    ei = len(sp.names) - 1
    con = build(**{name: sp.params[name]})
    ar = FlintRing(R)
    secs = split(con0, layers)
    claims = [("prologue", con.input_state, con.state, secs["prologue"]),
              ("epilogue", con.state, con.final_state, secs["epilogue"])]
    claims += [("body", con.state, lambda v: con.state(con.step(v)), body) for _, body in distinct_bodies(secs)]
    groups_all: list[dict] = []
    read = 0
    for sec, start, target, Ls in claims:
        if not Ls:
            continue
        S = ar.array(start(sp.v))
        for L in ar.layers(Ls):
            S = L.forward(S)
        want = ar.array(target(sp.v))
        for idx in np.ndindex(want.shape):
            if read >= SOLVE_ENTRIES:
                break
            diff = S[idx] - want[idx]
            if diff == 0:
                continue
            read += 1
            d = _as_sympy(ar, diff, R)
            groups: dict = defaultdict(dict)
            for m, c in d.terms():
                groups[m[:ei] + m[ei + 1:]][m[ei]] = Fraction(int(c.numerator), int(c.denominator))
            groups_all += list(groups.values())
    if not groups_all:
        return None
    roots = Counter()
    for g in groups_all:
        if max(g) == 1 and g.get(1):
            r = -g.get(0, Fraction(0)) / g[1]
            if r != 0:
                roots[r] += 1
    if not roots:
        return {"value": None, "consistent": False, "agree": 0, "of": len(groups_all)}

    def vanishes(g, r):
        return sum(c * r ** e for e, c in g.items()) == 0

    def fails_at(r) -> bool:
        """A residual coefficient that does not vanish at ``r``: the stack is not the specification
        there (a witness; that it holds needs the proof)."""
        return not all(vanishes(g, Fraction(r)) for g in groups_all)

    for r, _ in roots.most_common():
        if all(vanishes(g, r) for g in groups_all):
            return {"value": r, "consistent": True, "agree": len(groups_all), "of": len(groups_all),
                    "fails_at": fails_at}
    r, _ = roots.most_common(1)[0]
    return {"value": r, "consistent": False, "agree": sum(vanishes(g, r) for g in groups_all), "of": len(groups_all),
            "fails_at": fails_at}


def _as_sympy(ar, p, R):
    q = ar.to_sympy(p)
    return q if hasattr(q, "terms") else R(q)


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
                    each(lambda L: replace(L, h=np.ascontiguousarray(L.h[::-1])))))
        out.append(("transposed weight matrices (W_in, W_gate, W_out)",
                    each(lambda L: replace(L, W_in=np.ascontiguousarray(L.W_in.T),
                                           W_gate=np.ascontiguousarray(L.W_gate.T),
                                           W_out=np.ascontiguousarray(L.W_out.T)))))
    elif kinds == {"token_lsa"}:
        out.append(("transposed weight matrices (P, Q)",
                    each(lambda L: replace(L, heads=[TokenLSAHead(np.ascontiguousarray(h.P.T),
                                                                  np.ascontiguousarray(h.Q.T)) for h in L.heads]))))
        out.append(("query token " + ("as a key" if all(L.exclude_last for L in layers) else "excluded from the keys"),
                    each(lambda L: replace(L, exclude_last=not L.exclude_last))))
    return out


_ = (BaseConv, TokenLSA)
