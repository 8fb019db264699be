"""Sparse against dense weights of compiled layers: memory held, float forward, exact proof.

    python bench/bench_sparse.py [--sizes 1000,10000] [--targets baseconv,baseconv-causal] [--batch 256]
                                 [--dense-proof-up-to 1000] [--quick] [--json FILE]

A placed random circuit per size (``random_circuit(0, 64 inputs, gates, 8 outputs)`` on 16 tokens,
as ``bench_compiler.py --scale``) is compiled once per target; its layers hold their channel mixes
as ``constructions.sparse.SparseMatrix``.  The baseline is the same layers with every weight laid
out dense (``Layer.map(constructions.sparse.dense)``), made in the same process:

* **entries**: the weight entries each form holds (sparse: the stored nonzeros; dense: every
  entry of every array) and their ratio;
* **float forward**: the stack's forward on ``--batch`` random problems in float64 and float32
  (numpy backend, the weights cast once as a numeric run casts them), CPU per problem
  (user + sys, ``time.process_time``) and wall, sparse against dense, with the largest
  difference of the two outputs relative to the output's largest magnitude (summation order
  differs; the exact result is the same);
* **exact proof**: ``verify.prover.proof.prove`` of the sparse stack against the dense copy, up to
  ``--dense-proof-up-to`` gates (both must be PROVED), two rounds interleaved after a warm-up
  proof, the smaller CPU of each form.

Machines here are shared and noisy: compare the ratios.  Exit 0 when every proof is PROVED and the
float outputs agree within 1e-6 relative (float64), 1 otherwise, 2 bad arguments.
"""
from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import circuits as C  # noqa: E402
from bench_compiler import placed  # noqa: E402
from circuits.random import random_circuit  # noqa: E402
from constructions.compiler import compile_circuit  # noqa: E402
from constructions.sparse import SparseMatrix, dense, nnz  # noqa: E402
from numerics.backends import Backend  # noqa: E402
from polyverify.plumbing.cli import (Parser, UsageError, atomic_write_text, check_range, output_file,  # noqa: E402
                                     run_main)
from verify.prover.proof import prove  # noqa: E402

TARGETS = ("baseconv", "baseconv-causal", "lsa", "elsa")


def entries(layers) -> tuple[int, int]:
    """(entries the layers store, entries a dense layout stores)."""
    held = full = 0
    for L in layers:
        for A in L.arrays().values():
            full += int(np.prod(A.shape))
            held += A.nnz if isinstance(A, SparseMatrix) else int(np.prod(A.shape))
    return held, full


def forward(con, layers, dtype: str, batch: int) -> tuple[float, float, np.ndarray]:
    """CPU and wall seconds of the cast-and-run, and the final state."""
    names = C.inputs(con.graph)
    xs = np.random.default_rng(0).standard_normal((len(names), batch))
    fv = {n: xs[i] for i, n in enumerate(names)}
    be = Backend("numpy", dtype)
    S = be.asarray(con.input_state(fv))
    c0, w0 = time.process_time(), time.perf_counter()
    for L in layers:
        S = be.cast_layer(L).forward(S)
    return time.process_time() - c0, time.perf_counter() - w0, np.asarray(S, dtype=np.float64)


def measure(gates: int, target: str, a) -> dict:
    g = placed(random_circuit(0, 64, gates, n_outputs=8), 16)
    c0 = time.process_time()
    con = compile_circuit(g, name="bench", target=target)
    compile_cpu = time.process_time() - c0
    sparse_layers = con.layers(0)
    dense_layers = [L.map(dense) for L in sparse_layers]
    held, full = entries(sparse_layers)
    row = {"gates": gates, "target": target, "state": list(con.layout.shape), "layers": len(sparse_layers),
           "compile_cpu": compile_cpu, "entries_sparse": held, "entries_dense": full,
           "nonzero": sum(nnz(A) for L in sparse_layers for A in L.arrays().values())}
    for dt in ("float64", "float32"):
        cs, ws, Ys = forward(con, sparse_layers, dt, a.batch)
        cd, wd, Yd = forward(con, dense_layers, dt, a.batch)
        scale = max(1.0, float(np.nanmax(np.abs(Yd)))) if np.isfinite(Yd).any() else 1.0
        row[dt] = {"sparse_cpu_per_problem": cs / a.batch, "dense_cpu_per_problem": cd / a.batch,
                   "sparse_wall": ws, "dense_wall": wd,
                   "rel_diff": float(np.nanmax(np.abs(Ys - Yd))) / scale}
    if gates <= a.dense_proof_up_to:  # two rounds, the forms interleaved; the smaller CPU of each
        cpu = {"sparse": [], "dense": []}
        ok = {}
        for _ in range(2):
            for form, layers in (("dense", dense_layers), ("sparse", sparse_layers)):
                con.epilogue = layers
                c0 = time.process_time()
                ok[form] = bool(prove(con).ok)
                cpu[form].append(time.process_time() - c0)
        con.epilogue = sparse_layers
        row["proof"] = {"sparse_cpu": min(cpu["sparse"]), "dense_cpu": min(cpu["dense"]),
                        "sparse_ok": ok["sparse"], "dense_ok": ok["dense"]}
    return row


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.1f}x" if b > 0 else "-"


def _main(argv) -> int:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1000,10000", help="gates per circuit (default 1000,10000)")
    p.add_argument("--targets", default="baseconv,baseconv-causal", help="placed targets (default baseconv,"
                                                                          "baseconv-causal)")
    p.add_argument("--batch", type=int, default=256, help="problems per float forward (default 256)")
    p.add_argument("--dense-proof-up-to", type=int, default=1000,
                   help="prove the dense copy too up to this many gates (default 1000)")
    p.add_argument("--quick", action="store_true", help="200 gates, baseconv only (a smoke run)")
    p.add_argument("--json", help="write the figures as JSON to this file")
    a = p.parse_args(argv)
    # every argument and the output checked before any circuit is compiled
    try:
        sizes = [int(x) for x in a.sizes.split(",") if x]
    except ValueError:
        sizes = []
    targets = [t for t in a.targets.split(",") if t]
    if not sizes or any(not 1 <= n <= 100_000 for n in sizes):
        raise UsageError(f"--sizes must be gate counts in 1..100000, got {a.sizes!r}")
    if not targets or any(t not in TARGETS for t in targets):
        raise UsageError(f"--targets: choose among {', '.join(TARGETS)}, got {a.targets!r}")
    check_range("--batch", a.batch, 1, 65_536)
    check_range("--dense-proof-up-to", a.dense_proof_up_to, 0)
    out = output_file("--json", a.json)
    if a.quick:
        sizes, targets = [200], ["baseconv"]
    print(f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; CPU = user + sys "
          f"of this process; float forward on {a.batch} problems, numpy backend")
    print(f"{'gates':>7} {'target':<16} {'state':>9} {'layers':>6} {'entries sparse':>14} {'dense':>11} "
          f"{'ratio':>7} | {'f64 CPU/problem sparse':>22} {'dense':>9} {'ratio':>6} | {'f32 ratio':>9} | "
          f"{'proof CPU sparse':>16} {'dense':>7}")
    prove(compile_circuit(placed(random_circuit(1, 8, 20), 4), name="warm-up"))  # imports, first-call set-up
    rows, good = [], True
    for gates in sizes:
        for target in targets:
            r = measure(gates, target, a)
            rows.append(r)
            f64, f32 = r["float64"], r["float32"]
            good &= f64["rel_diff"] <= 1e-6
            pr = r.get("proof")
            if pr:
                good &= pr["sparse_ok"] and pr["dense_ok"]
                ptxt = (f"{pr['sparse_cpu']:>15.2f}s {pr['dense_cpu']:>6.2f}s"
                        + ("" if pr["sparse_ok"] and pr["dense_ok"] else " FAILED"))
            else:
                ptxt = f"{'-':>16} {'-':>7}"
            print(f"{gates:>7} {target:<16} {'x'.join(map(str, r['state'])):>9} {r['layers']:>6} "
                  f"{r['entries_sparse']:>14,} {r['entries_dense']:>11,} "
                  f"{_ratio(r['entries_dense'], r['entries_sparse']):>7} | "
                  f"{f64['sparse_cpu_per_problem'] * 1e6:>19.1f} us {f64['dense_cpu_per_problem'] * 1e6:>6.1f}us "
                  f"{_ratio(f64['dense_cpu_per_problem'], f64['sparse_cpu_per_problem']):>6} | "
                  f"{_ratio(f32['dense_cpu_per_problem'], f32['sparse_cpu_per_problem']):>9} | {ptxt}",
                  flush=True)
    print("ratios: dense / sparse (above 1: the sparse form holds fewer entries / runs faster); float outputs of "
          f"the two forms agree within {max(r['float64']['rel_diff'] for r in rows):.1e} relative (float64)")
    if out is not None:
        atomic_write_text(out, json.dumps({"batch": a.batch, "rows": rows}, indent=1) + "\n", "--json")
    return 0 if good else 1


def main(argv=None) -> int:
    """The command: a bad argument or output path is one ``error:`` line and exit status 2, before any work."""
    return run_main(_main, argv)


if __name__ == "__main__":
    sys.exit(main())
