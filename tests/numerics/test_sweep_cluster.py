"""numerics.sweep on a cluster it did not start: ``--scheduler-file`` (the file a real
``distributed`` scheduler writes), the driver's refusal of workers whose code version differs
from its own (a worker process started on other sources), and cells that need a GPU submitted
with the Dask worker resource ``GPU=1`` (read back from the worker that ran each task)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from numerics import sweep
from tests.adversarial.conftest import tree_snapshot

from tests.numerics.sweep_testing import CELL
from tests.numerics.sweep_testing import grid_file as _grid
from tests.numerics.sweep_testing import one_error_line as _one_error_line
REPO = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------ --scheduler-file

def test_scheduler_file_written_by_a_real_scheduler_runs_the_grid(tmp_path, capsys, shared_cluster):
    cluster, sf = shared_cluster, shared_cluster.scheduler_file
    log = tmp_path / "log"
    log.mkdir()
    grid = _grid(tmp_path, [{"i": i, "log": str(log), "echo": i * 10} for i in range(3)])
    out = tmp_path / "out"
    assert json.loads(sf.read_text())["address"] == cluster.scheduler_address  # the scheduler wrote it
    rc = sweep.main(["run", str(grid), "--out", str(out), "--scheduler-file", str(sf), "--quiet"])
    workers = set(cluster.scheduler.workers)
    assert workers  # the command closed only its own client
    assert rc == 0, capsys.readouterr().err
    rows = [json.loads(s) for s in (out / "results.jsonl").read_text().splitlines()]
    assert [r["result"] for r in rows] == [{"value": 0}, {"value": 10}, {"value": 20}]
    assert all(r["worker"] in workers and "resources" not in r for r in rows)
    summary = json.loads((out / "sweep.json").read_text())
    assert summary["cluster"]["scheduler_file"] == str(sf)
    assert summary["cluster"]["scheduler"] == cluster.scheduler_address


def _write(p: Path, text: str) -> str:
    p.write_text(text)
    return str(p)


BAD_FILES = [
    (lambda t: str(t / "missing.json"), "--scheduler-file {f}: not found"),
    (lambda t: str(t), "--scheduler-file {f}: is a folder, not a file"),
    (lambda t: _write(t / "s.json", "tcp://127.0.0.1:8786\n"), "--scheduler-file {f}: not JSON"),
    (lambda t: _write(t / "s.json", '{"type": "Scheduler", "id": "x"}'), 'no "address" in it'),
    (lambda t: _write(t / "s.json", '["tcp://127.0.0.1:8786"]'), 'no "address" in it'),
    (lambda t: _write(t / "s.json", '{"address": "not an address"}'),
     "its address 'not an address' is not a scheduler address"),
]


@pytest.mark.parametrize("make,msg", BAD_FILES)
def test_bad_scheduler_file_is_refused_in_one_line_before_any_work(make, msg, tmp_path, capsys):
    grid = _grid(tmp_path, [{"i": 0, "log": str(tmp_path), "echo": 1}])
    f = make(tmp_path)
    before = tree_snapshot(tmp_path)
    rc = sweep.main(["run", str(grid), "--out", str(tmp_path / "out"), "--scheduler-file", f])
    line = _one_error_line(capsys)
    assert rc == 2 and msg.format(f=f) in line, line
    assert tree_snapshot(tmp_path) == before and not (tmp_path / "out").exists()


def test_scheduler_file_whose_scheduler_is_gone_is_refused_naming_the_file(tmp_path, capsys):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sf = _write(tmp_path / "scheduler.json", json.dumps({"type": "Scheduler", "address": f"tcp://127.0.0.1:{port}"}))
    grid = _grid(tmp_path, [{"i": 0, "log": str(tmp_path), "echo": 1}])
    rc = sweep.main(["run", str(grid), "--out", str(tmp_path / "out"), "--scheduler-file", sf,
                     "--connect-timeout", "2"])
    line = _one_error_line(capsys)
    assert rc == 2 and line.startswith(f"error: --scheduler-file {sf} (tcp://127.0.0.1:{port}): cannot connect"), line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("extra,msg", [
    (["--scheduler", "tcp://127.0.0.1:8786"], "--scheduler and --scheduler-file: give one place to run the cells"),
    (["--workers", "2"], "--workers sizes the local cluster; it cannot be combined with --scheduler-file"),
])
def test_scheduler_file_combinations_are_refused(extra, msg, tmp_path, capsys):
    sf = _write(tmp_path / "s.json", '{"address": "tcp://127.0.0.1:8786"}')
    grid = _grid(tmp_path, [{"i": 0, "log": str(tmp_path), "echo": 1}])
    rc = sweep.main(["run", str(grid), "--out", str(tmp_path / "out"), "--scheduler-file", sf, *extra])
    line = _one_error_line(capsys)
    assert rc == 2 and msg in line, line


def test_read_scheduler_file_returns_the_address(tmp_path):
    f = _write(tmp_path / "s.json", json.dumps({"type": "Scheduler", "address": "tcp://10.1.2.3:8786", "workers": {}}))
    assert sweep.read_scheduler_file(f) == "tcp://10.1.2.3:8786"
    with pytest.raises(ValueError, match="not found"):
        sweep.run_grid(CELL, [{"echo": 1}], tmp_path / "o", scheduler_file=tmp_path / "none.json")
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------ worker versions

@pytest.fixture
def forget_modules():
    """Drops the test's own cell packages from sys.modules afterwards (their folders are temporary)."""
    yield
    for m in [m for m in sys.modules if m.split(".")[0] in ("h2vcells", "h2vedit")]:
        del sys.modules[m]


def _cell_package(root: Path, tag: str, name: str = "h2vcells") -> None:
    pkg = root / name
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "cells.py").write_text(f"# the {tag}'s copy\n\ndef f(config):\n    return {{'value': config['x']}}\n")


def test_workers_of_another_version_are_refused_and_late_ones_fail_their_cells(tmp_path, capsys, monkeypatch,
                                                                              forget_modules):
    """The driver imports the cell from one copy of its package, a real worker process from
    another (one comment differs: other sources).  A worker that joins after the check fails each
    cell it is given (VersionMismatch naming both versions); once it is there, the command refuses
    it before anything is written (one line, exit 2)."""
    from distributed import Client, LocalCluster

    _cell_package(tmp_path / "driver", "driver")
    _cell_package(tmp_path / "worker", "worker")
    monkeypatch.syspath_prepend(str(tmp_path / "driver"))
    cell = "h2vcells.cells:f"
    mine = sweep.code_version(cell)
    configs = [{"x": 1}, {"x": 2}]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "worker"), str(REPO)])}
    proc = None
    with LocalCluster(n_workers=0, processes=False, protocol="tcp", host="127.0.0.1",
                      dashboard_address=":0") as cluster:
        addr = cluster.scheduler_address
        box: dict = {}

        def drive():
            box["res"] = sweep.run_grid(cell, configs, tmp_path / "late", scheduler=addr, progress=False,
                                        preload=[])

        th = threading.Thread(target=drive)
        th.start()  # no worker yet: the check passes, the cells wait for one
        try:
            time.sleep(1.0)
            wlog = tmp_path / "worker.log"
            with open(wlog, "w") as fh:
                proc = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", addr, "--nthreads", "1",
                                         "--no-nanny", "--no-dashboard"], env=env, stdout=fh, stderr=fh)
            th.join(50)
            assert not th.is_alive(), f"the late worker never ran the cells: {wlog.read_text()[-2000:]}"
            res = box["res"]
            with Client(addr) as c:
                ((waddr, theirs),) = c.run(sweep.worker_version, cell).items()
            assert theirs["package"] == mine["package"] and theirs["sources"] != mine["sources"]
            want = (f"VersionMismatch: worker {waddr} runs polyverify {theirs['package']} (sources "
                    f"{theirs['sources']}), this driver polyverify {mine['package']} (sources {mine['sources']})")
            errors = [r["error"] for r in res.rows]
            assert res.failed == 2 and all(e.startswith(want) for e in errors), errors
            assert all(r["wall_s"] == 0.0 and r["result"] is None for r in res.rows)  # the cell never ran

            grid = _grid(tmp_path, configs, cell=cell)
            capsys.readouterr()
            rc = sweep.main(["run", str(grid), "--out", str(tmp_path / "out"), "--scheduler", addr, "--quiet"])
            line = _one_error_line(capsys)
            assert rc == 2 and line == (f"error: worker {waddr} runs polyverify {theirs['package']} (sources "
                                        f"{theirs['sources']}), this driver polyverify {mine['package']} (sources "
                                        f"{mine['sources']}); install the driver's version on every worker"), line
            assert not (tmp_path / "out").exists()
        finally:
            th.join(30)
            if proc is not None:
                proc.terminate()
                proc.wait(30)


def test_execute_cell_checks_the_expected_version(tmp_path):
    cell = "tests.numerics.sweep_cells:cell"
    config = {"i": 0, "log": str(tmp_path), "echo": 3}
    ok = sweep.execute_cell(cell, config, expect=sweep.code_version(cell))
    assert ok["status"] == "ok" and ok["result"] == {"value": 3}
    other = {"package": "9.9.9", "sources": "0123456789abcdef", "modules": 1}
    rec = sweep.execute_cell(cell, config, expect=other)
    mine = sweep.worker_version(cell)
    assert rec["status"] == "failed" and rec["result"] is None and rec["error"] == (
        f"VersionMismatch: worker local runs polyverify {mine['package']} (sources {mine['sources']}), this driver "
        f"polyverify 9.9.9 (sources 0123456789abcdef); install the driver's version on every worker")
    assert list(tmp_path.glob("run-*")) == [next(tmp_path.glob("run-0-*"))]  # the refused cell did not run


def test_worker_version_follows_an_edit(tmp_path, monkeypatch, forget_modules):
    _cell_package(tmp_path, "first", "h2vedit")
    monkeypatch.syspath_prepend(str(tmp_path))
    v0 = sweep.worker_version("h2vedit.cells:f")
    assert sweep.worker_version("h2vedit.cells:f") == v0 == sweep.code_version("h2vedit.cells:f")
    f = tmp_path / "h2vedit" / "cells.py"
    f.write_text(f.read_text() + "# edited, one line longer\n")
    v1 = sweep.worker_version("h2vedit.cells:f")
    assert v1["sources"] != v0["sources"] and v1 == sweep.code_version("h2vedit.cells:f")


# ------------------------------------------------------------------ GPU cells: the worker resource

def test_gpu_cells_are_submitted_with_the_gpu_resource(tmp_path, capsys):
    """Two workers, one offering GPU=1: the cells on cuda (and those of a grid file asking for the
    resource) run on it, each task submitted with the restriction {"GPU": 1}; the others carry none."""
    from distributed import Scheduler, SpecCluster, Worker

    log = tmp_path / "log"
    log.mkdir()
    configs = [{"i": 0, "log": str(log), "report_task": True, "device": "cuda"},
               {"i": 1, "log": str(log), "report_task": True, "device": "cpu"},
               {"i": 2, "log": str(log), "report_task": True, "backend": "cupy"},
               {"i": 3, "log": str(log), "report_task": True}]
    workers = {"cpu": {"cls": Worker, "options": {"nthreads": 1}},
               "gpu": {"cls": Worker, "options": {"nthreads": 1, "resources": {"GPU": 1}}}}
    with SpecCluster(workers=workers, scheduler={"cls": Scheduler, "options": {"dashboard_address": ":0"}}) as cluster:
        addr = cluster.scheduler_address
        gpu_worker = next(a for a, w in cluster.scheduler.workers.items() if w.resources)
        warned: list[str] = []
        res = sweep.run_grid(CELL, configs, tmp_path / "o", scheduler=addr, progress=False, preload=[],
                             warn=warned.append)
        assert res.failed == 0 and warned == [], ([r["error"] for r in res.rows], warned)
        got = {r["config"]["i"]: r["result"] for r in res.rows}
        for i in (0, 2):
            assert got[i]["restrictions"] == {"GPU": 1} and got[i]["worker"] == gpu_worker, got[i]
            assert got[i]["worker_resources"] == {"GPU": 1}
            assert res.rows[i]["resources"] == {"GPU": 1}
        for i in (1, 3):
            assert got[i]["restrictions"] == {} and "resources" not in res.rows[i]
        # a grid file's resources: every cell asks for them
        grid = _grid(tmp_path, [{"i": 10 + i, "log": str(log), "report_task": True} for i in range(2)],
                     resources={"GPU": 1})
        rc = sweep.main(["run", str(grid), "--out", str(tmp_path / "o2"), "--scheduler", addr, "--quiet"])
        assert rc == 0, capsys.readouterr().err
        rows = [json.loads(s) for s in (tmp_path / "o2" / "results.jsonl").read_text().splitlines()]
        assert all(r["result"]["restrictions"] == {"GPU": 1} and r["result"]["worker"] == gpu_worker for r in rows)


def test_gpu_cells_wait_for_a_gpu_worker_with_a_warning(tmp_path):
    """No worker declares a GPU: the command says so in one warning line and the GPU cell waits;
    a worker process started later with --resources GPU=1 runs it (the CPU cell runs at once)."""
    from distributed import LocalCluster

    log = tmp_path / "log"
    log.mkdir()
    configs = [{"i": 0, "log": str(log), "report_task": True, "device": "cuda"},
               {"i": 1, "log": str(log), "report_task": True}]
    proc = None
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp", host="127.0.0.1",
                      dashboard_address=":0") as cluster:
        addr = cluster.scheduler_address
        cpu_worker = next(iter(cluster.scheduler.workers))
        warned: list[str] = []
        box: dict = {}
        th = threading.Thread(target=lambda: box.update(res=sweep.run_grid(
            CELL, configs, tmp_path / "o", scheduler=addr, progress=False, preload=[], name="g", warn=warned.append)))
        th.start()
        try:
            deadline = time.monotonic() + 30
            while not list((tmp_path / "o" / "cells").glob("*.json")) and time.monotonic() < deadline:
                time.sleep(0.1)  # the CPU cell's record: the grid is under way, the GPU cell waiting
            assert warned == [f"warning: g: 1 cell(s) ask for the worker resource GPU=1 and no worker of {addr} offers "
                              f"it yet; they wait for one (dask worker {addr} --resources GPU=1)"], warned
            assert th.is_alive() and len(list((tmp_path / "o" / "cells").glob("*.json"))) == 1
            wlog = tmp_path / "worker.log"
            with open(wlog, "w") as fh:
                proc = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", addr, "--nthreads", "1",
                                         "--no-nanny", "--no-dashboard", "--resources", "GPU=1"],
                                        env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=fh, stderr=fh)
            th.join(50)
            assert not th.is_alive(), f"the GPU worker never ran the cell: {wlog.read_text()[-2000:]}"
        finally:
            th.join(30)
            if proc is not None:
                proc.terminate()
                proc.wait(30)
    res = box["res"]
    assert res.failed == 0, [r["error"] for r in res.rows]
    gpu, cpu = res.rows[0]["result"], res.rows[1]["result"]
    assert gpu["restrictions"] == {"GPU": 1} and gpu["worker_resources"] == {"GPU": 1} and gpu["worker"] != cpu_worker
    assert cpu["restrictions"] == {} and cpu["worker"] == cpu_worker


def test_local_cluster_does_not_ask_for_resources(tmp_path):
    """On the local cluster every worker shares this machine's devices: a GPU cell is submitted
    without the restriction (else no local worker could run it)."""
    res = sweep.run_grid(CELL, [{"i": 0, "log": str(tmp_path), "report_task": True, "device": "cuda"}],
                         tmp_path / "o", workers=1, progress=False, preload=[])
    assert res.failed == 0 and res.rows[0]["result"]["restrictions"] == {} and "resources" not in res.rows[0]


def test_cell_resources_rule_and_checks():
    assert sweep.cell_resources({"device": "cuda"}) == {"GPU": 1} == sweep.cell_resources({"device": "cuda:1"})
    assert sweep.cell_resources({"backend": "cupy", "device": "cpu"}) == {"GPU": 1}
    for c in ({}, {"device": "cpu"}, {"backend": "torch"}, {"device": "cudax"}):
        assert sweep.cell_resources(c) is None, c
    assert sweep.check_resources({}, "w") is None and sweep.check_resources({"GPU": 2}, "w") == {"GPU": 2}
    for bad, msg in (({"GPU": 0}, "must be a positive number"), ({"GPU": "1"}, "must be a positive number"),
                     ({"a b": 1}, "is not a name"), ([1], "must be a table")):
        with pytest.raises(ValueError, match=msg):
            sweep.check_resources(bad, "w")
    assert sweep.worker_resources(["--nthreads", "1", "--resources", "GPU=1 MEM=2e9"]) == {"GPU": 1.0, "MEM": 2e9}
    assert sweep.worker_resources(["--resources=GPU=2"]) == {"GPU": 2.0}
    with pytest.raises(ValueError, match="is not NAME=AMOUNT"):
        sweep.worker_resources(["--resources", "GPU"])


def test_a_resource_no_worker_offers_is_warned_about():
    lines = []
    workers = {"tcp://a:1": {"resources": {}}, "tcp://b:2": {"resources": {"MEM": 4}}}
    sweep.warn_unoffered({0: {"GPU": 1}, 3: {"GPU": 1}, 4: {"MEM": 2}}, workers, "t", "tcp://s:8786", lines.append)
    assert lines == ["warning: t: 2 cell(s) ask for the worker resource GPU=1 and no worker of tcp://s:8786 offers it "
                     "yet; they wait for one (dask worker tcp://s:8786 --resources GPU=1)"]


@pytest.mark.parametrize("resources,msg", [
    ({"GPU": 0}, "resource GPU must be a positive number"),
    ("GPU", "resources must be a table"),
])
def test_bad_grid_file_resources_are_refused(resources, msg, tmp_path, capsys):
    grid = _grid(tmp_path, [{"i": 0, "log": str(tmp_path), "echo": 1}], resources=resources)
    rc = sweep.main(["run", str(grid), "--out", str(tmp_path / "out")])
    line = _one_error_line(capsys)
    assert rc == 2 and msg in line and line.startswith(f"error: grid file {grid}"), line
