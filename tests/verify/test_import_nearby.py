"""The nearby search knows the specifications: a file that fails as GD is tried
against the other named specifications that can hold it (``prefix-coupled`` for precision-ls's
causal notebook, seed 000 App. D.3.1) and under the reversed-taps reading, besides the other
conventions."""
from __future__ import annotations

import io
import json
from fractions import Fraction

import pytest

from verify.construct import main

from tests.verify.import_files import precision_ls_notebook, save_pt

torch = pytest.importorskip("torch", reason="precision-ls files are torch state_dicts")

D, N = 2, 4
ETA32 = str(Fraction(13421773, 134217728))  # 0.1 in float32


def run(argv, tmp_path):
    out = io.StringIO()
    rep = tmp_path / "r.json"
    rc = main(["import", *map(str, argv), "--json", str(rep)], out=out)
    return rc, out.getvalue(), json.loads(rep.read_text())


def test_causal_notebook_failing_as_gd_is_found_to_be_prefix_coupled(tmp_path):
    p = tmp_path / "w.pt"
    save_pt(p, precision_ls_notebook(D, N, 0.1, 2, causal=True), {"causal": True})
    rc, text, rep = run([p, "--from", "precision-ls", "--spec", "baseconv"], tmp_path)
    assert rc == 1
    specs = {t["specification"]: t for t in rep["nearby"] if "specification" in t}
    assert set(specs) == {"prefix-coupled"}  # gd-baseconv is the specification proved, not a nearby one
    assert specs["prefix-coupled"]["ok"] and specs["prefix-coupled"]["parameters"]["eta"]["value"] == ETA32
    assert "nearby: specification prefix-coupled (the precision-ls importer's default layout): PROVED" in text
    # the other way round: proved as prefix-coupled, no search
    rc, _, rep = run([p, "--from", "precision-ls", "--spec", "prefix-coupled"], tmp_path)
    assert rc == 0 and "nearby" not in rep


def test_a_filter_stored_in_the_other_orientation_is_found_by_the_reversed_taps_reading(tmp_path):
    """A long filter written last-lag-first (identity at tap N-1): refuted as GD, proved under the
    reversed-taps reading; the same taps in the file's orientation are not GD under any convention."""
    sd = precision_ls_notebook(D, N, 0.1, 2, causal=False, long=True)
    sd = {k: (v.flip(-1) if k.endswith("conv.filter") else v) for k, v in sd.items()}
    p = tmp_path / "r.pt"
    save_pt(p, sd, {"causal": False})
    rc, text, rep = run([p, "--from", "precision-ls", "--spec", "baseconv"], tmp_path)
    assert rc == 1
    nearby = {t["variant"]: t for t in rep["nearby"]}
    rev = next(t for v, t in nearby.items() if v.startswith("filter taps reversed"))
    assert rev["ok"] and rev["parameters"]["eta"]["value"] == ETA32
    assert not any(t["ok"] for v, t in nearby.items() if v.startswith("convolution "))


def test_no_search_tries_nothing(tmp_path):
    p = tmp_path / "w.pt"
    save_pt(p, precision_ls_notebook(D, N, 0.1, 1, causal=True), {"causal": True})
    rc, text, rep = run([p, "--from", "precision-ls", "--spec", "baseconv", "--no-search"], tmp_path)
    assert rc == 1 and "nearby" not in rep and "nearby:" not in text
