"""The compiled GD architectures (``constructions/compiled_gd.py``): the placed least-squares /
ridge GD step of ``circuits.builders`` compiled by ``constructions/compiler`` and repeated as
the body, registered as the ``gd`` architectures ``compiled-baseconv``,
``compiled-baseconv-causal``, ``compiled-lsa`` and ``compiled-elsa``."""
from __future__ import annotations

from constructions.compiled_gd import REFERENCE, REFERENCE_GRAM, compiled_gd

from . import CatalogueEntry, register


def _arch(target: str):
    def build(n: int = 20, d: int = 5, *, eta=None, lam=0):
        return compiled_gd(n, d, eta=eta, lam=lam, target=target)

    build.__doc__ = f"compiled_gd(n, d, eta=eta, lam=lam, target={target!r})"
    return build


register(CatalogueEntry(
    name="gd-compiled-baseconv", paper=REFERENCE, build=_arch("baseconv"), sizes={"n": 20, "d": 5},
    summary="(ridge) GD step compiled to non-causal BaseConv: 3 layers per step",
    roles=frozenset({"gd"}), arch="compiled-baseconv", depth="1 + 3k", state="(N+1) x (3D+1)", ridge=True))
register(CatalogueEntry(
    name="gd-compiled-baseconv-causal", paper=REFERENCE_GRAM, build=_arch("baseconv-causal"), sizes={"n": 20, "d": 5},
    summary="(ridge) GD step, gradient as (A^T A) x - A^T b with A^T A, A^T b hoisted into the prologue "
            "(seed 000 eq. (47)), compiled to causal BaseConv: 1 layer per step",
    roles=frozenset({"gd"}), arch="compiled-baseconv-causal", depth="3 + k",
    state="(N+1) x (D^2+3D+1) (D >= 3; one more at D <= 2)", ridge=True))
register(CatalogueEntry(
    name="gd-compiled-lsa", paper=REFERENCE, build=_arch("lsa"), sizes={"n": 20, "d": 5},
    summary="(ridge) GD step compiled to multi-head LSA (seed 001 eq. (8)): 2 layers, 3 heads per step",
    roles=frozenset({"gd"}), arch="compiled-lsa", depth="1 + 2k", state="(N+1) x (2N+2D+2)", ridge=True))
register(CatalogueEntry(
    name="gd-compiled-elsa", paper=REFERENCE, build=_arch("elsa"), sizes={"n": 20, "d": 5},
    summary="(ridge) GD step compiled to ELSA (seed 001 eq. (16), (57)-(59)): 1 two-stage module per step",
    roles=frozenset({"gd"}), arch="compiled-elsa", depth="1 + k", state="(N+1) x (N+2D+1)", ridge=True))
