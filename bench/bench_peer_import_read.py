"""The read of a learned zoology / icl-gd checkpoint (issue 41): ``verify.importers.<fmt>.read`` alone, in a fresh
interpreter per run, CPU seconds (user + sys of that process, after its imports) and peak RSS (``ru_maxrss``).

    python bench/bench_peer_import_read.py [--sizes zoology:512x128x4,icl-gd:129x4x4] [--tree DIR]...
        [--runs 2] [--json bench/results/import_trained/peer_read.json]

Files (random normal float32 entries, every entry a dense float: a trained file's shape, not its values):

* ``zoology:TxCxL``: L BaseConv mixers of zoology's ``LanguageModel`` (projection C x C with bias, a long filter
  C x T: ``conv.filter``), ``tokens = T`` in the safetensors metadata;
* ``icl-gd:DxHxL``: L per-layer attention modules of von Oswald et al.'s trained ``transformer`` (query, key,
  value D x HD, linear HD x D), ``num_heads = H``, an ``.npz``.

Each ``--tree`` (a source tree: this one by default; another, e.g. ``git archive C | tar -x -C DIR``, for the
code before a change) reads each file ``--runs`` times, alternating the trees; every read's exact values are
hashed, and the hashes must agree across trees (else the script exits 1).  The machine is shared: CPU seconds
are the figure to compare, wall seconds are noisy.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))
from polyverify.plumbing.cli import Parser, UsageError, atomic_write_text, output_file, run_main  # noqa: E402

CHILD = r"""
import hashlib, json, resource, sys, time
from fractions import Fraction
import numpy as np
fmt, path, cfg = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
try:  # the readers' own imports before the clock (safetensors reads through torch where it is installed)
    import torch  # noqa: F401
except ImportError:
    pass
import flint, safetensors.numpy  # noqa: F401,E401
from verify.importers import FORMATS
mod = FORMATS[fmt]
r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
imp = mod.read(path, cfg)
r1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
h = hashlib.sha256()
def arrays(L):
    if L.kind == "baseconv":
        return [getattr(L, n) for n in ("W_in", "b_in", "h", "b_conv", "W_gate", "b_gate", "W_out", "b_out")]
    return [a for hd in L.heads for a in (hd.P, hd.Q)]
for L in imp.layers:
    for a in arrays(L):
        for x in np.asarray(a).ravel().tolist():
            q = Fraction(x)
            h.update(f"{q.numerator}/{q.denominator},".encode())
print(json.dumps({"cpu_s": r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime, "wall_s": t1 - t0,
                  "peak_rss_mib": r1.ru_maxrss / 1024, "values_sha256": h.hexdigest()[:16]}))
"""


def parse_size(s: str) -> tuple[str, tuple[int, ...]] | None:
    """``("zoology", (T, C, L))`` / ``("icl-gd", (D, H, L))`` of ``FMT:AxBxC`` (each in 1..4096), else None."""
    fmt, _, dims = s.partition(":")
    try:
        n = tuple(int(x) for x in dims.split("x"))
    except ValueError:
        return None
    if fmt not in ("zoology", "icl-gd") or len(n) != 3 or not all(1 <= x <= 4096 for x in n):
        return None
    return fmt, n


def make(folder: Path, fmt: str, n: tuple[int, ...]) -> tuple[Path, dict, int]:
    rng = np.random.default_rng(0)
    if fmt == "zoology":
        from safetensors.numpy import save_file

        T, C, L = n
        t = {}
        for i in range(L):
            pre = f"backbone.layers.{i}.sequence_mixer."
            t[pre + "projection.weight"] = rng.standard_normal((C, C)).astype(np.float32)
            t[pre + "projection.bias"] = rng.standard_normal(C).astype(np.float32)
            t[pre + "conv.filter"] = rng.standard_normal((C, T)).astype(np.float32)
        path = folder / f"zoology_{T}x{C}x{L}.safetensors"
        save_file(t, str(path), metadata={"config": json.dumps({"tokens": T})})
        return path, {}, sum(a.size for a in t.values())
    D, H, L = n
    t = {}
    for i in range(L):
        pre = f"transformer/~trans_block/layer_{i}/"
        for name, shape in (("query", (D, H * D)), ("key", (D, H * D)), ("value", (D, H * D)), ("linear", (H * D, D))):
            t[f"{pre}{name}/w"] = (rng.standard_normal(shape) / np.sqrt(D)).astype(np.float32)
    path = folder / f"icl_gd_{D}x{H}x{L}.npz"
    np.savez(path, **t)
    return path, {"num_heads": H}, sum(a.size for a in t.values())


def run_one(tree: Path, fmt: str, path: Path, cfg: dict) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree), "OPENBLAS_NUM_THREADS": "1"}
    p = subprocess.run([sys.executable, "-c", CHILD, fmt, str(path), json.dumps(cfg)], cwd=tree, env=env,
                       capture_output=True, text=True, timeout=3600)
    if p.returncode:
        raise RuntimeError(f"the read in {tree} failed: {p.stderr.strip()[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def _main(argv) -> int:
    ap = Parser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="zoology:512x128x4,icl-gd:129x4x4")
    ap.add_argument("--tree", action="append", default=None, help="a source tree to read with (repeatable)")
    ap.add_argument("--runs", default="2")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    # every argument and the output path checked before any file is made or read
    if not a.runs.isdigit() or not 1 <= int(a.runs) <= 20:
        raise UsageError(f"--runs is an integer 1..20, not {a.runs!r}")
    a.runs = int(a.runs)
    sizes = [parse_size(s) for s in a.sizes.split(",")]
    if not sizes or None in sizes:
        raise UsageError(f"--sizes takes zoology:TxCxL and icl-gd:DxHxL (each 1..4096), comma-separated, not "
                         f"{a.sizes!r}")
    trees = [Path(t).resolve() for t in (a.tree or [str(ROOT)])]
    for t in trees:
        if not (t / "verify" / "importers" / "zoology.py").is_file():
            raise UsageError(f"--tree {t}: not a polyverify source tree")
    output_file("--json", a.json)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for fmt, n in sizes:
            path, cfg, entries = make(Path(tmp), fmt, n)
            for r in range(a.runs):
                for tree in (trees if r % 2 == 0 else trees[::-1]):
                    res = run_one(tree, fmt, path, cfg)
                    row = {"format": fmt, "size": "x".join(map(str, n)), "entries": entries, "tree": str(tree),
                           "run": r, **res}
                    rows.append(row)
                    print(f"{fmt} {row['size']} ({entries} entries) {tree}: {res['cpu_s']:.2f} s CPU, "
                          f"{res['wall_s']:.2f} s wall, peak {res['peak_rss_mib']:.0f} MiB, values "
                          f"{res['values_sha256']}", flush=True)
    bad = [k for k in {(r["format"], r["size"]) for r in rows}
           if len({r["values_sha256"] for r in rows if (r["format"], r["size"]) == k}) != 1]
    out = {"command": " ".join([Path(sys.argv[0]).name] + (argv if argv is not None else sys.argv[1:])),
           "load_average": os.getloadavg(), "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                    text=True).stdout.strip(), "rows": rows, "values_agree": not bad}
    if a.json:
        atomic_write_text(a.json, json.dumps(out, indent=1) + "\n", "--json")
    if bad:
        print(f"error: the exact values differ between trees for {bad}", file=sys.stderr)
        return 1
    return 0


def main(argv=None) -> int:
    """The command: a bad argument or output path is one ``error:`` line and exit status 2, before any work."""
    return run_main(_main, argv)


if __name__ == "__main__":
    sys.exit(main())
