"""Seed 001 Sec. 3.4-3.5: ridge-regression gradient descent as LSA (eq. (37)-(55)) and ELSA
(eq. (56)-(86)) layers (``constructions/gd_attention.py``), registered as the ``gd``
architectures ``lsa`` and ``elsa``."""
from __future__ import annotations

from constructions.gd_attention import REFERENCE_ELSA, REFERENCE_LSA, gd_elsa, gd_lsa

from . import CatalogueEntry, register

register(CatalogueEntry(
    name="gd-lsa", paper=REFERENCE_LSA, build=gd_lsa, sizes={"n": 20, "d": 5},
    summary="ridge GD, 3-head LSA + skip per step (lam = 0: least squares)",
    roles=frozenset({"gd"}), arch="lsa", depth="1 + k", state="(D+1) x (2N+D+3)", ridge=True))
register(CatalogueEntry(
    name="gd-elsa", paper=REFERENCE_ELSA, build=gd_elsa, sizes={"n": 20, "d": 5},
    summary="ridge GD, two ELSA stages + skip per step (lam = 0: least squares)",
    roles=frozenset({"gd"}), arch="elsa", depth="1 + k", state="D x (2N+2D+3)", ridge=True))
