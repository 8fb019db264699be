"""Train a model with exactly a construction's layer structure for one GD step.

``python -m numerics.training.construction_task NAME --n 4 --d 2 --steps S --init random|construction --out DIR``

The trainable parameters are the arrays of ``con.body`` (gd-baseconv: 3 BaseConv layers on the
(N+1) x (5D+2) state; gd-lsa: one 3-head LSA layer on the (D+1) x (2N+D+3) state), loaded into
the training package's modules (:func:`~numerics.training.modules.stack_from_layers`), initialised

* ``random``: every array entry N(0, init_scale^2) (small scale), or
* ``construction``: the construction's exact weights (rounded to float64) plus N(0, noise^2) on
  every entry (zeros included),

and trained in float64 to map ``con.state(v) -> con.state(con.step(v))`` on fresh least-squares
problems (``numerics.problems.sample_ls``, x0 ~ N(0, I), query q ~ N(0, I)) with the
construction's default eta.  Loss: MSE over the whole state (``loss="state"``, default: the next
body copy needs A, b, q carried and the scratch regions cleared) or over the carried region x only
(``loss="x"``).  Optimiser: the training package's recipe (Adam eps 1e-16; AdaptiveLR with the
gradient-cosine metric, or StepLR / constant; optional GradFilterEMA).

The result is written as a full weight file for ``prologue + body * k + epilogue`` (prologue and
epilogue from the construction, every body copy the same learned layers, stored as the exact
binary fractions of the float64 values) with ``constructions.weights_io.save``, so
``python -m verify.compare --learned DIR/weights.safetensors --construction NAME`` accepts it.
"""
from __future__ import annotations

import argparse
import math
import time
from dataclasses import asdict, dataclass, replace
from fractions import Fraction
from pathlib import Path

import numpy as np
import torch

from polyverify.plumbing.cli import atomic_path, atomic_write_text, make_folder

from . import jsonio
from .modules import LayerStack, stack_from_layers
from .names import SCHEDULER_READS, and_list, not_read
from .recipe import RecipeConfig, cosine_metric, flat_grad, grad_norm, make_ema, make_scheduler

SUPPORTED = ("gd-baseconv", "gd-lsa")
#: the settings each ``init`` reads (:func:`init_body`); the command refuses the other one
#: (``tests/adversarial/test_ignored_options.py`` checks this against :func:`init_body`)
INIT_READS = {"random": ("init_scale",), "construction": ("noise",)}


@dataclass
class ConstructionTaskConfig:
    construction: str = "gd-baseconv"
    n: int = 4
    d: int = 2
    init: str = "random"  # random | construction
    init_scale: float = 0.1  # random: std of every entry
    noise: float = 1e-2  # construction: std of the noise added to every entry
    loss: str = "state"  # state | x
    steps: int = 2000
    batch: int = 256
    eval_every: int = 100
    eval_batch: int = 1024
    sigma: float = 1.0
    kappa: float = 5.0
    k: int = 2  # body copies in the exported weight file
    seed: int = 0
    # recipe
    lr: float = 1e-3
    scheduler: str = "adaptive"  # adaptive | steplr | constant
    step_size: int = 500
    gamma: float = 0.9
    metric_every: int = 100
    metric_batches: int = 8
    warmup: int = 500
    ema: str = "none"  # none | grad-filter | update
    threads: int = 1

    def recipe(self) -> RecipeConfig:
        return RecipeConfig(lr=self.lr, scheduler=self.scheduler, step_size=self.step_size, gamma=self.gamma,
                            metric_every=self.metric_every, metric_batches=self.metric_batches,
                            warmup=self.warmup, ema=self.ema, adam_eps=1e-16)


def build(name: str, n: int, d: int):
    """The construction (default eta) for ``name`` in :data:`SUPPORTED`."""
    from constructions.catalogue import by_name

    if name not in SUPPORTED:
        raise ValueError(f"construction {name!r} not supported; choose one of {', '.join(SUPPORTED)}")
    return by_name(name).build(n, d)


# ------------------------------------------------------------------ data

def sample_states(con, batch: int, rng: np.random.Generator, *, sigma: float = 1.0, kappa: float = 5.0):
    """(input state, target state after one GD step) for ``batch`` fresh problems, float64."""
    from numerics.problems import sample_ls

    n, d = con.variables["A"]
    P = sample_ls(batch, n, d, kappa=kappa, sigma=sigma, seed=int(rng.integers(2**62)), x0="gaussian")
    q = rng.standard_normal((batch, d))
    v = {"A": P.A, "b": P.b, "x": P.x0, "q": q}
    return con.state(v), con.state(con.step(v))


def region_mask(con, loss: str) -> np.ndarray:
    """Boolean mask of the state entries the loss is taken over."""
    shape = tuple(con.layout.shape)
    if loss == "state":
        return np.ones(shape, dtype=bool)
    if loss != "x":
        raise ValueError(f"loss must be 'state' or 'x', got {loss!r}")
    probe = {"A": np.zeros((1,) + tuple(con.variables["A"])), "b": np.zeros((1,) + tuple(con.variables["b"])),
             "x": np.ones((1,) + tuple(con.variables["x"])), "q": np.zeros((1,) + tuple(con.variables["q"]))}
    m = con.state(probe)[0] != 0
    if con.name == "gd-lsa":  # the bottom-right 'pred' entry shares the w column: x rows only
        m[con.variables["A"][1]:, :] = False
    return m


# ------------------------------------------------------------------ model

def init_body(con, init: str, *, init_scale: float = 0.1, noise: float = 1e-2, seed: int = 0) -> LayerStack:
    """The trainable body (float64), initialised randomly or at the construction plus noise."""
    model = stack_from_layers(con.body)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            r = torch.randn(p.shape, generator=g, dtype=torch.float64)
            if init == "random":
                p.copy_(r * init_scale)
            elif init == "construction":
                p.add_(r * noise)
            else:
                raise ValueError(f"init must be 'random' or 'construction', got {init!r}")
    return model


def learned_body(model: LayerStack) -> list:
    """The trained body as toolkit layers with exact Fraction arrays (the float64 values' exact
    binary fractions), with the construction's layer settings."""
    to_q = np.vectorize(lambda z: Fraction(float(z)), otypes=[object])
    return [L.map(lambda a: to_q(np.asarray(a, dtype=np.float64))) for L in model.toolkit_layers()]


def learned_construction(con, model: LayerStack):
    """A copy of ``con`` whose body is the learned layers (prologue / epilogue unchanged)."""
    body = learned_body(model)
    for L, C in zip(body, con.body):
        if L.kind != C.kind or L.config() != C.config():
            raise ValueError(f"learned layer {L.kind} {L.config()} does not match {C.kind} {C.config()}")
    return replace(con, body=body)


def export(con, model: LayerStack, path, k: int) -> Path:
    from constructions import weights_io

    path = Path(path)
    with atomic_path(path) as tmp:  # the folder made if missing
        weights_io.save(tmp, learned_construction(con, model), k)
    return path


# ------------------------------------------------------------------ training

def _rng(seed, stream, step):
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, stream, step])))


def train(cfg: ConstructionTaskConfig, out: str | Path | None = None, *, progress: bool = False) -> dict:
    """Train the body; with ``out`` write weights.safetensors, history.json, result.json, loss.png."""
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    con = build(cfg.construction, cfg.n, cfg.d)
    model = init_body(con, cfg.init, init_scale=cfg.init_scale, noise=cfg.noise, seed=cfg.seed)
    params = list(model.parameters())
    mask = torch.as_tensor(region_mask(con, cfg.loss))
    rc = cfg.recipe()
    opt = torch.optim.Adam(params, lr=rc.lr, betas=rc.betas, eps=rc.adam_eps)
    sched = make_scheduler(rc)
    ema = make_ema(rc, params)

    def loss_on(S, Y):
        return torch.mean((model(S) - Y)[:, mask] ** 2)

    def batch_of(stream, step, size):
        S, Y = sample_states(con, size, _rng(cfg.seed, stream, step), sigma=cfg.sigma, kappa=cfg.kappa)
        return torch.as_tensor(S), torch.as_tensor(Y)

    Se, Ye = batch_of(1, 0, cfg.eval_batch)  # fixed evaluation set

    def evaluate():
        with torch.no_grad():
            out_ = model(Se)
            return float(torch.mean((out_ - Ye)[:, mask] ** 2)), float(torch.mean((out_ - Ye) ** 2))

    with torch.no_grad():
        m0 = stack_from_layers(con.body)
        con_mse = float(torch.mean((m0(Se) - Ye)[:, mask] ** 2))
    hist, recent, skipped = [], [], 0
    t0 = time.perf_counter()

    def record(step):
        te, ts = evaluate()
        hist.append({"step": step, "test_mse": te, "test_state_mse": ts,
                     "train_loss": float(np.mean(recent)) if recent else float("nan"), "lr": sched.lr,
                     "metric_ema": sched.metric_ema, "skipped": skipped,
                     "wall_s": round(time.perf_counter() - t0, 2)})

    record(0)
    for step in range(1, cfg.steps + 1):
        S, Y = batch_of(0, step, cfg.batch)
        opt.zero_grad(set_to_none=True)
        loss = loss_on(S, Y)
        loss.backward()
        skipped += not _guarded_step(opt, params, ema, sched.lr, rc.skip_grad_norm)
        recent.append(float(loss.detach()))
        if rc.scheduler == "adaptive" and step % rc.metric_every == 0:
            sched.observe(_gradient_metric(opt, params, rc, lambda j: loss_on(*batch_of(2, step * 1000 + j, cfg.batch))))
        sched.step(step)
        if step % cfg.eval_every == 0 or step == cfg.steps:
            record(step)
            recent = []
            if progress:
                h = hist[-1]
                print(f"step {step}: test mse {h['test_mse']:.3e} lr {h['lr']:.2e}", flush=True)
    res = {"config": asdict(cfg), "recipe": rc.to_json(), "steps": cfg.steps,
           "initial_test_mse": hist[0]["test_mse"], "final_test_mse": hist[-1]["test_mse"],
           "best_test_mse": min(h["test_mse"] for h in hist), "final_test_state_mse": hist[-1]["test_state_mse"],
           "construction_test_mse": con_mse, "skipped": skipped,
           "wall_s": round(time.perf_counter() - t0, 1), "params": sum(p.numel() for p in params),
           "eta": str(con.params["eta"] if "eta" in con.params else con.params["sqrt_eta"] ** 2)}
    res["model"], res["construction"], res["history"] = model, con, hist
    if out is not None:
        _write_outputs(Path(out), cfg, res)
    return res


def _guarded_step(opt, params, ema, lr: float, skip_grad_norm: float) -> bool:
    """One optimiser step at ``lr`` (with the EMA's bookkeeping) on the gradients in ``params``,
    unless their norm is not finite or above ``skip_grad_norm``; whether it was taken."""
    gn = grad_norm(params)
    if not (math.isfinite(gn) and gn <= skip_grad_norm):
        return False
    for g in opt.param_groups:
        g["lr"] = lr
    ema.before_step()
    saved = ema.save_params()
    opt.step()
    ema.after_step(saved)
    return True


def _gradient_metric(opt, params, rc, loss_of) -> float:
    """The adaptive schedule's metric: the cosine statistic of ``rc.metric_batches`` gradients
    (``loss_of(j)``: the loss on metric batch ``j``); the gradients are cleared after."""
    grads = []
    for j in range(rc.metric_batches):
        opt.zero_grad(set_to_none=True)
        loss_of(j).backward()
        grads.append(flat_grad(params).detach().clone())
    opt.zero_grad(set_to_none=True)
    return cosine_metric(grads, rc.metric_pairs)


def _write_outputs(out: Path, cfg: ConstructionTaskConfig, res: dict) -> None:
    """weights.safetensors, history.json, result.json and loss.png of a training run in ``out``."""
    hist = res["history"]
    make_folder(out)
    export(res["construction"], res["model"], out / "weights.safetensors", cfg.k)
    atomic_write_text(out / "history.json", jsonio.dumps(hist, indent=1))  # NaN: null + note
    plain = {k: v for k, v in res.items() if k not in ("model", "construction", "history")}
    plain["weights"] = str(out / "weights.safetensors")
    atomic_write_text(out / "result.json", jsonio.dumps(plain, indent=1))
    plot_loss(hist, out / "loss.png", title=f"{cfg.construction} body, init={cfg.init}, loss={cfg.loss}")


def plot_loss(hist, path, title=""):
    from .figures import save_closed  # sets the Agg backend

    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.2))
    st = [h["step"] for h in hist]
    ax.semilogy(st, [h["test_mse"] for h in hist], label="test MSE (loss region)")
    ax.semilogy(st, [h["test_state_mse"] for h in hist], "--", label="test MSE (whole state)")
    ax.set_xlabel("step")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    save_closed(fig, path, dpi=80)


# ------------------------------------------------------------------ CLI

#: sizes accepted without --allow-large (this trains on CPU: the construction-shaped model of N x D)
LIMITS = {"n": 256, "d": 64, "steps": 10_000_000, "batch": 65_536, "k": 10_000}


def _check_read(a, given) -> None:
    """Refuse an option given on the command line that the run does not read: ``--noise`` with
    ``--init random`` and ``--init-scale`` with ``--init construction`` (``INIT_READS``),
    ``--step-size`` / ``--gamma`` with ``--scheduler constant`` (``names.SCHEDULER_READS``)."""
    from polyverify.plumbing.cli import UsageError

    for field in ("init_scale", "noise"):
        if field in given and field not in INIT_READS[a.init]:
            flag = "--" + field.replace("_", "-")
            raise UsageError(not_read(f"{flag} {getattr(a, field)}", flag, f"--init {a.init}",
                                      f"only --init {and_list([i for i, f in INIT_READS.items() if field in f])} does"))
    for field in ("step_size", "gamma"):
        if field in given and field not in SCHEDULER_READS[a.scheduler]:
            flag = "--" + field.replace("_", "-")
            readers = [f"--scheduler {s}" for s, fields in SCHEDULER_READS.items() if field in fields]
            raise UsageError(not_read(f"{flag} {getattr(a, field)}", flag, f"--scheduler {a.scheduler}",
                                      f"only {and_list(readers)} {'does' if len(readers) == 1 else 'do'}"))


def _main(argv) -> int:
    from polyverify.plumbing.cli import Parser, check_finite, check_range, output_dir

    ap = Parser(prog="python -m numerics.training.construction_task", description=__doc__.splitlines()[0],
                epilog="Limits (--allow-large lifts them): " + ", ".join(f"--{k} <= {v}" for k, v in LIMITS.items())
                       + ". Exit status: 0 trained, 2 bad input.")
    ap.add_argument("construction", choices=SUPPORTED, help="the construction whose layout the model learns")
    c = ConstructionTaskConfig()
    ap.add_argument("--n", type=int, default=c.n, help=f"rows N of A (default {c.n})")
    ap.add_argument("--d", type=int, default=c.d, help=f"columns D of A (default {c.d})")
    ap.add_argument("--steps", type=int, default=c.steps, help=f"training steps (default {c.steps})")
    ap.add_argument("--init", choices=("random", "construction"), default=c.init,
                    help="start from random weights or from the construction (plus --noise)")
    ap.add_argument("--init-scale", type=float, default=c.init_scale, help="scale of a random start")
    ap.add_argument("--noise", type=float, default=c.noise, help="noise added to a construction start")
    ap.add_argument("--loss", choices=("state", "x"), default=c.loss, help="fit the whole state or the iterate x")
    ap.add_argument("--batch", type=int, default=c.batch, help=f"problems per step (default {c.batch})")
    ap.add_argument("--eval-every", type=int, default=c.eval_every, help="steps between evaluations")
    ap.add_argument("--k", type=int, default=c.k, help="body copies in the exported weight file")
    ap.add_argument("--lr", type=float, default=c.lr, help="initial learning rate, > 0")
    ap.add_argument("--scheduler", choices=("adaptive", "steplr", "constant"), default=c.scheduler,
                    help="learning-rate schedule")
    ap.add_argument("--step-size", type=int, default=c.step_size, help="steps between LR decisions")
    ap.add_argument("--gamma", type=float, default=c.gamma, help="LR factor per decision, in (0, 1]")
    ap.add_argument("--ema", choices=("none", "grad-filter", "update"), default=c.ema, help="which EMA")
    ap.add_argument("--seed", type=int, default=c.seed, help="random seed, >= 0")
    ap.add_argument("--threads", type=int, default=1, help="torch threads, >= 1")
    ap.add_argument("--out", required=True, help="output folder (weights, history, result, loss plot)")
    ap.add_argument("--allow-large", action="store_true", help="lift the size limits")
    a = ap.parse_args(argv)
    for act in ap._actions:  # the options the command line sets explicitly
        if act.dest != "help":
            act.default = argparse.SUPPRESS
    _check_read(a, vars(ap.parse_args(argv)))
    lim = (lambda key: None) if a.allow_large else LIMITS.get
    big = None if a.allow_large else "--allow-large"
    for key, lo in (("n", 1), ("d", 1), ("steps", 1), ("batch", 1), ("k", 1)):
        check_range(f"--{key}", getattr(a, key), lo, lim(key), override=big)
    if a.n < a.d:
        ap.error(f"--n ({a.n}) must be >= --d ({a.d})")
    for flag, val in (("--eval-every", a.eval_every), ("--step-size", a.step_size), ("--threads", a.threads)):
        check_range(flag, val, 1)
    check_range("--seed", a.seed, 0, 2**63 - 1)
    check_finite("--lr", a.lr, positive=True)
    check_finite("--init-scale", a.init_scale)
    check_finite("--noise", a.noise)
    check_range("--gamma", check_finite("--gamma", a.gamma, positive=True), hi=1.0)
    out = output_dir("--out", a.out)
    cfg = ConstructionTaskConfig(construction=a.construction, n=a.n, d=a.d, init=a.init, init_scale=a.init_scale,
                                 noise=a.noise, loss=a.loss, steps=a.steps, batch=a.batch,
                                 eval_every=a.eval_every, k=a.k, lr=a.lr, scheduler=a.scheduler,
                                 step_size=a.step_size, gamma=a.gamma, ema=a.ema, seed=a.seed, threads=a.threads)
    res = train(cfg, out, progress=True)
    print(f"initial test MSE {res['initial_test_mse']:.3e}, final {res['final_test_mse']:.3e} "
          f"(construction {res['construction_test_mse']:.3e}); wrote weights.safetensors, history.json, "
          f"result.json, loss.png to {out}")
    return 0


def main(argv=None) -> int:
    from polyverify.plumbing.cli import run_main

    return run_main(_main, argv)


if __name__ == "__main__":
    from polyverify.plumbing.cli import exit_with

    exit_with(main)
