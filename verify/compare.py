"""Learned against constructed: ``python -m verify.compare --learned FILE --construction NAME --out DIR``.

The learned model is a weight file (``constructions.weights_io``) with the construction's layer
structure, or with ``--from precision-ls|zoology|icl-gd`` a peer's file read by the importer of
``python -m verify.construct import`` (``verify/importers/``; its state must be the construction's,
as ``verify.export`` writes it, or for precision-ls the construction's followed by the constant channels its
export writes, against which the construction is written with them: ``comparison.models.WithConstants``;
``--config KEY=VALUE`` as for the import), or with ``--from torch``
a ``polyverify.torch`` module's ``state_dict`` saved with ``torch.save`` (never unpickled); the report (``report.json``, ``report.md``, plots) holds (1) prediction and
layer-by-layer region differences in and out of distribution, (2) query sensitivities, (3) the
exact polynomial view, (4) invariants up to symmetry and the interpolation curve, (5) the implicit
weight vector w^l per layer, (6) both models iterated as solvers, and with ``--weights`` the
exact section identities with the residual's size.  Python API: :func:`compare`.
See docs/compare.md.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

from constructions.catalogue import gd_architectures
from polyverify.plumbing.options import config_class
from verify.comparison import (FROM_FORMATS, CompareError, Stack, build_construction, constructed_stack, functional,
                                implicit_w, interpolation, invariants, iterate, learned_stack, load_learned,
                                polynomial_view, read_learned, sample, sensitivities, weights_check)
from verify.comparison.models import WithConstants, sizes, with_file_constants, written_with_constants
from verify.comparison.seqmodel import (NOT_APPLICABLE, compare_sequence_model, is_sequence_model_file,
                                         load_sequence_model)
from verify.comparison.summary import constant_channels_line, summary_lines

SECTIONS = ("functional", "sensitivities", "polynomial", "invariants", "implicit_w", "iterate")
#: the report's own files in --out (plots beside them: write_plots)
REPORT_FILES = ("report.json", "report.md")


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
        refuted = refute_learned(con, learned)  # refute first: an exact counterexample at an integer point
        # a refuted file's residual sizes are diagnosis only (a trained file's fill minutes and GiB): time-boxed
        limit = 2 * poly_timeout if refuted is None else min(2 * poly_timeout, RESIDUAL_AFTER_REFUTATION_S)
        rep["weights"] = weights_check(con, learned, timeout=limit, memory_gb=poly_memory_gb)
        rep["weights"]["refutation"] = refuted
        if refuted is not None:  # the failure is the refutation's, never a residual's
            if not rep["weights"]["complete"]:
                rep["weights"]["reason"] = (f"{rep['weights']['reason']}: refuted first at an integer point, so the "
                                            f"residual sizes are diagnosis, given {limit:g} s at most "
                                            f"(verify/compare.py RESIDUAL_AFTER_REFUTATION_S)")
            rep["weights"]["exact"] = False
            rep["weights"]["first_residual_failure"] = rep["weights"]["first_failure"]
            rep["weights"]["first_failure"] = refuted["failure"]
        if not rep["weights"]["exact"]:  # diagnosis of a FAILED file: how far, and from what
            rep["nearest"] = nearest_of(con, learned)
    return rep


def nearest_of(con, learned: Stack) -> dict:
    """``--weights`` on a file that is not the construction: the nearest construction of ``con``'s family
    (``verify/nearest.py``: parameters fitted after the symmetries are divided out, snapped, proved) as
    JSON, with ``text`` its lines; a construction with no gd family (a catalogue entry) gets the
    entry-wise distance to ``con`` itself (``verify/weight_distance.py``)."""
    from .nearest import gd_nearest, guarded
    from .weight_distance import weight_distance

    k = learned.k
    if any(e.name == con.name for e in gd_architectures().values()):
        n, d = sizes(con)
        P = con.params  # the LSA/ELSA constructions store square roots: the family's eta and lam are their squares
        eta = P["eta"] if "eta" in P else P["sqrt_eta"] ** 2
        lam = P["lam"] if "lam" in P else (P["sqrt_lam"] ** 2 if "sqrt_lam" in P else None)
        if isinstance(con, WithConstants):  # a peer's file with constant channels: the family written with them
            near = guarded(lambda: _nearest_with_constants(con, n, d, k, eta, lam, learned.layers), con.name)
        else:
            near = guarded(lambda: gd_nearest(con, n, d, k, eta, lam, learned.layers), con.name)
        return {**near.to_json(), "text": [near.summary(), *near.lines()]}
    dist = weight_distance(con.layers(k), learned.layers)
    return {"construction": con.name, "weight_distance": dist.to_json(),
            "text": [dist.line(f"{con.name} (no family to fit: the construction itself)")]}


def _nearest_with_constants(con, n: int, d: int, k: int, eta, lam, layers):
    """``nearest.gd_nearest`` for a construction on a state with constant channels (:class:`WithConstants`):
    each member of the family written with the same constant channels (the export's rewrite), so the fit and
    the snapped proof read the learned layers in their own coordinates."""
    from fractions import Fraction

    from .importers.writing import indicator_classes
    from .nearest import channel_namer, nearest

    entry = next(e for e in gd_architectures().values() if e.name == con.name)
    used = {"eta": Fraction(eta), **({"lam": Fraction(lam or 0)} if entry.ridge else {})}

    classes = indicator_classes(con.constants)  # the file's classes of tokens (a trained module's may be finer)

    def build(**p):
        c = entry.build(n, d, **p)
        sections, own = written_with_constants(c, classes)  # a CompareError (a ValueError): the builder refuses
        w = WithConstants(c, sections, own, con.source)
        return w, w.layers(k)

    return nearest(build, used, layers, name=con.name, chan=channel_namer(con.layout), built=(con, con.layers(k)))


#: seconds the exact residual rows of ``--weights`` may take once the refutation has failed the file (they
#: only size the residual: the verdict and its counterexample are the refutation's); a file nothing refutes
#: gets twice ``--poly-timeout``.  A 20-step trained gd-baseconv 4x2 file filled 600 s and 2.3 GiB with them.
RESIDUAL_AFTER_REFUTATION_S = 30.0


def refute_learned(con, learned: Stack) -> dict | None:
    """``--weights``, first: each section of the learned stack (prologue, each distinct body copy, epilogue)
    refuted at integer points (``verify.prover.refute``: a definite failure with an exact counterexample,
    before any residual polynomial is formed); None where nothing is refuted."""
    from constructions.weights_io import same_layer
    from verify.prover.refute import refute

    seen: list[list] = []
    for j in range(max(len(learned.bodies), 1)):
        body = learned.bodies[j] if learned.bodies else []
        if any(len(b) == len(body) and all(same_layer(x, y) for x, y in zip(b, body)) for b in seen):
            continue
        seen.append(body)
        r = refute(con, learned.sections(j))
        if r is not None:
            text = r.failure.describe()
            return {"body_copy": j, "section": r.failure.section, "ring": r.ring, "seconds": r.seconds,
                    "failure": (f"body copy {j}: " if j and r.failure.section == "body" else "") + text,
                    "details": r.to_json()["failure"]}  # the counterexample, the entry and both exact values
    return None


def compare_model(con, m, *, problems: int = 32, sigmas=(1.0, 4.0), kappas=(5.0, 20.0), scales=(1.0, 2.0),
                  iters: int = 100, iter_sigmas=(0.25, 1.0, 4.0, 16.0), skip=(), seed: int = 0,
                  poly_timeout: float = 300.0, poly_memory_gb: float | None = 8.0) -> dict:
    """The report for a trained ``numerics.training`` SequenceModel on the gradient task
    (``verify.comparison.seqmodel``): the sections that do not need the construction's layout."""
    sets = problem_sets(con, problems=problems, sigmas=sigmas, kappas=kappas, scales=scales, seed=seed)
    iter_sets = [sample(con, problems, sigma=s, seed=seed + 7 + i, label=f"sigma={s:g}")
                 for i, s in enumerate(iter_sigmas)]
    return compare_sequence_model(m, con, sets, iter_sets, iters=iters, skip=skip, poly_timeout=poly_timeout,
                                  poly_memory_gb=poly_memory_gb)


def write_report(rep: dict, out: Path) -> list[str]:
    from verify.comparison.figures import write_plots

    from polyverify.plumbing.cli import atomic_write_text, make_folder, report_json

    make_folder(out)
    atomic_write_text(out / "report.json", report_json(rep))
    atomic_write_text(out / "report.md", "\n".join(summary_lines(rep)) + "\n")
    return list(REPORT_FILES) + write_plots(rep, out)


# ------------------------------------------------------------------ CLI

#: the names ``--construction`` accepts: the gd constructions and the catalogue constructions
#: whose variables are a least-squares problem (A, b, x, q) or seed 004 tokens (X, y, xt, w)
#: every gd architecture of the registry, and the catalogue entries with least-squares variables
#: (a test checks this is exactly what build_construction can compare)
CONSTRUCTIONS = tuple(sorted({e.name for e in gd_architectures().values()} | {"s004-gd"}))

#: the limits of ``python -m verify.compare`` (refused beyond them, before any work)
LIMITS = {"max_n": 1_024, "max_d": 256, "max_problems": 4_096, "max_iters": 10_000, "max_values": 16}
#: the limits with ``--allow-large``
LARGE_LIMITS = {"max_n": 16_384, "max_d": 4_096, "max_problems": 100_000, "max_iters": 1_000_000, "max_values": 256}
_LIMIT_FLAGS = {"max_n": "--n", "max_d": "--d", "max_problems": "--problems", "max_iters": "--iters",
                "max_values": "values in each of --sigmas, --kappas, --scales, --iter-sigmas"}


def _floats(s: str):
    try:
        vals = tuple(float(x) for x in s.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of numbers: {s!r}") from None
    twice = next((v for i, v in enumerate(vals) if v in vals[:i]), None)
    if twice is not None:  # a list that silently shrinks (or runs one cell twice) is not the list asked for
        raise argparse.ArgumentTypeError(f"{twice:g} is given twice in {s!r}; give each value once")
    return vals


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter without line breaks inside hyphenated names (gd-baseconv-causal, --allow-large)."""

    def _split_lines(self, text, width):
        import textwrap

        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)

    def _fill_text(self, text, width, indent):
        import textwrap

        return textwrap.fill(" ".join(text.split()), width, initial_indent=indent, subsequent_indent=indent,
                             break_on_hyphens=False)


def build_parser():
    from polyverify.plumbing.cli import Parser

    lims = "; ".join(f"{_LIMIT_FLAGS[k]} <= {LIMITS[k]} ({LARGE_LIMITS[k]} with --allow-large)" for k in LIMITS)
    ap = Parser(prog="python -m verify.compare", description=__doc__.splitlines()[0], formatter_class=_HelpFormatter,
                epilog=f"Limits (refused beyond them, exit 2, before any work): {lims}. "
                       "Exit status: 0 report written, 2 bad input (one line on stderr).")
    ap.add_argument("--learned", required=True,
                    help="the learned model: a safetensors weight file (constructions.weights_io format, "
                         "or a numerics.training SequenceModel export), or a file of --from's format")
    ap.add_argument("--from", dest="from_format", default="polyverify", choices=FROM_FORMATS,
                    help="the learned file's format: polyverify (default), a peer's (precision-ls, zoology, icl-gd: "
                         "read by the importer of python -m verify.construct import, in the construction's own "
                         "state) or torch (a polyverify.torch module's state_dict saved with torch.save)")
    ap.add_argument("--config", default=None, metavar="KEY=VALUE[,KEY=VALUE]", action="append",
                    help="a setting of the peer's model that the file does not hold (as for the import: "
                         "num_heads=2, causal=true); repeatable")
    ap.add_argument("--construction", required=True, metavar="NAME",
                    help=f"the construction to compare with: {', '.join(CONSTRUCTIONS)}")
    ap.add_argument("--n", type=int, default=None, help="problem size N (default: from the file)")
    ap.add_argument("--d", type=int, default=None, help="problem size D (default: from the file)")
    ap.add_argument("--eta", default=None, help="construction step size, an exact rational (default: the builder's)")
    ap.add_argument("--out", required=True,
                    help="output folder (created if missing; report.json, report.md and the plots)")
    ap.add_argument("--problems", type=int, default=32, help="random problems in each problem set (default 32)")
    ap.add_argument("--sigmas", type=_floats, default=(1.0, 4.0),
                    help="comma-separated scales of the true solution, each >= 0 (default 1,4)")
    ap.add_argument("--kappas", type=_floats, default=(5.0, 20.0),
                    help="comma-separated condition numbers of A, each >= 1 (default 5,20)")
    ap.add_argument("--scales", type=_floats, default=(1.0, 2.0),
                    help="comma-separated input scales, each > 0 (default 1,2)")
    ap.add_argument("--iters", type=int, default=100,
                    help="iterations of both models as solvers, >= 0 (default 100)")
    ap.add_argument("--iter-sigmas", type=_floats, default=(0.25, 1.0, 4.0, 16.0),
                    help="comma-separated solution scales of the solver runs, each >= 0 (default 0.25,1,4,16)")
    ap.add_argument("--skip", default="", help=f"comma-separated sections to skip: {', '.join(SECTIONS)}")
    ap.add_argument("--weights", action="store_true", help="exact section identities with residual sizes")
    ap.add_argument("--poly-timeout", type=float, default=300.0,
                    help="seconds for each exact symbolic part (body, prediction; --weights gets twice this)")
    ap.add_argument("--poly-memory-gb", type=float, default=8.0, help="address-space limit of the exact parts")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random problems (default 0)")
    ap.add_argument("--allow-large", action="store_true",
                    help="raise the limits to " + ", ".join(f"{_LIMIT_FLAGS[k]} {v}" for k, v in LARGE_LIMITS.items()
                                                           if k != "max_values") + f", {LARGE_LIMITS['max_values']} "
                         "values per list")
    return ap


#: the command's options, typed: one frozen dataclass built by the command line (``from_args``) and by
#: a sweep cell (``from_mapping``) alike, its fields and defaults those of :func:`build_parser`
CompareOptions = config_class(build_parser(), "CompareOptions", module=__name__,
                              doc="The options of python -m verify.compare, typed (fields and defaults: build_parser()).")


def _check_learned(path: str, fmt: str = "polyverify") -> None:
    """The learned file exists and (``polyverify``) is a safetensors file (before its contents are
    looked at; another format's file is read by :func:`_read_peer`)."""
    from polyverify.plumbing.cli import UsageError, one_line

    from .cli_common import input_file

    p = Path(input_file("--learned", path))  # missing, a folder, /dev/zero, a FIFO: said as what it is
    if fmt != "polyverify":
        return
    try:
        from safetensors import safe_open

        with safe_open(str(p), framework="numpy") as f:
            f.metadata()
    except Exception as e:  # noqa: BLE001 - whatever the reader says, it is not a safetensors file
        raise UsageError(f"--learned {path}: not a safetensors file ({one_line(e)})") from None


def _settings(a) -> dict:
    """``--config`` as a dict (each item ``KEY=VALUE``, or several joined by commas: a sweep cell's
    list); only with a peer's ``--from``."""
    from polyverify.plumbing.cli import UsageError

    from .importers.common import ImportRefused, parse_settings

    items = a.config or []
    if isinstance(items, str):
        items = [items]
    pairs = [p for item in items for p in str(item).split(",") if p.strip()]
    if pairs and a.from_format not in ("precision-ls", "zoology", "icl-gd"):
        raise UsageError(f"--config: a {a.from_format} file carries its own settings (--config is for --from "
                         f"precision-ls, zoology or icl-gd)")
    try:
        return parse_settings(pairs, "--config")
    except ImportRefused as e:
        raise UsageError(str(e)) from None


def _read_peer(a):
    """A ``--from`` file other than ``polyverify``, read before any work (one line for what its format's
    reader refuses)."""
    from polyverify.plumbing.cli import UsageError

    try:
        return read_learned(a.learned, a.from_format, _settings(a))
    except CompareError as e:
        raise UsageError(f"--learned {str(e).splitlines()[0]}") from None


def _check_args(a, n, d) -> None:
    from polyverify.plumbing.cli import UsageError, check_range

    lim = LARGE_LIMITS if a.allow_large else LIMITS
    more = None if a.allow_large else "--allow-large"
    if a.from_format not in FROM_FORMATS:
        raise UsageError(f"--from: unknown format {a.from_format!r}; choose one of {', '.join(FROM_FORMATS)}")
    _settings(a)
    if a.construction not in CONSTRUCTIONS:
        raise UsageError(f"--construction: unknown construction {a.construction!r}; choose one of "
                         f"{', '.join(CONSTRUCTIONS)}")
    skip = tuple(s for s in a.skip.split(",") if s)
    bad = [s for s in skip if s not in SECTIONS]
    if bad:
        raise UsageError(f"--skip: unknown section(s) {', '.join(bad)}; sections are {', '.join(SECTIONS)}")
    for flag, v, key in (("--n", n, "max_n"), ("--d", d, "max_d")):
        if v is not None:
            check_range(flag, v, 1, lim[key], override=more)
    check_range("--problems", a.problems, 1, lim["max_problems"], override=more)
    check_range("--iters", a.iters, 0, lim["max_iters"], override=more)
    for flag, vals, lo in (("--sigmas", a.sigmas, 0.0), ("--kappas", a.kappas, 1.0), ("--scales", a.scales, None),
                           ("--iter-sigmas", a.iter_sigmas, 0.0)):
        check_range(f"number of values in {flag}", len(vals), None, lim["max_values"], override=more)
        for v in vals:
            check_range(flag, v, lo)
            if lo is None and v <= 0:
                raise UsageError(f"{flag} must be > 0, got {v}")
    for flag, v in (("--poly-timeout", a.poly_timeout), ("--poly-memory-gb", a.poly_memory_gb)):
        check_range(flag, v, None)
        if v <= 0:
            raise UsageError(f"{flag} must be > 0, got {v}")
    check_range("--seed", a.seed, 0)


def _report_folder(path):
    """``--out``, checked before the work (polyverify.plumbing.cli.output_dir), and the report's own files in
    it claimed as outputs: a --learned file there (``--out d --learned d/report.json``) is refused."""
    from polyverify.plumbing.cli import output_dir, output_file

    out = output_dir("--out", path)
    for name in REPORT_FILES:
        output_file("--out", out / name)
    return out


def _check_memory(a, n: int, d: int, state_size: int = 0, layers: int = 0) -> None:
    """Refuse a comparison whose problems (and, once the construction is known, kept states)
    would not fit in memory: an estimate, before the work."""
    from polyverify.plumbing.cli import check_memory

    n_sets = (1 + sum(s != 1.0 for s in a.sigmas) + sum(k != 5.0 for k in a.kappas)
              + sum(c != 1.0 for c in a.scales) + len(a.iter_sigmas))
    problems = 8.0 * a.problems * (n * d + n + 3 * d) * n_sets
    states = 8.0 * a.problems * state_size * (layers + 2) * 2  # learned and constructed, every layer kept
    check_memory(f"--problems {a.problems} at N={n}, D={d}", problems + states)


def _main(argv) -> int:
    return run(CompareOptions.from_args(build_parser().parse_args(argv)))


def run(a: CompareOptions) -> int:
    """One comparison from the command's typed options: checked before any work, then the report."""
    from polyverify.plumbing.cli import UsageError

    _check_args(a, a.n, a.d)
    _check_learned(a.learned, a.from_format)
    peer = _read_peer(a) if a.from_format != "polyverify" else None
    seq = peer is None and is_sequence_model_file(a.learned)
    n, d = a.n, a.d
    if (n is None or d is None) and not seq:
        fn, fd = _file_sizes(a.learned) if peer is None else (None, None)  # a peer's sizes are its model's
        n, d = n or fn, d or fd
        if n is None or d is None:
            raise UsageError(f"--learned {a.learned}: the file does not record N and D "
                             + ("(no toolkit construction metadata)" if peer is None else
                                f"(the {a.from_format} file holds its model's weights, not the problem's size)")
                             + "; give --n and --d")
        _check_args(a, n, d)
    if n is not None and d is not None:
        _check_memory(a, n, d)
    skip = tuple(s for s in a.skip.split(",") if s)
    try:
        from polyverify.plumbing.rational import parse_rational

        eta = {"eta": parse_rational(a.eta, "--eta")} if a.eta else {}  # bounded: a RationalError is a ValueError
        if seq:
            m = load_sequence_model(a.learned)
            if (a.n or m.n, a.d or m.d) != (m.n, m.d):
                raise CompareError(f"{a.learned}: the model was trained at N={m.n}, D={m.d}, not --n {a.n} --d {a.d}")
            _check_args(a, m.n, m.d)
            con = build_construction(a.construction, m.n, m.d, **eta)
            _check_memory(a, m.n, m.d, con.state_size, len(m.layers))
            out = _report_folder(a.out)  # refused before the work; created when the report is written
            rep = compare_model(con, m, problems=a.problems, sigmas=a.sigmas, kappas=a.kappas, scales=a.scales,
                                iters=a.iters, iter_sigmas=a.iter_sigmas, skip=skip, seed=a.seed,
                                poly_timeout=a.poly_timeout, poly_memory_gb=a.poly_memory_gb)
            if a.weights:
                rep["weights_reason"] = "--weights needs the construction's layout (" + NOT_APPLICABLE + ")"
        else:
            con = build_construction(a.construction, n, d, **eta)
            if peer is not None:  # a precision-ls export's constant channels (issue 44 item 4): con written with them
                con = with_file_constants(peer, con)
            learned = load_learned(a.learned, con) if peer is None else learned_stack(peer, con)
            _check_memory(a, n, d, con.state_size, len(learned.layers))
            out = _report_folder(a.out)  # refused before the work; created when the report is written
            rep = compare(con, learned, problems=a.problems, sigmas=a.sigmas, kappas=a.kappas, scales=a.scales,
                          iters=a.iters, iter_sigmas=a.iter_sigmas, weights=a.weights, skip=skip, seed=a.seed,
                          poly_timeout=a.poly_timeout, poly_memory_gb=a.poly_memory_gb)
        rep["learned_file"] = str(a.learned)
        rep["learned_from"] = peer.describe() if peer is not None else {"format": a.from_format}
        if isinstance(con, WithConstants):  # the state's constant channels: their values and where they were read
            rep["learned_from"]["constant_channels"] = con.describe_constants()
        try:
            files = write_report(rep, out)
        except OSError as e:  # checked up front; a file system can still refuse (full, read-only)
            raise UsageError(f"--out {a.out}: cannot write the report ({e.strerror or type(e).__name__})") from None
    except (CompareError, ValueError) as e:
        raise UsageError(str(e).splitlines()[0] if str(e) else type(e).__name__) from None
    print("\n".join(summary_lines(rep)[:1]))
    if constant_channels_line(rep):  # the state the file was read in (its constant channels, and their source)
        print(constant_channels_line(rep))
    w = rep.get("weights")
    if w and not w["exact"] and w.get("first_failure"):  # the file's verdict, then how far it is
        near = rep.get("nearest") or {}
        print(f"weights: FAILED ({w['first_failure'].splitlines()[0]})"
              + (f"; {near['text'][0]}" if near.get("text") else ""))
        for line in (near.get("text") or [])[1:]:
            print("  " + line)
    print(f"wrote {', '.join(files)} to {a.out}")
    return 0


def main(argv=None) -> int:
    from polyverify.plumbing.cli import run_main

    return run_main(_main, argv)


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


# ------------------------------------------------------------------ sweeps (numerics.sweep)

#: flags a sweep cell cannot set (the sweep owns the output folder)
_NOT_IN_CELLS = {"out", "help"}


def cell_keys() -> list[str]:
    """A comparison cell's config keys: this command's options (their ``dest``), less the output folder."""
    return [f.name for f in dataclasses.fields(CompareOptions) if f.name not in _NOT_IN_CELLS]


def _cell_args(config: dict, where: str) -> CompareOptions:
    """A cell's config as the command's typed options, checked as the command line is (the learned
    file exists and is a safetensors file; the deeper checks run in the cell)."""
    from polyverify.plumbing.cli import UsageError

    for k in ("learned", "construction"):
        if k not in config:
            raise UsageError(f"{where}: the config needs {k!r}")
    a = CompareOptions.from_mapping(config, where=where, exclude=_NOT_IN_CELLS)
    try:
        _check_args(a, a.n, a.d)
        _check_learned(a.learned, a.from_format)
    except UsageError as e:
        raise UsageError(f"{where}: {e}") from None
    return a


def sweep_check(config: dict, *, allow_large: bool = False, where: str = "cell") -> dict:
    """One comparison's config checked as this command checks its command line (the learned
    file exists and is a safetensors file; the deeper checks run in the cell), with the learned
    file's absolute path and every option's value."""
    config = dict(config)
    if allow_large and "allow_large" not in config:
        try:
            _cell_args(config, where)
        except Exception:  # noqa: BLE001 -- retried with the limits lifted
            config["allow_large"] = True
    if "learned" in config:
        config["learned"] = str(Path(str(config["learned"])).resolve())
    a = _cell_args(config, where)
    full = {}
    for k in cell_keys():
        v = getattr(a, k)
        if v is None or v is False or v == "" or (k == "from_format" and v == "polyverify"):
            continue  # the default format is left out: a cell's config (and id) is what it was before --from
        full[k] = ",".join(f"{x:g}" for x in v) if isinstance(v, tuple) else v
    return full


def sweep_cell(config: dict) -> dict:
    """One ``python -m verify.compare`` run; the report (report.json, report.md, plots) goes to the
    cell's folder (a temporary one outside a sweep).  Returns the predictions' differences per
    problem set and, where computed, the iterated solvers' final errors."""
    import contextlib
    import io
    import tempfile

    from polyverify.sweep import cell_dir

    a = _cell_args(config, "cell")
    with contextlib.ExitStack() as stack:
        out = cell_dir() or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        with contextlib.redirect_stdout(io.StringIO()):
            rc = run(dataclasses.replace(a, out=str(out)))
        rep = json.loads((out / "report.json").read_text())
    res = {"construction": rep.get("construction"), "n": rep.get("n"), "d": rep.get("d"), "k": rep.get("k"),
           "layers": rep.get("layers"), "exit_status": rc,
           "report": str(out / "report.json") if cell_dir() is not None else None}
    fn = rep.get("functional") or {}
    for r in fn.get("predictions") or []:
        res.setdefault("prediction_relative_rms", {})[r["set"]] = r.get("relative_rms")
        res.setdefault("prediction_max_abs", {})[r["set"]] = r.get("max_abs")
    return res


def _sweep_arguments(g) -> None:
    g.add_argument("--learned", required=True,
                   help="learned weight files: comma-separated paths, glob patterns (quote them) or folders "
                        "(every *.safetensors below them)")
    g.add_argument("--constructions", "--construction", dest="constructions", default="gd-baseconv",
                   help=f"constructions to compare each file with: {', '.join(CONSTRUCTIONS)} (default gd-baseconv)")
    g.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="any other option of python -m verify.compare for every cell, e.g. --set problems=8 "
                        "--set iters=20 --set skip=polynomial (a bare KEY sets a flag such as weights)")


def _learned_files(spec: str) -> list[str]:
    import glob

    from polyverify.plumbing.cli import UsageError

    files: list[str] = []
    for item in (t.strip() for t in spec.split(",")):
        if not item:
            raise UsageError(f"--learned: empty item in {spec!r}")
        p = Path(item)
        if p.is_dir():
            found = sorted(str(q) for q in p.rglob("*.safetensors"))
        elif any(ch in item for ch in "*?["):
            found = sorted(glob.glob(item, recursive=True))
        else:
            found = [item]
        if not found:
            raise UsageError(f"--learned {item}: no weight file matches")
        files += found
    return list(dict.fromkeys(str(Path(f).resolve()) for f in files))


def _sweep_configs(a) -> list[dict]:
    from polyverify.sweep import product, split_list

    from polyverify.plumbing.cli import UsageError

    keys = cell_keys()
    fixed: dict = {}
    for item in a.set:
        k, eq, v = item.partition("=")
        k = k.strip().replace("-", "_")
        if k not in keys or k in ("learned", "construction"):
            raise UsageError(f"--set {item}: not an option of python -m verify.compare a sweep can set")
        fixed[k] = v if eq else True
    grid = product(learned=_learned_files(a.learned),
                   construction=split_list("--constructions", a.constructions, allow_large=a.allow_large))
    return [{**c, **fixed} for c in grid]


SWEEP = SimpleNamespace(
    description="Comparison sweep: verify.compare for every learned weight file x construction (one cell each, "
                "checked as python -m verify.compare checks its command line); each report in cells/<id>/.",
    cell="verify.compare:sweep_cell", add_arguments=_sweep_arguments, configs=_sweep_configs, check=sweep_check)


if __name__ == "__main__":
    from polyverify.plumbing.cli import exit_with

    exit_with(main)
