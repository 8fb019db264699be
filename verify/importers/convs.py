"""Peers' convolutions as this toolkit's filters ``h`` (T, C), lag order (``constructions/ops.py``).

``torch.nn.Conv1d(C, C, kernel_size=K, groups=C, padding=P)`` followed by the first T outputs
is a cross-correlation: ``y[t] = sum_k w[c, 0, k] v[t + k - P] + bias[c]`` (zero padding), so
tap ``k`` acts at lag ``s = P - k``:

=====================  ==========  ======================  =========================================
peer                   padding P   lags ``s``              this toolkit
=====================  ==========  ======================  =========================================
causal (``K - 1``)     K - 1       0 .. K-1                ``causal=True``, ``h[s] = w[K-1-s]``
"same" (``K // 2``)    K // 2      -(K-1-P) .. P           ``same=True``, ``h[s + (T-1)//2] = w[P-s]``
=====================  ==========  ======================  =========================================

(for K = T both are ``h[j] = w[K-1-j]``: the taps in reverse order).  A long convolution's
``filter[c, s]`` (FFT, size 2T causal / T non-causal, ``k[..., :T]``) is lag order already:
``causal=True`` or circular.  A tap whose lag cannot act on a sequence of T tokens
(``|s| >= T``) is read and reported as inert; a tap that could act but has no place in the
T-tap filter (the "same" convention with ``K != T``) is refused.
"""
from __future__ import annotations

from .common import ImportError_, zeros


def conv1d_taps(w, T: int, *, same: bool, key: str) -> tuple:
    """``(h, inert)``: the filter (T, C) of a depthwise Conv1d weight ``w`` (C, 1, K) under the
    causal (padding K-1) or "same" (padding K//2) convention, and the number of nonzero taps that
    act on no token of a length-T sequence."""
    C, one, K = w.shape
    if one != 1:
        raise ImportError_(f"tensor {key} has shape {tuple(w.shape)}: not a depthwise Conv1d weight (C, 1, K)")
    P = K // 2 if same else K - 1
    m = (T - 1) // 2 if same else 0
    h = zeros(T, C)
    inert = 0
    for k in range(K):
        s = P - k
        j = s + m
        for c in range(C):
            val = w[c, 0, k]
            if val == 0:
                continue
            if 0 <= j < T:
                h[j, c] = val
            elif abs(s) >= T:
                inert += 1
            else:
                raise ImportError_(f"tensor {key}: tap {k} of channel {c} acts at lag {s} on a sequence of {T} "
                                   f"tokens, which the 'same' convention with {T} taps cannot hold (kernel size "
                                   f"{K} != {T} tokens)")
    return h, inert


def long_taps(f, T: int, key: str) -> tuple:
    """``(h, inert)`` of a long convolution's ``filter`` (C, L): lags 0..T-1 (``k[..., :T]``)."""
    C, L = f.shape
    h = zeros(T, C)
    inert = 0
    for s in range(L):
        for c in range(C):
            if f[c, s] == 0:
                continue
            if s < T:
                h[s, c] = f[c, s]
            else:
                inert += 1
    return h, inert


def add_identity(h, *, same: bool) -> None:
    """``conv(v) + v``: one more at lag 0 of every channel (in place)."""
    j = (h.shape[0] - 1) // 2 if same else 0
    for c in range(h.shape[1]):
        h[j, c] = h[j, c] + 1
