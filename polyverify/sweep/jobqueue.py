"""Batch clusters (SLURM, PBS) through dask-jobqueue: the config file in dask-jobqueue's own layout,
checked without submitting or writing anything, and the job script each job runs."""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
import time

from polyverify.plumbing.cli import UsageError, one_line

from .base import SweepInputError, finite_number, import_keeping_sigint
from .cluster import worker_resources
from .grid import load_table_file

#: the batch systems this runner builds a dask-jobqueue cluster for, and the cluster class of each
JOBQUEUE_SYSTEMS = {"slurm": "SLURMCluster", "pbs": "PBSCluster"}
#: config keys dask-jobqueue renamed (the old ones still work there with a FutureWarning; refused here)
_JQ_RENAMED = {"extra": "worker-extra-args", "env-extra": "job-script-prologue", "job-extra": "job-extra-directives",
               "header-skip": "job-directives-skip", "project": "account"}
_JQ_INT = {"cores", "processes", "job-cpu"}
_JQ_NUMBER = {"death-timeout"}
_JQ_LIST = {"job-extra-directives", "job-directives-skip", "job-script-prologue", "worker-extra-args"}
_JQ_TABLE = {"scheduler-options"}
#: the first line of every job's prologue: workers that are not daemonic processes, as the local
#: cluster's (a comparison cell starts a child process)
JOB_DAEMON_LINE = "export DASK_DISTRIBUTED__WORKER__DAEMON=False"
#: the scheduler address in a job script printed before the cluster exists (dask-jobqueue's own placeholder)
JOB_SCRIPT_ADDRESS = "tcp://<insert-scheduler-address-here>:8786"
_WALLTIME = re.compile(r"(\d+-)?\d+(:\d{1,2}){0,2}")


def _import_jobqueue():
    """``dask_jobqueue``, imported with this process's SIGINT handler kept (:func:`import_keeping_sigint`)."""
    return import_keeping_sigint("dask_jobqueue")


@dataclasses.dataclass
class JobqueueSpec:
    """A batch cluster read from a jobqueue config file (:func:`read_jobqueue_config`): the
    batch ``system`` (slurm, pbs), its dask-jobqueue ``options`` (the config file's keys, with
    ``processes`` and the prologue completed) and the ``script`` each job runs (the scheduler's
    address a placeholder until the cluster starts)."""
    path: str
    system: str
    options: dict
    script: str

    @property
    def cluster_class(self) -> str:
        return JOBQUEUE_SYSTEMS[self.system]

    @property
    def submit_command(self) -> str:
        return getattr(_import_jobqueue(), self.cluster_class).job_cls.submit_command

    @property
    def threads(self) -> int:
        """Worker threads per job (the job's cores)."""
        return int(self.options["cores"])

    def dask_config(self) -> dict:
        """The options as Dask config keys (``jobqueue.slurm.cores``, ...): what the cluster reads."""
        return {f"jobqueue.{self.system}.{k}": v for k, v in self.options.items()}

    def make_cluster(self):
        """The dask-jobqueue cluster (its scheduler starts in this process; no job is submitted
        before ``scale``).  Call it while :meth:`dask_config` is set: each job reads it as it is made.
        Its jobs are of a subclass of the system's job class (dask-jobqueue's ``job_cls``) that
        records what each submission gave in ``cluster.job_cls.submissions`` (a :class:`Submissions`),
        which :func:`await_first_worker` reads."""
        cls = getattr(_import_jobqueue(), self.cluster_class)
        return cls(job_cls=_recording_job_cls(cls.job_cls, Submissions()))


class Submissions:
    """What the batch jobs' submissions gave, as the cluster's event loop made them: the job ids
    of those submitted (``ids``) and the errors of those that failed (``failures``)."""

    def __init__(self):
        self.ids: list[str] = []
        self.failures: list[BaseException] = []

    @property
    def done(self) -> int:
        return len(self.ids) + len(self.failures)


class _SubmissionFailed(asyncio.CancelledError):
    """What a recording job raises in the cluster's loop when its submission failed: the failure
    itself is recorded for the driver to report (one line, exit 2).  Raised into the loop as it
    is (a RuntimeError in dask-jobqueue's ``_call``), it would end the cluster's ``_correct_state``
    task with an exception that nobody awaits -- ``scale`` schedules that task with tornado's
    ``add_callback`` -- which tornado logs as a traceback ("Exception in callback ...") while the
    driver waits forever for a worker; a cancellation ends the task quietly (tornado logs no
    CancelledError), after the cluster has taken the job into its state (it closes it with the
    others: no job id, nothing to cancel)."""


def _recording_job_cls(base, submissions: Submissions):
    """A subclass of dask-jobqueue's job class ``base`` whose ``start`` (the submission: the
    script written, ``sbatch``/``qsub`` run, the job id read from its answer) records its outcome
    in ``submissions``."""

    class RecordingJob(base):
        async def start(self):
            try:
                await super().start()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 -- whatever the submission raised is its failure
                from distributed.core import Status

                # failed (not left "created"): the cluster's close requires each job it made to be
                # closing, closed or failed, and would stop half-way (its loop left to the exit hooks)
                self.status = Status.failed
                submissions.failures.append(e)
                raise _SubmissionFailed(one_line(e)) from e
            submissions.ids.append(self.job_id)

    RecordingJob.submissions = submissions
    RecordingJob.__name__ = RecordingJob.__qualname__ = f"Recording{base.__name__}"
    return RecordingJob


def submission_error(job: JobqueueSpec, e: BaseException, failed: int = 1, jobs: int = 1) -> str:
    """The one line that says a job's submission failed (``failed`` of ``jobs``; ``e`` the first
    failure): the command, its exit status and what it wrote on stderr (its lines joined; stdout
    when stderr is empty), as dask-jobqueue's error holds them (a RuntimeError: ``Command exited
    with non-zero exit code.``, then lines ``Exit code: 1``, ``Command:``, ``stdout:`` and
    ``stderr:``, each followed by its text)."""
    cmd = job.submit_command.split()[0]
    which = f" for {failed} of {jobs} jobs" if jobs > 1 else ""
    text = str(e)
    m = re.search(r"^Exit code: (-?\d+)$", text, re.M)
    if isinstance(e, RuntimeError) and m:
        out = re.search(r"^stdout:\n(.*?)^stderr:\n(.*)\Z", text, re.M | re.S)
        said = ""
        for part in (out.groups()[::-1] if out else ()):
            lines = [ln.strip() for ln in part.splitlines() if ln.strip()]
            if lines:
                said = "; ".join(lines)
                break
        what = f"{cmd} failed{which} (exit status {m.group(1)}): {said[:400] or 'it wrote nothing'}"
    elif isinstance(e, ValueError) and "job id" in text:
        answer = text.split("output is:", 1)[-1].strip()
        what = (f"{cmd} answered without a job id{which} ({one_line(answer)[:200] if answer else 'no output'}; "
                f"the job may have been submitted: check the queue)")
    else:
        what = f"{cmd} could not submit the job{which} ({type(e).__name__}: {one_line(e)[:300]})"
    return f"jobqueue config {job.path}: {what}"


def await_first_worker(client, cluster, job: JobqueueSpec, jobs: int, timeout: float, say=None) -> list[str]:
    """Wait, ``timeout`` seconds in all, until every one of the ``jobs`` submissions has been made
    and the first worker of the jobs has connected; the job ids.  Polls the submissions
    (:class:`Submissions`, filled in by the cluster's loop) between short waits for a worker
    (``client.wait_for_workers``): a submission that failed is a :class:`SweepInputError`
    (:func:`submission_error`) as soon as every submission has answered (a few seconds: they are
    made at once), as is the time running out.  ``say``: called once with a line
    when every job is submitted (the wait for their workers may be long: the jobs are queued)."""
    from distributed import TimeoutError as DaskTimeoutError

    subs: Submissions = cluster.job_cls.submissions
    deadline = time.monotonic() + timeout
    submitted = False
    while True:
        left = deadline - time.monotonic()
        if subs.failures and (subs.done >= jobs or left <= 0):  # every submission's outcome, then the report
            raise SweepInputError(submission_error(job, subs.failures[0], len(subs.failures), jobs))
        if not submitted and subs.done >= jobs:
            submitted = True
            if say is not None:
                say(f"submitted {jobs} {job.system} job(s) ({_id_list(subs.ids)}); waiting up to "
                    f"{timeout:g} s for the first worker (--connect-timeout)")
        if left <= 0:
            raise SweepInputError(_no_worker(job, jobs, timeout, subs, submitted))
        if not submitted:
            time.sleep(min(0.05, left))
            continue
        try:
            client.wait_for_workers(1, timeout=max(0.05, min(1.0, left)))
        except (DaskTimeoutError, TimeoutError):
            continue
        if not subs.failures:
            return list(subs.ids)


def _id_list(ids) -> str:
    """Job ids in order (numbers by value; the submissions answer in any order)."""
    return ", ".join(sorted(map(str, ids), key=lambda s: (len(s), s)))


def _no_worker(job: JobqueueSpec, jobs: int, timeout: float, subs: Submissions, submitted: bool) -> str:
    where = f"jobqueue config {job.path}"
    cmd = job.submit_command.split()[0]
    if not submitted:
        return (f"{where}: {cmd} did not answer for {jobs - subs.done} of {jobs} job(s) within {timeout:g} s "
                f"(--connect-timeout)")
    logs = job.options.get("log-directory")
    return (f"{where}: no worker of the {jobs} {job.system} job(s) ({_id_list(subs.ids)}) connected within "
            f"{timeout:g} s (--connect-timeout): still queued, or ended before their workers started (see the "
            f"jobs' logs{' in ' + str(logs) if logs else ''}); the jobs are cancelled")


@contextlib.contextmanager
def _no_makedirs():
    """While a job is built only for its script, dask-jobqueue's ``os.makedirs`` (it makes the
    config's log-directory as it builds a job) does nothing: a dry run writes nothing."""
    _import_jobqueue()
    from dask_jobqueue import core

    real = core.os

    class _Os:
        def __getattr__(self, name):
            return getattr(real, name)

        @staticmethod
        def makedirs(*args, **kwargs):
            return None

    core.os = _Os()
    try:
        yield
    finally:
        core.os = real


def _check_jq_value(key: str, v, where: str) -> None:
    if v is None:
        return
    if key in _JQ_INT:
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise UsageError(f"{where}: {key} must be an integer >= 1, got {v!r:.60}")
    elif key in _JQ_NUMBER:
        if not finite_number(v) or v <= 0:
            raise UsageError(f"{where}: {key} must be a positive number of seconds, got {v!r:.60}")
    elif key in _JQ_LIST:
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise UsageError(f"{where}: {key} must be a list of strings, got {v!r:.80}")
        bad = [x for x in v if any(c in x for c in "\r\n\0")]
        if bad:
            raise UsageError(f"{where}: {key}: an item holds a line break: {bad[0]!r:.80}")
    elif key in _JQ_TABLE:
        if not isinstance(v, dict):
            raise UsageError(f"{where}: {key} must be a table, got {v!r:.80}")
    else:
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            raise UsageError(f"{where}: {key} must be a single value, got {v!r:.80}")
        if isinstance(v, str) and any(c in v for c in "\r\n\0"):
            raise UsageError(f"{where}: {key} holds a line break: {v!r:.80}")


def read_jobqueue_config(path, needs=()) -> JobqueueSpec:
    """A batch cluster's description, checked without submitting or writing anything.

    The file (YAML, TOML or JSON) has dask-jobqueue's own config layout: one table
    ``jobqueue.slurm`` or ``jobqueue.pbs`` whose keys are that system's dask-jobqueue config keys
    (``cores``, ``memory``, ``processes``, ``queue``, ``account``, ``walltime``,
    ``job-extra-directives``, ``job-script-prologue``, ``worker-extra-args``, ``log-directory``,
    ``scheduler-options``, ...), so the same file serves as ``~/.config/dask/jobqueue.yaml``.
    ``cores`` and ``memory`` (per job) are required; ``processes`` defaults to ``cores`` (one
    single-threaded worker process per core, as the local cluster); the prologue starts with
    :data:`JOB_DAEMON_LINE`.  ``needs``: the worker resources the cells ask for (GPU): each must be
    declared by ``worker-extra-args`` (``["--resources", "GPU=1"]``), else the cells would wait
    forever.  The job script is built by dask-jobqueue itself (its ``job_script``), so a value it
    refuses is refused here.  Any problem: a :class:`~polyverify.plumbing.cli.UsageError` naming the file."""
    where = f"jobqueue config {path}"
    system, opts = _system_table(load_table_file(path, "jobqueue config"), where)
    where = f"{where}: jobqueue.{system}"
    opts = _checked_keys(system, opts, where)
    _check_job_size(opts, where)
    _check_offered(opts, needs, where)
    prologue = list(opts.get("job-script-prologue") or [])
    if JOB_DAEMON_LINE not in prologue:
        opts["job-script-prologue"] = [JOB_DAEMON_LINE, *prologue]
    job = JobqueueSpec(path=str(path), system=system, options=opts, script="")
    job.script = _job_script(job, where)
    return job


def _system_table(spec: dict, where: str) -> tuple[str, dict]:
    """The one batch system named under ``jobqueue`` and its table of options."""
    if set(spec) != {"jobqueue"} or not isinstance(spec["jobqueue"], dict):
        raise UsageError(f"{where}: the top level must be one table 'jobqueue' holding one batch system's table "
                         f"(jobqueue.slurm or jobqueue.pbs, dask-jobqueue's config layout), got key(s) "
                         f"{', '.join(map(str, spec)) or 'none'}")
    systems = spec["jobqueue"]
    if len(systems) != 1:
        raise UsageError(f"{where}: give exactly one batch system under 'jobqueue' ({' or '.join(JOBQUEUE_SYSTEMS)}), "
                         f"got {', '.join(map(str, systems)) or 'none'}")
    ((system, opts),) = systems.items()
    if system not in JOBQUEUE_SYSTEMS:
        raise UsageError(f"{where}: unknown batch system {system!r}; this runner builds {', '.join(JOBQUEUE_SYSTEMS)} "
                         f"clusters")
    if not isinstance(opts, dict):
        raise UsageError(f"{where}: jobqueue.{system} must be a table of options, got {opts!r:.80}")
    return system, opts


def _checked_keys(system: str, opts: dict, where: str) -> dict:
    """A copy of ``opts`` whose every key is one of dask-jobqueue's config keys for ``system``
    (under its current name) with a value it takes."""
    try:
        import dask

        _import_jobqueue()  # loads its defaults: the keys each system knows
    except ImportError:
        raise UsageError(f"{where}: needs dask-jobqueue (pip install -e '.[sweep]')") from None
    known = set(dask.config.get(f"jobqueue.{system}")) - set(_JQ_RENAMED)
    opts = dict(opts)
    for k, v in opts.items():
        if not isinstance(k, str):
            raise UsageError(f"{where}: key {k!r} is not a name")
        if k in _JQ_RENAMED:
            raise UsageError(f"{where}: {k!r} is an old name; dask-jobqueue calls it {_JQ_RENAMED[k]!r}")
        if k not in known:
            hint = (f"write {k.replace('_', '-')!r} (the config keys use hyphens)" if k.replace("_", "-") in known
                    else f"the {system} keys are {', '.join(sorted(known))}")
            raise UsageError(f"{where}: unknown key {k!r}; {hint}")
        _check_jq_value(k, v, where)
    return opts


def _check_job_size(opts: dict, where: str) -> None:
    """A job's cores and memory (required), processes (default: ``cores``; must divide them) and walltime."""
    for k in ("cores", "memory"):
        if opts.get(k) is None:
            raise UsageError(f"{where}: {k} is required (per job: cores = 8, memory = \"16GiB\")")
    from dask.utils import parse_bytes

    try:
        mem = parse_bytes(opts["memory"])
    except (ValueError, TypeError):
        mem = None
    if not mem or mem <= 0:
        raise UsageError(f"{where}: memory {opts['memory']!r:.40} is not an amount such as 16GiB")
    cores = opts["cores"]
    if opts.get("processes") is None:
        opts["processes"] = cores
    if opts["processes"] > cores or cores % opts["processes"]:
        raise UsageError(f"{where}: processes = {opts['processes']} must divide cores = {cores} (each worker process "
                         f"gets cores / processes threads)")
    wt = opts.get("walltime")
    if wt is not None and not (isinstance(wt, str) and _WALLTIME.fullmatch(wt)):
        raise UsageError(f"{where}: walltime {wt!r:.40} is not a time such as 02:00:00 (hours:minutes:seconds)")


def _check_offered(opts: dict, needs, where: str) -> None:
    """Every worker resource the cells ask for is offered by the jobs' workers (``worker-extra-args``)."""
    try:
        offered = worker_resources(opts.get("worker-extra-args"))
    except ValueError as e:
        raise UsageError(f"{where}: worker-extra-args: {e}") from None
    for name in sorted(set(needs)):
        if name not in offered:
            raise UsageError(f"{where}: cells ask for the worker resource {name} and the jobs' workers offer none; add "
                             f"worker-extra-args: [\"--resources\", \"{name}=1\"] and the batch system's request "
                             f"(job-extra-directives: [\"--gres=gpu:1\"] on SLURM)")


def _job_script(job: JobqueueSpec, where: str) -> str:
    """The job script dask-jobqueue builds for ``job`` (the scheduler's address a placeholder); what it
    refuses is a bad config."""
    import dask

    job_cls = getattr(_import_jobqueue(), job.cluster_class).job_cls
    try:
        with dask.config.set(job.dask_config()), _no_makedirs():
            # as the cluster's job_script() builds it: a job of this config, the scheduler's address a placeholder
            return job_cls(JOB_SCRIPT_ADDRESS, name="dummy-name").job_script()
    except Exception as e:  # noqa: BLE001 -- whatever dask-jobqueue refuses is a bad config
        raise UsageError(f"{where}: dask-jobqueue refuses it ({type(e).__name__}: {one_line(e)[:200]})") from None


def check_submit_command(job: JobqueueSpec) -> None:
    """The batch system's submit command (sbatch, qsub) is on this machine's PATH, else a
    :class:`SweepInputError` (the sweep runs where jobs are submitted: a login node)."""
    import shutil

    cmd = job.submit_command.split()[0]
    if shutil.which(cmd) is None:
        raise SweepInputError(f"jobqueue config {job.path}: {cmd} is not on this machine's PATH; run the sweep where "
                              f"{job.system} jobs are submitted (a login node), or add --print-job-script to see the "
                              f"job script")
