"""Every exact proof of the CLIs runs bounded (``verify/bounded.py``).

``gd --weights``, ``gd`` and ``import`` prove in a child process under ``--proof-memory-gib`` and
``--proof-timeout`` (before: in-process, and a 165 KB all-ones weight file, N=20, D=5, made FLINT
abort the process with SIGABRT, exit 134, at 4.9 GB); past a limit: exit 2, one line naming it.
The circuit command estimates its proof's work from the circuit and refuses, up front, one that
cannot finish within ``--proof-timeout``.

The all-ones file is refuted at once since the proof refutes first (``verify/prover/refute.py``:
FAILED, exit 1, within these limits; ``tests/verify/prover/test_refute.py``); the tests of the limits
themselves run the exact proof alone (``exact_only``).
"""
from __future__ import annotations

import io
import json
import time
from fractions import Fraction

import networkx as nx
import numpy as np
import pytest

import circuits as C
from verify.bounded import DEFAULT_MEMORY_GIB, DEFAULT_TIMEOUT_S, circuit_estimate
from verify.construct import main as construct_main


@pytest.fixture(scope="module")
def ones_file(tmp_path_factory):
    """A gd --export file (N=20, D=5, 4 layers) with every stored entry set to 1, metadata kept
    (the issue's file, with its exact rationals: none of them matches a stored 1)."""
    from safetensors import safe_open
    from safetensors.numpy import save_file

    d = tmp_path_factory.mktemp("ones")
    good = d / "good.safetensors"
    assert construct_main(["gd", "--layers", "4", "--batch", "2", "--quiet", "--export", str(good)],
                          out=io.StringIO()) == 0
    with safe_open(str(good), "np") as f:
        meta = f.metadata()
        tensors = {k: np.ones_like(f.get_tensor(k)) for k in f.keys()}
    ones = d / "ones.safetensors"
    save_file(tensors, str(ones), metadata=meta)
    return good, ones


@pytest.fixture
def exact_only(monkeypatch):
    """The exact proof without the refutation first (the child is forked: it sees the patch)."""
    import verify.prover.proof as proof

    monkeypatch.setattr(proof, "_refutation", lambda *a, **k: None)


def _run(argv, capsys):
    t0 = time.perf_counter()
    rc = construct_main(argv, out=io.StringIO())
    err = capsys.readouterr().err
    return rc, err, time.perf_counter() - t0


def test_gd_weights_past_the_memory_limit_is_one_line(ones_file, capsys, exact_only):
    _, ones = ones_file
    rc, err, dt = _run(["gd", "--weights", str(ones), "--batch", "2", "--quiet", "--proof-memory-gib", "0.25"],
                       capsys)
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err and "FLINT" not in err, err
    assert "the exact proof stopped: reached the memory limit (0.25 GiB)" in err and "--proof-memory-gib" in err
    assert dt < 60


def test_gd_weights_past_the_time_limit_is_one_line(ones_file, capsys, exact_only):
    _, ones = ones_file
    rc, err, dt = _run(["gd", "--weights", str(ones), "--batch", "2", "--quiet", "--proof-timeout", "1"], capsys)
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert "did not finish within the time limit (1 s)" in err and "--proof-timeout" in err
    assert dt < 30


def test_import_past_the_memory_limit_is_one_line(ones_file, capsys, exact_only):
    _, ones = ones_file
    rc, err, dt = _run(["import", str(ones), "--from", "polyverify", "--spec", "gd-baseconv",
                        "--proof-memory-gib", "0.25"], capsys)
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert "reached the memory limit (0.25 GiB)" in err and "--proof-memory-gib" in err


def test_a_good_file_still_proves_in_the_child_with_its_output(ones_file, tmp_path, capsys):
    good, _ = ones_file
    out = io.StringIO()
    assert construct_main(["gd", "--weights", str(good), "--batch", "2", "--quiet"], out=out) == 0
    assert "proof: PROVED" in out.getvalue()
    out = io.StringIO()
    rep = tmp_path / "r.json"
    assert construct_main(["import", str(good), "--from", "polyverify", "--spec", "gd-baseconv",
                           "--json", str(rep)], out=out) == 0
    assert "verdict: PROVED" in out.getvalue() and json.loads(rep.read_text())["verdict"]["ok"]
    assert capsys.readouterr().err == ""


def test_a_failed_proof_crosses_the_process_boundary(tmp_path, ones_file):
    """A FAILED verdict (with its counterexample) comes back from the child: exit 1, not 2."""
    from safetensors import safe_open
    from safetensors.numpy import save_file

    good, _ = ones_file
    with safe_open(str(good), "np") as f:
        meta = f.metadata()
        t = {k: f.get_tensor(k) for k in f.keys()}
    k = sorted(t)[0]
    t[k] = t[k].copy()
    t[k].flat[0] += 0.5
    bad = tmp_path / "bad.safetensors"
    save_file(t, str(bad), metadata=meta)
    out = io.StringIO()
    assert construct_main(["gd", "--weights", str(bad), "--batch", "2", "--quiet"], out=out) == 1
    assert "proof: FAILED" in out.getvalue() and "counterexample" in out.getvalue().lower()


@pytest.mark.parametrize("cmd", [["gd", "--layers", "4"], ["circuit", "--graph", "x.json"],
                                 ["import", "x.pt", "--from", "zoology", "--spec", "baseconv"],
                                 ["s000-read"]])
@pytest.mark.parametrize("flag,value,msg", [("--proof-memory-gib", "nan", "finite"),
                                            ("--proof-memory-gib", "0.1", ">= 0.25"),
                                            ("--proof-memory-gib", "2000", "exceeds the limit 1024"),
                                            ("--proof-timeout", "0", ">= 1"),
                                            ("--proof-timeout", "inf", "finite")])
def test_limit_options_are_checked_before_any_work(cmd, flag, value, msg, capsys):
    rc, err, dt = _run(cmd + [flag, value], capsys)
    assert rc == 2 and err.count("\n") == 1 and flag in err and msg in err, err


def test_defaults_fit_a_24_gib_machine():
    assert DEFAULT_MEMORY_GIB <= 8 and DEFAULT_TIMEOUT_S <= 600
    from verify.construct import build_parser

    p = build_parser()
    for argv in (["gd", "--layers", "4"], ["circuit", "--graph", "x"], ["import", "f", "--from", "zoology",
                                                                          "--spec", "baseconv"]):
        a = p.parse_args(argv)
        assert (a.proof_memory_gib, a.proof_timeout) == (DEFAULT_MEMORY_GIB, DEFAULT_TIMEOUT_S)


def _power_of_sum(path, v: int, d: int):
    g = nx.DiGraph()
    for i in range(1, v + 1):
        g.add_node(f"x{i}", op="input", name=f"x{i}")
        g.add_edge(f"x{i}", "s")
    g.nodes["s"]["op"] = "add"
    g.add_node("p", op="mul", output="y")
    g.add_edge("s", "p", mult=d)
    C.dump(g, path)
    return path


def test_the_estimate_of_a_power_of_a_sum_is_the_compilers_product():
    """(x1+...+x10)^20: the output has C(29, 9) = 10,015,005 terms; the compiler's tree ends with
    s^8 * s^12, 24,310 x 293,930 term products (measured: 107 s of the 111 s proof here)."""
    gg = nx.DiGraph()
    for i in range(10):
        gg.add_node(i, op="input", name=f"x{i}")
        gg.add_edge(i, "s")
    gg.nodes["s"]["op"] = "add"
    gg.add_node("p", op="mul", output="y")
    gg.add_edge("s", "p", mult=20)
    est = circuit_estimate(C.validate(gg))
    assert est["degree"] == 20 and est["terms"] == pytest.approx(10_015_005, rel=1e-9)
    assert 24_310 * 293_930 <= est["work"] <= 1.01 * 24_310 * 293_930


def test_circuit_refused_up_front_when_its_proof_cannot_finish(tmp_path, capsys):
    """(x1+...+x10)^40 (inside every structural limit) would take hours: refused in well under a
    second at the defaults, with the estimate; (x1+...+x10)^20 (about 2 minutes here) under
    --proof-timeout 10."""
    for d, extra in ((40, []), (20, ["--proof-timeout", "10"])):
        path = _power_of_sum(tmp_path / f"pow{d}.json", 10, d)
        rc, err, dt = _run(["circuit", "--graph", str(path)] + extra, capsys)
        assert rc == 2 and err.count("\n") == 1 and dt < 1.0, (err, dt)
        assert "would not finish within the time limit: estimated degree" in err and "term products" in err
        assert "--proof-timeout" in err


def test_documented_circuits_pass_the_estimate(tmp_path):
    """The builders' circuits and a random 10,000-gate circuit (docs/performance.md) are accepted:
    their estimated proof time is far below the default limit."""
    from circuits.random import random_circuit

    eta, lam = Fraction(1, 16), Fraction(1, 10)
    for g in (C.gd_step(8, 4, eta, placed=True), C.ridge_gd_step(6, 3, eta, lam), C.matvec(8, 8), C.dot(16),
              C.horner(list(range(1, 13))), C.newton_schulz_step(4, 8),
              random_circuit(0, n_inputs=20, n_gates=10_000, n_outputs=8)):
        est = circuit_estimate(g)
        assert est["seconds"] < DEFAULT_TIMEOUT_S / 100, est


def test_a_catalogue_entry_proves_in_the_child_and_stops_at_its_limit(monkeypatch, capsys):
    """``verify.construct NAME`` proves under the same limits: a proof that stops at the memory
    limit in the child (as FLINT's abort does) is one line naming it, exit 2."""
    import os

    import verify.prover.proof as proof

    assert _run(["s000-read"], capsys)[0] == 0
    parent = os.getpid()

    def dies_in_the_child(obj):
        assert os.getpid() != parent, "the catalogue proof ran in the command's own process"
        os.abort()  # what FLINT does when an allocation fails

    monkeypatch.setattr(proof, "check", dies_in_the_child)
    import verify.catalogue_cmd as cc

    monkeypatch.setattr(cc, "check", dies_in_the_child)
    rc, err, _ = _run(["s000-read", "--proof-memory-gib", "1"], capsys)
    assert rc == 2 and err.count("\n") == 1 and "s000-read: the exact proof stopped" in err, err
    assert "--proof-memory-gib" in err and "Traceback" not in err
