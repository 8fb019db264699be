"""verify/compiler_trace.py: which circuit node sits at each (token, channel) of every
layer's state (tracr's residual labels), found by random evaluation modulo a prime.

Every compiled stack here is proved exactly first (the labels are for reading, the proof is the
verdict); the labels are then checked against the placement (input state), the outputs (final
state), the circuit's products (BaseConv inner channels) and, independently of the modular
arithmetic, against the exact state of the stack on random rationals.
"""
from __future__ import annotations

import io
import json
from fractions import Fraction

import networkx as nx
import numpy as np
import pytest

import circuits as C
from constructions.compiler import CompileError, compile_circuit
from verify import compiler_trace as TR
from verify import circuit_cmd
from verify.construct import main as construct_main
from verify.prover.proof import prove

from tests.support import assert_proved

P = 2_147_483_647
CIRCUITS = {
    "gd_step": lambda: C.gd_step(3, 2, Fraction(1, 16), placed=True),
    "dot": lambda: C.dot(4, placed=True),
    "matvec": lambda: C.matvec(3, 2, placed=True),
}
TARGETS = ("baseconv", "baseconv-causal", "lsa", "elsa")
#: the refusals by design: dot's and matvec's outputs sit at token 0 and read later tokens, which a causal
#: convolution cannot move to an earlier token (docs/compiler.md, table (a)); any other refusal fails
REFUSED = {("dot", "baseconv-causal"), ("matvec", "baseconv-causal")}
_CACHE: dict = {}


def compiled(name: str, target: str):
    """The proved compile of a builder on a target (None: the compiler refuses it, e.g. causal)."""
    key = (name, target)
    if key not in _CACHE:
        g = C.validate(CIRCUITS[name]())
        try:
            con = compile_circuit(g, name=name, target=target)
        except CompileError:
            assert key in REFUSED, f"{target} refuses {name}, which it should compile"
            _CACHE[key] = None
        else:
            assert_proved(prove(con))
            _CACHE[key] = (g, con, TR.trace(con, seed=1))
    if _CACHE[key] is None:
        pytest.skip(reason=f"{target} refuses {name} by design: an output before a token it reads (causal)")
    return _CACHE[key]


def node_cells(lt) -> dict:
    return {tc: set(lab.nodes) for tc, lab in lt.cells.items() if lab.kind == "node"}


def genuine_products(g) -> list:
    """The mul gates with at least two non-constant operands (counted with mult): products a
    BaseConv layer must form (a product by a constant is an affine map, folded into W)."""
    return [v for v, d in g.nodes(data=True) if d["op"] == "mul"
            and sum(m for u, m in C.operands(g, v) if g.nodes[u]["op"] != "const") >= 2]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", sorted(CIRCUITS))
def test_input_state_labels_are_the_placement(name, target):
    g, con, tr = compiled(name, target)
    lt = tr.layers[0]
    assert lt.layer == 0 and lt.kind == "input" and lt.shape == con.layout.shape
    by_name = {d["name"]: v for v, d in g.nodes(data=True) if d["op"] == "input"}
    assert node_cells(lt) == {slot: {by_name[nm]} for nm, slot in con.input_slots.items()}
    # the rest of the input state is the constant block of the lsa input map, labelled as constants
    rest = {tc: lab for tc, lab in lt.cells.items() if lab.kind != "node"}
    assert rest == {tc: TR.Label("const", (), Fraction(v)) for tc, v in (con.constants or {}).items()}
    assert len(tr.layers) == len(con.layers(0)) + 1
    assert tr.draws >= 3 and tr.error_bound <= 1e-9 and tr.prime == P


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", sorted(CIRCUITS))
def test_final_state_holds_the_output_nodes_and_nothing_else(name, target):
    g, con, tr = compiled(name, target)
    last = tr.layers[-1]
    outs = C.output_nodes(g)
    cells = node_cells(last)
    for nm, slot in con.output_slots.items():
        assert outs[nm] in cells.get(slot, set()), (nm, slot, last.cells.get(slot))
    extra = {tc for tc, lab in last.cells.items() if lab.kind != "const"} - set(con.output_slots.values())
    assert not extra
    assert [v for v in outs.values()] and all(tr.find(v) for v in outs.values())


@pytest.mark.parametrize("target", ("baseconv", "baseconv-causal"))
@pytest.mark.parametrize("name", sorted(CIRCUITS))
def test_every_product_node_is_formed_by_an_inner_channel(name, target):
    g, con, tr = compiled(name, target)
    if "token_sum_form" in con.info["compiled"]["bound"]:
        # the causal token-sum compile forms per-token products of the expanded outputs, not the circuit's
        # product gates: what it forms is checked by its proof (tests/constructions/test_compiler_causal_token_sums.py)
        assert target == "baseconv-causal" and all(lt.kind == "baseconv" for lt in tr.layers[1:])
        return
    prods = genuine_products(g)
    assert prods and set(prods) <= tr.products()
    assert all(lt.kind == "baseconv" and lt.inner is not None for lt in tr.layers[1:])
    # a product of two non-constant sides is labelled with the nodes whose product it is
    for lt in tr.layers[1:]:
        for _, (gl, zl, pl) in tr.inner_items(lt.layer):
            if TR.is_product(gl, zl) and pl.kind == "node" and gl.kind == zl.kind == "node":
                v = next(iter(pl.nodes))
                ops = {u for u, _ in C.operands(g, v)} if v in g else set()
                assert not ops or (set(gl.nodes) | set(zl.nodes)) & ops


def _exact_nodes(g, xs: dict) -> dict:
    val = {}
    for v in nx.topological_sort(g):
        d = g.nodes[v]
        if d["op"] == "input":
            val[v] = xs[d["name"]]
        elif d["op"] == "const":
            val[v] = Fraction(d["value"])
        else:
            acc = None
            for u, m in C.operands(g, v):
                for _ in range(m):
                    acc = val[u] if acc is None else (acc + val[u] if d["op"] == "add" else acc * val[u])
            val[v] = acc
    return val


@pytest.mark.parametrize("target", ("baseconv", "lsa"))
def test_labels_agree_with_the_exact_stack_on_rationals(target):
    """Independent of the modular arithmetic: the stack run exactly (Fractions, its own forward)
    at a random rational point holds, at every labelled cell, the labelled node's value (or its
    multiple, or the constant), and zero at every unlabelled cell."""
    g, con, tr = compiled("gd_step", target)
    rng = np.random.default_rng(7)
    xs = {nm: Fraction(int(rng.integers(-50, 50)), int(rng.integers(1, 9))) for nm in C.inputs(g)}
    val = _exact_nodes(g, xs)
    states = [con.input_state(xs)]
    con.run(xs, 0, state=states[0], on_layer=lambda i, S: states.append(S))
    assert len(states) == len(tr.layers)
    for S, lt in zip(states, tr.layers):
        for t in range(lt.shape[0]):
            for c in range(lt.shape[1]):
                x = Fraction(S[t, c])
                lab = lt.cells.get((t, c))
                if lab is None:
                    assert x == 0, (lt.layer, t, c)
                elif lab.kind == "node":
                    assert all(val[v] == x for v in lab.nodes), (lt.layer, t, c)
                elif lab.kind == "scaled":
                    assert all(lab.coef * val[v] == x for v in lab.nodes), (lt.layer, t, c)
                elif lab.kind == "const":
                    assert x == lab.coef


def test_index_labels_exact_scaled_constant_zero_and_other():
    idx = TR.Index(P)
    v = np.array([5, 17, 123456], dtype=np.int64)
    w = np.array([9, 4, 77], dtype=np.int64)
    idx.add({"v": v, "w": w, "k": np.array([3, 3, 3], dtype=np.int64)})  # a constant node is not indexed
    inv3 = pow(3, -1, P)
    cols = np.stack([v, 2 * v % P, (P - v) * inv3 % P, np.zeros(3, np.int64), np.full(3, 7 * inv3 % P),
                     (v + w) % P, w], axis=1)
    lab = idx.label(cols)
    assert lab[0] == TR.Label("node", ("v",))
    assert lab[1] == TR.Label("scaled", ("v",), Fraction(2))
    assert lab[2] == TR.Label("scaled", ("v",), Fraction(-1, 3))
    assert 3 not in lab  # zero: empty
    assert lab[4] == TR.Label("const", (), Fraction(7, 3))
    assert lab[5] == TR.OTHER
    assert lab[6] == TR.Label("node", ("w",))
    assert TR.rational(P - 1, P) == -1 and TR.rational(pow(16, -1, P), P) == Fraction(1, 16)
    assert TR.rational(987_654_321, P) is None  # no rational with |a|, b <= sqrt(p / 2) has this residue
    assert TR.rational(1 << 30, P) == Fraction(1, 2)  # 2^31 = 1 mod p


def test_more_draws_lower_the_bound_and_fewer_are_refused():
    _, con, tr = compiled("gd_step", "baseconv")
    two = TR.trace(con, draws=2)
    assert two.error_bound > tr.error_bound and two.draws == 2
    assert TR.trace(con, draws=5).error_bound < tr.error_bound
    with pytest.raises(ValueError, match="at least 2"):
        TR.trace(con, draws=1)


def _rewritten_dot2():
    """dot(2) written as (u0 + u1)(v0 + v1) - u0 v1 - u1 v0: the same polynomial, with no node
    u0 v0 or u1 v1 (which a compile of ``dot(2)`` forms)."""
    g = nx.DiGraph()
    ref = C.validate(C.dot(2, placed=True))
    for v, d in ref.nodes(data=True):
        if d["op"] == "input":
            g.add_node(d["name"], **d)
    g.add_node("su", op="add")
    g.add_edges_from([("u0", "su"), ("u1", "su")])
    g.add_node("sv", op="add")
    g.add_edges_from([("v0", "sv"), ("v1", "sv")])
    for a, b in (("su", "sv"), ("u0", "v1"), ("u1", "v0")):
        g.add_node(a + b, op="mul")
        g.add_edges_from([(a, a + b), (b, a + b)])
    g.add_node("m", op="const", value=Fraction(-1))
    out = next(d for _, d in ref.nodes(data=True) if d.get("output") == "y")
    g.add_node("y", op="add", output="y", token=out["token"], channel=out["channel"])
    g.add_edge("susv", "y")
    for t in ("u0v1", "u1v0"):
        g.add_node("n" + t, op="mul")
        g.add_edges_from([("m", "n" + t), (t, "n" + t), ("n" + t, "y")])
    g.graph.update(ref.graph)
    return C.validate(g), ref


def test_compiled_graph_names_the_values_the_given_circuit_lacks():
    g, ref = _rewritten_dot2()
    assert C.polynomials(g) == C.polynomials(ref)
    con = compile_circuit(ref, name="dot2", target="baseconv")
    con.graph = g  # the proof compares with the circuit as given: it still holds
    assert_proved(prove(con))
    plain = TR.trace(con)
    assert not plain.products() & set(g)  # u0 v0 is no node of g
    con.compiled_graph = ref
    tr = TR.trace(con)
    keys = {tr.compiled[v] for v in genuine_products(ref)}
    assert keys <= tr.products() and all(k[0] == "compiled" for k in keys)
    assert all(tr.names[k].startswith("c:p") for k in keys)
    js = json.loads(json.dumps(tr.to_json()))
    assert any(n[0] == ["compiled", k[1]] for n in js["nodes"] for k in keys)


def test_json_is_bounded_and_tables_are_cut():
    _, con, tr = compiled("gd_step", "baseconv")
    full = tr.to_json()
    assert not full["truncated"] and [e["layer"] for e in full["layers"]] == list(range(len(tr.layers)))
    assert full["layers"][0]["cells"] and full["layers"][1]["inner"]
    json.dumps(full)
    small = tr.to_json(max_cells=20)
    assert small["truncated"] and any(e.get("truncated") for e in small["layers"])
    assert all("cells" not in e for e in small["layers"] if e.get("truncated"))
    text = "\n".join(tr.table(1, max_tokens=2, max_channels=2, max_inner=1))
    assert "showing 2 of" in text and "shown, products first" in text
    md = tr.markdown(1)
    assert md[0].startswith("| t \\ c |") and len([ln for ln in md if ln.startswith("| ")]) == 1 + con.layout.shape[0]


# ------------------------------------------------------------------ the circuit command

@pytest.fixture(scope="module")
def gd_file(tmp_path_factory):
    f = tmp_path_factory.mktemp("trace") / "gd.json"
    C.dump(C.gd_step(3, 2, Fraction(1, 16), placed=True), f)
    return f


def test_cli_trace_prints_tables_and_the_json_holds_them(tmp_path, gd_file):
    rep, png = tmp_path / "r.json", tmp_path / "sub" / "occupancy.png"
    out = io.StringIO()
    rc = construct_main(["circuit", "--graph", str(gd_file), "--trials", "4", "--float-trials", "0", "--trace",
                         "--json", str(rep), "--plot", str(png)], out=out)
    text = out.getvalue()
    assert rc == 0, text
    assert "layer 0: input state" in text and "inner (" in text and "any label wrong with probability" in text
    r = json.loads(rep.read_text())
    tr = r["compiled"]["trace"]
    assert len(tr["layers"]) == r["compiled"]["layers"] + 1 and tr["error_bound"] <= 1e-9
    names = {n[0]: n[1] for n in tr["nodes"]}
    placed = {(t, c): [names[i] for i in ids] for t, c, ids in tr["layers"][0]["cells"]}
    assert len(placed) == 11 and placed[(0, 0)] == ["A_0_0"] and placed[(1, 2)] == ["b_1"] and placed[(3, 4)] == ["x_1"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 1000


def test_cli_without_trace_adds_nothing(tmp_path, gd_file):
    rep = tmp_path / "r.json"
    out = io.StringIO()
    assert construct_main(["circuit", "--graph", str(gd_file), "--trials", "2", "--float-trials", "0",
                           "--json", str(rep)], out=out) == 0
    assert "trace" not in json.loads(rep.read_text())["compiled"] and "layer 0:" not in out.getvalue()


@pytest.mark.parametrize("plot, words", [
    ("{tmp}", "is a folder"),
    ("{tmp}/plot.txt", "not a .png file name"),
    ("{tmp}/afile/plot.png", "not a folder"),
    ("", "not a file name"),
])
def test_cli_bad_plot_paths_exit_2_before_any_work(tmp_path, gd_file, capsys, monkeypatch, plot, words):
    (tmp_path / "afile").write_text("x")
    monkeypatch.setattr(circuit_cmd, "compile_circuit", lambda *a, **k: pytest.fail("compiled before the check"))
    out = io.StringIO()
    rc = construct_main(["circuit", "--graph", str(gd_file), "--plot", plot.format(tmp=tmp_path)], out=out)
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: ") and err.count("\n") == 1 and words in err, err
    assert out.getvalue() == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_report_section_renders_the_example_and_its_png(tmp_path):
    from verify import compiler_report as cr
    from verify import compiler_report_sections as sections

    ex = cr.trace_example()
    tr = ex.pop("_trace")
    assert ex["proved"] and len(ex["tables"]) == ex["layers"] + 1 and ex["error_bound"] <= 1e-9
    json.dumps(ex)
    text = "\n".join(sections._section_trace(ex))
    assert "## Inspection" in text and f"]({cr.TRACE_PNG})" in text and "| t \\ c |" in text
    assert "A\\_0\\_0 x x\\_0 = p" in text  # the first product of the GD step, read off its inner channel
    png = tr.plot(tmp_path / "docs" / cr.TRACE_PNG)
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert sections._section_trace(None) == []
