"""Seed 004 Table 1's report: its table, figure and section of docs/experiments.md, read from the
summary of :mod:`.seed004_table1` (the grid, cells, criteria and paper values live there)."""
from __future__ import annotations

import math

import numpy as np

from .common import fmt, timing_line, verdict
from .seed004_table1 import (COLUMNS, D, LABEL, N, PAPER, PAPER_TRAIN_SEQUENCES, RETRIES, RETRY_LR_FACTOR,
                             STUDY_BASE, VARIANTS, _paper_model)


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
                p = _paper_model(v, L, col)
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
            ax.plot(layers, [_paper_model(v, L_, column) for L_ in layers], "x--", color=colors[v], alpha=0.6,
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
        out[v] = [(int(L_), got[L_][column]["adjusted"], _paper_model(v, L_, column))
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
    L = [f"**Depth at sigma_max = {column}** (ours / paper; ConstRR here {fmt(b)}, paper {fmt(PAPER['constrr'][i])}):", ""]
    depths = sorted({L_ for x in ser.values() for L_, _, _ in x})
    L.append("| model | " + " | ".join(f"L = {L_}" for L_ in depths) + " |")
    L.append("|---|" + "---|" * len(depths))
    for v in VARIANTS:
        got = {L_: o for L_, o, _ in ser[v]}
        L.append(f"| {LABEL[v]} | " + " | ".join(f"{fmt(got.get(L_))} / {fmt(_paper_model(v, L_, column))}"
                                                for L_ in depths) + " |")
    L.append("")
    deep = {v: [(L_, o) for L_, o, _ in ser[v] if L_ >= 3] for v in VARIANTS}
    paper_g = sorted({round(_paper_model("gdpp", L_, column), 6) for L_ in range(3, 8)})
    notes = []
    g = deep["gdpp"]
    if g:
        lo, hi = min(o for _, o in g), max(o for _, o in g)
        flat = hi <= 1.1 * lo
        notes.append(f"GD++ from L = {g[0][0]} to {g[-1][0]} stays "
                     + (f"at {fmt(lo)} " if fmt(lo) == fmt(hi) else f"between {fmt(lo)} and {fmt(hi)} ")
                     + f"(spread {fmt(100 * (hi / lo - 1), 2)}%; ConstRR {fmt(b)}): "
                     + ("flat within 10%, the paper's plateau (" if flat else "not flat within 10%, unlike the paper's plateau (")
                     + f"{' to '.join(fmt(x) for x in paper_g)} at L = 3..7 there)")
    for v in ("diag", "full"):
        d = deep[v]
        if len(d) >= 2:
            best = min(d, key=lambda x: x[1])
            falls = all(x[1] > y[1] for x, y in zip(d, d[1:]))
            notes.append(f"{LABEL[v]} {'falls at every added layer' if falls else 'does not fall at every added layer'}"
                         f" (best {fmt(best[1])} at L = {best[0]}, {fmt(best[1] / g[-1][1])}x GD++ at L = {g[-1][0]}; "
                         f"paper {fmt(_paper_model(v, 7, column))} at L = 7"
                         + (f"; L = {', '.join(map(str, retried))} trained at a smaller learning rate after diverging, "
                            "see Configuration" if (retried := [L_ for L_, _ in d if s["models"][v][str(L_)][column].get(
                                "diverged")]) else "")
                         + ")")
    steps = sorted({s["models"][v][str(L_)][column]["steps"] for v in VARIANTS for L_, _ in deep[v]})
    L.append("; ".join(notes) + f". Every cell of L >= 3 is trained for {' or '.join(map(str, steps))} steps with the "
             "recipe below (the paper: 200,000), so at large L the gap to the paper is the training budget's as "
             "much as the model's.")
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
    L = [f"**The sigma_max = {column} column** (ours / paper, our ratio to the paper in brackets; ConstRR here "
         f"{fmt(b.get('constrr', {}).get('adjusted'))}, paper {fmt(PAPER['constrr'][i])}; TunedRR "
         f"{fmt(b.get('tunedrr', {}).get('adjusted'))}, paper {fmt(PAPER['tunedrr'][i])}):", ""]
    L.append("| model | " + " | ".join(f"L = {L_}" for L_ in depths) + " |")
    L.append("|---|" + "---|" * len(depths))
    for v in VARIANTS:
        L.append(f"| {LABEL[v]} | " + " | ".join(
            f"{fmt(got[v][L_]['adjusted'])} / {fmt(_paper_model(v, L_, column))} "
            f"({fmt(got[v][L_]['adjusted'] / _paper_model(v, L_, column))})" for L_ in depths) + " |")
    L.append("")
    deep = depths[-1]
    ours = sorted(VARIANTS, key=lambda v: got[v][deep]["adjusted"])
    paper = sorted(VARIANTS, key=lambda v: _paper_model(v, deep, column))
    worst = max(VARIANTS, key=lambda v: got[v][deep]["adjusted"] / _paper_model(v, deep, column))
    m = got[worst][deep]
    L.append(f"At L = {deep} ours rank {' < '.join(LABEL[v] for v in ours)}, the paper "
             f"{' < '.join(LABEL[v] for v in paper)}"
             + (" (the same order)" if ours == paper else "")
             + f"; the model furthest above the paper is {LABEL[worst]}, {_pct(m['adjusted'] / _paper_model(worst, deep, column) - 1)} "
             f"({fmt(m['adjusted'])}, standard error {fmt(m['se'], 2)}).")
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
    p = _paper_model(b["variant"], b["layers"], b["column"])
    dg = s["models"].get("diag", {}).get(str(b["layers"]), {}).get(b["column"])
    L = [f"**Why Full is the weakest model** ({LABEL[b['variant']]}, L = {b['layers']}, sigma_max = {b['column']}: "
         f"the grid's run {fmt(ref['adjusted'])} (standard error {fmt(ref['se'], 2)}), {_pct(ref['adjusted'] / p - 1)} "
         f"against the paper's {fmt(p)}"
         + (f"; Diag {fmt(dg['adjusted'])}, {_pct(dg['adjusted'] / _paper_model('diag', b['layers'], b['column']) - 1)}"
            if dg else "")
         + f"). The same run again with one thing changed, each evaluated on the grid's {fmt(ref.get('eval'))} "
         "sequences unless the row says otherwise:", ""]
    L.append("| change | steps | batch | lr | adjusted loss | vs the grid's run | vs the paper |")
    L.append("|---|---|---|---|---|---|---|")
    rows = [("none (the grid's run)", ref)] + [(x["study"], x) for x in st]
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
        notes.append(f"The training seed alone moves it by {fmt(100 * (hi / lo - 1), 2)}% ({fmt(lo)} to {fmt(hi)} over "
                     f"{len(seeds)} seeds; the best, {_pct(lo / p - 1)} against the paper, which reports the best of 5)")
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
        notes.append(f"the largest gain of one change to the training is {fmt(100 * gain, 2)}% ({best['study']}, still "
                     f"{_pct(best['adjusted'] / p - 1)} against the paper); "
                     + (f"beyond the seeds' spread: {', '.join(beyond)}" if beyond else
                        "no change gains more than the seeds' spread"))
        budget = [x for x in others if x["steps"] * x["recipe"]["batch"] > ref["steps"] * ref["recipe"]["batch"]]
        if budget:
            more = max(budget, key=lambda x: x["steps"] * x["recipe"]["batch"])
            notes.append(f"{fmt(more['steps'] * more['recipe']['batch'] / (ref['steps'] * ref['recipe']['batch']))}x the "
                         f"grid's training sequences ({more['study']}) gives {_pct(more['adjusted'] / ref['adjusted'] - 1)}, "
                         f"where the paper trains on {fmt(PAPER_TRAIN_SEQUENCES / (ref['steps'] * ref['recipe']['batch']))}x "
                         "the grid's (200,000 steps at batch 2048, seed 004 Sec. 6)")
    for x in evals:
        fifths = x.get("eval_fifths") or []
        notes.append(f"the same training evaluated on {fmt(x['eval'])} sequences instead of {fmt(ref.get('eval'))} reads "
                     f"{fmt(x['adjusted'])} ({_pct(x['adjusted'] / ref['adjusted'] - 1)}), and that set's five disjoint "
                     f"fifths read {fmt(min(fifths))} to {fmt(max(fifths))} ({_pct(min(fifths) / x['adjusted'] - 1)} to "
                     f"{_pct(max(fifths) / x['adjusted'] - 1)}): the evaluation set's size alone moves the "
                     "comparison with the paper by that much"
                     + (f" (its largest 0.1% of sequences carry {fmt(100 * x['tail_share'], 2)}% of the loss)"
                        if x.get("tail_share") is not None else ""))
    return notes, others, beyond


def _study_closing(ref: dict, dg: dict | None, p: float, b: dict, others: list[dict], beyond: list[str]) -> str:
    """The study's closing sentences: Full against Diag (ours and the paper's), what the training changes
    tried show, and the parametrisation the paper may have used instead."""
    full_params = 2 * (D + 1) ** 2
    pd = _paper_model("diag", b["layers"], b["column"])
    closing = (f"Full has {full_params} parameters a layer where Diag has 4, and Diag's tied diagonal form is a subspace "
               f"of Full's: the paper's Full is below its Diag here ({fmt(p)} against {fmt(pd)})"
               + (f", ours above ours ({fmt(ref['adjusted'])} against {fmt(dg['adjusted'])}), so our Full does not find "
                  "what the paper's finds" if dg and ref["adjusted"] > dg["adjusted"] else
                  (f", ours below ours too ({fmt(ref['adjusted'])} against {fmt(dg['adjusted'])})" if dg else ""))
               + ". ")
    tried = [x["study"] for x in others]
    if others:
        closing += ("Of the training changes tried (" + ", ".join(tried) + "), "
                    + (f"{', '.join(beyond)} gain{'s' if len(beyond) == 1 else ''} more than the seeds' spread: the gap is "
                       "at least partly the training budget or recipe, not a defect of the model"
                       if beyond else "none gains more than the seeds' spread: no defect of the initialisation or the "
                       "learning rate shows, and what is left is the paper's far longer training (or its best of 5 "
                       "seeds)")
                    + ". ")
    closing += ("Its parametrisation is the paper's eq. (2) (P and Q, each a full (d+1) x (d+1) matrix; seed 004 Sec. 6: "
                "'Full. Trains full parameter matrices'); the paper may have trained W_K, W_Q, W_V, W_P of eq. (1) "
                "instead, which it does not say and which is not tried here.")
    return closing


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
        why = (f" Those sequences are the ones where sigma_hat^2 (n - d = {N - D} degrees of freedom) underestimates a "
               f"large noise: their median sigma_tau is {fmt(tail['sigma'][0])} against {fmt(tail['sigma'][1])} over "
               f"all, their median sigma_hat^2 / sigma_tau^2 {fmt(tail['s2hat_ratio'][0])} against "
               f"{fmt(tail['s2hat_ratio'][1])}, so the ridge is under-regularised (their smallest eigenvalue of Sigma, "
               f"median {fmt(tail['smallest_eig'][0])} against {fmt(tail['smallest_eig'][1])}, is not what sets "
               "them apart).")
    return [f"**AdaRR at sigma_max = {column}.** AdaRR tunes nothing (lambda = sigma_hat^2 per sequence), so its "
            f"only noise is the evaluation set's. Pooled over {len(d)} draws of {fmt(n)} sequences it is "
            f"{fmt(a['adjusted'])} (standard error {fmt(a['se'], 2)}), {_pct(a['adjusted'] / p - 1)} against the "
            f"paper's {fmt(p)}: {fmt(abs(z), 2)} standard errors of the difference, the paper's taken as one draw's "
            f"({fmt(a['se_one'], 2)}). The single draws read {', '.join(fmt(x) for x in d)} "
            f"({_pct(min(d) / p - 1)} to {_pct(max(d) / p - 1)} against the paper; the first is the set used alone "
            f"before). The loss is heavy-tailed: the largest 0.1% of sequences carry {fmt(100 * a['tail_share'], 2)}% "
            "of the mean." + why + " "
            + ("The paper's value is within sampling noise of ours." if abs(z) <= 2 else
               "The paper's value is beyond sampling noise of ours: its AdaRR or its data differ from ours there."), ""]


def _retry_sentence(s: dict) -> str:
    """The cells that diverged and were retrained at a smaller learning rate (from the results)."""
    hits = [(v, L_, c, m) for v, per in s["models"].items() for L_, pc in per.items() for c, m in pc.items()
            if m.get("diverged")]
    rule = (f" A run that diverges (no finite adjusted loss) is retrained at {fmt(RETRY_LR_FACTOR)} x its learning "
            f"rate, at most {RETRIES} times, the same rule for every cell")
    if not hits:
        return rule + "; none did."
    return (rule + ": "
            + "; ".join(f"{LABEL[v]} L = {L_}, column {c} ("
                        + ", ".join(f"at lr {fmt(f['lr'])} {f['skipped']} of {m['steps']} steps had a non-finite loss"
                                    for f in m["diverged"])
                        + f"; the result is the run at lr {fmt(m['recipe']['lr'])})"
                        for v, L_, c, m in sorted(hits, key=lambda x: (int(x[1]), x[0])))
            + ". The deep models' training losses are heavy-tailed (the 1/2 MSE averaged over a tenth of a run's "
            f"steps reaches {fmt(_largest_train_loss(s))} in a run that finished, from rare sequences, each model "
            "being a polynomial of degree 3^L in the tokens), which the gradient-norm clip and the skip of "
            "non-finite steps absorb.")


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
    how = ("ours from several independent tunings and evaluation sets pooled, its standard error counting both "
           "noises; the paper's from one tuning and one set of 100,000 sequences, its standard error taken as that "
           "of one such draw of ours, as it prints none" if pooled else
           "ours and the paper's, each from 100,000 sequences, the paper's standard error taken equal to ours as "
           "it prints none")
    return (f"Each miss is {'at most' if max(zs) <= 2 else 'up to'} {fmt(max(zs), 2)} standard errors of the "
            f"difference between two independent estimates ({how}): "
            + ("consistent with sampling noise; at these small losses 10% is only about "
               + (fmt(min(one), 2) if fmt(min(one), 2) == fmt(max(one), 2) else f"{fmt(min(one), 2)} to {fmt(max(one), 2)}")
               + " standard errors of one draw's estimate, so the criterion is tighter than the noise of the paper's "
               "table." if max(zs) <= 2 else
               "beyond sampling noise for at least one, so the paper's baseline differs from ours there (family, "
               "tuning or data)."))


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
        L.append(f"* {c['text']}: {verdict(c['met'])}.")
        if c["id"] == "baselines-10pct":
            n_checks = 3 * c["columns"]
            L.append(f"  {n_checks - len(c['misses'])} of {n_checks} baseline values are within 10%; "
                     + ("the misses: " + "; ".join(
                         f"{LABEL[m['baseline']]} at {m['column']}: {fmt(m['ours'])} (standard error "
                         f"{fmt(m['se'], 2)}) vs {fmt(m['paper'])} ({fmt(100 * (m['ours'] / m['paper'] - 1), 2)}%)"
                         for m in c["misses"]) + ". "
                        if c["misses"] else "")
                     + "Allowing for the paper's rounding to 3 decimals (its value stands for +-0.0005): "
                     + verdict(c["met_allowing_rounding"]) + ".")
            if any(m["baseline"] == "tunedrr" for m in c["misses"]):
                L.append("  The paper does not define TunedRR's two parameters beyond 'a max threshold on the "
                         "estimated variance and a multiplicative adjustment' (Sec. 6); ours is "
                         "lambda = min(c sigma_hat^2, m), tuned on a separate set.")
            noise = _miss_noise_sentence(c["misses"])
            if noise:
                L.append("  " + noise)
            for m in c["misses"]:
                if m["baseline"] == "constrr" and m["column"] == "5":
                    i5 = COLUMNS.index("5")
                    L.append(f"  ConstRR at sigma_max = 5: the paper prints {fmt(PAPER['constrr'][i5])} for ConstRR but "
                             f"{fmt(PAPER['gdpp'][7][i5])} for GD++ at 3-7 layers; ours is {fmt(m['ours'])}. GD++ "
                             "equals ConstRR in every other noisy column of the table, and a tuned constant ridge "
                             "cannot lose to GD++: the printed ConstRR value is likely a typo.")
        elif c["id"] == "one-layer-equal" and c["columns"]:
            L.append("  GD++ and Diag compute the same function at L = 1 (the query's prediction -y_t^1 = "
                     "-omega_yx <alpha, x_t> depends on p_y q_x only; tested in "
                     "`tests/numerics/training/test_training_token_lsa.py`), so the check says most about Full.")
            worst = max(c["columns"], key=lambda x: x["spread"])
            L.append(f"  Over {len(c['columns'])} columns the largest spread (max/min - 1) is "
                     f"{fmt(100 * worst['spread'], 2)}% (column {worst['column']}: GD++ {fmt(worst['gdpp'])}, "
                     f"Diag {fmt(worst['diag'])}, Full {fmt(worst['full'])}).")
        elif c["id"] == "l3-s5-third" and c["ratios"]:
            L.append("  Ratios to GD++: " + ", ".join(f"{LABEL[v]} {fmt(r)} (paper {fmt(c['paper_ratios'][v])})"
                                                    for v, r in c["ratios"].items()) + ". "
                     "The paper states no ratio in words: Sec. 6 ('Uniform noise variance') says of Full and Diag "
                     "that 'the results quickly improve across the entire noise spectrum for 3 or more layers' and that "
                     "'GD++ quickly converges to a suboptimal solution'; the third is its Table 1's L = 3, sigma_max = 5 column "
                     "(an earlier criterion here, 'at most half', was looser than the paper's ratio).")
    return L


def _omega_lines(s: dict) -> list[str]:
    """What Diag and Full learn beyond GD++ (L = 3, sigma_max = 5), where all three ran."""
    L = []
    m3 = {v: s["models"].get(v, {}).get("3", {}).get("5") for v in VARIANTS}
    if all(m3.values()):
        L.append("**What Diag and Full learn beyond GD++** (L = 3, sigma_max = 5; per layer the omegas of eq. (9): "
                 "GD++ has omega_xy = omega_yy = 0 by construction; for Full, of the averaged diagonals of P and Q):")
        L.append("")
        L.append("| model | layer | omega_xx | omega_yx | omega_xy | omega_yy | off-tied-diagonal norm P / Q |")
        L.append("|---|---|---|---|---|---|---|")
        for v in VARIANTS:
            for i, o in enumerate(m3[v]["omegas"]):
                off = f"{fmt(o['off_tied_P'])} / {fmt(o['off_tied_Q'])}" if "off_tied_P" in o else "–"
                L.append(f"| {LABEL[v]} | {i + 1} | {fmt(o['xx'])} | {fmt(o['yx'])} | {fmt(o['xy'])} | {fmt(o['yy'])} | {off} |")
        L.append("")
        L.append("omega_yy < 0 rescales y by (1 + omega_yy lambda^l), lambda^l = sum_i (y_i^l)^2: a shrinkage that "
                 "grows with the residual noise, which is what lets one set of weights act like ridge with a "
                 "per-sequence lambda (seed 004 Sec. 5.2); omega_xy < 0 makes the step size noise dependent (Sec. 5.3).")
        L.append("")
    return L


def _closing_lines(s: dict) -> list[str]:
    """Configuration, cost and what is not reproduced here."""
    L = []
    cfg = s["config"]
    rc = cfg["recipe"]
    if cfg["grid"] != "quick":
        grid = "; ".join(f"L = {L_}: columns {', '.join(g['columns'])}, {g['steps']} steps"
                         for L_, g in cfg["grid"]["models"].items())
        L.append(f"**Configuration.** Models (one seed, 0; the paper reports the best of 5): {grid}. Recipe: Adam, "
                 f"batch {rc['batch']} fresh sequences per step, lr {rc['lr']} with {int(100 * rc['warmup'])}% linear "
                 f"warm-up then cosine decay to 0, gradient-norm clip {rc['clip']}, float64, warm start at the exact "
                 f"GD++ layer (eta = {rc['eta']}, gamma = {rc['gamma']}) plus N(0, std^2) noise on every free "
                 f"parameter (std {', '.join(f'{LABEL[k]} {v}' for k, v in cfg['init_std'].items())}). The paper: "
                 "Adam lr 1e-4, batch 2048, 200,000 steps, best of 5 seeds, 4-12 h per model on an H100."
                 + _retry_sentence(s))
    L.append("")
    reused = (s.get("run") or {}).get("reused")
    L.append(f"**Cost.** {timing_line(s)}. Baselines {fmt(s['cpu_by_kind']['baselines'])} s CPU, models "
             f"{fmt(s['cpu_by_kind']['models'])} s CPU."
             + (f" {reused['cells']} of the cells are records of the run of {', '.join(reused['finished'])} ({reused['why']}); "
                "the command above trains them all again." if reused and reused.get("cells") else ""))
    L.append("")
    per_cell = [m["cpu_s"] for v in s["models"].values() for c in v.values() for m in c.values() if m.get("cpu_s")]
    L.append("**Not reproduced here.** The columns of L >= 2 not in the grid, among them the noiseless column "
             f"falling to the paper's {fmt(PAPER['full'][7][0])} at L = 7 (which needs the paper's long training): "
             "a model cell costs "
             + (f"{fmt(min(per_cell))} to {fmt(max(per_cell))} s of CPU here" if per_cell else "CPU time")
             + ", and all experiments of this page together had to fit in a small CPU budget on a shared machine.")
    return L


def markdown(s: dict, figure: str) -> str:
    L = []
    cfg = s["config"]
    draws = cfg.get("baseline_draws", [1])
    ev_b, ev_m = cfg.get("baseline_eval", cfg["eval"]), cfg.get("model_eval", cfg["eval"])
    L.append(f"Data: d = {cfg['d']}, n = {cfg['n']}, w, x_i, x_t ~ N(0, I), noise std sigma_tau per sequence, "
             "noise-free query; adjusted loss = 1/2 MSE minus the oracle's (ridge with the true sigma_tau) on the "
             "same sequences. Baselines: per column "
             + (f"{' or '.join(map(str, draws))} independent draws, each a tuning set and an evaluation set of "
                f"{' or '.join(fmt(e) for e in ev_b)} sequences; ConstRR and TunedRR tuned once per draw, every "
                "baseline evaluated on the pooled evaluation sets, its value the mean over the tunings and its "
                "standard error counting the evaluation's and the tunings' noise"
                if max(draws) > 1 else f"{' or '.join(fmt(e) for e in ev_b)} evaluation sequences and as many for tuning")
             + f". Models: {' or '.join(fmt(e) for e in ev_m)} fresh evaluation sequences per cell (standard errors "
             "in `table.csv`; the paper evaluates on 100,000). Cells show **ours / paper**.")
    L.append("")
    L.extend(_table_lines(s))
    L.append("")
    run_layers = sorted({int(L_) for v in s["models"].values() for L_ in v})
    missing = [L_ for L_ in range(1, 8) if L_ not in run_layers]
    L.append("'–': not run here (the paper's value is shown)."
             + (f" Layers {', '.join(map(str, missing))} are not run; the paper's values for them are in seed 004 "
                "Table 1." if missing else ""))
    L.append("")
    L.extend(_depth_paragraph(s))
    L.extend(_column_paragraph(s))
    L.extend(_study_paragraph(s))
    L.append(f"![seed 004 Table 1]({figure})")
    L.append("")
    L.append("**Pass criteria**")
    L.append("")
    L.extend(_criteria_lines(s))
    L.append("")
    L.extend(_adarr_paragraph(s))
    L.extend(_omega_lines(s))
    L.extend(_closing_lines(s))
    return "\n".join(L)
