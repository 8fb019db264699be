"""numerics/experiments: the pieces of each experiment against independent computations, the
criteria logic, and the command line (bad input refused before any work)."""
import json
import math

import numpy as np
import pytest
import torch

from numerics.experiments import EXPERIMENTS, load
from numerics.experiments import seed000_table7 as t7
from numerics.experiments import seed002_ntk as s2
from numerics.experiments import seed004_table1 as s4
from numerics.experiments import seed004_table1_report as r4
from numerics.experiments.__main__ import main


# ------------------------------------------------------------------ seed 004: data and baselines

def small_set(column="3", size=400, which="eval"):
    return s4.problem_set(column, size, which, seed=5)


def test_ridge_by_eigendecomposition_is_ridge():
    ps = small_set()
    lam = ps["sigma"] ** 2
    Sig = np.einsum("bni,bnj->bij", ps["X"], ps["X"])
    alpha = np.einsum("bni,bn->bi", ps["X"], ps["y"])
    w = np.linalg.solve(Sig + lam[:, None, None] * np.eye(s4.D), alpha[..., None])[..., 0]
    np.testing.assert_allclose(s4.ridge(ps, lam), np.einsum("bd,bd->b", w, ps["xt"]), rtol=1e-9, atol=1e-10)
    # sigma_hat^2: the OLS residual sum of squares over n - d
    w_ols = np.linalg.solve(Sig, alpha[..., None])[..., 0]
    rss = np.sum((ps["y"] - np.einsum("bnd,bd->bn", ps["X"], w_ols)) ** 2, axis=1)
    np.testing.assert_allclose(ps["s2hat"], rss / (s4.N - s4.D), rtol=1e-7, atol=1e-10)


def test_noise_draws_per_column():
    rng = np.random.default_rng(0)
    assert set(np.unique(s4.sigmas("{1,3,5}", 3000, rng))) == {1.0, 3.0, 5.0}
    u = s4.sigmas("7", 5000, rng)
    assert u.min() >= 0 and u.max() <= 7 and abs(u.mean() - 3.5) < 0.2
    assert not s4.sigmas("0", 10, rng).any()
    b = s4.sample(2000, "0", rng)
    # noiseless column: y = X w exactly, the query target is noise free in every column
    w = np.linalg.lstsq(b["X"][0], b["y"][0], rcond=None)[0]
    np.testing.assert_allclose(b["X"][0] @ w, b["y"][0], atol=1e-10)


def test_oracle_is_the_zero_of_the_adjusted_loss_and_the_baselines_order():
    ps = small_set("5", 4000)
    adj, se, orc = s4.adjusted(s4.ridge(ps, ps["sigma"] ** 2), ps)
    assert adj == 0 and se == 0 and orc > 0
    lam = s4.tune_const(ps)
    const = s4.adjusted(s4.ridge(ps, lam), ps)[0]
    # the tuned constant is the best constant: a grid around it does no better
    for f in (0.5, 0.8, 1.25, 2.0):
        assert s4.adjusted(s4.ridge(ps, lam * f), ps)[0] >= const - 1e-12
    c, m = s4.tune_tuned(ps, coarse=2000)
    tuned = s4.adjusted(s4.ridge(ps, s4.tuned_lambda(ps["s2hat"], c, m)), ps)[0]
    ada = s4.adjusted(s4.ridge(ps, ps["s2hat"]), ps)[0]
    assert 0 < tuned <= ada + 1e-12 and tuned < const  # TunedRR contains AdaRR (c = 1, m = inf)


def test_noiseless_baselines_are_exact():
    res = s4.cell({"kind": "baselines", "column": "0", "eval": 500, "tune": 500})
    for key in ("constrr", "adarr", "tunedrr"):
        assert abs(res[key]["adjusted"]) < 1e-12


def test_model_cell_trains_and_export_reproduces_it(tmp_path):
    cfg = {"kind": "model", "variant": "diag", "layers": 2, "column": "2", "steps": 60, "eval": 1000,
           "monitor": 500, "batch": 128}
    res = s4.cell(cfg)
    assert res["curve"][-1]["monitor_adjusted"] < 0.5 * res["curve"][0]["monitor_adjusted"] or \
        res["curve"][-1]["monitor_adjusted"] < 0.5
    assert res["skipped"] == 0 and len(res["omegas"]) == 2
    m = s4.model_from_result(res)
    ps = s4.problem_set("2", 1000, "eval")
    from numerics.training.token_lsa import tokens_torch

    with torch.no_grad():
        pred = m.predict(tokens_torch(ps["X"], ps["y"], ps["xt"])).numpy()
    assert s4.adjusted(pred, ps)[0] == pytest.approx(res["adjusted"], rel=1e-12)
    assert s4.cell(cfg)["adjusted"] == res["adjusted"]  # a pure function of its config


def test_bad_cells_raise():
    with pytest.raises(ValueError, match="kind"):
        s4.cell({"kind": "nothing"})
    with pytest.raises(ValueError, match="variant"):
        s4.cell({"kind": "model", "variant": "softmax", "layers": 1, "column": "1", "steps": 1, "eval": 10})
    with pytest.raises(ValueError, match="part"):
        s2.cell({"part": "macaque"})
    with pytest.raises(ValueError, match="recipe"):
        t7.cell({"k": 1, "steps": 1, "recipe": "sgd"})


def fake_s4_summary(ratio_diag, ratio_full, spread=0.0):
    base = {c: {k: {"adjusted": s4.PAPER[k][i] * 1.05} for k in ("constrr", "adarr", "tunedrr")}
            for i, c in enumerate(s4.COLUMNS)}
    g = 0.3
    models = {"gdpp": {"1": {"5": {"adjusted": 0.9}}, "3": {"5": {"adjusted": g}}},
              "diag": {"1": {"5": {"adjusted": 0.9 * (1 + spread)}}, "3": {"5": {"adjusted": ratio_diag * g}}},
              "full": {"1": {"5": {"adjusted": 0.9}}, "3": {"5": {"adjusted": ratio_full * g}}}}
    return {"baselines": base, "models": models}


def test_seed004_criteria():
    crit = {c["id"]: c for c in s4.criteria(fake_s4_summary(0.3, 0.35))}
    assert crit["baselines-10pct"]["met"] and crit["one-layer-equal"]["met"] and crit["l3-s5-third"]["met"]
    crit = {c["id"]: c for c in s4.criteria(fake_s4_summary(0.4, 0.45, spread=0.03))}
    assert not crit["l3-s5-third"]["met"] and not crit["one-layer-equal"]["met"]
    s = fake_s4_summary(0.4, 0.4)
    s["baselines"]["3"]["adarr"]["adjusted"] = s4.PAPER["adarr"][3] * 1.2
    crit = {c["id"]: c for c in s4.criteria(s)}
    assert not crit["baselines-10pct"]["met"]
    assert [(m["column"], m["baseline"]) for m in crit["baselines-10pct"]["misses"]] == [("3", "adarr")]


def test_seed004_baseline_misses_are_weighed_against_the_sampling_noise():
    """A miss's z is (ours - paper) / (sqrt(2) se); the report calls misses within 2 of those sampling
    noise and larger ones a difference of the baseline."""
    s = fake_s4_summary(0.4, 0.45)
    p = s4.PAPER["tunedrr"][3]
    for col in s["baselines"]:
        for k in ("constrr", "adarr", "tunedrr"):
            s["baselines"][col][k]["se"] = 1e-3
    s["baselines"]["3"]["tunedrr"].update(adjusted=p * 1.12, se=p * 0.12 / (2 ** 0.5 * 1.5))  # z = 1.5
    s["criteria"] = s4.criteria(s)
    miss = s["criteria"][0]["misses"]
    assert len(miss) == 1 and miss[0]["z_diff"] == pytest.approx(1.5)
    text = r4._miss_noise_sentence(miss)
    assert "Each miss is at most 1.5 standard errors of the difference" in text and "consistent with sampling noise" in text
    s["baselines"]["3"]["tunedrr"]["se"] = p * 0.12 / (2 ** 0.5 * 3)  # z = 3
    assert "beyond sampling noise for at least one" in r4._miss_noise_sentence(s4.criteria(s)[0]["misses"])
    assert r4._miss_noise_sentence([]) == ""


def test_seed004_depth_paragraph_reads_the_numbers():
    """The depth-at-sigma_max-5 paragraph: GD++'s plateau and Diag/Full's fall are computed from the
    results (and the paragraph is absent until two depths past L = 3 exist)."""
    s = fake_s4_summary(0.4, 0.45)
    assert r4._depth_paragraph(s) == []
    for v, vals in {"gdpp": [0.38, 0.381, 0.383], "diag": [0.09, 0.06, 0.05], "full": [0.08, 0.085, 0.06]}.items():
        s["models"][v]["3"]["5"]["steps"] = 2000
        for L, x in zip((4, 5, 6), vals):
            s["models"][v][str(L)] = {"5": {"adjusted": x, "steps": 2000}}
    text = "\n".join(r4._depth_paragraph(s))
    assert "| GD++ | 0.9 / 0.907 | 0.3 / 0.344 | 0.38 / 0.344 | 0.381 / 0.344 | 0.383 / 0.344 |" in text
    assert "GD++ from L = 3 to 6 stays between 0.3 and 0.383" in text and "not flat within 10%" in text
    assert "Diag falls at every added layer (best 0.05 at L = 6" in text
    assert "Full does not fall at every added layer (best 0.06 at L = 6" in text
    s["models"]["gdpp"]["3"]["5"]["adjusted"] = 0.37
    assert "flat within 10%, the paper's plateau" in "\n".join(r4._depth_paragraph(s))


def test_seed004_a_diverged_model_is_retrained_at_a_smaller_lr(monkeypatch):
    calls, bad_calls = [], {1}

    def fake(cfg, rc):
        calls.append(rc["lr"])
        bad = len(calls) in bad_calls
        return {"adjusted": float("nan") if bad else 0.05, "skipped": 1830 if bad else 0, "train_seconds": 1.0,
                "recipe": rc, "steps": 2000}
    monkeypatch.setattr(s4, "_train_model", fake)
    cfg = s4.ModelCell(variant="full", layers=6, column="5", steps=2000, eval=100)
    lr, f = s4.RECIPE["lr"], s4.RETRY_LR_FACTOR
    res = s4.model_cell(cfg)
    assert calls == [lr, pytest.approx(lr * f)]
    assert res["adjusted"] == 0.05 and res["diverged"] == [{"lr": lr, "skipped": 1830, "train_seconds": 1.0}]
    assert res["train_seconds"] == 2.0
    calls.clear()
    bad_calls.clear()
    assert "diverged" not in s4.model_cell(cfg) and len(calls) == 1  # no retry for a finite result
    calls.clear()
    bad_calls.update(range(1, 10))  # diverges every time: RETRIES retries, then the non-finite result stands
    res = s4.model_cell(cfg)
    assert len(calls) == s4.RETRIES + 1 and calls[-1] == pytest.approx(lr * f ** s4.RETRIES)
    assert math.isnan(res["adjusted"]) and len(res["diverged"]) == s4.RETRIES
    s = fake_s4_summary(0.4, 0.45)
    assert "none did" in r4._retry_sentence(s)
    bad_calls.clear()
    bad_calls.update({1, 2})
    calls.clear()
    res = s4.model_cell(cfg)
    s["models"]["full"]["6"] = {"5": {**res, "curve": [{"train_half_mse": 3e25}, {"train_half_mse": 2.0}]}}
    text = r4._retry_sentence(s)
    assert ("Full L = 6, column 5 (at lr 0.003 1830 of 2000 steps had a non-finite loss, at lr 0.001 1830 of 2000 "
            "steps had a non-finite loss; the result is the run at lr 3.33e-04)") in text
    assert "reaches 3.00e+25 in a run that finished" in text


# ------------------------------------------------------------------ seed 002

def test_rho_is_eq_21():
    r = s2.rho(4, nu_W=0.5, nu_F=2.0, nu_C=3.0)
    want = [3 * (0 + 1) + 2, 3 * (1 * 2 * 1 + 0.5) + 2 * 0.5, 3 * (2 * 2 * 0.5 + 0.25) + 2 * 0.25,
            3 * (3 * 2 * 0.25 + 0.125) + 2 * 0.125]
    np.testing.assert_allclose(r, want)


def test_rnn_is_the_convolution_of_its_impulse_response():
    # Prop. 2.1: the data generator's RNN and the design matrix of the convolution agree
    rng = np.random.default_rng(3)
    x, y, (W, F, C) = s2.teacher_data(4, 6, 3, rng, hidden=5)
    L = s2.impulse_torch(torch.tensor(W), torch.tensor(F), torch.tensor(C), 6)[:, 0, :].numpy()  # (T, n_x)
    np.testing.assert_allclose(s2.conv_design(x) @ L.reshape(-1), y.reshape(-1), rtol=1e-12, atol=1e-12)
    # the delay shifts the output
    rng = np.random.default_rng(3)
    _, y2, _ = s2.teacher_data(4, 6, 3, rng, hidden=5, delay=2)
    np.testing.assert_allclose(y2[:, 2:], y[:, :4])
    assert not y2[:, :2].any()


def test_ntk_gram_by_autodiff_matches_the_rank_one_sums():
    res = s2.ntk_cell(s2.NtkCell(n=30, T=4, seed=1, inputs=3))
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([2, 30, 1])))
    W, F, C = s2.init_rnn(30, 1, 1, rng)
    n = 30
    # dL_j/dW = n^{-(j+1)/2} sum_{k<j} (C W^k)^T (W^{j-1-k} F)^T; dL_j/dF = n^{-(j+1)/2} (C W^j)^T;
    # dL_j/dC = n^{-(j+1)/2} (W^j F)^T
    P = [np.linalg.matrix_power(W, j) for j in range(4)]
    grads = []
    for j in range(4):
        s = n ** (-(j + 1) / 2)
        dW = sum(np.outer((C @ P[k]).ravel(), (P[j - 1 - k] @ F).ravel()) for k in range(j)) if j else np.zeros((n, n))
        grads.append(s * np.concatenate([np.ravel(dW), (C @ P[j]).ravel(), (P[j] @ F).ravel()]))
    G = np.array(grads) @ np.array(grads).T
    np.testing.assert_allclose(res["gram_diag"], np.diag(G), rtol=1e-10)
    r = s2.rho(4)
    assert res["gram_rel_err"] == pytest.approx(np.linalg.norm(G - np.diag(r)) / np.linalg.norm(np.diag(r)), rel=1e-9)


def test_scaled_conv_starts_at_the_rnn():
    res = s2.dynamics_cell(s2.DynamicsCell(n=40, steps=3, lr=1e-4, points=3))
    first = res["curve"][0]
    assert first["rnn_train"] == pytest.approx(first["conv_train"], rel=1e-12)  # eq. (58): same function at init


# ------------------------------------------------------------------ seed 000

def test_table7_criteria():
    def run(k, mse, recipe="paper", steps=200):
        return {"k": k, "recipe": recipe, "final_test_mse": mse, "steps": steps,
                "recipe_config": {"lr": 1e-3, "step_size": 10_000, "gamma": 0.9},
                "history": [{"step": 100, "test_mse": mse * 3}, {"step": 200, "test_mse": mse}]}
    s = {"runs": {f"paper-k{k}": run(k, 10.0 ** (-9 + k)) for k in (1, 2, 3, 4)}}
    s["runs"]["standard-k2"] = run(2, 10.0 ** -7 * 20, "standard")
    crit = {c["id"]: c for c in t7.criteria(s)}
    assert not crit["precision"]["met"]  # k = 3: 1e-6 > 1e-7
    assert crit["grows-with-k"]["met"] and crit["recipe-vs-steplr"]["met"]
    assert crit["recipe-vs-steplr"]["ratio_final"] == pytest.approx(20)
    # StepLR's first decay (step 10^4) lies beyond these runs: the optimiser is named plain Adam
    assert "plain Adam at lr 0.001" in crit["recipe-vs-steplr"]["text"]
    s["runs"]["paper-k3"]["final_test_mse"] = 1e-9
    assert not {c["id"]: c for c in t7.criteria(s)}["grows-with-k"]["met"]
    # not at equal steps (the GPU grid's cells each ran what fitted its share): the orderings are not read
    s["runs"]["paper-k3"]["steps"] = 86
    s["runs"]["standard-k2"]["steps"] = 560
    crit = {c["id"]: c for c in t7.criteria(s)}
    assert crit["grows-with-k"]["met"] is None and crit["recipe-vs-steplr"]["met"] is None
    assert "Not at equal steps (k = 1: 200, k = 2: 200, k = 3: 86" in t7.criterion_notes(crit["grows-with-k"])[0]
    assert "StepLR Adam" in t7.std_name({**s["runs"]["standard-k2"], "steps": 20_000})


def test_table7_baselines_are_on_the_evaluation_problems():
    """``baselines`` draws the problems ``Trainer.evaluate`` draws: a model whose read-out is zero
    scores exactly the predicting-0 baseline; the fits shrink with j; x_2 is of the fitted form with j = 2."""
    from numerics.training.modules import ModelConfig
    from numerics.training.trainer import TaskConfig, TrainConfig, Trainer

    cfg = TrainConfig(task=TaskConfig(name="iterate", k=2), model=ModelConfig(width=8, layers=2), steps=1,
                      batch=4, eval_batch=8, seed=3, dtype="float64")
    tr = Trainer(cfg, None, progress=False)
    with torch.no_grad():
        tr.model.out_proj.weight.zero_()
    b = t7.baselines(tr.task, 1500, 3, stream_idx=77)
    assert tr.evaluate(1500, stream_idx=77) == pytest.approx(b["zero"], rel=1e-12)
    assert len(b["poly"]) == 2 and b["poly"][1] < b["poly"][0] < b["zero"]
    exact = t7.baselines(tr.task.__class__(**{**tr.task.__dict__, "k": 1}), 200, 3, stream_idx=1)
    assert exact["poly"][0] > 1e-3  # j = 0 < k = 1: not exact
    rng = np.random.default_rng(0)
    A, bb, _, x0 = tr.task.problems(50, rng)
    M, c = np.einsum("bni,bnj->bij", A, A) / 20, np.einsum("bni,bn->bi", A, bb) / 20
    x2 = tr.task.gd(A, bb, x0, 2)  # x_2 = (I - eta M)^2 x0 + eta (2 I - eta M) c: of the fitted form with j = 2
    e = tr.task.eta
    np.testing.assert_allclose(x2, x0 - 2 * e * np.einsum("bij,bj->bi", M, x0)
                               + e * e * np.einsum("bij,bj->bi", M, np.einsum("bij,bj->bi", M, x0))
                               + 2 * e * c - e * e * np.einsum("bij,bj->bi", M, c), rtol=1e-10, atol=1e-10)


def test_table7_recipe_interval_scales_with_steps():
    assert t7.recipe_settings(6000)["step_size"] == 6000 // t7.DECISIONS
    assert t7.recipe_settings(30)["step_size"] >= 1 and t7.recipe_settings(30)["warmup"] <= 3


# ------------------------------------------------------------------ the command line

@pytest.mark.parametrize("argv,msg", [
    (["nothing", "--out", "X"], "unknown experiment"),
    (["seed004-table1"], "--out"),
    (["report", "--quick"], "--quick"),
    ([], "name an experiment"),
    (["seed002-ntk", "--out", "X", "--export-weights"], "exportable"),
    (["seed004-table1", "--out", "X", "--workers", "0"], "--workers"),
    (["seed002-ntk", "--quick", "--out", "X", "--scheduler", "not an address"], "not a scheduler address"),
    (["seed002-ntk", "--quick", "--out", "X", "--scheduler", "tcp://127.0.0.1:9", "--workers", "1"],
     "cannot be combined with --scheduler"),
    (["seed002-ntk", "--quick", "--out", "X", "--scheduler", "tcp://127.0.0.1:9", "--budget", "60"],
     "cannot be combined with --scheduler"),
    (["seed002-ntk", "--quick", "--out", "X", "--scheduler", "tcp://127.0.0.1:9"], "--scheduler tcp://127.0.0.1:9"),
    (["seed002-ntk", "--out", "X", "--resummarise"], "--resummarise X: needs the summary.json and results.jsonl"),
    (["seed002-ntk", "--out", "X", "--resummarise", "--workers", "1"], "does not apply to --resummarise"),
    (["seed002-ntk", "--out", "X", "--resummarise", "--quick"], "does not apply to --resummarise"),
    (["report", "--resummarise"], "does not apply to 'report'"),
    (["report", "--scheduler", "tcp://127.0.0.1:9"], "does not apply to 'report'"),
])
def test_bad_input_is_one_line_exit_2(argv, msg, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and msg in err and err.count("\n") == 1
    assert not (tmp_path / "X").exists()


def test_out_is_a_file(tmp_path, capsys):
    f = tmp_path / "f"
    f.write_text("x")
    assert main(["seed002-ntk", "--quick", "--out", str(f)]) == 2
    assert "is a file" in capsys.readouterr().err


def test_list(capsys):
    assert main(["--list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in EXPERIMENTS)
