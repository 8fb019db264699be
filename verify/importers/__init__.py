"""The formats: peers' weight files in (``import``), constructions out (``--export``), one module per format.

``python -m verify.construct import FILE --from FORMAT --spec SPEC [--layout L.json]``
(``verify/importers/cli.py``) and ``--export FILE --format FORMAT`` (``verify/export.py``).  Each
format is one module of this package holding its mapping table, its reader (``read``), its writer
(``plan``: the same table read backwards) and its settings, and one line of :data:`REGISTRY`:

* ``polyverify`` (:mod:`.polyverify_fmt`): this toolkit's own weight files;
* ``precision-ls`` (:mod:`.precision_ls`): HazyResearch/precision-ls BaseConv blocks;
* ``zoology`` (:mod:`.zoology`): HazyResearch/zoology BaseConv mixers;
* ``icl-gd`` (:mod:`.icl_gd`): von Oswald et al.'s linear self-attention (haiku ``.npz``).

:mod:`.mapping` projects a specification onto the file's state (the ``--layout`` JSON);
:mod:`.search` recovers parameters from the file and tries the nearby specifications when a
proof fails; :mod:`.writing` is what the writers share.  ``docs/interop.md`` has the tables and a
worked case.

This file is light (no numpy, no torch): a command's parser names the formats and checks an
``--export`` file's suffix from :data:`REGISTRY` before anything is built or read; a format's
module is imported when :data:`FORMATS` is first asked for it.
"""
from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from types import ModuleType

#: torch's checkpoint suffixes (``torch.save``)
TORCH_SUFFIXES = (".pt", ".pth", ".bin")

#: the formats, one line each: the ``--from`` / ``--format`` name -> (its module in this package, the file
#: names it is written as: the importers read a file by its suffix).  Adding a format is its module and
#: one line here (README, "How to add").  The first is the default of ``--format``.
REGISTRY: dict[str, tuple[str, tuple[str, ...]]] = {
    "polyverify": ("polyverify_fmt", (".safetensors",)),
    "precision-ls": ("precision_ls", TORCH_SUFFIXES + (".safetensors",)),
    "zoology": ("zoology", TORCH_SUFFIXES + (".safetensors",)),
    "icl-gd": ("icl_gd", (".npz", ".safetensors")),
}
#: each format's file names (from :data:`REGISTRY`)
SUFFIXES: dict[str, tuple[str, ...]] = {name: suffixes for name, (_, suffixes) in REGISTRY.items()}


class Formats(Mapping):
    """The format's module by name (:data:`REGISTRY`), imported when first looked up: ``list(FORMATS)``
    and ``name in FORMATS`` import nothing."""

    def __getitem__(self, name: str) -> ModuleType:
        if name not in REGISTRY:
            raise KeyError(name)
        return importlib.import_module(f"{__name__}.{REGISTRY[name][0]}")

    def __contains__(self, name) -> bool:
        return name in REGISTRY

    def __iter__(self) -> Iterator[str]:
        return iter(REGISTRY)

    def __len__(self) -> int:
        return len(REGISTRY)


FORMATS = Formats()
