"""Regenerate ``docs/performance.md``: every benchmark of ``bench/`` run once, its output kept.

    python bench/performance.py [--out docs/performance.md] [--quick]

Runs, each in its own process and in this order, and records the command, its output, its exit
status, and the CPU (user + sys of the child) and wall time it took:

* ``bench/bench_proof.py``: the exact proof of every GD architecture at N x D = 20x5, 64x16 and
  128x32, flint and sympy backends (sympy up to 20x5 with ``--quick``), plus the catalogue;
* ``bench/bench_compiler.py``: compile + proof of a 1,000-gate placed circuit, ``baseconv`` vs
  ``baseconv-mlp``;
* ``bench/bench_memory.py`` (when present): peak RSS of ``gd --layers`` at two depths;
* ``bench/bench_construction.py``: the float forward of the constructions against a baseline;
* the circuit command end to end on random 10,000- and 100,000-gate circuits (``python -m
  circuits.random`` then ``python -m verify.construct circuit``), each with the peak resident
  memory of the circuit command (issue 15's targets: 60 s and 10 minutes).

The machine (platform, CPU count, load average before and after) heads the document: the
figures are only comparable within one run.  Nothing in the document is typed by hand.
"""
from __future__ import annotations

import argparse
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


#: runs a command and prints its own peak RSS last (``RUSAGE_CHILDREN`` of a process with one child)
RSS_WRAPPER = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:]); "
               "print(f'peak resident memory of the command: "
               "{resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024:.0f} MiB'); sys.exit(p.returncode)")


def run(cmd: list[str], timeout: float, *, rss: bool = False) -> dict:
    r0, w0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    full = [sys.executable, "-c", RSS_WRAPPER, *cmd] if rss else cmd
    try:
        p = subprocess.run(full, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
        out, rc = p.stdout + (("\n" + p.stderr) if p.returncode else ""), p.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), "timeout"
    r1, w1 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    shown = " ".join("python" if c == sys.executable else c for c in cmd)
    return {"cmd": shown, "out": out.strip(), "rc": rc, "cpu": cpu, "wall": w1 - w0}


def section(title: str, r: dict) -> str:
    status = "ok" if r["rc"] == 0 else f"exit {r['rc']}"
    return (f"## {title}\n\n`{r['cmd']}` ({status}; {r['cpu']:.1f} s CPU, {r['wall']:.1f} s wall)\n\n"
            f"```\n{r['out']}\n```\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "performance.md"), help="the markdown to write")
    ap.add_argument("--quick", action="store_true", help="small sizes only (a smoke run)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per benchmark (default 1800)")
    a = ap.parse_args(argv)
    out = Path(a.out)
    if out.is_dir():
        raise SystemExit(f"error: --out {out}: is a folder, not a file")
    py = sys.executable
    load0 = os.getloadavg()
    start = time.strftime("%Y-%m-%d %H:%M")
    runs = []
    sizes = "20x5,40x10" if a.quick else "20x5,64x16,128x32"
    runs.append(("Exact proofs of the GD architectures (flint vs sympy)",
                 run([py, "bench/bench_proof.py", "--sizes", sizes, "--sympy-up-to", "20", "--catalogue"],
                     a.timeout)))
    runs.append(("Compiler: 1,000-gate placed circuit, baseconv vs baseconv-mlp",
                 run([py, "bench/bench_compiler.py"] + (["--gates", "200", "--repeat", "1"] if a.quick else []),
                     a.timeout)))
    if (ROOT / "bench" / "bench_memory.py").exists():
        runs.append(("Peak memory of gd --layers at two depths",
                     run([py, "bench/bench_memory.py"] + (["--quick"] if a.quick else []), a.timeout)))
    runs.append(("Float forward of the constructions against a baseline",
                 run([py, "bench/bench_construction.py"] + (["--quick"] if a.quick else []), a.timeout)))
    for gates in ((1000,) if a.quick else (10_000, 100_000)):
        large = ["--allow-large"] if gates > 10_000 else []
        with tempfile.TemporaryDirectory() as tmp:
            g = str(Path(tmp) / "circuit.json")
            made = run([py, "-m", "circuits.random", "--seed", "0", "--inputs", "20", "--gates", str(gates),
                        "--outputs", "8", "--out", g, *large], a.timeout)
            e2e = run([py, "-m", "verify.construct", "circuit", "--graph", g, *large], a.timeout, rss=True)
            e2e["cmd"] = (f"{made['cmd'].replace(g, 'c.json')} && "
                          f"{e2e['cmd'].replace(g, 'c.json')}  # circuit command's time and memory")
            e2e["out"] = (made["out"] + "\n" + e2e["out"]).replace(g, "c.json")
            e2e["out"] += (f"\ngenerating the circuit: {made['cpu']:.1f} s CPU, {made['wall']:.1f} s wall "
                           f"(not counted above)")
            runs.append((f"The circuit command end to end, {gates:,} random gates", e2e))
    load1 = os.getloadavg()
    head = (f"# Performance\n\nGenerated by `python bench/performance.py{' --quick' if a.quick else ''}` on "
            f"{start}: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
            f"load average {load0[0]:.2f} before, {load1[0]:.2f} after.  The machine is shared: compare "
            f"figures within this document (ratios), not with other runs.\n\n")
    text = head + "\n".join(section(t, r) for t, r in runs)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, out)
    print(f"wrote {out} ({sum(1 for _, r in runs if r['rc'] == 0)}/{len(runs)} benchmarks ok)")
    return 0 if all(r["rc"] == 0 for _, r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
