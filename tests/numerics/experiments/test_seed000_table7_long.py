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


def _record(settings, mse, steps, *, min_lr=None):
    """A long cell's record as the sweep runner writes it (its digest that of its contents)."""
    from polyverify.sweep import record_digest

    res = _long(settings, 1500.0, mse, steps)
    if min_lr is not None:
        res["recipe_config"].update(min_lr=min_lr, anneal_from=None)
    cfg = {"k": 1, "recipe": "paper", "part": "long", "settings": settings, "max_cpu_seconds": 1500.0}
    rec = {"id": f"{settings}-{steps}", "cell": "numerics.experiments.seed000_table7:cell", "config": cfg,
           "status": "ok", "result": res, "code_version": {"package": "0.1.0", "sources": "0" * 16, "modules": 1},
           "cpu_s": 1500.0, "wall_s": 2000.0, "finished": "2026-11-26T15:51:33+00:00"}
    return {**rec, "digest": record_digest(rec)}


def test_the_earlier_run_is_restored_whole_and_shown_beside_the_one_that_replaced_it():
    import json

    import pytest

    from numerics.experiments import seed000_table7 as T

    first = _record("training-doc", 1.17e-8, 44_000, min_lr=RecipeConfig().min_lr)
    text = "\n".join(json.dumps(r) for r in (first, _record("paper-table5", 1e-3, 12_000)))
    assert L.earlier_record(text, first["id"], "H") == first
    # an edited record (its digest no longer its contents'), a missing id and another settings' cell are refused
    edited = {**first, "result": {**first["result"], "final_test_mse": 9e-9}}
    for bad, cid, why in ((json.dumps(edited), first["id"], "digest"), (text, "nope", "0 records"),
                          (text, "paper-table5-12000", "not a finished long training-doc")):
        with pytest.raises(ValueError, match=why):
            L.earlier_record(bad, cid, "H")
    # in the records, tagged superseded: not the criterion's run, shown beside it with its own figures
    now = _record("training-doc", 6.3e-9, 80_000)
    tagged = {**first, "superseded": {"rev": "abc1234", "path": "p.jsonl", "by": [now["id"]]}}
    s = T.summarise([now, tagged], False)
    assert s["long"]["long-training-doc-k1"]["final_test_mse"] == 6.3e-9
    assert s["long_earlier"]["long-training-doc-k1"]["steps"] == 44_000
    assert next(c for c in s["criteria"] if c["id"] == "k1-long")["value"] == 6.3e-9
    text = "\n".join(L.markdown_lines(s, "G"))
    assert "That earlier run is shown beside this one" in text and "git show abc1234:p.jsonl" in text
    assert "it ended at 1.17e-08 after 44,000 steps" in text and "above the 1.00e-08 bound" in text
    assert "only this run is shown" not in text
    # without it, the report says it is not shown
    text = "\n".join(L.markdown_lines(T.summarise([now], False), "G"))
    assert "only this run is shown" in text and "That earlier run is shown" not in text
