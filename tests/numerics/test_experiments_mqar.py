"""Seed 003 MQAR (numerics.training.mqar, numerics.experiments.seed003_mqar): the generator against
an independent reading of Zoology's Def. 3.1, the two models' shapes and causality, the accuracy,
and the pass criteria on hand-made summaries.  (The --quick grid runs end to end through
run_grid in test_experiments_quick.py, which covers every registered experiment.)"""
import numpy as np
import pytest
import torch

from numerics.experiments import EXPERIMENTS
from numerics.experiments import seed003_mqar as mq
from numerics.training.mqar import IGNORE, MQARModel, accuracy, mqar


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
    X, Y = mqar(300, N, D, V, seed=3)
    assert X.shape == Y.shape == (300, N) and X.dtype == Y.dtype == np.int64
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
    # causal: changing the tokens after position t leaves every output at or before t unchanged
    h = m.features(x)
    for t in (0, 7, N - 2):
        x2 = x.clone()
        x2[:, t + 1:] = torch.randint(0, V, (3, N - t - 1))
        h2 = m.features(x2)
        torch.testing.assert_close(h2[:, :t + 1], h[:, :t + 1], rtol=1e-10, atol=1e-10)
        assert (h2[:, t + 1:] - h[:, t + 1:]).abs().max() > 1e-6  # and later outputs do see them


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


def test_full_grid_is_the_issue_grid():
    every = mq.configs(False)
    long = [c for c in every if c.get("part") == "long"]
    cs = [c for c in every if c.get("part") != "long"]
    # the longer-budget cells: both mixers at each of LONG's d, otherwise the grid's recipe
    assert sorted((c["mixer"], c["d"]) for c in long) == sorted((m, d) for m in mq.MIXERS for d in mq.LONG["ds"])
    assert all(c["steps"] == mq.LONG["steps"] > mq.FULL["steps"] and c["N"] == mq.LONG["N"] for c in long)
    assert {(c["N"], c["D"]) for c in cs} == {(64, 4), (128, 8)}
    assert {c["d"] for c in cs} == {16, 32, 64, 128} and {c["mixer"] for c in cs} == {"attention", "baseconv"}
    assert len({c["lr"] for c in cs}) == 2 and {c["seed"] for c in cs} == set(mq.FULL["seeds"])
    assert len(cs) == 2 * 2 * 4 * 2 * len(mq.FULL["seeds"])
    # every (mixer, N, d, lr) cell once per seed
    assert len({(c["mixer"], c["N"], c["d"], c["lr"], c["seed"]) for c in cs}) == len(cs)
    # a fair comparison: both mixers get the same recipe (everything but the grid's own axes is shared)
    recipe = {tuple(sorted((k, v) for k, v in c.items() if k not in ("mixer", "N", "D", "d", "lr", "seed")))
              for c in cs}
    assert len(recipe) == 1 and mq.FULL["mlp_mult"] == 0
    assert "seed003-mqar" in EXPERIMENTS


# ------------------------------------------------------------------ criteria

def summary(acc: dict) -> dict:
    """A hand-made summary: acc[(mixer, N)] = accuracies at d = 16, 32, 64, 128 (None: cell missing)."""
    best = {}
    for (m, N), row in acc.items():
        for d, a in zip(mq.DIMS, row):
            if a is not None:
                best[f"{m}/{N}/{d}"] = {"mixer": m, "N": N, "d": d, "acc": a, "lr": 1e-3, "steps_run": 1}
    return {"best": best, "threshold": 0.9}


def verdicts(s):
    return {c["id"]: c["met"] for c in mq.criteria(s)}


def test_criteria_paper_like_summary_meets_all():
    s = summary({("attention", 64): [0.95, 1.0, 1.0, 1.0], ("attention", 128): [0.5, 0.99, 1.0, 1.0],
                 ("baseconv", 64): [0.1, 0.3, 0.92, 1.0], ("baseconv", 128): [0.05, 0.1, 0.4, 0.95]})
    v = verdicts(s)
    assert v == {"attention-d32": True, "baseconv-below": True, "smallest-d": True}
    c = mq.criteria(s)[2]
    assert c["smallest"] == {"64": {"attention": 16, "baseconv": 64}, "128": {"attention": 32, "baseconv": 128}}


def test_criteria_each_failure():
    base = {("attention", 64): [0.95, 1.0, 1.0, 1.0], ("attention", 128): [0.5, 0.99, 1.0, 1.0],
            ("baseconv", 64): [0.1, 0.3, 0.92, 1.0], ("baseconv", 128): [0.05, 0.1, 0.4, 0.95]}
    # attention short of 0.9 at d = 32, N = 128
    v = verdicts(summary(base | {("attention", 128): [0.5, 0.85, 1.0, 1.0]}))
    assert v["attention-d32"] is False
    # BaseConv at 0.9 at d = 32 <= N/2 = 32 (N = 64) where attention reaches it from d = 32 too: below
    # fails, and twice attention's fails (32 < 2 * 32)
    v = verdicts(summary(base | {("baseconv", 64): [0.1, 0.9, 0.95, 1.0], ("attention", 64): [0.5, 0.95, 1, 1]}))
    assert v["baseconv-below"] is False and v["smallest-d"] is False
    # the smallest d does not grow with N (128 at both)
    v = verdicts(summary(base | {("baseconv", 64): [0.1, 0.3, 0.4, 0.92]}))
    assert v["smallest-d"] is False and v["baseconv-below"] is True
    # BaseConv never reaches 0.9 at N = 128 but does at 64: grows (beyond the grid), met
    v = verdicts(summary(base | {("baseconv", 128): [0.05, 0.1, 0.4, 0.6]}))
    assert v["smallest-d"] is True


def test_criteria_not_measurable_and_missing_cells():
    # neither N reaches 0.9 with BaseConv: whether it grows is not measurable
    s = summary({("attention", 64): [1, 1, 1, 1], ("attention", 128): [1, 1, 1, 1],
                 ("baseconv", 64): [0.1, 0.1, 0.2, 0.3], ("baseconv", 128): [0.1, 0.1, 0.1, 0.2]})
    v = verdicts(s)
    assert v == {"attention-d32": True, "baseconv-below": True, "smallest-d": None}
    assert any("not measurable" in n for n in mq.criteria(s)[2]["notes"])
    # attention at the plateau everywhere: criterion 1 not met, the comparison of smallest d's undefined
    s = summary({("attention", 64): [0.25] * 4, ("attention", 128): [0.12] * 4,
                 ("baseconv", 64): [0.1] * 4, ("baseconv", 128): [0.1] * 4})
    assert verdicts(s) == {"attention-d32": False, "baseconv-below": True, "smallest-d": None}
    # a missing cell: the check that reads it is not measured (unless another cell already fails it)
    s = summary({("attention", 64): [1, None, 1, 1], ("attention", 128): [1, 1, 1, 1],
                 ("baseconv", 64): [0.1, 0.1, 0.95, 1], ("baseconv", 128): [0.1, None, 0.2, 0.95]})
    v = verdicts(s)
    assert v["attention-d32"] is None and v["baseconv-below"] is None


def test_reading_counts_runs_off_the_plateau_and_seed_splits():
    """With two seeds, the report counts the runs that left 1/D (above 1.5/D) and names every
    (mixer, N, d, lr) whose seeds disagree."""
    def run(m, d, lr, seed, acc):
        return {"mixer": m, "N": 64, "D": 4, "d": d, "lr": lr, "seed": seed, "best_test_acc": acc,
                "final_train_loss": 1.0}
    runs = [run("attention", 32, 1e-2, 0, 0.99), run("attention", 32, 1e-2, 1, 0.26),
            run("attention", 64, 1e-2, 0, 0.5), run("attention", 64, 1e-2, 1, 0.6),
            run("baseconv", 32, 1e-2, 0, 0.2), run("baseconv", 32, 1e-2, 1, 0.1)]
    best = {}
    for x in runs:
        k = f"{x['mixer']}/64/{x['d']}"
        if k not in best or x["best_test_acc"] > best[k]["acc"]:
            best[k] = {"mixer": x["mixer"], "N": 64, "d": x["d"], "acc": x["best_test_acc"], "lr": x["lr"]}
    s = {"runs": runs, "best": best, "threshold": 0.9, "sizes": [(64, 4)], "seeds": [0, 1],
         "config": {"steps": 10, "batch": 2}}
    text = "\n".join(mq.reading(s))
    assert "attention at N = 64: 3 of 4 (d = 32, lr 0.01, seed 0: 0.99, d = 64, lr 0.01, seed 0: 0.5, d = 64" in text
    assert "baseconv at N = 64: 0 of 2" in text
    assert "left it with one seed and not with another: attention, N = 64, d = 32, lr 0.01." in text
    s["runs"][1]["best_test_acc"] = 0.9
    assert "No (mixer, N, d, lr) left it with one seed and not with the other." in "\n".join(mq.reading(s))
    assert "Runs that left" not in "\n".join(mq.reading({**s, "seeds": [0]}))


def test_long_runs_are_kept_out_of_the_grid_and_read_beside_it():
    def row(m, d, acc, part=None, steps=10):
        cfg = {"mixer": m, "N": 128, "D": 8, "d": d, "lr": 1e-2, "seed": 0, "steps": steps, "vocab": 256}
        if part:
            cfg["part"] = part
        res = {"mixer": m, "N": 128, "D": 8, "d": d, "lr": 1e-2, "best_test_acc": acc, "final_test_acc": acc,
               "steps_run": steps, "final_train_loss": 1.0, "params": 1, "history": []}
        return {"status": "ok", "config": cfg, "result": res, "cpu_s": 1.0, "wall_s": 1.0}
    rows = [row(m, d, 0.1) for m in mq.MIXERS for d in mq.DIMS]
    rows += [row("attention", 32, 0.99, "long", 30), row("baseconv", 32, 0.2, "long", 30),
             row("attention", 128, 0.98, "long", 30), row("baseconv", 128, 0.5, "long", 30)]
    s = mq.summarise(rows, False)
    assert acc_at_grid(s) == 0.1 and len(s["long"]) == 4  # the grid's best ignores the long runs
    text = "\n".join(mq.long_runs(s))
    assert "| attention | 0.99 (30); grid 0.1 | 0.98 (30); grid 0.1 |" in text
    assert "attention reaches 0.9 at d = 32, 128 and BaseConv at none (N = 128)" in text
    assert "the ordering of Claim 1 at this size" in text
    assert mq.long_runs({**s, "long": []}) == []
    for x in s["long"]:
        x["best_test_acc"] = 0.13 if x["mixer"] == "attention" else 0.1
    text = "\n".join(mq.long_runs(s))
    assert "does not separate the mixers at this N: attention stays on the 1/D plateau" in text


def acc_at_grid(s):
    return mq.acc_at(s, "attention", 128, 32)


# ------------------------------------------------------------------ the reference-faithful models and generator

@pytest.mark.parametrize("N,D,V", [(64, 4, 8192), (32, 8, 40)])
def test_fast_generator_against_the_definition(N, D, V):
    X, Y = mq.mqar_data(300, N, D, V, seed=5, power_a=0.1)
    assert X.shape == Y.shape == (300, N) and X.dtype == Y.dtype == np.int64
    for x, y in zip(X, Y):
        keys, vals = x[0:2 * D:2], x[1:2 * D:2]
        assert len(set(keys)) == D and len(set(vals)) == D
        assert ((1 <= keys) & (keys < V // 2)).all() and ((V // 2 <= vals) & (vals < V)).all()
        tail = x[2 * D:]
        qpos = np.nonzero(tail)[0]
        assert sorted(tail[qpos]) == sorted(keys) and (qpos % 2 == 0).all()
        labelled = {int(i): int(y[i]) for i in np.nonzero(y != IGNORE)[0]}
        want = {i: a for i, a in answers_by_definition(x).items() if i >= 2 * D}
        assert labelled == want and len(labelled) == D
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
    h = m.features(x)
    for t in (0, 7, N - 2):
        x2 = x.clone()
        x2[:, t + 1:] = torch.randint(0, V, (3, N - t - 1))
        h2 = m.features(x2)
        torch.testing.assert_close(h2[:, :t + 1], h[:, :t + 1], rtol=1e-10, atol=1e-10)
        assert (h2[:, t + 1:] - h[:, t + 1:]).abs().max() > 1e-6


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
