"""A CPU-measurable proxy for the host synchronisations of a training step (issue 45 item 4).

On a GPU, reading a device value to the host (``t.item()``, ``float(t)``, ``int(t)``, ``bool(t)``
and so ``if t:`` or ``while t:``, ``t.tolist()``, ``t.numpy()``, ``t.cpu()``, ``np.asarray(t)``,
printing or formatting ``t``; data-dependent shapes: ``t.nonzero()``, ``t[mask]`` with a boolean
mask, ``t.masked_select``, ``torch.unique``) stalls the host until the card has finished every kernel
queued before it; a tensor made on a device from Python or numpy data (``torch.tensor(...,
device=...)``, ``torch.as_tensor(..., device=...)``) or moved with a blocking ``.to(device)`` is a
host-to-device copy that also waits (one made on the host, without ``device``, is not: its move,
if any, is counted).  None of this
needs a GPU to be seen: :class:`HostSyncCounter` is a ``TorchFunctionMode`` that sees every such call
made through torch's Python API while it is active (on a CPU run exactly as on a GPU run) and counts
them by kind and by the line of code that made them.

Not counted: reads of the optimiser's step counters (``torch.optim`` keeps ``state['step']`` on the
host unless ``capturable``, so those reads never wait for the device: passed as ``host_tensors``,
or read through ``torch.optim``'s ``_get_value``), and what an optimiser does while it creates its
state (on a parameter's first step, once a run).
Counted apart from the syncs: ``to(device, non_blocking=True)`` copies (``transfers``), which queue
a copy from pinned memory without waiting.
"""
from __future__ import annotations

import collections
import os
import sys

import torch
from torch.overrides import TorchFunctionMode

#: the Tensor methods and torch functions that read a device value to the host
READS = {"item", "tolist", "numpy", "cpu", "__float__", "__int__", "__index__", "__bool__", "__complex__",
         "__array__", "__format__", "__repr__", "__str__", "nonzero", "masked_select", "unique",
         "unique_consecutive", "argwhere"}
#: the calls that make a tensor from host (Python or numpy) data
FROM_HOST = {"tensor", "as_tensor"}

_HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _name(func) -> str:
    return getattr(func, "__name__", None) or str(func)


def _caller() -> str:
    """``file:line`` of the innermost frame outside torch and this module (where the call was made)."""
    f = sys._getframe(2)
    torch_dir = os.path.dirname(torch.__file__)
    while f is not None:
        fn = f.f_code.co_filename
        if not fn.startswith(torch_dir) and fn != __file__:
            return f"{os.path.relpath(fn, _HERE) if fn.startswith(_HERE) else fn}:{f.f_lineno}"
        f = f.f_back
    return "?"


class HostSyncCounter(TorchFunctionMode):
    """``with HostSyncCounter(host_tensors) as c: ...``; then ``c.syncs`` (the calls that wait for the
    device), ``c.transfers`` (non-blocking host-to-device copies) and ``c.where`` (a Counter of
    ``"kind at file:line"``).  ``host_tensors``: a callable returning the tensors that live on the host
    by design (the optimiser's step counters), whose reads are not counted."""

    def __init__(self, host_tensors=None):
        super().__init__()
        self.host_tensors = host_tensors or (lambda: ())
        self.syncs = 0
        self.transfers = 0
        self.where: collections.Counter = collections.Counter()

    def _count(self, kind: str, sync: bool) -> None:
        if sync:
            self.syncs += 1
        else:
            self.transfers += 1
        self.where[f"{kind} at {_caller()}"] += 1

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = _name(func)
        if _in_optimizer_init():
            pass
        elif name in READS:
            t = args[0] if args else None
            if not (torch.is_tensor(t) and any(t is h for h in self.host_tensors())):
                self._count(name, True)
        elif name in FROM_HOST:
            data = args[0] if args else kwargs.get("data")
            device = kwargs.get("device", args[2] if name == "as_tensor" and len(args) > 2 else None)
            if not torch.is_tensor(data) and device is not None:  # host data copied to a device
                self._count(f"torch.{name}(device=...)", True)
        elif name == "__getitem__" and len(args) > 1 and _has_bool_index(args[1]):
            self._count("boolean-mask index", True)
        elif name == "to" and _device_of(args[1:], kwargs) is not None:
            self._count("to(device)" + (", non-blocking" if kwargs.get("non_blocking") else ""),
                        not kwargs.get("non_blocking", False))
        return func(*args, **kwargs)


def _in_optimizer_init() -> bool:
    """Whether the call comes from a ``torch.optim`` optimiser creating its state (``_init_group`` on
    a parameter's first step: once per run) or reading its host step counter (``_get_value``)."""
    optim_dir = os.path.dirname(torch.optim.__file__)
    f = sys._getframe(2)
    while f is not None:
        if f.f_code.co_name in ("_init_group", "_get_value") and f.f_code.co_filename.startswith(optim_dir):
            return True
        f = f.f_back
    return False


def _has_bool_index(idx) -> bool:
    items = idx if isinstance(idx, tuple) else (idx,)
    return any(torch.is_tensor(i) and i.dtype == torch.bool for i in items)


def _device_of(args, kwargs):
    """The device a ``Tensor.to`` call names, if any."""
    if "device" in kwargs:
        return kwargs["device"]
    for a in args:
        if isinstance(a, (str, torch.device)):
            return a
    return None


def adam_step_counters(opt: torch.optim.Optimizer):
    """The optimiser's host-resident step counters (``state['step']`` tensors on the CPU)."""
    def get():
        return [st["step"] for st in opt.state.values()
                if torch.is_tensor(st.get("step")) and st["step"].device.type == "cpu"]
    return get
