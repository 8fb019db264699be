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
    name: str  # CLI name, lower-case with dashes
    paper: str  # seed, section and equation implemented
    summary: str
    build: Callable[..., object]  # build(**sizes) -> Construction | IdentityClaim | WitnessClaim
    sizes: dict = field(default_factory=dict)  # default sizes, each an int
    claim: str = ""  # what the paper states about layers / state size


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


def errata() -> dict[str, Erratum]:
    load_all()
    return dict(sorted(ERRATA.items()))
