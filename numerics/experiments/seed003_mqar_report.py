"""The seed003-mqar report (seed 003, Zoology Sec. 4.3 / Fig. 2 top / Claim 1): the figure, the tables
and the prose of its sections of ``docs/experiments.md``, the CPU grid's (:func:`markdown`) and the GPU
grid's (:func:`gpu_markdown`), every number read from the summary that
:func:`numerics.experiments.seed003_mqar.summarise` makes of the committed records; :func:`differences`
states every remaining difference from the paper and its reference code, read from the grid's settings.
The prose is data: the named templates of :mod:`.seed003_mqar_text`, filled here with the computed numbers."""
from __future__ import annotations

import json
import math
import statistics

from .common import fmt, fmt_seconds, gpu_cost_line, timing_line, verdict
from .seed003_mqar import (MIXERS, PART_KEY, WIDTHS, WIDTHS_DIR, WIDTHS_GRID_FILE, acc_at, at_least_N, configs, learn_steps,
                           missing_cells, pooled, smallest_d)
from .seed003_mqar_text import COUNT_WORDS, GROWTH_SAID, POOLED_CHECK, STATE_SAID, TEXT, WIDTHS_SAID, say


def blocks(*parts) -> list[str]:
    """The lines of ``parts`` (each a line or a list of lines; empty ones left out), a blank line after each."""
    out = []
    for part in parts:
        if part:
            out.extend([part] if isinstance(part, str) else part)
            out.append("")
    return out


def plot(s: dict):
    """One panel per N: every seed's run per d (circles) at the grid's rate, the grid's seeds and those of the
    parts that share its settings (:func:`~numerics.experiments.seed003_mqar.pooled`), and each mixer's median
    over them (a line; where a mixer's cells ran different numbers of steps, a budget's shares on a GPU, no line
    joins them and each point is labelled with its steps: widths apart are then not at equal training), the
    threshold, 1/D (the accuracy of answering with one of the D values of the context
    without matching the key: the plateau) and d = N."""
    import matplotlib.pyplot as plt

    cells = pooled(s)
    Ns = sorted({b["N"] for b in s["best"].values()} | {c["N"] for c in cells.values()}) or [64]
    Ds = ({N: D for N, D in s["sizes"]} if s.get("sizes") else {}) | {c["N"]: c["D"] for c in cells.values()}
    fig, axes = plt.subplots(1, len(Ns), figsize=(5 * len(Ns), 4.8), squeeze=False)
    for ax, N in zip(axes[0], Ns):
        for i, m in enumerate(MIXERS):
            bs = sorted((b for b in cells.values() if b["mixer"] == m and b["N"] == N), key=lambda b: b["d"])
            if not bs:
                continue
            ds, acc = [b["d"] for b in bs], [b["median"] for b in bs]
            ns = sorted({len(b["accs"]) for b in bs})
            seeds = f"{ns[0]}" if len(ns) == 1 else f"{ns[0]}-{ns[-1]}"
            budgets = sorted({b["budget"] for b in bs})
            label = m + (f": median of every seed ({seeds} per width)" if ns[-1] > 1 else "")
            if len(budgets) > 1:  # unequal training budgets: no line, each point labelled with its steps run
                ran = sorted({b["ran"] for b in bs})
                label += f", {ran[0]:,} to {ran[-1]:,} steps run (labelled): not at equal training"
                for b in bs:
                    ax.annotate(f"{b['ran']:,}", (b["d"], b["median"]), textcoords="offset points",
                                xytext=(4, 6 if i else -10), fontsize=6, color=f"C{i}")
            ax.plot(ds, acc, ls="-" if len(budgets) == 1 else "none", marker="x" if len(budgets) > 1 else None,
                    color=f"C{i}", lw=1.2, label=label)
            # every seed's run at the grid's rate, slightly apart so that equal values stay visible
            for b in bs:
                ax.plot([b["d"] * (1.04 if i else 0.96)] * len(b["accs"]), b["accs"], "o", color=f"C{i}",
                        alpha=0.55, ms=4, mfc="none")
        ax.axhline(s["threshold"], color="grey", ls=":", lw=1, label=f"threshold {s['threshold']}")
        if N in Ds:
            ax.axhline(1 / Ds[N], color="C3", ls="-.", lw=1, label=f"1/D = {fmt(1 / Ds[N])} (no key match)")
        ax.axvline(N, color="grey", ls="--", lw=0.8, label="d = N")
        ax.set_xscale("log", base=2)
        ticks = sorted({b["d"] for b in cells.values() if b["N"] == N} | {N})
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("model dimension d")
        ax.set_ylabel("best test accuracy")
        wide = N in WIDTHS["vocab_at"] and any(x["N"] == N for x in s.get("widths") or [])
        ax.set_title(f"N = {N}" + (f", D = {Ds[N]}" if N in Ds else "")
                     + (f", vocabulary {WIDTHS['vocab_at'][N]} (the width grid's)" if wide else ""), fontsize=9)
        ax.grid(alpha=0.3)
        wide = max((len(h) for h in ax.get_legend_handles_labels()[1]), default=0) > 60
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1 if wide else 2, frameon=False)
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


def _ints(xs) -> str:
    return ", ".join(map(str, xs))


def _sizes(s: dict) -> str:
    return ", ".join(f"({N}, {D})" for N, D in s["sizes"])


def _yes_no(v) -> str:
    return "–" if v is None else say("yes" if v else "no")


def _run_seed(acc, seed, first_at=None) -> str:
    """One run's accuracy and seed, and the step at which it first reached the threshold where given."""
    return say("run.seed", acc=fmt(acc), seed=seed, first=say("run.from_step", step=first_at) if first_at else "")


#: the criterion that decides Claim 1 (issue 45 item 1): both mixers on the same width grid, the median over
#: ``WANT_SEEDS`` seeds at every cell that decides a crossing, N growing; the others read only the first grid
DECIDING = "widths-vs-N"


def deciding(s: dict) -> dict | None:
    """The summary's deciding criterion, where it has one read on the width grid both mixers share."""
    return next((c for c in s.get("criteria", []) if c["id"] == DECIDING and c.get("bounds") and s.get("widths")),
                None)


def first_grid(s: dict) -> dict:
    """What the criteria other than the deciding one read: the first grid's N, widths per mixer and seeds."""
    return {"Ns": ", ".join(str(N) for N, _ in s["sizes"]), "seeds": ", ".join(map(str, s["seeds"])),
            "dims": "; ".join(say("headline.dims", mixer=m, ds=", ".join(map(str, s["dims"][m])))
                              for m in MIXERS if s["dims"].get(m))}


def _said(met: bool | None) -> str:
    """Whether the setting shows Claim 1, as the deciding criterion reads it."""
    return say("headline.said.open") if met is None else (say("headline.said.met") if met else say("headline.said.not"))


def _steps_text(cr: dict) -> str:
    return "; ".join(say("crit.widths.steps.mixer", mixer=m, steps=", ".join(
        say("crit.widths.step", pair=k.replace("->", " to "), said=WIDTHS_SAID[v]) for k, v in cr["steps"][m].items()))
        for m in MIXERS if (cr.get("steps") or {}).get(m))


def headline(s: dict) -> str:
    """The section's first paragraph: whether this setting shows Claim 1, by the deciding criterion, with each
    mixer's smallest width per N and the step from one N to the next; then how many of the other criteria, which
    read only the first grid, are met there.  Empty where the summary has no deciding criterion."""
    cr = deciding(s)
    if cr is None:
        return ""
    others = [c for c in s["criteria"] if c is not cr]
    per = "; ".join(say("crit.widths.mixer", mixer=m, said=WIDTHS_SAID[cr["per_mixer"][m]],
                        per=", ".join(crossing_text(cr, m, N) for N in cr["bounds"][m])) for m in MIXERS)
    widths = sorted(set(cr["widths"]["attention"]) & set(cr["widths"]["baseconv"]))
    steps, g = _steps_text(cr), first_grid(s)
    return say("headline", said=_said(cr["met"]), th=fmt(s["threshold"]),
               widths=", ".join(map(str, widths)), Ns=", ".join(next(iter(cr["bounds"].values()))),
               want=cr.get("want") or WANT_SEEDS, per=per, steps=say("headline.steps", per=steps) if steps else "",
               others=say("headline.others", n=len(others), met=sum(bool(c["met"]) for c in others), Ns=g["Ns"],
                          dims=g["dims"], seeds=g["seeds"])
               if others else "")


def index_criteria(s: dict) -> str | None:
    """The index table's reading of this summary: the deciding criterion's result first, then the other criteria
    as read on the narrower first grid; None where the summary has no deciding criterion (the index's default)."""
    cr = deciding(s)
    if cr is None:
        return None
    others = [c for c in s["criteria"] if c is not cr]
    return say("index", want=cr.get("want") or WANT_SEEDS, said=_said(cr["met"]),
               others=say("index.others", met=sum(bool(c["met"]) for c in others), n=len(others),
                          seeds=len(s["seeds"]), Ns=first_grid(s)["Ns"]))


def criteria_lines(s: dict) -> list[str]:
    """The criteria, the deciding one first; each other one says that it reads only the first grid."""
    L = []
    cr0 = deciding(s)
    g = first_grid(s) if cr0 is not None else {}
    narrower = say("crit.narrower", Ns=g["Ns"], dims=g["dims"], seeds=g["seeds"]) if g else ""
    for cr in sorted(s["criteria"], key=lambda c: c is not cr0):
        unread = [N for N, v in (cr.get("per_N") or {}).items() if v is None]
        L.append(say("crit", text=cr["text"], verdict=verdict(cr["met"]),
                     unread=say("crit.unread", Ns=", ".join(unread)) if cr["met"] is not None and unread else "",
                     narrower=narrower if cr0 is not None and cr is not cr0 else ""))
        if cr.get("per_N"):
            L.append(say("crit.per_N", per=", ".join(say("crit.per_N.item", N=N, said=_yes_no(v))
                                                    for N, v in cr["per_N"].items())))
        if cr["id"] == "gap":
            L.append(say("crit.gap", per="; ".join(
                say("crit.gap.item", N=N, attention=v["attention"] or say("none"), baseconv=v["baseconv"] or say("none"))
                for N, v in cr["smallest"].items())))
        if cr["id"] == "grows-with-N" and cr.get("steps"):
            L.append(say("crit.growth",
                         per=", ".join(say("crit.growth.item", N=N, d=d or say("none")) for N, d in cr["smallest"].items()),
                         steps=", ".join(say("crit.growth.step", pair=k.replace("->", " to "), said=GROWTH_SAID[v])
                                         for k, v in cr["steps"].items())))
        if cr["id"] == "widths-vs-N":
            L.extend(widths_lines(s, cr))
        for n in cr.get("notes", []):
            L.append(say("crit.note", note=n[0].upper() + n[1:]))
    return L


#: the seeds per cell the width criterion asks for at every cell that decides a crossing (issue 45 item 1)
WANT_SEEDS = len(WIDTHS["seeds"])


def crossing_text(cr: dict, m: str, N: str) -> str:
    """One mixer's smallest width reaching the threshold at one N as the criterion reads it: the width, "above"
    every width, or where seeds are missing the widths it lies between (undecided)."""
    b, top = cr["bounds"][m][N], max(cr["widths"][m] or [0])
    if b["decided"]:
        return say("crit.widths.item", N=N, d=b["lo"] if b["lo"] is not None else say("crit.widths.above", top=top))
    seeds = any(c["state"] == "open" and c["missing"] for c in cr["decide"][m][N])
    why = say("crit.widths.why.seeds") if seeds else say("crit.widths.why.short")
    if b["hi"] is None:
        return say("crit.widths.open.above", N=N, lo=b["lo"], why=why)
    return say("crit.widths.open", N=N, lo=b["lo"], hi=b["hi"], why=why)


def widths_lines(s: dict, cr: dict) -> list[str]:
    """The smallest-width criterion's readings: per mixer the smallest width per N (or the widths it lies between
    where seeds are missing) and its reading, the cells that decide each crossing with their seeds and state (those
    with fewer than the seeds asked for named), where undecided the cells missing, and a mixer whose smallest width
    is the lowest it ran (it may be lower)."""
    want = cr.get("want") or WANT_SEEDS
    per = "; ".join(say("crit.widths.mixer", mixer=m, said=WIDTHS_SAID[cr["per_mixer"][m]],
                        per=", ".join(crossing_text(cr, m, N) for N in cr["bounds"][m])) for m in MIXERS)
    cells = [(m, N, c) for m in MIXERS for N, cs in cr["decide"][m].items() for c in cs]
    text = lambda m, N, c: say("crit.widths.cell", mixer=m, N=N, d=c["d"], hit=c["reached"], n=c["seeds"],  # noqa: E731
                               median=fmt(c["median"]), state=STATE_SAID[c["state"]])
    few = [say("crit.widths.few.cell", mixer=m, N=N, d=c["d"], n=c["seeds"]) for m, N, c in cells
           if c["seeds"] < want]
    steps = _steps_text(cr)
    L = [say("crit.widths", want=want, per=per),
         say("crit.widths.steps", per=steps) if steps else "",
         say("crit.widths.decide", cells="; ".join(text(m, N, c) for m, N, c in cells),
             few=say("crit.widths.few", want=want, cells="; ".join(few)) if few else "")]
    open_ = [m for m in MIXERS if {"undecided", "short"} & {cr["per_mixer"][m], *(cr.get("steps") or {}).get(m, {}).values()}]
    miss = [(m, N, c) for m in open_ for N, cs in cr["missing"][m].items() for c in cs]
    if miss:
        L.append(say("crit.widths.missing", mixers=" and ".join(open_), cells="; ".join(
            say("crit.widths.missing.cell", mixer=m, N=N, d=c["d"], n=c["seeds"], missing=c["missing"], want=want)
            if c["missing"] else say("crit.widths.missing.short", mixer=m, N=N, d=c["d"]) for m, N, c in miss)))
    for m in MIXERS:
        ws = cr["widths"][m]
        low = [N for N, d in cr["smallest"][m].items() if ws and d == ws[0]]
        if low:
            L.append(say("crit.widths.lowest", mixer=m, Ns=", ".join(low), d=ws[0]))
    return [x for x in L if x]


def setting_lines(s: dict) -> list[str]:
    """Each difference of the setting from the paper's that bears on the verdicts, with its number read from the
    grid's settings and records and what it does to the conclusion: the sequence lengths, the vocabulary, the
    epochs, the one learning rate tuned at one cell, and the N at which the query positions are fixed."""
    c = s["config"]
    # the CPU grid's N and the width grid's (N = 64 has records of the width grid's run only)
    sizes = dict(s["sizes"]) | {x["N"]: x["D"] for x in s.get("widths") or []}
    Ns = sorted(sizes)
    if not Ns:
        return []
    items = [say("setting.N", Ns=_ints(Ns), paper_lo=min(PAPER["Ns"]), paper_hi=max(PAPER["Ns"]),
                 lo=fmt(min(PAPER["Ns"]) / max(Ns)), hi=fmt(max(PAPER["Ns"]) / min(Ns)),
                 pairs=fmt(math.log2(max(Ns) / min(Ns)))),
             say("setting.vocab", vocab=c["vocab"], paper=PAPER["vocab"], ratio=fmt(PAPER["vocab"] / c["vocab"]),
                 keys=c["vocab"] // 2 - 1, paper_keys=PAPER["vocab"] // 2 - 1)]
    wide = sorted({x["N"] for x in s.get("widths") or [] if x["N"] in WIDTHS["vocab_at"]})
    if wide:  # the width grid's N above the CPU grid's vocabulary: another vocabulary there
        ratios = {N: (WIDTHS["vocab_at"].get(N) or c["vocab"]) / N for N in sorted(set(Ns) | set(wide))}
        items.append(say("setting.vocab_at", Ns=_ints(wide), vocab=_ints(WIDTHS["vocab_at"][N] for N in wide),
                         base=c["vocab"], ratios=", ".join(say("setting.vocab_at.ratio", N=N, r=fmt(r))
                                                           for N, r in ratios.items())))
    epochs = c["steps"] * c["batch"] / c["train_examples"]
    items.append(say("setting.epochs", epochs=fmt(epochs), ratio=fmt(PAPER["epochs"] / epochs)))
    tune = s.get("tune") or []
    tuned = "; ".join(say("setting.lr.cell", mixer=m, N=xs[0]["N"], d=xs[0]["d"])
                      for m in MIXERS for xs in [[x for x in tune if x["mixer"] == m]] if xs)
    if tuned:
        items.append(say("setting.lr", lrs="; ".join(f"{m} {', '.join(fmt(v) for v in s['lrs'].get(m, []))}" for m in MIXERS),
                         cells=tuned))
    gaps = {N: (N - 2 * D) // 2 for N, D in sizes.items()}
    sets = {N: math.comb(gaps[N], D) for N, D in sizes.items()}
    fixed = [N for N in Ns if sets[N] == 1]
    other = [N for N in Ns if sets[N] > 1]
    if fixed and other:
        D = sizes[fixed[0]]
        items.append(say("setting.positions", fixed=fixed[0], D=D, gaps=gaps[fixed[0]], other=other[0],
                         sets=", ".join(say("setting.positions.set", sets=sets[N], N=N) for N in other)))
    return [say("setting", items="; ".join(items))]


def cpu_estimate(runs: list[dict], m: str, N: int, d: int) -> tuple[float, str] | None:
    """The estimated CPU seconds of one run of ``m`` at (N, d) from the recorded ``runs`` (each with ``cpu_s``), and
    how it was read: ``"cell"`` (the mean over that cell's runs), ``"width"`` (the recorded width nearest d at the
    same mixer and N, scaled in proportion to d), ``"length"`` (the same at the largest N below with runs, scaled
    in proportion to N too); None where the mixer has no run at N or below."""
    import math

    mean: dict = {}
    for x in runs:
        mean.setdefault((x["mixer"], x["N"], x["d"]), []).append(x["cpu_s"])
    mean = {k: sum(v) / len(v) for k, v in mean.items()}
    if (m, N, d) in mean:
        return mean[(m, N, d)], "cell"
    for n, how in [(N, "width"), (max((n for (mm, n, _) in mean if mm == m and n < N), default=None), "length")]:
        ws = [w for (mm, nn, w) in mean if mm == m and nn == n]
        if n is not None and ws:
            w = min(ws, key=lambda w: (abs(math.log(w / d)), w))
            return mean[(m, n, w)] * d / w * N / n, how
    return None


def relapse_lines(s: dict) -> list[str]:
    """Per mixer: the widths of the width grid above its smallest width reaching the threshold at an N where the
    median over the recorded seeds (three at least) falls below the threshold again, with the learning rate that
    ran them and the cell it was tuned at: accuracy is then not monotone in width in this setting, which the
    smallest-width criterion (the first crossing) does not read."""
    th, p = s["threshold"], pooled(s)
    tune = s.get("tune") or []
    out = []
    for m in MIXERS:
        items = []
        for N, _ in WIDTHS["sizes"]:
            reached = False
            for d in sorted(WIDTHS["dims"]):
                c = p.get(f"{m}/{N}/{d}")
                if c is None or len(c["seeds"]) < 3:
                    continue
                if c["median"] >= th:
                    reached = True
                elif reached:
                    items.append(say("relapse.cell", N=N, d=d, median=fmt(c["median"]), n=len(c["seeds"]),
                                     reached=c["reached"]))
        if items:
            cell = next((say("setting.lr.cell", mixer=m, N=xs[0]["N"], d=xs[0]["d"])
                         for xs in [[x for x in tune if x["mixer"] == m]] if xs), None)
            out.append(say("relapse", mixer=m, th=th, cells="; ".join(items),
                           lr=", ".join(fmt(v) for v in (s.get("lrs") or {}).get(m, [])),
                           tuned=cell or say("relapse.untuned")))
    return out


def missing_lines(s: dict) -> list[str]:
    """The cells of the width grid (:data:`~numerics.experiments.seed003_mqar.WIDTHS`) without a record, grouped
    per mixer and N, their estimated CPU time (:func:`cpu_estimate`, summed) and the command that runs them."""
    miss = missing_cells(s)
    if not miss or s["quick"]:
        return []
    runs = [x for x in [*s["runs"], *(s.get("small") or []), *(s.get("more_seeds") or []), *(s.get("widths") or [])]
            if x.get("cpu_s")]
    groups, cpu, ways = [], 0.0, {}
    for m in MIXERS:
        for N, _ in WIDTHS["sizes"]:
            mine = [c for c in miss if c["mixer"] == m and c["N"] == N]
            if not mine:
                continue
            by_d = {}
            for c in mine:
                by_d.setdefault(c["d"], []).append(c["seed"])
            groups.append(say("missing.group", mixer=m, N=N, cells=", ".join(
                say("missing.cell", d=d, seeds=_ints(sd)) for d, sd in sorted(by_d.items()))))
            for c in mine:
                e = cpu_estimate(runs, m, N, c["d"])
                if e is not None:
                    cpu += e[0]
                    ways[e[1]] = ways.get(e[1], 0) + 1
                else:
                    ways["none"] = ways.get("none", 0) + 1
    per_n = []  # per N: the grid's recorded CPU (one run per seed: the mean of a seed's records) and the estimate
    p = pooled(s)
    for N, _ in WIDTHS["sizes"]:
        done = 0.0
        for m in MIXERS:
            for d in WIDTHS["dims"]:
                c = p.get(f"{m}/{N}/{d}")
                by_seed: dict = {}
                for sd, t in zip(c["seeds"] if c else (), c["cpu"] if c else ()):
                    if sd in WIDTHS["seeds"] and t:
                        by_seed.setdefault(sd, []).append(t)
                done += sum(sum(v) / len(v) for v in by_seed.values())
        est = sum(e[0] for c in miss if c["N"] == N for e in [cpu_estimate(runs, c["mixer"], N, c["d"])] if e)
        per_n.append(say("missing.per_n", N=N, done=fmt(done / 3600), left=fmt(est / 3600),
                         whole=fmt((done + est) / 3600)))
    how = ", ".join(text for k, text in (("cell", say("missing.how.cell", n=ways.get("cell"))),
                                         ("width", say("missing.how.width", n=ways.get("width"))),
                                         ("length", say("missing.how.length", n=ways.get("length"))),
                                         ("none", say("missing.how.none", n=ways.get("none")))) if k in ways)
    return [say("missing", out=WIDTHS_DIR, dims=_ints(WIDTHS["dims"]), seeds=_ints(WIDTHS["seeds"]),
                Ns=_ints(N for N, _ in WIDTHS["sizes"]), vocab_Ns=_ints(WIDTHS["vocab_at"]),
                vocab_at=_ints(WIDTHS["vocab_at"].values()), n=len(miss), cells="; ".join(groups),
                hours=fmt(cpu / 3600), grid_file=WIDTHS_GRID_FILE, how=how, per_n="; ".join(per_n))]


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
                parts.append(say("plateau.N", N=N, inv_D=fmt(1 / D), left=sum(x["best_test_acc"] > 1.5 / D for x in rs),
                                 n=len(rs), hit=sum(x["best_test_acc"] >= th for x in rs), th=th))
        if parts:
            L.append(say("plateau", mixer=m, parts="; ".join(parts)))
    memo = [x for x in s["runs"] if x["final_train_loss"] is not None and math.isfinite(x["final_train_loss"])
            and x["final_train_loss"] < 0.25 * math.log(x["D"]) and x["best_test_acc"] < 0.75]
    if memo:
        L.append(say("plateau.memorised", train_examples=s["config"]["train_examples"], runs="; ".join(
            say("plateau.memorised.run", mixer=x["mixer"], N=x["N"], d=x["d"], seed=x["seed"],
                loss=fmt(x["final_train_loss"]), acc=fmt(x["best_test_acc"])) for x in memo)))
    logv = math.log(s["config"]["vocab"] or 2)
    high = [x for x in s["runs"] if x["final_train_loss"] is not None and math.isfinite(x["final_train_loss"])
            and x["final_train_loss"] > (logv + math.log(x["D"])) / 2 and x["best_test_acc"] < 1.5 / x["D"]]
    if high:
        L.append(say("plateau.high", log_V=fmt(logv), runs="; ".join(
            say("plateau.high.run", mixer=x["mixer"], N=x["N"], d=x["d"], lr=fmt(x["lr"]), seed=x["seed"],
                loss=fmt(x["final_train_loss"])) for x in high)))
    return L


#: the paper's settings that the differences are read against (App. E.2, F.1): vocabulary, sequence
#: lengths N, widths d, test examples and the power law's alpha
PAPER = {"vocab": 8192, "Ns": (64, 128, 256, 512), "dims": (64, 128, 256, 512), "test_examples": 3000,
         "power_a": 0.1, "epochs": 64}


def differences(s: dict) -> list[str]:
    """Every remaining difference between this grid and the paper (App. E.2, F.1) and its reference code
    (the Fig. 2 configs), read from the grid's settings."""
    c = s["config"]
    dims = sorted({b["d"] for b in s["best"].values()})
    L = []

    def add(same, text):
        if not same:
            L.append(text)
    add(c["vocab"] == PAPER["vocab"], say("diff.vocab", vocab=c["vocab"], paper=PAPER["vocab"]))
    add(set(N for N, _ in s["sizes"]) >= set(PAPER["Ns"]), say("diff.sizes", sizes=_sizes(s)))
    add(set(dims) >= set(PAPER["dims"]), say("diff.dims", dims=_ints(dims), paper=_ints(PAPER["dims"])))
    paper_lrs = [10 ** (-4 + 2 * i / 3) for i in range(4)]
    off = sorted({x for v in s["lrs"].values() for x in v if not any(math.isclose(x, p) for p in paper_lrs)})
    L.append(say("diff.lrs", per="; ".join(say("diff.lrs.mixer", mixer=m, lrs=", ".join(fmt(x) for x in v))
                                           for m, v in s["lrs"].items()),
                 off=say("diff.lrs.off", lrs=", ".join(map(fmt, off))) if off else "")
             if off or any(len(v) < 4 for v in s["lrs"].values()) else "")
    L.append(say("diff.seeds", n=len(s["seeds"]), more=say("diff.seeds.more") if len(s["seeds"]) > 1 else ""))
    epochs = c["steps"] * c["batch"] / c["train_examples"]
    add(False, say("diff.steps", steps=c["steps"], batch=c["batch"], sequences=c["steps"] * c["batch"],
                   epochs=fmt(epochs), train_examples=c["train_examples"], warmup_pct=int(100 * c["warmup"])))
    add(c["test_examples"] == PAPER["test_examples"],
        say("diff.test", test_examples=c["test_examples"], paper=PAPER["test_examples"]))
    add(c["power_a"] == PAPER["power_a"], say("diff.alpha", power_a=c["power_a"], paper=PAPER["power_a"]))
    if c["power_a"] == PAPER["power_a"]:
        L.append(say("diff.alpha.paper", paper=PAPER["power_a"]))
    L.append(say("diff.mlp"))
    if c.get("stop_at"):
        L.append(say("diff.stop", stop_at=c["stop_at"], eval_every=c["eval_every"]))
    add((c.get("long_conv") or "implicit") == "implicit", say("diff.filter", implicit="".join(
        say("diff.filter.implicit", hit=sum(x["best_test_acc"] >= s["threshold"] for x in fl), n=len(fl),
            N=fl[0]["N"], d=fl[0]["d"], th=s["threshold"]) for fl in [s.get("filter") or []] if fl)))
    return [x for x in L if x]


#: the long convolution each ``long_conv`` setting names, as the sections describe it
LONG_CONV_TEXT = {k: TEXT[f"long_conv.{k}"] for k in ("implicit", "explicit")}


def setup_line(s: dict) -> str:
    """What ran: the data, the models, the training and how a cell's value is formed."""
    c = s["config"]
    return say("setup", vocab=c["vocab"], sizes=_sizes(s), power_a=c["power_a"],
               long_conv=LONG_CONV_TEXT[c.get("long_conv") or "implicit"], weight_decay=c["weight_decay"],
               warmup_pct=int(100 * c["warmup"]), batch=c["batch"], steps=c["steps"],
               train_examples=c["train_examples"], test_examples=c["test_examples"], eval_every=c["eval_every"],
               seeds=_ints(s["seeds"]))


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
    odd = [w for w in bc if w & (w - 1)]  # widths between the powers of two
    return say("why", Ds=_ints(Ds), Ns=_ints(Ns), n_Ns=COUNT_WORDS.get(len(Ns), len(Ns)), vocab=c["vocab"],
               largest_N=c["vocab"] - 2, d_min=min(att), th=th,
               small=say("why.small", ds=_ints(small)) if small else "", d_max=max(bc),
               odd=say("why.odd", ds=_ints(odd)) if odd else "",
               top=say("why.top", th=th, Ns=_ints(top)) if top else "", batch=c["batch"],
               paper_batch=say("why.paper_batch") if c["batch"] == 64 else "", steps=c["steps"])


def failure_lines(s: dict) -> list[str]:
    """The cells of this grid without a result, and the cells the run started that the grid no longer has."""
    miss = (s.get("run") or {}).get("failures") or []
    grid = {json.dumps(c, sort_keys=True) for c in configs(s["quick"])}
    gone = [f for f in miss if json.dumps(f["config"], sort_keys=True) not in grid]
    miss = [f for f in miss if f not in gone]
    L = []
    if miss:
        L.append(say("failed", cells="; ".join(
            say("failed.cell", mixer=f["config"].get("mixer"), N=f["config"].get("N"), d=f["config"].get("d"),
                lr=fmt(f["config"].get("lr")), seed=f["config"].get("seed", 0),
                error=f.get("error") or say("failed.error")) for f in miss)))
    if gone:
        errors = sorted({f.get("error") or say("failed.error") for f in gone})
        L.append(say("gone", n=len(gone), Ns=", ".join(sorted({say("gone.N", N=f["config"].get("N")) for f in gone})),
                     errors="; ".join(errors)))
    return L


def cost_line(s: dict) -> str:
    per = {m: sum(x["cpu_s"] or 0 for x in s["runs"] if x["mixer"] == m) for m in MIXERS}
    per |= {key.replace("_", " "): sum(x["cpu_s"] or 0 for x in s.get(key) or [])
            for key in (*PART_KEY.values(), "widths") if s.get(key)}
    c = s.get("carried") or {}
    hand = c.get("by_hand", c if c and "by_hand" not in c else None)  # a summary made before the two were told apart
    ok = c.get("verified")
    kept = ((say("cost.carried", cells=hand["cells"], sources=", ".join(hand["sources"]),
                 finished=", ".join(hand["finished"]), cpu=fmt_seconds(hand["cpu_s"]),
                 pooled=say("cost.pooled", before=POOLED_CHECK["before"], after=POOLED_CHECK["after"],
                            steps=POOLED_CHECK["steps"], cell=POOLED_CHECK["cell"], n_cells=POOLED_CHECK["n_cells"])) if hand else "")
            + (say("cost.verified", cells=ok["cells"], sources=", ".join(ok["sources"]),
                   commits=", ".join(f"{k} ({v})" for k, v in ok["commits"].items()), cpu=fmt_seconds(ok["cpu_s"]))
               if ok else ""))
    w = s.get("widths_run")
    kept += say("cost.widths", cells=w["cells"], cpu=fmt_seconds(w["cpu_s"]), wall=fmt_seconds(w["wall_s"]),
                first=w["first"][:16], last=w["last"][:16], sources=", ".join(w["sources"]), grid_file=WIDTHS_GRID_FILE,
                out=WIDTHS_DIR) if w else ""
    return say("cost", timing=timing_line(s), carried=kept,
               per=", ".join(say("cost.part", what=k, cpu=fmt_seconds(v)) for k, v in per.items()))


#: the criteria's heading, with the verb of its reading (the CPU grid: "demonstrably reaches"; the GPU grid: "reached")
CRITERIA_HEAD = TEXT["criteria.head"].replace("{verb}", "{}")


def markdown(s: dict, figure: str) -> str:
    """The CPU grid's section of ``docs/experiments.md``."""
    L = blocks(headline(s), setup_line(s), why_line(s), say("differences", items="; ".join(differences(s))),
               say("paper", claim=s["paper_claim"]), say("table"),
               results_table(s), say("figure", figure=figure),
               say("criteria", head=say("criteria.head", verb=say("criteria.verb.cpu"))), criteria_lines(s),
               setting_lines(s), relapse_lines(s), missing_lines(s), cpu_reading(s), plateau_lines(s), more_seeds_lines(s), small_lines(s), long_lines(s), filter_lines(s),
               tuning_lines(s), *failure_lines(s))
    return "\n".join(L + [cost_line(s)])


def tuning_lines(s: dict) -> list[str]:
    """The learning-rate tuning cells (``TUNE``) as a table, and whether the grid runs each mixer at the rate
    that did best there."""
    tune = s.get("tune") or []
    if not tune:
        return []
    lrs = sorted({x["lr"] for x in tune})
    x0 = tune[0]
    extra = [lr for lr in lrs if lr > 0.0100001]  # above the paper's rates
    L = [say("tune", N=x0["N"], seed=x0["seed"], extra=say("tune.extra", lrs=", ".join(fmt(lr) for lr in extra))
             if extra else ""), "",
         "| mixer | d | " + " | ".join(f"lr {fmt(lr)}" for lr in lrs) + " | kept for the grid |",
         "|---|---|" + "---|" * (len(lrs) + 1)]
    notes = []
    for m in MIXERS:
        mine = {x["lr"]: x for x in tune if x["mixer"] == m}
        if not mine:
            continue
        top = tuned_lr(list(mine.values()), s["config"]["test_examples"], s["threshold"])
        grid_lrs = (s.get("lrs") or {}).get(m, [])
        L.append(f"| {m} | {next(iter(mine.values()))['d']} | "
                 + " | ".join(say("tune.cell", acc=fmt(mine[lr]["best_test_acc"]), steps=mine[lr]["steps_run"])
                              if lr in mine else "–" for lr in lrs)
                 + f" | {', '.join(fmt(v) for v in grid_lrs)} |")
        if top not in grid_lrs:
            notes.append(say("tune.note", mixer=m, top=fmt(top), grid=", ".join(map(fmt, grid_lrs)), runs=", ".join(
                say("tune.note.run", lr=fmt(lr), acc=fmt(mine[lr]["best_test_acc"]),
                    loss=fmt(mine[lr]["final_train_loss"])) for lr in sorted(set(grid_lrs) | {top}) if lr in mine)))
    L.append("")
    L.append(say("tune.rule", verdict=say("tune.rule.not_kept", notes="; ".join(notes)) if notes
                 else say("tune.rule.kept")))
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
        L.append(say("long", mixer=x["mixer"], N=x["N"], d=x["d"], lr=fmt(x["lr"]), seed=x["seed"], steps=x["steps"],
                     grid_steps=s["config"]["steps"], acc=fmt(x["best_test_acc"]), inv_D=fmt(1 / x["D"]),
                     first=say("long.first", th=s["threshold"], step=x["first_at"]) if x.get("first_at")
                     else say("long.never", th=s["threshold"]),
                     loss=fmt(x["final_train_loss"]), log_D=fmt(math.log(x["D"])),
                     grid=say("long.grid", acc=fmt(g[0]["best_test_acc"]), steps=g[0]["steps_run"]) if g else ""))
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
        per.append(say("small.N", N=N, runs=", ".join(_run_seed(x["best_test_acc"], x["seed"], x.get("first_at"))
                                                      for x in mine),
                       hit=sum(x["best_test_acc"] >= th for x in mine), n=len(mine), th=th))
    x0 = xs[0]
    return [say("small", d=x0["d"], d_min=dmin, lr=fmt(x0["lr"]), steps=x0["steps"], per="; ".join(per))]


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
            cells.append(say("more.cell", N=N, d=d, runs=", ".join(_run_seed(x["best_test_acc"], x["seed"]) for x in extra),
                             seeds=_ints((b["seeds"] if b else []) + [x["seed"] for x in extra]), median=fmt(med),
                             hit=n_hit, n=len(accs), th=th))
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
        verdict_text = say("more.verdict.unread")
    else:
        seq = [math.inf if v is None else v for v in vals]  # None: above every width read
        grows = seq[-1] > seq[0] and all(b >= a for a, b in zip(seq, seq[1:]))
        verdict_text = say("more.verdict.grows" if grows else "more.verdict.flat")
    top = max(x["d"] for x in xs)
    per = ", ".join(say("more.N", N=N, d=(say("more.N.beyond") if v is None else say("more.N.next", top=top, d=v))
                        if N in above else say("more.N.d", d=v) if isinstance(v, int) else say("more.N.unread"))
                    for N, v in zip(Ns, vals))
    factor = growth_factor(s, Ns, smallest) if all(isinstance(v, int) for v in vals) else ""
    x0 = xs[0]
    return [say("more", ds=_ints(sorted({x["d"] for x in xs})), seeds=_ints(sorted({x["seed"] for x in xs})),
                lr=fmt(x0["lr"]), steps=x0["steps"], cells="; ".join(cells), th=th, per=per, verdict=verdict_text,
                factor=f"; {factor}" if factor else "")]


def filter_lines(s: dict) -> list[str]:
    """The BaseConv runs with the reference configs' implicit long filter (``FILTER``) beside the grid's cell
    with the explicit one."""
    xs = sorted(s.get("filter") or [], key=lambda x: x["seed"])
    if not xs:
        return []
    x0, th = xs[0], s["threshold"]
    b = s["best"].get(f"baseconv/{x0['N']}/{x0['d']}")
    return [say("filter", N=x0["N"], d=x0["d"], lr=fmt(x0["lr"]), steps=x0["steps"],
                runs=", ".join(_run_seed(x["best_test_acc"], x["seed"]) for x in xs),
                hit=sum(x["best_test_acc"] >= th for x in xs), n=len(xs), th=th,
                grid=say("filter.grid", acc=fmt(b["acc"]), seeds=_ints(b["seeds"]),
                         accs=", ".join(fmt(a) for a in b["accs"]), lr=fmt(b["lr"])) if b else "")]


def cpu_reading(s: dict) -> list[str]:
    """What the grid shows about Claim 1, from the values, the runs and the criteria's verdicts."""
    th = s["threshold"]
    crit = {c["id"]: c for c in s["criteria"]}
    sm = crit["gap"]["smallest"]
    D = dict(s["sizes"])

    def runs_line(m):
        rs = [x for x in s["runs"] if x["mixer"] == m]
        hit = sorted((x for x in rs if x["best_test_acc"] >= th), key=lambda x: (x["N"], x["d"], x["seed"]))
        return say("reading.runs", hit=len(hit), n=len(rs), which=" (" + ", ".join(
            say("reading.run", N=x["N"], d=x["d"], seed=x["seed"], acc=fmt(x["best_test_acc"]),
                first=say("reading.run.from", step=x["first_at"]) if x.get("first_at") else "") for x in hit) + ")"
            if hit else "")
    att = "; ".join(say("reading.attention", N=N, where=say("reading.attention.from", d=v["attention"])
                        if v["attention"] else say("reading.attention.none")) for N, v in sm.items())
    bc_best = {N: max((b for b in s["best"].values() if b["mixer"] == "baseconv" and b["N"] == N),
                      key=lambda b: b["acc"], default=None) for N in D}
    L = [say("reading", th=th, attention=att, attention_runs=runs_line("attention"), baseconv_runs=runs_line("baseconv"),
             best=say("reading.best", cells="; ".join(
                 say("reading.best.cell", N=N, acc=fmt(b["acc"]), d=b["d"], inv_D=fmt(1 / D[N]))
                 for N, b in bc_best.items() if b))
             if not any(v["baseconv"] for v in sm.values()) else "")]
    att_ok, bc_any = crit["attention-small-d"]["met"], any(v["baseconv"] for v in sm.values())
    steps = say("reading.steps", steps=s["config"]["steps"], batch=s["config"]["batch"])
    if not bc_any and not att_ok:
        L.append(say("reading.neither", steps=steps))
    elif not bc_any:
        L.append(say("reading.no_baseconv", steps=steps, th=th))
    else:
        met = at_least_N(s)["met"]
        L.append(say("reading.gap.met" if crit["gap"]["met"] else "reading.gap.not_met")
                 + ("" if met is None else say("reading.at_least_N.met" if met else "reading.at_least_N.not_met")))
        L.append(widths_reading(s))
        L.append(bc_seeds(s))
        L.append(growth_text(s))
        L.append(equal_width_text(s))
    return [" ".join(x for x in L if x)]


def widths_reading(s: dict) -> str:
    """The smallest-width criterion (both mixers alike, every seed recorded) in the reading's words."""
    cr = next((c for c in s["criteria"] if c["id"] == "widths-vs-N"), None)
    if cr is None:
        return ""

    def per(m):
        return ", ".join(crossing_text(cr, m, N) for N in cr["bounds"][m])
    undecided = bool({"undecided", "short"} & {*cr["per_mixer"].values(),
                                              *(v for m in MIXERS for v in (cr.get("steps") or {}).get(m, {}).values())})
    steps = "; ".join(say("crit.widths.steps.mixer", mixer=m, steps=", ".join(
        say("crit.widths.step", pair=k.replace("->", " to "), said=WIDTHS_SAID[v]) for k, v in cr["steps"][m].items()))
        for m in MIXERS if (cr.get("steps") or {}).get(m))
    return say("reading.widths", th=s["threshold"], want=cr.get("want") or WANT_SEEDS, steps=steps,
               att_said=WIDTHS_SAID[cr["per_mixer"]["attention"]],
               att=per("attention"), bc_said=WIDTHS_SAID[cr["per_mixer"]["baseconv"]], bc=per("baseconv"),
               verdict=(say("reading.widths.undecided") if undecided else say("reading.widths.none"))
               if cr["met"] is None else say("reading.widths.met" if cr["met"] else "reading.widths.not_met"))


def growth_text(s: dict) -> str:
    """BaseConv's smallest d reaching the threshold per N, read against the growth criterion (met or not; nothing
    where it is not read), with the resolution the grid's widths allow."""
    cr = next((c for c in s["criteria"] if c["id"] == "grows-with-N"), None)
    if cr is None or cr["met"] is None:
        return ""
    th, top = s["threshold"], max(s["dims"].get("baseconv") or [0])
    Ns = sorted({b["N"] for b in s["best"].values()})
    per = ", ".join(say("growth.N", N=N, d=say("growth.N.d", d=d) if (d := smallest_d(s, "baseconv", N))
                        else say("growth.N.above", top=top)) for N in Ns)
    bc = sorted(s["dims"].get("baseconv") or [])
    ratios = sorted({b / a for a, b in zip(bc, bc[1:])})
    step = (say("growth.step.two") if ratios == [2.0] else
            say("growth.step.factors", factors=", ".join(fmt(r) for r in ratios))) if ratios else say("growth.step.one")
    if cr["met"]:
        return say("growth.met", th=th, per=per, step=step,
                   more="".join(f"; {x}" for x in (growth_factor(s, Ns), split_at_smallest(s, Ns)) if x))
    return say("growth.not_met", th=th, per=per, step=step)


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
        where = say("factor.less" if hi <= k else "factor.more" if lo >= k else "factor.same")
        parts.append(say("factor", N0=n0, N1=n1, k=fmt(k), lo=fmt(lo),
                         hi=say("factor.inf") if math.isinf(hi) else fmt(hi),
                         lo0=lo0, hi0=hi0, lo1=lo1, hi1=hi1, where=where))
    ratio = [span[N][1] / N for N in Ns]
    return (say("factor.ratios", factors="; ".join(parts), lo=fmt(min(ratio)), hi=fmt(max(ratio))) if len(set(ratio)) > 1
            else say("factor.ratio", factors="; ".join(parts), ratio=fmt(ratio[0])))


def split_at_smallest(s: dict, Ns: list[int]) -> str:
    """The N whose smallest BaseConv width reaching the threshold is a cell where the seeds split: there the
    growth rests on the median of the seeds' draw."""
    split = []
    for N in Ns:
        d = smallest_d(s, "baseconv", N)
        b = s["best"].get(f"baseconv/{N}/{d}") if d else None
        if b and 0 < b["reached"] < len(b["accs"]):
            split.append(say("split.N", N=N, d=d, hit=b["reached"], n=len(b["accs"])))
    return say("split", Ns=" and ".join(split)) if split else ""


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
        text = say("equal.d", d=d, accs=" -> ".join(fmt(a) for a in accs))
        if stop is not None and all(a >= stop for a in accs):
            done.append(str(d))
        elif all(b < a for a, b in zip(accs, accs[1:])):
            lower.append(text)
        else:
            other.append(text)
    if not (lower or other):
        return ""
    return say("equal", Ns=" -> ".join(say("gone.N", N=N) for N in Ns),
               falls=say("equal.falls", ds=", ".join(lower)) if lower else say("equal.falls.none"),
               other=say("equal.other", ds=", ".join(other)) if other else "",
               stopped=say("equal.stopped", ds=", ".join(done), stop=stop) if done else "")


def bc_seeds(s: dict) -> str:
    """Per N and BaseConv width, how many seeds reached the threshold, and the cells where the seeds split (the
    median decides those cells, and with it the smallest d the criteria read)."""
    th = s["threshold"]
    bs = sorted((b for b in s["best"].values() if b["mixer"] == "baseconv"), key=lambda b: (b["N"], b["d"]))
    per = "; ".join(say("seeds.N", N=N, cells=", ".join(say("seeds.cell", d=b["d"], hit=b["reached"], n=len(b["accs"]))
                                                        for b in bs if b["N"] == N))
                    for N in sorted({b["N"] for b in bs}))
    split = [b for b in bs if 0 < b["reached"] < len(b["accs"])]
    return say("seeds", th=th, per=per, split=say("seeds.split", cells="; ".join(
        say("seeds.split.cell", N=b["N"], d=b["d"], median=fmt(b["acc"]),
            runs=", ".join(_run_seed(a, sd) for sd, a in zip(b["seeds"], b["accs"]))) for b in split)) if split else "")


def gpu_reading(s: dict) -> list[str]:
    """What the GPU run shows per N: the smallest d at which each mixer reaches the threshold, the steps its
    cells ran, and whether BaseConv's cells below the threshold trained long enough to be read."""
    th = s["threshold"]
    need = learn_steps(s, "baseconv")
    parts = []
    for N, _ in s["sizes"]:
        a, b = smallest_d(s, "attention", N), smallest_d(s, "baseconv", N)
        bs = sorted((x for x in s["best"].values() if x["mixer"] == "baseconv" and x["N"] == N), key=lambda x: x["d"])
        text = say("gpu.N.attention", N=N, d=a) if a else say("gpu.N.attention.none", N=N)
        if b:
            below = [x for x in bs if x["d"] < b]
            text += say("gpu.N.baseconv", d=b, ratio=fmt(b / N), below=say("gpu.N.below", cells=", ".join(
                say("gpu.N.below.cell", d=x["d"], acc=fmt(x["acc"]), steps=x["ran"]) for x in below)) if below else "")
        elif bs:
            ran = [x["ran"] for x in bs]
            text += say("gpu.N.baseconv.none", acc=fmt(max(x["acc"] for x in bs)), low=min(ran), high=max(ran),
                        unread=say("gpu.N.unread", need=need, th=th) if need and max(ran) < need else "")
        parts.append(text)
    gap = next(c for c in s["criteria"] if c["id"] == "gap")
    read = [N for N, v in gap["per_N"].items() if v is not None]
    tail = ""
    if gap["met"] and read:
        sm = gap["smallest"]
        at_least = [N for N in read if sm[N]["baseconv"] and sm[N]["baseconv"] >= int(N)]
        tail = say("gpu.tail", Ns=", ".join(read),
                   at_least=say("gpu.tail.at_least_N", Ns=", ".join(at_least)) if at_least else "")
    return [say("gpu.reading", parts="; ".join(parts), tail=tail)]


def redefined_line(s: dict) -> str:
    """Where the summary (and so its criteria) was made again from the records after the run finished: says so
    (read from the run record: when the cells finished, when the summary was rewritten)."""
    run = s.get("run") or {}
    again = run.get("resummarised") or {}
    if not again.get("finished") or not run.get("finished") or again["finished"][:10] <= run["finished"][:10]:
        return ""
    return say("gpu.redefined", ran=run["finished"][:10], when=again["finished"][:10])


def gpu_markdown(s: dict, figure: str) -> str:
    """The GPU section (``docs/experiments/gpu/seed003-mqar``, run by ``numerics/experiments/gpu.sh``): what
    ran, the steps each cell ran, the criteria on what ran."""
    c = s["config"]
    run = s["run"]
    th = s["threshold"]
    L = [say("gpu.setup", vocab=c["vocab"], power_a=c["power_a"], sizes=_sizes(s),
             dims=_ints(sorted({b["d"] for b in s["best"].values()})), train_examples=c["train_examples"],
             test_examples=c["test_examples"], batch=c["batch"],
             lrs=", ".join(fmt(x) for x in sorted({x["lr"] for x in s["runs"]})), seeds=_ints(s["seeds"]),
             steps=c["steps"], stop_at=c["stop_at"], long_conv=LONG_CONV_TEXT[c.get("long_conv") or "implicit"],
             budget=fmt(run.get("budget_s")), workers=run["workers"])]
    first = sorted((x for x in s["runs"] if x.get("first_at") is not None), key=lambda x: (x["mixer"], x["N"], x["d"]))
    L = blocks(L, say("gpu.table"), results_table(s, steps=True),
               first and say("gpu.first", th=th, runs="; ".join(
                   say("gpu.first.run", mixer=x["mixer"], N=x["N"], d=x["d"], step=x["first_at"]) for x in first)),
               say("gpu.figure", card=s["device"].get("name") if s.get("device") else say("gpu.card"), figure=figure),
               gpu_reading(s), say("gpu.criteria", head=say("criteria.head", verb=say("criteria.verb.gpu"))),
               criteria_lines(s), redefined_line(s), plateau_lines(s))
    return "\n".join(L + [gpu_cost_line(s)])


__all__ = ["plot", "markdown", "why_line", "gpu_markdown", "results_table", "criteria_lines", "plateau_lines", "differences",
           "tuning_lines", "tuned_lr", "long_lines", "more_seeds_lines", "filter_lines", "small_lines", "bc_seeds", "growth_text", "growth_factor", "split_at_smallest", "equal_width_text", "cpu_reading", "gpu_reading", "blocks"]
