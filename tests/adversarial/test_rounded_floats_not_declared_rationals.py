"""A rounded float is never proved as the rational its metadata declares.

``weights_io.load`` read an entry as the metadata's rational ``q`` whenever ``float(q) ==
t[idx]``; numpy compares a Python float with a float16/float32 entry after casting it *down*,
so a file cast to float16 (step weight -0.0999755859375) was PROVED "with eta = 1/10" by
``gd --weights`` and by ``import --from polyverify``.  Now a declared rational stands in for a
stored float only in a float64 tensor whose nonzero stored value is exactly float64(q), and the
verdict says how many entries were read that way and the largest gap.
"""
from __future__ import annotations

import io
import json
from fractions import Fraction

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

from constructions import weights_io
from constructions.gd_baseconv import gd_baseconv
from verify.construct import main

FAST = ["--batch", "2", "--quiet", "--dtype", "float64"]


def run(argv):
    out = io.StringIO()
    return main(argv, out=out), out.getvalue()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The issue's repro: gd N=4, D=2, eta=1/10, 10 layers, exported, then cast with the metadata kept."""
    d = tmp_path_factory.mktemp("rounded")
    f = d / "f.safetensors"
    rc, _ = run(["gd", "--layers", "10", "--n", "4", "--d", "2", "--eta", "1/10", *FAST, "--export", str(f)])
    assert rc == 0
    with safe_open(str(f), framework="numpy") as fh:
        meta = fh.metadata()
    t = load_file(str(f))
    out = {"f64": f}
    for name, dt in (("f16", np.float16), ("f32", np.float32)):
        p = d / f"{name}.safetensors"
        save_file({k: v.astype(dt) for k, v in t.items()}, str(p), metadata=meta)
        out[name] = p
    return out


@pytest.mark.parametrize("name", ["f16", "f32"])
def test_cast_file_reads_its_stored_values(files, name):
    lw = weights_io.load(files[name])
    assert lw.entries_from_exact == 0 and lw.declared_gap == 0
    steps = {x for L in lw.layers for a in L.arrays().values() for x in a.flat if x and abs(x + Fraction(1, 10)) < 1e-3}
    assert steps and Fraction(1, 10) not in {-x for x in steps}  # the stored, rounded step weight
    if name == "f16":
        assert Fraction(-0.0999755859375) in steps


@pytest.mark.parametrize("name", ["f16", "f32"])
def test_gd_weights_cast_file_is_not_proved_at_the_declared_eta(files, name, tmp_path):
    rep = tmp_path / "r.json"
    rc, out = run(["gd", "--weights", str(files[name]), *FAST, "--json", str(rep)])
    assert rc == 1, out  # eta = 1/10 from the metadata; the stored step weight is not -1/10
    assert "proof: FAILED" in out
    assert "0 entries read as declared rationals, largest gap 0" in out
    w = json.loads(rep.read_text())["weights"]
    assert w["entries_read_as_declared_rationals"] == 0 and w["declared_rational_largest_gap"] == "0"


def test_gd_weights_float64_file_still_proves_as_declared(files, tmp_path):
    rep = tmp_path / "r.json"
    rc, out = run(["gd", "--weights", str(files["f64"]), *FAST, "--json", str(rep)])
    assert rc == 0, out
    w = json.loads(rep.read_text())["weights"]
    n, gap = w["entries_read_as_declared_rationals"], Fraction(w["declared_rational_largest_gap"])
    assert n > 0 and 0 < gap < Fraction(1, 2**55)  # 1/10 - float64(1/10)
    assert gap == abs(Fraction(1, 10) - Fraction(0.1))
    assert f"{n} entries read as declared rationals, largest gap {float(gap):.2g}" in out


@pytest.mark.parametrize("name", ["f16", "f32"])
def test_import_cast_file_names_the_stored_eta(files, name, tmp_path):
    rep = tmp_path / "i.json"
    rc, out = run(["import", str(files[name]), "--from", "polyverify", "--spec", "baseconv", "--json", str(rep)])
    verdict = next(line for line in out.splitlines() if line.startswith("verdict:"))
    assert "at every depth (k = 3 in the file), eta = 1/10" not in verdict, verdict  # it does not compute 1/10
    assert "not at eta = 1/10" in verdict or rc == 1
    stored = Fraction(np.dtype(np.float16 if name == "f16" else np.float32).type(0.1).item())
    if rc == 0:
        assert str(stored) in verdict and "0 entries read as declared rationals" in verdict
    r = json.loads(rep.read_text())
    assert r["declared_rationals"]["entries"] == 0


def test_import_float64_file_reports_the_count_and_gap(files, tmp_path):
    rep = tmp_path / "i.json"
    rc, out = run(["import", str(files["f64"]), "--from", "polyverify", "--spec", "baseconv", "--json", str(rep)])
    assert rc == 0, out
    r = json.loads(rep.read_text())["declared_rationals"]
    assert r["entries"] > 0 and Fraction(r["largest_gap"]) == abs(Fraction(1, 10) - Fraction(0.1))
    assert "entries read as declared rationals, largest gap 5.6e-18" in out


def _edit_entry(src, dst, fn):
    with safe_open(str(src), framework="numpy") as fh:
        meta = fh.metadata()
    t = load_file(str(src))
    fn(t, meta)
    save_file(t, str(dst), metadata=meta)


def _step_index(path):
    """(tensor name, index) of a stored entry equal to float64(-1/10)."""
    t = load_file(str(path))
    for name, a in sorted(t.items()):
        hits = np.argwhere(a == -0.1)
        if hits.size:
            return name, tuple(int(i) for i in hits[0])
    raise AssertionError("no step weight")


def test_float64_neighbour_of_the_declared_value_is_read_as_stored(files, tmp_path):
    """One ulp off float64(q): the rational no longer stands in (old and new rule agree)."""
    name, idx = _step_index(files["f64"])
    p = tmp_path / "ulp.safetensors"

    def nudge(t, meta):
        t[name] = t[name].copy()
        t[name][idx] = np.nextafter(t[name][idx], 0.0)

    _edit_entry(files["f64"], p, nudge)
    rc, out = run(["gd", "--weights", str(p), *FAST])
    assert rc == 1 and "proof: FAILED" in out


def test_stored_zero_never_stands_for_a_declared_rational(tmp_path):
    """eta = 10^-400 rounds to 0.0 in float64: the file stores a zero step weight, so it computes
    the identity step, whatever the metadata declares (the old rule read the zero as -10^-400)."""
    con = gd_baseconv(3, 2, eta=Fraction(1, 10**400))
    k = 1
    p = weights_io.save(tmp_path / "tiny.safetensors", con, k)
    lw = weights_io.load(p)
    declared = json.loads(lw.meta["exact"])
    tiny = [e for arrs in declared.values() for es in arrs.values() for e in es
            if abs(Fraction(e[-1])) == Fraction(1, 10**400)]
    assert tiny  # the metadata declares the step weight ...
    got = {x for L in lw.layers for a in L.arrays().values() for x in a.flat}
    assert Fraction(-1, 10**400) not in got  # ... but the stored 0.0 is read as 0
    from verify.prover.proof import prove

    secs, _ = weights_io.split_sections(con, lw.layers)
    r = prove(con, sections={"prologue": secs["prologue"], "body": secs["bodies"][0], "epilogue": secs["epilogue"]})
    assert not r.ok


def test_duplicate_metadata_entry_is_refused(files, tmp_path):
    p = tmp_path / "dup.safetensors"

    def dup(t, meta):
        ex = json.loads(meta["exact"])
        arr = next(a for a in ex["0"].values() if a)
        arr.append(list(arr[0]))
        meta["exact"] = json.dumps(ex)

    _edit_entry(files["f64"], p, dup)
    with pytest.raises(weights_io.WeightFileError, match="twice"):
        weights_io.load(p)


def test_declared_stands_in_rule():
    t64 = np.array([0.1, 0.0, -0.0], dtype=np.float64)
    assert weights_io.declared_stands_in(Fraction(1, 10), t64, (0,))
    # any rational whose float64 is the stored value stands in (the gap is reported with the verdict)
    assert weights_io.declared_stands_in(Fraction(1, 10) + Fraction(1, 10**30), t64, (0,))
    assert not weights_io.declared_stands_in(Fraction(1, 10) + Fraction(1, 10**15), t64, (0,))
    assert not weights_io.declared_stands_in(Fraction(1, 10**400), t64, (1,))
    assert not weights_io.declared_stands_in(Fraction(-1, 10**400), t64, (2,))
    assert not weights_io.declared_stands_in(Fraction(10**400), t64, (0,))  # overflows float64
    for dt in (np.float16, np.float32):
        assert not weights_io.declared_stands_in(Fraction(1, 10), np.array([0.1], dtype=dt), (0,))
        # even a rational the narrow float represents exactly: only float64 tensors carry declared values
        assert not weights_io.declared_stands_in(Fraction(1, 2), np.array([0.5], dtype=dt), (0,))
