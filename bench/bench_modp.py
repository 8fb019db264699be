"""Modular forward: ``verify.prover.modular``'s hand-vectorised int64 forward against each layer's own
``Layer.forward`` on residues (``verify.prover.modp``), on the circuit command's trials and on the
randomized check (``--check random``).

    python bench/bench_modp.py [--repeat 3] [--json FILE]

Each case is one command, run in a fresh interpreter per path, in rounds (every path once per
round, so that the machine's drift hits all alike).  The paths: ``hand`` (``verify.prover.modular``'s
hand-written int64 forward for the kinds that register one: what the randomized check runs),
``layer`` (every kind through its own ``Layer.forward`` on ``verify.prover.modp.Residues``: what the
circuit command's trials run, ``verify.prover.modular.TRIALS_FORWARD``) and, for the randomized check, which
evaluates one point, ``nmod`` (``Layer.forward`` on python-flint's ``nmod`` scalars).  The table
gives the median wall time of the whole command, the median time of the part that differs (the
circuit command's modular trials, as it prints them; the randomized check's own seconds, as its
JSON records them) and each path's ratio to ``hand``.  Every path must give the same verdict
(checked).
"""
from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))
from polyverify.plumbing.cli import (Parser, atomic_write_text, check_range, output_file,  # noqa: E402
                                     run_main)  # (one-line errors, exit 2)

#: runs verify.construct with the modular path chosen by argv[1]: "hand" (verify.prover.modular's forward
#: everywhere), "layer" (Layer.forward on verify.prover.modp's Residues everywhere), "nmod" (one point:
#: Layer.forward on python-flint's nmod scalars; only where the command evaluates one point,
#: --check random)
RUNNER = """
import sys
import numpy as np
import verify.prover.modular as M
from verify.prover import modp
M.TRIALS_FORWARD = "hand" if sys.argv[1] == "hand" else "layer"
if sys.argv[1] != "hand":
    M.layer_residues = lambda L, p: {"kind": "generic", "layer": modp.layer_mod(L, p, lambda q: M.residue(q, p))}
if sys.argv[1] == "nmod":
    import flint
    from constructions import ops

    def one_point(layer, u, p):
        assert u.shape[0] == 1
        S = ops.zeros_like_object(u.shape[1:])
        for ix in zip(*np.nonzero(u[0])):
            S[ix] = flint.nmod(int(u[0][ix]), p)
        X = np.asarray(layer.forward(S), dtype=object)
        return np.array([[int(x) % p for x in row] for row in X], dtype=np.int64)[None]
    modp.forward_trials = one_point
from polyverify.plumbing.cli import run_main
from verify.construct import main
sys.exit(run_main(main, sys.argv[2:]))
"""

PATHS = ("hand", "layer", "nmod")
#: the most rounds --repeat asks for (each round runs every case on every path, a fresh interpreter each)
MAX_REPEAT = 20


def cases(tmp: Path) -> dict[str, list[str]]:
    """name -> verify.construct argv (circuit files written under ``tmp``)."""
    import circuits as C

    out = {}
    for n, d in ((20, 5), (40, 10)):
        f = tmp / f"gd_step_{n}x{d}.json"
        C.dump(C.gd_step(n, d, Fraction(1, 16), placed=True), f)
        for target in ("baseconv", "lsa", "elsa"):
            for trials in (64, 2048) if (n, d) == (20, 5) else (64,):
                out[f"circuit gd_step({n},{d}) --target {target} --trials {trials}"] = [
                    "circuit", "--graph", str(f), "--target", target, "--trials", str(trials)]
    for arch in ("baseconv", "baseconv-causal", "lsa", "elsa", "token-lsa", "compiled-lsa", "compiled-elsa"):
        out[f"gd --arch {arch} --n 64 --d 16 --check random"] = [
            "gd", "--arch", arch, "--layers", "5" if arch == "compiled-lsa" else "4", "--n", "64", "--d", "16",
            "--check", "random", "--random-seed", "1"]
    return out


def run_one(path: str, argv: list[str], tmp: Path, tries: int = 3) -> dict:
    """One command on one path; a run that leaves no result (the trials line, the JSON report) is
    run again, up to ``tries`` times (a shared working tree may be mid-edit), then refused."""
    js = tmp / f"out_{path}.json"
    extra = ["--json", str(js)] if argv[0] == "gd" else []
    for _ in range(tries):
        js.unlink(missing_ok=True)
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-c", RUNNER, path, *argv, *extra], cwd=ROOT, capture_output=True,
                           text=True)
        wall = time.perf_counter() - t0
        if argv[0] == "circuit":
            m = re.search(r"(\d+)/(\d+) agree exactly with the circuit \(([\d.]+) s", r.stdout)
            if m is not None:
                return {"wall": wall, "part": float(m.group(3)), "verdict": m.group(1)}
        elif js.exists():
            rnd = _find(json.loads(js.read_text()), "error_bound_text")
            return {"wall": wall, "part": float(rnd["seconds"]), "verdict": rnd["verdict"]}
        time.sleep(5)
    raise SystemExit(f"{path} {' '.join(argv)}: no result in {tries} runs (exit {r.returncode}): "
                     f"{(r.stderr or r.stdout).strip()[-400:]}")


def _find(d, key):
    """The dict inside the JSON report that holds ``key`` (the randomized result)."""
    if isinstance(d, dict):
        if key in d:
            return d
        for v in d.values():
            hit = _find(v, key)
            if hit is not None:
                return hit
    if isinstance(d, list):
        for v in d:
            hit = _find(v, key)
            if hit is not None:
                return hit
    return None


def _main(argv) -> int:
    ap = Parser(prog="bench/bench_modp.py", description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    # the arguments and the output path checked before any command runs
    check_range("--repeat", a.repeat, 1, MAX_REPEAT)
    output_file("--json", a.json)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for name, args in cases(tmp).items():
            paths = PATHS if args[0] == "gd" else PATHS[:2]
            got = {p: [] for p in paths}
            for _ in range(a.repeat):
                for p in paths:
                    got[p].append(run_one(p, args, tmp))
            verdicts = {r["verdict"] for p in paths for r in got[p]}
            if len(verdicts) != 1:
                raise SystemExit(f"{name}: the paths disagree: {verdicts}")
            med = {p: {k: statistics.median(r[k] for r in got[p]) for k in ("wall", "part")} for p in paths}
            row = {"case": name, "verdict": verdicts.pop(), "median": med,
                   "ratio_wall": {p: med[p]["wall"] / med["hand"]["wall"] for p in paths[1:]},
                   "ratio_part": {p: med[p]["part"] / max(med["hand"]["part"], 1e-9) for p in paths[1:]}}
            rows.append(row)
            print(f"{name}: command " + ", ".join(f"{p} {med[p]['wall']:.2f} s" for p in paths)
                  + "; modular part " + ", ".join(f"{p} {med[p]['part']:.3f} s" for p in paths)
                  + "; ratio to hand (command / part) "
                  + ", ".join(f"{p} x{row['ratio_wall'][p]:.2f} / x{row['ratio_part'][p]:.2f}" for p in paths[1:]),
                  flush=True)
    if a.json:
        meta = {"command": "python bench/bench_modp.py" + (f" --repeat {a.repeat}" if a.repeat != 3 else "")
                + f" --json {a.json}", "finished": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                "load_average": list(os.getloadavg()), "cpus": os.cpu_count()}
        atomic_write_text(a.json, json.dumps({**meta, "repeat": a.repeat, "rows": rows}, indent=1) + "\n", "--json")
    return 0


def main(argv=None) -> int:
    """The command: a bad argument or output path is one ``error:`` line and exit status 2, before any work."""
    return run_main(_main, argv)


if __name__ == "__main__":
    sys.exit(main())
