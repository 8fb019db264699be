"""Multi-query associative recall (seed 003, Zoology: Def. 3.1, App. E.1 Algorithm 1) and the
two-layer models of its Sec. 4 / App. E.2 synthetic experiments, on the toolkit's modules.

Generator (:func:`mqar`), as the reference code of Zoology's App. E.1 (``_mqar``): the first half of the vocabulary ``[1, V/2)`` holds keys, the second ``[V/2, V)`` values;
per example ``D`` distinct keys and ``D`` distinct values form the block ``k0 v0 k1 v1 ...`` at
positions ``0 .. 2D-1``; each key is asked again once, at position ``2D + 2 g`` with gaps ``g``
drawn without replacement from ``[0, (N - 2D) // 2)`` with probability proportional to
``a g'^(a - 1)``, ``g' = g + 1`` (a power law, ``a = power_a``); the target at a query position is the
value paired with its key; every other target is ``IGNORE`` (-100) and the other input tokens are 0
(``random_non_queries=False``, as the Fig. 2 configurations of the reference code).

Models (:class:`MQARModel`): token embedding (width d) -> 2 pre-LayerNorm residual blocks, each a
sequence mixer then, if ``mlp_mult > 0``, an MLP (``numerics.training.modules.Block``) -> final
LayerNorm -> logits by the transposed embedding (tied).  ``mlp_mult=0`` drops the MLP: the reference
code's Fig. 2 configs (``iclr24_zoology_figure2/configs.py``) set the state mixer to ``Identity``,
while the paper's App. E.2 text says "sequence mixer plus MLP"; with the MLP (hidden 2d or 4d) the
attention model stayed on the 1/D plateau in every short CPU run we tried (see
``numerics.experiments.seed003_mqar``).  Mixers:

* ``attention``: ``modules.SoftmaxAttention`` (1 head, causal) with learned positions (GPT-2, the
  only model with positional embeddings, as App. E.2);
* ``baseconv``: ``modules.BaseConvBlock``, seed 000 eq. (2) / Zoology's BaseConv: a causal long
  convolution (one length-N filter per channel, by FFT) of a linear projection, gated
  element-wise by a second linear projection, then an output projection; one bias row per
  channel (Zoology's ``nn.Linear`` biases rather than the (N, d) matrices of Def. 4.1).

The logits are formed only at the labelled (query) positions, where the loss and the accuracy are
read (the others carry no target).
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from .modules import BaseConvBlock, Block, SoftmaxAttention

IGNORE = -100
MIXERS = ("attention", "baseconv")


def check_mqar(num_examples: int, N: int, D: int, vocab: int, power_a: float) -> None:
    """ValueError naming the first argument an MQAR generator cannot take."""
    if N % 2 or N < 4:
        raise ValueError(f"sequence length N must be even and >= 4, got {N}")
    if D < 1 or 4 * D > N:
        raise ValueError(f"number of key-value pairs D must be in [1, N/4], got D={D}, N={N}")
    if vocab <= N or vocab % 2 or vocab // 2 - 1 < D:
        raise ValueError(f"vocabulary must be even, larger than N={N} and hold D={D} keys, got {vocab}")
    if not 0 < power_a <= 1:
        raise ValueError(f"power_a must be in (0, 1], got {power_a}")
    if num_examples < 1:
        raise ValueError(f"num_examples must be >= 1, got {num_examples}")


def place_mqar(rng, keys: np.ndarray, values: np.ndarray, N: int, power_a: float) -> tuple[np.ndarray, np.ndarray]:
    """``(inputs, labels)`` from each example's D keys and values (n, D): the block ``k0 v0 k1 v1 ...``,
    then each key asked again once at position ``2D + 2g``, the gaps ``g`` drawn (from ``rng``) without
    replacement from ``[0, (N - 2D)/2)`` with probability proportional to ``a (g + 1)^(a - 1)``; the
    label at a query is its value, every other label ``IGNORE``, every other input 0."""
    n, D = keys.shape
    ctx = 2 * D
    space = (N - ctx) // 2
    g = np.arange(1, space + 1, dtype=np.float64)
    p = power_a * g ** (power_a - 1)
    p /= p.sum()
    # D gaps without replacement, each draw proportional to p among those left (Gumbel top-D)
    gumbel = np.log(p)[None, :] - np.log(-np.log(rng.random((n, space))))
    gaps = np.argsort(-gumbel, axis=1)[:, :D]
    seq = np.zeros((n, N + 1), dtype=np.int64)
    lab = np.full((n, N + 1), IGNORE, dtype=np.int64)
    seq[:, 0:ctx:2] = keys
    seq[:, 1:ctx:2] = values
    rows = np.arange(n)[:, None]
    seq[rows, ctx + 2 * gaps] = keys
    lab[rows, ctx + 2 * gaps + 1] = values
    return seq[:, :-1].copy(), lab[:, 1:].copy()


def mqar(num_examples: int, N: int, D: int, vocab: int, seed: int, *, power_a: float = 0.01,
         random_non_queries: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``(inputs, labels)``, both (num_examples, N) int64: the MQAR examples described in the
    module docstring, a pure function of the arguments."""
    check_mqar(num_examples, N, D, vocab, power_a)
    rng = np.random.default_rng(seed)
    n, half = num_examples, vocab // 2
    # D distinct keys from [1, V/2) and D distinct values from [V/2, V) per example
    keys = np.argsort(rng.random((n, half - 1)), axis=1)[:, :D] + 1
    values = np.argsort(rng.random((n, vocab - half)), axis=1)[:, :D] + half
    inputs, labels = place_mqar(rng, keys, values, N, power_a)
    if random_non_queries:
        z = inputs == 0
        inputs[z] = rng.integers(0, vocab, size=int(z.sum()))
    return inputs, labels


def accuracy(model, inputs, labels, batch: int = 250) -> float:
    """Exact-match accuracy of the argmax at the labelled positions (Zoology's metric); ``inputs`` /
    ``labels`` numpy arrays or tensors (on the model's device); the model's train/eval mode is kept."""
    right = total = 0
    was = model.training
    model.eval()
    with torch.no_grad():
        for i in range(0, len(inputs), batch):
            x = torch.as_tensor(inputs[i:i + batch])
            y = torch.as_tensor(labels[i:i + batch])
            m = y != IGNORE
            pred = model(x, m).argmax(-1)
            right += int((pred == y[m]).sum())
            total += int(m.sum())
    model.train(was)
    return right / total


class MQARModel(nn.Module):
    """Embedding -> 2 x (mixer [+ MLP if ``mlp_mult > 0``], pre-LayerNorm, residual) -> LayerNorm ->
    tied read-out."""

    def __init__(self, mixer: str, vocab: int, N: int, d: int, *, layers: int = 2, mlp_mult: int = 2,
                 seed: int = 0):
        super().__init__()
        if mixer not in MIXERS:
            raise ValueError(f"mixer must be one of {', '.join(MIXERS)}, got {mixer!r}")
        if d < 1 or layers < 1:
            raise ValueError(f"width and layers must be >= 1, got d={d}, layers={layers}")
        if mlp_mult < 0:
            raise ValueError(f"mlp_mult must be >= 0 (0: no MLP), got {mlp_mult}")
        torch.manual_seed(seed)
        self.mixer, self.vocab, self.N, self.d = mixer, vocab, N, d
        self.embed = nn.Embedding(vocab, d)
        nn.init.normal_(self.embed.weight, std=0.02)
        self.pos = nn.Parameter(torch.randn(N, d) * 0.02) if mixer == "attention" else None
        blocks = []
        for _ in range(layers):
            if mixer == "attention":
                mix = SoftmaxAttention(d, 1, causal=True)
            else:
                mix = BaseConvBlock(N, d, causal=True, conv_method="fft", bias="vector")
            blocks.append(Block(mix, d, mlp=mlp_mult > 0, layernorm=True, mlp_mult=max(1, mlp_mult)))
        self.blocks = nn.ModuleList(blocks)
        self.ln_f = nn.LayerNorm(d)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """(B, N) tokens -> (B, N, d) final hidden states (after the last LayerNorm)."""
        h = self.embed(x)
        if self.pos is not None:
            h = h + self.pos[: x.shape[1]]
        for b in self.blocks:
            h = b(h)
        return self.ln_f(h)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Logits (B, N, V), or only at the positions where ``mask`` is true ((M, V))."""
        h = self.features(x)
        if mask is not None:
            h = h[mask]
        return h @ self.embed.weight.T


def warmup_cosine(lr: float, steps: int, warmup: float):
    """The learning rate at step ``s`` (0-based) of ``steps``: linear warm-up over a ``warmup`` fraction of
    the steps (at least one), then cosine decay to 0 (App. E.2 / the reference configs)."""
    n_warm = max(1, int(round(warmup * steps)))

    def lr_at(s: int) -> float:
        if s < n_warm:
            return lr * (s + 1) / n_warm
        return 0.5 * lr * (1 + math.cos(math.pi * (s - n_warm) / max(1, steps - n_warm)))
    return lr_at


def train_step(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor, lr: float,
               n_labels: int | None = None) -> torch.Tensor:
    """One optimiser step at rate ``lr`` on the cross-entropy at the labelled positions of ``(x, y)``
    (``y != IGNORE``); returns the loss (a tensor, before the step).  ``n_labels``: how many labels
    the batch holds, where the caller knows it (from its host copy of the labels): the positions are
    then picked as index tensors of that known length (``nonzero_static``, the boolean mask's
    positions in its order: the same logits, loss and step) instead of a boolean mask, whose
    data-dependent length makes the host wait for the device twice a step (the model's ``h[mask]``
    and ``y[mask]``)."""
    m = y != IGNORE
    if n_labels is not None:
        m = tuple(torch.nonzero_static(m, size=n_labels).unbind(1))  # (rows, positions)
    for grp in opt.param_groups:
        grp["lr"] = lr
    loss = nn.functional.cross_entropy(model(x, m), y[m])
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss


def train(model: MQARModel, train_set, test_set, *, lr: float, steps: int, batch: int,
          weight_decay: float = 0.1, warmup: float = 0.1, eval_every: int = 50, stop_at: float | None = None,
          seed: int = 0) -> dict:
    """AdamW (weight decay 0.1), ``warmup`` fraction of linear warm-up then cosine decay to 0
    (App. E.2 / the reference configs), cross-entropy at the query positions; the training set is
    visited in a fixed order of shuffled epochs.  Evaluates test accuracy every ``eval_every``
    steps and at the end; stops early once it reaches ``stop_at``.  Returns the history."""
    X, Y = train_set
    gen = np.random.default_rng(seed + 1)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    lr_at = warmup_cosine(lr, steps, warmup)
    order = gen.permutation(len(X))
    pos = 0
    hist = []
    best = 0.0
    step = 0
    loss_v = float("nan")
    for step in range(1, steps + 1):
        if pos + batch > len(order):
            order, pos = gen.permutation(len(X)), 0
        idx = order[pos:pos + batch]
        pos += batch
        loss = train_step(model, opt, torch.as_tensor(X[idx]), torch.as_tensor(Y[idx]), lr_at(step - 1))
        loss_v = float(loss.detach())
        if not math.isfinite(loss_v):
            hist.append({"step": step, "train_loss": loss_v, "test_acc": None})
            break
        if step % eval_every == 0 or step == steps:
            acc = accuracy(model, *test_set)
            best = max(best, acc)
            hist.append({"step": step, "train_loss": loss_v, "test_acc": acc})
            if stop_at is not None and acc >= stop_at:
                break
    return {"history": hist, "best_test_acc": best, "steps_run": step, "final_train_loss": loss_v,
            "final_test_acc": next((h["test_acc"] for h in reversed(hist) if h["test_acc"] is not None), None)}


__all__ = ["IGNORE", "MIXERS", "mqar", "MQARModel", "accuracy", "train", "train_step", "warmup_cosine"]
