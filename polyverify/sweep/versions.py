"""Which code made a cell's record: the hash of the sources of a cell's module and of every module
of the project it imports (read from the import statements, nothing imported), each record's
digest and its check before it is reused, and the workers' own versions."""
from __future__ import annotations

import ast
import contextlib
import hashlib
import importlib
import importlib.util
import json
import os
import stat
import sys
from pathlib import Path

from polyverify.plumbing.cli import atomic_write_text, one_line

from .base import SweepInputError, finite_number, canonical, not_a_regular_file

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

def check_record(path: Path, cell: str, cid: str, config: dict, version: dict) -> tuple[dict | None, str | None]:
    """A finished record that may be reused for this cell, or ``(None, why not)``; ``(None, None)``
    when there is none (a missing file, a failed cell: run again, nothing to warn about).  Only a
    regular file is read (a FIFO would block the run, /dev/zero never end); anything else there is
    ``(None, why)`` (the command refuses it before any work: ``check_record_paths``)."""
    try:
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            return None, not_a_regular_file(mode)
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
    if not all(finite_number(rec.get(k)) and rec[k] >= 0 for k in ("wall_s", "cpu_s")):
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


def write_record(path: Path, rec: dict) -> None:
    """Write a cell's record ``rec`` as JSON (no NaN or infinity) to ``path``, atomically."""
    atomic_write_text(path, json.dumps(rec, indent=1, allow_nan=False) + "\n")

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
    fn = importlib.import_module("polyverify.sweep.versions").worker_version  # by reference, not a copy
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
