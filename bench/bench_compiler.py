"""Compile + prove cost of the sequence target against the one-token MLP target, same circuit, same process.

    python bench/bench_compiler.py [--gates 1000] [--inputs 64] [--outputs 8] [--tokens 16] [--seed 0] [--repeat 5]
    python bench/bench_compiler.py --scale [--family random|blocks] [--sizes 1000,10000,100000] [--million]
                                   [--quick] [--baseline-up-to 10000] [--json FILE]
    python bench/bench_compiler.py --pareto [--pareto-size 20x5] [--target baseconv] [--json FILE]

**Frontier** (``--pareto``): the layers/channels frontier of the placed GD step
``gd_step(N, D, 1/16)`` (seed 000 eq. (3)) under channel budgets (``constructions.compiler.budget.
pareto``: budgets from the stated minimum to the unbounded compile's width), each frontier point
compiled under its budget and proved, with its compile and proof CPU.  Exit 1 if a point is not
proved.

**Scale** (``--scale``): compile + proof of one placed circuit per size, each size in its own
child process (its peak RSS is the child's ``ru_maxrss``; CPU is user + sys from ``getrusage``
around ``compile_circuit`` and around ``verify.prover.proof.prove``, wall beside it; generating the
circuit is not counted), at 1k, 10k and 100k gates (``--sizes``; ``--million`` adds 10^6,
``--quick`` is 200 and 1,000 for a smoke run).  The table gives each size's figures, the ratio
to the smallest size and the fitted exponent (least-squares slope of log CPU, and of log peak
RSS, against log gates).  The baseline is measured in the same run: the same circuit without
places compiled to ``baseconv-mlp`` (one token) up to ``--baseline-up-to`` gates, its
compile + prove CPU beside the placed target's, ratio quoted.  Families (``--family``):

* ``random``: ``random_circuit(seed, 64 inputs, gates, 8 outputs)`` (max degree 12) placed on
  16 tokens x 4 channels as below: every gate may read any earlier one, so its values are
  affine forms over a few hundred products whatever the size, and the proof's expanded
  polynomials (64 variables, degree <= 12) are what grows;
* ``blocks``: ``gates / 250`` independent 250-gate random circuits (8 inputs, 2 outputs each),
  block ``k``'s inputs on token ``k`` (8 channels): the products grow with the circuit, the
  polynomials stay small (a sequence model's per-token computation).

The targets (compile + proof of a low-degree placed circuit): 100k gates in at most
60 s CPU and 4 GiB, 10^6 gates in at most 600 s CPU and 16 GiB, reported as met or MISSED.  A
child past ``--timeout`` seconds or ``--max-rss-gib`` (its address space, so the machine is
not swamped) is reported as such.  Exit 0 when every run proved and no target was missed, 1
otherwise, 2 bad arguments.

**Compare** (default): a random circuit (``circuits.random.random_circuit(seed, inputs, gates, n_outputs=outputs)``)
is compiled and proved twice per repeat, the two runs interleaved:

* ``baseconv``: the circuit *placed*, input ``x_k`` at token ``k mod T``, channel ``k div T`` of a
  ``T x ceil(inputs / T)`` grid (``--tokens T``; outputs unplaced, the compiler chooses), compiled
  to BaseConv over those T tokens (``constructions/compiler/sequence.py``);
* ``lsa``, ``elsa``: the same placed circuit compiled to attention (``constructions/compiler/
  attention.py``; ``--targets`` chooses the placed targets, default ``baseconv,lsa,elsa``);
* ``baseconv-mlp``: the same circuit without places, compiled to one token
  (``constructions/compiler/mlp.py``), the baseline.

Each run times ``compile_circuit`` and ``verify.prover.proof.prove`` separately, CPU time
(``time.process_time``) beside wall time (``time.perf_counter``); the table gives medians over
``--repeat`` runs and the ratio of the sequence target's compile + prove to the baseline's (the
target: at most 10x).  Machines here are shared and noisy: compare ratios, not seconds.
Exit 0 when both stacks are proved and the CPU ratio is within the target, 1 otherwise, 2 bad
arguments.
"""
from __future__ import annotations

import json
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import circuits as C  # noqa: E402
from circuits.random import random_circuit  # noqa: E402
from constructions.compiler import compile_circuit  # noqa: E402
from polyverify.plumbing.cli import (Parser, UsageError, atomic_write_text, check_finite, check_range,  # noqa: E402
                                     output_file, run_main)
from verify.prover.proof import prove  # noqa: E402

TARGET_RATIO = 10.0


def placed(g, tokens: int):
    """``g`` with input ``x_k`` (the k-th input in sorted name order) at ``(k mod T, k div T)``
    (``circuits.place_inputs``)."""
    return C.place_inputs(g, tokens)


#: the research-scale targets: gates -> (CPU seconds, peak RSS GiB) of compile + proof
SCALE_TARGETS = {100_000: (60.0, 4.0), 1_000_000: (600.0, 16.0)}
FAMILIES = ("random", "blocks")
BLOCK_GATES, BLOCK_INPUTS, BLOCK_OUTPUTS = 250, 8, 2


def blocks(seed: int, gates: int):
    """``ceil(gates / 250)`` independent random circuits (the last one smaller), block ``k`` with
    inputs ``b{k}x{i}`` at token ``k``, channel ``i`` and outputs ``b{k}y{j}`` (unplaced)."""
    import networkx as nx

    g = nx.DiGraph()
    n_blocks = -(-gates // BLOCK_GATES)
    for k in range(n_blocks):
        size = min(BLOCK_GATES, gates - k * BLOCK_GATES)
        b = random_circuit(seed * 1_000_003 + k, BLOCK_INPUTS, size, n_outputs=min(BLOCK_OUTPUTS, size))
        for v, d in b.nodes(data=True):
            d = dict(d)
            if d["op"] == "input":
                i = int(d["name"][1:])
                d["name"], d["token"], d["channel"] = f"b{k}x{i}", k, i
            if "output" in d:
                d["output"] = f"b{k}{d['output']}"
            g.add_node(f"{k}_{v}", **d)
        g.add_edges_from((f"{k}_{u}", f"{k}_{v}", d) for u, v, d in b.edges(data=True))
    g.graph["tokens"], g.graph["channels"] = n_blocks, BLOCK_INPUTS
    return C.validate(g)


def unplaced(g):
    """``g`` without places (the baseline target's circuit)."""
    from circuits.placement import GRID_ATTRS, PLACE_ATTRS

    h = g.copy()
    for _, d in h.nodes(data=True):
        for k in PLACE_ATTRS:
            d.pop(k, None)
    for k in GRID_ATTRS:
        h.graph.pop(k, None)
    return C.validate(h)


def family_circuit(family: str, seed: int, gates: int, placed_: bool):
    if family == "random":
        g = random_circuit(seed, 64, gates, n_outputs=8)
        return placed(g, 16) if placed_ else g
    g = blocks(seed, gates)
    return g if placed_ else unplaced(g)


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def address_space_cap(gib: float) -> tuple[float, str | None]:
    """The address-space limit (GiB) a run asked to stay under ``gib`` gets: ``gib``, or the limit this
    process was given (RLIMIT_AS; its soft limit, at most the hard one) where that is lower -- a
    process may lower its limits, never raise one above what it was given (``prlimit --as=10G`` on a
    CI runner) -- and then one line saying so.  0: no limit of the bench's own."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if gib <= 0 or soft == resource.RLIM_INFINITY or soft >= gib * 2**30:
        return gib, None
    given = soft / 2**30
    return given, (f"note: the address-space limit this bench was given ({given:.2f} GiB, ulimit -v / prlimit --as) "
                   f"is below --max-rss-gib {gib:g}: each run is held to {given:.2f} GiB, and a size that needs "
                   f"more is reported as over the limit")


def _limit_address_space(gib: float) -> None:
    """RLIMIT_AS of this process to ``gib`` GiB, never above the limit it was given."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    lim = int(gib * 2**30)
    if soft != resource.RLIM_INFINITY:
        lim = min(lim, soft)
    resource.setrlimit(resource.RLIMIT_AS, (lim, lim))


def child(family: str, gates: int, target: str, seed: int, max_rss_gib: float) -> int:
    """One measurement (run in its own process): one JSON line on stdout."""
    if max_rss_gib > 0:
        _limit_address_space(max_rss_gib)
    g = family_circuit(family, seed, gates, target != "baseconv-mlp")
    m = C.metrics(g)
    out = {"family": family, "gates": gates, "target": target, "metrics": m, "rss_generated_mib": _rss_mib()}
    c0, w0 = _cpu(), time.perf_counter()
    con = compile_circuit(g, name="bench", target=target)
    c1, w1 = _cpu(), time.perf_counter()
    out.update(compile_cpu=c1 - c0, compile_wall=w1 - w0, rss_compiled_mib=_rss_mib(),
               layers=len(con.prologue) + len(con.body) + len(con.epilogue), state=list(con.layout.shape))
    print(json.dumps(dict(out, stage="compiled")), flush=True)  # what is known if the proof dies
    r = prove(con)
    c2, w2 = _cpu(), time.perf_counter()
    out.update(prove_cpu=c2 - c1, prove_wall=w2 - w1, proved=bool(r.ok), peak_rss_mib=_rss_mib())
    print(json.dumps(out), flush=True)
    return 0 if r.ok else 1


def _run_child(a, gates: int, target: str) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", a.family, str(gates), target, str(a.seed),
           str(a.rss_cap_gib)]
    w0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
    except subprocess.TimeoutExpired:
        return {"gates": gates, "target": target, "error": f"did not finish in {a.timeout:g} s"}
    lines = [json.loads(ln) for ln in p.stdout.splitlines() if ln.startswith("{")]
    if not lines or "proved" not in lines[-1]:
        tail = (p.stderr.strip().splitlines() or ["no output"])[-1]
        if "MemoryError" in p.stderr or p.returncode in (-6, -9):
            tail = f"over the {a.rss_cap_gib:.3g} GiB address-space limit (--max-rss-gib) ({tail})"
        where = "while generating or compiling"
        if lines:  # compiled, then died in the proof
            c = lines[-1]
            where = (f"in the proof, after compiling in {c['compile_cpu']:.1f} s CPU to {c['layers']} layers, "
                     f"state {c['state'][0]} x {c['state'][1]}, RSS then {c['rss_compiled_mib']:.0f} MiB")
        return {"gates": gates, "target": target, "error": f"exit {p.returncode} {where}: {tail}",
                "wall": time.perf_counter() - w0, **({"partial": lines[-1]} if lines else {})}
    return lines[-1]


def slope(xs, ys) -> float | None:
    """Least-squares slope of log y against log x (None below two points)."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if y > 0]
    if len(pts) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx if sxx else None


def scale(a) -> int:
    a.rss_cap_gib, note = address_space_cap(a.max_rss_gib)
    if note:
        print(note, file=sys.stderr)
    sizes = [200, 1000] if a.quick else [int(s) for s in a.sizes.split(",") if s]
    if a.million and 1_000_000 not in sizes:
        sizes.append(1_000_000)
    print(f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; family {a.family}, "
          f"target {a.target}, seed {a.seed}; each run in its own process (limits {a.timeout:g} s, "
          f"{a.rss_cap_gib:.3g} GiB address space); CPU = user + sys; generation not counted")
    rows, base = [], {}
    for n in sizes:
        r = _run_child(a, n, a.target)
        rows.append(r)
        if n <= a.baseline_up_to:
            base[n] = _run_child(a, n, "baseconv-mlp")
        if "error" in r:
            print(f"{n:>9,} gates: {r['error']}", flush=True)
        else:
            print(f"{n:>9,} gates: compile {r['compile_cpu']:.2f} s CPU, proof {r['prove_cpu']:.2f} s CPU, "
                  f"peak RSS {r['peak_rss_mib']:.0f} MiB, {'PROVED' if r['proved'] else 'NOT PROVED'}", flush=True)
    ok = [r for r in rows if "error" not in r]
    first = ok[0] if ok else None
    hdr = (f"{'gates':>9} {'layers':>6} {'state':>11} {'compile CPU':>11} {'prove CPU':>9} {'total CPU':>9} "
           f"{'total wall':>10} {'peak RSS MiB':>12} {'CPU/first':>9} {'gates/first':>11} {'mlp CPU':>8} "
           f"{'CPU/mlp':>7}")
    print(hdr)
    for r in rows:
        n = r["gates"]
        if "error" in r:
            print(f"{n:>9,} {r['error']}")
            continue
        cpu, wall = r["compile_cpu"] + r["prove_cpu"], r["compile_wall"] + r["prove_wall"]
        r["total_cpu"], r["total_wall"] = cpu, wall
        b = base.get(n)
        bcpu = b["compile_cpu"] + b["prove_cpu"] if b and "error" not in b else None
        state = f"{r['state'][0]} x {r['state'][1]}"
        print(f"{n:>9,} {r['layers']:>6} {state:>11} {r['compile_cpu']:>11.2f} {r['prove_cpu']:>9.2f} {cpu:>9.2f} "
              f"{wall:>10.2f} {r['peak_rss_mib']:>12.0f} {cpu / (first['compile_cpu'] + first['prove_cpu']):>9.1f} "
              f"{n / first['gates']:>11.0f} {(f'{bcpu:.2f}' if bcpu is not None else '-'):>8} "
              f"{(f'{cpu / bcpu:.2f}' if bcpu else '-'):>7}")
    fit = {"total_cpu": slope([r["gates"] for r in ok], [r["total_cpu"] for r in ok]),
           "compile_cpu": slope([r["gates"] for r in ok], [r["compile_cpu"] for r in ok]),
           "prove_cpu": slope([r["gates"] for r in ok], [r["prove_cpu"] for r in ok]),
           "peak_rss": slope([r["gates"] for r in ok], [r["peak_rss_mib"] for r in ok])}
    print("fitted exponent (log-log slope over the sizes that finished): "
          + ", ".join(f"{k} {v:.2f}" if v is not None else f"{k} -" for k, v in fit.items()))
    steps = [f"{r0['gates']:,}->{r1['gates']:,}: CPU {slope([r0['gates'], r1['gates']], [r0['total_cpu'], r1['total_cpu']]):.2f}, "
             f"RSS {slope([r0['gates'], r1['gates']], [r0['peak_rss_mib'], r1['peak_rss_mib']]):.2f}"
             for r0, r1 in zip(ok, ok[1:])]
    fit["steps"] = steps
    if steps:  # the fit over all sizes hides a fixed start-up cost at the small ones: the steps show the trend
        print("exponent between consecutive sizes (total CPU, peak RSS): " + "; ".join(steps))
    good = all("error" not in r and r["proved"] for r in rows)
    good &= all("error" not in b and b["proved"] for b in base.values())
    for n, (cpu_t, rss_t) in SCALE_TARGETS.items():
        r = next((r for r in rows if r["gates"] == n), None)
        if r is None:
            continue
        met = "error" not in r and r["total_cpu"] <= cpu_t and r["peak_rss_mib"] <= rss_t * 1024
        good &= met
        got = r.get("error") or f"{r['total_cpu']:.1f} s CPU, {r['peak_rss_mib'] / 1024:.2f} GiB"
        print(f"target at {n:,} gates: <= {cpu_t:g} s CPU and <= {rss_t:g} GiB: {got}: {'met' if met else 'MISSED'}")
    if a.json:
        atomic_write_text(a.json, json.dumps({"family": a.family, "target": a.target, "seed": a.seed,
                                              "runs": rows, "baseline": list(base.values()), "fit": fit,
                                              "targets": {str(k): v for k, v in SCALE_TARGETS.items()}},
                                             indent=1) + "\n", "--json")
    return 0 if good else 1


def pareto_table(a) -> int:
    """``--pareto``: the layers/channels frontier of the placed GD step (``circuits.builders.gd_step``,
    seed 000 eq. (3)) on ``--target``, every point compiled under its channel budget and proved."""
    from fractions import Fraction

    from circuits.builders import gd_step
    from constructions.compiler.budget import pareto

    n, d = a.pareto_size
    g = gd_step(n, d, Fraction(1, 16), placed=True)
    print(f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
          f"frontier of gd_step({n}, {d}, 1/16) placed, target {a.target}; CPU = process time")
    c0 = time.process_time()
    front = pareto(g, a.target)
    print(f"frontier found in {time.process_time() - c0:.2f} s CPU ({len(front)} points)")
    print(f"{'budget':>9} {'channels':>8} {'tokens':>6} {'layers':>6} {'compile CPU':>11} {'prove CPU':>9} proof")
    rows, good = [], True
    for pt in front:
        c0 = time.process_time()
        con = compile_circuit(g, name="bench", target=a.target, channels=pt["budget"])
        c1 = time.process_time()
        r = prove(con)
        c2 = time.process_time()
        cm = con.info["compiled"]
        good &= bool(r.ok)
        rows.append(dict(pt, compile_cpu=c1 - c0, prove_cpu=c2 - c1, proved=bool(r.ok)))
        budget = "unbounded" if pt["budget"] is None else str(pt["budget"])
        print(f"{budget:>9} {cm['state_width']:>8} {cm['tokens']:>6} {cm['layers']:>6} {c1 - c0:>11.2f} "
              f"{c2 - c1:>9.2f} {'PROVED' if r.ok else 'FAILED'}")
    if a.json:
        atomic_write_text(a.json, json.dumps({"circuit": f"gd_step({n}, {d}, 1/16)", "target": a.target,
                                              "frontier": rows}, indent=1) + "\n", "--json")
    return 0 if good else 1


def once(g, target: str) -> dict:
    c0, w0 = time.process_time(), time.perf_counter()
    con = compile_circuit(g, name="bench", target=target)
    c1, w1 = time.process_time(), time.perf_counter()
    r = prove(con)
    c2, w2 = time.process_time(), time.perf_counter()
    if not r.ok:
        raise SystemExit(f"{target}: the proof FAILED:\n{r.failure.describe()}")
    return {"compile_cpu": c1 - c0, "compile_wall": w1 - w0, "prove_cpu": c2 - c1, "prove_wall": w2 - w1,
            "layers": len(con.epilogue) + len(con.body) + len(con.prologue), "state": con.layout.shape}


#: the options each mode reads (the mode's own flag aside): any other set off its default is refused
READ_BY = {"the comparison": {"gates", "inputs", "outputs", "tokens", "seed", "repeat", "targets"},
           "--scale": {"scale", "family", "sizes", "million", "quick", "target", "baseline_up_to", "timeout",
                       "max_rss_gib", "json", "seed"},
           "--pareto": {"pareto", "pareto_size", "target", "json"}}


def _main(argv) -> int:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--gates", type=int, default=1000, help="add/mul gates of the random circuit (default 1000)")
    p.add_argument("--inputs", type=int, default=64, help="inputs x0.. (default 64)")
    p.add_argument("--outputs", type=int, default=8, help="outputs y0.. (default 8)")
    p.add_argument("--tokens", type=int, default=16, help="tokens of the placed grid (default 16)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--repeat", type=int, default=5, help="runs per target (median reported; default 5)")
    p.add_argument("--targets", default="baseconv,lsa,elsa",
                   help="placed targets compared with baseconv-mlp (default baseconv,lsa,elsa)")
    s = p.add_argument_group("scale (--scale: one child process per size)")
    s.add_argument("--scale", action="store_true", help="the research-scale sweep instead of the comparison")
    s.add_argument("--family", default="random", choices=FAMILIES, help="circuit family (default random)")
    s.add_argument("--sizes", default="1000,10000,100000", help="gates per run (default 1000,10000,100000)")
    s.add_argument("--million", action="store_true", help="add 1,000,000 gates")
    s.add_argument("--quick", action="store_true", help="200 and 1,000 gates (a smoke run)")
    s.add_argument("--target", default="baseconv", help="the placed target (default baseconv)")
    s.add_argument("--baseline-up-to", type=int, default=10_000,
                   help="measure the baseconv-mlp baseline up to this many gates (default 10000; 0: never)")
    s.add_argument("--timeout", type=float, default=1200, help="seconds per run (default 1200)")
    s.add_argument("--max-rss-gib", type=float, default=12,
                   help="address-space limit of each run in GiB (default 12; 0: none; never above the "
                        "limit the bench was given, ulimit -v)")
    s.add_argument("--json", help="write the sweep's figures as JSON to this file (--scale, --pareto)")
    f = p.add_argument_group("frontier (--pareto: the GD step's layers/channels frontier, each point proved)")
    f.add_argument("--pareto", action="store_true", help="the channel-budget frontier instead of the comparison")
    f.add_argument("--pareto-size", default="20x5", help="N x D of the GD step (default 20x5)")
    a = p.parse_args(argv)
    # every argument and the output checked before any circuit is made
    from constructions.compiler import TARGETS

    PLACED = [n for n, t in TARGETS.items() if t.family != "mlp"]  # the baseline's family is excluded
    if a.pareto and a.scale:
        raise UsageError("--pareto and --scale: give one (each is its own run)")
    mode = "--pareto" if a.pareto else "--scale" if a.scale else "the comparison"
    unread = [k for k in vars(a) if k not in READ_BY[mode] and getattr(a, k) != p.get_default(k)]
    if a.scale and a.quick and a.sizes != p.get_default("sizes"):
        raise UsageError(f"--sizes {a.sizes} with --quick: --quick runs its own two sizes (200, 1000); give one")
    if unread:  # an option the run would not read is refused, not ignored
        k = unread[0]
        raise UsageError(f"--{k.replace('_', '-')} {getattr(a, k)}: not read by {mode} (it reads "
                         f"{', '.join('--' + r.replace('_', '-') for r in sorted(READ_BY[mode]))})")
    if a.json is not None and not (a.pareto or a.scale):
        raise UsageError(f"--json {a.json}: written by --scale and --pareto only (the comparison prints its table)")
    check_range("--seed", a.seed, 0, 2**32 - 1)
    if a.pareto:
        try:
            n, d = (int(x) for x in a.pareto_size.lower().split("x"))
        except ValueError:
            n = d = 0
        if not (1 <= n <= 64 and 1 <= d <= 16):
            raise UsageError(f"--pareto-size must be NxD with N in 1..64 and D in 1..16, got {a.pareto_size!r}")
        budgeted = [t for t in PLACED if TARGETS[t].accepts("channels")]
        if a.target not in budgeted:
            raise UsageError(f"--target {a.target!r}: --pareto needs a target with a channel budget "
                             f"({', '.join(budgeted)})")
        output_file("--json", a.json)
        a.pareto_size = (n, d)
        return pareto_table(a)
    if a.scale:
        try:
            sizes = [int(x) for x in a.sizes.split(",") if x]
        except ValueError:
            sizes = []
        if not sizes or any(not 1 <= n <= 1_000_000 for n in sizes) or sorted(set(sizes)) != sizes:
            raise UsageError(f"--sizes must be increasing gate counts in 1..1000000, got {a.sizes!r}")
        if a.target not in PLACED:
            raise UsageError(f"--target {a.target!r}: choose among {', '.join(PLACED)}")
        check_finite("--timeout", a.timeout, positive=True)
        check_range("--max-rss-gib", a.max_rss_gib, 0.0)
        check_range("--baseline-up-to", a.baseline_up_to, 0)
        output_file("--json", a.json)
        return scale(a)
    placed_targets = [t for t in a.targets.split(",") if t]
    bad = [t for t in placed_targets if t not in PLACED]
    if bad or not placed_targets:
        raise UsageError(f"--targets: unknown or baseline target {', '.join(bad) or '(none)'} (choose among "
                         f"{', '.join(PLACED)})")
    for flag, v, lo, hi in (("--gates", a.gates, 1, 10_000), ("--inputs", a.inputs, 1, 10_000),
                            ("--outputs", a.outputs, 1, a.gates), ("--tokens", a.tokens, 1, 10_000),
                            ("--repeat", a.repeat, 1, 100)):
        if not lo <= v <= hi:
            raise UsageError(f"{flag} must be in {lo}..{hi}, got {v}")
    g = random_circuit(a.seed, a.inputs, a.gates, n_outputs=a.outputs)
    gp = placed(g, a.tokens)
    m = C.metrics(g)
    print(f"random_circuit(seed={a.seed}, n_inputs={a.inputs}, n_gates={a.gates}, n_outputs={a.outputs}): "
          f"size {m['size']}, depth {m['depth']}, width {m['width']}, degree {m['degree']}; placed on "
          f"{gp.graph['tokens']} x {gp.graph['channels']}")
    print(f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
          f"median of {a.repeat} runs per target, interleaved")
    runs = {**{t: (gp, []) for t in placed_targets}, "baseconv-mlp": (g, [])}
    for t in runs:  # warm-up: imports and first-call set-up out of the clocks
        once(C.dot(1, placed=True) if t != "baseconv-mlp" else C.dot(1), t)
    for _ in range(a.repeat):
        for target, (graph, out) in runs.items():
            out.append(once(graph, target))
    med = {}
    for target, (_, out) in runs.items():
        med[target] = {k: statistics.median(r[k] for r in out) for k in out[0] if k not in ("layers", "state")}
        med[target]["cpu"] = statistics.median(r["compile_cpu"] + r["prove_cpu"] for r in out)
        med[target]["wall"] = statistics.median(r["compile_wall"] + r["prove_wall"] for r in out)
        med[target]["shape"] = (out[0]["layers"], out[0]["state"])
    base = med["baseconv-mlp"]
    print(f"{'target':<14} {'layers':>6} {'state':>9} {'compile CPU':>11} {'prove CPU':>9} {'total CPU':>9} "
          f"{'total wall':>10} {'CPU/mlp':>7} {'wall/mlp':>8}")
    for target, r in med.items():
        layers, (T, Cw) = r["shape"]
        print(f"{target:<14} {layers:>6} {f'{T} x {Cw}':>9} {r['compile_cpu']:>11.3f} {r['prove_cpu']:>9.3f} "
              f"{r['cpu']:>9.3f} {r['wall']:>10.3f} {r['cpu'] / base['cpu']:>7.2f} {r['wall'] / base['wall']:>8.2f}")
    ok = True
    for t in placed_targets:
        ratio_cpu = med[t]["cpu"] / base["cpu"]
        ratio_wall = med[t]["wall"] / base["wall"]
        ok &= ratio_cpu <= TARGET_RATIO
        print(f"{t} compile+prove / mlp compile+prove: {ratio_cpu:.2f}x CPU, {ratio_wall:.2f}x wall "
              f"(target <= {TARGET_RATIO:g}x: {'met' if ratio_cpu <= TARGET_RATIO else 'MISSED'})")
    return 0 if ok else 1


def main(argv=None) -> int:
    """The command: a bad argument or output path is one ``error:`` line and exit status 2, before any work.
    ``--child FAMILY GATES TARGET SEED MAX_RSS_GIB`` (a scale run's child, started by :func:`_run_child` with
    the arguments it built) is one measurement, run as it is."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--child"]:
        fam, gates, target, seed, lim = argv[1:6]
        return child(fam, int(gates), target, int(seed), float(lim))
    return run_main(_main, argv)


if __name__ == "__main__":
    sys.exit(main())
