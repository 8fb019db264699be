"""verify/prover/modular.py's float64 BLAS products modulo a wide prime: every matrix product and every
convolution is exactly the integer one reduced modulo p (Python's integers as the reference), in the
worst case too (every entry p - 1 of the Mersenne prime 2^61 - 1, whose limbs are all ones, with
contraction lengths at the limb-width bound and just past it), and a limb wider than the bound is shown
not to be exact (so these tests can fail)."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from constructions import ops
from constructions.exact_floats import ExactFloats
from constructions.layers import BaseConv
from verify.prover import modp, modular

M61 = (1 << 61) - 1  # prime; p - 1 = 2^61 - 2: every limb of it, and of each power-of-two multiple, all ones
PRIMES = [M61, 2305843009213693921, 1152921504606846883, 2147483659]  # 61-, 61-, 60-bit and just above 2^31


def _ref_mm(X, Y, p):
    return (np.asarray(X, dtype=np.int64).astype(object) @ np.asarray(Y, dtype=np.int64).astype(object)) % p


def _ref_conv(v, h, causal, same, p):
    """``ops.conv`` (the layers' exact convolution) on Python integers, reduced afterwards."""
    out = np.empty(v.shape, dtype=object)
    hv = h.astype(object)
    for b in range(v.shape[0]):
        out[b] = ops.conv(v[b].astype(object), hv, causal=causal, same=same)
    return out % p


def test_limb_width_is_the_largest_with_2b_plus_bitlength_at_most_53():
    for K in [1, 2, 3, 255, 256, 511, 512, 1023, 1024, 2**20, 2**31]:
        b = modular.limb_bits(K)
        assert 2 * b + K.bit_length() <= 53 < 2 * (b + 1) + K.bit_length()
        assert K * (2**b - 1) ** 2 < 2**53  # every partial sum of K limb products is exact in float64
    assert modular.limb_bits(511) == 22 and modular.limb_bits(512) == 21  # smaller limbs past the bound


def test_limb_plan_holds_a_residue_in_the_fewest_limbs_exact_over_the_stacked_contraction():
    for p in PRIMES:
        nb = (p - 1).bit_length()
        for K in [1, 64, 192, 322, 642, 1000, 4096, 2**20]:
            b, n = modular.limb_plan(K, p)
            assert n * b >= nb and 2 * b + (n * K).bit_length() <= 53  # the limbs side by side: n K terms
            assert n == 1 or (n - 1) * modular.limb_bits((n - 1) * K) < nb  # one limb fewer would not hold it
    assert modular.limb_plan(2**40, M61) is None  # limbs below MIN_LIMB_BITS: the integer product


@pytest.mark.parametrize("K", [1, 2, 63, 64, 322, 511, 512, 642, 1023, 1024, 4095, 4096])
@pytest.mark.parametrize("p", PRIMES)
def test_wide_products_are_exact_at_and_past_the_limb_bound(K, p):
    rng = np.random.default_rng(K)
    X = rng.integers(0, p, size=(2, 3, K), dtype=np.int64)
    Y = rng.integers(0, p, size=(K, 5), dtype=np.int64)
    X[0] = p - 1  # worst case: for 2^61 - 1 every limb of every operand is all ones
    Y[:, 0] = p - 1
    assert (modular.mm(X, Y, p).astype(object) == _ref_mm(X, Y, p)).all()
    Yb = rng.integers(0, p, size=(2, K, 4), dtype=np.int64)  # a batched right factor (attention's)
    assert (modular.mm(X, Yb, p).astype(object) == _ref_mm(X, Yb, p)).all()


def test_all_ones_limbs_at_the_bound_are_exact_and_a_wider_limb_is_not():
    """Every entry p - 1 = 2^61 - 2 (p = 2^61 - 1): the limb sums reach nearly K 2^(2b).  With the code's
    width they are exact; with limbs two bits wider the float64 sums pass 2^53 and the product is wrong,
    which these tests would see."""
    p, K = M61, 4096
    X = np.full((4, K), p - 1, dtype=np.int64)
    Y = np.full((K, 3), p - 1, dtype=np.int64)
    want = _ref_mm(X, Y, p)
    assert (modular.mm(X, Y, p).astype(object) == want).all()
    wide = modular._mm_wide(X, Y, p, bits=modular.limb_bits(K) + 2)
    assert not (wide.astype(object) == want).all()


def test_a_contraction_too_long_for_limbs_takes_the_integer_product(monkeypatch):
    """Past limbs of MIN_LIMB_BITS the code chooses the pure-integer product (here forced by raising the
    minimum: no array of 2^30 entries is formed), and it is exact."""
    assert modular.limb_bits(2**30) < modular.MIN_LIMB_BITS
    called = []
    real = modular._mm_integer
    monkeypatch.setattr(modular, "_mm_integer", lambda X, Y, p: called.append(X.shape) or real(X, Y, p))
    monkeypatch.setattr(modular, "MIN_LIMB_BITS", 27)
    rng = np.random.default_rng(2)
    X = rng.integers(0, M61, size=(3, 50), dtype=np.int64)
    Y = rng.integers(0, M61, size=(50, 2), dtype=np.int64)
    X[0] = M61 - 1
    assert (modular.mm(X, Y, M61).astype(object) == _ref_mm(X, Y, M61)).all()
    assert called == [(3, 50)]


@given(a=st.integers(0, M61 - 1), bits=st.integers(0, 40), k=st.integers(0, 2))
@settings(max_examples=300, deadline=None)
def test_mulmod_pow2_is_exact(a, bits, k):
    p = PRIMES[k]
    a %= p
    arr = np.array([a, p - 1, 0, 1, p // 2], dtype=np.int64)
    got = modular.mulmod_pow2(arr, bits, p)
    assert got.tolist() == [int(x) * 2**bits % p for x in arr.tolist()]


@pytest.mark.parametrize("causal,same", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("T", [1, 2, 5, 63, 64, 65, 130, 257])
def test_blocked_convolution_is_exact_in_every_convention(T, causal, same):
    """The blocked float64 convolution (lags in blocks of CONV_BLOCK, T around the block length) against
    the layers' exact convolution on integers, with every entry p - 1 in one batch row and one channel."""
    p = M61 if T % 2 else PRIMES[1]
    rng = np.random.default_rng(T)
    v = rng.integers(0, p, size=(2, T, 4), dtype=np.int64)
    h = rng.integers(0, p, size=(T, 4), dtype=np.int64)
    v[0] = p - 1
    h[:, 1] = p - 1
    want = _ref_conv(v, h, causal, same, p)
    assert (modular._conv_blocks(v, h, causal, same, p).astype(object) == want).all()
    assert (modular.conv(v, h, causal, p, same).astype(object) == want).all()


@pytest.mark.parametrize("causal,same", [(False, False), (True, False), (False, True)])
def test_blocked_convolution_reduces_long_block_sums(causal, same, monkeypatch):
    """The int64 block sums reduced modulo p after every block (as a convolution with more blocks than
    int64 holds would be): the same exact result, with smaller blocks too."""
    monkeypatch.setattr(modular, "_reduce_every", lambda: 1)
    monkeypatch.setattr(modular, "CONV_BLOCK", 8)
    p, T = M61, 70
    rng = np.random.default_rng(9)
    v = np.full((1, T, 2), p - 1, dtype=np.int64)
    h = rng.integers(0, p, size=(T, 2), dtype=np.int64)
    h[:, 0] = p - 1
    assert (modular._conv_blocks(v, h, causal, same, p).astype(object) == _ref_conv(v, h, causal, same, p)).all()


@pytest.mark.parametrize("causal,same", [(False, False), (True, False), (False, True)])
def test_dense_baseconv_forward_matches_the_layers_own_forward(causal, same):
    """A BaseConv layer with dense weights and filters (a learned file's) at a wide prime: the hand-written
    forward equals the layer's own forward on residues (verify/prover/modp.py)."""
    p = PRIMES[1]
    rng = np.random.default_rng(11)
    T, C = 70, 5

    def dense(*shape):
        a = np.empty(shape, dtype=object)
        a[...] = [[Fraction(int(x), 2**20) for x in row] for row in rng.integers(-2**20, 2**20, shape)]
        return a

    L = BaseConv(W_in=dense(C, C), b_in=dense(T, C), h=dense(T, C), b_conv=dense(T, C), W_gate=dense(C, C),
                 b_gate=dense(T, C), W_out=dense(C, C), b_out=dense(T, C), causal=causal, same=same, residual=True)
    u = rng.integers(0, p, size=(3, T, C), dtype=np.int64)
    got = modular.forward(modular.layer_residues(L, p), u, p)
    want = modp.forward_trials(modp.layer_mod(L, p), u, p)
    assert (got == want).all()


def test_lazy_float_weights_give_the_residues_of_their_exact_values():
    """A weight read lazily (constructions/exact_floats.py) is reduced from its stored floats: the residues
    of the exact binary fractions, as the eager object array gives them (with a declared rational)."""
    rng = np.random.default_rng(3)
    f = rng.normal(size=(6, 7)).astype(np.float32)
    f[0, 0] = 0.0
    A = ExactFloats(f, over_pos=[3], over_vals=[Fraction(1, 10)])
    for p in PRIMES:
        assert (modular.residues(A, p) == modular.residues(np.asarray(A), p)).all()


@pytest.mark.parametrize("M", [1, 7, 45, 46, 200])
def test_stacked_products_in_row_blocks_are_the_products(M, monkeypatch):
    """The per-channel products cut into row blocks (with a remainder block) are numpy's products."""
    monkeypatch.setattr(modular, "_GEMM_MACS", 45 * 6 * 5)
    rng = np.random.default_rng(M)
    W = rng.integers(0, 2**20, size=(3, M, 6)).astype(np.float64)
    H = rng.integers(0, 2**20, size=(3, 6, 5)).astype(np.float64)
    assert np.array_equal(modular._stacked_products(W, H), np.matmul(W, H))
