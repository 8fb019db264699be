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


#: at most this many weight panels are drawn (the rest are counted in the figure's title)
MAX_WEIGHT_PANELS = 48
#: an array with more entries than this is drawn as its block maxima (|w|) on at most this many cells
MAX_WEIGHT_CELLS = 250_000


def _dense(w) -> np.ndarray:
    """A weight as a float array (a sparse matrix laid out dense here, for the figure only)."""
    if hasattr(w, "toarray"):
        w = w.toarray()
    a = np.asarray(w)
    return a.astype(float) if a.dtype != object else np.vectorize(float, otypes=[float])(a)


def _shrink(a: np.ndarray, cells: int) -> tuple[np.ndarray, int]:
    """``a`` pooled into square blocks (each cell the entry of largest |w| in its block) so that it has
    at most ``cells`` cells; the block side."""
    if a.ndim != 2 or a.size <= cells:
        return a, 1
    k = math.ceil(math.sqrt(a.size / cells))
    r, c = math.ceil(a.shape[0] / k), math.ceil(a.shape[1] / k)
    pad = np.zeros((r * k, c * k))
    pad[:a.shape[0], :a.shape[1]] = a
    blocks = pad.reshape(r, k, c, k).transpose(0, 2, 1, 3).reshape(r, c, k * k)
    idx = np.abs(blocks).argmax(axis=2)
    return np.take_along_axis(blocks, idx[..., None], axis=2)[..., 0], k


def plot_weights(layers, path, *, title: str = "", dpi: int = 90):
    """Heat maps of every nonzero weight array of ``layers`` (``Layer.arrays()``: BaseConv's channel mixes
    ``W_in`` / ``W_gate`` / ``W_out``, its filters ``h`` and biases; each LSA / ELSA head's matrices), one
    panel each, layer by layer, a diverging scale symmetric about 0 per panel; at most
    :data:`MAX_WEIGHT_PANELS` panels, an array of more than :data:`MAX_WEIGHT_CELLS` entries pooled into
    blocks; written atomically (``polyverify.plumbing.cli.save_figure``).  Returns the number of panels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from polyverify.plumbing.cli import save_figure

    panels, left = [], 0
    for i, L in enumerate(layers):
        for name, w in L.arrays().items():
            a = _dense(w)
            if a.ndim == 1:
                a = a[None, :]
            if a.ndim != 2 or not np.any(a):
                continue
            if len(panels) >= MAX_WEIGHT_PANELS:
                left += 1
                continue
            panels.append((i + 1, getattr(L, "kind", type(L).__name__), name, *_shrink(a, MAX_WEIGHT_CELLS)))
    n = max(1, len(panels))
    ncol = min(n, 4)
    nrow = math.ceil(n / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.6 * ncol, 3.0 * nrow + 0.6), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.axis("off")
    for ax, (layer, kind, name, a, k) in zip(axes.flat, panels):
        m = float(np.abs(a).max()) or 1.0
        im = ax.imshow(a, cmap="RdBu_r", vmin=-m, vmax=m, aspect="auto", interpolation="nearest")
        ax.set_title(f"layer {layer} ({kind}) {name} {a.shape[0] * k} x {a.shape[1] * k}"
                     + (f", {k} x {k} blocks" if k > 1 else ""), fontsize=7)
        ax.tick_params(labelsize=6)
        fig.colorbar(im, ax=ax, fraction=0.046, pad=0.02).ax.tick_params(labelsize=6)
    fig.suptitle((title + ": " if title else "") + f"{len(panels)} nonzero weight arrays"
                 + (f" ({left} more not drawn)" if left else ""), fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    save_figure(fig, path, dpi=dpi)
    plt.close(fig)
    return len(panels)
