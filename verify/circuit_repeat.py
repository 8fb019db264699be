"""``python -m verify.construct circuit --graph STEP.json --repeat K``: an iterative algorithm.

The circuit is one step (``constructions/iterated.py``): an output named as an input feeds that input in
the next step, data kept across steps is a pass-through output, ``--params`` names inputs held fixed.  The
step is compiled once as the repeated body of prologue + body x K + epilogue, proved once for every depth
(one body in fresh symbols, by induction: ``docs/design.md`` decision 4), run K steps in float64 and
float32 against the exact iteration (mpmath, ``numerics/iterate.py``) and exported with K body copies.
Every refusal (an unfed input, an output feeding no input or one of another shape, a changed parameter,
``--repeat`` out of range, too much float work) is one line, exit 2, before any compile.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

import circuits as C
from constructions.compiler import CompileError
from constructions.iterated import IterationError, check_step, compile_iteration, step_params
from polyverify.plumbing.cli import EXIT_FAILED, EXIT_OK, atomic_write_text, one_line, report_json

from . import bounded
from .circuit_args import LARGE_LIMITS, LIMITS, float_trials_of
from .cli_common import UsageError, holds, print_proof
from .export import check_export_arguments, write_export

#: the dtypes the repeated stack runs in against the mpmath iteration
DTYPES = ("float64", "float32")


def _check_work(a, g, lim: dict) -> None:
    """The float runs' reference (every trial, every step, every node, in mpmath) and the proof, bounded
    before any compile."""
    n_float = float_trials_of(a)
    work = n_float * a.repeat * g.number_of_nodes() * len(DTYPES)
    if work > lim["max_repeat_work"]:
        more = "" if a.allow_large else f"; pass --allow-large to allow up to {LARGE_LIMITS['max_repeat_work']:,}"
        raise UsageError(f"--float-trials {n_float} x --repeat {a.repeat} x {g.number_of_nodes()} nodes x "
                         f"{len(DTYPES)} dtypes = {work:,} exceeds the limit max_repeat_work = "
                         f"{lim['max_repeat_work']:,} (lower --float-trials or --repeat{more})")
    bounded.check_circuit_estimate(bounded.circuit_estimate(g), a, a.graph)


def cmd_repeat(a, g, caught, out) -> int:
    """The command on the loaded circuit ``g`` (``circuit_cmd._load_circuit``'s, with its warnings)."""
    from .circuit_cmd import check_target, print_warnings, reassociate_flag

    lim = LARGE_LIMITS if a.allow_large else LIMITS
    try:
        a.param_names = step_params(g, a.param_names)  # --params, then inputs declared "param": true
        check_step(g, a.param_names)  # the refusals of a step, before any work
    except IterationError as e:
        raise UsageError(f"{a.graph}: {one_line(str(e))}") from None
    _check_work(a, g, lim)
    target = check_target(a, g)
    t0 = time.perf_counter()
    try:
        con = compile_iteration(g, a.repeat, params=a.param_names, target=target, name=Path(a.graph).stem,
                                limit=lim["max_repeat"], heads=getattr(a, "heads", None),
                                reassociate=reassociate_flag(a), channels=getattr(a, "channels", None))
    except (CompileError, IterationError) as e:
        raise UsageError(f"{a.graph}: --target {target}: {one_line(str(e))}") from None
    except ValueError as e:  # a channel budget below the stated minimum (named)
        if "channel budget" not in str(e):
            raise
        raise UsageError(f"{a.graph}: --channels {a.channels}: {one_line(str(e))}") from None
    t_compile = time.perf_counter() - t0
    check_export_arguments(a, con, k=a.repeat)
    print_warnings(a.graph, caught)
    m, cm = con.info["circuit"], con.info["compiled"]
    held = f"; parameters held in the state (symbols of the proof): {', '.join(con.params_held)}" \
        if con.params_held else ""
    print(f"step {a.graph}: {m['n_inputs']} inputs, each fed by the output of its name ({len(con.carried)} changed "
          f"by the step, the others passed through){held}; size {m['size']}, depth {m['depth']}, degree "
          f"{m['degree']}", file=out)
    print(f"compiled to {target} in {t_compile:.3f} s: body {len(con.body)} layers on a {cm['tokens']} x "
          f"{cm['state_width']} state, repeated {a.repeat} times: depth {con.depth(a.repeat)} "
          f"(prologue {len(con.prologue)} + {len(con.body)} x {a.repeat} + epilogue {len(con.epilogue)})", file=out)
    proof = bounded.prove(con, a, a.graph, refute=True)
    print_proof(proof, out)
    if holds(proof):
        print(f"PROVED at every depth: input -> state, one body state(v) -> state(step(v)) and state -> output "
              f"checked once, so the stack is the iteration for every K (K = {a.repeat} here)", file=out)
    write_export(a, con, k=a.repeat, out=out)
    floats = _float_runs(a, con, out)
    report = {"command": "circuit", "graph": a.graph, "metrics": con.info["circuit"], "compiled": cm,
              "bound": con.info.get("theorem_H21_bound"), "proof": proof.to_json(),
              "proved_every_depth": bool(holds(proof)), "float_runs": floats}
    if a.json:
        atomic_write_text(a.json, report_json(report), "--json")
        print(f"report written to {a.json}", file=out)
    return EXIT_OK if holds(proof) else EXIT_FAILED


def _float_runs(a, con, out) -> list[dict]:
    """K steps in each of :data:`DTYPES` on ``--float-trials`` random inputs (uniform in [-1, 1], seeded by
    ``--seed``; a ``--params NAME=VALUE`` at its value) against the mpmath iteration from the same inputs; printed and returned."""
    from numerics.iterate import run_against_reference

    n = float_trials_of(a)
    if n == 0:
        print("float runs: none (--float-trials 0)", file=out)
        return []
    rng = np.random.default_rng(a.seed)
    names = C.inputs(con.graph)
    v0 = {nme: rng.uniform(-1.0, 1.0, n) for nme in names}
    for nme, val in getattr(a, "param_values", {}).items():  # --params NAME=VALUE: its float64 rounding
        v0[nme] = np.full(n, float(val))
    runs = []
    for dt in DTYPES:
        t0 = time.perf_counter()
        r = run_against_reference(con, v0, a.repeat, np.dtype(dt))
        finite = [e for e in r.errors if e == e]
        print(f"{dt}, {n} random inputs, {a.repeat} steps against the exact iteration (mpmath): error after step 1 "
              f"{r.errors[0]:.3e}, after step {a.repeat} {r.final:.3e}, largest {max(finite) if finite else float('nan'):.3e}"
              f" (relative to max(|exact|, 1))" + (f"; {sum(r.non_finite)} values not finite (overflow), left out"
                                                   if any(r.non_finite) else "")
              + f" ({time.perf_counter() - t0:.2f} s)", file=out)
        runs.append(r.to_json())
    return runs
