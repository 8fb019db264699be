"""Size / depth / width / degree (seed 000 Def. D.15) on hand-checked circuits."""
from fractions import Fraction

import networkx as nx
import pytest
import sympy
from hypothesis import given

from circuits import CircuitBuilder, dot, formal_degrees, gd_step, horner, levels, metrics, polynomials

from tests.strategies import circuits_st


def test_square_with_mult():
    # y = x * x as ONE edge x -> mul with mult 2.
    # size 2 (the wire counts twice), depth 1, cut 0 meets that wire twice -> width 2,
    # degree 1 + 1 = 2, one gate, one input.
    b = CircuitBuilder()
    x = b.input("x")
    b.output(b.mul(x, x), "y")
    assert metrics(b.graph()) == dict(n_inputs=1, size=2, depth=1, width=2, degree=2, n_gates=1)


def test_dot2():
    # u0,u1,v0,v1 (level 0) -> m0 = u0 v0, m1 = u1 v1 (level 1) -> y = m0 + m1 (level 2)
    # size: 4 input wires + 2 = 6; depth 2; cut 0: 4 wires, cut 1: 2 wires -> width 4;
    # degree 2; gates m0, m1, y = 3.
    assert metrics(dot(2)) == dict(n_inputs=4, size=6, depth=2, width=4, degree=2, n_gates=3)


def test_long_wire_crosses_several_cuts():
    # y = x z + x.  m = x*z (level 1), a = m + x (level 2).
    # wires: x->m (0->1), z->m (0->1), m->a (1->2), x->a (0->2): size 4, depth 2.
    # cut 0: x->m, z->m, x->a = 3; cut 1: m->a, x->a = 2 -> width 3. degree 2.
    b = CircuitBuilder()
    x, z = b.input("x"), b.input("z")
    m = b.mul(x, z)
    b.output(b.add(m, x), "y")
    g = b.graph()
    assert levels(g) == {x: 0, z: 0, m: 1, m + 1: 2}
    assert metrics(g) == dict(n_inputs=2, size=4, depth=2, width=3, degree=2, n_gates=2)


def test_horner_quadratic():
    # horner([1, 2, 3]): ids t=0, c3=1, c2=2, m1=t*c3 (3, lvl 1), a1=c2+m1 (4, lvl 2),
    # c1=5, m2=t*a1 (6, lvl 3), p=c1+m2 (7, lvl 4).  8 wires, depth 4.
    # cut 0: t->3, 1->3, 2->4, t->6, 5->7 = 5; cut 1: 2->4, 3->4, t->6, 5->7 = 4;
    # cut 2: t->6, 4->6, 5->7 = 3; cut 3: 6->7, 5->7 = 2 -> width 5.  degree 2, 4 gates.
    g = horner([1, 2, 3])
    assert metrics(g) == dict(n_inputs=1, size=8, depth=4, width=5, degree=2, n_gates=4)
    assert formal_degrees(g)[7] == 2


def test_gd_step_1x1():
    # gd_step(1, 1, 1/2): m1 = A x (lvl 1), m2 = (-1) b (lvl 1), r = m1 + m2 (lvl 2),
    # g = A r (lvl 3), s = (-1/2) g (lvl 4), out = x + s (lvl 5).
    # 12 wires; depth 5; cuts: 0: A->m1, x->m1, -1->m2, b->m2, A->g, -1/2->s, x->out = 7,
    # 1: 5, 2: 4, 3: 3, 4: 2 -> width 7.  degree: A*(A x) = 3.  6 gates, 3 inputs.
    g = gd_step(1, 1, Fraction(1, 2))
    assert metrics(g) == dict(n_inputs=3, size=12, depth=5, width=7, degree=3, n_gates=6)


def test_constant_only_circuit():
    g = nx.DiGraph()
    g.add_node(0, op="const", value=5, output="c")
    assert metrics(g) == dict(n_inputs=0, size=0, depth=0, width=0, degree=0, n_gates=0)


def test_formal_degree_is_an_upper_bound_under_cancellation():
    # y = x*z + (-1)*(x*z): formal degree 2, but the polynomial is 0.
    b = CircuitBuilder()
    x, z = b.input("x"), b.input("z")
    m = b.mul(x, z)
    b.output(b.add(m, b.mul(b.const(-1), m)), "y")
    g = b.graph()
    assert metrics(g)["degree"] == 2
    assert polynomials(g) == {"y": 0}


def test_metrics_prunes_dead_nodes_before_counting():
    b = CircuitBuilder()
    x = b.input("x")
    b.mul(x, x)  # dead
    b.output(b.add(x, x), "y")
    with pytest.warns(UserWarning, match="pruned 1 node"):
        m = metrics(b._g)
    assert m == dict(n_inputs=1, size=2, depth=1, width=2, degree=1, n_gates=1)


@given(circuits_st())
def test_metric_invariants_on_random_circuits(g):
    m = metrics(g)
    size = sum(d.get("mult", 1) for *_, d in g.edges(data=True))
    assert m["size"] == size
    assert m["depth"] == nx.dag_longest_path_length(g)
    assert (m["width"] >= 2) == (m["depth"] >= 1) and m["width"] <= size
    true_deg = max(sympy.Poly(p, *sympy.symbols(f"x0:{m['n_inputs']}")).total_degree()
                   for p in polynomials(g).values())
    assert true_deg <= m["degree"]
