"""The expressions of the re-association pass (:mod:`.reassociate`): hash-consed sums and products
over the inputs, each with its level as written, its expansion as a sum of monomials (within a
term budget) and the level of that expansion; products flattened, distributed over a sum factor or
expanded, whichever is shallowest.  :mod:`.reassociate` re-exports every name defined here."""
from __future__ import annotations

import gmpy2

Q = gmpy2.mpq  # coefficients while rewriting (C arithmetic, as in linearise); Fractions in the result


def kraft(items) -> int:
    """Least depth of a binary product tree over factors ``(level, count)``:
    ``ceil(log2 sum count * 2^level)`` (a single factor: its level)."""
    s = sum(e << lv for lv, e in items)
    return (s - 1).bit_length()


def axpy(acc: dict, s: dict, coef) -> None:
    """``acc += coef * s`` on sparse maps (key -> coefficient), dropping entries that cancel to 0."""
    for k, c in s.items():
        v = acc.get(k, 0) + coef * c
        if v:
            acc[k] = v
        else:
            acc.pop(k, None)


class Exprs:
    """Hash-consed expressions over the inputs: ``("in", name)``, ``("sum", c, ((e, coef), ...))``,
    ``("prod", ((e, exp), ...))``; each with its level as written (``struct``), its expansion
    (``sop``: monomial -> coef, a monomial a sorted tuple of (leaf, exp); None beyond the
    budget), the level of that expansion, and the cheaper of the two."""

    def __init__(self, max_terms: int):
        self.max_terms = max_terms
        self.ids: dict = {}
        self.kind: list = []
        self.level: list = []
        self.sop: list = []
        self.use_sop: list = []
        self._work = None  # distribution steps left in this top-level product

    # -- expansions ---------------------------------------------------------------------------
    def _sop_of(self, e):
        s = self.sop[e]
        return s if s is not None else {((e, 1),): Q(1)}

    def _mono_level(self, mono) -> int:
        return kraft((self.level[x], k) for x, k in mono) if mono else 0

    def _sop_level(self, s) -> int:
        return max((self._mono_level(m) for m in s), default=0)

    def _sop_add(self, acc: dict, s: dict, coef) -> bool:
        axpy(acc, s, coef)
        return len(acc) <= 4 * self.max_terms  # intermediate slack; checked at the end

    def _sop_mul(self, a: dict, b: dict):
        if len(a) * len(b) > 4 * self.max_terms:  # bounds the work; few such products cancel
            return None
        out: dict = {}
        for ma, ca in a.items():
            for mb, cb in b.items():
                d = dict(ma)
                for x, k in mb:
                    d[x] = d.get(x, 0) + k
                m = tuple(sorted(d.items()))
                v = out.get(m, 0) + ca * cb
                if v:
                    out[m] = v
                else:
                    out.pop(m, None)
        return out if len(out) <= self.max_terms else None

    # -- nodes --------------------------------------------------------------------------------
    def _new(self, key, struct_level: int, sop):
        if key in self.ids:
            return self.ids[key]
        e = len(self.kind)
        self.ids[key] = e
        self.kind.append(key)
        self.sop.append(None)
        self.level.append(struct_level)
        self.use_sop.append(False)
        if sop is not None and len(sop) <= self.max_terms:
            self.sop[e] = sop
            lv = self._sop_level(sop)
            if lv < struct_level:
                self.level[e], self.use_sop[e] = lv, True
        return e

    def input(self, name: str) -> int:
        key = ("in", name)
        e = self._new(key, 0, None)
        if self.sop[e] is None:
            self.sop[e] = {((e, 1),): Q(1)}
        return e

    @staticmethod
    def _constant(sop):
        """The constant an expansion is, or None."""
        if not sop:
            return Q(0)
        if len(sop) == 1 and () in sop:
            return sop[()]
        return None

    def sum(self, c, terms: dict):
        """``c + sum coef * e`` as one expression: ``("e", id)`` or ``("const", value)``."""
        key = ("sum", c, tuple(sorted(terms.items())))
        if key in self.ids:
            return ("e", self.ids[key])
        sop: dict | None = {(): c} if c else {}
        for x, k in terms.items():
            if sop is None or not self._sop_add(sop, self._sop_of(x), k):
                sop = None
        if sop is not None and self._constant(sop) is not None and len(sop) <= self.max_terms:
            return ("const", self._constant(sop))
        return ("e", self._new(key, max(self.level[x] for x in terms), sop))

    def prod(self, factors: dict):
        """``prod e^k`` (at least two factors counted with k): flattened, distributed over its
        deepest sum factor, or expanded, whichever is shallowest (ties: as written first)."""
        top = self._work is None
        if top:
            self._work = 4 * self.max_terms
        try:
            res = self._prod(factors)
            if self._work > 0:
                dist = self._distribute(factors)
                if dist is not None and (dist[0] == "const" or self.level[dist[1]] < self._level_of(res) or (
                        self.level[dist[1]] == self._level_of(res) and res[0] == "e" and self.use_sop[res[1]])):
                    res = dist
            return res
        finally:
            if top:
                self._work = None

    def _level_of(self, res) -> int:
        return 0 if res[0] == "const" else self.level[res[1]]

    def _distribute(self, factors: dict):
        """``R * (c + sum coef_i T_i) = c R + sum coef_i (R * T_i)`` over the deepest sum factor
        used once , or None."""
        sums = [x for x, k in factors.items() if k == 1 and self.kind[x][0] == "sum"
                and len(self.kind[x][2]) <= self.max_terms]
        if not sums:
            return None
        S = max(sums, key=lambda x: (self.level[x], -x))
        rest = {x: k for x, k in factors.items() if x != S}
        c0, terms = self.kind[S][1], self.kind[S][2]
        const, out = Q(0), {}

        def put(res, coef):
            nonlocal const
            if res[0] == "const":
                const += coef * res[1]
            else:
                out[res[1]] = out.get(res[1], 0) + coef

        if c0:
            put(self._single(rest), c0)
        for T, coef in terms:
            self._work -= 1
            if self._work <= 0:
                return None
            d = dict(rest)
            d[T] = d.get(T, 0) + 1
            put(self._single(d), coef)
        out = {x: k for x, k in out.items() if k}
        if not out:
            return ("const", const)
        if not const and len(out) == 1 and next(iter(out.values())) == 1:
            return ("e", next(iter(out)))
        return self.sum(const, out)

    def _single(self, factors: dict):
        """``prod e^k`` for any factors (one factor to the first power: itself)."""
        if len(factors) == 1 and next(iter(factors.values())) == 1:
            return ("e", next(iter(factors)))
        return self.prod(factors)

    def _prod(self, factors: dict):
        flat = dict(factors)
        inl = [x for x in factors if self.kind[x][0] == "prod" and not self.use_sop[x]]
        if inl:
            def merged(xs):
                d = {x: k for x, k in factors.items() if x not in xs}
                for x in xs:
                    for y, j in self.kind[x][1]:
                        d[y] = d.get(y, 0) + j * factors[x]
                return d

            def depth(d):
                return kraft((self.level[x], k) for x, k in d.items())

            chosen = set(inl)
            best = depth(merged(chosen))
            if best < depth(factors):
                for x in sorted(inl, key=lambda x: self.level[x]):  # keep shallow ones shared
                    if depth(merged(chosen - {x})) == best:
                        chosen.discard(x)
                flat = merged(chosen)
        sop: dict | None = {(): Q(1)}
        for x, k in sorted(flat.items()):
            for _ in range(k):
                sop = self._sop_mul(sop, self._sop_of(x))
                if sop is None:
                    break
            if sop is None:
                break
        if sop is not None and self._constant(sop) is not None:
            return ("const", self._constant(sop))
        key = ("prod", tuple(sorted(flat.items())))
        return ("e", self._new(key, kraft((self.level[x], k) for x, k in flat.items()), sop))
