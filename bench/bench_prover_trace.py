"""How one proof reads: the calls that cross from one prover file to another during ``prove(gd_baseconv(4, 2))``
(issue 40's measure of a kernel that reads one way).  Prints the cross-file calls per directed edge, the project
files run, and the back edges (a call from a file to one that (transitively) called it: a callback).

    python bench/bench_prover_trace.py [--refute]      # --refute: with the refutation that runs first by default
"""
from __future__ import annotations

import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from polyverify.plumbing.cli import Parser, run_main  # noqa: E402


def trace(refute: bool) -> tuple[collections.Counter, set]:
    from constructions.gd_baseconv import gd_baseconv
    from verify.prover.kernel import Verdict, verdict
    from verify.prover.proof import prove

    con = gd_baseconv(4, 2)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    edges: collections.Counter = collections.Counter()
    files: set = set()

    def rel(f):
        return f[len(root):] if f.startswith(root) and os.sep + ".venv" not in f else None

    def prof(frame, event, arg):
        if event != "call":
            return
        callee = rel(frame.f_code.co_filename)
        if callee is None:
            return
        files.add(callee)
        back = frame.f_back
        caller = rel(back.f_code.co_filename) if back is not None else None
        if caller and callee != caller and callee.startswith("verify/prover/") and caller.startswith("verify/prover/"):
            edges[(caller, callee)] += 1

    sys.setprofile(prof)
    try:
        res = prove(con, refute=refute)
    finally:
        sys.setprofile(None)
    assert verdict(res) is Verdict.PROVED
    return edges, files


def _main(argv) -> int:
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--refute", action="store_true", help="trace the default prove(), refutation first")
    a = ap.parse_args(argv)
    edges, files = trace(a.refute)
    prover = sorted(f for f in files if f.startswith("verify/prover/"))
    print(f"project files run: {len(files)}; prover files: {len(prover)} ({', '.join(p.split('/')[-1] for p in prover)})")
    print(f"cross-file calls between prover files: {sum(edges.values())} over {len(edges)} directed edges")
    for (a_, b), c in sorted(edges.items()):
        back = " (back edge: a callback)" if (b, a_) in edges else ""
        print(f"  {a_.split('/')[-1]} -> {b.split('/')[-1]}: {c}{back}")
    return 0


def main(argv=None) -> int:
    """The command: a bad argument is one ``error:`` line and exit status 2, before the traced proof."""
    return run_main(_main, argv)


if __name__ == "__main__":
    sys.exit(main())
