"""Arithmetic circuits -> explicit BaseConv, LSA and ELSA weight settings (seed 000 Thm. D.30, seed 003
Thm. H.21 for BaseConv; seed 001 eq. (8), (16) for LSA / ELSA), one module per pass (as tracr's compiler).

================  ==========================================================================
module            pass
================  ==========================================================================
``reassociate``   before every target: the circuit -> one with the same polynomials and at
                  most the same multiplicative depth (``reassociate=False``: as written; its
                  expression store: ``reassociate_exprs``)
``linearise``     circuit -> affine forms over atoms (inputs, binary products), levels
                  (exact forms: ``circuits/affine.py``)
``mlp``           target ``baseconv-mlp``: one token, every live value its own channel
``sequence``      targets ``baseconv`` / ``baseconv-causal``: the placed circuit's token grid;
                  product layers, route layers where a factor must move
``place``         the placed inputs -> the channels the sequence compile works in
``budget``        ``baseconv`` / ``baseconv-causal`` under a channel budget (layers for channels):
                  one product at a time, or (``levels``) the level-parallel scheme
``benes``         Benes networks of masked shifts: any permutation of ``2^k`` tokens in
                  ``2k - 1`` BaseConv layers (seed 003 Lemmas H.7-H.8), the budget's routing
``routing``       a linear map between two sequence states -> one BaseConv layer
``attention``     targets ``lsa`` / ``elsa``: gather to a work token, product heads per level,
                  an output layer; ELSA groups the layers into two-stage modules (the weights:
                  ``attention_emit``)
``circuit``       the :class:`CompiledCircuit` construction all targets return
``info``          its report, typed: :class:`~.info.CompileInfo`, :class:`~.info.Reassociation` (the
                  choice an enum; the English rendered from it at the edge, ``to_json``)
``targets``       the table :data:`TARGETS`: one :class:`~.targets.Target` per name (description,
                  paper, compile, options it takes, causal, its passes, its bound); light to import
``pipeline``      :func:`compile_circuit`, the passes every target shares (validate, resolve,
                  reassociate), then the target's own
================  ==========================================================================

:func:`compile_circuit` picks the target: ``baseconv`` for a placed circuit (inputs carrying
``token``/``channel``, :func:`circuits.placement`), ``baseconv-mlp`` otherwise, unless told
(``lsa``, ``elsa``, ``baseconv-causal``: :data:`TARGETS`).  How to add a target: :mod:`.targets`.
"""
from __future__ import annotations

#: every public name and the module that defines it, imported on first use (PEP 562): the targets'
#: table (:mod:`.targets`) is light, so a CLI's --help names the targets without loading the passes
_NAMES = {
    "compile_circuit": "pipeline", "COMPARE_MAX_GATES": "pipeline",
    "CompiledCircuit": "circuit", "CompileError": "routing",
    **dict.fromkeys(("CompileInfo", "Reassociation", "ReassociationChoice"), "info"),
    **dict.fromkeys(("REASSOCIATE_MAX_GATES", "TARGETS", "Target", "default_target", "resolve", "target_options"),
                    "targets"),
}

__all__ = ["CompileInfo", "CompiledCircuit", "CompileError", "REASSOCIATE_MAX_GATES", "Reassociation",
           "ReassociationChoice", "TARGETS", "Target", "compile_circuit", "default_target"]


def __getattr__(name):
    mod = _NAMES.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{mod}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_NAMES))
