"""The token-form linear transformers (numerics/training/token_lsa.py): the layer math is the
toolkit's TokenLSA, the warm starts are the exact seed 004 GD / GD++ layers, and the export reads back."""
from fractions import Fraction

import numpy as np
import pytest
import torch

from constructions.catalogue.seed004_token_gd import gd_heads, gdpp_heads
from constructions.layers import TokenLSA, TokenLSAHead
from constructions.weights_io import load
from numerics.training.token_lsa import TokenLinearTransformer, export_token_model, tokens_torch


def data(B=3, n=7, d=3, seed=0):
    r = np.random.default_rng(seed)
    return r.standard_normal((B, n, d)), r.standard_normal((B, n)), r.standard_normal((B, d))


def toolkit_forward(layers, E):
    for lay in layers:
        E = lay.forward(E)
    return E


@pytest.mark.parametrize("variant", ["full", "diag", "gdpp"])
def test_forward_is_the_toolkit_layer(variant):
    X, y, xt = data()
    m = TokenLinearTransformer(3, 3, variant, warm="gdpp", eta=0.1, gamma=0.05, init_std=0.2, seed=1)
    E = tokens_torch(X, y, xt)
    got = m(E).detach().numpy()
    want = toolkit_forward(m.toolkit_layers(), E.numpy())
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
    # a numpy reference written out: e_i <- e_i + sum_{j<=n} (e_j^T Q e_i) P e_j, keys = context only
    ref = E.numpy().copy()
    for P, Q in ((h.heads[0].P, h.heads[0].Q) for h in m.toolkit_layers()):
        ctx = ref[:, :-1]
        ref = ref + np.einsum("bjk,kl,bil,bjm,nm->bin", ctx, Q, ref, ctx, P)
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(m.predict(E).detach().numpy(), -got[:, -1, -1])


@pytest.mark.parametrize("warm,heads", [("gd", lambda d: gd_heads(d, Fraction(1, 10))),
                                        ("gdpp", lambda d: gdpp_heads(d, Fraction(1, 20), Fraction(1, 10)))])
@pytest.mark.parametrize("variant", ["full", "diag", "gdpp"])
def test_warm_start_is_the_exact_construction(warm, heads, variant):
    d = 3
    m = TokenLinearTransformer(d, 2, variant, warm=warm, eta=0.1, gamma=0.05, init_std=0.0)
    exact = [TokenLSA(heads(d), exclude_last=True, residual=True).map(lambda a: np.asarray(a, dtype=float))] * 2
    X, y, xt = data(d=d)
    E = tokens_torch(X, y, xt)
    np.testing.assert_allclose(m(E).detach().numpy(), toolkit_forward(exact, E.numpy()), rtol=1e-12, atol=1e-12)


def test_one_layer_gdpp_and_diag_predict_alike():
    # at L = 1 the prediction -y_t^1 = -omega_yx <alpha, x_t> depends on p_y q_x only
    X, y, xt = data()
    E = tokens_torch(X, y, xt)
    a = TokenLinearTransformer(3, 1, "gdpp", init_std=0.3, seed=4)
    b = TokenLinearTransformer(3, 1, "diag", init_std=0.3, seed=4)
    with torch.no_grad():
        b.theta[0, :3] = a.theta[0]
        b.theta[0, 3] = 0.7
    np.testing.assert_allclose(a.predict(E).detach().numpy(), b.predict(E).detach().numpy(), rtol=1e-13)


def test_omegas_of_a_diag_model():
    m = TokenLinearTransformer(4, 1, "diag", warm="none", init_std=0.0)
    with torch.no_grad():
        m.theta[0] = torch.tensor([2.0, 3.0, 5.0, 7.0])
    assert m.omegas() == [{"xx": 10.0, "xy": 14.0, "yx": 15.0, "yy": 21.0}]


def test_bad_variant_and_warm():
    with pytest.raises(ValueError, match="variant"):
        TokenLinearTransformer(3, 1, "diagonal")
    with pytest.raises(ValueError, match="warm"):
        TokenLinearTransformer(3, 1, "diag", warm="newton")


@pytest.mark.parametrize("variant", ["full", "diag"])
def test_export_reads_back(tmp_path, variant):
    m = TokenLinearTransformer(3, 2, variant, init_std=0.1, seed=2)
    path = export_token_model(m, tmp_path / "w.safetensors", notes={"why": "test"})
    loaded = load(path)
    assert [lay.kind for lay in loaded.layers] == ["token_lsa", "token_lsa"]
    X, y, xt = data()
    E = tokens_torch(X, y, xt)
    lays = [lay.map(lambda a: np.asarray(a, dtype=float)) for lay in loaded.layers]
    np.testing.assert_allclose(toolkit_forward(lays, E.numpy()), m(E).detach().numpy(), rtol=1e-14, atol=1e-14)
    assert all(isinstance(lay, TokenLSA) and isinstance(lay.heads[0], TokenLSAHead) for lay in loaded.layers)
