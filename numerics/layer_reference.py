"""Layer-level reference: the same layers evaluated in gmpy2 ``mpfr``.

The algorithm-level reference (``numerics.reference.gd_reference``) says how
far the construction's iterate is from exact GD; this module says *which
layer* put the error there.  For a few problems it runs the stack in the
float dtype, keeps every intermediate state, and evaluates the construction's
exact weights (rationals, converted to mpfr) on

* the float state that entered each layer, converted exactly: the **local**
  error of layer ``l`` is ``float_l(S_{l-1}) - exact_l(S_{l-1})``, the roundoff
  that layer commits in the dtype given exactly the state it was fed;
* the exact state of the previous layer (a chain started from the float
  inputs converted exactly): the **cumulative** error ``S_l - E_l``, whose
  value at a body boundary is the algorithm-level error of the whole state.

Exact states are numpy object arrays of ``gmpy2.mpfr`` (one problem, 2-D: the
object path of ``constructions/ops.py``, which skips structural zeros and ones
by ``v == 0`` / ``v == 1``, both fine for mpfr).  The exact convolution is the
direct sum whatever ``conv_method`` the float run uses, so FFT roundoff is
attributed to the layer that convolves.  The working precision is raised until
the float64 rounding of every exact state stops changing
(``numerics.reference.stable_reference``'s rule).  Cost: a few milliseconds
per layer and problem at N=20, D=5; meant for a few problems.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import gmpy2
import numpy as np

from constructions.base import Construction, Sections, exact
from constructions.layers import Layer

from . import error_measures
from .backends import Backend
from .reference import from_mpfr_array, to_mpfr_array, working_precision

__all__ = ["LayerLevelResult", "mp_layer", "exact_forward", "stack_labels", "layer_level"]


def mp_layer(layer: Layer, prec: int) -> Layer:
    """``layer`` with every weight an object array of mpfr at ``prec`` bits
    (ints and dyadic rationals exactly; other rationals rounded once)."""
    return layer.map(lambda W: to_mpfr_array(np.asarray(W, dtype=object), prec))


def exact_forward(layer_mp: Layer, state: np.ndarray, prec: int) -> np.ndarray:
    """One layer on one problem's state (2-D float64 or mpfr array) in mpfr at ``prec`` bits."""
    S = to_mpfr_array(np.asarray(state), prec) if np.asarray(state).dtype != object else state
    with gmpy2.context(precision=prec):
        return layer_mp.forward(S, conv_method="direct")


def stack_labels(con: Construction, k: int) -> list[dict]:
    """Section / step / position of every layer of ``con.layers(k)``."""
    out = []
    for i in range(len(con.prologue)):
        out.append({"section": "prologue", "step": 0, "in_section": i})
    for s in range(1, k + 1):
        for i in range(len(con.body)):
            out.append({"section": "body", "step": s, "in_section": i})
    for i in range(len(con.epilogue)):
        out.append({"section": "epilogue", "step": k, "in_section": i})
    return out


@dataclass
class LayerLevelResult:
    dtype: str
    layers: list[dict]  # one record per layer: label + local + cumulative metrics
    digits_used: int
    problems: int
    first_nonfinite_layer: int | None = None
    weights_exact_in_dtype: bool = True
    notes: list[str] = field(default_factory=list)

    def series(self, key: str) -> np.ndarray:
        return np.array([np.nan if r.get(key) is None else r[key] for r in self.layers], dtype=np.float64)

    def to_json(self) -> dict:
        return {"dtype": self.dtype, "digits_used": self.digits_used, "problems": self.problems,
                "first_nonfinite_layer": self.first_nonfinite_layer,
                "weights_exact_in_dtype": self.weights_exact_in_dtype, "notes": self.notes,
                "layers": self.layers}


def _float_states(con, stack, S0, backend, conv_method):
    """Float run of ``stack`` from ``S0`` (``Construction.run``); float64 copies of every state."""
    S = backend.asarray(S0)
    states = [backend.to_numpy64(S)]
    bad: list[int] = []

    def on_layer(i, S):
        states.append(backend.to_numpy64(S))
        if not np.all(np.isfinite(states[-1])):
            bad.append(i)
            return True
        return False

    with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported, not warned
        con.run({}, sections=Sections(list(stack), [], []), state=S, cast=backend.cast_layer,
                conv_method=conv_method, on_layer=on_layer)
    return states, (bad[0] if bad else None)


def _exact_pass(stack, states, digits, n_layers):
    """Local and cumulative exact states at ``digits``, rounded to float64.

    Returns (local, cumulative, local_mp): lists over layers of (P, R, C)
    float64 arrays, and the local states as mpfr object arrays (for bits).
    """
    prec = working_precision(digits)
    cache: dict[int, Layer] = {}
    P = states[0].shape[0]
    local, cumul, local_mp = [], [], []
    chain = [to_mpfr_array(states[0][p], prec) for p in range(P)]
    for i in range(n_layers):
        L = stack[i]
        if id(L) not in cache:
            cache[id(L)] = mp_layer(L, prec)
        Lm = cache[id(L)]
        loc_mp = [exact_forward(Lm, states[i][p], prec) for p in range(P)]
        chain = [exact_forward(Lm, chain[p], prec) for p in range(P)]
        local_mp.append(loc_mp)
        local.append(np.stack([from_mpfr_array(m) for m in loc_mp]))
        cumul.append(np.stack([from_mpfr_array(m) for m in chain]))
    return local, cumul, local_mp


def _cast_is_exact(W, backend) -> bool:
    """Is the dtype-cast weight array equal to the exact one, entry by entry?"""
    Wf = backend.to_numpy64(backend.asarray(W)).ravel().tolist()
    try:
        return all(exact(w) == exact(f) for w, f in zip(np.asarray(W, dtype=object).ravel().tolist(), Wf))
    except ValueError:  # a weight overflowed to inf in the dtype
        return False


def _region_errors(layout, err: np.ndarray) -> dict[str, float]:
    """Largest |error| in each named region of the layout."""
    out = {}
    for name, reg in layout.regions.items():
        block = err[(...,) + reg.index]
        out[name] = float(np.max(np.abs(block))) if block.size else 0.0
    return out


def layer_level(con: Construction, v: dict, k: int, backend: Backend, *, conv_method: str = "direct",
                digits: int = 50, max_digits: int = 400, max_layers: int | None = None) -> LayerLevelResult:
    """Per-layer roundoff of ``con.layers(k)`` in ``backend`` for the problems in ``v``.

    ``v``: float64 variables (already rounded to the dtype) with a leading batch
    axis of a few problems.  ``max_layers`` caps the number of layers examined
    (the first ones of the stack).  Each layer record holds:

    * ``local_mse``, ``local_max_abs``, ``local_rel`` (normwise over the state),
      ``local_bits_mean`` / ``local_bits_max`` (bits of error against the exact
      output correctly rounded to the dtype), ``local_worst_region``;
    * ``cumulative_mse``, ``cumulative_rel``, ``cumulative_x_mse`` (the iterate x
      as ``con.readout`` reads it, comparable with the algorithm-level MSE at
      body ends).
    """
    stack = con.layers(k)
    if max_layers is not None:
        stack = stack[:max_layers]
    labels = stack_labels(con, k)[:len(stack)]
    S0 = con.input_state(v)
    states, bad = _float_states(con, stack, S0, backend, conv_method)
    n_layers = len(states) - 1
    if bad is not None:
        n_layers = bad  # the layer that produced a non-finite value is not compared

    # precision raised until every rounded exact state is stable
    d = digits
    prev = _exact_pass(stack, states, d, n_layers)
    while True:
        if d >= max_digits:
            raise RuntimeError(f"layer reference still changing at {max_digits} digits")
        d_next = min(2 * d, max_digits)
        cur = _exact_pass(stack, states, d_next, n_layers)
        same = all(np.array_equal(a, b, equal_nan=True) for a, b in zip(prev[0] + prev[1], cur[0] + cur[1]))
        prev, d = cur, d_next
        if same:
            break
    local, cumul, local_mp = prev

    # are the cast weights the exact weights? (dyadic weights are, e.g. eta = 1/16)
    exact_w = all(_cast_is_exact(W, backend) for L in {id(L): L for L in stack}.values()
                  for W in L.arrays().values())

    lay = con.layout
    records = []
    for i in range(n_layers):
        out_f = states[i + 1]
        err = out_f - local[i]
        bits = np.concatenate([error_measures.bits_of_error(out_f[p], local_mp[i][p], backend.dtype).ravel()
                               for p in range(out_f.shape[0])])
        regs = _region_errors(lay, err)
        worst = max(regs, key=regs.get) if any(v > 0 for v in regs.values()) else None
        rec = dict(labels[i])
        rec.update({
            "layer": i,
            "local_mse": float(error_measures.mse(out_f, local[i])),
            "local_max_abs": float(np.max(np.abs(err))),
            "local_rel": float(np.max(error_measures.normwise_rel_err(out_f, local[i], axis=(-2, -1)))),
            "local_bits_mean": float(np.mean(bits)),
            "local_bits_max": float(np.max(bits)),
            "local_worst_region": worst,
            "local_region_max_abs": regs,
            "cumulative_mse": float(error_measures.mse(out_f, cumul[i])),
            "cumulative_rel": float(np.max(error_measures.normwise_rel_err(out_f, cumul[i], axis=(-2, -1)))),
            "cumulative_x_mse": float(error_measures.mse(con.readout(out_f)["x"], con.readout(cumul[i])["x"])),
        })
        records.append(rec)
    notes = []
    if not exact_w:
        notes.append(f"some weights are not representable in {backend.dtype}: the local error includes "
                     "their rounding (the reference uses the exact weights)")
    if max_layers is not None and max_layers < len(con.layers(k)):
        notes.append(f"first {max_layers} of {len(con.layers(k))} layers examined")
    return LayerLevelResult(dtype=backend.dtype, layers=records, digits_used=d, problems=S0.shape[0],
                            first_nonfinite_layer=bad, weights_exact_in_dtype=exact_w, notes=notes)


def summarize(res: LayerLevelResult, con: Construction) -> dict:
    """Local error per position inside the body (averaged over steps): which
    layer of a step commits the roundoff, and into which region."""
    per = len(con.body)
    out = {}
    for j in range(per):
        recs = [r for r in res.layers if r["section"] == "body" and r["in_section"] == j]
        if not recs:
            continue
        regions: dict[str, int] = {}
        for r in recs:
            if r["local_worst_region"]:
                regions[r["local_worst_region"]] = regions.get(r["local_worst_region"], 0) + 1
        out[f"body[{j}]"] = {
            "mean_local_mse": float(np.mean([r["local_mse"] for r in recs])),
            "mean_local_bits": float(np.mean([r["local_bits_mean"] for r in recs])),
            "max_local_bits": float(np.max([r["local_bits_max"] for r in recs])),
            "worst_regions": regions,
        }
    for sec in ("prologue", "epilogue"):
        recs = [r for r in res.layers if r["section"] == sec]
        if recs:
            out[sec] = {"mean_local_mse": float(np.mean([r["local_mse"] for r in recs])),
                        "max_local_bits": float(np.max([r["local_bits_max"] for r in recs])),
                        "worst_regions": {r["local_worst_region"]: 1 for r in recs if r["local_worst_region"]}}
    return out
