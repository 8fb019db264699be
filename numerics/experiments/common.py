"""What every experiment shares: running its grid through the sweep runner, the summary files,
the timing record, number formatting for the generated report.

An experiment is a module of this package with

* ``NAME`` (the command name, e.g. ``"seed004-table1"``), ``TITLE``, ``REFERENCE`` (the paper's
  table / figure);
* ``configs(quick: bool) -> list[dict]``: the grid (``--quick``: a few small cells that check the
  pipeline in CI, not the paper's numbers);
* ``cell(config: dict) -> dict``: one cell, a pure function of its config (fixed seeds), run by
  :func:`numerics.sweep.run_grid` as ``"numerics.experiments.<module>:cell"``;
* ``summarise(rows, quick) -> dict``: the grid's records (``SweepResult.rows``) turned into the
  summary: our numbers beside the paper's, cell by cell, and the pass criteria with their verdicts;
* ``table(summary) -> list[dict]``: the flat table (one row per compared number) written as CSV;
* ``plot(summary, path)``: the figure (PNG);
* ``markdown(summary, figure) -> str``: its section of ``docs/experiments.md``.

:func:`run_experiment` writes, in ``--out DIR``: the sweep runner's ``cells/``, ``results.jsonl``,
``results.csv``, ``sweep.json``, and this package's ``summary.json``, ``table.csv`` and
``figure.png``.
"""
from __future__ import annotations

import json
import math
import os
import platform
import sys
import time
from datetime import datetime, timezone

import numpy as np
from pathlib import Path

from polyverify.cli import atomic_write_text, save_figure

SUMMARY, TABLE, FIGURE = "summary.json", "table.csv", "figure.png"


def run_experiment(module, *, quick: bool, out_dir, workers: int | None = None, progress: bool | None = None,
                   command: str | None = None) -> dict:
    """Run ``module``'s grid through :func:`numerics.sweep.run_grid`, then write the summary,
    the table and the figure into ``out_dir``.  Returns the summary."""
    from numerics.sweep import run_grid

    out = Path(out_dir)
    configs = module.configs(quick)
    t0 = time.perf_counter()
    res = run_grid(f"{module.__name__}:cell", configs, out, workers=workers, progress=progress,
                   name=module.NAME + (" --quick" if quick else ""))
    wall = time.perf_counter() - t0
    summary = module.summarise(res.rows, quick)
    ok = [r for r in res.rows if r.get("status") == "ok"]
    summary["run"] = {
        "experiment": module.NAME, "quick": quick,
        "command": command or f"python -m numerics.experiments {module.NAME}{' --quick' if quick else ''} --out {out}",
        "cells": len(res.rows), "failed": res.failed,
        "failures": [{"config": r["config"], "error": r.get("error")} for r in res.rows if r.get("status") != "ok"],
        "resumed": res.skipped,
        # CPU time (user + sys) of every cell, the resumed ones included: what the grid cost
        "cpu_s": round(sum(r.get("cpu_s", 0.0) for r in ok), 2),
        "cell_wall_s": round(sum(r.get("wall_s", 0.0) for r in ok), 2),
        "wall_s": round(wall, 2),
        "workers": res.cluster.get("workers"),
        "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
    }
    write_outputs(module, summary, out)
    return summary


def machine() -> dict:
    import numpy
    import torch

    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count()
    return {"platform": platform.platform(terse=True), "cores": cores, "python": sys.version.split()[0],
            "numpy": numpy.__version__, "torch": torch.__version__,
            "loadavg": [round(x, 2) for x in os.getloadavg()]}


def write_outputs(module, summary: dict, out: Path) -> None:
    from numerics.sweep import table_csv

    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / SUMMARY, json.dumps(summary, indent=1, allow_nan=False) + "\n")
    atomic_write_text(out / TABLE, table_csv(module.table(summary)))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = module.plot(summary)
    save_figure(fig, out / FIGURE)
    plt.close(fig)


def std_err(xs) -> float | None:
    """Standard error of the mean of ``xs`` (sample standard deviation / sqrt(n)); None below two values."""
    xs = np.asarray(xs, dtype=float)
    return float(xs.std(ddof=1) / math.sqrt(len(xs))) if len(xs) > 1 else None


def rows_ok(rows) -> list[dict]:
    """The finished records (status ok), as ``(config, result)`` merged views."""
    return [r for r in rows if r.get("status") == "ok"]


# ------------------------------------------------------------------ formatting

def fmt(x, digits: int = 3) -> str:
    """A number as the report prints it: 3 significant digits, scientific below 1e-3."""
    if x is None:
        return "–"
    if isinstance(x, str):
        return x
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return str(x)
    if not math.isfinite(x):
        return str(x)
    if x == 0:
        return "0"
    if abs(x) < 1e-3 or abs(x) >= 1e5:
        return f"{x:.{digits - 1}e}"
    return f"{x:.{digits}g}"


def verdict(ok: bool | None) -> str:
    return "not measured" if ok is None else ("**met**" if ok else "**not met**")


def timing_line(summary: dict) -> str:
    r = summary["run"]
    m = r["machine"]
    resumed = (f"; the last invocation took {fmt_seconds(r['wall_s'])} of wall time, {r['resumed']} cells "
               "having finished in earlier ones" if r.get("resumed") else
               f"; the grid took {fmt_seconds(r['wall_s'])} of wall time on {r['workers'] or 0} worker process(es)")
    return (f"{r['cells']} cells ({r['failed']} failed), CPU time (user + sys, all cells) "
            f"{fmt_seconds(r['cpu_s'])}, the cells' wall time summed {fmt_seconds(r['cell_wall_s'])}"
            f"{resumed}; {m['cores']} cores shared with other jobs (load "
            f"average at the end {m['loadavg'][0]}), torch {m['torch']}, finished {r['finished'][:10]}")


def fmt_seconds(s: float) -> str:
    return f"{s:.1f} s" if s < 120 else f"{s / 60:.1f} min"
