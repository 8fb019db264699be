"""verify.compare on numerics.training SequenceModel exports (the gradient task): the hand-set
3-layer BaseConv of constructions.token_gradient is exact; one weight perturbed by a known amount
is seen by every metric, in the right output and with the right size."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from constructions.token_gradient import token_gradient_weights
from numerics.training.modules import save_token_gradient
from verify.compare import compare_model, main
from verify.comparison import build_construction
from verify.comparison.seqmodel import load_sequence_model

N, D = 4, 2  # 1/N dyadic: the float64 file is exact
DELTA = 2.0 ** -10
KW = dict(problems=8, iters=10, iter_sigmas=(1.0,), sigmas=(1.0, 4.0), kappas=(5.0,), scales=(1.0,))


def _perturbed(tmp_path, delta, name):
    """The hand-set model with W_out of layer 2 (r_0 -> r_0) changed by ``delta``."""
    from safetensors.numpy import load_file, save_file
    from safetensors import safe_open

    p = save_token_gradient(tmp_path / f"{name}.safetensors", N, D)
    if delta:
        t = load_file(str(p))
        with safe_open(str(p), framework="numpy") as f:
            meta = f.metadata()
        r0 = 3 * D + 2
        t["layers.1.W_out"][r0, r0] += delta
        save_file(t, str(p), metadata=meta)
    return p


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("seq")
    con = build_construction("gd-baseconv", N, D)
    return {dl: compare_model(con, load_sequence_model(_perturbed(tmp, dl, f"m{i}")), **KW)
            for i, dl in enumerate((0.0, DELTA, DELTA / 2))}


def test_hand_set_model_is_exact(reports):
    r = reports[0.0]
    for row in r["functional"]["predictions"]:
        assert row["max_abs"] < 1e-12 * max(1.0, row["rms_constructed_prediction"])
    assert all(s["cosine_min"] == pytest.approx(1.0, abs=1e-12) for s in r["sensitivities"])
    pm = r["polynomial_model"]
    assert pm["finished"] and len(pm["outputs"]) == D
    for e in pm["outputs"]:
        assert e["true_monomials"]["error_mass"] == 0 and e["spurious_monomials"]["count"] == 0
        assert e["float_forward_check"] < 1e-12
    it = r["iterate"][0]
    np.testing.assert_allclose(it["curve_learned"], it["curve_constructed"], rtol=1e-9)


def test_perturbation_seen_in_output_0_only_and_linear_in_delta(reports):
    a, b = reports[DELTA], reports[DELTA / 2]
    pa, pb = a["polynomial_model"]["outputs"], b["polynomial_model"]["outputs"]
    # r_0 = a_i0 r_i is only read by output 0: its true monomials change by exactly (1 / N) delta
    assert pa[0]["true_monomials"]["error_max"] == pytest.approx(DELTA / N, rel=1e-15)
    assert pa[0]["true_monomials"]["error_mass"] == pytest.approx(2 * pb[0]["true_monomials"]["error_mass"], rel=1e-12)
    assert pa[0]["spurious_monomials"]["count"] == 0
    assert pa[1]["true_monomials"]["error_mass"] == 0 and pa[1]["spurious_monomials"]["count"] == 0
    for x, y in zip(a["functional"]["predictions"], b["functional"]["predictions"]):
        assert x["rms"] / y["rms"] == pytest.approx(2.0, rel=1e-6)
    for x, y in zip(a["sensitivities"], b["sensitivities"]):
        assert 0 < x["l2_mean"] and x["l2_mean"] / y["l2_mean"] == pytest.approx(2.0, rel=1e-6)


def test_token_gradient_weights_reject_bad_sizes():
    with pytest.raises(ValueError, match="N >= 1"):
        token_gradient_weights(0, 2)


def test_token_gradient_float_forward_is_the_gradient():
    m = token_gradient_weights(3, 2)
    rng = np.random.default_rng(1)
    A, b, x = rng.standard_normal((5, 3, 2)), rng.standard_normal((5, 3)), rng.standard_normal((5, 2))
    u = np.zeros((5, 4, 6))
    u[:, :3, :2], u[:, :3, 2], u[:, 3, 3:5], u[:, 3, 5] = A, b, x, 1.0
    S = u @ np.asarray(m["embed"], dtype=float).T
    for L in m["layers"]:
        S = L.map(lambda a: np.asarray(a, dtype=float)).forward(S)
    out = S[:, 3] @ np.asarray(m["readout"], dtype=float).T
    want = np.einsum("bnd,bn->bd", A, np.einsum("bnd,bd->bn", A, x) - b) / 3
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)


def test_cli_on_a_sequence_model_and_bad_task(tmp_path):
    p = save_token_gradient(tmp_path / "g.safetensors", N, D)
    rc = main(["--learned", str(p), "--construction", "gd-baseconv", "--out", str(tmp_path / "o"),
               "--problems", "4", "--iters", "5", "--iter-sigmas", "1", "--skip", "polynomial"])
    assert rc == 0
    md = (tmp_path / "o" / "report.md").read_text()
    assert "Not applicable to this model" in md and "exact gradient" in md
    # a MULTIPLY model is not a gradient model: one line, exit 2
    from numerics.training.modules import ModelConfig, SequenceModel, export_weights

    torch.manual_seed(0)
    mm = SequenceModel(ModelConfig(model="baseconv", T=6, d_in=4, d_out=2, width=4, layers=1)).double()
    q = export_weights(mm, tmp_path / "mul.safetensors", name="trained-baseconv-multiply")
    r = subprocess.run([sys.executable, "-m", "verify.compare", "--learned", str(q), "--construction",
                        "gd-baseconv", "--out", str(tmp_path / "o2")], capture_output=True, text=True,
                       cwd=str(Path(__file__).parents[2]))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "only explicit-gradient models" in lines[0]
