"""The import layering the package docstrings state, read from every library file's import
statements (nothing imported): ``polyverify.plumbing`` at the bottom imports no other part of the
project, ``polyverify.sweep`` only the plumbing, ``circuits`` only the plumbing, ``constructions``
circuits and the plumbing, ``numerics`` and ``verify`` what lies below them, and only
``polyverify.torch`` (the facade at the top) reaches up into ``constructions``."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.polyverify.source_tree import PROJECT, ROOT, imported_module, library_files, module_name, package_of

#: layer -> the layers its files may import (besides its own)
ALLOWED = {
    "polyverify.plumbing": set(),
    "polyverify.sweep": {"polyverify.plumbing"},
    "circuits": {"polyverify.plumbing"},
    "constructions": {"polyverify.plumbing", "circuits"},
    "numerics": {"polyverify.plumbing", "polyverify.sweep", "circuits", "constructions", "polyverify.torch"},
    "verify": {"polyverify.plumbing", "polyverify.sweep", "circuits", "constructions", "numerics",
               "polyverify.torch"},
    "polyverify.torch": {"polyverify.plumbing", "circuits", "constructions"},
}


def layer_of(module: str) -> str | None:
    for layer in sorted(ALLOWED, key=len, reverse=True):
        if module == layer or module.startswith(layer + "."):
            return layer
    return None



def imports_of(path: Path, source: str | None = None) -> set[str]:
    package = package_of(path)
    out = set()
    for node in ast.walk(ast.parse(path.read_text() if source is None else source)):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            mod = imported_module(node, package)
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)  # `from pkg import submodule`
    return {m for m in out if m.split(".")[0] in PROJECT}




def test_every_library_file_has_a_layer():
    assert [str(p) for p in library_files() if layer_of(module_name(p)) is None] == [
        str(ROOT / "polyverify" / "__init__.py")]


@pytest.mark.parametrize("path", list(library_files()), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_flow_one_way(path):
    if layer_of(module_name(path)) is None:  # polyverify/__init__.py: the docstring, which imports nothing
        assert imports_of(path) == set()
        return
    assert upward(path) == [], f"{module_name(path)} imports from a layer above it"


def upward(path: Path, source: str | None = None) -> list[str]:
    own = layer_of(module_name(path))
    return sorted(m for m in imports_of(path, source)
                  if layer_of(m) != own and layer_of(m) not in ALLOWED[own] and m != "polyverify")


def test_the_check_sees_an_upward_import():
    """The check can fail: the plumbing's cli.py with one import of constructions added is caught,
    and so is a relative import that climbs out of its package."""
    cli = ROOT / "polyverify" / "plumbing" / "cli.py"
    assert upward(cli) == []
    assert upward(cli, cli.read_text() + "\nfrom constructions.layers import BaseConv\n") == [
        "constructions.layers", "constructions.layers.BaseConv"]
    sweep = ROOT / "polyverify" / "sweep" / "base.py"
    assert upward(sweep, "from ..torch import load_module\n") == [
        "polyverify.torch", "polyverify.torch.load_module"]
