"""``ConvPlan`` without its whole kernel kept (a learned file's dense filters: ``constructions/conv.py``'s
KERNEL_MAX_ENTRIES): the general channels formed a group at a time give the kept kernel's results bit for
bit (numpy), and ``ConvPlan.K`` forms one channel's kernel on request."""
from __future__ import annotations

import numpy as np
import pytest

import constructions.conv as cv
from constructions import ops

MODES = [(False, False), (True, False), (False, True)]  # circular, causal, "same"


def _filters(rng, T: int, C: int) -> np.ndarray:
    h = rng.normal(size=(T, C))
    h[:, 0] = 0  # a zero channel
    h[1:, 1] = 0  # a lag-0 channel
    h[:, 2] = h[0, 2]  # an all-equal ("sum") channel
    return h


@pytest.mark.parametrize("causal,same", MODES)
@pytest.mark.parametrize("per", [2, 3, 5])
def test_grouped_general_channels_equal_the_kept_kernel_bit_for_bit(monkeypatch, causal, same, per):
    rng = np.random.default_rng(per + 3 * causal + 7 * same)
    T, C = 37, 20
    h, v = _filters(rng, T, C), rng.normal(size=(3, T, C))
    kept = cv.ConvPlan(h, causal=causal, same=same)
    assert isinstance(kept.K, np.ndarray) and len(kept._groups) == 1
    want = kept(v)
    monkeypatch.setattr(cv, "KERNEL_MAX_ENTRIES", 0)
    monkeypatch.setattr(cv, "KERNEL_CHUNK_ENTRIES", T * T * per)
    plan = cv.ConvPlan(h, causal=causal, same=same)
    n = len(plan.general)
    assert plan._K is None and len(plan._groups) > 1
    assert plan._groups[0][0] == 0 and plan._groups[-1][1] == n
    assert all(b - a >= 2 for a, b in plan._groups)  # never one channel alone (einsum sums it otherwise)
    assert all(a == b for (_, a), (b, _) in zip(plan._groups, plan._groups[1:]))  # contiguous, no overlap
    got = plan(v)
    np.testing.assert_array_equal(got, want)
    # ops.conv sums the all-equal channel tap by tap, the plan as one sum: equal within rounding
    np.testing.assert_allclose(got, ops.conv(v, h, causal=causal, same=same), rtol=1e-12, atol=1e-12)
    view = plan.K
    assert isinstance(view, cv.KernelView) and view.shape == kept.K.shape
    for j in (0, n // 2, n - 1, -1):
        kj = view[:, :, j]
        assert isinstance(kj, cv.ChannelKernel) and kj.shape == (T, T)
        np.testing.assert_array_equal(np.asarray(kj), kept.K[:, :, j])
        np.testing.assert_array_equal(np.asarray(kj.T.contiguous()), np.ascontiguousarray(kept.K[:, :, j].T))
        x = v[..., 0, :T] if v.shape[-1] >= T else rng.normal(size=(3, T))
        # as constructions/plans.py's channel-major layer uses it: v @ K_j^T, the same product as on the array
        np.testing.assert_array_equal(x @ kj.T.contiguous(), x @ np.ascontiguousarray(kept.K[:, :, j].T))
    np.testing.assert_array_equal(np.asarray(view), kept.K)


def test_a_large_dense_filter_keeps_no_kernel():
    """A learned layer's dense filters at 256 x 64 (257 tokens): the plan holds the filters, no
    (T, T, C) kernel, and still convolves as ``ops.conv`` does (within rounding: float64)."""
    rng = np.random.default_rng(0)
    T, C = 257, 70
    h, v = rng.normal(size=(T, C)), rng.normal(size=(2, T, C))
    assert T * T * C > cv.KERNEL_MAX_ENTRIES
    plan = cv.ConvPlan(h, causal=False)
    assert plan._K is None and len(plan.general) == C
    assert max(b - a for a, b in plan._groups) * T * T <= max(cv.KERNEL_CHUNK_ENTRIES, 2 * T * T)
    np.testing.assert_allclose(plan(v), ops.conv(v, h, causal=False), rtol=1e-12, atol=1e-12)


def test_torch_grouped_within_rounding(monkeypatch):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    T, C = 30, 12
    h, v = _filters(rng, T, C), rng.normal(size=(2, T, C))
    H, V = torch.as_tensor(h), torch.as_tensor(v)
    want = cv.ConvPlan(H, causal=True)(V)
    kept = cv.ConvPlan(H, causal=True).K
    monkeypatch.setattr(cv, "KERNEL_MAX_ENTRIES", 0)
    monkeypatch.setattr(cv, "KERNEL_CHUNK_ENTRIES", T * T * 2)
    plan = cv.ConvPlan(H, causal=True)
    assert plan._K is None and len(plan._groups) > 1
    np.testing.assert_allclose(plan(V).numpy(), want.numpy(), rtol=1e-13, atol=1e-13)
    np.testing.assert_array_equal(np.asarray(plan.K[:, :, 1]), kept[:, :, 1].numpy())
    x = torch.as_tensor(rng.normal(size=(3, T)))
    assert torch.equal(x @ plan.K[:, :, 1].T.contiguous(), x @ kept[:, :, 1].T.contiguous())
