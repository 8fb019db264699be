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
``filter[c, s]`` is lag order already.  precision-ls cuts it to the sequence (``k[..., :T]``,
FFT of size 2T causal / T non-causal): :func:`long_taps`, ``causal=True`` or circular.
zoology's ``fft_conv`` does not cut it: ``rfft(k, n=2T)`` keeps taps ``j < 2T`` and the product
is a circular convolution of length 2T of which the first T outputs are kept, so (``u`` zero at
tokens T..2T-1)::

    y[t] = sum_{j < min(L, 2T)} k[j] u[(t - j) mod 2T]
         = sum_{j <= t} k[j] u[t - j]  +  sum_{T < j < 2T, t < j - T} k[j] u[t + 2T - j]

a tap at lag ``T < j < 2T`` wraps round and moves token ``t + 2T - j`` onto the earlier token
``t`` (a delta at lag 7 with T = 5 moves token 4 to token 1); lags ``T`` and ``>= 2T`` act on no
token.  :func:`fft2t_taps` reads that operator exactly (a Toeplitz matrix with lags
``-(T-1) .. T-1``) and :func:`fit_convention` writes it as a causal, circular or "same" filter
of T taps where one of them *is* that operator; where none is, the file is refused, naming
the taps.  A tap whose lag cannot act on a sequence of T tokens (``|s| >= T``) is read and
reported as inert; a tap that could act but has no place in the T-tap filter (the "same"
convention with ``K != T``) is refused.
"""
from __future__ import annotations

import numpy as np

from constructions.exact_floats import ExactFloats, is_lazy

from .common import ImportRefused, zeros


def conv1d_lag(k: int, K: int, *, same: bool) -> int:
    """The lag ``s`` at which tap ``k`` of a depthwise ``Conv1d`` of kernel ``K`` acts: padding
    ``K - 1`` (causal) or ``K // 2`` ("same"), so ``s = P - k`` (the table above).  Read by
    :func:`conv1d_taps` and written backwards by :func:`conv1d_weight`."""
    return (K // 2 if same else K - 1) - k


def filter_row(s: int, T: int, *, same: bool) -> int:
    """The row of this toolkit's filter ``h`` (T, C) that holds lag ``s``: ``s`` (causal), or
    ``s + (T-1)//2`` ("same", ``ops.conv``)."""
    return s + ((T - 1) // 2 if same else 0)


def conv1d_taps(w, T: int, *, same: bool, key: str) -> tuple:
    """``(h, inert)``: the filter (T, C) of a depthwise Conv1d weight ``w`` (C, 1, K) under the
    causal (padding K-1) or "same" (padding K//2) convention, and the number of nonzero taps that
    act on no token of a length-T sequence."""
    C, one, K = w.shape
    if one != 1:
        raise ImportRefused(f"tensor {key} has shape {tuple(w.shape)}: not a depthwise Conv1d weight (C, 1, K)")
    h = zeros(T, C)
    inert = 0
    for k in range(K):
        s = conv1d_lag(k, K, same=same)
        j = filter_row(s, T, same=same)
        for c in range(C):
            val = w[c, 0, k]
            if val == 0:
                continue
            if 0 <= j < T:
                h[j, c] = val
            elif abs(s) >= T:
                inert += 1
            else:
                raise ImportRefused(f"tensor {key}: tap {k} of channel {c} acts at lag {s} on a sequence of {T} "
                                   f"tokens, which the 'same' convention with {T} taps cannot hold (kernel size "
                                   f"{K} != {T} tokens)")
    return h, inert


def conv1d_weight(h, *, same: bool):
    """The depthwise ``Conv1d`` weight (C, 1, T) of kernel ``T`` whose reading by
    :func:`conv1d_taps` (same ``same``) is the filter ``h`` (T, C): :func:`conv1d_lag` and
    :func:`filter_row` backwards (with ``K = T`` every tap has a row: ``w[c, 0, k] = h[T-1-k, c]``
    under both conventions)."""
    T, C = h.shape
    w = zeros(C, 1, T)
    for k in range(T):
        j = filter_row(conv1d_lag(k, T, same=same), T, same=same)
        for c in range(C):
            w[c, 0, k] = h[j, c]
    return w


def long_taps(f, T: int, key: str) -> tuple:
    """``(h, inert)`` of a long convolution's ``filter`` (C, L): lags 0..T-1 (``k[..., :T]``)."""
    C, L = f.shape
    if is_lazy(f) and f.is_float_only():  # a lazily read filter stays lazy: lags 0..T-1 of its floats
        g = np.zeros((T, C), dtype=f.floats.dtype)
        g[:min(L, T)] = f.floats[:, :T].T
        return ExactFloats(g), int(np.count_nonzero(f.floats[:, T:]))
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


def long_filter(h):
    """The long convolution's ``filter`` (C, T) whose reading by :func:`long_taps` is ``h``
    (T, C): lag order, ``filter[c, s] = h[s, c]``."""
    T, C = h.shape
    f = zeros(C, T)
    for s in range(T):
        for c in range(C):
            f[c, s] = h[s, c]
    return f


def add_identity(h, *, same: bool, by=1) -> None:
    """``conv(v) + v``: one more at lag 0 of every channel (in place); ``by``: that many
    (``by=-1`` takes the peer's own ``+ v`` out of a filter before it is written)."""
    j = filter_row(0, h.shape[0], same=same)
    for c in range(h.shape[1]):
        h[j, c] = h[j, c] + by


def fft2t_taps(f, T: int) -> tuple:
    """``(coef, inert, wraps)`` of zoology's ``fft_conv`` with a filter ``f`` (C, L) on T tokens
    (module docstring): ``coef[c]`` maps each lag (``-(T-1) .. T-1``; negative: the output token
    reads a later token) to its coefficient, without ``fft_conv``'s ``+ u``; ``wraps`` lists
    the nonzero taps ``(c, j)`` that wrap round (``T < j < 2T``)."""
    C, L = f.shape
    coef: list[dict] = [{} for _ in range(C)]
    inert, wraps = 0, []
    for j in range(L):
        for c in range(C):
            v = f[c, j]
            if v == 0:
                continue
            if j < T:
                lag = j
            elif j == T or j >= 2 * T:  # u[t + T] is the FFT's zero padding; rfft(k, n=2T) drops j >= 2T
                inert += 1
                continue
            else:
                lag = j - 2 * T
                wraps.append((c, j))
            coef[c][lag] = coef[c].get(lag, 0) + v
    return coef, inert, wraps


def fit_convention(coef: list[dict], T: int):
    """A causal, circular or "same" filter ``h`` (T, C) computing exactly the Toeplitz operator
    ``coef`` (per channel: lag -> coefficient, lags in ``-(T-1) .. T-1``), as ``(h, mode)``;
    ``None`` when no convention of T taps is that operator."""
    C = len(coef)
    m = (T - 1) // 2
    nz = [{s: v for s, v in cc.items() if v != 0} for cc in coef]
    if all(s >= 0 for cc in nz for s in cc):
        mode, place = "causal", (lambda s: s)
    elif all(-m <= s <= T - 1 - m for cc in nz for s in cc):
        mode, place = "same", (lambda s: s + m)
    elif all(cc.get(s, 0) == cc.get(s - T, 0) for cc in nz for s0 in cc for s in ([s0] if s0 > 0 else [s0 + T])
             if 0 < s < T):
        # circular: lag s and lag s - T are one tap; lag 0 has no twin
        mode, place = "circular", (lambda s: s % T)
    else:
        return None
    h = zeros(T, C)
    for c, cc in enumerate(nz):
        for s, v in cc.items():
            h[place(s), c] = v
    return h, mode
