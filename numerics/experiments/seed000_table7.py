"""Seed 000 Table 7 (App. C.3): learning k GD iterates at once, and the recipe against StepLR.

Task (seed 000 eq. (13), ``numerics.training.tasks`` ``iterate``): N = 20 data tokens ``(a_i, b_i)``
and a query token carrying ``x_0``; the target is ``x_k`` after k GD steps
``x_{i+1} = x_i - eta grad L(x_i)``, ``grad L(x) = (1/N) A^T (A x - b)``, eta the optimal constant
step ``2N / (kappa^2 + 1)`` (kappa = 5), A with singular values rescaled onto [1, kappa].  Model: a
(k + 2)-layer BaseConv (the depth seed 000 Sec. 4 says suffices), width 32, no MLP / LayerNorm,
float32 as in the paper; trained with the high-precision recipe (``RecipeConfig.paper``: Adam eps
1e-16, the cosine-metric adaptive LR, the official code's gradient-filter EMA, step skipping) with
the settings of ``docs/training.md``'s float32 runs (step size 500), and for k = 2 also with
the standard StepLR Adam (``RecipeConfig.standard``) at the same number of steps.

The paper's numbers (5.0e-13 at k = 1) come from GPU runs of millions of steps; here each cell is
a fixed number of steps (about a minute of CPU), so this experiment checks the *ordering* claims
(MSE growing with k, the recipe ahead of StepLR) and states the gap to the paper's precision.
"""
from __future__ import annotations

import math

from .common import fmt, rows_ok, timing_line, verdict

NAME = "seed000-table7"
TITLE = "Seed 000, Table 7: learning k GD iterates at once with the high-precision recipe"
REFERENCE = "seed 000 (Liu et al.), App. C.3, Table 7"

#: seed 000 Table 7 as printed: test MSE of a (k+2)-layer BaseConv on the k-th iterate task
PAPER = {1: 5.0e-13, 2: 2.5e-11, 3: 2.5e-11, 4: 3.1e-10}
KS = (1, 2, 3, 4)

#: the recipe's short-run settings (docs/training.md, "the done-criterion runs": step-size 500, the
#: run that reached 2.3e-9 in 30 minutes), metric every 50 steps
RECIPE = {"lr": 5e-3, "max_lr": 5e-3, "metric_every": 50, "metric_batches": 4, "warmup": 100, "threshold": 0.5,
          "step_size": 500}


def cell(config: dict) -> dict:
    """Train one (k + 2)-layer BaseConv on the k-th iterate task with ``recipe`` ``paper`` or
    ``standard`` for ``steps`` steps; report the test MSE history and the final MSE on fresh problems."""
    from numerics.sweep import cell_dir
    from numerics.training.modules import ModelConfig
    from numerics.training.recipe import RecipeConfig
    from numerics.training.trainer import TaskConfig, TrainConfig, Trainer

    k, steps, recipe = int(config["k"]), int(config["steps"]), config["recipe"]
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if recipe == "paper":
        rc = RecipeConfig.paper(**{**RECIPE, "step_size": min(RECIPE["step_size"], max(1, steps // 2))})
    elif recipe == "standard":
        rc = RecipeConfig.standard()
    else:
        raise ValueError(f"recipe must be 'paper' or 'standard', got {recipe!r}")
    cfg = TrainConfig(task=TaskConfig(name="iterate", k=k),
                      model=ModelConfig(model="baseconv", width=config.get("width", 32), layers=k + 2),
                      recipe=rc, steps=steps, batch=config.get("batch", 256),
                      eval_every=max(1, steps // 10), eval_batch=config.get("eval_batch", 1024),
                      checkpoint_every=10 ** 9, seed=config.get("seed", 0), dtype=config.get("dtype", "float32"),
                      threads=1)
    tr = Trainer(cfg, cell_dir(), progress=False)
    res = tr.run()
    n_final = config.get("final_eval", 8192)
    final = tr.evaluate(n_final, stream_idx=10 ** 9)
    final64 = tr.evaluate(n_final, stream_idx=10 ** 9, float64=True)
    hist = [{"step": h["step"], "test_mse": h["test_mse"], "lr": h["lr"], "metric_ema": h["metric_ema"]}
            for h in tr.history if math.isfinite(h["test_mse"])]
    return {"k": k, "recipe": recipe, "layers": k + 2, "steps": tr.step, "skipped": tr.skipped,
            "final_test_mse": final, "final_test_mse_f64": final64, "final_eval": n_final,
            "best_eval_mse": res["best_test_mse"], "history": hist, "params": res["params"],
            "lr_end": tr.sched.lr, "recipe_config": rc.to_json(), "eta": tr.task.eta}


def configs(quick: bool) -> list[dict]:
    if quick:
        base = {"steps": 30, "width": 8, "batch": 32, "eval_batch": 128, "final_eval": 256}
        return [{**base, "k": 1, "recipe": "paper"}, {**base, "k": 2, "recipe": "paper"},
                {**base, "k": 2, "recipe": "standard"}]
    base = {"steps": STEPS, "width": 32, "batch": 256, "eval_batch": 1024, "final_eval": 8192}
    return [{**base, "k": k, "recipe": "paper"} for k in KS] + [{**base, "k": 2, "recipe": "standard"}]


#: steps per cell of the full run (equal for every k, so the MSEs compare at equal training)
STEPS = 1000


def summarise(rows, quick: bool) -> dict:
    ok = rows_ok(rows)
    runs = {f"{r['result']['recipe']}-k{r['result']['k']}": {**r["result"], "cpu_s": r.get("cpu_s"),
                                                             "wall_s": r.get("wall_s")} for r in ok}
    s = {"name": NAME, "title": TITLE, "reference": REFERENCE, "quick": quick, "paper": {str(k): v for k, v in PAPER.items()},
         "runs": runs, "config": {"recipe": RECIPE, "steps": sorted({r["config"]["steps"] for r in ok}),
                                  "width": sorted({r["config"].get("width", 32) for r in ok}),
                                  "batch": sorted({r["config"].get("batch", 256) for r in ok})}}
    s["criteria"] = criteria(s)
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
        out.append({"id": "grows-with-k", "text": "the MSE does not decrease with k (the paper: 5.0e-13, 2.5e-11, "
                                                  "2.5e-11, 3.1e-10)",
                    "met": all(mono) if len(have) >= 2 else None, "pairs": mono})
    std, pap = runs.get("standard-k2"), rec.get(2)
    if std and pap:
        ratio = std["final_test_mse"] / pap["final_test_mse"]
        # at every common evaluation point (the same steps)
        hs = {h["step"]: h["test_mse"] for h in std["history"]}
        per = [{"step": h["step"], "ratio": hs[h["step"]] / h["test_mse"]} for h in pap["history"]
               if h["step"] in hs and h["step"] > 0 and h["test_mse"] > 0]
        out.append({"id": "recipe-vs-steplr", "text": "k = 2: the recipe at least 10x below StepLR Adam at equal steps",
                    "met": ratio >= 10, "ratio_final": ratio, "ratios": per})
    return out


def table(s: dict) -> list[dict]:
    return [{"run": name, "k": r["k"], "recipe": r["recipe"], "layers": r["layers"], "steps": r["steps"],
             "final_test_mse": r["final_test_mse"], "final_test_mse_f64": r["final_test_mse_f64"],
             "paper_mse": PAPER[r["k"]] if r["recipe"] == "paper" else None,
             "ratio_to_paper": r["final_test_mse"] / PAPER[r["k"]] if r["recipe"] == "paper" else None,
             "skipped": r["skipped"], "cpu_s": r["cpu_s"], "wall_s": r["wall_s"]}
            for name, r in sorted(s["runs"].items())]


def plot(s: dict):
    import matplotlib.pyplot as plt

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    for i, k in enumerate(KS):
        r = s["runs"].get(f"paper-k{k}")
        if r:
            a1.semilogy([h["step"] for h in r["history"]], [h["test_mse"] for h in r["history"]], "o-",
                        color=f"C{i}", label=f"k = {k}, recipe")
        a1.axhline(PAPER[k], color=f"C{i}", ls=":", lw=1)
    r = s["runs"].get("standard-k2")
    if r:
        a1.semilogy([h["step"] for h in r["history"]], [h["test_mse"] for h in r["history"]], "s--", color="C1",
                    alpha=0.6, label="k = 2, StepLR Adam")
    a1.set_xlabel("step")
    a1.set_ylabel("test MSE (float32)")
    a1.set_title("training curves (dotted: the paper's Table 7 value)", fontsize=9)
    a1.legend(fontsize=7)
    a1.grid(alpha=0.3)
    ks = [k for k in KS if f"paper-k{k}" in s["runs"]]
    a2.semilogy(ks, [s["runs"][f"paper-k{k}"]["final_test_mse"] for k in ks], "o-", label="ours (CPU, fixed steps)")
    a2.semilogy(list(KS), [PAPER[k] for k in KS], "x--", label="paper (GPU, Table 7)")
    a2.set_xticks(list(KS))
    a2.set_xlabel("k (GD iterates learned at once; k + 2 layers)")
    a2.set_ylabel("final test MSE")
    a2.legend(fontsize=8)
    a2.grid(alpha=0.3)
    fig.suptitle("Seed 000 Table 7" + (" [--quick]" if s["quick"] else ""), fontsize=10)
    fig.tight_layout()
    return fig


def markdown(s: dict, figure: str) -> str:
    L = []
    cfg = s["config"]
    L.append(f"(k + 2)-layer BaseConv, width {', '.join(map(str, cfg['width']))}, batch {', '.join(map(str, cfg['batch']))}, "
             f"{', '.join(map(str, cfg['steps']))} steps per run, float32 (the final MSE on "
             "fresh problems, also evaluated in float64 from the same weights). Recipe: "
             + ", ".join(f"{k} {v}" for k, v in cfg["recipe"].items())
             + " (at most half the steps), gradient-filter EMA, Adam eps 1e-16; StepLR: Adam lr 1e-3, x0.9 every 1e4 steps.")
    L.append("")
    L.append("| k | layers | recipe | steps | test MSE (ours) | float64 eval | paper (Table 7) | ours / paper | CPU |")
    L.append("|---|---|---|---|---|---|---|---|---|")
    for name, r in sorted(s["runs"].items(), key=lambda kv: (kv[1]["recipe"] != "paper", kv[1]["k"])):
        p = PAPER[r["k"]] if r["recipe"] == "paper" else None
        L.append(f"| {r['k']} | {r['layers']} | {'recipe' if r['recipe'] == 'paper' else 'StepLR'} | {r['steps']} | "
                 f"{fmt(r['final_test_mse'])} | {fmt(r['final_test_mse_f64'])} | {fmt(p)} | "
                 f"{fmt(r['final_test_mse'] / p) if p else '–'} | {fmt(r['cpu_s'])} s |")
    L.append("")
    L.append(f"![seed 000 Table 7]({figure})")
    L.append("")
    L.append("**Pass criteria (issue 18)**")
    L.append("")
    for c in s["criteria"]:
        L.append(f"* {c['text']}: {verdict(c['met'])}.")
        if c["id"] == "recipe-vs-steplr":
            L.append(f"  StepLR / recipe at the end: {fmt(c['ratio_final'])}x; at the evaluation points: "
                     + ", ".join(f"{p['step']}: {fmt(p['ratio'])}x" for p in c["ratios"]) + ".")
    L.append("")
    L.append("**What this setting cannot show.** The paper's precision (Table 7: "
             + ", ".join(f"{fmt(v)} at k = {k}" for k, v in PAPER.items())
             + ") comes from its long GPU runs; `docs/training.md` measures what longer CPU runs give on k = 1 "
             "(the explicit gradient task). The short runs here leave the MSE orders of magnitude above the paper's: "
             "the table's absolute values are out of reach at this budget, and the ordering claims are measured at "
             "equal, short training.")
    L.append("")
    L.append(f"**Cost.** {timing_line(s)}.")
    return "\n".join(L)
