"""Learned-against-constructed comparison (``python -m verify.compare``); see docs/compare.md."""
from .models import (CompareError, Problems, Stack, build_construction, constructed_stack, load_learned,
                     perturb, sample, stack_of)
from .analyses import (functional, implicit_w, interpolation, invariants, iterate, sensitivities)
from .poly import polynomial_view, weights_check

__all__ = ["CompareError", "Problems", "Stack", "build_construction", "constructed_stack", "load_learned",
           "perturb", "sample", "stack_of", "functional", "implicit_w", "interpolation", "invariants",
           "iterate", "sensitivities", "polynomial_view", "weights_check"]
