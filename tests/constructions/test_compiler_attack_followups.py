"""Compiler cases a red-team run found: a channel budget on a one-token grid, a causal
budget the re-associated circuit cannot meet though the circuit as given can, the frontier of
such a circuit, and an unbounded --channels."""
from __future__ import annotations

import io
import json
from pathlib import Path

import networkx as nx
import pytest

import circuits as C
from constructions.compiler import compile_circuit
from constructions.compiler.budget import minimum_channels
from verify.construct import main as construct_main
from verify.prover.proof import prove

from tests.support import assert_proved

DATA = Path(__file__).parent / "data"


def _one_cell(op: str) -> nx.DiGraph:
    g = nx.DiGraph(tokens=1, channels=1)
    g.add_node(0, op="input", name="x", token=0, channel=0)
    if op == "square":
        g.add_node(1, op="mul", output="y", token=0, channel=0)
        g.add_edge(0, 1, mult=2)
    else:
        g.add_node(2, op="const", value=3)
        g.add_node(1, op="add", output="y", token=0, channel=0)
        g.add_edges_from([(0, 1), (2, 1)])
    return C.validate(g)


@pytest.mark.parametrize("op", ["square", "shift"])
@pytest.mark.parametrize("channels", [5, 7, 8])
def test_a_budget_on_a_one_token_grid_compiles_within_its_bound(op, channels):
    """K = ceil(log2 1) = 0 made the level-parallel bound negative and the compile assert."""
    con = compile_circuit(_one_cell(op), target="baseconv", channels=channels)
    cm = con.info["compiled"]
    assert 0 < cm["layers"] <= cm["bound"]["layers"] and cm["state_width"] <= channels
    assert_proved(prove(con))


def test_a_causal_budget_the_rewritten_circuit_cannot_meet_falls_back_to_the_circuit_as_given():
    g = C.load(DATA / "causal_budget_reassociated_refused.json")
    least = minimum_channels(g, True)
    con = compile_circuit(g, target="baseconv-causal", channels=least)
    ra = con.info["compiled"]["reassociated"]
    assert ra["chosen"].startswith("as written"), ra
    assert con.info["compiled"]["state_width"] <= least
    assert_proved(prove(con))


def test_the_causal_frontier_of_that_circuit_is_printed(tmp_path):
    out, rep = io.StringIO(), tmp_path / "r.json"
    rc = construct_main(["circuit", "--graph", str(DATA / "causal_budget_reassociated_refused.json"),
                         "--target", "baseconv-causal", "--pareto", "--trials", "4", "--float-trials", "0",
                         "--json", str(rep)], out=out)
    assert rc == 0 and "frontier" in out.getvalue()
    assert json.loads(rep.read_text())["pareto"]


@pytest.mark.parametrize("value", ["2000", "99999999999999999999"])
def test_channels_beyond_the_limit_are_refused_up_front(tmp_path, value, capsys):
    g = tmp_path / "c.json"
    C.dump(_one_cell("shift"), g)
    assert construct_main(["circuit", "--graph", str(g), "--channels", value], out=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--channels" in err and "--allow-large" in err


def test_min_width_with_a_channel_budget_is_refused_not_dropped():
    with pytest.raises(ValueError, match="min_width"):
        compile_circuit(_one_cell("square"), target="baseconv", channels=5, min_width=9)
