"""``import --check random`` (issue 41 item 1: "``import --check random`` as in gd"): the randomized identity
test of the file's prologue, each distinct body copy and epilogue modulo a random 61-bit prime
(``verify/prover/randomized.py``), never PROVED; a mismatch is FAILED (exit 1) with the distance to the
nearest construction in the verdict line.  ``--allow-large`` lifts the limit on a gd specification's n x d.
A parameter an export's description gives is said to come from the file, not from ``--set``."""
from __future__ import annotations

import io
import json

import pytest

from constructions.catalogue import entries
from verify.construct import main
from verify.export import export

torch = pytest.importorskip("torch", reason="precision-ls files are torch checkpoints")


def _files(tmp_path):
    con = entries()["gd-baseconv"].build(n=4, d=2)
    ok = tmp_path / "ok.pt"
    export(ok, con, "precision-ls", k=2)
    ck = torch.load(ok, weights_only=False)
    sd = ck["model_state_dict"]
    key = next(k for k in sd if k.endswith("out_proj.weight"))
    w = sd[key]
    w[tuple((w != 0).nonzero()[0])] *= 2  # one nonzero entry of the first block's W_out doubled
    bad = tmp_path / "bad.pt"
    torch.save(ck, bad)
    return ok, bad


def _import(argv, tmp_path):
    out = io.StringIO()
    rep = tmp_path / "r.json"
    rep.unlink(missing_ok=True)
    rc = main(["import", *map(str, argv), "--no-search", "--json", str(rep)], out=out)
    return rc, out.getvalue(), (json.loads(rep.read_text()) if rep.exists() else None)


def test_check_random_passes_an_export_never_proved_and_fails_a_tampered_file(tmp_path):
    ok, bad = _files(tmp_path)
    rc, out, rep = _import([ok, "--from", "precision-ls", "--check", "random", "--random-seed", "7"], tmp_path)
    assert rc == 0, out
    verdict = next(line for line in out.splitlines() if line.startswith("verdict:"))
    assert verdict.startswith("verdict: PASSED randomized identity test") and "PROVED" not in out, out
    assert rep["check"] == "random" and rep["verdict"]["word"] == "passed-randomized"
    assert rep["randomized"]["seed"] == "7" and "proof" not in rep
    assert "eta = 1/16 (from the file's metadata)" in out  # the export's description, not --set
    rc, out, rep = _import([bad, "--from", "precision-ls", "--check", "random", "--random-seed", "7"], tmp_path)
    assert rc == 1, out
    verdict = next(line for line in out.splitlines() if line.startswith("verdict:"))
    assert verdict.startswith("verdict: FAILED: the file is not gd-baseconv") and "distance" in verdict, out
    assert rep["verdict"]["word"] == "failed" and rep["randomized"]["failure"]["section"].startswith("body")
    assert rep["nearest"]


def test_the_same_seed_replays_the_same_prime(tmp_path):
    ok, _ = _files(tmp_path)
    primes = {_import([ok, "--from", "precision-ls", "--check", "random", "--random-seed", "11"],
                      tmp_path)[2]["randomized"]["prime"] for _ in range(2)}
    assert len(primes) == 1


def test_random_seed_without_check_random_is_refused_before_any_work(tmp_path, capsys):
    ok, _ = _files(tmp_path)
    assert main(["import", str(ok), "--from", "precision-ls", "--random-seed", "3"]) == 2
    err = capsys.readouterr().err
    assert "--random-seed applies to --check random" in err and "Traceback" not in err


def test_n_times_d_above_the_limit_names_allow_large(tmp_path, capsys):
    ok, _ = _files(tmp_path)
    argv = ["import", str(ok), "--from", "precision-ls", "--spec", "gd-baseconv", "--set", "n=64", "--set", "d=32"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "exceeds the limit" in err and "--allow-large" in err
    # with --allow-large the size check passes and the file's own shape is what refuses it (5 x 12 is no 65 x ...)
    assert main(argv + ["--allow-large"]) == 2
    err = capsys.readouterr().err
    assert "exceeds the limit" not in err and "Traceback" not in err
