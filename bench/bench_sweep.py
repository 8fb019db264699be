"""Scaling of ``numerics.sweep`` on this machine: a 16-cell roundoff grid as a plain loop in one
process, and as a sweep on a local Dask cluster of 1 and of 2 workers.

    python bench/bench_sweep.py [--depths 151,301] [--repeat 1] [--json FILE] [--md docs/sweeps.md]

The grid: architectures baseconv, lsa x depths x dtypes float64, float32 x kappa 5, 10 (N=20,
D=5, batch 64, torch on the CPU, no layer-level reference), each cell one
``numerics.roundoff:sweep_cell``.  Every mode runs in a fresh Python process (imports, cluster
start and shutdown included, as a user would see them), in the order loop, 1 worker, 2 workers
(``--repeat`` times); the loop's process gets the settings Dask's nanny gives each worker
(``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` = 1).  For each: wall time, CPU time (user + sys) of that process and every
process it started (the workers; ``RUSAGE_CHILDREN``), the sum of the cells' own wall and CPU
times (``execute_cell``: the thread that ran the cell), the time until the cluster was ready, and
the machine's load average before and after.  From them:

* ratio = wall(1 worker) / wall(2 workers);
* overhead per cell = (wall(1 worker) - wall(loop)) / cells, and its CPU counterpart;
* whether the sweep's results equal the loop's bit for bit.

``--md FILE`` replaces the part of FILE between ``<!-- bench_sweep:begin -->`` and
``<!-- bench_sweep:end -->`` with the table and the command that produced it.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from polyverify.plumbing.cli import (Parser, UsageError, atomic_write_text, check_range, input_file,  # noqa: E402
                                     output_file, run_main)

CELL = "numerics.roundoff:sweep_cell"
BEGIN, END = "<!-- bench_sweep:begin -->", "<!-- bench_sweep:end -->"


def grid(depths: list[int]) -> list[dict]:
    from numerics import roundoff

    return [roundoff.sweep_check({"arch": arch, "layers": layers, "dtype": dtype, "kappa": kappa, "layer_ref": 0})
            for arch in ("baseconv", "lsa") for layers in depths for dtype in ("float64", "float32")
            for kappa in (5.0, 10.0)]


def child(mode: str, workers: int, depths: list[int], out: str) -> None:
    """One measured run, in its own process; prints one JSON line."""
    t0 = time.perf_counter()
    configs = grid(depths)
    info: dict = {"mode": mode, "workers": workers, "cells": len(configs)}
    if mode == "loop":
        from numerics.sweep import execute_cell

        recs = [execute_cell(CELL, c) for c in configs]
        info["ready_s"] = 0.0
    else:
        from numerics.sweep import run_grid

        ready = {}
        res = run_grid(CELL, configs, out, workers=workers, progress=False, name="bench",
                       on_start=lambda _: ready.setdefault("t", time.perf_counter()))
        recs = res.rows
        info["ready_s"] = ready["t"] - t0
    info.update({"failed": sum(r["status"] != "ok" for r in recs),
                 "cells_wall_s": sum(r["wall_s"] for r in recs), "cells_cpu_s": sum(r["cpu_s"] for r in recs),
                 "results": [r["result"] for r in recs]})
    print(json.dumps(info))


def measure(mode: str, workers: int, depths: list[int]) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench_sweep_") as tmp:
        cmd = [sys.executable, __file__, "--child", mode, "--workers", str(workers),
               "--depths", ",".join(map(str, depths)), "--out", tmp]
        load0 = os.getloadavg()[0]
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        # the loop gets the thread settings Dask's nanny gives each worker (one thread per library)
        env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env)
        wall = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit(f"{mode} run failed ({p.returncode}): {p.stderr.strip().splitlines()[-1:]}")
    info = json.loads(p.stdout.strip().splitlines()[-1])
    info.update({"wall_s": wall, "cpu_user_s": r1.ru_utime - r0.ru_utime, "cpu_sys_s": r1.ru_stime - r0.ru_stime,
                 "load_before": load0, "load_after": os.getloadavg()[0]})
    info["cpu_s"] = info["cpu_user_s"] + info["cpu_sys_s"]
    return info


def summarise(runs: list[dict]) -> dict:
    def best(mode, w):  # the fastest repetition (least disturbed by the other users of the machine)
        sel = [r for r in runs if r["mode"] == mode and r["workers"] == w]
        return min(sel, key=lambda r: r["wall_s"])

    loop, one, two = best("loop", 1), best("sweep", 1), best("sweep", 2)
    n = loop["cells"]
    return {"cells": n, "loop": loop, "one": one, "two": two,
            "ratio_1_to_2": one["wall_s"] / two["wall_s"],
            "overhead_per_cell_wall_s": (one["wall_s"] - loop["wall_s"]) / n,
            "overhead_per_cell_cpu_s": (one["cpu_s"] - loop["cpu_s"]) / n,
            "identical": all(r["results"] == loop["results"] for r in runs),
            "differing_cells": sorted({i for r in runs for i, (x, y) in enumerate(zip(r["results"], loop["results"]))
                                       if x != y})}


def markdown(s: dict, argv: list[str], runs: list[dict]) -> str:
    rows = [("plain loop, one process", s["loop"]), ("sweep, LocalCluster 1 worker", s["one"]),
            ("sweep, LocalCluster 2 workers", s["two"])]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    lines = [f"Measured by `python bench/bench_sweep.py {' '.join(argv)}` on {platform.machine()}, {cores} cores "
             f"(Python {platform.python_version()}), {time.strftime('%Y-%m-%d')}: {s['cells']} roundoff cells, "
             f"each mode in a fresh process; the fastest of {len(runs) // 3} repetition(s) per mode. CPU = user + sys "
             "of the process and every process it started.", "",
             "| mode | wall | CPU (user + sys) | cluster ready after | cells' own wall (sum) | cells' own CPU (sum) "
             "| load avg before / after |", "|---|---|---|---|---|---|---|"]
    for label, r in rows:
        lines.append(f"| {label} | {r['wall_s']:.1f} s | {r['cpu_s']:.1f} s ({r['cpu_user_s']:.1f} + "
                     f"{r['cpu_sys_s']:.1f}) | {r['ready_s']:.1f} s | {r['cells_wall_s']:.1f} s | "
                     f"{r['cells_cpu_s']:.1f} s | {r['load_before']:.2f} / {r['load_after']:.2f} |")
    lines += ["", f"- 1 worker / 2 workers, wall: **{s['ratio_1_to_2']:.2f}x**",
              f"- overhead per cell of a 1-worker sweep over the plain loop: {s['overhead_per_cell_wall_s']:.2f} s wall, "
              f"{s['overhead_per_cell_cpu_s']:.2f} s CPU (cluster start and shutdown spread over the "
              f"{s['cells']} cells)",
              "- results of every sweep equal the loop's bit for bit: "
              + ("yes" if s["identical"] else f"NO (cells {s['differing_cells']})")]
    return "\n".join(lines) + "\n"


def _md_section(path: Path) -> tuple[str, str]:
    """The text of ``path`` before its measured section and after it, or a UsageError naming ``--md``."""
    try:
        doc = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"--md {path}: cannot be read ({getattr(e, 'strerror', None) or e})") from None
    if BEGIN not in doc or END not in doc.split(BEGIN, 1)[1]:
        raise UsageError(f"--md {path}: no {BEGIN} ... {END} section to replace")
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head, tail


def write_md(path: Path, text: str) -> None:
    head, tail = _md_section(path)  # read again: the file as it is now, checked before the work too
    atomic_write_text(path, head + BEGIN + "\n" + text + END + tail, "--md")


def _depths(text: str) -> list[int]:
    """``--depths``: comma-separated depths, each one the roundoff cells take (``numerics.roundoff.sweep_check``,
    as ``grid`` checks them: 1 + 3k for baseconv, within the ``--layers`` limit); else a UsageError naming the
    flag and the value."""
    try:
        depths = [int(x) for x in text.split(",")]
    except ValueError:
        raise UsageError(f"--depths takes comma-separated integers, not {text!r}") from None
    try:
        grid(depths)
    except UsageError as e:
        raise UsageError(f"--depths {text}: {str(e).removeprefix('cell: ')}") from None
    return depths


def _main(argv) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = Parser(prog="python bench/bench_sweep.py", description=__doc__.splitlines()[0])
    p.add_argument("--depths", default="151,301", help="depths of the grid (2 of them make 16 cells; default 151,301)")
    p.add_argument("--repeat", type=int, default=1, help="repetitions of the three modes (default 1)")
    p.add_argument("--json", help="write every measurement to this file")
    p.add_argument("--md", help="replace the measured section of this markdown file (docs/sweeps.md)")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--workers", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:  # a measured run, started by measure() with the arguments it built
        depths = [int(x) for x in a.depths.split(",")]
        child(a.child, a.workers, depths, a.out)
        return 0
    # every argument and both outputs checked before any run is started
    depths = _depths(a.depths)
    check_range("--repeat", a.repeat, 1, 100)
    if a.md is not None:
        input_file("--md", a.md)  # read, then replaced: a regular file holding the section
        _md_section(Path(a.md))
        output_file("--md", a.md)
    output_file("--json", a.json)
    runs = []
    for rep in range(a.repeat):
        for mode, w in (("loop", 1), ("sweep", 1), ("sweep", 2)):
            r = measure(mode, w, depths)
            runs.append(r)
            print(f"[{rep + 1}/{a.repeat}] {mode:<5} workers={w}: {r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} s CPU, "
                  f"cluster ready after {r['ready_s']:.1f} s, {r['failed']} failed, load {r['load_before']:.2f} -> "
                  f"{r['load_after']:.2f}", flush=True)
    s = summarise(runs)
    shown = [x for x in argv if x not in ("--md", a.md, "--json", a.json)]
    text = markdown(s, shown, runs)
    print(text)
    if a.json:
        atomic_write_text(a.json, json.dumps({"summary": {k: v for k, v in s.items() if k not in ("loop", "one", "two")},
                                              "runs": [{k: v for k, v in r.items() if k != "results"} for r in runs]},
                                             indent=1), "--json")
    if a.md:
        write_md(Path(a.md), text)
    return 0 if s["identical"] and not any(r["failed"] for r in runs) else 1


def main(argv=None) -> int:
    """The command: a bad argument or output path is one ``error:`` line and exit status 2, before any run."""
    return run_main(_main, argv)


if __name__ == "__main__":
    sys.exit(main())
