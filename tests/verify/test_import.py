"""``python -m verify.construct import``: peers' files (written in their formats, with their names,
shapes and conventions: ``tests/verify/import_files.py``) proved or refuted against specifications.

The precision-ls case (``docs/interop.md``): the notebook's GD weights run through causal
convolutions are refuted as GD (first wrong layer: the running sum), proved as the prefix-coupled
iteration, and proved as GD under circular convolution (the nearby search and a long-convolution
file with ``causal=False``)."""
from __future__ import annotations

import io
import json
from fractions import Fraction

import numpy as np
import pytest

from verify.construct import main

from tests.verify.channel_order import permute_channels
from tests.verify.import_files import (icl_gd_create_weights, precision_ls_notebook, save_pt, zoology_mixer)

torch = pytest.importorskip("torch", reason="precision-ls files are torch state_dicts")

D, N = 2, 4
ETA32 = Fraction(13421773, 134217728)  # 0.1 in float32


def run(argv, tmp_path):
    out = io.StringIO()
    rep = tmp_path / "r.json"
    rc = main(["import", *map(str, argv), "--json", str(rep)], out=out)
    return rc, out.getvalue(), json.loads(rep.read_text())


def pls_file(tmp_path, k, *, causal=True, long=False, name="w.pt", config=True):
    p = tmp_path / name
    save_pt(p, precision_ls_notebook(D, N, 0.1, k, causal=causal, long=long),
            {"causal": causal, "conv_type": "long" if long else "short"} if config else None)
    return p


@pytest.mark.parametrize("k", [2, 3])
def test_precision_ls_notebook_is_not_gd_under_causal_convolution(tmp_path, k):
    rc, text, rep = run([pls_file(tmp_path, k), "--from", "precision-ls", "--spec", "baseconv"], tmp_path)
    assert rc == 1 and rep["proof"]["ok"] is False
    f = rep["proof"]["failure"]
    # the first wrong layer is the running sum (body layer 2), at the iterate of the first token
    assert f["section"] == "body" and f["layer_in_section"] == 2 and f["region"] == "x"
    assert f["counterexample"]["assignment"]
    assert rep["conventions"]["convolution"]["value"] == "causal"
    assert rep["conventions"]["causal"]["from"] == "config in the file"
    assert rep["parameters"]["eta"]["value"] == str(ETA32)
    nearby = {t["variant"]: t for t in rep["nearby"]}
    circ = nearby["convolution circular (the same taps)"]
    assert circ["ok"] and circ["parameters"]["eta"]["value"] == str(ETA32)
    assert not nearby["convolution same (the same taps)"]["ok"]
    assert "FAILED" in text and "nearby: convolution circular (the same taps): PROVED" in text


def test_precision_ls_notebook_proves_the_prefix_coupled_iteration(tmp_path):
    rc, text, rep = run([pls_file(tmp_path, 2), "--from", "precision-ls", "--spec", "prefix-coupled"], tmp_path)
    assert rc == 0 and rep["proof"]["ok"] is True and rep["k"] == 2
    assert rep["parameters"]["eta"]["described"] == "13421773/134217728 = 0.1 rounded to float32"
    assert rep["verdict"]["eta_decimal"] == {"value": "1/10", "ok": False}
    assert "0.1 rounded to float32" in text and "PROVED" in text
    # what the specification has and the file does not is named
    assert rep["not_in_file"]["sections"] == ["epilogue"] and "q" in rep["not_in_file"]["regions"]


def test_one_step_is_gd_at_the_last_token_only(tmp_path):
    """k = 1: the last token's iterate is one GD step, but the other tokens' are not, so the body
    is refuted as GD's body (it is what the next step reads) and proved as prefix-coupled."""
    rc, _, rep = run([pls_file(tmp_path, 1), "--from", "precision-ls", "--spec", "baseconv"], tmp_path)
    assert rc == 1 and rep["proof"]["failure"]["state_index"][0] < N - 1
    rc, _, rep = run([pls_file(tmp_path, 1), "--from", "precision-ls", "--spec", "prefix-coupled"], tmp_path)
    assert rc == 0


def test_precision_ls_long_convolution_non_causal_is_gd(tmp_path):
    """causal=False with a long convolution is circular (FFT of size T): the same construction is GD."""
    p = pls_file(tmp_path, 2, causal=False, long=True)
    rc, text, rep = run([p, "--from", "precision-ls", "--spec", "baseconv"], tmp_path)
    assert rc == 0, text
    assert rep["conventions"]["convolution"]["value"] == "circular"
    assert rep["parameters"]["eta"]["value"] == str(ETA32)
    rc, _, rep = run([p, "--from", "precision-ls", "--spec", "prefix-coupled"], tmp_path)
    assert rc == 1


def test_precision_ls_short_non_causal_is_the_same_convention(tmp_path):
    """causal=False with a Conv1d (padding K//2) is the "same" convention: the notebook's identity
    tap (the last) is then a shift, and the stack is neither GD nor prefix-coupled."""
    p = pls_file(tmp_path, 1, causal=False)
    rc, _, rep = run([p, "--from", "precision-ls", "--spec", "baseconv"], tmp_path)
    assert rc == 1 and rep["conventions"]["convolution"]["value"] == "same"
    assert rep["proof"]["failure"]["layer"] == 0


def test_precision_ls_safetensors_with_config_in_metadata(tmp_path):
    from safetensors.torch import save_file

    sd = precision_ls_notebook(D, N, 0.1, 2, causal=True)
    p = tmp_path / "w.safetensors"
    save_file({k: v.contiguous() for k, v in sd.items()}, str(p), metadata={"config": json.dumps({"causal": True})})
    rc, _, rep = run([p, "--from", "precision-ls", "--spec", "prefix-coupled"], tmp_path)
    assert rc == 0 and len(rep["tensors"]) == len(sd)


def test_precision_ls_needs_causal_and_reads_every_tensor(tmp_path, capsys):
    p = pls_file(tmp_path, 1, config=False)
    assert main(["import", str(p), "--from", "precision-ls", "--spec", "baseconv"], out=io.StringIO()) == 2
    assert "--config causal=true" in capsys.readouterr().err
    sd = precision_ls_notebook(D, N, 0.1, 1)
    sd["_read_in.weight"] = torch.zeros(4 * D + 1, D + 1)
    save_pt(tmp_path / "x.pt", sd, {"causal": True})
    assert main(["import", str(tmp_path / "x.pt"), "--from", "precision-ls", "--spec", "baseconv"],
                out=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert "_read_in.weight" in err and "every tensor must be part of the proof" in err


def test_precision_ls_with_given_eta_reports_the_files_eta(tmp_path):
    rc, text, rep = run([pls_file(tmp_path, 2, causal=False, long=True), "--from", "precision-ls", "--spec",
                         "baseconv", "--set", "eta=1/10"], tmp_path)
    assert rc == 1 and rep["parameters"]["eta"] == {"value": "1/10", "from": "--set"}
    files = [t for t in rep["nearby"] if t["variant"].startswith("eta read from the file")]
    assert files and files[0]["ok"] and "0.1 rounded to float32" in files[0]["variant"]


# ------------------------------------------------------------------ von Oswald et al. (icl-gd)

ICL = ["--from", "icl-gd", "--config", "num_heads=1"]  # create_weights is one head (the file cannot show it)


def icl_file(tmp_path, **kw):
    p = tmp_path / "icl.npz"
    np.savez(p, **icl_gd_create_weights(D, 5, 0.5, **kw))
    return p


@pytest.mark.parametrize("spec", ["s004-gd", "token-lsa"])
def test_icl_gd_create_weights_prove_as_gd(tmp_path, spec):
    rc, text, rep = run([icl_file(tmp_path), *ICL, "--spec", spec, "--set", "n=5"], tmp_path)
    assert rc == 0, text
    eta = Fraction(float(np.float32(0.5 / 5)))  # lr / c_size stored in float32
    assert rep["parameters"]["eta"]["value"] == str(eta)
    assert rep["conventions"]["include_query"]["value"] is False


def test_icl_gd_per_layer_modules_and_include_query(tmp_path):
    p = icl_file(tmp_path, layers=3)
    rc, _, rep = run([p, *ICL, "--spec", "s004-gd", "--set", "n=5"], tmp_path)
    assert rc == 0 and rep["k"] == 3
    # with the query token as a key the layer is not GD; the nearby search finds the convention
    rc, text, rep = run([p, *ICL, "--spec", "s004-gd", "--set", "n=5", "--config",
                         "include_query=true"], tmp_path)
    assert rc == 1
    assert any(t["ok"] and "query token excluded" in t["variant"] for t in rep["nearby"]), text


def test_icl_gd_nonzero_initial_weights_are_not_gd_from_zero(tmp_path):
    rc, _, rep = run([icl_file(tmp_path, w_init=np.array([0.5, -0.25])), *ICL, "--spec", "s004-gd",
                      "--set", "n=5"], tmp_path)
    assert rc == 1 and rep["proof"]["failure"]["counterexample"]


def test_icl_gd_refuses_tensors_outside_the_attention(tmp_path, capsys):
    w = icl_gd_create_weights(D, 5, 0.5)
    w["Transformer_gd/emb/w"] = np.zeros((11, 11), dtype=np.float32)
    np.savez(tmp_path / "e.npz", **w)
    assert main(["import", str(tmp_path / "e.npz"), *ICL, "--spec", "s004-gd"], out=io.StringIO()) == 2
    assert "Transformer_gd/emb/w" in capsys.readouterr().err


# ------------------------------------------------------------------ zoology

@pytest.mark.parametrize("short", [True, False])
def test_zoology_mixer_proves_seed003_convolution(tmp_path, short):
    from constructions.catalogue import entries

    con = entries()["s003-conv"].build(N=5, d=2, seed=1)
    h = np.vectorize(float)(con.epilogue[0].h)
    p = tmp_path / "z.safetensors"
    from safetensors.numpy import save_file

    save_file(zoology_mixer(h, short=short), str(p))
    argv = [p, "--from", "zoology", "--spec", "s003-conv", "--set", "N=5", "--set", "d=2"]
    rc, text, rep = run(argv + (["--config", "tokens=5"] if short else []), tmp_path)
    assert rc == 0, text
    # a wrong tap is refuted
    h2 = h.copy()
    h2[2, 1] += 0.25
    save_file(zoology_mixer(h2, short=short), str(p))
    rc, _, rep = run(argv + (["--config", "tokens=5"] if short else []), tmp_path)
    assert rc == 1 and rep["proof"]["failure"]["region"]


# ------------------------------------------------------------------ our own files, and --layout

def test_polyverify_file_round_trip(tmp_path):
    from constructions.catalogue import gd_architectures
    from constructions.weights_io import save

    con = gd_architectures()["token-lsa"].build(4, 2)
    save(tmp_path / "w.safetensors", con, 3)
    rc, text, rep = run([tmp_path / "w.safetensors", "--from", "polyverify", "--spec", "token-lsa"], tmp_path)
    assert rc == 0, text
    assert rep["sizes"] == {"n": 4, "d": 2} and rep["parameters"]["eta"]["value"] == "1/16"


def test_layout_json_with_a_channel_permutation(tmp_path):
    """The notebook's channels in another order, described by a --layout file: same verdicts."""
    perm = [5, 6, 7, 8, 0, 1, 2, 3, 4]  # new channel j holds old channel perm[j]
    inv = np.argsort(perm)
    save_pt(tmp_path / "p.pt", permute_channels(precision_ls_notebook(D, N, 0.1, 2), perm), {"causal": True})
    old = {"a": [0, 1], "b": [2], "x": [3, 4], "s1": [5, 6], "s2": [7, 8]}
    layout = {"format": "polyverify-layout/1", "tokens": list(range(N)),
              "channels": {r: [int(inv[c]) for c in cs] for r, cs in old.items()},
              "sections": {"epilogue": 0}}
    (tmp_path / "L.json").write_text(json.dumps(layout))
    rc, _, rep = run([tmp_path / "p.pt", "--from", "precision-ls", "--spec", "prefix-coupled", "--layout",
                      tmp_path / "L.json"], tmp_path)
    assert rc == 0 and rep["layout_source"].startswith("--layout")
    # the identity layout is wrong for this file: refuted
    layout["channels"] = old
    (tmp_path / "L.json").write_text(json.dumps(layout))
    rc, _, rep = run([tmp_path / "p.pt", "--from", "precision-ls", "--spec", "prefix-coupled", "--layout",
                      tmp_path / "L.json"], tmp_path)
    assert rc == 1


def _import_dropping_the_iterate(tmp_path) -> int:
    """``import`` of a prefix-coupled precision-ls file with a layout that maps only column 0 (the iterate X dropped)."""
    layout = {"format": "polyverify-layout/1", "tokens": list(range(N)), "columns": [None] * (4 * D + 1),
              "sections": {"epilogue": 0}}
    layout["columns"][0] = 0
    (tmp_path / "L.json").write_text(json.dumps(layout))
    return main(["import", str(pls_file(tmp_path, 1)), "--from", "precision-ls", "--spec", "prefix-coupled",
                 "--layout", str(tmp_path / "L.json")], out=io.StringIO())


def test_a_layout_that_drops_the_iterate_is_refused(tmp_path, capsys):
    rc = _import_dropping_the_iterate(tmp_path)
    assert rc == 2 and "iterate 'X'" in capsys.readouterr().err


def _rings_built(monkeypatch) -> list[int]:
    """The number of generators of every ring ``mapping.check_carried`` builds (recorded)."""
    import verify.prover.proof as P

    sizes, real = [], P.SymbolicProblem

    def recorded(variables, params=()):
        sizes.append(sum(int(np.prod(s)) if s else 1 for s in variables.values()) + len(params))
        return real(variables, params)

    monkeypatch.setattr(P, "SymbolicProblem", recorded)
    return sizes


def test_the_carried_check_builds_symbols_for_the_carried_variables_only(monkeypatch):
    """gd-baseconv at 256x64 onto the identity layout: x (64 entries) in symbols, A and y at integers
    (a ring with every variable's 16,768 entries took 2.4 GB); nothing refused."""
    from constructions.gd_baseconv import gd_baseconv
    from verify.importers import mapping

    spec = gd_baseconv(256, 64)
    rows, cols, secs, shape = mapping.parse({"format": mapping.FORMAT}, spec, spec.layout.shape)
    con = mapping.Projected(spec, rows, cols, secs, shape,
                            {"prologue": spec.prologue, "body": spec.body, "epilogue": spec.epilogue})
    sizes = _rings_built(monkeypatch)
    mapping.check_carried(con)
    assert sizes == [64]


@pytest.mark.parametrize("symbolic_max", [None, 0])
def test_a_dropped_iterate_is_refused_by_either_check(tmp_path, capsys, monkeypatch, symbolic_max):
    """The layout dropping X refused: confirmed with every variable in symbols where the state is small
    (the default limit), on the integer values alone above the limit (set to 0 here)."""
    from verify.importers import mapping

    if symbolic_max is not None:
        monkeypatch.setattr(mapping, "CARRIED_SYMBOLIC_MAX", symbolic_max)
    sizes = _rings_built(monkeypatch)
    rc = _import_dropping_the_iterate(tmp_path)
    assert rc == 2 and "iterate 'X'" in capsys.readouterr().err
    carried_only, *rest = sizes
    assert carried_only < 4 * D * N and (rest == [] if symbolic_max == 0 else rest[0] > carried_only)


def test_prefix_coupled_is_gd_at_the_last_token_for_one_step_only():
    """The iteration itself: from equal iterates, X[N] after one step is one GD step; after two
    it is not (exact, on a rational problem)."""
    from constructions.catalogue.seed000_prefix_coupled import prefix_coupled
    from constructions.lsq import gd_step

    n, d = 3, 2
    con = prefix_coupled(n, d, eta=Fraction(1, 8))
    A = np.array([[Fraction(1), Fraction(2)], [Fraction(-1), Fraction(1)], [Fraction(3), Fraction(-2)]], dtype=object)
    b = np.array([Fraction(1), Fraction(0), Fraction(2)], dtype=object)
    x = np.array([Fraction(0), Fraction(0)], dtype=object)
    v = {"A": A, "b": b, "X": np.array([x] * (n + 1), dtype=object), "q": x}
    g = {"A": A, "b": b, "x": x}
    v1, g1 = con.step(v), gd_step(g, Fraction(1, 8))
    assert list(v1["X"][n]) == list(g1["x"])
    v2, g2 = con.step(v1), gd_step(g1, Fraction(1, 8))
    assert list(v2["X"][n]) != list(g2["x"])
