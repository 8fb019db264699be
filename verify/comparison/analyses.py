"""Float metrics: functional differences, sensitivities, invariants up to symmetry with the
interpolation curve, the implicit weight vector per layer, and iterating both models as solvers."""
from __future__ import annotations

import itertools
import math
from typing import Callable, NamedTuple

import numpy as np

from constructions import kinds, ops
from constructions.base import Construction, run_layers
from constructions.layers import LSA, BaseConv, LSAHead, TokenLSA, TokenLSAHead
from constructions.layout import Layout

from .models import (Problems, Stack, TOKEN_NAMES, prediction, run_float, to_float, to_torch,
                     var_names)


def _f(x) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


# ------------------------------------------------------------------ embedding

def input_state(con: Construction, P: Problems, x=None, q=None) -> np.ndarray:
    """The batched float input state of the problems (seed 004 tokens built directly: raw tokens)."""
    q = P.q if q is None else q
    if var_names(con) is TOKEN_NAMES:
        B, n, d = P.A.shape
        E = np.zeros((B, n + 1, d + 1))
        E[:, :n, :d], E[:, :n, d], E[:, n, :d] = P.A, P.b, q
        return E
    v = P.variables(con, x)
    v[var_names(con)["q"]] = q
    return np.asarray(con.input_state(v), dtype=np.float64)


def query_jacobian(con: Construction, P: Problems) -> np.ndarray:
    """(d, B, *state): d state / d q_j (the embeddings place q affinely)."""
    d = P.q.shape[1]
    base = input_state(con, P, q=np.zeros_like(P.q))
    out = []
    for j in range(d):
        e = np.zeros_like(P.q)
        e[:, j] = 1.0
        out.append(input_state(con, P, q=e) - base)
    return np.stack(out)


def region_masks(layout: Layout) -> dict[str, np.ndarray]:
    masks, covered = {}, np.zeros(layout.shape, dtype=bool)
    for name, reg in layout.regions.items():
        m = np.zeros(layout.shape, dtype=bool)
        m[reg.index] = True
        masks[name] = m
        covered |= m
    if not covered.all():
        masks["(unassigned)"] = ~covered
    return masks


def section_of(stack: Stack, i: int) -> str:
    p, b = len(stack.prologue), sum(len(x) for x in stack.bodies)
    if i < p:
        return f"prologue[{i}]"
    if i < p + b:
        nb = len(stack.bodies[0])
        return f"body{(i - p) // nb}[{(i - p) % nb}]"
    return f"epilogue[{i - p - b}]"


# ------------------------------------------------------------------ (1) functional

def functional(con: Construction, learned: Stack, constructed: Stack, problem_sets: list[Problems],
               per_layer_sets: int = 1) -> dict:
    Lf = [to_float(L) for L in learned.layers]
    Cf = [to_float(L) for L in constructed.layers]
    masks = region_masks(con.layout)
    rows, per_layer = [], []
    for si, P in enumerate(problem_sets):
        S0 = input_state(con, P)
        Ls = run_float(Lf, S0, keep=True)
        Cs = run_float(Cf, S0, keep=True)
        pl, pc = prediction(con, Ls[-1]), prediction(con, Cs[-1])
        diff = pl - pc
        ref = float(np.sqrt(np.mean(pc ** 2)))
        rows.append({"set": P.label, "problems": int(len(pc)),
                     "max_abs": _f(np.max(np.abs(diff))), "rms": _f(np.sqrt(np.mean(diff ** 2))),
                     "relative_rms": _f(np.sqrt(np.mean(diff ** 2)) / ref) if ref > 0 else None,
                     "rms_constructed_prediction": ref,
                     "learned_vs_lstsq_rms": _f(np.sqrt(np.mean((pl - np.einsum("bi,bi->b", P.q, P.x_star)) ** 2))),
                     "constructed_vs_lstsq_rms": _f(np.sqrt(np.mean((pc - np.einsum("bi,bi->b", P.q, P.x_star)) ** 2)))})
        if si < per_layer_sets:
            layers = []
            first = None
            for i, (a, b) in enumerate(zip(Ls, Cs)):
                D = np.abs(a - b)
                regs = {name: _f(np.max(np.where(m, D, 0.0))) for name, m in masks.items()}
                mx = _f(np.max(D))
                worst = max(regs, key=lambda r: -1 if regs[r] is None else regs[r]) if mx else None
                if first is None and (mx is None or mx > 0):
                    first = {"layer": i, "section": section_of(learned, i), "region": worst,
                             "entry": _worst_entry(con.layout, D)}
                layers.append({"layer": i, "section": section_of(learned, i), "max_abs": mx,
                               "worst_region": worst, "regions": regs})
            per_layer.append({"set": P.label, "first_difference": first, "layers": layers})
    return {"predictions": rows, "per_layer": per_layer}


def _worst_entry(layout, D):
    flat = np.nan_to_num(D, nan=np.inf).reshape(-1, *layout.shape).max(axis=0)
    i, j = np.unravel_index(int(np.argmax(flat)), flat.shape)
    return layout.describe(int(i), int(j))


# ------------------------------------------------------------------ (2) sensitivities

def _query_grad(con, layers_t, P, J):
    import torch

    S = torch.tensor(input_state(con, P), dtype=torch.float64, requires_grad=True)
    X = run_layers(layers_t, S)
    pred = prediction(con, X)
    (g,) = torch.autograd.grad(pred.sum(), S)
    g = g.numpy()
    B, d = J.shape[1], J.shape[0]
    return np.einsum("jbs,bs->bj", J.reshape(d, B, -1), g.reshape(B, -1))  # (B, d)


def sensitivities(con, learned: Stack, constructed: Stack, problem_sets: list[Problems]) -> list[dict]:
    Lt = [to_torch(L) for L in learned.layers]
    Ct = [to_torch(L) for L in constructed.layers]
    rows = []
    for P in problem_sets:
        J = query_jacobian(con, P)
        gl, gc = _query_grad(con, Lt, P, J), _query_grad(con, Ct, P, J)
        nl, nc = np.linalg.norm(gl, axis=1), np.linalg.norm(gc, axis=1)
        with np.errstate(all="ignore"):
            cos = np.einsum("bj,bj->b", gl, gc) / (nl * nc)
        l2 = np.linalg.norm(gl - gc, axis=1)
        rows.append({"set": P.label, "cosine_mean": _f(np.nanmean(cos)), "cosine_min": _f(np.nanmin(cos)),
                     "l2_mean": _f(np.mean(l2)), "l2_max": _f(np.max(l2)),
                     "relative_l2_mean": _f(np.mean(l2 / np.where(nc > 0, nc, np.nan)))})
    return rows


# ------------------------------------------------------------------ (4) invariants

def _cos(a, b):
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0 and nb == 0:
        return 1.0, na, nb
    if na == 0 or nb == 0:
        return 0.0, na, nb
    return float(np.dot(a.ravel(), b.ravel()) / (na * nb)), na, nb


def _tensor_cmp(factors_l, factors_c) -> dict:
    """Compare the rank-one tensors f_1 (x) f_2 (x) ... (the invariant of a scaling symmetry).

    The distance is computed from the telescoping sum of rank-one differences (exactly 0 for
    equal factors, no cancellation for small ones)."""
    cs, sl, sc = 1.0, 1.0, 1.0
    for a, b in zip(factors_l, factors_c):
        c, na, nb = _cos(a, b)
        cs, sl, sc = cs * c, sl * na, sc * nb
    m = len(factors_c)
    terms = []  # T_l - T_c = sum_i c_1..c_{i-1} (l_i - c_i) l_{i+1}..l_m
    for i in range(m):
        f = [np.ravel(x) for x in factors_c[:i]] + [np.ravel(factors_l[i] - factors_c[i])] + \
            [np.ravel(x) for x in factors_l[i + 1:]]
        if np.any(f[i]):
            terms.append(f)
    d2 = sum(float(np.prod([np.dot(x, y) for x, y in zip(s_, t_)])) for s_ in terms for t_ in terms)
    dist = math.sqrt(max(d2, 0.0))
    return {"scale_learned": sl, "scale_constructed": sc, "cosine": cs,
            "distance": dist, "relative_distance": dist / sc if sc > 0 else (0.0 if sl == 0 else None)}


def baseconv_factors(L: BaseConv) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per inner channel c: gate (W_gate[:, c], b_gate[:, c]), convolution branch (the affine map
    u -> h_c * (u W_in[:, c] + b_in[:, c]) + b_conv[:, c], as (h_c W_in[:, c]^T, h_c * b_in_c + b_conv_c)),
    output W_out[c, :]; the channel's term is invariant under the per-channel rescalings."""
    out = []
    T, C = L.shape
    for c in range(C):
        g = np.concatenate([L.W_gate[:, c], L.b_gate[:, c]])
        aff = ops.conv(L.b_in[:, c:c + 1], L.h[:, c:c + 1], causal=L.causal, same=L.same)[:, 0] + L.b_conv[:, c]
        k = np.concatenate([np.outer(L.h[:, c], L.W_in[:, c]).ravel(), aff])
        out.append((g, k, L.W_out[c, :].copy()))
    return out


class Invariants(NamedTuple):
    """How one layer kind's weights are compared up to reparameterisation (``invariants``)."""

    unit: str  # what one row compares: "channel" or "head"
    factors: Callable  # layer -> per unit, the factors whose tensor product is invariant
    invariant: str  # the invariant's name, as the report prints it
    matched: bool  # units may come in any order in a learned layer (heads): matched first


# per layer kind: the reparameterisation-invariant factors of each unit (constructions/kinds.py)
kinds.provide("baseconv", "invariants", Invariants("channel", baseconv_factors, "gate (x) conv (x) W_out", False))
kinds.provide("lsa", "invariants", Invariants(
    "head", lambda L: [(h.W3 @ h.W1.T, h.W2) for h in L.heads], "W3 W1^T (x) W2", True))  # (HW3)(HW1)^T(HW2)
kinds.provide("token_lsa", "invariants", Invariants(
    "head", lambda L: [(h.Q, h.P) for h in L.heads], "Q (x) P", True))  # E Q^T G P^T
_ELSA_NO_INVARIANT = ("no invariant is derived for ELSA: its bias matrices B1, B2, B3 enter each head's "
                      "cubic product alongside the weights, so W3 W1^T (x) W2 is not invariant")
kinds.lacks("elsa", "invariants", _ELSA_NO_INVARIANT)


def head_factors(L) -> list[tuple[np.ndarray, np.ndarray]]:
    """The invariant factors of each head of an attention layer (a kind whose unit is the head)."""
    inv = kinds.get(L.kind, "invariants")
    if inv.unit != "head":
        raise kinds.KindUnsupported(f"layer kind {L.kind!r} has no heads (its invariant compares {inv.unit}s)")
    return inv.factors(L)


def _match_heads(fl, fc):
    """Learned head order matching the constructed heads best (largest sum of |tensor cosine|): every
    permutation tried up to 6 heads, an optimal assignment (``scipy.optimize.linear_sum_assignment``,
    the same objective) above."""
    H = len(fc)
    if H > 6:
        from scipy.optimize import linear_sum_assignment

        score = np.array([[abs(_tensor_cmp(fl[i], fc[u])["cosine"]) for u in range(H)] for i in range(H)])
        rows, cols = linear_sum_assignment(-score)
        order = [0] * H
        for i, u in zip(rows, cols):
            order[int(u)] = int(i)
        return order
    score = lambda p: sum(abs(_tensor_cmp(fl[p[i]], fc[i])["cosine"]) for i in range(H))  # noqa: E731
    return list(max(itertools.permutations(range(H)), key=score))


def _baseconv_gram(a: BaseConv, b: BaseConv) -> np.ndarray:
    """``M[i, c]``: the inner product of ``a``'s inner channel ``i`` and ``b``'s channel ``c`` as the
    rank-one tensors gate (x) conv (x) W_out of :func:`baseconv_factors` (a product of the three factors'
    inner products; the convolution factor's is (h_i . h_c)(W_in_i . W_in_c) + aff_i . aff_c), formed
    with a few matrix products instead of C^2 tensors."""
    def aff(L):
        T = L.shape[0]
        return ops.conv(L.b_in, L.h, causal=L.causal, same=L.same, method="fft" if T > 64 else "direct") + L.b_conv
    gate = np.vstack([a.W_gate, a.b_gate]).T @ np.vstack([b.W_gate, b.b_gate])
    conv = (a.h.T @ b.h) * (a.W_in.T @ b.W_in) + aff(a).T @ aff(b)
    return gate * conv * (a.W_out @ b.W_out.T)


def match_channels(a: BaseConv, b: BaseConv) -> list[int]:
    """The inner channel of float layer ``a`` matched to each inner channel of ``b`` (a permutation of
    BaseConv's inner channels is a symmetry: the columns of W_in, b_in, h, b_conv, W_gate, b_gate and the
    rows of W_out permuted together): the assignment minimising the summed squared distance of the
    channels' rank-one tensors gate (x) conv (x) W_out, which the per-channel scalings and sign flips
    leave unchanged (``scipy.optimize.linear_sum_assignment``).  The identity where it is as good (within
    rounding): an unpermuted layer keeps its order, ties among equal channels included."""
    from scipy.optimize import linear_sum_assignment

    C = a.shape[1]
    with np.errstate(all="ignore"):
        na, nb = np.diag(_baseconv_gram(a, a)), np.diag(_baseconv_gram(b, b))
        cost = na[:, None] + nb[None, :] - 2 * _baseconv_gram(a, b)
    if not np.all(np.isfinite(cost)):
        return list(range(C))
    cost = np.maximum(cost, 0.0)
    rows, cols = linear_sum_assignment(cost)
    best = float(cost[rows, cols].sum())
    ident = float(np.trace(cost))
    if ident <= best + 1e-12 * max(float(na.sum() + nb.sum()), 1.0):
        return list(range(C))
    order = [0] * C
    for i, c in zip(rows, cols):
        order[int(c)] = int(i)
    return order


def permute_channels(L: BaseConv, order: list[int]) -> BaseConv:
    """``L`` with inner channel ``order[c]`` moved to position ``c`` (the same function)."""
    o = list(order)
    cols = {k: getattr(L, k)[:, o] for k in ("W_in", "b_in", "h", "b_conv", "W_gate", "b_gate")}
    return BaseConv(**cols, W_out=L.W_out[o, :], b_out=L.b_out, causal=L.causal, residual=L.residual, same=L.same)


def invariants(learned: Stack, constructed: Stack, tol: float = 0.0) -> dict:
    layers = []
    for i, (a, b) in enumerate(zip(learned.layers, constructed.layers)):
        a, b = to_float(a), to_float(b)
        if not kinds.has(a.kind, "invariants"):
            layers.append({"layer": i, "kind": a.kind, "supported": False})
            continue
        inv = kinds.get(a.kind, "invariants")
        fl, fc = inv.factors(a), inv.factors(b)
        if inv.matched:
            perm = _match_heads(fl, fc)
        elif isinstance(a, BaseConv):  # inner channels in any order: matched (match_channels)
            perm = match_channels(a, b)
        else:
            perm = list(range(len(fc)))
        unit = inv.unit
        rows = [{unit: u, **({f"learned_{unit}": perm[u]} if inv.matched or perm[u] != u else {}),
                 **_tensor_cmp(fl[perm[u]], fc[u])} for u in range(len(fc))]
        extra = {"invariant": inv.invariant} if inv.matched else \
            {"b_out_max_abs_diff": float(np.max(np.abs(a.b_out - b.b_out)))}
        differing = [r[unit] for r in rows if (r["distance"] or 0) > tol]
        layers.append({"layer": i, "section": section_of(learned, i), "kind": a.kind, "unit": unit,
                       "differing": differing,
                       "max_relative_distance": max((r["relative_distance"] or 0) for r in rows),
                       "max_distance": max(r["distance"] for r in rows), "rows": rows, **extra})
    return {"layers": layers}


# ------------------------------------------------------------------ (4) interpolation in invariant space

def _align_baseconv(a: BaseConv, b: BaseConv) -> BaseConv:
    """``a`` reparametrised (per-channel rescalings, function unchanged) towards ``b``: per inner channel
    the scales ``s`` (``W_in``, ``b_in``), ``t`` (``h``), ``u`` (``W_gate``, ``b_gate``), with ``b_conv``
    times ``s t`` and ``W_out``'s row divided by ``s t u``, that minimise the channel's summed squared
    difference to ``b`` (:func:`_refined_scales`, from the factor norms and signs of ``b``)."""
    W_in, b_in, h, b_conv = a.W_in.copy(), a.b_in.copy(), a.h.copy(), a.b_conv.copy()
    W_gate, b_gate, W_out = a.W_gate.copy(), a.b_gate.copy(), a.W_out.copy()
    C = a.shape[1]
    init = np.ones((C, 3))  # (s, t, u) per channel: the construction's factor norms and signs
    for c in range(C):
        def ratio(x, y):
            c_, nx, ny = _cos(x, y)
            if nx == 0 or ny == 0:
                return 1.0
            return (ny / nx) * (-1.0 if c_ < 0 else 1.0)
        init[c] = (ratio(np.concatenate([W_in[:, c], b_in[:, c]]), np.concatenate([b.W_in[:, c], b.b_in[:, c]])),
                   ratio(h[:, c], b.h[:, c]),
                   ratio(np.concatenate([W_gate[:, c], b_gate[:, c]]), np.concatenate([b.W_gate[:, c], b.b_gate[:, c]])))
    sc = _refined_scales(a, b, init)
    s_, t_, u_ = sc[:, 0], sc[:, 1], sc[:, 2]
    W_gate *= u_
    b_gate *= u_
    h *= t_
    W_in *= s_
    b_in *= s_
    b_conv *= s_ * t_
    W_out /= (s_ * t_ * u_)[:, None]
    return BaseConv(W_in, b_in, h, b_conv, W_gate, b_gate, W_out, a.b_out.copy(), causal=a.causal,
                    residual=a.residual, same=a.same)


#: Gauss-Newton iterations of the per-channel scale refinement (each a 3 x 3 solve per channel)
ALIGN_ITERATIONS = 12
#: the magnitude of a refined scale stays within exp(+-ALIGN_LOG_BOUND)
ALIGN_LOG_BOUND = 40.0


def _refined_scales(a: BaseConv, b: BaseConv, init: np.ndarray) -> np.ndarray:
    """Per inner channel the scales (s, t, u), signs those of ``init``, whose reparametrisation of ``a``
    is nearest ``b`` in the summed squared entries of the channel (``W_in``/``b_in`` times s, ``h`` times
    t, ``b_conv`` times s t, ``W_gate``/``b_gate`` times u, ``W_out``'s row times 1/(s t u)): each term is
    ``L l^2 - 2 M l`` in its scale ``l`` (L = |learned|^2, M = <learned, reference>), minimised in the log
    magnitudes by damped Gauss-Newton from ``init`` (a step that does not lower a channel's sum is halved,
    then dropped), so the result is never farther than ``init``.  Norm ratios alone are biased by dense
    noise: a factor's noise goes whole into ``W_out``'s row, the largest entries (a trained file's nearest
    gd-baseconv at 0.076 after that alignment, 0.020 unaligned)."""
    def cols(*xs):
        return np.vstack([np.asarray(x, dtype=np.float64) for x in xs])

    pairs = [(cols(a.W_in, a.b_in), cols(b.W_in, b.b_in)), (cols(a.h), cols(b.h)), (cols(a.b_conv), cols(b.b_conv)),
             (cols(a.W_gate, a.b_gate), cols(b.W_gate, b.b_gate)), (cols(a.W_out.T), cols(b.W_out.T))]
    Wt = np.array([[1, 0, 0], [0, 1, 0], [1, 1, 0], [0, 0, 1], [-1, -1, -1]], dtype=np.float64)  # (5 terms, 3)
    with np.errstate(all="ignore"):
        Lk = np.stack([np.sum(l * l, axis=0) for l, _ in pairs], axis=1)  # (C, 5)
        Mk = np.stack([np.sum(l * r, axis=0) for l, r in pairs], axis=1)
    if not (np.all(np.isfinite(Lk)) and np.all(np.isfinite(Mk))):
        return init
    sig = np.where(init < 0, -1.0, 1.0)
    sk = np.stack([sig[:, 0], sig[:, 1], sig[:, 0] * sig[:, 1], sig[:, 2], sig[:, 0] * sig[:, 1] * sig[:, 2]], axis=1)
    Bk = sk * Mk  # the signed cross terms
    x = np.log(np.abs(init))

    def value(x):
        E = np.exp(x @ Wt.T)
        return np.sum(Lk * E * E - 2 * Bk * E, axis=1)

    f = value(x)
    for _ in range(ALIGN_ITERATIONS):
        E = np.exp(x @ Wt.T)
        g = (2 * Lk * E * E - 2 * Bk * E) @ Wt  # (C, 3)
        H = np.einsum("ck,ki,kj->cij", 2 * Lk * E * E, Wt, Wt)
        H += (1e-12 * np.trace(H, axis1=1, axis2=2) + 1e-300)[:, None, None] * np.eye(3)
        try:
            step = -np.linalg.solve(H, g[..., None])[..., 0]
        except np.linalg.LinAlgError:
            break
        step = np.where(np.isfinite(step), step, 0.0)
        moved = np.zeros(len(x), dtype=bool)
        for damp in (1.0, 0.5, 0.25, 0.125):
            xn = np.clip(x + damp * step, -ALIGN_LOG_BOUND, ALIGN_LOG_BOUND)
            fn = value(xn)
            take = ~moved & np.isfinite(fn) & (fn < f)
            x[take], f[take] = xn[take], fn[take]
            moved |= take
        if not moved.any():
            break
    return sig * np.exp(x)


#: public names of the alignment and the head matching (verify/nearest.py fits the nearest construction with them)
align_baseconv, match_heads = _align_baseconv, _match_heads  # (match_channels, permute_channels: above)


def _lerp_baseconv(a, b, t):
    A = _align_baseconv(permute_channels(a, match_channels(a, b)), b)
    return b.map(lambda x: x) if t == 0 else BaseConv(**{k: (1 - t) * getattr(b, k) + t * getattr(A, k)
                                                        for k in BaseConv.array_fields},
                                                     causal=b.causal, residual=b.residual, same=b.same)


def _lerp_heads(a, b, t):
    """Per matched head, the invariant factors interpolated after the scale (and sign) of the
    learned head is matched to the constructed one."""
    fl, fc = head_factors(a), head_factors(b)
    perm = _match_heads(fl, fc)
    out = []
    for h in range(len(fc)):
        (Fl, Gl), (Fc, Gc) = fl[perm[h]], fc[h]
        cq, nl, nc = _cos(Fl, Fc)
        s = (nc / nl) * (-1.0 if cq < 0 else 1.0) if nl > 0 and nc > 0 else 1.0
        out.append(((1 - t) * Fc + t * Fl * s, (1 - t) * Gc + t * Gl / s))
    return out


def _lerp_lsa(a, b, t):
    n = head_factors(b)[0][0].shape[0]
    return LSA([LSAHead(np.eye(n), G, F) for F, G in _lerp_heads(a, b, t)], residual=b.residual)


def _lerp_token_lsa(a, b, t):
    return TokenLSA([TokenLSAHead(G, F) for F, G in _lerp_heads(a, b, t)], exclude_last=b.exclude_last,
                    residual=b.residual)


# per layer kind: the layer at ``t`` on the path from the constructed ``b`` (t=0) to the aligned learned ``a``
kinds.provide("baseconv", "interpolation", _lerp_baseconv)
kinds.provide("lsa", "interpolation", _lerp_lsa)
kinds.provide("token_lsa", "interpolation", _lerp_token_lsa)
kinds.lacks("elsa", "interpolation", "the path is taken in the invariant factors' space: " + _ELSA_NO_INVARIANT)


def interpolation(con, learned: Stack, constructed: Stack, P: Problems, steps: int = 11) -> dict:
    """Prediction along the straight path in the aligned (symmetry-normalised) parameters from the
    construction (t = 0) to the learned model (t = 1): RMS difference to the construction and RMS
    error against the least-squares prediction q^T x*."""
    Lf = [to_float(L) for L in learned.layers]
    Cf = [to_float(L) for L in constructed.layers]
    S0 = input_state(con, P)
    pc = prediction(con, run_float(Cf, S0))
    target = np.einsum("bi,bi->b", P.q, P.x_star)
    ts = np.linspace(0.0, 1.0, steps)
    lacking = sorted({a.kind for a in Lf if not kinds.has(a.kind, "interpolation")})
    if lacking:
        return {"supported": False, "reason": f"no interpolation for layer kind {', '.join(lacking)}"}
    rows = []
    for t in ts:
        layers = [kinds.get(a.kind, "interpolation")(a, b, float(t)) for a, b in zip(Lf, Cf)]
        p = prediction(con, run_float(layers, S0))
        rows.append({"t": float(t), "rms_vs_constructed": _f(np.sqrt(np.mean((p - pc) ** 2))),
                     "rms_vs_lstsq": _f(np.sqrt(np.mean((p - target) ** 2)))})
    vals = [r["rms_vs_constructed"] for r in rows]
    end = vals[-1]
    bump = max((v for v in vals if v is not None), default=None)
    return {"supported": True, "set": P.label, "curve": rows,
            "monotone": all(x is not None and y is not None and y >= x * (1 - 1e-9) for x, y in zip(vals, vals[1:])),
            "max_over_endpoint": (bump / end) if end else None}


# ------------------------------------------------------------------ (5) implicit weight vector

def _depth_stack(stack: Stack, l: int):
    bodies = [L for j in range(l) for L in stack.bodies[j % max(len(stack.bodies), 1)]]
    return list(stack.prologue) + bodies + list(stack.epilogue)


def implicit_w(con, learned: Stack, constructed: Stack, P: Problems, depth: int | None = None) -> dict:
    """w^l = d prediction / d query of the model cut after l body copies (prologue + l bodies + epilogue).

    For a token-form linear transformer (seed 004) the prediction after l layers is exactly
    <w^l, x_t> (Theorem 4.1, Lemma 4.3 corrected), so this *is* the implicit weight vector; it is
    also recomputed by the corrected recursion as a check.  For gd-lsa / gd-baseconv the constructed
    w^l is the l-th GD iterate; the learned one is the linear predictor its query sees."""
    depth = learned.k if depth is None else depth
    J = query_jacobian(con, P)
    rows = []
    token = var_names(con) is TOKEN_NAMES
    for l in range(depth + 1):
        wl = _query_grad(con, [to_torch(L) for L in _depth_stack(learned, l)], P, J)
        wc = _query_grad(con, [to_torch(L) for L in _depth_stack(constructed, l)], P, J)
        d = np.linalg.norm(wl - wc, axis=1)
        nc = np.linalg.norm(wc, axis=1)
        row = {"l": l, "l2_mean": _f(np.mean(d)), "l2_max": _f(np.max(d)),
               "relative_l2_mean": _f(np.mean(d / np.where(nc > 0, nc, np.nan))) if (nc > 0).any() else None,
               "norm_constructed_mean": _f(np.mean(nc)), "norm_learned_mean": _f(np.mean(np.linalg.norm(wl, axis=1)))}
        if token:
            wr = lemma43_w([to_float(L) for L in _depth_stack(learned, l)], P)
            row["recursion_vs_gradient_max"] = _f(np.max(np.abs(wr - wl)))
        rows.append(row)
    return {"definition": "w^l = d prediction / d query after l body copies"
                          + (" (= Thm 4.1 w^l; Lemma 4.3 recursion cross-checked)" if token else ""),
            "set": P.label, "layers": rows}


def lemma43_w(layers, P: Problems) -> np.ndarray:
    """Seed 004 Lemma 4.3 (corrected sign) in float, batched: w^L of token-LSA layers on raw tokens."""
    B, n, d = P.A.shape
    E = np.zeros((B, n + 1, d + 1))
    E[:, :n, :d], E[:, :n, d], E[:, n, :d] = P.A, P.b, P.q
    M = np.broadcast_to(np.eye(d), (B, d, d)).copy()
    u, a, w = np.zeros((B, d)), np.ones(B), np.zeros((B, d))
    for L in layers:
        G = np.einsum("bji,bjk->bik", E[:, :n], E[:, :n])
        S = sum(np.einsum("ij,bjk,kl->bil", h.P, G, h.Q) for h in L.heads)
        A_, b_, c_, dd = S[:, :d, :d], S[:, :d, d], S[:, d, :d], S[:, d, d]
        M, u, a, w = (M + A_ @ M - np.einsum("bi,bj->bij", b_, w), u + np.einsum("bij,bj->bi", A_, u) + b_ * a[:, None],
                      a + dd * a + np.einsum("bi,bi->b", c_, u), w + w * dd[:, None] - np.einsum("bji,bj->bi", M, c_))
        E = L.forward(E)
    return w


# ------------------------------------------------------------------ (6) iterating as solvers

def iterate(con, learned: Stack, constructed: Stack, P: Problems, iters: int = 200,
            diverge_factor: float = 10.0) -> dict:
    """Prologue, then the body repeated ``iters`` times (the learned body copies in turn); after
    each step the error of the iterate (the ``x`` read-out; for token models the prediction) against
    the float64 least-squares solution."""
    token = var_names(con) is TOKEN_NAMES
    target = np.einsum("bi,bi->b", P.q, P.x_star)

    def curve(stack: Stack):
        S = run_float([to_float(L) for L in stack.prologue], input_state(con, P))
        bodies = [[to_float(L) for L in b] for b in stack.bodies] or [[]]
        E = [to_float(L) for L in stack.epilogue]
        errs = []
        for it in range(iters + 1):
            if it:
                S = run_float(bodies[(it - 1) % len(bodies)], S)
            if not token and "x" in con.readout(S):
                e = np.mean(np.sum((con.readout(S)["x"] - P.x_star) ** 2, axis=-1))
            else:
                e = np.mean((prediction(con, run_float(E, S)) - target) ** 2)
            errs.append(float(e) if np.isfinite(e) else float("inf"))
            if not np.isfinite(e):
                errs += [float("inf")] * (iters - it)
                break
        return errs

    el, ec = curve(learned), curve(constructed)
    return {"set": P.label, "error": "mean ||x - x*||^2" if not token else "mean (pred - q^T x*)^2",
            "iters": iters, "learned": error_curve_summary(el, diverge_factor),
            "constructed": error_curve_summary(ec, diverge_factor),
            "curve_learned": el, "curve_constructed": ec}


def error_curve_summary(errs: list[float], diverge_factor: float = 10.0) -> dict:
    """Best error and iteration, where an error curve stops improving (first iteration within 1%
    of the best) and where it diverges (non-finite or ``diverge_factor`` x the start)."""
    finite = [e for e in errs if math.isfinite(e)]
    best = int(np.argmin(errs)) if finite else 0
    floor = errs[best]
    stops = next((i for i, e in enumerate(errs) if e <= floor * 1.01 + 1e-300), best)
    div = next((i for i, e in enumerate(errs) if not math.isfinite(e) or e > diverge_factor * max(errs[0], floor)), None)
    return {"initial": errs[0], "best": floor if math.isfinite(floor) else None, "best_iter": best,
            "stops_improving_at": stops, "diverges_at": div,
            "final": errs[-1] if math.isfinite(errs[-1]) else None}
