"""Property tests: the Hypothesis strategies themselves, and properties that tie the proofs,
the exact runs and the four GD constructions together."""
import warnings
from fractions import Fraction

import networkx as nx
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import circuits as C
from constructions.base import Sections
from constructions.gd_attention import gd_elsa, gd_lsa
from constructions.gd_baseconv import gd_baseconv, gd_baseconv_causal
from constructions.lsq import gd_step
from verify.prover.proof import entry_name, prove

from tests.strategies import KINDS, circuits_st, malformed_circuits_st, rationals_st

BUILDERS = [gd_baseconv, gd_baseconv_causal, gd_lsa, gd_elsa]
q_st = st.fractions(min_value=-3, max_value=3, max_denominator=4)


def F(a):
    return [Fraction(z) for z in np.asarray(a, dtype=object).flat]


def obj(vals, shape):
    a = np.empty(len(vals), dtype=object)
    for i, x in enumerate(vals):
        a[i] = x
    return a.reshape(shape)


@st.composite
def problem(draw, n, d):
    vec = lambda m: [draw(q_st) for _ in range(m)]  # noqa: E731
    return {"A": obj(vec(n * d), (n, d)), "b": obj(vec(n), (n,)), "x": obj(vec(d), (d,)), "q": obj(vec(d), (d,))}


def run_stack(con, v, k, sections=None):
    secs = None if sections is None else Sections(sections["prologue"], [sections["body"]] * k, sections["epilogue"])
    return con.run(v, k, sections=secs)[0]


# ----------------------------------------------------------------------------- strategies

@given(st.integers(1, 6), st.integers(1, 6), st.data())
def test_rationals_st_bounds(max_abs, max_den, data):
    q = data.draw(rationals_st(max_abs, max_den))
    assert isinstance(q, Fraction) and abs(q) <= max_abs and q.denominator <= max_den


@given(g=circuits_st())
def test_circuits_st_draws_valid_unpruned_circuits(g):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a PrunedNodesWarning would fail here
        h = C.validate(g)
    assert set(h.nodes) == set(g.nodes)
    names = C.inputs(g)
    assert 1 <= len(names) <= 4 and names == [f"x{i}" for i in range(len(names))]
    assert C.outputs(g) and all(o.startswith("y") for o in C.outputs(g))
    assert all(isinstance(v, int) for v in g.nodes) or all(isinstance(v, str) for v in g.nodes)
    assert 1 <= C.metrics(g)["n_gates"] <= 10
    assert max(C.formal_degrees(g).values()) <= 6
    assert nx.is_directed_acyclic_graph(g)


@given(case=malformed_circuits_st())
def test_malformed_circuits_st_are_rejected_by_validate(case):
    g, expected = case
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            C.validate(g)
    except C.CircuitError as e:
        assert expected in str(e) and "\n" not in str(e)
    else:
        raise AssertionError(f"validate accepted a malformed circuit (expected {expected!r})")


@given(kind=st.sampled_from(KINDS), data=st.data())
def test_every_malformed_kind_is_rejected(kind, data):
    g, expected = data.draw(malformed_circuits_st(kinds=(kind,)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            C.validate(g)
        except C.CircuitError as e:
            assert expected in str(e)
        else:
            raise AssertionError(kind)


# ----------------------------------------------------------------------------- constructions

@given(data=st.data())
def test_all_four_constructions_compute_the_same_iterates(data):
    n, d, k = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 3)), data.draw(st.integers(0, 3))
    eta = data.draw(st.sampled_from([Fraction(1, 16), Fraction(1, 4), Fraction(1, 9)]))
    v = data.draw(problem(n, d))
    results = []
    for build in BUILDERS:
        con = build(n, d, eta=eta)
        S = run_stack(con, v, k)
        out = con.readout(S)
        results.append((F(out["x"]), Fraction(np.asarray(out["prediction"]).item())))
    assert all(r == results[0] for r in results)
    w = v
    for _ in range(k):
        w = gd_step(w, eta)
    assert results[0] == (F(w["x"]), sum((Fraction(a) * Fraction(b) for a, b in zip(v["q"], w["x"])), Fraction(0)))


@given(data=st.data())
def test_the_solution_is_a_fixed_point_of_every_body(data):
    # b = A x*: x* solves the least-squares problem, so extra body repetitions change nothing
    build = data.draw(st.sampled_from(BUILDERS))
    n, d = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 3))
    con = build(n, d)
    v = data.draw(problem(n, d))
    v["b"] = obj([sum((v["A"][i, j] * v["x"][j] for j in range(d)), Fraction(0)) for i in range(n)], (n,))
    S0 = con.state(v)
    S = S0
    for _ in range(data.draw(st.integers(1, 3))):
        for L in con.body:
            S = L.forward(S)
    assert F(S) == F(S0)


ARRAY_CHOICES = st.integers(0, 10**6)


@given(data=st.data())
def test_proof_verdict_is_sound_and_complete_on_random_perturbations(data):
    """Perturb one random weight entry (zero or not) by a random rational.

    If the proof says ok, the perturbed stack must still compute GD on a random problem; if it
    fails, its counterexample must really show a difference.  Either way the verdict is checked.
    """
    build = data.draw(st.sampled_from(BUILDERS), label="build")
    con = build(3, 2, eta=Fraction(1, 4))
    secs = {"prologue": list(con.prologue), "body": list(con.body), "epilogue": list(con.epilogue)}
    section = data.draw(st.sampled_from([s for s in secs if secs[s]]), label="section")
    li = data.draw(st.integers(0, len(secs[section]) - 1), label="layer")
    L = secs[section][li].map(lambda a: a.copy())
    arrays = L.arrays()
    name = sorted(arrays)[data.draw(ARRAY_CHOICES) % len(arrays)]
    arr = arrays[name]
    idx = np.unravel_index(data.draw(ARRAY_CHOICES) % arr.size, arr.shape)
    delta = data.draw(st.fractions(min_value=-2, max_value=2, max_denominator=8).filter(bool), label="delta")
    arr[idx] = arr[idx] + delta
    secs[section][li] = L
    res = prove(con, sections=secs)
    if res.ok:
        v = data.draw(problem(3, 2))
        for k in (0, 1, 2):
            want = v
            for _ in range(k):
                want = gd_step(want, Fraction(1, 4))
            assert F(run_stack(con, v, k, secs)) == F(con.final_state(want))
    else:
        f = res.failure
        assert f.section == section
        ce = f.counterexample
        vals = {}
        for var, shape in con.variables.items():
            vals[var] = obj([Fraction(ce.assignment.get(entry_name(var, ix), "0"))
                             for ix in np.ndindex(*shape)], shape)
        start = con.input_state(vals) if section == "prologue" else con.state(vals)
        target = {"prologue": con.state, "epilogue": con.final_state,
                  "body": lambda x: con.state(con.step(x))}[section](vals)
        S = start
        for layer in secs[section]:
            S = layer.forward(S)
        assert Fraction(S[f.state_index]) != Fraction(target[f.state_index])
        assert Fraction(S[f.state_index]) == Fraction(ce.got)
