"""Shared by the bench smoke tests: a script of ``bench/`` loaded as a module (the one a test
module names in ``BENCH``, or any by name), its ``main`` run end to end with ``--json`` into a
temporary file, and the check that it refuses bad arguments (exit 2, one line ``error: ...`` on
stderr, nothing on stdout)."""
import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load(script: str):
    """``bench/<script>`` as a fresh module (the scripts are not a package)."""
    spec = importlib.util.spec_from_file_location(Path(script).stem, ROOT / "bench" / script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def load_bench():
    return load


@pytest.fixture
def bench(request):
    """The script the test module names in ``BENCH``."""
    return load(request.module.BENCH)


@pytest.fixture
def run_json(bench, tmp_path, capsys):
    """``run_json(args)``: ``bench.main(args + ["--json", file])`` exits 0; its stdout and the
    JSON it wrote."""
    def run(args):
        out = tmp_path / "bench.json"
        assert bench.main([*args, "--json", str(out)]) == 0
        return capsys.readouterr().out, json.loads(out.read_text())
    return run


@pytest.fixture
def refused(bench, capsys):
    """``refused(args, msg)``: ``bench.main(args)`` exits 2 with one line on stderr,
    ``error: ...`` naming ``msg``, and nothing on stdout."""
    def check(args, msg=""):
        assert bench.main(args) == 2
        cap = capsys.readouterr()
        assert cap.out == "" and cap.err.count("\n") == 1 and cap.err.startswith("error: ") and msg in cap.err, \
            cap.err
    return check
