"""Seed 003 MQAR (numerics.training.mqar, numerics.experiments.seed003_mqar): the generator against
an independent reading of Zoology's Def. 3.1, the two models' shapes and causality, the accuracy,
and the pass criteria on hand-made summaries.  (The --quick grid runs end to end through
run_grid in test_experiments_quick.py, which covers every registered experiment.)"""
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from numerics.experiments import EXPERIMENTS
from numerics.experiments import seed003_mqar as mq
from numerics.experiments import seed003_mqar_report as mqr
from numerics.training.mqar import IGNORE, MQARModel, accuracy, mqar

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------ generator

def answers_by_definition(x):
    """Def. 3.1 read directly: at position i, if the token occurred before at some j < i (the first
    such j), the answer is the token at j + 1; else none."""
    out = {}
    for i in range(1, len(x)):
        if x[i] == 0:
            continue
        js = [j for j in range(i) if x[j] == x[i]]
        if js:
            out[i] = int(x[js[0] + 1])
    return out


@pytest.mark.parametrize("N,D,V", [(64, 4, 256), (128, 8, 256), (16, 4, 18)])
def test_generator_against_the_definition(N, D, V):
    check_against_the_definition(*mqar(300, N, D, V, seed=3), N, D, V)


def check_against_the_definition(X, Y, N, D, V):
    """Every example of ``(X, Y)`` is an MQAR example of Def. 3.1 as the reference generator makes it."""
    assert X.shape == Y.shape == (len(X), N) and X.dtype == Y.dtype == np.int64
    for x, y in zip(X, Y):
        keys, vals = x[0:2 * D:2], x[1:2 * D:2]
        assert len(set(keys)) == D and len(set(vals)) == D
        assert ((1 <= keys) & (keys < V // 2)).all() and ((V // 2 <= vals) & (vals < V)).all()
        # every key asked exactly once after the block, at an even offset; the rest of the tail is filler 0
        tail = x[2 * D:]
        qpos = np.nonzero(tail)[0]
        assert sorted(tail[qpos]) == sorted(keys) and (qpos % 2 == 0).all()
        labelled = {int(i): int(y[i]) for i in np.nonzero(y != IGNORE)[0]}
        # the labels are exactly the definition's answers at the query positions (not inside the block,
        # where no token repeats)
        want = {i: a for i, a in answers_by_definition(x).items() if i >= 2 * D}
        assert labelled == want and len(labelled) == D
        assert all(v == dict(zip(keys, vals))[x[i]] for i, v in labelled.items())


def test_generator_is_a_function_of_its_seed_and_gaps_follow_a_power_law():
    a, b = mqar(50, 64, 4, 256, seed=1), mqar(50, 64, 4, 256, seed=1)
    assert all(np.array_equal(p, q) for p, q in zip(a, b))
    assert not np.array_equal(a[0], mqar(50, 64, 4, 256, seed=2)[0])
    X, _ = mqar(4000, 64, 4, 256, seed=0, power_a=0.01)
    tail = X[:, 8:]
    gaps = np.nonzero(tail)[1] // 2  # gap index g of each query
    space = (64 - 8) // 2
    counts = np.bincount(gaps, minlength=space)
    # p(g) ~ a g^(a-1): the first gap is drawn far more often than the last, and the counts fall overall
    assert counts[0] > 3 * counts[-1]
    assert np.corrcoef(np.arange(space), counts)[0, 1] < -0.5
    # with a = 1 the gaps are uniform: no such fall
    Xu, _ = mqar(4000, 64, 4, 256, seed=0, power_a=1.0)
    cu = np.bincount(np.nonzero(Xu[:, 8:])[1] // 2, minlength=space)
    assert cu.max() < 1.5 * cu.min()


def test_random_non_queries_fill_only_the_filler():
    X0, Y0 = mqar(20, 64, 4, 256, seed=4)
    X1, Y1 = mqar(20, 64, 4, 256, seed=4, random_non_queries=True)
    assert np.array_equal(Y0, Y1)
    keep = X0 != 0
    assert np.array_equal(X0[keep], X1[keep]) and (X1[~keep] != 0).mean() > 0.9


@pytest.mark.parametrize("kw,msg", [
    ({"N": 63}, "even"), ({"D": 17}, r"\[1, N/4\]"), ({"D": 0}, r"\[1, N/4\]"), ({"vocab": 64}, "larger than N"),
    ({"vocab": 257}, "even"), ({"power_a": 0.0}, "power_a"), ({"num_examples": 0}, "num_examples")])
def test_generator_refuses_bad_arguments(kw, msg):
    args = {"num_examples": 4, "N": 64, "D": 4, "vocab": 256, "seed": 0} | kw
    with pytest.raises(ValueError, match=msg):
        mqar(**args)


# ------------------------------------------------------------------ models

@pytest.mark.parametrize("mlp_mult", [0, 2])
@pytest.mark.parametrize("mixer", ["attention", "baseconv"])
def test_model_shapes_and_causality(mixer, mlp_mult):
    N, V, d = 32, 64, 16
    m = MQARModel(mixer, V, N, d, mlp_mult=mlp_mult, seed=1).double()
    # mlp_mult = 0: no MLP (the reference code's Fig. 2 configs, Identity state mixer)
    assert all((b.mlp is None) == (mlp_mult == 0) for b in m.blocks)
    X, Y = mqar(3, N, 2, V, seed=0)
    x = torch.as_tensor(X)
    assert m(x).shape == (3, N, V)
    mask = torch.as_tensor(Y != IGNORE)
    assert m(x, mask).shape == (int(mask.sum()), V)
    assert (m.pos is not None) == (mixer == "attention")
    assert_causal(m, x, V)


def assert_causal(m, x, V):
    """Changing the tokens after position t leaves every output of ``m`` at or before t unchanged, and
    later outputs do see them."""
    h, (n, N) = m.features(x), x.shape
    for t in (0, 7, N - 2):
        x2 = x.clone()
        x2[:, t + 1:] = torch.randint(0, V, (n, N - t - 1))
        h2 = m.features(x2)
        torch.testing.assert_close(h2[:, :t + 1], h[:, :t + 1], rtol=1e-10, atol=1e-10)
        assert (h2[:, t + 1:] - h[:, t + 1:]).abs().max() > 1e-6


def test_baseconv_mixer_is_the_toolkits_layer():
    from numerics.training.modules import BaseConvBlock

    m = MQARModel("baseconv", 64, 32, 8, seed=0).double()
    mix = m.blocks[0].mixer
    assert isinstance(mix, BaseConvBlock) and mix.causal and mix.conv_method == "fft"
    u = torch.randn(2, 32, 8, dtype=torch.float64)
    # the FFT convolution the model trains with equals the toolkit layer's direct (reference) sum
    torch.testing.assert_close(mix(u), mix.layer().forward(u, conv_method="direct"), rtol=1e-9, atol=1e-9)


def test_model_refuses_bad_arguments():
    with pytest.raises(ValueError, match="mixer"):
        MQARModel("hyena", 64, 32, 8)
    with pytest.raises(ValueError, match="width"):
        MQARModel("attention", 64, 32, 0)
    with pytest.raises(ValueError, match="mlp_mult"):
        MQARModel("attention", 64, 32, 8, mlp_mult=-1)


def test_accuracy_counts_exact_matches_at_the_queries():
    X, Y = mqar(40, 32, 4, 64, seed=2)

    class Oracle(MQARModel):
        def __init__(self, wrong_every=0):
            super().__init__("attention", 64, 32, 4)
            self.wrong_every = wrong_every

        def forward(self, x, mask=None):
            ans = torch.zeros(x.shape[0], x.shape[1], dtype=torch.long)
            for b in range(x.shape[0]):
                for i, a in answers_by_definition(x[b].numpy()).items():
                    ans[b, i] = a
            ans = ans[mask]
            if self.wrong_every:
                ans[:: self.wrong_every] = 0  # token 0 is never an answer
            return torch.nn.functional.one_hot(ans, 64).double()

    assert accuracy(Oracle(), X, Y, batch=7) == 1.0
    n = int((Y != IGNORE).sum())
    assert n == 160
    # every third answer (per batch of 8 examples) made wrong
    wrong = sum(len(range(0, 32, 3)) for _ in range(5))
    assert accuracy(Oracle(3), X, Y, batch=8) == pytest.approx((n - wrong) / n)


def test_cell_trains_and_refuses_a_bad_mixer():
    cfg = {**mq.configs(True)[0], "steps": 6, "eval_every": 3, "train_examples": 64, "test_examples": 16}
    r = mq.cell(cfg)
    assert r["steps_run"] == 6 and [h["step"] for h in r["history"]] == [3, 6]
    assert 0 <= r["best_test_acc"] <= 1 and r["best_test_acc"] == max(h["test_acc"] for h in r["history"])
    with pytest.raises(ValueError, match="mixer"):
        mq.cell({**cfg, "mixer": "rwkv"})


def test_cell_config_is_typed_and_refuses_bad_keys():
    # every grid's config reads into MQARCell and gives back its dict unchanged (the committed records' ids)
    for quick in (True, False):
        for c in mq.configs(quick) + mq.gpu_configs(quick):
            assert mq.config_of(c).to_mapping() == c
    c = mq.configs(True)[0]
    assert mq.config_of({k: v for k, v in c.items() if k != "power_a"}).power_a == 0.1  # the default, in one place
    for bad, msg in (({"bogus": 1}, "unknown key"), ({"long_conv": "fft"}, "long_conv must be one of"),
                     ({"lr": 0.0}, "lr must be > 0"), ({"steps": 2.5}, "steps must be an integer"),
                     ({"part": "other"}, "part must be one of")):
        with pytest.raises(ValueError, match=msg):
            mq.config_of({**c, **bad})
    with pytest.raises(ValueError, match="needs 'mixer'"):
        mq.config_of({k: v for k, v in c.items() if k != "mixer"})


def test_full_grid_tunes_per_mixer_with_three_seeds():
    every = mq.configs(False)
    cs = [c for c in every if not c.get("part")]
    tune = [c for c in every if c.get("part") == "tune"]
    long = [c for c in every if c.get("part") == "long"]
    # the tuning: each mixer at one cell of its own with the paper's four rates (np.logspace(-4, -2, 4)) and 3e-2
    assert sorted((c["mixer"], c["lr"]) for c in tune) == sorted((m, lr) for m in mq.MIXERS
                                                                   for lr in [*np.logspace(-4, -2, 4), 3e-2])
    assert all(c["d"] == mq.TUNE["d"][c["mixer"]] and c["N"] == mq.TUNE["N"] for c in tune)
    # the longer run: the grid's settings but at least 2x the steps
    assert len(long) == 1 and long[0]["steps"] == mq.LONG["steps"] >= 2 * mq.FULL["steps"]
    # the reference configs' implicit filter beside the grid's (explicit) one: BaseConv at one cell, every seed
    filt = [c for c in every if c.get("part") == "filter"]
    assert sorted(c["seed"] for c in filt) == sorted(mq.FILTER["seeds"]) and set(mq.FILTER["seeds"]) <= set(mq.FULL["seeds"])
    assert all(c["mixer"] == "baseconv" and c["long_conv"] == "implicit" != mq.FULL["long_conv"] for c in filt)
    assert all({k: v for k, v in c.items() if k not in ("long_conv", "part", "seed")} ==
               {k: v for k, v in filt[0].items() if k not in ("long_conv", "part", "seed")} for c in filt)
    # attention one width below the grid's at every N, every seed (the grid's widths start where it learns)
    small = [c for c in every if c.get("part") == "small"]
    assert sorted((c["N"], c["seed"]) for c in small) == sorted((N, sd) for N, _ in mq.FULL["sizes"]
                                                                for sd in mq.FULL["seeds"])
    assert all(c["mixer"] == "attention" and c["d"] < min(mq.FULL["dims"]["attention"]) for c in small)
    # more seeds of BaseConv at the widths where it crosses the threshold: seeds beyond the grid's, at every N
    more = [c for c in every if c.get("part") == "seeds"]
    assert sorted((c["N"], c["d"], c["seed"]) for c in more) == sorted(
        (N, d, sd) for N, _ in mq.FULL["sizes"] for d in mq.MORE_SEEDS["dims"] for sd in mq.MORE_SEEDS["seeds"])
    assert not set(mq.MORE_SEEDS["seeds"]) & set(mq.FULL["seeds"]) and set(mq.MORE_SEEDS["dims"]) <= set(mq.FULL["dims"]["baseconv"])
    assert all({k: v for k, v in c.items() if k not in ("seed", "part")} in
               [{k: v for k, v in g.items() if k != "seed"} for g in cs] for c in more)
    assert {c.get("part") for c in every} == {None, *mq.PARTS}
    assert {c["mixer"] for c in cs} == set(mq.MIXERS) and "seed003-mqar" in EXPERIMENTS
    assert len(mq.FULL["seeds"]) >= 3 and {c["seed"] for c in cs} == set(mq.FULL["seeds"])
    # every (mixer, N, d) at every learning rate of its mixer, once per seed
    for m in mq.MIXERS:
        mine = [c for c in cs if c["mixer"] == m]
        assert {c["lr"] for c in mine} == set(mq.FULL["lrs"][m]) and {c["d"] for c in mine} == set(mq.FULL["dims"][m])
        assert len(mine) == len(mq.FULL["sizes"]) * len(mq.FULL["dims"][m]) * len(mq.FULL["lrs"][m]) * len(mq.FULL["seeds"])
    assert len({(c["mixer"], c["N"], c["d"], c["lr"], c["seed"]) for c in cs}) == len(cs)
    # a fair comparison: both mixers share everything but the grid's own axes (the data too: one data seed)
    recipe = {tuple(sorted((k, v) for k, v in c.items() if k not in ("mixer", "N", "D", "d", "lr", "seed"))) for c in cs}
    assert len(recipe) == 1 and mq.FULL["mlp_mult"] == 0 and cs[0]["data_seed"] == mq.FULL["data_seed"]


# ------------------------------------------------------------------ summary and criteria

def row(m, N, d, accs, *, lr=1e-2, seed=0, steps=1000, first=None, loss=1.0, D=None):
    """A finished cell as the sweep runner records it: test accuracy ``accs`` at steps 100, 200, ..."""
    hist = [{"step": 100 * (i + 1), "train_loss": loss, "test_acc": a} for i, a in enumerate(accs)]
    res = {"mixer": m, "N": N, "D": D or N // 16, "d": d, "lr": lr, "best_test_acc": max(accs),
           "final_test_acc": accs[-1], "steps_run": steps, "final_train_loss": loss, "params": 1, "history": hist,
           "stopped": None}
    cfg = {"mixer": m, "N": N, "D": D or N // 16, "d": d, "lr": lr, "seed": seed, "steps": steps,
           **{k: mq.FULL[k] for k in mq.SHARED}}
    return {"status": "ok", "config": cfg, "result": res, "cpu_s": 1.0, "wall_s": 1.0}


def grid(acc: dict, steps=None) -> list[dict]:
    """acc[(mixer, N)] = {d: final accuracy}; every run 1,000 steps unless ``steps[(mixer, N, d)]``."""
    rows = []
    for (m, N), by_d in acc.items():
        for d, a in by_d.items():
            rows.append(row(m, N, d, [0.1, a], steps=(steps or {}).get((m, N, d), 1000)))
    return rows


def verdicts(rows):
    return {c["id"]: c["met"] for c in mq.summarise(rows, False)["criteria"]}


PAPER_LIKE = {("attention", 64): {16: 0.95, 32: 1.0, 64: 1.0}, ("attention", 128): {16: 0.93, 32: 0.99, 64: 1.0},
              ("baseconv", 64): {16: 0.1, 32: 0.3, 64: 0.92}, ("baseconv", 128): {16: 0.05, 32: 0.1, 64: 0.4}}


def test_criteria_paper_like_grid_meets_all():
    s = mq.summarise(grid(PAPER_LIKE), False)
    assert {c["id"]: c["met"] for c in s["criteria"]} == {"attention-small-d": True, "gap": True, "grows-with-N": True,
                                                          "widths-vs-N": True}
    assert mq.at_least_N(s) == {"met": True, "per_N": {"64": True, "128": None}, "notes": [
        "N = 128: BaseConv reaches 0.9 at no d of the grid"]}
    gap = s["criteria"][1]
    assert gap["smallest"] == {"64": {"attention": 16, "baseconv": 64}, "128": {"attention": 16, "baseconv": None}}
    assert mq.learn_steps(s, "baseconv") == 200 and mq.counts(s, "baseconv", 128, 64)


def test_criteria_each_failure():
    # attention short of 0.9 at the smallest d (it learns elsewhere within as many steps: counts)
    assert verdicts(grid(PAPER_LIKE | {("attention", 128): {16: 0.5, 32: 0.99, 64: 1.0}}))["attention-small-d"] is False
    # BaseConv reaches 0.9 at a d no larger than attention's smallest: no gap
    v = verdicts(grid(PAPER_LIKE | {("baseconv", 64): {16: 0.95, 32: 1.0, 64: 1.0}}))
    assert v["gap"] is False
    # the smallest d does not grow with N
    v = verdicts(grid(PAPER_LIKE | {("baseconv", 128): {16: 0.05, 32: 0.1, 64: 0.95}}))
    assert v["grows-with-N"] is False and v["gap"] is True
    # BaseConv reaches 0.9 below d = N (at N = 64 from d = 32): the gap holds, d >= N does not
    s = mq.summarise(grid(PAPER_LIKE | {("baseconv", 64): {16: 0.1, 32: 0.95, 64: 0.99}}), False)
    assert mq.at_least_N(s)["met"] is False and {c["id"]: c["met"] for c in s["criteria"]}["gap"] is True


def test_criteria_count_only_where_the_mixer_learns():
    # BaseConv reaches 0.9 nowhere: the gap and the growth are not read (never met by default)
    flat = PAPER_LIKE | {("baseconv", 64): {16: 0.1, 32: 0.2, 64: 0.3}}
    v = verdicts(grid(flat))
    assert v == {"attention-small-d": True, "gap": None, "grows-with-N": None, "widths-vs-N": None}
    assert mq.at_least_N(mq.summarise(grid(flat), False))["met"] is None
    assert any("reaches 0.9 nowhere" in n for n in mq.summarise(grid(flat), False)["criteria"][1]["notes"])
    # BaseConv learns at N = 64 only after its 1,000 steps (first at step 200); at N = 128 its runs stopped after
    # 150 steps (a GPU budget's share): their staying below counts for nothing
    short = {("baseconv", 128, d): 150 for d in (16, 32, 64)}
    s = mq.summarise(grid(PAPER_LIKE, short), False)
    c = {x["id"]: x for x in s["criteria"]}
    assert c["gap"]["per_N"] == {"64": True, "128": None} and c["gap"]["met"] is True
    assert c["grows-with-N"]["met"] is None and "not read" in c["grows-with-N"]["notes"][0]
    text = "\n".join(mqr.criteria_lines(s))
    assert "**met** where read (not read at N = 128)" in text


def test_median_over_seeds_and_the_best_learning_rate():
    rows = [row("attention", 64, 16, [a], seed=sd, lr=1e-2) for sd, a in enumerate((0.99, 0.3, 0.25))]
    rows += [row("attention", 64, 16, [a], seed=sd, lr=1e-3) for sd, a in enumerate((0.5, 0.6, 0.55))]
    b = mq.summarise(rows, False)["best"]["attention/64/16"]
    # one lucky seed does not make the cell: the median at 1e-2 is 0.3 < 0.55 at 1e-3, which is kept
    assert b["lr"] == 1e-3 and b["acc"] == pytest.approx(0.55) and (b["min"], b["max"]) == (0.5, 0.6)
    assert b["accs"] == [0.5, 0.6, 0.55] and b["reached"] == 0 and set(b["by_lr"]) == {"0.01", "0.001"}


def test_plateau_and_memorisation_readings():
    rows = [row("baseconv", 64, 256, [0.3, 0.55], loss=0.03), row("attention", 64, 512, [0.2, 0.25], loss=7.0),
            row("attention", 64, 64, [0.5, 0.99])]
    text = "\n".join(mqr.plateau_lines(mq.summarise(rows, False)))
    assert "attention: N = 64 (1/D = 0.25): 1 of 2 runs left the plateau, 1 reached 0.9" in text
    assert "Fitted the training set without learning the lookup" in text and "d = 256, seed 0: training loss 0.03" in text
    assert "nearer log V" in text and "d = 512, lr 0.01, seed 0: 7" in text


# ------------------------------------------------------------------ the reference-faithful models and generator

@pytest.mark.parametrize("N,D,V", [(64, 4, 8192), (32, 8, 40)])
def test_fast_generator_against_the_definition(N, D, V):
    check_against_the_definition(*mq.mqar_data(300, N, D, V, seed=5, power_a=0.1), N, D, V)
    a = mq.mqar_data(20, N, D, V, seed=1)
    assert all(np.array_equal(p, q) for p, q in zip(a, mq.mqar_data(20, N, D, V, seed=1)))


def test_fast_generator_gap_law_matches_the_reference_law():
    # the gap of each query: P(g) ~ a (g + 1)^(a - 1) for the first draw; with D = 1 exactly that law
    N, a = 64, 0.1
    X, _ = mq.mqar_data(40000, N, 1, 256, seed=0, power_a=a)
    gaps = np.nonzero(X[:, 2:])[1] // 2
    space = (N - 2) // 2
    p = a * np.arange(1, space + 1) ** (a - 1)
    p /= p.sum()
    freq = np.bincount(gaps, minlength=space) / len(gaps)
    assert np.abs(freq - p).max() < 0.01


@pytest.mark.parametrize("mixer", ["attention", "baseconv"])
@pytest.mark.parametrize("long_conv", ["implicit", "explicit"])
def test_reference_models_are_causal(mixer, long_conv):
    N, V, d = 32, 64, 16
    m = mq.build_model(mixer, V, N, d, seed=1, long_conv=long_conv).double().eval()
    X, Y = mq.mqar_data(3, N, 2, V, seed=0)
    x = torch.as_tensor(X)
    assert m(x).shape == (3, N, V)
    assert (m.pos is not None) == (mixer == "attention")
    if mixer == "baseconv":
        # the reference kernel_size [3, -1]: a width-3 short convolution in layer 1, a long one in layer 2
        assert m.layers[0].sequence_mixer.conv.conv.kernel_size == (3,)
        assert not hasattr(m.layers[1].sequence_mixer.conv, "conv")
    assert_causal(m, x, V)


def test_reference_long_convolution_is_the_causal_sum_plus_skip():
    N, d = 16, 4
    m = mq.build_model("baseconv", 64, N, d, seed=0, long_conv="explicit").double()
    conv = m.layers[1].sequence_mixer.conv
    u = torch.randn(2, N, d, dtype=torch.float64)
    k = conv.filter.detach()
    want = u.clone()
    for i in range(N):
        for j in range(i + 1):
            want[:, i] += k[:, j] * u[:, i - j]
    torch.testing.assert_close(conv(u), want, rtol=1e-9, atol=1e-9)


def test_reference_init():
    m = mq.build_model("attention", 8192, 64, 256, seed=0).requires_grad_(False)
    w = m.layers[0].sequence_mixer.out_proj.weight
    assert abs(float(w.std()) - 0.02 / 2) < 0.001  # 0.02 / sqrt(2 layers)
    assert abs(float(m.layers[0].sequence_mixer.Wqkv.weight.std()) - 0.02) < 0.001
    assert abs(float(m.embed.weight.std()) - 0.02) < 0.001 and float(m.layers[0].sequence_mixer.Wqkv.bias.abs().max()) == 0


def test_committed_cpu_results_are_this_grid():
    """docs/experiments/seed003-mqar holds a finished record of every cell of this code's grid, with the very
    config (the results were made by this grid; cells of an earlier grid that failed are reported as such)."""
    import json
    from pathlib import Path

    d = Path(__file__).resolve().parents[2] / "docs" / "experiments" / "seed003-mqar"
    assert (d / "results.jsonl").is_file(), "the CPU run of seed003-mqar is committed: docs/experiments.md reads it"
    rows = [json.loads(line) for line in (d / "results.jsonl").read_text().splitlines() if line.strip()]
    done = {json.dumps(r["config"], sort_keys=True) for r in rows if r["status"] == "ok"}
    assert {json.dumps(c, sort_keys=True) for c in mq.configs(False)} <= done


def test_report_reads_the_parts_beside_the_grid():
    """The implicit-filter runs and the tuning cells (parts the criteria do not read) in the report's words."""
    def part(r, name, **kw):
        r["config"] |= {"part": name, **kw}
        return r
    extra = [part(row("baseconv", 64, 64, [0.2, 0.3]), "filter", long_conv="implicit")]
    extra += [part(row(m, 64, d, [a], lr=lr), "tune") for m, d in (("attention", 16), ("baseconv", 64))
              for lr, a in ((1e-3, 0.3), (1e-2, 0.95), (3e-2, 0.5))]
    extra += [part(row("attention", N, 8, [a], seed=sd), "small") for N in (64, 128) for sd, a in ((0, 0.95), (1, 0.3))]
    s = mq.summarise(grid(PAPER_LIKE) + extra, False)
    assert [x["seed"] for x in s["filter"]] == [0] and len(s["tune"]) == 6 and len(s["runs"]) == 12
    why = mqr.why_line(s)
    assert "The widths start at d = 16 for both mixers" in why and "(d = 8 beside the grid, below)" in why
    assert "BaseConv's go up to d = 64, its smallest width reaching 0.9 at N = 64" in why
    small = mqr.small_lines(s)[0]
    assert "**Attention at d = 8**" in small and "the grid's widths start at d = 16" in small
    assert "N = 64: 0.95 (seed 0, from step 100), 0.3 (seed 1), 1 of 2 at or above 0.9; N = 128:" in small
    text = "\n".join(mqr.filter_lines(s))
    assert "0.3 (seed 0), 0 of 1 at or above 0.9" in text and "explicit filter at the same cell: median 0.92" in text
    tune = mqr.tuning_lines(s)
    assert "| attention | 16 | 0.3 (1,000) | 0.95 (1,000) | 0.5 (1,000) | 0.01 |" in tune
    assert "| baseconv | 64 |" in "\n".join(tune) and "and 0.03;" in tune[0]
    assert "Each mixer's grid rate is its tuned rate." in tune[-1]
    # the difference that names the filter counts the implicit runs that reached the threshold
    s["config"] = {**s["config"], "long_conv": "explicit"}
    assert any("with it 0 of 1 runs at N = 64, d = 64 reached 0.9" in x for x in mqr.differences(s))


def test_report_counts_baseconv_seeds_and_names_split_cells():
    rows = [row("baseconv", 64, d, [a], seed=sd) for d, accs in ((32, (0.3, 0.95, 0.2)), (64, (0.95, 0.96, 0.97)))
            for sd, a in enumerate(accs)]
    text = mqr.bc_seeds(mq.summarise(rows, False))
    assert "per width: N = 64: d = 32: 1 of 3, d = 64: 3 of 3." in text
    assert "N = 64, d = 32: 0.3 (seed 0), 0.95 (seed 1), 0.2 (seed 2), median 0.3, so the smallest d" in text
    rows = [row("baseconv", 64, 32, [a], seed=sd) for sd, a in enumerate((0.2, 0.3, 0.25))]
    assert "split" not in mqr.bc_seeds(mq.summarise(rows, False))


def test_report_says_why_growth_is_not_met():
    s = mq.summarise(grid(PAPER_LIKE | {("baseconv", 128): {16: 0.05, 32: 0.1, 64: 0.95}}), False)
    text = mqr.growth_text(s)
    assert "per N (N = 64: d = 64, N = 128: d = 64): the growth with N that Claim 1 states is not shown" in text
    assert "the grid's step between widths, a factor of two" in text
    # met: the same sentence says so, with the resolution of the grid's widths
    text = mqr.growth_text(mq.summarise(grid(PAPER_LIKE), False))
    assert "grows with N (N = 64: d = 64, N = 128: above d = 64): the growth with N that Claim 1 states" in text
    assert "a factor of two apart" in text
    # widths not a factor of two apart: the steps named; not read: nothing said
    half = PAPER_LIKE | {("baseconv", 64): {16: 0.1, 32: 0.3, 48: 0.5, 64: 0.92}}
    assert "factors of 1.33, 1.5, 2 apart" in mqr.growth_text(mq.summarise(grid(half), False))
    assert ("BaseConv's go up to d = 64, with d = 48 between the powers of two, so that a growth with N of less than "
            "a factor of two in width can show") in mqr.why_line(mq.summarise(grid(half), False))
    assert "between the powers of two" not in mqr.why_line(mq.summarise(grid(PAPER_LIKE), False))
    flat = PAPER_LIKE | {("baseconv", 64): {16: 0.1, 32: 0.2, 64: 0.3}}
    assert mqr.growth_text(mq.summarise(grid(flat), False)) == ""


#: three N: BaseConv's smallest d reaching 0.9 is 32, 64 and above 64 (its cells there trained as long as it took
#: to learn elsewhere)
THREE = {("attention", N): {16: 0.95, 32: 1.0, 64: 1.0} for N in (64, 128, 256)} | {
    ("baseconv", 64): {16: 0.1, 32: 0.92, 64: 0.99}, ("baseconv", 128): {16: 0.05, 32: 0.4, 64: 0.95},
    ("baseconv", 256): {16: 0.05, 32: 0.1, 64: 0.5}}


def growth(rows) -> dict:
    return {c["id"]: c for c in mq.summarise(rows, False)["criteria"]}["grows-with-N"]


def test_growth_reads_every_consecutive_pair_of_N():
    s = mq.summarise(grid(THREE), False)
    g = growth(grid(THREE))
    assert g["met"] is True and g["steps"] == {"64->128": ">", "128->256": ">"}
    assert g["smallest"] == {"64": 32, "128": 64, "256": None}
    line = "\n".join(mqr.criteria_lines(s))
    assert "BaseConv's smallest d reaching the threshold: N = 64: 32, N = 128: 64, N = 256: none" in line
    assert "from one N to the next: 64 to 128: larger, 128 to 256: larger." in line
    # the same width at a middle N and a larger one at the end: still growing (never smaller)
    same = THREE | {("baseconv", 128): {16: 0.05, 32: 0.91, 64: 0.95}}
    g = growth(grid(same))
    assert g["met"] is True and g["steps"] == {"64->128": "=", "128->256": ">"}
    # smaller at a larger N than at the N before it: not met, though the ends grow
    dip = THREE | {("baseconv", 128): {16: 0.05, 32: 0.1, 64: 0.95}, ("baseconv", 64): {16: 0.1, 32: 0.2, 64: 0.99},
                   ("baseconv", 256): {16: 0.05, 32: 0.95, 64: 0.99}}
    g = growth(grid(dip))
    assert g["steps"] == {"64->128": "=", "128->256": "<"} and g["met"] is False
    dip = THREE | {("baseconv", 128): {16: 0.95, 32: 0.96, 64: 0.99}}
    g = growth(grid(dip))
    assert g["steps"]["64->128"] == "<" and g["met"] is False
    # a middle N that cannot be read (its cells stopped before BaseConv learns anywhere): not read, never met
    short = {("baseconv", 128, d): 150 for d in (16, 32, 64)}
    mid = THREE | {("baseconv", 128): {16: 0.05, 32: 0.1, 64: 0.3}}
    g = growth(grid(mid, short))
    assert g["met"] is None and g["steps"]["64->128"] is None and "not read" in g["notes"][0]


def test_carried_records_are_counted_and_named_in_the_cost():
    rows = grid(PAPER_LIKE)
    for r in rows[:3]:
        r["made_by"] = {"package": "0.1.0", "sources": "39c99c7b269968c5", "modules": 35, "finished": "2026-11-26"}
    s = mq.summarise(rows, False)
    part = {"cells": 3, "sources": ["39c99c7b269968c5"], "finished": ["2026-11-26"], "cpu_s": 3.0}
    assert s["carried"] == {**part, "verified": None, "by_hand": part}
    assert mq.summarise(grid(PAPER_LIKE), False)["carried"] is None
    s["run"] = {"cells": len(rows), "failed": 0, "cpu_s": 24.0, "cell_wall_s": 24.0, "wall_s": 9.0, "resumed": 3,
                "workers": 2, "finished": "2026-12-02T03:00:00+00:00",
                "machine": {"cores": 2, "loadavg": [1.0], "torch": "2.13.0+cpu"}}
    line = mqr.cost_line(s)
    assert "3 of the cells are records made by an earlier code version (sources 39c99c7b269968c5, finished " in line
    assert "carried over by hand rather than trained again" in line and "not verified by a program" in line
    # a record carried by the command (numerics/experiments/carry.py) is named as verified, with its commit
    rows[0]["carried"] = {"commit": "5954a04255b5" + "0" * 28, "cell_code": "ab" * 8, "command": "x"}
    s["carried"] = mq.summarise(rows, False)["carried"]
    assert s["carried"]["verified"]["cells"] == 1 and s["carried"]["by_hand"]["cells"] == 2
    line = mqr.cost_line(s)
    assert "2 of the cells are records made by an earlier code version" in line
    assert "1 of the cells are records made by an earlier code version" in line and "commit(s) 5954a04255b5 (1)" in line
    s["carried"] = None
    assert "earlier code version" not in mqr.cost_line(s)


def test_report_reads_baseconv_at_equal_width_across_N():
    text = mqr.equal_width_text(mq.summarise(grid(PAPER_LIKE), False))
    # (a run's best accuracy counts its first evaluation, 0.1, too: d = 16 reads 0.1 at both N)
    assert text == ("At equal width BaseConv's median accuracy (N = 64 -> N = 128) falls with N at d = 32 (0.3 -> 0.1), "
                    "d = 64 (0.92 -> 0.4); it does not at d = 16 (0.1 -> 0.1).")
    mixed = PAPER_LIKE | {("baseconv", 64): {16: 0.3, 32: 0.2, 64: 0.995}, ("baseconv", 128): {16: 0.2, 32: 0.25, 64: 0.999}}
    text = mqr.equal_width_text(mq.summarise(grid(mixed), False))
    assert text.endswith("falls with N at d = 16 (0.3 -> 0.2); it does not at d = 32 (0.2 -> 0.25); at d = 64 every "
                         "N's runs stopped at 0.99 (the early stop).")
    one_N = {k: v for k, v in PAPER_LIKE.items() if k[1] == 64}
    assert mqr.equal_width_text(mq.summarise(grid(one_N), False)) == ""


def test_report_bounds_the_growth_factor_and_names_split_smallest_cells():
    # THREE: smallest 32 at N = 64 (in (16, 32]), 64 at N = 128 (in (32, 64]), none at N = 256: no factor there
    s = mq.summarise(grid(THREE), False)
    assert mqr.growth_factor(s, [64, 128, 256]) == ""
    text = mqr.growth_factor(s, [64, 128])
    assert text == ("from N = 64 to 128 (x2) it grows by a factor in (1, 4) (it lies in (16, 32] at N = 64 and in "
                    "(32, 64] at N = 128): consistent with growth in proportion to N at these sizes, where it is 0.5 "
                    "times N (the paper: d >= N)")
    # widths closer than the factor of N: less than in proportion (96 -> 128 while N doubles)
    close = {("baseconv", 16): {64: 0.5, 96: 0.95, 128: 0.99}, ("baseconv", 32): {64: 0.3, 96: 0.3, 128: 0.95}}
    text = mqr.growth_factor(mq.summarise(grid(close), False), [16, 32])
    assert "grows by a factor in (1, 2) (it lies in (64, 96] at N = 16 and in (96, 128] at N = 32): less than in " \
           "proportion to N at these sizes, where it is 4 to 6 times N" in text
    # the smallest width's seeds split: named
    rows = [row("baseconv", 64, d, [a], seed=sd) for d, accs in ((32, (0.3, 0.95, 0.92)), (64, (0.95, 0.96, 0.97)))
            for sd, a in enumerate(accs)]
    assert mqr.split_at_smallest(mq.summarise(rows, False), [64]) == (
        "the seeds split at the smallest width at N = 64 (d = 32: 2 of 3 seeds), so the growth rests on the medians there")
    assert mqr.split_at_smallest(mq.summarise(grid(THREE), False), [64, 128]) == ""


def test_report_reads_more_seeds_where_baseconv_crosses():
    def more(N, d, accs):
        out = []
        for sd, a in zip((3, 4), accs):
            r = row("baseconv", N, d, [a], seed=sd)
            r["config"]["part"] = "seeds"
            out.append(r)
        return out
    base = {("attention", N): {16: 0.95} for N in (64, 128)} | {
        ("baseconv", 64): {16: 0.3, 32: 0.95, 64: 0.99}, ("baseconv", 128): {16: 0.2, 32: 0.4, 64: 0.95}}
    rows = grid(base) + more(64, 32, (0.95, 0.2)) + more(64, 64, (0.99, 0.99)) + more(128, 32, (0.3, 0.3)) \
        + more(128, 64, (0.96, 0.5))
    s = mq.summarise(rows, False)
    assert len(s["more_seeds"]) == 8 and len(s["runs"]) == 8  # not read by the criteria
    # the part's runs do not replace the summary's seed numbers, which the setup line and the differences read
    assert s["seeds"] == [0] and "with seeds 0 (initialisation and data order)" in mqr.setup_line(s)
    assert any(x.startswith("1 seed(s) per cell") for x in mqr.differences(s))
    assert "more seeds cells" in mqr.cost_line(s | {"run": {"cells": 16, "failed": 0, "cpu_s": 16.0, "cell_wall_s": 16.0,
                                                             "wall_s": 9.0, "resumed": 0, "workers": 2,
                                                             "finished": "2026-12-02T03:00:00+00:00",
                                                             "machine": {"cores": 2, "loadavg": [1.0],
                                                                         "torch": "2.13.0+cpu"}}})
    text = mqr.more_seeds_lines(s)[0]
    assert "BaseConv at d = 32, 64 with seeds 3, 4 beside the grid's" in text
    assert "N = 64, d = 32: 0.95 (seed 3), 0.2 (seed 4); over seeds 0, 3, 4: median 0.95, 2 of 3 at or above 0.9" in text
    assert "N = 128, d = 64: 0.96 (seed 3), 0.5 (seed 4); over seeds 0, 3, 4: median 0.95, 2 of 3" in text
    assert "is N = 64: d = 32, N = 128: d = 64: it grows with N over these seeds too; from N = 64 to 128 (x2) it " \
           "grows by a factor in (1, 4)" in text
    # above the widths with more seeds at N = 128: the grid's next width reaching it there is read
    rows = grid(base | {("baseconv", 128): {16: 0.2, 32: 0.4, 64: 0.5, 128: 0.95}}) + more(64, 32, (0.95, 0.2)) \
        + more(128, 32, (0.3, 0.3)) + more(128, 64, (0.3, 0.5))
    text = mqr.more_seeds_lines(mq.summarise(rows, False))[0]
    assert "N = 128: above d = 64, so d = 128, the grid's next width reaching it over its seeds: it grows with N over " \
           "these seeds too; from N = 64 to 128 (x2) it grows by a factor in (2, 8) (it lies in (16, 32] at N = 64 and " \
           "in (64, 128] at N = 128)" in text
    # the extra seeds pull N = 128's crossing down to N = 64's: said so
    rows = grid(base) + more(64, 32, (0.95, 0.96)) + more(128, 32, (0.95, 0.96)) + more(64, 64, (1, 1)) \
        + more(128, 64, (1, 1))
    text = mqr.more_seeds_lines(mq.summarise(rows, False))[0]
    assert "is N = 64: d = 32, N = 128: d = 32: over these seeds it does not grow with N, unlike the grid's" in text
    # a smaller width of the grid where a seed reached the threshold: not read
    rows = grid(base | {("baseconv", 64): {16: 0.95, 32: 0.95, 64: 0.99}}) + more(64, 32, (0.95, 0.2))
    assert "N = 64: not read: so the growth is not read over these seeds" in mqr.more_seeds_lines(mq.summarise(rows, False))[0]
    assert mqr.more_seeds_lines(mq.summarise(grid(base), False)) == []


def part_row(m, N, d, acc, seed, part):
    r = row(m, N, d, [0.1, acc], steps=1000)
    r["config"]["seed"], r["config"]["part"] = seed, part
    return r


def widths_vs_N(rows):
    return next(c for c in mq.summarise(rows, False)["criteria"] if c["id"] == "widths-vs-N")


def test_widths_criterion_reads_both_mixers_alike_over_every_seed():
    # PAPER_LIKE: attention from d = 16 at both N, BaseConv from 64 at N = 64 and at no width at N = 128: met
    c = widths_vs_N(grid(PAPER_LIKE))
    assert c["met"] is True and c["per_mixer"] == {"attention": "same", "baseconv": "grows"}
    assert c["smallest"] == {"attention": {"64": 16, "128": 16}, "baseconv": {"64": 64, "128": None}}
    # attention's smallest width grows too (16 at N = 64, 32 at N = 128): not the paper's contrast, not met
    c = widths_vs_N(grid(PAPER_LIKE | {("attention", 128): {16: 0.5, 32: 0.99, 64: 1.0}}))
    assert c["met"] is False and c["per_mixer"]["attention"] == "grows"
    # BaseConv's does not grow: not met
    c = widths_vs_N(grid(PAPER_LIKE | {("baseconv", 128): {16: 0.05, 32: 0.1, 64: 0.95}}))
    assert c["met"] is False and c["per_mixer"]["baseconv"] == "same"
    # the parts that share the grid's settings are pooled: two more attention seeds at N = 128, d = 16 below the
    # threshold make the median over three seeds fall below it (the grid's one seed alone reached it); three seeds
    # are then asked of every cell, and one seed settles no median of three: the other cells are open, undecided
    rows = grid(PAPER_LIKE) + [part_row("attention", 128, 16, 0.3, sd, "small") for sd in (1, 2)]
    c = widths_vs_N(rows)
    assert c["want"] == 3 and c["met"] is None and c["per_mixer"]["attention"] == "undecided"
    assert c["decide"]["attention"]["128"][:2] == [
        {"d": 16, "state": "below", "seeds": 3, "reached": 1, "median": 0.3, "missing": 0, "short": False},
        {"d": 32, "state": "open", "seeds": 1, "reached": 1, "median": 0.99, "missing": 2, "short": False}]
    assert c["bounds"]["attention"]["128"] == {"lo": 32, "hi": None, "decided": False}
    # a part with other settings (the longer run) is not pooled
    rows = grid(PAPER_LIKE) + [part_row("attention", 128, 16, 0.3, sd, "long") for sd in (1, 2)]
    assert widths_vs_N(rows)["smallest"]["attention"]["128"] == 16
    # BaseConv below the threshold at N = 128 only because its runs stopped early: not read
    short = {("baseconv", 128, d): 150 for d in (16, 32, 64)}
    assert widths_vs_N(grid(PAPER_LIKE, short))["met"] is None


def test_at_least_N_is_not_read_where_it_cannot_fail():
    # every BaseConv width >= N at N = 16: "d >= N" cannot fail there
    acc = {("attention", 16): {32: 1.0}, ("baseconv", 16): {32: 0.2, 64: 0.95}}
    s = mq.summarise(grid(acc), False)
    assert mq.at_least_N(s)["per_N"] == {"16": None} and mq.at_least_N(s)["met"] is None
    assert "cannot fail" in mq.at_least_N(s)["notes"][0]


def test_setting_lines_compute_the_deviations():
    rows = [row(m, N, d, [0.1, a], D=4) for (m, N), by_d in {("attention", 16): {32: 1.0}, ("attention", 32): {32: 1.0},
            ("baseconv", 16): {32: 0.2, 64: 0.95}, ("baseconv", 32): {32: 0.2, 64: 0.3}}.items() for d, a in by_d.items()]
    s = mq.summarise(rows, False)
    text = mqr.setting_lines(s)[0]
    c = mq.FULL
    epochs = c["steps"] * c["batch"] / c["train_examples"]
    assert f"vocabulary {c['vocab']} where the paper has 8,192" in text
    assert f"{epochs:.3g} epochs where the paper trains 64" in text
    # N = 16, D = 4: 4 gaps for 4 queries, one set of positions; N = 32: C(12, 4) = 495 sets
    assert "at N = 16 the 4 queries sit at the same positions in every example" in text
    assert "against 495 possible sets at N = 32" in text


def test_missing_cells_and_the_committed_grid_file():
    s = json.loads((ROOT / "docs/experiments/seed003-mqar/summary.json").read_text())
    miss = mq.missing_cells(s)
    have = {(c["mixer"], c["N"], c["d"], sd) for c in mq.pooled(s).values() for sd in c["seeds"]}
    assert miss and all((c["mixer"], c["N"], c["d"], c["seed"]) not in have for c in miss)
    want = {(m, N, d, sd) for m in mq.MIXERS for N, _ in mq.WIDTHS["sizes"] for d in mq.WIDTHS["dims"]
            for sd in mq.WIDTHS["seeds"]}
    assert {(c["mixer"], c["N"], c["d"], c["seed"]) for c in miss} == want - have
    # the committed grid file is the one this summary gives, and every cell of it is a valid cell config
    committed = json.loads((ROOT / mq.WIDTHS_GRID_FILE).read_text())
    assert committed == mq.widths_grid(s)
    for c in committed["cells"]:
        cfg = mq.config_of({**committed["fixed"], **c})
        assert cfg.vocab > cfg.N
