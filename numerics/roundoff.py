"""``python -m numerics.roundoff``: roundoff of a GD construction across depth, dtype and backend.

    python -m numerics.roundoff CONSTRUCTION --layers 31,301 [--dtypes float64,float32,bfloat16,float16]
        [--backend torch[,numpy,cupy]] [--device cpu|cuda] [--conv direct[,fft]]
        [--kappa 5[,10]] [--sigma 1[,100]] [--eta 1/16|auto] [--lam 0]
        [--batch 64] [--n 20] [--d 5] [--seed 0] [--digits 50]
        [--layer-ref 2] [--layer-ref-layers 40] [--out DIR] [--quiet]

``CONSTRUCTION`` is an arch of ``constructions.registry.GD_ARCHS`` (baseconv,
baseconv-causal, lsa, elsa) or a construction name (gd-baseconv, ...).

For every combination of backend x dtype x convolution method x kappa x sigma
it runs the stack to the largest ``--layers`` (streaming: one state in memory,
whatever the depth) on ``--batch`` problems of seed 000 Sec. 3.2
(``numerics.problems.sample_ls``; sigma is the out-of-distribution target
scale of D_OOD^b(sigma)) and measures, after every GD step:

* MSE and max relative error of the iterate against **exact GD** from the same
  float inputs converted exactly (``numerics.reference.gd_reference`` in mpfr,
  precision raised until the float64 rounding is stable);
* bits of error (Herbie: log2(1 + ulps) against the correctly rounded exact
  iterate, ``numerics.metrics``);
* the same for **plain GD** run in the same backend and dtype, and the ratio
  of the two MSEs: the construction's overhead over the algorithm's own
  roundoff;
* the **data deviation**: how far the carried inputs (A and b, read back from
  their regions of the layout) drift from their initial values;
* at each requested depth, the prediction ``q^T x`` after the epilogue;

and, for a few problems and the first layers, the **layer-level reference**
(``numerics.layer_reference``): the error each layer commits given the float
state it was fed, and the cumulative error of the whole state.  The first
layer whose output holds a non-finite value is reported (and the run of that
configuration stops there) instead of failing.

Writes ``DIR/roundoff.json`` and PNG plots (``numerics.plots``): MSE against
depth, one line per dtype, plain GD dashed.  Exit status 0, or 2 on bad input
(a one-line message).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from fractions import Fraction
from pathlib import Path

import gmpy2
import numpy as np

from constructions.base import Construction, DepthError, exact
from constructions.registry import CATALOGUE, GD_ARCHS, Entry

from . import metrics
from .backends import BACKENDS, DTYPES, Backend, BackendError
from .reference import gd_reference, stable_reference, working_precision

CONV_METHODS = ("direct", "fft")


class UsageError(Exception):
    """Bad input: printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        raise UsageError(message)


# ------------------------------------------------------------------ construction specifics

def resolve(name: str) -> Entry:
    """An arch name of GD_ARCHS or a construction name of the catalogue."""
    if name in GD_ARCHS:
        return GD_ARCHS[name]
    if name in CATALOGUE:
        return CATALOGUE[name]
    raise UsageError(f"unknown construction {name!r}; choose one of {', '.join(GD_ARCHS)} "
                     f"(or {', '.join(CATALOGUE)})")


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


def build(entry: Entry, n: int, d: int, eta: Fraction, lam: Fraction) -> Construction:
    if entry.arch.startswith("baseconv"):
        return entry.build(n, d, eta=eta)
    return entry.build(n, d, eta=eta, lam=lam)


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
    cache: dict[int, object] = {}

    def cast(L):
        if id(L) not in cache:
            cache[id(L)] = backend.cast_layer(L)
        return cache[id(L)]

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
    layer = 0

    def apply(layers, section, step):
        nonlocal S, layer
        for j, L in enumerate(layers):
            with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported below
                S = cast(L).forward(S, conv_method=conv_method)
            layer += 1
            if not backend.isfinite_all(S):
                out["first_nonfinite"] = {"layer": layer - 1, "section": section, "step": step,
                                          "layer_in_section": j, **_first_bad(con, backend.to_numpy64(S))}
                return False
        return True

    def record(step):
        S64 = backend.to_numpy64(S)
        xs[step] = con.readout(S64)["x"]
        for lab, reg, scale, _ in regions:
            dd = metrics.data_deviation(lay.get(S64, reg), base[lab], float(scale))
            dev[lab][step] = dd["max_abs"]
            dev_rel[lab][step] = dd["max_rel"]
        if step in checkpoints:
            Se = S
            with np.errstate(over="ignore", invalid="ignore"):
                for L in con.epilogue:
                    Se = cast(L).forward(Se, conv_method=conv_method)
            out["predictions"][step] = backend.to_numpy64(con.readout(Se)["prediction"])
        return S64

    ok = apply(con.prologue, "prologue", 0)
    if ok:
        S64 = backend.to_numpy64(S)
        for lab, reg, _, b in regions:
            if b == "prologue":
                base[lab] = lay.get(S64, reg).copy()
        record(0)
        for step in range(1, k + 1):
            ok = apply(con.body, "body", step)
            if progress is not None:
                progress.update(1)
            if not ok:
                break
            record(step)
        if ok:
            ok = apply(con.epilogue, "epilogue", k)
    out["layers_run"] = layer
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
        out["max_rel"].append(float(metrics.max_rel_err(x[j], reff, err=err)))
        bits = metrics.bits_of_error(x[j], mp[j], dtype)
        out["bits_mean"].append(float(np.mean(bits)))
        out["bits_max"].append(float(np.max(bits)))
    return out


def _clean(o):
    """NaN/inf -> None, numpy -> python, for JSON."""
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    if isinstance(o, np.ndarray):
        return _clean(o.tolist())
    if isinstance(o, (float, np.floating)):
        return metrics.finite_or_none(o)
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
    per["overhead"] = [float(metrics.overhead(a, b)) if not (math.isnan(a) or math.isnan(b)) else math.nan
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


# ------------------------------------------------------------------ CLI

def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m numerics.roundoff",
                description="Roundoff of a GD construction against exact GD (mpmath/mpfr) across depth, "
                            "dtype, backend, convolution algorithm and problem conditioning.")
    p.add_argument("construction", help=f"{', '.join(GD_ARCHS)} (or {', '.join(CATALOGUE)})")
    p.add_argument("--layers", required=True, help="comma-separated model depths; the run streams to the largest")
    p.add_argument("--dtypes", default="float64,float32,bfloat16,float16", help="comma-separated dtypes")
    p.add_argument("--backend", default="torch", help="comma-separated: numpy, torch, cupy (default torch)")
    p.add_argument("--device", default="cpu", help="torch device: cpu or cuda[:i] (default cpu)")
    p.add_argument("--conv", default="direct", help="comma-separated convolution methods: direct, fft")
    p.add_argument("--kappa", default="5", help="comma-separated condition numbers (default 5)")
    p.add_argument("--sigma", default="1", help="comma-separated target scales of D_OOD^b(sigma) (default 1)")
    p.add_argument("--eta", default="1/16", help="step size, an exact rational, or 'auto' (per kappa)")
    p.add_argument("--lam", default="0", help="ridge parameter (lsa/elsa only; default 0)")
    p.add_argument("--batch", type=int, default=64, help="problems (default 64)")
    p.add_argument("--n", type=int, default=20, help="rows N of A (default 20)")
    p.add_argument("--d", type=int, default=5, help="columns D of A (default 5)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--digits", type=int, default=50, help="starting digits of the references (default 50)")
    p.add_argument("--layer-ref", type=int, default=2, help="problems for the layer-level reference (0: off)")
    p.add_argument("--layer-ref-layers", type=int, default=40, help="layers examined by it (default 40)")
    p.add_argument("--out", help="output folder (default out/roundoff/<construction>)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def _list(s: str, what: str, conv=str) -> list:
    items = [t.strip() for t in str(s).split(",") if t.strip()]
    if not items:
        raise UsageError(f"{what} is empty")
    try:
        vals = [conv(t) for t in items]
    except ValueError:
        raise UsageError(f"{what}: not a list of {conv.__name__} values: {s!r}") from None
    if conv is float and not all(math.isfinite(x) for x in vals):
        raise UsageError(f"{what} must be finite, got {s!r}")
    return list(dict.fromkeys(vals))


def _parse(argv) -> tuple[argparse.Namespace, dict]:
    a = build_parser().parse_args(argv)
    entry = resolve(a.construction)
    layers = _list(a.layers, "--layers", int)
    dtypes = _list(a.dtypes, "--dtypes")
    backends = _list(a.backend, "--backend")
    convs = _list(a.conv, "--conv")
    kappas = _list(a.kappa, "--kappa", float)
    sigmas = _list(a.sigma, "--sigma", float)
    for t in dtypes:
        if t not in DTYPES:
            raise UsageError(f"unknown dtype {t!r}; choose from {', '.join(DTYPES)}")
    for t in backends:
        if t not in BACKENDS:
            raise UsageError(f"unknown backend {t!r}; choose from {', '.join(BACKENDS)}")
    for t in convs:
        if t not in CONV_METHODS:
            raise UsageError(f"unknown convolution method {t!r}; choose from {', '.join(CONV_METHODS)}")
    for name, val, lo in (("--n", a.n, 1), ("--d", a.d, 1), ("--batch", a.batch, 1), ("--digits", a.digits, 16),
                          ("--layer-ref", a.layer_ref, 0), ("--layer-ref-layers", a.layer_ref_layers, 1),
                          ("--seed", a.seed, 0)):
        if val < lo:
            raise UsageError(f"{name} must be >= {lo}, got {val}")
    if a.n < a.d:
        raise UsageError(f"--n ({a.n}) must be >= --d ({a.d}) for a least-squares problem")
    if any(x < 1 for x in layers):
        raise UsageError(f"--layers must be >= 1, got {a.layers}")
    if any(x < 1 for x in kappas):
        raise UsageError(f"--kappa must be >= 1, got {a.kappa}")
    if any(x <= 0 for x in sigmas):
        raise UsageError(f"--sigma must be > 0, got {a.sigma}")
    try:
        lam = exact(a.lam)
        eta = None if a.eta.strip() == "auto" else exact(a.eta)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if eta is not None and eta <= 0:
        raise UsageError(f"--eta must be > 0, got {eta}")
    if lam != 0 and entry.arch.startswith("baseconv"):
        raise UsageError("--lam needs lsa or elsa (the BaseConv constructions are plain least squares)")
    if lam < 0:
        raise UsageError(f"--lam must be >= 0, got {lam}")
    if not (a.device == "cpu" or a.device.startswith("cuda")):
        raise UsageError(f"--device must be cpu or cuda[:index], got {a.device!r}")
    # backends: every valid (backend, dtype) pair; bfloat16 exists only in torch
    pairs, skipped = [], []
    for bn in backends:
        for dt in dtypes:
            try:
                pairs.append(Backend(bn, dt, a.device if bn == "torch" else "cpu"))
            except BackendError as e:
                if dt == "bfloat16" and bn != "torch":
                    skipped.append(f"{bn}/{dt}: {e}")
                else:
                    raise UsageError(str(e)) from None
    if not pairs:
        raise UsageError("no valid backend/dtype combination: " + "; ".join(skipped))
    if a.device != "cpu" and "torch" not in backends:
        raise UsageError("--device applies to --backend torch only (cupy always runs on the GPU)")
    # constructions per kappa (eta may depend on kappa), and the depths they realise
    cons = {}
    for kappa in kappas:
        e = auto_eta(kappa) if eta is None else eta
        try:
            con = build(entry, a.n, a.d, e, lam)
            ks = [con.steps_for_depth(L) for L in layers]
        except (ValueError, DepthError) as err:
            raise UsageError(str(err)) from None
        cons[kappa] = (con, e, ks)
    return a, {"entry": entry, "layers": layers, "pairs": pairs, "skipped": skipped, "convs": convs,
               "kappas": kappas, "sigmas": sigmas, "lam": lam, "cons": cons}


def _fmt(x) -> str:
    if x is None or (isinstance(x, float) and (math.isnan(x))):
        return "nan"
    return f"{x:.3e}"


def _print_record(rec: dict, out) -> None:
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


def main(argv=None, out=None) -> int:
    out = out or sys.stdout
    try:
        a, cfg = _parse(argv)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from tqdm import tqdm

    from . import plots
    from .layer_reference import layer_level, summarize
    from .problems import sample_ls

    entry = cfg["entry"]
    outdir = Path(a.out) if a.out else Path("out") / "roundoff" / entry.name
    try:
        outdir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        print(f"error: cannot create --out {outdir}: {e.strerror}", file=sys.stderr)
        return 2
    for s in cfg["skipped"]:
        print(f"skipped {s}", file=out)
    n_cfg = len(cfg["pairs"]) * len(cfg["convs"]) * len(cfg["kappas"]) * len(cfg["sigmas"])
    total_steps = n_cfg * max(ks for (_, _, kk) in cfg["cons"].values() for ks in kk)
    progress = tqdm(total=total_steps, desc=entry.name, unit="step", file=sys.stderr, disable=a.quiet,
                    leave=False)
    runs, layer_runs, plots_written = [], [], []
    t_start = time.perf_counter()
    for kappa in cfg["kappas"]:
        con, eta, ks = cfg["cons"][kappa]
        k = max(ks)
        checkpoints = sorted(set(ks))
        if eta * Fraction(kappa) ** 2 >= 2:
            print(f"warning: eta*kappa^2 = {float(eta * Fraction(kappa) ** 2):g} >= 2 at kappa={kappa:g}: exact GD "
                  f"diverges (use --eta auto)", file=out)
        print(f"{con.name}: {con.reference}\n  kappa={kappa:g}, eta={eta}, depth {con.depth(k)} = "
              f"{len(con.prologue)} + {len(con.body)} x {k} + {len(con.epilogue)}; state {con.layout.shape}; "
              f"N={a.n}, D={a.d}, batch {a.batch}", file=out)
        for sigma in cfg["sigmas"]:
            P = sample_ls(a.batch, a.n, a.d, kappa=kappa, sigma=sigma, seed=a.seed)
            q = np.random.default_rng(a.seed + 1).standard_normal((a.batch, a.d))
            refs: dict[str, dict | None] = {}
            group = []
            for be in cfg["pairs"]:
                v = {"A": be.round_input(P.A), "b": be.round_input(P.b), "x": be.round_input(P.x0),
                     "q": be.round_input(q)}
                finite = all(np.all(np.isfinite(t)) for t in v.values())
                if be.dtype not in refs:
                    refs[be.dtype] = reference(v, eta, cfg["lam"], k, a.digits, v["q"]) if finite else None
                ref = refs[be.dtype]
                for conv in cfg["convs"]:
                    progress.set_postfix_str(f"{be.name}/{be.dtype}/{conv} kappa={kappa:g} sigma={sigma:g}")
                    rec = run_config(con, v, v["q"], ref, k, be, conv, checkpoints, eta, cfg["lam"], progress)
                    rec.update({"kappa": kappa, "sigma": sigma, "eta": str(eta),
                                "reference_digits": None if ref is None else ref["digits"]})
                    if not group:
                        print(f"sigma={sigma:g}:", file=out)
                    _print_record(rec, out)
                    runs.append(rec)
                    group.append(rec)
                    if a.layer_ref and finite:
                        P2 = min(a.layer_ref, a.batch)
                        vs = {kk: t[:P2] for kk, t in v.items()}
                        lr = layer_level(con, vs, k, be, conv_method=conv, digits=a.digits,
                                         max_layers=a.layer_ref_layers)
                        lrj = lr.to_json()
                        lrj.update({"backend": be.name, "device": be.device, "conv": conv, "kappa": kappa,
                                    "sigma": sigma, "summary": summarize(lr, con)})
                        layer_runs.append(lrj)
                    # the step count of a stopped run still advances the bar
                    done = rec["first_nonfinite"] is not None and rec["first_nonfinite"]["layer"] >= 0
                    if done or rec["per_step"] is None:
                        stopped = (rec["first_nonfinite"].get("step") or 0) if done else 0
                        progress.update(max(0, k - stopped))
            for key in sorted({(r["backend"], r["conv"]) for r in group}):
                sel = [r for r in group if (r["backend"], r["conv"]) == key]
                tag = f"{key[0]}_{key[1]}_kappa{kappa:g}_sigma{sigma:g}"
                title = f"{con.name}: {key[0]}, {key[1]} conv, kappa={kappa:g}, sigma={sigma:g}, eta={eta}"
                path = outdir / f"mse_{tag}.png"
                plots.error_vs_depth(sel, path, title=title)
                plots_written.append(str(path))
                lsel = [r for r in layer_runs if (r["backend"], r["conv"], r["kappa"], r["sigma"])
                        == (key[0], key[1], kappa, sigma)]
                if lsel:
                    lpath = outdir / f"layers_{tag}.png"
                    plots.layer_errors(lsel, lpath, title=f"{con.name}: per-layer error ({tag})")
                    plots_written.append(str(lpath))
    progress.close()
    con0 = cfg["cons"][cfg["kappas"][0]][0]
    report = {"command": "roundoff", "argv": list(sys.argv[1:] if argv is None else argv),
              "construction": con0.summary(), "arch": entry.arch, "layers": cfg["layers"],
              "n": a.n, "d": a.d, "batch": a.batch, "seed": a.seed, "lam": str(cfg["lam"]),
              "eta": {f"{k:g}": str(v[1]) for k, v in cfg["cons"].items()},
              "data_regions": [{"label": lab, "region": reg, "scale": str(sc), "baseline": b}
                               for lab, reg, sc, b in data_regions(con0)],
              "skipped": cfg["skipped"], "runs": runs, "layer_level": layer_runs, "plots": plots_written,
              "seconds": time.perf_counter() - t_start}
    path = outdir / "roundoff.json"
    path.write_text(json.dumps(_clean(report), indent=1))
    print(f"report written to {path}; plots: {', '.join(Path(p).name for p in plots_written)}", file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
