"""No library module uses another module's private names (issue 40, item 3): what two modules share
is public in the module that owns it.  Read from every library file's syntax tree (nothing imported):
an ``ImportFrom`` of the project (relative or absolute) whose imported name starts with one underscore,
and an attribute ``m._name`` on a name bound to a project module (``import a.b as m``, ``from a import
b``), or on a dotted path through one (``m.Class._name``).  Dunder names (``__version__``) are not
private; a public name imported under a private alias (``from x import y as _y``) is not a use of a
private name."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.polyverify.source_tree import PROJECT, ROOT, imported_module, library_files, package_of

#: The private names a file may still import, each (importing file, "defining.module.name"): none.  An
#: entry is for a name shared with a file being edited elsewhere, renamed once that file is free
#: (test_the_allow_list_holds_no_stale_entry says when an entry has gone stale).
ALLOWED: set = set()


def is_module(dotted: str) -> bool:
    p = ROOT.joinpath(*dotted.split("."))
    return p.with_suffix(".py").is_file() or (p / "__init__.py").is_file()


def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_uses(path: Path, source: str | None = None) -> list[tuple[int, str]]:
    """``(line, "module.private_name")`` for each use of another module's private name in ``path``
    (``source``: its text instead of the file's)."""
    package = package_of(path)
    tree = ast.parse(path.read_text() if source is None else source)
    found, modules = [], {}  # modules: local name -> the project module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in PROJECT:
                    if a.asname:
                        modules[a.asname] = a.name
                    else:  # `import a.b.c` binds `a`
                        modules[a.name.split(".")[0]] = a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            mod = imported_module(node, package)
            if mod.split(".")[0] not in PROJECT:
                continue
            for a in node.names:
                if private(a.name):
                    found.append((node.lineno, f"{mod}.{a.name}"))
                elif is_module(f"{mod}.{a.name}"):
                    modules[a.asname or a.name] = f"{mod}.{a.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr):
            chain, base = [], node.value
            while isinstance(base, ast.Attribute):
                chain.append(base.attr)
                base = base.value
            if isinstance(base, ast.Name) and base.id in modules:
                found.append((node.lineno, ".".join([modules[base.id], *reversed(chain), node.attr])))
    return sorted(set(found))




def all_uses() -> set[tuple[str, str]]:
    return {(str(p.relative_to(ROOT)), what) for p in library_files() for _, what in private_uses(p)}


def test_no_library_module_uses_another_modules_private_names():
    unexpected = sorted(all_uses() - ALLOWED)
    assert unexpected == [], ("private names used across modules (make the name public in the module that "
                              f"owns it, with a docstring line): {unexpected}")


def test_the_allow_list_holds_no_stale_entry():
    assert sorted(ALLOWED - all_uses()) == [], "these leftovers are gone: remove them from ALLOWED"


@pytest.mark.parametrize("line, what", [
    ("from verify.prover.rings import _poly", "verify.prover.rings._poly"),
    ("from .rings import SymbolicProblem, _poly", "verify.prover.rings._poly"),
    ("from ..compiler_report_sections import _helper as h", "verify.compiler_report_sections._helper"),
    ("import constructions.ops as O\nO._hidden(1)", "constructions.ops._hidden"),
    ("from constructions import layers\nlayers.BaseConv._fields", "constructions.layers.BaseConv._fields"),
    ("import verify.prover.kernel\nverify.prover.kernel._seal", "verify.prover.kernel._seal"),
    ("def f():\n    from .locate import _blame\n    return _blame", "verify.prover.locate._blame"),
])
def test_an_injected_private_import_is_caught(line, what):
    path = ROOT / "verify" / "prover" / "cover.py"
    clean = path.read_text()
    assert what not in [w for _, w in private_uses(path, clean)]
    assert what in [w for _, w in private_uses(path, clean + "\n" + line + "\n")]


@pytest.mark.parametrize("line", [
    "from .kernel import is_zero as _is_zero",  # a public name under a private alias
    "from constructions import __version__",  # dunder
    "import numpy as np\nnp._NoValue",  # not the project
    "self._cache = {}",  # an object's own attribute
])
def test_what_is_not_a_private_import_passes(line):
    path = ROOT / "verify" / "prover" / "cover.py"
    clean = path.read_text()
    assert private_uses(path, clean + "\n" + line + "\n") == private_uses(path, clean)
