"""The names the training command line offers, importable without torch (so that
``python -m numerics.train`` parses and checks its arguments before the heavy imports)."""

#: architectures of :class:`numerics.training.modules.SequenceModel`
MODELS = ("baseconv", "lsa", "transformer")
#: tasks of :func:`numerics.training.tasks.make_task`
TASKS = ("gradient", "iterate", "icls", "read", "linear", "multiply")
#: the checkpoint file of a run folder
CKPT = "checkpoint.safetensors"
#: the files a training run writes into its folder (``python -m numerics.train --overwrite`` removes
#: the earlier run's before training)
RUN_FILES = (CKPT, "history.json", "result.json", "weights.safetensors", "curves.png", "iterate.json", "iterate.png")
