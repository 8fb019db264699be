"""Circuits from Python: a numpy-style function traced into a validated circuit.

:func:`from_function` calls ``fn`` once on *symbolic* arrays and returns the circuit of what it
computed (an arithmetic circuit in the sense of seed 000 Def. D.15: inputs, exact constants,
``+`` and ``*`` gates), ready for :func:`constructions.compiler.compile_circuit` and the prover::

    g = from_function(lambda A, x, b: x - Fraction(1, 16) * A.T @ (A @ x - b), A=(20, 5), x=(5,), b=(20,))

Inputs.  Each keyword argument ``name=shape`` is an input array of that shape (``()`` a scalar, an
int ``n`` the same as ``(n,)``) whose entries are the circuit's inputs ``name_i``, ``name_i_j``
(``A_2_0``, ``x_1``; a scalar is ``name``).  ``fn`` receives them by keyword as numpy object arrays
(a scalar as one value).

What ``fn`` may do: ``+ - *`` and ``@`` (``np.matmul``, ``np.dot``, ``np.einsum``, ...), ``.T``,
``.sum(axis)``, ``.cumsum``, indexing, slicing and reshaping (the structural numpy functions of
:data:`ALLOWED_FUNCTIONS`), numpy broadcasting, ``**`` by an int ``0 .. MAX_POWER`` (written as
repeated squaring), exact constants (``int``, :class:`fractions.Fraction`, numpy ints, sympy
``Rational``) and division by a nonzero exact constant.  Everything else is refused by
:class:`UnsupportedOperation`, one line naming the operation and the user's source line
(``file:line (source)``, the innermost frame outside this module and numpy): division by a
variable, comparisons (and ``if``/``max``/``abs`` on a value), every other numpy ufunc
(``np.sqrt``, ``np.maximum``, ...) and array function (``np.linalg.inv``, ``np.where``, ...),
float constants (``0.5``, a float array such as ``np.eye(3)``: write ``np.eye(3, dtype=int)`` or
``Fraction(1, 2)``; floats are not exact), ``//``, ``%``, bitwise operators, a variable, negative
or non-integer exponent.

Outputs.  A returned array is the output ``y`` (entries ``y_i``, ``y_i_j``; a scalar ``y``), a tuple
the outputs ``y0, y1, ...`` (each named the same way), a dict names its outputs (``{"x": new_x,
"A": A}``: ``x_j``, ``A_i_j``).  An output may be a constant or an input itself (a pass-through).

Sharing.  Every value is a node of one expression DAG, hash-consed: the same operation on the same
operands (``a*b`` and ``b*a`` alike) is one node, so a subexpression computed twice is one gate.
When the circuit is written, a sum (product) used only by another sum (product) is merged into it
(``((a + b) + c) + d`` one 4-operand ``add``, which numpy's object ``@`` and ``sum`` build as a
chain), constants of one gate are folded, and gates feeding no output are not written.

Places (``placed=``, :mod:`circuits.placement`).  ``False`` (default): an unplaced circuit.
``True``, the builders' convention, rows as tokens, arguments in the order given: a 2-D argument
``r x c`` puts row ``i`` on token ``i`` in ``c`` new channels; a 1-D argument as long as the token
count ``T`` (the most rows of a 2-D argument; without one, the longest 1-D argument) is a column
(entry ``i`` at token ``i``, one new channel); every other 1-D argument and every scalar lies on
one extra token ``T`` (the hand constructions' query token), in channels of its own after those
(``gd_step``'s layout: ``A_i_j`` at ``(i, j)``, ``b_i`` at ``(i, d)``, ``x_j`` at ``(n, d+1+j)``;
with ``x`` in ``A``'s channels the GD step at N=6, D=2 compiled to one more layer on ``baseconv``,
``lsa`` and ``elsa``).  A dict gives every argument's places: a callable ``index -> (token,
channel)`` for an array, a pair for a scalar.  An output named like an input (``x_j`` for the new
iterate, ``A_i_j`` passed through) is placed at that input's place, so a step compiles to a
repeatable body; other outputs are left for the compiler to place.

Parameters (``params=("eta", ...)``).  The named arguments are declared parameters of a step: each
of their input nodes carries ``"param": true``, the mark ``constructions.iterated`` reads from a
circuit file, so ``compile_iteration(from_function(step, params=("eta",), ...), k)`` holds ``eta``
in the state, unchanged by the step, as a free symbol of the proof (one proof for every step size).
A name that is not an argument is refused in one line, before ``fn`` runs.

Sequence helpers (rows are tokens): :func:`token_sum` (the sum over tokens), :func:`prefix_sum`
(the causal prefix sum, a chain of N sums) and :func:`shift` (row t takes row t - k).  They are
plain numpy on any array, so the same ``fn`` runs on Fractions for a reference value.
"""
from __future__ import annotations

import functools
import numbers
import os
from fractions import Fraction
from typing import NoReturn

import networkx as nx
import numpy as np

from . import keys as K
from .callsite import call_site
from .graph import CircuitBuilder, CircuitError, exact_constant, input_nodes, one_line

#: the largest exponent ``**`` takes (the degree, and the prover's expansion, grow with it)
MAX_POWER = 64
#: the most input entries a traced function may declare (all arguments together)
MAX_ENTRIES = 1_000_000
#: the input-node attribute that declares a parameter (``constructions.iterated.PARAM`` reads it)
PARAM = "param"

_WHY = "a circuit has only + and * (allowed: + - * @, ** by an int, / by an exact constant)"
_SKIP = (__file__, os.path.dirname(np.__file__) + os.sep)


class UnsupportedOperation(CircuitError):
    """An operation a circuit cannot express (one line: the operation and the user's source line)."""


def _refuse(what: str, why: str = _WHY) -> NoReturn:
    raise UnsupportedOperation(f"from_function: {what} at {call_site(_SKIP, 2)} is refused: {why}")


# --------------------------------------------------------------------------- the expression DAG


class Tracer:
    """The nodes of one trace: inputs in declaration order, hash-consed constants and gates."""

    def __init__(self) -> None:
        self.table: dict[tuple, Var] = {}
        self.count = 0
        self.inputs: list[Var] = []

    def _node(self, key: tuple, op: str, args: tuple = (), label=None) -> Var:
        v = self.table.get(key)
        if v is None:
            v = Var(self, self.count, op, args, label)
            self.count += 1
            self.table[key] = v
        return v

    def input(self, name: str) -> Var:
        v = self._node((K.INPUT, name), K.INPUT, (), name)
        self.inputs.append(v)
        return v

    def const(self, value: Fraction) -> Var:
        return self._node((K.CONST, value), K.CONST, (), value)

    def _gate(self, op: str, a: Var, b: Var) -> Var:
        args = (a, b) if a.id <= b.id else (b, a)  # commutative: a*b and b*a are one node
        return self._node((op, args[0].id, args[1].id), op, args)

    def add(self, a: Var, b: Var) -> Var:
        if a.op == K.CONST and b.op == K.CONST:
            return self.const(a.label + b.label)
        if a.op == K.CONST and a.label == 0:
            return b
        if b.op == K.CONST and b.label == 0:
            return a
        return self._gate(K.ADD, a, b)

    def mul(self, a: Var, b: Var) -> Var:
        if b.op == K.CONST:
            a, b = b, a
        if a.op == K.CONST:
            if b.op == K.CONST:
                return self.const(a.label * b.label)
            if a.label == 0:
                return a
            if a.label == 1:
                return b
            c, rest = _scaled(b)
            if c is not None:  # c1 (c2 y) = (c1 c2) y
                return self.mul(self.const(a.label * c), rest)
        return self._gate(K.MUL, a, b)

    def neg(self, a: Var) -> Var:
        return self.mul(self.const(Fraction(-1)), a)

    def power(self, a: Var, k: int) -> Var:
        """``a ** k`` by repeated squaring (the squares are nodes of their own, shared)."""
        result, base = None, a
        while k:
            if k & 1:
                result = base if result is None else self.mul(result, base)
            k >>= 1
            if k:
                base = self.mul(base, base)
        return self.const(Fraction(1)) if result is None else result


def _scaled(v: Var):
    """``(c, y)`` when ``v`` is the product of a constant ``c`` and one non-constant ``y``."""
    if v.op == K.MUL and len(v.args) == 2:
        a, b = v.args
        if a.op == K.CONST and b.op != K.CONST:
            return a.label, b
        if b.op == K.CONST and a.op != K.CONST:
            return b.label, a
    return None, None


def _is_floatlike(y) -> bool:
    return isinstance(y, (complex, np.complexfloating)) or (
        isinstance(y, numbers.Real) and not isinstance(y, numbers.Rational))


class Var:
    """One value of a traced function: a node of the trace's expression DAG (an input, an exact
    constant, a sum or a product).  Python's operators build new nodes; what a circuit cannot
    compute is refused (:class:`UnsupportedOperation`)."""

    __slots__ = ("tracer", "id", "op", "args", "label")
    __hash__ = object.__hash__  # by identity (== is refused: it is a comparison)

    def __init__(self, tracer: Tracer, id_: int, op: str, args: tuple, label) -> None:
        self.tracer, self.id, self.op, self.args, self.label = tracer, id_, op, args, label

    def __repr__(self) -> str:
        if self.op == K.INPUT:
            return f"Var({self.label})"
        if self.op == K.CONST:
            return f"Var({self.label})"
        return f"Var({self.op} #{self.id})"

    def _operand(self, y, op: str):
        """``y`` as a node of this trace; NotImplemented for an array (numpy broadcasts)."""
        if isinstance(y, Var):
            if y.tracer is not self.tracer:
                _refuse(f"'{op}'", "its operands come from two traces (a value kept from another from_function call)")
            return y
        if isinstance(y, np.ndarray):
            return NotImplemented
        if isinstance(y, (bool, np.bool_)):
            _refuse(f"the bool {y!r} in '{op}'", "a bool is not a number here; write 0 or 1")
        if _is_floatlike(y):
            _refuse(f"the float constant {one_line(y)} in '{op}'",
                    "floats are not exact; write an int or fractions.Fraction")
        try:
            return self.tracer.const(exact_constant(y))
        except CircuitError:
            _refuse(f"an operand of type {type(y).__name__} in '{op}'",
                    "operands are traced values and exact constants (int, fractions.Fraction)")

    def __add__(self, y):
        o = self._operand(y, "+")
        return o if o is NotImplemented else self.tracer.add(self, o)

    __radd__ = __add__

    def __sub__(self, y):
        o = self._operand(y, "-")
        return o if o is NotImplemented else self.tracer.add(self, self.tracer.neg(o))

    def __rsub__(self, y):
        o = self._operand(y, "-")
        return o if o is NotImplemented else self.tracer.add(o, self.tracer.neg(self))

    def __mul__(self, y):
        o = self._operand(y, "*")
        return o if o is NotImplemented else self.tracer.mul(self, o)

    __rmul__ = __mul__

    def __neg__(self):
        return self.tracer.neg(self)

    def __pos__(self):
        return self

    def __truediv__(self, y):
        if isinstance(y, Var):
            _refuse("division by a variable ('/')", "a circuit has only + and *; divide by an exact constant")
        o = self._operand(y, "/")
        if o is NotImplemented:
            return o
        if o.label == 0:
            _refuse("division by zero ('/')", "the divisor is the constant 0")
        return self.tracer.mul(self, self.tracer.const(1 / o.label))

    def __rtruediv__(self, y):
        _refuse("division by a variable ('/')", "a circuit has only + and *; divide by an exact constant")

    def __pow__(self, k, mod=None):
        if mod is not None:
            _refuse("pow() with a modulus", _WHY)
        if isinstance(k, np.ndarray):
            return NotImplemented
        if isinstance(k, Var):
            _refuse("a power by a variable ('**')", "the exponent must be an int")
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, numbers.Integral):
            _refuse(f"the power ** {one_line(k)} ('**')", "the exponent must be an int (not a float or a fraction)")
        if k < 0:
            _refuse(f"the negative power ** {int(k)} ('**')", "a negative power divides by a variable")
        if k > MAX_POWER:
            _refuse(f"the power ** {int(k)} ('**')", f"above the limit circuits.frontend.MAX_POWER = {MAX_POWER}")
        return self.tracer.power(self, int(k))

    def __rpow__(self, y):
        _refuse("a variable exponent ('**')", "the exponent must be an int constant")

    def __matmul__(self, y):
        if isinstance(y, np.ndarray):
            return NotImplemented
        _refuse("'@' on a scalar", "matmul needs arrays; write * for scalars")

    __rmatmul__ = __matmul__


def _refuser(what: str, why: str = _WHY):
    def method(self, *args, **kwargs):
        _refuse(what, why)

    method.__name__ = what
    return method


_COMPARE = "a circuit has no comparisons (only + and *)"
for _name, _what, _why in [
        ("__lt__", "the comparison '<'", _COMPARE), ("__le__", "the comparison '<='", _COMPARE),
        ("__gt__", "the comparison '>'", _COMPARE), ("__ge__", "the comparison '>='", _COMPARE),
        ("__eq__", "the comparison '=='", _COMPARE), ("__ne__", "the comparison '!='", _COMPARE),
        ("__bool__", "the truth value of a variable (if, while, and, or, not, min, max)", _COMPARE),
        ("__abs__", "abs()", _COMPARE),
        ("__float__", "a conversion to float", "the values are exact polynomials, not numbers"),
        ("__int__", "a conversion to int", "the values are exact polynomials, not numbers"),
        ("__complex__", "a conversion to complex", "the values are exact polynomials, not numbers"),
        ("__index__", "a variable used as an index", "indices must be ints"),
        ("__round__", "round()", _WHY), ("__trunc__", "math.trunc()", _WHY),
        ("__floor__", "math.floor()", _WHY), ("__ceil__", "math.ceil()", _WHY),
        ("__floordiv__", "floor division '//'", _WHY), ("__rfloordiv__", "floor division '//'", _WHY),
        ("__mod__", "the remainder '%'", _WHY), ("__rmod__", "the remainder '%'", _WHY),
        ("__divmod__", "divmod()", _WHY), ("__rdivmod__", "divmod()", _WHY),
        ("__and__", "the bitwise '&'", _WHY), ("__rand__", "the bitwise '&'", _WHY),
        ("__or__", "the bitwise '|'", _WHY), ("__ror__", "the bitwise '|'", _WHY),
        ("__xor__", "the bitwise '^'", _WHY), ("__rxor__", "the bitwise '^'", _WHY),
        ("__lshift__", "the shift '<<'", _WHY), ("__rlshift__", "the shift '<<'", _WHY),
        ("__rshift__", "the shift '>>'", _WHY), ("__rrshift__", "the shift '>>'", _WHY),
        ("__invert__", "the bitwise '~'", _WHY)]:
    setattr(Var, _name, _refuser(_what, _why))


def _ufunc_method(self, name: str):
    """numpy's object loops call ``value.<ufunc name>()`` (``np.exp`` on a plain object array calls
    ``x.exp()``): every such name refuses, naming the ufunc."""
    if isinstance(getattr(np, name, None), np.ufunc):
        return _refuser(f"np.{name}").__get__(self)
    raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


Var.__getattr__ = _ufunc_method


# --------------------------------------------------------------------------- numpy's protocols


class SymArray(np.ndarray):
    """A numpy object array of :class:`Var` (and exact constants), as a traced function receives
    it: numpy's ufuncs and array functions reach :func:`_ufunc` / :func:`_function`, which run the
    polynomial ones and refuse the others."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return _ufunc(ufunc, method, inputs, kwargs)

    def __getitem__(self, key):  # numpy turns a failed __index__ into its own IndexError: refuse first
        if isinstance(key, Var) or (isinstance(key, tuple) and any(isinstance(k, Var) for k in key)):
            _refuse("a variable used as an index", "indices must be ints")
        return super().__getitem__(key)

    def __array_function__(self, func, types, args, kwargs):
        return _function(func, args, kwargs)


def _var_array_ufunc(self, ufunc, method, *inputs, **kwargs):
    return _ufunc(ufunc, method, inputs, kwargs)


def _var_array_function(self, func, types, args, kwargs):
    return _function(func, args, kwargs)


Var.__array_ufunc__ = _var_array_ufunc  # np.sqrt(A[0, 0]) reaches the refusal too
Var.__array_function__ = _var_array_function

#: ufunc -> the operation it is, for the user
_ALLOWED_UFUNCS = {np.add: "+", np.subtract: "-", np.multiply: "*", np.matmul: "@", np.negative: "unary -",
                   np.positive: "unary +", np.true_divide: "/", np.power: "**", np.square: "np.square"}
_OPERATORS = {np.less: "<", np.less_equal: "<=", np.greater: ">", np.greater_equal: ">=", np.equal: "==",
              np.not_equal: "!=", np.floor_divide: "//", np.remainder: "%", np.divmod: "divmod()",
              np.absolute: "abs()", np.bitwise_and: "&", np.bitwise_or: "|", np.bitwise_xor: "^",
              np.invert: "~", np.left_shift: "<<", np.right_shift: ">>"}

#: the ufuncs that compare (or need a comparison): refused as such
_COMPARING = frozenset((np.less, np.less_equal, np.greater, np.greater_equal, np.equal, np.not_equal, np.absolute,
                        np.maximum, np.minimum, np.fmax, np.fmin, np.sign, np.heaviside, np.logical_and,
                        np.logical_or, np.logical_not, np.logical_xor))

#: the numpy functions a traced function may call: sums, products, contractions and the
#: structural ones (they move, copy and pad values, padding with the int 0)
ALLOWED_FUNCTION_NAMES = (
    "sum", "prod", "cumsum", "cumprod", "mean", "dot", "inner", "outer", "tensordot", "einsum", "kron", "cross",
    "trace", "diagonal", "diag", "transpose", "swapaxes", "moveaxis", "reshape", "ravel", "squeeze",
    "expand_dims", "concatenate", "stack", "vstack", "hstack", "column_stack", "block", "atleast_1d",
    "atleast_2d", "atleast_3d", "broadcast_to", "broadcast_arrays", "roll", "flip", "fliplr", "flipud", "rot90",
    "tril", "triu", "zeros_like", "ones_like", "copy", "shape", "ndim", "size", "take", "repeat", "tile",
    "append", "pad", "split", "array_split", "hsplit", "vsplit", "linalg.matrix_power", "linalg.multi_dot")
ALLOWED_FUNCTIONS = frozenset(
    f for f in (functools.reduce(lambda m, a: getattr(m, a, None), n.split("."), np) for n in ALLOWED_FUNCTION_NAMES)
    if f is not None)


def _plain(x, what: str):
    """An operand for numpy itself: a SymArray as a plain object array, a Var as a 0-d object
    array (so numpy does not dispatch back here), lists and tuples element by element; a float
    array or number is refused."""
    if isinstance(x, SymArray):
        return x.view(np.ndarray)
    if isinstance(x, Var):
        a = np.empty((), dtype=object)
        a[()] = x
        return a
    if isinstance(x, np.ndarray):
        if x.dtype.kind in "fc":
            _refuse(f"a float array (dtype {x.dtype}) in {what}",
                    "floats are not exact; use dtype=int, dtype=object or fractions.Fraction")
        return x
    if isinstance(x, (list, tuple)):
        return type(x)(_plain(e, what) for e in x)
    if _is_floatlike(x):
        _refuse(f"the float constant {one_line(x)} in {what}",
                "floats are not exact; write an int or fractions.Fraction")
    return x


def _wrap(r):
    if isinstance(r, tuple):
        return tuple(_wrap(e) for e in r)
    if isinstance(r, list):
        return [_wrap(e) for e in r]
    if isinstance(r, np.ndarray) and r.dtype == object and not isinstance(r, SymArray):
        return r.view(SymArray)
    return r


def _ufunc(ufunc, method: str, inputs, kwargs):
    sym = _ALLOWED_UFUNCS.get(ufunc)
    name = f"np.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
    if sym is None:
        op = _OPERATORS.get(ufunc)
        _refuse(name + (f" ('{op}')" if op else ""), _COMPARE if ufunc in _COMPARING else _WHY)
    what = f"'{sym}'" if sym != name else name
    if kwargs.get("dtype") is not None and np.dtype(kwargs["dtype"]) != object:
        _refuse(f"dtype={np.dtype(kwargs['dtype'])} in {what}", "the values are exact; leave dtype out")
    args = [_plain(x, what) for x in inputs]
    if "out" in kwargs:
        kwargs["out"] = tuple(_plain(o, what) for o in kwargs["out"])
    if ufunc is np.square:
        if method != "__call__":
            _refuse(name)
        return _wrap(np.multiply(args[0], args[0], **kwargs))
    return _wrap(getattr(ufunc, method)(*args, **kwargs))


def _function_name(func) -> str:
    mod = getattr(func, "__module__", None) or "numpy"
    prefix = "np" + mod[len("numpy"):] if mod.startswith("numpy") else mod
    return f"{prefix}.{getattr(func, '__name__', func)}"


def _function(func, args, kwargs):
    name = _function_name(func)
    if func not in ALLOWED_FUNCTIONS:
        _refuse(name)
    return _wrap(func(*_plain(tuple(args), name), **{k: _plain(v, name) for k, v in kwargs.items()}))


# --------------------------------------------------------------------------- sequence helpers


def token_sum(X):
    """The sum over tokens (rows, axis 0) of ``X``: ``X.sum(axis=0)``."""
    return np.sum(X, axis=0)


def prefix_sum(X):
    """The causal prefix sum over tokens: row ``t`` is the sum of rows ``0 .. t`` (seed 000 eq. (47)'s
    all-ones causal filter); traced, a chain of one sum per token."""
    return np.cumsum(X, axis=0)


def shift(X, k: int = 1):
    """Row ``t`` of the result is row ``t - k`` of ``X`` (``k > 0``: down, towards later tokens, the
    first ``k`` rows 0; ``k < 0``: up, the last ``|k|`` rows 0), the causal shift of seed 003's
    BaseConv primitives."""
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, numbers.Integral):
        raise CircuitError(f"shift: k must be an int, got {one_line(k)}")
    k = int(k)
    out = np.zeros_like(X)
    n = len(X)
    if 0 < k < n:
        out[k:] = X[:n - k]
    elif -n < k < 0:
        out[:n + k] = X[-k:]
    elif k == 0:
        out[:] = X
    return out


# --------------------------------------------------------------------------- arguments and places


def _shape(name: str, s) -> tuple[int, ...]:
    if isinstance(s, numbers.Integral) and not isinstance(s, (bool, np.bool_)):
        s = (s,)
    if not isinstance(s, tuple) or any(isinstance(n, (bool, np.bool_)) or not isinstance(n, numbers.Integral) or n < 1
                                       for n in s):
        raise CircuitError(f"from_function: argument {name}: shape must be a tuple of positive ints (() for a "
                           f"scalar), got {one_line(s)}")
    return tuple(int(n) for n in s)


def entry_name(name: str, index: tuple[int, ...]) -> str:
    """``name`` for a scalar, ``name_i``, ``name_i_j``, ... for an array entry."""
    return "_".join([name, *map(str, index)])


def _entries(args: dict[str, tuple]) -> dict[str, list[tuple[tuple, str]]]:
    """Each argument's entries ``(index, name)`` in C order; two arguments naming one entry are refused."""
    total = sum(int(np.prod(s)) for s in args.values())
    if total > MAX_ENTRIES:
        raise CircuitError(f"from_function: the arguments have {total} entries, above the limit "
                           f"circuits.frontend.MAX_ENTRIES = {MAX_ENTRIES}")
    seen: dict[str, str] = {}
    out = {}
    for name, s in args.items():
        out[name] = [(idx, entry_name(name, idx)) for idx in np.ndindex(*s)]
        for idx, e in out[name]:
            if e in seen:
                raise CircuitError(f"from_function: arguments {seen[e]} and {name} both name the input {e!r}")
            seen[e] = name
    return out


def default_layout(args: dict[str, tuple]) -> dict[str, tuple[int, int]]:
    """``placed=True``'s places (the module docstring): rows of 2-D arguments as tokens, 1-D
    arguments of the token count as columns, the rest on one extra token."""
    for name, s in args.items():
        if len(s) > 2:
            raise CircuitError(f"placed=True lays out arguments of at most 2 dimensions; {name} has shape {s} "
                               "(give its places in a dict)")
    rows = [s[0] for s in args.values() if len(s) == 2]
    T = max(rows) if rows else max((s[0] for s in args.values() if len(s) == 1), default=0)
    places: dict[str, tuple[int, int]] = {}
    ch = 0
    for name, s in args.items():
        if len(s) == 2:
            places.update({entry_name(name, (i, j)): (i, ch + j) for i in range(s[0]) for j in range(s[1])})
            ch += s[1]
        elif len(s) == 1 and s[0] == T:
            places.update({entry_name(name, (i,)): (i, ch) for i in range(s[0])})
            ch += 1
    q = ch  # the extra token's values in channels of their own (what the compiler routes best)
    for name, s in args.items():
        if len(s) == 1 and s[0] != T:
            places.update({entry_name(name, (j,)): (T, q + j) for j in range(s[0])})
            q += s[0]
        elif not s:
            places[name] = (T, q)
            q += 1
    return places


def _pair(who: str, p) -> tuple[int, int]:
    if (not isinstance(p, tuple) or len(p) != 2
            or any(isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral) or v < 0 for v in p)):
        raise CircuitError(f"placed: {who}: a place is a pair (token, channel) of ints >= 0, got {one_line(p)}")
    return int(p[0]), int(p[1])


def explicit_places(placed: dict, entries: dict[str, list[tuple[tuple, str]]], what: str) -> dict:
    """``placed={argument: callable index -> (token, channel) | (token, channel) for a scalar}`` as
    ``{entry name: place}``; every argument must be given, and no two entries share a place."""
    missing = [n for n in entries if n not in placed]
    extra = [n for n in placed if n not in entries]
    if missing or extra:
        raise CircuitError("placed: " + (f"no places for {what} {', '.join(missing)}" if missing
                                          else f"{', '.join(map(str, extra))} is not {what}"))
    places, at = {}, {}
    for name, items in entries.items():
        spec = placed[name]
        for idx, e in items:
            p = _pair(e, spec(*idx) if callable(spec) else spec)
            if p in at:
                raise CircuitError(f"placed: {at[p]} and {e} are both at {p}")
            places[e], at[p] = p, e
    return places


def places_for(placed, args: dict[str, tuple], entries, what: str = "an argument"):
    """The inputs' places for ``placed`` (False: None), checked before any tracing."""
    if placed is False or placed is None:
        return None
    if placed is True:
        return default_layout(args)
    if isinstance(placed, dict):
        return explicit_places(placed, entries, what)
    raise CircuitError(f"placed must be True, False or a dict of places, got {one_line(placed)}")


# --------------------------------------------------------------------------- outputs and the circuit


def _element(name: str, v, tracer: Tracer):
    if isinstance(v, Var):
        if v.tracer is not tracer:
            raise CircuitError(f"from_function: output {name!r} is a value of another trace")
        return v
    if _is_floatlike(v):
        raise CircuitError(f"from_function: output {name!r} is the float {one_line(v)}; floats are not exact "
                           "(write an int or fractions.Fraction)")
    try:
        return exact_constant(v)
    except CircuitError:
        raise CircuitError(f"from_function: output {name!r} is {one_line(v)} ({type(v).__name__}), not a "
                           "traced value or an exact constant") from None


def _flatten(name: str, value, tracer: Tracer) -> list[tuple[str, object]]:
    if isinstance(value, (np.ndarray, list)):
        arr = np.asarray(value, dtype=object) if isinstance(value, list) else value
        if arr.dtype.kind in "fc":
            raise CircuitError(f"from_function: output {name!r} is a float array (dtype {arr.dtype}); floats are "
                               "not exact")
        if arr.ndim == 0:
            return [(name, _element(name, arr[()], tracer))]
        return [(entry_name(name, idx), _element(entry_name(name, idx), arr[idx], tracer))
                for idx in np.ndindex(*arr.shape)]
    return [(name, _element(name, value, tracer))]


def collect_outputs(result, tracer: Tracer) -> list[tuple[str, object]]:
    """``fn``'s return value as ``[(output name, Var or Fraction)]`` (the module docstring's rule)."""
    if isinstance(result, dict):
        groups = []
        for k, v in result.items():
            if not isinstance(k, str) or not k:
                raise CircuitError(f"from_function: the returned dict's key {one_line(k)} is not a non-empty str")
            groups.append((k, v))
    elif isinstance(result, tuple):
        groups = [(f"y{i}", v) for i, v in enumerate(result)]
    else:
        groups = [("y", result)]
    outs, seen = [], {}
    for key, v in groups:
        for name, e in _flatten(key, v, tracer):
            if name in seen:
                raise CircuitError(f"from_function: outputs {seen[name]!r} and {key!r} both name the output {name!r}")
            seen[name] = key
            outs.append((name, e))
    if not outs:
        raise CircuitError("from_function: fn returned no values (an empty array)")
    return outs


def emit(tracer: Tracer, outs: list[tuple[str, object]], places: dict | None) -> nx.DiGraph:
    """The validated circuit of ``outs`` (``[(name, Var or Fraction)]``): every input of the trace
    (at its place), the gates the outputs reach, each sum (product) used only by another sum
    (product) merged into it, each gate's constants folded into one; an output named like an input
    at that input's place."""
    b = CircuitBuilder()
    node: dict[int, int] = {}
    for v in tracer.inputs:
        node[v.id] = b.input(v.label, **_at(places and places[v.label]))
    roots = [v for _, v in outs if isinstance(v, Var)]
    gates, uses, parent_op = _reach(roots)
    outset = {v.id for v in roots}
    inline = {v.id for v in gates if uses.get(v.id) == 1 and parent_op[v.id] == v.op and v.id not in outset}
    consts: dict[Fraction, int] = {}

    def cnode(c: Fraction) -> int:
        if c not in consts:
            consts[c] = b.const(c)
        return consts[c]

    for v in gates:
        if v.id in inline:
            continue
        is_add = v.op == K.ADD
        c, ops, stack = Fraction(0 if is_add else 1), [], list(reversed(v.args))
        while stack:
            a = stack.pop()
            if a.id in inline:
                stack.extend(reversed(a.args))
            elif a.op == K.CONST:
                c = c + a.label if is_add else c * a.label
            else:
                ops.append(node[a.id])
        if is_add and c != 0:
            ops.append(cnode(c))
        elif not is_add and c != 1:
            ops.insert(0, cnode(c))
        node[v.id] = (b.add(*ops) if is_add else b.mul(*ops)) if len(ops) >= 2 else ops[0] if ops else cnode(c)
    marked: set[int] = set()
    for name, v in outs:
        n = b.const(v) if not isinstance(v, Var) else b.const(v.label) if v.op == K.CONST else node[v.id]
        if n in marked:  # one node, two outputs: the second is the node times 1
            n = b.mul(cnode(Fraction(1)), n)
        marked.add(n)
        b.output(n, name, **_at(places and places.get(name)))
    return b.graph()


def _at(place) -> dict:
    return {"token": place[0], "channel": place[1]} if place else {}


def _reach(roots: list[Var]):
    """The gates the roots reach (sorted by id: operands first), each node's operand-slot count and
    (for a node used once) its user's op."""
    seen: set[int] = set()
    gates: list[Var] = []
    uses: dict[int, int] = {}
    parent_op: dict[int, str] = {}
    stack = [v for v in roots if v.op in K.GATES]
    while stack:
        v = stack.pop()
        if v.id in seen:
            continue
        seen.add(v.id)
        gates.append(v)
        for a in v.args:
            uses[a.id] = uses.get(a.id, 0) + 1
            parent_op[a.id] = v.op
            if a.op in K.GATES and a.id not in seen:
                stack.append(a)
    gates.sort(key=lambda v: v.id)
    return gates, uses, parent_op


# --------------------------------------------------------------------------- the front end


def from_function(fn, /, *, placed=False, params=(), **shapes) -> nx.DiGraph:
    """The validated circuit that ``fn`` computes on input arrays of the given shapes (the module
    docstring: inputs ``name_i_j``, outputs ``y_i`` / a tuple's ``y0, y1`` / a dict's names, the
    refused operations, ``placed``, ``params``).  Arguments are checked before ``fn`` runs; every
    refusal is one line (:class:`circuits.graph.CircuitError`; a refused operation
    :class:`UnsupportedOperation`, naming it and the source line)."""
    if not callable(fn):
        raise CircuitError(f"from_function: fn must be callable, got {type(fn).__name__}")
    args = {name: _shape(name, s) for name, s in shapes.items()}
    entries = _entries(args)
    held = param_inputs(params, {name: [e for _, e in ents] for name, ents in entries.items()}, "from_function",
                        "an argument")
    places = places_for(placed, args, entries)
    tracer = Tracer()
    arrays = {}
    for name, s in args.items():
        if not s:
            arrays[name] = tracer.input(name)
            continue
        a = np.empty(s, dtype=object)
        for idx, e in entries[name]:
            a[idx] = tracer.input(e)
        arrays[name] = a.view(SymArray)
    outs = collect_outputs(fn(**arrays), tracer)
    return mark_params(emit(tracer, outs, places), held)


def param_inputs(params, groups: dict[str, list[str]], where: str, what: str) -> list[str]:
    """The input names that ``params`` declares parameters: each name is a key of ``groups``
    (an argument: all its entries) or one of the input names listed there.  One line
    (:class:`CircuitError`) for anything else: not a tuple or list of str, a name twice, a name that
    is no ``what``."""
    if isinstance(params, str) or not isinstance(params, (tuple, list)):
        raise CircuitError(f"{where}: params must be a tuple of names, got {type(params).__name__} {params!r:.60}")
    inputs = {e for es in groups.values() for e in es}
    out: list[str] = []
    for p in params:
        if not isinstance(p, str):
            raise CircuitError(f"{where}: params: {p!r:.40} is not a name (a str)")
        if params.count(p) > 1:
            raise CircuitError(f"{where}: params: {p!r} is named twice")
        if p in groups or p in inputs:
            out.extend(e for e in groups.get(p, [p]) if e not in out)
        else:
            known = sorted(groups)
            raise CircuitError(f"{where}: params: {p!r} is not {what} (" + ", ".join(known[:8])
                               + (", ..." if len(known) > 8 else "") + ")")
    return out


def mark_params(g: nx.DiGraph, names) -> nx.DiGraph:
    """``g`` with ``"param": true`` (:data:`PARAM`) on the input nodes of ``names``."""
    if names:
        ins = input_nodes(g)
        for n in names:
            g.nodes[ins[n]][PARAM] = True
    return g


__all__ = ["ALLOWED_FUNCTIONS", "MAX_ENTRIES", "MAX_POWER", "PARAM", "SymArray", "UnsupportedOperation", "Var",
           "default_layout", "entry_name", "from_function", "prefix_sum", "shift", "token_sum"]
