"""The figure of a :class:`~verify.compiler_trace_labels.Trace` (``Trace.plot``): one panel per
state, each cell coloured by the kind of what it holds."""
from __future__ import annotations

import math

import numpy as np


def plot_trace(tr, path, *, annotate_below: int = 160, dpi: int = 90):
    """One panel per state of ``tr`` (the input state, then after each layer), cells coloured by what
    they hold (``verify.compiler_trace_labels.KINDS``), annotated with node names where a panel has at
    most ``annotate_below`` cells; written atomically (``polyverify.plumbing.cli.save_figure``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    from polyverify.plumbing.cli import save_figure

    colours = {"empty": "#ffffff", "input": "#4c78a8", "sum": "#54a24b", "product": "#f58518",
               "output": "#e45756", "constant": "#bab0ac", "other": "#79706e"}
    order = list(colours)
    cmap = ListedColormap([colours[k] for k in order])
    n = len(tr.layers)
    ncol = min(n, 4)
    nrow = math.ceil(n / ncol)
    T, Cn = tr.layers[-1].shape
    pw = min(6.0, max(2.2, 0.45 * Cn))
    ph = min(6.0, max(1.6, 0.35 * T))
    fig, axes = plt.subplots(nrow, ncol, figsize=(pw * ncol, ph * nrow + 0.8), squeeze=False)
    for ax in axes.flat[n:]:
        ax.axis("off")
    for ax, lt in zip(axes.flat, tr.layers):
        t_, c_ = lt.shape
        grid = np.zeros(lt.shape, dtype=int)
        for (t, c), lab in lt.cells.items():
            grid[t, c] = order.index(tr.kind_of(lab))
        ax.imshow(grid, cmap=cmap, vmin=0, vmax=len(order) - 1, aspect="auto", interpolation="nearest")
        ax.set_xticks(np.arange(-0.5, c_, 1), minor=True)
        ax.set_yticks(np.arange(-0.5, t_, 1), minor=True)
        if t_ * c_ <= 4000:
            ax.grid(which="minor", color="#dddddd", linewidth=0.4)
        ax.tick_params(which="minor", length=0)
        ax.set_xlabel("channel", fontsize=7)
        ax.set_ylabel("token", fontsize=7)
        ax.tick_params(labelsize=6)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=8))
        ax.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=8))
        title = "input state" if lt.layer == 0 else f"after layer {lt.layer} ({lt.kind})"
        ax.set_title(f"{title}: {len(lt.cells)} of {t_ * c_} cells", fontsize=8)
        if t_ * c_ <= annotate_below:
            for (t, c), lab in lt.cells.items():
                s = tr.name(lab)
                ax.text(c, t, s if len(s) <= 9 else s[:8] + "+", ha="center", va="center",
                        fontsize=6 if t_ * c_ <= 60 else 5, color="white" if tr.kind_of(lab) in
                        ("input", "output", "other") else "black")
    fig.legend(handles=[Patch(facecolor=colours[k], edgecolor="#999999", label=k) for k in order],
               loc="lower center", ncol=len(order), fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    save_figure(fig, path, dpi=dpi)
    plt.close(fig)
    return path
