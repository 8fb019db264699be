"""Start-up cost of ``python -m verify.construct``: --help and argument errors against ``python -c
"import sympy"``, measured in the same session.

    python bench/bench_startup.py [--repeat 7] [--json FILE]

Each command runs in a fresh interpreter, ``--repeat`` times, in rounds (every command once per
round, the sympy baseline included, so that the machine's drift hits all of them alike); the
table gives the median wall time and the median CPU time (user + sys of the child) and each as a
ratio to the baseline's median (machines here are shared and noisy: compare ratios, not
seconds).  The target: ``--help`` and every argument error at most 0.5x the baseline's
CPU, with none of networkx, mpmath, flint or torch loaded.  For each command it also reports the
modules Python imported (``python -X importtime``: how many, and which heavy ones), the exit
status (0 for help, 2 for an argument error: checked), and whether a real ``gd --layers 100``
run on the numpy backend loads torch or matplotlib (it must not).
"""
from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))
from polyverify.plumbing.cli import Parser, UsageError, atomic_write_text, run_main  # noqa: E402 (one-line errors, exit 2)
CONSTRUCT = [sys.executable, "-m", "verify.construct"]
BASELINE = "import sympy (baseline)"
#: modules none of the light commands may load (numpy and sympy reported too)
HEAVY = ("networkx", "mpmath", "flint", "torch", "sympy", "numpy", "matplotlib", "scipy")

#: name -> (argv, expected exit status, light: held to the target)
COMMANDS = {
    BASELINE: ([sys.executable, "-c", "import sympy"], 0, False),
    "verify.construct --help": (CONSTRUCT + ["--help"], 0, True),
    "gd --help": (CONSTRUCT + ["gd", "--help"], 0, True),
    "s000-read --help (a catalogue entry)": (CONSTRUCT + ["s000-read", "--help"], 0, True),
    "--list": (CONSTRUCT + ["--list"], 0, True),
    "error: unknown command": (CONSTRUCT + ["gdd"], 2, True),
    "error: gd --arch unknown": (CONSTRUCT + ["gd", "--layers", "4", "--arch", "nope"], 2, True),
    "error: gd --layers not realisable": (CONSTRUCT + ["gd", "--layers", "5"], 2, True),
    "error: gd --layers missing": (CONSTRUCT + ["gd"], 2, True),
    "error: gd --n out of range": (CONSTRUCT + ["gd", "--layers", "4", "--n", "100000"], 2, True),
    "error: gd --eta not a rational": (CONSTRUCT + ["gd", "--layers", "4", "--eta", "x"], 2, True),
    "error: gd --lam without ridge": (CONSTRUCT + ["gd", "--layers", "4", "--lam", "1"], 2, True),
    "error: gd --dtype unknown": (CONSTRUCT + ["gd", "--layers", "4", "--dtype", "float8"], 2, True),
    "error: gd --check unknown": (CONSTRUCT + ["gd", "--layers", "4", "--check", "maybe"], 2, True),
    "error: gd --conv fft on lsa": (CONSTRUCT + ["gd", "--layers", "4", "--arch", "lsa", "--conv", "fft"], 2, True),
    "error: gd memory estimate": (CONSTRUCT + ["gd", "--layers", "4", "--batch", "1000000", "--n", "1000", "--d",
                                              "1"], 2, True),
    "error: NAME --set unknown size": (CONSTRUCT + ["s000-read", "--set", "q=1"], 2, True),
    "circuit --help": (CONSTRUCT + ["circuit", "--help"], 0, True),
    "error: circuit --graph missing": (CONSTRUCT + ["circuit"], 2, True),
    "error: circuit --graph not found": (CONSTRUCT + ["circuit", "--graph", "/nonexistent/c.json"], 2, True),
    "error: circuit --target unknown": (CONSTRUCT + ["circuit", "--graph", "c.json", "--target", "nope"], 2, True),
    "error: circuit --heads 0": (CONSTRUCT + ["circuit", "--graph", "c.json", "--heads", "0"], 2, True),
    "error: circuit --channels on lsa": (CONSTRUCT + ["circuit", "--graph", "c.json", "--target", "lsa",
                                                     "--channels", "8"], 2, True),
    "import verify.construct": ([sys.executable, "-c", "import verify.construct"], 0, True),
    "gd --layers 100 (numpy; real work)": (CONSTRUCT + ["gd", "--layers", "100", "--quiet"], 0, False),
}

PROBE = ("import sys, io\nfrom verify.construct import main\n"
         "main(['gd', '--layers', '100', '--quiet'], out=io.StringIO())\n"
         "print(' '.join(m for m in ('torch', 'matplotlib', 'hypothesis', 'cupy') if m in sys.modules) or 'none')")



def run(cmd: list[str]) -> tuple[float, float, int]:
    """(wall s, CPU s of the child, exit status)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), p.returncode


def imported(cmd: list[str]) -> list[str]:
    """The modules ``cmd`` imports (``python -X importtime``'s stderr)."""
    full = [cmd[0], "-X", "importtime", *cmd[1:]]
    err = subprocess.run(full, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT).stderr
    out = []
    for line in err.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            name = line.rsplit("|", 1)[1].strip()
            if name != "package":  # the header line
                out.append(name)
    return out



def main(argv=None) -> int:
    return run_main(_main, argv)  # a UsageError: one line, exit 2; Ctrl-C: "interrupted", 130


def _main(argv=None) -> int:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=7, help="runs per command, in rounds (median reported; default 7)")
    p.add_argument("--json", help="write every measurement to this JSON file")
    p.add_argument("--only-light", action="store_true", help="skip the real gd run (a quick check)")
    a = p.parse_args(argv)
    if not 1 <= a.repeat <= 100:
        raise UsageError("--repeat must be in 1..100")
    if a.json is not None and (Path(a.json).is_dir() or not Path(a.json).resolve().parent.is_dir()):
        raise UsageError(f"--json {a.json}: not a file in an existing folder")
    names = [n for n in COMMANDS if not (a.only_light and n.startswith("gd --layers 100"))]
    runs: dict[str, list] = {n: [] for n in names}
    for _ in range(a.repeat):
        for n in names:
            runs[n].append(run(COMMANDS[n][0]))
    load = os.getloadavg()
    rows = {}
    for n in names:
        cmd, want_rc, light = COMMANDS[n]
        mods = imported(cmd)
        rows[n] = {"wall": statistics.median(r[0] for r in runs[n]), "cpu": statistics.median(r[1] for r in runs[n]),
                   "exit": sorted({r[2] for r in runs[n]}), "expected_exit": want_rc, "light": light,
                   "modules": len(mods), "heavy": [m for m in HEAVY if m in mods]}
    base = rows[BASELINE]
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {load[0]:.2f}; {a.repeat} rounds; "
          f"medians")
    print(f"{'command':<40} {'wall s':>7} {'CPU s':>7} {'CPU/base':>9} {'exit':>5} {'modules':>8}  heavy modules")
    ok = True
    for n, r in rows.items():
        r["cpu_ratio"], r["wall_ratio"] = r["cpu"] / base["cpu"], r["wall"] / base["wall"]
        bad_exit = r["exit"] != [r["expected_exit"]]
        r["meets_target"] = (r["cpu_ratio"] <= 0.5 and not [m for m in r["heavy"] if m in HEAVY[:4]]
                             and not bad_exit) if r["light"] else None
        ok &= r["meets_target"] is not False
        mark = {True: "", False: "  <- misses the target", None: ""}[r["meets_target"]]
        print(f"{n:<40} {r['wall']:>7.3f} {r['cpu']:>7.3f} {r['cpu_ratio']:>9.2f} {','.join(map(str, r['exit'])):>5} "
              f"{r['modules']:>8}  {' '.join(r['heavy']) or '-'}{mark}")
    light = [r for r in rows.values() if r["light"]]
    worst = max(light, key=lambda r: r["cpu_ratio"])
    print(f"light commands (help, --list, argument errors, the import): worst CPU/base "
          f"{worst['cpu_ratio']:.2f} (target <= 0.5); {'all meet it' if ok else 'NOT all meet it'}")
    res = {"load_average": load[0], "repeat": a.repeat, "rows": rows, "all_light_meet_target": ok}
    if not a.only_light:
        loaded = subprocess.run([sys.executable, "-c", PROBE], check=True, capture_output=True, text=True,
                                cwd=ROOT).stdout.strip()
        print(f"heavy modules loaded by gd --layers 100 on numpy: {loaded}")
        res["gd_run_loads"] = loaded
    if a.json:
        atomic_write_text(a.json, json.dumps(res, indent=1), "--json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
