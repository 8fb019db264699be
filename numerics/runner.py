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
