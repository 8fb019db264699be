"""The iterative algorithms of docs/algorithms.md, each one step written with ``circuits.from_function``.

Each example is a function returning ``(step circuit, params, inputs)``: the circuit of one step (an output
named as an input feeds it next step; data kept is passed through), the inputs held fixed (symbols of the
proof), and a function ``inputs(rng, trials)`` giving float64 starting values (name -> array over trials)
at which the iteration converges.  ``docs/algorithms.py`` compiles each to every target that holds it,
proves it at every depth and runs it 100 steps in float32 and float64 against the mpmath iteration;
``tests/constructions/test_iteration_docs.py`` runs them as written here.
"""
from fractions import Fraction

import numpy as np

import circuits as C

N = 3  # the matrices' size: the float runs stay small (100 steps, a few trials)


def _named(prefix, M):
    """``{prefix_i_j: M[..., i, j]}`` (``prefix_i`` for a vector) over a batch of matrices/vectors."""
    M = np.asarray(M)
    if M.ndim == 2:
        return {f"{prefix}_{i}": M[:, i] for i in range(M.shape[1])}
    return {f"{prefix}_{i}_{j}": M[:, i, j] for i in range(M.shape[1]) for j in range(M.shape[2])}


def _spd(rng, trials, lo=0.5, hi=1.5):
    """Random symmetric matrices with eigenvalues in [lo, hi]."""
    Q = np.linalg.qr(rng.standard_normal((trials, N, N)))[0]
    lam = rng.uniform(lo, hi, (trials, N))
    return np.einsum("tij,tj,tkj->tik", Q, lam, Q)


def newton_schulz():
    """Newton-Schulz iteration for the inverse: X <- X (2I - A X), A kept (X -> A^-1 quadratically)."""
    I2 = 2 * np.eye(N, dtype=int)
    g = C.from_function(lambda X, A: {"X": X @ (I2 - A @ X), "A": A}, X=(N, N), A=(N, N))

    def inputs(rng, trials):
        A = _spd(rng, trials)
        return {**_named("A", A), **_named("X", np.broadcast_to(np.eye(N) * 0.5, A.shape))}  # ||I - A X0|| < 1
    return g, (), inputs


def jacobi():
    """Richardson / Jacobi with a fixed preconditioner: x <- x + p * (b - A x), p = 1 / diag(A) held fixed."""
    g = C.from_function(lambda A, b, x, p: {"x": x + p * (b - A @ x), "A": A, "b": b},
                        A=(N, N), b=(N,), x=(N,), p=(N,))

    def inputs(rng, trials):
        A = rng.uniform(-0.3, 0.3, (trials, N, N)) + np.eye(N) * 2  # diagonally dominant: Jacobi converges
        p = 1 / np.einsum("tii->ti", A)
        return {**_named("A", A), **_named("b", rng.uniform(-1, 1, (trials, N))), **_named("x", np.zeros((trials, N))),
                **_named("p", p)}
    return g, tuple(f"p_{i}" for i in range(N)), inputs


def power_iteration():
    """Unnormalised power iteration: v <- A v, A kept (spectral radius <= 1, so nothing overflows)."""
    g = C.from_function(lambda A, v: {"v": A @ v, "A": A}, A=(N, N), v=(N,))

    def inputs(rng, trials):
        A = _spd(rng, trials, 0.2, 1.0)
        return {**_named("A", A), **_named("v", rng.uniform(-1, 1, (trials, N)))}
    return g, (), inputs


#: Chebyshev semi-iteration for SPD A with eigenvalues in [LO, HI] (Golub-Varga): d, rho and the omegas are
#: rational when LO, HI are
LO, HI, CYCLE = Fraction(1, 2), Fraction(3, 2), 4


def chebyshev_omegas(lo=LO, hi=HI, steps=CYCLE):
    """omega_1 = 1, omega_2 = 1 / (1 - rho^2 / 2), omega_{k+1} = 1 / (1 - rho^2 omega_k / 4), rho = (hi-lo)/(hi+lo)."""
    rho = (hi - lo) / (hi + lo)
    om = [Fraction(1), 1 / (1 - rho ** 2 / 2)]
    while len(om) < steps:
        om.append(1 / (1 - rho ** 2 * om[-1] / 4))
    return om[:steps]


def chebyshev():
    """One cycle of CYCLE Chebyshev semi-iterative steps with exact coefficients (restarted every cycle):
    x_{k+1} = x_{k-1} + omega_{k+1} (gamma (b - A x_k) + x_k - x_{k-1}), gamma = 2 / (LO + HI)."""
    gamma, omegas = 2 / (LO + HI), chebyshev_omegas()

    def cycle(A, b, x):
        prev = x
        for om in omegas:
            x, prev = prev + om * (gamma * (b - A @ x) + x - prev), x
        return {"x": x, "A": A, "b": b}
    g = C.from_function(cycle, A=(N, N), b=(N,), x=(N,))

    def inputs(rng, trials):
        return {**_named("A", _spd(rng, trials, float(LO), float(HI))), **_named("b", rng.uniform(-1, 1, (trials, N))),
                **_named("x", np.zeros((trials, N)))}
    return g, (), inputs


def polynomial_preconditioner():
    """Richardson with a polynomial preconditioner: x <- x + q(A) (b - A x), q(A) = I + (I - A) + (I - A)^2
    (the Neumann series of A^-1 to degree 2)."""
    I = np.eye(N, dtype=int)

    def step(A, b, x):
        r = b - A @ x
        E = I - A
        return {"x": x + r + E @ r + E @ (E @ r), "A": A, "b": b}
    g = C.from_function(step, A=(N, N), b=(N,), x=(N,))

    def inputs(rng, trials):
        return {**_named("A", _spd(rng, trials, 0.5, 1.5)), **_named("b", rng.uniform(-1, 1, (trials, N))),
                **_named("x", np.zeros((trials, N)))}
    return g, (), inputs


GD_N, GD_D = 6, 2  # the least-squares problem of the GD example (tokens, features)


def gd():
    """Gradient descent on least squares, x <- x - eta A^T (A x - b), in five lines (eta a parameter)."""
    def step(A, b, x, eta):
        return {"x": x - eta * A.T @ (A @ x - b), "A": A, "b": b}
    g = C.from_function(step, A=(GD_N, GD_D), b=(GD_N,), x=(GD_D,), eta=(), placed=True)

    def inputs(rng, trials):
        return {**_named("A", rng.uniform(-1, 1, (trials, GD_N, GD_D))), **_named("b", rng.uniform(-1, 1, (trials, GD_N))),
                **_named("x", np.zeros((trials, GD_D))), "eta": np.full(trials, 1 / 16)}
    return g, ("eta",), inputs


EXAMPLES = {"newton-schulz": newton_schulz, "jacobi": jacobi, "power-iteration": power_iteration,
            "chebyshev": chebyshev, "polynomial-preconditioner": polynomial_preconditioner, "gd": gd}
