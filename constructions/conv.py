"""Per-channel convolution along tokens, for every scalar type (the array types of
:mod:`constructions.ops`, which re-exports every public name here).

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

import functools

import numpy as np

from .running_sums import prefix_sums
from .ops import (array_module, is_one, is_zero, pattern_of, is_object, is_torch, nonzero_pattern, torch,
                  tree_sum, zeros_like_object)


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


@functools.lru_cache(maxsize=64)
def _lag_index_on(T: int, causal: bool, same: bool, device):
    """:func:`lag_index` as torch tensors on ``device``, made once per (T, mode, device): a training
    step's convolutions copy nothing from the host (a blocking copy waits for the GPU)."""
    idx, mask = lag_index(T, causal, same)
    return torch.as_tensor(idx, device=device), torch.as_tensor(mask, device=device)


def _check_mode(causal: bool, same: bool) -> None:
    if same and causal:
        raise ValueError("a convolution is causal, circular or 'same', not causal and 'same' at once")


def conv(v, h, *, causal: bool, method: str = "direct", need=None, same: bool = False, nonzero_h=None):
    """Per-channel convolution of ``v`` (..., T, C) with filters ``h`` (T, C).

    ``causal`` / circular / ``same`` (zero-padded, centred): this module's docstring.
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
        idx_t, mask_t = _lag_index_on(T, causal, same, v.device)
        K = h[idx_t] * mask_t[..., None].to(h.dtype)  # (T, T, C)
        return torch.einsum("trc,...rc->...tc", K, v)
    xp = array_module(v)
    K = h[xp.asarray(idx)] * xp.asarray(mask)[..., None]
    return xp.einsum("trc,...rc->...tc", K, v)


class ConvPlan:
    """The direct convolution of ``conv`` for one fixed float filter ``h`` (T, C),
    planned once: the same sums, with the work each channel really needs.

    * lag-0-only channels (identity and scaling filters): ``h[0] * v``;
    * channels whose taps are all equal (the all-ones "sum" filter): one sum
      over tokens (circular) or a prefix sum (causal), times the tap;
    * channels with a few nonzero taps (at most one per :data:`FEW_TAPS_PER` tokens: masked shifts,
      a compiled route's lags 0 and +-2^j): one shifted copy of ``v`` per nonzero lag, times the tap,
      ``T`` multiply-adds a tap (no ``(T, T)`` kernel: a compiled circuit's 625 tokens x 2137 route
      channels would be an 8 GB kernel);
    * the other channels: a Toeplitz/circulant product, its ``(T, T, channels)`` kernel built once where
      it is small (:data:`KERNEL_MAX_ENTRIES`), else formed in each call a group of channels at a time
      (:data:`KERNEL_CHUNK_ENTRIES`): the same sums, bit for bit, in bounded memory.

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
        few = general & (nz.sum(axis=0) * FEW_TAPS_PER <= T) if not same else general & False
        general &= ~few
        # the few-tap channels by lag: lag -> (its channels, their taps there)
        self.taps = [(int(s), np.flatnonzero(few & nz[s])) for s in np.flatnonzero((nz & few).any(axis=1))]
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
            xp = array_module(h)
            self._lag0, self._uni, self._gen = (xp.asarray(a) for a in (self.lag0, self.uniform, self.general))
        # per-channel coefficient vectors, zero outside their class: whole-array products, no scatter
        zeros = h[0] * 0
        self.c_lag0 = zeros.clone() if self.torch else zeros.copy()
        self.c_lag0[self._lag0] = h[0][self._lag0]
        self.c_uni = zeros.clone() if self.torch else zeros.copy()
        self.c_uni[self._uni] = h[0][self._uni]
        if self.torch:
            self._taps = [(lag, idx(cols), h[lag, idx(cols)]) for lag, cols in self.taps]
        else:
            xp = array_module(h)
            self._taps = [(lag, xp.asarray(cols), h[lag, xp.asarray(cols)]) for lag, cols in self.taps]
        self._K = None
        if len(self.general):
            idx_np, mask_np = lag_index(T, causal, same)
            if self.torch:
                self._idx = torch.as_tensor(idx_np, device=h.device)
                self._mask = torch.as_tensor(mask_np, device=h.device)[..., None].to(h.dtype)
            else:
                xp = array_module(h)
                self._idx, self._mask = xp.asarray(idx_np), xp.asarray(mask_np)[..., None]
            if T * T * len(self.general) <= KERNEL_MAX_ENTRIES:
                self._K = self._kernel(self._gen)
        # the general channels in groups whose kernel has at most KERNEL_CHUNK_ENTRIES entries (a kept
        # kernel: one group)
        # (at least two channels a group: einsum sums a single channel's products in another order)
        n = len(self.general)
        per = n if self._K is not None else max(2, KERNEL_CHUNK_ENTRIES // (T * T))
        self._groups = [(lo, min(lo + per, n)) for lo in range(0, n, per)]
        if len(self._groups) > 1 and self._groups[-1][1] - self._groups[-1][0] < 2:
            self._groups[-2:] = [(self._groups[-2][0], n)]

    def _kernel(self, cols):
        """The Toeplitz/circulant kernel ``K[t, r, j] = h[lag(t, r), cols[j]]`` (0 where no tap),
        ``(T, T, len(cols))``."""
        return self.h[:, cols][self._idx] * self._mask

    @property
    def K(self):
        """The general channels' kernel, ``(T, T, len(general))`` (None without general channels): the array
        kept from the start when it has at most :data:`KERNEL_MAX_ENTRIES` entries; otherwise a view
        (:class:`KernelView`) whose ``K[:, :, j]`` forms that one channel's ``(T, T)`` kernel when asked
        (the plan's own calls form it a group of channels at a time)."""
        if not len(self.general):
            return None
        return self._K if self._K is not None else KernelView(self)

    def __call__(self, v):
        out = v * self.c_lag0 if len(self.lag0) else None
        if len(self.uniform):
            if self.causal:
                acc = v.cumsum(-2) if self.torch else v.cumsum(axis=-2)
            else:
                acc = v.sum(-2, keepdim=True) if self.torch else v.sum(axis=-2, keepdims=True)
            term = acc * self.c_uni
            if out is not None:
                out = out + term
            else:  # a circular sum has one row: laid out on every token (general channels are written in)
                out = term.expand(v.shape).clone() if self.torch else array_module(v).broadcast_to(term, v.shape).copy()
        if out is None:
            out = v * 0
        if len(self.general):  # each output entry the same sum, in the same order, whatever the grouping
            ein = torch.einsum if self.torch else array_module(v).einsum
            for lo, hi in self._groups:
                cols = self._gen[lo:hi]
                K = self._K[..., lo:hi] if self._K is not None else self._kernel(cols)
                out[..., cols] = ein("trc,...rc->...tc", K, v[..., cols])
        T = self.T
        for lag, cols, tap in self._taps:  # y[t] += h[lag] v[t - lag] (circular: mod T; causal: t >= lag)
            vc = v[..., cols]
            if self.causal:
                out[..., lag:, cols] += tap * vc[..., :T - lag, :]
            elif lag:
                out[..., cols] += tap * (vc.roll(lag, -2) if self.torch else array_module(v).roll(vc, lag, axis=-2))
            else:
                out[..., cols] += tap * vc
        return out


class KernelView:
    """``ConvPlan.K`` where the whole kernel is not kept: ``shape``, and ``view[:, :, j]`` (``j`` an index
    into the plan's general channels), that channel's ``(T, T)`` kernel as a :class:`ChannelKernel` (formed
    where it is used); ``view[...]`` or ``numpy.asarray(view)``: the whole kernel, formed on the call."""

    def __init__(self, plan: "ConvPlan"):
        self.plan = plan
        self.shape = (plan.T, plan.T, len(plan.general))
        self.dtype = plan.h.dtype

    def __getitem__(self, key):
        p = self.plan
        if (isinstance(key, tuple) and len(key) == 3 and key[0] == slice(None) and key[1] == slice(None)
                and isinstance(key[2], (int, np.integer))):
            return ChannelKernel(p, int(key[2]) % len(p.general))
        return p._kernel(p._gen)[key]

    def __array__(self, dtype=None, copy=None):
        full = self[...]
        full = full.detach().cpu().numpy() if is_torch(full) else np.asarray(full)
        return full if dtype is None else full.astype(dtype)


class ChannelKernel:
    """One general channel's ``(T, T)`` kernel from a :class:`KernelView` (``view[:, :, j]``), or its
    transpose (``.T``), formed each time it is used and not kept: ``v @ kernel`` (numpy through
    ``__array__``, torch through ``__rmatmul__``), ``numpy.asarray(kernel)``; ``.contiguous()`` is itself (the
    array it forms is contiguous).  A channel-major float layer (``constructions/plans.py``) holds one per
    channel instead of a ``(T, T)`` copy each: 170 MB a layer for a learned file's dense filters at 256x64."""

    def __init__(self, plan: "ConvPlan", j: int, transposed: bool = False):
        self.plan, self.j, self.transposed = plan, j, transposed
        self.shape = (plan.T, plan.T)
        self.dtype = plan.h.dtype

    @property
    def T(self) -> "ChannelKernel":
        return ChannelKernel(self.plan, self.j, not self.transposed)

    def contiguous(self) -> "ChannelKernel":
        return self

    def array(self):
        """The kernel (or its transpose) as a contiguous array of the plan's library."""
        p = self.plan
        K = p._kernel(p._gen[self.j:self.j + 1])[:, :, 0]
        K = K.T if self.transposed else K
        return K.contiguous() if p.torch else array_module(K).ascontiguousarray(K)

    def __array__(self, dtype=None, copy=None):
        a = self.array()
        a = a.detach().cpu().numpy() if is_torch(a) else np.asarray(a.get() if hasattr(a, "get") else a)
        return a if dtype is None else a.astype(dtype)

    def __rmatmul__(self, v):
        return v @ self.array()

    def __matmul__(self, w):
        return self.array() @ w


#: ``ConvPlan`` runs a channel with ``k`` nonzero taps as ``k`` shifted copies where ``k * FEW_TAPS_PER <= T``
FEW_TAPS_PER = 8
#: ``ConvPlan`` keeps its general channels' ``(T, T, channels)`` kernel when it has at most this many entries
#: (32 MiB of float64); a larger one (a learned file's dense filters: 257 x 257 x 322 float64 is 170 MB a layer,
#: and a stack's plans are kept for the whole run) is formed in each call a group of channels at a time
KERNEL_MAX_ENTRIES = 1 << 22
#: entries of one group's kernel when the whole kernel is not kept (8 MiB of float64)
KERNEL_CHUNK_ENTRIES = 1 << 20


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
    xp = array_module(v)
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
    NH = nonzero_pattern(h) if nonzero_h is None else pattern_of(nonzero_h, h)
    NV = nonzero_pattern(v)
    todo = NH.any(axis=0) & NV.any(axis=0)
    if need is not None:
        need = np.asarray(need, dtype=bool)
        todo &= need.any(axis=0)
    if not same:  # two channel classes in numpy's loops; the others one by one below
        _conv_classes(v, h, out, NH, NV, todo, causal, need)
    for c in np.flatnonzero(todo).tolist():
        _conv_channel(v, h, out, c, causal, same, None if need is None else need[:, c])
    return out


def _conv_classes(v, h, out, NH, NV, todo, causal, need) -> None:
    """The lag-0-only channels, and (causal) the all-equal-taps channels, in numpy's loops;
    clears them from ``todo``."""
    lag0 = todo & NH[0] & ~NH[1:].any(axis=0)
    if lag0.any():
        _conv_lag0(v, h, out, np.flatnonzero(lag0), NV, need)
    todo &= ~lag0
    if causal:
        for c in np.flatnonzero(todo & NH.all(axis=0) & _equal_taps(h)).tolist():
            _conv_prefix(v, h[0, c], out, c, NV[:, c], None if need is None else need[:, c])
            todo[c] = False


def _conv_channel(v, h, out, c, causal, same, need_c) -> None:
    """Channel ``c`` of the exact convolution, term by term (``need_c``: the wanted tokens)."""
    T = v.shape[0]
    wanted = range(T) if need_c is None else [t for t in range(T) if need_c[t]]
    if not wanted:
        return
    wanted_set = set(wanted)
    taps = [(s, h[s, c]) for s in range(T) if not is_zero(h[s, c])]
    if not taps:
        return
    col = [v[t, c] for t in range(T)]
    nz = [t for t in range(T) if not is_zero(col[t])]
    if not nz:
        return
    acc = {}

    def put(t, term):
        if t in wanted_set:
            acc[t] = acc[t] + term if t in acc else term

    if same:
        pass  # the plain tap loop below
    elif causal and len(taps) == T and all(w == taps[0][1] for _, w in taps[1:]):
        w, one = taps[0][1], is_one(taps[0][1])
        run, nzs = None, set(nz)
        for t in range(T):
            if t in nzs:
                run = col[t] if run is None else run + col[t]
            if run is not None and t in wanted_set:
                acc[t] = run if one else w * run
        taps = []
    elif not causal:
        taps = _circular_groups(taps, col, nz, wanted, put)
    shift = (T - 1) // 2 if same else 0
    for s, w in taps:
        one = is_one(w)
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


def _circular_groups(taps, col, nz, wanted, put) -> list:
    """A circular channel's taps grouped by value: a value on more than half of the shifts is
    summed as ``w * (column total - the other shifts)`` through ``put``; returns the other taps
    (the plain tap loop's)."""
    T = len(col)
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
        one = is_one(w)
        if not others:  # every shift: the same value at every token, formed once
            val = total if one else w * total
            for t in wanted:
                put(t, val)
            continue
        for t in wanted:
            part = total
            for s in others:
                x = col[(t - s) % T]
                if not is_zero(x):
                    part = part - x
            if not is_zero(part):
                put(t, part if one else w * part)
    return rest


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
        ones = np.array([is_one(x) for x in w], dtype=bool)
    res = zeros_like_object(sub.shape)
    np.copyto(res, sub, where=mask & ones)
    np.multiply(np.broadcast_to(w, sub.shape), sub, out=res, where=mask & ~ones)  # tap on the left
    out[:, cols] = res


def _conv_prefix(v, w, out, c, nz, need):
    """A causal channel whose taps all equal ``w``: prefix sums of its nonzero entries, each
    scaled by ``w`` first (``constructions.running_sums.prefix_sums``: ``numpy.add.accumulate``,
    or for polynomials a shared chain, N terms for the N sums); a token after a zero entry shares
    the previous token's value."""
    rows = np.flatnonzero(nz)
    terms = v[rows, c]
    if not is_one(w):  # w (x_0 + ... + x_t) as w x_0 + ... + w x_t: the sums of a chain stay shared
        terms = np.multiply(w, terms)
    run = prefix_sums(terms)
    T = v.shape[0]
    last = np.searchsorted(rows, np.arange(T), side="right") - 1  # the last nonzero entry <= t
    ts = np.flatnonzero(last >= 0 if need is None else (last >= 0) & need)
    out[ts, c] = run[last[ts]]
