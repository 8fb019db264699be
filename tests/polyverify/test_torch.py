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


def test_a_bias_the_same_on_every_token_is_one_row_and_a_bias_matrix_stays_a_matrix():
    """gd-baseconv's biases are constant across tokens: parameters (1, C), expanded in forward (the
    forward is the construction's, above); gd-baseconv-causal has position-dependent bias matrices
    (seed 000 Def. D.20): those stay (T, C) parameters."""
    for arch, want_rows in (("baseconv", {1}), ("baseconv-causal", {1, N + 1})):
        con = gd_architectures()[arch].build(N, D)
        m = load_module(con, 1)
        rows = set()
        for b, L in zip(m.blocks, con.layers(1)):
            for n in ("b_in", "b_conv", "b_gate", "b_out"):
                p = b.weights[n]
                B = np.asarray(getattr(L, n))
                assert p.shape == ((1, B.shape[1]) if (B == B[0:1]).all() else B.shape)
                rows.add(p.shape[0])
                assert _close(b.array(n).detach().numpy(), to_float_array(B, np.float64), 0)
        assert rows == want_rows


def test_sections_split_the_stack_as_the_construction_does():
    con = gd_architectures()["baseconv"].build(N, D)
    m = load_module(con, 3)
    s = m.sections()
    p, b, e = len(con.prologue), len(con.body), len(con.epilogue)
    assert (len(s.prologue), len(s.bodies), len(s.epilogue)) == (p, 3, e) and all(len(x) == b for x in s.bodies)
    flat = list(s.prologue) + [L for x in s.bodies for L in x] + list(s.epilogue)
    for L, W in zip(flat, con.layers(3)):
        assert L.kind == W.kind and L.config() == W.config()
        assert all(_close(a, to_float_array(np.asarray(W.arrays()[n]), np.float64), 0) for n, a in L.arrays().items())
    ex = m.exact_sections()  # untouched: every entry the construction's own rational
    assert all(bool((np.asarray(x.arrays()[n], dtype=object) == np.asarray(W.arrays()[n], dtype=object)).all())
               for x, W in zip(list(ex.prologue) + [L for y in ex.bodies for L in y] + list(ex.epilogue),
                               con.layers(3)) for n in W.arrays())
    shared = load_module(con, 3, shared=True).sections()
    assert all(x is y for x, y in zip(shared.bodies[0], shared.bodies[2]))


def test_a_trained_unshared_module_saves_and_loads_back(tmp_path):
    """``torch.save(module)`` / ``torch.load(..., weights_only=False)`` after Adam steps on an
    unshared module: the same forward, parameters and sections (its body copies differ)."""
    con = gd_architectures()["baseconv"].build(4, 2)
    m = load_module(con, 2)
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    S = torch.randn(4, *con.layout.shape, dtype=torch.float64)
    for _ in range(3):
        opt.zero_grad()
        m(S).pow(2).mean().backward()
        opt.step()
    torch.save(m, tmp_path / "m.pt")
    m2 = torch.load(tmp_path / "m.pt", weights_only=False)
    assert torch.equal(m(S), m2(S))
    assert m.state_dict().keys() == m2.state_dict().keys()
    assert all(torch.equal(a, b) for a, b in zip(m.state_dict().values(), m2.state_dict().values()))
    s, s2 = m.sections(), m2.sections()
    assert any(not np.array_equal(a.arrays()[n], b.arrays()[n]) for a, b in zip(*s.bodies) for n in a.arrays())
    assert all(np.array_equal(a.arrays()[n], b.arrays()[n]) for x, y in zip(s.bodies, s2.bodies)
               for a, b in zip(x, y) for n in a.arrays())


def test_frozen_arrays_are_buffers_at_the_construction_values():
    con = gd_architectures()["baseconv"].build(N, D)
    m = load_module(con, 1, frozen={"W_in", "b_in"})
    names = {n.split(".")[-1] for n, _ in m.named_parameters()}
    assert "W_in" not in names and "b_in" not in names and "W_out" in names
    assert any(n.endswith("fixed__W_in") for n, _ in m.named_buffers())
    v = _inputs(con)
    assert _close(m(m.input_state(v)).detach().numpy(), _float_run(con, v, 1))
    m2 = load_module(con, 1, frozen=lambda L, n: n == "h")
    assert all("h" not in b.weights for b in m2.blocks)
