"""Seed 004 Table 1's report: its table, figure and section of docs/experiments.md, read from the
summary of :mod:`.seed004_table1` (the grid, cells, criteria and paper values live there).  The prose is
data: the named templates of :mod:`.seed004_table1_text`, filled here with the computed numbers."""
from __future__ import annotations

import math

import numpy as np

from .common import fmt, timing_line, verdict
from .seed004_table1 import (COLUMNS, D, LABEL, N, PAPER, PAPER_TRAIN_SEQUENCES, RETRIES, RETRY_LR_FACTOR,
                             STUDY_BASE, VARIANTS, paper_model)
from .seed004_table1_text import say


def table(s: dict) -> list[dict]:
    rows = []
    for col, b in s["baselines"].items():
        for key in ("constrr", "adarr", "tunedrr"):
            p = PAPER[key][COLUMNS.index(col)]
            rows.append({"method": LABEL[key], "layers": "", "column": col, "ours": b[key]["adjusted"],
                         "se": b[key]["se"], "paper": p, "ratio": b[key]["adjusted"] / p if p else None})
    for v, per_l in s["models"].items():
        for L, per_c in per_l.items():
            for col, m in per_c.items():
                p = paper_model(v, L, col)
                rows.append({"method": LABEL[v], "layers": int(L), "column": col, "ours": m["adjusted"], "se": m["se"],
                             "paper": p, "ratio": m["adjusted"] / p, "steps": m["steps"], "cpu_s": m["cpu_s"]})
    return rows


def _segments(idx: list[int]) -> list[list[int]]:
    """Column indices split where a line must not be drawn: between columns that are not neighbours (a
    column not run lies between) and between the uniform columns (0..7) and the categorical sets."""
    n_uniform = sum(1 for c in COLUMNS if not c.startswith("{"))
    out: list[list[int]] = []
    for i in sorted(idx):
        if out and i == out[-1][-1] + 1 and (i < n_uniform) == (out[-1][-1] < n_uniform):
            out[-1].append(i)
        else:
            out.append([i])
    return out


def _plot_columns(ax, idx: list[int], ys: list[float], fmt_: str, *, label: str, **kw) -> None:
    """``ys`` at the column indices ``idx``, a line only within :func:`_segments` (a lone column: a marker)."""
    y = dict(zip(idx, ys))
    for j, seg in enumerate(_segments(idx)):
        ax.plot(seg, [y[i] for i in seg], fmt_, label=label if j == 0 else None, **kw)


#: the columns whose depth series get a panel of the figure
DEPTH_PANELS = ("5", "3")


def plot(s: dict):
    """Four panels: the ridge baselines, the 1-layer models and the depth at sigma_max = 5 and 3, ours (o, solid)
    beside the paper (x, dashed).  Lines join only neighbouring columns that were run, and never the uniform
    columns to the categorical sets: a column not run here shows the paper's marker alone."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2 + len(DEPTH_PANELS), figsize=(18, 4.6))
    x = np.arange(len(COLUMNS))
    colors = {"constrr": "C0", "adarr": "C1", "tunedrr": "C2", "gdpp": "C3", "diag": "C4", "full": "C5"}
    ax = axes[0]
    for key in ("constrr", "adarr", "tunedrr"):
        got = {i: s["baselines"][c][key]["adjusted"] for i, c in enumerate(COLUMNS)
               if key in s["baselines"].get(c, {})}
        _plot_columns(ax, list(got), list(got.values()), "o-", color=colors[key], label=f"{LABEL[key]} (ours)")
        _plot_columns(ax, list(x), list(PAPER[key]), "x--", color=colors[key], alpha=0.7, label=f"{LABEL[key]} (paper)")
    ax.set_title("ridge baselines", fontsize=10)
    ax = axes[1]
    for v in VARIANTS:
        got = s["models"].get(v, {}).get("1", {})
        xs = [i for i, c in enumerate(COLUMNS) if c in got]
        _plot_columns(ax, xs, [got[COLUMNS[i]]["adjusted"] for i in xs], "o-", color=colors[v], label=f"{LABEL[v]} (ours)")
        _plot_columns(ax, list(x), list(PAPER[v][1]), "x--", color=colors[v], alpha=0.6, label=f"{LABEL[v]} (paper)")
    ax.set_title("1-layer linear transformers (ours: the columns run)", fontsize=10)
    layers = np.arange(1, 8)
    for ax, column in zip(axes[2:], DEPTH_PANELS):
        for v, ser in depth_series(s, column).items():
            if ser:
                ax.plot([L_ for L_, _, _ in ser], [o for _, o, _ in ser], "o-", color=colors[v], label=f"{LABEL[v]} (ours)")
            ax.plot(layers, [paper_model(v, L_, column) for L_ in layers], "x--", color=colors[v], alpha=0.6,
                    label=f"{LABEL[v]} (paper)")
        i = COLUMNS.index(column)
        b = s["baselines"].get(column, {}).get("constrr", {}).get("adjusted")
        if b is not None:
            ax.axhline(b, ls=":", color=colors["constrr"], label="ConstRR (ours)")
        ax.axhline(PAPER["constrr"][i], ls=":", color="gray", label="ConstRR (paper)")
        ax.set_title(f"depth at sigma_max = {column} (ours: the depths run)", fontsize=10)
        ax.set_xticks(layers)
        ax.set_xlabel("layers L")
    for ax in axes[:2]:
        ax.set_xticks(x, COLUMNS, fontsize=8)
        ax.set_xlabel("sigma_max (uniform) / categorical set")
    for ax in axes:
        ax.set_yscale("symlog", linthresh=1e-3)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6.5, ncol=2)
    axes[0].set_ylabel("adjusted loss (1/2 MSE minus oracle)")
    fig.suptitle("Seed 004 Table 1: ours (o, solid) vs the paper (x, dashed)" + (" [--quick]" if s["quick"] else ""),
                 fontsize=10)
    fig.tight_layout()
    return fig


# ====================================================================== report

def depth_series(s: dict, column: str = "5") -> dict:
    """Per variant, the adjusted loss at ``column`` for every trained depth: ``{variant: [(L, ours, paper)]}``."""
    out = {}
    for v in VARIANTS:
        got = s["models"].get(v, {})
        out[v] = [(int(L_), got[L_][column]["adjusted"], paper_model(v, L_, column))
                  for L_ in sorted(got, key=int) if column in got[L_]]
    return out


def _depth_paragraph(s: dict, column: str = "5") -> list[str]:
    """What depth does at ``column`` (the paper: GD++ stops at ConstRR's loss from L = 3 on, Diag and Full
    keep improving): our numbers beside the paper's, and whether ours show the same."""
    ser = depth_series(s, column)
    if not all(sum(L_ >= 3 for L_, _, _ in x) >= 2 for x in ser.values()):
        return []  # needs at least two depths past L = 3 for every variant
    b = s["baselines"].get(column, {}).get("constrr", {}).get("adjusted")
    i = COLUMNS.index(column)
    L = [say("depth", column=column, constrr=fmt(b), paper_constrr=fmt(PAPER["constrr"][i])), ""]
    depths = sorted({L_ for x in ser.values() for L_, _, _ in x})
    L.append("| model | " + " | ".join(f"L = {L_}" for L_ in depths) + " |")
    L.append("|---|" + "---|" * len(depths))
    for v in VARIANTS:
        got = {L_: o for L_, o, _ in ser[v]}
        L.append(f"| {LABEL[v]} | " + " | ".join(f"{fmt(got.get(L_))} / {fmt(paper_model(v, L_, column))}"
                                                for L_ in depths) + " |")
    L.append("")
    deep = {v: [(L_, o) for L_, o, _ in ser[v] if L_ >= 3] for v in VARIANTS}
    paper_g = sorted({round(paper_model("gdpp", L_, column), 6) for L_ in range(3, 8)})
    notes = []
    g = deep["gdpp"]
    if g:
        lo, hi = min(o for _, o in g), max(o for _, o in g)
        flat = hi <= 1.1 * lo
        notes.append(say("depth.gdpp", first=g[0][0], last=g[-1][0],
                         level=say("depth.gdpp.at", value=fmt(lo)) if fmt(lo) == fmt(hi)
                         else say("depth.gdpp.between", low=fmt(lo), high=fmt(hi)),
                         spread=fmt(100 * (hi / lo - 1), 2), constrr=fmt(b),
                         flat=say("depth.gdpp.flat" if flat else "depth.gdpp.not_flat"),
                         paper=" to ".join(fmt(x) for x in paper_g)))
    for v in ("diag", "full"):
        d = deep[v]
        if len(d) >= 2:
            best = min(d, key=lambda x: x[1])
            falls = all(x[1] > y[1] for x, y in zip(d, d[1:]))
            retried = [L_ for L_, _ in d if s["models"][v][str(L_)][column].get("diverged")]
            notes.append(say("depth.model", model=LABEL[v],
                             falls=say("depth.model.falls" if falls else "depth.model.not_falls"),
                             best=fmt(best[1]), layers=best[0], ratio=fmt(best[1] / g[-1][1]), gdpp_layers=g[-1][0],
                             paper=fmt(paper_model(v, 7, column)),
                             retried=say("depth.model.retried", layers=", ".join(map(str, retried))) if retried else ""))
    steps = sorted({s["models"][v][str(L_)][column]["steps"] for v in VARIANTS for L_, _ in deep[v]})
    L.append(say("depth.steps", notes="; ".join(notes), steps=" or ".join(map(str, steps))))
    L.append("")
    return L


def _pct(x: float) -> str:
    """A relative difference as a signed percentage."""
    return f"{'+' if x >= 0 else ''}{fmt(100 * x, 2)}%"


def _column_paragraph(s: dict, column: str = "3", depths=(1, 2, 3)) -> list[str]:
    """The models at ``column`` for ``depths`` (ours / paper and the ratio), and how their order compares
    with the paper's at the deepest of them; [] until every variant has every depth there."""
    got = {v: {L_: s["models"].get(v, {}).get(str(L_), {}).get(column) for L_ in depths} for v in VARIANTS}
    if not all(m for per in got.values() for m in per.values()):
        return []
    b = s["baselines"].get(column, {})
    i = COLUMNS.index(column)
    L = [say("column", column=column, constrr=fmt(b.get("constrr", {}).get("adjusted")),
             paper_constrr=fmt(PAPER["constrr"][i]), tunedrr=fmt(b.get("tunedrr", {}).get("adjusted")),
             paper_tunedrr=fmt(PAPER["tunedrr"][i])), ""]
    L.append("| model | " + " | ".join(f"L = {L_}" for L_ in depths) + " |")
    L.append("|---|" + "---|" * len(depths))
    for v in VARIANTS:
        L.append(f"| {LABEL[v]} | " + " | ".join(
            f"{fmt(got[v][L_]['adjusted'])} / {fmt(paper_model(v, L_, column))} "
            f"({fmt(got[v][L_]['adjusted'] / paper_model(v, L_, column))})" for L_ in depths) + " |")
    L.append("")
    deep = depths[-1]
    ours = sorted(VARIANTS, key=lambda v: got[v][deep]["adjusted"])
    paper = sorted(VARIANTS, key=lambda v: paper_model(v, deep, column))
    worst = max(VARIANTS, key=lambda v: got[v][deep]["adjusted"] / paper_model(v, deep, column))
    m = got[worst][deep]
    pw = paper_model(worst, deep, column)
    # the same cell's training evaluated on another number of sequences (the study's evaluation runs): both in the
    # headline, since the comparison with the paper moves with the evaluation set's size
    b = STUDY_BASE
    same_cell = (worst, deep, column) == (b["variant"], b["layers"], b["column"])
    evals = [x for x in s.get("study") or [] if same_cell and x.get("eval") != m.get("eval")
             and x["steps"] == m.get("steps", x["steps"]) and not x["study"].startswith("seed")]
    L.append(say("column.rank", layers=deep, ours=" < ".join(LABEL[v] for v in ours),
                 paper=" < ".join(LABEL[v] for v in paper), same=say("column.rank.same") if ours == paper else "",
                 model=LABEL[worst], above=_pct(m["adjusted"] / pw - 1), adjusted=fmt(m["adjusted"]),
                 se=fmt(m["se"], 2), eval=fmt(m.get("eval")),
                 more="".join(say("column.rank.eval", eval=fmt(x["eval"]), adjusted=fmt(x["adjusted"]),
                                  se=fmt(x["se"], 2), above=_pct(x["adjusted"] / pw - 1)) for x in evals)))
    L.append("")
    return L


def _study_paragraph(s: dict) -> list[str]:
    """Why Full is the weakest model: the study's runs (one change at a time) beside the grid's run, and
    what the numbers say (computed); [] without them."""
    st = s.get("study") or []
    b = STUDY_BASE
    ref = s["models"].get(b["variant"], {}).get(str(b["layers"]), {}).get(b["column"])
    if not st or not ref:
        return []
    p = paper_model(b["variant"], b["layers"], b["column"])
    dg = s["models"].get("diag", {}).get(str(b["layers"]), {}).get(b["column"])
    L = [say("study", model=LABEL[b["variant"]], layers=b["layers"], column=b["column"], adjusted=fmt(ref["adjusted"]),
             se=fmt(ref["se"], 2), against=_pct(ref["adjusted"] / p - 1), paper=fmt(p),
             diag=say("study.diag", adjusted=fmt(dg["adjusted"]),
                      against=_pct(dg["adjusted"] / paper_model("diag", b["layers"], b["column"]) - 1)) if dg else "",
             eval=fmt(ref.get("eval"))), ""]
    L.append("| change | steps | batch | lr | adjusted loss | vs the grid's run | vs the paper |")
    L.append("|---|---|---|---|---|---|---|")
    rows = [(say("study.grid_run"), ref)] + [(x["study"], x) for x in st]
    for lab, x in rows:
        L.append(f"| {lab} | {x['steps']} | {x['recipe']['batch']} | {fmt(x['recipe']['lr'])} | {fmt(x['adjusted'])} "
                 f"+- {fmt(x['se'], 2)} | {_pct(x['adjusted'] / ref['adjusted'] - 1)} | {_pct(x['adjusted'] / p - 1)} |")
    L.append("")
    notes, others, beyond = _study_notes(ref, st, p)
    if notes:
        L.append(notes[0][0].upper() + "; ".join(notes)[1:] + ".")
        L.append("")
    L.append(_study_closing(ref, dg, p, b, others, beyond))
    L.append("")
    return L


def _study_notes(ref: dict, st: list[dict], p: float) -> tuple[list[str], list[dict], list[str]]:
    """What the study's runs say against the grid's run ``ref`` (paper: ``p``): the notes (the seeds'
    spread, the largest training gain, more training, a larger evaluation set), the training changes
    tried and those that gain more than the seeds' spread."""
    notes = []
    seeds = [ref] + [x for x in st if x["study"].startswith("seed")]
    if len(seeds) > 1:
        lo, hi = min(x["adjusted"] for x in seeds), max(x["adjusted"] for x in seeds)
        notes.append(say("study.seeds", spread=fmt(100 * (hi / lo - 1), 2), low=fmt(lo), high=fmt(hi), n=len(seeds),
                         against=_pct(lo / p - 1)))
    else:
        hi = lo = ref["adjusted"]
    spread = hi / lo - 1
    evals = [x for x in st if x.get("eval") != ref.get("eval")]
    others = [x for x in st if not x["study"].startswith("seed") and x not in evals]
    beyond: list[str] = []
    if others:
        best = min(others, key=lambda x: x["adjusted"])
        gain = 1 - best["adjusted"] / ref["adjusted"]
        beyond = [x["study"] for x in others if 1 - x["adjusted"] / ref["adjusted"] > spread]
        notes.append(say("study.gain", gain=fmt(100 * gain, 2), study=best["study"], against=_pct(best["adjusted"] / p - 1),
                         beyond=say("study.gain.beyond", studies=", ".join(beyond)) if beyond
                         else say("study.gain.none")))
        budget = [x for x in others if x["steps"] * x["recipe"]["batch"] > ref["steps"] * ref["recipe"]["batch"]]
        if budget:
            more = max(budget, key=lambda x: x["steps"] * x["recipe"]["batch"])
            grid_sequences = ref["steps"] * ref["recipe"]["batch"]
            notes.append(say("study.budget", ratio=fmt(more["steps"] * more["recipe"]["batch"] / grid_sequences),
                             study=more["study"], change=_pct(more["adjusted"] / ref["adjusted"] - 1),
                             paper_ratio=fmt(PAPER_TRAIN_SEQUENCES / grid_sequences)))
    for x in evals:
        fifths = x.get("eval_fifths") or []
        notes.append(say("study.eval", eval=fmt(x["eval"]), grid_eval=fmt(ref.get("eval")), adjusted=fmt(x["adjusted"]),
                         change=_pct(x["adjusted"] / ref["adjusted"] - 1), low=fmt(min(fifths)), high=fmt(max(fifths)),
                         change_low=_pct(min(fifths) / x["adjusted"] - 1),
                         change_high=_pct(max(fifths) / x["adjusted"] - 1),
                         tail=say("study.eval.tail", share=fmt(100 * x["tail_share"], 2))
                         if x.get("tail_share") is not None else ""))
    return notes, others, beyond


def _study_closing(ref: dict, dg: dict | None, p: float, b: dict, others: list[dict], beyond: list[str]) -> str:
    """The study's closing sentences: Full against Diag (ours and the paper's), what the training changes
    tried show, and the parametrisation the paper may have used instead."""
    full_params = 2 * (D + 1) ** 2
    pd = paper_model("diag", b["layers"], b["column"])
    closing = say("study.closing", params=full_params, paper=fmt(p), paper_diag=fmt(pd),
                  ours=say("study.closing.above", full=fmt(ref["adjusted"]), diag=fmt(dg["adjusted"]))
                  if dg and ref["adjusted"] > dg["adjusted"] else
                  (say("study.closing.below", full=fmt(ref["adjusted"]), diag=fmt(dg["adjusted"])) if dg else ""))
    tried = [x["study"] for x in others]
    if others:
        closing += say("study.tried", tried=", ".join(tried), reading=say(
            ("study.tried.beyond_one" if len(beyond) == 1 else "study.tried.beyond") if beyond else "study.tried.none",
            studies=", ".join(beyond)))
    return closing + say("study.parametrisation")


def _adarr_paragraph(s: dict, column: str = "5") -> list[str]:
    """AdaRR at ``column``: the pooled value, the single draws, the paper's value in standard errors, the
    heavy tail and what its sequences are; [] without a multi-draw result there."""
    a = s["baselines"].get(column, {}).get("adarr")
    if not a or len(a.get("per_draw") or []) < 2:
        return []
    p = PAPER["adarr"][COLUMNS.index(column)]
    z = (a["adjusted"] - p) / math.sqrt(a["se"] ** 2 + a["se_one"] ** 2)
    d, n = a["per_draw"], s["baselines"][column].get("eval_per_draw")
    tail = a.get("tail")
    why = ""
    if tail:
        why = say("adarr.why", dof=N - D, sigma=fmt(tail["sigma"][0]), sigma_all=fmt(tail["sigma"][1]),
                  ratio=fmt(tail["s2hat_ratio"][0]), ratio_all=fmt(tail["s2hat_ratio"][1]),
                  eig=fmt(tail["smallest_eig"][0]), eig_all=fmt(tail["smallest_eig"][1]))
    return [say("adarr", column=column, draws=len(d), n=fmt(n), adjusted=fmt(a["adjusted"]), se=fmt(a["se"], 2),
                against=_pct(a["adjusted"] / p - 1), paper=fmt(p), z=fmt(abs(z), 2), se_one=fmt(a["se_one"], 2),
                per_draw=", ".join(fmt(x) for x in d), against_low=_pct(min(d) / p - 1),
                against_high=_pct(max(d) / p - 1), share=fmt(100 * a["tail_share"], 2), why=why,
                reading=say("adarr.within" if abs(z) <= 2 else "adarr.beyond")), ""]


def _retry_sentence(s: dict) -> str:
    """The cells that diverged and were retrained at a smaller learning rate (from the results)."""
    hits = [(v, L_, c, m) for v, per in s["models"].items() for L_, pc in per.items() for c, m in pc.items()
            if m.get("diverged")]
    rule = say("retry", factor=fmt(RETRY_LR_FACTOR), retries=RETRIES)
    if not hits:
        return say("retry.none", rule=rule)
    return say("retry.hits", rule=rule, largest=fmt(_largest_train_loss(s)), cells="; ".join(
        say("retry.cell", model=LABEL[v], layers=L_, column=c, lr=fmt(m["recipe"]["lr"]), tries=", ".join(
            say("retry.try", lr=fmt(f["lr"]), skipped=f["skipped"], steps=m["steps"]) for f in m["diverged"]))
        for v, L_, c, m in sorted(hits, key=lambda x: (int(x[1]), x[0]))))


def _largest_train_loss(s: dict) -> float | None:
    vals = [h["train_half_mse"] for per in s["models"].values() for pc in per.values() for m in pc.values()
            for h in m.get("curve", []) if h.get("train_half_mse") is not None and math.isfinite(h["train_half_mse"])]
    return max(vals) if vals else None


def _miss_noise_sentence(misses: list[dict]) -> str:
    """The baseline misses weighed against the sampling noise (``z_diff`` of each), '' without them."""
    zs = [abs(m["z_diff"]) for m in misses if m.get("z_diff") is not None]
    if not zs or len(zs) != len(misses):
        return ""
    one = [0.1 * m["paper"] / m.get("se_paper", m["se"]) for m in misses]
    pooled = any(m.get("se_paper", m["se"]) != m["se"] for m in misses)
    within = max(zs) <= 2
    return say("noise", bound=say("noise.at_most" if within else "noise.up_to"), z=fmt(max(zs), 2),
               how=say("noise.pooled" if pooled else "noise.one_draw"),
               reading=say("noise.within", one=fmt(min(one), 2) if fmt(min(one), 2) == fmt(max(one), 2)
                           else say("range", low=fmt(min(one), 2), high=fmt(max(one), 2)))
               if within else say("noise.beyond"))


def _table_lines(s: dict) -> list[str]:
    """The table of ours / paper, baselines then models by depth."""
    L = []
    L.append("| method | L | " + " | ".join(COLUMNS) + " |")
    L.append("|---|---|" + "---|" * len(COLUMNS))
    for key in ("constrr", "adarr", "tunedrr"):
        cells = []
        for i, c in enumerate(COLUMNS):
            b = s["baselines"].get(c)
            cells.append(f"{fmt(b[key]['adjusted'])} / {fmt(PAPER[key][i])}" if b else f"– / {fmt(PAPER[key][i])}")
        L.append(f"| {LABEL[key]} | – | " + " | ".join(cells) + " |")
    for Ls in sorted({L_ for v in s["models"].values() for L_ in v}, key=int):
        for v in VARIANTS:
            got = s["models"].get(v, {}).get(Ls, {})
            cells = [f"{fmt(got[c]['adjusted'])} / {fmt(PAPER[v][int(Ls)][i])}" if c in got
                     else f"– / {fmt(PAPER[v][int(Ls)][i])}" for i, c in enumerate(COLUMNS)]
            L.append(f"| {LABEL[v]} | {Ls} | " + " | ".join(cells) + " |")
    return L


def _criteria_lines(s: dict) -> list[str]:
    """The pass criteria, each with what its verdict rests on."""
    L = []
    for c in s["criteria"]:
        L.append(say("criterion", text=c["text"], verdict=verdict(c["met"])))
        if c["id"] == "baselines-10pct":
            n_checks = 3 * c["columns"]
            L.append(say("baselines", within=n_checks - len(c["misses"]), n=n_checks,
                         misses=say("baselines.misses", misses="; ".join(
                             say("baselines.miss", baseline=LABEL[m["baseline"]], column=m["column"], ours=fmt(m["ours"]),
                                 se=fmt(m["se"], 2), paper=fmt(m["paper"]),
                                 change=fmt(100 * (m["ours"] / m["paper"] - 1), 2)) for m in c["misses"]))
                         if c["misses"] else "", verdict=verdict(c["met_allowing_rounding"])))
            if any(m["baseline"] == "tunedrr" for m in c["misses"]):
                L.append(say("baselines.tunedrr"))
            noise = _miss_noise_sentence(c["misses"])
            if noise:
                L.append("  " + noise)
            for m in c["misses"]:
                if m["baseline"] == "constrr" and m["column"] == "5":
                    i5 = COLUMNS.index("5")
                    L.append(say("baselines.constrr5", constrr=fmt(PAPER["constrr"][i5]), gdpp=fmt(PAPER["gdpp"][7][i5]),
                                 ours=fmt(m["ours"])))
        elif c["id"] == "one-layer-equal" and c["columns"]:
            L.append(say("one_layer"))
            worst = max(c["columns"], key=lambda x: x["spread"])
            L.append(say("one_layer.spread", n=len(c["columns"]), spread=fmt(100 * worst["spread"], 2),
                         column=worst["column"], gdpp=fmt(worst["gdpp"]), diag=fmt(worst["diag"]),
                         full=fmt(worst["full"])))
        elif c["id"] == "l3-s5-third" and c["ratios"]:
            L.append(say("third", ratios=", ".join(say("third.ratio", model=LABEL[v], ratio=fmt(r),
                                                       paper=fmt(c["paper_ratios"][v])) for v, r in c["ratios"].items())))
    return L


def _omega_lines(s: dict) -> list[str]:
    """What Diag and Full learn beyond GD++ (L = 3, sigma_max = 5), where all three ran."""
    L = []
    m3 = {v: s["models"].get(v, {}).get("3", {}).get("5") for v in VARIANTS}
    if all(m3.values()):
        L.append(say("omegas"))
        L.append("")
        L.append("| model | layer | omega_xx | omega_yx | omega_xy | omega_yy | off-tied-diagonal norm P / Q |")
        L.append("|---|---|---|---|---|---|---|")
        for v in VARIANTS:
            for i, o in enumerate(m3[v]["omegas"]):
                off = f"{fmt(o['off_tied_P'])} / {fmt(o['off_tied_Q'])}" if "off_tied_P" in o else "–"
                L.append(f"| {LABEL[v]} | {i + 1} | {fmt(o['xx'])} | {fmt(o['yx'])} | {fmt(o['xy'])} | {fmt(o['yy'])} | {off} |")
        L.append("")
        L.append(say("omegas.reading"))
        L.append("")
    return L


def _closing_lines(s: dict) -> list[str]:
    """Configuration, cost and what is not reproduced here."""
    L = []
    cfg = s["config"]
    rc = cfg["recipe"]
    if cfg["grid"] != "quick":
        grid = "; ".join(say("config.layers", layers=L_, columns=", ".join(g["columns"]), steps=g["steps"])
                         for L_, g in cfg["grid"]["models"].items())
        L.append(say("config", grid=grid, batch=rc["batch"], lr=rc["lr"], warmup_pct=int(100 * rc["warmup"]),
                     clip=rc["clip"], eta=rc["eta"], gamma=rc["gamma"],
                     std=", ".join(say("config.std", model=LABEL[k], std=v) for k, v in cfg["init_std"].items()),
                     retry=_retry_sentence(s)))
    L.append("")
    reused = (s.get("run") or {}).get("reused")
    L.append(say("cost", timing=timing_line(s), baselines=fmt(s["cpu_by_kind"]["baselines"]),
                 models=fmt(s["cpu_by_kind"]["models"]),
                 reused=say("cost.reused", cells=reused["cells"], finished=", ".join(reused["finished"]),
                            why=reused["why"]) if reused and reused.get("cells") else ""))
    L.append("")
    per_cell = [m["cpu_s"] for v in s["models"].values() for c in v.values() for m in c.values() if m.get("cpu_s")]
    L.append(say("not_reproduced", paper=fmt(PAPER["full"][7][0]),
                 cost=say("not_reproduced.cost", low=fmt(min(per_cell)), high=fmt(max(per_cell))) if per_cell
                 else say("not_reproduced.cost.unknown")))
    return L


def markdown(s: dict, figure: str) -> str:
    L = []
    cfg = s["config"]
    draws = cfg.get("baseline_draws", [1])
    ev_b, ev_m = cfg.get("baseline_eval", cfg["eval"]), cfg.get("model_eval", cfg["eval"])
    baseline_eval = " or ".join(fmt(e) for e in ev_b)
    L.append(say("data", d=cfg["d"], n=cfg["n"],
                 baselines=say("data.draws", draws=" or ".join(map(str, draws)), eval=baseline_eval) if max(draws) > 1
                 else say("data.one_draw", eval=baseline_eval), model_eval=" or ".join(fmt(e) for e in ev_m)))
    L.append("")
    L.extend(_table_lines(s))
    L.append("")
    run_layers = sorted({int(L_) for v in s["models"].values() for L_ in v})
    missing = [L_ for L_ in range(1, 8) if L_ not in run_layers]
    L.append(say("not_run", missing=say("not_run.layers", layers=", ".join(map(str, missing))) if missing else ""))
    L.append("")
    L.extend(_depth_paragraph(s))
    L.extend(_column_paragraph(s))
    L.extend(_study_paragraph(s))
    L.append(say("figure", figure=figure))
    L.append("")
    L.append(say("criteria"))
    L.append("")
    L.extend(_criteria_lines(s))
    L.append("")
    L.extend(_adarr_paragraph(s))
    L.extend(_omega_lines(s))
    L.extend(_closing_lines(s))
    return "\n".join(L)
