"""Bad input to ``python -m verify.construct import`` is refused before any proof: exit 2, one line
on stderr, nothing on stdout, no file touched.  Includes the attacks a foreign file can carry:
pickles, unread tensors, non-polynomial settings, shapes that do not fit the layout."""
from __future__ import annotations

import io
import json

import numpy as np
import pytest

from verify.construct import main

from tests.verify.import_files import icl_gd_create_weights, precision_ls_notebook, save_pt

torch = pytest.importorskip("torch", reason="precision-ls files are torch state_dicts")


LAYOUT = {"format": "polyverify-layout/1"}  # every layout file names its format


@pytest.fixture
def files(tmp_path):
    (tmp_path / "afolder").mkdir()
    (tmp_path / "afile").write_text("not a weight file")
    save_pt(tmp_path / "ok.pt", precision_ls_notebook(2, 4, 0.1, 1), {"causal": True})
    save_pt(tmp_path / "nocfg.pt", precision_ls_notebook(2, 4, 0.1, 1), None)
    sd = precision_ls_notebook(2, 4, 0.1, 1)
    sd["_backbone.transformer.h.0.ln_1.weight"] = torch.ones(9)
    save_pt(tmp_path / "ln.pt", sd, {"causal": True})
    sd = precision_ls_notebook(2, 4, 0.1, 1)
    sd["_backbone.transformer.h.0.seq_mixer.base_conv.branch_weights"] = torch.tensor([1.0, 0.5])
    save_pt(tmp_path / "bw.pt", sd, {"causal": True})
    sd = precision_ls_notebook(2, 4, 0.1, 1)
    sd["_backbone.transformer.h.0.seq_mixer.base_conv.conv.conv.weight"] = torch.full((9, 1, 4), float("nan"))
    save_pt(tmp_path / "nan.pt", sd, {"causal": True})
    sd = precision_ls_notebook(2, 4, 0.1, 2)
    del sd["_backbone.transformer.h.4.seq_mixer.base_conv.out_proj.bias"]
    save_pt(tmp_path / "missing.pt", sd, {"causal": True})
    save_pt(tmp_path / "k2.pt", {k: v for k, v in precision_ls_notebook(2, 4, 0.1, 2).items()
                                 if ".5." not in k and ".4." not in k}, {"causal": True})  # 4 layers: not 3k
    import pickle

    (tmp_path / "pickle.pt").write_bytes(pickle.dumps({"x": object()}))
    torch.save({"model_state_dict": {"a": torch.zeros(1)}, "config": {"causal": True}, "extra": [1, 2]},
               str(tmp_path / "extra.pt"))
    np.savez(tmp_path / "icl.npz", **icl_gd_create_weights(2, 5, 0.5))
    w = icl_gd_create_weights(2, 5, 0.5)
    w["Transformer_gd/multi_head_attention/query/b"] = np.ones(3, dtype=np.float32)
    np.savez(tmp_path / "iclb.npz", **w)
    np.savez(tmp_path / "obj.npz", a=np.array([object()], dtype=object))
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "keys.json").write_text(json.dumps({**LAYOUT, "tokens": [0, 1, 2, 3], "colums": []}))
    (tmp_path / "dup.json").write_text(json.dumps({**LAYOUT, "tokens": [0, 0, 1, 2]}))
    (tmp_path / "reg.json").write_text(json.dumps({**LAYOUT, "tokens": [0, 1, 2, 3], "channels": {"nope": [0]}}))
    (tmp_path / "wid.json").write_text(json.dumps({**LAYOUT, "tokens": [0, 1, 2, 3], "channels": {"a": [0]}}))
    (tmp_path / "sec.json").write_text(json.dumps({**LAYOUT, "tokens": [0, 1, 2, 3], "channels": {"a": [0, 1]},
                                                   "sections": {"epilogue": 7}}))
    return tmp_path


PLS = ["--from", "precision-ls", "--spec", "baseconv"]
ICL = ["--from", "icl-gd", "--config", "num_heads=1"]
CASES = [
    (["{tmp}/nope.pt", *PLS], ["not found"]),
    (["{tmp}/afile", *PLS], ["unknown file type"]),
    (["{tmp}/pickle.pt", *PLS], ["not a readable pt file"]),
    (["{tmp}/extra.pt", *PLS], ["'extra'", "is not read"]),
    (["{tmp}/obj.npz", "--from", "icl-gd", "--spec", "s004-gd"], ["not a readable npz"]),
    (["{tmp}/ok.pt", "--from", "nope", "--spec", "baseconv"], ["invalid choice"]),
    (["{tmp}/ok.pt", "--spec", "baseconv"], ["--from"]),
    (["{tmp}/ok.pt", "--from", "precision-ls"], ["--spec"]),
    (["{tmp}/ok.pt", "--from", "precision-ls", "--spec", "no-such"], ["--spec 'no-such'", "not a gd architecture"]),
    (["{tmp}/ok.pt", "--from", "precision-ls", "--spec", "s004-diag-update"], ["not a layer stack"]),
    (["{tmp}/ok.pt", *PLS, "--json", "{tmp}/afolder"], ["--json", "is a folder"]),
    (["{tmp}/ok.pt", *PLS, "--json", "{tmp}/afile/r.json"], ["--json", "is a file, not a folder"]),
    (["{tmp}/ok.pt", *PLS, "--set", "eta"], ["--set 'eta'", "KEY=VALUE"]),
    (["{tmp}/ok.pt", *PLS, "--set", "eta=1/0"], ["--set eta", "zero denominator"]),
    (["{tmp}/ok.pt", *PLS, "--set", "n=x"], ["must be an integer"]),
    (["{tmp}/ok.pt", *PLS, "--set", "gamma=1"], ["no size or parameter 'gamma'"]),
    (["{tmp}/ok.pt", *PLS, "--set", "eta=1", "--set", "eta=2"], ["given twice"]),
    (["{tmp}/ok.pt", *PLS, "--config", "bogus=1"], ["bogus", "not a precision-ls setting"]),
    (["{tmp}/ok.pt", *PLS, "--config", "causal=maybe"], ["causal must be true or false"]),
    (["{tmp}/ok.pt", *PLS, "--set", "n=600"], ["limit 1024"]),
    (["{tmp}/nocfg.pt", *PLS], ["--config causal=true"]),
    (["{tmp}/ln.pt", *PLS], ["ln_1.weight", "every tensor must be part of the proof"]),
    (["{tmp}/bw.pt", *PLS], ["branch_weights[1]", "not a BaseConv residual"]),
    (["{tmp}/nan.pt", *PLS], ["non-finite"]),
    (["{tmp}/missing.pt", *PLS], ["lacks tensor", "out_proj.bias"]),
    (["{tmp}/k2.pt", *PLS], ["has 4 layers", "0 + 3*k + 0"]),
    (["{tmp}/ok.pt", "--from", "precision-ls", "--spec", "baseconv-causal"], ["no default layout", "--layout"]),
    (["{tmp}/ok.pt", "--from", "precision-ls", "--spec", "lsa"], ["gd-lsa is made of lsa layers"]),
    (["{tmp}/ok.pt", "--from", "precision-ls", "--spec", "s004-gd"], ["made of token_lsa layers"]),
    (["{tmp}/ok.pt", *PLS, "--layout", "{tmp}/nope.json"], ["--layout", "not found"]),
    (["{tmp}/ok.pt", *PLS, "--layout", "{tmp}/bad.json"], ["not JSON"]),
    (["{tmp}/ok.pt", *PLS, "--layout", "{tmp}/list.json"], ["JSON object"]),
    (["{tmp}/ok.pt", *PLS, "--layout", "{tmp}/keys.json"], ["unknown key 'colums'"]),
    (["{tmp}/ok.pt", *PLS, "--layout", "{tmp}/dup.json"], ["two file tokens"]),
    (["{tmp}/ok.pt", *PLS, "--layout", "{tmp}/reg.json"], ["no region 'nope'"]),
    (["{tmp}/ok.pt", *PLS, "--layout", "{tmp}/wid.json"], ["region 'a' has 2 columns"]),
    (["{tmp}/ok.pt", *PLS, "--layout", "{tmp}/sec.json"], ["sections.epilogue = 7"]),
    (["{tmp}/icl.npz", *ICL, "--spec", "baseconv"], ["token_lsa layers", "baseconv"]),
    (["{tmp}/iclb.npz", *ICL, "--spec", "s004-gd"], ["query/b is nonzero"]),
    (["{tmp}/icl.npz", "--from", "icl-gd", "--spec", "s004-gd"], ["how many heads", "--config num_heads=H"]),
    (["{tmp}/icl.npz", *ICL[:2], "--spec", "s004-gd", "--config", "num_heads=1.5"], ["num_heads must be an integer"]),
    (["{tmp}/icl.npz", *ICL[:2], "--spec", "s004-gd", "--config", "num_heads=2"], ["a multiple of num_heads = 2"]),
    (["{tmp}/icl.npz", "--from", "icl-gd", "--spec", "s004-gd", "--config", "dampening=x"], ["dampening"]),
    (["{tmp}/icl.npz", "--from", "zoology", "--spec", "s003-conv"], ["query/w", "every tensor must be part of the proof"]),
    (["{tmp}/ok.pt", "--from", "polyverify", "--spec", "baseconv"], ["not a readable safetensors"]),
]


@pytest.mark.parametrize("argv,needles", CASES, ids=[" ".join(c[0])[:70] for c in CASES])
def test_bad_input_is_refused_up_front(files, argv, needles, refused):
    refused(main, ["import", *[a.replace("{tmp}", str(files)) for a in argv]], files, needles, out=io.StringIO())


def test_a_polyverify_import_counts_every_tensor_it_read(tmp_path):
    """The import line said "1 tensors, all read" for a 32-tensor file (its summary was one entry)."""
    from safetensors import safe_open

    w, r = tmp_path / "w.safetensors", tmp_path / "r.json"
    assert main(["gd", "--layers", "4", "--n", "4", "--d", "2", "--batch", "2", "--quiet", "--export", str(w)],
                out=io.StringIO()) == 0
    with safe_open(str(w), "np") as f:
        names = sorted(f.keys())
    out = io.StringIO()
    assert main(["import", str(w), "--from", "polyverify", "--spec", "baseconv", "--json", str(r)], out=out) == 0
    assert f"{len(names)} tensors, all read" in out.getvalue().splitlines()[0]
    assert sorted(json.loads(r.read_text())["tensors"]) == names
