"""``python bench/bench_default_compile.py [--src TREE] [--json FILE] [--quick]``: the CPU seconds of the
unbounded (default) ``compile_circuit`` on ``baseconv`` and ``baseconv-causal`` over a fixed set of placed
circuits: the compiler report's builders at its default sizes, and random / block circuits of the compiler
bench (``bench/bench_compiler.py``'s families) at 200 and 1,000 gates.

``--src TREE``: import the compiler from another checkout (``git archive COMMIT | tar -x -C TREE``), so a
baseline and this tree are timed by the same script on the same machine.  Each compile runs once with the
compiler's memos cleared first (``budget_search._CACHE``, ``linearise._MEMO``), process time (user + sys).
Rows: ``{"case", "target", "gates", "layers", "width", "cpu_s"}``; a refusal is a row with ``"refused"``.
"""
from __future__ import annotations

import json
import os
import sys
import time
import warnings

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in sys.path:  # the CLI plumbing of this tree (a --src tree's compiler is imported later)
    sys.path.insert(0, _ROOT)
from polyverify.plumbing.cli import Parser, UsageError, atomic_write_text, output_file, run_main  # noqa: E402


def cases(quick: bool):
    from fractions import Fraction

    import circuits as C

    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(1, here)
    from bench_compiler import family_circuit  # noqa: E402

    f = Fraction(1, 16)
    out = {
        "dot20": lambda: C.dot(20, placed=True),
        "matvec20x5": lambda: C.matvec(20, 5, placed=True),
        "gd_step20x5": lambda: C.gd_step(20, 5, f, placed=True),
        "gd_step_gram20x5": lambda: C.gd_step(20, 5, f, placed=True, form="gram"),
        "ridge_gd_step20x5": lambda: C.ridge_gd_step(20, 5, f, Fraction(1, 10), placed=True),
        "newton_schulz5x20": lambda: C.newton_schulz_step(5, 20, placed=True),
        "horner6": lambda: C.horner([Fraction((-1) ** k, k + 1) for k in range(6)], placed=True),
    }
    sizes = (200,) if quick else (200, 1000)
    for fam in ("random", "blocks"):
        for n in sizes:
            out[f"{fam}{n}"] = (lambda fam=fam, n=n: family_circuit(fam, 0, n, True))
    if quick:
        out = {k: out[k] for k in ("dot20", "gd_step20x5", "random200")}
    return out


def _main(argv) -> int:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--src", help="import the compiler from this tree (a baseline checkout)")
    p.add_argument("--json", help="write the rows here (atomically)")
    p.add_argument("--quick", action="store_true", help="3 circuits (a smoke run)")
    a = p.parse_args(argv)
    # every argument and the output path checked before any compile
    if a.src is not None and not os.path.isdir(os.path.join(a.src, "constructions", "compiler")):
        raise UsageError(f"--src {a.src!r} holds no constructions/compiler")
    output_file("--json", a.json)
    if a.src is not None:
        sys.path.insert(0, os.path.abspath(a.src))
        # the other tree's modules throughout: forget this tree's plumbing, imported above for the checks
        # (this module keeps its own references), so the --src tree's compiler imports its own
        for name in [m for m in sys.modules if m == "polyverify" or m.startswith("polyverify.")]:
            del sys.modules[name]
    else:
        sys.path.insert(0, _ROOT)
    import circuits as C
    from constructions.compiler import budget_search, compile_circuit, linearise

    rows = []
    for name, make in cases(a.quick).items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", C.PrunedNodesWarning)
            g = make()
        gates = sum(1 for _, op in g.nodes(data="op") if op in ("add", "mul"))
        for target in ("baseconv", "baseconv-causal"):
            budget_search._CACHE.clear()
            linearise._MEMO.clear()
            t0 = time.process_time()
            try:
                cm = compile_circuit(g, target=target).info["compiled"]
                row = {"layers": cm["layers"], "width": cm["state_width"]}
            except Exception as e:  # noqa: BLE001 - a refusal is a row
                row = {"refused": str(e).splitlines()[0][:120]}
            row = {"case": name, "target": target, "gates": gates, **row,
                   "cpu_s": round(time.process_time() - t0, 3)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    total = round(sum(r["cpu_s"] for r in rows), 2)
    print(f"total {total} s CPU over {len(rows)} compiles (src {a.src or 'this tree'})")
    if a.json:
        atomic_write_text(a.json, json.dumps({"src": a.src, "rows": rows, "total_cpu_s": total}, indent=1) + "\n",
                          "--json")
    return 0


def main(argv=None) -> int:
    """The command: a bad argument or output path is one ``error:`` line and exit status 2, before any compile."""
    return run_main(_main, argv)


if __name__ == "__main__":
    sys.exit(main())
