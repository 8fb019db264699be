"""Ctrl-C: every CLI ends with one line ``interrupted`` on stderr, exit status
130, no traceback (from the command, its proof child or a Dask cluster's shutdown), no output
file and no folder it created left behind, and no child process left running.

Tested for real: the command is started as ``python -m ...`` in a session of its own, and once it
is at work (a progress line, its proof child running, or, for the commands whose work takes under
a second, a step of it made slow by a launcher that then runs the module's real ``__main__``
block), SIGINT goes to the whole process group, as a terminal's Ctrl-C does.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
READY = "ready-to-interrupt"

#: runs ``python -m MODULE ARGS`` with one function made slow: it says READY on stderr, then waits
#: (the SIGINT lands inside the command's work, wherever that function is called)
LAUNCHER = r"""
import importlib, runpy, sys, time
target, module, *args = sys.argv[1:]
mod, attr = target.split(":")
m = importlib.import_module(mod)
orig = getattr(m, attr)
def slow(*a, **kw):
    sys.stderr.write("%s\n"); sys.stderr.flush()
    time.sleep(120)
    return orig(*a, **kw)
setattr(m, attr, slow)
sys.argv = [module, *args]
runpy.run_module(module, run_name="__main__", alter_sys=True)
""" % READY


def _circuit(tmp: Path) -> Path:
    """(x0 + ... + x7)^24: its exact proof (in a child process) runs for seconds (14 s here)."""
    nodes = [{"id": i, "op": "input", "name": f"x{i}"} for i in range(8)]
    nodes += [{"id": "s", "op": "add"}, {"id": "y", "op": "mul", "output": "y"}]
    links = [{"source": i, "target": "s"} for i in range(8)] + [{"source": "s", "target": "y", "mult": 24}]
    path = tmp / "sum_power.json"
    path.write_text(json.dumps({"directed": True, "multigraph": False, "graph": {}, "nodes": nodes, "links": links}))
    return path


# (id, argv after python, how to tell it is at work, the outputs that must not exist afterwards)
CASES = [
    ("gd", ["-m", "verify.construct", "gd", "--layers", "30001", "--batch", "256", "--json", "{tmp}/new/r.json"],
     ("stderr", "run: started"), ["new"]),
    ("circuit", ["-m", "verify.construct", "circuit", "--graph", "{circuit}", "--json", "{tmp}/new/r.json"],
     ("child",), ["new"]),
    ("errata", ["-c", LAUNCHER, "constructions.catalogue:errata", "verify.errata", "--json", "{tmp}/new/e.json",
                "--markdown", "{tmp}/e.md"], ("stderr", READY), ["new", "e.md"]),
    ("random", ["-c", LAUNCHER, "circuits.graph:validate", "circuits.random", "--gates", "2000",
                "--out", "{tmp}/new/c.json"], ("stderr", READY), ["new"]),
    ("roundoff", ["-m", "numerics.roundoff", "baseconv", "--layers", "301", "--dtypes", "float64", "--out",
                  "{tmp}/new/ro"], ("stderr", "gd-baseconv: started"), ["new"]),
    ("train", ["-m", "numerics.train", "gradient", "--out", "{tmp}/new/run", "--steps", "100000", "--batch", "64",
               "--width", "16", "--eval-every", "100000"], ("stderr", "started"), []),  # keeps whole files: below
    ("sweep", ["-m", "numerics.sweep", "train", "--steps", "100000", "--set", "batch=16", "--set",
               "eval_every=100000", "--widths", "8", "--out", "{tmp}/new/sw", "--workers", "1"],
     ("stderr", "to run on a local cluster"), ["new/sw/results.csv", "new/sw/sweep.json", "new/sw/results.jsonl"]),
]


def _children(pid: int) -> list[int]:
    try:
        kids = [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []
    return kids + [g for k in kids for g in _children(k)]


def _empty_folders(root: Path) -> list[str]:
    return [d for d, dns, fns in os.walk(root) if not dns and not fns and Path(d) != root]


#: how each signal is sent: Ctrl-C to the whole process group, as a terminal does; SIGTERM (``kill``,
#: ``timeout``, a batch system) and SIGHUP to the main process alone, which must end its children itself
SIGNALS = [("INT", signal.SIGINT, True, 130, "interrupted"),
           ("TERM", signal.SIGTERM, False, 143, "terminated (SIGTERM)"),
           ("HUP", signal.SIGHUP, False, 129, "hung up (SIGHUP)")]
SIGNAL_CASES = [pytest.param(*c, *s, id=f"{c[0]}-{s[0]}") for s in SIGNALS for c in CASES
                if s[0] != "HUP" or c[0] in ("gd", "circuit", "train", "sweep")]


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="finds the child processes in /proc")
@pytest.mark.parametrize("name,argv,ready,absent,sig_name,sig,to_group,status,line", SIGNAL_CASES)
def test_ctrl_c_ends_in_one_line(tmp_path, name, argv, ready, absent, sig_name, sig, to_group, status, line):
    """Ctrl-C, SIGTERM and SIGHUP each end the command with one line and its status, no traceback,
    nothing half-written and no child process left running (SIGTERM and SIGHUP reach the main
    process only: it must end its proof child or its cluster's workers itself)."""
    circuit = _circuit(tmp_path)
    before = {p for p in tmp_path.rglob("*")}
    args = [a.replace("{tmp}", str(tmp_path)).replace("{circuit}", str(circuit)) for a in argv]
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    p = subprocess.Popen([sys.executable, *args], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True, env=env)
    err: list[str] = []
    at_work = threading.Event()

    def read_stderr():
        for line in p.stderr:
            err.append(line)
            if ready[0] == "stderr" and ready[1] in line:
                at_work.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    deadline = time.monotonic() + 120
    try:
        while not at_work.is_set() and time.monotonic() < deadline and p.poll() is None:
            if ready[0] == "child" and _children(p.pid):
                at_work.set()
            time.sleep(0.05)
        assert at_work.is_set(), f"{name} never got to work: rc {p.poll()}, stderr {''.join(err)!r}"
        time.sleep(0.3 if name != "sweep" else 2.0)  # inside the work (sweep: the worker on its cell)
        assert p.poll() is None, f"{name} finished before the interrupt: {''.join(err)!r}"
        kids = _children(p.pid)
        if to_group:
            os.killpg(p.pid, sig)
        else:
            os.kill(p.pid, sig)
        out = p.stdout.read()
        rc = p.wait(60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    reader.join(10)
    text = "".join(line for line in err if READY not in line)
    assert rc == status, (rc, text)
    assert text.endswith(line + "\n") and text.count(line) == 1, text
    assert "Traceback" not in text and not re.search(r"\b\w*(Error|Exception)\b", text), text
    assert "Traceback" not in out
    for rel in absent:
        left = sorted(str(q.relative_to(tmp_path)) for q in (tmp_path / rel).rglob("*")) if (tmp_path / rel).is_dir() else []
        assert not (tmp_path / rel).exists(), f"{rel} left behind: {left}"
    assert not _empty_folders(tmp_path), "an empty folder left behind"
    assert {q for q in tmp_path.rglob("*") if q.name.endswith(".tmp")} == set(), "a temporary file left behind"
    if name == "train":
        # a training run keeps what it had written whole (history.json after each evaluation, the
        # last checkpoint), so that --resume continues it: each file is complete strict JSON
        for q in tmp_path.rglob("*.json"):
            json.loads(q.read_text(), parse_constant=lambda c: pytest.fail(f"{q}: bare {c}"))
    elif name != "sweep":  # a sweep keeps the cells' working files (cells/<id>/...), it resumes from them
        assert {q for q in tmp_path.rglob("*")} == before, "a file left behind"
    end = time.monotonic() + 10
    while time.monotonic() < end and any(Path(f"/proc/{k}").exists() and not _zombie(k) for k in kids):
        time.sleep(0.1)
    assert not [k for k in kids if Path(f"/proc/{k}").exists() and not _zombie(k)], "a child process still runs"


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


ENTRY_POINTS = ["verify/construct.py", "verify/errata.py", "verify/catalogue_report.py", "verify/compiler_report.py",
                "verify/compare.py", "numerics/roundoff.py", "numerics/roundoff_plots.py", "numerics/train.py",
                "numerics/sweep.py", "numerics/experiments/__main__.py", "numerics/training/construction_task.py",
                "numerics/training/report.py", "circuits/random.py", "numerics/experiments/seed000_table7_long.py"]


def test_every_entry_point_ends_through_exit_with():
    """Every ``python -m`` module of the project ends through polyverify.plumbing.cli.exit_with (Ctrl-C, a closed
    pipe) and its main through run_main (bad input, Ctrl-C): none is left out, none is new and unlisted."""
    found = set()
    for root in ("verify", "numerics", "circuits", "polyverify", "constructions"):
        for f in (REPO / root).rglob("*.py"):
            text = f.read_text()
            if 'if __name__ == "__main__":' in text or f.name == "__main__.py":
                found.add(str(f.relative_to(REPO)))
                block = text.split('if __name__ == "__main__":', 1)[-1]
                assert "exit_with(" in block, f"{f}: its __main__ block does not end through exit_with"
                assert "run_main(" in text or "run_main" in block, f"{f}: main does not go through run_main"
    assert found == set(ENTRY_POINTS), found ^ set(ENTRY_POINTS)


def test_ctrl_c_inside_an_import_is_held_until_the_import_is_over(tmp_path, monkeypatch, capsys):
    """A KeyboardInterrupt that crosses a compiled extension's import (torch's, through pybind11)
    can abort the process; inside ``run_main`` the interrupt is raised once the import is over."""
    from polyverify.plumbing.cli import EXIT_INTERRUPTED, run_main

    (tmp_path / "slow_import_mod.py").write_text(
        "import os, signal, time\n"
        "os.kill(os.getpid(), signal.SIGINT)\n"
        "time.sleep(0.3)\n"
        "FINISHED = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reached = []

    def fn(argv):
        import slow_import_mod  # noqa: F401

        reached.append("after the import")
        time.sleep(5)  # the held interrupt lands here
        return 0

    t0 = time.monotonic()
    assert run_main(fn, []) == EXIT_INTERRUPTED
    assert time.monotonic() - t0 < 3
    assert sys.modules["slow_import_mod"].FINISHED and reached == ["after the import"]
    assert capsys.readouterr().err == "interrupted\n"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.parametrize("package", ["verify", "numerics", "circuits"])
def test_ctrl_c_while_a_command_starts_is_one_line(package):
    """``python -m PACKAGE.module``: the package's import puts a handler in place (``sys.argv[0]``
    is ``-m`` while Python locates the module), so a Ctrl-C during the command's own imports ends
    it with the one line and exit 130 instead of a traceback from the import; ``exit_with`` gives
    the command Python's KeyboardInterrupt back."""
    code = ("import os, signal, sys, time\n"
            "sys.argv = ['-m']\n"
            f"import {package}\n"
            "from polyverify.plumbing.cli import exit_with\n"
            "assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler\n"
            "if os.environ.get('T25_STEP') == 'run':\n"
            "    exit_with(lambda: 0 if signal.getsignal(signal.SIGINT) is signal.default_int_handler else 3)\n"
            "os.kill(os.getpid(), signal.SIGINT)\n"
            "time.sleep(10)\n")
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert (p.returncode, p.stderr) == (130, "interrupted\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={**env, "T25_STEP": "run"})
    assert (p.returncode, p.stderr) == (0, ""), p.stderr


def test_a_library_import_keeps_pythons_handler():
    code = "import signal, verify, numerics, circuits; assert signal.getsignal(signal.SIGINT) is signal.default_int_handler"
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    assert subprocess.run([sys.executable, "-c", code], env=env, timeout=60).returncode == 0
