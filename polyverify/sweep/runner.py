"""The runner: :func:`run_grid` runs every cell of a grid on a Dask cluster, one task a cell,
writes each record as it finishes and the table at the end, and resumes from the records of an
earlier run."""
from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
import time
from pathlib import Path

from polyverify.plumbing.cli import atomic_write_text, interactive, one_line, output_dir

from .base import (CONNECT_TIMEOUT_MAX_S, CONNECT_TIMEOUT_S, JOBQUEUE_CONNECT_TIMEOUT_MAX_S, JOBQUEUE_CONNECT_TIMEOUT_S,
                   SweepInputError, SweepResult, finite_number, now, canonical, cell_id, csv_text, load_cell)
from .cluster import (check_scheduler, dashboard, local_cluster, resource_rule, warn_unoffered, worker_resources,
                      check_out, check_resources, check_written_file, default_workers, local_cluster_config,
                      probe_scheduler, read_scheduler_file)
from .jobqueue import JobqueueSpec, await_first_worker, check_submit_command, read_jobqueue_config
from .worker import attempts_file
from .versions import write_record, check_record, check_worker_versions, code_version, default_preload, record_digest

# ------------------------------------------------------------------ progress

class _Reporter:
    """A tqdm bar over cells on a terminal (failures printed above it), a plain line per finished
    cell otherwise, nothing with ``enabled`` False."""

    def __init__(self, total: int, name: str, enabled: bool | None, stream=None):
        self.stream = stream or sys.stderr
        self.enabled = True if enabled is None else enabled
        self.total, self.name, self.done, self.failed = total, name, 0, 0
        self.bar = None
        if self.enabled and interactive(self.stream) and total:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=name, unit="cell", file=self.stream, dynamic_ncols=True)

    def say(self, line: str) -> None:
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.write(line, file=self.stream)
        else:
            print(line, file=self.stream, flush=True)

    def cell(self, rec: dict) -> None:
        self.done += 1
        self.failed += rec["status"] != "ok"
        cfg = ", ".join(f"{k}={v}" for k, v in rec["config"].items())
        if len(cfg) > 120:
            cfg = cfg[:117] + "..."
        line = f"{self.name}: [{self.done}/{self.total}] {rec['status']} {rec['id']} ({cfg}) "
        if finite_number(rec.get("wall_s")):  # a cell lost with its worker has no times
            line += f"{rec['wall_s']:.2f} s wall, {rec.get('cpu_s') or 0.0:.2f} s CPU on {rec.get('worker')}"
        else:
            line += "no time (lost with its worker)"
        if (rec.get("attempt") or 1) > 1:  # the scheduler (or the driver) ran it again after a lost worker
            line += f" [run {rec['attempt']}: rerun after a lost worker]"
        if rec["status"] != "ok":
            line += f": {rec['error']}"
        if self.bar is not None:
            if rec["status"] != "ok":
                self.bar.write(line, file=self.stream)
            self.bar.update(1)
            self.bar.set_postfix_str(f"failed={self.failed}")
        elif self.enabled:
            print(line, file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


# ------------------------------------------------------------------ the runner

def check_configs(cell: str, configs) -> list[str]:
    """The cell ids of ``configs`` (a list of dicts, no two the same cell), else a SweepInputError."""
    if not isinstance(configs, (list, tuple)):
        raise SweepInputError(f"configs must be a list of dicts, got {type(configs).__name__}")
    ids, seen = [], {}
    for i, c in enumerate(configs):
        if not isinstance(c, dict):
            raise SweepInputError(f"config {i} is a {type(c).__name__}, not a dict")
        cid = cell_id(cell, c)
        if cid in seen:
            raise SweepInputError(f"config {i} is the same cell as config {seen[cid]}: {canonical(c)[:200]}")
        seen[cid] = i
        ids.append(cid)
    return ids

def run_grid(cell: str, configs: list[dict], out_dir, *, workers: int | None = None, scheduler: str | None = None,
             retries: int = 1, progress: bool | None = None, name: str = "sweep",
             on_start=None, connect_timeout: float | None = None, preload=None,
             warn=None, scheduler_file=None, jobqueue=None, jobs: int = 1, resources=None) -> SweepResult:
    """Run ``cell`` (``"package.module:function"``, a top-level ``f(config: dict) -> dict``) on
    every config, one Dask task each, and write ``out_dir/cells/<id>.json`` as each finishes and
    ``out_dir/results.jsonl``, ``results.csv`` and ``sweep.json`` at the end (module docstring).

    ``workers``: worker processes of the in-process LocalCluster (default: the cores this process
    may use), one thread each; ``scheduler``: the address of a running Dask scheduler instead;
    ``retries``: how often a cell lost with its worker is run again; ``progress``: None (a bar on
    a terminal, a line per cell otherwise), True or False.  Cells already finished (``ok``) in
    ``out_dir`` are read back, not run, when their record is this cell's (its id, cell and config),
    was made by this code (:func:`code_version`) and is whole (:func:`check_record`); any other is
    computed again, with a warning line on stderr (``warn``: a function taking the line instead).
    Failed cells run again.  ``connect_timeout``: seconds for ``scheduler`` to answer as a Dask
    scheduler (:func:`probe_scheduler`; default :data:`CONNECT_TIMEOUT_S`, at most
    :data:`CONNECT_TIMEOUT_MAX_S`), or for a batch cluster (``jobqueue``) to submit its jobs and give
    its first worker (:func:`await_first_worker`; default :data:`JOBQUEUE_CONNECT_TIMEOUT_S`, at
    most :data:`JOBQUEUE_CONNECT_TIMEOUT_MAX_S`); ``preload``: the modules each worker imports as
    it starts (default: :func:`default_preload`), so that no cell's time counts an import.  Bad arguments, and a
    scheduler that cannot be reached, raise :class:`SweepInputError` (a ValueError) before anything
    is started or written.

    ``scheduler_file``: the JSON file ``dask scheduler --scheduler-file`` writes, instead of
    ``scheduler`` (:func:`read_scheduler_file`).  Before any cell is submitted to an existing
    scheduler, every worker's code version must be this driver's (:func:`check_worker_versions`);
    a worker that joins later and differs fails each cell it is given (:func:`execute_cell`).
    ``jobqueue``: a batch cluster (a :class:`JobqueueSpec` or the path of its config file,
    :func:`read_jobqueue_config`) started here with ``jobs`` jobs, instead of the local cluster: a
    submission that fails (``sbatch`` exits non-zero: its stderr in the message) or no worker within
    ``connect_timeout`` is a :class:`SweepInputError`, raised before anything is written, the jobs
    cancelled.
    ``resources``: the Dask worker resources each cell asks for -- None (:func:`cell_resources`:
    ``{"GPU": 1}`` for a cell on a GPU), one dict for every cell, or a function of the config;
    used on an existing scheduler and a batch cluster (on the local cluster every worker shares
    this machine's devices, and the resources are not asked for).
    """
    t_start = time.perf_counter()
    load_cell(cell)
    ids = check_configs(cell, configs)
    scheduler, where_scheduler, jobqueue, cell_res, connect_timeout = _check_run_arguments(
        configs, workers, scheduler, retries, jobs, resources, scheduler_file, jobqueue, connect_timeout)
    preload = default_preload(cell) if preload is None else list(preload)
    out = check_out(out_dir)
    cells = out / "cells"
    version = code_version(cell)
    if warn is None:
        def warn(line):
            print(line, file=sys.stderr, flush=True)

    records = _finished_records(cell, ids, configs, cells, version, name, warn)
    resumed = set(records)
    todo = [(i, cid) for i, cid in enumerate(ids) if cid not in records]
    rep = _Reporter(len(todo), name, progress)
    cluster_info = _cluster_info(scheduler, scheduler_file, jobqueue, jobs)
    cpu = 0.0
    client = cluster = None
    settings = contextlib.ExitStack()
    try:
        if todo and scheduler is not None:
            client = _connect(scheduler, where_scheduler, connect_timeout, cell, version)
        out = output_dir("--out", out)
        if todo and client is None:
            cluster = _start_cluster(jobqueue, jobs, workers, retries, settings)
            from distributed import Client

            client = Client(cluster)
            if jobqueue is not None:  # before anything is written: the jobs submitted, a worker there
                await_first_worker(client, cluster, jobqueue, jobs, connect_timeout,
                                   say=lambda line: rep.say(f"{name}: {line}"))
        from polyverify.plumbing.cli import make_folder  # output_dir only checks; made here, removed on Ctrl-C if unfilled

        make_folder(cells)
        if not todo:
            rep.say(f"{name}: all {len(ids)} cells finished earlier in {out}; nothing to run")
        else:
            cpu = _announce_and_run(client, cluster, cell, configs, ids, todo, cells, records, resumed, rep, name,
                                    version, scheduler, jobqueue, jobs, retries, preload, cell_res, cluster_info,
                                    on_start, warn)
    finally:
        rep.close()
        _close(client, cluster, settings)
    return _write_tables(out, name, cell, version, ids, records, resumed, len(todo), cpu, cluster_info, t_start)


def _cluster_info(scheduler, scheduler_file, jobqueue, jobs) -> dict:
    """What ``sweep.json`` and ``on_start`` are told of the cluster before it is started."""
    cluster_info: dict = {"scheduler": scheduler, "workers": None, "threads": None, "dashboard": None}
    if scheduler_file is not None:
        cluster_info["scheduler_file"] = str(scheduler_file)
    if jobqueue is not None:
        cluster_info.update(jobqueue=jobqueue.path, system=jobqueue.system, jobs=jobs,
                            job_cores=jobqueue.options["cores"], job_processes=jobqueue.options["processes"],
                            job_memory=jobqueue.options["memory"])
    return cluster_info


def _announce_and_run(client, cluster, cell, configs, ids, todo, cells, records, resumed, rep, name, version,
                      scheduler, jobqueue, jobs, retries, preload, cell_res, cluster_info, on_start, warn) -> float:
    """On a connected client: describe the cluster, say what runs where, warn of resources no worker
    offers, call ``on_start``, and run the cells still to do; the CPU seconds they took."""
    ws = _describe_cluster(client, cluster, preload, cluster_info)
    rep.say(f"{name}: {len(ids)} cells, {len(resumed)} finished earlier, {len(todo)} to run on "
            f"{_where(jobqueue, jobs, scheduler, cluster_info)}"
            + (f"; dashboard {cluster_info['dashboard']}" if cluster_info["dashboard"] else ""))
    asked = {} if (cluster is not None and jobqueue is None) else \
        {i: r for i, r in enumerate(cell_res) if r and ids[i] not in records}
    if asked and scheduler is not None:
        warn_unoffered(asked, ws, name, scheduler, warn)
    if on_start is not None:
        on_start(cluster_info)
    # the local cluster: no more cells submitted than its threads, so that a worker that dies takes
    # only the cell it was running (the scheduler hands a worker every task it is given, not one
    # at a time, when a grid's first tasks arrive)
    slots = (None if scheduler else jobs * jobqueue.threads if jobqueue is not None
             else max(1, cluster_info["threads"] or 1))
    return _run(client, cell, configs, todo, cells, records, rep, retries if scheduler else 0, name, version,
                slots, asked)


def _check_run_arguments(configs, workers, scheduler, retries, jobs, resources, scheduler_file, jobqueue,
                         connect_timeout) -> tuple:
    """run_grid's arguments checked before anything is started or written: ``(scheduler, how the
    errors name it, the JobqueueSpec or None, each cell's resources, the connect timeout)``."""
    given = [n for n, v in (("--scheduler", scheduler), ("--scheduler-file", scheduler_file),
                            ("--jobqueue", jobqueue)) if v is not None]
    if len(given) > 1:
        raise SweepInputError(f"{' and '.join(given)}: give one place to run the cells")
    if workers is not None:
        if given:
            raise SweepInputError(f"--workers sizes the local cluster; it cannot be combined with {given[0]}")
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise SweepInputError(f"--workers must be an integer >= 1, got {workers!r}")
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise SweepInputError(f"--retries must be an integer >= 0, got {retries!r}")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise SweepInputError(f"--jobs must be an integer >= 1, got {jobs!r}")
    rule = resource_rule(resources)
    cell_res = [check_resources(rule(c), f"config {i}") for i, c in enumerate(configs)]
    where_scheduler = None
    if scheduler_file is not None:
        scheduler = read_scheduler_file(scheduler_file)
        where_scheduler = f"--scheduler-file {scheduler_file} ({scheduler})"
    if scheduler is not None:
        check_scheduler(scheduler)
    if jobqueue is not None:
        if not isinstance(jobqueue, JobqueueSpec):
            jobqueue = read_jobqueue_config(jobqueue, {k for r in cell_res if r for k in r})
        else:
            needs = {k for r in cell_res if r for k in r}
            offered = worker_resources(jobqueue.options.get("worker-extra-args"))
            if needs - set(offered):
                raise SweepInputError(f"jobqueue config {jobqueue.path}: cells ask for the worker resource(s) "
                                      f"{', '.join(sorted(needs - set(offered)))} and the jobs' workers offer none")
        check_submit_command(jobqueue)
    default, most = ((JOBQUEUE_CONNECT_TIMEOUT_S, JOBQUEUE_CONNECT_TIMEOUT_MAX_S) if jobqueue is not None
                     else (CONNECT_TIMEOUT_S, CONNECT_TIMEOUT_MAX_S))
    if connect_timeout is None:
        connect_timeout = default
    if not finite_number(connect_timeout) or not 0 < connect_timeout <= most:
        raise SweepInputError(f"--connect-timeout must be a number of seconds in (0, {most:g}]"
                              f"{' with --jobqueue' if jobqueue is not None else ''}, got {connect_timeout!r}")
    return scheduler, where_scheduler, jobqueue, cell_res, connect_timeout


def _finished_records(cell, ids, configs, cells: Path, version: dict, name: str, warn) -> dict[str, dict]:
    """The records of an earlier run that can be reused (:func:`check_record`); a warning line for
    each finished file that cannot (ten at the most, then their count)."""
    check_record_paths(cells, ids)
    records: dict[str, dict] = {}
    stale: list[str] = []
    for cid, config in zip(ids, configs):
        rec, why = check_record(cells / f"{cid}.json", cell, cid, config, version)
        if rec is not None:
            records[cid] = rec
        elif why is not None:
            stale.append(f"cells/{cid}.json {why}")
    for line in stale[:10]:
        warn(f"warning: {name}: {line}; computing the cell again")
    if len(stale) > 10:
        warn(f"warning: {name}: {len(stale) - 10} more finished cell file(s) cannot be reused; computing them again")
    return records


def check_record_paths(cells: Path, ids) -> None:
    """Every cell's record path (``cells/<id>.json``) is a regular file or nothing, else a
    :class:`SweepInputError` before any work (:func:`check_written_file`)."""
    if not cells.is_dir():
        return
    for cid in ids:
        check_written_file(cells / f"{cid}.json", f"--out {cells.parent}: cells/{cid}.json",
                           "the cell's record is written there")


def _connect(scheduler: str, where_scheduler, connect_timeout: float, cell: str, version: dict):
    """A client of the running scheduler, which answered as one, every worker running this code."""
    probe_scheduler(scheduler, connect_timeout, where=where_scheduler)
    from distributed import Client

    try:
        client = Client(scheduler, timeout=f"{connect_timeout}s")
    except Exception as e:  # noqa: BLE001 -- it answered the probe; anything now is a connection failure
        raise SweepInputError(f"{where_scheduler or '--scheduler ' + scheduler}: cannot connect "
                              f"({type(e).__name__}: {one_line(e)[:160]})") from None
    # before anything is written or submitted: every worker runs this driver's code
    check_worker_versions(client, cell, version)
    return client


def _start_cluster(jobqueue, jobs: int, workers, retries: int, settings: contextlib.ExitStack):
    """The batch cluster (``jobs`` jobs) or the local one, its Dask settings held in ``settings``."""
    import dask
    import distributed  # noqa: F401 -- its defaults loaded first: leaving dask.config.set
    # deletes every key that did not exist when it was entered

    settings.enter_context(dask.config.set(local_cluster_config(retries)))
    if jobqueue is not None:
        # held while the cluster lives: each job reads the config as it is made
        settings.enter_context(dask.config.set(jobqueue.dask_config()))
        cluster = jobqueue.make_cluster()
        cluster.scale(jobs=jobs)
        return cluster
    return local_cluster(workers or default_workers(), settings)


def _describe_cluster(client, cluster, preload: list[str], cluster_info: dict) -> dict:
    """The workers' preload plugin registered, and ``cluster_info`` filled in; the workers."""
    t_import = time.perf_counter()
    if preload:
        # the class made by the importable module (not __main__'s copy), so workers unpickle it by reference
        client.register_plugin(importlib.import_module("polyverify.sweep.worker")._plugin_class()(preload))
    info = client.scheduler_info()
    ws = info.get("workers") or {}
    cluster_info.update(workers=len(ws), threads=sum(w.get("nthreads", 0) for w in ws.values()),
                        dashboard=dashboard(client, local=cluster is not None),
                        address=client.scheduler.address, preload=preload,
                        preload_s=time.perf_counter() - t_import)
    return ws


def _where(jobqueue, jobs: int, scheduler, cluster_info: dict) -> str:
    if jobqueue is not None:
        o = jobqueue.options
        return (f"{jobs} {jobqueue.system} job(s) of {o['cores']} core(s), {o['memory']} ({o['processes']} "
                f"worker process(es) each; {cluster_info['workers']} connected so far) from {jobqueue.path}")
    if scheduler:
        return f"the scheduler at {scheduler}"
    return f"a local cluster of {cluster_info['workers']} worker process(es), 1 thread each"


def _close(client, cluster, settings: contextlib.ExitStack) -> None:
    if isinstance(sys.exc_info()[1], KeyboardInterrupt):
        # Ctrl-C: the command ends in the one line `interrupted`; what the client's and the
        # cluster's background tasks log while they are torn down mid-flight
        # (CommClosedError: ConnectionPool closing, ...) is not news to the user
        import logging

        for logger in ("distributed", "tornado", "asyncio"):
            logging.getLogger(logger).setLevel(logging.CRITICAL + 1)
    if client is not None:
        with contextlib.suppress(Exception):
            client.close()
    if cluster is not None:
        with contextlib.suppress(Exception):
            cluster.close()
    settings.close()


def _write_tables(out: Path, name: str, cell: str, version: dict, ids, records, resumed, ran: int, cpu: float,
                  cluster_info: dict, t_start: float) -> SweepResult:
    """``results.jsonl``, ``results.csv`` and ``sweep.json``, and the result."""
    rows = []
    for i, cid in enumerate(ids):
        rows.append({"index": i, **records[cid], "resumed": cid in resumed})
    failed = sum(r["status"] != "ok" for r in rows)
    files = [str(out / "results.jsonl"), str(out / "results.csv"), str(out / "sweep.json")]
    atomic_write_text(out / "results.jsonl", "".join(json.dumps(r, allow_nan=False) + "\n" for r in rows))
    atomic_write_text(out / "results.csv", csv_text(rows))
    wall = time.perf_counter() - t_start
    atomic_write_text(out / "sweep.json", json.dumps(_summary(out / "sweep.json", name, cell, version, rows, ran,
                                                              len(resumed), failed, wall, cpu, cluster_info),
                                                     indent=1, allow_nan=False) + "\n")
    return SweepResult(rows=rows, failed=failed, skipped=len(resumed), out_dir=out, files=files, wall_s=wall,
                       cpu_s=cpu, cluster=cluster_info)


def _summary(path: Path, name, cell, version, rows, ran, skipped, failed, wall, cpu, cluster_info) -> dict:
    """``sweep.json``: the counts; ``cells_wall_s`` and ``cells_cpu_s``, the sums over every cell's
    record (those finished in earlier runs included, so a rerun with nothing to do reports what
    the grid cost, not nothing); ``wall_s`` and ``ran_cells_cpu_s`` of this run; ``runs``, one
    entry per run into this folder (the earlier ones read from the previous ``sweep.json``)."""
    runs = []
    with contextlib.suppress(OSError, ValueError, AttributeError, TypeError):
        # only a regular file is read (check_out refuses anything else there before the run; never a FIFO's wait)
        prev = json.loads(path.read_text()) if path.is_file() else {}
        runs = [r for r in prev.get("runs", []) if isinstance(r, dict)]
    runs = (runs + [{"finished": now(), "ran": ran, "failed": failed, "wall_s": wall, "cells_cpu_s": cpu,
                     "cluster": cluster_info, "argv": sys.argv[1:]}])[-100:]
    timed = [r for r in rows if finite_number(r.get("wall_s"))]
    return {"name": name, "cell": cell, "code_version": version, "cells": len(rows), "ran": ran, "skipped": skipped,
            "failed": failed, "cells_wall_s": sum(r["wall_s"] for r in timed),
            "cells_cpu_s": sum(r["cpu_s"] for r in timed if finite_number(r.get("cpu_s"))),
            "cells_timed": len(timed), "wall_s": wall, "ran_cells_cpu_s": cpu, "cluster": cluster_info,
            "finished": now(), "argv": sys.argv[1:], "runs": runs}


def _run(client, cell, configs, todo, cells: Path, records, rep: _Reporter, client_retries: int, name: str,
         version: dict, slots: int | None = None, resources: dict | None = None) -> float:
    """Submit the cells (all at once, or ``slots`` at a time: the next when one is done), write each
    record as it arrives; a cell lost with its worker (after the scheduler's own retries) is
    submitted again up to ``client_retries`` times, then recorded failed, with its error and no
    time.  ``resources``: ``{config index: {name: amount}}``, the worker resources those cells are
    submitted with (``client.submit(..., resources=...)``); each task carries the driver's code
    ``version``, which the worker checks (:func:`execute_cell`)."""
    from distributed import as_completed

    futures = {}
    tries: dict[str, int] = {}
    # by reference, from the importable module (a function of a module run as __main__ cloudpickle would
    # copy by value)
    execute = importlib.import_module("polyverify.sweep.worker").execute_cell

    def submit(i, cid):
        if cid not in tries:  # a count left by an interrupted earlier run is not this run's
            with contextlib.suppress(FileNotFoundError):
                os.unlink(attempts_file(str((cells / cid).resolve())))
        tries[cid] = tries.get(cid, 0) + 1
        extra = {"resources": resources[i]} if resources and resources.get(i) else {}
        f = client.submit(execute, cell, configs[i], str((cells / cid).resolve()), version, pure=False,
                          key=f"{name}-{cid}-{tries[cid]}", **extra)
        futures[f.key] = (i, cid)
        return f

    cpu = 0.0
    waiting = list(todo)
    first = len(waiting) if slots is None else slots
    ac = as_completed([submit(i, cid) for i, cid in waiting[:first]])
    del waiting[:first]
    for fut in ac:
        i, cid = futures.pop(fut.key)
        try:
            rec = fut.result()
        except Exception as e:  # noqa: BLE001 -- the task did not return a record: the worker was lost
            if tries[cid] <= client_retries:
                ac.add(submit(i, cid))
                fut.release()
                continue
            rec = {"id": cid, "cell": cell, "config": configs[i], "status": "failed", "result": None,
                   "error": f"lost: {type(e).__name__}: {one_line(e)}", "traceback": None, "worker": None,
                   "wall_s": None, "cpu_s": None, "cpu_user_s": None, "cpu_sys_s": None, "finished": now()}
            if tries[cid] > 1:
                rec["attempt"] = tries[cid]
        fut.release()
        cpu += rec.get("cpu_s") or 0.0
        if resources and resources.get(i):
            rec["resources"] = resources[i]
        rec["code_version"] = version
        rec["digest"] = record_digest(rec)
        records[cid] = rec
        write_record(cells / f"{cid}.json", rec)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(attempts_file(str((cells / cid).resolve())))
        rep.cell(rec)
        if waiting:
            ac.add(submit(*waiting.pop(0)))
    return cpu
