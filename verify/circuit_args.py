"""The ``circuit`` command's arguments, limits and every check its arguments alone decide, in a light
module: ``python -m verify.construct circuit --help`` and its argument errors import no numpy,
networkx, flint or torch (the compile's target table, ``constructions/compiler/targets.py``, and
the circuit limits' names, ``circuits/limits.py``, are light); :mod:`verify.circuit_cmd` does the
work."""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from circuits.limits import COMPILE_LIMITS, LIMIT_DOC, MAX_SEED
from constructions.compiler.targets import (DEFAULT_PLACED, DEFAULT_UNPLACED, REASSOCIATE_MAX_GATES, TARGETS,
                                            accepting, names_text)
from polyverify.plumbing.cli import check_range, claim_input, output_file
from polyverify.plumbing.rational import RationalError, parse_rational

from . import bounded
from .cli_common import UsageError, add_export_arguments, check_export_suffix, input_file, stream_target

#: the limits of ``python -m verify.construct circuit`` (measured: at these sizes a
#: circuit compiles, proves and runs its default 64 trials in well under a minute)
LIMITS = {
    "max_file_bytes": 64 * 2**20,  # the --graph file
    "max_nodes": 20_000,  # circuits.random --gates 10000 makes about 15,000
    "max_size": 50_000,  # wires counted with mult
    "max_fan_in": 1_024,  # operands of one gate, with mult
    "max_mult": 1_024,  # mult of one wire
    "max_degree": 1_024,  # formal degree of any node (exact trials cost about degree^2)
    "max_grid": 100_000,  # tokens x channels of a placed circuit (the compiled state has at least as many)
    "max_const_digits": 1_000,  # digits of a constant's numerator or denominator
    "max_trials": 10_000,  # --trials
    "max_trial_nodes": 2_000_000,  # --trials x nodes: the exact trials cost about 60 us per node and trial
    "max_channels": 1_024,  # --channels: every layer holds C x C weight arrays
    "max_repeat": 100_000,  # --repeat (constructions.iterated.MAX_REPEAT): the proof is one body whatever K
    "max_repeat_work": 10_000_000,  # --float-trials x --repeat x nodes: the mpmath reference, ~10 us each
}
#: the limits with ``--allow-large`` (the constant digits stay below Python's 4300-digit
#: limit for integer/string conversion: every constant is written out in decimal)
LARGE_LIMITS = {
    "max_file_bytes": 2**30,
    "max_nodes": 2_000_000,  # circuits.random --gates 1000000 makes about 1.35 million
    "max_size": COMPILE_LIMITS["max_size"],
    "max_fan_in": COMPILE_LIMITS["max_fan_in"],  # compile_circuit's own ceilings: no more with --allow-large
    "max_mult": COMPILE_LIMITS["max_mult"],
    "max_degree": 65_536,
    "max_grid": 10_000_000,
    "max_const_digits": 4_000,
    "max_trials": 1_000_000,
    "max_trial_nodes": 1_000_000_000,
    "max_channels": 16_384,
    "max_repeat": 10_000_000,  # constructions.iterated.MAX_REPEAT_LARGE
    "max_repeat_work": 10_000_000_000,
}
_DOC = dict(LIMIT_DOC, max_file_bytes="bytes of the --graph file",
            max_const_digits="digits of a constant's numerator or denominator", max_trials="--trials",
            max_trial_nodes="--trials times the circuit's nodes",
            max_channels="--channels (a layer holds C x C weight arrays)", max_repeat="--repeat",
            max_repeat_work="--float-trials x --repeat x nodes (the mpmath reference of the iteration)")


#: ``--float-trials`` when not given (or ``--trials`` where that is fewer)
DEFAULT_FLOAT_TRIALS = 8


def float_trials_of(a) -> int:
    """How many of the ``--trials`` also run in float64: ``--float-trials`` (checked <= ``--trials``
    by :func:`check_arguments`), or :data:`DEFAULT_FLOAT_TRIALS` capped at ``--trials``."""
    return min(a.trials, DEFAULT_FLOAT_TRIALS) if a.float_trials is None else a.float_trials


def limits_help() -> str:
    return "; ".join(f"{k} {LIMITS[k]} ({LARGE_LIMITS[k]} with --allow-large): {_DOC[k]}" for k in LIMITS)




def add_arguments(c) -> None:
    """The options of ``python -m verify.construct circuit``."""
    c.description = ("Compile a user's arithmetic circuit (networkx node-link JSON) to a BaseConv stack, "
                     "prove it exactly and evaluate it on random rational and float64 inputs.")
    c.epilog = (f"Limits (refused beyond them, exit 2, before any work): {limits_help()}. "
                "Exit status: 0 proved, 1 the proof or a trial failed, 2 bad input.")
    c.add_argument("--graph", required=True, help="circuit as networkx node-link JSON (see circuits/io.py)")
    c.add_argument("--json", help="write the report as JSON to this file (checked before any work, "
                                  "written atomically; a missing folder is created)")
    add_export_arguments(c, "the compiled weights")
    c.add_argument("--target", choices=sorted(TARGETS),
                   help="what to compile to: " + "; ".join(f"{k}: {t.description}" for k, t in TARGETS.items())
                        + f" (default: {DEFAULT_PLACED} for a circuit whose inputs carry token/channel places, "
                          f"{DEFAULT_UNPLACED} otherwise)")
    c.add_argument("--weights", help="prove this weight file against the circuit instead of the compiled weights")
    c.add_argument("--allow-metadata-mismatch", action="store_true",
                   help="prove --weights even where its metadata declares another circuit (name, inputs, "
                        "layer settings)")
    c.add_argument("--seed", type=int, default=0, help="seed of the random trial inputs (default 0)")
    c.add_argument("--trials", type=int, default=64,
                   help=f"random inputs evaluated exactly modulo a prime (all at once), 1..{LIMITS['max_trials']} "
                        "(default 64)")
    c.add_argument("--float-trials", type=int, default=None,
                   help="of those, how many also run in float64 against the exact value at the same float inputs "
                        f"(each costs an exact evaluation of the circuit in Fractions; at most --trials; default "
                        f"{DEFAULT_FLOAT_TRIALS} or --trials if fewer, 0: none)")
    bounded.add_arguments(c)  # --proof-memory-gib, --proof-timeout
    c.add_argument("--heads", type=int, default=None,
                   help=f"targets {names_text(accepting('heads'))}: at most this many heads per layer (per stage "
                        "for elsa), spending layers (default: as many as the compile needs)")
    c.add_argument("--channels", type=int, default=None,
                   help=f"targets {names_text(accepting('channels'))}: a channel budget, every state and every "
                        "layer's inner channels at most this many: the default compile where it fits, else the "
                        "fewest layers among the compiles tried within it (constructions/compiler/budget_search.py; "
                        "at least the narrowest compile tried, named in the refusal; default: the smallest depth)")
    c.add_argument("--pareto", action="store_true",
                   help=f"targets {names_text(accepting('channels'))}: also print (and put in the JSON as pareto) "
                        "the layers/channels frontier from the smallest budget to the unbounded compile, the lower "
                        "envelope of the compiles tried (each point compiled, not proved; the proved stack is the "
                        "one compiled)")
    c.add_argument("--as-written", action="store_true",
                   help="compile the circuit's own association (default: re-associate it first to the least "
                        "multiplicative depth: flattened sums and products as balanced trees, distribution where "
                        "shallower, e.g. Horner -> Estrin, shared subexpressions; constructions/compiler/"
                        "reassociate.py; the proof is against the circuit as given either way)")
    c.add_argument("--reassociate", action="store_true",
                   help=f"re-associate whatever the circuit's size (default: up to {REASSOCIATE_MAX_GATES:,} gates; "
                        "above, the rewrite costs more than the compile and the proof together, and the circuit is "
                        "compiled as written)")
    c.add_argument("--repeat", type=int, default=None, metavar="K",
                   help="the circuit is one step of an iteration: an output named as an input feeds that input in "
                        "the next step (data kept across steps is a pass-through output); compile it once as the "
                        "repeated body, prove it at every depth (one body, by induction), run K steps in float64 "
                        f"and float32 against the exact iteration (mpmath), export K steps (1..{LIMITS['max_repeat']:,}; "
                        "constructions/iterated.py)")
    c.add_argument("--params", default=None, metavar="NAME[=VALUE],...",
                   help="with --repeat: comma-separated inputs held fixed across steps (a step size): no output "
                        "needs to feed them, and they stay symbols in the proof, so one proof covers every value; "
                        "=VALUE (an exact rational, e.g. eta=1/16) is the value the float runs use (default: "
                        "random, as the other inputs); an input node of the circuit file with \"param\": true is "
                        "a parameter too")
    c.add_argument("--allow-large", action="store_true",
                   help="raise the size limits to " + ", ".join(f"{k} {v}" for k, v in LARGE_LIMITS.items()))
    c.add_argument("--trace", action="store_true",
                   help="print, per layer, which circuit node sits at each (token, channel) of the state and "
                        "which product each BaseConv inner channel forms (found by random evaluation modulo a "
                        "prime, verify/compiler_trace.py; tables cut for large states), and put every "
                        "label in the JSON report as compiled.trace")
    c.add_argument("--plot", metavar="FILE",
                   help="draw the state's occupancy per layer (cells coloured by node kind) as a PNG (checked "
                        "before any work, written atomically)")
    c.add_argument("--plot-weights", metavar="FILE",
                   help="draw every nonzero weight array of the compiled stack (BaseConv's channel mixes and "
                        "filters, each LSA / ELSA head's matrices) as heat maps in one PNG (checked before any "
                        "work, written atomically)")




def check_paths(a) -> None:
    """Inputs exist; outputs are writable files, distinct from each other and from the inputs."""
    try:  # the --graph file can be opened (the same words as circuits.io.load's refusal); a FIFO (a
        # named pipe, bash's <(...)) is not opened here: load waits for its writer and reads it once
        if not stat.S_ISFIFO(os.stat(a.graph).st_mode):
            os.close(os.open(a.graph, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)))
        if os.path.isdir(a.graph):  # a folder opens read-only; its read is what fails
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
    except OSError as e:
        raise UsageError(f"cannot read {os.fspath(a.graph)}: {e.strerror or e}") from None
    claim_input("--graph", a.graph)  # an output on it is refused (output_file): it would overwrite the circuit
    if a.weights is not None:
        input_file("--weights", a.weights)  # missing, a folder, /dev/zero, a FIFO: said as what it is
    for flag, p in (("--json", a.json), ("--export", a.export), ("--plot", getattr(a, "plot", None)),
                    ("--plot-weights", getattr(a, "plot_weights", None))):
        output_file(flag, p)  # two outputs on one path, or an output on an input, are refused there
    check_export_suffix(a)  # --export keep.txt: refused before the compile, not written as safetensors
    for flag, plot in (("--plot", getattr(a, "plot", None)), ("--plot-weights", getattr(a, "plot_weights", None))):
        if plot is not None and Path(plot).suffix.lower() != ".png" and not stream_target(plot):
            raise UsageError(f"{flag} {plot}: not a .png file name")


def check_arguments(a) -> None:
    """Every check the arguments alone decide, before the circuit is read: ranges, contradicting
    flags, options the chosen target does not take, and the paths (:func:`check_paths`)."""
    lim = LARGE_LIMITS if a.allow_large else LIMITS
    check_range("--seed", a.seed, 0, MAX_SEED)  # numpy's default_rng takes no negative seed
    if getattr(a, "allow_metadata_mismatch", False) and a.weights is None:
        raise UsageError("--allow-metadata-mismatch applies to a --weights file; none was given")
    if getattr(a, "as_written", False) and getattr(a, "reassociate", False):
        raise UsageError("--as-written and --reassociate contradict each other: give one")
    if getattr(a, "heads", None) is not None:
        if a.heads < 1:
            raise UsageError(f"--heads must be at least 1, got {a.heads}")
        if a.target is not None and not TARGETS[a.target].accepts("heads"):
            raise UsageError(f"--heads applies to --target {names_text(accepting('heads'))}, not {a.target}")
    check_range("--trials", a.trials, 1, lim["max_trials"], override=None if a.allow_large else "--allow-large")
    if a.float_trials is not None:
        check_range("--float-trials", a.float_trials, 0, lim["max_trials"],
                    override=None if a.allow_large else "--allow-large")
        if a.float_trials > a.trials:  # they are some of the --trials inputs: more would silently be --trials
            raise UsageError(f"--float-trials {a.float_trials} exceeds --trials {a.trials}: the float64 trials are "
                             f"some of the --trials random inputs; lower --float-trials or raise --trials")
    bounded.check(a)  # --proof-memory-gib, --proof-timeout
    if a.target is not None:
        for flag, v in (("--channels", getattr(a, "channels", None)), ("--pareto", getattr(a, "pareto", False) or None)):
            if v is not None and not TARGETS[a.target].accepts("channels"):
                raise UsageError(f"{flag} applies to --target {names_text(accepting('channels'))}, not {a.target}")
    if getattr(a, "channels", None) is not None:
        check_range("--channels", a.channels, 1, lim["max_channels"],
                    override=None if a.allow_large else "--allow-large")
    check_repeat_arguments(a, lim)
    check_paths(a)


#: options a repeated circuit does not take (the flag, the attribute and the default that means "not given")
_NOT_WITH_REPEAT = (("--weights", "weights", None), ("--pareto", "pareto", False), ("--trace", "trace", False),
                    ("--plot", "plot", None))


def check_repeat_arguments(a, lim: dict) -> None:
    """``--repeat K`` in range, ``--params`` only with it (a list of distinct names), and no option the
    repeated run would ignore."""
    repeat, params = getattr(a, "repeat", None), getattr(a, "params", None)
    if repeat is None:
        if params is not None:
            raise UsageError("--params applies with --repeat (inputs held fixed across steps); none was given")
        return
    check_range("--repeat", repeat, 1, lim["max_repeat"], override=None if a.allow_large else "--allow-large")
    for flag, attr, default in _NOT_WITH_REPEAT:
        if getattr(a, attr, default) not in (default, None):
            raise UsageError(f"{flag} does not apply with --repeat (a repeated step is compiled, proved at every "
                             f"depth and run; drop {flag} or --repeat)")
    if params is not None:
        items = [p.strip() for p in params.split(",")]
        names = [p.split("=", 1)[0].strip() for p in items]
        if any(not p for p in names):
            raise UsageError(f"--params {params!r}: an empty name (give comma-separated input names, each "
                             f"optionally =VALUE)")
        dup = sorted({p for p in names if names.count(p) > 1})
        if dup:
            raise UsageError(f"--params names {dup[0]!r} twice")
        a.param_names = tuple(names)
        try:
            a.param_values = {n: parse_rational(p.split("=", 1)[1].strip(), f"--params {n}")
                              for n, p in zip(names, items) if "=" in p}
        except RationalError as e:
            raise UsageError(str(e)) from None
    else:
        a.param_names, a.param_values = (), {}
