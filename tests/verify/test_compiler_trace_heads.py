"""verify/compiler_trace.py on attention (issue 43 item 5): one line per LSA/ELSA head naming the
product it forms (its query, key and value sides' labels) and the cells it writes, and a printed
table whose column cut keeps the channels that changed in that layer.

Every compile here is proved exactly first; the head labels are then checked against the circuit
(every head that multiplies two non-constant sides writes a gate of the circuit), against the
layer (every changed cell of the state is written by a head of the layer's last stage) and against
the exact stack on rationals (a head's sides and writes, summed, are the layer's output).
"""
from __future__ import annotations

import io
import json
from fractions import Fraction

import pytest

import circuits as C
from constructions.compiler import compile_circuit
from verify import compiler_trace as TR
from verify.construct import main as construct_main
from verify.prover.proof import prove

from tests.support import assert_proved

CIRCUITS = {
    "newton_schulz_step": lambda: C.newton_schulz_step(2, 3, placed=True),
    "gd_step": lambda: C.gd_step(3, 2, Fraction(1, 16), placed=True),
}
_CACHE: dict = {}


def compiled(name: str, target: str):
    key = (name, target)
    if key not in _CACHE:
        g = C.validate(CIRCUITS[name]())
        con = compile_circuit(g, name=name, target=target)
        assert_proved(prove(con))
        _CACHE[key] = (g, con, TR.trace(con, seed=3))
    return _CACHE[key]


def gates(g) -> set:
    return {v for v, d in g.nodes(data=True) if d["op"] in ("mul", "add")}


def non_constant(cells: dict) -> bool:
    return any(lab.kind != "const" for lab in cells.values())


CASES = [(n, t) for n in sorted(CIRCUITS) for t in ("lsa", "elsa")]


@pytest.mark.parametrize("name,target", CASES)
def test_every_head_names_the_circuit_product_it_forms(name, target):
    g, con, tr = compiled(name, target)
    attn = [lt for lt in tr.layers[1:] if lt.kind in ("lsa", "elsa")]
    assert attn and all(lt.heads for lt in attn)
    assert all(lt.heads is None for lt in tr.layers if lt.kind not in ("lsa", "elsa"))
    products = 0
    for lt in attn:
        stages = sorted({hd.stage for hd in lt.heads})
        assert stages == list(range(len(stages)))
        for hd in lt.heads:
            line = tr.head_line(hd)
            assert line.startswith(f"  head {hd.stage}.{hd.head}: q [") and " -> " in line
            assert hd.writes, f"layer {lt.layer} head {hd.stage}.{hd.head} writes nothing"
            for lab in hd.writes.values():  # every label names nodes of the circuit (or its rewrite)
                assert all(n in tr.names for n in lab.nodes)
            sides = [hd.q, hd.k, hd.v]
            if sum(non_constant(s) for s in sides) >= 2:  # it multiplies: some cell it writes is a circuit gate
                products += 1
                written = {n for lab in hd.writes.values() if lab.kind in ("node", "scaled") for n in lab.nodes}
                assert written & gates(g), line
                assert any(tr.name(lab) in line for lab in hd.writes.values())
    assert products, "no head of the compile forms a product"
    # every genuine product of the circuit some state holds is a product a head formed (or a value it copied)
    assert tr.head_products() & gates(g)


@pytest.mark.parametrize("name,target", CASES)
def test_every_changed_cell_is_written_by_a_head_of_the_last_stage(name, target):
    _, con, tr = compiled(name, target)
    for i, lt in enumerate(tr.layers[1:], start=1):
        last = max(hd.stage for hd in lt.heads)
        written = {tc for hd in lt.heads if hd.stage == last for tc in hd.writes}
        assert tr.changed(i) <= written


@pytest.mark.parametrize("name,target", CASES)
def test_each_layers_table_shows_a_changed_cell(name, target):
    _, con, tr = compiled(name, target)
    for i, lt in enumerate(tr.layers):
        changed = tr.changed(i)
        if i == 0:
            assert not changed
        for limit in (1, 2, 12):
            text = tr.table(i, max_channels=limit, max_tokens=limit)
            head = text[1].split()  # "t\c" then the channels shown, a changed one marked *
            shown = {int(c.rstrip("*")) for c in head[1:]}
            assert len(shown) <= limit
            if changed:
                assert any(c in shown for _, c in changed), (i, limit, text)
                assert any(c.endswith("*") for c in head[1:])
                assert f"{len(changed)} changed by this layer" in text[0]
            heads = [ln for ln in text if ln.startswith("  head ")]
            assert len(heads) == min(len(lt.heads or ()), 8)


def test_newton_schulz_on_lsa_no_longer_prints_identical_rows():
    """The issue's case: ns on lsa printed layers 1-3 with the same 12 channels; the cut now keeps
    the channels each layer wrote."""
    _, con, tr = compiled("newton_schulz_step", "lsa")
    assert con.layout.shape[1] > 12
    rows = ["\n".join(tr.table(i, max_channels=6)[1:]) for i in range(1, len(tr.layers))]
    assert len(set(rows)) == len(rows)


def test_heads_sum_to_the_layer_on_the_exact_stack():
    """Independent of the labels' arithmetic: on a random rational point, each last-stage head's
    writes with node labels agree with the exact state (where one head alone writes a cell that
    was empty before, the state holds what the head wrote)."""
    g, con, tr = compiled("gd_step", "lsa")
    for i, lt in enumerate(tr.layers[1:], start=1):
        last = max(hd.stage for hd in lt.heads)
        count: dict = {}
        for hd in lt.heads:
            if hd.stage == last:
                for tc in hd.writes:
                    count[tc] = count.get(tc, 0) + 1
        before = tr.layers[i - 1].cells
        for hd in lt.heads:
            if hd.stage != last:
                continue
            for tc, lab in hd.writes.items():
                if count[tc] == 1 and tc not in before and lab.kind == "node":
                    assert lt.cells.get(tc) == lab, (i, tc)


def test_json_holds_every_head_and_the_cli_prints_them(tmp_path):
    _, con, tr = compiled("gd_step", "elsa")
    js = tr.to_json()
    json.dumps(js)
    for e, lt in zip(js["layers"], tr.layers):
        assert ("heads" in e) == (lt.heads is not None)
        if lt.heads:
            assert [(h["stage"], h["head"]) for h in e["heads"]] == [(hd.stage, hd.head) for hd in lt.heads]
            assert all(h["writes"] for h in e["heads"])
    f = tmp_path / "gd.json"
    C.dump(CIRCUITS["gd_step"](), f)
    out = io.StringIO()
    rc = construct_main(["circuit", "--graph", str(f), "--target", "lsa", "--trials", "2", "--float-trials", "0",
                         "--trace", "--json", str(tmp_path / "r.json")], out=out)
    text = out.getvalue()
    assert rc == 0, text
    assert "  heads: " in text and "  head 0.0: q [" in text and "changed by this layer" in text
    rep = json.loads((tmp_path / "r.json").read_text())
    assert any(e.get("heads") for e in rep["compiled"]["trace"]["layers"])
