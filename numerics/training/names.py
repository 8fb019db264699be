"""The names the training command line offers, importable without torch (so that
``python -m numerics.train`` parses and checks its arguments before the heavy imports)."""
from __future__ import annotations

import re
from pathlib import Path

#: architectures of :class:`numerics.training.modules.SequenceModel`
MODELS = ("baseconv", "lsa", "transformer")
#: the model settings (``ModelConfig`` fields) each architecture reads; every other one is ignored by
#: it, so ``python -m numerics.train`` refuses it (``tests/adversarial/test_train_resume_checkpoints_and_limits.py`` checks
#: this table against the models :class:`numerics.training.modules.SequenceModel` builds)
MODEL_READS = {
    "baseconv": ("width", "layers", "mlp", "layernorm", "causal", "conv_method", "init_scale", "bias"),
    "lsa": ("width", "layers", "mlp", "layernorm", "heads", "head_dim", "init_scale"),
    "transformer": ("width", "layers", "mlp", "layernorm", "heads", "causal"),
}
#: tasks of :func:`numerics.training.tasks.make_task`
TASKS = ("gradient", "iterate", "icls", "read", "linear", "multiply")
#: the task settings (``TaskConfig`` fields, each set by the command's option of the same name) each
#: task's training reads; every other one it ignores, so ``python -m numerics.train`` refuses it
#: (``tests/adversarial/test_ignored_options.py`` checks this table against the tasks
#: :func:`numerics.training.tasks.make_task` builds: an ignored setting changes none of its samples)
TASK_READS = {
    "gradient": ("n", "d", "kappa", "sigma"),
    "iterate": ("n", "d", "kappa", "sigma", "k", "eta"),
    "icls": ("n", "d", "kappa", "sigma"),
    "read": ("n", "d"),
    "linear": ("n", "d"),
    "multiply": ("n", "d"),
}
#: the command's task options (the ``TaskConfig`` fields they set, in order)
TASK_OPTIONS = ("n", "d", "kappa", "sigma", "k", "eta")
#: the task settings ``--iterate`` (gradient task only) reads on top of the training's: it iterates
#: x <- x - eta T(A, b, x) with the task's eta
ITERATE_READS = ("eta",)

#: the recipe settings (``RecipeConfig`` fields, each set by the option of the same name) every run
#: reads, whatever its scheduler and EMA
RECIPE_ALWAYS = ("lr", "scheduler", "ema", "skip_grad_norm")
#: the ones each learning-rate scheduler reads (``recipe.make_scheduler``; the cosine metric of the
#: adaptive one is computed by the training loops for it alone); every other one it ignores
SCHEDULER_READS = {
    "adaptive": ("step_size", "gamma", "threshold", "metric_every", "metric_batches", "metric_pairs", "warmup",
                 "max_lr"),
    "steplr": ("step_size", "gamma"),
    "constant": (),
}
#: the ones each EMA reads (``recipe.make_ema``); every other one it ignores
EMA_READS = {"grad-filter": ("ema_decay", "ema_lambda"), "update": ("ema_decay",), "none": ()}
#: the command's recipe options (the ``RecipeConfig`` fields they set; ``tests/adversarial/
#: test_ignored_options.py`` checks the three tables above against the training runs)
RECIPE_OPTIONS = RECIPE_ALWAYS + tuple(dict.fromkeys(
    f for table in (SCHEDULER_READS, EMA_READS) for fields in table.values() for f in fields))
#: what ``--recipe NAME`` presets (``RecipeConfig.paper`` / ``.standard``; every other setting is the
#: ``RecipeConfig`` default in both); a flag of its own overrides each
RECIPE_PRESETS = {
    "paper": {"lr": 1e-2, "scheduler": "adaptive", "step_size": 3000, "gamma": 0.9, "ema": "grad-filter"},
    "standard": {"lr": 1e-3, "scheduler": "steplr", "step_size": 10_000, "gamma": 0.9, "ema": "none"},
}


def recipe_reads(scheduler: str, ema: str) -> tuple[str, ...]:
    """The recipe settings a run with this scheduler and EMA reads."""
    return RECIPE_ALWAYS + SCHEDULER_READS[scheduler] + EMA_READS[ema]


def and_list(items) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def not_read(shown: str, flag: str, by: str, only: str) -> str:
    """The refusal of an option nothing in the run reads: ``SHOWN: BY does not read FLAG (ONLY);
    drop it`` (``only``: what would read it, e.g. ``only --ema update does``)."""
    return f"{shown}: {by} does not read {flag} ({only}); drop it"


#: the checkpoint file of a run folder
CKPT = "checkpoint.safetensors"
#: the files a training run writes into its folder (``python -m numerics.train --overwrite`` removes
#: the earlier run's before training)
RUN_FILES = (CKPT, "history.json", "result.json", "weights.safetensors", "curves.png", "iterate.json", "iterate.png")
#: the temporary file a run file is written through (``polyverify.plumbing.cli.atomic_path``: ``.NAME.XXXXXXXX.tmp``,
#: renamed onto NAME when complete); one that a killed run left is stale
_TEMPORARY = re.compile(r"\.(?:" + "|".join(map(re.escape, RUN_FILES)) + r")\.[A-Za-z0-9_]+\.tmp")


def is_run_entry(name: str) -> bool:
    """Whether a folder entry ``name`` is one a training run writes: a run file or its temporary."""
    return name in RUN_FILES or bool(_TEMPORARY.fullmatch(name))


def stale_temporaries(folder) -> list[Path]:
    """The run files' temporaries in ``folder`` (sorted; none if it is not a folder)."""
    folder = Path(folder)
    return sorted(p for p in folder.iterdir() if _TEMPORARY.fullmatch(p.name)) if folder.is_dir() else []


def foreign_entries(folder) -> list[str]:
    """The entries of ``folder`` that no training run writes (sorted; a folder is shown with a
    trailing /): a folder with any is not a training run's folder."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir()
                  if not (is_run_entry(p.name) and p.is_file()))
