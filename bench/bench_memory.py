"""Peak memory of ``gd --layers L`` against depth: is it flat?

    python bench/bench_memory.py [--depths 100,1000,3001] [--repeat 1] [--check] [--quick]

Each ``python -m verify.construct gd --layers L --quiet`` runs in a fresh interpreter (``--repeat``
times, median reported); its own peak resident set size (``ru_maxrss`` of that child, from
``os.wait4``), its wall time and its CPU time (user + sys of the child) are reported.  The ratio
is peak RSS at the deepest depth over the shallowest (target <= 1.10: memory flat in depth), and
the growth per GD step is (RSS deepest - RSS shallowest) / (steps deepest - steps shallowest).
Machines here are shared and noisy: the RSS is stable, the seconds are not.  ``--check`` exits 1
when the ratio misses the target; ``--quick`` (a smoke run, as ``bench/performance.py --quick``
calls it) measures depths 100 and 1000 only.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from polyverify.plumbing.cli import Parser, UsageError, check_range, run_main  # noqa: E402

TARGET = 1.10


def gd_command(layers: int) -> list[str]:
    return [sys.executable, "-m", "verify.construct", "gd", "--layers", str(layers), "--quiet"]


def run(cmd) -> tuple[float, float, float]:
    """(peak RSS in KiB, wall s, CPU s) of one child process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    err = proc.stderr.read()
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    proc.stderr.close()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[1:])} exited {proc.returncode}: {err.decode()[-2000:]}")
    return float(ru.ru_maxrss), wall, ru.ru_utime + ru.ru_stime  # ru_maxrss is KiB on Linux


def _depths(text: str) -> list[int]:
    """The ``--depths``: at least two distinct depths of the form 1 + 3k (k >= 1) for baseconv, each within
    ``gd``'s ``--layers`` limit (``GD_LIMITS``); else a UsageError naming the flag and the value."""
    from verify.gd_cmd import GD_LIMITS

    try:
        depths = sorted({int(x) for x in text.split(",")})
    except ValueError:
        raise UsageError(f"--depths {text!r}: comma-separated integers") from None
    if len(depths) < 2 or depths[0] < 4 or any((L - 1) % 3 for L in depths):
        raise UsageError(f"--depths {text!r}: needs at least two depths of the form 1 + 3k (k >= 1) for baseconv")
    check_range("--depths", depths[-1], 4, GD_LIMITS["--layers"])
    return depths


def _main(argv) -> int:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--depths", default="100,1000,3001", help="comma-separated --layers (default 100,1000,3001)")
    p.add_argument("--repeat", type=int, default=1, help="runs per depth (median reported; default 1)")
    p.add_argument("--check", action="store_true", help=f"exit 1 if the ratio exceeds {TARGET}")
    p.add_argument("--quick", action="store_true", help="a smoke run: --depths 100,1000")
    a = p.parse_args(argv)
    if a.quick:
        a.depths = "100,1000"
    check_range("--repeat", a.repeat, 1, 100)
    depths = _depths(a.depths)
    rows = {}
    for L in depths:
        runs = [run(gd_command(L)) for _ in range(a.repeat)]
        rows[L] = tuple(statistics.median(r[i] for r in runs) for i in range(3))
    lo, hi = depths[0], depths[-1]
    print(f"{'command':<24} {'steps':>6} {'peak RSS MiB':>13} {'vs L=' + str(lo):>9} {'wall s':>8} {'CPU s':>8}")
    for L, (rss, wall, cpu) in rows.items():
        print(f"{'gd --layers ' + str(L):<24} {(L - 1) // 3:>6} {rss / 1024:>13.1f} {rss / rows[lo][0]:>9.3f} "
              f"{wall:>8.2f} {cpu:>8.2f}")
    ratio = rows[hi][0] / rows[lo][0]
    per_step = (rows[hi][0] - rows[lo][0]) / ((hi - lo) // 3)
    ok = ratio <= TARGET
    print(f"peak RSS depth {hi} / depth {lo}: {ratio:.3f} (target <= {TARGET:.2f}: {'met' if ok else 'NOT met'}); "
          f"growth {per_step:.1f} KiB per GD step")
    return 1 if a.check and not ok else 0


def main(argv=None) -> int:
    """The command: a bad argument is one ``error:`` line and exit status 2, before any child runs."""
    return run_main(_main, argv)


if __name__ == "__main__":
    sys.exit(main())
