"""docs/quickstart.py, the README's "Quick start from Python": the README shows the script's code,
and the script runs as written (every target proved, float32 close to the exact values, the exports
written and read back)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "docs" / "quickstart.py"


def _code(text: str) -> str:
    return text[text.index("from fractions import Fraction"):]


def test_the_readme_shows_the_scripts_code():
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Quick start from Python"):]
    block = re.search(r"```python\n(.*?)```", section, re.S)[1]
    assert block == _code(SCRIPT.read_text())
    assert readme.index("## Quick start from Python") > readme.index("## A short tour")


def test_the_quick_start_runs_as_written(tmp_path):
    pytest.importorskip("torch", reason="the quick start loads a torch module")
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = subprocess.run([sys.executable, str(SCRIPT)], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    from constructions.compiler import TARGETS

    rows = {m[1]: m for m in (re.fullmatch(r"(\S+): (\d+) layers, (PROVED|FAILED), float32 max error (\S+)", s)
                              for s in lines) if m}
    assert set(rows) == set(TARGETS)
    for m in rows.values():  # float32: the inputs exact, each product and sum rounded
        assert m[3] == "PROVED" and int(m[2]) >= 1 and float(m[4]) < 1e-5
    torch_line = re.fullmatch(r"torch: (\d+) parameters, max error (\S+)", lines[-1])
    assert torch_line and int(torch_line[1]) > 0 and float(torch_line[2]) < 1e-12
    assert (tmp_path / "out" / "dot.safetensors").is_file()
    from verify.importers import precision_ls

    imp = precision_ls.read(tmp_path / "out" / "dot-mlp.pt", {})  # precision-ls's file, its config inside
    assert imp.layers and imp.conventions["causal"]["from"] == "config in the file"
