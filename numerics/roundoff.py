"""``python -m numerics.roundoff``: roundoff of a GD construction across depth, dtype and backend.

    python -m numerics.roundoff CONSTRUCTION --layers 31,301 [--dtypes float64,float32,bfloat16,float16]
        [--backend torch[,numpy,cupy]] [--device cpu|cuda] [--conv direct[,fft]]
        [--kappa 5[,10]] [--sigma 1[,100]] [--eta 1/16|auto] [--lam 0]
        [--batch 64] [--n 20] [--d 5] [--seed 0] [--digits 50]
        [--layer-ref 2] [--layer-ref-layers 40] [--out DIR] [--quiet] [--allow-large]

``CONSTRUCTION`` is a ``gd`` architecture of the registry (``constructions.catalogue``: baseconv,
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
  iterate, ``numerics.error_measures``);
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

Writes ``DIR/roundoff.json`` and PNG plots (``numerics.roundoff_plots``): MSE against
depth, one line per dtype, plain GD dashed, each file written atomically.
Exit status 0, or 2 on bad input (a one-line message), checked before any
work: every list and number, the sizes against ``LIMITS``, the estimated
memory and mpfr work (``estimate_cost``) -- ``--allow-large`` lifts those --
and ``--out``.  Progress: a bar on a terminal, plain lines in a log.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import re
import sys
import time
from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace

import gmpy2
import numpy as np

from constructions.base import Construction, DepthError, exact, run_layers
from constructions.catalogue import CatalogueEntry
from constructions.catalogue import gd_architectures
from polyverify.cli import (DEFAULT_MEMORY_LIMIT, Parser, UsageError, atomic_path, atomic_write_text,
                            check_memory, check_range, human_bytes, output_dir, run_main)
from polyverify.cli import progress as progress_reporter

from . import error_measures
from .backends import BACKENDS, DTYPES, Backend, BackendError
from .reference import gd_reference, stable_reference, working_precision

CONV_METHODS = ("direct", "fft")

#: upper bounds (inclusive) of the sizes; ``--allow-large`` lifts them and the memory limit
LIMITS = {
    "layers": 100_000,          # the largest --layers depth
    "batch": 4096,
    "n": 1024,
    "d": 32,                    # baseconv-causal carries D^2 channels: D = 64 takes 8 GiB to build
    "layer_ref": 64,
    "layer_ref_layers": 10_000,
    "list": 32,                 # values in one comma-separated list
    "configurations": 256,      # backend/dtype pairs x conv x kappa x sigma
    "reference_ops": 10**9,     # mpfr multiply-adds of the references (1 to 3 million a second)
}
#: digits the references start at: at least float64's, at most stable_reference's ceiling (not liftable)
DIGITS_RANGE = (16, 400)
MAX_SEED = 2**62
#: bytes of memory a run may be estimated to need without ``--allow-large``
MEMORY_LIMIT = DEFAULT_MEMORY_LIMIT
ALLOW = "--allow-large"
#: one gmpy2 mpfr of a few hundred bits with its object-array slot (160 measured at 416 bits)
MP_BYTES = 160
#: an error entry (mpfr difference, bits of error, relative error) costs about this many multiply-adds
ERROR_OPS = 10
#: the interpreter, numpy, torch and gmpy2 themselves
FIXED_OVERHEAD = 512 * 2**20

_Parser = Parser  # (the name this module used before polyverify.cli)


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

    def on_layer(i, S):
        if not backend.isfinite_all(S):
            sec, step, j = where(i)
            out["first_nonfinite"] = {"layer": i, "section": sec, "step": step, "layer_in_section": j,
                                      **_first_bad(con, backend.to_numpy64(S))}
            return True
        return False

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
                Se = run_layers([cast(L) for L in con.epilogue], S, conv_method=conv_method)
            out["predictions"][step] = backend.to_numpy64(con.readout(Se)["prediction"])
        return False

    with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported as the first non-finite layer
        _, out["layers_run"] = con.run(v, k, state=S, cast=cast, conv_method=conv_method,
                                       on_layer=on_layer, on_step=on_step)
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


def _clean(o):
    """NaN/inf -> None, numpy -> python, for JSON."""
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    if isinstance(o, np.ndarray):
        return _clean(o.tolist())
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


# ------------------------------------------------------------------ CLI

def _limits_text() -> str:
    return "; ".join(f"{k.replace('_', '-')} <= {v:,}" for k, v in LIMITS.items())


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="python -m numerics.roundoff",
               description="Roundoff of a GD construction against exact GD (mpmath/mpfr) across depth, "
                           "dtype, backend, convolution algorithm and problem conditioning.  Every value is "
                           "checked before any work (exit 2 and one 'error:' line otherwise).  Limits: "
                           f"{_limits_text()}; estimated memory <= {human_bytes(MEMORY_LIMIT)} "
                           f"(--allow-large lifts these).")
    gd = gd_architectures()
    p.add_argument("construction", help=f"{', '.join(gd)} (or {', '.join(e.name for e in gd.values())})")
    p.add_argument("--layers", required=True,
                   help=f"comma-separated model depths, 1 .. {LIMITS['layers']:,}; the run streams to the largest")
    p.add_argument("--dtypes", default="float64,float32,bfloat16,float16",
                   help=f"comma-separated dtypes: {', '.join(DTYPES)}")
    p.add_argument("--backend", default="torch", help="comma-separated: numpy, torch, cupy (default torch)")
    p.add_argument("--device", default="cpu", help="torch device: cpu or cuda[:i] (default cpu)")
    p.add_argument("--conv", default="direct", help="comma-separated convolution methods: direct, fft")
    p.add_argument("--kappa", default="5", help="comma-separated condition numbers (default 5)")
    p.add_argument("--sigma", default="1", help="comma-separated target scales of D_OOD^b(sigma) (default 1)")
    p.add_argument("--eta", default="1/16", help="step size, an exact rational, or 'auto' (per kappa)")
    p.add_argument("--lam", default="0", help="ridge parameter (lsa/elsa only; default 0)")
    p.add_argument("--batch", type=int, default=64, help=f"problems, 1 .. {LIMITS['batch']} (default 64)")
    p.add_argument("--n", type=int, default=20, help=f"rows N of A, d .. {LIMITS['n']} (default 20)")
    p.add_argument("--d", type=int, default=5, help=f"columns D of A, 1 .. {LIMITS['d']} (default 5)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the problems, >= 0 (default 0)")
    p.add_argument("--digits", type=int, default=50,
                   help=f"starting digits of the references, {DIGITS_RANGE[0]} .. {DIGITS_RANGE[1]} (default 50)")
    p.add_argument("--layer-ref", type=int, default=2,
                   help=f"problems for the layer-level reference, 0 (off) .. {LIMITS['layer_ref']} (default 2)")
    p.add_argument("--layer-ref-layers", type=int, default=40,
                   help=f"layers examined by it, 1 .. {LIMITS['layer_ref_layers']:,} (default 40)")
    p.add_argument("--out", help="output folder (default out/roundoff/<construction>); created if missing")
    p.add_argument("--quiet", action="store_true",
                   help="no progress report (default: a bar on a terminal, plain lines in a log)")
    p.add_argument("--allow-large", action="store_true",
                   help=f"lift the size limits and the memory limit ({human_bytes(MEMORY_LIMIT)})")
    return p


def _list(s: str, what: str, conv=str, *, allow_large: bool = False) -> list:
    raw = str(s).split(",")
    items = [t.strip() for t in raw]
    if not any(items):
        raise UsageError(f"{what} is empty")
    if not all(items):
        raise UsageError(f"{what}: empty item in {s!r}")
    try:
        vals = [conv(t) for t in items]
    except (ValueError, OverflowError):
        raise UsageError(f"{what}: not a list of {conv.__name__} values: {s!r}") from None
    if conv is float and not all(math.isfinite(x) for x in vals):
        raise UsageError(f"{what} must be finite, got {s!r}")
    vals = list(dict.fromkeys(vals))
    if not allow_large and len(vals) > LIMITS["list"]:
        raise UsageError(f"{what} has {len(vals)} values, above the limit {LIMITS['list']} "
                         f"(pass {ALLOW} to allow more)")
    return vals


def _parse(argv, *, create_out: bool = True) -> tuple[argparse.Namespace, dict]:
    a = build_parser().parse_args(argv)
    big = a.allow_large
    entry = resolve(a.construction)
    layers = _list(a.layers, "--layers", int, allow_large=big)
    dtypes = _list(a.dtypes, "--dtypes", allow_large=big)
    backends = _list(a.backend, "--backend", allow_large=big)
    convs = _list(a.conv, "--conv", allow_large=big)
    kappas = _list(a.kappa, "--kappa", float, allow_large=big)
    sigmas = _list(a.sigma, "--sigma", float, allow_large=big)
    for t in dtypes:
        if t not in DTYPES:
            raise UsageError(f"unknown dtype {t!r}; choose from {', '.join(DTYPES)}")
    for t in backends:
        if t not in BACKENDS:
            raise UsageError(f"unknown backend {t!r}; choose from {', '.join(BACKENDS)}")
    for t in convs:
        if t not in CONV_METHODS:
            raise UsageError(f"unknown convolution method {t!r}; choose from {', '.join(CONV_METHODS)}")
    for name, val, lo in (("--n", a.n, 1), ("--d", a.d, 1), ("--batch", a.batch, 1),
                          ("--layer-ref", a.layer_ref, 0), ("--layer-ref-layers", a.layer_ref_layers, 1)):
        check_range(name, val, lo, None if big else LIMITS[name[2:].replace("-", "_")], override=ALLOW)
    check_range("--digits", a.digits, *DIGITS_RANGE)
    check_range("--seed", a.seed, 0, MAX_SEED)
    if a.n < a.d:
        raise UsageError(f"--n ({a.n}) must be >= --d ({a.d}) for a least-squares problem")
    if any(x < 1 for x in layers):
        raise UsageError(f"--layers must be >= 1, got {a.layers}")
    if not big and max(layers) > LIMITS["layers"]:
        raise UsageError(f"--layers {max(layers)} exceeds the limit {LIMITS['layers']:,} (pass {ALLOW} to allow more)")
    if any(x < 1 for x in kappas):
        raise UsageError(f"--kappa must be >= 1, got {a.kappa}")
    if any(x <= 0 for x in sigmas):
        raise UsageError(f"--sigma must be > 0, got {a.sigma}")
    from polyverify.rational import parse_rational

    try:
        lam = parse_rational(a.lam, "--lam")
        eta = None if a.eta.strip() == "auto" else parse_rational(a.eta, "--eta")
    except ValueError as e:
        raise UsageError(str(e)) from None
    if eta is not None and eta <= 0:
        raise UsageError(f"--eta must be > 0, got {eta}")
    if lam != 0 and not entry.ridge:
        ridge = " or ".join(e.arch for e in gd_architectures().values() if e.ridge)
        raise UsageError(f"--lam needs a ridge architecture ({ridge}); {entry.arch} is plain least squares")
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
    n_cfg = len(pairs) * len(convs) * len(kappas) * len(sigmas)
    if not big and n_cfg > LIMITS["configurations"]:
        raise UsageError(f"{n_cfg} configurations (backend/dtype pairs x --conv x --kappa x --sigma) exceed the "
                         f"limit {LIMITS['configurations']} (pass {ALLOW} to allow more)")
    # constructions per kappa (eta may depend on kappa), and the depths they realise
    cons = {}
    for kappa in kappas:
        e = auto_eta(kappa) if eta is None else eta
        try:
            con = build(entry, a.n, a.d, e, lam)
            ks = [con.steps_for_depth(L) for L in layers]
        except DepthError as err:
            raise UsageError(f"--layers: {err}") from None
        except ValueError as err:
            raise UsageError(str(err)) from None
        cons[kappa] = (con, e, ks)
    if convs != ["direct"] and not any(L.kind == "baseconv" for con, _, _ in cons.values()
                                       for L in (*con.prologue, *con.body, *con.epilogue)):
        # the convolution method only changes BaseConv layers: the runs would repeat, not compare
        raise UsageError(f"--conv {a.conv}: the convolution method applies to BaseConv layers; "
                         f"{entry.arch} has none (leave --conv at direct)")
    cfg = {"entry": entry, "layers": layers, "pairs": pairs, "skipped": skipped, "convs": convs,
           "kappas": kappas, "sigmas": sigmas, "lam": lam, "cons": cons}
    if not big:
        nbytes, ops = estimate_cost(a, cfg)
        check_memory("this run", nbytes, MEMORY_LIMIT, override=ALLOW)
        if ops > LIMITS["reference_ops"]:
            raise UsageError(f"the exact references need about {ops:.1e} mpfr multiply-adds (1 to 3 million a "
                             f"second), above the limit {LIMITS['reference_ops']:.0e} (pass {ALLOW} to allow it)")
    # the output folder last (checked here; created when the first file is written)
    if create_out:
        cfg["outdir"] = output_dir("--out", a.out if a.out else Path("out") / "roundoff" / entry.name)
    return a, cfg


def _general_channels(layer) -> int:
    """Channels of a BaseConv layer whose direct convolution ``ops.ConvPlan`` runs as a (T, T)
    Toeplitz/circulant product (not lag-0 only, not all taps equal, not all zero); 0 for others."""
    if layer.kind != "baseconv":
        return 0
    h = np.asarray(layer.h)
    nz = h != 0
    lag0 = nz[0] & ~nz[1:].any(axis=0)
    uniform = (h == h[0]).all(axis=0) & nz[0] & ~lag0
    return int((nz.any(axis=0) & ~lag0 & ~uniform).sum())


def estimate_cost(a, cfg) -> tuple[float, float]:
    """A rough upper estimate of a run's memory (bytes) and of the mpfr multiply-adds of its
    references, computed from the sizes alone (nothing is allocated):

    * per kappa (one at a time): the state in the backend and its float64 copies (x 4), the cast
      weights (x 2) and the direct convolution's (T, T) kernel per general channel, the exact
      references of every dtype (one more while ``stable_reference`` compares two precisions,
      ``MP_BYTES`` a value),
      the float64 iterates, and the layer-level reference's float states and mpfr states;
    * for the whole run: the per-step records kept for the report (x 2: the JSON copy);
    * ``FIXED_OVERHEAD`` for the libraries.
    """
    B, N, D = a.batch, a.n, a.d
    n_dt = len({be.dtype for be in cfg["pairs"]})
    n_run = len(cfg["pairs"]) * len(cfg["convs"])  # stream runs per (kappa, sigma)
    n_sig = len(cfg["sigmas"])
    peak = records = ops = 0.0
    for con, _, ks in cfg["cons"].values():
        k = max(ks)
        T, C = con.layout.shape
        distinct = list({id(L): L for L in (*con.prologue, *con.body, *con.epilogue)}.values())
        weights = sum(int(np.size(w)) for L in distinct for w in L.arrays().values())
        kernels = T * T * sum(_general_channels(L) for L in distinct) if "direct" in cfg["convs"] else 0
        state = 4 * B * T * C
        ref = (n_dt + 1) * (k + 1) * B * (D + 1) * MP_BYTES
        iterates = 4 * (k + 1) * B * D
        depth = con.depth(k)
        P2, nl = min(a.layer_ref, B), min(a.layer_ref_layers, depth)
        layer_ref = (3 * P2 * T * C * (nl + 1) * 8 + 2 * nl * P2 * T * C * MP_BYTES) if a.layer_ref else 0
        peak = max(peak, 8 * (state + 2 * weights + kernels + iterates) + ref + layer_ref)
        records += n_sig * n_run * (k + 1) * 24 * 32 * 2
        ops += n_sig * (n_dt * 2 * B * ((k + 1) * D * D + N * D * D) + ERROR_OPS * n_run * 2 * (k + 1) * B * D)
        if a.layer_ref:
            ops += n_sig * n_run * 2 * P2 * nl * T * C * (C + T)
    return peak + records + FIXED_OVERHEAD, ops


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


@contextlib.contextmanager
def _atomic_figure(path: Path):
    """A temporary path with ``path``'s suffix (matplotlib reads the format from it) in its folder,
    renamed over ``path`` once the figure is complete (``polyverify.cli.atomic_path``)."""
    with atomic_path(path) as tmp:
        fig = tmp.with_name(tmp.name + path.suffix)
        try:
            yield fig
            fig.replace(tmp)
        finally:
            with contextlib.suppress(OSError):
                fig.unlink()


def main(argv=None, out=None) -> int:
    return run_main(lambda av: _main(av, out), argv)


def _main(argv, out) -> int:
    out = out or sys.stdout
    a, cfg = _parse(argv)
    t_start = time.perf_counter()
    bar = progress_reporter(total_steps(cfg), cfg["entry"].name, enabled=not a.quiet, unit="step", leave=False)
    runs, layer_runs = compute(a, cfg, out, bar)
    bar.close()
    plots = write_plots(cfg, runs, layer_runs, cfg["outdir"])
    report = make_report(a, cfg, runs, layer_runs, plots, list(sys.argv[1:] if argv is None else argv),
                         time.perf_counter() - t_start)
    path = cfg["outdir"] / "roundoff.json"
    atomic_write_text(path, json.dumps(_clean(report), indent=1))
    print(f"report written to {path}; plots: {', '.join(Path(p).name for p in plots)}", file=out)
    return 0


def total_steps(cfg) -> int:
    n_cfg = len(cfg["pairs"]) * len(cfg["convs"]) * len(cfg["kappas"]) * len(cfg["sigmas"])
    return n_cfg * max(ks for (_, _, kk) in cfg["cons"].values() for ks in kk)


def compute(a, cfg, out, bar) -> tuple[list[dict], list[dict]]:
    """Every configuration of a parsed command line (``_parse``): the run records and the
    layer-level records, each configuration's lines printed to ``out``; nothing written."""
    from .layer_reference import layer_level, summarize
    from .problems import sample_ls

    for s in cfg["skipped"]:
        print(f"skipped {s}", file=out)
    runs, layer_runs = [], []
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
            first = True
            for be in cfg["pairs"]:
                v = {"A": be.round_input(P.A), "b": be.round_input(P.b), "x": be.round_input(P.x0),
                     "q": be.round_input(q)}
                finite = all(np.all(np.isfinite(t)) for t in v.values())
                if be.dtype not in refs:
                    refs[be.dtype] = reference(v, eta, cfg["lam"], k, a.digits, v["q"]) if finite else None
                ref = refs[be.dtype]
                for conv in cfg["convs"]:
                    bar.set_postfix_str(f"{be.name}/{be.dtype}/{conv} kappa={kappa:g} sigma={sigma:g}")
                    rec = run_config(con, v, v["q"], ref, k, be, conv, checkpoints, eta, cfg["lam"], bar)
                    rec.update({"kappa": kappa, "sigma": sigma, "eta": str(eta),
                                "reference_digits": None if ref is None else ref["digits"]})
                    if first:
                        print(f"sigma={sigma:g}:", file=out)
                        first = False
                    _print_record(rec, out)
                    runs.append(rec)
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
                        bar.update(max(0, k - stopped))
    return runs, layer_runs


def write_plots(cfg, runs: list[dict], layer_runs: list[dict], outdir: Path) -> list[str]:
    """One error-vs-depth plot per (backend, conv, kappa, sigma), one line per dtype, and the
    layer-level plot where there is a layer-level run; each written atomically."""
    from . import roundoff_plots

    plots = []
    for kappa in cfg["kappas"]:
        con, eta, _ = cfg["cons"][kappa]
        for sigma in cfg["sigmas"]:
            group = [r for r in runs if r["kappa"] == kappa and r["sigma"] == sigma]
            for key in sorted({(r["backend"], r["conv"]) for r in group}):
                sel = [r for r in group if (r["backend"], r["conv"]) == key]
                tag = f"{key[0]}_{key[1]}_kappa{kappa:g}_sigma{sigma:g}"
                title = f"{con.name}: {key[0]}, {key[1]} conv, kappa={kappa:g}, sigma={sigma:g}, eta={eta}"
                path = outdir / f"mse_{tag}.png"
                with _atomic_figure(path) as tmp:
                    roundoff_plots.error_vs_depth(sel, tmp, title=title)
                plots.append(str(path))
                lsel = [r for r in layer_runs if (r["backend"], r["conv"], r["kappa"], r["sigma"])
                        == (key[0], key[1], kappa, sigma)]
                if lsel:
                    lpath = outdir / f"layers_{tag}.png"
                    with _atomic_figure(lpath) as tmp:
                        roundoff_plots.layer_errors(lsel, tmp, title=f"{con.name}: per-layer error ({tag})")
                    plots.append(str(lpath))
    return plots


def make_report(a, cfg, runs, layer_runs, plots, argv, seconds) -> dict:
    con0 = cfg["cons"][cfg["kappas"][0]][0]
    entry = cfg["entry"]
    return {"command": "roundoff", "argv": argv,
            "construction": con0.summary(), "arch": entry.arch, "layers": cfg["layers"],
            "n": a.n, "d": a.d, "batch": a.batch, "seed": a.seed, "lam": str(cfg["lam"]),
            "eta": {f"{k:g}": str(v[1]) for k, v in cfg["cons"].items()},
            "data_regions": [{"label": lab, "region": reg, "scale": str(sc), "baseline": b}
                             for lab, reg, sc, b in data_regions(con0)],
            "skipped": cfg["skipped"], "runs": runs, "layer_level": layer_runs, "plots": plots,
            "seconds": seconds}


# ------------------------------------------------------------------ sweeps (numerics.sweep)

#: a sweep cell's config keys and the command-line flag each becomes ("" = the positional argument)
CELL_KEYS = {"arch": "", "layers": "--layers", "dtype": "--dtypes", "backend": "--backend", "device": "--device",
             "conv": "--conv", "kappa": "--kappa", "sigma": "--sigma", "eta": "--eta", "lam": "--lam",
             "batch": "--batch", "n": "--n", "d": "--d", "seed": "--seed", "digits": "--digits",
             "layer_ref": "--layer-ref", "layer_ref_layers": "--layer-ref-layers", "allow_large": "--allow-large"}
#: keys that name one value in a cell (one run per cell)
_SCALAR_KEYS = ("dtype", "backend", "conv", "kappa", "sigma")


def _cell_parse(config: dict, where: str = "cell"):
    from .sweep import config_argv

    for k in ("arch", "layers"):
        if k not in config:
            raise UsageError(f"{where}: the config needs {k!r}")
    for k in _SCALAR_KEYS:
        if isinstance(config.get(k), list):
            raise UsageError(f"{where}: {k} must be one value in a cell (one run per cell), got {config[k]!r}")
    try:
        return _parse(config_argv(config, CELL_KEYS, where) + ["--quiet"], create_out=False)
    except UsageError as e:
        raise UsageError(f"{where}: {e}") from None


def sweep_check(config: dict, *, allow_large: bool = False, where: str = "cell") -> dict:
    """One cell's config checked as the command line would be (UsageError naming the problem) and
    returned complete: every key with its value, so that a cell has one id however it was written."""
    config = dict(config)
    try:
        a, cfg = _cell_parse(config, where)
    except UsageError:
        if not allow_large or config.get("allow_large"):
            raise
        config["allow_large"] = True
        a, cfg = _cell_parse(config, where)
    layers = cfg["layers"]
    full = {"arch": cfg["entry"].arch, "layers": layers[0] if len(layers) == 1 else layers,
            "dtype": cfg["pairs"][0].dtype, "backend": cfg["pairs"][0].name, "device": a.device,
            "conv": cfg["convs"][0], "kappa": cfg["kappas"][0], "sigma": cfg["sigmas"][0], "eta": a.eta.strip(),
            "lam": str(cfg["lam"]), "batch": a.batch, "n": a.n, "d": a.d, "seed": a.seed, "digits": a.digits,
            "layer_ref": a.layer_ref, "layer_ref_layers": a.layer_ref_layers}
    if config.get("allow_large"):
        full["allow_large"] = True
    return full


def sweep_cell(config: dict) -> dict:
    """One roundoff run (one architecture, depth or list of depths, dtype, backend, convolution,
    kappa, sigma, size, seed): the run record of ``python -m numerics.roundoff`` (per-step errors,
    checkpoints, first non-finite layer; no timings, so that equal configs give equal results),
    the error at the largest depth at the top level, and the layer-level records if asked."""
    import io

    a, cfg = _cell_parse(config)
    runs, layer_runs = compute(a, cfg, io.StringIO(), progress_reporter(None, "", enabled=False))
    (rec,) = runs
    rec = {k: v for k, v in rec.items() if not k.startswith("seconds")}
    top = {"construction": cfg["cons"][cfg["kappas"][0]][0].name}
    if rec.get("checkpoints"):
        c = rec["checkpoints"][-1]
        top.update({k: c[k] for k in ("mse", "max_rel", "bits_mean", "plain_mse", "overhead", "prediction_mse")})
    for lr in layer_runs:
        lr.pop("seconds", None)
    out = {**top, **rec}
    if layer_runs:
        out["layer_level"] = layer_runs
    return _clean(out)


def _sweep_arguments(g) -> None:
    g.add_argument("--archs", default="baseconv", help=f"architectures: {', '.join(gd_architectures())} "
                                                       "(default baseconv)")
    g.add_argument("--depths", required=True, help="model depths (layers), each realised by every architecture; "
                                                   "one cell per depth")
    g.add_argument("--dtypes", default="float64,float32", help=f"dtypes: {', '.join(DTYPES)} (default float64,float32)")
    g.add_argument("--sizes", default="20x5", help="problem sizes NxD (default 20x5)")
    g.add_argument("--kappas", default="5", help="condition numbers (default 5)")
    g.add_argument("--sigmas", default="1", help="target scales of D_OOD^b(sigma) (default 1)")
    g.add_argument("--seeds", default="0", help="problem seeds (default 0)")
    g.add_argument("--backends", default="torch", help="numpy, torch, cupy (default torch)")
    g.add_argument("--convs", default="direct", help="convolution methods: direct, fft (default direct)")
    g.add_argument("--device", default="cpu", help="torch device (default cpu)")
    g.add_argument("--batch", type=int, default=64, help="problems per cell (default 64)")
    g.add_argument("--eta", default="1/16", help="step size, an exact rational or 'auto' (default 1/16)")
    g.add_argument("--lam", default="0", help="ridge parameter (lsa/elsa; default 0)")
    g.add_argument("--digits", type=int, default=50, help="starting digits of the references (default 50)")
    g.add_argument("--layer-ref", type=int, default=0,
                   help="problems for the layer-level reference in each cell (default 0: off)")
    g.add_argument("--layer-ref-layers", type=int, default=40, help="layers it examines (default 40)")


def _size(s: str) -> tuple[int, int]:
    n, d = s.lower().split("x")
    return int(n), int(d)


_size.__name__ = "NxD"


def _sweep_configs(a) -> list[dict]:
    from .sweep import product, split_list

    big = a.allow_large
    L = LIMITS["list"]
    sizes = split_list("--sizes", a.sizes, _size, allow_large=big, limit=L)
    grid = product(arch=split_list("--archs", a.archs, allow_large=big, limit=L),
                   size=sizes,
                   kappa=split_list("--kappas", a.kappas, float, allow_large=big, limit=L),
                   sigma=split_list("--sigmas", a.sigmas, float, allow_large=big, limit=L),
                   seed=split_list("--seeds", a.seeds, int, allow_large=big, limit=L),
                   backend=split_list("--backends", a.backends, allow_large=big, limit=L),
                   conv=split_list("--convs", a.convs, allow_large=big, limit=L),
                   dtype=split_list("--dtypes", a.dtypes, allow_large=big, limit=L),
                   layers=split_list("--depths", a.depths, int, allow_large=big, limit=L))
    fixed = {"device": a.device, "batch": a.batch, "eta": a.eta, "lam": a.lam, "digits": a.digits,
             "layer_ref": a.layer_ref, "layer_ref_layers": a.layer_ref_layers}
    out = []
    for c in grid:
        n, d = c.pop("size")
        out.append({**c, "n": n, "d": d, **fixed})
    return out


def _sweep_finish(res, out: Path) -> tuple[list[str], bool]:
    """Error against depth, one plot per group of cells that differ only in dtype and depth: one
    line per dtype, from its deepest finished cell (whose per-step errors cover every smaller depth)."""
    from . import roundoff_plots

    rows = [r for r in res.rows if r["status"] == "ok"]
    if not rows:
        return [], True
    group_keys = [k for k in CELL_KEYS if k not in ("dtype", "layers", "allow_large")]
    varying = [k for k in group_keys if len({json.dumps(r["config"].get(k)) for r in rows}) > 1]
    groups: dict[tuple, dict[str, dict]] = {}
    for r in rows:
        key = tuple(json.dumps(r["config"].get(k)) for k in group_keys)
        best = groups.setdefault(key, {})
        dt = r["config"]["dtype"]
        if dt not in best or r["result"]["depth"] > best[dt]["result"]["depth"]:
            best[dt] = r
    files = []
    for key, by_dtype in groups.items():
        c0 = next(iter(by_dtype.values()))["config"]
        tag = "_".join([str(c0["arch"])] + [f"{k}{c0[k]}" for k in varying if k != "arch"])
        tag = re.sub(r"[^\w.\-]+", "-", tag)
        title = (f"{c0['arch']}: N={c0['n']}, D={c0['d']}, {c0['backend']}, {c0['conv']} conv, kappa={c0['kappa']:g}, "
                 f"sigma={c0['sigma']:g}, eta={c0['eta']}, batch {c0['batch']}, seed {c0['seed']}")
        path = out / "plots" / f"mse_{tag}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        roundoff_plots.error_vs_depth([r["result"] for r in by_dtype.values()], path, title=title)
        files.append(str(path))
    return files, True


SWEEP = SimpleNamespace(
    description="Roundoff sweep: one cell per architecture x depth x dtype x size x kappa x sigma x seed x backend x "
                "conv; each cell is one run of python -m numerics.roundoff (checked as that command checks it, "
                "before any work).  Writes the table and plots/mse_*.png (error against depth, one line per dtype).",
    cell="numerics.roundoff:sweep_cell", add_arguments=_sweep_arguments, configs=_sweep_configs,
    check=sweep_check, finish=_sweep_finish)


if __name__ == "__main__":
    from polyverify.cli import exit_with

    exit_with(main)
