"""The token-sum form of a placed circuit, for the causal target (issue 43 item 2).

A causal layer moves values only to later tokens.  A circuit whose outputs sit on a late token
(a GD step with ``x`` and the new ``x`` on the last token) but whose products mix that token's
inputs with earlier tokens' (``a_ij x_j``) must form those products on the late token, one inner
channel each: the GD step 20 x 5 as written compiled to 21 x 205.  Written as a polynomial in the
output token's own inputs whose coefficients are *sums over tokens* of polynomials in one token's
inputs each, the same outputs are products formed on every token in the same channels (``a_ik
a_ij`` at token ``i``), summed to the output's token by one causal filter (the all-ones prefix sum,
seed 000 App. D.3.1 eq. (47)), and only then multiplied by the output token's inputs: the Gram form
``x - eta (A^T A x - A^T b)`` of the hand causal construction (seed 000 eq. (47), Prop. D.10's
causal variant), found here from the circuit instead of written by hand.

:func:`token_sum_form` expands each output exactly (python-flint ``fmpq_mpoly``), splits every term
into its output-token factor and the rest, and builds the circuit ``sum_m (sum_s c_{m,s}) m`` where
``m`` runs over the output token's monomials and each ``c_{m,s}`` reads token ``s <= t_out`` only.
It returns None where some term reads two earlier tokens at once (or a later one), where no term
multiplies an output token's inputs by an earlier token's (the form would only be an expansion),
where an output is unplaced, or where the expansion is larger than :data:`MAX_TERMS`.  The compiled stack is proved
against the circuit as given, never against this rewriting.
"""
from __future__ import annotations

from fractions import Fraction

import circuits as C

#: the largest expansion (terms over all outputs) the rewriting tries
MAX_TERMS = 20_000
#: circuits above this many gates or this degree are not expanded
MAX_GATES, MAX_DEGREE = 5_000, 8


def token_sum_form(g):
    """The token-sum form of the validated placed circuit ``g`` (module docstring), or None."""
    import flint

    pl = C.placement(g)
    if pl is None or any(p is None for p in pl.outputs.values()):
        return None
    gates = sum(1 for _, op in g.nodes(data="op") if op in ("add", "mul"))
    m = C.metrics(g, validated=True)
    if gates > MAX_GATES or m["degree"] > MAX_DEGREE or not m["n_inputs"]:
        return None
    names = C.inputs(g)
    ctx = flint.fmpq_mpoly_ctx.get(tuple(names), "lex")
    polys = C.evaluate(g, dict(zip(names, ctx.gens())), validated=True,
                       const=lambda c: ctx.constant(flint.fmpq(c.numerator, c.denominator)))
    if sum(len(p) if hasattr(p, "to_dict") else 1 for p in polys.values()) > MAX_TERMS:
        return None
    tok = [pl.inputs[n][0] for n in names]
    split = {}
    for o, p in polys.items():
        t_out = pl.outputs[o][0]
        terms: dict = {}
        items = p.to_dict().items() if hasattr(p, "to_dict") else [((0,) * len(names), p)]
        for exps, coef in items:
            local = tuple(e if tok[i] == t_out else 0 for i, e in enumerate(exps))
            other = tuple(e if tok[i] != t_out else 0 for i, e in enumerate(exps))
            toks = {tok[i] for i, e in enumerate(other) if e}
            if len(toks) > 1 or (toks and max(toks) > t_out):
                return None
            terms.setdefault(local, []).append((Fraction(int(coef.p), int(coef.q)), other))
        split[o] = terms
    mixed = any(any(other) for terms in split.values() for local, ts in terms.items() if any(local)
                for _, other in ts)
    # no term multiplies the output token's inputs by an earlier token's: nothing is forced onto the
    # output token, and the form would only be an expansion (re-association's business, not this pass's)
    return _build(g, pl, names, split) if mixed else None


def _build(g, pl, names, split):
    b = C.CircuitBuilder()
    ins = {n: b.input(n, token=pl.inputs[n][0], channel=pl.inputs[n][1]) for n in names}
    b.grid(pl.tokens, pl.channels)
    monos: dict = {}

    def mono(exps):
        if exps not in monos:
            ops = [ins[names[i]] for i, e in enumerate(exps) for _ in range(e)]
            monos[exps] = None if not ops else ops[0] if len(ops) == 1 else b.mul(*ops)
        return monos[exps]

    def scaled(c, node):
        if node is None:
            return b.const(c)
        return node if c == 1 else b.mul(b.const(c), node)

    marked = set()
    for o in sorted(split):
        parts = []
        for local, terms in sorted(split[o].items()):
            lm = mono(local)
            if lm is not None and _is_one(terms):
                parts.append(lm)
                continue
            coeff = [scaled(c, mono(other)) for c, other in terms]
            k = coeff[0] if len(coeff) == 1 else b.add(*coeff)
            parts.append(k if lm is None else b.mul(k, lm))
        node = parts[0] if len(parts) == 1 else b.add(*parts) if parts else b.const(0)
        if node in marked:
            return None
        marked.add(node)
        b.output(node, o, token=pl.outputs[o][0], channel=pl.outputs[o][1])
    return b.graph()


def _is_one(terms) -> bool:
    """The coefficient is the constant 1 (the term is the output token's monomial alone)."""
    return len(terms) == 1 and terms[0][0] == 1 and not any(terms[0][1])
