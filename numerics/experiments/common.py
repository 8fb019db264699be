"""What every experiment shares: running its grid through the sweep runner, the summary files,
the timing record, number formatting for the generated report.

An experiment is a module of this package with

* ``NAME`` (the command name, e.g. ``"seed004-table1"``), ``TITLE``, ``REFERENCE`` (the paper's
  table / figure);
* ``configs(quick: bool) -> list[dict]``: the grid (``--quick``: a few small cells that check the
  pipeline in CI, not the paper's numbers);
* ``config_of(config: dict, where) -> CellConfig``: a grid's dict (or a record's ``config``) as the
  cell's typed config (:class:`polyverify.plumbing.options.CellConfig`: every key the cell reads with its
  default in one place; an unknown key or a bad value is one line); cells that run on a device and
  under a global deadline derive theirs from :class:`OnDevice`;
* ``cell(config: dict) -> dict``: one cell, a pure function of its config (fixed seeds), run by
  :func:`polyverify.sweep.run_grid` as ``"numerics.experiments.<module>:cell"``; it reads its typed
  config's attributes;
* ``summarise(rows, quick) -> dict``: the grid's records (``SweepResult.rows``) turned into the
  summary: our numbers beside the paper's, cell by cell, and the pass criteria with their verdicts;
* ``table(summary) -> list[dict]``: the flat table (one row per compared number) written as CSV;
* ``plot(summary, path)``: the figure (PNG);
* ``markdown(summary, figure) -> str``: its section of ``docs/experiments.md``; where that section is a
  report module of its own (``<module>_report.py``), its prose is data: the named ``str.format`` templates
  of ``<module>_text.py`` (``TEXT``), filled by the report with the numbers it computes
  (``tests/numerics/test_report_templates.py`` checks the pairing).

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

from polyverify.plumbing.cli import atomic_write_text, make_folder, save_figure
from polyverify.plumbing.options import CellConfig, ConfigError, cell_config, non_negative, option, positive

SUMMARY, TABLE, FIGURE = "summary.json", "table.csv", "figure.png"
#: the sweep runner's per-cell records (one JSON line per cell), what :func:`resummarise` reads
RESULTS = "results.jsonl"
#: the folder, under the results folder, that holds the GPU grids' outputs (``numerics/experiments/gpu.sh``):
#: ``<results>/gpu/<NAME>/summary.json`` beside the CPU run's ``<results>/<NAME>/summary.json``
GPU_DIR = "gpu"


#: the environment variables that carry a global time budget to the cells (the sweep runner's worker
#: processes inherit the environment): the deadline (``time.time()``, seconds) and the worker count
DEADLINE_ENV, WORKERS_ENV = "NUMERICS_EXPERIMENTS_DEADLINE", "NUMERICS_EXPERIMENTS_WORKERS"
#: seconds kept back from the deadline for the summary, the table and the figure after the last cell
MARGIN_S = 15.0
#: a cell whose share of the time left is below this is not started (it fails with "deadline")
MIN_CELL_S = 4.0


@cell_config
class OnDevice(CellConfig):
    """What the grid adds to a cell that trains on a device (:func:`grid_configs`) and shares a global
    deadline (:func:`cell_budget`): the device, the grid it belongs to, and its place among the cells."""
    device: str = "cpu"
    grid: str = option("cpu", choices=("cpu", "gpu"))
    #: the cell's place in the order the cells start, and how many there are (the GPU grids set them)
    order: int = option(0, check=(non_negative, ">= 0"))
    cells: int = option(1, check=(positive, ">= 1"))


def grid_configs(module, quick: bool, grid: str = "cpu", device: str = "cpu") -> list[dict]:
    """``module``'s grid: ``configs(quick)`` (``grid="cpu"``) or ``gpu_configs(quick)`` (``"gpu"``: the
    paper's sizes, ``numerics/experiments/gpu.sh``), each config naming ``device`` unless it is the CPU
    on the CPU grid (so the CPU grid's cell ids stay those of the committed runs).  Each config is read
    by the module's ``config_of`` (where it has one) before any cell runs: ValueError (one line) for a
    bad one, or for a device other than the CPU where its cells have none."""
    if grid == "gpu":
        if not hasattr(module, "gpu_configs"):
            raise ValueError(f"{module.NAME} has no GPU grid")
        out = [{**c, "device": device} for c in module.gpu_configs(quick)]
    elif grid != "cpu":
        raise ValueError(f"grid must be 'cpu' or 'gpu', got {grid!r}")
    else:
        out = [c if device == "cpu" else {**c, "device": device} for c in module.configs(quick)]
    config_of = getattr(module, "config_of", None)
    for i, c in enumerate(out if config_of else []):
        where = f"{module.NAME}{' --quick' if quick else ''} cell {i}"
        typed = config_of({k: v for k, v in c.items() if k != "device"}, where=where)
        if "device" in c and "device" not in typed.keys():
            raise ConfigError(f"--device {device}: {module.NAME}'s cells run on the CPU only")
        config_of(c, where=where)
    return out


def check_device(device: str) -> str:
    """``cpu``, ``cuda`` or ``cuda:N`` that this machine has; raises ValueError (the CLI's one ``error:``
    line) before anything runs."""
    import re

    if device == "cpu":
        return device
    if not re.fullmatch(r"cuda(:\d+)?", device or ""):
        raise ValueError(f"--device must be cpu, cuda or cuda:N, got {device!r}")
    import torch

    if not torch.cuda.is_available():
        raise ValueError(f"--device {device}: torch {torch.__version__} sees no CUDA device on this machine")
    idx = int(device.split(":")[1]) if ":" in device else 0
    if idx >= torch.cuda.device_count():
        raise ValueError(f"--device {device}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return device


def describe_device(device: str) -> dict:
    """What ran a cell: ``{"device": "cpu"}`` or the CUDA card's name (``torch.cuda.get_device_name``),
    its memory and the CUDA version torch was built with."""
    if not str(device).startswith("cuda"):
        return {"device": "cpu"}
    import torch

    props = torch.cuda.get_device_properties(device)
    return {"device": str(device), "name": torch.cuda.get_device_name(device),
            "memory_gib": round(props.total_memory / 2 ** 30, 1), "cuda": torch.version.cuda}


def cell_budget(config: OnDevice | dict) -> float | None:
    """A cell's share of the time left before the global deadline (``DEADLINE_ENV``), or None without
    one.  ``config``: the cell's :class:`OnDevice` config (or its dict, read by ``OnDevice``'s
    defaults).  The cells start in the order of their configs' ``order`` (of ``cells``), ``WORKERS_ENV`` at a
    time, so the cells still to start (this one included) fill ``ceil(left / workers)`` more rounds; this
    cell gets the time left (less ``MARGIN_S``) over those rounds.  Raises RuntimeError ("deadline")
    when that is below ``MIN_CELL_S``: the cell is recorded as failed, not run."""
    import os

    raw = os.environ.get(DEADLINE_ENV)
    if not raw:
        return None
    left = float(raw) - MARGIN_S - time.time()
    workers = max(1, int(os.environ.get(WORKERS_ENV) or 1))
    if isinstance(config, dict):
        config = OnDevice(**{k: config[k] for k in ("order", "cells") if k in config})
    todo = max(1, config.cells - config.order)
    share = left / math.ceil(todo / workers)
    if share < MIN_CELL_S:
        raise RuntimeError(f"deadline: {max(0.0, left):.0f} s left before the global deadline, {share:.1f} s "
                           f"for this cell; not started")
    return share


def run_experiment(module, *, quick: bool, out_dir, workers: int | None = None, progress: bool | None = None,
                   command: str | None = None, device: str = "cpu", grid: str = "cpu",
                   budget: float | None = None, scheduler: str | None = None) -> dict:
    """Run ``module``'s grid (:func:`grid_configs`) through :func:`polyverify.sweep.run_grid`, then write
    the summary, the table and the figure into ``out_dir``.  ``budget``: seconds from now for the whole
    grid (the cells share it, :func:`cell_budget`; the summary is written after the last cell).
    ``scheduler``: the address of a running Dask scheduler whose workers run the cells (instead of a
    local cluster started for this grid).  Returns the summary."""
    import os

    from polyverify.sweep import default_workers, run_grid

    out = Path(out_dir)
    configs = grid_configs(module, quick, grid, device)
    t0 = time.perf_counter()
    env = {}
    if budget is not None:
        env = {DEADLINE_ENV: repr(time.time() + budget), WORKERS_ENV: str(workers or default_workers())}
    saved = {k: os.environ.get(k) for k in (DEADLINE_ENV, WORKERS_ENV)}
    os.environ.update(env)
    try:
        # --quick: no preload (the sweep runner's default computes the cell's module closure, an AST walk of
        # every module it imports, and makes each worker import it before the first cell; a quick run's cell
        # times are not reported, so its first cell pays its own imports)
        res = run_grid(f"{module.__name__}:cell", configs, out, workers=workers, scheduler=scheduler, progress=progress,
                       preload=[] if quick else None,
                       name=module.NAME + (" --grid gpu" if grid == "gpu" else "") + (" --quick" if quick else ""))
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    wall = time.perf_counter() - t0
    summary = module.summarise(res.rows, quick)
    summary["grid"], summary["device"] = grid, describe_device(device)
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
        "device": describe_device(device), "grid": grid, "budget_s": budget,
    }
    write_outputs(module, summary, out)
    return summary


def resummarise(module, out_dir, command: str | None = None) -> dict:
    """Write ``out_dir``'s summary, table and figure again from its cell records (``results.jsonl``, as
    the sweep runner wrote them) with this code's ``module.summarise``, running no cell: for a grid that
    cannot be run again here (the GPU grids), after the summary, the criteria or the figure changed.
    The run record (command, cells, CPU and wall time, machine, device) is the one of the command that
    ran the cells, kept from the old ``summary.json``, with ``resummarised`` (when and how) added.
    Raises ValueError (the CLI's one ``error:`` line) when either file is missing or unreadable."""
    out = Path(out_dir)
    try:
        old = json.loads((out / SUMMARY).read_text())
        rows = [json.loads(line) for line in (out / RESULTS).read_text().splitlines() if line.strip()]
        run = old["run"]
        if not isinstance(run, dict) or not rows or not all(isinstance(r, dict) and "status" in r for r in rows):
            raise ValueError("not what the experiment and the sweep runner write")
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"--resummarise {out}: needs the {SUMMARY} and {RESULTS} of a finished run "
                         f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})") from None
    if run.get("experiment", module.NAME) != module.NAME:
        raise ValueError(f"--resummarise {out}: holds {run.get('experiment')!r}, not {module.NAME}")
    quick = bool(old.get("quick", run.get("quick", False)))
    summary = module.summarise(rows, quick)
    summary["grid"], summary["device"] = old.get("grid", run.get("grid", "cpu")), old.get("device", run.get("device"))
    summary["run"] = {**run, "resummarised": {
        "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": command or f"python -m numerics.experiments {module.NAME} --resummarise --out {out}",
        "rows": len(rows)}}
    write_outputs(module, summary, out)
    return summary


def machine() -> dict:
    """Where the grid ran.  The versions come from the installed distributions' metadata (the same strings
    as ``numpy.__version__`` and ``torch.__version__``), so that writing the summary does not import torch
    into this process, whose cells ran in the workers."""
    from importlib.metadata import PackageNotFoundError, version

    def ver(dist):
        if dist in sys.modules:
            return sys.modules[dist].__version__
        try:
            return version(dist)
        except PackageNotFoundError:  # pragma: no cover - torch and numpy are requirements
            return None

    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count()
    return {"platform": platform.platform(terse=True), "cores": cores, "python": sys.version.split()[0],
            "numpy": ver("numpy"), "torch": ver("torch"),
            "loadavg": [round(x, 2) for x in os.getloadavg()]}


def write_outputs(module, summary: dict, out: Path) -> None:
    from polyverify.sweep import table_csv

    make_folder(out)
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


def gpu_cost_line(summary: dict) -> str:
    """The ``**Cost.**`` line of a GPU run's report section (cells, wall time, budget, the card, the
    machine, when it finished and when its summary was rewritten)."""
    run, dev = summary["run"], summary["device"]
    return (f"**Cost.** {run['cells']} cells ({run['failed']} failed) in {fmt_seconds(run['wall_s'])} of wall time, "
            f"budget {fmt(run.get('budget_s'))} s, on {dev.get('name')} (CUDA {dev.get('cuda')}, "
            f"{dev.get('memory_gib')} GiB), {run['machine']['cores']} CPU cores, torch "
            f"{run['machine']['torch']}; finished {run['finished'][:10]}"
            + (f"; summary rewritten from the cell records on {run['resummarised']['finished'][:10]}"
               if run.get("resummarised") else "") + ".")


def fmt_seconds(s: float) -> str:
    return f"{s:.1f} s" if s < 120 else f"{s / 60:.1f} min"
