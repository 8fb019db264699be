"""A 3-layer BaseConv that computes the explicit least-squares gradient in the *token format of
the training task* (``numerics.training.tasks``, seed 000 App. B.3.3, eq. (5)/(46)).

Seed 000 Sec. 5 trains a 3-layer BaseConv (App. B.1 Table 2) to output
``grad L(x0) = (1/N) A^T (A x0 - b)`` at the query token.  This module sets those weights by hand,
in the same parameterisation as ``numerics.training.SequenceModel`` (linear embedding, three
residual BaseConv blocks ``u + BaseConv(u)`` with (T, C) bias matrices, linear read-out), which
shows the target is exactly realisable by the trained architecture and gives
``verify.compare`` a constructed model to compare trained ones with
(``numerics.training.modules.save_token_gradient`` writes it as a SequenceModel export).

Tokens (T = N + 1, 2D + 2 features): data ``[a_i | b_i | 0 | 0]``, query ``[0 | 0 | x0 | 1]``.
Channels (width 5D + 2): ``a`` (D), ``b`` (1), ``x`` (D), ``m`` (query marker), then scratch
``p``, ``r``, ``g`` (D each).  Every bias is zero.

1. ``p_j += a_ij x0_j``: gate ``a_j``, convolution branch ``x_j`` summed over all tokens (the
   all-ones circular filter broadcasts x0 from the query token).
2. ``r_j += a_ij r_i`` with ``r_i = sum_k p_ik - b_i``: gate ``a_j``, branch ``sum_k p_k - b`` with the
   identity filter (lag 0).
3. ``g_j += (1/N) sum_i a_ij r_i`` at the query token: gate the marker ``m``, branch ``r_j`` summed
   over all tokens, ``W_out = (1/N) I``.

Read-out: the ``g`` channels.  At the query token a = 0, so the scratch channels stay 0 there
until step 3.  The exact polynomial identity is checked by ``verify.compare``'s polynomial view
(tests/constructions/test_token_gradient.py).
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from . import ops
from .layers import BaseConv


def _zeros(*shape) -> np.ndarray:
    return ops.zeros_like_object(shape)  # the int 0: the structural zero the exact operations skip


def token_gradient_weights(n: int, d: int) -> dict:
    """``{"embed": (C, 2D+2), "layers": [BaseConv] * 3, "readout": (D, C)}``, exact Fractions;
    the layers are residual (``u + BaseConv(u)``), C = 5D + 2, T = N + 1."""
    if n < 1 or d < 1:
        raise ValueError(f"need N >= 1 and D >= 1, got N={n}, D={d}")
    T, C = n + 1, 5 * d + 2
    a = list(range(d))
    b = d
    x = list(range(d + 1, 2 * d + 1))
    m = 2 * d + 1
    p = list(range(2 * d + 2, 3 * d + 2))
    r = list(range(3 * d + 2, 4 * d + 2))
    g = list(range(4 * d + 2, 5 * d + 2))
    embed = _zeros(C, 2 * d + 2)
    for f in range(2 * d + 2):
        embed[f, f] = Fraction(1)
    readout = _zeros(d, C)
    for j in range(d):
        readout[j, g[j]] = Fraction(1)

    def layer():
        return {k: _zeros(C, C) if k.startswith("W") else _zeros(T, C) for k in BaseConv.array_fields}

    L1, L2, L3 = layer(), layer(), layer()
    for j in range(d):
        L1["W_in"][x[j], p[j]] = 1
        L1["h"][:, p[j]] = 1
        L1["W_gate"][a[j], p[j]] = 1
        L1["W_out"][p[j], p[j]] = 1
        for k in range(d):
            L2["W_in"][p[k], r[j]] = 1
        L2["W_in"][b, r[j]] = -1
        L2["h"][0, r[j]] = 1
        L2["W_gate"][a[j], r[j]] = 1
        L2["W_out"][r[j], r[j]] = 1
        L3["W_in"][r[j], g[j]] = 1
        L3["h"][:, g[j]] = 1
        L3["W_gate"][m, g[j]] = 1
        L3["W_out"][g[j], g[j]] = Fraction(1, n)
    layers = [BaseConv(**{k: np.asarray(v, dtype=object) for k, v in L.items()}, causal=False, residual=True)
              for L in (L1, L2, L3)]
    return {"embed": embed, "layers": layers, "readout": readout}
