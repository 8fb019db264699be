"""The third convolution convention, "same" (zero padding, centred; ``constructions/ops.py``):
every path (exact, direct, planned, FFT, torch) against numpy's ``convolve(mode="same")`` and
against ``torch.nn.Conv1d(kernel_size=T, padding=T//2)`` with the taps reversed."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from constructions import ops
from constructions.layers import BaseConv, array_names, layer_from_arrays


def _numpy_same(v, h):
    T = v.shape[-2]
    m = (T - 1) // 2
    out = np.zeros_like(v)
    for idx in np.ndindex(v.shape[:-2]):
        for c in range(v.shape[-1]):
            out[idx + (slice(None), c)] = np.convolve(v[idx + (slice(None), c)], h[:, c])[m:m + T]
    return out


@pytest.mark.parametrize("T", [1, 2, 3, 6, 7])
def test_same_matches_numpy_convolve_on_every_path(T):
    rng = np.random.default_rng(T)
    v, h = rng.standard_normal((2, T, 3)), rng.standard_normal((T, 3))
    h[:, 1] = 1.0  # an all-equal channel: no sum shortcut may apply in "same" mode
    h[:, 2] = 0.0
    h[(T - 1) // 2, 2] = 2.0  # a lag-0-only channel: its tap is h[m], not h[0]
    want = _numpy_same(v, h)
    for got in (ops.conv(v, h, causal=False, same=True), ops.conv(v, h, causal=False, same=True, method="fft"),
                ops.ConvPlan(h, causal=False, same=True)(v)):
        np.testing.assert_allclose(got, want, atol=1e-12)
    ex = lambda a: np.vectorize(Fraction, otypes=[object])(a)  # noqa: E731
    exact = ops.conv(ex(v[0]), ex(h), causal=False, same=True)
    np.testing.assert_allclose(exact.astype(float), want[0], atol=1e-12)
    # exact means exact: the same Fractions as a hand-written sum
    m = (T - 1) // 2
    t = T - 1
    hand = sum((ex(h)[j, 0] * ex(v[0])[t + m - j, 0] for j in range(T) if 0 <= t + m - j < T), Fraction(0))
    assert exact[t, 0] == hand


@pytest.mark.parametrize("T", [4, 5])
def test_same_is_torch_conv1d_with_half_padding_and_reversed_taps(T):
    torch = pytest.importorskip("torch", reason="torch is the reference for precision-ls's Conv1d")
    torch.manual_seed(T)
    conv = torch.nn.Conv1d(3, 3, kernel_size=T, groups=3, padding=T // 2, bias=False).double()
    x = torch.randn(2, T, 3, dtype=torch.float64)
    y = conv(x.transpose(1, 2))[..., :T].transpose(1, 2)
    h = conv.weight.detach()[:, 0, :].flip(-1).T  # h[j, c] = w[c, K-1-j]
    assert (ops.conv(x, h, causal=False, same=True) - y).abs().max().item() < 1e-12
    assert (ops.conv(x, h, causal=False, same=True, method="fft") - y).abs().max().item() < 1e-12
    # and it differs from both other conventions on these taps
    assert (ops.conv(x, h, causal=False) - y).abs().max().item() > 1e-3
    assert (ops.conv(x, h, causal=True) - y).abs().max().item() > 1e-3


def test_causal_and_same_together_are_refused():
    with pytest.raises(ValueError, match="causal"):
        ops.conv(np.zeros((3, 1)), np.zeros((3, 1)), causal=True, same=True)
    with pytest.raises(ValueError, match="cannot both"):
        array_names("baseconv", {"causal": True, "residual": False, "same": True})


def test_baseconv_same_config_round_trips_and_old_configs_read_as_before():
    L = BaseConv.zeros(3, 2)
    assert L.config() == {"causal": False, "residual": False} and L.convolution == "circular"
    S = layer_from_arrays("baseconv", {"causal": False, "residual": False, "same": True}, L.arrays())
    assert S.same and S.config()["same"] is True and S.convolution == "same"
    assert layer_from_arrays("baseconv", {"causal": True, "residual": False}, L.arrays()).convolution == "causal"


def test_baseconv_same_forward_exact_equals_float():
    rng = np.random.default_rng(1)
    T, C = 5, 2
    ex = lambda a: np.vectorize(lambda z: Fraction(z).limit_denominator(64), otypes=[object])(a)  # noqa: E731
    L = BaseConv(*(ex(rng.standard_normal(s)) for s in [(C, C), (T, C), (T, C), (T, C), (C, C), (T, C), (C, C),
                                                         (T, C)]), same=True)
    u = ex(rng.standard_normal((T, C)))
    exact = L.forward(u).astype(float)
    Lf = L.map(lambda a: a.astype(float)).prepare()
    np.testing.assert_allclose(Lf.forward(u.astype(float)), exact, atol=1e-12)
    rows = L.forward_rows(u, [0, 4]).astype(float)
    np.testing.assert_allclose(rows, exact[[0, 4]], atol=1e-12)
    circ = BaseConv(**{k: v for k, v in L.arrays().items()}).forward(u).astype(float)
    assert np.abs(circ - exact).max() > 1e-6
