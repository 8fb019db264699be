"""verify/prover/proof.py: exact proofs, and what a failed proof tells the user.

A failure must name the section, the (first wrong) layer, a region and entry of the named
layout, the residual polynomial, and a rational counterexample.  The counterexample is
checked here independently: the layers are run exactly on that input and really give
``got != expected``.
"""
import json
from fractions import Fraction

import numpy as np
import pytest
from sympy import QQ, Symbol
from sympy.polys.rings import ring

from constructions.gd_attention import gd_elsa, gd_lsa
from constructions.gd_baseconv import gd_baseconv, gd_baseconv_causal
from verify.prover.locate import find_counterexample
from verify.prover.proof import (RESIDUAL_CHARS, ProofResult, SymbolicProblem, entry_name, prove,
                          replay_counterexample)

EPS = Fraction(1, 1024)


def first_nonzero(a):
    for idx, z in np.ndenumerate(a):
        if z != 0:
            return idx
    raise AssertionError("array has no nonzero entry")


def perturbed(layer, name, idx=None, delta=EPS):
    """A deep copy of ``layer`` with one entry of array ``name`` changed by ``delta``."""
    L = layer.map(lambda a: a.copy())
    arr = L.arrays()[name]
    idx = first_nonzero(arr) if idx is None else idx
    arr[idx] = arr[idx] + delta
    return L


def own_sections(con):
    return {"prologue": list(con.prologue), "body": list(con.body), "epilogue": list(con.epilogue)}


def check_counterexample(con, sections, failure):
    """Run the (wrong) section exactly on the counterexample and compare with the spec."""
    ce = failure.counterexample
    assert ce is not None and ce.assignment
    assert set(ce.assignment) <= {entry_name(var, ix)
                                  for var, shape in con.variables.items() for ix in np.ndindex(*shape)}
    got, want = replay_counterexample(con, sections, failure)
    assert got != want
    assert got == Fraction(ce.got) and want == Fraction(ce.expected)


CASES = [
    # (builder, section, layer in section, array)
    (gd_baseconv, "body", 0, "W_gate"),
    (gd_baseconv, "body", 1, "W_out"),
    (gd_baseconv, "body", 2, "h"),
    (gd_baseconv_causal, "body", 0, "W_gate"),
    (gd_lsa, "body", 0, "head1.W2"),
    (gd_elsa, "body", 0, "stage0.head3.W2"),
    (gd_elsa, "body", 0, "stage1.head0.B3"),
    (gd_baseconv_causal, "prologue", 0, "W_gate"),
    (gd_baseconv_causal, "prologue", 1, "h"),
    (gd_baseconv, "epilogue", 0, "W_out"),
    (gd_baseconv_causal, "epilogue", 0, "W_gate"),
    (gd_lsa, "epilogue", 0, "head0.W3"),
    (gd_elsa, "epilogue", 0, "stage0.head0.B3"),
]


@pytest.mark.parametrize("build,section,li,array", CASES,
                         ids=[f"{b.__name__}-{s}{i}-{a}" for b, s, i, a in CASES])
def test_perturbed_layer_is_named(build, section, li, array):
    con = build(3, 2)
    secs = own_sections(con)
    secs[section][li] = perturbed(secs[section][li], array)
    res = prove(con, sections=secs)
    assert not res.ok
    f = res.failure
    assert f.section == section
    assert res.sections[section] is False
    assert all(res.sections[s] for s in res.sections if s != section)
    offset = {"prologue": 0, "body": len(con.prologue), "epilogue": len(con.prologue) + len(con.body)}[section]
    assert f.layer_in_section == li and f.layer == offset + li
    assert f"{section} layer {li}" in f.note
    # a region of the named layout, consistent with the state index
    assert f.region in con.layout.regions
    assert con.layout.locate(*f.state_index) == (f.region, f.entry)
    assert isinstance(f.residual, str) and f.residual not in ("", "0")
    check_counterexample(con, secs, f)
    text = f.describe()
    assert text.startswith(f"{section} fails at stack layer {offset + li}")
    assert repr(f.region) in text and "counterexample:" in text and "residual" in text
    json.dumps(res.to_json())  # the failure serialises


def test_prove_ok_result():
    con = gd_baseconv(3, 2)
    res = prove(con)
    assert isinstance(res, ProofResult) and res.ok and res.failure is None
    assert res.construction == "gd-baseconv" and isinstance(res.seconds, float) and res.seconds >= 0
    d = json.loads(json.dumps(res.to_json()))
    assert d["ok"] is True and d["sections"] == {"prologue": True, "body": True, "epilogue": True}
    # with sections given, nothing is symbolic and the parameters are the construction's own
    res2 = prove(con, sections=own_sections(con))
    assert res2.ok and res2.symbolic_params == []


def _flip_eta_sign(con):
    """seed 000's GD step with the wrong sign: x <- x + eta A^T(Ax - b) (layer 3 W_out = +eta)."""
    L3 = con.body[2].map(lambda a: a.copy())
    lay = con.layout
    for j in range(con.variables["x"][0]):
        L3.W_out[lay.cols("s2")[j], lay.cols("x")[j]] = con.params["eta"]
    return L3


def test_wrong_sign_of_eta_fails_with_counterexample():
    con = gd_baseconv(3, 2)
    secs = own_sections(con)
    secs["body"][2] = _flip_eta_sign(con)
    res = prove(con, sections=secs)
    assert not res.ok
    f = res.failure
    assert (f.section, f.layer, f.layer_in_section, f.region) == ("body", 2, 2, "x")
    check_counterexample(con, secs, f)


def test_wrong_construction_fails_symbolically():
    """A builder with the wrong sign, proved with a symbolic step size."""
    def wrong(n, d, *, eta=None):
        con = gd_baseconv(n, d, eta=eta)
        con.body[2] = _flip_eta_sign(con)
        con.rebuild = lambda **p: wrong(n, d, **p)
        return con

    con = wrong(3, 2, eta="1/8")
    res = prove(con, refute=False)  # the symbolic proof's report (refuting first fails it at eta = 1/8)
    assert not res.ok and res.symbolic_params == ["eta"]
    f = res.failure
    assert (f.section, f.layer_in_section, f.region) == ("body", 2, "x")
    assert "eta" in f.residual
    ce = f.counterexample
    # the counterexample fixes eta as well: rebuild at that eta and check it there
    eta = Fraction(ce.assignment["eta"])
    at = wrong(3, 2, eta=eta)
    assigned = {k: v for k, v in ce.assignment.items() if k != "eta"}
    f.counterexample.assignment = assigned
    check_counterexample(at, own_sections(at), f)


def test_mutated_construction_is_not_proved_with_symbolic_params():
    """``prove(con)`` must check ``con``'s own layers, also with ``symbolic=True`` (the default).

    The symbolic proof rebuilds the weights with ``con.rebuild``; a construction whose layers
    were changed after building must not be "PROVED" on the strength of the rebuilt ones.
    """
    con = gd_baseconv(3, 2)
    con.body[2] = _flip_eta_sign(con)
    assert not prove(con, symbolic=False).ok
    assert not prove(con).ok


def test_lsa_as_printed_sign_error_fails():
    # eq. (45) with W_{2,3} = +(selector) instead of -: adds +sqrt(eta) X w instead of subtracting it
    con = gd_lsa(3, 2)
    secs = own_sections(con)
    body = secs["body"][0].map(lambda a: a.copy())
    body.heads[1].W3 = -body.heads[1].W3
    secs["body"][0] = body
    res = prove(con, sections=secs)
    assert not res.ok and res.failure.section == "body" and res.failure.region == "w"
    check_counterexample(con, secs, res.failure)


def test_long_residual_is_truncated():
    con = gd_baseconv(12, 4)
    secs = own_sections(con)
    secs["body"][2] = _flip_eta_sign(con)
    f = prove(con, sections=secs, refute=False).failure  # the exact proof's residual
    assert len(f.residual) <= RESIDUAL_CHARS + 30
    assert f.residual.endswith(" chars)") and " ... (" in f.residual


def test_symbolic_problem_names():
    sp = SymbolicProblem({"A": (2, 3), "b": (2,)}, ("eta",))
    assert sp.names == ["A[0,0]", "A[0,1]", "A[0,2]", "A[1,0]", "A[1,1]", "A[1,2]", "b[0]", "b[1]", "eta"]
    assert sp.v["A"].shape == (2, 3) and sp.v["b"].shape == (2,)
    assert str(sp.v["A"][1, 2]) == "A[1,2]" and str(sp.params["eta"]) == "eta"
    assert sp.R.ngens == 9


def test_find_counterexample_is_a_root_free_point():
    R, x, y, z = ring([Symbol("x"), Symbol("y"), Symbol("z")], QQ)
    diff = x * y - y * y + 3 * x  # vanishes on many small points
    got, expected = diff + z, z
    ce = find_counterexample(R, diff, got, expected, ["x", "y", "z"])
    assert set(ce.assignment) == {"x", "y"}  # z is not in the support
    vals = {k: Fraction(v) for k, v in ce.assignment.items()}
    value = vals["x"] * vals["y"] - vals["y"] ** 2 + 3 * vals["x"]
    assert value != 0 and Fraction(ce.got) == value and Fraction(ce.expected) == 0


def test_shape_mismatch_is_reported():
    con = gd_baseconv(3, 2)
    other = gd_baseconv(4, 2)
    with pytest.raises(ValueError):
        prove(con, sections={"prologue": [], "body": other.body, "epilogue": con.epilogue})


def test_run_checked_names_the_first_wrong_step():
    from verify.prover.proof import run_checked

    con = gd_baseconv(3, 2)
    v = {name: np.array([Fraction(i + 1, 3) for i in range(int(np.prod(shp)))], dtype=object).reshape(shp)
         for name, shp in con.variables.items()}
    S, vk = run_checked(con, v, 2)
    assert vk["x"].shape == (2,) and S.shape == con.layout.shape
    con.body[2] = _flip_eta_sign(con)
    with pytest.raises(ValueError, match="after body copy 1"):
        run_checked(con, v, 2)
