"""Forward plans: the work a prepared layer really has, found once from its weights.

:class:`LivePlan` (a float BaseConv layer on its live inner channels, selections as gathers) is what
``BaseConv.prepare`` installs after a cast; :func:`sparse_head` restricts an LSA / ELSA head to the
rows and columns its weights use, for float casts and for the prover's exact copy alike.  The sums
are the layer's own (``constructions/layers.py``), of the same nonzero terms.  The run loop's
execution (:func:`run_checked`): planned BaseConv layers channel-major (:class:`_ChannelLayer`, torch
and numpy, the state in a :class:`ChannelBuffer`), residual LSA / ELSA layers in place on the CPU
(:func:`inplace_layer`), finiteness read from device flags.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from . import ops
from .sparse import SparseMatrix, index_like

if TYPE_CHECKING:
    from .layers import BaseConv


def _used(A, axis: int) -> np.ndarray:
    """Which columns (``axis=0``) or rows (``axis=1``) of a weight hold a nonzero, as numpy bools
    (a sparse weight's from its stored entries)."""
    if isinstance(A, SparseMatrix):
        out = np.zeros(A.shape[1 - axis], dtype=bool)
        out[A.cols if axis == 0 else A.rows] = True
        return out
    return _nonzero(A).any(axis=axis)


def _rows_into(A, cols: np.ndarray) -> np.ndarray:
    """The rows of a weight with a nonzero in one of the columns ``cols``."""
    if isinstance(A, SparseMatrix):
        return np.unique(A.rows[np.isin(A.cols, cols)])
    return np.flatnonzero(_nonzero(A)[:, cols].any(axis=1))


def _block(W, rows, cols, rows_ix, cols_ix):
    """``W[rows][:, cols]`` (``cols`` None: every column) of a float weight.  A sparse weight's block
    is laid out dense in its library when that is small or at least a tenth full (a small dense
    product beats a gather-scatter), else kept sparse (a compiled layer's wide, thin mixes)."""
    if isinstance(W, SparseMatrix):
        B = W[rows.tolist()] if cols is None else W[rows.tolist()][:, cols.tolist()]
        return B.toarray() if B.size <= 65_536 or B.nnz >= 0.1 * B.size else B
    B = W[rows_ix]
    return B if cols is None else B[:, cols_ix]


class _Mix:
    """``u[..., rows] @ W`` for one restricted block ``W`` of a planned layer (``rows`` None: every
    input channel).  A *selection* (every nonzero of ``W`` is 1 or -1, at most one a column; on
    torch up to four a column on average) is a gather of the input channels it names (times -1
    where the weight is) added into the output columns (``index_add_``; columns without an entry
    zero): the terms a matrix product sums, ``1 * x`` and ``-1 * x``, without the exact zeros and
    without the products; anything else is the matrix product on the rows it reads."""

    def __init__(self, W, rows, n_in: int, T: int, index):
        self.T = T
        self.n_out = W.shape[1]
        self.rows = None if rows is None or (len(rows) == n_in and np.array_equal(rows, np.arange(n_in))) \
            else _span(rows, index)
        self.W, self.select = W, None
        if isinstance(W, SparseMatrix):
            return
        Wn = _numpy(W)
        nz = Wn != 0
        unit = np.isin(Wn[nz], (1.0, -1.0)).all()
        per_col = nz.sum(axis=0).max(initial=0)
        # torch adds repeated columns in one index_add_ (numpy's += would not), up to a few terms a column
        if unit and (per_col <= 1 or (ops.is_torch(W) and nz.sum() <= 4 * max(1, self.n_out))):
            r, c = np.nonzero(nz.T)[::-1]  # column by column
            src = r if rows is None else np.asarray(rows)[r]
            sign = Wn[r, c]
            full = per_col <= 1 and len(c) == self.n_out and np.array_equal(c, np.arange(self.n_out))
            self.select = (_span(src, index), len(src), None if full else _span(c, index),
                           None if (sign > 0).all() else _library_vector(W, sign))

    @staticmethod
    def _columns(u, idx):
        """``u[..., idx]``: a view for a contiguous run (a slice), else a gather; torch gathers on the
        2-D view (its last-axis gather of a 3-D tensor ran about 9x slower, (4096, 21, 27) float32)."""
        if isinstance(idx, slice):
            return u[..., idx]
        if isinstance(u, np.ndarray):  # np.take: about half the time of u[..., idx] on (4096, 21, 27)
            return np.take(u, idx, axis=-1)
        if not ops.is_torch(u):
            return u[..., idx]
        return u.reshape(-1, u.shape[-1]).index_select(1, idx).reshape(tuple(u.shape[:-1]) + (len(idx),))

    def __call__(self, u, bias=None, into: bool = False):
        """``u[..., rows] @ W`` (``+ bias``, a T x n_out matrix, when given; ``into``: ``bias`` is a
        fresh array of the output's shape, added into in place)."""
        if self.select is None:
            y = (u if self.rows is None else self._columns(u, self.rows)) @ self.W
            if bias is None:
                return y
            if into:
                bias += y
                return bias
            return y + bias
        src, n_src, cols, sign = self.select
        x = self._columns(u, src)
        if sign is not None:
            x = x * sign
        if cols is None:
            return x if bias is None else x + bias
        shape = tuple(u.shape[:-1]) + (self.n_out,)
        if ops.is_torch(u):  # the bias (or zeros) laid out once, the selected columns added into it
            out = u.new_zeros(shape) if bias is None else (bias if into else bias.expand(shape).clone())
            if isinstance(cols, slice):
                out[..., cols] += x
            elif n_src:
                out.view(-1, self.n_out).index_add_(1, cols, x.reshape(-1, n_src))
            return out
        if into:
            out = bias
        else:
            out = ops.array_module(u).zeros(shape, dtype=u.dtype)
            if bias is not None:
                out[...] = bias
        if isinstance(cols, np.ndarray):  # distinct columns, one basic-indexed add each (the fancy-indexed
            for j, c in enumerate(cols.tolist()):  # += ran ~4x slower on (4096, 21, 27) float64)
                out[..., c] += x[..., j]
        else:
            out[..., cols] += x  # distinct columns here (numpy adds a repeated one once)
        return out

    def flops(self) -> int:
        if self.select is not None:
            return 0 if self.select[3] is None else self.T * self.select[1]
        if isinstance(self.W, SparseMatrix):
            return 2 * self.T * self.W.nnz
        return 2 * self.T * self.W.shape[0] * self.W.shape[1]


def _span(a: np.ndarray, index):
    """Indices ``a`` as a slice when they are one ascending run (a view, no gather), else ``index(a)``."""
    a = np.asarray(a)
    if len(a) and np.array_equal(a, np.arange(a[0], a[0] + len(a))):
        return slice(int(a[0]), int(a[0]) + len(a))
    return index(a)


def _library_vector(like, values: np.ndarray):
    """A float vector in the library and dtype of ``like``."""
    if ops.is_torch(like):
        import torch

        return torch.as_tensor(values, device=like.device).to(like.dtype)
    return ops.array_module(like).asarray(values).astype(like.dtype)


class LivePlan:
    """A float BaseConv layer (seed 000 eq. (19)) planned on the work it really has: the same
    sums of the same nonzero terms, none of the structural zeros.

    An inner channel ``k`` contributes ``(u W_gate + B_gate)[:, k] * (h * (u W_in + B_in) +
    B_conv)[:, k]`` times row ``k`` of ``W_out``; it is *live* when its gate side, its convolution
    side and that row can all be nonzero.  Only the live channels ``K`` are formed: the gate reads
    the input channels ``R_g`` that feed ``W_gate[:, K]`` (``u[..., R_g] @ W_gate[R_g, K]``), the
    convolution side those ``R_i`` that feed ``W_in[:, K]``, the convolution runs on ``K`` only
    (``ops.ConvPlan``: lag-0, all-equal and general channel classes), the bias matrices that are
    identically zero are skipped, and ``W_out[K, :]`` mixes the products back.  A live channel that
    copies an input channel (:func:`_copy_sources`: the carried values of a construction's state) is
    not formed at all: its row of ``W_out`` mixes that input channel straight into the output, added
    after the formed products.  The seed's GD layers (N=20, D=5: 27 channels) form 5 of their 22
    live channels and copy the rest.  A skipped term is ``0 * x``:
    identical in value unless ``x`` is infinite or NaN, where a dense product would add a NaN that
    no nonzero term carries; the first non-finite value is still reported where a live term makes it."""

    def __init__(self, L: "BaseConv"):
        T, C = L.shape
        self.T, self.C, self.C_out = T, C, L.W_out.shape[1]
        Ln = _NumpyWeights(L)  # the weights read into float64 numpy once, for finding the plan
        gate = _used(Ln.W_gate, 0) | _nonzero(Ln.b_gate).any(axis=0)
        conv = ((_used(Ln.W_in, 0) | _nonzero(Ln.b_in).any(axis=0)) & _nonzero(Ln.h).any(axis=0)) \
            | _nonzero(Ln.b_conv).any(axis=0)
        live = np.flatnonzero(gate & conv & _used(Ln.W_out, 1))
        src = _copy_sources(Ln, live)
        K, copied = live[src < 0], live[src >= 0]
        self.live, self.copied = live, copied
        self.K, self.Rg, self.Ri = K, _rows_into(Ln.W_gate, K), _rows_into(Ln.W_in, K)
        lib = L.h
        self.torch = ops.is_torch(lib)

        def index(a):
            if self.torch:
                import torch

                return torch.as_tensor(a, device=lib.device, dtype=torch.long)
            return ops.array_module(lib).asarray(a)

        def bias(name):  # the live channels' columns, None where they are all zero (x + 0 is x)
            if not len(K) or not _nonzero(getattr(Ln, name)[:, K]).any():
                return None
            return getattr(L, name)[:, index(K)]

        k = index(K)
        self._K, self._Rg, self._Ri = k, index(self.Rg), index(self.Ri)
        self.Wg = _block(L.W_gate, self.Rg, K, self._Rg, k)
        self.Wi = _block(L.W_in, self.Ri, K, self._Ri, k)
        self.Wo = _block(L.W_out, K, None, k, None)
        self.gate = _Mix(self.Wg, self.Rg, C, T, index)
        self.into = _Mix(self.Wi, self.Ri, C, T, index)
        self.out = _Mix(self.Wo, None, len(K), T, index)
        # a copied channel's product is u[:, r] itself: W_out's rows of them mix u's channels r directly;
        # those whose row is e_r (a value carried in its own channel) make the output start as u there
        r_of = src[src >= 0]
        carry = _carried(Ln.W_out, copied, r_of) if L.W_out.shape == (C, C) else np.zeros(len(copied), dtype=bool)
        self.kept = r_of[carry]  # output channels that start as the input's
        self.cleared = None
        if len(self.kept):
            rest = np.setdiff1d(np.arange(C), self.kept)
            self.cleared = _span(rest, index) if len(rest) else None
        moved, moved_r = copied[~carry], r_of[~carry]
        self.copy = None if not len(moved) else _Mix(_block(L.W_out, moved, None, index(moved), None),
                                                     moved_r, C, T, index)
        self.bg, self.bi, self.bc = bias("b_gate"), bias("b_in"), bias("b_conv")
        self.bo = None if not _nonzero(Ln.b_out).any() else L.b_out
        self.conv = ops.ConvPlan(L.h[:, k], causal=L.causal, same=L.same)
        # on the CPU a circular sum channel is summed over its tokens as one contiguous (..., T) block
        # (the channel-major run's layout, _ChannelLayer: the same reduction, so the same sums)
        self.uni = None
        if self.torch and lib.device.type == "cpu" and not L.causal and not L.same and len(self.conv.uniform):
            u = self.conv.uniform
            hr = L.h[:, k].clone()
            hr[:, index(u)] = 0
            self.uni = (_span(u, index), self.conv.h[0, index(u)],
                        None if len(u) == len(K) else ops.ConvPlan(hr, causal=False))

    def _zeros(self, u):
        shape = tuple(u.shape[:-1]) + (self.C_out,)
        return u.new_zeros(shape) if self.torch else ops.array_module(u).zeros(shape, dtype=u.dtype)

    def __call__(self, u):
        if len(self.kept):  # the carried values: the output starts as the input, the other channels zero
            y = u.clone() if self.torch else u.copy()
            if self.cleared is not None:
                y[..., self.cleared] = 0
        else:
            y = self._zeros(u)
        if self.bo is not None:
            y += self.bo
        if self.copy is not None:
            y = self.copy(u, y, into=True)
        if len(self.K):
            g = self.gate(u, self.bg)
            v = self.into(u, self.bi)
            z = self.conv(v) if self.uni is None else self._conv_sums(v)
            if self.bc is not None:
                z = z + self.bc
            y = self.out(g * z, y, into=True)
        return y

    def _conv_sums(self, v):
        """The convolution of ``v`` (..., T, k) with the circular sum channels summed channel by
        channel, each over one contiguous ``(..., T)`` block (:func:`channel_token_sum`), times its
        tap, on every token; the other channels by their plan (a sum channel there a zero filter)."""
        cols, taps, rest = self.uni
        vu = _Mix._columns(v, cols)
        sums = channel_token_sum(vu.movedim(-1, 0)).movedim(0, -1)  # (..., ku)
        term = (sums * taps).unsqueeze(-2)  # (..., 1, ku): times the tap, as ConvPlan
        if rest is None:
            return term.expand(v.shape)
        z = rest(v)
        z[..., cols] = term
        return z

    def flops(self) -> dict:
        """Per sample: the multiply-adds of the planned projections (:meth:`_Mix.flops`: 2 per
        entry of a restricted block, none for a selection) and the formed products' elementwise
        work; the convolution's classes; ``live`` counts the formed channels, ``copied`` those that
        are copies of an input channel (moved, not formed)."""
        T, k = self.T, len(self.K)
        proj = self.gate.flops() + self.into.flops() + self.out.flops() + (self.copy.flops() if self.copy else 0)
        return {"projections": proj, "product": T * k, "live": k, "copied": len(self.copied),
                "lag0": len(self.conv.lag0), "uniform": len(self.conv.uniform), "general": len(self.conv.general),
                "biases": sum(b is not None for b in (self.bg, self.bi, self.bc, self.bo))}


class _NumpyWeights:
    """A BaseConv layer's weights as float64 numpy arrays (a sparse weight as it is), read once."""

    def __init__(self, L):
        self.same, self.shape = L.same, L.shape
        for name in ("W_in", "W_gate", "W_out", "h", "b_in", "b_conv", "b_gate", "b_out"):
            A = getattr(L, name)
            setattr(self, name, A if isinstance(A, SparseMatrix) or getattr(A, "dtype", None) == object
                    else _numpy(A))


def _numpy(A) -> np.ndarray:
    """A float array (numpy, torch or cupy) as float64 numpy (small: a filter or a bias)."""
    if ops.is_torch(A):
        return A.detach().cpu().double().numpy()
    return np.asarray(A.get() if hasattr(A, "get") else A, dtype=np.float64)


def _copy_sources(L: "BaseConv", live: np.ndarray) -> np.ndarray:
    """For each live inner channel, the input channel ``r`` it copies, or -1: a channel whose gate
    side is the constant 1 (``W_gate`` column zero, ``B_gate`` column all ones), whose convolution
    side is ``u[:, r]`` itself (``W_in`` column the unit vector ``e_r``, filter ``delta_0``, ``B_in``
    and ``B_conv`` columns zero) forms ``1 * (1 * u[:, r] + 0) = u[:, r]`` exactly: the carried values
    of a construction's state."""
    out = np.full(len(live), -1, dtype=np.int64)
    if not len(live) or L.same:  # "same": tap 0 is not lag 0
        return out
    h, bg = _numpy(L.h)[:, live], _numpy(L.b_gate)[:, live]
    ok = ~_used(L.W_gate, 0)[live] & (bg == 1).all(axis=0) & (h[0] == 1) & ~(h[1:] != 0).any(axis=0)
    ok &= ~_nonzero(L.b_in)[:, live].any(axis=0) & ~_nonzero(L.b_conv)[:, live].any(axis=0)
    W = L.W_in
    Wn = None if isinstance(W, SparseMatrix) or not ok.any() else _numpy(W)  # read once, not a column a call
    for j in np.flatnonzero(ok).tolist():
        c = int(live[j])
        if isinstance(W, SparseMatrix):
            at = np.flatnonzero(W.cols == c)
            vals = _numpy(W.vals[index_like(W.vals, at)]) if len(at) else np.zeros(0)
            rows = W.rows[at]
        else:
            col = Wn[:, c]
            rows = np.flatnonzero(col != 0)
            vals = col[rows]
        if len(rows) == 1 and vals[0] == 1:
            out[j] = int(rows[0])
    return out


def _carried(W_out, copied: np.ndarray, r_of: np.ndarray) -> np.ndarray:
    """Which copied channels ``k`` carry their value in its own channel: ``W_out[k, :] = e_r`` with
    ``r`` the input channel they copy, each ``r`` once."""
    out = np.zeros(len(copied), dtype=bool)
    seen: set = set()
    Wn = None if isinstance(W_out, SparseMatrix) or not len(copied) else _numpy(W_out)  # read once
    for j, (k, r) in enumerate(zip(copied.tolist(), r_of.tolist())):
        if isinstance(W_out, SparseMatrix):
            at = np.flatnonzero(W_out.rows == k)
            cols = W_out.cols[at]
            vals = _numpy(W_out.vals[index_like(W_out.vals, at)]) if len(at) else np.zeros(0)
        else:
            row = Wn[k]
            cols = np.flatnonzero(row != 0)
            vals = row[cols]
        if len(cols) == 1 and cols[0] == r and vals[0] == 1 and r not in seen:
            out[j] = True
            seen.add(r)
    return out


def _nonzero(A) -> np.ndarray:
    """Where an array (exact object, numpy, torch or cupy) is nonzero, as a numpy bool array."""
    if ops.is_torch(A):
        return (A.detach() != 0).cpu().numpy()  # compared on the tensor: numpy has no bfloat16
    A = np.asarray(A.get() if hasattr(A, "get") else A)
    return ops.nonzero_pattern(A) if A.dtype == object else A != 0


def sparse_head(W1, B1, W2, B2, W3, B3, *, nonzero=None):
    """A head ``(H W3 + B3)(H W1 + B1)^T (H W2 + B2)`` restricted to its nonzero parts: the Gram
    columns both ``W1|B1`` and ``W3|B3`` use, the value columns ``W2|B2`` uses, and for each
    side the rows (input channels) that feed those columns.  Arrays stay in their library; each
    array's nonzero pattern is found once (by ``nonzero`` when given)."""
    find = nonzero or _nonzero
    # a sparse weight is its own pattern (its stored entries; no dense mask is made of it)
    nz = {k: (None if A is None else A if isinstance(A, SparseMatrix) else find(A)) for k, A in
          (("W1", W1), ("B1", B1), ("W2", W2), ("B2", B2), ("W3", W3), ("B3", B3))}

    def any_column(P):
        if isinstance(P, SparseMatrix):
            u = np.zeros(P.shape[1], dtype=bool)
            u[P.cols] = True
            return u
        return P.any(axis=0)

    def used(w, b):
        u = any_column(nz[w])
        return u if nz[b] is None else u | nz[b].any(axis=0)
    gram = np.nonzero(used("W1", "B1") & used("W3", "B3"))[0].tolist()
    vcols = np.nonzero(used("W2", "B2"))[0].tolist()

    def side(W, B, w, cols):
        P = nz[w]
        if not cols:
            rows = []
        elif isinstance(P, SparseMatrix):
            rows = np.unique(P.rows[np.isin(P.cols, cols)]).tolist()
        else:
            rows = np.nonzero(P[:, cols].any(axis=1))[0].tolist()
        return rows, W[rows][:, cols], (None if B is None else B[:, cols])
    return {"q": side(W3, B3, "W3", gram), "k": side(W1, B1, "W1", gram), "v": side(W2, B2, "W2", vcols),
            "vcols": vcols}


def _torch_index(hd: dict, key: str, idx: list, device):
    """A head's row or column list ``idx`` as a slice (one ascending run: a view) or a long tensor
    on ``device``, made once and kept in the head's plan (a Python list as an index makes torch build
    an index tensor and take its slow advanced-indexing path on every call)."""
    cache = hd.setdefault("_torch_ix", {})
    k = (key, str(device))
    if k not in cache:
        import torch

        a = np.asarray(idx, dtype=np.int64)
        cache[k] = _span(a, lambda x: torch.as_tensor(x, dtype=torch.long, device=device))
    return cache[k]


def _torch_columns(P, ix):
    """``P[..., ix]`` of a torch tensor: a view for a slice, else ``index_select`` on the 2-D view."""
    if isinstance(ix, slice):
        return P[..., ix]
    return P.reshape(-1, P.shape[-1]).index_select(1, ix).reshape(tuple(P.shape[:-1]) + (len(ix),))


def _times_weight(hd: dict, key: str, X, W):
    """``X @ W`` for a head's side weight ``W``; a diagonal ``W`` (a head that reads its rows as they
    are, or negated: the GD constructions' ``I`` / ``-I``) as the entrywise product with its diagonal
    (``1 * x`` and ``-1 * x`` without the product), the same values as the matrix product, whose
    other terms are exact zeros."""
    how, d = _weight_kind(hd, key, W)
    if how == "+":
        return X
    if how == "-":
        return -X
    return X * d if how == "*" else X @ W


def _weight_kind(hd: dict, key: str, W):
    """How a head's side weight acts: ``"+"`` the identity, ``"-"`` minus it, ``"*"`` a diagonal
    (with it), ``"@"`` a matrix product; found once per head and side."""
    cache = hd.setdefault("_torch_diag", {})
    if key not in cache and isinstance(W, SparseMatrix):  # a compiled head's sparse weight: its own product
        cache[key] = ("@", None)
    if key not in cache:
        Wn = _numpy(W)
        d = np.diag(Wn) if Wn.shape[0] == Wn.shape[1] else None
        if d is not None and np.array_equal(Wn, np.diag(d)) and (d != 0).all():
            cache[key] = ("+", None) if (d == 1).all() else ("-", None) if (d == -1).all() else ("*", W.diagonal())
        else:
            cache[key] = ("@", None)
    return cache[key]


def _head_term_torch(P, hd: dict):
    """One sparse head's ``Q (K^T V)`` on the torch state ``P`` (None: a zero head)."""
    if not hd["vcols"] or not hd["q"][1].shape[-1]:
        return None
    sides, negate = [], False
    for key in ("q", "k", "v"):
        rows, W, B = hd[key]
        if rows:
            X = _torch_columns(P, _torch_index(hd, key, rows, P.device))
            if B is None and _weight_kind(hd, key, W)[0] == "-":
                # -I: the sign moved to the head's term ((-a) b = -(a b) and a sum of negated terms is
                # the negated sum, exactly in round-to-nearest): one pass over the small term
                negate = not negate
            else:
                X = _times_weight(hd, key, X, W)
            sides.append(X if B is None else X + B)
        elif B is not None:
            sides.append(B + P[..., :1] * 0)  # the bias alone, with the batch shape
        else:
            return None  # an all-zero side: the head adds nothing
    Qm, K, V = sides
    if V.shape[-1] == 1 and Qm.dim() == 3:
        # one value column: K^T V and Q (K^T V) as products and sums over a contiguous axis (a batched
        # product of (r, m) x (m, 1) matrices ran at a few percent of the rate of the entrywise form)
        kv = (K * V).sum(-2, keepdim=True)  # (B, 1, r): sum over the m rows
        term = (Qm * kv).sum(-1, keepdim=True)  # (B, m, 1)
    else:
        term = Qm @ (K.transpose(-1, -2) @ V)
    return -term if negate else term


def _sparse_heads_torch(H, plan, residual: bool, inplace: bool = False):
    """:func:`sparse_heads_forward` on torch tensors: the same products and sums of the same
    terms, the row and column selections as views or ``index_select`` / ``index_add_`` with index
    tensors planned once (not advanced indexing by Python lists on every call).  ``inplace`` (a
    residual layer whose last stage writes a column, :func:`inplace_layer`): the skip adds into ``H``
    itself on those columns, and the result is ``(H, the columns written)``."""
    P = H
    for si, stage in enumerate(plan):
        # the stage's sum over heads is formed on the union of the columns its heads write (the
        # other columns of the sum are zeros); the last stage of a residual layer is then added
        # into a copy of H there: H + (0 + term + ...) on those columns, H elsewhere, as before
        ucols = sorted({c for hd in stage if hd["vcols"] and hd["q"][1].shape[-1] for c in hd["vcols"]})
        if residual and si == len(plan) - 1 and ucols:
            pos = {c: i for i, c in enumerate(ucols)}
            small = P.new_zeros(tuple(P.shape[:-1]) + (len(ucols),))
            for hd in stage:
                term = _head_term_torch(P, hd)
                if term is None:
                    continue
                at = [pos[c] for c in hd["vcols"]]
                ix = _torch_index(hd, "vcols@union", at, P.device)
                if isinstance(ix, slice):
                    small[..., ix] += term
                else:
                    small.view(-1, len(ucols)).index_add_(1, ix, term.reshape(-1, term.shape[-1]))
            out = H if inplace else H.clone()
            cols = _torch_index(stage[0], "union", ucols, P.device)
            if isinstance(cols, slice):
                out[..., cols] += small
            else:
                out.view(-1, out.shape[-1]).index_add_(1, cols, small.reshape(-1, len(ucols)))
            return (out, _torch_columns(out, cols)) if inplace else out
        acc = None
        for hd in stage:
            if not hd["vcols"] or not hd["q"][1].shape[-1]:
                continue
            sides = []
            for key in ("q", "k", "v"):
                rows, W, B = hd[key]
                if rows:
                    X = _torch_columns(P, _torch_index(hd, key, rows, P.device)) @ W
                    sides.append(X if B is None else X + B)
                elif B is not None:
                    sides.append(B + P[..., :1] * 0)  # the bias alone, with the batch shape
                else:
                    break  # an all-zero side: the head adds nothing
            else:
                Qm, K, V = sides
                term = Qm @ (K.transpose(-1, -2) @ V)
                if acc is None:
                    acc = P * 0
                cols = _torch_index(hd, "vcols", hd["vcols"], P.device)
                if isinstance(cols, slice):
                    acc[..., cols] += term
                else:
                    acc.view(-1, acc.shape[-1]).index_add_(1, cols, term.reshape(-1, term.shape[-1]))
        P = P * 0 if acc is None else acc
    return H + P if residual else P


def _last_columns(plan) -> list:
    """The columns the last stage of a sparse-heads plan writes (its heads' value columns)."""
    return sorted({c for hd in plan[-1] if hd["vcols"] and hd["q"][1].shape[-1] for c in hd["vcols"]}) \
        if plan else []


def inplace_layer(L):
    """A prepared residual LSA / ELSA layer on torch as an update of its state in place (the run
    loop's, :func:`run_checked`): ``f(H) -> (H, the columns written)``, the skip added into ``H`` on
    the columns its last stage writes -- the values of ``forward``, which adds them into a copy of
    ``H`` (the copy, a pass over the whole state, left out; gd-lsa's layers write one column of 48).
    None for any other layer."""
    if getattr(L, "kind", None) not in ("lsa", "elsa") or not getattr(L, "residual", False):
        return None
    plan = L.__dict__.get("_plan")
    if not plan or not _last_columns(plan):
        return None
    probe = next((hd[key][1] for st in plan for hd in st for key in ("q", "k", "v")
                  if hd[key][1] is not None and not isinstance(hd[key][1], SparseMatrix)), None)
    if probe is None or not ops.is_torch(probe):
        return None
    return lambda H: _sparse_heads_torch(H, plan, True, inplace=True)


def sparse_heads_forward(H, plan, residual: bool):
    """Stages of summed sparse heads (:func:`sparse_head`), then the skip."""
    if ops.is_torch(H):
        return _sparse_heads_torch(H, plan, residual)
    P = H
    for stage in plan:
        acc = P * 0
        for hd in stage:
            if not hd["vcols"] or not hd["q"][1].shape[-1]:
                continue
            sides = []
            for key in ("q", "k", "v"):
                rows, W, B = hd[key]
                if rows:
                    X = ops.mm(P[..., rows], W)
                    sides.append(X if B is None else X + B)
                elif B is not None:
                    sides.append(B + P[..., :1] * 0)  # the bias alone, with the batch shape
                else:
                    break  # an all-zero side: the head adds nothing
            else:
                Qm, K, V = sides
                acc[..., hd["vcols"]] += ops.mm(Qm, ops.mm(ops.transpose(K), V))
        P = acc
    return ops.add(H, P) if residual else P


# --------------------------------------------------------------------------- channel-major runs

class _ChannelLayer:
    """A planned float BaseConv layer (:class:`LivePlan`, torch or numpy) run on a state held channel
    by channel: a list of ``C`` arrays of shape ``(..., T)`` (``None``: a channel that is zero).

    The same terms and the same order of addition per output channel as :meth:`LivePlan.__call__`
    (output = the kept input channel or 0, + ``B_out``, + the copied channels' mix, + the formed
    products' mix), but a carried channel is the same tensor passed on (no copy, no pass over the
    state), and every channel operation reads and writes one contiguous ``(..., T)`` block.  A
    mix of a few terms a column (a selection, a sparse block) is summed term by term in row order;
    a denser block is one matrix product over the channel axis (its own summation order: the same
    terms, a rounding apart)."""

    def __init__(self, p: LivePlan, residual: bool):
        self.p, self.residual = p, residual
        self.C, self.C_out, self.T = p.C, p.C_out, p.T
        self.kept = p.kept.tolist()
        self.cleared_all = p.cleared is not None
        self.bo = None if p.bo is None else {int(c): p.bo[:, c] for c in np.flatnonzero(_nonzero(p.bo).any(axis=0))}
        self.copy = None if p.copy is None else self._mix_terms(p.copy.W, p.copy.rows, np.asarray(
            _rows_of(p.copy)), p.copy.select is not None)
        k = len(p.K)
        self.gate = self._mix_terms(p.Wg, None, p.Rg, p.gate.select is not None) if k else None
        self.into = self._mix_terms(p.Wi, None, p.Ri, p.into.select is not None) if k else None
        self.out = self._mix_terms(p.Wo, None, np.arange(k), p.out.select is not None) if k else None
        self.bg = None if p.bg is None else [p.bg[:, j] for j in range(k)]
        self.bi = None if p.bi is None else [p.bi[:, j] for j in range(k)]
        self.bc = None if p.bc is None else [p.bc[:, j] for j in range(k)]
        self.conv = [self._conv_of(p.conv, j) for j in range(k)]
        # a gate that is the constant 1 (no terms, its bias all ones): the product 1 * z is z itself
        self.gate_one = [self.gate is not None and self.gate[0] == "terms" and j not in self.gate[1]
                         and self.bg is not None and bool((_numpy(self.bg[j]) == 1).all()) for j in range(k)]
        # the carried channels the products' mix adds into last (gd-baseconv's x - eta s2): updated in
        # place when the run allows it (run_checked: the buffer's own rows), not copied into a new block
        kept = set(self.kept)
        self.inplace_cols = [] if residual or self.out is None or self.out[0] != "terms" or self.out[2] \
            else [c for c in self.out[1] if c in kept]

    @staticmethod
    def _mix_terms(W, _rows, src: np.ndarray, select: bool):
        """Per output column of ``x[src] @ W``: its nonzero terms ``(input channel, weight)`` in row
        order (weight 1.0 / -1.0 an add / subtract), or the dense block for a matrix product."""
        if isinstance(W, SparseMatrix):
            W = W.toarray()
        Wn = _numpy(W)
        nz = Wn != 0
        if nz.sum() > 4 * max(1, Wn.shape[1]) and nz.any(axis=1).sum() > 4:  # dense enough: one product
            cols = np.flatnonzero(nz.any(axis=0))
            if isinstance(W, np.ndarray):
                Wt = np.ascontiguousarray(Wn[:, cols].T).astype(W.dtype)  # (out, in)
            else:
                import torch

                Wt = torch.as_tensor(Wn[:, cols].T.copy(), dtype=W.dtype, device=W.device)  # (out, in)
            return ("mm", [int(r) for r in src], cols.tolist(), Wt)
        terms = {}
        for c in np.flatnonzero(nz.any(axis=0)).tolist():
            terms[c] = [(int(src[r]), float(Wn[r, c])) for r in np.flatnonzero(nz[:, c]).tolist()]
        return ("terms", terms, select)

    @staticmethod
    def _sum(mix, x, start: list, writable=None, wrote=None) -> list:
        """The mix applied to the channel list ``x``, added into ``start`` (one entry a column, None:
        zero): a new list.  ``writable``: ids of start arrays a mix summed first and added to its start
        last may add into in place (the same sum, ``start + terms``; each one so written is appended
        to ``wrote``).  A column's terms are added to its start one by one in row order, as the
        per-layer forward's ``index_add_`` adds a selection's terms into its output (so the same
        roundings; a mix the per-layer forward forms as a matrix product is summed first and added to
        the start last, as there); columns with the same start and the same terms share one sum."""
        out = list(start)
        if mix[0] == "mm":
            _, src, cols, Wt = mix
            ins = [x[r] for r in src]
            ref = next((t for t in ins if t is not None), None)
            if ref is None:
                return out
            if isinstance(ref, np.ndarray):
                X = np.stack([t if t is not None else np.zeros_like(ref) for t in ins])
            else:
                import torch

                X = torch.stack([t if t is not None else ref.new_zeros(ref.shape) for t in ins])
            Y = (Wt @ X.reshape(len(ins), -1)).reshape((len(cols),) + tuple(ref.shape))
            for c, t in zip(cols, list(Y)):
                out[c] = t if out[c] is None else out[c] + t
            return out
        done: dict = {}
        into = mix[2]
        for c, terms in mix[1].items():
            acc = out[c] if into else None
            key = (id(out[c]) if out[c] is not None else None, tuple(terms))
            if key in done:  # the same start and terms in the same order: the same sum
                out[c] = done[key]
                continue
            half = None
            full = None  # a token-constant term's shape: its one token worked on, laid out at the end
            for r, w in terms:
                t = x[r]
                if t is None:
                    continue
                if _token_constant(t):
                    full, t = t.shape, t[..., :1]
                if half is None and (t.dtype == np.float16 and not into if isinstance(t, np.ndarray)
                                     else t.dtype in _half_formats()):
                    # torch's index_add_ (and a CPU matrix product) adds a half format's terms of one column
                    # in float32 and rounds once; numpy's matrix product of float16 too (its selections
                    # add in float16)
                    half = t.dtype
                    acc = None if acc is None else _float32(acc)
                if half is not None:
                    t = _float32(t)
                if acc is None:
                    acc = t if w == 1.0 else (-t if w == -1.0 else t * w)
                elif w == 1.0:
                    acc = acc + t
                elif w == -1.0:
                    acc = acc - t
                else:
                    acc = acc + t * w
            if half is not None:
                acc = acc.astype(half) if isinstance(acc, np.ndarray) else acc.to(half)
            if not into and out[c] is not None:
                if acc is not None and writable and id(out[c]) in writable:
                    out[c].add_(acc)  # the same sum as acc + out[c], into the start's own memory
                    wrote.append(out[c])
                    acc = out[c]
                else:
                    acc = out[c] if acc is None else acc + out[c]
            if full is not None and acc is not None and acc.ndim and acc.shape[-1] == 1 < full[-1]:
                acc = _expand(acc, tuple(acc.shape[:-1]) + (full[-1],))
            done[key] = out[c] = acc
        return out

    @staticmethod
    def _conv_of(plan: "ops.ConvPlan", j: int):
        """Channel ``j`` of a :class:`ops.ConvPlan` as one operation on a ``(..., T)`` block."""
        if j in set(plan.lag0.tolist()):
            return ("scale", float(_numpy(plan.h[0, j:j + 1])[0]))
        if j in set(plan.uniform.tolist()):
            return ("sum", float(_numpy(plan.h[0, j:j + 1])[0]))
        gen = plan.general.tolist()
        if j in gen:
            Kj = plan.K[:, :, gen.index(j)].T
            return ("toeplitz", np.ascontiguousarray(Kj) if isinstance(Kj, np.ndarray) else Kj.contiguous())
        taps = [(lag, float(_numpy(tap[list(cols.tolist()).index(j):][:1])[0]))
                for (lag, cols, tap), (_, cols_np) in zip(plan._taps, plan.taps) if j in cols_np.tolist()]
        return ("taps", taps) if taps else ("zero", None)

    def _convolve(self, op, v):
        kind, a = op  # a tap of 1: x * 1 is x (infinities and NaN included), the product is left out
        if kind == "scale":
            return v if a == 1.0 else v * a
        if kind == "sum":
            acc = v.cumsum(-1) if self.p.conv.causal else v.sum(-1, keepdims=True)
            acc = acc if a == 1.0 else acc * a
            return acc if self.p.conv.causal else _expand(acc, v.shape)
        if kind == "toeplitz":
            return v @ a
        out = v * 0
        T = self.T
        for lag, tap in (a or []):
            if self.p.conv.causal:
                out[..., lag:] += tap * v[..., :T - lag]
            else:
                out += tap * ((np.roll(v, lag, -1) if isinstance(v, np.ndarray) else v.roll(lag, -1)) if lag else v)
        return out

    def _token_sums(self, vs: list):
        """The circular token sums of every formed channel, ``(..., k)``, when a channel of this layer
        is a sum (else None): the channels stacked as the per-layer forward holds them, ``(..., T, k)``,
        and summed over the token axis by the same reduction (``ops.ConvPlan``), so each sum adds
        its terms in the same order as there (a sum over one contiguous channel adds them in another)."""
        if self.p.conv.causal or not any(op[0] == "sum" for op in self.conv):
            return None
        ref = next((t for t in vs if t is not None and t.ndim > 1), None)
        if ref is None:
            return None
        if isinstance(ref, np.ndarray):  # as numpy's per-layer forward: the (..., T, k) block summed
            shape = tuple(ref.shape)
            return np.stack([np.zeros(shape, ref.dtype) if t is None else np.broadcast_to(t, shape) for t in vs],
                            axis=-1).sum(axis=-2)
        if self.p.uni is not None:  # the per-layer forward sums each channel as one contiguous block
            return [channel_token_sum(t) if t is not None and op[0] == "sum" else None
                    for t, op in zip(vs, self.conv)]
        shape = tuple(ref.shape)
        # the channels copied into a (..., T, k) block one by one (torch.stack on the last axis ran
        # about 2x slower, (4096, 21) x 5 channels); a channel that is None is zero
        V = ref.new_empty(shape + (len(vs),))
        for j, t in enumerate(vs):
            if t is None:
                V[..., j].zero_()
            else:
                V[..., j].copy_(t.expand(shape))
        return V.sum(-2)

    def _spread(self, op, s, v):
        """A circular sum channel from its token sum ``s`` (``(...,)``): times its tap, on every token."""
        acc = s[..., None] * op[1]  # the per-layer forward multiplies by the tap (1 included)
        return _expand(acc, v.shape)

    def __call__(self, x: list, writable=None, wrote=None) -> list:
        """The layer on the channel list ``x``: its output channel list.  ``writable`` (ids of input
        channels this call may overwrite; the run loop's buffer rows): a carried channel of
        :attr:`inplace_cols` is updated in place and appended to ``wrote``."""
        y = [None] * self.C_out
        for r in self.kept:
            y[r] = x[r]
        if self.bo is not None:
            for c, b in self.bo.items():
                y[c] = b if y[c] is None else y[c] + b
        if self.copy is not None:
            y = self._sum(self.copy, x, y)
        if self.gate is not None:
            k = len(self.conv)
            g = self._sum(self.gate, x, self.bg or [None] * k)  # the bias first, then the terms (as index_add_)
            vs = self._sum(self.into, x, self.bi or [None] * k)
            prods = [None] * k
            sums = self._token_sums(vs)
            for j, op in enumerate(self.conv):
                gj, vj = g[j], vs[j]
                zj = None if vj is None else (self._convolve(op, vj) if sums is None or op[0] != "sum"
                                              else self._spread(op, sums[j] if isinstance(sums, list)
                                                                else sums[..., j], vj))
                if self.bc is not None:
                    zj = self.bc[j] if zj is None else zj + self.bc[j]
                if gj is not None and zj is not None:
                    prods[j] = zj if self.gate_one[j] else gj * zj
            can = None if not writable or not self.inplace_cols else \
                {id(y[c]) for c in self.inplace_cols if y[c] is not None and id(y[c]) in writable
                 and sum(t is y[c] for t in y) == 1}
            y = self._sum(self.out, prods, y, can, wrote)
        if self.residual:
            y = [a if b is None else (b if a is None else a + b) for a, b in zip(x, y)]
        return y


def _float32(t):
    return t.astype(np.float32) if isinstance(t, np.ndarray) else t.float()


def _expand(t, shape):
    """``t`` broadcast to ``shape`` as a view (torch ``expand``, numpy ``broadcast_to``)."""
    return np.broadcast_to(t, shape) if isinstance(t, np.ndarray) else t.expand(shape)


def _token_constant(t) -> bool:
    """Whether ``t`` is one token's values laid on every token (a view with stride 0 on the token axis)."""
    return bool(t.ndim) and t.shape[-1] > 1 and t.strides[-1] == 0 if isinstance(t, np.ndarray) \
        else bool(t.dim()) and t.shape[-1] > 1 and t.stride(-1) == 0


def channel_token_sum(v):
    """The circular token sum of a channel ``v`` (..., T) (or of channels ``(k, ..., T)``): one
    reduction over the contiguous token axis (a copy first if it is not contiguous), which adds each
    row's terms in the same order whatever the leading shape (:meth:`LivePlan._conv_sums` and the
    channel-major run, :class:`_ChannelLayer`, use it on the CPU: the same sums bit for bit)."""
    return v.contiguous().sum(-1)


def _half_formats() -> tuple:
    import torch

    return (torch.float16, torch.bfloat16)


def _rows_of(mix: "_Mix") -> np.ndarray:
    """The input channels a :class:`_Mix` reads, in its weight's row order."""
    r = mix.rows
    if r is None:
        return np.arange(mix.W.shape[0])
    if isinstance(r, slice):
        return np.arange(r.start, r.stop)
    return r.detach().cpu().numpy() if ops.is_torch(r) else np.asarray(r)


def channel_layer(L):
    """The channel-major form of a prepared torch or numpy float BaseConv layer (made once, kept on
    the layer), or None for any other layer."""
    p = L.__dict__.get("_plan") if getattr(L, "kind", None) == "baseconv" else None
    if not isinstance(p, LivePlan) or not (p.torch or isinstance(L.h, np.ndarray)) or p.C_out != p.C:
        return None
    ch = L.__dict__.get("_channel_plan")
    if ch is None:
        ch = L.__dict__["_channel_plan"] = _ChannelLayer(p, L.residual)
    return ch


# --------------------------------------------------------------------------- the run loop's execution

#: layers whose finiteness flags may wait unread (each holds its output state, or for a channel-major
#: layer the references to its channels, until the flags are read in one host sync)
PENDING_CHECKS = 8


def _to_channels(S) -> list:
    """A torch or numpy state ``(..., T, C)`` as ``C`` contiguous ``(..., T)`` arrays (one pass)."""
    if isinstance(S, np.ndarray):
        return list(np.ascontiguousarray(np.moveaxis(S, -1, 0)))
    return list(S.movedim(-1, 0).contiguous().unbind(0))


def _from_channels(x: list, like):
    """The channel list ``x`` laid back as a state ``(..., T, C)`` like ``like`` (None: zeros): the
    channels copied one after another into a ``(C, ..., T)`` block and that block's view with the
    channel axis last (so the next run of channel layers reads its channels back without a copy)."""
    shape = tuple(like.shape[:-1])
    if isinstance(like, np.ndarray):
        return np.moveaxis(np.stack([np.zeros(shape, like.dtype) if t is None else np.broadcast_to(t, shape)
                                     for t in x]), 0, -1)
    import torch

    return torch.stack([like.new_zeros(shape) if t is None else t.expand(shape) for t in x]).movedim(0, -1)


def _sum_flag(ts: list):
    """A device scalar whose value is finite only if every entry of the tensors ``ts`` is (a sum of
    finite values is finite unless it overflows, so a non-finite flag is confirmed before it is
    reported); None when ``ts`` is empty.  Half formats sum in float32 (a float16 sum of a large
    state would overflow: a false alarm on every layer)."""
    if not ts:
        return None
    import torch

    acc = None
    for t in ts:
        s = t.sum(dtype=torch.float32) if t.dtype in (torch.float16, torch.bfloat16) else t.sum()
        acc = s if acc is None else acc + s
    return acc


def all_finite(A) -> bool:
    """Whether a state holds only finite values (an exact object array always does)."""
    if ops.is_torch(A):
        import torch

        # a finite sum says so in one pass (no boolean state); else the entries are looked at
        return bool(torch.isfinite(_sum_flag([A]))) or bool(torch.isfinite(A).all())
    if getattr(A, "dtype", None) == object:
        return True
    if isinstance(A, np.ndarray):  # a finite sum first (one pass, no boolean array); half formats in float64
        with np.errstate(over="ignore", invalid="ignore"):
            s = A.sum(dtype=np.float64 if A.dtype.itemsize < 4 else None)
        if np.isfinite(s):
            return True
    return bool(ops.array_module(A).isfinite(A).all())


class ChannelBuffer:
    """The memory a run loop lays its channel-major state out in, kept across its sections: a
    ``(C, ..., T)`` block whose view with the channel axis last is the state handed on (to the
    next section without a copy, to the hooks, as the result).  A state that is not the buffer's is
    laid out in it once (one copy, :meth:`channels`); laying a channel list out copies only the
    channels that are not already in their row (a channel a section carried on is the row's own
    view, passed on untouched), so a section that writes a few channels costs a few copies, not the
    state.  The state it returns is valid until the next ``lay_out``: the run loop's hooks read it
    before they return (``Construction.run``).  ``owned``: the last state a section of the run made
    (the run may update it in place, :func:`inplace_layer`; never the caller's input)."""

    def __init__(self):
        self.buf = None
        self.state = None
        self.views: list = []
        self.zero: set = set()
        self.owned = None
        self.by_layer = False  # numpy: the run met a non-finite value, its layers run by forward

    def owns(self, S) -> bool:
        """Whether ``S`` is memory of this run (its buffer's state, or a state a section made)."""
        return S is not None and (S is self.state or S is self.owned)

    def _fit(self, n: int, like):
        shape = (n,) + tuple(like.shape[:-1])
        if isinstance(like, np.ndarray):
            if not isinstance(self.buf, np.ndarray) or self.buf.shape != shape or self.buf.dtype != like.dtype:
                self.buf = np.empty(shape, dtype=like.dtype)
                self.views, self.zero = list(self.buf), set()
                self.state = np.moveaxis(self.buf, 0, -1)
            return
        if self.buf is None or isinstance(self.buf, np.ndarray) or tuple(self.buf.shape) != shape \
                or self.buf.dtype != like.dtype or self.buf.device != like.device:
            import torch

            self.buf = torch.empty(shape, dtype=like.dtype, device=like.device)
            self.views, self.zero = list(self.buf.unbind(0)), set()
            self.state = self.buf.movedim(0, -1)

    def channels(self, S):
        """``S`` as its channel list: the rows' own views when ``S`` is this buffer's state, else ``S``
        copied into the rows first (one pass; a contiguous ``(..., T, C)`` state as a 2-D transpose,
        about twice as fast as the copy of the moved axes at (4096, 21, 27) float64).  The rows are
        overwritten: the caller holds no pending reference to them."""
        if S is self.state and self.state is not None:
            return list(self.views)
        C = S.shape[-1]
        self._fit(C, S)
        if isinstance(S, np.ndarray):
            self.buf[...] = np.moveaxis(S, -1, 0)
        elif S.is_contiguous() and S.dim() > 1:
            self.buf.view(C, -1).copy_(S.reshape(-1, C).t())
        else:
            self.buf.copy_(S.movedim(-1, 0))
        self.zero = set()
        return list(self.views)

    def lay_out(self, x: list, like):
        self._fit(len(x), like)
        row = {id(v): i for i, v in enumerate(self.views)}
        # a row's view moved to another channel is copied first (its row may be written below)
        x = [(t.copy() if isinstance(t, np.ndarray) else t.clone()) if t is not None and row.get(id(t), c) != c
             else t for c, t in enumerate(x)]
        for c, t in enumerate(x):
            if t is None:
                if c not in self.zero:
                    self.views[c][...] = 0
                    self.zero.add(c)
            elif row.get(id(t)) != c:
                self.views[c][...] = t  # broadcast: a token-constant channel laid on every token
                self.zero.discard(c)
        return self.state


def run_checked(layers, S, *, conv_method: str = "direct", on_nonfinite=None, input_checked: bool = True,
                buffer: "ChannelBuffer | None" = None):
    """Forward the state ``S`` through the (cast, prepared) ``layers``, as the run loop
    (:meth:`constructions.base.Construction.run`) executes a section: each run of consecutive
    planned torch or numpy BaseConv layers channel-major (:class:`_ChannelLayer`: the state laid out
    once as one contiguous ``(..., T)`` block a channel in the buffer, carried channels passed on
    untouched, a carried channel the layer adds into last updated in its row in place on the CPU,
    laid back at the end of the run), a residual LSA / ELSA layer on the CPU in place on a state of
    the run (:func:`inplace_layer`: its skip added into the columns it writes; the caller's input is
    copied first), any other layer by its ``forward``.  The same sums of the same terms in the
    same order as ``forward`` layer by layer (a selection's terms added into its start one by one as
    ``index_add_`` adds them, half formats in float32 as there; a token sum by the same reduction on
    the same layout), so the same values bit for bit on the GD constructions (tested); a mix that
    ``forward`` forms as a matrix product of non-unit weights is summed term by term here (a library
    product may fuse a multiply and an add: a rounding apart), a dense one as one product.  After a
    non-finite value, which entries are inf and which NaN may differ on torch (a dense product turns
    a skipped ``0 * inf`` into NaN); numpy runs the layer that wrote the first non-finite value, and
    every layer after it, by ``forward``, so its states are the per-layer loop's there too.

    ``on_nonfinite(i, S_i)``: called once, for the first layer ``i`` (index into ``layers``) whose
    output state ``S_i`` holds a non-finite value -- the state as that layer wrote it, laid out as
    ``S`` is; it returns True to stop there.  Each torch layer's check is a device scalar (the sum of
    the tensors it wrote, :func:`_sum_flag`), read for up to :data:`PENDING_CHECKS` layers at once
    (one host sync, and at the end; before the run overwrites memory a pending state lives in: an
    in-place layer, a state laid into the buffer), and a non-finite flag confirmed with ``isfinite``
    on the whole state; a numpy layer's is ``isfinite`` at once.  A channel-major layer's check
    covers the channels it wrote (the others are the input's or an earlier layer's, checked there),
    an in-place layer's the columns it wrote -- with ``input_checked=False`` (an input state that may
    hold a non-finite value) the first layer's covers its whole output.  ``buffer``: where a
    channel-major run lays its state out and which states the run may update in place
    (:class:`ChannelBuffer`, the run loop's across its sections; default a new block, and no state
    updated in place but those this call makes).  Returns ``(S, layers_run, stopped)``."""
    n = len(layers)
    is_t = ops.is_torch(S)
    cpu = is_t and S.device.type == "cpu"
    # channel-major runs (numpy: until its first non-finite value, then layer by layer, see below)
    chan_ok = (is_t or (isinstance(S, np.ndarray) and not (buffer is not None and buffer.by_layer))) \
        and conv_method == "direct"
    S_in, made = S, None  # the caller's state; the last state this call made (its own memory)
    chans = None  # the channel-major state while a run of channel layers lasts
    pending: list = []  # (layer index, flag, state or channel list)

    def state_of(snap):
        return _from_channels(snap, S) if isinstance(snap, list) else snap

    def flush():
        """The first pending layer whose state is confirmed non-finite, as ``(i, S_i)``, or None."""
        nonlocal pending
        todo, pending = pending, []
        flags = [(i, f, snap) for i, f, snap in todo if f is not None]
        if not flags:
            return None
        import torch

        ok = torch.isfinite(torch.stack([f.to(torch.float64) for _, f, _ in flags])).tolist()  # one sync
        for (i, _, snap), good in zip(flags, ok):
            if not good:
                Si = state_of(snap)
                if not all_finite(Si):
                    return i, Si
        return None

    def report(bad):
        """Hand the first non-finite layer to ``on_nonfinite`` (once); its answer: stop there."""
        nonlocal on_nonfinite, pending
        (j, Sj) = bad
        on, on_nonfinite, pending = on_nonfinite, None, []
        return bool(on(j, Sj))

    for i in range(n):
        L = layers[i]
        ch = channel_layer(L) if chan_ok else None
        ip = inplace_layer(L) if ch is None and cpu else None
        overwrites = (ip is not None) or (ch is not None and chans is None and buffer is not None
                                          and S is not buffer.state)
        if pending and overwrites:  # a pending state may live in the memory this layer writes
            bad = flush()
            if bad is not None and report(bad):
                return bad[1], bad[0] + 1, True
        bad = None
        if ch is not None:
            if chans is None:
                chans = buffer.channels(S) if buffer is not None else _to_channels(S)
            writable, rows = None, []
            if ch.inplace_cols and cpu and buffer is not None:
                if pending:  # the rows updated in place may be in a pending layer's state
                    bad = flush()
                    if bad is not None and report(bad):
                        return bad[1], bad[0] + 1, True
                    bad = None
                writable = {id(v) for v in buffer.views}
            prev = {id(t) for t in chans if t is not None}
            before, chans = chans, ch(chans, writable, rows)
            if rows:  # the buffer's rows written in place: none of them is zero now
                at = {id(v): c for c, v in enumerate(buffer.views)}
                buffer.zero -= {at[id(t)] for t in rows}
            if on_nonfinite is not None:
                first = i == 0 and not input_checked
                rid = {id(t) for t in rows}
                wrote = list({id(t): t for t in chans + rows
                              if t is not None and (first or id(t) not in prev or id(t) in rid)}.values())
                if is_t:
                    pending.append((i, _sum_flag(wrote), chans))
                elif not all(all_finite(t) for t in wrote):
                    # numpy, checked at once: this layer and the rest of the run by forward, so the state
                    # reported and those after it are the per-layer loop's (its products turn a skipped
                    # 0 * inf into NaN), as numpy's run loop gave them before
                    S = made = L.forward(np.ascontiguousarray(_from_channels(before, S)), conv_method=conv_method)
                    chans, chan_ok, bad = None, False, (i, S)
                    if buffer is not None:
                        buffer.by_layer = True
        elif ip is not None:
            if chans is not None:
                S, chans = (buffer.lay_out(chans, S) if buffer is not None else _from_channels(chans, S)), None
            if S is not made and not (buffer is not None and buffer.owns(S)):
                S = S.clone()  # the caller's state is not written
            elif buffer is not None and S is buffer.state:
                buffer.zero = set()  # its rows written here: none is known to be zero
            S, cols = ip(S)
            made = S
            if on_nonfinite is not None:
                pending.append((i, _sum_flag([S] if i == 0 and not input_checked else [cols]), S))
        else:
            if chans is not None:
                S, chans = (buffer.lay_out(chans, S) if buffer is not None else _from_channels(chans, S)), None
                if not is_t:  # numpy's products of a strided state may add in another order (float16)
                    S = np.ascontiguousarray(S)
            S = made = L.forward(S, conv_method=conv_method)
            if on_nonfinite is not None:
                if is_t:
                    pending.append((i, _sum_flag([S]), S))
                elif not all_finite(S):
                    bad = (i, S)
        if on_nonfinite is not None and bad is None and (len(pending) >= PENDING_CHECKS or i == n - 1
                                                         or ip is not None):
            bad = flush()  # an in-place layer's state is read before the next layer writes it
        if bad is not None and report(bad):  # reported once: the first non-finite layer
            return bad[1], bad[0] + 1, True
    if chans is not None:
        S = buffer.lay_out(chans, S) if buffer is not None else _from_channels(chans, S)
    if buffer is not None and S is not S_in:
        buffer.owned = S
    return S, n, False


def run_stack(layers, S):
    """``layers`` forward on the float state ``S`` as the run loop executes them
    (:func:`run_checked`, no finiteness checks)."""
    return run_checked(layers, S)[0]
