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

Refute first (``prove(..., refute=True)``, the default; ``verify/prover/refute.py``):
before any ring is built, each section is tested at points with small integer
coordinates modulo a 61-bit prime (the layers' own forward on residues, as
``--check random``); a mismatch there is a definite one, and the result is FAILED
at once with an exact counterexample (both sides evaluated in rationals at that
integer point, the layer blamed as above but at the point, ``located_by`` ending
in ``refute.REFUTED``), never a residual polynomial: a wrong weight file fails
in seconds instead of filling the memory with the full ring's residual.  Where a
smaller injective ring (``grouped_proof``) finds a difference that those points
missed, more points are tried before the full ring is.  A refutation is never
sealed (``kernel.verdict`` reads it FAILED); where nothing is refuted the proof
runs as described above and alone decides PROVED.
"""
from __future__ import annotations

import contextlib
import gc
import time
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

import numpy as np

from constructions.base import Construction, run_layers
from constructions.claims import (LOCATED_LAST, LOCATED_ONLY, LOCATED_OWN, LOCATED_STATES,  # noqa: F401
                                  RESIDUAL_CHARS, Failure, IdentityClaim, ProofResult, WitnessClaim)
from constructions.layers import Layer

# the steps of a proof: choose the ring and build the specification (rings.py, grouped.py), check every
# section and conclude (kernel.py), cover (cover.py); failure diagnosis (locate.py) is imported only where a
# section failed.  verify.prover.proof re-exports the public names of the steps.
from .rings import (BACKENDS, FloatRefused, SymbolicProblem, as_poly, declared_states, load_sympy,  # noqa: F401
                    poly_ring, run, symbolic_spec, truncate, display_name, entry_name, exact_float, exact_floats,
                    exact_layer, proof_arithmetic, proof_specification, section_claims)
from .kernel import ShapeMismatch, check_sections, conclude, first_masked_mismatch, first_mismatch
from .cover import Cover, SpecMemo, proof_cover, specification_cover, symbolic_cover  # noqa: F401


def prove(con: Construction, *, symbolic: bool = True,
          sections: dict[str, list[Layer]] | None = None,
          reference: Construction | None = None, backend: str = "flint", refute: bool = True) -> ProofResult:
    """Prove ``con`` exactly (see the module docstring).

    ``backend``: the arithmetic of the layers' symbolic forward, ``"flint"`` (python-flint's
    ``fmpq_mpoly``, C; the default) or ``"sympy"`` (sympy's sparse ring); both exact, the
    specification and every report are sympy's either way (``verify/prover/flint_backend.py``).

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

    ``refute`` (default True): refute first (the module docstring, ``verify/prover/refute.py``): a
    section that differs at an integer point is FAILED at once with an exact counterexample there,
    without building a ring; ``refute=False`` runs the exact proof alone (its failure report names
    the residual polynomial).  A refutation only ever makes a FAILED result.
    """
    _check_prove_arguments(con, sections, reference, backend)
    with _collector_paused():
        if refute:
            refuted = _refutation(con, sections, reference)
            if refuted is not None:
                return refuted  # FAILED, never sealed
        keep = ProofKeep(refute=refute)
        result = _prove(con, symbolic, sections, reference, backend, keep)
        if keep.refuted:
            return result  # refuted after a smaller ring found a difference: FAILED, never sealed
        if not result.symbolic_params:
            return conclude(result)
        params = tuple(result.symbolic_params)
        memo, keep.spec = keep.spec, None
        cover = proof_cover(con, params, symbolic_cover(con, keep.layers, params, keep.ngens), memo)
        if cover.covers:
            result.symbolic_cover = cover.text
            return conclude(result)
        concrete = _prove(con, False, sections, reference, backend, ProofKeep())
        concrete.symbolic_cover = (f"{cover.text}: the symbolic proof does not cover the construction, so its own "
                                   f"layers and specification were proved at the concrete parameters (for these "
                                   f"values only)")
        return conclude(concrete)


def _refutation(con, sections, reference, bounds=None) -> ProofResult | None:
    """``refute.refute`` (a FAILED result with an exact counterexample at an integer point, or None):
    it never makes a proved verdict, so the proof may run it before its own work."""
    from .refute import POINT_BOUNDS, refute

    return refute(con, sections, bounds=bounds or POINT_BOUNDS,
                  compare_own=reference is not None or sections is not None)


def _check_prove_arguments(con, sections, reference, backend, what: str = "prove") -> None:
    """What :func:`prove` takes, checked before any work: a TypeError (ValueError for a backend name)
    saying what was given and what is expected, not an AttributeError from deep inside."""
    if not isinstance(con, Construction):
        hint = (" (a catalogue entry's name? constructions.catalogue.entries()[name].build(**sizes) makes "
                "it; verify.prover.proof.check proves any registry item)" if isinstance(con, str) else
                "; an IdentityClaim or WitnessClaim is proved by check()" if isinstance(con, (IdentityClaim,
                                                                                           WitnessClaim)) else "")
        raise TypeError(f"{what} takes a Construction (constructions.base.Construction: a layer stack with its "
                        f"specification), got {type(con).__name__} {con!r:.60}{hint}")
    if reference is not None and not isinstance(reference, Construction):
        raise TypeError(f"prove's reference must be a Construction or None, got {type(reference).__name__}")
    if sections is not None:
        if not isinstance(sections, dict):
            raise TypeError(f"prove's sections must be a dict of layer lists keyed prologue / body / epilogue, "
                            f"got {type(sections).__name__}")
        bad = [k for k in sections if k not in ("prologue", "body", "epilogue")]
        if bad:
            raise TypeError(f"prove's sections: unknown key {bad[0]!r} (prologue, body, epilogue)")
        for k, Ls in sections.items():
            if not isinstance(Ls, (list, tuple)):
                raise TypeError(f"prove's sections[{k!r}] must be a list of layers, got {type(Ls).__name__}")
    if backend not in BACKENDS:
        raise ValueError(f"unknown proof backend {backend!r} (one of {', '.join(BACKENDS)})")


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


@dataclass
class ProofKeep:
    """What :func:`_prove` (and :func:`grouped_proof`) leave for :func:`prove`: whether to refute
    first (``refute``) and whether it did (``refuted``), the layers proved (``layers``, by section)
    and the number of generators of their ring (``ngens``), for :func:`symbolic_cover`; why the
    grouped ring was not used (``grouped``), and what it computed for the specification cover
    (``spec``)."""

    refute: bool = False
    refuted: bool = False
    layers: dict | None = None
    ngens: int = 0
    grouped: str = ""
    spec: SpecMemo | None = None


def _prove(con, symbolic, sections, reference, backend, keep: ProofKeep) -> ProofResult:
    """The proof; ``keep`` gets the layers proved (``layers``, by section) and the number of
    generators of their ring (``ngens``), for :func:`symbolic_cover`."""
    load_sympy()
    t0 = time.perf_counter()
    params = symbolic_spec(con, symbolic, sections)
    if backend == "flint" and con.token_groups:
        grouped = grouped_proof(con, params, sections, t0, keep)
        if grouped is not None:
            return grouped
        if keep.refute and keep.grouped.startswith("differs"):
            # the grouped ring is injective where it was used: the claim is false; find the point
            from .refute import MORE_BOUNDS

            refuted = _refutation(con, sections, reference, MORE_BOUNDS)
            if refuted is not None:
                keep.refuted = True
                return refuted
    sp = SymbolicProblem(con.variables, params)
    ar = proof_arithmetic(backend, sp.R)
    spec, v, claims = proof_specification(con, sp, ar, params)
    own = {"prologue": spec.prologue, "body": spec.body, "epilogue": spec.epilogue}
    keep.layers, keep.ngens = own, len(sp.names)
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
    # only each section's output is kept: the states between its layers (as large as the output,
    # and one per layer) are recomputed when a failure has to be located
    checks = check_sections(claims, layers, lambda Ls, S0: run_layers(ar.layers(Ls), S0))
    result.sections, result.entries_checked = checks.sections, checks.entries_checked
    if checks.mismatch is not None:
        result.ok = False
        result.failure = _section_failure(con, spec, checks.mismatch, layers, offsets, v, R, sp.names, ref_layers,
                                          pristine, ar)
    result.seconds = time.perf_counter() - t0
    return result


def _counterexample(*args):
    """Diagnosis (``locate.find_counterexample``), imported only when a claim failed."""
    from .locate import find_counterexample

    return find_counterexample(*args)


def _section_failure(con, spec, m, layers, offsets, v, R, names, ref_layers, pristine, ar) -> Failure:
    """Diagnosis of the kernel's first mismatch ``m`` (after the verdict, never part of it): the
    layer to blame (``locate.py``), the region and entry, the residual and a counterexample."""
    from .locate import Location, locate_layer, find_counterexample

    sec, S0, idx = m.section, m.start, m.index
    Ls = layers[sec]
    loc = (locate_layer(con, spec, sec, Ls, S0, run(ar.layers(Ls), S0), m.expected, v, R, names, ref_layers, pristine, ar)
           if Ls else Location(0, LOCATED_ONLY))
    region, entry = con.layout.locate(*idx)
    sdiff = ar.to_sympy(m.difference)
    return Failure(
        section=sec, layer=offsets[sec] + loc.layer, layer_in_section=loc.layer,
        region=region, entry=entry, state_index=tuple(int(i) for i in idx),
        residual=truncate(str(as_poly(R, sdiff).as_expr())),
        counterexample=find_counterexample(R, sdiff, ar.to_sympy(m.got[idx]), ar.to_sympy(m.expected[idx]), names),
        note=loc.note, located_by=loc.by, culprit=loc.culprit)


def grouped_proof(con: Construction, params: tuple[str, ...], sections, t0: float,
                   keep: ProofKeep | None = None) -> ProofResult | None:
    """The proof in the substituted ring of ``verify.prover.token_groups`` (grouped variables, one
    generator per slot, or two and a pivot tag: ``GroupedProblem``'s encodings): a ProofResult
    when every section is proved there, None when the substitution does not apply (an entry of
    some section may have monomials beyond both encodings, the abstract evaluation cannot run,
    the groups are malformed) or a section differs: then the full proof runs, and makes the
    report (``keep.grouped`` says which)."""
    from .flint_backend import FlintRing, FPoly
    from .grouped import grouped_ring
    from .token_groups import ENCODINGS, abstract_variables

    groups = tuple(con.token_groups)
    try:
        av = abstract_variables(con.variables, groups)
    except ValueError:
        return None
    try:
        chosen = grouped_ring(con, params, groups, sections, av)
        if chosen.problem is None:
            if keep is not None:
                keep.grouped = chosen.why
            return None
        gp, spec, own, layers, encoding = chosen.problem, chosen.spec, chosen.own, chosen.layers, chosen.encoding
        ar = FlintRing(None, gp.ctx)
        fv = {k: np.vectorize(FPoly, otypes=[object])(a) if a.size else a for k, a in gp.v.items()}
        if keep is not None:
            keep.layers, keep.ngens = own, len(gp.names)
        # 2. the identities in the substituted ring
        # (the specification's outputs recorded: the specification cover reuses them, computed in
        # this ring, on these symbols, by the same code)
        result = ProofResult(con.name, True, 0.0, symbolic_params=list(params), backend=ar.name)
        record: dict = {}
        try:
            checks = check_sections(section_claims(spec, fv, record), layers,
                                    lambda Ls, S0: run_layers(ar.layers(Ls), S0), convert=ar.array)
        except ShapeMismatch as e:
            checks, shape = None, str(e).split(":")[0]
        if checks is None or checks.mismatch is not None:
            if keep is not None:
                keep.grouped = f"differs: {shape if checks is None else checks.mismatch.section} (encoding {encoding})"
            return None
        result.sections, result.entries_checked = checks.sections, checks.entries_checked
    except Exception as e:  # noqa: BLE001 - anything the substituted route cannot do, the full proof does
        if keep is not None:
            keep.grouped = f"not used: {type(e).__name__}"
        return None
    if keep is not None and params and sections is None:
        keep.spec = SpecMemo(gp.ctx, encoding, record, fv, gp.degrees)
    result.ring = (f"grouped substitution ({', '.join(groups)} by leading index: {gp.n_groups} groups, "
                   f"{len(gp.names)} generators, encoding {encoding}: {ENCODINGS[encoding]}; {gp.describe()})")
    result.seconds = time.perf_counter() - t0
    return result


def _undeclared_slots(spec0, v) -> set[tuple[int, int]] | None:
    """The entries some declared state of ``spec0`` leaves undeclared (None: no section declares states).

    The masks do not depend on ``v``: they are read in the problem's own ring.
    """
    slots: set[tuple[int, int]] = set()
    any_declared = False
    for sec in ("prologue", "body", "epilogue"):
        for d in declared_states(spec0, v, sec, len(getattr(spec0, sec))) or []:
            if d is not None:
                any_declared = True
                slots.update((int(i), int(j)) for i, j in zip(*np.nonzero(~d.mask)))
    return slots if any_declared else None


def _free_name(con: Construction, params) -> str:
    """``undeclared``, with underscores appended until it names no variable or parameter."""
    free = "undeclared"
    while free in con.variables or free in params:
        free += "_"
    return free


def _moved_inputs(base, to_new: dict) -> dict:
    """The problem's inputs ``base.v`` with each generator replaced by its image in the extended ring."""
    v = {}
    for k, a in base.v.items():
        b = np.empty(a.shape, dtype=object)
        for ix in np.ndindex(*a.shape):
            b[ix] = to_new[a[ix]]
        v[k] = b
    return v


def _state_failure(con, R, names, free, sec, offset, p, q, dp, dq, S, want, j, diff) -> Failure:
    """The failure of the layers ``p+1..q`` of ``sec`` to take one declared state to the next at entry ``j``."""
    j = tuple(int(t) for t in j)
    region, entry = con.layout.locate(*j)
    what = f"the {sec}'s target" if dq is None else f"the state declared after {sec} layer {q}"
    frm = f"the {sec}'s start state" if dp is None else f"the state declared after {sec} layer {p}"
    return Failure(
        section=sec, layer=offset + q, layer_in_section=q, region=region, entry=entry, state_index=j,
        residual=truncate(str(as_poly(R, diff).as_expr())),
        counterexample=_counterexample(R, diff, S[j], want[j], names),
        note=(f"intermediate states: the construction's own {sec} layers {p + 1}..{q} do not take {frm} "
              f"to {what} (undeclared entries as free symbols {free}[i,j]): its intermediate_states "
              f"or its layers are wrong"),
        located_by=LOCATED_STATES)


def _check_section_states(con, result: ProofResult, R, names, free, U, sec, offset, Ls, declared,
                          start, target) -> bool:
    """Check each pair of consecutive declared states of one section; record the first failure on ``result``."""
    points = ([(-1, None)] + [(i, d) for i, d in enumerate(declared) if d is not None]
              + [(len(Ls) - 1, None)])
    for (p, dp), (q, dq) in zip(points, points[1:]):
        S = run_layers(Ls[p + 1:q + 1], exact_floats(start()) if dp is None
                       else np.where(dp.mask, dp.expected, U))
        if dq is None:
            want = exact_floats(target())
            result.entries_checked += int(np.prod(want.shape))
            j, diff = first_mismatch(S, want)
        else:
            want = dq.expected
            result.entries_checked += int(dq.mask.sum())
            j, diff = first_masked_mismatch(S, dq)
        if j is None:
            continue
        result.ok = False
        result.failure = _state_failure(con, R, names, free, sec, offset, p, q, dp, dq, S, want, j, diff)
        return False
    return True


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
    _check_prove_arguments(con, None, None, "flint", what="prove_intermediate_states")
    load_sympy()
    t0 = time.perf_counter()
    params = symbolic_spec(con, symbolic, None)
    base = SymbolicProblem(con.variables, params)
    spec0 = con.rebuild(**base.params) if params else con
    result = ProofResult(con.name, True, 0.0, symbolic_params=list(params))
    # one extra generator per entry that some declared state leaves undeclared
    slots = _undeclared_slots(spec0, base.v)
    if slots is None:
        result.seconds = time.perf_counter() - t0
        return conclude(result)
    free = _free_name(con, params)
    slots_sorted = sorted(slots)
    names = base.names + [entry_name(free, ij) for ij in slots_sorted]
    R, *gens = poly_ring(names)  # generators by position, as SymbolicProblem
    to_new = dict(zip(base.gens, gens))
    v = _moved_inputs(base, to_new)
    spec = con.rebuild(**{p: to_new[g] for p, g in base.params.items()}) if params else con
    if params:  # the symbolic layers must be the construction's own at its parameters (as in prove)
        cover = proof_cover(con, params, symbolic_cover(
            con, {sec: getattr(spec, sec) for sec in ("prologue", "body", "epilogue")}, params, len(base.names)))
        if not cover.covers:
            concrete = prove_intermediate_states(con, symbolic=False)
            concrete.symbolic_cover = (f"{cover.text}: its own layers and intermediate states were proved at the "
                                       f"concrete parameters")
            return conclude(concrete)
        result.symbolic_cover = cover.text
    U = np.zeros(con.layout.shape, dtype=object)
    for (i, j), g in zip(slots_sorted, gens[len(base.names):]):
        U[i, j] = g
    offset = 0
    for sec, start, target in section_claims(spec, v):
        Ls = [exact_layer(L) for L in getattr(spec, sec)]  # a float weight: its exact binary value
        declared = declared_states(spec, v, sec, len(Ls))
        if declared is not None:
            ok = _check_section_states(con, result, R, names, free, U, sec, offset, Ls, declared, start, target)
            result.intermediate_states[sec] = ok
            if not ok:
                break
        offset += len(Ls)
    result.seconds = time.perf_counter() - t0
    return conclude(result)


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
    load_sympy()
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
    idx, diff = first_mismatch(g2, e2)
    if idx is not None:
        full = np.unravel_index(idx[0], got.shape) if got.shape else ()
        full = tuple(int(i) for i in full)
        result.ok = False
        result.sections["identity"] = False
        result.failure = Failure(
            section="identity", layer=-1, layer_in_section=-1,
            region=locate(full) if locate else name, entry=full, state_index=full,
            residual=truncate(str(as_poly(sp.R, diff).as_expr())),
            counterexample=_counterexample(sp.R, diff, g2[idx], e2[idx], sp.names))
    result.seconds = time.perf_counter() - t0
    return conclude(result)


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
        want = declared_states(con, v, failure.section, len(layers))[li].expected
    return Fraction(S[c.state_index]), Fraction(want[c.state_index])


def check(obj, *, refute: bool = True) -> ProofResult:
    """Prove a catalogue item, whatever it claims: a Construction (its section
    identities, every depth; ``refute``: refute first, as :func:`prove`), an
    IdentityClaim, or a WitnessClaim (its own certified computation)."""
    if isinstance(obj, Construction):
        return prove(obj, refute=refute)
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
