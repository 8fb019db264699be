import numpy as np
import pytest

from numerics.training.tasks import make_task


def rng(s=0):
    return np.random.default_rng(s)


def test_gradient_task_layout_and_target():
    t = make_task("gradient", n=6, d=3)
    u, y = t.sample(4, rng())
    assert u.shape == (4, 7, 8) and y.shape == (4, 1, 3) and t.out_rows == slice(6, 7)
    A, b, x0 = u[:, :6, :3], u[:, :6, 3], u[:, 6, 4:7]
    assert np.all(u[:, 6, 7] == 1) and np.all(u[:, :6, 4:] == 0) and np.all(u[:, 6, :4] == 0)
    g = np.einsum("bnd,bn->bd", A, np.einsum("bnd,bd->bn", A, x0) - b) / 6
    np.testing.assert_allclose(y[:, 0], g, rtol=1e-12)
    s = np.linalg.svd(A, compute_uv=False)
    np.testing.assert_allclose(s.max(1), 5.0, rtol=1e-12)
    np.testing.assert_allclose(s.min(1), 1.0, rtol=1e-12)


def test_iterate_task_is_k_gd_steps():
    t1 = make_task("iterate", n=6, d=3, k=1, eta=0.5)
    t3 = make_task("iterate", n=6, d=3, k=3, eta=0.5)
    g = make_task("gradient", n=6, d=3)
    u, y1 = t1.sample(2, rng(1))
    _, y3 = t3.sample(2, rng(1))
    _, gr = g.sample(2, rng(1))
    x0 = u[:, 6, 4:7]
    np.testing.assert_allclose(y1[:, 0], x0 - 0.5 * gr[:, 0], rtol=1e-12)
    A, b = u[:, :6, :3], u[:, :6, 3]
    np.testing.assert_allclose(y3[:, 0], t3.gd(A, b, x0, 3), rtol=1e-12)


def test_icls_target_solves_the_problem():
    t = make_task("icls", n=8, d=3)
    u, y = t.sample(3, rng(2))
    assert u.shape == (3, 9, 5)
    A, b = u[:, :8, :3], u[:, :8, 3]
    np.testing.assert_allclose(np.einsum("bnd,bd->bn", A, y[:, 0]), b, atol=1e-12)


def test_primitives():
    r = make_task("read", n=5, d=4, param_seed=1)
    x, y = r.sample(2, rng())
    assert r.i != r.j
    np.testing.assert_array_equal(y[:, r.j], x[:, r.i])
    keep = [k for k in range(5) if k != r.j]
    np.testing.assert_array_equal(y[:, keep], x[:, keep])
    lin = make_task("linear", n=5, d=4)
    x, y = lin.sample(2, rng())
    np.testing.assert_allclose(y[..., 0], x @ lin.h)
    m = make_task("multiply", n=5, d=4)
    x, y = m.sample(2, rng())
    assert y.shape == (2, 5, 2) and m.d_out == 2
    np.testing.assert_array_equal(y, x[..., :2] * x[..., 2:])


def test_unknown_task():
    with pytest.raises(ValueError, match="unknown task"):
        make_task("nope")
