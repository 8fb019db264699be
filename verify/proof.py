"""Exact proofs of constructions, valid at every depth.

The claim for a construction ``C`` (``constructions/base.py``) is three
polynomial identities in fresh variables (and, where the construction allows,
a fresh symbol for the step size):

1. prologue(input_state(v)) == state(v)
2. body(state(v))           == state(step(v))
3. epilogue(state(v))       == final_state(v)

By induction on k, (1)-(3) prove ``prologue + body^k + epilogue`` for every
k, at a cost independent of k.  Arithmetic is exact: states are numpy object
arrays of elements of the polynomial ring ``QQ[variables]`` (sympy's sparse
``PolyElement``), so equality is equality of polynomials.

A failure names the section, the layer, the region and entry of the named
layout, shows the residual polynomial (truncated) and a concrete rational
counterexample input, with the value the layers produce and the value the
specification demands there.

Which layer a failure blames (``Failure.located_by``):

* ``intermediate states``: the construction declares the state after the
  layers of the section (``Construction.intermediate_states``); the blamed
  layer is the first whose exact output differs from its declared state on a
  declared entry (``Failure.culprit`` holds that entry, its residual and a
  counterexample).  The declared states are themselves proved, separately
  (:func:`prove_intermediate_states`: the construction's own layers take each
  declared state to the next whatever the undeclared entries hold), and used
  to blame a layer only where the construction's own layers reproduce them.
* ``own layers``: no intermediate states, but the construction's own layers
  are at hand (weights proved against it): the first layer whose output
  differs from the construction's own layer on the same input.  Only useful
  when the weights are meant to equal the construction's.
* ``last layer``: neither; the section's last layer, where the residual
  appears, not necessarily the culprit.

The region, entry, residual and counterexample of a section failure are
always about the section's final state (what :func:`replay_counterexample`
replays); ``culprit`` is about the blamed layer's own output.
"""
from __future__ import annotations

import contextlib
import gc
import random
import time
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Callable

import numpy as np

from constructions import ops
from constructions.base import Construction, PartialState, run_layers
from constructions.claims import (LOCATED_LAST, LOCATED_ONLY, LOCATED_OWN, LOCATED_STATES,  # noqa: F401
                                  RESIDUAL_CHARS, Counterexample, Failure, IdentityClaim, LayerMismatch,
                                  ProofResult, WitnessClaim)
from constructions.layers import Layer
from constructions.weights_io import same_layer



def display_name(name: str) -> str:
    return name if name.isidentifier() else repr(name)


def entry_name(var: str, ix: tuple[int, ...]) -> str:
    """The display name of one entry of a variable: ``A[1,2]``, ``b[0]``; a
    scalar variable is its own name.  A name that is not an identifier is
    quoted (``'x[0]'``), so no entry name can equal another entry's or a
    parameter's: bare names are identifiers, indexed names are an
    identifier or a quoted string followed by ``[``."""
    return f"{display_name(var)}[{','.join(str(int(i)) for i in ix)}]" if len(ix) else display_name(var)


def _load_sympy() -> None:
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


def exact_layer(L: Layer) -> Layer:
    """``L`` with its weights' floats read as their exact binary values (the same object when
    it holds no float)."""
    changed = False

    def f(A):
        nonlocal changed
        B = exact_floats(A)
        changed = changed or B is not A
        return B

    M = L.map(f)
    return M if changed else L


def _ring(names: list[str]):
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
        self.R, *gens = _ring(names)
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


class _SympyArith:
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
        return _SympyArith(R)
    raise ValueError(f"unknown proof backend {backend!r} (one of {', '.join(BACKENDS)})")


def proof_specification(con: Construction, sp: SymbolicProblem, ar, params):
    """The construction the proof reads (rebuilt on the symbolic parameters), its variables, and
    the three claims' (section, start, target) thunks, in the backend's arithmetic.

    With flint, the construction is first asked to compute in flint itself (variables and
    parameters flint generators, which take ints, Fractions and floats, a float as its exact
    binary value); a specification that cannot (it mixes in sympy objects) is computed in sympy
    and converted, exactly, entry by entry (slower).  Floats never cause that fallback, and
    sympy's ring reads them exactly too (:func:`_ring`), so both routes read the same values; a
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


def _declared_in(ar, declared):
    if declared is None:
        return None
    return [None if d is None else PartialState(ar.array(d.expected), d.mask) for d in declared]


def _as_poly(R, x):
    if isinstance(x, (int, Fraction)):
        return R(x)
    return x


def _run(layers: list[Layer], S):
    return run_layers(layers, S, keep=True)


def _differing(got, expected) -> np.ndarray:
    """``got != expected`` entry by entry (each entry's own ``!=``, in numpy's loop), with each
    distinct pair of objects compared once: a state holds a polynomial replicated over tokens as
    the same object (the exact operations reuse a result for operands seen before), and the
    comparison of two polynomials costs their sizes.  Two entries that are the same object are
    equal (every exact scalar a proof holds, int, Fraction, fmpq, a FLINT or sympy polynomial,
    equals itself; floats are read as Fractions before).  Arrays that are not two object arrays
    of one shape are compared by numpy as they are."""
    if not (isinstance(got, np.ndarray) and isinstance(expected, np.ndarray) and got.dtype == object
            and expected.dtype == object and got.shape == expected.shape):
        return np.not_equal(got, expected, dtype=bool)
    g, e = got.reshape(-1), expected.reshape(-1)
    pg, pe = ops.addresses(g), ops.addresses(e)  # both arrays hold their entries alive: ids unique
    out = np.zeros(g.shape, dtype=bool)
    cand = np.flatnonzero(pg != pe)
    if cand.size:
        pairs = np.empty(cand.size, dtype=[("g", np.uintp), ("e", np.uintp)])
        pairs["g"], pairs["e"] = pg[cand], pe[cand]
        _, first, inv = np.unique(pairs, return_index=True, return_inverse=True)
        rep = cand[first]
        out[cand] = np.not_equal(g[rep], e[rep], dtype=bool)[np.asarray(inv).reshape(-1)]
    return out.reshape(got.shape)


def _first_mismatch(got, expected):
    """The first entry (in row-major order) where the two states differ, and the difference;
    the comparison runs entry by entry in numpy's loop (each entry's own ``!=``; each distinct
    pair of objects once, :func:`_differing`)."""
    try:
        differ = _differing(got, expected)
    except (TypeError, ValueError):  # an entry whose != is not a bool: one by one below
        differ = None
    if differ is not None:
        # a flagged entry is a mismatch only if the difference is nonzero: ``!=`` between exact
        # types of different kinds (a sympy ring constant, whose coefficients are FLINT fmpq, and
        # a Fraction) says "differ" for equal values
        for h in np.flatnonzero(differ).tolist():
            idx = tuple(int(i) for i in np.unravel_index(h, expected.shape))
            diff = got[idx] - expected[idx]
            if not _is_zero(diff):
                return idx, diff
        return None, None
    for idx in np.ndindex(expected.shape):
        g, e = got[idx], expected[idx]
        if g is not e and not (g == e) and not _is_zero(g - e):
            return idx, g - e
    return None, None


def _is_zero(x) -> bool:
    """An exact difference is zero (polynomial, fmpq, Fraction, int: each one's own ``== 0``)."""
    r = x == 0
    return r is True or (isinstance(r, (bool, np.bool_)) and bool(r))


def find_counterexample(R, diff, got, expected, names, tries: int = 64, seed: int = 0) -> Counterexample | None:
    """A rational point where the nonzero polynomial ``diff`` does not vanish
    (Schwartz-Zippel: random integers from a range larger than the degree)."""
    diff = _as_poly(R, diff)
    got, expected = _as_poly(R, got), _as_poly(R, expected)
    support = [i for i in range(R.ngens) if any(m[i] for m in diff.monoms())]
    rng = random.Random(seed)
    deg = max((sum(m) for m in diff.monoms()), default=0)
    for t in range(tries):
        span = max(3, 2 * deg + 1) * (1 + t // 16)
        vals = [0] * R.ngens
        for i in support:
            vals[i] = rng.randint(-span, span)
        if diff(*vals) != 0:
            return Counterexample({names[i]: str(Fraction(vals[i])) for i in support},
                                  str(Fraction(int(got(*vals).numerator), int(got(*vals).denominator))),
                                  str(Fraction(int(expected(*vals).numerator), int(expected(*vals).denominator))))
    return None  # pragma: no cover - unreachable for a nonzero polynomial


def _same_stack(a: Construction, b: Construction) -> bool:
    """The two constructions hold exactly the same layers in every section."""
    return all(len(getattr(a, sec)) == len(getattr(b, sec)) and
               all(same_layer(x, y) for x, y in zip(getattr(a, sec), getattr(b, sec)))
               for sec in ("prologue", "body", "epilogue"))


def _truncate(s: str, n: int = RESIDUAL_CHARS) -> str:
    return s if len(s) <= n else s[:n] + f" ... ({len(s)} chars)"


def _symbolic_spec(con: Construction, symbolic: bool, sections) -> tuple[str, ...]:
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


def _declared_states(con: Construction, v: dict, sec: str, n_layers: int) -> list[PartialState | None] | None:
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


def _first_masked_mismatch(got, want: PartialState):
    for idx in zip(*np.nonzero(want.mask)):
        diff = got[idx] - want.expected[idx]
        if not (diff == 0):
            return tuple(int(i) for i in idx), diff
    return None, None


def _first_off_declared(states, declared, target):
    """The first layer whose output differs from the state declared after it (the
    last layer: from the target): ``(layer, index, diff, declared value, previous
    declared layer)``, or None."""
    prev = -1
    last = len(states) - 1
    for i, S in enumerate(states):
        if i == last:
            j, diff = _first_mismatch(S, target)
            want = target
        elif declared[i] is None:
            continue
        else:
            j, diff = _first_masked_mismatch(S, declared[i])
            want = declared[i].expected
        if j is not None:
            return i, j, diff, want[j], prev
        prev = i
    return None


@dataclass
class _Location:
    layer: int
    by: str
    note: str = ""
    culprit: LayerMismatch | None = None


def _locate(con, spec, sec, Ls, S0, states, target, v, R, names, ref_layers, pristine, ar) -> _Location:
    """Which layer of the failing section ``sec`` to blame (module docstring); ``states`` and
    ``S0`` are in the backend ``ar``'s arithmetic, reports are converted to sympy."""
    n, lay = len(Ls), con.layout
    own = getattr(spec, sec)
    declared = _declared_in(ar, _declared_states(spec, v, sec, n) if n > 1 and len(own) == n else None)
    why_not = "no intermediate states declared"
    if declared is not None:
        # guard: the construction's own layers (as built) must produce the declared states
        P = pristine()
        P = getattr(P, sec) if P is not None else None
        if P is not None and len(P) == n and not all(same_layer(a, b) for a, b in zip(P, Ls)):
            pst = _run(ar.layers(P[:-1]), S0)
            for i, S in enumerate(pst):
                j, _ = (None, None) if declared[i] is None else _first_masked_mismatch(S, declared[i])
                if j is not None:
                    why_not = (f"declared intermediate states not used: the construction's own {sec} layers "
                               f"do not produce the state declared after {sec} layer {i} (at {lay.describe(*j)})")
                    declared = None
                    break
    ref_li = ref_j = None
    if ref_layers is not None and ref_layers[sec] and len(ref_layers[sec]) == n:
        for li, (a, b) in enumerate(zip(states, _run(ar.layers(ref_layers[sec]), S0))):
            j, _ = _first_mismatch(a, b)
            if j is not None:
                ref_li, ref_j = li, j
                break
    if declared is not None:
        i, j, diff, want, prev = _first_off_declared(states, declared, target)
        region, entry = lay.locate(*j)
        sdiff = ar.to_sympy(diff)
        culprit = LayerMismatch(region, entry, tuple(int(t) for t in j), _truncate(str(_as_poly(R, sdiff).as_expr())),
                                find_counterexample(R, sdiff, ar.to_sympy(states[i][j]), ar.to_sympy(want), names))
        note = (f"located by the declared intermediate states: {sec} layer {i} is the first layer whose output "
                f"differs from the state declared after it, at {lay.describe(*j)}")
        if prev < i - 1:
            note += (f"; no state is declared after {sec} layers {prev + 1}..{i - 1}: the culprit is one of "
                     f"{sec} layers {prev + 1}..{i}")
        if ref_li is not None and (ref_li, ref_j) != (i, j):
            undeclared = ref_li < n - 1 and declared[ref_li] is not None and not declared[ref_li].mask[ref_j]
            note += (f" (the first layer differing from the construction's own layer is {sec} layer {ref_li}, at "
                     f"{lay.describe(*ref_j)}{', an undeclared entry' if undeclared else ''})")
        return _Location(i, LOCATED_STATES, note, culprit)
    if ref_li is not None:
        note = (f"first layer whose output differs from the construction's own layer: {sec} layer {ref_li}, "
                f"at {lay.describe(*ref_j)}")
        if n > 1:
            note += f"; {why_not}: this is where the first difference appears, not necessarily the culprit layer"
        return _Location(ref_li, LOCATED_OWN if n > 1 else LOCATED_ONLY, note)
    if n <= 1:
        return _Location(0, LOCATED_ONLY)
    return _Location(n - 1, LOCATED_LAST,
                     f"{why_not}: located where the residual appears ({sec} layer {n - 1}, the section's last "
                     f"layer), not necessarily the culprit layer")


def prove(con: Construction, *, symbolic: bool = True,
          sections: dict[str, list[Layer]] | None = None,
          reference: Construction | None = None, backend: str = "flint") -> ProofResult:
    """Prove ``con`` exactly (see the module docstring).

    ``backend``: the arithmetic of the layers' symbolic forward, ``"flint"`` (python-flint's
    ``fmpq_mpoly``, C; the default) or ``"sympy"`` (sympy's sparse ring); both exact, the
    specification and every report are sympy's either way (``verify/flint_backend.py``).

    ``symbolic``: replace the construction's ``symbolic_params`` (e.g. the
    step size) by fresh symbols, so the proof holds for every value.  That
    proof is about the layers the builder makes on the symbols; it stands for
    ``con`` only where those layers, evaluated at ``con``'s parameters, are
    exactly ``con``'s own (:func:`symbolic_cover`; a builder may branch on a
    value).  Where they differ, ``con``'s own layers are proved at the concrete
    parameters instead; ``ProofResult.symbolic_cover`` says which happened.

    Floats anywhere (weights, specification, parameters) are read as their
    exact binary values on either backend (:func:`exact_float`); a non-finite
    or complex number is refused (:class:`FloatRefused`).
    ``sections``: layers to prove instead of the construction's own (e.g. a
    user's weight file), keyed ``prologue``/``body``/``epilogue``; the
    specification (states, step, parameters) stays the construction's.

    When a section fails, the blamed layer is the first whose output differs
    from the construction's declared intermediate state (when it declares
    them), else the first layer whose output differs from the construction's
    own layer on the same symbolic input (when ``sections`` or ``reference``
    is given), else the section's last layer (``Failure.located_by``).
    The declared intermediate states only *locate* a failure, they prove
    nothing, so they are not proved here (that would triple the cost of a
    proof): :func:`prove_intermediate_states` proves them (the tests do, for
    every construction that declares them), and a failure is blamed on them
    only where the construction's own layers reproduce them.
    """
    with _collector_paused():
        keep: dict = {}
        result = _prove(con, symbolic, sections, reference, backend, keep)
        if not result.symbolic_params:
            return result
        params = tuple(result.symbolic_params)
        differ = _cover_text(con, params, symbolic_cover(con, keep["layers"], params, keep["ngens"]),
                             keep.pop("spec", None))
        if differ.startswith("the layers rebuilt"):
            result.symbolic_cover = differ
            return result
        concrete = _prove(con, False, sections, reference, backend, {})
        concrete.symbolic_cover = (f"{differ}: the symbolic proof does not cover the construction, so its own "
                                   f"layers and specification were proved at the concrete parameters (for these "
                                   f"values only)")
        return concrete


def _cover_text(con: Construction, params, layers_differ: str | None, memo=None) -> str:
    """What the symbolic proof covers: "the layers rebuilt on symbolic ... equal the
    construction's own ... and so does the specification ..." when both checks pass
    (:func:`symbolic_cover`, :func:`specification_cover`), else the first difference, starting
    "the layers ..., differ" or "the specification ..., differs"."""
    names, at = ", ".join(params), _param_text(con, params)
    if layers_differ is not None:
        return f"the symbolic build's layers (on {names}), at {at}, differ from the construction's own ({layers_differ})"
    spec_differ = specification_cover(con, params, memo)
    if spec_differ is not None:
        return (f"the symbolic build's specification (on {names}), at {at}, differs from the construction's own "
                f"({spec_differ})")
    return (f"the layers rebuilt on symbolic {names} equal the construction's own at {at}, and so does the "
            f"specification ({', '.join(SPEC_OUTPUTS)}, compared as polynomials)")


def _param_text(con: Construction, params) -> str:
    return ", ".join(f"{p} = {con.params.get(p)}" for p in params)


def _exact_value(x, positions: dict[int, Fraction]) -> Fraction | None:
    """The exact value of a layer entry with each parameter generator (``positions``: generator
    index -> value) set to its value: an int, Fraction, float (its binary value), fmpq, or a
    polynomial (flint's, wrapped or not, or sympy's ring element) in the parameter generators
    only; None for anything else (a polynomial in another generator, an unknown type)."""
    if type(x) is int or isinstance(x, Fraction):
        return Fraction(x)
    q = exact_float(x)
    if q is not None:
        return q
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return Fraction(int(x))
    terms = None
    if hasattr(x, "p") and type(x).__name__ == "FPoly":
        x = x.p
    tname = type(x).__name__
    if tname == "fmpq":
        return Fraction(int(x.p), int(x.q))
    if tname == "fmpq_mpoly":
        terms = x.to_dict().items()
    elif tname == "PolyElement":
        terms = x.items()
    if terms is None:
        try:
            return Fraction(x)
        except (TypeError, ValueError):
            return None
    from .flint_backend import fq

    total = Fraction(0)
    for monom, c in terms:
        term = Fraction(int(fq(c).p), int(fq(c).q))
        for i, e in enumerate(monom):
            e = int(e)
            if not e:
                continue
            if i not in positions:
                return None  # a generator that is not a parameter: not a constant weight
            term *= positions[i] ** e
        total += term
    return total


def _param_values(con: Construction, params) -> dict[str, Fraction] | str:
    """``con``'s concrete parameters as exact Fractions (a float: its binary value), or the
    reason one is not an exact number."""
    values = {}
    for p in params:
        v = con.params.get(p)
        q = exact_float(v) if v is not None else None
        if q is None:
            try:
                q = Fraction(v) if v is not None and not isinstance(v, str) else None
            except (TypeError, ValueError):
                q = None
        if q is None:
            return f"parameter {p} = {v!r} is not an exact number"
        values[p] = q
    return values


def symbolic_cover(con: Construction, layers: dict, params: tuple[str, ...], ngens: int) -> str | None:
    """Where the symbolic layers (``layers``: section -> layers built on the parameter generators,
    the last ``len(params)`` of ``ngens``) evaluated at ``con``'s concrete parameters differ from
    ``con``'s own layers ("body layer 0 W_in[1,2]: ..."); None when they are exactly the same
    (a builder that branches on a parameter's value, ``if eta == 1/16``, builds other layers on
    a symbol than at the value)."""
    values = _param_values(con, params)
    if isinstance(values, str):
        return values
    positions = {ngens - len(params) + i: values[p] for i, p in enumerate(params)}
    for sec in ("prologue", "body", "epilogue"):
        mine, theirs = list(layers[sec]), list(getattr(con, sec))
        if len(mine) != len(theirs):
            return f"{sec}: {len(mine)} layers, the construction's own {len(theirs)}"
        for li, (a, b) in enumerate(zip(mine, theirs)):
            where = f"{sec} layer {li}"
            if a.kind != b.kind or a.config() != b.config():
                return f"{where}: {a.kind} {a.config()} against {b.kind} {b.config()}"
            A, B = a.arrays(), b.arrays()
            if A.keys() != B.keys():
                return f"{where}: arrays {sorted(A)} against {sorted(B)}"
            for name in A:
                X, Y = np.asarray(A[name], dtype=object), np.asarray(B[name], dtype=object)
                if X.shape != Y.shape:
                    return f"{where} {name}: shape {X.shape} against {Y.shape}"
                for flat in np.flatnonzero(ops.addresses(X) != ops.addresses(Y)).tolist():
                    ix = np.unravel_index(flat, X.shape)
                    x, y = _exact_value(X[ix], positions), _exact_value(Y[ix], {})
                    if x is None or y is None or x != y:
                        entry = ",".join(str(int(i)) for i in ix)
                        return (f"{where} {name}[{entry}]: {x if x is not None else X[ix]} at the concrete "
                                f"parameters, the construction's own {y if y is not None else Y[ix]}")
    return None


#: what :func:`specification_cover` compares, in this order (``docs``: the symbolic proof's cover)
SPEC_OUTPUTS = ("input_state(v)", "state(v)", "step(v)", "state(step(v))", "final_state(v)",
                "intermediate_states(v, section)")


def specification_cover(con: Construction, params: tuple[str, ...], memo=None) -> str | None:
    """Where the specification rebuilt on symbolic ``params`` (``con.rebuild(**symbols)``),
    with the symbols then set to ``con``'s concrete parameters, differs from ``con``'s own
    specification ("state(step(v))[3,1]: ... against ..."); None when every output the proofs
    read is exactly the same polynomial in the problem's variables (:data:`SPEC_OUTPUTS`).

    The counterpart of :func:`symbolic_cover` for the other side of the identities: a
    ``step`` (``state``, ``final_state``, ``intermediate_states``) that branches on a
    parameter's value (``if self.params['eta'] == 1/16``) computes something else on a symbol
    than at the value, and a proof of the symbolic build says nothing about ``con``'s claim
    either.  Both sides are computed on the same fresh
    variables (the symbolic side with one more generator per parameter, then substituted with
    the exact value) and compared as polynomials: in the grouped ring of
    ``verify/token_groups.py`` where the construction declares token groups and an abstract
    evaluation bounds every monomial of both sides to one group, or to a pivot group and one
    other (the substitution is then injective on their difference), else in flint's full ring, else in sympy's; a
    specification none can compute is reported as differing (so the caller proves ``con`` at
    its concrete values).

    ``memo``: ``(flint context, encoding, outputs)`` from the grouped proof just run
    (:func:`grouped_proof`: the symbolic build's ``input_state(v)``, ``state(v)``, ``step(v)``,
    ``state(step(v))``, ``final_state(v)``, computed by ``con.rebuild`` on the parameter
    generators and the grouped variables of that context); used for the symbolic side only in
    the grouped ring of that very context (the same generators, so the same polynomials), the
    outputs it lacks (and the declared states) computed here."""
    values = _param_values(con, params)
    if isinstance(values, str):
        return values
    err = None
    for route in (("grouped",) if con.token_groups else ()) + ("flint", "sympy"):
        try:
            setup = _cover_ring(route, con, params, values)
            if setup is None:
                continue
            v, pgens, ar, sub = setup
            reuse = memo[2] if route == "grouped" and memo is not None and memo[0] is ar.ctx else None
            d = _spec_compare(_spec_outputs(con, v, con), _spec_outputs(con.rebuild(**pgens), v, con, reuse), ar, sub)
            if d is None or route != "grouped":
                return d
            # a real difference (phi(F) != 0 implies F != 0): reported in the problem's own variables
        except FloatRefused:
            raise
        except Exception as e:  # noqa: BLE001 - this ring cannot compute it: the next; none: "differs"
            err = e
    return f"the specification could not be compared ({type(err).__name__}: {_truncate(str(err), 200)})"


def _cover_ring(route: str, con: Construction, params, values):
    """``(variables, parameter symbols, arithmetic, substitution)`` of one route of
    :func:`specification_cover`; None where the grouped ring does not apply."""
    import flint

    if route == "grouped":
        import itertools

        from .flint_backend import FlintRing, FPoly
        from .token_groups import GroupedProblem, abstract_variables, max_arity, pivoted

        groups = tuple(con.token_groups)
        av = abstract_variables(con.variables, groups)
        for encoding in (1, 2):  # the pair encoding where an entry needs a pivot group
            gp = GroupedProblem(con.variables, params, groups, entry_name, display_name, encoding=encoding)
            pgens = {p: FPoly(g) for p, g in gp.params.items()}
            need = 1
            for a, b in itertools.zip_longest(_spec_outputs(con, av, con), _spec_outputs(con.rebuild(**pgens), av, con)):
                sides = [x[2] if x[1] == "array" else x[2][1] for x in (a, b)
                         if x is not None and x[1] in ("array", "declared") and x[2] is not None]
                if any(max_arity(x) > 1 for x in sides):
                    if not pivoted(*sides):
                        return None
                    need = 2
            if need <= encoding:
                break
        ar = FlintRing(None, gp.ctx)
        v = {k: np.vectorize(FPoly, otypes=[object])(a) if a.size else a for k, a in gp.v.items()}
        ngens = len(gp.names)
    elif route == "flint":
        from .flint_backend import FlintRing

        sp = SymbolicProblem(con.variables, params)
        ar = FlintRing(sp.R)
        v, pgens = sp.arrange(ar.gens)
        ngens = len(sp.names)
    else:
        sp = SymbolicProblem(con.variables, params)
        ar, (v, pgens) = _SympyArith(sp.R), (sp.v, sp.params)
        R = sp.R
        at = [(pgens[p], R.domain(values[p].numerator, values[p].denominator)) for p in params]
        return v, pgens, ar, (lambda x: x.subs(at) if getattr(x, "ring", None) is R else x)
    at = {ngens - len(params) + i: flint.fmpq(values[p].numerator, values[p].denominator)
          for i, p in enumerate(params)}  # the parameters: the last generators; by index (by name: 35x slower)
    return v, pgens, ar, (lambda x: x.subs(at) if isinstance(x, flint.fmpq_mpoly) else x)


def _spec_outputs(c: Construction, v: dict, con: Construction, memo: dict | None = None):
    """``(label, kind, payload)`` for every specification output the proofs read, computed by
    ``c`` on ``v`` (sections sized by ``con``'s layers), in :data:`SPEC_OUTPUTS` order: kind
    ``array`` (a state), ``keys`` (the variables ``step`` returns) or ``declared`` (one
    declared intermediate state: None or ``(mask, expected on the mask, 0 elsewhere)``).
    ``memo``: outputs already computed by ``c`` on ``v`` (by label, :func:`section_claims`'s
    record), taken as they are."""
    memo = memo or {}

    def out(label, f):
        return memo[label] if label in memo else f()

    yield "input_state(v)", "array", np.asarray(out("input_state(v)", lambda: c.input_state(v)), dtype=object)
    yield "state(v)", "array", np.asarray(out("state(v)", lambda: c.state(v)), dtype=object)
    yield "final_state(v)", "array", np.asarray(out("final_state(v)", lambda: c.final_state(v)), dtype=object)
    nxt = out("step(v)", lambda: c.step(v))
    yield "step(v)", "keys", sorted(map(str, nxt))
    for k in sorted(nxt, key=str):
        yield f"step(v)[{k!r}]", "array", np.asarray(nxt[k], dtype=object)
    yield "state(step(v))", "array", np.asarray(out("state(step(v))", lambda: c.state(nxt)), dtype=object)
    for sec in ("prologue", "body", "epilogue"):
        ds = _declared_states(c, v, sec, len(getattr(con, sec)))
        what = f"intermediate_states(v, {sec!r})"
        yield what, "keys", "none" if ds is None else f"{len(ds)} entries"
        for i, d in enumerate(ds or ()):
            m = None if d is None else np.asarray(d.mask)
            yield f"{what}[{i}]", "declared", None if d is None else (m, np.where(m, d.expected, 0))


def _spec_compare(mine, theirs, ar, sub) -> str | None:
    """The first output where ``theirs`` (the symbolic build's), at the concrete parameters
    (``sub``), differs from ``mine``; None when none does."""
    import itertools

    for a, b in itertools.zip_longest(mine, theirs):
        if a is None or b is None or a[:2] != b[:2]:
            return (f"{(b or a)[0]}: the symbolic build's specification has other outputs than the "
                    f"construction's own")
        what, kind, x, y = a[0], a[1], b[2], a[2]
        if kind == "keys":
            if x != y:
                return f"{what}: {x} against the construction's own {y}"
            continue
        if kind == "declared":
            if (x is None) != (y is None):
                return f"{what}: {'none' if x is None else 'declared'} against the construction's own " \
                       f"{'none' if y is None else 'declared'}"
            if x is None:
                continue
            if not np.array_equal(x[0], y[0]):
                return f"{what}: other declared entries than the construction's own"
            x, y, what = x[1], y[1], f"{what} (declared entries)"
        d = _entry_differs(what, ar.array(y), ar.array(x), sub)
        if d:
            return d
    return None


def _entry_differs(what: str, a, b, sub) -> str | None:
    """The first entry where ``b`` at the concrete parameters differs from ``a``.  An entry equal
    as a polynomial before the substitution holds no parameter generator (``a`` holds none), so
    only the others are substituted (the substitution is most of the cost)."""
    if a.shape != b.shape:
        return f"{what}: shape {b.shape} against the construction's own {a.shape}"
    af, bf = a.reshape(-1), b.reshape(-1)
    try:
        differ = np.flatnonzero(_differing(af, bf)).tolist()
    except (TypeError, ValueError):
        differ = range(af.size)
    seen: set = set()  # (b's entry, a's entry) pairs found equal: the same objects, the same verdict
    subbed: dict = {}  # b's entries substituted, by object (a value replicated over tokens: once)
    for h in differ:
        bx, y = bf[h], af[h]  # both alive in bf, af: their ids are unique while the loop runs
        key = (id(bx), id(y))
        if key in seen:
            continue
        x = subbed.get(id(bx))
        if x is None:
            x = subbed[id(bx)] = sub(bx)
        if x is y or _is_zero(x - y):
            seen.add(key)
            continue
        ix = np.unravel_index(h, a.shape) if a.shape else ()
        entry = ",".join(str(int(i)) for i in ix)
        return (f"{what}[{entry}]: {_truncate(str(x), 120)} at the concrete parameters, the construction's "
                f"own {_truncate(str(y), 120)}")
    return None


@contextlib.contextmanager
def _collector_paused():
    """Python's cyclic garbage collector off for the duration of a proof (and back on after,
    if it was on).  A proof allocates millions of acyclic objects (polynomials, object arrays)
    that the collector would re-scan many times over for nothing: 10-15% of a proof at N=64,
    D=16 (``bench/bench_proof.py``).  Reference counting still frees everything as usual."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _prove(con, symbolic, sections, reference, backend, keep: dict) -> ProofResult:
    """The proof; ``keep`` gets the layers proved (``layers``, by section) and the number of
    generators of their ring (``ngens``), for :func:`symbolic_cover`."""
    _load_sympy()
    t0 = time.perf_counter()
    params = _symbolic_spec(con, symbolic, sections)
    if backend == "flint" and con.token_groups:
        grouped = grouped_proof(con, params, sections, t0, keep)
        if grouped is not None:
            return grouped
    sp = SymbolicProblem(con.variables, params)
    ar = proof_arithmetic(backend, sp.R)
    spec, v, claims = proof_specification(con, sp, ar, params)
    own = {"prologue": spec.prologue, "body": spec.body, "epilogue": spec.epilogue}
    keep["layers"], keep["ngens"] = own, len(sp.names)
    layers = sections if sections is not None else own
    ref_layers = own if reference is not None or sections is not None else None
    R = sp.R
    offsets = {"prologue": 0, "body": len(layers["prologue"]),
               "epilogue": len(layers["prologue"]) + len(layers["body"])}
    cache: dict = {}

    def pristine():
        """The construction as its builder makes it (None when unknown)."""
        if "p" not in cache:
            try:
                cache["p"] = spec if params else (con.rebuild(**con.params) if con.rebuild else None)
            except Exception:  # noqa: BLE001 - only a guard; without it the location falls back
                cache["p"] = None
        return cache["p"]

    result = ProofResult(con.name, True, 0.0, symbolic_params=list(params), backend=ar.name)
    for sec, start, target in claims:
        Ls = layers[sec]
        if sec == "body" and not Ls:
            result.sections[sec] = True
            continue
        S0 = start()
        # only the section's output is kept: the states between its layers (as large as the
        # output, and one per layer) are recomputed when a failure has to be located
        got = run_layers(ar.layers(Ls), S0) if Ls else S0
        expected = target()
        if got.shape != expected.shape:
            raise ValueError(f"{sec}: layers produce a state of shape {got.shape}, "
                             f"the specification {expected.shape}")
        result.entries_checked += int(np.prod(expected.shape))
        idx, diff = _first_mismatch(got, expected)
        result.sections[sec] = idx is None
        if idx is None:
            S0 = got = expected = None  # the next section's states are built without these
            continue
        result.ok = False
        loc = (_locate(con, spec, sec, Ls, S0, _run(ar.layers(Ls), S0), expected, v, R, sp.names, ref_layers,
                       pristine, ar)
               if Ls else _Location(0, LOCATED_ONLY))
        region, entry = con.layout.locate(*idx)
        sdiff = ar.to_sympy(diff)
        result.failure = Failure(
            section=sec, layer=offsets[sec] + loc.layer, layer_in_section=loc.layer,
            region=region, entry=entry, state_index=tuple(int(i) for i in idx),
            residual=_truncate(str(_as_poly(R, sdiff).as_expr())),
            counterexample=find_counterexample(R, sdiff, ar.to_sympy(got[idx]), ar.to_sympy(expected[idx]),
                                               sp.names),
            note=loc.note, located_by=loc.by, culprit=loc.culprit)
        break
    result.seconds = time.perf_counter() - t0
    return result


def grouped_proof(con: Construction, params: tuple[str, ...], sections, t0: float,
                   keep: dict | None = None) -> ProofResult | None:
    """The proof in the substituted ring of ``verify.token_groups`` (grouped variables, one
    generator per slot, or two and a pivot tag: ``GroupedProblem``'s encodings): a ProofResult
    when every section is proved there, None when the substitution does not apply (an entry of
    some section may have monomials beyond both encodings, the abstract evaluation cannot run,
    the groups are malformed) or a section differs: then the full proof runs, and makes the
    report (``keep["grouped"]`` says which)."""
    from .flint_backend import FlintRing, FPoly
    from .token_groups import ENCODINGS, GroupedProblem, abstract_variables, max_arity, pivoted

    groups = tuple(con.token_groups)
    try:
        av = abstract_variables(con.variables, groups)
    except ValueError:
        return None
    try:
        for encoding in (1, 2):
            gp = GroupedProblem(con.variables, params, groups, entry_name, display_name, encoding=encoding)
            ar = FlintRing(None, gp.ctx)
            spec = con.rebuild(**{p: FPoly(g) for p, g in gp.params.items()}) if params else con
            own = {"prologue": spec.prologue, "body": spec.body, "epilogue": spec.epilogue}
            layers = sections if sections is not None else own
            # 1. every entry of both sides, abstractly, through the layers proved below (the same
            # weight objects): at most one group per monomial (encoding 1), else a pivot group and
            # at most one other (encoding 2)
            need = 1
            for sec, start, target in section_claims(spec, av):
                Ls = ar.layers(layers[sec])
                if sec == "body" and not Ls:
                    continue
                want = target()
                if encoding == 1 and max_arity(want) > 1:
                    need = 2  # the specification alone rules encoding 1 out: no need to run the layers
                    break
                got = run_layers(Ls, start()) if Ls else start()
                if max(max_arity(got), max_arity(want)) > 1:
                    if not pivoted(got, want):
                        if keep is not None:
                            keep["grouped"] = f"not used: the {sec} has an entry beyond both encodings"
                        return None
                    need = 2
            if need <= encoding:
                break
        fv = {k: np.vectorize(FPoly, otypes=[object])(a) if a.size else a for k, a in gp.v.items()}
        if keep is not None:
            keep["layers"], keep["ngens"] = own, len(gp.names)
        # 2. the identities in the substituted ring
        # (the specification's outputs recorded: the specification cover reuses them, computed in
        # this ring, on these symbols, by the same code)
        result = ProofResult(con.name, True, 0.0, symbolic_params=list(params), backend=ar.name)
        record: dict = {}
        for sec, start, target in section_claims(spec, fv, record):
            Ls = ar.layers(layers[sec])
            if sec == "body" and not Ls:
                result.sections[sec] = True
                continue
            S0 = ar.array(start())
            got = run_layers(Ls, S0) if Ls else S0
            expected = ar.array(target())
            if got.shape != expected.shape or _first_mismatch(got, expected)[0] is not None:
                if keep is not None:
                    keep["grouped"] = f"differs: {sec} (encoding {encoding})"
                return None
            result.sections[sec] = True
            result.entries_checked += int(np.prod(expected.shape))
    except Exception as e:  # noqa: BLE001 - anything the substituted route cannot do, the full proof does
        if keep is not None:
            keep["grouped"] = f"not used: {type(e).__name__}"
        return None
    if keep is not None and params and sections is None:
        keep["spec"] = (gp.ctx, encoding, record)
    result.ring = (f"grouped substitution ({', '.join(groups)} by leading index: {gp.n_groups} groups, "
                   f"{len(gp.names)} generators, encoding {encoding}: {ENCODINGS[encoding]}; "
                   f"verify/token_groups.py)")
    result.seconds = time.perf_counter() - t0
    return result


def prove_intermediate_states(con: Construction, *, symbolic: bool = True) -> ProofResult:
    """Prove the construction's declared intermediate states (``constructions/base.py``).

    For each section that declares them, and each pair of consecutive declared
    states (the section's start and target included, both in full), the
    construction's own layers between them take the earlier one to the later
    one on its declared entries, whatever the undeclared entries of the earlier
    one hold: those are free symbols ``undeclared[i,j]`` (i, j: state index).
    By induction the layers produce every declared state from the section's
    start, and each declared state holds all its later layers read, which is
    what makes blaming the first layer off its declared state sound.
    ``result.intermediate_states`` maps each checked section to the verdict;
    a failure names the layer, the entry and a counterexample (which may
    assign undeclared entries).
    """
    _load_sympy()
    t0 = time.perf_counter()
    params = _symbolic_spec(con, symbolic, None)
    base = SymbolicProblem(con.variables, params)
    spec0 = con.rebuild(**base.params) if params else con
    result = ProofResult(con.name, True, 0.0, symbolic_params=list(params))
    # one extra generator per entry that some declared state leaves undeclared (the masks do
    # not depend on v: read them in the problem's own ring)
    slots: set[tuple[int, int]] = set()
    any_declared = False
    for sec in ("prologue", "body", "epilogue"):
        for d in _declared_states(spec0, base.v, sec, len(getattr(spec0, sec))) or []:
            if d is not None:
                any_declared = True
                slots.update((int(i), int(j)) for i, j in zip(*np.nonzero(~d.mask)))
    if not any_declared:
        result.seconds = time.perf_counter() - t0
        return result
    free = "undeclared"
    while free in con.variables or free in params:
        free += "_"
    slots_sorted = sorted(slots)
    names = base.names + [entry_name(free, ij) for ij in slots_sorted]
    R, *gens = _ring(names)  # generators by position, as SymbolicProblem
    to_new = dict(zip(base.gens, gens))
    v = {}
    for k, a in base.v.items():
        b = np.empty(a.shape, dtype=object)
        for ix in np.ndindex(*a.shape):
            b[ix] = to_new[a[ix]]
        v[k] = b
    spec = con.rebuild(**{p: to_new[g] for p, g in base.params.items()}) if params else con
    if params:  # the symbolic layers must be the construction's own at its parameters (as in prove)
        differ = _cover_text(con, params, symbolic_cover(
            con, {sec: getattr(spec, sec) for sec in ("prologue", "body", "epilogue")}, params, len(base.names)))
        if not differ.startswith("the layers rebuilt"):
            concrete = prove_intermediate_states(con, symbolic=False)
            concrete.symbolic_cover = (f"{differ}: its own layers and intermediate states were proved at the "
                                       f"concrete parameters")
            return concrete
        result.symbolic_cover = differ
    U = np.zeros(con.layout.shape, dtype=object)
    for (i, j), g in zip(slots_sorted, gens[len(base.names):]):
        U[i, j] = g
    offset = 0
    for sec, start, target in section_claims(spec, v):
        Ls = [exact_layer(L) for L in getattr(spec, sec)]  # a float weight: its exact binary value
        declared = _declared_states(spec, v, sec, len(Ls))
        if declared is not None:
            points = ([(-1, None)] + [(i, d) for i, d in enumerate(declared) if d is not None]
                      + [(len(Ls) - 1, None)])
            ok = True
            for (p, dp), (q, dq) in zip(points, points[1:]):
                S = run_layers(Ls[p + 1:q + 1], exact_floats(start()) if dp is None
                               else np.where(dp.mask, dp.expected, U))
                if dq is None:
                    want = exact_floats(target())
                    result.entries_checked += int(np.prod(want.shape))
                    j, diff = _first_mismatch(S, want)
                else:
                    want = dq.expected
                    result.entries_checked += int(dq.mask.sum())
                    j, diff = _first_masked_mismatch(S, dq)
                if j is None:
                    continue
                ok = result.ok = False
                j = tuple(int(t) for t in j)
                region, entry = con.layout.locate(*j)
                what = f"the {sec}'s target" if dq is None else f"the state declared after {sec} layer {q}"
                frm = f"the {sec}'s start state" if dp is None else f"the state declared after {sec} layer {p}"
                result.failure = Failure(
                    section=sec, layer=offset + q, layer_in_section=q, region=region, entry=entry, state_index=j,
                    residual=_truncate(str(_as_poly(R, diff).as_expr())),
                    counterexample=find_counterexample(R, diff, S[j], want[j], names),
                    note=(f"intermediate states: the construction's own {sec} layers {p + 1}..{q} do not take {frm} "
                          f"to {what} (undeclared entries as free symbols {free}[i,j]): its intermediate_states "
                          f"or its layers are wrong"),
                    located_by=LOCATED_STATES)
                break
            result.intermediate_states[sec] = ok
            if not ok:
                break
        offset += len(Ls)
    result.seconds = time.perf_counter() - t0
    return result


def prove_identity(name: str, variables: dict[str, tuple[int, ...]], lhs: Callable[[dict], np.ndarray],
                   rhs: Callable[[dict], np.ndarray], *, params: tuple[str, ...] = (),
                   locate: Callable[[tuple], str] | None = None) -> ProofResult:
    """Prove a polynomial identity ``lhs(v) == rhs(v)`` entry by entry.

    For claims that are not a layer stack (a recursion of seed 004 Lemma 4.3,
    an equivalence of two parameterisations, ...).  ``v`` maps each variable
    (and each name in ``params``) to an exact object array (or scalar) of
    fresh ring variables.  ``lhs``/``rhs`` return arrays of the same shape.
    A failure names the entry (through ``locate`` when given), the residual
    and a rational counterexample.
    """
    _load_sympy()
    t0 = time.perf_counter()
    sp = SymbolicProblem(variables, params)
    v = dict(sp.v)
    v.update(sp.params)
    got = exact_floats(np.asarray(lhs(v), dtype=object))  # a float: its exact binary value
    expected = exact_floats(np.asarray(rhs(v), dtype=object))
    if got.shape != expected.shape:
        raise ValueError(f"{name}: the two sides have shapes {got.shape} and {expected.shape}")
    result = ProofResult(name, True, 0.0, sections={"identity": True}, symbolic_params=list(params),
                         entries_checked=int(np.prod(got.shape)) if got.shape else 1)
    g2 = got.reshape(-1) if got.shape else got.reshape(1)
    e2 = expected.reshape(-1) if expected.shape else expected.reshape(1)
    idx, diff = _first_mismatch(g2, e2)
    if idx is not None:
        full = np.unravel_index(idx[0], got.shape) if got.shape else ()
        full = tuple(int(i) for i in full)
        result.ok = False
        result.sections["identity"] = False
        result.failure = Failure(
            section="identity", layer=-1, layer_in_section=-1,
            region=locate(full) if locate else name, entry=full, state_index=full,
            residual=_truncate(str(_as_poly(sp.R, diff).as_expr())),
            counterexample=find_counterexample(sp.R, diff, g2[idx], e2[idx], sp.names))
    result.seconds = time.perf_counter() - t0
    return result


def problem_from_assignment(variables: dict[str, tuple[int, ...]], assignment: dict[str, str]) -> dict:
    """The exact problem a counterexample names: its values, every other entry 0."""
    v = {}
    for var, shape in variables.items():
        a = np.empty(shape, dtype=object)
        for ix in np.ndindex(*shape):
            a[ix] = Fraction(assignment.get(entry_name(var, ix), "0"))
        v[var] = a
    return v


def replay_counterexample(con: Construction, sections: dict[str, list[Layer]], failure: Failure):
    """Run the failing section exactly on the failure's counterexample.

    Returns ``(got, expected)`` at the failing state entry as Fractions: the
    layers' value and the specification's value (they differ)."""
    v = problem_from_assignment(con.variables, failure.counterexample.assignment)
    _, start, target = next(c for c in section_claims(con, v) if c[0] == failure.section)
    S = run_layers([exact_layer(L) for L in sections[failure.section]], start())
    idx = failure.state_index
    return Fraction(S[idx]), Fraction(target()[idx])


def replay_culprit(con: Construction, sections: dict[str, list[Layer]], failure: Failure):
    """Run the failing section exactly on the culprit's counterexample, up to the
    blamed layer (``failure.located_by == LOCATED_STATES``).

    Returns ``(got, declared)`` at the culprit's entry as Fractions: the blamed
    layer's output and the value the declared intermediate state (or, for the
    section's last layer, the target) holds there (they differ)."""
    c = failure.culprit
    v = problem_from_assignment(con.variables, c.counterexample.assignment)
    _, start, target = next(cl for cl in section_claims(con, v) if cl[0] == failure.section)
    layers = [exact_layer(L) for L in sections[failure.section]]
    li = failure.layer_in_section
    S = run_layers(layers[:li + 1], start())
    if li == len(layers) - 1:
        want = target()
    else:
        want = _declared_states(con, v, failure.section, len(layers))[li].expected
    return Fraction(S[c.state_index]), Fraction(want[c.state_index])


def check(obj) -> ProofResult:
    """Prove a catalogue item, whatever it claims: a Construction (its section
    identities, every depth), an IdentityClaim, or a WitnessClaim (its own
    certified computation)."""
    if isinstance(obj, Construction):
        return prove(obj)
    if not isinstance(obj, (IdentityClaim, WitnessClaim)) and callable(getattr(obj, "claim", None)):
        obj = obj.claim()
    if isinstance(obj, IdentityClaim):
        return prove_identity(obj.name, obj.variables, obj.lhs, obj.rhs, params=tuple(obj.params),
                              locate=obj.locate)
    if isinstance(obj, WitnessClaim):
        return obj.run()
    raise TypeError(f"not a claim: {type(obj).__name__} (a Construction, IdentityClaim or WitnessClaim)")


def run_checked(con: Construction, v: dict, k: int):
    """Run the stack exactly (``Construction.run``) on one concrete problem ``v``,
    checking the state after the prologue and after every body copy against the
    specification, and the final state.  Returns ``(final state, v after k
    steps)``; a ValueError names the first place where they differ.  (A check at
    one point, for tests and examples; the proof is :func:`prove`.)"""
    vs = [v]

    def same(a, b) -> bool:
        return a.shape == b.shape and all(Fraction(x) == Fraction(y) for x, y in zip(a.flat, b.flat))

    def on_step(j, S):
        if j:
            vs.append(con.step(vs[-1]))
        if not same(S, con.state(vs[-1])):
            raise ValueError(f"{con.name}: the state after {'the prologue' if j == 0 else f'body copy {j}'} "
                             f"differs from the specification")

    S, _ = con.run(v, k, on_step=on_step)
    if not same(S, con.final_state(vs[-1])):
        raise ValueError(f"{con.name}: the final state differs from the specification")
    return S, vs[-1]
