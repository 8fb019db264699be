"""Shared by the GD construction tests (BaseConv, LSA/ELSA): the sizes of an exact run and the
check that k body steps are k exact (ridge) GD steps ``x <- x - eta (A^T (A x - b) + lam x)``."""
from fractions import Fraction

import numpy as np
from hypothesis import strategies as st

from constructions.lsq import gd_step
from verify.prover.proof import run_checked

from tests.support import F, gd_by_hand


def draw_run_sizes(data) -> tuple[int, int, int]:
    """N (1..4), D (1..3) and the number of steps k (0..3) of an exact run."""
    return (data.draw(st.integers(1, 4), label="N"), data.draw(st.integers(1, 3), label="D"),
            data.draw(st.integers(0, 3), label="k"))


def assert_runs_k_gd_steps(con, v: dict, k: int, eta, lam=0):
    """``con`` run exactly for k steps on the problem ``v`` (``run_checked``) equals k steps of
    the library's exact GD (``constructions.lsq.gd_step``) and of the step written by hand
    (``tests.support.gd_by_hand``): the state's x, the readout's x and its prediction q . x."""
    S, vk = run_checked(con, v, k)
    w, h = v, v
    for _ in range(k):
        w, h = gd_step(w, eta, lam), gd_by_hand(h, eta, lam)
    assert F(vk["x"]) == F(w["x"]) == F(h["x"])
    out = con.readout(S)
    assert F(out["x"]) == F(w["x"])
    pred = sum(Fraction(a) * Fraction(b) for a, b in zip(v["q"], w["x"]))
    assert Fraction(np.asarray(out["prediction"]).item()) == pred
