"""The feature selector :class:`ShapleyR2Importance`: each feature's share of R^2 (or D^2).

It calls the public functions :func:`~sklearn_r2shap.r2_decomposition`
(Q-SHAP, exact Shapley values of R^2 / D^2 for tree models) and
:func:`~sklearn_r2shap.shapflex_decomposition` (shapFlex shares for other
regressors) and owns the estimator's concerns only: parameters, fitting,
cross-fitting, thresholds and attributes.

Layer: estimators. Imports the public functions and the layers below;
never imported by them.
"""
import time
from numbers import Integral, Real

import numpy as np
from sklearn.base import _fit_context, is_classifier
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
from sklearn.model_selection import check_cv
from sklearn.utils import _safe_indexing
from sklearn.utils._param_validation import Interval, RealNotInt, StrOptions
from sklearn.utils.metadata_routing import UNUSED, MethodMapping
from sklearn.utils.validation import _num_samples, check_is_fitted

from .. import _groups, _pipeline
from .._errors import UnsupportedModelError
from .._execution.run import engine_of
from .._execution.cost import DEFAULT_EXACT_BUDGET
from .._scores import loss_of
from ..decomposition import r2_decomposition
from ..shapflex import shapflex_decomposition
from . import _held_out, _stats
from ._selector import BaseTreeSelector, _unfrozen, is_classification_target

__all__ = ["ShapleyR2Importance"]


class ShapleyR2Importance(BaseTreeSelector):
    """Feature selection by each feature's share of the model's R^2 (or D^2).

    Fits a model (or takes a fitted one) and splits its R^2 on the data
    into per-feature parts R2_j. For tree models the split is exact Shapley
    values of R^2 (Q-SHAP, :func:`r2_decomposition`), which add up, with the
    unattributed part, to the model's R^2; for tree classifiers and boosted
    models with a link it splits D^2 (Brier score for scikit-learn tree and
    forest classifiers, log-loss for boosted classifiers, Tweedie deviance
    for Poisson / Gamma / Tweedie models). For other regressors it is the
    shapFlex shares computed from SHAP values
    (:func:`~sklearn_r2shap.shapflex_decomposition`), which add up to Gelman's
    R^2 and are *not* a Shapley decomposition of R^2. Acts as a
    :class:`~sklearn.feature_selection.SelectFromModel`-style selector on the
    signed R2_j: a feature with a negative share hurts the fit and is never
    "important" by default.

    Parameters
    ----------
    estimator : regressor or classifier, default=None
        A tree model of scikit-learn, XGBoost, LightGBM or CatBoost fitted
        with the squared error, the log-loss, Poisson, Gamma or Tweedie, a
        scikit-learn tree or forest classifier (Q-SHAP), or any regressor
        (shapFlex). None uses ``HistGradientBoostingClassifier(random_state=0)``
        for a classification target (``type_of_target`` "binary" or
        "multiclass", labels that are not floats: D^2 of the log-loss) and
        ``HistGradientBoostingRegressor(random_state=0)`` otherwise. A
        :class:`~sklearn.frozen.FrozenEstimator` is used as fitted.
    method : {"auto", "qshap", "shapflex"}, default="auto"
        "qshap": exact Shapley values of R^2 or D^2 (tree models with
        constant leaves). "shapflex": the shapFlex shares from SHAP values
        (regressors only). "auto": "qshap" where it applies, "shapflex"
        otherwise for regressors; a classifier "qshap" cannot read raises
        an error naming what was tried.
    shap_values : callable, default=None
        shapFlex only: ``shap_values(estimator, X)`` returning the SHAP
        values as an (n_samples, n_features) or (n_samples, n_features + 1)
        array (last column the expected value), e.g. from the ``shap``
        package. Without it, shapFlex uses this package's exact SHAP values
        for tree models (including linear leaves) and ``coef_ * (x - mean(x))``
        for scikit-learn linear regressors (also at the end of a Pipeline
        whose steps transform each feature separately); any other model
        raises an error that asks for it.
    prefit : bool, default=False
        Use ``estimator`` as already fitted: ``fit`` only decomposes R^2 on
        the (X, y) it is given, e.g. held-out data.
    threshold : str or float, default=None
        The share cutoff: features with ``share >= threshold`` are selected.
        A number, "mean", "median" or e.g. "1.5*mean". None: "mean" when
        ``test`` is None; no cutoff (``threshold_ = -inf``) when a ``test``
        selects (a given ``threshold`` then applies too: a feature must pass
        both).
    test : {"fpr", "fwe", "fdr"} or None, default=None
        A test of H0: share_j <= 0 on held-out shares at level ``alpha``
        (the names of scikit-learn's SelectFpr, SelectFwe, SelectFdr): "fpr"
        (no correction), "fwe" (Holm) or "fdr" (Benjamini-Hochberg); the
        features whose H0 is rejected are selected. The shares tested are
        cross-fitted with ``cv``, which must then be given (e.g. ``cv=5``),
        or, for a model given fitted (``prefit=True`` or a
        :class:`~sklearn.frozen.FrozenEstimator`) and ``cv=None``,
        those on the data given to ``fit`` (rows it was not fitted on). H0
        is that the feature adds nothing on unseen rows given the model as
        trained; a feature correlated with a useful one can reject it
        without being needed given the others (merge such features, or use
        :class:`ShapleyR2RFECV`). Documentation page "Feature selection".
    alpha : float in (0, 1], default=0.05
        The level of the ``test``.
    max_features : int or callable, default=None
        At most this many features (the largest shares), also subject to the
        threshold (use ``threshold=-np.inf`` to select on this only).
    cv : int, cross-validation generator or iterable, default=None
        None: no cross-fitting, the shares of the model on the data given to
        ``fit`` (whatever ``test`` is). Otherwise cross-fitted shares: a clone
        is fitted on each training fold
        and its score decomposed on its held-out fold (stratified folds for
        classifiers, as ``check_cv`` gives them); Q-SHAP: the held-out rows
        of all folds are pooled, each row's term scaled so that its fold's
        share is the mean over the fold's rows (``decomposition_``);
        shapFlex: the fold values are averaged. ``cv_shares_`` keeps
        the fold values, and the estimator is then refitted on all the
        data for ``transform``. A group splitter (e.g.
        :class:`~sklearn.model_selection.GroupKFold`) takes ``fit``'s
        ``groups``.
    n_jobs : int, default=None
        Threads of the decomposition kernel (None: all cores).
    verbose : "auto" or int, default="auto"
        As everywhere in the package: "auto" shows a progress bar when the
        cost estimate says the work is long, 0 nothing, 1 a progress bar
        always, 2 also one line per step (each fold of ``cv``; the progress is that of
        :func:`r2_decomposition`).
    algorithm : {"auto", "exact", "sampled"}, default="auto"
        Q-SHAP only: exact values, or the unbiased sampled estimate for
        models too large for exact values; "auto" chooses by the estimated
        cost (see :func:`r2_decomposition`).
    exact_budget : float, default=120.0
        Seconds the exact algorithm may be expected to take under
        ``algorithm="auto"``.
    n_permutations : int, default=2
        Sampled algorithm: antithetic pairs of feature orders per row and tree.
    max_samples : int or float, default=None
        Q-SHAP only: decompose a random subset of the rows (a number of
        rows, or a fraction); the shares estimate those of all rows.
    random_state : int, RandomState instance or None, default=None
        Seeds the row subset and the sampled algorithm.
    feature_groups : mapping or "input", default=None
        Feature groups as players (Q-SHAP only, see :func:`r2_decomposition`):
        ``feature_importances_`` holds one exact Shapley share per group (the
        groups, then the columns in no group), and ``transform`` keeps or
        drops whole groups. ``"input"`` for a Pipeline: one share per input
        column (its one-hot columns together), so that input columns are
        selected. (The cross-validation groups of the rows are ``fit``'s
        ``groups``.)

    Attributes
    ----------
    estimator_ : estimator
        The fitted model.
    method_ : {"qshap", "shapflex"}
        The method used.
    algorithm_ : {"exact", "sampled"}
        The algorithm that ran ("sampled" if any fold was sampled; "exact"
        for shapFlex, which does not sample).
    feature_importances_ : ndarray of shape (`n_features_in_`,)
        The features' shares of the score on the data given to ``fit``
        (cross-fitted with ``cv``: the mean of the pooled held-out terms, i.e.
        the folds' shares weighted by their numbers of rows; shapFlex: the
        mean of the folds' shares); scikit-learn's name, read by
        ``SelectFromModel`` and the threshold.
    std_errors_ : ndarray of shape (`n_features_in_`,)
        Standard errors of the shares (rows treated as i.i.d.; with ``cv``,
        the pooled terms' sd / sqrt(n)); shapFlex with ``cv``: the standard
        deviation of the fold values over sqrt(n_folds). NaN for shapFlex
        without ``cv`` (its shares are not sums over rows).
    pvalues_ : ndarray of shape (`n_features_in_`,)
        The tests' one-sided p-values 1 - Phi(z_j), not adjusted (only with
        a ``test``); 1 for a feature no model splits on.
    scores_ : ndarray of shape (`n_features_in_`,)
        The tests' statistics z_j = share_j / se_j (only with a ``test``).
    score_ : float
        The model's score on the data, R^2 or the D^2 ``score_name_`` names
        (with ``cv``: of the pooled held-out rows; shapFlex: the mean over
        folds); Gelman's R^2 for shapFlex.
    score_name_ : {"r2", "d2_brier", "d2_log_loss", "d2_tweedie"}
        Which score ``score_`` is and ``feature_importances_`` split.
    unattributed_ : float
        ``score_ - feature_importances_.sum()``.
    sigma_unique_ : float or None
        shapFlex: sum_j [var(e + phi_j) - var(e)] / (var(y) - var(e)), the
        residual variance added by removing each feature's SHAP term,
        summed over features, relative to the explained variance (mean over
        folds with ``cv``; NaN where the model predicts no better than the
        mean of y). A ratio, not a share: it exceeds 1 when correlated
        terms of opposite sign cancel (see :class:`R2Decomposition`). None
        for Q-SHAP.
    decomposition_ : R2Decomposition or None
        The full result; with ``cv``, of the pooled held-out rows (per-row
        terms in ``local`` unless ``max_samples``); None for shapFlex with
        ``cv``.
    cv_shares_ : ndarray of shape (n_folds, `n_features_in_`)
        Per-fold shares (only with ``cv``).
    threshold_ : float
        The share cutoff applied to R2_j (-inf when ``test`` selects alone).
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Defined when X has feature names that are all strings.
    explained_feature_names_ : ndarray of str
        What ``feature_importances_`` refer to: the input columns, the groups,
        or for a Pipeline the columns its steps give its last step (then
        ``transform`` selects input columns only when those are the input
        columns one to one, or with ``feature_groups="input"``).

    See Also
    --------
    r2_decomposition : Q-SHAP, the functional form.
    shapflex_decomposition : shapFlex, the functional form.
    ShapleyR2RFECV : how many features, by elimination and cross-validation.

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn.ensemble import GradientBoostingRegressor
    >>> from sklearn.linear_model import LinearRegression
    >>> from sklearn_r2shap import ShapleyR2Importance
    >>> X, y = load_diabetes(return_X_y=True, as_frame=True)
    >>> selector = ShapleyR2Importance(
    ...     GradientBoostingRegressor(max_depth=2, random_state=0), max_features=3,
    ...     threshold=-np.inf).fit(X, y)
    >>> selector.method_, selector.get_feature_names_out().tolist()
    ('qshap', ['bmi', 'bp', 's5'])
    >>> bool(np.isclose(selector.feature_importances_.sum() + selector.unattributed_,
    ...                 selector.score_))
    True
    >>> linear = ShapleyR2Importance(LinearRegression(), max_features=3).fit(X, y)
    >>> linear.method_, linear.get_feature_names_out().tolist()
    ('shapflex', ['bmi', 's1', 's5'])

    A test of each feature's held-out share (5 folds, Benjamini-Hochberg at 0.05):

    >>> tested = ShapleyR2Importance(GradientBoostingRegressor(max_depth=2, random_state=0),
    ...                              test="fdr", cv=5).fit(X, y)
    >>> tested.get_feature_names_out().tolist()
    ['bmi', 'bp', 's5']
    >>> tested.decomposition_.local.shape  # the pooled held-out rows
    (442, 10)
    """

    _parameter_constraints: dict = {
        **BaseTreeSelector._parameter_constraints,
        "method": [StrOptions({"auto", "qshap", "shapflex"})],
        "shap_values": [None, callable],
        "test": [None, StrOptions(set(_stats.TESTS))],
        "alpha": [Interval(Real, 0, 1, closed="right")],
        "cv": ["cv_object"],
        "algorithm": [StrOptions({"auto", "exact", "sampled"})],
        "exact_budget": [Interval(Real, 0, None, closed="left")],
        "n_permutations": [Interval(Integral, 1, None, closed="left")],
        "max_samples": [None, Interval(Integral, 2, None, closed="left"),
                        Interval(RealNotInt, 0, 1, closed="right")],
        "random_state": ["random_state"],
        # checked with the feature groups of the functions (``_groups``)
        "feature_groups": "no_validation",
    }
    # groups go to cv's split (by its request), never to the selector itself
    __metadata_request__fit = {"groups": UNUSED}

    def __init__(self, estimator=None, *, method="auto", shap_values=None, prefit=False,
                 threshold=None, test=None, alpha=0.05, max_features=None, cv=None, n_jobs=None,
                 verbose="auto", algorithm="auto", exact_budget=DEFAULT_EXACT_BUDGET,
                 n_permutations=2, max_samples=None, random_state=None, feature_groups=None):
        self.estimator = estimator
        self.method = method
        self.shap_values = shap_values
        self.prefit = prefit
        self.threshold = threshold
        self.test = test
        self.alpha = alpha
        self.max_features = max_features
        self.cv = cv
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.algorithm = algorithm
        self.exact_budget = exact_budget
        self.n_permutations = n_permutations
        self.max_samples = max_samples
        self.random_state = random_state
        self.feature_groups = feature_groups

    def _default_estimator(self, y=None):
        if is_classification_target(y):
            return HistGradientBoostingClassifier(random_state=0)
        return HistGradientBoostingRegressor(random_state=0)

    @_fit_context(prefer_skip_nested_validation=False)  # the estimator is not validated
    def fit(self, X, y, sample_weight=None, *, groups=None, **fit_params):
        """Fit the model (unless prefit) and decompose its R^2 on (X, y).

        Parameters
        ----------
        X : array-like, DataFrame, dask Array or dask DataFrame of shape (n_samples, n_features)
            A dask collection needs a model fitted beforehand (``prefit=True``
            or a FrozenEstimator) and ``cv=None``: its R^2 is then
            decomposed on the workers (:func:`r2_decomposition`).
        y : array-like of shape (n_samples,)
            With a dask X, a dask Array or Series of the same row blocks, or
            an in-memory array.
        sample_weight : array-like of shape (n_samples,), optional
            Used in the decomposition and passed to the model's ``fit`` (to
            its final step, as ``<step>__sample_weight``, for a Pipeline); with
            metadata routing enabled, to the model only if it requested it
            (``model.set_fit_request(sample_weight=True)``), and to this
            selector if a meta-estimator routes it here
            (``set_fit_request(sample_weight=True)``). A HistGradientBoosting
            model fitted here with them (not prefit) is explained with node
            covers weighted by them, as its own node counts ignore the weights.
        groups : array-like of shape (n_samples,), default=None
            Group labels of the rows for the cross-fitting splits, as in
            scikit-learn's cross-validation: given to ``cv.split`` (e.g.
            :class:`~sklearn.model_selection.GroupKFold`), so that a
            held-out fold shares no group with the rows its model was fitted
            on. A splitter that takes no groups ignores them (scikit-learn
            warns), as does an int ``cv`` ((Stratified)KFold: pass a group
            splitter). Accepted and ignored when nothing is cross-fitted
            (with metadata routing enabled, routed to ``cv``'s ``split`` by its
            request, which a group splitter makes by default); never passed to
            the model's ``fit``. Not the feature groups (``feature_groups``).
        **fit_params : dict
            Passed to the model's ``fit`` (on each fold's training rows, indexed
            like them when they have one value per row). With metadata routing
            enabled, routed by request: to the model's ``fit`` what it requested
            (``model.set_fit_request(...)``); an unrequested one raises
            scikit-learn's error.

        Returns
        -------
        self : ShapleyR2Importance
        """
        X, y, sample_weight = self._check_fit_data(X, y, sample_weight, fit_params)
        if groups is not None and self.cv is not None:
            groups = np.asarray(groups)
            if _num_samples(groups) != _num_samples(y):
                raise ValueError(f"groups has {_num_samples(groups)} labels for "
                                 f"{_num_samples(y)} rows.")
        model_params, model_weight, routed = self._route_fit(sample_weight, fit_params, groups)
        return self._converting_once(lambda: self._fit(
            X, y, sample_weight, routed.split, model_params, model_weight))

    def _check_fit_data(self, X, y, sample_weight, fit_params):
        """X, y and sample_weight checked once (``_check_fit_input``; a dask X: only
        its names and width), and what the parameters need of them."""
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None."
            )
        engine = engine_of(X)
        if engine == "spark":
            raise TypeError(
                f"{type(self).__name__}.fit takes rows in memory or a dask collection, not a "
                "Spark DataFrame: call r2_decomposition(model, df, 'label') on it for the "
                "shares, or fit on a sample collected to the driver (df.sample(...).toPandas()).")
        if engine == "dask":
            self._check_dask_fit(fit_params)
            # a dask DataFrame's names and width: those of its empty pandas stand-in
            self._record_input(X._meta if hasattr(X, "_meta") and hasattr(X, "columns") else X)
        else:
            X, y, sample_weight = self._check_fit_input(X, y, sample_weight,
                                                        ensure_min_samples=2)
        if isinstance(self.threshold, str) and self.threshold in _stats.TESTS:
            raise ValueError(
                f"threshold={self.threshold!r}: threshold is the cutoff on the shares (a "
                f"number, 'mean', 'median' or e.g. '1.5*mean'); the test of the held-out "
                f"shares is test={self.threshold!r} (with cv, e.g. cv=5).")
        if self.test is not None:
            if self.max_samples is not None:
                raise ValueError(f"test={self.test!r} tests every row's term: it cannot be "
                                 "combined with max_samples; use max_samples=None.")
            if engine == "dask":
                raise ValueError(f"test={self.test!r} needs every row's term, which the dask "
                                 "decomposition does not keep; decompose in memory (e.g. "
                                 "X.compute() of a sample) or use test=None.")
            if self.cv is None and not self._given_fitted():
                raise ValueError(
                    f"test={self.test!r} tests held-out shares: pass cv (e.g. cv=5, or a group "
                    "splitter such as GroupKFold(5) with fit's groups) to cross-fit them, or a "
                    "model fitted on other rows (prefit=True or a FrozenEstimator) to test "
                    "its shares on the rows given to fit. cv=None never cross-fits.")
        return X, y, sample_weight

    def _fit(self, X, y, sample_weight, split_params, model_params, model_weight):
        """``fit`` on checked data: ``split_params`` for ``cv.split``, the model's fit
        parameters and weights (``_route_fit``). ShapleyR2RFECV's steps call it on
        the data it checked."""
        tests = self.test is not None
        if self.cv is None:
            self.estimator_ = self._fit_estimator(X, y, model_params, model_weight)
            result = self._decompose(self.estimator_, X, y, sample_weight, return_local=tests)
            self.decomposition_ = result
            self.feature_importances_ = result.shares
            self.std_errors_ = result.std_errors
            self.score_ = float(result.score)
            self.score_name_ = result.score_name
            self.method_ = result.method
            self.algorithm_ = result.algorithm
            self.sigma_unique_ = result.sigma_unique if self.method_ == "shapflex" else None
            if tests:
                self._test_terms = _held_out.pooled_terms(
                    [result], [np.arange(len(result.local))], len(result.local), sample_weight)[0]
        else:
            self._fit_cross_validated(X, y, sample_weight, split_params, model_params,
                                      model_weight)
        self.unattributed_ = self.score_ - float(np.sum(self.feature_importances_))
        terms = self.__dict__.pop("_test_terms", None)  # the pooled L_ij, not kept
        for name in ("scores_", "pvalues_"):  # of an earlier fit with a test
            self.__dict__.pop(name, None)
        if tests:
            if self.method_ != "qshap":
                raise ValueError(f"test={self.test!r} needs method='qshap': shapFlex shares "
                                 "are not sums of per-row terms.")
            self.scores_, self.pvalues_ = _stats.share_tests(terms)
        self._set_threshold(X)
        return self

    def _given_fitted(self):
        estimator = self.estimator if self.estimator is not None else self._default_estimator()
        return bool(self.prefit) or _unfrozen(estimator)[1]

    def _add_routes(self, router):
        if self.cv is not None:
            router.add(splitter=check_cv(self.cv),
                       method_mapping=MethodMapping().add(caller="fit", callee="split"))

    def _set_threshold(self, X):
        if self.test is not None and self.threshold is None:
            # the test alone selects: no cutoff on the shares
            self._record_explained_features()
            self.max_features_ = self._validate_max_features(X)
            self.threshold_ = -np.inf
        else:
            super()._set_threshold(X)

    def _threshold_mask(self):
        mask = super()._threshold_mask()
        if self.test is not None:
            mask &= _stats.rejected(self.pvalues_, self.test, self.alpha)
        return mask

    def _check_dask_fit(self, fit_params):
        """On dask data, ``fit`` only decomposes the R^2 of a model fitted beforehand."""
        estimator = self.estimator if self.estimator is not None else self._default_estimator()
        if not (self.prefit or _unfrozen(estimator)[1]):
            raise ValueError(
                f"{type(self).__name__} does not fit models on dask collections: fit the "
                "model first (e.g. with xgboost.dask or lightgbm.dask, or in memory on a "
                "sample), then pass it with prefit=True (or as a FrozenEstimator) to "
                "decompose its R^2 on the dask data.")
        if self.cv is not None:
            raise ValueError("cv refits the estimator on each fold, which is not supported "
                             "on dask collections; use cv=None with a prefit model.")
        if fit_params:
            raise ValueError(f"fit parameters {sorted(fit_params)} are for fitting the model, "
                             "which a prefit model on dask data does not do.")

    def _fit_cross_validated(self, X, y, sample_weight, split_params, model_params,
                             model_weight):
        if self.prefit:
            raise ValueError("cv refits the estimator on each fold; it cannot be used "
                             "with prefit=True.")

        estimator = self.estimator if self.estimator is not None else self._default_estimator(y)
        # stratified folds for classifiers, as cross_val_score uses
        cv = check_cv(self.cv, y, classifier=is_classifier(_unfrozen(estimator)[0]))
        importances, r2, sigma_unique, methods, algorithms = [], [], [], set(), set()
        scores, results, tests = set(), [], []
        for fold, (train, test) in enumerate(cv.split(X, y, **split_params)):
            since = time.perf_counter()
            weight_test = None if sample_weight is None else _safe_indexing(sample_weight, test)
            model = self._fit_estimator(_safe_indexing(X, train), _safe_indexing(y, train),
                                        *self._rows_of(X, model_params, model_weight, train))
            # per-row terms, to pool the folds' rows (Q-SHAP on every row)
            local = self.max_samples is None and self._resolve_method(model)[0] == "qshap"
            result = self._decompose(model, _safe_indexing(X, test), _safe_indexing(y, test),
                                     weight_test, return_local=local)
            results.append(result)
            tests.append(np.asarray(test))
            importances.append(result.shares)
            r2.append(float(result.score))
            sigma_unique.append(result.sigma_unique if result.method == "shapflex" else None)
            methods.add(result.method)
            scores.add(result.score_name)
            algorithms.add(result.algorithm)
            self._step_line(f"fold {fold + 1}: fitted on {len(train)} rows, decomposed on "
                            f"{len(test)} held-out rows", since)
        self.cv_shares_ = np.asarray(importances)
        self.feature_importances_ = self.cv_shares_.mean(axis=0)
        n_folds = len(importances)
        self.std_errors_ = (self.cv_shares_.std(axis=0, ddof=1) / np.sqrt(n_folds)
                            if n_folds > 1 else np.zeros_like(self.feature_importances_))
        self.score_ = float(np.mean(r2))
        (self.method_,) = methods
        (self.score_name_,) = scores
        self.algorithm_ = "sampled" if "sampled" in algorithms else "exact"
        self.sigma_unique_ = (float(np.mean(sigma_unique)) if self.method_ == "shapflex"
                              else None)
        self.decomposition_ = None
        if self.method_ == "qshap":  # the held-out rows of all folds pooled
            self.decomposition_, self._test_terms = _held_out.pool_folds(
                results, tests, _num_samples(y), sample_weight)
            self.feature_importances_ = self.decomposition_.shares
            self.std_errors_ = self.decomposition_.std_errors
            self.score_ = float(self.decomposition_.score)
        self.estimator_ = self._fit_estimator(X, y, model_params, model_weight)

    def _resolve_method(self, model):
        """(method, TreeEnsemble or None) for a fitted model."""
        if self.method == "shapflex":
            return "shapflex", None

        try:
            ensemble = self._tree_ensemble(model)
            loss_of(ensemble)
        except UnsupportedModelError as error:
            if self.method == "qshap":
                raise
            if is_classifier(model):  # shapFlex decomposes regressors only
                raise UnsupportedModelError(
                    f"{type(model).__name__} is a classifier: method='auto' tried the exact "
                    f"D^2 decomposition, which needs a tree classifier it can read exactly "
                    f"({error}), and shapFlex, which decomposes regressors only. Use a "
                    "scikit-learn tree, forest or (Hist)GradientBoosting classifier, or an "
                    "XGBoost, LightGBM or CatBoost classifier with the log-loss; or "
                    "sklearn.inspection.permutation_importance with "
                    "scoring='neg_log_loss' (sampled, not a decomposition)."
                ) from error
            return "shapflex", None
        if self.shap_values is not None:
            raise ValueError(
                f"shap_values is used by method='shapflex' only, and {ensemble.model_type} is "
                f"decomposed exactly by Q-SHAP with method={self.method!r}; pass "
                "method='shapflex' to use your SHAP values."
            )
        return "qshap", ensemble

    def _decompose(self, model, X, y, sample_weight, return_local=False):
        if self.feature_groups is not None:
            return self._decompose_groups(model, X, y, sample_weight, return_local)
        self._group_columns = None
        names = None
        if _pipeline.ends_in_tree_model(model) or self.method == "qshap":
            # the last step on the transformed rows (other Pipelines: shapFlex on the whole)
            model, X, names = self._explained_model(model, X)
        else:
            self._transformed_features, self._explained_names = False, None
        method, ensemble = self._resolve_method(model)
        if method == "qshap":
            result = r2_decomposition(
                ensemble, X, y, sample_weight=sample_weight, return_local=return_local,
                n_jobs=self.n_jobs, verbose=self.verbose, algorithm=self.algorithm,
                exact_budget=self.exact_budget, n_permutations=self.n_permutations,
                max_samples=None if return_local else self.max_samples,
                random_state=self.random_state)
        elif return_local:
            raise ValueError("local_shares and the tests (test='fpr', 'fwe' or 'fdr') need "
                             "method='qshap': shapFlex shares are not sums of per-row terms.")
        elif engine_of(X) == "dask":
            raise ValueError("shapFlex (method='shapflex', or 'auto' for a model Q-SHAP "
                             "cannot decompose) does not accept dask collections; use a tree "
                             "model with Q-SHAP, or X.compute() of a sample.")
        else:
            result = shapflex_decomposition(model, X, y, shap_values=self.shap_values,
                                            sample_weight=sample_weight, n_jobs=self.n_jobs)
        if names is not None:
            result.feature_names = np.asarray(names, dtype=object)
        elif hasattr(self, "feature_names_in_") and not self._transformed_features:
            result.feature_names = np.asarray(self.feature_names_in_, dtype=object)
        return result

    def _decompose_groups(self, model, X, y, sample_weight, return_local):
        """Q-SHAP shares of the groups (``_groups.py``); records the input columns
        of each group for ``transform``."""
        if self.method == "shapflex":
            raise ValueError("feature_groups= needs method='qshap' or 'auto' (exact Shapley shares "
                             "of the groups); shapFlex shares have no group game.")
        if _pipeline.is_pipeline(model) and not _pipeline.ends_in_tree_model(model):
            _pipeline.final_step(model)  # raises, naming the last step
        grouped, rows, players = _groups.grouped_model(model, X, self.feature_groups,
                                                      ensemble_of=self._tree_ensemble)
        result = _groups.restrict_decomposition(r2_decomposition(
            grouped, rows, y, sample_weight=sample_weight, return_local=return_local,
            n_jobs=self.n_jobs, verbose=self.verbose, algorithm=self.algorithm,
            exact_budget=self.exact_budget, n_permutations=self.n_permutations,
            max_samples=None if return_local else self.max_samples,
            random_state=self.random_state), players)
        self._transformed_features = _pipeline.has_transformers(model)
        self._explained_names = np.asarray(players, dtype=object)
        self._group_columns = _groups.input_columns_of_players(model, X, self.feature_groups,
                                                               players)
        return result

    def decompose(self, X, y, sample_weight=None):
        """Decompose the fitted model's R^2 on other data (e.g. held out).

        ``X`` may be a dask collection (as in :func:`r2_decomposition`).

        Returns
        -------
        R2Decomposition
        """
        check_is_fitted(self, "estimator_")
        return self._decompose(self.estimator_, X, y, sample_weight)

    def local_shares(self, X, y, sample_weight=None):
        """Per-row terms L_ij of shape (n_samples, n_features) (Q-SHAP only).

        Their column sums are the shares of the fitted model on (X, y) (every
        row, whatever ``max_samples``; Monte Carlo estimates when the
        sampled algorithm runs).
        """
        check_is_fitted(self, "estimator_")
        return self._decompose(self.estimator_, X, y, sample_weight, return_local=True).local

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = self._estimator_accepts_sparse()
        tags.target_tags.required = True
        return tags
