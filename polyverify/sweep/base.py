"""The sweep runner's vocabulary: limits, errors, the result, a cell (its id, its function, its
folder) and the table (``results.csv``).  Imports nothing beyond the standard library and
``polyverify.plumbing.cli``."""
from __future__ import annotations

import contextlib
import contextvars
import csv
import dataclasses
import hashlib
import importlib
import io
import json
import math
import os
import re
import resource
import stat
from datetime import datetime, timezone
from pathlib import Path

from polyverify.plumbing.cli import UsageError, file_kind, make_folder, one_line  # noqa: F401 (file_kind: re-exported)

#: exit status when F cells failed: FAILED_BASE + min(F, FAILED_CAP)
FAILED_BASE, FAILED_CAP = 10, 100
#: exit status when every cell finished but the sweep's verdict failed (an unproved catalogue entry)
EXIT_VERDICT = 1

LIMITS = {"cells": 10_000, "workers": 256, "retries": 100, "grid_bytes": 16 * 2**20, "jobs": 256}
LARGE_LIMITS = {"cells": 1_000_000, "workers": 4096, "jobs": 4096}
ALLOW = "--allow-large"

#: the running cell's artifact folder (set by the worker around a cell; None outside a cell)
CELL_DIR: contextvars.ContextVar[str | None] = contextvars.ContextVar("polyverify_sweep_cell_dir", default=None)
#: in a worker: seconds each module took to import when the worker started (:class:`_PreloadPlugin`)
WORKER_IMPORT_S: dict[str, float] = {}
#: seconds to wait for a scheduler given by --scheduler to answer as a Dask scheduler, and the most
#: --connect-timeout may give it
CONNECT_TIMEOUT_S, CONNECT_TIMEOUT_MAX_S = 5.0, 600.0
#: seconds to wait for a batch cluster's first worker (--jobqueue: the jobs submitted, queued, started
#: and their first worker connected), and the most --connect-timeout may give it (a week)
JOBQUEUE_CONNECT_TIMEOUT_S, JOBQUEUE_CONNECT_TIMEOUT_MAX_S = 3600.0, 7 * 24 * 3600.0


class SweepInputError(UsageError, ValueError):
    """A bad argument of :func:`run_grid` (a ValueError to API callers; one line, exit 2, to the CLI)."""


@dataclasses.dataclass
class SweepResult:
    """``rows``: one record per config, in config order (the cells/<id>.json records plus
    ``index`` and ``resumed``); ``failed``: how many have status ``failed``; ``skipped``: how many
    were finished in an earlier run and read from disk; ``out_dir``; ``files``: what was written;
    ``wall_s``/``cpu_s``: this call's wall time and the CPU time of the cells it ran."""
    rows: list[dict]
    failed: int
    skipped: int
    out_dir: Path
    files: list[str] = dataclasses.field(default_factory=list)
    wall_s: float = 0.0
    cpu_s: float = 0.0
    cluster: dict = dataclasses.field(default_factory=dict)

    @property
    def ran(self) -> int:
        return len(self.rows) - self.skipped

    def exit_status(self) -> int:
        return 0 if not self.failed else FAILED_BASE + min(self.failed, FAILED_CAP)


# ------------------------------------------------------------------ input files

def not_a_regular_file(mode: int) -> str:
    """The message's end for an input path that exists and is not a regular file: a folder (``is
    a folder, not a file``) or anything else (``is not a regular file (a FIFO)``) -- never
    read: a FIFO would block the command and /dev/zero never end."""
    if stat.S_ISDIR(mode):
        return "is a folder, not a file"
    return f"is not a regular file ({file_kind(mode)})"


def input_file(path, where: str, missing: str = "not found") -> os.stat_result:
    """``path``'s stat (symbolic links followed) when it is a regular file that exists, else a
    :class:`SweepInputError` ``"<where>: <missing>"`` or ``"<where>: is not a regular file (a
    character device)"`` (:func:`not_a_regular_file`)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise SweepInputError(f"{where}: {missing}") from None
    except NotADirectoryError:
        raise SweepInputError(f"{where}: not found (a part of its path is a file, not a folder)") from None
    except (OSError, ValueError) as e:  # a NUL in the name, no permission on the way, a loop of links
        raise SweepInputError(f"{where}: cannot read ({getattr(e, 'strerror', None) or one_line(e)})") from None
    if not stat.S_ISREG(st.st_mode):
        raise SweepInputError(f"{where}: {not_a_regular_file(st.st_mode)}")
    return st


# ------------------------------------------------------------------ cells

def import_keeping_sigint(name: str):
    """``importlib.import_module(name)`` with this process's SIGINT disposition kept: importing
    ``dask_jobqueue`` sets SIGINT to ``sys.exit()`` (its runner module), which would end an
    interrupted sweep's driver with exit status 0 instead of ``interrupted`` (130), and make a worker
    started with SIGINT ignored raise SystemExit wherever a Ctrl-C to the process group finds it (a
    garbage collector's callback included, printing a traceback after ``interrupted``)."""
    import signal

    prev = signal.getsignal(signal.SIGINT)
    try:
        return importlib.import_module(name)
    finally:
        if prev is not None and signal.getsignal(signal.SIGINT) is not prev:
            with contextlib.suppress(ValueError, OSError, TypeError):  # ValueError: not the main thread
                signal.signal(signal.SIGINT, prev)


def canonical(config) -> str:
    """The canonical JSON text of a config (sorted keys, no spaces); ValueError if it is not JSON."""
    try:
        return json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise SweepInputError(f"config is not JSON-serialisable ({one_line(e)}): {config!r:.200}") from None


def cell_id(cell: str, config: dict) -> str:
    """A stable 16-hex-digit id of (cell, config): the same on every machine and Python version."""
    text = json.dumps({"cell": cell, "config": json.loads(canonical(config))}, sort_keys=True,
                      separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def load_cell(cell: str):
    """The function named by ``"package.module:function"``: a top-level callable of an importable module."""
    if not isinstance(cell, str) or not re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", cell):
        raise SweepInputError(f"cell {cell!r}: not an import path 'package.module:function'")
    mod, fn = cell.split(":")
    try:
        m = importlib.import_module(mod)
    except ImportError as e:
        raise SweepInputError(f"cell {cell!r}: cannot import {mod} ({one_line(e)})") from None
    f = getattr(m, fn, None)
    if f is None or not callable(f):
        raise SweepInputError(f"cell {cell!r}: {mod} has no function {fn}")
    return f


def cell_dir() -> Path | None:
    """Inside a sweep cell: the folder for the files this cell writes (``DIR/cells/<id>/``,
    created on first use).  Outside a sweep (a plain call of the cell function): None."""
    d = CELL_DIR.get()
    if d is None:
        return None
    p = Path(d)
    make_folder(p)
    return p


def jsonable(o, where="result"):
    """numpy scalars and arrays, tuples -> plain JSON; returns (value, first non-finite path or None)."""
    bad: list[str] = []

    def walk(x, path):
        if hasattr(x, "tolist") and type(x).__module__ == "numpy":
            x = x.tolist()
        if isinstance(x, bool) or x is None or isinstance(x, str):
            return x
        if isinstance(x, int):
            return int(x)
        if isinstance(x, float):
            if not math.isfinite(x):
                bad.append(f"{path} = {x}")
                return None
            return float(x)
        if isinstance(x, dict):
            out = {}
            for k, v in x.items():
                if not isinstance(k, str):
                    raise TypeError(f"{path} has a key {k!r} that is not a string")
                out[k] = walk(v, f"{path}[{k!r}]")
            return out
        if isinstance(x, (list, tuple)):
            return [walk(v, f"{path}[{i}]") for i, v in enumerate(x)]
        raise TypeError(f"{path} is a {type(x).__name__}, not JSON")

    return walk(o, where), (bad[0] if bad else None)


def rusage():
    """(user, system) CPU seconds of this thread and of the finished child processes."""
    th = resource.getrusage(getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF))
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return th.ru_utime + ch.ru_utime, th.ru_stime + ch.ru_stime


def now() -> str:
    """The current UTC time in ISO 8601, to the second (a record's timestamps)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")

def finite_number(x) -> bool:
    """``x`` is an int or float (not a bool) and finite."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


# ------------------------------------------------------------------ the table

def flatten(d: dict, prefix: str) -> dict:
    out = {}
    for k, v in (d or {}).items():
        key = f"{prefix}.{k}"
        if isinstance(v, dict) and v:
            out.update(flatten(v, key))
        elif isinstance(v, (list, dict)):
            out[key] = json.dumps(v, separators=(",", ":"))
        else:
            out[key] = v
    return out


BASE_COLUMNS = ["index", "id", "status", "error", "resumed", "wall_s", "cpu_s", "worker"]


def table_csv(rows: list[dict], cols: list | None = None) -> str:
    """Rows (dicts) as CSV text: the columns ``cols`` (default: every key, in first-seen order);
    a missing or None value is an empty field."""
    cols = list(cols) if cols is not None else list(dict.fromkeys(k for r in rows for k in r))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({c: ("" if r.get(c) is None else r.get(c)) for c in cols})
    return buf.getvalue()


def csv_text(rows: list[dict]) -> str:
    """The sweep's table: base columns, then ``config.*`` and ``result.*`` flattened."""
    flat = [{**{c: r.get(c) for c in BASE_COLUMNS}, **flatten(r.get("config"), "config"),
             **flatten(r.get("result") if isinstance(r.get("result"), dict) else {}, "result")} for r in rows]
    cols = list(BASE_COLUMNS)
    for part in ("config.", "result."):
        cols += list(dict.fromkeys(k for f in flat for k in f if k.startswith(part)))
    return table_csv(flat, cols)
