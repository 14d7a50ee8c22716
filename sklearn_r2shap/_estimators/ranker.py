"""The feature selector :class:`TreeGradRanker`: features ranked by TreeGrad-Ranker scores.

It calls the TreeGrad-Ranker scores of :mod:`sklearn_r2shap.ranking`
(treegrad-ranker paper, Algorithms 2 and 10; documentation page "Feature
ranking") and the semivalues of :mod:`sklearn_r2shap.attributions` on the
same games, and owns the estimator's concerns only: parameters, fitting,
thresholds and attributes.

Layer: estimators. Imports the public functions and the layers below;
never imported by them.
"""
import time
from numbers import Integral, Real

import numpy as np
from sklearn.base import _fit_context
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import (
    _check_feature_names,
    _check_n_features,
    check_is_fitted,
)

from .._errors import UnsupportedModelError
from .._execution.cost import semivalue_seconds
from .._execution.run import map_rows
from .._games import treegrad as _tg
from .._games.treegrad import _classes, _has_probability_leaves, _is_binary_margin, _signed
from .._model import explainable_ensemble
from .._prepare import prepare
from .._validation import check_row_weights, check_semivalue, n_rows_features
from ..attributions import semivalues_of
from ..ranking import _OPTIMIZERS, scores_of
from ._selector import BaseTreeSelector, _unfrozen, is_classification_target

__all__ = ["TreeGradRanker"]

def _check_model_output(ensemble, kind):
    """Check that the model has the ``model_output`` (declared None, "raw" or
    "probability")."""
    if kind == "probability" and not _has_probability_leaves(ensemble):
        if _classes(ensemble) is not None:
            held = ("margins (log-odds). The path-dependent game is defined on leaf "
                    "values, and a boosted model's probability is a nonlinear function "
                    "of their sum, not such a game. Use model_output='raw' (or None) to explain "
                    "the margin.")
        else:
            held = "the predictions of a regressor. Use model_output='raw' (or None)."
        raise UnsupportedModelError(
            f"model_output='probability' needs a model whose leaves hold class probabilities "
            f"(scikit-learn decision tree, random forest or extra trees classifiers); "
            f"the leaves of {ensemble.model_type} hold {held}"
        )


class TreeGradRanker(BaseTreeSelector):
    """Feature ranking and selection by TreeGrad-Ranker scores.

    Fits a tree model (or takes a fitted one) and computes, for every row of
    the data, the TreeGrad-Ranker scores of the row's path-dependent game
    (:func:`treegrad_scores`): the mean gradient along an ascent of the joint
    objective ``(F_x(z) - F_x(1 - z)) / 2`` of the game's multilinear
    extension, which ranks the features for the insertion and deletion
    metrics (:func:`sklearn_r2shap.metrics.insertion_deletion`). The global
    importance of a feature is the mean over rows of the absolute score, and
    the estimator selects features like
    :class:`~sklearn.feature_selection.SelectFromModel`.

    Parameters
    ----------
    estimator : tree model, default=None
        A scikit-learn tree, forest or gradient boosting model, or an
        XGBoost, LightGBM or CatBoost model. None uses
        ``DecisionTreeRegressor(max_depth=6, random_state=0)``, a regressor on
        a numeric ``y``; pass a classifier to explain classes. A
        :class:`~sklearn.frozen.FrozenEstimator` is used as fitted.
    prefit : bool, default=False
        Use ``estimator`` as already fitted: ``fit`` only scores the rows it
        is given (``y`` may then be None).
    n_iter : int, default=100
        Steps T of the ascent.
    step_size : float, default=5.0
        Learning rate (the paper's choice with T = 100).
    optimizer : {"adam", "gd"}, default="adam"
        Adam (Algorithm 10) or projected gradient ascent (Algorithm 2).
    model_output : {None, "raw", "probability"}, default=None
        The space of the explained output (shap's ``model_output``). The
        game is always defined on the model's leaf values: class
        probabilities for scikit-learn decision tree, random forest and extra
        trees classifiers, margins (log-odds) for boosted classifiers,
        predictions for regressors. None and "raw"
        explain exactly that; "probability" does the same but checks that the
        leaves hold probabilities and raises
        :class:`~sklearn_r2shap.UnsupportedModelError` otherwise (a boosted
        model's probability is not a path-dependent game).
    class_index : int or None, default=None
        For classifiers, the index (into the model's ``classes_``) of the
        class whose output is explained for every row; None explains the
        predicted class of each row, as in the paper. For a binary boosted
        classifier 1 is the margin and 0 the negated margin. For a
        multi-output regressor, the output index (required). Must be None or
        0 for single-output regressors.
    threshold : str or float, default=None
        Features with ``feature_importances_ >= threshold`` are selected: a
        number, "mean", "median" or e.g. "1.5*mean"; None means "mean".
    max_features : int or callable, default=None
        At most this many features (largest importances), also subject to
        the threshold.
    n_jobs : int, default=None
        Threads of the kernel (None: all cores).
    verbose : "auto" or int, default="auto"
        As everywhere in the package: "auto" shows a progress bar when the
        cost estimate says the work is long, 0 nothing, 1 a progress bar
        always, 2 also one line per step (fitting the model, scoring the rows).

    Attributes
    ----------
    estimator_ : estimator
        The fitted tree model.
    row_scores_ : ndarray of shape (n_samples, n_features)
        The TreeGrad-Ranker scores of the rows given to ``fit``, one row each.
    feature_importances_ : ndarray of shape (n_features,)
        Mean over rows (weighted by ``sample_weight`` if given) of the
        absolute scores: how strongly a feature moves the explained output,
        in either direction.
    mean_scores_ : ndarray of shape (n_features,)
        The signed (weighted) mean of the rows' scores.
    threshold_ : float
        The threshold applied.
    max_features_ : int or None
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Defined when X has feature names that are all strings.

    See Also
    --------
    treegrad_scores : the functional form.
    sklearn_r2shap.metrics.insertion_deletion : the metrics the ranking optimises.

    Examples
    --------
    >>> from sklearn.datasets import make_friedman1
    >>> from sklearn.tree import DecisionTreeRegressor
    >>> from sklearn_r2shap import TreeGradRanker
    >>> X, y = make_friedman1(n_samples=300, n_features=8, random_state=0)
    >>> ranker = TreeGradRanker(DecisionTreeRegressor(max_depth=5, random_state=0),
    ...                         max_features=3, threshold=-np.inf).fit(X, y)
    >>> ranker.row_scores_.shape
    (300, 8)
    >>> len(ranker.get_feature_names_out())
    3
    >>> order = ranker.rank(X[:2])   # feature indices, best first
    >>> order.shape
    (2, 8)
    """

    _parameter_constraints: dict = {
        **BaseTreeSelector._parameter_constraints,
        "n_iter": [Interval(Integral, 1, None, closed="left")],
        "step_size": [Interval(Real, 0, np.inf, closed="neither")],
        "optimizer": [StrOptions(set(_OPTIMIZERS))],
        "model_output": [None, StrOptions({"raw", "probability"})],
        "class_index": [None, Interval(Integral, 0, None, closed="left")],
    }

    def __init__(self, estimator=None, *, prefit=False, n_iter=100, step_size=5.0,
                 optimizer="adam", model_output=None, class_index=None, threshold=None,
                 max_features=None, n_jobs=None, verbose="auto"):
        self.estimator = estimator
        self.prefit = prefit
        self.n_iter = n_iter
        self.step_size = step_size
        self.optimizer = optimizer
        self.model_output = model_output
        self.class_index = class_index
        self.threshold = threshold
        self.max_features = max_features
        self.n_jobs = n_jobs
        self.verbose = verbose

    def _default_estimator(self, y=None):
        if is_classification_target(y):
            return DecisionTreeClassifier(max_depth=6, random_state=0)
        return DecisionTreeRegressor(max_depth=6, random_state=0)

    def _needs_y(self):
        frozen = self.estimator is not None and _unfrozen(self.estimator)[1]
        return not (self.prefit or frozen)

    @_fit_context(prefer_skip_nested_validation=False)  # the estimator is not validated
    def fit(self, X, y=None, sample_weight=None, **fit_params):
        """Fit the model (unless prefit) and score every row of X.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        y : array-like of shape (n_samples,), default=None
            Needed unless the model is prefit or frozen.
        sample_weight : array-like of shape (n_samples,), optional
            Used as row weights in ``feature_importances_`` and
            ``mean_scores_``, and passed to the model's ``fit`` (to its final
            step, as ``<step>__sample_weight``, for a Pipeline); with metadata
            routing enabled, to the model only if it requested it
            (``model.set_fit_request(sample_weight=True)``).
        **fit_params : dict
            Passed to the model's ``fit``; with metadata routing enabled, those
            it requested (``model.set_fit_request(...)``).

        Returns
        -------
        self : TreeGradRanker
        """
        X, y, _ = self._check_fit_input(X, y, y_required=self._needs_y(), allow_nan=True,
                                        convert=False)
        if sample_weight is not None:
            sample_weight = check_row_weights(sample_weight, n_rows_features(X)[0])
        model_params, model_weight, _ = self._route_fit(sample_weight, fit_params)
        since = time.perf_counter()
        self.estimator_ = self._fit_estimator(X, y, model_params, model_weight)
        self._step_line("fitted the model", since)
        model, X_explained, _ = self._explained_model(self.estimator_, X)
        ensemble = explainable_ensemble(model)
        _check_model_output(ensemble, self.model_output)
        self._ensemble = ensemble
        since = time.perf_counter()
        self.row_scores_ = self._scores(X_explained)
        self._step_line(f"scored {len(self.row_scores_)} rows", since)
        self.feature_importances_ = np.average(np.abs(self.row_scores_), axis=0,
                                               weights=sample_weight)
        self.mean_scores_ = np.average(self.row_scores_, axis=0, weights=sample_weight)
        self._set_threshold(X)
        return self

    def _check_input(self, X):
        """X checked against the fit (names and width)."""
        check_is_fitted(self, "feature_importances_")
        n_rows_features(X)
        _check_feature_names(self, X, reset=False)
        _check_n_features(self, X, reset=False)

    def _check_class_index(self, ensemble):
        if self.class_index is not None:
            binary = _is_binary_margin(ensemble)
            n_choices = 2 if binary else ensemble.n_outputs
            if self.class_index >= n_choices:
                what = (f"{n_choices} classes" if binary or _classes(ensemble) is not None
                        else "a single output" if n_choices == 1 else f"{n_choices} outputs")
                raise ValueError(
                    f"class_index={self.class_index} is out of range: "
                    f"{ensemble.model_type} has {what}."
                )

    def _call(self, X):
        """The rows X (as the explained model sees them) prepared for the functions."""
        self._check_class_index(self._ensemble)
        return prepare(self._ensemble, X, n_jobs=self.n_jobs, verbose=self.verbose)

    def _scores(self, X):
        return scores_of(self._call(X), n_iter=int(self.n_iter), step_size=float(self.step_size),
                         adam=self.optimizer == "adam", class_index=self.class_index)

    def row_scores(self, X):
        """TreeGrad-Ranker scores of the rows of X, shape (n_samples, n_features).

        Higher scores rank first; the explained output is chosen by
        ``model_output`` and ``class_index`` as in ``fit``.
        """
        self._check_input(X)
        return self._scores(self._explained_rows(X))

    def rank(self, X):
        """Feature indices of every row of X, best first.

        Sorted by decreasing score; ties are broken by the lower feature
        index. Shape (n_samples, n_features), integer dtype.
        """
        return np.argsort(-self.row_scores(X), axis=1, kind="stable")

    def values(self, X, semivalue="shapley", *, q=0.5, alpha=1, beta=1):
        """Semivalues of the same games (same output and class selection).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        semivalue : {"shapley", "banzhaf", "weighted_banzhaf", "beta"}, default="shapley"
            Shapley values, Banzhaf values, weighted Banzhaf values with
            parameter ``q`` or Beta Shapley values with parameters
            ``(alpha, beta)`` (:func:`~sklearn_r2shap.shap_values`,
            :func:`~sklearn_r2shap.banzhaf_values`,
            :func:`~sklearn_r2shap.beta_shapley_values`).
        q : float in (0, 1), default=0.5
            Only for ``semivalue="weighted_banzhaf"``.
        alpha, beta : int >= 1, default=1
            Only for ``semivalue="beta"``.

        Returns
        -------
        ndarray of shape (n_samples, n_features)
            The values, without the expected-value column of the functions
            of the local attributions, comparable with :meth:`row_scores`.
        """
        family, parameters = check_semivalue(semivalue, q=q, alpha=alpha, beta=beta)
        self._check_input(X)
        call = self._call(self._explained_rows(X))
        outputs = map_rows(call, _tg.outputs_block, trailing_shape=(2,), desc="Outputs",
                           seconds_per_row=semivalue_seconds(call.ensemble, 1),
                           class_index=self.class_index)
        phi = semivalues_of(call, family, parameters)
        if phi.ndim == 3:
            phi = phi[np.arange(len(phi)), outputs[:, 0].astype(np.int64)]
        return _signed(phi[:, :-1], outputs[:, 1][:, None])

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = self._estimator_accepts_sparse()
        tags.target_tags.required = self._needs_y()
        return tags
