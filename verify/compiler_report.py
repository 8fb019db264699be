"""``python -m verify.compiler_report [--out docs/compiler.md] [--json FILE] [--quick]``: the circuit
compiler (``constructions/compiler``) on every placed builder of ``circuits.builders`` and every
target, each compiled stack proved, beside the hand-written GD architectures.

Writes a markdown report (default ``docs/compiler.md``): (a) for each builder (placed form) x
target the circuit's size / depth / width / multiplicative depth, the compiled layers, state,
parameters, the compiler's guaranteed bound, the verdict of the prover and the compile and proof
times (CPU and wall), or the compiler's refusal; (b) the GD step: the hand-written architectures
of the registry next to the compiled ones; (c) the derivation of the guarantee and what is not
done.  Every number in it comes from the run.  ``--json FILE`` writes the same results as JSON.
``--quick`` uses small sizes (seconds; for the tests).
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import sys
import time
from fractions import Fraction

from constructions.compiler.circuit import param_counts
from constructions.compiler.targets import TARGETS, accepting

# the markdown is its own module (verify/compiler_report_sections.py); verify.compiler_report re-exports its
# public names (its private helpers stay there)
from .compiler_report_sections import (ATTENTION, GD_SIZES, PLAN_ABBREV, SEQUENCE, TRACE_PNG,  # noqa: F401
                                       markdown, plural)
from .prover.kernel import is_proved, verdict

#: default and --quick sizes: builder name -> positional arguments (horner: its coefficients)
SIZES = {
    "default": {
        "dot": (20,),
        "matvec": (20, 5),
        "gd_step": (20, 5, Fraction(1, 16)),
        "gd_step_gram": (20, 5, Fraction(1, 16)),  # the same step, gradient as (A^T A) x - A^T b
        "ridge_gd_step": (20, 5, Fraction(1, 16), Fraction(1, 10)),
        "newton_schulz_step": (5, 20),  # (d, n): A is n x d, M is d x d
        "horner": tuple(Fraction((-1) ** k, k + 1) for k in range(6)),
    },
    "quick": {
        "dot": (3,),
        "matvec": (3, 2),
        "gd_step": (3, 2, Fraction(1, 16)),
        "gd_step_gram": (3, 2, Fraction(1, 16)),
        "ridge_gd_step": (3, 2, Fraction(1, 16), Fraction(1, 10)),
        "newton_schulz_step": (2, 3),
        "horner": (Fraction(1), Fraction(-1, 2), Fraction(1, 3)),
    },
}


def _arg(x) -> str:
    return str(x)


def call_text(builder: str, args: tuple) -> str:
    if builder == "horner":
        return f"horner([{', '.join(map(_arg, args))}])"
    if builder.endswith("_gram"):
        return f"{builder[:-5]}({', '.join(map(_arg, args))}, form=gram)"
    return f"{builder}({', '.join(map(_arg, args))})"


def build_circuit(builder: str, args: tuple):
    import circuits as C

    if builder == "horner":
        return C.horner(list(args), placed=True)
    if builder.endswith("_gram"):  # the builder's re-associated form (circuits.builders.FORMS)
        return getattr(C, builder[:-5])(*args, placed=True, form="gram")
    return getattr(C, builder)(*args, placed=True)


def multiplicative_depth(g) -> int:
    """The circuit's multiplicative depth as every target counts it (n-ary products split into
    balanced binary trees, constants folded: :mod:`constructions.compiler.linearise`)."""
    from constructions.compiler.linearise import linearise, needed

    atoms, level, outputs = linearise(g)
    return max([0] + [level[a] for a in needed(atoms, outputs)])


def _timed(fn):
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - c0, time.perf_counter() - w0


def _inner_channels(g, target: str) -> list:
    """(plan kind, inner channels) of each layer of a sequence target (the compiler's plan, run
    again outside the timings)."""
    from constructions.compiler.sequence import plan

    specs, kinds, *_ = plan(g, TARGETS[target].causal)
    return [[k, sp.inner] for k, sp in zip(kinds, specs)]


def compile_cell(builder: str, args: tuple, g, circuit: dict, target: str) -> dict:
    from constructions.compiler import CompileError, compile_circuit
    from verify.prover.proof import prove

    cell = {"builder": builder, "call": call_text(builder, args), "args": [str(a) for a in args], "target": target,
            "circuit": circuit}
    try:
        con, ccpu, cwall = _timed(lambda: compile_circuit(g, name=builder, target=target))
    except CompileError as e:
        cell.update(status="refused", message=str(e))
        return cell
    cm = con.info["compiled"]
    r, pcpu, pwall = _timed(lambda: prove(con))
    layers = list(con.prologue) + list(con.body) + list(con.epilogue)
    tokens, channels = con.layout.shape
    bound = dict(TARGETS[target].bound(con))
    family = TARGETS[target].family
    if family == "mlp":
        plan, inner = None, None
    else:
        plan = list(cm["plan"])
        # attention targets: heads per layer of the plan; sequence targets: inner channels
        inner = [list(kh) for kh in zip(cm["plan"], cm["heads"])] if family == "attention" else \
            _inner_channels(g, target)
    cell.update(
        status=verdict(r).value, message=None if is_proved(r) else r.failure.describe(),
        layers=len(layers), reported_layers=cm["layers"], tokens=tokens, channels=channels,
        params=cm.get("params") or param_counts(layers), plan=plan, inner_channels=inner,
        modules=cm.get("modules"),
        compiled_multiplicative_depth=cm.get("multiplicative_depth"), bound=bound,
        within_bound=len(layers) <= bound["layers"] and tokens <= bound["tokens"]
        and channels <= bound.get("state_width", channels),
        theorem_H21=con.info.get("theorem_H21_bound"),
        compile_cpu_s=ccpu, compile_wall_s=cwall, proof_cpu_s=pcpu, proof_wall_s=pwall,
        proof_entries=r.entries_checked)
    return cell


def builder_cells(mode: str, log) -> list[dict]:
    import warnings

    import circuits as C

    cells = []
    for builder, args in SIZES[mode].items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", C.PrunedNodesWarning)
            g = build_circuit(builder, args)
        circuit = dict(C.metrics(g), multiplicative_depth=multiplicative_depth(g))
        pl = C.placement(g)
        circuit["grid"] = [pl.tokens, pl.channels]
        for target in TARGETS:
            c = compile_cell(builder, args, g, circuit, target)
            cells.append(c)
            log(_cell_line(c))
    return cells


def _cell_line(c: dict) -> str:
    head = f"{c['call']} -> {c['target']}"
    if c["status"] == "refused":
        return f"refused {head}: {c['message']}"
    return (f"{c['status']} {head}: {plural(c['layers'], 'layer')} (bound {c['bound']['layers']}), state "
            f"{c['tokens']} x {c['channels']}; compile {c['compile_cpu_s']:.3f} s CPU, proof "
            f"{c['proof_cpu_s']:.3f} s CPU")


def gd_rows(mode: str, log) -> list[dict]:
    from constructions.catalogue import gd_architectures
    from verify.prover.proof import prove

    n, d = GD_SIZES[mode]
    rows = []
    for arch, e in gd_architectures().items():
        con, bcpu, bwall = _timed(lambda: e.build(n, d))
        r, pcpu, pwall = _timed(lambda: prove(con))
        compiled = getattr(con, "compiled", None) is not None
        row = {"arch": arch, "entry": e.name, "kind": "compiled" if compiled else "hand-written",
               "paper": e.paper, "depth_formula": e.depth, "state_formula": e.state, "N": n, "D": d,
               "layers_per_step": len(con.body), "fixed_layers": len(con.prologue) + len(con.epilogue),
               "prologue": len(con.prologue), "epilogue": len(con.epilogue),
               "state": list(con.layout.shape),
               "params_body": param_counts(con.body),
               "params_all": param_counts(list(con.prologue) + list(con.body) + list(con.epilogue)),
               "proved": is_proved(r), "symbolic_params": list(r.symbolic_params),
               "fixed_params": {k: str(v) for k, v in con.params.items() if k not in r.symbolic_params},
               "build_cpu_s": bcpu, "build_wall_s": bwall, "proof_cpu_s": pcpu, "proof_wall_s": pwall}
        rows.append(row)
        log(f"{verdict(r).value} gd --arch {arch} at N={n}, D={d}: "
            f"{plural(row['layers_per_step'], 'layer')} per step + {row['fixed_layers']}, state "
            f"{con.layout.shape[0]} x {con.layout.shape[1]}; proof {pcpu:.3f} s CPU")
    return rows


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    return {"platform": platform.platform(), "cpu": cpu, "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
            "generated": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def warm_up() -> None:
    """Compile and prove ``dot(1)`` on every target before the clocks start, so that no cell's
    time is an import or a first call's set-up."""
    import circuits as C
    from constructions.compiler import CompileError, compile_circuit
    from verify.prover.proof import prove

    g = C.dot(1, placed=True)
    for target in TARGETS:
        try:
            prove(compile_circuit(g, name="warm-up", target=target))
        except CompileError:
            pass


def run(mode: str, log=lambda s: None) -> dict:
    warm_up()
    return {"mode": mode, "sizes": {k: [str(a) for a in v] for k, v in SIZES[mode].items()},
            "cells": builder_cells(mode, log), "gd": gd_rows(mode, log), "trace_example": trace_example(),
            "budget": budget_example(mode), "local": local_example(mode)}


#: the local circuits' token counts (``circuits.local_circuit``: outputs reading 3 neighbouring tokens, 16 gates
#: per token, 2 input channels), default and --quick
LOCAL_TOKENS = {"default": (20, 40, 80, 160, 625), "quick": (10, 20, 40)}


def local_example(mode: str = "default") -> list:
    """``circuits.local_circuit`` at each of :data:`LOCAL_TOKENS`' token counts, blocks of one shape and of random
    shapes, compiled to ``baseconv``: layers, width, and the width under the balanced placement alone
    (``sequence.PLACEMENTS``' first rule, the compiler before the translation-equivariant rule); the largest of
    each kind proved."""
    import circuits as C
    from constructions.compiler import compile_circuit, sequence
    from verify.prover.kernel import verdict
    from verify.prover.proof import prove

    out = []
    tokens = LOCAL_TOKENS[mode]
    for shared in (True, False):
        for T in tokens:
            g = C.local_circuit(T, shared=shared)
            cpu = time.process_time()
            con = compile_circuit(g, target="baseconv")
            cpu = time.process_time() - cpu
            with sequence.placements(sequence.PLACEMENTS[0]):
                alone = compile_circuit(g, target="baseconv").layout.shape[1]
            row = {"tokens": T, "shapes": "one" if shared else "random", "gates": T * 16,
                   "layers": len(con.layers(0)), "width": con.layout.shape[1], "balanced_width": alone,
                   "compile_cpu_s": round(cpu, 2)}
            if T == tokens[-1]:
                row["proved"] = verdict(prove(con)).value == "PROVED"
            out.append(row)
    return out


#: the circuit of the trace section (small in both modes: its tables are printed whole); its PNG
#: (TRACE_PNG) is written next to --out
TRACE_EXAMPLE = ("gd_step", (3, 2, Fraction(1, 16)), "baseconv")


def trace_example() -> dict:
    """:data:`TRACE_EXAMPLE` compiled, proved and labelled (``verify.compiler_trace``):
    JSON-able, plus the :class:`~verify.compiler_trace.Trace` under ``"_trace"`` (for the
    PNG; :func:`_main` takes it out before the JSON is written)."""
    from constructions.compiler import compile_circuit
    from verify.compiler_trace import trace
    from verify.prover.proof import prove

    builder, args, target = TRACE_EXAMPLE
    g = build_circuit(builder, args)
    con = compile_circuit(g, name=builder, target=target)
    proof = prove(con)
    tr = trace(con, seed=0)
    return {"call": call_text(builder, args), "target": target, "proved": is_proved(proof),
            "layers": len(con.layers(0)), "state": list(con.layout.shape), "prime": tr.prime,
            "draws": tr.draws, "error_bound": tr.error_bound,
            "tables": [tr.markdown(i) for i in range(len(tr.layers))], "legend": tr.legend(),
            "trace": tr.to_json(), "_trace": tr}


#: the circuit of the channel-budget section: its layers/channels frontier (constructions/compiler/budget.py)
BUDGET_EXAMPLE = ("gd_step", (20, 5, Fraction(1, 16)))
#: ``--quick``'s circuit of the budget, level-parallel and causal examples (the same sections, a smaller GD step:
#: the default's causal frontier alone takes over a minute of CPU)
QUICK_EXAMPLE = ("gd_step", (6, 2, Fraction(1, 16)))


def budget_example(mode: str = "default") -> dict:
    """The GD step's frontier on both sequence targets, the minimum budget and the stated bound
    (``mode`` "quick": :data:`QUICK_EXAMPLE` in every example of the section)."""
    import circuits as C
    from constructions.compiler.budget_search import minimum_width, pareto

    builder, args = BUDGET_EXAMPLE if mode != "quick" else QUICK_EXAMPLE
    g = build_circuit(builder, args)
    pl = C.placement(g)
    places = list(pl.inputs.values()) + list(pl.outputs.values())
    # the placed grid's channels and the step's d (the text's q = C - grid channels, 2 ceil(d / q) + 1 layers)
    out = {"call": call_text(builder, args), "targets": {}, "grid_channels": 1 + max(c for _, c in places),
           "d": int(args[1])}
    deg = output_degree(g)  # the outputs' degree, expanded exactly: a layer at most doubles it
    out.update(degree=deg, least_layers=max(0, (deg - 1).bit_length()))
    from constructions.compiler.packed import compile_packed

    sh = compile_packed(C.validate(g), "gd", False, out["grid_channels"], fuse=True, relocate=True)
    sc = sh.info["compiled"]  # the shared-carry mode on the grid's own channels (the text's walk-through)
    from verify.prover.kernel import verdict
    from verify.prover.proof import prove

    out["shared"] = {"layers": sc["layers"], "channels": sc["state_width"], "bound": sc["bound"]["layers"],
                     "verdict": verdict(prove(sh)).value}
    for target in accepting("channels"):
        causal = TARGETS[target].causal
        try:
            least = minimum_width(C.validate(g), causal)
            if least is None:
                raise ValueError("no compile tried fits any budget")
        except Exception as e:  # the causal refusal, verbatim
            out["targets"][target] = {"refused": str(e)}
            continue
        from constructions.compiler import compile_circuit

        bd = compile_circuit(g, target=target, channels=least).info["compiled"]["bound"]
        out["targets"][target] = {"minimum": least,
                                  "bound_at_minimum": f"{bd['layers']} ({bd.get('scheme', 'levelled')}; {bd['choice']})",
                                  "frontier": pareto(g, target)}
    out["level_example"] = level_example(mode)
    out["causal_example"] = causal_example(mode)
    return out


def output_degree(g) -> int:
    """The largest total degree of the circuit's outputs, expanded exactly (python-flint)."""
    import flint

    import circuits as C

    names = C.inputs(g)
    ctx = flint.fmpq_mpoly_ctx.get(tuple(names), "lex")
    polys = C.evaluate(C.validate(g), dict(zip(names, ctx.gens())), validated=True,
                       const=lambda c: ctx.constant(flint.fmpq(c.numerator, c.denominator)))
    return max((sum(e) for p in polys.values() if hasattr(p, "to_dict") for e in p.to_dict()), default=0)


#: the causal GD steps with x and the new x on the last token (constructions/compiler/token_sums.py)
CAUSAL_EXAMPLES = (("gd_step", (12, 4, Fraction(1, 16))), ("gd_step", (20, 5, Fraction(1, 16))))


def causal_example(mode: str = "default") -> list:
    """Each of ``CAUSAL_EXAMPLES`` on ``baseconv-causal``: layers, state, verdict, and the hand causal
    construction's state (constructions/gd_baseconv.py)."""
    from constructions.compiler import compile_circuit
    from constructions.gd_baseconv import gd_baseconv_causal
    from verify.prover.kernel import verdict
    from verify.prover.proof import prove

    out = []
    for builder, args in (CAUSAL_EXAMPLES if mode != "quick" else (QUICK_EXAMPLE,)):
        con = compile_circuit(build_circuit(builder, args), target="baseconv-causal")
        cm = con.info["compiled"]
        out.append({"call": call_text(builder, args), "layers": cm["layers"], "tokens": cm["tokens"],
                    "width": cm["state_width"], "proved": verdict(prove(con)).value == "PROVED",
                    "hand": list(gd_baseconv_causal(args[0], args[1]).layout.shape)})
    return out


#: the circuit of the level-parallel scheme's measured example (its minimum budget on ``baseconv``)
LEVEL_EXAMPLE = ("gd_step", (20, 5, Fraction(1, 16)))


def level_example(mode: str = "default") -> dict:
    """``LEVEL_EXAMPLE`` at its least ``baseconv`` budget: the level-parallel compile's layers and
    tokens, its stated bound, and the one-product-at-a-time scheme's stated bound at that budget."""
    import circuits as C
    from constructions.compiler.budget import compile_budget, layer_bound, minimum_channels, one_at_a_time_layers

    builder, args = LEVEL_EXAMPLE if mode != "quick" else QUICK_EXAMPLE
    g = C.validate(build_circuit(builder, args))
    least = minimum_channels(g, False)
    cm = compile_budget(g, "gd", False, least).info["compiled"]
    return {"call": call_text(builder, args), "channels": least, "layers": cm["layers"], "tokens": cm["tokens"],
            "scheme": cm["bound"]["scheme"], "bound": cm["bound"]["layers"],
            "one_at_a_time": one_at_a_time_layers(C.validate(g), False, least), "one_at_a_time_bound": layer_bound(g, least)["layers"]}


# ------------------------------------------------------------------ CLI

def build_parser():
    from polyverify.plumbing.cli import Parser

    p = Parser(prog="python -m verify.compiler_report", description=" ".join(__doc__.split("\n\n")[0].split()),
               epilog="Exit status: 0 every cell proved (or refused by the compiler with a message) within "
                      "its bound and every GD architecture proved, 1 otherwise, 2 bad input.")
    p.add_argument("--out", metavar="FILE", default="docs/compiler.md",
                   help="markdown report (default docs/compiler.md; checked before any work, written "
                        "atomically; a missing folder is created)")
    p.add_argument("--json", metavar="FILE",
                   help="also write the results as JSON to this file (checked before any work, written atomically)")
    p.add_argument("--quick", action="store_true", help="small sizes (seconds), e.g. for the tests")
    return p


def _main(argv) -> int:
    from polyverify.plumbing.cli import atomic_write_text, output_file

    argv = list(sys.argv[1:] if argv is None else argv)
    a = build_parser().parse_args(argv)
    md, js = output_file("--out", a.out), output_file("--json", a.json)
    mode = "quick" if a.quick else "default"
    res = run(mode, log=print)
    mach = machine()
    command = " ".join(["python -m verify.compiler_report", *argv])
    tr = (res.get("trace_example") or {}).pop("_trace", None)
    if tr is not None:
        tr.plot(md.parent / TRACE_PNG)
    atomic_write_text(md, markdown(res, command, mach), "--out")
    if js is not None:
        atomic_write_text(js, json.dumps({"command": command, "machine": mach, **res}, indent=1, default=str),
                          "--json")
    ok = all(c["status"] == "refused" and c["message"] or c["status"] == "PROVED" and c["within_bound"]
             for c in res["cells"]) and all(r["proved"] for r in res["gd"])
    ok = ok and (res.get("trace_example") or {}).get("proved", True)
    ok = ok and all(r.get("proved", True) for r in res.get("local") or [])
    print(f"wrote {md} ({len(res['cells'])} builder x target cells, {len(res['gd'])} GD architectures)"
          + (f" and {js}" if js else ""))
    return 0 if ok else 1


def main(argv=None) -> int:
    from polyverify.plumbing.cli import run_main

    return run_main(_main, argv)


if __name__ == "__main__":
    from polyverify.plumbing.cli import exit_with

    exit_with(main)
