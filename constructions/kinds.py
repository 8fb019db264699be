"""What each layer kind provides beyond its math, in one table per kind.

A layer kind's math is its ``Layer`` subclass in ``constructions/layers.py`` (``LAYER_TYPES``).
The rest of the toolkit needs more of a kind than its forward, and that lives with the code that
uses it, in packages above this one (imports stay one-way: ``circuits`` <- ``constructions`` <-
``numerics``, ``verify``).  Each such module *registers* what it has for each kind here, and
*declares* each kind it has nothing for, with the reason; :func:`get` is how it looks a kind up,
so a kind without a capability is one clear line (:class:`KindUnsupported`), never a
``TypeError`` or a ``KeyError``.  ``tests/constructions/test_kinds.py`` imports every registering
module and checks that each kind in ``LAYER_TYPES`` provides each capability or is declared as
not supporting it, with a reason.

The capabilities (:data:`CAPABILITIES`), and who registers them:

* ``torch_block``: a trainable torch module that loads the layer's weights and exports them
  (``numerics/training/modules.py``);
* ``invariants``: the reparameterisation-invariant factors learned and constructed weights are
  compared by (``verify/comparison/analyses.py``);
* ``interpolation``: the layer on the straight path from the constructed weights to the aligned
  learned ones (``verify/comparison/analyses.py``);
* ``modular_forward``: a forward on int64 residues modulo ``p`` written by hand
  (``verify/prover/modular.py``), which the randomized check's single point and the compiler trace run;
  a kind without one runs its own ``Layer.forward`` on mod-p scalars there (``verify/prover/modp.py``,
  as the circuit command's trials do for every kind): slower at one point, the same math;
* ``entry_bounds``: bounds on the degree, 1-norm and denominators of the output entries, which
  ``--check random``'s error probability is computed from (``verify/prover/randomized.py``);
* ``import_shapes``: the shapes of the layer's arrays on a T x C state, checked before an
  imported weight file is proved (``verify/importers/shapes.py``).

Adding a layer kind: its ``Layer`` subclass in ``LAYER_TYPES``, then in each module above either
a ``provide(kind, capability, ...)`` or a ``lacks(kind, capability, reason)``; the test names what
is missing.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .layers import LAYER_TYPES

#: every capability a kind may provide: what it is, and the module that registers it
CAPABILITIES: dict[str, str] = {
    "torch_block": "a trainable torch module (numerics/training/modules.py)",
    "invariants": "reparameterisation-invariant factors for comparing weights (verify/comparison/analyses.py)",
    "interpolation": "the path from constructed to aligned learned weights (verify/comparison/analyses.py)",
    "modular_forward": "a hand-written int64 forward modulo p (verify/prover/modular.py)",
    "entry_bounds": "degree / norm / denominator bounds for --check random (verify/prover/randomized.py)",
    "import_shapes": "array shapes on a T x C state, checked on import (verify/importers/shapes.py)",
}


class KindUnsupported(ValueError):
    """A layer kind without a capability (the message says which, and why)."""


@dataclass
class Kind:
    """One layer kind: what the modules above provide for it, and what they declare it lacks."""

    name: str
    provided: dict[str, object] = field(default_factory=dict)
    lacking: dict[str, str] = field(default_factory=dict)


KINDS: dict[str, Kind] = {}


def _kind(kind: str) -> Kind:
    if kind not in LAYER_TYPES:
        raise ValueError(f"unknown layer kind {kind!r} (kinds: {', '.join(LAYER_TYPES)})")
    return KINDS.setdefault(kind, Kind(kind))


def _capability(capability: str) -> None:
    if capability not in CAPABILITIES:
        raise ValueError(f"unknown capability {capability!r} (capabilities: {', '.join(CAPABILITIES)})")


def _check_once(k: Kind, capability: str, same: bool) -> None:
    """One registrant per kind and capability (a module imported again may register again)."""
    if (capability in k.provided or capability in k.lacking) and not same:
        raise ValueError(f"layer kind {k.name!r}: {capability} registered twice")
    k.provided.pop(capability, None)
    k.lacking.pop(capability, None)


def provide(kind: str, capability: str, impl) -> None:
    """Register ``impl`` as ``kind``'s ``capability``."""
    _capability(capability)
    k = _kind(kind)
    old = k.provided.get(capability)
    _check_once(k, capability, old is not None and _module(old) == _module(impl))
    k.provided[capability] = impl


def _module(obj) -> str | None:
    return getattr(obj, "__module__", None) or getattr(type(obj), "__module__", None)


def lacks(kind: str, capability: str, reason: str) -> None:
    """Declare that ``kind`` has no ``capability``, and why (one line)."""
    _capability(capability)
    if not reason or "\n" in reason:
        raise ValueError(f"layer kind {kind!r}: {capability}: the reason must be one non-empty line")
    k = _kind(kind)
    _check_once(k, capability, k.lacking.get(capability) == reason)
    k.lacking[capability] = reason


def has(kind: str, capability: str) -> bool:
    _capability(capability)
    k = KINDS.get(kind)
    return k is not None and capability in k.provided


def get(kind: str, capability: str):
    """``kind``'s ``capability``, or :class:`KindUnsupported` with a one-line reason."""
    _capability(capability)
    k = KINDS.get(kind)
    if k is not None and capability in k.provided:
        return k.provided[capability]
    if k is not None and capability in k.lacking:
        raise KindUnsupported(f"layer kind {kind!r} has no {capability}: {k.lacking[capability]}")
    what = CAPABILITIES[capability]
    raise KindUnsupported(f"layer kind {kind!r} has no {capability} ({what}: nothing registered for it)")


def supporting(capability: str) -> list[str]:
    """The kinds that provide ``capability``, in ``LAYER_TYPES`` order."""
    return [k for k in LAYER_TYPES if has(k, capability)]


def table() -> dict[str, dict[str, str]]:
    """Per kind and capability: ``"provided"``, ``"lacks: <reason>"`` or ``"undeclared"``."""
    out = {}
    for name in LAYER_TYPES:
        k = KINDS.get(name, Kind(name))
        out[name] = {c: "provided" if c in k.provided else
                     (f"lacks: {k.lacking[c]}" if c in k.lacking else "undeclared") for c in CAPABILITIES}
    return out
