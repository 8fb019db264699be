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

import networkx as nx

import circuits as C
from circuits import affine as A
from circuits import keys as K

from .linearise import linearise, needed
# the expressions (constructions/compiler/reassociate_exprs.py); their names re-exported here
from .reassociate_exprs import Q, axpy, Exprs, kraft  # noqa: F401

#: the most terms an expansion keeps (Horner of degree k needs k + 1)
MAX_TERMS = 64
#: a sum of more terms than this is rebuilt as the circuit adds it (:meth:`_Rewrite.mirror`),
#: a shorter one flat from its terms
MIRROR_TERMS = 16

_PLACE_KEYS = (K.OUTPUT, K.TOKEN, K.CHANNEL)


def multiplicative_depth(g: nx.DiGraph) -> int:
    """The multiplicative depth the targets pay for a validated circuit: the largest level of a
    product atom of :func:`~constructions.compiler.linearise.linearise` an output needs (0 for
    affine outputs)."""
    atoms, level, outputs = linearise(g)
    return max((level[a] for a in needed(atoms, outputs)), default=0)


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


class _Rewrite:
    """The state of one rewrite of a validated circuit ``g``: the expressions (:class:`Exprs`),
    each node's affine form over them, and the rewritten circuit (:class:`_Out`) as it is built."""

    def __init__(self, g: nx.DiGraph, max_terms: int):
        self.g = g
        self.X = Exprs(max_terms)
        # node -> its affine form over expression ids (circuits.affine: sparse or dense exact vectors;
        # immutable, so an add's form is a new one and operands' forms may be shared)
        self.form: dict = {}
        # for building sums the way ``g`` adds them (:meth:`mirror`): a sum expression -> a node of ``g``
        # with that value, and each mul node of ``g`` -> ("const", c) | ("e", expr, scale)
        self.sum_src: dict = {}
        self.gmul: dict = {}
        # the forms' ids: expressions in order of first use as a term (compact, so the forms over them
        # are dense vectors where they are long; expression ids themselves interleave every sum made)
        self.term_id: dict = {}
        self.term_expr: list = []
        self.as_factor: dict = {}  # node -> factor_of(node), for a node that feeds several products
        self.out = _Out()
        self.built: dict = {}  # expression -> node of the result
        self.in_node: dict = {}  # input node of g -> its node of the result
        self.mirrored: dict = {}  # node of g -> node of the result with its value (adds as g adds them)

    # -- the forms ----------------------------------------------------------------------------
    def term(self, x: int) -> int:
        i = self.term_id.get(x)
        if i is None:
            i = self.term_id[x] = len(self.term_expr)
            self.term_expr.append(x)
        return i

    def split(self, f: A.Form):
        """``(constant, {expr: coef})`` of a form, as gmpy2 rationals (what :class:`Exprs` keys on)."""
        c, t, den = Q(0), {}, f.den
        for i, n in f.numerators().items():
            if i == A.CONST:
                c = Q(n, den)
            else:
                t[self.term_expr[i]] = Q(n, den)
        return c, t

    def factor_of(self, u):
        """A mul's operand ``u`` as a factor: ``("const", c)`` or ``("x", expr, coef)``."""
        fu = self.form[u]
        if fu.is_const:
            return ("const", Q(fu.const_value()))
        cu, tu = self.split(fu)
        if not cu and len(tu) == 1:
            (x, k), = tu.items()
            return ("x", x, k)
        kind, x = self.X.sum(cu, tu)
        if kind == "const":
            return ("const", x)
        self.sum_src.setdefault(x, u)
        return ("x", x, Q(1))

    def mul(self, v, ops) -> None:
        """The form of mul node ``v`` (operands ``ops``): a scale times one product expression."""
        scale, factors = Q(1), {}
        for u, m in ops:
            r = self.as_factor.get(u)
            if r is None:
                r = self.as_factor[u] = self.factor_of(u)
            if r[0] == "const":
                scale *= r[1] ** m
                continue
            scale *= r[2] ** m
            factors[r[1]] = factors.get(r[1], 0) + m
        form, gmul = self.form, self.gmul
        if scale == 0:
            form[v], gmul[v] = A.ZERO, ("const", Q(0))
        elif not factors:
            form[v], gmul[v] = A.const(scale), ("const", scale)
        elif len(factors) == 1 and next(iter(factors.values())) == 1:
            x = next(iter(factors))
            form[v], gmul[v] = A.from_items([(self.term(x), scale)]), ("e", x, scale)
        else:
            kind, x = self.X.prod(factors)
            if kind == "const":
                form[v], gmul[v] = A.const(scale * x), ("const", scale * x)
            else:
                form[v], gmul[v] = A.from_items([(self.term(x), scale)]), ("e", x, scale)

    def forms(self) -> None:
        """Every node's form, in topological order; a form is dropped after its last consumer
        (outputs keep theirs)."""
        g, form = self.g, self.form
        outputs = set(C.output_nodes(g).values())
        uses = {v: g.out_degree(v) for v in g}  # consumers still to come
        for v in nx.topological_sort(g):
            d = g.nodes[v]
            op = d[K.OP]
            ops = C.operands(g, v)
            if op == K.INPUT:
                form[v] = A.atom(self.term(self.X.input(d[K.NAME])))
            elif op == K.CONST:
                form[v] = A.const(d[K.VALUE])
            elif op == K.ADD:
                form[v] = A.lincomb([(form[u], m) for u, m in ops])
            else:
                self.mul(v, ops)
            for u, _ in ops:
                uses[u] -= 1
                if not uses[u] and u not in outputs:
                    del form[u]
                    self.as_factor.pop(u, None)

    # -- the result ---------------------------------------------------------------------------
    def inputs(self) -> None:
        """The result's input nodes, as ``g``'s (ids, names, places kept)."""
        for v, d in self.g.nodes(data=True):
            if d[K.OP] == K.INPUT:
                e = self.X.input(d[K.NAME])
                self.built[e] = self.in_node[v] = self.out.node(None, dict(d), [], 0)

    def mirror(self, u0) -> int:
        """The result's node for ``g``'s node ``u0``, its adds rebuilt as ``g`` has them (each g add
        once, however many sums reach it) over the rebuilt products (:meth:`build` of each mul's
        expression): a circuit's shared partial sums stay shared, where building every sum
        expression flat from its terms costs one operand per term per sum (a random 100k-gate
        circuit: 1.26M edges instead of about g's own)."""
        g, out, mirrored = self.g, self.out, self.mirrored
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
                mirrored[u] = self.in_node[u]
            elif op == K.CONST:
                mirrored[u] = out.const(Q(d[K.VALUE].numerator, d[K.VALUE].denominator))
            else:
                info = self.gmul[u]
                mirrored[u] = out.const(info[1]) if info[0] == "const" else out.scaled(info[2], self.build(info[1]))
            stack.pop()
        return mirrored[u0]

    def _deps(self, x: int):
        """The expressions ``x`` is built from, or None where it is built already (a long sum
        mirrored as ``g`` adds it, no deeper than flat)."""
        X = self.X
        kind = X.kind[x]
        if X.use_sop[x]:
            return {y for m in X.sop[x] for y, _ in m}
        if kind[0] == "sum" and len(kind[2]) > MIRROR_TERMS and x in self.sum_src:
            # a long sum as g adds it (its partial sums shared), where no deeper than the flat sum
            n = self.mirror(self.sum_src.pop(x))
            if self.out.level[n] <= X.level[x]:
                self.built[x] = n
                return None
            return {y for y, _ in kind[2]}
        if kind[0] == "sum":
            return {y for y, _ in kind[2]}
        return {y for y, _ in kind[1]}

    def _make(self, x: int) -> int:
        """The result's node of expression ``x``, its parts built."""
        X, out, built = self.X, self.out, self.built
        kind = X.kind[x]
        if X.use_sop[x]:
            c = X.sop[x].get((), 0)
            items = [(out.monomial([(built[y], k) for y, k in m]), coef)
                     for m, coef in sorted(X.sop[x].items()) if m]
            return out.linear(c, items)
        if kind[0] == "sum":
            return out.linear(kind[1], [(built[y], k) for y, k in kind[2]])
        return out.monomial([(built[y], k) for y, k in kind[1]])

    def build(self, e: int) -> int:
        """The result's node of expression ``e`` (its parts first, without recursion)."""
        built = self.built
        stack = [e]
        while stack:
            x = stack[-1]
            if x in built:
                stack.pop()
                continue
            deps = self._deps(x)
            if deps is None:
                stack.pop()
                continue
            todo = [y for y in deps if y not in built]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            built[x] = self._make(x)
        return built[e]

    def outputs(self) -> dict:
        """Each non-input output's node of the result (its own: a copy where another output or an
        input has it): result node -> ``g``'s output node."""
        g, out = self.g, self.out
        claimed: dict = {}
        for name, v in sorted(C.output_nodes(g).items()):
            if g.nodes[v][K.OP] == K.INPUT:
                continue
            c, t = self.split(self.form[v])
            if not t:
                n = out.const(c)
            elif not c and len(t) == 1 and next(iter(t.values())) == 1:
                n = self.build(next(iter(t)))
            else:
                kind, x = self.X.sum(c, t)
                if kind == "e":
                    self.sum_src.setdefault(x, v)
                n = out.const(x) if kind == "const" else self.build(x)
            if out.nodes[n][0][K.OP] == K.CONST:  # its own const node (the shared one may feed gates)
                n = out.node(None, dict(out.nodes[n][0]), [], 0)
            elif n in claimed or n in self.in_node.values():
                # a node already named (another output, an input): a copy x + 0
                n = out.node(None, {K.OP: K.ADD}, [(n, 1), (out.const(0), 1)], out.level[n])
            claimed[n] = v
        return claimed

    def graph(self, claimed: dict) -> nx.DiGraph:
        """The result as a DiGraph: inputs and outputs keep their node ids (outputs their names and
        places), every other node a fresh int id."""
        g = self.g
        h = nx.DiGraph()
        h.graph.update(g.graph)
        fresh = 1 + max((x for x in g.nodes if isinstance(x, int) and not isinstance(x, bool)), default=-1)
        name_of = {n: v for v, n in self.in_node.items()}
        name_of.update(claimed)
        ids = []
        for n, (attrs, ops) in enumerate(self.out.nodes):
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
        return h


def reassociate(g: nx.DiGraph, max_terms: int = MAX_TERMS) -> nx.DiGraph:
    """The rewritten circuit (module docstring) of a validated circuit ``g``: every node's form over
    the expressions, then the result's inputs, its outputs (built on demand), the graph."""
    R = _Rewrite(g, max_terms)
    R.forms()
    R.inputs()
    h = R.graph(R.outputs())
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
