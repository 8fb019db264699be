"""``python -m verify.construct circuit --graph FILE.json``: a user's circuit.

Loads the circuit (networkx node-link JSON, ``circuits/io.py``), compiles it
to a BaseConv stack (``constructions/compiler.py``), proves the stack's output
polynomials equal the circuit's, and evaluates both on random rational inputs
(exactly) and random float64 inputs (against the exact value of the same
float inputs).
"""
from __future__ import annotations

import json
import random
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

import circuits as C
from constructions.compiler import compile_circuit
from constructions.weights_io import WeightFileError, check_against, load, save

from .cli_common import UsageError, print_proof


def _run_exact(con, values: dict):
    S = con.input_state(dict(values))
    for L in con.epilogue:
        S = L.forward(S)
    return con.readout(S)


def add_arguments(c) -> None:
    """The options of ``python -m verify.construct circuit``."""
    c.add_argument("--graph", required=True, help="circuit as networkx node-link JSON")
    c.add_argument("--json", help="write the report as JSON")
    c.add_argument("--export", help="write the compiled weights")
    c.add_argument("--weights", help="prove this weight file against the circuit instead")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--trials", type=int, default=64, help="random rational and float inputs to evaluate")


def cmd_circuit(a, out) -> int:
    from .proof import prove

    try:
        g = C.load(a.graph)
    except (C.CircuitError, OSError, ValueError) as e:
        raise UsageError(f"{a.graph}: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
    if a.trials < 1:
        raise UsageError(f"--trials must be >= 1, got {a.trials}")
    t0 = time.perf_counter()
    con = compile_circuit(g, name=Path(a.graph).stem)
    t_compile = time.perf_counter() - t0
    info = con.schedule.info
    m, cm = info["circuit"], info["compiled"]
    print(f"circuit {a.graph}: {m['n_inputs']} inputs, {len(con.schedule.outputs)} outputs, size {m['size']}, "
          f"depth {m['depth']}, width {m['width']}, degree {m['degree']}", file=out)
    print(f"compiled to BaseConv in {t_compile:.3f} s: {cm['layers']} layers (circuit depth {m['depth']}), "
          f"state 1 x {cm['state_width']} (circuit width {m['width']}); "
          f"Thm. H.21 bound: {info['theorem_H21_bound']['layers']} layers, "
          f"{info['theorem_H21_bound']['inner_dimension']} width", file=out)
    weights_info = None
    if a.weights:
        try:
            lw = load(a.weights, spec=con, k=0)
            check_against(con.epilogue, lw.layers, a.weights)
        except WeightFileError as e:
            raise UsageError(str(e)) from None
        proof = prove(con, sections={"prologue": [], "body": [], "epilogue": lw.layers})
        weights_info = {"file": a.weights, "layers": len(lw.layers)}
        con.epilogue = lw.layers
    else:
        proof = prove(con)
    print_proof(proof, out)
    if a.export:
        save(a.export, con, 0)
        print(f"exported {len(con.epilogue)} layers to {a.export}", file=out)

    names = C.inputs(g)
    rng = random.Random(a.seed)
    exact_ok = 0
    for _ in range(a.trials):
        vals = {n: Fraction(rng.randint(-9, 9), rng.randint(1, 9)) for n in names}
        want = C.evaluate(g, vals)
        got = _run_exact(con, vals)
        exact_ok += all(Fraction(np.asarray(got[o]).item()) == Fraction(want[o]) for o in want)
    xs = np.random.default_rng(a.seed).standard_normal((len(names), a.trials))
    fv = {n: xs[i] for i, n in enumerate(names)}
    S = con.input_state(fv) if names else np.zeros((a.trials,) + con.layout.shape)
    for L in con.epilogue:
        S = L.map(lambda w: np.vectorize(lambda z: float(Fraction(z)), otypes=[float])(w)).forward(S)
    got_f = con.readout(S)
    max_rel = 0.0
    for t in range(a.trials):
        want = C.evaluate(g, {n: Fraction(float(fv[n][t])) for n in names})
        for o, w in want.items():
            w = Fraction(w)
            err = abs(Fraction(float(np.asarray(got_f[o]).reshape(-1)[t if np.ndim(got_f[o]) else 0])) - w)
            scale = max(abs(w), Fraction(1))
            max_rel = max(max_rel, float(err / scale))
    print(f"random rational inputs: {exact_ok}/{a.trials} agree exactly with the circuit", file=out)
    print(f"random float64 inputs: max error {max_rel:.3e} (relative to max(|exact|, 1)) "
          f"against the exact value at the same inputs", file=out)
    report = {"command": "circuit", "graph": a.graph, "metrics": m, "compiled": cm,
              "bound": info["theorem_H21_bound"], "proof": proof.to_json(),
              "rational_trials": {"n": a.trials, "exact_agreement": exact_ok},
              "float64_trials": {"n": a.trials, "max_relative_error": max_rel}}
    if weights_info:
        report["weights"] = weights_info
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=1, default=str))
        print(f"report written to {a.json}", file=out)
    ok = proof.ok and exact_ok == a.trials
    return 0 if ok else 1
