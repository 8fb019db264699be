"""The whole ``gd`` command against its proof alone, measured in the same session (issue 46 item 1).

    python bench/bench_gd_command.py [--sizes 64x16,128x32,256x64] [--large] [--arch baseconv] [--layers 4]
                                     [--batch 1] [--dtype float32] [--repeat 1] [--out bench/results/gd_command]

For each size ``NxD`` (``--large`` adds 512x128), in rounds (every measurement once per round, so
that the shared machine's drift hits all of them alike), three fresh interpreters:

* **command**: ``python -m verify.construct gd --arch ARCH --n N --d D --layers L --batch B
  --dtype DTYPE --allow-large --quiet --json FILE``, the whole command (its proof runs in a child
  under ``--proof-memory-gib``; the child's CPU is counted: ``getrusage(RUSAGE_CHILDREN)`` includes
  the descendants the command waited for); it must exit 0 with the verdict ``proved``;
* **proof**: a child that builds the same construction (not timed) and times
  ``verify.prover.proof.prove(con, refute=True)`` alone, the call the command's proof child makes
  (``verify.bounded.prove``), CPU (``getrusage(RUSAGE_SELF)``, user + sys) and wall;
* **start-up**: a child that imports what the command imports (the command line, the catalogue's
  GD architectures, the runner, the reference and the prover) and does nothing else.

The table gives the medians over ``--repeat`` rounds and the ratios command / proof; the target
(issue 46): the whole command's CPU at most 1.5 x its proof's CPU plus the start-up's, at every
size, reported as met or MISSED (wall beside it: the command waits for its proof child, the
proof here runs in one process).  Machines here are shared and noisy: compare ratios, not
seconds.  Results: ``OUT/results.json`` and ``OUT/results.md``.  Exit 0 when every size meets the
target, 1 otherwise, 2 bad arguments.
"""
from __future__ import annotations

import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))
from polyverify.plumbing.cli import Parser, UsageError, atomic_write_text, output_dir, run_main  # noqa: E402

DEFAULT_SIZES = "64x16,128x32,256x64"
LARGE = "512x128"
#: the target: command CPU <= TARGET x proof CPU + start-up CPU
TARGET = 1.5
DEFAULT_OUT = ROOT / "bench" / "results" / "gd_command"

STARTUP = ("import verify.construct, verify.gd_cmd, verify.bounded, verify.prover.proof, numerics.runner, "
           "numerics.reference; import constructions.catalogue as c; c.gd_architectures()")

PROOF = """
import json, resource, sys, time
from fractions import Fraction
from constructions.catalogue import gd_architectures
from verify.prover.proof import prove
arch, n, d, layers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
con = gd_architectures()[arch].build(n, d, eta=Fraction(1, 16))
con.steps_for_depth(layers)
r0, w0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
res = prove(con, refute=True)
r1, w1 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
print(json.dumps({"ok": bool(res.ok), "wall": w1 - w0,
                  "cpu": (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)}))
"""


def child(cmd: list[str]) -> tuple[float, float, subprocess.CompletedProcess]:
    """Run ``cmd`` in a fresh interpreter: (wall s, CPU s of it and its descendants, the process)."""
    before, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    wall, after = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), proc


def parse_sizes(text: str) -> list[tuple[int, int]]:
    sizes = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)x(\d+)\s*", part)
        if not m:
            raise UsageError(f"--sizes: {part!r} is not NxD (e.g. 128x32)")
        n, d = int(m.group(1)), int(m.group(2))
        if not 1 <= d <= n <= 4096:
            raise UsageError(f"--sizes: {part.strip()} needs 1 <= D <= N <= 4096")
        sizes.append((n, d))
    if len(set(sizes)) != len(sizes):
        raise UsageError("--sizes: a size is repeated")
    return sizes


def measure(arch: str, n: int, d: int, a, tmp: Path) -> dict:
    """One round at one size: start-up, proof alone, whole command."""
    out = {}
    wall, cpu, p = child([sys.executable, "-c", STARTUP])
    if p.returncode:
        raise RuntimeError(f"start-up child failed: {p.stderr.strip()[-300:]}")
    out["startup"] = {"wall": wall, "cpu": cpu}
    wall, cpu, p = child([sys.executable, "-c", PROOF, arch, str(n), str(d), str(a.layers)])
    if p.returncode:
        raise RuntimeError(f"proof child failed at {n}x{d}: {p.stderr.strip()[-300:]}")
    proof = json.loads(p.stdout.strip().splitlines()[-1])
    if not proof["ok"]:
        raise RuntimeError(f"the proof at {n}x{d} is not PROVED")
    out["proof"] = {"wall": proof["wall"], "cpu": proof["cpu"], "process_wall": wall, "process_cpu": cpu}
    js = tmp / f"gd_{n}x{d}.json"
    cmd = [sys.executable, "-m", "verify.construct", "gd", "--arch", arch, "--n", str(n), "--d", str(d),
           "--layers", str(a.layers), "--batch", str(a.batch), "--dtype", a.dtype, "--allow-large", "--quiet",
           "--json", str(js)]
    wall, cpu, p = child(cmd)
    if p.returncode:
        raise RuntimeError(f"the gd command at {n}x{d} exited {p.returncode}: {p.stderr.strip()[-300:]}")
    rep = json.loads(js.read_text())
    if rep["verdict"] != "proved":
        raise RuntimeError(f"the gd command at {n}x{d} reads {rep['verdict']}")
    out["command"] = {"wall": wall, "cpu": cpu, "proof_seconds_reported": rep["proof"]["seconds"],
                      "reference_seconds": sum(r["seconds_reference"] for r in rep["dtypes"]),
                      "run_seconds": sum(r["seconds_run"] for r in rep["dtypes"]), "argv": cmd[1:-2]}
    return out


def markdown(res: dict) -> str:
    lines = ["# The gd command against its proof (bench/bench_gd_command.py)", "",
             f"`{res['command_line']}`; {res['machine']}; median of {res['repeat']} round(s); CPU = user + sys "
             f"seconds. Target: command CPU <= {TARGET} x proof CPU + start-up CPU.", "",
             "| size | proof CPU s | start-up CPU s | command CPU s | command / proof CPU | (command - start-up) / "
             "proof CPU | proof wall s | command wall s | command / proof wall | target |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in res["rows"]:
        lines.append(f"| {r['size']} | {r['proof_cpu']:.2f} | {r['startup_cpu']:.2f} | {r['command_cpu']:.2f} | "
                     f"{r['cpu_ratio']:.2f} | {r['cpu_ratio_after_startup']:.2f} | {r['proof_wall']:.2f} | "
                     f"{r['command_wall']:.2f} | {r['wall_ratio']:.2f} | {'met' if r['meets_target'] else 'MISSED'} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    return run_main(_main, argv)  # a UsageError: one line, exit 2; Ctrl-C: "interrupted", 130


def _main(argv=None) -> int:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default=DEFAULT_SIZES, help=f"comma-separated NxD (default {DEFAULT_SIZES})")
    p.add_argument("--large", action="store_true", help=f"add {LARGE} (about 1-2 GiB and a minute or two)")
    p.add_argument("--arch", default="baseconv", help="gd --arch (default baseconv)")
    p.add_argument("--layers", type=int, default=4, help="gd --layers (default 4)")
    p.add_argument("--batch", type=int, default=1, help="gd --batch (default 1)")
    p.add_argument("--dtype", default="float32", help="gd --dtype (default float32)")
    p.add_argument("--repeat", type=int, default=1, help="rounds (median reported; default 1)")
    p.add_argument("--out", default=str(DEFAULT_OUT), help="folder of results.json and results.md")
    a = p.parse_args(argv)
    sizes = parse_sizes(a.sizes + ("," + LARGE if a.large and LARGE not in a.sizes else ""))
    if not 1 <= a.repeat <= 20:
        raise UsageError(f"--repeat must be in 1..20, got {a.repeat}")
    if not 1 <= a.batch <= 4096:
        raise UsageError(f"--batch must be in 1..4096, got {a.batch}")
    if a.layers < 1:
        raise UsageError(f"--layers must be >= 1, got {a.layers}")
    from constructions.catalogue import light_gd_architectures
    from verify.gd_cmd import DTYPES, depth_error

    light = light_gd_architectures()
    if a.arch not in light:
        raise UsageError(f"--arch {a.arch!r}: choose one of {', '.join(light)}")
    if light[a.arch].gd_layers is not None and (msg := depth_error(light[a.arch].name, light[a.arch].gd_layers,
                                                                      a.layers)):
        raise UsageError(f"--layers: {msg}")
    bad = [t for t in a.dtype.split(",") if t not in DTYPES]
    if bad:
        raise UsageError(f"--dtype: unknown {bad[0]!r}; choose from {', '.join(DTYPES)}")
    out = output_dir("--out", a.out)
    rounds: dict[tuple, list] = {s: [] for s in sizes}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(a.repeat):
            for n, d in sizes:
                rounds[(n, d)].append(measure(a.arch, n, d, a, Path(tmp)))
    med = lambda runs, part, key: statistics.median(r[part][key] for r in runs)  # noqa: E731
    rows = []
    for (n, d), runs in rounds.items():
        r = {"size": f"{n}x{d}", "n": n, "d": d, "proof_cpu": med(runs, "proof", "cpu"),
             "proof_wall": med(runs, "proof", "wall"), "startup_cpu": med(runs, "startup", "cpu"),
             "startup_wall": med(runs, "startup", "wall"), "command_cpu": med(runs, "command", "cpu"),
             "command_wall": med(runs, "command", "wall"),
             "command_proof_seconds_reported": med(runs, "command", "proof_seconds_reported"),
             "command_reference_seconds": med(runs, "command", "reference_seconds"),
             "command_run_seconds": med(runs, "command", "run_seconds"), "rounds": runs}
        r["cpu_ratio"] = r["command_cpu"] / r["proof_cpu"]
        r["cpu_ratio_after_startup"] = (r["command_cpu"] - r["startup_cpu"]) / r["proof_cpu"]
        r["wall_ratio"] = r["command_wall"] / r["proof_wall"]
        r["target_cpu"] = TARGET * r["proof_cpu"] + r["startup_cpu"]
        r["meets_target"] = r["command_cpu"] <= r["target_cpu"]
        rows.append(r)
        print(f"{r['size']:>8}: proof {r['proof_cpu']:.2f} s CPU ({r['proof_wall']:.2f} s wall), start-up "
              f"{r['startup_cpu']:.2f} s, command {r['command_cpu']:.2f} s CPU ({r['command_wall']:.2f} s wall): "
              f"command/proof {r['cpu_ratio']:.2f} CPU, {r['wall_ratio']:.2f} wall; (command - start-up)/proof "
              f"{r['cpu_ratio_after_startup']:.2f}; target <= {r['target_cpu']:.2f} s "
              f"{'met' if r['meets_target'] else 'MISSED'}", flush=True)
    line = " ".join(["python bench/bench_gd_command.py"] + (argv if argv is not None else sys.argv[1:]))
    res = {"command_line": line, "machine": f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}",
           "repeat": a.repeat, "arch": a.arch, "layers": a.layers, "batch": a.batch, "dtype": a.dtype,
           "target": f"command CPU <= {TARGET} x proof CPU + start-up CPU", "rows": rows,
           "all_meet_target": all(r["meets_target"] for r in rows)}
    atomic_write_text(out / "results.json", json.dumps(res, indent=1), "--out")
    atomic_write_text(out / "results.md", markdown(res), "--out")
    print(f"results written to {out}/results.json and results.md")
    return 0 if res["all_meet_target"] else 1


if __name__ == "__main__":
    sys.exit(main())
