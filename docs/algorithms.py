"""Writes docs/algorithms.md and its plots: iterative algorithms compiled, proved at every depth, run 100 steps.

    python docs/algorithms.py            # docs/algorithms.md and docs/algorithms_<example>.png

Each example of ``docs/algorithms_examples.py`` (one step written with ``circuits.from_function``) is
compiled by ``constructions.iterated.compile_iteration`` to every target that holds it, proved at every depth
(``verify.prover.proof.prove``: one body, by induction), and run ``STEPS`` steps in float64 and float32 against
the mpmath iteration from the same float inputs (``numerics/iterate.py``); the error against the step is
plotted.  The GD example's compile is compared with the hand constructions (layers per step, state size).
Every number in the page is computed here; nothing is written by hand.
"""
from __future__ import annotations

import inspect
import sys
from pathlib import Path

import numpy as np

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
for p in (str(ROOT), str(DOCS)):
    if p not in sys.path:
        sys.path.insert(0, p)

import algorithms_examples as X  # noqa: E402

from constructions.iterated import IterationError, compile_iteration  # noqa: E402

STEPS = 100
TRIALS = 4
SEED = 0
TARGETS = ("baseconv", "baseconv-causal", "baseconv-mlp", "lsa", "elsa")
DTYPES = ("float64", "float32")


def run_example(name: str, targets=TARGETS, steps: int = STEPS, trials: int = TRIALS, seed: int = SEED) -> dict:
    """One example on each target: the compile (or its refusal), the verdict, the per-step float errors."""
    from numerics.iterate import reference_iterates, run_against_reference
    from verify.prover.kernel import verdict
    from verify.prover.proof import prove

    g, params, inputs = X.EXAMPLES[name]()
    v0 = inputs(np.random.default_rng(seed), trials)
    refs = {dt: reference_iterates(g, {n: np.asarray(x, dtype=np.float64).astype(dt) for n, x in v0.items()}, steps)
            for dt in DTYPES}
    rows = []
    for t in targets:
        try:
            con = compile_iteration(g, steps, params=params, target=t, name=name)
        except (IterationError, ValueError) as e:  # a target that does not hold the step (CompileError too)
            rows.append({"target": t, "refused": str(e).splitlines()[0]})
            continue
        res = prove(con)
        runs = {dt: run_against_reference(con, v0, steps, np.dtype(dt), reference=refs[dt]) for dt in DTYPES}
        rows.append({"target": t, "body": len(con.body), "state": tuple(con.layout.shape),
                     "verdict": verdict(res).value, "sections": dict(res.sections), "runs": runs})
    return {"name": name, "params": params, "inputs": sorted(v0), "rows": rows, "circuit": g}


def gd_comparison() -> list[dict]:
    """The GD example's compile against the hand constructions and the catalogue's compiled GD, at the
    example's sizes: layers (prologue, body, epilogue) and the state."""
    from constructions.compiled_gd import compiled_gd
    from constructions.gd_attention import gd_elsa, gd_lsa
    from constructions.gd_baseconv import gd_baseconv, gd_baseconv_causal

    g, params, _ = X.gd()
    hand = {"baseconv": gd_baseconv, "baseconv-causal": gd_baseconv_causal, "lsa": gd_lsa, "elsa": gd_elsa}
    out = []
    for t, make in hand.items():
        ours = compile_iteration(g, params=params, target=t, name="gd-from-function")
        for label, con in (("from_function step (this page)", ours), ("hand (catalogue gd --arch)", make(X.GD_N, X.GD_D)),
                           ("compiled_gd (catalogue)", compiled_gd(X.GD_N, X.GD_D, target=t))):
            out.append({"target": t, "what": label, "name": con.name, "layers": (len(con.prologue), len(con.body),
                                                                                 len(con.epilogue)),
                        "state": tuple(con.layout.shape)})
    return out


def _fmt(e) -> str:
    return "n/a" if e is None or e != e else f"{e:.1e}"


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for row in result["rows"]:
        if "runs" not in row:
            continue
        for dt, style in zip(DTYPES, ("-", "--")):
            errs = [max(e, 1e-20) for e in row["runs"][dt].errors]
            ax.semilogy(range(1, len(errs) + 1), errs, style, label=f"{row['target']} {dt}")
    ax.set_xlabel("step")
    ax.set_ylabel("max error / max(|exact|, 1)")
    ax.set_title(f"{result['name']}: float runs against the exact iteration (mpmath)")
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=100, metadata={"Software": None})
    plt.close(fig)
    tmp.replace(path)


def render(results: list[dict], comparison: list[dict]) -> str:
    lines = [
        "# Iterative algorithms, compiled and proved at every depth",
        "",
        "<!-- written by docs/algorithms.py; edit that script (or docs/algorithms_examples.py), not this page -->",
        "",
        "A *step circuit* maps the state of one step to the next: an output named as an input feeds that input in the "
        "next step, and data kept across steps is a pass-through output. `constructions.iterated.compile_iteration(step, "
        "k, params=...)` compiles the step once, as the repeated body of prologue + body x k + epilogue, and the prover "
        "checks one body in fresh symbols (`state(v) -> state(step(v))`), which proves the stack for every k by "
        "induction, as for the hand GD constructions (docs/design.md, decision 4). `params` names inputs held fixed "
        "(a step size, a preconditioner): they stay symbols of the proof, so one proof covers every value. From the "
        "command line: `python -m verify.construct circuit --graph STEP.json --repeat K [--params eta=1/16]`.",
        "",
        f"Each example below is the code in `docs/algorithms_examples.py`, run as written by `docs/algorithms.py` "
        f"(and by `tests/constructions/test_iteration_docs.py`): compiled to each target, proved, and run {STEPS} steps "
        f"in float64 and float32 on {TRIALS} random problems (seed {SEED}) against the exact iteration computed in "
        f"mpmath from the same float inputs. The error is the largest over the state's values and the problems, "
        f"relative to max(|exact|, 1). Matrices are {X.N} x {X.N}.",
        "",
    ]
    for r in results:
        fn = X.EXAMPLES[r["name"]]
        lines += [f"## {r['name']}", "", inspect.getdoc(fn).splitlines()[0], "", "```python",
                  inspect.getsource(fn).rstrip(), "```", ""]
        held = ", ".join(r["params"]) if r["params"] else "none"
        lines += [f"Parameters held (symbols of the proof): {held}.", "",
                  f"| target | body layers | state (tokens x channels) | proof | float64 error, step 1 / {STEPS} | "
                  f"float32 error, step 1 / {STEPS} |", "|---|---|---|---|---|---|"]
        for row in r["rows"]:
            if "refused" in row:
                lines.append(f"| {row['target']} | refused: {row['refused']} | | | | |")
                continue
            e = {dt: row["runs"][dt].errors for dt in DTYPES}
            word = f"{row['verdict']} at every depth" if row["verdict"] == "PROVED" else row["verdict"]
            lines.append(f"| {row['target']} | {row['body']} | {row['state'][0]} x {row['state'][1]} | {word} | "
                         f"{_fmt(e['float64'][0])} / {_fmt(e['float64'][-1])} | {_fmt(e['float32'][0])} / "
                         f"{_fmt(e['float32'][-1])} |")
        lines += ["", f"![{r['name']}: error against the step](algorithms_{r['name']}.png)", ""]
    lines += ["## GD from five lines against the hand constructions", "",
              f"The GD example's step (least squares, {X.GD_N} x {X.GD_D}, placed on the builders' grid) compiled per "
              "target, beside the hand constructions of seed 000 App. D.3 / seed 001 Sec. 3.4-3.5 (`gd --arch`) and the "
              "catalogue's compiled GD (`constructions/compiled_gd.py`) at the same sizes. The hand and catalogue stacks "
              "also hold a query and write the prediction in an epilogue (and the causal ones hoist A^T A, A^T b into a "
              "prologue); the step of this page has neither, and holds eta in its state.", "",
              "| target | stack | name | layers (prologue, body, epilogue) | state (tokens x channels) |",
              "|---|---|---|---|---|"]
    for c in comparison:
        lines.append(f"| {c['target']} | {c['what']} | `{c['name']}` | {c['layers'][0]}, {c['layers'][1]}, "
                     f"{c['layers'][2]} | {c['state'][0]} x {c['state'][1]} |")
    lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    results = [run_example(name) for name in X.EXAMPLES]
    for r in results:
        plot(r, DOCS / f"algorithms_{r['name']}.png")
    text = render(results, gd_comparison())
    out = DOCS / "algorithms.md"
    tmp = out.with_suffix(".md.tmp")
    tmp.write_text(text)
    tmp.replace(out)
    print(f"wrote {out} and {len(results)} plots")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
