"""Host synchronisations of the training loop (issue 45 item 4), counted on the CPU by
``numerics.training.host_syncs.HostSyncCounter``: a training step reads nothing from the device and
copies one batch (non-blocking); a chunk of steps is read once; the losses, skips and weights are
those of the step-by-step loop, bit for bit."""
import math

import numpy as np
import pytest
import torch

from numerics.training import ModelConfig, RecipeConfig, TaskConfig, TrainConfig, Trainer
from numerics.training.host_syncs import HostSyncCounter, adam_step_counters
from numerics.training.recipe import grad_norm, grad_ok
from numerics.training.trainer import SYNC_EVERY, rng_for

CONSTANT = dict(scheduler="constant", ema="grad-filter")


def cfg(model="baseconv", *, steps=120, recipe=None, dtype="float64", eval_every=60, **mk):
    heads = mk.pop("heads", 2 if model == "transformer" else 1)
    return TrainConfig(task=TaskConfig("iterate", n=6, d=2, k=1),
                       model=ModelConfig(model=model, width=8, layers=3, heads=heads, init_scale=0.3, **mk),
                       recipe=recipe or RecipeConfig(lr=1e-2, **CONSTANT), steps=steps, batch=16,
                       eval_every=eval_every, eval_batch=64, threads=1, dtype=dtype, seed=5)


def counter(tr):
    return HostSyncCounter(adam_step_counters(tr.opt))


class StepByStep(Trainer):
    """The loop as it was: every step checked on the host (``train_step``), its loss read at once."""

    def _one_step(self):
        loss, _ = self.train_step()
        self.recent.append(loss)


def records(tr):
    return [{k: v for k, v in r.items() if k not in ("wall_s", "loadavg")} for r in tr.history]


def same_run(a, b):
    assert repr(records(a)) == repr(records(b))  # repr: every float exactly, NaN equal to NaN
    assert a.skipped == b.skipped and a.step == b.step
    for p, q in zip(a.model.parameters(), b.model.parameters()):
        torch.testing.assert_close(p, q, rtol=0, atol=0)


@pytest.mark.parametrize("model,dtype,mk", [
    ("baseconv", "float64", {}),
    ("baseconv", "float32", {"causal": True}),
    ("lsa", "float32", {}),
    ("transformer", "float64", {"mlp": True, "layernorm": True}),
])
def test_a_training_step_reads_nothing_and_copies_one_batch(model, dtype, mk):
    tr = Trainer(cfg(model, dtype=dtype, recipe=RecipeConfig(lr=1e-3, **CONSTANT), **mk), progress=False)
    tr.advance(2)  # Adam's state exists
    steps = 20
    with counter(tr) as c:
        for _ in range(steps):
            tr._step_on_device()
    assert c.syncs == 0, c.where
    assert c.transfers == steps, c.where  # one non-blocking copy of each batch
    assert all("non-blocking" in w for w in c.where), c.where
    with counter(tr) as c:
        tr.flush()  # the chunk's one read
    assert c.syncs == 1, c.where


def test_the_step_by_step_check_is_counted():
    """The counter sees what the loop used to do: a host read of every parameter's gradient norm and
    of the loss, per step."""
    tr = Trainer(cfg(), progress=False)
    tr.advance(1)
    n_params = len(tr.params)
    with counter(tr) as c:
        for _ in range(3):
            tr.train_step()
    assert c.syncs == 3 * (n_params + 1), c.where


def test_the_counter_sees_each_kind_of_read():
    t = torch.arange(4.0)
    opt = torch.optim.Adam([torch.nn.Parameter(torch.ones(2))])
    opt.param_groups[0]["params"][0].grad = torch.ones(2)
    opt.step()
    with HostSyncCounter(adam_step_counters(opt)) as c:
        float(t.sum())
        t.sum().item()
        if t.sum() > 0:
            pass
        t.tolist()
        _ = t[t > 1]
        torch.as_tensor(np.ones(3), device="cpu")
        torch.as_tensor(np.ones(3))  # made on the host: not a copy to the device
        _ = f"{t.sum()}"
        t.to("cpu")
        opt.step()  # reads its host step counter: not counted
    assert c.syncs == 8, c.where
    with HostSyncCounter() as c:
        t.to("cpu", non_blocking=True)
    assert (c.syncs, c.transfers) == (0, 1)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_run_reads_once_per_chunk_and_evaluation(dtype):
    steps, every = 3 * SYNC_EVERY, 2 * SYNC_EVERY
    tr = Trainer(cfg(steps=steps, eval_every=every, dtype=dtype), progress=False)
    with counter(tr) as c:
        tr.run()
    chunk_ends = len(set(range(SYNC_EVERY, steps + 1, SYNC_EVERY)) | set(range(every, steps + 1, every)) | {steps})
    evaluations = len(tr.history) * (2 if dtype == "float32" else 1)  # float32 runs are also evaluated in float64
    assert c.syncs == chunk_ends + evaluations, c.where
    assert (c.syncs - evaluations) / steps <= 1 / SYNC_EVERY + 1 / every + 1 / steps  # ~0.02 a step
    assert tr.skipped == 0


def test_the_gradient_metric_is_one_read():
    r = RecipeConfig(lr=1e-2, step_size=10, metric_every=5, metric_batches=3, warmup=5)
    tr = Trainer(cfg(steps=20, eval_every=20, recipe=r), progress=False)
    tr.advance(1)
    with counter(tr) as c:
        for _ in range(15):  # steps 2 .. 16: metrics after steps 5, 10, 15
            tr._step_on_device()
    assert c.syncs == 3, c.where
    assert c.transfers == 15 + 3 * 3  # each step's batch, each metric's batches


@pytest.mark.parametrize("model,dtype,recipe", [
    ("baseconv", "float64", dict(lr=1e-2, step_size=9, metric_every=3, metric_batches=3, warmup=5)),
    ("baseconv", "float32", dict(lr=1e-2, step_size=9, metric_every=3, metric_batches=3, warmup=5, ema="update")),
    ("lsa", "float32", dict(lr=1e-2, scheduler="steplr", step_size=20, ema="none")),
    ("transformer", "float64", dict(lr=3e-3, **CONSTANT)),
])
def test_losses_and_weights_are_the_step_by_step_loops(model, dtype, recipe):
    c = cfg(model, steps=130, eval_every=40, dtype=dtype, recipe=RecipeConfig(**recipe))
    a, b = Trainer(c, progress=False), StepByStep(c, progress=False)
    a.run()
    b.run()
    same_run(a, b)
    assert all(math.isfinite(r["train_loss"]) for r in a.history[1:])


@pytest.mark.parametrize("limit", [10.0, 30.0])  # gradient norms here: median 2, 90th percentile 7, largest 77
def test_a_chunk_with_a_skipped_step_is_rolled_back_and_replayed(limit):
    r = RecipeConfig(lr=1e-2, step_size=9, metric_every=3, metric_batches=3, warmup=5, skip_grad_norm=limit)
    c = cfg(steps=130, eval_every=40, recipe=r, dtype="float32")
    a, b = Trainer(c, progress=False), StepByStep(c, progress=False)
    with counter(a) as n:
        a.run()
    b.run()
    same_run(a, b)
    assert 0 < a.skipped < a.step  # some steps skipped, some taken
    kinds = {w.split(" at ")[0] + " at " + w.split(" at ")[1].split(":")[0] for w in n.where}
    assert "tolist at numerics/training/trainer.py" in kinds  # chunks read at their end
    assert "__float__ at numerics/training/recipe.py" in kinds  # and replayed step by step (grad_norm)


def test_resume_mid_run_matches_after_a_rollback(tmp_path):
    r = RecipeConfig(lr=1e-2, scheduler="constant", skip_grad_norm=10.0)
    c = cfg(steps=90, eval_every=30, recipe=r)
    full = Trainer(c, progress=False)
    full.run()
    part = Trainer(cfg(steps=60, eval_every=30, recipe=r), tmp_path, progress=False)
    part.run()
    rest = Trainer.resume(tmp_path, steps=90, progress=False)
    rest.run()
    same_run(full, rest)


def test_evaluation_sums_on_the_device_as_the_host_did():
    tr = Trainer(cfg(dtype="float32"), progress=False)
    n = 2500  # three chunks: 1024, 1024, 452
    rng = rng_for(tr.cfg.seed, 1, 7)
    tot, done = 0.0, 0
    with torch.no_grad():
        while done < n:
            b = min(1024, n - done)
            u, y = (torch.as_tensor(a, dtype=torch.float32) for a in tr.task.sample(b, rng))
            tot += float(tr.loss_on(u, y)) * b
            done += b
    with counter(tr) as c:
        got = tr.evaluate(n, stream_idx=7)
    assert got == tot / n
    assert c.syncs == 1, c.where


def test_grad_ok_is_grad_norms_decision():
    p = [torch.nn.Parameter(torch.zeros(3, dtype=torch.float32)), torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))]
    rng = np.random.default_rng(0)
    cases = [rng.standard_normal(5) * s for s in (1e-3, 1.0, 1e3)] + [np.array([3.0, 4.0, 0, 0, 0]),
                                                                      np.array([np.inf, 0, 0, 0, 0]),
                                                                      np.array([np.nan, 1, 0, 0, 0]),
                                                                      np.array([1e30, 1e30, 0, 0, 0])]
    for g in cases:
        p[0].grad = torch.as_tensor(g[:3], dtype=torch.float32)
        p[1].grad = torch.as_tensor(g[3:], dtype=torch.float64)
        gn = grad_norm(p)
        for limit in (5.0, gn, np.nextafter(gn, 0) if math.isfinite(gn) else 1.0, 1e3):
            want = math.isfinite(gn) and gn <= limit
            assert bool(grad_ok(p, limit)) == want, (g, limit)


@pytest.mark.parametrize("mixer", ["attention", "baseconv"])
def test_mqar_step_with_known_label_count_reads_nothing_and_steps_alike(mixer):
    from numerics.training.mqar import IGNORE, MQARModel, mqar, train_step

    X, Y = mqar(64, 16, 2, 32, seed=1)
    n_labels = [int((Y[i:i + 16] != IGNORE).sum()) for i in range(0, 64, 16)]
    runs = []
    for known in (False, True):
        model = MQARModel(mixer, 32, 16, 8, seed=2)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        with HostSyncCounter() as c:
            losses = [train_step(model, opt, torch.as_tensor(X[i:i + 16]), torch.as_tensor(Y[i:i + 16]), 1e-2,
                                 n_labels[i // 16] if known else None).detach() for i in range(0, 64, 16)]
        runs.append((model, losses, c))
    (m0, l0, c0), (m1, l1, c1) = runs
    assert c0.syncs == 2 * 4, c0.where  # the boolean mask: the model's h[mask] and y[mask], each step
    assert c1.syncs == 0, c1.where
    assert [float(a) for a in l0] == [float(b) for b in l1]
    for p, q in zip(m0.parameters(), m1.parameters()):
        torch.testing.assert_close(p, q, rtol=0, atol=0)


def test_a_checked_step_after_open_chunk_steps_comes_after_them():
    c = cfg(steps=10, recipe=RecipeConfig(lr=1e-2, scheduler="constant", skip_grad_norm=3.0))
    a, b = Trainer(c, progress=False), StepByStep(c, progress=False)
    for _ in range(3):
        a._step_on_device()
    a.train_step()
    a.flush()
    for _ in range(4):
        b._one_step()
    assert a.step == b.step == 4 and a.skipped == b.skipped
    for p, q in zip(a.model.parameters(), b.model.parameters()):
        torch.testing.assert_close(p, q, rtol=0, atol=0)
