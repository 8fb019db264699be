"""The catalogue of named constructions (``python -m verify.construct --list``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .gd_attention import REFERENCE_ELSA, REFERENCE_LSA, gd_elsa, gd_lsa
from .gd_baseconv import REFERENCE_C, REFERENCE_NC, gd_baseconv, gd_baseconv_causal


@dataclass(frozen=True)
class Entry:
    name: str
    arch: str
    build: Callable
    reference: str
    summary: str
    depth: str
    state: str
    ridge: bool = False  #: the builder takes a ridge parameter ``lam`` besides ``eta``


GD_ARCHS: dict[str, Entry] = {
    "baseconv": Entry("gd-baseconv", "baseconv", gd_baseconv, REFERENCE_NC,
                      "least-squares GD, non-causal BaseConv, 3 layers per step", "1 + 3k", "(N+1) x (5D+2)"),
    "baseconv-causal": Entry("gd-baseconv-causal", "baseconv-causal", gd_baseconv_causal, REFERENCE_C,
                             "least-squares GD, causal BaseConv, 1 layer per step after a 2-layer prologue",
                             "3 + k", "(N+1) x (2D^2+5D+2)"),
    "lsa": Entry("gd-lsa", "lsa", gd_lsa, REFERENCE_LSA,
                 "ridge GD, 3-head LSA + skip per step (lam = 0: least squares)", "1 + k", "(D+1) x (2N+D+3)", ridge=True),
    "elsa": Entry("gd-elsa", "elsa", gd_elsa, REFERENCE_ELSA,
                  "ridge GD, two ELSA stages + skip per step (lam = 0: least squares)", "1 + k", "D x (2N+2D+3)", ridge=True),
}

CATALOGUE: dict[str, Entry] = {e.name: e for e in GD_ARCHS.values()}
