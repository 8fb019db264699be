"""Training BaseConv / linear attention / softmax Transformers to high precision.

See ``docs/training.md``.  Modules (:mod:`.modules`) wrap the toolkit's
layer math; tasks (:mod:`.tasks`) follow seed 000 App. B.3/B.4; the recipe
(:mod:`.recipe`) follows seed 000 Sec. 5.1 and the official code; the loop
(:mod:`.trainer`) writes history, checkpoints, weights and curves; and
:mod:`.iterate` applies a trained gradient model as an iterative solver.
"""
import importlib

#: every name this package exports, and its submodule; imported on first use (PEP 562), so that
#: ``numerics.training.names`` (what the command line needs to parse its arguments) costs no torch
_WHERE = {"apply_iteratively": "iterate", "ood_sweep": "iterate",
          **dict.fromkeys(("BaseConvBlock", "LayerStack", "LSABlock", "ModelConfig", "SequenceModel",
                           "SoftmaxAttention", "export_weights", "load_weight_file", "stack_from_layers"), "modules"),
          **dict.fromkeys(("AdaptiveLR", "GradFilterEMA", "RecipeConfig", "StepLR", "UpdateEMA", "cosine_metric"),
                          "recipe"),
          **dict.fromkeys(("TASKS", "LSTask", "PrimitiveTask", "make_task"), "tasks"),
          **dict.fromkeys(("TaskConfig", "TrainConfig", "Trainer"), "trainer")}

__all__ = list(_WHERE)


def __getattr__(name):
    if name in _WHERE:
        return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_WHERE))
