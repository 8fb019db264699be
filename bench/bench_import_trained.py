"""A trained peer checkpoint gets its verdict (issue 41 item 1): time and peak memory of ``import`` without
``--set eta`` on files a few optimizer steps from a construction, and on an untouched one.

    python bench/bench_import_trained.py [--memory-gib 2] [--timeout 600] [--sizes 4x2,20x5]
        [--baseline-commit COMMIT] [--baseline-memory-gib 2] [--before-commit COMMIT]
        [--json bench/results/import_trained/results.json]

Files (``tests/verify/trained_files.py``):

* ``gd-baseconv NxD trained``: ``gd-baseconv`` (eta 1/16, k = 2, unshared body) as a
  ``polyverify.torch.load_module`` module, 3 Adam steps, exported to precision-ls
  (``verify.export.export``); ``import FILE --from precision-ls --spec gd-baseconv --set n=N --set d=D
  --layout identity.json`` (the issue's command, with its nearby search);
* ``state.pt trained``: precision-ls's ``state.pt`` (``src/train.py``'s layout) of the notebook's
  ``TransformerModel`` (D = 2, N = 4, two GD steps) after 3 AdamW steps; ``import state.pt --from
  precision-ls --spec prefix-coupled --config causal=true --blocks-only`` (the issue's other command);
* ``gd-baseconv 4x2 untouched, eta = 1/10``: the same module untouched at a step size that is no float
  (must be PROVED with eta read from the file).

Each runs ``python -m verify.construct import ...`` in a fresh interpreter with ``--proof-memory-gib``
(``--memory-gib``) and ``--proof-timeout`` (``--timeout``).  Reported: exit status and verdict (or the
limit that stopped it), eta as read, wall seconds, CPU seconds (user + sys of the command and its reaped
children: the proof's child) and peak RSS (``ru_maxrss`` of the children: the largest process).  Targets of
the issue: FAILED with an exact counterexample within 60 s and 2 GiB.

``--baseline-commit C`` runs the trained files once more with ``verify/importers/search.py`` and ``prove.py``
as they were at commit ``C`` (read with ``git show`` and installed in place of the modules in that interpreter
only; the rest is the working tree), with ``--no-search``: the solve that ran the file's layers in symbols.  The
machine is shared (2 cores): the seconds are noisy, the memory is not.

``--before-commit C`` runs each trained file once more through the same command, nearby search included,
with ``search.py`` and ``prove.py`` as at ``C`` (before/after of a change to the search: the rows'
``solve`` says which).  The profile of the 20x5 file's search (cProfile, the children run inline) before
the nearby readings' refutations stopped shrinking their counterexamples: ``refute._shrink`` was about half
of the search, the first exact evaluation at the point the other half (``ops._mm_columns`` on Fractions).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))
from polyverify.plumbing.cli import (Parser, UsageError, atomic_write_text, check_finite, output_file,  # noqa: E402
                                     run_main)
sys.path.insert(0, str(ROOT / "bench"))
from _args import gd_sizes  # noqa: E402

TARGET_S, TARGET_GIB = 60.0, 2.0

#: run in the child for a baseline: the old search and prove modules in place of the new, then the CLI
_BASELINE = """
import sys, types
folder = sys.argv.pop(1)
import verify.importers as pkg
for name in ("search", "prove"):
    mod = types.ModuleType("verify.importers." + name)
    mod.__file__, mod.__package__ = "verify/importers/" + name + ".py@baseline", "verify.importers"
    sys.modules[mod.__name__] = mod
    setattr(pkg, name, mod)
    exec(compile(open(folder + "/" + name + ".py").read(), mod.__file__, "exec"), mod.__dict__)
from verify.construct import main
sys.exit(main(sys.argv[1:]))
"""
#: the command run by a wrapper interpreter that reports its children's CPU and peak RSS (each run's own)
_MEASURED = """
import json, resource, subprocess, sys
rc = subprocess.call(sys.argv[1:])
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": rc, "cpu_s": r.ru_utime + r.ru_stime, "peak_kib": r.ru_maxrss}), file=sys.stderr)
"""


def files(folder: Path, sizes) -> list[dict]:
    """The benchmark's cells: name, the import arguments (after ``import``)."""
    sys.path.insert(0, str(ROOT))
    from fractions import Fraction

    from tests.verify.trained_files import IDENTITY, trained_precision_ls, trained_state_pt

    lay = folder / "identity.json"
    lay.write_text(json.dumps(IDENTITY))
    cells = []
    for n, d in sizes:
        p = folder / f"gd-baseconv-{n}x{d}-trained.pt"
        trained_precision_ls(p, n=n, d=d, steps=3)
        cells.append({"name": f"gd-baseconv {n}x{d} trained (3 Adam steps), precision-ls", "trained": True,
                      "argv": [str(p), "--from", "precision-ls", "--spec", "gd-baseconv", "--set", f"n={n}",
                               "--set", f"d={d}", "--layout", str(lay)]})
    p = folder / "state.pt"
    trained_state_pt(p, steps=3)
    cells.append({"name": "precision-ls state.pt trained (3 AdamW steps), prefix-coupled --blocks-only",
                  "trained": True, "argv": [str(p), "--from", "precision-ls", "--spec", "prefix-coupled", "--config",
                                            "causal=true", "--blocks-only"]})
    p = folder / "gd-baseconv-4x2-eta10.pt"
    trained_precision_ls(p, steps=0, eta=Fraction(1, 10))
    cells.append({"name": "gd-baseconv 4x2 untouched, eta = 1/10, precision-ls", "trained": False,
                  "argv": [str(p), "--from", "precision-ls", "--spec", "gd-baseconv", "--set", "n=4", "--set", "d=2",
                           "--layout", str(lay)]})
    return cells


def run(argv: list[str], memory_gib: float, timeout: float, json_path: Path, baseline: Path | None,
        search: bool = False) -> dict:
    """The command in a fresh interpreter; its exit status, verdict, eta, wall, CPU and peak RSS."""
    cmd = [sys.executable, "-c", _BASELINE, str(baseline)] if baseline else [sys.executable, "-m", "verify.construct"]
    cmd += ["import", *argv, "--json", str(json_path), "--proof-memory-gib", f"{memory_gib:g}",
            "--proof-timeout", f"{timeout:g}"]
    if baseline and not search:
        cmd.insert(cmd.index("--json"), "--no-search")  # the verdict only: the old solve is the subject
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", _MEASURED, *cmd], cwd=ROOT, capture_output=True, text=True,
                       timeout=timeout + 120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall = time.perf_counter() - t0
    m = json.loads(p.stderr.strip().splitlines()[-1])
    err = p.stderr.strip().splitlines()[:-1]
    out = p.stdout.splitlines()
    verdict = next((x for x in out if x.startswith("verdict:")), None)
    rep = json.loads(json_path.read_text()) if json_path.exists() else {}
    json_path.unlink(missing_ok=True)
    eta = (rep.get("parameters") or {}).get("eta", {})
    return {"rc": m["rc"], "verdict": (verdict or (err[-1] if err else ""))[:200],
            "counterexample": any("counterexample:" in x for x in out), "eta": eta.get("value"),
            "eta_from": eta.get("from"), "wall_s": round(wall, 2),
            "cpu_s": round(m["cpu_s"], 2), "peak_rss_gib": round(m["peak_kib"] / 2 ** 20, 3)}


def _modules_at(commit: str, folder: Path) -> Path:
    """``verify/importers/search.py`` and ``prove.py`` as at ``commit``, written into ``folder``."""
    folder.mkdir()
    for name in ("search", "prove"):
        src = subprocess.run(["git", "show", f"{commit}:verify/importers/{name}.py"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout
        (folder / f"{name}.py").write_text(src)
    return folder


def _check_commit(flag: str, commit: str | None) -> None:
    """``commit`` (when given) holds the two modules :func:`_modules_at` reads, or a UsageError naming ``flag``."""
    if commit is None:
        return
    for name in ("search", "prove"):
        spec = f"{commit}:verify/importers/{name}.py"
        if commit.startswith("-") or subprocess.run(["git", "cat-file", "-e", spec], cwd=ROOT,
                                                    capture_output=True).returncode != 0:
            raise UsageError(f"{flag} {commit}: no verify/importers/{name}.py at that commit in {ROOT}")


def _main(argv) -> int:
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--memory-gib", type=float, default=TARGET_GIB)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--sizes", default="4x2,20x5")
    ap.add_argument("--baseline-commit")
    ap.add_argument("--baseline-memory-gib", type=float, default=TARGET_GIB)
    ap.add_argument("--baseline-timeout", type=float, default=300)
    ap.add_argument("--before-commit")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    # every argument and the output path checked before any file is made or command run
    for flag in ("--memory-gib", "--timeout", "--baseline-memory-gib", "--baseline-timeout"):
        check_finite(flag, getattr(a, flag[2:].replace("-", "_")), positive=True)
    sizes = gd_sizes("--sizes", a.sizes, like="20x5")
    _check_commit("--baseline-commit", a.baseline_commit)
    _check_commit("--before-commit", a.before_commit)
    output_file("--json", a.json)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        base = _modules_at(a.baseline_commit, folder / "baseline") if a.baseline_commit else None
        before = _modules_at(a.before_commit, folder / "before") if a.before_commit else None
        for cell in files(folder, sizes):
            if before is not None and cell["trained"]:
                r = run(cell["argv"], a.memory_gib, a.timeout, folder / "r.json", before, search=True)
                row = {"file": cell["name"], "solve": f"integer points (before: {a.before_commit})", **r}
                rows.append(row)
                print(json.dumps(row), flush=True)
            r = run(cell["argv"], a.memory_gib, a.timeout, folder / "r.json", None)
            ok = (r["rc"] == 1 and r["counterexample"]) if cell["trained"] else r["rc"] == 0
            row = {"file": cell["name"], "solve": "integer points", **r,
                   "meets_target": ok and r["wall_s"] <= TARGET_S and r["peak_rss_gib"] <= a.memory_gib}
            rows.append(row)
            print(json.dumps(row), flush=True)
            if base is not None and cell["trained"]:
                r = run(cell["argv"], a.baseline_memory_gib, a.baseline_timeout, folder / "r.json", base)
                row = {"file": cell["name"], "solve": f"symbolic (baseline {a.baseline_commit}, --no-search)", **r}
                rows.append(row)
                print(json.dumps(row), flush=True)
    print("\n| file | solve | exit | eta | wall s | CPU s | peak GiB | verdict |\n|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['file']} | {r['solve']} | {r['rc']} | {r['eta']} | {r['wall_s']} | {r['cpu_s']} | "
              f"{r['peak_rss_gib']} | {r['verdict'][:90]} |")
    if a.json:
        atomic_write_text(a.json, json.dumps({"command": " ".join(sys.argv), "rows": rows}, indent=1), "--json")
    return 0


def main(argv=None) -> int:
    """The command: a bad argument or output path is one ``error:`` line and exit status 2, before any work."""
    return run_main(_main, argv)


if __name__ == "__main__":
    sys.exit(main())
