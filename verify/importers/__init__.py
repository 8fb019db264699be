"""Importers: peers' weight files as this toolkit's layers, proved against a specification.

``python -m verify.construct import FILE --from FORMAT --spec SPEC [--layout L.json]``
(``verify/importers/cli.py``).  One module per format, each with its mapping table:

* ``precision-ls`` (:mod:`.precision_ls`): HazyResearch/precision-ls BaseConv blocks;
* ``icl-gd`` (:mod:`.icl_gd`): von Oswald et al.'s linear self-attention (haiku ``.npz``);
* ``zoology`` (:mod:`.zoology`): HazyResearch/zoology BaseConv mixers;
* ``polyverify`` (:mod:`.polyverify_fmt`): this toolkit's own weight files.

:mod:`.mapping` projects a specification onto the file's state (the ``--layout`` JSON);
:mod:`.search` recovers parameters from the file and tries the nearby specifications when a
proof fails.  ``docs/interop.md`` has the tables and a worked case.
"""
from __future__ import annotations

from . import icl_gd, polyverify_fmt, precision_ls, zoology

FORMATS = {m.NAME: m for m in (precision_ls, icl_gd, zoology, polyverify_fmt)}
