"""Clean output: a failed proof blames the layer that is wrong.

A construction may declare the state after each layer of a section
(``Construction.intermediate_states``: a ``PartialState``, expected values on declared
entries; scratch channels undeclared).  When a section of some weights fails, ``prove``
names the first layer whose exact output differs from its declared state
(``located_by == "intermediate states"``), not the region where the residual surfaces.
The declared states are proved for the construction's own layers, with the undeclared
entries as free symbols, so the blame is sound: the named layer got an input correct
wherever a later layer reads it, and returned a wrong output.  Without declared states the
report says that it is located where the residual appears.

Each failing case runs twice (the ``refute`` fixture): refuting first (``prove``'s default,
``verify/prover/refute.py``: the layer blamed at an integer point, ``located_by`` ending in
``REFUTED``) and the exact proof alone (``refute=False``: the blame from the ring's residual,
``verify/prover/locate.py``); both must name the same layer.
"""
from __future__ import annotations

from dataclasses import fields
from fractions import Fraction

import numpy as np
import pytest

from constructions.base import Construction, PartialState, to_float_array
from constructions.catalogue import entries
from constructions.gd_attention import gd_elsa, gd_lsa
from constructions.gd_baseconv import GDBaseConv, gd_baseconv, gd_baseconv_causal
from verify.prover.proof import (LOCATED_LAST, LOCATED_OWN, LOCATED_STATES, entry_name, prove,
                          prove_intermediate_states, replay_counterexample, replay_culprit)
from verify.prover.refute import REFUTED

N, D = 4, 2
EPS = Fraction(1, 1024)


@pytest.fixture(params=[True, False], ids=["refute-first", "exact-proof"])
def refute(request):
    """``prove``'s ``refute``: the refutation at an integer point first, or the exact proof alone."""
    return request.param


def by(f, refute: bool) -> str:
    """How the failure's layer was found (``located_by`` without the refutation's suffix, which a
    refutation has and the exact proof's report has not)."""
    suffix = f" ({REFUTED})"
    assert f.located_by.endswith(suffix) == refute, f.located_by
    return f.located_by[:-len(suffix)] if refute else f.located_by


def own_sections(con):
    return {"prologue": list(con.prologue), "body": list(con.body), "epilogue": list(con.epilogue)}


def ch(con, region, j=0):
    return con.layout.cols(region)[j]


# ---- corruptions of one layer (each returns an edited copy)

def _copy(L):
    return L.map(lambda a: a.copy())


def reverse_filter(region=None):
    """Reverse the taps of the working channels of ``region`` (None: every channel)."""
    def f(con, L):
        L = _copy(L)
        cols = range(L.h.shape[1]) if region is None else con.layout.cols(region)
        for c in cols:
            L.h[:, c] = L.h[::-1, c].copy()
        return L
    return f


def roll_filter(region, k=1, causal=None):
    def f(con, L):
        L = _copy(L)
        for c in con.layout.cols(region):
            L.h[:, c] = np.roll(L.h[:, c], k)
        if causal is not None:
            L.causal = causal
        return L
    return f


def drop_last_tap(region):
    """The filter one lag too short (an all-ones filter is invariant under reversal and roll)."""
    def f(con, L):
        L = _copy(L)
        for c in con.layout.cols(region):
            L.h[-1, c] = 0
        return L
    return f


def flip_causal(con, L):
    L = _copy(L)
    L.causal = not L.causal
    return L


def bump(array, src, dst, delta=EPS):
    """Add ``delta`` to ``array[ch(src), ch(dst)]`` (channel-indexed weights)."""
    def f(con, L):
        L = _copy(L)
        getattr(L, array)[ch(con, *src), ch(con, *dst)] += delta
        return L
    return f


BODY_CASES = [  # (id, layer in body, corruption)
    ("rev-conv-s1-L0", 0, reverse_filter("s1")),
    ("rev-conv-all-L0", 0, reverse_filter()),
    ("roll-conv-s2-L1", 1, roll_filter("s2", 1)),
    ("roll-conv-s2-L1-back", 1, roll_filter("s2", -1)),
    ("roll+causal-s1-L0", 0, roll_filter("s1", 1, causal=True)),
    ("causal-L2", 2, flip_causal),
    ("W_out-s1-s2-L0", 0, bump("W_out", ("s1", 1), ("s2", 0))),
    ("W_gate-x-s1-L0", 0, bump("W_gate", ("x", 0), ("s1", 0))),
    ("W_out-s2-s2-L1", 1, bump("W_out", ("s2", 1), ("s2", 1))),
    ("W_gate-a-s2-L1", 1, bump("W_gate", ("a", 0), ("s2", 0))),
    ("W_out-s2-x-L2", 2, bump("W_out", ("s2", 0), ("x", 0))),
    ("W_in-s2-L2", 2, bump("W_in", ("s2", 1), ("s2", 1))),
]


def check_blame(con, secs, res, section, li, refute, offset=0):
    assert not res.ok and res.sections[section] is False
    f = res.failure
    assert (f.section, f.layer_in_section, f.layer) == (section, li, offset + li), f.describe()
    assert by(f, refute) == LOCATED_STATES and f.culprit is not None
    # the culprit entry is a declared entry of a region of the layout
    c = f.culprit
    assert con.layout.locate(*c.state_index) == (c.region, c.entry)
    got, want = replay_culprit(con, secs, f)
    assert got != want and got == Fraction(c.counterexample.got) and want == Fraction(c.counterexample.expected)
    # the final-state fields keep their meaning: replay_counterexample reproduces them
    assert con.layout.locate(*f.state_index) == (f.region, f.entry)
    got, want = replay_counterexample(con, secs, f)
    assert got != want and got == Fraction(f.counterexample.got)
    text = f.describe()
    assert text.startswith(f"{section} fails at stack layer {offset + li} ({section} layer {li})")
    assert "declared intermediate state" in text and repr(c.region) in text


@pytest.mark.parametrize("li,corrupt", [(li, c) for _, li, c in BODY_CASES], ids=[i for i, _, _ in BODY_CASES])
def test_corrupted_body_layer_is_named(li, corrupt, refute):
    check_corruption_named(gd_baseconv, "body", li, corrupt, refute)


def check_corruption_named(build, section, li, corrupt, refute):
    """One layer corrupted, proved as a weight file's sections against the construction and as an
    edited construction (no reference stack): both name that layer."""
    con = build(N, D)
    secs = own_sections(con)
    secs[section][li] = corrupt(con, secs[section][li])
    check_blame(con, secs, prove(con, sections=secs, refute=refute), section, li, refute)
    edited = build(N, D)
    getattr(edited, section)[li] = secs[section][li]
    check_blame(build(N, D), secs, prove(edited, refute=refute), section, li, refute)


def test_wrong_convention_everywhere_names_the_first_layer(refute):
    """Every filter of the stack reversed (lag order read the other way round): the first
    layer whose output is wrong is body layer 0, at the residual channel s2 (not scratch)."""
    con = gd_baseconv(N, D)
    secs = own_sections(con)
    secs["body"] = [reverse_filter()(con, L) for L in secs["body"]]
    res = prove(con, sections=secs, refute=refute)
    check_blame(con, secs, res, "body", 0, refute)


def test_scratch_difference_is_not_blamed(refute):
    """Layer 0 writes junk into the scratch channel s1 (harmless: layer 1 drops it) and layer 1
    is wrong.  The construction's own layers first differ at layer 0 (s1); the declared states
    blame layer 1, and the note says the layer-0 difference is on an undeclared entry."""
    con = gd_baseconv(N, D)
    secs = own_sections(con)
    L0 = _copy(secs["body"][0])
    L0.b_out[:, ch(con, "s1", 0)] = 5
    secs["body"][0] = L0
    assert prove(con, sections=secs).ok  # junk in scratch alone is fine
    secs["body"][1] = bump("W_out", ("s2", 0), ("s2", 0), 1)(con, secs["body"][1])
    res = prove(con, sections=secs, refute=refute)
    check_blame(con, secs, res, "body", 1, refute)
    assert "body layer 0" in res.failure.note and "undeclared entry" in res.failure.note
    assert res.failure.culprit.region == "s2"


@pytest.mark.parametrize("li,corrupt", [(0, bump("W_gate", ("b", 0), ("Sba", 0))),
                                        (0, bump("W_out", ("Saa", 1), ("Saa", 1))),
                                        (1, drop_last_tap("Saa")),
                                        (1, flip_causal)],
                         ids=["W_gate-P0", "W_out-P0", "short-conv-P1", "causal-P1"])
def test_corrupted_causal_prologue_layer_is_named(li, corrupt, refute):
    check_corruption_named(gd_baseconv_causal, "prologue", li, corrupt, refute)


# ---- the declared states are themselves proved

def _declaring_constructions():
    out = [gd_baseconv(N, D), gd_baseconv(3, 3, eta="1/8"), gd_baseconv(1, 1),
           gd_baseconv_causal(N, D), gd_baseconv_causal(2, 3, eta="3/4")]
    out += [e.build(**e.sizes) for e in entries().values()]
    return [c for c in out if isinstance(c, Construction)]


def test_declared_states_are_produced_by_the_own_layers():
    seen = set()
    for con in _declaring_constructions():
        res = prove_intermediate_states(con)
        assert res.ok, res.failure.describe()
        declares = {sec for sec in ("prologue", "body", "epilogue")
                    if len(getattr(con, sec)) > 1 and con.intermediate_states(_zero_problem(con), sec) is not None}
        assert set(res.intermediate_states) == declares and all(res.intermediate_states.values())
        if declares:
            seen.add(con.name)
            assert prove(con).ok  # the stack proof does not depend on the declarations
    assert seen == {"gd-baseconv", "gd-baseconv-causal", "prefix-coupled"}


def _zero_problem(con):
    return {k: np.zeros(s, dtype=object) for k, s in con.variables.items()}


@pytest.mark.parametrize("build,section", [(gd_baseconv, "body"), (gd_baseconv_causal, "prologue")])
def test_declared_states_hold_on_exact_and_float_runs(build, section):
    """A direct check beside the proof: the own layers' outputs agree with the declared states
    on declared entries, for a concrete exact problem and for a float batch."""
    con = build(N, D)
    rng = np.random.default_rng(0)
    vf = {k: rng.integers(-3, 4, size=(2,) + s).astype(np.float64) for k, s in con.variables.items()}
    vq = {k: np.array(a[0], dtype=object) for k, a in vf.items()}
    exact_layers = getattr(con, section)
    float_layers = [L.map(to_float_array) for L in exact_layers]
    for v, conv, layers in ((vq, lambda a: np.vectorize(Fraction, otypes=[object])(a), exact_layers),
                            (vf, np.asarray, float_layers)):
        v = {k: conv(a) for k, a in v.items()}
        S = (con.input_state if section == "prologue" else con.state)(v)
        declared = con.intermediate_states(v, section)
        assert len(declared) == len(layers) and declared[-1] is None
        for L, want in zip(layers, declared):
            S = L.forward(S)
            if want is not None:
                assert isinstance(want, PartialState)
                m = np.broadcast_to(want.mask, S.shape)
                assert np.array_equal(np.asarray(S)[m].astype(float), np.asarray(want.expected)[m].astype(float))
                assert not want.mask.all()  # some scratch is left undeclared


def test_single_layer_sections_declare_nothing():
    for con in (gd_lsa(N, D), gd_elsa(N, D)):
        assert prove_intermediate_states(con).intermediate_states == {}


class _WrongS2(GDBaseConv):
    """gd-baseconv declaring the residual with the wrong sign after layer 0."""

    def intermediate_states(self, v, section):
        ds = super().intermediate_states(v, section)
        if ds:
            cols = slice(*self.layout["s2"].cols)
            ds[0].expected[..., :, cols] = -ds[0].expected[..., :, cols]
        return ds


def _as(cls, con, **kw):
    return cls(**{**{f.name: getattr(con, f.name) for f in fields(con)}, **kw})


def test_a_wrong_declaration_is_caught(refute):
    good = gd_baseconv(N, D)
    con = _as(_WrongS2, good, rebuild=lambda **p: _as(_WrongS2, gd_baseconv(N, D, **p)))
    res = prove_intermediate_states(con)
    assert not res.ok and res.intermediate_states == {"body": False}
    f = res.failure
    assert (f.section, f.layer_in_section, f.region) == ("body", 0, "s2")
    assert "intermediate_states" in f.note
    # prove(con): the stack is right (the declarations only locate failures, they prove nothing)
    full = prove(con)
    assert full.ok and all(full.sections.values())
    # and a wrong declaration is not used to blame a layer of some weights
    secs = own_sections(con)
    secs["body"][2] = bump("W_out", ("s2", 0), ("x", 0))(con, secs["body"][2])
    f = prove(con, sections=secs, refute=refute).failure
    assert by(f, refute) != LOCATED_STATES and f.culprit is None
    assert "declared intermediate states not used" in f.note and "body layer 0" in f.note


def test_hook_contract_is_checked():
    con = gd_baseconv(N, D)
    con.intermediate_states = lambda v, section: [None, None] if section == "body" else None
    with pytest.raises(ValueError, match="one entry per layer"):
        prove_intermediate_states(con, symbolic=False)
    last = PartialState(con.state(_zero_problem(con)), np.ones(con.layout.shape, dtype=bool))
    con.intermediate_states = lambda v, section: [None, None, last] if section == "body" else None
    with pytest.raises(ValueError, match="last layer must be None"):
        prove_intermediate_states(con, symbolic=False)


# ---- without declared states, the report says what its location means

class _NoStates(GDBaseConv):
    intermediate_states = Construction.intermediate_states


def test_without_declared_states_the_note_is_explicit(refute):
    con = _as(_NoStates, gd_baseconv(N, D), rebuild=None)
    con.body[0] = bump("W_out", ("s1", 1), ("s2", 0))(con, con.body[0])
    res = prove(con, refute=refute)
    f = res.failure
    assert not res.ok and res.intermediate_states == {}
    assert (f.section, f.layer_in_section, by(f, refute), f.culprit) == ("body", 2, LOCATED_LAST, None)
    assert "no intermediate states declared" in f.note
    assert f"where the {'difference' if refute else 'residual'} appears" in f.note
    assert "not necessarily the culprit" in f.note and f.note in f.describe()
    # with the construction's own layers at hand: the first difference, with the same caveat
    ref = _as(_NoStates, gd_baseconv(N, D), rebuild=None)
    f = prove(ref, sections=own_sections(con), refute=refute).failure
    assert (f.layer_in_section, by(f, refute)) == (0, LOCATED_OWN)
    assert "body layer 0" in f.note and "no intermediate states declared" in f.note


def test_catalogue_section_without_declared_states_gets_the_note(refute):
    e = entries()["s000-poly"]  # a 4-layer epilogue, no intermediate states
    con = e.build(**e.sizes)
    L = _copy(con.epilogue[0])
    idx = next(i for i, z in np.ndenumerate(L.W_out) if z != 0)
    L.W_out[idx] += EPS
    con.epilogue[0] = L
    f = prove(con, symbolic=False, refute=refute).failure
    assert f.section == "epilogue" and f.layer_in_section == 3 and by(f, refute) == LOCATED_LAST
    assert f"no intermediate states declared: located where the {'difference' if refute else 'residual'} appears" in f.note


def test_counterexample_names_are_variables(refute):
    con = gd_baseconv(N, D)
    secs = own_sections(con)
    secs["body"][1] = roll_filter("s2", 1)(con, secs["body"][1])
    f = prove(con, sections=secs, refute=refute).failure
    names = {entry_name(var, ix) for var, shape in con.variables.items() for ix in np.ndindex(*shape)}
    assert set(f.culprit.counterexample.assignment) <= names
