"""Learned-against-constructed comparison (``python -m verify.compare``); see docs/compare.md."""
from .models import (FROM_FORMATS, CompareError, Learned, Problems, Stack, build_construction, constructed_stack,
                     learned_stack, load_learned, perturb, read_learned, sample, stack_of)
from .analyses import (functional, implicit_w, interpolation, invariants, iterate, sensitivities)
from .poly import polynomial_view, weights_check

__all__ = ["FROM_FORMATS", "CompareError", "Learned", "Problems", "Stack", "build_construction", "constructed_stack",
           "learned_stack", "load_learned", "read_learned",
           "perturb", "sample", "stack_of", "functional", "implicit_w", "interpolation", "invariants",
           "iterate", "sensitivities", "polynomial_view", "weights_check"]
