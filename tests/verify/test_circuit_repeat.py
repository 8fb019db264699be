"""``python -m verify.construct circuit --graph STEP.json --repeat K``: an iteration compiled, proved at every
depth, run K steps in float against the exact iteration, exported."""
import io
import json
from fractions import Fraction

import pytest

import circuits as C
from constructions.iterated import MAX_REPEAT, MAX_REPEAT_LARGE
from verify.circuit_args import LARGE_LIMITS, LIMITS
from verify.construct import main


def run(argv):
    out = io.StringIO()
    rc = main(argv, out=out)
    return rc, out.getvalue()


def gd(A, b, x, eta):
    return {"x": x - eta * A.T @ (A @ x - b), "A": A, "b": b}


@pytest.fixture(scope="module")
def step_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("steps") / "gd.json"
    C.dump(C.from_function(gd, A=(5, 2), b=(5,), x=(2,), eta=(), placed=True), path)
    return path


def test_repeat_proves_at_every_depth_runs_and_reports(tmp_path, step_file):
    rep, w = tmp_path / "r.json", tmp_path / "w.safetensors"
    rc, text = run(["circuit", "--graph", str(step_file), "--repeat", "40", "--params", "eta=1/16",
                    "--float-trials", "3", "--json", str(rep), "--export", str(w)])
    assert rc == 0, text
    assert "proof: PROVED" in text and "PROVED at every depth" in text
    assert "repeated 40 times" in text and "parameters held in the state (symbols of the proof): eta" in text
    r = json.loads(rep.read_text())
    assert r["compiled"]["repeat"] == 40 and r["compiled"]["params"] == ["eta"] and r["proved_every_depth"] is True
    f64, f32 = r["float_runs"]
    assert (f64["dtype"], f32["dtype"]) == ("float64", "float32")
    assert len(f64["max_relative_error"]) == 40 and max(f64["max_relative_error"]) < 1e-13
    assert max(f32["max_relative_error"]) < 1e-4 and w.exists()
    from polyverify.torch import load_module

    m = load_module(w)  # the exported file: K body copies
    assert m.k == 40 and len(m.blocks) == 40 * m.sizes[1] and m.sizes[0] == m.sizes[2] == 0


def test_the_same_proof_for_every_repeat(step_file):
    """The proof checks one body: its entry count does not depend on K."""
    lines = []
    for k in ("1", "500"):
        rc, text = run(["circuit", "--graph", str(step_file), "--repeat", k, "--params", "eta", "--float-trials", "0"])
        assert rc == 0
        lines.append(next(x for x in text.splitlines() if x.startswith("proof:")).split("; ")[1])
    assert lines[0] == lines[1]


def test_refusals_one_line_exit_2(tmp_path, step_file, capsys):
    unfed = tmp_path / "unfed.json"
    C.dump(C.from_function(lambda A, b, x: {"x": x - Fraction(1, 8) * A.T @ (A @ x - b), "A": A},
                           A=(3, 2), b=(3,), x=(2,), placed=True), unfed)
    other = tmp_path / "other.json"
    C.dump(C.from_function(lambda x: {"x": x[:1] * x[:1]}, x=(2,)), other)
    extra = tmp_path / "extra.json"
    C.dump(C.from_function(lambda x: {"x": x * x, "y": x.sum()}, x=(2,)), extra)
    cases = [
        ([str(unfed), "--repeat", "3"], "input 'b_0' is not fed"),
        ([str(other), "--repeat", "3"], "output x (shape (1,)) feeds input x of another shape (2,)"),
        ([str(extra), "--repeat", "3"], "output 'y' feeds no input"),
        ([str(step_file), "--repeat", "3"], "input 'eta' is not fed"),
        ([str(step_file), "--repeat", "0", "--params", "eta"], "--repeat must be >= 1"),
        ([str(step_file), "--repeat", str(MAX_REPEAT + 1), "--params", "eta"], "pass --allow-large"),
        ([str(step_file), "--params", "eta"], "--params applies with --repeat"),
        ([str(step_file), "--repeat", "2", "--params", "eta,eta"], "--params names 'eta' twice"),
        ([str(step_file), "--repeat", "2", "--params", "eta=0.1.2"], "--params eta"),
        ([str(step_file), "--repeat", "2", "--params", "eta", "--trace"], "--trace does not apply with --repeat"),
        ([str(step_file), "--repeat", "90000", "--params", "eta"], "max_repeat_work"),
    ]
    for argv, words in cases:
        json_out = tmp_path / "never.json"
        rc = main(["circuit", "--graph", *argv, "--json", str(json_out)], out=io.StringIO())
        err = capsys.readouterr().err
        assert rc == 2 and words in err and err.count("\n") == 1, (argv, err)
        assert not json_out.exists()


def test_limits_are_the_constructions():
    assert LIMITS["max_repeat"] == MAX_REPEAT and LARGE_LIMITS["max_repeat"] == MAX_REPEAT_LARGE


def test_a_circuit_file_declares_its_parameters(tmp_path, capsys):
    """An input node with "param": true is held like --params; another value of the attribute is refused."""
    g = C.from_function(lambda x, e: {"x": x * e}, x=(2,), e=())
    node = C.input_nodes(g)["e"]
    g.nodes[node]["param"] = True
    f, rep = tmp_path / "p.json", tmp_path / "r.json"
    C.dump(g, f)
    rc, text = run(["circuit", "--graph", str(f), "--repeat", "7", "--float-trials", "2", "--json", str(rep)])
    assert rc == 0 and "PROVED at every depth" in text
    assert json.loads(rep.read_text())["compiled"]["params"] == ["e"]
    g.nodes[node]["param"] = "yes"
    C.dump(g, f)
    assert main(["circuit", "--graph", str(f), "--repeat", "7"], out=io.StringIO()) == 2
    assert "the attribute 'param' is for input nodes, true or false" in capsys.readouterr().err
