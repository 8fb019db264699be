"""Self-describing files (issue 44 item 2): ``python -m verify.construct import FILE --from FORMAT`` of a file
this toolkit exported finds the construction, its sizes, parameters and layout in the file (the config's
``"polyverify"`` description of a peer format, the ``construction`` metadata of a polyverify file) and proves
it with no other flag; a peer's own file (no description) keeps today's flags and is refused without
``--spec`` in one line."""
from __future__ import annotations

import io
import json

import pytest

from constructions.catalogue import entries
from verify.construct import main
from verify.export import export

from tests.verify.test_export import CELLS, GD_SIZES, SUFFIX

pytest.importorskip("torch", reason="precision-ls files are torch checkpoints")


def _build(name):
    e = entries()[name]
    return e.build(**GD_SIZES) if "gd" in e.roles else e.build(**e.sizes)


def _k(con):
    return 2 if con.body else 0


def _import(argv, tmp_path):
    out = io.StringIO()
    rep = tmp_path / "r.json"
    rc = main(["import", *map(str, argv), "--no-search", "--json", str(rep)], out=out)
    return rc, out.getvalue(), (json.loads(rep.read_text()) if rep.exists() else None)


def _suffix(fmt):
    return ".safetensors" if fmt in ("icl-gd", "zoology", "polyverify") else SUFFIX[fmt]


@pytest.mark.parametrize("name,fmt", CELLS)
def test_an_export_is_proved_with_from_alone(tmp_path, name, fmt):
    con = _build(name)
    path = tmp_path / f"w{_suffix(fmt)}"
    ex = export(path, con, fmt, k=_k(con))
    if fmt != "polyverify":
        assert ex.config["polyverify"]["spec"] == name, ex.config
        assert any("self-describing" in line for line in ex.summary())
    rc, out, rep = _import([path, "--from", fmt], tmp_path)
    if ex.inexact:  # entries no float of the dtype written: the file is not the construction (test_export.py)
        assert rc == 1, out
        return
    assert rc == 0, out
    assert rep["spec"] == name and f"verdict: PROVED: the file computes {name}" in out
    for k in rep["sizes"]:
        assert rep["size_sources"][k] == "the file's description"


def test_set_and_layout_still_win_over_the_description(tmp_path, capsys):
    con = entries()["gd-baseconv"].build(4, 2)
    path = tmp_path / "w.pt"
    export(path, con, "precision-ls", k=2)
    rc, out, rep = _import([path, "--from", "precision-ls", "--set", "eta=1/8"], tmp_path)
    assert rc == 1 and rep["parameters"]["eta"]["value"] == "1/8"  # --set wins: not the file's step size
    rc, out, rep = _import([path, "--from", "precision-ls", "--spec", "gd-baseconv", "--set", "n=4", "--set", "d=2"],
                           tmp_path)
    # --spec: today's flags (the description is not read; the importer's default layout maps no gd-baseconv)
    assert rc == 2 and "pass --layout L.json" in capsys.readouterr().err


def test_a_trained_module_export_describes_its_construction_and_fails(tmp_path):
    from tests.verify.trained_files import trained_precision_ls

    trained_precision_ls(tmp_path / "t.pt", steps=3)
    rc, out, rep = _import([tmp_path / "t.pt", "--from", "precision-ls"], tmp_path)
    assert rc == 1 and "verdict: FAILED: the file is not gd-baseconv" in out and "counterexample:" in out


def test_a_peers_own_file_needs_spec(tmp_path, capsys):
    from tests.verify.import_files import precision_ls_notebook, save_pt

    p = tmp_path / "pls.pt"
    save_pt(p, precision_ls_notebook(2, 4, 0.1, 1), {"causal": True})
    rc, out, rep = _import([p, "--from", "precision-ls"], tmp_path)
    err = capsys.readouterr().err
    assert rc == 2 and rep is None and out == ""
    assert err.count("\n") == 1 and "does not describe its construction" in err and "--spec" in err


def test_a_broken_description_is_refused_in_one_line(tmp_path, capsys):
    import torch

    con = entries()["gd-baseconv"].build(4, 2)
    path = tmp_path / "w.pt"
    export(path, con, "precision-ls", k=2)
    ck = torch.load(str(path), weights_only=True)
    ck["config"]["polyverify"]["sizes"] = {"n": "four"}
    torch.save(ck, str(path))
    rc, out, rep = _import([path, "--from", "precision-ls"], tmp_path)
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "sizes are not integers" in err
