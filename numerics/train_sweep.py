"""The training command's sweep adapter (``SWEEP``, run by ``python -m numerics.sweep train``): a
cell is one run of ``python -m numerics.train``, its config the same typed options
(:data:`numerics.train.TrainOptions`) the command line builds, checked as the command checks them.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

from polyverify.plumbing.cli import UsageError, atomic_write_text

from numerics.training.names import MODELS, TASKS

# numerics.train (the command) is imported where it is used: it imports this module for its SWEEP

#: flags of this command a sweep cell cannot set: the sweep owns the output folder and the progress
_NOT_IN_CELLS = {"out", "resume", "overwrite", "no_progress", "help"}


def cell_keys() -> list[str]:
    """A sweep cell's config keys: this command's options (their ``dest``), less those of the sweep."""
    from numerics.train import TrainOptions

    return [f.name for f in dataclasses.fields(TrainOptions) if f.name not in _NOT_IN_CELLS]


def _cell_args(config: dict, where: str):
    """A cell's config as the command's typed options, checked as the command line is."""
    from numerics.train import TrainOptions, check_args, check_config, config_from

    if "task" not in config:
        raise UsageError(f"{where}: the config needs 'task' ({', '.join(TASKS)})")
    try:
        a = TrainOptions.from_mapping(config, where=where, exclude=_NOT_IN_CELLS, no_progress=True)
        check_args(a)
        cfg = config_from(a)
        try:
            check_config(cfg, allow_large=a.allow_large)
        except ValueError as e:
            raise UsageError(str(e)) from None
        if a.iterate and cfg.task.name != "gradient":
            raise UsageError(f"--iterate needs the gradient task, not {cfg.task.name}")
    except UsageError as e:
        raise UsageError(e if str(e).startswith(where) else f"{where}: {e}") from None
    return a, cfg


def sweep_check(config: dict, *, allow_large: bool = False, where: str = "cell") -> dict:
    """One training cell's config checked as ``python -m numerics.train`` checks its command line,
    returned with every option's value (so that equal runs have one id)."""
    from polyverify.sweep import check_lifting_limits

    _, (a, _) = check_lifting_limits(_cell_args, config, allow_large, where)
    return {k: getattr(a, k) for k in cell_keys() if getattr(a, k) is not None and getattr(a, k) is not False}


def sweep_cell(config: dict) -> dict:
    """One training run (``python -m numerics.train`` with the config's options); its files
    (history, checkpoint, weights, result.json, curves.png) go to the cell's folder."""
    from numerics import train
    from polyverify.sweep import cell_dir

    a, cfg = _cell_args(config, "cell")
    out = cell_dir()
    tr = train.Trainer(cfg, out, progress=False)
    res = tr.run(max_seconds=None if a.max_minutes is None else 60.0 * a.max_minutes)
    keep = ("steps", "final_test_mse", "final_test_mse_f64", "best_test_mse", "skipped", "params", "stopped_by_time",
            "wall_s", "weights")
    result = {k: res[k] for k in keep if k in res}
    result["lr"] = cfg.recipe.lr
    if a.iterate:
        from numerics.training.iterate import ood_sweep, plot_ood

        tr.model.eval()
        rows = ood_sweep(tr.model, tr.task, dtype=tr.dtype, device=tr.cfg.device)
        if out is not None:
            atomic_write_text(out / "iterate.json", json.dumps(rows, indent=1))
            plot_ood(rows, out / "iterate.png", title=f"{cfg.model.model}: iterated vs exact GD (eta={tr.task.eta})")
        result["iterate"] = rows
    return result


def _sweep_arguments(g) -> None:
    g.add_argument("--tasks", default="gradient", help=f"tasks: {', '.join(TASKS)} (default gradient)")
    g.add_argument("--models", default="baseconv", help=f"models: {', '.join(MODELS)} (default baseconv)")
    g.add_argument("--lrs", default=None, help="initial learning rates (default: the recipe's)")
    g.add_argument("--seeds", default="0", help="seeds (default 0)")
    g.add_argument("--widths", default="64", help="channels (default 64)")
    g.add_argument("--steps", type=int, default=1000, help="steps of every run (default 1000)")
    g.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="any other option of python -m numerics.train for every cell, e.g. --set layers=2 "
                        "--set recipe=standard --set max_minutes=5 (a bare KEY sets a flag such as mlp)")


def _sweep_configs(a) -> list[dict]:
    from polyverify.sweep import product, split_list

    big = a.allow_large
    lists = {"task": split_list("--tasks", a.tasks, allow_large=big), "model": split_list("--models", a.models,
                                                                                          allow_large=big)}
    if a.lrs is not None:
        lists["lr"] = split_list("--lrs", a.lrs, float, allow_large=big)
    lists["seed"] = split_list("--seeds", a.seeds, int, allow_large=big)
    lists["width"] = split_list("--widths", a.widths, int, allow_large=big)
    keys = cell_keys()
    fixed: dict = {"steps": a.steps}
    for item in a.set:
        k, eq, v = item.partition("=")
        k = k.strip().replace("-", "_")
        if k not in keys or k == "task":
            raise UsageError(f"--set {item}: unknown option {k!r} of python -m numerics.train")
        if k in lists or k == "steps":
            raise UsageError(f"--set {item}: {k} has its own flag here")
        fixed[k] = v if eq else True
    return [{**c, **fixed} for c in product(**lists)]


def _sweep_finish(res, out: Path) -> tuple[list[str], bool]:
    """Final test MSE against the learning rate, one line per task/model/width/seed."""
    rows = [r for r in res.rows if r["status"] == "ok"]
    if len({r["result"]["lr"] for r in rows}) < 2:
        return [], True
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from polyverify.plumbing.cli import save_figure

    lines: dict[str, list] = {}
    for r in rows:
        c = r["config"]
        lines.setdefault(f"{c['model']} {c['task']} w={c.get('width')} seed={c.get('seed')}", []).append(
            (r["result"]["lr"], r["result"]["final_test_mse"]))
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for lab, pts in lines.items():
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", lw=1.2, ms=4, label=lab)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("initial learning rate")
    ax.set_ylabel("final test MSE")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = save_figure(fig, out / "plots" / "final_mse_vs_lr.png")
    plt.close(fig)
    return [str(path)], True


SWEEP = SimpleNamespace(
    description="Training sweep: one cell per task x model x learning rate x seed x width, each a run of "
                "python -m numerics.train (checked as that command checks it, before any work); each run's files "
                "(curves.png, weights.safetensors, ...) in cells/<id>/, and plots/final_mse_vs_lr.png.",
    cell="numerics.train:sweep_cell", add_arguments=_sweep_arguments, configs=_sweep_configs, check=sweep_check,
    finish=_sweep_finish)
