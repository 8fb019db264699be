"""Every command's JSON report starts with ``"schema": "polyverify-report/1"`` (README "JSON reports")."""
import io
import json
from fractions import Fraction

import circuits as C
from polyverify.plumbing.cli import REPORT_SCHEMA, report_json
from verify.construct import main


def _first(path):
    rep = json.loads(path.read_text())
    return next(iter(rep)), rep


def test_report_json_puts_the_schema_first_and_writes_what_json_cannot_hold_as_text():
    rep = json.loads(report_json({"x": Fraction(1, 3), "schema_like": 1}))
    assert list(rep)[0] == "schema" and rep["schema"] == REPORT_SCHEMA == "polyverify-report/1"
    assert rep["x"] == "1/3"


def test_gd_catalogue_and_circuit_reports_carry_the_schema(tmp_path):
    g = tmp_path / "g.json"
    C.dump(C.gd_step(3, 2, Fraction(1, 16), placed=True), g)
    runs = {"gd": ["gd", "--layers", "4", "--n", "4", "--d", "2", "--batch", "4", "--quiet"],
            "entry": ["s004-gd"], "circuit": ["circuit", "--graph", str(g)]}
    for name, argv in runs.items():
        out = tmp_path / f"{name}.json"
        assert main([*argv, "--json", str(out)], out=io.StringIO()) == 0
        key, rep = _first(out)
        assert key == "schema" and rep["schema"] == REPORT_SCHEMA, name


def test_the_readme_documents_the_schema():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert "### JSON reports" in text and REPORT_SCHEMA in text
