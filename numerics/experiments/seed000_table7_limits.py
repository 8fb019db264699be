"""Seed 000 Table 7's cells under limits (:mod:`.seed000_table7`): training to a CPU-time limit (the
long cells), planning the steps that fit a share of a global deadline (the GPU grid), and the step
time that plan starts from."""
from __future__ import annotations


def run_cpu_limited(tr, cpu_limit: float, max_s: float | None):
    """Train ``tr`` in chunks of ``eval_every`` steps (its evaluation points) until this process has used
    ``cpu_limit`` seconds of CPU time (user + sys, ``time.process_time``) in it, the configuration's steps
    are done, or ``max_s`` wall seconds have passed.  Returns the last ``Trainer.run`` result and the CPU
    seconds used (at most one chunk past the limit)."""
    import time

    c0 = time.process_time()
    res = None
    total = tr.cfg.steps  # Trainer.run(steps) makes each chunk's end the run's target: the cell's is kept
    while res is None or (tr.step < total and time.process_time() - c0 < cpu_limit and not tr.stopped_by_time):
        res = tr.run(min(total, tr.step + tr.cfg.eval_every), max_seconds=max_s)
        tr.cfg.steps = total
    return res, round(time.process_time() - c0, 1)


def plan_steps(budget: float, left: float, per_step: float, steps: int, paper_gpu: bool) -> dict:
    """A cell's steps under a global deadline: ``left`` seconds of its ``budget`` share remain, a step takes
    ``per_step`` seconds; ``paper_gpu``: a ``paper`` cell of the GPU grid (its metric batches are planned)."""
    from numerics.training.recipe import RecipeConfig

    # the steps, the gradient metric's extra passes (paper recipe: metric_batches every metric_every
    # steps) and ten evaluations within 75% of what is left (the final evaluations after it; the card
    # is shared with the other cells, whose load grows once they all train)
    fit = 0.75 * left / per_step
    metric_batches = None
    if paper_gpu:
        # about 90 metrics per run (gpu_recipe_settings), each metric_batches forward-backward passes: the
        # paper's 64 where they take at most 15% of the budget, else halved until they do (at least 4)
        metric_batches = RecipeConfig.paper().metric_batches
        while metric_batches > 4 and 90 * metric_batches > 0.15 * fit:
            metric_batches //= 2
        fit -= 90 * metric_batches
    planned = int(max(1, min(steps, fit)))
    return {"budget_s": round(budget, 1), "step_s": per_step, "steps_max": steps, "steps_planned": planned,
            "metric_batches": metric_batches}


def step_time(cfg, device: str, probe_steps: int = 20) -> float:
    """Seconds per training step of a throw-away :class:`Trainer` of ``cfg`` with no gradient metric
    (3 steps to warm the device up, then ``probe_steps`` timed)."""
    import time
    from dataclasses import replace

    import torch

    from numerics.training.trainer import Trainer

    cfg = replace(cfg, recipe=replace(cfg.recipe, metric_every=10 ** 9))
    probe = Trainer(cfg, None, progress=False)

    def sync():
        if str(device).startswith("cuda"):
            torch.cuda.synchronize(device)

    probe.advance(3)  # the steps as Trainer.run takes them (no host read but one per chunk)
    sync()
    t = time.perf_counter()
    probe.advance(probe_steps)
    sync()
    return (time.perf_counter() - t) / probe_steps
