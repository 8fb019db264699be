"""Red-team follow-ups on ``python -m verify.construct import`` (``--from polyverify``):

1. a file whose declared sizes were changed (``variables.A`` [3, 2] -> [4, 2], tensors unchanged)
   crashed in the proof ("operands could not be broadcast", exit 1, no JSON): refused before the
   proof, exit 2, one line naming the array whose shape does not fit;
2. the toolkit's own compiled-* files were FAILED (the default eta was used, not the metadata's)
   and a ridge file could not be proved at all (``--set lam`` refused): the parameters come from
   the metadata, and ``--set`` takes every parameter the ``gd`` builder takes;
3. a metadata ``k`` that contradicts the file's layers was ignored (PROVED "k = 3 in the file"):
   refused like ``gd --weights``, naming both values;
4. a declared rational was labelled "a product of stored values": it comes from the metadata;
5. ``/dev/zero`` or a FIFO was "file not found": "not a regular file", for ``import`` and
   ``gd --weights`` alike.
"""
from __future__ import annotations

import io
import json
import os
from fractions import Fraction

import pytest
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

from constructions.catalogue import gd_architectures
from constructions.weights_io import save
from verify.construct import main
from verify.importers import search

COMPILED = ["compiled-baseconv", "compiled-baseconv-causal", "compiled-lsa", "compiled-elsa"]


def _edit_meta(src, dst, fn):
    with safe_open(str(src), framework="numpy") as f:
        meta = dict(f.metadata())
    cons = json.loads(meta["construction"])
    fn(cons)
    meta["construction"] = json.dumps(cons)
    save_file(load_file(str(src)), str(dst), metadata=meta)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("t25imp")
    gd = gd_architectures()
    for arch in COMPILED:
        save(d / f"{arch}.safetensors", gd[arch].build(3, 2, eta=Fraction(1, 9)), 1)
        save(d / f"{arch}-ridge.safetensors", gd[arch].build(3, 2, eta=Fraction(1, 9), lam=Fraction(1, 3)), 1)
    _edit_meta(d / "compiled-elsa-ridge.safetensors", d / "ce4.safetensors",
               lambda c: c["variables"].__setitem__("A", [4, 2]))
    save(d / "f.safetensors", gd["baseconv"].build(4, 2, eta=Fraction(1, 10)), 3)
    _edit_meta(d / "f.safetensors", d / "bc_k.safetensors", lambda c: c.__setitem__("k", 4))
    os.mkfifo(d / "fifo")
    return d


def run(argv, capsys):
    out = io.StringIO()
    rc = main(argv, out=out)
    return rc, out.getvalue(), capsys.readouterr().err


def imp(path, spec, *extra):
    return ["import", str(path), "--from", "polyverify", "--spec", spec, "--no-search", *extra]


def refused(rc, out, err):
    assert rc == 2, (rc, out, err)
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err, err
    assert out == "", out  # refused before the proof: nothing printed
    return err


def test_changed_declared_sizes_are_refused_before_the_proof(files, capsys, tmp_path):
    rep = tmp_path / "r.json"
    err = refused(*run(imp(files / "ce4.safetensors", "compiled-elsa", "--json", str(rep)), capsys))
    assert "has shape (8, 8)" in err and "n=4 (the file)" in err and "5 x 9 states" in err, err
    assert "broadcast" not in err and not rep.exists()


@pytest.mark.parametrize("ridge", [False, True])
@pytest.mark.parametrize("arch", COMPILED)
def test_own_compiled_files_prove_with_the_metadata_parameters(files, capsys, arch, ridge):
    path = files / f"{arch}{'-ridge' if ridge else ''}.safetensors"
    rc, out, err = run(imp(path, arch), capsys)
    assert rc == 0, out + err
    assert "eta = 1/9 (from the file's metadata)" in out
    assert ("lam = 1/3 (from the file's metadata)" in out) == ridge
    verdict = next(line for line in out.splitlines() if line.startswith("verdict:"))
    assert verdict.startswith(f"verdict: PROVED: the file computes gd-{arch} at every depth"), verdict
    assert "eta = 1/9 (declared in the file's metadata)" in verdict


def test_set_takes_every_parameter_the_builder_takes(files, capsys):
    # --set repeating the metadata is accepted (lam was refused: "has no ... parameter 'lam'")
    rc, out, err = run(imp(files / "compiled-baseconv-ridge.safetensors", "compiled-baseconv",
                           "--set", "lam=1/3", "--set", "eta=1/9"), capsys)
    assert rc == 0, out + err
    assert "lam = 1/3 (from --set)" in out and "verdict: PROVED" in out
    # ... a contradiction of it is refused, naming both values (as gd --weights)
    err = refused(*run(imp(files / "compiled-baseconv-ridge.safetensors", "compiled-baseconv",
                           "--set", "lam=1/4"), capsys))
    assert "declares parameters" in err and '"lam": "1/3"' in err and '"lam": "1/4"' in err, err
    # lam on a plain least-squares architecture is still no parameter
    err = refused(*run(imp(files / "f.safetensors", "baseconv", "--set", "lam=1/3"), capsys))
    assert "has no size or parameter 'lam'" in err


def test_a_metadata_k_that_contradicts_the_layers_is_refused(files, capsys):
    err = refused(*run(imp(files / "bc_k.safetensors", "baseconv"), capsys))
    assert "k=4" in err and "k=3" in err and "--allow-metadata-mismatch" in err, err
    rc, out, _ = run(imp(files / "bc_k.safetensors", "baseconv", "--allow-metadata-mismatch"), capsys)
    assert rc == 0 and "k = 3 in the file" in out  # the layers themselves are gd-baseconv


def test_declared_rationals_are_said_to_come_from_the_metadata(files, capsys, tmp_path):
    rep = tmp_path / "r.json"
    rc, out, err = run(imp(files / "f.safetensors", "baseconv", "--json", str(rep)), capsys)
    assert rc == 0, out + err
    assert "product of stored values" not in out
    assert "eta = 1/10 (from the file's metadata)" in out
    assert "declared rationals: 780 entries of the file read as its metadata's declared rationals" in out
    r = json.loads(rep.read_text())
    assert r["parameters"]["eta"]["from"] == "the file's metadata" and r["declared_rationals"]["entries"] == 780
    # a value solved from layers that hold declared rationals says so too
    assert "declared rationals" in search.describe_value(Fraction(1, 10), "float64", declared=True)
    assert "product of stored values" in search.describe_value(Fraction(1, 10), "float64")


@pytest.mark.parametrize("target", ["/dev/zero", "fifo", "folder"])
def test_a_path_that_is_not_a_regular_file_says_so(files, capsys, target):
    if target == "folder":
        path = str(files)
    else:
        path = target if target.startswith("/") else str(files / target)
    if target == "/dev/zero" and not os.path.exists(path):
        pytest.skip(reason="no /dev/zero on this system")
    for argv in (["import", path, "--from", "polyverify", "--spec", "baseconv"],
                 ["import", path, "--from", "zoology", "--spec", "baseconv"],
                 ["gd", "--weights", path, "--batch", "2", "--quiet"]):
        err = refused(*run(argv, capsys))
        assert "not a regular file" in err and "not found" not in err, (argv, err)
