"""Seed 000 Table 7 (App. C.3): learning k GD iterates at once, and the recipe against plain Adam.

Task (seed 000 eq. (13), ``numerics.training.tasks`` ``iterate``): N = 20 data tokens ``(a_i, b_i)``
and a query token carrying ``x_0``; the target is ``x_k`` after k GD steps
``x_{i+1} = x_i - eta grad L(x_i)``, ``grad L(x) = (1/N) A^T (A x - b)``, eta the optimal constant
step ``2N / (kappa^2 + 1)`` (kappa = 5), A with singular values rescaled onto [1, kappa].  Model: a
(k + 2)-layer BaseConv (the depth seed 000 Sec. 4 says suffices; :func:`exact_weights` sets this very
model, width 32, to weights that compute x_k), width 32, no MLP / LayerNorm,
float32 as in the paper, each mixer's output map initialised at ``INIT_SCALE`` (0.3) times the
default (with 1.0 the 6-layer k = 4 model starts at MSE 1e5 and skips steps); trained with the
high-precision recipe (``RecipeConfig.paper``: Adam eps 1e-16, the cosine-metric adaptive LR, the
official code's gradient-filter EMA, step skipping) with the settings of ``docs/training.md``'s
float32 runs and the LR decision interval scaled to the step budget (``recipe_settings``), and for
k = 1 and k = 2 also with the paper's standard settings (``RecipeConfig.standard``, seed 000 App. B.2
Table 4: Adam lr 1e-3, StepLR x0.9 every 10^4 steps) at the same number of steps: within the CPU grid's
3,000 steps StepLR never decays, so that run is plain Adam at lr 1e-3, and the report calls it so.

Baselines (``baselines``, on the same fresh problems as the final evaluation): predicting 0,
predicting x_0, and the best fit of x_k by ``sum_{i <= j} (alpha_i M^i x_0 + beta_i M^i c)``,
``M = A^T A / N``, ``c = A^T b / N`` (scalar coefficients, least squares over the problems): x_k is
exactly of this form with j = k, so the fit with j < k measures what a model that has learned at
most j products with M can reach.

The paper's numbers (5.0e-13 at k = 1) come from GPU runs of millions of steps; here each cell is
a fixed number of steps (a few minutes of CPU), so this experiment checks the *ordering* claims
(MSE growing with k, the recipe ahead of plain Adam) and states the gap to the paper's precision.
The grid's ``long`` part (:mod:`.seed000_table7_long`) trains k = 1 to a CPU-time limit instead
(with a wall-clock limit on top): the recipe with ``docs/training.md``'s settings, held to 1e-8, and
the paper's recipe as App. B.2 Table 5 states it (batch 1024, lr 1e-2), truncated to the steps that
fit.  The report's text and tables are :mod:`.seed000_table7_report`.
"""
from __future__ import annotations

import math

from polyverify.plumbing.options import ConfigError, cell_config, non_negative, option, positive

from .common import OnDevice, fmt, rows_ok

NAME = "seed000-table7"
TITLE = "Seed 000, Table 7: learning k GD iterates at once with the high-precision recipe"
REFERENCE = "seed 000 (Liu et al.), App. C.3, Table 7"

#: seed 000 Table 7 as printed: test MSE of a (k+2)-layer BaseConv on the k-th iterate task
PAPER = {1: 5.0e-13, 2: 2.5e-11, 3: 2.5e-11, 4: 3.1e-10}
#: the paper's two optimiser settings (seed 000 App. B.2): Table 5, the high-precision recipe Table 7 uses
#: (App. C.3), and Table 4, the standard settings
PAPER_RECIPE = {"batch": 1024, "optimizer": "Adam", "lr": 1e-2, "scheduler": "AdaptiveLR", "steps": 2_500_000,
                "step_rate": 3000, "decay": 0.9, "ema_decay": 0.98, "ema_lambda": 2}
PAPER_STANDARD = {"batch": 256, "optimizer": "Adam", "lr": 1e-3, "scheduler": "StepLR", "steps": 1_000_000,
                  "step_rate": 10_000, "decay": 0.9}
KS = (1, 2, 3, 4)

#: the recipe's short-run settings (docs/training.md, "the done-criterion runs": lr 5e-3, threshold 0.5,
#: 4 metric batches), metric every 50 steps; the LR decision interval ``step_size`` is set per run by
#: :func:`recipe_settings`
RECIPE = {"lr": 5e-3, "max_lr": 5e-3, "metric_every": 50, "metric_batches": 4, "warmup": 100, "threshold": 0.5}

#: the LR decision interval is the step budget over this (100 at 3000 steps: docs/training.md's
#: 4000- to 6000-step runs did best with 100 to 200; a fixed 500 would leave the LR at 5e-3 x 0.9^6)
DECISIONS = 30

#: the init scale of each mixer's output map (``ModelConfig.init_scale``); 1.0 starts the 6-layer
#: k = 4 model at test MSE 1.1e5 (4 steps skipped), 0.3 at 0.81
INIT_SCALE = 0.3


def _above_zero(x) -> bool:
    return x > 0


def recipe_settings(steps: int) -> dict:
    """The recipe's settings for a run of ``steps`` steps (``RECIPE`` plus the decision interval)."""
    return {**RECIPE, "step_size": max(1, steps // DECISIONS), "warmup": min(RECIPE["warmup"], max(1, steps // 10))}


@cell_config
class Table7Cell(OnDevice):
    """One cell of the seed000-table7 grids (:func:`configs`, :func:`gpu_configs` and the long part,
    :func:`.seed000_table7_long.long_configs`): every key :func:`cell` reads, with its default."""
    k: int = option(check=(positive, ">= 1"))  # the iterate learned; the model has k + 2 layers
    steps: int = option(check=(positive, ">= 1"))  # at most (a deadline or a limit may stop it before)
    recipe: str = option(choices=("paper", "standard"))  # the high-precision recipe, or StepLR Adam (Table 4)
    width: int = option(32, check=(positive, ">= 1"))
    init_scale: float = option(INIT_SCALE, check=(_above_zero, "> 0"))
    batch: int = option(256, check=(positive, ">= 1"))
    eval_every: int | None = option(None, check=(positive, ">= 1"))  # None: a tenth of the steps
    eval_batch: int = option(1024, check=(positive, ">= 1"))
    final_eval: int = option(8192, check=(positive, ">= 1"))  # fresh problems of the final evaluation
    seed: int = option(0, check=(non_negative, ">= 0"))
    dtype: str = option("float32", choices=("float32", "float64"))
    init: str = option("random", choices=("random", "exact"))  # exact: a warm start at exact_weights
    perturb: float = option(0.0, check=(non_negative, ">= 0"))  # the warm start's noise std
    lr: float | None = option(None, check=(_above_zero, "> 0"))  # None: the recipe's
    #: the long part (:mod:`.seed000_table7_long`): its named recipe settings and its limits
    part: str | None = option(None, choices=(None, "long"))
    settings: str | None = None
    max_seconds: float | None = option(None, check=(_above_zero, "> 0"))
    max_cpu_seconds: float | None = option(None, check=(_above_zero, "> 0"))

    def validate(self):
        from .seed000_table7_long import SETTINGS

        if self.settings is not None and self.settings not in SETTINGS:
            raise ConfigError(f"settings must be one of {', '.join(map(repr, SETTINGS))}, got {self.settings!r}")


def config_of(config: dict, where: str = "cell") -> Table7Cell:
    return Table7Cell.from_mapping(config, where=where)


def cell(config: dict) -> dict:
    """Train one (k + 2)-layer BaseConv on the k-th iterate task with ``recipe`` ``paper`` or
    ``standard`` for ``steps`` steps (:class:`Table7Cell`); report the test MSE history and the final
    MSE on fresh problems.

    ``device`` (default cpu) is where it trains.  Under a global deadline (``common.cell_budget``: the GPU
    grid, :func:`gpu_configs`) the cell measures its step time first and runs ``min(steps, what fits its
    share of the time left)`` steps; a ``paper`` cell of the GPU grid then uses the paper's recipe
    (``RecipeConfig.paper()``: lr 1e-2, no LR cap, threshold 0.9, 64 metric batches) with its
    intervals scaled to those steps (:func:`gpu_recipe_settings`)."""
    import time

    from numerics.sweep import cell_dir
    from numerics.training.trainer import Trainer

    from .common import cell_budget
    from .seed000_table7_limits import plan_steps, run_cpu_limited, step_time

    t_start = time.time()
    c = config_of(config)
    budget, plan, steps = cell_budget(c), None, c.steps
    if budget is not None:
        per_step = step_time(_train_config(c, 10 ** 6, _recipe(c, 10 ** 6, None)), c.device)
        plan = plan_steps(budget, budget - (time.time() - t_start), per_step, steps,
                          c.recipe == "paper" and c.grid == "gpu")
        steps = plan["steps_planned"]
    rc = _recipe(c, steps, plan)
    cfg = _train_config(c, steps, rc)
    tr = Trainer(cfg, cell_dir(), progress=False)
    start = None
    if c.init == "exact":  # warm start (WARM cells): the hand-built weights, perturbed
        exact_weights(tr.model, c.k, tr.task.eta, perturb=float(c.perturb), seed=c.seed)
        start = tr.evaluate(c.final_eval, stream_idx=10 ** 9)
    # a long cell's own wall-clock limit (``max_seconds``), or the global deadline's share
    max_s = c.max_seconds if budget is None else max(1.0, budget - (time.time() - t_start) - 0.05 * budget)
    cpu_limit = c.max_cpu_seconds  # a long cell's CPU-time limit (its budget on a shared machine)
    res, cpu_used = run_cpu_limited(tr, cpu_limit, max_s) if cpu_limit else (tr.run(max_seconds=max_s), None)
    return _result(c, tr, res, rc, start, plan, {"max_seconds": max_s, "max_cpu_seconds": cpu_limit,
                                                 "steps_max": steps, "train_cpu_s": cpu_used})


def _recipe(c: Table7Cell, steps: int, plan: dict | None):
    """The cell's ``RecipeConfig`` for a run of ``steps``: StepLR Adam (``standard``), the long part's
    named settings, the paper's recipe scaled to the steps (the GPU grid; ``plan``'s metric batches), or
    the recipe with ``docs/training.md``'s settings (:func:`recipe_settings`; a warm start's own lr)."""
    from numerics.training.recipe import RecipeConfig

    if c.recipe == "standard":
        return RecipeConfig.standard()
    if c.settings is not None:
        from .seed000_table7_long import recipe_config

        return recipe_config(c.settings)
    if c.grid == "gpu":
        mb = (plan or {}).get("metric_batches")
        return RecipeConfig.paper(**gpu_recipe_settings(steps, c.lr or 1e-2), **({"metric_batches": mb} if mb else {}))
    return RecipeConfig.paper(**{**recipe_settings(steps), **({"lr": c.lr, "max_lr": c.lr} if c.lr else {})})


def _train_config(c: Table7Cell, steps: int, rc):
    from numerics.training.modules import ModelConfig
    from numerics.training.trainer import TaskConfig, TrainConfig

    return TrainConfig(task=TaskConfig(name="iterate", k=c.k),
                       model=ModelConfig(model="baseconv", width=c.width, layers=c.k + 2, init_scale=c.init_scale),
                       recipe=rc, steps=steps, batch=c.batch, eval_every=c.eval_every or max(1, steps // 10),
                       eval_batch=c.eval_batch, checkpoint_every=10 ** 9, seed=c.seed, dtype=c.dtype,
                       device=c.device, threads=1)


def _result(c: Table7Cell, tr, res: dict, rc, start, plan, limits: dict) -> dict:
    """The cell's record: the final evaluations (float32 and float64), the baselines, the history; a
    long cell's limits and what stopped it."""
    from .common import describe_device

    n_final, long = c.final_eval, c.settings is not None
    final = tr.evaluate(n_final, stream_idx=10 ** 9)
    final64 = tr.evaluate(n_final, stream_idx=10 ** 9, float64=True)
    hist = [{"step": h["step"], "test_mse": h["test_mse"], "lr": h["lr"], "metric_ema": h["metric_ema"],
             **({"wall_s": h["wall_s"]} if long else {})}
            for h in tr.history if math.isfinite(h["test_mse"])]
    cfg, cpu_limit, cpu_used = tr.cfg, limits["max_cpu_seconds"], limits["train_cpu_s"]
    return {"k": c.k, "recipe": c.recipe, "init": c.init, "perturb": float(c.perturb), "lr": c.lr,
            "start_test_mse": start, "layers": c.k + 2, "steps": tr.step, "skipped": tr.skipped,
            "width": cfg.model.width, "init_scale": cfg.model.init_scale,
            "final_test_mse": final, "final_test_mse_f64": final64, "final_eval": n_final,
            "baselines": baselines(tr.task, n_final, cfg.seed, stream_idx=10 ** 9),
            "best_eval_mse": res["best_test_mse"], "history": hist, "params": res["params"],
            "lr_end": tr.sched.lr, "recipe_config": rc.to_json(), "eta": tr.task.eta,
            "batch": cfg.batch, "device": describe_device(c.device), "plan": plan,
            "stopped_by_time": bool(tr.stopped_by_time),
            **({"settings": c.settings, "max_seconds": limits["max_seconds"], "max_cpu_seconds": cpu_limit,
                "steps_max": limits["steps_max"], "train_wall_s": round(tr.elapsed, 1), "train_cpu_s": cpu_used,
                "stopped_by_cpu": bool(cpu_limit and cpu_used >= cpu_limit and tr.step < limits["steps_max"])}
               if long else {})}


def gpu_recipe_settings(steps: int, lr: float = 1e-2) -> dict:
    """The paper's recipe (``RecipeConfig.paper()`` defaults: lr 1e-2, step_size 3000, metric every 1000
    steps on 64 batches, warm-up 1000, for 2.5e6 steps) with its intervals scaled to a run of ``steps``:
    30 LR decisions per run (as the CPU grid, ``DECISIONS``), the metric three times per decision (the
    paper's 3000 / 1000), the warm-up at most a tenth of the run."""
    step_size = max(3, steps // DECISIONS)
    return {"lr": lr, "step_size": step_size, "metric_every": max(1, step_size // 3),
            "warmup": min(1000, max(1, steps // 10))}


#: the GPU grid (``--grid gpu``, ``numerics/experiments/gpu.sh``): k = 1..4 with the paper's recipe at the
#: paper's batch 1024 and lr 1e-2 (App. C.3), and k = 1, 2 with StepLR Adam (App. B.2 Table 4) at the same
#: batch; each cell runs the steps that fit its share of the global budget, at most the paper's 2.5e6
GPU = {"ks": KS, "standard_ks": (1, 2), "batch": 1024, "lr": 1e-2, "steps": 2_500_000, "width": 32,
       "eval_batch": 4096, "final_eval": 8192}
GPU_QUICK = {**GPU, "ks": (1,), "standard_ks": (1,), "batch": 32, "steps": 40, "width": 8, "eval_batch": 128,
             "final_eval": 256}


def gpu_configs(quick: bool) -> list[dict]:
    g = GPU_QUICK if quick else GPU
    base = {"steps": g["steps"], "width": g["width"], "batch": g["batch"], "eval_batch": g["eval_batch"],
            "final_eval": g["final_eval"], "grid": "gpu"}
    out = ([{**base, "k": k, "recipe": "paper", "lr": g["lr"]} for k in g["ks"]]
           + [{**base, "k": k, "recipe": "standard"} for k in g["standard_ks"]])
    for i, c in enumerate(out):
        c.update(order=i, cells=len(out))
    return out


def exact_weights(model, k: int, eta: float, *, n: int = 20, d: int = 5, perturb: float = 0.0, seed: int = 0):
    """Set ``model`` (the training ``SequenceModel``: circular BaseConv, k + 2 layers, width >= 32,
    (T, C) bias matrices, the ``iterate`` task's embedding ``[a | b | x_0 | 1]``) to weights that
    compute x_k exactly: the 2-prologue-layer, one-layer-per-step scheme of seed 000 App. D.3.1
    (causal BaseConv, eq. (47)) with the Gram matrix stored symmetrically, so the residual stream
    needs 12 + d + d (d + 1) / 2 = 32 channels at d = 5 and each step layer d^2 + d = 30 products.

    * layer 1: per token ``b_i a_i`` and ``a_{ij} a_{il}`` (j <= l), delta filters;
    * layer 2: an all-ones filter without the own tap adds the other tokens' terms (the residual
      keeps the own one): ``Sba = A^T b``, ``Saa = A^T A`` (upper triangle) at every token;
    * layer 2 + i (i = 1..k): at the query token ``x <- x - (eta / N) (Saa x - Sba)`` (the gate reads
      ``Saa[j, l]``, the delta-filtered input ``x_l``; the ``Sba`` term gated by a bias that is 1
      at the query token only).

    ``perturb`` > 0 adds that standard deviation times N(0, 1) to every weight (a warm start from a
    perturbed exact solution).  Returns ``model``."""
    import torch

    T = n + 1
    C = model.cfg.width
    pairs = [(j, l) for j in range(d) for l in range(j, d)]
    a0, b0, x0, sba = 0, d, d + 1, 2 * d + 2
    saa = {p: sba + d + i for i, p in enumerate(pairs)}
    if len(model.blocks) != k + 2 or C < sba + d + len(pairs) or C < d * d + d or model.in_proj.in_features != 2 * d + 2:
        raise ValueError(f"exact_weights needs k + 2 = {k + 2} layers, width >= {max(sba + d + len(pairs), d * d + d)} "
                         f"and the iterate embedding; got {len(model.blocks)} layers, width {C}")
    delta = torch.zeros(T)
    delta[0] = 1
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.in_proj.weight.copy_(torch.eye(C, 2 * d + 2))
        for j in range(d):
            model.out_proj.weight[j, x0 + j] = 1
        L, c = model.blocks[0].mixer, 0
        for j in range(d):
            L.W_gate[b0, c], L.W_in[a0 + j, c], L.W_out[c, sba + j] = 1, 1, 1
            L.h[:, c] = delta
            c += 1
        for (j, l) in pairs:
            L.W_gate[a0 + j, c], L.W_in[a0 + l, c], L.W_out[c, saa[(j, l)]] = 1, 1, 1
            L.h[:, c] = delta
            c += 1
        L = model.blocks[1].mixer
        for c in range(sba, sba + d + len(pairs)):
            L.b_gate[:, c], L.W_in[c, c], L.W_out[c, c] = 1, 1, 1
            L.h[:, c] = 1
            L.h[0, c] = 0
        s = eta / n
        for i in range(k):
            L, c = model.blocks[2 + i].mixer, 0
            for j in range(d):
                for l in range(d):
                    L.W_gate[saa[(min(j, l), max(j, l))], c], L.W_in[x0 + l, c], L.W_out[c, x0 + j] = 1, 1, -s
                    L.h[:, c] = delta
                    c += 1
            for j in range(d):
                L.b_gate[T - 1, c], L.W_in[sba + j, c], L.W_out[c, x0 + j] = 1, 1, s
                L.h[:, c] = delta
                c += 1
        if perturb > 0:
            g = torch.Generator().manual_seed(seed)
            for p in model.parameters():
                p.add_(perturb * torch.randn(p.shape, generator=g, dtype=torch.float64).to(p.dtype))
    return model


def baselines(task, n: int, seed: int, *, stream_idx: int) -> dict:
    """The MSEs of predictions that need no training, on the ``n`` problems that
    ``Trainer.evaluate(n, stream_idx)`` draws (the same generator, the same chunks of 1024):

    * ``zero``: predicting 0; ``x0``: predicting x_0 (the model's residual stream carries it);
    * ``poly``: ``poly[j]`` is the MSE of the best fit of x_k by
      ``sum_{i <= j} (alpha_i M^i x_0 + beta_i M^i c)`` with ``M = A^T A / N``, ``c = A^T b / N``
      (2 (j + 1) scalar coefficients, least squares over all problems and coordinates), for
      j = 0 .. k - 1; with j = k the fit is exact (x_k is of that form), so ``poly[k - 1]`` is what
      a model that has not learned the k-th product with M can reach.
    """
    import numpy as np

    from numerics.training.trainer import rng_for

    rng = rng_for(seed, 1, stream_idx)
    parts, done = [], 0
    while done < n:
        b = min(1024, n - done)
        parts.append(task.problems(b, rng))
        done += b
    A, bb, _, x0 = (np.concatenate([p[i] for p in parts]) for i in range(4))
    y = task.gd(A, bb, x0, task.k)
    N = A.shape[1]
    M = np.einsum("bni,bnj->bij", A, A) / N
    c = np.einsum("bni,bn->bi", A, bb) / N
    feats, poly, px, pc = [], [], x0, c
    for j in range(task.k):
        if j:
            px, pc = np.einsum("bij,bj->bi", M, px), np.einsum("bij,bj->bi", M, pc)
        feats += [px, pc]
        X = np.stack(feats, -1).reshape(-1, len(feats))
        coef = np.linalg.lstsq(X, y.reshape(-1), rcond=None)[0]
        poly.append(float(np.mean((X @ coef - y.reshape(-1)) ** 2)))
    return {"zero": float(np.mean(y ** 2)), "x0": float(np.mean((y - x0) ** 2)), "poly": poly}


def configs(quick: bool) -> list[dict]:
    """The CPU grid: the equal-steps cells, the warm starts, and the long k = 1 cells (part ``long``,
    :func:`.seed000_table7_long.long_configs`: each stopped by its own wall-clock limit)."""
    from .seed000_table7_long import long_configs

    if quick:
        base = {"steps": 12, "width": 8, "batch": 16, "eval_batch": 64, "final_eval": 128}
        return [{**base, "k": 1, "recipe": "paper"}, {**base, "k": 2, "recipe": "paper"},
                {**base, "k": 2, "recipe": "standard"}] + long_configs(True)
    base = {"steps": STEPS, "width": 32, "batch": 256, "eval_batch": 1024, "final_eval": 8192}
    return ([{**base, "k": k, "recipe": "paper"} for k in KS]
            + [{**base, "k": k, "recipe": "standard"} for k in STANDARD_KS]
            + [{**base, "k": k, "recipe": "paper", "init": "exact", "perturb": WARM["perturb"], **({"lr": lr} if lr else {})}
               for lr in WARM["lrs"] for k in WARM["ks"]]
            + long_configs(False))


#: steps per cell of the full run (equal for every k, so the MSEs compare at equal training)
STEPS = 3000
#: the k run also with StepLR Adam at equal steps (k = 2: the recipe-vs-StepLR criterion; k = 1: where the
#: models learn the whole target at this budget)
STANDARD_KS = (1, 2)
#: warm starts (not a criterion: they separate the optimisation's plateau from the recipe's precision):
#: the (k + 2)-layer model set to ``exact_weights`` plus N(0, perturb^2) on every weight, then the recipe
WARM = {"ks": (2, 4), "perturb": 3e-4,  # start MSE ~1e-3, below the best fit with k - 1 products
        "lrs": (None, 5e-4)}  # None: the recipe's lr (5e-3); 5e-4: 10x smaller (the recipe's own LR decisions apply)


def run_name(result: dict) -> str:
    """A run's key in the summary: ``paper-k2``, ``standard-k1``, ``paper-k2-warm`` (exact-weights init)."""
    warm = result.get("init", "random") == "exact"
    return (f"{result['recipe']}-k{result['k']}" + ("-warm" if warm else "")
            + (f"-lr{result['lr']:g}" if warm and result.get("lr") else ""))


def summarise(rows, quick: bool) -> dict:
    """The grid's summary: ``runs`` (the equal-steps cells and the warm starts, read by the criteria) and
    ``long`` (the long k = 1 cells, :mod:`.seed000_table7_long`, with their own criterion)."""
    from .seed000_table7_long import criterion as long_criterion
    from .seed000_table7_long import earlier_long, is_long, summarise_long

    long, all_rows = summarise_long(rows), list(rows)
    rows = [r for r in rows if not is_long(r)]
    ok = rows_ok(rows)
    runs = {run_name(r["result"]): {**r["result"], "cpu_s": r.get("cpu_s"), "wall_s": r.get("wall_s")} for r in ok}
    cs = [config_of(r["config"], where=f"record {r.get('id', i)}") for i, r in enumerate(ok)]
    s = {"name": NAME, "title": TITLE, "reference": REFERENCE, "quick": quick, "paper": {str(k): v for k, v in PAPER.items()},
         "runs": runs, "config": {"recipe": RECIPE, "steps": sorted({c.steps for c in cs}),
                                  "step_size": sorted({recipe_settings(c.steps)["step_size"] for c in cs}),
                                  "decisions": DECISIONS,
                                  "init_scale": sorted({r["result"].get("init_scale", 1.0) for r in ok}),
                                  "width": sorted({c.width for c in cs}), "batch": sorted({c.batch for c in cs})}}
    s["long"] = long
    s["long_earlier"] = earlier_long(all_rows)
    s["criteria"] = criteria(s) + [c for c in [long_criterion(long)] if c]
    return s


def criteria(s: dict) -> list[dict]:
    runs = s["runs"]
    rec = {k: runs.get(f"paper-k{k}") for k in KS}
    have = [k for k in KS if rec[k]]
    out = []
    if have:
        ok = all(rec[k]["final_test_mse"] <= (1e-8 if k == 1 else 1e-7) for k in have)
        out.append({"id": "precision", "text": "every k at most 1e-7 (k = 1 at most 1e-8)",
                    "met": ok if len(have) == len(KS) else (False if not ok else None),
                    "values": {str(k): rec[k]["final_test_mse"] for k in have}})
        mono = [rec[a]["final_test_mse"] <= rec[b]["final_test_mse"] for a, b in zip(have, have[1:])]
        # an ordering of final MSEs means something only at equal training (the GPU grid's cells each ran
        # what fitted their share of the time: 15 to 373 steps)
        steps = {k: rec[k].get("steps") for k in have}
        equal = len(set(steps.values())) == 1
        out.append({"id": "grows-with-k", "text": "the MSE does not decrease with k (the paper: 5.0e-13, 2.5e-11, "
                                                  "2.5e-11, 3.1e-10), at equal steps",
                    "met": (all(mono) if equal else None) if len(have) >= 2 else None, "pairs": mono,
                    "steps": {str(k): v for k, v in steps.items()}, "equal_steps": equal})
    std, pap = runs.get("standard-k2"), rec.get(2)
    if std and pap:
        ratio = std["final_test_mse"] / pap["final_test_mse"]
        # at every common evaluation point (the same steps)
        hs = {h["step"]: h["test_mse"] for h in std["history"]}
        per = [{"step": h["step"], "ratio": hs[h["step"]] / h["test_mse"]} for h in pap["history"]
               if h["step"] in hs and h["step"] > 0 and h["test_mse"] > 0]
        equal = std.get("steps") == pap.get("steps")
        out.append({"id": "recipe-vs-steplr", "text": f"k = 2: the recipe at least 10x below {std_name(std)} at "
                                                      "equal steps",
                    "met": ratio >= 10 if equal else None, "ratio_final": ratio, "ratios": per,
                    "steps": {"recipe": pap.get("steps"), "standard": std.get("steps")}, "equal_steps": equal})
    return out


def std_name(r: dict) -> str:
    """What the ``standard`` run's optimiser was over its steps: the paper's StepLR (Table 4) decays the
    learning rate first at step ``step_size`` (10^4); a run that ends before it is plain Adam at that lr."""
    rc = r.get("recipe_config") or {}
    lr, size = rc.get("lr", PAPER_STANDARD["lr"]), rc.get("step_size", PAPER_STANDARD["step_rate"])
    if r.get("steps") is not None and r["steps"] <= size:
        return f"plain Adam at lr {fmt(lr)}"
    return f"StepLR Adam (lr {fmt(lr)}, x{fmt(rc.get('gamma', PAPER_STANDARD['decay']))} every {size:,} steps)"


def table(s: dict) -> list[dict]:
    return [{"run": name, "k": r["k"], "recipe": r["recipe"], "settings": r.get("settings"), "batch": r.get("batch"),
             "init": r.get("init", "random"),
             "perturb": r.get("perturb", 0.0), "start_test_mse": r.get("start_test_mse"), "layers": r["layers"],
             "steps": r["steps"],
             "final_test_mse": r["final_test_mse"], "final_test_mse_f64": r["final_test_mse_f64"],
             "paper_mse": PAPER[r["k"]] if r["recipe"] == "paper" and not is_warm_start(r) else None,
             "ratio_to_paper": r["final_test_mse"] / PAPER[r["k"]] if r["recipe"] == "paper" and not is_warm_start(r) else None,
             "baseline_zero": r["baselines"]["zero"], "baseline_x0": r["baselines"]["x0"],
             "best_fit_k_minus_1_products": r["baselines"]["poly"][-1],
             "ratio_to_best_fit_k_minus_1": r["final_test_mse"] / r["baselines"]["poly"][-1],
             "skipped": r["skipped"], "cpu_s": r["cpu_s"], "wall_s": r["wall_s"]}
            for name, r in sorted(s["runs"].items()) + sorted((s.get("long") or {}).items())]


def plot(s: dict):
    """Left: the training curves (test MSE against step) with the paper's Table 7 value of each k as a
    dotted line of the same colour; right: the final MSE against k beside the paper's.  The legends sit
    outside the axes, off the curves."""
    import matplotlib.pyplot as plt

    long = bool(s.get("long"))
    fig, axes = plt.subplots(1, 3 if long else 2, figsize=(19 if long else 13, 5.2 if long else 4.6),
                             gridspec_kw={"width_ratios": [1.25, 1, 1.1] if long else [1.25, 1]})
    a1, a2 = axes[0], axes[1]
    for i, k in enumerate(KS):
        r = s["runs"].get(f"paper-k{k}")
        if r:
            a1.semilogy([h["step"] for h in r["history"]], [h["test_mse"] for h in r["history"]], "o-", ms=3,
                        color=f"C{i}", label=f"k = {k}, recipe")
    # the paper's values, one dotted line per distinct value (k = 2 and 3 share 2.5e-11), coloured as its first k
    for v in sorted(set(PAPER.values())):
        kv = [k for k in KS if PAPER[k] == v]
        a1.axhline(v, color=f"C{KS.index(kv[0])}", ls=":", lw=1.2,
                   label=f"k = {', '.join(map(str, kv))}, paper (Table 7): {fmt(v)}")
    for k in KS:
        r = s["runs"].get(f"standard-k{k}")
        if r:
            a1.semilogy([h["step"] for h in r["history"]], [h["test_mse"] for h in r["history"]], "s--", ms=3,
                        color=f"C{k - 1}", alpha=0.6, label=f"k = {k}, {std_name(r)}")
    for r in sorted((r for r in s["runs"].values() if is_warm_start(r)), key=lambda r: r["k"]):
        a1.semilogy([0] + [h["step"] for h in r["history"]], [r["start_test_mse"]] + [h["test_mse"] for h in r["history"]],
                    "d-." if not r.get("lr") else "d:", ms=3, color=f"C{r['k'] - 1}", alpha=0.8,
                    label=f"k = {r['k']}, {run_label(r)}")
    a1.set_xlabel("step")
    a1.set_ylabel("test MSE (float32)")
    a1.set_title("training curves; dotted: the paper's Table 7 values", fontsize=9)
    a1.grid(alpha=0.3)
    ks = [k for k in KS if f"paper-k{k}" in s["runs"]]
    ran = sorted({s["runs"][f"paper-k{k}"]["steps"] for k in ks})  # the steps each run ran, from its record
    a2.semilogy(ks, [s["runs"][f"paper-k{k}"]["final_test_mse"] for k in ks], "o-" if len(ran) == 1 else "o",
                label=(f"ours ({ran[0]:,} steps each)" if len(ran) == 1 else
                       f"ours ({ran[0]:,} to {ran[-1]:,} steps, unequal: not an ordering)") if ran else "ours")
    a2.semilogy(list(KS), [PAPER[k] for k in KS], "x--", label="paper (Table 7, 2.5e6 steps on a GPU)")
    doc = (s.get("long") or {}).get("long-training-doc-k1")
    if doc:
        a2.semilogy([1], [doc["final_test_mse"]], "*", ms=11, color="C5",
                    label=f"ours, k = 1 trained long ({doc['steps']:,} steps)")
    a2.semilogy(ks, [s["runs"][f"paper-k{k}"]["baselines"]["zero"] for k in ks], "v:", color="gray",
                label="predicting 0")
    if len(ks) > 1 and any(k > 1 for k in ks):
        kk = [k for k in ks if k > 1]
        a2.semilogy(kk, [s["runs"][f"paper-k{k}"]["baselines"]["poly"][-1] for k in kk], "^:", color="C3",
                    label="best fit with k - 1 products with M")
    a2.set_xticks(list(KS))
    a2.set_xlabel("k (GD iterates learned at once; k + 2 layers)")
    a2.set_ylabel("final test MSE")
    a2.set_title("final MSE against k", fontsize=9)
    a2.grid(alpha=0.3)
    # the legends below the axes, off the curves
    a1.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, frameon=False)
    a2.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, frameon=False)
    if long:  # the long k = 1 cells against wall time (their steps differ)
        from .seed000_table7_long import plot_long

        plot_long(axes[2], s)
    fig.suptitle("Seed 000 Table 7" + (" [--quick]" if s["quick"] else "")
                 + (f" on {(s.get('device') or {}).get('name')}" if (s.get("device") or {}).get("name") else ""),
                 fontsize=10)
    fig.tight_layout()
    return fig


def is_warm_start(r: dict) -> bool:
    """Whether a run started from the exact construction (a warm start) rather than a random init."""
    return r.get("init", "random") == "exact"


def run_lr(r: dict) -> float:
    """A recipe run's peak learning rate: its own (warm starts) or the recipe's."""
    return r.get("lr") or RECIPE["max_lr"]


def run_label(r: dict) -> str:
    """How a run was trained, as the report names it."""
    if is_warm_start(r):
        return (f"recipe{', lr ' + fmt(r['lr']) if r.get('lr') else ''}, warm start (exact + "
                f"N(0, {fmt(r['perturb'])}^2))")
    return "recipe" if r["recipe"] == "paper" else std_name(r)


def run_order(kv):
    """Sort key of ``(name, run)`` pairs: the recipe first, cold before warm starts, larger lr first, then k."""
    return (kv[1]["recipe"] != "paper", is_warm_start(kv[1]), -run_lr(kv[1]), kv[1]["k"])


def criterion_notes(c: dict) -> list[str]:
    """The lines under a criterion's verdict: the ratios read, or why an ordering is not read."""
    L = []
    if c["id"] == "recipe-vs-steplr":
        if c.get("equal_steps", True):
            L.append(f"Adam / recipe at the end: {fmt(c['ratio_final'])}x; at the evaluation points: "
                     + ", ".join(f"{p['step']}: {fmt(p['ratio'])}x" for p in c["ratios"]) + ".")
        else:
            st = c["steps"]
            L.append(f"Not at equal steps (the recipe ran {st['recipe']}, Adam {st['standard']}), so not read: "
                     f"Adam / recipe at the end {fmt(c['ratio_final'])}x.")
    elif c["id"] == "grows-with-k" and not c.get("equal_steps", True):
        L.append("Not at equal steps (" + ", ".join(f"k = {k}: {v}" for k, v in c["steps"].items())
                 + " steps), so the ordering is not read.")
    elif c["id"] == "k1-long":
        L.append(f"Final test MSE {fmt(c['value'])} after {c['steps']:,} steps (the long runs, below).")
    elif c["id"] == "precision" and c.get("values"):
        L.append("Final test MSE: " + ", ".join(f"k = {k}: {fmt(v)}" for k, v in c["values"].items()) + ".")
    return L


def markdown(s: dict, figure: str) -> str:
    """Its section of docs/experiments.md (:func:`.seed000_table7_report.markdown`)."""
    from .seed000_table7_report import markdown as section

    return section(s, figure)


def gpu_markdown(s: dict, figure: str) -> str:
    """Its GPU section (:func:`.seed000_table7_report.gpu_markdown`)."""
    from .seed000_table7_report import gpu_markdown as section

    return section(s, figure)
