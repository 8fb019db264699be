"""The catalogue: every construction of the seeds, and every known erratum.

Each module of this package registers its items at import:

* :func:`register` a :class:`CatalogueEntry`: a named construction or claim,
  ``python -m verify.construct NAME`` builds it with ``sizes`` (overridable
  with ``--set key=value``) and proves it.  ``build(**sizes)`` returns a
  *description* of what is claimed (``constructions/claims.py``): a
  :class:`~constructions.base.Construction` (proved at every depth), an
  :class:`~constructions.claims.IdentityClaim` (or an object whose
  ``claim()`` returns one), or a :class:`~constructions.claims.WitnessClaim`.
  ``verify.prover.proof.check`` proves any of them; nothing here imports ``verify``.
* :func:`register_erratum` an :class:`Erratum`: a formula that is wrong as
  printed.  ``as_printed()`` must be *rejected* by the verifier (with a
  counterexample), ``corrected()`` must be proved.  ``python -m
  verify.errata`` runs them all and writes the errata table of the docs.

Module names say which seed they implement (``seed000_*.py`` ...).

The manifest (``manifest.json`` beside this file, :func:`light_entries`): what the command
line needs to print its help, list the catalogue and refuse a bad argument (names, summaries,
papers, sizes, the gd architectures' layer counts) without importing the catalogue's modules
(numpy, the compiler, networkx).  It records a digest of this package's source files and is used
only while they match; otherwise the registry itself is read (slower, never stale).  Regenerate it
after changing an entry: ``python -c "import constructions.catalogue as c; c.write_manifest()"``
(a test fails while it is stale).
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Callable

ENTRIES: dict[str, "CatalogueEntry"] = {}
ERRATA: dict[str, "Erratum"] = {}


@dataclass(frozen=True)
class CatalogueEntry:
    """One construction or claim of the registry (the only one: ``python -m
    verify.construct --list``, its subcommands and the catalogue report are
    generated from it)."""

    name: str  # CLI name, lower-case with dashes
    paper: str  # seed, section and equation implemented (a built Construction's ``reference``)
    summary: str
    build: Callable[..., object]  # build(**sizes) -> Construction | IdentityClaim | WitnessClaim
    sizes: dict = field(default_factory=dict)  # default sizes, each an int (``--set KEY=VALUE``)
    claim: str = ""  # what the paper states about layers / state size
    #: ``"gd"``: a least-squares GD architecture (``verify.construct gd --arch ARCH``, numerics,
    #: training and comparison): ``build(n, d, eta=..., [lam=...])`` with ``arch`` its short name
    roles: frozenset = frozenset()
    arch: str = ""
    depth: str = ""  # depth formula in k, e.g. "1 + 3k"
    state: str = ""  # state shape formula, e.g. "(N+1) x (5D+2)"
    ridge: bool = False  # a gd builder that also takes the ridge parameter ``lam``

    @property
    def params(self) -> dict[str, str]:
        """The entry's exact scalar parameters (``--set eta=1/64``): :func:`scalar_params` of ``build``."""
        return scalar_params(self.build)


#: keyword-only builder arguments whose default ``None`` stands for a computed exact scalar (the gd
#: builders' step size and ridge parameter, and the square roots the LSA/ELSA ones store)
SCALAR_PARAMS = ("eta", "lam", "sqrt_eta", "sqrt_lam", "gamma", "s", "omega_yx", "omega_yy")


def scalar_params(build: Callable) -> dict[str, str]:
    """``name -> default`` (text; ``"builder's default"`` where it is computed) for the keyword-only
    arguments of ``build`` that are exact scalars: a default that is a rational number or its text
    (``"1/8"``), or ``None`` for a name of :data:`SCALAR_PARAMS`.  Flags, strings that are not numbers,
    arrays and seeds are not parameters the command line sets."""
    import inspect
    from fractions import Fraction

    out = {}
    for prm in inspect.signature(build).parameters.values():
        if prm.kind is not prm.KEYWORD_ONLY or isinstance(prm.default, bool) or prm.name == "seed":
            continue
        d = prm.default
        if d is None and prm.name in SCALAR_PARAMS:
            out[prm.name] = "builder's default"
        elif isinstance(d, (int, Fraction)):
            out[prm.name] = str(d)
        elif isinstance(d, str):
            try:
                Fraction(d)
            except ValueError:
                continue
            out[prm.name] = d
    return out


@dataclass(frozen=True)
class Erratum:
    id: str  # e.g. "S003-shift-up"
    paper: str  # "seed 003"
    location: str  # "Prop. H.10 (shift_up)"
    as_printed: str  # the formula as printed
    correction: str  # the corrected form
    as_printed_check: Callable[[], object]  # -> Construction | IdentityClaim | WitnessClaim; must fail
    corrected_check: Callable[[], object]  # must pass


def register(entry: CatalogueEntry) -> CatalogueEntry:
    if entry.name in ENTRIES:
        raise ValueError(f"catalogue entry {entry.name!r} registered twice")
    if "gd" in entry.roles and not entry.arch:
        raise ValueError(f"gd entry {entry.name!r} needs an arch name")
    ENTRIES[entry.name] = entry
    return entry


def register_erratum(e: Erratum) -> Erratum:
    if e.id in ERRATA:
        raise ValueError(f"erratum {e.id!r} registered twice")
    ERRATA[e.id] = e
    return e


_LOADED = False


def load_all() -> None:
    """Import every module of the package (each registers its items)."""
    global _LOADED
    if _LOADED:
        return
    for m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        importlib.import_module(f"{__name__}.{m.name}")
    _LOADED = True


def entries() -> dict[str, CatalogueEntry]:
    load_all()
    return dict(sorted(ENTRIES.items()))


def gd_architectures() -> dict[str, CatalogueEntry]:
    """The entries with the ``gd`` role, keyed by their arch name (``--arch``), in a fixed order."""
    load_all()
    order = {"baseconv": 0, "baseconv-causal": 1, "lsa": 2, "elsa": 3}
    gd = [e for e in ENTRIES.values() if "gd" in e.roles]
    return {e.arch: e for e in sorted(gd, key=lambda e: (order.get(e.arch, 99), e.arch))}


def by_name(name: str) -> CatalogueEntry | None:
    load_all()
    return ENTRIES.get(name)


def errata() -> dict[str, Erratum]:
    load_all()
    return dict(sorted(ERRATA.items()))


# ------------------------------------------------------------------ the manifest (light start-up)

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class EntryInfo:
    """What the command line knows of an entry without importing it (:func:`light_entries`):
    the :class:`CatalogueEntry` fields but ``build``, and for a gd architecture its layer counts
    (prologue, body, epilogue: the same at every size) and whether it has BaseConv layers
    (``None``: unknown, read from the registry rather than the manifest)."""

    name: str
    paper: str
    summary: str
    sizes: dict
    claim: str = ""
    roles: frozenset = frozenset()
    arch: str = ""
    depth: str = ""
    state: str = ""
    ridge: bool = False
    gd_layers: tuple | None = None
    gd_baseconv: bool | None = None
    params: dict = field(default_factory=dict)  # :func:`scalar_params` of the entry's builder


def sources_digest() -> str:
    """A digest of this package's ``*.py`` files (names, sizes and CRC-32s of the contents, in name
    order): any edit makes the manifest stale (zlib, not hashlib: its import is a fraction of a
    millisecond, and the digest guards against forgetting to regenerate, not against an attacker)."""
    import zlib
    from pathlib import Path

    parts = []
    for f in sorted(Path(__file__).parent.glob("*.py")):
        data = f.read_bytes()
        parts.append(f"{f.name}:{len(data)}:{zlib.crc32(data):08x}")
    return ";".join(parts)


def _gd_layers(entry: CatalogueEntry) -> tuple[tuple[int, int, int], bool]:
    from constructions.layers import BaseConv

    con = entry.build(4, 2)
    return ((len(con.prologue), len(con.body), len(con.epilogue)),
            any(isinstance(L, BaseConv) for L in (*con.prologue, *con.body, *con.epilogue)))


def build_manifest() -> dict:
    """The manifest of the registry as it is now (imports every module; builds each gd
    architecture once, small, for its layer counts)."""
    out = {}
    for name, e in entries().items():
        d = {"paper": e.paper, "summary": e.summary, "sizes": dict(e.sizes), "claim": e.claim,
             "roles": sorted(e.roles), "arch": e.arch, "depth": e.depth, "state": e.state, "ridge": e.ridge, "params": e.params}
        if "gd" in e.roles:
            d["gd_layers"], d["gd_baseconv"] = _gd_layers(e)
        out[name] = d
    return {"digest": sources_digest(), "entries": out, "gd_order": [e.name for e in gd_architectures().values()],
            "errata": list(errata())}


def write_manifest() -> str:
    """Write ``manifest.json`` (atomically); returns its path."""
    import json
    import os
    from pathlib import Path

    path = Path(__file__).with_name(MANIFEST)
    tmp = path.with_name(MANIFEST + ".tmp")
    tmp.write_text(json.dumps(build_manifest(), indent=1) + "\n")
    os.replace(tmp, path)
    return str(path)


def _info(name: str, d: dict) -> EntryInfo:
    gl = d.get("gd_layers")
    return EntryInfo(name, d["paper"], d["summary"], dict(d["sizes"]), d.get("claim", ""), frozenset(d["roles"]),
                     d.get("arch", ""), d.get("depth", ""), d.get("state", ""), bool(d.get("ridge", False)),
                     tuple(gl) if gl is not None else None, d.get("gd_baseconv"), dict(d.get("params", {})))


_LIGHT: dict = {}


def _light() -> dict:
    """``{"entries": {name: EntryInfo}, "gd": {arch: EntryInfo}, "errata": [ids], "source": ...}``:
    from the manifest while it matches the sources, else from the registry (``gd_layers`` then
    unknown)."""
    if _LIGHT:
        return _LIGHT
    import json
    from pathlib import Path

    man = None
    try:
        man = json.loads(Path(__file__).with_name(MANIFEST).read_text())
        if man.get("digest") != sources_digest():
            man = None
    except (OSError, ValueError):
        man = None
    if man is not None:
        ents = {name: _info(name, d) for name, d in sorted(man["entries"].items())}
        _LIGHT.update(entries=ents, gd={ents[n].arch: ents[n] for n in man["gd_order"]}, errata=list(man["errata"]),
                      source="manifest")
    else:
        def info(e):
            return EntryInfo(e.name, e.paper, e.summary, dict(e.sizes), e.claim, frozenset(e.roles), e.arch, e.depth,
                             e.state, e.ridge, params=e.params)
        _LIGHT.update(entries={n: info(e) for n, e in entries().items()},
                      gd={a: info(e) for a, e in gd_architectures().items()}, errata=list(errata()),
                      source="registry")
    return _LIGHT


def light_entries() -> dict[str, EntryInfo]:
    """Every entry as an :class:`EntryInfo`, by name (from the manifest when it is fresh)."""
    return dict(_light()["entries"])


def light_gd_architectures() -> dict[str, EntryInfo]:
    """The gd architectures as :class:`EntryInfo`, by arch, in :func:`gd_architectures`' order."""
    return dict(_light()["gd"])


def light_errata() -> list[str]:
    """The errata's ids."""
    return list(_light()["errata"])


def light_source() -> str:
    """Where the light view came from: ``"manifest"`` or ``"registry"`` (a stale manifest)."""
    return _light()["source"]
