"""Learned against constructed: ``python -m verify.compare --learned FILE --construction NAME --out DIR``.

The learned model is a weight file (``constructions.weights_io``) with the construction's layer
structure; the report (``report.json``, ``report.md``, plots) holds (1) prediction and
layer-by-layer region differences in and out of distribution, (2) query sensitivities, (3) the
exact polynomial view, (4) invariants up to symmetry and the interpolation curve, (5) the implicit
weight vector w^l per layer, (6) both models iterated as solvers, and with ``--weights`` the
exact section identities with the residual's size.  Python API: :func:`compare`.
See docs/compare.md.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from verify.compare_lib import (CompareError, Stack, build_construction, constructed_stack, functional,
                                implicit_w, interpolation, invariants, iterate, load_learned,
                                polynomial_view, sample, sensitivities, weights_check)
from verify.compare_lib.models import sizes
from verify.compare_lib.seqmodel import (NOT_APPLICABLE, compare_sequence_model, is_sequence_model_file,
                                         load_sequence_model)

SECTIONS = ("functional", "sensitivities", "polynomial", "invariants", "implicit_w", "iterate")


def problem_sets(con, *, problems: int = 32, sigmas=(1.0, 4.0), kappas=(5.0, 20.0), scales=(1.0, 2.0),
                 seed: int = 0):
    """In-distribution (sigma=1, kappa=5, scale=1) first, then each OOD axis varied alone."""
    grid = [(1.0, 5.0, 1.0)]
    grid += [(s, 5.0, 1.0) for s in sigmas if s != 1.0]
    grid += [(1.0, k, 1.0) for k in kappas if k != 5.0]
    grid += [(1.0, 5.0, c) for c in scales if c != 1.0]
    return [sample(con, problems, sigma=s, kappa=k, scale=c, seed=seed + 101 * i)
            for i, (s, k, c) in enumerate(grid)]


def compare(con, learned: Stack, constructed: Stack | None = None, *, problems: int = 32,
            sigmas=(1.0, 4.0), kappas=(5.0, 20.0), scales=(1.0, 2.0), iters: int = 100,
            iter_sigmas=(0.25, 1.0, 4.0, 16.0), weights: bool = False, skip=(), seed: int = 0,
            poly_timeout: float = 300.0, poly_memory_gb: float | None = 8.0) -> dict:
    """The full report as a dict (JSON-ready).  ``con``: the construction (specification);
    ``learned``: a :class:`Stack` (``load_learned`` or ``stack_of(con, layers)``)."""
    constructed = constructed or constructed_stack(con, learned.k)
    n, d = sizes(con)
    sets = problem_sets(con, problems=problems, sigmas=sigmas, kappas=kappas, scales=scales, seed=seed)
    rep = {"construction": con.name, "reference": con.reference, "n": n, "d": d, "k": learned.k,
           "layers": len(learned.layers), "problem_sets": [P.label for P in sets]}
    if "functional" not in skip:
        rep["functional"] = functional(con, learned, constructed, sets)
    if "sensitivities" not in skip:
        rep["sensitivities"] = sensitivities(con, learned, constructed, sets)
    if "polynomial" not in skip:
        rep["polynomial"] = polynomial_view(con, learned, constructed, timeout=poly_timeout,
                                            memory_gb=poly_memory_gb)
    if "invariants" not in skip:
        rep["invariants"] = invariants(learned, constructed)
        rep["interpolation"] = interpolation(con, learned, constructed, sets[0])
    if "implicit_w" not in skip:
        rep["implicit_w"] = implicit_w(con, learned, constructed, sets[0])
    if "iterate" not in skip:
        rep["iterate"] = [iterate(con, learned, constructed,
                                  sample(con, problems, sigma=s, seed=seed + 7 + i, label=f"sigma={s:g}"), iters)
                          for i, s in enumerate(iter_sigmas)]
    if weights:
        rep["weights"] = weights_check(con, learned, timeout=2 * poly_timeout, memory_gb=poly_memory_gb)
    return rep


def compare_model(con, m, *, problems: int = 32, sigmas=(1.0, 4.0), kappas=(5.0, 20.0), scales=(1.0, 2.0),
                  iters: int = 100, iter_sigmas=(0.25, 1.0, 4.0, 16.0), skip=(), seed: int = 0,
                  poly_timeout: float = 300.0, poly_memory_gb: float | None = 8.0) -> dict:
    """The report for a trained ``numerics.training`` SequenceModel on the gradient task
    (``verify.compare_lib.seqmodel``): the sections that do not need the construction's layout."""
    sets = problem_sets(con, problems=problems, sigmas=sigmas, kappas=kappas, scales=scales, seed=seed)
    iter_sets = [sample(con, problems, sigma=s, seed=seed + 7 + i, label=f"sigma={s:g}")
                 for i, s in enumerate(iter_sigmas)]
    return compare_sequence_model(m, con, sets, iter_sets, iters=iters, skip=skip, poly_timeout=poly_timeout,
                                  poly_memory_gb=poly_memory_gb)


# ------------------------------------------------------------------ readable summary

def _g(x):
    return "n/a" if x is None else f"{x:.3g}"


def _poly_header(p: dict) -> list[str]:
    return ["", "## (3) polynomial view (exact)", ""] + ([] if p["supported"] else [f"not computed: {p['reason']}"])


def _poly_lines(p: dict) -> list[str]:
    t, s = p["true_monomials"], p["spurious_monomials"]
    L = [f"constructed: {p['constructed']['terms']} monomials, degree {p['constructed']['degree']}, mass {_g(p['constructed']['mass'])}; "
         f"learned: {p['learned']['terms']} monomials, degree {p['learned']['degree']}, mass {_g(p['learned']['mass'])}",
         f"true monomials: error mass {_g(t['error_mass'])}, max error {_g(t['error_max'])}, missing in learned {t['missing_in_learned']}",
         f"spurious monomials: {s['count']}, mass {_g(s['mass'])}, largest |coeff| {_g(s['max'])}",
         "spurious mass by degree: " + (", ".join(f"{k}: {_g(v)}" for k, v in s["mass_by_degree"].items()) or "none"),
         "true-monomial error mass by degree: " + (", ".join(f"{k}: {_g(v)}" for k, v in t["error_mass_by_degree"].items()) or "none"), ""]
    L += [f"- spurious {r['monomial']}: {r['coefficient']['value']:.4g}" for r in s["largest"]]
    L += [f"- true {r['monomial']}: constructed {r['constructed']:.4g}, learned {r['learned']:.4g}, error {r['error']['value']:.3g}"
          for r in t["worst"]]
    return L + [""]


def summary_lines(rep: dict) -> list[str]:
    L = [f"# {rep['construction']} (n={rep['n']}, d={rep['d']}, k={rep['k']}, {rep['layers']} layers): learned vs constructed", ""]
    fn = rep.get("functional")
    if fn:
        L += ["## (1) predictions", "", "| set | max abs | rms | relative rms | learned vs lstsq | constructed vs lstsq |", "|---|---|---|---|---|---|"]
        L += [f"| {r['set']} | {_g(r['max_abs'])} | {_g(r['rms'])} | {_g(r['relative_rms'])} | "
              f"{_g(r.get('learned_vs_lstsq_rms'))} | {_g(r.get('constructed_vs_lstsq_rms'))} |" for r in fn["predictions"]]
        if fn.get("per_layer") is None and "mse_learned_vs_exact" in fn["predictions"][0]:
            L += ["", "MSE against the exact gradient (1/N) A^T (A x0 - b): "
                  + ", ".join(f"{r['set']}: learned {_g(r['mse_learned_vs_exact'])} / constructed "
                              f"{_g(r['mse_constructed_vs_exact'])}" for r in fn["predictions"])]
        for pl in fn.get("per_layer") or []:
            f = pl["first_difference"]
            L += ["", f"Layer by layer ({pl['set']}): " + (
                "no state entry differs at any layer" if f is None else
                f"states first differ at layer {f['layer']} ({f['section']}), largest in region "
                f"{f['region']!r}: {f['entry']}"), ""]
            L += [f"- layer {r['layer']} {r['section']}: max {_g(r['max_abs'])} (worst region {r['worst_region']})"
                  for r in pl["layers"]]
    if rep.get("sensitivities"):
        what = rep["sensitivities"][0].get("what", "d prediction / d query") if rep["sensitivities"] else ""
        L += ["", f"## (2) sensitivities: {what}", "", "| set | mean cosine | min cosine | mean L2 | mean relative L2 |", "|---|---|---|---|---|"]
        L += [f"| {r['set']} | {_g(r['cosine_mean'])} | {_g(r['cosine_min'])} | {_g(r['l2_mean'])} | {_g(r['relative_l2_mean'])} |"
              for r in rep["sensitivities"]]
    p = rep.get("polynomial")
    if p:
        L += _poly_header(p)
        if p["supported"]:
            L.append(f"{p['variables']} variables, {p['backend']}; limits {p['limits']}")
            b = p.get("body")
            if b:
                L += ["", f"### one body copy: {b['what']}", ""]
                if not b["finished"]:
                    L.append(f"not finished ({len(b['entries'])} entries done): {b['reason']}")
                for e in b["entries"]:
                    L += [f"#### entry {e['entry']} (region {e['region']} {e['index']}, {e['seconds']:.1f} s)", ""]
                    L += _poly_lines(e)
            pr = p["prediction"]
            L += ["", "### the prediction (whole stack)", ""]
            L += _poly_lines(pr) if pr["finished"] else [f"not finished: {pr['reason']}"]
    pm = rep.get("polynomial_model")
    if pm:
        L += _poly_header(pm)
        if pm["supported"]:
            L += [f"{pm['what']}; {pm['variables']} variables, {pm['backend']}; limits {pm['limits']}", ""]
            if not pm["finished"]:
                L.append(f"not finished ({len(pm['outputs'])} outputs done): {pm['reason']}")
            for e in pm["outputs"]:
                L += [f"### output {e['output']} ({e['seconds']:.1f} s)", ""] + _poly_lines(e)
    if rep.get("not_applicable"):
        L += ["", f"Not applicable to this model: {rep['not_applicable']}."]
    inv = rep.get("invariants")
    if inv:
        L += ["", "## (4) invariants up to symmetry", ""]
        for r in inv["layers"]:
            if not r.get("supported", True):
                L.append(f"- layer {r['layer']} ({r['kind']}): not supported")
                continue
            L.append(f"- layer {r['layer']} {r['section']} ({r['kind']}): {r['unit']}s differing {r['differing'][:12]}"
                     f"{' ...' if len(r['differing']) > 12 else ''}; max relative distance {_g(r['max_relative_distance'])}")
        ip = rep.get("interpolation")
        if ip and ip.get("supported"):
            L += ["", "interpolation (t=0 constructed, t=1 learned, symmetry-aligned), RMS vs constructed: "
                  + ", ".join(f"{r['t']:.1f}:{_g(r['rms_vs_constructed'])}" for r in ip["curve"])
                  + f"; monotone {ip['monotone']}"]
    iw = rep.get("implicit_w")
    if iw:
        L += ["", "## (5) implicit weight vector w^l", "", iw["definition"], ""]
        L += [f"- l={r['l']}: mean ||w_l - w_c|| {_g(r['l2_mean'])} (relative {_g(r['relative_l2_mean'])}); "
              f"mean ||w_c|| {_g(r['norm_constructed_mean'])}, ||w_l|| {_g(r['norm_learned_mean'])}"
              + (f"; recursion vs gradient {_g(r['recursion_vs_gradient_max'])}" if "recursion_vs_gradient_max" in r else "")
              for r in iw["layers"]]
    it = rep.get("iterate")
    if it:
        L += ["", "## (6) iterated as solvers", "", f"error: {it[0]['error']}", "",
              "| set | learned best (iter) | learned stops improving | learned diverges | constructed best (iter) | constructed diverges |",
              "|---|---|---|---|---|---|"]
        L += [f"| {r['set']} | {_g(r['learned']['best'])} ({r['learned']['best_iter']}) | {r['learned']['stops_improving_at']} | "
              f"{r['learned']['diverges_at']} | {_g(r['constructed']['best'])} ({r['constructed']['best_iter']}) | {r['constructed']['diverges_at']} |"
              for r in it]
    w = rep.get("weights")
    if w:
        L += ["", "## --weights: exact section identities", "", f"exact: {w['exact']}", ""]
        if not w["complete"]:
            L += [f"not complete: {w['reason']}" + ("" if w["sections"] else " (no row of the first section finished)"), ""]
        L += [f"- {s['section']}" + ("" if s["complete"] else f" (rows {s['rows_checked']} of {s['rows']} checked)") + ": "
              + ("exact" if s["exact"] else
                 f"{s['failing_entries']} failing entries, residual mass {_g(s['residual_mass'])}, max |coeff| "
                 f"{_g(s['residual_max_coeff'])}, regions {sorted(s['regions'])}") for s in w["sections"]]
        if w["first_failure"]:
            L += ["", "```", w["first_failure"], "```"]
    return L


def write_report(rep: dict, out: Path) -> list[str]:
    from verify.compare_lib.plots import write_plots

    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(rep, indent=1, default=str))
    (out / "report.md").write_text("\n".join(summary_lines(rep)) + "\n")
    return ["report.json", "report.md"] + write_plots(rep, out)


# ------------------------------------------------------------------ CLI

def _floats(s: str):
    try:
        return tuple(float(x) for x in s.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of numbers: {s!r}") from None


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        print(f"verify.compare: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def main(argv=None) -> int:
    ap = _Parser(prog="python -m verify.compare", description=__doc__.splitlines()[0])
    ap.add_argument("--learned", required=True, help="weight file (constructions.weights_io format)")
    ap.add_argument("--construction", required=True, help="gd-baseconv, gd-lsa, ... or s004-gd")
    ap.add_argument("--n", type=int, default=None, help="problem size N (default: from the file)")
    ap.add_argument("--d", type=int, default=None, help="problem size D (default: from the file)")
    ap.add_argument("--eta", default=None, help="construction step size (default: the builder's)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--problems", type=int, default=32)
    ap.add_argument("--sigmas", type=_floats, default=(1.0, 4.0))
    ap.add_argument("--kappas", type=_floats, default=(5.0, 20.0))
    ap.add_argument("--scales", type=_floats, default=(1.0, 2.0))
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--iter-sigmas", type=_floats, default=(0.25, 1.0, 4.0, 16.0))
    ap.add_argument("--skip", default="", help=f"comma-separated sections to skip: {', '.join(SECTIONS)}")
    ap.add_argument("--weights", action="store_true", help="exact section identities with residual sizes")
    ap.add_argument("--poly-timeout", type=float, default=300.0,
                    help="seconds for each exact symbolic part (body, prediction; --weights gets twice this)")
    ap.add_argument("--poly-memory-gb", type=float, default=8.0, help="address-space limit of the exact parts")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    try:
        skip = tuple(s for s in a.skip.split(",") if s)
        bad = [s for s in skip if s not in SECTIONS]
        if bad:
            raise CompareError(f"--skip: unknown section(s) {', '.join(bad)}; sections are {', '.join(SECTIONS)}")
        if a.problems < 1 or a.iters < 0:
            raise CompareError("--problems must be >= 1 and --iters >= 0")
        if a.poly_timeout <= 0 or a.poly_memory_gb <= 0:
            raise CompareError("--poly-timeout and --poly-memory-gb must be positive")
        n, d = a.n, a.d
        if (n is None or d is None) and not is_sequence_model_file(a.learned):
            fn, fd = _file_sizes(a.learned)
            n, d = n or fn, d or fd
        if (n is None or d is None) and not is_sequence_model_file(a.learned):
            raise CompareError(f"{a.learned}: the file does not record N and D; give --n and --d")
        eta = {"eta": a.eta} if a.eta else {}
        if is_sequence_model_file(a.learned):
            m = load_sequence_model(a.learned)
            if (a.n or m.n, a.d or m.d) != (m.n, m.d):
                raise CompareError(f"{a.learned}: the model was trained at N={m.n}, D={m.d}, not --n {a.n} --d {a.d}")
            con = build_construction(a.construction, m.n, m.d, **eta)
            rep = compare_model(con, m, problems=a.problems, sigmas=a.sigmas, kappas=a.kappas, scales=a.scales,
                                iters=a.iters, iter_sigmas=a.iter_sigmas, skip=skip, seed=a.seed,
                                poly_timeout=a.poly_timeout, poly_memory_gb=a.poly_memory_gb)
            if a.weights:
                rep["weights_reason"] = "--weights needs the construction's layout (" + NOT_APPLICABLE + ")"
        else:
            con = build_construction(a.construction, n, d, **eta)
            learned = load_learned(a.learned, con)
            rep = compare(con, learned, problems=a.problems, sigmas=a.sigmas, kappas=a.kappas, scales=a.scales,
                          iters=a.iters, iter_sigmas=a.iter_sigmas, weights=a.weights, skip=skip, seed=a.seed,
                          poly_timeout=a.poly_timeout, poly_memory_gb=a.poly_memory_gb)
        rep["learned_file"] = str(a.learned)
        files = write_report(rep, Path(a.out))
    except (CompareError, ValueError) as e:
        print(f"verify.compare: error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    print("\n".join(summary_lines(rep)[:1]))
    print(f"wrote {', '.join(files)} to {a.out}")
    return 0


def _file_sizes(path):
    """N and D from a toolkit weight file's construction metadata (None when absent)."""
    try:
        from safetensors import safe_open

        with safe_open(str(path), framework="numpy") as f:
            meta = f.metadata() or {}
        var = json.loads(meta.get("construction", "{}")).get("variables", {})
    except Exception:  # noqa: BLE001 - the loader reports unreadable files
        return None, None
    shp = var.get("A") or var.get("X")
    return (shp[0], shp[1]) if shp else (None, None)


if __name__ == "__main__":
    raise SystemExit(main())
