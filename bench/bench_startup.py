"""Start-up cost of the CLIs, as ratios against ``python -c "import sympy"`` run in the same session.

    python bench/bench_startup.py [--repeat 5]

Each command runs in a fresh interpreter ``--repeat`` times; the table gives the median wall
time and the median CPU time (user + sys of the child), and each as a ratio to the sympy
baseline (machines here are shared and noisy: compare ratios, not seconds).  It also reports
whether importing ``verify.construct`` and running ``gd --layers 100`` on the numpy backend load
torch or matplotlib (they must not).
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "import sympy (baseline)": [sys.executable, "-c", "import sympy"],
    "import verify.construct": [sys.executable, "-c", "import verify.construct"],
    "verify.construct --help": [sys.executable, "-m", "verify.construct", "--help"],
    "gd --layers 100 (numpy)": [sys.executable, "-m", "verify.construct", "gd", "--layers", "100", "--quiet"],
}

PROBE = ("import sys, io\nfrom verify.construct import main\n"
         "main(['gd', '--layers', '100', '--quiet'], out=io.StringIO())\n"
         "print(' '.join(m for m in ('torch', 'matplotlib', 'hypothesis', 'cupy') if m in sys.modules) or 'none')")


def run(cmd) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5, help="runs per command (median reported; default 5)")
    a = p.parse_args(argv)
    if not 1 <= a.repeat <= 100:
        print("error: --repeat must be in 1..100", file=sys.stderr)
        return 2
    rows = {}
    for name, cmd in COMMANDS.items():
        runs = [run(cmd) for _ in range(a.repeat)]
        rows[name] = (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs))
    base_w, base_c = rows["import sympy (baseline)"]
    print(f"{'command':<28} {'wall s':>8} {'CPU s':>8} {'wall/base':>10} {'CPU/base':>9}")
    for name, (w, c) in rows.items():
        print(f"{name:<28} {w:>8.3f} {c:>8.3f} {w / base_w:>10.2f} {c / base_c:>9.2f}")
    loaded = subprocess.run([sys.executable, "-c", PROBE], check=True, capture_output=True, text=True,
                            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__)))).stdout.strip()
    print(f"heavy modules loaded by gd --layers 100 on numpy: {loaded}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
