"""The polynomial view (exact) and ``--weights``: how far from exact the learned layers are.

Without MLPs and LayerNorms a BaseConv / linear-attention stack computes a polynomial of its
inputs.  The learned float weights are exact binary fractions (``weights_io.load``), so every
state entry is a polynomial over QQ, computed by a symbolic forward of the toolkit's own layer
math (``constructions.layers``) over python-flint's multivariate polynomials (``fmpq_mpoly``,
C arithmetic; the sympy ring of ``verify.prover.proof`` is 100x slower on dense learned weights) and
compared monomial by monomial with the construction's.

Two polynomials are compared:

* **body**: one body copy (the learned GD step) as a map of the state, on the entries of the
  result region (``x`` / ``w``; replicated copies of the same target entry are taken once, the
  last), against the construction's specification of that entry (``con.state(con.step(v))``,
  which the construction's body equals, proved by ``verify.prover.proof``).  The last layer is evaluated
  only on the rows needed (``Layer.forward_rows``), which is what makes a dense 3-layer BaseConv
  body (degree 8) fit in memory;
* **prediction**: the whole stack's prediction, learned against constructed.  For dense learned
  weights the degree multiplies per layer (BaseConv x2, linear attention x3), so this one
  finishes only for sparse (near-constructed) weights or shallow stacks.

A dense symbolic forward can need minutes and gigabytes, so each part runs in a child process
with a time limit and an address-space limit (``timeout``, ``memory_gb``); results stream back
entry by entry (row by row for ``--weights``), and what did not finish is reported as such, with
the limit that stopped it.
"""
from __future__ import annotations

import random
import time
from fractions import Fraction

import flint
import numpy as np

from constructions import ops
from constructions.base import Construction, run_layers
from verify.prover.proof import SymbolicProblem

from polyverify.plumbing.child import run_limited  # noqa: F401 - also this module's public name (tests, seqmodel)
from verify.prover.flint_backend import fq  # the exact scalar conversion, shared with the prover

from .models import Stack, TOKEN_NAMES, var_names


# ------------------------------------------------------------------ exact backend (python-flint)

def to_fraction(c) -> Fraction:
    return Fraction(int(c.p), int(c.q))


class FlintProblem:
    """The construction's variables as generators of QQ[vars] (flint), plus the sympy
    :class:`verify.prover.proof.SymbolicProblem` the construction's own ``state``/``step`` run on."""

    def __init__(self, con: Construction):
        self.con = con
        self.sp = SymbolicProblem(con.variables)
        self.names = list(self.sp.names)
        self.ctx = flint.fmpq_mpoly_ctx.get(tuple(self.names), "degrevlex")
        self._gens = self.ctx.gens()
        self.v = dict(self.sp.v)
        if var_names(con) is TOKEN_NAMES:  # raw tokens: w = 0
            self.v["w"] = ops.zeros_like_object(con.variables["w"])

    def poly(self, x):
        """A sympy ring element or an exact scalar as an fmpq_mpoly."""
        if hasattr(x, "terms") and hasattr(x, "ring"):
            return self.ctx.from_dict({tuple(int(e) for e in m): fq(c) for m, c in x.terms()})
        return self.ctx.from_dict({(0,) * len(self.names): fq(x)}) if x != 0 else self.ctx.from_dict({})

    def array(self, S) -> np.ndarray:
        out = np.empty(S.shape, dtype=object)
        for idx in np.ndindex(S.shape):
            out[idx] = self.poly(S[idx])
        return out

    def input_state(self):
        return self.array(self.con.input_state(self.v))

    def state(self, v=None):
        return self.array(self.con.state(self.v if v is None else v))

    def target_state(self):
        """The specification of one body copy: the state of the next iterate."""
        return self.array(self.con.state(self.con.step(self.v)))

    def final_state(self):
        return self.array(self.con.final_state(self.v))


def flint_layers(layers):
    conv = np.vectorize(fq, otypes=[object])
    return [L.map(lambda a: conv(np.asarray(a, dtype=object))) for L in layers]


def _terms(p) -> int:
    return len(p) if hasattr(p, "terms") else (0 if p == 0 else 1)


def as_mpoly(fp: FlintProblem, x):
    return x if hasattr(x, "terms") else fp.poly(x)


def _mono_str(names, m) -> str:
    parts = [nm if e == 1 else f"{nm}^{e}" for nm, e in zip(names, m) if e]
    return "*".join(parts) or "1"


def _num(c: Fraction) -> dict:
    s = str(c)
    return {"value": float(c), "exact": s if len(s) <= 40 else f"{s[:18]}...({len(s)} chars)"}


def compare_polys(pc, pl, names, *, top: int = 10) -> dict:
    """Monomial-by-monomial comparison of the constructed polynomial ``pc`` and the learned
    ``pl`` (fmpq_mpoly): true monomials (those of ``pc``) with their errors, spurious ones
    (only in ``pl``), and the mass (sum of |coefficients|) of each, also by total degree."""
    tc = {m: to_fraction(c) for m, c in pc.terms()}
    tl = {m: to_fraction(c) for m, c in pl.terms()}
    true_err = sorted(((abs(tl.get(m, 0) - c), m, c, tl.get(m, Fraction(0))) for m, c in tc.items()),
                      key=lambda r: -r[0])
    spurious = sorted(((abs(c), m, c) for m, c in tl.items() if m not in tc), key=lambda r: -r[0])
    by_deg_sp: dict[int, float] = {}
    for a, m, _ in spurious:
        by_deg_sp[sum(m)] = by_deg_sp.get(sum(m), 0.0) + float(a)
    by_deg_err: dict[int, float] = {}
    for e, m, _, _ in true_err:
        if e:
            by_deg_err[sum(m)] = by_deg_err.get(sum(m), 0.0) + float(e)
    mass = lambda it: float(sum(abs(c) for c in it))  # noqa: E731
    return {
        "constructed": {"terms": len(tc), "degree": max((sum(m) for m in tc), default=0), "mass": mass(tc.values())},
        "learned": {"terms": len(tl), "degree": max((sum(m) for m in tl), default=0), "mass": mass(tl.values())},
        "true_monomials": {
            "count": len(tc), "missing_in_learned": sum(1 for m in tc if m not in tl),
            "error_mass": float(sum(e for e, *_ in true_err)),
            "error_max": float(true_err[0][0]) if true_err else 0.0,
            "error_mass_by_degree": {str(k): by_deg_err[k] for k in sorted(by_deg_err)},
            "worst": [{"monomial": _mono_str(names, m), "constructed": float(c), "learned": float(cl),
                       "error": _num(e), "relative_error": float(e / abs(c)) if c else None}
                      for e, m, c, cl in true_err[:top] if e]},
        "spurious_monomials": {
            "count": len(spurious), "mass": float(sum(a for a, *_ in spurious)),
            "max": float(spurious[0][0]) if spurious else 0.0,
            "mass_by_degree": {str(k): by_deg_sp[k] for k in sorted(by_deg_sp)},
            "largest": [{"monomial": _mono_str(names, m), "coefficient": _num(c)} for _, m, c in spurious[:top]]},
    }


# ------------------------------------------------------------------ limited child processes

# ------------------------------------------------------------------ body and prediction polynomials

def _result_entries(con: Construction, target: np.ndarray) -> list[tuple[int, int]]:
    """Entries of the result region (``x`` or ``w``), one per distinct target polynomial (the
    last copy: the query token for a replicated iterate)."""
    names = [nm for nm in (var_names(con)["x"], "x", "w") if nm in con.layout.regions]
    if not names:
        return []
    reg = con.layout[names[0]]
    seen: dict = {}
    for r in range(*reg.rows):
        for c in range(*reg.cols):
            seen[str(target[r, c])] = (r, c)
    return sorted(seen.values())


def _body_items(con, learned: Stack, top: int, max_terms: int):
    fp = FlintProblem(con)
    target = fp.target_state()
    entries = _result_entries(con, target)
    body = flint_layers(learned.bodies[0])
    S = fp.state()
    for i, L in enumerate(body[:-1]):
        t0 = time.perf_counter()
        S = L.forward(S)
        terms = max(_terms(x) for x in S.flat)
        yield {"kind": "layer", "layer": i, "max_terms": terms, "seconds": time.perf_counter() - t0}
        if terms > max_terms:
            raise OverflowError(f"body layer {i}: a state entry has {terms} terms (> {max_terms})")
    for r in sorted({r for r, _ in entries}):
        cols = [c for rr, c in entries if rr == r]
        t0 = time.perf_counter()
        out = body[-1].forward_rows(S, [r], cols)
        for j, c in enumerate(cols):
            pl = as_mpoly(fp, out[0, j])
            reg, local = con.layout.locate(r, c)
            cmp = compare_polys(target[r, c], pl, fp.names, top=top)
            yield {"kind": "entry", "entry": [r, c], "region": reg, "index": list(local),
                   "seconds": time.perf_counter() - t0, **cmp}


def _prediction_items(con, learned: Stack, constructed: Stack, top: int, max_terms: int):
    fp = FlintProblem(con)

    def pred(layers):
        S = fp.array(con.input_state(fp.v))
        for i, L in enumerate(flint_layers(layers)):  # with a size check after every layer
            S = L.forward(S)
            terms = max(_terms(x) for x in S.flat)
            if terms > max_terms:
                raise OverflowError(f"prediction: layer {i}: a state entry has {terms} terms (> {max_terms})")
        p = con.readout(S)["prediction"]
        if isinstance(p, np.ndarray):
            p = p.reshape(-1)[0]
        return as_mpoly(fp, p)

    t0 = time.perf_counter()
    pc = pred(constructed.layers)
    pl = pred(learned.layers)
    yield {"seconds": time.perf_counter() - t0, **compare_polys(pc, pl, fp.names, top=top)}


def polynomial_view(con: Construction, learned: Stack, constructed: Stack, *, top: int = 10,
                    max_terms: int = 5_000_000, max_vars: int = 40, timeout: float = 300.0,
                    memory_gb: float | None = 8.0) -> dict:
    """Exact polynomials of one body copy (result region) and of the whole prediction, learned
    against constructed, monomial by monomial (module docstring)."""
    nvars = sum(int(np.prod(s)) for s in con.variables.values())
    if nvars > max_vars:
        return {"supported": False, "reason": f"{nvars} input variables (> {max_vars}); use small N, D"}
    names = list(SymbolicProblem(con.variables).names)
    out = {"supported": True, "variables": nvars, "variable_names": names,
           "backend": f"python-flint {flint.__version__} fmpq_mpoly",
           "limits": {"timeout_s": timeout, "memory_gb": memory_gb, "max_terms": max_terms}}
    if learned.bodies:
        t0 = time.perf_counter()
        items, status = run_limited(lambda: _body_items(con, learned, top, max_terms), timeout=timeout,
                                    memory_gb=memory_gb)
        ents = [it for it in items if it["kind"] == "entry"]
        out["body"] = {"what": "one body copy (body 0), result-region entries, against the specification "
                               "con.state(con.step(v)) (= the construction's body, proved)",
                       "finished": status == "done", "reason": None if status == "done" else status,
                       "seconds": time.perf_counter() - t0,
                       "layers": [it for it in items if it["kind"] == "layer"],
                       "entries": [{k: v for k, v in it.items() if k != "kind"} for it in ents]}
    t0 = time.perf_counter()
    items, status = run_limited(lambda: _prediction_items(con, learned, constructed, top, max_terms),
                                timeout=timeout, memory_gb=memory_gb)
    out["prediction"] = ({"finished": True, **items[0]} if status == "done" and items else
                         {"finished": False, "reason": status, "seconds": time.perf_counter() - t0})
    return out


# ------------------------------------------------------------------ --weights

def _short(q: Fraction, limit: int = 60) -> str:
    """An exact rational, or its float value and size when the fraction is too long to read."""
    t = str(q)
    if len(t) <= limit:
        return t
    return f"{float(q):.17g} (exactly a fraction of {len(str(abs(q.numerator)))}/{len(str(q.denominator))} digits)"


def _counterexample(fp: FlintProblem, got, exp, seed: int = 0):
    """Small integer inputs where the two polynomials differ (exact values of both)."""
    rng = random.Random(seed)
    for _ in range(64):
        vals = [flint.fmpq(rng.randint(-3, 3)) for _ in fp.names]
        a, b = got(*vals), exp(*vals)
        if a != b:
            return {nm: int(v.p) for nm, v in zip(fp.names, vals)}, to_fraction(a), to_fraction(b)
    return None


def _weights_items(con, learned: Stack):
    fp = FlintProblem(con)
    claims = [("prologue", learned.prologue, fp.input_state, fp.state)]
    claims += [(f"body{j}", body, fp.state, fp.target_state) for j, body in enumerate(learned.bodies)]
    claims.append(("epilogue", learned.epilogue, fp.state, fp.final_state))
    first = True
    for name, layers, start, target in claims:
        if not layers:
            continue
        fl = flint_layers(layers)
        S = run_layers(fl[:-1], start())
        exp = target()
        for r in range(exp.shape[0]):
            row = fl[-1].forward_rows(S, [r])
            fail, mass, mx, regions = 0, Fraction(0), Fraction(0), {}
            for c in range(exp.shape[1]):
                got_p = as_mpoly(fp, row[0, c])
                res = got_p - exp[r, c]
                if res == 0:
                    continue
                fail += 1
                cs = [abs(to_fraction(x)) for _, x in res.terms()]
                s, m = sum(cs), max(cs)
                mass += s
                mx = max(mx, m)
                reg, local = con.layout.locate(r, c)
                rr = regions.setdefault(reg, {"entries": 0, "mass": 0.0, "max": 0.0})
                rr["entries"] += 1
                rr["mass"] += float(s)
                rr["max"] = max(rr["max"], float(m))
                if first:
                    first = False
                    big = max(res.terms(), key=lambda t: abs(to_fraction(t[1])))
                    msg = (f"{name} fails at state entry [{r}, {c}] (region {reg!r} {list(local)}): residual has "
                           f"{len(res)} terms, mass {float(s):.3g}, largest {_mono_str(fp.names, big[0])} "
                           f"{float(to_fraction(big[1])):.3g}")
                    ce = _counterexample(fp, got_p, exp[r, c])
                    if ce:
                        vals, a, b = ce
                        zero = " (others 0)" if not all(vals.values()) else ""
                        msg += (f"; counterexample {', '.join(f'{k}={v}' for k, v in vals.items() if v)}"
                                f"{zero}: layers give {_short(a)}, specification {_short(b)}")
                    yield {"kind": "first", "text": msg}
            yield {"kind": "row", "section": name, "row": r, "rows": exp.shape[0], "failing_entries": fail,
                   "mass": mass, "max": mx, "regions": regions}


def weights_check(con: Construction, learned: Stack, *, timeout: float = 600.0,
                  memory_gb: float | None = 8.0) -> dict:
    """``--weights``: the section identities of ``verify.prover.proof`` (prologue, every body copy
    separately, epilogue) for the learned layers, exactly, with the residual's size: per section
    the number of failing state entries, the total coefficient mass (sum |coeff| over the
    residual polynomials) and the largest |coeff|, by region; and the first failing entry with
    an exact integer counterexample.  Rows stream back from a child process with limits; a
    section cut off by them is reported with the rows it checked."""
    t0 = time.perf_counter()
    items, status = run_limited(lambda: _weights_items(con, learned), timeout=timeout, memory_gb=memory_gb)
    sections: dict[str, dict] = {}
    first = None
    for it in items:
        if it["kind"] == "first":
            first = it["text"]
            continue
        s = sections.setdefault(it["section"], {"section": it["section"], "rows_checked": 0, "rows": it["rows"],
                                                "failing_entries": 0, "mass": Fraction(0), "max": Fraction(0),
                                                "regions": {}})
        s["rows_checked"] += 1
        s["failing_entries"] += it["failing_entries"]
        s["mass"] += it["mass"]
        s["max"] = max(s["max"], it["max"])
        for reg, v in it["regions"].items():
            rr = s["regions"].setdefault(reg, {"entries": 0, "mass": 0.0, "max": 0.0})
            rr["entries"] += v["entries"]
            rr["mass"] += v["mass"]
            rr["max"] = max(rr["max"], v["max"])
    out = []
    for s in sections.values():
        complete = s["rows_checked"] == s["rows"]
        out.append({"section": s["section"], "complete": complete, "rows_checked": s["rows_checked"],
                    "rows": s["rows"], "exact": complete and s["failing_entries"] == 0,
                    "failing_entries": s["failing_entries"], "residual_mass": float(s["mass"]),
                    "residual_max_coeff": float(s["max"]), "regions": s["regions"]})
    done = status == "done"
    return {"exact": done and all(s["exact"] for s in out), "complete": done,
            "reason": None if done else status, "seconds": time.perf_counter() - t0,
            "sections": out, "first_failure": first}
