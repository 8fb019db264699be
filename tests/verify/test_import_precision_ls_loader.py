"""precision-ls's own loader loads an export (issue 44 item 1).  Written from their code (HazyResearch/
precision-ls 3f2993b; no peer code imported): ``src/models/__init__.py``'s ``build_model(conf.model)`` reads the
fields :data:`BUILD_MODEL_FIELDS`; ``get_model_from_run`` then loads ``state.pt``'s ``model_state_dict`` filtered to
the model's keys and strictly (``load_state_dict``; a missing key falls back to ``strict=False`` and keeps random
weights); the model's keys are those of ``TransformerModel`` (``src/models/gpt2.py``: ``_read_in``,
``_backbone.transformer.wpe``, each ``Block``'s ``seq_mixer.base_conv`` (``mixers/base_conv.py``: ``projection``,
``in_proj``, ``out_proj``, ``branch_weights`` where ``use_resid``, ``conv.conv`` for a ``ShortConvolution``,
``conv.filter`` for a ``LongConvolution``), ``_read_out``; no LayerNorm or MLP parameters with ``use_seqop_ln``,
``use_final_ln``, ``use_mlps`` false).  Its forward (``TransformerModel.forward``: ``_read_out(_backbone(
_read_in(xs)))``, the backbone adding ``wpe`` to each token) on the export equals the construction's layers."""
from __future__ import annotations

import numpy as np
import pytest

from constructions.catalogue import entries
from verify.export import export

from tests.adversarial.test_import_conventions import precision_ls_forward

torch = pytest.importorskip("torch", reason="precision-ls files are torch checkpoints")

#: what build_model(conf) reads of conf (src/models/__init__.py)
BUILD_MODEL_FIELDS = ("family", "n_dims", "n_positions", "n_embd", "n_layer", "n_head", "use_mlps", "seq_op",
                      "mlp_activ", "use_resid", "use_seqop_ln", "use_final_ln", "use_mlp_ln", "conv_type", "causal",
                      "train_proj", "train_pos", "mlp_upfactor", "in_dims", "out_dims", "use_softmax_for_attn")


def model_shapes(conf: dict) -> dict:
    """``TransformerModel(**build_model's arguments).state_dict()``'s keys and shapes, from their code."""
    C, T = conf["n_embd"], conf["n_positions"]
    i_d, o_d = conf["in_dims"] or conf["n_dims"], conf["out_dims"] or conf["n_dims"]
    out = {"_read_in.weight": (C, i_d), "_read_in.bias": (C,), "_backbone.transformer.wpe.weight": (T, C)}
    assert not (conf["use_mlps"] or conf["use_seqop_ln"] or conf["use_final_ln"]) and conf["seq_op"] == "base_conv"
    for i in range(conf["n_layer"]):
        pre = f"_backbone.transformer.h.{i}.seq_mixer.base_conv."
        for m in ("projection", "in_proj", "out_proj"):
            out[f"{pre}{m}.weight"], out[f"{pre}{m}.bias"] = (C, C), (C,)
        if conf["use_resid"]:
            out[pre + "branch_weights"] = (2,)
        if conf["conv_type"] == "short":  # ShortConvolution: a depthwise Conv1d of kernel l_max
            out[pre + "conv.conv.weight"], out[pre + "conv.conv.bias"] = (C, 1, T), (C,)
        else:  # LongConvolution: filter (d_model, l_max)
            out[pre + "conv.filter"] = (C, T)
    out["_read_out.weight"], out["_read_out.bias"] = (o_d, C), (o_d,)
    return out


def get_model_from_run(path) -> tuple[dict, dict]:
    """Their loader's checks on ``state.pt``: the config builds the model, the filtered state dict holds every
    key of the model with its shape (a strict load).  Returns (state dict as float64 numpy, config)."""
    ck = torch.load(str(path), weights_only=True)
    conf = ck["config"]
    missing = [f for f in BUILD_MODEL_FIELDS if f not in conf]
    assert not missing and conf["family"] == "gpt2", missing
    shapes = model_shapes(conf)
    sd = ck["model_state_dict"]
    filtered = {k: sd[k] for k in shapes if k in sd}  # get_model_from_run's filter
    assert set(filtered) == set(shapes), set(shapes) ^ set(filtered)  # strict: no key missing
    assert set(sd) == set(shapes)  # and nothing of the file left out of the model
    for k, s in shapes.items():
        assert tuple(sd[k].shape) == s, (k, tuple(sd[k].shape), s)
    return {k: v.double().numpy() for k, v in filtered.items()}, conf


def model_forward(sd: dict, conf: dict, xs: np.ndarray) -> np.ndarray:
    """TransformerModel.forward on one sequence xs (T, in_dims), float64."""
    x = xs @ sd["_read_in.weight"].T + sd["_read_in.bias"]
    x = x + sd["_backbone.transformer.wpe.weight"][: xs.shape[0]]
    for i in range(conf["n_layer"]):
        pre = f"_backbone.transformer.h.{i}.seq_mixer.base_conv."
        y = precision_ls_forward(sd, x, pre, conf["causal"])
        # gpt2.py's Block: x + block_lr * mixer(x) where use_resid; test_import_conventions' forward adds x already
        x = y
    return x @ sd["_read_out.weight"].T + sd["_read_out.bias"]


@pytest.mark.parametrize("name", ["gd-baseconv", "prefix-coupled", "s003-conv", "s003-shift-down"])
def test_their_loader_loads_an_export_strictly_and_computes_the_construction(tmp_path, name):
    e = entries()[name]
    con = e.build(4, 2) if "gd" in e.roles else e.build(**e.sizes)
    k = 2 if con.body else 0
    path = tmp_path / "state.pt"
    export(path, con, "precision-ls", k=k)
    sd, conf = get_model_from_run(path)
    rng = np.random.default_rng(0)
    S = rng.standard_normal(con.layout.shape)
    want = S
    for L in con.layers(k):
        want = L.map(lambda a: np.asarray(a, dtype=float)).forward(want)
    got = model_forward(sd, conf, S)
    assert np.allclose(got, want, rtol=1e-9, atol=1e-9), np.abs(got - want).max()


def test_the_identity_embedding_is_read_not_named(tmp_path):
    """The import reads the five embedding tensors of an export as the identity they are (the claim is the
    whole model's); one moved entry makes them the model's tensors outside the blocks again (refused without
    --blocks-only, naming them)."""
    import io

    from verify.construct import main

    con = entries()["gd-baseconv"].build(4, 2)
    path = tmp_path / "state.pt"
    export(path, con, "precision-ls", k=2)
    out = io.StringIO()
    assert main(["import", str(path), "--from", "precision-ls", "--no-search"], out=out) == 0
    assert "convention embedding: identity" in out.getvalue() and "all read" in out.getvalue()
    ck = torch.load(str(path), weights_only=True)
    ck["model_state_dict"]["_backbone.transformer.wpe.weight"][0, 0] = 0.5
    torch.save(ck, str(path))
    assert main(["import", str(path), "--from", "precision-ls", "--no-search"], out=io.StringIO()) == 2
