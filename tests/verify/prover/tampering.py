"""A construction's sections with one functional change, shared by the prover's tests."""
from __future__ import annotations

import numpy as np


def tampered(con) -> dict:
    """``con``'s sections with the body's first layer copied and its first nonzero ``W_out`` entry doubled."""
    secs = {sec: list(getattr(con, sec)) for sec in ("prologue", "body", "epilogue")}
    L = secs["body"][0].map(lambda A: np.asarray(A, dtype=object).copy())
    L.W_out[tuple(np.argwhere(L.W_out != 0)[0])] *= 2
    secs["body"][0] = L
    return secs
