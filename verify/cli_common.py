"""Pieces shared by the command-line tools.  Light: imports nothing heavy (``--help`` and usage
errors of the commands must not pay for numpy, sympy or the proof)."""
from __future__ import annotations

from typing import TYPE_CHECKING

# re-exported: one UsageError everywhere, one check of an input file (polyverify/plumbing/cli.py)
from polyverify.plumbing.cli import UsageError, file_kind, input_file, input_file_problem  # noqa: F401
# an output that is written through (a device, a FIFO, /dev/stdout) has no suffix to read
from polyverify.plumbing.cli import writes_through as stream_target  # noqa: F401
# the registry of formats (light): their names and file names, for --export / --format
from verify.importers import REGISTRY, SUFFIXES, TORCH_SUFFIXES  # noqa: F401

if TYPE_CHECKING:  # pragma: no cover
    from .prover.proof import ProofResult
    from .prover.randomized import RandomizedResult


#: ``--check``: the exact proof (the default, the only way to PROVED) or the randomized identity test
CHECKS = ("exact", "random")
#: ``--random-seed`` lies in [0, 2^128)
RANDOM_SEED_BITS = 128


def add_check_arguments(p) -> None:
    """``--check`` and ``--random-seed`` on a command that proves a construction or claim."""
    p.add_argument("--check", default="exact", choices=list(CHECKS),
                   help="exact: the exact proof (verdict PROVED or FAILED; default); random: a Schwartz-Zippel "
                        "identity test modulo a random 61-bit prime, each section at its own random point "
                        "(verdict 'PASSED randomized identity test (error probability <= ...)', never PROVED; "
                        "a counterexample modulo p is a definite failure, exit 1); docs: verify/prover/randomized.py")
    p.add_argument("--random-seed", type=int, default=None, metavar="S",
                   help=f"--check random: the seed of the prime and the points (0 <= S < 2^{RANDOM_SEED_BITS}; "
                        f"default: drawn from the operating system and reported, to replay a run)")


def check_check_arguments(a) -> None:
    """``--random-seed`` in range and only with ``--check random`` (before any work)."""
    if a.random_seed is None:
        return
    if a.check != "random":
        raise UsageError("--random-seed applies to --check random")
    if not 0 <= a.random_seed < 1 << RANDOM_SEED_BITS:
        raise UsageError(f"--random-seed must be in [0, 2^{RANDOM_SEED_BITS}), got {a.random_seed}")


def call_check(fn, a, where: str = ""):
    """``fn()`` (a randomized check) in a child under ``--proof-memory-gib`` and
    ``--proof-timeout``, as every exact proof (``verify.bounded.call``; a limited parent's soft
    address-space limit caps the child's, :func:`verify.bounded.within_soft_limit`); its result, or a
    UsageError naming the limit that stopped it."""
    from polyverify.plumbing.child import Stopped, call_limited
    from polyverify.plumbing.cli import one_line

    from .bounded import within_soft_limit

    try:
        return call_limited(fn, timeout=a.proof_timeout, memory_gb=within_soft_limit(a.proof_memory_gib))
    except Stopped as e:
        flag = {"time": "--proof-timeout", "memory": "--proof-memory-gib"}.get(e.limit)
        fix = f"raise {flag}" if flag else "raise --proof-memory-gib or --proof-timeout"
        raise UsageError(f"{where + ': ' if where else ''}the randomized check stopped: {one_line(str(e))}; "
                         f"{fix}") from None


def verdict_of(res) -> tuple[str, str]:
    """The JSON report's ``verdict`` (``proved``, ``witnessed``, ``passed-randomized`` or ``failed``)
    and the verdict line of an exact proof's or a randomized check's result.  An exact result's word
    is the prover kernel's (``verify.prover.kernel.verdict``): PROVED only for a result it sealed."""
    if getattr(res, "method", "") == "random":
        return res.verdict, res.verdict_line()
    from .prover.kernel import verdict

    v = verdict(res)
    return v.word, v.value


def holds(res) -> bool:
    """Exit status 0 or 1: an exact result that the kernel calls PROVED (or WITNESSED), a randomized
    check that passed."""
    if getattr(res, "method", "") == "random":
        return bool(res.ok)
    from .prover.kernel import verdict

    return verdict(res).holds


def print_proof(res: "ProofResult", out) -> None:
    if getattr(res, "method", "") == "random":
        print_randomized(res, out)
        return
    status = verdict_of(res)[1]
    what = "check" if getattr(res, "kind", "proof") == "witness" else "proof"  # a witness is certified, not proved
    sym = f" (symbolic in {', '.join(res.symbolic_params)})" if res.symbolic_params else ""
    print(f"{what}: {status} in {res.seconds:.3f} s{sym}; {res.entries_checked} state entries checked; "
          f"sections {', '.join(k + '=' + ('ok' if v else 'FAIL') for k, v in res.sections.items())}; "
          + (f"found at an {res.ring}" if res.ring.startswith("integer point")  # verify/prover/refute.py
             else f"exact arithmetic: {res.backend}" + (f", {res.ring.split(' (')[0]} ring" if res.ring != "full"
                                                         else "")), file=out)
    if res.failure:
        print("  " + res.failure.describe().replace("\n", "\n  "), file=out)


def print_randomized(res: "RandomizedResult", out) -> None:
    """A randomized check's verdict (never the word of an exact proof), its prime, seed, sections
    and bounds, and on failure the counterexample modulo p."""
    params = ", ".join(f"{k}={v}" for k, v in res.parameters.items())
    print(f"check: {res.verdict_line()} in {res.seconds:.3f} s; sections "
          f"{', '.join(k + '=' + ('ok' if v else 'FAIL') for k, v in res.sections.items())}, each at its own "
          f"random point modulo the random 61-bit prime p = {res.prime} (--random-seed {res.seed}); "
          f"{res.entries_checked} state entries compared" + (f"; at {params}" if params else ""), file=out)
    if res.ok:
        print(f"  not a proof: degree bounds {', '.join(f'{k} {v}' for k, v in res.degree_bounds.items())}, "
              f"coefficient bounds 2^({', '.join(str(v) for v in res.coefficient_bits.values())}) give the bound "
              f"(verify/prover/randomized.py); --check exact runs the exact proof", file=out)
    if res.failure:
        print("  " + res.failure.describe(res.prime, res.seed).replace("\n", "\n  "), file=out)


def markdown_table(header: list[str], rows) -> list[str]:
    """A markdown table's lines; cells escaped (``|``) and kept on one line."""
    def cell(x) -> str:
        return str(x).replace("|", "\\|").replace("\n", " ")

    return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows])


#: the layouts ``--export`` writes and their file names: the one registry of formats
#: (``verify/importers/__init__.py``, light: a parser names them without importing any format, so
#: ``--help`` and argument errors stay light).  ``SUFFIXES``: the importers and ``gd --weights`` read a file
#: by its suffix, so ``--export keep.txt`` is refused, never a safetensors file under a text file's name
FORMATS = tuple(REGISTRY)
DEFAULT_FORMAT = FORMATS[0]


def export_suffix_problem(path, fmt: str) -> str | None:
    """Why ``path`` is no file name for the ``fmt`` layout (its suffix), or None.  A character
    device or a FIFO (``/dev/null``, a named pipe: written through, see polyverify.plumbing.cli) has no
    suffix to read: it gets the format's first suffix's encoding (:func:`export_suffix`)."""
    from pathlib import Path

    ok = SUFFIXES.get(fmt)
    if ok is not None and Path(path).suffix.lower() not in ok and not stream_target(path):
        return (f"{fmt} files are {', '.join(ok)} (the importers read a file by its suffix); got "
                f"{Path(path).name!r}")
    if export_suffix(path, fmt) in TORCH_SUFFIXES and not torch_installed():
        return f"{Path(path).name!r}: {torch_missing('written')}"
    return None


def torch_installed() -> bool:
    """Whether torch can be imported (without importing it: torch is the ``torch`` extra, pyproject.toml)."""
    from importlib.util import find_spec

    try:
        return find_spec("torch") is not None
    except (ImportError, ValueError):  # a stand-in module without a spec
        return False


def torch_missing(done: str) -> str:
    """Why a torch checkpoint cannot be ``done`` (read / written) here: one line with the fix."""
    return (f"a torch checkpoint is {done} with torch, which is not installed (pip install 'polyverify[torch]'); "
            f".safetensors holds the same tensors without it")


def export_suffix(path, fmt: str) -> str:
    """The suffix whose encoding ``path`` gets in ``fmt``: its own, or (a device or FIFO with
    another suffix) the format's first."""
    from pathlib import Path

    suffix = Path(path).suffix.lower()
    ok = SUFFIXES.get(fmt)
    return suffix if ok is None or suffix in ok else ok[0]


def check_export_suffix(a) -> None:
    """``--export FILE``'s suffix against ``--format`` (default polyverify), from the arguments alone
    (light: before anything is built or read); ``--format`` without ``--export`` is refused too."""
    fmt = getattr(a, "export_format", None)
    if getattr(a, "export", None) is None:
        if fmt is not None:
            raise UsageError("--format needs --export FILE")
        return
    if fmt is not None and fmt not in FORMATS:
        raise UsageError(f"--format {fmt!r}: not a format ({', '.join(FORMATS)})")
    problem = export_suffix_problem(a.export, fmt or DEFAULT_FORMAT)
    if problem:
        raise UsageError(f"--export: {problem}")


def add_export_arguments(parser, what: str = "the weights") -> None:
    """``--export FILE`` and ``--format polyverify|precision-ls|zoology|icl-gd`` (:data:`FORMATS`; default polyverify);
    ``verify.export.check_export_arguments`` checks them, ``write_export`` writes the file."""
    parser.add_argument("--export", metavar="FILE",
                        help=f"write {what} to FILE in the --format's layout (checked before any work)")
    parser.add_argument("--format", dest="export_format", default=None, metavar="|".join(FORMATS),
                        help="the layout of --export: this toolkit's safetensors (polyverify, the default) or a "
                             "peer's own names, shapes and config ("
                             + "; ".join(f"{n}: {', '.join(s)}" for n, s in SUFFIXES.items() if n != DEFAULT_FORMAT)
                             + "); a format that cannot hold the construction is refused (docs/interop.md)")
