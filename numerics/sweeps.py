"""The sweepable commands of ``numerics`` (``python -m numerics.sweep roundoff|train``), registered
with the sweep runner (``polyverify.sweep.registry``); each adapter, ``SWEEP``, sits next to its
command's CLI and is imported only when its sweep is used."""
from polyverify.sweep.registry import register

register("roundoff", "numerics.roundoff:SWEEP",
         "roundoff of GD constructions: archs x depths x dtypes x sizes x kappas x sigmas x seeds")
register("train", "numerics.train:SWEEP", "training runs: models x tasks x learning rates x seeds x widths")
