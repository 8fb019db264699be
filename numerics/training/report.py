"""Figures and the results table of docs/training.md from saved runs.

    python -m numerics.training.report out/train --docs docs

reads ``out/train/*/history.json`` (and ``result.json`` where a run finished)
and writes ``training_gradient.png`` (test MSE against step: recipe vs
StepLR, per model), ``training_multiply.png`` (best test MSE against depth,
BaseConv vs softmax Transformer) and prints Markdown tables.  A missing or
empty runs folder, an unreadable ``history.json`` or a bad ``--docs`` is one
``error:`` line and exit status 2, before anything is written; the figures
are written atomically.
"""
from __future__ import annotations

import argparse
import itertools
import json
import statistics
from pathlib import Path

from numerics.training import jsonio
from polyverify.plumbing.cli import Parser, UsageError, output_dir, run_main

from .figures import finish_axes, plot_compare, save_closed

#: what every evaluation record of a history must hold for the tables
REQUIRED = ("step", "test_mse")


def load_runs(root: Path) -> dict[str, list[dict]]:
    return {p.parent.name: [jsonio.restore(r) for r in json.loads(p.read_text())]
            for p in sorted(root.glob("*/history.json"))}


def check_runs(root: Path) -> dict[str, list[dict]]:
    """The runs under ``root`` (:func:`load_runs`), or a UsageError naming the folder or the
    history file that is missing or not a list of evaluation records."""
    if not root.exists():
        raise UsageError(f"runs folder {root} does not exist")
    if not root.is_dir():
        raise UsageError(f"runs folder {root} is not a folder")
    runs = {}
    for p in sorted(root.glob("*/history.json")):
        try:
            h = json.loads(p.read_text())
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise UsageError(f"{p}: not a readable JSON history ({type(e).__name__}: {e})") from None
        if not isinstance(h, list) or not h:
            raise UsageError(f"{p}: not a non-empty list of evaluation records")
        h = [jsonio.restore(r) for r in h]  # a diverged run's null losses (noted) back to NaN / inf
        for i, r in enumerate(h):
            if not isinstance(r, dict) or any(k not in r for k in REQUIRED):
                raise UsageError(f"{p}: record {i} lacks {' / '.join(REQUIRED)}")
            if not isinstance(r["step"], int) or not isinstance(r["test_mse"], (int, float)):
                raise UsageError(f"{p}: record {i}: step must be an integer and test_mse a number")
        runs[p.parent.name] = h
    if not runs:
        raise UsageError(f"no runs under {root} (no {root}/*/history.json)")
    return runs


def at_step(h, step):
    """Test MSE of the last evaluation at or before ``step``."""
    pts = [r for r in h if r["step"] <= step]
    return pts[-1]["test_mse"] if pts else float("nan")


def table(runs, root: Path) -> str:
    lines = ["| run | steps | test MSE (last) | same weights in float64 | best test MSE | wall s | "
             "load avg (1 min) at end | finished |",
             "|---|---|---|---|---|---|---|---|"]
    for name, h in runs.items():
        last = h[-1]
        fin = (root / name / "result.json").is_file()
        f64 = f"{last['test_mse_f64']:.2e}" if "test_mse_f64" in last else "(float64 run)"
        wall = f"{last['wall_s']:.0f}" if isinstance(last.get("wall_s"), (int, float)) else "-"
        load = f"{last['loadavg'][0]:.1f}" if last.get("loadavg") else "-"
        lines.append(f"| {name} | {last['step']} | {last['test_mse']:.2e} | {f64} | {min(r['test_mse'] for r in h):.2e} | "
                     f"{wall} | {load} | {'yes' if fin else 'no (stopped)'} |")
    return "\n".join(lines)


#: (recipe run, StepLR run) pairs compared at equal steps
PAIRS = (("grad_baseconv_recipe30_f32", "grad_baseconv_steplr30_f32"),
         ("grad_baseconv_recipe30_f32s", "grad_baseconv_steplr30_f32"),
         ("grad_lsa_recipe30_f32", "grad_lsa_steplr30_f32"), ("grad_lsa_recipe30_f32s", "grad_lsa_steplr30_f32"),
         ("grad_baseconv_recipe30", "grad_baseconv_steplr30"), ("grad_baseconv_recipe30b", "grad_baseconv_steplr30"),
         ("grad_baseconv_recipe", "grad_baseconv_steplr"),
         ("grad_lsa_recipe30", "grad_lsa_steplr30"), ("grad_lsa_recipe", "grad_lsa_steplr"))


def ratio_table(runs, pairs=PAIRS, steps=(1000, 2000, 4000, 6000, 10000, 15000, 20000, 30000, 40000, 50000, 60000)) -> str:
    """Test MSE of each (recipe, StepLR) pair at equal steps and the ratio StepLR / recipe, up to
    the last step both runs reached."""
    lines = ["| recipe run / StepLR run | step | recipe | StepLR | ratio |", "|---|---|---|---|---|"]
    for a, b in pairs:
        if a not in runs or b not in runs:
            continue
        last = min(runs[a][-1]["step"], runs[b][-1]["step"])
        for st in [x for x in steps if x <= last] + ([last] if last not in steps else []):
            ra, rb = at_step(runs[a], st), at_step(runs[b], st)
            lines.append(f"| {a} / {b} | {st} | {ra:.2e} | {rb:.2e} | {rb / ra:.3g}x |")
    return "\n".join(lines)


def ratio_summary(ha, hb, *, factor=100.0) -> dict:
    """The StepLR / recipe ratio at every evaluation step both runs recorded (step 0 excluded), and
    against StepLR's best value so far.  ``from_step``: the first step from which the ratio stays
    >= ``factor`` at every later common point (None if the last point is below it)."""
    b = {r["step"]: r["test_mse"] for r in hb}
    pts = [(r["step"], b[r["step"]] / r["test_mse"]) for r in ha if r["step"] > 0 and r["step"] in b]
    if not pts:
        return {"points": 0}
    best_so_far = dict(zip((r["step"] for r in hb), itertools.accumulate((r["test_mse"] for r in hb), min)))
    from_step = None
    for st, q in reversed(pts):
        if q < factor:
            break
        from_step = st
    qs = [q for _, q in pts]
    last, ratio_last = pts[-1]
    return {"points": len(pts), "at_least": sum(q >= factor for q in qs), "factor": factor,
            "min": min(qs), "median": statistics.median(qs), "from_step": from_step, "last_step": last,
            "ratio_last": ratio_last, "ratio_last_vs_best": ratio_last * best_so_far[last] / b[last]}


def summary_table(runs, pairs=PAIRS, factor=100.0) -> str:
    lines = [f"| recipe run / StepLR run | common eval points | >= {factor:g}x | min | median | "
             f">= {factor:g}x at every point from step | ratio at last common step | vs StepLR's best so far |",
             "|---|---|---|---|---|---|---|---|"]
    for a, b in pairs:
        if a not in runs or b not in runs:
            continue
        s = ratio_summary(runs[a], runs[b], factor=factor)
        if not s["points"]:
            continue
        lines.append(f"| {a} / {b} | {s['points']} | {s['at_least']} | {s['min']:.3g}x | {s['median']:.3g}x | "
                     f"{s['from_step'] if s['from_step'] is not None else 'never'} | "
                     f"{s['ratio_last']:.3g}x (step {s['last_step']}) | {s['ratio_last_vs_best']:.3g}x |")
    return "\n".join(lines)


def parser() -> Parser:
    ap = Parser(prog="python -m numerics.training.report", description=__doc__,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", type=Path, help="folder of runs: ROOT/<run>/history.json (e.g. out/train)")
    ap.add_argument("--docs", type=Path, default=Path("docs"),
                    help="folder the figures are written to (default docs; created if missing, not a file)")
    return ap


def main(argv=None) -> int:
    return run_main(_main, argv)


def _main(argv) -> int:
    a = parser().parse_args(argv)
    runs = check_runs(a.root)
    output_dir("--docs", a.docs)
    grad = {k: v for k, v in runs.items() if k.startswith("grad_")}
    if grad:
        plot_compare(grad, a.docs / "training_gradient.png",
                     title="explicit gradient task (N=20, D=5): recipe vs StepLR Adam")
    mul = {k: v for k, v in runs.items() if k.startswith(("mul_", "mulr_"))}
    if mul:
        import matplotlib.pyplot as plt  # the Agg backend: set by .figures

        fig, ax = plt.subplots(figsize=(6, 4.2))
        series = (("mul", "StepLR, float64, 3000 steps", "C0"), ("mulr", "recipe, float32, 5 min", "C1"))
        for prefix, what, colour in series:
            for arch, mk in (("baseconv", "o-"), ("transformer", "s--")):
                pts = sorted((int(k.rsplit("_L", 1)[1]), min(r["test_mse"] for r in v))
                             for k, v in mul.items()
                             if k.startswith(f"{prefix}_{arch}_L") and k.rsplit("_L", 1)[1].isdigit())
                if pts:
                    ax.semilogy([p[0] for p in pts], [p[1] for p in pts], mk, color=colour,
                                label=f"{arch} ({what})")
        ax.set_xticks([1, 2, 4])
        finish_axes(ax, "layers", "best test MSE", "MULTIPLY (N=20, D=10)", legend_size=7)
        save_closed(fig, a.docs / "training_multiply.png")
    print(table(runs, a.root))
    print()
    print(ratio_table(runs))
    print()
    print(summary_table(runs))
    return 0


if __name__ == "__main__":
    from polyverify.plumbing.cli import exit_with

    exit_with(main)
