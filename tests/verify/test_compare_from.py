"""``python -m verify.compare --from FORMAT``: a peer's file (precision-ls, zoology, icl-gd) or a
``polyverify.torch`` module's state_dict compared against a construction directly, each format on a file
``verify.export`` wrote and on one written the way the peer's own code saves it (``tests/verify/
import_files.py``, ``test_import_checkpoints.py``); bad input is one line, exit 2, before any work."""
from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="precision-ls and zoology files and modules are torch's")

from constructions.catalogue import entries  # noqa: E402
from constructions.layers import BaseConv  # noqa: E402
from verify import export as E  # noqa: E402
from verify.compare import main  # noqa: E402
from verify.importers import FORMATS  # noqa: E402

from tests.verify.import_files import icl_gd_create_weights, zoology_mixer  # noqa: E402
from tests.verify.test_import_checkpoints import train_state  # noqa: E402
from tests.verify.trained_files import trained_module  # noqa: E402

SMALL = ["--problems", "4", "--iters", "4", "--iter-sigmas", "1", "--sigmas", "1", "--kappas", "5", "--scales", "1",
         "--skip", "polynomial,invariants"]


def compare(tmp_path, path, fmt, name, *extra, out="out"):
    o = tmp_path / out
    rc = main(["--learned", str(path), "--from", fmt, "--construction", name, "--n", "4", "--d", "2",
               "--out", str(o), *SMALL, *extra])
    return rc, (json.loads((o / "report.json").read_text()) if rc == 0 else None)


def largest(rep) -> float:
    return max(p["max_abs"] for p in rep["functional"]["predictions"])


def trained(name, fmt, k=2, steps=3):
    con = entries()[name].build(n=4, d=2)
    m = trained_module(con, k, fmt, steps=steps, seed=1)
    return con, m


# ------------------------------------------------------------------ files verify.export wrote

@pytest.mark.parametrize("name,fmt,suffix", [("gd-baseconv", "precision-ls", ".pt"),
                                             ("gd-token-lsa", "icl-gd", ".npz")])
def test_an_exported_module_compares_zero_untouched_and_nonzero_trained(tmp_path, name, fmt, suffix):
    for steps in (0, 3):
        con, m = trained(name, fmt, steps=steps)
        path = tmp_path / f"m{steps}{suffix}"
        ex = E.export(path, m, fmt)
        cfg = [x for k, v in ex.settings.items() for x in ("--config", f"{k}={v}")]
        # trained: dense weights, whose exact residual polynomials are large; the refutation comes first
        limit = ["--poly-timeout", "2"] if steps else []
        rc, rep = compare(tmp_path, path, fmt, name, "--weights", *limit, *cfg, out=f"o{steps}")
        assert rc == 0 and rep["learned_from"]["format"] == fmt and rep["k"] == 2
        if steps:
            assert largest(rep) > 0 and rep["weights"]["exact"] is False
            assert rep["weights"]["refutation"] is not None  # an exact counterexample at an integer point
        else:
            assert largest(rep) == 0 and rep["weights"]["exact"] is True


def test_a_module_state_dict_compares_as_the_module(tmp_path):
    con, m = trained("gd-baseconv", "polyverify", steps=0)
    torch.save(m.state_dict(), tmp_path / "sd.pt")
    rc, rep = compare(tmp_path, tmp_path / "sd.pt", "torch", "gd-baseconv", "--weights")
    assert rc == 0 and largest(rep) == 0 and rep["weights"]["exact"] is True
    con, m = trained("gd-baseconv", "polyverify", steps=3)  # unshared, trained: its body copies differ
    torch.save(m.state_dict(), tmp_path / "sd.pt")
    rc, rep2 = compare(tmp_path, tmp_path / "sd.pt", "torch", "gd-baseconv", out="o2")
    assert rc == 0 and largest(rep2) > 0
    E.export(tmp_path / "m.safetensors", m, "polyverify")  # the same module as a weight file: the same report
    rc, rep3 = compare(tmp_path, tmp_path / "m.safetensors", "polyverify", "gd-baseconv", out="o3")
    assert rc == 0 and rep3["functional"]["predictions"] == rep2["functional"]["predictions"]


# ------------------------------------------------------------------ files as the peers' code saves them

def test_icl_gd_create_weights_is_s004_gd_exactly(tmp_path):
    """von Oswald et al.'s ``create_weights`` (lr / c_size = eta = 1/8), haiku's ``.npz``."""
    np.savez(tmp_path / "gd.npz", **icl_gd_create_weights(2, 4, 0.5))
    rc, rep = compare(tmp_path, tmp_path / "gd.npz", "icl-gd", "s004-gd", "--config", "num_heads=1",
                      "--config", "num_layers=2", "--weights")
    assert rc == 0 and largest(rep) == 0 and rep["weights"]["exact"] is True and rep["k"] == 2
    np.savez(tmp_path / "gd.npz", **icl_gd_create_weights(2, 4, 0.75))  # another step size
    rc, rep = compare(tmp_path, tmp_path / "gd.npz", "icl-gd", "s004-gd", "--config", "num_heads=1",
                      "--config", "num_layers=2", out="o2")
    assert rc == 0 and largest(rep) > 0


def test_a_precision_ls_training_checkpoint_compares(tmp_path):
    """precision-ls ``src/train.py``'s ``state.pt`` (model, AdamW state, step) of a model whose blocks
    are gd-baseconv's (the exporter's tensors as the model's state_dict)."""
    con = entries()["gd-baseconv"].build(n=4, d=2)
    sd = {k: torch.from_numpy(v) for k, v in E.plan(con, "precision-ls", k=2).tensors.items()}
    torch.save(train_state(sd, 300), tmp_path / "state.pt")
    rc, rep = compare(tmp_path, tmp_path / "state.pt", "precision-ls", "gd-baseconv", "--config", "causal=false")
    assert rc == 0 and largest(rep) == 0


def _zoology_layers(con, rng):
    """zoology BaseConv mixers on gd-baseconv-causal's state (``zoology_mixer``: u -> u * h, causal), one per
    layer of the construction at k=1, as a zoology LanguageModel's state_dict holds them."""
    T, C = con.layout.shape
    sd = {}
    for i in range(con.depth(1)):
        h = rng.integers(-2, 3, size=(T, C)) / 4
        sd.update(zoology_mixer(h, prefix=f"backbone.layers.{i}.sequence_mixer."))
    return sd


def test_zoology_files_compare_against_a_construction_of_their_state(tmp_path):
    con = entries()["gd-baseconv-causal"].build(n=4, d=2)
    sd = _zoology_layers(con, np.random.default_rng(0))
    torch.save({k: torch.from_numpy(v) for k, v in sd.items()}, tmp_path / "model.pt")  # torch.save(state_dict)
    rc, rep = compare(tmp_path, tmp_path / "model.pt", "zoology", "gd-baseconv-causal", "--config", "tokens=5")
    assert rc == 0 and rep["k"] == 1 and largest(rep) > 0
    # the same layers written by the exporter: the same comparison
    layers = FORMATS["zoology"].read(tmp_path / "model.pt", {"tokens": "5"}).layers
    assert all(isinstance(L, BaseConv) and L.causal and L.residual for L in layers)
    E.export(tmp_path / "z.safetensors", None, "zoology", sections={"prologue": layers})
    rc, rep2 = compare(tmp_path, tmp_path / "z.safetensors", "zoology", "gd-baseconv-causal", out="o2")
    assert rc == 0 and rep2["functional"]["predictions"] == rep["functional"]["predictions"]


# ------------------------------------------------------------------ refused before the work

def test_bad_input_is_one_line_before_any_work(tmp_path, capsys):
    con, m = trained("gd-baseconv", "polyverify", steps=0)
    torch.save(m, tmp_path / "module.pt")  # a pickled module: never unpickled
    torch.save(m.state_dict(), tmp_path / "sd.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    np.savez(tmp_path / "gd.npz", **icl_gd_create_weights(2, 4, 0.5))
    E.export(tmp_path / "bc.pt", m, "precision-ls")
    cases = [
        (["--from", "onnx"], "invalid choice: 'onnx'"),
        (["--from", "zoology", "--learned", str(tmp_path / "missing.pt")], "file not found"),
        (["--from", "precision-ls", "--learned", str(tmp_path / "junk.pt")], "not a readable pt file"),
        (["--from", "torch", "--learned", str(tmp_path / "module.pt")], "module.state_dict()"),
        (["--from", "icl-gd", "--learned", str(tmp_path / "bc.pt")], "not part of the model the importer reads"),
        (["--from", "icl-gd", "--learned", str(tmp_path / "gd.npz")], "--config num_heads"),
        (["--from", "polyverify", "--learned", str(tmp_path / "sd.pt"), "--config", "causal=true"],
         "carries its own settings"),
        (["--from", "precision-ls", "--learned", str(tmp_path / "bc.pt"), "--config", "nope=1"], "nope"),
        (["--from", "torch", "--learned", str(tmp_path / "sd.pt"), "--construction", "gd-baseconv-causal"],
         "has shape"),
        (["--from", "precision-ls", "--learned", str(tmp_path / "bc.pt"), "--construction", "gd-baseconv-causal"],
         "the precision-ls file's state is 5 x 12; gd-baseconv-causal acts on 5 x 20"),
        (["--from", "torch", "--learned", str(tmp_path / "sd.pt"), "--n", None], "give --n and --d"),
    ]
    for extra, said in cases:
        argv = {"--learned": str(tmp_path / "sd.pt"), "--from": "torch", "--construction": "gd-baseconv",
                "--n": "4", "--d": "2", "--out": str(tmp_path / "out")}
        for i in range(0, len(extra) - 1, 2):
            argv[extra[i]] = extra[i + 1]
        flat = [x for k, v in argv.items() if v is not None for x in (k, v)]
        try:
            rc = main(flat + SMALL)
        except SystemExit as e:  # argparse's own refusals (an unknown --from)
            rc = e.code
        err = capsys.readouterr().err
        assert rc == 2 and err.count("\n") == 1 and said in err, (extra, err)
        assert not (tmp_path / "out").exists()



def test_from_formats_are_the_registrys_and_a_state_dict():
    """``--from`` offers every format of the one registry (``verify.importers.REGISTRY``), this toolkit's own
    first, then a module's state_dict: no second list of the formats to keep in step."""
    from verify import importers
    from verify.comparison import models

    assert models.FROM_FORMATS == (*importers.REGISTRY, "torch")
    assert models.PEER_FORMATS == tuple(importers.REGISTRY)[1:] and "polyverify" not in models.PEER_FORMATS
