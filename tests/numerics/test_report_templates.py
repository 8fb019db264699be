"""The experiment reports' prose is data: each ``numerics/experiments/*_report.py`` fills the named templates
of its ``*_text.py`` (``TEXT``) with the numbers it computes.  Read from the sources: every template a report
names exists and is given exactly the values it reads, every template is used, and no sentence is left in a
report's code outside its figure (``plot``)."""
from __future__ import annotations

import ast
import importlib
import string
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENTS = ROOT / "numerics" / "experiments"
REPORTS = sorted(p.stem for p in EXPERIMENTS.glob("*_report.py"))


def _text_module(report: str):
    return importlib.import_module(f"numerics.experiments.{report.removesuffix('_report')}_text")


def _fields(template: str) -> set[str]:
    return {name.split(".")[0].split("[")[0] for _, name, _, _ in string.Formatter().parse(template) if name is not None}


def _names(node) -> list[str] | None:
    """The template names a ``say`` call's first argument can take (a literal, or a conditional of literals)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.IfExp):
        a, b = _names(node.body), _names(node.orelse)
        return None if a is None or b is None else a + b
    return None


def _say_calls(tree) -> list[tuple[int, list[str] | None, set[str]]]:
    return [(n.lineno, _names(n.args[0]), {k.arg for k in n.keywords})
            for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "say"]


def _users(report: str) -> list[Path]:
    """The modules that fill ``report``'s templates: the report and any module of the package importing its
    text module (``seed000_table7_long.py`` writes the long cells' part of seed000-table7's section)."""
    text = report.removesuffix("_report") + "_text"
    return [p for p in sorted(EXPERIMENTS.glob("*.py"))
            if p.stem == report or (p.stem != text and f"from .{text} import" in p.read_text())]


def _docstrings(tree) -> set[int]:
    return {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and ast.get_docstring(n) is not None}


def test_every_report_has_its_templates():
    assert REPORTS == ["seed000_table7_report", "seed002_ntk_report", "seed003_mqar_report", "seed004_table1_report"]
    for report in REPORTS:
        assert isinstance(_text_module(report).TEXT, dict)


@pytest.mark.parametrize("report", REPORTS)
def test_each_template_is_given_exactly_the_values_it_reads(report):
    text = _text_module(report).TEXT
    for key, template in text.items():
        fields = _fields(template)
        assert "" not in fields, f"{key}: a positional field; name every value"
    for path in _users(report):
        calls = _say_calls(ast.parse(path.read_text()))
        assert calls, f"{path.name} fills no template"
        for line, names, given in calls:
            where = f"{path.name}:{line}"
            assert names is not None, f"{where}: say() names its template by an expression"
            for name in names:
                assert name in text, f"{where}: no template {name!r}"
                read = _fields(text[name])
                assert read <= given, f"{where}: {name!r} reads {sorted(read - given)}, not given"
                if len(names) == 1:
                    assert given <= read, f"{where}: {name!r} is given {sorted(given - read)}, never read"


@pytest.mark.parametrize("report", REPORTS)
def test_every_template_is_used(report):
    text = _text_module(report).TEXT
    literals = {n.value for path in _users(report) for n in ast.walk(ast.parse(path.read_text()))
                if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    unused = [k for k in text if k not in literals and not any(p.endswith(".") and k.startswith(p) for p in literals)]
    assert unused == [], f"{report}: templates no code fills: {unused}"


@pytest.mark.parametrize("report", REPORTS)
def test_no_sentence_is_left_in_the_report_code(report):
    """A string of six or more words in a report module (not a docstring, a table row or the figure's labels)
    is prose that belongs in its templates."""
    tree = ast.parse((EXPERIMENTS / f"{report}.py").read_text())
    skip = _docstrings(tree)
    for f in ast.walk(tree):
        if isinstance(f, ast.FunctionDef) and (f.name == "plot" or f.name.startswith("_plot")):
            skip |= {id(n) for n in ast.walk(f)}
    prose = [(n.lineno, n.value) for n in ast.walk(tree)
             if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip
             and len(n.value.split()) >= 6 and not n.value.lstrip().startswith("|")]
    assert prose == [], f"{report}: prose in code: {prose}"


def test_the_check_catches_prose_and_a_missing_value(tmp_path):
    """The two source checks fail on a report that writes a sentence itself or gives a template too little."""
    tree = ast.parse('def markdown(s):\n    return "This sentence is written in the code itself." + '
                     'say("cost", timing=1)\n')
    assert any(isinstance(n, ast.Constant) and len(str(n.value).split()) >= 6 for n in ast.walk(tree))
    ((_, names, given),) = _say_calls(tree)
    assert names == ["cost"] and given == {"timing"}
    mqar_text = importlib.import_module("numerics.experiments.seed003_mqar_text").TEXT
    assert _fields(mqar_text["cost"]) - given == {"per", "carried"}
