"""``python -m verify.construct circuit --graph FILE.json``: a user's circuit.

Loads the circuit (networkx node-link JSON, ``circuits/io.py``), compiles it
to a BaseConv stack (``constructions/compiler``), proves the stack's output
polynomials equal the circuit's (the verdict), and cross-checks both on random
inputs: exactly, modulo a prime, all trials at once (``verify/modular.py``), and
in float64 against the exact value of the same float inputs.

Sizes are bounded by :data:`LIMITS` (``--allow-large``: :data:`LARGE_LIMITS`),
checked on the file and the circuit's metrics before any compile or proof
work; the output paths (``--json``, ``--export``, ``--plot``) are checked before that work
too and written atomically.  ``--trace`` / ``--plot``: which circuit node sits at each (token,
channel) of every layer's state (``verify/compiler_trace.py``), printed, in the JSON
report as ``compiled.trace``, drawn as a PNG.
"""
from __future__ import annotations

import json
import math
import os
import sys
import time
import warnings
from fractions import Fraction
from pathlib import Path

import numpy as np

import circuits as C
from circuits.graph import LimitError, PrunedNodesWarning
from circuits.metrics import LIMIT_DOC, check_limits
from constructions.compiler import REASSOCIATE_MAX_GATES, TARGETS, CompileError, compile_circuit, default_target
from constructions.compiler.targets import DEFAULT_PLACED, DEFAULT_UNPLACED, accepting, names_text
from constructions.ops import nonzero_pattern
from constructions.weights_io import WeightFileError, check_against, declared_mismatches, load
from polyverify.cli import (EXIT_FAILED, EXIT_OK, atomic_write_text, check_memory, check_range,
                            interactive, one_line, output_file, progress)

from . import bounded, modular
from .cli_common import UsageError, print_proof
from .export import add_export_arguments, check_export_arguments, write_export

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
}
#: the limits with ``--allow-large`` (the constant digits stay below Python's 4300-digit
#: limit for integer/string conversion: every constant is written out in decimal)
LARGE_LIMITS = {
    "max_file_bytes": 2**30,
    "max_nodes": 2_000_000,  # circuits.random --gates 1000000 makes about 1.35 million
    "max_size": 10_000_000,
    "max_fan_in": 16_384,
    "max_mult": 16_384,
    "max_degree": 65_536,
    "max_grid": 10_000_000,
    "max_const_digits": 4_000,
    "max_trials": 1_000_000,
    "max_trial_nodes": 1_000_000_000,
    "max_channels": 16_384,
}
_DOC = dict(LIMIT_DOC, max_file_bytes="bytes of the --graph file",
            max_const_digits="digits of a constant's numerator or denominator", max_trials="--trials",
            max_trial_nodes="--trials times the circuit's nodes",
            max_channels="--channels (a layer holds C x C weight arrays)")


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
    c.add_argument("--float-trials", type=int, default=8,
                   help="of those, how many also run in float64 against the exact value at the same float inputs "
                        "(each costs an exact evaluation of the circuit in Fractions; default 8, 0: none)")
    bounded.add_arguments(c)  # --proof-memory-gib, --proof-timeout
    c.add_argument("--heads", type=int, default=None,
                   help=f"targets {names_text(accepting('heads'))}: at most this many heads per layer (per stage "
                        "for elsa), spending layers (default: as many as the compile needs)")
    c.add_argument("--channels", type=int, default=None,
                   help=f"targets {names_text(accepting('channels'))}: a channel budget, every state and every "
                        "layer's inner channels at most this many, spending layers and appended tokens "
                        "(constructions/compiler/budget.py; at least the grid's channels + 2; default: the "
                        "smallest depth)")
    c.add_argument("--pareto", action="store_true",
                   help=f"targets {names_text(accepting('channels'))}: also print (and put in the JSON as pareto) "
                        "the layers/channels frontier from the smallest budget to the unbounded compile (each point "
                        "compiled, not proved; the proved stack is the one compiled)")
    c.add_argument("--as-written", action="store_true",
                   help="compile the circuit's own association (default: re-associate it first to the least "
                        "multiplicative depth: flattened sums and products as balanced trees, distribution where "
                        "shallower, e.g. Horner -> Estrin, shared subexpressions; constructions/compiler/"
                        "reassociate.py; the proof is against the circuit as given either way)")
    c.add_argument("--reassociate", action="store_true",
                   help=f"re-associate whatever the circuit's size (default: up to {REASSOCIATE_MAX_GATES:,} gates; "
                        "above, the rewrite costs more than the compile and the proof together, and the circuit is "
                        "compiled as written)")
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


def _load_circuit(a, lim: dict):
    path = os.fspath(a.graph)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", PrunedNodesWarning)
            g = C.load(a.graph, limits=lim)
        check_limits(g, lim)
    except LimitError as e:
        msg = str(e) if path in str(e) else f"{path}: {e}"
        if not a.allow_large and e.key in LARGE_LIMITS and LARGE_LIMITS[e.key] > LIMITS[e.key]:
            msg += f" (pass --allow-large to allow up to {LARGE_LIMITS[e.key]})"
        raise UsageError(msg) from None
    except (C.CircuitError, OSError, ValueError) as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise UsageError(msg if path in msg else f"{path}: {msg}") from None
    return g, caught


def _print_warnings(path, caught) -> None:
    """After every check passed: one line each, not python's two-line warning with a source line."""
    for w in caught:
        if issubclass(w.category, PrunedNodesWarning):
            print(f"warning: {path}: {one_line(str(w.message))}", file=sys.stderr)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def _check_paths(a) -> None:
    """Inputs exist; outputs are writable files, distinct from each other and from the inputs."""
    if a.weights is not None and not Path(a.weights).is_file():
        what = "is a folder, not a file" if Path(a.weights).is_dir() else "file not found"
        raise UsageError(f"--weights {a.weights}: {what}")
    outs = [(flag, output_file(flag, p)) for flag, p in (("--json", a.json), ("--export", a.export),
                                                         ("--plot", getattr(a, "plot", None))) if p is not None]
    if getattr(a, "plot", None) is not None and Path(a.plot).suffix.lower() != ".png":
        raise UsageError(f"--plot {a.plot}: not a .png file name")
    ins = [(flag, Path(p)) for flag, p in (("--graph", a.graph), ("--weights", a.weights)) if p is not None]
    seen = {}
    for flag, p in ins + outs:
        key = os.path.realpath(p)
        if key in seen and (flag, p) in outs:
            raise UsageError(f"{flag} {p}: the same file as {seen[key]}")
        seen.setdefault(key, flag)


def _float_of(x) -> float:
    try:
        return float(Fraction(x))
    except (OverflowError, ValueError):  # an exact value beyond float64
        return math.inf


def _float_array(A) -> np.ndarray:
    """An exact weight array in float64, converting only its nonzero entries (the compiled
    attention stacks are mostly zeros)."""
    A = np.asarray(A)
    if A.dtype != object:
        return A.astype(float)
    out = np.zeros(A.shape)
    nz = np.nonzero(nonzero_pattern(A))
    out[nz] = [_float_of(x) for x in A[nz]]
    return out


def float_trials(g, con, names, trials: int, seed: int, show: bool) -> tuple[float, int]:
    """The stack in float64 on ``trials`` random normal inputs against the exact value of the
    circuit at the same inputs: (max error relative to max(|exact|, 1), non-finite outputs)."""
    xs = np.random.default_rng(seed).standard_normal((len(names), trials))
    fv = {n: xs[i] for i, n in enumerate(names)}
    S = con.input_state(fv) if names else np.zeros((trials,) + con.layout.shape)
    with np.errstate(over="ignore", invalid="ignore"):
        S, _ = con.run(fv, 0, state=S, cast=lambda L: L.map(_float_array))
    got_f = con.readout(S)
    import gmpy2

    max_rel, non_finite = 0.0, 0
    Q = gmpy2.mpq
    # the exact values at every trial's inputs at once: one pass over the (validated) circuit on arrays of
    # exact rationals (each float64 input read as its exact binary value), products expanded once per atom
    ins = {n: np.array([Q(float(x)) for x in fv[n]], dtype=object) for n in names}
    with progress(1, "exact values at the float64 trials' inputs", enabled=show) as bar:
        want = C.evaluate_affine(g, ins, validated=True, const=lambda c: Q(c.numerator, c.denominator))
        bar.update()
    for o, w in want.items():
        w = np.broadcast_to(np.asarray(w, dtype=object), (trials,))
        f = np.broadcast_to(np.asarray(got_f[o], dtype=np.float64).reshape(-1), (trials,))
        for t in range(trials):
            if not math.isfinite(f[t]):  # overflow of a high-degree output in float64
                non_finite += 1
                continue
            wt = Q(w[t])
            max_rel = max(max_rel, float(abs(Q(float(f[t])) - wt) / max(abs(wt), Q(1))))
    return max_rel, non_finite


def _prove_limited(con, sections, a):
    """The exact proof in a forked child under ``--proof-memory-gib`` and ``--proof-timeout``
    (``verify/bounded.py``)."""
    return bounded.prove(con, a, a.graph, sections=sections)


def _trace(con, a, report: dict, out) -> None:
    """``--trace`` / ``--plot``: the compiled stack's residual labels (``verify.compiler_trace``)."""
    from verify.compiler_trace import trace

    t0 = time.perf_counter()
    n = len(con.layers(0))
    with progress(n, "trace", enabled=interactive()) as bar:
        tr = trace(con, seed=a.seed, on_layer=lambda i: bar.update())
    print(f"trace: {len(tr.layers)} states labelled in {time.perf_counter() - t0:.2f} s by random evaluation modulo "
          f"{tr.prime} at {tr.draws} points (any label wrong with probability at most {tr.error_bound:.1e}; "
          "the proof is exact and separate)", file=out)
    if a.trace:
        for i in range(len(tr.layers)):
            print("\n".join(tr.table(i)), file=out)
        report["compiled"] = dict(report["compiled"], trace=tr.to_json())
    if a.plot:
        tr.plot(a.plot)
        print(f"plot written to {a.plot}", file=out)


def _reassociate_flag(a):
    """compile_circuit's ``reassociate``: False (--as-written), True (--reassociate), None (by size)."""
    if getattr(a, "as_written", False):
        return False
    return True if getattr(a, "reassociate", False) else None


def cmd_circuit(a, out) -> int:
    lim = LARGE_LIMITS if a.allow_large else LIMITS
    check_range("--seed", a.seed, 0, 2**63 - 1)  # numpy's default_rng takes no negative seed
    if getattr(a, "as_written", False) and getattr(a, "reassociate", False):
        raise UsageError("--as-written and --reassociate contradict each other: give one")
    if getattr(a, "heads", None) is not None:
        if a.heads < 1:
            raise UsageError(f"--heads must be at least 1, got {a.heads}")
        if a.target is not None and not TARGETS[a.target].accepts("heads"):
            raise UsageError(f"--heads applies to --target {names_text(accepting('heads'))}, not {a.target}")
    check_range("--trials", a.trials, 1, lim["max_trials"], override=None if a.allow_large else "--allow-large")
    check_range("--float-trials", a.float_trials, 0, lim["max_trials"],
                override=None if a.allow_large else "--allow-large")
    bounded.check(a)  # --proof-memory-gib, --proof-timeout
    g, caught = _load_circuit(a, lim)
    names = C.inputs(g)
    work = a.trials * g.number_of_nodes()
    if work > lim["max_trial_nodes"]:
        more = "" if a.allow_large else f"; pass --allow-large to allow up to {LARGE_LIMITS['max_trial_nodes']}"
        raise UsageError(f"--trials {a.trials} x {g.number_of_nodes()} nodes = {work} exceeds the limit "
                         f"max_trial_nodes = {lim['max_trial_nodes']} (lower --trials{more})")
    m0 = C.metrics(g, validated=True)  # g is C.load's validated circuit
    # the float64 trials hold the inputs, the state and a layer's temporaries for every trial at once
    check_memory(f"--trials {a.trials} on this circuit", 8.0 * a.trials * (len(names) + m0["size"] + 1) * 4)
    _check_paths(a)
    # the proof's size (degree, terms, work) from the circuit: refused now if it cannot finish in time
    bounded.check_circuit_estimate(bounded.circuit_estimate(g), a, a.graph)

    target = a.target or default_target(g)
    if getattr(a, "heads", None) is not None and not TARGETS[target].accepts("heads"):
        raise UsageError(f"--heads applies to --target {names_text(accepting('heads'))}, not {target} "
                         "(this circuit's default)")
    for flag, v in (("--channels", getattr(a, "channels", None)), ("--pareto", getattr(a, "pareto", False) or None)):
        if v is not None and not TARGETS[target].accepts("channels"):  # --pareto: the frontier of channel budgets
            raise UsageError(f"{flag} applies to --target {names_text(accepting('channels'))}, not {target}")
    if getattr(a, "channels", None) is not None:
        lim = LARGE_LIMITS if a.allow_large else LIMITS
        check_range("--channels", a.channels, 1, lim["max_channels"],
                    override=None if a.allow_large else "--allow-large")
    t0 = time.perf_counter()
    try:
        con = compile_circuit(g, name=Path(a.graph).stem, target=target, heads=getattr(a, "heads", None),
                              reassociate=_reassociate_flag(a), channels=getattr(a, "channels", None))
    except CompileError as e:
        raise UsageError(f"{a.graph}: --target {target}: {one_line(str(e))}") from None
    except ValueError as e:  # a channel budget below the stated minimum (named)
        if "channel budget" not in str(e):
            raise
        raise UsageError(f"{a.graph}: --channels {a.channels}: {one_line(str(e))}") from None
    t_compile = time.perf_counter() - t0
    weights_info = None
    lw = None
    if a.weights:  # a weight file that does not fit is refused before anything is printed
        try:
            lw = load(a.weights, spec=con, k=0)
            check_against(con.epilogue, lw.layers, a.weights)
            bad = declared_mismatches(con, 0, lw)
        except WeightFileError as e:
            raise UsageError(str(e).splitlines()[0] if str(e) else "unreadable weight file") from None
        if bad and not a.allow_metadata_mismatch:
            raise UsageError(f"{a.weights} declares {'; '.join(bad)}; pass --allow-metadata-mismatch to prove "
                             f"it against {a.graph}")
    # the --format holds this stack (or refused now, in one line, before the proof)
    check_export_arguments(a, con, sections={"epilogue": lw.layers} if lw is not None else None)
    _print_warnings(a.graph, caught)  # every check passed
    info = con.info
    m, cm = info["circuit"], info["compiled"]
    print(f"circuit {a.graph}: {m['n_inputs']} inputs, {len(con.output_slots)} outputs, size {m['size']}, "
          f"depth {m['depth']}, width {m['width']}, degree {m['degree']}", file=out)
    print(f"compiled to {target} in {t_compile:.3f} s: {cm['layers']} layers (circuit depth {m['depth']}), "
          f"state {cm['tokens']} x {cm['state_width']} (circuit width {m['width']}); "
          + (f"guaranteed: at most {cm['bound']['layers']} layers on {cm['bound']['tokens']} tokens; "
             if "bound" in cm else "")
          + f"Thm. H.21 bound: {info['theorem_H21_bound']['layers']} layers, "
          f"{info['theorem_H21_bound']['inner_dimension']} width", file=out)
    ra = cm.setdefault("reassociated", {"ran": False})
    print(f"re-association: multiplicative depth {ra['mult_depth_before']} -> {ra['mult_depth_after']}; "
          f"compiled {ra['chosen']} (--as-written skips it)" if ra["ran"]
          else f"compiled as written ({ra['skipped']})" if "skipped" in ra else "compiled as written (--as-written)",
          file=out)
    if "outputs" in cm:
        shown = list(cm["outputs"].items())
        more = f", ... ({len(shown)} in all; --json lists them)" if len(shown) > 8 else ""
        print("outputs at (token, channel): " + ", ".join(f"{n} {tuple(s)}" for n, s in shown[:8]) + more,
              file=out)
    sections = {"prologue": [], "body": [], "epilogue": lw.layers} if lw is not None else None
    proof = _prove_limited(con, sections, a)
    if lw is not None:
        weights_info = {"file": a.weights, "layers": len(lw.layers)}
        con.epilogue = lw.layers
    print_proof(proof, out)
    write_export(a, con, out=out)

    show = interactive()
    t0 = time.perf_counter()
    mod = modular.trials(g, con, names, a.trials, a.seed, validated=True)  # g: C.load's validated circuit
    t_mod = time.perf_counter() - t0
    n_float = min(a.trials, a.float_trials)
    max_rel, non_finite = float_trials(g, con, names, n_float, a.seed, show) if n_float else (0.0, 0)
    print(f"random inputs modulo the prime {mod['prime']}: {mod['agree']}/{a.trials} agree exactly with the "
          f"circuit ({t_mod:.2f} s; a stack that differs passes one with probability at most "
          f"degree/p = {m['degree']}/{mod['prime']})", file=out)
    n_values = n_float * len(con.output_slots)
    if n_float == 0:
        print("float64 trials: none run (--float-trials 0)", file=out)
    elif non_finite >= n_values:
        print(f"{n_float} random float64 inputs: every output value ({n_values}) not finite in float64 "
              f"(overflow): no error measured", file=out)
    else:
        print(f"{n_float} random float64 inputs: max error {max_rel:.3e} (relative to max(|exact|, 1)) against the "
              f"exact value at the same inputs, over {n_values - non_finite} finite output value(s)"
              + (f"; {non_finite} not finite in float64 (overflow), left out" if non_finite else ""), file=out)
    report = {"command": "circuit", "graph": a.graph, "metrics": m, "compiled": cm,
              "bound": info["theorem_H21_bound"], "proof": proof.to_json(),
              "modular_trials": {"n": a.trials, "prime": mod["prime"], "exact_agreement": mod["agree"],
                                 "seconds": t_mod},
              "float64_trials": {"n": n_float, "non_finite": non_finite,
                                 # null where no finite output value was compared (none run, all overflowed)
                                 "max_relative_error": max_rel if n_values > non_finite else None}}
    if weights_info:
        report["weights"] = weights_info
    if getattr(a, "pareto", False):
        from constructions.compiler.budget import pareto

        report["pareto"] = pareto(g, target, reassociate=_reassociate_flag(a))
        print("layers/channels frontier (each compiled; budget -> state): " + ", ".join(
            f"{p['layers']} layers x {p['channels']} ch ({p['tokens']} tokens"
            + (f", budget {p['budget']})" if p["budget"] is not None else ", unbounded)") for p in report["pareto"]),
            file=out)
    if a.trace or a.plot:  # the labels are read after the proof, from the proved layers
        _trace(con, a, report, out)
    if a.json:
        atomic_write_text(a.json, json.dumps(report, indent=1, default=str), "--json")
        print(f"report written to {a.json}", file=out)
    ok = proof.ok and mod["agree"] == a.trials
    return EXIT_OK if ok else EXIT_FAILED
