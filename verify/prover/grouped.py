"""Which grouped ring a proof runs in, each ring's claim checked by an abstract pass.

The grouped proof (``verify/prover/proof.py``, :func:`verify.prover.proof.grouped_proof`) runs in a
substituted ring that is injective only on some monomials: one generator per slot
(``verify/prover/token_groups.py``, encoding 1: one group per monomial), the pair encoding
(encoding 2: a pivot group and at most one other) or the power sums of ``verify/prover/power_sums.py``
(one group per monomial, within degree bounds).  :func:`grouped_ring` picks the first that applies,
and each is accepted only after :func:`_abstract_pass` has run the very layers and specification
(the same rebuild, the same weight objects) on the abstract values of
:class:`verify.prover.token_groups.Support` and found every entry of both sides within what that
ring is injective on.
"""
from __future__ import annotations

from dataclasses import dataclass

from constructions.base import Construction, run_layers

from .rings import display_name, entry_name, section_claims


def _abstract_pass(con, params, sections, av, gp, encoding: int):
    """Every entry of both sides of every section, abstractly (:class:`Support`), through the
    layers that the proof in ``gp``'s ring then runs (the same rebuild, the same weight objects):
    ``(spec, own layers, layers, need, degrees)``, ``need`` the encoding the entries need (1: one
    group per monomial; 2: a pivot group and at most one other; the name of the first section with
    an entry beyond both) and ``degrees`` the bounds ``(dg, dx)`` over every entry."""
    from .flint_backend import FlintRing, FPoly
    from .token_groups import max_arity, max_degrees, pivoted

    spec = con.rebuild(**{p: FPoly(g) for p, g in gp.params.items()}) if params else con
    own = {"prologue": spec.prologue, "body": spec.body, "epilogue": spec.epilogue}
    layers = sections if sections is not None else own
    need, degrees, ar = 1, (0, 0), FlintRing(None, gp.ctx)
    for sec, start, target in section_claims(spec, av):
        Ls = ar.layers(layers[sec])
        if sec == "body" and not Ls:
            continue
        want = target()
        if encoding == 1 and max_arity(want) > 1:
            return spec, own, layers, 2, degrees  # the specification alone rules encoding 1 out
        got = run_layers(Ls, start()) if Ls else start()
        degrees = most_degrees(degrees, max_degrees(got, want))
        if max(max_arity(got), max_arity(want)) > 1:
            if not pivoted(got, want):
                return spec, own, layers, sec, degrees
            need = 2
    return spec, own, layers, need, degrees


#: the power-sum ring tried first (its claim checked by the abstract pass like any other): least
#: squares' degrees, 2 in a token's variables (a_i a_i^T) and 2 in the globals (the prediction
#: <x, query>), so that the GD constructions need one abstract pass
FIRST_DEGREES = (2, 2)


@dataclass(frozen=True)
class RingChoice:
    """The grouped ring a proof runs in, or why none applies (``problem`` None, ``why`` the reason):
    the problem (its generators and encoding of the inputs), the specification's claims, the
    construction's own layers and the layers to check in it, and the encoding (1: one generator per slot
    or power sums, 2: pairs)."""

    problem: object = None
    spec: object = None
    own: object = None
    layers: object = None
    encoding: int = 0
    why: str = ""


def grouped_ring(con, params, groups, sections, av) -> RingChoice:
    """The :class:`RingChoice` of the grouped proof, each ring's claim checked by :func:`_abstract_pass`
    on the very layers and specification the proof runs in it; one with ``why`` where none applies.  Tried in order: the power-sum ring at
    :data:`FIRST_DEGREES`, at the degrees found (when larger), one generator per slot
    (encoding 1), the pair encoding (encoding 2)."""
    from .token_groups import GroupedProblem

    def grouped(encoding):
        return GroupedProblem(con.variables, params, groups, entry_name, display_name, encoding=encoding)

    gp = power_sum_problem(con, params, groups, FIRST_DEGREES) or grouped(1)
    spec, own, layers, need, degrees = _abstract_pass(con, params, sections, av, gp, 1)
    if _fits(gp, need, degrees):
        return RingChoice(gp, spec, own, layers, 1)
    if need == 1:
        for gp in (power_sum_problem(con, params, groups, degrees), grouped(1)):
            if gp is None:
                continue
            spec, own, layers, need, found = _abstract_pass(con, params, sections, av, gp, 1)
            if _fits(gp, need, found):
                return RingChoice(gp, spec, own, layers, 1)
    if need == 2:
        gp = grouped(2)
        spec, own, layers, need, _ = _abstract_pass(con, params, sections, av, gp, 2)
        if need == 2 or need == 1:
            return RingChoice(gp, spec, own, layers, 2)
    return RingChoice(why=f"not used: the {need} has an entry beyond both encodings")


def _fits(gp, need: int, found) -> bool:
    """Encoding 1 suffices and the degrees found are within ``gp``'s bounds (if it has any)."""
    return need == 1 and (gp.degrees is None or (None not in found and all(
        f <= b for f, b in zip(found, gp.degrees))))


def most_degrees(a, b):
    """The larger of two ``(dg, dx)`` degree bounds (None: unbounded)."""
    from .token_groups import most

    return tuple(most(x, y) for x, y in zip(a, b))


def power_sum_problem(con: Construction, params, groups, degrees, floor=None):
    """The power-sum ring of ``verify/prover/power_sums.py`` for degree bounds ``degrees`` (each at
    least ``floor``'s, when given: a proof's bounds, so that a later check builds the very same
    ring), or None where a bound is unknown or too large for it."""
    from .power_sums import PowerSumProblem

    if floor is not None:
        degrees = most_degrees(degrees, floor)
    if None in degrees:
        return None
    try:
        return PowerSumProblem(con.variables, params, groups, entry_name, display_name, degrees)
    except ValueError:
        return None
