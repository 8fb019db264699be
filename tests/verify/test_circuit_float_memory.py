"""The circuit command's float64 trials (issue 43 item 3): planned layers (never a dense T x T x C
Toeplitz array), their memory estimated from the compiled stack before the proof and bounded (skipped
in one line naming the bound), and never a traceback after the verdict."""
import io
import json
import tracemalloc

import pytest

import circuits as C
from circuits.random import local_circuit
from constructions.compiler import compile_circuit
from verify import circuit_cmd
from verify.circuit_cmd import _planned, float_trial_bytes, float_trials
from verify.construct import main


@pytest.fixture(scope="module")
def local10k_graph():
    return local_circuit(625)  # 625 tokens x 16 gates = 10,000 gates


@pytest.fixture(scope="module")
def local10k(local10k_graph):
    """The graph and its compile, made once per test process (the command's test needs only the graph: the
    command compiles it itself, so a process that runs only that test never compiles it here)."""
    return local10k_graph, compile_circuit(local10k_graph, target="baseconv")


def test_float_trials_of_a_10k_gate_local_circuit_stay_within_their_estimate(local10k):
    g, con = local10k
    assert sum(1 for _, op in g.nodes(data="op") if op in ("add", "mul")) == 10_000
    T, Cw = con.layout.shape
    n = 8
    est = float_trial_bytes(con, n)
    dense = 8 * T * T * Cw  # the (T, T, C) Toeplitz array of one layer's direct convolution
    assert est < dense / 4 and est < 2**30, (est, dense)
    # no planned layer holds a (T, T) kernel for more than a few channels
    for L in {id(L): L for L in con.layers(0)}.values():
        P = _planned(L).__dict__["_plan"]
        assert P.conv.K is None or P.conv.K.shape[-1] * FEW <= Cw
    tracemalloc.start()
    try:
        err, non_finite = float_trials(g, con, C.inputs(g), n, 0, False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= est, (peak, est)
    assert non_finite == 0 and err < 1e-10


FEW = 8  # a planned layer's Toeplitz channels are at most an eighth of its channels here


def test_estimate_counts_the_toeplitz_kernel_of_a_dense_filter():
    from fractions import Fraction

    from constructions.layers import BaseConv

    g = local_circuit(40)
    con = compile_circuit(g, target="baseconv")
    T, Cw = con.layout.shape
    base = float_trial_bytes(con, 4)
    L = con.layers(0)[0]
    h = L.h.copy()
    h[:, 0] = [Fraction(i + 1) for i in range(T)]  # a channel with every tap nonzero and distinct
    con.epilogue = [BaseConv(**dict(L.arrays(), h=h), causal=L.causal, residual=L.residual)] + list(con.layers(0)[1:])
    assert float_trial_bytes(con, 4) >= base + 8 * T * T


def _cli(argv):
    out = io.StringIO()
    return main(argv, out=out), out.getvalue()


def test_skipped_float_trials_are_one_line_after_proved(tmp_path, monkeypatch):
    f, rep = tmp_path / "local.json", tmp_path / "r.json"
    C.dump(local_circuit(6), f)
    monkeypatch.setattr(circuit_cmd, "float_trial_bytes", lambda con, n: 2**50)
    rc, text = _cli(["circuit", "--graph", str(f), "--trials", "8", "--json", str(rep)])
    assert rc == 0 and "proof: PROVED" in text
    line = [ln for ln in text.splitlines() if ln.startswith("float64 trials: skipped:")]
    assert len(line) == 1 and "above the bound 8.0 GiB (--proof-memory-gib" in line[0], text
    d = json.loads(rep.read_text())["float64_trials"]
    assert d["n"] == 0 and d["max_relative_error"] is None and "above the bound" in d["skipped"]


def test_out_of_memory_in_the_float_run_is_one_line(tmp_path, monkeypatch):
    f = tmp_path / "local.json"
    C.dump(local_circuit(6), f)

    def oom(*args, **kw):
        raise MemoryError("Unable to allocate")

    monkeypatch.setattr(circuit_cmd, "float_trials", oom)
    rc, text = _cli(["circuit", "--graph", str(f), "--trials", "8"])
    assert rc == 0 and "proof: PROVED" in text
    assert "float64 trials: skipped: the float64 run of 8 trials ran out of memory" in text
    assert "Traceback" not in text


def test_the_command_on_a_10k_gate_local_circuit_under_a_3_gib_address_space_limit(tmp_path, local10k_graph):
    """The whole command (compile, proof, modular and float64 trials) under ``RLIMIT_AS`` = 3 GiB: before
    the planned float run its dense (625, 625, C) Toeplitz arrays peaked at 4.6 GB and ended in a
    traceback after PROVED."""
    import resource
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    f, rep = tmp_path / "local.json", tmp_path / "r.json"
    C.dump(local10k_graph, f)
    limit = 3 * 2**30
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY and hard < limit:
        limit = hard

    def lowered():
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))

    p = subprocess.run([sys.executable, "-m", "verify.construct", "circuit", "--graph", str(f), "--trials", "8",
                        "--json", str(rep)], cwd=root, capture_output=True, text=True, timeout=900,
                       preexec_fn=lowered)
    assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-2000:])
    assert "proof: PROVED" in p.stdout and "Traceback" not in p.stderr
    d = json.loads(rep.read_text())["float64_trials"]
    assert d["n"] == 8 and d["max_relative_error"] < 1e-10


def test_blocks_of_a_shared_shape_compile_to_channels_that_do_not_grow_with_the_tokens():
    for ra in (False, None):
        widths = {T: compile_circuit(local_circuit(T, shared=True), target="baseconv", reassociate=ra)
                  .info["compiled"]["state_width"] for T in (20, 40, 80)}
        assert len(set(widths.values())) == 1, (ra, widths)
