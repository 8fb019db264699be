"""The names the training command line offers, importable without torch (so that
``python -m numerics.train`` parses and checks its arguments before the heavy imports)."""
from __future__ import annotations

import re
from pathlib import Path

#: architectures of :class:`numerics.training.modules.SequenceModel`
MODELS = ("baseconv", "lsa", "transformer")
#: the model settings (``ModelConfig`` fields) each architecture reads; every other one is ignored by
#: it, so ``python -m numerics.train`` refuses it (``tests/adversarial/test_t39_numerics.py`` checks
#: this table against the models :class:`numerics.training.modules.SequenceModel` builds)
MODEL_READS = {
    "baseconv": ("width", "layers", "mlp", "layernorm", "causal", "conv_method", "init_scale", "bias"),
    "lsa": ("width", "layers", "mlp", "layernorm", "heads", "head_dim", "init_scale"),
    "transformer": ("width", "layers", "mlp", "layernorm", "heads", "causal"),
}
#: tasks of :func:`numerics.training.tasks.make_task`
TASKS = ("gradient", "iterate", "icls", "read", "linear", "multiply")
#: the checkpoint file of a run folder
CKPT = "checkpoint.safetensors"
#: the files a training run writes into its folder (``python -m numerics.train --overwrite`` removes
#: the earlier run's before training)
RUN_FILES = (CKPT, "history.json", "result.json", "weights.safetensors", "curves.png", "iterate.json", "iterate.png")
#: the temporary file a run file is written through (``polyverify.cli.atomic_path``: ``.NAME.XXXXXXXX.tmp``,
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
