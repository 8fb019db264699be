"""The prover's exact arithmetic in C: python-flint's multivariate polynomials over QQ.

The proof's symbolic forward (every layer applied to a state of polynomials in the problem's
variables) is where a proof spends its time.  In sympy's sparse ring (``verify.prover.proof``'s
specification and reports) each polynomial is a Python dict; here it is FLINT's ``fmpq_mpoly``:
the same exact polynomials over QQ, with C arithmetic.  Nothing is sampled or rounded: the
verdict is still polynomial identity, entry by entry.

What runs where:

* the specification (``Construction.state / step / final_state``) is evaluated in the sympy
  ring, as the construction's authors wrote it, then converted exactly
  (:meth:`FlintRing.array`);
* the layers are converted once (:meth:`FlintRing.layer`: Fractions become ``fmpq``, sympy
  polynomials in the symbolic parameters become ``fmpq_mpoly``) and run in flint;
* a failure's residual and counterexample are converted back to sympy
  (:meth:`FlintRing.to_sympy`), so every report a human reads is sympy's, as before.

Generators are matched by position (the sympy ring's generator ``i`` is flint's generator ``i``),
so the conversion never looks a variable up by name.
"""
from __future__ import annotations

import heapq
import operator
from fractions import Fraction

import flint
import numpy as np

from constructions.layers import Layer
from constructions import ops
from constructions.ops import nonzero_pattern
from constructions.running_sums import RunningSum, lazy_sums_for
from .rings import exact_float


def fq(x) -> "flint.fmpq":
    """An exact scalar (int, Fraction, sympy Rational / QQ element, gmpy2 mpq) as fmpq; a float
    of any kind (Python, numpy float16..longdouble, sympy Float, mpmath, Decimal) as the exact
    binary value it is (``verify.prover.proof.exact_float``: never through its decimal string, which
    would read ``float32(0.1)`` as 1/10); anything else is refused (TypeError)."""
    if isinstance(x, flint.fmpq):
        return x
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return flint.fmpq(int(x))
    q = exact_float(x)
    if q is None:
        try:
            q = Fraction(x)
        except TypeError:
            num, den = getattr(x, "numerator", None), getattr(x, "denominator", None)
            if callable(num):  # sympy's QQ / PythonMPQ elements: numerator() / denominator()
                num, den = num(), den()
            if num is None or den is None:
                raise TypeError(f"not an exact scalar: {type(x).__name__} {x!r}") from None
            q = Fraction(int(num), int(den))
    return flint.fmpq(q.numerator, q.denominator)


def _operand(x):
    """A flint operand for arithmetic with an :class:`FPoly`, or None (not an exact scalar)."""
    t = type(x)
    if t is FPoly:
        return x.p if x._p is None else x._p
    if t in _AS_IS:  # the common cases first (a layer's forward calls this per term)
        return x
    if isinstance(x, FPoly):
        return x.p
    if isinstance(x, (flint.fmpq_mpoly, flint.fmpq)):
        return x
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return int(x)
    if isinstance(x, Fraction):
        return flint.fmpq(x.numerator, x.denominator)
    q = exact_float(x)  # a float is its exact binary value (no fallback to sympy's ring for it)
    if q is not None:
        return flint.fmpq(q.numerator, q.denominator)
    return None


class FPoly:
    """A flint polynomial as a plain Python scalar, for a specification written for any scalar
    type: it mixes with ``int`` and ``Fraction`` (flint alone does not) and has no ``len``, so
    numpy never reads it as a sequence of terms.  Unwrapped (:meth:`FlintRing.scalar`) before the
    layers run.

    Sums are *deferred*: ``a + b`` (``a - b``) records the operands and their signs, and the
    polynomial is formed when it is first read (``p``: any other operation, a comparison, the
    truth value), all its pending terms at once, the two smallest first (:func:`_sum_terms`).
    A dot product written as ``acc = acc + x_k y_k`` (``constructions.ops.mm``) then costs
    about ``log2(k)`` passes over its result instead of ``k / 2``.  The value is the same
    polynomial (exact addition is associative and commutative): only the order of the additions
    changes."""

    __slots__ = ("_p", "_prev", "_sign", "_last")

    def __init__(self, p):
        self._p = p
        self._prev = None

    @staticmethod
    def _pending(prev: "FPoly", sign: int, last) -> "FPoly":
        out = FPoly.__new__(FPoly)
        out._p, out._prev, out._sign, out._last = None, prev, sign, last
        return out

    def _chain(self):
        """The ``(sign, value)`` terms of this polynomial: its pending terms, last first, down to
        the first formed value (one term when it is formed)."""
        terms = []
        node = self
        while node._p is None:
            terms.append((node._sign, node._last))
            node = node._prev
        terms.append((1, node._p))
        return terms

    @property
    def p(self):
        if self._p is None:
            self._p = _sum_terms(self._chain())
            self._prev = self._last = None
        return self._p

    def _do(self, other, f):
        o = _operand(other)
        return NotImplemented if o is None else FPoly(f(self._p if self._p is not None else self.p, o))

    def _extend(self, sign: int, o):
        """``self + sign * o``, still pending; a pending ``o``'s terms join this sum (rather than
        being formed first: one pass less over the result)."""
        if type(o) is FPoly and o._p is None:
            node = self
            for s, v in o._chain():
                node = FPoly._pending(node, sign * s, v)
            return node
        o = _operand(o)
        return NotImplemented if o is None else FPoly._pending(self, sign, o)

    def __add__(self, o):
        return self._extend(1, o)

    def __radd__(self, o):  # o + self = self + o: the pending sum goes on
        return self._extend(1, o)

    def __sub__(self, o):
        return self._extend(-1, o)

    def __rsub__(self, o):  # o - self: a sum from o, minus each of self's terms
        o = _operand(o)
        return NotImplemented if o is None else FPoly(o)._extend(-1, self)

    def __mul__(self, o):
        o = _operand(o)
        return NotImplemented if o is None else FPoly((self._p if self._p is not None else self.p) * o)

    def __rmul__(self, o):
        o = _operand(o)
        return NotImplemented if o is None else FPoly(o * (self._p if self._p is not None else self.p))

    def __truediv__(self, o):
        o = _operand(o)
        if o is None or isinstance(o, flint.fmpq_mpoly):
            return NotImplemented
        return FPoly(self.p * (1 / flint.fmpq(o)))

    def __pow__(self, e):
        if not isinstance(e, (int, np.integer)) or e < 0:
            return NotImplemented
        return FPoly(self.p ** int(e))

    def __neg__(self):
        return FPoly(-self.p)

    def __pos__(self):
        return self

    def __eq__(self, o):
        o = _operand(o)
        return NotImplemented if o is None else (self._p if self._p is not None else self.p) == o

    def __ne__(self, o):
        o = _operand(o)
        return NotImplemented if o is None else self.p != o

    def __bool__(self):  # not zero (``constructions.ops.nonzero_pattern`` reads it)
        return bool(self.p)

    __hash__ = None

    def __repr__(self):
        return f"FPoly({self.p})"


#: prefix sums of flint polynomials are held as shared chains (constructions/running_sums.py)
lazy_sums_for(flint.fmpq_mpoly, FPoly)


def _size(x) -> int:
    return len(x) if isinstance(x, flint.fmpq_mpoly) else 1


def _sum_terms(terms):
    """``sum(sign * value)`` over ``(sign, value)`` pairs (flint polynomials and scalars), the
    two smallest first (sizes in terms): each addition costs the sizes of its operands, so this
    order costs about ``log2(count)`` passes over the result where adding left to right costs
    ``count / 2``.  Operands are read, never changed."""
    if len(terms) == 1:
        s, v = terms[0]
        return v if s > 0 else -v
    if len(terms) == 2:
        (s1, v1), (s0, v0) = terms  # terms come last-first: v0 is the first operand
        if s0 > 0:
            return v0 + v1 if s1 > 0 else v0 - v1
        return v1 - v0 if s1 > 0 else -(v0 + v1)
    heap = [(_size(v), i, s, v) for i, (s, v) in enumerate(terms)]
    heapq.heapify(heap)
    count = len(heap)
    while len(heap) > 1:
        _, _, s1, v1 = heapq.heappop(heap)
        _, _, s2, v2 = heapq.heappop(heap)
        if s1 == s2:
            v, s = v1 + v2, s1  # s (v1 + v2)
        else:
            v, s = (v1 - v2, 1) if s1 > 0 else (v2 - v1, 1)  # a mixed pair stays positive: no negation at the end
        heapq.heappush(heap, (_size(v), count, s, v))
        count += 1
    _, _, s, v = heap[0]
    return v if s > 0 else -v


def _to_flint(xs: np.ndarray, scalar, chains=None) -> np.ndarray:
    """The entries of a 1-D object array in flint, one scalar type at a time: FLINT values and
    Python ints as they are (flint's operands), wrapped polynomials unwrapped (``map`` in C),
    running sums through ``chains`` (all of them at once) where given, any other type
    (Fractions, sympy elements) through ``scalar``."""
    tlist = list(map(type, xs))
    kinds = set(tlist) - _AS_IS
    if not kinds:
        return xs
    out = xs.copy()
    # types by integer code (an object array ``types == k`` is not elementwise when ``k`` is a
    # numpy scalar type such as np.float32)
    code = {k: i for i, k in enumerate(set(tlist))}
    codes = np.fromiter(map(code.__getitem__, tlist), dtype=np.intp, count=len(tlist))
    for k in kinds:
        sel = codes == code[k]
        if k is RunningSum and chains is not None:
            out[sel] = chains(xs[sel])
            continue
        out[sel] = np.fromiter(map(_unwrap if k is FPoly else scalar, xs[sel]), dtype=object,
                               count=int(sel.sum()))  # fromiter: never read as sequences of terms
    return out


_AS_IS = {flint.fmpq_mpoly, flint.fmpq, int}  # exactly these types (a bool is not an int here)
_ZERO_ID = id(0)  # CPython's one int 0: the structural zero
_unwrap = operator.attrgetter("p")


_HEAP = {"kept": None}


def keep_heap() -> bool:
    """Ask glibc's allocator (once per process) to keep freed memory for reuse: large blocks from
    the heap rather than fresh ``mmap`` (``M_MMAP_THRESHOLD`` 32 MiB, glibc's maximum) and up to
    256 MiB of free heap kept rather than returned to the kernel (``M_TRIM_THRESHOLD``).  A proof
    forms and frees polynomials of megabytes by the thousand (token-lsa 64x16: 17K-term residuals
    summed in a tree of temporaries); with glibc's defaults most of them come back as fresh pages,
    and the kernel's page faults were 18% of that proof's CPU time (sys 0.25 s of 1.35 s; 0 with
    these settings).  Only where memory is reused; the values computed are the same.  True when
    set; False where the C library is not glibc (nothing changes)."""
    if _HEAP["kept"] is None:
        ok = False
        try:
            import ctypes
            import ctypes.util

            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            mallopt = getattr(libc, "mallopt", None)
            if mallopt is not None and getattr(libc, "gnu_get_libc_version", None) is not None:
                M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
                ok = bool(mallopt(M_MMAP_THRESHOLD, 32 * 2**20)) and bool(mallopt(M_TRIM_THRESHOLD, 256 * 2**20))
        except (OSError, AttributeError, TypeError):
            ok = False
        _HEAP["kept"] = ok
    return _HEAP["kept"]


class FlintRing:
    """``QQ[names]`` in flint, mirroring the sympy ring ``R`` of a proof (same generator order)."""

    name = "flint"

    def __init__(self, R, ctx=None):
        """``R``: the proof's sympy ring (generators mirrored by position); or ``R=None`` and
        ``ctx``, a flint context of its own (``verify.prover.token_groups``: no sympy ring, so no
        sympy element converts into it)."""
        keep_heap()
        self.R = R
        self.ctx = ctx if R is None else flint.fmpq_mpoly_ctx.get(tuple(str(g) for g in R.symbols), "lex")
        self.gens = [FPoly(g) for g in self.ctx.gens()]  # for the specification
        self.n = len(self.gens)
        self._layers: dict[int, Layer] = {}
        self._patterns: dict[int, tuple] = {}
        self._chains: dict[int, tuple] = {}

    def scalar(self, x):
        """One exact scalar or sympy ring element in flint (structural zeros stay the int 0; a
        running sum stays a chain, its terms converted: :meth:`chain`)."""
        if type(x) is RunningSum:
            return self.chain(x)
        if isinstance(x, FPoly):
            x = x.p
        if isinstance(x, (flint.fmpq_mpoly, flint.fmpq)):
            return x
        if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
            return int(x)
        if self.R is not None and getattr(x, "ring", None) is self.R:  # a sympy PolyElement of the proof's ring
            if not x:
                return 0
            return self.ctx.from_dict({m: fq(c) for m, c in x.items()})
        return fq(x)

    def chains(self, nodes: np.ndarray) -> np.ndarray:
        """:meth:`chain` of every node of a 1-D object array: the nodes converted before are
        looked up in one pass (a state's chains are converted again and again: its start, its
        target, each layer's input), the others converted."""
        get = self._chains.get
        nodes = nodes.tolist()
        out = np.empty(len(nodes), dtype=object)
        out[:] = [c[1] if (c := get(id(n))) is not None else self.chain(n) for n in nodes]
        return out

    def chain(self, node: RunningSum) -> RunningSum:
        """A prefix-sum chain with its terms in flint, node for node: a node converted before (in
        this ring) is reused, so the chains of a state's tokens stay one chain (N terms for N
        sums).  The memo holds each source node with its copy, so no id is reused while it is kept."""
        todo, n = [], node
        while n is not None and id(n) not in self._chains:
            todo.append(n)
            n = n.prev
        prev = None if n is None else self._chains[id(n)][1]
        for n in reversed(todo):
            t = self.scalar(n.term)
            # a node whose term is in flint already and whose chain maps to itself: itself
            prev = n if (t is n.term and prev is n.prev) else RunningSum(prev, t)
            self._chains[id(n)] = (n, prev)
        return self._chains[id(node)][1]

    def array(self, A) -> np.ndarray:
        """An object array in flint; zeros become the int 0 (the structural zeros the exact
        operations skip), found by numpy's elementwise comparison rather than a Python loop."""
        A = np.asarray(A, dtype=object)
        nz = nonzero_pattern(A)
        vals = A[nz]
        conv = _to_flint(vals, self.scalar, self.chains) if vals.size else vals
        if conv is vals and bool((ops.addresses(A)[~nz] == _ZERO_ID).all()):
            out = A  # flint values, ints and the int 0 already: the array as it is (no copy)
        else:
            out = np.zeros(A.shape, dtype=object)
            if vals.size:
                out[nz] = conv
        if out.ndim == 2:  # a weight: its pattern is asked for again when the layer is planned
            self._patterns[id(out)] = (out, nz)
        return out

    def nonzero(self, A) -> np.ndarray:
        """The nonzero pattern of an array this ring made (remembered, with the array itself so
        that its id is not reused: converted weights never change), else computed."""
        hit = self._patterns.get(id(A))
        return hit[1] if hit is not None and hit[0] is A else nonzero_pattern(np.asarray(A, dtype=object))

    def layer(self, L: Layer) -> Layer:
        """``L`` with every weight in flint (converted once per layer object), prepared: a layer
        may plan its forward on this copy, whose weights do not change (LSA / ELSA: each head on
        its nonzero rows and columns)."""
        if id(L) not in self._layers:
            M = L.map(self.array).prepare(nonzero=self.nonzero)
            if M.kind in DEFERRED_SUM_KINDS:
                M = DeferredSums(M)
            self._layers[id(L)] = (L, M)
        return self._layers[id(L)][1]

    def layers(self, Ls) -> list[Layer]:
        return [self.layer(L) for L in Ls]

    def to_sympy(self, p):
        """A flint polynomial (or scalar) as an element of the sympy ring ``R``."""
        if type(p) is RunningSum:
            p = p.value()
        R = self.R
        if isinstance(p, flint.fmpq_mpoly):
            dom = R.domain
            return R.from_dict({tuple(int(e) for e in m): dom(int(c.p), int(c.q)) for m, c in p.to_dict().items()})
        if isinstance(p, flint.fmpq):
            return R(R.domain(int(p.p), int(p.q)))
        return R(p) if isinstance(p, (int, Fraction)) else p


#: the layer kinds whose exact forward runs with deferred sums (:class:`DeferredSums`): the token
#: form of seed 004 eq. (2)-(3), whose every token's update is a dot product of its own row with
#: sums over all the keys (k-term sums of polynomials of about N D terms each)
DEFERRED_SUM_KINDS = frozenset({"token_lsa"})


class DeferredSums:
    """A prepared exact layer whose own ``forward`` runs on its input's polynomials wrapped as
    :class:`FPoly` (the same object for the same polynomial, so the exact operations' reuse of a
    result for operands seen before still applies), so that the sums it forms are deferred and
    formed smallest first; the output is unwrapped to flint values.  The layer's code, weights
    and arithmetic are its own: only the order of exact additions differs.  Anything else (the
    layer's weights, config, kind) is the wrapped layer's."""

    def __init__(self, layer: Layer):
        self.layer = layer

    def __getattr__(self, name):
        return getattr(self.layer, name)

    def forward(self, S, *, conv_method: str = "direct"):
        S = np.asarray(S, dtype=object)
        memo: dict = {}

        def wrap(x):
            if type(x) is flint.fmpq_mpoly:
                w = memo.get(id(x))
                if w is None:
                    w = memo[id(x)] = FPoly(x)
                return w
            return x

        W = np.fromiter(map(wrap, S.ravel().tolist()), dtype=object, count=S.size).reshape(S.shape)
        out = np.asarray(self.layer.forward(W, conv_method=conv_method), dtype=object)
        flat = out.ravel().tolist()
        return np.fromiter((x.p if type(x) is FPoly else x for x in flat), dtype=object,
                           count=len(flat)).reshape(out.shape)
