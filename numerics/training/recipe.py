"""The high-precision training recipe of seed 000 Sec. 5.1 / App. B.2, and the baseline.

* Adam with ``eps = 1e-16`` (official code).
* :class:`AdaptiveLR`: every ``step_size`` steps the LR is multiplied by
  ``gamma`` (floor ``min_lr``), unless the smoothed gradient-cosine metric
  (:func:`cosine_metric`, seed 000 eq. (6)) is below ``threshold`` after
  ``warmup`` steps, in which case it is divided by ``gamma``.  The metric is
  smoothed by an EMA ``m <- lam m + (1 - lam) sigma_g`` starting at 1.0
  (official code: lambda 0.9, threshold 0.9, step 3000, metric every 1000
  steps from 64 fresh minibatches).  ``anneal_from`` (default None: never):
  from that step on every decision multiplies the LR by ``gamma``, the
  metric and ``min_lr`` no longer counting (a final anneal after a floor).
* :class:`StepLR` (``torch.optim.lr_scheduler.StepLR`` semantics): the
  standard baseline of App. B.2 Table 4.
* Two different "EMA"s, named for what they do:

  - :class:`GradFilterEMA` (``ema="grad-filter"``): the official code's
    filter applied to the gradient *before* Adam:
    ``e <- decay e + (1 - decay) g;  g <- g + lam e`` (decay 0.98, lam 2);
    a low-pass amplifier of the slow gradient component (Grokfast-style,
    Lee et al. 2024).
  - :class:`UpdateEMA` (``ema="update"``): what the paper's text says, an
    EMA over Adam's *update vectors*: Adam computes its step
    ``delta = p_adam - p``; the parameters move by
    ``m <- decay m + (1 - decay) delta`` (bias-corrected by
    ``1 - decay^t``) instead of ``delta``.

* Step skipping: a step whose gradient norm exceeds ``skip_grad_norm``
  (1e3) or is not finite is not taken (counted in the log).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

from .names import EMA_READS, RECIPE_PRESETS, SCHEDULER_READS


@dataclass
class RecipeConfig:
    """Optimiser settings; defaults are the paper's recipe (App. B.2 Table 5)."""

    lr: float = 1e-2
    scheduler: str = "adaptive"  # adaptive | steplr | constant
    step_size: int = 3000
    gamma: float = 0.9
    min_lr: float = 1e-10
    max_lr: float | None = None  # optional cap for the adaptive increase (None: none, as official)
    anneal_from: int | None = None  # adaptive: from this step, lr x gamma at every decision (None: never)
    threshold: float = 0.9  # sigma_th
    metric_lambda: float = 0.9  # EMA of the metric
    metric_every: int = 1000
    metric_batches: int = 64
    metric_pairs: str = "all"  # all (eq. (6)) | consecutive (official code)
    warmup: int = 1000  # no LR increase before this step
    ema: str = "grad-filter"  # grad-filter | update | none
    ema_decay: float = 0.98
    ema_lambda: float = 2.0
    adam_eps: float = 1e-16
    betas: tuple[float, float] = (0.9, 0.999)
    skip_grad_norm: float = 1e3

    @classmethod
    def paper(cls, **kw) -> "RecipeConfig":
        """App. B.2 Table 5 (``names.RECIPE_PRESETS['paper']``: the defaults)."""
        return cls(**{**RECIPE_PRESETS["paper"], **kw})

    @classmethod
    def standard(cls, **kw) -> "RecipeConfig":
        """App. B.2 Table 4: Adam lr 1e-3, StepLR step 1e4 gamma 0.9, no EMA (``names.RECIPE_PRESETS``)."""
        return cls(**{**RECIPE_PRESETS["standard"], **kw})

    def to_json(self):
        d = asdict(self)
        d["betas"] = list(self.betas)
        return d


# --------------------------------------------------------------------------- metric

def flat_grad(params) -> torch.Tensor:
    return torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])


def cosine_metric(grads: list[torch.Tensor], pairs: str = "all") -> float:
    """Average cosine similarity of minibatch gradients, seed 000 eq. (6).

    ``pairs="all"``: the mean over all pairs i != j (eq. (6));
    ``"consecutive"``: the mean over (g_i, g_{i+1}) (official code)."""
    G = torch.stack([g / g.norm().clamp_min(1e-300) for g in grads])
    n = G.shape[0]
    if n < 2:
        raise ValueError("the cosine metric needs at least 2 gradients")
    if pairs == "consecutive":
        return float((G[:-1] * G[1:]).sum(1).mean())
    S = G @ G.T
    return float((S.sum() - S.diagonal().sum()) / (n * (n - 1)))


# --------------------------------------------------------------------------- schedulers

class AdaptiveLR:
    """Cosine-metric driven LR (module docstring); state is JSON-able."""

    def __init__(self, cfg: RecipeConfig):
        self.cfg = cfg
        self.lr = cfg.lr
        self.metric_ema = 1.0
        self.last_metric = float("nan")
        self.increases = 0
        self.decreases = 0

    def observe(self, metric: float):
        self.last_metric = metric
        lam = self.cfg.metric_lambda
        self.metric_ema = lam * self.metric_ema + (1 - lam) * metric

    def step(self, step: int) -> float:
        """Called after optimiser step number ``step`` (1-based); returns the new LR."""
        c = self.cfg
        if step % c.step_size == 0:
            if c.anneal_from is not None and step > c.anneal_from:
                self.lr = self.lr * c.gamma
                self.decreases += 1
            elif step > c.warmup and self.metric_ema < c.threshold:
                self.lr = self.lr / c.gamma
                if c.max_lr is not None:
                    self.lr = min(self.lr, c.max_lr)
                self.increases += 1
            else:
                self.lr = max(self.lr * c.gamma, c.min_lr)
                self.decreases += 1
        return self.lr

    def state(self):
        return {"lr": self.lr, "metric_ema": self.metric_ema, "last_metric": self.last_metric,
                "increases": self.increases, "decreases": self.decreases}

    def load(self, st):
        self.lr, self.metric_ema = st["lr"], st["metric_ema"]
        self.last_metric = st.get("last_metric", float("nan"))
        self.increases, self.decreases = st.get("increases", 0), st.get("decreases", 0)


class StepLR(AdaptiveLR):
    """lr = lr0 * gamma^(step // step_size) (torch StepLR); ``constant`` if scheduler='constant'."""

    def step(self, step: int) -> float:
        c = self.cfg
        if c.scheduler == "steplr" and step % c.step_size == 0:
            self.lr = max(self.lr * c.gamma, c.min_lr)
            self.decreases += 1
        return self.lr


def make_scheduler(cfg: RecipeConfig):
    """The scheduler ``cfg.scheduler`` names; it reads the settings ``names.SCHEDULER_READS`` lists
    for it (and ``lr``), no other."""
    if cfg.scheduler not in SCHEDULER_READS:
        raise ValueError(f"unknown scheduler {cfg.scheduler!r} ({' | '.join(SCHEDULER_READS)})")
    return AdaptiveLR(cfg) if cfg.scheduler == "adaptive" else StepLR(cfg)


# --------------------------------------------------------------------------- EMAs

class GradFilterEMA:
    """Official-code gradient filter: e <- d e + (1-d) g; g <- g + lam e (before Adam)."""

    name = "grad-filter"

    def __init__(self, params, decay: float, lam: float):
        self.params, self.decay, self.lam = list(params), decay, lam
        self.buf = [torch.zeros_like(p) for p in self.params]

    def before_step(self):
        for p, e in zip(self.params, self.buf):
            if p.grad is None:
                continue
            e.mul_(self.decay).add_(p.grad, alpha=1 - self.decay)
            p.grad.add_(e, alpha=self.lam)

    def after_step(self, saved):
        pass

    def save_params(self):
        return None

    def state(self):
        return {f"ema.{i}": e for i, e in enumerate(self.buf)}

    def load(self, tensors):
        for i, e in enumerate(self.buf):
            e.copy_(tensors[f"ema.{i}"])


class UpdateEMA:
    """EMA over Adam's update vectors (the paper's text): p <- p_old + EMA(delta)."""

    name = "update"

    def __init__(self, params, decay: float):
        self.params, self.decay = list(params), decay
        self.buf = [torch.zeros_like(p) for p in self.params]
        self.t = 0

    def before_step(self):
        pass

    def save_params(self):
        return [p.detach().clone() for p in self.params]

    @torch.no_grad()
    def after_step(self, saved):
        self.t += 1
        corr = 1.0 - self.decay ** self.t
        for p, old, m in zip(self.params, saved, self.buf):
            m.mul_(self.decay).add_(p - old, alpha=1 - self.decay)
            p.copy_(old + m / corr)

    def state(self):
        d = {f"ema.{i}": e for i, e in enumerate(self.buf)}
        d["ema.t"] = torch.tensor([self.t], dtype=torch.float64)
        return d

    def load(self, tensors):
        for i, e in enumerate(self.buf):
            e.copy_(tensors[f"ema.{i}"])
        self.t = int(tensors["ema.t"][0])


class NoEMA:
    name = "none"

    def before_step(self):
        pass

    def save_params(self):
        return None

    def after_step(self, saved):
        pass

    def state(self):
        return {}

    def load(self, tensors):
        pass


def make_ema(cfg: RecipeConfig, params):
    """The EMA ``cfg.ema`` names; it reads the settings ``names.EMA_READS`` lists for it, no other."""
    if cfg.ema not in EMA_READS:
        raise ValueError(f"unknown ema {cfg.ema!r} ({' | '.join(EMA_READS)})")
    if cfg.ema == "grad-filter":
        return GradFilterEMA(params, cfg.ema_decay, cfg.ema_lambda)
    if cfg.ema == "update":
        return UpdateEMA(params, cfg.ema_decay)
    return NoEMA()


def grad_norm(params) -> float:
    s = 0.0
    for p in params:
        if p.grad is not None:
            s += float(p.grad.detach().pow(2).sum())
    return math.sqrt(s) if math.isfinite(s) else float("inf")


def grad_ok(params, limit: float) -> torch.Tensor:
    """Whether a step with these gradients is taken (``grad_norm(params)`` finite and at most
    ``limit``), as a boolean tensor on the parameters' device, with nothing read to the host: the
    same float64 sum of the same per-parameter sums in the same order (each parameter's sum of
    squares in its own dtype, as ``grad_norm`` reads it), the same correctly rounded square root, so
    the decision is ``grad_norm``'s."""
    s = None
    for p in params:
        if p.grad is not None:
            t = p.grad.detach().pow(2).sum().to(torch.float64)
            s = t if s is None else s + t
    if s is None:  # no gradient: norm 0
        return torch.ones((), dtype=torch.bool, device=params[0].device if params else "cpu")
    gn = torch.sqrt(s)
    return torch.isfinite(gn) & (gn <= limit)
