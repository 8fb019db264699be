"""A smaller exact ring for the proof: variables grouped by token, one generator per slot.

Why.  A construction's variables are mostly per-token rows (least squares: ``a_i`` and ``b_i``
at token ``i``), so the proof's ring has about N*D generators, and FLINT stores every monomial
as an exponent vector over all of them (about 1,100 generators at N=64, D=16; 4,200 at N=128,
D=32).  The causal BaseConv state holds prefix Gram sums, N^2 D^2 / 2 terms in all: at
N=128, D=32 they did not fit in memory.

The lemma.  Partition some variables into *groups* (group ``g``: the entries of the grouped
variables whose leading index is ``g``, e.g. ``A[g, :]`` and ``b[g]``); the others are
*global*.  Map every grouped variable in group ``g`` at slot ``s`` (its index after the leading
one, per variable) to ``alpha_s * tau^(g+1)``, and every global variable to itself.  This map
``phi`` is a ring homomorphism (a substitution), so ``phi(F)`` is what the layers and the
specification compute when they are run on the substituted inputs.  It is *injective on the
monomials whose variables come from at most one group*: the image
``alpha^e tau^(E (g+1)) * (globals)`` of such a monomial gives back the slot exponents ``e``,
their total ``E`` and, when ``E > 0``, the group ``g = exponent(tau) / E - 1``.  So if every
monomial of ``F = layers - specification`` has variables from at most one group ("arity at most
1"), distinct monomials of ``F`` have distinct images, no two can cancel, and ``phi(F) = 0``
if and only if ``F = 0``.  The ring shrinks to (slots + 1 + globals) generators: 2D + 3 for
least squares with a symbolic step size.

Two groups with a pivot.  Seed 004's token form (eq. (2)-(3), ``gd --arch token-lsa``) updates
every token by its own row times sums over all the keys: a context token's residual
``b_i - a_i^T x'`` holds monomials ``a_ik a_jk b_j`` from two groups, its own (the *pivot* ``i``)
and one other.  Arity 1 fails there; the *pair encoding* (:class:`GroupedProblem`,
``encoding=2``) is injective on the monomials that draw from a pivot group and at most one
other, given the pivot, with a few more generators (per slot, one per digit of the group's
number).  The abstract values carry, for bound 2, the set of groups that are a pivot of every
monomial (:class:`Support`); an entry qualifies when the join of its two sides has bound at
most 1, or bound 2 with a pivot (:func:`pivoted`).  Distinct monomials of such an entry have
distinct images, so again ``phi(F) = 0`` if and only if ``F = 0``.  The proof tries encoding 1
first and takes the pair encoding only where some entry needs it.

Arity is never assumed.  Before the substituted proof, an abstract evaluation runs the same
layers (the same weight objects) and the same specification code on :class:`Support` values,
which record for each entry an upper bound on the number of groups in any of its monomials and,
when that bound is 1, the one group if it is known.  The rules are sound for any polynomial
expression (a sum's monomials are among its operands'; a product's monomials are products of
its operands'): sums take the larger bound, products add the bounds (unless both sides live in
the same single group), exact constants have bound 0 and a product with an exact zero is zero.
Only if every entry of both sides of every section is bounded by 1 (or pivoted, for the pair
encoding) does the proof use ``phi``; otherwise (or if the abstract evaluation cannot run: a
specification that divides by a variable, say) it proves in the full ring, as before.  A mismatch in the substituted ring is a
real mismatch (``phi(F) != 0`` implies ``F != 0``), but the report is made by the full proof,
so its residual and counterexample are in the construction's own variables.
"""
from __future__ import annotations

import numpy as np

__all__ = ["Support", "GroupedProblem", "abstract_variables", "max_arity", "pivoted", "ENCODINGS", "pair_digits"]


def _is_exact_zero(x) -> bool:
    """An exact constant equal to zero (int, Fraction, fmpq, a zero polynomial in the
    parameters); never true of a :class:`Support`."""
    if isinstance(x, Support):
        return False
    try:
        return bool(x == 0)
    except Exception:  # noqa: BLE001 - an operand that cannot say: not known to be zero
        return False


class Support:
    """An abstract polynomial: ``k`` bounds the number of groups any of its monomials draws
    variables from; ``g`` is that group when ``k == 1`` and all its grouped variables are known
    to come from group ``g`` (else -1); ``p``, when ``k == 2``, is a set of *pivot* groups: for
    each ``q`` in ``p``, every monomial draws from ``q`` and at most one group besides (empty:
    no pivot known).  ``dg`` and ``dx`` bound the total degree of any monomial in the grouped
    variables and in the global ones (None: no bound known); the power-sum ring
    (``verify/prover/power_sums.py``) is injective only within them.  Any other operand is
    an exact constant (no variables but the parameters).  A Support never compares equal to
    anything, so the exact operations never skip it as a structural zero or one (they may only
    do more work, never less)."""

    __slots__ = ("k", "g", "p", "dg", "dx")

    def __init__(self, k: int, g: int = -1, p: frozenset = frozenset(), dg: int | None = None,
                 dx: int | None = None):
        self.k = k
        self.g = g if k == 1 else -1
        self.p = frozenset(p) if k == 2 else frozenset()
        self.dg, self.dx = dg, dx
        _MADE[id(self)] = self  # every Support, by address (kept alive: ids stay unique)

    @staticmethod
    def of(k: int, g: int = -1, p: frozenset = frozenset(), dg: int | None = None,
           dx: int | None = None) -> "Support":
        """The one Support with bound ``k`` (and group ``g``, pivots ``p``, degree bounds ``dg``,
        ``dx``): values are interned, so equal abstract values are the same object, and the
        exact operations' reuse of a result for a pair of operands seen before
        (``constructions.ops``) applies across a token's channels."""
        key = (k, g if k == 1 else -1, frozenset(p) if k == 2 else frozenset(), dg, dx)
        s = _INTERNED.get(key)
        if s is None:
            s = _INTERNED[key] = Support(*key)
        return s

    # -- the rules -----------------------------------------------------------------------
    @staticmethod
    def _of(x) -> "Support":
        return x if isinstance(x, Support) else CONST

    def _join(self, o) -> "Support":
        """A sum's monomials are among its operands': the larger bound; one group if both
        operands have it; the pivots that both operands of bound 2 allow (an operand of bound
        at most 1 allows every pivot: its monomials draw from one group besides any); the
        larger degree bounds."""
        if o is self:
            return self
        if isinstance(o, np.ndarray):
            return NotImplemented  # numpy applies the rule entry by entry
        o = Support._of(o)
        if o is CONST:
            return self
        if self is CONST:
            return o
        dg, dx = most(self.dg, o.dg), most(self.dx, o.dx)
        if o.k == 0 or self.k == 0:
            s = self if o.k == 0 else o
            return Support.of(s.k, s.g, s.p, dg, dx)
        k = max(self.k, o.k)
        if k == 1:
            return Support.of(1, self.g if self.g == o.g else -1, dg=dg, dx=dx)
        if k == 2:
            if self.k == o.k == 2:
                return Support.of(2, p=self.p & o.p, dg=dg, dx=dx)
            s = self if self.k == 2 else o
            return Support.of(2, p=s.p, dg=dg, dx=dx)
        return Support.of(k, dg=dg, dx=dx)

    def _times(self, o):
        """A product's monomials are products of its operands': bounds add, except that a
        product within one known group stays in it, and a product of two one-group operands
        has the known group(s) among them as pivots; a bound-2 operand times its pivot's group
        keeps that pivot.  Degree bounds add."""
        if isinstance(o, np.ndarray):
            return NotImplemented
        if _is_exact_zero(o):
            return 0
        o = Support._of(o)
        if o is CONST:
            return self
        if self is CONST:
            return o
        dg, dx = _plus(self.dg, o.dg), _plus(self.dx, o.dx)
        if o.k == 0 or self.k == 0:
            s = self if o.k == 0 else o
            return Support.of(s.k, s.g, s.p, dg, dx)
        if self.k == o.k == 1:
            if self.g == o.g and self.g >= 0:
                return Support.of(1, self.g, dg=dg, dx=dx)
            return Support.of(2, p=frozenset(x for x in (self.g, o.g) if x >= 0), dg=dg, dx=dx)
        if {self.k, o.k} == {1, 2}:
            two, one = (self, o) if self.k == 2 else (o, self)
            if one.g >= 0 and one.g in two.p:
                return Support.of(2, p=frozenset((one.g,)), dg=dg, dx=dx)
        return Support.of(self.k + o.k, dg=dg, dx=dx)

    def _remembered(self, o, table: dict, rule):
        """``rule(self, o)``, remembered in ``table`` for each pair of Supports (every Support
        is kept alive, so their ids are keys)."""
        if type(o) is not Support:
            return rule(self, o)
        key = (id(self), id(o))
        r = table.get(key)
        if r is None:
            r = table[key] = rule(self, o)
        return r

    def _join_memo(self, o):
        return self._remembered(o, _JOINS, Support._join)

    def _times_memo(self, o):
        return self._remembered(o, _TIMES, Support._times)

    __add__ = __radd__ = __sub__ = __rsub__ = _join_memo
    __mul__ = __rmul__ = _times_memo

    def __truediv__(self, o):
        if isinstance(o, Support) or _is_exact_zero(o):
            return NotImplemented  # not a polynomial: the abstract evaluation fails, the proof goes the full way
        return self

    def __pow__(self, e):
        if not isinstance(e, (int, np.integer)) or e < 0:
            return NotImplemented
        e = int(e)
        if e == 0:
            return 1
        if e == 1:
            return self
        dg, dx = _times_int(self.dg, e), _times_int(self.dx, e)
        if (self.k == 1 and self.g >= 0) or self.k == 0:
            return Support.of(self.k, self.g, self.p, dg, dx)
        return Support.of(self.k * e, dg=dg, dx=dx)

    def __neg__(self):
        return self

    def __pos__(self):
        return self

    def __eq__(self, o):
        return False

    def __ne__(self, o):
        return True

    __hash__ = None

    def __repr__(self):
        return (f"Support(k={self.k}, g={self.g}" + (f", p={sorted(self.p)}" if self.k == 2 else "")
                + f", dg={self.dg}, dx={self.dx})")


def most(a, b):
    """The larger of two degree bounds (None: unbounded)."""
    return None if a is None or b is None else max(a, b)


def _plus(a, b):
    return None if a is None or b is None else a + b


def _times_int(a, e: int):
    return None if a is None else a * e


_INTERNED: dict[tuple, Support] = {}
_MADE: dict[int, Support] = {}
_JOINS: dict[tuple[int, int], Support] = {}  # the rules' results by the operands' ids (every Support is kept alive)
_TIMES: dict[tuple[int, int], Support] = {}
CONST = Support.of(0, dg=0, dx=0)
#: a global variable (never substituted by a group's tag): degree 1 in the globals
GLOBAL = Support.of(0, dg=0, dx=1)


def _supports_in(arrays) -> list[Support]:
    """The Supports among the entries of ``arrays``, each once: the distinct object addresses
    (``constructions.ops.addresses``, numpy's loop) looked up among every Support made."""
    from constructions.ops import addresses

    arrays = [np.asarray(A, dtype=object) for A in arrays]
    ids = np.unique(np.concatenate([addresses(A).ravel() for A in arrays] or [np.zeros(0, np.uintp)]))
    return [_MADE[i] for i in ids.tolist() if i in _MADE]


def max_degrees(*arrays) -> tuple[int | None, int | None]:
    """The largest degree bounds ``(dg, dx)`` over arrays of Supports and exact constants
    (constants: 0); None where some entry has no bound."""
    dg = dx = 0
    for x in _supports_in(arrays):
        dg, dx = most(dg, x.dg), most(dx, x.dx)
    return dg, dx


def max_arity(A) -> int:
    """The largest bound over an array of Supports and exact constants (constants: 0)."""
    return max((x.k for x in _supports_in((A,))), default=0)


def grouped_shape(variables: dict[str, tuple[int, ...]], groups: tuple[str, ...]) -> int:
    """The number of groups (the grouped variables' common leading length), or a ValueError."""
    if not groups:
        raise ValueError("no grouped variables")
    lead = set()
    for nm in groups:
        if nm not in variables:
            raise ValueError(f"grouped variable {nm!r} is not a variable of the construction")
        if len(variables[nm]) < 1:
            raise ValueError(f"grouped variable {nm!r} is a scalar (it has no leading axis to group by)")
        lead.add(variables[nm][0])
    if len(lead) != 1:
        raise ValueError(f"grouped variables {groups} have different leading lengths {sorted(lead)}")
    return lead.pop()


def abstract_variables(variables: dict[str, tuple[int, ...]], groups: tuple[str, ...]) -> dict:
    """The construction's variables as :class:`Support` values: grouped entries in their group,
    global entries as constants (they are never substituted)."""
    grouped_shape(variables, groups)
    v = {}
    for var, shape in variables.items():
        arr = np.empty(shape, dtype=object)
        for ix in np.ndindex(*shape):
            arr[ix] = Support.of(1, int(ix[0]), dg=1, dx=0) if var in groups else GLOBAL
        v[var] = arr
    return v


def pivoted(*arrays) -> bool:
    """Every entry, over the given arrays together (entry by entry: the monomials of a
    difference are among those of its two sides), has a bound of at most 1 or a bound of 2 with
    a pivot group (:class:`Support`): what the pair encoding (:class:`GroupedProblem`,
    ``encoding=2``) is injective on."""
    shapes = {np.shape(a) for a in arrays}
    if len(shapes) != 1:
        return False
    flat = [np.asarray(a, dtype=object).ravel().tolist() for a in arrays]
    for xs in zip(*flat):
        acc = CONST
        for x in xs:
            acc = acc + x
        if isinstance(acc, Support) and (acc.k > 2 or (acc.k == 2 and not acc.p)):
            return False
    return True


#: the substitutions of :class:`GroupedProblem`, by the bound they are injective under
ENCODINGS = {1: "one group per monomial", 2: "a pivot group and at most one other per monomial"}


def pair_digits(n_groups: int) -> tuple[int, int]:
    """``(base, digits)`` of the pair encoding's group codes: the fewest base-``base`` digits
    whose tags stay small (``3 (base - 1)`` and ``3 T(base - 1)`` at most 127, so that a
    monomial of degree 3 in a group keeps FLINT's exponents in 8-bit fields) with
    ``base ** digits >= n_groups``.  Only the ring's size depends on it, never what it proves."""
    base_max = 10  # 3 T(9) = 108 <= 127
    digits = 1
    while base_max ** digits < n_groups:
        digits += 1
    base = 2
    while base ** digits < n_groups:
        base += 1
    return base, digits


class GroupedProblem:
    """The substituted generators and the construction's variables in them.

    ``encoding=1`` (the module docstring's ``phi``): one ``alpha`` per slot of each grouped
    variable and ``tau``; the entry of group ``g`` at slot ``s`` is ``alpha_s tau^(g+1)``.

    ``encoding=2`` (the *pair* encoding, for a token whose update multiplies its own variables by
    sums over the other tokens: the context tokens of seed 004's token form, eq. (2)-(3)): group
    ``g`` is written in base ``B`` with digits ``g_1 .. g_m`` (:func:`pair_digits`); per slot one
    ``alpha_s`` and one ``beta_{s,d}`` per digit, and one ``sigma_d`` per digit; the entry of group
    ``g`` at slot ``s`` is ``alpha_s prod_d beta_{s,d}^(g_d) sigma_d^T(g_d)``, ``T(x) = x (x - 1) /
    2``.  It is injective on the monomials that draw from a pivot group ``p`` and at most one
    other group ``j``.  Given ``p``, a monomial with slot exponents ``e`` in group ``p`` and ``f``
    in group ``j`` (total ``F``) has the image exponents ``a_s = e_s + f_s`` (alpha),
    ``b_{s,d} = p_d e_s + j_d f_s`` (beta) and ``c_d = T(p_d) E + T(j_d) F`` (sigma), so
    ``w_{s,d} = b_{s,d} - p_d a_s = (j_d - p_d) f_s`` and ``2 (c_d - T(p_d) sum_s a_s) =
    (j_d - p_d)(j_d + p_d - 1) F``.  ``F = 0`` exactly when every ``w`` is 0 (``j != p`` differs
    in some digit), and then ``e = a``.  Otherwise take a digit ``d`` with ``W_d = sum_s
    w_{s,d} != 0``: ``j_d = 2 (c_d - T(p_d) sum a) / W_d - p_d + 1``, ``f_s = w_{s,d} / (j_d -
    p_d)``, ``e = a - f``, and every other digit ``j_d' = p_d' + W_d' / F``: the image gives back
    ``e``, ``f`` and ``j``.  So if every monomial of ``F = layers - specification`` at an entry
    has such a pivot, the same ``p`` for the whole entry (:func:`pivoted`), distinct monomials
    of ``F`` have distinct images and ``phi(F) = 0`` if and only if ``F = 0``: as for
    ``encoding=1``, which is the case ``F = 0`` of every monomial.  The ring has
    ``(1 + m) x slots + m + globals`` generators (``5D + 6`` for least squares with a symbolic
    step size and ``m = 2`` digits, N up to 100), each exponent small (a digit code is at most
    ``B - 1``): the digits keep FLINT's packed exponent vectors in 8-bit fields where one
    ``beta_s^g sigma^T(g)`` would need 16 (bytes per term, hence memory and time, are what the
    ring's size costs).

    Global variables and parameters: one generator per entry, with the same display names as
    :class:`verify.prover.proof.SymbolicProblem`."""

    #: no degree bounds: injective on every monomial its encoding allows, whatever its degree
    #: (``verify/prover/power_sums.py``'s ring has them)
    degrees = None

    def __init__(self, variables: dict[str, tuple[int, ...]], params: tuple[str, ...],
                 groups: tuple[str, ...], entry_name, display, encoding: int = 1):
        import flint

        if encoding not in ENCODINGS:
            raise ValueError(f"unknown encoding {encoding!r} (one of {sorted(ENCODINGS)})")
        self.encoding = encoding
        self.n_groups = grouped_shape(variables, groups)
        self.base, self.digits = pair_digits(self.n_groups) if encoding == 2 else (0, 0)
        names: list[str] = []
        slots: dict[str, list] = {}
        prefixes = ("alpha",) if encoding == 1 else ("alpha",) + tuple(f"beta{d}" for d in range(self.digits))
        for var, shape in variables.items():
            if var in groups:
                slots[var] = list(np.ndindex(*shape[1:]))
                for pre in prefixes:
                    names += [f"{pre}_{display(var)}[:{''.join(',' + str(int(i)) for i in s)}]"
                              for s in slots[var]]
        tags = ["tau"] if encoding == 1 else [f"sigma{d}" for d in range(self.digits)]
        names += tags
        for var, shape in variables.items():
            if var not in groups:
                names += [entry_name(var, ix) for ix in np.ndindex(*shape)]
        names += [display(p) for p in params]
        if len(set(names)) != len(names):
            raise ValueError("substituted generator names collide")
        self.names = names
        self.ctx = flint.fmpq_mpoly_ctx.get(tuple(names), "lex")
        gens = dict(zip(names, self.ctx.gens()))
        self._build = (variables, groups, slots, names, gens, [gens[t] for t in tags], len(prefixes))
        self._v = None
        pos = sum(len(prefixes) * len(slots[var]) for var in slots) + len(tags)
        pos += sum(int(np.prod(shape)) for var, shape in variables.items() if var not in groups)
        self.params = {p: gens[names[pos + i]] for i, p in enumerate(params)}

    def describe(self) -> str:
        return "verify/prover/token_groups.py"

    def code(self, g: int) -> tuple[int, ...]:
        """Group ``g``'s digits, least significant first (encoding 2)."""
        return tuple((g // self.base ** d) % self.base for d in range(self.digits))

    @property
    def v(self) -> dict:
        """The construction's variables in this ring (object arrays), made on first use: a proof
        that settles on the other encoding never pays for them."""
        if self._v is None:
            self._v = self._images()
        return self._v

    def _images(self) -> dict:
        variables, groups, slots, names, gens, tags, per_slot = self._build
        tag_of: dict[int, object] = {}  # tau^(g+1) or prod_d sigma_d^T(g_d), once per group

        def tag(g):
            if g not in tag_of:
                if self.encoding == 1:
                    tag_of[g] = tags[0] ** (g + 1)
                else:
                    t = 1
                    for sd, x in zip(tags, self.code(g)):
                        t = t * sd ** (x * (x - 1) // 2)
                    tag_of[g] = t
            return tag_of[g]

        v = {}
        pos = 0
        for var, shape in variables.items():
            if var in groups:
                nslot = len(slots[var])
                slot = {s: i for i, s in enumerate(slots[var])}
                arr = np.empty(shape, dtype=object)
                for ix in np.ndindex(*shape):
                    g, k = int(ix[0]), slot[tuple(ix[1:])]
                    m = gens[names[pos + k]] * tag(g)  # alpha_s and the group's tag
                    if self.encoding == 2:
                        for d, x in enumerate(self.code(g)):  # beta_{s,d}^(g_d)
                            if x:
                                m = m * gens[names[pos + (1 + d) * nslot + k]] ** x
                    arr[ix] = m
                v[var] = arr
                pos += per_slot * nslot
        pos += len(tags)
        for var, shape in variables.items():
            if var not in groups:
                arr = np.empty(shape, dtype=object)
                for ix in np.ndindex(*shape):
                    arr[ix] = gens[names[pos]]
                    pos += 1
                v[var] = arr
        return v
