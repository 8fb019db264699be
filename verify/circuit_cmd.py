"""``python -m verify.construct circuit --graph FILE.json``: a user's circuit.

Loads the circuit (networkx node-link JSON, ``circuits/io.py``), compiles it
to a BaseConv stack (``constructions/compiler``), proves the stack's output
polynomials equal the circuit's (the verdict), and cross-checks both on random
inputs: exactly, modulo a prime, all trials at once (``verify/prover/modular.py``), and
in float64 against the exact value of the same float inputs.

Sizes are bounded by :data:`LIMITS` (``--allow-large``: :data:`LARGE_LIMITS`),
checked on the file and the circuit's metrics before any compile or proof
work; the output paths (``--json``, ``--export``, ``--plot``) are checked before that work
too and written atomically.  ``--trace`` / ``--plot``: which circuit node sits at each (token,
channel) of every layer's state (``verify/compiler_trace.py``), printed, in the JSON
report as ``compiled.trace``, drawn as a PNG.
"""
from __future__ import annotations

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
from circuits.metrics import check_limits
from constructions.compiler import TARGETS, CompileError, compile_circuit, default_target
from constructions.compiler.targets import accepting, names_text
from constructions.ops import nonzero_pattern
from constructions.weights_io import WeightFileError, check_against, declared_mismatches, load
from polyverify.plumbing.cli import (EXIT_FAILED, EXIT_OK, atomic_write_text, report_json, check_memory, human_bytes, interactive,
                                     one_line, progress)

from . import bounded
from .prover import modular
# the arguments, limits and argument checks live in the light verify/circuit_args.py (re-exported here)
from .circuit_args import (LARGE_LIMITS, LIMITS, add_arguments, check_arguments, float_trials_of,  # noqa: F401
                           limits_help)
from .cli_common import UsageError, holds, print_proof
from .export import check_export_arguments, write_export

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


def print_warnings(path, caught) -> None:
    """After every check passed: one line each, not python's two-line warning with a source line."""
    for w in caught:
        if issubclass(w.category, PrunedNodesWarning):
            print(f"warning: {path}: {one_line(str(w.message))}", file=sys.stderr)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


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


def _planned(L):
    """A layer in float64, planned (``Layer.prepare``: BaseConv on its live inner channels, the
    convolution per channel class, ``constructions.conv.ConvPlan``: masked shifts as shifted copies,
    never a dense (T, T, C) Toeplitz array; attention heads on the rows and columns they use)."""
    return L.map(_float_array).prepare()


def float_trial_bytes(con, trials: int) -> int:
    """An upper estimate of the float64 trials' memory (bytes), from the compiled stack's shapes and
    nonzero patterns alone (nothing float is allocated): every distinct layer's cast weights (held for
    the run: the dense (T, C) filters and biases, twice: the plan keeps their live columns; a sparse
    mix's entries at 24 bytes each), two states
    of ``trials x T x C``, and the largest layer's working set: five ``trials x T x C`` temporaries
    (gate, convolution input and output, product, the shifted copy), plus, for a BaseConv layer, the
    (T, T) kernel of each channel that ``ConvPlan`` runs as a Toeplitz/circulant product (more than
    one nonzero tap per ``FEW_TAPS_PER`` tokens), and for an attention layer three projections per head."""
    from constructions.conv import FEW_TAPS_PER
    from constructions.sparse import SparseMatrix

    T, Cw = con.layout.shape
    state = 8 * trials * T * Cw
    weights, work, seen = 0, 0, set()
    for L in con.layers(0):
        if id(L) in seen:
            continue
        seen.add(id(L))
        for A in L.arrays().values():
            weights += 24 * A.nnz if isinstance(A, SparseMatrix) else 16 * int(np.size(A))
        if L.kind == "baseconv":
            nz = np.asarray(nonzero_pattern(L.h), dtype=bool)
            taps = nz.sum(axis=0)
            lag0 = nz[0] & (taps == 1)
            uniform = (taps == T) & np.asarray(L.h == L.h[:1], dtype=bool).all(axis=0)
            general = (taps * FEW_TAPS_PER > T) & ~lag0 & ~uniform
            layer = 5 * state + 8 * T * T * int(general.sum())
        else:
            layer = (2 + 3 * max(1, len(getattr(L, "heads", ())))) * state
        work = max(work, layer)
    return weights + 2 * state + work


def float_trials(g, con, names, trials: int, seed: int, show: bool) -> tuple[float, int]:
    """The stack in float64 on ``trials`` random normal inputs against the exact value of the
    circuit at the same inputs: (max error relative to max(|exact|, 1), non-finite outputs).  The
    layers run planned (:func:`_planned`); :func:`float_trial_bytes` bounds their memory."""
    xs = np.random.default_rng(seed).standard_normal((len(names), trials))
    fv = {n: xs[i] for i, n in enumerate(names)}
    S = con.input_state(fv) if names else np.zeros((trials,) + con.layout.shape)
    with np.errstate(over="ignore", invalid="ignore"):
        S, _ = con.run(fv, 0, state=S, cast=_planned)
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
    (``verify/bounded.py``), refuting first (``verify/prover/refute.py``: wrong weights are FAILED with an
    exact counterexample at an integer point, never a residual polynomial)."""
    return bounded.prove(con, a, a.graph, sections=sections, refute=True)


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


def reassociate_flag(a):
    """compile_circuit's ``reassociate``: False (--as-written), True (--reassociate), None (by size)."""
    if getattr(a, "as_written", False):
        return False
    return True if getattr(a, "reassociate", False) else None


def cmd_circuit(a, out) -> int:
    """The command, on arguments ``verify.circuit_args.check_arguments`` has passed (verify.construct
    runs it before importing this module, so that those errors stay light)."""
    lim = LARGE_LIMITS if a.allow_large else LIMITS
    g, caught = _load_circuit(a, lim)
    if getattr(a, "repeat", None) is not None:  # one step of an iteration (verify/circuit_repeat.py)
        from .circuit_repeat import cmd_repeat

        return cmd_repeat(a, g, caught, out)
    names = C.inputs(g)
    _check_work(a, g, names, lim)
    target = check_target(a, g)
    con, t_compile = _compile(a, g, target)
    lw = _load_weights(a, con)  # a weight file that does not fit is refused before anything is printed
    # the --format holds this stack (or refused now, in one line, before the proof)
    check_export_arguments(a, con, sections={"epilogue": lw.layers} if lw is not None else None)
    print_warnings(a.graph, caught)  # every check passed
    _print_compiled(a, con, target, t_compile, out)
    sections = {"prologue": [], "body": [], "epilogue": lw.layers} if lw is not None else None
    float_skip = _float_memory(a, con)  # the float64 trials' memory, bounded before the proof
    proof = _prove_limited(con, sections, a)
    compiled_layers = con.epilogue
    if lw is not None:
        con.epilogue = lw.layers
    distance = None
    if lw is not None and not holds(proof):  # diagnosis of a FAILED file: how far from the compiled stack
        from .nearest import print_failed
        from .weight_distance import weight_distance

        distance = weight_distance(compiled_layers, lw.layers)
        w = distance.worst
        print_failed(proof, None, out, distance.line(f"the compiled stack of {a.graph} (a compiled circuit has no "
                                                      f"parameters: no family to fit, the entry-wise distance only)"),
                     summary=f"weight distance {float(w.max_abs) if w else 0.0:.3g} to the compiled stack")
    else:
        print_proof(proof, out)
    write_export(a, con, out=out)
    mod, floats = _random_trials(a, g, con, names, out, float_skip)
    info = con.info
    report = {"command": "circuit", "graph": a.graph, "metrics": info["circuit"], "compiled": info["compiled"],
              "bound": info["theorem_H21_bound"], "proof": proof.to_json(), "modular_trials": mod,
              "float64_trials": floats}
    if lw is not None:
        report["weights"] = {"file": a.weights, "layers": len(lw.layers)}
        if distance is not None:
            report["weights"]["distance"] = distance.to_json()
    if getattr(a, "pareto", False):
        _pareto(a, g, target, report, out)
    if a.trace or a.plot:  # the labels are read after the proof, from the proved layers
        _trace(con, a, report, out)
    if getattr(a, "plot_weights", None):
        from .compiler_trace_plot import plot_weights

        n = plot_weights(list(con.prologue) + list(con.body) + list(con.epilogue), a.plot_weights,
                         title=f"{a.graph} on {target}")
        report["plot_weights"] = {"file": a.plot_weights, "panels": n}
        print(f"weight heat maps ({n} arrays) written to {a.plot_weights}", file=out)
    if a.json:
        atomic_write_text(a.json, report_json(report), "--json")
        print(f"report written to {a.json}", file=out)
    ok = holds(proof) and mod["exact_agreement"] == a.trials
    return EXIT_OK if ok else EXIT_FAILED


def _check_work(a, g, names, lim: dict) -> None:
    """Refuse, before any compile or proof work, trials or a proof too large for the limits."""
    work = a.trials * g.number_of_nodes()
    if work > lim["max_trial_nodes"]:
        more = "" if a.allow_large else f"; pass --allow-large to allow up to {LARGE_LIMITS['max_trial_nodes']}"
        raise UsageError(f"--trials {a.trials} x {g.number_of_nodes()} nodes = {work} exceeds the limit "
                         f"max_trial_nodes = {lim['max_trial_nodes']} (lower --trials{more})")
    m0 = C.metrics(g, validated=True)  # g is C.load's validated circuit
    # the float64 trials hold the inputs, the state and a layer's temporaries for every trial at once
    check_memory(f"--trials {a.trials} on this circuit", 8.0 * a.trials * (len(names) + m0["size"] + 1) * 4)
    # the proof's size (degree, terms, work) from the circuit: refused now if it cannot finish in time
    bounded.check_circuit_estimate(bounded.circuit_estimate(g), a, a.graph)


def check_target(a, g) -> str:
    """The compile target (``--target`` or the circuit's default), refusing options it does not take."""
    target = a.target or default_target(g)
    if getattr(a, "heads", None) is not None and not TARGETS[target].accepts("heads"):
        raise UsageError(f"--heads applies to --target {names_text(accepting('heads'))}, not {target} "
                         "(this circuit's default)")
    for flag, v in (("--channels", getattr(a, "channels", None)), ("--pareto", getattr(a, "pareto", False) or None)):
        if v is not None and not TARGETS[target].accepts("channels"):  # --pareto: the frontier of channel budgets
            raise UsageError(f"{flag} applies to --target {names_text(accepting('channels'))}, not {target}")
    return target


def _compile(a, g, target: str):
    """The compiled stack and the seconds it took; a compile error is a one-line usage error."""
    t0 = time.perf_counter()
    try:
        con = compile_circuit(g, name=Path(a.graph).stem, target=target, heads=getattr(a, "heads", None),
                              reassociate=reassociate_flag(a), channels=getattr(a, "channels", None))
    except CompileError as e:
        raise UsageError(f"{a.graph}: --target {target}: {one_line(str(e))}") from None
    except ValueError as e:  # a channel budget below the stated minimum (named)
        if "channel budget" not in str(e):
            raise
        raise UsageError(f"{a.graph}: --channels {a.channels}: {one_line(str(e))}") from None
    return con, time.perf_counter() - t0


def _load_weights(a, con):
    """``--weights``: the file's layers as the stack's epilogue (None without the option), refused in
    one line when they do not fit or (without --allow-metadata-mismatch) declare another circuit."""
    if not a.weights:
        return None
    try:
        lw = load(a.weights, spec=con, k=0)
        check_against(con.epilogue, lw.layers, a.weights)
        bad = declared_mismatches(con, 0, lw)
    except WeightFileError as e:
        raise UsageError(str(e).splitlines()[0] if str(e) else "unreadable weight file") from None
    if bad and not a.allow_metadata_mismatch:
        raise UsageError(f"{a.weights} declares {'; '.join(bad)}; pass --allow-metadata-mismatch to prove "
                         f"it against {a.graph}")
    return lw


def _guarantee(bound, rewritten) -> str:
    """The compiler's stated bound as the summary line gives it: layers and channels with their formulas,
    naming the circuit whose measures they read."""
    f = bound.get("formulas", {})

    def part(key, unit):
        e = f.get(key)
        if e is None:
            return f"{bound[key]} {unit}" if key in bound else None
        ms = ", ".join(f"{k} = {v}" for k, v in e["measures"].items())
        return f"{bound[key]} {unit} ({e['formula']}; {ms})"

    of = ("the re-associated circuit's" if rewritten else "this circuit's") + (
        " token-sum form" if "token_sum_form" in bound else "")
    parts = [p for p in (part("layers", "layers"), part("state_width", "channels")) if p]
    return f"guaranteed, in {of} measures: at most {' and '.join(parts)} on {bound['tokens']} tokens; "


def _print_compiled(a, con, target: str, t_compile: float, out) -> None:
    """The circuit's metrics, the compiled stack's shape and bounds, re-association, output slots."""
    info = con.info
    m, cm = info["circuit"], info["compiled"]
    after = (cm.get("reassociated") or {}).get("circuit_after")  # the circuit compiled, where rewritten
    h21 = info["theorem_H21_bound"]
    print(f"circuit {a.graph}: {m['n_inputs']} inputs, {len(con.output_slots)} outputs, size {m['size']}, "
          f"depth {m['depth']}, width {m['width']}, degree {m['degree']}", file=out)
    # each figure names the circuit it is of: Thm. H.21's entry carries its own Delta and w (of the circuit
    # compiled, or of the circuit as given where its token-sum form was compiled); the guarantee is in the
    # measures of the circuit the target compiled
    of = (f"the re-associated circuit compiled: depth {h21['Delta']}, width {h21['w']}" if after
          else f"this circuit: depth {h21['Delta']}, width {h21['w']}")
    print(f"compiled to {target} in {t_compile:.3f} s: {cm['layers']} layers, state {cm['tokens']} x "
          f"{cm['state_width']}; " + (_guarantee(cm["bound"], after) if "bound" in cm else "")
          + f"Thm. H.21 ({of}): {h21['layers']} layers, {h21.get('inner_tokens', '')} inner tokens, "
          f"{h21['inner_dimension']} inner channels, no constants stated", file=out)
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


def _float_memory(a, con) -> str | None:
    """Why the float64 trials are skipped (one line naming the estimate and the bound), or None:
    :func:`float_trial_bytes` of the compiled stack against ``--proof-memory-gib``, the memory the
    command may use (checked after the compile, before the proof and before any float array)."""
    n = float_trials_of(a)
    if not n:
        return None
    need, bound = float_trial_bytes(con, n), getattr(a, "proof_memory_gib", bounded.DEFAULT_MEMORY_GIB) * 2**30
    if need <= bound:
        return None
    T, Cw = con.layout.shape
    return (f"the planned float64 run of {n} trials on {T} x {Cw} needs about {human_bytes(need)}, above the bound "
            f"{human_bytes(bound)} (--proof-memory-gib; lower --float-trials or raise it)")


def _random_trials(a, g, con, names, out, float_skip: str | None = None) -> tuple[dict, dict]:
    """The random cross-checks, printed: modulo a prime (every trial) and in float64 (``--float-trials``;
    ``float_skip``: why they are skipped, :func:`_float_memory`); their report entries
    (``modular_trials``, ``float64_trials``).  A float run out of memory is one line, never a traceback
    after the verdict."""
    show = interactive()
    t0 = time.perf_counter()
    mod = modular.trials(g, con, names, a.trials, a.seed, validated=True)  # g: C.load's validated circuit
    t_mod = time.perf_counter() - t0
    n_float = 0 if float_skip else float_trials_of(a)
    try:
        max_rel, non_finite = float_trials(g, con, names, n_float, a.seed, show) if n_float else (0.0, 0)
    except MemoryError:  # the estimate is an upper estimate; this is the last guard
        float_skip = (f"the float64 run of {n_float} trials ran out of memory (estimated "
                      f"{human_bytes(float_trial_bytes(con, n_float))})")
        n_float, max_rel, non_finite = 0, 0.0, 0
    print(f"random inputs modulo the prime {mod['prime']}: {mod['agree']}/{a.trials} agree exactly with the "
          f"circuit ({t_mod:.2f} s; a stack that differs passes one with probability at most "
          f"degree/p = {con.info['circuit']['degree']}/{mod['prime']})", file=out)
    n_values = n_float * len(con.output_slots)
    if float_skip:
        print(f"float64 trials: skipped: {float_skip}", file=out)
        return ({"n": a.trials, "prime": mod["prime"], "exact_agreement": mod["agree"], "seconds": t_mod},
                {"n": 0, "non_finite": 0, "max_relative_error": None, "skipped": float_skip})
    if n_float == 0:
        print("float64 trials: none run (--float-trials 0)", file=out)
    elif non_finite >= n_values:
        print(f"{n_float} random float64 inputs: every output value ({n_values}) not finite in float64 "
              f"(overflow): no error measured", file=out)
    else:
        print(f"{n_float} random float64 inputs: max error {max_rel:.3e} (relative to max(|exact|, 1)) against the "
              f"exact value at the same inputs, over {n_values - non_finite} finite output value(s)"
              + (f"; {non_finite} not finite in float64 (overflow), left out" if non_finite else ""), file=out)
    return ({"n": a.trials, "prime": mod["prime"], "exact_agreement": mod["agree"], "seconds": t_mod},
            {"n": n_float, "non_finite": non_finite,
             # null where no finite output value was compared (none run, all overflowed)
             "max_relative_error": max_rel if n_values > non_finite else None})


def _pareto(a, g, target: str, report: dict, out) -> None:
    """``--pareto``: the layers/channels frontier, printed and in the report."""
    from constructions.compiler.budget_search import pareto

    try:
        report["pareto"] = pareto(g, target, reassociate=reassociate_flag(a))
    except (CompileError, ValueError, MemoryError) as e:  # after the verdict: one line, never a traceback
        report["pareto"] = None
        print(f"layers/channels frontier: not computed ({type(e).__name__}: {one_line(str(e))})", file=out)
        return
    print("layers/channels frontier (each compiled; budget -> state): " + ", ".join(
        f"{p['layers']} layers x {p['channels']} ch ({p['tokens']} tokens"
        + (f", budget {p['budget']})" if p["budget"] is not None else ", unbounded)") for p in report["pareto"]),
        file=out)
