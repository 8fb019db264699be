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

from constructions.base import Construction

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
    if sections is None:
        sections = {"prologue": con.prologue, "bodies": [con.body] * k, "epilogue": con.epilogue}
    cache: dict[int, object] = {}

    def cast(L):  # each distinct layer is cast once
        if id(L) not in cache:
            cache[id(L)] = backend.cast_layer(L)
        return cache[id(L)]

    with np.errstate(all="ignore"):  # overflow is reported as the first non-finite layer
        return _stream(con, v, k, backend, sections, cast, conv_method, progress)


def _stream(con, v, k, backend, sections, cast, conv_method, progress) -> RunResult:
    S = backend.asarray(con.input_state(v))
    xs = []
    layer = 0
    first_bad = None

    def apply(layers):
        nonlocal S, layer, first_bad
        for L in layers:
            S = cast(L).forward(S, conv_method=conv_method)
            if first_bad is None and not backend.isfinite_all(S):
                first_bad = layer
            layer += 1

    apply(sections["prologue"])
    xs.append(backend.to_numpy64(con.readout(S)["x"]))
    for body in sections["bodies"][:k]:
        apply(body)
        xs.append(backend.to_numpy64(con.readout(S)["x"]))
        if progress is not None:
            progress.update(1)
        if first_bad is not None:
            break
    pred = None
    if first_bad is None:
        apply(sections["epilogue"])
        pred = backend.to_numpy64(con.readout(S)["prediction"])
    x = np.stack(xs)
    if x.shape[0] < k + 1:  # stopped at a non-finite value: pad with NaN
        pad = np.full((k + 1 - x.shape[0],) + x.shape[1:], np.nan)
        x = np.concatenate([x, pad])
    return RunResult(x=x, prediction=pred, first_nonfinite_layer=first_bad, layers_run=layer)


def plain_gd(A, b, x0, eta: float, k: int, backend: Backend, lam: float = 0.0) -> np.ndarray:
    """``x <- x - eta (A^T (A x - b) + lam x)`` run directly in ``backend``'s dtype."""
    At, bt, x = backend.asarray(A), backend.asarray(b), backend.asarray(x0)
    etat = backend.asarray(np.float64(eta))
    lamt = backend.asarray(np.float64(lam))
    out = [backend.to_numpy64(x)]
    if backend.name == "torch":
        import torch

        ein = torch.einsum
    else:
        ein = backend.xp.einsum
    with np.errstate(all="ignore"):
        for _ in range(k):
            r = ein("bij,bj->bi", At, x) - bt
            g = ein("bij,bi->bj", At, r)
            if lam:
                g = g + lamt * x
            x = x - etat * g
            out.append(backend.to_numpy64(x))
    return np.stack(out)
