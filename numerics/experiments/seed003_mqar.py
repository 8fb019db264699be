"""Seed 003 (Zoology), Sec. 4.3 / Figure 2 (top) / Claim 1: multi-query associative recall (MQAR),
attention against BaseConv as the model dimension d grows.

Data (:func:`mqar_data`): Zoology App. E.1 Algorithm 1 as its reference generator (``multiquery_ar``,
``random_non_queries=False``): D key-value pairs at the start, each key asked once more at a gap drawn
from a power law (alpha, App. F.1: 0.1), filler token 0; one training set and one test set for every
run (App. E.2).  Models (:func:`build_model`): the reference code's Fig. 2 configs rebuilt: two layers,
each a sequence mixer with pre-LayerNorm residuals and no MLP (state mixer ``Identity``), tied
read-out, the reference init and dropout; ``attention`` one causal softmax head with learned positions,
``baseconv`` the reference BaseConv (a width-3 short convolution in layer 1, the implicit long
convolution in layer 2).  Training (:func:`train`): AdamW, weight decay 0.1, 10% linear warm-up then
cosine decay (App. E.2), a run stopping once its test accuracy reaches 0.99; the accuracy is the exact
match of the argmax at the query positions, a run reports its best test accuracy over its evaluations.

Two grids.  The CPU grid (``FULL``, :func:`configs`): a vocabulary, N and widths a shared CPU can
afford, learning rates chosen per mixer by the ``TUNE`` cells (the paper's four rates at one cell),
three seeds per cell (a cell's value: the median over seeds at the rate with the highest median), and
one longer BaseConv run (``LONG``).  The GPU grid (``GPU``, :func:`gpu_configs`,
``numerics/experiments/gpu.sh``): the paper's vocabulary, N and widths on a card within a time budget.
The criteria (:func:`criteria`) count a cell below the threshold only where that mixer demonstrably
reaches the threshold somewhere in the grid within as many steps.  ``markdown`` and ``gpu_markdown``
state every remaining difference from the paper and its reference code.
"""
from __future__ import annotations

import json
import math
import statistics

from .common import fmt, fmt_seconds, gpu_cost_line, rows_ok, timing_line, verdict

NAME = "seed003-mqar"
TITLE = "Seed 003 (Zoology), Figure 2 / Claim 1: MQAR accuracy of attention and BaseConv against model dimension"
REFERENCE = "seed 003 (Arora et al., Zoology), Sec. 4, Figure 2 (top), Claim 1"

MIXERS = ("attention", "baseconv")
THRESHOLD = 0.9

#: the CPU grid (``configs(False)``): sizes, widths per mixer, learning rates per mixer (chosen per mixer by
#: the ``TUNE`` cells, which run with the grid), seeds; the rest as the reference (App. E.2 / F.1 in comments
#: where they differ).  App. F.1 varies N "holding alpha and D constant": D = 4 at both N here.
FULL = {
    "sizes": ((32, 4),),      # N = 64 would need a vocabulary above 64 (the generator, as the reference's, needs V > N)
    "dims": {"attention": (16, 32), "baseconv": (16, 32, 64)},
    "lrs": {"attention": (1e-2,), "baseconv": (1e-2,)},
    "seeds": (0, 1, 2),
    "vocab": 64,              # App. F.1: 8,192
    "power_a": 0.1,           # App. F.1 (the reference configs: 0.01)
    "data_seed": 0,           # the same data for every run (App. E.2)
    "steps": 3000,            # App. E.2: 64 epochs of 100,000 examples
    "batch": 64,              # App. E.2: 64 (the reference configs: 512 at N <= 128)
    "train_examples": 100_000,
    "test_examples": 1000,    # App. E.2: 3,000
    "eval_every": 100,
    "stop_at": 0.99,          # the reference's early stopping
    "mlp_mult": 0,            # the reference configs: state mixer Identity (App. E.2's text: an MLP)
    "weight_decay": 0.1,
    "warmup": 0.1,
    "embed_dropout": 0.1,
    "attn_dropout": 0.1,
    "long_conv": "implicit",  # the reference default (ImplicitLongConvolution)
}
#: the learning-rate tuning (part of the grid, not read by the criteria): each mixer at one cell with the
#: paper's four rates (App. E.2: np.logspace(-4, -2, 4)), seed 0; ``FULL["lrs"]`` is each mixer's best here
TUNE = {"N": 32, "D": 4, "d": 16, "lrs": (0.0001, 0.00046415888336127773, 0.002154434690031882, 0.01), "seed": 0}
#: a longer run (part of the grid, not read by the criteria): BaseConv at 4x the steps at one cell, to see
#: whether it leaves the 1/D plateau given more training than the grid can afford
LONG = {"mixer": "baseconv", "N": 32, "D": 4, "d": 64, "steps": 12_000, "seed": 0}
#: ``--quick``: the CI check of the pipeline (tiny cells, not the paper's numbers)
QUICK = {**FULL, "sizes": ((32, 2),), "dims": {"attention": (16,), "baseconv": (16,)}, "seeds": (0,),
         "lrs": {"attention": (1e-2,), "baseconv": (1e-2,)}, "steps": 12, "batch": 16, "train_examples": 192,
         "test_examples": 48, "eval_every": 6, "stop_at": None}

#: what Zoology says about Fig. 2 (top) in its text (the figure is an image: no numbers in the text)
PAPER_CLAIM = ("attention solves MQAR 'perfectly at all sequence lengths' with d = 64; the gated "
               "convolutions do not exceed 0.9 accuracy unless d >= N ('model dimension must scale at least "
               "linearly in sequence length')")


# ====================================================================== data (Zoology App. E.1, reference generator)

def mqar_data(num_examples: int, N: int, D: int, vocab: int, seed: int, *, power_a: float = 0.1):
    """``(inputs, labels)``, (num_examples, N) int64 each: Zoology's MQAR (App. E.1 Algorithm 1 as its
    reference generator ``multiquery_ar`` with ``random_non_queries=False``, the Fig. 2 configs): keys from
    ``[1, V/2)``, values from ``[V/2, V)``, D distinct of each per example in the block ``k0 v0 k1 v1 ...``;
    each key asked again once at position ``2D + 2g``, the gaps ``g`` drawn without replacement from
    ``[0, (N - 2D)/2)`` with probability proportional to ``a (g + 1)^(a - 1)``; the label at a query is its
    value, every other label ``IGNORE`` (-100), every other input 0.  The same distribution as
    ``numerics.training.mqar.mqar`` (another random stream), in memory O(n (N + D)) instead of O(n V), so
    that the paper's vocabulary of 8,192 and 100,000 examples are cheap: the D distinct keys (values) of
    an example are drawn by rejection (rows with a repeat drawn again), a uniform ordered sample without
    replacement as the reference's ``np.random.choice(replace=False)``."""
    import numpy as np

    from numerics.training.mqar import check_mqar, place_mqar

    check_mqar(num_examples, N, D, vocab, power_a)
    rng = np.random.default_rng(seed)
    n, half = num_examples, vocab // 2

    def distinct(lo, hi):
        out = rng.integers(lo, hi, size=(n, D))
        while True:
            s = np.sort(out, axis=1)
            bad = np.nonzero((s[:, 1:] == s[:, :-1]).any(axis=1))[0]
            if not len(bad):
                return out
            out[bad] = rng.integers(lo, hi, size=(len(bad), D))

    keys, values = distinct(1, half), distinct(half, vocab)
    return place_mqar(rng, keys, values, N, power_a)


# ====================================================================== models (Zoology's reference code)

def _torch():
    import torch

    return torch


def build_model(mixer: str, vocab: int, N: int, d: int, *, seed: int = 0, layers: int = 2, mlp_mult: int = 0,
                embed_dropout: float = 0.1, attn_dropout: float = 0.1, long_conv: str = "implicit"):
    """The two-layer language model of Zoology's Fig. 2 reference configs
    (``iclr24_zoology_figure2/configs.py``, ``zoology/model.py``), rebuilt here:

    * token embedding (tied read-out) N(0, 0.02), plus learned positions (``nn.Embedding(N, d)``) for
      attention only (App. E.2: positions for the attention runs only); dropout ``embed_dropout`` (0.1,
      the reference ``embed_dropout``) on the embeddings;
    * per layer the reference ``TransformerBlock``: ``residual += x; x = mixer(LN1(residual));
      residual += x; x = state_mixer(LN2(residual))``, the state mixer ``Identity`` (the Fig. 2 configs;
      the paper's App. E.2 text says an MLP: ``mlp_mult > 0`` gives the reference MLP, fc1, GELU, fc2),
      so each layer's output ``LN2(residual)`` is added to the residual once more by the next layer (or
      the final sum), as in the reference; final ``LN_f(residual + x)``;
    * ``attention``: the reference ``MHA``, one head, causal softmax scaled by 1/sqrt(d), attention
      dropout ``attn_dropout`` (0.1 in the configs);
    * ``baseconv``: the reference ``BaseConv`` with ``kernel_size = [3, -1, ...]``: layer 1 a causal
      depthwise short convolution of width 3 (``nn.Conv1d``, PyTorch's default init), layer 2 a long
      convolution, both as ``y = conv(u) * (u W + b) + u``; the long filter is the reference default
      ``ImplicitLongConvolution`` (``long_conv="implicit"``: an MLP 3 -> 16 -> d of the positional
      features (t, cos, sin), the FFT convolution plus the skip ``u``) or the paper's Listing 1 explicit
      filter (``"explicit"``: one ``randn(d, N)`` filter per channel, FFT convolution plus ``u``);
    * the reference init (``_init_weights``): every ``nn.Linear`` N(0, 0.02) with zero bias (the implicit
      filter's MLP included), every ``out_proj.weight`` / ``fc2.weight`` N(0, 0.02 / sqrt(2 layers)).
    """
    torch = _torch()
    from torch import nn

    if mixer not in MIXERS:
        raise ValueError(f"mixer must be one of {', '.join(MIXERS)}, got {mixer!r}")
    if d < 1 or layers < 1 or N < 2:
        raise ValueError(f"width, layers and N must be positive, got d={d}, layers={layers}, N={N}")
    if long_conv not in ("implicit", "explicit"):
        raise ValueError(f"long_conv must be 'implicit' or 'explicit', got {long_conv!r}")
    if mlp_mult < 0:
        raise ValueError(f"mlp_mult must be >= 0 (0: Identity state mixer), got {mlp_mult}")
    F = nn.functional

    def fft_conv(u, k):
        """u (b, d, L), k (d, L): the causal convolution by FFT plus the skip u (reference ``fft_conv``)."""
        L = u.shape[-1]
        y = torch.fft.irfft(torch.fft.rfft(u, n=2 * L) * torch.fft.rfft(k, n=2 * L), n=2 * L)[..., :L]
        return y + u

    class ShortConv(nn.Module):
        def __init__(self, k=3):
            super().__init__()
            self.conv = nn.Conv1d(d, d, kernel_size=k, groups=d, padding=k - 1)

        def forward(self, x):
            return self.conv(x.transpose(1, 2))[..., :x.shape[1]].transpose(1, 2)

    class ImplicitLongConv(nn.Module):
        def __init__(self):
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
        def __init__(self):
            super().__init__()
            self.filter = nn.Parameter(torch.randn(d, N))

        def forward(self, x):
            return fft_conv(x.transpose(1, 2), self.filter[:, :x.shape[1]]).transpose(1, 2)

    class BaseConv(nn.Module):
        def __init__(self, layer_idx):
            super().__init__()
            self.projection = nn.Linear(d, d)
            short = layer_idx % 2 == 0  # kernel_size [3, -1, 3, -1]
            self.conv = ShortConv(3) if short else (ImplicitLongConv() if long_conv == "implicit" else ExplicitLongConv())

        def forward(self, u):
            return self.conv(u) * self.projection(u) + u

    class MHA(nn.Module):
        def __init__(self):
            super().__init__()
            self.Wqkv = nn.Linear(d, 3 * d)
            self.out_proj = nn.Linear(d, d)

        def forward(self, x):
            q, k, v = self.Wqkv(x).unsqueeze(1).split(d, dim=-1)  # one head: (b, 1, L, d)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                               dropout_p=attn_dropout if self.training else 0.0)
            return self.out_proj(y.squeeze(1))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(d, mlp_mult * d), nn.Linear(mlp_mult * d, d)

        def forward(self, x):
            return self.fc2(F.gelu(self.fc1(x)))

    class Layer(nn.Module):
        def __init__(self, i):
            super().__init__()
            self.sequence_mixer = MHA() if mixer == "attention" else BaseConv(i)
            self.state_mixer = MLP() if mlp_mult else nn.Identity()
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)

        def forward(self, x, residual):
            residual = x if residual is None else x + residual
            x = self.sequence_mixer(self.norm1(residual))
            residual = x + residual
            return self.state_mixer(self.norm2(residual)), residual

    class ZoologyLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.mixer, self.vocab, self.N, self.d = mixer, vocab, N, d
            self.embed = nn.Embedding(vocab, d)
            self.pos = nn.Embedding(N, d) if mixer == "attention" else None
            self.drop = nn.Dropout(embed_dropout)
            self.layers = nn.ModuleList(Layer(i) for i in range(layers))
            self.ln_f = nn.LayerNorm(d)

        def features(self, x):
            h = self.embed(x)
            if self.pos is not None:
                h = h + self.pos(torch.arange(x.shape[1], device=x.device))
            h, residual = self.drop(h), None
            for layer in self.layers:
                h, residual = layer(h, residual)
            return self.ln_f(h + residual)

        def forward(self, x, mask=None):
            h = self.features(x)
            if mask is not None:
                h = h[mask]
            return h @ self.embed.weight.T

    torch.manual_seed(seed)
    model = ZoologyLM()
    with torch.no_grad():
        for name, m in model.named_modules():
            if isinstance(m, nn.Linear):
                std = 0.02 / math.sqrt(2 * layers) if name.endswith(("out_proj", "fc2")) else 0.02
                nn.init.normal_(m.weight, std=std)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Embedding):
                nn.init.normal_(m.weight, std=0.02)
    return model


# ====================================================================== training

def accuracy(model, inputs, labels, batch: int = 500) -> float:
    """Zoology's exact-match accuracy (``numerics.training.mqar.accuracy``; every example has D queries, so
    the reference's per-example mean equals it) on tensors on the model's device."""
    from numerics.training.mqar import accuracy as exact_match

    return exact_match(model, inputs, labels, batch=batch)


def train(model, train_set, test_set, *, lr: float, steps: int, batch: int, weight_decay: float = 0.1,
          warmup: float = 0.1, eval_every: int = 50, stop_at: float | None = None, seed: int = 0,
          device: str = "cpu", deadline: float | None = None) -> dict:
    """AdamW (weight decay 0.1 on every parameter, as the reference), ``warmup`` of the steps linear warm-up
    then cosine decay to 0 (App. E.2), cross-entropy at the query positions; the training set visited in
    shuffled epochs (a fixed order per seed).  Test accuracy every ``eval_every`` steps and at the end;
    stops once it reaches ``stop_at`` (the reference's early stopping at 0.99), or at the first evaluation
    after the wall-clock ``deadline`` (``time.time()``; then ``stopped`` says so)."""
    import time

    import numpy as np

    torch = _torch()
    from torch import nn

    from numerics.training.mqar import IGNORE

    dev = torch.device(device)
    X, Y = (torch.as_tensor(a, device=dev) for a in train_set)
    TX, TY = (torch.as_tensor(a, device=dev) for a in test_set)
    model.to(dev).train()
    gen = np.random.default_rng(seed + 1)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay,
                            **({"fused": True} if dev.type == "cuda" else {}))
    n_warm = max(1, int(round(warmup * steps)))

    def lr_at(s):
        if s < n_warm:
            return lr * (s + 1) / n_warm
        return 0.5 * lr * (1 + math.cos(math.pi * (s - n_warm) / max(1, steps - n_warm)))

    order, pos = torch.as_tensor(gen.permutation(len(X)), device=dev), 0
    hist, best, step, loss_v, stopped = [], 0.0, 0, float("nan"), None
    t0 = time.perf_counter()
    for step in range(1, steps + 1):
        if pos + batch > len(order):
            order, pos = torch.as_tensor(gen.permutation(len(X)), device=dev), 0
        idx = order[pos:pos + batch]
        pos += batch
        x, y = X[idx], Y[idx]
        m = y != IGNORE
        for grp in opt.param_groups:
            grp["lr"] = lr_at(step - 1)
        loss = nn.functional.cross_entropy(model(x, m), y[m])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
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
    import copy
    import time

    torch = _torch()
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


def cell(config: dict) -> dict:
    """Train one two-layer model (:func:`build_model`) on MQAR; the test accuracy history and its best.

    ``config``: mixer, N, D, d, vocab, lr, seed (model initialisation and data order), data_seed (the
    training and test sets, the same for every run as App. E.2 says; default: ``seed``), steps, batch,
    train_examples, test_examples, eval_every, stop_at, power_a, mlp_mult, weight_decay, warmup,
    embed_dropout, attn_dropout, long_conv, device (default cpu).  Under a global deadline
    (``common.cell_budget``: the GPU grid) the cell measures its step time first and runs
    ``min(steps, what fits its share of the time left)`` steps, the schedule laid over those."""
    import time

    torch = _torch()
    from .common import cell_budget, describe_device

    mixer, N, D, d = config["mixer"], int(config["N"]), int(config["D"]), int(config["d"])
    V, seed = int(config["vocab"]), int(config.get("seed", 0))
    if mixer not in MIXERS:
        raise ValueError(f"mixer must be one of {', '.join(MIXERS)}, got {mixer!r}")
    device = config.get("device", "cpu")
    t_start = time.time()
    budget = cell_budget(config)
    torch.set_num_threads(1)
    t0 = time.process_time()
    data_seed = int(config.get("data_seed", seed))
    a = float(config.get("power_a", 0.1))
    tr = mqar_data(int(config["train_examples"]), N, D, V, data_seed, power_a=a)
    te = mqar_data(int(config["test_examples"]), N, D, V, data_seed + 10, power_a=a)
    data_cpu = time.process_time() - t0
    model = build_model(mixer, V, N, d, seed=seed, mlp_mult=int(config.get("mlp_mult", 0)),
                        embed_dropout=float(config.get("embed_dropout", 0.1)),
                        attn_dropout=float(config.get("attn_dropout", 0.1)),
                        long_conv=config.get("long_conv", "implicit"))
    steps, batch, every = int(config["steps"]), int(config["batch"]), int(config["eval_every"])
    plan = None
    if budget is not None:
        left = budget - (time.time() - t_start)
        per_step, per_eval = step_time(model, tr, te, batch=batch, device=device, lr=float(config["lr"]))
        left = budget - (time.time() - t_start)
        # steps + evaluations (one per eval_every steps, at least 10 per run) within 75% of what is left
        # (75%: the card is shared with the other cells, whose load grows once they all train)
        fit = int(0.75 * left / (per_step + per_eval / max(1, min(every, steps // 10 or 1))))
        planned = max(1, min(steps, fit))
        every = max(1, min(every, planned // 10 or 1))
        plan = {"budget_s": round(budget, 1), "step_s": per_step, "eval_s": per_eval, "steps_max": steps,
                "steps_planned": planned, "eval_every": every}
        steps = planned
    res = train(model, tr, te, lr=float(config["lr"]), steps=steps, batch=batch,
                weight_decay=float(config.get("weight_decay", 0.1)), warmup=float(config.get("warmup", 0.1)),
                eval_every=every, stop_at=config.get("stop_at"), seed=seed, device=device,
                deadline=None if budget is None else t_start + budget)
    return {"mixer": mixer, "N": N, "D": D, "d": d, "lr": float(config["lr"]), "vocab": V,
            "params": sum(p.numel() for p in model.parameters()), "data_cpu_s": round(data_cpu, 3),
            "device": describe_device(device), "plan": plan, **res}


def configs(quick: bool) -> list[dict]:
    """The CPU grid (``FULL``; ``QUICK`` with ``quick``): every (mixer, N, d) of the mixer's widths, at each
    of the mixer's learning rates, once per seed; the seed sets the model's initialisation and the data
    order, the data are the same for every run (``data_seed``; App. E.2 keeps the data order constant too).
    The full grid also runs the ``TUNE`` cells (part ``tune``) and the ``LONG`` cell (part ``long``)."""
    f = QUICK if quick else FULL
    out = []
    for sd in f["seeds"]:
        for m in MIXERS:
            for (N, D) in f["sizes"]:
                for d in f["dims"][m]:
                    for lr in f["lrs"][m]:
                        out.append({"mixer": m, "N": N, "D": D, "d": d, "lr": lr, "seed": sd, **_common(f)})
    if quick:
        return out
    tune = [{"mixer": m, "N": TUNE["N"], "D": TUNE["D"], "d": TUNE["d"], "lr": lr, "seed": TUNE["seed"],
             **_common(f), "part": "tune"} for m in MIXERS for lr in TUNE["lrs"]]
    long = [{"mixer": LONG["mixer"], "N": LONG["N"], "D": LONG["D"], "d": LONG["d"], "lr": max(f["lrs"][LONG["mixer"]]),
             "seed": LONG["seed"], **_common(f), "steps": LONG["steps"], "part": "long"}]
    return tune + out + long


#: the GPU grid (``--grid gpu``, ``numerics/experiments/gpu.sh``): the paper's widths (App. F.1: d 64 to 512)
#: at N = 64, 128 with the reference configs' D = N / 16 and batch (512 at N <= 128, 256 at N = 256), the
#: paper's vocabulary 8,192 and alpha = 0.1 (App. F.1), 100,000 training and 3,000 test examples (App. E.2),
#: at most 64 epochs (App. E.2), stopping at 0.99 (the reference's early stopping); one learning rate, the
#: paper's largest (1e-2 of np.logspace(-4, -2, 4)): a first H100 run of 72 cells (N up to 256, three rates)
#: gave every cell under 900 steps, too few to leave the plateau, and 1e-2 was the best rate of every cell
#: that left it; 16 cells on 16 workers give each cell the whole budget.  Each cell's steps are what fits its
#: share of the global budget (``cell``), at most the 64 epochs.
GPU = {"sizes": ((64, 4), (128, 8)), "dims": (64, 128, 256, 512),
       "lrs": (1e-2,), "vocab": 8192, "power_a": 0.1,
       "train_examples": 100_000, "test_examples": 3000, "epochs": 64, "stop_at": 0.99, "seed": 0, "data_seed": 0,
       "batch": {64: 512, 128: 512, 256: 256}}
#: ``--grid gpu --quick`` (the CI smoke test of the GPU script on a CPU): tiny sizes, the same code path
GPU_QUICK = {**GPU, "sizes": ((32, 2),), "dims": (16,), "lrs": (1e-2,), "vocab": 64, "train_examples": 256,
             "test_examples": 32, "epochs": 2, "stop_at": None, "batch": {32: 32}}


def gpu_configs(quick: bool) -> list[dict]:
    """The GPU grid (``GPU``; ``GPU_QUICK`` with ``quick``), in the order the cells should start: the
    larger learning rates first, then by N and d; each config carries its place in that order
    (``order``, ``cells``) for the fair share of the time budget."""
    g = GPU_QUICK if quick else GPU
    out = []
    for lr in g["lrs"]:
        for (N, D) in g["sizes"]:
            for d in g["dims"]:
                for m in MIXERS:
                    batch = g["batch"][N]
                    out.append({"mixer": m, "N": N, "D": D, "d": d, "lr": lr, "seed": g["seed"],
                                "data_seed": g["data_seed"], "vocab": g["vocab"], "power_a": g["power_a"],
                                "train_examples": g["train_examples"], "test_examples": g["test_examples"],
                                "batch": batch, "steps": g["epochs"] * (g["train_examples"] // batch),
                                "eval_every": max(1, g["train_examples"] // batch // 2), "stop_at": g["stop_at"],
                                "mlp_mult": 0, "weight_decay": 0.1, "warmup": 0.1, "embed_dropout": 0.1,
                                "attn_dropout": 0.1, "long_conv": "implicit", "grid": "gpu"})
    for i, c in enumerate(out):
        c.update(order=i, cells=len(out))
    return out


#: the settings every cell of a grid shares (everything but mixer, N, D, d, lr, seed)
SHARED = ("vocab", "power_a", "data_seed", "steps", "batch", "train_examples", "test_examples", "eval_every",
          "stop_at", "mlp_mult", "weight_decay", "warmup", "embed_dropout", "attn_dropout", "long_conv")


def _common(f: dict) -> dict:
    return {k: f[k] for k in SHARED}


# ====================================================================== summary and criteria

def summarise(rows, quick: bool) -> dict:
    """The grid's records as the summary: every run (``runs``), and per (mixer, N, d) the value the criteria
    read (``best``): each learning rate's median over the seeds of the runs' best test accuracy, the
    learning rate with the highest median kept (the paper's "maximum test accuracy" over its sweep, made
    robust to one lucky seed), with the seeds' spread at it."""
    every = rows_ok(rows)
    ok = [r for r in every if not r["config"].get("part")]
    key = lambda x: (x["N"], x["mixer"], x["d"], x["lr"], x["seed"])  # noqa: E731
    extra = {part: sorted((_run_record(r) for r in every if r["config"].get("part") == part), key=key)
             for part in ("tune", "long")}
    runs = sorted((_run_record(r) for r in ok), key=key)
    groups: dict = {}
    for x in runs:
        groups.setdefault((x["mixer"], x["N"], x["d"]), {}).setdefault(x["lr"], []).append(x)
    best = {}
    for (m, N, d), by_lr in groups.items():
        med = {lr: statistics.median(x["best_test_acc"] for x in xs) for lr, xs in by_lr.items()}
        lr = max(sorted(med), key=lambda v: med[v])  # ties: the smaller rate
        xs = sorted(by_lr[lr], key=lambda x: x["seed"])
        accs = [x["best_test_acc"] for x in xs]
        best[f"{m}/{N}/{d}"] = {
            "mixer": m, "N": N, "D": xs[0]["D"], "d": d, "lr": lr, "acc": med[lr], "min": min(accs), "max": max(accs),
            "seeds": [x["seed"] for x in xs], "accs": accs, "reached": sum(a >= THRESHOLD for a in accs),
            "steps_run": max(x["steps_run"] for x in xs),
            # the most steps any run of this (mixer, N, d) ran, at any rate: what a failure here is weighed by
            "ran": max(x["steps_run"] for v in by_lr.values() for x in v),
            "by_lr": {repr(k): v for k, v in sorted(med.items())}}
    cfg = (ok or every)[0]["config"] if every else {}
    s = {"name": NAME, "title": TITLE, "reference": REFERENCE, "quick": quick, "paper_claim": PAPER_CLAIM,
         "threshold": THRESHOLD, "runs": runs, "best": best,
         "config": {k: cfg.get(k) for k in SHARED},
         "lrs": {m: sorted({x["lr"] for x in runs if x["mixer"] == m}) for m in MIXERS},
         "seeds": sorted({x["seed"] for x in runs}), "sizes": sorted({(x["N"], x["D"]) for x in runs}),
         "dims": {m: sorted({x["d"] for x in runs if x["mixer"] == m}) for m in MIXERS}, **extra}
    s["criteria"] = criteria(s)
    return s


def _run_record(r: dict) -> dict:
    """One finished cell as the summary keeps it: its numbers, its history, the step at which its test
    accuracy first reached the threshold (``first_at``, None if never), why it stopped, and under a time
    budget the steps it planned."""
    x = r["result"]
    first = next((h["step"] for h in x["history"] if h.get("test_acc") is not None and h["test_acc"] >= THRESHOLD),
                 None)
    return ({k: x[k] for k in ("mixer", "N", "D", "d", "lr", "best_test_acc", "final_test_acc", "steps_run",
                               "final_train_loss", "params")}
            | {"seed": int(r["config"].get("seed", 0)), "steps": int(r["config"]["steps"]), "history": x["history"],
               "first_at": first, "stopped": x.get("stopped"),
               "steps_planned": (x.get("plan") or {}).get("steps_planned"),
               "cpu_s": r.get("cpu_s"), "wall_s": r.get("wall_s")})


def acc_at(s: dict, mixer: str, N: int, d: int):
    b = s["best"].get(f"{mixer}/{N}/{d}")
    return None if b is None else b["acc"]


def smallest_d(s: dict, mixer: str, N: int):
    """The smallest d of the grid at which ``mixer`` reaches the threshold at N (None: none does)."""
    ds = sorted(b["d"] for b in s["best"].values() if b["mixer"] == mixer and b["N"] == N)
    return next((d for d in ds if acc_at(s, mixer, N, d) >= s["threshold"]), None)


def learn_steps(s: dict, mixer: str):
    """The fewest steps after which a run of ``mixer`` anywhere in the grid had reached the threshold
    (None: no run of it did): the evidence that the mixer learns the task within the grid's training."""
    steps = [x["first_at"] for x in s["runs"] if x["mixer"] == mixer and x.get("first_at") is not None]
    return min(steps) if steps else None


def counts(s: dict, mixer: str, N: int, d: int) -> bool:
    """Whether (mixer, N, d) staying below the threshold counts as evidence: the mixer demonstrably learns
    somewhere in the grid, and this cell's runs trained at least as many steps as that took there.  (A
    cell that stopped earlier, e.g. its share of a GPU budget, says only that its budget was short.)"""
    need, b = learn_steps(s, mixer), s["best"].get(f"{mixer}/{N}/{d}")
    return need is not None and b is not None and b["ran"] >= need


def _combine(parts: list) -> bool | None:
    if any(p is False for p in parts):
        return False
    if not parts or all(p is None for p in parts):
        return None
    return True


def criteria(s: dict) -> list[dict]:
    """Three checks of Claim 1 on the per-(mixer, N, d) values (``best``).  A cell below the threshold counts
    only where the mixer demonstrably learns somewhere in the grid within as many steps (:func:`counts`);
    where it does not, the check is not measured at that N (``None``), never met by default.

    1. attention reaches the threshold at the grid's smallest d, at every N (the paper: d = 64 at every N);
    2. the gap: at every N, BaseConv stays below the threshold at every d up to the smallest d at which
       attention reaches it (so BaseConv needs a larger d, if any);
    3. BaseConv's smallest d reaching the threshold grows from the smallest N of the grid to the largest.
    """
    th = s["threshold"]
    Ns = sorted({b["N"] for b in s["best"].values()})
    out = []
    # 1
    per, notes = {}, []
    for N in Ns:
        ds = sorted(b["d"] for b in s["best"].values() if b["mixer"] == "attention" and b["N"] == N)
        if not ds:
            per[str(N)] = None
            continue
        v = acc_at(s, "attention", N, ds[0])
        per[str(N)] = True if v >= th else (False if counts(s, "attention", N, ds[0]) else None)
        if per[str(N)] is None:
            notes.append(f"N = {N}: attention {fmt(v)} at d = {ds[0]}, trained fewer steps than attention needed "
                         "where it reached the threshold (or it reaches it nowhere): not read")
    dmin = min((b["d"] for b in s["best"].values() if b["mixer"] == "attention"), default=None)
    out.append({"id": "attention-small-d", "text": f"attention reaches {th} at the grid's smallest d"
                + (f" ({dmin})" if dmin is not None else "") + " at every N",
                "met": _combine(list(per.values())), "per_N": per, "d": dmin, "notes": notes})
    # 2
    per, notes = {}, []
    bc_learns = learn_steps(s, "baseconv") is not None
    for N in Ns:
        a = smallest_d(s, "attention", N)
        if a is None:
            per[str(N)] = None
            notes.append(f"N = {N}: attention reaches {th} at no d of the grid")
            continue
        low = sorted((b for b in s["best"].values() if b["mixer"] == "baseconv" and b["N"] == N and b["d"] <= a),
                     key=lambda b: b["d"])
        if not low:
            per[str(N)] = None
            notes.append(f"N = {N}: no BaseConv cell at d <= {a}")
        elif any(b["acc"] >= th for b in low):
            per[str(N)] = False
        elif not bc_learns:
            per[str(N)] = None
            notes.append(f"N = {N}: BaseConv is below {th} at d <= {a}, but it reaches {th} nowhere in the grid: "
                         "no evidence of a gap (it may not have trained long enough anywhere)")
        elif all(counts(s, "baseconv", N, b["d"]) for b in low):
            per[str(N)] = True
        else:
            per[str(N)] = None
            notes.append(f"N = {N}: BaseConv is below {th} at d <= {a}, but trained fewer steps there "
                         f"({', '.join(str(b['ran']) for b in low)}) than the {learn_steps(s, 'baseconv')} after which "
                         f"it reached {th} elsewhere in the grid: not read")
    out.append({"id": "gap", "text": f"BaseConv below {th} at every d up to attention's smallest d reaching it, at "
                                     "every N (it needs a larger d, if any)",
                "met": _combine(list(per.values())), "per_N": per, "notes": notes,
                "smallest": {str(N): {"attention": smallest_d(s, "attention", N),
                                      "baseconv": smallest_d(s, "baseconv", N)} for N in Ns}})
    # 3
    grows, notes = None, []
    if len(Ns) < 2:
        notes.append("the grid has one N")
    else:
        n0, n1 = Ns[0], Ns[-1]
        b0, b1 = smallest_d(s, "baseconv", n0), smallest_d(s, "baseconv", n1)
        if b0 is None:
            notes.append(f"BaseConv reaches {th} at no d at N = {n0}")
        elif b1 is not None:
            grows = b1 > b0
        else:
            below = [b for b in s["best"].values() if b["mixer"] == "baseconv" and b["N"] == n1 and b["d"] <= b0]
            if below and all(counts(s, "baseconv", n1, b["d"]) for b in below):
                grows = True
            else:
                notes.append(f"BaseConv reaches {th} at no d at N = {n1}, where its runs trained fewer steps ("
                             + ", ".join(f"d = {b['d']}: {b['ran']}" for b in sorted(below, key=lambda b: b["d"]))
                             + f") than the {learn_steps(s, 'baseconv')} after which it reached {th} at N = {n0}: "
                             "not read")
    out.append({"id": "grows-with-N", "text": f"BaseConv's smallest d reaching {th} grows with N", "met": grows,
                "notes": notes})
    return out


# ====================================================================== outputs

def table(s: dict) -> list[dict]:
    return [{"mixer": x["mixer"], "N": x["N"], "D": x["D"], "d": x["d"], "lr": x["lr"], "seed": x["seed"],
             "best_test_acc": x["best_test_acc"], "final_test_acc": x["final_test_acc"], "steps_run": x["steps_run"],
             "first_at_threshold": x.get("first_at"), "stopped": x.get("stopped"),
             "final_train_loss": x["final_train_loss"], "params": x["params"], "cpu_s": x["cpu_s"],
             "wall_s": x["wall_s"]} for x in s["runs"]]


def plot(s: dict):
    """One panel per N: each mixer's value per d (the median over seeds at its best learning rate; bars: the
    seeds' range), the threshold, 1/D (the accuracy of answering with one of the D values of the context
    without matching the key: the plateau) and d = N."""
    import matplotlib.pyplot as plt

    Ns = sorted({b["N"] for b in s["best"].values()}) or [64]
    Ds = {N: D for N, D in s["sizes"]} if s.get("sizes") else {}
    fig, axes = plt.subplots(1, len(Ns), figsize=(5 * len(Ns), 4.8), squeeze=False)
    for ax, N in zip(axes[0], Ns):
        for i, m in enumerate(MIXERS):
            bs = sorted((b for b in s["best"].values() if b["mixer"] == m and b["N"] == N), key=lambda b: b["d"])
            if not bs:
                continue
            ds, acc = [b["d"] for b in bs], [b["acc"] for b in bs]
            err = [[a - b.get("min", a) for a, b in zip(acc, bs)], [b.get("max", a) - a for a, b in zip(acc, bs)]]
            n = max(len(b.get("accs", [0])) for b in bs)
            ax.errorbar(ds, acc, yerr=err, fmt="o-", color=f"C{i}", capsize=3,
                        label=m + (f" (median of {n} seeds, bars: range)" if n > 1 else ""))
            if n > 1:  # every seed's run at the kept rate, slightly apart so that equal values stay visible
                for b in bs:
                    ax.plot([b["d"] * (1.04 if i else 0.96)] * len(b["accs"]), b["accs"], ".", color=f"C{i}",
                            alpha=0.5, ms=5)
        ax.axhline(s["threshold"], color="grey", ls=":", lw=1, label=f"threshold {s['threshold']}")
        if N in Ds:
            ax.axhline(1 / Ds[N], color="C3", ls="-.", lw=1, label=f"1/D = {fmt(1 / Ds[N])} (no key match)")
        ax.axvline(N, color="grey", ls="--", lw=0.8, label="d = N")
        ax.set_xscale("log", base=2)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("model dimension d")
        ax.set_ylabel("best test accuracy")
        ax.set_title(f"N = {N}" + (f", D = {Ds[N]}" if N in Ds else ""), fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, frameon=False)
    dev = (s.get("device") or {}).get("name")
    fig.suptitle("Seed 003 MQAR (cf. Zoology Fig. 2 top)" + (" [--quick]" if s["quick"] else "")
                 + (f" on {dev}" if dev else ""), fontsize=10)
    fig.tight_layout()
    return fig


def _cell_text(b: dict | None, *, steps: bool = False) -> str:
    """A table cell: the median over seeds (with the seeds' range when there are several), [the learning
    rate kept], and with ``steps`` the steps run."""
    if b is None:
        return "–"
    n = len(b.get("accs", [b["acc"]]))
    text = fmt(b["acc"]) + (f" ({fmt(b['min'])}–{fmt(b['max'])})" if n > 1 else "")
    return text + f" [{fmt(b['lr'])}" + (f", {b['steps_run']:,} steps" if steps else "") + "]"


def results_table(s: dict, *, steps: bool = False) -> list[str]:
    dims = sorted({b["d"] for b in s["best"].values()})
    L = ["| N | D | mixer | " + " | ".join(f"d = {d}" for d in dims) + " |", "|---|---|---|" + "---|" * len(dims)]
    for N, D in s["sizes"]:
        for m in MIXERS:
            L.append(f"| {N} | {D} | {m} | "
                     + " | ".join(_cell_text(s["best"].get(f"{m}/{N}/{d}"), steps=steps) for d in dims) + " |")
    return L


def criteria_lines(s: dict) -> list[str]:
    L = []
    for cr in s["criteria"]:
        unread = [N for N, v in (cr.get("per_N") or {}).items() if v is None]
        L.append(f"* {cr['text']}: {verdict(cr['met'])}"
                 + (f" where read (not read at N = {', '.join(unread)})" if cr["met"] is not None and unread else "")
                 + ".")
        if cr.get("per_N"):
            L.append("  Per N: " + ", ".join(f"N = {N}: " + ("–" if v is None else ("yes" if v else "no"))
                                          for N, v in cr["per_N"].items()) + ".")
        if cr["id"] == "gap":
            L.append("  Smallest d reaching the threshold: " + "; ".join(
                f"N = {N}: attention {v['attention'] or 'none'}, BaseConv {v['baseconv'] or 'none'}"
                for N, v in cr["smallest"].items()) + ".")
        for n in cr.get("notes", []):
            L.append(f"  {n[0].upper() + n[1:]}.")
    return L


def plateau_lines(s: dict) -> list[str]:
    """Per mixer and N: how many runs left the 1/D plateau (best accuracy above 1.5/D) and how many reached
    the threshold, and where a run's training loss fell far below log D while its test accuracy stayed near
    1/D (it fitted the training set without learning the lookup)."""
    th = s["threshold"]
    L = []
    for m in MIXERS:
        parts = []
        for N, D in s["sizes"]:
            rs = [x for x in s["runs"] if x["mixer"] == m and x["N"] == N]
            if rs:
                parts.append(f"N = {N} (1/D = {fmt(1 / D)}): {sum(x['best_test_acc'] > 1.5 / D for x in rs)} of "
                             f"{len(rs)} runs left the plateau, {sum(x['best_test_acc'] >= th for x in rs)} reached {th}")
        if parts:
            L.append(f"* {m}: " + "; ".join(parts) + ".")
    memo = [x for x in s["runs"] if x["final_train_loss"] is not None and math.isfinite(x["final_train_loss"])
            and x["final_train_loss"] < 0.25 * math.log(x["D"]) and x["best_test_acc"] < 0.75]
    if memo:
        L.append("* Fitted the training set without learning the lookup (final training loss below a quarter of "
                 "log D, best test accuracy below 0.75): " + "; ".join(
                     f"{x['mixer']}, N = {x['N']}, d = {x['d']}, seed {x['seed']}: training loss "
                     f"{fmt(x['final_train_loss'])}, test {fmt(x['best_test_acc'])}" for x in memo)
                 + f". With {s['config']['train_examples']:,} training examples a wide model can memorise them: "
                 "these cells say nothing about the width the lookup needs.")
    logv = math.log(s["config"]["vocab"] or 2)
    high = [x for x in s["runs"] if x["final_train_loss"] is not None and math.isfinite(x["final_train_loss"])
            and x["final_train_loss"] > (logv + math.log(x["D"])) / 2 and x["best_test_acc"] < 1.5 / x["D"]]
    if high:
        L.append("* Training loss at the end nearer log V (a uniform guess over the vocabulary) than log D (the plateau "
                 "of the D context values): " + "; ".join(
                     f"{x['mixer']}, N = {x['N']}, d = {x['d']}, lr {fmt(x['lr'])}, seed {x['seed']}: "
                     f"{fmt(x['final_train_loss'])}" for x in high)
                 + f" (log V = {fmt(logv)}): an optimisation that had not even reached the plateau at this learning "
                 "rate and width (the paper sweeps four rates per cell and keeps the best).")
    return L


def differences(s: dict) -> list[str]:
    """Every remaining difference between this grid and the paper (App. E.2, F.1) and its reference code
    (the Fig. 2 configs), read from the grid's settings."""
    c = s["config"]
    dims = sorted({b["d"] for b in s["best"].values()})
    sizes = ", ".join(f"({N}, {D})" for N, D in s["sizes"])
    L = []

    def add(same, text):
        if not same:
            L.append(text)
    add(c["vocab"] == 8192, f"vocabulary {c['vocab']:,} (App. F.1: 8,192)")
    add(set(N for N, _ in s["sizes"]) >= {64, 128, 256, 512},
        f"(N, D) = {sizes} (App. F.1: N = 64 to 512; the reference configs: D = N/16, (64, 4), (128, 8), (256, 16))")
    add(set(dims) >= {64, 128, 256, 512}, f"d = {', '.join(map(str, dims))} (App. F.1: 64, 128, 256, 512)")
    n_lrs = {m: len(v) for m, v in s["lrs"].items()}
    L.append("learning rates per mixer " + "; ".join(f"{m} {', '.join(fmt(x) for x in v)}" for m, v in s["lrs"].items())
             + " (App. E.2: the four of np.logspace(-4, -2, 4) for every cell, the best kept)"
             if any(n < 4 for n in n_lrs.values()) else "")
    L.append(f"{len(s['seeds'])} seed(s) per cell, the median over them kept at each learning rate (the paper: one "
             "run per cell and learning rate)" + ("; the seed sets the initialisation and the order in which the "
                                                   "training set is visited (App. E.2 keeps the data order constant; "
                                                   "the data here are the same for every run)"
                                                   if len(s["seeds"]) > 1 else ""))
    epochs = c["steps"] * c["batch"] / c["train_examples"]
    add(False, f"at most {c['steps']:,} steps of batch {c['batch']} ({c['steps'] * c['batch']:,} sequences, "
               f"{fmt(epochs)} epochs of {c['train_examples']:,} training examples; App. E.2: 64 epochs of 100,000, "
               "batch 64; the reference configs: batch 512 at N <= 128), a warm-up of "
               f"{int(100 * c['warmup'])}% and the cosine decay laid over those steps")
    add(c["test_examples"] == 3000, f"{c['test_examples']:,} test examples (App. E.2: 3,000)")
    add(c["power_a"] == 0.1, f"alpha = {c['power_a']} (App. F.1: 0.1; the reference configs 0.01)")
    if c["power_a"] == 0.1:
        L.append("alpha = 0.1 as App. F.1 (the reference configs use 0.01)")
    L.append("no MLP after each mixer, as the reference configs (state mixer Identity); App. E.2's text says one "
             "sequence mixer and one MLP per layer")
    if c.get("stop_at"):
        L.append(f"a run stops once its test accuracy reaches {c['stop_at']}, and a cell reports the best test "
                 "accuracy over its evaluations (every "
                 f"{c['eval_every']} steps)")
    add((c.get("long_conv") or "implicit") == "implicit",
        f"BaseConv's long filter {c.get('long_conv')} (the reference configs: the implicit filter)")
    return [x for x in L if x]


def markdown(s: dict, figure: str) -> str:
    c = s["config"]
    L = []
    L.append(f"MQAR as Zoology App. E.1 (Algorithm 1 and the reference generator, `random_non_queries=False`): "
             f"vocabulary {c['vocab']:,}, (N, D) = " + ", ".join(f"({N}, {D})" for N, D in s["sizes"])
             + f", power law alpha = {c['power_a']} on the query gaps, the same data for every run. Models as the "
             "reference code's Fig. 2 configs (`build_model`): two layers, each a sequence mixer with pre-LayerNorm "
             "residuals, tied read-out, the reference init and dropout; attention: one causal softmax head with "
             "learned positions; BaseConv: the reference BaseConv with a width-3 short convolution in layer 1 and "
             f"the {c.get('long_conv') or 'implicit'} long convolution in layer 2, no positions. AdamW (weight decay "
             f"{c['weight_decay']}), {int(100 * c['warmup'])}% linear warm-up then cosine decay, batch {c['batch']}, "
             f"at most {c['steps']:,} steps on {c['train_examples']:,} training examples, test accuracy on "
             f"{c['test_examples']:,} examples every {c['eval_every']} steps. Learning rates tuned per mixer: each "
             "(mixer, N, d) runs every rate of its mixer with seeds " + ", ".join(map(str, s["seeds"]))
             + " (initialisation and data order); a cell's value is the median over the seeds at the rate with the "
             "highest median, the seeds' range beside it.")
    L.append("")
    L.append("**Differences from the paper and its reference code** (everything else as they are): "
             + "; ".join(differences(s)) + ".")
    L.append("")
    L.append(f"The paper (Sec. 4.3, Fig. 2 top, Claim 1): {s['paper_claim']}. The figure is an image; the text gives "
             "no per-point accuracies, so the comparison is with these statements.")
    L.append("")
    L.append("Test accuracy per cell: the median over seeds (their range) [the learning rate kept]:")
    L.append("")
    L.extend(results_table(s))
    L.append("")
    L.append(f"![seed 003 MQAR]({figure})")
    L.append("")
    L.append("**Pass criteria** (a cell below the threshold counts only where that mixer demonstrably reaches it "
             "somewhere in the grid within as many steps)")
    L.append("")
    L.extend(criteria_lines(s))
    L.append("")
    L.extend(cpu_reading(s))
    L.append("")
    L.extend(plateau_lines(s))
    L.append("")
    for part in (long_lines(s), tuning_lines(s)):
        if part:
            L.extend(part)
            L.append("")
    miss = (s.get("run") or {}).get("failures") or []
    grid = {json.dumps(c, sort_keys=True) for c in configs(s["quick"])}
    gone = [f for f in miss if json.dumps(f["config"], sort_keys=True) not in grid]
    miss = [f for f in miss if f not in gone]
    if miss:
        L.append("**Cells without a result** (the table uses the other runs only): "
                 + "; ".join(f"{f['config'].get('mixer')}, N = {f['config'].get('N')}, d = {f['config'].get('d')}, "
                             f"lr {fmt(f['config'].get('lr'))}, seed {f['config'].get('seed', 0)} "
                             f"({f.get('error') or 'failed'})" for f in miss) + ".")
        L.append("")
    if gone:
        errors = sorted({f.get("error") or "failed" for f in gone})
        L.append(f"**Cells the grid no longer has.** The run's command also started {len(gone)} cells that the grid "
                 "as committed does not contain (" + ", ".join(sorted({f"N = {f['config'].get('N')}" for f in gone}))
                 + "); each failed at once, before training: " + "; ".join(errors) + ". They are counted in the cost "
                 "line's cells and failures, and in no result.")
        L.append("")
    per = {f"{m} cells": sum(x["cpu_s"] or 0 for x in s["runs"] if x["mixer"] == m) for m in MIXERS}
    per |= {f"{part} cells": sum(x["cpu_s"] or 0 for x in s.get(part) or []) for part in ("tune", "long")
            if s.get(part)}
    L.append(f"**Cost.** {timing_line(s)}. CPU: " + ", ".join(f"{k} {fmt_seconds(v)}" for k, v in per.items()) + ".")
    return "\n".join(L)


def tuning_lines(s: dict) -> list[str]:
    """The learning-rate tuning cells (``TUNE``) as a table, and whether the grid runs each mixer at the rate
    that did best there."""
    tune = s.get("tune") or []
    if not tune:
        return []
    lrs = sorted({x["lr"] for x in tune})
    x0 = tune[0]
    L = [f"**Learning rates, tuned per mixer** (part of the grid, not read by the criteria): N = {x0['N']}, "
         f"d = {x0['d']}, seed {x0['seed']}, each of the paper's rates (App. E.2: np.logspace(-4, -2, 4)); best test "
         "accuracy (steps run):", "",
         "| mixer | " + " | ".join(f"lr {fmt(lr)}" for lr in lrs) + " | kept for the grid |",
         "|---|" + "---|" * (len(lrs) + 1)]
    notes = []
    for m in MIXERS:
        mine = {x["lr"]: x for x in tune if x["mixer"] == m}
        if not mine:
            continue
        top = tuned_lr(list(mine.values()), s["config"]["test_examples"], s["threshold"])
        grid_lrs = (s.get("lrs") or {}).get(m, [])
        L.append(f"| {m} | " + " | ".join(f"{fmt(mine[lr]['best_test_acc'])} ({mine[lr]['steps_run']:,})" if lr in mine
                                          else "–" for lr in lrs)
                 + f" | {', '.join(fmt(v) for v in grid_lrs)} |")
        if top not in grid_lrs:
            notes.append(f"{m}: the rule picks {fmt(top)}, the grid ran {', '.join(map(fmt, grid_lrs))} (here: "
                         + ", ".join(f"lr {fmt(lr)}: accuracy {fmt(mine[lr]['best_test_acc'])}, final training loss "
                                     f"{fmt(mine[lr]['final_train_loss'])}"
                                     for lr in sorted(set(grid_lrs) | {top}) if lr in mine)
                         + "); the grid's rate was fixed before these cells ran")
    L.append("")
    L.append("The rule (`tuned_lr`): the run that reached the threshold in the fewest steps; if none did, the highest "
             "best test accuracy, where accuracies within two standard errors of it (sqrt(p (1 - p) / (test "
             "examples x D)) count as a tie, broken by the lowest final training loss. "
             + ("Each mixer's grid rate is its tuned rate." if not notes else
                "**Not the tuned rate:** " + "; ".join(notes) + "."))
    return L


def tuned_lr(runs: list[dict], test_examples: int, threshold: float) -> float:
    """The learning rate the tuning cells pick for one mixer: among runs that reached ``threshold`` the one
    that did so in the fewest steps; else the highest best test accuracy, accuracies within two standard
    errors of it (binomial, ``test_examples x D`` queries) counting as ties broken by the lowest final
    training loss (on the 1/D plateau the accuracies differ by noise, the loss still orders the runs)."""
    reached = [x for x in runs if x.get("first_at") is not None]
    if reached:
        return min(reached, key=lambda x: (x["first_at"], x["lr"]))["lr"]
    top = max(x["best_test_acc"] for x in runs)
    se = math.sqrt(max(top * (1 - top), 1e-12) / (test_examples * runs[0]["D"]))
    tied = [x for x in runs if x["best_test_acc"] >= top - 2 * se]
    return min(tied, key=lambda x: (x["final_train_loss"], x["lr"]))["lr"]


def long_lines(s: dict) -> list[str]:
    """The longer BaseConv run (``LONG``) beside the grid's cell."""
    L = []
    for x in s.get("long") or []:
        g = [r for r in s["runs"] if (r["mixer"], r["N"], r["d"], r["seed"], r["lr"]) ==
             (x["mixer"], x["N"], x["d"], x["seed"], x["lr"])]
        L.append(f"**A longer run** (part of the grid, not read by the criteria): {x['mixer']}, N = {x['N']}, "
                 f"d = {x['d']}, lr {fmt(x['lr'])}, seed {x['seed']}, {x['steps']:,} steps (the grid's cells: at most "
                 f"{s['config']['steps']:,}): best test accuracy {fmt(x['best_test_acc'])} (1/D = {fmt(1 / x['D'])})"
                 + (f", first at or above {s['threshold']} at step {x['first_at']:,}" if x.get("first_at") else
                    f", never {s['threshold']}")
                 + f", final training loss {fmt(x['final_train_loss'])} (log D = {fmt(math.log(x['D']))})"
                 + (f"; the same cell in the grid: {fmt(g[0]['best_test_acc'])} after {g[0]['steps_run']:,} steps"
                    if g else "") + ".")
    return L


def cpu_reading(s: dict) -> list[str]:
    """What the grid shows about Claim 1, from the values, the runs and the criteria's verdicts."""
    th = s["threshold"]
    crit = {c["id"]: c for c in s["criteria"]}
    sm = crit["gap"]["smallest"]
    D = dict(s["sizes"])

    def runs_line(m):
        rs = [x for x in s["runs"] if x["mixer"] == m]
        hit = sorted((x for x in rs if x["best_test_acc"] >= th), key=lambda x: (x["N"], x["d"], x["seed"]))
        return (f"{len(hit)} of {len(rs)} runs reached it"
                + (" (" + ", ".join(f"N = {x['N']}, d = {x['d']}, seed {x['seed']}: {fmt(x['best_test_acc'])}"
                                   + (f" from step {x['first_at']:,}" if x.get("first_at") else "") for x in hit) + ")"
                   if hit else ""))
    att = "; ".join(f"N = {N}: " + (f"from d = {v['attention']}" if v["attention"] else "at no d of the grid")
                    for N, v in sm.items())
    bc_best = {N: max((b for b in s["best"].values() if b["mixer"] == "baseconv" and b["N"] == N),
                      key=lambda b: b["acc"], default=None) for N in D}
    L = [f"**What this grid shows.** Attention reaches {th} (median over seeds) {att}; {runs_line('attention')}. "
         f"BaseConv: {runs_line('baseconv')}"
         + ("; its best cell " + "; ".join(f"N = {N}: {fmt(b['acc'])} at d = {b['d']} (1/D = {fmt(1 / D[N])})"
                                          for N, b in bc_best.items() if b)
            if not any(v["baseconv"] for v in sm.values()) else "") + "."]
    att_ok, bc_any = crit["attention-small-d"]["met"], any(v["baseconv"] for v in sm.values())
    steps = f"{s['config']['steps']:,} steps of batch {s['config']['batch']}"
    if not bc_any and not att_ok:
        L.append(f"At this budget ({steps} per run) neither side of Claim 1 shows: the step at which a run leaves the "
                 "1/D plateau varies with the seed, and most runs of either mixer had not left it when their steps ran "
                 "out, so the criteria are not met or not read, and this grid is no evidence about the width either "
                 "mixer needs. The GPU section below tests the claim at the paper's sizes with up to the paper's "
                 "training.")
    elif not bc_any:
        L.append(f"Within the CPU budget ({steps} per run) BaseConv does not get past the plateau at any width, so this "
                 "grid cannot show the width BaseConv needs, the BaseConv side of Claim 1: the gap and the growth with "
                 "N are not read here, never met by default. The GPU section below shows what more training gives "
                 "BaseConv.")
    else:
        L.append(("BaseConv needs a larger d than attention at every N of the grid, the ordering of Claim 1 at these "
                  "sizes." if crit["gap"]["met"] else "The gap is not shown at every N (see the criteria above)."))
    return [" ".join(L)]


def gpu_reading(s: dict) -> list[str]:
    """What the GPU run shows per N: the smallest d at which each mixer reaches the threshold, the steps its
    cells ran, and whether BaseConv's cells below the threshold trained long enough to be read."""
    th = s["threshold"]
    need = learn_steps(s, "baseconv")
    parts = []
    for N, _ in s["sizes"]:
        a, b = smallest_d(s, "attention", N), smallest_d(s, "baseconv", N)
        bs = sorted((x for x in s["best"].values() if x["mixer"] == "baseconv" and x["N"] == N), key=lambda x: x["d"])
        text = f"N = {N}: attention from d = {a}" if a else f"N = {N}: attention at no d"
        if b:
            below = [x for x in bs if x["d"] < b]
            text += (f", BaseConv from d = {b} ({fmt(b / N)} N)"
                     + ("; below it " + ", ".join(f"d = {x['d']}: {fmt(x['acc'])} after {x['ran']:,} steps" for x in below)
                        if below else ""))
        elif bs:
            ran = [x["ran"] for x in bs]
            text += (f", BaseConv at no d (best {fmt(max(x['acc'] for x in bs))}); its cells ran {min(ran):,} to "
                     f"{max(ran):,} steps" + (f", fewer than the {need:,} after which BaseConv reached {th} elsewhere in "
                                             "the grid: not read" if need and max(ran) < need else ""))
        parts.append(text)
    gap = next(c for c in s["criteria"] if c["id"] == "gap")
    read = [N for N, v in gap["per_N"].items() if v is not None]
    tail = ""
    if gap["met"] and read:
        sm = gap["smallest"]
        at_least_N = [N for N in read if sm[N]["baseconv"] and sm[N]["baseconv"] >= int(N)]
        tail = (f" Where read (N = {', '.join(read)}), BaseConv needs a larger d than attention, the ordering of Claim 1"
                + (f", and at least d = N (N = {', '.join(at_least_N)}), as the paper states" if at_least_N else "") + ".")
    return ["**What the GPU run shows.** " + "; ".join(parts) + "." + tail]


def gpu_markdown(s: dict, figure: str) -> str:
    """The GPU section (``docs/experiments/gpu/seed003-mqar``, run by ``numerics/experiments/gpu.sh``): what
    ran, the steps each cell ran, the criteria on what ran."""
    c = s["config"]
    run = s["run"]
    th = s["threshold"]
    L = []
    L.append(f"The GPU grid (`--grid gpu`): the paper's sizes, vocabulary {c['vocab']:,} and alpha = {c['power_a']} "
             f"(App. F.1), (N, D) = " + ", ".join(f"({N}, {D})" for N, D in s["sizes"])
             + f" (the reference configs' D = N/16), d = {', '.join(map(str, sorted({b['d'] for b in s['best'].values()})))}, "
             f"{c['train_examples']:,} training and {c['test_examples']:,} test examples (App. E.2), batch {c['batch']} "
             f"(the reference configs'), learning rate "
             + ", ".join(fmt(x) for x in sorted({x['lr'] for x in s['runs']}))
             + f" only (the largest of the paper's four), seed(s) {', '.join(map(str, s['seeds']))}, at most 64 epochs "
             f"({c['steps']:,} steps), a run stopping at {c['stop_at']}; the models as the CPU grid's. The cells shared "
             f"one wall-clock budget of {fmt(run.get('budget_s'))} s on the card ({run['workers']} at a time): each "
             "measured its step time and ran the steps that fitted (the warm-up and cosine schedule laid over them), "
             "so the cells ran different numbers of steps: in brackets below.")
    L.append("")
    L.append("Test accuracy [learning rate, steps run]:")
    L.append("")
    L.extend(results_table(s, steps=True))
    L.append("")
    first = sorted((x for x in s["runs"] if x.get("first_at") is not None), key=lambda x: (x["mixer"], x["N"], x["d"]))
    if first:
        L.append(f"Step at which a run first reached {th}: " + "; ".join(
            f"{x['mixer']}, N = {x['N']}, d = {x['d']}: {x['first_at']:,}" for x in first) + ".")
        L.append("")
    L.append(f"![seed 003 MQAR on {s['device'].get('name') if s.get('device') else 'a GPU'}]({figure})")
    L.append("")
    L.extend(gpu_reading(s))
    L.append("")
    L.append("**Criteria, on what ran** (a cell below the threshold counts only where that mixer reached it somewhere "
             "in the grid within as many steps)")
    L.append("")
    L.extend(criteria_lines(s))
    L.append("")
    L.extend(plateau_lines(s))
    L.append("")
    L.append(gpu_cost_line(s))
    return "\n".join(L)


__all__ = ["NAME", "TITLE", "REFERENCE", "FULL", "QUICK", "cell", "configs", "gpu_configs", "summarise", "criteria",
           "table", "plot", "markdown", "gpu_markdown", "smallest_d", "acc_at", "learn_steps", "counts", "mqar_data",
           "build_model", "train"]
