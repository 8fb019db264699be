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
from constructions.layers import Layer

DTYPES = ("float16", "bfloat16", "float32", "float64")
BACKENDS = ("numpy", "torch", "cupy")


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


@dataclass(frozen=True)
class Backend:
    name: str  # numpy | torch | cupy
    dtype: str
    device: str = "cpu"

    def __post_init__(self):
        if self.name not in BACKENDS:
            raise BackendError(f"unknown backend {self.name!r}; choose one of {', '.join(BACKENDS)}")
        if self.dtype not in DTYPES:
            raise BackendError(f"unknown dtype {self.dtype!r}; choose one of {', '.join(DTYPES)}")
        if self.dtype == "bfloat16" and self.name != "torch":
            raise BackendError("bfloat16 needs --backend torch (numpy and cupy have no bfloat16)")
        if self.name == "cupy" and not cupy_available():
            raise BackendError("backend cupy needs cupy and a CUDA GPU; none found (pip install '.[gpu]')")
        if self.name == "torch" and self.device.startswith("cuda") and not cuda_available():
            raise BackendError("device cuda requested but torch sees no CUDA GPU")

    # ------------------------------------------------------------------
    @property
    def xp(self):
        if self.name == "cupy":
            import cupy

            return cupy
        return np

    def asarray(self, a: np.ndarray):
        """float64/object numpy array -> backend array of this dtype."""
        a = np.asarray(a)
        # exact weights: rounded once, straight to the target format; the cast below is then exact
        a = to_float_array(a, self.dtype).astype(np.float64) if a.dtype == object else np.asarray(a, np.float64)
        if self.name == "torch":
            import torch

            return torch.as_tensor(a, dtype=torch.float64, device=self.device).to(getattr(torch, self.dtype))
        if self.name == "cupy":
            import cupy

            return cupy.asarray(a).astype(self.dtype)
        with np.errstate(over="ignore"):  # out-of-range inputs become inf, reported by the runner
            return a.astype(self.dtype)

    def to_numpy64(self, a) -> np.ndarray:
        if self.name == "torch":
            return a.detach().to("cpu").double().numpy()
        if self.name == "cupy":
            return a.get().astype(np.float64)
        return np.asarray(a, dtype=np.float64)

    def isfinite_all(self, a) -> bool:
        if self.name == "torch":
            import torch

            return bool(torch.isfinite(a).all())
        return bool(self.xp.isfinite(a).all())

    def cast_layer(self, layer: Layer) -> Layer:
        return layer.map(self.asarray).prepare()

    def round_input(self, a: np.ndarray) -> np.ndarray:
        """The float64 value of ``a`` rounded to this dtype (what the run sees)."""
        return self.to_numpy64(self.asarray(a))


def exact_float(q) -> float:
    return float(Fraction(q))
