"""Random least-squares problem batches (seed 000, section 3.2).

Seed 000 (section 3.2, "Transformers do not exhibit the generality of gradient
descent") specifies the training distribution D_train of least-squares problems:

* ``A`` in R^{N x D} (default N = 20, D = 5) and ``x`` in R^D have i.i.d.
  standard Gaussian entries N(0, 1) (as in Garg et al., 2022);
* the singular values of ``A`` are then shifted and rescaled so that
  ``sigma_max = kappa = 5`` (and ``sigma_min = 1``);
* ``b = A x``.

The out-of-distribution family D_OOD^b(sigma) draws ``x ~ N(0, sigma^2)``
entrywise (so ``b`` is scaled by ``sigma``) while keeping the same spectrum of
``A``; gradient descent (seed 000 eq. (3)),

    x_{k+1} = x_k - eta * A^T (A x_k - b),

with a fixed step ``0 < eta < 2 / sigma_max^2`` converges on every such problem.
High-precision references for these iterates live in :mod:`numerics.reference`.

Singular-value rescaling used here
----------------------------------
With ``A = U diag(s) V^T`` (thin SVD, ``s_max = max(s)``, ``s_min = min(s)``)
each singular value is mapped affinely

    s' = 1 + (s - s_min) * (kappa - 1) / (s_max - s_min),

so ``s'_min = 1`` and ``s'_max = kappa`` exactly in exact arithmetic (the
float64 matrix ``U diag(s') V^T`` has singular values within a few ulps of
these).  If all singular values coincide (a probability-zero event) every
``s'`` is set to 1.

Reproducibility: all randomness comes from ``numpy.random.Generator(PCG64(seed))``
drawn in the fixed order A, x_true, x0.  The same seed gives bit-identical
batches with the same numpy / LAPACK build; different BLAS/LAPACK builds may
differ in the last bits of the SVD and of ``b = A x_true``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

__all__ = ["LSBatch", "sample_ls", "optimal_step"]


@dataclass(frozen=True, eq=False)
class LSBatch:
    """A batch of least-squares problems ``min_x ||A x - b||^2``.

    Attributes
    ----------
    A : ndarray, shape (B, N, D)
    b : ndarray, shape (B, N); ``b = A @ x_true`` evaluated in the array's dtype
        (float64 from :func:`sample_ls`), hence *rounded*: ``x_true`` is in general
        not exactly the least-squares solution of the stored ``(A, b)``
        (see :func:`numerics.reference.lstsq_solution`).
    x_true : ndarray, shape (B, D)
    x0 : ndarray, shape (B, D); GD starting point.
    """

    A: np.ndarray
    b: np.ndarray
    x_true: np.ndarray
    x0: np.ndarray

    def __post_init__(self) -> None:
        A, b, x_true, x0 = self.A, self.b, self.x_true, self.x0
        if A.ndim != 3:
            raise ValueError(f"A: expected shape (B, N, D), got {A.shape}")
        B, N, D = A.shape
        if b.shape != (B, N):
            raise ValueError(f"b: expected shape {(B, N)}, got {b.shape}")
        if x_true.shape != (B, D):
            raise ValueError(f"x_true: expected shape {(B, D)}, got {x_true.shape}")
        if x0.shape != (B, D):
            raise ValueError(f"x0: expected shape {(B, D)}, got {x0.shape}")

    @property
    def batch(self) -> int:
        return self.A.shape[0]

    @property
    def n(self) -> int:
        return self.A.shape[1]

    @property
    def d(self) -> int:
        return self.A.shape[2]

    @property
    def dtype(self) -> np.dtype:
        return self.A.dtype

    def astype(self, dtype) -> "LSBatch":
        """Return a copy with every array cast to ``dtype`` (round-to-nearest).

        Note that ``b`` is cast, not recomputed: after a narrowing cast
        ``b`` is no longer ``A @ x_true`` evaluated in ``dtype``.
        """
        return LSBatch(
            A=self.A.astype(dtype),
            b=self.b.astype(dtype),
            x_true=self.x_true.astype(dtype),
            x0=self.x0.astype(dtype),
        )


def check_int(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def _check_real(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return value


def sample_ls(
    batch: int,
    n: int = 20,
    d: int = 5,
    *,
    kappa: float = 5.0,
    sigma: float = 1.0,
    seed: int = 0,
    x0: str = "zeros",
) -> LSBatch:
    """Sample ``batch`` least-squares problems from D_train / D_OOD^b(sigma).

    Seed 000, section 3.2: ``A`` (``n x d``) and ``x_true`` have i.i.d. N(0, 1)
    entries, the singular values of ``A`` are rescaled affinely onto
    ``[1, kappa]`` (module docstring), ``x_true`` is multiplied by ``sigma``
    (D_OOD^b(sigma); ``sigma = 1`` is D_train) and ``b = A @ x_true`` in float64.

    Parameters
    ----------
    batch : number of problems B (>= 1).
    n, d : rows N and columns D of ``A``; ``n >= d >= 1`` (fully determined).
    kappa : condition number = sigma_max (sigma_min = 1); finite, >= 1.
    sigma : standard deviation of the entries of ``x_true``; finite, > 0.
    seed : non-negative integer seed of ``numpy.random.PCG64``.
    x0 : ``"zeros"`` (GD start at the origin) or ``"gaussian"`` (N(0, 1) entries,
        drawn after ``A`` and ``x_true``).

    Returns
    -------
    LSBatch with float64 arrays.

    Raises
    ------
    ValueError with a one-line message naming the offending argument.
    """
    batch = check_int("batch", batch, 1)
    n = check_int("n", n, 1)
    d = check_int("d", d, 1)
    if n < d:
        raise ValueError(f"n must be >= d (fully determined problems), got n={n}, d={d}")
    kappa = _check_real("kappa", kappa)
    if kappa < 1.0:
        raise ValueError(f"kappa must be >= 1, got {kappa}")
    sigma = _check_real("sigma", sigma)
    if sigma <= 0.0:
        raise ValueError(f"sigma must be > 0, got {sigma}")
    seed = check_int("seed", seed, 0)
    if not isinstance(x0, str) or x0 not in ("zeros", "gaussian"):
        raise ValueError(f"x0 must be 'zeros' or 'gaussian', got {x0!r}")

    rng = np.random.Generator(np.random.PCG64(seed))
    A = rng.standard_normal((batch, n, d))
    x_true = sigma * rng.standard_normal((batch, d))
    if x0 == "gaussian":
        x_start = rng.standard_normal((batch, d))
    else:
        x_start = np.zeros((batch, d))

    U, s, Vt = np.linalg.svd(A, full_matrices=False)  # U (B,n,d), s (B,d), Vt (B,d,d)
    s_max = s.max(axis=1, keepdims=True)
    s_min = s.min(axis=1, keepdims=True)
    span = s_max - s_min
    degenerate = span <= 0.0
    safe_span = np.where(degenerate, 1.0, span)
    s_new = np.where(degenerate, 1.0, 1.0 + (s - s_min) * ((kappa - 1.0) / safe_span))
    A = np.matmul(U * s_new[:, None, :], Vt)
    b = np.matmul(A, x_true[:, :, None])[:, :, 0]
    return LSBatch(
        A=np.ascontiguousarray(A),
        b=np.ascontiguousarray(b),
        x_true=np.ascontiguousarray(x_true),
        x0=np.ascontiguousarray(x_start),
    )


def optimal_step(kappa: float = 5.0, sigma_min: float = 1.0) -> float:
    """Classical optimal constant GD step ``2 / (sigma_max^2 + sigma_min^2)``.

    For problems from :func:`sample_ls` (``sigma_max = kappa``, ``sigma_min = 1``)
    this gives the contraction factor ``(kappa^2 - 1) / (kappa^2 + 1)`` per step
    (Boyd & Vandenberghe, 2004; seed 000 section 3.2 quotes the convergence
    condition ``0 < eta < 2 / sigma_max^2``).  Default kappa = 5 gives 1/13.
    """
    kappa = _check_real("kappa", kappa)
    sigma_min = _check_real("sigma_min", sigma_min)
    if sigma_min <= 0.0 or kappa < sigma_min:
        raise ValueError(f"kappa must be >= sigma_min > 0, got kappa={kappa}, sigma_min={sigma_min}")
    return 2.0 / (kappa * kappa + sigma_min * sigma_min)
