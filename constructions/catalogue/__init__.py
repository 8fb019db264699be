"""The catalogue: every construction of the seeds, and every known erratum.

Each module of this package registers its items at import:

* :func:`register` a :class:`CatalogueEntry`: a named construction or claim,
  ``python -m verify.construct NAME`` builds it with ``sizes`` (overridable
  with ``--set key=value``) and proves it.  ``build(**sizes)`` returns a
  *description* of what is claimed (``constructions/claims.py``): a
  :class:`~constructions.base.Construction` (proved at every depth), an
  :class:`~constructions.claims.IdentityClaim` (or an object whose
  ``claim()`` returns one), or a :class:`~constructions.claims.WitnessClaim`.
  ``verify.proof.check`` proves any of them; nothing here imports ``verify``.
* :func:`register_erratum` an :class:`Erratum`: a formula that is wrong as
  printed.  ``as_printed()`` must be *rejected* by the verifier (with a
  counterexample), ``corrected()`` must be proved.  ``python -m
  verify.errata`` runs them all and writes the errata table of the docs.

Module names say which seed they implement (``seed000_*.py`` ...).
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
    paper: str  # seed, section and equation implemented
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
    def reference(self) -> str:
        return self.paper


Entry = CatalogueEntry


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
