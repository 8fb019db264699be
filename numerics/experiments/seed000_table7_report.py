"""The seed000-table7 section of docs/experiments.md (``seed000_table7.markdown`` and ``gpu_markdown``
call these): the CPU grid's tables, criteria and prose, every number read from the summary, and the GPU
grid's section.  The long k = 1 cells' part is :func:`.seed000_table7_long.markdown_lines`.  The prose is
data: the named templates of :mod:`.seed000_table7_text`, filled here with the computed numbers."""
from __future__ import annotations

from .common import fmt, fmt_seconds, gpu_cost_line, timing_line, verdict
from .seed000_table7 import (DECISIONS, KS, PAPER, PAPER_RECIPE, PAPER_STANDARD, RECIPE, run_label,
                             run_lr, run_order, std_name, is_warm_start, criterion_notes)
from .seed000_table7_text import say


def _ints(xs) -> str:
    return ", ".join(map(str, xs))


def recipes_table(s: dict) -> list[str]:
    """The paper's two optimiser settings (seed 000 App. B.2 Tables 5 and 4) beside what these runs used
    (read from the runs' recorded recipe configs)."""
    runs = s["runs"]
    ours = next((r for r in runs.values() if r["recipe"] == "paper" and not is_warm_start(r)), None)
    std = next((r for r in runs.values() if r["recipe"] == "standard"), None)
    steps = sorted({r["steps"] for r in runs.values()})
    span = f"{steps[0]:,}" if len(steps) == 1 else say("span", first=steps[0], last=steps[-1])
    P, S = PAPER_RECIPE, PAPER_STANDARD
    L = ["| optimiser | batch | learning rate | schedule | steps | EMA |", "|---|---|---|---|---|---|",
         say("recipes.paper", batch=P["batch"], lr=fmt(P["lr"]), scheduler=P["scheduler"], decay=P["decay"],
             step_rate=P["step_rate"], steps=P["steps"], ema_decay=P["ema_decay"], ema_lambda=P["ema_lambda"])]
    if ours:
        rc = ours["recipe_config"]
        L.append(say("recipes.ours", batch=ours.get("batch") or _ints(s["config"]["batch"]), lr=fmt(rc["lr"]),
                     cap=say("recipes.ours.cap", max_lr=fmt(rc["max_lr"])) if rc.get("max_lr") else "",
                     gamma=rc["gamma"], step_size=rc["step_size"], metric_every=rc["metric_every"],
                     metric_batches=rc["metric_batches"], threshold=rc["threshold"], steps=span, ema=rc["ema"],
                     ema_decay=rc["ema_decay"], ema_lambda=rc["ema_lambda"]))
    L.append(say("recipes.standard", batch=S["batch"], lr=fmt(S["lr"]), scheduler=S["scheduler"], decay=S["decay"],
                 step_rate=S["step_rate"], steps=S["steps"]))
    if std:
        rc = std["recipe_config"]
        L.append(say("recipes.ours_standard", name=std_name(std), batch=std.get("batch") or _ints(s["config"]["batch"]),
                     lr=fmt(rc["lr"]), steps=std["steps"],
                     schedule=say("recipes.constant", step_size=rc["step_size"]) if std["steps"] <= rc["step_size"]
                     else say("recipes.steplr", gamma=rc["gamma"], step_size=rc["step_size"])))
    L.append("")
    return L


def gpu_markdown(s: dict, figure: str) -> str:
    """The GPU section (``docs/experiments/gpu/seed000-table7``, ``numerics/experiments/gpu.sh``): what ran,
    the steps each cell ran (the comparison is not at equal steps), the criteria on what ran."""
    runs = s["runs"]
    run = s["run"]
    L = []
    paper = sorted((r for r in runs.values() if r["recipe"] == "paper" and not is_warm_start(r)), key=lambda r: r["k"])
    std = sorted((r for r in runs.values() if r["recipe"] == "standard"), key=lambda r: r["k"])
    batch = sorted({r.get("batch") for r in runs.values()})
    L.append(say("gpu.setup", ks=", ".join(str(r["k"]) for r in paper), lr=fmt(PAPER_RECIPE["lr"]),
                 standard_ks=", ".join(str(r["k"]) for r in std), batch=_ints(batch),
                 paper_batch=PAPER_RECIPE["batch"], width=_ints(s["config"]["width"]), budget=fmt(run.get("budget_s")),
                 workers=run["workers"], paper_steps=PAPER_RECIPE["steps"]))
    L.append("")
    L.append("| k | layers | optimiser | steps run | of the paper's | seconds per step | steps skipped | test MSE | "
             "paper (Table 7) | predicting 0 | best fit, k - 1 products |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, r in sorted(runs.items(), key=run_order):
        p = PAPER[r["k"]] if r["recipe"] == "paper" and not is_warm_start(r) else None
        plan = r.get("plan") or {}
        L.append(f"| {r['k']} | {r['layers']} | {run_label(r)} | {r['steps']:,} | "
                 f"{fmt(r['steps'] / PAPER_RECIPE['steps'])} | {fmt(plan.get('step_s'))} | {r['skipped']} | "
                 f"{fmt(r['final_test_mse'])} | {fmt(p)} | {fmt(r['baselines']['zero'])} | "
                 f"{fmt(r['baselines']['poly'][-1])} |")
    L.append("")
    steps = [r["steps"] for r in runs.values()]
    worse = [r for r in runs.values() if r["final_test_mse"] > r["baselines"]["zero"]]
    L.append(say("gpu.reading", fewest=min(steps), most=max(steps), share=fmt(max(steps) / PAPER_RECIPE["steps"]),
                 paper_steps=PAPER_RECIPE["steps"],
                 worse=say("gpu.worse", runs=", ".join(
                     say("gpu.worse.run", label=run_label(r), k=r["k"], mse=fmt(r["final_test_mse"]),
                         zero=fmt(r["baselines"]["zero"]), skipped=r["skipped"]) for r in worse)) if worse else ""))
    L += _figure_and_criteria(s, say("gpu.figure", card=s["device"].get("name") if s.get("device") else say("gpu.card")),
                              figure, say("gpu.criteria"))
    L.append("")
    L.append(gpu_cost_line(s))
    return "\n".join(L)


def _figure_and_criteria(s: dict, alt: str, figure: str, heading: str) -> list[str]:
    """The figure, then the criteria under ``heading``: each with its verdict and its notes."""
    L = ["", say("figure", alt=alt, figure=figure), "", heading, ""]
    for c in s["criteria"]:
        L.append(say("criterion", text=c["text"], verdict=verdict(c["met"])))
        L.extend("  " + x for x in criterion_notes(c))
    return L


def _baselines_lines(runs: dict) -> list[str]:
    """Baselines and what each run learned (the best fit of x_k by k - 1 products)."""
    L = [say("baselines"), ""]
    L.append("| k | predicting 0 | predicting x_0 | " + " | ".join(f"best fit, j = {j}" for j in range(max(KS))) + " |")
    L.append("|---|---|---|" + "---|" * max(KS))
    for k in KS:
        r = runs.get(f"paper-k{k}")
        if r:
            b = r["baselines"]
            L.append(f"| {k} | {fmt(b['zero'])} | {fmt(b['x0'])} | "
                     + " | ".join(fmt(b["poly"][j]) if j < len(b["poly"]) else "–" for j in range(max(KS))) + " |")
    L.append("")
    for name, r in sorted(runs.items(), key=run_order):
        best = min(r["history"], key=lambda h: h["test_mse"]) if r["history"] else None
        L.append(say("baselines.run", label=run_label(r), k=r["k"], mse=fmt(r["final_test_mse"]), learned=_learned(r),
                     best=say("baselines.run.best", mse=fmt(best["test_mse"]), step=best["step"], largest=fmt(
                         max(h["test_mse"] for h in r["history"] if h["step"] >= best["step"]))) if best else ""))
    L.append("")
    return L


def _cannot_show_lines(s: dict) -> list[str]:
    """What the equal-steps setting cannot show, and how long k = 1 was trained."""
    doc = (s.get("long") or {}).get("long-training-doc-k1")
    return [say("cannot_show", paper=", ".join(say("cannot_show.paper", mse=fmt(v), k=k) for k, v in PAPER.items()),
                long=say("cannot_show.long", cpu=fmt_seconds(doc["train_cpu_s"]), steps=doc["steps"],
                         mse=fmt(doc["final_test_mse"])) if doc else say("cannot_show.no_long")), ""]


def markdown(s: dict, figure: str) -> str:
    L = []
    cfg = s["config"]
    runs = s["runs"]
    std_runs = [r for r in runs.values() if r["recipe"] == "standard"]
    L.append(say("setup", width=_ints(cfg["width"]), batch=_ints(cfg["batch"]), steps=_ints(cfg["steps"]),
                 final_eval=fmt(next(iter(runs.values()))["final_eval"]) if runs else "–",
                 init_scale=", ".join(map(fmt, cfg.get("init_scale", [1.0]))),
                 recipe=", ".join(say("setup.recipe", key=k, value=v) for k, v in cfg["recipe"].items()),
                 decisions=cfg.get("decisions", DECISIONS), step_size=_ints(cfg.get("step_size", [])),
                 standard="" if not std_runs else say("setup.standard.constant")
                 if all(r["steps"] <= r["recipe_config"]["step_size"] for r in std_runs)
                 else say("setup.standard.named")))
    L.append("")
    L.extend(recipes_table(s))
    L.append("| k | layers | recipe | steps | test MSE (ours) | float64 eval | paper (Table 7) | predicting 0 | "
             "best fit, k - 1 products | ours / that fit | CPU |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, r in sorted(runs.items(), key=run_order):
        p = PAPER[r["k"]] if r["recipe"] == "paper" and not is_warm_start(r) else None
        b = r["baselines"]
        fit = b["poly"][-1]
        L.append(f"| {r['k']} | {r['layers']} | {run_label(r)} | {r['steps']} | "
                 f"{fmt(r['final_test_mse'])} | {fmt(r['final_test_mse_f64'])} | {fmt(p)} | {fmt(b['zero'])} | "
                 f"{fmt(fit)} | {fmt(r['final_test_mse'] / fit) if fit else '–'} | {fmt(r['cpu_s'])} s |")
    L += _figure_and_criteria(s, say("figure.cpu"), figure, say("criteria.cpu"))
    st1, pa1 = runs.get("standard-k1"), runs.get("paper-k1")
    if st1 and pa1:
        L.append(say("k1", standard=std_name(st1), ratio=fmt(st1["final_test_mse"] / pa1["final_test_mse"]),
                     standard_mse=fmt(st1["final_test_mse"]), recipe_mse=fmt(pa1["final_test_mse"]),
                     unequal="" if st1.get("steps") == pa1.get("steps") else
                     say("k1.unequal", standard_steps=st1.get("steps"), recipe_steps=pa1.get("steps"))))
    L.append("")
    from .seed000_table7_long import markdown_lines

    L.extend(markdown_lines(s, s["run"]["command"]))
    L.extend(_baselines_lines(runs))
    L.extend(_plateau_lines(s))
    L.extend(_cannot_show_lines(s))
    L.append(say("cost", timing=timing_line(s)))
    return "\n".join(L)


def _warm_sentence(runs: dict) -> str:
    """What the warm-start runs did (from the numbers), or how to run one when none is in the results."""
    warm = sorted((r for r in runs.values() if is_warm_start(r)), key=lambda r: (run_lr(r), r["k"]))
    if not warm:
        return say("warm.none")

    def bound(r):
        return 1e-8 if r["k"] == 1 else 1e-7

    def worst(r):
        return max(r["history"], key=lambda h: h["test_mse"], default=None)

    out = []
    for lr in sorted({run_lr(r) for r in warm}, reverse=True):
        group = [r for r in warm if run_lr(r) == lr]
        parts = []
        for r in group:
            cold = runs.get(f"paper-k{r['k']}")
            moved = r["final_test_mse"] / r["start_test_mse"]
            best = min((h["test_mse"] for h in r["history"]), default=r["final_test_mse"])
            w = worst(r)
            parts.append(say("warm.run", k=r["k"], start=fmt(r["start_test_mse"]), final=fmt(r["final_test_mse"]),
                             steps=r["steps"], moved=say("warm.run.below", ratio=fmt(1 / moved)) if moved < 1
                             else say("warm.run.above", ratio=fmt(moved)), best=fmt(best),
                             largest=say("warm.run.largest", mse=fmt(w["test_mse"]), step=w["step"]) if w else "",
                             cold=say("warm.run.cold", ratio=fmt(cold["final_test_mse"] / r["final_test_mse"]))
                             if cold else "",
                             within=say("warm.run.within" if r["final_test_mse"] <= bound(r) else "warm.run.outside")))
        knocked = all(worst(r) and worst(r)["test_mse"] > 10 * r["start_test_mse"] for r in group)
        falling = all(len(r["history"]) >= 2 and r["history"][-1]["test_mse"] == min(h["test_mse"] for h in r["history"])
                      for r in group)
        out.append(say("warm.lr", lr=fmt(lr), recipe=say("warm.lr.recipe") if lr == RECIPE["max_lr"] else "",
                       runs="; ".join(parts), knocked=say("warm.lr.knocked") if knocked else "",
                       falling=say("warm.lr.falling") if falling else ""))
    if all(r["final_test_mse"] <= bound(r) for r in warm):
        reading = say("warm.all")
    elif any(r["final_test_mse"] <= bound(r) for r in warm):
        reading = say("warm.some")
    else:
        reading = say("warm.none_reach", steps=max(r["steps"] for r in warm))
    return say("warm", groups="; ".join(out), reading=reading)


def _learned(r: dict) -> str:
    """Where a run's final MSE sits among its baselines (computed from the numbers)."""
    b, m = r["baselines"], r["final_test_mse"]
    z = b["zero"] / m
    zero = say("learned.below_zero", ratio=fmt(z)) if z >= 1 else say("learned.above_zero", ratio=fmt(1 / z))
    fit = b["poly"][-1]
    where = say("learned.not_beyond" if m >= 0.5 * fit else "learned.beyond")
    one = say("learned.one", ratio=fmt(m / b["poly"][1])) if len(b["poly"]) > 2 else ""
    return say("learned", zero=zero, ratio=fmt(m / fit), products=r["k"] - 1, where=where, one=one)


def _plateau_lines(s: dict) -> list[str]:
    """The full run's prose on the k >= 2 plateau: the probes by hand, the exact weights, the warm starts
    (none for a --quick run)."""
    if s["quick"]:
        return []
    return [say("probes"), "", say("model", warm=_warm_sentence(s["runs"])), ""]
