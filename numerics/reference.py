"""High-precision references for gradient descent on least squares.

Iterations (seed 000 eq. (3); ridge variant seed 001 eqs. (35)-(36)):

    x_{k+1} = x_k - eta * (A^T (A x_k - b) + lam * x_k)        (lam = 0: plain GD)

Every reference here is computed *from the floating-point inputs converted
exactly*: a float64 (or float32 / float16) value is a dyadic rational and
``gmpy2.mpfr(float)`` represents it exactly at any precision >= 53 bits.  Nothing
goes through decimal strings (``mpfr("0.1")`` would be a different number from
the float ``0.1``).  The working precision is always >= 53 + guard bits, so the
inputs are never rounded.

Scalars ``eta`` and ``lam`` may be ``float`` (exact), ``int`` (exact when
``|value| < 2**prec``), ``fractions.Fraction`` / ``gmpy2.mpq`` or ``gmpy2.mpfr``.
A Fraction such as ``Fraction(1, 10)`` is in general not a binary fraction; it is
converted as ``mpfr(mpq(numerator, denominator))``, i.e. rounded *once*
(round-to-nearest) to the working precision, a relative error <= 2**-prec.
Note that ``eta=0.1`` (the float, 0.1000000000000000055511...) and
``eta=Fraction(1, 10)`` are different step sizes and give (slightly) different
references.

Outputs are rounded to float64 with a single round-to-nearest from the
high-precision value.  Because the high-precision value is itself within
~10**-digits (relative) of the exact rational iterate, the float64 output is
the correctly rounded exact iterate unless that iterate lies within ~10**-digits
of a float64 rounding boundary; :func:`stable_reference` raises the precision
until the rounded result no longer changes.

Working precision: ``prec = max(ceil(digits * log2(10)), 53) + GUARD_BITS`` bits,
set through a fresh ``gmpy2.context`` (round-to-nearest, no traps); the caller's
gmpy2 context is restored afterwards.
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction
from typing import Any, Callable

import gmpy2
import numpy as np

from .problems import check_int

__all__ = [
    "GUARD_BITS",
    "working_precision",
    "to_mpfr_array",
    "from_mpfr_array",
    "gd_reference",
    "gd_reference_iter",
    "gd_reference_direct",
    "stable_reference",
    "lstsq_solution",
]

GUARD_BITS = 16

_LOG2_10 = math.log2(10.0)
_MANTISSA_BITS = {8: 53, 4: 24, 2: 11}  # float itemsize -> significand bits


def working_precision(digits: int) -> int:
    """Binary precision (bits) used for ``digits`` decimal digits (>= 53 + guard)."""
    digits = check_int("digits", digits, 1)
    return max(math.ceil(digits * _LOG2_10), 53) + GUARD_BITS


# ----------------------------------------------------------------------------
# argument checking / exact conversions
# ----------------------------------------------------------------------------


def _scalar_to_mpfr(v, name: str = "value"):
    """Convert one scalar to mpfr in the *current* gmpy2 context (see module doc)."""
    if isinstance(v, bool) or isinstance(v, np.bool_):
        raise ValueError(f"{name}: booleans are not numbers here, got {v!r}")
    if isinstance(v, gmpy2.mpfr):
        out = gmpy2.mpfr(v)  # rounded to the working precision if it has more bits
    elif isinstance(v, Fraction):
        out = gmpy2.mpfr(gmpy2.mpq(v.numerator, v.denominator))  # one rounding
    elif isinstance(v, (gmpy2.mpq, gmpy2.mpz)):
        out = gmpy2.mpfr(v)
    elif isinstance(v, numbers.Integral):
        out = gmpy2.mpfr(int(v))
    elif isinstance(v, (float, np.floating)):
        if isinstance(v, np.floating) and np.dtype(type(v)).itemsize > 8:
            raise ValueError(f"{name}: extended-precision floats are not supported, got {type(v).__name__}")
        out = gmpy2.mpfr(float(v))  # exact: float16/32/64 fit in 53 bits
    else:
        raise ValueError(f"{name}: unsupported scalar type {type(v).__name__}")
    if not gmpy2.is_finite(out):
        raise ValueError(f"{name} must be finite, got {v!r}")
    return out


def _to_mpfr_current(x, name: str = "x") -> np.ndarray:
    """Object array of mpfr in the current context (exact for float inputs)."""
    arr = np.asarray(x)
    shape = arr.shape
    kind = arr.dtype.kind
    if kind == "f":
        if arr.dtype.itemsize > 8:
            raise ValueError(f"{name}: extended-precision float arrays are not supported ({arr.dtype})")
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} must be finite")
        # ``-0 + v`` is exact (v has <= 53 bits, prec >= 53), keeps the sign of
        # zero, and is ~10x faster than ``gmpy2.mpfr(v)`` per element.
        nz = gmpy2.mpfr(-0.0)
        vals = [nz + v for v in arr.astype(np.float64).ravel().tolist()]
    elif kind in "iu":
        nz = gmpy2.mpfr(-0.0)
        vals = [nz + v for v in arr.ravel().tolist()]  # exact if |v| < 2**prec
    elif kind == "O":
        vals = [_scalar_to_mpfr(v, name) for v in arr.ravel().tolist()]
    else:
        raise ValueError(f"{name}: unsupported dtype {arr.dtype}")
    out = np.empty(len(vals), dtype=object)
    out[:] = vals
    return out.reshape(shape)


def to_mpfr_array(x, prec: int) -> np.ndarray:
    """Object ndarray of ``gmpy2.mpfr`` with ``prec`` bits, same shape as ``x``.

    Float arrays (float16/32/64) are converted exactly when ``prec >= 53``
    (exact for float32 from 24 bits, float16 from 11 bits); integer arrays exactly
    when every ``|value| < 2**prec``; object arrays may hold float, int,
    ``Fraction``, ``gmpy2.mpq``/``mpz``/``mpfr`` (non-dyadic rationals and wider
    mpfr values are rounded once to nearest).  No decimal strings are involved.
    """
    prec = check_int("prec", prec, 2)
    with gmpy2.context(precision=prec):
        return _to_mpfr_current(x)


def from_mpfr_array(arr, dtype=np.float64) -> np.ndarray:
    """Round an object array of mpfr (or mpq/int) to ``dtype`` with one round-to-nearest.

    For float32/float16 the value is rounded directly to 24/11 significand bits
    (no double rounding through float64; subnormal results of the narrow type are
    the exception and go through float64).
    """
    dtype = np.dtype(dtype)
    if dtype.kind != "f" or dtype.itemsize not in _MANTISSA_BITS:
        raise ValueError(f"dtype must be float16, float32 or float64, got {dtype}")
    a = np.asarray(arr, dtype=object)
    bits = _MANTISSA_BITS[dtype.itemsize]
    with gmpy2.context(precision=bits, round=gmpy2.RoundToNearest):
        if bits == 53:
            # float(mpfr) is mpfr_get_d with the context's (nearest) rounding, subnormals
            # included; float(mpq), float(int) and float(Fraction) are correctly rounded too.
            return a.astype(np.float64)
        vals = [float(gmpy2.mpfr(v)) for v in a.ravel().tolist()]  # one rounding to `bits`
    with np.errstate(over="ignore"):
        return np.array(vals, dtype=np.float64).astype(dtype).reshape(a.shape)


def _step_param(value, batch: int, name: str) -> np.ndarray:
    """eta / lam -> object array of shape (B, 1, 1) of mpfr in the current context."""
    if isinstance(value, (np.ndarray, list, tuple)):
        arr = np.asarray(value, dtype=object) if not isinstance(value, np.ndarray) else value
        if arr.ndim == 0:
            vals = [_scalar_to_mpfr(arr.item(), name)] * batch
        else:
            if arr.shape != (batch,):
                raise ValueError(f"{name}: expected a scalar or shape ({batch},), got {arr.shape}")
            vals = [_scalar_to_mpfr(v, name) for v in arr.tolist()]
    else:
        vals = [_scalar_to_mpfr(value, name)] * batch
    out = np.empty(batch, dtype=object)
    out[:] = vals
    return out.reshape(batch, 1, 1)


def prepare_reference(A, b, x0, steps, digits):
    """Validate shapes; return (A, b, x0 as arrays with batch axis, squeeze flag, steps, prec)."""
    A = np.asarray(A)
    b = np.asarray(b)
    squeeze = A.ndim == 2
    if squeeze:
        A = A[None]
        b = b[None]
        if x0 is not None:
            x0 = np.asarray(x0)[None]
    if A.ndim != 3:
        raise ValueError(f"A: expected shape (B, N, D) or (N, D), got {np.shape(A)}")
    B, N, D = A.shape
    if b.shape != (B, N):
        raise ValueError(f"b: expected shape {(B, N) if not squeeze else (N,)}, got {b.shape if not squeeze else b.shape[1:]}")
    if x0 is None:
        x0 = np.zeros((B, D))
    else:
        x0 = np.asarray(x0)
        if x0.shape != (B, D):
            raise ValueError(f"x0: expected shape {(B, D) if not squeeze else (D,)}, got {x0.shape if not squeeze else x0.shape[1:]}")
    steps = check_int("steps", steps, 0)
    prec = working_precision(digits)
    return A, b, x0, squeeze, steps, prec


def _collect(steps: int, steps_iter, return_mp: bool):
    """Stack what :func:`gd_reference_iter` yields into the (steps + 1, ...) arrays."""
    floats, mp = None, None
    for j, (xf, xm) in enumerate(steps_iter):
        if floats is None:
            floats = np.empty((steps + 1,) + xf.shape, dtype=np.float64)
            mp = np.empty((steps + 1,) + xm.shape, dtype=object) if return_mp else None
        floats[j] = xf
        if return_mp:
            mp[j] = xm
    return (floats, mp) if return_mp else floats


# ----------------------------------------------------------------------------
# gradient descent references
# ----------------------------------------------------------------------------


def gd_reference_iter(A, b, x0, eta, steps: int, *, digits: int = 50, lam=0, direct: bool = False,
                      return_mp: bool = False):
    """Stream the high-precision (ridge) GD iterates x_0, x_1, ..., x_steps one at a time.

    Returns an iterator that yields ``steps + 1`` times: x_j rounded to float64 (shape (B, D),
    or (D,) for unbatched input), or with ``return_mp=True`` the pair ``(floats, mpfr object
    array)``.  Only the current iterate is held, so memory does not grow with ``steps``; the
    numbers are those of :func:`gd_reference` (``direct=False``: the precomputed ``M x + c``
    update) or :func:`gd_reference_direct` (``direct=True``: the literal update), bit for bit --
    those two functions are this iterator collected into arrays.

    The arguments are validated and converted to mpfr when this is called (errors are raised
    here, not at the first ``next()``).  Each step runs in its own fresh
    ``gmpy2.context(precision=working_precision(digits))``, entered and left around the step,
    so the caller's gmpy2 context is never changed between yields and does not affect the
    iterates.
    """
    return _gd_stream(A, b, x0, eta, steps, digits, lam, direct, return_mp)[1]


def _gd_stream(A, b, x0, eta, steps, digits, lam, direct, return_mp):
    """(steps, generator of the iterates) for :func:`gd_reference_iter`; validates eagerly."""
    A, b, x0, squeeze, steps, prec = prepare_reference(A, b, x0, steps, digits)
    B, N, D = A.shape

    def emit(x):
        xm = x[:, :, 0]
        if squeeze:
            xm = xm[0]
        xf = from_mpfr_array(xm)
        return (xf, xm) if return_mp else xf

    with gmpy2.context(precision=prec):
        Am, bm, x, eta_m, lam_m = mpfr_problem(A, b, x0, eta, lam)
        At = Am.transpose(0, 2, 1)
        if direct:
            ridge = any(v != 0 for v in lam_m.ravel())
        else:
            G, h = _normal_equations(A, b, Am, bm)  # (B, D, D), (B, D, 1)
            M = -eta_m * G
            one = gmpy2.mpfr(1)
            eta_v, lam_v = eta_m[:, 0, 0], lam_m[:, 0, 0]
            for i in range(D):
                M[:, i, i] = one - eta_v * (G[:, i, i] + lam_v)
            c = eta_m * h
            del G, h

    def iterates():
        nonlocal x
        yield emit(x)
        for _ in range(steps):
            with gmpy2.context(precision=prec):
                if direct:
                    g = np.matmul(At, np.matmul(Am, x) - bm)
                    if ridge:
                        g = g + lam_m * x
                    x = x - eta_m * g
                else:
                    x = np.matmul(M, x) + c
            yield emit(x)

    return steps, iterates()


def _dyadic_ints(a: np.ndarray) -> tuple[list[int], int]:
    """A float or integer array as Python ints ``m`` and one shift ``s`` with ``a == m * 2**s``
    entry by entry, exactly (a float is a dyadic rational: ``frexp``'s significand times 2**53 is
    an integer)."""
    if a.dtype.kind in "iu":
        return [int(v) for v in a.ravel().tolist()], 0
    frac, exp = np.frexp(a.astype(np.float64).ravel())
    mant = (frac * 2.0**53).astype(np.int64)  # exact: |frac| < 1 has at most 53 significant bits
    exp = exp.astype(np.int64) - 53
    live = mant != 0
    if not live.any():
        return [0] * a.size, 0
    low = int(exp[live].min())
    shift = np.where(live, exp - low, 0)
    return [m << sh for m, sh in zip(mant.tolist(), shift.tolist())], low


#: from this D on, A^T A is formed by python-flint's fmpz_mat per problem (below it, numpy's loop over
#: Python ints for the whole batch at once: the same exact integers)
_FLINT_FROM_D = 16


def _normal_equations(A: np.ndarray, b: np.ndarray, Am: np.ndarray, bm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``A^T A`` (B, D, D) and ``A^T b`` (B, D, 1) as mpfr in the current context.

    Float and integer inputs (the runs' rounded problems): each entry the exact value rounded once
    to the working precision.  From D = 16 it is formed exactly (the inputs as integers times one
    power of two, multiplied by python-flint's ``fmpz_mat`` per problem); below, the mpfr sums of
    products are used where gmpy2's inexact flag shows that none of them was rounded (float32 and
    float64 data at the default 50 digits: always), else the exact integer products of the whole
    batch (numpy's loop over Python ints).  For float32/float64 data at 50 digits these are the
    mpfr values the sums gave before; in general they are within half an ulp of the exact value,
    where the sums were within about N ulps.  512 x 128: ~1.9 s to ~0.15 s.  Exact object inputs
    (Fractions, mpfr): the mpfr products ``Am^T Am``, ``Am^T bm`` as before."""
    B, N, D = A.shape
    exact_inputs = A.dtype.kind in "fiu" and b.dtype.kind in "fiu"
    if not exact_inputs or D < _FLINT_FROM_D:
        ctx = gmpy2.get_context()
        ctx.clear_flags()
        At = Am.transpose(0, 2, 1)
        G, h = np.matmul(At, Am), np.matmul(At, bm)
        if not exact_inputs or not ctx.inexact:  # no sum of products was rounded: the exact values
            return G, h
    ai, sa = _dyadic_ints(A)
    bi, sb = _dyadic_ints(b)
    if D < _FLINT_FROM_D:  # small problems, many of them: numpy's loop over Python ints, all at once
        Ai = np.empty(B * N * D, dtype=object)
        Ai[:] = ai
        Ai = Ai.reshape(B, N, D)
        bv = np.empty(B * N, dtype=object)
        bv[:] = bi
        At = Ai.transpose(0, 2, 1)
        Gi, hi = np.matmul(At, Ai), np.matmul(At, bv.reshape(B, N, 1))
    else:
        import flint

        Gi, hi = np.empty((B, D, D), dtype=object), np.empty((B, D, 1), dtype=object)
        for p in range(B):
            Ap = flint.fmpz_mat(N, D, ai[p * N * D:(p + 1) * N * D])
            At = Ap.transpose()
            Gp, hp = At * Ap, At * flint.fmpz_mat(N, 1, bi[p * N:(p + 1) * N])
            Gi[p] = [[int(Gp[i, j]) for j in range(D)] for i in range(D)]
            hi[p, :, 0] = [int(hp[i, 0]) for i in range(D)]
    # each exact integer rounded once to the working precision, then scaled exactly by its power of two
    G = np.frompyfunc(lambda g: gmpy2.mul_2exp(gmpy2.mpfr(g), 2 * sa), 1, 1)(Gi).astype(object)
    h = np.frompyfunc(lambda g: gmpy2.mul_2exp(gmpy2.mpfr(g), sa + sb), 1, 1)(hi).astype(object)
    return G, h


def gd_reference(A, b, x0, eta, steps: int, *, digits: int = 50, lam=0, return_mp: bool = False):
    """High-precision (ridge) GD iterates x_0..x_steps, rounded to float64.

    Computes ``x_{k+1} = x_k - eta * (A^T (A x_k - b) + lam * x_k)`` (seed 000
    eq. (3); seed 001 eqs. (35)-(36) for ``lam != 0``) in ``gmpy2.mpfr`` at
    ``working_precision(digits)`` bits, starting from the float inputs converted
    exactly.

    Fast algorithm: per problem it precomputes once (in mpfr; ``A^T A`` and ``A^T b`` of float
    inputs exactly, then rounded once: :func:`_normal_equations`)

        M = I - eta * (A^T A + lam I),   c = eta * A^T b,

    and then iterates ``x_{k+1} = M x_k + c`` (a D x D matvec per step, batched
    over problems with ``numpy.matmul`` on object arrays of mpfr).  This
    rearrangement is an identity in exact arithmetic; in floating point at
    ``prec`` bits (unit roundoff u = 2**-prec) each variant commits O((N + D) u)
    relative rounding per step, so the fast and the literal iterates
    (:func:`gd_reference_direct`) differ by about ``steps * (N + D) * u`` relative
    -- ~1e-50 at the default 50 digits, some 34 orders of magnitude below float64
    resolution (they are tested to agree to 1e-40 at 60 digits).

    This returns every iterate; :func:`gd_reference_iter` streams the same
    numbers one step at a time (memory flat in ``steps``).

    Parameters
    ----------
    A : (B, N, D) or (N, D) array (float16/32/64, int, or object of exact numbers).
    b : (B, N) or (N,).
    x0 : (B, D) or (D,), or None for zeros.
    eta, lam : scalar or per-problem sequence of length B (float / int / Fraction /
        mpq / mpfr; see module docstring for how each is converted).
    steps : number of GD steps (>= 0).
    digits : decimal digits of working precision (>= 1; never below 53 + guard bits).
    return_mp : also return the object array of mpfr iterates.

    Returns
    -------
    float64 array of shape (steps + 1, B, D) ((steps + 1, D) for unbatched input),
    and with ``return_mp=True`` the tuple ``(floats, mpfr_object_array)``.
    """
    return _collect(*_gd_stream(A, b, x0, eta, steps, digits, lam, False, True), return_mp)


def mpfr_problem(A, b, x0, eta, lam):
    """A, b (as a column), x0 (as a column), eta and lam as mpfr arrays in the current context."""
    B = A.shape[0]
    return (_to_mpfr_current(A, "A"), _to_mpfr_current(b, "b")[:, :, None],
            _to_mpfr_current(x0, "x0")[:, :, None], _step_param(eta, B, "eta"), _step_param(lam, B, "lam"))


def gd_reference_direct(A, b, x0, eta, steps: int, *, digits: int = 50, lam=0, return_mp: bool = False):
    """Same as :func:`gd_reference` but evaluating the update literally each step.

    ``r = A x_k - b``, ``g = A^T r + lam * x_k``, ``x_{k+1} = x_k - eta * g`` in
    mpfr at ``working_precision(digits)``; no algebraic rearrangement.  About
    2N/D times slower than :func:`gd_reference`; used to cross-check it.
    (:func:`gd_reference_iter` with ``direct=True`` streams it.)
    """
    return _collect(*_gd_stream(A, b, x0, eta, steps, digits, lam, True, True), return_mp)


# ----------------------------------------------------------------------------
# precision escalation
# ----------------------------------------------------------------------------


def _float_part(result) -> np.ndarray:
    if isinstance(result, tuple):
        result = result[0]
    return np.asarray(result)


def stable_reference(fn: Callable[..., Any], *args, digits: int = 50, max_digits: int = 400, **kw):
    """Raise the precision until the float result stops changing.

    Calls ``fn(*args, digits=d, **kw)`` for ``d = digits, 2*digits, 4*digits, ...``
    (the last one capped at ``max_digits``) until two successive results are
    identical float arrays (``np.array_equal``, NaNs equal; for tuple results,
    e.g. ``return_mp=True``, the first element is compared).  Returns
    ``(result, digits_used)`` where ``result`` is the output of the *higher*
    precision of the agreeing pair and ``digits_used`` its digits
    (so ``digits_used > digits``).

    Raises RuntimeError if no two successive results agree up to ``max_digits``.
    """
    digits = check_int("digits", digits, 1)
    max_digits = check_int("max_digits", max_digits, 1)
    if max_digits <= digits:
        raise ValueError(f"max_digits must be > digits, got max_digits={max_digits}, digits={digits}")
    d = digits
    prev = fn(*args, digits=d, **kw)
    while d < max_digits:
        d_next = min(2 * d, max_digits)
        cur = fn(*args, digits=d_next, **kw)
        if np.array_equal(_float_part(prev), _float_part(cur), equal_nan=True):
            return cur, d_next
        prev, d = cur, d_next
    raise RuntimeError(f"stable_reference: results still changing at max_digits={max_digits}")


# ----------------------------------------------------------------------------
# least-squares / ridge solution of the stored float data
# ----------------------------------------------------------------------------


def _solve_small(G: list, h: list) -> list:
    """Gaussian elimination with largest-magnitude pivoting on lists (mpq or mpfr)."""
    n = len(h)
    G = [row[:] for row in G]
    h = h[:]
    for k in range(n):
        p = max(range(k, n), key=lambda i: abs(G[i][k]))
        if G[p][k] == 0:
            raise np.linalg.LinAlgError("lstsq_solution: A^T A + lam I is singular")
        if p != k:
            G[k], G[p] = G[p], G[k]
            h[k], h[p] = h[p], h[k]
        piv = G[k][k]
        for i in range(k + 1, n):
            f = G[i][k] / piv
            if f != 0:
                Gi, Gk = G[i], G[k]
                for j in range(k + 1, n):
                    Gi[j] = Gi[j] - f * Gk[j]
                h[i] = h[i] - f * h[k]
    x = [None] * n
    for i in range(n - 1, -1, -1):
        s = h[i]
        for j in range(i + 1, n):
            s = s - G[i][j] * x[j]
        x[i] = s / G[i][i]
    return x


def _fmpq_to_float(q) -> float:
    """A python-flint fmpq correctly rounded to float64."""
    return _rational_to_float(int(q.p), int(q.q))


def _rational_to_float(num: int, den: int) -> float:
    """``num / den`` correctly rounded to float64 (overflow: a signed infinity)."""
    try:
        return num / den  # CPython int true division is correctly rounded
    except OverflowError:
        return math.copysign(math.inf, num)


def _to_mpq(v, name: str):
    if isinstance(v, bool) or isinstance(v, np.bool_):
        raise ValueError(f"{name}: booleans are not numbers here, got {v!r}")
    if isinstance(v, Fraction):
        return gmpy2.mpq(v.numerator, v.denominator)
    if isinstance(v, (float, np.floating)):
        if not math.isfinite(float(v)):
            raise ValueError(f"{name} must be finite, got {v!r}")
        return gmpy2.mpq(float(v))
    if isinstance(v, numbers.Integral):
        return gmpy2.mpq(int(v))
    if isinstance(v, (gmpy2.mpq, gmpy2.mpz, gmpy2.mpfr)):
        if isinstance(v, gmpy2.mpfr) and not gmpy2.is_finite(v):
            raise ValueError(f"{name} must be finite, got {v!r}")
        return gmpy2.mpq(v)
    raise ValueError(f"{name}: unsupported scalar type {type(v).__name__}")


def lstsq_solution(A, b, digits: int | None = None, *, lam=0) -> np.ndarray:
    """Least-squares (ridge if ``lam != 0``) solution of the *stored* float data.

    Returns ``x* = (A^T A + lam I)^{-1} A^T b`` for the float arrays ``A``, ``b``
    exactly as given (the fixed point of the GD / ridge-GD iteration of
    :func:`gd_reference`), rounded to float64; shape (B, D) (or (D,) for
    unbatched input).

    This is *not* the stored ``x_true`` of :func:`numerics.problems.sample_ls`:
    there ``b = A @ x_true`` was rounded to float64, so ``x_true`` solves the
    rounded problem only up to ~1e-16 relative (times kappa).  Use this function
    for "error against the true solution" at precisions near float64 resolution.

    digits=None (default): exact rational arithmetic on the exactly converted inputs (the normal
    equations formed and solved exactly: python-flint's ``fmpq_mat`` from D = 16, Gaussian
    elimination on ``gmpy2.mpq`` below), then one correct rounding to float64.
    digits=int: normal equations solved in mpfr at ``working_precision(digits)``
    with partial pivoting (faster for large batches; use with
    :func:`stable_reference` if correct rounding matters).

    Raises numpy.linalg.LinAlgError if ``A^T A + lam I`` is singular.
    """
    A = np.asarray(A)
    b = np.asarray(b)
    squeeze = A.ndim == 2
    if squeeze:
        A, b = A[None], b[None]
    if A.ndim != 3:
        raise ValueError(f"A: expected shape (B, N, D) or (N, D), got {A.shape}")
    B, N, D = A.shape
    if b.shape != (B, N):
        raise ValueError(f"b: expected shape {(B, N)}, got {b.shape}")
    out = np.empty((B, D), dtype=np.float64)
    if digits is None:
        for arr, name in ((A, "A"), (b, "b")):
            if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
                raise ValueError(f"{name} must be finite")
        if D < _FLINT_FROM_D:  # small systems, many of them: Gaussian elimination on gmpy2.mpq is faster
            Aq = np.array([_to_mpq(v, "A") for v in A.ravel().tolist()] or [], dtype=object).reshape(A.shape)
            bq = np.array([_to_mpq(v, "b") for v in b.ravel().tolist()] or [], dtype=object).reshape(B, N, 1)
            lam_q = _to_mpq(lam, "lam")
            At = Aq.transpose(0, 2, 1)
            G, h = np.matmul(At, Aq), np.matmul(At, bq)[:, :, 0]
            for p in range(B):
                Gp = G[p].tolist()
                for i in range(D):
                    Gp[i][i] = Gp[i][i] + lam_q
                out[p] = [_rational_to_float(int(v.numerator), int(v.denominator))
                          for v in _solve_small(Gp, h[p].tolist())]
            return out[0] if squeeze else out
        # the same exact rationals as Gaussian elimination on gmpy2.mpq (_solve_small) gives -- the
        # solution of a nonsingular system is unique -- solved by python-flint's fmpq_mat (fraction-free,
        # multimodular): 512 x 128 in ~0.2 s instead of ~30 s
        import flint

        def fmpq(v, name):
            q = _to_mpq(v, name)
            return flint.fmpq(int(q.numerator), int(q.denominator))

        Aq = [fmpq(v, "A") for v in A.ravel().tolist()]
        bq = [fmpq(v, "b") for v in b.ravel().tolist()]
        lam_q = fmpq(lam, "lam")
        for p in range(B):
            Ap = flint.fmpq_mat(N, D, Aq[p * N * D:(p + 1) * N * D])
            At = Ap.transpose()
            G = At * Ap
            for i in range(D):
                G[i, i] = G[i, i] + lam_q
            try:
                x = G.solve(At * flint.fmpq_mat(N, 1, bq[p * N:(p + 1) * N]))
            except ZeroDivisionError:
                raise np.linalg.LinAlgError("lstsq_solution: A^T A + lam I is singular") from None
            out[p] = [_fmpq_to_float(x[i, 0]) for i in range(D)]
    else:
        prec = working_precision(digits)
        with gmpy2.context(precision=prec):
            Am = _to_mpfr_current(A, "A")
            bm = _to_mpfr_current(b, "b")[:, :, None]
            lam_m = _scalar_to_mpfr(lam, "lam")
            At = Am.transpose(0, 2, 1)
            G = np.matmul(At, Am)
            h = np.matmul(At, bm)[:, :, 0]
            sols = np.empty((B, D), dtype=object)
            for p in range(B):
                Gp = G[p].tolist()
                for i in range(D):
                    Gp[i][i] = Gp[i][i] + lam_m
                sols[p] = _solve_small(Gp, h[p].tolist())
        out = from_mpfr_array(sols)
    return out[0] if squeeze else out
