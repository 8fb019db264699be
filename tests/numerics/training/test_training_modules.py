"""Torch modules over the toolkit's layer math: constructed weights load and
give the toolkit's outputs; trained weights export to the weight format."""
import numpy as np
import pytest
import torch

from constructions.base import to_float_array
from constructions.gd_attention import gd_lsa
from constructions.gd_baseconv import gd_baseconv, gd_baseconv_causal
from constructions.layers import LSA, LSAHead
from constructions.weights_io import load, save
from numerics.problems import sample_ls
from numerics.training import (LSABlock, ModelConfig, SequenceModel, export_weights, load_weight_file,
                               stack_from_layers)


def _float_layers(layers):
    return [L.map(lambda a: to_float_array(np.asarray(a), np.float64)) for L in layers]


def _states(con, n, d, B=4, seed=0):
    P = sample_ls(B, n, d, seed=seed, x0="gaussian")
    q = np.random.default_rng(seed).standard_normal((B, d))
    return con.input_state({"A": P.A, "b": P.b, "x": P.x0, "q": q})


@pytest.mark.parametrize("build", [gd_baseconv, gd_baseconv_causal, gd_lsa])
def test_constructed_weights_give_the_toolkit_forward(build):
    n, d, k = 6, 2, 2
    con = build(n, d)
    layers = con.layers(k)
    S = _states(con, n, d)
    ref = S.copy()
    for L in _float_layers(layers):  # the toolkit's forward on numpy float64
        ref = L.forward(ref)
    stack = stack_from_layers(layers)
    got = stack(torch.as_tensor(S)).detach().numpy()
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)


def test_weight_file_loads_into_torch(tmp_path):
    n, d = 5, 2
    con = gd_baseconv(n, d)
    p = save(tmp_path / "w.safetensors", con, 1)
    stack = load_weight_file(p)
    S = _states(con, n, d, seed=1)
    ref = S
    for L in _float_layers(con.layers(1)):
        ref = L.forward(ref)
    np.testing.assert_allclose(stack(torch.as_tensor(S)).detach().numpy(), ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("model,kw", [("baseconv", {}), ("baseconv", {"bias": "vector"}),
                                      ("lsa", {"heads": 2, "head_dim": 3}), ("lsa", {"heads": 2})])
def test_trained_model_exports_to_weight_format(tmp_path, model, kw):
    torch.manual_seed(0)
    m = SequenceModel(ModelConfig(model=model, T=7, d_in=4, d_out=3, width=6, layers=2, **kw)).double()
    if kw.get("bias") == "vector":  # one shared row per bias, exported as the (T, C) matrix it stands for
        with torch.no_grad():
            for b in m.blocks:
                for k in b.mixer.BIASES:
                    getattr(b.mixer, k).normal_()
        assert m.blocks[0].mixer.b_in.shape == (1, 6)
    p = export_weights(m, tmp_path / "m.safetensors")
    # the toolkit's reader: exact binary fractions of the float64 weights; the embedding and the
    # read-out are outside the layer stack, so the caller names them (else the file is refused)
    lw = load(p, extra=("embed.weight", "readout.weight"))
    assert [L.kind for L in lw.layers] == [model] * 2 and all(L.residual for L in lw.layers)
    t = lw.extra
    u = np.random.default_rng(0).standard_normal((3, 7, 4))
    x = u @ t["embed.weight"].T
    for L in _float_layers(lw.layers):
        x = L.forward(x)
    ref = x @ t["readout.weight"].T
    np.testing.assert_allclose(m(torch.as_tensor(u)).detach().numpy(), ref, rtol=1e-10, atol=1e-12)


def test_export_refuses_non_toolkit_models(tmp_path):
    m = SequenceModel(ModelConfig(model="transformer", T=4, d_in=2, d_out=2, width=8, heads=2, layers=1))
    with pytest.raises(ValueError, match="toolkit layer form"):
        export_weights(m, tmp_path / "x.safetensors")


def test_lsa_block_round_trip():
    rng = np.random.default_rng(3)
    lay = LSA([LSAHead(*(rng.standard_normal((4, 4)) for _ in range(3))) for _ in range(2)], residual=True)
    blk = LSABlock.from_layer(lay).double()
    H = rng.standard_normal((2, 5, 4))
    np.testing.assert_allclose(blk(torch.as_tensor(H)).detach().numpy(), lay.forward(H), rtol=1e-12)
    back = blk.export_layer()
    for a, b in zip(back.heads, lay.heads):
        np.testing.assert_array_equal(a.W1, b.W1)


def test_modules_call_the_toolkit_layer(monkeypatch):
    """The module's forward is constructions.layers' forward (one definition)."""
    import constructions.layers as L

    calls = []
    orig = L.BaseConv.forward
    monkeypatch.setattr(L.BaseConv, "forward", lambda self, u, **kw: calls.append(1) or orig(self, u, **kw))
    m = SequenceModel(ModelConfig(model="baseconv", T=5, d_in=3, d_out=2, width=4, layers=2))
    m(torch.randn(2, 5, 3))
    assert len(calls) == 2


def test_a_same_convolution_layer_is_refused_not_run_as_circular():
    """The training block runs causal or circular convolutions; a 'same' layer (precision-ls's
    non-causal short convolution) is refused by name rather than silently trained as circular."""
    from dataclasses import replace

    from constructions.layers import BaseConv
    L = replace(BaseConv.zeros(4, 2), same=True)
    with pytest.raises(ValueError, match="'same'"):
        stack_from_layers([L])
