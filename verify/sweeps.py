"""The sweepable commands of ``verify`` (``python -m numerics.sweep compare|catalogue``), registered
with the sweep runner (``polyverify.sweep.registry``); each adapter, ``SWEEP``, sits next to its
command's CLI and is imported only when its sweep is used."""
from polyverify.sweep.registry import register

register("compare", "verify.compare:SWEEP", "verify.compare over a set of learned weight files")
register("catalogue", "verify.catalogue_report:SWEEP", "the catalogue report, one proof per entry")
