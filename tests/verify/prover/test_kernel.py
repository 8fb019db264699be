"""The prover's trusted kernel (verify/prover/kernel.py): what a PROVED rests on, and who may make one.

* the kernel imports nothing but numpy, the standard library and two plain-data modules of
  ``constructions``; the files a PROVED trusts import nothing of failure diagnosis (``locate.py``:
  only inside the two functions that run after a section failed), of the randomized check, of the
  command line or of the reports;
* :func:`~verify.prover.kernel.conclude` is called only by the proof (``proof.py``); the randomized
  check and everything else cannot seal a result;
* a result PROVED by the kernel reads PROVED, also after a trip through pickle (proofs run in a
  child process); a result built by hand, or edited after the kernel sealed it, any object with an
  ``ok``, reads FAILED; a certified witness reads WITNESSED.
"""
from __future__ import annotations

import ast
import pickle
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from constructions.claims import ProofResult
from constructions.gd_baseconv import gd_baseconv
from verify.cli_common import holds, verdict_of
from verify.prover.kernel import Verdict, conclude, is_proved, verdict
from verify.prover.proof import prove

REPO = Path(__file__).resolve().parents[3]
PROVER = REPO / "verify" / "prover"

#: the files a PROVED trusts in verify/prover (docs/design.md, "What a PROVED trusts", lists them)
TRUSTED = ["kernel.py", "proof.py", "rings.py", "cover.py", "grouped.py", "token_groups.py", "power_sums.py",
           "flint_backend.py"]
#: what the trusted files must never import
UNTRUSTED = ("verify.prover.locate", "verify.prover.randomized", "verify.prover.randomized_bounds",
             "verify.prover.modular", "verify.prover.modp", "verify.cli_common", "verify.importers", "verify.gd_cmd",
             "verify.circuit_cmd", "verify.catalogue_cmd", "verify.construct", "verify.compare", "verify.comparison",
             "verify.export", "verify.errata", "verify.catalogue_report", "verify.compiler_report", "polyverify.plumbing.cli",
             "numerics")
#: the functions of proof.py that run only after a section failed, and may import diagnosis
DIAGNOSIS_FUNCTIONS = {"_section_failure", "_counterexample"}


def _imports(path: Path):
    """(absolute name, enclosing top-level function or None) of every import in ``path``: the module
    of ``import M``, ``P.name`` for each name of ``from P import name`` (a module or a member)."""
    tree = ast.parse(path.read_text())
    pkg = "verify.prover"
    out = []

    def visit(node, func):
        for child in ast.iter_child_nodes(node):
            f = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and func is None else func
            if isinstance(child, ast.Import):
                out.extend((a.name, func) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    base = ".".join(pkg.split(".")[: len(pkg.split(".")) - child.level + 1] + ([base] if base else []))
                out.extend((f"{base}.{a.name}", func) for a in child.names)  # from P import m: P.m
            visit(child, f)

    visit(tree, None)
    return out


def test_the_kernel_imports_only_numpy_the_standard_library_and_plain_data():
    allowed = {"__future__", "enum", "hashlib", "json", "dataclasses", "typing", "numpy", "constructions.ops",
               "constructions.claims"}
    got = {m for m, _ in _imports(PROVER / "kernel.py")}
    bad = {m for m in got if not any(m == a or m.startswith(a + ".") for a in allowed)}
    assert not bad, bad


@pytest.mark.parametrize("name", TRUSTED)
def test_a_trusted_file_imports_no_diagnosis_report_or_command_line(name):
    for module, func in _imports(PROVER / name):
        if module.startswith("verify.prover.locate.") and name == "proof.py" and func in DIAGNOSIS_FUNCTIONS:
            continue  # a section failed: the verdict is made, diagnosis runs after it
        assert not any(module == u or module.startswith(u + ".") for u in UNTRUSTED), (name, module, func)


def test_only_the_proof_seals_a_result():
    callers = set()
    for path in REPO.rglob("*.py"):
        if ".venv" in path.parts or "tests" in path.parts:
            continue
        if re.search(r"\bconclude\(", path.read_text()):
            callers.add(str(path.relative_to(REPO)))
    assert callers == {"verify/prover/kernel.py", "verify/prover/proof.py"}, callers


def test_design_doc_lists_the_trusted_files():
    text = (REPO / "docs" / "design.md").read_text()
    section = text.split("## What a PROVED trusts", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `verify/prover/(\w+\.py)` \|", section, flags=re.M))
    assert listed == set(TRUSTED), listed ^ set(TRUSTED)


@pytest.fixture(scope="module")
def proved():
    res = prove(gd_baseconv(4, 2))
    assert res.ok
    return res


def test_a_kernel_proof_reads_proved_also_after_pickle(proved):
    assert verdict(proved) is Verdict.PROVED and is_proved(proved)
    assert verdict(pickle.loads(pickle.dumps(proved))) is Verdict.PROVED
    assert verdict_of(proved) == ("proved", "PROVED") and holds(proved)


def test_a_result_built_by_hand_is_not_proved():
    forged = ProofResult("gd-baseconv", True, 0.0, sections={"prologue": True, "body": True, "epilogue": True},
                         entries_checked=10)
    assert verdict(forged) is Verdict.FAILED
    assert verdict_of(forged) == ("failed", "FAILED") and not holds(forged)
    forged.seal = "0" * 64  # a made-up seal
    assert verdict(forged) is Verdict.FAILED


@pytest.mark.parametrize("edit", [
    lambda r: r.sections.update(body=False),
    lambda r: setattr(r, "entries_checked", r.entries_checked + 1),
    lambda r: setattr(r, "construction", "another"),
    lambda r: setattr(r, "symbolic_cover", "edited"),
    lambda r: setattr(r, "ring", "full-edited"),
], ids=["section", "entries", "construction", "cover", "ring"])
def test_a_proof_edited_after_the_kernel_sealed_it_is_not_proved(edit):
    res = prove(gd_baseconv(4, 2))
    edit(res)
    assert verdict(res) is Verdict.FAILED


def test_a_failed_result_made_ok_is_not_proved():
    con = gd_baseconv(4, 2)
    bad = con.body[0].map(lambda w: w * 2)
    res = prove(con, sections={"prologue": con.prologue, "body": [bad, *con.body[1:]], "epilogue": con.epilogue})
    assert not res.ok and verdict(res) is Verdict.FAILED
    res.ok, res.failure = True, None
    res.sections = {k: True for k in res.sections}
    assert verdict(res) is Verdict.FAILED


@pytest.mark.parametrize("obj", [SimpleNamespace(ok=True), SimpleNamespace(ok=True, sections={}, failure=None), True])
def test_any_object_with_an_ok_is_not_proved(obj):
    assert verdict(obj) is Verdict.FAILED


def test_a_certified_witness_reads_witnessed_never_proved():
    from constructions.catalogue import entries
    from verify.prover.proof import check

    e = entries()["s000-softmax-square"]
    res = check(e.build(**e.sizes))
    assert res.ok and verdict(res) is Verdict.WITNESSED and not is_proved(res)
    assert verdict_of(res) == ("witnessed", "WITNESSED") and holds(res)
    assert conclude(res).seal == "" and verdict(res) is Verdict.WITNESSED  # a witness is never sealed


def test_design_doc_line_counts_are_the_files():
    """The table's line counts are the files' (a change to a file a PROVED trusts shows in the doc)."""
    text = (REPO / "docs" / "design.md").read_text()
    for name, n in re.findall(r"^\| `verify/prover/(\w+\.py)` \| (\d+) \|", text, flags=re.M):
        assert int(n) == len((PROVER / name).read_text().splitlines()), name
