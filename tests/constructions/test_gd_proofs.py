"""Every GD architecture of the registry is proved at many sizes, symbolic in its step size
(and ridge parameter where the construction carries one)."""
from __future__ import annotations

import pytest

from constructions.catalogue import gd_architectures
from verify.prover.proof import prove

from tests.support import assert_proved

SYMBOLIC = {"baseconv": ["eta"], "baseconv-causal": ["eta"], "lsa": ["sqrt_eta", "sqrt_lam"],
            "elsa": ["sqrt_eta", "lam"], "token-lsa": ["eta"],
            # compiled from a circuit whose eta is a constant: proved for the given exact eta
            "compiled-baseconv": [], "compiled-baseconv-causal": [], "compiled-lsa": [], "compiled-elsa": []}


@pytest.mark.parametrize("arch", list(gd_architectures()))
@pytest.mark.parametrize("n,d", [(1, 1), (3, 1), (2, 2), (3, 3), (4, 2), (6, 3)])
def test_proof_ok(arch, n, d):
    con = gd_architectures()[arch].build(n, d)
    res = prove(con)
    assert_proved(res)
    assert res.sections == {"prologue": True, "body": True, "epilogue": True}
    assert res.symbolic_params == SYMBOLIC[arch] and res.failure is None
    assert res.entries_checked == 3 * con.layout.shape[0] * con.layout.shape[1]
