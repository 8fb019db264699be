"""Per-token bias matrices as weights from extra constant channels (issue 44 item 4;
``verify.importers.writing.constant_channels``, precision-ls's export).

* the rewrite on random BaseConv layers (every convention, with and without the residual, per-token
  ``b_in`` / ``b_gate`` / ``b_out`` and a per-token ``b_conv`` that the filter or a constant gate takes):
  on the state extended by the constant channels it is the same map exactly, and the constant channels
  come out as they went in;
* a ``b_conv`` no rewrite makes a weight is refused in one line, before any work;
* the gd architectures that now fit precision-ls: their loader (written from their code) loads the export
  strictly and computes the construction on the state with the constant channel appended;
  ``import FILE --from precision-ls`` alone PROVED (the
  file's description gives the layout's ``constants``), and FAILED where the file changes an indicator
  channel, where a bias difference read from it is changed, and where the description puts the indicator
  on another token;
* the layout's ``"constants"`` checked (``mapping.parse``): a mapped channel, a float, a wrong length.

(precision-ls's own forward on these exports: ``tests/verify/test_export.py``, the round trips there.)
"""
from __future__ import annotations

import io
import json
from fractions import Fraction

import numpy as np
import pytest

from constructions.catalogue import gd_architectures
from constructions.layers import BaseConv
from verify import export as E
from verify.construct import main
from verify.importers import mapping
from verify.importers.common import ImportRefused
from verify.importers.convs import filter_row
from verify.importers.writing import ExportError, constant_channels

NEW = ("baseconv-causal", "compiled-baseconv", "compiled-baseconv-causal")


def _q(rng, *shape, lo=-8, hi=9):
    a = np.empty(shape, dtype=object)
    for idx in np.ndindex(*shape):
        a[idx] = Fraction(int(rng.integers(lo, hi)), 4)
    return a


def _per_token(rng, T, C, classes):
    """A bias matrix whose rows are the same within each class of tokens (``classes[t]``: token t's class)."""
    rows = {k: _q(rng, C) for k in set(classes)}
    return np.array([rows[classes[t]] for t in range(T)], dtype=object)


def _layer(rng, T, C, conv, resid, classes):
    """A BaseConv with per-token biases: channel 0's b_conv per token under an identity-times-alpha filter,
    channel 1's under a zero filter and a constant gate (W_gate's column 0), causal: channel 2's under a random
    filter with a nonzero lag-0 tap (invertible); the others' b_conv one per channel."""
    h = _q(rng, T, C)
    lag0 = filter_row(0, T, same=conv == "same")
    h[:, 0] = 0
    h[lag0, 0] = Fraction(-3, 2)
    h[:, 1] = 0  # no input gives channel 1's b_conv: it goes to b_out through the constant gate
    if conv == "causal":
        h[0, 2] = Fraction(5, 4)
    W_gate = _q(rng, C, C)
    W_gate[:, 1] = 0
    b_conv = np.array([_q(rng, C)] * T, dtype=object)
    varying = _per_token(rng, T, C, classes)
    b_conv[:, 0], b_conv[:, 1] = varying[:, 0], varying[:, 1]
    if conv == "causal":
        b_conv[:, 2] = varying[:, 2]
    return BaseConv(_q(rng, C, C), _per_token(rng, T, C, classes), h, b_conv, W_gate, _per_token(rng, T, C, classes),
                    _q(rng, C, C), _per_token(rng, T, C, classes), causal=conv == "causal", residual=resid,
                    same=conv == "same")


@pytest.mark.parametrize("conv", ["causal", "circular", "same"])
@pytest.mark.parametrize("resid", [False, True])
def test_the_rewrite_is_the_same_map_exactly_and_carries_the_constant_channels(conv, resid):
    rng = np.random.default_rng(11)
    T, C = 6, 4
    classes = [0, 0, 1, 0, 2, 1]  # three classes: the largest (tokens 0, 1, 3) is the base
    layers = [_layer(rng, T, C, conv, resid, classes) for _ in range(2)]
    layers.append(layers[0])  # a repeated layer object stays one object
    out, constants, moved = constant_channels(layers, "precision-ls", "its bias")
    if conv != "causal":
        assert constants == {C: [0, 0, 1, 0, 0, 1], C + 1: [0, 0, 0, 0, 1, 0]}
        assert {(c, to) for _, c, to in moved} == {(0, "b_in"), (1, "b_out")}
    else:  # channel 2's b_conv through its random causal filter: a per-token input w, which splits the classes
        assert {(c, to) for _, c, to in moved} == {(0, "b_in"), (1, "b_out"), (2, "b_in")}
    # indicators of disjoint classes of tokens, one channel each, after the construction's channels
    assert sorted(constants) == list(range(C, C + len(constants))) and 0 < len(constants) < T
    assert all(set(v) == {0, 1} for v in constants.values()) and max(map(sum, zip(*constants.values()))) == 1
    assert out[2] is out[0] and len(out) == 3
    for L in out:  # every bias one per channel now
        for b in ("b_in", "b_conv", "b_gate", "b_out"):
            B = getattr(L, b)
            assert np.asarray(B == B[0:1], dtype=bool).all(), b
    K = np.array([constants[j] for j in sorted(constants)], dtype=object).T
    for trial in range(3):
        u = _q(rng, T, C, lo=-20, hi=21)
        a, b = u, np.concatenate([u, K], axis=1)
        for L, Lx in zip(layers, out):
            a, b = L.forward(a), Lx.forward(b)
            assert (b[:, :C] == a).all() and (b[:, C:] == K).all()


@pytest.mark.parametrize("conv", ["causal", "circular", "same"])
@pytest.mark.parametrize("resid", [False, True])
def test_precision_ls_forward_on_the_written_layers_is_the_original_stack(tmp_path, conv, resid):
    """The random layers above written to a precision-ls file: the peer's forward (written from their code) on the
    state with the constant channels appended is the original stack on its channels, the constants given back."""
    pytest.importorskip("torch")
    import torch

    from tests.adversarial.test_import_conventions import precision_ls_forward

    rng = np.random.default_rng(5)
    T, C = 6, 4
    layers = [_layer(rng, T, C, conv, resid, [0, 0, 1, 0, 2, 1]) for _ in range(2)]
    if conv == "circular":  # the long filter has no bias: the per-channel part of b_conv 0
        layers = [L.map(lambda a: a) for L in layers]
        for L in layers:
            L.b_conv[:] = L.b_conv - L.b_conv[0:1]
    path = tmp_path / "w.pt"
    ex = E.export(path, None, "precision-ls", sections={"epilogue": layers})
    assert ex.constants  # (a deconvolved b_conv may be no float: the file then holds it rounded once, float64)
    ck = torch.load(str(path), weights_only=True)
    sd = {n: t.numpy().astype(np.float64) for n, t in ck["model_state_dict"].items()}
    K = np.array([ex.constants[j] for j in sorted(ex.constants)], dtype=float).T
    u0 = rng.integers(-4, 5, size=(T, C)) / 4
    want = u0.astype(object)
    for L in layers:
        want = L.forward(want)
    got = np.concatenate([u0, K], axis=1)
    for i in range(len(layers)):
        got = precision_ls_forward(sd, got, _block(i, ""), conv == "causal")
    want = np.array(want, dtype=float)
    assert np.allclose(got[:, :C], want, rtol=1e-9, atol=1e-9 * max(1.0, float(np.abs(want).max())))
    assert np.allclose(got[:, C:], K, rtol=0, atol=1e-9)


@pytest.mark.parametrize("conv", ["causal", "circular", "same"])
def test_given_finer_classes_the_rewrite_is_the_same_map_and_coarser_ones_are_refused(conv):
    """``classes`` (a file's indicator channels, ``indicator_classes``): finer than the stack's own, the rewrite
    is still exact (a class whose rows are the base's gets zero weights); one that joins tokens whose bias rows
    differ is refused in one line."""
    from verify.importers.writing import indicator_classes

    rng = np.random.default_rng(12)
    T, C = 6, 4
    layers = [_layer(rng, T, C, conv, True, [0, 0, 1, 0, 2, 1]) for _ in range(2)]
    finer = {C + p: [int(t == p + 1) for t in range(T)] for p in range(T - 1)}  # every token but 0 its own
    classes = indicator_classes(finer)
    assert classes == ([0], [[1], [2], [3], [4], [5]])
    out, constants, _ = constant_channels(layers, "precision-ls", "its bias", classes)
    assert constants == finer
    K = np.array([constants[j] for j in sorted(constants)], dtype=object).T
    u = _q(rng, T, C, lo=-20, hi=21)
    a, b = u, np.concatenate([u, K], axis=1)
    for L, Lx in zip(layers, out):
        a, b = L.forward(a), Lx.forward(b)
        assert (b[:, :C] == a).all() and (b[:, C:] == K).all()
    coarse = indicator_classes({C: [0, 1, 0, 1, 0, 0]})  # tokens 0, 2, 4, 5 and 1, 3: token 2's rows differ from 0's
    with pytest.raises(ExportError) as e:
        constant_channels(layers, "precision-ls", "its bias", coarse)
    msg = str(e.value)
    assert "\n" not in msg and "the bias rows differ between tokens 0 and 2, which the given constant channels put " \
        "in one class" in msg, msg
    for bad in ({C: [0, 0, 2, 0, 0, 0]}, {C: [1] * T}, {C: [0, 1, 0, 0, 0, 0], C + 1: [0, 1, 1, 0, 0, 0]},
                {C: [0] * T}):  # not 0 / 1; no base; a token in two; a channel with no token
        assert indicator_classes(bad) is None, bad


def test_per_channel_biases_are_left_as_they_are():
    rng = np.random.default_rng(2)
    L = _layer(rng, 5, 3, "causal", False, [0] * 5)
    out, constants, moved = constant_channels([L], "precision-ls", "its bias")
    assert out == [L] and constants == {} and moved == []


def test_a_conv_bias_no_rewrite_makes_a_weight_is_refused_in_one_line():
    """Causal, the filter's first tap at lag 2: no input reaches token 1's output, whose b_conv differs; the gate
    reads the state."""
    rng = np.random.default_rng(3)
    T, C = 5, 3
    L = _layer(rng, T, C, "causal", False, [0] * T)
    h = L.h.copy()
    h[:, 0] = 0
    h[2, 0] = 1
    b_conv = L.b_conv.copy()
    b_conv[1, 0] = b_conv[1, 0] + 1
    W_gate = L.W_gate.copy()
    W_gate[0, 0] = 1
    bad = BaseConv(L.W_in, L.b_in, h, b_conv, W_gate, L.b_gate, L.W_out, L.b_out, causal=True)
    with pytest.raises(ExportError) as e:
        E.check(None, "precision-ls", sections={"epilogue": [bad]})
    msg = str(e.value)
    assert "\n" not in msg and "layer 0 b_conv differs between tokens 0 and 1 in channel 0" in msg, msg
    assert "no input to its causal filter" in msg


# ------------------------------------------------------------------ the gd architectures, self-describing


def _export(tmp_path, arch, suffix=".pt", k=2):
    con = gd_architectures()[arch].build(4, 2)
    path = tmp_path / f"{arch}{suffix}"
    ex = E.export(path, con, "precision-ls", k=k)
    return con, path, ex


def _import(path):
    out = io.StringIO()
    rc = main(["import", str(path), "--from", "precision-ls", "--no-search"], out=out)
    return rc, out.getvalue()


@pytest.mark.parametrize("arch", NEW)
def test_import_from_precision_ls_alone_proves_the_export(tmp_path, arch):
    con, path, ex = _export(tmp_path, arch)
    T, C = con.layout.shape
    assert ex.constants == {C: [0] * (T - 1) + [1]}  # the gd architectures' biases differ on the query token
    desc = ex.config["polyverify"]
    assert desc["layout"]["columns"] == list(range(C)) + [None] and desc["layout"]["constants"] == {
        str(C): [0] * (T - 1) + [1]}
    assert ex.config["n_embd"] == C + 1 and any("constant channel" in n for n in ex.notes)
    rc, text = _import(path)
    assert rc == 0, text
    assert f"constant channels (set on the input, checked unchanged after every section): file channel {C}: 1 on " \
           f"token {T - 1}, 0 elsewhere" in text
    assert f"verdict: PROVED: the file computes gd-{arch} at every depth (k = 2 in the file)" in text


@pytest.mark.parametrize("arch", NEW)
def test_their_loader_loads_it_strictly_and_computes_the_construction_on_the_wider_state(tmp_path, arch):
    """precision-ls's get_model_from_run (written from their code, test_import_precision_ls_loader) loads the export
    strictly; TransformerModel.forward on the construction's state with the constant channel appended is the
    construction's layers on its channels and gives the constant channel back."""
    pytest.importorskip("torch")
    from tests.verify.test_import_precision_ls_loader import get_model_from_run, model_forward

    con, path, ex = _export(tmp_path, arch)
    sd, conf = get_model_from_run(path)
    T, C = con.layout.shape
    assert conf["n_dims"] == conf["n_embd"] == C + 1
    S = np.random.default_rng(1).standard_normal((T, C))
    want = S
    for L in con.layers(2):
        want = L.map(lambda a: np.asarray(a, dtype=float)).forward(want)
    K = np.array(ex.constants[C], dtype=float)[:, None]
    got = model_forward(sd, conf, np.concatenate([S, K], axis=1))
    assert np.allclose(got[:, :C], want, rtol=1e-9, atol=1e-9), np.abs(got[:, :C] - want).max()
    assert np.allclose(got[:, C:], K, rtol=0, atol=1e-12)


def test_a_safetensors_export_is_self_describing_too(tmp_path):
    _, path, _ = _export(tmp_path, "baseconv-causal", ".safetensors")
    rc, text = _import(path)
    assert rc == 0 and "verdict: PROVED" in text, text


def _tampered(path, out, change):
    import torch

    ck = torch.load(str(path), weights_only=True)
    change(ck)
    torch.save(ck, str(out))
    return out


def _block(i, name):
    return f"_backbone.transformer.h.{i}.seq_mixer.base_conv.{name}"


@pytest.mark.parametrize("arch", NEW)
def test_a_file_that_changes_an_indicator_channel_is_failed(tmp_path, arch):
    """The last block gives the indicator back doubled (out_proj's weight from its inner channel): every
    original channel is still the construction's, so only the proof's reading of the constant channel fails it."""
    pytest.importorskip("torch")
    con, path, ex = _export(tmp_path, arch)
    C = con.layout.shape[1]
    last = ex.config["n_layer"] - 1

    def change(ck):
        ck["model_state_dict"][_block(last, "out_proj.weight")][C, C] = 2.0

    rc, text = _import(_tampered(path, tmp_path / "t.pt", change))
    assert rc == 1, text
    assert "a constant channel of the layout" in text and "verdict: FAILED" in text
    # the nearest construction is the specification written with the same constant channel (verify/nearest.py):
    # its step size the file's, the entry that differs the indicator's
    assert f"to the nearest gd-{arch} (eta = 1/16)" in text and f"W_out[{C},{C}]" in text, text


def _forward(sd, cfg, u):
    from tests.adversarial.test_import_conventions import precision_ls_forward  # written from their code

    for i in range(cfg["n_layer"]):
        u = precision_ls_forward(sd, u, _block(i, ""), cfg["causal"])
    return u


@pytest.mark.parametrize("arch", NEW)
def test_a_changed_bias_difference_read_from_the_indicator_is_failed(tmp_path, arch):
    """The first weight read from the indicator channel whose change alters what precision-ls's forward computes
    (some are multiplied by a zero on the query token: changing those changes nothing, and is rightly PROVED)."""
    torch = pytest.importorskip("torch")
    con, path, ex = _export(tmp_path, arch)
    T, C = con.layout.shape
    ck = torch.load(str(path), weights_only=True)
    sd = {n: t.numpy().astype(np.float64) for n, t in ck["model_state_dict"].items()}
    u = np.concatenate([np.random.default_rng(0).integers(-3, 4, size=(T, C)) / 4, np.eye(T)[:, -1:]], axis=1)
    ref = _forward(sd, ex.config, u)

    def matters(i, mod, o):
        W = sd[_block(i, f"{mod}.weight")]
        W[o, C] += 1
        differs = not np.allclose(_forward(sd, ex.config, u), ref, rtol=0, atol=1e-9)
        W[o, C] -= 1
        return differs

    found = next(((i, mod, int(o)) for i in range(ex.config["n_layer"]) for mod in ("in_proj", "projection", "out_proj")
                  for o in np.flatnonzero(sd[_block(i, f"{mod}.weight")][:C, C]) if matters(i, mod, int(o))), None)
    assert found is not None, "no weight read from the indicator channel matters"
    i, mod, o = found

    def change(ck):
        ck["model_state_dict"][_block(i, f"{mod}.weight")][o, C] += 1

    rc, text = _import(_tampered(path, tmp_path / "t.pt", change))
    assert rc == 1 and "verdict: FAILED" in text, (found, text)


def test_a_description_with_the_indicator_on_another_token_is_failed(tmp_path):
    pytest.importorskip("torch")
    con, path, ex = _export(tmp_path, "baseconv-causal")
    T, C = con.layout.shape

    def change(ck):
        ck["config"]["polyverify"]["layout"]["constants"] = {str(C): [0] * (T - 2) + [1, 0]}

    rc, text = _import(_tampered(path, tmp_path / "t.pt", change))
    assert rc == 1 and "verdict: FAILED" in text, text


def test_without_the_constant_channels_the_file_does_not_fit_the_construction(tmp_path):
    """The layout without 'constants' (the extra channel a scratch channel, 0): the file's state differs."""
    pytest.importorskip("torch")
    con, path, _ = _export(tmp_path, "baseconv-causal")
    T, C = con.layout.shape

    def change(ck):
        del ck["config"]["polyverify"]["layout"]["constants"]

    rc, text = _import(_tampered(path, tmp_path / "t.pt", change))
    assert rc == 1 and "verdict: FAILED" in text, text


# ------------------------------------------------------------------ the layout's "constants"


def _parse(d, shape=(5, 21)):
    con = gd_architectures()["baseconv-causal"].build(4, 2)
    return mapping.parse({"format": mapping.FORMAT, **d}, con, shape)


def test_the_layout_constants_are_read_exactly():
    cols = list(range(20)) + [None]
    _, got, _, _ = _parse({"columns": cols, "constants": {"20": [0, "1/2", -3, 0, 1]}})
    assert got == cols and got.constants == {20: [0, Fraction(1, 2), -3, 0, 1]}
    assert mapping.describe_constants(got.constants) == "file channel 20: [0, 1/2, -3, 0, 1] on the file's tokens"
    _, got, _, _ = _parse({"constants": {"20": [0, 0, 0, 0, 1]}})  # no columns: the identity, then the constant
    assert got == cols and got.constants == {20: [0, 0, 0, 0, 1]}
    assert mapping.describe_constants(got.constants) == "file channel 20: 1 on token 4, 0 elsewhere"


@pytest.mark.parametrize("constants,words", [
    ({"3": [0, 0, 0, 0, 1]}, "mapped to specification column 3"),
    ({"20": [0, 0, 0, 1]}, "one value per file token (5)"),
    ({"20": [0, 0, 0, 0, 0.5]}, "0.5 is not an exact value"),
    ({"20": [0, 0, 0, 0, True]}, "True is not an exact value"),
    ({"21": [0, 0, 0, 0, 1]}, "'21' is not a file channel"),
    ({"x": [0, 0, 0, 0, 1]}, "'x' is not a file channel"),
    ([20], "must map file channels"),
])
def test_bad_layout_constants_are_refused_in_one_line(constants, words):
    with pytest.raises(ImportRefused) as e:
        _parse({"columns": list(range(20)) + [None], "constants": constants})
    msg = str(e.value)
    assert "\n" not in msg and words in msg, msg


def test_an_export_without_a_description_names_the_layout_an_import_needs(tmp_path):
    rng = np.random.default_rng(4)
    L = _layer(rng, 5, 3, "causal", False, [0, 0, 0, 0, 1])
    ex = E.export(tmp_path / "w.pt", None, "precision-ls", sections={"epilogue": [L]})
    line = next(s for s in ex.summary() if "--layout" in s)
    assert json.dumps({"format": mapping.FORMAT, "constants": {"3": [0, 0, 0, 0, 1]}}) in line
    assert "polyverify" not in ex.config


def _compiled_dot(tmp_path, suffix=".pt"):
    """A circuit compiled to baseconv (a gate bias on one token) exported to precision-ls: (graph path, compiled,
    file, Exported)."""
    import circuits as Cc
    from constructions.compiler import compile_circuit

    g = tmp_path / "dot.json"
    Cc.dump(Cc.dot(3, placed=True), str(g))
    con = compile_circuit(Cc.load(g), name="dot", target="baseconv")
    path = tmp_path / f"dot{suffix}"
    return g, con, path, E.export(path, con, "precision-ls")


def _import_circuit(path, g, *extra):
    out = io.StringIO()
    rc = main(["import", str(path), "--from", "precision-ls", "--circuit", str(g), "--no-search", *map(str, extra)],
              out=out)
    return rc, out.getvalue()


@pytest.mark.parametrize("suffix", [".pt", ".safetensors"])
def test_a_compiled_circuit_with_per_token_biases_is_proved_back_with_circuit_alone(tmp_path, suffix):
    """The export records the compile (target, state) and the layout with its constant channel: import --circuit
    G.json with no --target and no --layout PROVED; the summary says so."""
    g, con, path, ex = _compiled_dot(tmp_path, suffix)
    R, C = con.layout.shape
    assert ex.constants and sorted(ex.constants) == list(range(C, C + len(ex.constants)))
    desc = ex.config["polyverify"]
    assert desc["circuit"] == {"name": "dot", "target": "baseconv", "state": [R, C]}
    assert desc["layout"]["columns"] == list(range(C)) + [None] * len(ex.constants)
    assert desc["layout"]["constants"] == {str(j): v for j, v in ex.constants.items()}
    assert any("--circuit G.json proves it" in line and "constant channels included" in line for line in ex.summary())
    assert not any("--layout" in line for line in ex.summary())
    rc, text = _import_circuit(path, g)
    assert rc == 0, text
    assert "layout: the file's description" in text and "constant channels (set on the input" in text, text
    assert "verdict: PROVED: the file computes dot" in text, text


def test_a_compiled_circuit_whose_indicator_is_changed_is_failed(tmp_path):
    """The last block gives the constant channel back doubled: only the proof's reading of it fails the file."""
    pytest.importorskip("torch")
    g, con, path, ex = _compiled_dot(tmp_path)
    C, last = con.layout.shape[1], ex.config["n_layer"] - 1
    j = min(ex.constants)

    def change(ck):
        W = ck["model_state_dict"][_block(last, "out_proj.weight")]
        assert W[j, j] == 1.0  # the indicator carried through the last block's inner channel j
        W[j, j] = 2.0

    rc, text = _import_circuit(_tampered(path, tmp_path / "t.pt", change), g)
    assert rc == 1 and "verdict: FAILED" in text and "a constant channel of the layout" in text, text
    assert C == j  # (the constant channel follows the compiled stack's channels)

    def move(ck):  # the description's indicator on another token
        cons = ck["config"]["polyverify"]["layout"]["constants"]
        cons[str(j)] = cons[str(j)][1:] + cons[str(j)][:1]

    rc, text = _import_circuit(_tampered(path, tmp_path / "m.pt", move), g)
    assert rc == 1 and "verdict: FAILED" in text, text


def test_an_explicit_layout_or_target_still_wins_and_a_state_not_the_compiles_is_refused(tmp_path, capsys):
    pytest.importorskip("torch")
    g, con, path, ex = _compiled_dot(tmp_path)
    R, C = con.layout.shape
    # --layout wins: the file's extra channel as scratch (no constants): the file's state is not the compiled one
    lay = tmp_path / "L.json"
    lay.write_text(json.dumps({"format": mapping.FORMAT, "columns": list(range(C)) + [None]}))
    rc, text = _import_circuit(path, g, "--layout", lay)
    assert rc == 1 and f"layout: --layout {lay}" in text and "verdict: FAILED" in text, text
    # --target wins: compiled to baseconv-mlp the state is not the file's recorded one: refused in one line
    capsys.readouterr()
    rc, text = _import_circuit(path, g, "--target", "baseconv-mlp")
    err = capsys.readouterr().err
    assert rc == 2 and text == "" and err.count("\n") == 1, err
    assert f"holds the circuit 'dot' compiled to baseconv on a {R} x {C} state" in err and "not the circuit" in err

    def shape(ck):  # a description whose recorded state is not the compile's
        ck["config"]["polyverify"]["circuit"]["state"] = [R + 1, C]

    rc, text = _import_circuit(_tampered(path, tmp_path / "s.pt", shape), g)
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and f"on a {R + 1} x {C} state" in err, err


def test_a_compiled_circuits_export_without_circuit_is_refused_naming_it(tmp_path, capsys):
    _, _, path, _ = _compiled_dot(tmp_path)
    rc, text = _import(path)
    err = capsys.readouterr().err
    assert rc == 2 and text == "" and err.count("\n") == 1, err
    assert "holds the circuit 'dot' compiled to baseconv" in err and "pass --circuit G.json" in err, err


def test_a_broken_circuit_description_is_refused_in_one_line(tmp_path, capsys):
    pytest.importorskip("torch")
    g, _, path, _ = _compiled_dot(tmp_path)

    def broken(ck):
        ck["config"]["polyverify"]["circuit"]["state"] = ["3", 4]

    rc, text = _import_circuit(_tampered(path, tmp_path / "b.pt", broken), g)
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "description of a compiled circuit needs" in err, err
