"""The modular forward at a wide (61-bit) prime: the float64 BLAS products of ``verify/prover/modular.py``
(``_mm_wide``: limbs with the powers of two moved into the weight side; ``_conv_blocks``: convolutions as
products of the input's windows with blocks of taps) against the routines they replaced, in one process.

    python bench/bench_modular.py [--sizes 64x16,256x64,512x128] [--batch 1] [--reps 2]
        [--baseline-commit 899bee5] [--json bench/results/modular/forward.json]

For each gd-baseconv size N x D (state (N + 1) x (5 D + 2)):

* **construction**: the construction's own layers (``constructions.catalogue``'s ``gd-baseconv``, eta 1/16);
* **dense**: the same layers' shapes with every weight, bias and filter a dense random float64 (a learned
  file's layers: every matrix dense, every filter general), read exactly as the binary fractions they are.

Each forward runs every layer once on ``--batch`` random residue states (the refutation and the import's
parameter solve run one point at a time), with the weights' residues made once beforehand (not timed).
The baseline is ``verify/prover/modular.py`` as of ``--baseline-commit`` (read with ``git show``, loaded as
a module of its own: its registrations into ``constructions.kinds`` suppressed, so the current module stays
the one the toolkit uses).  Both forwards must give the same residues (checked: the row says ``equal``).
Reported per row: the best of ``--reps`` runs' CPU seconds (this process's user + sys: OpenBLAS may run
threads) and wall seconds, and the ratios old / new; the load average before and after, the BLAS numpy
uses (and ``OPENBLAS_NUM_THREADS``), the CPU count.  The machine may be shared: CPU seconds are the
comparable figure; on a loaded machine OpenBLAS's threads wait for each other (run it with
``OPENBLAS_NUM_THREADS=1`` too).
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from polyverify.plumbing.cli import Parser, UsageError, atomic_write_text, output_beside, output_file, run_main  # noqa: E402

#: the last commit with the loop products (the parent of the BLAS products' commit)
BASELINE = "899bee5"
P = 1758613800527271587  # the 61-bit prime the refutation drew for the learned 256x64 file (seed 0)


def load_baseline(commit: str):
    """``verify/prover/modular.py`` at ``commit`` as the module ``verify.prover.modular_baseline``."""
    from constructions import kinds

    src = subprocess.run(["git", "show", f"{commit}:verify/prover/modular.py"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    spec = importlib.util.spec_from_loader("verify.prover.modular_baseline", loader=None)
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "verify.prover"
    real = kinds.provide
    kinds.provide = lambda *a, **k: None  # the current module keeps its registrations
    try:
        exec(compile(src, f"{commit}:verify/prover/modular.py", "exec"), mod.__dict__)
    finally:
        kinds.provide = real
    return mod


def layers(n: int, d: int, dense: bool, seed: int = 0) -> list:
    from constructions.catalogue import entries
    from constructions.layers import BaseConv

    con = entries()["gd-baseconv"].build(n=n, d=d)
    Ls = [*con.prologue, *con.body, *con.epilogue]
    if not dense:
        return Ls
    rng = np.random.default_rng(seed)
    out = []
    for L in Ls:
        arrays = {k: rng.normal(scale=0.1, size=np.shape(a)) for k, a in L.arrays().items()}
        out.append(BaseConv(**arrays, causal=L.causal, residual=L.residual, same=L.same))
    return out


def timed(f, reps: int):
    best_cpu = best_wall = float("inf")
    out = None
    for _ in range(reps):
        c, t = time.process_time(), time.perf_counter()
        out = f()
        best_cpu = min(best_cpu, time.process_time() - c)
        best_wall = min(best_wall, time.perf_counter() - t)
    return out, best_cpu, best_wall


def row(mod_new, mod_old, n: int, d: int, dense: bool, batch: int, reps: int) -> dict:
    Ls = layers(n, d, dense)
    res_new = [mod_new.layer_residues(L, P) for L in Ls]
    res_old = [mod_old._baseconv_residues(L, P) for L in Ls]  # its own (the registry holds the current module's)
    T, C = Ls[0].h.shape if hasattr(Ls[0].h, "shape") else np.shape(Ls[0].h)
    u = np.random.default_rng(1).integers(0, P, size=(batch, T, C), dtype=np.int64)

    def run(mod, res):
        def go():
            S = u
            for R in res:
                S = mod.forward(R, S, P)
            return S
        return go

    new, cpu_new, wall_new = timed(run(mod_new, res_new), reps)
    old, cpu_old, wall_old = timed(run(mod_old, res_old), reps)
    return {"size": f"{n}x{d}", "layers": "dense (learned-like)" if dense else "construction", "state": [T, C],
            "n_layers": len(Ls), "batch": batch, "equal": bool(np.array_equal(new, old)),
            "old_cpu_s": round(cpu_old, 3), "new_cpu_s": round(cpu_new, 3), "old_wall_s": round(wall_old, 3),
            "new_wall_s": round(wall_new, 3), "cpu_ratio": round(cpu_old / max(cpu_new, 1e-9), 2),
            "wall_ratio": round(wall_old / max(wall_new, 1e-9), 2)}


def blas_name() -> str:
    try:
        cfg = np.show_config(mode="dicts")
        return str(cfg["Build Dependencies"]["blas"].get("name"))
    except Exception:  # noqa: BLE001 - only a label
        return "unknown"


def _main(argv) -> int:
    ap = Parser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="64x16,256x64,512x128")
    ap.add_argument("--batch", default="1")
    ap.add_argument("--reps", default="2")
    ap.add_argument("--baseline-commit", default=BASELINE)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    # every argument and both outputs checked before any work
    try:
        sizes = [tuple(int(x) for x in s.split("x")) for s in a.sizes.split(",")]
        if not sizes or any(len(s) != 2 or min(s) < 1 or s[0] * s[1] > 1 << 20 for s in sizes):
            raise ValueError
    except ValueError:
        raise UsageError(f"--sizes takes N x D pairs like 256x64 (N, D >= 1, N * D <= 2^20), not {a.sizes!r}") from None
    try:
        a.batch, a.reps = int(a.batch), int(a.reps)
        if not (1 <= a.batch <= 64 and 1 <= a.reps <= 20):
            raise ValueError
    except ValueError:
        raise UsageError(f"--batch is an integer 1..64 and --reps 1..20, not {a.batch!r} and {a.reps!r}") from None
    spec = f"{a.baseline_commit}:verify/prover/modular.py"
    if a.baseline_commit.startswith("-") or subprocess.run(["git", "cat-file", "-e", spec], cwd=ROOT,
                                                           capture_output=True).returncode != 0:
        raise UsageError(f"--baseline-commit {a.baseline_commit}: no verify/prover/modular.py at that commit in {ROOT}")
    md_path = None
    if a.json:
        output_file("--json", a.json)
        md_path = output_beside("--json (.md beside it)", Path(a.json), ".md")  # None: a device or FIFO
    from verify.prover import modular

    old = load_baseline(a.baseline_commit)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip()
    if subprocess.run(["git", "status", "--porcelain", "--", "verify/prover/modular.py"], cwd=ROOT, capture_output=True,
                      text=True).stdout.strip():
        head += " with verify/prover/modular.py modified"  # the code measured is the working tree's
    load0 = os.getloadavg()[0]
    rows = []
    for n, d in sizes:
        for dense in (False, True):
            r = row(modular, old, n, d, dense, a.batch, a.reps)
            print(json.dumps(r), flush=True)
            rows.append(r)
    meta = {"command": "python bench/bench_modular.py " + " ".join(argv if argv is not None else sys.argv[1:]),
            "commit": head, "baseline_commit": a.baseline_commit, "prime": P, "load_before": round(load0, 2),
            "load_after": round(os.getloadavg()[0], 2), "cpus": os.cpu_count(), "blas": blas_name(),
            "reps": a.reps, "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "(unset)")}
    md = ["| size | layers | state | batch | old CPU s | new CPU s | CPU ratio | old wall s | new wall s | "
          "wall ratio | equal |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        md.append(f"| {r['size']} | {r['layers']} | {r['state'][0]} x {r['state'][1]} | {r['batch']} | "
                  f"{r['old_cpu_s']} | {r['new_cpu_s']} | {r['cpu_ratio']} | {r['old_wall_s']} | {r['new_wall_s']} "
                  f"| {r['wall_ratio']} | {'yes' if r['equal'] else 'NO'} |")
    print("\n".join(md))
    if a.json:
        path = Path(a.json)
        atomic_write_text(path, json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n", "--json")
        if md_path is None:
            print(f"wrote {path} (no .md table: --json is a device or FIFO)")
            return 0 if all(r["equal"] for r in rows) else 1
        atomic_write_text(md_path, f"`{meta['command']}` at {head} (baseline {a.baseline_commit}); load "
                          f"{meta['load_before']} -> {meta['load_after']}, {meta['cpus']} CPUs, BLAS {meta['blas']} "
                          f"(OPENBLAS_NUM_THREADS {meta['OPENBLAS_NUM_THREADS']}); best of {a.reps}\n\n"
                          + "\n".join(md) + "\n", "--json (.md beside it)")
        print(f"wrote {path} and {md_path}")
    return 0 if all(r["equal"] for r in rows) else 1


def main(argv=None) -> int:
    """The command: a bad argument or output path is one ``error:`` line and exit status 2, before any work."""
    return run_main(_main, argv)


if __name__ == "__main__":
    sys.exit(main())
