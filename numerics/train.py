"""``python -m numerics.train TASK --model M --steps S --out DIR`` (see docs/training.md).

TASK: gradient | iterate | icls | read | linear | multiply.  ``--recipe
paper`` (default: Adam lr 1e-2, adaptive LR, grad-filter EMA; App. B.2
Table 5) or ``standard`` (Adam lr 1e-3, StepLR 1e4 / 0.9, no EMA; Table 4);
any flag given overrides the preset.  ``--resume DIR`` continues a run from
its checkpoint to ``--steps``.  ``--iterate`` (gradient task) then applies
the model as an iterative solver and sweeps sigma (Figures 1b, 2).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from numerics.training.modules import MODELS, ModelConfig
from numerics.training.recipe import RecipeConfig
from numerics.training.tasks import TASKS
from numerics.training.trainer import TaskConfig, TrainConfig, Trainer


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m numerics.train", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("task", choices=TASKS)
    p.add_argument("--out", required=True, help="output folder (history, checkpoint, weights, curves)")
    p.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.safetensors")
    g = p.add_argument_group("task")
    g.add_argument("--n", type=int, help="rows N (LS default 20, primitives 40)")
    g.add_argument("--d", type=int, help="columns D (LS default 5, primitives 20)")
    g.add_argument("--kappa", type=float, default=5.0)
    g.add_argument("--sigma", type=float, default=1.0)
    g.add_argument("--k", type=int, default=1, help="iterate task: number of GD steps")
    g.add_argument("--eta", type=float, default=None, help="GD step on (1/N) A^T(Ax-b); default 2N/(kappa^2+1)")
    g = p.add_argument_group("model")
    g.add_argument("--model", choices=MODELS, default="baseconv")
    g.add_argument("--width", type=int, default=64)
    g.add_argument("--layers", type=int, default=3)
    g.add_argument("--heads", type=int, default=1)
    g.add_argument("--head-dim", type=int, default=None)
    g.add_argument("--mlp", action="store_true")
    g.add_argument("--layernorm", action="store_true")
    g.add_argument("--causal", action="store_true")
    g.add_argument("--conv", choices=("direct", "fft"), default="direct")
    g.add_argument("--init-scale", type=float, default=0.1)
    g.add_argument("--bias", choices=("matrix", "vector"), default="matrix",
                   help="baseconv: (T, C) bias matrices (Def. D.20) or one bias row shared by all tokens")
    g = p.add_argument_group("optimisation")
    g.add_argument("--recipe", choices=("paper", "standard"), default="paper")
    for name, typ in (("lr", float), ("scheduler", str), ("step-size", int), ("gamma", float),
                      ("threshold", float), ("metric-every", int), ("metric-batches", int),
                      ("metric-pairs", str), ("warmup", int), ("ema", str), ("ema-decay", float),
                      ("ema-lambda", float), ("max-lr", float), ("skip-grad-norm", float)):
        g.add_argument(f"--{name}", type=typ, default=None)
    g.add_argument("--steps", type=int, default=1000)
    g.add_argument("--batch", type=int, default=1024)
    g.add_argument("--eval-every", type=int, default=1000)
    g.add_argument("--eval-batch", type=int, default=2048)
    g.add_argument("--checkpoint-every", type=int, default=10_000)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    g.add_argument("--device", default="cpu")
    g.add_argument("--threads", type=int, default=None)
    g.add_argument("--max-minutes", type=float, default=None,
                   help="stop cleanly (evaluate, checkpoint, export) once this much training wall time has passed")
    g.add_argument("--no-progress", action="store_true")
    g.add_argument("--iterate", action="store_true", help="gradient task: iterate the model, sweep sigma")
    return p


def config_from(a) -> TrainConfig:
    over = {k.replace("-", "_"): getattr(a, k.replace("-", "_")) for k in (
        "lr", "scheduler", "step-size", "gamma", "threshold", "metric-every", "metric-batches", "metric-pairs",
        "warmup", "ema", "ema-decay", "ema-lambda", "max-lr", "skip-grad-norm")}
    over = {k: v for k, v in over.items() if v is not None}
    rc = RecipeConfig.paper(**over) if a.recipe == "paper" else RecipeConfig.standard(**over)
    mc = ModelConfig(model=a.model, width=a.width, layers=a.layers, heads=a.heads, head_dim=a.head_dim,
                     mlp=a.mlp, layernorm=a.layernorm, causal=a.causal, conv_method=a.conv,
                     init_scale=a.init_scale, bias=a.bias)
    tc = TaskConfig(a.task, n=a.n, d=a.d, kappa=a.kappa, sigma=a.sigma, k=a.k, eta=a.eta)
    return TrainConfig(task=tc, model=mc, recipe=rc, steps=a.steps, batch=a.batch, eval_every=a.eval_every,
                       eval_batch=a.eval_batch, checkpoint_every=a.checkpoint_every, seed=a.seed,
                       dtype=a.dtype, device=a.device, threads=a.threads)


def main(argv=None) -> int:
    a = parser().parse_args(argv)
    out = Path(a.out)
    try:
        if a.resume:
            tr = Trainer.resume(out, out, steps=a.steps, progress=not a.no_progress,
                                device=a.device if a.device != "cpu" else None)
        else:
            tr = Trainer(config_from(a), out, progress=not a.no_progress)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if a.max_minutes is not None and a.max_minutes <= 0:
        print("error: --max-minutes must be positive", file=sys.stderr)
        return 2
    res = tr.run(max_seconds=None if a.max_minutes is None else 60.0 * a.max_minutes)
    print(json.dumps({k: res[k] for k in ("steps", "final_test_mse", "final_test_mse_f64", "best_test_mse",
                                          "skipped", "wall_s", "loadavg_end", "params") if k in res}))
    if a.iterate:
        from numerics.training.iterate import ood_sweep, plot_ood

        if tr.task.name != "gradient":
            print("error: --iterate needs the gradient task", file=sys.stderr)
            return 2
        tr.model.eval()
        rows = ood_sweep(tr.model, tr.task, dtype=tr.dtype, device=tr.cfg.device)
        (out / "iterate.json").write_text(json.dumps(rows, indent=1))
        plot_ood(rows, out / "iterate.png", title=f"{tr.cfg.model.model}: iterated vs exact GD (eta={tr.task.eta})")
        for r in rows:
            print(f"sigma={r['sigma']:g} iters={r['iters']} model_mse={r['model_mse']:.3e} gd_mse={r['gd_mse']:.3e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
