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
               eq. (2)-(3)); seed 001's LSA       value,linear}/w`` (one module applied ``num_layers``
               (Hagiwara's form) rewritten into   times where every layer is the same; else
               it (``icl_gd.token_form``)         ``{model}/~trans_block/layer_{l}/``), per head
                                                  ``W_Q = I``, ``W_K = Q``, ``W_V = I``, ``W_O = P^T``
                                                  (``Q = W_K W_Q^T``, ``P = (W_V W_O)^T``), key size D
=============  =================================  =====================================================

What a format cannot hold is refused before any work with one line naming it
(:class:`ExportError`): a position-dependent bias matrix where the format has no rewrite for it
(zoology's biases are one per channel; precision-ls's export writes one with extra *constant
channels*, below), a convolution the peer's mixer does not compute (zoology's is causal; precision-ls has
one ``causal`` flag and one ``use_resid`` for every block), a layer kind the format has no
module for, an in / out projection zoology's mixer does not have.  zoology's mixer always adds
``u``; a BaseConv layer without the residual is written in its form only where that is the same
map exactly: a constant gate ``g`` (``W_gate = 0``, every ``g_c != 0``: the filter gets
``-1/g_c`` at lag 0) or a constant convolution ``z`` (``h = 0``, every ``z_c != 0``:
``W_gate`` gets ``-1/z_c`` on its diagonal); the export says so.  icl-gd's GD model
(``Transformer_gd``, ``tr_gd`` of ``src/train.py``) has one head: a stack with more heads is
written as the trained model ``transformer`` (``num_heads`` from the config), and a layer with
fewer heads than the others gets zero heads.

**Per-token biases as constant channels** (precision-ls; issue 44 item 4).  A BaseConv stack whose
bias matrices differ between tokens is written on a wider state: one indicator channel per class of
tokens with the same bias rows (all but the largest class), 1 on the class's tokens and 0 elsewhere,
set by the model's input and carried unchanged by every block; each bias is then a per-channel bias
plus weights from the indicators (``B = 1 b0^T + sum_p K_p (b_p - b0)^T`` in ``W_in`` / ``W_gate`` /
``W_out``), and a per-token convolution bias is first moved into ``b_in`` through the filter (solved
exactly) or, where the gate is a constant, into ``b_out`` (``verify.importers.writing.constant_channels``;
the same map exactly on the construction's channels).  :attr:`Exported.constants` names the channels
and their values; the file's description gives them to the import's layout (``"constants"``,
``verify/importers/mapping.py``), which sets them on the input and proves that they come out unchanged.

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

**One module per format.**  Each format's writer is in its module beside its reader and mapping
table (``verify/importers/precision_ls.py``, ``zoology.py``, ``icl_gd.py``: ``plan(layers,
make_tensors)``, the tensors as exact arrays and the config, ``SHOWN``, ``FLOAT64`` and ``frozen``;
``polyverify_fmt.py``: ``save``, its own container), behind the one registry
``verify.importers.REGISTRY`` (name, module, suffixes).  This module drives them: the stack, the
float dtype and rounding, the description (``verify/importers/described.py``), the container by
the file's suffix and the atomic write.

The command-line part is :func:`add_export_arguments`, :func:`check_export_arguments` (before
any work) and :func:`write_export` (atomic), one call each in a command.
"""
from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np

from constructions.base import Construction, round_exact
from constructions.layers import Layer
from constructions.sparse import dense, is_sparse
from polyverify.plumbing.cli import UsageError, atomic_path, output_file

# light, the parsers' part: the formats, their file names (SUFFIXES: each format's suffixes) and the options
from .cli_common import (DEFAULT_FORMAT, FORMATS, SUFFIXES, add_export_arguments,  # noqa: F401
                         export_suffix, export_suffix_problem)
# each format's writer is in its module (verify/importers/, one line of its REGISTRY); these are shared
from .importers import FORMATS as MODULES
from .importers.writing import ExportError, Exported, as_sections, default_k, layout_constants  # noqa: F401


# ------------------------------------------------------------------ the stack

def stack(construction: Construction, k: int | None = None, sections=None) -> list[Layer]:
    """The layers to export: ``sections`` (a :class:`constructions.base.Sections` or a dict
    ``{"prologue", "body" | "bodies", "epilogue"}``: a weight file's own layers) or the
    construction's ``layers(k)`` (``k`` None: 1 where it has a body, else 0)."""
    if sections is not None:
        s = as_sections(sections)
        layers = list(s.prologue) + [L for body in s.bodies for L in body] + list(s.epilogue)
    else:
        layers = construction.layers(default_k(construction, k))
    # the peers' formats hold dense tensors: a compiled layer's sparse channel mixes are laid out dense here
    return [L.map(dense) if any(is_sparse(A) for A in L.arrays().values()) else L for L in layers]


def _writes_tensors(fmt: str) -> bool:
    """Whether ``fmt``'s module has ``plan`` (tensors and config, in a container this module writes by the
    file's suffix) rather than ``save`` (its own container: polyverify)."""
    return hasattr(MODULES[fmt], "plan")


# ------------------------------------------------------------------ the library

def check(construction: Construction, fmt: str, *, k: int | None = None, sections=None) -> Exported:
    """Whether ``fmt`` holds the stack (an :class:`ExportError` naming what does not fit), without
    writing or converting anything: the decisions and notes of the export."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r} (formats: {', '.join(FORMATS)})")
    construction, k, sections = _module(construction, k, sections)
    layers = stack(construction, k, sections)
    if not _writes_tensors(fmt):
        MODULES[fmt].check_writable(construction, k, sections)
        return Exported(fmt, len(layers))
    return MODULES[fmt].plan(layers, False)


def plan(construction: Construction, fmt: str, *, k: int | None = None, sections=None) -> Exported:
    """The stack in a peer's format: tensors as numpy arrays with the peer's names, in float32
    where every entry is a float32 value, else in float64 (each entry rounded once to nearest
    from its exact rational; :attr:`Exported.inexact` counts those that are not values of the
    dtype written), and the config.  Not for ``polyverify`` (:func:`export` writes it)."""
    peers = [f for f in FORMATS if _writes_tensors(f)]
    if fmt not in peers:
        raise ExportError(f"unknown peer format {fmt!r} (formats: {', '.join(peers)})")
    construction, k, sections = _module(construction, k, sections)
    mod = MODULES[fmt]
    ex = mod.plan(stack(construction, k, sections), True)
    exact = {name: _rationals(a, name, fmt) for name, a in ex.tensors.items()}
    dtype = "float32"
    if any(round_exact(q, "float32") != q for qs in exact.values() for _, q in qs):
        dtype = "float64"
        n32 = sum(round_exact(q, "float32") != q for qs in exact.values() for _, q in qs)
        ex.notes.insert(0, f"float64: {n32} entries are not float32 values (a float32 model rounds each once more "
                           f"when it loads the file; in float64: {mod.FLOAT64})")
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
    from verify.importers.described import describe, describe_circuit

    # self-describing (issue 44 items 2-3): import --from FORMAT (a compiled circuit: --circuit G.json) needs no
    # other flag
    desc = describe(construction) or describe_circuit(construction)  # a catalogue entry first (s003-circuit-h21)
    if desc is not None:
        if ex.constants:  # the state's constant channels (issue 44 item 4): mapped to no column, set per token
            lay = desc["layout"]
            lay["columns"] = list(lay["columns"]) + [None] * len(ex.constants)
            lay["constants"] = layout_constants(ex.constants)
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
    ``(layer, array name) -> bool``, the format module's ``frozen``.  zoology: the mixer's missing in /
    out projection (``W_in = W_out = I``, ``b_in = b_out = 0``: ``verify.importers.zoology.FIXED``) and,
    in a layer without the residual, the constant gate ``W_gate = 0`` (or convolution ``h = 0``) that
    takes back the ``u`` the mixer adds; precision-ls: a circular BaseConv's ``b_conv`` (the long filter
    has no bias); nothing for the others."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r} (formats: {', '.join(FORMATS)})")
    return MODULES[fmt].frozen


def export(path, construction: Construction, fmt: str = DEFAULT_FORMAT, *, k: int | None = None,
           sections=None) -> Exported:
    """Write the stack to ``path`` in ``fmt`` (atomically: a temporary file renamed over ``path``).
    ``construction``: a Construction, or a ``polyverify.torch`` module as trained (module docstring)."""
    path = Path(path)
    _check_suffix(path, fmt)
    construction, k, sections = _module(construction, k, sections)
    if not _writes_tensors(fmt):  # its own container (polyverify)
        with atomic_path(path) as tmp:
            ex = MODULES[fmt].save(tmp, construction, k, sections)
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


# ------------------------------------------------------------------ coverage (docs/interop.md, "Coverage")

#: why a refusal stands (no exact rewrite done), by the refusal's words: the first entry whose words all occur
#: in the ExportError's message
WHY_NOT: list[tuple[tuple[str, ...], str]] = [
    (("position-dependent bias",),
     "not rewritten for this format: precision-ls's export makes such biases weights from extra constant channels "
     "(writing.constant_channels: its in_proj, projection and out_proj read them); zoology's mixer has no in / out "
     "projection to read them (only a gate bias could be, which is not done)"),
    (("b_conv differs between tokens", "no input to its"),
     "no exact rewrite: that bias is added after a convolution no input to which gives it, and multiplied by a "
     "gate that reads the state, so no constant channel makes it a weight"),
    (("circular convolution", "causal"),
     "no exact rewrite: the construction's circular convolution mixes token t with later tokens, which no causal "
     "filter on the same T tokens does"),
    (("no in / out projection",),
     "no exact rewrite: zoology's mixer is conv(u) * projection(u) + u, with nothing before the convolution or "
     "after the product"),
    (("holds BaseConv",),
     "no exact rewrite: attention mixes tokens by products of two tokens' channels; a BaseConv block's token "
     "mixing is a fixed convolution"),
    (("elsa layer",),
     "no exact rewrite: ELSA's bias matrices are per token (seed 001 eq. (16)); von Oswald et al.'s attention has "
     "no bias"),
    (("holds token-form", "baseconv layer"),
     "no exact rewrite: von Oswald et al.'s layer mixes tokens only by attention; a BaseConv block's convolution "
     "is a fixed token mixing"),
]


def coverage(sizes=(4, 2)) -> list[tuple[str, str, bool, str]]:
    """Per gd architecture (``constructions.catalogue.gd_architectures``, built at ``sizes``) and format:
    ``(architecture, format, fits, why)``: ``why`` the rewrites the export makes (its notes) where it fits,
    else its refusal and why no exact rewrite is done (:data:`WHY_NOT`)."""
    from constructions.catalogue import gd_architectures

    out = []
    for name, arch in gd_architectures().items():
        con = arch.build(*sizes)
        for fmt in FORMATS:
            try:
                ex = check(con, fmt)
            except ExportError as e:
                msg = str(e)
                why = next((w for words, w in WHY_NOT if all(x in msg for x in words)), None)
                if why is None:
                    raise AssertionError(f"{name} -> {fmt}: no reason recorded for the refusal {msg!r}") from None
                out.append((name, fmt, False, f"{msg}. {why[0].upper()}{why[1:]}"))
            else:
                out.append((name, fmt, True, "; ".join(ex.notes)))
    return out


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
