"""Peers' weight files, written here from the importers' mapping tables (no peer code): the
parameter names, shapes, layouts and file formats of precision-ls, von Oswald et al.'s
transformers_learn_icl_by_gd and zoology, for the import tests."""
from __future__ import annotations

import numpy as np


def precision_ls_notebook(D: int, N: int, lr: float, k: int, *, causal: bool = True, long: bool = False,
                          dtype: str = "float32", prefix: str = "_backbone.transformer.h.") -> dict:
    """The 3-layer GD construction of precision-ls's ``notebooks/baseconv_construction.ipynb``
    (channels ``[a (D), b, x (D), s1 (D), s2 (D)]``, N tokens, ``use_resid=False``), ``k`` steps, as
    a state_dict of ``Block``s ``{prefix}{i}.seq_mixer.base_conv.*``: ``nn.Linear`` weights out x in,
    a depthwise ``Conv1d`` of kernel N (identity = the last tap) or, ``long``, a ``LongConvolution``
    filter (C, N) in lag order (identity = tap 0)."""
    import torch

    t = getattr(torch, dtype)
    C = 4 * D + 1
    sd: dict = {}

    def lin(i, name, W, b=None):
        sd[f"{prefix}{i}.seq_mixer.base_conv.{name}.weight"] = W.to(t)
        sd[f"{prefix}{i}.seq_mixer.base_conv.{name}.bias"] = (torch.zeros(C) if b is None else b).to(t)

    def conv(i, sum_channels=()):
        if long:
            f = torch.zeros(C, N)
            f[:, 0] = 1
            for c in sum_channels:
                f[c, :] = 1
            sd[f"{prefix}{i}.seq_mixer.base_conv.conv.filter"] = f.to(t)
        else:
            w = torch.zeros(C, 1, N)
            w[..., -1] = 1
            for c in sum_channels:
                w[c] = 1
            sd[f"{prefix}{i}.seq_mixer.base_conv.conv.conv.weight"] = w.to(t)
            sd[f"{prefix}{i}.seq_mixer.base_conv.conv.conv.bias"] = torch.zeros(C, dtype=t)

    eye = torch.eye
    for s in range(k):
        i = 3 * s
        W = torch.zeros(C, C)
        W[2 * D + 1:3 * D + 1, :D] = eye(D)
        W[:2 * D + 1, :2 * D + 1] = eye(2 * D + 1)
        lin(i, "in_proj", W)
        conv(i)
        W = torch.zeros(C, C)
        W[2 * D + 1:3 * D + 1, D + 1:2 * D + 1] = eye(D)
        b = torch.zeros(C)
        b[:2 * D + 1] = 1
        lin(i, "projection", W, b)
        W = torch.zeros(C, C)
        W[3 * D + 1:, 2 * D + 1:3 * D + 1] = 1
        W[3 * D + 1:, D] = -1
        W[:3 * D + 1, :3 * D + 1] = eye(3 * D + 1)
        lin(i, "out_proj", W)
        lin(i + 1, "in_proj", eye(C))
        conv(i + 1)
        W = torch.zeros(C, C)
        W[3 * D + 1:, :D] = eye(D)
        b = torch.zeros(C)
        b[:3 * D + 1] = 1
        lin(i + 1, "projection", W, b)
        lin(i + 1, "out_proj", eye(C))
        lin(i + 2, "in_proj", eye(C))
        conv(i + 2, sum_channels=range(3 * D + 1, C))
        lin(i + 2, "projection", torch.zeros(C, C), torch.ones(C))
        W = torch.zeros(C, C)
        W[:2 * D + 1, :2 * D + 1] = eye(2 * D + 1)
        W[D + 1:2 * D + 1, 3 * D + 1:] = -lr * eye(D)
        lin(i + 2, "out_proj", W)
    return sd


def save_pt(path, state_dict: dict, config: dict | None) -> None:
    import torch

    torch.save({"model_state_dict": state_dict, "config": config} if config is not None else state_dict, str(path))


def icl_gd_create_weights(d: int, n: int, lr: float, *, layers: int = 1, w_init=None, dtype="float32") -> dict:
    """von Oswald et al.'s ``create_weights(i_size=d, o_size=1, c_size=n, lr, w_init)`` as the
    flattened haiku dict (``module/param``, ``w`` in x out): Q/K select x, V = [[0], [w_init, -1]]^T,
    the output projection ``lr / n`` on y."""
    D = d + 1
    q = np.zeros((D, D))
    q[:d, :d] = np.eye(d)
    value = np.zeros((D, D))
    value[d, :d] = np.zeros(d) if w_init is None else w_init
    value[d, d] = -1
    value = value.T
    proj = np.zeros((D, D))
    proj[d, d] = (1 / n) * lr
    out = {}
    for layer in range(layers):
        name = "Transformer_gd/multi_head_attention/" if layers == 1 else f"Transformer_gd/~trans_block/layer_{layer}/"
        for key, w in (("query", q), ("key", q), ("value", value), ("linear", proj)):
            out[f"{name}{key}/w"] = w.astype(dtype)
    return out


def zoology_mixer(h, *, short: bool = True, dtype="float32", prefix="backbone.layers.0.sequence_mixer.") -> dict:
    """A zoology BaseConv mixer computing ``u -> u * h`` (causal): ``projection`` = 0 weight, bias 1,
    so ``y = conv(u) + u``; a short convolution holds ``h - delta_0`` (Conv1d taps reversed), a long
    one ``h - 2 delta_0`` (its ``fft_conv`` adds ``u`` once more)."""
    N, C = h.shape
    g = np.array(h, dtype=np.float64)
    g[0] -= 1
    out = {f"{prefix}projection.weight": np.zeros((C, C)), f"{prefix}projection.bias": np.ones(C)}
    if short:
        out[f"{prefix}conv.conv.weight"] = g.T[:, None, ::-1].copy()
        out[f"{prefix}conv.conv.bias"] = np.zeros(C)
    else:
        g[0] -= 1
        out[f"{prefix}conv.filter"] = g.T.copy()
    return {k: v.astype(dtype) for k, v in out.items()}
