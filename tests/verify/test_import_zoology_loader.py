"""zoology's own model loads an export (issue 44 item 1).  Written from their code (HazyResearch/zoology
d88d6f5; no peer code imported): the file's ``config`` is a ``zoology.config.ModelConfig`` (its fields
:data:`MODEL_CONFIG_FIELDS`; pydantic ignores the other keys); ``LanguageModel(config)`` (``zoology/model.py``)
has ``backbone.layers[i].sequence_mixer`` = ``BaseConv(d_model, l_max, kernel_size)`` (``mixers/base_conv.py``:
``projection`` an ``nn.Linear(d, d)``, ``conv`` a ``ShortConvolution`` whose ``conv`` is a depthwise ``nn.Conv1d``
of ``kernel_size`` with padding ``kernel_size - 1``; ``forward(u) = conv(u)[:, :l] * projection(u) + u``), its
``state_mixer`` the configured module (``torch.nn.Identity``: no parameters, no MLP), ``norm1`` / ``norm2``
LayerNorms, ``embeddings`` (``word_embeddings``; ``position_embeddings`` only where ``max_position_embeddings >
0``), ``ln_f`` and ``lm_head``.  The file holds the mixers: each mixer loads strictly from it (every key of the
mixer, no other), nothing of the file is left unloaded, and the mixers composed compute the construction.  The
LayerNorms are not identity maps (they normalise), so ``LanguageModel.forward`` is not the construction: the
mixers, applied in turn, are."""
from __future__ import annotations

import numpy as np
import pytest

from constructions.catalogue import entries
from verify.export import export

torch = pytest.importorskip("torch", reason="zoology files are torch checkpoints")
nn = torch.nn

#: zoology.config.ModelConfig's fields (zoology/config.py, d88d6f5)
MODEL_CONFIG_FIELDS = ("sequence_mixer", "state_mixer", "d_model", "n_layers", "max_position_embeddings",
                       "learnable_word_embeddings", "embedding_init_type", "vocab_size", "resid_dropout",
                       "embed_dropout", "drop_path", "layer_norm_epsilon", "pad_vocab_size_multiple", "block_type",
                       "name")
#: the config's keys that are this toolkit's, beside ModelConfig's (the importer's settings, the dtype written,
#: the description)
OURS = {"tokens", "use_act", "dtype", "polyverify"}


class ShortConvolution(nn.Module):
    """zoology/mixers/convolution.py's ShortConvolution, its parameters and forward."""

    def __init__(self, d_model, kernel_size):
        super().__init__()
        self.conv = nn.Conv1d(d_model, d_model, kernel_size, groups=d_model, padding=kernel_size - 1)

    def forward(self, x):
        return self.conv(x.transpose(1, 2))[..., :x.size(1)].transpose(1, 2)


class BaseConv(nn.Module):
    """zoology/mixers/base_conv.py's BaseConv with a short convolution (kernel_size != -1), use_act False."""

    def __init__(self, d_model, l_max, kernel_size, use_act=False):
        super().__init__()
        assert not use_act and kernel_size != -1
        self.projection = nn.Linear(d_model, d_model)
        self.conv = ShortConvolution(d_model, kernel_size)

    def forward(self, u):
        return self.conv(u) * self.projection(u) + u


def language_model_keys(conf: dict) -> dict:
    """``LanguageModel(ModelConfig(**conf)).state_dict()``'s keys and shapes outside the sequence mixers."""
    d, V = conf["d_model"], conf["vocab_size"]
    V += -V % conf["pad_vocab_size_multiple"]
    out = {"backbone.embeddings.word_embeddings.weight": (V, d), "lm_head.weight": (V, d),
           "backbone.ln_f.weight": (d,), "backbone.ln_f.bias": (d,)}
    if conf["max_position_embeddings"] > 0:
        out["backbone.embeddings.position_embeddings.weight"] = (conf["max_position_embeddings"], d)
    for i in range(conf["n_layers"]):
        for n in ("norm1", "norm2"):
            out[f"backbone.layers.{i}.{n}.weight"] = out[f"backbone.layers.{i}.{n}.bias"] = (d,)
    return out


def load(path):
    """Their model from the export: the config builds it; each mixer's strict load_state_dict; nothing of the
    file left over.  Returns (mixers, config)."""
    ck = torch.load(str(path), weights_only=True)
    conf = ck["config"]
    missing = [f for f in MODEL_CONFIG_FIELDS if f not in conf]
    assert not missing and set(conf) - set(MODEL_CONFIG_FIELDS) <= OURS, (missing, set(conf))
    assert conf["block_type"] == "TransformerBlock"
    sm = conf["sequence_mixer"]
    assert sm["name"] == "zoology.mixers.base_conv.BaseConv"
    assert conf["state_mixer"] == {"name": "torch.nn.Identity", "kwargs": {}}  # no MLP: no parameters
    sd = ck["model_state_dict"]
    mixers, loaded = [], set()
    for i in range(conf["n_layers"]):
        m = BaseConv(conf["d_model"], **sm["kwargs"]).double()
        pre = f"backbone.layers.{i}.sequence_mixer."
        m.load_state_dict({k[len(pre):]: v.double() for k, v in sd.items() if k.startswith(pre)}, strict=True)
        loaded |= {pre + k for k in m.state_dict()}
        mixers.append(m.eval())
    assert set(sd) == loaded, set(sd) - loaded  # LanguageModel.load_state_dict(sd, strict=False): nothing unexpected
    assert not loaded & set(language_model_keys(conf))  # ... and only norms, embeddings, ln_f, lm_head missing
    return mixers, conf


@pytest.mark.parametrize("name", ["s003-conv", "s003-linear", "s003-shift-down"])
def test_their_model_loads_an_export_strictly_and_its_mixers_compute_the_construction(tmp_path, name):
    e = entries()[name]
    con = e.build(**e.sizes)
    path = tmp_path / "model.pt"
    export(path, con, "zoology", k=0)
    mixers, conf = load(path)
    assert conf["n_layers"] == len(con.layers(0)) and conf["d_model"] == con.layout.shape[1]
    rng = np.random.default_rng(0)
    S = rng.standard_normal(con.layout.shape)
    want = S
    for L in con.layers(0):
        want = L.map(lambda a: np.asarray(a, dtype=float)).forward(want)
    x = torch.tensor(S)[None]
    with torch.no_grad():
        for m in mixers:
            x = m(x)
    assert np.allclose(x[0].numpy(), want, rtol=1e-12, atol=1e-12), np.abs(x[0].numpy() - want).max()


def test_a_mixer_with_a_missing_tensor_does_not_load(tmp_path):
    """The strict load is a real one: a file without one of a mixer's tensors does not load."""
    e = entries()["s003-conv"]
    path = tmp_path / "model.pt"
    export(path, e.build(**e.sizes), "zoology", k=0)
    ck = torch.load(str(path), weights_only=True)
    del ck["model_state_dict"]["backbone.layers.0.sequence_mixer.conv.conv.bias"]
    torch.save(ck, str(path))
    with pytest.raises(RuntimeError, match="Missing key"):
        load(path)
