"""Refute first on every path (issue 41 items 1 and 5): ``gd --weights``, ``import`` (its nearby search
on), ``circuit --weights``, a catalogue entry's ``--weights``, ``verify.compare --weights`` and Python's
``prove`` / ``check`` each take a tampered tiny file (one weight entry changed) and answer FAILED from the
randomized identity test at an integer point, without the exact proof's rings (``proof._prove`` replaced
by a failure: the commands' proof children are forked, so they see it); the counterexample reproduces
exactly: the file's layers, as read from disk, rerun in rationals on the reported point by this test's own
replay give the reported values, which differ.  The verdict line of a FAILED command carries a distance,
and the diagnosis (nearest construction, distances) never changes the file's verdict: a snapped PROVED
is its own line, and a diagnosis that breaks leaves the verdict line as it was."""
from __future__ import annotations

import io
import json
from fractions import Fraction

import numpy as np
import pytest

from constructions import weights_io
from constructions.base import run_layers
from constructions.claims import ProofResult
from constructions.gd_baseconv import gd_baseconv
from verify.construct import main
from verify.prover import proof as P
from verify.prover.kernel import Verdict, verdict
from verify.prover.proof import problem_from_assignment
from verify.prover.rings import exact_layer, section_claims


@pytest.fixture
def no_full_ring(monkeypatch):
    """The exact proof of given layers (a file's: ``sections``) replaced by a failure; the nearest
    construction's own proof (no ``sections``: diagnosis, after the verdict) runs as ever."""
    real = P._prove

    def boom(con, symbolic, sections, *a, **k):
        if sections is not None:
            raise AssertionError("the exact proof ran on a file the refutation should have failed")
        return real(con, symbolic, sections, *a, **k)

    monkeypatch.setattr(P, "_prove", boom)


def replay(con, sections: dict, failure: dict) -> None:
    """The failure's counterexample rerun exactly (Fractions) through ``sections[failure['section']]``
    against the specification: the two values at the failing entry are the reported ones, and differ."""
    cx = failure["counterexample"]
    assert cx["assignment"] and all(Fraction(x).denominator == 1 for x in cx["assignment"].values())
    v = problem_from_assignment(con.variables, cx["assignment"])
    _, start, target = next(c for c in section_claims(con, v) if c[0] == failure["section"])
    S = run_layers([exact_layer(L) for L in sections[failure["section"]]], start())
    idx = tuple(failure["state_index"])
    got, want = Fraction(S[idx]), Fraction(target()[idx])
    assert got != want and got == Fraction(cx["got"]) and want == Fraction(cx["expected"])


def file_sections(con, path) -> dict:
    """The file's layers as read from disk, by section (its first body copy)."""
    lw = weights_io.load(path, spec=con)
    sec, _ = weights_io.split_sections(con, lw.layers)
    return {"prologue": sec["prologue"], "body": sec["bodies"][0] if sec["bodies"] else [],
            "epilogue": sec["epilogue"]}


def near_distance(line: str) -> float | None:
    """The distance in a FAILED verdict line to the nearest gd-baseconv (eta = 1/8), where it is within a
    factor of 2 of the one moved entry (1/4: the channel's rescaling may spread it a little)."""
    import re

    m = re.search(r"; distance ([0-9.e-]+) to the nearest gd-baseconv \(eta = 1/8\)", line)
    return float(m.group(1)) if m and 0.125 <= float(m.group(1)) <= 0.5 else None


def refuted(failure: dict) -> bool:
    return "refuted by a randomized identity test" in failure["note"] and "not formed" in failure["residual"]


@pytest.fixture
def gd_file(tmp_path):
    """gd-baseconv 4 x 2 (eta 1/8) with a structural zero of body W_out set to 1/4."""
    con = gd_baseconv(4, 2, eta=Fraction(1, 8))
    L = con.layers(1)
    L[0].arrays()["W_out"][0, 1] = Fraction(1, 4)
    path = tmp_path / "t.safetensors"
    weights_io.save(path, con, 1)
    return gd_baseconv(4, 2, eta=Fraction(1, 8)), path


def test_gd_weights(gd_file, tmp_path, no_full_ring):
    con, path = gd_file
    out, rep = io.StringIO(), tmp_path / "r.json"
    assert main(["gd", "--weights", str(path), "--batch", "2", "--quiet", "--json", str(rep)], out=out) == 1
    line = next(x for x in out.getvalue().splitlines() if x.startswith("proof: FAILED"))
    assert "found at an integer point" in line and "weight distance" in line  # printed first
    after = next(x for x in out.getvalue().splitlines() if x.startswith("verdict: FAILED"))
    assert near_distance(after) is not None  # after the nearest construction's fit
    r = json.loads(rep.read_text())
    assert r["verdict"] == "failed" and "distance" in r["verdict_line"] and refuted(r["proof"]["failure"])
    replay(con, file_sections(con, path), r["proof"]["failure"])


def test_import_with_its_nearby_search(gd_file, tmp_path, no_full_ring):
    con, path = gd_file
    out, rep = io.StringIO(), tmp_path / "r.json"
    assert main(["import", str(path), "--from", "polyverify", "--spec", "gd-baseconv", "--json", str(rep)],
                out=out) == 1
    line = next(x for x in out.getvalue().splitlines() if x.startswith("verdict: FAILED"))
    assert near_distance(line) is not None
    r = json.loads(rep.read_text())
    assert r["verdict"]["ok"] is False and refuted(r["proof"]["failure"])
    replay(con, file_sections(con, path), r["proof"]["failure"])
    assert "nearby" in r  # the nearby readings were tried (each refuted first: the full ring never ran)


def test_circuit_weights(tmp_path, no_full_ring):
    import circuits as C
    from constructions.compiler import compile_circuit, default_target
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file

    f = tmp_path / "dot.json"
    C.dump(C.dot(3), f)
    w = tmp_path / "c.safetensors"
    assert main(["circuit", "--graph", str(f), "--export", str(w), "--trials", "2"], out=io.StringIO()) == 0
    tensors = load_file(str(w))
    with safe_open(str(w), framework="numpy") as fh:
        meta = fh.metadata()
    t = tensors["layers.0.W_out"].copy()
    t[0, 0] += 0.5
    save_file({**tensors, "layers.0.W_out": t}, str(w), metadata=meta)
    out, rep = io.StringIO(), tmp_path / "r.json"
    assert main(["circuit", "--graph", str(f), "--weights", str(w), "--trials", "2", "--json", str(rep)],
                out=out) == 1
    line = next(x for x in out.getvalue().splitlines() if x.startswith("proof: FAILED"))
    assert "found at an integer point" in line and "weight distance 0.5" in line
    r = json.loads(rep.read_text())
    assert refuted(r["proof"]["failure"])
    g = C.load(f)
    con = compile_circuit(g, name="dot", target=default_target(g))
    replay(con, file_sections(con, w), r["proof"]["failure"])


def test_catalogue_entry_weights(tmp_path, no_full_ring, monkeypatch):
    """``python -m verify.construct s004-gd --weights F``: the entry's own export with one Q entry moved."""
    from constructions.catalogue import entries

    good, bad = tmp_path / "s.safetensors", tmp_path / "bad.safetensors"
    assert main(["s004-gd", "--export", str(good)], out=io.StringIO()) == 0
    from safetensors import safe_open
    from safetensors.numpy import save_file

    with safe_open(str(good), "np") as fh:
        meta, t = fh.metadata(), {k: fh.get_tensor(k) for k in fh.keys()}
    q = t["layers.0.head0.Q"].copy()
    q[0, 0] += 0.25
    save_file({**t, "layers.0.head0.Q": q}, str(bad), metadata=meta)
    out, rep = io.StringIO(), tmp_path / "r.json"
    assert main(["s004-gd", "--weights", str(bad), "--json", str(rep)], out=out) == 1
    text = out.getvalue()
    line = next(x for x in text.splitlines() if x.startswith("proof: FAILED"))
    assert "found at an integer point" in line and "to the nearest s004-gd" in line and "distance" in line
    assert "weight distance to s004-gd at eta = 1/8 (the parameters used): max |w - w*| = 0.25" in text
    r = json.loads(rep.read_text())
    assert r["verdict"] == "failed" and "distance" in r["verdict_line"] and refuted(r["proof"]["failure"])
    assert r["weights"]["distance"]["max_abs"] == 0.25 and "nearest" in r and "functional_distance" in r
    e = entries()["s004-gd"]
    con = e.build(**e.sizes)
    replay(con, file_sections(con, bad), r["proof"]["failure"])
    # the untouched export proves (by the exact proof: the refutation finds nothing)
    monkeypatch.undo()
    out = io.StringIO()
    assert main(["s004-gd", "--weights", str(good)], out=out) == 0 and "proof: PROVED" in out.getvalue()


@pytest.mark.parametrize("argv, message", [
    (["s004-lemma-a3", "--weights", "W"], "is an identity claim (IdentityClaim), not a construction"),
    (["s004-gd", "--allow-metadata-mismatch"], "--allow-metadata-mismatch applies to a --weights file"),
    (["s004-gd", "--weights", "W"], "declares construction 'gd-baseconv'"),
])
def test_catalogue_weights_refusals(argv, message, capsys, tmp_path, gd_file):
    _, path = gd_file  # a gd-baseconv file: 4 BaseConv layers, not s004-gd's token-LSA layer
    argv = [str(path) if x == "W" else x for x in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_catalogue_weights_with_export_is_refused(tmp_path, capsys):
    assert main(["s004-gd", "--weights", str(tmp_path / "w"), "--export", str(tmp_path / "e")]) == 2
    assert "give one of them" in capsys.readouterr().err


def test_compare_weights(gd_file, tmp_path, no_full_ring):
    from verify.compare import main as compare_main

    con, path = gd_file
    out = tmp_path / "cmp"
    buf = io.StringIO()
    import contextlib

    with contextlib.redirect_stdout(buf):
        rc = compare_main(["--learned", str(path), "--construction", "gd-baseconv", "--n", "4", "--d", "2",
                           "--eta", "1/8", "--out", str(out), "--weights", "--problems", "4",
                           "--skip", "functional,sensitivities,polynomial,invariants,implicit_w,iterate"])
    assert rc == 0, buf.getvalue()
    line = next(x for x in buf.getvalue().splitlines() if x.startswith("weights: FAILED"))
    assert near_distance(line) is not None
    r = json.loads((out / "report.json").read_text())
    ref = r["weights"]["refutation"]
    assert ref["ring"].startswith("integer point") and refuted(ref["details"])
    replay(con, file_sections(con, path), ref["details"])


def test_python_prove_and_check(monkeypatch):
    from verify.prover.proof import check, prove

    def boom(*a, **k):
        raise AssertionError("the exact proof ran where the refutation should have failed")

    monkeypatch.setattr(P, "_prove", boom)
    con = gd_baseconv(4, 2, eta=Fraction(1, 8))
    body = [L.map(lambda A: np.asarray(A, dtype=object).copy()) for L in con.body]
    body[1].W_out[tuple(np.argwhere(body[1].W_out != 0)[0])] *= 2
    secs = {"prologue": list(con.prologue), "body": body, "epilogue": list(con.epilogue)}
    r = prove(con, sections=secs)
    assert verdict(r) is Verdict.FAILED and r.ring.startswith("integer point")
    replay(con, secs, r.to_json()["failure"])
    # check(): a construction whose own layers were changed (the builder's object, tampered in place)
    bad = gd_baseconv(4, 2, eta=Fraction(1, 8))
    bad.body[1].W_out[tuple(np.argwhere(bad.body[1].W_out != 0)[0])] *= 2
    r = check(bad)
    assert verdict(r) is Verdict.FAILED and r.ring.startswith("integer point")
    replay(bad, {"prologue": bad.prologue, "body": bad.body, "epilogue": bad.epilogue}, r.to_json()["failure"])


# ------------------------------------------------------------------ item 5: diagnosis never makes the verdict

def test_a_snapped_proved_is_its_own_line_and_the_file_stays_failed(gd_file, tmp_path):
    con, path = gd_file
    out, rep = io.StringIO(), tmp_path / "r.json"
    assert main(["gd", "--weights", str(path), "--batch", "2", "--quiet", "--json", str(rep)], out=out) == 1
    lines = out.getvalue().splitlines()
    verdict_line = next(x for x in lines if x.startswith("proof: "))
    assert verdict_line.startswith("proof: FAILED") and "PROVED" not in verdict_line
    snapped = [x for x in lines if "the nearest construction (" in x]
    assert len(snapped) == 1 and "is PROVED (that construction" in snapped[0] and "unchanged" in snapped[0]
    r = json.loads(rep.read_text())
    assert r["verdict"] == "failed" and r["nearest"]["snapped_verdict"] == "PROVED"
    assert r["verdict_line"].startswith("FAILED") and "PROVED" not in r["verdict_line"]


def test_a_broken_diagnosis_leaves_the_verdict(gd_file, tmp_path, monkeypatch):
    """The nearest fit raising, and the snapped proof returning a PROVED-looking result it did not
    seal: the file's verdict line is still FAILED with the distance at the parameters used."""
    from verify import nearest as NR

    con, path = gd_file

    def broken(*a, **k):
        raise RuntimeError("the fit broke on purpose")

    monkeypatch.setattr(NR, "nearest", broken)
    out, rep = io.StringIO(), tmp_path / "r.json"
    assert main(["gd", "--weights", str(path), "--batch", "2", "--quiet", "--json", str(rep)], out=out) == 1
    line = next(x for x in out.getvalue().splitlines() if x.startswith("proof: "))
    assert line.startswith("proof: FAILED")
    assert "weight distance to gd-baseconv at eta = 1/8 (the parameters used): max |w - w*| = 0.25" in line
    after = next(x for x in out.getvalue().splitlines() if x.startswith("verdict: "))  # after the fit
    assert after.startswith("verdict: FAILED") and "the fit broke (RuntimeError: the fit broke on purpose)" in after
    r = json.loads(rep.read_text())
    assert r["verdict"] == "failed" and "distance" in r["verdict_line"] and "skipped" in r["nearest"]
    monkeypatch.undo()

    # a snapped "proof" that was not sealed by the kernel reads as not PROVED, and the file stays FAILED
    def forged(c):
        return ProofResult(c.name, True, 0.0, sections={"body": True})

    lw = weights_io.load(path, spec=con)
    near = NR.gd_nearest(con, 4, 2, 1, Fraction(1, 8), None, lw.layers, prove=forged)
    assert near.snapped_verdict == "FAILED" and "is not PROVED" in "\n".join(near.lines())


def test_compare_weights_time_boxes_the_residual_of_a_refuted_file(gd_file, monkeypatch):
    """The exact residual rows only size a refuted file's residual: they get RESIDUAL_AFTER_REFUTATION_S,
    and the verdict and counterexample stay the refutation's."""
    import verify.compare as VC
    from verify.comparison import constructed_stack, stack_of

    con, path = gd_file
    monkeypatch.setattr(VC, "RESIDUAL_AFTER_REFUTATION_S", 1e-3)
    learned = stack_of(con, weights_io.load(path, spec=con).layers)
    rep = VC.compare(con, learned, constructed_stack(con, 1), weights=True, problems=4, iter_sigmas=(),
                     skip=("functional", "sensitivities", "polynomial", "invariants", "implicit_w", "iterate"))
    w = rep["weights"]
    assert not w["exact"] and not w["complete"] and "RESIDUAL_AFTER_REFUTATION_S" in w["reason"]
    assert w["first_failure"] == w["refutation"]["failure"] and refuted(w["refutation"]["details"])


def test_gd_check_random_failed_line_has_the_distance(gd_file, tmp_path):
    """``gd --weights F --check random``: the randomized test's FAILED line carries the distance too (the
    counterexample is modulo p there, as --check random says; --check exact gives the exact one)."""
    con, path = gd_file
    out, rep = io.StringIO(), tmp_path / "r.json"
    assert main(["gd", "--weights", str(path), "--batch", "2", "--quiet", "--check", "random", "--random-seed", "1",
                 "--json", str(rep)], out=out) == 1
    line = next(x for x in out.getvalue().splitlines() if x.startswith("check: FAILED"))
    assert "weight distance" in line  # printed first; the nearest construction's distance after its fit
    assert near_distance(next(x for x in out.getvalue().splitlines() if x.startswith("verdict: FAILED"))) is not None
    r = json.loads(rep.read_text())
    assert r["verdict"] == "failed" and "distance" in r["verdict_line"] and "nearest" in r
