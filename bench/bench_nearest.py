"""The nearest construction of a FAILED file (issue 41 item 2, verify/nearest.py): time and what it finds.

    python bench/bench_nearest.py [--size 64x16] [--archs baseconv,baseconv-causal,...] [--sigma 1e-3]
                                  [--eta 1/4] [--json bench/results/nearest/results.json]

For each GD architecture at N x D (depth: one body copy), a "trained-like" file is made from the
construction at ``--eta`` (and lam = 1/16 for the ridge architectures): every entry of every weight moved
by a normal float of standard deviation ``--sigma`` (seed 0; dense float64 weights, every structural zero
nonzero), then, for the BaseConv architectures, every inner channel rescaled by random powers of 2 with
random signs (a symmetry: the same function).  The family is fitted from the command's defaults
(eta = 1/16, lam = 1/4 where ridge: not the file's values) as ``gd --weights`` fits it
(``verify.nearest.gd_nearest``, the snapped construction proved by ``verify.prover.proof.prove`` in
process).  Reported: wall and CPU seconds of the build of the file's construction and of the fit, the
fitted and snapped parameters, the distance after alignment, the snapped verdict.  The machine is shared
(2 cores): the seconds are noisy.
"""
from __future__ import annotations

import json
import resource
import sys
import time
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from polyverify.plumbing.cli import (Parser, UsageError, atomic_write_text, check_range, output_beside,  # noqa: E402
                                     output_file, run_main)

sys.path.insert(0, str(ROOT / "bench"))
from _args import gd_sizes  # noqa: E402

ARCHS = ("baseconv", "baseconv-causal", "lsa", "elsa", "token-lsa", "compiled-baseconv", "compiled-lsa",
         "compiled-elsa", "compiled-baseconv-causal")


def _cpu() -> float:
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def trained_like(layers, sigma: float, rng):
    """Every weight entry + N(0, sigma) (float64); BaseConv channels rescaled by +-2^j (j in -1..1)."""
    from verify.nearest import float_layer

    out = []
    for L in layers:  # a repeated body copy is trained as its own layer
        F = float_layer(L).map(lambda a: a + rng.normal(0.0, sigma, a.shape))
        if F.kind == "baseconv":
            for c in range(F.shape[1]):
                s, t, u = (float(rng.choice([-2, -1, -0.5, 0.5, 1, 2])) for _ in range(3))
                F.W_in[:, c] *= s
                F.b_in[:, c] *= s
                F.h[:, c] *= t
                F.b_conv[:, c] *= s * t
                F.W_gate[:, c] *= u
                F.b_gate[:, c] *= u
                F.W_out[c, :] /= s * t * u
        out.append(F)
    return out


def measure(arch: str, n: int, d: int, sigma: float, eta: Fraction) -> dict:
    import numpy as np

    from constructions.catalogue import gd_architectures
    from verify.nearest import gd_nearest

    e = gd_architectures()[arch]
    lam_file, lam_used = (Fraction(1, 16), Fraction(1, 4)) if e.ridge else (None, None)
    true = e.build(n, d, eta=eta, lam=lam_file) if e.ridge else e.build(n, d, eta=eta)
    learned = trained_like(true.layers(1), sigma, np.random.default_rng(0))
    w0, c0 = time.perf_counter(), _cpu()
    con = e.build(n, d, eta=Fraction(1, 16), lam=lam_used) if e.ridge else e.build(n, d, eta=Fraction(1, 16))
    build_s = time.perf_counter() - w0
    w1 = time.perf_counter()
    r = gd_nearest(con, n, d, 1, Fraction(1, 16), lam_used, learned)
    wall, cpu = time.perf_counter() - w1, _cpu() - c0
    return {"arch": arch, "size": f"{n}x{d}", "sigma": sigma, "file_params": {"eta": str(eta),
            **({"lam": str(lam_file)} if e.ridge else {})}, "build_s": build_s, "fit_wall_s": wall, "cpu_s": cpu,
            "fitted": r.fitted, "rational": {k: str(v) for k, v in r.rational.items()}, "kept": r.kept,
            "distance": r.distance, "spurious": r.spurious, "snapped_verdict": r.snapped_verdict,
            "snapped_distance": r.snapped_distance, "skipped": r.skipped, "summary": r.summary()}


def _check_args(a) -> tuple[int, int, Fraction, list[str]]:
    """N, D, the file's eta and the architectures, each checked (a UsageError naming the flag) before any
    work: N x D within ``gd``'s limits, ``--sigma`` finite and >= 0, ``--eta`` a fraction that every
    architecture named takes (built once at 2 x 1: gd-lsa / gd-elsa need a square), ``--archs`` known."""
    sizes = gd_sizes("--size", a.size)
    if len(sizes) != 1:
        raise UsageError(f"--size takes one N x D size like 64x16, not {a.size!r}")
    (n, d), = sizes
    check_range("--sigma", a.sigma, 0.0)
    try:
        eta = Fraction(a.eta)
    except (ValueError, ZeroDivisionError):
        raise UsageError(f"--eta takes a fraction like 1/4, not {a.eta!r}") from None
    from constructions.catalogue import gd_architectures

    known = gd_architectures()
    archs = a.archs.split(",")
    for arch in archs:
        if arch not in known:
            raise UsageError(f"--archs {arch!r}: not a GD architecture (one of {', '.join(known)})")
        e = known[arch]
        try:
            e.build(2, 1, eta=eta, lam=Fraction(1, 16)) if e.ridge else e.build(2, 1, eta=eta)
        except ValueError as ex:
            raise UsageError(f"--eta {a.eta} for {arch}: {ex}") from None
    return n, d, eta, archs


def _main(argv) -> int:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--size", default="64x16", help="N x D (default 64x16)")
    p.add_argument("--archs", default=",".join(ARCHS), help="GD architectures (default: all)")
    p.add_argument("--sigma", type=float, default=1e-3, help="noise on every entry (default 1e-3)")
    p.add_argument("--eta", default="1/4", help="the file's eta (default 1/4; a square for gd-lsa / gd-elsa)")
    p.add_argument("--json", default=str(ROOT / "bench" / "results" / "nearest" / "results.json"),
                   help="the results as JSON (a .md table beside it)")
    a = p.parse_args(argv)
    # both outputs and every argument checked before any file is made or fitted
    out = output_file("--json", a.json)
    md_path = output_beside("--json (.md beside it)", out, ".md")  # None: --json is a device or FIFO
    n, d, eta, archs = _check_args(a)
    rows = []
    for arch in archs:
        r = measure(arch, n, d, a.sigma, eta)
        rows.append(r)
        print(f"{arch:>26} {r['size']}: build {r['build_s']:.2f} s, fit {r['fit_wall_s']:.2f} s (CPU {r['cpu_s']:.2f} s)"
              f"\n  {r['summary']}; snapped {r['snapped_verdict']}; kept {r['kept'] or '-'}", flush=True)
    atomic_write_text(out, json.dumps({"size": a.size, "sigma": a.sigma, "eta": a.eta, "rows": rows}, indent=1),
                      "--json")
    md = ["| arch | file's parameters | build s | fit s (wall) | fitted | snapped | distance | spurious | snapped verdict |",
          "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        fp = ", ".join(f"{k} = {v}" for k, v in r["file_params"].items())
        fit = ", ".join(f"{k} = {v:.6g}" for k, v in r["fitted"].items()) or "kept (input embedding)"
        md.append(f"| {r['arch']} | {fp} | {r['build_s']:.2f} | {r['fit_wall_s']:.2f} | {fit} | "
                  f"{', '.join(f'{k} = {v}' for k, v in r['rational'].items()) or '-'} | {r['distance']:.3g} | "
                  f"{r['spurious']} | {r['snapped_verdict']} |")
    if md_path is None:
        print(f"written {out} (no .md table: --json is a device or FIFO)")
        return 0
    atomic_write_text(md_path, f"`python bench/bench_nearest.py --size {a.size} --sigma {a.sigma} "
                      f"--eta {a.eta}`\n\n" + "\n".join(md) + "\n", "--json (.md beside it)")
    print(f"written {out} and {md_path}")
    return 0


def main(argv=None) -> int:
    """The command: a bad argument or output path is one ``error:`` line and exit status 2, before any work."""
    return run_main(_main, argv)


if __name__ == "__main__":
    raise SystemExit(main())
