"""Cells for tests/numerics/test_sweep.py (imported by the Dask workers as
``tests.numerics.sweep_cells:cell``).

``cell(config)`` logs each execution as a new file in ``config["log"]`` (so a test can count
how often each cell ran, across worker processes), then:

* ``"fail_until"``: raises unless the file ``log/<fail_until>`` exists (a cell that fails now and
  succeeds once the test allows it);
* ``"kill"``: on its first execution, kills its own worker process with SIGKILL after a short
  pause (a worker lost mid-grid, as the OOM killer would do it);
* ``"kill_until"``: kills its own worker with SIGKILL on every execution until the file
  ``log/<kill_until>`` exists (a cell that takes its worker down each time it runs);
* ``"report_task"``: returns what the Dask worker running it knows of the task: its resource
  restrictions (what the driver submitted it with) and the worker's own resources;
* ``"sleep"``: waits that many seconds first (a cell still running when the test interrupts the sweep);
* ``"echo"``: returns ``{"value": config["echo"]}`` at once;
* otherwise returns the roundoff cell's result for ``config["roundoff"]``.
"""
from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path


def cell(config: dict) -> dict:
    log = Path(config["log"])
    (log / f"run-{config['i']}-{os.getpid()}-{uuid.uuid4().hex}").touch()
    if "fail_until" in config and not (log / config["fail_until"]).exists():
        raise ValueError(f"cell {config['i']} asked to fail")
    if config.get("kill") and not (log / "killed").exists():
        (log / "killed").touch()
        time.sleep(0.5)  # let the client collect the results the worker already holds
        os.kill(os.getpid(), signal.SIGKILL)
    if "kill_until" in config and not (log / config["kill_until"]).exists():
        os.kill(os.getpid(), signal.SIGKILL)
    if config.get("sleep"):
        time.sleep(config["sleep"])
    if config.get("report_task"):
        from distributed import get_worker

        w = get_worker()
        ts = w.state.tasks[w.get_current_task()]
        return {"restrictions": dict(ts.resource_restrictions or {}), "worker_resources": dict(w.state.total_resources),
                "worker": w.address}
    if "echo" in config:
        return {"value": config["echo"]}
    if config.get("nan"):
        return {"value": float("nan")}
    # imported by name, out of sight of the sweep's import reading (numerics.sweep.default_preload):
    # the test workers then do not import torch and the rest as they start, which these numpy cells
    # never use (tests/adversarial/test_sweep_failures.py checks the preload itself)
    import importlib

    return importlib.import_module("numerics.roundoff").sweep_cell(config["roundoff"])


def runs(log: Path) -> dict[int, int]:
    """How often each cell index ran."""
    out: dict[int, int] = {}
    for p in Path(log).glob("run-*"):
        i = int(p.name.split("-")[1])
        out[i] = out.get(i, 0) + 1
    return out
