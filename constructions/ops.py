"""The array operations every layer is written in, for every scalar type.

Each layer's math (``constructions/layers.py``) is written once in terms of
the four functions below.  They dispatch on the array type:

* numpy **object** arrays (exact scalars: ``fractions.Fraction``, sympy
  expressions, sympy ``PolyElement`` of a polynomial ring, mpmath/gmpy2
  numbers).  Products skip structural zeros, so a symbolic forward pass costs
  what the nonzero pattern of the weights costs, not what the dense shapes
  cost.  Object arrays are 2-D (one problem at a time).
* numpy **float** arrays of any float dtype, with any leading batch axes.
* **torch** tensors (CPU or CUDA), with any leading batch axes.
* **cupy** arrays (GPU), through the same numpy-style calls.

Convolution semantics (seed 003 App. H.1.1, seed 000 Def. D.20), with
``h[s, c]`` the tap of channel ``c`` at lag ``s`` and ``T`` tokens:

* causal (linear convolution truncated to the first T outputs):
  ``y[t, c] = sum_{s=0}^{t} h[s, c] v[t-s, c]``;
* non-causal (circular convolution of length T):
  ``y[t, c] = sum_{s=0}^{T-1} h[s, c] v[(t-s) mod T, c]``;
* "same" (``same=True``, non-causal with zero padding, the third convention):
  ``y[t, c] = sum_{j=0}^{T-1} h[j, c] v[t + m - j, c]`` with ``m = (T-1) // 2`` and
  ``v`` zero outside ``0..T-1``: tap ``j`` acts at lag ``j - m`` (lags ``-(T-1-m)..m``),
  so ``h[m]`` is lag 0.  This is ``numpy.convolve(v, h)[m:m+T]`` (numpy's ``mode="same"``
  for equal lengths), and it is what ``torch.nn.Conv1d(kernel_size=T, padding=T//2)``
  followed by the first T outputs computes with weights ``w[k] = h[T-1-k]`` (precision-ls's
  ``causal=False`` short convolution; ``verify/importers/precision_ls.py``).

Lag 0 comes first (causal, circular); this is *not* ``torch.nn.Conv1d`` (a cross-correlation).
"""
from __future__ import annotations


import sys

import numpy as np

from .sparse import SparseMatrix


class _LazyTorch:
    """``torch``, imported on first use: the numpy and exact paths never pay for it
    (a torch tensor can only reach a torch branch once torch is loaded)."""

    def __getattr__(self, name):
        import torch  # noqa: PLC0415

        return getattr(torch, name)


torch = _LazyTorch()


def is_object(x) -> bool:
    return isinstance(x, np.ndarray) and x.dtype == object


def is_torch(x) -> bool:
    t = sys.modules.get("torch")
    return t is not None and isinstance(x, t.Tensor)


def _is_zero(v) -> bool:
    try:
        return v == 0
    except Exception:  # pragma: no cover - exotic scalar types
        return False


def _is_one(v) -> bool:
    try:
        return v == 1
    except Exception:  # pragma: no cover
        return False


_ZERO = 0
_ZERO_ADDRESS = id(_ZERO)  # CPython's one int 0: every structural zero the exact operations write


def addresses(M: np.ndarray) -> np.ndarray:
    """The object pointers of an object array (its raw data, row-major), as unsigned integers
    of M's shape: ``addresses(M) == id(x)`` finds the entries that *are* ``x``, in numpy's loop.
    The entries are alive in ``M``, so no two distinct live objects share an address."""
    M = np.asarray(M, dtype=object)
    return np.frombuffer(M.tobytes(), dtype=np.uintp).reshape(M.shape)


def nonzero_pattern(M: np.ndarray) -> np.ndarray:
    """Boolean mask of the nonzero entries of an object array.

    Two steps, both in numpy's loops: every entry that is not the int 0 object itself (read off
    the array's pointers, :func:`addresses`: a sparse weight matrix is mostly that object) is a
    candidate, and a candidate is nonzero by its truth value (``astype(bool)``).  For every
    exact scalar type here (int, Fraction, fmpq, fmpq_mpoly and its wrapper, sympy numbers and
    ring elements, mpmath, gmpy2) the truth value is "not zero"; a type without a truth test
    counts as nonzero, which only costs work (the exact operations never skip an entry the mask
    calls nonzero).  Entry by entry ``!= 0`` for a type whose truth test raises."""
    M = np.asarray(M, dtype=object)
    flat = M.ravel()
    cand = np.flatnonzero(addresses(flat) != _ZERO_ADDRESS)
    out = np.zeros(flat.shape, dtype=bool)
    if cand.size:
        vals = flat[cand]
        try:
            out[cand] = vals.astype(bool)
        except (TypeError, ValueError):  # e.g. a sympy relation: its truth value is undecided
            out[cand] = [not _is_zero(v) for v in vals]
    return out.reshape(M.shape)


def zeros_like_object(shape, zero=0) -> np.ndarray:
    """An exact (object) array of ``shape`` holding the int ``0`` (the structural zero the exact
    operations skip) or ``zero``."""
    a = np.empty(shape, dtype=object)
    a.fill(zero)
    return a


def eye_object(n: int, one=1) -> np.ndarray:
    """The exact ``n x n`` identity: ``one`` on the diagonal, the int ``0`` elsewhere."""
    a = zeros_like_object((n, n))
    for i in range(n):
        a[i, i] = one
    return a


def mm(X, Y, *, nonzero_x=None, nonzero_y=None):
    """Matrix product ``X @ Y`` over the last two axes.

    Object arrays: a sparse product that never multiplies by a structural
    zero and never multiplies by a structural one.  ``nonzero_x`` / ``nonzero_y``: the
    operands' nonzero patterns where the caller already has them (a weight matrix, planned once).
    """
    if isinstance(Y, SparseMatrix):  # a sparse weight (constructions/sparse.py): its own entries
        if not is_object(X):
            return X @ Y  # SparseMatrix.__rmatmul__: scipy.sparse, torch index_add_
        return _mm_sparse(np.asarray(X, dtype=object), Y, nonzero_x)
    if is_object(X) or is_object(Y):
        X = np.asarray(X, dtype=object)
        Y = np.asarray(Y, dtype=object)
        if X.ndim != 2 or Y.ndim != 2:
            raise ValueError("exact (object) arrays must be 2-D; loop over the batch")
        m, k = X.shape
        k2, n = Y.shape
        if k != k2:
            raise ValueError(f"shape mismatch in matrix product: {X.shape} @ {Y.shape}")
        NX = nonzero_pattern(X) if nonzero_x is None else _pattern_of(nonzero_x, X)  # numpy's loop
        NY = nonzero_pattern(Y) if nonzero_y is None else _pattern_of(nonzero_y, Y)
        try:
            return _mm_columns(X, NX, n, _dense_columns(Y, NY))
        except (TypeError, ValueError):  # an entry whose == 1 is not a plain bool: one by one below
            pass
        out = zeros_like_object((m, n))
        for j in np.nonzero(NY.any(axis=0))[0].tolist():
            rs = np.nonzero(NY[:, j])[0]
            ys = [Y[r, j] for r in rs.tolist()]
            y_one = [_is_one(y) for y in ys]
            if len(rs) == 1 and y_one[0]:  # a copy of one column: the same objects, no arithmetic
                out[:, j] = X[:, rs[0]]
                continue
            live = NX[:, rs]
            seen: dict = {}  # the same operand objects (a value replicated over tokens): the same entry
            for i in np.nonzero(live.any(axis=1))[0].tolist():
                Xi = X[i]
                xs = [Xi[r] for r in rs.tolist()]
                key = tuple(map(id, xs))
                if key in seen:
                    out[i, j] = seen[key]
                    continue
                terms = []
                for x, y, y1, nz in zip(xs, ys, y_one, live[i].tolist()):
                    if nz:
                        terms.append(y if _is_one(x) else (x if y1 else x * y))
                seen[key] = out[i, j] = 0 if not terms else tree_sum(terms)
        return out
    return X @ Y


def _scalar_array(y) -> np.ndarray:
    """A 0-d object array holding ``y`` (never read as a sequence: a FLINT polynomial has a length)."""
    a = np.empty((), dtype=object)
    a[()] = y
    return a


def _dense_columns(Y, NY):
    """``(j, rows, values)`` for every column of a dense ``Y`` with a nonzero entry."""
    for j in np.flatnonzero(NY.any(axis=0)).tolist():
        rs = np.flatnonzero(NY[:, j])
        yield j, rs, [Y[r, j] for r in rs.tolist()]


def _mm_sparse(X, S: SparseMatrix, nonzero_x=None):
    """The exact ``X @ S`` for a :class:`~constructions.sparse.SparseMatrix` ``S``: the same column
    product as a dense weight's (:func:`_mm_columns`), reading the columns off ``S``'s entries."""
    if X.ndim != 2:
        raise ValueError("exact (object) arrays must be 2-D; loop over the batch")
    if X.shape[1] != S.shape[0]:
        raise ValueError(f"shape mismatch in matrix product: {X.shape} @ {S.shape}")
    NX = nonzero_pattern(X) if nonzero_x is None else _pattern_of(nonzero_x, X)
    try:
        return _mm_columns(X, NX, S.shape[1], S.columns())
    except (TypeError, ValueError):  # an entry whose == 1 is not a plain bool: mm's entry-by-entry loop
        return mm(X, S.toarray(), nonzero_x=NX)


def _mm_columns(X, NX, n, columns):
    """The exact product of :func:`mm`, one output column at a time in numpy's loops: for column
    ``j``, the rows of ``X`` whose operands in the column's nonzero rows ``rs`` are the same
    objects are one row (a value replicated over tokens is computed, and stored, once: the
    rows' keys are the operands' addresses, :func:`addresses`), and each term ``X[:, r] Y[r, j]``
    is one elementwise product over those rows (none where ``X`` is 0; the other operand where
    either is 1), the terms summed in a balanced tree (:func:`tree_sum`), each sum only where
    both operands are nonzero.  The same sums as the entry-by-entry loop, in another order."""
    m, k = X.shape
    out = zeros_like_object((m, n))
    AX = addresses(X)  # X holds its entries alive while this runs: addresses are unique
    x_one: dict = {}
    done: dict = {}  # a column's nonzero rows -> [(its entries, the output column)]: equal columns once

    def ones(r):  # which entries of column r of X are the structural one
        hit = x_one.get(r)
        if hit is None:
            hit = x_one[r] = np.equal(X[:, r], 1, dtype=bool) & NX[:, r]
        return hit

    for j, rs, ys in columns:
        y_one = [_is_one(y) for y in ys]
        if len(rs) == 1 and y_one[0]:  # a copy of one column: the same objects, no arithmetic
            out[:, j] = X[:, rs[0]]
            continue
        same = done.setdefault(rs.tobytes(), [])
        hit = next((col for ys2, col in same if all(a is b or a == b for a, b in zip(ys, ys2))), None)
        if hit is not None:  # a column of Y equal to one done before: the same sums, the same objects
            out[:, j] = out[:, hit]
            continue
        same.append((ys, j))
        rows = np.flatnonzero(NX[:, rs].any(axis=1))
        if not rows.size:
            continue
        keys = np.ascontiguousarray(AX[np.ix_(rows, rs)])
        if len(rs) == 1:
            keys = keys[:, 0]
        else:
            keys = keys.view(np.dtype((np.void, keys.dtype.itemsize * len(rs)))).reshape(-1)
        _, first, inv = np.unique(keys, return_index=True, return_inverse=True)
        urows = rows[first]
        terms = []
        for r, y, y1 in zip(rs.tolist(), ys, y_one):
            nz = NX[urows, r]
            if not nz.any():
                continue
            xs = X[urows, r]
            t = zeros_like_object(len(urows))
            if y1:
                np.copyto(t, xs, where=nz)
            else:
                xo = ones(r)[urows]
                yy = _scalar_array(y)
                np.copyto(t, yy, where=xo)
                np.multiply(xs, yy, out=t, where=nz & ~xo)  # x * y, x on the left
            terms.append((t, nz))
        while len(terms) > 1:  # a balanced tree of elementwise sums, each where both are nonzero
            nxt = []
            for (a, na), (b, nb) in zip(terms[0::2], terms[1::2]):
                both = na & nb
                c = zeros_like_object(len(urows))
                np.copyto(c, a, where=na & ~nb)
                np.copyto(c, b, where=nb & ~na)
                if both.any():
                    c[both] = np.add(a[both], b[both])
                nxt.append((c, na | nb))
            if len(terms) % 2:
                nxt.append(terms[-1])
            terms = nxt
        if terms:
            out[rows, j] = terms[0][0][np.asarray(inv).reshape(-1)]
    return out


def transpose(X):
    """Swap the last two axes (numpy, cupy or torch)."""
    if is_torch(X):
        return X.transpose(-1, -2)
    return X.swapaxes(-1, -2)


def lag_index(T: int, causal: bool, same: bool):
    """For output token ``t`` (rows) and input token ``r`` (columns): the tap index that
    multiplies ``v[r]`` in ``y[t]`` and whether it exists (the convention's Toeplitz /
    circulant / banded matrix, as indices into ``h``)."""
    t = np.arange(T)
    lag = t[:, None] - t[None, :]
    if same:
        j = lag + (T - 1) // 2
        mask = (j >= 0) & (j < T)
        return np.where(mask, j, 0), mask
    if causal:
        return np.where(lag >= 0, lag, 0), lag >= 0
    return lag % T, np.ones_like(lag, dtype=bool)


def _check_mode(causal: bool, same: bool) -> None:
    if same and causal:
        raise ValueError("a convolution is causal, circular or 'same', not causal and 'same' at once")


def conv(v, h, *, causal: bool, method: str = "direct", need=None, same: bool = False, nonzero_h=None):
    """Per-channel convolution of ``v`` (..., T, C) with filters ``h`` (T, C).

    ``causal`` / circular / ``same`` (zero-padded, centred): the module docstring.
    ``method`` is ``"direct"`` (an explicit sum over taps: the reference
    semantics, and the only method for exact arrays) or ``"fft"``.  ``need``
    (exact arrays only): a (T, C) bool mask of the outputs wanted; the others
    are left 0 (a caller that multiplies them by zero anyway); ``nonzero_h`` (exact arrays
    only): the filters' nonzero pattern, where the caller has it.
    """
    if method not in ("direct", "fft"):
        raise ValueError(f"unknown convolution method {method!r} (use 'direct' or 'fft')")
    _check_mode(causal, same)
    if is_object(v) or is_object(h):
        return _conv_exact(np.asarray(v, dtype=object), np.asarray(h, dtype=object), causal, need, same, nonzero_h)
    T = v.shape[-2]
    if method == "fft":
        return _conv_fft(v, h, causal, same)
    # direct: a (C, T, T) Toeplitz (causal, same) or circulant (non-causal) matrix per channel
    idx, mask = lag_index(T, causal, same)
    if is_torch(v):
        idx_t = torch.as_tensor(idx, device=v.device)
        mask_t = torch.as_tensor(mask, device=v.device)
        K = h[idx_t] * mask_t[..., None].to(h.dtype)  # (T, T, C)
        return torch.einsum("trc,...rc->...tc", K, v)
    xp = _array_module(v)
    K = h[xp.asarray(idx)] * xp.asarray(mask)[..., None]
    return xp.einsum("trc,...rc->...tc", K, v)


class ConvPlan:
    """The direct convolution of ``conv`` for one fixed float filter ``h`` (T, C),
    planned once: the same sums, with the work each channel really needs.

    * lag-0-only channels (identity and scaling filters): ``h[0] * v``;
    * channels whose taps are all equal (the all-ones "sum" filter): one sum
      over tokens (circular) or a prefix sum (causal), times the tap;
    * the other channels: a Toeplitz/circulant product built once.

    Channels with an all-zero filter give 0.  This is what
    :meth:`constructions.layers.BaseConv.prepare` installs after a cast.
    """

    def __init__(self, h, *, causal: bool, same: bool = False):
        _check_mode(causal, same)
        self.causal, self.same = causal, same
        hn = h.detach().cpu().double().numpy() if is_torch(h) else np.asarray(h.get() if hasattr(h, "get") else h,
                                                                                dtype=np.float64)
        T, C = hn.shape
        nz = hn != 0
        lag0 = nz[0] & ~nz[1:].any(axis=0)
        uniform = (hn == hn[0]).all(axis=0) & nz[0] & ~lag0
        if same:  # tap 0 is not lag 0 and no tap class is a plain sum: every channel is general
            lag0 &= False
            uniform &= False
        general = nz.any(axis=0) & ~lag0 & ~uniform
        self.T, self.C = T, C
        self.lag0 = np.flatnonzero(lag0)
        self.uniform = np.flatnonzero(uniform)
        self.general = np.flatnonzero(general)
        self.h = h
        self.torch = is_torch(h)
        if self.torch:
            idx = lambda a: torch.as_tensor(a, device=h.device, dtype=torch.long)  # noqa: E731
            self._lag0, self._uni, self._gen = idx(self.lag0), idx(self.uniform), idx(self.general)
        else:
            xp = _array_module(h)
            self._lag0, self._uni, self._gen = (xp.asarray(a) for a in (self.lag0, self.uniform, self.general))
        # per-channel coefficient vectors, zero outside their class: whole-array products, no scatter
        zeros = h[0] * 0
        self.c_lag0 = zeros.clone() if self.torch else zeros.copy()
        self.c_lag0[self._lag0] = h[0][self._lag0]
        self.c_uni = zeros.clone() if self.torch else zeros.copy()
        self.c_uni[self._uni] = h[0][self._uni]
        self.K = None
        if len(self.general):
            idx_np, mask_np = lag_index(T, causal, same)
            hg = h[:, self._gen]
            if self.torch:
                self.K = hg[torch.as_tensor(idx_np, device=h.device)] * torch.as_tensor(
                    mask_np, device=h.device)[..., None].to(h.dtype)
            else:
                xp = _array_module(h)
                self.K = hg[xp.asarray(idx_np)] * xp.asarray(mask_np)[..., None]

    def __call__(self, v):
        out = v * self.c_lag0 if len(self.lag0) else None
        if len(self.uniform):
            if self.causal:
                acc = v.cumsum(-2) if self.torch else v.cumsum(axis=-2)
            else:
                acc = v.sum(-2, keepdim=True) if self.torch else v.sum(axis=-2, keepdims=True)
            term = acc * self.c_uni
            out = term if out is None else out + term
        if out is None:
            out = v * 0
        if self.K is not None:
            ein = torch.einsum if self.torch else _array_module(v).einsum
            out[..., self._gen] = ein("trc,...rc->...tc", self.K, v[..., self._gen])
        return out


def _array_module(v):
    if type(v).__module__.startswith("cupy"):
        import cupy  # noqa: PLC0415 - only when a cupy array is passed

        return cupy
    return np


def _conv_fft(v, h, causal, same=False):
    T = v.shape[-2]
    n = 2 * T if (causal or same) else T
    lo = (T - 1) // 2 if same else 0  # "same": the centred T outputs of the linear convolution
    if is_torch(v):
        ctype = v.dtype
        work = v if ctype in (torch.float32, torch.float64) else v.to(torch.float32)
        hw = h.to(work.dtype)
        Vf = torch.fft.rfft(work, n=n, dim=-2)
        Hf = torch.fft.rfft(hw, n=n, dim=-2)
        y = torch.fft.irfft(Vf * Hf, n=n, dim=-2)[..., lo:lo + T, :]
        return y.to(ctype)
    xp = _array_module(v)
    dt = v.dtype
    work = v if dt in (np.float32, np.float64) else v.astype(np.float32)
    Vf = xp.fft.rfft(work, n=n, axis=-2)
    Hf = xp.fft.rfft(h.astype(work.dtype), n=n, axis=-2)
    return xp.fft.irfft(Vf * Hf, n=n, axis=-2)[..., lo:lo + T, :].astype(dt)


def _conv_exact(v, h, causal, need=None, same=False, nonzero_h=None):
    """Exact convolution.  "Same" (``same=True``): one product per tap and token, zero
    padding.  Circular: taps that share one value ``w`` on more than half of the
    shifts are summed as ``w * (column total - the other shifts)`` (the all-ones "sum" filter
    is one total; a "sum of all but the own token" filter one total minus one term); causal
    all-equal taps are prefix sums.  Other taps: one product per tap and token."""
    if v.ndim != 2:
        raise ValueError("exact (object) arrays must be 2-D; loop over the batch")
    T, C = v.shape
    out = zeros_like_object((T, C))
    NH = nonzero_pattern(h) if nonzero_h is None else _pattern_of(nonzero_h, h)
    NV = nonzero_pattern(v)
    todo = NH.any(axis=0) & NV.any(axis=0)
    if need is not None:
        need = np.asarray(need, dtype=bool)
        todo &= need.any(axis=0)
    if not same:  # two channel classes in numpy's loops; the others one by one below
        lag0 = todo & NH[0] & ~NH[1:].any(axis=0)
        if lag0.any():
            _conv_lag0(v, h, out, np.flatnonzero(lag0), NV, need)
        todo &= ~lag0
        if causal:
            for c in np.flatnonzero(todo & NH.all(axis=0) & _equal_taps(h)).tolist():
                _conv_prefix(v, h[0, c], out, c, NV[:, c], None if need is None else need[:, c])
                todo[c] = False
    for c in np.flatnonzero(todo).tolist():
        wanted = range(T) if need is None else [t for t in range(T) if need[t, c]]
        if not wanted:
            continue
        wanted_set = set(wanted)
        taps = [(s, h[s, c]) for s in range(T) if not _is_zero(h[s, c])]
        if not taps:
            continue
        col = [v[t, c] for t in range(T)]
        nz = [t for t in range(T) if not _is_zero(col[t])]
        if not nz:
            continue
        acc = {}

        def put(t, term):
            if t in wanted_set:
                acc[t] = acc[t] + term if t in acc else term

        if same:
            pass  # the plain tap loop below
        elif causal and len(taps) == T and all(w == taps[0][1] for _, w in taps[1:]):
            w, one = taps[0][1], _is_one(taps[0][1])
            run, nzs = None, set(nz)
            for t in range(T):
                if t in nzs:
                    run = col[t] if run is None else run + col[t]
                if run is not None and t in wanted_set:
                    acc[t] = run if one else w * run
            taps = []
        elif not causal:
            groups: list[tuple[object, list[int]]] = []  # (tap value, its shifts)
            for s, w in taps:
                for gw, shifts in groups:
                    if gw == w:
                        shifts.append(s)
                        break
                else:
                    groups.append((w, [s]))
            rest = []
            for w, shifts in groups:
                if 2 * len(shifts) <= T:
                    rest += [(s, w) for s in shifts]
                    continue
                total = tree_sum([col[r] for r in nz])
                mine = set(shifts)
                others = [s for s in range(T) if s not in mine]
                one = _is_one(w)
                if not others:  # every shift: the same value at every token, formed once
                    val = total if one else w * total
                    for t in wanted:
                        put(t, val)
                    continue
                for t in wanted:
                    part = total
                    for s in others:
                        x = col[(t - s) % T]
                        if not _is_zero(x):
                            part = part - x
                    if not _is_zero(part):
                        put(t, part if one else w * part)
            taps = rest
        shift = (T - 1) // 2 if same else 0
        for s, w in taps:
            one = _is_one(w)
            for r in nz:
                t = r + s - shift
                if same:
                    if not 0 <= t < T:
                        continue
                elif causal:
                    if t >= T:
                        continue
                else:
                    t %= T
                put(t, col[r] if one else w * col[r])
        for t, val in acc.items():
            out[t, c] = val
    return out


def tree_sum(xs):
    """``xs[0] + xs[1] + ...`` (None for no terms) added in a balanced tree, neighbours first: the
    same sum (exact addition is associative and commutative), but for polynomials it costs about
    ``log2(len(xs))`` passes over the result where adding left to right costs ``len(xs) / 2``
    (each addition copies its running total: N sums of D-term polynomials, one after the other,
    copy N^2 D / 2 terms)."""
    xs = list(xs)
    if not xs:
        return None
    while len(xs) > 1:
        nxt = [xs[i] + xs[i + 1] for i in range(0, len(xs) - 1, 2)]
        if len(xs) % 2:
            nxt.append(xs[-1])
        xs = nxt
    return xs[0]


def _equal_taps(h) -> np.ndarray:
    """Per channel: every tap equals tap 0 (numpy's elementwise comparison; False for a
    scalar type whose ``==`` is not a plain bool: those channels take the tap loop)."""
    try:
        return np.equal(h, h[:1], dtype=bool).all(axis=0)
    except (TypeError, ValueError):  # pragma: no cover - exotic scalar types
        return np.zeros(h.shape[1], dtype=bool)


def _conv_lag0(v, h, out, cols, NV, need):
    """Channels ``cols`` whose only tap is lag 0: ``out[t, c] = h[0, c] v[t, c]`` on the
    nonzero (and wanted) entries, in numpy's loop; a tap of one copies the entry (the same
    object, no arithmetic)."""
    sub = v[:, cols]
    mask = NV[:, cols] if need is None else NV[:, cols] & need[:, cols]
    w = h[0, cols]
    try:
        ones = np.equal(w, 1, dtype=bool)
    except (TypeError, ValueError):  # pragma: no cover - exotic scalar types
        ones = np.array([_is_one(x) for x in w], dtype=bool)
    res = zeros_like_object(sub.shape)
    np.copyto(res, sub, where=mask & ones)
    np.multiply(np.broadcast_to(w, sub.shape), sub, out=res, where=mask & ~ones)  # tap on the left
    out[:, cols] = res


def _conv_prefix(v, w, out, c, nz, need):
    """A causal channel whose taps all equal ``w``: prefix sums of its nonzero entries
    (``numpy.add.accumulate``: one sum per nonzero entry), each scaled by ``w`` once; a token
    after a zero entry shares the previous token's value."""
    rows = np.flatnonzero(nz)
    run = np.add.accumulate(v[rows, c])
    if not _is_one(w):
        run = np.multiply(w, run)
    T = v.shape[0]
    last = np.searchsorted(rows, np.arange(T), side="right") - 1  # the last nonzero entry <= t
    ts = np.flatnonzero(last >= 0 if need is None else (last >= 0) & need)
    out[ts, c] = run[last[ts]]


def _entrywise_exact(X, Y, ufunc, *, keep_single: bool, nx=None, ny=None):
    """Apply ``ufunc`` (``numpy.add`` / ``numpy.multiply``: each entry's own ``+`` / ``*``, in
    numpy's loop) to two (broadcast) object arrays where both are nonzero; where only one is,
    the result is that operand (``keep_single``: a sum) or zero (a product), and a product with
    a structural one is the other operand.  A pair of operands seen before (the same two
    objects: a value replicated over tokens) reuses the result, so a replicated polynomial is
    computed, and stored, once.  ``nx`` / ``ny``: the operands' nonzero patterns where the
    caller has them."""
    X, Y = np.asarray(X, dtype=object), np.asarray(Y, dtype=object)
    NX = nonzero_pattern(X) if nx is None else _pattern_of(nx, X)
    NY = nonzero_pattern(Y) if ny is None else _pattern_of(ny, Y)
    X, Y, NX, NY = np.broadcast_arrays(X, Y, NX, NY)
    shape = X.shape
    X, Y, NX, NY = X.reshape(-1), Y.reshape(-1), NX.reshape(-1), NY.reshape(-1)  # flat: every rank, 0-d too
    out = zeros_like_object(X.shape)
    both = NX & NY
    if keep_single:
        only = NX & ~NY
        out[only] = X[only]
        only = NY & ~NX
        out[only] = Y[only]
    else:
        for one, other in ((X, Y), (Y, X)):
            hit = both & np.equal(one, 1, dtype=bool)
            out[hit] = other[hit]
            both &= ~hit
    idx = np.flatnonzero(both)
    if idx.size:
        xs, ys = X[idx], Y[idx]
        keys = list(zip(map(id, xs), map(id, ys)))  # operands alive in xs, ys: ids are unique
        first = dict(zip(keys, range(len(keys))))  # one position per distinct pair
        if len(first) == len(keys):
            out[idx] = ufunc(xs, ys)
        else:
            rep = np.fromiter(first.values(), dtype=np.intp, count=len(first))
            slot = dict(zip(first, range(len(first))))
            out[idx] = ufunc(xs[rep], ys[rep])[np.fromiter(map(slot.__getitem__, keys), dtype=np.intp,
                                                           count=len(keys))]
    return out.reshape(shape)


def _pattern_of(nz, A) -> np.ndarray:
    nz = np.asarray(nz, dtype=bool)
    if nz.shape != A.shape:
        raise ValueError(f"nonzero pattern of shape {nz.shape} for an array of shape {A.shape}")
    return nz


def hadamard(X, Y, *, nonzero_x=None, nonzero_y=None):
    """Entry-wise product, skipping structural zeros and ones for exact arrays (``nonzero_*``:
    the exact operands' nonzero patterns, where the caller has them)."""
    if is_object(X) or is_object(Y):
        return _entrywise_exact(X, Y, np.multiply, keep_single=False, nx=nonzero_x, ny=nonzero_y)
    return X * Y


def add(X, Y, *, nonzero_x=None, nonzero_y=None):
    """Entry-wise sum, skipping structural zeros for exact arrays (``nonzero_*``: as
    :func:`hadamard`)."""
    if is_object(X) or is_object(Y):
        return _entrywise_exact(X, Y, np.add, keep_single=True, nx=nonzero_x, ny=nonzero_y)
    return X + Y
