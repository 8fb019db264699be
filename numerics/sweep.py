"""``python -m numerics.sweep``: grids of runs on Dask (``dask.distributed``), resumable.

    python -m numerics.sweep run GRID.toml --out DIR            # a grid file (TOML, JSON or YAML)
    python -m numerics.sweep roundoff --archs baseconv,lsa --depths 31,301 --dtypes float64,float32 --out DIR
    python -m numerics.sweep train --models baseconv,lsa --lrs 1e-2,1e-3 --seeds 0,1 --steps 2000 --out DIR
    python -m numerics.sweep compare --learned 'runs/*/weights.safetensors' --construction gd-baseconv --out DIR
    python -m numerics.sweep catalogue --out DIR                # one proof per catalogue entry
    common options: [--workers N | --scheduler ADDRESS | --scheduler-file FILE | --jobqueue FILE [--jobs N]]
                    [--connect-timeout 5] [--print-job-script] [--retries 1]
                    [--preload auto|none|MODULES] [--list] [--quiet] [--allow-large]

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
"""
from __future__ import annotations

import ast
import contextlib
import contextvars
import csv
import dataclasses
import hashlib
import importlib
import importlib.util
import io
import itertools
import json
import math
import os
import re
import resource
import socket
import sys
import threading
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path

from polyverify.cli import (Parser, UsageError, atomic_write_text, check_range, interactive, one_line,
                            output_dir, run_main)

#: exit status when F cells failed: FAILED_BASE + min(F, FAILED_CAP)
FAILED_BASE, FAILED_CAP = 10, 100
#: exit status when every cell finished but the sweep's verdict failed (an unproved catalogue entry)
EXIT_VERDICT = 1

#: the named sweeps: adapter (an object next to the single-run command) and a one-line description
SWEEPS = {
    "roundoff": ("numerics.roundoff:SWEEP",
                 "roundoff of GD constructions: archs x depths x dtypes x sizes x kappas x sigmas x seeds"),
    "train": ("numerics.train:SWEEP", "training runs: models x tasks x learning rates x seeds x widths"),
    "compare": ("verify.compare:SWEEP", "verify.compare over a set of learned weight files"),
    "catalogue": ("verify.catalogue_report:SWEEP", "the catalogue report, one proof per entry"),
}

LIMITS = {"cells": 10_000, "workers": 256, "retries": 100, "grid_bytes": 16 * 2**20, "jobs": 256}
LARGE_LIMITS = {"cells": 1_000_000, "workers": 4096, "jobs": 4096}
ALLOW = "--allow-large"

_CELL_DIR: contextvars.ContextVar[str | None] = contextvars.ContextVar("polyverify_sweep_cell_dir", default=None)
#: in a worker: seconds each module took to import when the worker started (:class:`_PreloadPlugin`)
_WORKER_IMPORT_S: dict[str, float] = {}
#: seconds to wait for a scheduler given by --scheduler to answer as a Dask scheduler
CONNECT_TIMEOUT_S = 5.0


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


# ------------------------------------------------------------------ cells

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
    d = _CELL_DIR.get()
    if d is None:
        return None
    p = Path(d)
    p.mkdir(parents=True, exist_ok=True)
    return p


def _jsonable(o, where="result"):
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


def _rusage():
    th = resource.getrusage(getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF))
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return th.ru_utime + ch.ru_utime, th.ru_stime + ch.ru_stime


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def execute_cell(cell: str, config: dict, artifacts: str | None = None, expect: dict | None = None) -> dict:
    """Run one cell in this process and return its record (what a worker runs for each task).
    Never raises for a failure of the cell: the record's ``status`` says ``failed`` and ``error``
    names it.  ``expect``: the driver's :func:`code_version` of the cell; when this process's
    (:func:`worker_version`, computed once per process and outside the cell's time) differs, the
    cell is not run and its record fails with ``VersionMismatch: worker ... runs polyverify ...,
    this driver polyverify ...``."""
    rec = {"id": cell_id(cell, config), "cell": cell, "config": config, "status": "failed", "result": None,
           "error": None, "traceback": None, "worker": "local", "host": socket.gethostname(), "pid": os.getpid(),
           "started": _now()}
    with contextlib.suppress(Exception):
        from distributed import get_worker

        rec["worker"] = get_worker().address
        if _WORKER_IMPORT_S:  # what this worker imported as it started (_PreloadPlugin): not in wall_s
            rec["worker_import_s"] = sum(_WORKER_IMPORT_S.values())
    if expect is not None:
        try:
            why = version_mismatch(f"worker {rec['worker']}", worker_version(cell), expect)
        except Exception as e:  # noqa: BLE001 -- a worker that cannot read its sources cannot vouch for them
            why = f"worker {rec['worker']} cannot compute its code version ({type(e).__name__}: {one_line(e)})"
        if why is not None:
            rec.update({"error": f"VersionMismatch: {why}", "wall_s": 0.0, "cpu_user_s": 0.0, "cpu_sys_s": 0.0,
                        "cpu_s": 0.0, "finished": _now()})
            return rec
    token = _CELL_DIR.set(artifacts)
    u0, s0 = _rusage()
    t0 = time.perf_counter()
    try:
        fn = load_cell(cell)
        if "torch" in sys.modules:  # one thread per task (torch imported by the cell's module)
            sys.modules["torch"].set_num_threads(1)
        res = fn(json.loads(canonical(config)))  # a fresh copy: the cell may change it
        if not isinstance(res, dict):
            raise TypeError(f"the cell returned a {type(res).__name__}, not a dict")
        res, bad = _jsonable(res)
        rec["result"] = res
        if bad is not None:
            rec["error"] = f"non-finite value in the result: {bad}"
        else:
            rec["status"] = "ok"
    except (Exception, SystemExit) as e:  # noqa: BLE001 -- a cell's failure is data, not a crash of the grid
        rec["error"] = f"{type(e).__name__}: {one_line(e)}"
        rec["traceback"] = traceback.format_exc(limit=20)
    finally:
        _CELL_DIR.reset(token)
    wall = time.perf_counter() - t0
    u1, s1 = _rusage()
    rec.update({"wall_s": wall, "cpu_user_s": u1 - u0, "cpu_sys_s": s1 - s0, "cpu_s": (u1 - u0) + (s1 - s0),
                "finished": _now()})
    return rec


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


# ------------------------------------------------------------------ which code made a record

#: the project's top-level packages: their modules imported by a cell's module are part of its code version
PROJECT_PACKAGES = ("polyverify", "circuits", "constructions", "verify", "numerics")


def _package_version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # pragma: no cover
        return "unknown"
    try:
        return version("polyverify")
    except PackageNotFoundError:  # a clone that is not installed
        return "not installed"


def _module_file(name: str, roots: dict) -> Path | None:
    """The source file of module ``name`` (a ``.py`` file or a package's ``__init__.py``), found
    by path under its top-level package's folder -- nothing is imported."""
    top, *rest = name.split(".")
    if top not in roots:
        spec = None
        with contextlib.suppress(Exception):
            spec = importlib.util.find_spec(top)  # a top-level name: found, not imported
        if spec is None:
            roots[top] = None
        elif spec.submodule_search_locations:
            roots[top] = ("pkg", [Path(d) for d in spec.submodule_search_locations])
        elif spec.origin and spec.origin.endswith(".py"):
            roots[top] = ("mod", Path(spec.origin))
        else:
            roots[top] = None
    root = roots[top]
    if root is None:
        return None
    if root[0] == "mod":
        return root[1] if not rest else None
    for d in root[1]:
        base = d.joinpath(*rest)
        for f in (base.with_suffix(".py") if rest else None, base / "__init__.py"):
            if f is not None and f.is_file():
                return f
    return None


def _imports(tree: ast.AST, name: str, is_pkg: bool) -> set[str]:
    """Every module name an import statement of the module ``name`` may load (with ``from A import
    B``, both ``A`` and ``A.B``), relative imports resolved; imports inside functions included."""
    out: set[str] = set()
    pkg = name if is_pkg else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = pkg.split(".") if pkg else []
                if node.level - 1 > len(parts):
                    continue
                base = ".".join(parts[:len(parts) - (node.level - 1)])
                mod = f"{base}.{node.module}" if node.module and base else (node.module or base)
            else:
                mod = node.module or ""
            if mod:
                out.add(mod)
                out.update(f"{mod}.{a.name}" for a in node.names if a.name != "*")
    # importing a.b.c runs a/__init__.py and a/b/__init__.py
    return {".".join(m.split(".")[:k]) for m in out for k in range(1, m.count(".") + 2)}


def _closure(mod: str, files: dict | None = None) -> tuple[dict[str, bytes], set[str]]:
    """The source of module ``mod`` and of every module of this project (and of ``mod``'s own
    top-level package) that it imports, directly or through others, by reading the import
    statements (those inside functions included; nothing is imported); and the top-level names of
    the other packages those modules import (the standard library left out).  ``files``, when
    given, receives each module's source path."""
    allowed = set(PROJECT_PACKAGES) | {mod.split(".")[0]}
    roots: dict = {}
    seen: dict[str, bytes] = {}
    others: set[str] = set()
    todo = [".".join(mod.split(".")[:k]) for k in range(1, mod.count(".") + 2)]  # a.b.c runs a, a.b first
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        if name.split(".")[0] not in allowed:
            others.add(name.split(".")[0])
            continue
        f = _module_file(name, roots)
        if f is None:
            continue
        data = f.read_bytes()
        seen[name] = data
        if files is not None:
            files[name] = f
        try:
            tree = ast.parse(data)
        except (SyntaxError, ValueError):
            continue
        todo.extend(_imports(tree, name, f.name == "__init__.py") - set(seen))
    stdlib = getattr(sys, "stdlib_module_names", frozenset())
    return seen, {o for o in others if o not in stdlib and o != "__future__"}


def code_version(cell: str, files: dict | None = None) -> dict:
    """What identifies the code a cell's record was made by: the installed ``polyverify`` version
    and ``sources``, a hash of the source files of the cell's module and of every module of this
    project (and of the cell's own top-level package) that it imports, directly or through others
    (:func:`_closure`: read from the import statements, functions' included; nothing is imported).
    Equal in a clone and in an installed copy of the same sources.  A change to any of those files
    changes it, so that a record made by other code is computed again rather than reused.
    ``files``, when given, receives the path of each source file hashed."""
    seen, _ = _closure(cell.split(":")[0], files)
    h = hashlib.sha256()
    for name in sorted(seen):
        h.update(name.encode() + b"\0" + hashlib.sha256(seen[name]).digest())
    return {"package": _package_version(), "sources": h.hexdigest()[:16], "modules": len(seen)}


def default_preload(cell: str) -> list[str]:
    """What each worker imports as it starts (:func:`_preload`): the other packages the cell's
    modules may import (torch, sympy, FLINT, ... -- those installed), then those modules
    (:func:`_closure`), so that no cell's wall time counts an import, the first on a worker
    included."""
    seen, others = _closure(cell.split(":")[0])
    installed = []
    for o in sorted(others):
        with contextlib.suppress(Exception):
            if importlib.util.find_spec(o) is not None:
                installed.append(o)
    return installed + sorted(seen, key=lambda m: (m.count("."), m))


def record_digest(rec: dict) -> str:
    """A hash of what a finished record says (its cell, config, code version, status and result):
    a record edited or copied by hand after it was written no longer matches it."""
    part = {k: rec.get(k) for k in ("id", "cell", "config", "code_version", "status", "result")}
    return hashlib.sha256(canonical(part).encode()).hexdigest()[:32]


def _finite_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def check_record(path: Path, cell: str, cid: str, config: dict, version: dict) -> tuple[dict | None, str | None]:
    """A finished record that may be reused for this cell, or ``(None, why not)``; ``(None, None)``
    when there is none (a missing file, a failed cell: run again, nothing to warn about)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None, None
    except (OSError, UnicodeDecodeError) as e:
        return None, f"cannot be read ({one_line(e)})"
    try:
        rec = json.loads(text)
    except ValueError as e:
        return None, f"is not valid JSON ({one_line(e)})"
    if not isinstance(rec, dict):
        return None, f"holds a {type(rec).__name__}, not a record"
    if rec.get("status") != "ok":
        return (None, None) if rec.get("status") == "failed" else (None, f"has status {rec.get('status')!r:.40}")
    if rec.get("id") != cid or rec.get("cell") != cell:
        return None, f"belongs to another cell (id {rec.get('id')!r:.40}, cell {rec.get('cell')!r:.80})"
    try:
        same = canonical(rec.get("config")) == canonical(config)
    except SweepInputError:
        same = False
    if not same:
        return None, f"holds another config ({json.dumps(rec.get('config'))[:120]})"
    if not isinstance(rec.get("result"), dict):
        return None, "is malformed (its result is not a JSON object)"
    if not all(_finite_number(rec.get(k)) and rec[k] >= 0 for k in ("wall_s", "cpu_s")):
        return None, "is malformed (no wall_s or cpu_s time)"
    cv = rec.get("code_version")
    if not isinstance(cv, dict):
        return None, "was made without a code version (by an older sweep runner)"
    if cv.get("package") != version["package"] or cv.get("sources") != version["sources"]:
        return None, (f"was made by other code (polyverify {cv.get('package')!r:.20}, sources {cv.get('sources')!r:.20};"
                      f" now {version['package']}, {version['sources']})")
    try:
        digest_ok = rec.get("digest") == record_digest(rec)
    except SweepInputError:
        digest_ok = False
    if not digest_ok:
        return None, "does not match its digest (edited or damaged after it was written)"
    return rec, None


def _write_record(path: Path, rec: dict) -> None:
    atomic_write_text(path, json.dumps(rec, indent=1, allow_nan=False) + "\n")


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
        if _finite_number(rec.get("wall_s")):  # a cell lost with its worker has no times
            line += f"{rec['wall_s']:.2f} s wall, {rec.get('cpu_s') or 0.0:.2f} s CPU on {rec.get('worker')}"
        else:
            line += "no time (lost with its worker)"
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

def _check_configs(cell: str, configs) -> list[str]:
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


def _check_scheduler(address: str) -> str:
    if not re.fullmatch(r"[a-z]+://[^\s/][^\s]*|[\w.\-\[\]:]+:\d{1,5}", address or ""):
        raise SweepInputError(f"--scheduler {address!r}: not a scheduler address such as tcp://HOST:8786")
    return address


def check_out(path) -> Path:
    """The output folder can be made or used: checked without creating anything."""
    out = Path(path)
    if str(path) == "":
        raise SweepInputError("--out: empty folder name")
    if out.exists() and not out.is_dir():
        raise SweepInputError(f"--out {out}: is a file, not a folder")
    cells = out / "cells"
    if cells.exists() and not cells.is_dir():
        raise SweepInputError(f"--out {out}: {cells} is a file, not a folder")
    for anc in [out, *out.absolute().parents]:
        if anc.exists():
            if not anc.is_dir():
                raise SweepInputError(f"--out {out}: {anc} is a file, not a folder")
            if not os.access(anc, os.W_OK | os.X_OK):
                raise SweepInputError(f"--out {out}: folder {anc} is not writable")
            break
    return out


def local_cluster_config(retries: int) -> dict:
    """The Dask settings of the local cluster, held while it runs (the nanny reads them again when
    it restarts a lost worker): the scheduler reruns a task lost with its worker up to ``retries``
    times; one task at a time per worker thread, so a lost worker takes only the cell it was
    running; workers are not daemonic processes, so a cell may start processes of its own (the
    comparison's exact polynomial view runs in a child)."""
    return {"distributed.scheduler.allowed-failures": retries, "distributed.scheduler.worker-saturation": 1.0,
            "distributed.worker.daemon": False}


def _local_cluster(workers: int, settings: contextlib.ExitStack):
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


def _dashboard(client, local: bool) -> str | None:
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


def _preload(modules) -> None:
    """In a worker, as it starts: import the cells' modules once, so that no cell's wall time
    counts the project's import (torch, FLINT, sympy: seconds); a module that fails to import is
    left for the cell to report."""
    for m in modules:
        t0 = time.perf_counter()
        try:
            importlib.import_module(m)
        except Exception:  # noqa: BLE001 -- the cell's own import reports it as the cell's error
            continue
        _WORKER_IMPORT_S[m] = time.perf_counter() - t0
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)


def _plugin_class():
    """:class:`distributed.WorkerPlugin` subclass that runs :func:`_preload` on every worker, those
    started later (a lost worker's replacement) included.  Made on first use (``distributed`` is
    imported only when a sweep runs) and reachable as ``numerics.sweep._PreloadPlugin`` (module
    ``__getattr__``), so that workers unpickle it by reference."""
    global _PLUGIN
    if _PLUGIN is None:
        from distributed.diagnostics.plugin import WorkerPlugin

        class _PreloadPlugin(WorkerPlugin):
            def __init__(self, modules):
                self.modules = list(modules)
                self.name = "polyverify-sweep-preload-" + "-".join(self.modules)

            def setup(self, worker):
                importlib.import_module("numerics.sweep")._preload(self.modules)

        _PreloadPlugin.__module__, _PreloadPlugin.__qualname__ = "numerics.sweep", "_PreloadPlugin"
        _PLUGIN = _PreloadPlugin
    return _PLUGIN


_PLUGIN = None


def __getattr__(name):  # PEP 562: numerics.sweep._PreloadPlugin, made on first use
    if name == "_PreloadPlugin":
        return _plugin_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    if not p.exists():
        raise SweepInputError(f"{where}: not found (dask scheduler --scheduler-file FILE writes it as the scheduler "
                              f"starts)")
    if not p.is_file():
        raise SweepInputError(f"{where}: is a folder, not a file")
    try:
        if p.stat().st_size > SCHEDULER_FILE_BYTES:
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
        return _check_scheduler(address)
    except SweepInputError:
        raise SweepInputError(f"{where}: its address {address!r:.80} is not a scheduler address such as "
                              f"tcp://HOST:8786") from None


#: this process's code version of each cell, with the files it was read from (:func:`worker_version`)
_VERSIONS: dict[str, tuple[dict, list]] = {}


def _stamps(files: dict) -> list:
    out = []
    for name in sorted(files):
        try:
            st = os.stat(files[name])
            out.append((name, str(files[name]), st.st_mtime_ns, st.st_size))
        except OSError:
            out.append((name, str(files[name]), None, None))
    return out


def worker_version(cell: str) -> dict:
    """:func:`code_version` of ``cell`` as this process sees it: what a worker answers to the
    driver's version check (:func:`check_worker_versions`, :func:`execute_cell`).  Kept per
    process and computed again when one of its source files changed (size or modification time)."""
    hit = _VERSIONS.get(cell)
    if hit is not None and _stamps({n: Path(f) for n, f, *_ in hit[1]}) == hit[1]:
        return hit[0]
    files: dict = {}
    v = code_version(cell, files)
    _VERSIONS[cell] = (v, _stamps(files))
    return v


def version_mismatch(who: str, theirs, ours: dict) -> str | None:
    """None when ``theirs`` (a worker's :func:`worker_version`) is the driver's ``ours`` (the same
    polyverify version and sources), else the one line that names both."""
    same = (ours["package"], ours["sources"])
    if isinstance(theirs, dict) and (theirs.get("package"), theirs.get("sources")) == same:
        return None
    t = theirs if isinstance(theirs, dict) else {}
    return (f"{who} runs polyverify {t.get('package')} (sources {t.get('sources')}), this driver polyverify "
            f"{ours['package']} (sources {ours['sources']}); install the driver's version on every worker")


def check_worker_versions(client, cell: str, version: dict) -> dict:
    """Ask every worker of ``client``'s scheduler for its :func:`worker_version` of ``cell``
    (``client.run``) and refuse, with a :class:`SweepInputError` naming the worker's version and
    the driver's, when one differs from ``version`` or cannot answer (this project not importable
    there).  Returns ``{worker address: version}``.  Workers that join later are checked by each
    cell (:func:`execute_cell`'s ``expect``)."""
    fn = importlib.import_module("numerics.sweep").worker_version  # by reference, not __main__'s copy
    answers = client.run(fn, cell, on_error="return")
    bad = []
    for addr in sorted(answers):
        v = answers[addr]
        if isinstance(v, BaseException):
            bad.append(f"worker {addr} cannot answer the version check ({type(v).__name__}: {one_line(v)[:120]}); "
                       f"this driver runs polyverify {version['package']} (sources {version['sources']}): install "
                       f"it on every worker")
        else:
            why = version_mismatch(f"worker {addr}", v, version)
            if why is not None:
                bad.append(why)
    if bad:
        raise SweepInputError(bad[0] + (f" ({len(bad) - 1} more worker(s) differ)" if len(bad) > 1 else ""))
    return answers


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
        if not _finite_number(v) or v <= 0:
            raise SweepInputError(f"{where}: resource {k} must be a positive number, got {v!r:.40}")
    return dict(res)


def _resource_rule(resources):
    """run_grid's ``resources``: None (:func:`cell_resources`), one dict for every cell, or a
    function of the config."""
    if resources is None:
        return cell_resources
    if callable(resources):
        return resources
    fixed = check_resources(resources, "resources")
    return lambda config: fixed


def _worker_resources(args) -> dict:
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


# ------------------------------------------------------------------ batch clusters (dask-jobqueue)

#: the batch systems this runner builds a dask-jobqueue cluster for, and the cluster class of each
JOBQUEUE_SYSTEMS = {"slurm": "SLURMCluster", "pbs": "PBSCluster"}
#: config keys dask-jobqueue renamed (the old ones still work there with a FutureWarning; refused here)
_JQ_RENAMED = {"extra": "worker-extra-args", "env-extra": "job-script-prologue", "job-extra": "job-extra-directives",
               "header-skip": "job-directives-skip", "project": "account"}
_JQ_INT = {"cores", "processes", "job-cpu"}
_JQ_NUMBER = {"death-timeout"}
_JQ_LIST = {"job-extra-directives", "job-directives-skip", "job-script-prologue", "worker-extra-args"}
_JQ_TABLE = {"scheduler-options"}
#: the first line of every job's prologue: workers that are not daemonic processes, as the local
#: cluster's (a comparison cell starts a child process)
JOB_DAEMON_LINE = "export DASK_DISTRIBUTED__WORKER__DAEMON=False"
#: the scheduler address in a job script printed before the cluster exists (dask-jobqueue's own placeholder)
JOB_SCRIPT_ADDRESS = "tcp://<insert-scheduler-address-here>:8786"
_WALLTIME = re.compile(r"(\d+-)?\d+(:\d{1,2}){0,2}")


def _import_jobqueue():
    """``dask_jobqueue``, imported with this process's SIGINT handler kept: importing it sets
    SIGINT to ``sys.exit()`` (its runner module), which would end an interrupted sweep with exit
    status 0, silently, instead of ``interrupted`` (130) after the jobs are cancelled."""
    import signal

    prev = signal.getsignal(signal.SIGINT)
    import dask_jobqueue

    if signal.getsignal(signal.SIGINT) is not prev and prev is not None:
        with contextlib.suppress(ValueError, OSError, TypeError):  # ValueError: not the main thread
            signal.signal(signal.SIGINT, prev)
    return dask_jobqueue


@dataclasses.dataclass
class JobqueueSpec:
    """A batch cluster read from a jobqueue config file (:func:`read_jobqueue_config`): the
    batch ``system`` (slurm, pbs), its dask-jobqueue ``options`` (the config file's keys, with
    ``processes`` and the prologue completed) and the ``script`` each job runs (the scheduler's
    address a placeholder until the cluster starts)."""
    path: str
    system: str
    options: dict
    script: str

    @property
    def cluster_class(self) -> str:
        return JOBQUEUE_SYSTEMS[self.system]

    @property
    def submit_command(self) -> str:
        return getattr(_import_jobqueue(), self.cluster_class).job_cls.submit_command

    @property
    def threads(self) -> int:
        """Worker threads per job (the job's cores)."""
        return int(self.options["cores"])

    def dask_config(self) -> dict:
        """The options as Dask config keys (``jobqueue.slurm.cores``, ...): what the cluster reads."""
        return {f"jobqueue.{self.system}.{k}": v for k, v in self.options.items()}

    def make_cluster(self):
        """The dask-jobqueue cluster (its scheduler starts in this process; no job is submitted
        before ``scale``).  Call it while :meth:`dask_config` is set: each job reads it as it is made."""
        return getattr(_import_jobqueue(), self.cluster_class)()


@contextlib.contextmanager
def _no_makedirs():
    """While a job is built only for its script, dask-jobqueue's ``os.makedirs`` (it makes the
    config's log-directory as it builds a job) does nothing: a dry run writes nothing."""
    _import_jobqueue()
    from dask_jobqueue import core

    real = core.os

    class _Os:
        def __getattr__(self, name):
            return getattr(real, name)

        @staticmethod
        def makedirs(*args, **kwargs):
            return None

    core.os = _Os()
    try:
        yield
    finally:
        core.os = real


def _check_jq_value(key: str, v, where: str) -> None:
    if v is None:
        return
    if key in _JQ_INT:
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise UsageError(f"{where}: {key} must be an integer >= 1, got {v!r:.60}")
    elif key in _JQ_NUMBER:
        if not _finite_number(v) or v <= 0:
            raise UsageError(f"{where}: {key} must be a positive number of seconds, got {v!r:.60}")
    elif key in _JQ_LIST:
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise UsageError(f"{where}: {key} must be a list of strings, got {v!r:.80}")
        bad = [x for x in v if any(c in x for c in "\r\n\0")]
        if bad:
            raise UsageError(f"{where}: {key}: an item holds a line break: {bad[0]!r:.80}")
    elif key in _JQ_TABLE:
        if not isinstance(v, dict):
            raise UsageError(f"{where}: {key} must be a table, got {v!r:.80}")
    else:
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            raise UsageError(f"{where}: {key} must be a single value, got {v!r:.80}")
        if isinstance(v, str) and any(c in v for c in "\r\n\0"):
            raise UsageError(f"{where}: {key} holds a line break: {v!r:.80}")


def read_jobqueue_config(path, needs=()) -> JobqueueSpec:
    """A batch cluster's description, checked without submitting or writing anything.

    The file (YAML, TOML or JSON) has dask-jobqueue's own config layout: one table
    ``jobqueue.slurm`` or ``jobqueue.pbs`` whose keys are that system's dask-jobqueue config keys
    (``cores``, ``memory``, ``processes``, ``queue``, ``account``, ``walltime``,
    ``job-extra-directives``, ``job-script-prologue``, ``worker-extra-args``, ``log-directory``,
    ``scheduler-options``, ...), so the same file serves as ``~/.config/dask/jobqueue.yaml``.
    ``cores`` and ``memory`` (per job) are required; ``processes`` defaults to ``cores`` (one
    single-threaded worker process per core, as the local cluster); the prologue starts with
    :data:`JOB_DAEMON_LINE`.  ``needs``: the worker resources the cells ask for (GPU): each must be
    declared by ``worker-extra-args`` (``["--resources", "GPU=1"]``), else the cells would wait
    forever.  The job script is built by dask-jobqueue itself (its ``job_script``), so a value it
    refuses is refused here.  Any problem: a :class:`~polyverify.cli.UsageError` naming the file."""
    where = f"jobqueue config {path}"
    spec = _load_table_file(path, "jobqueue config")
    if set(spec) != {"jobqueue"} or not isinstance(spec["jobqueue"], dict):
        raise UsageError(f"{where}: the top level must be one table 'jobqueue' holding one batch system's table "
                         f"(jobqueue.slurm or jobqueue.pbs, dask-jobqueue's config layout), got key(s) "
                         f"{', '.join(map(str, spec)) or 'none'}")
    systems = spec["jobqueue"]
    if len(systems) != 1:
        raise UsageError(f"{where}: give exactly one batch system under 'jobqueue' ({' or '.join(JOBQUEUE_SYSTEMS)}), "
                         f"got {', '.join(map(str, systems)) or 'none'}")
    ((system, opts),) = systems.items()
    if system not in JOBQUEUE_SYSTEMS:
        raise UsageError(f"{where}: unknown batch system {system!r}; this runner builds {', '.join(JOBQUEUE_SYSTEMS)} "
                         f"clusters")
    if not isinstance(opts, dict):
        raise UsageError(f"{where}: jobqueue.{system} must be a table of options, got {opts!r:.80}")
    where = f"{where}: jobqueue.{system}"
    try:
        import dask

        _import_jobqueue()  # loads its defaults: the keys each system knows
    except ImportError:
        raise UsageError(f"{where}: needs dask-jobqueue (pip install -e '.[sweep]')") from None
    known = set(dask.config.get(f"jobqueue.{system}")) - set(_JQ_RENAMED)
    opts = dict(opts)
    for k, v in opts.items():
        if not isinstance(k, str):
            raise UsageError(f"{where}: key {k!r} is not a name")
        if k in _JQ_RENAMED:
            raise UsageError(f"{where}: {k!r} is an old name; dask-jobqueue calls it {_JQ_RENAMED[k]!r}")
        if k not in known:
            hint = (f"write {k.replace('_', '-')!r} (the config keys use hyphens)" if k.replace("_", "-") in known
                    else f"the {system} keys are {', '.join(sorted(known))}")
            raise UsageError(f"{where}: unknown key {k!r}; {hint}")
        _check_jq_value(k, v, where)
    for k in ("cores", "memory"):
        if opts.get(k) is None:
            raise UsageError(f"{where}: {k} is required (per job: cores = 8, memory = \"16GiB\")")
    from dask.utils import parse_bytes

    try:
        mem = parse_bytes(opts["memory"])
    except (ValueError, TypeError):
        mem = None
    if not mem or mem <= 0:
        raise UsageError(f"{where}: memory {opts['memory']!r:.40} is not an amount such as 16GiB")
    cores = opts["cores"]
    if opts.get("processes") is None:
        opts["processes"] = cores
    if opts["processes"] > cores or cores % opts["processes"]:
        raise UsageError(f"{where}: processes = {opts['processes']} must divide cores = {cores} (each worker process "
                         f"gets cores / processes threads)")
    wt = opts.get("walltime")
    if wt is not None and not (isinstance(wt, str) and _WALLTIME.fullmatch(wt)):
        raise UsageError(f"{where}: walltime {wt!r:.40} is not a time such as 02:00:00 (hours:minutes:seconds)")
    try:
        offered = _worker_resources(opts.get("worker-extra-args"))
    except ValueError as e:
        raise UsageError(f"{where}: worker-extra-args: {e}") from None
    for name in sorted(set(needs)):
        if name not in offered:
            raise UsageError(f"{where}: cells ask for the worker resource {name} and the jobs' workers offer none; add "
                             f"worker-extra-args: [\"--resources\", \"{name}=1\"] and the batch system's request "
                             f"(job-extra-directives: [\"--gres=gpu:1\"] on SLURM)")
    prologue = list(opts.get("job-script-prologue") or [])
    if JOB_DAEMON_LINE not in prologue:
        opts["job-script-prologue"] = [JOB_DAEMON_LINE, *prologue]
    job = JobqueueSpec(path=str(path), system=system, options=opts, script="")
    job_cls = getattr(_import_jobqueue(), job.cluster_class).job_cls
    try:
        with dask.config.set(job.dask_config()), _no_makedirs():
            # as the cluster's job_script() builds it: a job of this config, the scheduler's address a placeholder
            job.script = job_cls(JOB_SCRIPT_ADDRESS, name="dummy-name").job_script()
    except Exception as e:  # noqa: BLE001 -- whatever dask-jobqueue refuses is a bad config
        raise UsageError(f"{where}: dask-jobqueue refuses it ({type(e).__name__}: {one_line(e)[:200]})") from None
    return job


def check_submit_command(job: JobqueueSpec) -> None:
    """The batch system's submit command (sbatch, qsub) is on this machine's PATH, else a
    :class:`SweepInputError` (the sweep runs where jobs are submitted: a login node)."""
    import shutil

    cmd = job.submit_command.split()[0]
    if shutil.which(cmd) is None:
        raise SweepInputError(f"jobqueue config {job.path}: {cmd} is not on this machine's PATH; run the sweep where "
                              f"{job.system} jobs are submitted (a login node), or add --print-job-script to see the "
                              f"job script")


def _warn_unoffered(asked: dict, workers: dict, name: str, scheduler: str, warn) -> None:
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


def run_grid(cell: str, configs: list[dict], out_dir, *, workers: int | None = None, scheduler: str | None = None,
             retries: int = 1, progress: bool | None = None, name: str = "sweep",
             on_start=None, connect_timeout: float = CONNECT_TIMEOUT_S, preload=None,
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
    scheduler (:func:`probe_scheduler`); ``preload``: the modules each worker imports as it starts
    (default: :func:`default_preload`), so that no cell's time counts an import.  Bad arguments, and a
    scheduler that cannot be reached, raise :class:`SweepInputError` (a ValueError) before anything
    is started or written.

    ``scheduler_file``: the JSON file ``dask scheduler --scheduler-file`` writes, instead of
    ``scheduler`` (:func:`read_scheduler_file`).  Before any cell is submitted to an existing
    scheduler, every worker's code version must be this driver's (:func:`check_worker_versions`);
    a worker that joins later and differs fails each cell it is given (:func:`execute_cell`).
    ``jobqueue``: a batch cluster (a :class:`JobqueueSpec` or the path of its config file,
    :func:`read_jobqueue_config`) started here with ``jobs`` jobs, instead of the local cluster.
    ``resources``: the Dask worker resources each cell asks for -- None (:func:`cell_resources`:
    ``{"GPU": 1}`` for a cell on a GPU), one dict for every cell, or a function of the config;
    used on an existing scheduler and a batch cluster (on the local cluster every worker shares
    this machine's devices, and the resources are not asked for).
    """
    t_start = time.perf_counter()
    load_cell(cell)
    ids = _check_configs(cell, configs)
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
    rule = _resource_rule(resources)
    cell_res = [check_resources(rule(c), f"config {i}") for i, c in enumerate(configs)]
    where_scheduler = None
    if scheduler_file is not None:
        scheduler = read_scheduler_file(scheduler_file)
        where_scheduler = f"--scheduler-file {scheduler_file} ({scheduler})"
    if scheduler is not None:
        _check_scheduler(scheduler)
    if jobqueue is not None:
        if not isinstance(jobqueue, JobqueueSpec):
            jobqueue = read_jobqueue_config(jobqueue, {k for r in cell_res if r for k in r})
        else:
            needs = {k for r in cell_res if r for k in r}
            offered = _worker_resources(jobqueue.options.get("worker-extra-args"))
            if needs - set(offered):
                raise SweepInputError(f"jobqueue config {jobqueue.path}: cells ask for the worker resource(s) "
                                      f"{', '.join(sorted(needs - set(offered)))} and the jobs' workers offer none")
        check_submit_command(jobqueue)
    if not _finite_number(connect_timeout) or not 0 < connect_timeout <= 600:
        raise SweepInputError(f"--connect-timeout must be a number of seconds in (0, 600], got {connect_timeout!r}")
    preload = default_preload(cell) if preload is None else list(preload)
    out = check_out(out_dir)
    cells = out / "cells"
    version = code_version(cell)
    if warn is None:
        def warn(line):
            print(line, file=sys.stderr, flush=True)

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
    resumed = set(records)
    todo = [(i, cid) for i, cid in enumerate(ids) if cid not in records]
    rep = _Reporter(len(todo), name, progress)
    cluster_info: dict = {"scheduler": scheduler, "workers": None, "threads": None, "dashboard": None}
    if scheduler_file is not None:
        cluster_info["scheduler_file"] = str(scheduler_file)
    if jobqueue is not None:
        cluster_info.update(jobqueue=jobqueue.path, system=jobqueue.system, jobs=jobs,
                            job_cores=jobqueue.options["cores"], job_processes=jobqueue.options["processes"],
                            job_memory=jobqueue.options["memory"])
    cpu = 0.0
    client = cluster = None
    settings = contextlib.ExitStack()
    try:
        if todo and scheduler is not None:
            probe_scheduler(scheduler, connect_timeout, where=where_scheduler)
            from distributed import Client

            try:
                client = Client(scheduler, timeout=f"{connect_timeout}s")
            except Exception as e:  # noqa: BLE001 -- it answered the probe; anything now is a connection failure
                raise SweepInputError(f"{where_scheduler or '--scheduler ' + scheduler}: cannot connect "
                                      f"({type(e).__name__}: {one_line(e)[:160]})") from None
            # before anything is written or submitted: every worker runs this driver's code
            check_worker_versions(client, cell, version)
        out = output_dir("--out", out)
        from polyverify.cli import make_folder  # output_dir only checks; made here, removed on Ctrl-C if unfilled

        make_folder(cells)
        if not todo:
            rep.say(f"{name}: all {len(ids)} cells finished earlier in {out}; nothing to run")
        else:
            if client is None:
                import dask
                import distributed  # noqa: F401 -- its defaults loaded first: leaving dask.config.set
                # deletes every key that did not exist when it was entered

                settings.enter_context(dask.config.set(local_cluster_config(retries)))
                if jobqueue is not None:
                    # held while the cluster lives: each job reads the config as it is made
                    settings.enter_context(dask.config.set(jobqueue.dask_config()))
                    cluster = jobqueue.make_cluster()
                    cluster.scale(jobs=jobs)
                else:
                    cluster = _local_cluster(workers or default_workers(), settings)
                from distributed import Client

                client = Client(cluster)
            t_import = time.perf_counter()
            if preload:
                # the class made by the importable module (not __main__'s copy), so workers unpickle it by reference
                client.register_plugin(importlib.import_module("numerics.sweep")._plugin_class()(preload))
            info = client.scheduler_info()
            ws = info.get("workers") or {}
            cluster_info.update(workers=len(ws), threads=sum(w.get("nthreads", 0) for w in ws.values()),
                                dashboard=_dashboard(client, local=cluster is not None),
                                address=client.scheduler.address, preload=preload,
                                preload_s=time.perf_counter() - t_import)
            if jobqueue is not None:
                o = jobqueue.options
                where = (f"{jobs} {jobqueue.system} job(s) of {o['cores']} core(s), {o['memory']} ({o['processes']} "
                         f"worker process(es) each; {cluster_info['workers']} connected so far) from {jobqueue.path}")
            elif scheduler:
                where = f"the scheduler at {scheduler}"
            else:
                where = f"a local cluster of {cluster_info['workers']} worker process(es), 1 thread each"
            rep.say(f"{name}: {len(ids)} cells, {len(resumed)} finished earlier, {len(todo)} to run on {where}"
                    + (f"; dashboard {cluster_info['dashboard']}" if cluster_info["dashboard"] else ""))
            asked = {} if (cluster is not None and jobqueue is None) else \
                {i: r for i, r in enumerate(cell_res) if r and ids[i] not in records}
            if asked and scheduler is not None:
                _warn_unoffered(asked, ws, name, scheduler, warn)
            if on_start is not None:
                on_start(cluster_info)
            # the local cluster: no more cells submitted than its threads, so that a worker that dies takes
            # only the cell it was running (the scheduler hands a worker every task it is given, not one
            # at a time, when a grid's first tasks arrive)
            slots = (None if scheduler else jobs * jobqueue.threads if jobqueue is not None
                     else max(1, cluster_info["threads"] or 1))
            cpu = _run(client, cell, configs, todo, cells, records, rep, retries if scheduler else 0, name, version,
                       slots, asked)
    finally:
        rep.close()
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

    rows = []
    for i, cid in enumerate(ids):
        rows.append({"index": i, **records[cid], "resumed": cid in resumed})
    failed = sum(r["status"] != "ok" for r in rows)
    files = [str(out / "results.jsonl"), str(out / "results.csv"), str(out / "sweep.json")]
    atomic_write_text(out / "results.jsonl", "".join(json.dumps(r, allow_nan=False) + "\n" for r in rows))
    atomic_write_text(out / "results.csv", csv_text(rows))
    wall = time.perf_counter() - t_start
    atomic_write_text(out / "sweep.json", json.dumps(_summary(out / "sweep.json", name, cell, version, rows, len(todo),
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
        prev = json.loads(path.read_text())
        runs = [r for r in prev.get("runs", []) if isinstance(r, dict)]
    runs = (runs + [{"finished": _now(), "ran": ran, "failed": failed, "wall_s": wall, "cells_cpu_s": cpu,
                     "cluster": cluster_info, "argv": sys.argv[1:]}])[-100:]
    timed = [r for r in rows if _finite_number(r.get("wall_s"))]
    return {"name": name, "cell": cell, "code_version": version, "cells": len(rows), "ran": ran, "skipped": skipped,
            "failed": failed, "cells_wall_s": sum(r["wall_s"] for r in timed),
            "cells_cpu_s": sum(r["cpu_s"] for r in timed if _finite_number(r.get("cpu_s"))),
            "cells_timed": len(timed), "wall_s": wall, "ran_cells_cpu_s": cpu, "cluster": cluster_info,
            "finished": _now(), "argv": sys.argv[1:], "runs": runs}


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
    # by reference, from the importable module (under ``python -m numerics.sweep`` this module is
    # __main__, whose functions cloudpickle would copy by value)
    execute = importlib.import_module("numerics.sweep").execute_cell

    def submit(i, cid):
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
                   "wall_s": None, "cpu_s": None, "cpu_user_s": None, "cpu_sys_s": None, "finished": _now()}
        fut.release()
        cpu += rec.get("cpu_s") or 0.0
        if resources and resources.get(i):
            rec["resources"] = resources[i]
        rec["code_version"] = version
        rec["digest"] = record_digest(rec)
        records[cid] = rec
        _write_record(cells / f"{cid}.json", rec)
        rep.cell(rec)
        if waiting:
            ac.add(submit(*waiting.pop(0)))
    return cpu


# ------------------------------------------------------------------ grid files

def grid_configs(spec: dict, where: str) -> list[dict]:
    """``fixed`` (shared values), ``grid`` (lists: one cell per combination, in the order written)
    and ``cells`` (explicit configs, after the grid's), each merged over ``fixed``."""
    fixed = spec.get("fixed", {})
    grid = spec.get("grid", {})
    explicit = spec.get("cells", [])
    if not isinstance(fixed, dict):
        raise UsageError(f"{where}: 'fixed' must be a table of values")
    if not isinstance(grid, dict):
        raise UsageError(f"{where}: 'grid' must be a table of lists")
    if not isinstance(explicit, list) or not all(isinstance(c, dict) for c in explicit):
        raise UsageError(f"{where}: 'cells' must be a list of tables")
    for k, v in grid.items():
        if not isinstance(v, list) or not v:
            raise UsageError(f"{where}: grid.{k} must be a non-empty list, got {v!r:.80}")
        if k in fixed:
            raise UsageError(f"{where}: {k!r} is both in 'fixed' and in 'grid'")
    if not grid and not explicit:
        raise UsageError(f"{where}: no cells (give a 'grid' of lists or a list of 'cells')")
    keys = list(grid)
    out = [{**fixed, **dict(zip(keys, combo))} for combo in itertools.product(*(grid[k] for k in keys))] if grid else []
    out += [{**fixed, **c} for c in explicit]
    return out


def _load_table_file(path, label: str) -> dict:
    """A TOML, JSON or YAML file whose top level is a table; UsageError ``"<label> <path>: ..."``."""
    p = Path(path)
    if not p.exists():
        raise UsageError(f"{label} {path}: not found")
    if not p.is_file():
        raise UsageError(f"{label} {path}: is a folder, not a file")
    if p.stat().st_size > LIMITS["grid_bytes"]:
        raise UsageError(f"{label} {path}: larger than {LIMITS['grid_bytes'] // 2**20} MiB")
    suffix = p.suffix.lower()
    try:
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{label} {path}: cannot read ({one_line(e)})") from None
    try:
        if suffix == ".toml":
            try:
                import tomllib
            except ImportError:  # Python 3.10
                import tomli as tomllib
            spec = tomllib.loads(text)
        elif suffix == ".json":
            spec = json.loads(text)
        elif suffix in (".yaml", ".yml"):
            import yaml

            spec = yaml.safe_load(text)
        else:
            raise UsageError(f"{label} {path}: unknown format {suffix or '(no suffix)'}; use .toml, .json, .yaml")
    except UsageError:
        raise
    except Exception as e:  # noqa: BLE001 -- any parser's error is a malformed file
        raise UsageError(f"{label} {path}: not valid {suffix.lstrip('.').upper()} ({one_line(e)})") from None
    if not isinstance(spec, dict):
        raise UsageError(f"{label} {path}: the top level must be a table, not {type(spec).__name__}")
    return spec


def read_grid_file(path: str) -> dict:
    spec = _load_table_file(path, "grid file")
    unknown = set(spec) - {"sweep", "cell", "name", "fixed", "grid", "cells", "resources"}
    if unknown:
        raise UsageError(f"grid file {path}: unknown key(s) {', '.join(sorted(unknown))}; the keys are sweep or "
                         f"cell, name, fixed, grid, cells, resources")
    if "resources" in spec:
        check_resources(spec["resources"], f"grid file {path}")
    if ("sweep" in spec) == ("cell" in spec):
        raise UsageError(f"grid file {path}: give exactly one of 'sweep' (one of {', '.join(SWEEPS)}) or 'cell' "
                         f"('package.module:function')")
    return spec


# ------------------------------------------------------------------ CLI

def adapter(kind: str):
    path, _ = SWEEPS[kind]
    mod, attr = path.split(":")
    return getattr(importlib.import_module(mod), attr)


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
                        f"exit 2 (default {CONNECT_TIMEOUT_S:g}, at most 600)")
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
    return run_main(_main_usage, argv)


def _main_usage(argv) -> int:
    """:func:`_main` with a :class:`SweepInputError` passed on as a plain UsageError: one line, exit
    2, however the SIGINT handler was set when ``run_main`` began (its guard re-yields on a
    ValueError, which a SweepInputError also is)."""
    try:
        return _main(argv)
    except SweepInputError as e:
        raise UsageError(str(e)) from None


def _main(argv) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    top = top_parser()
    if not argv or argv[0].startswith("-"):
        top.parse_args(argv)  # --help, or the error naming what is missing
        raise UsageError(f"give a command first: run, {', '.join(SWEEPS)}")
    top.parse_args(argv[:1])
    command = argv[0]
    p, ad = command_parser(command)
    a = p.parse_args(argv[1:])
    big = a.allow_large
    lim = {**LIMITS, **(LARGE_LIMITS if big else {})}
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
        if not (a.scheduler or a.scheduler_file):
            raise UsageError("--connect-timeout applies to --scheduler only (an address given directly or by "
                             "--scheduler-file; the local cluster and a batch cluster's scheduler are started here)")
        if not (math.isfinite(a.connect_timeout) and 0 < a.connect_timeout <= 600):
            raise UsageError(f"--connect-timeout must be a number of seconds in (0, 600], got {a.connect_timeout:g}")
    if a.jobqueue is None:
        for flag, v in (("--jobs", a.jobs), ("--print-job-script", a.print_job_script or None)):
            if v is not None:
                raise UsageError(f"{flag} applies to --jobqueue only")
    if a.jobs is not None:
        check_range("--jobs", a.jobs, 1, lim["jobs"], override=None if big else ALLOW)
    if a.scheduler:
        _check_scheduler(a.scheduler)
    if a.scheduler_file is not None:
        read_scheduler_file(a.scheduler_file)
    preload = None
    if a.preload != "auto":
        preload = [] if a.preload == "none" else [m.strip() for m in a.preload.split(",")]
        bad = [m for m in preload if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", m)]
        if bad or not preload and a.preload != "none":
            raise UsageError(f"--preload: not a module name: {(bad or [a.preload])[0]!r} (auto, none, or module names)")
        for m in preload:
            try:
                found = importlib.util.find_spec(m) is not None
            except (ImportError, ValueError):
                found = False
            if not found:
                raise UsageError(f"--preload: no module named {m!r} here")
    name = command
    resources = None
    if command == "run":
        spec = read_grid_file(a.grid)
        name = str(spec.get("name") or Path(a.grid).stem)
        if not re.fullmatch(r"[\w.\-]{1,64}", name):
            raise UsageError(f"grid file {a.grid}: name {name!r} must be 1 to 64 letters, digits, '.', '-', '_'")
        configs = grid_configs(spec, f"grid file {a.grid}")
        _check_count(len(configs), lim, big)
        if "sweep" in spec:
            if spec["sweep"] not in SWEEPS:
                raise UsageError(f"grid file {a.grid}: unknown sweep {spec['sweep']!r}; choose one of "
                                 f"{', '.join(SWEEPS)}")
            ad = adapter(spec["sweep"])
            configs = [ad.check(c, allow_large=big, where=f"grid file {a.grid}, cell {i}")
                       for i, c in enumerate(configs)]
            cell = ad.cell
        else:
            cell = spec["cell"]
            load_cell(cell)
        extra = check_resources(spec.get("resources"), f"grid file {a.grid}")
        if extra:
            def resources(config, extra=extra):
                return {**(cell_resources(config) or {}), **extra}
    else:
        configs = ad.configs(a)
        _check_count(len(configs), lim, big)
        configs = [ad.check(c, allow_large=big, where=f"cell {i}") for i, c in enumerate(configs)]
        cell = ad.cell
    ids = _check_configs(cell, configs)
    check_out(a.out)
    jobqueue = None
    if a.jobqueue is not None:
        rule = _resource_rule(resources)
        jobqueue = read_jobqueue_config(a.jobqueue, {k for c in configs for k in (rule(c) or {})})
        if a.print_job_script:
            sys.stdout.write(jobqueue.script if jobqueue.script.endswith("\n") else jobqueue.script + "\n")
            return 0
        if not a.list:
            check_submit_command(jobqueue)
    if a.list:
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
    res = run_grid(cell, configs, a.out, workers=a.workers, scheduler=a.scheduler, retries=a.retries,
                   progress=False if a.quiet else None, name=name,
                   connect_timeout=CONNECT_TIMEOUT_S if a.connect_timeout is None else a.connect_timeout,
                   preload=preload, scheduler_file=a.scheduler_file, jobqueue=jobqueue, jobs=a.jobs or 1,
                   resources=resources)
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


def _check_count(n: int, lim: dict, big: bool) -> None:
    if n > lim["cells"]:
        raise UsageError(f"the grid has {n:,} cells, above the limit {lim['cells']:,}"
                         + ("" if big else f" (pass {ALLOW} to allow more)"))


# ------------------------------------------------------------------ helpers for the adapters

def split_list(flag: str, s, conv=str, *, allow_large: bool = False, limit: int = 64) -> list:
    """A comma-separated CLI list: non-empty items, converted, duplicates dropped, finite numbers."""
    items = [t.strip() for t in str(s).split(",")]
    if not any(items):
        raise UsageError(f"{flag} is empty")
    if not all(items):
        raise UsageError(f"{flag}: empty item in {s!r}")
    try:
        vals = [conv(t) for t in items]
    except (ValueError, OverflowError):
        raise UsageError(f"{flag}: not a list of {getattr(conv, '__name__', 'valid')} values: {s!r}") from None
    if any(isinstance(v, float) and not math.isfinite(v) for v in vals):
        raise UsageError(f"{flag} must be finite numbers, got {s!r}")
    vals = list(dict.fromkeys(vals))
    if not allow_large and len(vals) > limit:
        raise UsageError(f"{flag} has {len(vals)} values, above the limit {limit} (pass {ALLOW} to allow more)")
    return vals


def product(**lists) -> list[dict]:
    """One config per combination of the lists (the first key varies slowest)."""
    keys = list(lists)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(lists[k] for k in keys))]


def config_argv(config: dict, keys: dict[str, str], where: str) -> list[str]:
    """A config as command-line flags: ``keys`` maps each accepted key to its flag (``""`` for the
    positional argument); True is a bare flag, False/None leave it out; unknown keys are refused."""
    unknown = [k for k in config if k not in keys]
    if unknown:
        raise UsageError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; accepted: {', '.join(keys)}")
    argv, pos = [], []
    for k, flag in keys.items():
        if k not in config:
            continue
        v = config[k]
        if isinstance(v, (dict,)) or (isinstance(v, list) and flag == ""):
            raise UsageError(f"{where}: {k} must be a single value, got {v!r:.80}")
        if flag == "":
            pos.append(str(v))
        elif v is True:
            argv.append(flag)
        elif v is False or v is None:
            continue
        elif isinstance(v, list):
            argv.append(f"{flag}={','.join(str(t) for t in v)}")
        else:
            argv.append(f"{flag}={v}")
    return pos + argv


if __name__ == "__main__":
    from polyverify.cli import exit_with

    exit_with(main)
