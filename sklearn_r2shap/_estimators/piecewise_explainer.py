"""The feature selector :class:`PiecewiseLinearExplainer`: exact SHAP values of piecewise-linear trees.

It computes the covers and leaf means of the data it is fitted on and the
exact SHAP values of :mod:`sklearn_r2shap.piecewise` (documentation page
"Piecewise-linear trees"), and owns the estimator's concerns only:
parameters, fitting, thresholds and attributes.

Layer: estimators. Imports the public functions and the layers below;
never imported by them.
"""
import time

import numpy as np
from sklearn.base import _fit_context
from sklearn.utils._param_validation import HasMethods
from sklearn.utils.validation import _check_feature_names, check_is_fitted

from .._errors import import_optional
from .._model import TreeEnsemble, to_ensemble
from .._validation import resolve_n_jobs
from ..piecewise import _build_game, _values
from ._selector import BaseTreeSelector, _unfrozen

__all__ = ["PiecewiseLinearExplainer"]


class PiecewiseLinearExplainer(BaseTreeSelector):
    """Exact SHAP values of a piecewise-linear boosted model, and feature selection.

    Fits a LightGBM model with linear leaves (``linear_tree=True``) or takes
    a fitted one, computes from the data given to ``fit`` the covers and the
    leaf means of every linear feature (page "Piecewise-linear trees": pass the
    training data for values consistent with LightGBM's leaf values), the
    exact SHAP values of those rows, and scores each feature by its mean
    ``|SHAP|``. As a selector it keeps the features whose score reaches
    ``threshold`` (the rules of
    :class:`~sklearn.feature_selection.SelectFromModel`).

    Neither LightGBM's ``pred_contrib`` (it raises for linear trees) nor
    shap's ``TreeExplainer`` (it ignores the linear terms) gives values that
    add up for these models; these do, for every row.

    Parameters
    ----------
    estimator : estimator, default=None
        The tree model: a LightGBM estimator with ``linear_tree=True``, any
        constant-leaf tree model sklearn-r2shap supports, a
        :class:`~sklearn.frozen.FrozenEstimator`, or (with ``prefit=True``) an
        ensemble from :func:`piecewise_ensemble`. None uses
        ``lightgbm.LGBMRegressor(linear_tree=True, verbose=-1)`` (LightGBM is
        an optional dependency).
    prefit : bool, default=False
        Use ``estimator`` as fitted; ``fit`` then only computes covers, means
        and values (``y`` may be None).
    threshold : str or float, default=None
        Features with ``feature_importances_ >= threshold`` are kept:
        ``"mean"`` (None), ``"median"``, ``"1.5*mean"`` or a number.
    max_features : int or callable, default=None
        Keep at most this many features (the best ones).
    n_jobs : int, default=None
        Threads of the kernels (None: all cores).
    verbose : "auto" or int, default="auto"
        As everywhere in the package: "auto" shows a progress bar when the
        cost estimate says the work is long, 0 nothing, 1 a progress bar
        always, 2 also one line per step (fitting, covers and leaf means, SHAP values,
        with their times).

    Attributes
    ----------
    estimator_ : estimator
        The fitted model.
    ensemble_ : TreeEnsemble
        Its trees.
    covers_ : ndarray of shape (n_nodes,)
        The (weighted) number of rows of ``fit``'s X reaching each node of
        ``ensemble_``.
    linear_means_ : ndarray of shape (n_linear_terms,)
        The leaf mean of each linear term, aligned with
        ``ensemble_.linear_coef`` (empty for constant leaves).
    expected_value_ : float or ndarray of shape (n_outputs,)
        ``v_x(empty)`` in raw (margin) space: every leaf at its mean
        prediction, weighted by its share of the rows.
    feature_importances_ : ndarray of shape (`n_features_in_`,)
        Mean ``|SHAP|`` over the rows of ``fit``'s X (and over outputs).
    threshold_ : float
    max_features_ : int or None
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Defined when X has feature names that are all strings.

    See Also
    --------
    piecewise_shap_values : the functional form.

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn_r2shap import PiecewiseLinearExplainer
    >>> X, y = load_diabetes(return_X_y=True, as_frame=True)
    >>> explainer = PiecewiseLinearExplainer(max_features=3, threshold=-np.inf).fit(X, y)
    >>> explainer.get_feature_names_out().tolist()
    ['bmi', 's1', 's5']
    >>> phi = explainer.shap_values(X.iloc[:4])
    >>> raw = explainer.estimator_.predict(X.iloc[:4], raw_score=True)
    >>> bool(np.allclose(phi.sum(axis=1), raw))
    True
    """

    _parameter_constraints: dict = {
        **BaseTreeSelector._parameter_constraints,
        "estimator": [None, HasMethods(["fit"]), TreeEnsemble],
    }

    def __init__(self, estimator=None, *, prefit=False, threshold=None, max_features=None,
                 n_jobs=None, verbose="auto"):
        self.estimator = estimator
        self.prefit = prefit
        self.threshold = threshold
        self.max_features = max_features
        self.n_jobs = n_jobs
        self.verbose = verbose

    def _default_estimator(self, y=None):
        lightgbm = import_optional(
            "lightgbm", "PiecewiseLinearExplainer's default estimator "
            "(lightgbm.LGBMRegressor(linear_tree=True); or pass an estimator)")
        return lightgbm.LGBMRegressor(linear_tree=True, verbose=-1)

    def _routing_estimator(self):
        if self.estimator is not None:
            return self.estimator
        try:
            return self._default_estimator()
        except ImportError:  # no LightGBM: fit says so; nothing to route to
            return None

    @_fit_context(prefer_skip_nested_validation=False)  # the estimator is not validated
    def fit(self, X, y=None, sample_weight=None, **fit_params):
        """Fit the model (unless prefit), then explain the rows of X.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Training data: it also defines the covers and leaf means.
        y : array-like of shape (n_samples,), default=None
            Target; required unless the model is prefit or frozen.
        sample_weight : array-like of shape (n_samples,), optional
            Used to weigh covers and means, and passed to the model's ``fit``;
            with metadata routing enabled, to the model only if it requested it
            (``model.set_fit_request(sample_weight=True)``).
        **fit_params : dict
            Passed to the model's ``fit`` (e.g. ``categorical_feature``); with
            metadata routing enabled, those it requested
            (``model.set_fit_request(...)``).

        Returns
        -------
        self : PiecewiseLinearExplainer
        """
        X, y, _ = self._check_fit_input(X, y, y_required=False, allow_nan=True,
                                        accept_sparse=False, convert=False)
        if isinstance(self.estimator, TreeEnsemble) and not self.prefit:
            raise ValueError("A TreeEnsemble cannot be fitted: pass prefit=True to explain it.")
        fitted = self.prefit or _unfrozen(self.estimator)[1]
        if y is None and not fitted:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None "
                "(only a prefit or frozen model can be explained without y)."
            )
        n_threads = resolve_n_jobs(self.n_jobs)
        since = time.perf_counter()
        if self.prefit and isinstance(self.estimator, TreeEnsemble):
            self.estimator_ = self.estimator
        else:
            model_params, model_weight, _ = self._route_fit(sample_weight, fit_params)
            self.estimator_ = self._fit_estimator(X, y, model_params, model_weight)
            self._step_line("fitted the model", since)
        model, X, _ = self._explained_model(self.estimator_, X)  # a Pipeline: its last step
        self.ensemble_ = to_ensemble(model)
        since = time.perf_counter()
        game = _build_game(self.ensemble_, X, sample_weight, n_threads)
        self._game = game
        self.covers_ = game.cover
        self.linear_means_ = game.linear_mean
        expected = game.expected_value
        self.expected_value_ = float(expected[0]) if len(expected) == 1 else expected.copy()
        self._step_line("computed covers and leaf means", since)
        since = time.perf_counter()
        phi = _values(game, X, self.n_jobs, verbose=self.verbose)
        self._step_line(f"computed the SHAP values of {phi.shape[0]} rows", since)
        phi = phi[..., :-1].reshape(phi.shape[0], -1, phi.shape[-1] - 1)
        self.feature_importances_ = np.abs(phi).mean(axis=(0, 1))
        self._set_threshold(X)
        return self

    def shap_values(self, X):
        """Exact SHAP values of rows, the expected value last.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_rows, `n_features_in_`)

        Returns
        -------
        ndarray of shape (n_rows, n_features + 1) or (n_rows, n_outputs, n_features + 1)
            In raw (margin) space: log-odds for a binary classifier. A row
            sums to the model's raw prediction.
        """
        check_is_fitted(self, "_game")
        _check_feature_names(self, X, reset=False)
        X = self._explained_rows(X)
        return _values(self._game, X, self.n_jobs, verbose=self.verbose)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = not self.prefit
        return tags
