"""Compiled circuits back from a peer format (issue 44 item 3): ``import FILE --from FORMAT --circuit G.json
[--target T]`` proves a compiled circuit exported to a peer's format (or this toolkit's) against the circuit
compiled; a changed weight is FAILED; the options are checked in one line."""
from __future__ import annotations

import io

import numpy as np
import pytest

import circuits as C
from constructions.compiler import compile_circuit
from verify.construct import main
from verify.export import export

pytest.importorskip("torch", reason="precision-ls files are torch checkpoints")


def _dot(tmp_path):
    """The quick start's circuit: y = a0 b0 + a1 b1 on a 2-token x 2-channel grid."""
    b = C.CircuitBuilder()
    a = [(b.input(f"a{i}", token=i, channel=0), b.input(f"b{i}", token=i, channel=1)) for i in range(2)]
    b.output(b.add(*(b.mul(ai, bi) for ai, bi in a)), "y", token=1, channel=1)
    g = b.graph()
    path = tmp_path / "dot.json"
    C.dump(g, str(path))
    return g, path


def _run(argv):
    out = io.StringIO()
    rc = main(["import", *map(str, argv), "--no-search"], out=out)
    return rc, out.getvalue()


@pytest.mark.parametrize("fmt,target,suffix", [("precision-ls", "baseconv-mlp", ".pt"),
                                               ("polyverify", "baseconv", ".safetensors")])
def test_a_compiled_circuit_exported_is_proved_back(tmp_path, fmt, target, suffix):
    g, gpath = _dot(tmp_path)
    path = tmp_path / f"dot{suffix}"
    export(path, compile_circuit(g, name="dot", target=target), fmt)
    rc, out = _run([path, "--from", fmt, "--circuit", gpath, "--target", target])
    assert rc == 0 and "verdict: PROVED: the file computes dot" in out, out


def test_a_changed_weight_of_the_compiled_circuit_fails(tmp_path):
    import torch

    g, gpath = _dot(tmp_path)
    path = tmp_path / "dot.pt"
    export(path, compile_circuit(g, name="dot", target="baseconv-mlp"), "precision-ls")
    ck = torch.load(str(path), weights_only=True)
    key = next(k for k in ck["model_state_dict"] if k.endswith("out_proj.weight"))
    w = ck["model_state_dict"][key]
    idx = tuple(int(i) for i in np.argwhere(w.numpy() != 0)[0])
    w[idx] = w[idx] * 2
    torch.save(ck, str(path))
    rc, out = _run([path, "--from", "precision-ls", "--circuit", gpath, "--target", "baseconv-mlp"])
    assert rc == 1 and "verdict: FAILED: the file is not dot" in out and "counterexample:" in out, out


@pytest.mark.parametrize("extra,needle", [
    (["--spec", "gd-baseconv"], "--circuit and --spec: give one"),
    (["--target", "nope"], "not a compiler target"),
])
def test_circuit_options_are_checked_in_one_line(tmp_path, capsys, extra, needle):
    g, gpath = _dot(tmp_path)
    path = tmp_path / "dot.pt"
    export(path, compile_circuit(g, name="dot", target="baseconv-mlp"), "precision-ls")
    rc, out = _run([path, "--from", "precision-ls", "--circuit", gpath, *extra])
    err = capsys.readouterr().err
    assert rc == 2 and out == "" and err.count("\n") == 1 and needle in err, err


def test_target_needs_circuit(tmp_path, capsys):
    rc, out = _run([tmp_path / "x.pt", "--from", "precision-ls", "--spec", "gd-baseconv", "--target", "baseconv"])
    assert rc == 2 and "--target applies to --circuit" in capsys.readouterr().err
