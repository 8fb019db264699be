"""The prefix-coupled iteration: what seed 000's non-causal GD layers compute under causal convolution.

Seed 000 App. D.3.1 builds one GD step from three BaseConv layers whose third layer sums the
per-token gradients ``r_i a_i`` over all tokens with an all-ones filter, which is a sum over
every token only under *circular* convolution (eq. (46)).  Run through *causal* convolutions
(as precision-ls's ``notebooks/baseconv_construction.ipynb`` does, ``causal=True``), the same
filter is a running (prefix) sum, and token ``t`` receives only the gradients of tokens ``<= t``.
Because ``x`` is stored at every token and the next step's residuals ``a_i^T x_i - b_i`` read
each token's own copy, the tokens' iterates drift apart after the first step.  The stack then
computes exactly this iteration, with one iterate ``X[t]`` per token:

    X[t] <- X[t] - eta * sum_{i <= t} (a_i^T X[i] - b_i) a_i        (t = 0 .. N; a_N = 0, b_N = 0)

From equal iterates ``X[t] = x`` the last token's ``X[N]`` after one step is one GD step
(seed 000 eq. (3)); from the second step on it is not (``verify.importers`` refutes the GD
specification for such weights and proves this one).

``prefix-coupled`` (catalogue entry; ``verify.construct import --spec prefix-coupled``): the
layers of ``gd-baseconv`` with every convolution causal, proved against the iteration above at
every depth (state as ``gd-baseconv``'s, region ``x`` holding ``X[t]`` at token ``t``; the
epilogue writes ``q^T X[N]`` at the query token).  Intermediate states after body layers 1 and
2 as ``gd-baseconv``'s, with ``X[i]`` in place of ``x``.
"""
from __future__ import annotations

import functools

from dataclasses import replace

import numpy as np

from constructions.base import Construction, batch_ndim, exact, new_state
from constructions.gd_baseconv import body_intermediate_states, gd_baseconv
from constructions.lsq import dot

from . import CatalogueEntry, register

REFERENCE = ("seed 000 App. D.3.1 eq. (46) layers under causal convolution (precision-ls "
             "notebooks/baseconv_construction.ipynb): per-token iterates, causal running sum of the gradients")


class PrefixCoupled(Construction):
    """Variables ``A`` (N, D), ``b`` (N,), ``X`` (N+1, D) one iterate per token, ``q`` (D,)."""

    def _residuals(self, v):
        """``r_i = a_i^T X[i] - b_i`` for the N data tokens (the query token has a = 0, b = 0)."""
        n, d = self.variables["A"]
        A, X, b = np.asarray(v["A"]), np.asarray(v["X"]), np.asarray(v["b"])
        if A.dtype == object:
            return np.array([dot(A[i], X[i]) - b[i] for i in range(n)], dtype=object)
        return np.einsum("...id,...id->...i", A, X[..., :n, :]) - b

    def state(self, v):
        n, d = self.variables["A"]
        lay = self.layout
        S = new_state(lay, np.asarray(v["A"]), batch_ndim(v, self.variables))
        S[(...,) + (slice(0, n), slice(*lay["a"].cols))] = v["A"]
        S[(...,) + (slice(0, n), slice(*lay["b"].cols))] = np.asarray(v["b"])[..., None]
        S[(...,) + (n, slice(*lay["q"].cols))] = v["q"]
        S[(...,) + (slice(0, n + 1), slice(*lay["x"].cols))] = v["X"]
        return S

    def input_state(self, v):
        return self.state(v)

    def final_state(self, v):
        S = self.state(v)
        n = self.variables["A"][0]
        S[(...,) + (n, self.layout["y"].cols[0])] = dot(v["q"], np.asarray(v["X"])[..., n, :])
        return S

    def step(self, v):
        n, d = self.variables["A"]
        A, X = np.asarray(v["A"]), np.asarray(v["X"])
        g = self._residuals(v)[..., :, None] * A  # r_i a_i, (.., N, D)
        eta = self.params["eta"]
        out = dict(v)
        if A.dtype == object:
            run, newX = None, np.empty(X.shape, dtype=object)
            for t in range(n + 1):
                if t < n:
                    run = g[t] if run is None else run + g[t]
                newX[t] = X[t] - run * eta
            out["X"] = newX
        else:
            cs = np.cumsum(g, axis=-2)
            cs = np.concatenate([cs, cs[..., -1:, :]], axis=-2)
            out["X"] = X - eta * cs
        return out

    def intermediate_states(self, v, section):
        if section != "body":
            return None
        return body_intermediate_states(self, v, self._residuals(v))

    def readout(self, state):
        n = self.variables["A"][0]
        return {"X": state[..., :, slice(*self.layout["x"].cols)],
                "prediction": state[..., n, self.layout["y"].cols[0]]}


def prefix_coupled(n: int = 20, d: int = 5, *, eta=None) -> PrefixCoupled:
    """``gd-baseconv``'s layers, every convolution causal (see the module docstring)."""
    eta = exact("1/16") if eta is None else (exact(eta) if isinstance(eta, (str, int, float)) else eta)
    base = gd_baseconv(n, d, eta=eta)
    causal = lambda L: replace(L, causal=True)  # noqa: E731
    return PrefixCoupled(
        name="prefix-coupled", reference=REFERENCE, layout=base.layout, prologue=[],
        body=[causal(L) for L in base.body], epilogue=[causal(L) for L in base.epilogue], params={"eta": eta},
        variables={"A": (n, d), "b": (n,), "X": (n + 1, d), "q": (d,)}, carried=("X",),
        rebuild=functools.partial(prefix_coupled, n, d), symbolic_params=("eta",),
        notes="gd-baseconv's weights with causal convolutions; one iterate per token")


register(CatalogueEntry(
    name="prefix-coupled", paper=REFERENCE, build=prefix_coupled, sizes={"n": 6, "d": 2},
    summary="gd-baseconv's layers under causal convolution = per-token iterates with a causal running sum "
            "(not GD from the second step on)",
    claim="what precision-ls's BaseConv GD notebook computes (causal=True): proved at every depth"))
