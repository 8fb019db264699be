"""The sweep runner: grids of runs on Dask (``dask.distributed``), resumable; its command line is
``python -m numerics.sweep`` (the usage: ``numerics/sweep.py``).

A grid is a list of **cells**; a cell is one call ``f(config) -> dict`` of a top-level function
named by its import path ``"package.module:function"`` on one JSON-serialisable ``config``.  Each
cell is one Dask task.  By default the command starts an in-process ``LocalCluster`` sized to the
machine (one worker process per core, one thread each, torch held to one thread; no more cells
submitted than threads, so a worker that dies takes only its own cell), and closes it at the end;
``--scheduler ADDRESS`` uses a running cluster instead (``dask scheduler`` and ``dask worker
ADDRESS`` on the machines: docs/sweeps.md), whose workers need this project installed; it is
checked to answer as a Dask scheduler within ``--connect-timeout`` seconds (:func:`probe_scheduler`),
else exit 2 with one line; ``--scheduler-file FILE`` reads its address from the JSON file ``dask
scheduler --scheduler-file FILE`` writes (:func:`read_scheduler_file`).  ``--jobqueue FILE`` starts
a batch cluster through dask-jobqueue instead (SLURM or PBS, ``--jobs N`` jobs; the config in
dask-jobqueue's own layout, :func:`read_jobqueue_config`; ``--print-job-script`` prints the job
script and submits nothing).  Before a cell is submitted to a scheduler it did not start, the
command checks that every worker runs its code version (:func:`check_worker_versions`), and every
task carries that version, which the worker checks again (:func:`execute_cell`).  A cell on a GPU
asks for the Dask worker resource ``GPU=1`` (:func:`cell_resources`) on such clusters.  Each worker
imports what the cells will import as it starts (:func:`default_preload`, a worker plugin), so no
cell's time counts an import.

**Output folder** (``--out DIR``):

* ``DIR/cells/<id>.json``: one record per cell, written atomically by this command as the cell
  finishes: ``id``, ``cell``, ``config``, ``status`` (``ok`` or ``failed``), ``result`` or
  ``error`` (one line) and ``traceback``, the cell's ``wall_s`` and CPU time ``cpu_s`` (user + sys
  of the thread that ran it and of the child processes it waited for: ``cpu_user_s``,
  ``cpu_sys_s``; None for a cell lost with its worker), the ``worker`` address, host, pid and times,
  ``worker_import_s`` (the worker's imports at start, not in the cell's time), ``code_version``
  (:func:`code_version`) and ``digest`` (:func:`record_digest`).  ``<id>`` is a stable hash of the
  cell's function and its canonical JSON config (:func:`cell_id`).
* ``DIR/cells/<id>/``: files the cell wrote (:func:`cell_dir`: training checkpoints, comparison
  reports); with ``--scheduler`` on several machines, ``DIR`` must be on a file system they share.
* ``DIR/results.jsonl`` (one record a line, in grid order) and ``DIR/results.csv`` (columns
  ``index, id, status, error, resumed, wall_s, cpu_s, worker``, then ``config.KEY`` and
  ``result.KEY`` with nested keys joined by ``.``; lists as JSON text), ``DIR/sweep.json``
  (counts; every cell's timings summed, earlier runs' cells included; this run's; the cluster; one
  entry per run), and what the named sweep draws (plots, the catalogue table).

**Resuming**: rerunning a command with the same ``--out`` skips the cells whose record says
``ok`` and reruns the failed and the missing ones.  A finished record is reused only when it is
this cell's (id, cell and config), was made by the same code version and is whole
(:func:`check_record`); any other is computed again with a warning line on stderr.  **A failing cell** -- an exception (a bad
config included), a result that is not a JSON object or holds NaN or infinity, a cell lost with
its worker more than ``--retries`` times (``lost: KilledWorker: ...``, no time) -- is recorded with
its error and does not stop the grid.

**Exit status**: 0 every cell finished; 1 every cell finished but a verdict failed (``catalogue``:
an entry was not proved); 2 bad input, refused before any work (one ``error:`` line, nothing
written); ``10 + F`` when F cells failed (F capped at 100, so 110 means 100 or more).

Python API: :func:`run_grid` (what the commands call), :func:`execute_cell` (one cell in this
process, as a worker runs it), :func:`cell_dir`.
Rooms: :mod:`.base` (limits, errors, cell ids, the table), :mod:`.versions` (code versions,
records), :mod:`.worker` (one cell on a worker, the preload), :mod:`.cluster` (local cluster,
scheduler, resources), :mod:`.jobqueue` (batch clusters), :mod:`.runner` (:func:`run_grid`),
:mod:`.grid` (grid files, the adapters' helpers), :mod:`.registry` (the named sweeps, registered
by the commands' packages), :mod:`.cli` (the command line).  This package imports nothing of the
project but ``polyverify.plumbing.cli``; the commands it sweeps register themselves from above.
"""
from __future__ import annotations

from .base import (ALLOW, CONNECT_TIMEOUT_S, EXIT_VERDICT, FAILED_BASE, FAILED_CAP, JOBQUEUE_CONNECT_TIMEOUT_S,
                   LARGE_LIMITS, LIMITS, SweepInputError, SweepResult, canonical, cell_dir, cell_id, csv_text, flatten,
                   load_cell, table_csv)
from .cluster import (GPU_RESOURCE, cell_resources, check_out, check_resources, default_workers, local_cluster_config,
                      probe_scheduler, read_scheduler_file)
from .grid import check_lifting_limits, grid_configs, product, read_grid_file, split_list
from .jobqueue import JOB_DAEMON_LINE, JOB_SCRIPT_ADDRESS, JobqueueSpec, check_submit_command, read_jobqueue_config
from .registry import adapter, named_sweeps, register
from .runner import run_grid
from .versions import (PROJECT_PACKAGES, check_record, check_worker_versions, code_version, default_preload,
                       record_digest, version_mismatch, worker_version)
from .worker import execute_cell

__all__ = ["ALLOW", "CONNECT_TIMEOUT_S", "EXIT_VERDICT", "FAILED_BASE", "FAILED_CAP", "GPU_RESOURCE", "JOB_DAEMON_LINE",
           "JOB_SCRIPT_ADDRESS", "JOBQUEUE_CONNECT_TIMEOUT_S", "LARGE_LIMITS", "LIMITS", "PROJECT_PACKAGES",
           "JobqueueSpec", "SweepInputError",
           "SweepResult", "adapter", "canonical", "cell_dir", "cell_id", "cell_resources", "check_out",
           "check_record", "check_lifting_limits", "check_resources", "check_submit_command", "check_worker_versions", "code_version",
           "csv_text", "default_preload", "default_workers", "execute_cell", "flatten",
           "grid_configs", "load_cell", "local_cluster_config", "named_sweeps", "probe_scheduler", "product",
           "read_grid_file", "read_jobqueue_config", "read_scheduler_file", "record_digest", "register", "run_grid",
           "split_list", "table_csv", "version_mismatch", "worker_version"]
