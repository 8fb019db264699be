"""Seed 003 (Zoology, arXiv:2312.04927) App. H.3: the BaseConv primitives, proved exactly.

Every layer here is a BaseConv layer *in the paper's own parameterisation*,
Def. 4.1 / eq. (1) / eq. (4) / Alg. 7::

    y = (u W + b_1) ⊙ (h * u + b_2)          (u, h, b_1, b_2 in R^{N x d}, W in R^{d x d})

realised as a toolkit :class:`~constructions.layers.BaseConv` with
``W_gate = W``, ``b_gate = b_1``, ``b_conv = b_2`` and ``W_in = W_out = I``,
``b_in = b_out = 0`` (:func:`paper_layer`), so that layer counts and the inner
dimension (N, d) compare one to one with the paper's 5-tuples (Def. H.2).
Tokens are rows, 0-based; ``*`` is causal (linear, truncated) convolution and
``⊛`` circular convolution, lag 0 first (seed 003 App. H.1.1).  The
specification of every entry is computed independently of the layer code
(explicit polynomial products), in exact symbols.

Entries (paper, equation; layers here / layers claimed):

* ``s003-linear``      Lemma H.7, linear row:  ``u W``                      1 / 1
* ``s003-conv``        Lemma H.7, convolution row: ``u * h``               1 / 1
* ``s003-gating``      Lemma H.7, gating by a fixed ``v``: ``v ⊙ u``       1 / 1
* ``s003-shift-down``  Prop. H.8, ``shift_down(y, s)`` (filter ``X^s``);
                       seed 000 Def. D.23 / Prop. D.24 is the case N = 2M, s = M   1 / 1
* ``s003-shift-up``    Prop. H.8, ``shift_up(y, s)``, corrected: one circular
                       layer, ``h = X^{(N-s) mod N}``, row mask              1 / 3
* ``s003-add``         Prop. H.9, ``add_n(y : x, S)``                        2 / 2
* ``s003-remember``    Prop. H.10, ``remember_{n,m,s,t}(y : x, v, h, p)``
                       corrected (layer-2 mask, shift amount, N >= 2n+2s+2m+t)   3 / 5
                       (``--set layers=2``: a derived fused form, 2 layers)

Errata (``python -m verify.errata``), each as-printed form rejected with a
counterexample and its correction proved:

* ``S003-shift-kernel-index``  Prop. H.8: filter tap at ``n = s+1``; correct: ``s``.
* ``S003-shift-up``            Prop. H.8: the 3-layer shift_up (``⊛ e_0`` "reverses").
* ``S003-add-bias``            Prop. H.9: layer 2 passes ``b_1^2`` twice (for ``b_2^2``).
* ``S003-remember-mask``       Prop. H.10: layer-2 mask and shift_up amount off by n.
* ``S003-remember-size``       Prop. H.10: the printed layers at the stated ``N = n+m+s+t``.
* ``S000-D38-remember-1-layer`` seed 000 Thm. D.38, line 6: "by Prop. D.26 ...
  (4N, 1, D, 4N, D)"; the printed layer on the state is rejected, a 2-layer
  construction is proved (and no single layer can do it, see the erratum).

Relation to seed 000 (App. D.2.1, Def. D.23-D.26): Def. D.23 (``shift``) is
seed 003's ``shift_down/shift_up`` (its signature ``shift(y, r, t, f)`` is a
copy-paste slip for ``shift(y, s)``); Prop. D.24 (``H[k,:] = 1`` iff ``k = N``
shifts a 2N-row input down by N) is correct as printed and is the case
``N -> 2M, s = M`` of ``s003-shift-down`` (tested).  Def. D.25 ``remember(y, r,
t, f)`` with ``r = 0`` (no prefix ``v_1``) and ``f(x) = p ⊙ (x * h)`` is
seed 003's ``remember``; Prop. D.26 only asserts that an 8-layer BaseConv
exists for a general one-layer ``f`` (its construction is deferred to Arora et
al. 2024), so there is no printed step for the verifier to check; its one
checkable use with a layer count is the D.38 line-6 erratum above.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from constructions import ops
from constructions.base import FunctionConstruction
from constructions.layers import BaseConv
from constructions.layout import Layout

from . import CatalogueEntry, Erratum, register, register_erratum

REF_H7 = "seed 003 App. H.3, Lemma H.7 (BaseConv eq. (4), Alg. 7)"
REF_H8 = "seed 003 App. H.3, Prop. H.8 (shift_down / shift_up)"
REF_H9 = "seed 003 App. H.3, Prop. H.9 (add_n)"
REF_H10 = "seed 003 App. H.3, Prop. H.10 (remember)"


# ====================================================================== helpers

def Z(*shape) -> np.ndarray:
    return ops.zeros_like_object(shape)


def rand_rat(seed_or_rng, shape, *, lo: int = -4, hi: int = 4, den: int = 4, nonzero: bool = False) -> np.ndarray:
    """Exact dyadic rationals k/den, k in [lo, hi] (float-exact weights: a float32 stores them exactly)."""
    rng = seed_or_rng if isinstance(seed_or_rng, np.random.Generator) else np.random.default_rng(seed_or_rng)
    out = Z(*shape)
    for idx in np.ndindex(*shape):
        k = int(rng.integers(lo, hi + 1))
        while nonzero and k == 0:
            k = int(rng.integers(lo, hi + 1))
        out[idx] = Fraction(k, den)
    return out


def paper_layer(N: int, d: int, *, W=None, b1=None, h=None, b2=None, causal: bool = True) -> BaseConv:
    """The paper's BaseConv ``(u W + b1) ⊙ (h * u + b2)`` (seed 003 eq. (4), Alg. 7) as a
    toolkit layer: ``W_gate = W, b_gate = b1, b_conv = b2, h = h``, ``W_in = W_out = I``."""
    L = BaseConv.zeros(N, d, causal=causal)
    for c in range(d):
        L.W_in[c, c] = 1
        L.W_out[c, c] = 1
    for name, val, shape in (("W_gate", W, (d, d)), ("b_gate", b1, (N, d)), ("h", h, (N, d)), ("b_conv", b2, (N, d))):
        if val is not None:
            val = np.asarray(val, dtype=object)
            if val.shape != shape:
                raise ValueError(f"{name}: shape {val.shape}, expected {shape}")
            getattr(L, name)[...] = val
    return L


def taps(N: int, d: int, lags: dict) -> np.ndarray:
    """An (N, d) filter with ``h[lag, :] = value`` (lags outside [0, N) dropped: they
    cannot act on N tokens); a value may be a scalar or a length-d row."""
    h = Z(N, d)
    for lag, val in lags.items():
        if 0 <= lag < N:
            h[lag, :] = val
    return h


def rows_mask(N: int, d: int, rows, value=1) -> np.ndarray:
    """(N, d) bias equal to ``value`` on the given rows (clipped to [0, N)), 0 elsewhere."""
    b = Z(N, d)
    for r in rows:
        if 0 <= r < N:
            b[r, :] = value
    return b


def identity(d: int) -> np.ndarray:
    M = Z(d, d)
    for i in range(d):
        M[i, i] = 1
    return M


def row_layout(N: int, d: int, blocks: list[tuple[str, int]], rest: str = "pad") -> Layout:
    """A layout cut into consecutive row blocks over all d channels; the rows left
    over form the region ``rest``.  Zero-height blocks are skipped."""
    lay = Layout((N, d))
    r = 0
    for name, k in blocks:
        if k > 0:
            lay.add(name, (r, r + k), (0, d))
            r += k
    if r < N:
        lay.add(rest, (r, N), (0, d))
    return lay


def conv_spec(col: list, hcol: list, N: int, circular: bool = False) -> list:
    """Reference convolution of one column (independent of ``ops.conv``):
    coeff(h(X) u(X) mod X^N) (causal) or mod X^N - 1 (circular), seed 003 App. H.1.1."""
    out = [0] * N
    for s, w in enumerate(hcol):
        if w == 0:
            continue
        for r, x in enumerate(col):
            t = r + s
            if circular:
                t %= N
            elif t >= N:
                continue
            out[t] = out[t] + w * x
    return out


def conv_full(col: list, hcol: list) -> list:
    """Full (untruncated) linear convolution: len(col) + len(hcol) - 1 entries."""
    out = [0] * (len(col) + len(hcol) - 1)
    for s, w in enumerate(hcol):
        for r, x in enumerate(col):
            out[r + s] = out[r + s] + w * x
    return out


def stack(name, reference, layout, layers, variables, make_input, make_output, params=None,
          notes="") -> FunctionConstruction:
    """A fixed stack (all layers in the epilogue): ``make_input(v)`` -> ``make_output(v)``, exact
    object arrays of the paper's input and of its specified output."""
    return FunctionConstruction(name=name, reference=reference, layout=layout, prologue=[], body=[],
                                epilogue=list(layers), params=dict(params or {}), variables=variables, notes=notes,
                                make_input=make_input, make_final=make_output)


def full_layout(N: int, d: int, name: str = "y") -> Layout:
    """One region covering the whole (N, d) state (failures then name it)."""
    lay = Layout((N, d))
    lay.add(name, (0, N), (0, d))
    return lay


def _check(cond: bool, msg: str) -> None:
    if not cond:
        raise ValueError(msg)


def _u_state(N, d):
    def mk(v):
        S = Z(N, d)
        S[:, :] = v["u"]
        return S
    return mk


# ====================================================================== Lemma H.7

def linear(N: int = 4, d: int = 3, seed: int = 1) -> FunctionConstruction:
    """Lemma H.7, linear row: ``W`` given, ``b_1 = 0``, ``h = 0``, ``b_2 = 1``: output ``u W``.
    ``W`` is a random dyadic matrix drawn from ``seed``."""
    _check(N >= 1 and d >= 1, "need N >= 1 and d >= 1")
    W = rand_rat(seed, (d, d))
    L = paper_layer(N, d, W=W, b2=rows_mask(N, d, range(N)))
    return stack("s003-linear", REF_H7 + ", linear", full_layout(N, d), [L], {"u": (N, d)},
                 _u_state(N, d), lambda v: np.dot(np.asarray(v["u"], dtype=object), W))


def conv(N: int = 5, d: int = 2, seed: int = 1, *, circular: bool = False) -> FunctionConstruction:
    """Lemma H.7, convolution row: ``W = 0``, ``b_1 = 1``, ``h`` given, ``b_2 = 0``: output
    ``u * h`` (causal; ``circular=True``: ``u ⊛ h``, Alg. 7 allows both)."""
    _check(N >= 1 and d >= 1, "need N >= 1 and d >= 1")
    h = rand_rat(seed, (N, d))
    L = paper_layer(N, d, b1=rows_mask(N, d, range(N)), h=h, causal=not circular)

    def spec(v):
        u = np.asarray(v["u"], dtype=object)
        out = Z(N, d)
        for c in range(d):
            out[:, c] = conv_spec(list(u[:, c]), list(h[:, c]), N, circular)
        return out
    return stack("s003-conv", REF_H7 + ", convolution", full_layout(N, d), [L], {"u": (N, d)},
                 _u_state(N, d), spec, {"circular": circular})


def gating(N: int = 4, d: int = 2, seed: int = 1) -> FunctionConstruction:
    """Lemma H.7, gating by a *fixed* ``v``: ``W = 0``, ``b_1 = v``, ``h = e_0``, ``b_2 = 0``:
    output ``v ⊙ u`` (the text's garbled call, fixed by its displayed equation)."""
    _check(N >= 1 and d >= 1, "need N >= 1 and d >= 1")
    gv = rand_rat(seed, (N, d))
    L = paper_layer(N, d, b1=gv, h=taps(N, d, {0: 1}))
    return stack("s003-gating", REF_H7 + ", gating", full_layout(N, d), [L], {"u": (N, d)},
                 _u_state(N, d), lambda v: gv * np.asarray(v["u"], dtype=object))


# ====================================================================== Prop. H.8

def _shift_down_spec(N, d, s):
    def spec(v):
        u = np.asarray(v["u"], dtype=object)
        out = Z(N, d)
        if s < N:
            out[s:, :] = u[:N - s, :]
        return out
    return spec


def _shift_up_spec(N, d, s):
    def spec(v):
        u = np.asarray(v["u"], dtype=object)
        out = Z(N, d)
        if s < N:
            out[:N - s, :] = u[s:, :]
        return out
    return spec


def shift_down_layer(N: int, d: int, s: int, *, tap: int | None = None) -> BaseConv:
    """``W = 0``, ``b_1 = 1``, ``b_2 = 0``, ``h_s(X) = X^s`` (tap index ``s``; ``tap``
    overrides it, for the as-printed index ``s + 1``)."""
    return paper_layer(N, d, b1=rows_mask(N, d, range(N)), h=taps(N, d, {s if tap is None else tap: 1}))


def shift_up_layer(N: int, d: int, s: int) -> BaseConv:
    """Corrected shift_up: circular ``h(X) = X^{(N-s) mod N}``, ``b_1`` = 1 on rows
    ``0..N-s-1`` (row mask), ``W = 0``, ``b_2 = 0``: one layer."""
    return paper_layer(N, d, b1=rows_mask(N, d, range(N - s)), h=taps(N, d, {(N - s) % N: 1}), causal=False)


def _shift_args(N, d, s):
    _check(N >= 1 and d >= 1, "need N >= 1 and d >= 1")
    _check(0 <= s <= N, f"need 0 <= s <= N, got s={s}, N={N}")


def shift_down(N: int = 5, d: int = 2, s: int = 2) -> FunctionConstruction:
    """Prop. H.8: ``shift_down(y, s) = (0^{s x d}; y_0 .. y_{N-1-s})`` in one layer, filter
    ``h_s(X) = X^s`` (tap at 0-based index s).  Seed 000 Prop. D.24 is N = 2M, s = M."""
    _shift_args(N, d, s)
    return stack("s003-shift-down", REF_H8 + "; seed 000 Def. D.23, Prop. D.24", full_layout(N, d),
                 [shift_down_layer(N, d, s)], {"u": (N, d)}, _u_state(N, d), _shift_down_spec(N, d, s), {"s": s})


def shift_up(N: int = 5, d: int = 2, s: int = 2) -> FunctionConstruction:
    """Prop. H.8 corrected: ``shift_up(y, s) = (y_s .. y_{N-1}; 0^{s x d})`` in ONE layer with
    circular convolution (the paper's 3-layer construction is erratum S003-shift-up)."""
    _shift_args(N, d, s)
    return stack("s003-shift-up", REF_H8 + " (corrected)", full_layout(N, d), [shift_up_layer(N, d, s)],
                 {"u": (N, d)}, _u_state(N, d), _shift_up_spec(N, d, s), {"s": s})


def shift_up_as_printed(N: int = 5, d: int = 2, s: int = 2) -> FunctionConstruction:
    """Prop. H.8 as printed: (1) ``Y_0 = y ⊛ e_0`` "to reverse the input", (2) ``Y_1 =
    shift_down(Y_0, s)``, (3) ``Y_2 = Y_1 ⊛ e_0`` "to reverse back"; specification shift_up."""
    _shift_args(N, d, s)
    one = rows_mask(N, d, range(N))
    L0 = paper_layer(N, d, b1=one, h=taps(N, d, {0: 1}), causal=False)
    L2 = paper_layer(N, d, b1=one, h=taps(N, d, {0: 1}), causal=False)
    return stack("s003-shift-up (as printed)", REF_H8 + " as printed", full_layout(N, d),
                 [L0, shift_down_layer(N, d, s), L2], {"u": (N, d)}, _u_state(N, d), _shift_up_spec(N, d, s))


def shift_down_index_as_printed(N: int = 5, d: int = 2, s: int = 2) -> FunctionConstruction:
    """Prop. H.8 as printed: ``h_s[n, :] = 1^d`` iff ``n = s + 1`` (0-based rows, H.1.1)."""
    _shift_args(N, d, s)
    return stack("s003-shift-down (as printed)", REF_H8 + " as printed", full_layout(N, d),
                 [shift_down_layer(N, d, s, tap=s + 1)], {"u": (N, d)}, _u_state(N, d), _shift_down_spec(N, d, s))


# ====================================================================== Prop. H.9

def add(n: int = 2, d: int = 2, N: int = 5, *, as_printed: bool = False) -> FunctionConstruction:
    """Prop. H.9 ``add_n(y : x, S)``: ``y = (x; S; 0)`` -> ``z = (1^n; S + x; 0)`` in 2 layers.

    Layer 1: ``W = 0``, ``h^1(X) = 1 + X^n``, ``b_1^1 = (0^n; 1^n; 0)``, ``b_2^1 = 0``.
    Layer 2: ``W = 0``, ``h^2 = e_0``, ``b_1^2 = (1^n; 1^n; 0)``, ``b_2^2 = (1^n; 0^n; 0)``.
    ``as_printed``: layer 2 called as printed, ``BaseConv(z^1, 0, h^2, b_1^2, b_1^2)``."""
    _check(n >= 1 and d >= 1 and N >= 2 * n, f"add_n needs n >= 1, d >= 1 and N >= 2n (got n={n}, N={N})")
    lay = row_layout(N, d, [("x", n), ("S", n)])
    L1 = paper_layer(N, d, b1=rows_mask(N, d, range(n, 2 * n)), h=taps(N, d, {0: 1, n: 1}))
    b12 = rows_mask(N, d, range(2 * n))
    b22 = b12 if as_printed else rows_mask(N, d, range(n))
    L2 = paper_layer(N, d, b1=b12, h=taps(N, d, {0: 1}), b2=b22)

    def mk(v):
        S = Z(N, d)
        S[:n], S[n:2 * n] = v["x"], v["S"]
        return S

    def spec(v):
        out = Z(N, d)
        out[:n] = 1
        out[n:2 * n] = np.asarray(v["S"], dtype=object) + np.asarray(v["x"], dtype=object)
        return out
    return stack("s003-add" + (" (as printed)" if as_printed else ""), REF_H9 + (" as printed" if as_printed else ""),
                 lay, [L1, L2], {"x": (n, d), "S": (n, d)}, mk, spec)


# ====================================================================== Prop. H.10

def remember_min_rows(n: int, m: int, s: int, t: int) -> int:
    """Rows the construction needs: the copy of v lands on rows [2n+2s+m+t, 2n+2s+2m+t)."""
    return 2 * n + 2 * s + 2 * m + t


def remember_layers(N: int, d: int, n: int, m: int, s: int, t: int, h, p, *, variant: str = "corrected") -> list:
    """The layers of Prop. H.10 (``W = 0`` throughout).

    * layer 1 (as printed, correct): ``h^1(X) = h(X) + X^{n+m+s+t}``, ``b_1^1 = (p [n+s];
      0^{m+t}; 0^n; 0^s; 1^m; 0)``: ``z^1 = (p ⊙ (h*x); 0; v at rows [2n+2s+m+t, ..+m); 0)``;
    * layer 2: ``h^2(X) = 1 + X^{n+m+s+t}``; ``variant="corrected"``: ``b_1^2 = 1`` on rows
      ``[n+s+m+t, 2n+2s+2m+t)``; ``"printed"``: ``b_1^2 = (0^{n+s}; 0^{m+t}; 0^n; 1^{n+s}; 1^m; 0)``;
    * shift_up by ``n+s+m+t`` (corrected) / ``2n+s+m+t`` (printed), one corrected
      shift_up layer (Prop. H.8; the paper counts 3 layers for it);
    * ``variant="fused"`` [derived]: layer 1, then ONE circular layer with ``h(X) = 1 +
      X^{N-(n+s+m+t)}`` and ``b_1 = 1`` on rows ``[0, n+s+m)``: ``z^1`` already holds
      ``p ⊙ (h*x)`` on rows ``[0, n+s)``, and the wrap-around tap moves ``v`` up by
      ``n+s+m+t`` onto rows ``[n+s, n+s+m)`` (the wrapped copy of ``p ⊙ (h*x)`` lands on
      rows ``>= N-(n+s+m+t) >= n+s+m``, masked): 2 layers.

    ``h`` is a list of per-lag rows (length <= min(s, t) + 1), ``p`` is (n+s, d).
    Rows outside [0, N) are clipped (used for the undersized as-printed check).
    """
    k = n + m + s + t
    h1 = Z(N, d)
    for lag, row in enumerate(h):
        if lag < N:
            h1[lag, :] = row
    if k < N:
        h1[k, :] = h1[k, :] + 1
    b11 = Z(N, d)
    for r in range(min(n + s, N)):
        b11[r, :] = p[r]
    for r in range(2 * n + 2 * s + m + t, min(2 * n + 2 * s + 2 * m + t, N)):
        b11[r, :] = 1
    L1 = paper_layer(N, d, b1=b11, h=h1)
    if variant == "fused":  # layer 2 and the shift in one circular layer (derived)
        h2 = taps(N, d, {0: 1, (N - k) % N: 1})
        return [L1, paper_layer(N, d, b1=rows_mask(N, d, range(n + s + m)), h=h2, causal=False)]
    if variant == "corrected":
        mask2, up = range(k, 2 * n + 2 * s + 2 * m + t), k
    elif variant == "printed":
        mask2, up = range(2 * n + s + m + t, 3 * n + 2 * s + 2 * m + t), 2 * n + s + m + t
    else:
        raise ValueError(f"unknown variant {variant!r}")
    L2 = paper_layer(N, d, b1=rows_mask(N, d, mask2), h=taps(N, d, {0: 1, k: 1}))
    L3 = shift_up_layer(N, d, min(up, N))
    return [L1, L2, L3]


def remember_stack(N, d, n, m, s, t, h, p, *, name, reference, variant="corrected", p_spec=None,
                   extra_vars=None, names=("x", "gap", "v")) -> FunctionConstruction:
    """A remember construction on ``y = (x [n]; 0^s; v [m]; 0)`` with specification
    ``(p ⊙ (x * h) [n+s]; v [m]; 0)``.  ``p_spec(v)`` (default: the fixed ``p``) is the
    multiplier the specification demands (data-dependent in the H.12 / H.21 errata)."""
    layers = remember_layers(N, d, n, m, s, t, h, p, variant=variant)
    lay = row_layout(N, d, [(names[0], n), (names[1], s), (names[2], m)])
    hcols = [[h[lag][c] for lag in range(len(h))] for c in range(d)]

    def mk(vv):
        S = Z(N, d)
        S[:n] = vv["x"]
        S[n + s:n + s + m] = vv["v"]
        return S

    def spec(vv):
        P = p if p_spec is None else p_spec(vv)
        x = np.asarray(vv["x"], dtype=object)
        out = Z(N, d)
        for c in range(d):
            full = conv_full(list(x[:, c]), hcols[c]) if n else []
            for r in range(min(n + s, len(full))):
                out[r, c] = P[r][c] * full[r]
        out[n + s:n + s + m] = vv["v"]
        return out
    variables = {"x": (n, d), "v": (m, d)}
    variables.update(extra_vars or {})
    return stack(name, reference, lay, layers, variables, mk, spec)


def _remember_args(n, m, s, t, d):
    _check(min(n, m, d) >= 1 and min(s, t) >= 0, f"remember needs n, m, d >= 1 and s, t >= 0 (got n={n}, m={m}, "
                                                  f"s={s}, t={t}, d={d})")


def _remember_weights(n, s, t, d, seed):
    rng = np.random.default_rng(seed)
    h = [list(r) for r in rand_rat(rng, (min(s, t) + 1, d), nonzero=True)]
    p = [list(r) for r in rand_rat(rng, (n + s, d), nonzero=True)]
    return h, p


def remember(n: int = 2, m: int = 2, s: int = 1, t: int = 1, d: int = 2, N: int = 11, seed: int = 1,
             layers: int = 3) -> FunctionConstruction:
    """Prop. H.10 corrected: ``remember_{n,m,s,t}(y : x, v, h, p)`` maps ``y = (x [n]; 0^s;
    v [m]; 0)`` to ``(p ⊙ (x * h) [n+s]; v [m]; 0)`` in 3 layers (paper: 5), for a filter
    ``h`` of length ``min(s, t) + 1`` and any ``N >= 2n + 2s + 2m + t`` (paper: ``n+m+s+t <= N``).
    ``h`` and ``p`` are random dyadic from ``seed``.  ``layers=3``: the paper's steps with the
    corrections (layer 1, corrected layer 2, one-layer shift_up); ``layers=2``: the derived
    fused form (``remember_layers``, ``variant="fused"``)."""
    _remember_args(n, m, s, t, d)
    _check(layers in (2, 3), f"remember: layers must be 2 (fused) or 3 (the paper's corrected steps), got {layers}")
    need = remember_min_rows(n, m, s, t)
    _check(N >= need, f"remember needs N >= 2n+2s+2m+t = {need} (got N={N}); the paper's n+m+s+t <= N is too "
                      f"weak (erratum S003-remember-size)")
    h, p = _remember_weights(n, s, t, d, seed)
    return remember_stack(N, d, n, m, s, t, h, p, name="s003-remember", reference=REF_H10 + " (corrected)",
                          variant="corrected" if layers == 3 else "fused")


def remember_mask_as_printed(n=2, m=2, s=1, t=1, d=2, seed=1) -> FunctionConstruction:
    N = 3 * n + 2 * s + 2 * m + t  # room for the printed mask
    h, p = _remember_weights(n, s, t, d, seed)
    return remember_stack(N, d, n, m, s, t, h, p, name="s003-remember (as printed)",
                          reference=REF_H10 + " as printed (layer-2 mask, shift_up 2n+s+m+t)", variant="printed")


def remember_mask_corrected(n=2, m=2, s=1, t=1, d=2, seed=1) -> FunctionConstruction:
    return remember(n, m, s, t, d, 3 * n + 2 * s + 2 * m + t, seed)


def remember_size_as_printed(n=2, m=2, s=1, t=1, d=2, seed=1) -> FunctionConstruction:
    N = n + m + s + t  # the paper's stated requirement n + m + s + t <= N, with equality
    h, p = _remember_weights(n, s, t, d, seed)
    return remember_stack(N, d, n, m, s, t, h, p, name="s003-remember (as printed, N=n+m+s+t)",
                          reference=REF_H10 + " as printed (N = n+m+s+t)")


# ====================================================================== seed 000 Thm. D.38, line 6

REF_D38 = "seed 000 App. D.2, Thm. D.38 proof, line 6 (remember(u_j^(2), 2N, 4N-1, h), Prop. D.26)"


def d38_line6(M: int = 2, D: int = 2, *, as_printed: bool = False) -> FunctionConstruction:
    """Seed 000 Thm. D.38, line 6: ``(u; m; t; s) -> (u; m; t; s + t)`` on 4M rows (the
    paper's N is M here).  As printed: one layer ``BaseConv(., 0, 1, H̄, 0)`` with
    ``H̄(X) = 1 + X^M`` (the only layer the proof gives, "(4N, 1, D, 4N, D)").
    Corrected (derived), 2 layers, ``W = 0``: ``h^1 = 1 + 2X^M``, ``b_1^1 = (1; 1; 1; 2)``;
    ``h^2 = 1 - 2X^M + 4X^{2M} - 8X^{3M}``, ``b_1^2 = (1; 1; 1; 1/2)`` (blocks of M rows)."""
    _check(M >= 1 and D >= 1, "need M >= 1 and D >= 1")
    N = 4 * M
    lay = row_layout(N, D, [("u", M), ("m", M), ("t", M), ("s", M)])
    one = rows_mask(N, D, range(N))
    if as_printed:
        layers = [paper_layer(N, D, b1=one, h=taps(N, D, {0: 1, M: 1}))]
    else:
        b11 = rows_mask(N, D, range(3 * M))
        b11[3 * M:] = 2
        b12 = rows_mask(N, D, range(3 * M))
        b12[3 * M:] = Fraction(1, 2)
        layers = [paper_layer(N, D, b1=b11, h=taps(N, D, {0: 1, M: 2})),
                  paper_layer(N, D, b1=b12, h=taps(N, D, {0: 1, M: -2, 2 * M: 4, 3 * M: -8}))]

    def mk(v):
        S = Z(N, D)
        for i, k in enumerate("umts"):
            S[i * M:(i + 1) * M] = v[k]
        return S

    def spec(v):
        S = mk(v)
        S[3 * M:] = np.asarray(v["s"], dtype=object) + np.asarray(v["t"], dtype=object)
        return S
    return stack("s000-d38-line6" + (" (as printed)" if as_printed else " (corrected)"), REF_D38, lay, layers,
                 {k: (M, D) for k in "umts"}, mk, spec)


# ====================================================================== registration

register(CatalogueEntry(
    name="s003-linear", paper=REF_H7, summary="Linear: u -> u W in one BaseConv layer (W given, b1 = 0, h = 0, b2 = 1)",
    build=linear, sizes={"N": 4, "d": 3, "seed": 1}, claim="(N, 1, d, N, d)-BaseConv (Lemma H.7)"))
register(CatalogueEntry(
    name="s003-conv", paper=REF_H7, summary="Convolution: u -> u * h (causal) in one layer (W = 0, b1 = 1, b2 = 0)",
    build=conv, sizes={"N": 5, "d": 2, "seed": 1}, claim="(N, 1, d, N, d)-BaseConv (Lemma H.7)"))
register(CatalogueEntry(
    name="s003-gating", paper=REF_H7, summary="Gating by a fixed v: u -> v ⊙ u in one layer (b1 = v, h = e_0)",
    build=gating, sizes={"N": 4, "d": 2, "seed": 1}, claim="(N, 1, d, N, d)-BaseConv (Lemma H.7)"))
register(CatalogueEntry(
    name="s003-shift-down", paper=REF_H8 + "; seed 000 Def. D.23, Prop. D.24",
    summary="shift_down(y, s) in one layer, filter X^s (seed 000 Prop. D.24: N = 2M, s = M)",
    build=shift_down, sizes={"N": 5, "d": 2, "s": 2}, claim="(N, 1, d, N, d)-BaseConv (Prop. H.8)"))
register(CatalogueEntry(
    name="s003-shift-up", paper=REF_H8 + " (corrected)",
    summary="shift_up(y, s) in ONE layer: circular filter X^{(N-s) mod N} and a row mask",
    build=shift_up, sizes={"N": 5, "d": 2, "s": 2},
    claim="(N, 3, d, N, d)-BaseConv per Prop. H.8 (flawed 3-layer proof, erratum S003-shift-up); here 1 layer"))
register(CatalogueEntry(
    name="s003-add", paper=REF_H9, summary="add_n(y : x, S): (x; S; 0) -> (1^n; S + x; 0) in 2 layers",
    build=add, sizes={"n": 2, "d": 2, "N": 5}, claim="(N, 2, d, N, d)-BaseConv, 2n <= N (Prop. H.9)"))
register(CatalogueEntry(
    name="s003-remember", paper=REF_H10 + " (corrected)",
    summary="remember_{n,m,s,t}(y : x, v, h, p): (x; 0^s; v; 0) -> (p ⊙ (x*h); v; 0) in 3 layers (2 fused)",
    build=remember, sizes={"n": 2, "m": 2, "s": 1, "t": 1, "d": 2, "N": 11, "seed": 1, "layers": 3},
    claim="(N, 5, d, N, d)-BaseConv for n+m+s+t <= N (Prop. H.10); here 3 layers (--set layers=2: fused), "
          "needs N >= 2n+2s+2m+t"))

register_erratum(Erratum(
    id="S003-shift-kernel-index", paper="seed 003", location="Prop. H.8 (shift_down filter)",
    as_printed="h_s[n, :] = 1^d if n = s + 1, 0 otherwise (0-based rows, App. H.1.1)",
    correction="h_s[s, :] = 1^d (h_s(X) = X^s, as the proof uses)",
    as_printed_check=lambda: shift_down_index_as_printed(5, 2, 2), corrected_check=lambda: shift_down(5, 2, 2)))
register_erratum(Erratum(
    id="S003-shift-up", paper="seed 003", location="Prop. H.8 (shift_up, 3 layers)",
    as_printed="Y0 = y ⊛ e0 ('reverse'); Y1 = shift_down(Y0, s); Y2 = Y1 ⊛ e0 ('reverse back')",
    correction="one layer: circular h(X) = X^{(N-s) mod N}, b1 = 1 on rows 0..N-s-1, W = 0, b2 = 0 "
               "(⊛ e0 is the identity; no convolution reverses)",
    as_printed_check=lambda: shift_up_as_printed(5, 2, 2), corrected_check=lambda: shift_up(5, 2, 2)))
register_erratum(Erratum(
    id="S003-add-bias", paper="seed 003", location="Prop. H.9 (add_n, layer 2 call)",
    as_printed="z = BaseConv(z1, 0, h2, b1^2, b1^2)",
    correction="z = BaseConv(z1, 0, h2, b1^2, b2^2) with b2^2 = (1^n; 0^n; 0)",
    as_printed_check=lambda: add(2, 2, 5, as_printed=True), corrected_check=lambda: add(2, 2, 5)))
register_erratum(Erratum(
    id="S003-remember-mask", paper="seed 003", location="Prop. H.10 (remember, layer 2 and the final shift_up)",
    as_printed="b1^2 = (0^{n+s}; 0^{m+t}; 0^n; 1^{n+s}; 1^m; 0), then shift_up by 2n+s+m+t",
    correction="b1^2 = 1 on rows [n+s+m+t, 2n+2s+2m+t), then shift_up by n+s+m+t",
    as_printed_check=lambda: remember_mask_as_printed(), corrected_check=lambda: remember_mask_corrected()))
register_erratum(Erratum(
    id="S003-remember-size", paper="seed 003", location="Prop. H.10 (remember, size condition)",
    as_printed="the (corrected) construction for n+m+s+t <= N, here N = n+m+s+t",
    correction="N >= 2n+2s+2m+t (layer 1 parks v on rows [2n+2s+m+t, 2n+2s+2m+t))",
    as_printed_check=lambda: remember_size_as_printed(),
    corrected_check=lambda: remember(2, 2, 1, 1, 2, remember_min_rows(2, 2, 1, 1), 1)))
register_erratum(Erratum(
    id="S000-D38-remember-1-layer", paper="seed 000", location="Thm. D.38 proof, line 6 ('by Prop. D.26 ... "
                                                              "(4N, 1, D, 4N, D)-BaseConv')",
    as_printed="one layer BaseConv(u_j^(2), 0, 1, H̄, 0), H̄(X) = 1 + X^N, on (u; m; t; s)",
    correction="2 layers (W = 0): h1 = 1 + 2X^N, b1 = (1;1;1;2); h2 = 1 - 2X^N + 4X^2N - 8X^3N, b1 = (1;1;1;1/2). "
               "No single layer works: with W = 0 block 1 forces h[N] = 0, block 3 needs h[N] = 1; with W != 0 "
               "every data row's gate depends on its own row, so no row can receive t",
    as_printed_check=lambda: d38_line6(2, 2, as_printed=True), corrected_check=lambda: d38_line6(2, 2)))
