"""Where the cells run: the local cluster, a running scheduler (its address checked to answer as a
Dask scheduler, or read from its scheduler file), the output folder, and the worker resources
(GPU) a cell asks for."""
from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import math
import os
import re
import socket
import stat
import threading
import time
from pathlib import Path

from polyverify.plumbing.cli import one_line

from .base import CONNECT_TIMEOUT_S, SweepInputError, finite_number, file_kind, input_file, not_a_regular_file

def check_scheduler(address: str) -> str:
    """``address`` if it reads as a scheduler address (``tcp://HOST:8786`` or ``HOST:PORT``), else a SweepInputError."""
    if not re.fullmatch(r"[a-z]+://[^\s/][^\s]*|[\w.\-\[\]:]+:\d{1,5}", address or ""):
        raise SweepInputError(f"--scheduler {address!r}: not a scheduler address such as tcp://HOST:8786")
    return address


def check_out(path) -> Path:
    """The output folder can be made or used: checked without creating anything."""
    out = Path(path)
    if str(path) == "":
        raise SweepInputError("--out: empty folder name")
    if out.exists() and not out.is_dir():
        raise SweepInputError(f"--out {out}: is {_kind(out)}, not a folder")
    cells = out / "cells"
    if cells.exists() and not cells.is_dir():
        raise SweepInputError(f"--out {out}: {cells} is {_kind(cells)}, not a folder")
    for name in ("results.jsonl", "results.csv", "sweep.json"):  # written at the end, replacing what is there
        check_written_file(out / name, f"--out {out}: {out / name}", "the sweep writes its table there")
    for anc in [out, *out.absolute().parents]:
        if anc.exists():
            if not anc.is_dir():
                raise SweepInputError(f"--out {out}: {anc} is {_kind(anc)}, not a folder")
            if not os.access(anc, os.W_OK | os.X_OK):
                raise SweepInputError(f"--out {out}: folder {anc} is not writable")
            break
    return out


def check_written_file(p: Path, where: str, why: str) -> None:
    """A file the sweep writes (a record, the table) is a regular file where it exists, else a
    :class:`SweepInputError` ``"<where> is not a regular file (a FIFO); <why> (remove it)"``: a
    folder could not be replaced, and a FIFO or a device would be written through (a FIFO blocks
    the run until something reads it, /dev/null keeps nothing) and never read back."""
    try:
        mode = os.stat(p).st_mode
    except (OSError, ValueError):  # nothing there (a dangling link included: the record replaces it)
        return
    if not stat.S_ISREG(mode):
        raise SweepInputError(f"{where} {not_a_regular_file(mode)}; {why} (remove it)")


def _kind(p: Path) -> str:
    """What ``p`` (which exists) is, in words: ``a file`` for a regular file, else its kind (``a
    character device``, ``a FIFO``)."""
    try:
        mode = p.stat().st_mode
    except OSError:  # pragma: no cover -- gone since it was seen
        return "not a folder"
    kind = file_kind(mode)
    return "a file" if kind == "a regular file" else kind


def local_cluster_config(retries: int) -> dict:
    """The Dask settings of the local cluster, held while it runs (the nanny reads them again when
    it restarts a lost worker): the scheduler reruns a task lost with its worker up to ``retries``
    times; one task at a time per worker thread, so a lost worker takes only the cell it was
    running; workers are not daemonic processes, so a cell may start processes of its own (the
    comparison's exact polynomial view runs in a child).  Each worker's C allocator keeps up to
    :data:`WORKER_MALLOC_BYTES` of freed memory and serves large blocks from its heap: Dask's nanny
    default (``MALLOC_TRIM_THRESHOLD_=65536``) hands freed memory back at once, and a torch cell
    that frees and re-allocates its activations every step then spends much of its time in page
    faults (the MQAR grid's cells: about 45% system time, about twice the wall time)."""
    env = "distributed.nanny.pre-spawn-environ."
    return {"distributed.scheduler.allowed-failures": retries, "distributed.scheduler.worker-saturation": 1.0,
            "distributed.worker.daemon": False,
            env + "MALLOC_TRIM_THRESHOLD_": WORKER_MALLOC_BYTES, env + "MALLOC_MMAP_THRESHOLD_": WORKER_MALLOC_BYTES}


#: freed memory a sweep worker's allocator keeps, and the size from which it maps blocks of their own
WORKER_MALLOC_BYTES = 2 ** 30


def local_cluster(workers: int, settings: contextlib.ExitStack):
    """The in-process LocalCluster, whose worker processes ignore SIGINT from their first
    instruction (:func:`_workers_ignore_sigint`): a terminal's Ctrl-C reaches the whole process
    group, and a worker still importing dask would print a KeyboardInterrupt traceback of its
    own; this process stops alone (one line, ``interrupted``) and closes the cluster."""
    import logging

    from distributed import LocalCluster

    settings.enter_context(_workers_ignore_sigint())
    # the workers log only what is critical: a cell's failure reaches the table through its future,
    # and what a worker logs while the cluster is torn down (a heartbeat to a closed scheduler
    # after Ctrl-C) is not news
    return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                        silence_logs=logging.CRITICAL)

@contextlib.contextmanager
def _workers_ignore_sigint():
    """While the cluster lives, processes that ``multiprocessing`` spawns (Dask's workers, also on
    a restart) start through a two-line ``sh`` wrapper that sets SIGINT to ignored and then
    ``exec``s this Python: an ignored signal stays ignored across ``exec``, and Python installs its
    KeyboardInterrupt handler only where SIGINT had its default action.  POSIX only."""
    import multiprocessing.spawn as spawn
    import shlex
    import tempfile

    if os.name != "posix" or not os.path.exists("/bin/sh"):
        yield
        return
    before = spawn.get_executable()
    with tempfile.TemporaryDirectory(prefix="polyverify-worker-") as d:
        wrapper = Path(d) / "python"
        wrapper.write_text(f"#!/bin/sh\ntrap '' INT\nexec {shlex.quote(os.fsdecode(before))} \"$@\"\n")
        wrapper.chmod(0o755)
        spawn.set_executable(str(wrapper))
        try:
            yield
        finally:
            spawn.set_executable(before)


def dashboard(client, local: bool) -> str | None:
    """The dashboard's address, only when the scheduler serves one that works: it has a dashboard
    port and ``bokeh`` (without it the page only says to install bokeh).  The local cluster's
    scheduler runs in this process; a remote one is asked."""
    with contextlib.suppress(Exception):
        if "dashboard" not in (client.scheduler_info().get("services") or {}):
            return None
        has = _has_bokeh() if local else client.run_on_scheduler(
            lambda: __import__("importlib.util").util.find_spec("bokeh") is not None)
        if has is True:
            return client.dashboard_link
    return None

def probe_scheduler(address: str, timeout: float = CONNECT_TIMEOUT_S, where: str | None = None) -> dict:
    """Check, within ``timeout`` seconds in all, that ``address`` is a Dask scheduler: a TCP connect
    (a refused or unreachable address fails at once), Dask's handshake, then the ``identity`` call,
    whose answer must say ``Scheduler``.  A listener that is something else (the dashboard's HTTP
    port, any server that answers otherwise or not at all) fails with a :class:`SweepInputError`
    naming it (``where``: how the error names the address; default ``--scheduler ADDRESS``) --
    never a hang, never the comm layer's error on a garbage frame length."""
    import asyncio

    from distributed.comm import connect, parse_address
    from distributed.comm.addressing import parse_host_port

    deadline = time.monotonic() + timeout
    where = where or f"--scheduler {address}"
    scheme, loc = parse_address(address)
    if scheme in ("tcp", "tls"):
        try:
            host, port = parse_host_port(loc)
        except ValueError as e:
            raise SweepInputError(f"{where}: not a scheduler address such as tcp://HOST:8786 ({one_line(e)})") from None
        try:
            socket.create_connection((host, port), timeout=timeout).close()
        except socket.timeout:
            raise SweepInputError(f"{where}: cannot connect (no answer within {timeout:g} s)") from None
        except OSError as e:
            raise SweepInputError(f"{where}: cannot connect ({e.strerror or one_line(e)})") from None

    async def identity():
        comm = await connect(address, timeout=max(0.1, deadline - time.monotonic()))
        try:
            await comm.write({"op": "identity", "reply": True})
            return await comm.read()
        finally:
            comm.abort()

    box: dict = {}

    def go():
        try:
            box["ok"] = asyncio.run(asyncio.wait_for(identity(), max(0.1, deadline - time.monotonic())))
        except BaseException as e:  # noqa: BLE001 -- anything (a MemoryError on a garbage frame) means "not Dask"
            box["err"] = e

    th = threading.Thread(target=go, name="polyverify-sweep-probe", daemon=True)
    th.start()
    th.join(max(0.1, deadline - time.monotonic()) + 1.0)
    hint = " (is it the dashboard's or another service's port? a scheduler listens on tcp://HOST:8786 by default)"
    if th.is_alive() or isinstance(box.get("err"), (TimeoutError, asyncio.TimeoutError)):
        raise SweepInputError(f"{where}: no answer as a Dask scheduler within {timeout:g} s{hint}")
    if "err" in box:
        e = box["err"]
        raise SweepInputError(f"{where}: not a Dask scheduler ({type(e).__name__}: {one_line(e)[:160]}){hint}")
    resp = box.get("ok")
    if not isinstance(resp, dict) or resp.get("type") != "Scheduler":
        raise SweepInputError(f"{where}: answered, but not as a Dask scheduler ({str(resp)[:120]}){hint}")
    return resp


# ------------------------------------------------------------------ scheduler files, worker versions, resources

#: the largest scheduler file read (``dask scheduler`` writes a few hundred bytes)
SCHEDULER_FILE_BYTES = 1 << 20


def read_scheduler_file(path) -> str:
    """The address in the JSON file that ``dask scheduler --scheduler-file FILE`` writes as the
    scheduler starts (its ``"address"``), checked as ``--scheduler``'s is; a
    :class:`SweepInputError` naming the file when it does not exist, cannot be read, is not JSON
    or holds no scheduler address.  Nothing is connected to."""
    where = f"--scheduler-file {path}"
    if str(path) == "":
        raise SweepInputError("--scheduler-file: empty file name")
    p = Path(path)
    st = input_file(p, where, missing="not found (dask scheduler --scheduler-file FILE writes it as the scheduler "
                                      "starts)")  # a FIFO or /dev/zero is refused, never read
    try:
        if st.st_size > SCHEDULER_FILE_BYTES:
            raise SweepInputError(f"{where}: larger than {SCHEDULER_FILE_BYTES // 2**20} MiB, not a scheduler file")
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise SweepInputError(f"{where}: cannot read ({one_line(e)})") from None
    try:
        info = json.loads(text)
    except ValueError as e:
        raise SweepInputError(f"{where}: not JSON ({one_line(e)})") from None
    if not isinstance(info, dict) or not isinstance(info.get("address"), str):
        raise SweepInputError(f'{where}: no "address" in it (not a file written by dask scheduler --scheduler-file)')
    address = info["address"]
    try:
        return check_scheduler(address)
    except SweepInputError:
        raise SweepInputError(f"{where}: its address {address!r:.80} is not a scheduler address such as "
                              f"tcp://HOST:8786") from None


#: what a cell that runs on a GPU asks of its worker (a Dask worker resource: dask worker ... --resources GPU=1)
GPU_RESOURCE = {"GPU": 1}


def cell_resources(config: dict) -> dict | None:
    """The Dask worker resources a cell asks for: :data:`GPU_RESOURCE` for a config that runs on a
    GPU -- ``device`` ``cuda`` or ``cuda:N`` (numerics.roundoff's and numerics.train's cells) or
    ``backend`` ``cupy`` (numerics.roundoff) --, else None (any worker)."""
    dev, backend = config.get("device"), config.get("backend")
    if (isinstance(dev, str) and re.fullmatch(r"cuda(:\d+)?", dev)) or backend == "cupy":
        return dict(GPU_RESOURCE)
    return None


def check_resources(res, where: str) -> dict | None:
    """``{name: amount}`` (names as ``dask worker --resources`` takes them, positive finite
    amounts), an empty or None value meaning none; :class:`SweepInputError` otherwise."""
    if res is None or res == {}:
        return None
    if not isinstance(res, dict):
        raise SweepInputError(f"{where}: resources must be a table of name = amount, got {res!r:.80}")
    for k, v in res.items():
        if not isinstance(k, str) or not re.fullmatch(r"[A-Za-z_][\w\-]*", k):
            raise SweepInputError(f"{where}: resource name {k!r:.40} is not a name such as GPU")
        if not finite_number(v) or v <= 0:
            raise SweepInputError(f"{where}: resource {k} must be a positive number, got {v!r:.40}")
    return dict(res)


def resource_rule(resources):
    """run_grid's ``resources``: None (:func:`cell_resources`), one dict for every cell, or a
    function of the config."""
    if resources is None:
        return cell_resources
    if callable(resources):
        return resources
    fixed = check_resources(resources, "resources")
    return lambda config: fixed


def worker_resources(args) -> dict:
    """The resources a ``dask worker`` command line declares (``--resources "GPU=1 MEM=2e9"`` or
    ``--resources=GPU=1``): ``{name: amount}``; ValueError on a malformed one."""
    out: dict = {}
    args = [str(a) for a in args or []]
    for i, a in enumerate(args):
        if a == "--resources":
            if i + 1 >= len(args):
                raise ValueError("--resources without a value")
            text = args[i + 1]
        elif a.startswith("--resources="):
            text = a.split("=", 1)[1]
        else:
            continue
        for item in re.split(r"[\s,]+", text.strip()):
            name, eq, amount = item.partition("=")
            try:
                val = float(amount)
            except ValueError:
                val = float("nan")
            if not eq or not name or not math.isfinite(val) or val <= 0:
                raise ValueError(f"--resources {text!r}: {item!r} is not NAME=AMOUNT")
            out[name] = val
    return out

def warn_unoffered(asked: dict, workers: dict, name: str, scheduler: str, warn) -> None:
    """One warning line per resource the cells ask for that no worker of the scheduler offers
    yet: those cells wait until a worker that offers it joins."""
    offered: dict[str, float] = {}
    for w in workers.values():
        for k, v in (w.get("resources") or {}).items():
            offered[k] = max(offered.get(k, 0), v)
    need: dict[str, list] = {}
    for r in asked.values():
        for k, v in r.items():
            need.setdefault(k, []).append(v)
    for k, vs in sorted(need.items()):
        if offered.get(k, 0) < max(vs):
            warn(f"warning: {name}: {len(vs)} cell(s) ask for the worker resource {k}={max(vs):g} and no worker of "
                 f"{scheduler} offers it yet; they wait for one (dask worker {scheduler} --resources {k}=1)")


def _has_bokeh() -> bool:
    return importlib.util.find_spec("bokeh") is not None


def default_workers() -> int:
    with contextlib.suppress(AttributeError):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)
