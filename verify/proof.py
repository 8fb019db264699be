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
"""
from __future__ import annotations

import random
import time
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from typing import Callable

import numpy as np
from sympy import QQ, Symbol
from sympy.polys.rings import ring

from constructions.base import Construction
from constructions.layers import Layer

RESIDUAL_CHARS = 300


@dataclass
class Counterexample:
    assignment: dict[str, str]  # variable -> rational "p/q"; every other variable is 0
    got: str
    expected: str


@dataclass
class Failure:
    section: str
    layer: int  # index in the whole stack (0-based)
    layer_in_section: int
    region: str
    entry: tuple[int, int]
    state_index: tuple[int, int]
    residual: str
    counterexample: Counterexample | None
    note: str = ""

    def describe(self) -> str:
        ce = ""
        if self.counterexample:
            a = ", ".join(f"{k}={v}" for k, v in self.counterexample.assignment.items()) or "all variables 0"
            ce = (f"\n  counterexample: {a} (others 0): layers give {self.counterexample.got}, "
                  f"specification {self.counterexample.expected}")
        where = (f"{self.section} fails at stack layer {self.layer} ({self.section} layer "
                 f"{self.layer_in_section}): region {self.region!r} entry {list(self.entry)} "
                 f"(state {list(self.state_index)})") if self.layer >= 0 else (
                 f"identity fails: {self.region} entry {list(self.entry)}")
        return (f"{where}\n  residual (layers - spec): {self.residual}{ce}"
                + (f"\n  {self.note}" if self.note else ""))


@dataclass
class ProofResult:
    construction: str
    ok: bool
    seconds: float
    sections: dict[str, bool] = field(default_factory=dict)
    symbolic_params: list[str] = field(default_factory=list)
    entries_checked: int = 0
    failure: Failure | None = None

    def to_json(self) -> dict:
        d = asdict(self)
        return d


def _display(name: str) -> str:
    return name if name.isidentifier() else repr(name)


def entry_name(var: str, ix: tuple[int, ...]) -> str:
    """The display name of one entry of a variable: ``A[1,2]``, ``b[0]``; a
    scalar variable is its own name.  A name that is not an identifier is
    quoted (``'x[0]'``), so no entry name can equal another entry's or a
    parameter's: bare names are identifiers, indexed names are an
    identifier or a quoted string followed by ``[``."""
    return f"{_display(var)}[{','.join(str(int(i)) for i in ix)}]" if len(ix) else _display(var)


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
        names += [_display(p) for p in params]
        self.names = names
        self.R, *gens = ring([Symbol(nm) for nm in names], QQ)
        self.gens = list(gens)
        pos = 0
        self.v = {}
        for var, shape in variables.items():
            arr = np.empty(shape, dtype=object)
            for ix in np.ndindex(*shape):
                arr[ix] = gens[pos]
                pos += 1
            self.v[var] = arr
        self.params = {p: gens[pos + i] for i, p in enumerate(params)}
        assert len(set(names)) == len(names)  # guaranteed by entry_name's grammar
        self.gen = dict(zip(names, gens))


def _as_poly(R, x):
    if isinstance(x, (int, Fraction)):
        return R(x)
    return x


def _run(layers: list[Layer], S):
    states = []
    for L in layers:
        S = L.forward(S)
        states.append(S)
    return states


def _first_mismatch(got, expected):
    for idx in np.ndindex(expected.shape):
        diff = got[idx] - expected[idx]
        if not (diff == 0):
            return idx, diff
    return None, None


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
    from constructions.weights_io import same_layer

    return all(len(getattr(a, sec)) == len(getattr(b, sec)) and
               all(same_layer(x, y) for x, y in zip(getattr(a, sec), getattr(b, sec)))
               for sec in ("prologue", "body", "epilogue"))


def _truncate(s: str, n: int = RESIDUAL_CHARS) -> str:
    return s if len(s) <= n else s[:n] + f" ... ({len(s)} chars)"


def prove(con: Construction, *, symbolic: bool = True,
          sections: dict[str, list[Layer]] | None = None,
          reference: Construction | None = None) -> ProofResult:
    """Prove ``con`` exactly (see the module docstring).

    ``symbolic``: replace the construction's ``symbolic_params`` (e.g. the
    step size) by fresh symbols, so the proof holds for every value.
    ``sections``: layers to prove instead of the construction's own (e.g. a
    user's weight file), keyed ``prologue``/``body``/``epilogue``; the
    specification (states, step, parameters) stays the construction's.  When
    it fails, the first layer whose output differs from ``reference``'s
    layer on the same symbolic input is named.
    """
    t0 = time.perf_counter()
    params = tuple(con.symbolic_params) if (symbolic and sections is None and con.rebuild) else ()
    if params and not _same_stack(con, con.rebuild(**con.params)):
        params = ()  # the layers were edited after building: prove them as they are
    sp = SymbolicProblem(con.variables, params)
    spec = con.rebuild(**sp.params) if params else con
    own = {"prologue": spec.prologue, "body": spec.body, "epilogue": spec.epilogue}
    layers = sections if sections is not None else own
    ref_layers = own if reference is not None or sections is not None else None
    R, v = sp.R, sp.v
    offsets = {"prologue": 0, "body": len(layers["prologue"]),
               "epilogue": len(layers["prologue"]) + len(layers["body"])}
    claims = [
        ("prologue", lambda: spec.input_state(v), lambda: spec.state(v)),
        ("body", lambda: spec.state(v), lambda: spec.state(spec.step(v))),
        ("epilogue", lambda: spec.state(v), lambda: spec.final_state(v)),
    ]
    result = ProofResult(con.name, True, 0.0, symbolic_params=list(params))
    for sec, start, target in claims:
        Ls = layers[sec]
        if sec == "body" and not Ls:
            result.sections[sec] = True
            continue
        S0 = start()
        states = _run(Ls, S0) if Ls else [S0]
        got = states[-1]
        expected = target()
        if got.shape != expected.shape:
            raise ValueError(f"{sec}: layers produce a state of shape {got.shape}, "
                             f"the specification {expected.shape}")
        result.entries_checked += int(np.prod(expected.shape))
        idx, diff = _first_mismatch(got, expected)
        result.sections[sec] = idx is None
        if idx is None:
            continue
        result.ok = False
        layer_in_sec = len(Ls) - 1
        note = ""
        if ref_layers is not None and ref_layers[sec] and len(ref_layers[sec]) == len(Ls):
            ref_states = _run(ref_layers[sec], S0)
            for li, (a, b) in enumerate(zip(states, ref_states)):
                j, _ = _first_mismatch(a, b)
                if j is not None:
                    layer_in_sec = li
                    note = (f"first layer whose output differs from the construction's own layer: "
                            f"{sec} layer {li}, at {con.layout.describe(*j)}")
                    break
        region, entry = con.layout.locate(*idx)
        result.failure = Failure(
            section=sec, layer=offsets[sec] + max(layer_in_sec, 0), layer_in_section=max(layer_in_sec, 0),
            region=region, entry=entry, state_index=tuple(int(i) for i in idx),
            residual=_truncate(str(_as_poly(R, diff).as_expr())),
            counterexample=find_counterexample(R, diff, got[idx], expected[idx], sp.names),
            note=note)
        break
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
    t0 = time.perf_counter()
    sp = SymbolicProblem(variables, params)
    v = dict(sp.v)
    v.update(sp.params)
    got = np.asarray(lhs(v), dtype=object)
    expected = np.asarray(rhs(v), dtype=object)
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
    start = {"prologue": con.input_state, "body": con.state, "epilogue": con.state}[failure.section](v)
    expected = {"prologue": lambda: con.state(v), "body": lambda: con.state(con.step(v)),
                "epilogue": lambda: con.final_state(v)}[failure.section]()
    S = start
    for L in sections[failure.section]:
        S = L.forward(S)
    idx = failure.state_index
    return Fraction(S[idx]), Fraction(expected[idx])
