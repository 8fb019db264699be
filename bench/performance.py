"""Regenerate ``docs/performance.md``: every benchmark of ``bench/`` run once, its output kept.

    python bench/performance.py [--out docs/performance.md] [--quick]

Runs, each in its own process and in this order, and records the command, its output, its exit
status, and the CPU (user + sys of the child) and wall time it took:

* ``bench/bench_proof.py``: the exact proof of every GD architecture at N x D = 20x5, 64x16 and
  128x32, flint and sympy backends (sympy up to 20x5 with ``--quick``), plus the catalogue;
  then every hand GD architecture at 256x64 against 64x16, and baseconv, lsa and elsa at 512x128
  (seed 003's widths) against 64x16 under an 8 GiB cap, each beside the randomized check;
* ``bench/bench_compiler.py``: compile + proof of a 1,000-gate placed circuit, ``baseconv`` vs
  ``baseconv-mlp``;
* ``bench/bench_compiler.py --scale --million``: compile + proof CPU and peak RSS of placed random
  circuits at 1k, 10k, 100k and 10^6 gates with the fitted exponents;
* ``bench/bench_sparse.py``: the compiled layers' sparse weights against a dense copy (entries held,
  float forward, exact proof);
* ``bench/bench_memory.py`` (when present): peak RSS of ``gd --layers`` at two depths;
* ``bench/bench_startup.py``: ``--help`` and argument errors of ``verify.construct`` against ``import sympy``;
* ``bench/bench_construction.py``: the GD constructions' float run against equal-work baselines and
  plain torch GD (its JSON and markdown in ``bench/results/execution/``);
* the committed results of ``bench/gpu.sh`` (``bench/results/gpu/``), under the card's name, or "not
  run on a GPU" (:func:`gpu_section`; the GPU run is not started from here);
* the circuit command end to end on random 10,000- and 100,000-gate circuits (``python -m
  circuits.random`` then ``python -m verify.construct circuit``), each with the peak resident
  memory of the circuit command (targets: 60 s and 10 minutes).

The machine (platform, CPU count, load average before and after) heads the document: the
figures are only comparable within one run.  ``--only SECTION`` (a key of :data:`SECTION_KEYS`:
proofs, proofs-256, proofs-512, compiler, compiler-scale, pareto, sparse, memory, sweep-worker,
startup, execution, circuit-10k, circuit-100k; circuit-1k with ``--quick``) reruns that section alone and replaces it in the
document, the rest kept as it is, with the date and load of the rerun under it.  Nothing in the document is typed by hand.
"""
from __future__ import annotations

import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: the toolkit's plumbing

from polyverify.plumbing.cli import (Parser, UsageError, atomic_write_text, check_finite, output_file,  # noqa: E402
                                     run_main)


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


#: where ``bench/gpu.sh`` writes its results by default (committed when run on a GPU)
GPU_RESULTS = ROOT / "bench" / "results" / "gpu"


def _e(x) -> str:
    return "-" if x is None else f"{x:.2e}"


def gpu_section(folder: Path = GPU_RESULTS) -> str:
    """The committed results of ``bench/gpu.sh`` as a section, under the card's name; "not run on a GPU"
    when there are none (or when the committed run was the CPU smoke run)."""
    import json

    path = folder / "gpu.json"
    if not path.is_file():
        return ("## The GPU run\n\nNot run on a GPU: `bench/gpu.sh` writes `bench/results/gpu/gpu.json` on one, "
                "and this section shows it.\n")
    r = json.loads(path.read_text())
    m, pr = r["machine"], r["problems"]
    if not str(m.get("device", "")).startswith("cuda"):
        return (f"## The GPU run\n\nNot run on a GPU: the committed `{path.name}` comes from "
                f"`--device {m.get('device')}`.\n")
    lines = [f"## The GPU run: {m['card']}\n",
             f"`bash bench/gpu.sh` on {m['card']} (torch {m['torch']}, CUDA {m.get('cuda')}, cupy "
             f"{m.get('cupy', '-')}; {m['cpus']} CPUs; {r['seconds']:.0f} s). Results: "
             f"`bench/results/gpu/gpu.json`, plot `bench/results/gpu/gpu_roundoff.png`.\n",
             f"Roundoff of the GD constructions against exact GD (mpfr, {r['reference']['digits']} digits) on "
             f"{pr['batch']:,} problems {pr['n']}x{pr['d']} (kappa {pr['kappa']:g}, eta {pr['eta']}; inputs "
             f"{pr['inputs']}, {pr['entries_flushed_to_zero']} tiny entries set to 0). MSE of the iterate at the "
             f"last step, plain GD in the same backend and dtype beside it, and the run's wall seconds:\n",
             "| construction | backend | dtype | layers (steps) | MSE | plain GD MSE | ratio | first non-finite layer "
             "| seconds |", "|---|---|---|---|---|---|---|---|---|"]
    for x in r["runs"]:
        c = x["checkpoints"][-1] if x["checkpoints"] else {}
        ratio = (c["mse"] / c["plain_mse"]) if c.get("mse") and c.get("plain_mse") else None
        lines.append(f"| {x['construction']} | {x['backend']} | {x['dtype']} | {x['depth']} ({x['steps']}) | "
                     f"{_e(c.get('mse'))} | {_e(c.get('plain_mse'))} | "
                     f"{'-' if ratio is None else f'{ratio:.2f}'} | {x['first_nonfinite_layer'] or '-'} | "
                     f"{x['seconds']:.2f} |")
    for x in r["not_run"]:
        lines.append(f"| gd-{x['arch']} | {x['backend']} | {x['dtype']} | not run ({x['reason']}) | | | | | |")
    for x in r["skipped"]:
        lines.append(f"| (all) | {x['backend']} | {x['dtype']} | skipped: {x['reason']} | | | | | |")
    big = r.get("big")
    if big:
        lines += ["", f"Large float run: {big['construction']} at {big['n']}x{big['d']} (state {big['state'][0]} x "
                      f"{big['state'][1]}), {big['depth']} layers ({big['steps']} steps) on {big['batch']} problems, "
                      f"error read on {big['reference_problems']} of them:\n",
                  "| dtype | MSE at the last step | max relative error | seconds |", "|---|---|---|---|"]
        for x in big["runs"]:
            c = x["checkpoints"][-1]
            lines.append(f"| {x['dtype']} | {_e(c['mse'])} | {_e(c['max_rel'])} | {x['seconds']:.2f} |")
        for x in big.get("not_run", []):
            lines.append(f"| {x['dtype']} | not run ({x['reason']}) | | |")
    ex = folder / "execution.json"
    e = json.loads(ex.read_text()) if ex.is_file() else None
    if e is not None and "anchor" in e:  # the execution bench against plain GD (issue 46 item 2)
        lines += ["", f"Execution (`bench/bench_construction.py` on {e['device_name']}): CPU and wall per sample, "
                      f"the ratio to '{e['anchor']}' in the same rounds, FLOPs performed per sample, and the "
                      "algorithm's FLOPs per second as a fraction of the same round's matmul peak:\n",
                  "| construction | dtype | batch | implementation | CPU/sample | wall/sample | CPU vs GD | wall vs GD "
                  "| FLOP/sample | alg. of peak | max abs error |", "|---|---|---|---|---|---|---|---|---|---|---|"]
        for row in e["results"]:
            for name, v in row["impl"].items():
                ratio = "-" if v["cpu_vs_plain_gd"] is None else f"{v['cpu_vs_plain_gd']:.2f}x"
                lines.append(f"| `{row['arch']}` | {row['dtype']} | {row['batch']:,} | {name} | "
                             f"{v['cpu_per_sample_s'] * 1e6:.2f} us | {v['wall_per_sample_s'] * 1e6:.2f} us | {ratio} | "
                             f"{v['wall_vs_plain_gd']:.2f}x | {v['performed_flops_per_sample']:,.0f} | "
                             f"{v['fraction_of_peak_algorithm']:.5f} | {v['max_abs_error_vs_exact_gd']:.1e} |")
    elif e is not None:  # a run of the bench before issue 46 item 2 (its baseline: the dense layer)
        lines += ["", f"Execution (`bench/bench_construction.py` on {e['device_name']}): {e['construction']}, "
                      f"{e['layers']} layers, state {e['T']} x {e['C']}; wall per sample, speedup over "
                      f"'{e['baseline']}', useful GFLOP/s and their fraction of the same round's GEMM peak:\n",
                  "| dtype | batch | implementation | wall/sample | vs baseline | useful GFLOP/s | of peak |",
                  "|---|---|---|---|---|---|---|"]
        for row in e["results"]:
            for name, v in row["impl"].items():
                lines.append(f"| {row['dtype']} | {row['batch']:,} | {name} | {v['wall_per_sample_s'] * 1e6:.2f} us | "
                             f"{v['speedup_vs_baseline']:.2f}x | {v['useful_gflops']:.0f} | "
                             f"{v['fraction_of_peak_useful']:.3f} |")
    return "\n".join(lines) + "\n"


#: the execution section's title (and the titles it had before, replaced by ``--only execution``)
EXECUTION_TITLE = "The GD constructions' float run against equal-work baselines and plain GD"
EXECUTION_OLD_TITLES = ("Float forward of the constructions against a baseline",)
#: where the execution bench's results are committed (JSON and markdown)
EXECUTION_RESULTS = ROOT / "bench" / "results" / "execution"


def execution_run(quick: bool, timeout: float) -> tuple[str, dict]:
    """``bench/bench_construction.py`` (its JSON and markdown into ``bench/results/execution/`` on a
    full run), as a titled section."""
    cmd = [sys.executable, "bench/bench_construction.py"]
    if quick:
        cmd.append("--quick")
    else:
        cmd += ["--json", str(EXECUTION_RESULTS.relative_to(ROOT) / "execution.json"),
                "--md", str(EXECUTION_RESULTS.relative_to(ROOT) / "execution.md")]
    return EXECUTION_TITLE, run(cmd, timeout)


def replace_section(text: str, titles: tuple[str, ...], new: str) -> str:
    """``text`` with its ``## TITLE`` section (any of ``titles``; up to the next ``## ``) replaced by
    ``new``; a ValueError when there is none."""
    for title in titles:
        head = f"## {title}\n"
        i = text.find(head)
        if i >= 0:
            j = text.find("\n## ", i + len(head))
            return text[:i] + new + ("" if j < 0 else text[j + 1:])
    raise ValueError(f"no section {titles[0]!r}")


def _circuit_e2e(gates: int, timeout: float) -> dict:
    """``python -m circuits.random`` then ``python -m verify.construct circuit`` on a random circuit of
    ``gates`` gates, the circuit command's peak RSS last (generating the circuit not counted)."""
    py = sys.executable
    large = ["--allow-large"] if gates > 10_000 else []
    with tempfile.TemporaryDirectory() as tmp:
        g = str(Path(tmp) / "circuit.json")
        made = run([py, "-m", "circuits.random", "--seed", "0", "--inputs", "20", "--gates", str(gates),
                    "--outputs", "8", "--out", g, *large], timeout)
        e2e = run([py, "-m", "verify.construct", "circuit", "--graph", g, *large], timeout, rss=True)
    e2e["cmd"] = (f"{made['cmd'].replace(g, 'c.json')} && "
                  f"{e2e['cmd'].replace(g, 'c.json')}  # circuit command's time and memory")
    e2e["out"] = (made["out"] + "\n" + e2e["out"]).replace(g, "c.json")
    e2e["out"] += f"\ngenerating the circuit: {made['cpu']:.1f} s CPU, {made['wall']:.1f} s wall (not counted above)"
    return e2e


def benchmarks(quick: bool, timeout: float) -> list[tuple[str, str, tuple[str, ...], object]]:
    """Every section of the document, in its order: ``(key, title, older titles, thunk)``; the thunk runs the
    benchmark and returns :func:`run`'s record.  ``--only KEY`` reruns one of them."""
    py = sys.executable
    sizes = "20x5,40x10" if quick else "20x5,64x16,128x32"
    out = [("proofs", "Exact proofs of the GD architectures (flint vs sympy)", (),
            lambda: run([py, "bench/bench_proof.py", "--sizes", sizes, "--sympy-up-to", "20", "--catalogue"],
                        timeout))]
    if not quick:
        out.append(("proofs-256", "Exact proofs of the GD architectures at 256x64 (against 64x16; exact and "
                    "randomized)", (),
                    lambda: run([py, "bench/bench_proof.py", "--sizes", "64x16,256x64", "--archs",
                                 "baseconv,baseconv-causal,lsa,elsa", "--paired-up-to", "0", "--sympy-up-to", "0",
                                 "--full-up-to", "0"], timeout)))
        out.append(("proofs-512", "Exact proofs at 512x128, the widths of seed 003's sweeps (against 64x16; at "
                    "most 8 GiB each)", (),
                    lambda: run([py, "bench/bench_proof.py", "--sizes", "64x16,512x128", "--archs",
                                 "baseconv,lsa,elsa", "--paired-up-to", "0", "--sympy-up-to", "0", "--full-up-to",
                                 "0", "--memory-gib", "8"], timeout)))
    out += [
        ("compiler", "Compiler: 1,000-gate placed circuit, baseconv vs baseconv-mlp", (),
         lambda: run([py, "bench/bench_compiler.py"] + (["--gates", "200", "--repeat", "1"] if quick else []),
                     timeout)),
        ("compiler-scale", "Compiler at scale: compile + proof of placed random circuits (1k to 10^6 gates), "
         "fitted exponents", (),
         lambda: run([py, "bench/bench_compiler.py", "--scale"]
                     + (["--quick"] if quick else ["--sizes", "1000,10000,100000", "--million"]), timeout)),
        ("pareto", "Compiler: the GD step's layers/channels frontier under channel budgets, each point proved", (),
         lambda: run([py, "bench/bench_compiler.py", "--pareto", "--pareto-size", "6x2" if quick else "20x5"],
                     timeout)),
        ("sparse", "Compiler: sparse against dense weights of the compiled layers (entries, float forward, proof)",
         (), lambda: run([py, "bench/bench_sparse.py"] + (["--quick"] if quick else []), timeout)),
    ]
    if (ROOT / "bench" / "bench_memory.py").exists():
        out.append(("memory", "Peak memory of gd --layers at two depths", (),
                    lambda: run([py, "bench/bench_memory.py"] + (["--quick"] if quick else []), timeout)))
    out += [
        ("sweep-worker", "Sweep workers: the runner's allocator settings against Dask's default (torch cell CPU "
         "per step)", (),
         lambda: run([py, "bench/bench_sweep_worker.py", "--seconds", "2" if quick else "10", "--rounds",
                      "1" if quick else "2"], timeout)),
        ("startup", "Start-up: --help and argument errors against import sympy", (),
         lambda: run([py, "bench/bench_startup.py"] + (["--repeat", "3", "--only-light"] if quick else []),
                     timeout)),
        ("execution", EXECUTION_TITLE, EXECUTION_OLD_TITLES, lambda: execution_run(quick, timeout)[1]),
    ]
    for gates in ((1000,) if quick else (10_000, 100_000)):
        out.append((f"circuit-{gates // 1000}k", f"The circuit command end to end, {gates:,} random gates", (),
                    lambda gates=gates: _circuit_e2e(gates, timeout)))
    return out


#: the keys ``--only`` takes: every section of a full run, then those only a ``--quick`` run has
SECTION_KEYS = tuple(dict.fromkeys(k for q in (False, True) for k, *_ in benchmarks(q, 0)))


def _main(argv) -> int:
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "performance.md"), help="the markdown to write")
    ap.add_argument("--quick", action="store_true", help="small sizes only (a smoke run)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per benchmark (default 1800)")
    ap.add_argument("--only", choices=SECTION_KEYS, metavar="SECTION",
                    help="rerun one section and replace it in --out (the rest of the document kept as it is): "
                         + ", ".join(SECTION_KEYS))
    a = ap.parse_args(argv)
    check_finite("--timeout", a.timeout, positive=True)
    out = output_file("--out", a.out)  # checked before any work; written atomically (a device written through)
    if a.only:
        if not out.is_file():
            raise UsageError(f"--only needs the document {out} to replace a section of")
        found = [b for b in benchmarks(a.quick, a.timeout) if b[0] == a.only]
        if not found:
            raise UsageError(f"--only {a.only}: not a section of a{' --quick' if a.quick else ' full'} run")
        _, title, old, thunk = found[0]
        try:
            replace_section(out.read_text(), (title, *old), "")
        except ValueError as e:
            raise UsageError(f"{out}: {e}") from None
        r = thunk()
        new = (f"{section(title, r)}\n(Section rerun alone by `python bench/performance.py --only {a.only}` on "
               f"{time.strftime('%Y-%m-%d %H:%M')}, load average {os.getloadavg()[0]:.2f} after.)\n\n")
        atomic_write_text(out, replace_section(out.read_text(), (title, *old), new), "--out")
        print(f"wrote the section {title!r} of {out} ({'ok' if r['rc'] == 0 else 'failed'})")
        return 0 if r["rc"] == 0 else 1
    load0 = os.getloadavg()
    start = time.strftime("%Y-%m-%d %H:%M")
    runs = [(title, thunk()) for _, title, _, thunk in benchmarks(a.quick, a.timeout)]
    load1 = os.getloadavg()
    head = (f"# Performance\n\nGenerated by `python bench/performance.py{' --quick' if a.quick else ''}` on "
            f"{start}: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
            f"load average {load0[0]:.2f} before, {load1[0]:.2f} after.  The machine is shared: compare "
            f"figures within this document (ratios), not with other runs.\n\n")
    text = head + "\n".join(section(t, r) for t, r in runs) + "\n" + gpu_section()
    atomic_write_text(out, text, "--out")
    print(f"wrote {out} ({sum(1 for _, r in runs if r['rc'] == 0)}/{len(runs)} benchmarks ok)")
    return 0 if all(r["rc"] == 0 for _, r in runs) else 1


def main(argv=None) -> int:
    """The command: bad arguments and paths are one ``error:`` line and exit status 2, before any benchmark runs."""
    return run_main(_main, argv)


if __name__ == "__main__":
    sys.exit(main())
