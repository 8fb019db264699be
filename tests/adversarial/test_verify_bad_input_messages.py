"""Issue 39 ("Trust IV"), the verify / circuits / constructions parts: tracebacks, options a run
ignored, small nonsense accepted, messages that named the wrong thing, verdicts that changed late.

Bad input to a command is refused before any work (exit 2, one line ``error: ...`` on stderr, no
traceback, nothing on stdout, no file touched: the ``refused`` fixture of ``conftest.py``); the
table :data:`CASES` holds each command line and the words its refusal must contain."""
from __future__ import annotations

import io
import json
import os
import pickle
import time
from fractions import Fraction

import numpy as np
import pytest

import circuits as C
from circuits.random import main as random_main
from verify.compare import main as compare_main
from verify.construct import main

from tests.verify.import_files import precision_ls_notebook, save_pt, zoology_mixer

torch = pytest.importorskip("torch", reason="precision-ls files are torch state_dicts")

PLS = ["--from", "precision-ls", "--spec", "baseconv"]
SMALL = ["--n", "3", "--d", "2", "--batch", "2", "--quiet"]
BLOCK = "_backbone.transformer.h.0.seq_mixer.base_conv."
LAYOUT = {"format": "polyverify-layout/1"}


def _square():
    return {"nodes": [{"id": 0, "op": "input", "name": "x"}, {"id": 1, "op": "mul", "output": "y"}],
            "links": [{"source": 0, "target": 1, "mult": 2}]}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Input files, in a folder of their own (never written by the commands)."""
    d = tmp_path_factory.mktemp("t39in")
    (d / "afolder").mkdir()
    os.mkfifo(d / "fifo")
    (d / "sq.json").write_text(json.dumps(_square()))
    save_pt(d / "ok.pt", precision_ls_notebook(2, 4, 0.1, 1), {"causal": True})
    sd = precision_ls_notebook(2, 4, 0.1, 1)
    sd[BLOCK + "in_proj.weight"] = torch.tensor(1.0)  # 0-dim: was an IndexError
    save_pt(d / "scalar.pt", sd, {"causal": True})
    sd = precision_ls_notebook(2, 4, 0.1, 1)
    sd[BLOCK + "in_proj.weight"] = sd[BLOCK + "in_proj.weight"] != 0  # bool: was proved as 0/1
    save_pt(d / "bool.pt", sd, {"causal": True})
    # the toolkit's own file with one tensor made bool (gd --weights and import --from polyverify)
    assert main(["gd", "--layers", "4", *SMALL, "--export", str(d / "w.safetensors")], out=io.StringIO()) == 0
    from safetensors import safe_open
    from safetensors.numpy import save_file

    with safe_open(str(d / "w.safetensors"), "np") as f:
        meta, t = f.metadata(), {k: f.get_tensor(k) for k in f.keys()}
    t["layers.0.W_in"] = t["layers.0.W_in"] != 0
    save_file(t, str(d / "bool.safetensors"), metadata=meta)
    (d / "empty.json").write_text("{}")
    (d / "noformat.json").write_text(json.dumps({"tokens": [0, 1, 2, 3]}))
    # .pt files torch cannot read, and what torch said about them
    (d / "text.pt").write_bytes(b"hello world\n")  # torch: "101" (the unpickler's KeyError)
    (d / "empty.pt").write_bytes(b"")  # torch: EOFError, an empty message
    torch.save({"a": np.zeros(3)}, str(d / "numpy.pt"))  # torch: a paragraph with ANSI escapes
    (d / "pickle4.pt").write_bytes(pickle.dumps({"x": 1}, protocol=4))
    doc = _square()
    doc["nodes"][1]["colour"] = float("nan")
    (d / "nan.json").write_text(json.dumps(doc))  # a bare NaN in an attribute nobody reads
    doc = _square()
    doc["graph"] = {"scale": 1e999}
    (d / "inf.json").write_text(json.dumps(doc).replace("Infinity", "1e999"))
    return d


def _fill(argv, d, tmp):
    return [a.replace("{in}", str(d)).replace("{tmp}", str(tmp)) for a in argv]


def _cmp(learned):
    return ["--learned", learned, "--construction", "gd-baseconv", "--out", "{tmp}/out"]


# (main, argv, words the one-line refusal must contain)
CASES = [
    # 5. tracebacks: --device tpu (a RuntimeError from torch once the run started), a 0-dim tensor
    (main, ["gd", "--layers", "4", *SMALL, "--backend", "torch", "--device", "tpu"],
     ["--device must be cpu or cuda[:index]", "'tpu'"]),
    (main, ["gd", "--layers", "4", *SMALL, "--backend", "torch", "--device", "cuda:x"], ["--device", "cuda:x"]),
    (main, ["import", "{in}/scalar.pt", *PLS], ["in_proj.weight is 0-dim (a scalar)", "2 dimensions"]),
    # 6. an option the run ignored: --float-trials above --trials ran --trials of them
    (main, ["circuit", "--graph", "{in}/sq.json", "--float-trials", "100", "--trials", "10"],
     ["--float-trials 100 exceeds --trials 10"]),
    (main, ["circuit", "--graph", "{in}/sq.json", "--allow-metadata-mismatch"],
     ["--allow-metadata-mismatch applies to a --weights file"]),
    # 7. small nonsense: a suffix the format is not written as (keep.txt was replaced by safetensors)
    (main, ["gd", "--layers", "4", *SMALL, "--export", "{tmp}/keep.txt"], ["--export", ".safetensors", "keep.txt"]),
    (main, ["circuit", "--graph", "{in}/sq.json", "--export", "{tmp}/keep.txt"], ["--export", ".safetensors"]),
    (main, ["s003-conv", "--export", "{tmp}/keep.txt"], ["--export", ".safetensors"]),
    # ... a layout without its format (read as the identity)
    (main, ["import", "{in}/ok.pt", *PLS, "--layout", "{in}/empty.json"], ["--layout", "no 'format' key"]),
    (main, ["import", "{in}/ok.pt", *PLS, "--layout", "{in}/noformat.json"], ["no 'format' key"]),
    # ... a bool tensor, by import (proved as 0/1) and by gd --weights, the same check
    (main, ["import", "{in}/bool.pt", "--from", "precision-ls", "--spec", "prefix-coupled"],
     ["in_proj.weight has dtype bool", "not a weight"]),
    (main, ["import", "{in}/bool.safetensors", "--from", "polyverify", "--spec", "baseconv"],
     ["layers.0.W_in has dtype bool", "not a weight"]),
    (main, ["gd", "--layers", "4", *SMALL, "--weights", "{in}/bool.safetensors"],
     ["layers.0.W_in has dtype bool", "not a weight"]),
    # ... a non-finite number anywhere in a circuit file
    (main, ["circuit", "--graph", "{in}/nan.json"], ["non-finite number NaN at nodes[1].colour (node 1)"]),
    (main, ["circuit", "--graph", "{in}/inf.json"], ["non-finite number 1e999 at graph.scale"]),
    # ... a seed beyond an int64
    (random_main, ["--seed", str(10**24), "--out", "{tmp}/c.json"], ["--seed", str(2**63 - 1)]),
    # 8. input paths said as what they are (were "is a folder, not a file" / "file not found")
    (compare_main, _cmp("/dev/zero"), ["--learned /dev/zero: is not a regular file (a character device)"]),
    (compare_main, _cmp("{in}/fifo"), ["--learned", "is not a regular file (a FIFO)"]),
    (compare_main, _cmp("{in}/afolder"), ["--learned", "is a folder, not a regular file"]),
    (main, ["circuit", "--graph", "{in}/sq.json", "--weights", "/dev/zero"],
     ["--weights /dev/zero: is not a regular file (a character device)"]),
    (main, ["circuit", "--graph", "{in}/sq.json", "--weights", "{in}/fifo"], ["--weights", "(a FIFO)"]),
    (main, ["gd", "--layers", "4", *SMALL, "--weights", "/dev/zero"], ["--weights", "(a character device)"]),
    (main, ["import", "{in}/fifo", *PLS], ["fifo: is not a regular file (a FIFO)"]),
    (main, ["import", "{in}/ok.pt", *PLS, "--layout", "/dev/zero"], ["--layout /dev/zero", "(a character device)"]),
    (main, ["import", "{in}/ok.pt", *PLS, "--layout", "{in}/fifo"], ["--layout", "(a FIFO)"]),
    # ... and what was wrong with a .pt file, not torch's opcode or its escape sequences
    (main, ["import", "{in}/text.pt", *PLS], ["not a checkpoint torch.save wrote", "b'hello wo'"]),
    (main, ["import", "{in}/empty.pt", *PLS], ["the file is empty"]),
    (main, ["import", "{in}/numpy.pt", *PLS], ["pickles a numpy", "does not unpickle"]),
    (main, ["import", "{in}/pickle4.pt", *PLS], ["torch.load(weights_only=True) does not read"]),
]


@pytest.mark.parametrize("fn,argv,needles", CASES, ids=[" ".join(c[1])[:70] for c in CASES])
def test_bad_input_is_refused_up_front(files, tmp_path, fn, argv, needles, refused):
    if "/dev/zero" in argv and not os.path.exists("/dev/zero"):
        pytest.skip("this system has no /dev/zero, the character device the test reads as an input")
    (tmp_path / "keep.txt").write_text("the user's file\n")
    kw = {"out": io.StringIO()} if fn is main else {}
    err = refused(fn, _fill(argv, files, tmp_path), tmp_path, needles, **kw)
    assert "\x1b" not in err  # no terminal escape sequence from torch
    assert "(101)" not in err
    assert (tmp_path / "keep.txt").read_text() == "the user's file\n"


def test_the_device_check_is_numerics_trains_own(monkeypatch, capsys):
    """gd --device runs numerics.train's check (one check, not a second copy)."""
    import numerics.train

    seen = []
    monkeypatch.setattr(numerics.train, "checked_device", lambda flag, dev: seen.append((flag, dev)) or dev)
    # past the device check, refused by a later one (no work)
    assert main(["gd", "--layers", "4", *SMALL, "--backend", "torch", "--device", "tpu", "--conv", "fft",
                 "--arch", "lsa"], out=io.StringIO()) == 2
    assert seen == [("--device", "tpu")] and "--conv fft" in capsys.readouterr().err


# ------------------------------------------------------------------ 5. tracebacks from Python

@pytest.mark.parametrize("obj", ["gd-baseconv", 3, None])
def test_prove_says_what_it_takes(obj):
    from verify.prover.proof import prove, prove_intermediate_states

    with pytest.raises(TypeError, match="prove takes a Construction"):
        prove(obj)
    with pytest.raises(TypeError, match="prove_intermediate_states takes a Construction"):
        prove_intermediate_states(obj)


def test_prove_refuses_sections_that_are_not_a_dict_of_lists():
    from constructions.catalogue import gd_architectures
    from verify.prover.proof import prove

    con = gd_architectures()["baseconv"].build(3, 2)
    with pytest.raises(TypeError, match="sections must be a dict"):
        prove(con, sections=[con.body])
    with pytest.raises(TypeError, match="unknown key 'bodies'"):
        prove(con, sections={"bodies": [con.body]})
    with pytest.raises(ValueError, match="unknown proof backend"):
        prove(con, backend="nope")


def _every_tensor_made(sd: dict, make) -> list[dict]:
    return [{**sd, k: make(v)} for k, v in sd.items()]


@pytest.mark.parametrize("reader", ["precision-ls", "zoology"])
def test_a_tensor_of_any_rank_is_refused_in_one_line_never_a_traceback(tmp_path, capsys, reader):
    """Every tensor of the file, in turn, 0-dim (the issue's in_proj.weight), empty or one
    dimension more: a one-line refusal (or a FAILED), never an IndexError."""
    if reader == "precision-ls":
        base = {k: v.numpy() for k, v in precision_ls_notebook(1, 3, 0.1, 1).items()}
        path, argv = tmp_path / "f.pt", ["--from", "precision-ls", "--spec", "baseconv"]

        def save(sd):
            save_pt(path, {k: torch.as_tensor(np.asarray(v)) for k, v in sd.items()}, {"causal": True})
    else:
        h = np.zeros((4, 2))
        h[0] = 1
        base = zoology_mixer(h)
        path, argv = tmp_path / "z.npz", ["--from", "zoology", "--spec", "s003-conv", "--config", "tokens=4"]

        def save(sd):
            np.savez(path, **{k: np.asarray(v) for k, v in sd.items()})
    for make in (lambda v: np.float32(1.0), lambda v: np.zeros((0,) + v.shape[1:], np.float32),
                 lambda v: np.asarray(v)[None]):
        for sd in _every_tensor_made(base, make):
            save(sd)
            rc = main(["import", str(path), *argv, "--no-search"], out=io.StringIO())
            err = capsys.readouterr().err
            assert rc in (1, 2) and "Traceback" not in err, err
            assert rc == 1 or (err.startswith("error: ") and err.count("\n") == 1), err


# ------------------------------------------------------------------ 6. --float-trials and --trials

def test_float_trials_are_some_of_the_trials(files, tmp_path, capsys):
    """--float-trials above --trials is refused (it ran --trials of them); without --float-trials:
    8, or --trials where that is fewer (the default is not refused)."""
    assert main(["circuit", "--graph", str(files / "sq.json"), "--trials", "3", "--float-trials", "4"],
                out=io.StringIO()) == 2
    assert "--float-trials 4 exceeds --trials 3" in capsys.readouterr().err
    out = io.StringIO()
    assert main(["circuit", "--graph", str(files / "sq.json"), "--trials", "3", "--json", str(tmp_path / "r.json")],
                out=out) == 0
    assert json.loads((tmp_path / "r.json").read_text())["float64_trials"]["n"] == 3
    assert "3 random float64 inputs" in out.getvalue()


# ------------------------------------------------------------------ 7. smaller nonsense, from Python

def test_compile_circuit_bounds_the_multiplicity_up_front():
    """A wire of mult 10**6 took 30 s to compile; refused at once, naming the node and the bound
    (the circuit command's own limit with --allow-large is the same number)."""
    from circuits.limits import COMPILE_LIMITS
    from constructions.compiler import compile_circuit
    from verify.circuit_args import LARGE_LIMITS

    doc = _square()
    doc["links"][0]["mult"] = 10**6
    g = C.load(doc)
    t0 = time.perf_counter()
    with pytest.raises(C.CircuitError, match=r"node 1: operand 0 has mult 1000000.*max_mult = 16384"):
        compile_circuit(g)
    assert time.perf_counter() - t0 < 1.0
    assert LARGE_LIMITS["max_mult"] == COMPILE_LIMITS["max_mult"] == 16_384
    doc["links"][0]["mult"] = COMPILE_LIMITS["max_mult"]  # the bound itself compiles
    assert compile_circuit(C.load(doc)).info["circuit"]["degree"] == COMPILE_LIMITS["max_mult"]


def test_a_circuit_dict_with_a_float_nan_anywhere_is_refused():
    doc = _square()
    doc["nodes"][0]["meta"] = {"w": [1.0, float("inf")]}
    with pytest.raises(C.CircuitError, match=r"non-finite number inf at nodes\[0\]\.meta\.w\[1\] \(node 0\)"):
        C.load(doc)


def test_bool_tensors_are_refused_by_the_one_shared_reading():
    from constructions.weights_io import WeightFileError, exact_tensor

    with pytest.raises(WeightFileError, match="dtype bool"):
        exact_tensor(np.array([True, False]), "t", "f")
    assert list(exact_tensor(np.array([1, 0], dtype=np.int8), "t", "f")) == [1, 0]


def test_the_identity_layout_is_written_out(files, tmp_path):
    """``{}`` is refused; ``{"format": ...}`` alone is the identity layout, as the refusal says."""
    argv = ["import", str(files / "w.safetensors"), "--from", "polyverify", "--spec", "baseconv", "--set", "n=3",
            "--set", "d=2", "--layout", str(tmp_path / "id.json")]
    (tmp_path / "id.json").write_text("{}")
    assert main(argv, out=io.StringIO()) == 2
    (tmp_path / "id.json").write_text(json.dumps(LAYOUT))
    out = io.StringIO()
    assert main(argv, out=out) == 0 and "verdict: PROVED" in out.getvalue(), out.getvalue()


# ------------------------------------------------------------------ 9. a printed verdict is final

@pytest.mark.parametrize("how", ["memory", "time"])
def test_a_nearby_search_past_a_limit_is_a_line_after_the_verdict_not_an_exit_2(tmp_path, monkeypatch, how):
    """A FAILED file whose nearby search runs out of memory (or time): the verdict stays FAILED,
    exit 1, the stop is one line of its own, and --json is written with it."""
    import verify.importers.prove as P

    def stuck(*a, **k):
        if how == "memory":
            raise MemoryError  # what the child's address-space limit makes of an allocation
        time.sleep(60)

    monkeypatch.setattr(P, "_nearby", stuck)  # the search runs in a forked child: it sees this
    p = tmp_path / "w.pt"
    save_pt(p, precision_ls_notebook(2, 4, 0.1, 2, causal=True), {"causal": True})  # not GD: FAILED
    out = io.StringIO()
    t0 = time.monotonic()
    rc = main(["import", str(p), *PLS, "--json", str(tmp_path / "r.json"), "--proof-timeout", "8"], out=out)
    text = out.getvalue()
    assert rc == 1, text
    assert time.monotonic() - t0 < 20
    lines = text.splitlines()
    v = next(i for i, x in enumerate(lines) if x.startswith("verdict: FAILED"))
    stop = next(i for i, x in enumerate(lines) if "nearby search stopped" in x)
    assert stop > v and "the verdict above stands" in lines[stop]
    assert ("memory limit" if how == "memory" else "time limit") in lines[stop]
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["verdict"]["ok"] is False and "nearby search stopped" in rep["nearby_stopped"]
    assert "nearby" not in rep
    if how == "time":
        return
    # within the limits (the search in its own child now): reported as before
    monkeypatch.undo()
    assert main(["import", str(p), *PLS, "--json", str(tmp_path / "r.json")], out=io.StringIO()) == 1
    rep = json.loads((tmp_path / "r.json").read_text())
    assert "nearby_stopped" not in rep and any(t.get("specification") == "prefix-coupled" and t["ok"]
                                               for t in rep["nearby"])
    assert Fraction(rep["nearby"][-1]["parameters"]["eta"]["value"]) == Fraction(13421773, 134217728)
