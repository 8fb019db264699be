"""``--from precision-ls``: HazyResearch/precision-ls BaseConv blocks (seed 000's code).

Reads a torch ``state_dict`` of the model's blocks (``model._backbone.transformer.h``; a ``.pt``
file, ``torch.load(weights_only=True)``, optionally ``{"model_state_dict": ..., "config": {...}}``,
or a safetensors file with the config as JSON in its metadata).  Peer code:
``src/models/mixers/base_conv.py`` (``BaseConv``), ``src/models/mixers/convs/convolution.py``
(``ShortConvolution``, ``LongConvolution``), ``src/models/gpt2.py`` (``Block``).  Block ``i``,
keys ``[...]{i}.seq_mixer.base_conv.*``, computes (``u``: tokens x channels, row vectors)::

    y = out_proj( conv(in_proj(u)) * projection(u) )                      use_resid = False
    y = u + bw0 * out_proj( (conv + id)(in_proj(u)) * projection(u) ) + bw1 * u   use_resid = True

(``Block`` adds ``u`` when ``use_resid``; ``BaseConv`` then has ``branch_weights = (bw0, bw1)``
and its convolution adds its input).  This is seed 000 eq. (2)/(19) (``constructions.layers.
BaseConv``) with:

==================================  ==========================================================
precision-ls tensor                 this toolkit's BaseConv
==================================  ==========================================================
``in_proj.weight`` (out x in)       ``W_in = weight^T``
``in_proj.bias`` (C,)               ``b_in``: the bias repeated on every token (T x C)
``conv.conv.weight`` (C, 1, K)      ``h`` (T x C), taps reversed (``verify/importers/convs.py``);
                                    ``causal=True``: padding K-1 -> causal; ``causal=False``:
                                    padding K//2 -> the "same" convention
``conv.conv.bias`` (C,)             ``b_conv`` repeated on every token
``conv.filter`` (C, L) (long conv)  ``h[s, c] = filter[c, s]``, s < T; ``causal=False``: circular
``projection.weight`` / ``.bias``   ``W_gate = weight^T``, ``b_gate`` repeated
``out_proj.weight`` / ``.bias``     ``W_out = bw0 weight^T``, ``b_out = bw0 bias`` repeated
``branch_weights`` (2,)             ``residual=True`` (``bw1`` must be 0: ``(1 + bw1) u`` is not a
                                    residual); the convolution gains +1 at lag 0
==================================  ==========================================================

Settings (``--config KEY=VALUE`` or the file's ``config``): ``causal`` (required: the peer's one
flag for two operators), ``tokens`` (T, the sequence length; default the kernel / filter
length, ``l_max``).  Refused: implicit long convolutions (an MLP filter).  The rest of the
model's ``state_dict`` (``_read_in``, ``wpe``, ``_read_out``, LayerNorms, MLPs: :data:`OUTSIDE`) is
named and refused unless ``--blocks-only``, which proves the blocks and names it; a training
checkpoint (``src/train.py``'s ``state.pt``: ``model_state_dict``, ``optimizer_state_dict``,
``train_step``) is read as saved (``common.load_tensors``).

Default layout (``notebooks/baseconv_construction.ipynb``; N = T tokens, C = 4D + 1 channels
``[a (D), b, x (D), s1 (D), s2 (D)]``, no query token, no epilogue): onto the regions
``a, b, x, s1, s2`` of ``gd-baseconv`` / ``prefix-coupled`` (their query token and the
channels ``q``, ``y`` are the specification's own).
"""
from __future__ import annotations

import re

import numpy as np

from constructions import ops
from constructions.layers import BaseConv

from .common import (ImportRefused, Imported, filed_config, Tensors, as_bool, as_count, config_from, load_tensors,
                     mark_not_proved, numbered_blocks, repeat_rows, transpose)
from .convs import add_identity, conv1d_taps, conv1d_weight, long_filter, long_taps
from .writing import (ExportError, Exported, check_kinds, constant_channels, distinct_layers, is_zero, row_constant,
                      same_for_all)

NAME = "precision-ls"
_KEY = re.compile(r"(?:.*\.)?(\d+)\.seq_mixer\.base_conv\.(.+)")
SETTINGS = ("causal", "tokens", "use_resid", "conv_type")

# The mapping table (module docstring), read here and written backwards by ``verify/export.py``.
#: the blocks of the notebook's model (``model._backbone.transformer.h``): block ``i``'s keys
BLOCK = "_backbone.transformer.h.{i}.seq_mixer.base_conv."
#: each ``nn.Linear`` of a block -> (this toolkit's weight, its bias): ``W = weight^T`` and the
#: bias on every token; ``out_proj``'s pair is scaled by ``bw0`` where ``branch_weights`` is present
LINEARS = {"in_proj": ("W_in", "b_in"), "projection": ("W_gate", "b_gate"), "out_proj": ("W_out", "b_out")}
#: the convolution's tensors: short (a depthwise ``Conv1d``, taps reversed, with a bias) and long
#: (``filter``, lag order, no bias); ``branch_weights`` ``(bw0, bw1)`` where ``use_resid``
SHORT_WEIGHT, SHORT_BIAS, LONG_FILTER, BRANCH = "conv.conv.weight", "conv.conv.bias", "conv.filter", "branch_weights"


#: the rest of precision-ls's ``TransformerModel`` (``src/models/gpt2.py``): what each tensor is.
#: No specification of this toolkit includes an embedding or a read-out, so these are never
#: proved: ``--blocks-only`` proves the blocks and names them; a LayerNorm or an MLP inside a
#: block is named too (the proof then covers the blocks' mixers composed directly)
OUTSIDE = [
    (r"(?:.*\.)?_read_in\.(?:weight|bias)", "embedding _read_in (nn.Linear from the model's inputs onto the state)"),
    (r"(?:.*\.)?transformer\.wpe\.weight", "position embedding wpe (added to each token before the blocks)"),
    (r"(?:.*\.)?_read_out\.(?:weight|bias)", "read-out _read_out (nn.Linear from the last state)"),
    (r"(?:.*\.)?transformer\.ln_f\.(?:weight|bias)", "final LayerNorm ln_f (after the blocks; not polynomial)"),
    (r"(?:.*\.)?h\.(\d+)\.ln_[12]\.(?:weight|bias)", "LayerNorm inside block {i} (not polynomial; the proof covers "
                                                    "the blocks' mixers composed directly)"),
    (r"(?:.*\.)?h\.(\d+)\.mlp\..+", "MLP inside block {i} (not polynomial; the proof covers the blocks' mixers "
                                    "composed directly)"),
]


#: the whole model as an export writes it (issue 44 item 1: precision-ls's ``get_model_from_run`` loads it
#: strictly): ``_read_in`` and ``_read_out`` identities (C x C, zero biases) and a zero position embedding, so
#: the model's input and output are the blocks' state.  Where all five are exactly that, they are read (the
#: proof's claim is then the whole model's); otherwise each is named as not proved (``OUTSIDE``)
IDENTITY_EMBEDDING = {"_read_in.weight": "I", "_read_in.bias": "0", "_backbone.transformer.wpe.weight": "0",
                      "_read_out.weight": "I", "_read_out.bias": "0"}


def _identity_embedding(T) -> bool:
    """Read the five tensors of :data:`IDENTITY_EMBEDDING` where all are present and exactly the identity
    / zero (all or none)."""
    if not all(k in T for k in IDENTITY_EMBEDDING):
        return False
    for k, want in IDENTITY_EMBEDDING.items():
        a = np.asarray(T.raw(k))
        if want == "I" and not (a.ndim == 2 and a.shape[0] == a.shape[1] and (a == np.eye(a.shape[0])).all()):
            return False
        if want == "0" and a.any():
            return False
    for k, want in IDENTITY_EMBEDDING.items():
        T.take(k, "identity" if want == "I" else "zero", None)
    return True


def read(path, settings: dict) -> Imported:
    tensors, extra = load_tensors(path, NAME, lazy=True)  # the dense tensors are read lazily (take(lazy=True))
    cfg, src = config_from(extra, settings, path, known=SETTINGS, fmt=NAME)
    T = Tensors(tensors, path)
    embedding = _identity_embedding(T)
    mark_not_proved(T, OUTSIDE)
    blocks = numbered_blocks(T, _KEY, path, "block", "[...]{i}.seq_mixer.base_conv.*")
    if "causal" not in cfg:
        raise ImportRefused(f"{path}: the file does not say whether its convolutions are causal (precision-ls's "
                           f"'causal' setting); pass --config causal=true or --config causal=false")
    causal = as_bool(cfg["causal"], "causal")
    conventions = {"causal": {"value": causal, "from": src["causal"]}}
    layers, tokens = [], None
    inert_taps: dict = {}
    for i, b in enumerate(blocks):
        if any(n.startswith("conv.pos_emb") or n.startswith("conv.mlp") for n in b):
            k = next(b[n] for n in b if n.startswith("conv."))
            raise ImportRefused(f"{path}: {k}: an implicit long convolution (its filter is an MLP of positional "
                               f"features with ReLU) cannot be read exactly; use conv_type short or long")
        if "in_proj.weight" not in b:
            raise ImportRefused(f"{path}: block {i} lacks in_proj.weight")
        C = T.dims(b["in_proj.weight"], 2, "an nn.Linear weight (out x in)")[0]
        if SHORT_WEIGHT in b:
            kind = "short"
            K = T.dims(b[SHORT_WEIGHT], 3, "a depthwise Conv1d weight (C, 1, K)")[-1]
        elif LONG_FILTER in b:
            kind = "long"
            K = T.dims(b[LONG_FILTER], 2, "a long convolution's filter (C, L)")[-1]
        else:
            raise ImportRefused(f"{path}: block {i} has no convolution (conv.conv.weight or conv.filter)")
        if tokens is None:
            tokens = as_count(cfg["tokens"], "tokens") if "tokens" in cfg else K
            conventions["tokens"] = {"value": tokens, "from": src.get("tokens", f"the kernel length (l_max = {K})")}
            conventions["convolution"] = {"value": ("causal" if causal else ("same" if kind == "short" else
                                                                             "circular")),
                                          "from": f"causal={causal}, {kind} convolution"}
        Tn = tokens
        same = (not causal) and kind == "short"
        pre = b["in_proj.weight"][: -len("in_proj.weight")]

        def linear(mod):
            W, bias = LINEARS[mod]
            return (transpose(T.take(f"{pre}{mod}.weight", f"{W}^T", (C, C), lazy=True)),
                    T.take(f"{pre}{mod}.bias", bias, (C,)))

        W_in, b_in = linear("in_proj")
        if kind == "short":
            h, inert = conv1d_taps(T.take(pre + SHORT_WEIGHT, "filter h (taps reversed)", (C, 1, K)), Tn,
                                   same=same, key=pre + SHORT_WEIGHT)
            b_conv = repeat_rows(T.take(pre + SHORT_BIAS, "b_conv", (C,)), Tn)
        else:
            h, inert = long_taps(T.take(pre + LONG_FILTER, "filter h (lag order)", (C, K), lazy=True), Tn,
                                 pre + LONG_FILTER)
            b_conv = repeat_rows(_zero_vec(C), Tn)
        W_gate, b_gate = linear("projection")
        Wo, bo = linear("out_proj")
        resid = BRANCH in b
        if resid:
            bw = T.take(pre + BRANCH, "branch weights (bw0 scales W_out, b_out; bw1 must be 0)", (2,))
            if bw[1] != 0:
                raise ImportRefused(f"{path}: {pre}branch_weights[1] = {bw[1]} != 0: the block computes "
                                   f"(1 + bw1) u + ..., which is not a BaseConv residual")
            Wo, bo = np.asarray(Wo) * bw[0], bo * bw[0]  # (a lazily read W_out: its exact values, scaled)
            h = np.array(h, dtype=object)  # a lazily read filter is read-only: its exact values, one lag added
            add_identity(h, same=same)
        if inert:
            inert_taps[f"block {i}"] = inert
        layers.append(BaseConv(W_in, repeat_rows(b_in, Tn), h, b_conv, W_gate, repeat_rows(b_gate, Tn), Wo,
                               repeat_rows(bo, Tn), causal=causal, residual=resid, same=same))
    T.check_all_read()
    if inert_taps:
        conventions["inert_taps"] = {"value": inert_taps, "from": "nonzero taps at lags that act on no token of a "
                                                                 f"{tokens}-token sequence (read, counted)"}
    conventions["residual"] = {"value": [L.residual for L in layers],
                               "from": "per block: true where branch_weights is present (use_resid=True)"}
    conventions["weights"] = {"value": "nn.Linear (out x in) transposed; per-channel biases on every token",
                              "from": "precision-ls base_conv.py"}
    C = layers[0].W_in.shape[0]
    if embedding:
        shapes = {k: tuple(np.shape(T.raw(k))) for k in IDENTITY_EMBEDDING}
        if shapes["_read_in.weight"] != (C, C) or shapes["_read_out.weight"] != (C, C) or \
                shapes["_backbone.transformer.wpe.weight"][1:] != (C,) or \
                shapes["_backbone.transformer.wpe.weight"][0] < tokens:
            raise ImportRefused(f"{path}: the identity embedding's shapes {shapes} do not fit the blocks' state "
                               f"({tokens} tokens x {C} channels)")
        conventions["embedding"] = {"value": "identity", "from": "the file: _read_in = I, wpe = 0, _read_out = I "
                                                                "(the model's input and output are the blocks' state)"}
    sizes = {"n": tokens}
    if (C - 1) % 4 == 0 and C > 1:
        sizes["d"] = (C - 1) // 4
    return filed_config(Imported(NAME, str(path), layers, (tokens, C), conventions, dict(T.read), T.dtype(), sizes,
                    not_proved=dict(T.outside), training_state=extra.get("training_state", {})), cfg, src)


def check_config(settings: dict) -> None:
    """The ``--config`` values, checked before the file is read."""
    config_from({}, settings, "--config", known=SETTINGS, fmt=NAME)
    if "causal" in settings:
        as_bool(settings["causal"], "causal")
    if "tokens" in settings:
        as_count(settings["tokens"], "tokens")


def _zero_vec(C):
    import numpy as np

    a = np.empty(C, dtype=object)
    a.fill(0)
    return a


def default_layout(spec, imported: Imported) -> dict | None:
    """The notebook's layout onto a specification with regions a, b, x, s1, s2 (gd-baseconv,
    prefix-coupled); None for other specifications (pass --layout)."""
    regs = spec.layout.regions
    T, C = imported.state_shape
    if not all(r in regs for r in ("a", "b", "x", "s1", "s2")) or (C - 1) % 4:
        return None
    d = (C - 1) // 4
    widths = {r: regs[r].shape[1] for r in ("a", "b", "x", "s1", "s2")}
    if widths != {"a": d, "b": 1, "x": d, "s1": d, "s2": d}:
        return None
    ch = {"a": list(range(0, d)), "b": [d], "x": list(range(d + 1, 2 * d + 1)),
          "s1": list(range(2 * d + 1, 3 * d + 1)), "s2": list(range(3 * d + 1, 4 * d + 1))}
    return {"format": "polyverify-layout/1", "tokens": list(range(T)), "channels": ch,
            "sections": {"prologue": 0, "epilogue": 0},
            "note": "precision-ls notebooks/baseconv_construction.ipynb: channels [a, b, x, s1, s2], N tokens, "
                    "no query token, no epilogue"}

# ------------------------------------------------------------------ the writer: the table above read backwards
# (``verify/export.py`` drives it: the stack's layers in, the peer's tensors and config out)

#: the settings an export's summary shows (what the reader needs; the file holds the whole config)
SHOWN = ("causal", "conv_type", "use_resid")
#: how the peer runs its model in float64 (an export with entries that are not float32 values says so)
FLOAT64 = "training.dtype float64"


def plan(layers, make_tensors: bool) -> Exported:
    fmt = NAME
    check_kinds(layers, fmt, "baseconv", "BaseConv blocks")
    conv = same_for_all(layers, fmt, lambda L: L.convolution, "convolution", "precision-ls's one 'causal' setting (and one "
                        "conv_type) covers every block")
    resid = same_for_all(layers, fmt, lambda L: L.residual, "residual =",
                         "precision-ls's one 'use_resid' setting covers every block")
    T, C0 = same_for_all(layers, fmt, lambda L: tuple(L.shape), "state", "one model has one state")
    # bias matrices that differ between tokens: extra constant channels make the differences weights (issue 44
    # item 4; writing.constant_channels, the same map exactly on the construction's channels)
    layers, constants, moved = constant_channels(layers, fmt, "precision-ls's Conv1d bias")
    C = C0 + len(constants)
    kind = "long" if conv == "circular" else "short"  # circular: FFT of size T; causal / "same": Conv1d
    same = conv == "same"
    ex = Exported(fmt, len(layers), constants=constants)
    if constants:
        said = "; ".join(f"channel {j}: 1 on token{'s' * (sum(v) > 1)} "
                         f"{', '.join(str(t) for t, x in enumerate(v) if x)}, 0 elsewhere"
                         for j, v in constants.items())
        ex.notes.append(f"bias matrices that differ between tokens: {len(constants)} constant channel"
                        f"{'s' * (len(constants) > 1)} after the construction's {C0} ({said}), set by the model's "
                        f"input and carried unchanged by every block; the bias differences are weights from them "
                        f"(W_in, W_gate, W_out), the same map exactly on the construction's channels"
                        + "".join(f"; layer {i}'s per-token b_conv (channel{'s' * (len(cs) > 1)} "
                                  f"{', '.join(map(str, cs))}) moved into {to}"
                                  + (" through its filter" if to == "b_in" else " (its gate is a constant)")
                                  for (i, to), cs in _grouped(moved).items()))
    rows = {}
    for i, L in distinct_layers(layers):
        r = {}
        for mod, (Wn, bn) in LINEARS.items():
            r[bn] = row_constant(i, bn, getattr(L, bn), fmt, "precision-ls's nn.Linear bias")
        if kind == "long":
            if not is_zero(L.b_conv):
                raise ExportError(f"{fmt}: layer {i} has a convolution bias b_conv; precision-ls's circular convolution "
                                  f"(the long filter, causal=False) has none")
        else:
            r["b_conv"] = row_constant(i, "b_conv", L.b_conv, fmt, "precision-ls's Conv1d bias")
        rows[id(L)] = r
    if not make_tensors:
        return ex
    for i, L in enumerate(layers):
        r = rows[id(L)]
        pre = BLOCK.format(i=i)
        for mod, (Wn, bn) in LINEARS.items():
            ex.tensors[f"{pre}{mod}.weight"] = np.ascontiguousarray(getattr(L, Wn).T)
            ex.tensors[f"{pre}{mod}.bias"] = r[bn]
        h = np.array(L.h, dtype=object)
        if resid:  # the peer's convolution adds its input (resid): the filter holds h - identity
            add_identity(h, same=same, by=-1)
        if kind == "short":
            ex.tensors[pre + SHORT_WEIGHT] = conv1d_weight(h, same=same)
            ex.tensors[pre + SHORT_BIAS] = r["b_conv"]
        else:
            ex.tensors[pre + LONG_FILTER] = long_filter(h)
        if resid:
            ex.tensors[pre + BRANCH] = np.array([1, 0], dtype=object)
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


def _grouped(moved) -> dict:
    """``{(layer, where): [channels]}`` of ``constant_channels``' moves."""
    out: dict = {}
    for i, c, to in moved:
        out.setdefault((i, to), []).append(c)
    return out


def frozen(L, n: str) -> bool:
    """What the format fixes in a layer (``verify.export.frozen_for``): a circular BaseConv's ``b_conv``
    (the long filter has no bias)."""
    return L.kind == "baseconv" and n == "b_conv" and L.convolution == "circular"
