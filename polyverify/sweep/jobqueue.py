"""Batch clusters (SLURM, PBS) through dask-jobqueue: the config file in dask-jobqueue's own layout,
checked without submitting or writing anything, and the job script each job runs."""
from __future__ import annotations

import contextlib
import dataclasses
import re

from polyverify.cli import UsageError, one_line

from .base import SweepInputError, _finite_number, import_keeping_sigint
from .cluster import _worker_resources
from .grid import _load_table_file

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
        before ``scale``).  Call it while :meth:`dask_config` is set: each job reads it as it is made."""
        return getattr(_import_jobqueue(), self.cluster_class)()


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
        if not _finite_number(v) or v <= 0:
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
    refuses is refused here.  Any problem: a :class:`~polyverify.cli.UsageError` naming the file."""
    where = f"jobqueue config {path}"
    system, opts = _system_table(_load_table_file(path, "jobqueue config"), where)
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
        offered = _worker_resources(opts.get("worker-extra-args"))
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
