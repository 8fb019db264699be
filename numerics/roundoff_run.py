"""The streaming run and the metrics of ``python -m numerics.roundoff`` (seed 000 Sec. 3.2 problems).

* construction specifics: which gd architecture, its carried data regions, the step size;
* :func:`stream`: prologue + body^k of a construction in one backend and dtype, one state in
  memory whatever the depth, the first non-finite layer located;
* :func:`reference` and :func:`run_config`: exact GD from the same float inputs (mpfr, precision
  raised until stable) and, per step, MSE / max relative error / bits of error of the construction
  and of plain GD, their ratio (the overhead), the data drift and the checkpoint predictions;
* :func:`print_record`: one configuration's lines of the command's output.

The command line (``numerics.roundoff``) and its typed config (``numerics.roundoff_config``) use these.
"""
from __future__ import annotations

import math
import time
from fractions import Fraction

import gmpy2
import numpy as np

from constructions.base import Construction, Sections
from constructions.catalogue import CatalogueEntry
from constructions.catalogue import gd_architectures
from polyverify.plumbing.cli import UsageError

from . import error_measures
from .backends import Backend
from .reference import gd_reference, stable_reference, working_precision


# ------------------------------------------------------------------ construction specifics

def resolve(name: str) -> CatalogueEntry:
    """A gd architecture, by its arch name (``baseconv``) or its entry name (``gd-baseconv``)."""
    gd = gd_architectures()
    by_entry = {e.name: e for e in gd.values()}
    if name in gd:
        return gd[name]
    if name in by_entry:
        return by_entry[name]
    raise UsageError(f"unknown construction {name!r}; choose one of {', '.join(gd)} "
                     f"(or {', '.join(by_entry)})")


def data_regions(con: Construction) -> list[tuple[str, str, Fraction, str]]:
    """``(label, region, scale, baseline)`` of the carried data of ``con``.

    The state stores ``scale * data`` in ``region``; ``baseline`` says which
    state holds its initial value: ``"input"`` (the embedding) or
    ``"prologue"`` (the state after the prologue, for data the prologue makes,
    e.g. the sums of the causal BaseConv construction).
    """
    regs = con.layout.regions
    if con.name == "gd-lsa":
        r = con.params["sqrt_eta"]
        return [("A", "X^T", r, "input"), ("b", "y^T", r, "input")]
    if con.name == "gd-elsa":
        return [("A", "X^T", Fraction(1), "input"), ("b", "Y0^T", Fraction(1), "input")]
    out = [(lab, reg, Fraction(1), "input") for lab, reg in (("A", "a"), ("b", "b")) if reg in regs]
    out += [(lab, reg, Fraction(1), "prologue") for lab, reg in (("sum b_i a_i", "Sba"), ("sum a_i a_i^T", "Saa"))
            if reg in regs]
    return out


def auto_eta(kappa: float) -> Fraction:
    """The largest 4^-j <= 1/16 with eta kappa^2 < 2 (GD converges; a perfect
    square, so exact for LSA/ELSA).  kappa = 5 gives the default 1/16."""
    eta = Fraction(1, 16)
    while eta * Fraction(kappa) ** 2 >= 2:
        eta /= 4
    return eta


def build(entry: CatalogueEntry, n: int, d: int, eta: Fraction, lam: Fraction) -> Construction:
    return entry.build(n, d, eta=eta, lam=lam) if entry.ridge else entry.build(n, d, eta=eta)


# ------------------------------------------------------------------ streaming run

def _first_bad(con: Construction, S64: np.ndarray) -> dict:
    """Where a state first holds non-finite values.  An overflow (inf) usually
    turns into NaN in every channel a dense weight matrix mixes it into
    (inf * 0 = NaN), so the reported entry is an inf one when there is one."""
    bad = ~np.isfinite(S64)
    infs = np.isinf(S64)
    p, i, j = (int(t) for t in np.argwhere(infs if infs.any() else bad)[0])
    region, entry = con.layout.locate(i, j)
    counts: dict[str, int] = {}
    for _, ii, jj in np.argwhere(bad):
        name = con.layout.locate(int(ii), int(jj))[0]
        counts[name] = counts.get(name, 0) + 1
    return {"problem": p, "region": region, "entry": list(entry), "state_index": [i, j],
            "value": str(float(S64[p, i, j])), "regions_nonfinite": counts,
            "problems_affected": int(np.any(bad.reshape(bad.shape[0], -1), axis=1).sum())}


def stream(con: Construction, v: dict, k: int, backend: Backend, *, conv_method: str = "direct",
           checkpoints=(), progress=None) -> dict:
    """Run prologue + body^k, streaming; returns what the metrics need.

    ``x``: (k+1, B, D) float64 iterates after the prologue and after each body
    (NaN after a non-finite value); ``data``: per data region, (k+1,) max-abs
    deviation from its initial value; ``predictions``: step -> (B,) prediction
    of the epilogue applied after that step (for the steps in
    ``checkpoints``); ``first_nonfinite``: None or where it happened.
    Identical arithmetic to ``numerics.runner.run_construction``.
    """
    lay = con.layout
    regions = data_regions(con)
    stack_len = con.depth(k)
    S = backend.asarray(con.input_state(v))
    S64 = backend.to_numpy64(S)
    B = S64.shape[0]
    D = con.variables["x"][0]
    xs = np.full((k + 1, B, D), np.nan)
    dev = {lab: np.full(k + 1, np.nan) for lab, *_ in regions}
    dev_rel = {lab: np.full(k + 1, np.nan) for lab, *_ in regions}
    out = {"x": xs, "data": dev, "data_rel": dev_rel, "predictions": {}, "first_nonfinite": None,
           "layers_run": 0, "stack_layers": stack_len}
    if not np.all(np.isfinite(S64)):
        out["first_nonfinite"] = {"layer": -1, "section": "input", **_first_bad(con, S64)}
        return out
    base = {lab: lay.get(S64, reg).copy() for lab, reg, _, b in regions if b == "input"}
    p, b = len(con.prologue), len(con.body)
    epilogue = Sections([], [], list(con.epilogue))  # a checkpoint's prediction: the epilogue on its state
    cast_cache: dict[int, object] = {}

    def cast(L):  # each distinct layer cast once, shared by the run and the checkpoint predictions
        if id(L) not in cast_cache:
            cast_cache[id(L)] = backend.cast_layer(L)
        return cast_cache[id(L)]

    def where(i):  # stack layer i -> (section, step, layer in section)
        if i < p:
            return "prologue", 0, i
        if i < p + b * k:
            return "body", 1 + (i - p) // b, (i - p) % b
        return "epilogue", k, i - p - b * k

    def on_nonfinite(i, S):  # the run stops there
        sec, step, j = where(i)
        out["first_nonfinite"] = {"layer": i, "section": sec, "step": step, "layer_in_section": j,
                                  **_first_bad(con, backend.to_numpy64(S))}
        return True

    def on_step(step, S):
        S64 = backend.to_numpy64(S)
        if step == 0:
            for lab, reg, _, b_ in regions:
                if b_ == "prologue":
                    base[lab] = lay.get(S64, reg).copy()
        elif progress is not None:
            progress.update(1)
        xs[step] = con.readout(S64)["x"]
        for lab, reg, scale, _ in regions:
            dd = error_measures.data_deviation(lay.get(S64, reg), base[lab], float(scale))
            dev[lab][step] = dd["max_abs"]
            dev_rel[lab][step] = dd["max_rel"]
        if step in checkpoints:
            with np.errstate(over="ignore", invalid="ignore"):
                Se, _ = con.run({}, sections=epilogue, state=S, cast=cast, conv_method=conv_method)
            out["predictions"][step] = backend.to_numpy64(con.readout(Se)["prediction"])
        return False

    with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported as the first non-finite layer
        _, out["layers_run"] = con.run(v, k, state=S, cast=cast, conv_method=conv_method,
                                       on_nonfinite=on_nonfinite, on_step=on_step)
    return out


# ------------------------------------------------------------------ references and metrics

def _mp_diff(x: np.ndarray, ref_mp: np.ndarray, prec: int) -> np.ndarray:
    """``x - ref`` correctly rounded to float64 (x float64, ref object mpfr)."""
    out = np.empty(x.shape)
    flat = out.reshape(-1)
    with gmpy2.context(precision=prec):
        for i, (a, r) in enumerate(zip(x.reshape(-1).tolist(), ref_mp.reshape(-1).tolist())):
            flat[i] = float(gmpy2.mpfr(a) - r) if math.isfinite(a) else a
    return out


def reference(v: dict, eta: Fraction, lam: Fraction, k: int, digits: int, q: np.ndarray) -> dict:
    """Exact GD from the float inputs, precision raised until stable."""
    t0 = time.perf_counter()
    (ref_f, ref_mp), used = stable_reference(gd_reference, v["A"], v["b"], v["x"], eta, k, digits=digits,
                                             lam=lam, return_mp=True)
    # x - ref (a float64 against a p-bit mpfr) and q . ref are then computed with room to spare
    prec = 2 * working_precision(used) + 64
    with gmpy2.context(precision=prec):
        qm = np.array([[gmpy2.mpfr(float(t)) for t in row] for row in q], dtype=object)
        pred = (ref_mp * qm[None]).sum(axis=-1)  # (k+1, B)
    return {"x": ref_f, "x_mp": ref_mp, "pred_mp": pred, "digits": used, "prec": prec,
            "seconds": time.perf_counter() - t0}


def _errors(x: np.ndarray, ref: dict, key: str, dtype: str) -> dict:
    """Per-step MSE / max relative error / bits of ``x`` (steps, B, D) against exact GD."""
    mp = ref[key]
    steps = x.shape[0]
    out = {"mse": [], "max_rel": [], "bits_mean": [], "bits_max": []}
    for j in range(steps):
        if not np.all(np.isfinite(x[j])):
            for kk in out:
                out[kk].append(math.nan)
            continue
        err = _mp_diff(x[j], mp[j], ref["prec"])
        reff = np.asarray(mp[j], dtype=np.float64)
        out["mse"].append(float(np.mean(err ** 2)))
        out["max_rel"].append(float(error_measures.max_rel_err(x[j], reff, err=err)))
        bits = error_measures.bits_of_error(x[j], mp[j], dtype)
        out["bits_mean"].append(float(np.mean(bits)))
        out["bits_max"].append(float(np.max(bits)))
    return out


def clean(o):
    """NaN/inf -> None, numpy -> python, for JSON."""
    if isinstance(o, dict):
        return {str(k): clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [clean(v) for v in o]
    if isinstance(o, np.ndarray):
        return clean(o.tolist())
    if isinstance(o, (float, np.floating)):
        return error_measures.finite_or_none(o)
    if isinstance(o, np.integer):
        return int(o)
    return o


def run_config(con: Construction, v: dict, q: np.ndarray, ref: dict | None, k: int, backend: Backend, conv: str,
               checkpoints: list[int], eta: Fraction, lam: Fraction, progress=None) -> dict:
    """One configuration: stream the construction, run plain GD, compute the metrics."""
    from .runner import plain_gd

    t0 = time.perf_counter()
    res = stream(con, v, k, backend, conv_method=conv, checkpoints=set(checkpoints), progress=progress)
    t_run = time.perf_counter() - t0
    rec = {"backend": backend.name, "device": backend.device, "dtype": backend.dtype, "conv": conv,
           "steps": k, "depth": con.depth(k), "first_nonfinite_layer": None, "first_nonfinite": None,
           "seconds_run": t_run}
    fb = res["first_nonfinite"]
    if fb is not None:
        rec["first_nonfinite_layer"] = fb["layer"]
        rec["first_nonfinite"] = fb
    if ref is None:  # the inputs themselves are not finite in this dtype
        rec["per_step"] = None
        return rec
    t0 = time.perf_counter()
    plain = plain_gd(v["A"], v["b"], v["x"], float(eta), k, backend, lam=float(lam))
    t_plain = time.perf_counter() - t0
    ec = _errors(res["x"], ref, "x_mp", backend.dtype)
    ep = _errors(plain, ref, "x_mp", backend.dtype)
    per = {"step": list(range(k + 1)), "depth": [con.depth(j) for j in range(k + 1)]}
    per.update(ec)
    per.update({"plain_" + kk: vv for kk, vv in ep.items()})
    per["overhead"] = [float(error_measures.overhead(a, b)) if not (math.isnan(a) or math.isnan(b)) else math.nan
                       for a, b in zip(ec["mse"], ep["mse"])]
    per["data_deviation"] = {lab: arr.tolist() for lab, arr in res["data"].items()}
    per["data_deviation_rel"] = {lab: arr.tolist() for lab, arr in res["data_rel"].items()}
    rec["per_step"] = per
    rec["seconds_plain"] = t_plain
    cps = []
    for j in checkpoints:
        c = {"layers": con.depth(j), "step": j, "mse": per["mse"][j], "max_rel": per["max_rel"][j],
             "bits_mean": per["bits_mean"][j], "plain_mse": per["plain_mse"][j], "overhead": per["overhead"][j],
             "data_deviation": {lab: arr[j] for lab, arr in res["data"].items()}}
        if j in res["predictions"]:
            perr = _mp_diff(res["predictions"][j], ref["pred_mp"][j], ref["prec"])
            c["prediction_mse"] = float(np.mean(perr ** 2))
        else:
            c["prediction_mse"] = math.nan
        cps.append(c)
    rec["checkpoints"] = cps
    body = [m for m in per["mse"][1:] if not math.isnan(m)]
    rec["max_mse_over_steps"] = max(body) if body and len(body) == k else math.nan
    return rec


def _fmt(x) -> str:
    if x is None or (isinstance(x, float) and (math.isnan(x))):
        return "nan"
    return f"{x:.3e}"


def print_record(rec: dict, out) -> None:
    fb = rec["first_nonfinite"]
    head = (f"  {rec['dtype']:<9} {rec['backend']}/{rec['device']} {rec['conv']:<6}")
    if fb is not None:
        if fb["layer"] == -1:
            where = "the input state (the inputs overflow in this dtype)"
        else:
            where = (f"the output of layer index {fb['layer']} (layer {fb['layer'] + 1} of {rec['depth']}; "
                     f"{fb['section']} step {fb.get('step')}, index {fb.get('layer_in_section')} in the section)")
        regs = ", ".join(f"{k} ({v})" for k, v in fb["regions_nonfinite"].items())
        print(f"{head} first non-finite value in {where}: {fb['value']} in region {fb['region']!r} entry "
              f"{fb['entry']}; non-finite entries by region: {regs}; {fb['problems_affected']} problem(s) affected",
              file=out)
    if rec.get("per_step") is None:
        return
    for c in rec["checkpoints"]:
        dd = ", ".join(f"{k} {_fmt(v)}" for k, v in c["data_deviation"].items())
        ov = c["overhead"]
        print(f"{head} L={c['layers']:<5} MSE {_fmt(c['mse']):>10}  maxrel {_fmt(c['max_rel']):>10}  "
              f"bits {c['bits_mean']:.2f}  plain {_fmt(c['plain_mse']):>10}  overhead "
              f"{('%.2f' % ov) if ov is not None and not math.isnan(ov) else 'nan':>7}  pred {_fmt(c['prediction_mse'])}"
              f"  drift[{dd}]", file=out)
