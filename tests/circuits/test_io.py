"""Node-link JSON in and out (circuits.io)."""
import copy
import json
from fractions import Fraction

import pytest
from hypothesis import given, settings

from circuits import CircuitError, dump, horner, load, polynomials, ridge_gd_step

from tests.strategies import circuits_st

DOC = {
    "directed": True,
    "multigraph": False,
    "graph": {},
    "nodes": [
        {"id": 0, "op": "input", "name": "x"},
        {"id": "c", "op": "const", "value": "-3/4"},
        {"id": 2, "op": "const", "value": "5"},
        {"id": 3, "op": "mul"},
        {"id": 4, "op": "add", "output": "y"},
    ],
    "links": [
        {"source": 0, "target": 3, "mult": 2},
        {"source": "c", "target": 3},
        {"source": 3, "target": 4},
        {"source": 2, "target": 4},
    ],
}  # y = -3/4 x^2 + 5


def y_of(g):
    return str(polynomials(g)["y"])


def test_load_dict_with_links_pq_and_int_string():
    g = load(copy.deepcopy(DOC))
    assert g.nodes["c"]["value"] == Fraction(-3, 4) and g.nodes[2]["value"] == 5
    assert g.edges[0, 3]["mult"] == 2
    assert y_of(g) == "5 - 3*x**2/4"


def test_load_edges_key():
    doc = copy.deepcopy(DOC)
    doc["edges"] = doc.pop("links")
    assert y_of(load(doc)) == "5 - 3*x**2/4"


def test_dump_format():
    data = dump(load(copy.deepcopy(DOC)))
    assert "links" in data and "edges" not in data
    nodes = {n["id"]: n for n in data["nodes"]}
    assert nodes["c"]["value"] == "-3/4" and nodes[2]["value"] == 5
    links = {(e["source"], e["target"]): e for e in data["links"]}
    assert links[0, 3]["mult"] == 2 and "mult" not in links["c", 3]
    json.dumps(data)  # plain JSON


def test_file_round_trip(tmp_path):
    g = ridge_gd_step(2, 2, Fraction(1, 3), "lam")
    path = tmp_path / "ridge.json"
    data = dump(g, path)
    assert json.loads(path.read_text()) == data
    g2 = load(path)
    assert polynomials(g2) == polynomials(g)
    assert load(str(path)).nodes(data=True) == g2.nodes(data=True)


def test_round_trip_through_edges_key_as_written_by_networkx_default():
    data = dump(horner([Fraction(1, 2), -1, 3]))
    data["edges"] = data.pop("links")
    assert polynomials(load(json.loads(json.dumps(data)))) == polynomials(horner([Fraction(1, 2), -1, 3]))


def mutate(fn):
    doc = copy.deepcopy(DOC)
    fn(doc)
    return doc


BAD = [
    (lambda d: d["nodes"][1].update(value=0.75), "node 'c': const value 0.75 is not exact (float)"),
    (lambda d: d["nodes"][1].update(value="3/4.0"), "not an integer or 'p/q' string"),
    (lambda d: d["nodes"][1].update(value="1/0"), "zero denominator"),
    (lambda d: d["nodes"][1].update(value=True), "bool"),
    (lambda d: d["nodes"][3].update(op="pow"), "node 3: unknown op 'pow'"),
    (lambda d: d["nodes"][0].pop("name"), "node 0: input missing attribute 'name'"),
    (lambda d: d["nodes"][4].pop("output"), "no outputs"),
    (lambda d: d["links"].append({"source": 4, "target": 3}), "cycle"),
    (lambda d: d["links"].append({"source": 4, "target": 99}), "links[4] target 99 is not a node id"),
    (lambda d: d["links"].append({"source": 0, "target": 3}), "node 3: duplicate edge from 0"),
    (lambda d: d["links"].append({"target": 3}), "links[4] must be an object with 'source' and 'target'"),
    (lambda d: d["links"][0].update(mult=1.5), "node 3: operand 0 has invalid mult 1.5"),
    (lambda d: d["nodes"].append({"id": 0, "op": "input", "name": "z"}), "node 0: duplicate node id"),
    (lambda d: d["nodes"].append({"op": "input", "name": "z"}), "nodes[5] must be an object with an 'id'"),
    (lambda d: d["nodes"].append({"id": [1], "op": "input", "name": "z"}), "nodes[5] id [1] must be an int or str"),
    (lambda d: d.update(directed=False), "'directed' must be true"),
    (lambda d: d.update(multigraph=True), "multigraphs are not supported"),
    (lambda d: d.update(edges=[]), "not both"),
    (lambda d: d.update(nodes={}), "'nodes' must be a list"),
    (lambda d: d.update(links={}), "'links' must be a list"),
    (lambda d: d.update(graph=[]), "'graph' must be an object"),
]


@pytest.mark.parametrize("fn,expected", BAD)
def test_malformed_documents_rejected(fn, expected):
    with pytest.raises(CircuitError) as ei:
        load(mutate(fn))
    assert expected in str(ei.value)
    assert "\n" not in str(ei.value)


def test_malformed_files_rejected(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"nodes": [}')
    with pytest.raises(CircuitError, match=r"bad.json: invalid JSON: .* line 1 column \d+$"):
        load(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(CircuitError, match="must be an object, got list"):
        load(bad)
    with pytest.raises(CircuitError, match="cannot read .*missing.json"):
        load(tmp_path / "missing.json")


def test_dump_validates():
    doc = copy.deepcopy(DOC)
    g = load(doc)
    g.nodes[3]["op"] = "div"
    with pytest.raises(CircuitError, match="node 3: unknown op 'div'"):
        dump(g)


@settings(deadline=None)
@given(circuits_st())
def test_json_round_trip_preserves_polynomials(g):
    text = json.dumps(dump(g))
    g2 = load(json.loads(text))
    assert set(g2.nodes) == set(g.nodes)
    assert polynomials(g2) == polynomials(g)
