"""Circuits from sympy: :func:`from_sympy` writes polynomial expressions as one validated circuit.

``from_sympy({"y": expr, "z": other})`` takes expressions that are polynomials with rational
coefficients; their free symbols are the circuit's inputs (named by ``Symbol.name``), the keys its
outputs.  A ``sympy.Matrix`` value names its entries ``key_i`` (one column) or ``key_i_j``.

What is polynomial: symbols, ``Integer`` / ``Rational`` numbers, ``Add``, ``Mul`` and ``Pow`` by an
integer ``0 .. MAX_POWER`` (:data:`circuits.frontend.MAX_POWER`).  Anything else is refused in one
line naming the output and the offending subexpression: a negative power (``1/x``: a division by
a variable), a non-integer power (``sqrt(x)``), functions (``sin(x)``, ``exp(x)``, ``Abs(x)``),
irrational or complex numbers (``pi``, ``sqrt(2)``, ``I``), relations.  **Float coefficients are
refused** (``0.5*x``), even where the float is a binary fraction: the float a user typed is not
always the number meant (``0.1`` is not 1/10), so the exact number is asked for
(``sympy.Rational(1, 2)``, or ``sympy.nsimplify`` by choice).  Strings are refused too (sympy
parses them with ``eval``).

Sharing: ``sympy.cse`` names the common subexpressions first (its symbols are ``Dummy`` symbols,
which cannot collide with the inputs), and the circuit is written by the same hash-consed
expression DAG as :func:`circuits.frontend.from_function` (equal subexpressions one gate, sums of
sums merged, constants folded).

Places (``placed=``): ``False`` (default) none; ``True`` reads the inputs as arrays by their names
(``A_i_j`` an entry of the 2-D array ``A``, ``x_j`` of the vector ``x``, ``eta`` a scalar; the
names of one array must fill it) and lays them out as :func:`circuits.frontend.from_function`'s
``placed=True`` does, arrays in the sorted order of their names; a dict gives every input's place
``{name: (token, channel)}``.  An output named like an input is placed at that input's place.
"""
from __future__ import annotations

import functools
import numbers
import re
from collections.abc import Mapping
from fractions import Fraction

import networkx as nx

from .graph import CircuitError
from .frontend import MAX_POWER, Tracer, default_layout, emit, entry_name, explicit_places, mark_params, param_inputs

_INDEXED = re.compile(r"^(.+?)((?:_\d+)+)$")


def _short(text: str, width: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _expression(key: str, value):
    import sympy

    if isinstance(value, sympy.MatrixExpr):
        raise CircuitError(f"from_sympy: output {key!r} is a matrix expression ({type(value).__name__}); its "
                           "entries are not symbols: build explicit matrices, sympy.Matrix(n, d, lambda i, j: "
                           "sympy.Symbol(f'A_{i}_{j}'))")
    if isinstance(value, (bool, str)) or not isinstance(value, (sympy.Basic, numbers.Number)):
        hint = (" (sympy parses strings with eval: build the expression from sympy.symbols)"
                if isinstance(value, str) else "")
        raise CircuitError(f"from_sympy: output {key!r} is a {type(value).__name__}, not a sympy expression{hint}")
    if isinstance(value, numbers.Number) and not isinstance(value, sympy.Basic):
        if not isinstance(value, numbers.Rational):
            raise CircuitError(f"from_sympy: output {key!r} is the float {value!r}; floats are refused (not exact): "
                               "write sympy.Rational")
        return sympy.Rational(int(value.numerator), int(value.denominator))
    return value


def check_polynomial(name: str, expr) -> None:
    """Refuse ``expr`` unless it is a polynomial with rational coefficients (one line: the output
    ``name`` and the first offending subexpression)."""
    import sympy

    def refuse(sub, why: str):
        raise CircuitError(f"from_sympy: output {name!r}: {_short(sympy.sstr(sub))} {why}")

    stack, seen = [(expr, None)], set()
    while stack:
        e, parent = stack.pop()
        if e in seen:
            continue
        seen.add(e)
        if isinstance(e, (sympy.Symbol, sympy.Rational)):
            continue
        if isinstance(e, sympy.Float):
            where = f" in {_short(sympy.sstr(parent))}" if parent is not None else ""
            raise CircuitError(f"from_sympy: output {name!r}: the float coefficient {sympy.sstr(e, full_prec=False)}"
                               f"{where} is refused (floats are not exact): write sympy.Rational, or sympy.nsimplify "
                               "it")
        if isinstance(e, (sympy.Add, sympy.Mul)):
            stack.extend((a, e) for a in reversed(e.args))
            continue
        if isinstance(e, sympy.Pow):
            k = e.exp
            if not isinstance(k, sympy.Integer):
                refuse(e, f"is a power by {_short(sympy.sstr(k))}, not by an integer: not a polynomial")
            if k < 0:
                refuse(e, "divides by a variable (a negative power): a circuit has only + and *")
            if k > MAX_POWER:
                refuse(e, f"is a power by {k}, above the limit circuits.frontend.MAX_POWER = {MAX_POWER}")
            stack.append((e.base, e))
            continue
        refuse(e, f"({type(e).__name__}) is not a polynomial with rational coefficients: a circuit has only + and *")


def _build(expr, env: dict, memo: dict, tracer: Tracer):
    """The trace node of a checked polynomial ``expr`` (post-order, without recursion)."""
    import sympy

    stack = [(expr, False)]
    while stack:
        e, ready = stack.pop()
        if e in memo:
            continue
        if isinstance(e, sympy.Symbol):
            memo[e] = env[e]
        elif isinstance(e, sympy.Rational):
            memo[e] = tracer.const(Fraction(int(e.p), int(e.q)))
        elif not ready:
            stack.append((e, True))
            stack.extend((a, False) for a in e.args)
        elif isinstance(e, sympy.Add):
            memo[e] = functools.reduce(tracer.add, (memo[a] for a in e.args))
        elif isinstance(e, sympy.Mul):
            memo[e] = functools.reduce(tracer.mul, (memo[a] for a in e.args))
        elif isinstance(e, sympy.Pow) and isinstance(e.exp, sympy.Integer) and 0 <= e.exp <= MAX_POWER:
            memo[e] = tracer.power(memo[e.base], int(e.exp))
        else:  # cse wrote something check_polynomial refuses: say so rather than build it
            raise CircuitError(f"from_sympy: the shared subexpression {_short(sympy.sstr(e))} is not a polynomial")
    return memo[expr]


def arrays_from_names(names: list[str]) -> tuple[dict, dict]:
    """``placed=True``'s reading of input names as arrays: ``({array: shape}, {array: [(index,
    name)]})``, arrays in sorted order; a name without ``_i`` suffixes is a scalar.  Refused where
    the names of one array do not fill it."""
    groups: dict[str, dict[tuple, str]] = {}
    for n in names:
        m = _INDEXED.match(n)
        base, idx = (m[1], tuple(int(t) for t in m[2][1:].split("_"))) if m else (n, ())
        groups.setdefault(base, {})[idx] = n
    shapes, entries = {}, {}
    for base in sorted(groups):
        g = groups[base]
        dims = {len(i) for i in g}
        shape = tuple(max(i[a] for i in g) + 1 for a in range(dims.pop())) if len(dims) == 1 else None
        if shape is None or len(g) != functools.reduce(lambda p, s: p * s, shape, 1) or any(
                entry_name(base, i) != n for i, n in g.items()):
            shown = ", ".join(sorted(g.values())[:4]) + (" ..." if len(g) > 4 else "")
            raise CircuitError(f"from_sympy: placed=True reads the inputs as arrays name_i_j, and {shown} do not "
                               f"fill an array {base} (give a dict of places)")
        shapes[base] = shape
        entries[base] = sorted(g.items())
    return shapes, entries


def from_sympy(outputs, /, *, placed=False, params=()) -> nx.DiGraph:
    """The validated circuit of ``outputs`` (``{output name: sympy expression or Matrix}``; the
    module docstring says what is polynomial, how entries and places are named).  ``params``:
    inputs declared parameters of a step (``"param": true`` on their input nodes, as
    :func:`circuits.frontend.from_function`'s ``params``), each a symbol's name or the array name of
    symbols ``name_i``, ``name_i_j``.  Every refusal is one line, a
    :class:`circuits.graph.CircuitError`, before anything is built."""
    import sympy

    if not isinstance(outputs, Mapping) or not outputs:
        raise CircuitError(f"from_sympy: give a non-empty dict {{output name: expression}}, got "
                           f"{type(outputs).__name__}{'' if outputs else ' (empty)'}")
    items, seen = [], {}
    for key, value in outputs.items():
        if not isinstance(key, str) or not key:
            raise CircuitError(f"from_sympy: the output name {key!r} is not a non-empty str")
        if isinstance(value, sympy.MatrixBase):
            r, c = value.shape
            group = [(entry_name(key, (i,) if c == 1 else (i, j)), value[i, j]) for i in range(r) for j in range(c)]
        else:
            group = [(key, _expression(key, value))]
        for name, e in group:
            if name in seen:
                raise CircuitError(f"from_sympy: outputs {seen[name]!r} and {key!r} both name the output {name!r}")
            seen[name] = key
            check_polynomial(name, e)
            items.append((name, e))
    if not items:
        raise CircuitError("from_sympy: no output values (empty matrices)")
    symbols: dict[str, object] = {}
    for _, e in items:
        for s in e.free_symbols:
            if symbols.setdefault(s.name, s) != s:
                raise CircuitError(f"from_sympy: two different symbols are named {s.name!r} "
                                   f"({sympy.srepr(s)} and {sympy.srepr(symbols[s.name])})")
    names = sorted(symbols)
    groups: dict[str, list[str]] = {}
    for n in names:  # each symbol, and each array name_i_j under its name
        m = _INDEXED.match(n)
        groups.setdefault(m[1] if m else n, []).append(n)
    held = param_inputs(params, groups, "from_sympy", "an input (a free symbol, or the array of symbols name_i)")
    if placed is True:
        shapes, entries = arrays_from_names(names)
        places = default_layout(shapes)
        names = [n for base in entries for _, n in entries[base]]
    elif isinstance(placed, dict):
        places = explicit_places(placed, {n: [((), n)] for n in names}, "an input")
    elif placed is False or placed is None:
        places = None
    else:
        raise CircuitError(f"from_sympy: placed must be True, False or a dict of places, got {placed!r}")
    tracer = Tracer()
    env = {symbols[n]: tracer.input(n) for n in names}
    replacements, reduced = sympy.cse([e for _, e in items],
                                      symbols=sympy.numbered_symbols("cse", cls=sympy.Dummy))
    memo: dict = {}
    for s, e in replacements:
        env[s] = _build(e, env, memo, tracer)
    outs = [(name, _build(e, env, memo, tracer)) for (name, _), e in zip(items, reduced)]
    return mark_params(emit(tracer, outs, places), held)


__all__ = ["arrays_from_names", "check_polynomial", "from_sympy"]
