"""Self-describing files (issue 44 item 2): a file this toolkit exported names its construction, sizes,
parameters and layout, so that ``python -m verify.construct import FILE --from FORMAT`` proves it with no
other flag.

* The peers' formats (``verify/export.py``): the config the file holds (a ``.pt`` checkpoint's ``config``,
  a safetensors file's ``config`` metadata) gets a ``"polyverify"`` entry,
  ``{"format": "polyverify-export/1", "spec": NAME, "sizes": {...}, "params": {...}, "layout": {...}}``
  (:func:`describe`); the peer's own loader reads the keys it knows and leaves this one.  An ``.npz`` file
  holds no config, so it is not self-describing (the export prints the flags an import needs).
* This toolkit's own files (``polyverify``): the ``construction`` metadata ``constructions/weights_io.py``
  writes (name, variables, parameters) is the description; the sizes are found from it
  (:func:`from_declared`).
* A compiled circuit (``constructions/compiler/``) exported to a peer's format: no catalogue entry builds it, so
  its description names the compile instead of an entry, ``{"format": "polyverify-export/1", "circuit":
  {"name", "target", "state": [tokens, channels]}, "layout": {...}}`` (:func:`describe_circuit`; the layout with
  the export's constant channels where it has them), and ``import FILE --from FORMAT --circuit G.json`` reads the
  target and the layout from it (:func:`circuit_settings`; ``--target`` and ``--layout`` still win).  The
  circuit itself is not in the file: the import compiles the one it is given, and a recorded state whose shape
  is not that compile's is refused in one line.

A description is written only where it is checked: the entry named, built at the sizes and parameters
written, must give the exported construction's own layers, variables and layout exactly
(:func:`find_sizes`), else the file carries none and the import needs ``--spec`` as for a peer's own
file.  A peer's own file (no ``"polyverify"`` entry) keeps today's flags.
"""
from __future__ import annotations

import itertools
import time
from fractions import Fraction

from .common import ImportRefused

EXPORT_FORMAT = "polyverify-export/1"
#: the most builds tried when searching an entry's sizes, and the seconds spent at most
MAX_BUILDS, MAX_SECONDS = 200, 10.0


def _entry(name: str):
    from constructions.catalogue import entries, gd_architectures

    return entries().get(name) or gd_architectures().get(name)


def _builder_params(entry, params: dict) -> dict:
    """The parameters the entry's builder takes, from a construction's ``params`` (LSA's ``sqrt_eta``
    as ``eta = sqrt_eta^2`` where the builder takes ``eta``)."""
    from .specs import builder_keywords, size_keys_of

    kw, anykw = builder_keywords(entry)
    sizes = size_keys_of(entry)
    out = {k: v for k, v in params.items() if (k in kw or anykw) and k not in sizes}
    for base in ("eta", "lam"):
        root = f"sqrt_{base}"
        if root in out and base in kw and base not in out:
            out[base] = Fraction(out.pop(root)) ** 2
    return out


def _matches(con, built, layers: bool) -> bool:
    """``built`` is ``con``: its variables and parameters, and with ``layers`` its layout and layers
    exactly."""
    from constructions.base import Construction
    from constructions.weights_io import same_layer

    if not isinstance(built, Construction):
        return False
    if {k: tuple(v) for k, v in built.variables.items()} != {k: tuple(v) for k, v in con.variables.items()}:
        return False
    if {k: str(v) for k, v in built.params.items()} != {k: str(v) for k, v in con.params.items()}:
        return False
    if layers:
        if tuple(built.layout.shape) != tuple(con.layout.shape):
            return False
        a, b = built.layers(1), con.layers(1)
        return len(a) == len(b) and all(x.kind == y.kind and same_layer(x, y) for x, y in zip(a, b))
    return True


def find_sizes(entry, con, *, layers: bool = True) -> dict | None:
    """The sizes at which ``entry`` builds ``con`` (its variables and parameters and, with ``layers``,
    its layout and layers exactly), or None: a gd architecture's ``n``, ``d`` from ``A``; else the
    entry's default sizes, then sizes taken from the variables' dimensions, fewest changed first (at
    most :data:`MAX_BUILDS` builds, :data:`MAX_SECONDS` seconds).  ``con`` needs ``variables``,
    ``params`` (and ``layout``, ``layers`` with ``layers``)."""
    params = _builder_params(entry, dict(con.params))
    if "gd" in entry.roles:
        A = con.variables.get("A")
        candidates = iter([{"n": int(A[0]), "d": int(A[1])}] if A is not None and len(A) == 2 else [])
    else:
        defaults = dict(entry.sizes or {})
        dims = sorted({int(x) for s in con.variables.values() for x in s}
                      | ({int(x) for x in con.layout.shape} if layers else set()))
        keys = list(defaults)
        candidates = ({**defaults, **dict(zip(ks, vals))} for changed in range(len(keys) + 1)
                      for ks in itertools.combinations(keys, changed)
                      for vals in itertools.product(*[[x for x in dims if x != defaults[k]] for k in ks]))
    t0 = time.monotonic()
    for sizes in itertools.islice(candidates, MAX_BUILDS):
        if time.monotonic() - t0 > MAX_SECONDS:
            return None
        try:
            built = entry.build(sizes["n"], sizes["d"], **params) if "gd" in entry.roles else \
                entry.build(**sizes, **params)
        except Exception:  # noqa: BLE001 - sizes the builder refuses are not the ones
            continue
        if _matches(con, built, layers):
            return sizes
    return None


def _description(entry, sizes: dict, params: dict, shape=None) -> dict:
    """The description; the layout the identity (every token and channel the construction's own)."""
    layout = {"format": "polyverify-layout/1"}
    if shape is not None:
        layout.update({"tokens": list(range(int(shape[0]))), "columns": list(range(int(shape[1])))})
    return {"format": EXPORT_FORMAT, "spec": entry.name, "sizes": sizes,
            "params": {k: str(v) for k, v in _builder_params(entry, params).items()}, "layout": layout}


def describe(con) -> dict | None:
    """The description an export writes for ``con`` (module docstring), or None where no registered
    entry builds it at sizes found here (a compiled circuit, a construction built by hand)."""
    entry = _entry(con.name) if con is not None else None
    sizes = find_sizes(entry, con) if entry is not None else None
    return None if sizes is None else _description(entry, sizes, dict(con.params), con.layout.shape)


def describe_circuit(con) -> dict | None:
    """A compiled circuit's description (module docstring): the compile's name, target and state shape, and
    the identity layout of its state (the export adds its constant channels); None for anything else."""
    info = getattr(con, "info", None)
    compiled = info.get("compiled") if isinstance(info, dict) else None
    if con is None or not isinstance(compiled, dict) or not isinstance(compiled.get("target"), str):
        return None
    R, C = (int(x) for x in con.layout.shape)
    return {"format": EXPORT_FORMAT, "circuit": {"name": str(con.name), "target": compiled["target"], "state": [R, C]},
            "layout": {"format": "polyverify-layout/1", "tokens": list(range(R)), "columns": list(range(C))}}


def from_config(cfg, path, *, circuit: bool = False) -> dict | None:
    """The description in a peer-format file's config (``cfg["polyverify"]``), checked; None where the
    file has none (a peer's own file).  A compiled circuit's description is returned only with ``circuit``
    (``import --circuit``); without it such a file is refused in one line naming ``--circuit``."""
    d = cfg.get("polyverify") if isinstance(cfg, dict) else None
    if d is None:
        return None
    if not isinstance(d, dict) or d.get("format") != EXPORT_FORMAT:
        raise ImportRefused(f"{path}: its config's 'polyverify' entry is not a {EXPORT_FORMAT} description")
    if "circuit" in d:
        c = _circuit_description(d, path)
        if not circuit:
            raise ImportRefused(f"{path} holds the circuit {c['name']!r} compiled to {c['target']} (its description "
                                f"names no catalogue construction): pass --circuit G.json, the circuit it was "
                                f"compiled from")
        return d
    for key, typ in (("spec", str), ("sizes", dict), ("params", dict), ("layout", dict)):
        if not isinstance(d.get(key), typ):
            raise ImportRefused(f"{path}: its {EXPORT_FORMAT} description has no valid {key!r}")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in d["sizes"].values()):
        raise ImportRefused(f"{path}: its {EXPORT_FORMAT} description's sizes are not integers")
    return d


def _circuit_description(d: dict, path) -> dict:
    """A compiled circuit's description checked (:func:`describe_circuit`'s keys and types); its ``circuit``."""
    c = d.get("circuit")
    ok = (isinstance(c, dict) and isinstance(c.get("name"), str) and isinstance(c.get("target"), str)
          and isinstance(c.get("state"), list) and len(c["state"]) == 2
          and all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in c["state"])
          and isinstance(d.get("layout"), dict))
    if not ok:
        raise ImportRefused(f"{path}: its {EXPORT_FORMAT} description of a compiled circuit needs 'circuit' "
                            f"{{name, target, state: [tokens, channels]}} and a 'layout'")
    return c


def circuit_settings(a, mod, cfg: dict, layout_d):
    """``import FILE --from FORMAT --circuit G.json`` (``verify/importers/cli.py``): the compiled circuit as the
    specification entry, the file read (None for ``polyverify``, which the import reads against the entry) and the
    layout.  A peer-format file is read first: its compiled circuit's description (:func:`describe_circuit`) gives
    the target where ``--target`` is not given and the layout where ``--layout`` is not given (the export's
    constant channels included); a file without one keeps the compiled stack's own state (the identity).  A
    recorded state that is not the compiled stack's is refused in one line, before any proof."""
    from polyverify.plumbing.cli import UsageError
    from verify.cli_common import input_file

    from . import mapping
    from .cli import circuit_entry, read_checked

    imp = circ = None
    if a.fmt != "polyverify":
        from constructions.compiler import TARGETS

        if a.target is not None and a.target not in TARGETS:  # the arguments first, before the file is read
            raise UsageError(f"--target {a.target!r}: not a compiler target ({', '.join(TARGETS)})")
        input_file("--circuit", a.circuit)
        try:
            check = getattr(mod, "check_config", None)
            if check is not None:
                check(cfg)
            input_file("", a.file)
            imp = mod.read(a.file, cfg)
            desc = from_config(getattr(imp, "file_config", None), a.file, circuit=True)
        except ImportRefused as e:
            raise UsageError(str(e)) from None
        read_checked(a, imp)
        circ = desc if desc is not None and "circuit" in desc else None
        if circ is not None and a.target is None:
            a.target = circ["circuit"]["target"]  # the target the file was compiled to
    entry = circuit_entry(a)
    shape = [int(x) for x in entry.con.layout.shape]
    if layout_d is None and circ is not None:
        c = circ["circuit"]
        if c["state"] != shape:
            raise UsageError(f"{a.file} holds the circuit {c['name']!r} compiled to {c['target']} on a {c['state'][0]} x "
                             f"{c['state'][1]} state; {a.circuit} compiled to {a.target or 'its default target'} acts "
                             f"on {shape[0]} x {shape[1]}: not the circuit the file was exported from (pass --layout "
                             f"to map it)")
        layout_d = dict(circ["layout"])
    elif layout_d is None:  # an export's state is the compiled stack's
        layout_d = {"format": mapping.FORMAT, "tokens": list(range(shape[0])), "columns": list(range(shape[1]))}
    return entry, imp, layout_d


def from_declared(declared: dict | None, path) -> dict | None:
    """A polyverify file's ``construction`` metadata as a description (its sizes found from its
    variables and parameters), or None without metadata."""
    if not declared:
        return None
    name = declared.get("name")
    entry = _entry(name) if isinstance(name, str) else None
    if entry is None:
        raise ImportRefused(f"{path} declares the construction {name!r}, which is not a gd architecture or a "
                            f"catalogue entry: pass --spec SPEC")
    con = type("Declared", (), {})()
    con.name = name
    con.variables = {k: tuple(v) for k, v in (declared.get("variables") or {}).items()}
    con.params = {k: _value(v) for k, v in (declared.get("params") or {}).items()}
    sizes = find_sizes(entry, con, layers=False)
    if sizes is None:
        raise ImportRefused(f"{path} declares {name} with variables {declared.get('variables')}; no sizes of {name} "
                            f"found give them: pass --spec {name} --set KEY=VALUE")
    return {**_description(entry, sizes, con.params), "layout": None}  # the polyverify importer's own: the identity


def _value(v):
    try:
        return Fraction(str(v))
    except (ValueError, ZeroDivisionError):
        return v
