"""A sweep worker's allocator settings against Dask's default: the same torch training loop in one
LocalCluster worker, started once with Dask's nanny environment (``MALLOC_TRIM_THRESHOLD_=65536``:
freed memory handed back to the kernel at once) and once with the sweep runner's
(``polyverify.sweep.cluster.local_cluster_config``: up to 1 GiB kept, large blocks from the heap),
alternating, each for the same wall time.  Reports steps, user and system CPU seconds and CPU per
step, and the ratio of CPU per step (default / ours)::

    python bench/bench_sweep_worker.py [--seconds 20] [--rounds 2] [--json FILE]

The loop is a small MQAR-sized model (vocabulary 64, 16 tokens, width 128, batch 256) with an FFT
convolution, a gate and AdamW: a step frees and re-allocates its activations, as the experiments'
cells do.  Exit status 0, 2 bad input.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from polyverify.plumbing.cli import Parser, UsageError, atomic_write_text, run_main  # noqa: E402


def work(seconds: float) -> dict:
    """Train the small model for ``seconds`` of wall time in this (worker) process."""
    import time

    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    V, N, d, B = 64, 16, 128, 256
    emb, lin, out = torch.nn.Embedding(V, d), torch.nn.Linear(d, d), torch.nn.Linear(d, V)
    opt = torch.optim.AdamW([*emb.parameters(), *lin.parameters(), *out.parameters()], lr=1e-3)
    t0, w0, steps = os.times(), time.time(), 0
    while time.time() - w0 < seconds:
        x = torch.randint(0, V, (B, N))
        h = emb(x)
        f = torch.fft.rfft(h, n=2 * N, dim=1)
        h = torch.relu(lin(torch.fft.irfft(f * f, n=2 * N, dim=1)[:, :N])) * h
        loss = torch.nn.functional.cross_entropy(out(h).reshape(-1, V), x.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        steps += 1
    t1 = os.times()
    return {"steps": steps, "user_s": t1.user - t0.user, "sys_s": t1.system - t0.system,
            "MALLOC_TRIM_THRESHOLD_": os.environ.get("MALLOC_TRIM_THRESHOLD_")}


def one_run(settings: str, seconds: float) -> dict:
    """One run in a fresh Python process: Dask's nanny writes its pre-spawn environment into the
    process that starts it, where an existing variable then wins over the next cluster's setting, so
    each setting needs a process of its own (and none inherited from this one)."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, __file__, "--child", settings, str(seconds)], env=env,
                       capture_output=True, text=True, timeout=seconds + 300)
    if p.returncode != 0:
        raise RuntimeError(f"the {settings} run failed: {p.stderr.strip()[-400:]}")
    r = json.loads(p.stdout.strip().splitlines()[-1])
    r["cpu_per_step_ms"] = 1e3 * (r["user_s"] + r["sys_s"]) / max(1, r["steps"])
    r["settings"] = settings
    return r


def _child(settings: str, seconds: float) -> None:
    import logging

    import dask
    from distributed import Client, LocalCluster

    from polyverify.sweep.cluster import local_cluster_config

    cfg = local_cluster_config(0) if settings == "sweep runner" else {}
    with dask.config.set(cfg), LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                            dashboard_address=":0", silence_logs=logging.CRITICAL) as c, \
            Client(c) as client:
        r = client.submit(work, seconds, pure=False).result()
    print(json.dumps(r))


def main(argv=None) -> int:
    return run_main(_main, argv)


def _main(argv=None) -> int:
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="wall seconds per run (default 20)")
    ap.add_argument("--rounds", type=int, default=2, help="alternating rounds of both settings (default 2)")
    ap.add_argument("--json", help="write the measurements to this JSON file")
    a = ap.parse_args(argv)
    if not 0 < a.seconds <= 600:
        raise UsageError(f"--seconds must be in (0, 600], got {a.seconds}")
    if not 1 <= a.rounds <= 20:
        raise UsageError(f"--rounds must be in 1..20, got {a.rounds}")
    if a.json and Path(a.json).is_dir():
        raise UsageError(f"--json {a.json}: is a folder, not a file")
    runs = []
    for _ in range(a.rounds):
        for settings in ("dask default", "sweep runner"):
            r = one_run(settings, a.seconds)
            runs.append(r)
            print(f"{settings:13s} {r['steps']:6d} steps  user {r['user_s']:6.2f} s  sys {r['sys_s']:6.2f} s  "
                  f"{r['cpu_per_step_ms']:7.2f} ms CPU per step", flush=True)
    per = {s: sum(r["cpu_per_step_ms"] for r in runs if r["settings"] == s) / a.rounds
           for s in ("dask default", "sweep runner")}
    ratio = per["dask default"] / per["sweep runner"]
    print(f"CPU per step, Dask's default / the sweep runner's settings: {ratio:.2f}x")
    if a.json:
        atomic_write_text(a.json, json.dumps({"runs": runs, "cpu_per_step_ms": per, "ratio": ratio}, indent=1))
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        _child(sys.argv[2], float(sys.argv[3]))
    else:
        sys.exit(main())
