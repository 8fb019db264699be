"""Seed 000 App. D.2.1: the primitives READ, LINEAR and MULTIPLY as single BaseConv layers.

Each primitive is a one-layer construction (epilogue only) on a state of N
tokens x d channels; its specification is the paper's definition of the
primitive (eq. (20)-(22)).  Rows (tokens) and channels are 0-indexed here;
the paper indexes the positions of READ from 1 (``e_1 ... e_N``) and the
channels of MULTIPLY from 0 (Corollary D.32 uses ``a = 0``).

* ``s000-read``      READ(i, j, a, b), eq. (20): one residual BaseConv layer.
* ``s000-linear``    LINEAR(H), eq. (21): one BaseConv layer, proved for a
  *symbolic* H (every entry of H is a fresh symbol in the proof).
* ``s000-multiply``  MULTIPLY(a, b, d_out), eq. (22): one BaseConv layer.
"""
from __future__ import annotations

import random
from fractions import Fraction

import numpy as np

from constructions import ops
from constructions.base import Construction, FunctionConstruction
from constructions.layout import ChannelAllocator
from constructions.weights import BaseConvBuilder

from . import CatalogueEntry, register


def multiply(n: int = 6, d_out: int = 2) -> FunctionConstruction:
    """MULTIPLY(a=0, b=d_out, d_out), eq. (22): channels [0, d_out) times channels
    [d_out, 2 d_out) into channels [0, d_out); the other channels are zeroed.
    Weights as in the paper: Conv = identity, W_in = proj(a), W_gate = proj(b), W_out = I."""
    al = ChannelAllocator(n)
    al.block("x", d_out, "first factor; the product after the layer")
    al.block("y", d_out, "second factor")
    lay = al.layout()
    B = BaseConvBuilder(lay, causal=True)
    for j in range(d_out):
        B.product(("x", j), gate_src=("y", j), conv_src=("x", j))
        B.w_out(("x", j), ("x", j))

    def spec(v):  # one layer from state(v) = u to f(u)
        u = np.asarray(v["u"], dtype=object)
        out = ops.zeros_like_object(u.shape)
        out[:, :d_out] = u[:, :d_out] * u[:, d_out:2 * d_out]
        return out

    return FunctionConstruction(name="s000-multiply", reference="seed 000 App. D.2.1, eq. (22)", layout=lay,
                                prologue=[], body=[], epilogue=[B.build()], params={}, variables={"u": (n, 2 * d_out)},
                                make_input=lambda v: np.array(v["u"], dtype=object, copy=True), make_final=spec)


register(CatalogueEntry(
    name="s000-multiply", paper="seed 000 App. D.2.1, eq. (22)",
    summary="MULTIPLY primitive: entry-wise product of two channel blocks, one BaseConv layer",
    build=multiply, sizes={"n": 6, "d_out": 2}, claim="1 layer, state N x d (Sec. D.2.1)"))


# =========================================================================== READ

def read_spec(u, i: int, j: int, a: int, b: int):
    """Eq. (20) on the whole state: row ``j``'s channels [a, b) become row ``i``'s,
    every other entry is unchanged."""
    out = np.array(u, dtype=object, copy=True)
    out[j, a:b] = u[i, a:b]
    return out


class Read(Construction):
    """READ(i, j, a, b) on the state ``u`` (N x d); with ``positional="onehot"``
    the state also holds the paper's one-hot positional encodings ``e_k`` (a
    constant N-channel block ``pos``, token k has a 1 in channel k)."""

    def _embed(self, u):
        S = self.layout.new_state()
        self.layout.put(S, "u", np.asarray(u, dtype=object))
        if "pos" in self.layout.regions:
            n = self.variables["u"][0]
            P = np.empty((n, n), dtype=object)
            P.fill(0)
            for k in range(n):
                P[k, k] = 1
            self.layout.put(S, "pos", P)
        return S

    def input_state(self, v):
        return self._embed(v["u"])

    def state(self, v):
        return self._embed(v["u"])

    def final_state(self, v):
        p = self.params
        return self._embed(read_spec(np.asarray(v["u"], dtype=object), p["i"], p["j"], p["a"], p["b"]))

    def step(self, v):
        return v


def read(n: int = 6, d: int = 4, i: int = 1, j: int = 4, a: int = 1, b: int = 3, *,
         positional: str = "bias", conv: str = "auto") -> Read:
    """READ(i, j, a, b), seed 000 App. D.2.1, eq. (20), as ONE BaseConv layer with
    the paper's residual connection: ``y = u + W_out(W_gate(u) * Conv(W_in(u)))``.

    The paper's weights (D.2.1 "Read"):

    * ``Conv(W_in(u))[k, :] = u[k+i-j, :] - u[k, :]``: ``W_in = I`` on the
      channels [a, b) and the filter has tap ``-1`` at lag 0 and ``+1`` at lag
      ``j - i`` (a shift down by ``j - i``).  For ``i < j`` that is a causal
      (linear) convolution; for ``i > j`` the shift runs *up* the sequence, which
      no causal filter can do (output row j of a causal layer only sees rows
      <= j), so the construction uses the circular convolution of length N with
      the tap at lag ``(j - i) mod N`` (``conv="auto"``).  ``conv="causal"``
      forces the paper's own convolution ``u * v = coeff(u(X) v(X) mod X^N)``
      (App. D.1) with the same tap: it is wrong for ``i > j``, see erratum
      ``S000-read-shift-up``.
    * ``W_gate(u)[k, :] = 1`` at ``k = j``, ``0`` elsewhere.  The paper gets
      this from one-hot positional encodings ``e_k`` stored in the input
      (``W_gate(u[k, :]) = u[k, j] 1^D``).  ``positional="bias"`` (default)
      uses this toolkit's position-dependent gate bias ``b_gate[j, a:b] = 1``
      instead (no extra channels: state N x d); ``positional="onehot"``
      stores ``e_k`` in an N-channel block ``pos`` and reads channel ``pos_j``
      through ``W_gate`` exactly as printed (state N x (N + d)).
    * ``W_out = proj(a:b)``.  The paper applies ``W_out`` *after* adding the
      residual, which zeroes the channels outside [a, b) (eq. (20) only
      specifies those channels); here the residual is added outside ``W_out``
      (``BaseConv(residual=True)``), so the channels outside [a, b) pass
      through unchanged, which is what composing READs needs.

    Specification: ``read_spec``: row j, channels [a, b) <- row i; all else unchanged.
    """
    if not (n >= 1 and d >= 1 and 0 <= i < n and 0 <= j < n and 0 <= a < b <= d):
        raise ValueError(f"READ needs 0 <= i, j < n and 0 <= a < b <= d; got n={n}, d={d}, i={i}, j={j}, "
                         f"a={a}, b={b}")
    if positional not in ("bias", "onehot"):
        raise ValueError(f"positional must be 'bias' or 'onehot', got {positional!r}")
    if conv not in ("auto", "causal", "circular"):
        raise ValueError(f"conv must be 'auto', 'causal' or 'circular', got {conv!r}")
    causal = (i <= j) if conv == "auto" else conv == "causal"
    al = ChannelAllocator(n)
    al.block("u", d, "the state u; READ writes row i's channels [a, b) into row j")
    if positional == "onehot":
        al.block("pos", n, "one-hot positional encodings: e_k at token k (constant)")
    lay = al.layout()
    B = BaseConvBuilder(lay, causal=causal, residual=True)
    shift = (j - i) % n
    for c in range(a, b):
        B.w_in(("u", c), ("u", c))
        taps: dict[int, int] = {}
        for s, w in ((0, -1), (shift, 1)):
            taps[s] = taps.get(s, 0) + w
        B.filter(("u", c), taps)
        if positional == "bias":
            B.gate_bias(("u", c), 1, rows=[j])
        else:
            B.w_gate(("pos", j), ("u", c))
        B.w_out(("u", c), ("u", c))
    conv_name = "causal (linear)" if causal else "circular"
    return Read(name="s000-read", reference="seed 000 App. D.2.1, eq. (20)", layout=lay, prologue=[], body=[],
                epilogue=[B.build()], params={"i": i, "j": j, "a": a, "b": b}, variables={"u": (n, d)},
                notes=f"{conv_name} convolution, shift by {j - i} (tap at lag {shift}); gate from "
                      f"{'a row bias' if positional == 'bias' else 'one-hot positional channels'}")


register(CatalogueEntry(
    name="s000-read", paper="seed 000 App. D.2.1, eq. (20)",
    summary="READ(i, j, a, b): copy row i's channels [a, b) into row j, one residual BaseConv layer",
    build=read, sizes={"n": 6, "d": 4, "i": 1, "j": 4, "a": 1, "b": 3},
    claim="1 layer with positional encodings + residual (Sec. D.2.1); the paper's input is N x (N + d) "
          "(e_k stacked on u), here N x d with a row-dependent gate bias"))


# =========================================================================== LINEAR

def random_rational_matrix(rows: int, cols: int, seed: int, *, max_abs: int = 4, max_den: int = 4) -> np.ndarray:
    """A fixed pseudo-random exact rational matrix (entries p/q, |p/q| <= max_abs, q <= max_den)."""
    rng = random.Random(seed)
    M = np.empty((rows, cols), dtype=object)
    for idx in np.ndindex(rows, cols):
        q = rng.randint(1, max_den)
        M[idx] = Fraction(rng.randint(-max_abs * q, max_abs * q), q)
    return M


class Linear(Construction):
    """``u`` (N x d_in, in the first d_in channels) -> ``u H`` (in the first d_out channels)."""

    def _embed(self, x):
        S = self.layout.new_state()
        S[:, :x.shape[1]] = x
        return S

    def input_state(self, v):
        return self._embed(np.asarray(v["u"], dtype=object))

    def state(self, v):
        return self.input_state(v)

    def final_state(self, v):
        H = self.params_matrix()
        return self._embed(np.asarray(v["u"], dtype=object).dot(H))

    def params_matrix(self) -> np.ndarray:
        """H (d_in x d_out) from the parameters ``H_p_q`` (exact, or ring elements in the proof)."""
        d_in = self.variables["u"][1]
        d_out = sum(1 for k in self.params if k.startswith("H_0_"))
        return _matrix_from(self.params, d_in, d_out)

    def step(self, v):
        return v


def _linear_from(n: int, H: np.ndarray) -> Linear:
    d_in, d_out = H.shape
    C = max(d_in, d_out)
    al = ChannelAllocator(n)
    al.block("x", C, f"u in channels [0, {d_in}) before the layer; u H in channels [0, {d_out}) after")
    lay = al.layout()
    B = BaseConvBuilder(lay, causal=True)
    for p in range(d_in):
        B.w_gate(("x", p), ("x", p))  # W_gate = I
        B.conv_bias(("x", p), 1)  # Conv(W_in(u)) = 1 (W_in = 0, h = 0, b_conv = 1)
        for q in range(d_out):
            if not (H[p, q] == 0):
                B.w_out(("x", p), ("x", q), H[p, q])  # W_out = H
    params = {f"H_{p}_{q}": H[p, q] for p, q in np.ndindex(d_in, d_out)}
    con = Linear(name="s000-linear", reference="seed 000 App. D.2.1, eq. (21)", layout=lay, prologue=[], body=[],
                 epilogue=[B.build()], params=params, variables={"u": (n, d_in)},
                 rebuild=lambda **p: _linear_from(n, _matrix_from(p, d_in, d_out)),
                 symbolic_params=tuple(params), notes="H symbolic in the proof")
    return con


def _matrix_from(p: dict, d_in: int, d_out: int) -> np.ndarray:
    H = np.empty((d_in, d_out), dtype=object)
    for a, b in np.ndindex(d_in, d_out):
        H[a, b] = p[f"H_{a}_{b}"]
    return H


def linear(n: int = 4, d_in: int = 3, d_out: int = 2, seed: int = 1, *, H=None) -> Linear:
    """LINEAR(H)(u) = u H, seed 000 App. D.2.1, eq. (21), one BaseConv layer with the
    paper's weights: ``Conv(W_in(u)) = 1`` (``W_in = 0``, filter 0, ``b_conv = 1``),
    ``W_gate = I``, ``W_out = H``.  The state is N x max(d_in, d_out): ``u`` in the
    first d_in channels before, ``u H`` in the first d_out channels after (the
    others 0).  ``H`` (d_in x d_out) is exact: given, or a fixed pseudo-random
    rational matrix drawn from ``seed``.  Every entry of H is a *symbolic
    parameter*, so ``prove`` checks the layer for all H at once."""
    if n < 1 or d_in < 1 or d_out < 1:
        raise ValueError(f"need n, d_in, d_out >= 1, got {n}, {d_in}, {d_out}")
    if H is None:
        H = random_rational_matrix(d_in, d_out, seed)
    H = np.asarray(H, dtype=object)
    if H.shape != (d_in, d_out):
        raise ValueError(f"H has shape {H.shape}, expected ({d_in}, {d_out})")
    return _linear_from(n, H)


register(CatalogueEntry(
    name="s000-linear", paper="seed 000 App. D.2.1, eq. (21)",
    summary="LINEAR(H): u -> u H, one BaseConv layer, proved for symbolic H",
    build=linear, sizes={"n": 4, "d_in": 3, "d_out": 2, "seed": 1},
    claim="1 layer (Sec. D.2.1); state N x max(d_in, d_out)"))
