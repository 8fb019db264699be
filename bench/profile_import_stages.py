"""Where an ``import`` spends its memory and CPU, stage by stage (issue 41 item 1's 512x128 targets).

    python bench/profile_import_stages.py [--cprofile OUT.prof] [--top 25] -- import FILE --from FORMAT ...

Runs the command's stages in this one process (no proof child: the stages the command runs in its
children run here, one after the other, as the children would see them), each public stage function
wrapped: its wall seconds, CPU seconds (``time.process_time``: this process, user + sys), resident
memory before and after, and its peak (``VmHWM`` of ``/proc/self/status``, reset through
``/proc/self/clear_refs`` at each stage's start, so a stage's peak is its own; an enclosing stage's peak
is the largest of its own and its inner stages').  A stage called several times is one row per call.

The stages: reading the file (the format's ``read``), the projection (``mapping.parse``,
``mapping.check_carried``), the parameter solve (``search.solve_param``, with its modular part), the
proof (``search.prove_stack``: the refutation ``refute.refute``, ``proof.prove``), the nearest
construction (``nearest.import_nearest``), the functional distance (``functional_distance.for_import``) and
the nearby search (``prove._nearby``: variants, ``nearby_specifications``).

The command's own peak is the parent's (the file read, the projection) plus the larger of its children's
additions; here they add up in one process, so the table's peaks are each stage's, with what was resident
before it (the ``rss before`` column).  ``--cprofile``: the whole run under ``cProfile`` (slower; the
stage table then includes its overhead), written to OUT.prof and its ``--top`` functions by cumulative
time printed.
"""
from __future__ import annotations

import argparse
import functools
import io
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from polyverify.plumbing.cli import (Parser, UsageError, atomic_path, check_range, input_file,  # noqa: E402
                                     output_file, run_main)


def _status() -> dict[str, int]:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                k, v = line.split(":")
                out[k] = int(v.split()[0]) * 1024
    return out


def _reset_peak() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:  # not Linux, or not allowed: the peaks are then the process's so far
        pass


class Stages:
    """The wrapped stages' rows and the stack of the ones running."""

    def __init__(self):
        self.rows: list[dict] = []
        self.stack: list[dict] = []
        self.t0 = time.perf_counter()
        self.live = True

    def wrap(self, owner, attr: str, label: str) -> None:
        fn = getattr(owner, attr)

        @functools.wraps(fn)
        def timed(*a, **kw):
            hwm = _status()["VmHWM"]
            for f in self.stack:
                f["peak"] = max(f["peak"], hwm)
            _reset_peak()
            st = _status()
            row = {"stage": label, "depth": len(self.stack), "start_s": time.perf_counter() - self.t0,
                   "rss_before": st["VmRSS"], "peak": st["VmRSS"], "cpu0": time.process_time(),
                   "wall0": time.perf_counter()}
            self.rows.append(row)
            self.stack.append(row)
            try:
                return fn(*a, **kw)
            finally:
                st = _status()
                for f in self.stack:
                    f["peak"] = max(f["peak"], st["VmHWM"])
                self.stack.pop()
                row["wall_s"] = time.perf_counter() - row.pop("wall0")
                row["cpu_s"] = time.process_time() - row.pop("cpu0")
                row["rss_after"] = st["VmRSS"]
                if self.live:  # each stage's row as it ends (a long run's table so far)
                    print(self.row_text(row), file=sys.stderr, flush=True)

        setattr(owner, attr, timed)

    def table(self) -> str:
        lines = ["| stage | start s | wall s | CPU s | RSS before MiB | peak MiB | peak - before MiB | RSS after MiB |",
                 "|---|---|---|---|---|---|---|---|"]
        lines += [self.row_text(r) for r in self.rows if "wall_s" in r]
        return "\n".join(lines)

    @staticmethod
    def row_text(r: dict) -> str:
        mib = 2 ** 20
        return (f"| {'. ' * r['depth']}{r['stage']} | {r['start_s']:.1f} | {r['wall_s']:.2f} | "
                f"{r['cpu_s']:.2f} | {r['rss_before'] / mib:.0f} | {r['peak'] / mib:.0f} | "
                f"{(r['peak'] - r['rss_before']) / mib:.0f} | {r['rss_after'] / mib:.0f} |")


def instrument(stages: Stages) -> None:
    from verify import functional_distance, nearest
    from verify.importers import FORMATS, mapping, prove, search
    from verify.prover import proof, refute

    for fmt in FORMATS:
        stages.wrap(FORMATS[fmt], "read", f"read ({fmt})")
    for owner, attr, label in [
            (mapping, "parse", "mapping.parse"), (mapping, "check_carried", "mapping.check_carried"),
            (search, "solve_param", "search.solve_param"), (search, "_no_value_modulo_p", "solve: modulo p"),
            (search, "prove_stack", "search.prove_stack"), (refute, "refute", "refute.refute"),
            (proof, "prove", "proof.prove"),
            (nearest, "import_nearest", "nearest.import_nearest"),
            (functional_distance, "for_import", "functional_distance.for_import"),
            (prove, "_nearby", "nearby search (prove._nearby)"),
            (prove, "nearby_specifications", "nearby: other specifications")]:
        if hasattr(owner, attr):
            stages.wrap(owner, attr, label)


def check_import(argv: list[str]) -> None:
    """The import command's arguments parsed and checked as :func:`run` parses and checks them (a UsageError
    names the first problem), before any stage is wrapped or run; its weight file a regular file (missing, a
    folder, a FIFO: refused as the command refuses it), claimed as an input (an output of this script on it is
    refused)."""
    from verify import bounded
    from verify.cli_common import check_check_arguments
    from verify.construct import build_parser

    if argv[:1] != ["import"]:
        raise UsageError(f"give the import command to profile after '--' (-- import FILE --from FORMAT ...), "
                         f"not {' '.join(argv)!r}")
    a = build_parser("import", lazy=True).parse_args(argv)
    bounded.check(a)
    check_check_arguments(a)
    input_file("the weight file", a.file)


def run(argv: list[str], out) -> int:
    """The import's stages in this process (as ``cli.cmd_import`` and ``prove.prove_bounded``, without
    the children)."""
    from verify import bounded
    from verify.cli_common import check_check_arguments
    from verify.construct import build_parser
    from verify.importers import cli, prove

    a = build_parser("import", lazy=True).parse_args(argv)
    bounded.check(a)
    check_check_arguments(a)
    st = cli.settings(a)
    part = prove._verdict_part(a, st, out)
    if part["rc"] == 1:
        from verify.functional_distance import for_import

        con = st["build"](**part["values"]) if part["values"] else st["con"]
        print(f"  {for_import(con, st['k'], st['imported'].layers, box=st['box']).line()}", file=out)
    if part["search"]:
        prove._nearby_part(a, st, part["values"], part["pinfo"], part["psrc"], out)
    return part["rc"]


class _Stamped(io.TextIOBase):
    """The command's output, each line stamped with the seconds since the start."""

    def __init__(self, t0):
        self.t0, self.buf = t0, ""

    def writable(self):
        return True

    def write(self, s):
        self.buf += s
        while "\n" in self.buf:
            line, self.buf = self.buf.split("\n", 1)
            sys.stdout.write(f"[{time.perf_counter() - self.t0:7.1f} s] {line[:300]}\n")
            sys.stdout.flush()
        return len(s)


def _main(argv) -> int:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--cprofile", help="write cProfile's stats here")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("argv", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    argv = a.argv[1:] if a.argv[:1] == ["--"] else a.argv
    # every argument and the output checked before any stage is wrapped or run
    check_range("--top", a.top, 1)
    check_import(argv)
    cprofile = output_file("--cprofile", a.cprofile)
    stages = Stages()
    instrument(stages)
    out = _Stamped(stages.t0)
    prof = None
    if cprofile is not None:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    rc = run(argv, out)
    if prof is not None:
        prof.disable()
        with atomic_path(cprofile, "--cprofile") as tmp:
            prof.dump_stats(tmp)
    print(f"exit status {rc}; wall {time.perf_counter() - stages.t0:.1f} s, CPU {time.process_time():.1f} s")
    print(stages.table())
    if prof is not None:
        import pstats

        pstats.Stats(prof).sort_stats("cumulative").print_stats(a.top)
    return 0


def main(argv=None) -> int:
    """The command: a bad argument or output path is one ``error:`` line and exit status 2, before any work."""
    return run_main(_main, argv)


if __name__ == "__main__":
    sys.exit(main())
