"""Curves of a training run (loss, LR, cosine metric) and comparison plots."""
from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from polyverify.plumbing.cli import save_figure  # noqa: E402


def _finite(xs, ys):
    pts = [(x, y) for x, y in zip(xs, ys) if y is not None and isinstance(y, (int, float)) and math.isfinite(y) and y > 0]
    return [p[0] for p in pts], [p[1] for p in pts]


def finish_axes(ax, xlabel, ylabel, title="", *, title_size=10, legend_size=8):
    """One panel's axis labels, a light grid, its legend and its title."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=legend_size)
    ax.set_title(title, fontsize=title_size)


def save_closed(fig, path, *, dpi=90) -> Path:
    """``fig`` laid out tightly, written atomically to ``path`` (``save_figure``) and closed."""
    fig.tight_layout()
    save_figure(fig, path, dpi=dpi)
    plt.close(fig)
    return Path(path)


def plot_curves(history, path, *, title=""):
    """Three panels against step: test MSE (and train loss), LR, cosine metric."""
    fig, ax = plt.subplots(1, 3, figsize=(13, 3.6))
    s = [h["step"] for h in history]
    ax[0].semilogy(*_finite(s, [h["test_mse"] for h in history]), label="test MSE (fresh problems)")
    ax[0].semilogy(*_finite(s, [h["train_loss"] for h in history]), alpha=0.6, label="train loss")
    ax[0].legend(fontsize=8)
    ax[0].set_title("loss")
    ax[1].semilogy(*_finite(s, [h["lr"] for h in history]))
    ax[1].set_title("learning rate")
    ms = [h.get("metric") for h in history]
    ax[2].plot(*_finite(s, ms), ".", label="sigma_g (eq. 6)")
    ax[2].plot(*_finite(s, [h.get("metric_ema") for h in history]), label="EMA")
    ax[2].set_title("gradient cosine metric")
    ax[2].legend(fontsize=8)
    for a in ax:
        a.set_xlabel("step")
        a.grid(alpha=0.3)
    fig.suptitle(title, fontsize=10)
    return save_closed(fig, path)


def plot_compare(runs: dict[str, list[dict]], path, *, title="", key="test_mse", x="step"):
    """Several runs' test MSE on one log axis; ``runs``: label -> history."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for lab, h in runs.items():
        ax.semilogy(*_finite([r[x] for r in h], [r[key] for r in h]), label=lab)
    finish_axes(ax, x, key, title)
    return save_closed(fig, path)
