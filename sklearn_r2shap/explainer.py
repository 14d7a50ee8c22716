"""A prepared explainer with shap's interface: :class:`TreeExplainer`.

``TreeExplainer(model)`` reads the model once (:func:`~sklearn_r2shap.to_ensemble`)
and marks the ensemble as prepared: every game played on it keeps what
depends on the model alone -- the path structure, the cost curves, the
quadrature rules, the expected value and the pattern tables of the routes it
fixes for many rows (:data:`._games.semivalues.PREPARED_ROWS`) -- so that a
call pays for the rows it explains and a few microseconds more, not for
reading the model. Every public function accepts the explainer in place of
the model (:func:`._pipeline.explained_model`) and gives the same bits.

Layer: public functions. Imports the other public function modules, the
games and ``_pipeline``; never an estimator.
"""
from dataclasses import replace

import numpy as np

from . import _pipeline
from ._games.semivalues import expected_values
from ._model import explainable_ensemble, prepare_ensemble
from ._validation import _is_pandas
from .attributions import predict_raw, saabas_values, semivalues
from .explanation import _interaction_layout, _shap_layout, explain
from .interactions import shap_interaction_values

__all__ = ["TreeExplainer"]

_PERTURBATIONS = ("auto", "tree_path_dependent", "interventional")


class TreeExplainer:
    """Exact SHAP values of a tree model, prepared once, with shap's interface.

    A drop-in for ``shap.TreeExplainer`` for the arguments it supports:
    ``explainer = TreeExplainer(model)`` once, then ``explainer.shap_values(X)``,
    ``explainer.shap_interaction_values(X)`` or ``explainer(X)`` as often as
    needed, with shap's shapes. The model is read once, here; the plans and
    tables of the games are built at the first call that needs them and kept,
    so that later calls -- one row at a time included -- pay only for their
    rows. The values are exact (no ``check_additivity`` is needed): the
    path-dependent game's (TreeSHAP's) or, given ``data``, the interventional
    game's.

    The explainer is a snapshot: it explains the model as it was when the
    explainer was made. If a scikit-learn, XGBoost or LightGBM estimator (or
    a Pipeline) is fitted again afterwards, every call raises a ValueError
    saying so (make a new explainer). A raw ``xgboost.Booster`` or
    ``lightgbm.Booster`` trained further in place, or a CatBoost model fitted
    again, cannot be told apart: make a new explainer after changing one.

    Parameters
    ----------
    model : fitted tree model or Pipeline
        scikit-learn tree, forest or gradient boosting model, XGBoost,
        LightGBM or CatBoost model, or a fitted Pipeline ending in one (its
        steps transform X at every call; the transformers are copied, so the
        explainer keeps explaining the Pipeline as it was).
    data : array-like or DataFrame of shape (n_background, n_features), default=None
        Background rows of the interventional game (shap's ``data``): with
        them the values are those of ``v_x(S) = mean over background rows b
        of f(x_S, b_rest)``, exact, at a cost linear in rows + background
        rows (no sampling of the background is needed). shap's maskers are
        not accepted: pass their data.
    feature_perturbation : {"auto", "tree_path_dependent", "interventional"}, default="auto"
        The game: "auto" is "interventional" when ``data`` is given, else
        "tree_path_dependent" (TreeSHAP's game, weighted by the model's own
        covers).
    model_output : "raw", default="raw"
        The model's raw (margin) output: log-odds for binary boosted
        classifiers, the class margins for multiclass, leaf probabilities for
        scikit-learn tree classifiers. shap's "probability", "log_loss" and
        "predict" are not supported (they are not exact for path-dependent
        values); for shares of a classifier's score use
        :func:`~sklearn_r2shap.r2_decomposition`.
    feature_names : sequence of str, default=None
        Names of the explained columns in :meth:`__call__`'s Explanation
        (default: X's columns, else the model's own names).
    n_jobs : int, default=None
        Threads; None uses all cores. The values do not depend on it (bit
        for bit).
    verbose : "auto" or int, default="auto"
        Progress of long calls, as in :func:`~sklearn_r2shap.shap_values`.
    feature_groups : mapping or "input", default=None
        Feature groups as players (see :func:`~sklearn_r2shap.shap_values`):
        one value per group. Not with interaction values.

    Attributes
    ----------
    model : object
        The model given.
    data : array-like, DataFrame or None
        The background rows, as given.
    ensemble : TreeEnsemble
        The model read once: the prepared object every call uses (any public
        function given it, or the explainer, skips reading the model).
    expected_value : float or ndarray of shape (n_outputs,)
        The values' base: ``v_x(empty)``, the cover-weighted mean of the
        trees (path-dependent), or the mean raw prediction over ``data``
        (interventional); a float for one output, as shap gives it.
    feature_perturbation : str
        The game: "tree_path_dependent" or "interventional".

    Notes
    -----
    A row's values do not depend on the other rows of its call, on earlier
    calls or on ``n_jobs``: the explainer fixes each tree's route (pattern
    tables or per-row quadrature) once, for many rows. The functions choose
    routes for the rows of each call, so their values and the explainer's
    may differ by rounding (about 1e-15 relative: the same exact numbers,
    summed in another order); given the explainer, the functions return the
    explainer's bits. The kept tables take at most 256 MB (8 bytes an
    entry, :data:`._games.semivalues.PREPARED_ROWS`); ``del explainer``
    frees them.

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from sklearn.ensemble import GradientBoostingRegressor
    >>> from sklearn_r2shap import TreeExplainer
    >>> X, y = make_regression(n_samples=300, n_features=6, n_informative=4, noise=1.0,
    ...                        random_state=0)
    >>> model = GradientBoostingRegressor(max_depth=3, random_state=0).fit(X, y)
    >>> explainer = TreeExplainer(model)
    >>> explainer.shap_values(X[:5]).shape
    (5, 6)
    >>> phi = explainer.shap_values(X[0])   # one row, as shap explains it
    >>> phi.shape
    (6,)
    >>> bool(np.isclose(explainer.expected_value + phi.sum(), model.predict(X[:1])[0]))
    True
    >>> explainer.shap_interaction_values(X[:2]).shape
    (2, 6, 6)
    >>> explainer(X[:3]).values.shape
    (3, 6)
    """

    def __init__(self, model, data=None, *, feature_perturbation="auto", model_output="raw",
                 feature_names=None, n_jobs=None, verbose="auto", feature_groups=None):
        if isinstance(model, TreeExplainer):
            raise TypeError("model is already a TreeExplainer; pass the model it explains.")
        if feature_perturbation not in _PERTURBATIONS:
            raise ValueError(f"feature_perturbation must be one of {_PERTURBATIONS}, got "
                             f"{feature_perturbation!r}.")
        if not (isinstance(model_output, str) and model_output == "raw"):
            raise ValueError(
                f"model_output={model_output!r} is not supported: TreeExplainer explains the "
                "model's raw (margin) output exactly (model_output='raw'); shap's "
                "'probability', 'log_loss' and 'predict' outputs are not exact for "
                "path-dependent values. For a classifier's shares of its score (D2 of the "
                "log-loss or Brier score) use sklearn_r2shap.r2_decomposition.")
        if feature_perturbation == "auto":
            feature_perturbation = "tree_path_dependent" if data is None else "interventional"
        if feature_perturbation == "interventional" and data is None:
            raise ValueError("feature_perturbation='interventional' needs background rows: "
                             "pass data= (a few hundred to a few thousand rows is typical).")
        if feature_perturbation == "tree_path_dependent" and data is not None:
            raise ValueError(
                "data= is the background of the interventional game; "
                "feature_perturbation='tree_path_dependent' weighs by the model's own covers "
                "and uses no data: drop data, or pass feature_perturbation='interventional'.")
        self.model = model
        self.feature_perturbation = feature_perturbation
        self.model_output = model_output
        self.feature_names = None if feature_names is None else list(feature_names)
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.feature_groups = feature_groups
        self._fitted = _fitted_objects(model)
        last = _pipeline.final_step(model)  # checks a Pipeline's steps
        # a copy: a TreeEnsemble given as the model keeps its own (unprepared) games
        self.ensemble = prepare_ensemble(replace(explainable_ensemble(last)))
        # what every call explains: the ensemble, or the Pipeline's copied steps and it
        self._explained = (_pipeline.with_last_step(model, self.ensemble)
                           if _pipeline.is_pipeline(model) else self.ensemble)
        self.data = data
        if data is None:
            expected = expected_values(self.ensemble)
        else:  # the mean raw prediction over the background (checked here)
            expected = predict_raw(self._explained, data, n_jobs=n_jobs, verbose=0).mean(axis=0)
        self.expected_value = float(expected[0]) if len(expected) == 1 else expected

    def __setstate__(self, state):
        self.__dict__.update(state)
        prepare_ensemble(self.ensemble)  # a pickled ensemble carries no plans, nor the mark

    def __sklearn_r2shap_model__(self):
        """The model every call explains (the prepared ensemble, or a Pipeline
        ending in it); raises if the model was fitted again since."""
        state = _fitted_state(self.model)
        if any(state(name) is not value for name, value in self._fitted):
            raise ValueError(
                f"The {type(self.model).__name__} was fitted again after this TreeExplainer "
                "was made; the explainer still holds the model as it was. Make a new "
                "TreeExplainer(model) to explain the refitted model.")
        return self._explained

    def _check_call(self, y, tree_limit):
        if y is not None:
            raise ValueError("y is used by shap for model_output='log_loss' only, which is not "
                             "supported; call without y.")
        if tree_limit is not None:
            raise ValueError(
                "tree_limit is not supported: explain a model of fewer trees instead, e.g. "
                "booster[:n] (XGBoost), model.booster_ with num_iteration at fit time "
                "(LightGBM), or the estimator refitted with fewer estimators.")

    def shap_values(self, X, y=None, tree_limit=None, approximate=False,
                    check_additivity=True):
        """Exact SHAP values of the rows of X, in shap's layout.

        Parameters
        ----------
        X : array-like, DataFrame or sparse matrix of shape (n_rows, n_features), or one row of shape (n_features,)
            Rows to explain; a single 1-D row (array or pandas Series) is
            explained as shap does, giving values without the row axis.
        y : None
            Not supported (shap uses it for ``model_output="log_loss"``).
        tree_limit : None
            Not supported: explain a model of fewer trees.
        approximate : bool, default=False
            True: Saabas path contributions instead (shap's
            ``approximate=True``; an approximation of the SHAP values, not
            exact), path-dependent only.
        check_additivity : bool, default=True
            Accepted for shap's signature; the values are exact, so there is
            nothing to check.

        Returns
        -------
        ndarray of shape (n_rows, n_features) or (n_rows, n_features, n_outputs)
            The values (with ``feature_groups``: one column per group); for one 1-D
            row, shape (n_features,) or (n_features, n_outputs). A row sums,
            with :attr:`expected_value`, to the raw prediction.
        """
        self._check_call(y, tree_limit)
        X, one_row = _rows(X)
        model = self.__sklearn_r2shap_model__()
        if approximate:
            if self.data is not None or self.feature_groups is not None:
                raise ValueError("approximate=True gives Saabas contributions of the "
                                 "path-dependent game, per feature: make the explainer "
                                 "without data and feature_groups.")
            phi = saabas_values(model, X, n_jobs=self.n_jobs, verbose=self.verbose)
        else:
            phi = semivalues(model, X, background=self.data, feature_groups=self.feature_groups,
                             n_jobs=self.n_jobs, verbose=self.verbose)
        values, _ = _shap_layout(phi, self.ensemble.n_outputs)
        return values[0] if one_row else values

    def shap_interaction_values(self, X, y=None, tree_limit=None):
        """Exact SHAP interaction values of the rows of X, in shap's layout.

        Parameters
        ----------
        X : array-like, DataFrame or sparse matrix of shape (n_rows, n_features), or one row of shape (n_features,)
        y, tree_limit : None
            Not supported (see :meth:`shap_values`).

        Returns
        -------
        ndarray of shape (n_rows, n_features, n_features) or (n_rows, n_features, n_features, n_outputs)
            As :func:`~sklearn_r2shap.shap_interaction_values` without the
            expected value's row and column: ``[i, j]`` the interaction of
            features i and j (i != j), ``[i, i]`` the main effect; row i sums
            to feature i's SHAP value. For one 1-D row, without the row axis.
        """
        self._check_call(y, tree_limit)
        if self.data is not None or self.feature_groups is not None:
            raise ValueError("Interaction values are those of the path-dependent game, per "
                             "feature: make the explainer without data and feature_groups.")
        X, one_row = _rows(X)
        phi = shap_interaction_values(self.__sklearn_r2shap_model__(), X, n_jobs=self.n_jobs,
                                      verbose=self.verbose)
        values = _interaction_layout(phi, self.ensemble.n_outputs)
        return values[0] if one_row else values

    def __call__(self, X, y=None, interactions=False, check_additivity=True):
        """The SHAP values of X as an :class:`~sklearn_r2shap.Explanation`
        (``.to_shap()`` gives a ``shap.Explanation`` for shap's plots).

        Parameters
        ----------
        X : array-like, DataFrame or sparse matrix of shape (n_rows, n_features), or one row
        y : None
            Not supported.
        interactions : bool, default=False
            Also compute the interaction values (``interaction_values``).
        check_additivity : bool, default=True
            Accepted for shap's signature; the values are exact.

        Returns
        -------
        Explanation
            Values, base values, data and names, as :func:`~sklearn_r2shap.explain`
            gives them (a 1-D row: the Explanation of that row).
        """
        self._check_call(y, None)
        X, one_row = _rows(X)
        result = explain(self.__sklearn_r2shap_model__(), X, background=self.data,
                         feature_groups=self.feature_groups, interactions=interactions,
                         n_jobs=self.n_jobs, verbose=self.verbose)
        if self.feature_names is not None:
            if len(self.feature_names) != result.values.shape[1]:
                raise ValueError(f"feature_names has {len(self.feature_names)} names for "
                                 f"{result.values.shape[1]} explained columns.")
            result.feature_names = np.asarray(self.feature_names, dtype=object)
        return result[0] if one_row else result

    def __repr__(self):
        return (f"TreeExplainer({type(self.model).__name__}, {self.feature_perturbation}, "
                f"{self.ensemble.n_trees} trees, {self.ensemble.n_features} features)")


def _rows(X):
    """``(X as rows, whether X was one 1-D row)``: a 1-D array, list or pandas
    Series is one row, as shap reads it."""
    if _is_pandas(X) or hasattr(X, "shape") and len(X.shape) == 2:
        return X, False
    if hasattr(X, "to_frame") and hasattr(X, "index"):  # a pandas Series: one named row
        return X.to_frame().T.infer_objects(), True
    if hasattr(X, "tocsr"):
        return X, False
    array = np.asarray(X)
    if array.ndim == 1:
        return array.reshape(1, -1), True
    return X, False


def _fitted_objects(model):
    """``((key, object), ...)``: what a refit replaces, a Pipeline's steps' and
    the model's fitted attributes (scikit-learn's, ending in "_"; XGBoost's
    and LightGBM's booster). Compared by identity (:func:`_fitted_state`):
    the explainer holds them, so a new fit's objects cannot take their
    addresses."""
    if _pipeline.is_pipeline(model):
        return tuple(((i, key), value) for i, (_, step) in enumerate(model.steps)
                     for key, value in _fitted_objects(step))
    state = getattr(model, "__dict__", {})
    return tuple((name, value) for name, value in state.items()
                 if name == "_Booster" or name.endswith("_") and not name.startswith("__"))


def _fitted_state(model):
    """``key -> object`` of the model now, for the keys of :func:`_fitted_objects`."""
    if _pipeline.is_pipeline(model):
        steps = [getattr(step, "__dict__", {}) for _, step in model.steps]
        return lambda key: steps[key[0]].get(key[1]) if key[0] < len(steps) else None
    return getattr(model, "__dict__", {}).get
