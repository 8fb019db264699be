"""``python -m verify.construct NAME``: build and prove a catalogue entry (the proof in a child
process under ``--proof-memory-gib`` and ``--proof-timeout``, as every proof of the CLIs:
:mod:`verify.bounded`)."""
from __future__ import annotations


from polyverify.plumbing.cli import atomic_write_text, output_file, report_json

from . import bounded
from .cli_common import (UsageError, add_check_arguments, add_export_arguments, call_check, check_check_arguments,
                         holds, print_proof, verdict_of)

# Light at import (numpy, the proof and the catalogue's modules are imported where the work
# starts): ``python -m verify.construct NAME --help`` and NAME's argument errors read the entry
# from the catalogue's manifest (constructions.catalogue.EntryInfo).

def check(obj):
    """``verify.prover.proof.check`` (imported when called: this module stays light to import), refuting
    first (``verify/prover/refute.py``: a wrong entry is FAILED with an exact counterexample at an integer
    point before any ring is built)."""
    from .prover.proof import check as prove_item

    return prove_item(obj, refute=True)


#: the largest value ``--set`` accepts for a size without --allow-large (the exact proofs
#: grow polynomially in the sizes; every entry proves in seconds at its defaults)
MAX_SIZE = 64
MAX_SEED = 2**32 - 1


def parse_sets(pairs: list[str] | None, entry, allow_large: bool = False) -> dict:
    """The sizes of ``entry`` (a CatalogueEntry or its EntryInfo) with ``--set KEY=VALUE`` applied,
    each checked; see :func:`parse_settings` for the parameters too."""
    return parse_settings(pairs, entry, allow_large)[0]


def parse_settings(pairs: list[str] | None, entry, allow_large: bool = False) -> tuple[dict, dict]:
    """``(sizes, params)`` of ``entry`` with ``--set KEY=VALUE`` applied: a size is an integer in
    ``0..MAX_SIZE`` (more with ``allow_large``), a parameter (``entry.params``: the builder's exact
    scalars, eta, lam, gamma, ...) an exact rational (``1/64``, ``0.25``, ``3``; digits and exponent
    bounded before parsing).  Only the parameters given are returned: the others keep the builder's
    defaults."""
    from polyverify.plumbing.rational import RationalError, parse_rational

    sizes = dict(entry.sizes)
    params_known = dict(getattr(entry, "params", {}) or {})
    params: dict = {}
    given: set = set()
    for p in pairs or []:
        if "=" not in p:
            raise UsageError(f"--set expects key=value, got {p!r}")
        k, val = p.split("=", 1)
        if k in given:  # the last would win silently (import refuses it too)
            raise UsageError(f"--set {k} given twice; give each size once")
        given.add(k)
        if k in params_known:
            try:
                params[k] = parse_rational(val, f"--set {k}=")
            except RationalError as e:
                raise UsageError(str(e)) from None
            continue
        if k not in sizes:
            known = sorted(sizes) + sorted(params_known)
            raise UsageError(f"{entry.name} has no size or parameter {k!r}; it takes "
                             f"{', '.join(known) or 'none'}")
        try:
            sizes[k] = int(val)
        except ValueError:
            raise UsageError(f"--set {k}= needs an integer, got {val!r}") from None
        if sizes[k] < 0:
            raise UsageError(f"--set {k}= must be >= 0, got {sizes[k]}")
        hi = MAX_SEED if k == "seed" else MAX_SIZE
        if sizes[k] > hi and not (allow_large and k != "seed"):
            raise UsageError(f"--set {k}={sizes[k]} exceeds the limit {hi}"
                             + (" (pass --allow-large to allow more)" if k != "seed" else ""))
    return sizes, params


def export_k(a, obj, name: str) -> int | None:
    """``--k``: the body copies ``--export`` writes (None: the export's default, one), checked before any
    work: only with --export, within 1..the weight files' layer limit, and only for a construction with a
    body to repeat."""
    k = getattr(a, "k", None)
    if k is None:
        return None
    from constructions.weights_io import MAX_LAYERS

    if getattr(a, "export", None) is None:
        raise UsageError("--k applies only with --export (the proof covers every depth)")
    if not 1 <= k <= MAX_LAYERS:
        raise UsageError(f"--k must be in 1..{MAX_LAYERS}, got {k}")
    if k != 1 and not getattr(obj, "body", None):
        raise UsageError(f"--k {k}: {name} has no body to repeat")
    return k


def describe_built(obj) -> dict:
    from constructions.base import Construction

    if isinstance(obj, Construction):
        return {"kind": "construction", "layers": {"prologue": len(obj.prologue), "body": len(obj.body),
                                                    "epilogue": len(obj.epilogue)},
                "depth_formula": f"{len(obj.prologue) + len(obj.epilogue)} + {len(obj.body)}*k",
                "state_shape": list(obj.layout.shape), "state_size": obj.state_size}
    return {"kind": "identity"}


def random_check(run, a, name: str):
    """``run()``, a randomized identity test, under the CLIs' limits (``call_check``); a construction
    the test cannot take is one line naming ``name`` (the circuit of ``verify.construct`` and ``gd``)."""
    from .prover.randomized import RandomizedUnsupported

    try:
        return call_check(run, a, name)
    except RandomizedUnsupported as e:
        raise UsageError(f"{name}: {e}") from None


def add_arguments(s, entry) -> None:
    """The options of ``python -m verify.construct NAME`` for a catalogue entry."""
    params = getattr(entry, "params", {}) or {}
    s.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help=f"sizes, each <= {MAX_SIZE} unless --allow-large (defaults: "
                        f"{', '.join(f'{k}={v}' for k, v in entry.sizes.items()) or 'none'})"
                        + (f"; exact parameters, e.g. eta=1/64 (defaults: "
                           f"{', '.join(f'{k}={v}' for k, v in params.items())})" if params else ""))
    s.add_argument("--json", help="write the report as JSON (folder created if missing)")
    s.add_argument("--allow-large", action="store_true", help=f"allow sizes above {MAX_SIZE}")
    bounded.add_arguments(s)
    add_check_arguments(s)
    add_export_arguments(s, "the entry's weights (a construction with a body: --k body copies, default 1)")
    s.add_argument("--k", type=int, default=None, metavar="K",
                   help="with --export: the body copies written (1..the weight files' layer limit; default 1)")
    s.add_argument("--weights", default=None, metavar="FILE",
                   help="prove this weight file (the entry's layer structure, any number of body copies) against "
                        "the entry's specification instead of the built weights; refuted first, and a FAILED file "
                        "gets its distance and the nearest construction of the entry's family (verify/nearest.py)")
    s.add_argument("--allow-metadata-mismatch", action="store_true",
                   help="with --weights: prove the file even where its metadata declares another construction, "
                        "size, parameter or layer setting")


def cmd_entry(entry, a, out) -> int:
    """Build and check a catalogue entry (``entry``: its CatalogueEntry, or its EntryInfo from the
    manifest: the arguments are checked against that first, then the registry is read)."""
    bounded.check(a)
    check_check_arguments(a)
    json_path = output_file("--json", a.json)
    sizes, params = parse_settings(a.set, entry, a.allow_large)
    if not callable(getattr(entry, "build", None)):
        from constructions.catalogue import by_name

        entry = by_name(entry.name)
    from constructions.base import Construction

    try:
        obj = entry.build(**sizes, **params)
    except (ValueError, IndexError, ZeroDivisionError) as e:
        raise UsageError(f"{entry.name}: {e}") from None
    k = export_k(a, obj, entry.name)
    lw = read_weights(a, obj, entry.name)  # --weights: read and checked before anything is printed
    if getattr(a, "export", None) is not None or getattr(a, "export_format", None) is not None:
        from .export import check_export_arguments

        check_export_arguments(a, obj, k=k)  # the format holds the entry, or one line now, before the proof
    if a.check == "random":
        from .prover.randomized import RandomizedUnsupported, claim_of

        try:
            claim_of(obj)  # a witness claim is refused here, before anything is printed
        except RandomizedUnsupported as e:
            raise UsageError(f"{entry.name} is {e}") from None
    info = describe_built(obj)
    print(f"{entry.name}: {entry.summary}", file=out)
    print(f"  {entry.paper}; sizes {', '.join(f'{k}={v}' for k, v in sizes.items()) or '-'}"
          + (f"; parameters {', '.join(f'{k}={v}' for k, v in params.items())}" if params else ""), file=out)
    if info["kind"] == "construction":
        print(f"  layers {info['depth_formula']} (prologue {info['layers']['prologue']}, body "
              f"{info['layers']['body']}, epilogue {info['layers']['epilogue']}); state "
              f"{info['state_shape'][0]} x {info['state_shape'][1]} = {info['state_size']}", file=out)
    compiled = getattr(obj, "info", None)  # a compiled circuit
    if compiled:
        m, cm = compiled["circuit"], compiled["compiled"]
        print(f"  circuit: depth {m['depth']}, width {m['width']}, size {m['size']}, degree {m['degree']}; "
              f"compiled: {cm['layers']} layers, state {cm['tokens']} x {cm['state_width']}; Thm. H.21 bound "
              f"{compiled['theorem_H21_bound']['layers']} layers, {compiled['theorem_H21_bound']['inner_dimension']} "
              f"width", file=out)
        info["circuit"] = compiled
    if isinstance(obj, Construction) and obj.notes:
        print(f"  notes: {obj.notes}", file=out)
    if entry.claim:
        print(f"  paper's claim: {entry.claim}", file=out)
    diagnosis: dict = {}
    if lw is not None:
        from .gd_cmd import prove_weights

        res, user = prove_weights(obj, lw, a.weights, lw_k(obj, lw), a, layers_from="file")
        print(f"weights: {a.weights} ({user['weights']['tensors_read']} tensors, all read; "
              f"{user['weights']['distinct_bodies']} distinct body variant(s); {lw.declared_summary()})", file=out)
        if holds(res) or getattr(res, "method", "") == "random":
            print_proof(res, out)
        else:  # diagnosis of a FAILED file, after the verdict (never a verdict itself)
            diagnosis = weights_diagnosis(entry, obj, sizes, params, lw, a, res, out)
        diagnosis["weights"] = {**user["weights"], **diagnosis.get("weights", {})}
    elif a.check == "random":
        from .prover.randomized import check_item

        res = random_check(lambda: check_item(obj, seed=a.random_seed), a, entry.name)
        print_proof(res, out)
    else:
        res = bounded.call(lambda: check(obj), a, entry.name)
        print_proof(res, out)
    if getattr(a, "export", None) is not None:
        from .export import write_export

        write_export(a, obj, k=k, out=out)
    if json_path:
        verdict, line = verdict_of(res)
        if "nearest" in diagnosis:  # the nearest construction of the family: its own block, never the verdict
            line = f"{line}; {diagnosis.pop('summary')}"
        atomic_write_text(json_path, report_json({"command": entry.name, "paper": entry.paper, "sizes": sizes,
                                                 "params": {k: str(v) for k, v in params.items()},
                                                 "built": info, "claim": entry.claim, "check": a.check,
                                                 "verdict": verdict, "verdict_line": line,
                                                 ("randomized" if a.check == "random" else "proof"): res.to_json(),
                                                 **{k: v for k, v in diagnosis.items() if k != "summary"}}))
        print(f"report written to {json_path}", file=out)
    return 0 if holds(res) else 1


# ------------------------------------------------------------------ --weights: a file for the entry

def read_weights(a, obj, name: str):
    """``--weights``: the file read exactly against the entry's construction (``weights_io.load``), its
    metadata checked (refused, naming what it declares, without ``--allow-metadata-mismatch``), its layers
    the construction's kinds and shapes at the file's own number of body copies; a UsageError (one line)
    before any work otherwise.  None without ``--weights``."""
    path = getattr(a, "weights", None)
    if path is None:
        if getattr(a, "allow_metadata_mismatch", False):
            raise UsageError("--allow-metadata-mismatch applies to a --weights file; none was given")
        return None
    from constructions.base import Construction
    from constructions.weights_io import WeightFileError, check_against, declared_mismatches, load

    if not isinstance(obj, Construction):
        raise UsageError(f"--weights: {name} is an identity claim ({type(obj).__name__}), not a construction "
                         f"with layers to read")
    if getattr(a, "export", None) is not None or getattr(a, "export_format", None) is not None:
        raise UsageError("--weights proves a file; --export writes the entry's own weights: give one of them")
    try:
        lw = load(path, spec=obj)
        k = lw_k(obj, lw)
        bad = declared_mismatches(obj, k, lw)
        if bad and not a.allow_metadata_mismatch:
            raise UsageError(f"{path} declares {'; '.join(bad)}; pass --allow-metadata-mismatch to prove it as "
                             f"{name} with the sizes given")
        check_against(obj.layers(k), lw.layers, path)
    except WeightFileError as e:
        raise UsageError(str(e)) from None
    return lw


def lw_k(obj, lw) -> int:
    """The file's number of body copies (``weights_io.repetitions``)."""
    from constructions.weights_io import repetitions

    return repetitions(obj, len(lw.layers))


def weights_diagnosis(entry, obj, sizes: dict, params: dict, lw, a, res, out) -> dict:
    """A FAILED ``--weights`` file, after its verdict: the exact weight distance to the entry at the
    parameters used, the nearest construction of the entry's family (its exact parameters fitted,
    ``verify/nearest.py``; the snapped one proved under the command's limits) and the functional distance
    (``verify/functional_distance.py``, sampled and certified).  Printed after the verdict line (which
    gets the distance); returned for the JSON report.  Diagnosis only: ``res`` is not read or changed."""
    from fractions import Fraction

    from .functional_distance import functional_distance, gd_stacks, specification_problems
    from .nearest import guarded, nearest, print_failed
    from .weight_distance import weight_distance

    k = lw_k(obj, lw)
    distance = weight_distance(obj.layers(k), lw.layers)
    used_line = distance.line_at(entry.name, {**entry.params, **params} if getattr(entry, "params", None) else {})
    used = {}
    for n, v in {**(getattr(entry, "params", {}) or {}), **params}.items():
        try:
            used[n] = Fraction(v)
        except (TypeError, ValueError):  # a parameter that is not a number: not fitted
            pass

    def build(**p):
        try:
            c = entry.build(**sizes, **{**params, **p})
        except (ValueError, IndexError, ZeroDivisionError) as e:
            raise ValueError(str(e)) from None
        return c, c.layers(k)

    near = guarded(lambda: nearest(build, used, lw.layers, name=entry.name,
                                   prove=lambda c: bounded.prove(c, a, f"the nearest {c.name}"),
                                   built=(obj, obj.layers(k))), entry.name)
    print_failed(res, near, out, used_line, summary=None)
    report = {"weights": {"distance": distance.to_json()}, "nearest": near.to_json(),
              "summary": near.verdict_text(used_line)}
    try:
        ref, learned, what = gd_stacks(obj, k, lw.layers)
        v, desc = specification_problems(obj)
        fd = functional_distance(ref, learned, obj.variables, v, desc, what)
    except (ValueError, TypeError, ArithmeticError, KeyError) as e:  # diagnosis: said, never the command's end
        from polyverify.plumbing.cli import one_line

        print(f"  functional distance: not computed ({one_line(e)})", file=out)
    else:
        print("  " + fd.line(), file=out)
        report["functional_distance"] = fd.to_json()
    return report
