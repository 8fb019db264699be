"""Placed circuits (circuits.placement): checks, JSON round trip, placed builders."""
import copy
import json
import warnings
from fractions import Fraction

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import circuits
from circuits import (
    CircuitBuilder,
    CircuitError,
    Placement,
    PrunedNodesWarning,
    dot,
    dump,
    evaluate,
    gd_step,
    horner,
    inputs,
    load,
    matvec,
    newton_schulz_step,
    placement,
    random_circuit,
    ridge_gd_step,
    validate,
)
from circuits.placement import PLACE_ATTRS

# z = x*w + 2 + (x + w); x at (0, 0), w at (1, 0); outputs y (node 3), z (node 4)
BASE = {
    "directed": True,
    "multigraph": False,
    "graph": {},
    "nodes": [
        {"id": 0, "op": "input", "name": "x", "token": 0, "channel": 0},
        {"id": 1, "op": "input", "name": "w", "token": 1, "channel": 0},
        {"id": 2, "op": "const", "value": 2},
        {"id": 3, "op": "mul", "output": "y"},
        {"id": 4, "op": "add", "output": "z"},
        {"id": 5, "op": "add"},
    ],
    "links": [
        {"source": 0, "target": 3}, {"source": 1, "target": 3},
        {"source": 0, "target": 5}, {"source": 1, "target": 5},
        {"source": 3, "target": 4}, {"source": 2, "target": 4}, {"source": 5, "target": 4},
    ],
}


def doc(graph=None, **node_edits):
    """BASE with ``node_edits = {"n<id>": {attr: value or DEL}}`` and graph attributes."""
    d = copy.deepcopy(BASE)
    d["graph"].update(graph or {})
    nodes = {n["id"]: n for n in d["nodes"]}
    for key, edits in node_edits.items():
        nd = nodes[int(key[1:])]
        for k, v in edits.items():
            if v is DEL:
                nd.pop(k, None)
            else:
                nd[k] = v
    return d


DEL = object()
UNPLACE = {"token": DEL, "channel": DEL}

ERRORS = [  # (id, document, substrings of the message)
    ("two inputs on one place", doc(n1={"token": 0}), ["node 1 (input 'w')", "(0, 0)", "node 0 (input 'x')"]),
    ("two outputs on one place", doc(n3={"token": 0, "channel": 2}, n4={"token": 0, "channel": 2}),
     ["node 4 (output 'z')", "(0, 2)", "node 3 (output 'y')"]),
    ("negative token", doc(n0={"token": -1}), ["node 0 (input 'x')", "negative"]),
    ("negative output channel", doc(n3={"token": 0, "channel": -2}), ["node 3 (output 'y')", "negative"]),
    ("float token", doc(n0={"token": 1.0}), ["node 0 (input 'x')", "token 1.0 is not an int"]),
    ("str channel", doc(n1={"channel": "0"}), ["node 1 (input 'w')", "not an int"]),
    ("bool token", doc(n0={"token": True}), ["node 0 (input 'x')", "bool"]),
    ("null channel", doc(n0={"channel": None}), ["node 0 (input 'x')", "not an int"]),
    ("token without channel", doc(n1={"channel": DEL}), ["node 1 (input 'w')", "no channel"]),
    ("channel without token", doc(n4={"channel": 3}), ["node 4 (output 'z')", "no token"]),
    ("place on a gate that is not an output", doc(n5={"token": 0, "channel": 4}), ["node 5 (add gate)", "neither"]),
    ("place on a const that is not an output", doc(n2={"token": 0, "channel": 4}), ["node 2 (const)", "neither"]),
    ("output_token on a gate", doc(n3={"output_token": 0, "output_channel": 1}),
     ["node 3 (output 'y')", "output_token"]),
    ("output_channel on a const", doc(n2={"output_channel": 1}), ["node 2 (const)", "output_channel"]),
    ("output place on an input that is no output", doc(n0={"output_token": 0, "output_channel": 1}),
     ["node 0 (input 'x')", "not an output"]),
    ("output_token without output_channel", doc(n0={"output": "x", "output_token": 0}),
     ["node 0 (input 'x', output 'x')", "no output_channel"]),
    ("float output_channel", doc(n0={"output": "x", "output_token": 0, "output_channel": 1.0}),
     ["node 0 (input 'x', output 'x')", "output_channel 1.0 is not an int"]),
    ("pass-through output on a taken output place",
     doc(n0={"output": "x", "output_token": 0, "output_channel": 2}, n3={"token": 0, "channel": 2}),
     ["output place (0, 2)", "node 0 (input 'x', output 'x')", "node 3 (output 'y')"]),
    ("mix of placed and unplaced inputs", doc(n1=UNPLACE), ["node 1 (input 'w')", "no place", "node 0 (input 'x')"]),
    ("placed output, unplaced inputs", doc(n0=UNPLACE, n1=UNPLACE, n4={"token": 0, "channel": 0}),
     ["node 4 (output 'z')", "inputs do not"]),
    ("tokens zero", doc({"tokens": 0}), ["graph attribute tokens = 0", "positive int"]),
    ("tokens float", doc({"tokens": 2.0}), ["graph attribute tokens = 2.0", "positive int"]),
    ("channels bool", doc({"channels": True}), ["graph attribute channels = True", "positive int"]),
    ("channels str", doc({"channels": "3"}), ["graph attribute channels = '3'", "positive int"]),
    ("tokens too small for an input", doc({"tokens": 1}), ["node 1 (input 'w')", "tokens = 1", "needs >= 2"]),
    ("channels too small for an output", doc({"channels": 3}, n4={"token": 0, "channel": 5}),
     ["node 4 (output 'z')", "channels = 3", "needs >= 6"]),
    ("grid without places", doc({"tokens": 3}, n0=UNPLACE, n1=UNPLACE), ["graph attribute tokens = 3", "no input"]),
]


@pytest.mark.parametrize("data,words", [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_bad_places_are_refused_naming_the_node(data, words):
    for how in (lambda: load(copy.deepcopy(data)), lambda: validate(nx.node_link_graph(data, edges="links"))):
        with pytest.raises(CircuitError) as e:
            how()
        msg = str(e.value)
        assert "\n" not in msg
        for w in words:
            assert w in msg, (w, msg)


def test_valid_base_and_defaults():
    p = placement(load(copy.deepcopy(BASE)))
    assert p == Placement(2, 1, {"w": (1, 0), "x": (0, 0)}, {"y": None, "z": None})
    # outputs placed, grid enlarged, output on an input's place, numpy ints normalised
    g = nx.node_link_graph(doc({"tokens": np.int64(4), "channels": 7}, n3={"token": 0, "channel": 0},
                               n4={"token": np.int32(3), "channel": 2}), edges="links")
    h = validate(g)
    assert placement(h) == Placement(4, 7, {"w": (1, 0), "x": (0, 0)}, {"y": (0, 0), "z": (3, 2)})
    assert type(h.nodes[4]["token"]) is int and type(h.graph["tokens"]) is int
    assert type(g.nodes[4]["token"]) is np.int32  # the argument is not modified


def test_unplaced_circuits_have_no_placement():
    assert placement(load(doc(n0=UNPLACE, n1=UNPLACE))) is None
    for g in (dot(2), matvec(2, 2), gd_step(2, 1, "eta"), horner([1, 2]), random_circuit(3)):
        assert placement(g) is None


def test_places_on_pruned_nodes_do_not_matter():
    d = doc()
    d["nodes"].append({"id": 9, "op": "mul", "token": -1})  # dead gate, bad place
    d["links"] += [{"source": 0, "target": 9}, {"source": 1, "target": 9}]
    with pytest.warns(PrunedNodesWarning):
        g = load(d)
    assert 9 not in g and placement(g).tokens == 2


def test_zero_input_circuit_with_placed_output():
    b = CircuitBuilder()
    b.output(b.add(b.const(1), b.const(2)), "c", token=1, channel=2)
    assert placement(b.graph()) == Placement(2, 3, {}, {"c": (1, 2)})


def test_builder_places_pass_through_outputs_on_output_attributes():
    b = CircuitBuilder()
    x = b.input("x", token=0, channel=0)
    b.output(x, "x", token=0, channel=0)
    b.grid(channels=2)
    g = b.graph()
    assert g.nodes[x] == {"op": "input", "name": "x", "token": 0, "channel": 0, "output": "x",
                          "output_token": 0, "output_channel": 0}
    assert placement(g) == Placement(1, 2, {"x": (0, 0)}, {"x": (0, 0)})


# --------------------------------------------------------------------------- JSON


def json_round_trip(g):
    return load(json.loads(json.dumps(dump(g))))


def same_graph(g, h):
    assert dict(g.nodes(data=True)) == dict(h.nodes(data=True))
    assert {(u, v): m for u, v, m in g.edges(data="mult", default=1)} == \
        {(u, v): m for u, v, m in h.edges(data="mult", default=1)}  # dump leaves out mult=1
    assert g.graph == h.graph


def test_dump_load_keeps_places_and_grid(tmp_path):
    g = gd_step(2, 2, "eta", placed=True)
    data = dump(g)
    assert data["graph"] == {"tokens": 3, "channels": 5}
    nodes = {n["id"]: n for n in data["nodes"]}
    a = next(n for n in nodes.values() if n.get("name") == "A_1_0")
    assert (a["token"], a["channel"], a["output_token"], a["output_channel"]) == (1, 0, 1, 0)
    h = json_round_trip(g)
    same_graph(g, h)
    assert placement(h) == placement(g)
    dump(g, tmp_path / "c.json")
    same_graph(g, load(tmp_path / "c.json"))


def test_json_float_place_refused_from_a_file(tmp_path):
    data = dump(dot(2, placed=True))
    next(n for n in data["nodes"] if n.get("name") == "v1")["token"] = 1.0
    (tmp_path / "c.json").write_text(json.dumps(data))
    with pytest.raises(CircuitError, match=r"^node \d+ \(input 'v1'\): token 1\.0 is not an int"):
        load(tmp_path / "c.json")
    next(n for n in data["nodes"] if n.get("name") == "v1")["token"] = 1
    data["graph"]["tokens"] = 2.0
    (tmp_path / "c.json").write_text(json.dumps(data))
    with pytest.raises(CircuitError, match=r"^graph attribute tokens = 2\.0 must be a positive int$"):
        load(tmp_path / "c.json")
    data["graph"]["tokens"] = 2
    (tmp_path / "c.json").write_text(json.dumps(data))
    assert placement(load(tmp_path / "c.json")).tokens == 2


@st.composite
def placed_random_circuits(draw):
    n_in = draw(st.integers(0, 5))
    n_gates = draw(st.integers(1, 6))
    n_out = draw(st.integers(1, min(3, n_gates)))
    g = random_circuit(draw(st.integers(0, 2**16)), n_in, n_gates, n_outputs=n_out)
    tokens, channels = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    while tokens * channels < max(n_in, n_out):
        tokens += 1
    cells = [(t, c) for t in range(tokens) for c in range(channels)]
    g = g.copy()
    in_cells = draw(st.permutations(cells))
    for k, n in enumerate(sorted(n for n, op in g.nodes(data="op") if op == "input")):
        g.nodes[n].update(token=in_cells[k][0], channel=in_cells[k][1])
    out_cells = draw(st.permutations(cells))
    for k, n in enumerate(sorted(n for n, o in g.nodes(data="output") if o is not None)):
        if (n_in == 0 and k == 0) or draw(st.booleans()):  # with no inputs, place at least one output
            pre = "output_" if g.nodes[n]["op"] == "input" else ""
            g.nodes[n].update({pre + "token": out_cells[k][0], pre + "channel": out_cells[k][1]})
    if draw(st.booleans()):
        g.graph.update(tokens=tokens + draw(st.integers(0, 2)), channels=channels)
    return g


@settings(deadline=None)
@given(placed_random_circuits())
def test_random_placed_circuits_round_trip_through_json(g):
    g = validate(g)
    p = placement(g)
    h = json_round_trip(g)
    same_graph(g, h)
    assert placement(h) == p
    if p is not None:
        assert set(p.inputs) == set(inputs(g))
        assert len(set(p.inputs.values())) == len(p.inputs)
        assert all(0 <= t < p.tokens and 0 <= c < p.channels for t, c in p.inputs.values())


# --------------------------------------------------------------------------- builders


def values(g, seed=0):
    rng = np.random.default_rng(seed)
    return {n: Fraction(int(rng.integers(-5, 6)), int(rng.integers(1, 4))) for n in inputs(g)}


def strip(g, *, outputs_too=False):
    """Node/graph data without the places (and, optionally, pass-through outputs of inputs)."""
    nodes = {}
    for n, d in g.nodes(data=True):
        d = {k: v for k, v in d.items() if k not in PLACE_ATTRS}
        if outputs_too and d["op"] == "input":
            d.pop("output", None)
        nodes[n] = d
    return nodes, {(u, v): d for u, v, d in g.edges(data=True)}


GD_ARGS = [(2, 2, Fraction(1, 3)), (3, 2, "eta"), (1, 1, "e")]
RIDGE_ARGS = [(2, 2, Fraction(1, 3), Fraction(1, 5)), (2, 1, "eta", Fraction(1, 2)),
              (2, 2, Fraction(1, 4), "lam"), (3, 2, "eta", "lam")]
CASES = (
    [(dot, (n,)) for n in (1, 3)] + [(matvec, mn) for mn in ((1, 1), (2, 3), (3, 2))]
    + [(gd_step, a) for a in GD_ARGS] + [(ridge_gd_step, a) for a in RIDGE_ARGS]
    + [(newton_schulz_step, dn) for dn in ((1, 1), (2, 3), (3, 2))]
    + [(horner, ([Fraction(1, 2), -3, 0, 2],)), (horner, ([7],))]
)
STEPS = (gd_step, ridge_gd_step, newton_schulz_step)


@pytest.mark.parametrize("build,args", CASES, ids=[f"{b.__name__}{a}" for b, a in CASES])
def test_placed_builders_evaluate_like_the_plain_ones(build, args):
    plain = build(*args)
    assert placement(plain) is None
    kw = {"keep_data": False} if build in STEPS else {}
    bare = build(*args, placed=True, **kw)
    assert strip(bare) == strip(plain)  # same nodes, ids, names, values and wires
    full = build(*args, placed=True)
    assert strip(full, outputs_too=True) == strip(plain)
    x = values(plain)
    want = evaluate(plain, x)
    assert evaluate(bare, x) == want
    got = evaluate(full, x)
    if build in STEPS:  # keep_data: every input is also an output, in place
        assert set(got) == set(want) | set(x)
        assert all(got[k] == x[k] for k in set(x) - set(want))
        assert placement(full).outputs == placement(full).inputs
        assert evaluate(build(*args, keep_data=True), x) == got
    else:
        assert got == want
    assert placement(json_round_trip(full)) == placement(full)


def grid(g):
    p = placement(g)
    return p.tokens, p.channels


def test_dot_and_matvec_layouts():
    p = placement(dot(3, placed=True))
    assert (p.tokens, p.channels) == (3, 3)
    assert p.inputs == {**{f"u{i}": (i, 0) for i in range(3)}, **{f"v{i}": (i, 1) for i in range(3)}}
    assert p.outputs == {"y": (0, 2)}
    p = placement(matvec(2, 3, placed=True))
    assert (p.tokens, p.channels) == (3, 4)
    assert p.inputs == {**{f"A_{i}_{j}": (i, j) for i in range(2) for j in range(3)},
                        **{f"x_{j}": (2, j) for j in range(3)}}
    assert p.outputs == {"y_0": (0, 3), "y_1": (1, 3)}


@pytest.mark.parametrize("build", [gd_step, ridge_gd_step])
def test_gd_layout(build):
    n, d = 3, 2
    params = ("eta",) if build is gd_step else ("eta", Fraction(1, 2))
    g = build(n, d, *params, placed=True)
    p = placement(g)
    assert (p.tokens, p.channels) == (n + 1, 2 * d + 1) == (g.graph["tokens"], g.graph["channels"])
    want = {f"A_{i}_{j}": (i, j) for i in range(n) for j in range(d)}
    want.update({f"b_{i}": (i, d) for i in range(n)})
    want.update({f"x_{j}": (n, d + 1 + j) for j in range(d)})
    want["eta"] = (n, d)
    assert p.inputs == want and p.outputs == want
    q = placement(build(n, d, *params, placed=True, keep_data=False))
    assert q.inputs == want and q.outputs == {f"x_{j}": (n, d + 1 + j) for j in range(d)}
    assert grid(build(n, d, *([Fraction(1, 3)] * len(params)), placed=True)) == (n + 1, 2 * d + 1)


def test_ridge_string_parameters():
    n, d = 2, 2
    assert placement(ridge_gd_step(n, d, Fraction(1, 3), "lam", placed=True)).inputs["lam"] == (n, d)
    p = placement(ridge_gd_step(n, d, "eta", "lam", placed=True))
    assert p.inputs["eta"] == (n, d) and p.inputs["lam"] == (n, 0) and p.outputs["lam"] == (n, 0)


@pytest.mark.parametrize("d,n", [(2, 3), (3, 2)])
def test_newton_schulz_layout(d, n):
    p = placement(newton_schulz_step(d, n, placed=True))
    assert (p.tokens, p.channels) == (max(n, d), 2 * d)
    want = {f"A_{i}_{j}": (i, j) for i in range(n) for j in range(d)}
    want.update({f"M_{i}_{j}": (i, d + j) for i in range(d) for j in range(d)})
    assert p.inputs == want and p.outputs == want


def test_horner_layout():
    assert placement(horner([1, 2, 3], placed=True)) == Placement(1, 2, {"t": (0, 0)}, {"p": (0, 1)})


def test_placed_steps_repeat_as_bodies():
    """Feeding a placed step's outputs back by place gives two steps."""
    g = gd_step(2, 2, "eta", placed=True)
    p = placement(g)
    x = values(g, 1)
    once = evaluate(g, x)
    by_place = {p.outputs[k]: v for k, v in once.items()}
    twice = evaluate(g, {k: by_place[p.inputs[k]] for k in p.inputs})
    assert twice == evaluate(g, once)  # outputs are on their inputs' places, same names


@pytest.mark.parametrize("kw", [{"placed": 1}, {"placed": None}, {"keep_data": "yes"}])
def test_builder_flags_must_be_bools(kw):
    with pytest.raises(CircuitError, match="must be True or False"):
        gd_step(1, 1, 1, **kw)


def test_exports():
    assert circuits.placement is placement and "Placement" in circuits.__all__ and "placement" in circuits.__all__


def test_place_inputs_lays_the_inputs_column_by_column():
    from circuits.random import random_circuit

    g = random_circuit(1, 7, 20)
    h = circuits.place_inputs(g, 3)
    pl = circuits.placement(h)
    assert (pl.tokens, pl.channels) == (3, 3)
    assert pl.inputs == {n: (k % 3, k // 3) for k, n in enumerate(circuits.inputs(g))}
    assert circuits.placement(g) is None  # the argument is not changed
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="tokens must be an integer >= 1"):
            circuits.place_inputs(g, bad)
