"""numerics.training.construction_task: a body with the construction's layer structure, trained
for one GD step, exported as a weight file that verify.compare accepts."""
from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import torch

from constructions import weights_io
from numerics.training.construction_task import (ConstructionTaskConfig, build, init_body, learned_body,
                                                 region_mask, sample_states, train)


def test_construction_init_without_noise_is_exact_step():
    con = build("gd-baseconv", 3, 2)
    model = init_body(con, "construction", noise=0.0)
    S, Y = sample_states(con, 8, np.random.default_rng(0))
    with torch.no_grad():
        out = model(torch.as_tensor(S)).numpy()
    assert np.abs(out - Y).max() < 1e-12
    # exported body = the construction's exact weights again (eta = 1/16 is a binary fraction)
    for L, C in zip(learned_body(model), con.body):
        assert weights_io.same_layer(L, C)


def test_region_masks():
    con = build("gd-lsa", 3, 2)
    m = region_mask(con, "x")
    assert m.sum() == 2 and m[:2, -1].all()
    con = build("gd-baseconv", 3, 2)
    assert region_mask(con, "x").sum() == 4 * 2 and region_mask(con, "state").all()


def test_train_from_construction_plus_noise_and_export(tmp_path):
    from verify.comparison import build_construction, load_learned

    cfg = ConstructionTaskConfig(construction="gd-baseconv", n=3, d=2, init="construction", noise=1e-2,
                                 steps=300, batch=64, eval_every=100, eval_batch=256, k=2,
                                 scheduler="adaptive", metric_every=100, metric_batches=4, seed=1)
    res = train(cfg, tmp_path)
    assert res["final_test_mse"] < 0.1 * res["initial_test_mse"]
    hist = json.loads((tmp_path / "history.json").read_text())
    assert hist[0]["step"] == 0 and hist[-1]["step"] == 300
    assert (tmp_path / "loss.png").stat().st_size > 0
    # the exported file: construction layout, k = 2 learned body copies + the construction's epilogue
    con = build_construction("gd-baseconv", 3, 2)
    st = load_learned(tmp_path / "weights.safetensors", con)
    assert st.k == 2 and len(st.layers) == 1 + 3 * 2
    assert weights_io.same_layer(st.epilogue[0], con.epilogue[0])
    body = learned_body(res["model"])
    for j in range(2):
        for L, M in zip(st.bodies[j], body):
            assert weights_io.same_layer(L, M)
    # exact binary fractions of the trained float64 values
    W = st.bodies[0][0].W_out
    w = res["model"].blocks[0].W_out.detach().numpy()
    assert all(isinstance(x, (Fraction, int)) and float(x) == y for x, y in zip(W.flat, w.flat))
    assert not weights_io.same_layer(st.bodies[0][0], con.body[0])
