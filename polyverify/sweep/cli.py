"""The sweep command line (``python -m numerics.sweep``): ``run GRID`` and one command per named
sweep (:mod:`polyverify.sweep.registry`), every argument checked before any work."""
from __future__ import annotations

import importlib
import importlib.util
import math
import os
import re
import sys
from pathlib import Path

from polyverify.plumbing.cli import Parser, UsageError, check_range

from .base import (ALLOW, CONNECT_TIMEOUT_MAX_S, CONNECT_TIMEOUT_S, EXIT_VERDICT, FAILED_BASE, FAILED_CAP,
                   JOBQUEUE_CONNECT_TIMEOUT_MAX_S, JOBQUEUE_CONNECT_TIMEOUT_S, LARGE_LIMITS, LIMITS, SweepInputError,
                   canonical, load_cell)
from .cluster import resource_rule, check_scheduler, cell_resources, check_out, check_resources, default_workers, read_scheduler_file
from .grid import grid_configs, read_grid_file
from .jobqueue import check_submit_command, read_jobqueue_config
from .registry import adapter, named_sweeps
from .runner import check_configs, check_record_paths, run_grid
from .versions import check_record, code_version

def _common(p: Parser) -> None:
    g = p.add_argument_group("where and how to run")
    g.add_argument("--out", required=True, metavar="DIR",
                   help="output folder: cells/<id>.json as cells finish, then results.jsonl, results.csv, sweep.json "
                        "and plots; rerunning with the same DIR skips the finished cells")
    g.add_argument("--workers", type=int, default=None,
                   help=f"worker processes of the local cluster, one thread each (default: the cores, here "
                        f"{default_workers()}; 1 .. {LIMITS['workers']})")
    g.add_argument("--scheduler", metavar="ADDRESS",
                   help="run on this Dask scheduler (tcp://HOST:8786; see docs/sweeps.md) instead of a local cluster")
    g.add_argument("--scheduler-file", metavar="FILE",
                   help="run on the Dask scheduler whose address is in FILE, the JSON file that dask scheduler "
                        "--scheduler-file FILE writes (instead of --scheduler)")
    g.add_argument("--connect-timeout", type=float, default=None, metavar="SECONDS",
                   help=f"with --scheduler or --scheduler-file: seconds for it to answer as a Dask scheduler, else "
                        f"exit 2 (default {CONNECT_TIMEOUT_S:g}, at most {CONNECT_TIMEOUT_MAX_S:g}); with --jobqueue: "
                        f"seconds for the batch jobs to be submitted and their first worker to connect (the time "
                        f"they wait in the queue included), else the jobs are cancelled and exit 2 (default "
                        f"{JOBQUEUE_CONNECT_TIMEOUT_S:g}, one hour; at most {JOBQUEUE_CONNECT_TIMEOUT_MAX_S:g}, a "
                        f"week); a failed submission (sbatch or qsub exits non-zero) exits 2 at once, with its "
                        f"message")
    g.add_argument("--jobqueue", metavar="FILE",
                   help="run on a batch cluster (SLURM or PBS, through dask-jobqueue) described by FILE (YAML, TOML or "
                        "JSON in dask-jobqueue's config layout: jobqueue.slurm.cores, memory, walltime, ...; see "
                        "docs/sweeps.md); its scheduler runs in this process and its workers in the jobs")
    g.add_argument("--jobs", type=int, default=None, metavar="N",
                   help=f"with --jobqueue: batch jobs to submit (default 1; 1 .. {LIMITS['jobs']})")
    g.add_argument("--print-job-script", action="store_true",
                   help="with --jobqueue: print the job script each batch job would run and exit, submitting and "
                        "writing nothing (every argument checked as for a run)")
    g.add_argument("--preload", default="auto", metavar="MODULES",
                   help="what each worker imports as it starts, so that no cell's time counts an import: auto (the "
                        "cell's module, the project's modules it imports and the packages they use, torch included), "
                        "none, or comma-separated module names")
    g.add_argument("--retries", type=int, default=1,
                   help=f"runs again of a cell lost with its worker, 0 .. {LIMITS['retries']} (default 1)")
    g.add_argument("--list", action="store_true",
                   help="print the cells (id; ok, failed, stale -- a finished file that will be computed again -- or "
                        "missing; config) and exit without running or writing anything")
    g.add_argument("--quiet", action="store_true", help="no progress (default: a bar on a terminal, a line per cell "
                                                      "in a log)")
    g.add_argument("--allow-large", action="store_true",
                   help=f"lift the limits: cells {LIMITS['cells']:,} -> {LARGE_LIMITS['cells']:,}, workers "
                        f"{LIMITS['workers']} -> {LARGE_LIMITS['workers']}, jobs {LIMITS['jobs']} -> "
                        f"{LARGE_LIMITS['jobs']}, and those of the swept command")


EPILOG = (f"Exit status: 0 every cell finished; {EXIT_VERDICT} every cell finished but a verdict failed "
          f"(catalogue: an entry not proved); 2 bad input, refused before any work; {FAILED_BASE} + F when F cells "
          f"failed (F capped at {FAILED_CAP}).  Each failed cell's error is in results.csv and cells/<id>.json.")


def top_parser() -> Parser:
    SWEEPS = named_sweeps()
    p = Parser(prog="python -m numerics.sweep",
               description="Grids of runs on Dask (dask.distributed): one task per cell, resumable, one table. "
                           "See docs/sweeps.md.",
               epilog=EPILOG, usage="python -m numerics.sweep {run,%s} ... [-h]" % ",".join(SWEEPS))
    p.add_argument("command", choices=["run", *SWEEPS],
                   help="run GRID: a grid file; " + "; ".join(f"{k}: {d}" for k, (_, d) in SWEEPS.items())
                   + " (python -m numerics.sweep COMMAND --help)")
    return p


def command_parser(command: str) -> tuple[Parser, object | None]:
    import argparse

    fmt = argparse.RawDescriptionHelpFormatter
    if command == "run":
        p = Parser(prog="python -m numerics.sweep run", epilog=EPILOG, formatter_class=fmt, description=(
            "Run the cells of a grid file.\n\n"
            "The file (TOML, JSON or YAML) names what a cell runs: either sweep = \"roundoff\" (a named sweep:\n"
            "its cells are checked like its command's, and its plots drawn) or cell = \"package.module:function\"\n"
            "(any top-level f(config) -> dict).  'fixed' holds values shared by every cell, 'grid' lists: one\n"
            "cell per combination, 'cells' explicit configs, 'resources' the Dask worker resources every\n"
            "cell asks for on a cluster (resources = {GPU = 1}).  Example:\n\n"
            "    sweep = \"roundoff\"\n    [fixed]\n    n = 20\n    d = 5\n    batch = 64\n"
            "    [grid]\n    arch = [\"baseconv\", \"lsa\"]\n    layers = [31, 301]\n"
            "    dtype = [\"float64\", \"float32\"]\n"))
        p.add_argument("grid", metavar="GRID", help="the grid file (.toml, .json, .yaml)")
        _common(p)
        return p, None
    ad = adapter(command)
    p = Parser(prog=f"python -m numerics.sweep {command}", description=ad.description, epilog=EPILOG)
    g = p.add_argument_group("the grid (comma-separated lists: one cell per combination)")
    ad.add_arguments(g)
    _common(p)
    return p, ad


def main(argv=None) -> int:
    from polyverify.plumbing.cli import run_main

    return run_main(main_usage, argv)


def main_usage(argv) -> int:
    """:func:`_main` with a :class:`SweepInputError` passed on as a plain UsageError: one line, exit
    2, however the SIGINT handler was set when ``run_main`` began (its guard re-yields on a
    ValueError, which a SweepInputError also is)."""
    try:
        return _main(argv)
    except SweepInputError as e:
        raise UsageError(str(e)) from None


_main_usage = main_usage  # (its name before polyverify.sweep)


def _check_where(a, lim: dict, big: bool) -> None:
    """Where and how the cells run: one place, the worker and job counts, the retries, the timeout."""
    given = [n for n, v in (("--scheduler", a.scheduler), ("--scheduler-file", a.scheduler_file),
                            ("--jobqueue", a.jobqueue)) if v is not None]
    if len(given) > 1:
        raise UsageError(f"{' and '.join(given)}: give one place to run the cells")
    if a.workers is not None:
        check_range("--workers", a.workers, 1, lim["workers"], override=None if big else ALLOW)
        if given:
            raise UsageError(f"--workers sizes the local cluster; it cannot be combined with {given[0]}")
    check_range("--retries", a.retries, 0, LIMITS["retries"])
    if a.connect_timeout is not None:
        if not (a.scheduler or a.scheduler_file or a.jobqueue):
            raise UsageError("--connect-timeout applies to --scheduler only (an address given directly or by "
                             "--scheduler-file: seconds for it to answer) and --jobqueue (seconds for the first worker "
                             "of the batch jobs); the local cluster is started here")
        most, mode = ((JOBQUEUE_CONNECT_TIMEOUT_MAX_S, " with --jobqueue") if a.jobqueue
                      else (CONNECT_TIMEOUT_MAX_S, ""))
        if not (math.isfinite(a.connect_timeout) and 0 < a.connect_timeout <= most):
            raise UsageError(f"--connect-timeout must be a number of seconds in (0, {most:g}]{mode}, got "
                             f"{a.connect_timeout:g}")
    if a.jobqueue is None:
        for flag, v in (("--jobs", a.jobs), ("--print-job-script", a.print_job_script or None)):
            if v is not None:
                raise UsageError(f"{flag} applies to --jobqueue only")
    if a.jobs is not None:
        check_range("--jobs", a.jobs, 1, lim["jobs"], override=None if big else ALLOW)
    if a.scheduler:
        check_scheduler(a.scheduler)
    if a.scheduler_file is not None:
        read_scheduler_file(a.scheduler_file)


def _check_preload(text: str) -> list[str] | None:
    """``--preload``: None (auto), [] (none) or module names, each found here."""
    if text == "auto":
        return None
    preload = [] if text == "none" else [m.strip() for m in text.split(",")]
    bad = [m for m in preload if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", m)]
    if bad or not preload and text != "none":
        raise UsageError(f"--preload: not a module name: {(bad or [text])[0]!r} (auto, none, or module names)")
    for m in preload:
        try:
            found = importlib.util.find_spec(m) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise UsageError(f"--preload: no module named {m!r} here")
    return preload


def _grid_file_cells(a, lim: dict, big: bool):
    """``run GRID``: ``(name, cell, configs, resources, the named sweep's adapter or None)``."""
    if getattr(a, "out", None):  # the grid is read, then the table files in --out are replaced
        written = {os.path.realpath(Path(a.out) / n): n for n in ("results.jsonl", "results.csv", "sweep.json")}
        if os.path.realpath(a.grid) in written:
            raise UsageError(f"grid file {a.grid}: the sweep writes {written[os.path.realpath(a.grid)]} in --out "
                             f"{a.out} there, over the grid it reads; copy the grid elsewhere first")
    spec = read_grid_file(a.grid)
    name = str(spec.get("name") or Path(a.grid).stem)
    if not re.fullmatch(r"[\w.\-]{1,64}", name):
        raise UsageError(f"grid file {a.grid}: name {name!r} must be 1 to 64 letters, digits, '.', '-', '_'")
    configs = grid_configs(spec, f"grid file {a.grid}")
    _check_count(len(configs), lim, big)
    ad = None
    if "sweep" in spec:
        sweeps = named_sweeps()
        if spec["sweep"] not in sweeps:
            raise UsageError(f"grid file {a.grid}: unknown sweep {spec['sweep']!r}; choose one of "
                             f"{', '.join(sweeps)}")
        ad = adapter(spec["sweep"])
        configs = [ad.check(c, allow_large=big, where=f"grid file {a.grid}, cell {i}")
                   for i, c in enumerate(configs)]
        cell = ad.cell
    else:
        cell = spec["cell"]
        load_cell(cell)
    resources = None
    extra = check_resources(spec.get("resources"), f"grid file {a.grid}")
    if extra:
        def resources(config, extra=extra):
            return {**(cell_resources(config) or {}), **extra}
    return name, cell, configs, resources, ad  # a named sweep's cells checked as its command's, its plots drawn


def _list_cells(a, cell: str, ids: list[str], configs: list[dict]) -> int:
    """``--list``: each cell's id, state and config; nothing run or written."""
    cells = Path(a.out) / "cells"
    version = code_version(cell)
    for cid, c in zip(ids, configs):
        state = "missing"
        if cells.is_dir():
            rec, why = check_record(cells / f"{cid}.json", cell, cid, c, version)
            if rec is not None:
                state = "ok"
            elif why is not None:
                state = "stale"  # a finished file that will be computed again (run says why)
            elif (cells / f"{cid}.json").exists():
                state = "failed"
        print(f"{cid}  {state:<8} {canonical(c)}")
    return 0


def _report(name: str, res, ad) -> int:
    """The adapter's plots and verdict, the summary line and each failed cell; the exit status."""
    verdict_ok = True
    if ad is not None and hasattr(ad, "finish"):
        files, verdict_ok = ad.finish(res, res.out_dir)
        res.files += files
    print(f"{name}: {len(res.rows)} cells, {res.ran} run, {res.skipped} finished earlier, {res.failed} failed; "
          f"{res.wall_s:.1f} s wall, {res.cpu_s:.1f} s CPU in the cells run; wrote {', '.join(Path(f).name for f in res.files)}"
          f" in {res.out_dir}")
    for r in res.rows:
        if r["status"] != "ok":
            print(f"  failed {r['id']} {canonical(r['config'])[:160]}: {r['error']}")
    if res.failed:
        return res.exit_status()
    return 0 if verdict_ok else EXIT_VERDICT


def _main(argv) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    top = top_parser()
    if not argv or argv[0].startswith("-"):
        top.parse_args(argv)  # --help, or the error naming what is missing
        raise UsageError(f"give a command first: run, {', '.join(named_sweeps())}")
    top.parse_args(argv[:1])
    command = argv[0]
    p, ad = command_parser(command)
    a = p.parse_args(argv[1:])
    big = a.allow_large
    lim = {**LIMITS, **(LARGE_LIMITS if big else {})}
    _check_where(a, lim, big)
    preload = _check_preload(a.preload)
    if command == "run":
        name, cell, configs, resources, ad = _grid_file_cells(a, lim, big)
    else:
        name, resources = command, None
        configs = ad.configs(a)
        _check_count(len(configs), lim, big)
        configs = [ad.check(c, allow_large=big, where=f"cell {i}") for i, c in enumerate(configs)]
        cell = ad.cell
    ids = check_configs(cell, configs)
    check_out(a.out)
    jobqueue = None
    if a.jobqueue is not None:
        rule = resource_rule(resources)
        jobqueue = read_jobqueue_config(a.jobqueue, {k for c in configs for k in (rule(c) or {})})
        if a.print_job_script:
            sys.stdout.write(jobqueue.script if jobqueue.script.endswith("\n") else jobqueue.script + "\n")
            return 0
        if not a.list:
            check_submit_command(jobqueue)
    if a.list:
        check_record_paths(Path(a.out) / "cells", ids)
        return _list_cells(a, cell, ids, configs)
    res = run_grid(cell, configs, a.out, workers=a.workers, scheduler=a.scheduler, retries=a.retries,
                   progress=False if a.quiet else None, name=name,
                   connect_timeout=a.connect_timeout,
                   preload=preload, scheduler_file=a.scheduler_file, jobqueue=jobqueue, jobs=a.jobs or 1,
                   resources=resources)
    return _report(name, res, ad)


def _check_count(n: int, lim: dict, big: bool) -> None:
    if n > lim["cells"]:
        raise UsageError(f"the grid has {n:,} cells, above the limit {lim['cells']:,}"
                         + ("" if big else f" (pass {ALLOW} to allow more)"))
