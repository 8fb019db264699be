"""Seed 000 Table 7: the (k + 2)-layer, width-32 training model can express the k-th GD iterate."""
import numpy as np
import pytest
import torch

from numerics.experiments import seed000_table7 as t7


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_table7_exact_weights_compute_x_k(k):
    """The hand-built weights put the training model (k + 2 layers, width 32, as in the grid) on
    x_k: in float64 (float32 weights) and float32 far below the precision criterion; the failure of the learned
    k >= 2 models to go beyond one product with M is therefore one of optimisation, not of the model."""
    from numerics.training.modules import ModelConfig
    from numerics.training.trainer import TaskConfig, TrainConfig, Trainer

    torch.set_num_threads(1)
    cfg = TrainConfig(task=TaskConfig(name="iterate", k=k), model=ModelConfig(width=32, layers=k + 2),
                      steps=1, batch=4, eval_batch=8, seed=1, dtype="float32")
    tr = Trainer(cfg, None, progress=False)
    t7.exact_weights(tr.model, k, tr.task.eta)
    assert tr.evaluate(512, stream_idx=5, float64=True) < 1e-12  # the weights rounded to float32 (eta / N)
    assert tr.evaluate(512, stream_idx=5) < 1e-10


def test_table7_exact_weights_check_the_shape():
    from numerics.training.modules import ModelConfig, SequenceModel

    with pytest.raises(ValueError, match="width"):
        t7.exact_weights(SequenceModel(ModelConfig(width=16, layers=4)), 2, 1.0)
    with pytest.raises(ValueError, match="layers"):
        t7.exact_weights(SequenceModel(ModelConfig(width=32, layers=3)), 2, 1.0)


def test_table7_perturbed_exact_weights_move():
    from numerics.training.modules import ModelConfig, SequenceModel

    m = SequenceModel(ModelConfig(width=32, layers=3))
    t7.exact_weights(m, 1, 0.5, perturb=1e-3, seed=2)
    w = m.blocks[0].mixer.W_gate.detach().numpy()
    assert 0 < np.abs(w[5, 0] - 1) < 1e-2 and np.abs(w).max() < 2


def test_table7_warm_start_cells_are_separate_runs_and_not_criteria():
    """The grid's warm-start cells (``WARM``) get their own summary keys, never stand in for the
    random-initialisation runs the criteria read, and the report states what they reached."""
    warm = [c for c in t7.configs(False) if c.get("init") == "exact"]
    assert sorted((c["k"], c.get("lr") or 0) for c in warm) == sorted((k, lr or 0) for k in t7.WARM["ks"]
                                                                       for lr in t7.WARM["lrs"])
    assert all(c["perturb"] > 0 for c in warm)
    # the recipe's-lr warm cells carry no lr key: their results from before WARM["lrs"] stay valid
    assert sum("lr" not in c for c in warm) == len(t7.WARM["ks"])
    assert t7.run_name({"recipe": "paper", "k": 2, "init": "exact"}) == "paper-k2-warm"
    assert t7.run_name({"recipe": "paper", "k": 2}) == "paper-k2"

    def run(k, mse, init="random", start=None):
        return {"k": k, "recipe": "paper", "init": init, "perturb": 3e-4 if init == "exact" else 0.0,
                "start_test_mse": start, "final_test_mse": mse, "steps": 200,
                "history": [{"step": 100, "test_mse": mse * 3}, {"step": 200, "test_mse": mse}]}
    runs = {f"paper-k{k}": run(k, 0.1) for k in (1, 2, 3, 4)}
    before = {c["id"]: c["met"] for c in t7.criteria({"runs": runs})}
    runs["paper-k2-warm"] = run(2, 5e-8, "exact", 1e-3)
    assert {c["id"]: c["met"] for c in t7.criteria({"runs": runs})} == before
    text = t7._warm_sentence(runs)
    assert "at lr 0.005 (the recipe's): k = 2: 0.001 at the start, 5.00e-08 after 200 steps (2e+04x below its start" in text
    assert "within the precision criterion's bound" in text and "2.00e+06x below the run from random initialisation" in text
    assert "Near the exact solution the recipe keeps or reaches the precision" in text
    runs["paper-k2-warm"]["final_test_mse"] = 1e-2
    text = t7._warm_sentence(runs)
    assert "above the precision criterion's bound" in text and "10x above its start" in text
    assert "no warm start reaches it within 200 steps" in text and "knocked far" not in text
    runs["paper-k2-warm"]["history"][0]["test_mse"] = 0.5
    assert "every run knocked far from the exact weights" in t7._warm_sentence(runs)
    runs["paper-k2-warm-lr0.0005"] = {**run(2, 5e-8, "exact", 1e-3), "lr": 5e-4}
    assert t7.run_name(runs["paper-k2-warm-lr0.0005"]) == "paper-k2-warm-lr0.0005"
    text = t7._warm_sentence(runs)
    assert text.index("at lr 0.005") < text.index("at lr 5.00e-04: k = 2") and "Some warm starts reach" in text
    assert text.count("still falling when the steps ran out") == 2  # both runs' last evaluations are their lowest
    runs["paper-k2-warm"]["history"][-1]["test_mse"] = 0.6
    assert t7._warm_sentence(runs).count("still falling when the steps ran out") == 1  # the lr 5e-4 run only
    assert "no such run" in t7._warm_sentence({"paper-k2": runs["paper-k2"]})
