"""The named sweeps are registered from above: the runner (polyverify.sweep) imports no command."""
from __future__ import annotations

import ast
from pathlib import Path

import polyverify.sweep as sweep_pkg
from polyverify.sweep import adapter, named_sweeps

RUNNER = Path(sweep_pkg.__file__).parent


def test_the_project_packages_register_their_sweeps_in_order():
    assert list(named_sweeps()) == ["roundoff", "train", "compare", "catalogue"]
    for name, (path, summary) in named_sweeps().items():
        ad = adapter(name)
        assert summary and ad.cell.split(":")[0] == path.split(":")[0], name
        for attr in ("description", "add_arguments", "configs", "check"):
            assert callable(getattr(ad, attr)) or isinstance(getattr(ad, attr), str), (name, attr)


def test_the_runner_imports_only_polyverify_and_the_standard_library():
    others = {"numerics", "verify", "constructions", "circuits"}
    for f in RUNNER.glob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            assert not {n.split(".")[0] for n in names} & others, (f.name, names)
        assert "verify." not in f.read_text().replace("polyverify.", ""), f.name  # no command named as a string
