"""The linearisation (constructions/compiler/linearise.py) and the re-association's forms, which sum
into an add's operand in place where the add is its last consumer: the forms must equal the circuit."""
import random
from fractions import Fraction

import pytest

import circuits as C
from circuits.random import random_circuit
from constructions.compiler import linearise as Lz
from constructions.compiler.reassociate import reassociate


def _value(form, atoms, point, memo):
    def atom(a):
        if a not in memo:
            t = atoms[a]
            memo[a] = point[t[1]] if t[0] == "input" else _value(t[1], atoms, point, memo) * _value(t[2], atoms,
                                                                                                     point, memo)
        return memo[a]

    return sum((c if a == Lz.CONST else c * atom(a) for a, c in form.items()), Fraction(0))


@pytest.mark.parametrize("seed", range(24))
def test_forms_equal_the_circuit_at_random_points(seed):
    rng = random.Random(seed)
    g = C.validate(random_circuit(seed, n_inputs=rng.randint(1, 5), n_gates=rng.randint(5, 200),
                                  n_outputs=rng.randint(1, 4), max_arity=rng.randint(2, 5), max_degree=6))
    Lz._MEMO.clear()
    atoms, _, outputs = Lz.linearise(g)
    h = reassociate(g)
    for _ in range(3):
        point = {n: Fraction(rng.randint(-9, 9), rng.randint(1, 5)) for n in C.inputs(g)}
        want = C.evaluate(g, point)
        assert {o: _value(f, atoms, point, {}) for o, f in outputs.items()} == want
        assert C.evaluate(h, point) == want


def test_a_chain_of_adds_over_shared_operands():
    """x + y feeds both a chain of adds (its last consumer sums into it in place) and a product
    formed earlier: the product must keep x + y, not the chain's sum."""
    g = C.validate(_chain())
    Lz._MEMO.clear()
    atoms, _, outputs = Lz.linearise(g)
    point = {"x": Fraction(2), "y": Fraction(3), "z": Fraction(5)}
    assert {o: _value(f, atoms, point, {}) for o, f in outputs.items()} == C.evaluate(g, point)
    assert C.evaluate(reassociate(g), point) == C.evaluate(g, point)


def _chain():
    import networkx as nx

    g = nx.DiGraph()
    for n in ("x", "y", "z"):
        g.add_node(n, op="input", name=n)
    g.add_node("s", op="add")
    g.add_edges_from([("x", "s"), ("y", "s")])
    g.add_node("p", op="mul")  # (x + y) * z, formed before the chain reuses s's form
    g.add_edges_from([("s", "p"), ("z", "p")])
    g.add_node("t1", op="add")
    g.add_edges_from([("s", "t1"), ("z", "t1")])
    g.add_node("t2", op="add")
    g.add_edges_from([("t1", "t2"), ("x", "t2")])
    g.add_node("q", op="mul", output="q")
    g.add_edges_from([("p", "q"), ("t2", "q")])
    g.add_node("r", op="mul", output="r")
    g.add_edges_from([("s", "r"), ("t2", "r")])
    return g
