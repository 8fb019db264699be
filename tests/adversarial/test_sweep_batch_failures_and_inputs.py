"""Issue 39 (Trust IV), the sweep's part: a batch submission that fails (``sbatch`` exits 1) is
reported in one line with its stderr and exit status 2 instead of a wait forever at "0 connected so
far"; ``--connect-timeout`` bounds the wait for a batch cluster's first worker (checked: finite,
> 0, at most a week; default an hour); and every path the sweep command reads -- the grid file, the
jobqueue config, the scheduler file, the output folder and the finished records in it, the
previous sweep.json -- that is a FIFO or a device is named as what it is, and never read (a FIFO
would block, /dev/zero never end)."""
from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from numerics import sweep
from tests.adversarial.conftest import tree_snapshot
from tests.numerics.sweep_testing import CELL
from tests.numerics.sweep_testing import grid_file as _grid
from tests.numerics.sweep_testing import one_error_line as _one_error_line

REPO = Path(__file__).resolve().parents[2]
needs_jobqueue = pytest.mark.skipif(importlib.util.find_spec("dask_jobqueue") is None,
                                    reason="the sweep extra's dask-jobqueue is not installed")
posix = pytest.mark.skipif(not hasattr(os, "mkfifo") or not os.path.exists("/dev/zero"), reason="POSIX only")

SLURM = ("jobqueue:\n  slurm:\n    cores: 1\n    memory: 1GiB\n    death-timeout: 30\n"
         "    scheduler-options: {host: 127.0.0.1, dashboard_address: ':0'}\n")

# ------------------------------------------------------------------ stand-in batch commands

#: sbatch stand-ins: each records its call in calls.txt, then answers as below
FAILS = ("import sys\n"
         "sys.stderr.write('sbatch: error: Batch job submission failed: Invalid account or account/partition "
         "combination specified\\n')\n"
         "sys.exit(1)\n")
FAILS_TWO_LINES = ("import sys\n"
                   "sys.stderr.write('sbatch: error: QOSMaxSubmitJobPerUserLimit\\n"
                   "sbatch: error: Batch job submission failed: Job violates accounting/QOS policy\\n')\n"
                   "sys.exit(1)\n")
FAILS_SILENT_STDOUT = "import sys\nprint('queue is closed for maintenance')\nsys.exit(3)\n"
FAILS_SILENT = "import sys\nsys.exit(1)\n"
NO_JOB_ID = "print('sbatch: accepted, no number today')\n"
#: "submits" a job that never starts a worker: its id is a sleeping session of its own
QUEUED = ("import subprocess\n"
          "p = subprocess.Popen(['sleep', '120'], start_new_session=True, stdin=subprocess.DEVNULL,\n"
          "                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
          "open(__import__('os').path.join(d, 'jobs.txt'), 'a').write(f'{p.pid}\\n')\n"
          "print(f'Submitted batch job {p.pid}')\n")

SCANCEL = """#!{python}
import os, signal, sys
from pathlib import Path
with open(Path(__file__).resolve().parent / "scancel.txt", "a") as fh:
    fh.write(" ".join(sys.argv[1:]) + "\\n")
for job in sys.argv[1:]:
    try:
        os.killpg(int(job), signal.SIGTERM)
    except ProcessLookupError:
        pass
"""


def _batch_bin(tmp_path: Path, body: str) -> tuple[Path, dict]:
    """A folder with a stand-in sbatch (``body`` after a prologue that records the call and sets
    ``d``, its folder) and scancel; the environment with it first on PATH."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    head = (f"#!{sys.executable}\nimport os\nd = os.path.dirname(os.path.abspath(__file__))\n"
            "open(os.path.join(d, 'calls.txt'), 'a').write(' '.join(__import__('sys').argv[1:]) + '\\n')\n")
    (bin_ / "sbatch").write_text(head + body)
    (bin_ / "scancel").write_text(SCANCEL.format(python=sys.executable))
    for n in ("sbatch", "scancel"):
        (bin_ / n).chmod(0o755)
    return bin_, {**os.environ, "PATH": f"{bin_}{os.pathsep}{os.environ['PATH']}"}


def _lines(p: Path) -> list[str]:
    return p.read_text().splitlines() if p.exists() else []


def _end_jobs(bin_: Path) -> None:
    for j in _lines(bin_ / "jobs.txt"):
        try:
            os.killpg(int(j), signal.SIGKILL)
        except ProcessLookupError:
            pass


def _sweep(args, env, timeout=60):
    """``python -m numerics.sweep ARGS`` in a process of its own (a hang is a failed test, not a
    stuck suite)."""
    return subprocess.run([sys.executable, "-m", "numerics.sweep", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)


# ------------------------------------------------------------------ 4: a failed submission

SUBMIT_FAILS = [
    (FAILS, 1, "sbatch failed (exit status 1): sbatch: error: Batch job submission failed: Invalid account or "
               "account/partition combination specified"),
    (FAILS_TWO_LINES, 2, "sbatch failed for 2 of 2 jobs (exit status 1): sbatch: error: QOSMaxSubmitJobPerUserLimit; "
                         "sbatch: error: Batch job submission failed: Job violates accounting/QOS policy"),
    (FAILS_SILENT_STDOUT, 1, "sbatch failed (exit status 3): queue is closed for maintenance"),
    (FAILS_SILENT, 1, "sbatch failed (exit status 1): it wrote nothing"),
    (NO_JOB_ID, 1, "sbatch answered without a job id (sbatch: accepted, no number today; the job may have been "
                   "submitted: check the queue)"),
]


@needs_jobqueue
@pytest.mark.parametrize("body,jobs,what", SUBMIT_FAILS, ids=["exit-1", "two-lines-two-jobs", "stdout-only",
                                                              "silent", "no-job-id"])
def test_a_failed_submission_is_one_line_and_exit_2(tmp_path, body, jobs, what):
    """Before: the command printed its start line and waited forever ('0 connected so far'), and
    the loop logged dask-jobqueue's RuntimeError as a traceback.  Now: one line naming the config,
    the command, its exit status and its stderr; status 2; nothing written."""
    bin_, env = _batch_bin(tmp_path, body)
    cfg = tmp_path / "slurm.yaml"
    cfg.write_text(SLURM)
    grid = _grid(tmp_path, [{"i": 0, "log": str(tmp_path), "echo": 1}])
    out = tmp_path / "out"
    t0 = time.monotonic()
    p = _sweep(["run", str(grid), "--out", str(out), "--jobqueue", str(cfg), "--jobs", str(jobs)], env)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert p.stderr == f"error: jobqueue config {cfg}: {what}\n" and p.stdout == "", p.stderr
    assert len(_lines(bin_ / "calls.txt")) == jobs  # each job submitted once, not again
    assert not out.exists()
    assert time.monotonic() - t0 < 45


@needs_jobqueue
def test_no_worker_within_the_connect_timeout_cancels_the_jobs_and_exits_2(tmp_path):
    """The jobs are submitted but no worker comes (queued, or dead on their node): after
    --connect-timeout seconds, one line, the jobs cancelled, nothing written."""
    bin_, env = _batch_bin(tmp_path, QUEUED)
    cfg = tmp_path / "slurm.yaml"
    cfg.write_text(SLURM + f"    log-directory: {tmp_path / 'logs'}\n")
    grid = _grid(tmp_path, [{"i": 0, "log": str(tmp_path), "echo": 1}])
    out = tmp_path / "out"
    try:
        t0 = time.monotonic()
        p = _sweep(["run", str(grid), "--out", str(out), "--jobqueue", str(cfg), "--jobs", "2",
                    "--connect-timeout", "2", "--quiet"], env)
        took = time.monotonic() - t0
        jobs = sorted(_lines(bin_ / "jobs.txt"), key=lambda s: (len(s), s))  # the ids, numerically
        assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
        assert p.stderr == (f"error: jobqueue config {cfg}: no worker of the 2 slurm job(s) ({', '.join(jobs)}) "
                            f"connected within 2 s (--connect-timeout): still queued, or ended before their workers "
                            f"started (see the jobs' logs in {tmp_path / 'logs'}); the jobs are cancelled\n"), p.stderr
        assert sorted(" ".join(_lines(bin_ / "scancel.txt")).split()) == sorted(jobs)
        assert not out.exists() and 2 <= took < 45
    finally:
        _end_jobs(bin_)


@needs_jobqueue
def test_the_wait_for_the_first_worker_says_so_and_ctrl_c_ends_it(tmp_path):
    """Without --quiet the wait is announced (the job ids, the timeout); Ctrl-C during it: the
    jobs cancelled, 'interrupted', status 130."""
    bin_, env = _batch_bin(tmp_path, QUEUED)
    cfg = tmp_path / "slurm.yaml"
    cfg.write_text(SLURM)
    grid = _grid(tmp_path, [{"i": 0, "log": str(tmp_path), "echo": 1}])
    p = subprocess.Popen([sys.executable, "-m", "numerics.sweep", "run", str(grid), "--out", str(tmp_path / "out"),
                          "--jobqueue", str(cfg)], cwd=REPO, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not _lines(bin_ / "jobs.txt") and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
        (job,) = _lines(bin_ / "jobs.txt")
        assert p.returncode == 130, (p.returncode, out, err)
        lines = err.splitlines()
        assert lines[0] == (f"grid: submitted 1 slurm job(s) ({job}); waiting up to "
                            f"{sweep.JOBQUEUE_CONNECT_TIMEOUT_S:g} s for the first worker (--connect-timeout)"), err
        assert lines[-1] == "interrupted" and "Traceback" not in err, err
        assert _lines(bin_ / "scancel.txt") == [job]
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)
        _end_jobs(bin_)


# ------------------------------------------------------------------ 4: --connect-timeout, checked

def _jq(t: Path) -> list[str]:
    (t / "jq.yaml").write_text("jobqueue:\n  slurm:\n    cores: 1\n    memory: 1GiB\n")
    return ["--jobqueue", str(t / "jq.yaml")]


BAD_TIMEOUTS = [
    (_jq, "0", "--connect-timeout must be a number of seconds in (0, 604800] with --jobqueue, got 0"),
    (_jq, "-5", "--connect-timeout must be a number of seconds in (0, 604800] with --jobqueue, got -5"),
    (_jq, "nan", "--connect-timeout must be a number of seconds in (0, 604800] with --jobqueue, got nan"),
    (_jq, "inf", "--connect-timeout must be a number of seconds in (0, 604800] with --jobqueue, got inf"),
    (_jq, "1e999", "--connect-timeout must be a number of seconds in (0, 604800] with --jobqueue, got inf"),
    (_jq, "604801", "--connect-timeout must be a number of seconds in (0, 604800] with --jobqueue, got 604801"),
    (lambda t: [], "30", "--connect-timeout applies to --scheduler only (an address given directly or by "
                         "--scheduler-file: seconds for it to answer) and --jobqueue (seconds for the first worker of "
                         "the batch jobs); the local cluster is started here"),
]


@pytest.mark.parametrize("where,value,msg", BAD_TIMEOUTS)
def test_bad_connect_timeouts_are_refused_before_any_work(tmp_path, capsys, monkeypatch, where, value, msg):
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))  # nothing could be submitted anyway
    grid = _grid(tmp_path, [{"i": 0, "echo": 1}])
    argv = ["run", str(grid), "--out", str(tmp_path / "out"), *where(tmp_path), "--connect-timeout", value]
    before = tree_snapshot(tmp_path)
    assert sweep.main(argv) == 2
    assert _one_error_line(capsys) == f"error: {msg}"
    assert tree_snapshot(tmp_path) == before


@needs_jobqueue
def test_connect_timeout_is_taken_with_jobqueue_and_its_default_is_documented(tmp_path, capsys):
    """--connect-timeout with --jobqueue (before: refused, 'applies to --scheduler only'); its
    default and bounds in --help and docs/sweeps.md; the API's default for a batch cluster is the
    hour, not the scheduler's 5 s."""
    grid = _grid(tmp_path, [{"i": 0, "echo": 1}])
    argv = ["run", str(grid), "--out", str(tmp_path / "out"), *_jq(tmp_path), "--print-job-script"]
    assert sweep.main([*argv, "--connect-timeout", "604800"]) == 0
    assert "distributed.cli.dask_worker" in capsys.readouterr().out
    help_text = " ".join(sweep.command_parser("run")[0].format_help().split())
    assert ("with --jobqueue: seconds for the batch jobs to be submitted and their first worker to connect" in help_text
            and "(default 3600, one hour; at most 604800, a week)" in help_text), help_text
    assert sweep.JOBQUEUE_CONNECT_TIMEOUT_S == 3600
    docs = " ".join((REPO / "docs" / "sweeps.md").read_text().split())
    assert "`--connect-timeout SECONDS` (default 3600, one hour; at most a week:" in docs


# ------------------------------------------------------------------ 8: paths that are not regular files

def _fifo(p: Path) -> str:
    os.mkfifo(p)
    return str(p)


def _zero_link(p: Path) -> str:
    p.symlink_to("/dev/zero")
    return str(p)


def _input(kind: str, name: str):
    def make(t: Path) -> str:
        if kind == "fifo":
            return _fifo(t / name)
        if kind == "dev":
            return "/dev/zero"
        if kind == "link":
            return _zero_link(t / name)
        (t / name).mkdir()
        return str(t / name)
    return make


FIFO_WORDS, DEV_WORDS = "is not a regular file (a FIFO)", "is not a regular file (a character device)"
# (what to give, where: grid | jobqueue | scheduler-file | out, the message after "error: ")
BAD_PATHS = [
    (_input("fifo", "g.json"), "grid", "grid file {f}: " + FIFO_WORDS),
    (_input("dev", ""), "grid", "grid file {f}: " + DEV_WORDS),
    (_input("link", "z.toml"), "grid", "grid file {f}: " + DEV_WORDS),
    (_input("fifo", "jq.yaml"), "jobqueue", "jobqueue config {f}: " + FIFO_WORDS),
    (_input("dev", ""), "jobqueue", "jobqueue config {f}: " + DEV_WORDS),
    (_input("fifo", "s.json"), "scheduler-file", "--scheduler-file {f}: " + FIFO_WORDS),
    (_input("dev", ""), "scheduler-file", "--scheduler-file {f}: " + DEV_WORDS),
    (_input("dev", ""), "out", "--out {f}: is a character device, not a folder"),
    (_input("fifo", "o"), "out", "--out {f}: is a FIFO, not a folder"),
    (lambda t: (t / "o").mkdir() or _fifo(t / "o" / "cells") and str(t / "o"), "out",
     "--out {f}: {f}/cells is a FIFO, not a folder"),
    (lambda t: (t / "o").mkdir() or (t / "o" / "sweep.json").mkdir() or str(t / "o"), "out",
     "--out {f}: {f}/sweep.json is a folder, not a file; the sweep writes its table there (remove it)"),
    (lambda t: (t / "o").mkdir() or _fifo(t / "o" / "results.csv") and str(t / "o"), "out",
     "--out {f}: {f}/results.csv " + FIFO_WORDS + "; the sweep writes its table there (remove it)"),
    (lambda t: (t / "o").mkdir() or _zero_link(t / "o" / "sweep.json") and str(t / "o"), "out",
     "--out {f}: {f}/sweep.json " + DEV_WORDS + "; the sweep writes its table there (remove it)"),
]


@posix
@pytest.mark.parametrize("make,where,msg", BAD_PATHS)
def test_paths_that_are_not_regular_files_are_named_as_what_they_are(tmp_path, capsys, make, where, msg):
    """Before: a FIFO or /dev/zero given as the grid file, the jobqueue config or the scheduler file
    was 'is a folder, not a file', and as --out 'is a file, not a folder'.  Nothing is read (a FIFO
    would block: this test would hang), nothing written."""
    if where == "jobqueue" and importlib.util.find_spec("dask_jobqueue") is None:
        pytest.skip("the sweep extra's dask-jobqueue is not installed")
    f = make(tmp_path)
    grid = str(_grid(tmp_path, [{"i": 0, "echo": 1}])) if where != "grid" else f
    out = f if where == "out" else str(tmp_path / "out")
    # --list: what is refused is refused before it; the code before this fix ran the grid, then blocked
    # writing its table into the FIFO
    argv = ["run", grid, "--out", out, "--list"]
    if where in ("jobqueue", "scheduler-file"):
        argv += [f"--{where}", f]
    before = sorted(os.listdir(tmp_path))
    assert sweep.main(argv) == 2
    assert _one_error_line(capsys) == "error: " + msg.format(f=f)
    assert sorted(os.listdir(tmp_path)) == before


def _ids(n: int) -> list[str]:
    return [sweep.cell_id(CELL, {"i": i, "echo": i}) for i in range(n)]


def _record_at(kind: str):
    """What to put at the first cell's record path: a FIFO, a link to /dev/zero, a folder."""
    def make(p: Path) -> None:
        if kind == "fifo":
            os.mkfifo(p)
        elif kind == "dev":
            p.symlink_to("/dev/zero")
        else:
            p.mkdir()
    return make


RECORD_PATHS = [
    (_record_at("fifo"), [], FIFO_WORDS),
    (_record_at("dev"), [], DEV_WORDS),
    (_record_at("dir"), [], "is a folder, not a file"),
    (_record_at("fifo"), ["--list"], FIFO_WORDS),
    (_record_at("dev"), ["--list"], DEV_WORDS),
]


@posix
@pytest.mark.parametrize("make,extra,words", RECORD_PATHS)
def test_a_record_path_that_is_not_a_regular_file_is_refused_before_any_work(tmp_path, make, extra, words):
    """A FIFO, a device or a folder where a cell's record is read from and written to (--out's
    cells/<id>.json): before, a run or --list blocked forever on the FIFO, read /dev/zero until the
    memory ran out, or failed writing the record over the folder after the cell ran; now one line,
    exit 2, nothing started.  (In a process of its own: the old hang fails the test, not the suite.)"""
    grid = _grid(tmp_path, [{"i": i, "echo": i} for i in range(2)])
    out = tmp_path / "out"
    (out / "cells").mkdir(parents=True)
    a, _ = _ids(2)
    make(out / "cells" / f"{a}.json")
    p = _sweep(["run", str(grid), "--out", str(out), "--workers", "1", *extra], os.environ, timeout=60)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert p.stderr == (f"error: --out {out}: cells/{a}.json {words}; the cell's record is written there "
                        f"(remove it)\n") and p.stdout == "", p.stderr
    assert sorted(os.listdir(out / "cells")) == [f"{a}.json"]
