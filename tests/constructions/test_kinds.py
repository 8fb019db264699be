"""constructions/kinds.py: every layer kind provides each capability the toolkit asks of a kind,
or is declared as not supporting it, with a reason; a kind without a capability is one line."""
import pytest

import numerics.training.modules  # noqa: F401 - registers torch_block
import verify.comparison.analyses  # noqa: F401 - registers invariants, interpolation
import verify.importers.shapes  # noqa: F401 - registers import_shapes
import verify.prover.modular  # noqa: F401 - registers modular_forward
import verify.prover.randomized  # noqa: F401 - registers entry_bounds
from constructions import kinds
from constructions.layers import LAYER_TYPES


@pytest.mark.parametrize("kind", list(LAYER_TYPES))
@pytest.mark.parametrize("capability", list(kinds.CAPABILITIES))
def test_every_kind_provides_each_capability_or_says_why_not(kind, capability):
    k = kinds.KINDS.get(kind)
    assert k is not None, f"nothing registered for layer kind {kind!r}"
    provided, reason = capability in k.provided, k.lacking.get(capability)
    assert provided != (reason is not None), f"{kind}: {capability} is {'both' if provided else 'neither'} " \
                                             f"provided and declared missing"
    if provided:
        assert kinds.get(kind, capability) is k.provided[capability]
    else:
        assert reason.strip() and "\n" not in reason
        with pytest.raises(kinds.KindUnsupported) as e:
            kinds.get(kind, capability)
        assert str(e.value) == f"layer kind {kind!r} has no {capability}: {reason}"


def test_the_table_names_every_kind_and_capability_and_nothing_is_undeclared():
    t = kinds.table()
    assert list(t) == list(LAYER_TYPES)
    assert all(list(row) == list(kinds.CAPABILITIES) for row in t.values())
    assert not [(k, c) for k, row in t.items() for c, v in row.items() if v == "undeclared"]
    assert kinds.supporting("torch_block") == ["baseconv", "lsa"]


def test_registration_is_checked():
    with pytest.raises(ValueError, match="unknown layer kind"):
        kinds.provide("no-such-kind", "torch_block", object)
    with pytest.raises(ValueError, match="unknown capability"):
        kinds.lacks("lsa", "no-such-capability", "because")
    with pytest.raises(ValueError, match="registered twice"):
        kinds.lacks("lsa", "torch_block", "a second registrant disagrees")
    with pytest.raises(ValueError, match="one non-empty line"):
        kinds.lacks("elsa", "torch_block", "two\nlines")
    with pytest.raises(kinds.KindUnsupported, match="nothing registered"):
        kinds.get("no-such-kind", "invariants")


def test_a_kind_without_a_torch_block_is_one_line_naming_the_reason():
    import numpy as np

    from constructions.layers import ELSA, ELSAHead
    from numerics.training.modules import stack_from_layers

    Z = np.zeros((2, 2))
    with pytest.raises(ValueError) as e:
        stack_from_layers([ELSA([[ELSAHead(Z, Z, Z, Z, Z, Z)]])])
    assert "\n" not in str(e.value) and "'elsa' has no torch_block" in str(e.value)
    assert "torch modules: baseconv and lsa" in str(e.value)
