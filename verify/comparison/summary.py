"""The comparison report's readable summary (``report.md``): :func:`summary_lines`, a section per
analysis (``python -m verify.compare``, docs/compare.md)."""
from __future__ import annotations


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
    """The comparison report's markdown, a section per analysis the report holds (:data:`_SECTIONS`)."""
    L = [f"# {rep['construction']} (n={rep['n']}, d={rep['d']}, k={rep['k']}, {rep['layers']} layers): learned vs constructed", ""]
    line = constant_channels_line(rep)
    if line:
        L += [line, ""]
    for key, lines in _SECTIONS:
        if rep.get(key):
            L += lines(rep)
    return L


def constant_channels_line(rep: dict) -> str | None:
    """Where the learned file's state has constant channels (``learned_from.constant_channels``: a precision-ls
    export of per-token biases): the channels, their values and where they were read, in one line."""
    cc = (rep.get("learned_from") or {}).get("constant_channels")
    if not cc:
        return None
    chans = "; ".join(f"channel {j}: [{', '.join(v)}]" for j, v in cc["channels"].items())
    return (f"State: the construction's channels, then {len(cc['channels'])} constant channel"
            f"{'s' * (len(cc['channels']) != 1)} ({chans} on the tokens) from {cc['from']}; the construction is "
            f"written with them as its precision-ls export writes it.")


def _functional_lines(rep: dict) -> list[str]:
    """(1) predictions: the table, the MSE against the exact gradient, the layer-by-layer states."""
    fn = rep["functional"]
    L = ["## (1) predictions", "", "| set | max abs | rms | relative rms | learned vs lstsq | constructed vs lstsq |", "|---|---|---|---|---|---|"]
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
    return L


def _sensitivity_lines(rep: dict) -> list[str]:
    """(2) sensitivities: a row per set."""
    sens = rep["sensitivities"]
    what = sens[0].get("what", "d prediction / d query") if sens else ""
    L = ["", f"## (2) sensitivities: {what}", "", "| set | mean cosine | min cosine | mean L2 | mean relative L2 |", "|---|---|---|---|---|"]
    return L + [f"| {r['set']} | {_g(r['cosine_mean'])} | {_g(r['cosine_min'])} | {_g(r['l2_mean'])} | {_g(r['relative_l2_mean'])} |"
                for r in sens]


def _polynomial_section_lines(rep: dict) -> list[str]:
    """(3) polynomials of the construction's stack: one body copy's entries, then the prediction."""
    p = rep["polynomial"]
    L = _poly_header(p)
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
    return L


def _polynomial_model_lines(rep: dict) -> list[str]:
    """(3) polynomials of a model: an output each."""
    pm = rep["polynomial_model"]
    L = _poly_header(pm)
    if pm["supported"]:
        L += [f"{pm['what']}; {pm['variables']} variables, {pm['backend']}; limits {pm['limits']}", ""]
        if not pm["finished"]:
            L.append(f"not finished ({len(pm['outputs'])} outputs done): {pm['reason']}")
        for e in pm["outputs"]:
            L += [f"### output {e['output']} ({e['seconds']:.1f} s)", ""] + _poly_lines(e)
    return L


def _not_applicable_lines(rep: dict) -> list[str]:
    """What does not apply to a sequence model."""
    return ["", f"Not applicable to this model: {rep['not_applicable']}."]


def _invariant_lines(rep: dict) -> list[str]:
    """(4) invariants up to symmetry: a line per layer, then the interpolation curve."""
    inv, ip = rep["invariants"], rep.get("interpolation")
    L = ["", "## (4) invariants up to symmetry", ""]
    for r in inv["layers"]:
        if not r.get("supported", True):
            L.append(f"- layer {r['layer']} ({r['kind']}): not supported")
            continue
        L.append(f"- layer {r['layer']} {r['section']} ({r['kind']}): {r['unit']}s differing {r['differing'][:12]}"
                 f"{' ...' if len(r['differing']) > 12 else ''}; max relative distance {_g(r['max_relative_distance'])}")
    if ip and ip.get("supported"):
        L += ["", "interpolation (t=0 constructed, t=1 learned, symmetry-aligned), RMS vs constructed: "
              + ", ".join(f"{r['t']:.1f}:{_g(r['rms_vs_constructed'])}" for r in ip["curve"])
              + f"; monotone {ip['monotone']}"]
    return L


def _implicit_w_lines(rep: dict) -> list[str]:
    """(5) the implicit weight vector: a line per layer."""
    iw = rep["implicit_w"]
    L = ["", "## (5) implicit weight vector w^l", "", iw["definition"], ""]
    return L + [f"- l={r['l']}: mean ||w_l - w_c|| {_g(r['l2_mean'])} (relative {_g(r['relative_l2_mean'])}); "
                f"mean ||w_c|| {_g(r['norm_constructed_mean'])}, ||w_l|| {_g(r['norm_learned_mean'])}"
                + (f"; recursion vs gradient {_g(r['recursion_vs_gradient_max'])}" if "recursion_vs_gradient_max" in r else "")
                for r in iw["layers"]]


def _iterate_lines(rep: dict) -> list[str]:
    """(6) iterated as solvers: a row per set."""
    it = rep["iterate"]
    L = ["", "## (6) iterated as solvers", "", f"error: {it[0]['error']}", "",
         "| set | learned best (iter) | learned stops improving | learned diverges | constructed best (iter) | constructed diverges |",
         "|---|---|---|---|---|---|"]
    return L + [f"| {r['set']} | {_g(r['learned']['best'])} ({r['learned']['best_iter']}) | {r['learned']['stops_improving_at']} | "
                f"{r['learned']['diverges_at']} | {_g(r['constructed']['best'])} ({r['constructed']['best_iter']}) | {r['constructed']['diverges_at']} |"
                for r in it]


def _weights_lines(rep: dict) -> list[str]:
    """--weights: the exact section identities, a line per section, then the first failure."""
    w = rep["weights"]
    L = ["", "## --weights: exact section identities", "", f"exact: {w['exact']}", ""]
    if not w["complete"]:
        L += [f"not complete: {w['reason']}" + ("" if w["sections"] else " (no row of the first section finished)"), ""]
    L += [f"- {s['section']}" + ("" if s["complete"] else f" (rows {s['rows_checked']} of {s['rows']} checked)") + ": "
          + ("exact" if s["exact"] else
             f"{s['failing_entries']} failing entries, residual mass {_g(s['residual_mass'])}, max |coeff| "
             f"{_g(s['residual_max_coeff'])}, regions {sorted(s['regions'])}") for s in w["sections"]]
    if w["first_failure"]:
        L += ["", "```", w["first_failure"], "```"]
    return L


def _nearest_lines(rep: dict) -> list[str]:
    """--weights on a file that is not the construction: the nearest construction of its family (or the
    entry-wise distance), as the command printed it."""
    return ["", "## --weights: how far, and from what", "", *(f"    {t}" for t in rep["nearest"]["text"])]


#: the summary's sections in order: the report's key (a section is written where it is set) and its lines
_SECTIONS = (("functional", _functional_lines), ("sensitivities", _sensitivity_lines),
             ("polynomial", _polynomial_section_lines), ("polynomial_model", _polynomial_model_lines),
             ("not_applicable", _not_applicable_lines), ("invariants", _invariant_lines),
             ("implicit_w", _implicit_w_lines), ("iterate", _iterate_lines), ("weights", _weights_lines),
             ("nearest", _nearest_lines))
