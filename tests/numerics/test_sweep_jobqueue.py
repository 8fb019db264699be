"""numerics.sweep on a batch cluster through dask-jobqueue (``--jobqueue FILE``): the job script
a SLURM or PBS config gives (``--print-job-script``: printed, nothing submitted or written, the
config's cores, memory and walltime in it), bad configs refused in one line before any work, and
a whole sweep run through stand-ins for ``sbatch`` and ``scancel`` that run each job script on
this machine (the cluster's scheduler in the command, its workers in the "jobs")."""
from __future__ import annotations

import importlib.util
import json
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

# not imported here: importing dask_jobqueue sets SIGINT to sys.exit(); numerics.sweep imports it
# keeping the handler (test_importing_dask_jobqueue_keeps_the_sigint_handler)
pytestmark = pytest.mark.skipif(importlib.util.find_spec("dask_jobqueue") is None,
                                reason="the sweep extra's dask-jobqueue is not installed")

REPO = Path(__file__).resolve().parents[2]

SLURM_YAML = """\
jobqueue:
  slurm:
    cores: 8
    memory: 16GiB
    walltime: "02:00:00"
    queue: normal
    account: myproject
    log-directory: {logs}
    job-extra-directives: ["--gres=gpu:1"]
    job-script-prologue: ["source /opt/venvs/polyverify/bin/activate"]
    worker-extra-args: ["--resources", "GPU=1"]
"""

PBS_TOML = """\
[jobqueue.pbs]
cores = 4
memory = "8GiB"
processes = 2
walltime = "01:30:00"
queue = "workq"
account = "proj42"
job-extra-directives = ["-l place=scatter"]
"""


# ------------------------------------------------------------------ the dry run

def test_print_job_script_slurm_from_yaml(tmp_path, capsys):
    cfg = tmp_path / "slurm.yaml"
    cfg.write_text(SLURM_YAML.format(logs=tmp_path / "logs"))
    grid = _grid(tmp_path, [{"i": 0, "log": str(tmp_path), "echo": 1, "device": "cuda"}])
    before = tree_snapshot(tmp_path)
    rc = sweep.main(["run", str(grid), "--out", str(tmp_path / "out"), "--jobqueue", str(cfg), "--print-job-script"])
    out, err = capsys.readouterr()
    assert rc == 0 and err == "", err
    lines = out.splitlines()
    assert lines[0] == "#!/usr/bin/env bash"
    for directive in ("#SBATCH --cpus-per-task=8", "#SBATCH --mem=16G", "#SBATCH -t 02:00:00", "#SBATCH -p normal",
                      "#SBATCH -A myproject", "#SBATCH --gres=gpu:1",
                      f"#SBATCH -o {tmp_path / 'logs'}/dask-worker-%J.out"):
        assert directive in lines, (directive, out)
    # the prologue: workers that may start processes of their own, then the config's lines, in order
    i = lines.index(sweep.JOB_DAEMON_LINE)
    assert lines[i + 1] == "source /opt/venvs/polyverify/bin/activate"
    (cmd,) = [s for s in lines if "distributed.cli.dask_worker" in s]
    assert cmd.startswith(f"{sys.executable} -m distributed.cli.dask_worker {sweep.JOB_SCRIPT_ADDRESS} ")
    # 8 cores, 16 GiB: one single-threaded worker process per core, 2 GiB each, each offering the GPU
    for part in ("--nworkers 8", "--nthreads 1", "--memory-limit 2.00GiB", "--resources GPU=1"):
        assert f" {part}" in cmd, (part, cmd)
    assert tree_snapshot(tmp_path) == before  # nothing written: no output folder, no log folder


def test_print_job_script_pbs_from_toml(tmp_path, capsys):
    cfg = tmp_path / "pbs.toml"
    cfg.write_text(PBS_TOML)
    rc = sweep.main(["roundoff", "--depths", "4", "--out", str(tmp_path / "out"), "--jobqueue", str(cfg),
                     "--print-job-script"])
    out, err = capsys.readouterr()
    assert rc == 0 and err == "", err
    lines = out.splitlines()
    for directive in ("#PBS -l select=1:ncpus=4:mem=8192MB", "#PBS -l walltime=01:30:00", "#PBS -q workq",
                      "#PBS -A proj42", "#PBS -l place=scatter"):
        assert directive in lines, (directive, out)
    (cmd,) = [s for s in lines if "distributed.cli.dask_worker" in s]
    for part in ("--nworkers 2", "--nthreads 2", "--memory-limit 4.00GiB"):  # processes = 2 of the 4 cores
        assert f" {part}" in cmd, (part, cmd)
    assert not (tmp_path / "out").exists()


def test_read_jobqueue_config_is_the_spec_the_cluster_reads(tmp_path):
    cfg = tmp_path / "pbs.toml"
    cfg.write_text(PBS_TOML)
    spec = sweep.read_jobqueue_config(cfg)
    assert spec.system == "pbs" and spec.cluster_class == "PBSCluster" and spec.submit_command == "qsub"
    assert spec.threads == 4 and spec.options["processes"] == 2
    assert spec.options["job-script-prologue"] == [sweep.JOB_DAEMON_LINE]
    assert spec.dask_config()["jobqueue.pbs.walltime"] == "01:30:00"


# ------------------------------------------------------------------ bad configs and flags

def _cfg(text: str, suffix: str = ".yaml"):
    return lambda t: _write(t / f"jq{suffix}", text)


def _write(p: Path, text: str) -> str:
    p.write_text(text)
    return str(p)


SLURM_OK = "jobqueue:\n  slurm:\n    cores: 2\n    memory: 4GiB\n"
BAD = [
    (lambda t: str(t / "missing.yaml"), [], "jobqueue config {f}: not found"),
    (_cfg("jobqueue: [unclosed"), [], "jobqueue config {f}: not valid YAML"),
    (_cfg("cores = 2", ".ini"), [], "unknown format .ini"),
    (_cfg("slurm:\n  cores: 2\n"), [], "the top level must be one table 'jobqueue'"),
    (_cfg("jobqueue:\n  slurm: {cores: 2, memory: 1GiB}\n  pbs: {cores: 2, memory: 1GiB}\n"), [],
     "give exactly one batch system under 'jobqueue'"),
    (_cfg("jobqueue:\n  sge: {cores: 2, memory: 1GiB}\n"), [],
     "unknown batch system 'sge'; this runner builds slurm, pbs"),
    (_cfg(SLURM_OK + "    gpus: 1\n"), [], "unknown key 'gpus'; the slurm keys are"),
    (_cfg(SLURM_OK + "    job_extra_directives: []\n"), [],
     "write 'job-extra-directives' (the config keys use hyphens)"),
    (_cfg(SLURM_OK + "    env-extra: []\n"), [],
     "'env-extra' is an old name; dask-jobqueue calls it 'job-script-prologue'"),
    (_cfg("jobqueue:\n  slurm:\n    memory: 4GiB\n"), [], "cores is required"),
    (_cfg("jobqueue:\n  slurm:\n    cores: 2\n"), [], "memory is required"),
    (_cfg("jobqueue:\n  slurm:\n    cores: 0\n    memory: 4GiB\n"), [], "cores must be an integer >= 1, got 0"),
    (_cfg("jobqueue:\n  slurm:\n    cores: '8'\n    memory: 4GiB\n"), [], "cores must be an integer >= 1, got '8'"),
    (_cfg("jobqueue:\n  slurm:\n    cores: 2\n    memory: lots\n"), [], "memory 'lots' is not an amount"),
    (_cfg(SLURM_OK + "    processes: 3\n"), [], "processes = 3 must divide cores = 2"),
    (_cfg(SLURM_OK + "    walltime: 2h\n"), [], "walltime '2h' is not a time such as 02:00:00"),
    (_cfg(SLURM_OK + "    queue: \"a\\nb\"\n"), [], "queue holds a line break"),
    (_cfg(SLURM_OK + "    job-extra-directives: --gres=gpu:1\n"), [], "job-extra-directives must be a list of strings"),
    (_cfg(SLURM_OK + "    worker-extra-args: [--resources, GPU]\n"), [], "worker-extra-args: --resources 'GPU'"),
    (_cfg(SLURM_OK + "    death-timeout: -1\n"), [], "death-timeout must be a positive number"),
    (_cfg(SLURM_OK), ["--device-cells"], "cells ask for the worker resource GPU and the jobs' workers offer none"),
    (_cfg(SLURM_OK), ["--jobs", "0"], "--jobs must be >= 1"),
    (_cfg(SLURM_OK), ["--jobs", "257"], "--jobs = 257 exceeds the limit 256"),
    (_cfg(SLURM_OK), ["--scheduler", "tcp://127.0.0.1:8786"], "--scheduler and --jobqueue: give one place"),
    (_cfg(SLURM_OK), ["--workers", "2"], "--workers sizes the local cluster; it cannot be combined with --jobqueue"),
    (_cfg(SLURM_OK), ["--connect-timeout", "700000"],
     "--connect-timeout must be a number of seconds in (0, 604800] with --jobqueue, got 700000"),
    (None, ["--jobs", "2"], "--jobs applies to --jobqueue only"),
    (None, ["--print-job-script"], "--print-job-script applies to --jobqueue only"),
]


@pytest.mark.parametrize("make,extra,msg", BAD)
def test_bad_jobqueue_input_is_refused_in_one_line_before_any_work(make, extra, msg, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))  # no sbatch here either: the config is refused first
    cells = [{"i": 0, "log": str(tmp_path), "echo": 1}]
    if "--device-cells" in extra:
        extra = [x for x in extra if x != "--device-cells"]
        cells[0]["device"] = "cuda"
    grid = _grid(tmp_path, cells)
    argv = ["run", str(grid), "--out", str(tmp_path / "out"), *extra]
    f = None
    if make is not None:
        f = make(tmp_path)
        argv += ["--jobqueue", f]
    before = tree_snapshot(tmp_path)
    rc = sweep.main(argv)
    line = _one_error_line(capsys)
    assert rc == 2 and msg.format(f=f) in line, line
    assert tree_snapshot(tmp_path) == before and not (tmp_path / "out").exists()


def test_a_run_needs_the_submit_command(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    cfg = _write(tmp_path / "jq.yaml", SLURM_OK)
    grid = _grid(tmp_path, [{"i": 0, "log": str(tmp_path), "echo": 1}])
    rc = sweep.main(["run", str(grid), "--out", str(tmp_path / "out"), "--jobqueue", cfg])
    line = _one_error_line(capsys)
    assert rc == 2 and line == (f"error: jobqueue config {cfg}: sbatch is not on this machine's PATH; run the sweep "
                                f"where slurm jobs are submitted (a login node), or add --print-job-script to see the "
                                f"job script"), line
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="sbatch is not on this machine's PATH"):
        sweep.run_grid(CELL, [{"echo": 1}], tmp_path / "o", jobqueue=cfg)
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------ a whole sweep through stand-in batch commands

SBATCH = """#!{python}
# a stand-in for SLURM's sbatch: keeps a copy of the job script, runs it in a session of its own
# (the job id is that session's id), and answers as sbatch does
import os, subprocess, sys
from pathlib import Path
d = Path(__file__).resolve().parent
n = 0
while True:  # the next free job number, claimed atomically: dask-jobqueue may submit two jobs at once
    try:
        fd = os.open(d / f"job-{{n}}.sh", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        break
    except FileExistsError:
        n += 1
script = d / f"job-{{n}}.sh"
with os.fdopen(fd, "w") as fh:
    fh.write(Path(sys.argv[-1]).read_text())
with open(d / f"job-{{n}}.log", "w") as log:
    p = subprocess.Popen(["sh", str(script)], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                         start_new_session=True)
with open(d / "jobs.txt", "a") as fh:
    fh.write(f"{{p.pid}}\\n")
print(f"Submitted batch job {{p.pid}}")
"""

SCANCEL = """#!{python}
# a stand-in for SLURM's scancel: ends the job's session
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


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover -- a group of another user's: not ours
        return False
    return True


def _jobs(bin_) -> list[int]:
    """The job ids the stand-in sbatch answered, in order."""
    f = bin_ / "jobs.txt"
    return [int(s) for s in f.read_text().split()] if f.exists() else []


@pytest.fixture
def batch_commands(tmp_path):
    """The stand-in sbatch and scancel in a folder of their own: (that folder, the environment
    with it first on PATH). Afterwards the job sessions they started, should the command have
    left any, end (given 20 s, then killed)."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for name, text in (("sbatch", SBATCH), ("scancel", SCANCEL)):
        (bin_ / name).write_text(text.format(python=sys.executable))
        (bin_ / name).chmod(0o755)
    yield bin_, {**os.environ, "PATH": f"{bin_}{os.pathsep}{os.environ['PATH']}"}
    jobs = _jobs(bin_)
    deadline = time.monotonic() + 20
    while any(_alive(j) for j in jobs) and time.monotonic() < deadline:
        time.sleep(0.2)
    for j in jobs:
        if _alive(j):
            os.killpg(j, signal.SIGKILL)


def test_sweep_runs_on_batch_jobs_through_sbatch_and_scancel(tmp_path, batch_commands):
    """python -m numerics.sweep run GRID --jobqueue slurm.yaml --jobs 2: the command starts the
    scheduler, submits 2 jobs with sbatch (here: stand-ins that run the job script on this
    machine), the jobs' workers run the cells, and the jobs are cancelled with scancel at the end."""
    bin_, env = batch_commands
    cfg = tmp_path / "slurm.yaml"
    cfg.write_text(f"""\
jobqueue:
  slurm:
    cores: 1
    memory: 1GiB
    walltime: "00:10:00"
    death-timeout: 30
    scheduler-options: {{host: 127.0.0.1, dashboard_address: ":0"}}
    job-script-prologue: ["cd {REPO}"]
""")
    log = tmp_path / "log"
    log.mkdir()
    grid = _grid(tmp_path, [{"i": i, "log": str(log), "echo": i} for i in range(4)])
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "numerics.sweep", "run", str(grid), "--out", str(out),
                        "--jobqueue", str(cfg), "--jobs", "2", "--quiet"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=150)
    jobs = _jobs(bin_)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = [json.loads(s) for s in (out / "results.jsonl").read_text().splitlines()]
    assert [r["result"] for r in rows] == [{"value": i} for i in range(4)]
    summary = json.loads((out / "sweep.json").read_text())
    c = summary["cluster"]
    assert (c["system"], c["jobs"], c["jobqueue"], c["job_cores"], c["job_memory"]) == ("slurm", 2, str(cfg), 1,
                                                                                       "1GiB")
    assert c["address"].startswith("tcp://127.0.0.1:")
    assert all(r["worker"].startswith("tcp://") and r["host"] for r in rows)
    # two jobs submitted, each running the job script the config gives, pointed at this sweep's scheduler
    assert len(jobs) == 2
    for n in range(2):
        script = (bin_ / f"job-{n}.sh").read_text().splitlines()
        for directive in ("#SBATCH --cpus-per-task=1", "#SBATCH --mem=1G", "#SBATCH -t 00:10:00"):
            assert directive in script, (directive, script)
        (cmd,) = [s for s in script if "distributed.cli.dask_worker" in s]
        assert f" {c['address']} " in cmd and " --nthreads 1 " in cmd
    # the cluster's close cancelled both jobs; their sessions end
    assert sorted(int(j) for j in (bin_ / "scancel.txt").read_text().split()) == sorted(jobs)
    deadline = time.monotonic() + 20
    while any(_alive(j) for j in jobs) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(j) for j in jobs)


def test_importing_dask_jobqueue_keeps_the_sigint_handler():
    """dask_jobqueue's runner module sets SIGINT to sys.exit() as it is imported: an interrupted
    sweep would end with status 0 and no word.  Through numerics.sweep the handler stays."""
    code = ("import signal, sys\n"
            "from numerics import sweep\n"
            "before = signal.getsignal(signal.SIGINT)\n"
            "sweep._import_jobqueue()\n"
            "assert 'dask_jobqueue' in sys.modules\n"
            "print(signal.getsignal(signal.SIGINT) is before is signal.default_int_handler)\n"
            "import importlib, dask_jobqueue.runner\n"
            "importlib.reload(dask_jobqueue.runner)\n"
            "print(signal.getsignal(signal.SIGINT) is before)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["True", "False"], out.stdout + out.stderr  # kept; a plain import would change it


def test_interrupted_sweep_cancels_its_jobs_and_says_so(tmp_path, batch_commands):
    """Ctrl-C while batch jobs run: the jobs are cancelled (scancel), the finished cells' records
    stay, and the command ends with the line 'interrupted' and status 130, as on the local cluster."""
    bin_, env = batch_commands
    cfg = tmp_path / "slurm.yaml"
    cfg.write_text(f"jobqueue:\n  slurm:\n    cores: 1\n    memory: 1GiB\n    death-timeout: 30\n"
                   f"    scheduler-options: {{host: 127.0.0.1, dashboard_address: ':0'}}\n"
                   f"    job-script-prologue: ['cd {REPO}']\n")
    log = tmp_path / "log"
    log.mkdir()
    # cell 0 answers at once; cell 1 (submitted next: one job, one thread) sleeps past the interrupt
    grid = _grid(tmp_path, [{"i": 0, "log": str(log), "echo": 0}, {"i": 1, "log": str(log), "sleep": 120, "echo": 1}])
    p = subprocess.Popen([sys.executable, "-m", "numerics.sweep", "run", str(grid), "--out", str(tmp_path / "out"),
                          "--jobqueue", str(cfg), "--retries", "0"], cwd=REPO, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        while not list((tmp_path / "out" / "cells").glob("*.json")) and time.monotonic() < deadline:
            time.sleep(0.2)  # the first record: a worker of the job is there
        time.sleep(0.5)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
        jobs = _jobs(bin_)
        assert p.returncode == 130, (p.returncode, out, err)
        assert err.splitlines()[-1] == "interrupted", err
        assert sorted(int(j) for j in (bin_ / "scancel.txt").read_text().split()) == sorted(jobs)
        assert len(list((tmp_path / "out" / "cells").glob("*.json"))) >= 1
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)
