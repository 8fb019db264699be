"""The library's source files read as syntax trees (nothing imported), shared by the layering and the
private-name tests: the project's packages, each file's module name, and the module an ``ImportFrom``
names (a relative import resolved against the file's package)."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ("polyverify", "circuits", "constructions", "numerics", "verify")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_of(path: Path) -> str:
    """The package a relative import in ``path`` starts from."""
    name = module_name(path)
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def imported_module(node: ast.ImportFrom, package: str) -> str:
    """The dotted module ``node`` imports from (``from ..x import y`` in package ``a.b.c``: ``a.b.x``)."""
    if not node.level:
        return node.module or ""
    base = package.split(".")
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def library_files():
    for top in PROJECT:
        yield from sorted((ROOT / top).rglob("*.py"))
