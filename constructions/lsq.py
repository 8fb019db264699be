"""Least-squares problems as construction variables, for any scalar type.

Variables of one problem: ``A`` (n, d), ``b`` (n,), ``x`` (d,) the current
iterate, ``q`` (d,) a query row (the prediction read-out is ``q^T x``).
Float variables carry one leading batch axis.  The step is

    x <- x - eta * (A^T (A x - b) + lam * x)

(seed 000 eq. (3) for lam = 0; seed 001 eq. (35)-(36) for ridge).
"""
from __future__ import annotations

import numpy as np

from . import ops

LS_VARIABLES = lambda n, d: {"A": (n, d), "b": (n,), "x": (d,), "q": (d,)}  # noqa: E731
#: the per-token variables: row i of A and b_i form token i's group (``Construction.token_groups``)
LS_GROUPS = ("A", "b")


def _col(v):
    return np.asarray(v, dtype=object).reshape(-1, 1)


def matvec(M, x):
    """``M x`` for exact 2-D/1-D or batched float arrays."""
    if M.dtype == object:
        return ops.mm(M, _col(x))[:, 0]
    return np.einsum("...ij,...j->...i", M, x)


def rmatvec(M, y):
    """``M^T y``."""
    if M.dtype == object:
        return ops.mm(ops.transpose(M), _col(y))[:, 0]
    return np.einsum("...ij,...i->...j", M, y)


def dot(u, w):
    if np.asarray(u).dtype == object:
        return ops.mm(np.asarray(u, dtype=object).reshape(1, -1), _col(w))[0, 0]
    return np.einsum("...i,...i->...", u, w)


def gradient(A, b, x):
    """``A^T (A x - b)`` (seed 000 eq. (3); seed 001 eq. (34) with lam = 0)."""
    return rmatvec(A, matvec(A, x) - b)


def gd_step(v: dict, eta, lam=0) -> dict:
    g = gradient(v["A"], v["b"], v["x"])
    if not (isinstance(lam, int) and lam == 0):
        g = g + v["x"] * lam
    out = dict(v)
    out["x"] = v["x"] - g * eta  # array first: a ring scalar on the left would not broadcast
    return out
