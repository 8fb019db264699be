"""Backends and dtypes for numeric runs, chosen by name.

``numpy`` (float16, float32, float64), ``torch`` (CPU or CUDA; adds bfloat16)
and ``cupy`` (GPU).  Exact weights are rounded once to the dtype (each entry
correctly rounded from its exact rational), inputs likewise.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from constructions.base import to_float_array
from constructions.exact_floats import is_lazy
from constructions.layers import Layer

DTYPES = ("float16", "bfloat16", "float32", "float64")


class BackendError(ValueError):
    pass


def cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:  # pragma: no cover
        return False


def cupy_available() -> bool:
    try:
        import cupy  # noqa: F401

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


class ArrayLibrary:
    """One array library the numeric runs can use: how to make an array of a dtype
    on a device from float64 numpy, read it back, test finiteness, and its einsum.
    A new backend is one subclass added to :data:`LIBRARIES`."""

    name = "?"
    dtypes = ("float16", "float32", "float64")

    def check(self, dtype: str, device: str) -> None:
        """Raise BackendError if this library cannot run ``dtype`` on ``device`` here."""
        if dtype not in self.dtypes:
            raise BackendError(f"{dtype} needs the torch backend ({self.name} has no {dtype})")

    @property
    def xp(self):
        return np

    def asarray(self, a64: np.ndarray, dtype: str, device: str):
        with np.errstate(over="ignore"):  # out-of-range inputs become inf, reported by the runner
            return a64.astype(dtype)

    def to_numpy64(self, a) -> np.ndarray:
        return np.asarray(a, dtype=np.float64)

    def isfinite_all(self, a) -> bool:
        return bool(self.xp.isfinite(a).all())

    def einsum(self, *args):
        return self.xp.einsum(*args)


class NumpyLibrary(ArrayLibrary):
    name = "numpy"


class TorchLibrary(ArrayLibrary):
    name = "torch"
    dtypes = DTYPES

    def check(self, dtype, device):
        super().check(dtype, device)
        if device.startswith("cuda") and not cuda_available():
            raise BackendError("device cuda requested but torch sees no CUDA GPU")

    def asarray(self, a64, dtype, device):
        import torch

        return torch.as_tensor(a64, dtype=torch.float64, device=device).to(getattr(torch, dtype))

    def to_numpy64(self, a):
        return a.detach().to("cpu").double().numpy()

    def isfinite_all(self, a):
        import torch

        return bool(torch.isfinite(a).all())

    def einsum(self, *args):
        import torch

        return torch.einsum(*args)


class CupyLibrary(ArrayLibrary):
    name = "cupy"

    def check(self, dtype, device):
        super().check(dtype, device)
        if not cupy_available():
            raise BackendError("backend cupy needs cupy and a CUDA GPU; none found (pip install '.[gpu]')")

    @property
    def xp(self):
        import cupy

        return cupy

    def asarray(self, a64, dtype, device):
        return self.xp.asarray(a64).astype(dtype)

    def to_numpy64(self, a):
        return a.get().astype(np.float64)


#: every backend by name
LIBRARIES: dict[str, ArrayLibrary] = {lib.name: lib for lib in (NumpyLibrary(), TorchLibrary(), CupyLibrary())}
BACKENDS = tuple(LIBRARIES)


@dataclass(frozen=True)
class Backend:
    """A backend (array library), a dtype and a device, checked on creation."""

    name: str  # a key of LIBRARIES
    dtype: str
    device: str = "cpu"

    def __post_init__(self):
        if self.name not in LIBRARIES:
            raise BackendError(f"unknown backend {self.name!r}; choose one of {', '.join(BACKENDS)}")
        if self.dtype not in DTYPES:
            raise BackendError(f"unknown dtype {self.dtype!r}; choose one of {', '.join(DTYPES)}")
        self.lib.check(self.dtype, self.device)

    @property
    def lib(self) -> ArrayLibrary:
        return LIBRARIES[self.name]

    @property
    def xp(self):
        return self.lib.xp

    def asarray(self, a: np.ndarray):
        """float64/object numpy array -> backend array of this dtype."""
        a = a if is_lazy(a) else np.asarray(a)  # a weight file's floats read lazily: to_float_array casts them
        # exact weights: rounded once, straight to the target format; the cast below is then exact
        a = to_float_array(a, self.dtype).astype(np.float64) if a.dtype == object else np.asarray(a, np.float64)
        return self.lib.asarray(a, self.dtype, self.device)

    def to_numpy64(self, a) -> np.ndarray:
        return self.lib.to_numpy64(a)

    def isfinite_all(self, a) -> bool:
        return self.lib.isfinite_all(a)

    def einsum(self, *args):
        return self.lib.einsum(*args)

    def cast_layer(self, layer: Layer) -> Layer:
        return layer.map(self.asarray).prepare()

    def round_input(self, a: np.ndarray) -> np.ndarray:
        """The float64 value of ``a`` rounded to this dtype (what the run sees)."""
        return self.to_numpy64(self.asarray(a))


def exact_float(q) -> float:
    return float(Fraction(q))
