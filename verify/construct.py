"""``python -m verify.construct``: build, prove and run constructions.

    python -m verify.construct gd --layers 100 [--arch ARCH: baseconv (default), baseconv-causal, lsa,
        elsa, token-lsa, compiled-baseconv, compiled-baseconv-causal, compiled-lsa, compiled-elsa]
        [--n 20] [--d 5] [--dtype float32[,float64,...]] [--batch 256] [--seed 0]
        [--json FILE] [--export FILE] [--weights FILE]
    python -m verify.construct circuit --graph FILE.json [--target baseconv|baseconv-causal|baseconv-mlp|lsa|elsa]
        [--json FILE] [--export FILE] [--weights FILE] [--seed 0] [--trials 64] [--allow-large]
    python -m verify.construct NAME [--set KEY=VALUE ...] [--json FILE] [--allow-large]
    python -m verify.construct import FILE --from FORMAT --spec SPEC [--layout L.json] [--json FILE]
    python -m verify.construct --list

``--check random`` (gd and catalogue NAMEs): a Schwartz-Zippel identity test modulo a random
61-bit prime instead of the exact proof (``verify/prover/randomized.py``); its verdict is "PASSED
randomized identity test (error probability <= ...)", never PROVED.

Exit status: 0 proved (and run; with --check random: passed the randomized identity test), 1 the
proof failed (with --check random: a counterexample modulo p, a definite failure), 2 bad input
or refused (one line, before any work).
"""
from __future__ import annotations

import argparse
import sys

from polyverify.plumbing.cli import Parser, exit_with, run_main

from .cli_common import UsageError
# the gd command (verify/gd_cmd.py); its limits, dtypes and manifest checks by the names they had here
from .gd_cmd import BACKENDS, DEFAULTS, DTYPES, GD_LIMITS, depth_error, state_size  # noqa: F401
from .gd_cmd import add_arguments as _gd_arguments
from .gd_cmd import cmd_gd

# Start-up: --help and every argument error import nothing heavy (no numpy, sympy, networkx,
# mpmath, flint or torch): the commands, architectures and catalogue entries come from the
# catalogue's manifest (constructions.catalogue.light_entries), only the chosen command's parser is
# filled in (build_parser(only=...)), and the heavy modules are imported where the work starts.


def build_parser(only: str | None = None, *, lazy: bool = False) -> argparse.ArgumentParser:
    """The command line.  ``lazy``: only the parser of the command ``only`` gets its options (the
    others are named, so that an unknown command is refused with the whole list, but empty):
    what :func:`main` builds, so that --help and a bad argument import nothing heavy."""
    from constructions.catalogue import light_entries, light_gd_architectures

    fill = (lambda name: True) if not lazy else (lambda name: name == only)  # noqa: E731
    p = Parser(prog="python -m verify.construct",
                description="Build explicit BaseConv/LSA/ELSA weights, prove them exactly at every depth, "
                            "and run them in floating point against an mpmath reference.")
    p.add_argument("--list", action="store_true", help="list the available constructions and exit")
    p.epilog = ("NAME: a catalogue entry, proved with `python -m verify.construct NAME [--set KEY=VALUE]`. "
                "Exit status: 0 proved (--check random: passed the randomized identity test), 1 proof failed (with a "
                "counterexample; --check random: a counterexample modulo p, a definite failure), 2 bad input or refused.")
    sub = p.add_subparsers(dest="command", parser_class=Parser, metavar="COMMAND",
                           title="commands (gd, circuit, or a catalogue NAME: --list shows them all)")

    g = sub.add_parser("gd", help="gradient descent on least squares",
                       description="Build a GD construction, prove it exactly at every depth, run it in floating "
                                   "point against a high-precision reference of exact GD.  With --weights, "
                                   "unset options are taken from the file's metadata.  Limits: "
                                   + "; ".join(f"{k} <= {v}" for k, v in GD_LIMITS.items())
                                   + " (--allow-large lifts them).")
    if fill("gd"):
        _gd_arguments(g, list(light_gd_architectures()))
    c = sub.add_parser("circuit", help="compile a user's arithmetic circuit (node-link JSON) to BaseConv, LSA or ELSA layers "
                                            "(--target)")
    if fill("circuit"):
        from .circuit_args import add_arguments as add_circuit_arguments

        add_circuit_arguments(c)
    i = sub.add_parser("import", help="prove a peer's weight file (precision-ls, icl-gd, zoology, polyverify) "
                                      "against a specification")
    if fill("import"):
        from .importers.cli import add_arguments as add_import_arguments

        add_import_arguments(i)
    from .catalogue_cmd import add_arguments as add_entry_arguments

    for name, e in light_entries().items():
        if fill(name):
            add_entry_arguments(sub.add_parser(name, description=f"{e.summary} [{e.paper}]"), e)
        else:
            sub.add_parser(name)
    return p


# ------------------------------------------------------------------ list / main

def cmd_list(out) -> int:
    from constructions.catalogue import light_entries, light_errata, light_gd_architectures

    print("gd --arch ARCH (python -m verify.construct gd --layers L --arch ARCH):", file=out)
    gd = light_gd_architectures()
    # each column as wide as its longest cell: long names (gd-compiled-baseconv-causal) stay aligned
    wa, wn, wd, ws = (max((len(str(c)) for c in col), default=0) for col in
                      (gd, [e.name for e in gd.values()], [e.depth for e in gd.values()],
                       [e.state for e in gd.values()]))
    for arch, e in gd.items():
        print(f"  {arch:<{wa}}  {e.name:<{wn}}  depth {e.depth:<{wd}}  state {e.state:<{ws}}  {e.summary}", file=out)
        print(f"  {'':<{wa}}  {'':<{wn}}  {e.paper}", file=out)
    print("circuit --graph FILE.json: any arithmetic circuit (networkx node-link JSON) -> a BaseConv, LSA or "
          "ELSA stack (--target)", file=out)
    cat = light_entries()
    if cat:
        print("catalogue (python -m verify.construct NAME [--set KEY=VALUE] [--json FILE]; the gd entries above "
              "are NAMEs too):", file=out)
        wc = max((len(n) for n, e in cat.items() if "gd" not in e.roles), default=0)
        for name, e in cat.items():
            if "gd" not in e.roles:
                print(f"  {name:<{wc}}  {e.summary}  [{e.paper}]", file=out)
    print(f"errata: {len(light_errata())} (python -m verify.errata)", file=out)
    return 0


def _command(argv: list[str]) -> str | None:
    """The command word of ``argv``: its first argument that is not an option (the top level's
    options, --help and --list, take no value)."""
    return next((x for x in argv if not x.startswith("-")), None)


def _main(argv, out) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    a = build_parser(_command(argv), lazy=True).parse_args(argv)
    if a.list:
        return cmd_list(out)
    if a.command == "gd":
        return cmd_gd(a, out)
    if a.command == "circuit":
        from .circuit_args import check_arguments

        check_arguments(a)  # the argument errors before the compiler, the prover and numpy are imported
        from .circuit_cmd import cmd_circuit

        return cmd_circuit(a, out)
    if a.command == "import":
        from .importers.cli import cmd_import

        return cmd_import(a, out)
    from constructions.catalogue import light_entries

    if a.command in light_entries():
        from .catalogue_cmd import cmd_entry

        return cmd_entry(light_entries()[a.command], a, out)
    raise UsageError("choose a command: gd, circuit, a catalogue name, or --list")


def main(argv=None, out=None) -> int:
    return run_main(lambda av: _main(av, out or sys.stdout), argv)


if __name__ == "__main__":
    exit_with(main)
