"""Proof cost at research sizes: every GD architecture, both exact backends, as ratios.

    python bench/bench_proof.py [--sizes 20x5,64x16[,128x32]] [--archs baseconv,lsa] [--timeout 300]
                                [--catalogue] [--no-randomized] [--md docs/performance.md]

Each proof runs in its own subprocess (CPU time = user + sys of that process, from
``time.process_time``, a nanosecond clock: ``getrusage`` counts in scheduler ticks, coarse for
a 0.02 s proof; wall time beside it; a time limit per proof), so one slow cell cannot stall the
table.  Reported:

* per architecture and size: CPU and wall seconds of ``verify.prover.proof.prove`` (the median of up to
  5 runs in one process, repeated while they total under 2 s of wall time) with the flint
  backend (the default) and, where it finishes within the limit, the sympy backend;
* the ratio of each size's flint proof to the smallest size's (target: N=64, D=16 at most
  20x N=20, D=5, goal 10x, and at most 10 s; N=128, D=32 within 60 s), beside the ratio of the
  state's entries (what "linear in the number of state entries" means for that architecture);
  and, for N up to ``--paired-up-to``, the same ratio measured *paired*: both sizes in one
  process, in rounds of (small, big, small), each round's big proof over the mean of the two
  small ones around it; the median over up to 9 rounds, with the range.  Separate processes
  run minutes apart see different machines (shared cores, other jobs); a round sees one;
* the peak resident memory of each flint proof's process (construction, imports and the proof;
  ``ru_maxrss``);
* which ring proved it: ``grouped`` (``verify/prover/token_groups.py``: one generator per slot, used
  where every monomial provably draws from one token) or ``full``; and, for N up to
  ``--full-up-to``, the same proof with the grouped substitution switched off (the full ring:
  the baseline of this change, in the same run);
* ``--catalogue``: every catalogue entry proved in one process per backend (the catalogue's
  proofs must get no slower with flint);
* the randomized check (``--check random``, ``verify/prover/randomized.py``: a Schwartz-Zippel identity
  test modulo a random 61-bit prime) at every size, measured like the proof (its own process,
  the median of up to 5 runs, each with its own seed), beside the exact proof: CPU and wall
  seconds, the exact proof's CPU over the check's, the error bound each run stated, and both
  peak RSS (``--no-randomized`` leaves it out).

The machine (cores, load average) is printed with the table; compare ratios, not seconds.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))
from polyverify.plumbing.cli import Parser, UsageError, atomic_write_text, run_main  # noqa: E402 (one-line errors, exit 2)

CHILD = r"""
import json, resource, sys, time
_soft = resource.getrlimit(resource.RLIMIT_AS)[0]  # never above the limit this process was given
_cap = {cap} if _soft == resource.RLIM_INFINITY else min({cap}, _soft)
resource.setrlimit(resource.RLIMIT_AS, (_cap, _cap))  # a proof beyond the cap fails, the machine lives
sys.path.insert(0, {root!r})
from constructions.catalogue import gd_architectures
from verify.prover.proof import prove
arch, n, d, backend, full = {arch!r}, {n}, {d}, {backend!r}, {full!r}
con = gd_architectures()[arch].build(n, d)
if full:
    con.token_groups = ()  # every variable its own generator (the grouped substitution off)
prove(gd_architectures()[arch].build(1, 1), backend=backend)  # imports and first-call set-up
cpus, walls = [], []
while True:  # a short proof is repeated (the median is reported): one run of 0.02 s is mostly noise
    c0, w0 = time.process_time(), time.perf_counter()  # process CPU time (user + sys), ns clock
    res = prove(con, backend=backend)
    c1, w1 = time.process_time(), time.perf_counter()
    cpus.append(c1 - c0)
    walls.append(w1 - w0)
    if len(cpus) >= 5 or sum(walls) > 2.0:
        break
med = sorted(range(len(cpus)), key=cpus.__getitem__)[len(cpus) // 2]
print(json.dumps({{"ok": res.ok, "cpu": cpus[med], "wall": walls[med], "runs": len(cpus),
                  "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "entries": res.entries_checked, "ring": res.ring}}))
"""

PAIRED = r"""
import json, statistics, sys, time
sys.path.insert(0, {root!r})
from constructions.catalogue import gd_architectures
from verify.prover.proof import prove
build = gd_architectures()[{arch!r}].build
small, big = build({n0}, {d0}), build({n}, {d})
prove(small); prove(big)  # imports and first-call set-up
ratios, stop = [], time.perf_counter() + {budget}
while len(ratios) < 9 and (len(ratios) < 3 or time.perf_counter() < stop):
    # one round: small, big, small; the big proof against the mean of the two around it, so
    # that the machine's drift (other jobs, frequency) hits both sides of each ratio alike
    c0 = time.process_time(); prove(small); c1 = time.process_time(); prove(big)
    c2 = time.process_time(); prove(small); c3 = time.process_time()
    ratios.append((c2 - c1) / (((c1 - c0) + (c3 - c2)) / 2))
print(json.dumps({{"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios),
                  "rounds": len(ratios)}}))
"""

RANDOM = r"""
import json, resource, sys, time
_soft = resource.getrlimit(resource.RLIMIT_AS)[0]
_cap = {cap} if _soft == resource.RLIM_INFINITY else min({cap}, _soft)
resource.setrlimit(resource.RLIMIT_AS, (_cap, _cap))
sys.path.insert(0, {root!r})
from constructions.catalogue import gd_architectures
from verify.prover.randomized import check
arch, n, d = {arch!r}, {n}, {d}
con = gd_architectures()[arch].build(n, d)
check(gd_architectures()[arch].build(1, 1), seed=0)  # imports and first-call set-up
cpus, walls, bounds = [], [], set()
while True:  # as the proof's child: the median of up to 5 runs, each at its own seed
    c0, w0 = time.process_time(), time.perf_counter()
    res = check(con, seed=len(cpus))
    c1, w1 = time.process_time(), time.perf_counter()
    cpus.append(c1 - c0)
    walls.append(w1 - w0)
    bounds.add(res.error_bound_text)
    if not res.ok or len(cpus) >= 5 or sum(walls) > 2.0:
        break
med = sorted(range(len(cpus)), key=cpus.__getitem__)[len(cpus) // 2]
print(json.dumps({{"ok": res.ok, "cpu": cpus[med], "wall": walls[med], "runs": len(cpus),
                  "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "entries": res.entries_checked, "bound": max(bounds, key=float)}}))
"""

CATALOGUE = r"""
import json, resource, sys, time
sys.path.insert(0, {root!r})
import verify.prover.proof as P
from constructions.catalogue import entries
from constructions.base import Construction
backend = {backend!r}
items = [(name, e.build(**e.sizes)) for name, e in sorted(entries().items())]
cons = [(name, obj) for name, obj in items if isinstance(obj, Construction)]
P.prove(cons[0][1], backend=backend)
r0, w0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
ok = all(P.prove(obj, backend=backend).ok for _, obj in cons)
r1, w1 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
print(json.dumps({{"ok": ok, "n": len(cons), "cpu": (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime),
                  "wall": w1 - w0}}))
"""


def address_space_cap(gib: float) -> tuple[int, str | None]:
    """The address-space cap (bytes) of each proof's process for ``--memory-gib gib``: ``gib``, or the
    limit this process was given (RLIMIT_AS; its soft limit, at most the hard one) where that is lower
    -- a process may lower its limits, never raise one above what it was given (``prlimit --as=10G``
    on a CI runner) -- and then one line saying so."""
    import resource

    want, soft = int(gib * 2**30), resource.getrlimit(resource.RLIMIT_AS)[0]
    if soft == resource.RLIM_INFINITY or soft >= want:
        return want, None
    return soft, (f"note: the address-space limit this bench was given ({soft / 2**30:.2f} GiB, ulimit -v / "
                  f"prlimit --as) is below --memory-gib {gib:g}: each proof runs under {soft / 2**30:.2f} GiB, "
                  f"and one that needs more is reported as out of memory")


def run_child(code: str, timeout: float) -> dict:
    try:
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                           cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"timeout": timeout}
    if p.returncode != 0:
        err = p.stderr.strip().splitlines()
        if any("allocate memory" in line or "MemoryError" in line for line in err) or p.returncode == -6:
            return {"error": "out of memory (the --memory-gib cap; FLINT aborts on a failed allocation)"}
        return {"error": (err or ["exit %d" % p.returncode])[-1]}
    return json.loads(p.stdout.strip().splitlines()[-1])



def parse_sizes(text: str) -> list[tuple[int, int]]:
    out = []
    for part in text.split(","):
        n, _, d = part.strip().partition("x")
        if not (n.isdigit() and d.isdigit()) or int(n) < 1 or int(d) < 1 or int(n) > 512 or int(d) > 128:
            raise UsageError(f"--sizes: {part!r} is not NxD with 1 <= N <= 512, 1 <= D <= 128")
        if int(n) < int(d):
            raise UsageError(f"--sizes: {part!r} has N < D (a least-squares problem needs N >= D)")
        out.append((int(n), int(d)))
    return out


def cell(r: dict, failed: str = " NOT PROVED") -> str:
    if "timeout" in r:
        return f"> {r['timeout']:.0f} s (limit)"
    if "error" in r:
        return f"error: {r['error'][:60]}"
    return f"{r['cpu']:.3f} / {r['wall']:.3f}" + ("" if r["ok"] else failed)



def main(argv=None) -> int:
    return run_main(_main, argv)  # a UsageError: one line, exit 2; Ctrl-C: "interrupted", 130


def _main(argv=None) -> int:
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="20x5,64x16", help="comma-separated NxD (default 20x5,64x16)")
    ap.add_argument("--archs", help="comma-separated GD architectures (default: all of them)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per proof (default 300)")
    ap.add_argument("--sympy-up-to", type=int, default=64, help="run the sympy backend for N up to this (default 64)")
    ap.add_argument("--full-up-to", type=int, default=64,
                    help="also prove in the full ring (grouped substitution off) for N up to this (default 64)")
    ap.add_argument("--paired-up-to", type=int, default=64,
                    help="for N up to this, also time each size against the first in one process, "
                         "alternating (small, big, small) rounds: the ratio the targets are read from "
                         "(default 64)")
    ap.add_argument("--memory-gib", type=float, default=12.0,
                    help="address-space cap of each proof's process, GiB (default 12; never above the "
                         "limit the bench was given, ulimit -v)")
    ap.add_argument("--catalogue", action="store_true", help="also time the catalogue's proofs per backend")
    ap.add_argument("--no-randomized", action="store_true",
                    help="leave out the randomized check (--check random) beside the exact proof")
    ap.add_argument("--md", help="append the tables, in markdown, to this file")
    ap.add_argument("--json", help="write every measurement to this JSON file")
    a = ap.parse_args(argv)
    sizes = parse_sizes(a.sizes)
    if not 1 <= a.timeout <= 3600:
        raise UsageError("--timeout must be in 1..3600")
    if not 0.5 <= a.memory_gib <= 64:
        raise UsageError("--memory-gib must be in 0.5..64")
    for flag in ("sympy_up_to", "full_up_to", "paired_up_to"):
        if getattr(a, flag) < 0:
            raise UsageError(f"--{flag.replace('_', '-')} must be >= 0")
    for flag in ("md", "json"):
        path = getattr(a, flag)
        if path is not None and (Path(path).is_dir() or not Path(path).resolve().parent.is_dir()):
            raise UsageError(f"--{flag} {path}: not a file in an existing folder")
    from constructions.catalogue import gd_architectures

    archs = list(gd_architectures())
    if a.archs is not None:
        asked = [x.strip() for x in a.archs.split(",")]
        unknown = [x for x in asked if x not in archs]
        if unknown or not asked:
            raise UsageError(f"--archs: unknown architecture {', '.join(map(repr, unknown)) or repr(a.archs)}; "
                           f"choose from {', '.join(archs)}")
        archs = [x for x in archs if x in asked]
    cap, note = address_space_cap(a.memory_gib)
    if note:
        print(note, file=sys.stderr)
    load = os.getloadavg()
    head = (f"machine: {platform.platform()}, {os.cpu_count()} CPUs, load average {load[0]:.2f} at start; "
            f"python {platform.python_version()}; {time.strftime('%Y-%m-%d %H:%M')}")
    print(head)
    res: dict = {}
    for arch in archs:
        for n, d in sizes:
            for backend, full in (("flint", False), ("flint-full", True), ("sympy", True)):
                if (backend == "sympy" and n > a.sympy_up_to) or (backend == "flint-full" and n > a.full_up_to):
                    continue
                code = CHILD.format(root=str(ROOT), arch=arch, n=n, d=d, backend=backend.split("-")[0],
                                    full=full, cap=cap)
                r = run_child(code, a.timeout)
                res[f"{arch} {n}x{d} {backend}"] = r
                ring = r.get("ring", "-").split(" (")[0]
                print(f"{arch:26s} {n:4d}x{d:<3d} {backend:10s} CPU / wall s: {cell(r)}  [{ring}]", flush=True)
            if not a.no_randomized:
                code = RANDOM.format(root=str(ROOT), arch=arch, n=n, d=d, cap=cap)
                r = res[f"{arch} {n}x{d} random"] = run_child(code, a.timeout)
                print(f"{arch:26s} {n:4d}x{d:<3d} {'random':10s} CPU / wall s: {cell(r, ' FAILED')}"
                      + (f"  [error probability <= {r['bound']}]" if "bound" in r else ""), flush=True)
    base = sizes[0]
    paired_sizes = [(n, d) for n, d in sizes[1:] if n <= a.paired_up_to]
    for arch in archs:
        for n, d in paired_sizes:
            code = PAIRED.format(root=str(ROOT), arch=arch, n0=base[0], d0=base[1], n=n, d=d, budget=20)
            r = res[f"{arch} {n}x{d} paired"] = run_child(code, a.timeout)
            got = (f"median {r['median']:.1f}x [{r['min']:.1f}, {r['max']:.1f}], {r['rounds']} rounds"
                   if "median" in r else cell(r))
            print(f"{arch:26s} {n:4d}x{d:<3d} / {base[0]}x{base[1]} paired in one process: {got}", flush=True)
    full_sizes = [(n, d) for n, d in sizes if n <= a.full_up_to]
    cols = ([f"{n}x{d} flint" for n, d in sizes] + [f"{n}x{d} flint, full ring" for n, d in full_sizes]
            + [f"{n}x{d} sympy" for n, d in sizes if n <= a.sympy_up_to]
            + [f"{n}x{d} / {base[0]}x{base[1]} (flint CPU; state entries)" for n, d in sizes[1:]]
            + [f"{n}x{d} / {base[0]}x{base[1]} paired (median [min, max])" for n, d in paired_sizes]
            + [f"{n}x{d} flint peak RSS MiB" for n, d in sizes]
            + ["ring (largest size proved)"])
    lines = ["", f"### Proof cost per GD architecture (CPU / wall seconds; {head})", "",
             "| arch | " + " | ".join(cols) + " |", "|---" * (1 + len(cols)) + "|"]
    for arch in archs:
        row = [cell(res[f"{arch} {n}x{d} flint"]) for n, d in sizes]
        row += [cell(res[f"{arch} {n}x{d} flint-full"]) for n, d in full_sizes]
        row += [cell(res[f"{arch} {n}x{d} sympy"]) for n, d in sizes if n <= a.sympy_up_to]
        b = res[f"{arch} {base[0]}x{base[1]} flint"]
        for n, d in sizes[1:]:
            r = res[f"{arch} {n}x{d} flint"]
            ent = (f"; {r['entries'] / b['entries']:.1f}x" if r.get("entries") and b.get("entries") else "")
            row.append(f"{r['cpu'] / b['cpu']:.1f}x{ent}" if "cpu" in r and "cpu" in b and b["cpu"] > 0 else "-")
        for n, d in paired_sizes:
            r = res[f"{arch} {n}x{d} paired"]
            row.append(f"{r['median']:.1f}x [{r['min']:.1f}, {r['max']:.1f}]" if "median" in r else cell(r))
        row += [f"{res[f'{arch} {n}x{d} flint']['rss_mib']:.0f}" if "rss_mib" in res[f"{arch} {n}x{d} flint"]
                else "-" for n, d in sizes]  # the proof's process, construction and imports included
        proved = [res[f"{arch} {n}x{d} flint"] for n, d in sizes if "ring" in res[f"{arch} {n}x{d} flint"]]
        row.append(proved[-1]["ring"].split(" (")[0] if proved else "-")
        lines.append(f"| {arch} | " + " | ".join(row) + " |")
    if not a.no_randomized:
        lines += ["", "### The randomized check (`--check random`) beside the exact proof (flint)", "",
                  "Not a proof: a Schwartz-Zippel identity test modulo a random 61-bit prime, each section at its "
                  "own random point (`verify/prover/randomized.py`); its verdict is PASSED with the error bound shown, "
                  "never PROVED.", "",
                  "| arch | N x D | exact proof CPU / wall s | randomized CPU / wall s | exact / randomized (CPU) "
                  "| error probability <= | peak RSS MiB (exact / randomized) |", "|---|---|---|---|---|---|---|"]
        for arch in archs:
            for n, d in sizes:
                e, r = res[f"{arch} {n}x{d} flint"], res[f"{arch} {n}x{d} random"]
                ratio = f"{e['cpu'] / r['cpu']:.1f}x" if "cpu" in e and "cpu" in r and r["cpu"] > 0 else "-"
                rss = " / ".join(f"{x['rss_mib']:.0f}" if "rss_mib" in x else "-" for x in (e, r))
                lines.append(f"| {arch} | {n}x{d} | {cell(e)} | {cell(r, ' FAILED')} | {ratio} | "
                             f"{r.get('bound', '-')} | {rss} |")
    if a.catalogue:
        cat = {be: run_child(CATALOGUE.format(root=str(ROOT), backend=be), a.timeout * 4) for be in ("sympy", "flint")}
        res["catalogue"] = cat
        lines += ["", "### The catalogue's constructions, all proved in one process", "",
                  "| backend | constructions | CPU / wall s |", "|---|---|---|"]
        for be, r in cat.items():
            lines.append(f"| {be} | {r.get('n', '-')} | {cell(r)} |")
        if all("cpu" in r for r in cat.values()):
            lines.append(f"\nflint / sympy CPU on the catalogue: {cat['flint']['cpu'] / cat['sympy']['cpu']:.2f}")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.md:
        with open(a.md, "a") as f:
            f.write(text)
    if a.json:
        atomic_write_text(a.json, json.dumps(res, indent=1), "--json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
