"""Random circuits and the ``python -m circuits.random`` CLI."""
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from circuits import CircuitError, dump, load, metrics, outputs, polynomials, random_circuit

ROOT = Path(__file__).resolve().parents[2]


def test_deterministic_per_seed_and_generator():
    a, b = random_circuit(5, 4, 12), random_circuit(np.random.default_rng(5), 4, 12)
    assert dump(a) == dump(b)
    assert any(dump(random_circuit(s, 4, 12)) != dump(a) for s in range(6, 9))


@given(
    seed=st.integers(0, 2**32 - 1),
    n_inputs=st.integers(0, 5),
    n_gates=st.integers(1, 15),
    max_arity=st.integers(2, 4),
    n_outputs=st.integers(1, 4),
    const_prob=st.sampled_from([0.0, 0.3, 1.0]),
)
def test_exact_counts_valid_and_nothing_pruned(seed, n_inputs, n_gates, max_arity, n_outputs, const_prob):
    n_outputs = min(n_outputs, n_gates)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a pruning warning would fail here
        g = random_circuit(seed, n_inputs, n_gates, max_arity=max_arity, const_prob=const_prob,
                           n_outputs=n_outputs, max_degree=8)
        m = metrics(g)
    assert m["n_inputs"] == n_inputs and m["n_gates"] == n_gates
    assert outputs(g) == sorted(f"y{j}" for j in range(n_outputs))
    assert m["degree"] <= 8
    arities = [sum(d["mult"] for *_, d in g.in_edges(v, data=True)) for v in g if g.nodes[v]["op"] in ("add", "mul")]
    assert all(2 <= a for a in arities) and max(arities) <= max(max_arity, 2)
    if const_prob == 0.0 and n_inputs:
        assert not any(op == "const" for _, op in g.nodes(data="op"))


def test_small_rational_constants():
    g = random_circuit(1, 3, 40, const_prob=0.5)
    vals = [v for _, v in g.nodes(data="value") if v is not None]
    assert vals and all(abs(v.numerator) <= 3 and 1 <= v.denominator <= 3 for v in vals)


def test_bad_arguments():
    with pytest.raises(CircuitError, match="n_outputs <= n_gates"):
        random_circuit(0, 2, 2, n_outputs=3)
    with pytest.raises(CircuitError, match="const_prob"):
        random_circuit(0, 2, 2, const_prob=1.5)


def run_cli(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-W", "error", "-m", "circuits.random", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def test_cli_writes_loadable_file(tmp_path):
    out = tmp_path / "c.json"
    r = run_cli("--seed", "0", "--inputs", "4", "--gates", "12", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""  # in particular no runpy double-import warning
    g = load(out)
    assert polynomials(g) == polynomials(random_circuit(0, 4, 12))
    assert nx.is_directed_acyclic_graph(g) and metrics(g)["n_gates"] == 12


def test_cli_stdout_and_errors():
    r = run_cli("--seed", "3", "--inputs", "2", "--gates", "3", "--outputs", "2")
    assert r.returncode == 0, r.stderr
    assert outputs(load(json.loads(r.stdout))) == ["y0", "y1"]
    r = run_cli("--gates", "1", "--outputs", "2")
    assert r.returncode == 2 and r.stderr.startswith("error: random_circuit:")


def test_local_circuit_outputs_read_three_neighbouring_tokens_only():
    from circuits import local_circuit

    for shared in (False, True):
        g = local_circuit(12, channels=3, gates_per=10, seed=4, shared=shared)
        assert sum(1 for _, op in g.nodes(data="op") if op in ("add", "mul")) == 12 * 10
        polys = polynomials(g)
        for t in range(12):
            toks = {int(str(s)[1:].split("_")[0]) for s in polys[f"y{t}"].free_symbols}
            assert toks and toks <= {t - 1, t, t + 1}, (t, toks)
    # blocks of one shape: interior blocks are the same polynomial up to the shift of the tokens
    g = local_circuit(8, shared=True)
    p = polynomials(g)

    def shifted(e, by):
        import sympy

        return e.xreplace({s: sympy.Symbol("x%d_%s" % (int(str(s)[1:].split("_")[0]) + by, str(s).split("_")[1]))
                           for s in e.free_symbols})

    assert all(shifted(p["y2"], k).expand() == p[f"y{2 + k}"].expand() for k in range(1, 5))


@pytest.mark.parametrize("kw, msg", [({"tokens": 1}, "tokens must be an integer >= 2"),
                                     ({"tokens": 4, "channels": 0}, "channels must be"),
                                     ({"tokens": 4, "gates_per": True}, "gates_per must be"),
                                     ({"tokens": 10**6, "gates_per": 16}, "more than")])
def test_local_circuit_bad_arguments(kw, msg):
    from circuits import local_circuit

    with pytest.raises(CircuitError, match=msg):
        local_circuit(**kw)
