"""What a proof of weights covers: whether concrete weights are an instance of the symbolic
construction (:func:`symbolic_cover`), and whether a specification with concrete parameters is the
symbolic one's at those values (:func:`specification_cover`); :func:`proof_cover` says whether a
proof in fresh symbols covers the construction (a :class:`Cover`, read by the proof, not its text)."""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from constructions import ops
from constructions.base import Construction
from .rings import (FloatRefused, SymbolicProblem, SympyArith, declared_states, truncate, display_name,
                    entry_name, exact_float)
from .kernel import differing as _differing, is_zero as _is_zero


@dataclass(frozen=True)
class Cover:
    """Whether a proof in fresh symbols stands for the construction at its parameters (``covers``):
    its layers and its specification, rebuilt on the symbols and evaluated at the parameters, are
    exactly the construction's own; ``text`` says so, or names the first difference."""

    covers: bool
    text: str


@dataclass(frozen=True)
class SpecMemo:
    """What the grouped proof just run leaves for :func:`specification_cover`: its flint context
    (``ctx``), its ``encoding``, the symbolic build's outputs it computed (``outputs``, by label),
    its grouped ``variables`` and its ``degrees`` (degree bounds)."""

    ctx: object
    encoding: int
    outputs: dict
    variables: dict
    degrees: object


def proof_cover(con: Construction, params, layers_differ: str | None, memo: SpecMemo | None = None) -> Cover:
    """What the symbolic proof covers (:func:`symbolic_cover` found ``layers_differ``; then
    :func:`specification_cover`): covered, with "the layers rebuilt on symbolic ... equal the
    construction's own ... and so does the specification ...", or not, with the first difference
    ("the symbolic build's layers ..., differ" or "... specification ..., differs")."""
    names, at = ", ".join(params), _param_text(con, params)
    if layers_differ is not None:
        return Cover(False, f"the symbolic build's layers (on {names}), at {at}, differ from the construction's own "
                            f"({layers_differ})")
    spec_differ = specification_cover(con, params, memo)
    if spec_differ is not None:
        return Cover(False, f"the symbolic build's specification (on {names}), at {at}, differs from the "
                            f"construction's own ({spec_differ})")
    return Cover(True, f"the layers rebuilt on symbolic {names} equal the construction's own at {at}, and so does the "
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
                if tuple(np.shape(A[name])) != tuple(np.shape(B[name])):
                    return f"{where} {name}: shape {np.shape(A[name])} against {np.shape(B[name])}"
                for ix, X, Y in _weight_pairs(A[name], B[name]):
                    x, y = _exact_value(X, positions), _exact_value(Y, {})
                    if x is None or y is None or x != y:
                        entry = ",".join(str(int(i)) for i in ix)
                        return (f"{where} {name}[{entry}]: {x if x is not None else X} at the concrete "
                                f"parameters, the construction's own {y if y is not None else Y}")
    return None


def _weight_pairs(a, b):
    """``(index, a's entry, b's entry)`` wherever two weights of one shape may differ: entries that
    are not the same object (dense), or, where either weight is sparse
    (``constructions.sparse.SparseMatrix``), every position either stores (the others are 0 in
    both), read from the entries without forming a dense array."""
    from constructions.sparse import SparseMatrix

    if isinstance(a, SparseMatrix) or isinstance(b, SparseMatrix):
        ea, eb = ({(i, j): v for i, j, v in (w if isinstance(w, SparseMatrix) else SparseMatrix.from_dense(w)).entries()}
                  for w in (a, b))
        for ix in sorted(ea.keys() | eb.keys()):
            x, y = ea.get(ix, 0), eb.get(ix, 0)
            if x is not y:
                yield ix, x, y
        return
    X, Y = np.asarray(a, dtype=object), np.asarray(b, dtype=object)
    for flat in np.flatnonzero(ops.addresses(X) != ops.addresses(Y)).tolist():
        ix = np.unravel_index(flat, X.shape)
        yield ix, X[ix], Y[ix]


#: what :func:`specification_cover` compares, in this order (``docs``: the symbolic proof's cover)
SPEC_OUTPUTS = ("input_state(v)", "state(v)", "step(v)", "state(step(v))", "final_state(v)",
                "intermediate_states(v, section)")


def specification_cover(con: Construction, params: tuple[str, ...], memo: SpecMemo | None = None) -> str | None:
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
    ``verify/prover/token_groups.py`` where the construction declares token groups and an abstract
    evaluation bounds every monomial of both sides to one group, or to a pivot group and one
    other (the substitution is then injective on their difference), else in flint's full ring, else in sympy's; a
    specification none can compute is reported as differing (so the caller proves ``con`` at
    its concrete values).

    ``memo``: a :class:`SpecMemo` (flint context, encoding, outputs, variables, degree bounds) from
    the grouped proof just run
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
            setup = _cover_ring(route, con, params, values, None if memo is None else memo.degrees)
            if setup is None:
                continue
            v, pgens, ar, sub = setup
            same = route == "grouped" and memo is not None and memo.ctx is ar.ctx
            reuse = memo.outputs if same else None
            if same:  # the proof's own variables (the same generators, the same objects: what the
                v = memo.variables  # two builds share is computed once)
            d = _spec_compare(_spec_outputs(con, v, con), _spec_outputs(con.rebuild(**pgens), v, con, reuse), ar, sub)
            if d is None or route != "grouped":
                return d
            # a real difference (phi(F) != 0 implies F != 0): reported in the problem's own variables
        except FloatRefused:
            raise
        except Exception as e:  # noqa: BLE001 - this ring cannot compute it: the next; none: "differs"
            err = e
    return f"the specification could not be compared ({type(err).__name__}: {truncate(str(err), 200)})"


def _cover_ring(route: str, con: Construction, params, values, floor=None):
    """``(variables, parameter symbols, arithmetic, substitution)`` of one route of
    :func:`specification_cover`; None where the grouped ring does not apply.  ``floor``: the
    degree bounds of the proof's power-sum ring, if it used one (the grouped route then builds
    the same ring where its own bounds are within them, and reuses the proof's polynomials)."""
    import flint

    if route == "grouped":
        import itertools

        from .flint_backend import FlintRing, FPoly
        from .grouped import most_degrees, power_sum_problem
        from .token_groups import GroupedProblem, abstract_variables, max_arity, max_degrees, pivoted

        groups = tuple(con.token_groups)
        av = abstract_variables(con.variables, groups)
        for encoding in (1, 2):  # the pair encoding where an entry needs a pivot group
            gp = GroupedProblem(con.variables, params, groups, entry_name, display_name, encoding=encoding)
            pgens = {p: FPoly(g) for p, g in gp.params.items()}
            need, degrees = 1, (0, 0)
            for a, b in itertools.zip_longest(_spec_outputs(con, av, con), _spec_outputs(con.rebuild(**pgens), av, con)):
                sides = [x[2] if x[1] == "array" else x[2][1] for x in (a, b)
                         if x is not None and x[1] in ("array", "declared") and x[2] is not None]
                if sides:
                    degrees = most_degrees(degrees, max_degrees(*sides))
                if any(max_arity(x) > 1 for x in sides):
                    if not pivoted(*sides):
                        return None
                    need = 2
            if need <= encoding:
                break
        compact = power_sum_problem(con, params, groups, degrees, floor) if encoding == 1 else None
        if compact is not None:  # the same substitution with a few generators (verify/prover/power_sums.py)
            gp = compact
            pgens = {p: FPoly(g) for p, g in gp.params.items()}
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
        ar, (v, pgens) = SympyArith(sp.R), (sp.v, sp.params)
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
        ds = declared_states(c, v, sec, len(getattr(con, sec)))
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
        return (f"{what}[{entry}]: {truncate(str(x), 120)} at the concrete parameters, the construction's "
                f"own {truncate(str(y), 120)}")
    return None
