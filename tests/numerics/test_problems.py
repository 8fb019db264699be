"""Tests for numerics.problems (seed 000 section 3.2 least-squares sampler)."""

import numpy as np
import pytest

from numerics.problems import LSBatch, optimal_step, sample_ls


def test_shapes_and_dtype_default():
    P = sample_ls(7)
    assert P.A.shape == (7, 20, 5)
    assert P.b.shape == (7, 20)
    assert P.x_true.shape == (7, 5)
    assert P.x0.shape == (7, 5)
    for arr in (P.A, P.b, P.x_true, P.x0):
        assert arr.dtype == np.float64
    assert (P.batch, P.n, P.d) == (7, 20, 5)
    assert P.dtype == np.float64


@pytest.mark.parametrize("n,d", [(20, 5), (8, 3), (4, 4), (1, 1)])
def test_custom_sizes(n, d):
    P = sample_ls(3, n, d, seed=1)
    assert P.A.shape == (3, n, d) and P.b.shape == (3, n) and P.x_true.shape == (3, d)


@pytest.mark.parametrize("kappa", [5.0, 1.5, 100.0])
def test_singular_values_in_range(kappa):
    P = sample_ls(64, kappa=kappa, seed=3)
    s = np.linalg.svd(P.A, compute_uv=False)
    assert np.all(s >= 1.0 - 1e-12) and np.all(s <= kappa * (1 + 1e-12))
    np.testing.assert_allclose(s.max(axis=1), kappa, rtol=1e-12, atol=0)
    np.testing.assert_allclose(s.min(axis=1), 1.0, rtol=1e-12, atol=0)


def test_kappa_one_gives_orthonormal_columns():
    P = sample_ls(5, 9, 4, kappa=1.0, seed=2)
    s = np.linalg.svd(P.A, compute_uv=False)
    np.testing.assert_allclose(s, 1.0, rtol=0, atol=1e-12)


def test_b_is_A_x_true():
    P = sample_ls(16, sigma=3.0, seed=5)
    np.testing.assert_allclose(P.b, np.einsum("bnd,bd->bn", P.A, P.x_true), rtol=1e-13, atol=1e-13)


def test_determinism_and_seed_dependence():
    P1 = sample_ls(10, seed=42, x0="gaussian")
    P2 = sample_ls(10, seed=42, x0="gaussian")
    P3 = sample_ls(10, seed=43, x0="gaussian")
    for f in ("A", "b", "x_true", "x0"):
        assert np.array_equal(getattr(P1, f), getattr(P2, f))
        assert not np.array_equal(getattr(P1, f), getattr(P3, f))


def test_sigma_scales_targets_only():
    P1 = sample_ls(10, seed=9)
    P10 = sample_ls(10, seed=9, sigma=10.0)
    assert np.array_equal(P1.A, P10.A)
    assert np.array_equal(P10.x_true, 10.0 * P1.x_true)
    np.testing.assert_allclose(P10.b, 10.0 * P1.b, rtol=1e-12, atol=1e-12)


def test_x0_modes():
    Pz = sample_ls(6, seed=11)
    Pg = sample_ls(6, seed=11, x0="gaussian")
    assert np.all(Pz.x0 == 0.0)
    assert np.all(Pg.x0 != 0.0)
    # x0 is drawn after A and x_true, so they do not depend on the x0 mode
    assert np.array_equal(Pz.A, Pg.A) and np.array_equal(Pz.x_true, Pg.x_true)


def test_x_true_distribution():
    P = sample_ls(4000, seed=0, sigma=2.0)
    x = P.x_true.ravel()
    assert abs(x.mean()) < 0.05
    assert abs(x.std() - 2.0) < 0.05


@pytest.mark.parametrize(
    "args,kwargs,name",
    [
        ((0,), {}, "batch"),
        ((2.0,), {}, "batch"),
        ((True,), {}, "batch"),
        ((2, 0), {}, "n"),
        ((2, 3, 5), {}, "n must be >= d"),
        ((2, 5, 0), {}, "d"),
        ((2,), {"kappa": 0.5}, "kappa"),
        ((2,), {"kappa": float("inf")}, "kappa"),
        ((2,), {"kappa": "5"}, "kappa"),
        ((2,), {"sigma": 0.0}, "sigma"),
        ((2,), {"sigma": -1.0}, "sigma"),
        ((2,), {"sigma": float("nan")}, "sigma"),
        ((2,), {"seed": -1}, "seed"),
        ((2,), {"seed": 1.5}, "seed"),
        ((2,), {"x0": "ones"}, "x0"),
    ],
)
def test_bad_arguments_raise(args, kwargs, name):
    with pytest.raises(ValueError, match=name) as exc:
        sample_ls(*args, **kwargs)
    assert "\n" not in str(exc.value)


def test_astype():
    P = sample_ls(4, seed=1, x0="gaussian")
    Q = P.astype(np.float32)
    for f in ("A", "b", "x_true", "x0"):
        assert getattr(Q, f).dtype == np.float32
        assert np.array_equal(getattr(Q, f), getattr(P, f).astype(np.float32))
    assert P.A.dtype == np.float64  # original untouched
    with pytest.raises(Exception):
        P.A = Q.A  # frozen


def test_lsbatch_shape_validation():
    P = sample_ls(2, 6, 3)
    with pytest.raises(ValueError, match="b"):
        LSBatch(P.A, P.b[:, :5], P.x_true, P.x0)
    with pytest.raises(ValueError, match="x0"):
        LSBatch(P.A, P.b, P.x_true, P.x0[:, :2])
    with pytest.raises(ValueError, match="A"):
        LSBatch(P.A[0], P.b, P.x_true, P.x0)


def test_optimal_step():
    assert optimal_step() == 2.0 / 26.0
    assert optimal_step(2.0) == 2.0 / 5.0
    with pytest.raises(ValueError, match="kappa"):
        optimal_step(0.5)
