"""seed004-table1: the baselines' independent draws and their standard error, the
one-third criterion, the sigma_max = 3 column, the Full study and the AdaRR paragraph, each against an
independent computation or a summary whose numbers are known."""
import math

import numpy as np
import pytest
import torch

from numerics.experiments import seed004_table1 as s4
from numerics.experiments import seed004_table1_report as r4
from numerics.training.token_lsa import tokens_torch


# ------------------------------------------------------------------ baselines: K draws


def test_baselines_pool_the_draws_and_count_the_tuning_noise():
    K, n = 3, 600
    res = s4.cell({"kind": "baselines", "column": "3", "eval": n, "tune": n, "draws": K})
    tunes = [s4.problem_set("3", n, "tune" if r == 0 else f"tune-{r}") for r in range(K)]
    evals = [s4.problem_set("3", n, "eval" if r == 0 else f"eval-{r}") for r in range(K)]
    # draw 0 is the set of the single-draw protocol (what the experiment used alone before)
    assert s4.draw_name("eval", 0) == "eval" and s4.draw_name("tune", 2) == "tune-2"
    pooled = {k: np.concatenate([e[k] for e in evals]) for k in ("s", "aq", "yt", "sigma", "s2hat")}
    lams = [s4.tune_const(t) for t in tunes]
    per_tuning = [s4.adjusted(s4.ridge(pooled, lam), pooled)[0] for lam in lams]
    c = res["constrr"]
    assert c["lambda"] == pytest.approx(lams, rel=1e-12)
    assert c["adjusted"] == pytest.approx(np.mean(per_tuning), rel=1e-10)
    assert c["s_tune"] == pytest.approx(np.std(per_tuning, ddof=1), rel=1e-8)
    assert c["se"] == pytest.approx(math.sqrt(c["se_eval"] ** 2 + c["s_tune"] ** 2 / K), rel=1e-12)
    assert c["se_one"] == pytest.approx(math.sqrt(K * c["se_eval"] ** 2 + c["s_tune"] ** 2), rel=1e-12)
    assert c["se"] > c["se_eval"] > 0  # the tuning noise is counted
    # the single-draw protocol: tuned on set r, evaluated on set r
    for r in range(K):
        assert c["per_draw"][r] == pytest.approx(s4.adjusted(s4.ridge(evals[r], lams[r]), evals[r])[0], rel=1e-10)
    # TunedRR likewise, with its two parameters per draw
    prms = [s4.tune_tuned(t) for t in tunes]
    t_ = res["tunedrr"]
    assert t_["scale"] == pytest.approx([c_ for c_, _ in prms], rel=1e-12)
    want = [s4.adjusted(s4.ridge(pooled, s4.tuned_lambda(pooled["s2hat"], *p)), pooled)[0] for p in prms]
    assert t_["adjusted"] == pytest.approx(np.mean(want), rel=1e-10)
    # AdaRR tunes nothing: the pooled evaluation only, no tuning noise
    a = res["adarr"]
    adj, se, _ = s4.adjusted(s4.ridge(pooled, pooled["s2hat"]), pooled)
    assert a["adjusted"] == pytest.approx(adj, rel=1e-12) and a["se"] == pytest.approx(se, rel=1e-12)
    assert a["s_tune"] == 0
    # the tail: the largest 0.1% of the pooled sequences (here 1 of 1,800)
    diff = 0.5 * ((s4.ridge(pooled, pooled["s2hat"]) - pooled["yt"]) ** 2
                  - (s4.ridge(pooled, pooled["sigma"] ** 2) - pooled["yt"]) ** 2)
    assert a["tail_share"] == pytest.approx(diff.max() / diff.sum(), rel=1e-10)
    top = int(np.argmax(diff))
    assert a["tail"]["sigma"][0] == pytest.approx(pooled["sigma"][top])
    assert a["tail"]["s2hat_ratio"][1] == pytest.approx(np.median(pooled["s2hat"] / pooled["sigma"] ** 2))


def test_baselines_draws_must_be_positive():
    with pytest.raises(ValueError, match="draws"):
        s4.cell({"kind": "baselines", "column": "3", "eval": 10, "tune": 10, "draws": 0})


def test_full_grid_runs_the_sigma3_column_and_the_study():
    cfgs = s4.configs(False)
    grid = {(c["variant"], c["layers"], c["column"]) for c in cfgs if c["kind"] == "model" and "study" not in c}
    for v in s4.VARIANTS:
        for L in (1, 2, 3):
            assert (v, L, "3") in grid
    base = next(c for c in cfgs if c["kind"] == "model" and "study" not in c
                and all(c[k] == v for k, v in s4.STUDY_BASE.items()))
    study = [c for c in cfgs if "study" in c]
    assert [c["study"] for c in study] == [lab for lab, _ in s4.STUDY]
    for c, (_, over) in zip(study, s4.STUDY):
        assert {k: v for k, v in c.items() if k != "study"} == {**base, **over}
    assert all(c["draws"] == s4.BASELINE_DRAWS >= 2 for c in cfgs if c["kind"] == "baselines")
    assert all(c["eval"] == 100_000 for c in cfgs if c["kind"] == "baselines")  # the paper's size, per draw
    assert {c["eval"] for c in cfgs if c["kind"] == "model" and "study" not in c} == {s4.MODEL_EVAL}
    assert any(c.get("eval") == 100_000 for c in study)  # the study measures the paper's evaluation size


def test_model_cell_is_evaluated_on_the_column_set_whatever_its_seed():
    cfg = {"kind": "model", "variant": "diag", "layers": 2, "column": "3", "steps": 5, "eval": 1000,
           "monitor": 200, "batch": 64, "seed": 1}
    res = s4.cell(cfg)
    ps = s4.problem_set("3", 1000, "eval", 0)
    with torch.no_grad():
        pred = s4.model_from_result(res).predict(tokens_torch(ps["X"], ps["y"], ps["xt"])).numpy()
    assert s4.adjusted(pred, ps)[0] == pytest.approx(res["adjusted"], rel=1e-12)
    assert len(res["eval_fifths"]) == 5 and np.mean(res["eval_fifths"]) == pytest.approx(res["adjusted"], rel=1e-10)
    assert 0 < res["tail_share"] < 1


# ------------------------------------------------------------------ criteria


def _summary(ratio_diag, ratio_full, g=0.3):
    base = {c: {k: {"adjusted": s4.PAPER[k][i] * 1.05, "se": 1e-3} for k in ("constrr", "adarr", "tunedrr")}
            for i, c in enumerate(s4.COLUMNS)}
    models = {"gdpp": {"1": {"5": {"adjusted": 0.9}}, "3": {"5": {"adjusted": g}}},
              "diag": {"1": {"5": {"adjusted": 0.9}}, "3": {"5": {"adjusted": ratio_diag * g}}},
              "full": {"1": {"5": {"adjusted": 0.9}}, "3": {"5": {"adjusted": ratio_full * g}}}}
    return {"baselines": base, "models": models, "config": {"model_eval": [100_000], "baseline_eval": [100_000]}}


def test_the_l3_criterion_is_the_papers_third():
    crit = {c["id"]: c for c in s4.criteria(_summary(0.34, 0.36))}["l3-s5-third"]
    assert crit["met"] and crit["bound"] == pytest.approx(1.1 / 3)
    assert not {c["id"]: c for c in s4.criteria(_summary(0.34, 0.4))}["l3-s5-third"]["met"]
    # the paper's own ratios (Table 1: 0.118 and 0.117 over 0.344) pass; a strict third would fail them
    paper = crit["paper_ratios"]
    assert paper["diag"] == pytest.approx(0.118 / 0.344) and paper["full"] == pytest.approx(0.117 / 0.344)
    assert all(1 / 3 < r <= s4.THIRD_BOUND for r in paper.values())
    assert "at about a third" in crit["text"]


def test_a_miss_is_weighed_with_one_draws_standard_error_for_the_paper():
    s = _summary(0.3, 0.3)
    p = s4.PAPER["adarr"][5]
    s["baselines"]["5"]["adarr"] = {"adjusted": p * 1.2, "se": 0.001, "se_one": 0.002}
    miss = [m for m in s4.criteria(s)[0]["misses"] if m["baseline"] == "adarr"]
    assert miss[0]["z_diff"] == pytest.approx(0.2 * p / math.sqrt(0.001 ** 2 + 0.002 ** 2))
    assert "several independent tunings and evaluation sets pooled" in r4._miss_noise_sentence(miss)


# ------------------------------------------------------------------ report paragraphs


def _model(adj, se=0.002, steps=2000, batch=512, lr=3e-3, eval=20_000, **kw):
    return {"adjusted": adj, "se": se, "steps": steps, "recipe": {"batch": batch, "lr": lr}, "eval": eval, **kw}


def test_sigma3_paragraph_reads_the_numbers():
    s = _summary(0.3, 0.3)
    assert r4._column_paragraph(s) == []  # until every variant has L = 1, 2, 3 at sigma_max = 3
    vals = {"gdpp": (1.2, 0.28, 0.17), "diag": (1.2, 0.2, 0.0957), "full": (1.2, 0.2, 0.09)}
    for v, xs in vals.items():
        for L, x in zip((1, 2, 3), xs):
            s["models"][v].setdefault(str(L), {})["3"] = _model(x)
    text = "\n".join(r4._column_paragraph(s))
    assert "| Full | 1.2 / 1.18 (1.02) | 0.2 / 0.188 (1.06) | 0.09 / 0.075 (1.2) |" in text
    # ours Full < Diag < GD++ at L = 3, the paper's the same (0.075 < 0.087 < 0.161)
    assert "ours rank Full < Diag < GD++, the paper Full < Diag < GD++ (the same order)" in text
    assert "the model furthest above the paper is Full, +20%" in text


def test_study_paragraph_reads_the_numbers():
    s = _summary(0.3, 0.3)
    s["models"]["full"]["3"]["3"] = _model(0.09)
    s["models"]["diag"]["3"]["3"] = _model(0.087 * 1.1)
    s["study"] = [_model(0.1, eval=100_000, eval_fifths=[0.08, 0.09, 0.1, 0.11, 0.12], tail_share=0.05)
                  | {"study": "evaluated on 100,000"},
                  _model(0.081, steps=4000) | {"study": "steps x2"},
                  _model(0.0891, lr=1e-3) | {"study": "lr / 3"},
                  _model(0.095) | {"study": "seed 1"}]
    text = "\n".join(r4._study_paragraph(s))
    assert "the grid's run 0.09 (standard error 0.002), +20% against the paper's 0.075; Diag 0.0957, +10%" in text
    assert "| steps x2 | 4000 | 512 | 0.003 | 0.081 +- 0.002 | -10% | +8% |" in text
    assert "The training seed alone moves it by 5.6% (0.09 to 0.095 over 2 seeds" in text
    # the evaluation row is no change to the training: not the largest gain, though it moves the most
    assert "the largest gain of one change to the training is 10% (steps x2, still +8% against the paper)" in text
    assert "beyond the seeds' spread: steps x2" in text and "lr / 3," not in text
    assert "2x the grid's training sequences (steps x2) gives -10%" in text
    assert f"the paper trains on {s4.fmt(200_000 * 2048 / (2000 * 512))}x" in text
    assert ("the same training evaluated on 100000 sequences instead of 20000 reads 0.1 (+11%), and that set's "
            "five disjoint fifths read 0.08 to 0.12 (-20% to +20%)") in text
    assert "carry 5% of the loss" in text
    assert "the paper's Full is below its Diag here (0.075 against 0.087), ours above ours (0.09 against 0.0957)" not in text
    assert "ours below ours too (0.09 against 0.0957)" in text
    assert "Of the training changes tried (steps x2, lr / 3), steps x2 gains more than the seeds' spread" in text
    s["study"] = [x for x in s["study"] if x["study"] != "steps x2"]
    s["models"]["diag"]["3"]["3"] = _model(0.08)
    text = "\n".join(r4._study_paragraph(s))
    assert "ours above ours (0.09 against 0.08), so our Full does not find what the paper's finds" in text
    assert "Of the training changes tried (lr / 3), none gains more than the seeds' spread" in text
    assert r4._study_paragraph(_summary(0.3, 0.3)) == []


def test_adarr_paragraph_reads_the_numbers():
    s = _summary(0.3, 0.3)
    p = s4.PAPER["adarr"][5]
    s["baselines"]["5"]["eval_per_draw"] = 100_000
    s["baselines"]["5"]["adarr"] = {"adjusted": 0.0707, "se": 0.0015, "se_one": 0.003,
                                    "per_draw": [0.0738, 0.0729, 0.0676, 0.0686], "tail_share": 0.2,
                                    "tail": {"sigma": [4.1, 2.5], "s2hat_ratio": [0.35, 0.93],
                                             "smallest_eig": [2.6, 2.7]}}
    text = "\n".join(r4._adarr_paragraph(s))
    z = (0.0707 - p) / math.sqrt(0.0015 ** 2 + 0.003 ** 2)
    assert f"{s4.fmt(z, 2)} standard errors of the difference" in text and "within sampling noise" in text
    assert "The single draws read 0.0738, 0.0729, 0.0676, 0.0686 (-0.59% to +8.5% against the paper" in text
    assert "median sigma_tau is 4.1 against 2.5" in text and "sigma_hat^2 / sigma_tau^2 0.35 against 0.93" in text
    s["baselines"]["5"]["adarr"]["se"] = s["baselines"]["5"]["adarr"]["se_one"] = 1e-4
    assert "beyond sampling noise" in "\n".join(r4._adarr_paragraph(s))
    s["baselines"]["5"]["adarr"]["per_draw"] = [0.07]
    assert r4._adarr_paragraph(s) == []
