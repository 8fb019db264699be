"""The markdown of ``python -m verify.compiler_report`` (``docs/compiler.md``): the targets' table,
(a) every builder x target, (b) the GD step's hand-written and compiled architectures, (c) the
compiler's guarantee and what is not done (LSA / ELSA included), the inspection (trace) section and
the channel budget section.  Every number comes from the run's results (``verify.compiler_report.run``);
:func:`markdown` assembles them.
"""
from __future__ import annotations

import math

from constructions.compiler.targets import TARGETS
from verify.compiler_report_frontend import section as frontend_section

#: (N, D) of the GD architectures in section (b)
GD_SIZES = {"default": (20, 5), "quick": (3, 2)}
PLAN_ABBREV = {"product": "P", "route": "R", "route (outputs)": "R_out", "gather": "G", "outputs": "O",
               "product + outputs": "P+O"}
#: the targets by family (constructions/compiler/targets.py), for the sections that are about one family
ATTENTION = tuple(n for n, t in TARGETS.items() if t.family == "attention")
SEQUENCE = tuple(n for n, t in TARGETS.items() if t.family == "sequence")
#: the PNG of the trace section, written next to --out
TRACE_PNG = "compiler_trace.png"


def plural(k: int, what: str) -> str:
    """``k`` and ``what``, plural unless ``k`` is 1 (``3 layers``)."""
    return f"{k} {what}{'' if k == 1 else 's'}"


def _s(x: float) -> str:
    return f"{x:.3f}"


def _plan(c: dict) -> str:
    return " ".join(PLAN_ABBREV.get(k, k) for k in c["plan"]) if c.get("plan") else "-"


def _cell(c: dict, key: str):
    return c[key] if c["status"] != "refused" else "-"


def _find(cells, builder, target):
    return next((c for c in cells if c["builder"] == builder and c["target"] == target), None)


def _layers(c) -> str:
    return plural(c["layers"], "layer") if c and c["status"] != "refused" else "refused"


def _state(c) -> str:
    return f"{c['tokens']} x {c['channels']}" if c and c["status"] != "refused" else "refused"


def _table_a(cells) -> list[str]:
    from .cli_common import markdown_table

    rows = []
    for c in cells:
        m = c["circuit"]
        circ = f"{m['size']} / {m['depth']} / {m['width']} / {m['multiplicative_depth']}"
        if c["status"] == "refused":
            rows.append((c["call"], c["target"], circ, "-", "-", "-", "-", "-", f"refused: {c['message']}",
                         "-", "-"))
            continue
        b = c["bound"]
        ok = "yes" if c["within_bound"] else "NO"
        rows.append((c["call"], c["target"], circ, c["layers"], _plan(c) + _modules(c), f"{c['tokens']} x {c['channels']}",
                     f"{c['params']['nonzero']} / {c['params']['total']}",
                     f"{plural(b['layers'], 'layer')}, {plural(b['tokens'], 'token')}"
                     + (f", {plural(b['state_width'], 'channel')}" if "state_width" in b else "") + f" ({ok})",
                     c["status"],
                     f"{_s(c['compile_cpu_s'])} / {_s(c['compile_wall_s'])}",
                     f"{_s(c['proof_cpu_s'])} / {_s(c['proof_wall_s'])}"))
    return markdown_table(["circuit (placed)", "target", "size / depth / width / md", "layers", "plan",
                           "state tokens x channels", "params nonzero / total", "bound (within?)", "proof",
                           "compile s CPU / wall", "proof s CPU / wall"], rows)


def _targets_table() -> list[str]:
    """The table of targets (``constructions.compiler.targets.TARGETS``): what each compiles to,
    the options it takes, causal or not, its passes and its guarantee."""
    from .cli_common import markdown_table

    rows = [(f"`{t.name}`", t.description, t.paper, ", ".join(f"`{o}`" for o in sorted(t.options)) or "-",
             "yes" if t.causal else "no", " -> ".join(p.name for p in t.passes), t.bound_rule)
            for t in TARGETS.values()]
    return markdown_table(["target", "compiles to", "paper", "options", "causal", "passes", "bound"], rows)


def _modules(c: dict) -> str:
    st = (c.get("modules") or {}).get("stages")
    return f" (modules of {'+'.join(map(str, st))} stages)" if st else ""


def _table_b(gd) -> list[str]:
    from .cli_common import markdown_table

    rows = []
    for r in gd:
        sym = ", ".join(r["symbolic_params"]) or "-"
        fixed = ", ".join(f"{k}={v}" for k, v in r["fixed_params"].items()) or "-"
        rows.append((f"`{r['arch']}`", r["kind"], r["layers_per_step"],
                     f"{r['fixed_layers']} ({r['prologue']} + {r['epilogue']})", r["depth_formula"] or "-",
                     f"{r['state'][0]} x {r['state'][1]}", r["state_formula"] or "-",
                     f"{r['params_body']['nonzero']} / {r['params_body']['total']}",
                     "PROVED" if r["proved"] else "FAILED", f"symbolic: {sym}; fixed: {fixed}",
                     f"{_s(r['build_cpu_s'])} / {_s(r['build_wall_s'])}",
                     f"{_s(r['proof_cpu_s'])} / {_s(r['proof_wall_s'])}"))
    return markdown_table(["arch", "kind", "layers per step", "prologue + epilogue", "depth formula",
                           "state", "state formula", "body params nonzero / total", "proof",
                           "proved for", "build s CPU / wall", "proof s CPU / wall"], rows)


def _table_h21(cells) -> list[str]:
    from .cli_common import markdown_table

    rows = []
    for c in cells:
        if c["target"] not in SEQUENCE or c["status"] == "refused":
            continue
        m = c["circuit"]
        dl = m["depth"] * math.log2(m["width"]) if m["width"] > 1 else m["depth"]
        inner = ", ".join(f"{PLAN_ABBREV.get(k, k)} {n}" for k, n in c["inner_channels"])
        rows.append((c["call"], c["target"], m["depth"], m["width"], f"{dl:.1f}", c["layers"],
                     f"{m['width']} x {m['grid'][1]}", f"{c['tokens']} x {c['channels']}", inner))
    return markdown_table(["circuit", "target", "depth Delta", "width w", "Delta log2 w", "compiled layers",
                           "Thm. H.21 state O(w) x D (constants dropped)", "compiled state",
                           "inner channels per layer"],
                          rows)


def markdown(res: dict, command: str, mach: dict) -> str:
    cells, gd = res["cells"], res["gd"]
    n, d = GD_SIZES[res["mode"]]
    proved = sum(c["status"] == "PROVED" for c in cells)
    refused = [c for c in cells if c["status"] == "refused"]
    L = ["# The circuit compiler: every builder on every target, proved", "",
         f"Generated by `{command}` on {mach['platform']} ({mach['cpu']}, {mach['cpu_count']} CPUs, "
         f"Python {mach['python']}) at {mach['generated']}; do not edit by hand. Every number below comes "
         "from that run: times are CPU seconds (`time.process_time`) and wall seconds (`time.perf_counter`) "
         "of this process on that machine (a shared machine: compare times within one run, not across "
         "runs), sizes and verdicts are what the compiler and the prover "
         "(`verify.prover.proof.prove`: exact, symbolic in every input) returned."
         + (" **Quick sizes** (`--quick`): not the default sizes." if res["mode"] == "quick" else ""), "",
         f"The compiler (`constructions/compiler/`, `compile_circuit(g, target=...)`) has {len(TARGETS)} targets, "
         "one `Target` each in the table `TARGETS` (`constructions/compiler/targets.py`, listed below): "
         "`baseconv` and `baseconv-causal` keep the placed circuit's token grid (its inputs an N x D "
         "matrix, rows are tokens) and route values between tokens by (circular / causal) convolution; "
         "`lsa` (seed 001 eq. (8), multi-head) and `elsa` (eq. (16), modules of eq. (57)-(59)) keep the "
         "same grid and compute on a work token, each head a sum of products between the work token and "
         "the others with the token sum inside the Gram factor (section (c)); `baseconv-mlp` puts every "
         "value in its own channel of one token (a gated MLP, kept for comparison).", "",
         "Every target emits its channel mixes (BaseConv's `W_in`, `W_gate`, `W_out`; each head's `W1`-`W3`) "
         "as sparse matrices (`constructions/sparse.py`: nonzero entries, exact values), and they stay "
         "sparse through the proof (the exact product reads a column's entries), the float run "
         "(`scipy.sparse` for numpy float32/float64, gathers and `index_add_` for torch in every dtype; a "
         "dense float copy only for numpy float16 and cupy) and the reports. They are laid out dense only "
         "where a file format needs it: the weight file's safetensors tensors (its exact sidecar lists "
         "the nonzero entries) and the peers' export formats. `bench/bench_sparse.py` measures the two "
         "forms against each other.",
         ""] + _targets_table() + ["",
         f"## (a) Builders x targets ({proved} of {len(cells)} cells proved, {len(refused)} refused)", "",
         "Circuit columns (`circuits.metrics`): size = wires, depth Delta = longest input-output path, "
         "width w = the widest level cut, md = multiplicative depth after splitting n-ary products into "
         "balanced binary trees and folding constants (what every target pays for). Plan: P a product "
         "layer, R a route layer (any linear map), R_out the final route layer that writes the outputs "
         "at their places; G a gather layer, O an output layer, P+O a product layer that also writes the "
         "outputs in place. Bound: the compiler's guarantee (`con.info['compiled']['bound']`), the bound "
         "column of the targets' table above; \"within?\" checks the compiled stack against it. "
         "Params count the entries of every weight array (nonzero / all). A refusal is the compiler's "
         "`CompileError`, verbatim.", ""]
    L += _table_a(cells)
    L += [""]
    L += _section_b(res, cells, gd, n, d)
    L += _section_c(cells, gd, n, d)
    L += _section_trace(res.get("trace_example"))
    L += _section_budget(res.get("budget"))
    L += _section_local(res.get("local"))
    L += frontend_section()  # text only (circuits.from_function / from_sympy and docs/frontend_example.py)
    return "\n".join(L) + "\n"


def _section_local(rows) -> list[str]:
    """Local circuits (``compiler_report.local_example``): the width as the tokens grow."""
    if not rows:
        return []
    L = ["", "## Local circuits: width as the tokens grow", "",
         "`circuits.local_circuit(T)`: output `y_t` reads the inputs of tokens `t - 1, t, t + 1` only (16 random "
         "add/mul gates per token, 2 input channels, degree at most 6), a sequence model's per-token computation; "
         "its blocks share one shape (`shared=True`: every token draws the same gates, the two edge tokens aside) "
         "or have random shapes. A routed level puts each product at a token by one of two rules "
         "(`constructions/compiler/sequence.py` `_place_products`) and the plan keeps the narrower compile: "
         "*balanced* (a factor's token unless it holds its share of the level's products, then the least loaded), "
         "and *latest* (the latest token a factor sits at). The latest rule commutes with moving the circuit "
         "along the tokens, so blocks of one shape place their products at the same relative token and share "
         "every inner channel: the width does not grow with `T`. Blocks of random shapes need forms that differ "
         "from token to token while a channel mix is shared by all tokens: a route layer "
         "(`constructions/compiler/routing.py`) gives such rows of one (source, destination) channel pair one "
         "inner channel per shift they read, the rows' coefficients in its mask (`B_gate`), so its inner channels "
         "are at most the source channels x destination channels x the shifts (3 here) whatever `T`; the states' "
         "channels (products per token per level) still vary with the draws, and the width grows with `T` over "
         "this range, more slowly. The plan is never wider than the balanced rule alone.", "",
         "| blocks | tokens | gates | layers | width | width, balanced rule alone | compile CPU s | proof |",
         "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        proof = {True: "PROVED", False: "FAILED"}.get(r.get("proved"), "")
        L.append(f"| {r['shapes']} shape{'s' if r['shapes'] == 'random' else ''} | {r['tokens']} | {r['gates']:,} | "
                 f"{r['layers']} | {r['width']} | {r['balanced_width']} | {r['compile_cpu_s']} | {proof} |")
    return L


def _section_budget(ex) -> list[str]:
    """A channel budget (`circuit --channels C`, `compile_circuit(channels=C)`): the machine, the
    derivation of its layer bound, and the frontier of one GD step."""
    if not ex:
        return []
    L = ["", "## A channel budget (`--channels C`, `--pareto`)", "",
         "`compile_circuit(g, target, channels=C)` (constructions/compiler/budget_search.py) keeps every state and "
         "every layer's inner channels at most `C` and is a search over this compiler's own compiles, a fixed list "
         "per circuit: the default levelled compile (width `W`), the levelled compile with at most `q` products per "
         "token in a product layer (`q = 1, 2, 4, 8`; a level's products in several layers), the packed levelled "
         "compile below (constructions/compiler/packed.py), in both its modes, and the one-value-per-slot budget "
         "machine below (constructions/compiler/budget.py), each at budgets from the grid's channels `D` (the "
         "machine: `D` + 2): the first 8, every 3/2-fold step after them and the 8 below `W`; none wider than `W`. "
         "The unbounded compile (no `--channels`) is the least of them in one order (fewest layers, then the "
         "narrowest state, then the list's order) among those it searches: all of them on circuits of at most "
         "64 gates; up to 2,000 gates the default and the packed compile on the grid's own `D` channels (one "
         "packed budget, stopping once it passes the default's layers: the search costs at most that compile); "
         "above, the default alone. The set `S` a budget chooses from is the searched compiles and every other "
         "compile of the list that comes after the unbounded one in that order; a budget gives the least compile "
         "of `S` that fits. So, by construction, the layers never increase with `C`, every `C` at or above the "
         "unbounded compile's width gives it, and the least budget accepted (stated in the refusal of a smaller "
         "one) is the narrowest compile of `S`, never above the unbounded compile's width; a budget never gives "
         "fewer layers than the unbounded compile. `--pareto` compiles the budgets at which a compile of `S` "
         "starts to fit, from that minimum up, and keeps the lower envelope.", "",
         "**The packed levelled compile** keeps the placed grid's tokens. A layer carries each channel holding a "
         "value still read later (one inner channel each: `W_in = W_out = e_c`, filter `delta_0`, `B_gate` the 0/1 "
         "mask of its live tokens) and spends the other `C - carries` inner channels on ready products (seed 000 "
         "App. D.2.1 MULTIPLY; products at different tokens with the same gate mix and conv channel share one), in "
         "level order. Two values that every later reader reads in the same ratio are one value to all of them, so "
         "they share a slot: a product is added into such a value's slot at its token (`W_out` holds the ratio), and "
         "a value at another token is added into it through the filter taps of the carry of the channel both sit "
         "in (seed 003 Lemma H.7; no extra inner channel), or of an inner channel of its own where the budget "
         "leaves one. On the GD step the sums `sum_j A_ij x_j` build up in one slot per token, "
         f"`q = C - {ex['grid_channels']}` "
         "products per token a layer, and each `-eta sum_i A_ij r_i` is added into `x_j`'s slot, the output's "
         f"place, by that channel's carry: `2 ceil({ex['d']} / q) + 1` layers (stated bound `2 P + I + 1`: a layer forms at "
         "least one product until the last, a later layer merges at least two values, one route for the outputs). "
         "On `baseconv-causal` it also compiles the circuit's token-sum form (below) and keeps the fewer layers. A "
         "compile it cannot make in one layer per step (a factor over several tokens, a final route wider than "
         "`C`) is left to the other compiles.", "",
         "**Carries shared at disjoint tokens** (the packed compile's second mode, tried beside the plain one at "
         "every budget; `compiled.bound.mode`). A carry is `B_gate` times one channel read through the filter, and "
         "`B_gate` is per token, so one inner channel serves two uses at disjoint tokens: a channel whose kept "
         "values sit only where another carried channel holds nothing (and the other way round) moves into that "
         "channel's carry (`W_in = e_c + e_c2`, filter `delta_0`: one carry less), and a product group whose conv "
         "side reads channel `d` through the taps and writes into `d` shares `d`'s carry where its tokens are not "
         "the carry's and its gate form reads nothing at the carry's tokens (there `B_gate` alone is the gate); a product group whose gate reads channel `g` "
         "also moves a kept value of `g` into its own channel at a token that is not a product's (the gate reads "
         "that one value there, the conv side nothing, `B_conv` the scale), where that value is later merged with "
         "the products. A merge takes the base slot that costs the fewest inner channels. The mode is level-synchronous: product "
         "layer `k` forms every product of level `k` (all are ready: their factors read lower levels only; a level "
         "that does not fit one layer is refused and left to the other compiles), then at most one merge layer and "
         "one route for the outputs, so its stated bound is `md + 2` layers (`md`: the multiplicative depth of the "
         "products the outputs need). On the GD step layer 1 moves each `x_j` (the last token) into the carry of "
         f"`A`'s channel `j` (the other tokens) and forms every `A_ij x_j` ({ex['d'] + 1} carries + {ex['d']} "
         f"products = {ex['grid_channels']} inner channels), layer 2 every `A_ij r_i` into `x_j`'s channel, whose "
         "inner channel (gate: `A`'s channel `j`, which holds `x_j` on the last token) also moves `x_j` back to "
         "its place, layer 3 adds each `sum_i A_ij r_i` into it through that channel's carry: "
         f"{ex['shared']['layers']} layers on the grid's own {ex['shared']['channels']} channels "
         f"(bound `md + 2` = {ex['shared']['bound']}; {ex['shared']['verdict']}).", "",
         "**The budget machine.** The state is `M = C - 2` memory channels and two work channels "
         "`A`, `B`; every value sits in one memory slot and every other slot is zero. A layer carries each memory "
         "channel holding a live value (one inner channel each: `W_in = W_out = e_c`, filter `delta_0`, `B_gate` the "
         "0/1 mask of its live tokens, so dead values are zeroed for free), which leaves at least 2 inner channels "
         "for: a *unit read* into a slot at token `t` (seed 003 Lemma H.7; a local channel mix at `t`, or one "
         "channel's atoms at other tokens through the filter taps, masked to `t`); a *load* of a product's factors "
         "into `A` and `B` at its token; a *product layer* (seed 000 App. D.2.1 MULTIPLY: `A * B`, zero but at the "
         "loaded tokens, added into a memory channel free there); a *move* of a finished output to its place. "
         "Where the grid has no free slot, tokens are appended (the theorems' O(w) rows).", "",
         "Layer bound (reported as `compiled.bound.layers`). A form read at token `t` has `u <= 1 + M` units (its "
         "atoms at `t`, and one per memory channel holding its other atoms); `u >= 2` units are accumulated into a "
         "scratch slot at `t` in `u - 1` layers (the first layer reads two units, each later one the scratch and one "
         "more). A product costs one load and one product layer plus `(u(f) - 1)^+ + (u(g) - 1)^+` partial-sum "
         "layers, an output `max(1, u - 1)` layers to stage and half a layer to move (two per layer), so with `P` "
         "products and `O` outputs: layers `<= P (2 + 2M) + O (M + 1) + ceil(O / 2) + 1`, linear in the circuit's "
         "size. It runs on `baseconv-causal`, below 5 channels, and for small circuits where it is fewer layers.", "",
         "**Level-parallel** (`baseconv`, `C >= 5`; `compiled.bound.scheme`): the theorems' `O(Delta log w)` with "
         "constants. One flatten layer puts every input in one value channel `V`, token-major (grid `(t, c)` -> "
         "token `c T_g + t`). Per level of multiplicative depth each work channel gets its factor forms by a Benes "
         "network of masked shifts (constructions/compiler/benes.py, looping algorithm; seed 003 Lemma H.7 and Prop. "
         "H.8's shifts, in the butterfly stages of a Benes network over tokens): stage `j` is one layer, output token `t` keeps its value or "
         "reads `t XOR 2^j` (three inner channels: lag 0, `-2^j`, `+2^j`, each masked by `B_gate`), `2K - 1` stages "
         "on `2^K` tokens. Each distinct atom is routed to the head of its copy run (`<= 2K - 1`), copied by a "
         "doubling tree (`<= K`), routed to its forms' blocks with the coefficients in the last masks (`<= 2K - 1`; "
         "the two routes compose where nothing is copied), summed by a halving tree towards the block's end (`<= K`), "
         "the product's token; one product layer forms every product of the level. Outputs: the same into `A`, a "
         "third route to token `c T_g + t` where needed, one unflatten layer. With `K = ceil(log2 N')` (`N'`: "
         "the tokens, the theorems' `O(w)` rows): layers `<= md (6K - 1) + 8K - 1` for `C >= 7` (both work channels "
         "route in the same layers: 1 + 3 + 3 inner channels), `md (12K - 3) + 8K - 1` for `C` in 5, 6. "
         + _level_example_text(ex.get("level_example")), "",
         *_causal_lower_bound(ex), "",
         f"Frontier of `{ex['call']}` (`circuit --pareto`; each point compiled, the tests prove every builder at "
         "every budget from the minimum up):", "",
         "| target | minimum budget | bound at the minimum | frontier: layers x channels (tokens) |",
         "|---|---|---|---|"]
    for target, r in ex["targets"].items():
        if "refused" in r:
            L.append(f"| {target} | refused: {r['refused']} | | |")
            continue
        pts = ", ".join(f"{p['layers']} x {p['channels']} ({p['tokens']})"
                        + ("" if p["budget"] is not None else " unbounded") for p in r["frontier"])
        L.append(f"| {target} | {r['minimum']} | {r['bound_at_minimum']} | {pts} |")
    L += _frontier_count(ex)
    return L


def _frontier_count(ex) -> list[str]:
    """How many points a frontier on the example's grid can have at all (where its narrowest compile is the
    grid's own width): computed from the measured frontier, the grid and the outputs' degree."""
    r = ex["targets"].get("baseconv", {})
    if "frontier" not in r or not r["frontier"] or r["minimum"] != ex["grid_channels"] or "degree" not in ex:
        return []
    first, D, lmin = r["frontier"][0], ex["grid_channels"], ex["least_layers"]
    most = first["layers"] - lmin + 1
    return ["", f"How many points a frontier of `{ex['call']}` on `baseconv` can have, in any compile of BaseConv "
            f"layers on its grid: every state holds the {D}-channel grid, so no point is narrower than {D} channels; "
            "a layer multiplies two affine forms of its input per inner channel, so `L` layers compute polynomials "
            f"of degree at most `2^L`, and the outputs (degree {ex['degree']}, expanded exactly) need at least "
            f"{lmin} layers. A frontier's layers fall strictly as its channels grow, from {first['layers']} at "
            f"{D} channels (compiled above), so it has at most {first['layers']} - {lmin} + 1 = {most} points; "
            f"listed: {len(r['frontier'])} (the budgets from {D} up to the default's width)."]


def _level_example_text(le) -> str:
    """The level-parallel scheme measured on one circuit at its least budget (``compiler_report.level_example``)."""
    if not le:
        return ""
    return (f"`{le['call']}` at its minimum {le['channels']} channels: {le['layers']} layers on {le['tokens']} tokens "
            f"({le['scheme']}; bound {le['bound']}); one product at a time at that budget: {le['one_at_a_time']} "
            f"layers (bound {le['one_at_a_time_bound']}).")


def _causal_example_text(ce) -> str:
    """The causal GD steps with x on the last token (``compiler_report.causal_example``), measured."""
    if not ce:
        return ""
    return "Measured: " + "; ".join(
        f"`{r['call']}` on `baseconv-causal` {r['layers']} layers on {r['tokens']} x {r['width']} "
        f"({'PROVED' if r['proved'] else 'FAILED'}; hand causal construction {r['hand'][0]} x {r['hand'][1]})"
        for r in ce) + "."


def _causal_lower_bound(ex=None) -> list[str]:
    """Why no causal compile meets a constant factor of Delta log2 w at a fixed budget (a counting argument)."""
    return [
        "**Why `baseconv-causal` has no such scheme.** A causal layer's output at token 0 reads its input at token 0 "
        "only, so the state's first row evolves by itself, and tokens appended after the grid never reach it. In "
        "that row one layer forms at most `C` products, inner channel `k` multiplying two affine forms of the row's "
        "entries (`(u W_gate + B_gate)[0, k]` and `h_k[0] (u W_in + B_in)[0, k] + B_conv[0, k]`), and `W_out`, "
        "`B_out` mix them affinely: `L` layers compute the row-0 outputs by a straight-line program of at most "
        "`L C` multiplications of affine forms. Place at token 0 an output `p`, a polynomial of degree `d` in the "
        "`D` inputs of token 0, with `M = binom(D + d, d)` coefficients: its circuit (each monomial a product tree, "
        "then a sum tree) has depth `Delta <= ceil(log2 d) + ceil(log2 M) + 1` and width `w <= 2 d M`, so "
        "`Delta log2 w = O(log^2 M)`. The polynomials that `m` multiplications compute are the image of a "
        "polynomial map of at most `(m + 1)(2D + m + 2)` coefficients (each product's two forms over the inputs "
        "and the earlier products, and the output's form), a set of dimension below `M` once `m + D + 2 < "
        "sqrt(M)`; so every `p` outside a proper algebraic subset (rational ones among them) needs `m >= sqrt(M) "
        "- D - 2`, and `L >= (sqrt(M) - D - 2) / C`. Against `Delta log2 w = O(log^2 M)` the ratio grows "
        "without bound with `d`: at a budget `C` that does not grow with the circuit, no constant factor of "
        "`Delta ceil(log2 w)` bounds the causal target's layers, whatever tokens are appended. What this proves: "
        "outputs on token 0 (more generally on a token `t`, whose rows `0..t` evolve by themselves), in this "
        "compiler's model (causal BaseConv layers, tokens appended after the grid). It says nothing about outputs "
        "on the last token, the causal use case, which every earlier row reaches: there the token-sum form below "
        "compiles. The theorems reach earlier rows by means the causal target lacks: seed 003 Prop. H.8 (the shift "
        "primitive) shifts up by reversing the sequence with a circular convolution. (Seed 000 Assumption D.22 "
        "restricts the channel mix `W` of Def. D.20 to Kaleidoscope matrices; it does not move values between "
        "rows.) So `baseconv-causal` has no level-parallel budget scheme: its budget machine runs one product at "
        "a time with its linear bound.", "",
        "**Causal compiles where users place values** (constructions/compiler/token_sums.py). A causal filter "
        "moves values to later tokens only, so a product of an input on the output's token (the GD step's `x`, "
        "on the last token) with earlier tokens' inputs (`a_ij x_j`) forms on the output's token, one inner "
        "channel each. `baseconv-causal` also compiles the circuit's *token-sum form*: each output expanded "
        "exactly (python-flint), written as a polynomial in its own token's inputs whose coefficients are sums "
        "over tokens `s <= t` of one token's terms each; the per-token products form in the same channels on every "
        "token, one causal all-ones filter sums them to the output's token (seed 000 App. D.3.1 eq. (47)), and "
        "only then are they multiplied by the output token's inputs: the Gram form `x - eta (A^T A x - A^T b)` "
        "of the hand causal construction, found from the circuit. It is kept where it has fewer layers, or as many "
        "on fewer channels, and is proved against the circuit as given. A term reading two earlier tokens at once "
        "(or a later one) leaves the circuit as written. " + _causal_example_text((ex or {}).get("causal_example")),
                "keeps the one-product-at-a-time scheme and its linear bound."]


def _section_trace(ex) -> list[str]:
    """The residual labels of one small compiled circuit, every layer, and its PNG."""
    if not ex:
        return []
    L = ["", f"## Inspection: which node sits where (`{ex['call']}` on `{ex['target']}`)", "",
         f"Like tracr's residual labels: for the input state and the state after each of the {ex['layers']} "
         f"layers ({ex['state'][0]} tokens x {ex['state'][1]} channels; proof: "
         f"{'PROVED' if ex['proved'] else 'FAILED'}), which circuit node's value sits at each (token, channel), "
         "and which product each BaseConv inner channel forms, its gate side `u W_gate + B_gate` times its "
         "convolution side `h * (u W_in + B_in) + B_conv` (seed 000 eq. (19)). The labels are found after the "
         "fact from the compiled stack and the circuit alone (`verify/compiler_trace.py`): the stack and "
         f"every node are evaluated at {ex['draws']} random points modulo the prime {ex['prime']}, and a cell is "
         "labelled with the nodes whose values equal its value at every point (`c name`: c times the node; a "
         "number: a constant; `~`: no node's multiple, e.g. a partial sum); by Schwartz-Zippel and a union "
         f"bound any label here is wrong with probability at most {ex['error_bound']:.1e}. They are for "
         "reading; the proof is exact and separate. The same for any circuit: `python -m verify.construct "
         "circuit --graph FILE --trace --plot FILE.png` (tables cut for large states; `--json` then holds "
         "every label as `compiled.trace`).", "",
         "Names: an input by its name, an output gate by its output name (`x_0'`: the next x_0), other "
         "gates `p<id>` (a product) and `s<id>` (a sum): " + "; ".join(f"`{x}`" for x in ex["legend"]) + ".", ""]
    for i, tab in enumerate(ex["tables"]):
        L += [f"**{'Input state' if i == 0 else f'After layer {i}'}**", ""] + tab + [""]
    L += [f"![occupancy of the state per layer]({TRACE_PNG})", "",
          f"`{TRACE_PNG}`: the same states, cells coloured by what they hold (input, sum, product, output, "
          "constant, other)."]
    return L


def _section_b(res, cells, gd, n, d) -> list[str]:
    gdc = {t: _find(cells, "gd_step", t) for t in TARGETS}
    call = gdc["baseconv"]["call"] if gdc["baseconv"] else "gd_step"
    L = [f"## (b) The GD step: hand-written architectures next to the compiled ones (N={n}, D={d})", "",
         "Every `gd` architecture of the registry (`constructions.catalogue.gd_architectures()`), built "
         f"by `entry.build({n}, {d})` and proved. Layers are per GD step (the body, repeated k times) "
         "plus the fixed prologue and epilogue. The compiled architectures (`constructions/compiled_gd.py`) "
         "are the placed GD step (plus the query q passed through) compiled as the body and the "
         "prediction q^T x compiled as the epilogue; their build time is the compilation. The hand "
         "architectures are proved for a symbolic step size (and ridge parameter), the compiled ones for "
         "the fixed exact values shown (a constant of the circuit).", ""]
    L += _table_b(gd)
    L += ["", f"The bare step circuit `{call}` of table (a), for the same comparison: "
          + "; ".join(f"`{t}` {_layers(c)}, state {_state(c)}" for t, c in gdc.items() if c) + ".", ""]
    return L


def _section_attention(cells, gd) -> list[str]:
    from .cli_common import markdown_table

    att = [c for c in cells if c["target"] in ATTENTION and c["status"] != "refused"]
    refused = [c for c in cells if c["target"] in ATTENTION and c["status"] == "refused"]
    rows = [(c["call"], c["target"], c["layers"], _plan(c) + _modules(c),
             ", ".join(f"{PLAN_ABBREV.get(k, k)} {h}" for k, h in c["inner_channels"]),
             f"{c['tokens']} x {c['channels']}", f"{c['params']['nonzero']} / {c['params']['total']}",
             c["bound"]["layers"], "yes" if c["within_bound"] else "NO") for c in att]
    hand = {r["arch"]: r for r in gd}
    L = ["### LSA and ELSA: the Gram factor, and why at most `md + 2` layers", "",
         "A head of an LSA layer (seed 001 eq. (8)) adds to cell (t, c) `sum_b l_b(H[t]) G[b, c]` with "
         "`G[b, c] = sum_s m_b(H[s]) n_c(H[s])`: every term is linear in `H[t]` with coefficients that do "
         "not depend on t, so no stack of LSA layers forms the token-wise product `x[t] y[t]` for all t "
         "(the baseconv targets' product primitive; ELSA's biases are constants and change nothing). "
         "What one head does form is a family of *sums* of products between a work token w and the "
         "other tokens: with the one-hot positions in the input (`pos_r`; ELSA: in its bias matrices), "
         "`n_d = sum_i pi[d, i] pos_i` selects tokens inside the Gram factor (shape R: `out[w, d] = "
         "sum_b l_b(h_w) sum_i pi[d, i] m_b(H[i])`, e.g. every residual `(A x - b)_i` in one head) and "
         "`m_i = pos_i` sums over them (shape C: `out[w, d] = sum_i l_i(h_w) n_d(H[i])`, e.g. `A^T r`). "
         "`constructions/compiler/attention.py` writes, per level of multiplicative depth, each "
         "consumer's products (a later factor or an output) as monomials between a work-token cell and "
         "any cell, and splits that coefficient matrix into heads by an exact rank factorisation "
         "(python-flint `fmpq_mat.rref`), in the shape of smaller rank. Inputs move to the work token "
         "only where a product has no factor there (one gather layer); the outputs are written in place "
         "by the last product layer when they all sit on the work token, else by one output layer. "
         "Hence at most `md + 2` LSA layers; ELSA pairs them into modules of two stages (stage 1 adds a "
         "skip head, Property 3; stage 2 a head handing on the channels stage 1 wrote), at most "
         "`ceil((md + 2) / 2)` modules. Heads per layer:", ""]
    L += markdown_table(["circuit", "target", "layers", "plan", "heads per layer", "state", "params nonzero / total",
                         "bound (layers)", "within?"], rows)
    if refused:
        L += ["", "Refused: " + "; ".join(f"`{c['call']}` on `{c['target']}` ({c['message']})" for c in refused)
              + "."]
    gl, ge = _find(cells, "gd_step", "lsa"), _find(cells, "gd_step", "elsa")
    if gl and ge and gl["status"] != "refused" and ge["status"] != "refused":
        hl, he = hand.get("lsa"), hand.get("elsa")
        L += ["", f"The GD step `{gl['call']}`: `lsa` {plural(gl['layers'], 'layer')} ({_plan(gl)}), state "
              f"{gl['tokens']} x {gl['channels']}; `elsa` {plural(ge['layers'], 'module')}{_modules(ge)}, state "
              f"{ge['tokens']} x {ge['channels']}"
              + (f"; the hand constructions of table (b): `lsa` {hl['layers_per_step']} layer per step on "
                 f"{hl['state'][0]} x {hl['state'][1]}, `elsa` {he['layers_per_step']} on "
                 f"{he['state'][0]} x {he['state'][1]}" if hl and he else "") + "."]
    return L + _section_attention_gd(gd)


def _section_attention_gd(gd) -> list[str]:
    """Why compiled GD on ``lsa`` cannot be one layer per step over the placed grid,
    and what placement would let it (and ``elsa`` reach 1.5x the hand state)."""
    by = {r["arch"]: r for r in gd}
    cl, ce, hl, he = by.get("compiled-lsa"), by.get("compiled-elsa"), by.get("lsa"), by.get("elsa")
    if not (cl and ce and hl and he):
        return []
    n, d = cl["N"], cl["D"]

    def cells(r):
        return r["state"][0] * r["state"][1]
    return ["", "#### Compiled GD on `lsa` / `elsa`: one layer per step, and the state", "",
            f"Measured at N={n}, D={d}: `compiled-lsa` {plural(cl['layers_per_step'], 'layer')} per step on "
            f"{cl['state'][0]} x {cl['state'][1]} ({cells(cl) / cells(hl):.2f}x the hand `lsa` "
            f"{hl['state'][0]} x {hl['state'][1]}), `compiled-elsa` {plural(ce['layers_per_step'], 'module')} on "
            f"{ce['state'][0]} x {ce['state'][1]} ({cells(ce) / cells(he):.2f}x the hand `elsa` "
            f"{he['state'][0]} x {he['state'][1]}).",
            "",
            "**No single LSA layer does the step over the placed grid.** The grid puts the query q in A's "
            "channels 0..D-1 of the x token n (`constructions/compiled_gd.py`). Take any LSA layer (any "
            "number of heads, the one-hot positions in the input) and the update of cell (t, c): "
            "`sum_b l_b(H[t]) G[b, c]`, `G[b, c] = sum_s m_b(H[s]) n_c(H[s])`, the forms' data parts the "
            "same on every token, positions adding constants only. (i) At a data token t < n the x "
            "channels must not change; a monomial `A_te x_a q_c` there can only come from `l` reading "
            "channel e (x is 0 off token n, a position times a Gram entry has degree 2) times the "
            "`x_a q_c` part of `U_e = sum_b l_b[e] G[b, c]`, so that part is 0. (ii) At token n a "
            "monomial `x_a q_e q_c` then comes only from `l` reading x's channel a times the `q_e q_c` "
            "part of a Gram entry, and `q_e q_c` is the s = n term of the same bilinear form whose "
            "s < n terms are `A_se A_sc`: its coefficient equals that of `x_a A_se A_sc`. The GD update "
            "of x_j needs `-eta x_k A_sj A_sk` and no `x_k q_j q_k`: a contradiction (eta != 0). ELSA's "
            "biases are position constants, so one ELSA stage is no better; a two-stage module (seed 001 "
            "eq. (57)-(59)) escapes the argument, and `elsa` is one module per step.",
            "",
            "**What placement lets it.** With q in channels of its own (not A's) the Gram entry "
            "`sum_s A_sk A_sj` is exactly `(A^T A)_kj`, and one LSA layer of 3 heads is the step, as "
            "the hand construction's (seed 001 eq. (42)-(48)): `l_k = x_k` (nonzero only on token n, so "
            "the update stays there), `m_k = A_k`, `n_{x_j} = -eta A_j`; `l = pos_n`, `m = b`, "
            "`n_{x_j} = eta A_j`; `l = m = pos_n`, `n_{x_j} = -eta lam x_j`. Only `pos_n` of the "
            f"position block is read: state (N+1) x (3D+2) = {(n + 1) * (3 * d + 2)} cells, "
            f"{(n + 1) * (3 * d + 2) / cells(hl):.2f}x the hand `lsa`. For `elsa` on the placed grid "
            "itself, two changes to the plan reach it: each residual `r_t = A_t x - b_t` on its own "
            "data token in one channel (one head: `l_j = A_j`, `m_j = x_j`, `n = pos_n`, and Gram rows "
            "`l_b = x_b`, `m_b = -A_b` (read at token n through `n = pos_n`: `-q_b`) cancelling the query token's `q . x`), then `A^T r` as a "
            "row-uniform Gram sum (`l = pos_n`, `m = r`, `n_{x_j} = -eta A_j`), with stage 1's skip "
            "as a channel identity (`W3 = I`, `B1^T B2` = the identity on the channels stage 2 reads, "
            "rank at most T) instead of a token identity (which needs as many channels as tokens): "
            f"state (N+1) x (2D+2) = {(n + 1) * (2 * d + 2)} cells, "
            f"{(n + 1) * (2 * d + 2) / cells(he):.2f}x the hand `elsa`. Neither is done: the compiler "
            "places every consumer of a level on the work token, and the `lsa` constant block holds "
            "all T positions."]


def _section_c(cells, gd, n, d) -> list[str]:
    """(c): why at most ``2 md + 1`` layers, why a route layer is any linear map, the compiled stacks
    against seed 003 Thm. H.21, LSA and ELSA (:func:`_section_attention`), and what is not done."""
    seq = [c for c in cells if c["target"] in SEQUENCE and c["status"] != "refused"]
    L = ["## (c) The guarantee, and what is not done", ""] + _section_c_levels(seq) + [""]
    L += _section_c_routes(cells, seq) + [""]
    L += _section_c_h21()
    L += _table_h21(cells)
    L += [""] + _section_attention(cells, gd)
    return L + _section_c_not_done(cells, gd, n, d) + [""]


def _section_c_levels(seq) -> list[str]:
    """Why a sequence target's stack has at most ``2 md + 1`` layers, and the cell of table (a)
    closest to that bound (``seq``: the proved sequence cells)."""
    worst = max(seq, key=lambda c: c["layers"] / c["bound"]["layers"]) if seq else None
    return ["### Why at most `2 md + 1` layers on the input grid's tokens", "",
            "1. **Affine forms over atoms** (`linearise`). Every circuit node becomes an affine form over "
            "*atoms*: the inputs and binary products. Additions and multiplications by constants are free "
            "(they live in the forms), an n-ary product is split into a balanced tree, and a product "
            "atom's level is 1 + the larger level of its factors' atoms; md is the largest level an "
            "output needs. Both factors of a level-l product are affine forms over atoms of level < l, "
            "which the state holds (atoms still needed later are carried).",
            "2. **One product layer per level.** A BaseConv layer forms, in each inner channel k, "
            "`(u W_gate + B_gate)[:, k] * (h * (u W_in) + B_conv)[:, k]` (seed 000 App. D.2.1 MULTIPLY, "
            "Def. D.20). A product sitting at token t is one such channel when one factor is a channel mix "
            "of the atoms at t (the gate side; `W_gate` is shared by all tokens) and the other either a "
            "channel mix at t (filter = identity) or one channel read at other tokens through the "
            "filter's taps. Products with the same gate mix and conv channel share an inner channel at "
            "different tokens; carried atoms pass through a channel whose gate is a 0/1 token mask.",
            "3. **A route layer before it only where a factor must move.** If some product of the level "
            "cannot be read that way (e.g. a factor mixes atoms on several tokens, or neither factor is a "
            "channel mix at the product's token), the level first gets one route layer that puts both factors of "
            "every product side by side at one token (chosen to balance the products over the tokens), "
            "after which the product layer reads them locally. So a level costs 1 or 2 layers.",
            "4. **One final route layer** writes each output (an affine form over the last atoms) at its "
            "place and zeros every other slot (skipped when the state already is the final state).",
            "",
            "Hence layers <= 2 md + 1, and the state never gains tokens: the grid is the input grid, "
            "only channels are added. Channels: the grid's D, at most I more where inputs read across tokens are "
            "split to fresh channels (constructions/compiler/place.py), then a new one is the lowest free, so a "
            "state needs at most S = D + I + K + n_out (K: the most, over levels, of the atoms carried into the "
            "level plus two per product of the level; n_out outputs), a product layer's inner "
            "channels are at most its carried atoms plus products (<= A, the atoms needed: inputs and "
            "products), and a route layer's at most one per (destination slot, source channel it reads) "
            "(constructions/compiler/routing.py opens an inner channel only for a row no earlier one admits), "
            "so at most the atoms it carries plus the terms of the forms it writes: F (every product's two "
            "factor forms) or O (the outputs' forms). `state_width` <= max(min_width, S, A + max(F, O)) in "
            "`compiled.bound`. Every bound is stated in `compiled.bound.formulas` as an object (`formula`, the "
            "`measures` it reads, its `value`) whose measures are the compiled circuit's "
            "(constructions/compiler/bounds.py), never the compile's own width or layers; the unbounded compile "
            "states the default's width bound whichever compile it chose (none it tries is wider), a budgeted "
            "compile the budget C. "
            + (f"In table (a) every proved sequence cell is within the bound; the closest to it is "
               f"`{worst['call']}` on `{worst['target']}`: {worst['layers']} of {worst['bound']['layers']} "
               f"layers (plan {_plan(worst)})." if worst and all(c["within_bound"] for c in seq) else
               "**Some cell of table (a) exceeds the bound: see the \"within?\" column.**")]


def _section_c_routes(cells, seq) -> list[str]:
    """Why a route layer is any linear map, its width (the widest route layer of ``seq``), and the
    causal refusals."""
    routed = [c for c in seq if "route" in (c["plan"] or [])]
    route_inner = [(c, max(k for kind, k in c["inner_channels"] if kind == "route")) for c in routed]
    widest = max(route_inner, key=lambda ci: ci[1]) if route_inner else None
    refusals = [c for c in cells if c["status"] == "refused"]
    return ["### Why a route layer is any linear map, and what its width costs", "",
            "With `W_gate = 0` a BaseConv layer is linear in its input (seed 003 Lemma H.7: linear, "
            "convolution and fixed gating are one layer each; seed 000 App. D.2.1 LINEAR). Each inner "
            "channel k adds `mask_k[t] * sum_s h_k[s] (u W_in[:, k])[t - s] * W_out[k, :]`: a channel mix "
            "in, a per-channel filter that moves tokens, a per-token mask (`B_gate`, a *masked filter*) "
            "and a channel mix out; `B_out` adds constants. Any linear map `y[t, c'] = sum M[(t, c'), (t2, "
            "c)] u[t2, c] + const` is a sum of such terms: one inner channel per (source channel c, "
            "destination channel c', destination token t) with `W_in = e_c`, taps `h[t - t2] = M[(t, c'), "
            "(t2, c)]` (on a circular convolution, for a fixed t each t2 has its own shift), mask `e_t` "
            "and `W_out = e_c'`. So one layer realises any linear map, at the price of up to "
            "(source channels) x (destination channels) x (tokens) inner channels; `constructions/"
            "compiler/routing.py` shares one inner channel among the rows whose taps agree up to a scale "
            "(the mask carries the scale) and merges equal groups over sources and destinations. The "
            "last column of the next table gives the inner channels each compiled layer used"
            + (f"; the widest route layer is that of `{widest[0]['call']}` on `{widest[0]['target']}`: "
               f"{widest[1]} inner channels, on {widest[0]['tokens']} tokens." if widest else ".")
            + " A causal convolution only moves values to later tokens, so there a route layer realises "
            "only the maps whose every term reads an earlier or the same token; an output placed before "
            "a token it depends on is refused"
            + (" (" + "; ".join(f"`{c['call']}`" for c in refusals) + " in table (a))." if refusals else ".")]


def _section_c_h21() -> list[str]:
    """The head of the comparison with seed 003 Thm. H.21 (its table: :func:`_table_h21`)."""
    return ["### Against seed 003 Thm. H.21 (= seed 000 Thm. D.30)", "",
            "The theorem turns an (ND, s, Delta, w)-circuit into an (N, O(Delta log w), D, O(w), D)-BaseConv: "
            "O(Delta log w) layers, an inner state of O(w) rows and D columns. It pays for every level of "
            "(additive and multiplicative) depth and moves values with linear layers of width D (log w "
            "Kaleidoscope factors per level). This compiler counts only multiplicative levels (additions "
            "are free in the affine forms) and routes any linear map in one layer by letting the channel "
            "count grow: it trades width (channels) for depth, and keeps N rows instead of O(w). The "
            "table puts the theorem's expressions, constants dropped (so only indicative), next to what was "
            "compiled:", ""]


def _section_c_not_done(cells, gd, n, d) -> list[str]:
    """What is not done: an explicit-constant Thm. H.21 bound, row-uniform Gram sums on the attention
    targets, and the GD step's Gram form (the builder's choice, not the compiler's)."""
    by = {(c["builder"], c["target"]): c for c in cells}
    gb, gcz = by.get(("gd_step", "baseconv")), by.get(("gd_step", "baseconv-causal"))
    hand_c = next((r for r in gd if r["arch"] == "baseconv-causal"), None)
    gd_n, gd_d = (int(a) for a in gb["args"][:2]) if gb else (n, d)
    L = ["", "### What is not done", "",
         "* **An explicit-constant Thm. H.21 bound.** `compiled.bound` is this compiler's own guarantee "
         "(derived above). Seed 003 Thm. H.21 (App. H.5) states orders only, Delta' = O(Delta log w) layers and "
         "N' = O(w) inner tokens, and its proof composes O(Delta) circuit layers of O(log w) BaseConv layers each "
         "(Cor. H.20, Prop. H.10) without constants; `theorem_H21_bound` is labelled the paper's and gives "
         "`c1 Delta ceil(log2 w)` with `value_at_c1`, not a guarantee."]
    dot_l = by.get(("dot", "lsa"))
    if dot_l is not None and dot_l["status"] != "refused" and "gather" in (dot_l["plan"] or []):
        L += [f"* **Row-uniform Gram sums on the attention targets.** `{dot_l['call']}` on `lsa` is "
              f"{plural(dot_l['layers'], 'layer')} (plan {_plan(dot_l)}): its products u_t v_t have both factors "
              "on token t, so one factor is gathered to the work token first. One head could form the "
              "whole sum as a Gram entry `sum_s m(H[s]) n(H[s])` with `m`, `n` reading the u and v "
              "channels (a row-uniform bilinear form); the pass does not recognise that shape."]
    gram_c = by.get(("gd_step_gram", "baseconv-causal"))
    if gcz is not None and gcz["status"] != "refused" and gb is not None and gb["status"] != "refused":
        L += [f"* **The Gram form within one step, not across steps.** On `{gcz['call']}` the causal target "
              f"compiles the circuit's token-sum form (constructions/compiler/token_sums.py: the Gram form "
              f"(A^T A) x - A^T b found from the circuit, its products a_ij a_ik, a_ij b_i within each data token "
              f"and summed to the query token by causal prefix-sum filters, seed 000 eq. (47)) to "
              f"{plural(gcz['layers'], 'layer')} on {gcz['tokens']} x {gcz['channels']} (plan {_plan(gcz)}; the "
              f"circular target: {gb['tokens']} x {gb['channels']})"
              + (f", against {hand_c['state'][0]} x {hand_c['state'][1]} for the hand `baseconv-causal` "
                 f"({hand_c['state_formula']})" if hand_c else "")
              + (f"; `{gram_c['call']}`, written in the Gram form by the builder, {plural(gram_c['layers'], 'layer')} "
                 f"on {gram_c['tokens']} x {gram_c['channels']}" if gram_c and gram_c["status"] != "refused" else "")
              + ". What the compiler does not find is the iteration's hoisting: `compiled-baseconv-causal` computes "
              "A^T A and A^T b once, in its prologue, and its body reads them (1 layer per step); a step circuit "
              "recomputes them every step."]
    return L
