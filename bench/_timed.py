"""The timed runner of the bench scripts that measure whole commands (``bench_refute.py``,
``bench_learned_targets.py``): one command in a child of its own process group (``start_new_session``)
under an address-space cap and a wall-clock timeout (then its whole group is killed), its output read
line by line as it comes.

:func:`run` reports the exit status, whether the timeout stopped it, the wall seconds, the seconds and
the CPU seconds (:func:`group_cpu`) at which the first line starting with each of ``marks`` arrived (a
verdict line: ``proof:``, ``verdict:``), this process's children's ``rusage`` after it (CPU and peak RSS:
a script runs each command from a fresh process of its own, so that they are the command's), and the
output.  :func:`cap` is the cap in bytes of a limit in GiB, clamped to this process's hard ``RLIMIT_AS``.
"""
from __future__ import annotations

import os
import resource
import subprocess
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cap(gib: float) -> int:
    """``gib`` GiB in bytes, at most this process's hard ``RLIMIT_AS``."""
    want = int(gib * 2**30)
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    return want if hard == resource.RLIM_INFINITY else min(want, hard)


def group_cpu(pgid: int) -> float | None:
    """CPU seconds (user + sys) so far of the processes in process group ``pgid`` (the command and the
    children it forks: ``start_new_session``), with the children they reaped (``/proc/PID/stat``'s utime,
    stime, cutime, cstime); None where ``/proc`` cannot be read.  Read when a verdict line arrives: the
    CPU the command spent to reach it, which a loaded machine's wall seconds do not show."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    try:
        pids = [d for d in os.listdir("/proc") if d.isdigit()]
    except OSError:
        return None
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone, or not readable
        if int(fields[2]) == pgid:  # pgrp (fields after the command's name: state, ppid, pgrp, ...)
            total += sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
    return round(total / tick, 2)


def run(cmd: list[str], cap_bytes: int, timeout: float, *, cwd: Path = ROOT, env: dict | None = None,
        marks: tuple[str, ...] = ("proof:",)) -> dict:
    """``cmd`` under ``cap_bytes`` of address space and ``timeout`` seconds (module docstring): ``rc``,
    ``timed_out``, ``wall_s``, ``at`` and ``cpu_at`` (mark -> seconds, CPU seconds at its first line),
    ``ru`` (``RUSAGE_CHILDREN`` after it) and ``out`` (stdout and stderr together)."""
    def limit():
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (cap_bytes, hard if hard != resource.RLIM_INFINITY else cap_bytes))

    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=cwd, preexec_fn=limit,
                            start_new_session=True, env=env)
    lines: list[str] = []
    at: dict[str, float] = {}
    cpu_at: dict[str, float | None] = {}

    def read():
        for raw in proc.stdout:
            line = raw.decode(errors="replace")
            for mark in marks:
                if mark not in at and line.startswith(mark):
                    at[mark] = time.perf_counter() - t0
                    cpu_at[mark] = group_cpu(proc.pid)
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, 9)  # the child's own process group (start_new_session): nothing else
        proc.wait()
    reader.join(timeout=10)
    return {"rc": proc.returncode, "timed_out": timed_out, "wall_s": time.perf_counter() - t0, "at": at,
            "cpu_at": cpu_at, "ru": resource.getrusage(resource.RUSAGE_CHILDREN), "out": "".join(lines)}
