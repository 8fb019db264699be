"""``python -m verify.construct circuit --graph FILE.json``: compile, prove, evaluate a user's circuit."""
import io
import json
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

import circuits as C
from verify.construct import main

ROOT = Path(__file__).resolve().parents[2]


def run(argv):
    out = io.StringIO()
    rc = main(argv, out=out)
    return rc, out.getvalue()


@pytest.fixture(scope="module")
def random_circuit_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("circ") / "random.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-m", "circuits.random", "--seed", "1", "--inputs", "4", "--gates", "12",
                        "--outputs", "2", "--out", str(path)], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    return path


def test_generated_circuit_proves(tmp_path, random_circuit_file):
    rep_path = tmp_path / "r.json"
    rc, text = run(["circuit", "--graph", str(random_circuit_file), "--json", str(rep_path), "--trials", "16"])
    assert rc == 0
    rep = json.loads(rep_path.read_text())
    g = C.load(random_circuit_file)
    assert rep["command"] == "circuit" and rep["proof"]["ok"] is True
    assert rep["modular_trials"]["n"] == rep["modular_trials"]["exact_agreement"] == 16
    assert rep["float64_trials"]["max_relative_error"] < 1e-12
    assert rep["metrics"] == C.metrics(g)
    assert rep["compiled"]["layers"] >= 1 and rep["compiled"]["tokens"] == 1
    assert "proof: PROVED" in text and "16/16 agree exactly" in text


@pytest.mark.parametrize("g", [C.gd_step(3, 2, Fraction(1, 10)), C.horner([1, 0, -2, 3]),
                               C.ridge_gd_step(2, 2, "eta", "lam")])
def test_builder_circuits_prove(tmp_path, g):
    f = tmp_path / "g.json"
    C.dump(g, f)
    rep_path = tmp_path / "r.json"
    rc, _ = run(["circuit", "--graph", str(f), "--json", str(rep_path), "--trials", "8"])
    rep = json.loads(rep_path.read_text())
    assert rc == 0 and rep["proof"]["ok"] is True and rep["modular_trials"]["exact_agreement"] == 8


def test_export_then_weights_round_trip(tmp_path, random_circuit_file):
    w = tmp_path / "c.safetensors"
    rc, text = run(["circuit", "--graph", str(random_circuit_file), "--export", str(w), "--trials", "4"])
    assert rc == 0 and f"to {w}" in text
    rep_path = tmp_path / "r.json"
    rc, _ = run(["circuit", "--graph", str(random_circuit_file), "--weights", str(w), "--json", str(rep_path),
                 "--trials", "4"])
    rep = json.loads(rep_path.read_text())
    assert rc == 0 and rep["proof"]["ok"] is True
    assert rep["weights"]["file"] == str(w) and rep["weights"]["layers"] == rep["compiled"]["layers"]


@pytest.mark.parametrize("target", ["lsa", "elsa"])
def test_attention_targets_export_prove_and_refute_a_changed_weight(tmp_path, target):
    """An LSA / ELSA stack goes through the same weight file round trip; a changed head weight is
    refuted by the proof and by the modular trials."""
    f = tmp_path / "gd.json"
    C.dump(C.gd_step(3, 2, Fraction(1, 16), placed=True), f)
    w = tmp_path / "c.safetensors"
    assert run(["circuit", "--graph", str(f), "--target", target, "--export", str(w), "--trials", "4"])[0] == 0
    rep_path = tmp_path / "r.json"
    rc, _ = run(["circuit", "--graph", str(f), "--target", target, "--weights", str(w), "--json", str(rep_path),
                 "--trials", "4"])
    rep = json.loads(rep_path.read_text())
    assert rc == 0 and rep["proof"]["ok"] is True and rep["compiled"]["target"] == target
    tensors = load_file(str(w))
    with safe_open(str(w), framework="numpy") as fh:
        meta = fh.metadata()
    key = next(k for k in sorted(tensors) if k.endswith("W2") and tensors[k].any())
    t = tensors[key].copy()
    t[tuple(np.argwhere(t != 0)[0])] += 0.5
    tensors[key] = t
    save_file(tensors, str(w), metadata=meta)
    rc, text = run(["circuit", "--graph", str(f), "--target", target, "--weights", str(w), "--json", str(rep_path),
                    "--trials", "8"])
    rep = json.loads(rep_path.read_text())
    assert rc == 1 and rep["proof"]["ok"] is False and "proof: FAILED" in text
    assert rep["modular_trials"]["exact_agreement"] < 8


def test_perturbed_circuit_weights_fail(tmp_path):
    f = tmp_path / "dot.json"
    C.dump(C.dot(3), f)
    w = tmp_path / "c.safetensors"
    assert run(["circuit", "--graph", str(f), "--export", str(w), "--trials", "2"])[0] == 0
    tensors = load_file(str(w))
    with safe_open(str(w), framework="numpy") as fh:
        meta = fh.metadata()
    t = tensors["layers.0.W_out"].copy()
    t[0, 0] += 0.5
    tensors["layers.0.W_out"] = t
    save_file(tensors, str(w), metadata=meta)
    rep_path = tmp_path / "r.json"
    rc, text = run(["circuit", "--graph", str(f), "--weights", str(w), "--json", str(rep_path), "--trials", "8"])
    rep = json.loads(rep_path.read_text())
    assert rc == 1 and rep["proof"]["ok"] is False
    fail = rep["proof"]["failure"]
    assert fail["section"] == "epilogue" and fail["layer"] == 0 and fail["region"] == "out:y"
    assert rep["modular_trials"]["exact_agreement"] < 8
    assert "proof: FAILED" in text


def _pass_through_circuit():
    b = C.CircuitBuilder()
    x, y = b.input("x"), b.input("y")
    b.output(x, "a")  # an output that is an input, passed through unchanged
    b.output(b.mul(x, y), "b")
    return b.graph()


def _sum_circuit():
    b = C.CircuitBuilder()
    x, y = b.input("x"), b.input("y")
    b.output(b.add(x, y), "s")  # with y = 0 in a trial, s is x passed through
    return b.graph()


@pytest.mark.parametrize("make", [_pass_through_circuit, _sum_circuit])
def test_outputs_equal_to_an_input_evaluate(tmp_path, make):
    """The rational trials must handle an output whose value is one input, unchanged."""
    f = tmp_path / "g.json"
    C.dump(make(), f)
    rep_path = tmp_path / "r.json"
    rc, _ = run(["circuit", "--graph", str(f), "--json", str(rep_path), "--trials", "64"])
    rep = json.loads(rep_path.read_text())
    assert rc == 0 and rep["proof"]["ok"] is True
    assert rep["modular_trials"]["n"] == rep["modular_trials"]["exact_agreement"] == 64


MALFORMED = [
    ('{"nodes": [{"id": 0, "op": "input"}], "links": []}', "missing attribute 'name'"),
    ("not json at all", "invalid JSON"),
    ("[1, 2, 3]", "must be an object"),
    ('{"nodes": [{"id": 0, "op": "input", "name": "x"}, {"id": 1, "op": "add", "output": "y"}],'
     ' "links": [{"source": 0, "target": 1}]}', "needs at least 2 operands"),
    ('{"nodes": [{"id": 0, "op": "input", "name": "x"}, {"id": 1, "op": "const", "value": 0.5},'
     ' {"id": 2, "op": "mul", "output": "y"}], "links": [{"source": 0, "target": 2},'
     ' {"source": 1, "target": 2}]}', "not exact"),
]


@pytest.mark.parametrize("content,needle", MALFORMED)
def test_malformed_circuit_file_exits_2(tmp_path, capsys, content, needle):
    f = tmp_path / "bad.json"
    f.write_text(content)
    rc, _ = run(["circuit", "--graph", str(f)])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: ") and err.count("\n") == 1 and needle in err


def test_other_bad_inputs_exit_2(tmp_path, capsys):
    f = tmp_path / "dot.json"
    C.dump(C.dot(2), f)
    for argv, needle in [
        (["circuit", "--graph", str(tmp_path / "missing.json")], "cannot read"),
        (["circuit", "--graph", str(f), "--trials", "0"], "--trials must be >= 1"),
        (["circuit"], "--graph"),
        (["circuit", "--graph", str(f), "--weights", str(tmp_path / "nope.safetensors")], "not found"),
    ]:
        rc, _ = run(argv)
        err = capsys.readouterr().err
        assert rc == 2 and err.count("\n") == 1 and needle in err, (argv, err)


def test_weights_with_wrong_layer_count_exit_2(tmp_path, capsys):
    f1, f2 = tmp_path / "one.json", tmp_path / "three.json"
    C.dump(C.dot(2), f1)
    C.dump(C.newton_schulz_step(2, 2), f2)  # 3 layers as written (2 re-associated)
    w = tmp_path / "three.safetensors"
    assert run(["circuit", "--graph", str(f2), "--export", str(w), "--trials", "1", "--as-written"])[0] == 0
    rc, _ = run(["circuit", "--graph", str(f1), "--weights", str(w)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "has 3 layers" in err


def test_weights_of_another_shape_exit_2(tmp_path, capsys):
    """One layer, but built for another state width: bad input (exit 2, one line), not a traceback."""
    f1, f2 = tmp_path / "dot2.json", tmp_path / "dot5.json"
    C.dump(C.dot(2), f1)
    C.dump(C.dot(5), f2)
    w = tmp_path / "dot5.safetensors"
    assert run(["circuit", "--graph", str(f2), "--export", str(w), "--trials", "1"])[0] == 0
    rc, _ = run(["circuit", "--graph", str(f1), "--weights", str(w)])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: ") and err.count("\n") == 1


def test_export_to_a_peer_format_and_its_refusals(tmp_path, random_circuit_file, capsys):
    """circuit --export --format: the compiled stack written in this toolkit's layout; a format that
    cannot hold the stack refused in one line, before the proof, writing nothing; --format alone refused."""
    own = tmp_path / "c.safetensors"
    rc, text = run(["circuit", "--graph", str(random_circuit_file), "--export", str(own), "--trials", "4"])
    assert rc == 0 and own.is_file() and "PROVED" in text
    bad = tmp_path / "c.npz"
    rc, text = run(["circuit", "--graph", str(random_circuit_file), "--export", str(bad), "--format", "icl-gd",
                    "--trials", "4"])
    err = capsys.readouterr().err
    assert rc == 2 and not bad.exists() and "PROVED" not in text
    assert len(err.strip().splitlines()) == 1 and "icl-gd" in err
    rc, _ = run(["circuit", "--graph", str(random_circuit_file), "--format", "zoology"])
    assert rc == 2 and "--format needs --export" in capsys.readouterr().err


def test_as_written_and_reassociate_contradict(random_circuit_file, capsys):
    rc, text = run(["circuit", "--graph", str(random_circuit_file), "--as-written", "--reassociate"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "--as-written and --reassociate" in err and "PROVED" not in text


def test_reassociate_forces_the_rewrite(random_circuit_file):
    rc, text = run(["circuit", "--graph", str(random_circuit_file), "--reassociate", "--trials", "2"])
    assert rc == 0 and "re-association: multiplicative depth" in text and "PROVED" in text


def test_the_theorem_line_names_the_circuit_it_refers_to(tmp_path):
    """Issue 43 item 4: where the re-associated circuit is compiled, the summary line's Thm. H.21 entry
    gives that circuit's depth and width, and the line mixes in no other circuit's depth (the original's is
    on the line above); the entry states the theorem's orders: N' = O(w) inner tokens, d' = d channels."""
    f = tmp_path / "h.json"
    C.dump(C.horner([1, -2, 3, Fraction(1, 2), 5, -1, 2, 7, Fraction(-1, 3)], placed=True), f)
    rc, text = run(["circuit", "--graph", str(f), "--trials", "2"])
    line = next(ln for ln in text.splitlines() if ln.startswith("compiled to"))
    g = C.load(f)
    assert rc == 0 and "circuit depth" not in line
    assert "Thm. H.21 (the re-associated circuit compiled: depth " in line
    depth = int(line.split("re-associated circuit compiled: depth ")[1].split(",")[0])
    assert f"O({depth} * log2(" in line and depth != C.metrics(g)["depth"]
    assert f"d' = d = {C.placement(g).channels} inner channels" in line and "no constants stated" in line
    first = next(ln for ln in text.splitlines() if ln.startswith("circuit "))
    assert f"depth {C.metrics(g)['depth']}," in first


@pytest.mark.parametrize("target", ["baseconv", "lsa"])
def test_plot_weights_draws_every_nonzero_weight_array(tmp_path, target, capsys):
    """Issue 43 item 5: --plot-weights draws the compiled stack's weights (BaseConv channel mixes and
    filters, LSA heads) as heat maps, one panel per nonzero array, in one PNG; a non-.png name is
    refused before any work."""
    import json

    f, png, j = tmp_path / "gd.json", tmp_path / "w.png", tmp_path / "r.json"
    C.dump(C.gd_step(3, 2, Fraction(1, 16), placed=True), f)
    rc, text = run(["circuit", "--graph", str(f), "--target", target, "--trials", "2", "--plot-weights", str(png),
                    "--json", str(j)])
    assert rc == 0 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rep = json.loads(j.read_text())
    from constructions.compiler import compile_circuit
    from verify.compiler_trace_plot import _dense

    con = compile_circuit(C.load(f), target=target)
    want = sum(1 for L in con.epilogue for w in L.arrays().values() if _dense(w).any())
    assert rep["plot_weights"]["panels"] == want > 0
    assert f"weight heat maps ({want} arrays)" in text
    capsys.readouterr()
    rc, text = run(["circuit", "--graph", str(f), "--plot-weights", str(tmp_path / "w.txt")])
    err = capsys.readouterr().err + text
    assert rc == 2 and "--plot-weights" in err and "not a .png file name" in err
