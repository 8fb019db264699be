"""polyverify/torch.py: a construction or a weight file as a torch module whose forward is
``Construction.run`` in float64, with trainable parameters and the state's layout."""
from __future__ import annotations

import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="polyverify.torch builds torch modules")

import circuits as C  # noqa: E402
from constructions.base import to_float_array  # noqa: E402
from constructions.catalogue import gd_architectures  # noqa: E402
from constructions.compiler import TARGETS, compile_circuit  # noqa: E402
from constructions.weights_io import save  # noqa: E402
from polyverify.torch import ConstructionModule, load_module  # noqa: E402

N, D, K = 5, 2, 3


def _inputs(con, batch=3, seed=0):
    rng = np.random.default_rng(seed)
    return {n: rng.standard_normal((batch,) + tuple(s)) for n, s in con.variables.items()}


def _float_run(con, v, k):
    return con.run(v, k, cast=lambda L: L.map(lambda a: to_float_array(a, np.float64)))[0]


def _close(a, b, tol=1e-12):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and float(np.abs(a - b).max()) <= tol * max(1.0, float(np.abs(b).max()))


@pytest.mark.parametrize("arch", list(gd_architectures()))
def test_every_gd_architecture_runs_as_construction_run_in_float64(arch):
    con = gd_architectures()[arch].build(N, D)
    m = load_module(con, K)
    assert isinstance(m, ConstructionModule) and len(m.blocks) == con.depth(K) and m.k == K
    v = _inputs(con)
    S = m.input_state(v)
    assert S.dtype == torch.float64 and tuple(S.shape) == (3,) + tuple(con.layout.shape)
    assert _close(S.numpy(), con.input_state(v), 0)
    out = m(S)
    assert tuple(out.shape) == (3,) + tuple(con.layout.shape)
    assert _close(out.detach().numpy(), _float_run(con, v, K))


def test_the_module_is_the_exact_run_up_to_float64_roundoff():
    con = gd_architectures()["baseconv"].build(N, D)
    rng = np.random.default_rng(1)
    v1 = {n: rng.integers(-3, 4, size=s) / 4 for n, s in con.variables.items()}  # dyadic: exact in float64
    exact, _ = con.run({n: np.vectorize(Fraction, otypes=[object])(a) for n, a in v1.items()}, K)
    m = load_module(con, K)
    out = m(m.input_state({n: a[None] for n, a in v1.items()}))[0].detach().numpy()
    ref = np.vectorize(float, otypes=[float])(exact)
    assert _close(out, ref, 1e-13)


@pytest.mark.parametrize("target", list(TARGETS))
def test_a_compiled_circuit_runs_to_its_outputs(target):
    g = C.gd_step(3, 2, Fraction(1, 16), placed=True)
    con = compile_circuit(g, name="gd", target=target)
    m = load_module(con)  # no body: no k
    rng = np.random.default_rng(2)
    v = {n: rng.integers(-4, 5, size=(2,)) / 4 for n in C.inputs(g)}
    out = m(m.input_state(v))
    assert _close(out.detach().numpy(), _float_run(con, v, 0))
    got = m.readout(out)
    want = C.evaluate(g, {n: a for n, a in v.items()})
    assert set(got) == set(want) and all(_close(got[n].detach().numpy(), want[n]) for n in want)


def test_parameters_train_and_go_back_to_toolkit_layers():
    con = gd_architectures()["token-lsa"].build(N, D)
    m = load_module(con, 2)
    ps = list(m.parameters())
    assert ps and all(p.requires_grad for p in ps)
    assert sum(p.numel() for p in ps) == 2 * sum(a.size for a in con.body[0].arrays().values())
    v = _inputs(con)
    S = m.input_state(v)
    loss = m(S).pow(2).mean()
    loss.backward()
    assert any(p.grad is not None and bool(p.grad.abs().sum() > 0) for p in ps)
    before = m(S).detach().clone()
    with torch.no_grad():
        for p in ps:
            p -= 1e-3 * p.grad
    after = m(S).detach()
    assert not torch.equal(before, after)
    layers = m.layers()  # the trained weights as toolkit layers: their float run is the module's
    S2 = S.numpy()
    for L in layers:
        S2 = L.forward(S2)
    assert len(layers) == 2 and _close(S2, after.numpy())


def test_shared_body_copies_are_one_set_of_parameters():
    con = gd_architectures()["baseconv"].build(N, D)
    m = load_module(con, 4, shared=True)
    per = {id(b) for b in m.blocks}
    assert len(m.blocks) == con.depth(4) and len(per) == len(con.body) + len(con.prologue) + len(con.epilogue)
    v = _inputs(con)
    assert _close(m(m.input_state(v)).detach().numpy(), _float_run(con, v, 4))


def test_a_weight_file_loads_with_its_layout(tmp_path):
    con = gd_architectures()["elsa"].build(N, D)
    path = tmp_path / "w.safetensors"
    save(path, con, 3)
    m = load_module(path)
    assert len(m.blocks) == con.depth(3) and m.k == 3 and m.state_shape == tuple(con.layout.shape)
    assert set(m.layout.regions) == set(con.layout.regions)
    assert all(f"  {r}: rows " in m.describe() for r in con.layout.regions)
    v = _inputs(con)
    S = torch.as_tensor(con.input_state(v))
    assert _close(m(S).detach().numpy(), _float_run(con, v, 3))
    m1 = load_module(path, k=1)
    assert len(m1.blocks) == con.depth(1) and _close(m1(S).detach().numpy(), _float_run(con, v, 1))
    with pytest.raises(ValueError, match="no input map"):
        m.input_state(v)
    with pytest.raises(ValueError, match="holds 3 body copies"):
        load_module(path, k=4)
    shared = load_module(path, shared=True)
    assert len({id(b) for b in shared.blocks}) == len(con.body) + len(con.prologue) + len(con.epilogue)


def test_float32_parameters_are_each_entry_rounded_once():
    con = gd_architectures()["lsa"].build(N, D)
    m = load_module(con, 2, dtype=torch.float32)
    assert all(p.dtype == torch.float32 for p in m.parameters())
    v = _inputs(con)
    out = m(m.input_state(v)).detach().numpy()
    assert _close(out, _float_run(con, v, 2), 1e-5)


def test_bad_input_is_one_line():
    con = gd_architectures()["baseconv"].build(N, D)
    with pytest.raises(ValueError, match="pass k") as e:
        load_module(con)
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="k must be an integer"):
        load_module(con, -1)
    with pytest.raises(TypeError, match="Construction or a weight file"):
        load_module(3)
    m = load_module(con, 1)
    with pytest.raises(ValueError, match=r"acts on \(batch, 6, 12\) states") as e:
        m(torch.zeros(2, 6, 11, dtype=torch.float64))
    assert "\n" not in str(e.value)


def test_import_polyverify_does_not_import_torch():
    code = "import sys, polyverify, polyverify.plumbing.cli; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("arch", sorted(gd_architectures()))
def test_torch_save_of_a_module_round_trips(arch, tmp_path):
    """``torch.save(module)`` works (a construction's ``rebuild`` was a local lambda, which pickle refuses)
    and the module loaded back computes what the saved one does."""
    con = gd_architectures()[arch].build(n=4, d=2)
    m = load_module(con, k=2)
    torch.save(m, tmp_path / "m.pt")
    m2 = torch.load(tmp_path / "m.pt", weights_only=False)
    S = torch.randn(3, *con.layout.shape, dtype=torch.float64)
    assert torch.equal(m(S), m2(S))
