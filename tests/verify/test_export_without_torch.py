"""torch is the ``torch`` extra (issue 44 item 5, pyproject.toml): the core (gd, import of .safetensors, the
proofs, exports to .safetensors / .npz) runs with torch unimportable, and a torch checkpoint is refused in one
line naming the extra, before any work, where torch is missing.  (A scratch venv without torch ran the README's
``python -m verify.construct gd --layers 100``, circuit --export / import --circuit and import --from alone.)"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from verify import cli_common
from verify.importers.common import ImportRefused, load_tensors

REPO = Path(__file__).resolve().parents[2]
#: python with torch unimportable (``import torch`` raises ImportError), running a module's command line
NO_TORCH = "import runpy, sys; sys.modules['torch'] = None; sys.argv = sys.argv[1:]; runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)"


def _run(*args, cwd):
    return subprocess.run([sys.executable, "-c", NO_TORCH, *args], capture_output=True, text=True, cwd=cwd,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, timeout=300)


def test_the_core_runs_without_torch(tmp_path):
    r = _run("verify.construct", "gd", "--layers", "7", "--n", "4", "--d", "2", "--export", "gd.safetensors",
             "--format", "precision-ls", cwd=tmp_path)
    assert r.returncode == 0 and "proof: PROVED" in r.stdout, r.stderr[-2000:]
    r = _run("verify.construct", "import", "gd.safetensors", "--from", "precision-ls", "--no-search", cwd=tmp_path)
    assert r.returncode == 0 and "verdict: PROVED" in r.stdout, r.stderr[-2000:]
    r = _run("verify.construct", "gd", "--layers", "7", "--n", "4", "--d", "2", "--export", "gd.pt", "--format",
             "precision-ls", cwd=tmp_path)
    assert r.returncode == 2 and "pip install 'polyverify[torch]'" in r.stderr and "Traceback" not in r.stderr
    assert "proof:" not in r.stdout and not (tmp_path / "gd.pt").exists()  # refused before any work


def test_a_torch_checkpoint_without_torch_is_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(cli_common, "torch_installed", lambda: False)
    assert "polyverify[torch]" in cli_common.export_suffix_problem(tmp_path / "w.pt", "precision-ls")
    assert cli_common.export_suffix_problem(tmp_path / "w.safetensors", "precision-ls") is None
    (tmp_path / "w.pt").write_bytes(b"PK\x03\x04")
    with pytest.raises(ImportRefused, match=r"w\.pt: a torch checkpoint is read with torch, which is not installed"):
        load_tensors(tmp_path / "w.pt", "precision-ls")


def test_torch_is_an_extra_that_the_test_extra_brings():
    tomllib = pytest.importorskip("tomllib", reason="Python 3.11's TOML reader (pyproject.toml)")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if d.startswith("torch")]
    extras = project["optional-dependencies"]
    assert extras["torch"] == ["torch>=2.2"] and "polyverify[torch]" in extras["test"]
