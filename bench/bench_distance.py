"""The functional distance of a FAILED file (issue 41 item 2): time of the whole diagnosis.

    python bench/bench_distance.py [--sizes 64x16,256x64] [--finetuned 20x5] [--batch 256]
                                   [--json bench/results/distance/results.json]

For each size N x D the tampered ``gd-baseconv`` file of ``bench/bench_refute.py`` (depth 4, the first
nonzero entry of the body's first ``W_out`` doubled) and, for each ``--finetuned`` size, its file with
every entry of every tensor moved by a normal float of standard deviation 1e-3 (dense float weights), is
loaded as ``gd --weights`` loads it and the whole distance diagnosis is timed,
``verify.functional_distance.for_gd`` (the sampled distance on ``--batch`` problems of seed 0 in
float64, then the certified bound: the exact polynomials in a child under its limits, or the line
saying which limit skipped it).  Reported: wall seconds, CPU seconds (user + sys of this process and of
the reaped child), the sampled max and rms, the certified bound or why it was skipped.  The machine is
shared (2 cores): the seconds are noisy.
"""
from __future__ import annotations

import json
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from polyverify.plumbing.cli import (Parser, atomic_write_text, check_range, output_beside,  # noqa: E402
                                     output_file, run_main)
from _args import gd_sizes  # noqa: E402


def _cpu() -> float:
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def measure(n: int, d: int, folder: Path, batch: int, finetuned: bool) -> dict:
    from bench_refute import tampered_file

    from constructions.gd_baseconv import gd_baseconv
    from constructions.weights_io import load
    from verify.functional_distance import for_gd

    path = tampered_file(n, d, folder, finetuned=finetuned)
    con = gd_baseconv(n, d)
    lw = load(path, spec=con)
    w0, c0 = time.perf_counter(), _cpu()
    fd = for_gd(con, 1, lw.layers, batch=batch, seed=0, kappa=5.0)
    wall, cpu = time.perf_counter() - w0, _cpu() - c0
    rep = fd.to_json()
    return {"size": f"{n}x{d}", "file": "finetuned (every entry + N(0, 1e-3))" if finetuned else
            "tampered (one W_out entry doubled)", "wall_s": wall, "cpu_s": cpu, "line": fd.line(),
            "sampled_max_abs": rep.get("sampled_max_abs"), "sampled_rms": rep.get("sampled_rms"),
            "certified_bound": rep.get("certified_bound"), "certified_skipped": rep.get("certified_skipped"),
            "certified_seconds": rep.get("certified_seconds"), "certified_terms": rep.get("certified_difference_terms")}


def _main(argv) -> int:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="64x16,256x64", help="N x D of the tampered files (default 64x16,256x64)")
    p.add_argument("--finetuned", default="20x5", help="N x D of the dense fine-tuned files (default 20x5; '' none)")
    p.add_argument("--batch", type=int, default=256, help="sampled problems (default 256, as gd's --batch)")
    p.add_argument("--json", default=str(ROOT / "bench" / "results" / "distance" / "results.json"),
                   help="the results as JSON (a .md table beside it)")
    a = p.parse_args(argv)
    # every argument and both outputs checked before any file is made or timed
    sizes = ((False, gd_sizes("--sizes", a.sizes)), (True, gd_sizes("--finetuned", a.finetuned)))
    from verify.gd_cmd import GD_LIMITS

    check_range("--batch", a.batch, 1, GD_LIMITS["--batch"])
    out = output_file("--json", a.json)
    md_path = output_beside("--json (.md beside it)", out, ".md")  # None: --json is a device or FIFO
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for finetuned, pairs in sizes:
            for n, d in pairs:
                r = measure(n, d, Path(tmp), a.batch, finetuned)
                rows.append(r)
                print(f"{r['size']:>8} {r['file']}: wall {r['wall_s']:.2f} s, CPU {r['cpu_s']:.2f} s\n  {r['line']}",
                      flush=True)
    atomic_write_text(out, json.dumps({"batch": a.batch, "rows": rows}, indent=1), "--json")
    md = ["| size | file | wall s | CPU s | sampled max | sampled rms | certified bound (box abs <= 1) |",
          "|---|---|---|---|---|---|---|"]
    for r in rows:
        cert = (f"{r['certified_bound']:.3e} ({r['certified_terms']} terms, {r['certified_seconds']:.2f} s)"
                if r["certified_bound"] is not None else f"skipped: {r['certified_skipped']}")
        md.append(f"| {r['size']} | {r['file']} | {r['wall_s']:.2f} | {r['cpu_s']:.2f} | {r['sampled_max_abs']:.3e} | "
                  f"{r['sampled_rms']:.3e} | {cert} |")
    if md_path is None:
        print(f"written {out} (no .md table: --json is a device or FIFO)")
        return 0
    atomic_write_text(md_path, f"`python bench/bench_distance.py --batch {a.batch}`\n\n" + "\n".join(md) + "\n",
                      "--json (.md beside it)")
    print(f"written {out} and {md_path}")
    return 0


def main(argv=None) -> int:
    """The command: a bad argument or output path is one ``error:`` line and exit status 2, before any work."""
    return run_main(_main, argv)


if __name__ == "__main__":
    raise SystemExit(main())
