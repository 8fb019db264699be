"""``python -m verify.construct gd`` / ``--list``: exit 0 proved, 1 proof failed, 2 bad input."""
import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

from constructions.gd_baseconv import gd_baseconv
from verify.construct import main

ROOT = Path(__file__).resolve().parents[2]
FAST = ["--batch", "8", "--quiet"]


def run(argv):
    out = io.StringIO()
    rc = main(argv, out=out)
    return rc, out.getvalue()


def gd_json(tmp_path, *args, name="r.json"):
    path = tmp_path / name
    rc, text = run(["gd", *args, "--json", str(path)])
    return rc, text, (json.loads(path.read_text()) if path.exists() else None)


@pytest.mark.parametrize("arch,n,d", [("baseconv", 20, 5), ("baseconv-causal", 6, 3), ("lsa", 6, 3),
                                      ("elsa", 6, 3)])
def test_gd_layers_10_report(tmp_path, arch, n, d):
    rc, text, rep = gd_json(tmp_path, "--layers", "10", "--arch", arch, "--n", str(n), "--d", str(d),
                            "--dtype", "float32,float64", *FAST)
    assert rc == 0
    assert "proof: PROVED" in text
    assert rep["command"] == "gd" and rep["depth"] == 10 and rep["n"] == n and rep["d"] == d
    assert rep["proof"]["ok"] is True and isinstance(rep["proof"]["seconds"], float)
    assert rep["proof"]["failure"] is None
    k = rep["k"]
    assert k == {"baseconv": 3, "baseconv-causal": 7, "lsa": 9, "elsa": 9}[arch]
    runs = rep["runs"]
    assert len(runs) == 2 * k
    assert [r["step"] for r in runs if r["dtype"] == "float32"] == list(range(1, k + 1))
    for r in runs:
        assert r["dtype"] in ("float32", "float64")
        assert isinstance(r["depth"], int) and r["depth"] <= 10
        assert isinstance(r["mse_vs_exact_gd"], float) and isinstance(r["mse_vs_solution"], float)
        assert math.isfinite(r["mse_vs_exact_gd"]) and r["mse_vs_exact_gd"] < 1e-8
    assert runs[-1]["depth"] == 10  # depth(k): the stack that reads x_k out, epilogue included
    assert [d_["dtype"] for d_ in rep["dtypes"]] == ["float32", "float64"]
    assert all(d_["first_nonfinite_layer"] is None for d_ in rep["dtypes"])
    assert all(d_["prediction_mse_vs_exact"] < 1e-8 for d_ in rep["dtypes"])


def test_gd_baseconv_depth_100_errors(tmp_path):
    rc, text, rep = gd_json(tmp_path, "--layers", "100", "--batch", "32", "--quiet",
                            "--dtype", "float32,float64")
    assert rc == 0 and rep["k"] == 33 and rep["depth"] == 100
    f32 = [r["mse_vs_exact_gd"] for r in rep["runs"] if r["dtype"] == "float32"]
    f64 = [r["mse_vs_exact_gd"] for r in rep["runs"] if r["dtype"] == "float64"]
    assert len(f32) == len(f64) == 33
    assert max(f32) <= 1e-12 and max(f64) <= 1e-26
    # float32 is really float32, not float64 in disguise
    assert max(f32) > 1e-20
    # GD converges: the last iterate is closer to the solution than the first
    sol = [r["mse_vs_solution"] for r in rep["runs"] if r["dtype"] == "float64"]
    assert sol[-1] < sol[0]


def test_gd_subprocess_entry_point(tmp_path):
    out = tmp_path / "sub.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-m", "verify.construct", "gd", "--layers", "4", "--batch", "8",
                        "--quiet", "--json", str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    rep = json.loads(out.read_text())
    assert rep["proof"]["ok"] is True and rep["k"] == 1 and rep["depth"] == 4
    assert "PROVED" in p.stdout and f"report written to {out}" in p.stdout


@pytest.mark.parametrize("argv,needles", [
    (["gd", "--layers", "99"], ["97", "100"]),
    (["gd", "--layers", "10", "--n", "2", "--d", "5"], ["--n (2) must be >= --d (5)"]),
    (["gd", "--layers", "10", "--eta", "0"], ["--eta must be > 0"]),
    (["gd", "--layers", "10", "--eta=-1/16"], ["--eta must be > 0"]),
    (["gd", "--layers", "10", "--eta", "abc"], ["not an exact rational", "abc"]),
    (["gd", "--layers", "10", "--arch", "lsa", "--eta", "1/10"], ["1/10", "square root"]),
    (["gd", "--layers", "10", "--arch", "lsa", "--lam", "1/2"], ["lam", "square root"]),
    (["gd", "--layers", "10", "--lam", "1/4"], ["--lam needs a ridge architecture (--arch lsa or elsa or compiled-baseconv"]),
    (["gd", "--layers", "10", "--dtype", "float8"], ["unknown dtype 'float8'"]),
    (["gd", "--layers", "10", "--dtype", "bfloat16"], ["bfloat16 needs the torch backend"]),
    (["gd", "--layers", "10", "--backend", "jax"], ["invalid choice: 'jax'"]),
    (["gd", "--layers", "10", "--arch", "rnn"], ["invalid choice", "rnn"]),
    (["gd", "--layers", "0"], ["--layers must be >= 1"]),
    (["gd", "--layers", "4", "--batch", "0"], ["--batch must be >= 1"]),
    (["gd"], ["--layers"]),
    (["frobnicate"], ["invalid choice", "frobnicate"]),
    ([], ["choose a command"]),
    (["gd", "--layers", "4", "--weights", "/nonexistent/w.safetensors"], ["not found"]),
])
def test_bad_input_exits_2_with_one_line(capsys, argv, needles):
    rc, _ = run(argv)
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("error: ") and err.endswith("\n") and err.count("\n") == 1
    for s in needles:
        assert s in err


def test_list(capsys):
    rc, text = run(["--list"])
    assert rc == 0
    for arch, name in [("baseconv", "gd-baseconv"), ("baseconv-causal", "gd-baseconv-causal"),
                       ("lsa", "gd-lsa"), ("elsa", "gd-elsa")]:
        assert arch in text and name in text
    assert "seed 000" in text and "seed 001" in text and "circuit --graph" in text
    assert capsys.readouterr().err == ""


# ----------------------------------------------------------------------------- weight files

SMALL = ["--n", "4", "--d", "2", *FAST]


def _export(tmp_path, layers="7", arch="baseconv"):
    w = tmp_path / "w.safetensors"
    rc, text = run(["gd", "--layers", layers, "--arch", arch, *SMALL, "--export", str(w)])
    assert rc == 0 and f"exported {layers} layers to {w}" in text
    return w


def _edit(path, name, idx, value):
    tensors = load_file(str(path))
    with safe_open(str(path), framework="numpy") as f:
        meta = f.metadata()
    t = tensors[name].copy()
    t[idx] = value
    tensors[name] = t
    save_file(tensors, str(path), metadata=meta)


@pytest.mark.parametrize("arch,layers", [("baseconv", "7"), ("baseconv-causal", "5"), ("lsa", "3"),
                                         ("elsa", "3")])
def test_weights_round_trip_proves(tmp_path, arch, layers):
    w = _export(tmp_path, layers, arch)
    rc, text, rep = gd_json(tmp_path, "--layers", layers, "--arch", arch, *SMALL, "--weights", str(w))
    assert rc == 0 and rep["proof"]["ok"] is True
    assert rep["weights"]["distinct_bodies"] == 1 and rep["weights"]["entries_from_float_values"] == 0
    assert "1 distinct body variant(s)" in text


def test_perturbed_body_copy_fails_and_names_the_layer(tmp_path):
    w = _export(tmp_path)  # depth 7 = 3 x 2 steps + 1: copy 1 of body layer 1 is stack layer 4
    lay = gd_baseconv(4, 2).layout
    _edit(w, "layers.4.W_out", (lay.cols("s2")[0], lay.cols("s2")[0]), 1 + 1 / 1024)
    rc, text, rep = gd_json(tmp_path, "--layers", "7", *SMALL, "--weights", str(w))
    assert rc == 1
    assert "proof: FAILED" in text and "body fails at stack layer 4" in text
    f = rep["proof"]["failure"]
    assert rep["proof"]["ok"] is False and f["section"] == "body" and f["layer"] == 4
    assert f["layer_in_section"] == 1 and "body copy 1" in f["note"]
    assert f["region"] in lay.regions and f["counterexample"]["got"] != f["counterexample"]["expected"]
    assert rep["weights"]["distinct_bodies"] == 2 and rep["weights"]["entries_from_float_values"] == 1


def test_perturbed_epilogue_names_the_last_layer(tmp_path):
    w = _export(tmp_path)
    lay = gd_baseconv(4, 2).layout
    _edit(w, "layers.6.W_out", (lay.cols("s1")[0], lay.cols("y")[0]), 2.0)
    rc, text, rep = gd_json(tmp_path, "--layers", "7", *SMALL, "--weights", str(w))
    assert rc == 1 and "epilogue fails at stack layer 6" in text
    f = rep["proof"]["failure"]
    assert f["section"] == "epilogue" and f["layer"] == 6 and f["region"] == "y"


def test_weights_with_wrong_depth_exit_2(tmp_path, capsys):
    w = _export(tmp_path)
    rc, _ = run(["gd", "--layers", "10", *SMALL, "--weights", str(w)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "declares k=2" in err and "(proving k=3)" in err
    # overriding the metadata does not make 7 layers prove as 10
    rc, _ = run(["gd", "--layers", "10", *SMALL, "--weights", str(w), "--allow-metadata-mismatch"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "has 7 layers (k=2)" in err and "(k=3)" in err


def test_weights_for_another_problem_size_exit_2(tmp_path, capsys):
    """A weight file built for other --n/--d (or another --arch) is bad input: exit 2, one line."""
    w = _export(tmp_path)  # N=4, D=2
    rc, _ = run(["gd", "--layers", "7", "--n", "6", "--d", "3", *FAST, "--weights", str(w)])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: ") and err.count("\n") == 1 and str(w) in err
    # the same file read as another architecture of the same depth (gd-lsa: 1 + 6 steps)
    rc, _ = run(["gd", "--layers", "7", "--arch", "lsa", *SMALL, "--weights", str(w)])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: ") and err.count("\n") == 1 and str(w) in err


# ----------------------------------------------------------------------------- overflow

def test_first_nonfinite_layer_reported(tmp_path):
    # eta = 64 makes the iterates grow by ~64 * sigma^2 per step: float16 overflows within 2 steps
    rc, text, rep = gd_json(tmp_path, "--layers", "31", "--dtype", "float16", "--eta", "64", *FAST)
    assert rc == 0 and rep["proof"]["ok"] is True
    bad = rep["dtypes"][0]["first_nonfinite_layer"]
    assert isinstance(bad, int) and 0 <= bad < 31
    assert rep["dtypes"][0]["prediction_mse_vs_exact"] is None
    assert f"first non-finite value after stack layer {bad}" in text
    assert any(math.isnan(r["mse_vs_exact_gd"]) for r in rep["runs"])


def test_conv_fft_and_torch_backend(tmp_path):
    rc, _, rep = gd_json(tmp_path, "--layers", "7", "--conv", "fft", "--backend", "torch",
                         "--dtype", "float64,bfloat16", *SMALL)
    assert rc == 0
    f64 = [r["mse_vs_exact_gd"] for r in rep["runs"] if r["dtype"] == "float64"]
    bf = [r["mse_vs_exact_gd"] for r in rep["runs"] if r["dtype"] == "bfloat16"]
    assert max(f64) < 1e-24 and all(np.isfinite(bf)) and max(bf) < 1e-1
    assert {d["backend"] for d in rep["dtypes"]} == {"torch"} and {d["conv"] for d in rep["dtypes"]} == {"fft"}


def test_gd_and_a_catalogue_entry_export_to_a_peer_format(tmp_path, capsys):
    """gd --export --format precision-ls writes the peer's file; a format that cannot hold the construction and --format without --export are refused in one line
    before any work; a catalogue entry exports in this toolkit's layout."""
    f = tmp_path / "gd.safetensors"
    rc, text = run(["gd", "--layers", "4", "--export", str(f), "--format", "precision-ls"])
    assert rc == 0 and f.is_file() and "exported 4 layers" in text and "precision-ls" in text
    with safe_open(str(f), "np") as fh:  # the peer's own names (tests/verify/test_export.py proves round trips)
        assert any(k.startswith("layers.") or "mixer" in k or "filter" in k for k in fh.keys())
    bad = tmp_path / "z.pt"
    capsys.readouterr()
    rc, text = run(["gd", "--layers", "4", "--export", str(bad), "--format", "zoology"])
    err = capsys.readouterr().err
    assert rc == 2 and not bad.exists() and text == "" and len(err.strip().splitlines()) == 1 and "zoology" in err
    rc, _ = run(["gd", "--layers", "4", "--format", "zoology"])
    assert rc == 2 and "--format needs --export" in capsys.readouterr().err
    e = tmp_path / "conv.safetensors"
    rc, text = run(["s003-conv", "--export", str(e)])
    assert rc == 0 and e.is_file() and "exported" in text


def test_list_columns_stay_aligned_for_long_names():
    """--list: every gd row's 'depth' and 'state' columns start at the same place, whatever the
    length of the architecture's and entry's names (gd-compiled-baseconv-causal included)."""
    rc, text = run(["--list"])
    rows = [ln for ln in text.splitlines() if " depth " in ln and " state " in ln]
    assert rc == 0 and len(rows) >= 9
    assert len({ln.index(" depth ") for ln in rows}) == 1 and len({ln.index(" state ") for ln in rows}) == 1
    assert any("gd-compiled-baseconv-causal" in ln for ln in rows)
