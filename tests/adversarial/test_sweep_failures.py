"""numerics.sweep under attack: a cell that kills its worker every time, a
``--scheduler`` that is not a Dask scheduler, finished cell files that do not belong to their cell
or are damaged, a dashboard link without bokeh, the timings of a rerun with nothing to do, and the
workers' import time kept out of the cells' times.  Every listener is on the loopback interface."""
from __future__ import annotations

import csv
import http.server
import io
import json
import socket
import threading
import time
from pathlib import Path

import pytest

from numerics import sweep
from tests.adversarial.conftest import tree_snapshot
from tests.numerics import sweep_cells, sweep_slow_cells

CELL = "tests.numerics.sweep_cells:cell"
SLOW = "tests.numerics.sweep_slow_cells:cell"


# ------------------------------------------------------------------ (a) a cell that kills its worker

def test_a_cell_that_kills_its_worker_every_time_is_recorded_failed_and_the_table_written(tmp_path, capsys):
    """Before: ``TypeError`` formatting the lost cell's missing time, no table, with --quiet too,
    and every rerun crashed again.  Now: the cell is failed with its error and no time, the table
    and sweep.json are written, exit 10 + 1; a rerun once the cell behaves runs only that cell."""
    log = tmp_path / "log"
    log.mkdir()
    grid = tmp_path / "g.json"
    grid.write_text(json.dumps({"cell": CELL, "cells": [{"i": 0, "log": str(log), "echo": 1},
                                                        {"i": 1, "log": str(log), "kill_until": "allow", "echo": 9},
                                                        {"i": 2, "log": str(log), "echo": 2}]}))
    out = tmp_path / "out"
    argv = ["run", str(grid), "--out", str(out), "--workers", "1", "--retries", "0", "--quiet"]
    assert sweep.main(argv) == sweep.FAILED_BASE + 1
    cap = capsys.readouterr()
    assert "Traceback" not in cap.err + cap.out, cap.err
    assert "3 cells, 3 run, 0 finished earlier, 1 failed" in cap.out
    with open(out / "results.csv", newline="") as fh:
        table = list(csv.DictReader(fh))
    assert [t["status"] for t in table] == ["ok", "failed", "ok"]
    assert table[1]["error"].startswith("lost: KilledWorker") and table[1]["wall_s"] == ""
    assert [t["result.value"] for t in table] == ["1", "", "2"]
    rec = json.loads(next(p for p in (out / "cells").glob("*.json")
                          if json.loads(p.read_text())["config"]["i"] == 1).read_text())
    assert rec["status"] == "failed" and rec["wall_s"] is None
    summary = json.loads((out / "sweep.json").read_text())
    assert summary["failed"] == 1 and summary["cells_timed"] == 2

    (log / "allow").touch()
    assert sweep.main(argv) == 0
    assert "3 cells, 1 run, 2 finished earlier, 0 failed" in capsys.readouterr().out
    with open(out / "results.csv", newline="") as fh:
        assert [t["result.value"] for t in csv.DictReader(fh)] == ["1", "9", "2"]
    assert sweep_cells.runs(log) == {0: 1, 1: 2, 2: 1}


def test_the_progress_line_of_a_lost_cell_has_no_time():
    rec = {"id": "x", "status": "failed", "config": {"a": 1}, "wall_s": None, "cpu_s": None, "worker": None,
           "error": "lost: KilledWorker: ..."}
    buf = io.StringIO()
    sweep._Reporter(1, "t", True, stream=buf).cell(rec)
    assert "no time (lost with its worker): lost: KilledWorker" in buf.getvalue()
    sweep._Reporter(1, "t", False).cell(rec)  # --quiet: nothing printed, nothing raised


# ------------------------------------------------------------------ (b) --scheduler that is not a scheduler

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def http_server():
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"<html>a dashboard</html>")

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    yield f"tcp://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def silent_listener():
    """Accepts connections and never says anything (as a dashboard's HTTP port waiting for a request)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    held = []
    stop = threading.Event()

    def accept():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                continue

    th = threading.Thread(target=accept, daemon=True)
    th.start()
    yield f"tcp://127.0.0.1:{srv.getsockname()[1]}"
    stop.set()
    th.join(2)
    for c in held:
        c.close()
    srv.close()


def _refused(tmp_path, capsys, address, *extra, within: float):
    log = tmp_path / "log"
    log.mkdir(exist_ok=True)
    grid = tmp_path / "g.json"
    grid.write_text(json.dumps({"cell": CELL, "cells": [{"i": 0, "log": str(log), "echo": 1}]}))
    before = tree_snapshot(tmp_path)
    t0 = time.monotonic()
    rc = sweep.main(["run", str(grid), "--out", str(tmp_path / "out"), "--scheduler", address, *extra])
    took = time.monotonic() - t0
    err = capsys.readouterr().err
    assert rc == 2, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --scheduler ") and "Traceback" not in err, err
    assert took < within, took
    assert tree_snapshot(tmp_path) == before and not (tmp_path / "out").exists()
    return lines[0]


def test_scheduler_that_is_an_http_server_is_refused_in_one_line(tmp_path, capsys, http_server):
    """Before: "Unable to allocate 3.07 EiB" traceback (the HTTP reply read as a frame length)."""
    line = _refused(tmp_path, capsys, http_server, "--connect-timeout", "2", within=4)
    assert "not a Dask scheduler" in line or "no answer as a Dask scheduler" in line, line


@pytest.fixture
def answering_listener():
    """Answers every connection at once with an HTTP error, whatever was sent."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.2)
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                c = srv.accept()[0]
            except OSError:
                continue
            with c:
                c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                time.sleep(0.3)

    th = threading.Thread(target=serve, daemon=True)
    th.start()
    yield f"tcp://127.0.0.1:{srv.getsockname()[1]}"
    stop.set()
    th.join(2)
    srv.close()


def test_scheduler_that_answers_http_is_refused_at_once(tmp_path, capsys, answering_listener):
    """Before: the reply read as a frame length, "Unable to allocate 3.07 EiB", a traceback."""
    line = _refused(tmp_path, capsys, answering_listener, within=2)
    assert "not a Dask scheduler" in line, line


def test_scheduler_that_says_nothing_is_refused_within_the_timeout(tmp_path, capsys, silent_listener):
    """Before: hung (the dashboard port: stopped after 10 minutes)."""
    line = _refused(tmp_path, capsys, silent_listener, "--connect-timeout", "1", within=3)
    assert "no answer as a Dask scheduler within 1 s" in line, line


def test_unreachable_scheduler_is_refused_at_once(tmp_path, capsys):
    """Before: 13 s (the comm layer retries a refused connection until its timeout)."""
    line = _refused(tmp_path, capsys, f"tcp://127.0.0.1:{_free_port()}", within=2)
    assert "cannot connect" in line, line


def test_probe_accepts_a_scheduler_and_refuses_a_worker():
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        assert sweep.probe_scheduler(cluster.scheduler_address, 5)["type"] == "Scheduler"
        (worker,) = cluster.scheduler.workers
        with pytest.raises(sweep.SweepInputError, match="answered, but not as a Dask scheduler"):
            sweep.probe_scheduler(worker, 5)


@pytest.mark.parametrize("argv,msg", [
    (["--preload", "torch,,numpy"], "--preload: not a module name: ''"),
    (["--preload", "os path"], "--preload: not a module name: 'os path'"),
    (["--preload", "numpy,no_such_module_here"], "--preload: no module named 'no_such_module_here' here"),
    (["--connect-timeout", "3"], "--connect-timeout applies to --scheduler only"),
    (["--scheduler", "tcp://127.0.0.1:8786", "--connect-timeout", "0"], "--connect-timeout must be a number"),
    (["--scheduler", "tcp://127.0.0.1:8786", "--connect-timeout", "nan"], "--connect-timeout must be a number"),
])
def test_connect_timeout_and_preload_are_checked(tmp_path, capsys, argv, msg):
    grid = tmp_path / "g.json"
    grid.write_text(json.dumps({"cell": CELL, "cells": [{"i": 0, "echo": 1}]}))
    assert sweep.main(["run", str(grid), "--out", str(tmp_path / "out"), *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and msg in err, err


# ------------------------------------------------------------------ (c) (d) (e) (f) finished cell files

def _cell_file(out: Path, rows, i) -> Path:
    return out / "cells" / f"{rows[i]['id']}.json"


def test_cell_files_are_checked_timings_kept_imports_excluded_dashboard_needs_bokeh(tmp_path, monkeypatch):
    """One grid of 3 instant cells whose module takes 0.6 s to import, on a 1-worker cluster."""
    configs = [{"echo": k} for k in ("a", "b", "c")]
    out = tmp_path / "out"
    monkeypatch.setattr(sweep, "_has_bokeh", lambda: False)  # (d) no bokeh: no dashboard link
    res = sweep.run_grid(SLOW, configs, out, workers=1, progress=False, name="t")
    assert res.failed == 0 and [r["result"] for r in res.rows] == [{"value": k} for k in ("a", "b", "c")]
    assert res.cluster["dashboard"] is None
    # (f) the worker imported the cell's module as it started: no cell's wall time counts the import
    assert all(r["wall_s"] < sweep_slow_cells.IMPORT_S / 2 for r in res.rows), [r["wall_s"] for r in res.rows]
    assert all(r["worker_import_s"] >= sweep_slow_cells.IMPORT_S for r in res.rows)
    assert res.cluster["preload"][-1] == "tests.numerics.sweep_slow_cells"
    rec0 = json.loads(_cell_file(out, res.rows, 0).read_text())
    assert rec0["code_version"] == sweep.code_version(SLOW) and rec0["digest"] == sweep.record_digest(rec0)
    first = json.loads((out / "sweep.json").read_text())

    # (e) a rerun with nothing to do keeps the cells' timings; the runs are listed
    warned: list[str] = []
    res2 = sweep.run_grid(SLOW, configs, out, progress=False, name="t", warn=warned.append)
    assert res2.skipped == 3 and res2.cluster["workers"] is None and not warned
    second = json.loads((out / "sweep.json").read_text())
    assert second["cells_wall_s"] == first["cells_wall_s"] == sum(r["wall_s"] for r in res.rows) > 0
    assert second["cells_cpu_s"] == first["cells_cpu_s"] and second["cells_timed"] == 3
    assert [r["ran"] for r in second["runs"]] == [3, 0] and second["runs"][0]["cluster"]["workers"] == 1

    # (c) cell 1's file replaced by cell 0's with its id changed; cell 2's result edited; cell 0's
    # code version changed: each is computed again, with a warning naming why
    r0 = json.loads(_cell_file(out, res.rows, 0).read_text())
    _cell_file(out, res.rows, 1).write_text(json.dumps({**r0, "id": res.rows[1]["id"]}))
    r2 = json.loads(_cell_file(out, res.rows, 2).read_text())
    _cell_file(out, res.rows, 2).write_text(json.dumps({**r2, "result": {"value": "forged"}}))
    _cell_file(out, res.rows, 0).write_text(json.dumps({**r0, "code_version": {**r0["code_version"],
                                                                              "sources": "0" * 16}}))
    monkeypatch.setattr(sweep, "_has_bokeh", lambda: True)
    res3 = sweep.run_grid(SLOW, configs, out, workers=1, progress=False, name="t", warn=warned.append)
    assert res3.skipped == 0 and [r["result"] for r in res3.rows] == [{"value": k} for k in ("a", "b", "c")]
    assert len(warned) == 3 and all(w.startswith("warning: t: cells/") and w.endswith("computing the cell again")
                                    for w in warned), warned
    assert "was made by other code" in warned[0] and "holds another config" in warned[1]
    assert "does not match its digest" in warned[2]
    assert res3.cluster["dashboard"].startswith("http://")  # (d) with bokeh (the sweep extra): the link


def test_check_record_refuses_what_is_not_this_cells_finished_record(tmp_path):
    cell, config = "m.n:f", {"dtype": "float64"}
    cid = sweep.cell_id(cell, config)
    version = {"package": "1", "sources": "abc"}
    good = {"id": cid, "cell": cell, "config": config, "status": "ok", "result": {"mse": 1.0}, "wall_s": 1.0,
            "cpu_s": 0.5, "code_version": version}
    good["digest"] = sweep.record_digest(good)
    p = tmp_path / f"{cid}.json"

    def check(rec):
        p.write_text(rec if isinstance(rec, str) else json.dumps(rec))
        return sweep.check_record(p, cell, cid, config, version)

    assert check(good) == (good, None)
    assert sweep.check_record(tmp_path / "none.json", cell, cid, config, version) == (None, None)
    assert check({**good, "status": "failed"}) == (None, None)  # failed: run again, no warning
    cases = [
        ('{"status": "ok", "res', "is not valid JSON"),
        ("[1, 2]", "holds a list, not a record"),
        ({**good, "status": "okay"}, "has status 'okay'"),
        ({**good, "cell": "m.n:g"}, "belongs to another cell"),
        ({**good, "config": {"dtype": "float32"}}, "holds another config"),  # the float32 run under the float64 id
        ({**good, "result": None}, "its result is not a JSON object"),
        ({**good, "result": [1]}, "its result is not a JSON object"),
        ({**good, "wall_s": None}, "no wall_s or cpu_s time"),
        ({**good, "cpu_s": "1"}, "no wall_s or cpu_s time"),
        ({k: v for k, v in good.items() if k != "code_version"}, "without a code version"),
        ({**good, "code_version": {"package": "2", "sources": "abc"}}, "was made by other code"),
        ({**good, "result": {"mse": 2.0}}, "does not match its digest"),
        ({k: v for k, v in good.items() if k != "digest"}, "does not match its digest"),
    ]
    for rec, why in cases:
        got, reason = check(rec)
        assert got is None and reason is not None and why in reason, (rec, reason)


def test_code_version_follows_the_imported_sources(tmp_path, monkeypatch):
    """The hash covers the cell's module and the project modules it imports (through others too),
    read from the files, not imported; a change in any of them changes it."""
    pkg = tmp_path / "cvpkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "cells.py").write_text("from .sub import helper\n\ndef f(c):\n    return {}\n")
    (pkg / "sub" / "helper.py").write_text("def g():\n    from cvpkg import deep\n")
    (pkg / "deep.py").write_text("X = 1\n")
    (pkg / "other.py").write_text("Y = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    v0 = sweep.code_version("cvpkg.cells:f")
    assert v0["modules"] == 5  # cvpkg, cells, sub, sub.helper, deep (not other)
    (pkg / "other.py").write_text("Y = 2\n")
    assert sweep.code_version("cvpkg.cells:f") == v0
    (pkg / "deep.py").write_text("X = 2\n")
    v1 = sweep.code_version("cvpkg.cells:f")
    assert v1["sources"] != v0["sources"] and v1["package"] == v0["package"]
    # the project's own cells: the modules they use are in; the workers import them, and the
    # packages they use (torch, imported inside a function of the backends), as they start
    assert sweep.code_version("numerics.roundoff:sweep_cell")["modules"] > 5
    pre = sweep.default_preload("numerics.roundoff:sweep_cell")
    assert {"torch", "numpy", "numerics.roundoff", "numerics.backends", "constructions.base"} <= set(pre), pre
    assert pre.index("numerics") < pre.index("numerics.roundoff")
    assert sweep.default_preload("cvpkg.cells:f") == ["cvpkg", "cvpkg.cells", "cvpkg.deep", "cvpkg.sub",
                                                      "cvpkg.sub.helper"]


def test_sweep_extra_brings_bokeh():
    import tomllib

    root = Path(__file__).resolve().parents[2]
    extra = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]["sweep"]
    assert any(d.startswith("bokeh") for d in extra), extra


def test_worker_preload_keeps_the_workers_sigint_disposition():
    """A worker started with SIGINT ignored keeps ignoring it after the preload imports dask_jobqueue (whose
    import sets SIGINT to sys.exit()): otherwise a Ctrl-C to the process group raises SystemExit in the
    worker wherever it is, a garbage collector's callback included, and a traceback follows 'interrupted'."""
    import subprocess
    import sys

    code = ("import signal, sys\n"
            "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
            "from polyverify.sweep.worker import _preload\n"
            "assert 'dask_jobqueue' not in sys.modules\n"
            "_preload(['dask_jobqueue'])\n"
            "assert 'dask_jobqueue' in sys.modules\n"
            "print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0 and out.stdout.strip() == "True", (out.stdout, out.stderr)
