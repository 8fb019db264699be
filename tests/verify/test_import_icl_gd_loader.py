"""von Oswald et al.'s own training script takes an icl-gd export (issue 44 item 1).  Written from their code
(google-research/self-organising-systems 3d5547c, ``transformers_learn_icl_by_gd``; no peer code imported):
``src/train.py``'s ``forward`` builds ``Transformer(...)`` from ``src/config.py``'s ``config`` (the fields
:data:`TRAIN_FIELDS`) as the trained model ``transformer`` or the GD model ``Transformer_gd`` (``num_heads = 1``,
``deq = gd_deq``, ``dampening = gd_dampening``); haiku's parameters of that model (``src/transformer.py``: one
``multi_head_attention`` where ``deq``, else ``~trans_block/layer_{l}`` per layer; ``src/attn.py``: ``query``,
``key``, ``value`` ``hk.Linear`` of width ``num_heads * key_size`` and ``linear`` back to ``model_size``; no bias
with ``use_bias`` false; no ``emb``, position encoding, LayerNorm, MLP or output mapping with those off) are
exactly the file's tensors (haiku's ``apply`` reads each, a missing one fails), and ``Transformer.__call__``'s
layers (``h + dampening * attn(h, h[:-1], h[:-1])``, linear attention) compute the construction."""
from __future__ import annotations

import json

import numpy as np
import pytest

from constructions.base import to_float_array
from constructions.catalogue import entries
from verify.export import export

#: what src/train.py's forward reads of config to build either model (src/config.py's names)
TRAIN_FIELDS = ("num_heads", "num_layers", "widening_factor", "key_size", "emb_size", "att_only_trans", "output_size",
                "dropout_rate", "pos_enc", "pos_enc_size", "concat_pos_enc", "out_proj", "in_proj", "layer_norm",
                "use_bias", "deq", "y_update", "use_softmax", "use_non_lin_mix", "first_layer_sm", "zero_pos_enc",
                "input_mlp", "input_mlp_out_dim", "sum_norm", "dampening", "clip", "ana_copy", "gd_deq",
                "gd_dampening", "classic_token_const")


def model_params(conf: dict, gd: bool) -> dict:
    """haiku's ``{module: {param: shape}}`` of the model src/train.py builds from ``conf``."""
    assert conf["att_only_trans"] and not (conf["in_proj"] or conf["out_proj"] or conf["pos_enc"] or
                                           conf["layer_norm"] or conf["input_mlp"] or conf["use_bias"])
    name, H = ("Transformer_gd", 1) if gd else ("transformer", conf["num_heads"])
    deq = conf["gd_deq"] if gd else conf["deq"]
    D, K = conf["emb_size"], conf["key_size"]  # model_size: the tokens' width (no embedding)
    mha = {"query": {"w": (D, H * K)}, "key": {"w": (D, H * K)}, "value": {"w": (D, H * K)},
           "linear": {"w": (H * K, D)}}
    mods = [f"{name}/multi_head_attention"] if deq else \
        [f"{name}/~trans_block/layer_{l}" for l in range(conf["num_layers"])]
    return {f"{m}/{p}": shapes for m in mods for p, shapes in mha.items()}


def load(path):
    """The export as haiku's params for their model: ``(params, config, gd)``; every tensor of the file is one
    of the model's parameters and every parameter is in the file, with its shape."""
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as f:
        conf = json.loads(f.metadata()["config"])
        flat = {k: f.get_tensor(k) for k in f.keys()}
    missing = [k for k in TRAIN_FIELDS if k not in conf]
    assert not missing, missing
    gd = any(k.startswith("Transformer_gd/") for k in flat)
    assert gd == (conf["num_heads"] == 1)
    want = model_params(conf, gd)
    params: dict = {}
    for k, a in flat.items():
        mod, p = k.rsplit("/", 1)
        params.setdefault(mod, {})[p] = a.astype(np.float64)
    assert set(params) == set(want), set(params) ^ set(want)
    for m, ps in want.items():
        assert {p: params[m][p].shape for p in params[m]} == ps, (m, ps)
    return params, conf, gd


def transformer(params, conf, gd, h):
    """src/transformer.py's __call__ on one sequence h (tokens x emb_size), with the loaded params."""
    deq = conf["gd_deq"] if gd else conf["deq"]
    H = 1 if gd else conf["num_heads"]
    damp = conf["gd_dampening"] if gd else conf["dampening"]
    name = "Transformer_gd" if gd else "transformer"
    K = conf["key_size"]
    for nl in range(conf["num_layers"]):
        mod = f"{name}/multi_head_attention" if deq else f"{name}/~trans_block/layer_{nl}"
        p = {n: params[f"{mod}/{n}"] for n in ("query", "key", "value", "linear")}  # haiku: module/linear -> {w}
        kv = h if conf.get("include_query") else h[:-1]
        q, k, v = (x @ p[n]["w"] for x, n in ((h, "query"), (kv, "key"), (kv, "value")))
        heads = [(q[:, i * K:(i + 1) * K] @ k[:, i * K:(i + 1) * K].T) @ v[:, i * K:(i + 1) * K] for i in range(H)]
        h = h + damp * (np.concatenate(heads, axis=1) @ p["linear"]["w"])  # y_update false
    return h


@pytest.mark.parametrize("name", ["gd-token-lsa", "s004-gd", "s004-precond", "s004-gdpp", "gd-lsa"])
def test_their_model_takes_an_export_and_computes_the_construction(tmp_path, name):
    e = entries()[name]
    con = e.build(n=4, d=2) if "gd" in e.roles else e.build(**e.sizes)
    k = 2 if con.body else 0
    path = tmp_path / "params.safetensors"
    export(path, con, "icl-gd", k=k)
    params, conf, gd = load(path)
    assert conf["num_layers"] == con.depth(k) and conf["emb_size"] == con.layout.shape[1]
    S = np.random.default_rng(0).integers(-3, 4, size=con.layout.shape) / 4
    want = con.run({}, k, state=S, cast=lambda L: L.map(lambda a: to_float_array(a, np.float64)))[0]
    got = transformer(params, conf, gd, S)
    assert np.allclose(got, want, rtol=1e-9, atol=1e-9 * max(1.0, float(np.abs(want).max())))


def test_a_missing_parameter_is_found(tmp_path):
    """The strict check is a real one: a file without one of the model's parameters is not their model."""
    from safetensors.numpy import load_file, save_file
    from safetensors import safe_open

    e = entries()["s004-gd"]
    path = tmp_path / "params.safetensors"
    export(path, e.build(**e.sizes), "icl-gd", k=2)
    with safe_open(str(path), framework="numpy") as f:
        meta = f.metadata()
    t = load_file(str(path))
    del t[next(k for k in t if k.endswith("value/w"))]
    save_file(t, str(path), metadata=meta)
    with pytest.raises(AssertionError):
        load(path)
