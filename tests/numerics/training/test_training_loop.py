"""Tiny models trained for a few hundred steps (float64, seeded, 1 thread)."""
import json

import numpy as np
import pytest
import torch

from numerics import train as cli
from numerics.backends import cuda_available
from numerics.training import ModelConfig, RecipeConfig, TaskConfig, TrainConfig, Trainer
from numerics.training.iterate import apply_iteratively


def cfg(task="gradient", model="baseconv", steps=300, recipe=None, **kw):
    t = TaskConfig(task, n=kw.pop("n", 6), d=kw.pop("d", 2))
    m = ModelConfig(model=model, width=kw.pop("width", 8), layers=kw.pop("layers", 3),
                    heads=kw.pop("heads", 1), init_scale=0.1, **kw.pop("mk", {}))
    r = recipe or RecipeConfig(lr=1e-2, step_size=50, metric_every=50, metric_batches=4, warmup=50)
    return TrainConfig(task=t, model=m, recipe=r, steps=steps, batch=kw.pop("batch", 64), eval_every=100,
                       eval_batch=256, threads=1, **kw)


@pytest.mark.parametrize("model,task,kw", [
    ("baseconv", "gradient", {}),
    ("lsa", "gradient", {"heads": 2}),
    ("transformer", "multiply", {"n": 4, "d": 4, "width": 16, "heads": 2, "layers": 1,
                                 "mk": {"mlp": True, "layernorm": True}}),
    ("baseconv", "multiply", {"n": 4, "d": 4, "layers": 1}),
])
def test_loss_falls(model, task, kw):
    tr = Trainer(cfg(task, model, **kw), progress=False)
    res = tr.run()
    h = tr.history
    assert h[0]["step"] == 0 and h[-1]["step"] == 300
    assert res["final_test_mse"] < 0.2 * h[0]["test_mse"], [x["test_mse"] for x in h]
    assert np.isfinite(h[-1]["metric"])


@pytest.mark.parametrize("ema", ["grad-filter", "update", "none"])
def test_resume_is_bit_identical(tmp_path, ema):
    r = RecipeConfig(lr=1e-2, step_size=20, metric_every=20, metric_batches=3, warmup=20, ema=ema)
    # (steps 60 -> 110 cross a metric/LR decision, an eval and the EMA state)
    full = Trainer(cfg(steps=110, recipe=r, batch=8), progress=False)
    full.run()
    a = Trainer(cfg(steps=60, recipe=r, batch=8), tmp_path, progress=False)
    a.run()
    b = Trainer.resume(tmp_path, steps=110, progress=False)
    assert b.step == 60
    b.run()
    for p, q in zip(full.model.parameters(), b.model.parameters()):
        torch.testing.assert_close(p, q, rtol=0, atol=0)
    assert b.history[-1]["test_mse"] == full.history[-1]["test_mse"]
    assert [h["step"] for h in b.history] == [0, 60, 100, 110]


def test_skips_blown_up_steps():
    r = RecipeConfig(lr=1e-2, scheduler="constant", skip_grad_norm=0.0, ema="none")
    tr = Trainer(cfg(steps=20, recipe=r), progress=False)
    before = [p.detach().clone() for p in tr.model.parameters()]
    tr.run()
    assert tr.skipped == 20
    for p, q in zip(before, tr.model.parameters()):
        assert torch.equal(p, q)


def test_cli_writes_outputs(tmp_path, capsys):
    out = tmp_path / "run"
    rc = cli.main(["gradient", "--n", "6", "--d", "2", "--width", "8", "--steps", "60", "--batch", "16",
                   "--eval-every", "30", "--eval-batch", "64", "--step-size", "20", "--metric-every", "20",
                   "--metric-batches", "3", "--warmup", "20", "--out", str(out), "--no-progress",
                   "--threads", "1"])
    assert rc == 0
    for f in ("history.json", "checkpoint.safetensors", "weights.safetensors", "result.json", "curves.png"):
        assert (out / f).is_file(), f
    hist = json.loads((out / "history.json").read_text())
    assert {"step", "test_mse", "lr", "metric", "metric_ema", "skipped", "wall_s", "loadavg"} <= set(hist[-1])
    assert cli.main(["gradient", "--out", str(out), "--resume", "--steps", "90", "--no-progress"]) == 0
    assert json.loads((out / "history.json").read_text())[-1]["step"] == 90
    json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_max_minutes_stops_cleanly_with_outputs(tmp_path):
    """--max-minutes: the run stops after its wall-time budget, evaluated, checkpointed and exported;
    a zero budget is a one-line error (exit 2)."""
    out = tmp_path / "timed"
    rc = cli.main(["gradient", "--n", "4", "--d", "2", "--width", "8", "--steps", "10000000", "--batch", "8",
                   "--eval-every", "100000", "--eval-batch", "16", "--out", str(out), "--no-progress",
                   "--threads", "1", "--max-minutes", "0.02"])
    assert rc == 0
    res = json.loads((out / "result.json").read_text())
    assert res["stopped_by_time"] and 0 < res["steps"] < 10000000
    assert json.loads((out / "history.json").read_text())[-1]["step"] == res["steps"]
    assert (out / "checkpoint.safetensors").is_file() and (out / "weights.safetensors").is_file()
    assert cli.main(["gradient", "--out", str(tmp_path / "x"), "--max-minutes", "0", "--no-progress"]) == 2


def test_iterating_an_exact_gradient_model_is_gd():
    """A 'model' that returns the exact gradient reproduces exact GD's fixed point."""
    from numerics.training.tasks import make_task

    t = make_task("gradient", n=6, d=2)

    def exact(u):
        u = u.numpy()
        A, b, x = u[:, :6, :2], u[:, :6, 2], u[:, 6, 3:5]
        out = np.zeros(u.shape[:2] + (2,))
        out[:, 6] = t.grad(A, b, x)
        return torch.as_tensor(out)

    A, b, xt, x0 = t.problems(4, np.random.default_rng(0))
    r = apply_iteratively(exact, t, A, b, x0, max_iters=400)
    assert r["model_mse"] < 1e-20 and r["gd_mse"] < 1e-20


@pytest.mark.skipif(not cuda_available(), reason="needs a CUDA GPU (torch.cuda.is_available() is False)")
def test_trains_on_cuda():
    tr = Trainer(cfg(steps=50, device="cuda"), progress=False)
    tr.run()
    assert next(tr.model.parameters()).is_cuda


def test_float32_run_is_also_evaluated_in_float64():
    """A float32 run records the float64 evaluation of its own weights on the same problems: close to
    the float32 figure (same function) but not bit-equal (different arithmetic), and a float64 run
    records no second figure."""
    tr = Trainer(cfg(steps=100, dtype="float32"), progress=False)
    res = tr.run()
    h = tr.history[-1]
    assert h["test_mse_f64"] != h["test_mse"]
    assert abs(h["test_mse_f64"] - h["test_mse"]) <= 1e-4 * h["test_mse"]
    assert res["final_test_mse_f64"] == h["test_mse_f64"]
    assert next(tr.model.parameters()).dtype == torch.float32   # the training model is left alone
    tr64 = Trainer(cfg(steps=100), progress=False)
    tr64.run()
    assert "test_mse_f64" not in tr64.history[-1]
