"""The long k = 1 cells' LR floor (``seed000_table7_long.TRAINING_DOC_MIN_LR``) and how the report names it
and the cells' limits."""
from __future__ import annotations

import pytest

from numerics.experiments import seed000_table7_long as L
from numerics.training.recipe import AdaptiveLR, RecipeConfig


def test_training_doc_floor_holds_the_lr_and_paper_table5_keeps_the_recipes():
    doc, pap = L.recipe_config("training-doc"), L.recipe_config("paper-table5")
    assert doc.min_lr == L.TRAINING_DOC_MIN_LR > RecipeConfig().min_lr
    assert pap.min_lr == RecipeConfig().min_lr  # Table 5 as stated: no floor of ours
    sched = AdaptiveLR(doc)
    for step in range(1, 200 * doc.step_size + 1):  # the metric stays above the threshold: lr x0.9 per decision
        sched.observe(0.9)
        lr = sched.step(step)
    assert lr == L.TRAINING_DOC_MIN_LR and sched.decreases == 200
    sched.observe(0.0)  # below the threshold the schedule still raises it
    for _ in range(30):
        sched.observe(0.0)
    assert sched.step(201 * doc.step_size) == pytest.approx(L.TRAINING_DOC_MIN_LR / doc.gamma)


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
    assert text.count(", LR floor 2.50e-06") == 2  # the header and the training-doc row; not paper-table5's row
    assert "training-doc: at most 45.0 min of CPU time" in text and "paper-table5: at most 25.0 min" in text
    assert "Each with its own limits the docs' settings end" in text and "With the same limits" not in text
    crit = L.criterion(long)
    assert crit["met"] and "settings, LR floor 2.50e-06)" in crit["text"]
    # equal limits: one statement of them, and the comparison says so
    long["long-paper-table5-k1"]["max_cpu_seconds"] = 2700.0
    text = "\n".join(L.markdown_lines({"long": long}, "G"))
    assert "With the same limits" in text and "training-doc: at most" not in text
    # a record without a floor of ours (the recipe's default) names none
    long["long-training-doc-k1"]["recipe_config"]["min_lr"] = RecipeConfig().min_lr
    assert "LR floor" not in "\n".join(L.markdown_lines({"long": long}, "G"))
