"""The GPU run: roundoff of the GD constructions at depth on many problems, per backend and dtype.

    python bench/bench_gpu.py --device cuda [--batch 65536] [--layers 1000] [--out bench/results/gpu]
    python bench/bench_gpu.py --device cpu --batch 64 --layers 40 --n 8 --d 3 --big 16x4   # CI smoke

``bench/gpu.sh`` runs it (with the execution bench beside it); ``bench/performance.py`` folds the
JSON it writes into docs/performance.md under the card's name.

What it measures, for every GD architecture (seed 000 eq. (3): baseconv, baseconv-causal; seed 001
Sec. 3: lsa, elsa) x backend (torch on ``--device``, cupy where a GPU has it) x dtype (float16,
bfloat16, float32, float64):

* the construction streamed ``k`` GD steps, ``k`` the most whose stack fits in ``--layers`` layers,
  on ``--batch`` problems of seed 000 Sec. 3.2 (kappa 5, eta 1/16);
* at the checkpoint steps (1, 10, 100, ... and ``k``) the error of the iterate against **exact GD**
  from the same inputs (``numerics.reference.gd_reference_iter`` in mpfr, 50 digits, held as a
  float64 pair ``hi + lo`` so that a float64 iterate's error is read to its last bit), as MSE and
  max relative error, and the same for plain GD run in the same backend and dtype (the overhead of
  the construction over the algorithm's own roundoff);
* the first layer where a non-finite value appears, and the run's wall seconds.

The inputs are rounded once to bfloat16 values that float16 also holds exactly (an entry below
float16's normal range, 2^-14, becomes 0; the JSON counts them): every dtype then starts from the same
problems and one exact reference serves all four.  The reference runs in ``--workers`` processes
while the GPU runs, so it costs no wall time beside it.

``--big NxD`` adds a float run at that size (default 512x128, the widths of seed 003's sweeps):
baseconv for ``--big-steps`` steps in float32 and float64 on ``--big-batch`` problems, the error
against exact GD read on the first ``--big-ref`` of them.

A global ``--deadline`` (seconds) stops starting new configurations; those left are listed as not
run, never dropped silently.  Bad input: one ``error:`` line and exit 2 before any work.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import math
import multiprocessing
import os
import platform
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from polyverify.plumbing.cli import EXIT_USAGE, UsageError, atomic_write_text, output_dir, save_figure  # noqa: E402

ARCHS = ("baseconv", "baseconv-causal", "lsa", "elsa")
BACKENDS = ("torch", "cupy")
DTYPES = ("float32", "float64", "bfloat16", "float16")
LIMITS = {"batch": 1 << 20, "layers": 100_000, "n": 4096, "d": 1024, "workers": 256, "big_batch": 4096,
          "big_steps": 1000, "big_ref": 256}
ETA = Fraction(1, 16)
KAPPA = 5.0


# ------------------------------------------------------------------ arguments

def parse(argv) -> argparse.Namespace:
    from polyverify.plumbing.cli import Parser

    p = Parser(prog="bench/bench_gpu.py", description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda", help="cpu or cuda[:i] (default cuda)")
    p.add_argument("--batch", type=int, default=65536, help="problems (default 65,536)")
    p.add_argument("--layers", type=int, default=1000, help="depth of every stack, in layers (default 1,000)")
    p.add_argument("--n", type=int, default=20, help="rows N of A (default 20)")
    p.add_argument("--d", type=int, default=5, help="columns D of A (default 5)")
    p.add_argument("--archs", default=",".join(ARCHS), help=f"comma list of {', '.join(ARCHS)}")
    p.add_argument("--backends", default=",".join(BACKENDS), help="comma list of torch, cupy")
    p.add_argument("--dtypes", default=",".join(DTYPES), help=f"comma list of {', '.join(DTYPES)}")
    p.add_argument("--big", default="512x128", help="NxD of the large float run, or 'off' (default 512x128)")
    p.add_argument("--big-batch", type=int, default=256, help="problems of the large run (default 256)")
    p.add_argument("--big-steps", type=int, default=10, help="GD steps of the large run (default 10)")
    p.add_argument("--big-ref", type=int, default=16, help="problems of the large run read against exact GD")
    p.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 3) - 2),
                   help="processes computing the exact reference (default: CPUs - 2)")
    p.add_argument("--deadline", type=float, default=270.0, help="seconds after which no configuration starts")
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "gpu"), help="folder of gpu.json and the plot")
    a = p.parse_args(argv)
    if a.device != "cpu" and not (a.device == "cuda" or (a.device.startswith("cuda:") and a.device[5:].isdigit())):
        raise UsageError(f"--device must be cpu or cuda[:i], got {a.device!r}")
    for flag, lo in (("batch", 1), ("layers", 1), ("n", 1), ("d", 1), ("workers", 1), ("big_batch", 1),
                     ("big_steps", 1), ("big_ref", 1)):
        v = getattr(a, flag)
        if not lo <= v <= LIMITS[flag]:
            raise UsageError(f"--{flag.replace('_', '-')} must be in {lo} .. {LIMITS[flag]:,}, got {v}")
    if a.d > a.n:
        raise UsageError(f"--d {a.d} > --n {a.n}: the problems must be fully determined")
    if not (math.isfinite(a.deadline) and a.deadline > 0):
        raise UsageError(f"--deadline must be a positive number of seconds, got {a.deadline}")
    a.archs = _list(a.archs, "--archs", ARCHS)
    a.backends = _list(a.backends, "--backends", BACKENDS)
    a.dtypes = _list(a.dtypes, "--dtypes", DTYPES)
    if a.big == "off":
        a.big = None
    else:
        try:
            n, d = (int(t) for t in a.big.lower().split("x"))
        except ValueError:
            raise UsageError(f"--big must be NxD (e.g. 512x128) or 'off', got {a.big!r}") from None
        if not (1 <= d <= n <= LIMITS["n"] and d <= LIMITS["d"]):
            raise UsageError(f"--big {a.big}: need 1 <= D <= N <= {LIMITS['n']}, D <= {LIMITS['d']}")
        a.big = (n, d)
        a.big_ref = min(a.big_ref, a.big_batch)
    a.out = output_dir("--out", a.out)
    return a


def _list(s: str, flag: str, allowed) -> list[str]:
    items = [t.strip() for t in s.split(",") if t.strip()]
    bad = [t for t in items if t not in allowed]
    if not items or bad:
        raise UsageError(f"{flag}: unknown {', '.join(bad) or '(empty list)'}; choose from {', '.join(allowed)}")
    return list(dict.fromkeys(items))


# ------------------------------------------------------------------ the exact reference, in worker processes

def checkpoints_of(k: int) -> list[int]:
    """1, 10, 100, ... below k, and k."""
    out, c = [], 1
    while c < k:
        out.append(c)
        c *= 10
    return out + [k]


def reference_chunk(A, b, x0, eta: str, checkpoints: list[int], digits: int = 50) -> np.ndarray:
    """Exact GD from (A, b, x0) at the checkpoint steps, as (len(checkpoints), 2, B, D): hi and lo,
    hi the float64 rounding of the mpfr iterate and lo the float64 rounding of the rest."""
    import gmpy2

    from numerics.reference import gd_reference_iter, working_precision

    want = set(checkpoints)
    out = np.empty((len(checkpoints), 2) + x0.shape)
    prec = working_precision(digits)
    it = gd_reference_iter(A, b, x0, Fraction(eta), max(checkpoints), digits=digits, return_mp=True)
    i = 0
    for step, (xf, xm) in enumerate(it):
        if step in want:
            out[i, 0] = xf
            with gmpy2.context(precision=prec):
                out[i, 1] = np.array([float(m - float(m)) for m in xm.reshape(-1)]).reshape(xf.shape)
            i += 1
    return out


def start_reference(pool, A, b, x0, checkpoints, workers: int) -> list:
    chunks = np.array_split(np.arange(A.shape[0]), max(1, min(workers * 4, A.shape[0])))
    return [(c, pool.submit(reference_chunk, A[c], b[c], x0[c], str(ETA), checkpoints)) for c in chunks if len(c)]


def gather(futs, B: int, D: int, n_cp: int) -> np.ndarray:
    ref = np.empty((n_cp, 2, B, D))
    for c, f in futs:
        ref[:, :, c] = f.result()
    return ref


# ------------------------------------------------------------------ problems

def common_inputs(P, q) -> tuple[dict, int]:
    """A, b, x0, q rounded to bfloat16 values that float16 holds too (tiny entries -> 0)."""
    import torch

    flushed = 0
    v = {}
    for name, arr in (("A", P.A), ("b", P.b), ("x", P.x0), ("q", q)):
        r = torch.as_tensor(arr).to(torch.bfloat16).double().numpy()
        tiny = (r != 0) & (np.abs(r) < 2.0 ** -14)
        flushed += int(tiny.sum())
        r = np.where(tiny, 0.0, r)
        back = torch.as_tensor(r).to(torch.float16).double().numpy()
        if not np.array_equal(back, r):
            raise RuntimeError(f"{name}: a bfloat16 value float16 does not hold")
        v[name] = r
    return v, flushed


# ------------------------------------------------------------------ one configuration

def _sync(backend):
    if backend.name == "torch" and backend.device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()
    elif backend.name == "cupy":
        import cupy

        cupy.cuda.Device().synchronize()


def run_one(con, v: dict, k: int, backend, checkpoints: list[int]) -> dict:
    """Stream ``con`` k steps on ``backend``; the float64 iterates at the checkpoints, plain GD's too."""
    from numerics.runner import plain_gd_iter

    want = set(checkpoints)
    xs: dict[int, np.ndarray] = {}
    first_bad: dict = {}
    cache: dict[int, object] = {}

    def cast(L):
        if id(L) not in cache:
            cache[id(L)] = backend.cast_layer(L)
        return cache[id(L)]

    def on_layer(i, S):
        if not backend.isfinite_all(S):
            first_bad["layer"] = i
            return True
        return False

    def on_step(step, S):
        if step in want:
            xs[step] = con.readout(backend.to_numpy64(S))["x"]
        return False

    t_setup = time.perf_counter()
    S = backend.asarray(con.input_state(v))
    _sync(backend)
    t0 = time.perf_counter()
    with np.errstate(over="ignore", invalid="ignore"):
        con.run(v, k, state=S, cast=cast, on_layer=on_layer, on_step=on_step)
    _sync(backend)
    seconds, t0_run = time.perf_counter() - t0, t0
    plain = {}
    t0 = time.perf_counter()
    for step, x in enumerate(plain_gd_iter(v["A"], v["b"], v["x"], float(ETA), k, backend)):
        if step in want:
            plain[step] = x
    _sync(backend)
    return {"x": xs, "plain": plain, "seconds": seconds, "seconds_plain": time.perf_counter() - t0,
            "seconds_input": t0_run - t_setup,
            "first_nonfinite_layer": first_bad.get("layer")}


def errors(x: np.ndarray | None, hi: np.ndarray, lo: np.ndarray) -> dict:
    if x is None or not np.all(np.isfinite(x)):
        return {"mse": None, "max_rel": None}
    err = (x - hi) - lo
    scale = np.maximum(np.abs(hi), np.finfo(np.float64).tiny)
    return {"mse": float(np.mean(err ** 2)), "max_rel": float(np.max(np.abs(err) / scale))}


# ------------------------------------------------------------------ main

def machine(device: str) -> dict:
    import torch

    info = {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version(),
            "torch": torch.__version__, "device": device, "card": "cpu (no GPU)"}
    if device.startswith("cuda"):
        info["card"] = torch.cuda.get_device_name(torch.device(device))
        info["cuda"] = torch.version.cuda
    try:
        import cupy

        info["cupy"] = cupy.__version__
    except ImportError:
        pass
    return info


def backends_for(a) -> tuple[list, list[dict]]:
    from numerics.backends import Backend, BackendError

    runs, skipped = [], []
    for name in a.backends:
        for dt in a.dtypes:
            dev = a.device if name == "torch" else "cuda"
            try:
                runs.append(Backend(name, dt, dev))
            except BackendError as e:
                skipped.append({"backend": name, "dtype": dt, "reason": str(e)})
    return runs, skipped


def main(argv=None) -> int:
    try:
        a = parse(argv)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    import torch

    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("error: --device cuda requested but torch sees no CUDA GPU", file=sys.stderr)
        return EXIT_USAGE
    from numerics.problems import sample_ls
    from numerics.roundoff import build, resolve

    t_start = time.perf_counter()
    say = lambda s: print(f"[{time.perf_counter() - t_start:6.1f} s] {s}", flush=True)  # noqa: E731
    cons = {}
    for arch in a.archs:
        con = build(resolve(arch), a.n, a.d, ETA, Fraction(0))
        k = 0
        while con.depth(k + 1) <= a.layers:
            k += 1
        if k == 0:
            print(f"error: --layers {a.layers}: {arch}'s stack needs {con.depth(1)} layers for one step",
                  file=sys.stderr)
            return EXIT_USAGE
        cons[arch] = (con, k)
    kmax = max(k for _, k in cons.values())
    cps = sorted({c for _, k in cons.values() for c in checkpoints_of(k)})
    P = sample_ls(a.batch, a.n, a.d, kappa=KAPPA, sigma=1.0, seed=0)
    q = np.random.default_rng(1).standard_normal((a.batch, a.d))
    v, flushed = common_inputs(P, q)
    backends, skipped = backends_for(a)
    for be in backends:  # the libraries and the device initialised before the workers start
        be.asarray(np.zeros(1))
    say(f"{a.batch:,} problems {a.n}x{a.d}, {len(cons)} constructions x {len(backends)} backend/dtype pairs; "
        f"exact reference ({kmax} steps) in {a.workers} processes")
    ctx = multiprocessing.get_context("spawn")  # no fork after CUDA is initialised
    results, not_run = [], []
    with cf.ProcessPoolExecutor(a.workers, mp_context=ctx) as pool:
        futs = start_reference(pool, v["A"], v["b"], v["x"], cps, a.workers)
        big_futs = None
        if a.big:
            Pb = sample_ls(a.big_batch, a.big[0], a.big[1], kappa=KAPPA, sigma=1.0, seed=0)
            vb = {"A": Pb.A, "b": Pb.b, "x": Pb.x0, "q": np.zeros((a.big_batch, a.big[1]))}
            big_cps = checkpoints_of(a.big_steps)
            big_futs = [(np.arange(i, i + 1), pool.submit(reference_chunk, vb["A"][i:i + 1], vb["b"][i:i + 1],
                                                          vb["x"][i:i + 1], str(ETA), big_cps))
                        for i in range(a.big_ref)]
        say(f"reference: {len(futs)} jobs submitted")
        runs = []
        big = None
        order = sorted(backends, key=lambda b: (BACKENDS.index(b.name), DTYPES.index(b.dtype)))
        for i, be in enumerate(order):
            if a.big and i == sum(b.name == "torch" for b in order):  # after torch's runs, before cupy's
                big = run_big(a, vb, big_cps, say, t_start)
            for arch, (con, k) in cons.items():
                if time.perf_counter() - t_start > a.deadline:
                    not_run.append({"arch": arch, "backend": be.name, "dtype": be.dtype, "reason": "deadline"})
                    continue
                res = run_one(con, v, k, be, [c for c in cps if c <= k])
                say(f"{arch:16s} {be.name:5s} {be.dtype:8s} {con.depth(k)} layers ({k} steps): "
                    f"{res['seconds']:.2f} s (state in {res['seconds_input']:.2f} s, plain GD {res['seconds_plain']:.2f} s)"
                    + (f", non-finite at layer {res['first_nonfinite_layer']}"
                                                   if res["first_nonfinite_layer"] is not None else ""))
                runs.append((arch, k, con, be, res))
        if a.big and big is None:
            big = run_big(a, vb, big_cps, say, t_start)
        say("waiting for the exact reference")
        ref = gather(futs, a.batch, a.d, len(cps))
        for arch, k, con, be, res in runs:
            rec = {"arch": arch, "construction": con.name, "backend": be.name, "device": be.device,
                   "dtype": be.dtype, "steps": k, "depth": con.depth(k), "seconds": res["seconds"],
                   "seconds_plain_gd": res["seconds_plain"], "first_nonfinite_layer": res["first_nonfinite_layer"],
                   "checkpoints": []}
            for i, c in enumerate(cps):
                if c > k:
                    continue
                e = errors(res["x"].get(c), ref[i, 0], ref[i, 1])
                pe = errors(res["plain"].get(c), ref[i, 0], ref[i, 1])
                rec["checkpoints"].append({"step": c, "layers": con.depth(c), **e, "plain_mse": pe["mse"],
                                           "plain_max_rel": pe["max_rel"]})
            results.append(rec)
        if big is not None:
            bref = gather(big_futs, a.big_ref, a.big[1], len(big_cps))
            for rec in big["runs"]:
                xs = rec.pop("_x")
                for i, c in enumerate(big_cps):
                    x = xs.get(c)
                    e = errors(None if x is None else x[:a.big_ref], bref[i, 0], bref[i, 1])
                    rec["checkpoints"].append({"step": c, **e})
    report = {"bench": "gpu", "machine": machine(a.device), "argv": sys.argv[1:] if argv is None else argv,
              "problems": {"batch": a.batch, "n": a.n, "d": a.d, "kappa": KAPPA, "sigma": 1.0, "seed": 0,
                           "eta": str(ETA), "inputs": "bfloat16 values float16 also holds",
                           "entries_flushed_to_zero": flushed},
              "reference": {"digits": 50, "workers": a.workers, "checkpoints": cps},
              "runs": results, "not_run": not_run, "skipped": skipped, "big": big,
              "seconds": time.perf_counter() - t_start}
    path = atomic_write_text(a.out / "gpu.json", json.dumps(report, indent=1))
    plot(report, a.out / "gpu_roundoff.png")
    say(f"wrote {path} and {a.out / 'gpu_roundoff.png'}")
    return 0


def run_big(a, vb: dict, cps: list[int], say, t_start) -> dict:
    """baseconv at --big in float32 and float64 (torch on --device): iterates at the checkpoints."""
    from numerics.backends import Backend
    from numerics.roundoff import build, resolve

    n, d = a.big
    con = build(resolve("baseconv"), n, d, ETA, Fraction(0))
    out = {"arch": "baseconv", "construction": con.name, "n": n, "d": d, "batch": a.big_batch,
           "steps": a.big_steps, "depth": con.depth(a.big_steps), "state": list(con.layout.shape),
           "reference_problems": a.big_ref, "runs": []}
    for dt in ("float32", "float64"):
        if time.perf_counter() - t_start > a.deadline:
            out.setdefault("not_run", []).append({"dtype": dt, "reason": "deadline"})
            continue
        be = Backend("torch", dt, a.device)
        res = run_one(con, vb, a.big_steps, be, cps)
        say(f"baseconv {n}x{d} torch {dt}: {con.depth(a.big_steps)} layers on {a.big_batch} problems: "
            f"{res['seconds']:.2f} s")
        out["runs"].append({"backend": "torch", "device": a.device, "dtype": dt, "seconds": res["seconds"],
                            "first_nonfinite_layer": res["first_nonfinite_layer"], "_x": res["x"],
                            "checkpoints": []})
    return out


def plot(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    archs = list(dict.fromkeys(r["arch"] for r in report["runs"]))
    if not archs:
        return
    fig, axes = plt.subplots(1, len(archs), figsize=(4.2 * len(archs), 3.6), squeeze=False, sharey=True)
    for ax, arch in zip(axes[0], archs):
        for r in report["runs"]:
            if r["arch"] != arch:
                continue
            pts = [(c["layers"], c["mse"]) for c in r["checkpoints"] if c["mse"]]
            if pts:
                ax.loglog(*zip(*pts), marker="o", ls="-" if r["backend"] == "torch" else ":",
                          label=f"{r['backend']} {r['dtype']}")
        ax.set_title(arch)
        ax.set_xlabel("layers")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("MSE against exact GD")
    axes[0][-1].legend(fontsize=7)
    fig.suptitle(f"{report['machine']['card']}: {report['problems']['batch']:,} problems "
                 f"{report['problems']['n']}x{report['problems']['d']}")
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
