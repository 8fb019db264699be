"""Roundoff metrics: MSE, relative error, bits of error, construction overhead, data drift.

Every function takes plain numpy arrays.  Values computed in a narrow format
(float16, bfloat16, float32) are passed as their exact float64 values (what
``Backend.to_numpy64`` returns); references are float64 arrays or object
arrays of ``gmpy2.mpfr`` (high precision, from ``numerics.reference``).

Bits of error (Herbie / FPBench style)
--------------------------------------
``bits = log2(1 + ulps)`` where ``ulps`` is the number of representable values
of the *run's* format between the computed value and the correctly rounded
reference (Schkufza et al. 2014; Panchekha et al. 2015, "Automatically improving
accuracy for floating point expressions", Sec. 4).  0 bits: the result is the
correctly rounded one; 1 bit: one ulp off; the maximum is the format's width
(64, 32 or 16), which is also what a NaN scores against a non-NaN reference.
``+0`` and ``-0`` are the same point; ``inf`` is one step past the largest
finite value, as in the bit-pattern ordering.

Correct rounding of a reference to a narrow format goes through gmpy2 with the
format's precision, exponent range and subnormals (:func:`round_to`), so it is
a single round-to-nearest-even from the high-precision value, never a double
rounding through float64 or float32.
"""
from __future__ import annotations

import math

import numpy as np

from constructions.base import FLOAT_FORMATS, Format

__all__ = [
    "FORMATS", "Format", "fmt", "round_to", "representable", "ulp_distance", "bits_of_error",
    "mse", "max_rel_err", "normwise_rel_err", "overhead", "data_deviation", "finite_or_none",
]


#: the float formats by name: the one table, ``constructions.base.FLOAT_FORMATS``
FORMATS: dict[str, Format] = FLOAT_FORMATS


def fmt(dtype) -> Format:
    """The :class:`Format` of a dtype name, numpy dtype or torch dtype."""
    name = str(dtype).replace("torch.", "")
    if name not in FORMATS:
        try:
            name = np.dtype(dtype).name
        except TypeError:
            pass
    if name not in FORMATS:
        raise ValueError(f"unknown float format {dtype!r}; choose one of {', '.join(FORMATS)}")
    return FORMATS[name]


# ---------------------------------------------------------------- rounding / representability

def round_to(values, dtype) -> np.ndarray:
    """Correctly round ``values`` (float array, or object array of mpfr / int /
    Fraction-like) to ``dtype``; returns the rounded values as float64.

    One round-to-nearest-even from the given value, with the format's
    subnormals and overflow to +-inf (:meth:`constructions.base.Format.round`).
    """
    a = np.asarray(values)
    return np.array(fmt(dtype).round(a.reshape(-1).tolist()), dtype=np.float64).reshape(a.shape)


def _patterns(x: np.ndarray, f: Format) -> np.ndarray:
    """Bit patterns (as uint64) of float64 values exactly representable in ``f``."""
    x = np.asarray(x, dtype=np.float64)
    if f.name == "float64":
        return x.view(np.uint64).copy()
    if f.name == "float32":
        y = x.astype(np.float32)
        ok = (y.astype(np.float64) == x) | np.isnan(x)
        bits = y.view(np.uint32).astype(np.uint64)
    elif f.name == "float16":
        with np.errstate(over="ignore"):
            y = x.astype(np.float16)
        ok = (y.astype(np.float64) == x) | np.isnan(x)
        bits = y.view(np.uint16).astype(np.uint64)
    else:  # bfloat16: the top half of a float32
        y = x.astype(np.float32)
        b32 = y.view(np.uint32)
        ok = ((y.astype(np.float64) == x) & ((b32 & 0xFFFF) == 0)) | np.isnan(x)
        bits = (b32 >> 16).astype(np.uint64)
    if not np.all(ok):
        bad = np.asarray(x)[~ok].ravel()[0]
        raise ValueError(f"value {bad!r} is not representable in {f.name}; round it first (metrics.round_to)")
    return bits


def representable(x, dtype) -> bool:
    """True if every entry of the float64 array ``x`` is a ``dtype`` value."""
    try:
        _patterns(np.asarray(x, dtype=np.float64), fmt(dtype))
        return True
    except ValueError:
        return False


def ulp_distance(x, ref, dtype) -> np.ndarray:
    """Number of ``dtype`` values between ``x`` and ``ref`` (both representable
    in ``dtype``), as float64; ``+0``/``-0`` coincide, NaN anywhere gives NaN."""
    f = fmt(dtype)
    x = np.asarray(x, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    x, ref = np.broadcast_arrays(x, ref)
    bx, br = _patterns(x, f), _patterns(ref, f)
    shift = np.uint64(f.width - 1)
    mask = np.uint64((1 << (f.width - 1)) - 1)
    sx, sr = bx >> shift, br >> shift
    mx, mr = bx & mask, br & mask
    same = sx == sr
    d_same = np.maximum(mx, mr) - np.minimum(mx, mr)
    d_diff = mx + mr  # < 2^64: each magnitude < 2^63
    d = np.where(same, d_same, d_diff).astype(np.float64)
    return np.where(np.isnan(x) | np.isnan(ref), np.nan, d)


def bits_of_error(x, ref, dtype, *, rounded: bool = False) -> np.ndarray:
    """Herbie's bits of error ``log2(1 + ulps)`` of ``x`` (run in ``dtype``) against
    ``ref``.  ``ref`` is rounded correctly to ``dtype`` first unless
    ``rounded=True`` says it already is.  NaN against a non-NaN reference scores
    the format's width; NaN against NaN scores 0."""
    f = fmt(dtype)
    x = np.asarray(x, dtype=np.float64)
    r = np.asarray(ref, dtype=np.float64) if rounded else round_to(ref, f.name)
    d = ulp_distance(x, r, f.name)
    bits = np.log2(1.0 + d)
    xn, rn = np.isnan(x), np.isnan(r)
    bits = np.where(xn & rn, 0.0, bits)
    return np.where(xn ^ rn, float(f.width), bits)


# ---------------------------------------------------------------- error statistics

def mse(x, ref, axis=None):
    """Mean squared error; NaN/inf propagate (a run that overflowed has no MSE)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.mean((np.asarray(x, np.float64) - np.asarray(ref, np.float64)) ** 2, axis=axis)


def _rel(x, ref, err=None):
    x = np.asarray(x, np.float64)
    ref = np.asarray(ref, np.float64)
    err = np.abs(x - ref) if err is None else np.abs(np.asarray(err, np.float64))
    den = np.abs(ref)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = err / den
    # 0/0: both exactly zero, no error; e/0 with e > 0: infinitely wrong
    return np.where((den == 0) & (err == 0), 0.0, np.where(den == 0, np.inf, r))


def max_rel_err(x, ref, axis=None, *, err=None):
    """Largest entry-wise relative error ``|x - ref| / |ref|`` (0 where both are 0,
    inf where only the reference is 0).  NaN propagates.  ``err``, if given, is
    ``x - ref`` computed more accurately (e.g. against an mpfr reference of
    which ``ref`` is the float64 rounding)."""
    r = _rel(x, ref, err)
    return np.max(r, axis=axis)


def normwise_rel_err(x, ref, axis=None):
    """``max |x - ref| / max |ref|`` over ``axis`` (all axes by default): the
    relative error of a whole state, insensitive to its structural zeros."""
    x = np.asarray(x, np.float64)
    ref = np.asarray(ref, np.float64)
    num = np.max(np.abs(x - ref), axis=axis)
    den = np.max(np.abs(ref), axis=axis)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = num / den
    return np.where((den == 0) & (num == 0), 0.0, np.where(den == 0, np.inf, out))


def overhead(construction_err, plain_err):
    """Ratio of the construction's error to plain GD's error in the same dtype.

    1 means the construction adds nothing beyond the algorithm's own roundoff.
    0/0 (both exact) is 1; e/0 with e > 0 is inf; NaN propagates.
    """
    c = np.asarray(construction_err, np.float64)
    p = np.asarray(plain_err, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = c / p
    r = np.where((p == 0) & (c == 0), 1.0, np.where(p == 0, np.inf, r))
    return r if r.ndim else float(r)


def data_deviation(now, initial, scale=1.0) -> dict:
    """How far a carried data block moved from its initial value.

    ``max_abs`` is ``max |now - initial| / scale`` (in the units of the data
    itself when the state stores ``scale * data``, e.g. sqrt(eta) X^T for
    LSA); ``max_rel`` is ``max |now - initial| / max |initial|``.
    """
    now = np.asarray(now, np.float64)
    initial = np.asarray(initial, np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        d = float(np.max(np.abs(now - initial))) if now.size else 0.0
    top = float(np.max(np.abs(initial))) if initial.size else 0.0
    rel = 0.0 if d == 0 else (d / top if top > 0 else math.inf)
    return {"max_abs": d / float(scale), "max_rel": rel}


def finite_or_none(v):
    """JSON helper: a float, or None for NaN/inf (JSON has neither)."""
    if v is None:
        return None
    v = float(v)
    return v if math.isfinite(v) else None
