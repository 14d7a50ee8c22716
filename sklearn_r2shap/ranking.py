"""TreeGrad-Ranker: feature rankings that optimise the joint insertion/deletion
objective of one row (treegrad-ranker paper, Algorithms 2 and 10;
documentation page "Feature ranking").

For a row ``x`` the path-dependent game ``v_x`` (page "Local attributions") has the
multilinear extension ``F(z) = E_{S ~ Bernoulli(z)} v_x(S)`` on ``[0, 1]^p``.
:func:`multilinear_gradient` evaluates ``F`` and its gradient exactly at any
point with TreeGrad (Algorithm 9), including points with coordinates 0 and 1.
:func:`treegrad_scores` runs projected gradient ascent (or Adam) on the joint
objective ``(F(z) - F(1 - z)) / 2`` from ``z = 1/2`` and returns the running
mean of its gradients: the TreeGrad-Ranker scores. :class:`TreeGradRanker`
wraps them as a scikit-learn feature selector.

Which output is explained
-------------------------
All functions take ``class_index``, the index of the model output (class) whose
game is explained:

* single-output models (regressors): that output; ``class_index`` may be None or 0;
* models with one output per class (multiclass boosting margins, the class
  probabilities of scikit-learn tree and forest classifiers): ``class_index``
  is a class index, or an array of one class index per row; None means the
  **predicted class of each row** (the argmax of the raw output, which is the
  class the model's ``predict`` returns);
* binary boosted classifiers with one margin (log-odds of class 1): ``class_index``
  is a class index too: 1 is the margin, 0 its negation (the log-odds of
  class 0; the game, its gradients, values and scores change sign); None is
  again the predicted class of each row (class 1 where the margin is > 0);
* multi-output regressors: an output index must be given.

Class semantics come from the model's ``classes_``: a bare XGBoost or
LightGBM ``Booster`` of a binary objective has none and is explained as a
single-output model (its margin).

The games (output selection, the TreeGrad kernels of a block of rows) live in
:mod:`._games.treegrad`. Layer: public functions (and the estimator
:class:`TreeGradRanker`, which calls them).
"""
import numbers

import numpy as np
from sklearn.utils.validation import (
    _check_feature_names,
    _check_n_features,
    _check_sample_weight,
    check_is_fitted,
)

from ._errors import UnsupportedModelError
from ._execution.cost import semivalue_seconds
from ._execution.run import map_rows
from ._games import treegrad as _tg
from ._games.treegrad import _classes, _has_probability_leaves, _is_binary_margin, _signed
from ._prepare import prepare, split_row_argument
from ._selector import BaseTreeSelector, _unfrozen, is_classification_target
from ._validation import n_rows_features
from ._model import explainable_ensemble
from .attributions import check_game, semivalues_of

__all__ = ["multilinear_gradient", "treegrad_scores", "TreeGradRanker"]

_OPTIMIZERS = ("adam", "gd")


# --------------------------------------------------------------------------
# Output selection (shared with metrics.py)


def _check_output_kind(ensemble, kind):
    """Validate the estimator's ``output`` ("raw", "probability" or None)."""
    if not (kind is None or (isinstance(kind, str) and kind in ("raw", "probability"))):
        raise ValueError(f"output must be None, 'raw' or 'probability', got {kind!r}.")
    if kind == "probability" and not _has_probability_leaves(ensemble):
        if _classes(ensemble) is not None:
            held = ("margins (log-odds). The path-dependent game is defined on leaf "
                    "values, and a boosted model's probability is a nonlinear function "
                    "of their sum, not such a game. Use output='raw' (or None) to explain "
                    "the margin.")
        else:
            held = "the predictions of a regressor. Use output='raw' (or None)."
        raise UnsupportedModelError(
            f"output='probability' needs a model whose leaves hold class probabilities "
            f"(scikit-learn decision tree, random forest or extra trees classifiers); "
            f"the leaves of {ensemble.model_type} hold {held}"
        )


# --------------------------------------------------------------------------
# Parameter checks


def _check_points(z, shape):
    n_rows, n_features = shape
    try:
        z = np.asarray(z, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"z must be numeric: {exc}") from None
    if z.ndim == 1:
        if z.shape[0] != n_features:
            raise ValueError(f"z has {z.shape[0]} entries, expected n_features = {n_features}.")
        z = np.broadcast_to(z, (n_rows, n_features))
    elif z.ndim != 2 or z.shape != (n_rows, n_features):
        raise ValueError(
            f"z must have shape ({n_features},) or ({n_rows}, {n_features}), got {z.shape}."
        )
    if not np.all((z >= 0.0) & (z <= 1.0)):  # also False for NaN
        raise ValueError("z must lie in [0, 1] (every entry a probability).")
    return np.ascontiguousarray(z)


def _check_ranker_params(n_iter, step_size, optimizer):
    if (not isinstance(n_iter, numbers.Integral) or isinstance(n_iter, bool)
            or n_iter < 1):
        raise ValueError(f"n_iter must be an integer >= 1, got {n_iter!r}.")
    if (not isinstance(step_size, numbers.Real) or isinstance(step_size, bool)
            or not np.isfinite(step_size) or step_size <= 0):
        raise ValueError(f"step_size must be a positive finite number, got {step_size!r}.")
    if not isinstance(optimizer, str) or optimizer not in _OPTIMIZERS:
        raise ValueError(f"optimizer must be 'adam' or 'gd', got {optimizer!r}.")
    return int(n_iter), float(step_size), optimizer == "adam"


def scores_of(call, *, n_iter, step_size, adam, class_index=None):
    """TreeGrad-Ranker scores of a prepared call's rows (checked parameters)."""
    rows, fixed = split_row_argument("class_index", class_index, call.n_rows)
    ensemble = call.ensemble
    return map_rows(call, _tg.ranker_block, trailing_shape=(ensemble.n_features,),
                    desc="TreeGrad-Ranker", row_arguments=rows,
                    seconds_per_row=semivalue_seconds(ensemble, 2 * n_iter),
                    structure=_tg.pattern_structure(ensemble), n_iter=n_iter,
                    step_size=step_size, adam=adam, **fixed)


# --------------------------------------------------------------------------
# Functions


def multilinear_gradient(model, X, z, *, class_index=None, n_jobs=None, verbose="auto"):
    """Gradient and value of the multilinear extension of each row's game.

    For row ``x`` with path-dependent game ``v_x`` (page "Local attributions"),
    ``F_x(z) = sum_S prod_{j in S} z_j prod_{j not in S} (1 - z_j) v_x(S)``,
    the expected value of ``v_x(S)`` when every feature joins ``S``
    independently with probability ``z_j``. Computed exactly by TreeGrad
    (treegrad-ranker Algorithm 9) in one pass down and up each tree, also at
    points with coordinates 0 or 1 (at a vertex ``z = 1_S``, ``F_x(z)`` is
    ``v_x(S)``).

    Parameters
    ----------
    model : fitted tree model
        scikit-learn tree, forest or gradient boosting model, XGBoost,
        LightGBM or CatBoost model.
    X : array-like, DataFrame or sparse matrix of shape (n_rows, n_features)
        Rows to explain.
    z : array-like of shape (n_features,) or (n_rows, n_features)
        The point (the same for every row, or one per row), in ``[0, 1]``.
    class_index : int, array-like of int of shape (n_rows,), or None, default=None
        The output whose game is explained: see the module docstring. For
        classifiers a class index; None is the predicted class of each row.
        For a binary boosted classifier 1 is its margin and 0 the negated
        margin (log-odds of class 0).
    n_jobs : int, default=None
        Threads; None uses all cores.
    verbose : "auto" or int, default="auto"
        Progress, as in :func:`~sklearn_r2shap.shap_values`.

    Returns
    -------
    gradient : ndarray of shape (n_rows, n_features)
        ``grad F_x(z)``. At ``z = q 1`` this is the weighted Banzhaf value.
    value : ndarray of shape (n_rows,)
        ``F_x(z)``, the model's base value included.

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn.tree import DecisionTreeRegressor
    >>> from sklearn_r2shap.ranking import multilinear_gradient
    >>> X, y = load_diabetes(return_X_y=True)
    >>> tree = DecisionTreeRegressor(max_depth=4, random_state=0).fit(X, y)
    >>> grad, value = multilinear_gradient(tree, X[:3], np.ones(10))
    >>> bool(np.allclose(value, tree.predict(X[:3])))   # F(1) = v(N) = f(x)
    True
    >>> grad.shape
    (3, 10)
    """
    call = prepare(model, X, n_jobs=n_jobs, verbose=verbose,
                   in_memory="multilinear_gradient needs X in memory (its points z are per row).")
    rows, fixed = split_row_argument("class_index", class_index, call.n_rows)
    rows["z"] = _check_points(z, (call.n_rows, call.n_features))
    return map_rows(call, _tg.gradient_block, trailing_shape=(call.n_features,),
                    desc="Multilinear gradient", row_arguments=rows,
                    seconds_per_row=semivalue_seconds(call.ensemble, 1), **fixed)


def treegrad_scores(model, X, *, n_iter=100, step_size=5.0, optimizer="adam", class_index=None,
                    n_jobs=None, verbose="auto"):
    """TreeGrad-Ranker scores of every row (Algorithms 2 and 10).

    Starting from ``z = 1/2``, each of the ``n_iter`` steps takes the
    gradient ``g = (grad F_x(z) + grad F_x(1 - z)) / 2`` of the joint
    objective ``(F_x(z) - F_x(1 - z)) / 2`` (keep the features of ``z``,
    drop the others), adds it to the running mean ``zeta`` and moves ``z``
    up the gradient, by plain projected gradient ascent
    (``z += step_size * g``) or Adam (beta1 = 0.9, beta2 = 0.999, eps = 1e-8,
    ``z += step_size * m_hat / sqrt(v_hat + eps)``), then clips ``z`` to
    ``[0, 1]``. The scores are ``zeta``; sorting them in decreasing order
    ranks the features. With ``n_iter=1`` they are the Banzhaf values.

    The scores satisfy the dummy axiom (a feature whose marginal contribution
    is the same constant for every coalition gets that constant; a feature
    no tree splits on gets 0), equal treatment (two interchangeable features
    get equal scores) and monotonicity, but not linearity (Theorem 1 of the
    paper).

    Parameters
    ----------
    model : fitted tree model
    X : array-like, DataFrame or sparse matrix of shape (n_rows, n_features)
    n_iter : int, default=100
        Number of steps T.
    step_size : float, default=5.0
        Learning rate epsilon (the paper's choice, with T = 100).
    optimizer : {"adam", "gd"}, default="adam"
        Adam (Algorithm 10) or projected gradient ascent (Algorithm 2).
    class_index : int, array-like of int of shape (n_rows,), or None, default=None
        The output (class) explained; see :func:`multilinear_gradient`.
    n_jobs : int, default=None
        Threads; None uses all cores. The scores do not depend on it (bit
        for bit).
    verbose : "auto" or int, default="auto"
        Progress, as in :func:`~sklearn_r2shap.shap_values`.

    Returns
    -------
    ndarray of shape (n_rows, n_features)
        The scores zeta, in the units of the explained output.

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn.tree import DecisionTreeRegressor
    >>> from sklearn_r2shap import banzhaf_values
    >>> from sklearn_r2shap.ranking import treegrad_scores
    >>> X, y = load_diabetes(return_X_y=True)
    >>> tree = DecisionTreeRegressor(max_depth=4, random_state=0).fit(X, y)
    >>> zeta = treegrad_scores(tree, X[:5])
    >>> zeta.shape
    (5, 10)
    >>> one_step = treegrad_scores(tree, X[:5], n_iter=1)
    >>> bool(np.allclose(one_step, banzhaf_values(tree, X[:5])[:, :-1]))
    True
    """
    n_iter, step_size, adam = _check_ranker_params(n_iter, step_size, optimizer)
    call = prepare(model, X, n_jobs=n_jobs, verbose=verbose)
    return scores_of(call, n_iter=n_iter, step_size=step_size, adam=adam,
                     class_index=class_index)


# --------------------------------------------------------------------------
# Estimator

_VALUE_KINDS = ("shapley", "banzhaf", "weighted_banzhaf", "beta")


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
    output : {None, "raw", "probability"}, default=None
        The space of the explained output. The game is always defined on the
        model's leaf values: class probabilities for scikit-learn decision
        tree, random forest and extra trees classifiers, margins (log-odds)
        for boosted classifiers, predictions for regressors. None and "raw"
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
    verbose : int, default=0
        Show progress over chunks of rows.

    Attributes
    ----------
    estimator_ : estimator
        The fitted tree model.
    scores_ : ndarray of shape (n_samples, n_features)
        The TreeGrad-Ranker scores of the rows given to ``fit``.
    feature_importances_ : ndarray of shape (n_features,)
        Mean over rows (weighted by ``sample_weight`` if given) of the
        absolute scores: how strongly a feature moves the explained output,
        in either direction.
    mean_scores_ : ndarray of shape (n_features,)
        The signed (weighted) mean of the scores.
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
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn.tree import DecisionTreeRegressor
    >>> from sklearn_r2shap.ranking import TreeGradRanker
    >>> X, y = load_diabetes(return_X_y=True, as_frame=True)
    >>> ranker = TreeGradRanker(DecisionTreeRegressor(max_depth=5, random_state=0),
    ...                         max_features=3, threshold=-np.inf).fit(X, y)
    >>> ranker.scores_.shape
    (442, 10)
    >>> len(ranker.get_feature_names_out())
    3
    >>> order = ranker.rank(X.iloc[:2])   # feature indices, best first
    >>> order.shape
    (2, 10)
    """

    def __init__(self, estimator=None, *, prefit=False, n_iter=100, step_size=5.0,
                 optimizer="adam", output=None, class_index=None, threshold=None,
                 max_features=None, n_jobs=None, verbose=0):
        self.estimator = estimator
        self.prefit = prefit
        self.n_iter = n_iter
        self.step_size = step_size
        self.optimizer = optimizer
        self.output = output
        self.class_index = class_index
        self.threshold = threshold
        self.max_features = max_features
        self.n_jobs = n_jobs
        self.verbose = verbose

    def _default_estimator(self, y=None):
        from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

        if is_classification_target(y):
            return DecisionTreeClassifier(max_depth=6, random_state=0)
        return DecisionTreeRegressor(max_depth=6, random_state=0)

    def _check_params(self):
        super()._check_params()
        _check_ranker_params(self.n_iter, self.step_size, self.optimizer)
        if not (self.output is None or (isinstance(self.output, str)
                                        and self.output in ("raw", "probability"))):
            raise ValueError(f"output must be None, 'raw' or 'probability', got {self.output!r}.")
        if self.class_index is not None and (
                not isinstance(self.class_index, numbers.Integral)
                or isinstance(self.class_index, bool) or self.class_index < 0):
            raise ValueError(
                f"class_index must be None or a non-negative integer, got {self.class_index!r}."
            )

    def _needs_y(self):
        frozen = self.estimator is not None and _unfrozen(self.estimator)[1]
        return not (self.prefit or frozen)

    def fit(self, X, y=None, sample_weight=None, **fit_params):
        """Fit the model (unless prefit) and score every row of X.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        y : array-like of shape (n_samples,), default=None
            Needed unless the model is prefit or frozen.
        sample_weight : array-like of shape (n_samples,), optional
            Passed to the model's ``fit`` (to its final step, as
            ``<step>__sample_weight``, for a Pipeline) and used as row
            weights in ``feature_importances_`` and ``mean_scores_``.
        **fit_params : dict
            Passed to the model's ``fit``.

        Returns
        -------
        self : TreeGradRanker
        """
        from sklearn.utils import check_array

        self._check_params()
        if y is None and self._needs_y():
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None."
            )
        n_rows_features(X)
        check_array(X, ensure_all_finite="allow-nan", dtype=None, accept_sparse=("csr", "csc"))
        self._record_input(X)
        if sample_weight is not None:
            sample_weight = _check_sample_weight(sample_weight, X)
            if np.any(sample_weight < 0):
                raise ValueError("sample_weight must be non-negative (it weighs the rows "
                                 "in feature_importances_).")
            if not np.sum(sample_weight) > 0:
                raise ValueError("sample_weight must have a positive sum.")
        self.estimator_ = self._fit_estimator(X, y, sample_weight, **fit_params)
        model, X_explained, _ = self._explained_model(self.estimator_, X)
        ensemble = explainable_ensemble(model)
        _check_output_kind(ensemble, self.output)
        self._ensemble = ensemble
        self.scores_ = self._scores(X_explained)
        self.feature_importances_ = np.average(np.abs(self.scores_), axis=0, weights=sample_weight)
        self.mean_scores_ = np.average(self.scores_, axis=0, weights=sample_weight)
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
        n_iter, step_size, adam = _check_ranker_params(self.n_iter, self.step_size,
                                                       self.optimizer)
        return scores_of(self._call(X), n_iter=n_iter, step_size=step_size, adam=adam,
                         class_index=self.class_index)

    def scores(self, X):
        """TreeGrad-Ranker scores of the rows of X, shape (n_samples, n_features).

        Higher scores rank first; the explained output is chosen by
        ``output`` and ``class_index`` as in ``fit``.
        """
        self._check_input(X)
        return self._scores(self._explained_rows(X))

    def rank(self, X):
        """Feature indices of every row of X, best first.

        Sorted by decreasing score; ties are broken by the lower feature
        index. Shape (n_samples, n_features), integer dtype.
        """
        return np.argsort(-self.scores(X), axis=1, kind="stable")

    def values(self, X, kind="shapley", *, q=0.5, alpha=1, beta=1):
        """Semivalues of the same games (same output and class selection).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        kind : {"shapley", "banzhaf", "weighted_banzhaf", "beta"}, default="shapley"
            Shapley values, Banzhaf values, weighted Banzhaf values with
            parameter ``q`` or Beta Shapley values with parameters
            ``(alpha, beta)`` (:func:`~sklearn_r2shap.shap_values`,
            :func:`~sklearn_r2shap.banzhaf_values`,
            :func:`~sklearn_r2shap.beta_shapley_values`).
        q : float in (0, 1), default=0.5
            Only for ``kind="weighted_banzhaf"``.
        alpha, beta : int >= 1, default=1
            Only for ``kind="beta"``.

        Returns
        -------
        ndarray of shape (n_samples, n_features)
            The values, without the expected-value column of the functions
            of the local attributions, comparable with :meth:`scores`.
        """
        if not isinstance(kind, str) or kind not in _VALUE_KINDS:
            raise ValueError(f"kind must be one of {_VALUE_KINDS}, got {kind!r}.")
        self._check_input(X)
        call = self._call(self._explained_rows(X))
        ensemble = call.ensemble
        outputs = map_rows(call, _tg.outputs_block, trailing_shape=(2,), desc="Outputs",
                           seconds_per_row=semivalue_seconds(ensemble, 1),
                           class_index=self.class_index)
        if kind == "shapley":
            game = check_game("beta")
        elif kind == "banzhaf":
            game = check_game("banzhaf")
        elif kind == "weighted_banzhaf":
            game = check_game("banzhaf", q=q)
        else:
            game = check_game("beta", alpha=alpha, beta=beta)
        phi = semivalues_of(call, *game)
        if phi.ndim == 3:
            phi = phi[np.arange(len(phi)), outputs[:, 0].astype(np.int64)]
        return _signed(phi[:, :-1], outputs[:, 1][:, None])

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = self._estimator_accepts_sparse()
        tags.target_tags.required = self._needs_y()
        return tags
