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
the nearby specifications tried), 2 bad input (one line, before any proof).
"""
from __future__ import annotations

import json
import time
from fractions import Fraction

from constructions.base import Construction
from polyverify.cli import UsageError, atomic_write_text, one_line, output_file
from polyverify.rational import parse_rational

from . import FORMATS, mapping, search
from .shapes import check_layer_shapes
from .common import ImportRefused, describe_not_proved, parse_settings

#: the most body copies the import proves (each distinct copy is one proof)
MAX_LAYERS = 100_000


def add_arguments(p) -> None:
    p.description = ("Read a peer's weight file exactly, map it onto a specification and prove it "
                     "(0 proved, 1 refuted with the first wrong layer and a counterexample, 2 bad input).")
    p.add_argument("file", help="the weight file (.pt, .safetensors, .npz)")
    p.add_argument("--from", dest="fmt", required=True, choices=list(FORMATS), help="the file's format")
    p.add_argument("--spec", required=True,
                   help="a gd architecture (baseconv, token-lsa, ...) or a catalogue entry (gd-baseconv, s004-gd, "
                        "prefix-coupled, ...)")
    p.add_argument("--layout", help="JSON mapping the file's state onto the specification's regions "
                                    "(docs/interop.md); default: the format's own layout for this specification")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a size or parameter of the specification (n=20, d=5, eta=1/16)")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="a setting of the peer's model that the file does not hold (causal=true, dampening=1)")
    p.add_argument("--json", help="write the report as JSON")
    p.add_argument("--no-search", action="store_true", help="on failure, do not try the nearby specifications")
    p.add_argument("--blocks-only", action="store_true",
                   help="a whole model's checkpoint (embedding, read-out, LayerNorms, MLPs): prove the blocks and "
                        "name every tensor not proved in the verdict and the JSON (without it such a file is "
                        "refused, naming them)")
    p.add_argument("--allow-metadata-mismatch", action="store_true",
                   help="polyverify files: prove the file as the arguments say even where its metadata declares "
                        "other sizes, parameters, k or layer settings (as gd --weights)")
    from verify.bounded import add_arguments as add_proof_limits

    add_proof_limits(p)  # --proof-memory-gib, --proof-timeout: the proving part runs in a child under them


def resolve_spec(name: str):
    from constructions.catalogue import entries, gd_architectures

    gd = gd_architectures()
    if name in gd:
        return gd[name]
    e = entries().get(name)
    if e is None:
        raise UsageError(f"--spec {name!r}: not a gd architecture ({', '.join(gd)}) or a catalogue entry "
                         f"(python -m verify.construct --list)")
    return e


def _build(entry, sizes: dict, params: dict) -> Construction:
    try:
        if "gd" in entry.roles:
            kw = dict(params)
            con = entry.build(sizes["n"], sizes["d"], **kw)
        else:
            con = entry.build(**sizes, **params)
    except TypeError as e:
        raise UsageError(f"--spec {entry.name}: {e}") from None
    except (ValueError, KeyError) as e:
        raise UsageError(f"--spec {entry.name}: {one_line(e)}") from None
    if not isinstance(con, Construction):
        tn = type(con).__name__
        raise UsageError(f"--spec {entry.name}: {'an' if tn[0] in 'AEIOU' else 'a'} {tn}, not a layer stack to prove weights "
                         f"against")
    return con


def _builder_keywords(entry) -> tuple[dict, bool]:
    """``({name: default}, takes_any)``: the keyword arguments the entry's builder takes, and
    whether it takes any keyword (``**kwargs``).  A specification parameter the builder does not
    take (``s000-linear``'s ``H_0_0``: its builder takes the matrix ``H``) is the entry's own,
    not something ``--set`` or a file's metadata can give."""
    import inspect

    try:
        sig = inspect.signature(entry.build)
    except (TypeError, ValueError):  # pragma: no cover - every registered builder has a signature
        return {}, True
    kw = {n: p.default for n, p in sig.parameters.items()
          if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return kw, any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())


def _size_keys(entry) -> set:
    return set(entry.sizes or {}) | ({"n", "d"} if "gd" in entry.roles else set())


def _takes(entry, name: str) -> bool:
    """Whether the builder takes ``name`` as a parameter (not a size)."""
    if name in _size_keys(entry):
        return False
    kw, anykw = _builder_keywords(entry)
    return name in kw or anykw


def _accepted(entry, spec) -> list[str]:
    """The parameters ``--set`` may give: the specification's own (``spec.params``) that its
    builder takes (sizes are given as sizes; ``s000-linear``'s entries ``H_i_j`` are the entry's
    fixed matrix) and, for a ``gd`` architecture, what its builder takes (``build(n, d, eta=...,
    [lam=...])``: a compiled architecture's ``lam`` is not among its params at ``lam = 0``,
    LSA's ``eta`` is its ``sqrt_eta`` squared)."""
    out = [k for k in spec.params if _takes(entry, k)]
    if "gd" in entry.roles:
        out += [k for k in ("eta", "lam") if k not in out and (k == "eta" or getattr(entry, "ridge", False))]
    return out


def _parse_param(entry, name: str, value, what: str):
    """A parameter's value as its builder takes it: ``true``/``false`` where the builder's default
    is a bool (``s003-conv``'s ``circular``), else an exact rational (bounded parser)."""
    default = _builder_keywords(entry)[0].get(name)
    if isinstance(default, bool) or isinstance(value, bool):
        s = str(value).strip().lower()
        if s in ("true", "1"):
            return True
        if s in ("false", "0"):
            return False
        raise UsageError(f"{what}: {value!r} is not true or false")
    try:  # bounded (polyverify/rational.py): 1e-999999999 is refused at once
        return parse_rational(value if isinstance(value, (int, Fraction)) else str(value), what)
    except ValueError as e:
        raise UsageError(str(e)) from None


def _unknown_param(given, entry, spec, size_keys) -> None:
    acc = _accepted(entry, spec)
    unknown = [k for k in given if k not in acc]
    if unknown:
        raise UsageError(f"--set {unknown[0]}: {spec.name} has no size or parameter {unknown[0]!r} (sizes: "
                         f"{', '.join(sorted(size_keys)) or 'none'}; parameters: {', '.join(acc) or 'none'})")


def _alias_of(name: str, fixed: dict) -> str | None:
    """The fixed parameter that determines ``name`` through the builder: ``eta`` fixes
    ``sqrt_eta`` (LSA/ELSA take either)."""
    if name.startswith("sqrt_") and name[5:] in fixed:
        return name[5:]
    return None


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
        if size_src.get(k) == "--set" and not (0 <= v <= 4096):
            raise UsageError(f"size {k}={v} outside 0..4096")
    if "gd" in entry.roles and size_src.get("n") == size_src.get("d") == "--set" and sizes["n"] * sizes["d"] > 1024:
        raise UsageError(f"n x d = {sizes['n'] * sizes['d']} exceeds the limit 1024 of the exact proof")
    try:  # the entry at small / default sizes (cheap): a layer stack, and its parameters
        spec_d = _build(entry, {"n": 2, "d": 1} if "gd" in entry.roles else dict(entry.sizes or {}), {})
    except UsageError as e:
        if "not a layer stack" in str(e):
            raise
        return
    if given_params:
        _unknown_param(given_params, entry, spec_d, size_keys)


def settings(a) -> dict:
    """Everything validated and read before any proof (a UsageError names the first problem)."""
    json_path = output_file("--json", a.json)
    try:
        sets = parse_settings(a.set, "--set")
        cfg = parse_settings(a.config, "--config")
        layout_d = mapping.read_layout_file(a.layout) if a.layout else None
    except ImportRefused as e:
        raise UsageError(str(e)) from None
    entry = resolve_spec(a.spec)
    size_keys = _size_keys(entry)
    mod = FORMATS[a.fmt]
    sizes = dict(entry.sizes) if entry.sizes else {}
    if "gd" in entry.roles:
        sizes = {"n": 20, "d": 5, **{k: v for k, v in sizes.items() if k in ("n", "d")}}
    size_src = {k: "default of the entry" for k in sizes}
    params: dict = {}
    given_params: dict = {}
    for k, v in sets.items():
        if k in size_keys:
            try:
                sizes[k] = int(v)
            except ValueError:
                raise UsageError(f"--set {k}={v}: a size must be an integer") from None
            size_src[k] = "--set"
        else:
            given_params[k] = _parse_param(entry, k, v, f"--set {k}")
    _check_before_reading(a, entry, mod, cfg, sizes, size_src, size_keys, given_params)
    try:
        if a.fmt == "polyverify":
            imp = mod.read(a.file, cfg, spec_for=lambda: _build(entry, sizes, dict(given_params)))
        else:
            imp = mod.read(a.file, cfg)
    except ImportRefused as e:
        raise UsageError(str(e)) from None
    outside = getattr(imp, "not_proved", None) or {}
    if outside and not a.blocks_only:
        many = len(outside) > 1
        raise UsageError(f"{a.file}: {len(outside)} tensor{'s' if many else ''} of the model {'are' if many else 'is'} "
                         f"not part of the blocks the importer proves ({describe_not_proved(outside)}); the file "
                         f"is refused: every tensor must be part of the proof (pass --blocks-only to prove the "
                         f"blocks and name these in the verdict)")
    for k, v in imp.sizes.items():
        if k in size_keys and size_src.get(k) != "--set":
            sizes[k], size_src[k] = v, "the file"
    # a polyverify file that declares the construction being proved: its parameters build the
    # specification (docs/interop.md); --set wins where given (a contradiction is refused below)
    lw = getattr(imp, "loaded", None)
    declares_spec = bool(lw is not None and lw.declared and lw.declared.get("name") == entry.name)
    param_src = {k: "--set" for k in given_params}
    declared_used: dict = {}
    if declares_spec:
        for k, v in imp.declared_params.items():
            if k in given_params or _alias_of(k, given_params) or any(_alias_of(g, {k: 1}) for g in given_params):
                continue  # --set gives it (itself, or the parameter it is the square root of / squared)
            if not _takes(entry, k):
                continue  # a size (s000-read's i, j) or the entry's own fixed value (s000-linear's H_i_j)
            # parsed as the builder takes it (a bool, else bounded: '1e999999999' is refused before
            # 10**999999999 is built)
            declared_used[k] = _parse_param(entry, k, v, f"{a.file}: its metadata's parameter {k}")
            param_src[k] = "the file's metadata"
    for k, v in sizes.items():
        if isinstance(v, int) and not (0 <= v <= 4096):
            raise UsageError(f"size {k}={v} outside 0..4096")
    if "gd" in entry.roles and sizes["n"] * sizes["d"] > 1024:
        raise UsageError(f"n x d = {sizes['n'] * sizes['d']} exceeds the limit 1024 of the exact proof")
    spec0 = _build(entry, sizes, {})
    _unknown_param(given_params, entry, spec0, size_keys)
    declared_used = {k: v for k, v in declared_used.items() if k in _accepted(entry, spec0)}
    for k in [k for k in param_src if k not in given_params and k not in declared_used]:
        del param_src[k]  # a declared parameter the builder does not take: compared below, not used
    params.update(declared_used)
    params.update(given_params)
    spec = _build(entry, sizes, params) if params else spec0
    kinds = {L.kind for L in imp.layers}
    spec_kinds = {L.kind for L in spec.layers(1)}
    if kinds != spec_kinds:
        raise UsageError(f"{a.file}: {', '.join(sorted(kinds))} layers; {spec.name} is made of "
                         f"{', '.join(sorted(spec_kinds))} layers")
    if layout_d is None:
        layout_d = mod.default_layout(spec, imp)
        layout_src = f"the {a.fmt} importer's default for {spec.name}"
        if layout_d is None:
            raise UsageError(f"no default layout maps a {a.fmt} file onto {spec.name}: pass --layout L.json "
                             f"(docs/interop.md)")
    else:
        layout_src = f"--layout {a.layout}"
    try:
        rows, cols, secs, shape = mapping.parse(layout_d, spec, imp.state_shape)
    except ImportRefused as e:
        raise UsageError(str(e)) from None
    sized = ", ".join(f"{k}={v} ({size_src.get(k, '')})" for k, v in sizes.items())
    check_layer_shapes(imp.layers, tuple(shape), f"the layout {a.layout} maps" if a.layout else
                       f"{spec.name}{' at ' + sized if sized else ''} acts on", a.file)
    p = secs.get("prologue", len(spec.prologue))
    e = secs.get("epilogue", len(spec.epilogue))
    b = len(spec.body)
    n_layers = len(imp.layers)
    if n_layers > MAX_LAYERS:
        raise UsageError(f"{a.file}: {n_layers} layers, above the limit {MAX_LAYERS}")
    if n_layers < p + e or (b and (n_layers - p - e) % b) or (not b and n_layers != p + e):
        raise UsageError(f"{a.file} has {n_layers} layers; {spec.name} projected onto it needs {p} + {b}*k + {e}")
    first = {"prologue": imp.layers[:p], "body": imp.layers[p:p + b], "epilogue": imp.layers[n_layers - e:] if e else []}
    if lw is not None and not a.layout and not a.allow_metadata_mismatch:
        # the file's own description against what is about to be proved (as gd --weights:
        # constructions/weights_io.declared_mismatches); a file declaring another construction is
        # proved against --spec (the point of import), its sizes / k / parameters not compared
        from constructions.weights_io import declared_mismatches

        bad = declared_mismatches(spec, (n_layers - p - e) // b if b else 0, lw) if declares_spec else []
        # k is no claim of a stack without a body (every depth is the same stack)
        bad = [x for x in bad if not x.startswith("construction ") and not (not b and x.startswith("k="))]
        if bad:
            raise UsageError(f"{a.file} declares {'; '.join(bad)}; pass --allow-metadata-mismatch to prove it as "
                             f"the arguments say")

    # a builder taking its parameters as **kwargs (s004-implicit-w's P/Q entries) needs all of them
    # at once: one solved (over) comes with the others at the specification's values
    base = ({k: spec.params[k] for k in spec.symbolic_params if k not in params}
            if _builder_keywords(entry)[1] else {})

    def build(**over):
        s = _build(entry, sizes, {**base, **params, **over}) if over else spec
        return mapping.Projected(s, rows, cols, secs, shape, first)

    con = build()
    try:
        mapping.check_carried(con)
    except ImportRefused as e2:
        raise UsageError(str(e2)) from None
    return {"entry": entry, "spec": spec, "imported": imp, "sizes": sizes, "size_src": size_src,
            "given": given_params, "fixed": {k: params[k] for k in param_src}, "param_src": param_src,
            "declares_spec": declares_spec, "build": build, "con": con, "layout": layout_d, "layout_src": layout_src,
            "json_path": json_path, "k": (n_layers - p - e) // b if b else 0}


#: a nearby specification is tried only where the file determines at most this many of its
#: parameters (s004-implicit-w's 36 matrix entries are a weight matrix, not a step size)
MAX_NEARBY_PARAMS = 4


def _candidate(name: str, entry, st, mod) -> dict | None:
    """Another named specification (a ``gd`` architecture or a catalogue entry) projected onto the
    file as the import would project it (the file's sizes, the importer's default layout), or
    None where it cannot hold the file: not a layer stack, other layer kinds, no default layout,
    other layer shapes or counts, more than :data:`MAX_NEARBY_PARAMS` parameters to read."""
    imp = st["imported"]
    sk = _size_keys(entry)
    sizes = ({"n": 20, "d": 5} if "gd" in entry.roles else dict(entry.sizes or {}))
    sizes.update({k: v for k, v in st["sizes"].items() if k in sk})
    try:
        spec = _build(entry, sizes, {})
    except UsageError:
        return None
    if sum(_takes(entry, n) for n in spec.symbolic_params) > MAX_NEARBY_PARAMS:
        return None
    if {L.kind for L in imp.layers} != {L.kind for L in spec.layers(1)}:
        return None
    layout_d = mod.default_layout(spec, imp)
    if layout_d is None:
        return None
    try:
        rows, cols, secs, shape = mapping.parse(layout_d, spec, imp.state_shape)
        check_layer_shapes(imp.layers, tuple(shape), name, imp.file)
    except (ImportRefused, UsageError):
        return None
    p, e, b = secs.get("prologue", len(spec.prologue)), secs.get("epilogue", len(spec.epilogue)), len(spec.body)
    n_layers = len(imp.layers)
    if n_layers < p + e or (b and (n_layers - p - e) % b) or (not b and n_layers != p + e):
        return None
    first = {"prologue": imp.layers[:p], "body": imp.layers[p:p + b], "epilogue": imp.layers[n_layers - e:] if e else []}
    base = {k: spec.params[k] for k in spec.symbolic_params} if _builder_keywords(entry)[1] else {}

    def build(**over):
        return mapping.Projected(_build(entry, sizes, {**base, **over}) if over else spec, rows, cols, secs, shape,
                                 first)

    try:
        con = build()
        mapping.check_carried(con)
    except (ImportRefused, UsageError):
        return None
    return {"name": name, "entry": entry, "spec": spec, "imported": imp, "sizes": sizes, "given": {}, "fixed": {},
            "param_src": {}, "build": build, "con": con}


def nearby_specifications(a, st, out) -> list[dict]:
    """The other named specifications the file may be: each ``gd`` architecture
    and catalogue entry that can hold the file (:func:`_candidate`), its parameters read from the
    file and proved, under the file's own reading (``prefix-coupled`` for precision-ls's causal
    notebook that fails as GD).  One entry per distinct specification."""
    from constructions.catalogue import entries, gd_architectures

    mod, imp = FORMATS[a.fmt], st["imported"]
    seen = {st["spec"].name}
    tried = []
    for name, entry in [*gd_architectures().items(), *entries().items()]:
        c = _candidate(name, entry, st, mod)
        if c is None or c["spec"].name in seen:
            continue
        seen.add(c["spec"].name)
        vals, vinfo = _params_for(c, imp.layers, out)
        r = search.prove_stack(c["build"](**vals) if vals else c["con"], imp.layers)
        label = f"specification {c['spec'].name} (the {a.fmt} importer's default layout)"
        tried.append({"variant": label, "specification": c["spec"].name, "ok": r.ok, "parameters": vinfo,
                      "failure": None if r.ok else f"stack layer {r.failure.layer}: {r.failure.region} "
                                                   f"{list(r.failure.entry)}"})
        print(f"  nearby: {label}: {_verdict_line(r)}"
              + "".join(f", {n} = {_shown(vinfo[n])}" for n in vals)
              + ("" if r.ok else f" (stack layer {r.failure.layer})"), file=out)
    return tried


def _declared_note(imp) -> str:
    """How a polyverify file's declared rationals entered: the value is the
    metadata's, read because the stored float64 entries are exactly float64 of it."""
    dr = getattr(imp, "declared_rationals", None)
    if not dr or not dr.get("entries"):
        return ""
    return (f"{dr['entries']} entries of the file read as its metadata's declared rationals (each stored "
            f"float64 is exactly float64 of its rational), largest gap {dr['largest_gap_float']:.2g}")


def _shown(inf: dict) -> str:
    """A parameter's value as printed next to where it came from."""
    return inf["value"] if inf["from"].startswith("the file's metadata") else inf.get("described", inf["value"])


def _params_for(st, layers, out) -> tuple[dict, dict]:
    """The specification's parameters: --set or the file's metadata (a polyverify file declaring
    the construction proved), else read from the file (solve), else the file's declared value,
    else the entry's default; with where each came from.  ``values`` holds the symbolic
    parameters (passed to ``build``); ``info`` every parameter of the specification."""
    spec, imp = st["spec"], st["imported"]
    fixed, src = st.get("fixed", st["given"]), st.get("param_src", {k: "--set" for k in st["given"]})
    declared = bool(getattr(imp, "declared_rationals", None) and imp.declared_rationals.get("entries"))
    values, info = {}, {}
    for name in spec.symbolic_params:
        alias = _alias_of(name, fixed) if name not in fixed else None
        if name in fixed or alias:
            values[name] = fixed[name] if name in fixed else Fraction(spec.params[name])
            how = src.get(name if name in fixed else alias, "--set")
            if alias:
                how += f" {alias} = {fixed[alias]}"
            info[name] = {"value": str(values[name]), "from": how}
            if how.startswith("the file's metadata"):
                info[name]["described"] = f"{values[name]} (declared in the file's metadata)"
            continue
        if not _takes(st["entry"], name):  # s000-linear's H_i_j: the entry's own matrix, not a builder argument
            values_fixed = Fraction(spec.params[name])
            info[name] = {"value": str(values_fixed), "from": "the entry's own value (its builder does not take "
                                                               f"{name}: the specification fixes it)", "constant": True}
            continue
        t0 = time.perf_counter()
        sol = search.solve_param(lambda **kw: st["build"](**kw), name, layers)
        dt = time.perf_counter() - t0
        if sol and sol["value"] is not None:
            values[name] = sol["value"]
            how = ("the one value at which the file's layers can meet the specification" if sol["consistent"] else
                   f"the value most of the file's coefficients carry ({sol['agree']} of {sol['of']} residual "
                   f"coefficients vanish there; no value makes them all vanish)")
            info[name] = {"value": str(sol["value"]),
                          "described": search.describe_value(sol["value"], imp.dtype, declared=declared),
                          "from": f"the file: {how}", "consistent": sol["consistent"], "solve_seconds": round(dt, 3),
                          "_fails_at": sol["fails_at"]}
        elif name in imp.declared_params:
            values[name] = parse_rational(str(imp.declared_params[name]), f"{name} (the file's metadata)")
            info[name] = {"value": str(values[name]), "from": "the file's metadata"}
        else:
            values[name] = Fraction(spec.params[name])
            info[name] = {"value": str(values[name]), "from": "the entry's default (the file does not determine it)"}
    for name, v in spec.params.items():  # constants of the specification (a compiled stack's eta, lam)
        if name in info:
            continue
        alias = _alias_of(name, fixed) if name not in fixed else None
        how = src.get(name if name in fixed else alias, "the entry's default") if (name in fixed or alias) else \
            "the entry's default"
        info[name] = {"value": str(v), "from": how + (f" {alias} = {fixed[alias]}" if alias else ""), "constant": True}
        if how.startswith("the file's metadata"):
            info[name]["described"] = f"{v} (declared in the file's metadata)"
    return values, info


def _not_in_file(dropped: dict) -> str:
    """The specification's regions and sections the file's state does not hold ("" if none)."""
    parts = []
    if dropped["regions"]:
        parts.append("regions " + ", ".join(dropped["regions"]))
    if dropped["sections"]:
        parts.append("sections " + ", ".join(dropped["sections"]))
    return "; ".join(parts)


def _training_text(v: dict) -> str:
    if "value" in v:
        return f"{v['value']} ({v['what']})"
    return f"{v['tensors']} tensors, {v['entries']} entries ({v['what']})"


def _verdict_line(res) -> str:
    return "PROVED" if res.ok else "FAILED"


def cmd_import(a, out) -> int:
    from verify import bounded

    bounded.check(a)  # --proof-memory-gib, --proof-timeout
    st = settings(a)
    # everything after the checks proves (parameters solved from the file, the proof, the nearby
    # search): in a child under the proof limits, its output streamed back (verify/bounded.py)
    return bounded.run_command(lambda o: _prove_import(a, st, o), out, a, a.file)


def _prove_import(a, st, out) -> int:
    spec, imp, con = st["spec"], st["imported"], st["con"]
    t0 = time.perf_counter()
    outside = getattr(imp, "not_proved", None) or {}
    training = getattr(imp, "training_state", None) or {}
    print(f"import: {imp.file} ({imp.format}, {len(imp.layers)} layers, {imp.dtype}; {len(imp.tensors)} tensors"
          + (f" of the blocks read, {len(outside)} more not proved (--blocks-only)" if outside else ", all read")
          + ")", file=out)
    if outside:
        print(f"  not proved (--blocks-only): {describe_not_proved(outside)}", file=out)
    for k, v in training.items():
        print(f"  training state {k}: {_training_text(v)}; not part of the model", file=out)
    print(f"  specification: {spec.name} [{spec.reference}]; sizes " +
          ", ".join(f"{k}={v} ({st['size_src'].get(k, '')})" for k, v in st["sizes"].items()), file=out)
    for k, c in imp.conventions.items():
        print(f"  convention {k}: {c['value']} ({c['from']})", file=out)
    dropped = con.dropped()
    print(f"  layout: {st['layout_src']}; the file's state {con.layout.shape[0]} x {con.layout.shape[1]}; "
          f"{spec.name}'s {spec.layout.shape[0]} x {spec.layout.shape[1]}", file=out)
    if dropped["regions"] or dropped["sections"] or dropped["file_only_channels"]:
        print("  not in the file (the specification's own, not part of the claim): "
              + "; ".join(x for x in [("regions " + ", ".join(dropped["regions"])) if dropped["regions"] else "",
                                      ("sections " + ", ".join(dropped["sections"])) if dropped["sections"] else "",
                                      ("file-only channels " + str(dropped["file_only_channels"]) + " must stay 0")
                                      if dropped["file_only_channels"] else ""] if x), file=out)
    values, pinfo = _params_for(st, imp.layers, out)
    for name, inf in pinfo.items():
        print(f"  {name} = {_shown(inf)} (from {inf['from']})", file=out)
    if _declared_note(imp):
        print(f"  declared rationals: {_declared_note(imp)}", file=out)
    con = st["build"](**values) if values else con
    res = search.prove_stack(con, imp.layers)
    from verify.cli_common import print_proof

    print_proof(res, out)
    report = {"command": "import", "file": imp.file, "format": imp.format, "dtype": imp.dtype,
              "spec": spec.name, "spec_reference": spec.reference, "sizes": st["sizes"], "size_sources": st["size_src"],
              "k": st["k"], "layers": len(imp.layers), "conventions": imp.conventions, "tensors": imp.tensors,
              "layout": st["layout"], "layout_source": st["layout_src"], "not_in_file": dropped,
              "parameters": pinfo, "proof": res.to_json(), "not_proved": dict(outside),
              "training_state": training}
    if getattr(imp, "declared_rationals", None) is not None:
        report["declared_rationals"] = {k: v for k, v in imp.declared_rationals.items() if k != "summary"}
    verdict = {"ok": res.ok}
    if res.ok:
        note = ""
        for name, v in values.items():
            dec = search.shortest_decimal(v, imp.dtype)
            fails_at = pinfo[name].get("_fails_at")
            if dec is not None and fails_at is not None and fails_at(dec):
                note += (f"; not at {name} = {dec} (a residual coefficient does not vanish there): the file equals "
                         f"the construction at the float-rounded {name}")
                verdict[f"{name}_decimal"] = {"value": str(dec), "ok": False}
        dr = getattr(imp, "declared_rationals", None)  # polyverify files: entries read as declared rationals
        if dr is not None:
            note += f"; {dr['summary']}"
        missing = _not_in_file(dropped)
        verdict["scope"] = ("every region and section of the specification" if not missing else
                            "the regions the layout maps; not in the file: " + missing)
        claim = spec.name if not missing else f"{spec.name} on the regions the layout maps (not in the file: {missing})"
        if outside:
            verdict["not_proved"] = list(outside)
            note += f"; not proved: {describe_not_proved(outside)}"
        subject = "PROVED (the blocks only): the file's blocks compute" if outside else "PROVED: the file computes"
        print(f"verdict: {subject} {claim} at every depth (k = {st['k']} in the file)"
              + "".join(f", {n} = {pinfo[n].get('described', pinfo[n]['value'])}" for n in pinfo) + note, file=out)
    else:
        f = res.failure
        print(f"verdict: FAILED: the file is not {spec.name}; first wrong layer: stack layer {f.layer} "
              f"({f.section} layer {f.layer_in_section}, located by {f.located_by})"
              + (f"; {imp.declared_rationals['summary']}" if getattr(imp, "declared_rationals", None) else "")
              + (f"; not proved (--blocks-only): {describe_not_proved(outside)}" if outside else ""),
              file=out)
        if outside:
            verdict["not_proved"] = list(outside)
        if f.layer == 0:
            hint = ("the first layer already differs: if the file orders its tokens or channels otherwise than "
                    + (f"the layout {a.layout}" if a.layout else st["layout_src"])
                    + (", that layout may not match the file" if a.layout else ", a --layout L.json may be missing")
                    + " (docs/interop.md)")
            verdict["hint"] = hint
            print(f"  {hint}", file=out)
        if not a.no_search:
            tried = []
            for label, layers in search.variants(imp.layers):
                vals, vinfo = _params_for(st, layers, out)
                r = search.prove_stack(st["build"](**vals) if vals else st["con"], layers)
                tried.append({"variant": label, "ok": r.ok, "parameters": vinfo,
                              "failure": None if r.ok else f"stack layer {r.failure.layer}: {r.failure.region} "
                                                           f"{list(r.failure.entry)}"})
                print(f"  nearby: {label}: {_verdict_line(r)}"
                      + "".join(f", {n} = {_shown(vinfo[n])}"
                                + ("" if vinfo[n]["from"].startswith("the file:") else
                                   " (" + vinfo[n]["from"].split(";")[0] + ")")
                                for n in vals)
                      + ("" if r.ok else f" (stack layer {r.failure.layer})"), file=out)
            given_differs = [n for n in spec.symbolic_params if n in values and n in pinfo
                             and not pinfo[n]["from"].startswith("the file:")
                             and not pinfo[n]["from"].startswith("the entry's default")]
            for name in given_differs:  # --set or the metadata gave it: the value the weights carry
                sol = search.solve_param(lambda **kw: st["build"](**kw), name, imp.layers)
                if sol and sol["value"] is not None and sol["value"] != values[name]:
                    vals = {**values, name: sol["value"]}
                    r = search.prove_stack(st["build"](**vals), imp.layers)
                    label = (f"{name} read from the file = "
                             f"{search.describe_value(sol['value'], imp.dtype, declared=_declared_note(imp) != '')}")
                    tried.append({"variant": label, "ok": r.ok})
                    print(f"  nearby: {label}: {_verdict_line(r)}", file=out)
            tried += nearby_specifications(a, st, out)
            report["nearby"] = tried
            if not any(t["ok"] for t in tried):
                print("  no nearby specification holds either", file=out)
    report["verdict"] = verdict
    for inf in pinfo.values():
        inf.pop("_fails_at", None)
    for t in report.get("nearby", []):
        for inf in (t.get("parameters") or {}).values():
            inf.pop("_fails_at", None)
    report["seconds"] = time.perf_counter() - t0
    if st["json_path"]:
        atomic_write_text(st["json_path"], json.dumps(report, indent=1, default=str), "--json")
        print(f"report written to {st['json_path']}", file=out)
    return 0 if res.ok else 1
