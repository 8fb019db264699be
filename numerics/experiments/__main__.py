"""``python -m numerics.experiments``: the seeds' experiments at CPU scale (docs/experiments.md).

    python -m numerics.experiments --list
    python -m numerics.experiments NAME [--quick] --out DIR [--workers N] [--export-weights] [--no-progress]
                                   [--device cpu|cuda|cuda:N] [--grid cpu|gpu] [--budget SECONDS]
                                   [--scheduler ADDRESS]
    python -m numerics.experiments NAME --resummarise --out DIR
    python -m numerics.experiments NAME --carry REV [--carry REV ...] --out DIR
    python -m numerics.experiments report [--results docs/experiments] [--out docs/experiments.md]

``NAME`` runs one experiment's grid through the sweep runner (``polyverify.sweep.run_grid``: one
Dask task per cell, resumable: rerunning with the same ``--out`` reruns only the missing or failed
cells) and writes into ``DIR``: the runner's ``cells/``, ``results.jsonl``, ``results.csv`` and
``sweep.json``, then ``summary.json`` (our numbers beside the paper's, the pass criteria, the
configuration, CPU and wall time), ``table.csv`` (one row per compared number) and ``figure.png``.
``--quick`` runs a few small cells that check the pipeline (CI, under a minute), not the paper's
numbers (its workers import what the cells need as they run: no preload, so the first cell's time
includes its imports).  ``--export-weights`` (seed004-table1) also writes every trained model as a toolkit
weight file ``DIR/weights/<variant>-L<layers>-<column>.safetensors`` (``verify.compare`` reads it).

``--device`` trains on that device (default ``cpu``; ``cuda`` needs a CUDA build of torch that sees a
card, checked before anything runs).  ``--grid gpu`` (seed003-mqar, seed000-table7) runs the grid sized
for a GPU, the paper's sizes (``numerics/experiments/gpu.sh`` runs both; with ``--quick`` a tiny version
of it, the CI smoke test of that script).  ``--budget SECONDS``: a global wall-clock budget for the
grid: each cell takes its share of the time left, measures its step time and runs the steps that fit
(at most its configured steps), and stops at the deadline; a cell whose share is too small is not
started (recorded as failed: ``deadline``); the summary is written from the cells that finished.

``--scheduler ADDRESS`` runs the cells on the workers of a running Dask scheduler instead of a local
cluster started for this command (several commands can share one cluster; not with ``--workers`` or
``--budget``).

``--resummarise`` runs no cell: it writes ``DIR``'s ``summary.json``, ``table.csv`` and ``figure.png``
again from the cell records in ``DIR/results.jsonl`` with this code's summary, criteria and figure,
keeping the run record (command, times, machine, device) of the command that ran the cells: for a grid
that cannot be run again here (``docs/experiments/gpu/NAME``, run on a card by ``gpu.sh``).

``--carry REV`` runs no cell: it carries ``DIR/results.jsonl``'s records made by the code of commit ``REV``
(their code version computed from ``REV``'s sources) to this code version, into ``DIR/cells/``, where the
runner then reuses them, only where the code the cell runs is unchanged between ``REV`` and this tree
(``numerics/experiments/carry.py``: every definition the cell function reaches, compared as syntax trees);
each carried record keeps its original version in ``made_by`` and the check in ``carried``.  The one way
to reuse a record made by other code: the runner computes any other again.  Exit 1 where the check refuses
(nothing written).

``report`` generates ``docs/experiments.md`` from ``RESULTS/<NAME>/summary.json`` (the committed
full runs) and, for each experiment's GPU section, ``RESULTS/gpu/<NAME>/summary.json`` where a GPU run
is committed ("not run on a GPU" where not); every number in it comes from those files or is the
paper's, quoted as such.

Exit status: 0 done; 2 bad input (one ``error:`` line, nothing run or written); ``10 + F`` when F
cells failed (the sweep runner's convention; the summary is still written from the others).
"""
from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

from polyverify.plumbing.cli import EXIT_OK, Parser, UsageError, claim_input, exit_with, output_dir, output_file, run_main
from polyverify.plumbing.options import config_class

from . import EXPERIMENTS, load

DEFAULT_RESULTS = Path("docs/experiments")
DEFAULT_REPORT = Path("docs/experiments.md")


def parser() -> Parser:
    p = Parser(prog="python -m numerics.experiments", description=__doc__,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", nargs="?", metavar="NAME",
                   help="an experiment (" + ", ".join(EXPERIMENTS) + ") or 'report'")
    p.add_argument("--list", action="store_true", help="list the experiments and exit")
    p.add_argument("--quick", action="store_true", help="a few small cells: checks the pipeline, not the paper's numbers")
    p.add_argument("--out", metavar="PATH",
                   help="NAME: output folder (required); report: the markdown file (default docs/experiments.md)")
    p.add_argument("--results", metavar="DIR", default=str(DEFAULT_RESULTS),
                   help="report: the folder holding NAME/summary.json (default docs/experiments)")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="worker processes of the local Dask cluster (default: the sweep runner's, one per core)")
    p.add_argument("--export-weights", action="store_true",
                   help="seed004-table1: write each trained model as a toolkit weight file under DIR/weights/")
    p.add_argument("--no-progress", action="store_true", help="no progress lines")
    p.add_argument("--device", default="cpu", metavar="DEV", help="cpu (default), cuda or cuda:N: where the cells train")
    p.add_argument("--grid", default="cpu", choices=("cpu", "gpu"),
                   help="cpu (default): the grid sized for a CPU; gpu: the paper's sizes (seed003-mqar, seed000-table7)")
    p.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                   help="a global wall-clock budget for the grid: cells share it and stop at its end")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="run the cells on a running Dask scheduler's workers (tcp://HOST:PORT) instead of a "
                        "local cluster")
    p.add_argument("--resummarise", action="store_true",
                   help="run no cell: write DIR's summary, table and figure again from DIR/results.jsonl")
    p.add_argument("--carry", action="append", default=None, metavar="REV",
                   help="run no cell: carry DIR/results.jsonl's records made by commit REV's code to this code "
                        "version (DIR/cells/), where the code their cell runs is unchanged (repeatable)")
    return p


#: the command's options, typed: one frozen dataclass built by the command line (``from_args``), its
#: fields and defaults those of :func:`parser` (polyverify.plumbing.options.config_class)
ExperimentsOptions = config_class(parser(), "ExperimentsOptions", module=__name__,
                                  doc="The options of python -m numerics.experiments, typed.")
#: the options that run cells, each with the value that means "not given"
RUN_FLAGS = {"--quick": ("quick", False), "--workers": ("workers", None), "--export-weights": ("export_weights", False),
             "--device": ("device", "cpu"), "--grid": ("grid", "cpu"), "--budget": ("budget", None),
             "--scheduler": ("scheduler", None)}


def main(argv=None) -> int:
    return run_main(_main, argv)


def _main(argv) -> int:
    a = ExperimentsOptions.from_args(parser().parse_args(argv))
    cmd = "python -m numerics.experiments " + " ".join(argv if argv is not None else sys.argv[1:])
    if a.list:
        for name in EXPERIMENTS:
            print(f"{name:<16} {load(name).TITLE}")
        return EXIT_OK
    if a.name is None:
        raise UsageError("name an experiment (" + ", ".join(EXPERIMENTS) + "), 'report', or pass --list")
    if a.name == "report":
        return _report(a)
    if a.name not in EXPERIMENTS:
        raise UsageError(f"unknown experiment {a.name!r}; choose one of {', '.join(EXPERIMENTS)}, or 'report'")
    if a.out is None:
        raise UsageError("--out DIR is required")
    if a.carry is not None:
        return _carry(a, cmd)
    return _resummarise(a, cmd) if a.resummarise else _run(a, cmd)


def _refuse(a, flags, what: str) -> None:
    """A one-line error for the first of ``flags`` given that does not apply to ``what``."""
    for flag in flags:
        dest, unset = RUN_FLAGS.get(flag, ("resummarise", False))
        if getattr(a, dest) != unset:
            raise UsageError(f"{flag} does not apply to {what}")


def _report(a) -> int:
    _refuse(a, [*RUN_FLAGS, "--resummarise"], "'report'")
    if not a.results:
        raise UsageError("--results '': not a folder name")
    results = Path(a.results)
    if not results.is_dir():
        raise UsageError(f"--results {results}: not a folder")
    from .report import summary_paths, write_report

    found = summary_paths(results)
    if not found:  # a report of no experiment would say it was made from these results
        raise UsageError(f"--results {results}: holds no experiment's summary ({', '.join(EXPERIMENTS)}: "
                         f"python -m numerics.experiments NAME --out {results}/NAME writes one)")
    for p in found:
        claim_input("--results", p)  # an --out onto one of them is refused: the report would replace it
    out = output_file("--out", a.out or DEFAULT_REPORT)

    write_report(results, out)
    print(f"wrote {out}")
    return EXIT_OK


def _resummarise(a, cmd: str) -> int:
    _refuse(a, RUN_FLAGS, "--resummarise (it runs no cell)")
    from .common import resummarise

    try:
        summary = resummarise(load(a.name), a.out, command=cmd)
    except ValueError as e:
        raise UsageError(str(e)) from None
    print(f"{a.name}: summary, table and figure written again from the "
          f"{summary['run']['resummarised']['rows']} cell records in {a.out}")
    _print_criteria(summary)
    return EXIT_OK


def _carry(a, cmd: str) -> int:
    _refuse(a, [*RUN_FLAGS, "--resummarise"], "--carry (it runs no cell)")
    out = Path(a.out)
    if not out.is_dir():
        raise UsageError(f"--out {out}: not a folder")
    from .carry import carry

    return carry(load(a.name), out, a.carry, cmd)


def _check_run(a):
    """The run's options checked, and every cell's config read (``common.grid_configs``), before any
    work: the module and the device."""
    if a.scheduler is not None:
        if not re.fullmatch(r"[a-z]+://[^\s/][^\s]*|[\w.\-\[\]:]+:\d{1,5}", a.scheduler):
            raise UsageError(f"--scheduler {a.scheduler!r}: not a scheduler address such as tcp://HOST:8786")
        for flag, bad in (("--workers", a.workers is not None), ("--budget", a.budget is not None)):
            if bad:
                raise UsageError(f"{flag} cannot be combined with --scheduler (the scheduler's workers run the cells)")
    if a.workers is not None and a.workers < 1:
        raise UsageError(f"--workers must be >= 1, got {a.workers}")
    if a.budget is not None and not (math.isfinite(a.budget) and 0 < a.budget <= 86400):
        raise UsageError(f"--budget must be a number of seconds in (0, 86400], got {a.budget:g}")
    module = load(a.name)
    if a.export_weights and not hasattr(module, "export"):
        raise UsageError(f"--export-weights: {a.name} trains no exportable model")
    if a.grid == "gpu" and not hasattr(module, "gpu_configs"):
        raise UsageError(f"--grid gpu: {a.name} has no GPU grid (seed003-mqar and seed000-table7 have)")
    from .common import check_device, grid_configs

    try:
        device = check_device(a.device)
        grid_configs(module, a.quick, a.grid, device)
    except ValueError as e:
        raise UsageError(str(e)) from None
    return module, device


def _run(a, cmd: str) -> int:
    module, device = _check_run(a)
    out = output_dir("--out", a.out)
    from .common import run_experiment

    # a scheduler that does not answer: the sweep runner's SweepInputError (a UsageError), before any work
    summary = run_experiment(module, quick=a.quick, out_dir=out, workers=a.workers,
                             progress=False if a.no_progress else None, command=cmd, device=device,
                             grid=a.grid, budget=a.budget, scheduler=a.scheduler)
    if a.export_weights:
        files = module.export(out)
        print(f"wrote {len(files)} weight files under {out / 'weights'}")
    run = summary["run"]
    dev = summary.get("device") or {}
    print(f"{a.name}: {run['cells']} cells, {run['failed']} failed, CPU {run['cpu_s']:.1f} s, wall {run['wall_s']:.1f} s"
          + (f" on {dev.get('name') or dev.get('device')}" if dev.get("device", "cpu") != "cpu" else "") + "; "
          f"wrote {out / 'summary.json'}, {out / 'table.csv'}, {out / 'figure.png'}")
    _print_criteria(summary)
    return EXIT_OK if not run["failed"] else 10 + min(run["failed"], 100)


def _print_criteria(summary: dict) -> None:
    for c in summary.get("criteria", []):
        state = "not measured" if c["met"] is None else ("met" if c["met"] else "NOT met")
        print(f"  [{state}] {c['text']}")


if __name__ == "__main__":
    exit_with(main)
