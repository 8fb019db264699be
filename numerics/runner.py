"""Run a construction numerically, streaming over depth.

``run_construction`` applies prologue + body^k + epilogue to a batch of
problems in a backend/dtype, keeping only what the metrics need (the carried
variables read out after each body repetition), so depth costs time, not
memory.  It reports the first layer whose output holds a non-finite value
instead of failing.  ``plain_gd`` runs the same algorithm directly in the
same dtype, the baseline for the construction's extra error.  ``gd_accuracy``
compares both with the exact-GD reference step by step, advancing all three in
lockstep (``stream_construction``, ``plain_gd_iter``,
``numerics.reference.gd_reference_iter``) and keeping one row of floats per step.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator

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


@dataclass
class StreamResult:
    """What :func:`stream_construction` returns: everything but the iterates (given to ``on_x``)."""
    steps_run: int  # how many x (j = 0, 1, ...) were passed to on_x: k + 1 unless stopped early
    prediction: np.ndarray | None
    first_nonfinite_layer: int | None = None
    layers_run: int = 0


def stream_construction(con: Construction, v: dict[str, np.ndarray], k: int, backend: Backend,
                        on_x: Callable[[int, np.ndarray], None], *, conv_method: str = "direct", progress=None,
                        sections: dict | None = None) -> StreamResult:
    """Run the construction, handing ``on_x(j, x)`` the carried ``x`` (float64, (B, D)) after
    the prologue (j = 0) and after each body repetition j, and keeping none of them: memory is
    flat in ``k``.  The run stops after the body copy holding the first non-finite value (so
    ``on_x`` sees fewer than ``k + 1`` steps).  Arguments as :func:`run_construction`."""
    secs = con.sections(k) if sections is None else Sections(sections["prologue"], sections["bodies"],
                                                                 sections["epilogue"])
    bad: list[int] = []
    seen = [0]

    def on_nonfinite(i, S):  # the first non-finite layer; the run stops after that body copy
        bad.append(i)

    def on_step(j, S):
        on_x(j, np.array(backend.to_numpy64(con.readout(S)["x"])))  # a copy: the run reuses the state's memory
        seen[0] += 1
        if j and progress is not None:
            progress.update(1)
        return bool(bad)

    with np.errstate(all="ignore"):  # overflow is reported as the first non-finite layer
        S, done = con.run(v, k, sections=secs, state=backend.asarray(con.input_state(v)),
                          cast=backend.cast_layer, conv_method=conv_method, on_nonfinite=on_nonfinite,
                          on_step=on_step)
    pred = None if bad else backend.to_numpy64(con.readout(S)["prediction"])
    return StreamResult(steps_run=seen[0], prediction=pred, first_nonfinite_layer=bad[0] if bad else None,
                        layers_run=done)


def run_construction(con: Construction, v: dict[str, np.ndarray], k: int, backend: Backend, *,
                     conv_method: str = "direct", progress=None, sections: dict | None = None) -> RunResult:
    """``v``: float64 variables with a leading batch axis (already rounded to the dtype).

    ``sections`` replaces the construction's layers (e.g. a user's weight
    file): ``{"prologue": [...], "bodies": [[...] per step], "epilogue": [...]}``.
    Keeps every step's ``x`` (NaN-padded after a non-finite stop); :func:`stream_construction`
    is the same run keeping none.
    """
    xs: list[np.ndarray] = []
    res = stream_construction(con, v, k, backend, lambda j, x: xs.append(x), conv_method=conv_method,
                              progress=progress, sections=sections)
    x = np.stack(xs)
    if x.shape[0] < k + 1:  # stopped at a non-finite value: pad with NaN
        pad = np.full((k + 1 - x.shape[0],) + x.shape[1:], np.nan)
        x = np.concatenate([x, pad])
    return RunResult(x=x, prediction=res.prediction, first_nonfinite_layer=res.first_nonfinite_layer,
                     layers_run=res.layers_run)


def plain_gd_iter(A, b, x0, eta: float, k: int, backend: Backend, lam: float = 0.0) -> Iterator[np.ndarray]:
    """The iterates x_0..x_k (float64 copies) of :func:`plain_gd`, one at a time (memory flat in k)."""
    At, bt, x = backend.asarray(A), backend.asarray(b), backend.asarray(x0)
    etat = backend.asarray(np.float64(eta))
    lamt = backend.asarray(np.float64(lam))
    ein = backend.einsum
    yield backend.to_numpy64(x)
    for _ in range(k):
        with np.errstate(all="ignore"):
            r = ein("bij,bj->bi", At, x) - bt
            g = ein("bij,bi->bj", At, r)
            if lam:
                g = g + lamt * x
            x = x - etat * g
        yield backend.to_numpy64(x)


def plain_gd(A, b, x0, eta: float, k: int, backend: Backend, lam: float = 0.0) -> np.ndarray:
    """``x <- x - eta (A^T (A x - b) + lam x)`` run directly in ``backend``'s dtype."""
    return np.stack(list(plain_gd_iter(A, b, x0, eta, k, backend, lam=lam)))


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
    in the same dtype.  Returns ``(dtype summary, one row per step)``.

    Streams: the reference (:func:`numerics.reference.gd_reference_iter`) and plain GD
    (:func:`plain_gd_iter`) are advanced in lockstep with the construction's run
    (:func:`stream_construction`), and each step is reduced to its row of a few floats at
    once, so no iterate of any step is kept (memory flat in ``k``).  The numbers are those
    of comparing the full arrays of :func:`gd_reference`, :func:`run_construction` and
    :func:`plain_gd`.  ``seconds_reference`` is the time spent computing the reference,
    ``seconds_run`` the construction's run without the reference, plain GD and the rows."""
    import time

    from .reference import gd_reference_iter, lstsq_solution

    clock = time.perf_counter
    t0 = clock()
    ref_it = gd_reference_iter(v["A"], v["b"], v["x"], eta, k, digits=digits, lam=lam)
    t_ref = clock() - t0
    xstar = lstsq_solution(v["A"], v["b"], lam=lam)
    plain_it = plain_gd_iter(v["A"], v["b"], v["x"], float(eta), k, backend, lam=float(lam))

    def mse(u, w):
        # a diverging run overflows here to inf: that is its MSE (the run reports its first non-finite layer)
        with np.errstate(over="ignore", invalid="ignore"):
            return float(np.mean((u - w) ** 2))

    rows: list[dict] = []
    ref_last = [None]  # the reference's last iterate (the prediction's x_k)
    t_aside = [0.0]  # time in on_x: not the construction's run

    def compare(j, x):
        nonlocal t_ref
        t0 = clock()
        ref = next(ref_it)
        t1 = clock()
        t_ref += t1 - t0
        plain = next(plain_it)
        ref_last[0] = ref
        if j:
            m_c, m_p = mse(x, ref), mse(plain, ref)
            rows.append({"dtype": backend.dtype, "step": j, "depth": con.depth(j), "mse_vs_exact_gd": m_c,
                         "mse_vs_solution": mse(x, xstar), "plain_gd_mse_vs_exact_gd": m_p,
                         "construction_overhead": (m_c / m_p) if m_p > 0 else None})
        t_aside[0] += clock() - t0

    t0 = clock()
    res = stream_construction(con, v, k, backend, compare, conv_method=conv_method, progress=progress,
                              sections=sections)
    t_run = clock() - t0 - t_aside[0]
    if res.steps_run < k + 1:  # stopped at a non-finite value: the rest of the steps compare NaN
        nan = np.full_like(ref_last[0], np.nan)
        for j in range(res.steps_run, k + 1):
            compare(j, nan)

    pred_ref = np.einsum("bd,bd->b", v["q"], ref_last[0])
    summary = {"dtype": backend.dtype, "backend": backend.name, "conv": conv_method, "steps": k,
               "first_nonfinite_layer": res.first_nonfinite_layer, "seconds_run": t_run, "seconds_reference": t_ref,
               "prediction_mse_vs_exact": None if res.prediction is None else mse(res.prediction, pred_ref)}
    return summary, rows
