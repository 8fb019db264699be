"""Gradient descent on least squares with BaseConv, seed 000 Appendix D.3.1.

Both constructions compute ``x <- x - eta A^T (A x - b)`` (seed 000 eq. (3);
the 1/N of eq. (46) is absorbed into ``eta``).  The paper draws the state
with tokens as columns; here tokens are rows (T, C).  Token ``n`` (the last)
is the query token: it holds ``q`` and receives the prediction ``q^T x``.

Non-causal (``gd-baseconv``), App. D.3.1 "Non-causal BaseConv", O(D) state,
3 layers per step, circular convolution:

* layer 1: ``s1 = a_i * x`` (gate x, conv a), W_out: ``s2 = (x^T a_i - b_i) 1^D``
* layer 2: ``s2 = (x^T a_i - b_i) a_i`` (gate a, conv s2), ``s1`` dropped
* layer 3: all-ones circular filter on ``s2`` sums over the tokens:
  ``s2 = A^T (A x - b)`` at every token; W_out: ``x <- x - eta s2``, ``s2`` dropped

plus one epilogue layer writing ``y = q^T x`` at the query token (the bottom
rows of the paper's initial embedding).  Depth ``1 + 3k``.

Causal (``gd-baseconv-causal``), App. D.3.1 "Causal BaseConv", O(D^2)
state, eq. (47): two prologue layers build the prefix sums of ``b_i a_i`` and
``flt(a_i a_i^T)`` (the full sums at the last token), then one layer per
step: at the last token, ``P[j,k] = (sum_i a_i a_i^T)[j,k] x_k`` and
``G = sum_i b_i a_i`` (gated by a bias that is 1 at the last token only), and
W_out sets ``x <- x - eta (sum_k P[:,k] - G)``.  One epilogue layer writes the
prediction.  Depth ``3 + k``.  ``x`` lives at the last token only.

Intermediate states (``Construction.intermediate_states``), declared on every
region except the scratch ones a layer writes and the next drops:

* non-causal body, after layer 1: ``state(v)`` with ``s2[i, :] = (a_i^T x - b_i) 1^D``
  (``s1`` undeclared); after layer 2: ``s2[i, :] = (a_i^T x - b_i) a_i`` (``s1``
  undeclared).  At the query token ``a = 0, b = 0``, so both are 0 there.
* causal prologue, after layer 1: ``input_state(v)`` with the per-token products
  ``Sba[i] = b_i a_i`` and ``Saa[i] = flt(a_i a_i^T)`` (0 at the last token;
  ``G``, ``P`` undeclared).
"""
from __future__ import annotations

import functools

import numpy as np

from .base import Construction, PartialState, batch_ndim, exact, new_state
from .layout import ChannelAllocator
from .running_sums import prefix_sums
from .lsq import LS_GROUPS, LS_VARIABLES, dot, gd_step, matvec
from .weights import BaseConvBuilder

REFERENCE_NC = "seed 000 App. D.3.1 (non-causal BaseConv), eq. (3), (46); layer eq. (2)/(19)"
REFERENCE_C = "seed 000 App. D.3.1 (causal BaseConv), eq. (3), (47); layer eq. (2)/(19)"


class _LSBaseConv(Construction):
    """Shared state functions; the subclasses place x and the sums."""

    def step(self, v):
        return gd_step(v, self.params["eta"])

    def _base_state(self, v):
        n, d = self.variables["A"]
        nb = batch_ndim(v, self.variables)
        lay = self.layout
        S = new_state(lay, np.asarray(v["A"]), nb)
        S[(...,) + (slice(0, n), slice(*lay["a"].cols))] = v["A"]
        S[(...,) + (slice(0, n), slice(*lay["b"].cols))] = np.asarray(v["b"])[..., None]
        S[(...,) + (n, slice(*lay["q"].cols))] = v["q"]
        return S, n, d, nb

    def final_state(self, v):
        S = self.state(v)
        n = self.variables["A"][0]
        S[(...,) + (n, self.layout["y"].cols[0])] = dot(v["q"], v["x"])
        return S

    def readout(self, state):
        n = self.variables["A"][0]
        return {"x": state[..., n, slice(*self.layout["x"].cols)],
                "prediction": state[..., n, self.layout["y"].cols[0]]}


def body_intermediate_states(con, v, r) -> list:
    """The states after body layers 1 and 2 of a ``gd-baseconv`` step (and of ``prefix-coupled``'s,
    the same layers) given the residuals ``r`` (.., n): ``r_i 1^D`` (eq. (46)), then ``r_i a_i``, in
    ``s2`` at the data tokens; the scratch ``s1`` is not declared."""
    n = con.variables["A"][0]
    A = np.asarray(v["A"])
    s2 = (slice(0, n), slice(*con.layout["s2"].cols))
    after1, after2 = con.state(v), con.state(v)
    after1[(...,) + s2] = r[..., :, None]
    after2[(...,) + s2] = r[..., :, None] * A
    declared = ("a", "b", "x", "s2", "q", "y")
    return [PartialState.on_regions(con.layout, after1, declared),
            PartialState.on_regions(con.layout, after2, declared), None]


def _check_args(n, d, eta):
    """Validate sizes; return eta as an exact rational (or the symbol passed in)."""
    if n < 1 or d < 1:
        raise ValueError(f"need n >= 1 and d >= 1, got n={n}, d={d}")
    return exact("1/16") if eta is None else (eta if not isinstance(eta, (str, float, int)) else exact(eta))


class GDBaseConv(_LSBaseConv):
    def _put_x(self, S, v, n):
        S[(...,) + (slice(0, n + 1), slice(*self.layout["x"].cols))] = np.asarray(v["x"])[..., None, :]

    def input_state(self, v):
        return self.state(v)

    def state(self, v):
        S, n, d, nb = self._base_state(v)
        self._put_x(S, v, n)
        return S

    def intermediate_states(self, v, section):
        if section != "body":
            return None
        r = matvec(np.asarray(v["A"]), v["x"]) - np.asarray(v["b"])  # residual a_i^T x - b_i, (.., n)
        return body_intermediate_states(self, v, r)


def gd_baseconv(n: int = 20, d: int = 5, *, eta=None) -> GDBaseConv:
    """The non-causal BaseConv GD construction (seed 000 App. D.3.1)."""
    eta = _check_args(n, d, eta)
    T = n + 1
    al = ChannelAllocator(T)
    al.block("a", d, "rows a_i of A (tokens 0..n-1); 0 at the query token")
    al.block("b", 1, "b_i (tokens 0..n-1)")
    al.block("x", d, "current iterate x, replicated at every token")
    al.block("s1", d, "scratch: a_i * x")
    al.block("s2", d, "scratch: residual r_i, then r_i a_i, then the gradient")
    al.block("q", d, "query row q at the query token (last)")
    al.block("y", 1, "prediction q^T x at the query token")
    lay = al.layout()
    keep = ("a", "b", "x", "q", "y")

    # layer 1: s1 = a * x ; s2 = (sum_k s1_k - b) 1^D
    L1 = BaseConvBuilder(lay, causal=False)
    L1.keep(*keep)
    for j in range(d):
        L1.product(("s1", j), gate_src=("x", j), conv_src=("a", j))
        for k in range(d):
            L1.w_out(("s1", k), ("s2", j), 1)
        L1.w_out(("b", 0), ("s2", j), -1)
    # layer 2: s2 = s2 * a   (s1 is not kept: gate 0 drops it)
    L2 = BaseConvBuilder(lay, causal=False)
    L2.keep(*keep)
    for j in range(d):
        L2.product(("s2", j), gate_src=("a", j), conv_src=("s2", j))
        L2.w_out(("s2", j), ("s2", j))
    # layer 3: circular all-ones filter sums s2 over tokens; x <- x - eta s2
    L3 = BaseConvBuilder(lay, causal=False)
    L3.keep(*keep)
    for j in range(d):
        L3.w_in(("s2", j), ("s2", j))
        L3.filter(("s2", j), {s: 1 for s in range(T)})
        L3.gate_bias(("s2", j), 1)
        L3.w_out(("s2", j), ("x", j), -eta)
    # epilogue: y = q^T x at the query token (q is 0 elsewhere)
    E = BaseConvBuilder(lay, causal=False)
    E.keep(*keep)
    for j in range(d):
        E.product(("s1", j), gate_src=("x", j), conv_src=("q", j))
        E.w_out(("s1", j), ("y", 0))

    return GDBaseConv(
        name="gd-baseconv", reference=REFERENCE_NC, layout=lay,
        prologue=[], body=[L1.build(), L2.build(), L3.build()], epilogue=[E.build()],
        params={"eta": eta}, variables=LS_VARIABLES(n, d), token_groups=LS_GROUPS, carried=("x",),
        rebuild=functools.partial(gd_baseconv, n, d), symbolic_params=("eta",),
        notes="O(D) state (5D+2 channels x (N+1) tokens); circular convolution")


class GDBaseConvCausal(_LSBaseConv):
    @staticmethod
    def _products(v, d):
        """Per-token products b_i a_i (.., n, d) and flt(a_i a_i^T) (.., n, d*d)."""
        A = np.asarray(v["A"])
        b = np.asarray(v["b"])
        ba = b[..., :, None] * A
        aa = (A[..., :, :, None] * A[..., :, None, :]).reshape(A.shape[:-1] + (d * d,))
        return ba, aa

    def _sums(self, S, v, n, d):
        """Prefix sums of b_i a_i and a_i a_i^T over tokens (token n: full sums)."""
        A = np.asarray(v["A"])
        lay = self.layout
        if A.dtype == object:
            ba_c, aa_c = self._exact_prefix_sums(v, d)[0]
        else:
            ba, aa = self._products(v, d)
            ba_c, aa_c = np.cumsum(ba, axis=-2), np.cumsum(aa, axis=-2)
        S[(...,) + (slice(0, n), slice(*lay["Sba"].cols))] = ba_c
        S[(...,) + (slice(0, n), slice(*lay["Saa"].cols))] = aa_c
        S[(...,) + (n, slice(*lay["Sba"].cols))] = ba_c[..., -1, :]
        S[(...,) + (n, slice(*lay["Saa"].cols))] = aa_c[..., -1, :]

    def _exact_prefix_sums(self, v, d):
        """The exact per-token products and their prefix sums, computed once per (A, b):
        ``state(v)``, ``state(step(v))``, ``final_state(v)`` and the declared intermediate state
        of one proof share A and b (a GD step changes x only), and so do the specifications of
        one construction built at other parameters (the step size enters neither: the prover's
        symbolic build and the construction itself read the same objects).  The memo (the
        last two inputs, module-wide: a proof's variables and its abstract evaluation's) is keyed by the identity of every entry of A and b (the object
        arrays' pointer bytes) and holds copies of both arrays, so those entries stay alive and
        no address is reused while the key is kept.  Entries are immutable scalars (ints,
        Fractions, ring elements), so equal keys mean equal inputs, products and sums.
        Returns ``(sums, products)``, each ``(b_i a_i, flt(a_i a_i^T))``."""
        A = np.asarray(v["A"], dtype=object)
        b = np.asarray(v["b"], dtype=object)
        key = (A.shape, b.shape, A.tobytes(), b.tobytes())
        hit = _PREFIX_MEMO.get(key)
        if hit is not None:
            return hit[1]
        ba, aa = self._products(v, d)
        out = ((_prefix(ba), _prefix(aa)), (ba, aa))
        while len(_PREFIX_MEMO) >= _PREFIX_MEMO_SIZE:
            del _PREFIX_MEMO[next(iter(_PREFIX_MEMO))]  # the oldest
        _PREFIX_MEMO[key] = ((A.copy(), b.copy()), out)
        return out

    def input_state(self, v):
        S, n, d, nb = self._base_state(v)
        S[(...,) + (n, slice(*self.layout["x"].cols))] = v["x"]
        return S

    def state(self, v):
        S = self.input_state(v)
        n, d = self.variables["A"]
        self._sums(S, v, n, d)
        return S

    def intermediate_states(self, v, section):
        if section != "prologue":
            return None
        n, d = self.variables["A"]
        S = self.input_state(v)
        exact = np.asarray(v["A"]).dtype == object
        ba, aa = self._exact_prefix_sums(v, d)[1] if exact else self._products(v, d)
        S[(...,) + (slice(0, n), slice(*self.layout["Sba"].cols))] = ba
        S[(...,) + (slice(0, n), slice(*self.layout["Saa"].cols))] = aa
        declared = ("a", "b", "x", "q", "y", "Sba", "Saa")  # G, P are scratch
        return [PartialState.on_regions(self.layout, S, declared), None]



#: the exact products and prefix sums of the last inputs (``GDBaseConvCausal._exact_prefix_sums``)
_PREFIX_MEMO: dict = {}
_PREFIX_MEMO_SIZE = 2


def _prefix(M):
    """Exact prefix sums over tokens (axis 0) of an (n, k) object array, column by column
    (``constructions.running_sums.prefix_sums``: for polynomials a shared chain per column, n
    terms for its n sums rather than n^2 / 2)."""
    out = np.empty(M.shape, dtype=object)
    for j in range(M.shape[1]):
        out[:, j] = prefix_sums(M[:, j])
    return out


def gd_baseconv_causal(n: int = 20, d: int = 5, *, eta=None) -> GDBaseConvCausal:
    """The causal BaseConv GD construction (seed 000 App. D.3.1, eq. (47))."""
    eta = _check_args(n, d, eta)
    T = n + 1
    al = ChannelAllocator(T)
    al.block("a", d, "rows a_i of A (tokens 0..n-1)")
    al.block("b", 1, "b_i (tokens 0..n-1)")
    al.block("x", d, "current iterate x, at the last token only")
    al.block("q", d, "query row q at the last token")
    al.block("y", 1, "prediction q^T x at the last token")
    al.block("Sba", d, "prefix sums of b_i a_i (full sum at the last token)")
    al.block("Saa", d * d, "prefix sums of flt(a_i a_i^T), row-major")
    al.block("G", d, "scratch: sum_i b_i a_i masked to the last token")
    al.block("P", d * d, "scratch: (sum_i a_i a_i^T)[j, k] x_k at the last token")
    lay = al.layout()
    keep = ("a", "b", "x", "q", "y")

    # prologue 1: per-token products b_i a_i and a_i a_i^T
    P1 = BaseConvBuilder(lay, causal=True)
    P1.keep(*keep)
    for j in range(d):
        P1.product(("Sba", j), gate_src=("b", 0), conv_src=("a", j))
        P1.w_out(("Sba", j), ("Sba", j))
        for k in range(d):
            P1.product(("Saa", j * d + k), gate_src=("a", j), conv_src=("a", k))
            P1.w_out(("Saa", j * d + k), ("Saa", j * d + k))
    # prologue 2: causal all-ones filter = prefix sums
    P2 = BaseConvBuilder(lay, causal=True)
    P2.keep(*keep)
    for r in ("Sba", "Saa"):
        for j in range(P2.width(r)):
            P2.w_in((r, j), (r, j))
            P2.filter((r, j), {s: 1 for s in range(T)})
            P2.gate_bias((r, j), 1)
            P2.w_out((r, j), (r, j))
    # body: one layer per GD step
    B = BaseConvBuilder(lay, causal=True)
    B.keep(*keep, "Sba", "Saa")
    for j in range(d):
        B.w_in(("Sba", j), ("G", j))
        B.identity_filter(("G", j))
        B.gate_bias(("G", j), 1, rows=[n])  # the 0^D ... 0^D 1^D row of the paper
        B.w_out(("G", j), ("x", j), eta)
        for k in range(d):
            B.product(("P", j * d + k), gate_src=("x", k), conv_src=("Saa", j * d + k))
            B.w_out(("P", j * d + k), ("x", j), -eta)
    # epilogue: prediction
    E = BaseConvBuilder(lay, causal=True)
    E.keep(*keep, "Sba", "Saa")
    for j in range(d):
        E.product(("G", j), gate_src=("x", j), conv_src=("q", j))
        E.w_out(("G", j), ("y", 0))

    return GDBaseConvCausal(
        name="gd-baseconv-causal", reference=REFERENCE_C, layout=lay,
        prologue=[P1.build(), P2.build()], body=[B.build()], epilogue=[E.build()],
        params={"eta": eta}, variables=LS_VARIABLES(n, d), token_groups=LS_GROUPS, carried=("x",),
        rebuild=functools.partial(gd_baseconv_causal, n, d), symbolic_params=("eta",),
        notes="O(D^2) state (2D^2+5D+2 channels x (N+1) tokens); causal convolution")
