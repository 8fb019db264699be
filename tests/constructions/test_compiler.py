"""constructions/compiler.py: arithmetic circuits -> levelled BaseConv stacks (T = 1).

Checked on random circuits (tests.strategies.circuits_st): the stack is proved equal to the
circuit's polynomials, it evaluates exactly like ``circuits.evaluate`` on random rationals,
and its depth is the multiplicative depth (between log2 of the true degree and the
multiplicative depth of the circuit as drawn).
"""
import math
import warnings
from fractions import Fraction

import networkx as nx
import numpy as np
import pytest
import sympy
from hypothesis import given
from hypothesis import strategies as st

import circuits as C
from constructions.compiler import CompiledCircuit, compile_circuit
from constructions.layers import BaseConv
from verify.proof import prove

from tests.strategies import circuits_st, malformed_circuits_st, rationals_st


def quiet_compile(g, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", C.PrunedNodesWarning)
        return compile_circuit(g, **kw)


def run_stack(con, values):
    # exact inputs are Fractions (object scalars); a bare int would make an integer state
    S = con.input_state({k: Fraction(x) for k, x in values.items()})
    for L in con.layers(0):
        S = L.forward(S)
    return {k: Fraction(np.asarray(v).item()) for k, v in con.readout(S).items()}


def mult_depth_upper(g):
    """Multiplicative depth of the circuit as drawn, each n-ary product split in a balanced tree."""
    md = {}
    for v in nx.topological_sort(g):
        op = g.nodes[v]["op"]
        if op in ("input", "const"):
            md[v] = 0
        else:
            ops = C.operands(g, v)
            top = max(md[u] for u, _ in ops)
            if op == "add":
                md[v] = top
            else:
                m = sum(k for _, k in ops)
                md[v] = top + math.ceil(math.log2(m))
    return max(1, max(md[n] for n in C.output_nodes(g).values()))


def true_degree(g):
    degs = [sympy.Poly(p, *sympy.symbols(C.inputs(g))).total_degree() if C.inputs(g) else 0
            for p in C.polynomials(g).values()]
    return max(degs)


@given(g=circuits_st(), data=st.data())
def test_random_circuits_compile_prove_and_evaluate(g, data):
    con = quiet_compile(g)
    assert isinstance(con, CompiledCircuit)
    res = prove(con)
    assert res.ok, res.failure and res.failure.describe()
    names = C.inputs(con.graph)
    for _ in range(2):
        vals = {nm: data.draw(rationals_st(), label=nm) for nm in names}
        want = {k: Fraction(x) for k, x in C.evaluate(con.graph, vals).items()}
        assert run_stack(con, vals) == want


@given(g=circuits_st())
def test_random_circuit_depth_and_width_bounds(g):
    con = quiet_compile(g)
    L = len(con.epilogue)
    assert L == con.schedule.depth == con.depth(0) == con.schedule.info["compiled"]["layers"]
    assert not con.prologue and not con.body
    # each layer multiplies two affine forms: degree <= 2^layers
    deg = true_degree(con.graph)
    assert L >= 1 and 2 ** L >= deg
    assert L <= mult_depth_upper(con.graph)
    # the state is one token; the width is the widest live set
    assert con.layout.shape == (1, con.schedule.width)
    assert con.schedule.width >= max(len(C.inputs(con.graph)), len(C.outputs(con.graph)), 1)
    for layer in con.epilogue:
        assert isinstance(layer, BaseConv) and layer.shape == (1, con.schedule.width)


@given(g=circuits_st(max_inputs=3, max_gates=6), data=st.data())
def test_float_run_matches_exact_value(g, data):
    con = quiet_compile(g)
    names = C.inputs(con.graph)
    xs = np.random.default_rng(data.draw(st.integers(0, 2**31 - 1))).uniform(-1, 1, (len(names), 4))
    S = con.input_state({nm: xs[i] for i, nm in enumerate(names)})
    for L in con.epilogue:
        S = L.map(lambda a: np.array(a, dtype=np.float64)).forward(S)
    got = con.readout(S)
    for t in range(4):
        want = C.evaluate(con.graph, {nm: Fraction(float(xs[i, t])) for i, nm in enumerate(names)})
        for o, w in want.items():
            assert abs(float(got[o][t]) - float(w)) <= 1e-9 * max(1.0, abs(float(w)))


def test_depth_of_builders():
    assert len(compile_circuit(C.dot(1)).epilogue) == 1
    assert len(compile_circuit(C.dot(7)).epilogue) == 1
    assert len(compile_circuit(C.matvec(3, 4)).epilogue) == 1
    assert len(compile_circuit(C.horner([1, 2])).epilogue) == 1
    assert len(compile_circuit(C.horner([1, -2, 3, Fraction(1, 2)])).epilogue) == 2
    # Horner's chain t*(t*(t*t)) is sequential as written; one 4-ary product is a balanced tree,
    # and the re-associated chain (the default) is one too
    assert len(compile_circuit(C.horner([0, 0, 0, 0, 1]), reassociate=False).epilogue) == 3  # t^4
    assert len(compile_circuit(C.horner([0, 0, 0, 0, 0, 1]), reassociate=False).epilogue) == 4  # t^5
    assert len(compile_circuit(C.horner([0, 0, 0, 0, 1])).epilogue) == 2
    assert len(compile_circuit(C.horner([0, 0, 0, 0, 0, 1])).epilogue) == 3
    b = C.CircuitBuilder()
    t = b.input("t")
    b.output(b.mul(t, t, t, t), "p")
    assert len(compile_circuit(b.graph()).epilogue) == 2
    assert len(compile_circuit(C.gd_step(4, 3, Fraction(1, 16))).epilogue) == 2
    assert len(compile_circuit(C.gd_step(3, 2, "eta"), reassociate=False).epilogue) == 3  # eta * A^T(Ax - b)
    assert len(compile_circuit(C.newton_schulz_step(2, 3), reassociate=False).epilogue) == 3
    assert len(compile_circuit(C.gd_step(3, 2, "eta")).epilogue) == 2  # (eta A_ij) r_i
    assert len(compile_circuit(C.newton_schulz_step(2, 3)).epilogue) == 2


@pytest.mark.parametrize("g", [C.dot(3), C.matvec(2, 3), C.gd_step(3, 2, Fraction(1, 10)),
                               C.ridge_gd_step(2, 2, "eta", Fraction(1, 3)), C.horner([1, 2, 3, 4]),
                               C.newton_schulz_step(2, 2)])
def test_builders_compile_and_prove(g):
    con = compile_circuit(g, name="b")
    assert con.name == "b"
    assert prove(con).ok
    rng = np.random.default_rng(0)
    vals = {nm: Fraction(int(rng.integers(-5, 6)), int(rng.integers(1, 4))) for nm in C.inputs(g)}
    assert run_stack(con, vals) == {k: Fraction(v) for k, v in C.evaluate(g, vals).items()}
    # outputs sit at channels 0.. in sorted name order, named in the layout
    assert [r.name for r in con.layout.regions.values()] == [f"out:{o}" for o in sorted(C.outputs(g))]


def test_gd_step_compiled_equals_gd_construction_step():
    from constructions.lsq import gd_step

    g = C.gd_step(3, 2, Fraction(1, 10))
    con = compile_circuit(g)
    A = np.array([[1, 2], [3, Fraction(1, 2)], [-1, 0]], dtype=object)
    b = np.array([1, -2, 3], dtype=object)
    x = np.array([Fraction(1, 3), -1], dtype=object)
    vals = {f"A_{i}_{j}": A[i, j] for i in range(3) for j in range(2)}
    vals.update({f"b_{i}": b[i] for i in range(3)})
    vals.update({f"x_{j}": x[j] for j in range(2)})
    out = run_stack(con, vals)
    want = gd_step({"A": A, "b": b, "x": x}, Fraction(1, 10))["x"]
    assert [out[f"x_{j}"] for j in range(2)] == [Fraction(w) for w in want]


def test_constant_and_passthrough_outputs():
    b = C.CircuitBuilder()
    x = b.input("x")
    y = b.input("y")
    b.output(x, "a_copy")
    b.output(b.add(b.const(Fraction(3, 2)), b.mul(b.const(0), y)), "b_const")
    b.output(b.mul(x, y, y), "c_prod")
    g = b.graph()
    con = compile_circuit(g)
    assert prove(con).ok
    assert len(con.epilogue) == 2
    assert run_stack(con, {"x": Fraction(2), "y": Fraction(-3)}) == {
        "a_copy": 2, "b_const": Fraction(3, 2), "c_prod": 18}


def test_schedule_info():
    con = compile_circuit(C.dot(4))
    info = con.schedule.info
    assert info["compiled"]["layers"] == 1 and info["compiled"]["tokens"] == 1
    assert info["compiled"]["state_width"] == con.schedule.width == 8
    assert info["compiled"]["product_atoms"] == 4
    assert info["circuit"] == C.metrics(C.dot(4))
    assert "O(" in info["theorem_H21_bound"]["layers"]


@given(case=malformed_circuits_st())
def test_malformed_circuits_are_rejected(case):
    g, expected = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", C.PrunedNodesWarning)
        with pytest.raises(C.CircuitError) as e:
            compile_circuit(g)
    assert expected in str(e.value)
    assert "\n" not in str(e.value)
