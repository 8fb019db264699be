"""Peers' checkpoints as their own code saves them, written here the way the peers
write them (``torch.save`` / ``np.savez`` of dicts shaped like theirs, no peer code):

* precision-ls (seed 000's code): the notebook's ``model.state_dict()`` of ``TransformerModel``
  (``_read_in``, ``_backbone.transformer.wpe``, the blocks, ``_read_out``; ``src/models/gpt2.py``),
  saved as ``model_{i}.pt`` (``src/train.py``: ``torch.save(model.state_dict(), ...)``) and as
  ``state.pt`` (``{"model_state_dict", "optimizer_state_dict", "train_step"}``);
* zoology: a ``LanguageModel``'s state_dict (``backbone.embeddings.*``, ``backbone.layers.{i}.
  {sequence_mixer, state_mixer, norm1, norm2}``, ``backbone.ln_f``, ``lm_head``; ``zoology/model.py``);
* von Oswald et al. (icl-gd): a haiku parameter file with modules beside the attention
  (``emb``, the output mapping ``linear``, LayerNorm ``scale``/``offset``; ``src/transformer.py``).

Without ``--blocks-only`` such a file is refused in one line naming every tensor outside the
blocks; with it the blocks are proved and every tensor not proved is named in the verdict line
and the JSON.  ``.pt`` files are read with ``torch.load(weights_only=True)``: a pickled object is
refused, never run."""
from __future__ import annotations

import io
import json
from fractions import Fraction

import numpy as np
import pytest

from verify.construct import main

from tests.verify.import_files import icl_gd_create_weights, precision_ls_notebook, zoology_mixer

torch = pytest.importorskip("torch", reason="precision-ls and zoology checkpoints are torch files")

D, N = 2, 4
C = 4 * D + 1
PLS = ["--from", "precision-ls", "--spec", "prefix-coupled", "--config", "causal=true"]
OUTSIDE_PLS = ["_read_in.weight", "_read_in.bias", "_backbone.transformer.wpe.weight", "_read_out.weight",
               "_read_out.bias"]


def notebook_model_state_dict(k: int = 1) -> dict:
    """``TransformerModel(n_dims=D+1, n_positions=N, n_embd=4D+1, use_resid=False, use_mlps=False,
    use_seqop_ln=False, use_final_ln=False, ...).state_dict()`` after the notebook's
    ``initialize_weights`` (``_read_in``/``_read_out`` rectangular identities, ``wpe`` zero), in
    the module registration order."""
    sd = {"_read_in.weight": torch.eye(C, D + 1), "_read_in.bias": torch.zeros(C),
          "_backbone.transformer.wpe.weight": torch.zeros(N, C)}
    sd.update(precision_ls_notebook(D, N, 0.1, k, causal=True))
    sd.update({"_read_out.weight": torch.eye(D + 1, C), "_read_out.bias": torch.zeros(D + 1)})
    return sd


def run(argv, tmp_path, capsys):
    out = io.StringIO()
    rep = tmp_path / "r.json"
    rc = main(["import", *map(str, argv), "--json", str(rep)], out=out)
    err = capsys.readouterr().err
    return rc, out.getvalue(), err, (json.loads(rep.read_text()) if rep.exists() else None)


def test_precision_ls_model_pt_is_refused_naming_every_tensor_outside_the_blocks(tmp_path, capsys):
    p = tmp_path / "model_300.pt"
    torch.save(notebook_model_state_dict(), str(p))
    rc, out, err, rep = run([p, *PLS], tmp_path, capsys)
    assert rc == 2 and rep is None and out == ""
    assert err.startswith("error: ") and err.count("\n") == 1
    for name in OUTSIDE_PLS:
        assert name in err
    assert "--blocks-only" in err and "every tensor must be part of the proof" in err


def test_precision_ls_model_pt_blocks_only_proves_the_blocks_and_names_the_rest(tmp_path, capsys):
    p = tmp_path / "model_300.pt"
    torch.save(notebook_model_state_dict(2), str(p))
    rc, out, err, rep = run([p, *PLS, "--blocks-only"], tmp_path, capsys)
    assert rc == 0, (out, err)
    verdict = next(line for line in out.splitlines() if line.startswith("verdict:"))
    assert verdict.startswith("verdict: PROVED (the blocks only)")
    for name in OUTSIDE_PLS:
        assert name in verdict
    assert sorted(rep["not_proved"]) == sorted(OUTSIDE_PLS) and sorted(rep["verdict"]["not_proved"]) == sorted(
        OUTSIDE_PLS)
    assert rep["not_proved"]["_read_in.weight"].startswith("embedding")
    assert rep["not_proved"]["_read_out.bias"].startswith("read-out")
    assert rep["k"] == 2 and rep["parameters"]["eta"]["value"] == str(Fraction(13421773, 134217728))
    assert not set(rep["tensors"]) & set(OUTSIDE_PLS)  # the blocks' tensors only were proved
    # the blocks are still checked: a wrong weight in a block is refuted, the others still named
    sd = notebook_model_state_dict(2)
    sd["_backbone.transformer.h.2.seq_mixer.base_conv.out_proj.weight"][D + 1, 3 * D + 1] = -0.25
    torch.save(sd, str(p))
    rc, out, _, rep = run([p, *PLS, "--blocks-only", "--no-search"], tmp_path, capsys)
    assert rc == 1 and sorted(rep["verdict"]["not_proved"]) == sorted(OUTSIDE_PLS)
    assert "not proved (--blocks-only): embedding" in next(x for x in out.splitlines() if x.startswith("verdict:"))


def train_state(sd: dict, step: int) -> dict:
    """precision-ls ``src/train.py``'s ``state.pt``: the model, AdamW's state after a step, the step."""
    params = [torch.nn.Parameter(v.clone().float()) for v in sd.values()]
    opt = torch.optim.AdamW(params, lr=1e-3)
    sum(p.sum() for p in params).backward()
    opt.step()
    return {"model_state_dict": sd, "optimizer_state_dict": opt.state_dict(), "train_step": step}


def test_precision_ls_state_pt_as_train_py_saves_it(tmp_path, capsys):
    sd = notebook_model_state_dict(1)
    p = tmp_path / "state.pt"
    torch.save(train_state(sd, 1000), str(p))
    rc, out, err, rep = run([p, *PLS, "--blocks-only"], tmp_path, capsys)
    assert rc == 0, (out, err)
    ts = rep["training_state"]
    assert ts["train_step"]["value"] == 1000
    # AdamW keeps step, exp_avg and exp_avg_sq for each parameter
    assert ts["optimizer_state_dict"]["tensors"] == 3 * len(sd)
    assert "training state optimizer_state_dict" in out and "not part of the model" in out
    # without --blocks-only: refused, naming the embedding and read-out
    rc, out, err, _ = run([p, *PLS], tmp_path, capsys)
    assert rc == 2 and "_read_in.weight" in err and err.count("\n") == 1


@pytest.mark.parametrize("extra, needle", [
    ({"scheduler_state_dict": {}}, "entry 'scheduler_state_dict' next to 'model_state_dict' is not read"),
    ({"train_step": "late"}, "'train_step' is a str, not an integer step"),
    ({"optimizer_state_dict": [1, 2]}, "'optimizer_state_dict' is a list, not an optimizer state_dict"),
    ({"x": Fraction(1, 2)}, "not a readable pt file"),  # a pickled object: torch.load(weights_only=True) refuses
])
def test_unreadable_checkpoint_entries_are_refused_in_one_line(tmp_path, capsys, extra, needle):
    p = tmp_path / "state.pt"
    torch.save({"model_state_dict": precision_ls_notebook(D, N, 0.1, 1), **extra}, str(p))
    rc, out, err, rep = run([p, *PLS, "--blocks-only"], tmp_path, capsys)
    assert rc == 2 and out == "" and rep is None
    assert err.count("\n") == 1 and needle in err, err


def test_a_layernorm_inside_the_blocks_is_named_not_hidden(tmp_path, capsys):
    """use_seqop_ln=True: each block normalises before its mixer; --blocks-only names each LayerNorm
    as inside its block (the proof covers the mixers composed directly)."""
    sd = notebook_model_state_dict(1)
    for i in range(3):
        sd[f"_backbone.transformer.h.{i}.ln_1.weight"] = torch.ones(C)
        sd[f"_backbone.transformer.h.{i}.ln_1.bias"] = torch.zeros(C)
    p = tmp_path / "model_1.pt"
    torch.save(sd, str(p))
    rc, out, err, rep = run([p, *PLS, "--blocks-only"], tmp_path, capsys)
    assert rc == 0, (out, err)
    assert rep["not_proved"]["_backbone.transformer.h.1.ln_1.weight"].startswith("LayerNorm inside block 1")


# ------------------------------------------------------------------ zoology

def zoology_language_model(h, *, d_model: int, vocab: int = 8, positions: int = 64) -> dict:
    """``LanguageModel(ModelConfig(sequence_mixer=BaseConv, n_layers=1, ...)).state_dict()``: embeddings,
    one TransformerBlock (sequence mixer, MLP state mixer, two LayerNorms), ln_f, the tied LM head."""
    emb = torch.randn(vocab, d_model)
    sd = {"backbone.embeddings.word_embeddings.weight": emb,
          "backbone.embeddings.position_embeddings.weight": torch.randn(positions, d_model)}
    sd.update({k: torch.from_numpy(v) for k, v in zoology_mixer(h, short=True).items()})
    sd.update({"backbone.layers.0.state_mixer.fc1.weight": torch.randn(4 * d_model, d_model),
               "backbone.layers.0.state_mixer.fc1.bias": torch.zeros(4 * d_model),
               "backbone.layers.0.state_mixer.fc2.weight": torch.randn(d_model, 4 * d_model),
               "backbone.layers.0.state_mixer.fc2.bias": torch.zeros(d_model),
               "backbone.layers.0.norm1.weight": torch.ones(d_model), "backbone.layers.0.norm1.bias": torch.zeros(d_model),
               "backbone.layers.0.norm2.weight": torch.ones(d_model), "backbone.layers.0.norm2.bias": torch.zeros(d_model),
               "backbone.ln_f.weight": torch.ones(d_model), "backbone.ln_f.bias": torch.zeros(d_model),
               "lm_head.weight": emb})
    return sd


def test_zoology_language_model_checkpoint(tmp_path, capsys):
    from constructions.catalogue import entries

    con = entries()["s003-conv"].build(N=5, d=2, seed=1)
    h = np.vectorize(float)(con.epilogue[0].h)
    p = tmp_path / "zoology.pt"
    torch.save(zoology_language_model(h, d_model=2), str(p))
    argv = [p, "--from", "zoology", "--spec", "s003-conv", "--set", "N=5", "--set", "d=2", "--config", "tokens=5"]
    rc, _, err, _ = run(argv, tmp_path, capsys)
    assert rc == 2 and "lm_head.weight" in err and "word_embeddings" in err and err.count("\n") == 1
    rc, out, err, rep = run(argv + ["--blocks-only"], tmp_path, capsys)
    assert rc == 0, (out, err)
    named = rep["verdict"]["not_proved"]
    assert "lm_head.weight" in named and "backbone.layers.0.norm1.weight" in named
    assert "backbone.layers.0.state_mixer.fc2.weight" in named and len(named) == 13
    assert rep["not_proved"]["lm_head.weight"].startswith("LM head")
    assert "backbone.layers.0.sequence_mixer.projection.weight" in rep["tensors"]


# ------------------------------------------------------------------ von Oswald et al. (icl-gd)

def test_icl_gd_parameter_file_with_extra_modules(tmp_path, capsys):
    w = icl_gd_create_weights(D, 5, 0.5)
    extra = {"Transformer_gd/emb/w": np.eye(D + 1, dtype=np.float32),
             "Transformer_gd/emb/b": np.zeros(D + 1, dtype=np.float32),
             "Transformer_gd/linear/w": np.eye(D + 1, dtype=np.float32),  # output_mapping's haiku Linear
             "Transformer_gd/norm_1/scale": np.ones(D + 1, dtype=np.float32),
             "Transformer_gd/norm_1/offset": np.zeros(D + 1, dtype=np.float32),
             "Transformer_gd/mlp/linear/w": np.zeros((D + 1, 4 * (D + 1)), dtype=np.float32)}
    p = tmp_path / "params.npz"
    np.savez(p, **w, **extra)
    argv = [p, "--from", "icl-gd", "--config", "num_heads=1", "--spec", "s004-gd", "--set", "n=5"]
    rc, _, err, _ = run(argv, tmp_path, capsys)
    assert rc == 2 and all(k in err for k in extra) and err.count("\n") == 1
    rc, out, err, rep = run(argv + ["--blocks-only"], tmp_path, capsys)
    assert rc == 0, (out, err)
    assert sorted(rep["verdict"]["not_proved"]) == sorted(extra)
    assert rep["not_proved"]["Transformer_gd/linear/w"].startswith("read-out")
    assert rep["not_proved"]["Transformer_gd/norm_1/scale"].startswith("LayerNorm")
    assert rep["not_proved"]["Transformer_gd/mlp/linear/w"].startswith("MLP")
    verdict = next(line for line in out.splitlines() if line.startswith("verdict:"))
    assert all(k in verdict for k in extra)


def test_gd_weights_names_the_import_command_for_a_peers_checkpoint(tmp_path, capsys):
    p = tmp_path / "model_1.pt"
    torch.save(notebook_model_state_dict(), str(p))
    q = tmp_path / "params.npz"
    np.savez(q, **icl_gd_create_weights(D, 5, 0.5))
    for f in (p, q):
        rc = main(["gd", "--layers", "7", "--n", "4", "--d", "2", "--weights", str(f)], out=io.StringIO())
        err = capsys.readouterr().err
        assert rc == 2 and err.count("\n") == 1
        assert f"python -m verify.construct import {f} --from precision-ls|zoology|icl-gd" in err


def test_icl_gd_attention_without_the_model_prefix_keeps_its_output_projection(tmp_path, capsys):
    """``layer_0/linear/w`` beside ``layer_0/query/w`` is the attention's W_O, not an output mapping."""
    w = {k.split("/", 1)[1]: v for k, v in icl_gd_create_weights(D, 5, 0.5).items()}  # multi_head_attention/...
    p = tmp_path / "params.npz"
    np.savez(p, **w)
    rc, out, err, rep = run([p, "--from", "icl-gd", "--config", "num_heads=1", "--spec", "s004-gd", "--set", "n=5"],
                            tmp_path, capsys)
    assert rc == 0, (out, err)
    assert rep["not_proved"] == {} and "multi_head_attention/linear/w" in rep["tensors"]
