"""``verify.compare --weights`` on a file that is not the construction: the verdict line says FAILED
and how far the file is (the nearest construction of the family, verify/nearest.py), the report holds
it; a file that is the construction at another step size is FAILED against the command's construction
and its nearest construction is that step size, PROVED."""
from __future__ import annotations

import json
from dataclasses import replace
from fractions import Fraction

import pytest

from constructions import weights_io
from verify.compare import main
from verify.comparison import build_construction, constructed_stack, perturb, stack_of

ARGS = ["--problems", "4", "--iters", "5", "--iter-sigmas", "1", "--weights", "--skip", "polynomial"]


def _save(tmp_path, con, layers, k):
    st = stack_of(con, layers)
    c2 = replace(con, prologue=st.prologue, body=st.bodies[0], epilogue=st.epilogue)
    return weights_io.save(tmp_path / "w.safetensors", c2, k)


def _run(tmp_path, capsys, path, name):
    rc = main(["--learned", str(path), "--construction", name, "--out", str(tmp_path / "o"), *ARGS])
    return rc, capsys.readouterr().out, json.loads((tmp_path / "o" / "report.json").read_text())


@pytest.mark.parametrize("name", ["gd-baseconv", "gd-token-lsa"])
def test_a_file_at_another_step_size_is_failed_and_its_nearest_construction_proved(tmp_path, capsys, name):
    other = build_construction(name, 4, 2, eta=Fraction(1, 8))  # the command compares against eta = 1/16
    path = _save(tmp_path, other, constructed_stack(other, 1).layers, 1)
    rc, out, rep = _run(tmp_path, capsys, path, name)
    assert rc == 0  # a comparison report, not a proof: its verdict is in the line
    line = next(x for x in out.splitlines() if x.startswith("weights: FAILED"))
    assert "distance" in line and "eta = 1/8" in line
    near = rep["nearest"]
    assert near["rational"]["eta"] == "1/8"
    assert any("is PROVED" in t for t in near["text"])
    assert "how far, and from what" in (tmp_path / "o" / "report.md").read_text()


def test_one_changed_entry_is_failed_with_its_distance(tmp_path, capsys):
    con = build_construction("gd-baseconv", 4, 2)
    C = constructed_stack(con, 1)
    lay = con.layout
    delta = Fraction(1, 2 ** 6)
    path = _save(tmp_path, con, perturb(C.layers, 0, "W_out", (lay.cols("s1")[0], lay.cols("s2")[0]), delta), 1)
    rc, out, rep = _run(tmp_path, capsys, path, "gd-baseconv")
    line = next(x for x in out.splitlines() if x.startswith("weights: FAILED"))
    assert "counterexample" in line or "differs" in line or "at" in line
    assert "distance" in line
    d = rep["nearest"]["distance"]["max_abs"]
    assert float(delta) / 2 <= d <= 2 * float(delta)


def test_the_construction_itself_prints_no_failed_line(tmp_path, capsys):
    con = build_construction("gd-baseconv", 4, 2)
    path = _save(tmp_path, con, constructed_stack(con, 1).layers, 1)
    rc, out, rep = _run(tmp_path, capsys, path, "gd-baseconv")
    assert rc == 0 and "weights: FAILED" not in out and "nearest" not in rep and rep["weights"]["exact"]
