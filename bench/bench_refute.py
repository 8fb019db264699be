"""Refute first (issue 41 item 1): time and peak memory of a FAILED verdict on a tampered weight file.

    python bench/bench_refute.py [--sizes 64x16,256x64,512x128] [--finetuned 20x5x10]
                                 [--baseline-sizes 64x16,256x64] [--memory-gib 8] [--baseline-memory-gib 4]
                                 [--timeout 600] [--baseline-timeout 300] [--json bench/results/refute/results.json]

For each size N x D a ``gd-baseconv`` weight file (depth 4: one body of 3 layers and the epilogue) is
written (``constructions.weights_io.save``) and tampered: the first nonzero entry of the body's first
layer's ``W_out`` doubled; and for each ``--finetuned`` N x D x k a file of depth 1 + 3k with every entry
of every tensor moved by a normal float (standard deviation 1e-3: dense float weights, as a few
fine-tuning steps leave them; the issue's 20 x 5, k = 10 module).  Then, each in a fresh interpreter
under an address-space cap (``--memory-gib``, clamped to this process's hard ``RLIMIT_AS``) and
``--timeout``:

* ``gd --weights``: ``python -m verify.construct gd --weights FILE --allow-large --quiet --batch 2
  --dtype float64`` (the command end to end: load, prove (refuting first), print the verdict, then its
  float run against an mpmath reference, which at 512 x 128 takes minutes; exit 1);
* ``prove``: the file loaded and its sections proved in Python, ``prove(con, sections=...)`` (refuting
  first), as ``gd --weights`` proves them;
* ``prove, refute=False`` (the baseline, at ``--baseline-sizes`` and the fine-tuned files, under
  ``--baseline-memory-gib`` and ``--baseline-timeout``): the exact proof alone, as the command ran
  before (the grouped ring finds the difference, the full ring makes the report).

Reported per run: the verdict (or which limit stopped it), the seconds until the verdict line was
printed (``proof: FAILED``; what the targets are about), wall seconds, CPU seconds (user + sys of the
child and its reaped children) and peak RSS (``ru_maxrss`` of the children: the largest of the process
and its reaped children); for the refuting runs, the targets of the issue: FAILED in at most 5 s at
64x16, 30 s and 2 GiB at 256x64, 60 s and 3 GiB at 512x128.  The machine is shared (2 cores): the
seconds are noisy, the memory is not.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import _timed  # noqa: E402 - the timed runner bench_learned_targets.py shares

if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))
from polyverify.plumbing.cli import (Parser, atomic_write_text, check_finite, output_file,  # noqa: E402
                                     run_main)
from _args import gd_sizes  # noqa: E402
#: (seconds, GiB) per size: the issue's targets
TARGETS = {(64, 16): (5.0, None), (256, 64): (30.0, 2.0), (512, 128): (60.0, 3.0)}


def tampered_file(n: int, d: int, folder: Path, k: int = 1, finetuned: bool = False) -> Path:
    """A gd-baseconv N x D file with ``k`` body copies (depth 1 + 3k): one entry of the first body
    layer's ``W_out`` doubled, or (``finetuned``) every entry of every tensor moved by a normal float of
    standard deviation 1e-3 (as a few steps of fine-tuning move them).  The metadata is kept: the stored
    floats no longer round the declared rationals, so the file is read as the floats it stores."""
    import numpy as np
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file

    from constructions.gd_baseconv import gd_baseconv
    from constructions.weights_io import save

    con = gd_baseconv(n, d)
    path = folder / f"gd-baseconv-{n}x{d}-k{k}{'-finetuned' if finetuned else ''}.safetensors"
    save(path, con, k)
    with safe_open(str(path), framework="numpy") as f:
        meta = f.metadata()
    t = load_file(str(path))
    if finetuned:
        rng = np.random.default_rng(0)
        t = {name: a + rng.normal(0.0, 1e-3, a.shape).astype(a.dtype) for name, a in t.items()}
    else:
        name = f"layers.{len(con.prologue)}.W_out"
        a = t[name].copy()
        a[tuple(int(i) for i in np.argwhere(a != 0)[0])] *= 2
        t[name] = a
    save_file(t, str(path), metadata=meta)
    return path


def worker(path: str, n: int, d: int, refute: bool) -> int:
    """``--worker``: prove the file's sections as ``gd --weights`` does (each body copy in turn, up to the
    first that fails) and print the verdict line and one JSON line."""
    from constructions.gd_baseconv import gd_baseconv
    from constructions.weights_io import load, split_sections
    from verify.prover.kernel import verdict
    from verify.prover.proof import prove

    con = gd_baseconv(n, d)
    lw = load(path, spec=con)
    secs, _ = split_sections(con, lw.layers)
    t0 = time.perf_counter()
    for body in secs["bodies"] or [[]]:
        res = prove(con, sections={"prologue": secs["prologue"], "body": body, "epilogue": secs["epilogue"]},
                    refute=refute)
        if not res.ok:
            break
    f = res.failure
    print(f"proof: {verdict(res).value}", flush=True)  # the moment of the verdict (as gd prints it)
    print(json.dumps({"verdict": verdict(res).value, "seconds_prove": time.perf_counter() - t0, "ring": res.ring,
                      "where": None if f is None else f"{f.section} layer {f.layer_in_section}, {f.region} "
                                                      f"{list(f.entry)}, located by {f.located_by}"}))
    return 0


def _cap(gib: float) -> int:
    return _timed.cap(gib)


def run(cmd: list[str], cap: int, timeout: float) -> dict:
    """One child under the cap and the timeout (``bench/_timed.py``): exit status, wall seconds, the seconds
    until it printed its verdict (a line starting ``proof:``), this process's children's rusage, its output."""
    r = _timed.run(cmd, cap, timeout, cwd=ROOT, marks=("proof:",))
    return {"rc": r["rc"], "timed_out": r["timed_out"], "wall_s": r["wall_s"], "verdict_s": r["at"].get("proof:"),
            "ru": r["ru"], "out": r["out"]}


def measured(cmd: list[str], cap: int, timeout: float) -> dict:
    """:func:`run` with the CPU and peak RSS of this child alone (RUSAGE_CHILDREN before and after: the
    children run one at a time; ``ru_maxrss`` there is the largest child so far, so each run is made
    in a fresh bench process, ``--one``)."""
    r = run([sys.executable, __file__, "--one", json.dumps({"cmd": cmd, "cap": cap, "timeout": timeout})],
            cap=_cap(1024), timeout=timeout + 60)
    try:
        return json.loads(r["out"].strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"rc": r["rc"], "timed_out": r["timed_out"], "wall_s": r["wall_s"], "cpu_s": None, "rss_mib": None,
                "tail": r["out"][-2000:]}


def one(spec: str) -> int:
    """``--one``: run one command, print its measures as one JSON line (this process has no other child)."""
    s = json.loads(spec)
    r = run(s["cmd"], s["cap"], s["timeout"])
    ru = r["ru"]
    print(json.dumps({"rc": r["rc"], "timed_out": r["timed_out"], "wall_s": r["wall_s"], "verdict_s": r["verdict_s"],
                      "cpu_s": ru.ru_utime + ru.ru_stime, "rss_mib": ru.ru_maxrss / 1024, "tail": r["out"][-3000:]}))
    return 0


def verdict_of(m: dict, kind: str) -> str:
    if m.get("timed_out"):
        return "stopped: timeout"
    tail = m.get("tail") or ""
    if kind == "gd":
        if "reached the memory limit" in tail or "proof stopped" in tail:
            return "stopped: " + ("memory" if "memory" in tail else "limit")
        return {0: "PROVED", 1: "FAILED", 2: "exit 2"}.get(m.get("rc"), f"exit {m.get('rc')}")
    for line in reversed(tail.splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)["verdict"]
            except (ValueError, KeyError):
                break
    return "stopped: memory" if "MemoryError" in tail or m.get("rc") in (-6, 134, -9) else f"exit {m.get('rc')}"


def _main(argv) -> int:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="64x16,256x64,512x128", help="N x D sizes (default 64x16,256x64,512x128)")
    p.add_argument("--baseline-sizes", default="64x16,256x64",
                   help="sizes where the exact proof alone (refute=False) is measured too (default 64x16,256x64; "
                        "'' for none)")
    p.add_argument("--memory-gib", type=float, default=8.0, help="address-space cap of each run, GiB (default 8; "
                                                                  "clamped to the hard RLIMIT_AS)")
    p.add_argument("--baseline-memory-gib", type=float, default=4.0,
                   help="the baseline's address-space cap, GiB (default 4: the issue saw it stop at 4-5 GiB)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per run (default 600)")
    p.add_argument("--baseline-timeout", type=float, default=300.0, help="seconds per baseline run (default 300)")
    p.add_argument("--json", default=str(ROOT / "bench" / "results" / "refute" / "results.json"),
                   help="the results as JSON (default bench/results/refute/results.json)")
    p.add_argument("--finetuned", default="20x5x10",
                   help="N x D x k files with every entry moved (a few fine-tuning steps; default 20x5x10, the issue's "
                        "module; '' for none): the exact proof alone stopped at 4 GiB after 47 s")
    p.add_argument("--worker", nargs=4, metavar=("FILE", "N", "D", "REFUTE"), help=argparse.SUPPRESS)
    p.add_argument("--one", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker:
        f, n, d, r = a.worker
        return worker(f, int(n), int(d), r == "1")
    if a.one:
        return one(a.one)
    # every argument and the output path checked before any file is made or run
    for flag in ("--memory-gib", "--baseline-memory-gib", "--timeout", "--baseline-timeout"):
        check_finite(flag, getattr(a, flag[2:].replace("-", "_")), positive=True)
    plain, tuned = gd_sizes("--sizes", a.sizes, 2), gd_sizes("--finetuned", a.finetuned, 3)
    baseline_sizes = gd_sizes("--baseline-sizes", a.baseline_sizes, 2)
    out = output_file("--json", a.json)

    cap = _cap(a.memory_gib)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cases = [(n, d, 1, False) for n, d in plain]
        cases += [(n, d, k, True) for n, d, k in tuned]
        for n, d, k, finetuned in cases:
            path = tampered_file(n, d, Path(tmp), k, finetuned)
            what = f"{n}x{d}" + (f" k={k} fine-tuned" if finetuned else "")
            worker_cmd = [sys.executable, __file__, "--worker", str(path), str(n), str(d)]
            runs = [("gd --weights", "gd", [sys.executable, "-m", "verify.construct", "gd", "--weights", str(path),
                                            "--allow-large", "--quiet", "--batch", "2", "--dtype", "float64",
                                            "--proof-memory-gib", f"{cap / 2**30 * 0.9:.2f}",
                                            "--proof-timeout", f"{a.timeout:.0f}"], cap, a.timeout),
                    ("prove (refute first)", "py", worker_cmd + ["1"], cap, a.timeout)]
            if (n, d) in baseline_sizes or finetuned:
                runs.append(("prove, refute=False (baseline)", "py", worker_cmd + ["0"],
                             _cap(a.baseline_memory_gib), a.baseline_timeout))
            for label, kind, cmd, run_cap, run_timeout in runs:
                m = measured(cmd, run_cap, run_timeout)
                v = verdict_of(m, kind)
                secs, gib = TARGETS.get((n, d), (None, None)) if not finetuned else (None, None)
                met = None
                to_verdict = m.get("verdict_s")
                if "baseline" not in label and secs is not None:
                    met = (v == "FAILED" and to_verdict is not None and to_verdict <= secs
                           and (gib is None or (m["rss_mib"] is not None and m["rss_mib"] <= gib * 1024)))
                row = {"size": what, "run": label, "verdict": v,
                       "verdict_s": None if to_verdict is None else round(to_verdict, 2),
                       "wall_s": round(m["wall_s"], 2),
                       "cpu_s": None if m.get("cpu_s") is None else round(m["cpu_s"], 2),
                       "peak_rss_mib": None if m.get("rss_mib") is None else round(m["rss_mib"], 1),
                       "target": None if secs is None else (f"FAILED <= {secs:g} s"
                                                            + (f", <= {gib:g} GiB" if gib else "")),
                       "target_met": met, "tail": (m.get("tail") or "")[-600:]}
                rows.append(row)
                shown = "-" if row["verdict_s"] is None else f"{row['verdict_s']:.2f}"
                print(f"{row['size']:>8} {label:<32} {v:<18} verdict at {shown:>7} s  "
                      f"wall {row['wall_s']:>8.2f} s  "
                      f"CPU {row['cpu_s'] or 0:>8.2f} s  peak RSS {row['peak_rss_mib'] or 0:>8.1f} MiB  "
                      f"target {row['target'] or '-'}: "
                      f"{'-' if met is None else 'met' if met else 'NOT met'}", flush=True)
    print()
    head = "| size | run | verdict | verdict at s | wall s | CPU s | peak RSS MiB | target | met |"
    print(head)
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['size']} | {r['run']} | {r['verdict']} | {r['verdict_s']} | {r['wall_s']} | {r['cpu_s']} | "
              f"{r['peak_rss_mib']} | "
              f"{r['target'] or '-'} | {'-' if r['target_met'] is None else 'yes' if r['target_met'] else 'NO'} |")
    for size in {r["size"] for r in rows}:
        base = next((r for r in rows if r["size"] == size and "baseline" in r["run"]), None)
        new = next((r for r in rows if r["size"] == size and r["run"].startswith("prove (refute")), None)
        if base and new and new["wall_s"]:
            print(f"{size}: baseline / refute first: wall {base['wall_s'] / new['wall_s']:.1f}x, peak RSS "
                  f"{(base['peak_rss_mib'] or 0) / max(new['peak_rss_mib'] or 1, 1):.1f}x"
                  + (f" (baseline {base['verdict']})" if base["verdict"] != "FAILED" else ""))
    atomic_write_text(out, json.dumps({"memory_cap_gib": cap / 2**30, "baseline_memory_cap_gib":
                                       _cap(a.baseline_memory_gib) / 2**30, "timeout_s": a.timeout,
                                       "baseline_timeout_s": a.baseline_timeout, "cores": os.cpu_count(),
                                       "rows": rows}, indent=1), "--json")
    print(f"wrote {out}")
    return 0 if all(r["target_met"] is not False for r in rows) else 1


def main(argv=None) -> int:
    """The command: a bad argument or output path is one ``error:`` line and exit status 2, before any work."""
    return run_main(_main, argv)


if __name__ == "__main__":
    sys.exit(main())
