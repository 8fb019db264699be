"""``python -m verify.construct import FILE --from FORMAT --spec SPEC``: prove or refute a peer's weights.

    python -m verify.construct import FILE --from precision-ls|icl-gd|zoology|polyverify --spec SPEC
        [--layout L.json] [--set KEY=VALUE ...] [--config KEY=VALUE ...] [--json R] [--no-search]

SPEC: a ``gd`` architecture (``baseconv``, ``token-lsa``, ...), or any catalogue entry that is a
layer stack (``gd-baseconv``, ``s004-gd``, the named iteration ``prefix-coupled``, ...).
``--set`` gives the specification's sizes and parameters (default: what the file fixes, then the
entry's defaults; a parameter not given is read from the file: ``verify/importers/search.py``);
``--config`` gives the peer model's settings a file does not hold (``causal``, ``dampening``...).
A ``gd`` architecture takes the parameters its builder takes (``eta``, and ``lam`` for a ridge
one, besides the construction's own, e.g. LSA's ``sqrt_eta``).  A ``polyverify`` file that
declares the construction being proved gives its sizes and parameters from its metadata; a
contradiction between the metadata and what is proved is refused (exit 2) unless
``--allow-metadata-mismatch``, as for ``gd --weights``.

Exit status: 0 PROVED, 1 FAILED (the first layer whose output differs and a counterexample, then
the nearby specifications tried), 2 bad input (one line, before any proof) or a proof past
``--proof-memory-gib`` / ``--proof-timeout`` before its verdict.  A printed verdict is final: a
nearby search past a limit is one line of its own (``nearby search stopped: ...``) and the exit
status stays the verdict's.

This module holds the arguments and every check before the proof (:func:`settings`); the
specification's builder and parameters are in ``verify/importers/specs.py``, the proof, the
verdict and the nearby search in ``verify/importers/prove.py``.
"""
from __future__ import annotations

from polyverify.plumbing.cli import UsageError, claim_input, output_file
from verify.cli_common import input_file
from verify.gd_cmd import GD_LIMITS

from . import FORMATS, mapping
from .common import ImportRefused, ParamSource, describe_not_proved, parse_settings
from .described import circuit_settings
from .prove import nearby_specifications, prove_bounded  # noqa: F401 - nearby_specifications: named here too
from .shapes import check_layer_shapes
from .specs import (accepted, alias_of, build_spec, builder_keywords, parse_param, size_keys_of, builder_takes,
                    unknown_param, resolve_spec)

#: the most body copies the import proves (each distinct copy is one proof)
MAX_LAYERS = 100_000
#: the largest size (n, d, ...) of the specification a file is proved against
MAX_SIZE = 4096
#: the most variables (n x d) of a gd specification's exact proof: gd's own limit
MAX_PROOF_VARIABLES = GD_LIMITS["--n x --d (proof variables)"]


def add_arguments(p) -> None:
    p.description = ("Read a peer's weight file exactly, map it onto a specification and prove it "
                     "(0 proved, 1 refuted with the first wrong layer and a counterexample, 2 bad input).")
    p.add_argument("file", help="the weight file (.pt, .safetensors, .npz)")
    p.add_argument("--from", dest="fmt", required=True, choices=list(FORMATS), help="the file's format")
    p.add_argument("--spec",
                   help="a gd architecture (baseconv, token-lsa, ...) or a catalogue entry (gd-baseconv, s004-gd, "
                        "prefix-coupled, ...); default: the construction a file this toolkit exported names (with its "
                        "sizes, parameters and layout)")
    p.add_argument("--circuit", metavar="G.json",
                   help="prove the file against this circuit compiled (a compiled circuit exported to a peer format; "
                        "instead of --spec): the compile's default target, or --target")
    p.add_argument("--target", help="--circuit: the compiler target the file was compiled to (default: the "
                                    "target the file records, else the compiler's default for the circuit)")
    p.add_argument("--layout", help="JSON mapping the file's state onto the specification's regions "
                                    "(docs/interop.md); default: the format's own layout for this specification")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a size or parameter of the specification (n=20, d=5, eta=1/16)")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="a setting of the peer's model that the file does not hold (causal=true, dampening=1)")
    p.add_argument("--json", help="write the report as JSON")
    p.add_argument("--distance-report", metavar="PATH.md",
                   help="write how far the file is from the specification, and the nearest construction of its "
                        "family, as markdown (verify/nearest.py)")
    p.add_argument("--no-search", action="store_true", help="on failure, do not try the nearby specifications")
    p.add_argument("--box", default=None, metavar="R[,NAME=R]",
                   help="on failure, the certified bound of the functional distance holds for every input with "
                        "|entries| <= R (a positive rational, default 1; NAME=R for one input, e.g. A=2)")
    p.add_argument("--blocks-only", action="store_true",
                   help="a whole model's checkpoint (embedding, read-out, LayerNorms, MLPs): prove the blocks and "
                        "name every tensor not proved in the verdict and the JSON (without it such a file is "
                        "refused, naming them)")
    p.add_argument("--allow-metadata-mismatch", action="store_true",
                   help="polyverify files: prove the file as the arguments say even where its metadata declares "
                        "other sizes, parameters, k or layer settings (as gd --weights)")
    p.add_argument("--allow-large", action="store_true",
                   help=f"lift the limit on n x d of a gd specification ({MAX_PROOF_VARIABLES}; the sizes stay "
                        f"<= {MAX_SIZE}): for --check random, or an exact proof under --proof-memory-gib")
    from verify.bounded import add_arguments as add_proof_limits
    from verify.cli_common import add_check_arguments

    add_check_arguments(p)  # --check exact|random, --random-seed (as gd --weights)
    add_proof_limits(p)  # --proof-memory-gib, --proof-timeout: the proving part runs in a child under them


def _check_before_reading(a, entry, mod, cfg, sizes, size_src, size_keys, given_params) -> None:
    """What the arguments alone decide, refused before the file is read (reading a ``.pt`` file
    imports torch, seconds): the ``--config`` keys and values, sizes given with ``--set``, and
    parameters the specification does not have."""
    check = getattr(mod, "check_config", None)
    try:
        if check is not None:
            check(cfg)
        elif cfg:
            raise ImportRefused(f"--config {next(iter(cfg))}: a {a.fmt} file carries its own settings")
    except ImportRefused as e:
        raise UsageError(str(e)) from None
    for k, v in sizes.items():
        if size_src.get(k) == "--set" and not (0 <= v <= MAX_SIZE):
            raise UsageError(f"size {k}={v} outside 0..{MAX_SIZE}")
    if ("gd" in entry.roles and size_src.get("n") == size_src.get("d") == "--set"
            and sizes["n"] * sizes["d"] > MAX_PROOF_VARIABLES and not getattr(a, "allow_large", False)):
        raise UsageError(f"n x d = {sizes['n'] * sizes['d']} exceeds the limit {MAX_PROOF_VARIABLES} of the "
                         "exact proof (pass --allow-large to lift it)")
    try:  # the entry at small / default sizes (cheap): a layer stack, and its parameters
        spec_d = build_spec(entry, {"n": 2, "d": 1} if "gd" in entry.roles else dict(entry.sizes or {}), {})
    except UsageError as e:
        if "not a layer stack" in str(e):
            raise
        return
    if given_params:
        unknown_param(given_params, entry, spec_d, size_keys)


def settings(a) -> dict:
    """Everything validated and read before any proof (a UsageError names the first problem)."""
    json_path = output_file("--json", a.json)
    output_file("--distance-report", getattr(a, "distance_report", None))  # checked and claimed now
    from verify.functional_distance import parse_box

    box = parse_box(a.box)  # the functional distance's box: a positive finite rational, or one line now
    try:
        sets = parse_settings(a.set, "--set")
        cfg = parse_settings(a.config, "--config")
        layout_d = mapping.read_layout_file(a.layout) if a.layout else None
        if a.layout:
            claim_input("--layout", a.layout)  # --json on it is refused: it would overwrite the layout
    except ImportRefused as e:
        raise UsageError(str(e)) from None
    mod = FORMATS[a.fmt]
    imp = desc = None
    if getattr(a, "circuit", None):
        if a.spec is not None:
            raise UsageError("--circuit and --spec: give one (the circuit compiled is the specification)")
        entry, imp, layout_d = circuit_settings(a, mod, cfg, layout_d)  # described.py: the file's target, layout
        a.spec = entry.name
    elif getattr(a, "target", None):
        raise UsageError("--target applies to --circuit")
    elif a.spec is None:  # a file this toolkit exported: its description names the rest (verify/importers/described.py)
        imp, desc, sets, layout_d = _described(a, mod, cfg, sets, layout_d)
    if not getattr(a, "circuit", None):
        entry = resolve_spec(a.spec)
    size_keys = size_keys_of(entry)
    sizes, size_src, given_params = _given(entry, sets, size_keys)
    if desc is not None:
        set_keys = {x.split("=", 1)[0].strip() for x in a.set}
        size_src.update({k: "the file's description" for k in desc["sizes"] if k not in set_keys})
    _check_before_reading(a, entry, mod, cfg, sizes, size_src, size_keys, given_params)
    if imp is None:
        input_file("", a.file)  # missing, a folder, /dev/zero, a FIFO: said as what it is, before any reading
        imp = _read(a, entry, mod, cfg, sizes, given_params)
    for k, v in imp.sizes.items():
        if k in size_keys and size_src.get(k) not in ("--set", "the file's description"):
            sizes[k], size_src[k] = v, "the file"
    # a polyverify file that declares the construction being proved: its parameters build the
    # specification (docs/interop.md); --set wins where given (a contradiction is refused below)
    lw = getattr(imp, "loaded", None)
    declares_spec = bool(lw is not None and lw.declared and lw.declared.get("name") == entry.name)
    set_keys = {x.split("=", 1)[0].strip() for x in a.set}
    # a parameter an export's description gives (not --set) is the file's own declaration
    param_src = {k: (ParamSource.SET_FLAG if desc is None or k in set_keys else ParamSource.METADATA)
                 for k in given_params}
    declared_used = _declared_params(a, entry, imp, given_params, param_src) if declares_spec else {}
    spec, params = _specification(entry, sizes, size_keys, given_params, declared_used, param_src,
                                  allow_large=getattr(a, "allow_large", False))
    kinds = {L.kind for L in imp.layers}
    spec_kinds = {L.kind for L in spec.layers(1)}
    if kinds == {"token_lsa"} and spec_kinds == {"lsa"}:  # seed 001's LSA as an export writes it: seed 004's
        spec_kinds = kinds                                # token form, the same map (icl_gd.token_form)
    if kinds != spec_kinds:
        raise UsageError(f"{a.file}: {', '.join(sorted(kinds))} layers; {spec.name} is made of "
                         f"{', '.join(sorted(spec_kinds))} layers")
    layout_d, layout_src, (rows, cols, secs, shape) = _layout(a, mod, spec, imp, layout_d)
    sized = ", ".join(f"{k}={v} ({size_src.get(k, '')})" for k, v in sizes.items())
    check_layer_shapes(imp.layers, tuple(shape), f"the layout {a.layout} maps" if a.layout else
                       f"{spec.name}{' at ' + sized if sized else ''} acts on", a.file)
    first, k_file = _sections(a, spec, imp, secs)
    if lw is not None and not a.layout and not a.allow_metadata_mismatch:
        _check_declared(a, spec, lw, declares_spec, k_file, bool(len(spec.body)))

    # a builder taking its parameters as **kwargs (s004-implicit-w's P/Q entries) needs all of them
    # at once: one solved (over) comes with the others at the specification's values
    base = ({k: spec.params[k] for k in spec.symbolic_params if k not in params}
            if builder_keywords(entry)[1] else {})

    def build(**over):
        s = build_spec(entry, sizes, {**base, **params, **over}) if over else spec
        return mapping.Projected(s, rows, cols, secs, shape, first)

    con = build()
    try:
        mapping.check_carried(con)
    except ImportRefused as e2:
        raise UsageError(str(e2)) from None
    box.check_names(spec.variables)
    return {"entry": entry, "spec": spec, "imported": imp, "sizes": sizes, "size_src": size_src,
            "given": given_params, "fixed": {k: params[k] for k in param_src}, "param_src": param_src,
            "declares_spec": declares_spec, "build": build, "con": con, "layout": layout_d, "layout_src": layout_src,
            "json_path": json_path, "k": k_file, "box": box}


class CircuitEntry:
    """``--circuit G.json``: the circuit compiled, as a specification entry (no sizes, no parameters: a compiled
    stack's constants are its own); its states are the compiled construction's (``constructions/compiler/``)."""

    roles = frozenset()
    sizes: dict = {}

    def __init__(self, con):
        self.con, self.name = con, con.name

    def build(self):
        return self.con


def circuit_entry(a) -> CircuitEntry:
    """The circuit of ``--circuit`` loaded (bounded, one line on bad input) and compiled to ``--target``."""
    import os

    import circuits as C
    from constructions.compiler import TARGETS, compile_circuit

    if a.target is not None and a.target not in TARGETS:
        raise UsageError(f"--target {a.target!r}: not a compiler target ({', '.join(TARGETS)})")
    input_file("--circuit", a.circuit)
    claim_input("--circuit", a.circuit)
    try:
        g = C.load(a.circuit)
    except (C.CircuitError, OSError, ValueError) as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise UsageError(msg if os.fspath(a.circuit) in msg else f"{a.circuit}: {msg}") from None
    name = os.path.splitext(os.path.basename(a.circuit))[0]
    try:
        return CircuitEntry(compile_circuit(g, name=name, target=a.target))
    except ValueError as e:
        raise UsageError(f"--circuit {a.circuit}: {str(e).splitlines()[0]}") from None


def _described(a, mod, cfg: dict, sets: dict, layout_d):
    """No ``--spec``: the file is read first and its description (a file this toolkit exported) gives the
    specification, its sizes and parameters (``--set`` wins) and the layout (``--layout`` wins).  Returns
    ``(imported, description, sets, layout)``; sets ``a.spec``.  A file without one is refused in one line."""
    from .described import from_config, from_declared

    check = getattr(mod, "check_config", None)
    try:
        if check is not None:
            check(cfg)
    except ImportRefused as e:
        raise UsageError(str(e)) from None
    input_file("", a.file)

    def no_spec():
        raise UsageError(f"{a.file}: no polyverify metadata; pass --spec SPEC")

    try:
        if a.fmt == "polyverify":
            imp = mod.read(a.file, cfg, spec_for=no_spec)
            desc = from_declared(getattr(getattr(imp, "loaded", None), "declared", None), a.file)
        else:
            imp = mod.read(a.file, cfg)
            desc = from_config(getattr(imp, "file_config", None), a.file)
    except ImportRefused as e:
        raise UsageError(str(e)) from None
    if desc is None:
        raise UsageError(f"{a.file} does not describe its construction (only files this toolkit exported do): pass "
                         f"--spec SPEC (and --set, --layout as docs/interop.md says)")
    read_checked(a, imp)
    a.spec = desc["spec"]
    merged = {**{k: str(v) for k, v in desc["sizes"].items()}, **{k: v for k, v in desc["params"].items()}, **sets}
    if layout_d is None and desc["layout"] is not None:
        layout_d = dict(desc["layout"])
    return imp, desc, merged, layout_d


def _given(entry, sets: dict, size_keys: set) -> tuple[dict, dict, dict]:
    """The entry's default sizes overridden by ``--set`` (integers), where each came from, and the
    parameters ``--set`` gives (parsed as the builder takes them)."""
    sizes = dict(entry.sizes) if entry.sizes else {}
    if "gd" in entry.roles:
        sizes = {"n": 20, "d": 5, **{k: v for k, v in sizes.items() if k in ("n", "d")}}
    size_src = {k: "default of the entry" for k in sizes}
    given_params: dict = {}
    for k, v in sets.items():
        if k in size_keys:
            try:
                sizes[k] = int(v)
            except ValueError:
                raise UsageError(f"--set {k}={v}: a size must be an integer") from None
            size_src[k] = "--set"
        else:
            given_params[k] = parse_param(entry, k, v, f"--set {k}")
    return sizes, size_src, given_params


def _read(a, entry, mod, cfg: dict, sizes: dict, given_params: dict):
    """The file read by its format's importer; a whole model's tensors outside the blocks are
    refused unless ``--blocks-only``."""
    try:
        if a.fmt == "polyverify":
            imp = mod.read(a.file, cfg, spec_for=lambda: build_spec(entry, sizes, dict(given_params)))
        else:
            imp = mod.read(a.file, cfg)
    except ImportRefused as e:
        raise UsageError(str(e)) from None
    return read_checked(a, imp)


def read_checked(a, imp):
    """A whole model's tensors outside the blocks refused unless ``--blocks-only``."""
    outside = getattr(imp, "not_proved", None) or {}
    if outside and not a.blocks_only:
        many = len(outside) > 1
        raise UsageError(f"{a.file}: {len(outside)} tensor{'s' if many else ''} of the model {'are' if many else 'is'} "
                         f"not part of the blocks the importer proves ({describe_not_proved(outside)}); the file "
                         f"is refused: every tensor must be part of the proof (pass --blocks-only to prove the "
                         f"blocks and name these in the verdict)")
    return imp


def _declared_params(a, entry, imp, given_params: dict, param_src: dict) -> dict:
    """The parameters a polyverify file declaring the construction gives (those --set does not),
    parsed as the builder takes them; ``param_src`` records them."""
    declared_used: dict = {}
    for k, v in imp.declared_params.items():
        if k in given_params or alias_of(k, given_params) or any(alias_of(g, {k: 1}) for g in given_params):
            continue  # --set gives it (itself, or the parameter it is the square root of / squared)
        if not builder_takes(entry, k):
            continue  # a size (s000-read's i, j) or the entry's own fixed value (s000-linear's H_i_j)
        # parsed as the builder takes it (a bool, else bounded: '1e999999999' is refused before
        # 10**999999999 is built)
        declared_used[k] = parse_param(entry, k, v, f"{a.file}: its metadata's parameter {k}")
        param_src[k] = ParamSource.METADATA
    return declared_used


def _specification(entry, sizes: dict, size_keys: set, given_params: dict, declared_used: dict,
                   param_src: dict, allow_large: bool = False) -> tuple:
    """The specification at the sizes (checked against the exact proof's limits) and its parameters:
    (spec, params); ``param_src`` keeps the parameters used."""
    for k, v in sizes.items():
        if isinstance(v, int) and not (0 <= v <= MAX_SIZE):
            raise UsageError(f"size {k}={v} outside 0..{MAX_SIZE}")
    if "gd" in entry.roles and sizes["n"] * sizes["d"] > MAX_PROOF_VARIABLES and not allow_large:
        raise UsageError(f"n x d = {sizes['n'] * sizes['d']} exceeds the limit {MAX_PROOF_VARIABLES} of the "
                         "exact proof (pass --allow-large to lift it)")
    spec0 = build_spec(entry, sizes, {})
    unknown_param(given_params, entry, spec0, size_keys)
    declared_used = {k: v for k, v in declared_used.items() if k in accepted(entry, spec0)}
    for k in [k for k in param_src if k not in given_params and k not in declared_used]:
        del param_src[k]  # a declared parameter the builder does not take: compared below, not used
    params: dict = {}
    params.update(declared_used)
    params.update(given_params)
    return (build_spec(entry, sizes, params) if params else spec0), params


def _layout(a, mod, spec, imp, layout_d):
    """The layout (``--layout`` or the importer's default), where it came from, and its parse
    (rows, cols, sections, shape)."""
    if layout_d is None:
        layout_d = mod.default_layout(spec, imp)
        layout_src = f"the {a.fmt} importer's default for {spec.name}"
        if layout_d is None:
            raise UsageError(f"no default layout maps a {a.fmt} file onto {spec.name}: pass --layout L.json "
                             f"(docs/interop.md)")
    else:
        layout_src = f"--layout {a.layout}" if a.layout else "the file's description (an export: the construction's state)"
    try:
        return layout_d, layout_src, mapping.parse(layout_d, spec, imp.state_shape)
    except ImportRefused as e:
        raise UsageError(str(e)) from None


def _sections(a, spec, imp, secs: dict) -> tuple[dict, int]:
    """The file's layers as prologue + body x k + epilogue: the first copy of each section, and k."""
    p = secs.get("prologue", len(spec.prologue))
    e = secs.get("epilogue", len(spec.epilogue))
    b = len(spec.body)
    n_layers = len(imp.layers)
    if n_layers > MAX_LAYERS:
        raise UsageError(f"{a.file}: {n_layers} layers, above the limit {MAX_LAYERS}")
    if n_layers < p + e or (b and (n_layers - p - e) % b) or (not b and n_layers != p + e):
        raise UsageError(f"{a.file} has {n_layers} layers; {spec.name} projected onto it needs {p} + {b}*k + {e}")
    first = {"prologue": imp.layers[:p], "body": imp.layers[p:p + b], "epilogue": imp.layers[n_layers - e:] if e else []}
    return first, (n_layers - p - e) // b if b else 0


def _check_declared(a, spec, lw, declares_spec: bool, k: int, has_body: bool) -> None:
    """The file's own description against what is about to be proved (as gd --weights:
    constructions/weights_io.declared_mismatches); a file declaring another construction is
    proved against --spec (the point of import), its sizes / k / parameters not compared."""
    from constructions.weights_io import declared_mismatches

    bad = declared_mismatches(spec, k, lw) if declares_spec else []
    # k is no claim of a stack without a body (every depth is the same stack)
    bad = [x for x in bad if not x.startswith("construction ") and not (not has_body and x.startswith("k="))]
    if bad:
        raise UsageError(f"{a.file} declares {'; '.join(bad)}; pass --allow-metadata-mismatch to prove it as "
                         f"the arguments say")


def cmd_import(a, out) -> int:
    from verify import bounded

    from verify.cli_common import check_check_arguments

    bounded.check(a)  # --proof-memory-gib, --proof-timeout
    check_check_arguments(a)  # --random-seed only with --check random, in range
    st = settings(a)
    # everything after the checks proves (parameters solved from the file, the proof, the nearby
    # search), its output streamed back (verify/bounded.py): the verdict in a child under the proof
    # limits, then, after a FAILED, the nearby search in another; a search past a limit is reported
    # in its own line after the verdict, which stands with its exit status (prove.prove_bounded)
    return prove_bounded(a, st, out)
