"""Sparse weight matrices: a layer's ``C x C`` projection held as its nonzero entries.

A compiled BaseConv layer (``constructions/compiler``) moves a few values per layer, so each of its
three channel mixes ``W_in``, ``W_gate``, ``W_out`` (seed 000 eq. (19)) has about one nonzero per
inner channel: a dense ``C x C`` object array would hold ``C^2`` entries to say so (the issue of
the compiler at research scale: 46M object entries at 10k gates).  :class:`SparseMatrix` holds
``(row, col, value)`` triples instead, sorted by column then row, with the values in whatever
form the layer's weights take: exact scalars (``int``/``Fraction``/FLINT, an object array), or a
backend's floats (a numpy, torch or cupy vector) after ``Layer.map``.  It is the one sparse
form the whole pipeline uses:

* the exact proof's product ``u @ W`` reads the columns' entries (``constructions.ops.mm``);
* the float run multiplies with ``scipy.sparse`` (numpy float32/float64), a gather/``index_add_``
  kernel (torch, any dtype and device), and a dense float copy only where neither applies
  (numpy float16, which scipy.sparse does not support; cupy);
* reports count its nonzeros (:attr:`nnz`), the weight file's exact sidecar lists its entries.

Dense copies are made only where a consumer asks for an array (``numpy.asarray``, the weight
file's safetensors tensors, the peers' export formats, which hold dense tensors by format).
``S == x`` and ``S != x`` with a scalar give numpy's dense boolean matrix; a comparison with
anything else is refused (it would otherwise compare the objects, not the entries).
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from .ops import array_module, mm, nonzero_pattern
from .ops import is_torch as _is_torch

#: a torch product is done in chunks of entries so that the gathered operand ``X[..., rows]``
#: holds at most this many scalars
_CHUNK_SCALARS = 1 << 24


class SparseMatrix:
    """An ``m x n`` matrix given by its nonzero entries (no explicit zeros in the exact form).

    ``rows``, ``cols``: int64 index vectors; ``vals``: the entries, a vector of the same length
    (numpy object/float, torch or cupy).  Build with :meth:`from_entries` or :meth:`from_dense`."""

    __slots__ = ("shape", "rows", "cols", "vals", "_cache")
    #: numpy's operators return NotImplemented, so ``ndarray @ S`` calls :meth:`__rmatmul__`
    __array_ufunc__ = None
    ndim = 2

    def __init__(self, shape, rows, cols, vals):
        m, n = (int(s) for s in shape)
        if m < 0 or n < 0:
            raise ValueError(f"sparse matrix shape {shape} has a negative size")
        self.shape = (m, n)
        self.rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        self.cols = np.asarray(cols, dtype=np.int64).reshape(-1)
        self.vals = vals
        if not (len(self.rows) == len(self.cols) == len(vals)):
            raise ValueError(f"sparse matrix: {len(self.rows)} rows, {len(self.cols)} columns and "
                             f"{len(vals)} values")
        if len(self.rows) and (self.rows.min() < 0 or self.rows.max() >= m or self.cols.min() < 0
                               or self.cols.max() >= n):
            raise ValueError(f"sparse matrix: an entry lies outside the shape {self.shape}")
        self._cache = {}

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_entries(cls, shape, entries, convert=Fraction) -> "SparseMatrix":
        """From ``{(i, j): value}`` (or ``(i, j, value)`` triples; repeated positions are summed),
        each value through ``convert``; zeros are dropped."""
        items = entries.items() if isinstance(entries, dict) else (((i, j), v) for i, j, v in entries)
        acc: dict = {}
        for (i, j), v in items:
            acc[(int(i), int(j))] = acc[(int(i), int(j))] + v if (int(i), int(j)) in acc else v
        keys = sorted((k for k, v in acc.items() if v != 0), key=lambda k: (k[1], k[0]))
        vals = np.empty(len(keys), dtype=object)
        for t, k in enumerate(keys):
            vals[t] = convert(acc[k])
        rows = np.fromiter((k[0] for k in keys), dtype=np.int64, count=len(keys))
        cols = np.fromiter((k[1] for k in keys), dtype=np.int64, count=len(keys))
        return cls(shape, rows, cols, vals)

    @classmethod
    def from_dense(cls, A) -> "SparseMatrix":
        """The nonzero entries of a dense 2-D array (exact or float)."""
        A = np.asarray(A)
        if A.ndim != 2:
            raise ValueError(f"a sparse matrix is 2-D, got shape {A.shape}")
        if A.dtype == object:
            nz = nonzero_pattern(A)
        else:
            nz = A != 0
        cols, rows = np.nonzero(nz.T)  # column-major order: sorted by column, then row
        return cls(A.shape, rows, cols, A[rows, cols])

    # ------------------------------------------------------------------ array-like surface

    @property
    def nnz(self) -> int:
        return len(self.rows)

    @property
    def size(self) -> int:
        return self.shape[0] * self.shape[1]

    @property
    def dtype(self):
        return getattr(self.vals, "dtype", np.dtype(object))

    def map_values(self, f) -> "SparseMatrix":
        """The same pattern with ``f`` applied to the value vector (an elementwise conversion:
        to FLINT, to a backend's floats, exact binary values of floats)."""
        return SparseMatrix(self.shape, self.rows, self.cols, f(self.vals))

    def toarray(self):
        """The dense matrix: an object array of exact values (int 0 elsewhere) or a float array
        in the values' own library."""
        v = self.vals
        if isinstance(v, np.ndarray):
            out = np.zeros(self.shape, dtype=v.dtype) if v.dtype != object else np.full(self.shape, 0, dtype=object)
            out[self.rows, self.cols] = v
            return out
        if _is_torch(v):
            import torch

            out = torch.zeros(self.shape, dtype=v.dtype, device=v.device)
            out[torch.as_tensor(self.rows, device=v.device), torch.as_tensor(self.cols, device=v.device)] = v
            return out
        xp = array_module(v)  # cupy
        out = xp.zeros(self.shape, dtype=v.dtype)
        out[xp.asarray(self.rows), xp.asarray(self.cols)] = v
        return out

    def __array__(self, dtype=None, copy=None):
        v = self.vals
        if not isinstance(v, np.ndarray):
            raise TypeError("a sparse matrix of device values has no numpy form; call toarray()")
        out = self.toarray()
        return out if dtype is None else out.astype(dtype)

    def __len__(self):
        return self.shape[0]

    def __repr__(self):
        return f"SparseMatrix(shape={self.shape}, nnz={self.nnz}, dtype={self.dtype})"

    def _compare(self, other, equal: bool):
        """``S == x`` / ``S != x`` for a scalar ``x``: the dense boolean matrix, as numpy gives
        (one byte an entry; the stored entries compared, the rest as zeros)."""
        if isinstance(other, (SparseMatrix, np.ndarray, list, tuple)) or not np.ndim(other) == 0:
            raise TypeError("a SparseMatrix is compared with a scalar; use toarray() or its entries otherwise")
        zero_hit = bool(0 == other)
        out = np.full(self.shape, zero_hit == equal, dtype=bool)
        if self.nnz:
            v = self.vals if isinstance(self.vals, np.ndarray) else np.asarray(self.toarray()[self.rows, self.cols])
            hit = np.array([bool(x == other) for x in v.tolist()], dtype=bool) if v.dtype == object else v == other
            out[self.rows, self.cols] = hit if equal else ~hit
        return out

    def __eq__(self, other):
        return self._compare(other, True)

    def __ne__(self, other):
        return self._compare(other, False)

    __hash__ = None

    def copy(self) -> "SparseMatrix":
        v = self.vals
        return SparseMatrix(self.shape, self.rows.copy(), self.cols.copy(), v.clone() if _is_torch(v) else v.copy())

    def entries(self):
        """``(i, j, value)`` for every stored entry, column by column."""
        return zip(self.rows.tolist(), self.cols.tolist(), list(self.vals))

    def __getitem__(self, key):
        """``S[rows_sel, cols_sel]`` with each selector a slice, an int or a list of indices (at
        most one of them a list: numpy pairs two index arrays entry by entry, which a sparse
        selection does not do): the selected submatrix, sparse (an int keeps its axis)."""
        if not isinstance(key, tuple):
            key = (key, slice(None))
        if len(key) != 2:
            raise IndexError(f"a sparse matrix takes two indices, got {len(key)}")
        if all(isinstance(k, (int, np.integer)) for k in key):  # one entry, as numpy: the scalar
            t = self._find(*key)
            if t >= 0:
                return self.vals[t]
            v = self.vals
            return 0 if isinstance(v, np.ndarray) and v.dtype == object else v[:1].sum() * 0
        if all(not isinstance(k, (slice, int, np.integer)) for k in key):
            raise TypeError("a sparse matrix takes at most one index list (numpy would pair two of them "
                            "entry by entry); call toarray() for that")
        maps = [_selector(k, n) for k, n in zip(key, self.shape)]
        keep = np.ones(self.nnz, dtype=bool)
        new = []
        for (pos, n_new), idx in zip(maps, (self.rows, self.cols)):
            p = pos[idx]
            keep &= p >= 0
            new.append((p, n_new))
        rows, cols = new[0][0][keep], new[1][0][keep]
        order = np.lexsort((rows, cols))
        vals = self.vals[np.flatnonzero(keep)[order]] if isinstance(self.vals, np.ndarray) else \
            self.vals[index_like(self.vals, np.flatnonzero(keep)[order])]
        return SparseMatrix((new[0][1], new[1][1]), rows[order], cols[order], vals)

    def _position(self, i, j) -> tuple[int, int, int]:
        m, n = self.shape
        if not (-m <= int(i) < m and -n <= int(j) < n):
            raise IndexError(f"index ({i}, {j}) out of range for shape {self.shape}")
        i, j = int(i) % m, int(j) % n
        keys = self.cols * m + self.rows  # the storage order: column, then row
        return i, j, int(np.searchsorted(keys, j * m + i))

    def _find(self, i, j) -> int:
        """The storage index of entry (i, j), or -1."""
        i, j, t = self._position(i, j)
        return t if t < self.nnz and self.rows[t] == i and self.cols[t] == j else -1

    def __setitem__(self, key, value):
        """``S[i, j] = value`` for one entry (a zero removes it); exact (numpy object/float) values only."""
        if not (isinstance(key, tuple) and len(key) == 2 and all(isinstance(k, (int, np.integer)) for k in key)):
            raise TypeError("a sparse matrix is assigned one entry at a time, S[i, j] = value")
        if not isinstance(self.vals, np.ndarray):
            raise TypeError("a sparse matrix of device values is read-only")
        i, j, t = self._position(*key)
        here = t < self.nnz and self.rows[t] == i and self.cols[t] == j
        if here and value == 0:
            keep = np.arange(self.nnz) != t
            self.rows, self.cols, self.vals = self.rows[keep], self.cols[keep], self.vals[keep]
        elif here:
            self.vals[t] = value
        elif value != 0:
            v = np.empty(1, dtype=self.vals.dtype)
            v[0] = value
            self.rows, self.cols = np.insert(self.rows, t, i), np.insert(self.cols, t, j)
            self.vals = np.concatenate([self.vals[:t], v, self.vals[t:]])
        self._cache = {}

    # ------------------------------------------------------------------ products

    def columns(self):
        """``(j, rows, values)`` for every column holding an entry (rows ascending)."""
        hit = self._cache.get("columns")
        if hit is None:  # found once per matrix (an entry write clears it): the exact product reads it per call
            if not self.nnz:
                hit = []
            else:
                starts = np.flatnonzero(np.r_[True, self.cols[1:] != self.cols[:-1]])
                ends = np.r_[starts[1:], self.nnz]
                hit = [(int(self.cols[s]), self.rows[s:e], list(self.vals[s:e]))
                       for s, e in zip(starts.tolist(), ends.tolist())]
            self._cache["columns"] = hit
        return hit

    def __matmul__(self, other):
        raise TypeError("SparseMatrix is a right operand (a layer's u @ W); use toarray() for W @ X")

    def __rmatmul__(self, X):
        """``X @ self`` over the last axis of a float ``X`` (any leading axes)."""
        if isinstance(X, np.ndarray) and X.dtype == object:
            return mm(X, self)
        m, n = self.shape
        if X.shape[-1] != m:
            raise ValueError(f"shape mismatch in matrix product: {tuple(X.shape)} @ {self.shape}")
        lead = tuple(X.shape[:-1])
        X2 = X.reshape(-1, m)
        if _is_torch(X):
            Y = self._torch_product(X2)
        elif isinstance(X, np.ndarray) and X.dtype in (np.float32, np.float64):
            Y = np.asarray(self._scipy(X.dtype).T @ X2.T).T  # CSR (n x m) times the columns of X^T
        else:  # numpy float16 (scipy.sparse has none), cupy: a dense float copy in the values' library
            W = self._cache.get("dense")
            if W is None:
                W = self._cache["dense"] = self.toarray()
            Y = X2 @ W
        return Y.reshape(lead + (n,))

    def _scipy(self, dtype):
        key = ("scipy", np.dtype(dtype).str)
        A = self._cache.get(key)
        if A is None:
            import scipy.sparse as sp

            A = self._cache[key] = sp.csr_array((np.asarray(self.vals, dtype=dtype), (self.rows, self.cols)),
                                                shape=self.shape)
        return A

    def _torch_product(self, X2):
        """``X2 @ self`` as gathers and one ``index_add_`` per chunk of entries: any dtype and
        device torch supports (its CSR product has no float16/bfloat16 kernel on CPU)."""
        import torch

        key = ("torch", X2.device, X2.dtype)
        hit = self._cache.get(key)
        if hit is None:
            v = self.vals if _is_torch(self.vals) else torch.as_tensor(np.asarray(self.vals, dtype=np.float64))
            hit = self._cache[key] = (torch.as_tensor(self.rows, device=X2.device),
                                      torch.as_tensor(self.cols, device=X2.device), v.to(X2.device, X2.dtype))
        rows, cols, vals = hit
        Y = torch.zeros((X2.shape[0], self.shape[1]), dtype=X2.dtype, device=X2.device)
        step = max(1, _CHUNK_SCALARS // max(1, X2.shape[0]))
        for s in range(0, self.nnz, step):
            Y.index_add_(1, cols[s:s + step], X2[:, rows[s:s + step]] * vals[s:s + step])
        return Y


def _selector(k, n: int):
    """(position of each old index in the selection or -1, the selection's length)."""
    pos = np.full(n, -1, dtype=np.int64)
    if isinstance(k, slice):
        idx = np.arange(n)[k]
    elif isinstance(k, (int, np.integer)):
        if not -n <= int(k) < n:
            raise IndexError(f"index {k} out of range for size {n}")
        idx = np.array([int(k) % n])
    else:
        idx = np.asarray(k, dtype=np.int64).reshape(-1)
        if len(np.unique(idx)) != len(idx):
            raise IndexError("a sparse selection repeats an index")
        if len(idx) and (idx.min() < -n or idx.max() >= n):
            raise IndexError(f"an index is out of range for size {n}")
        idx = idx % n if len(idx) else idx
    pos[idx] = np.arange(len(idx))
    return pos, len(idx)


def index_like(v, idx):
    """Integer indices ``idx`` in the library (and device) of the vector ``v``."""
    if _is_torch(v):
        import torch

        return torch.as_tensor(idx, device=v.device)
    return array_module(v).asarray(idx)


def map_weight(f, A):
    """``f`` applied to a weight: to a dense array as it is, to a :class:`SparseMatrix`'s values
    (every ``Layer.map`` goes through here, so a conversion never densifies a sparse weight), or,
    for a function marked ``whole_weight`` (:func:`dense`), to the weight itself."""
    if isinstance(A, SparseMatrix) and not getattr(f, "whole_weight", False):
        return A.map_values(f)
    return f(A)


def dense(A):
    """A weight as a dense array (``Layer.map(dense)``: the layer with every weight dense), for a
    consumer whose format holds dense tensors (the peers' export formats)."""
    return A.toarray() if isinstance(A, SparseMatrix) else A


dense.whole_weight = True


def is_sparse(x) -> bool:
    return isinstance(x, SparseMatrix)


def nnz(A) -> int:
    """The number of nonzero entries of a weight array, dense or sparse."""
    if isinstance(A, SparseMatrix):
        if isinstance(A.vals, np.ndarray) and A.vals.dtype != object:
            return int(np.count_nonzero(A.vals))
        return A.nnz
    A = np.asarray(A)
    return int(nonzero_pattern(A).sum()) if A.dtype == object else int(np.count_nonzero(A))
