"""Ridge-regression gradient descent with LSA and ELSA, seed 001 Sec. 3.4-3.5.

Both implement seed 001 eq. (35)-(36):
``w <- w - eta (X^T X w - X^T y + lam w)`` (lam = 0: least squares; in the
toolkit's least-squares names X = A, y = b, w = x, u = q).

``gd-lsa`` (Sec. 3.4): the state is eq. (37),

    H = [ r X^T   0      0   r l I_d   u   w ]      (d+1) x (2n+d+3)
        [ 0       r y^T  1   0         0   0 ]

with r = sqrt(eta), l = sqrt(lam).  One module per step is a 3-head LSA with a
skip connection (eq. 38-49); the output module adds u^T w at the bottom-right
entry (eq. 51-55).  Depth ``1 + k``.  eta and lam must be squares of rationals
for exact weights (e.g. eta = 1/16).

``gd-elsa`` (Sec. 3.5): the state is eq. (56),

    H = [ X^T  Y0^T  lam I_d  r I_d  u  0  w ]      d x (2n+2d+3),  Y0 = [0_{n,d-1} y]

One module per step is two sequential multi-head ELSA stages and a skip
connection (eq. 57-78): stage 1 (4 heads) gives [0 .. -eta I_d 0 0 Delta w],
stage 2 gives -eta Delta w in the last column.  The output module (eq. 80-86)
writes u^T w into the zero column.  Depth ``1 + k``.  The paper's all-zero
heads (stage 2 heads 2-4) are omitted; they add nothing.
"""
from __future__ import annotations

import functools
from fractions import Fraction

import numpy as np

from . import ops
from .base import Construction, batch_ndim, exact, exact_sqrt, new_state
from .layers import ELSA, LSA, ELSAHead, LSAHead
from .layout import Layout
from .lsq import LS_GROUPS, LS_VARIABLES, dot, gd_step
from .weights import mask_move, selector

REFERENCE_LSA = "seed 001 Sec. 3.4, eq. (35)-(36), (37)-(55); layer eq. (8), (38)-(39)"
REFERENCE_ELSA = "seed 001 Sec. 3.5, eq. (35)-(36), (56)-(86); layer eq. (16), (57)-(59)"


def _Z(n):
    return ops.zeros_like_object((n, n))


def _bias(m, n, entries):
    B = ops.zeros_like_object((m, n))
    for (i, j), val in entries.items():
        B[i, j] = val
    return B


def _params(eta, lam, sqrt_eta, sqrt_lam, need_sqrt_lam):
    """User-facing (eta, lam) or internal square roots -> internal parameters (both given: they
    must agree exactly, else a ValueError rather than one of them silently ignored)."""
    for name, v, root in (("eta", eta, sqrt_eta), ("lam", lam, sqrt_lam)):
        numbers = (int, str, Fraction)
        if isinstance(v, numbers) and isinstance(root, numbers) and exact(root) * exact(root) != exact(v):
            raise ValueError(f"{name} = {v} and sqrt_{name} = {root} disagree ({root}^2 = {exact(root) ** 2}); "
                             f"give one of them")
    if sqrt_eta is None:
        sqrt_eta = exact_sqrt(exact("1/16") if eta is None else exact(eta), "eta")
    if need_sqrt_lam:
        if sqrt_lam is None:
            sqrt_lam = exact_sqrt(exact(0) if lam is None else exact(lam), "lam")
        return sqrt_eta, sqrt_lam
    lam = exact(0) if lam is None else (lam if not isinstance(lam, (str, float, int)) else exact(lam))
    return sqrt_eta, lam


class _AttentionGD(Construction):
    """What gd-lsa and gd-elsa share: no prologue (the input state is the state), the query u
    and the iterate w as columns, and the prediction u^T w in the region ``PRED``."""
    PRED = "pred"

    def input_state(self, v):
        return self.state(v)

    def _put_query_and_iterate(self, H, v):
        self.layout.put(H, "u", np.asarray(v["q"])[..., :, None])
        self.layout.put(H, "w", np.asarray(v["x"])[..., :, None])
        return H

    def final_state(self, v):
        H = self.state(v)
        self.layout.put(H, self.PRED, dot(v["q"], v["x"]))
        return H

    def readout(self, state):
        lay = self.layout
        return {"x": lay.get(state, "w")[..., :, 0], "prediction": lay.get(state, self.PRED)[..., 0, 0]}


# ------------------------------------------------------------------------ LSA

class GDLSA(_AttentionGD):
    def step(self, v):
        r, l = self.params["sqrt_eta"], self.params["sqrt_lam"]
        return gd_step(v, r * r, l * l)

    def state(self, v):
        n, d = self.variables["A"]
        r, l = self.params["sqrt_eta"], self.params["sqrt_lam"]
        lay = self.layout
        H = new_state(lay, np.asarray(v["A"]), batch_ndim(v, self.variables))
        s = r if H.dtype == object else float(r)  # float data: x * float(r) in numpy, what x * Fraction computes
        lay.put(H, "X^T", ops.transpose(np.asarray(v["A"])) * s)
        lay.put(H, "y^T", (np.asarray(v["b"]) * s)[..., None, :])
        lay.put(H, "one", 1)
        for j in range(d):
            H[(...,) + (j, lay.cols("lamI")[j])] = r * l
        return self._put_query_and_iterate(H, v)


def gd_lsa(n: int = 20, d: int = 5, *, eta=None, lam=None, sqrt_eta=None, sqrt_lam=None) -> GDLSA:
    """Seed 001 Sec. 3.4: ridge GD with a 3-head LSA + skip per step."""
    if n < 1 or d < 1:
        raise ValueError(f"need n >= 1 and d >= 1, got n={n}, d={d}")
    r, l = _params(eta, lam, sqrt_eta, sqrt_lam, need_sqrt_lam=True)
    s = 2 * n + d + 3
    cX, cY, c1, cL, cu, cw = 0, n, 2 * n, 2 * n + 1, 2 * n + d + 1, 2 * n + d + 2
    lay = Layout((d + 1, s), row_axis="rows of H (features + label row)", col_axis="columns of H")
    lay.add("X^T", (0, d), (cX, cX + n), "sqrt(eta) X^T")
    lay.add("y^T", (d, d + 1), (cY, cY + n), "sqrt(eta) y^T")
    lay.add("one", (d, d + 1), (c1, c1 + 1), "the constant 1")
    lay.add("lamI", (0, d), (cL, cL + d), "sqrt(eta) sqrt(lam) I_d")
    lay.add("u", (0, d), (cu, cu + 1), "query u")
    lay.add("w", (0, d), (cw, cw + 1), "iterate w_t")
    lay.add("pred", (d, d + 1), (cw, cw + 1), "prediction u^T w (after the output module)")

    # eq. (42)-(48): three heads
    W11, W12 = mask_move(s, range(cY, cY + n), range(n), [c1], [s - 1])        # sqrt(eta) y
    W21, W22 = mask_move(s, range(n), range(n), [cw], [s - 1])                 # sqrt(eta) X w
    W31, W32 = mask_move(s, range(cL, cL + d), range(d), [cw], [s - 1])        # sqrt(eta lam) w
    W13 = selector(s, range(n), range(n), 1)                                   # eq. (45)
    W23 = selector(s, range(n), range(n), -1)
    W33 = selector(s, range(cL, cL + d), range(d), -1)
    body = LSA([LSAHead(W11, W12, W13), LSAHead(W21, W22, W23), LSAHead(W31, W32, W33)], residual=True)
    # eq. (51)-(54): u^T w to the bottom-right entry
    E1, E2 = mask_move(s, [cu], [s - 1], [cw], [s - 1])
    E3 = selector(s, [c1], [s - 1], 1)
    out = LSA([LSAHead(E1, E2, E3)], residual=True)
    return GDLSA(
        name="gd-lsa", reference=REFERENCE_LSA, layout=lay, prologue=[], body=[body], epilogue=[out],
        params={"sqrt_eta": r, "sqrt_lam": l}, variables=LS_VARIABLES(n, d), token_groups=LS_GROUPS, carried=("x",),
        rebuild=functools.partial(gd_lsa, n, d), symbolic_params=("sqrt_eta", "sqrt_lam"),
        notes="state (d+1) x (2n+d+3); 3 heads per step")


# ------------------------------------------------------------------------ ELSA

class GDELSA(_AttentionGD):
    PRED = "z"

    def step(self, v):
        r, lam = self.params["sqrt_eta"], self.params["lam"]
        return gd_step(v, r * r, lam)

    def state(self, v):
        n, d = self.variables["A"]
        r, lam = self.params["sqrt_eta"], self.params["lam"]
        lay = self.layout
        H = new_state(lay, np.asarray(v["A"]), batch_ndim(v, self.variables))
        lay.put(H, "X^T", ops.transpose(np.asarray(v["A"])))
        lay.put(H, "Y0^T", np.asarray(v["b"])[..., None, :])
        for j in range(d):
            H[(...,) + (j, lay.cols("lamI")[j])] = lam
            H[(...,) + (j, lay.cols("etaI")[j])] = r
        return self._put_query_and_iterate(H, v)


def gd_elsa(n: int = 20, d: int = 5, *, eta=None, lam=None, sqrt_eta=None) -> GDELSA:
    """Seed 001 Sec. 3.5: ridge GD with two 4-head ELSA stages + skip per step."""
    if n < 1 or d < 1:
        raise ValueError(f"need n >= 1 and d >= 1, got n={n}, d={d}")
    r, lam = _params(eta, lam, sqrt_eta, None, need_sqrt_lam=False)
    s = 2 * n + 2 * d + 3
    cX, cY, cL, cE, cu, cz, cw = 0, n, 2 * n, 2 * n + d, 2 * n + 2 * d, 2 * n + 2 * d + 1, 2 * n + 2 * d + 2
    lay = Layout((d, s), row_axis="rows of H", col_axis="columns of H")
    lay.add("X^T", (0, d), (cX, cX + n), "X^T")
    lay.add("Y0^T", (d - 1, d), (cY, cY + n), "y^T, the last row of Y0^T = [0_{n,d-1} y]^T")
    lay.add("lamI", (0, d), (cL, cL + d), "lam I_d")
    lay.add("etaI", (0, d), (cE, cE + d), "sqrt(eta) I_d")
    lay.add("u", (0, d), (cu, cu + 1), "query u")
    lay.add("z", (0, 1), (cz, cz + 1), "prediction slot (row 0 of the zero column)")
    lay.add("w", (0, d), (cw, cw + 1), "iterate w_t")
    Zs = lambda: _Z(s)  # noqa: E731
    Bz = lambda: ops.zeros_like_object((d, s))  # noqa: E731
    first_rows = _bias(d, s, {(j, j): 1 for j in range(d)})  # [I_d 0]

    # stage 1, eq. (61)-(74)
    W11, W12 = mask_move(s, range(n), range(n), [cw], [s - 1])
    h1 = ELSAHead(W11, Bz(), W12, Bz(), selector(s, range(n), range(n)), Bz())                  # X^T X w
    W21, W22 = mask_move(s, range(cL, cL + d), range(d), [cw], [s - 1])
    h2 = ELSAHead(W21, Bz(), W22, Bz(), Zs(), first_rows)                                        # lam w
    W33 = selector(s, range(cX, cX + n), range(s - n, s))                                       # eq. (68)
    W31 = selector(s, range(cY, cY + n), range(s - n, s))
    h3 = ELSAHead(W31, Bz(), Zs(), _bias(d, s, {(j, s - d + j): -1 for j in range(d)}), W33, Bz())  # -X^T y
    W41, W42 = mask_move(s, range(cE, cE + d), range(d), range(cE, cE + d), range(cE, cE + d))
    h4 = ELSAHead(W41, Bz(), W42, Bz(), Zs(), _bias(d, s, {(j, j): -1 for j in range(d)}))      # -eta I_d
    # stage 2, eq. (75)-(77)
    V1, V2 = mask_move(s, range(cE, cE + d), range(d), [cw], [s - 1])
    g1 = ELSAHead(V1, Bz(), V2, Bz(), Zs(), first_rows)                                          # -eta Delta w
    body = ELSA([[h1, h2, h3, h4], [g1]], residual=True)

    # output module, eq. (80)-(85): u^T w into z, then Property 3 (identity)
    O1, O2 = mask_move(s, [cu], [0], [cw], [cz])
    o1 = ELSAHead(O1, Bz(), O2, Bz(), Zs(), _bias(d, s, {(0, 0): 1}))
    ident = ELSAHead(Zs(), first_rows, selector(s, range(s), range(s)), Bz(), Zs(), first_rows)
    out = ELSA([[o1], [ident]], residual=True)
    return GDELSA(
        name="gd-elsa", reference=REFERENCE_ELSA, layout=lay, prologue=[], body=[body], epilogue=[out],
        params={"sqrt_eta": r, "lam": lam}, variables=LS_VARIABLES(n, d), token_groups=LS_GROUPS, carried=("x",),
        rebuild=functools.partial(gd_elsa, n, d), symbolic_params=("sqrt_eta", "lam"),
        notes="state d x (2n+2d+3); module = stage of 4 heads, stage of 1 head, skip")
