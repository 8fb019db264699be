"""verify/export.py: constructions out to the peers' formats, read back by the importers and proved.

* which formats hold which construction is the table :data:`FITS` below (written from the layers:
  a format refuses a position-dependent bias, a convention or layer kind its peer does not have,
  in one line), checked for every construction of the catalogue;
* every construction and every format that holds it: exported, read back by the format's importer
  (``verify/importers/*.read``, the same tables read forwards) and **proved** against the
  construction by the import's prover (``mapping.Projected`` + ``search.prove_stack``), except
  where the export reports entries that are no float of the dtype written: there the proof must
  fail (the report is the truth);
* the command-line round trip (``python -m verify.construct import``) for one construction per format;
* the peers' own forwards (written from their code in ``tests/adversarial/test_import_conventions.py``)
  on the exported files compute the construction;
* the tables both ways on random layers; the CLI helpers (``--export``/``--format``).
"""
from __future__ import annotations

import io
import json
from fractions import Fraction

import numpy as np
import pytest

from constructions.base import Construction, to_float_array
from constructions.catalogue import entries
from constructions.layers import BaseConv, TokenLSA, TokenLSAHead
from polyverify.plumbing.cli import Parser, UsageError
from verify import export as E
from verify.construct import main
from verify.importers import FORMATS as IMPORTERS
from verify.importers import mapping, search
from verify.importers.convs import conv1d_taps, conv1d_weight, long_filter, long_taps
from verify.importers.icl_gd import head_matrices, head_weights

PEERS = ("precision-ls", "zoology", "icl-gd")
SUFFIX = {"polyverify": ".safetensors", "precision-ls": ".pt", "zoology": ".safetensors", "icl-gd": ".npz"}
GD_SIZES = {"n": 4, "d": 2}

#: the peer formats that hold each construction (at the entry's default sizes; gd at n=4, d=2).
#: Not listed: none does.  Why (the others): s003-remember: causal and circular layers in one stack;
#: LSA / ELSA: no peer module; zoology: an in / out projection, a non-causal filter, a position-dependent
#: bias matrix, or a layer without the residual whose gate and convolution both vary.  The second group
#: of precision-ls's have bias matrices that differ between tokens: written with constant channels
#: (``writing.constant_channels``, issue 44 item 4).
FITS = {
    "gd-baseconv": {"precision-ls"}, "prefix-coupled": {"precision-ls"}, "s000-linear": {"precision-ls"},
    "s000-multiply": {"precision-ls"}, "s000-newton": {"precision-ls"}, "s000-poly": {"precision-ls"},
    "s000-poly-horner": {"precision-ls"}, "s002-lrnn-conv": {"precision-ls"}, "s003-circuit-h21": {"precision-ls"},
    "s003-hyena-equiv": {"precision-ls"}, "s003-linear-circuit": {"precision-ls"},
    "s003-conv": {"precision-ls", "zoology"}, "s003-linear": {"precision-ls", "zoology"},
    "s003-shift-down": {"precision-ls", "zoology"},
    "gd-lsa": {"icl-gd"}, "gd-compiled-lsa": {"icl-gd"},  # seed 001's LSA in the token form (icl_gd.token_form)
    "gd-token-lsa": {"icl-gd"}, "s004-gd": {"icl-gd"}, "s004-gdpp": {"icl-gd"}, "s004-implicit-w": {"icl-gd"},
    "s004-precond": {"icl-gd"}, "s004-ridge2": {"icl-gd"},
    **{n: {"precision-ls"} for n in ("gd-baseconv-causal", "gd-compiled-baseconv", "gd-compiled-baseconv-causal",
                                     "s000-read", "s003-add", "s003-gating", "s003-h21-mult-step", "s003-shift-up")},
}


def _build(name):
    e = entries()[name]
    return e.build(**GD_SIZES) if "gd" in e.roles else e.build(**e.sizes)


def _k(con):
    return 2 if con.body else 0


CONSTRUCTIONS = [n for n in entries() if isinstance(_build(n), Construction)]
CELLS = [(n, f) for n in CONSTRUCTIONS for f in ("polyverify",) + PEERS if f == "polyverify" or f in FITS.get(n, ())]


def test_the_table_names_constructions_of_the_catalogue():
    assert set(FITS) <= set(CONSTRUCTIONS) and len(CONSTRUCTIONS) >= 30


@pytest.mark.parametrize("name", CONSTRUCTIONS)
def test_each_format_holds_exactly_the_constructions_of_the_table(name):
    con = _build(name)
    E.check(con, "polyverify", k=_k(con))  # every stack
    for fmt in PEERS:
        if fmt in FITS.get(name, ()):
            E.check(con, fmt, k=_k(con))
            continue
        with pytest.raises(E.ExportError) as e:
            E.check(con, fmt, k=_k(con))
        msg = str(e.value)
        assert "\n" not in msg and msg.startswith(fmt) and "layer" in msg, msg


def prove_back(con, path, fmt: str, settings: dict, constants=None):
    """The file read by the format's importer and proved against ``con`` (identity layout; ``constants``: the
    export's constant channels, after the construction's, set per token)."""
    imp = IMPORTERS[fmt].read(path, {k: str(v) for k, v in settings.items()})
    R, C = con.layout.shape
    constants = constants or {}
    layout = {"tokens": list(range(R)), "columns": list(range(C)) + [None] * len(constants),
              "constants": E.layout_constants(constants)}
    rows, cols, secs, shape = mapping.parse(layout, con, imp.state_shape)
    p, b, e = len(con.prologue), len(con.body), len(con.epilogue)
    first = {"prologue": imp.layers[:p], "body": imp.layers[p:p + b],
             "epilogue": imp.layers[len(imp.layers) - e:] if e else []}
    return search.prove_stack(mapping.Projected(con, rows, cols, secs, shape, first), imp.layers), imp


@pytest.mark.parametrize("name,fmt", CELLS)
def test_round_trip_import_of_export_is_proved(tmp_path, name, fmt):
    con = _build(name)
    path = tmp_path / f"w{SUFFIX[fmt]}"
    ex = E.export(path, con, fmt, k=_k(con))
    assert path.is_file() and ex.layers == con.depth(_k(con))
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left
    res, imp = prove_back(con, path, fmt, ex.settings, ex.constants)
    assert len(imp.layers) == con.depth(_k(con))
    if ex.inexact:  # the export said the file holds rounded weights: it is not the construction
        assert ex.dtype == "float64" and not res.ok and any(f"{ex.inexact} of" in s for s in ex.summary())
    else:
        assert res.ok, (name, fmt, res.failure)


def test_rounded_weights_are_float64_only_where_float32_cannot_hold_them():
    for name, fmt in (("gd-token-lsa", "icl-gd"), ("gd-baseconv", "precision-ls"), ("s003-conv", "zoology")):
        ex = E.plan(_build(name), fmt)
        assert ex.dtype == "float32" and ex.inexact == 0 and ex.config["dtype"] == "float32"
        assert all(t.dtype == np.float32 for t in ex.tensors.values())
    ex = E.plan(_build("s004-ridge2"), "icl-gd")  # omega_yx = -11/20: not a float
    assert ex.dtype == "float64" and ex.inexact > 0 and "not float32 values" in ex.notes[0]
    assert all(t.dtype == np.float64 for t in ex.tensors.values())


# ------------------------------------------------------------------ the command line's import

def _identity_layout(tmp_path, con):
    R, C = con.layout.shape
    p = tmp_path / "identity.json"
    p.write_text(json.dumps({"format": "polyverify-layout/1", "tokens": list(range(R)), "columns": list(range(C))}))
    return p


@pytest.mark.parametrize("name,fmt,suffix", [
    ("gd-baseconv", "precision-ls", ".pt"), ("prefix-coupled", "precision-ls", ".safetensors"),
    ("s003-conv", "zoology", ".pt"), ("gd-token-lsa", "icl-gd", ".npz"), ("s004-gd", "icl-gd", ".safetensors"),
    ("gd-baseconv", "polyverify", ".safetensors"), ("gd-compiled-elsa", "polyverify", ".safetensors"),
    ("s004-ridge2", "icl-gd", ".npz")])
def test_the_import_command_proves_the_export(tmp_path, name, fmt, suffix):
    con = _build(name)
    path = tmp_path / f"w{suffix}"
    ex = E.export(path, con, fmt, k=_k(con))
    e = entries()[name]
    argv = ["import", str(path), "--from", fmt, "--spec", name, "--no-search"]
    for key, v in (GD_SIZES if "gd" in e.roles else e.sizes).items():
        argv += ["--set", f"{key}={v}"]
    if fmt != "polyverify":
        argv += ["--layout", str(_identity_layout(tmp_path, con))]
    if suffix == ".npz":  # the summary names the settings an .npz cannot hold
        said = next(s for s in ex.summary() if "import with" in s)
        for k, v in ex.settings.items():
            argv += ["--config", f"{k}={v}"]
            assert f"--config {k}={v}" in said
    out = io.StringIO()
    assert main(argv, out=out) == 0, out.getvalue()
    verdict = next(s for s in out.getvalue().splitlines() if s.startswith("verdict:"))
    assert verdict.startswith(f"verdict: PROVED: the file computes {name} at every depth")
    if ex.inexact:  # s004-ridge2's omegas: proved at the float64 values the file holds, and said so
        assert "rounded to float64" in verdict


# ------------------------------------------------------------------ the peers' own forwards

def _peer_forwards():
    from tests.adversarial import test_import_conventions as P  # the peers' forwards, written from their code

    return P


def _float_run(con, k, S):
    return con.run({}, k, state=S, cast=lambda L: L.map(lambda a: to_float_array(a, np.float64)))[0]


def _state(con, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(-3, 4, size=con.layout.shape) / 4


@pytest.mark.parametrize("name", ["gd-baseconv", "prefix-coupled", "s000-newton", "s003-hyena-equiv",
                                  "gd-baseconv-causal", "gd-compiled-baseconv", "gd-compiled-baseconv-causal",
                                  "s003-add", "s003-h21-mult-step", "s000-read"])
def test_precision_ls_forward_on_the_exported_file_is_the_construction(tmp_path, name):
    """The peer's forward on the exported file: the construction on its channels and, where the export wrote
    constant channels (per-token biases as weights), those set on the input and given back unchanged."""
    torch = pytest.importorskip("torch", reason="precision-ls's modules are torch modules")
    P = _peer_forwards()
    con, k = _build(name), _k(_build(name))
    path = tmp_path / "w.pt"
    ex = E.export(path, con, "precision-ls", k=k)
    assert bool(ex.constants) == (name not in ("gd-baseconv", "prefix-coupled", "s000-newton", "s003-hyena-equiv"))
    ck = torch.load(str(path), weights_only=True)  # the peer's loader
    sd, cfg = {n: t.numpy() for n, t in ck["model_state_dict"].items()}, ck["config"]
    S = _state(con)
    C = S.shape[1]
    K = np.array([ex.constants[j] for j in sorted(ex.constants)], dtype=np.float64).T.reshape(S.shape[0], -1)
    assert sorted(ex.constants) == list(range(C, C + K.shape[1])) and cfg["n_embd"] == C + K.shape[1]
    u = np.concatenate([S, K], axis=1)
    for i in range(cfg["n_layer"]):
        u = P.precision_ls_forward(sd, u, f"_backbone.transformer.h.{i}.seq_mixer.base_conv.", cfg["causal"])
    ref = _float_run(con, k, S)
    assert np.allclose(u[:, :C], ref, rtol=1e-9, atol=1e-9 * max(1.0, float(np.abs(ref).max())))
    assert np.allclose(u[:, C:], K, rtol=0, atol=1e-12)  # the constant channels come out as they went in (FFT)


@pytest.mark.parametrize("name", ["s003-conv", "s003-linear", "s003-shift-down"])
def test_zoology_forward_on_the_exported_file_is_the_construction(tmp_path, name):
    torch = pytest.importorskip("torch", reason="zoology's modules are torch modules")
    P = _peer_forwards()
    con = _build(name)
    path = tmp_path / "w.pt"
    E.export(path, con, "zoology")
    ck = torch.load(str(path), weights_only=True)
    sd = {n: t.numpy() for n, t in ck["model_state_dict"].items()}
    S = _state(con)
    u = S
    for i in range(ck["config"]["n_layers"]):
        u = P.zoology_forward(sd, u, f"backbone.layers.{i}.sequence_mixer.")
    assert np.allclose(u, _float_run(con, 0, S), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", ["gd-token-lsa", "s004-gd", "s004-precond"])
def test_icl_gd_forward_on_the_exported_file_is_the_construction(tmp_path, name):
    pytest.importorskip("torch", reason="the peers' forwards module imports torch")
    P = _peer_forwards()
    con = _build(name)
    k = _k(con)
    path = tmp_path / "w.npz"
    ex = E.export(path, con, "icl-gd", k=k)
    with np.load(path, allow_pickle=False) as z:  # haiku's params, module/param keys
        w = {n: z[n] for n in z.files}
    mods = sorted({n.rsplit("/", 2)[0] for n in w})
    shared = len(mods) == 1 and mods[0].endswith("multi_head_attention")
    S = _state(con)
    h = S
    for i in range(con.depth(k)):
        mod = mods[0] if shared else f"{mods[0].split('/')[0]}/~trans_block/layer_{i}"
        h = P.icl_forward(w, h, ex.config["num_heads"], mod)
    assert np.allclose(h, _float_run(con, k, S), rtol=1e-9, atol=1e-9)


# ------------------------------------------------------------------ the tables both ways

def _rand(rng, *shape):
    a = np.empty(shape, dtype=object)
    for idx in np.ndindex(*shape):
        a[idx] = Fraction(int(rng.integers(-8, 9)), 4)
    return a


def _rows(rng, T, C):
    r = _rand(rng, C)
    return np.array([r] * T, dtype=object)


@pytest.mark.parametrize("T", [1, 2, 5, 6])
@pytest.mark.parametrize("same", [False, True])
def test_conv1d_and_long_filter_tables_read_back_exactly(T, same):
    rng = np.random.default_rng(T)
    h = _rand(rng, T, 3)
    back, inert = conv1d_taps(conv1d_weight(h, same=same), T, same=same, key="w")
    assert inert == 0 and (back == h).all()
    back, inert = long_taps(long_filter(h), T, "f")
    assert inert == 0 and (back == h).all()


def test_icl_gd_head_weights_are_head_matrices_backwards():
    rng = np.random.default_rng(1)
    P, Q = _rand(rng, 4, 4), _rand(rng, 4, 4)
    P2, Q2 = head_matrices(*head_weights(P, Q), 1)
    assert (P2 == P).all() and (Q2 == Q).all()


def _baseconv(rng, T, C, conv, resid, *, zoology=False):
    from verify.importers.common import eye, zeros

    W = (lambda: eye(C)) if zoology else (lambda: _rand(rng, C, C))
    b = (lambda: zeros(T, C)) if zoology else (lambda: _rows(rng, T, C))
    bc = zeros(T, C) if conv == "circular" else _rows(rng, T, C)
    return BaseConv(W(), b(), _rand(rng, T, C), bc, _rand(rng, C, C), _rows(rng, T, C), W(), b(),
                    causal=conv == "causal", residual=resid, same=conv == "same")


def _same_arrays(a, b):
    return a.kind == b.kind and a.config() == b.config() and all(
        (np.asarray(x, dtype=object) == np.asarray(b.arrays()[n], dtype=object)).all() for n, x in a.arrays().items())


@pytest.mark.parametrize("conv", ["causal", "circular", "same"])
@pytest.mark.parametrize("resid", [False, True])
@pytest.mark.parametrize("suffix", [".pt", ".safetensors"])
def test_precision_ls_layers_read_back_as_written(tmp_path, conv, resid, suffix):
    rng = np.random.default_rng(7)
    layers = [_baseconv(rng, 5, 3, conv, resid) for _ in range(2)]
    path = tmp_path / f"p{suffix}"
    ex = E.export(path, None, "precision-ls", sections={"epilogue": layers})
    assert ex.config["causal"] == (conv == "causal") and ex.config["use_resid"] == resid
    assert ex.config["conv_type"] == ("long" if conv == "circular" else "short")
    imp = IMPORTERS["precision-ls"].read(path, {})  # the config travels in the file
    assert all(_same_arrays(a, b) for a, b in zip(layers, imp.layers)) and len(imp.layers) == 2


@pytest.mark.parametrize("suffix", [".pt", ".safetensors"])
def test_zoology_residual_mixers_read_back_as_written(tmp_path, suffix):
    rng = np.random.default_rng(3)
    layers = [_baseconv(rng, 4, 3, "causal", True, zoology=True) for _ in range(3)]
    path = tmp_path / f"z{suffix}"
    ex = E.export(path, None, "zoology", sections={"epilogue": layers})
    assert not ex.notes  # no rewrite: the table read backwards
    imp = IMPORTERS["zoology"].read(path, {})
    assert all(_same_arrays(a, b) for a, b in zip(layers, imp.layers))


def test_icl_gd_pads_heads_and_writes_one_module_per_layer(tmp_path):
    rng = np.random.default_rng(5)
    D = 3
    L0 = TokenLSA([TokenLSAHead(_rand(rng, D, D), _rand(rng, D, D)) for _ in range(2)], exclude_last=False)
    L1 = TokenLSA([TokenLSAHead(_rand(rng, D, D), _rand(rng, D, D))], exclude_last=False)
    path = tmp_path / "i.safetensors"
    ex = E.export(path, None, "icl-gd", sections={"epilogue": [L0, L1]})
    assert ex.config["num_heads"] == 2 and ex.config["include_query"] and not ex.config["deq"]
    # src/train.py's num_layers: the per-layer modules' count (deq false), read back and checked
    assert ex.config["num_layers"] == 2 and any("zero heads" in n for n in ex.notes)
    assert {n.split("/")[0] for n in ex.tensors} == {"transformer"} and any("layer_1" in n for n in ex.tensors)
    imp = IMPORTERS["icl-gd"].read(path, {})
    assert _same_arrays(imp.layers[0], L0)
    assert len(imp.layers[1].heads) == 2 and all((h.P == 0).all() and (h.Q == 0).all() for h in imp.layers[1].heads[1:])
    assert (imp.layers[1].heads[0].P == L1.heads[0].P).all() and (imp.layers[1].heads[0].Q == L1.heads[0].Q).all()


def test_seed_001_lsa_goes_to_icl_gd_in_the_token_form_and_a_changed_entry_fails(tmp_path):
    """gd-lsa's LSA layers (Hagiwara's form) in seed 004's token form (icl_gd.token_form): the same map, said in the
    summary; import --from icl-gd alone proves it, and one entry changed is FAILED."""
    from safetensors import safe_open
    from safetensors.numpy import save_file

    con = _build("gd-lsa")
    path = tmp_path / "lsa.safetensors"
    ex = E.export(path, con, "icl-gd", k=2)
    assert any("token form, the same map exactly" in n for n in ex.notes) and ex.config["include_query"]
    assert main(["import", str(path), "--from", "icl-gd", "--no-search"], out=io.StringIO()) == 0
    with safe_open(str(path), framework="numpy") as f:
        meta, t = f.metadata(), {k: f.get_tensor(k) for k in f.keys()}
    q = next(k for k in t if k.endswith("key/w"))
    i = tuple(int(x) for x in np.argwhere(t[q] != 0)[0])
    t[q][i] *= 2
    save_file(t, str(path), metadata=meta)
    assert main(["import", str(path), "--from", "icl-gd", "--no-search"], out=io.StringIO()) == 1


# ------------------------------------------------------------------ refusals, one line naming what does not fit

@pytest.mark.parametrize("name,fmt,words", [
    ("s003-add", "zoology", ["layer 0 b_gate", "position-dependent bias", "one per channel"]),
    ("gd-baseconv", "zoology", ["circular convolution", "causal"]),
    ("s003-remember", "precision-ls", ["layer 2", "circular", "causal"]),
    ("gd-elsa", "icl-gd", ["elsa layer"]),
    ("gd-token-lsa", "precision-ls", ["BaseConv", "token_lsa"]),
    ("s000-linear", "zoology", ["W_in != I", "no in / out projection"]),
    ("s003-hyena-equiv", "zoology", ["layer 2", "no residual", "adds u"]),
])
def test_what_a_format_cannot_hold_is_refused_in_one_line(name, fmt, words):
    with pytest.raises(E.ExportError) as e:
        E.check(_build(name), fmt, k=1)
    msg = str(e.value)
    assert "\n" not in msg and all(w in msg for w in words), msg


def test_body_copies_that_differ_are_written_unrolled_and_proved_per_copy(tmp_path):
    """A stack whose body copies differ (a trained module's) is written as the unrolled stack, each copy
    its own layers, ``"unrolled": true`` in the metadata; ``gd --weights`` proves each distinct copy and
    names the copy that is wrong.  Copies that are the same are written as one body repeated."""
    from constructions.weights_io import load

    con = _build("gd-baseconv")
    other = [L.map(lambda a: a * 2) for L in con.body]
    path = tmp_path / "w.safetensors"
    ex = E.export(path, con, "polyverify",
                  sections={"prologue": con.prologue, "bodies": [con.body, other], "epilogue": con.epilogue})
    assert ex.layers == con.depth(2) and any("written unrolled" in s for s in ex.summary())
    lw = load(path)
    assert lw.declared["unrolled"] is True and lw.declared["k"] == 2
    assert [sp["source"] for sp in json.loads(lw.meta["layers"])] == list(range(con.depth(2)))
    out = io.StringIO()
    assert main(["gd", "--weights", str(path), "--n", "4", "--d", "2"], out=out) == 1
    text = out.getvalue()
    assert "body copy 1" in text and "FAILED" in text and "counterexample" in text, text
    same = tmp_path / "same.safetensors"
    ex = E.export(same, con, "polyverify",
                  sections={"prologue": con.prologue, "bodies": [con.body, list(con.body)], "epilogue": con.epilogue})
    assert ex.layers == con.depth(2) and "unrolled" not in load(same).declared
    assert main(["gd", "--weights", str(same), "--n", "4", "--d", "2"], out=io.StringIO()) == 0


# ------------------------------------------------------------------ the command-line helpers

def _parse(*argv):
    p = Parser(prog="x")
    E.add_export_arguments(p)
    return p.parse_args(list(argv))


def test_no_export_is_no_work():
    a = _parse()
    assert E.check_export_arguments(a, _build("gd-baseconv"), k=1) is None
    assert E.write_export(a, _build("gd-baseconv"), k=1) is None


@pytest.mark.parametrize("argv,con,words", [
    (["--export", "{tmp}/w.pt", "--format", "keras"], "gd-baseconv", ["--format 'keras'", "not a format"]),
    (["--format", "zoology"], "gd-baseconv", ["--format needs --export"]),
    (["--export", "{tmp}/w.h5", "--format", "precision-ls"], "gd-baseconv", ["--export", ".pt", "w.h5"]),
    (["--export", "{tmp}/w.npz", "--format", "zoology"], "s003-conv", ["zoology files are"]),
    (["--export", "{tmp}", "--format", "icl-gd"], "gd-token-lsa", ["--export", "is a folder"]),
    (["--export", "{tmp}/w.pt", "--format", "zoology"], "s003-add", ["--format zoology", "position-dependent bias"]),
    (["--export", "{tmp}/w.npz", "--format", "icl-gd"], "gd-baseconv", ["--format icl-gd", "baseconv layer"]),
    (["--export", "{tmp}/w.safetensors"], "s004-lemma-a3", ["not a layer stack"]),
])
def test_bad_export_arguments_are_one_line_before_any_work(tmp_path, argv, con, words):
    a = _parse(*[s.format(tmp=tmp_path) for s in argv])
    c = _build(con)
    with pytest.raises(UsageError) as e:
        E.check_export_arguments(a, c, k=1)
    msg = str(e.value)
    assert "\n" not in msg and all(w in msg for w in words), msg
    assert not any(tmp_path.iterdir())


def test_export_arguments_checked_then_written_atomically(tmp_path):
    con = _build("gd-baseconv")
    path = tmp_path / "sub" / "w.pt"
    a = _parse("--export", str(path), "--format", "precision-ls")
    assert E.check_export_arguments(a, con, k=3) == path and not (tmp_path / "sub").exists()
    out = io.StringIO()
    ex = E.write_export(a, con, k=3, out=out)
    assert path.is_file() and ex.layers == con.depth(3) and ex.path == path
    text = out.getvalue()
    assert text.startswith(f"exported {con.depth(3)} layers to {path} (precision-ls: ") and "causal=false" in text
    assert [p.name for p in path.parent.iterdir()] == ["w.pt"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    con = _build("gd-baseconv")
    path = tmp_path / "w.pt"
    path.write_bytes(b"old")
    a = _parse("--export", str(path), "--format", "precision-ls")
    E.check_export_arguments(a, con, k=1)

    def boom(tmp, suffix, ex):
        tmp.write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(E, "_write", boom)
    with pytest.raises(KeyboardInterrupt):
        E.write_export(a, con, k=1)
    assert path.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["w.pt"]


def test_the_default_format_is_this_toolkits_with_the_exact_rationals(tmp_path):
    con = _build("gd-baseconv")
    a = _parse("--export", str(tmp_path / "w.safetensors"))
    E.check_export_arguments(a, con, k=2)
    out = io.StringIO()
    ex = E.write_export(a, con, k=2, out=out)
    assert ex.format == "polyverify" and "exact rationals" in out.getvalue()
    from constructions.weights_io import load

    lw = load(tmp_path / "w.safetensors")
    assert lw.declared["k"] == 2 and lw.declared["name"] == "gd-baseconv"


def test_circuit_sections_export_like_the_circuit_command(tmp_path):
    import circuits as C
    from constructions.compiler import compile_circuit

    con = compile_circuit(C.dot(3, placed=True), name="dot", target="baseconv")
    secs = {"prologue": [], "body": [], "epilogue": list(con.epilogue)}
    a = _parse("--export", str(tmp_path / "w.safetensors"))
    E.check_export_arguments(a, con, sections=secs)
    ex = E.write_export(a, con, secs)
    assert ex.layers == len(con.epilogue)
    res, _ = prove_back(con, tmp_path / "w.safetensors", "polyverify", {})
    assert res.ok

