"""Seed 000 App. D.3.1: one gradient-descent step for least squares as BaseConv layers
(``constructions/gd_baseconv.py``), registered as the ``gd`` architectures ``baseconv``
(non-causal, eq. (46)) and ``baseconv-causal`` (eq. (47))."""
from __future__ import annotations

from constructions.gd_baseconv import REFERENCE_C, REFERENCE_NC, gd_baseconv, gd_baseconv_causal

from . import CatalogueEntry, register

register(CatalogueEntry(
    name="gd-baseconv", paper=REFERENCE_NC, build=gd_baseconv, sizes={"n": 20, "d": 5},
    summary="least-squares GD, non-causal BaseConv, 3 layers per step",
    roles=frozenset({"gd"}), arch="baseconv", depth="1 + 3k", state="(N+1) x (5D+2)"))
register(CatalogueEntry(
    name="gd-baseconv-causal", paper=REFERENCE_C, build=gd_baseconv_causal, sizes={"n": 20, "d": 5},
    summary="least-squares GD, causal BaseConv, 1 layer per step after a 2-layer prologue",
    roles=frozenset({"gd"}), arch="baseconv-causal", depth="3 + k", state="(N+1) x (2D^2+5D+2)"))
