"""Evaluate a circuit on any scalar type with ``+`` and ``*``.

Gates are evaluated in topological order using only the binary operators
``+`` and ``*`` of the input values (an operand with ``mult = m`` is added /
multiplied ``m`` times), so the same circuit runs on sympy expressions,
``Fraction``, mpmath ``mpf``, python floats, numpy arrays (batched,
elementwise), numpy object arrays, gmpy2 ``mpq`` and sympy ``PolyElement``.

Constants are stored as ``Fraction`` and mapped to the scalar type by a
callable ``const: Fraction -> scalar``.  When ``const`` is None it is inferred
from the value of the first input (in sorted input-name order):

=============================  ============================================
first input value              constant c becomes
=============================  ============================================
sympy ``PolyElement``          ``R.ground_new(R.domain.from_sympy(Rational(c)))``
                               of its ring R (CircuitError if c is not in the
                               ground domain, e.g. 1/2 over ZZ)
sympy ``Basic`` (Expr, ...)    ``sympy.Rational(c)``
mpmath ``mpf`` / ``mpc``       ``mpf(c.numerator) / c.denominator`` (current
                               ``mp`` precision)
gmpy2 ``mpq``/``mpz``          ``gmpy2.mpq(c)``
``float`` / ``complex``        ``float(c)`` / ``complex(c)`` (correctly rounded)
numpy array or numpy scalar    by dtype kind: float/complex ->
                               ``dtype.type(float(c))`` (keeps float32 etc.); int/uint -> ``dtype.type``
                               of c if c is an integer, else Fraction; object
                               -> the rule applied to the first element
anything else (int, Fraction)  the ``Fraction`` c itself
=============================  ============================================

A circuit without inputs gets ``Fraction`` constants.
"""
from __future__ import annotations

from fractions import Fraction
from typing import Callable, Mapping

import networkx as nx

from . import keys as K
from .graph import CircuitError, input_nodes, inputs, operands, output_nodes, validate


def _ring_const(R) -> Callable[[Fraction], object]:
    import sympy

    def conv(c: Fraction):
        try:
            return R.ground_new(R.domain.from_sympy(sympy.Rational(c.numerator, c.denominator)))
        except Exception as e:  # CoercionFailed etc.
            raise CircuitError(f"constant {c} is not in the ground domain {R.domain} of {R}: {type(e).__name__}") from None

    return conv


def infer_const(x) -> Callable[[Fraction], object]:
    """The ``Fraction -> scalar`` conversion used for a sample input value ``x``."""
    import sympy
    from sympy.polys.rings import PolyElement

    if isinstance(x, PolyElement):
        return _ring_const(x.ring)
    if isinstance(x, sympy.Basic):
        return lambda c: sympy.Rational(c.numerator, c.denominator)
    try:
        import mpmath

        if isinstance(x, (mpmath.mpf, mpmath.mpc)):
            return lambda c: mpmath.mpf(c.numerator) / c.denominator
    except ImportError:  # pragma: no cover
        pass
    try:
        import gmpy2

        if type(x) in (type(gmpy2.mpq(0)), type(gmpy2.mpz(0))):
            return lambda c: gmpy2.mpq(c.numerator, c.denominator)
    except ImportError:  # pragma: no cover
        pass
    try:
        import numpy as np

        if isinstance(x, (np.ndarray, np.generic)):
            dt = np.asarray(x).dtype
            if dt.kind in "fc":
                return lambda c: dt.type(float(c))
            if dt.kind in "iu":
                return lambda c: dt.type(c.numerator) if c.denominator == 1 else c
            if dt.kind == "O" and np.asarray(x).size:
                return infer_const(np.asarray(x).flat[0])
            return lambda c: c
    except ImportError:  # pragma: no cover
        pass
    if isinstance(x, bool):
        return lambda c: c
    if isinstance(x, float):
        return float
    if isinstance(x, complex):
        return complex
    return lambda c: c


def _checked_inputs(g, inputs: dict, const):
    """``(input nodes, const)``: every input of ``g`` given and nothing else (CircuitError
    otherwise), and ``const`` inferred from the first input's type where not given."""
    names = input_nodes(g)
    missing = sorted(set(names) - set(inputs))
    extra = sorted(set(inputs) - set(names))
    if missing or extra:
        raise CircuitError(f"evaluate: missing inputs {missing}, unknown inputs {extra}")
    if const is None:
        const = infer_const(inputs[next(iter(names))]) if names else (lambda c: c)
    return names, const


def evaluate(g: nx.DiGraph, inputs: Mapping[str, object], *, const: Callable[[Fraction], object] | None = None,
             validated: bool = False) -> dict:
    """Values of all outputs, ``{output name: value}`` sorted by name.

    ``inputs`` must give a value for every input name of ``g`` and nothing
    else (CircuitError otherwise).  ``const`` maps each ``Fraction`` constant
    to the scalar type; see the module docstring for the default.  Batched
    numpy evaluation: give every input as an array of the same shape; an
    output that is a bare constant is then returned as a scalar.
    ``validated=True``: ``g`` is already :func:`validate`'s result (no second check and copy, which
    costs more than the evaluation of a large circuit).
    """
    if not validated:
        g = validate(g)
    names, const = _checked_inputs(g, inputs, const)
    outs = output_nodes(g)
    keep = set(outs.values())
    uses = {v: g.out_degree(v) for v in g}  # consumers still to be evaluated
    val: dict = {}
    for v in nx.topological_sort(g):
        d = g.nodes[v]
        op = d[K.OP]
        if op == K.INPUT:
            val[v] = inputs[d[K.NAME]]
        elif op == K.CONST:
            val[v] = const(d[K.VALUE])
        else:
            acc = None
            for u, m in operands(g, v):
                for _ in range(m):
                    if acc is None:
                        acc = val[u]
                    elif op == K.ADD:
                        acc = acc + val[u]
                    else:
                        acc = acc * val[u]
                uses[u] -= 1
                if not uses[u] and u not in keep:  # its last consumer: the value is dropped, so
                    del val[u]  # memory holds the live values, not the whole circuit's
            val[v] = acc
    return {name: val[n] for name, n in outs.items()}


def to_ring(g: nx.DiGraph, R, gens: Mapping[str, object] | None = None) -> dict:
    """Evaluate ``g`` in the sympy polynomial ring ``R`` (``sympy.polys.rings.ring``).

    ``gens`` maps input names to ring elements; by default the generator of
    ``R`` whose symbol has the input's name is used.  Constants become ground
    elements of ``R``.
    """
    if gens is None:
        by_name = {str(s): x for s, x in zip(R.symbols, R.gens)}
        missing = [n for n in inputs(g) if n not in by_name]
        if missing:
            raise CircuitError(f"to_ring: ring {R} has no generators named {missing}")
        gens = {n: by_name[n] for n in inputs(g)}
    return evaluate(g, gens, const=_ring_const(R))


def polynomials(g: nx.DiGraph) -> dict:
    """Expanded output polynomials ``{output name: sympy.Expr}`` with rational coefficients.

    Variables are ``sympy.Symbol(name)`` for each input name.  Computed in the
    sparse polynomial ring ``QQ[inputs]`` (fast, exact), then converted.
    """
    import sympy
    from sympy.polys.rings import ring

    names = inputs(g)
    if not names:
        return {k: sympy.Rational(v.numerator, v.denominator) for k, v in evaluate(g, {}).items()}
    R, *_ = ring([sympy.Symbol(n) for n in names], sympy.QQ)
    return {k: p.as_expr() for k, p in to_ring(g, R).items()}


def evaluate_affine(g: nx.DiGraph, inputs: Mapping[str, object], *,
                    const: Callable[[Fraction], object] | None = None, validated: bool = False) -> dict:
    """The values of :func:`evaluate`, computed through affine forms: for exact rings (polynomials,
    ``Fraction``) where the values are large, e.g. the proof's specification of a compiled circuit.

    Every node becomes an affine form (:class:`circuits.affine.Form`, exact, sparse or dense) over
    *atoms*: the inputs and the products of two or more non-constant factors. An ``add`` is one
    :func:`circuits.affine.lincomb` of its operands' forms (rational arithmetic on the coefficients
    in C through python-flint, never on the ring's values); a ``mul`` folds constant factors into a
    scale and, where two or more factors are left, expands each factor's form into a ring value
    (``sum coef * atom``), multiplies them (each ``mult`` times) into a new atom; an output is its
    form expanded. So the ring adds values once per atom of a product's factor or an output instead
    of once per gate: a circuit of 100k mostly-add gates over a few hundred products costs a few
    hundred expansions, where :func:`evaluate` adds its largest polynomials at every gate. Exact
    either way (the same polynomial identities: distributivity and associativity over the
    rationals). An output that is a constant is ``const`` of it. ``validated=True``: ``g`` is
    already :func:`validate`'s result (no copy); any well-formed circuit evaluates correctly either
    way.
    """
    from . import affine as A

    if not validated:
        g = validate(g)
    names, const = _checked_inputs(g, inputs, const)
    outs = output_nodes(g)
    keep = set(outs.values())
    uses = {v: g.out_degree(v) for v in g}
    pred = g.pred
    atom_val: list = []  # atom index -> ring value
    forms: dict = {}  # node -> circuits.affine.Form over atom indices (immutable: shared freely)
    expanded: dict = {}  # node -> its form expanded (a factor of several products)
    for v in nx.topological_sort(g):
        d = g.nodes[v]
        op = d[K.OP]
        ops = [(u, e.get(K.MULT, 1)) for u, e in pred[v].items()]
        if op == K.INPUT:
            atom_val.append(inputs[d[K.NAME]])
            forms[v] = A.atom(len(atom_val) - 1)
        elif op == K.CONST:
            forms[v] = A.const(d[K.VALUE])
        elif op == K.ADD:
            forms[v] = A.lincomb([(forms[u], m) for u, m in ops])
        else:
            forms[v] = _mul_form(ops, forms, expanded, atom_val, const)
        for u, _ in ops:
            uses[u] -= 1
            if not uses[u] and u not in keep:
                del forms[u]
                expanded.pop(u, None)
    return {name: _expand(forms[n], atom_val, const) for name, n in outs.items()}


def _expand(f, atom_val: list, const):
    """The ring value of the affine form ``f``: ``sum coef * atom`` over its atoms' values ``atom_val``."""
    from .affine import CONST

    acc, c0, den = None, 0, f.den
    for a, c in f.numerators().items():
        if a == CONST:
            c0 = c
            continue
        t = atom_val[a] if c == den else atom_val[a] * const(Fraction(c, den))
        acc = t if acc is None else acc + t
    if acc is None:
        return const(Fraction(c0, den))
    return acc if not c0 else acc + const(Fraction(c0, den))


def _mul_form(ops, forms: dict, expanded: dict, atom_val: list, const):
    """A ``mul`` gate's affine form: its constant factors folded into a scale; two or more factors
    left (or one taken more than once) are expanded (once each, kept in ``expanded``) and multiplied
    into a new atom appended to ``atom_val``."""
    from . import affine as A

    scale, factors = 1, []
    for u, m in ops:
        fu = forms[u]
        if fu.is_const:  # zero or a constant
            scale = scale * fu.const_value() ** m
        else:
            factors.append((u, m))
    if scale == 0:
        return A.ZERO
    if not factors:
        return A.const(scale)
    if len(factors) == 1 and factors[0][1] == 1:
        return A.scale(forms[factors[0][0]], scale)
    p = None
    for u, m in factors:
        if u not in expanded:
            expanded[u] = _expand(forms[u], atom_val, const)
        for _ in range(m):
            p = expanded[u] if p is None else p * expanded[u]
    atom_val.append(p)
    return A.from_items([(len(atom_val) - 1, scale)])
