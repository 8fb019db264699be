"""Trainable single-head linear transformers in seed 004's token form (Full, Diag, GD++).

Tokens are the rows of ``E`` ((n+1) x (d+1)): context ``(x_i, y_i)``, then the query
``(x_t, 0)``; keys and values are the n context tokens only; every token is updated;
the prediction is ``-y_t^L`` (seed 004 Sec. 2, eq. (2)-(3)).
Each layer is :class:`constructions.layers.TokenLSA` built over this module's
parameters and *its* ``forward`` runs on torch tensors (one definition of the math):

* ``full``  P, Q full (d+1) x (d+1) matrices per layer;
* ``diag``  eq. (8): ``P = diag(p_x I_d, p_y)``, ``Q = diag(q_x I_d, q_y)``: 4 numbers per
  layer (the tied form the experiments cite as eq. (10));
* ``gdpp``  eq. (11): the Diag form with ``q_y = 0``: 3 numbers per layer.

``warm="gdpp"`` starts every layer at the toolkit's exact GD++ layer
(``constructions.catalogue.seed004_token_gd.gdpp_heads``: Diag ``(-gamma, -eta, 1, 0)``),
``warm="gd"`` at the exact GD layer (``gd_heads``: ``(0, -eta, 1, 0)``); a Full model takes
the same weights written as full matrices.  ``init_std`` adds Gaussian noise of that size to
every free parameter (for ``diag``/``full`` this is what lets the noise-dependent terms
``q_y``, off-diagonal blocks leave zero).  :meth:`toolkit_layers` / :func:`export_token_model`
write the learned weights as ``token_lsa`` layers in the toolkit's weight format
(``verify.compare`` reads them against ``s004-gd`` / ``s004-gdpp``).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from constructions import layers as L

VARIANTS = ("full", "diag", "gdpp")
WARM = ("none", "gd", "gdpp")


class TokenLinearTransformer(nn.Module):
    """``layers`` single-head token-form LSA layers of one ``variant`` (module docstring)."""

    def __init__(self, d: int, layers: int, variant: str = "diag", *, warm: str = "gdpp", eta: float = 0.05,
                 gamma: float = 0.01, init_std: float = 0.01, seed: int = 0):
        super().__init__()
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, not {variant!r}")
        if warm not in WARM:
            raise ValueError(f"warm must be one of {', '.join(WARM)}, not {warm!r}")
        self.d, self.n_layers, self.variant = d, layers, variant
        g = torch.Generator().manual_seed(seed)
        base = warm_start(warm, d, eta, gamma)
        noise = lambda *shape: torch.randn(*shape, generator=g, dtype=torch.float64) * init_std  # noqa: E731
        if variant == "full":
            P0 = torch.diag(torch.tensor([base[0]] * d + [base[1]], dtype=torch.float64))
            Q0 = torch.diag(torch.tensor([base[2]] * d + [base[3]], dtype=torch.float64))
            self.P = nn.Parameter(P0.expand(layers, d + 1, d + 1) + noise(layers, d + 1, d + 1))
            self.Q = nn.Parameter(Q0.expand(layers, d + 1, d + 1) + noise(layers, d + 1, d + 1))
        else:
            k = 4 if variant == "diag" else 3
            self.theta = nn.Parameter(torch.tensor(base[:k], dtype=torch.float64).expand(layers, k) + noise(layers, k))

    # ------------------------------------------------------------------ the weights as (P, Q)
    def heads(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer the (P, Q) matrices of eq. (2), as torch tensors of this module."""
        if self.variant == "full":
            return [(self.P[i], self.Q[i]) for i in range(self.n_layers)]
        out = []
        ones = torch.ones(self.d, dtype=self.theta.dtype, device=self.theta.device)
        for i in range(self.n_layers):
            t = self.theta[i]
            px, py, qx = t[0], t[1], t[2]
            qy = t[3] if self.variant == "diag" else torch.zeros((), dtype=t.dtype, device=t.device)
            out.append((torch.diag(torch.cat([ones * px, py[None]])), torch.diag(torch.cat([ones * qx, qy[None]]))))
        return out

    def layer(self, i: int) -> L.TokenLSA:
        P, Q = self.heads()[i]
        return L.TokenLSA([L.TokenLSAHead(P, Q)], exclude_last=True, residual=True)

    def forward(self, E, *, every_layer: bool = False):
        """The final tokens (or, with ``every_layer``, the list of states after each layer)."""
        states = []
        for P, Q in self.heads():
            E = L.TokenLSA([L.TokenLSAHead(P, Q)], exclude_last=True, residual=True).forward(E)
            states.append(E)
        return states if every_layer else E

    def predict(self, E):
        """``-y_t^L``: minus the last coordinate of the last token (seed 004 Sec. 2)."""
        return -self.forward(E)[..., -1, -1]

    # ------------------------------------------------------------------ what was learned
    def omegas(self) -> list[dict]:
        """Per layer the four omegas of eq. (9) of the diagonal part of (P, Q) (for ``full``: of
        diag(P), diag(Q) averaged over the x coordinates), and for ``full`` the size of what is off
        that tied diagonal form (Frobenius norm of P, Q minus their tied-diagonal projection)."""
        out = []
        with torch.no_grad():
            for P, Q in self.heads():
                P, Q = P.double().cpu(), Q.double().cpu()
                px, py = float(torch.diagonal(P)[:-1].mean()), float(P[-1, -1])
                qx, qy = float(torch.diagonal(Q)[:-1].mean()), float(Q[-1, -1])
                rec = {"xx": px * qx, "xy": px * qy, "yx": py * qx, "yy": py * qy}
                if self.variant == "full":
                    tied = lambda a, b: torch.diag(torch.tensor([a] * self.d + [b], dtype=torch.float64))  # noqa: E731
                    rec["off_tied_P"] = float(torch.linalg.norm(P - tied(px, py)))
                    rec["off_tied_Q"] = float(torch.linalg.norm(Q - tied(qx, qy)))
                    rec["norm_P"], rec["norm_Q"] = float(torch.linalg.norm(P)), float(torch.linalg.norm(Q))
                out.append(rec)
        return out

    def toolkit_layers(self) -> list[L.TokenLSA]:
        """The layers as ``constructions.layers.TokenLSA`` over float64 numpy arrays."""
        with torch.no_grad():
            return [L.TokenLSA([L.TokenLSAHead(_np(P), _np(Q))], exclude_last=True, residual=True)
                    for P, Q in self.heads()]


def warm_start(warm: str, d: int, eta: float, gamma: float) -> tuple[float, float, float, float]:
    """The warm-start point as Diag numbers ``(p_x, p_y, q_x, q_y)`` (eq. (8)): read off the
    catalogue's exact GD / GD++ layer (``gd_heads`` / ``gdpp_heads`` of
    ``constructions.catalogue.seed004_token_gd``) at these ``eta``, ``gamma``; zeros for ``none``."""
    if warm == "none":
        return (0.0, 0.0, 0.0, 0.0)
    from constructions.catalogue.seed004_token_gd import gd_heads, gdpp_heads

    (head,) = gd_heads(d, eta) if warm == "gd" else gdpp_heads(d, gamma, eta)
    P, Q = np.asarray(head.P, dtype=object), np.asarray(head.Q, dtype=object)
    return tuple(float(x) for x in (P[0, 0], P[d, d], Q[0, 0], Q[d, d]))


def _np(t) -> np.ndarray:
    return np.ascontiguousarray(t.detach().to("cpu", torch.float64).numpy())


def export_token_model(model: TokenLinearTransformer, path, *, notes: dict | None = None) -> Path:
    """Write the learned layers in the toolkit's weight format (``numerics.training.export_weights``:
    tensors ``layers.{i}.head0.P`` / ``.Q``, float64; kind ``token_lsa``)."""
    from .modules import export_weights

    return export_weights(model, path, name=f"trained-token-{model.variant}",
                          notes={"variant": model.variant, "layers": model.n_layers, "d": model.d,
                                 "readout": "-E[n, d] (minus the last coordinate of the query token)",
                                 **(notes or {})})


def tokens_torch(X, y, xt, dtype=torch.float64) -> torch.Tensor:
    """``E`` (B, n+1, d+1) from numpy X (B, n, d), y (B, n), xt (B, d): rows (x_i, y_i), then (x_t, 0)."""
    B, n, d = X.shape
    E = np.zeros((B, n + 1, d + 1))
    E[:, :n, :d], E[:, :n, d], E[:, n, :d] = X, y, xt
    return torch.as_tensor(E, dtype=dtype)


def describe(model: TokenLinearTransformer) -> dict:
    return {"variant": model.variant, "layers": model.n_layers, "d": model.d,
            "params": sum(p.numel() for p in model.parameters()), "omegas": model.omegas()}


__all__ = ["TokenLinearTransformer", "export_token_model", "tokens_torch", "describe", "VARIANTS", "WARM"]
