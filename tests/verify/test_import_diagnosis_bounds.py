"""import's diagnosis after a FAILED verdict is bounded and never ends the command (issue 41): a candidate
specification whose build passes the search's memory limit is named as not tried and the search goes on; a
diagnosis step that breaks is one line after the verdict, which stands (exit 1); the diagnosis children are held to
the memory the verdict used (prove.diagnosis_memory_gib)."""
from __future__ import annotations

import io
import json
from types import SimpleNamespace

import pytest

from verify.construct import main

from tests.verify.import_files import precision_ls_notebook, save_pt

pytest.importorskip("torch", reason="precision-ls files are torch state_dicts")

PLS = ["--from", "precision-ls", "--spec", "baseconv"]


def _failed_file(tmp_path):
    p = tmp_path / "w.pt"
    save_pt(p, precision_ls_notebook(2, 4, 0.1, 2, causal=True), {"causal": True})  # not GD: FAILED
    return p


def test_a_candidate_past_the_memory_limit_is_named_not_tried(tmp_path, monkeypatch):
    import verify.importers.prove as P

    real = P._candidate

    def heavy(name, entry, st, mod):
        if name == "prefix-coupled":
            raise MemoryError  # what the address-space limit makes of its build
        return real(name, entry, st, mod)

    monkeypatch.setattr(P, "_candidate", heavy)  # the candidates are decided in forked children: they see this
    out = io.StringIO()
    rc = main(["import", str(_failed_file(tmp_path)), *PLS, "--json", str(tmp_path / "r.json")], out=out)
    text = out.getvalue()
    assert rc == 1, text
    line = next(x for x in text.splitlines() if "not tried" in x)
    assert "prefix-coupled" in line and "memory limit" in line
    rep = json.loads((tmp_path / "r.json").read_text())
    assert {"specification": "prefix-coupled", "why": "building it at the file's sizes passed the search's memory "
                                                     "limit"} in rep["nearby_not_tried"]
    assert "nearby_stopped" not in rep and rep["verdict"]["ok"] is False


@pytest.mark.parametrize("step", ["_nearby", "for_import"])
def test_a_diagnosis_that_breaks_is_a_line_and_the_verdict_stands(tmp_path, monkeypatch, step):
    import verify.functional_distance as FD
    import verify.importers.prove as P

    def broken(*a, **k):
        raise TypeError("a fault")

    monkeypatch.setattr(P if step == "_nearby" else FD, step, broken)
    out = io.StringIO()
    rc = main(["import", str(_failed_file(tmp_path)), *PLS, "--json", str(tmp_path / "r.json")], out=out)
    text = out.getvalue()
    assert rc == 1, text
    what = "nearby search" if step == "_nearby" else "functional distance"
    line = next(x for x in text.splitlines() if f"{what} stopped" in x)
    assert "TypeError: a fault" in line and "the verdict above stands" in line
    assert text.index("verdict: FAILED") < text.index(line)


def test_the_diagnosis_memory_is_the_verdicts_addition_within_the_bounds():
    from verify.importers.prove import DIAGNOSIS_MIN_GIB, _rss_bytes, diagnosis_memory_gib

    a = SimpleNamespace(proof_memory_gib=8.0)
    here = _rss_bytes("VmSize")  # the bound is the verdict's peak less this process's address space
    assert diagnosis_memory_gib(a, here + 3 * 2 ** 30) == pytest.approx(3.0, abs=0.05)
    assert diagnosis_memory_gib(a, here) == DIAGNOSIS_MIN_GIB
    assert diagnosis_memory_gib(a, here + 100 * 2 ** 30) == 8.0
    assert diagnosis_memory_gib(a, None) == 8.0


def test_a_grandchild_stays_within_its_parents_soft_limit():
    """bounded.within_soft_limit: a child forked under a soft address-space limit below the hard one gets a limit
    no higher than that soft limit (call_limited caps a child's limit by the hard limit only): its 1 GiB
    allocation is stopped at the memory limit, not allowed up to the hard limit."""
    import subprocess
    import sys

    code = """
import resource
from polyverify.plumbing.child import Stopped, call_limited
from verify.bounded import within_soft_limit
vm = int(open('/proc/self/statm').read().split()[0]) * 4096
resource.setrlimit(resource.RLIMIT_AS, (vm + 256 * 2**20, resource.getrlimit(resource.RLIMIT_AS)[1]))
try:
    call_limited(lambda: len(bytearray(2**30)), timeout=60, memory_gb=within_soft_limit(1024.0))
    print('allocated')
except Stopped as e:
    print('stopped', e.limit)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.stdout.strip() == "stopped memory", r.stdout + r.stderr
