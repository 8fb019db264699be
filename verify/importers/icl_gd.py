"""``--from icl-gd``: von Oswald et al.'s linear self-attention (google-research/self-organising-
systems, ``transformers_learn_icl_by_gd``: ``src/attn.py`` ``MultiHeadAttention``,
``src/transformer.py`` ``Transformer.trans_block``, ``src/data.py`` ``create_weights``).

A haiku parameter dict saved as ``.npz`` with ``module/param`` keys
(``Transformer_gd/multi_head_attention/query/w``, or ``Transformer_gd/~trans_block/layer_{l}/
query/w`` per layer); haiku's ``w`` is (in x out): ``y = x w``.  With tokens as rows ``h_t``
and keys/values the first T-1 rows (``include_query=False``), one layer is
``h_t <- h_t + dampening sum_j (h_t W_Q W_K^T h_j^T) h_j W_V W_O``, i.e. seed 004 eq. (2)-(3)
(``constructions.layers.TokenLSA``, tokens as columns ``e = h^T``) with, per head k:

=================================  ============================================================
icl-gd                             this toolkit's TokenLSA head
=================================  ============================================================
``query/w``, ``key/w`` (D x HK)    ``Q = W_K W_Q^T`` (columns kK..(k+1)K of each)
``value/w`` (D x HK), ``linear/w`` ``P = dampening (W_V W_O)^T`` (rows kK..(k+1)K of ``W_O``)
(HK x D)
``include_query=False`` (default)  ``exclude_last=True`` (the query token is never a key)
``y_update=True``                  ``P`` keeps its last row only (only ``y`` is updated)
``*/b`` (``use_bias_p``)           read; must be 0 (the token form has no bias)
=================================  ============================================================

Settings (``--config`` or the file's config): ``dampening`` (1.0), ``include_query`` (False),
``y_update`` (False): the defaults of both ``src/transformer.py`` and the train config
``src/config.py``; ``num_heads``: **required** (the file holds the heads' total width only, and the
split decides the verdict; ``transformer.py`` defaults to 2, ``config.py`` to 1), except where the
widths of ``query/w`` and ``value/w`` have no common factor (then 1); ``num_layers`` (for one
shared ``multi_head_attention`` module, the ``gd_deq`` / one-layer form: how often it is applied;
default 1, ``config.py``'s; ``transformer.py``'s is 3; every application is the same module, so
the verdict is the same).
Softmax is refused (not the token form); embedding, output-mapping, LayerNorm and MLP tensors
(:data:`OUTSIDE`) are named and refused unless ``--blocks-only``, which proves the attention
layers and names them.

Default layout: onto ``s004-gd`` (the same tokens) and ``token-lsa`` (context tokens, then the
query after the carrier token the specification adds; coordinates x, y onto regions a/q, r/pred).
"""
from __future__ import annotations

import math
import re
from fractions import Fraction

import numpy as np

from constructions import ops
from constructions.exact_floats import is_lazy
from constructions.layers import TokenLSA, TokenLSAHead

from .common import (ImportRefused, Imported, filed_config, Tensors, as_bool, as_count, as_rational, config_from, load_tensors,
                     mark_not_proved)
from .writing import ExportError, Exported, check_kinds, distinct_layers, same_for_all

NAME = "icl-gd"
SETTINGS = ("dampening", "include_query", "y_update", "num_heads", "num_layers")

# The mapping table (module docstring), read here and written backwards by ``verify/export.py``.
#: the attention's haiku Linear projections, each ``w`` (in x out): ``y = x w``
PARAMS = ("query", "key", "value", "linear")
_KEY = re.compile(rf"(.+)/({'|'.join(PARAMS)})/(w|b)")
#: the modules of ``src/train.py``'s models (haiku names): one ``multi_head_attention`` applied
#: ``num_layers`` times (``deq=True``, the train config's default) or one per layer (``deq=False``);
#: ``Transformer_gd`` is the GD model (``tr_gd``, one head, ``create_weights``), ``transformer`` the
#: trained one (``num_heads`` from the config)
SHARED, PER_LAYER = "{model}/multi_head_attention/", "{model}/~trans_block/layer_{l}/"
GD_MODEL, MODEL = "Transformer_gd", "transformer"
_WEIGHTS = tuple(f"{p}/w" for p in PARAMS)


#: the rest of von Oswald et al.'s ``Transformer`` (``src/transformer.py``, haiku names): what each
#: tensor is.  No specification of this toolkit includes them, so they are never proved:
#: ``--blocks-only`` proves the attention layers and names them (a LayerNorm or an MLP inside the
#: blocks too: the proof then covers the attention layers composed directly)
OUTSIDE = [
    (r"[^/]+/emb/(?:w|b)", "embedding emb (input_mapping: haiku Linear onto the tokens)"),
    (r"[^/]+/linear/(?:w|b)", "read-out: the output mapping (output_mapping: haiku Linear on the last state)"),
    (r"(?:.+/)?input_mlp(?:/.+)?/(?:w|b)", "input MLP input_mlp (GELU; not polynomial)"),
    (r"(?:.+/)?token_vocab(?:/.+)?/[^/]+", "vocabulary embedding token_vocab"),
    (r"(?:.+/)?mlp(?:_\d+)?/.+", "MLP of the blocks (only_attention=False; GELU: not polynomial; the proof covers the "
                                  "attention layers composed directly)"),
    (r".+/(?:scale|offset)", "LayerNorm (use_layer_norm; not polynomial; the proof covers the attention layers "
                             "composed directly)"),
    (r"(?:.+/)?non_lin_mix/.+", "non-linear mix of the first layer (use_non_lin_mix; not polynomial)"),
]


def head_matrices(Wq, Wk, Wv, Wo, damp):
    """One head's ``(P, Q)`` of seed 004's token form from its columns of the projections:
    ``Q = W_K W_Q^T``, ``P = dampening (W_V W_O)^T`` (exact)."""
    return ops.transpose(ops.mm(Wv, Wo)) * damp, ops.mm(Wk, ops.transpose(Wq))


def read(path, settings: dict, *, lazy: bool = True) -> Imported:
    """The file's attention modules as TokenLSA layers.  ``lazy`` (the default): the projections are kept as
    the floats stored (``constructions.exact_floats``; the file may then hold ``weights_io.MAX_ENTRIES``) and
    each head's ``P``, ``Q`` formed exactly from them (:func:`exact_float_product`: no ``Fraction`` per
    projection entry); ``lazy=False``: every entry one ``Fraction`` (the same exact values)."""
    tensors, extra = load_tensors(path, NAME, lazy=lazy)
    cfg, src = config_from(extra, settings, path, known=SETTINGS, fmt=NAME)
    damp, include_query, y_update, H, reps_cfg = _values(cfg)
    both = "default of src/transformer.py and src/config.py"
    conventions = {
        "dampening": {"value": str(damp), "from": src.get("dampening", f"{both} (1.0)")},
        "include_query": {"value": include_query, "from": src.get("include_query", f"{both} (False)")},
        "y_update": {"value": y_update, "from": src.get("y_update", f"{both} (False)")},
        "weights": {"value": "haiku w (in x out); Q = W_K W_Q^T, P = dampening (W_V W_O)^T",
                    "from": "von Oswald et al. src/attn.py"}}
    T = Tensors(tensors, path)
    mods = _attention_modules(T, path)
    order = sorted(mods, key=_layer_index)
    shared = len(order) == 1 and _layer_index(order[0]) == -1
    reps = reps_cfg if shared and reps_cfg is not None else 1
    if not shared and "num_layers" in cfg:
        if src["num_layers"] == "--config":
            raise ImportRefused("--config num_layers is for one shared attention module; this file has one per layer")
        if reps_cfg != len(order):  # an export's config names them all (src/train.py's num_layers)
            raise ImportRefused(f"{path}: its config says num_layers = {reps_cfg}, and it has {len(order)} attention "
                                f"modules (one per layer)")
    if shared:
        conventions["num_layers"] = {"value": reps, "from": src.get(
            "num_layers", "default of src/config.py (num_layers = 1; transformer.py's own default is 3); every "
                          "application is the same module, so the verdict does not depend on it")}
    for mod in order:
        for need in _WEIGHTS:
            if need not in mods[mod]:
                raise ImportRefused(f"{path}: module {mod} lacks {need}")
    H, conventions["num_heads"] = _num_heads(T, path, mods, order, H, src)
    layers = []
    D = None
    for mod in order:
        L, D = _module_layer(T, path, mods[mod], H, D, damp, y_update, include_query, lazy)
        layers += [L] * reps
    T.check_all_read()
    return filed_config(Imported(NAME, str(path), layers, None, conventions, dict(T.read), T.dtype(), {"d": D - 1},
                    not_proved=dict(T.outside), training_state=extra.get("training_state", {})), cfg, src)


def _attention_modules(T: Tensors, path) -> dict[str, dict[str, str]]:
    """Each attention module's parameters (``"query/w"`` ...) by module name; the file's other tensors
    are marked not proved.  Refused: a file with no attention parameters."""
    mark_not_proved(T, OUTSIDE)
    for k in list(T.outside):  # a module with a query/w is an attention module: its linear/w is W_O
        m = _KEY.fullmatch(k)
        if m and m[2] == "linear" and f"{m[1]}/query/w" in T:
            del T.outside[k]
    mods: dict[str, dict[str, str]] = {}
    for k in T.keys():
        m = _KEY.fullmatch(k)
        if m and k not in T.outside:
            mods.setdefault(m[1], {})[f"{m[2]}/{m[3]}"] = k
    if not mods:
        T.check_all_read()
        raise ImportRefused(f"{path}: no attention parameters (.../query/w, key/w, value/w, linear/w)")
    return mods


def _num_heads(T: Tensors, path, mods, order, H, src) -> tuple[int, dict]:
    """The number of heads and its convention entry: the configured one, or 1 where the heads' total
    widths have no common factor (H decides the verdict: otherwise it must be given)."""
    if H is not None:
        return H, {"value": H, "from": src["num_heads"]}
    widths = sorted({T.raw(mods[m][k]).shape[1] for m in order for k in ("query/w", "value/w")
                     if k in mods[m] and T.raw(mods[m][k]).ndim == 2})
    if math.gcd(*widths) != 1 if widths else True:
        raise ImportRefused(f"{path}: the file does not show how many heads its attention has (query/w and "
                           f"value/w are {' and '.join(map(str, widths))} columns wide: the heads' total width); "
                           f"pass --config num_heads=H (von Oswald et al.'s transformer.py defaults to 2, its "
                           f"train config src/config.py to 1)")
    return 1, {"value": 1, "from": f"the file: widths {', '.join(map(str, widths))} have no common factor, so 1 head"}


def _module_layer(T: Tensors, path, p: dict[str, str], H: int, D, damp, y_update, include_query, lazy=False):
    """One attention module's ``TokenLSA`` layer (its weights checked and read) and the token width ``D``
    (``D``: the width of the modules before it, None for the first)."""
    for need in _WEIGHTS:
        if T.raw(p[need]).ndim != 2:
            raise ImportRefused(f"{path}: {p[need]} has shape {tuple(T.raw(p[need]).shape)}: not a haiku Linear "
                               f"weight (in x out)")
    Dm, HK = T.raw(p["query/w"]).shape
    D = D or Dm
    if Dm != D or HK % H:
        raise ImportRefused(f"{path}: {p['query/w']} has shape {(Dm, HK)}; expected ({D}, a multiple of "
                           f"num_heads = {H})")
    if T.raw(p["value/w"]).shape[1] % H:
        raise ImportRefused(f"{path}: {p['value/w']} has {T.raw(p['value/w']).shape[1]} columns, not a multiple "
                           f"of num_heads = {H}")
    K = HK // H
    Wq = T.take(p["query/w"], "W_Q", (D, HK), lazy=lazy)
    Wk = T.take(p["key/w"], "W_K", (D, HK), lazy=lazy)
    Wv = T.take(p["value/w"], "W_V", (D, T.raw(p["value/w"]).shape[1]), lazy=lazy)
    Vs = Wv.shape[1] // H
    Wo = T.take(p["linear/w"], "W_O", (H * Vs, D), lazy=lazy)
    for bname in ("query/b", "key/b", "value/b", "linear/b"):
        if bname in p:
            bias = T.take(p[bname], "bias (must be 0)", lazy=lazy)
            if (bias.count_nonzero() if is_lazy(bias) else any(x != 0 for x in bias.flat)):
                raise ImportRefused(f"{path}: {p[bname]} is nonzero: the token form has no bias")
    floats = all(is_lazy(W) and W.is_float_only() for W in (Wq, Wk, Wv, Wo))
    heads = []
    for h in range(H):
        cols, vcols = slice(h * K, (h + 1) * K), slice(h * Vs, (h + 1) * Vs)
        if floats:  # head_matrices of the stored floats, exactly, without a Fraction per projection entry
            P = exact_float_product(Wo.floats[vcols, :].T, Wv.floats[:, vcols].T, damp)  # dampening (W_V W_O)^T
            Q = exact_float_product(Wk.floats[:, cols], Wq.floats[:, cols].T)  # W_K W_Q^T
        else:
            q, k = np.asarray(Wq)[:, cols], np.asarray(Wk)[:, cols]
            v, o = np.asarray(Wv)[:, vcols], np.asarray(Wo)[vcols, :]
            P, Q = (_clean(M) for M in head_matrices(q, k, v, o, damp))
        if y_update:
            P[:-1, :] = 0
        heads.append(TokenLSAHead(P, Q))
    return TokenLSA(heads, exclude_last=not include_query, residual=True), D


def _values(cfg: dict) -> tuple:
    """``(dampening, include_query, y_update, num_heads or None, num_layers or None)`` of the
    settings (a value that is not one is refused)."""
    damp = as_rational(cfg.get("dampening", 1.0), "dampening")
    include_query = as_bool(cfg.get("include_query", False), "include_query")
    y_update = as_bool(cfg.get("y_update", False), "y_update")
    H = as_count(cfg["num_heads"], "num_heads") if "num_heads" in cfg else None
    reps = as_count(cfg["num_layers"], "num_layers", 1, 100_000) if "num_layers" in cfg else None
    return damp, include_query, y_update, H, reps


def check_config(settings: dict) -> None:
    """The ``--config`` values, checked before the file is read."""
    config_from({}, settings, "--config", known=SETTINGS, fmt=NAME)
    _values(settings)


def _layer_index(mod: str) -> int:
    m = re.search(r"layer_(\d+)$", mod)
    return int(m[1]) if m else -1


def exact_float_product(A: np.ndarray, B: np.ndarray, scale=1) -> np.ndarray:
    """The exact product ``scale * (A @ B)`` of two float arrays (float16/32/64, finite), each entry the binary
    fraction it is, and a rational ``scale``, as an object array (``Fraction``, or ``int`` where integral; the
    int 0 for a zero): each operand is an integer matrix times one power of two (mantissas of 53 bits shifted
    to the operand's least exponent: Python integers, no rounding), their product one FLINT ``fmpz_mat``
    product, scaled back exactly (one ``Fraction`` per entry)."""
    import flint

    def integer(M):
        m, e = np.frexp(np.asarray(M, dtype=np.float64))  # M = m 2^e, m in [0.5, 1) (0 for 0): exact
        mant = (m * 2.0 ** 53).astype(np.int64)  # exact: 53-bit integers
        e = e.astype(np.int64) - 53
        nz = mant != 0
        e0 = int(e[nz].min()) if nz.any() else 0
        shift = np.where(nz, e - e0, 0).ravel().tolist()
        rows = [int(x) << s for x, s in zip(mant.ravel().tolist(), shift)]
        return flint.fmpz_mat(M.shape[0], M.shape[1], rows), e0

    if A.shape[1] != B.shape[0]:
        raise ValueError(f"shape mismatch in matrix product: {A.shape} @ {B.shape}")
    out = np.empty((A.shape[0], B.shape[1]), dtype=object)
    if 0 in A.shape or 0 in B.shape:
        out.fill(0)
        return out
    (IA, ea), (IB, eb) = integer(A), integer(B)
    e = ea + eb
    scale = Fraction(scale)
    num, den = scale.numerator, scale.denominator << max(0, -e)  # entry x: x num 2^e / den.denominator
    num <<= max(0, e)
    vals = [int(x) * num for x in (IA * IB).entries()]
    out.ravel()[:] = [0 if not x else (x // den if x % den == 0 else Fraction(x, den)) for x in vals] \
        if den != 1 else vals
    return out


def _clean(a):
    out = np.empty(a.shape, dtype=object)
    for idx, v in np.ndenumerate(a):
        out[idx] = 0 if v == 0 else (Fraction(v) if not isinstance(v, int) else v)
    return out


def default_layout(spec, imported: Imported) -> dict | None:
    regs = spec.layout.regions
    R, C = spec.layout.shape
    d = imported.sizes["d"]
    if set(regs) >= {"x", "y", "x_t", "y_t"} and C == d + 1:  # seed 004's token layout (s004-gd)
        return {"format": "polyverify-layout/1", "tokens": list(range(R)), "columns": list(range(C))}
    if set(regs) >= {"a", "r", "one", "x", "q", "pred"} and regs["a"].shape[1] == d:  # gd-token-lsa
        n = regs["a"].shape[0]
        return {"format": "polyverify-layout/1", "tokens": list(range(n)) + [n + 1],
                "channels": {"a": list(range(d)), "r": [d]},
                "note": "von Oswald et al.'s tokens (x_i, y_i) then the query; the carrier token and its "
                        "coordinates (one, x) are the specification's"}
    return None

# ------------------------------------------------------------------ the writer: the table above read backwards
# (``verify/export.py`` drives it: the stack's layers in, the peer's tensors and config out)

#: the settings an export's summary shows (what the reader needs; an ``.npz`` file holds no config)
SHOWN = ("num_heads", "num_layers", "include_query")


def train_config(H: int, D: int, num_layers: int, deq: bool) -> dict:
    """The model settings ``src/train.py``'s ``forward`` reads from ``src/config.py``'s ``config`` (3d5547c;
    ``config.update(...)`` with these): the GD model ``Transformer_gd`` (``num_heads = 1``, ``gd_deq``,
    ``gd_dampening``) or the trained model ``transformer`` (``num_heads``, ``deq``, ``dampening``), attention
    only, no embedding, position encoding, input MLP, LayerNorm, bias, softmax, clip or output mapping, on
    tokens of ``emb_size = input_size + 1 = D`` (key size D).  ``dataset_size`` (the context length) is the
    data's, not the model's: the model holds no position encoding."""
    return {"num_heads": H, "num_layers": num_layers, "key_size": D, "emb_size": D, "input_size": D - 1,
            "output_size": 1, "deq": deq, "gd_deq": deq, "dampening": 1.0, "gd_dampening": 1.0, "y_update": False,
            "att_only_trans": True, "use_softmax": False, "use_non_lin_mix": False, "first_layer_sm": False,
            "use_bias": False, "layer_norm": False, "in_proj": False, "out_proj": False, "pos_enc": False,
            "pos_enc_size": 0, "concat_pos_enc": False, "zero_pos_enc": False, "input_mlp": False,
            "input_mlp_out_dim": 0, "sum_norm": False, "clip": 0.0, "dropout_rate": 0.0, "widening_factor": 4,
            "ana_copy": False, "classic_token_const": False}
#: how the peer runs its model in float64 (an export with entries that are not float32 values says so)
FLOAT64 = "jax.config.update('jax_enable_x64', True)"


def head_weights(P, Q):
    """``(W_Q, W_K, W_V, W_O)`` of one head (key size D) with
    :func:`verify.importers.icl_gd.head_matrices` ``= (P, Q)`` at dampening 1: ``W_Q = I``,
    ``W_K = Q``, ``W_V = I``, ``W_O = P^T`` (no product: every entry is one of the head's)."""
    D = P.shape[0]
    return ops.eye_object(D), np.array(Q, dtype=object), ops.eye_object(D), np.ascontiguousarray(np.array(P, dtype=object).T)


def token_form(L) -> TokenLSA:
    """Seed 001's LSA in Hagiwara's form (``constructions.layers.LSA``: ``H + sum_k (H W3)(H W1)^T (H W2)``,
    the sum over the rows of H) as seed 004's token form, the same map exactly: with every token a key,
    ``E + E Q^T (E^T E) P^T`` (``TokenLSA``) is it at ``Q = W1 W3^T``, ``P = W2^T`` (exact rational products)."""
    heads = [TokenLSAHead(ops.transpose(h.W2), ops.mm(h.W1, ops.transpose(h.W3))) for h in L.heads]
    return TokenLSA(heads, exclude_last=False, residual=L.residual)


def plan(layers, make_tensors: bool) -> Exported:
    from constructions.weights_io import same_layer

    fmt = NAME
    lsa = [i for i, L in distinct_layers(layers) if L.kind == "lsa"]
    if lsa:  # the exact rewrite into the token form, each distinct layer once (repeated body copies stay shared)
        done: dict[int, TokenLSA] = {}
        layers = [done.setdefault(id(L), token_form(L)) if L.kind == "lsa" else L for L in layers]
    check_kinds(layers, fmt, "token_lsa", "token-form LSA layers (seed 004 eq. (2)-(3))")
    for i, L in distinct_layers(layers):
        if not L.residual:
            raise ExportError(f"{fmt}: layer {i} has no residual; von Oswald et al.'s layer is h + dampening * attn")
        if not L.heads:
            raise ExportError(f"{fmt}: layer {i} has no heads")
    excl = same_for_all(layers, fmt, lambda L: L.exclude_last, "exclude_last =",
                        "include_query is one setting of the model")
    D = same_for_all(layers, fmt, lambda L: L.heads[0].P.shape[0], "width", "one model has one token width")
    H = max(len(L.heads) for L in layers)
    shared = all(L is layers[0] or same_layer(L, layers[0]) for L in layers)
    model = GD_MODEL if H == 1 else MODEL
    ex = Exported(fmt, len(layers))
    if H > 1:
        ex.notes.append(f"{H} heads: von Oswald et al.'s GD model (Transformer_gd) has one, so the stack is written as "
                        f"their trained model 'transformer' (num_heads = {H} in its config)")
    short = [i for i, L in distinct_layers(layers) if len(L.heads) < H]
    if short:
        ex.notes.append(f"layers {', '.join(map(str, short))} have fewer than {H} heads: padded with zero heads "
                        f"(P = Q = 0, which add nothing)")
    if lsa:
        ex.notes.append(f"{len(lsa)} distinct layers of seed 001's LSA (Hagiwara's form) written in seed 004's token "
                        f"form, the same map exactly: Q = W1 W3^T, P = W2^T, every token a key (include_query = true)")
    if not excl:
        ex.notes.append("include_query = true: their Transformer(include_query=True); src/train.py's forward does not "
                        "pass it (Transformer's default is False)")
    if not make_tensors:
        return ex
    mods = [(SHARED.format(model=model), layers[0])] if shared else \
        [(PER_LAYER.format(model=model, l=i), L) for i, L in enumerate(layers)]
    for pre, L in mods:
        ws = [head_weights(h.P, h.Q) for h in L.heads]
        zero = np.zeros((D, D), dtype=object)
        ws += [head_weights(zero, zero)] * (H - len(L.heads))
        q, k, v, o = (np.concatenate([w[j] for w in ws], axis=0 if j == 3 else 1) for j in range(4))
        for name, arr in zip(PARAMS, (q, k, v, o)):
            ex.tensors[f"{pre}{name}/w"] = arr
    ex.config = {**train_config(H, D, len(layers), shared), "include_query": not excl}
    ex.settings = {"num_heads": H}
    if shared:
        ex.settings["num_layers"] = len(layers)
    if not excl:
        ex.settings["include_query"] = "true"
    return ex


def frozen(L, n: str) -> bool:
    """What the format fixes in a layer (``verify.export.frozen_for``): nothing."""
    return False
