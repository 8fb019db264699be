"""Soundness holes: a weight file can never be PROVED for
what the proof did not read.

1. every tensor of a file is consumed by the proof, or the file is refused naming
   the unread tensors (extra layer, stray array, stray top-level tensor; files
   without metadata get their layer count from the tensor names);
2. integer tensors are read as integers (2^53 + 1 is not 2^53);
4. a file's self-description (construction, sizes, parameters, depth, layer
   settings) is compared with what is proved.

Each test failed on main before the fix (the file was PROVED, exit 0).
"""
from __future__ import annotations

import io
import json

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

import circuits as C
from constructions import weights_io
from verify.construct import main

FAST = ["--batch", "4", "--quiet", "--dtype", "float64"]
SMALL = ["--n", "4", "--d", "2", *FAST]


def run(argv, capsys=None):
    out = io.StringIO()
    rc = main(argv, out=out)
    err = capsys.readouterr().err if capsys is not None else ""
    return rc, out.getvalue(), err


def one_line_error(rc, err, *needles):
    assert rc == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    for s in needles:
        assert s in err, err


def export(tmp_path, *args, name="w.safetensors"):
    w = tmp_path / name
    rc, text, _ = run(["gd", *args, "--export", str(w)])
    assert rc == 0, text
    return w


def rewrite(path, tensors=None, meta=None, out=None):
    with safe_open(str(path), framework="numpy") as f:
        m = f.metadata()
    t = load_file(str(path))
    t = tensors(t) if tensors else t
    m = meta(m) if meta else m
    save_file(t, str(out or path), metadata=m)
    return out or path


# ------------------------------------------------------------------ hole 1: unread tensors

def test_extra_layer_beyond_the_metadata_is_refused(tmp_path, capsys):
    w = export(tmp_path, "--layers", "7", *SMALL)

    def add_layer(t):  # a copy of the epilogue, as layer 7, that adds 1000 to every output
        for k in [k for k in t if k.startswith("layers.6.")]:
            t[k.replace("layers.6.", "layers.7.")] = t[k].copy()
        t["layers.7.b_out"] = t["layers.7.b_out"] + 1000.0
        return t

    rewrite(w, add_layer)
    rc, _, err = run(["gd", "--layers", "7", *SMALL, "--weights", str(w)], capsys)
    one_line_error(rc, err, "tensors that no layer of the stack reads", "layers.7.")


def test_file_without_metadata_with_one_layer_more(tmp_path, capsys):
    w = export(tmp_path, "--layers", "7", *SMALL)

    def add_layer(t):
        for k in [k for k in t if k.startswith("layers.6.")]:
            t[k.replace("layers.6.", "layers.7.")] = t[k].copy()
        return t

    rewrite(w, add_layer, meta=lambda m: {})
    rc, _, err = run(["gd", "--layers", "7", *SMALL, "--weights", str(w)], capsys)
    one_line_error(rc, err, "8 layers")
    # ... and one realisable depth more (10 = 1 + 3*3 layers) is a different k, not a silent truncation
    w2 = export(tmp_path, "--layers", "10", *SMALL, name="w10.safetensors")
    rewrite(w2, meta=lambda m: {})
    rc, _, err = run(["gd", "--layers", "7", *SMALL, "--weights", str(w2)], capsys)
    one_line_error(rc, err, "has 10 layers")


def test_metadata_free_file_gets_its_depth_from_the_tensor_names(tmp_path, capsys):
    w = export(tmp_path, "--layers", "7", *SMALL)
    rewrite(w, meta=lambda m: {})
    rc, text, err = run(["gd", "--layers", "7", *SMALL, "--weights", str(w)], capsys)
    assert rc == 0 and "PROVED" in text


@pytest.mark.parametrize("name", ["layers.5.W_extra", "layers.01.W_in", "embed.weight", "layers.x.W_in"])
def test_stray_tensor_is_refused_by_name(tmp_path, capsys, name):
    w = export(tmp_path, "--layers", "7", *SMALL)

    def add(t):
        t[name] = np.ones((5, 12))
        return t

    rewrite(w, add)
    rc, _, err = run(["gd", "--layers", "7", *SMALL, "--weights", str(w)], capsys)
    one_line_error(rc, err, "no layer of the stack reads", name)


# ------------------------------------------------------------------ hole 2: integer tensors

def _const_circuit(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({
        "directed": True, "multigraph": False, "graph": {},
        "nodes": [{"id": 0, "op": "input", "name": "x"}, {"id": 1, "op": "const", "value": str(2**53)},
                  {"id": 2, "op": "mul", "output": "y"}],
        "links": [{"source": 0, "target": 2}, {"source": 1, "target": 2}]}))
    C.load(path)  # a valid circuit
    return path


def test_integer_tensor_is_read_exactly(tmp_path):
    """2^53 + 1 in an int64 tensor is 2^53 + 1, not the float64 it rounds to."""
    w = export(tmp_path, "--layers", "4", "--n", "3", "--d", "2", *FAST)
    rewrite(w, lambda t: {**t, "layers.0.W_in": np.full(t["layers.0.W_in"].shape, 2**53 + 1, dtype=np.int64)})
    lw = weights_io.load(w)
    assert lw.layers[0].W_in[0, 0] == 2**53 + 1 and type(lw.layers[0].W_in[0, 0]) is int


def test_integer_tensor_off_by_one_beyond_2_53_fails_the_proof(tmp_path):
    """A circuit with the constant 2^53: its weights proved; the same weights with 2^53 + 1
    in an int64 tensor were PROVED before (rounded to 2^53), and now fail."""
    from verify.construct import main as construct_main

    g = _const_circuit(tmp_path)
    w = tmp_path / "c.safetensors"
    assert construct_main(["circuit", "--graph", str(g), "--export", str(w), "--trials", "2"],
                          out=io.StringIO()) == 0
    t = load_file(str(w))
    hits = [(k, np.argwhere(v == 2.0**53)) for k, v in t.items() if (v == 2.0**53).any()]
    assert hits, "the compiled weights hold the constant 2^53"
    name, where = hits[0]

    def bump(tt):
        a = tt[name].astype(np.int64)
        assert (a == tt[name]).all()  # every entry of this tensor is an integer
        a[tuple(where[0])] += 1
        return {**tt, name: a}

    rewrite(w, bump)
    out = io.StringIO()
    rc = construct_main(["circuit", "--graph", str(g), "--weights", str(w), "--trials", "2"], out=out)
    assert rc == 1 and "FAILED" in out.getvalue()


def test_unreadable_dtype_is_refused_by_name(tmp_path):
    w = export(tmp_path, "--layers", "4", "--n", "3", "--d", "2", *FAST)
    rewrite(w, lambda t: {**t, "layers.0.W_in": t["layers.0.W_in"].astype(np.complex64)}
            if hasattr(np, "complex64") else t)
    try:
        weights_io.load(w)
    except weights_io.WeightFileError as e:
        assert "layers.0.W_in" in str(e) or "not a readable safetensors" in str(e)
    else:  # pragma: no cover - safetensors could not store complex: nothing to refuse
        pytest.fail("a complex tensor was read as if it were real")


# ------------------------------------------------------------------ hole 4: self-description

def test_file_declaring_another_construction_is_refused(tmp_path, capsys):
    w = export(tmp_path, "--layers", "8", "--arch", "lsa", "--n", "5", "--d", "3", "--eta", "1/64", *FAST)
    # the same file proved as gd-baseconv at the defaults of the command line
    rc, _, err = run(["gd", "--arch", "baseconv", "--layers", "7", "--weights", str(w), *FAST], capsys)
    one_line_error(rc, err, "declares", "'gd-lsa'", "--allow-metadata-mismatch")
    # an explicit size that disagrees with the file
    rc, _, err = run(["gd", "--n", "6", "--weights", str(w), *FAST], capsys)
    one_line_error(rc, err, "variables")
    rc, _, err = run(["gd", "--eta", "1/16", "--weights", str(w), *FAST], capsys)
    one_line_error(rc, err, "parameters")


def test_unset_options_come_from_the_file_and_the_report_says_so(tmp_path, capsys):
    w = export(tmp_path, "--layers", "8", "--arch", "lsa", "--n", "5", "--d", "3", "--eta", "1/64", *FAST)
    rep = tmp_path / "r.json"
    rc, text, _ = run(["gd", "--weights", str(w), "--n", "5", "--json", str(rep), *FAST], capsys)
    assert rc == 0 and "PROVED" in text
    r = json.loads(rep.read_text())
    assert r["parameter_sources"] == {"arch": "file", "n": "command line", "d": "file", "eta": "file",
                                      "lam": "file", "layers": "file"}
    assert r["depth"] == 8 and r["eta"] == "1/64" and r["construction"]["name"] == "gd-lsa"


def test_declared_layer_setting_is_compared_and_read(tmp_path, capsys):
    w = export(tmp_path, "--layers", "7", *SMALL)

    def causal(m):
        specs = json.loads(m["layers"])
        specs[2]["config"]["causal"] = True
        return {**m, "layers": json.dumps(specs)}

    rewrite(w, meta=causal)
    rc, _, err = run(["gd", "--layers", "7", *SMALL, "--weights", str(w)], capsys)
    one_line_error(rc, err, "layer 2", "causal")
    # overriding the check proves the layer as the file declares it: causal, which is wrong here
    rc, text, _ = run(["gd", "--layers", "7", *SMALL, "--weights", str(w), "--allow-metadata-mismatch"], capsys)
    assert rc == 1 and "FAILED" in text


@pytest.mark.parametrize("edit,needle", [
    (lambda m: {k: v for k, v in m.items() if k != "layers"}, "missing 'layers'"),
    (lambda m: {**m, "layers": "[{"}, "'layers' is not JSON"),
    (lambda m: {**m, "layers": json.dumps({"a": 1})}, "'layers' must be a list"),
    (lambda m: {**m, "layers": m["layers"].replace('"causal": false', '"causal": "false"', 1)}, "true or false"),
    (lambda m: {**m, "layers": m["layers"].replace('"kind": "baseconv"', '"kind": "conv2d"', 1)}, "unknown layer kind"),
    (lambda m: {**m, "exact": json.dumps({"0": {"W_in": [[0, 0, "one half"]]}})}, "not a rational"),
    (lambda m: {**m, "exact": json.dumps({"0": {"W_in": [[99, 0, "1/2"]]}})}, "outside"),
    (lambda m: {**m, "exact": json.dumps({"0": {"W_bogus": [[0, 0, "1/2"]]}})}, "W_bogus"),
    (lambda m: {**m, "exact": json.dumps({"77": {}})}, "not a layer index"),
    (lambda m: {**m, "construction": "nope"}, "'construction' is not JSON"),
])
def test_malformed_header_is_one_line(tmp_path, capsys, edit, needle):
    w = export(tmp_path, "--layers", "7", *SMALL)
    rewrite(w, meta=edit)
    rc, _, err = run(["gd", "--layers", "7", *SMALL, "--weights", str(w)], capsys)
    one_line_error(rc, err, needle)


def test_circuit_weights_declaring_another_circuit_are_refused(tmp_path, capsys):
    g = _const_circuit(tmp_path)
    w = tmp_path / "c.safetensors"
    assert main(["circuit", "--graph", str(g), "--export", str(w), "--trials", "2"], out=io.StringIO()) == 0
    other = tmp_path / "other.json"  # same shape, another input name: same compiled layers
    other.write_text(g.read_text().replace('"name": "x"', '"name": "z"'))
    rc, _, err = run(["circuit", "--graph", str(other), "--weights", str(w), "--trials", "2"], capsys)
    one_line_error(rc, err, "declares", "--allow-metadata-mismatch")
    rc, text, _ = run(["circuit", "--graph", str(other), "--weights", str(w), "--trials", "2",
                       "--allow-metadata-mismatch"], capsys)
    assert rc == 0 and "PROVED" in text
