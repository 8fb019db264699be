"""``python -m numerics.sweep``: grids of runs on Dask (``dask.distributed``), resumable.

    python -m numerics.sweep run GRID.toml --out DIR            # a grid file (TOML, JSON or YAML)
    python -m numerics.sweep roundoff --archs baseconv,lsa --depths 31,301 --dtypes float64,float32 --out DIR
    python -m numerics.sweep train --models baseconv,lsa --lrs 1e-2,1e-3 --seeds 0,1 --steps 2000 --out DIR
    python -m numerics.sweep compare --learned 'runs/*/weights.safetensors' --construction gd-baseconv --out DIR
    python -m numerics.sweep catalogue --out DIR                # one proof per catalogue entry
    common options: [--workers N | --scheduler ADDRESS | --scheduler-file FILE | --jobqueue FILE [--jobs N]]
                    [--connect-timeout SECONDS] [--print-job-script] [--retries 1]
                    [--preload auto|none|MODULES] [--list] [--quiet] [--allow-large]

The runner itself is the base package's ``polyverify.sweep`` (its docstring: cells, the output
folder, resuming, exit status); the named sweeps are registered by the packages of their commands
(``numerics/sweeps.py``, ``verify/sweeps.py``).  This module is the command, and keeps the
runner's names under ``numerics.sweep`` for the code that imports them from here: setting one of
them here (a test's ``monkeypatch``) sets it in the runner's module that uses it too.
"""
from __future__ import annotations

import sys
import types

import polyverify.sweep as _sweep
from polyverify.plumbing.cli import run_main
from polyverify.sweep import *  # noqa: F401,F403 -- the runner's API, by the names it had here
from polyverify.sweep import base as _base
from polyverify.sweep import cli as _cli
from polyverify.sweep import cluster as _cluster
from polyverify.sweep import grid as _grid
from polyverify.sweep import jobqueue as _jobqueue
from polyverify.sweep import registry as _registry
from polyverify.sweep import runner as _runner
from polyverify.sweep import versions as _versions
from polyverify.sweep import worker as _worker
from polyverify.sweep.cli import command_parser, top_parser  # noqa: F401

#: the runner's modules, in the order a name is looked up
_HOMES = (_sweep, _base, _versions, _worker, _cluster, _jobqueue, _grid, _registry, _runner, _cli)


def main(argv=None) -> int:
    return run_main(_cli.main_usage, argv)


def __getattr__(name):
    """A name of the runner not re-exported above (its private helpers), from the module that has it."""
    for m in _HOMES[1:]:
        try:
            return getattr(m, name)
        except AttributeError:
            continue
    if name == "SWEEPS":  # the named sweeps, {name: (adapter path, summary)}
        return _registry.named_sweeps()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: the runner's own values of the names set here, to put back when they are deleted here (pytest's
#: monkeypatch undoes a setattr on a module without the name in its __dict__ by deleting it)
_ORIGINALS: dict = {}


class _Module(types.ModuleType):
    def __setattr__(self, name, value):
        homes = [m for m in _HOMES if name in vars(m)]
        if homes and name not in vars(self):
            _ORIGINALS.setdefault(name, [(m, vars(m)[name]) for m in homes])
        for m in homes:
            setattr(m, name, value)
        super().__setattr__(name, value)

    def __delattr__(self, name):
        for m, value in _ORIGINALS.pop(name, ()):
            setattr(m, name, value)
        if name in vars(self):
            super().__delattr__(name)


sys.modules[__name__].__class__ = _Module

if __name__ == "__main__":
    from polyverify.plumbing.cli import exit_with

    exit_with(main)
