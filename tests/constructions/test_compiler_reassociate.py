"""constructions/compiler/reassociate.py: the circuit rewritten to the least multiplicative depth.

The pass must keep every output polynomial exactly (compared as sympy polynomials), never raise
the multiplicative depth the targets pay, keep inputs, outputs and places; compile_circuit runs it
by default and proves the stack against the circuit as given.
"""
from __future__ import annotations

import json
import warnings
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

import circuits as C
from constructions.compiler import compile_circuit
from constructions.compiler.reassociate import kraft, multiplicative_depth, reassociate
from verify.construct import main
from verify.prover.proof import prove

from tests.strategies import circuits_st
from tests.support import assert_proved

HORNER8 = [1, -2, 3, Fraction(1, 2), 5, -1, 2, 7, Fraction(-1, 3)]  # degree 8


def valid(g):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", C.PrunedNodesWarning)
        return C.validate(g)


def check_same_circuit(g, h):
    """Same polynomials, same inputs (ids, attributes), same outputs (ids, names, places), no deeper."""
    assert C.polynomials(h) == C.polynomials(g)
    assert C.inputs(h) == C.inputs(g) and C.outputs(h) == C.outputs(g)
    assert C.input_nodes(h) == C.input_nodes(g)
    for v in C.input_nodes(g).values():
        assert h.nodes[v] == g.nodes[v]
    assert C.output_nodes(h) == C.output_nodes(g)
    for v in C.output_nodes(g).values():
        for k in ("output", "token", "channel"):
            assert h.nodes[v].get(k) == g.nodes[v].get(k)
    assert C.placement(h) == C.placement(g)
    assert multiplicative_depth(h) <= multiplicative_depth(g)


def test_kraft_is_the_balanced_tree_depth():
    assert kraft([(0, 1)]) == 0 and kraft([(3, 1)]) == 3
    assert kraft([(0, 2)]) == 1 and kraft([(0, 3)]) == 2 and kraft([(0, 8)]) == 3 and kraft([(0, 9)]) == 4
    assert kraft([(2, 1), (0, 4)]) == 3 and kraft([(1, 1), (0, 2)]) == 2


@given(g=circuits_st(max_inputs=4, max_gates=10))
def test_random_circuits_keep_their_polynomials_and_never_deepen(g):
    g = valid(g)
    h = reassociate(g)
    check_same_circuit(g, h)
    assert reassociate(h).number_of_nodes() <= h.number_of_nodes() + len(C.outputs(h))


@given(g=circuits_st(max_inputs=3, max_gates=8), max_terms=st.integers(1, 8))
def test_any_expansion_budget_is_exact(g, max_terms):
    g = valid(g)
    check_same_circuit(g, reassociate(g, max_terms=max_terms))


@given(g=circuits_st(max_inputs=3, max_gates=6), target=st.sampled_from(["baseconv-mlp", "lsa", "elsa"]))
def test_random_circuits_compile_and_prove_reassociated(g, target):
    g = valid(g)
    con = compile_circuit(g, target=target)
    assert con.graph is g or C.polynomials(con.graph) == C.polynomials(g)
    ra = con.info["compiled"]["reassociated"]
    assert ra["ran"] and ra["mult_depth_after"] <= ra["mult_depth_before"] == multiplicative_depth(g)
    assert con.info["circuit"] == C.metrics(g)
    assert_proved(prove(con))


@pytest.mark.parametrize("k", range(1, 17))
def test_horner_reaches_estrin_depth(k):
    g = C.horner(list(range(1, k + 2)))  # degree k
    assert multiplicative_depth(g) == max(0, k - 1)  # t * c_k is a product by a constant
    h = reassociate(g)
    check_same_circuit(g, h)
    assert multiplicative_depth(h) == (k - 1).bit_length()  # ceil(log2 k): what t^k needs, no more


def test_horner_degree_8_in_at_most_5_layers_and_proved():
    g = C.horner(HORNER8, placed=True)
    for target, most in (("baseconv", 5), ("baseconv-causal", 5), ("baseconv-mlp", 3)):
        con = compile_circuit(g, target=target)
        assert len(con.epilogue) <= most, (target, len(con.epilogue))
        assert_proved(prove(con))
        ra = con.info["compiled"]["reassociated"]
        assert (ra["mult_depth_before"], ra["mult_depth_after"]) == (7, 3)
        # as written: the chain of 7 products, 7 layers (placed: the output route folded into the last
        # product layer's W_out, sequence._fold_outputs)
        old = compile_circuit(g, target=target, reassociate=False)
        assert len(old.epilogue) == 7
        assert "reassociated" not in old.info["compiled"]


def test_common_subexpressions_are_shared():
    b = C.CircuitBuilder()
    x, y, z = b.input("x"), b.input("y"), b.input("z")
    p1 = b.mul(b.add(x, y), z)
    p2 = b.mul(z, b.add(y, x))  # the same product, written the other way round
    b.output(b.add(p1, p2), "s")
    b.output(b.mul(b.mul(x, y), b.mul(y, x)), "q")  # (xy)(yx) = (xy)^2
    g = b.graph()
    h = reassociate(g)
    check_same_circuit(g, h)
    adds = [v for v, d in h.nodes(data=True) if d["op"] == "add"]
    muls = [v for v, d in h.nodes(data=True) if d["op"] == "mul"
            and all(h.nodes[u]["op"] != "const" for u in h.predecessors(v))]
    # (x + y) once, z (x + y) once, x y once, (x y)^2 once; s = 2 z (x + y)
    assert len(muls) == 3, [(v, list(h.predecessors(v))) for v in muls]
    assert len(adds) == 1


def test_products_are_flattened_into_balanced_trees():
    b = C.CircuitBuilder()
    xs = [b.input(f"x{i}") for i in range(8)]
    acc = xs[0]
    for x in xs[1:]:
        acc = b.mul(acc, x)  # a chain of 7 products: depth 7 as written
    b.output(acc, "p")
    g = b.graph()
    assert multiplicative_depth(g) == 7
    h = reassociate(g)
    check_same_circuit(g, h)
    assert multiplicative_depth(h) == 3


def test_a_shared_product_stays_shared_where_inlining_gains_nothing():
    b = C.CircuitBuilder()
    x = [b.input(f"x{i}") for i in range(4)]
    y = b.mul(b.mul(x[0], x[1]), b.mul(x[2], x[3]))  # balanced already
    for i in range(3):
        b.output(b.mul(y, b.input(f"z{i}")), f"o{i}")
    g = b.graph()
    h = reassociate(g)
    check_same_circuit(g, h)
    assert multiplicative_depth(h) == multiplicative_depth(g) == 3
    assert sum(1 for _, d in h.nodes(data=True) if d["op"] == "mul") == 6  # x0x1, x2x3, y, and y z_i


def test_distribution_lowers_depth_and_cancellation_folds():
    b = C.CircuitBuilder()
    e, a, x, r = b.input("e"), b.input("a"), b.input("x"), b.input("r")
    # e * (a * (a x - r)): depth 3 as written; (e a)(a x) - (e a) r: depth 2
    b.output(b.mul(e, b.mul(a, b.add(b.mul(a, x), b.mul(b.const(-1), r)))), "g")
    s = b.add(a, x)
    sq = b.mul(s, s)
    m1 = b.const(-1)
    zero = b.add(sq, b.mul(m1, a, a), b.mul(b.const(-2), a, x), b.mul(m1, x, x))  # (a+x)^2 - a^2 - 2ax - x^2
    b.output(b.mul(zero, r, r, r), "z")
    g = b.graph()
    h = reassociate(g)
    check_same_circuit(g, h)
    assert multiplicative_depth(g) == 3 and multiplicative_depth(h) == 2
    z = C.output_nodes(h)["z"]
    assert h.nodes[z]["op"] == "const" and h.nodes[z]["value"] == 0


def test_placed_outputs_and_pass_through_inputs_survive():
    g = C.gd_step(3, 2, "eta", placed=True)
    h = reassociate(g)
    check_same_circuit(g, h)
    assert multiplicative_depth(g) == 3 and multiplicative_depth(h) == 2


BUILDERS = {
    "dot": lambda: C.dot(3, placed=True),
    "matvec": lambda: C.matvec(2, 2, placed=True),
    "gd": lambda: C.gd_step(2, 2, Fraction(1, 8), placed=True),
    "gd-eta": lambda: C.gd_step(2, 2, "eta", placed=True),
    "gd-gram": lambda: C.gd_step(2, 2, Fraction(1, 8), placed=True, form="gram"),
    "ridge": lambda: C.ridge_gd_step(2, 1, "eta", Fraction(1, 3), placed=True),
    "newton": lambda: C.newton_schulz_step(2, 2, placed=True),
    "horner": lambda: C.horner([1, 2, -3, 4, Fraction(1, 2)], placed=True),
}


@pytest.mark.parametrize("target", ["baseconv", "baseconv-causal", "baseconv-mlp", "lsa", "elsa"])
@pytest.mark.parametrize("builder", sorted(BUILDERS))
def test_every_builder_proves_on_every_target_reassociated(builder, target):
    from constructions.compiler import CompileError

    g = BUILDERS[builder]()
    try:
        old = compile_circuit(g, target=target, reassociate=False)
    except CompileError:
        with pytest.raises(CompileError):  # what cannot be compiled causally still cannot
            compile_circuit(g, target=target)
        return
    con = compile_circuit(g, target=target)
    assert_proved(prove(con))
    ra = con.info["compiled"]["reassociated"]
    assert ra["mult_depth_after"] <= ra["mult_depth_before"]
    if target == "baseconv-mlp":  # one layer per level there: never more layers
        assert len(con.epilogue) <= len(old.epilogue)


def test_cli_as_written_reproduces_the_old_layer_count(tmp_path):
    import io

    f = tmp_path / "h.json"
    C.dump(C.horner(HORNER8, placed=True), f)
    reps = {}
    for flag in ([], ["--as-written"]):
        rep = tmp_path / f"r{len(flag)}.json"
        out = io.StringIO()
        rc = main(["circuit", "--graph", str(f), "--json", str(rep), "--trials", "4", *flag], out=out)
        assert rc == 0, out.getvalue()
        reps[bool(flag)] = (json.loads(rep.read_text()), out.getvalue())
    (new, text_new), (old, text_old) = reps[False], reps[True]
    assert new["proof"]["ok"] and old["proof"]["ok"]
    assert old["compiled"]["layers"] == 7 and new["compiled"]["layers"] <= 5
    assert new["compiled"]["reassociated"]["ran"] is True
    assert (new["compiled"]["reassociated"]["mult_depth_before"],
            new["compiled"]["reassociated"]["mult_depth_after"]) == (7, 3)
    assert old["compiled"]["reassociated"] == {"ran": False}
    assert "multiplicative depth 7 -> 3" in text_new and "compiled as written" in text_old
    assert new["metrics"] == old["metrics"]  # the circuit as given, both ways


def test_large_circuits_compile_as_written_by_default(monkeypatch):
    import constructions.compiler as CC
    from verify.prover.proof import prove

    b = C.CircuitBuilder()
    t = b.input("t", token=0, channel=0)
    acc = b.const(Fraction(1, 6))
    for c in (Fraction(-1, 5), Fraction(1, 4), Fraction(-1, 3), Fraction(1, 2), 1):
        acc = b.add(b.mul(acc, t), b.const(c))  # Horner: depth 5 as written
    b.output(acc, "p")
    g = b.graph()
    import constructions.compiler.pipeline as pipeline

    monkeypatch.setattr(pipeline, "REASSOCIATE_MAX_GATES", 5)  # below this circuit's 10 gates (the compile reads it)
    con = CC.compile_circuit(g)
    ra = con.info["compiled"]["reassociated"]
    assert not ra["ran"] and "10 gates, more than 5" in ra["skipped"]
    assert prove(con).ok
    forced = CC.compile_circuit(g, reassociate=True)
    assert forced.info["compiled"]["reassociated"]["ran"]
    assert forced.info["compiled"]["layers"] < con.info["compiled"]["layers"]  # Estrin beats Horner
    assert prove(forced).ok
    plain = CC.compile_circuit(g, reassociate=False)
    assert "reassociated" not in plain.info["compiled"]
