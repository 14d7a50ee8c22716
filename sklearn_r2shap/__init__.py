"""sklearn-r2shap: exact Shapley explanations and feature selection for tree models."""
from ._model import TreeEnsemble, UnsupportedModelError, to_ensemble
from . import metrics
from ._cost import CostEstimate, SampledAlgorithmWarning, estimate_cost
from .importance import R2Decomposition, ShapleyR2Importance, r2_decomposition
from .piecewise import (
    PiecewiseLinearExplainer,
    piecewise_ensemble,
    piecewise_predict,
    piecewise_shap_values,
)
from .shapflex import shapflex_decomposition
from .ranking import TreeGradRanker, multilinear_gradient, treegrad_scores
from .explain import (
    banzhaf_values,
    beta_shapley_values,
    expected_value,
    predict_raw,
    probabilistic_values,
    saabas_values,
    shap_values,
)
from .interactions import shap_interaction_values

__version__ = "0.1.0"

__all__ = [
    "TreeEnsemble",
    "UnsupportedModelError",
    "to_ensemble",
    "shap_values",
    "shap_interaction_values",
    "saabas_values",
    "banzhaf_values",
    "beta_shapley_values",
    "expected_value",
    "predict_raw",
    "probabilistic_values",
    "r2_decomposition",
    "R2Decomposition",
    "ShapleyR2Importance",
    "estimate_cost",
    "CostEstimate",
    "SampledAlgorithmWarning",
    "shapflex_decomposition",
    "TreeGradRanker",
    "multilinear_gradient",
    "treegrad_scores",
    "metrics",
    "PiecewiseLinearExplainer",
    "piecewise_ensemble",
    "piecewise_predict",
    "piecewise_shap_values",
]
