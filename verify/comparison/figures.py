"""Plots of a comparison report (matplotlib, Agg)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from polyverify.plumbing.cli import save_figure


def _save(fig, out, name: str, files: list) -> None:
    """Lay out, write atomically (``save_figure``), close, and list the file."""
    fig.tight_layout()
    save_figure(fig, out / name)
    _plt().close(fig)
    files.append(name)


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def write_plots(report: dict, out: Path) -> list[str]:
    plt = _plt()
    files = []
    fn = report.get("functional")
    if fn and fn["per_layer"]:
        pl = fn["per_layer"][0]
        regions = list(pl["layers"][0]["regions"])
        M = np.array([[r["regions"][g] if r["regions"][g] is not None else np.inf for g in regions]
                      for r in pl["layers"]])
        fig, ax = plt.subplots(figsize=(1.2 + 0.6 * len(regions), 1.5 + 0.35 * len(M)))
        im = ax.imshow(np.log10(np.maximum(M, 1e-300)).clip(-20, None), aspect="auto", cmap="viridis")
        ax.set_xticks(range(len(regions)), regions, rotation=45, ha="right", fontsize=7)
        ax.set_yticks(range(len(M)), [r["section"] for r in pl["layers"]], fontsize=7)
        ax.set_title("log10 max |state diff| per layer and region", fontsize=8)
        fig.colorbar(im)
        _save(fig, out, "state_diff.png", files)
    it = report.get("iterate")
    if it:
        fig, ax = plt.subplots(figsize=(5.5, 3.8))
        for k, row in enumerate(it):
            c = f"C{k}"
            # a diverging solver gives inf/nan: plot the finite part (the report keeps where it diverged)
            ax.semilogy(_finite(row["curve_learned"]), "-", color=c, label=f"learned {row['set']}")
            ax.semilogy(_finite(row["curve_constructed"]), "--", color=c, alpha=0.6, label=f"constructed {row['set']}")
        ax.set_xlabel("iterations (body applications)")
        ax.set_ylabel(it[0]["error"])
        ax.legend(fontsize=6)
        ax.grid(alpha=0.3)
        _save(fig, out, "iterate.png", files)
    ip = report.get("interpolation")
    if ip and ip.get("supported"):
        fig, ax = plt.subplots(figsize=(5, 3.5))
        t = [r["t"] for r in ip["curve"]]
        ax.semilogy(t, [max(r["rms_vs_constructed"] or 0, 1e-300) for r in ip["curve"]], "o-", label="vs constructed")
        ax.semilogy(t, [max(r["rms_vs_lstsq"] or 0, 1e-300) for r in ip["curve"]], "s--", label="vs least squares")
        ax.set_xlabel("t (0 = constructed, 1 = learned, symmetry-aligned)")
        ax.set_ylabel("RMS prediction difference")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
        _save(fig, out, "interpolation.png", files)
    iw = report.get("implicit_w")
    if iw:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        ls = [r["l"] for r in iw["layers"]]
        ax.semilogy(ls, [max(r["l2_mean"] or 0, 1e-300) for r in iw["layers"]], "o-", label="mean ||w_l - w_c||")
        ax.semilogy(ls, [max(r["norm_constructed_mean"] or 0, 1e-300) for r in iw["layers"]], "s--",
                    label="mean ||w_c||")
        ax.set_xlabel("l (body copies)")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
        _save(fig, out, "implicit_w.png", files)
    polys = _polys(report)
    if polys:
        fig, axes = plt.subplots(1, len(polys), figsize=(3.2 * len(polys) + 0.6, 3.2), squeeze=False)
        for ax, (label, p) in zip(axes[0], polys):
            sp, te = p["spurious_monomials"]["mass_by_degree"], p["true_monomials"]["error_mass_by_degree"]
            degs = sorted({int(k) for k in sp} | {int(k) for k in te})
            x = np.arange(len(degs))
            ax.bar(x - 0.2, [max(te.get(str(k), 0.0), 1e-300) for k in degs], 0.4, label="error in true monomials")
            ax.bar(x + 0.2, [max(sp.get(str(k), 0.0), 1e-300) for k in degs], 0.4, label="spurious monomials")
            ax.set_yscale("log")
            vals = [v for v in list(sp.values()) + list(te.values()) if v > 0] or [1.0]
            ax.set_ylim(max(1e-30, min(vals) / 10), max(vals) * 10)
            ax.set_xticks(x, [str(k) for k in degs])
            ax.set_xlabel("total degree")
            ax.set_title(label, fontsize=8)
        axes[0][0].set_ylabel("coefficient mass (sum |c|)")
        axes[0][0].legend(fontsize=6)
        _save(fig, out, "poly_degrees.png", files)
    return files


def _polys(report):
    """(label, comparison) for every finished exact polynomial comparison in the report."""
    out = []
    p = report.get("polynomial")
    if p and p.get("supported"):
        out += [(f"body {e['region']}{e['index']}", e) for e in (p.get("body") or {}).get("entries", [])]
        if p["prediction"].get("finished"):
            out.append(("prediction", p["prediction"]))
    pm = report.get("polynomial_model")
    if pm and pm.get("supported"):
        out += [(f"output {e['output']}", e) for e in pm["outputs"]]
    return [(lab, e) for lab, e in out if e["spurious_monomials"]["mass"] or e["true_monomials"]["error_mass"]]


def _finite(curve):
    """Non-finite or huge (> 1e100) values of a diverged iterate become NaN, which matplotlib skips."""
    a = np.asarray([np.nan if v is None else v for v in curve], dtype=float)
    a[~np.isfinite(a) | (a > 1e100)] = np.nan
    return a
