"""``python -m numerics.roundoff``: roundoff of a GD construction across depth, dtype and backend.

    python -m numerics.roundoff CONSTRUCTION --layers 31,301 [--dtypes float64,float32,bfloat16,float16]
        [--backend torch[,numpy,cupy]] [--device cpu|cuda] [--conv direct[,fft]]
        [--kappa 5[,10]] [--sigma 1[,100]] [--eta 1/16|auto] [--lam 0]
        [--batch 64] [--n 20] [--d 5] [--seed 0] [--digits 50]
        [--layer-ref 2] [--layer-ref-layers 40] [--out DIR] [--quiet] [--allow-large]

``CONSTRUCTION`` is a ``gd`` architecture of the registry (``constructions.catalogue``: baseconv,
baseconv-causal, lsa, elsa) or a construction name (gd-baseconv, ...).

For every combination of backend x dtype x convolution method x kappa x sigma
it runs the stack to the largest ``--layers`` (streaming: one state in memory,
whatever the depth) on ``--batch`` problems of seed 000 Sec. 3.2
(``numerics.problems.sample_ls``; sigma is the out-of-distribution target
scale of D_OOD^b(sigma)) and measures, after every GD step:

* MSE and max relative error of the iterate against **exact GD** from the same
  float inputs converted exactly (``numerics.reference.gd_reference`` in mpfr,
  precision raised until the float64 rounding is stable);
* bits of error (Herbie: log2(1 + ulps) against the correctly rounded exact
  iterate, ``numerics.error_measures``);
* the same for **plain GD** run in the same backend and dtype, and the ratio
  of the two MSEs: the construction's overhead over the algorithm's own
  roundoff;
* the **data deviation**: how far the carried inputs (A and b, read back from
  their regions of the layout) drift from their initial values;
* at each requested depth, the prediction ``q^T x`` after the epilogue;

and, for a few problems and the first layers, the **layer-level reference**
(``numerics.layer_reference``): the error each layer commits given the float
state it was fed, and the cumulative error of the whole state.  The first
layer whose output holds a non-finite value is reported (and the run of that
configuration stops there) instead of failing.

Writes ``DIR/roundoff.json`` and PNG plots (``numerics.roundoff_plots``): MSE against
depth, one line per dtype, plain GD dashed, each file written atomically.
Exit status 0, or 2 on bad input (a one-line message), checked before any
work: every list and number, the sizes against ``LIMITS``, the estimated
memory and mpfr work (``estimate_cost``) -- ``--allow-large`` lifts those --
and ``--out``.  Progress: a bar on a terminal, plain lines in a log.

Rooms: this module is the command (the run of every configuration, the report, the plots);
``numerics.roundoff_config`` its typed config (:class:`RoundoffConfig`, built by the command line
and by a sweep cell alike), limits and checks; ``numerics.roundoff_run`` the streaming run and the
metrics; ``numerics.roundoff_sweep`` the sweep adapter (``SWEEP``).
"""
from __future__ import annotations

import contextlib
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

from polyverify.plumbing.cli import atomic_path, atomic_write_text, report_json, run_main
from polyverify.plumbing.cli import progress as progress_reporter

from .roundoff_config import (ALLOW, CONV_METHODS, DIGITS_RANGE, LIMITS, MAX_SEED, MEMORY_LIMIT,  # noqa: F401
                              RoundoffConfig, RoundoffPlan, build_parser, estimate_cost, given_fields, plan)
from .roundoff_run import (auto_eta, build, clean, data_regions, print_record, reference, resolve,  # noqa: F401
                           run_config, stream)


@contextlib.contextmanager
def _atomic_figure(path: Path):
    """A temporary path with ``path``'s suffix (matplotlib reads the format from it) in its folder,
    renamed over ``path`` once the figure is complete (``polyverify.plumbing.cli.atomic_path``)."""
    with atomic_path(path) as tmp:
        fig = tmp.with_name(tmp.name + path.suffix)
        try:
            yield fig
            fig.replace(tmp)
        finally:
            with contextlib.suppress(OSError):
                fig.unlink()


def main(argv=None, out=None) -> int:
    return run_main(lambda av: _main(av, out), argv)


def parse(argv, *, create_out: bool = True) -> RoundoffPlan:
    """The command line as a typed config, checked and resolved before any work."""
    return plan(RoundoffConfig.from_args(build_parser().parse_args(argv)), create_out=create_out,
                given=given_fields(argv))


def _main(argv, out) -> int:
    out = out or sys.stdout
    p = parse(argv)
    t_start = time.perf_counter()
    bar = progress_reporter(p.total_steps(), p.entry.name, enabled=not p.config.quiet, unit="step", leave=False)
    runs, layer_runs = compute(p, out, bar)
    bar.close()
    plots = write_plots(p, runs, layer_runs, p.outdir)
    report = make_report(p, runs, layer_runs, plots, list(sys.argv[1:] if argv is None else argv),
                         time.perf_counter() - t_start)
    path = p.outdir / "roundoff.json"
    atomic_write_text(path, report_json(clean(report), default=None))
    print(f"report written to {path}; plots: {', '.join(Path(f).name for f in plots)}", file=out)
    return 0


def _layer_level_run(p: RoundoffPlan, con, v: dict, k: int, be, conv: str, kappa: float, sigma: float) -> dict:
    """The layer-level reference of the first ``--layer-ref`` problems of one configuration."""
    from .layer_reference import layer_level, summarize

    c = p.config
    vs = {kk: t[:min(c.layer_ref, c.batch)] for kk, t in v.items()}
    lr = layer_level(con, vs, k, be, conv_method=conv, digits=c.digits, max_layers=c.layer_ref_layers)
    lrj = lr.to_json()
    lrj.update({"backend": be.name, "device": be.device, "conv": conv, "kappa": kappa,
                "sigma": sigma, "summary": summarize(lr, con)})
    return lrj


def _announce(p: RoundoffPlan, kappa: float, out) -> None:
    con, eta, ks = p.runs[kappa]
    k = max(ks)
    if eta * Fraction(kappa) ** 2 >= 2:
        print(f"warning: eta*kappa^2 = {float(eta * Fraction(kappa) ** 2):g} >= 2 at kappa={kappa:g}: exact GD "
              f"diverges (use --eta auto)", file=out)
    c = p.config
    print(f"{con.name}: {con.reference}\n  kappa={kappa:g}, eta={eta}, depth {con.depth(k)} = "
          f"{len(con.prologue)} + {len(con.body)} x {k} + {len(con.epilogue)}; state {con.layout.shape}; "
          f"N={c.n}, D={c.d}, batch {c.batch}", file=out)


def compute(p: RoundoffPlan, out, bar) -> tuple[list[dict], list[dict]]:
    """Every configuration of a checked plan (:func:`parse`): the run records and the
    layer-level records, each configuration's lines printed to ``out``; nothing written."""
    from .problems import sample_ls

    c = p.config
    for s in p.skipped:
        print(f"skipped {s}", file=out)
    runs, layer_runs = [], []
    for kappa in p.config.kappas:
        con, eta, ks = p.runs[kappa]
        k = max(ks)
        checkpoints = sorted(set(ks))
        _announce(p, kappa, out)
        for sigma in p.config.sigmas:
            P = sample_ls(c.batch, c.n, c.d, kappa=kappa, sigma=sigma, seed=c.seed)
            q = np.random.default_rng(c.seed + 1).standard_normal((c.batch, c.d))
            refs: dict[str, dict | None] = {}
            first = True
            for be in p.pairs:
                v = {"A": be.round_input(P.A), "b": be.round_input(P.b), "x": be.round_input(P.x0),
                     "q": be.round_input(q)}
                finite = all(np.all(np.isfinite(t)) for t in v.values())
                if be.dtype not in refs:
                    refs[be.dtype] = reference(v, eta, p.lam, k, c.digits, v["q"]) if finite else None
                ref = refs[be.dtype]
                for conv in p.config.convs:
                    bar.set_postfix_str(f"{be.name}/{be.dtype}/{conv} kappa={kappa:g} sigma={sigma:g}")
                    rec = run_config(con, v, v["q"], ref, k, be, conv, checkpoints, eta, p.lam, bar)
                    rec.update({"kappa": kappa, "sigma": sigma, "eta": str(eta),
                                "reference_digits": None if ref is None else ref["digits"]})
                    if first:
                        print(f"sigma={sigma:g}:", file=out)
                        first = False
                    print_record(rec, out)
                    runs.append(rec)
                    if c.layer_ref and finite:
                        layer_runs.append(_layer_level_run(p, con, v, k, be, conv, kappa, sigma))
                    # the step count of a stopped run still advances the bar
                    done = rec["first_nonfinite"] is not None and rec["first_nonfinite"]["layer"] >= 0
                    if done or rec["per_step"] is None:
                        stopped = (rec["first_nonfinite"].get("step") or 0) if done else 0
                        bar.update(max(0, k - stopped))
    return runs, layer_runs


def write_plots(p: RoundoffPlan, runs: list[dict], layer_runs: list[dict], outdir: Path) -> list[str]:
    """One error-vs-depth plot per (backend, conv, kappa, sigma), one line per dtype, and the
    layer-level plot where there is a layer-level run; each written atomically."""
    from . import roundoff_plots

    plots = []
    for kappa in p.config.kappas:
        con, eta, _ = p.runs[kappa]
        for sigma in p.config.sigmas:
            group = [r for r in runs if r["kappa"] == kappa and r["sigma"] == sigma]
            for key in sorted({(r["backend"], r["conv"]) for r in group}):
                sel = [r for r in group if (r["backend"], r["conv"]) == key]
                tag = f"{key[0]}_{key[1]}_kappa{kappa:g}_sigma{sigma:g}"
                title = f"{con.name}: {key[0]}, {key[1]} conv, kappa={kappa:g}, sigma={sigma:g}, eta={eta}"
                path = outdir / f"mse_{tag}.png"
                with _atomic_figure(path) as tmp:
                    roundoff_plots.error_vs_depth(sel, tmp, title=title)
                plots.append(str(path))
                lsel = [r for r in layer_runs if (r["backend"], r["conv"], r["kappa"], r["sigma"])
                        == (key[0], key[1], kappa, sigma)]
                if lsel:
                    lpath = outdir / f"layers_{tag}.png"
                    with _atomic_figure(lpath) as tmp:
                        roundoff_plots.layer_errors(lsel, tmp, title=f"{con.name}: per-layer error ({tag})")
                    plots.append(str(lpath))
    return plots


def make_report(p: RoundoffPlan, runs, layer_runs, plots, argv, seconds) -> dict:
    c = p.config
    con0 = p.runs[p.config.kappas[0]].con
    return {"command": "roundoff", "argv": argv,
            "construction": con0.summary(), "arch": p.entry.arch, "layers": list(p.config.layers),
            "n": c.n, "d": c.d, "batch": c.batch, "seed": c.seed, "lam": str(p.lam),
            "eta": {f"{k:g}": str(r.eta) for k, r in p.runs.items()},
            "data_regions": [{"label": lab, "region": reg, "scale": str(sc), "baseline": b}
                             for lab, reg, sc, b in data_regions(con0)],
            "skipped": p.skipped, "runs": runs, "layer_level": layer_runs, "plots": plots,
            "seconds": seconds}


# the sweep adapter (numerics.sweep), by the names the sweep and its records use ("numerics.roundoff:sweep_cell")
from .roundoff_sweep import SWEEP, sweep_cell, sweep_check  # noqa: E402, F401

if __name__ == "__main__":
    from polyverify.plumbing.cli import exit_with

    exit_with(main)
