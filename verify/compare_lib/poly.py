"""The polynomial view (exact) and ``--weights``: how far from exact the learned layers are.

Without MLPs and LayerNorms a BaseConv / linear-attention stack computes a polynomial of its
inputs.  The learned float weights are exact binary fractions (``weights_io.load``), so the
prediction is a polynomial over QQ, computed by a symbolic forward (``verify.proof``'s ring) and
compared monomial by monomial with the construction's."""
from __future__ import annotations

import time
from fractions import Fraction

import numpy as np

from constructions.base import Construction
from verify.proof import SymbolicProblem, _as_poly, _run, prove

from .models import Stack, TOKEN_NAMES, var_names


def _symbolic_input(con: Construction):
    sp = SymbolicProblem(con.variables)
    v = dict(sp.v)
    if var_names(con) is TOKEN_NAMES:  # raw tokens: w = 0
        w = np.empty(con.variables["w"], dtype=object)
        w[...] = 0
        v["w"] = w
    return sp, v


def _prediction_poly(con, layers, sp, S0, max_terms):
    S = S0
    for i, L in enumerate(layers):
        S = L.forward(S)
        terms = max(len(_as_poly(sp.R, x)) for x in S.flat)
        if terms > max_terms:
            raise OverflowError(f"layer {i}: a state entry has {terms} terms (> {max_terms})")
    p = con.readout(S)["prediction"]
    if isinstance(p, np.ndarray):
        p = p.reshape(-1)[0]
    return _as_poly(sp.R, p)


def _mono_str(names, m) -> str:
    parts = [nm if e == 1 else f"{nm}^{e}" for nm, e in zip(names, m) if e]
    return "*".join(parts) or "1"


def _num(c) -> dict:
    q = Fraction(int(c.numerator), int(c.denominator))
    s = str(q)
    return {"value": float(q), "exact": s if len(s) <= 40 else f"{s[:18]}...({len(s)} chars)"}


def polynomial_view(con: Construction, learned: Stack, constructed: Stack, *, top: int = 10,
                    max_terms: int = 200000, max_vars: int = 40) -> dict:
    """Exact prediction polynomials of both stacks and their monomial-by-monomial comparison."""
    t0 = time.perf_counter()
    nvars = sum(int(np.prod(s)) for s in con.variables.values())
    if nvars > max_vars:
        return {"supported": False, "reason": f"{nvars} input variables (> {max_vars}); use small N, D"}
    sp, v = _symbolic_input(con)
    S0 = con.input_state(v)
    try:
        pc = _prediction_poly(con, constructed.layers, sp, S0, max_terms)
        pl = _prediction_poly(con, learned.layers, sp, S0, max_terms)
    except OverflowError as e:
        return {"supported": False, "reason": f"the symbolic forward grows too large: {e}"}
    names = sp.names
    tc, tl = dict(pc.terms()), dict(pl.terms())
    true_err = []
    for m, c in tc.items():
        e = tl.get(m, 0) - c
        true_err.append((abs(e), m, c, tl.get(m, 0)))
    spurious = sorted(((abs(c), m, c) for m, c in tl.items() if m not in tc), key=lambda r: -r[0])
    true_err.sort(key=lambda r: -r[0])
    mass = lambda it: float(sum(abs(Fraction(int(c.numerator), int(c.denominator))) for c in it))  # noqa: E731
    degs_l = max((sum(m) for m in tl), default=0)
    out = {
        "supported": True, "variables": nvars, "seconds": None,
        "constructed": {"terms": len(tc), "degree": max((sum(m) for m in tc), default=0), "mass": mass(tc.values())},
        "learned": {"terms": len(tl), "degree": degs_l, "mass": mass(tl.values())},
        "true_monomials": {
            "count": len(tc), "missing_in_learned": sum(1 for m in tc if m not in tl),
            "error_mass": mass(e for e, *_ in true_err if e),
            "error_max": float(true_err[0][0]) if true_err else 0.0,
            "worst": [{"monomial": _mono_str(names, m), "constructed": _num(c)["value"],
                       "learned": _num(cl)["value"] if cl else 0.0, "error": _num(e)}
                      for e, m, c, cl in true_err[:top] if e]},
        "spurious_monomials": {
            "count": len(spurious), "mass": mass(c for _, _, c in spurious),
            "max": float(spurious[0][0]) if spurious else 0.0,
            "largest": [{"monomial": _mono_str(names, m), "coefficient": _num(c)} for _, m, c in spurious[:top]]},
    }
    out["seconds"] = time.perf_counter() - t0
    return out


def weights_check(con: Construction, learned: Stack, *, max_terms: int = 200000) -> dict:
    """``--weights``: the three section identities of ``verify.proof`` for the learned layers
    (every body copy separately), with the residual's size: per failing section the number of
    failing state entries, the total coefficient mass (sum |coeff| over the residual polynomials)
    and the largest |coeff|, by region; plus ``verify.proof.prove``'s first failure."""
    sp = SymbolicProblem(con.variables)
    v = sp.v
    claims = [("prologue", learned.prologue, lambda: con.input_state(v), lambda: con.state(v))]
    for j, body in enumerate(learned.bodies):
        claims.append((f"body{j}", body, lambda: con.state(v), lambda: con.state(con.step(v))))
    claims.append(("epilogue", learned.epilogue, lambda: con.state(v), lambda: con.final_state(v)))
    sections, ok = [], True
    for name, layers, start, target in claims:
        if not layers:
            continue
        got = _run(layers, start())[-1]
        exp = target()
        fail, mass, mx, regions = 0, Fraction(0), Fraction(0), {}
        for idx in np.ndindex(exp.shape):
            r = _as_poly(sp.R, got[idx] - exp[idx])
            if r == 0:
                continue
            fail += 1
            cs = [abs(Fraction(int(c.numerator), int(c.denominator))) for c in r.coeffs()]
            s, m = sum(cs), max(cs)
            mass += s
            mx = max(mx, m)
            reg, _ = con.layout.locate(*idx)
            rr = regions.setdefault(reg, {"entries": 0, "mass": 0.0, "max": 0.0})
            rr["entries"] += 1
            rr["mass"] += float(s)
            rr["max"] = max(rr["max"], float(m))
        ok &= fail == 0
        sections.append({"section": name, "exact": fail == 0, "failing_entries": fail,
                         "residual_mass": float(mass), "residual_max_coeff": float(mx), "regions": regions})
    first = None
    if not ok:
        bad = [int(x["section"][4:]) for x in sections if x["section"].startswith("body") and not x["exact"]]
        res = prove(con, sections=learned.sections(bad[0] if bad else 0), symbolic=False)
        if res.failure is not None:
            first = res.failure.describe()
    return {"exact": bool(ok), "sections": sections, "first_failure": first}
