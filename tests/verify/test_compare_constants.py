"""``python -m verify.compare --from precision-ls`` of a file with constant channels (issue 44 item 4, issue 41
item 4): a precision-ls export of a stack whose biases differ between tokens has extra indicator channels
(``verify.importers.writing.constant_channels``); compare reads it against the construction written with the
same constant channels (``verify.comparison.models.WithConstants``): the file's description names them, and a
researcher's checkpoint as precision-ls's training loop saves it (no description) is read with the
construction's own, as many as its extra channels.

* the export untouched: zero difference, ``--weights`` exact, the channels reported with where they came from;
* trained a few AdamW steps by a loop written from precision-ls's code (``tests/verify/trained_files.py``'s
  ``notebook_forward``) and saved as their ``src/train.py`` saves it: compared, nonzero, ``--weights`` FAILED with
  the nearest construction (written with the same channels);
* a file whose last block doubles the indicator: the difference is in the constant channel's region;
* a description whose constant channels are not the construction's, or whose layout is another state:
  refused in one line, exit 2, no report.
"""
from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch", reason="precision-ls files are torch checkpoints")

from constructions.catalogue import entries  # noqa: E402
from verify import export as E  # noqa: E402
from verify.compare import main  # noqa: E402

from tests.verify.test_import_checkpoints import train_state  # noqa: E402
from tests.verify.trained_files import notebook_forward  # noqa: E402

SMALL = ["--problems", "4", "--iters", "4", "--iter-sigmas", "1", "--sigmas", "1", "--kappas", "5", "--scales", "1",
         "--skip", "polynomial,invariants"]
NAME = "gd-baseconv-causal"


def _export(tmp_path, k=2):
    con = entries()[NAME].build(n=4, d=2)
    path = tmp_path / "bcc.pt"
    ex = E.export(path, con, "precision-ls", k=k)
    T, C = con.layout.shape
    assert ex.constants == {C: [0] * (T - 1) + [1]}  # the gd architectures' biases differ on the query token
    return con, path, ex


def _compare(tmp_path, path, *extra, out="out"):
    o = tmp_path / out
    rc = main(["--learned", str(path), "--from", "precision-ls", "--construction", NAME, "--n", "4", "--d", "2",
               "--out", str(o), *SMALL, *extra])
    return rc, (json.loads((o / "report.json").read_text()) if rc == 0 else None)


def _largest(rep) -> float:
    return max(p["max_abs"] for p in rep["functional"]["predictions"])


def _block(i, name):
    return f"_backbone.transformer.h.{i}.seq_mixer.base_conv.{name}"


def test_the_export_compares_exactly_against_the_construction_with_its_constant_channels(tmp_path, capsys):
    con, path, ex = _export(tmp_path)
    T, C = con.layout.shape
    capsys.readouterr()
    rc, rep = _compare(tmp_path, path, "--weights")
    line = (f"State: the construction's channels, then 1 constant channel (channel {C}: [0, 0, 0, 0, 1] on the "
            f"tokens) from the file's description")
    assert line in capsys.readouterr().out and line in (tmp_path / "out" / "report.md").read_text()
    assert rc == 0 and rep["k"] == 2 and _largest(rep) == 0 and rep["weights"]["exact"] is True, rep.get("weights")
    assert rep["learned_from"]["constant_channels"] == {
        "channels": {str(C): ["0"] * (T - 1) + ["1"]}, "from": "the file's description"}
    regions = rep["functional"]["per_layer"][0]["layers"][0]["regions"]
    assert regions[f"constant channel {C}"] == 0.0 and "(unassigned)" not in regions


def _trained(tmp_path, ex, steps, seed=0):
    """The export's model trained ``steps`` AdamW steps (lr 1e-3) on its blocks by precision-ls's forward (written
    from their code: ``notebook_forward``, causal, no residual), on inputs that hold the indicator as the model's
    input does; saved as precision-ls's ``src/train.py`` saves ``state.pt`` (no config: no description)."""
    ck = torch.load(str(tmp_path / "bcc.pt"), weights_only=True)
    sd = {n: v.clone().double() for n, v in ck["model_state_dict"].items()}
    assert not ex.config["use_resid"] and ex.config["causal"]
    params = {n: torch.nn.Parameter(v) for n, v in sd.items() if ".seq_mixer." in n}
    g = torch.Generator().manual_seed(seed)
    C = min(ex.constants)
    u = torch.randn(16, *(len(ex.constants[C]), C), generator=g, dtype=torch.float64)
    u = torch.cat([u, torch.tensor(ex.constants[C], dtype=torch.float64).expand(16, -1)[..., None]], dim=-1)
    opt = torch.optim.AdamW(params.values(), lr=1e-3)
    for _ in range(steps):
        opt.zero_grad()
        y = notebook_forward({**sd, **params}, u, causal=True)
        ((y[:, -1, :C] - u[:, -1, :C].sum(-1, keepdim=True)) ** 2).mean().backward()
        opt.step()
    out = {n: (params[n] if n in params else v).detach().float() for n, v in sd.items()}
    path = tmp_path / f"state{steps}.pt"
    torch.save(train_state(out, steps), str(path))
    return path


def test_a_checkpoint_trained_by_precision_ls_s_loop_is_compared_with_the_construction_s_own_channels(tmp_path):
    con, path, ex = _export(tmp_path)
    T, C = con.layout.shape
    # untouched, saved as their training loop saves it: no description, the construction's own channel, exact
    rc, rep = _compare(tmp_path, _trained(tmp_path, ex, 0), "--config", "causal=true", "--weights", out="o0")
    assert rc == 0 and _largest(rep) == 0 and rep["weights"]["exact"] is True
    got = rep["learned_from"]["constant_channels"]
    assert got["channels"] == {str(C): ["0"] * (T - 1) + ["1"]} and "the file has no description" in got["from"]
    rc, rep = _compare(tmp_path, _trained(tmp_path, ex, 3), "--config", "causal=true", "--weights",
                       "--poly-timeout", "5", out="o3")
    assert rc == 0 and _largest(rep) > 0 and rep["weights"]["exact"] is False
    assert rep["weights"]["refutation"] is not None  # an exact counterexample at an integer point
    near = rep["nearest"]
    assert "skipped" not in near or not near["skipped"], near
    assert any(f"nearest {NAME}" in line for line in near["text"]), near["text"]


def test_a_trained_module_s_export_with_finer_classes_of_tokens_is_compared(tmp_path):
    """A ``load_module`` module trained 3 Adam steps: its per-token biases drift apart, so its export has one
    indicator channel per token but the base; the construction is written with the same (finer) classes, which
    its biases allow (the rows of a class that is the base's get zero weights)."""
    from tests.verify.trained_files import trained_module

    con = entries()[NAME].build(n=4, d=2)
    T, C = con.layout.shape
    for steps in (0, 3):
        path = tmp_path / f"m{steps}.pt"
        ex = E.export(path, trained_module(con, 2, "precision-ls", steps=steps, seed=1), "precision-ls")
        rc, rep = _compare(tmp_path, path, "--weights", "--poly-timeout", "5", out=f"o{steps}")
        assert rc == 0 and rep["learned_from"]["constant_channels"]["channels"] == {
            str(j): [str(x) for x in v] for j, v in ex.constants.items()}
        if steps:
            assert len(ex.constants) == T - 1 and _largest(rep) > 0 and rep["weights"]["exact"] is False
        else:
            assert len(ex.constants) == 1 and _largest(rep) == 0 and rep["weights"]["exact"] is True


def test_a_file_that_changes_the_indicator_differs_in_the_constant_channel(tmp_path):
    """The last block gives the indicator back doubled: the predictions are the construction's (the read-out
    reads the construction's channels), the state after the last layer differs in the constant channel only."""
    con, path, ex = _export(tmp_path)
    C = con.layout.shape[1]
    ck = torch.load(str(path), weights_only=True)
    ck["model_state_dict"][_block(ex.config["n_layer"] - 1, "out_proj.weight")][C, C] = 2.0
    torch.save(ck, str(tmp_path / "t.pt"))
    rc, rep = _compare(tmp_path, tmp_path / "t.pt", "--weights")
    assert rc == 0 and rep["weights"]["exact"] is False, rep["weights"]
    last = rep["functional"]["per_layer"][0]["layers"][-1]
    assert last["worst_region"] == f"constant channel {C}" and last["max_abs"] == 1.0, last
    assert all(v == 0 for r, v in last["regions"].items() if r != f"constant channel {C}"), last


@pytest.mark.parametrize("change,words", [
    (lambda lay, T, C: lay.update(constants={str(C): [0] * (T - 2) + [1, 0]}),
     "gd-baseconv-causal cannot be written with these constant channels: precision-ls: the bias rows differ "
     "between tokens 0 and 4, which the given constant channels put in one class"),
    (lambda lay, T, C: lay.update(constants={str(C): [0] * (T - 1) + [2]}),
     "are not indicators of classes of tokens"),
    (lambda lay, T, C: lay.update(columns=[1, 0] + list(range(2, C)) + [None]),
     "its description's layout is not gd-baseconv-causal's state followed by constant channels"),
    (lambda lay, T, C: lay.update(constants={str(C): [0] * (T - 1) + [0.5]}),
     "its description's layout: constants: file channel 20: 0.5 is not an exact value"),
])
def test_a_description_that_is_not_the_construction_s_is_refused_in_one_line(tmp_path, capsys, change, words):
    con, path, _ = _export(tmp_path)
    T, C = con.layout.shape
    ck = torch.load(str(path), weights_only=True)
    change(ck["config"]["polyverify"]["layout"], T, C)
    torch.save(ck, str(tmp_path / "t.pt"))
    capsys.readouterr()
    rc, rep = _compare(tmp_path, tmp_path / "t.pt")
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and words in err, err
    assert not (tmp_path / "out").exists()


def test_a_state_neither_the_construction_s_nor_with_its_channels_is_refused_naming_both(tmp_path, capsys):
    """gd-baseconv's export (no constant channels: its biases are one per channel) against gd-baseconv-causal."""
    con = entries()["gd-baseconv"].build(n=4, d=2)
    E.export(tmp_path / "bc.pt", con, "precision-ls")
    capsys.readouterr()
    rc, _ = _compare(tmp_path, tmp_path / "bc.pt")
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1, err
    assert "state is 5 x 12; gd-baseconv-causal acts on 5 x 20 (5 x 21 with the constant channels its precision-ls " \
           "export writes)" in err, err
    assert not (tmp_path / "out").exists()
