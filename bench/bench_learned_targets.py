"""Issue 41 item 1's targets on learned and tampered files: FAILED for a tampered or learned file in at most
5 s at 64x16, 30 s and 2 GiB at 256x64, 60 s and 3 GiB at 512x128; the trained precision-ls checkpoint
(``state.pt``) within 60 s and 2 GiB.

    python bench/bench_learned_targets.py [--sizes 64x16,256x64,512x128] [--timeout 240]
        [--memory-gib 8] [--no-state-pt] [--json bench/results/import_trained/learned_targets.json]
        [--runs "gd --weights,import"] [--baseline-commit C [--changed a.py,b.py] [--baseline-all]]
        [--files tampered,learned] [--cache /tmp/polyverify-bench-learned-targets | --no-cache]

Files, for each size N x D (``gd-baseconv``, eta 1/16):

* **tampered**: the construction written by ``constructions.weights_io.save`` (k = 1) with the first
  nonzero entry of the body's first ``W_out`` doubled (``bench/bench_refute.py``'s ``tampered_file``);
  ``gd --weights FILE`` and ``import FILE --from polyverify`` (the file's own metadata names the
  construction and its sizes);
* **learned**: ``tests/verify/trained_files.py``'s ``trained_module`` (``polyverify.torch.load_module``,
  k = 2 unshared body copies, 3 Adam steps: every entry a dense float), exported to precision-ls
  (``import --from precision-ls --spec gd-baseconv --set n=N --set d=D --layout identity.json``: the
  issue's command, with its nearby search);
* **fine-tuned** (for ``gd --weights``): the construction's file with k = 2 and every entry of every
  tensor moved by a normal float of standard deviation 1e-3 (``bench_refute.tampered_file(...,
  finetuned=True)``; a trained module's polyverify export is refused at 256x64 by safetensors, "header
  too large", so the learned file for ``gd --weights`` is made this way);
* **state.pt**: precision-ls's ``state.pt`` after 3 AdamW steps (``trained_state_pt``); ``import state.pt
  --from precision-ls --spec prefix-coupled --config causal=true --blocks-only``.

Only the selected rows' files are made, each just before its command, and kept under ``--cache`` (default
``/tmp/polyverify-bench-learned-targets``), one subfolder per size named with a hash of the generators'
sources (``GENERATORS``: the generating functions and ``tests/verify/trained_files.py``): a rerun, or another run sharing the folder (an exclusive lock per subfolder),
reuses them.  Writing the learned file takes minutes at 256x64 and more at 512x128.  A change to a
construction or an exporter is not in the hash: ``--no-cache`` writes the files afresh into a temporary
folder.  The JSON records the cache folder.

Each command runs in a fresh interpreter (``--one``: that process's only child, so ``RUSAGE_CHILDREN`` is
the command's own) under an address-space cap (``--memory-gib``) and ``--timeout`` seconds (then killed:
the row says "stopped: timeout").  Reported: the seconds until the first verdict line (``proof:``, the
exact verdict; for import also ``verdict:``, printed after the diagnosis of the nearest construction), wall
seconds of the whole command (gd --weights then runs its float run; import its distances and nearby
search), CPU seconds (user + sys, the command and its reaped children) and peak RSS (``ru_maxrss``: the
largest of them).  A row meets its target where the verdict is FAILED (exit 1), the first verdict line came
within the target's seconds and the peak RSS is within its GiB.  The machine is shared (2 cores): seconds
are noisy, memory is not.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import _timed  # noqa: E402 - the timed runner bench_refute.py shares
#: (seconds, GiB) per size, and for state.pt: the issue's targets
TARGETS = {(64, 16): (5.0, None), (256, 64): (30.0, 2.0), (512, 128): (60.0, 3.0), "state.pt": (60.0, 2.0)}


def _cap(gib: float) -> int:
    return _timed.cap(gib)


#: the generated files are cached under this folder by default (``--cache``), one subfolder per size and
#: generator version: a rerun (or another session's run of ``--runs 'gd --weights'``) reuses them
CACHE = Path("/tmp/polyverify-bench-learned-targets")
#: what decides the generated files: the cache subfolder's name carries a hash of ``tests/verify/trained_files.py``
#: and the source of :func:`files` and ``bench_refute.tampered_file``, so a change to any of them writes fresh
#: files (a change elsewhere, e.g. to a construction or an exporter, needs ``--no-cache`` or the cache folder
#: removed)
GENERATORS = ("tests/verify/trained_files.py", "files", "bench_refute.tampered_file")


def cache_key() -> str:
    import hashlib
    import inspect

    sys.path.insert(0, str(ROOT / "bench"))
    from bench_refute import tampered_file

    h = hashlib.sha256((ROOT / GENERATORS[0]).read_bytes())
    for f in (files, tampered_file):
        h.update(b"\0" + inspect.getsource(f).encode())
    return h.hexdigest()[:12]


def cached(folder: Path, name: str, make) -> Path:
    """``folder/name``, written by ``make(tmp_folder) -> path`` unless it is already there.  Written into a
    fresh folder beside it and renamed into place (``os.replace``), under an exclusive ``flock`` on
    ``folder/.lock``: two bench runs sharing the cache make each file once and never read a partial one."""
    import fcntl
    import shutil

    folder.mkdir(parents=True, exist_ok=True)
    out = folder / name
    if out.exists():  # renamed into place whole: no lock needed to read it (another file may be being made)
        print(f"  reusing {out}", flush=True)
        return out
    with open(folder / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if out.exists():
            print(f"  reusing {out}", flush=True)
            return out
        t0 = time.perf_counter()
        tmp = Path(tempfile.mkdtemp(dir=folder, prefix=".tmp-"))
        try:
            made = Path(make(tmp))
            os.replace(made, out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        print(f"  wrote {out} in {time.perf_counter() - t0:.1f} s", flush=True)
        return out


def files(folder: Path, sizes, state_pt: bool, cache: Path | None = None) -> list[dict]:
    """The rows: size, file kind, command label, and ``make()`` -> argv (after ``python -m
    verify.construct``), which writes the row's file on first use (only the selected rows' files are made).
    ``cache``: the folder the files are kept in between runs (``cached``), one subfolder per size; None:
    ``folder`` (a temporary folder, written afresh)."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_refute import tampered_file

    from tests.verify.trained_files import IDENTITY, trained_module, trained_state_pt

    lay = folder / "identity.json"
    lay.write_text(json.dumps(IDENTITY))
    gd_flags = ["--allow-large", "--quiet", "--batch", "2", "--dtype", "float64"]
    key = cache_key() if cache is not None else None

    def where(size: str) -> Path:
        return folder if cache is None else cache / f"{size}-{key}"

    def keep(size: str, name: str, make) -> Path:
        if cache is None:
            return Path(make(folder))
        return cached(where(size), name, make)

    def learned(n, d, tmp):
        from constructions.catalogue import entries
        from verify import export as E

        con = entries()["gd-baseconv"].build(n=n, d=d)
        path = tmp / f"learned-{n}x{d}.pt"
        E.export(path, trained_module(con, 2, "precision-ls", steps=3), "precision-ls")
        return path

    def state(tmp):
        path = tmp / "state.pt"
        trained_state_pt(path, steps=3)
        return path

    rows = []
    for n, d in sizes:
        size = f"{n}x{d}"
        big = ["--allow-large"] if n * d > 1024 else []  # import's n x d limit of a gd specification

        def tampered(n=n, d=d, size=size):
            return keep(size, f"gd-baseconv-{n}x{d}-k1.safetensors", lambda tmp: tampered_file(n, d, tmp))

        def finetuned(n=n, d=d, size=size):
            return keep(size, f"gd-baseconv-{n}x{d}-k2-finetuned.safetensors",
                        lambda tmp: tampered_file(n, d, tmp, k=2, finetuned=True))

        def trained(n=n, d=d, size=size):
            return keep(size, f"learned-{n}x{d}.pt", lambda tmp: learned(n, d, tmp))

        rows.append({"size": (n, d), "file": "tampered", "run": "gd --weights",
                     "make": lambda t=tampered: ["gd", "--weights", str(t()), *gd_flags]})
        rows.append({"size": (n, d), "file": "tampered", "run": "import",
                     "make": lambda t=tampered, big=big: ["import", str(t()), "--from", "polyverify", *big]})
        rows.append({"size": (n, d), "file": "fine-tuned (every entry + N(0, 1e-3))", "run": "gd --weights",
                     "make": lambda f=finetuned: ["gd", "--weights", str(f()), *gd_flags]})
        rows.append({"size": (n, d), "file": "learned (3 Adam steps)", "run": "import --from precision-ls",
                     "make": lambda f=trained, n=n, d=d, big=big: [
                         "import", str(f()), "--from", "precision-ls", "--spec", "gd-baseconv", "--set", f"n={n}",
                         "--set", f"d={d}", "--layout", str(lay), *big]})
    if state_pt:
        rows.append({"size": "state.pt", "file": "precision-ls state.pt (3 AdamW steps)", "run": "import",
                     "make": lambda: ["import", str(keep("state.pt", "state.pt", state)), "--from", "precision-ls",
                                      "--spec", "prefix-coupled", "--config", "causal=true", "--blocks-only"]})
    return rows


def run(cmd: list[str], cap: int, timeout: float, cwd: Path = ROOT) -> dict:
    """One child under the cap and the timeout (``bench/_timed.py``): exit status, wall seconds, the seconds
    and CPU seconds until its first ``proof:`` and ``verdict:`` lines, its output, and this process's
    children's rusage."""
    r = _timed.run(cmd, cap, timeout, cwd=cwd, env={**os.environ, "PYTHONPATH": str(cwd)},
                   marks=("proof:", "verdict:"))
    ru = r["ru"]
    return {"rc": r["rc"], "timed_out": r["timed_out"], "wall_s": r["wall_s"], "proof_s": r["at"].get("proof:"),
            "verdict_s": r["at"].get("verdict:"), "proof_cpu_s": r["cpu_at"].get("proof:"),
            "verdict_cpu_s": r["cpu_at"].get("verdict:"), "cpu_s": ru.ru_utime + ru.ru_stime,
            "rss_mib": ru.ru_maxrss / 1024, "out": r["out"]}


group_cpu = _timed.group_cpu


def measured(argv: list[str], cap: int, timeout: float, tree: Path = ROOT) -> dict:
    """``python -m verify.construct ARGV`` measured in a fresh bench process (``--one``), in ``tree``."""
    spec = json.dumps({"cmd": [sys.executable, "-m", "verify.construct", *argv], "cap": cap, "timeout": timeout,
                       "tree": str(tree)})
    p = subprocess.run([sys.executable, __file__, "--one", spec], capture_output=True, text=True, cwd=ROOT,
                       timeout=timeout + 120)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"rc": p.returncode, "timed_out": False, "wall_s": None, "proof_s": None, "verdict_s": None,
                "proof_cpu_s": None, "verdict_cpu_s": None,
                "cpu_s": None, "rss_mib": None, "out": (p.stdout + p.stderr)[-3000:]}


def one(spec: str) -> int:
    s = json.loads(spec)
    r = run(s["cmd"], s["cap"], s["timeout"], Path(s.get("tree", ROOT)))
    r["out"] = r["out"][-4000:]
    print(json.dumps(r))
    return 0


def verdict_of(m: dict) -> str:
    if m.get("timed_out"):
        return "stopped: timeout" + (" (after FAILED)" if m.get("proof_s") is not None and m["rc"] != 0 else "")
    out = m.get("out") or ""
    if m.get("rc") == 2:
        return "exit 2: " + (out.strip().splitlines() or [""])[-1][:120]
    return {0: "PROVED", 1: "FAILED"}.get(m.get("rc"), f"exit {m.get('rc')}")


#: the files this work changed (issue 41 item 1's exact evaluation): ``--baseline-commit`` takes them as at
#: that commit
CHANGED = ("constructions/ops.py", "verify/prover/refute.py", "verify/importers/search.py")


def trees(folder: Path, commit: str, changed: tuple = CHANGED) -> tuple[Path, Path]:
    """Two copies of the committed tree (``git archive HEAD``): as it is, and with ``changed`` (default
    :data:`CHANGED`) as at ``commit`` (the baseline); the same interpreter and the same everything else."""
    out = []
    for name in ("new", "baseline"):
        d = folder / name
        d.mkdir()
        tar = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(d)], input=tar, check=True)
        if name == "baseline":
            for path in changed:
                src = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=ROOT, capture_output=True, check=True)
                (d / path).write_bytes(src.stdout)
        out.append(d)
    return out[0], out[1]


def target_met(row: dict, m: dict) -> tuple[str | None, bool | None]:
    """The row's target and whether ``m`` meets it: FAILED (exit 1, or killed at the timeout after its
    FAILED line), the first verdict line within the target's seconds, the peak RSS within its GiB.  A size
    the issue sets no target for (a smoke run's): ``(None, None)``."""
    if row["size"] not in TARGETS:
        return None, None
    secs, gib = TARGETS[row["size"]]
    first = m.get("proof_s")
    met = (m.get("rc") == 1 or verdict_of(m).startswith("stopped: timeout (after FAILED")) and first is not None \
        and first <= secs and (gib is None or (m.get("rss_mib") or 1e9) <= gib * 1024)
    return f"FAILED <= {secs:g} s" + (f", <= {gib:g} GiB" if gib else ""), bool(met)


def table(rows: list[dict]) -> str:
    """The rows as a markdown table (the bench's JSON ``rows``; ``--table FILE.json`` prints a written one):
    the seconds and the CPU seconds (user + sys of the command's processes, ``group_cpu``) until its
    ``proof:`` and ``verdict:`` lines, then the whole command's."""
    out = ["| size | file | command | verdict | proof: at s | proof: CPU s | verdict: at s | verdict: CPU s | wall s "
           "| CPU s | peak RSS MiB | load at start | target | met |", "|" + "---|" * 14]
    for r in rows:
        met = "-" if r.get("met") is None else "yes" if r["met"] else "NO"
        cells = [r["size"], r["file"], r["run"], r["verdict"], r.get("proof_line_s"), r.get("proof_line_cpu_s"),
                 r.get("verdict_line_s"), r.get("verdict_line_cpu_s"), r.get("wall_s"), r.get("cpu_s"),
                 r.get("peak_rss_mib"), r.get("load_at_start"), r.get("target") or "-", met]
        out.append("| " + " | ".join("-" if c is None else str(round(c, 2) if isinstance(c, float) else c)
                                     for c in cells) + " |")
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="64x16,256x64,512x128")
    p.add_argument("--timeout", type=float, default=240.0, help="seconds per command, then killed (default 240)")
    p.add_argument("--memory-gib", type=float, default=8.0, help="address-space cap per command (default 8)")
    p.add_argument("--no-state-pt", action="store_true", help="leave out the state.pt row")
    p.add_argument("--json", default=str(ROOT / "bench" / "results" / "import_trained" / "learned_targets.json"))
    p.add_argument("--baseline-commit", help="also run each learned import with --no-search (its verdict only), in "
                                             "the committed tree and in that tree with " + ", ".join(CHANGED) +
                                             " as at this commit: CPU and wall ratios")
    p.add_argument("--only-baseline", action="store_true", help="with --baseline-commit: only those two runs per row")
    p.add_argument("--changed", help="with --baseline-commit: the files taken as at that commit, comma-separated "
                                     "(default " + ",".join(CHANGED) + ")")
    p.add_argument("--baseline-all", action="store_true",
                   help="with --baseline-commit: every row (its own command, search included) in both trees, "
                        "instead of the learned imports with --no-search")
    p.add_argument("--runs", help="only the rows whose command label starts with one of these, comma-separated "
                                  "(e.g. 'gd --weights')")
    p.add_argument("--files", help="only the rows whose file label starts with one of these, comma-separated "
                                   "(e.g. 'tampered')")
    p.add_argument("--cache", default=str(CACHE),
                   help=f"folder the generated files are kept in, one subfolder per size and generator version, so "
                        f"a rerun reuses them (writing the 512x128 learned file takes minutes; default {CACHE})")
    p.add_argument("--no-cache", action="store_true", help="write the files afresh into a temporary folder")
    p.add_argument("--table", metavar="FILE.json", help="print the markdown table of a JSON this bench wrote, and "
                                                          "exit")
    p.add_argument("--one", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.one:
        return one(a.one)
    if a.table:
        print(table(json.loads(Path(a.table).read_text())["rows"]))
        return 0
    sizes = [tuple(int(x) for x in s.split("x")) for s in a.sizes.split(",") if s]
    cap = _cap(a.memory_gib)
    out_rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cache = None if a.no_cache else Path(a.cache)
        rows = files(Path(tmp), sizes, not a.no_state_pt, cache)
        changed = tuple(x for x in a.changed.split(",") if x) if a.changed else CHANGED
        pair = trees(Path(tmp), a.baseline_commit, changed) if a.baseline_commit else None
        if a.runs:
            rows = [r for r in rows if r["run"].startswith(tuple(x.strip() for x in a.runs.split(",") if x.strip()))]
        if a.files:
            rows = [r for r in rows if r["file"].startswith(tuple(x.strip() for x in a.files.split(",") if x.strip()))]
        for row in rows:  # each row's file made (or found in the cache) just before its command
            row["argv"] = row.pop("make")()
            argv_ = row["argv"] + ["--proof-memory-gib", f"{cap / 2**30 * 0.9:.2f}", "--proof-timeout",
                                   f"{a.timeout:.0f}"]
            if pair is not None and (a.baseline_all or row["run"].startswith("import") and
                                     row["file"].startswith("learned")):
                both = {}
                extra = [] if a.baseline_all else ["--no-search"]
                for name, tree in zip(("committed tree", f"baseline ({a.baseline_commit})"), pair):
                    load = round(os.getloadavg()[0], 2)
                    m = measured(argv_ + extra, cap, a.timeout, tree)
                    both[name] = m
                    size = "x".join(map(str, row["size"]))
                    target, met = target_met(row, m) if a.baseline_all else (None, None)
                    r = {"size": size, "file": row["file"], "run": f"{row['run']}{' '.join([''] + extra)}, {name}",
                         "verdict": verdict_of(m), "proof_line_s": m.get("proof_s"), "verdict_line_s": m.get("verdict_s"),
                         "proof_line_cpu_s": m.get("proof_cpu_s"), "verdict_line_cpu_s": m.get("verdict_cpu_s"),
                         "wall_s": m.get("wall_s"), "cpu_s": m.get("cpu_s"), "peak_rss_mib": m.get("rss_mib"),
                         "load_at_start": load, "target": target, "met": met, "tail": (m.get("out") or "")[-800:]}
                    out_rows.append(r)
                    print(json.dumps({k: v for k, v in r.items() if k != "tail"}), flush=True)
                new_, old_ = both.values()
                if new_.get("cpu_s") and old_.get("cpu_s"):
                    print(f"{size}: baseline / committed: CPU {old_['cpu_s'] / new_['cpu_s']:.1f}x, wall "
                          f"{old_['wall_s'] / new_['wall_s']:.1f}x", flush=True)
            if a.only_baseline or a.baseline_all:  # --baseline-all: the committed tree's run above is the row
                continue
            load = round(os.getloadavg()[0], 2)
            m = measured(argv_, cap, a.timeout)
            v = verdict_of(m)
            target, met = target_met(row, m)
            first = m.get("proof_s")
            size = row["size"] if isinstance(row["size"], str) else "x".join(map(str, row["size"]))
            r = {"size": size, "file": row["file"], "run": row["run"], "verdict": v,
                 "proof_line_s": None if first is None else round(first, 2),
                 "verdict_line_s": None if m.get("verdict_s") is None else round(m["verdict_s"], 2),
                 "proof_line_cpu_s": m.get("proof_cpu_s"), "verdict_line_cpu_s": m.get("verdict_cpu_s"),
                 "wall_s": None if m.get("wall_s") is None else round(m["wall_s"], 2),
                 "cpu_s": None if m.get("cpu_s") is None else round(m["cpu_s"], 2),
                 "peak_rss_mib": None if m.get("rss_mib") is None else round(m["rss_mib"], 1),
                 "load_at_start": load, "target": target, "met": met,
                 "command": "python -m verify.construct " + " ".join(row["argv"]),
                 "tail": (m.get("out") or "")[-800:]}
            out_rows.append(r)
            print(json.dumps({k: v for k, v in r.items() if k not in ("tail", "command")}), flush=True)
    print("\n" + table(out_rows))
    out = Path(a.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    from polyverify.plumbing.cli import atomic_write_text

    atomic_write_text(out, json.dumps({"command": "python bench/bench_learned_targets.py " + shlex.join(
        sys.argv[1:] if argv is None else argv), "memory_cap_gib": cap / 2**30, "timeout_s": a.timeout,
        "files_cache": None if a.no_cache else a.cache, "load_average_at_end": list(os.getloadavg()),
        "cores": os.cpu_count(), "rows": out_rows}, indent=1), "--json")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
