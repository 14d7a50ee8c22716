"""The estimators: scikit-learn feature selectors built on the public functions.

One module per estimator -- :mod:`.importance` (:class:`ShapleyR2Importance`,
shares of R^2 / D^2), :mod:`.rfecv` (:class:`ShapleyR2RFECV`, recursive
elimination by those shares), :mod:`.ranker` (:class:`TreeGradRanker`,
TreeGrad-Ranker scores), :mod:`.piecewise_explainer`
(:class:`PiecewiseLinearExplainer`, SHAP values of piecewise-linear trees) --
and what only they use: the SelectFromModel-style base ``_selector``, the
tests on held-out shares and the one-standard-error rule ``_stats``, and the
cross-fitted shares ``_held_out``. An estimator calls the public functions
and owns only parameters, fitting, cross-validation, selection and
attributes.

Layer: estimators. Imports the public functions and every layer below; never
imported by a public function.
"""
from .importance import ShapleyR2Importance
from .piecewise_explainer import PiecewiseLinearExplainer
from .ranker import TreeGradRanker
from .rfecv import ShapleyR2RFECV

__all__ = ["ShapleyR2Importance", "ShapleyR2RFECV", "TreeGradRanker",
           "PiecewiseLinearExplainer"]
