import math

import pytest
import torch

from numerics.training.recipe import (AdaptiveLR, GradFilterEMA, RecipeConfig, StepLR, UpdateEMA,
                                      cosine_metric)


def test_cosine_metric_eq6():
    g = torch.tensor([1.0, 0.0], dtype=torch.float64)
    assert cosine_metric([g, 2 * g, 3 * g]) == pytest.approx(1.0)
    assert cosine_metric([g, -g]) == pytest.approx(-1.0)
    e1, e2 = torch.eye(2, dtype=torch.float64)
    assert cosine_metric([e1, e2, e1]) == pytest.approx(1 / 3)  # pairs: 0, 1, 0
    assert cosine_metric([e1, e2, e1], "consecutive") == pytest.approx(0.0)


def test_adaptive_lr_raises_when_low_and_decays_when_high():
    c = RecipeConfig(lr=1.0, step_size=10, gamma=0.5, warmup=10, metric_lambda=0.0, threshold=0.9)
    s = AdaptiveLR(c)
    s.observe(0.95)
    assert s.step(10) == 0.5  # at warmup: decay
    s.observe(0.1)
    assert s.step(15) == 0.5  # not a decision step
    assert s.step(20) == 1.0  # metric low after warmup: raised
    s.observe(0.99)
    assert s.step(30) == 0.5
    c2 = RecipeConfig(lr=1e-10, step_size=1, gamma=0.5, min_lr=1e-10)
    s2 = AdaptiveLR(c2)
    assert s2.step(1) == 1e-10  # floor


def test_metric_ema_starts_at_one():
    s = AdaptiveLR(RecipeConfig())
    s.observe(0.0)
    assert s.metric_ema == pytest.approx(0.9)


def test_steplr():
    s = StepLR(RecipeConfig.standard(lr=1.0, step_size=3, gamma=0.1))
    lrs = [s.step(i) for i in range(1, 8)]
    assert lrs == pytest.approx([1, 1, 0.1, 0.1, 0.1, 0.01, 0.01])


def test_grad_filter_ema_official_form():
    p = torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))
    f = GradFilterEMA([p], decay=0.98, lam=2.0)
    p.grad = torch.tensor([1.0, -1.0], dtype=torch.float64)
    f.before_step()
    torch.testing.assert_close(p.grad, torch.tensor([1.04, -1.04], dtype=torch.float64))
    p.grad = torch.tensor([1.0, -1.0], dtype=torch.float64)
    f.before_step()
    e = 0.98 * 0.02 + 0.02
    torch.testing.assert_close(p.grad, torch.tensor([1 + 2 * e, -1 - 2 * e], dtype=torch.float64))


def test_update_ema_moves_by_ema_of_adam_updates():
    p = torch.nn.Parameter(torch.zeros(1, dtype=torch.float64))
    u = UpdateEMA([p], decay=0.5)
    for delta, expect in ((1.0, 1.0), (3.0, 1.0 + (0.5 * 0.5 + 0.5 * 3.0) / 0.75)):
        saved = u.save_params()
        with torch.no_grad():
            p.add_(delta)  # what the optimiser did
        u.after_step(saved)
        assert float(p.detach()) == pytest.approx(expect)


def test_presets_match_the_paper_tables():
    r = RecipeConfig.paper()
    assert (r.lr, r.scheduler, r.step_size, r.gamma, r.ema_decay, r.ema_lambda, r.adam_eps) == \
        (1e-2, "adaptive", 3000, 0.9, 0.98, 2.0, 1e-16)
    s = RecipeConfig.standard()
    assert (s.lr, s.scheduler, s.step_size, s.gamma, s.ema) == (1e-3, "steplr", 10_000, 0.9, "none")
    assert math.isclose(s.adam_eps, 1e-16)
