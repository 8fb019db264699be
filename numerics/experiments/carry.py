"""Carrying an experiment's cell records over to this code version, verified
(``python -m numerics.experiments NAME --carry REV --out DIR``).

The sweep runner reuses a record only where the same code made it (:func:`polyverify.sweep.check_record`:
the record's code version, a hash of every source file its cell's module reaches, must be the running
one's).  A change anywhere in that closure, a report's wording included, makes every record of the grid
stale, and a grid of hours would be trained again to add one cell.  This module is the one way to carry a
record past that check, and it carries it only where a program has verified that the code the cell runs
is unchanged:

1. ``REV`` (a commit) is the code that made the record: the code version computed from ``REV``'s own sources
   with ``REV``'s own ``code_version`` (:func:`version_at`, in a child process on ``git archive REV``) must
   equal the version the record was made by (its ``made_by`` where an earlier carry kept it there, else
   its ``code_version``); and the record's digest must match what it says;
2. the cell's code at ``REV`` and here are the same (:func:`cell_code`): every top-level definition the
   cell function reaches, through the names it and they use and the project modules they import (in
   functions too), compared as syntax trees without docstrings (so a moved module, a comment or a
   docstring does not count as a change; a changed statement does), wherever the definition lives;
3. each record that passes is written to ``DIR/cells/<id>.json`` with this version's code version, its
   original version in ``made_by`` and the verification in ``carried`` (the commit, the cell code's
   digest, the command), its digest recomputed; the runner then reuses it as it reuses its own.

What is not compared: the other packages (torch, numpy: the runner's code version does not hash them
either), package ``__init__`` files and module-level statements that are no definition a cell reaches
(registrations), and code reached by name at run time (``getattr``, strings).  Where the check fails the
command writes nothing and names the first definitions that differ (exit status 1).
"""
from __future__ import annotations

import ast
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from polyverify.plumbing.cli import UsageError
from polyverify.sweep import PROJECT_PACKAGES, canonical, code_version, record_digest
from polyverify.sweep.versions import write_record

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------ reading sources at a commit or here

def resolve_commit(rev: str, root: Path = ROOT) -> str:
    """The full hash of commit ``rev`` in the repository at ``root``; a UsageError where it names none."""
    if not rev or rev.startswith("-"):
        raise UsageError(f"--carry {rev!r}: not a commit")
    try:
        out = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], cwd=root,
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        raise UsageError(f"--carry {rev}: git cannot be run here ({e})") from None
    if out.returncode != 0 or not out.stdout.strip():
        raise UsageError(f"--carry {rev}: not a commit of the repository at {root}")
    return out.stdout.strip()


def git_reader(commit: str, root: Path = ROOT):
    """``read(relative path) -> bytes | None``: the file at ``commit``."""
    def read(path: str):
        out = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=root, capture_output=True, timeout=60)
        return out.stdout if out.returncode == 0 else None
    return read


def tree_reader(root: Path = ROOT):
    """``read(relative path) -> bytes | None``: the file in the working tree at ``root``."""
    def read(path: str):
        p = root / path
        return p.read_bytes() if p.is_file() else None
    return read


def version_at(commit: str, cell: str, root: Path = ROOT) -> dict:
    """The code version ``commit``'s own sweep runner would record for ``cell``: the project's packages at
    ``commit`` (``git archive``) in a temporary folder, ``code_version`` imported from there in a child
    process (so the algorithm and the sources are both the commit's).  A UsageError where it cannot be
    computed."""
    with tempfile.TemporaryDirectory(prefix="carry-") as tmp:
        arch = subprocess.run(["git", "archive", "--format=tar", commit, *PROJECT_PACKAGES], cwd=root,
                              capture_output=True, timeout=300)
        if arch.returncode != 0:
            raise UsageError(f"--carry {commit[:12]}: git archive failed ({arch.stderr.decode(errors='replace')[:200]})")
        subprocess.run(["tar", "-x", "-C", tmp], input=arch.stdout, check=True, timeout=300)
        code = ("import json, sys\nsys.path.insert(0, sys.argv[1])\n"
                "from polyverify.sweep import code_version\n"
                "print(json.dumps(code_version(sys.argv[2])))\n")
        env = {**os.environ, "PYTHONPATH": tmp}
        out = subprocess.run([sys.executable, "-c", code, tmp, cell], cwd=tmp, env=env, capture_output=True,
                             text=True, timeout=300)
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise UsageError(f"--carry {commit[:12]}: its code version of {cell} cannot be computed ({last[:200]})")
    return json.loads(out.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------ the code a cell runs

def _module_source(name: str, read) -> tuple[bytes | None, bool]:
    """The source of module ``name`` (``a/b.py`` or ``a/b/__init__.py``) and whether it is a package."""
    path = name.replace(".", "/")
    src = read(f"{path}.py")
    if src is not None:
        return src, False
    src = read(f"{path}/__init__.py")
    return src, src is not None


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree


def _top_level(tree: ast.Module) -> list[ast.stmt]:
    """The module's top-level statements, those inside top-level ``if``, ``try`` and ``with`` blocks included."""
    out, todo = [], list(tree.body)
    while todo:
        st = todo.pop(0)
        if isinstance(st, (ast.If, ast.Try, ast.With)):
            todo[:0] = [*st.body, *getattr(st, "orelse", []), *getattr(st, "finalbody", []),
                        *(s for h in getattr(st, "handlers", []) for s in h.body)]
        else:
            out.append(st)
    return out


def _bound(st: ast.stmt) -> list[str]:
    """The names a top-level statement binds."""
    if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [st.name]
    if isinstance(st, (ast.Import, ast.ImportFrom)):
        return [a.asname or a.name.split(".")[0] for a in st.names]
    targets = st.targets if isinstance(st, ast.Assign) else [st.target] if isinstance(st, (ast.AnnAssign, ast.AugAssign)) else []
    return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


def _resolve(node: ast.ImportFrom, module: str, is_pkg: bool) -> str:
    if not node.level:
        return node.module or ""
    parts = (module if is_pkg else module.rpartition(".")[0]).split(".")
    base = ".".join(parts[:len(parts) - (node.level - 1)])
    return f"{base}.{node.module}" if node.module else base


def _project(name: str) -> bool:
    return name.split(".")[0] in PROJECT_PACKAGES


def cell_code(cell: str, read) -> dict[str, int]:
    """The code the cell function ``cell`` (``"package.module:function"``) runs, as a multiset of
    ``"name sha256"`` keys (values: how many times): every top-level definition of the project it reaches,
    from the function through the names its statements use (a name bound at the top level of the module
    reached), the project modules imported by those statements (in functions too: ``from M import x``
    reaches M's ``x``, or all of M where ``x`` is a module; ``import M`` all of M), each compared as its
    syntax tree without docstrings.  The module a definition lives in is not part of its key, so a module
    moved with its definitions unchanged reads the same.  ``read``: :func:`git_reader` or
    :func:`tree_reader`."""
    mod, func = cell.split(":")
    parsed: dict = {}

    def load(name):
        if name not in parsed:
            src, is_pkg = _module_source(name, read)
            tree = None if src is None else _strip_docstrings(ast.parse(src))
            parsed[name] = (tree, is_pkg, {} if tree is None else _index(tree))
        return parsed[name]

    def _index(tree):
        idx: dict = {}
        for st in _top_level(tree):
            for n in _bound(st):
                idx.setdefault(n, []).append(st)
        return idx

    out: dict[str, int] = {}
    seen_units, seen_stmts = set(), set()
    todo = [(mod, func)]
    while todo:
        unit = todo.pop()
        if unit in seen_units:
            continue
        seen_units.add(unit)
        name, what = unit
        tree, is_pkg, idx = load(name)
        if tree is None:
            key = f"missing {name}:{what}"
            out[key] = out.get(key, 0) + 1
            continue
        stmts = _top_level(tree) if what == "*" else idx.get(what, [])
        if not stmts:
            key = f"unbound {what}"
            out[key] = out.get(key, 0) + 1
        for st in stmts:
            if isinstance(st, (ast.Import, ast.ImportFrom)):  # one statement may bind several names: each its own
                todo.extend(_targets(st, name, is_pkg, None if what == "*" else what, load))
                continue
            if (name, id(st)) in seen_stmts:
                continue
            seen_stmts.add((name, id(st)))
            key = f"{'/'.join(_bound(st)) or type(st).__name__} {hashlib.sha256(ast.dump(st).encode()).hexdigest()[:16]}"
            out[key] = out.get(key, 0) + 1
            for node in ast.walk(st):
                if isinstance(node, ast.Name) and node.id in idx:
                    todo.append((name, node.id))
                elif isinstance(node, (ast.Import, ast.ImportFrom)):
                    todo.extend(_targets(node, name, is_pkg, None, load))
    return out


def _targets(node, module: str, is_pkg: bool, only, load) -> list[tuple[str, str]]:
    """The units an import statement reaches (only the alias binding ``only`` where given)."""
    out = []
    if isinstance(node, ast.Import):
        for a in node.names:
            if (only is None or (a.asname or a.name.split(".")[0]) == only) and _project(a.name):
                out.append((a.name, "*"))
        return out
    base = _resolve(node, module, is_pkg)
    if not _project(base or "x"):
        return out
    for a in node.names:
        if only is not None and (a.asname or a.name) != only:
            continue
        if a.name == "*":
            out.append((base, "*"))
        elif load(f"{base}.{a.name}")[0] is not None:  # a submodule: all of it
            out.append((f"{base}.{a.name}", "*"))
        else:
            out.append((base, a.name))
    return out


def code_digest(code: dict[str, int]) -> str:
    return hashlib.sha256(canonical(code).encode()).hexdigest()[:16]


def code_difference(old: dict[str, int], new: dict[str, int], limit: int = 6) -> str:
    """The definitions that differ between two :func:`cell_code` multisets, named (at most ``limit``)."""
    gone = sorted(k.split(" ")[0] for k in old if old[k] != new.get(k, 0))
    added = sorted(k.split(" ")[0] for k in new if new[k] != old.get(k, 0))
    names = sorted(set(gone) | set(added))
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


# ------------------------------------------------------------------ the command

def origin(rec: dict) -> dict:
    """The code version that made ``rec``: its ``made_by`` where an earlier carry kept it, else its
    ``code_version``."""
    made = rec.get("made_by")
    return made if isinstance(made, dict) else (rec.get("code_version") or {})


def carry(module, out_dir: Path, revs: list[str], command: str, root: Path = ROOT, say=print) -> int:
    """Carry ``out_dir/results.jsonl``'s records of ``module``'s cell made by the code of one of ``revs`` to
    this code version (the module docstring's three steps), into ``out_dir/cells/``.  Exit status 0 when
    every record is carried or already this version's, 1 when the code check refused (nothing written)."""
    results = Path(out_dir) / "results.jsonl"
    if not results.is_file():
        raise UsageError(f"--out {out_dir}: holds no results.jsonl (the records to carry)")
    commits = [resolve_commit(r, root) for r in revs]
    cell = f"{module.__name__}:cell"
    rows = []
    for i, line in enumerate(results.read_text().splitlines()):
        try:
            rows.append(json.loads(line))
        except ValueError:
            raise UsageError(f"{results}: line {i + 1} is not JSON") from None
    now = code_version(cell)
    here = cell_code(cell, tree_reader(root))
    todo = [r for r in rows if r.get("status") == "ok" and r.get("cell") == cell]
    bad = [r["id"] for r in todo if r.get("digest") != record_digest(r)]
    if bad:
        raise UsageError(f"{results}: {len(bad)} record(s) do not match their digest (first {bad[0]}): not carried")
    current = [r for r in todo if origin(r).get("sources") == now["sources"] and not r.get("made_by")]
    plan: dict[str, list] = {}
    for commit in commits:
        v = version_at(commit, cell, root)
        mine = [r for r in todo if r not in current and origin(r).get("sources") == v["sources"]]
        say(f"{commit[:12]}: code version {v['sources']}; {len(mine)} record(s) made by it")
        if not mine:
            continue
        there = cell_code(cell, git_reader(commit, root))
        if there != here:
            say(f"refused: the code cell {cell} runs differs between {commit[:12]} and this tree "
                f"({code_difference(there, here)}); nothing written")
            return 1
        plan[commit] = (mine, code_digest(here))
    left = [r for r in todo if r not in current and not any(r in m for m, _ in plan.values())]
    cells = Path(out_dir) / "cells"
    cells.mkdir(exist_ok=True)
    n = 0
    for commit, (mine, digest) in plan.items():
        for r in mine:
            o = origin(r)
            rec = {k: v for k, v in r.items() if k not in ("index", "resumed")}
            rec["made_by"] = {"package": o.get("package"), "sources": o.get("sources"), "modules": o.get("modules"),
                              "finished": (r.get("made_by") or {}).get("finished") or str(r.get("finished"))[:10]}
            rec["carried"] = {"commit": commit, "cell_code": digest, "command": command}
            rec["code_version"] = now
            rec["digest"] = record_digest(rec)
            write_record(cells / f"{r['id']}.json", rec)
            n += 1
    for r in current:
        if not (cells / f"{r['id']}.json").exists():
            write_record(cells / f"{r['id']}.json", {k: v for k, v in r.items() if k not in ("index", "resumed")})
    say(f"carried {n} record(s) to code version {now['sources']} in {cells}; {len(current)} already this version's"
        + (f"; {len(left)} made by other code (versions "
           + ", ".join(sorted({str(origin(r).get('sources')) for r in left})) + "): not carried" if left else ""))
    return 0


__all__ = ["carry", "cell_code", "code_difference", "code_digest", "git_reader", "origin", "resolve_commit",
           "tree_reader", "version_at"]
