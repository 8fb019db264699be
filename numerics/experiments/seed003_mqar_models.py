"""The two-layer models of Zoology's Fig. 2 reference configs (seed 003, Sec. 4 / App. E.2), rebuilt on
plain PyTorch for the MQAR experiment (:mod:`numerics.experiments.seed003_mqar`), and their training
(:func:`train`: AdamW with warm-up and cosine decay, App. E.2; :func:`step_time` for a cell under a deadline).

:func:`build_model` is the reference code's language model (``zoology/model.py`` with the
``iclr24_zoology_figure2/configs.py`` settings):

* token embedding (tied read-out) N(0, 0.02), plus learned positions (``nn.Embedding(N, d)``) for
  attention only (App. E.2: positions for the attention runs only); dropout ``embed_dropout`` (0.1,
  the reference ``embed_dropout``) on the embeddings;
* per layer the reference ``TransformerBlock`` (:class:`Layer`): ``residual += x; x = mixer(LN1(residual));
  residual += x; x = state_mixer(LN2(residual))``, the state mixer ``Identity`` (the Fig. 2 configs;
  the paper's App. E.2 text says an MLP: ``mlp_mult > 0`` gives the reference MLP, fc1, GELU, fc2),
  so each layer's output ``LN2(residual)`` is added to the residual once more by the next layer (or
  the final sum), as in the reference; final ``LN_f(residual + x)``;
* ``attention`` (:class:`MHA`): the reference ``MHA``, one head, causal softmax scaled by 1/sqrt(d),
  attention dropout ``attn_dropout`` (0.1 in the configs);
* ``baseconv`` (:class:`BaseConv`): the reference ``BaseConv`` with ``kernel_size = [3, -1, ...]``: layer 1
  a causal depthwise short convolution of width 3 (``nn.Conv1d``, PyTorch's default init), layer 2 a long
  convolution, both as ``y = conv(u) * (u W + b) + u``; the long filter is the reference default
  ``ImplicitLongConvolution`` (``long_conv="implicit"``: an MLP 3 -> 16 -> d of the positional
  features (t, cos, sin), the FFT convolution plus the skip ``u``) or the paper's Listing 1 explicit
  filter, the reference's ``LongConvolution`` (``"explicit"``: one ``randn(d, N)`` filter per channel,
  FFT convolution plus ``u``);
* the reference init (``_init_weights``): every ``nn.Linear`` N(0, 0.02) with zero bias (the implicit
  filter's MLP included), every ``out_proj.weight`` / ``fc2.weight`` N(0, 0.02 / sqrt(2 layers)).
"""
from __future__ import annotations

import copy
import math
import time

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from numerics.training.mqar import accuracy as exact_match
from numerics.training.mqar import IGNORE, train_step, warmup_cosine

MIXERS = ("attention", "baseconv")
LONG_CONVS = ("implicit", "explicit")


def fft_conv(u: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """u (b, d, L), k (d, L): the causal convolution by FFT plus the skip u (reference ``fft_conv``)."""
    L = u.shape[-1]
    y = torch.fft.irfft(torch.fft.rfft(u, n=2 * L) * torch.fft.rfft(k, n=2 * L), n=2 * L)[..., :L]
    return y + u


class ShortConv(nn.Module):
    """The reference ``ShortConvolution``: a causal depthwise ``nn.Conv1d`` of width ``k`` on (b, L, d)."""

    def __init__(self, d: int, k: int = 3):
        super().__init__()
        self.conv = nn.Conv1d(d, d, kernel_size=k, groups=d, padding=k - 1)

    def forward(self, x):
        return self.conv(x.transpose(1, 2))[..., :x.shape[1]].transpose(1, 2)


class ImplicitLongConv(nn.Module):
    """The reference ``ImplicitLongConvolution`` (d_emb = 3, one band, hidden 16): the filter an MLP of
    the positional features (t, cos, sin)."""

    def __init__(self, d: int, N: int):
        super().__init__()
        t = torch.linspace(0, 1, N)[None, :, None]
        w = 2 * math.pi * torch.linspace(0, N - 1, N)[None, :, None] / N
        f = torch.linspace(1e-4, 0, 1)[None, None]  # d_emb = 3: one band, as the reference
        z = torch.exp(-1j * f * w)
        self.register_buffer("z", torch.cat([t, z.real, z.imag], dim=-1), persistent=False)
        self.mlp = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, d))

    def forward(self, x):
        k = self.mlp(self.z[:, :x.shape[1]])[0].transpose(0, 1)  # (d, L)
        return fft_conv(x.transpose(1, 2), k).transpose(1, 2)


class ExplicitLongConv(nn.Module):
    """The reference ``LongConvolution`` (the paper's Listing 1): one ``randn(d, N)`` filter per channel."""

    def __init__(self, d: int, N: int):
        super().__init__()
        self.filter = nn.Parameter(torch.randn(d, N))

    def forward(self, x):
        return fft_conv(x.transpose(1, 2), self.filter[:, :x.shape[1]]).transpose(1, 2)


class BaseConv(nn.Module):
    """The reference ``BaseConv`` with ``kernel_size = [3, -1, 3, -1]``: ``conv(u) * (u W + b) + u``, the
    short convolution in even layers, the long one in odd layers."""

    def __init__(self, d: int, N: int, layer_idx: int, long_conv: str):
        super().__init__()
        self.projection = nn.Linear(d, d)
        if layer_idx % 2 == 0:
            self.conv = ShortConv(d, 3)
        else:
            self.conv = ImplicitLongConv(d, N) if long_conv == "implicit" else ExplicitLongConv(d, N)

    def forward(self, u):
        return self.conv(u) * self.projection(u) + u


class MHA(nn.Module):
    """The reference ``MHA`` with one head: causal softmax attention, dropout ``attn_dropout`` in training."""

    def __init__(self, d: int, attn_dropout: float):
        super().__init__()
        self.d, self.attn_dropout = d, attn_dropout
        self.Wqkv = nn.Linear(d, 3 * d)
        self.out_proj = nn.Linear(d, d)

    def forward(self, x):
        q, k, v = self.Wqkv(x).unsqueeze(1).split(self.d, dim=-1)  # one head: (b, 1, L, d)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.attn_dropout if self.training else 0.0)
        return self.out_proj(y.squeeze(1))


class MLP(nn.Module):
    """The reference state mixer ``MLP``: fc1, GELU, fc2 (hidden ``mult * d``)."""

    def __init__(self, d: int, mult: int):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, mult * d), nn.Linear(mult * d, d)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class Layer(nn.Module):
    """The reference ``TransformerBlock`` (see the module docstring)."""

    def __init__(self, sequence_mixer: nn.Module, d: int, mlp_mult: int):
        super().__init__()
        self.sequence_mixer = sequence_mixer
        self.state_mixer = MLP(d, mlp_mult) if mlp_mult else nn.Identity()
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, x, residual):
        residual = x if residual is None else x + residual
        x = self.sequence_mixer(self.norm1(residual))
        residual = x + residual
        return self.state_mixer(self.norm2(residual)), residual


class ZoologyLM(nn.Module):
    """Embedding (+ positions for attention) -> dropout -> layers -> LN_f(h + residual) -> tied read-out."""

    def __init__(self, mixer: str, vocab: int, N: int, d: int, *, layers: int, mlp_mult: int, embed_dropout: float,
                 attn_dropout: float, long_conv: str):
        super().__init__()
        self.mixer, self.vocab, self.N, self.d = mixer, vocab, N, d
        self.embed = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(N, d) if mixer == "attention" else None
        self.drop = nn.Dropout(embed_dropout)

        def mixer_of(i):
            return MHA(d, attn_dropout) if mixer == "attention" else BaseConv(d, N, i, long_conv)
        self.layers = nn.ModuleList(Layer(mixer_of(i), d, mlp_mult) for i in range(layers))
        self.ln_f = nn.LayerNorm(d)

    def features(self, x):
        """(B, L) tokens -> (B, L, d) final hidden states (after the last LayerNorm)."""
        h = self.embed(x)
        if self.pos is not None:
            h = h + self.pos(torch.arange(x.shape[1], device=x.device))
        h, residual = self.drop(h), None
        for layer in self.layers:
            h, residual = layer(h, residual)
        return self.ln_f(h + residual)

    def forward(self, x, mask=None):
        """Logits (B, L, V), or only at the positions where ``mask`` is true ((M, V))."""
        h = self.features(x)
        if mask is not None:
            h = h[mask]
        return h @ self.embed.weight.T


def reference_init(model: nn.Module, layers: int) -> None:
    """The reference ``_init_weights``: every ``nn.Linear`` N(0, 0.02) with zero bias, ``out_proj`` and
    ``fc2`` weights N(0, 0.02 / sqrt(2 layers)), every ``nn.Embedding`` N(0, 0.02)."""
    with torch.no_grad():
        for name, m in model.named_modules():
            if isinstance(m, nn.Linear):
                std = 0.02 / math.sqrt(2 * layers) if name.endswith(("out_proj", "fc2")) else 0.02
                nn.init.normal_(m.weight, std=std)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Embedding):
                nn.init.normal_(m.weight, std=0.02)


def build_model(mixer: str, vocab: int, N: int, d: int, *, seed: int = 0, layers: int = 2, mlp_mult: int = 0,
                embed_dropout: float = 0.1, attn_dropout: float = 0.1, long_conv: str = "implicit") -> ZoologyLM:
    """The two-layer language model of Zoology's Fig. 2 reference configs (module docstring), its
    parameters drawn from ``torch.manual_seed(seed)`` then the reference init."""
    if mixer not in MIXERS:
        raise ValueError(f"mixer must be one of {', '.join(MIXERS)}, got {mixer!r}")
    if d < 1 or layers < 1 or N < 2:
        raise ValueError(f"width, layers and N must be positive, got d={d}, layers={layers}, N={N}")
    if long_conv not in LONG_CONVS:
        raise ValueError(f"long_conv must be 'implicit' or 'explicit', got {long_conv!r}")
    if mlp_mult < 0:
        raise ValueError(f"mlp_mult must be >= 0 (0: Identity state mixer), got {mlp_mult}")
    torch.manual_seed(seed)
    model = ZoologyLM(mixer, vocab, N, d, layers=layers, mlp_mult=mlp_mult, embed_dropout=embed_dropout,
                      attn_dropout=attn_dropout, long_conv=long_conv)
    reference_init(model, layers)
    return model


def accuracy(model, inputs, labels, batch: int = 500) -> float:
    """Zoology's exact-match accuracy (``numerics.training.mqar.accuracy``; every example has D queries, so
    the reference's per-example mean equals it) on tensors on the model's device."""
    return exact_match(model, inputs, labels, batch=batch)


def train(model, train_set, test_set, *, lr: float, steps: int, batch: int, weight_decay: float = 0.1,
          warmup: float = 0.1, eval_every: int = 50, stop_at: float | None = None, seed: int = 0,
          device: str = "cpu", deadline: float | None = None) -> dict:
    """AdamW (weight decay 0.1 on every parameter, as the reference), ``warmup`` of the steps linear warm-up
    then cosine decay to 0 (App. E.2), cross-entropy at the query positions; the training set visited in
    shuffled epochs (a fixed order per seed).  Test accuracy every ``eval_every`` steps and at the end;
    stops once it reaches ``stop_at`` (the reference's early stopping at 0.99), or at the first evaluation
    after the wall-clock ``deadline`` (``time.time()``; then ``stopped`` says so)."""
    dev = torch.device(device)
    X, Y = (torch.as_tensor(a, device=dev) for a in train_set)
    TX, TY = (torch.as_tensor(a, device=dev) for a in test_set)
    model.to(dev).train()
    gen = np.random.default_rng(seed + 1)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay,
                            **({"fused": True} if dev.type == "cuda" else {}))
    lr_at = warmup_cosine(lr, steps, warmup)
    labels = (np.asarray(train_set[1]) != IGNORE).sum(1)  # each example's labels, on the host
    perm = gen.permutation(len(X))
    order, pos = torch.as_tensor(perm, device=dev), 0
    hist, best, step, loss_v, stopped = [], 0.0, 0, float("nan"), None
    t0 = time.perf_counter()
    for step in range(1, steps + 1):
        if pos + batch > len(order):
            perm = gen.permutation(len(X))
            order, pos = torch.as_tensor(perm, device=dev), 0
        idx = order[pos:pos + batch]
        n_labels = int(labels[perm[pos:pos + batch]].sum())  # known on the host: no boolean mask on the device
        pos += batch
        loss = train_step(model, opt, X[idx], Y[idx], lr_at(step - 1), n_labels)
        if step % eval_every == 0 or step == steps:
            loss_v = float(loss.detach())
            if not math.isfinite(loss_v):
                hist.append({"step": step, "train_loss": loss_v, "test_acc": None})
                stopped = "non-finite loss"
                break
            acc = accuracy(model, TX, TY)
            best = max(best, acc)
            hist.append({"step": step, "train_loss": loss_v, "test_acc": acc,
                         "wall_s": round(time.perf_counter() - t0, 2)})
            if stop_at is not None and acc >= stop_at:
                stopped = f"test accuracy reached {stop_at}"
                break
            if deadline is not None and time.time() >= deadline and step < steps:
                stopped = "deadline"
                break
    return {"history": hist, "best_test_acc": best, "steps_run": step, "final_train_loss": loss_v,
            "final_test_acc": next((h["test_acc"] for h in reversed(hist) if h["test_acc"] is not None), None),
            "stopped": stopped, "train_wall_s": round(time.perf_counter() - t0, 2)}


def step_time(model, train_set, test_set, *, batch: int, device: str, lr: float, probe_steps: int = 12) -> tuple[float, float]:
    """Seconds per training step and per evaluation of the test set, measured on a copy of ``model``
    (the model itself is not touched): ``probe_steps`` steps after 3 that warm the device up."""
    probe = copy.deepcopy(model)
    dev = torch.device(device)

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    n = min(len(train_set[0]), batch * (probe_steps + 3))
    small = (train_set[0][:n], train_set[1][:n])
    train(probe, small, (test_set[0][:8], test_set[1][:8]), lr=lr, steps=3, batch=batch, eval_every=10 ** 9,
          device=device)
    sync()
    t = time.perf_counter()
    train(probe, small, (test_set[0][:8], test_set[1][:8]), lr=lr, steps=probe_steps, batch=batch,
          eval_every=10 ** 9, device=device)
    sync()
    per_step = (time.perf_counter() - t) / probe_steps
    TX, TY = (torch.as_tensor(a, device=dev) for a in test_set)
    t = time.perf_counter()
    accuracy(probe, TX, TY)
    sync()
    return per_step, time.perf_counter() - t


__all__ = ["accuracy", "train", "step_time", "MIXERS", "LONG_CONVS", "build_model", "fft_conv", "ZoologyLM", "Layer", "MHA", "BaseConv", "MLP",
           "ShortConv", "ImplicitLongConv", "ExplicitLongConv", "reference_init"]
