"""Every public exception and warning class of the package.

Ground floor: imports nothing of the package. The classes are re-exported
by the package root (``sklearn_r2shap.UnsupportedModelError``, ...).

Layer: ground floor.
"""

__all__ = ["UnsupportedModelError", "SampledAlgorithmWarning"]


class UnsupportedModelError(TypeError, ValueError):
    """A model, objective, split type or setting that cannot be explained exactly."""


class SampledAlgorithmWarning(UserWarning):
    """``algorithm="auto"`` ran the sampled R^2 decomposition instead of the exact one."""
