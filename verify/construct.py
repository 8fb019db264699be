"""``python -m verify.construct``: build, prove and run constructions.

    python -m verify.construct gd --layers 100 [--arch baseconv|baseconv-causal|lsa|elsa]
        [--n 20] [--d 5] [--dtype float32[,float64,...]] [--batch 256] [--seed 0]
        [--json FILE] [--export FILE] [--weights FILE]
    python -m verify.construct circuit --graph FILE.json [--json FILE] [--export FILE] [--weights FILE]
    python -m verify.construct --list

Exit status: 0 proved (and run), 1 the proof failed, 2 bad input.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from constructions.base import DepthError, exact
from constructions.registry import GD_ARCHS
from constructions.weights_io import WeightFileError, check_against, load, same_layer, save, split_sections

from .cli_common import UsageError, print_proof
from .proof import ProofResult, prove


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m verify.construct",
                description="Build explicit BaseConv/LSA/ELSA weights, prove them exactly at every depth, "
                            "and run them in floating point against an mpmath reference.")
    p.add_argument("--list", action="store_true", help="list the available constructions and exit")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)

    g = sub.add_parser("gd", help="gradient descent on least squares")
    g.add_argument("--layers", type=int, required=True, help="model depth (layers of the stack)")
    g.add_argument("--arch", default="baseconv", choices=sorted(GD_ARCHS), help="construction (default baseconv)")
    g.add_argument("--n", type=int, default=20, help="rows N of A (default 20)")
    g.add_argument("--d", type=int, default=5, help="columns D of A (default 5)")
    g.add_argument("--eta", default="1/16", help="step size, an exact rational (default 1/16)")
    g.add_argument("--lam", default="0", help="ridge parameter (lsa/elsa only; default 0)")
    g.add_argument("--dtype", default="float32", help="comma-separated dtypes (float16,bfloat16,float32,float64)")
    g.add_argument("--backend", default="numpy", help="numpy | torch | cupy (default numpy)")
    g.add_argument("--device", default="cpu", help="torch device (default cpu)")
    g.add_argument("--conv", default="direct", choices=["direct", "fft"], help="convolution algorithm")
    g.add_argument("--batch", type=int, default=256, help="number of random problems (default 256)")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--kappa", type=float, default=5.0, help="singular values rescaled to [1, kappa]")
    g.add_argument("--digits", type=int, default=50, help="digits of the mpmath reference (default 50)")
    g.add_argument("--json", help="write the whole report as JSON")
    g.add_argument("--export", help="write the weights (safetensors + layout + exact rationals)")
    g.add_argument("--weights", help="prove (and run) this weight file instead of the built weights")
    g.add_argument("--quiet", action="store_true", help="no progress bar")

    from .circuit_cmd import add_arguments as add_circuit_arguments

    add_circuit_arguments(sub.add_parser("circuit", help="compile a user's arithmetic circuit "
                                                         "(node-link JSON) to BaseConv"))
    from constructions.catalogue import entries

    for name, e in entries().items():
        s = sub.add_parser(name, help=f"{e.summary} [{e.paper}]")
        s.add_argument("--set", action="append", metavar="KEY=VALUE",
                       help=f"sizes (defaults: {', '.join(f'{k}={v}' for k, v in e.sizes.items()) or 'none'})")
        s.add_argument("--json", help="write the report as JSON")
    return p


# ------------------------------------------------------------------ helpers

def _fmt(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "nan"
    return f"{x:.3e}"


def _checkpoints(k: int) -> list[int]:
    pts = {k}
    for base in (1, 2, 5):
        m = base
        while m <= k:
            pts.add(m)
            m *= 10
    return sorted(p for p in pts if p >= 1)


def _prove_weights(con, path: str, k: int) -> tuple[ProofResult, dict]:
    """Prove a weight file: each distinct body copy once, plus prologue and epilogue."""
    lw = load(path, spec=con, k=k)
    secs, k_file = split_sections(con, lw.layers)
    if k_file != k:
        raise UsageError(f"{path} has {len(lw.layers)} layers (k={k_file}), but --layers asks for "
                         f"{con.depth(k)} (k={k})")
    check_against(con.layers(k), lw.layers, path)
    variants: list[tuple[int, list]] = []  # (first copy index, body layers)
    for j, body in enumerate(secs["bodies"]):
        if not any(all(same_layer(a, b) for a, b in zip(body, v)) for _, v in variants):
            variants.append((j, body))
    t0 = time.perf_counter()
    result = None
    for j, body in variants or [(0, [])]:
        r = prove(con, sections={"prologue": secs["prologue"], "body": body, "epilogue": secs["epilogue"]})
        if result is None or not r.ok:
            result = r
        if not r.ok:
            if r.failure.section == "body":  # name the copy in the file, not the variant
                r.failure.layer += j * len(con.body)
                r.failure.note = (f"body copy {j} (steps before it are other variants); " + r.failure.note).strip()
            if r.failure.section == "epilogue":
                r.failure.layer += (k - 1) * len(con.body) if k else 0
            break
    result.seconds = time.perf_counter() - t0
    info = {"file": str(path), "layers": len(lw.layers), "distinct_bodies": len(variants),
            "entries_from_exact_metadata": lw.entries_from_exact, "entries_from_float_values": lw.entries_from_float}
    return result, {"weights": info, "sections": secs}


# ------------------------------------------------------------------ gd

def cmd_gd(a, out) -> int:
    from numerics.backends import Backend, BackendError
    from numerics.problems import sample_ls
    from numerics.reference import gd_reference, lstsq_solution
    from numerics.runner import plain_gd, run_construction

    entry = GD_ARCHS[a.arch]
    for name, val, lo in (("--n", a.n, 1), ("--d", a.d, 1), ("--batch", a.batch, 1), ("--digits", a.digits, 16)):
        if val < lo:
            raise UsageError(f"{name} must be >= {lo}, got {val}")
    if a.n < a.d:
        raise UsageError(f"--n ({a.n}) must be >= --d ({a.d}) for a least-squares problem")
    if a.layers < 1:
        raise UsageError(f"--layers must be >= 1, got {a.layers}")
    try:
        eta = exact(a.eta)
        lam = exact(a.lam)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if eta <= 0:
        raise UsageError(f"--eta must be > 0, got {eta}")
    if lam != 0 and a.arch.startswith("baseconv"):
        raise UsageError("--lam needs --arch lsa or elsa (the BaseConv constructions are plain least squares)")
    try:
        con = entry.build(a.n, a.d, eta=eta) if a.arch.startswith("baseconv") else entry.build(a.n, a.d, eta=eta, lam=lam)
        k = con.steps_for_depth(a.layers)
        dtypes = [s.strip() for s in a.dtype.split(",") if s.strip()]
        backends = [Backend(a.backend, dt, a.device) for dt in dtypes]
    except (ValueError, DepthError, BackendError) as e:
        raise UsageError(str(e)) from None

    print(f"{con.name}: {con.reference}", file=out)
    print(f"  depth {con.depth(k)} = {len(con.prologue)} prologue + {len(con.body)} x {k} steps + "
          f"{len(con.epilogue)} epilogue; state {con.layout.shape[0]} x {con.layout.shape[1]} "
          f"= {con.state_size}; N={a.n}, D={a.d}, eta={eta}" + (f", lam={lam}" if lam else ""), file=out)

    user = None
    if a.weights:
        try:
            proof, user = _prove_weights(con, a.weights, k)
        except WeightFileError as e:
            raise UsageError(str(e)) from None
        print(f"weights: {a.weights} ({user['weights']['distinct_bodies']} distinct body variant(s))", file=out)
    else:
        proof = prove(con)
    print_proof(proof, out)

    if a.export:
        save(a.export, con, k)
        print(f"exported {con.depth(k)} layers to {a.export}", file=out)

    # ---- numeric runs
    P = sample_ls(a.batch, a.n, a.d, kappa=a.kappa, seed=a.seed)
    rng = np.random.default_rng(a.seed + 1)
    q = rng.standard_normal((a.batch, a.d))
    eta_f, lam_f = float(eta), float(lam)
    runs, dtype_reports = [], []
    for be in backends:
        v = {"A": be.round_input(P.A), "b": be.round_input(P.b), "x": be.round_input(P.x0), "q": be.round_input(q)}
        t0 = time.perf_counter()
        ref = gd_reference(v["A"], v["b"], v["x"], eta, k, digits=a.digits, lam=lam)
        t_ref = time.perf_counter() - t0
        xstar = lstsq_solution(v["A"], v["b"], lam=lam)
        progress = None
        if not a.quiet:
            from tqdm import tqdm

            progress = tqdm(total=k, desc=f"{be.dtype} run", unit="step", file=sys.stderr, leave=False)
        t0 = time.perf_counter()
        res = run_construction(con, v, k, be, conv_method=a.conv, progress=progress,
                               sections=user["sections"] if user is not None else None)
        t_run = time.perf_counter() - t0
        if progress is not None:
            progress.close()
        plain = plain_gd(v["A"], v["b"], v["x"], eta_f, k, be, lam=lam_f)
        mse = lambda u, w: float(np.mean((u - w) ** 2))  # noqa: E731
        pred_ref = np.einsum("bd,bd->b", v["q"], ref[-1])
        rep = {"dtype": be.dtype, "backend": be.name, "conv": a.conv, "steps": k,
               "first_nonfinite_layer": res.first_nonfinite_layer,
               "seconds_run": t_run, "seconds_reference": t_ref,
               "prediction_mse_vs_exact": None if res.prediction is None else mse(res.prediction, pred_ref)}
        dtype_reports.append(rep)
        for j in range(1, k + 1):
            m_c = mse(res.x[j], ref[j])
            m_p = mse(plain[j], ref[j])
            runs.append({"dtype": be.dtype, "step": j, "depth": con.depth(j),
                         "mse_vs_exact_gd": m_c, "mse_vs_solution": mse(res.x[j], xstar),
                         "plain_gd_mse_vs_exact_gd": m_p,
                         "construction_overhead": (m_c / m_p) if m_p > 0 else None})
        print(f"\n{be.dtype} ({be.name}, {a.conv} conv), {a.batch} problems, reference {a.digits} digits "
              f"({t_ref:.2f} s), run {t_run:.2f} s", file=out)
        if res.first_nonfinite_layer is not None:
            print(f"  first non-finite value after stack layer {res.first_nonfinite_layer}", file=out)
        print(f"  {'step':>6} {'depth':>6} {'MSE vs exact GD':>16} {'MSE vs solution':>16} "
              f"{'plain GD vs exact':>18} {'overhead':>9}", file=out)
        by_step = {r["step"]: r for r in runs if r["dtype"] == be.dtype}
        for j in _checkpoints(k):
            r = by_step[j]
            ov = r["construction_overhead"]
            print(f"  {j:>6} {r['depth']:>6} {_fmt(r['mse_vs_exact_gd']):>16} {_fmt(r['mse_vs_solution']):>16} "
                  f"{_fmt(r['plain_gd_mse_vs_exact_gd']):>18} {('%.2f' % ov) if ov is not None else '-':>9}", file=out)
        if rep["prediction_mse_vs_exact"] is not None:
            print(f"  prediction q^T x after the epilogue: MSE vs exact {_fmt(rep['prediction_mse_vs_exact'])}",
                  file=out)

    report = {"command": "gd", "construction": con.summary(), "k": k, "depth": con.depth(k),
              "n": a.n, "d": a.d, "batch": a.batch, "seed": a.seed, "kappa": a.kappa, "digits": a.digits,
              "eta": str(eta), "lam": str(lam),
              "proof": proof.to_json(), "runs": runs, "dtypes": dtype_reports}
    if user is not None:
        report["weights"] = user["weights"]
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=1, default=str))
        print(f"\nreport written to {a.json}", file=out)
    return 0 if proof.ok else 1


# ------------------------------------------------------------------ list / main

def cmd_list(out) -> int:
    print("gd --arch ARCH (python -m verify.construct gd --layers L --arch ARCH):", file=out)
    for arch, e in GD_ARCHS.items():
        print(f"  {arch:<16} {e.name:<20} depth {e.depth:<7} state {e.state:<22} {e.summary}", file=out)
        print(f"  {'':<16} {'':<20} {e.reference}", file=out)
    print("circuit --graph FILE.json: any arithmetic circuit (networkx node-link JSON) -> BaseConv stack", file=out)
    from constructions.catalogue import entries, errata

    cat = entries()
    if cat:
        print("catalogue (python -m verify.construct NAME [--set KEY=VALUE] [--json FILE]):", file=out)
        for name, e in cat.items():
            print(f"  {name:<28} {e.summary}  [{e.paper}]", file=out)
    print(f"errata: {len(errata())} (python -m verify.errata)", file=out)
    return 0


def main(argv=None, out=None) -> int:
    out = out or sys.stdout
    parser = build_parser()
    try:
        a = parser.parse_args(argv)
        if a.list:
            return cmd_list(out)
        if a.command == "gd":
            return cmd_gd(a, out)
        if a.command == "circuit":
            from .circuit_cmd import cmd_circuit

            return cmd_circuit(a, out)
        from constructions.catalogue import entries

        if a.command in entries():
            from .catalogue_cmd import cmd_entry

            return cmd_entry(entries()[a.command], a, out)
        raise UsageError("choose a command: gd, circuit, a catalogue name, or --list")
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
