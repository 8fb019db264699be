"""Run a construction numerically, streaming over depth.

``run_construction`` applies prologue + body^k + epilogue to a batch of
problems in a backend/dtype, keeping only what the metrics need (the carried
variables read out after each body repetition), so depth costs time, not
memory.  It reports the first layer whose output holds a non-finite value
instead of failing.  ``plain_gd`` runs the same algorithm directly in the
same dtype, the baseline for the construction's extra error.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from constructions.base import Construction, Sections

from .backends import Backend


@dataclass
class RunResult:
    x: np.ndarray  # (k+1, B, D) float64: x after the prologue and after each body
    prediction: np.ndarray | None  # (B,) after the epilogue, None if not reached
    first_nonfinite_layer: int | None = None
    layers_run: int = 0
    meta: dict = field(default_factory=dict)


def run_construction(con: Construction, v: dict[str, np.ndarray], k: int, backend: Backend, *,
                     conv_method: str = "direct", progress=None, sections: dict | None = None) -> RunResult:
    """``v``: float64 variables with a leading batch axis (already rounded to the dtype).

    ``sections`` replaces the construction's layers (e.g. a user's weight
    file): ``{"prologue": [...], "bodies": [[...] per step], "epilogue": [...]}``.
    """
    secs = con.sections(k) if sections is None else Sections(sections["prologue"], sections["bodies"],
                                                                 sections["epilogue"])
    xs: list[np.ndarray] = []
    bad: list[int] = []

    def on_layer(i, S):  # the first non-finite layer; the run stops after that body copy
        if not bad and not backend.isfinite_all(S):
            bad.append(i)

    def on_step(j, S):
        xs.append(backend.to_numpy64(con.readout(S)["x"]))
        if j and progress is not None:
            progress.update(1)
        return bool(bad)

    with np.errstate(all="ignore"):  # overflow is reported as the first non-finite layer
        S, done = con.run(v, k, sections=secs, state=backend.asarray(con.input_state(v)),
                          cast=backend.cast_layer, conv_method=conv_method, on_layer=on_layer, on_step=on_step)
    pred = None if bad else backend.to_numpy64(con.readout(S)["prediction"])
    x = np.stack(xs)
    if x.shape[0] < k + 1:  # stopped at a non-finite value: pad with NaN
        pad = np.full((k + 1 - x.shape[0],) + x.shape[1:], np.nan)
        x = np.concatenate([x, pad])
    return RunResult(x=x, prediction=pred, first_nonfinite_layer=bad[0] if bad else None, layers_run=done)


def plain_gd(A, b, x0, eta: float, k: int, backend: Backend, lam: float = 0.0) -> np.ndarray:
    """``x <- x - eta (A^T (A x - b) + lam x)`` run directly in ``backend``'s dtype."""
    At, bt, x = backend.asarray(A), backend.asarray(b), backend.asarray(x0)
    etat = backend.asarray(np.float64(eta))
    lamt = backend.asarray(np.float64(lam))
    out = [backend.to_numpy64(x)]
    ein = backend.einsum
    with np.errstate(all="ignore"):
        for _ in range(k):
            r = ein("bij,bj->bi", At, x) - bt
            g = ein("bij,bi->bj", At, r)
            if lam:
                g = g + lamt * x
            x = x - etat * g
            out.append(backend.to_numpy64(x))
    return np.stack(out)


def rounded_inputs(A, b, x0, q, backends) -> list[tuple[Backend, dict]]:
    """The problems rounded once to each backend's dtype (as float64 arrays); a
    ValueError names a dtype the problems overflow (refused before any run)."""
    out = []
    for be in backends:
        v = {"A": be.round_input(A), "b": be.round_input(b), "x": be.round_input(x0), "q": be.round_input(q)}
        for name, arr in v.items():
            if not np.isfinite(arr).all():
                raise ValueError(f"{be.dtype}: the sampled problems overflow it in {name} (max |entry| "
                                 f"{float(np.max(np.abs({'A': A, 'b': b, 'x': x0, 'q': q}[name]))):.3g})")
        out.append((be, v))
    return out


def gd_accuracy(con: Construction, k: int, v: dict, backend: Backend, eta, lam=0, *, digits: int = 50,
                conv_method: str = "direct", sections: dict | None = None, progress=None) -> tuple[dict, list[dict]]:
    """Run the construction (or ``sections``) for ``k`` steps on the rounded problems
    ``v`` and compare every GD step with a ``digits``-digit reference of exact GD
    from the same inputs, with the least-squares solution, and with plain GD run
    in the same dtype.  Returns ``(dtype summary, one row per step)``."""
    import time

    from .reference import gd_reference, lstsq_solution

    t0 = time.perf_counter()
    ref = gd_reference(v["A"], v["b"], v["x"], eta, k, digits=digits, lam=lam)
    t_ref = time.perf_counter() - t0
    xstar = lstsq_solution(v["A"], v["b"], lam=lam)
    t0 = time.perf_counter()
    res = run_construction(con, v, k, backend, conv_method=conv_method, progress=progress, sections=sections)
    t_run = time.perf_counter() - t0
    plain = plain_gd(v["A"], v["b"], v["x"], float(eta), k, backend, lam=float(lam))

    def mse(u, w):
        return float(np.mean((u - w) ** 2))

    pred_ref = np.einsum("bd,bd->b", v["q"], ref[-1])
    summary = {"dtype": backend.dtype, "backend": backend.name, "conv": conv_method, "steps": k,
               "first_nonfinite_layer": res.first_nonfinite_layer, "seconds_run": t_run, "seconds_reference": t_ref,
               "prediction_mse_vs_exact": None if res.prediction is None else mse(res.prediction, pred_ref)}
    rows = []
    for j in range(1, k + 1):
        m_c, m_p = mse(res.x[j], ref[j]), mse(plain[j], ref[j])
        rows.append({"dtype": backend.dtype, "step": j, "depth": con.depth(j), "mse_vs_exact_gd": m_c,
                     "mse_vs_solution": mse(res.x[j], xstar), "plain_gd_mse_vs_exact_gd": m_p,
                     "construction_overhead": (m_c / m_p) if m_p > 0 else None})
    return summary, rows
