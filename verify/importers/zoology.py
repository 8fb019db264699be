"""``--from zoology``: HazyResearch/zoology's BaseConv mixer (``zoology/mixers/base_conv.py``,
``zoology/mixers/convolution.py``).

A mixer computes ``y = conv(u) * projection(u) + u`` (``use_act=False``; with ``use_act`` both
factors pass through SiLU, which is not polynomial: refused).  Keys ``[...]{i}.sequence_mixer.*``
(a model's ``backbone.layers.{i}``) or, for one mixer saved alone, ``projection.weight`` ... at
the top.  Seed 003 Def. 4.1 in this toolkit's BaseConv (``constructions.layers.BaseConv``, the
form of ``constructions/catalogue/seed003_primitives.py``'s ``paper_layer``):

================================  =============================================================
zoology tensor                    this toolkit's BaseConv
================================  =============================================================
(none)                            ``W_in = I``, ``b_in = 0``, ``W_out = I``, ``b_out = 0``,
                                  ``residual=True`` (the mixer's ``+ u``)
``projection.weight`` (out x in)  ``W_gate = weight^T``
``projection.bias`` (C,)          ``b_gate`` repeated on every token
``conv.conv.weight`` (C, 1, K)    ``h``: causal (padding K-1), taps reversed (``convs.py``)
``conv.conv.bias`` (C,)           ``b_conv`` repeated on every token
``conv.filter`` (C, L) (long)     ``h[s, c] = filter[c, s]`` (causal FFT of size 2T), +1 at lag 0
                                  (``fft_conv`` returns ``y + u``); with fewer tokens than
                                  taps (``--config tokens=T``, T < L) the filter is *not* cut
                                  to T: taps at lags T+1..2T-1 wrap round onto earlier tokens
                                  (``convs.py``); read exactly as a circular or "same" filter
                                  where one is that operator, else refused, naming the taps
================================  =============================================================

Settings (``--config`` or the file's ``config``): ``tokens`` (T; default the long filter's
length, required for a short convolution), ``use_act`` (default False, zoology's default).
A ``LanguageModel``'s other tensors (embeddings, LayerNorms, state mixers, ``ln_f``, ``lm_head``:
:data:`OUTSIDE`) are named and refused unless ``--blocks-only``, which proves the mixers and
names them.
"""
from __future__ import annotations

import re
from fractions import Fraction

import numpy as np

from constructions.exact_floats import ExactFloats, is_lazy
from constructions.layers import BaseConv

from .common import (ImportRefused, Imported, filed_config, Tensors, as_bool, as_count, config_from, eye, load_tensors,
                     mark_not_proved, numbered_blocks, repeat_rows, transpose, zeros)
from .convs import add_identity, conv1d_lag, conv1d_taps, conv1d_weight, fft2t_taps, filter_row, fit_convention
from .writing import (ExportError, Exported, check_kinds, distinct_layers, is_identity, is_zero, row_constant,
                      same_for_all)

NAME = "zoology"
_KEY = re.compile(r"(?:(?:.*\.)?(\d+)\.sequence_mixer\.)?(projection\.weight|projection\.bias|conv\.conv\.weight|"
                  r"conv\.conv\.bias|conv\.filter|conv\..+)")
SETTINGS = ("tokens", "use_act")

# The mapping table (module docstring), read here and written backwards by ``verify/export.py``.
#: the mixers of a zoology model (``backbone.layers``): mixer ``i``'s keys
MIXER = "backbone.layers.{i}.sequence_mixer."
#: the mixer's one ``nn.Linear`` -> (this toolkit's weight, its bias): ``W = weight^T``, the bias on every token
PROJECTION = ("projection", ("W_gate", "b_gate"))
#: what the mixer fixes (it has no in / out projection and adds ``u``): ``"I"`` identity, ``0`` zero
FIXED = {"W_in": "I", "b_in": 0, "W_out": "I", "b_out": 0, "residual": True}
#: the convolution's tensors: short (a causal depthwise ``Conv1d``, taps reversed, with a bias)
#: and long (``filter``, lag order, no bias; ``fft_conv`` adds ``u``: +1 at lag 0)
SHORT_WEIGHT, SHORT_BIAS, LONG_FILTER = "conv.conv.weight", "conv.conv.bias", "conv.filter"


def _fixed(name: str, T: int, C: int):
    """The array (or setting) :data:`FIXED` gives ``name`` on a T x C state."""
    v = FIXED[name]
    if v == "I":
        return eye(C)
    return zeros(T, C) if v == 0 else v


#: the rest of zoology's ``LanguageModel`` (``zoology/model.py``): what each tensor is.  No
#: specification of this toolkit includes an embedding or an LM head, so these are never proved:
#: ``--blocks-only`` proves the sequence mixers and names them; a ``TransformerBlock``'s
#: LayerNorms and state mixer (an MLP) are named too (the proof covers the mixers composed directly)
OUTSIDE = [
    (r"(?:.*\.)?embeddings\.word_embeddings\.weight", "embedding word_embeddings (token ids onto the state)"),
    (r"(?:.*\.)?embeddings\.position_embeddings\.weight", "position embedding position_embeddings"),
    (r"(?:.*\.)?embeddings\.project_in\.weight", "embedding projection project_in"),
    (r"(?:.*\.)?lm_head\.weight", "LM head lm_head (tied to word_embeddings where the embeddings are learnable)"),
    (r"(?:.*\.)?backbone\.ln_f\.(?:weight|bias)", "final LayerNorm ln_f (after the blocks; not polynomial)"),
    (r"(?:.*\.)?layers\.(\d+)\.norm[12]\.(?:weight|bias)", "LayerNorm inside block {i} (not polynomial; the proof "
                                                          "covers the sequence mixers composed directly)"),
    (r"(?:.*\.)?layers\.(\d+)\.state_mixer\..+", "state mixer (MLP) inside block {i} (not polynomial; the proof "
                                                 "covers the sequence mixers composed directly)"),
]


def read(path, settings: dict, *, lazy: bool = True) -> Imported:
    """The file's mixers as BaseConv layers.  ``lazy`` (the default): the dense float tensors (the projection
    weight, the convolution's taps) are kept as the floats stored (``constructions.exact_floats``: each entry the
    binary fraction it is, no ``Fraction`` per entry; the file may then hold ``weights_io.MAX_ENTRIES``);
    ``lazy=False``: every entry one ``Fraction`` (the same exact values)."""
    tensors, extra = load_tensors(path, NAME, lazy=lazy)
    cfg, src = config_from(extra, settings, path, known=SETTINGS, fmt=NAME)
    _check_use_act(cfg)
    T = Tensors(tensors, path)
    mark_not_proved(T, OUTSIDE)
    mixers = numbered_blocks(T, _KEY, path, "mixer", "[...]{i}.sequence_mixer.projection.weight ...")
    conventions = {"use_act": {"value": False, "from": src.get("use_act", "default of zoology (use_act=False)")},
                   "convolution": {"value": "causal",
                                   "from": "zoology: Conv1d padding K-1 / FFT of size 2T, the filter not cut to T "
                                           "(convs.py)"}}
    layers, tokens = [], None
    modes, wrapped, inert_taps = [], [], {}
    for i, b in enumerate(mixers):
        _check_mixer(path, i, b)
        C = T.dims(b[f"{PROJECTION[0]}.weight"], 2, "an nn.Linear weight (out x in)")[0]
        long = LONG_FILTER in b
        if tokens is None:
            tokens = _tokens(T, path, cfg, src, b, long, conventions)
        Tn = tokens
        mode = "causal"
        if long:
            h, b_conv, inert, mode, wraps = _long_convolution(T, path, b, Tn, C, lazy)
            if wraps:
                wrapped.append(f"mixer {i}: {len(wraps)} taps at lags T+1..2T-1 wrap round; the mixer is read "
                               f"exactly as a {mode} convolution")
        else:
            h, b_conv, inert = _short_convolution(T, path, i, b, Tn, C, lazy)
        mod, (Wn, bn) = PROJECTION
        W_gate = transpose(T.take(b[f"{mod}.weight"], f"{Wn}^T", (C, C), lazy=lazy))  # a lazy one stays lazy
        bias_key = b.get(f"{mod}.bias")
        b_gate = repeat_rows(T.take(bias_key, bn, (C,)), Tn) if bias_key else zeros(Tn, C)
        if inert:
            inert_taps[f"mixer {i}"] = inert
        modes.append(mode)
        fx = {k: _fixed(k, Tn, C) for k in FIXED}
        layers.append(BaseConv(h=h, b_conv=b_conv, W_gate=W_gate, b_gate=b_gate, **fx,
                               causal=mode == "causal", same=mode == "same"))
    T.check_all_read()
    if set(modes) != {"causal"}:
        conventions["convolution"]["value"] = modes
    if wrapped:
        conventions["convolution"]["from"] += "; " + "; ".join(wrapped)
    if inert_taps:
        conventions["inert_taps"] = {"value": inert_taps, "from": "nonzero taps at lags that act on no token of a "
                                                                 f"{tokens}-token sequence (read, counted)"}
    conventions["weights"] = {"value": "nn.Linear (out x in) transposed; W_in = W_out = I; y + u",
                              "from": "zoology base_conv.py"}
    C = layers[0].W_gate.shape[0]
    return filed_config(Imported(NAME, str(path), layers, (tokens, C), conventions, dict(T.read), T.dtype(),
                    {"N": tokens, "d": C, "n": tokens}, not_proved=dict(T.outside),
                    training_state=extra.get("training_state", {})), cfg, src)


def _check_mixer(path, i: int, b: dict) -> None:
    """Mixer ``i`` has its projection weight and no implicit (MLP) long convolution."""
    if f"{PROJECTION[0]}.weight" not in b:
        raise ImportRefused(f"{path}: mixer {i} lacks projection.weight")
    if any(n.startswith("conv.") and n not in (SHORT_WEIGHT, SHORT_BIAS, LONG_FILTER) for n in b):
        k = next(b[n] for n in b if n.startswith("conv.") and n not in (SHORT_WEIGHT, SHORT_BIAS,
                                                                       LONG_FILTER))
        raise ImportRefused(f"{path}: {k}: an implicit long convolution (an MLP filter) cannot be read exactly")


def _tokens(T: Tensors, path, cfg: dict, src: dict, b: dict, long: bool, conventions: dict) -> int:
    """The sequence length (``--config tokens``, else the first mixer's long filter's length), with its
    convention entry; refused where only short convolutions leave it open."""
    if "tokens" in cfg:
        tokens = as_count(cfg["tokens"], "tokens")
        conventions["tokens"] = {"value": tokens, "from": src["tokens"]}
    elif long:
        tokens = T.dims(b[LONG_FILTER], 2, "a long convolution's filter (C, L)")[-1]
        conventions["tokens"] = {"value": tokens, "from": "the long filter's length (l_max)"}
    else:
        raise ImportRefused(f"{path}: a short convolution does not fix the sequence length; pass "
                           f"--config tokens=T")
    return tokens


def _long_convolution(T: Tensors, path, b: dict, Tn: int, C: int, lazy: bool = False):
    """A long filter's taps as zoology's FFT of size 2T applies them: ``(h, b_conv, inert taps, mode,
    wrapped taps)``, ``mode`` the causal, circular or 'same' convolution they amount to (refused if none)."""
    f = b[LONG_FILTER]
    T.dims(f, 2, "a long convolution's filter (C, L)")
    taps = T.take(f, "filter h (lag order; FFT of size 2T, not cut to T), +1 at lag 0", (C, T.raw(f).shape[-1]),
                  lazy=lazy)
    if is_lazy(taps):
        read = _lazy_fft2t_causal(taps, Tn)
        if read is not None:  # no tap wraps round: the causal filter, kept lazy
            h, inert = read
            return h, zeros(Tn, C), inert, "causal", []
        taps = taps.materialise()  # taps wrap round: the exact reading below, entry by entry
    coef, inert, wraps = fft2t_taps(taps, Tn)
    fit = fit_convention(coef, Tn)
    if fit is None:
        shown = ", ".join(f"{f}[{c}, {j}] (token t <- t + {2 * Tn - j})" for c, j in wraps[:3])
        more = f" and {len(wraps) - 3} more" if len(wraps) > 3 else ""
        raise ImportRefused(
            f"{path}: with {Tn} tokens zoology's fft_conv (an FFT of size 2T, the filter not cut to T) wraps "
            f"the taps at lags T+1..2T-1 round onto earlier tokens: {shown}{more}; with the causal taps "
            f"this is no causal, circular or 'same' convolution of {Tn} taps, so the file is refused "
            f"(--config tokens={T.raw(f).shape[-1]}, the filter's length, or zero those taps)")
    h, mode = fit
    add_identity(h, same=mode == "same")
    return h, zeros(Tn, C), inert, mode, wraps


def _lazy_fft2t_causal(f: ExactFloats, Tn: int):
    """``(h, inert)`` of a lazily read long filter ``f`` (C, L) with ``fft_conv``'s ``+ u`` where no nonzero
    tap wraps round (lags T+1..2T-1: :func:`convs.fft2t_taps`): the causal filter ``h[s, c] = f[c, s]``
    (s < T) plus 1 at lag 0, kept lazy (``None`` where a tap wraps round, or ``f`` holds declared rationals).
    The lag-0 row is stored as the float64 sums ``f[c, 0] + 1`` (each correctly rounded); a sum that is not
    exact is the exact rational in the array's overrides, so every entry's value is ``f[c, 0] + 1`` exactly."""

    if not f.is_float_only():
        return None
    g = f.floats
    C, L = g.shape
    if np.count_nonzero(g[:, Tn + 1:2 * Tn]):
        return None
    inert = int(np.count_nonzero(g[:, Tn:Tn + 1])) + int(np.count_nonzero(g[:, 2 * Tn:]))
    h = np.zeros((Tn, C), dtype=np.float64)  # float16/32 widened exactly
    m = min(L, Tn)
    h[:m] = g[:, :m].T
    lag0 = h[0].tolist()
    h[0] += 1.0  # fft_conv's + u (add_identity), each sum rounded once
    over_pos, over_vals = [], []
    for c, (x, y) in enumerate(zip(lag0, h[0].tolist())):
        want = Fraction(x) + 1
        if Fraction(y) != want:  # not exact in float64 (then want != 0 and y, its rounding, != 0)
            over_pos.append(c)  # flat position of (0, c)
            over_vals.append(want)
    return ExactFloats(h, over_pos, over_vals), inert


def _lazy_conv1d_taps(w: ExactFloats, Tn: int):
    """:func:`convs.conv1d_taps` (causal) of a lazily read Conv1d weight (C, 1, K), kept lazy: tap ``k`` at
    the lag ``conv1d_lag(k, K)`` (rows 0..T-1 of ``h``), taps at lags >= T counted as inert; ``None`` where
    ``w`` holds declared rationals."""
    if not w.is_float_only():
        return None
    g = w.floats
    C, one, K = g.shape
    if one != 1:
        return None  # conv1d_taps refuses it, naming the tensor
    h = np.zeros((Tn, C), dtype=g.dtype)
    inert = 0
    for k in range(K):
        j = filter_row(conv1d_lag(k, K, same=False), Tn, same=False)  # causal: j = K - 1 - k >= 0
        if j < Tn:
            h[j] = g[:, 0, k]
        else:
            inert += int(np.count_nonzero(g[:, 0, k]))
    return ExactFloats(h), inert


def _short_convolution(T: Tensors, path, i: int, b: dict, Tn: int, C: int, lazy: bool = False):
    """A short Conv1d's taps (reversed) and bias: ``(h, b_conv, inert taps)``."""
    if SHORT_WEIGHT not in b:
        raise ImportRefused(f"{path}: mixer {i} has no convolution (conv.conv.weight or conv.filter)")
    w = b[SHORT_WEIGHT]
    T.dims(w, 3, "a depthwise Conv1d weight (C, 1, K)")
    taps = T.take(w, "filter h (taps reversed)", (C, 1, T.raw(w).shape[-1]), lazy=lazy)
    read = _lazy_conv1d_taps(taps, Tn) if is_lazy(taps) else None
    if read is not None:
        h, inert = read
    else:
        h, inert = conv1d_taps(np.asarray(taps), Tn, same=False, key=w)
    b_conv = repeat_rows(T.take(b.get(SHORT_BIAS, w[:-len("weight")] + "bias"), "b_conv", (C,)), Tn)
    return h, b_conv, inert


def _check_use_act(cfg: dict) -> None:
    if as_bool(cfg.get("use_act", False), "use_act"):
        raise ImportRefused("use_act=True: the mixer applies SiLU to both factors, which is not polynomial")


def check_config(settings: dict) -> None:
    """The ``--config`` values, checked before the file is read."""
    config_from({}, settings, "--config", known=SETTINGS, fmt=NAME)
    _check_use_act(settings)
    if "tokens" in settings:
        as_count(settings["tokens"], "tokens")


def default_layout(spec, imported: Imported) -> dict | None:
    """Identity when the specification's state is the file's (tokens x channels)."""
    if tuple(spec.layout.shape) != tuple(imported.state_shape):
        return None
    R, C = spec.layout.shape
    return {"format": "polyverify-layout/1", "tokens": list(range(R)), "columns": list(range(C))}

# ------------------------------------------------------------------ the writer: the table above read backwards
# (``verify/export.py`` drives it: the stack's layers in, the peer's tensors and config out)

#: the settings an export's summary shows (what the reader needs; the file holds the whole config)
SHOWN = ("tokens", "use_act")
#: the mixers hold the file; the rest of zoology's ``LanguageModel`` is absent or holds none of it: no MLP (the
#: state mixer is ``torch.nn.Identity``, no parameters), no position embedding (``max_position_embeddings = 0``),
#: no dropout; its LayerNorms (``norm1``, ``norm2``, ``ln_f``: not polynomial, never identity), token embedding
#: and LM head are the model's own (not in the file)
STATE_MIXER = {"name": "torch.nn.Identity", "kwargs": {}}


def model_config(T: int, C: int, n_layers: int) -> dict:
    """``zoology.config.ModelConfig``'s fields (``zoology/config.py``, d88d6f5): ``LanguageModel(ModelConfig(
    **config))`` has ``n_layers`` BaseConv mixers of kernel T on ``d_model = C`` channels, which a strict
    ``load_state_dict`` of each ``backbone.layers[i].sequence_mixer`` fills from the file (pydantic ignores the
    config's other keys: ``tokens``, ``use_act``, ``dtype``, ``polyverify``)."""
    return {"sequence_mixer": {"name": "zoology.mixers.base_conv.BaseConv",
                               "kwargs": {"l_max": T, "kernel_size": T, "use_act": False}},
            "state_mixer": STATE_MIXER, "d_model": C, "n_layers": n_layers, "max_position_embeddings": 0,
            "learnable_word_embeddings": True, "embedding_init_type": "default", "vocab_size": 8192,
            "resid_dropout": 0.0, "embed_dropout": 0.0, "drop_path": 0.0, "layer_norm_epsilon": 1e-5,
            "pad_vocab_size_multiple": 1, "block_type": "TransformerBlock", "name": "polyverify-export"}
#: how the peer runs its model in float64 (an export with entries that are not float32 values says so)
FLOAT64 = "model.double()"


def plan(layers, make_tensors: bool) -> Exported:
    fmt = NAME
    check_kinds(layers, fmt, "baseconv", "BaseConv mixers")
    T, C = same_for_all(layers, fmt, lambda L: tuple(L.shape), "state", "one model has one state")
    ex = Exported(fmt, len(layers))
    parts = {}
    for i, L in distinct_layers(layers):
        if L.convolution != "causal":
            raise ExportError(f"{fmt}: layer {i} has a {L.convolution} convolution; zoology's BaseConv mixer is causal "
                              f"(a Conv1d with padding K-1, an FFT of size 2T)")
        for name, want in FIXED.items():
            if name == "residual":
                continue
            ok = is_identity(getattr(L, name)) if want == "I" else is_zero(getattr(L, name))
            if not ok:
                raise ExportError(f"{fmt}: layer {i} has {name} != {'I' if want == 'I' else '0'}; zoology's mixer "
                                  f"(y = conv(u) * projection(u) + u) has no in / out projection")
        b_gate = row_constant(i, "b_gate", L.b_gate, fmt, "zoology's projection bias")
        b_conv = row_constant(i, "b_conv", L.b_conv, fmt, "zoology's Conv1d bias")
        h, W_gate = np.array(L.h, dtype=object), np.array(L.W_gate, dtype=object)
        note = None
        if not L.residual:  # the mixer adds u: write the same map in its form, where one is (module docstring)
            if is_zero(L.W_gate) and all(g != 0 for g in b_gate):
                for c in range(C):  # g (h*u + b) = g (h'*u + b) + u  with  h' = h - delta_0 / g
                    h[0, c] = h[0, c] - Fraction(1) / Fraction(b_gate[c])
                note = "a constant gate g: the filter holds h - 1/g at lag 0"
            elif is_zero(L.h) and all(z != 0 for z in b_conv):
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
        pre = MIXER.format(i=i)
        mod, (Wn, bn) = PROJECTION
        ex.tensors[f"{pre}{mod}.weight"] = np.ascontiguousarray(W_gate.T)
        ex.tensors[f"{pre}{mod}.bias"] = b_gate
        ex.tensors[pre + SHORT_WEIGHT] = conv1d_weight(h, same=False)
        ex.tensors[pre + SHORT_BIAS] = b_conv
    ex.config = {"tokens": T, "use_act": False, **model_config(T, C, len(layers))}
    return ex


def frozen(L, n: str) -> bool:
    """What the format fixes in a layer (``verify.export.frozen_for``): the mixer's missing in / out
    projection (``W_in = W_out = I``, ``b_in = b_out = 0``: :data:`FIXED`) and, in a layer without the
    residual, the constant gate ``W_gate = 0`` (or convolution ``h = 0``) that takes back the ``u`` the
    mixer adds (:func:`plan`)."""
    from constructions.sparse import dense

    if L.kind != "baseconv":
        return False
    if n in FIXED and n != "residual":
        return True
    if not L.residual:
        if is_zero(dense(L.W_gate)):
            return n == "W_gate"
        return is_zero(dense(L.h)) and n == "h"
    return False
