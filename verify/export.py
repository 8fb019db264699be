"""Constructions out to the peers' formats: ``--export FILE --format polyverify|precision-ls|zoology|icl-gd``.

The importers' mapping tables (``verify/importers/``, ``docs/interop.md``) read backwards: each
peer format gets the peer's own parameter names, shapes, transposes, filter orientation and
config, so the peer's code loads the file with its own loader and computes the construction's
layers on the construction's state (tokens x channels; the embedding into that state is the
construction's input map, not part of the file).  ``import(export(c))`` proves against ``c``
(``tests/verify/test_export.py``, every construction and format that fits).

=============  =================================  =====================================================
format         holds                              written as
=============  =================================  =====================================================
polyverify     every stack                        this toolkit's safetensors (``constructions/
                                                  weights_io.py``: float64 + the exact rationals),
                                                  ``.safetensors`` only
precision-ls   BaseConv blocks (seed 000 eq. (2)) ``_backbone.transformer.h.{i}.seq_mixer.base_conv.*``:
                                                  ``nn.Linear`` weights ``W^T`` (out x in) and
                                                  per-channel biases; a short ``Conv1d`` of kernel T
                                                  (causal: padding T-1; "same": padding T//2) or, for
                                                  a circular filter, the long ``filter`` (C, T) (FFT
                                                  of size T); ``branch_weights = (1, 0)`` and the
                                                  filter less its lag-0 identity where residual
zoology        BaseConv mixers ``conv(u) *        ``backbone.layers.{i}.sequence_mixer.*``:
               projection(u) + u`` (seed 003      ``projection`` (``W_gate^T``, bias), a causal
               Def. 4.1)                          ``Conv1d`` of kernel T (taps reversed, bias)
icl-gd         token-form LSA (seed 004           haiku ``{model}/multi_head_attention/{query,key,
               eq. (2)-(3))                       value,linear}/w`` (one module applied ``num_layers``
                                                  times where every layer is the same; else
                                                  ``{model}/~trans_block/layer_{l}/``), per head
                                                  ``W_Q = I``, ``W_K = Q``, ``W_V = I``, ``W_O = P^T``
                                                  (``Q = W_K W_Q^T``, ``P = (W_V W_O)^T``), key size D
=============  =================================  =====================================================

What a format cannot hold is refused before any work with one line naming it
(:class:`ExportError`): a position-dependent bias matrix (the peers' biases are one per
channel), a convolution the peer's mixer does not compute (zoology's is causal; precision-ls has
one ``causal`` flag and one ``use_resid`` for every block), a layer kind the format has no
module for, an in / out projection zoology's mixer does not have.  zoology's mixer always adds
``u``; a BaseConv layer without the residual is written in its form only where that is the same
map exactly: a constant gate ``g`` (``W_gate = 0``, every ``g_c != 0``: the filter gets
``-1/g_c`` at lag 0) or a constant convolution ``z`` (``h = 0``, every ``z_c != 0``:
``W_gate`` gets ``-1/z_c`` on its diagonal); the export says so.  icl-gd's GD model
(``Transformer_gd``, ``tr_gd`` of ``src/train.py``) has one head: a stack with more heads is
written as the trained model ``transformer`` (``num_heads`` from the config), and a layer with
fewer heads than the others gets zero heads.

Weights go to the peers as float32 (their models' dtype), each entry rounded once to nearest
from its exact rational; entries that are not float32 values are counted and reported (the
file then holds the construction at the rounded weights; the import reads the step size back
as that float: ``eta = 13421773/134217728 = 0.1 rounded to float32``).  The config goes into
the file where the container holds one (``.pt``: ``{"model_state_dict", "config"}``, precision-ls's
checkpoint layout; ``.safetensors``: JSON under ``config`` in the metadata); an ``.npz`` holds
none, so the export names the ``--config KEY=VALUE`` an import needs.

**Trained modules.**  :func:`export` takes a module of ``polyverify.torch.load_module`` as it
is after training (``export(path, module, fmt)``): its weights as exact rationals
(``ConstructionModule.exact_sections``: the construction's rational where an entry's float64 is
its rounding, else the binary fraction the float is).  A body whose copies differ (an unshared
module, trained) is written to ``polyverify`` as the unrolled stack, prologue + k body copies +
epilogue, each copy its own layers and ``"unrolled": true`` in the metadata; ``gd --weights`` and
``import --from polyverify`` prove each distinct copy (``verify/gd_cmd.py``,
``verify/importers/search.py``).  The peers' formats write every layer anyway.  A module's
biases are per channel where the construction's are (``polyverify/torch.py``), and
:func:`frozen_for` names what a format fixes (zoology's mixer has no in / out projection,
precision-ls's circular filter no bias), for ``load_module(..., frozen=frozen_for(fmt))``: such
a module, trained, still fits the format.

A file name's suffix must be one of its format's (:data:`SUFFIXES`; the importers read a file by
its suffix): any other, ``keep.txt`` included, is refused before any work.

The command-line part is :func:`add_export_arguments`, :func:`check_export_arguments` (before
any work) and :func:`write_export` (atomic), one call each in a command.
"""
from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np

from constructions import ops
from constructions.base import Construction, Sections, round_exact
from constructions.layers import Layer
from constructions.sparse import dense, is_sparse
from polyverify.plumbing.cli import UsageError, atomic_path, output_file

# light, the parsers' part: the formats, their file names (SUFFIXES: each format's suffixes) and the options
from .cli_common import (DEFAULT_FORMAT, FORMATS, SUFFIXES, add_export_arguments,  # noqa: F401
                         export_suffix, export_suffix_problem)


class ExportError(ValueError):
    """What a format cannot hold: one line naming the layer and what does not fit."""


@dataclass
class Exported:
    """A stack in a peer's format: the tensors (float32, the peer's names and shapes) and config."""

    format: str
    layers: int
    tensors: dict[str, np.ndarray] = field(default_factory=dict)
    #: the peer model's settings, written into the file where the container holds a config
    config: dict = field(default_factory=dict)
    #: the ``--config KEY=VALUE`` settings an import of an ``.npz`` file needs (it holds no config)
    settings: dict = field(default_factory=dict)
    #: rewrites into the peer's form (each the same map exactly)
    notes: list[str] = field(default_factory=list)
    #: the float dtype written (float32 where every entry is a float32 value, else float64)
    dtype: str = "float32"
    #: nonzero entries that are not values of that dtype (each rounded once to nearest)
    inexact: int = 0
    entries: int = 0
    path: Path | None = None

    def summary(self) -> list[str]:
        """What was written, one line each (the first names the file)."""
        if self.format == "polyverify":
            return [f"exported {self.layers} layers to {self.path} (polyverify: safetensors, float64 with the exact "
                    f"rationals in the metadata)"] + [f"  {n}" for n in self.notes]
        where = self.path.suffix.lower() if self.path is not None else ""
        cfg = ", ".join(f"{k}={json.dumps(self.config[k])}" for k in _SHOWN[self.format] + ("dtype",)
                        if k in self.config) + ", ..."
        lines = [f"exported {self.layers} layers to {self.path} ({self.format}: {len(self.tensors)} tensors, {self.dtype}; "
                 + ("config in the file: " + cfg if where != ".npz" else "an .npz file holds no config") + ")"]
        if self.inexact:
            lines.append(f"  {self.inexact} of {self.entries} nonzero entries are not {self.dtype} values: each rounded "
                         f"once to nearest (the file holds the construction at the rounded weights)")
        if where == ".npz" and self.settings:
            lines.append("  import with " + " ".join(f"--config {k}={v}" for k, v in self.settings.items()))
        desc = self.config.get("polyverify")
        if desc and where != ".npz":
            lines.append(f"  self-describing: import {self.path} --from {self.format} proves it against {desc['spec']} "
                         f"({', '.join(f'{k}={v}' for k, v in desc['sizes'].items())}) with no other flag")
        lines += [f"  {n}" for n in self.notes]
        return lines


# ------------------------------------------------------------------ the stack

def stack(construction: Construction, k: int | None = None, sections=None) -> list[Layer]:
    """The layers to export: ``sections`` (a :class:`constructions.base.Sections` or a dict
    ``{"prologue", "body" | "bodies", "epilogue"}``: a weight file's own layers) or the
    construction's ``layers(k)`` (``k`` None: 1 where it has a body, else 0)."""
    if sections is not None:
        s = _sections(sections)
        layers = list(s.prologue) + [L for body in s.bodies for L in body] + list(s.epilogue)
    else:
        layers = construction.layers(_k(construction, k))
    # the peers' formats hold dense tensors: a compiled layer's sparse channel mixes are laid out dense here
    return [L.map(dense) if any(is_sparse(A) for A in L.arrays().values()) else L for L in layers]


def _k(construction, k):
    if k is None:
        return 1 if construction.body else 0
    return k


def _sections(sections) -> Sections:
    if isinstance(sections, Sections):
        return sections
    bodies = sections.get("bodies")
    if bodies is None:
        body = list(sections.get("body") or [])
        bodies = [body] if body else []
    return Sections(list(sections.get("prologue") or []), [list(b) for b in bodies], list(sections.get("epilogue") or []))


# ------------------------------------------------------------------ exact checks

def _is_zero(a) -> bool:
    return not bool(np.asarray(a != 0, dtype=bool).any())


def _is_identity(W) -> bool:
    n, m = W.shape
    return n == m and bool(np.asarray(W == ops.eye_object(n), dtype=bool).all())


def _row_constant(i: int, name: str, B, fmt: str, what: str) -> np.ndarray:
    """The one row of a bias matrix that is the same on every token, or an ExportError."""
    same = np.asarray(B == B[0:1], dtype=bool).all(axis=1)
    if not same.all():
        r = int(np.flatnonzero(~same)[0])
        raise ExportError(f"{fmt}: layer {i} {name} differs between tokens 0 and {r} (a position-dependent bias "
                          f"matrix); {what} is one per channel")
    return np.array(B[0], dtype=object)


def _kinds(layers, fmt: str, kind: str, what: str) -> None:
    if not layers:
        raise ExportError(f"{fmt}: the stack has no layers to export")
    for i, L in enumerate(layers):
        if L.kind != kind:
            extra = (" (seed 001's LSA in Hagiwara's form: the icl-gd importer reads seed 004's token form "
                     "only, so the file could not be proved back)") if (L.kind, kind) == ("lsa", "token_lsa") else ""
            raise ExportError(f"{fmt} holds {what}; layer {i} is {'an' if L.kind in ('lsa', 'elsa') else 'a'} "
                              f"{L.kind} layer{extra}")


def _same_for_all(layers, fmt: str, get, what: str, why: str) -> object:
    v0 = get(layers[0])
    for i, L in enumerate(layers):
        if get(L) != v0:
            raise ExportError(f"{fmt}: layer {i} has {what} {get(L)} and layer 0 {what} {v0}; {why}")
    return v0


def _distinct(layers) -> list[tuple[int, Layer]]:
    """``(first index, layer)`` of each distinct layer object (repeated body copies once)."""
    seen: dict[int, int] = {}
    out = []
    for i, L in enumerate(layers):
        if id(L) not in seen:
            seen[id(L)] = i
            out.append((i, L))
    return out


# ------------------------------------------------------------------ precision-ls

def _precision_ls(layers, make_tensors: bool) -> Exported:
    from verify.importers import precision_ls as P
    from verify.importers.convs import add_identity, conv1d_weight, long_filter

    fmt = P.NAME
    _kinds(layers, fmt, "baseconv", "BaseConv blocks")
    conv = _same_for_all(layers, fmt, lambda L: L.convolution, "convolution", "precision-ls's one 'causal' setting (and one "
                         "conv_type) covers every block")
    resid = _same_for_all(layers, fmt, lambda L: L.residual, "residual =",
                          "precision-ls's one 'use_resid' setting covers every block")
    T, C = _same_for_all(layers, fmt, lambda L: tuple(L.shape), "state", "one model has one state")
    kind = "long" if conv == "circular" else "short"  # circular: FFT of size T; causal / "same": Conv1d
    same = conv == "same"
    ex = Exported(fmt, len(layers))
    rows = {}
    for i, L in _distinct(layers):
        r = {}
        for mod, (Wn, bn) in P.LINEARS.items():
            r[bn] = _row_constant(i, bn, getattr(L, bn), fmt, "precision-ls's nn.Linear bias")
        if kind == "long":
            if not _is_zero(L.b_conv):
                raise ExportError(f"{fmt}: layer {i} has a convolution bias b_conv; precision-ls's circular convolution "
                                  f"(the long filter, causal=False) has none")
        else:
            r["b_conv"] = _row_constant(i, "b_conv", L.b_conv, fmt, "precision-ls's Conv1d bias")
        rows[id(L)] = r
    if not make_tensors:
        return ex
    for i, L in enumerate(layers):
        r = rows[id(L)]
        pre = P.BLOCK.format(i=i)
        for mod, (Wn, bn) in P.LINEARS.items():
            ex.tensors[f"{pre}{mod}.weight"] = np.ascontiguousarray(getattr(L, Wn).T)
            ex.tensors[f"{pre}{mod}.bias"] = r[bn]
        h = np.array(L.h, dtype=object)
        if resid:  # the peer's convolution adds its input (resid): the filter holds h - identity
            add_identity(h, same=same, by=-1)
        if kind == "short":
            ex.tensors[pre + P.SHORT_WEIGHT] = conv1d_weight(h, same=same)
            ex.tensors[pre + P.SHORT_BIAS] = r["b_conv"]
        else:
            ex.tensors[pre + P.LONG_FILTER] = long_filter(h)
        if resid:
            ex.tensors[pre + P.BRANCH] = np.array([1, 0], dtype=object)
    # the whole TransformerModel (src/models/gpt2.py), so that get_model_from_run loads it strictly: identity
    # _read_in / _read_out and a zero position embedding (the construction's state is the model's input)
    ex.tensors = {"_read_in.weight": ops.eye_object(C), "_read_in.bias": np.zeros(C, dtype=object),
                  "_backbone.transformer.wpe.weight": np.zeros((T, C), dtype=object), **ex.tensors,
                  "_read_out.weight": ops.eye_object(C), "_read_out.bias": np.zeros(C, dtype=object)}
    # build_model(conf.model)-ready (src/models/__init__.py), with the GPT2Config fields besides
    ex.config = {"family": "gpt2", "n_dims": C, "n_positions": T, "n_embd": C, "n_layer": len(layers), "n_head": 1,
                 "use_mlps": False, "seq_op": "base_conv", "mlp_activ": "gelu", "use_resid": resid,
                 "use_seqop_ln": False, "use_final_ln": False, "use_mlp_ln": False, "conv_type": kind,
                 "causal": conv == "causal", "train_proj": False, "train_pos": False, "mlp_upfactor": 4,
                 "in_dims": C, "out_dims": C, "use_softmax_for_attn": True, "block_size": T, "bias": True}
    if same:
        ex.notes.append(f"'same' convolution: precision-ls's Conv1d with causal=False (padding {T // 2}, kernel {T})")
    return ex


# ------------------------------------------------------------------ zoology

def _zoology(layers, make_tensors: bool) -> Exported:
    from verify.importers import zoology as Z
    from verify.importers.convs import conv1d_weight

    fmt = Z.NAME
    _kinds(layers, fmt, "baseconv", "BaseConv mixers")
    T, C = _same_for_all(layers, fmt, lambda L: tuple(L.shape), "state", "one model has one state")
    ex = Exported(fmt, len(layers))
    parts = {}
    for i, L in _distinct(layers):
        if L.convolution != "causal":
            raise ExportError(f"{fmt}: layer {i} has a {L.convolution} convolution; zoology's BaseConv mixer is causal "
                              f"(a Conv1d with padding K-1, an FFT of size 2T)")
        for name, want in Z.FIXED.items():
            if name == "residual":
                continue
            ok = _is_identity(getattr(L, name)) if want == "I" else _is_zero(getattr(L, name))
            if not ok:
                raise ExportError(f"{fmt}: layer {i} has {name} != {'I' if want == 'I' else '0'}; zoology's mixer "
                                  f"(y = conv(u) * projection(u) + u) has no in / out projection")
        b_gate = _row_constant(i, "b_gate", L.b_gate, fmt, "zoology's projection bias")
        b_conv = _row_constant(i, "b_conv", L.b_conv, fmt, "zoology's Conv1d bias")
        h, W_gate = np.array(L.h, dtype=object), np.array(L.W_gate, dtype=object)
        note = None
        if not L.residual:  # the mixer adds u: write the same map in its form, where one is (module docstring)
            if _is_zero(L.W_gate) and all(g != 0 for g in b_gate):
                for c in range(C):  # g (h*u + b) = g (h'*u + b) + u  with  h' = h - delta_0 / g
                    h[0, c] = h[0, c] - Fraction(1) / Fraction(b_gate[c])
                note = "a constant gate g: the filter holds h - 1/g at lag 0"
            elif _is_zero(L.h) and all(z != 0 for z in b_conv):
                for c in range(C):  # (u W + b) z = (u W' + b) z + u  with  W' = W - diag(1/z)
                    W_gate[c, c] = W_gate[c, c] - Fraction(1) / Fraction(b_conv[c])
                note = "a constant convolution z: W_gate holds W - diag(1/z)"
            else:
                raise ExportError(f"{fmt}: layer {i} has no residual, and neither its gate (W_gate = 0, no zero bias) "
                                  f"nor its convolution (h = 0, no zero bias) is constant; zoology's mixer adds u, "
                                  f"which only such a layer can take back")
            ex.notes.append(f"layer {i}: not residual; written as zoology's mixer (which adds u) with {note}")
        parts[id(L)] = (h, W_gate, b_gate, b_conv)
    if not make_tensors:
        return ex
    for i, L in enumerate(layers):
        h, W_gate, b_gate, b_conv = parts[id(L)]
        pre = Z.MIXER.format(i=i)
        mod, (Wn, bn) = Z.PROJECTION
        ex.tensors[f"{pre}{mod}.weight"] = np.ascontiguousarray(W_gate.T)
        ex.tensors[f"{pre}{mod}.bias"] = b_gate
        ex.tensors[pre + Z.SHORT_WEIGHT] = conv1d_weight(h, same=False)
        ex.tensors[pre + Z.SHORT_BIAS] = b_conv
    ex.config = {"tokens": T, "use_act": False, "d_model": C, "n_layers": len(layers),
                 "sequence_mixer": {"name": "zoology.mixers.base_conv.BaseConv",
                                    "kwargs": {"l_max": T, "kernel_size": T, "use_act": False}}}
    return ex


# ------------------------------------------------------------------ icl-gd

def head_weights(P, Q):
    """``(W_Q, W_K, W_V, W_O)`` of one head (key size D) with
    :func:`verify.importers.icl_gd.head_matrices` ``= (P, Q)`` at dampening 1: ``W_Q = I``,
    ``W_K = Q``, ``W_V = I``, ``W_O = P^T`` (no product: every entry is one of the head's)."""
    D = P.shape[0]
    return ops.eye_object(D), np.array(Q, dtype=object), ops.eye_object(D), np.ascontiguousarray(np.array(P, dtype=object).T)


def _icl_gd(layers, make_tensors: bool) -> Exported:
    from constructions.weights_io import same_layer
    from verify.importers import icl_gd as G

    fmt = G.NAME
    _kinds(layers, fmt, "token_lsa", "token-form LSA layers (seed 004 eq. (2)-(3))")
    for i, L in _distinct(layers):
        if not L.residual:
            raise ExportError(f"{fmt}: layer {i} has no residual; von Oswald et al.'s layer is h + dampening * attn")
        if not L.heads:
            raise ExportError(f"{fmt}: layer {i} has no heads")
    excl = _same_for_all(layers, fmt, lambda L: L.exclude_last, "exclude_last =",
                         "include_query is one setting of the model")
    D = _same_for_all(layers, fmt, lambda L: L.heads[0].P.shape[0], "width", "one model has one token width")
    H = max(len(L.heads) for L in layers)
    shared = all(L is layers[0] or same_layer(L, layers[0]) for L in layers)
    model = G.GD_MODEL if H == 1 else G.MODEL
    ex = Exported(fmt, len(layers))
    if H > 1:
        ex.notes.append(f"{H} heads: von Oswald et al.'s GD model (Transformer_gd) has one, so the stack is written as "
                        f"their trained model 'transformer' (num_heads = {H} in its config)")
    short = [i for i, L in _distinct(layers) if len(L.heads) < H]
    if short:
        ex.notes.append(f"layers {', '.join(map(str, short))} have fewer than {H} heads: padded with zero heads "
                        f"(P = Q = 0, which add nothing)")
    if not make_tensors:
        return ex
    mods = [(G.SHARED.format(model=model), layers[0])] if shared else \
        [(G.PER_LAYER.format(model=model, l=i), L) for i, L in enumerate(layers)]
    for pre, L in mods:
        ws = [head_weights(h.P, h.Q) for h in L.heads]
        zero = np.zeros((D, D), dtype=object)
        ws += [head_weights(zero, zero)] * (H - len(L.heads))
        q, k, v, o = (np.concatenate([w[j] for w in ws], axis=0 if j == 3 else 1) for j in range(4))
        for name, arr in zip(G.PARAMS, (q, k, v, o)):
            ex.tensors[f"{pre}{name}/w"] = arr
    ex.config = {"num_heads": H, "key_size": D, "emb_size": D, "include_query": not excl, "dampening": 1.0,
                 "y_update": False, "deq": shared, "use_bias": False, "use_softmax": False, "layer_norm": False,
                 "att_only_trans": True, "in_proj": False, "out_proj": False, "pos_enc": False}
    if shared:
        ex.config["num_layers"] = len(layers)
    ex.settings = {"num_heads": H}
    if shared:
        ex.settings["num_layers"] = len(layers)
    if not excl:
        ex.settings["include_query"] = "true"
    return ex


_PLANS = {"precision-ls": _precision_ls, "zoology": _zoology, "icl-gd": _icl_gd}
#: the settings the summary shows (what the importer reads; the file holds the whole config)
_SHOWN = {"precision-ls": ("causal", "conv_type", "use_resid"), "zoology": ("tokens", "use_act"),
          "icl-gd": ("num_heads", "num_layers", "include_query")}
#: how each peer runs its model in float64
_DOUBLE = {"precision-ls": "training.dtype float64", "zoology": "model.double()",
           "icl-gd": "jax.config.update('jax_enable_x64', True)"}


# ------------------------------------------------------------------ the library

def check(construction: Construction, fmt: str, *, k: int | None = None, sections=None) -> Exported:
    """Whether ``fmt`` holds the stack (an :class:`ExportError` naming what does not fit), without
    writing or converting anything: the decisions and notes of the export."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r} (formats: {', '.join(FORMATS)})")
    construction, k, sections = _module(construction, k, sections)
    layers = stack(construction, k, sections)
    if fmt == "polyverify":
        _polyverify_sections(construction, k, sections)
        return Exported(fmt, len(layers))
    return _PLANS[fmt](layers, False)


def plan(construction: Construction, fmt: str, *, k: int | None = None, sections=None) -> Exported:
    """The stack in a peer's format: tensors as numpy arrays with the peer's names, in float32
    where every entry is a float32 value, else in float64 (each entry rounded once to nearest
    from its exact rational; :attr:`Exported.inexact` counts those that are not values of the
    dtype written), and the config.  Not for ``polyverify`` (:func:`export` writes it)."""
    if fmt not in _PLANS:
        raise ExportError(f"unknown peer format {fmt!r} (formats: {', '.join(_PLANS)})")
    construction, k, sections = _module(construction, k, sections)
    ex = _PLANS[fmt](stack(construction, k, sections), True)
    exact = {name: _rationals(a, name, fmt) for name, a in ex.tensors.items()}
    dtype = "float32"
    if any(round_exact(q, "float32") != q for qs in exact.values() for _, q in qs):
        dtype = "float64"
        n32 = sum(round_exact(q, "float32") != q for qs in exact.values() for _, q in qs)
        ex.notes.insert(0, f"float64: {n32} entries are not float32 values (a float32 model rounds each once more "
                           f"when it loads the file; in float64: {_DOUBLE[fmt]})")
    out = {}
    for name, a in ex.tensors.items():
        f = np.zeros(np.shape(a), dtype=dtype)
        for idx, q in exact[name]:
            v = round_exact(q, dtype)
            if not np.isfinite(v):
                raise ExportError(f"{fmt}: tensor {name} holds {q}, beyond {dtype}'s range")
            f[idx] = v
            ex.inexact += Fraction(v) != q
            ex.entries += 1
        out[name] = f
    ex.tensors, ex.dtype = out, dtype
    ex.config["dtype"] = dtype
    from verify.importers.described import describe

    desc = describe(construction)  # self-describing (issue 44 item 2): import --from FORMAT needs no other flag
    if desc is not None:
        ex.config["polyverify"] = desc
    return ex


def _rationals(a, name: str, fmt: str) -> list:
    """``(index, exact rational)`` of every nonzero entry of an exact array."""
    from constructions.ops import nonzero_pattern

    a = np.asarray(a, dtype=object)
    out = []
    for idx in zip(*np.nonzero(nonzero_pattern(a))):  # weights are sparse: the nonzero entries only
        z = a[idx]
        try:
            q = Fraction(int(z.p), int(z.q)) if hasattr(z, "p") and hasattr(z, "q") else Fraction(z)
        except (TypeError, ValueError):
            raise ExportError(f"{fmt}: tensor {name} holds {z!r}, not an exact number") from None
        out.append((idx, q))
    return out


def _polyverify_sections(construction, k, sections):
    """``(construction, k, layers)`` for ``weights_io.save``: ``construction.layers(k)`` is the
    stack where its body copies are one body repeated (``layers`` None); where they differ,
    ``layers`` is the unrolled stack (each copy its own layers, ``"unrolled"`` in the metadata)."""
    if construction is None:
        raise ExportError("polyverify: a module loaded from a weight file has no construction (its name, layout and "
                          "input map) to write beside its weights; build the module with load_module(construction, k)")
    if sections is None:
        return construction, _k(construction, k), None
    s = _sections(sections)
    body = s.bodies[0] if s.bodies else list(construction.body)
    for j, b in enumerate(s.bodies):
        if len(b) != len(body):
            raise ExportError(f"polyverify: body copy {j} has {len(b)} layers and copy 0 {len(body)}; "
                              f"{construction.name}'s body has {len(construction.body)}")
    con = copy.copy(construction)
    con.prologue, con.body, con.epilogue = list(s.prologue), list(body), list(s.epilogue)
    from constructions.weights_io import same_layer

    same = all(x is y or same_layer(x, y) for b in s.bodies for x, y in zip(b, body))
    unrolled = None if same else list(s.prologue) + [L for b in s.bodies for L in b] + list(s.epilogue)
    return con, len(s.bodies), unrolled


def _module(source, k, sections):
    """``(construction, k, sections)`` of what :func:`export` is given: a Construction as it is, a
    ``polyverify.torch`` module as its construction (None from a weight file) and its current
    weights (``exact_sections``)."""
    if source is None or isinstance(source, Construction):  # None: the layers are all in ``sections``
        return source, k, sections
    if callable(getattr(source, "exact_sections", None)) and hasattr(source, "blocks"):
        if k is not None or sections is not None:
            raise ExportError("a module exports its own weights and depth: pass neither k nor sections")
        try:
            return source.construction, None, source.exact_sections()
        except ValueError as e:
            raise ExportError(str(e)) from None
    raise ExportError(f"export takes a Construction or a polyverify.torch module (load_module), not "
                      f"{type(source).__name__!r}")


def frozen_for(fmt: str):
    """What ``fmt`` fixes in a layer, as ``polyverify.torch.load_module``'s ``frozen``: a function
    ``(layer, array name) -> bool``.  zoology: the mixer's missing in / out projection
    (``W_in = W_out = I``, ``b_in = b_out = 0``: ``verify.importers.zoology.FIXED``) and, in a layer
    without the residual, the constant gate ``W_gate = 0`` (or convolution ``h = 0``) that takes
    back the ``u`` the mixer adds; precision-ls: a
    circular BaseConv's ``b_conv`` (the long filter has no bias); nothing for the others."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r} (formats: {', '.join(FORMATS)})")
    if fmt == "zoology":
        from verify.importers.zoology import FIXED

        names = {n for n in FIXED if n != "residual"}

        def zoology(L, n):
            if L.kind != "baseconv":
                return False
            if n in names:
                return True
            if not L.residual:  # the mixer adds u: a constant gate (or convolution) takes it back (_zoology)
                if _is_zero(dense(L.W_gate)):
                    return n == "W_gate"
                return _is_zero(dense(L.h)) and n == "h"
            return False
        return zoology
    if fmt == "precision-ls":
        return lambda L, n: L.kind == "baseconv" and n == "b_conv" and L.convolution == "circular"
    return lambda L, n: False


def export(path, construction: Construction, fmt: str = DEFAULT_FORMAT, *, k: int | None = None,
           sections=None) -> Exported:
    """Write the stack to ``path`` in ``fmt`` (atomically: a temporary file renamed over ``path``).
    ``construction``: a Construction, or a ``polyverify.torch`` module as trained (module docstring)."""
    path = Path(path)
    _check_suffix(path, fmt)
    construction, k, sections = _module(construction, k, sections)
    if fmt == "polyverify":
        from constructions.weights_io import save

        con, kk, unrolled = _polyverify_sections(construction, k, sections)
        with atomic_path(path) as tmp:
            save(tmp, con, kk, layers=unrolled)
        ex = Exported(fmt, con.depth(kk))
        if unrolled is not None:
            ex.notes.append(f"the {kk} body copies differ: written unrolled (each copy its own layers; "
                            f"\"unrolled\": true in the metadata)")
    else:
        ex = plan(construction, fmt, k=k, sections=sections)
        with atomic_path(path) as tmp:
            _write(tmp, export_suffix(path, fmt), ex)
    ex.path = path
    return ex


def _write(tmp: Path, suffix: str, ex: Exported) -> None:
    if suffix == ".npz":
        with open(tmp, "wb") as f:  # a file object: np.savez would add .npz to the temporary name
            np.savez(f, **ex.tensors)
    elif suffix == ".safetensors":
        from safetensors.numpy import save_file

        save_file({k: np.ascontiguousarray(v) for k, v in ex.tensors.items()}, str(tmp),
                  metadata={"config": json.dumps(ex.config)})
    else:
        import torch

        torch.save({"model_state_dict": {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in ex.tensors.items()},
                    "config": ex.config}, str(tmp))


def _check_suffix(path: Path, fmt: str) -> None:
    problem = export_suffix_problem(path, fmt)
    if problem:
        raise ExportError(problem)


# ------------------------------------------------------------------ the command line

def check_export_arguments(args, construction, *, k: int | None = None, sections=None) -> Path | None:
    """Validate ``--export`` / ``--format`` before any work (a UsageError, one line): the format,
    the file's suffix, the output path (``polyverify.plumbing.cli.output_file``) and whether the format
    holds the construction.  Returns the path (None without ``--export``)."""
    fmt = getattr(args, "export_format", None)
    if fmt is not None and fmt not in FORMATS:
        raise UsageError(f"--format {fmt!r}: not a format ({', '.join(FORMATS)})")
    if getattr(args, "export", None) is None:
        if fmt is not None:
            raise UsageError("--format needs --export FILE")
        return None
    path = output_file("--export", args.export)
    fmt = fmt or DEFAULT_FORMAT
    try:
        _check_suffix(path, fmt)
    except ExportError as e:
        raise UsageError(f"--export: {e}") from None
    if not isinstance(construction, Construction):
        raise UsageError(f"--export: {getattr(construction, 'name', 'this')} is not a layer stack "
                         f"({type(construction).__name__}): it has no weights to export")
    try:
        check(construction, fmt, k=k, sections=sections)
    except ExportError as e:
        raise UsageError(f"--format {e}") from None
    return path


def write_export(args, construction, sections=None, *, k: int | None = None, out=None) -> Exported | None:
    """Write ``--export`` (atomically) after the work; prints the summary to ``out`` where given.
    None without ``--export``."""
    if getattr(args, "export", None) is None:
        return None
    try:
        ex = export(args.export, construction, getattr(args, "export_format", None) or DEFAULT_FORMAT, k=k,
                    sections=sections)
    except ExportError as e:  # check_export_arguments refused these before the work
        raise UsageError(f"--format {e}") from None
    if out is not None:
        for line in ex.summary():
            print(line, file=out)
    return ex
