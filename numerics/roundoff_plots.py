"""Plots of roundoff reports (``numerics.roundoff``): error against depth.

* :func:`error_vs_depth`: one configuration group, MSE against exact GD and
  bits of error against model depth, one line per dtype, plain GD in the same
  dtype dashed; a cross marks the first non-finite layer.
* :func:`layer_errors`: the layer-level reference, local error committed by
  each layer (markers) and cumulative error of the whole state (line).
* :func:`compare_constructions`: several reports side by side (one panel per
  construction), the figure of ``docs/roundoff.md``.

Command line (the doc figure from saved reports)::

    python -m numerics.roundoff_plots out/roundoff/gd-baseconv/roundoff.json [...] --out docs/roundoff.png
        [--backend torch] [--conv direct] [--kappa 5] [--sigma 1] [--x depth|step] [--max-x 300] [--hline 1e-12]
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from polyverify.plumbing.cli import make_folder, save_figure  # noqa: E402

COLORS = {"float64": "tab:blue", "float32": "tab:orange", "bfloat16": "tab:green", "float16": "tab:red"}
ORDER = ("float64", "float32", "bfloat16", "float16")


def _pos(vals) -> np.ndarray:
    """None/0/negative -> NaN (gaps on a log axis)."""
    a = np.array([np.nan if v is None else v for v in vals], dtype=np.float64)
    a[~(a > 0)] = np.nan
    return a


def _num(vals) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in vals], dtype=np.float64)


def _sorted(records):
    return sorted(records, key=lambda r: (ORDER.index(r["dtype"]) if r["dtype"] in ORDER else 9, r["backend"]))


def _label(r, multi_backend):
    return f"{r['dtype']}" + (f" ({r['backend']})" if multi_backend else "")


def _log_or_note(ax, any_data: bool, note="no finite error values to plot"):
    if any_data:
        ax.set_yscale("log")
    else:
        ax.text(0.5, 0.5, note, transform=ax.transAxes, ha="center", va="center", fontsize=9)


def _mse_panel(ax, records, *, legend=True, metric="mse", xkey="depth"):
    multi = len({r["backend"] for r in records}) > 1
    any_data = False
    for r in _sorted(records):
        c = COLORS.get(r["dtype"], None)
        per = r.get("per_step")
        fb = r.get("first_nonfinite")
        if per is not None:
            depth = np.array(per[xkey][1:])
            yc, yp = _pos(per[metric][1:]), _pos(per["plain_" + metric][1:])
            any_data |= bool(np.any(np.isfinite(yc)) or np.any(np.isfinite(yp)))
            ax.plot(depth, yc, "-", color=c, lw=1.6, label=_label(r, multi))
            ax.plot(depth, yp, "--", color=c, lw=1.0, alpha=0.8)
        if fb is not None and fb["layer"] >= 0:
            xb = fb["layer"] + 1 if xkey == "depth" else fb.get("step") or 0
            ax.axvline(xb, color=c, ls=":", lw=1)
            ax.plot([xb], [1.0], "x", color=c, ms=9, mew=2,
                    transform=ax.get_xaxis_transform(), clip_on=False,
                    label=f"{r['dtype']}: non-finite at layer {fb['layer'] + 1}")
    _log_or_note(ax, any_data)
    ax.set_xlabel("model depth (layers)" if xkey == "depth" else "GD steps")
    ax.grid(True, which="major", alpha=0.3)
    if legend:
        h, lab = ax.get_legend_handles_labels()
        h.append(plt.Line2D([], [], color="gray", ls="--"))
        lab.append("plain GD, same dtype")
        ax.legend(h, lab, fontsize=7, loc="best")


def error_vs_depth(records: list[dict], path, *, title: str = "") -> None:
    """MSE and mean bits of error of the iterate against exact GD, vs depth."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    _mse_panel(axes[0], records)
    axes[0].set_ylabel("MSE of x vs exact GD")
    multi = len({r["backend"] for r in records}) > 1
    for r in _sorted(records):
        per = r.get("per_step")
        if per is None:
            continue
        c = COLORS.get(r["dtype"], None)
        depth = np.array(per["depth"][1:])
        axes[1].plot(depth, _num(per["bits_mean"][1:]), "-", color=c, lw=1.6, label=_label(r, multi))
        axes[1].plot(depth, _num(per["plain_bits_mean"][1:]), "--", color=c, lw=1.0, alpha=0.8)
    axes[1].set_xlabel("model depth (layers)")
    axes[1].set_ylabel("mean bits of error (log2(1 + ulps))")
    axes[1].grid(True, alpha=0.3)
    axes[1].legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    make_folder(Path(path).parent)
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def layer_errors(layer_runs: list[dict], path, *, title: str = "") -> None:
    """Local (markers) and cumulative (line) MSE of the state, layer by layer."""
    fig, ax = plt.subplots(figsize=(8, 4.2))
    any_data = False
    for lr in sorted(layer_runs, key=lambda r: ORDER.index(r["dtype"]) if r["dtype"] in ORDER else 9):
        c = COLORS.get(lr["dtype"], None)
        recs = lr["layers"]
        if not recs:
            continue
        x = np.array([r["layer"] + 1 for r in recs])
        yl, yc = _pos([r["local_mse"] for r in recs]), _pos([r["cumulative_mse"] for r in recs])
        any_data |= bool(np.any(np.isfinite(yl)) or np.any(np.isfinite(yc)))
        ax.plot(x, yl, ".", color=c, ms=5, label=f"{lr['dtype']}: local")
        ax.plot(x, yc, "-", color=c, lw=1, alpha=0.7, label=f"{lr['dtype']}: cumulative")
    _log_or_note(ax, any_data, "no nonzero layer errors to plot")
    ax.set_xlabel("layer")
    ax.set_ylabel("MSE of the state vs mpfr layers")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    make_folder(Path(path).parent)
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def _select(report: dict, backend=None, conv=None, kappa=None, sigma=None) -> list[dict]:
    out = []
    for r in report["runs"]:
        if backend is not None and r["backend"] != backend:
            continue
        if conv is not None and r["conv"] != conv:
            continue
        if kappa is not None and not math.isclose(r["kappa"], kappa):
            continue
        if sigma is not None and not math.isclose(r["sigma"], sigma):
            continue
        out.append(r)
    return out


def compare_constructions(reports: list[dict], path, *, backend=None, conv="direct", kappa=None, sigma=None,
                          title: str = "", xkey: str = "depth", max_x: float | None = None,
                          hline: float | None = None) -> None:
    """One MSE panel per report (construction), shared y axis; x is the model
    depth (``xkey="depth"``) or the number of GD steps (``"step"``)."""
    n = len(reports)
    cols = min(n, 2)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.2 * cols, 4.3 * rows), sharey=True, squeeze=False)
    for ax, rep in zip(axes.ravel(), reports):
        sel = _select(rep, backend, conv, kappa, sigma)
        _mse_panel(ax, sel, xkey=xkey)
        if max_x is not None:
            ax.set_xlim(0, max_x)
        if hline is not None:
            ax.axhline(hline, color="k", ls=":", lw=0.8)
        name = rep["construction"]["name"]
        ks = sorted({r["kappa"] for r in sel})
        ax.set_title(f"{name}: depth {rep['construction']['depth_formula']} for k steps "
                     f"({', '.join(sorted({r['conv'] for r in sel}))} conv, kappa={','.join(f'{k:g}' for k in ks)})",
                     fontsize=9)
        ax.set_ylabel("MSE of x vs exact GD")
    for ax in axes.ravel()[n:]:
        ax.axis("off")
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    make_folder(Path(path).parent)
    save_figure(fig, path, dpi=90)
    plt.close(fig)


def _main(argv) -> int:
    from polyverify.plumbing.cli import Parser, UsageError, one_line, output_file

    ap = Parser(prog="python -m numerics.roundoff_plots", description=__doc__.splitlines()[0])
    ap.add_argument("reports", nargs="+", help="roundoff.json files (python -m numerics.roundoff --out DIR)")
    ap.add_argument("--out", required=True, help="the figure to write (PNG; folder created if missing)")
    ap.add_argument("--backend", help="only runs of this backend (default: any)")
    ap.add_argument("--conv", default="direct", help="only runs of this convolution method (default direct)")
    ap.add_argument("--kappa", type=float, help="only runs at this kappa (default: any)")
    ap.add_argument("--sigma", type=float, help="only runs at this sigma (default: any)")
    ap.add_argument("--title", default="", help="figure title")
    ap.add_argument("--x", choices=["depth", "step"], default="depth", help="x axis: model depth or GD steps")
    ap.add_argument("--max-x", type=float, help="right end of the x axis")
    ap.add_argument("--hline", type=float, help="a dotted horizontal reference line (e.g. 1e-12)")
    a = ap.parse_args(argv)
    out = output_file("--out", a.out)
    try:
        reports = [json.loads(Path(p).read_text()) for p in a.reports]
    except (OSError, ValueError) as e:
        raise UsageError(f"cannot read report: {one_line(e)}") from None
    compare_constructions(reports, out, backend=a.backend, conv=a.conv, kappa=a.kappa, sigma=a.sigma,
                          title=a.title, xkey=a.x, max_x=a.max_x, hline=a.hline)
    print(f"wrote {out}")
    return 0


def main(argv=None) -> int:
    from polyverify.plumbing.cli import run_main

    return run_main(_main, argv)


if __name__ == "__main__":
    from polyverify.plumbing.cli import exit_with

    exit_with(main)
