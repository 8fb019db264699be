"""The proof's rings and specification: exact readings of float weights (``exact_float``), the
polynomial ring of a construction's problem variables (:class:`SymbolicProblem`, sympy's ``QQ[...]``
or FLINT through :func:`proof_arithmetic`), the section claims (:func:`section_claims`: what each
section must map to what) and the specification's states.  Used by :mod:`.proof`, :mod:`.locate`
and :mod:`.cover`."""
from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import numpy as np

from constructions import ops
from constructions.base import Construction, PartialState, run_layers
from constructions.claims import RESIDUAL_CHARS
from constructions.exact_floats import is_lazy
from constructions.layers import Layer
from constructions.weights_io import same_layer
from .kernel import differing as _differing, is_zero as _is_zero  # noqa: F401 - the kernel decides equality


def display_name(name: str) -> str:
    return name if name.isidentifier() else repr(name)


def entry_name(var: str, ix: tuple[int, ...]) -> str:
    """The display name of one entry of a variable: ``A[1,2]``, ``b[0]``; a
    scalar variable is its own name.  A name that is not an identifier is
    quoted (``'x[0]'``), so no entry name can equal another entry's or a
    parameter's: bare names are identifiers, indexed names are an
    identifier or a quoted string followed by ``[``."""
    return f"{display_name(var)}[{','.join(str(int(i)) for i in ix)}]" if len(ix) else display_name(var)


def load_sympy() -> None:
    """Import sympy's polynomial rings (once) before a proof's clock starts: a proof's time is
    the proof, not the import."""
    import sympy.polys.rings  # noqa: F401


def exact_float(x) -> Fraction | None:
    """The exact value of a floating-point scalar, or None for anything that is not one.

    A float (Python's, numpy's float16 .. longdouble, sympy's ``Float``, mpmath's ``mpf``,
    gmpy2's ``mpfr``, a ``Decimal``) is the exact binary (decimal) fraction it is, never a
    "nearby nice" rational: sympy's ``QQ.convert(0.1)`` is 1/10, which proved
    ``x*(1+2**-52) == x``.  Non-finite and complex values are refused (a
    :class:`FloatRefused`).  Integers, Fractions and ring elements are not floats: None."""
    if isinstance(x, (bool, int, Fraction, np.integer)):
        return None
    if isinstance(x, (complex, np.complexfloating)):
        raise FloatRefused(f"a complex number {x!r} in a proof (polynomial identities over QQ only)")
    if isinstance(x, (float, np.floating, Decimal)) or type(x).__module__ == "gmpy2" and hasattr(x, "as_integer_ratio"):
        try:
            n, d = x.as_integer_ratio()
        except (OverflowError, ValueError, ArithmeticError):
            raise FloatRefused(f"a non-finite number {x!r} in a proof") from None
        return Fraction(int(n), int(d))
    mod = type(x).__module__ or ""
    if mod.startswith("sympy") and getattr(x, "is_Float", False):
        if not x.is_finite:
            raise FloatRefused(f"a non-finite number {x!r} in a proof")
        from sympy import Rational

        r = Rational(x)  # exact: the Float's binary mantissa and exponent (nsimplify would round)
        return Fraction(int(r.p), int(r.q))
    if mod.startswith("mpmath") and type(x).__name__ == "mpf":
        import mpmath

        if not mpmath.isfinite(x):
            raise FloatRefused(f"a non-finite number {x!r} in a proof")
        return Fraction(int(x.man)) * Fraction(2) ** int(x.exp)
    return None


class FloatRefused(ValueError):
    """A number a proof cannot read exactly (non-finite or complex)."""


def exact_floats(A):
    """``A`` with every floating-point entry replaced by its exact value (:func:`exact_float`):
    a float-dtype array becomes an object array of Fractions (zeros the int 0); an object array
    is copied only if it holds a float (else returned as it is, the same object)."""
    if is_lazy(A):  # a weight file's floats read lazily (constructions/exact_floats.py): the eager exact array
        return A.materialise()
    A = np.asarray(A) if not isinstance(A, np.ndarray) else A
    kind = A.dtype.kind
    if kind == "c":
        raise FloatRefused(f"a complex array (dtype {A.dtype}) in a proof")
    if kind == "f":
        out = np.zeros(A.shape, dtype=object)
        for idx, x in np.ndenumerate(A):
            if x != 0:
                out[idx] = exact_float(x)
        return out
    if kind != "O" or not A.size:
        return A
    flat = A.ravel()
    types = set(map(type, flat.tolist()))
    if not any(t in _FLOATISH or _is_floatish_type(t) for t in types):
        return A
    out = flat.copy()
    for i, x in enumerate(flat.tolist()):
        q = exact_float(x)
        if q is not None:
            out[i] = q if q else 0
    return out.reshape(A.shape)


_FLOATISH = {float}


def _is_floatish_type(t) -> bool:
    if t in (int, Fraction, bool):
        return False
    if issubclass(t, (float, np.floating, np.complexfloating, complex, Decimal)):
        return True
    mod = t.__module__ or ""
    return ((mod.startswith("sympy") and getattr(t, "is_Float", False) is True)
            or (mod.startswith("mpmath") and t.__name__ == "mpf") or (mod == "gmpy2" and t.__name__ == "mpfr"))


def exact_layer(L: Layer, lazy: bool = False) -> Layer:
    """``L`` with its weights' floats read as their exact binary values (the same object when
    it holds no float).  A weight file's lazily read floats (``constructions/exact_floats.py``) become
    eager object arrays, except with ``lazy=True`` (the refutation, ``verify/prover/refute.py``, which
    reads them as residues and gmpy2 rationals itself; it never makes a proved verdict)."""
    changed = False

    def f(A):
        nonlocal changed
        B = A if lazy and is_lazy(A) else exact_floats(A)
        changed = changed or B is not A
        return B

    M = L.map(f)
    return M if changed else L


def poly_ring(names: list[str]):
    """``QQ[names]`` (sympy's sparse polynomial ring) and its generators, in order.  sympy is
    imported here, on the first proof, so that the CLIs start without it.

    The ring reads a float operand (``x * 0.1``, a weight ``1 + 2**-52``) as its exact binary
    value (:func:`exact_float`), not as sympy's nearby "nice" rational: its ``domain_new``, the
    conversion every ``PolyElement`` operation applies to a non-polynomial operand, is replaced
    on this ring instance (sympy builds a new ring object per call: no other ring is touched)."""
    from sympy import QQ, Symbol
    from sympy.polys.rings import ring

    R, *gens = ring([Symbol(nm) for nm in names], QQ)
    dom, convert = R.domain, R.domain.convert

    def domain_new(element, orig_domain=None):
        q = exact_float(element)
        if q is not None:
            return dom(q.numerator, q.denominator)
        return convert(element, orig_domain)

    R.domain_new = domain_new
    return (R, *gens)


class SymbolicProblem:
    """Fresh ring variables for every entry of every construction variable.

    Generators are assigned by *position* (one generator per entry and per
    parameter, never looked up by name), so two distinct entries are always
    distinct polynomials; the display names (:func:`entry_name`) are
    unambiguous as well: variable and parameter names must be distinct, and
    entries carry their index in brackets.
    """

    def __init__(self, variables: dict[str, tuple[int, ...]], params: tuple[str, ...] = ()):
        seen: set[str] = set()
        for nm in [*variables, *params]:
            if not isinstance(nm, str) or not nm:
                raise ValueError(f"variable/parameter name {nm!r} is not a non-empty string")
            if nm in seen:
                raise ValueError(f"name {nm!r} is used twice (variables and parameters must be distinct)")
            seen.add(nm)
        names: list[str] = []
        self.slots: dict[str, list[str]] = {}
        for var, shape in variables.items():
            self.slots[var] = [entry_name(var, ix) for ix in np.ndindex(*shape)]
            names += self.slots[var]
        names += [display_name(p) for p in params]
        self.names = names
        self.variables, self.param_names = dict(variables), tuple(params)
        self.R, *gens = poly_ring(names)
        self.gens = list(gens)
        self.v, self.params = self.arrange(gens)
        assert len(set(names)) == len(names)  # guaranteed by entry_name's grammar
        self.gen = dict(zip(names, gens))

    def arrange(self, gens) -> tuple[dict, dict]:
        """The variables (object arrays) and parameters made of ``gens``, by position: generator
        ``i`` of any ring built on :attr:`names` is the same entry."""
        pos = 0
        v = {}
        for var, shape in self.variables.items():
            arr = np.empty(shape, dtype=object)
            for ix in np.ndindex(*shape):
                arr[ix] = gens[pos]
                pos += 1
            v[var] = arr
        return v, {p: gens[pos + i] for i, p in enumerate(self.param_names)}


class SympyArith:
    """The proof's arithmetic in sympy's ring itself (``backend="sympy"``): no conversion but
    floats, which become their exact binary values (:func:`exact_floats`); a state's constant
    entries become constants of the ring (a ring constant never equals a ``Fraction`` under
    ``==``: the ring's coefficients are FLINT's ``fmpq``)."""

    name = "sympy"

    def __init__(self, R=None):
        self.R = R
        self._layers: dict[int, tuple[Layer, Layer]] = {}

    def array(self, A):
        A = exact_floats(np.asarray(A, dtype=object) if not isinstance(A, np.ndarray) else A)
        if self.R is None or A.dtype != object or not A.size:
            return A
        R = self.R
        flat = A.ravel()
        sel = [i for i, x in enumerate(flat.tolist()) if isinstance(x, Fraction)]
        if not sel:
            return A
        out = flat.copy()
        for i in sel:
            q = flat[i]
            out[i] = R(R.domain(q.numerator, q.denominator)) if q else 0
        return out.reshape(A.shape)

    def layers(self, Ls):
        out = []
        for L in Ls:
            hit = self._layers.get(id(L))
            if hit is None or hit[0] is not L:
                hit = self._layers[id(L)] = (L, exact_layer(L))
            out.append(hit[1])
        return out

    def to_sympy(self, p):
        return p


#: the exact backends of :func:`prove` (``docs``: which backend proved what is in each result)
BACKENDS = ("flint", "sympy")


def proof_arithmetic(backend: str, R):
    if backend == "flint":
        from .flint_backend import FlintRing

        return FlintRing(R)
    if backend == "sympy":
        return SympyArith(R)
    raise ValueError(f"unknown proof backend {backend!r} (one of {', '.join(BACKENDS)})")


def proof_specification(con: Construction, sp: SymbolicProblem, ar, params):
    """The construction the proof reads (rebuilt on the symbolic parameters), its variables, and
    the three claims' (section, start, target) thunks, in the backend's arithmetic.

    With flint, the construction is first asked to compute in flint itself (variables and
    parameters flint generators, which take ints, Fractions and floats, a float as its exact
    binary value); a specification that cannot (it mixes in sympy objects) is computed in sympy
    and converted, exactly, entry by entry (slower).  Floats never cause that fallback, and
    sympy's ring reads them exactly too (:func:`poly_ring`), so both routes read the same values; a
    number neither can read exactly (non-finite, complex) is refused, not retried."""
    if ar.name == "flint":
        fv, fparams = sp.arrange(ar.gens)
        try:
            spec = con.rebuild(**fparams) if params else con
            states = {sec: (ar.array(start()), ar.array(target()))
                      for sec, start, target in section_claims(spec, fv)}
        except FloatRefused:
            raise
        except Exception:  # noqa: BLE001 - a specification that does not compute in flint: sympy below
            pass
        else:
            if all(a.shape == b.shape == tuple(con.layout.shape) for a, b in states.values()):
                return spec, fv, [(sec, (lambda a=a: a), (lambda b=b: b)) for sec, (a, b) in states.items()]
    spec = con.rebuild(**sp.params) if params else con
    return spec, sp.v, [(sec, (lambda f=start: ar.array(f())), (lambda f=target: ar.array(f())))
                        for sec, start, target in section_claims(spec, sp.v)]


def declared_in(ar, declared):
    """The declared intermediate states as partial states in the arithmetic ``ar`` (None: none declared)."""
    if declared is None:
        return None
    return [None if d is None else PartialState(ar.array(d.expected), d.mask) for d in declared]


def as_poly(R, x):
    """``x`` as an element of the ring ``R`` (ints and Fractions as constants)."""
    if isinstance(x, (int, Fraction)):
        return R(x)
    return x


def run(layers: list[Layer], S):
    """The state after each of ``layers`` run in turn on ``S`` (each layer's own forward)."""
    return run_layers(layers, S, keep=True)


def _same_stack(a: Construction, b: Construction) -> bool:
    """The two constructions hold exactly the same layers in every section."""
    return all(len(getattr(a, sec)) == len(getattr(b, sec)) and
               all(same_layer(x, y) for x, y in zip(getattr(a, sec), getattr(b, sec)))
               for sec in ("prologue", "body", "epilogue"))


def truncate(s: str, n: int = RESIDUAL_CHARS) -> str:
    """``s``, cut to ``n`` characters with the full length said."""
    return s if len(s) <= n else s[:n] + f" ... ({len(s)} chars)"


def symbolic_spec(con: Construction, symbolic: bool, sections) -> tuple[str, ...]:
    """The parameters the proof replaces by fresh symbols (none when the layers were
    edited after building: they are proved as they are)."""
    params = tuple(con.symbolic_params) if (symbolic and sections is None and con.rebuild) else ()
    if params and not _same_stack(con, con.rebuild(**con.params)):
        params = ()
    return params


def section_claims(spec: Construction, v: dict, record: dict | None = None):
    """(section, start state, target state) thunks of the three claims.  ``state(v)`` appears in
    three of them: it is computed once and each thunk gets its own (shallow) copy.  ``record``:
    a dict that gets each specification output computed, keyed as :func:`_spec_outputs` labels
    them (``input_state(v)``, ``state(v)``, ``step(v)``, ``state(step(v))``, ``final_state(v)``),
    as the specification returned it (never handed out: the thunks give copies)."""
    memo: dict = {}
    rec = record if record is not None else {}

    def own(S):
        return S.copy() if isinstance(S, np.ndarray) else S

    def state_v():
        if "s" not in memo:
            memo["s"] = rec["state(v)"] = spec.state(v)
        return memo["s"].copy()

    def input_state():
        rec["input_state(v)"] = S = spec.input_state(v)
        return own(S)

    def stepped():
        rec["step(v)"] = nxt = spec.step(v)
        rec["state(step(v))"] = S = spec.state(nxt)
        return own(S)

    def final():
        rec["final_state(v)"] = S = spec.final_state(v)
        return own(S)

    return [("prologue", input_state, state_v), ("body", state_v, stepped), ("epilogue", state_v, final)]


def declared_states(con: Construction, v: dict, sec: str, n_layers: int) -> list[PartialState | None] | None:
    """``con.intermediate_states(v, sec)`` checked against the hook's contract
    (``constructions/base.py``); ``None`` when nothing is declared."""
    if n_layers < 2:
        return None
    ds = con.intermediate_states(v, sec)
    if ds is None:
        return None
    ds = list(ds)
    what = f"{con.name}.intermediate_states(v, {sec!r})"
    if len(ds) != n_layers:
        raise ValueError(f"{what} has {len(ds)} entries; the {sec} has {n_layers} layers (one entry per layer)")
    if ds[-1] is not None:
        raise ValueError(f"{what}: the entry of the last layer must be None (its output is the section's target)")
    for i, d in enumerate(ds[:-1]):
        if d is None:
            continue
        if not isinstance(d, PartialState):
            raise ValueError(f"{what}[{i}] is {type(d).__name__}, not a PartialState or None")
        if tuple(np.shape(d.mask)) != tuple(con.layout.shape) or np.asarray(d.mask).dtype != bool:
            raise ValueError(f"{what}[{i}].mask must be a bool array of the layout's shape {con.layout.shape}")
        if tuple(np.shape(d.expected))[-2:] != tuple(con.layout.shape):
            raise ValueError(f"{what}[{i}].expected has shape {np.shape(d.expected)}, the state {con.layout.shape}")
        ds[i] = PartialState(exact_floats(np.asarray(d.expected, dtype=object)), d.mask)  # floats: exact values
    return ds if any(d is not None for d in ds) else None
