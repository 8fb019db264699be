"""The seed003-mqar report (seed 003, Zoology Sec. 4.3 / Fig. 2 top / Claim 1): the figure, the tables
and the prose of its sections of ``docs/experiments.md``, the CPU grid's (:func:`markdown`) and the GPU
grid's (:func:`gpu_markdown`), every number read from the summary that
:func:`numerics.experiments.seed003_mqar.summarise` makes of the committed records; :func:`differences`
states every remaining difference from the paper and its reference code, read from the grid's settings."""
from __future__ import annotations

import json
import math
import statistics

from .common import fmt, fmt_seconds, gpu_cost_line, timing_line, verdict
from .seed003_mqar import MIXERS, PART_KEY, acc_at, at_least_N, configs, learn_steps, smallest_d


def blocks(*parts) -> list[str]:
    """The lines of ``parts`` (each a line or a list of lines; empty ones left out), a blank line after each."""
    out = []
    for part in parts:
        if part:
            out.extend([part] if isinstance(part, str) else part)
            out.append("")
    return out


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
        ticks = sorted({b["d"] for b in s["best"].values() if b["N"] == N} | {N})
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()
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
        if cr["id"] == "grows-with-N" and cr.get("steps"):
            said = {">": "larger", "=": "the same", "<": "smaller", None: "not read"}
            L.append("  BaseConv's smallest d reaching the threshold: " + ", ".join(
                f"N = {N}: {d or 'none'}" for N, d in cr["smallest"].items()) + "; from one N to the next: "
                + ", ".join(f"{k.replace('->', ' to ')}: {said[v]}" for k, v in cr["steps"].items()) + ".")
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
    paper_lrs = [10 ** (-4 + 2 * i / 3) for i in range(4)]
    off = sorted({x for v in s["lrs"].values() for x in v if not any(math.isclose(x, p) for p in paper_lrs)})
    L.append("learning rates per mixer " + "; ".join(f"{m} {', '.join(fmt(x) for x in v)}" for m, v in s["lrs"].items())
             + " (App. E.2: the four of np.logspace(-4, -2, 4) for every cell, the best kept"
             + (f"; {', '.join(map(fmt, off))} is above that range" if off else "") + ")"
             if off or any(len(v) < 4 for v in s["lrs"].values()) else "")
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
        "BaseConv's long filter explicit, one learned filter of length N per channel as the paper's Listing 1 and "
        "the reference code's LongConvolution (`implicit_long_conv=False`); the reference configs use its default, "
        "the implicit filter (an MLP of the positions)" + "".join(
            f": with it {sum(x['best_test_acc'] >= s['threshold'] for x in fl)} of {len(fl)} runs at N = {fl[0]['N']}, "
            f"d = {fl[0]['d']} reached {s['threshold']} (below)" for fl in [s.get("filter") or []] if fl))
    return [x for x in L if x]


LONG_CONV_TEXT = {"implicit": "the implicit long convolution (the reference default, ImplicitLongConvolution)",
                  "explicit": "the explicit long convolution (one learned filter per channel: the paper's Listing 1, "
                              "the reference's LongConvolution)"}


def setup_line(s: dict) -> str:
    """What ran: the data, the models, the training and how a cell's value is formed."""
    c = s["config"]
    return (f"MQAR as Zoology App. E.1 (Algorithm 1 and the reference generator, `random_non_queries=False`): "
            f"vocabulary {c['vocab']:,}, (N, D) = " + ", ".join(f"({N}, {D})" for N, D in s["sizes"])
            + f", power law alpha = {c['power_a']} on the query gaps, the same data for every run. Models as the "
            "reference code's Fig. 2 configs (`build_model`): two layers, each a sequence mixer with pre-LayerNorm "
            "residuals, tied read-out, the reference init and dropout; attention: one causal softmax head with "
            "learned positions; BaseConv: the reference BaseConv with a width-3 short convolution in layer 1 and "
            f"{LONG_CONV_TEXT[c.get('long_conv') or 'implicit']} in layer 2, no positions. AdamW (weight decay "
            f"{c['weight_decay']}), {int(100 * c['warmup'])}% linear warm-up then cosine decay, batch {c['batch']}, "
            f"at most {c['steps']:,} steps on {c['train_examples']:,} training examples, test accuracy on "
            f"{c['test_examples']:,} examples every {c['eval_every']} steps. Learning rates per mixer: each "
            "(mixer, N, d) runs every rate of its mixer with seeds " + ", ".join(map(str, s["seeds"]))
            + " (initialisation and data order); a cell's value is the median over the seeds at the rate with the "
            "highest median, the seeds' range beside it.")


def why_line(s: dict) -> str:
    """Why the grid is what it is: its sizes, widths, batch and steps, each with its reason (the widths' reasons
    read from the grid's results where they can be)."""
    c, th = s["config"], s["threshold"]
    Ns, Ds = [N for N, _ in s["sizes"]], sorted({D for _, D in s["sizes"]})
    att, bc = s["dims"].get("attention") or [], s["dims"].get("baseconv") or []
    if not (att and bc):
        return ""
    small = sorted({x["d"] for x in s.get("small") or []})
    top = [N for N in Ns if smallest_d(s, "baseconv", N) == max(bc)]
    words = {2: "two", 3: "three", 4: "four"}
    return (f"**Why this grid.** D = {', '.join(map(str, Ds))} at every N (App. F.1 varies N holding D constant) and "
            f"N = {', '.join(map(str, Ns))}: {words.get(len(Ns), len(Ns))} sequence lengths, so that the growth of "
            f"BaseConv's width with N is measured, at sizes this CPU affords for the whole grid (its cost is the "
            f"section's last line); the generator needs a vocabulary larger than N (the reference generator's "
            f"assertion), so V = {c['vocab']} would admit N up to {c['vocab'] - 2}, and the GPU grid below runs the "
            "paper's vocabulary and N. The widths start at "
            f"d = {min(att)} for both mixers: the smallest width at which attention reached {th} at every N in short "
            "exploratory runs"
            + (f" (d = {', '.join(map(str, small))} beside the grid, below)" if small else "")
            + f"; BaseConv's go up to d = {max(bc)}"
            + (f", with d = {', '.join(map(str, odd))} between the powers of two, so that a growth with N of less than a "
               "factor of two in width can show" if (odd := [w for w in bc if w & (w - 1)]) else "")
            + (f", its smallest width reaching {th} at N = {', '.join(map(str, top))} (the grid's widest BaseConv cells "
               "are where it demonstrably learns)" if top else "")
            + f". Batch {c['batch']}"
            + (" as App. E.2" if c["batch"] == 64 else "")
            + f" and {c['steps']:,} steps: in exploratory runs attention left the plateau in more seeds at this batch "
            "than at a larger batch with proportionally fewer steps (the same number of sequences).")


def failure_lines(s: dict) -> list[str]:
    """The cells of this grid without a result, and the cells the run started that the grid no longer has."""
    miss = (s.get("run") or {}).get("failures") or []
    grid = {json.dumps(c, sort_keys=True) for c in configs(s["quick"])}
    gone = [f for f in miss if json.dumps(f["config"], sort_keys=True) not in grid]
    miss = [f for f in miss if f not in gone]
    L = []
    if miss:
        L.append("**Cells without a result** (the table uses the other runs only): "
                 + "; ".join(f"{f['config'].get('mixer')}, N = {f['config'].get('N')}, d = {f['config'].get('d')}, "
                             f"lr {fmt(f['config'].get('lr'))}, seed {f['config'].get('seed', 0)} "
                             f"({f.get('error') or 'failed'})" for f in miss) + ".")
    if gone:
        errors = sorted({f.get("error") or "failed" for f in gone})
        L.append(f"**Cells the grid no longer has.** The run's command also started {len(gone)} cells that the grid "
                 "as committed does not contain (" + ", ".join(sorted({f"N = {f['config'].get('N')}" for f in gone}))
                 + "); each failed at once, before training: " + "; ".join(errors) + ". They are counted in the cost "
                 "line's cells and failures, and in no result.")
    return L


def cost_line(s: dict) -> str:
    per = {f"{m} cells": sum(x["cpu_s"] or 0 for x in s["runs"] if x["mixer"] == m) for m in MIXERS}
    per |= {f"{key.replace('_', ' ')} cells": sum(x["cpu_s"] or 0 for x in s.get(key) or [])
            for key in PART_KEY.values() if s.get(key)}
    c = s.get("carried")
    kept = (f" {c['cells']} of the cells are records made by an earlier code version (sources "
            f"{', '.join(c['sources'])}, finished {', '.join(c['finished'])}; {fmt_seconds(c['cpu_s'])} of CPU), whose "
            "cell function, models and data this version leaves unchanged: carried over rather than trained again, "
            "the others trained by the command above. A run is repeatable on one machine, not across machines (the "
            "float kernels differ), so a carried record and one trained here are two draws of the same seed."
            if c else "")
    return (f"**Cost.** {timing_line(s)}. CPU: " + ", ".join(f"{k} {fmt_seconds(v)}" for k, v in per.items()) + "."
            + kept)


CRITERIA_HEAD = "(a cell below the threshold counts only where that mixer {} it somewhere in the grid within as many steps)"


def markdown(s: dict, figure: str) -> str:
    """The CPU grid's section of ``docs/experiments.md``."""
    L = blocks(setup_line(s), why_line(s),
               "**Differences from the paper and its reference code** (everything else as they are): "
               + "; ".join(differences(s)) + ".",
               f"The paper (Sec. 4.3, Fig. 2 top, Claim 1): {s['paper_claim']}. The figure is an image; the text gives "
               "no per-point accuracies, so the comparison is with these statements.",
               "Test accuracy per cell: the median over seeds (their range) [the learning rate kept]:",
               results_table(s), f"![seed 003 MQAR]({figure})",
               "**Pass criteria** " + CRITERIA_HEAD.format("demonstrably reaches"), criteria_lines(s), cpu_reading(s),
               plateau_lines(s), more_seeds_lines(s), small_lines(s), long_lines(s), filter_lines(s), tuning_lines(s),
               *failure_lines(s))
    return "\n".join(L + [cost_line(s)])


def tuning_lines(s: dict) -> list[str]:
    """The learning-rate tuning cells (``TUNE``) as a table, and whether the grid runs each mixer at the rate
    that did best there."""
    tune = s.get("tune") or []
    if not tune:
        return []
    lrs = sorted({x["lr"] for x in tune})
    x0 = tune[0]
    L = [f"**Learning rates, tuned per mixer** (part of the grid, not read by the criteria): N = {x0['N']}, "
         f"seed {x0['seed']}, each mixer at one width with the paper's rates (App. E.2: np.logspace(-4, -2, 4))"
         + "".join(f" and {', '.join(fmt(lr) for lr in extra)}" for extra in [[lr for lr in lrs if lr > 0.0100001]]
                   if extra) + "; best test accuracy (steps run):", "",
         "| mixer | d | " + " | ".join(f"lr {fmt(lr)}" for lr in lrs) + " | kept for the grid |",
         "|---|---|" + "---|" * (len(lrs) + 1)]
    notes = []
    for m in MIXERS:
        mine = {x["lr"]: x for x in tune if x["mixer"] == m}
        if not mine:
            continue
        top = tuned_lr(list(mine.values()), s["config"]["test_examples"], s["threshold"])
        grid_lrs = (s.get("lrs") or {}).get(m, [])
        L.append(f"| {m} | {next(iter(mine.values()))['d']} | " + " | ".join(f"{fmt(mine[lr]['best_test_acc'])} ({mine[lr]['steps_run']:,})" if lr in mine
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


def small_lines(s: dict) -> list[str]:
    """Attention below the grid's widths (``SMALL``): per N its runs' best test accuracies and how many reached
    the threshold, beside the grid's smallest attention width."""
    xs = sorted(s.get("small") or [], key=lambda x: (x["N"], x["seed"]))
    if not xs:
        return []
    th, dmin = s["threshold"], min(s["dims"].get("attention") or [0])
    per = []
    for N in sorted({x["N"] for x in xs}):
        mine = [x for x in xs if x["N"] == N]
        per.append(f"N = {N}: " + ", ".join(f"{fmt(x['best_test_acc'])} (seed {x['seed']}"
                                            + (f", from step {x['first_at']:,}" if x.get("first_at") else "") + ")"
                                            for x in mine)
                   + f", {sum(x['best_test_acc'] >= th for x in mine)} of {len(mine)} at or above {th}")
    x0 = xs[0]
    return [f"**Attention at d = {x0['d']}** (part of the grid, not read by the criteria; the grid's widths start at "
            f"d = {dmin}): lr {fmt(x0['lr'])}, at most {x0['steps']:,} steps, best test accuracy " + "; ".join(per)
            + ". The grid starts at the smallest width at which attention reached the threshold at every N in short "
            "exploratory runs; these cells show what it does one width below."]


def more_seeds_lines(s: dict) -> list[str]:
    """The extra BaseConv seeds at the widths where it crosses the threshold (``MORE_SEEDS``): per N and d
    their best test accuracies, and over the grid's seeds and these the median and how many reached the
    threshold; then the smallest width reaching it over all those seeds at each N (read only where every seed
    of the grid's smaller widths stayed below it) and whether it grows with N as the grid's three seeds say."""
    xs = sorted(s.get("more_seeds") or [], key=lambda x: (x["N"], x["d"], x["seed"]))
    if not xs:
        return []
    th = s["threshold"]
    cells, smallest, above = [], {}, {}
    for N in sorted({x["N"] for x in xs}):
        dims = sorted({x["d"] for x in xs if x["N"] == N})
        below = [b for b in s["best"].values() if b["mixer"] == "baseconv" and b["N"] == N and b["d"] < dims[0]]
        found = None
        for d in dims:
            extra = [x for x in xs if x["N"] == N and x["d"] == d]
            b = s["best"].get(f"baseconv/{N}/{d}")
            accs = (b["accs"] if b else []) + [x["best_test_acc"] for x in extra]
            med, n_hit = statistics.median(accs), sum(a >= th for a in accs)
            cells.append(f"N = {N}, d = {d}: " + ", ".join(f"{fmt(x['best_test_acc'])} (seed {x['seed']})" for x in extra)
                         + f"; over seeds {', '.join(map(str, (b['seeds'] if b else []) + [x['seed'] for x in extra]))}: "
                         f"median {fmt(med)}, {n_hit} of {len(accs)} at or above {th}")
            if found is None and med >= th:
                found = d
        if found is None:  # above the widths with more seeds: the grid's next width reaching it, if any
            found = next((b["d"] for b in sorted(s["best"].values(), key=lambda b: b["d"]) if b["mixer"] == "baseconv"
                          and b["N"] == N and b["d"] > dims[-1] and b["acc"] >= th), None)
            above[N] = found
        smallest[N] = found if all(b["reached"] == 0 for b in below) else "not read"
    Ns = sorted(smallest)
    vals = [smallest[N] for N in Ns]
    if "not read" in vals or None in vals[:1]:
        verdict_text = "so the growth is not read over these seeds"
    else:
        seq = [math.inf if v is None else v for v in vals]  # None: above every width read
        grows = seq[-1] > seq[0] and all(b >= a for a, b in zip(seq, seq[1:]))
        verdict_text = ("it grows with N over these seeds too" if grows else
                        "over these seeds it does not grow with N, unlike the grid's three seeds")
    top = max(x["d"] for x in xs)
    per = ", ".join(f"N = {N}: " + (("above the widths with more seeds" if v is None else
                                     f"above d = {top}, so d = {v}, the grid's next width reaching it over its seeds")
                                    if N in above else f"d = {v}" if isinstance(v, int) else "not read")
                    for N, v in zip(Ns, vals))
    factor = growth_factor(s, Ns, smallest) if all(isinstance(v, int) for v in vals) else ""
    x0 = xs[0]
    return [f"**More seeds where BaseConv crosses the threshold** (part of the grid, not read by the criteria): BaseConv "
            f"at d = {', '.join(map(str, sorted({x['d'] for x in xs})))} with seeds "
            f"{', '.join(map(str, sorted({x['seed'] for x in xs})))} beside the grid's, lr {fmt(x0['lr'])}, at most "
            f"{x0['steps']:,} steps: " + "; ".join(cells) + f". Over all these seeds BaseConv's smallest width reaching "
            f"{th} (the median; every seed of the grid's smaller widths below {th}) is {per}: {verdict_text}"
            + (f"; {factor}" if factor else "") + "."]


def filter_lines(s: dict) -> list[str]:
    """The BaseConv runs with the reference configs' implicit long filter (``FILTER``) beside the grid's cell
    with the explicit one."""
    xs = sorted(s.get("filter") or [], key=lambda x: x["seed"])
    if not xs:
        return []
    x0, th = xs[0], s["threshold"]
    b = s["best"].get(f"baseconv/{x0['N']}/{x0['d']}")
    return [f"**The reference's implicit long filter** (part of the grid, not read by the criteria): BaseConv with "
            f"the implicit filter (an MLP of (t, cos, sin), the reference default), N = {x0['N']}, d = {x0['d']}, "
            f"lr {fmt(x0['lr'])}, {x0['steps']:,} steps: best test accuracy "
            + ", ".join(f"{fmt(x['best_test_acc'])} (seed {x['seed']})" for x in xs)
            + f", {sum(x['best_test_acc'] >= th for x in xs)} of {len(xs)} at or above {th}"
            + (f"; the grid's explicit filter at the same cell: median {fmt(b['acc'])} over seeds "
               f"{', '.join(map(str, b['seeds']))} ({', '.join(fmt(a) for a in b['accs'])}), at lr {fmt(b['lr'])}"
               if b else "") + "."]


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
        L.append(f"Within the CPU budget ({steps} per run) BaseConv reaches {th} at no width (its best cell above), so "
                 "this grid cannot show the width BaseConv needs, the BaseConv side of Claim 1: the gap, the growth with "
                 "N and d >= N are not read here, never met by default. The GPU section below shows what more training "
                 "gives BaseConv.")
    else:
        L.append(("BaseConv needs a larger d than attention at every N of the grid, the ordering of Claim 1 at these "
                  "sizes." if crit["gap"]["met"] else "The gap is not shown at every N (see the criteria above).")
                 + {True: " BaseConv reaches it only from d >= N, as the paper states.",
                    False: " BaseConv reaches it below d = N at some N, unlike the paper's statement (d >= N).",
                    None: ""}[at_least_N(s)["met"]])
        L.append(bc_seeds(s))
        L.append(growth_text(s))
        L.append(equal_width_text(s))
    return [" ".join(x for x in L if x)]


def growth_text(s: dict) -> str:
    """BaseConv's smallest d reaching the threshold per N, read against the growth criterion (met or not; nothing
    where it is not read), with the resolution the grid's widths allow."""
    cr = next((c for c in s["criteria"] if c["id"] == "grows-with-N"), None)
    if cr is None or cr["met"] is None:
        return ""
    th, top = s["threshold"], max(s["dims"].get("baseconv") or [0])
    Ns = sorted({b["N"] for b in s["best"].values()})
    per = ", ".join(f"N = {N}: " + (f"d = {d}" if (d := smallest_d(s, "baseconv", N)) else f"above d = {top}")
                    for N in Ns)
    bc = sorted(s["dims"].get("baseconv") or [])
    ratios = sorted({b / a for a, b in zip(bc, bc[1:])})
    step = ("a factor of two" if ratios == [2.0] else
            "factors of " + ", ".join(fmt(r) for r in ratios)) if ratios else "one width"
    if cr["met"]:
        return (f"BaseConv's smallest width reaching {th} grows with N ({per}): the growth with N that Claim 1 states. "
                f"The grid's widths are {step} apart, so the size of the growth is resolved only to that step"
                + "".join(f"; {x}" for x in (growth_factor(s, Ns), split_at_smallest(s, Ns)) if x) + ".")
    return (f"BaseConv's smallest width reaching {th} per N ({per}): the growth with N that Claim 1 states is not shown "
            f"at these widths (a growth by less than the grid's step between widths, {step}, would not show here).")


def growth_factor(s: dict, Ns: list[int], smallest: dict | None = None) -> str:
    """How much BaseConv's smallest width reaching the threshold (``smallest``: per N; default the grid's,
    :func:`smallest_d`) grows from one N to the next, bounded by the grid's widths (the smallest width lies
    above the next smaller width of the grid, at most at the one found), against N's own factor (growth in
    proportion to N), and the smallest width as a multiple of N; "" where an N has no smallest width."""
    bc = sorted(s["dims"].get("baseconv") or [])
    span = {}
    for N in Ns:
        d = smallest_d(s, "baseconv", N) if smallest is None else smallest.get(N)
        if d is None:
            return ""
        span[N] = (max((w for w in bc if w < d), default=0), d)
    parts = []
    for n0, n1 in zip(Ns, Ns[1:]):
        (lo0, hi0), (lo1, hi1) = span[n0], span[n1]
        lo, hi, k = lo1 / hi0, (hi1 / lo0 if lo0 else math.inf), n1 / n0
        where = ("less than in" if hi <= k else "more than in" if lo >= k else "consistent with growth in")
        parts.append(f"from N = {n0} to {n1} (x{fmt(k)}) it grows by a factor in ({fmt(lo)}, "
                     + ("inf" if math.isinf(hi) else fmt(hi))
                     + f") (it lies in ({lo0}, {hi0}] at N = {n0} and in ({lo1}, {hi1}] at N = {n1}): {where} proportion "
                     "to N at these sizes")
    ratio = [span[N][1] / N for N in Ns]
    return "; ".join(parts) + (f", where it is {fmt(min(ratio))} to {fmt(max(ratio))} times N" if len(set(ratio)) > 1
                               else f", where it is {fmt(ratio[0])} times N") + " (the paper: d >= N)"


def split_at_smallest(s: dict, Ns: list[int]) -> str:
    """The N whose smallest BaseConv width reaching the threshold is a cell where the seeds split: there the
    growth rests on the median of the seeds' draw."""
    split = []
    for N in Ns:
        d = smallest_d(s, "baseconv", N)
        b = s["best"].get(f"baseconv/{N}/{d}") if d else None
        if b and 0 < b["reached"] < len(b["accs"]):
            split.append(f"N = {N} (d = {d}: {b['reached']} of {len(b['accs'])} seeds)")
    return ("the seeds split at the smallest width at " + " and ".join(split)
            + ", so the growth rests on the medians there") if split else ""


def equal_width_text(s: dict) -> str:
    """BaseConv's median accuracy at each width the grid runs at every N, from one N to the next: a reading of
    the growth with N that does not hinge on the threshold (widths where every N's median stopped the runs at
    the early stop are named apart: they cannot differ)."""
    Ns = sorted({b["N"] for b in s["best"].values() if b["mixer"] == "baseconv"})
    if len(Ns) < 2:
        return ""
    stop = s["config"].get("stop_at")
    lower, other, done = [], [], []
    for d in sorted(s["dims"].get("baseconv") or []):
        accs = [acc_at(s, "baseconv", N, d) for N in Ns]
        if None in accs:
            continue
        text = f"d = {d} (" + " -> ".join(fmt(a) for a in accs) + ")"
        if stop is not None and all(a >= stop for a in accs):
            done.append(str(d))
        elif all(b < a for a, b in zip(accs, accs[1:])):
            lower.append(text)
        else:
            other.append(text)
    if not (lower or other):
        return ""
    N_text = " -> ".join(f"N = {N}" for N in Ns)
    return (f"At equal width BaseConv's median accuracy ({N_text}) "
            + (f"falls with N at {', '.join(lower)}" if lower else "falls with N at no width")
            + (f"; it does not at {', '.join(other)}" if other else "")
            + (f"; at d = {', '.join(done)} every N's runs stopped at {stop} (the early stop)" if done else "") + ".")


def bc_seeds(s: dict) -> str:
    """Per N and BaseConv width, how many seeds reached the threshold, and the cells where the seeds split (the
    median decides those cells, and with it the smallest d the criteria read)."""
    th = s["threshold"]
    bs = sorted((b for b in s["best"].values() if b["mixer"] == "baseconv"), key=lambda b: (b["N"], b["d"]))
    per = "; ".join(f"N = {N}: " + ", ".join(f"d = {b['d']}: {b['reached']} of {len(b['accs'])}" for b in bs if b["N"] == N)
                    for N in sorted({b["N"] for b in bs}))
    split = [b for b in bs if 0 < b["reached"] < len(b["accs"])]
    return (f"BaseConv's seeds reaching {th} per width: {per}."
            + (" Where the seeds split the median decides the cell: " + "; ".join(
                f"N = {b['N']}, d = {b['d']}: " + ", ".join(f"{fmt(a)} (seed {sd})" for sd, a in zip(b["seeds"], b["accs"]))
                + f", median {fmt(b['acc'])}" for b in split)
               + ", so the smallest d reaching the threshold there rests on the seeds' draw." if split else ""))


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
             f"({c['steps']:,} steps), a run stopping at {c['stop_at']}; the models as the CPU grid's, BaseConv with "
             f"{LONG_CONV_TEXT[c.get('long_conv') or 'implicit']}. The cells shared "
             f"one wall-clock budget of {fmt(run.get('budget_s'))} s on the card ({run['workers']} at a time): each "
             "measured its step time and ran the steps that fitted (the warm-up and cosine schedule laid over them), "
             "so the cells ran different numbers of steps: in brackets below.")
    first = sorted((x for x in s["runs"] if x.get("first_at") is not None), key=lambda x: (x["mixer"], x["N"], x["d"]))
    L = blocks(L, "Test accuracy [learning rate, steps run]:", results_table(s, steps=True),
               first and f"Step at which a run first reached {th}: " + "; ".join(
                   f"{x['mixer']}, N = {x['N']}, d = {x['d']}: {x['first_at']:,}" for x in first) + ".",
               f"![seed 003 MQAR on {s['device'].get('name') if s.get('device') else 'a GPU'}]({figure})",
               gpu_reading(s), "**Criteria, on what ran** " + CRITERIA_HEAD.format("reached"),
               criteria_lines(s), plateau_lines(s))
    return "\n".join(L + [gpu_cost_line(s)])


__all__ = ["plot", "markdown", "why_line", "gpu_markdown", "results_table", "criteria_lines", "plateau_lines", "differences",
           "tuning_lines", "tuned_lr", "long_lines", "more_seeds_lines", "filter_lines", "small_lines", "bc_seeds", "growth_text", "growth_factor", "split_at_smallest", "equal_width_text", "cpu_reading", "gpu_reading", "blocks"]
