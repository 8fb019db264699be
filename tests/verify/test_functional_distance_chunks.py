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
