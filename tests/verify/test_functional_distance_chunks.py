"""verify/functional_distance.py's sampled run in chunks (``run_float``'s ``chunk_bytes``): each input's
outputs are the ones the whole batch at once gives, for every chunk size down to one input, on a perturbed
gd-baseconv and gd-lsa (the chunk bounds the forward's working memory, not what is computed)."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from constructions.catalogue import gd_architectures
from verify import functional_distance as F


@pytest.mark.parametrize("arch,n,d", [("baseconv", 6, 2), ("lsa", 3, 2)])
@pytest.mark.parametrize("chunk_inputs", [1, 3, 7, 64])
def test_chunks_give_the_whole_batch_outputs(arch, n, d, chunk_inputs):
    con = gd_architectures()[arch].build(n, d)
    layers = [L.map(lambda w: w.copy()) for L in con.layers(2)]
    W = next(a for a in layers[0].arrays().values() if np.size(a) > 1)
    W.flat[0] = Fraction(W.flat[0]) + Fraction(1, 7)  # a learned-like change: the stacks differ
    ref, learned, _ = F.gd_stacks(con, 2, layers)
    rng = np.random.default_rng(5)
    v = {nm: rng.standard_normal((20,) + tuple(shape)) for nm, shape in con.variables.items()}
    per = int(np.prod(np.shape(np.asarray(learned.start({k: x[:1] for k, x in v.items()}), dtype=float))[1:])) * 8
    whole = F.run_float(learned, v, chunk_bytes=1 << 40)
    parts = F.run_float(learned, v, chunk_bytes=per * chunk_inputs)
    assert parts.shape == whole.shape == (20, whole.shape[1])
    np.testing.assert_allclose(parts, whole, rtol=1e-12, atol=1e-12)


def test_the_sample_count_is_bounded_by_the_work_and_stated():
    """The sampled inputs: every input at the small sizes, fewer (never below MIN_SAMPLES) where the file's states
    make each input's run large; the line names the count the run used."""
    assert F.sample_count((21, 27), 7) == F.DEFAULT_SAMPLES
    big = F.sample_count((513, 642), 7)
    assert F.MIN_SAMPLES <= big < F.sample_count((257, 322), 7) < F.DEFAULT_SAMPLES
    assert big * 7 * (513 * 513 * 642 + 513 * 642 * 642) <= max(F.SAMPLED_WORK, F.MIN_SAMPLES * 7 * (513 * 513 * 642 + 513 * 642 * 642))
    assert F.sample_count((513, 642), 7, work=1) == F.MIN_SAMPLES
