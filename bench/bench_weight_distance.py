"""The weight distance of a learned-like file (issue 41: a FAILED file's distance in its verdict line) before
and after a change, in one process: gd-baseconv at N x D, k = 2, every entry of every layer moved by Gaussian
noise (sigma 1e-3) and handed over as Fractions of the floats (as the loader does).

    python bench/bench_weight_distance.py --before-commit C [--sizes 64x16,256x64] [--json OUT]

``--before-commit C``: ``verify/weight_distance.py`` as at commit ``C`` (``git show``), loaded beside the
working tree's; each size runs new, old, new (CPU seconds: ``time.process_time``; wall beside it) and checks
that both give the same line.
"""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from polyverify.plumbing.cli import Parser, UsageError, atomic_write_text, output_file, run_main  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from _args import gd_sizes  # noqa: E402

#: the file ``--before-commit`` reads (``git show``)
BEFORE_FILE = "verify/weight_distance.py"


def _old_module(commit: str):
    src = subprocess.run(["git", "show", f"{commit}:{BEFORE_FILE}"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    with tempfile.TemporaryDirectory() as tmp:  # the module is compiled when loaded: its file is not kept
        path = Path(tmp) / "weight_distance_before.py"
        path.write_text(src)
        spec = importlib.util.spec_from_file_location("weight_distance_before", path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
    return mod


def _learned(ref, seed: int = 0):
    rng = np.random.default_rng(seed)

    def noisy(w):
        a = np.asarray(w.toarray() if hasattr(w, "toarray") else w, dtype=object)
        f = np.array([float(x) for x in a.flat]).reshape(a.shape) + rng.normal(0, 1e-3, a.shape)
        return np.array([Fraction(x) for x in f.flat], dtype=object).reshape(a.shape)

    return [L.map(noisy) for L in ref]


def measure(size: str, n: int, d: int, new, old) -> dict:
    """One size: new, old, new on the same learned-like layers; the row printed and written."""
    from constructions.gd_baseconv import gd_baseconv

    ref = gd_baseconv(n, d).layers(2)
    learned = _learned(ref)
    times, lines = {}, {}
    for name, fn in (("after", new), ("before", old), ("after", new)):
        t0, c0 = time.perf_counter(), time.process_time()
        lines[name] = fn(ref, learned).line("gd-baseconv")
        times.setdefault(name, []).append((time.perf_counter() - t0, time.process_time() - c0))
    if lines["after"] != lines["before"]:
        raise SystemExit(f"{size}: the two differ:\n{lines['before']}\n{lines['after']}")
    b, af = times["before"][0], min(times["after"], key=lambda x: x[1])
    return {"size": size, "before_cpu_s": round(b[1], 3), "before_wall_s": round(b[0], 3),
            "after_cpu_s": round(af[1], 3), "after_wall_s": round(af[0], 3), "ratio_cpu": round(b[1] / af[1], 1),
            "line": lines["after"]}


def _check_commit(commit: str) -> None:
    """``commit`` holds the file :func:`_old_module` reads, or a UsageError naming ``--before-commit``."""
    if commit.startswith("-") or subprocess.run(["git", "cat-file", "-e", f"{commit}:{BEFORE_FILE}"], cwd=ROOT,
                                                capture_output=True).returncode != 0:
        raise UsageError(f"--before-commit {commit}: no {BEFORE_FILE} at that commit in {ROOT}")


def _main(argv) -> int:
    p = Parser(description=__doc__.split("\n\n")[0])
    p.add_argument("--before-commit", required=True)
    p.add_argument("--sizes", default="64x16,256x64")
    p.add_argument("--json")
    a = p.parse_args(argv)
    # every argument and the output checked before any module is loaded or timed
    sizes = [(f"{n}x{d}", n, d) for n, d in gd_sizes("--sizes", a.sizes)]
    if not sizes:
        raise UsageError("--sizes names no N x D size")
    _check_commit(a.before_commit)
    out = output_file("--json", a.json)
    from verify.weight_distance import weight_distance as new

    old = _old_module(a.before_commit).weight_distance
    rows = []
    for size, n, d in sizes:
        row = measure(size, n, d, new, old)
        print(json.dumps(row))
        rows.append(row)
    if out is not None:
        atomic_write_text(out, json.dumps({"command": "python bench/bench_weight_distance.py "
                                           + " ".join(argv if argv is not None else sys.argv[1:]),
                                           "rows": rows}, indent=1) + "\n", "--json")
    return 0


def main(argv=None) -> int:
    """The command: a bad argument or output path is one ``error:`` line and exit status 2, before any work."""
    return run_main(_main, argv)


if __name__ == "__main__":
    sys.exit(main())
