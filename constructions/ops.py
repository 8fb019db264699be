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

Convolution (``conv``, ``ConvPlan``, ``lag_index``: causal, circular and "same", seed 003
App. H.1.1, seed 000 Def. D.20) lives in :mod:`constructions.conv`; its names are read
through this module too, loaded on first use (``ops.conv``: that ``conv``, with a FLINT
shortcut for dense rational filters, :func:`conv_rational`, as :func:`mm_rational` is mm's).
"""
from __future__ import annotations


import sys
from typing import TYPE_CHECKING

import numpy as np

from .running_sums import truth_as_candidate

if TYPE_CHECKING:  # constructions/sparse.py builds on this module; mm looks it up when called
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


def is_zero(v) -> bool:
    """``v == 0``, False for a scalar type whose comparison raises (a structural-zero test)."""
    try:
        return v == 0
    except Exception:  # pragma: no cover - exotic scalar types
        return False


def is_one(v) -> bool:
    """``v == 1``, False for a scalar type whose comparison raises (a structural-one test)."""
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
    calls nonzero).  A :class:`~constructions.running_sums.RunningSum` (a prefix sum held as a
    chain) counts as nonzero without forming its value (``truth_as_candidate``).  Entry by entry ``!= 0`` for a type whose
    truth test raises."""
    M = np.asarray(M, dtype=object)
    flat = M.ravel()
    cand = np.flatnonzero(addresses(flat) != _ZERO_ADDRESS)
    out = np.zeros(flat.shape, dtype=bool)
    if cand.size:
        vals = flat[cand]
        try:
            with truth_as_candidate():  # a running sum: a candidate nonzero, its value not formed
                out[cand] = vals.astype(bool)
        except (TypeError, ValueError):  # e.g. a sympy relation: its truth value is undecided
            out[cand] = [not is_zero(v) for v in vals]
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
    from .sparse import SparseMatrix  # (imported with the layers: a dictionary lookup here)

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
        NY = nonzero_pattern(Y) if nonzero_y is None else pattern_of(nonzero_y, Y)
        if m * k * n >= RATIONAL_MM_MIN and NY.sum() >= RATIONAL_MM_DENSITY * NY.size:
            out = mm_rational(X, Y)  # dense, rational entries only: one integer-matrix product in FLINT
            if out is not None:
                return out
        NX = nonzero_pattern(X) if nonzero_x is None else pattern_of(nonzero_x, X)  # numpy's loop
        try:
            return _mm_columns(X, NX, n, _dense_columns(Y, NY))
        except (TypeError, ValueError):  # an entry whose == 1 is not a plain bool: one by one below
            pass
        out = zeros_like_object((m, n))
        for j in np.nonzero(NY.any(axis=0))[0].tolist():
            rs = np.nonzero(NY[:, j])[0]
            ys = [Y[r, j] for r in rs.tolist()]
            y_one = [is_one(y) for y in ys]
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
                        terms.append(y if is_one(x) else (x if y1 else x * y))
                seen[key] = out[i, j] = 0 if not terms else tree_sum(terms)
        return out
    return X @ Y


#: an exact product of at least this many scalar products (``m k n``) whose entries are all rationals
#: (:func:`mm_rational`), with at least this fraction of the right operand's entries nonzero (a learned
#: file's dense weights; a construction's sparse ones are faster in :func:`_mm_columns`, which skips
#: the zeros), runs as one FLINT integer-matrix product
RATIONAL_MM_MIN = 4096
RATIONAL_MM_DENSITY = 0.25


def _rational_types():
    """The exact rational scalar types :func:`mm_rational` reads, by the output type they give (the
    first present of fmpq, mpq, Fraction, int)."""
    from fractions import Fraction

    import flint
    import gmpy2

    return {int: "int", Fraction: "fraction", type(gmpy2.mpz(0)): "int", type(gmpy2.mpq(0)): "mpq",
            flint.fmpz: "int", flint.fmpq: "fmpq"}


def _num_den(x, kind: str) -> tuple[int, int]:
    if kind == "int":
        return int(x), 1
    if kind == "fmpq":
        return int(x.p), int(x.q)
    return int(x.numerator), int(x.denominator)


#: the right operands of :func:`mm_rational` cleared of their denominators, by the array's id (the array
#: kept with it, and the identities of the entries it held: an array changed in place since is cleared
#: again): a weight is cleared once, not once per product (the oldest dropped)
_CLEARED: dict = {}
_CLEARED_KEPT = 64


def mm_rational(X: np.ndarray, Y: np.ndarray):
    """The exact ``X @ Y`` of two 2-D object arrays whose entries are all rationals (Python ``int``,
    ``fractions.Fraction``, gmpy2 ``mpz`` / ``mpq``, FLINT ``fmpz`` / ``fmpq``), or None where an entry
    is anything else (a polynomial, a running sum, a float), or FLINT's and gmpy2's / Fraction's
    rationals are mixed (they do not multiply each other: :func:`mm`'s own loop raises as before).

    Each row ``i`` of ``X`` is scaled by the lcm ``a_i`` of its denominators and each column ``j`` of
    ``Y`` by the lcm ``b_j`` of its, so both are integer matrices; their product is one FLINT
    ``fmpz_mat`` product (exact, multimodular), and entry ``(i, j)`` is that product's entry over
    ``a_i b_j``: the same rational as the sum of the entries' products, whatever their order.  The
    entries come back in the operands' type (fmpq where FLINT's, else mpq where gmpy2's, else
    Fraction where any, else int; as their own arithmetic gives), each zero the int 0 (the structural
    zero the exact operations skip).  A learned file's dense float weights read exactly (binary
    fractions) are multiplied here in a fraction of a second where the entry-by-entry Fraction
    products took minutes (issue 41 item 1)."""
    import math

    import flint

    table = _rational_types()
    out_kind = _rationals_kind((X, Y), table)
    if out_kind is None:
        return None
    xs, ys = X.ravel().tolist(), Y.ravel().tolist()
    m, k = X.shape
    n = Y.shape[1]

    def cleared(vals, rows, cols, by_row: bool):
        """The integer matrix (row-major list) and the lcm of the denominators of each row (or column)."""
        nd = [(0, 1) if id(v) == _ZERO_ADDRESS else _num_den(v, table[type(v)]) for v in vals]  # the structural 0
        if by_row:
            lcms = [math.lcm(*(d for _, d in nd[i * cols:(i + 1) * cols])) for i in range(rows)] if rows else []
            ints = [a * (lcms[h // cols] // d) for h, (a, d) in enumerate(nd)]
        else:
            lcms = [math.lcm(*(nd[r * cols + j][1] for r in range(rows))) for j in range(cols)] if cols else []
            ints = [a * (lcms[h % cols] // d) for h, (a, d) in enumerate(nd)]
        return ints, lcms

    A, ra = cleared(xs, m, k, True)
    hit = _CLEARED.get(id(Y))
    held = addresses(Y).tobytes()  # the entries (immutable rationals) Y holds now, by identity
    if hit is None or hit[0] is not Y or hit[1] != held:  # a weight multiplied again: cleared once
        B, cb = cleared(ys, k, n, False)
        hit = (Y, held, flint.fmpz_mat(k, n, B) if k else None, cb)
        if len(_CLEARED) >= _CLEARED_KEPT:
            _CLEARED.pop(next(iter(_CLEARED)))
        _CLEARED[id(Y)] = hit  # Y kept alive with it: its id stays its own
    _, _, MB, cb = hit
    out = np.zeros((m, n), dtype=object)
    if not (m and n):
        return out
    P = (flint.fmpz_mat(m, k, A) * MB).entries() if k else [0] * (m * n)
    make = _maker(out_kind)  # (int: every denominator 1)
    flat = out.reshape(-1)
    for h, v in enumerate(P):
        if v:
            i, j = divmod(h, n)
            flat[h] = make(int(v), ra[i] * cb[j])
    return out


def _rationals_kind(arrays, table) -> str | None:
    """The output kind of :func:`mm_rational` / :func:`conv_rational` for these operands (None where an
    entry is no rational of ``table``, or FLINT's rationals are mixed with gmpy2's or Fraction)."""
    kinds = set()
    for A in arrays:
        for t in set(map(type, A.ravel().tolist())):
            kind = table.get(t)
            if kind is None:
                return None
            kinds.add(kind)
    if "fmpq" in kinds and kinds & {"mpq", "fraction"}:
        return None
    return next(k for k in ("fmpq", "mpq", "fraction", "int") if k in kinds or k == "int")


def _maker(kind: str):
    """``make(numerator, denominator)`` of the output kind (a canonical rational; an int where ``int``)."""
    if kind == "int":
        return lambda a, d: a
    if kind == "fmpq":
        import flint

        return flint.fmpq
    if kind == "mpq":
        import gmpy2

        return gmpy2.mpq
    from fractions import Fraction

    return Fraction


def conv(v, h, *, causal: bool, method: str = "direct", need=None, same: bool = False, nonzero_h=None):
    """:func:`constructions.conv.conv` (the reference semantics, its docstring), with one shortcut: an
    exact causal or circular convolution of a 2-D state whose entries and taps are all rationals, with
    at least :data:`RATIONAL_MM_DENSITY` of the taps nonzero and of the outputs wanted (``need``; a
    learned file's dense filter), is :func:`conv_rational` (FLINT's integer polynomial products), the
    outputs not wanted then set to 0 as the reference leaves them; every other call is
    ``constructions.conv.conv`` itself."""
    if (not same and is_object(v) and np.ndim(v) == 2 and np.ndim(h) == 2 and np.shape(v) == np.shape(h)
            and np.size(h) and v.shape[0] * v.shape[1] >= RATIONAL_MM_MIN // 16):
        H = np.asarray(h, dtype=object)
        NH = nonzero_pattern(H) if nonzero_h is None else pattern_of(nonzero_h, H)
        want = None if need is None else np.broadcast_to(np.asarray(need, dtype=bool), v.shape)
        if NH.sum() >= RATIONAL_MM_DENSITY * NH.size and (want is None or want.sum() >= RATIONAL_MM_DENSITY * want.size):
            if method not in ("direct", "fft"):
                raise ValueError(f"unknown convolution method {method!r} (use 'direct' or 'fft')")
            out = conv_rational(v, H, causal)
            if out is not None:
                if want is not None:
                    out[~want] = 0
                return out
    from .conv import conv as reference

    return reference(v, h, causal=causal, method=method, need=need, same=same, nonzero_h=nonzero_h)


def conv_rational(v: np.ndarray, h: np.ndarray, causal: bool):
    """The exact per-channel convolution of ``v`` (T, C) with taps ``h`` (T, C), ``y[t, c] = sum_s
    h[s, c] v[t - s, c]`` over ``s <= t`` (causal) or with ``t - s`` taken modulo ``T`` (circular),
    for rational entries only (as :func:`mm_rational`; None otherwise).  Channel ``c`` is one product of
    integer polynomials in FLINT (``fmpz_poly``): the taps and the column cleared of their
    denominators' lcms ``a_c`` and ``b_c``, ``(sum_s A_s x^s)(sum_r B_r x^r)``, whose coefficient ``t``
    is the causal sum (times ``a_c b_c``) and whose coefficients ``t`` and ``t + T`` together the
    circular one.  Entries in the operands' type, zeros the int 0."""
    import math

    import flint

    table = _rational_types()
    kind = _rationals_kind((v, h), table)
    if kind is None:
        return None
    make = _maker(kind)
    T, C = v.shape
    out = np.zeros((T, C), dtype=object)

    def column(A, c):
        nd = [(0, 1) if id(x) == _ZERO_ADDRESS else _num_den(x, table[type(x)]) for x in A[:, c].tolist()]
        den = math.lcm(*(d for _, d in nd))
        return [a * (den // d) for a, d in nd], den

    for c in range(C):
        hs, dh = column(h, c)
        vs, dv = column(v, c)
        if not any(hs) or not any(vs):
            continue
        co = [int(x) for x in (flint.fmpz_poly(hs) * flint.fmpz_poly(vs)).coeffs()]
        co += [0] * (2 * T - len(co))
        d = dh * dv
        for t in range(T):
            a = co[t] if causal else co[t] + co[t + T]
            if a:
                out[t, c] = make(a, d) if kind != "int" else a // d
    return out


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
    NX = nonzero_pattern(X) if nonzero_x is None else pattern_of(nonzero_x, X)
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
            hit = NX[:, r].copy()  # compared with 1 only where nonzero
            if hit.any():
                hit[hit] = np.equal(X[hit, r], 1, dtype=bool)
            x_one[r] = hit
        return hit

    for j, rs, ys in columns:
        y_one = [is_one(y) for y in ys]
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


def array_module(v):
    """The array module of ``v``: cupy for a cupy array (imported only then), else numpy."""
    if type(v).__module__.startswith("cupy"):
        import cupy  # noqa: PLC0415 - only when a cupy array is passed

        return cupy
    return np


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


def _entrywise_exact(X, Y, ufunc, *, keep_single: bool, nx=None, ny=None):
    """Apply ``ufunc`` (``numpy.add`` / ``numpy.multiply``: each entry's own ``+`` / ``*``, in
    numpy's loop) to two (broadcast) object arrays where both are nonzero; where only one is,
    the result is that operand (``keep_single``: a sum) or zero (a product), and a product with
    a structural one is the other operand.  A pair of operands seen before (the same two
    objects: a value replicated over tokens) reuses the result, so a replicated polynomial is
    computed, and stored, once.  ``nx`` / ``ny``: the operands' nonzero patterns where the
    caller has them."""
    X, Y = np.asarray(X, dtype=object), np.asarray(Y, dtype=object)
    NX = nonzero_pattern(X) if nx is None else pattern_of(nx, X)
    NY = nonzero_pattern(Y) if ny is None else pattern_of(ny, Y)
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
            hit = both.copy()  # compared with 1 only where both are nonzero (and not settled yet)
            if hit.any():
                hit[hit] = np.equal(one[hit], 1, dtype=bool)
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


def pattern_of(nz, A) -> np.ndarray:
    """A caller's nonzero pattern ``nz`` of ``A`` as a boolean array, checked to have ``A``'s shape."""
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


_CONV_NAMES = frozenset({"ConvPlan", "lag_index", "_check_mode", "_conv_exact", "_conv_fft"})


def __getattr__(name):
    """``ops.conv``, ``ops.ConvPlan``, ``ops.lag_index`` (PEP 562): :mod:`constructions.conv`'s
    names, imported on first use (conv.py imports this module's helpers, so either module may
    be imported first), then kept here."""
    if name in _CONV_NAMES:
        import importlib  # noqa: PLC0415

        value = getattr(importlib.import_module(".conv", __package__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
