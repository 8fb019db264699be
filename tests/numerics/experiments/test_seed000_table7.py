"""Seed 000 Table 7: the (k + 2)-layer, width-32 training model can express the k-th GD iterate; the warm
starts and the long k = 1 cells (part long) are summarised and reported apart from the equal-steps runs."""
import numpy as np
import pytest
import torch

from numerics.experiments import seed000_table7 as t7
from numerics.experiments import seed000_table7_report as rep


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
    text = rep._warm_sentence(runs)
    assert "at lr 0.005 (the recipe's): k = 2: 0.001 at the start, 5.00e-08 after 200 steps (2e+04x below its start" in text
    assert "within the precision criterion's bound" in text and "2.00e+06x below the run from random initialisation" in text
    assert "Near the exact solution the recipe keeps or reaches the precision" in text
    runs["paper-k2-warm"]["final_test_mse"] = 1e-2
    text = rep._warm_sentence(runs)
    assert "above the precision criterion's bound" in text and "10x above its start" in text
    assert "no warm start reaches it within 200 steps" in text and "knocked far" not in text
    runs["paper-k2-warm"]["history"][0]["test_mse"] = 0.5
    assert "every run knocked far from the exact weights" in rep._warm_sentence(runs)
    runs["paper-k2-warm-lr0.0005"] = {**run(2, 5e-8, "exact", 1e-3), "lr": 5e-4}
    assert t7.run_name(runs["paper-k2-warm-lr0.0005"]) == "paper-k2-warm-lr0.0005"
    text = rep._warm_sentence(runs)
    assert text.index("at lr 0.005") < text.index("at lr 5.00e-04: k = 2") and "Some warm starts reach" in text
    assert text.count("still falling when the steps ran out") == 2  # both runs' last evaluations are their lowest
    runs["paper-k2-warm"]["history"][-1]["test_mse"] = 0.6
    assert rep._warm_sentence(runs).count("still falling when the steps ran out") == 1  # the lr 5e-4 run only
    assert "no such run" in rep._warm_sentence({"paper-k2": runs["paper-k2"]})


# ------------------------------------------------------------------ the long k = 1 cells (part long)

def test_table7_long_cells_are_k1_with_the_docs_settings_and_the_papers_recipe():
    from numerics.experiments import seed000_table7_long as L
    from numerics.training.recipe import RecipeConfig

    full = [c for c in t7.configs(False) if c.get("part") == "long"]
    assert full == L.long_configs(False) and len(full) == 2
    by = {c["settings"]: c for c in full}
    assert all(c["k"] == 1 and c["recipe"] == "paper" and c["max_cpu_seconds"] == 60 * L.CPU_MINUTES
               and c["max_seconds"] == 60 * L.WALL_MINUTES for c in full)
    # the paper's recipe as App. B.2 Table 5 states it: batch 1024, lr 1e-2, no cap, steps capped at 2.5e6
    assert by["paper-table5"]["batch"] == t7.PAPER_RECIPE["batch"] == 1024
    assert by["paper-table5"]["steps"] == t7.PAPER_RECIPE["steps"]
    assert L.recipe_config("paper-table5") == RecipeConfig.paper()
    pr = L.recipe_config("paper-table5")
    assert (pr.lr, pr.max_lr, pr.step_size, pr.metric_every, pr.metric_batches, pr.threshold) == \
        (1e-2, None, 3000, 1000, 64, 0.9)
    # docs/training.md's step-size-500 float32 run
    dr = L.recipe_config("training-doc")
    assert (dr.lr, dr.max_lr, dr.step_size, dr.metric_every, dr.metric_batches, dr.warmup, dr.threshold) == \
        (5e-3, 5e-3, 500, 100, 4, 100, 0.5)
    assert by["training-doc"]["batch"] == 256
    quick = [c for c in t7.configs(True) if c.get("part") == "long"]
    assert quick == L.long_configs(True) and len(quick) == 2
    assert all(c["width"] <= 8 and c["steps"] <= 12 and c["final_eval"] <= 128 for c in quick)
    with pytest.raises(ValueError, match="settings must be one of"):
        L.recipe_config("fast")
    with pytest.raises(ValueError, match="settings must be one of"):
        t7.cell({**quick[0], "settings": "fast"})


def test_table7_long_cell_stops_at_its_wall_clock_limit():
    from numerics.experiments import seed000_table7_long as L

    c = {**L.long_configs(True)[0], "steps": 10 ** 6, "max_seconds": 0.5, "eval_every": 10 ** 5}  # CPU limit 30 s
    r = t7.cell(c)
    assert r["stopped_by_time"] and not r["stopped_by_cpu"] and 0 < r["steps"] < 10 ** 6 and r["steps_max"] == 10 ** 6
    assert r["settings"] == "training-doc" and r["max_seconds"] == 0.5 and r["train_wall_s"] >= 0.5
    assert r["recipe_config"]["step_size"] == 500 and r["history"][-1]["step"] == r["steps"]
    assert all("wall_s" in h for h in r["history"])


def test_table7_long_cell_stops_at_its_cpu_time_limit_at_an_evaluation_point():
    from numerics.experiments import seed000_table7_long as L

    c = {**L.long_configs(True)[0], "steps": 10 ** 6, "max_cpu_seconds": 0.5, "eval_every": 40}
    r = t7.cell(c)
    assert r["stopped_by_cpu"] and not r["stopped_by_time"] and r["train_cpu_s"] >= 0.5
    assert r["steps"] % 40 == 0 and [h["step"] for h in r["history"]] == list(range(0, r["steps"] + 1, 40))
    # the step cap comes first: neither limit named
    r = t7.cell({**c, "steps": 80, "max_cpu_seconds": 60.0})
    assert r["steps"] == 80 and not r["stopped_by_cpu"] and not r["stopped_by_time"]


def _long_result(settings, mse, steps, batch):
    from numerics.experiments import seed000_table7_long as L

    hist = [{"step": s, "test_mse": m, "lr": 1e-3, "metric_ema": 0.5, "wall_s": w}
            for s, m, w in ((1000, 1e-5, 30.0), (steps // 2, 5e-9 if mse < 1e-8 else 2 * mse, 600.0),
                            (steps, mse, 1800.0))]
    return {"k": 1, "recipe": "paper", "init": "random", "settings": settings, "batch": batch, "steps": steps,
            "layers": 3, "width": 32, "init_scale": 0.1, "final_test_mse": mse, "final_test_mse_f64": mse,
            "final_eval": 8192, "max_cpu_seconds": 1500.0, "max_seconds": 2400.0, "train_cpu_s": 1501.0,
            "train_wall_s": 1800.0, "stopped_by_cpu": True, "stopped_by_time": False,
            "skipped": 0, "lr_end": 4e-7, "history": hist,
            "recipe_config": L.recipe_config(settings).to_json(), "perturb": 0.0,
            "baselines": {"zero": 1.66, "x0": 2.31, "poly": [0.46]}}


def _rows(doc_mse):
    grid = {k: v for k, v in _long_result("training-doc", 1e-5, 200, 256).items()
            if k not in ("settings", "max_seconds", "max_cpu_seconds", "train_cpu_s", "train_wall_s", "stopped_by_cpu")}
    cfg = {"k": 1, "recipe": "paper", "steps": 200}
    return [{"id": "a", "status": "ok", "config": cfg, "result": grid, "cpu_s": 1.0, "wall_s": 1.0},
            {"id": "b", "status": "ok", "config": {"part": "long", "settings": "training-doc", "steps": 10 ** 6},
             "result": _long_result("training-doc", doc_mse, 60_000, 256), "cpu_s": 1790.0, "wall_s": 1801.0,
             "command": "python -m numerics.experiments.seed000_table7_long --out D"},
            {"id": "c", "status": "ok", "config": {"part": "long", "settings": "paper-table5", "steps": 2_500_000},
             "result": _long_result("paper-table5", 3e-6, 25_000, 1024), "cpu_s": 1795.0, "wall_s": 1802.0}]


def test_table7_long_runs_are_summarised_apart_with_their_own_criterion():
    s = t7.summarise(_rows(4e-9), quick=False)
    assert set(s["runs"]) == {"paper-k1"} and set(s["long"]) == {"long-training-doc-k1", "long-paper-table5-k1"}
    crit = {c["id"]: c for c in s["criteria"]}
    assert crit["k1-long"]["met"] is True and crit["k1-long"]["value"] == 4e-9
    assert crit["precision"]["values"] == {"1": 1e-5}  # the equal-steps criterion reads the grid's cell only
    assert s["config"]["steps"] == [200]
    assert {c["id"]: c for c in t7.summarise(_rows(2e-8), quick=False)["criteria"]}["k1-long"]["met"] is False
    # without long cells: no long criterion, no long runs
    s0 = t7.summarise(_rows(4e-9)[:1], quick=False)
    assert s0["long"] == {} and "k1-long" not in {c["id"] for c in s0["criteria"]}


def test_table7_long_report_lines_come_from_the_runs():
    from numerics.experiments import seed000_table7_long as L

    s = t7.summarise(_rows(4e-9), quick=False)
    text = "\n".join(L.markdown_lines(s, "python -m numerics.experiments seed000-table7 --out D"))
    # each run's command: the merged record's own, else the grid's
    assert "    python -m numerics.experiments.seed000_table7_long --out D" in text
    assert "    python -m numerics.experiments seed000-table7 --out D" in text
    assert "| training-doc | 256 |" in text and "| its CPU-time limit | 60,000 |" in text
    assert "| 25.0 min | 30.0 min | 4.00e-09 |" in text and "step 30,000 (10.0 min wall)" in text
    assert "at most 25.0 min of CPU time or 40.0 min of wall time, whichever came first" in text
    assert "| paper-table5 | 1,024 |" in text and "not reached" in text
    assert "this run is that run truncated: 25,000 steps (0.01 of them)" in text
    assert "at most 8 learning-rate decisions (the paper's run: 833)" in text
    assert "end 750x below the truncated paper recipe" in text and "within the 1.00e-08 bound" in text
    assert "no long cell" in L.markdown_lines({"long": {}}, "x")[0]
    assert "only k = 1 was trained longer (25.0 min of CPU time, 60,000 steps: test MSE 4.00e-09" in \
        t7.markdown({**s, "run": {"command": "c", **_run_record()}}, "f.png")


def _run_record():
    return {"cells": 3, "failed": 0, "cpu_s": 1.0, "cell_wall_s": 1.0, "wall_s": 1.0, "workers": 1,
            "finished": "2026-11-26T00:00:00", "machine": {"cores": 2, "loadavg": [1.0], "torch": "x"}}


def test_table7_long_merge_replaces_the_same_cells_and_names_the_command(tmp_path):
    import json

    from numerics.experiments import seed000_table7_long as L

    rows = _rows(4e-9)
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:2]))
    new = [{**rows[1], "result": {**rows[1]["result"], "final_test_mse": 1e-9}},
           {**rows[2], "command": None}, {"id": "f", "status": "failed", "config": {}, "result": None}]
    assert L.merge(tmp_path, new, "CMD") == 2
    got = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [r["id"] for r in got] == ["a", "b", "c"]  # the failed cell is not merged
    assert got[1]["result"]["final_test_mse"] == 1e-9 and got[1]["command"] == got[2]["command"] == "CMD"
    assert "command" not in got[0]
    # a long cell of the same settings made with other limits (another id) is replaced, not kept beside it
    other = {**rows[1], "id": "b2", "config": {**rows[1]["config"], "max_cpu_seconds": 1.0}}
    assert L.merge(tmp_path, [other], "CMD2") == 1
    got = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [r["id"] for r in got] == ["a", "c", "b2"] and got[2]["command"] == "CMD2"


@pytest.mark.parametrize("argv,msg", [
    (["--out", "NOPE"], "needs a finished seed000-table7 grid"),
    (["--out", "Q", "--workers", "0"], "--workers must be >= 1"),
    (["--out", "Q"], "holds a quick grid; pass --quick"),
    (["--out", "F", "--quick"], "holds a full grid; drop --quick"),
    (["--out", "G", "--quick"], "holds no CPU seed000-table7 grid"),
    (["--out", "Q", "--quick", "--only", "fast"], "argument --only: invalid choice: 'fast'"),
])
def test_table7_long_command_bad_input_is_one_line_exit_2(argv, msg, tmp_path, monkeypatch, capsys):
    import json

    from numerics.experiments import seed000_table7_long as L

    monkeypatch.chdir(tmp_path)
    for name, s in (("Q", {"quick": True, "run": {"experiment": "seed000-table7"}}),
                    ("F", {"quick": False, "run": {"experiment": "seed000-table7"}}),
                    ("G", {"quick": True, "grid": "gpu", "run": {"experiment": "seed000-table7"}})):
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(json.dumps(s))
        (tmp_path / name / "results.jsonl").write_text("")
    assert L.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and msg in err and err.count("\n") == 1
    assert not any((tmp_path / n / "long").exists() for n in ("Q", "F", "G"))


def test_table7_long_command_runs_merges_and_the_report_shows_it(tmp_path, capsys, shared_cluster):
    """The quick grid holds its long cells already; ``--only paper-table5`` runs that one again and merges
    it (tagged with the command), the summary is rewritten, and the section names the command."""
    import json

    from numerics.experiments import seed000_table7_long as L
    from numerics.experiments.__main__ import main

    out = tmp_path / "t7"
    assert main(["seed000-table7", "--quick", "--out", str(out), "--scheduler", shared_cluster.scheduler_address,
                 "--no-progress"]) == 0  # the test run's cluster: only the outputs are checked
    assert L.main(["--out", str(out), "--quick", "--only", "paper-table5", "--no-progress"]) == 0
    assert "1 cells, 0 failed; 1 merged" in capsys.readouterr().out
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    long = {r["config"]["settings"]: r for r in rows if L.is_long(r)}
    assert len(rows) == 5 and set(long) == set(L.SETTINGS)
    assert long["training-doc"].get("command") is None
    cmd = f"python -m numerics.experiments.seed000_table7_long --out {out} --quick --only paper-table5 --no-progress"
    assert long["paper-table5"]["command"] == cmd
    s = json.loads((out / "summary.json").read_text())
    assert set(s["long"]) == {"long-training-doc-k1", "long-paper-table5-k1"} and s["run"]["resummarised"]
    assert "k1-long" in {c["id"] for c in s["criteria"]}
    text = t7.markdown(s, "f.png")
    assert f"    {cmd}" in text and f"    {s['run']['command']}" in text
