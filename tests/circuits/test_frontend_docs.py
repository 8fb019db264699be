"""docs/frontend_example.py, the example of docs/compiler.md's section "From Python and sympy": the
doc shows the script's code (the section is verify/compiler_report_frontend.py's, which the report
generator writes), and the script runs as written (every circuit proved on every target it names,
then one refusal naming np.sqrt and the script's line)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from verify import compiler_report_frontend as frontend_doc

ROOT = Path(__file__).resolve().parents[2]


def test_the_compiler_doc_shows_the_section_and_the_scripts_code():
    text = (ROOT / "docs" / "compiler.md").read_text()
    assert "\n".join(frontend_doc.section()) in text
    block = re.search(r"```python\n(.*?)```", text[text.index(frontend_doc.TITLE):], re.S)[1]
    assert block.rstrip("\n") == frontend_doc.example_code()
    assert "frontend_example.py" in frontend_doc.EXAMPLE.name


def test_the_report_generator_writes_the_section():
    from verify import compiler_report_sections as sections

    res = {"cells": [], "gd": [], "mode": "quick"}
    mach = {k: "-" for k in ("platform", "cpu", "cpu_count", "python", "generated")}
    assert "\n".join(frontend_doc.section()) in sections.markdown(res, "python -m verify.compiler_report", mach)


def test_the_readme_mentions_the_front_ends():
    readme = (ROOT / "README.md").read_text()
    assert "circuits.from_function" in readme and "circuits.from_sympy" in readme


def test_the_example_runs_as_written(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = subprocess.run([sys.executable, str(frontend_doc.EXAMPLE)], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    rows = [re.fullmatch(r"(\w+) on (\S+): (\d+) layers, (\w+)", s) for s in lines[:-1]]
    assert all(rows) and {(m[1], m[2]) for m in rows} == {
        ("gd", "baseconv"), ("gd", "lsa"), ("gd", "elsa"), ("poly", "baseconv"), ("poly", "baseconv-causal")}
    assert all(m[4] == "PROVED" and int(m[3]) >= 1 for m in rows)
    code = frontend_doc.EXAMPLE.read_text().splitlines()
    line = next(i for i, s in enumerate(code, 1) if "np.sqrt" in s)
    assert lines[-1].startswith("from_function: np.sqrt at ") and f"frontend_example.py:{line} (" in lines[-1]
