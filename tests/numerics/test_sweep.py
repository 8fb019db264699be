"""numerics.sweep: a grid on a 2-worker LocalCluster survives a failing cell and a killed worker
(every other cell runs exactly once, results equal the single-process loop bit for bit, a rerun
runs only what is missing); the table and records; bad input refused before any work."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from numerics import roundoff, sweep
from tests.adversarial.conftest import tree_snapshot
from tests.numerics import sweep_cells

CELL = "tests.numerics.sweep_cells:cell"
TINY = {"n": 6, "d": 3, "batch": 4, "backend": "numpy", "layer_ref": 0}


def _roundoff_configs():
    return [roundoff.sweep_check({"arch": arch, "layers": layers, "dtype": dtype, **TINY})
            for arch in ("baseconv", "lsa") for layers in (4, 7) for dtype in ("float64", "float32")]


def _json(x):
    return json.loads(json.dumps(x, allow_nan=False))


# ------------------------------------------------------------------ reliability

def test_grid_survives_a_failing_cell_and_a_killed_worker_and_resumes(tmp_path, capsys):
    log = tmp_path / "log"
    log.mkdir()
    configs = [{"i": i, "log": str(log), "roundoff": rc} for i, rc in enumerate(_roundoff_configs())]
    configs[2]["fail_until"] = "allow-2"  # raises until the test allows it
    configs[5]["kill"] = True  # SIGKILLs its worker on its first execution
    out = tmp_path / "out"

    res = sweep.run_grid(CELL, configs, out, workers=2, retries=1, progress=True, name="t")

    # the progress line of the cell run again after its worker was lost says so, no other line does
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("t: [")]
    assert len(lines) == 8, lines
    marked = [ln for ln in lines if "rerun" in ln]
    assert len(marked) == 1 and res.rows[5]["id"] in marked[0] and "[run 2: rerun after a lost worker]" in marked[0]
    assert not list((out / "cells").glob("*.started"))  # the start counts go with the records
    assert res.failed == 1 and res.skipped == 0 and res.exit_status() == sweep.FAILED_BASE + 1
    assert [r["index"] for r in res.rows] == list(range(8))
    bad = res.rows[2]
    assert bad["status"] == "failed" and bad["error"] == "ValueError: cell 2 asked to fail"
    assert "Traceback" in bad["traceback"] and bad["result"] is None
    ran = sweep_cells.runs(log)
    assert ran[5] == 2, ran  # killed once, run again on a worker the nanny restarted
    assert {i: n for i, n in ran.items() if i != 5} == {i: 1 for i in range(8) if i != 5}, ran
    assert (log / "killed").exists()
    # the single-process loop, in this process: equal bit for bit (the JSON text of floats round-trips)
    loop = [_json(roundoff.sweep_cell(c["roundoff"])) for c in configs]
    for i, r in enumerate(res.rows):
        if i == 2:
            continue
        assert r["status"] == "ok" and r["result"] == loop[i], i
        on_disk = json.loads((out / "cells" / f"{r['id']}.json").read_text())
        assert on_disk["result"] == loop[i] and on_disk["status"] == "ok"
        assert r["wall_s"] > 0 and r["cpu_s"] >= 0 and r["cpu_s"] == pytest.approx(r["cpu_user_s"] + r["cpu_sys_s"])
        assert r["worker"].startswith("tcp://")
    lines = (out / "results.jsonl").read_text().splitlines()
    assert [json.loads(s)["id"] for s in lines] == [r["id"] for r in res.rows]
    with open(out / "results.csv", newline="") as fh:
        table = list(csv.DictReader(fh))
    assert [t["status"] for t in table] == ["ok", "ok", "failed"] + ["ok"] * 5
    assert table[2]["error"] == "ValueError: cell 2 asked to fail"
    assert float(table[0]["result.mse"]) == loop[0]["mse"] and table[0]["config.roundoff.arch"] == "baseconv"
    summary = json.loads((out / "sweep.json").read_text())
    assert summary["cells"] == 8 and summary["failed"] == 1 and summary["cluster"]["workers"] == 2

    # rerun: cell 0's record is lost, cell 2 may now succeed; only those two run
    (out / "cells" / f"{res.rows[0]['id']}.json").unlink()
    (log / "allow-2").touch()
    res2 = sweep.run_grid(CELL, configs, out, workers=1, retries=1, progress=False, name="t")
    assert res2.failed == 0 and res2.skipped == 6 and res2.exit_status() == 0
    assert [r["resumed"] for r in res2.rows] == [False, True, False, True, True, True, True, True]
    ran2 = sweep_cells.runs(log)
    assert {i: ran2[i] - ran[i] for i in ran2} == {0: 1, 1: 0, 2: 1, 3: 0, 4: 0, 5: 0, 6: 0, 7: 0}
    loop[2] = _json(roundoff.sweep_cell(configs[2]["roundoff"]))
    assert [r["result"] for r in res2.rows] == loop

    # a third run has nothing to do and starts no cluster
    res3 = sweep.run_grid(CELL, configs, out, progress=False, name="t")
    assert res3.skipped == 8 and res3.cluster["workers"] is None and sweep_cells.runs(log) == ran2


def test_a_cells_starts_are_counted_beside_its_folder(tmp_path):
    """A worker counts each start of a cell in ``cells/<id>.started`` (the driver removes it with the
    record): a start after one that left no record is a rerun, and its record says which run it is."""
    from polyverify.sweep.worker import attempts_file, count_attempt, execute_cell

    (tmp_path / "cells").mkdir()
    art = str(tmp_path / "cells" / "c1")
    assert [count_attempt(art) for _ in range(3)] == [1, 2, 3] and count_attempt(None) == 1
    assert Path(attempts_file(art)).read_text() == "3" and not list(tmp_path.rglob("*.tmp"))
    rec = execute_cell(CELL, {"i": 0, "log": str(tmp_path), "echo": 1}, art)
    assert rec["status"] == "ok" and rec["attempt"] == 4
    assert "attempt" not in execute_cell(CELL, {"i": 0, "log": str(tmp_path), "echo": 1}, str(tmp_path / "cells" / "c2"))


def test_execute_cell_records_failures_without_raising(tmp_path):
    log = tmp_path
    rec = sweep.execute_cell(CELL, {"i": 0, "log": str(log), "nan": True})
    assert rec["status"] == "failed" and rec["error"] == "non-finite value in the result: result['value'] = nan"
    assert rec["result"] == {"value": None} and rec["worker"] == "local"
    rec = sweep.execute_cell(CELL, {"i": 1})  # no "log": a KeyError inside the cell
    assert rec["status"] == "failed" and rec["error"] == "KeyError: 'log'"
    rec = sweep.execute_cell("numerics.sweep:canonical", {"a": 1})  # returns a str, not a dict
    assert rec["status"] == "failed" and rec["error"] == "TypeError: the cell returned a str, not a dict"
    rec = sweep.execute_cell("no.such.module:f", {})
    assert rec["status"] == "failed" and "cannot import no.such.module" in rec["error"]


def test_cell_id_is_stable_and_independent_of_key_order():
    a = sweep.cell_id("m.n:f", {"x": 1, "y": [1.5, "z"]})
    assert a == sweep.cell_id("m.n:f", {"y": [1.5, "z"], "x": 1})
    assert a != sweep.cell_id("m.n:g", {"x": 1, "y": [1.5, "z"]})
    # the documented form (sha256 of the canonical JSON text), so records written earlier are found again
    import hashlib

    text = '{"cell":"m.n:f","config":{"x":1,"y":[1.5,"z"]}}'
    assert a == hashlib.sha256(text.encode()).hexdigest()[:16]


def test_grid_configs_product_fixed_and_cells():
    spec = {"fixed": {"n": 4}, "grid": {"a": [1, 2], "b": ["x", "y"]}, "cells": [{"a": 9}]}
    assert sweep.grid_configs(spec, "f") == [{"n": 4, "a": 1, "b": "x"}, {"n": 4, "a": 1, "b": "y"},
                                             {"n": 4, "a": 2, "b": "x"}, {"n": 4, "a": 2, "b": "y"},
                                             {"n": 4, "a": 9}]


def test_csv_flattens_nested_results():
    rows = [{"index": 0, "id": "a", "status": "ok", "config": {"k": 1}, "result": {"m": {"x": 1.5}, "l": [1, 2]}},
            {"index": 1, "id": "b", "status": "failed", "error": "E: x", "config": {"k": 2}, "result": None}]
    table = list(csv.DictReader(sweep.csv_text(rows).splitlines()))
    assert table[0]["result.m.x"] == "1.5" and table[0]["result.l"] == "[1,2]" and table[1]["result.m.x"] == ""
    assert table[1]["error"] == "E: x" and table[1]["config.k"] == "2"


# ------------------------------------------------------------------ the command

def test_roundoff_command_writes_table_and_plots_and_resumes(tmp_path, capsys, shared_cluster):
    """On the test run's cluster (``--scheduler``; the local cluster's start is tested above)."""
    out = tmp_path / "o"
    argv = ["roundoff", "--archs", "baseconv", "--depths", "4,7", "--dtypes", "float64,float32", "--sizes", "6x3",
            "--batch", "4", "--backends", "numpy", "--scheduler", shared_cluster.scheduler_address, "--out", str(out)]
    assert sweep.main(argv) == 0
    cap = capsys.readouterr()
    assert "4 cells, 4 run, 0 finished earlier, 0 failed" in cap.out
    assert cap.err.count("roundoff: [") == 4 and "\r" not in cap.err  # a plain line per cell in a log
    assert (out / "plots" / "mse_baseconv.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with open(out / "results.csv", newline="") as fh:
        table = list(csv.DictReader(fh))
    assert sorted((t["config.layers"], t["config.dtype"]) for t in table) == [
        ("4", "float32"), ("4", "float64"), ("7", "float32"), ("7", "float64")]
    # a finished file damaged by hand (status ok, a result without the measurements): before,
    # reused and the plot raised a KeyError; now computed again with a warning
    victim = sorted((out / "cells").glob("*.json"))[0]
    rec = json.loads(victim.read_text())
    victim.write_text(json.dumps({**rec, "result": {"note": "edited"}}))
    assert sweep.main(argv + ["--list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert sorted(s.split()[1] for s in listed) == ["ok", "ok", "ok", "stale"]
    assert sweep.main(argv + ["--quiet"]) == 0
    cap = capsys.readouterr()
    assert "4 cells, 1 run, 3 finished earlier" in cap.out
    assert cap.err.splitlines() == [f"warning: roundoff: cells/{victim.name} does not match its digest (edited or "
                                    f"damaged after it was written); computing the cell again"]
    assert json.loads(victim.read_text())["result"] == rec["result"]
    assert sweep.main(argv + ["--list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert len(listed) == 4 and all(" ok " in s for s in listed)


# ------------------------------------------------------------------ bad input

def _tripwire(*a, **kw):
    raise AssertionError("work started on bad input")


def _grid(tmp: Path, name: str, text: str) -> str:
    p = tmp / "grids" / name
    p.parent.mkdir(exist_ok=True)
    p.write_text(text)
    return str(p)


BAD = [
    ([], "the following arguments are required: command"),
    (["nope"], "invalid choice: 'nope'"),
    (["--out", "{out}"], "invalid choice"),
    (["run", "{tmp}/missing.toml", "--out", "{out}"], "not found"),
    (["run", "grid:bad.toml=x = [", "--out", "{out}"], "not valid TOML"),
    (["run", "grid:g.ini=x", "--out", "{out}"], "unknown format .ini"),
    (["run", "grid:g.json=[1, 2]", "--out", "{out}"], "the top level must be a table"),
    (["run", "grid:g.toml=cell = 'os:path'\nbogus = 1\n[grid]\na = [1]", "--out", "{out}"], "unknown key(s) bogus"),
    (["run", "grid:g.toml=cell = 'os:getcwd'\nsweep = 'roundoff'\n[grid]\na = [1]", "--out", "{out}"],
     "exactly one of 'sweep'"),
    (["run", "grid:g.toml=cell = 'os:nothing_here'\n[grid]\na = [1]", "--out", "{out}"], "os has no function"),
    (["run", "grid:g.toml=cell = 'not a path'\n[grid]\na = [1]", "--out", "{out}"], "not an import path"),
    (["run", "grid:g.toml=cell = 'os:getcwd'\n[grid]\na = []", "--out", "{out}"], "grid.a must be a non-empty list"),
    (["run", "grid:g.toml=cell = 'os:getcwd'\n[fixed]\na = 1", "--out", "{out}"], "no cells"),
    (["run", "grid:g.toml=cell = 'os:getcwd'\n[[cells]]\na = 1\n[[cells]]\na = 1", "--out", "{out}"],
     "config 1 is the same cell as config 0"),
    (["run", "grid:g.toml=cell = 'os:getcwd'\n[grid]\na = " + str(list(range(101))) + "\nb = "
      + str(list(range(100))), "--out", "{out}"], "10,100 cells, above the limit 10,000 (pass --allow-large"),
    (["run", "grid:g.yaml=sweep: roundoff\ngrid:\n  arch: [nope]\n  layers: [4]", "--out", "{out}"],
     "cell 0: unknown construction 'nope'"),
    (["run", "grid:g.json={\"sweep\": \"roundoff\", \"cells\": [{\"arch\": \"baseconv\"}]}", "--out", "{out}"],
     "needs 'layers'"),
    (["run", "grid:g.json={\"sweep\": \"nope\", \"cells\": [{}]}", "--out", "{out}"], "unknown sweep 'nope'"),
    (["roundoff", "--out", "{out}"], "--depths"),
    (["roundoff", "--depths", "0", "--out", "{out}"], "--layers must be >= 1"),
    (["roundoff", "--depths", "5", "--out", "{out}"], "nearest valid"),
    (["roundoff", "--depths", "4", "--archs", "nope", "--out", "{out}"], "unknown construction 'nope'"),
    (["roundoff", "--depths", "4", "--dtypes", "float8", "--out", "{out}"], "unknown dtype 'float8'"),
    (["roundoff", "--depths", "4", "--sizes", "6by3", "--out", "{out}"], "--sizes: not a list of NxD values"),
    (["roundoff", "--depths", "4", "--kappas", "nan", "--out", "{out}"], "--kappas must be finite"),
    (["roundoff", "--depths", "4", "--workers", "0", "--out", "{out}"], "--workers must be >= 1"),
    (["roundoff", "--depths", "4", "--workers", "257", "--out", "{out}"], "--workers = 257 exceeds the limit 256"),
    (["roundoff", "--depths", "4", "--retries", "-1", "--out", "{out}"], "--retries must be >= 0"),
    (["roundoff", "--depths", "4", "--workers", "2", "--scheduler", "tcp://127.0.0.1:8786", "--out", "{out}"],
     "cannot be combined with --scheduler"),
    (["roundoff", "--depths", "4", "--scheduler", "not an address", "--out", "{out}"], "not a scheduler address"),
    (["roundoff", "--depths", "4", "--out", "{file}"], "is a file, not a folder"),
    (["roundoff", "--depths", "4", "--out", "{file}/sub"], "is a file, not a folder"),
    (["train", "--lrs", "nan", "--out", "{out}"], "--lrs must be finite"),
    (["train", "--widths", "0", "--out", "{out}"], "--width must be >= 1"),
    (["train", "--models", "mamba", "--out", "{out}"], "invalid choice: 'mamba'"),
    (["train", "--set", "bogus=1", "--out", "{out}"], "unknown option 'bogus'"),
    (["train", "--set", "steps=5", "--out", "{out}"], "steps has its own flag"),
    (["train", "--steps", "0", "--out", "{out}"], "--steps must be >= 1"),
    (["compare", "--learned", "{tmp}/missing.safetensors", "--out", "{out}"], "file not found"),
    (["compare", "--learned", "{tmp}/*.nothing", "--out", "{out}"], "no weight file matches"),
    (["compare", "--learned", "{file}", "--out", "{out}"], "not a safetensors file"),
    (["compare", "--learned", "{file}", "--constructions", "nope", "--out", "{out}"], "unknown construction"),
    (["catalogue", "--entries", "nope", "--out", "{out}"], "unknown catalogue entry 'nope'"),
]


def _fill(argv, tmp: Path):
    out = []
    for a in argv:
        if a.startswith("grid:"):
            name, _, text = a[5:].partition("=")
            a = _grid(tmp, name, text)
        out.append(a.replace("{out}", str(tmp / "out")).replace("{file}", str(tmp / "a_file"))
                   .replace("{tmp}", str(tmp)))
    return out


@pytest.mark.parametrize("argv,msg", BAD)
def test_bad_input_is_refused_before_any_work(argv, msg, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sweep, "run_grid", _tripwire)
    (tmp_path / "a_file").write_text("not a folder")
    argv = _fill(argv, tmp_path)
    before = tree_snapshot(tmp_path)
    rc = sweep.main(argv)
    err = capsys.readouterr().err
    assert rc == 2, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    assert msg in lines[0], err
    assert not (tmp_path / "out").exists()
    assert tree_snapshot(tmp_path) == before


def test_run_grid_refuses_bad_arguments_before_starting(tmp_path):
    with pytest.raises(ValueError, match="config 1 is the same cell as config 0"):
        sweep.run_grid(CELL, [{"a": 1}, {"a": 1}], tmp_path / "o")
    with pytest.raises(ValueError, match="not JSON-serialisable"):
        sweep.run_grid(CELL, [{"a": float("nan")}], tmp_path / "o")
    with pytest.raises(ValueError, match="--workers must be an integer >= 1"):
        sweep.run_grid(CELL, [{"a": 1}], tmp_path / "o", workers=0)
    with pytest.raises(ValueError, match="cannot import"):
        sweep.run_grid("no_such_module_x:f", [{"a": 1}], tmp_path / "o")
    assert not (tmp_path / "o").exists()


def test_every_command_has_help():
    import argparse

    for command in ["run", *sweep.SWEEPS]:
        p, _ = sweep.command_parser(command)
        assert p.prog == f"python -m numerics.sweep {command}" and p.description
        for act in p._actions:
            if not isinstance(act, argparse._HelpAction):
                assert act.help, (command, act.dest)


# ------------------------------------------------------------------ an existing cluster, the adapters

def test_run_grid_on_an_existing_scheduler(tmp_path):
    """--scheduler: the command connects to a running cluster (here one in this process, with a
    dashboard) and closes only its own client; the cluster keeps running."""
    from distributed import LocalCluster

    log = tmp_path / "log"
    log.mkdir()
    rc = roundoff.sweep_check({"arch": "baseconv", "layers": 4, "dtype": "float64", **TINY})
    configs = [{"i": 0, "log": str(log), "roundoff": rc}, {"i": 1, "log": str(log), "nan": True}]
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster:
        res = sweep.run_grid(CELL, configs, tmp_path / "o", scheduler=cluster.scheduler_address, progress=False)
        assert cluster.scheduler.workers  # still up
    assert res.failed == 1 and res.cluster["scheduler"] == cluster.scheduler_address
    # the dashboard link only where the scheduler has bokeh (asked of the scheduler itself)
    assert (res.cluster["dashboard"] is not None) == sweep._has_bokeh()
    assert res.rows[0]["result"] == _json(roundoff.sweep_cell(rc))
    assert res.rows[1]["error"] == "non-finite value in the result: result['value'] = nan"


def test_train_adapter_cell_writes_its_files(tmp_path):
    from numerics import train

    c = train.sweep_check({"task": "gradient", "n": 4, "d": 2, "width": 4, "layers": 1, "steps": 3, "batch": 8,
                           "eval_batch": 16, "lr": 1e-3})
    assert c["seed"] == 0 and c["model"] == "baseconv" and c["lr"] == 1e-3  # completed: one id per run
    assert c == train.sweep_check(c)
    token = sweep.CELL_DIR.set(str(tmp_path / "cell"))  # as execute_cell does for a cell of a sweep
    try:
        r = train.sweep_cell(c)
    finally:
        sweep.CELL_DIR.reset(token)
    assert r["steps"] == 3 and r["lr"] == 1e-3 and r["final_test_mse"] > 0
    assert {"weights.safetensors", "curves.png", "result.json"} <= {p.name for p in (tmp_path / "cell").iterdir()}
    with pytest.raises(sweep.UsageError, match="cell 3: --width must be >= 1"):
        train.sweep_check({**c, "width": 0}, where="cell 3")


def test_compare_and_catalogue_adapter_cells(tmp_path):
    from dataclasses import replace

    from constructions import weights_io
    from verify import catalogue_report, compare
    from verify.comparison import build_construction, constructed_stack, stack_of

    con = build_construction("gd-baseconv", 4, 2)
    st = stack_of(con, constructed_stack(con, 1).layers)
    path = weights_io.save(tmp_path / "w.safetensors", replace(con, prologue=st.prologue, body=st.bodies[0],
                                                               epilogue=st.epilogue), 1)
    c = compare.sweep_check({"learned": str(path), "construction": "gd-baseconv", "problems": 4, "iters": 2,
                             "iter_sigmas": "1", "skip": "polynomial,invariants"})
    r = compare.sweep_cell(c)
    assert r["k"] == 1 and r["exit_status"] == 0 and r["report"] is None  # outside a sweep: a temporary folder
    assert set(r["prediction_relative_rms"].values()) == {0.0}  # the constructed weights themselves
    row = catalogue_report.sweep_cell({"entry": "gd-baseconv"})
    assert row["proved"] is True and row["name"] == "gd-baseconv"
