"""verify.export.export(path, module, fmt): a module of ``polyverify.torch.load_module`` leaves the toolkit
as trained.  A few Adam steps on an unshared module (its body copies then differ), exported to every format
that holds the construction and read back by ``python -m verify.construct import``: FAILED with a
counterexample; the untouched module, exported the same way: PROVED."""
from __future__ import annotations

import io
import json

import pytest

torch = pytest.importorskip("torch", reason="polyverify.torch builds torch modules")

from constructions.catalogue import entries  # noqa: E402
from constructions.weights_io import load  # noqa: E402
from polyverify.torch import load_module  # noqa: E402
from verify import export as E  # noqa: E402
from verify.construct import main  # noqa: E402
from tests.verify.trained_files import trained_module  # noqa: E402

SUFFIX = {"polyverify": ".safetensors", "precision-ls": ".pt", "zoology": ".safetensors", "icl-gd": ".npz"}
#: constructions and the formats that hold them (tests/verify/test_export.py's FITS), with a body where one is
CELLS = [("gd-baseconv", "polyverify"), ("gd-baseconv", "precision-ls"), ("gd-token-lsa", "polyverify"),
         ("gd-token-lsa", "icl-gd"), ("s003-conv", "zoology"), ("s003-conv", "precision-ls")]


def _sizes(name):
    e = entries()[name]
    return {"n": 4, "d": 2} if "gd" in e.roles else dict(e.sizes)


def _module(name, fmt, steps: int):
    con = entries()[name].build(**_sizes(name))
    m = trained_module(con, 2 if con.body else None, fmt, steps=steps, seed=0)
    return con, m


def _import(con, name, fmt, path, ex, tmp_path):
    argv = ["import", str(path), "--from", fmt, "--spec", name, "--no-search"]
    for k, v in _sizes(name).items():
        argv += ["--set", f"{k}={v}"]
    if "eta" in con.params and fmt != "polyverify":  # given: not solved from the file's (dense) layers
        argv += ["--set", f"eta={con.params['eta']}"]
    if fmt != "polyverify":
        R, C = con.layout.shape
        lay = tmp_path / "identity.json"
        lay.write_text(json.dumps({"format": "polyverify-layout/1", "tokens": list(range(R)),
                                   "columns": list(range(C))}))
        argv += ["--layout", str(lay)]
        for k, v in ex.settings.items():
            argv += ["--config", f"{k}={v}"]
    out = io.StringIO()
    rc = main(argv, out=out)
    return rc, out.getvalue()


@pytest.mark.parametrize("name,fmt", CELLS)
def test_an_untouched_module_proves_and_a_trained_one_fails(tmp_path, name, fmt):
    con, m = _module(name, fmt, 0)
    path = tmp_path / f"untouched{SUFFIX[fmt]}"
    ex = E.export(path, m, fmt)
    assert ex.layers == len(m.blocks)
    rc, text = _import(con, name, fmt, path, ex, tmp_path)
    assert rc == 0 and f"verdict: PROVED: the file computes {name}" in text, text

    con, m = _module(name, fmt, 3)
    trained = m.layers()
    if con.body:  # unshared: the trained body copies differ
        secs = m.sections()
        assert len(secs.bodies) == 2 and any(
            (a.arrays()[n] != b.arrays()[n]).any() for a, b in zip(*secs.bodies) for n in a.arrays())
    path = tmp_path / f"trained{SUFFIX[fmt]}"
    ex = E.export(path, m, fmt)
    if fmt == "polyverify" and con.body:
        assert load(path).declared.get("unrolled") is True
    rc, text = _import(con, name, fmt, path, ex, tmp_path)
    assert rc == 1 and "verdict: FAILED" in text and "counterexample" in text, text
    assert len(trained) == ex.layers


def test_the_exported_file_holds_the_trained_weights(tmp_path):
    """The unrolled polyverify file is the trained module: loaded back, each entry is the module's
    float64 value, and its forward is the module's."""
    con, m = _module("gd-baseconv", "polyverify", 2)
    path = tmp_path / "w.safetensors"
    E.export(path, m, "polyverify")
    back = load_module(path)
    S = torch.randn(3, *con.layout.shape, dtype=torch.float64)
    assert torch.equal(m(S), back(S))
    for a, b in zip(m.layers(), load(path).layers):
        for n, x in a.arrays().items():
            assert (x == b.arrays()[n].astype(float)).all()


def test_a_trained_bias_stays_per_channel_so_precision_ls_holds_it(tmp_path):
    con, m = _module("gd-baseconv", "precision-ls", 3)
    for L in m.layers():
        assert all((L.arrays()[b] == L.arrays()[b][0:1]).all() for b in ("b_in", "b_gate", "b_out"))
        assert not L.b_conv.any()  # frozen: precision-ls's circular (long) filter has no bias
    E.check(m, "precision-ls")


def test_what_a_module_cannot_be_exported_as_is_one_line(tmp_path):
    con, m = _module("gd-baseconv", "polyverify", 0)
    with pytest.raises(E.ExportError, match="pass neither k nor sections"):
        E.export(tmp_path / "w.safetensors", m, "polyverify", k=1)
    with pytest.raises(E.ExportError, match="zoology's BaseConv mixer is causal") as e:
        E.export(tmp_path / "w.safetensors", m, "zoology")
    assert "\n" not in str(e.value)
    save_path = tmp_path / "c.safetensors"
    E.export(save_path, con, "polyverify", k=2)
    from_file = load_module(save_path)
    with pytest.raises(E.ExportError, match="has no construction") as e:
        E.export(tmp_path / "again.safetensors", from_file, "polyverify")
    assert "\n" not in str(e.value)
    E.export(tmp_path / "w.pt", from_file, "precision-ls")  # the peers' formats need the layers only
    with pytest.raises(E.ExportError, match="not 'int'"):
        E.export(tmp_path / "w.safetensors", 3, "polyverify")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.safetensors", "w.pt"]


def test_an_untouched_module_of_a_non_dyadic_step_keeps_the_construction_rationals(tmp_path):
    """eta = 1/10 is no float: the module holds float64(1/10) and its derived entries; exported untouched,
    each entry is the construction's rational (its float64 is that rational's rounding), so the file
    PROVES; one entry moved by one ulp is the binary fraction it is, and the file FAILS."""
    from fractions import Fraction

    con = entries()["gd-baseconv"].build(n=4, d=2, eta=Fraction(1, 10))
    m = load_module(con, 2)
    path = tmp_path / "w.safetensors"
    E.export(path, m, "polyverify")
    assert load(path).entries_from_exact > 0
    assert main(["gd", "--weights", str(path)], out=io.StringIO()) == 0
    with torch.no_grad():
        W = m.blocks[3].weights["W_out"]  # body copy 1, layer 0
        i, j = (int(x) for x in torch.nonzero(W)[0])
        W[i, j] = torch.nextafter(W[i, j], torch.tensor(2.0, dtype=W.dtype))
    E.export(path, m, "polyverify")
    out = io.StringIO()
    assert main(["gd", "--weights", str(path)], out=out) == 1 and "body copy 1" in out.getvalue()
