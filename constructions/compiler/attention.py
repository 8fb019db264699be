"""Targets ``lsa`` and ``elsa``: a (placed) circuit -> linear self-attention layers (seed 001); the
plan here, the weights and the compile in :mod:`.attention_emit` (its names importable from here).

An LSA layer (seed 001 eq. (8), multi-head, with the skip of eq. (38)) maps ``H`` (tokens x
channels) to ``H + sum_k (H W3)(H W1)^T (H W2)``: head ``k`` adds to cell ``(t, c)``

    sum_b  l_b(H[t]) * G[b, c],     G[b, c] = sum_s m_b(H[s]) n_c(H[s])

with ``l_b``, ``m_b``, ``n_c`` the columns of ``W3``, ``W1``, ``W2``: linear forms of ONE token.
The token sum sits inside the Gram factor ``G``, so one layer cannot form the token-wise
product ``x[t] y[t]`` of two data values for every ``t`` at once (each term is linear in
``H[t]`` with coefficients that do not depend on ``t``: ``docs/compiler.md``).  What it does
form, in one head, is a whole family of *sums* of products between one **work token** ``w``
and the other tokens; this pass compiles to those:

* the LSA input map adds a constant block, the **one-hot token positions** (channel ``D + r``
  is 1 at token ``r``; the layer is homogeneous, so constants come from the input, as the hand
  constructions' ``sqrt(eta)``).  ``pos_r`` as ``m_b``/``n_c`` selects token ``r`` inside the
  Gram factor; as ``l_b`` it masks the output to token ``r``; ``pos_w`` is the constant 1 of the
  work token.  ELSA (eq. (16)) takes the same heads with the positions in its bias matrices.
* every value the pass creates lives in a **work channel** of the work token.  Per level of
  multiplicative depth (:mod:`.linearise`), each *consumer* (a factor of a later product, or an
  output) gets one work channel holding its part of that level: ``sum coef * f_p * g_p`` over
  its products, expanded into monomials ``cell_a * cell_b`` with ``cell_a`` on the work token
  (a consumer's inputs and constant go into its first channel, so a consumer is always on the
  work token afterwards).  The monomials of a level are a matrix of coefficients, written as a
  sum of heads by an exact rank factorisation (python-flint ``fmpq_mat.rref``), in the smaller
  of two shapes: R, ``out[w, d] = sum_b l_b(h_w) sum_i pi[d, i] m_b(H[i])`` (token ``i`` picked by
  ``n_d = sum_i pi pos_i``: e.g. every residual ``(A x - b)_i`` in one head), and C,
  ``out[w, d] = sum_i l_i(h_w) n_d(H[i])`` (``m_i = pos_i``: e.g. ``A^T r`` in one head).
* a **row-uniform Gram sum**: monomials ``q H[s, c1] H[s, c2]`` with one
  coefficient ``q`` on every token ``s`` holding inputs in both channels (``dot``'s ``u_t v_t``)
  are the Gram factor of one head, ``l = pos_w``, ``m = c1``, ``n_d = q c2``: nothing moves.
* a **gather layer** copies an input to the work token only where a monomial has neither cell
  there and is not part of such a Gram sum (``sum_t c_t u_t v_t`` with different ``c_t``); one
  head per source token, the cells in the most such monomials first.
* the outputs: when every output is placed on the work token, the last product layer writes
  them in place (each output's products, plus its value so far, minus what its cell holds) and
  clears the rest in the same layer (heads ``l = m = pos_r``, ``n_c = -c``), provided its heads
  read no channel that may be nonzero off the work token; otherwise an **output layer** clears
  and writes each output at its place (one head per rank-1 term per destination token).
* off the work token a head may leave junk in a fresh work channel (a form that reads a
  channel holding other tokens' data); junk is never read into the work token (the Gram factor
  is masked to the tokens a monomial names) and the output layer clears it.

So ``lsa`` has at most ``md + 2`` layers (gather, one per level, outputs), ``md`` or ``md + 1``
where nothing is gathered, on the input grid's tokens.  The placed GD step: 2 layers, 3 heads
(``(A x - b)_i`` for every ``i`` in one head; ``x - eta A^T r`` written into ``x`` in place).

``heads=H`` (:func:`limit_heads`) splits a layer of ``K > H`` heads into ``ceil(K / H)`` layers (LSA
layers are residual: the partial sums accumulate), the heads that read a channel before those that
write it; only where reads and writes form a cycle, through temporaries and one more layer; ELSA
stages keep at most ``H`` heads with their skip.

``elsa`` groups the layers two by two into modules of two stages (seed 001 eq. (57)-(59):
``H + P2(P1(H))``): stage 1 = the first layer's heads plus a skip head (Property 3), stage 2 =
the second layer's heads plus a head that hands on the channels the first layer wrote (those
are 0 in the module's input, so ``P1`` restricted to them is the first layer's update).  Hence
at most ``ceil((md + 2) / 2)`` modules; the GD step is one module.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import flint

import circuits as C

from .linearise import CONST, form_key, linearise, needed


@dataclass
class Head:
    """One head as sparse columns: ``l[b]``, ``m[b]`` (forms feeding Gram row ``b``), ``n[c]``
    (the form read into output channel ``c``).  A form maps a column to a Fraction; a column is
    a data channel (int) or ``("pos", r)``, the position of token ``r``."""

    l: dict = field(default_factory=dict)
    m: dict = field(default_factory=dict)
    n: dict = field(default_factory=dict)


@dataclass
class Plan:
    layers: list  # list[list[Head]]
    kinds: list  # "gather" | "product" | "outputs"
    fresh: list  # per layer: the channels it writes, all 0 in its input (None: not fresh)
    inputs: dict  # input name -> (token, channel)
    outputs: dict  # output name -> (token, channel)
    T: int
    D: int  # the placed grid's channels (positions follow them in the lsa state)
    work: int  # work channels (after the grid channels)
    md: int
    work_row: int
    gathered: int
    consumers: int  # work channels holding a consumer's products, over all levels


def pos_cell(r: int):
    """The plan's cell key of token ``r``'s position (one-hot) channel."""
    return ("pos", r)


POSW = "posw"  # the constant 1 of the work row: column pos_w (a cell (w, POSW))


def rank_factor(rows: list, cols: list, entries: dict) -> list:
    """An exact rank factorisation of the sparse matrix ``entries[(row, col)]``: a list of
    ``(u, v)`` (dicts row -> Fraction, col -> Fraction) with ``M = sum u v^T`` (python-flint's
    ``fmpq_mat.rref``: ``M = M[:, pivots] R``)."""
    if not entries:
        return []
    ri = {r: i for i, r in enumerate(rows)}
    ci = {c: j for j, c in enumerate(cols)}
    M = flint.fmpq_mat(len(rows), len(cols))
    for (r, c), v in entries.items():
        M[ri[r], ci[c]] = flint.fmpq(v.numerator, v.denominator)
    R, rank = M.rref()
    out = []
    for k in range(rank):
        piv = next(j for j in range(len(cols)) if R[k, j] != 0)
        u = {r: _frac(M[ri[r], piv]) for r in rows if M[ri[r], piv] != 0}
        v = {c: _frac(R[k, ci[c]]) for c in cols if R[k, ci[c]] != 0}
        out.append((u, v))
    return out


def _frac(q) -> Fraction:
    return Fraction(int(q.p), int(q.q))


class _Planner:
    """The state of the planning pass: where every value is, which channels may be dirty."""

    def __init__(self, g):
        pl = C.placement(g)
        if pl is None:
            self.T, self.inputs, places = 1, {n: (0, i) for i, n in enumerate(C.inputs(g))}, {}
            self.D = max(1, len(self.inputs))
        else:
            self.T, self.inputs, places = pl.tokens, dict(pl.inputs), dict(pl.outputs)
            self.D = pl.channels
        self.atoms, self.level, self.outputs = linearise(g)
        self.need = needed(self.atoms, self.outputs)
        self.md = max([0] + [self.level[a] for a in self.need])
        outs, ins = self.outputs, self.inputs
        self.kept = {n for n, f in outs.items() if len(f) == 1 and places.get(n) is not None
                     and next(iter(f)).startswith("in:") and next(iter(f.values())) == 1
                     and ins[next(iter(f))[3:]] == tuple(places[n])}
        # the work row: where most outputs are written (in place, no output layer), then where most
        # inputs can be read in place (a channel no other token uses), then where most inputs are
        rows_of: dict = {}
        for t, c in ins.values():
            rows_of.setdefault(c, set()).add(t)
        score = [[0, 0, 0] for _ in range(self.T)]
        for n in outs:
            if n not in self.kept and places.get(n) is not None:
                score[places[n][0]][0] += 1
        for a in self.need:
            if a.startswith("in:"):
                t, c = ins[a[3:]]
                score[t][1] += rows_of[c] == {t}
                score[t][2] += 1
        self.w = max(range(self.T), key=lambda t: (*score[t], -t))
        w = self.w
        self.out_slots = {n: tuple(places[n]) for n in outs if places.get(n) is not None}
        taken, c = set(self.out_slots.values()), 0
        for n in sorted(outs):
            if n not in self.out_slots:
                while (w, c) in taken:
                    c += 1
                self.out_slots[n] = (w, c)
                taken.add((w, c))
        self.cell = {f"in:{n}": tuple(tc) for n, tc in ins.items()}  # atom -> its cell
        self.incells = set(self.cell.values())  # every input's cell, needed or not (the Gram sums read them)
        self.both: dict = {}  # (c1, c2) -> the tokens holding an input in both channels
        by_tok: dict = {}
        for t, c in self.incells:
            by_tok.setdefault(t, []).append(c)
        for t, cs in by_tok.items():
            for c1 in cs:
                for c2 in cs:
                    if c1 <= c2:
                        self.both.setdefault((c1, c2), set()).add(t)
        self.copy: dict = {}  # an input cell -> its gathered copy on the work row
        self.cell[CONST] = (w, POSW)
        # a channel is dirty when it may be nonzero off the work row (its value there is junk or data)
        self.dirty = {c for t, c in ins.values() if t != w}
        self.next = self.D
        self.chans: dict = {}  # consumer form key -> work channels holding its product parts
        # a consumer's inputs and constant go into its first channel with its first products: its
        # value is then on the work row, whatever tokens its inputs are on
        self.gathered = 0

    def fresh(self) -> int:
        self.next += 1
        return self.next - 1

    def val(self, form: dict, key=None) -> dict:
        """A form as cells -> coefficient: its inputs and constant, and the work channels that hold
        its product atoms' part (written at their levels)."""
        out: dict = {}
        key = key if key is not None else form_key(form)
        for a, v in form.items():
            if (a == CONST or a.startswith("in:")) and key not in self.chans:
                cl = self.cell[a]
                out[cl] = out.get(cl, 0) + v
        for d in self.chans.get(key, []):
            out[(self.w, d)] = out.get((self.w, d), 0) + 1
        return {k: v for k, v in out.items() if v != 0}


def _cols_form(cols: dict, w: int) -> dict:
    """``{channel or POSW: coef}`` -> a Head form (data channels, ``("pos", w)`` for POSW)."""
    return {(pos_cell(w) if c == POSW else c): v for c, v in cols.items() if v != 0}


def _heads_for(P: _Planner, targets: dict) -> list:
    """Heads adding ``sum (cell_a * cell_b) coef`` to each target channel of the work row:
    ``targets[d] = {(cell_a, cell_b): coef}`` with ``cell_a`` on the work row.  Two shapes, the
    smaller exact rank factorisation wins:

    * R: ``out[w, d] = sum_b l_b(h_w) sum_i pi[d, i] m_b(H[i])`` (``n_d = sum_i pi pos_i``),
      rank over (d, i) x (a, c);
    * C: ``out[w, d] = sum_i l_i(h_w) n_d(H[i])`` (``m_i = pos_i``), rank over (i, a) x (d, c)."""
    w = P.w
    uniform, rest = _row_uniform(P, targets)
    targets = {}
    for d, mons in rest.items():  # a pair off the work row: its gathered copy on the work row
        out: dict = {}
        for (a, b), v in mons.items():
            if a[0] != w and b[0] != w:
                if a not in P.copy and b not in P.copy:
                    raise AssertionError(f"monomial {a} x {b}: neither on the work row (gather missed it)")
                a, b = (P.copy[a], b) if a in P.copy else (P.copy[b], a)
            out[(a, b)] = out.get((a, b), 0) + v
        targets[d] = out
    R, Cm = {}, {}
    for d, mons in targets.items():
        for ((ra, ca), (rb, cb)), v in mons.items():
            assert ra == w
            R[((d, rb), (ca, cb))] = R.get(((d, rb), (ca, cb)), 0) + v
            Cm[((rb, ca), (d, cb))] = Cm.get(((rb, ca), (d, cb)), 0) + v
    R = {k: v for k, v in R.items() if v != 0}
    Cm = {k: v for k, v in Cm.items() if v != 0}
    fR = rank_factor(sorted({k[0] for k in R}, key=str), sorted({k[1] for k in R}, key=str), R)
    fC = rank_factor(sorted({k[0] for k in Cm}, key=str), sorted({k[1] for k in Cm}, key=str), Cm)
    heads = []
    if len(fR) <= len(fC):
        for u, v in fR:
            alphas = sorted({a for a, _ in v}, key=str)
            heads.append(Head(
                l={b: _cols_form({a: Fraction(1)}, w) for b, a in enumerate(alphas)},
                m={b: _cols_form({c: x for (a2, c), x in v.items() if a2 == a}, w) for b, a in enumerate(alphas)},
                n={d: {pos_cell(i): x for (d2, i), x in u.items() if d2 == d} for d in sorted({d for d, _ in u})}))
    else:
        for u, v in fC:
            rows = sorted({i for i, _ in u})
            heads.append(Head(
                l={b: _cols_form({a: x for (i2, a), x in u.items() if i2 == i}, w) for b, i in enumerate(rows)},
                m={b: {pos_cell(i): Fraction(1)} for b, i in enumerate(rows)},
                n={d: _cols_form({c: x for (d2, c), x in v.items() if d2 == d}, w) for d in sorted({d for d, _ in v})}))
    return _gram_heads(P, uniform) + heads


def _reads_dirty(heads: list, dirty: set) -> bool:
    return any(isinstance(col, int) and col in dirty for h in heads for f in h.l.values() for col in f)


def _order(P: _Planner, ca, cb):
    """A monomial's two cells, the work-token one first (the l side); of two, the one in a clean
    channel (no junk).  A pair with neither on the work row stays as it is (a Gram sum or a gather)."""
    if ca[0] == P.w and cb[0] == P.w:
        return (cb, ca) if ca[1] in P.dirty and cb[1] not in P.dirty else (ca, cb)
    if cb[0] == P.w:
        return cb, ca
    return ca, cb


def _monomials(P: _Planner, fa: dict, fb: dict, coef) -> dict:
    """``coef * val(fa) * val(fb)`` as {(cell, cell): coef}, the work-token cell first where there is one."""
    out: dict = {}
    va, vb = P.val(fa), P.val(fb)
    for ca, x in va.items():
        for cb, y in vb.items():
            a, b = _order(P, ca, cb)
            out[(a, b)] = out.get((a, b), 0) + coef * x * y
    return out


def _row_uniform(P: _Planner, targets: dict):
    """Split ``targets[d] = {(cell, cell): coef}`` into the **row-uniform Gram sums** and the rest.

    A Gram sum is ``sum_s q * H[s, c1] H[s, c2]`` over every token ``s`` where both cells hold an
    input (grid channels hold their inputs until the last layer writes the outputs), with one
    coefficient ``q`` for all of them, some ``s`` off the work row (``dot``'s ``u_t v_t``): one head
    ``l = pos_w``, ``m = c1``, ``n_d = q c2`` forms it on the work row, ``out[w, d] = sum_s m(H[s])
    n_d(H[s])``, with no input moved (seed 001 eq. (8): the token sum of the Gram factor).
    Returns ``({d: {(c1, c2): q}}, rest)``."""
    groups: dict = {}
    targets = {d: {k: v for k, v in mons.items() if v != 0} for d, mons in targets.items()}
    for d, mons in targets.items():
        for (a, b), v in mons.items():
            if a[0] == b[0] and a in P.incells and b in P.incells:
                c1, c2 = sorted((a[1], b[1]))
                groups.setdefault((d, c1, c2), {})
                groups[(d, c1, c2)][a[0]] = groups[(d, c1, c2)].get(a[0], 0) + v
    uniform: dict = {}
    for (d, c1, c2), by_tok in groups.items():
        vals = set(by_tok.values())
        both = P.both.get((c1, c2), set())
        if len(vals) == 1 and 0 not in vals and set(by_tok) == both and both - {P.w}:
            uniform.setdefault(d, {})[(c1, c2)] = vals.pop()
    rest = {}
    for d, mons in targets.items():
        q = uniform.get(d, {})
        rest[d] = {(a, b): v for (a, b), v in mons.items()
                   if not (a[0] == b[0] and a in P.incells and b in P.incells
                           and tuple(sorted((a[1], b[1]))) in q)}
    return uniform, rest


def _gram_heads(P: _Planner, uniform: dict) -> list:
    """The heads of :func:`_row_uniform`'s Gram sums: an exact rank factorisation of
    ``R[c1, (d, c2)] = q``, one head ``l = pos_w, m = u, n_d = v_d`` per rank-1 term."""
    R = {(c1, (d, c2)): q for d, qs in uniform.items() for (c1, c2), q in qs.items()}
    heads = []
    for u, v in rank_factor(sorted({k[0] for k in R}), sorted({k[1] for k in R}), R):
        heads.append(Head(l={0: {pos_cell(P.w): Fraction(1)}}, m={0: dict(u)},
                          n={d: {c2: x for (d2, c2), x in v.items() if d2 == d} for d in sorted({d for d, _ in v})}))
    return heads


def _off_pairs(P: _Planner, rest: dict) -> list:
    """The monomials of ``rest`` with neither cell on the work row (one of them must be gathered)."""
    return [(a, b) for mons in rest.values() for (a, b) in mons if a[0] != P.w and b[0] != P.w]


class _Layers:
    """The plan's layers as they are made: heads, kind and fresh channels of each."""

    def __init__(self):
        self.layers, self.kinds, self.fresh = [], [], []

    def add(self, heads: list, kind: str, fresh) -> None:
        self.layers.append(heads or [Head()])
        self.kinds.append(kind)
        self.fresh.append(fresh)


def _consumers(P: _Planner, prods: dict, live_out: dict) -> dict:
    """Form key -> form of every consumer: a factor of a needed product, an output not kept in place."""
    out: dict = {}
    for fa, fb in prods.values():
        for f in (fa, fb):
            out.setdefault(form_key(f), f)
    for f in live_out.values():
        out.setdefault(form_key(f), f)
    return out


def _gather_cells(P: _Planner, prods: dict, consumers: dict) -> set:
    """The input cells to gather: of each level-1 monomial with neither cell on the work row, unless
    it is part of a row-uniform Gram sum (:func:`_row_uniform`), one cell; the cells in the most such
    monomials first (greedy cover)."""
    lv1: dict = {}
    for k, f in consumers.items():
        for p in (a for a in f if a in prods and P.level[a] == 1):
            mons = lv1.setdefault(k, {})
            for cell, v in _monomials(P, *prods[p], f[p]).items():
                mons[cell] = mons.get(cell, 0) + v
    _, rest = _row_uniform(P, {k: {c: v for c, v in m.items() if v != 0} for k, m in lv1.items()})
    pairs = _off_pairs(P, rest)
    cells: set = set()
    while pairs:
        count: dict = {}
        for a, b in pairs:
            count[a], count[b] = count.get(a, 0) + 1, count.get(b, 0) + 1
        best = max(sorted(count), key=lambda c: count[c])
        cells.add(best)
        pairs = [(a, b) for a, b in pairs if best not in (a, b)]
    return cells


def _gather(P: _Planner, cells: set, out: _Layers) -> None:
    """The gather layer: each cell copied to a fresh work channel of the work row, one head per
    source token."""
    w = P.w
    by_row: dict = {}
    for cell in sorted(cells):
        t, c = cell
        d = P.fresh()
        by_row.setdefault(t, []).append((d, c))
        P.copy[cell] = (w, d)
    out.add([Head(l={0: {pos_cell(w): Fraction(1)}}, m={0: {pos_cell(t): Fraction(1)}},
                  n={d: {c: Fraction(1)} for d, c in pairs}) for t, pairs in sorted(by_row.items())],
            "gather", {d for pairs in by_row.values() for d, _ in pairs})
    P.gathered = len(cells)


def _level_targets(P: _Planner, prods: dict, cons: dict, at: set) -> dict:
    """Consumer key -> its monomials at this level (products ``at``), with its inputs and constant
    the first time it gets a channel."""
    w = P.w
    targets = {}
    for k, f in sorted(cons.items(), key=lambda kf: str(kf[0])):
        mons: dict = {}
        for p in sorted(a for a in f if a in at):
            for cell, v in _monomials(P, *prods[p], f[p]).items():
                mons[cell] = mons.get(cell, 0) + v
        if k not in P.chans:  # its inputs and constant, once
            for a, v in f.items():
                if a == CONST or a.startswith("in:"):
                    m = ((w, POSW), P.cell[a])
                    mons[m] = mons.get(m, 0) + v
        targets[k] = mons
    return targets


def _fused_outputs(P: _Planner, targets: dict, live_out: dict):
    """The last product layer writing every output at its cell (its products, plus its value so
    far, minus what is there) and clearing the rest: ``(heads, outputs written)``, or None where its
    heads read a dirty channel."""
    w = P.w
    out_targets = {}
    for n, f in sorted(live_out.items()):
        k = form_key(f)
        mons = dict(targets.get(k, {}))  # its products (and, if new, its inputs) ...
        so_far = P.val(f, k) if k not in targets else {(w, d): 1 for d in P.chans.get(k, [])}
        for cell, v in so_far.items():  # ... and its earlier levels' channels
            mons[((w, POSW), cell)] = mons.get(((w, POSW), cell), 0) + v
        t, c = P.out_slots[n]
        mons[((w, POSW), (w, c))] = mons.get(((w, POSW), (w, c)), 0) - 1
        out_targets[("out", n)] = {m: v for m, v in mons.items() if v != 0}
    heads = _heads_for(P, {P.out_slots[n[1]][1]: mons for n, mons in out_targets.items()})
    if _reads_dirty(heads, P.dirty):
        return None
    # the same layer clears what is left: row-w work channels, dirty channels, used inputs
    heads += _clear_heads(P, exclude={P.out_slots[n] for n in live_out})
    return heads, len(out_targets)


def _product_layer(P: _Planner, targets: dict, out: _Layers) -> int:
    """One product layer: each consumer's part of this level into a fresh work channel; returns
    the channels written."""
    dest = {k: P.fresh() for k in targets}
    heads = _heads_for(P, {dest[k]: mons for k, mons in targets.items()})
    if _reads_dirty(heads, P.dirty):
        P.dirty |= set(dest.values())
    for k, d in dest.items():
        P.chans.setdefault(k, []).append(d)
    out.add(heads, "product", set(dest.values()))
    return len(dest)


def _output_heads(P: _Planner, live_out: dict) -> list:
    """The output layer's heads: clear what must end at 0, then per destination token one head per
    rank-1 term of the outputs' values there."""
    heads = _clear_heads(P, exclude=set())
    for t in sorted({P.out_slots[n][0] for n in live_out}):
        entries = {}
        for n, f in live_out.items():
            if P.out_slots[n][0] != t:
                continue
            for (i, ch), v in P.val(f).items():
                entries[(i, (P.out_slots[n][1], ch))] = v
        for u, v in rank_factor(sorted({k[0] for k in entries}), sorted({k[1] for k in entries}, key=str), entries):
            heads.append(Head(l={0: {pos_cell(t): Fraction(1)}}, m={0: {pos_cell(i): x for i, x in u.items()}},
                              n={c: _cols_form({ch: x for (c2, ch), x in v.items() if c2 == c}, P.w)
                                 for c in sorted({c for c, _ in v})}))
    return heads


def plan(g) -> Plan:
    """The heads of every layer for a validated circuit (module docstring): a gather layer where an
    input must move, one product layer per level (the last writing the outputs in place where it
    can), else an output layer."""
    P = _Planner(g)
    atoms, level = P.atoms, P.level
    prods = {p: (atoms[p][1], atoms[p][2]) for p in P.need if atoms[p][0] == "mul"}
    live_out = {n: f for n, f in P.outputs.items() if n not in P.kept}
    consumers = _consumers(P, prods, live_out)
    out = _Layers()
    gather = _gather_cells(P, prods, consumers)
    if gather:
        _gather(P, gather, out)
    fused = False
    n_cons = 0
    for lv in range(1, P.md + 1):
        at = {p for p in prods if level[p] == lv}
        cons = {k: f for k, f in consumers.items() if any(a in at for a in f)}
        targets = _level_targets(P, prods, cons, at)
        if lv == P.md and all(P.out_slots[n][0] == P.w for n in live_out):
            done = _fused_outputs(P, targets, live_out)
            if done is not None:
                out.add(done[0], "product + outputs", None)
                fused = True
                n_cons += done[1]
                break
        n_cons += _product_layer(P, targets, out)
    if not fused:
        heads = _output_heads(P, live_out)
        if heads or not out.layers:
            out.add(heads, "outputs", None)
    return Plan(out.layers, out.kinds, out.fresh, P.inputs, P.out_slots, P.T, P.D, P.next - P.D, P.md, P.w,
                P.gathered, n_cons)


def _reads(h: Head) -> set:
    """The data channels a head reads (any side)."""
    return {c for side in (h.l, h.m, h.n) for f in side.values() for c in f if isinstance(c, int)}


def limit_heads(pl: Plan, limit: int | None) -> Plan:
    """The plan with at most ``limit`` heads per layer (``None``: as planned).  A layer of ``K >
    limit`` heads becomes ``ceil(K / limit)`` layers; LSA layers are residual, ``H + sum_k head_k(H)``,
    so the partial sums accumulate exactly when no head reads a channel another head of the layer
    writes, or when the heads can be ordered so that every reader of a channel comes before its
    writers (:func:`_readers_first`).  Otherwise every head writes into a fresh **temporary** channel
    per channel it writes that another head reads
    (its sub-layers then read only the layer's input), and one more layer, a single head with
    ``l = m = pos_r`` for every token ``r`` (``out[t, c] = n_c(H[t])``, any per-token linear map),
    adds each temporary into its channel and clears it: ``ceil(K / limit) + 1`` layers."""
    if limit is None:
        return pl
    if limit < 1:
        raise ValueError(f"heads per layer must be at least 1, got {limit}")
    layers, kinds, fresh = [], [], []
    nxt = max([pl.D + pl.work] + [c + 1 for _, c in pl.outputs.values()])  # past every channel in use
    for hs, kind, fr in zip(pl.layers, pl.kinds, pl.fresh):
        if len(hs) <= limit:
            layers.append(hs), kinds.append(kind), fresh.append(fr)
            continue
        writes = [set(h.n) for h in hs]
        reads = [_reads(h) for h in hs]
        clash = any(writes[a] & reads[b] for a in range(len(hs)) for b in range(len(hs)) if a != b)
        shared: set = set()
        if clash:  # every head that reads a channel before every other head that writes it (_schedule)
            order, shared = _schedule(reads, writes)
            hs, clash = [hs[i] for i in order], bool(shared)
        # a part's channels are fresh (0 in its input) only where no earlier part wrote them
        if not clash:
            done: set = set()
            for i in range(0, len(hs), limit):
                chunk = hs[i:i + limit]
                w = {c for h in chunk for c in h.n}
                layers.append(chunk), kinds.append(f"{kind} (part)")
                fresh.append(None if fr is None or w & done else w)
                done |= w
            continue
        # only the channels no order of the heads can leave unread by later heads go through temporaries
        tmp = {}
        for c in sorted(shared):
            tmp[c], nxt = nxt, nxt + 1
        moved = [Head(l=h.l, m=h.m, n={tmp.get(c, c): f for c, f in h.n.items()}) for h in hs]
        done = set()
        for i in range(0, len(moved), limit):
            chunk = moved[i:i + limit]
            w = {c for h in chunk for c in h.n}
            layers.append(chunk), kinds.append(f"{kind} (part, to temporaries)")
            direct = w - set(tmp.values())
            fresh.append(None if w & done or (direct and (fr is None or not direct <= set(fr))) else w)
            done |= w
        n = {c: {t: Fraction(1)} for c, t in tmp.items()}
        n.update({t: {t: Fraction(-1)} for t in tmp.values()})
        layers.append([Head(l={r: {pos_cell(r): Fraction(1)} for r in range(pl.T)},
                            m={r: {pos_cell(r): Fraction(1)} for r in range(pl.T)}, n=n)])
        kinds.append("add temporaries")
        fresh.append(None)
    return Plan(layers, kinds, fresh, pl.inputs, pl.outputs, pl.T, pl.D, nxt - pl.D, pl.md, pl.work_row,
                pl.gathered, pl.consumers)


def _schedule(reads: list, writes: list) -> tuple[list, set]:
    """``(order, temporaries)``: an order of a layer's heads (:func:`_readers_first`) once the channels in
    ``temporaries`` are written to temporaries instead (so no head reads their new values): where the
    reads and writes form a cycle, the first remaining head is run and the channels it writes that a
    remaining head reads become temporaries, until an order exists."""
    tmp: set = set()
    while True:
        order = _readers_first([r - tmp for r in reads], [w - tmp for w in writes])
        if order is not None:
            return order, tmp
        done = _readers_first_prefix([r - tmp for r in reads], [w - tmp for w in writes])
        rest = [i for i in range(len(reads)) if i not in done]
        h = rest[0]
        tmp |= {c for b in rest if b != h for c in (writes[h] - tmp) & reads[b]}


def _readers_first_prefix(reads: list, writes: list) -> set:
    """The heads :func:`_readers_first` can place before it meets a cycle."""
    n = len(reads)
    indeg = [sum(1 for b in range(n) if b != a and reads[b] & writes[a]) for a in range(n)]
    done, ready = set(), [i for i in range(n) if indeg[i] == 0]
    while ready:
        b = ready.pop()
        done.add(b)
        for a in range(n):
            if a != b and a not in done and reads[b] & writes[a]:
                indeg[a] -= 1
                if indeg[a] == 0:
                    ready.append(a)
    return done


def _readers_first(reads: list, writes: list):
    """An order of a layer's heads in which each head that reads a channel comes before every other head
    that writes it (so its sub-layer still reads the layer's input there; the residual sums accumulate
    the rest exactly), the original order where free; None where the reads and writes form a cycle."""
    import heapq

    n = len(reads)
    after = [[a for a in range(n) if a != b and reads[b] & writes[a]] for b in range(n)]  # b before a
    indeg = [0] * n
    for b in range(n):
        for a in after[b]:
            indeg[a] += 1
    ready = [i for i in range(n) if indeg[i] == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        b = heapq.heappop(ready)
        out.append(b)
        for a in after[b]:
            indeg[a] -= 1
            if indeg[a] == 0:
                heapq.heappush(ready, a)
    return out if len(out) == n else None


def _clear_heads(P: _Planner, exclude: set) -> list:
    """Heads adding ``-H[t, c]`` to every cell that must end at 0: inputs not kept in place, the
    work row's work channels, dirty work channels on every token; one head per set of tokens
    with the same channels."""
    kept_cells = {P.out_slots[n] for n in P.kept}
    cells = {tuple(tc) for tc in P.inputs.values()} | {(P.w, d) for d in range(P.D, P.next)}
    cells |= {(t, d) for d in P.dirty if d >= P.D for t in range(P.T)}
    clear: dict = {}
    for t, c in sorted(cells - kept_cells - exclude):
        clear.setdefault(t, set()).add(c)
    by_set: dict = {}
    for t, cs in clear.items():
        by_set.setdefault(tuple(sorted(cs)), []).append(t)
    return [Head(l={i: {pos_cell(t): Fraction(1)} for i, t in enumerate(toks)},
                 m={i: {pos_cell(t): Fraction(1)} for i, t in enumerate(toks)},
                 n={c: {c: Fraction(-1)} for c in cs}) for cs, toks in sorted(by_set.items())]


# ------------------------------------------------------------------ emission (attention_emit.py)

#: the public names :mod:`.attention_emit` defines, importable from here as before (on first use:
#: that module imports this one's plan); its private helpers are its own
_EMITTED = ("MAX_WEIGHT_ENTRIES", "compile_attention", "modules")


def __getattr__(name):
    if name not in _EMITTED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import attention_emit

    value = getattr(attention_emit, name)
    globals()[name] = value
    return value
