"""The proving part of ``python -m verify.construct import``: after the command's checks
(``verify/importers/cli.py``, :func:`~verify.importers.cli.settings`), the specification's
parameters read from the file, the proof, the verdict and, on failure, the nearby variants and
specifications tried (:func:`nearby_specifications`).  :func:`prove_bounded` runs the verdict in a
child under the proof limits (``verify/bounded.py``), then the nearby search in another: a printed
verdict is final, a search past a limit one line of its own."""
from __future__ import annotations

import time
from fractions import Fraction

from polyverify.plumbing.cli import UsageError, atomic_write_text, report_json
from polyverify.plumbing.rational import parse_rational
from verify.prover.kernel import is_proved, verdict

from . import FORMATS, mapping, search
from .common import ImportRefused, ParamSource, describe_not_proved
from .shapes import check_layer_shapes
from .specs import alias_of, build_spec, builder_keywords, size_keys_of, builder_takes


#: a nearby specification is tried only where the file determines at most this many of its
#: parameters (s004-implicit-w's 36 matrix entries are a weight matrix, not a step size)
MAX_NEARBY_PARAMS = 4


def _candidate(name: str, entry, st, mod) -> dict | None:
    """Another named specification (a ``gd`` architecture or a catalogue entry) projected onto the
    file as the import would project it (the file's sizes, the importer's default layout), or
    None where it cannot hold the file: not a layer stack, other layer kinds, no default layout,
    other layer shapes or counts, more than :data:`MAX_NEARBY_PARAMS` parameters to read."""
    imp = st["imported"]
    sk = size_keys_of(entry)
    sizes = ({"n": 20, "d": 5} if "gd" in entry.roles else dict(entry.sizes or {}))
    sizes.update({k: v for k, v in st["sizes"].items() if k in sk})
    try:
        spec = build_spec(entry, sizes, {})
    except UsageError:
        return None
    if sum(builder_takes(entry, n) for n in spec.symbolic_params) > MAX_NEARBY_PARAMS:
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
    base = {k: spec.params[k] for k in spec.symbolic_params} if builder_keywords(entry)[1] else {}

    def build(**over):
        return mapping.Projected(build_spec(entry, sizes, {**base, **over}) if over else spec, rows, cols, secs, shape,
                                 first)

    try:
        con = build()
        mapping.check_carried(con)
    except (ImportRefused, UsageError):
        return None
    return {"name": name, "entry": entry, "spec": spec, "imported": imp, "sizes": sizes, "given": {}, "fixed": {},
            "param_src": {}, "build": build, "con": con}


#: the other specifications' part of the nearby search decides which catalogue entries can hold the file (each
#: built at the file's sizes, in a child of its own) for at most this many seconds in all; the entries not
#: reached are named in one line (a compiled GD entry's build at 512x128 runs its circuit compiler for many
#: minutes: diagnosis after the verdict, bounded)
NEARBY_SPECS_SECONDS = 60.0
#: a candidate's child is given no limit of its own: this, lowered to the search child's own soft limit
#: (``bounded.within_soft_limit``: a child caps its limit by the hard limit only, which a bench's cap on the command
#: leaves at 8 GiB: a candidate's build reached 3.4 GiB under a 2.3 GiB search limit in the 512x128 bench row)
_NO_NEW_LIMIT = 1024.0


def nearby_specifications(a, st, out, not_tried: list | None = None) -> list[dict]:
    """The other named specifications the file may be: each ``gd`` architecture
    and catalogue entry that can hold the file (:func:`_candidate`), its parameters read from the
    file and proved, under the file's own reading (``prefix-coupled`` for precision-ls's causal
    notebook that fails as GD).  One entry per distinct specification: an entry that builds the
    specification already proved or tried (a ``gd`` architecture and its catalogue name) is not built
    again.  Whether an entry holds the file is decided in a child (``call_limited``) within what is left
    of :data:`NEARBY_SPECS_SECONDS`; the entries past it (or past the memory limit) are named in one line
    and appended to ``not_tried`` as ``{"specification", "why"}``."""
    from constructions.catalogue import entries, gd_architectures
    from polyverify.plumbing.child import Stopped, call_limited
    from polyverify.plumbing.cli import one_line
    from verify.bounded import within_soft_limit

    mod, imp = FORMATS[a.fmt], st["imported"]
    seen = {st["spec"].name}
    built = {getattr(st.get("entry"), "name", None)}
    tried, skipped = [], []
    t0 = time.monotonic()
    for name, entry in [*gd_architectures().items(), *entries().items()]:
        if entry.name in built:  # a gd architecture is its catalogue entry: one build
            continue
        built.add(entry.name)
        left = NEARBY_SPECS_SECONDS - (time.monotonic() - t0)
        if left <= 0:
            skipped.append({"specification": name, "why": f"past the search's {NEARBY_SPECS_SECONDS:g} s"})
            continue
        try:  # (the child keeps this process's address-space limit: the search's own)
            holds = call_limited(lambda: _candidate(name, entry, st, mod) is not None, timeout=left,
                                 memory_gb=within_soft_limit(_NO_NEW_LIMIT))
        except Stopped as e:
            why = {"time": f"past the search's {NEARBY_SPECS_SECONDS:g} s",
                   "memory": "building it at the file's sizes passed the search's memory limit"}.get(
                e.limit, f"building it at the file's sizes stopped: {one_line(str(e))}")
            skipped.append({"specification": name, "why": why})
            continue
        except Exception as e:  # noqa: BLE001 - a candidate that breaks is skipped, named; the search goes on
            skipped.append({"specification": name, "why": f"building it broke ({type(e).__name__}: {one_line(e)})"})
            continue
        c = _candidate(name, entry, st, mod) if holds else None
        if c is None or c["spec"].name in seen:
            continue
        seen.add(c["spec"].name)
        vals, vinfo, vsrc = _params_for(c, imp.layers, out)
        r = search.prove_stack(c["build"](**vals) if vals else c["con"], imp.layers,
                               shrink_seconds=search.NEARBY_SHRINK_SECONDS)
        label = f"specification {c['spec'].name} (the {a.fmt} importer's default layout)"
        tried.append({"variant": label, "specification": c["spec"].name, "ok": r.ok, "parameters": vinfo,
                      "failure": None if r.ok else f"stack layer {r.failure.layer}: {r.failure.region} "
                                                   f"{list(r.failure.entry)}"})
        print(f"  nearby: {label}: {_verdict_line(r)}"
              + "".join(f", {n} = {_shown(vinfo[n], vsrc[n])}" for n in vals)
              + ("" if r.ok else f" (stack layer {r.failure.layer})"), file=out)
    if skipped:
        whys = sorted({x["why"] for x in skipped})
        print(f"  nearby: {len(skipped)} specification{'s' if len(skipped) > 1 else ''} not tried ("
              + "; ".join(whys) + "): " + ", ".join(x["specification"] for x in skipped), file=out)
        if not_tried is not None:
            not_tried.extend(skipped)
    return tried


def _declared_note(imp) -> str:
    """How a polyverify file's declared rationals entered: the value is the
    metadata's, read because the stored float64 entries are exactly float64 of it."""
    dr = getattr(imp, "declared_rationals", None)
    if not dr or not dr.get("entries"):
        return ""
    return (f"{dr['entries']} entries of the file read as its metadata's declared rationals (each stored "
            f"float64 is exactly float64 of its rational), largest gap {dr['largest_gap_float']:.2g}")


def _shown(inf: dict, source: ParamSource) -> str:
    """A parameter's value as printed next to where it came from (``source``)."""
    return inf["value"] if source is ParamSource.METADATA else inf.get("described", inf["value"])


def _params_for(st, layers, out) -> tuple[dict, dict, dict]:
    """The specification's parameters: --set or the file's metadata (a polyverify file declaring
    the construction proved), else read from the file (solve), else the file's declared value,
    else the entry's default; with where each came from.  ``values`` holds the symbolic
    parameters (passed to ``build``); ``info`` every parameter of the specification (its ``"from"``:
    the English text); ``sources`` the :class:`ParamSource` of each."""
    spec, imp = st["spec"], st["imported"]
    fixed = st.get("fixed", st["given"])
    src = st.get("param_src", {k: ParamSource.SET_FLAG for k in st["given"]})
    declared = bool(getattr(imp, "declared_rationals", None) and imp.declared_rationals.get("entries"))
    values, info, sources = {}, {}, {}
    for name in spec.symbolic_params:
        alias = alias_of(name, fixed) if name not in fixed else None
        if name in fixed or alias:
            values[name] = fixed[name] if name in fixed else Fraction(spec.params[name])
            sources[name] = src.get(name if name in fixed else alias, ParamSource.SET_FLAG)
            how = sources[name].value
            if alias:
                how += f" {alias} = {fixed[alias]}"
            info[name] = {"value": str(values[name]), "from": how}
            if sources[name] is ParamSource.METADATA:
                info[name]["described"] = f"{values[name]} (declared in the file's metadata)"
            continue
        if not builder_takes(st["entry"], name):  # s000-linear's H_i_j: the entry's own matrix, not a builder argument
            values_fixed = Fraction(spec.params[name])
            sources[name] = ParamSource.OWN_VALUE
            info[name] = {"value": str(values_fixed), "from": "the entry's own value (its builder does not take "
                                                               f"{name}: the specification fixes it)", "constant": True}
            continue
        t0 = time.perf_counter()
        sol = search.solve_param(lambda **kw: st["build"](**kw), name, layers)
        dt = time.perf_counter() - t0
        if sol and sol["value"] is not None:
            values[name] = sol["value"]
            sources[name] = ParamSource.FILE
            how = ("the one value at which the file's layers can meet the specification" if sol["consistent"] else
                   f"the value most of the file's residuals carry ({sol['agree']} of {sol['of']} distinct residual "
                   f"entries at {sol['points']} integer points vanish there; no value makes them all vanish)")
            info[name] = {"value": str(sol["value"]),
                          "described": search.describe_value(sol["value"], imp.dtype, declared=declared),
                          "from": f"the file: {how}", "consistent": sol["consistent"], "solve_seconds": round(dt, 3),
                          "_fails_at": sol["fails_at"]}
        elif name in imp.declared_params:
            values[name] = parse_rational(str(imp.declared_params[name]), f"{name} (the file's metadata)")
            sources[name] = ParamSource.METADATA
            info[name] = {"value": str(values[name]), "from": "the file's metadata"}
        else:
            values[name] = Fraction(spec.params[name])
            sources[name] = ParamSource.DEFAULT
            why = ("the file does not determine it" if not sol else
                   f"the file carries no value: no two of its {sol['of']} distinct residual entries at {sol['points']} "
                   f"integer points share a root" + (" (shown modulo a 61-bit prime)" if sol.get("modulo") else ""))
            info[name] = {"value": str(values[name]), "from": f"the entry's default ({why})"}
            if sol:
                info[name]["solve_seconds"] = round(dt, 3)
                if sol.get("modulo"):
                    info[name]["solve_modulo"] = str(sol["modulo"])
    for name, v in spec.params.items():  # constants of the specification (a compiled stack's eta, lam)
        if name in info:
            continue
        alias = alias_of(name, fixed) if name not in fixed else None
        sources[name] = src.get(name if name in fixed else alias, ParamSource.DEFAULT) if (name in fixed or alias) \
            else ParamSource.DEFAULT
        how = sources[name].value
        info[name] = {"value": str(v), "from": how + (f" {alias} = {fixed[alias]}" if alias else ""), "constant": True}
        if sources[name] is ParamSource.METADATA:
            info[name]["described"] = f"{v} (declared in the file's metadata)"
    return values, info, sources


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
    return verdict(res).value


#: the diagnosis after a FAILED verdict (the functional distance, the nearby search) runs in children held to
#: the memory the verdict's own child added to the command (its peak resident memory less the parent's), so it
#: never raises the command's peak above the verdict's; at least this much (GiB: a small file's verdict adds
#: little, its search needs a few hundred MiB), and never more than --proof-memory-gib
DIAGNOSIS_MIN_GIB = 1.0


def _rss_bytes(field: str = "VmRSS") -> int | None:
    """This process's resident memory (``VmRSS``), its peak so far (``VmHWM``) or its address space
    (``VmSize``), bytes; None off Linux."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def diagnosis_memory_gib(a, verdict_peak: int | None) -> float:
    """The memory (GiB) a diagnosis child may map beyond what it starts with (``call_limited``'s limit: its
    address space at the fork plus this): the verdict child's peak resident memory (``verdict_peak``, which
    counts the pages it shares with the parent) less this process's address space (``VmSize``), at least
    :data:`DIAGNOSIS_MIN_GIB`, at most ``--proof-memory-gib``.  A child's resident memory is at most the
    parent's address space (what it inherits, resident or not) plus what it maps, so it stays within the
    verdict's peak wherever that is above the minimum (bench row at 512x128: a bound on the resident
    memory alone let a candidate's build reach 3.4 GiB after a 2.2 GiB verdict)."""
    here = _rss_bytes("VmSize")
    extra = (verdict_peak - here) / 2 ** 30 if verdict_peak and here else a.proof_memory_gib
    return min(a.proof_memory_gib, max(DIAGNOSIS_MIN_GIB, extra))


def _children_allowed() -> None:
    """In a diagnosis child (a daemonic ``multiprocessing`` child: ``polyverify.plumbing.child``), allow it
    children of its own (the certified bound's, the nearby search's candidates): ``multiprocessing``
    refuses a daemonic process children.  The grandchildren still die with it (``PR_SET_PDEATHSIG``)."""
    import multiprocessing as mp

    mp.current_process().daemon = False


def prove_bounded(a, st, out) -> int:
    """The command's proving part, under ``--proof-memory-gib`` / ``--proof-timeout``
    (``verify/bounded.py``): the parameters, the proof and the verdict in a child (past a limit:
    one line, exit 2, and no verdict printed); after a FAILED, the functional distance and the nearby search,
    each in a child of its own under the memory the verdict's child added (:func:`diagnosis_memory_gib`: the
    diagnosis never raises the command's peak above the verdict's) and the rest of the time.  A printed
    verdict is final: a diagnosis that runs out of time or memory is reported in a line of its own (and in
    the JSON report as ``functional_distance_stopped`` / ``nearby_stopped``) and the exit status stays the
    verdict's (1).  The report is written last, here."""
    from polyverify.plumbing.child import Stopped, call_limited
    from polyverify.plumbing.cli import one_line
    from verify import bounded

    t0 = time.monotonic()
    part = bounded.run_command(lambda o: _verdict_part(a, st, o), out, a, a.file)
    report = part["report"]
    memory = diagnosis_memory_gib(a, part.get("peak_bytes"))

    def stopped(what: str, e: Stopped, key: str) -> None:
        if e.limit == "memory":
            how = (f"the diagnosis is held to the memory the verdict used ({memory:.2f} GiB above the command's), "
                   f"so that it never raises the command's peak")
        elif e.limit == "broke":
            how = "a fault of the diagnosis, not of the file's proof"
        else:
            how = "raise " + {"time": "--proof-timeout"}.get(e.limit, "--proof-memory-gib or --proof-timeout")
        msg = f"{what} stopped: {one_line(str(e))}; the verdict above stands ({how}" + \
              (", or --no-search to skip it)" if key == "nearby_stopped" else ")")
        print(f"  {msg}", file=out)
        report[key] = msg

    def left() -> float:
        t = a.proof_timeout - (time.monotonic() - t0)
        if t < 1:
            raise Stopped("time", f"no time left of --proof-timeout {a.proof_timeout:g} s")
        return t

    if part["rc"] == 1:  # FAILED: how far apart the functions are (diagnosis; its certified part in a child)
        from verify.functional_distance import for_import

        con = st["build"](**part["values"]) if part["values"] else st["con"]
        try:
            def functional_distance():
                _children_allowed()
                return for_import(con, st["k"], st["imported"].layers, box=st["box"])

            functional = call_limited(functional_distance, timeout=left(), memory_gb=memory)
            print(f"  {functional.line()}", file=out)
            report["functional_distance"] = functional.to_json()
        except Stopped as e:
            stopped("functional distance", e, "functional_distance_stopped")
        except Exception as e:  # noqa: BLE001 - a diagnosis that breaks is one line; the verdict stands
            stopped("functional distance", Stopped("broke", f"it broke ({type(e).__name__}: {one_line(e)})"),
                    "functional_distance_stopped")
    if part["search"]:
        try:
            found = bounded.run_streamed(
                lambda o: _nearby_part(a, st, part["values"], part["pinfo"], part["psrc"], o), out, timeout=left(),
                memory_gb=memory)
            report["nearby"] = found["tried"]
            if found["not_tried"]:
                report["nearby_not_tried"] = found["not_tried"]
        except Stopped as e:
            stopped("nearby search", e, "nearby_stopped")
        except Exception as e:  # noqa: BLE001 - a diagnosis that breaks is one line; the verdict stands
            stopped("nearby search", Stopped("broke", f"it broke ({type(e).__name__}: {one_line(e)})"),
                    "nearby_stopped")
    _write_report(report, st, time.monotonic() - t0, out)
    return part["rc"]


def _verdict_part(a, st, out) -> dict:
    """The parameters, the proof and the verdict, printed; returns what the rest needs (it crosses
    from the proof's child: plain data): ``rc``, the ``report`` so far, ``search`` (a FAILED to
    search near), the parameter ``values`` and their ``pinfo``."""
    spec, imp = st["spec"], st["imported"]
    outside = getattr(imp, "not_proved", None) or {}
    training = getattr(imp, "training_state", None) or {}
    dropped = _print_reading(st, outside, training, out)
    from verify.prover.refute import shared_memo

    with shared_memo():  # the solve's exact layers and residues are the refutation's (verify/prover/refute.py)
        values, pinfo, psrc = _params_for(st, imp.layers, out)
        for name, inf in pinfo.items():
            print(f"  {name} = {_shown(inf, psrc[name])} (from {inf['from']})", file=out)
        if _declared_note(imp):
            print(f"  declared rationals: {_declared_note(imp)}", file=out)
        con = st["build"](**values) if values else st["con"]
        if getattr(a, "check", "exact") == "random":
            return _random_part(a, st, con, values, pinfo, psrc, out)
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
    near = None
    if is_proved(res):
        report["verdict"] = _verdict_proved(st, values, pinfo, dropped, outside, out)
    else:
        from verify.nearest import guarded, import_nearest  # diagnosis of a FAILED file: how far, from what

        near = guarded(lambda: import_nearest(st, values, imp.layers), spec.name)
        report["verdict"] = _verdict_failed(a, st, res.failure, outside, out, near,
                                            _used_line(st, values, imp.layers, near))
        report["nearest"] = near.to_json()
    report["verdict"]["distance_markdown"] = _distance_md(a, imp, verdict(res).value, near)
    for inf in pinfo.values():
        inf.pop("_fails_at", None)
    return {"rc": 0 if is_proved(res) else 1, "report": report, "search": not is_proved(res) and not a.no_search,
            "values": values, "pinfo": pinfo, "psrc": psrc, "peak_bytes": _rss_bytes("VmHWM")}


def _random_part(a, st, con, values: dict, pinfo: dict, psrc: dict, out) -> dict:
    """``--check random`` (as ``gd --weights --check random``): the randomized identity test of the
    file's prologue, each distinct body copy and epilogue modulo a random 61-bit prime
    (``verify/prover/randomized.py``).  Never PROVED: "PASSED randomized identity test" with its
    error bound (exit 0), or a counterexample modulo p, a definite failure (exit 1), then the nearest
    construction of the specification's family (diagnosis) and the nearby search."""
    from verify.cli_common import print_proof
    from verify.prover.randomized import RandomizedUnsupported, check

    spec, imp = st["spec"], st["imported"]
    secs = search.split(con, imp.layers)
    sections = {"prologue": secs["prologue"], "bodies": search.distinct_bodies(secs), "epilogue": secs["epilogue"],
                "k": secs["k"]}
    try:
        res = check(con, sections=sections, seed=a.random_seed)
    except RandomizedUnsupported as e:
        raise UsageError(f"{imp.file}: {e}") from None
    print_proof(res, out)
    outside = getattr(imp, "not_proved", None) or {}
    report = {"command": "import", "check": "random", "file": imp.file, "format": imp.format, "dtype": imp.dtype,
              "spec": spec.name, "spec_reference": spec.reference, "sizes": st["sizes"], "size_sources": st["size_src"],
              "k": st["k"], "layers": len(imp.layers), "conventions": imp.conventions, "tensors": imp.tensors,
              "layout": st["layout"], "layout_source": st["layout_src"], "parameters": pinfo,
              "randomized": res.to_json(), "not_proved": dict(outside)}
    params = "".join(f", {n} = {pinfo[n].get('described', pinfo[n]['value'])}" for n in pinfo)
    not_proved = f"; not checked (--blocks-only): {describe_not_proved(outside)}" if outside else ""
    near = None
    if res.ok:
        print(f"verdict: {res.verdict_line()}: the file computes {spec.name} at k = {st['k']}{params} (not a proof: "
              f"--check exact proves it){not_proved}", file=out)
        report["verdict"] = {"ok": True, "word": res.verdict}
    else:
        from verify.nearest import guarded, import_nearest  # diagnosis of a FAILED file: how far, from what

        f = res.failure
        near = guarded(lambda: import_nearest(st, values, imp.layers), spec.name)
        summary = near.verdict_text(_used_line(st, values, imp.layers, near))
        print(f"verdict: FAILED: the file is not {spec.name}; {f.section} differs modulo p (stack layer {f.layer}, "
              f"region {f.region!r} entry {list(f.entry)}; a definite failure){not_proved}; {summary}",
              file=out)
        for line in near.lines():
            print(f"  {line}", file=out)
        report["verdict"] = {"ok": False, "word": res.verdict}
        report["nearest"] = near.to_json()
    report["verdict"]["distance_markdown"] = _distance_md(a, imp, res.verdict_line(), near)
    for inf in pinfo.values():
        inf.pop("_fails_at", None)
    return {"rc": 0 if res.ok else 1, "report": report, "search": not res.ok and not a.no_search,
            "values": values, "pinfo": pinfo, "psrc": psrc, "peak_bytes": _rss_bytes("VmHWM")}


def _nearby_part(a, st, values: dict, pinfo: dict, psrc: dict, out) -> dict:
    """After a FAILED: the nearby search, printed; its report entries (plain data): ``tried`` and
    ``not_tried`` (the specifications the search's bound left out, :func:`nearby_specifications`)."""
    _children_allowed()  # each candidate specification is built in a child (nearby_specifications)
    not_tried: list = []
    tried = _nearby(a, st, values, pinfo, psrc, out, not_tried)
    if not any(t["ok"] for t in tried):
        print("  no nearby specification holds either" + (" (of those tried)" if not_tried else ""), file=out)
    for t in tried:
        for inf in (t.get("parameters") or {}).values():
            inf.pop("_fails_at", None)
    return {"tried": tried, "not_tried": not_tried}


def _distance_md(a, imp, word: str, near) -> str | None:
    """``--distance-report``'s markdown (made in the proof's child, written by the parent), or None."""
    if not getattr(a, "distance_report", None):
        return None
    from verify.nearest import distance_markdown

    return {"path": a.distance_report, "text": distance_markdown(imp.file, word, None, near)}


def _write_report(report: dict, st, seconds: float, out) -> None:
    """``--json``: the report, written last (after the verdict and any search); ``--distance-report``
    beside it."""
    md = report.get("verdict", {}).pop("distance_markdown", None)
    if md is not None:
        atomic_write_text(md["path"], md["text"], "--distance-report")
        print(f"distance report written to {md['path']}", file=out)
    report["seconds"] = seconds
    if st["json_path"]:
        atomic_write_text(st["json_path"], report_json(report), "--json")
        print(f"report written to {st['json_path']}", file=out)


def _print_reading(st, outside: dict, training: dict, out) -> dict:
    """What was read and how it maps: the file, the tensors not proved, the training state, the
    specification and its sizes, the conventions, the layout and what of the specification the file
    does not hold (returned: ``con.dropped()``)."""
    spec, imp, con = st["spec"], st["imported"], st["con"]
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
    if getattr(con, "constants", None):  # the layout's constant channels: read by the proof
        print(f"  constant channels (set on the input, checked unchanged after every section): "
              f"{mapping.describe_constants(con.constants)}", file=out)
    if dropped["regions"] or dropped["sections"] or dropped["file_only_channels"]:
        print("  not in the file (the specification's own, not part of the claim): "
              + "; ".join(x for x in [("regions " + ", ".join(dropped["regions"])) if dropped["regions"] else "",
                                      ("sections " + ", ".join(dropped["sections"])) if dropped["sections"] else "",
                                      ("file-only channels " + str(dropped["file_only_channels"]) + " must stay 0")
                                      if dropped["file_only_channels"] else ""] if x), file=out)
    return dropped


def _verdict_proved(st, values: dict, pinfo: dict, dropped: dict, outside: dict, out) -> dict:
    """The PROVED verdict, printed: the claim, its scope, the parameters and what is not proved."""
    spec, imp = st["spec"], st["imported"]
    verdict = {"ok": True}
    note = ""
    for name, v in values.items():
        dec = search.shortest_decimal(v, imp.dtype)
        fails_at = pinfo[name].get("_fails_at")
        if dec is not None and fails_at is not None and fails_at(dec):
            note += (f"; not at {name} = {dec} (a residual entry at an integer point does not vanish there): "
                     f"the file equals the construction at the float-rounded {name}")
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
    return verdict


def _used_line(st, values: dict, layers, near) -> str | None:
    """Where the nearest construction was not fitted (a bound of ``verify/nearest.py``), the exact weight
    distance at the parameters used, so that the verdict line of a FAILED file still gives a distance."""
    if near is None or not near.skipped:
        return None
    from verify.nearest import guarded_line, import_used_line

    return guarded_line(lambda: import_used_line(st, values, layers))


def _verdict_failed(a, st, f, outside: dict, out, near=None, used_line: str | None = None) -> dict:
    """The FAILED verdict, printed: the first wrong layer, the distance to the nearest construction of
    the specification's family (``verify/nearest.py``: its own lines, the verdict stays the file's),
    and a hint where the first layer is wrong."""
    spec, imp = st["spec"], st["imported"]
    verdict = {"ok": False}
    print(f"verdict: FAILED: the file is not {spec.name}; first wrong layer: stack layer {f.layer} "
          f"({f.section} layer {f.layer_in_section}, located by {f.located_by})"
          + (f"; {imp.declared_rationals['summary']}" if getattr(imp, "declared_rationals", None) else "")
          + (f"; not proved (--blocks-only): {describe_not_proved(outside)}" if outside else "")
          + (f"; {near.verdict_text(used_line)}" if near is not None else ""), file=out)
    for line in near.lines() if near is not None else []:
        print(f"  {line}", file=out)
    if outside:
        verdict["not_proved"] = list(outside)
    if f.layer == 0:
        hint = ("the first layer already differs: if the file orders its tokens or channels otherwise than "
                + (f"the layout {a.layout}" if a.layout else st["layout_src"])
                + (", that layout may not match the file" if a.layout else ", a --layout L.json may be missing")
                + " (docs/interop.md)")
        verdict["hint"] = hint
        print(f"  {hint}", file=out)
    return verdict


def _nearby(a, st, values: dict, pinfo: dict, psrc: dict, out, not_tried: list | None = None) -> list[dict]:
    """After a failure: the file's variants (``search.variants``), each parameter given by --set or
    the metadata at the value the weights carry, and the nearby specifications; printed, and
    returned as the report's ``nearby``."""
    spec, imp = st["spec"], st["imported"]
    tried = []
    for label, layers in search.variants(imp.layers):
        vals, vinfo, vsrc = _params_for(st, layers, out)
        r = search.prove_stack(st["build"](**vals) if vals else st["con"], layers,
                               shrink_seconds=search.NEARBY_SHRINK_SECONDS)
        tried.append({"variant": label, "ok": r.ok, "parameters": vinfo,
                      "failure": None if r.ok else f"stack layer {r.failure.layer}: {r.failure.region} "
                                                   f"{list(r.failure.entry)}"})
        print(f"  nearby: {label}: {_verdict_line(r)}"
              + "".join(f", {n} = {_shown(vinfo[n], vsrc[n])}"
                        + ("" if vsrc[n] is ParamSource.FILE else
                           " (" + vinfo[n]["from"].split(";")[0] + ")")
                        for n in vals)
              + ("" if r.ok else f" (stack layer {r.failure.layer})"), file=out)
    given_differs = [n for n in spec.symbolic_params if n in values and n in pinfo
                     and psrc[n] not in (ParamSource.FILE, ParamSource.DEFAULT)]
    for name in given_differs:  # --set or the metadata gave it: the value the weights carry
        sol = search.solve_param(lambda **kw: st["build"](**kw), name, imp.layers)
        if sol and sol["value"] is not None and sol["value"] != values[name]:
            vals = {**values, name: sol["value"]}
            r = search.prove_stack(st["build"](**vals), imp.layers, shrink_seconds=search.NEARBY_SHRINK_SECONDS)
            label = (f"{name} read from the file = "
                     f"{search.describe_value(sol['value'], imp.dtype, declared=_declared_note(imp) != '')}")
            tried.append({"variant": label, "ok": r.ok})
            print(f"  nearby: {label}: {_verdict_line(r)}", file=out)
    return tried + nearby_specifications(a, st, out, not_tried)
