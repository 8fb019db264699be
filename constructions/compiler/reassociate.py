"""Pass before every target: a circuit -> a circuit with the same polynomials and at most the
same multiplicative depth (``compile_circuit(..., reassociate=True)``, the default).

What the targets pay is the *multiplicative depth* (:mod:`.linearise`): additions and products
by constants are free (affine forms), each product of two non-constant forms is one level.  A
circuit as written can be much deeper than its polynomials need: Horner's rule
``c0 + t (c1 + t (c2 + ...))`` of degree k has depth k - 1, Estrin's scheme (D. Knuth, TAOCP
vol. 2, 4.6.4; the tree-height reduction of R. Brent, "The parallel evaluation of general
arithmetic expressions", JACM 1974) ceil(log2 (k+1)).  This pass rewrites the circuit, exactly
(only the ring identities: associativity, commutativity, distributivity, constant folding):

* **sums** are flattened into one n-ary linear combination (free in every target, depth 1 in
  :func:`circuits.metrics`); like terms are merged, so ``x + (-1) x`` folds to 0;
* **products** are flattened into one monomial ``c * prod f_i^e_i`` over factors that are not
  products, and rebuilt as the balanced tree of least depth: the powers ``f^(2^b)`` of the
  binary digits of each exponent by repeated squaring, then the two shallowest factors first
  (Huffman on levels), which reaches the Kraft bound ``ceil(log2 sum_i e_i 2^level(f_i))``;
  a product factor that is itself a product is inlined only where that lowers the depth (so a
  shared sub-product stays shared);
* **distribution**: every value whose expansion as a sum of monomials over *leaves* (the
  inputs, and the values whose expansion exceeds ``max_terms`` terms) has at most ``max_terms``
  terms keeps it; where the expansion, each monomial as a balanced product, is strictly
  shallower than the value as written, the expansion is built instead (Horner -> an
  Estrin-depth sum of powers: degree 8 in depth 3 instead of 7).  A value whose expansion is
  a constant is folded to it;
* **common subexpressions** are shared: sums, products and the rebuilt binary products are
  hash-consed on (op, sorted operands with multiplicities, constants);
* **partial sums** stay shared: a sum of more than :data:`MIRROR_TERMS` terms that equals a node of
  the circuit is rebuilt as the circuit adds it (each of its adds once, over the rebuilt
  products), not flat from its terms, unless that would be deeper (a cancelled deep term).  Flat,
  every long sum costs one operand per term: a random 100k-gate circuit's rewrite had 1.26M edges
  where the circuit has 0.3M, and every later pass paid for them.

Input nodes (ids, names, places, pass-through outputs) are kept as they are; each non-input
output keeps its node id, name and place (a node of the result carries it).  Nothing mutates
the argument.  The result is validated; :func:`constructions.compiler.compile_circuit` proves
the compiled stack against the *original* circuit, so this pass is checked by every proof.
"""
from __future__ import annotations

import heapq
from fractions import Fraction

import gmpy2
import networkx as nx

import circuits as C
from circuits import affine as A
from circuits import keys as K

from .linearise import linearise, needed

Q = gmpy2.mpq  # coefficients while rewriting (C arithmetic, as in linearise); Fractions in the result

#: the most terms an expansion keeps (Horner of degree k needs k + 1)
MAX_TERMS = 64
#: a sum of more terms than this is rebuilt as the circuit adds it (``mirror`` in :func:`reassociate`),
#: a shorter one flat from its terms
MIRROR_TERMS = 16

_PLACE_KEYS = (K.OUTPUT, K.TOKEN, K.CHANNEL)


def multiplicative_depth(g: nx.DiGraph) -> int:
    """The multiplicative depth the targets pay for a validated circuit: the largest level of a
    product atom of :func:`~constructions.compiler.linearise.linearise` an output needs (0 for
    affine outputs)."""
    atoms, level, outputs = linearise(g)
    return max((level[a] for a in needed(atoms, outputs)), default=0)


def kraft(items) -> int:
    """Least depth of a binary product tree over factors ``(level, count)``:
    ``ceil(log2 sum count * 2^level)`` (a single factor: its level)."""
    s = sum(e << lv for lv, e in items)
    return (s - 1).bit_length()



def _axpy(acc: dict, s: dict, coef) -> None:
    """``acc += coef * s`` on sparse maps (key -> coefficient), dropping entries that cancel to 0."""
    for k, c in s.items():
        v = acc.get(k, 0) + coef * c
        if v:
            acc[k] = v
        else:
            acc.pop(k, None)

class _Exprs:
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
        _axpy(acc, s, coef)
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


class _Out:
    """The rewritten circuit, hash-consed: nodes are ints in creation (topological) order."""

    def __init__(self):
        self.nodes: list = []  # (attrs, operands [(node, mult)])
        self.level: list = []
        self.ids: dict = {}

    def node(self, key, attrs: dict, ops: list, level: int) -> int:
        if key is not None and key in self.ids:
            return self.ids[key]
        n = len(self.nodes)
        self.nodes.append((attrs, ops))
        self.level.append(level)
        if key is not None:
            self.ids[key] = n
        return n

    def const(self, v) -> int:
        value = Fraction(int(v.numerator), int(v.denominator))
        return self.node(("const", v), {K.OP: K.CONST, K.VALUE: value}, [], 0)

    def mul2(self, a: int, b: int) -> int:
        a, b = min(a, b), max(a, b)
        ops = [(a, 2)] if a == b else [(a, 1), (b, 1)]
        return self.node(("mul", a, b), {K.OP: K.MUL}, ops, 1 + max(self.level[a], self.level[b]))

    def scaled(self, c, n: int) -> int:
        if c == 1:
            return n
        return self.node(("scale", c, n), {K.OP: K.MUL}, [(self.const(c), 1), (n, 1)], self.level[n])

    def linear(self, c, items: list) -> int:
        """``c + sum coef * node``."""
        ops: dict = {}
        for n, k in items:
            m = self.scaled(k, n)
            ops[m] = ops.get(m, 0) + 1
        if c:
            ops[self.const(c)] = ops.get(self.const(c), 0) + 1
        if not ops:
            return self.const(0)
        if len(ops) == 1 and next(iter(ops.values())) == 1:
            return next(iter(ops))
        key = ("add", tuple(sorted(ops.items())))
        return self.node(key, {K.OP: K.ADD}, sorted(ops.items()), max(self.level[n] for n in ops))

    def monomial(self, items: list) -> int:
        """``prod node^exp`` as a balanced tree: binary powers by squaring, then the two
        shallowest first."""
        pool = []
        for n, k in items:
            p, b = n, 0
            while k:
                if k & 1:
                    pool.append((self.level[p], p))
                k >>= 1
                if k:
                    p = self.mul2(p, p)
                b += 1
        heapq.heapify(pool)
        while len(pool) > 1:
            _, a = heapq.heappop(pool)
            _, b = heapq.heappop(pool)
            m = self.mul2(a, b)
            heapq.heappush(pool, (self.level[m], m))
        return pool[0][1]


def reassociate(g: nx.DiGraph, max_terms: int = MAX_TERMS) -> nx.DiGraph:
    """The rewritten circuit (module docstring) of a validated circuit ``g``."""
    X = _Exprs(max_terms)
    # node -> its affine form over expression ids (circuits.affine: sparse or dense exact vectors;
    # immutable, so an add's form is a new one and operands' forms may be shared)
    form: dict = {}
    outputs = set(C.output_nodes(g).values())
    uses = {v: g.out_degree(v) for v in g}  # consumers still to come: a form is dropped after its last
    # for building sums the way ``g`` adds them (``mirror`` below): a sum expression -> a node of ``g``
    # with that value, and each mul node of ``g`` -> ("const", c) | ("e", expr, scale)
    sum_src: dict = {}
    gmul: dict = {}

    # the forms' ids: expressions in order of first use as a term (compact, so the forms over them
    # are dense vectors where they are long; expression ids themselves interleave every sum made)
    term_id: dict = {}
    term_expr: list = []

    def term(x: int) -> int:
        i = term_id.get(x)
        if i is None:
            i = term_id[x] = len(term_expr)
            term_expr.append(x)
        return i

    def split(f: A.Form):
        """``(constant, {expr: coef})`` of a form, as gmpy2 rationals (what :class:`_Exprs` keys on)."""
        c, t, den = Q(0), {}, f.den
        for i, n in f.numerators().items():
            if i == A.CONST:
                c = Q(n, den)
            else:
                t[term_expr[i]] = Q(n, den)
        return c, t

    as_factor: dict = {}  # node -> factor_of(node), for a node that feeds several products

    def factor_of(u):
        """A mul's operand ``u`` as a factor: ``("const", c)`` or ``("x", expr, coef)``."""
        fu = form[u]
        if fu.is_const:
            return ("const", Q(fu.const_value()))
        cu, tu = split(fu)
        if not cu and len(tu) == 1:
            (x, k), = tu.items()
            return ("x", x, k)
        kind, x = X.sum(cu, tu)
        if kind == "const":
            return ("const", x)
        sum_src.setdefault(x, u)
        return ("x", x, Q(1))

    for v in nx.topological_sort(g):
        d = g.nodes[v]
        op = d[K.OP]
        ops = C.operands(g, v)
        if op == K.INPUT:
            form[v] = A.atom(term(X.input(d[K.NAME])))
        elif op == K.CONST:
            form[v] = A.const(d[K.VALUE])
        elif op == K.ADD:
            form[v] = A.lincomb([(form[u], m) for u, m in ops])
        else:
            scale, factors = Q(1), {}
            for u, m in ops:
                r = as_factor.get(u)
                if r is None:
                    r = as_factor[u] = factor_of(u)
                if r[0] == "const":
                    scale *= r[1] ** m
                    continue
                scale *= r[2] ** m
                factors[r[1]] = factors.get(r[1], 0) + m
            if scale == 0:
                form[v], gmul[v] = A.ZERO, ("const", Q(0))
            elif not factors:
                form[v], gmul[v] = A.const(scale), ("const", scale)
            elif len(factors) == 1 and next(iter(factors.values())) == 1:
                form[v], gmul[v] = A.from_items([(term(next(iter(factors))), scale)]), ("e", next(iter(factors)), scale)
            else:
                kind, x = X.prod(factors)
                if kind == "const":
                    form[v], gmul[v] = A.const(scale * x), ("const", scale * x)
                else:
                    form[v], gmul[v] = A.from_items([(term(x), scale)]), ("e", x, scale)
        for u, _ in ops:
            uses[u] -= 1
            if not uses[u] and u not in outputs:
                del form[u]
                as_factor.pop(u, None)

    out = _Out()
    built: dict = {}
    in_node: dict = {}
    for v, d in g.nodes(data=True):
        if d[K.OP] == K.INPUT:
            e = X.input(d[K.NAME])
            built[e] = in_node[v] = out.node(None, dict(d), [], 0)

    mirrored: dict = {}  # node of g -> node of the result with its value (adds as g adds them)

    def mirror(u0) -> int:
        """The result's node for ``g``'s node ``u0``, its adds rebuilt as ``g`` has them (each g add
        once, however many sums reach it) over the rebuilt products (:func:`build` of each mul's
        expression): a circuit's shared partial sums stay shared, where building every sum
        expression flat from its terms costs one operand per term per sum (a random 100k-gate
        circuit: 1.26M edges instead of about g's own)."""
        stack = [u0]
        while stack:
            u = stack[-1]
            if u in mirrored:
                stack.pop()
                continue
            d = g.nodes[u]
            op = d[K.OP]
            if op == K.ADD:
                ops = C.operands(g, u)
                todo = [w for w, _ in ops if w not in mirrored]
                if todo:
                    stack.extend(todo)
                    continue
                mirrored[u] = out.linear(Q(0), [(mirrored[w], Q(m)) for w, m in ops])
            elif op == K.INPUT:
                mirrored[u] = in_node[u]
            elif op == K.CONST:
                mirrored[u] = out.const(Q(d[K.VALUE].numerator, d[K.VALUE].denominator))
            else:
                info = gmul[u]
                mirrored[u] = out.const(info[1]) if info[0] == "const" else out.scaled(info[2], build(info[1]))
            stack.pop()
        return mirrored[u0]

    def build(e: int) -> int:
        stack = [e]
        while stack:
            x = stack[-1]
            if x in built:
                stack.pop()
                continue
            kind = X.kind[x]
            if X.use_sop[x]:
                deps = {y for m in X.sop[x] for y, _ in m}
            elif kind[0] == "sum" and len(kind[2]) > MIRROR_TERMS and x in sum_src:
                # a long sum as g adds it (its partial sums shared), where no deeper than the flat sum
                n = mirror(sum_src.pop(x))
                if out.level[n] <= X.level[x]:
                    built[x] = n
                    stack.pop()
                    continue
                deps = {y for y, _ in kind[2]}
            elif kind[0] == "sum":
                deps = {y for y, _ in kind[2]}
            else:
                deps = {y for y, _ in kind[1]}
            todo = [y for y in deps if y not in built]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            if X.use_sop[x]:
                c = X.sop[x].get((), 0)
                items = [(out.monomial([(built[y], k) for y, k in m]), coef)
                         for m, coef in sorted(X.sop[x].items()) if m]
                built[x] = out.linear(c, items)
            elif kind[0] == "sum":
                built[x] = out.linear(kind[1], [(built[y], k) for y, k in kind[2]])
            else:
                built[x] = out.monomial([(built[y], k) for y, k in kind[1]])
        return built[e]

    claimed: dict = {}  # out node -> original output node id
    for name, v in sorted(C.output_nodes(g).items()):
        if g.nodes[v][K.OP] == K.INPUT:
            continue
        c, t = split(form[v])
        if not t:
            n = out.const(c)
        elif not c and len(t) == 1 and next(iter(t.values())) == 1:
            n = build(next(iter(t)))
        else:
            kind, x = X.sum(c, t)
            if kind == "e":
                sum_src.setdefault(x, v)
            n = out.const(x) if kind == "const" else build(x)
        if out.nodes[n][0][K.OP] == K.CONST:  # its own const node (the shared one may feed gates)
            n = out.node(None, dict(out.nodes[n][0]), [], 0)
        elif n in claimed or n in in_node.values():
            # a node already named (another output, an input): a copy x + 0
            n = out.node(None, {K.OP: K.ADD}, [(n, 1), (out.const(0), 1)], out.level[n])
        claimed[n] = v

    h = nx.DiGraph()
    h.graph.update(g.graph)
    fresh = 1 + max((x for x in g.nodes if isinstance(x, int) and not isinstance(x, bool)), default=-1)
    name_of = {n: v for v, n in in_node.items()}
    name_of.update(claimed)
    ids = []
    for n, (attrs, ops) in enumerate(out.nodes):
        if n in name_of:
            nid = name_of[n]
        else:
            nid, fresh = fresh, fresh + 1
        ids.append(nid)
        a = dict(attrs)
        if n in claimed:
            a.update({k: g.nodes[claimed[n]][k] for k in _PLACE_KEYS if k in g.nodes[claimed[n]]})
        h.add_node(nid, **a)
        for u, m in ops:
            h.add_edge(ids[u], nid, **({K.MULT: m} if m > 1 else {}))
    # drop the hash-consed helpers no output reached (a scaled node replaced by a copy, ...)
    return C.validate(_prune(h), in_place=True)  # h is built here: checked in place, not copied


def _prune(h: nx.DiGraph) -> nx.DiGraph:
    keep = {n for n, d in h.nodes(data=True) if d.get(K.OUTPUT) is not None or d[K.OP] == K.INPUT}
    stack = list(keep)
    while stack:
        for u in h.predecessors(stack.pop()):
            if u not in keep:
                keep.add(u)
                stack.append(u)
    return h.subgraph(keep).copy() if len(keep) < h.number_of_nodes() else h
