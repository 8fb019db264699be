"""The seed002-ntk report (seed 002, Thm. 3.3 eq. (21), Sec. 5.1 Figs. 1 and 3): the figure and the section
of ``docs/experiments.md``, every number read from the summary that
:func:`numerics.experiments.seed002_ntk.summarise` makes of the committed records.  The prose is data: the
named templates of :mod:`.seed002_ntk_text`, filled here with the computed numbers."""
from __future__ import annotations

import math

from .common import fmt, std_err, timing_line, verdict
from .seed002_ntk import NU
from .seed002_ntk_text import say


def plot(s: dict):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 3, figsize=(14, 4))
    ns = [int(n) for n in s["ntk"]]
    if ns:
        ax[0].loglog(ns, [s["ntk"][str(n)]["ntk_rel_err"] for n in ns], "o-", label="NTK rel. error (mean)")
        for n in ns:
            ax[0].loglog([n] * len(s["ntk"][str(n)]["ntk_rel_err_each"]), s["ntk"][str(n)]["ntk_rel_err_each"], ".",
                         color="C0", alpha=0.4)
        ax[0].loglog(ns, [s["ntk"][str(n)]["max_cross_lag_rel"] for n in ns], "s-", label="max cross-lag / rho_0")
        e0 = s["ntk"][str(ns[0])]["ntk_rel_err"]
        ax[0].loglog(ns, [e0 * math.sqrt(ns[0] / n) for n in ns], "k:", label="n^-1/2")
        ax[0].axhline(0.05, color="gray", lw=0.8, ls="--")
        ax[0].set_xticks(ns, [str(n) for n in ns])
        ax[0].minorticks_off()
        ax[0].set_xlabel("width n")
        ax[0].set_title("Thm. 3.3: empirical NTK vs eq. (21)", fontsize=9)
        ax[0].legend(fontsize=7)
    for i, d in enumerate(s["dynamics"]):
        st = [c["step"] for c in d["curve"]]
        ax[1].semilogy(st, [c["rnn_train"] for c in d["curve"]], "-", color=f"C{i}", label=f"RNN n={d['n']} train")
        ax[1].semilogy(st, [c["conv_train"] for c in d["curve"]], "--", color=f"C{i}", label=f"scaled conv (init of n={d['n']}) train")
        ax[1].semilogy(st, [c["rnn_test"] for c in d["curve"]], ":", color=f"C{i}", alpha=0.7, label=f"RNN n={d['n']} test")
    ax[1].set_xlabel("full-batch GD step")
    ax[1].set_ylabel("MSE")
    ax[1].set_title("Fig. 1: RNN vs scaled convolution", fontsize=9)
    ax[1].legend(fontsize=6)
    if s["delay"]:
        dls = [d["delay"] for d in s["delay"]]
        for k, mk in (("scaled", "o-"), ("unscaled", "s-")):
            ax[2].errorbar(dls, [d[f"{k}_test_nmse"] for d in s["delay"]], yerr=[d[f"{k}_test_nmse_se"] for d in s["delay"]],
                           fmt=mk, label=f"{k} convolution", capsize=2)
        ax[2].axhline(1.0, color="grey", ls=":", lw=1, label="predicting 0 (normalised MSE 1)")
        ax[2].set_xlabel("delay (steps)")
        ax[2].set_ylabel("normalised test MSE")
        ax[2].set_title("Fig. 3: test error against delay", fontsize=9)
        ax[2].legend(fontsize=7)
    for a in ax:
        a.grid(alpha=0.3)
    fig.suptitle("Seed 002" + (" [--quick]" if s["quick"] else ""), fontsize=10)
    fig.tight_layout()
    return fig


def worse_than_zero(delays: list[dict]) -> str:
    """The Fig. 3 delays at which a model's normalised test MSE is above 1: predicting 0 scores exactly 1
    (the MSE is divided by the mean squared test target), so there the trained model is worse than no model."""
    parts = []
    for k in ("scaled", "unscaled"):
        over = [d for d in delays if d[f"{k}_test_nmse"] > 1]
        if over:
            parts.append(say("zero.model", model=k, delays=", ".join(
                say("zero.delay", delay=d["delay"], nmse=fmt(d[f"{k}_test_nmse"]), se=fmt(d[f"{k}_test_nmse_se"]))
                for d in over)))
    if not parts:
        return say("zero.none")
    return say("zero", over="; ".join(parts),
               scaled=say("zero.scaled") if any(d["scaled_test_nmse"] > 1 for d in delays) else "")


def _criterion_extra(c: dict, s: dict) -> str:
    """What a criterion's verdict rests on, in brackets after it."""
    if c["id"] == "ntk-rate":
        return say("criterion.slope", slope=fmt(c["slope"]))
    if c["id"] == "ntk-5pct":
        return say("criterion.value", value=fmt(c["value"]), n=c["n"])
    if c["id"] == "cross-lag":
        return say("criterion.cross_lag", values=", ".join(say("criterion.per_n.item", n=n, value=fmt(v))
                                                           for n, v in zip(s["ntk"], c["values"])),
                   inits=len(next(iter(s["ntk"].values()))["ntk_rel_err_each"]))
    if c["id"] == "fig1-5pct":
        return say("criterion.per_n", values=", ".join(say("criterion.per_n.item", n=n, value=fmt(g))
                                                       for n, g in c["gaps"].items()))
    if c["id"] == "fig3-delay":
        return say("criterion.delay", scaled=fmt(c["scaled_ratio"]), unscaled=fmt(c["unscaled_ratio"]))
    return ""


def markdown(s: dict, figure: str) -> str:
    L = []
    L.append(say("setup", nu_W=NU["W"], nu_F=NU["F"]))
    L.append("")
    if s["ntk"]:
        rho = next(iter(s["ntk"].values()))["rho"]
        L.append(say("ntk", T=len(rho), rho=", ".join(fmt(x) for x in rho)))
        L.append("")
        L.append("| n | inits | relative NTK error: mean +- standard error | its range over inits | relative lag-Gram error | largest cross-lag / rho_0: mean +- standard error | Gram diagonal (mean) | CPU |")
        L.append("|---|---|---|---|---|---|---|---|")
        for n, v in s["ntk"].items():
            e, c = v["ntk_rel_err_each"], v.get("max_cross_lag_rel_each", [v["max_cross_lag_rel"]])
            L.append(f"| {n} | {v['runs']} | {fmt(v['ntk_rel_err'])} +- {fmt(std_err(e), 2)} | {fmt(min(e))} to {fmt(max(e))} | "
                     f"{fmt(v['gram_rel_err'])} | {fmt(v['max_cross_lag_rel'])} +- {fmt(std_err(c), 2)} | "
                     f"{', '.join(fmt(g) for g in v['gram_diag_mean'])} | {fmt(v['cpu_s'])} s |")
        L.append("")
    if s["dynamics"]:
        L.append(say("dynamics"))
        L.append("")
        L.append("| RNN width n | steps | lr | largest relative train-loss gap | largest relative test-loss gap | final train MSE RNN / conv | trained impulse response gap (relative to its change) | CPU |")
        L.append("|---|---|---|---|---|---|---|---|")
        for d in s["dynamics"]:
            c = d["curve"][-1]
            L.append(f"| {d['n']} | {d['steps']} | {fmt(d['lr'])} | {fmt(d['max_rel_train_gap'])} | "
                     f"{fmt(d['max_rel_test_gap'])} | {fmt(c['rnn_train'])} / {fmt(c['conv_train'])} | "
                     f"{fmt(d['impulse_rel_gap'])} | {fmt(d['cpu_s'])} s |")
        L.append("")
    if s["delay"]:
        d0 = s["delay"][0]
        L.append(say("delay", draws=d0["draws"], steps=d0["steps"]))
        L.append("")
        L.append("| delay | scaled convolution | unscaled convolution |")
        L.append("|---|---|---|")
        for d in s["delay"]:
            L.append(f"| {d['delay']} | {fmt(d['scaled_test_nmse'])} +- {fmt(d['scaled_test_nmse_se'])} | "
                     f"{fmt(d['unscaled_test_nmse'])} +- {fmt(d['unscaled_test_nmse_se'])} |")
        L.append("")
        L.append(worse_than_zero(s["delay"]))
        L.append("")
    L.append(say("figure", figure=figure))
    L.append("")
    L.append(say("criteria"))
    L.append("")
    for c in s["criteria"]:
        L.append(say("criterion", text=c["text"], verdict=verdict(c["met"]), extra=_criterion_extra(c, s)))
    L.append("")
    crit = {c["id"]: c for c in s["criteria"]}
    if crit.get("fig3-delay", {}).get("met") is False and crit["fig3-delay"]["unscaled_ratio"] > 2:
        L.append(say("against", ratio=fmt(crit["fig3-delay"]["unscaled_ratio"])))
        L.append("")
    L.append(say("not_reproduced"))
    L.append("")
    L.append(say("cost", timing=timing_line(s)))
    return "\n".join(L)


__all__ = ["plot", "worse_than_zero", "markdown"]
