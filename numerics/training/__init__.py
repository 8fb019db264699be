"""Training BaseConv / linear attention / softmax Transformers to high precision.

See ``docs/training.md``.  Modules (:mod:`.modules`) wrap the toolkit's
layer math; tasks (:mod:`.tasks`) follow seed 000 App. B.3/B.4; the recipe
(:mod:`.recipe`) follows seed 000 Sec. 5.1 and the official code; the loop
(:mod:`.trainer`) writes history, checkpoints, weights and curves; and
:mod:`.iterate` applies a trained gradient model as an iterative solver.
"""
from .iterate import apply_iteratively, ood_sweep
from .modules import (BaseConvBlock, LayerStack, LSABlock, ModelConfig, SequenceModel, SoftmaxAttention,
                      export_weights, load_weight_file, stack_from_layers)
from .recipe import (AdaptiveLR, GradFilterEMA, RecipeConfig, StepLR, UpdateEMA, cosine_metric)
from .tasks import TASKS, LSTask, PrimitiveTask, make_task
from .trainer import TaskConfig, TrainConfig, Trainer

__all__ = ["apply_iteratively", "ood_sweep", "BaseConvBlock", "LayerStack", "LSABlock", "ModelConfig",
           "SequenceModel", "SoftmaxAttention", "export_weights", "load_weight_file", "stack_from_layers",
           "AdaptiveLR", "GradFilterEMA", "RecipeConfig", "StepLR", "UpdateEMA", "cosine_metric", "TASKS",
           "LSTask", "PrimitiveTask", "make_task", "TaskConfig", "TrainConfig", "Trainer"]
