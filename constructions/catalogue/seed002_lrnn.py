"""Seed 002 (Emami et al., "Implicit Bias of Linear RNNs") Prop. 2.1: linear RNN <-> causal convolution.

The linear RNN, eq. (1) (NTK parameterisation, ``h_{-1} = 0``)::

    h_t = W h_{t-1} / sqrt(n) + F x_t,      y_t = C h_t / sqrt(n),      t = 0..T-1

with ``W in R^{n x n}``, ``F in R^{n x n_x}``, ``C in R^{n_y x n}``, equals the causal
convolution of eq. (5), ``y_t = sum_{j <= t} L_j x_{t-j}``, with the matrix impulse response
of eq. (9), ``L_j = n^{-(j+1)/2} C W^j F`` (Prop. 2.1(a), eq. (10)).

* ``s002-lrnn-conv`` (Prop. 2.1(a)) -- compiles a given RNN with exact rational ``W, F, C``
  (random dyadic from ``seed``) into ONE causal BaseConv layer (seed 000 eq. (2)/(19), the
  toolkit layer) on a ``T``-token state with channels ``x`` (``n_x``), ``y`` (``n_y``) and
  ``k`` (``n_x n_y``).  The convolution is per channel, so a matrix-valued filter needs one
  conv channel per (input i, output o) pair: ``W_in`` copies ``x_i`` into channel ``(i, o)``,
  whose filter is the scalar sequence ``h[j] = L_j[o, i]``, the gate is the constant 1
  (``b_gate``), and ``W_out`` sums the channels ``(i, o)`` over ``i`` into ``y_o``
  (``y_o = sum_i sum_j L_j[o, i] x_{t-j, i}``).  With ``n_x = n_y = 1`` this is a single
  per-channel filter.  The proof is against the RNN recursion evaluated symbolically in
  ``x``, *and symbolically in* ``r = n^{-1/2}``: the layer's taps are ``r^{j+1} C W^j F``
  and the recursion is ``h_t = r W h_{t-1} + F x_t``, ``y_t = r C h_t``, so the identity is
  proved for every value of the normalisation, i.e. for every ``n``; the concrete weights
  use ``r = 1/sqrt(n)`` exactly, which needs ``n`` a perfect square (the default 4).
* ``s002-conv-lrnn`` (Prop. 2.1(b), App. B.1 eq. (34)-(35)) -- the converse: any filter
  ``{L_j}_{j<T}`` is realised by an RNN with ``T n_x n_y`` active hidden states: per
  (input, output) pair a diagonal block ``W = sqrt(n) diag(lambda)`` with distinct nonzero
  nodes ``lambda_k = (k+1)/(T+1)``, ``F = 1``, ``C = sqrt(n) c`` with ``c = [L_0..L_{T-1}]
  V^{-1}``, ``V_{kj} = lambda_k^j`` (the ``sqrt(n)`` factors are the notes' §1.4 fix of A1:
  the paper's construction omits the ``n^{-(j+1)/2}`` of eq. (1)).  ``V^{-1}`` is exact.
  Proved as an identity in symbolic ``x`` AND symbolic filter entries ``L``: for every
  filter and input the RNN output equals the convolution.
* ``s002-conv-lrnn-shift`` ([derived], not in the paper) -- the shift-register RNN:
  ``W = sqrt(n) S`` (``S`` moves lag j to lag j+1 per input channel), ``F = [I; 0; ...]``,
  ``C = sqrt(n) [L_0 L_1 ... L_{T-1}]``: ``T n_x`` active states (the paper's bound is
  ``T n_x n_y``), rational weights, no Vandermonde conditioning.  Same identity.

For exact ``sqrt(n)`` the hidden size is padded with inert states (zero rows/columns of
``W, F, C``) to the next perfect square ``n >= active states``; the check objects report
``active`` and ``n``.
"""
from __future__ import annotations

import functools

import math
from fractions import Fraction

import numpy as np

from constructions.claims import IdentityClaim
from constructions import ops
from constructions.base import Construction, batch_ndim, new_state
from constructions.layout import ChannelAllocator
from constructions.weights import BaseConvBuilder

from . import CatalogueEntry, register

REF_A = "seed 002 Sec. 2, Prop. 2.1(a), eq. (1), (5), (9)-(10)"
REF_B = "seed 002 Sec. 2, Prop. 2.1(b), App. B.1 eq. (34)-(35) (with the sqrt(n) rescaling of seed 002 eq. (1))"


def _Z(*shape):
    return ops.zeros_like_object(shape)


def _rand(rng, shape, den=4, lo=-4, hi=4):
    out = _Z(*shape)
    for idx in np.ndindex(*shape):
        out[idx] = Fraction(int(rng.integers(lo, hi + 1)), den)
    return out


def _sqrt_int(n: int) -> int | None:
    r = math.isqrt(n)
    return r if r * r == n else None


def rnn_outputs(W, F, C, x, r):
    """The RNN of eq. (1) run for T = len(x) steps with ``r = 1/sqrt(n)``:
    ``h_t = r (W h_{t-1}) + F x_t``, ``y_t = r (C h_t)``; exact, any scalar type (``r`` may be
    a symbol).  Returns the (T, n_y) outputs."""
    x = np.asarray(x, dtype=object)
    T = x.shape[0]
    n = W.shape[0]
    h = _Z(n)
    ys = _Z(T, C.shape[0])
    for t in range(T):
        h = ops.add(ops.mm(W, h[:, None])[:, 0] * r if t else h, ops.mm(F, x[t][:, None])[:, 0])
        ys[t] = ops.mm(C, h[:, None])[:, 0] * r
    return ys


def impulse_response(W, F, C, r, T):
    """Eq. (9): ``L_j = r^{j+1} C W^j F`` for j < T (``r = n^{-1/2}``); shape (T, n_y, n_x)."""
    P = np.asarray(F, dtype=object)
    out = []
    for j in range(T):
        out.append(ops.mm(C, P) * r ** (j + 1))
        P = ops.mm(W, P)
    return np.array(out, dtype=object)


def conv_outputs(L, x):
    """Eq. (5): ``y_t = sum_{j <= t} L_j x_{t-j}`` (independent of the layer code)."""
    x = np.asarray(x, dtype=object)
    T = x.shape[0]
    n_y = L.shape[1]
    ys = _Z(T, n_y)
    for t in range(T):
        for j in range(t + 1):
            ys[t] = ys[t] + np.dot(L[j], x[t - j])
    return ys


# ====================================================================== Prop. 2.1(a)

class LRNNConv(Construction):
    """One causal BaseConv layer equal to the RNN of eq. (1) (module docstring)."""

    rnn: tuple = ()  # (W, F, C) exact

    def input_state(self, v):
        nb = batch_ndim(v, self.variables)
        S = new_state(self.layout, np.asarray(v["x"]), nb)
        S[(...,) + self.layout["x"].index] = v["x"]
        return S

    def state(self, v):
        return self.input_state(v)

    def final_state(self, v):
        S = self.input_state(v)
        W, F, C = self.rnn
        S[(...,) + self.layout["y"].index] = rnn_outputs(W, F, C, v["x"], self.params["r"])
        return S

    def step(self, v):
        return v

    def readout(self, state):
        return {"y": state[(...,) + self.layout["y"].index]}


def lrnn_conv(n: int = 4, n_x: int = 2, n_y: int = 2, T: int = 6, seed: int = 1, *, r=None, rnn=None) -> LRNNConv:
    """Prop. 2.1(a): the RNN (W, F, C) (random dyadic from ``seed``, or ``rnn``) as one causal
    BaseConv layer with taps ``L_j = r^{j+1} C W^j F``, ``r = 1/sqrt(n)`` (``n`` a perfect
    square) unless ``r`` is given (the proof passes a symbol)."""
    if min(n, n_x, n_y, T) < 1:
        raise ValueError(f"need n, n_x, n_y, T >= 1 (got n={n}, n_x={n_x}, n_y={n_y}, T={T})")
    if r is None:
        s = _sqrt_int(n)
        if s is None:
            raise ValueError(f"n = {n} is not a perfect square, so 1/sqrt(n) is irrational; choose n in "
                             f"{{1, 4, 9, 16, ...}} (the proof is symbolic in r = 1/sqrt(n) and covers every n)")
        r = Fraction(1, s)
    if rnn is None:
        rng = np.random.default_rng(seed)
        rnn = (_rand(rng, (n, n)), _rand(rng, (n, n_x)), _rand(rng, (n_y, n)))
    W, F, C = rnn
    L = impulse_response(W, F, C, r, T)
    al = ChannelAllocator(T)
    al.block("x", n_x, "input x_t at token t")
    al.block("y", n_y, "output y_t at token t")
    al.block("k", n_x * n_y, "conv channel (i, o) = i*n_y + o: filter L_j[o, i]")
    lay = al.layout()
    B = BaseConvBuilder(lay, causal=True)
    B.keep("x")
    for i in range(n_x):
        for o in range(n_y):
            ch = ("k", i * n_y + o)
            B.w_in(("x", i), ch)
            B.filter(ch, {j: L[j, o, i] for j in range(T)})
            B.gate_bias(ch, 1)
            B.w_out(ch, ("y", o))
    con = LRNNConv(name="s002-lrnn-conv", reference=REF_A, layout=lay, prologue=[], body=[], epilogue=[B.build()],
                   params={"r": r}, variables={"x": (T, n_x)},
                   rebuild=functools.partial(lrnn_conv, n, n_x, n_y, T, seed, rnn=rnn), symbolic_params=("r",),
                   notes=f"1 causal layer, state T x (n_x + n_y + n_x n_y) = {T} x {n_x + n_y + n_x * n_y}")
    con.rnn = (W, F, C)
    return con


# ====================================================================== Prop. 2.1(b)

def _inverse(M):
    """Exact inverse of a square Fraction matrix (Gauss-Jordan)."""
    n = len(M)
    A = [[Fraction(M[i][j]) for j in range(n)] + [Fraction(int(i == j)) for j in range(n)] for i in range(n)]
    for c in range(n):
        p = next(i for i in range(c, n) if A[i][c] != 0)
        A[c], A[p] = A[p], A[c]
        piv = A[c][c]
        A[c] = [a / piv for a in A[c]]
        for i in range(n):
            if i != c and A[i][c] != 0:
                f = A[i][c]
                A[i] = [a - f * b for a, b in zip(A[i], A[c])]
    return [row[n:] for row in A]


class ConvToRNN:
    """An RNN (eq. (1)) realising any filter ``L`` of length T; ``claim()`` states
    ``RNN(x) == conv_L(x)`` with ``x`` and ``L`` symbolic (an IdentityClaim).

    ``W`` and ``F`` are exact; ``C`` is linear in ``L`` (``C_of(L)``).  ``active`` hidden
    states carry the construction; ``n`` (a perfect square, for exact ``sqrt(n)``) adds
    inert ones."""

    def __init__(self, T: int, n_x: int, n_y: int, method: str):
        if min(T, n_x, n_y) < 1:
            raise ValueError(f"need T, n_x, n_y >= 1 (got T={T}, n_x={n_x}, n_y={n_y})")
        self.T, self.n_x, self.n_y, self.method = T, n_x, n_y, method
        self.active = T * n_x * n_y if method == "vandermonde" else T * n_x
        self.sqrt_n = math.isqrt(self.active - 1) + 1 if self.active > 1 else 1
        self.n = self.sqrt_n ** 2
        n, s = self.n, self.sqrt_n
        self.W, self.F = _Z(n, n), _Z(n, n_x)
        if method == "vandermonde":
            self.nodes = [Fraction(k + 1, T + 1) for k in range(T)]
            self.Vinv = _inverse([[lam ** j for j in range(T)] for lam in self.nodes])  # V[k][j] = lambda_k^j
            for i in range(n_x):
                for o in range(n_y):
                    for k in range(T):
                        b = (i * n_y + o) * T + k
                        self.W[b, b] = s * self.nodes[k]
                        self.F[b, i] = 1
        elif method == "shift":
            for i in range(n_x):
                self.F[i, i] = 1  # lag 0 of input i is state i
                for j in range(T - 1):
                    self.W[(j + 1) * n_x + i, j * n_x + i] = s
        else:
            raise ValueError(f"unknown method {method!r}")

    def C_of(self, L):
        """The read-out ``C`` (n_y x n) for the filter ``L`` (T, n_y, n_x); linear in ``L``."""
        T, n_x, n_y, s = self.T, self.n_x, self.n_y, self.sqrt_n
        C = _Z(n_y, self.n)
        for i in range(n_x):
            for o in range(n_y):
                for k in range(T):
                    if self.method == "vandermonde":  # c = [L_0..L_{T-1}] V^{-1}
                        val = 0
                        for j in range(T):
                            if self.Vinv[j][k] != 0:
                                val = val + L[j, o, i] * self.Vinv[j][k]
                        C[o, (i * n_y + o) * T + k] = val * s
                    else:
                        C[o, k * n_x + i] = L[k, o, i] * s
        return C

    def lhs(self, v):
        return rnn_outputs(self.W, self.F, self.C_of(v["L"]), v["x"], Fraction(1, self.sqrt_n))

    def rhs(self, v):
        return conv_outputs(v["L"], v["x"])

    def summary(self) -> dict:
        return {"method": self.method, "T": self.T, "n_x": self.n_x, "n_y": self.n_y, "active_states": self.active,
                "hidden_n": self.n, "paper_bound_T_nx_ny": self.T * self.n_x * self.n_y}

    def claim(self) -> IdentityClaim:
        name = "s002-conv-lrnn" + ("-shift" if self.method == "shift" else "")
        return IdentityClaim(name, {"x": (self.T, self.n_x), "L": (self.T, self.n_y, self.n_x)}, self.lhs, self.rhs,
                             locate=lambda ix: f"y_{ix[0]}[{ix[1]}]" if ix else "y")


def conv_lrnn(T: int = 4, n_x: int = 1, n_y: int = 1) -> ConvToRNN:
    """Prop. 2.1(b), App. B.1: the Vandermonde RNN for a symbolic filter (module docstring)."""
    return ConvToRNN(T, n_x, n_y, "vandermonde")


def conv_lrnn_shift(T: int = 4, n_x: int = 1, n_y: int = 1) -> ConvToRNN:
    """[derived] the shift-register RNN (T n_x active states) for a symbolic filter."""
    return ConvToRNN(T, n_x, n_y, "shift")


register(CatalogueEntry(
    name="s002-lrnn-conv", paper=REF_A,
    summary="linear RNN (W, F, C) -> one causal BaseConv layer with taps L_j = n^{-(j+1)/2} C W^j F "
            "(one conv channel per (input, output) pair); proved symbolic in x and r = 1/sqrt(n)",
    build=lrnn_conv, sizes={"n": 4, "n_x": 2, "n_y": 2, "T": 6, "seed": 1},
    claim="RNN == causal conv with L_j = n^{-(j+1)/2} C W^j F (Prop. 2.1(a)); here 1 BaseConv layer, "
          "T x (n_x + n_y + n_x n_y) state"))
register(CatalogueEntry(
    name="s002-conv-lrnn", paper=REF_B,
    summary="any length-T filter {L_j} -> RNN with T n_x n_y active states (Vandermonde, App. B.1); "
            "identity symbolic in x and L",
    build=conv_lrnn, sizes={"T": 4, "n_x": 1, "n_y": 1},
    claim="an RNN with n <= T n_x n_y hidden states matches any {L_j} on length-T inputs (Prop. 2.1(b))"))
register(CatalogueEntry(
    name="s002-conv-lrnn-shift", paper="seed 002 Prop. 2.1(b), derived shift-register realisation (not in the paper)",
    summary="any length-T filter {L_j} -> shift-register RNN with T n_x active states; identity symbolic in x and L",
    build=conv_lrnn_shift, sizes={"T": 4, "n_x": 1, "n_y": 1},
    claim="Prop. 2.1(b) bound n <= T n_x n_y; shift register: T n_x (+ padding to a perfect square for sqrt(n))"))
