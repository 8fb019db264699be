"""constructions/compiler/info.py: the compile's typed report.  ``CompileInfo.to_json()`` (and the
whole ``con.info``) must be what the dict-building compiler wrote, byte for byte as the circuit
command's ``--json`` dumps it: ``data/compile_info_before.json`` was recorded from that compiler
(``tests/constructions/compile_info_cases.py``), over every target and every re-association outcome."""
from __future__ import annotations

import dataclasses
import json

import pytest

from constructions.compiler.info import (ABSENT, CHOICE_TEXT, CompileInfo, Reassociation, ReassociationChoice)

from tests.constructions.compile_info_cases import RECORD, cases, compile_case, dumped

RECORDED = json.loads(RECORD.read_text())
CASES = {name: (g, kw, constants) for name, g, kw, constants in cases()}


def test_every_recorded_case_is_still_a_case():
    assert sorted(CASES) == sorted(RECORDED)


@pytest.mark.parametrize("name", sorted(CASES))
def test_to_json_is_the_dict_the_old_compiler_built(name, monkeypatch):
    g, kw, constants = CASES[name]
    con = compile_case(g, kw, constants, monkeypatch.setattr)
    assert isinstance(con.compile_info, CompileInfo)
    assert json.dumps(con.compile_info.to_json(), indent=1, default=str) == RECORDED[name]["compiled"]
    assert dumped(con) == RECORDED[name]  # info["compiled"] and the whole info, as the CLI writes them


def test_every_reassociation_outcome_is_recorded(monkeypatch):
    seen = set()
    for g, kw, constants in CASES.values():
        with monkeypatch.context() as m:
            ra = compile_case(g, kw, constants, m.setattr).compile_info.reassociation
        seen.add("as written on request" if ra is None else ra.choice if ra.ran else "skipped")
    assert seen == {*ReassociationChoice, "skipped", "as written on request"}


def test_the_passes_record_an_enum_and_the_english_is_rendered_from_it(monkeypatch):
    g, kw, constants = CASES["gd-eta-input-baseconv"]
    ra = compile_case(g, kw, constants, monkeypatch.setattr).compile_info.reassociation
    assert ra.choice is ReassociationChoice.NOT_SMALLER and ra.choice.as_written
    assert ra.rewritten_cost == (4, 10)
    assert ra.describe() == CHOICE_TEXT[ra.choice].format(refused=None, rewritten_layers=4, rewritten_width=10,
                                                          gates=None, limit=None)


def test_the_report_is_frozen_and_its_json_a_fresh_copy(monkeypatch):
    g, kw, constants = CASES["horner8-lsa"]
    con = compile_case(g, kw, constants, monkeypatch.setattr)
    ci = con.compile_info
    with pytest.raises(dataclasses.FrozenInstanceError):
        ci.layers = 0
    with pytest.raises(TypeError):
        ci.bound["layers"] = 0
    out = ci.to_json()
    out["plan"].append("x")
    out["bound"]["layers"] = -1
    out.setdefault("reassociated", {})["ran"] = "changed"
    assert ci.to_json() == con.info["compiled"] != out  # neither the record nor con.info moved


def test_setting_compile_info_rewrites_info_compiled(monkeypatch):
    g, kw, constants = CASES["dot-baseconv-mlp"]
    con = compile_case(g, kw, constants, monkeypatch.setattr)
    con.compile_info = dataclasses.replace(con.compile_info, reassociation=Reassociation.skipped(12, 5))
    assert con.info["compiled"]["reassociated"] == {
        "ran": False, "skipped": "the circuit has 12 gates, more than 5: compiled as written by default above that "
                                 "size (re-association forced: reassociate=True, --reassociate)"}


def test_bad_records_are_refused():
    with pytest.raises(ValueError, match="unknown compile report form 'grid'"):
        CompileInfo("grid", "baseconv", layers=1, tokens=1, state_width=1)
    with pytest.raises(ValueError, match="needs a ReassociationChoice"):
        Reassociation(ran=True, choice="re-associated")
    assert "bound" not in CompileInfo("mlp", "baseconv-mlp", layers=1, tokens=1, state_width=2).to_json()
    assert repr(ABSENT) == "ABSENT"
