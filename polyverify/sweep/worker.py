"""What runs on a worker: one cell (:func:`execute_cell`, its record never an exception) and the
imports each worker makes as it starts (:func:`_preload`, through a worker plugin)."""
from __future__ import annotations

import contextlib
import importlib
import json
import os
import socket
import sys
import time
import traceback

from polyverify.plumbing.cli import one_line

from .base import (CELL_DIR, WORKER_IMPORT_S, jsonable, now, rusage, canonical, cell_id, import_keeping_sigint,
                   load_cell)
from .versions import version_mismatch, worker_version

def execute_cell(cell: str, config: dict, artifacts: str | None = None, expect: dict | None = None) -> dict:
    """Run one cell in this process and return its record (what a worker runs for each task).
    Never raises for a failure of the cell: the record's ``status`` says ``failed`` and ``error``
    names it.  ``expect``: the driver's :func:`code_version` of the cell; when this process's
    (:func:`worker_version`, computed once per process and outside the cell's time) differs, the
    cell is not run and its record fails with ``VersionMismatch: worker ... runs polyverify ...,
    this driver polyverify ...``."""
    rec = {"id": cell_id(cell, config), "cell": cell, "config": config, "status": "failed", "result": None,
           "error": None, "traceback": None, "worker": "local", "host": socket.gethostname(), "pid": os.getpid(),
           "started": now()}
    with contextlib.suppress(Exception):
        from distributed import get_worker

        rec["worker"] = get_worker().address
        if WORKER_IMPORT_S:  # what this worker imported as it started (_PreloadPlugin): not in wall_s
            rec["worker_import_s"] = sum(WORKER_IMPORT_S.values())
    if expect is not None:
        try:
            why = version_mismatch(f"worker {rec['worker']}", worker_version(cell), expect)
        except Exception as e:  # noqa: BLE001 -- a worker that cannot read its sources cannot vouch for them
            why = f"worker {rec['worker']} cannot compute its code version ({type(e).__name__}: {one_line(e)})"
        if why is not None:
            rec.update({"error": f"VersionMismatch: {why}", "wall_s": 0.0, "cpu_user_s": 0.0, "cpu_sys_s": 0.0,
                        "cpu_s": 0.0, "finished": now()})
            return rec
    attempt = count_attempt(artifacts)
    if attempt > 1:
        rec["attempt"] = attempt
    token = CELL_DIR.set(artifacts)
    u0, s0 = rusage()
    t0 = time.perf_counter()
    try:
        fn = load_cell(cell)
        if "torch" in sys.modules:  # one thread per task (torch imported by the cell's module)
            sys.modules["torch"].set_num_threads(1)
        res = fn(json.loads(canonical(config)))  # a fresh copy: the cell may change it
        if not isinstance(res, dict):
            raise TypeError(f"the cell returned a {type(res).__name__}, not a dict")
        res, bad = jsonable(res)
        rec["result"] = res
        if bad is not None:
            rec["error"] = f"non-finite value in the result: {bad}"
        else:
            rec["status"] = "ok"
    except (Exception, SystemExit) as e:  # noqa: BLE001 -- a cell's failure is data, not a crash of the grid
        rec["error"] = f"{type(e).__name__}: {one_line(e)}"
        rec["traceback"] = traceback.format_exc(limit=20)
    finally:
        CELL_DIR.reset(token)
    wall = time.perf_counter() - t0
    u1, s1 = rusage()
    rec.update({"wall_s": wall, "cpu_user_s": u1 - u0, "cpu_sys_s": s1 - s0, "cpu_s": (u1 - u0) + (s1 - s0),
                "finished": now()})
    return rec

def attempts_file(artifacts: str) -> str:
    """The file beside a cell's artifacts folder that counts how often the cell started in this sweep
    run (the driver removes it when the record is written, and before the cell's first submission)."""
    return artifacts.rstrip("/") + ".started"


def count_attempt(artifacts: str | None) -> int:
    """This execution's number among the cell's starts in this sweep run: 1, or more when an earlier
    start ended without a record (its worker was lost and the scheduler or the driver ran the cell
    again).  Counted in :func:`attempts_file`; 1 when there is no folder or it cannot be written."""
    if not artifacts:
        return 1
    path = attempts_file(artifacts)
    try:
        with open(path) as fh:
            n = int(fh.read().strip() or 0) + 1
    except (OSError, ValueError):
        n = 1
    with contextlib.suppress(OSError):
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as fh:
            fh.write(str(n))
        os.replace(tmp, path)  # atomic: a reader sees the old count or the new one
    return n


def _preload(modules) -> None:
    """In a worker, as it starts: import the cells' modules once, so that no cell's wall time
    counts the project's import (torch, FLINT, sympy: seconds); a module that fails to import is
    left for the cell to report.  Each import keeps the worker's SIGINT disposition
    (:func:`~polyverify.sweep.base.import_keeping_sigint`): the local cluster starts its workers with
    SIGINT ignored, so that Ctrl-C reaches only the driver."""
    for m in modules:
        t0 = time.perf_counter()
        try:
            import_keeping_sigint(m)
        except Exception:  # noqa: BLE001 -- the cell's own import reports it as the cell's error
            continue
        WORKER_IMPORT_S[m] = time.perf_counter() - t0
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)


def _plugin_class():
    """:class:`distributed.WorkerPlugin` subclass that runs :func:`_preload` on every worker, those
    started later (a lost worker's replacement) included.  Made on first use (``distributed`` is
    imported only when a sweep runs) and reachable as ``polyverify.sweep.worker._PreloadPlugin`` (module
    ``__getattr__``), so that workers unpickle it by reference."""
    global _PLUGIN
    if _PLUGIN is None:
        from distributed.diagnostics.plugin import WorkerPlugin

        class _PreloadPlugin(WorkerPlugin):
            def __init__(self, modules):
                self.modules = list(modules)
                self.name = "polyverify-sweep-preload-" + "-".join(self.modules)

            def setup(self, worker):
                importlib.import_module("polyverify.sweep.worker")._preload(self.modules)

        _PreloadPlugin.__module__, _PreloadPlugin.__qualname__ = "polyverify.sweep.worker", "_PreloadPlugin"
        _PLUGIN = _PreloadPlugin
    return _PLUGIN


_PLUGIN = None


def __getattr__(name):  # PEP 562: polyverify.sweep.worker._PreloadPlugin, made on first use
    if name == "_PreloadPlugin":
        return _plugin_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
