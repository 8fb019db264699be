"""The long k = 1 cells' LR floor (``seed000_table7_long.TRAINING_DOC_MIN_LR``) and how the report names it
and the cells' limits."""
from __future__ import annotations

import pytest

from numerics.experiments import seed000_table7_long as L
from numerics.training.recipe import AdaptiveLR, RecipeConfig


def test_training_doc_floor_holds_the_lr_then_the_anneal_takes_it_down():
    doc, pap = L.recipe_config("training-doc"), L.recipe_config("paper-table5")
    assert doc.min_lr == L.TRAINING_DOC_MIN_LR > RecipeConfig().min_lr
    assert doc.anneal_from == L.TRAINING_DOC_STEPS - L.ANNEAL_STEPS > 0
    assert L.CELLS["training-doc"]["steps"] == L.TRAINING_DOC_STEPS
    assert (pap.min_lr, pap.anneal_from) == (RecipeConfig().min_lr, None)  # Table 5 as stated: neither of ours
    sched = AdaptiveLR(doc)
    for step in range(1, doc.anneal_from + 1):  # the metric above the threshold: lr x0.9 per decision to the floor
        sched.observe(0.9)
        lr = sched.step(step)
    assert lr == L.TRAINING_DOC_MIN_LR and sched.decreases == doc.anneal_from // doc.step_size
    for _ in range(40):  # the metric below the threshold: the anneal takes the LR down all the same
        sched.observe(0.0)
    for step in range(doc.anneal_from + 1, L.TRAINING_DOC_STEPS + 1):
        lr = sched.step(step)
    n = L.ANNEAL_STEPS // doc.step_size
    assert lr == pytest.approx(L.TRAINING_DOC_MIN_LR * doc.gamma ** n) and sched.increases == 0
    # before the anneal the floor holds the LR but a metric below the threshold still raises it
    sched = AdaptiveLR(doc)
    sched.lr = L.TRAINING_DOC_MIN_LR
    for _ in range(40):
        sched.observe(0.0)
    assert sched.step(doc.step_size * 2) == pytest.approx(L.TRAINING_DOC_MIN_LR / doc.gamma)


def test_the_recipe_without_anneal_from_is_unchanged():
    c = RecipeConfig(lr=1e-3, step_size=10, gamma=0.5, threshold=0.5, warmup=0, metric_lambda=0.0)
    a, b = AdaptiveLR(c), AdaptiveLR(RecipeConfig(**{**c.to_json(), "betas": c.betas, "anneal_from": 15}))
    a.observe(0.0), b.observe(0.0)
    assert a.step(10) == b.step(10) == 2e-3  # before step 15 both raise the LR (metric below threshold)
    assert a.step(20) == 4e-3 and b.step(20) == 1e-3  # after it the anneal halves it


def _long(settings, cpu_s, mse, steps):
    hist = [{"step": 0, "test_mse": 1.6, "lr": 5e-3, "metric_ema": 1.0, "wall_s": 0.1},
            {"step": steps, "test_mse": mse, "lr": 2.5e-6, "metric_ema": 0.6, "wall_s": 10.0}]
    return {"k": 1, "recipe": "paper", "init": "random", "settings": settings, "batch": 256, "steps": steps,
            "layers": 3, "width": 32, "init_scale": 0.1, "final_test_mse": mse, "final_test_mse_f64": mse,
            "final_eval": 8192, "max_cpu_seconds": cpu_s, "max_seconds": 4500.0, "train_cpu_s": cpu_s,
            "train_wall_s": 20.0, "stopped_by_cpu": True, "stopped_by_time": False, "skipped": 0, "lr_end": 2.5e-6,
            "history": hist, "recipe_config": L.recipe_config(settings).to_json(), "perturb": 0.0,
            "baselines": {"zero": 1.66, "x0": 2.31, "poly": [0.46]}}


def test_report_names_the_floor_and_each_cells_own_limits():
    long = {"long-training-doc-k1": {**_long("training-doc", 2700.0, 8e-9, 90_000), "command": "A"},
            "long-paper-table5-k1": {**_long("paper-table5", 1500.0, 1e-3, 12_000), "command": "B"}}
    text = "\n".join(L.markdown_lines({"long": long}, "G"))
    assert text.count(", LR floor 2.50e-06, from step 68,000 x0.9 at every decision") == 2  # header, training-doc row
    assert "training-doc: at most 45.0 min of CPU time" in text and "paper-table5: at most 25.0 min" in text
    assert "Each with its own limits the docs' settings end" in text and "With the same limits" not in text
    crit = L.criterion(long)
    assert crit["met"] and "settings, LR floor 2.50e-06, from step 68,000" in crit["text"]
    # equal limits: one statement of them, and the comparison says so
    long["long-paper-table5-k1"]["max_cpu_seconds"] = 2700.0
    text = "\n".join(L.markdown_lines({"long": long}, "G"))
    assert "With the same limits" in text and "training-doc: at most" not in text
    # a record without a floor of ours (the recipe's default) names none
    long["long-training-doc-k1"]["recipe_config"].update(min_lr=RecipeConfig().min_lr, anneal_from=None)
    assert "LR floor" not in "\n".join(L.markdown_lines({"long": long}, "G"))
