"""sklearn-r2shap: exact Shapley explanations and feature selection for tree models.

The public names, nothing else (the layers are described on the
documentation page "Contributing": ground floor, kernels, models, games,
execution, public functions, estimators in ``_estimators/``).

Layer: the package root (imports the public modules).
"""
from ._errors import SampledAlgorithmWarning, UndefinedScoreError, UnsupportedModelError
from ._model import TreeEnsemble, to_ensemble
from . import metrics
from ._execution.cost import CostEstimate
from ._scores import R2Decomposition, R2Interactions, ShapFlexDecomposition
from .decomposition import estimate_cost, r2_decomposition, r2_interactions
from .piecewise import piecewise_ensemble, piecewise_predict, piecewise_shap_values
from .shapflex import shapflex_decomposition
from .ranking import multilinear_gradient, treegrad_scores
from .attributions import (
    banzhaf_values,
    beta_shapley_values,
    expected_value,
    predict_raw,
    probabilistic_values,
    saabas_values,
    shap_values,
)
from .interactions import InteractionSummary, shap_interaction_summary, shap_interaction_values
from .explanation import Explanation, explain
from .explainer import TreeExplainer
from ._estimators import (
    PiecewiseLinearExplainer,
    ShapleyR2Importance,
    ShapleyR2RFECV,
    TreeGradRanker,
)

__version__ = "0.1.0"

__all__ = [
    "TreeEnsemble",
    "TreeExplainer",
    "UnsupportedModelError",
    "to_ensemble",
    "shap_values",
    "shap_interaction_values",
    "shap_interaction_summary",
    "InteractionSummary",
    "explain",
    "Explanation",
    "saabas_values",
    "banzhaf_values",
    "beta_shapley_values",
    "expected_value",
    "predict_raw",
    "probabilistic_values",
    "r2_decomposition",
    "R2Decomposition",
    "r2_interactions",
    "R2Interactions",
    "ShapFlexDecomposition",
    "ShapleyR2Importance",
    "ShapleyR2RFECV",
    "estimate_cost",
    "CostEstimate",
    "SampledAlgorithmWarning",
    "UndefinedScoreError",
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
